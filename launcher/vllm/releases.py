"""The release table: which declared internals each supported vLLM release has, read from
its source by ``scan`` and committed as ``releases.json``; and the one rule that says whether
a reading satisfies an entry (the table, the image build and the worker all use it)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from launcher.vllm.internals import DECLARED, Internal
from launcher.vllm.source import Release, params

TABLE = Path(__file__).with_name("releases.json")

Reading = bool | list[str]
"""Absent (False), present (True), or present with its parameter names."""


def read(release: Release, entry: Internal) -> Reading:
    """What ``release`` has of ``entry``, from its source."""
    if entry.kind == "module":
        return release.module(entry.module) is not None
    if entry.kind == "assigned":
        return release.assignment(entry.module, entry.path or "") is not None
    node = release.member(entry.module, entry.path or "")
    if node is None:
        return False
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return list(params(node))
    return True


def unmet(entry: Internal, reading: Reading) -> str | None:
    """Why ``reading`` does not satisfy ``entry`` (None: it does)."""
    if reading is False:
        return "absent"
    if not entry.params or reading is True:
        return None
    have = tuple(reading)
    if entry.exact and have != entry.params:
        return f"signature ({', '.join(have)}), the launcher wraps ({', '.join(entry.params)})"
    if have[: len(entry.params)] != entry.params:
        return f"parameters ({', '.join(have)}), the launcher passes ({', '.join(entry.params)})"
    return None


def live_params(fn: object) -> list[str]:
    """The parameter names of a live function, as ``source.params`` reads them from source."""
    import inspect

    names = []
    for p in inspect.signature(inspect.unwrap(fn)).parameters.values():  # type: ignore[arg-type]
        star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        names.append(star + p.name)
    return names


def fits(entry: Internal, fn: object) -> bool:
    """Whether a live function has the signature ``entry`` declares: a patch wraps only
    what it was written for (a new parameter on ``VllmBackend.__call__`` would break every
    compile through the wrapper)."""
    try:
        return unmet(entry, live_params(fn)) is None
    except (TypeError, ValueError):  # no signature to read: not what the wrapper expects
        return False


def read_all(root: Path) -> dict[str, Reading]:
    release = Release(root)
    return {entry.name: read(release, entry) for entry in DECLARED}


def version_of(root: Path) -> str:
    """The release's version from its ``vllm/_version.py`` (read, not imported)."""
    tree = ast.parse((root / "vllm" / "_version.py").read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value[:1].isdigit()
        ):
            return node.value
    raise ValueError(f"{root}: no version in vllm/_version.py")


def load(path: Path = TABLE) -> dict[str, dict[str, Reading]]:
    """Release -> entry name -> reading."""
    return json.loads(path.read_text())["releases"]


def line_release(version: str) -> str:
    """``0.33.0`` -> ``0.33``: the release as the profile and the capability tables name it."""
    return ".".join(version.split(".")[:2])


def outcome(entry: Internal, readings: dict[str, Reading]) -> str | None:
    """Why ``entry`` is unmet on a release whose readings are ``readings``, counting its
    group (None: met, or another entry of its group is)."""
    why = unmet(entry, readings.get(entry.name, False))
    if why is None or entry.group is None:
        return why
    others = [e for e in DECLARED if e.group == entry.group and e is not entry]
    if any(unmet(e, readings.get(e.name, False)) is None for e in others):
        return None
    return why


def gaps(readings: dict[str, Reading]) -> list[str]:
    """The entries a release lacks with nothing declared to do instead: a ``refuse`` entry
    unmet (its group's others unmet too)."""
    return [
        f"{e.name} ({e.where}): {why}"
        for e in DECLARED
        if e.without.kind == "refuse" and (why := outcome(e, readings)) is not None
    ]
