"""YAML with line numbers: every key path of a document maps to the line that set it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from launcher import bounded
from launcher.errors import Issue, ProfileError

KeyPath = tuple[str | int, ...]

# libyaml's parser when PyYAML was built with it (the wheels are): the same safe constructor
# and resolver, nodes with the same line marks, about ten times faster than the pure-Python
# scanner. It words some errors differently, so a document it refuses is read again by the
# pure-Python loader, whose messages the error reports (and their tests) are written against.
# libyaml's composer recurses on the C stack with no depth limit (100,000 nested brackets
# crash the interpreter; 20,000 do not), so only a document too short to nest that deep
# goes through it: every shipped profile is under 2 KiB. A document nested deeper than
# FAST_MAX_DEPTH is read again by the pure-Python loader too, which refuses some of those
# ("nested too deeply", where Python's own recursion limit falls) and libyaml does not.
FAST_MAX_CHARS = 16384
FAST_MAX_DEPTH = 32
FAST_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Numbers as YAML 1.2 reads them. PyYAML follows YAML 1.1, where `010000` is the octal 4096 and
# `1:30` the base-60 number 90: a port, a context length or an environment value changed
# without a word. The profile's loaders read decimal, 0x, 0o and 0b integers and plain floats;
# the YAML 1.1 forms whose meaning differs (a leading zero, base 60) are tagged AMBIGUOUS and
# refused where they stand, with the spelling that means each reading.
AMBIGUOUS = "tag:b12x-launch,2026:yaml11-number"
_INT = re.compile(
    r"^(?:[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?0o[0-7_]+|[-+]?0b[01_]+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_YAML11_ONLY = re.compile(r"^(?:[-+]?0[0-9_]+|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?)$")
_NUMBER_START = list("-+0123456789.")


def _numbers_as_yaml12(base: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """``base`` with the number resolvers above instead of YAML 1.1's."""
    resolvers = {
        first: [(tag, rx) for tag, rx in pairs if not tag.endswith((":int", ":float"))]
        for first, pairs in base.yaml_implicit_resolvers.items()
    }
    loader = type(f"Profile{base.__name__}", (base,), {"yaml_implicit_resolvers": resolvers})
    # Checked before the others: the first match wins, and `010` must not read as an int.
    loader.add_implicit_resolver(AMBIGUOUS, _YAML11_ONLY, _NUMBER_START)
    loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, _NUMBER_START)
    loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, _NUMBER_START)
    loader.add_constructor(AMBIGUOUS, yaml.SafeLoader.construct_yaml_str)
    return loader


PROFILE_LOADER = _numbers_as_yaml12(yaml.SafeLoader)
FAST_PROFILE_LOADER = _numbers_as_yaml12(FAST_SAFE_LOADER)


def ambiguous_number(text: str) -> str:
    """Why ``text`` (a YAML 1.1 number whose meaning YAML 1.2 changed) is refused, and the
    spellings that say each reading."""
    plain = text.replace("_", "")
    sign = "-" if plain.startswith("-") else ""
    digits = plain.lstrip("+-")
    quoted = f'quote it ("{text}") for the text'
    if ":" in digits:
        whole, _, fraction = digits.partition(".")
        total = 0
        for part in whole.split(":"):
            total = total * 60 + int(part)
        shown = f"{sign}{total}" + (f".{fraction}" if fraction else "")
        return (
            f"{text} is the base-60 number {shown} in YAML 1.1 (what PyYAML reads): write "
            f"{shown} for the number, or {quoted}"
        )
    decimal = f"{sign}{int(digits)}"
    if all(c in "01234567" for c in digits):
        return (
            f"{text} is the octal number {sign}{int(digits, 8)} in YAML 1.1 (what PyYAML reads) "
            f"and {decimal} in YAML 1.2: write {decimal}, {sign}0o{digits.lstrip('0') or '0'} "
            f"for octal, or {quoted}"
        )
    return (
        f"{text} has a leading zero, which YAML 1.1 and 1.2 read differently: write {decimal}, "
        f"or {quoted}"
    )


def load_plain(text: str) -> Any:
    """``yaml.safe_load`` through libyaml where it is available: for the shipped catalog
    files, which the tests read, not for a user's input."""
    return yaml.load(text, Loader=FAST_SAFE_LOADER)  # a safe loader: plain types only


@dataclass(frozen=True)
class Location:
    file: str
    line: int | None = None


