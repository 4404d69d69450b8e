"""Load a profile: resolve ``extends:``, deep-merge, apply ``--set``, validate once.

Merge once, validate once: every issue in the result carries its file, line and key.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from launcher.errors import Issue, ProfileError
from launcher.profile.rules import check_rules
from launcher.profile.schema import Profile
from launcher.profile.yamlsource import (
    KeyPath,
    Location,
    SourceMap,
    ValueIssues,
    dotted,
    read_value,
    read_yaml,
)
from launcher.secrets import is_secret, secret_in_data, secret_value
from launcher.secrets import names_a_secret as secret_in

MAX_EXTENDS_DEPTH = 16
SECTIONS = ("extends", *Profile.model_fields)
"""A profile's top-level keys: a file whose first line is none of them is not read as one."""


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile and where each of its keys came from."""

    profile: Profile
    source: SourceMap
    path: str
    chain: tuple[str, ...]
    """The files merged, parent first."""

    def issue(self, key: str, message: str) -> Issue:
        """An issue about ``key`` (dotted) located at the line that set it."""
        return self.source.issue(_split(key), message)


def load_profile(
    path: str | os.PathLike, overrides: tuple[str, ...] | list[str] = (), *, force: bool = False
) -> LoadedProfile:
    """Read, merge, override and validate a profile.

    Args:
        path: the profile YAML.
        overrides: ``KEY=VALUE`` strings (value parsed as YAML) or ``~KEY`` to delete.
        force: let through what ``--force`` may (a planned flag in ``vllm.extra_args``).

    Raises:
        ProfileError: with every issue found, each located.
    """
    return read_profile(path).load(overrides, force=force)


@dataclass(frozen=True)
class ProfileDocument:
    """A profile file with its ``extends:`` chain merged, not yet overridden or validated:
    read once, it loads under many sets of overrides (``b12x-launch sweep``)."""

    path: str
    data: dict
    lines: dict
    chain: tuple[str, ...]

    def load(
        self, overrides: tuple[str, ...] | list[str] = (), *, force: bool = False
    ) -> LoadedProfile:
        """Apply ``overrides`` and validate, as ``load_profile`` does.

        Raises:
            ProfileError: with every issue found, each located.
        """
        return _validated(self, overrides, force)

    def merged(self, overrides: tuple[str, ...] | list[str] = ()) -> dict:
        """The data with ``overrides`` applied, not validated (what ``emit`` ships as one
        file, ``extends:`` resolved)."""
        return _apply_overrides(self.data, overrides, SourceMap(dict(self.lines)))


def read_profile(path: str | os.PathLike) -> ProfileDocument:
    """Read ``path`` and its parents (``extends:``) and merge them.

    Raises:
        ProfileError: a file is missing, unreadable or not YAML, or ``extends:`` is wrong.
    """
    data, lines, chain = _resolve(Path(path), ())
    return ProfileDocument(str(path), data, lines, chain)


def _validated(doc: ProfileDocument, overrides, force: bool = False) -> LoadedProfile:
    path, display, chain = doc.path, _display(Path(doc.path)), doc.chain
    source = SourceMap(dict(doc.lines), default_file=display)
    data = _apply_overrides(doc.data, overrides, source)
    if not isinstance(data, dict):
        raise ProfileError(
            [Issue("a profile is a mapping of sections (hardware:, model:, ...)", file=display)]
        )
    name = data.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):  # `--set name=` too
        data["name"] = Path(path).stem
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(_validation_issues(exc, data, source)) from None
    issues = [source.issue(_split(key), message) for key, message in check_rules(profile, force)]
    if issues:
        raise ProfileError(issues)
    return LoadedProfile(profile, source, display, chain)


def _display(path: Path) -> str:
    """The path as the user would recognise it (as typed, normalised)."""
    return os.path.normpath(path)


def _split(key: str) -> KeyPath:
    """``a.b.c`` -> ("a", "b", "c"); digit parts stay keys (``SourceMap`` tries both)."""
    return tuple(key.split(".")) if key else ()


def _resolve(
    path: Path, seen: tuple[Path, ...], via: Location | None = None
) -> tuple[dict, dict, tuple[str, ...]]:
    """Read ``path`` and its parents; ``via`` is the ``extends:`` line that named it."""
    display = _display(path)
    try:
        real = path.resolve()
    except (RuntimeError, OSError) as exc:  # a link that loops (Python 3.11 raises RuntimeError)
        where = via or Location(display)
        raise ProfileError(
            [
                Issue(
                    f"cannot resolve the path: {exc}",
                    "extends" if via else "",
                    where.file,
                    where.line,
                )
            ]
        ) from None
    if real in seen:
        cycle = " -> ".join(os.path.relpath(p) for p in (*seen, real))
        where = via or Location(display)
        raise ProfileError(
            [
                Issue(
                    f"extends cycle: {cycle}; remove one of these extends",
                    "extends",
                    where.file,
                    where.line,
                )
            ]
        )
    if len(seen) >= MAX_EXTENDS_DEPTH:
        raise ProfileError(
            [Issue(f"extends chain deeper than {MAX_EXTENDS_DEPTH}", "extends", display)]
        )
    try:
        data, lines = read_yaml(path, display, SECTIONS)
    except ProfileError as exc:
        if via is None:
            raise
        # A parent that cannot be read: say which extends: line led there.
        named = f" (named by {via.file}:{via.line} extends)" if via.line else ""
        raise ProfileError([replace(i, message=i.message + named) for i in exc.issues]) from None
    if not isinstance(data, dict):
        raise ProfileError(
            [
                Issue(
                    "a profile is a mapping of sections (hardware:, model:, ...)",
                    file=display,
                    line=1,
                )
            ]
        )
    parent = data.pop("extends", None)
    if parent is None:
        return data, lines, (display,)
    where = lines.get(("extends",), Location(display))
    if not isinstance(parent, str) or not parent:
        raise ProfileError(
            [Issue("extends takes one file name", "extends", where.file, where.line)]
        )
    parent_path = (path.parent / parent) if not Path(parent).is_absolute() else Path(parent)
    if not parent_path.is_file():
        # a directory is named at the extends: line too, not as a file that cannot be read
        what = "is a directory, not a profile" if parent_path.is_dir() else "not found"
        raise ProfileError(
            [
                Issue(
                    f"parent profile {parent!r} {what} (looked at {_display(parent_path)})",
                    "extends",
                    where.file,
                    where.line,
                )
            ]
        )
    base, base_lines, chain = _resolve(parent_path, (*seen, real), where)
    lines.pop(("extends",), None)
    merged_lines = {k: v for k, v in base_lines.items() if not _overridden(k, data)}
    merged_lines.update(lines)
    return deep_merge(base, data), merged_lines, (*chain, display)


def _overridden(key: KeyPath, child: dict) -> bool:
    """Whether the child replaced this key of the parent (lists and scalars replace)."""
    node: Any = child
    for part in key:
        if isinstance(node, dict) and part in node:
            node = node[part]
            if not isinstance(node, dict):
                return True
        else:
            return False
    return False


def deep_merge(base: Any, over: Any) -> Any:
    """Maps merge key by key; anything else (lists included) replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return copy.deepcopy(over)


