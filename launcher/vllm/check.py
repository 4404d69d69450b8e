"""Resolve every declared internal on the installed vLLM before the weights load.

The installed release's source is read as ``scan`` reads a wheel (the same rule, so the
worker, the image build and the table agree). For a deployment, each declared internal it
needs (``needed_by`` among what it runs; a ``fork_only`` one on a fork line only) that the release
lacks is either a named refusal (a ``refuse`` entry; under ``prewarm.strict_jit`` also a
``skip`` entry the release table does not record as absent there, whose late compiles would
be fatal anyway) or a named downgrade, logged and recorded.

``python -m launcher.vllm.check``: the image build's step; fails on an internal the release
lacks with nothing declared to do instead, and says each downgrade it would cost.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from launcher.vllm.internals import DECLARED
from launcher.vllm.releases import Reading, gaps, load, outcome, read_all, version_of


@dataclass(frozen=True)
class Missing:
    """A declared internal the release lacks; the rank record keeps it as the contract's
    ``MissingInternal`` (same fields: ``runtime/worker/checked.py`` converts)."""

    name: str
    where: str
    needed_by: str
    without: Literal["refuse", "skip", "fallback"]
    says: str
    why: str
    expected: bool


@dataclass(frozen=True)
class Found:
    """The check of one release for one deployment (the contract's ``InternalsCheck``)."""

    release: str
    missing: tuple[Missing, ...]


class Checked(Protocol):
    """What the lines below read: a :class:`Found`, or the rank record's ``InternalsCheck``
    (``report`` shows a recorded check with the words the worker logged)."""

    @property
    def release(self) -> str: ...

    @property
    def missing(self) -> Sequence[Missing]: ...


class InternalsRefused(RuntimeError):
    """A declared internal this deployment needs is missing: the boot stops before the
    weights load, naming it."""


def installed_root() -> Path:
    """The directory holding the installed ``vllm/`` (found without importing it)."""
    from launcher.installed import package_root

    root = package_root("vllm")
    if root is None:
        raise InternalsRefused("no vLLM is installed: pip install vllm (0.26 to 0.33)")
    return root.parent


def needs(platform: str, providers: Iterable[str]) -> frozenset[str]:
    """What a deployment runs, in ``needed_by``'s words."""
    return frozenset({"worker", *(("cuda",) if platform == "cuda" else ()), *providers})


def decide(readings: dict[str, Reading], release: str, needed: frozenset[str], fork: bool) -> Found:
    """The declared internals ``needed`` that ``readings`` lack, each with what it costs."""
    known = load().get(release, {})
    missing = tuple(
        Missing(
            name=e.name,
            where=e.where,
            needed_by=e.needed_by,
            without=e.without.kind,
            says=e.without.says,
            why=why,
            expected=outcome(e, known) is not None if known else False,
        )
        for e in DECLARED
        if e.needed_by in needed
        and (fork or not e.fork_only)
        and (why := outcome(e, readings)) is not None
    )
    return Found(release=release, missing=missing)


def refusals(check: Found, strict: bool) -> list[Missing]:
    """What stops the boot: ``refuse`` entries; under strict JIT also ``skip`` ones the
    release table does not record as absent on this release (a rename, or a release no one
    has scanned: its late compiles would be fatal)."""
    return [
        m
        for m in check.missing
        if m.without == "refuse" or (strict and m.without == "skip" and not m.expected)
    ]


def downgrade_lines(check: Checked) -> list[str]:
    """``keys: not derived on this release: X missing``, one a downgrade."""
    return [
        f"{m.needed_by}: not {'done' if m.without == 'skip' else 'read'} on vLLM "
        f"{check.release}: {m.name} missing ({m.where}: {m.why}"
        f"{', as the release table says' if m.expected else ''}); {m.says}"
        for m in check.missing
        if m.without != "refuse"
    ]


def refusal_message(check: Found, stops: list[Missing], strict: bool) -> str:
    parts = [
        f"vLLM {check.release} lacks {m.name} ({m.where}: {m.why}), which {m.needed_by} "
        f"needs: {m.says}"
        for m in stops
    ]
    fix = (
        "set prewarm.strict_jit: false to boot with the downgrade, or install a supported vLLM"
        if strict and all(m.without == "skip" for m in stops)
        else "install a vLLM the launcher supports (launcher/vllm/releases.json lists them)"
    )
    return "; ".join(parts) + f". Fix: {fix}"


def on_table(release: str, fork: bool, platform: str, providers: Iterable[str]) -> list[str]:
    """The downgrades the release table says a deployment gets on upstream ``release``
    (``0.26``), for the plan to print: nothing for a fork line (no table of its source) or
    a release the table lacks (the worker's check says it at boot)."""
    from launcher.vllm.releases import line_release

    rows = {line_release(v): (v, row) for v, row in load().items()}
    if fork or release not in rows:
        return []
    version, row = rows[release]
    found = decide(row, version, needs(platform, providers), fork)
    by_part: dict[str, list[str]] = {}
    for m in found.missing:
        by_part.setdefault(m.needed_by, []).append(m.name)
    return [
        f"{part}: not all done on vLLM {version}: {', '.join(names)} missing (the release "
        "table; each one's cost is logged at boot and in the rank record)"
        for part, names in by_part.items()
    ]


def before_weights(
    platform: str, providers: Iterable[str], fork: bool, strict: bool, root: Path | None = None
) -> Found:
    """The worker's first step: the check for this deployment on the installed vLLM; raises
    ``InternalsRefused`` (named) where it cannot boot as planned."""
    root = root or installed_root()
    check = decide(read_all(root), version_of(root), needs(platform, providers), fork)
    stops = refusals(check, strict)
    if stops:
        raise InternalsRefused(refusal_message(check, stops, strict))
    return check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.vllm.check", description=__doc__)
    parser.add_argument("--source", type=Path, help="directory holding vllm/ (default: installed)")
    parser.add_argument("--fork", action="store_true", help="also list the fork lines' internals")
    args = parser.parse_args(argv)
    try:
        root = args.source or installed_root()
    except InternalsRefused as exc:
        print(f"b12x-launch: {exc}", file=sys.stderr)
        return 1
    readings, release = read_all(root), version_of(root)
    check = decide(readings, release, needs("cuda", ("b12x", "vllm", "triton", "keys")), args.fork)
    for line in downgrade_lines(check):
        print(f"b12x-launch: {line}")
    missing = gaps(readings)
    if missing:
        print(f"b12x-launch: vLLM {release} lacks what the launcher needs:", file=sys.stderr)
        for gap in missing:
            print(f"  {gap}", file=sys.stderr)
        return 1
    print(f"b12x-launch: vLLM {release}: every declared internal the launcher needs is there")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