@dataclass
class SourceMap:
    """Where each key path was last set (file and line), for error messages."""

    locations: dict[KeyPath, Location] = field(default_factory=dict)
    default_file: str = "<profile>"

    def locate(self, path: KeyPath) -> Location:
        """The location of ``path`` or of its nearest ancestor that has one.

        A dotted key cannot tell a list index from a key made of digits (``env.123``), so
        both readings are tried.
        """
        for n in range(len(path), -1, -1):
            head = tuple(path[:n])
            for candidate in (head, _as_indices(head)):
                loc = self.locations.get(candidate)
                if loc is not None:
                    return loc
        return Location(self.default_file)

    def issue(self, path: KeyPath, message: str) -> Issue:
        loc = self.locate(path)
        return Issue(message, key=dotted(path), file=loc.file, line=loc.line)


def _as_indices(path: KeyPath) -> KeyPath:
    return tuple(int(p) if isinstance(p, str) and p.isdigit() else p for p in path)


def dotted(path: KeyPath) -> str:
    """``serving.cudagraph_capture_sizes[2]``; an empty key shows as ``''``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if not text.strip() or not text.isprintable() or text != text.strip():
                text = repr(text)  # '', ' ', '\xa0', 'a\nb': show what is really there
            out += f".{text}" if out else text
    return out


def _not_found(path: Path) -> str:
    """``file not found``, and where a bare name (``glm52``) may be meant."""
    message = "file not found"
    if len(path.parts) > 1 or path.suffix not in ("", ".yaml", ".yml"):
        return message
    name = path.name if path.suffix else f"{path.name}.yaml"
    near = Path("profiles") / name
    if near.is_file():
        return f"{message}; did you mean {near}?"
    return (
        f"{message}; a profile is a file path: the shipped ones are under profiles/ in the "
        f"b12x-launch checkout (profiles/{name}), and in the image a bare name is looked up "
        "in /profiles and /opt/b12x-launch/profiles"
    )


PROFILE_MAX = 1 << 20
"""The largest profile read (1 MiB; the shipped ones are under 3 KiB)."""
NOT_A_PROFILE = "not a b12x-launch profile"
"""How a file that is not one is refused: by its first line, none of its contents shown."""


def read_yaml(
    path: Path, display: str, sections: Collection[str] = ()
) -> tuple[Any, dict[KeyPath, Location]]:
    """Read one YAML file safely; return its data and the line of every key.

    Only YAML's plain types are built: a tag that would construct an object is an
    error, as is a key given twice in one mapping. With ``sections`` (a profile's top-level
    keys), a file whose first line is none of them (nor close to one: a typo is reported by
    the schema, with a "did you mean") is refused before it is parsed, without a word of it
    shown: ``extends: /etc/shadow`` must not print the file's lines as unknown keys.
    """
    try:
        text = bounded.read_text(path, PROFILE_MAX, "profile")
    except FileNotFoundError:
        raise ProfileError([Issue(_not_found(path), file=display)]) from None
    except IsADirectoryError:
        raise ProfileError(
            [Issue("cannot read: a directory, not a profile", file=display)]
        ) from None
    except bounded.TooLarge as exc:
        why = str(exc).split(": ", 1)[-1]
        raise ProfileError([Issue(f"{NOT_A_PROFILE}: {why}", file=display)]) from None
    except UnicodeDecodeError:
        message = f"{NOT_A_PROFILE}: not UTF-8 text"
        raise ProfileError([Issue(message, file=display, line=1)]) from None
    except OSError as exc:
        raise ProfileError([Issue(f"cannot read: {exc.strerror or exc}", file=display)]) from None
    if sections:
        line, listed = _first_line_not_a_section(text, sections)
        if line is not None:
            message = (
                "a profile is a mapping of sections (hardware:, model:, ...), this file is a "
                "list; nothing of it is shown"
                if listed
                else f"{NOT_A_PROFILE}: this line is not one of a profile's sections "
                f"({', '.join(sections)}); nothing of the file is shown"
            )
            raise ProfileError([Issue(message, file=display, line=line)])
    if FAST_SAFE_LOADER is not yaml.SafeLoader and len(text) <= FAST_MAX_CHARS:
        try:
            return _read(text, display, FAST_PROFILE_LOADER, max_depth=FAST_MAX_DEPTH)
        except Exception:  # reported below, in the pure-Python loader's words
            pass
    try:
        return _read(text, display, PROFILE_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if "could not determine a constructor" in problem:
            problem = (
                f"{problem.split(';')[0].strip()}: tags that construct objects are not allowed; "
                "use plain YAML values"
            )
        line = mark.line + 1 if mark else None
        raise ProfileError([Issue(f"malformed YAML: {problem}", file=display, line=line)]) from None
    except yaml.YAMLError as exc:
        raise ProfileError([Issue(f"malformed YAML: {exc}", file=display)]) from None
    except RecursionError:
        raise ProfileError([Issue("malformed YAML: nested too deeply", file=display)]) from None
    except ValueError as exc:  # PyYAML converting a value, e.g. an int of 5000 digits
        raise ProfileError([Issue(f"malformed YAML: {exc}", file=display)]) from None


_FIRST_KEY = re.compile(r"""^(?:---\s+)?(["']?)([A-Za-z_][\w-]*)\1\s*:(?:\s|$)""")


def _first_line_not_a_section(text: str, sections: Collection[str]) -> tuple[int | None, bool]:
    """The number of the first line that carries content when it does not start a profile's
    section (a mapping key among ``sections`` or close to one), and whether it starts a list;
    (None, False) when it does, for a file with no content, or one in YAML's flow style."""
    for number, line in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("---") and stripped[3:4] in ("", " ", "\t"):
            rest = stripped[3:].strip()
            if not rest or rest.startswith("#"):  # `--- # the profile`
                continue
        if not stripped or stripped.startswith(("#", "%")) or stripped == "...":
            continue
        if stripped.startswith(("{", "--- {")):
            return None, False
        match = _FIRST_KEY.match(stripped)
        if match and (
            match[2] in sections or difflib.get_close_matches(match[2], sections, 1, 0.75)
        ):
            return None, False
        return number, stripped.startswith(("- ", "[")) or stripped == "-"
    return None, False


class ValueIssues(ValueError):
    """A ``--set``/``--vary`` value that reads, but not as one plain value: each issue's key is
    the path inside the value (``port`` of ``{port: 010}``)."""

    def __init__(self, issues: list[Issue]):
        self.issues = issues
        super().__init__("; ".join(i.message for i in issues))


def read_value(text: str) -> Any:
    """A value given on the command line (``--set KEY=VALUE``, ``--vary``), read as a profile
    file is: plain types only, numbers as YAML 1.2 reads them, no key given twice.

    Raises:
        yaml.YAMLError: not YAML (the caller words it).
        ValueIssues: a YAML 1.1 number, a key that is no string, a key given twice.
    """
    loader = PROFILE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        issues: list[Issue] = []
        _walk(node, (), "", {}, issues, set())
        if issues:
            raise ValueIssues(issues)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read(
    text: str, display: str, loader_class: type[yaml.SafeLoader], max_depth: int | None = None
) -> tuple[Any, dict[KeyPath, Location]]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}
        if max_depth is not None and _depth(node) > max_depth:
            raise RecursionError("nested deeper than the fast path reads")
        lines: dict[KeyPath, Location] = {}
        issues: list[Issue] = []
        _walk(node, (), display, lines, issues, set())
        if issues:
            raise ProfileError(issues)
        return loader.construct_document(node), lines
    finally:
        loader.dispose()