def _apply_overrides(data: dict, overrides, source: SourceMap) -> dict:
    """Apply each ``KEY=VALUE`` or ``~KEY``; an item may be ``(text, flag)`` to name the flag
    the user typed in its errors (``--vary``), ``--set`` otherwise."""
    data = copy.deepcopy(data)
    for item in overrides:
        raw, flag = item if isinstance(item, tuple) else (item, "--set")
        delete = raw.startswith("~")
        key, sep, value = raw[1:].partition("=") if delete else raw.partition("=")
        key = key.strip()
        if not key or (not delete and not sep) or (delete and sep):
            raise ProfileError(
                [Issue(f"{flag} takes KEY=VALUE or ~KEY, got {_shown(raw)}", file=flag)]
            )
        path = _split(key)
        if delete:
            parent = _dig(data, path[:-1], create=False)
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            _relocate(source, path, flag)
            continue
        try:
            parsed = read_value(value) if value.strip() else ""
        except ValueIssues as exc:
            raise ProfileError(
                [Issue(i.message, dotted((*path, *_split(i.key))), flag) for i in exc.issues]
            ) from None
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            raise ProfileError([Issue(_not_yaml(exc, key, flag, value), key, flag)]) from None
        # A key the files do not have (`--set servng.x=1`) is the flag's: errors about it
        # name the flag, not the profile.
        created = _absent_prefix(data, path)
        parent = _dig(data, path[:-1], create=True)
        if not isinstance(parent, dict):
            raise ProfileError([Issue(f"{dotted(path[:-1])} is not a mapping", key, flag)])
        parent[path[-1]] = parsed
        _relocate(source, created, flag)
    return data