def _depth(root: yaml.Node) -> int:
    """How deep the collections nest under ``root`` (each node counted once: aliases)."""
    deepest, seen, stack = 0, set(), [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        deepest = max(deepest, depth)
        if isinstance(node, yaml.MappingNode):
            stack.extend((child, depth + 1) for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
    return deepest


def _walk(
    node: yaml.Node, path: KeyPath, file: str, lines: dict, issues: list[Issue], seen_nodes: set
) -> None:
    # An alias points at a node already walked: its keys keep their first location, and a
    # recursive alias or an alias bomb costs one visit per node, not one per path.
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                issues.append(
                    Issue(
                        "keys must be plain strings",
                        dotted(path),
                        file,
                        key_node.start_mark.line + 1,
                    )
                )
                continue
            key = key_node.value
            if key == "<<":  # YAML merge keys: fine, the loader resolves them
                continue
            if key_node.tag != "tag:yaml.org,2002:str":  # 0:, null:, true:, 1.5: ...
                issues.append(
                    Issue(
                        f"keys must be strings, this one reads as {key_node.tag.rsplit(':', 1)[-1]}"
                        f'; quote it ("{key}") or fix it',
                        dotted((*path, key)),
                        file,
                        key_node.start_mark.line + 1,
                    )
                )
                continue
            if key in seen:
                issues.append(
                    Issue(
                        "key given twice in the same mapping; keep one",
                        dotted((*path, key)),
                        file,
                        key_node.start_mark.line + 1,
                    )
                )
            seen.add(key)
            lines[(*path, key)] = Location(file, key_node.start_mark.line + 1)
            _walk(value_node, (*path, key), file, lines, issues, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = Location(file, item.start_mark.line + 1)
            _walk(item, (*path, i), file, lines, issues, seen_nodes)
    elif node.tag == AMBIGUOUS:
        issues.append(
            Issue(ambiguous_number(node.value), dotted(path), file, node.start_mark.line + 1)
        )