def _shown(raw: str) -> str:
    """``raw`` for an error, less what follows its first word when any word of it names a
    secret (``HF_TOKEN:hf_...``, ``env={HF_TOKEN hf_...}``)."""
    head = re.match(r"[^=:\s]*", raw).group(0)
    words = [w for w in re.split(r"[^A-Za-z0-9_.-]+", raw) if w]
    if head != raw and (any(is_secret(w) for w in words) or secret_value(raw)):
        return f"{head!r} and a value not shown (it names a secret)"
    return repr(raw)


def names_a_secret(override: str) -> bool:
    """Whether a ``--set``/``--vary`` item sets a secret: its key names one (``env.HF_TOKEN``)
    or its value holds a key that does (``env={HF_TOKEN: ...}``); a value that cannot be read
    counts as secret when any word of it names one. Such an item is never printed or written
    in an argument list."""
    raw = override.lstrip("~")
    key, _, value = raw.partition("=")
    try:
        data = read_value(value) if value.strip() else None
    except (yaml.YAMLError, ValueError, RecursionError):
        data = None
        if any(is_secret(w) for w in re.split(r"[^A-Za-z0-9_.-]+", value) if w):
            return True
        if secret_value(value):
            return True
    return secret_in(data, key.strip())


def _not_yaml(exc: Exception, key: str, flag: str, value: str = "") -> str:
    """The YAML error of a ``--set`` value: PyYAML's problem and where, never its snippet of the
    value (which may be a secret: ``env={HF_TOKEN: "hf_...``)."""
    problem, where = "not YAML", ""
    if isinstance(exc, yaml.reader.ReaderError):  # a control character, by its code only
        problem = f"character #x{exc.character:04x} is not allowed ({exc.reason})"
        where = f" at position {exc.position + 1}"
    elif isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or problem
    elif isinstance(exc, RecursionError):
        problem = "nested too deeply"
    secret = names_a_secret(f"{key}={value}")
    hidden = " (the value names a secret and is not shown)" if secret else ""
    fix = "pass the variable from the environment" if secret else "quote the value"
    return f"value is not YAML: {problem}{where}{hidden}; {fix}, or {flag} '{key}=\"...\"'"


def _absent_prefix(data: Any, path: KeyPath) -> KeyPath:
    """The shortest head of ``path`` that ``data`` does not hold (``path`` when all of it is)."""
    node = data
    for n, part in enumerate(path):
        if not isinstance(node, dict) or part not in node:
            return path[: n + 1]
        node = node[part]
    return path


def _relocate(source: SourceMap, path: KeyPath, flag: str = "--set") -> None:
    """``path`` and everything under it now comes from ``flag`` (``--set``, ``--vary``)."""
    for key in [k for k in source.locations if k[: len(path)] == path]:
        del source.locations[key]
    source.locations[path] = Location(flag)


def _dig(data: Any, path: KeyPath, create: bool) -> Any:
    node = data
    for part in path:
        if not isinstance(node, dict):
            return None
        if part not in node or node[part] is None:
            if not create:
                return None
            node[part] = {}
        node = node[part]
    return node


def _validation_issues(exc: ValidationError, data: dict, source: SourceMap) -> list[Issue]:
    """One issue per key; the alternatives of a union (``auto`` or a list) joined by "or"."""
    by_path: dict[KeyPath, list[str]] = {}
    for err in exc.errors(include_url=False):
        path = _data_path(err["loc"], data)
        message = _message(err, path)
        if message not in by_path.setdefault(path, []):
            by_path[path].append(message)
    return [source.issue(path, " or ".join(msgs)) for path, msgs in by_path.items()]


def _data_path(loc: tuple, data: Any) -> KeyPath:
    """The part of pydantic's error location that names real keys (drops union tags)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            node = node[part]
            # YAML reads `0:` as an int key; the source map knows the key as written
            path.append(str(part) if in_dict else part)
        elif isinstance(node, dict) and isinstance(part, str) and part in _field_names(path):
            path.append(part)  # a required key that is missing
            break
    return tuple(path)


def _field_names(path: list) -> list[str]:
    model: type[BaseModel] | None = Profile
    for part in path:
        field = model.model_fields.get(part) if model else None
        ann = field.annotation if field else None
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return list(model.model_fields) if model else []


def _message(err: dict, path: KeyPath) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        key = path[-1] if path else err["loc"][-1]
        known = _field_names(list(path[:-1]))
        import difflib  # only for a key that is wrong: not on every load

        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required key is missing"
    value = err.get("input")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if any(is_secret(str(part)) for part in path) or secret_in_data(value):
        return f"{msg} (the value is a secret and is not shown)"
    shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return f"{msg} (got {shown})"
