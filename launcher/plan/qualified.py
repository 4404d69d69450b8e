"""The qualified KV size, kept in the run directory and the calibration store.

``<cache_root>/calibration/<fingerprint>/qualified.json`` beside the workers' rank
records; the next plan of the same deployment pins its KV cache to the record's blocks
(source ``qualified <date>``). A record from another GPU kind or software stack is
stale and skipped, a corrupt one skipped with a warning, as with measurements.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher import atomic, bounded
from launcher.plan.calibration import machine_stack, other_cards, stale_in, store_dir
from launcher.plan.planner import Qualified
from launcher.profile.schema import Profile

SCHEMA = "b12x-launch/qualified/1"
NAME = "qualified.json"


def _warn(message: str) -> None:
    print(f"b12x-launch: warning: {message}", file=sys.stderr)


def save_qualified(
    record: dict[str, Any], run_dir: Path | None, profile: Profile, fingerprint: str
) -> list[Path]:
    """Write the record into the run directory and the calibration store, atomically; one
    made on ``other_cards`` stays out of the store, as a worker's record does."""
    record = {"schema": SCHEMA, "fingerprint": fingerprint, **record}
    paths = []
    if run_dir is not None:
        paths.append(atomic.write_json(run_dir / NAME, record))
    if not other_cards((record.get("environment") or {}).get("gpu_kind"), profile):
        paths.append(atomic.write_json(store_dir(profile, fingerprint) / NAME, record))
    return paths


RECORD_MAX = 1 << 20
"""The largest qualified record read (real ones are a few KiB)."""
BLOCKS_MAX = 1 << 40
"""More KV blocks than any card holds; the plan checks the record against its own card too."""


def read_qualified(
    path: Path, warn: Callable[[str], None] = _warn, fingerprint: str | None = None
) -> dict[str, Any] | None:
    """The record at ``path``, checked, or None with a warning naming the file: unreadable,
    not a regular file of at most ``RECORD_MAX`` bytes, another schema, another plan's
    (``fingerprint``: the plan it is read for), or fields of the wrong type or range. The
    store is shared (a ``/cache`` volume): what a worker did not write there is not used."""
    if path.is_symlink():
        warn(f"ignoring {path}: a symbolic link, which qualify never writes")
        return None
    try:
        data = bounded.read_json(path, RECORD_MAX, "qualified record")
    except (OSError, ValueError) as exc:
        warn(f"ignoring unreadable qualified record {path}: {exc}")
        return None
    kv = data.get("kv") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(kv, dict):
        warn(f"ignoring {path}: not a b12x-launch qualified record")
        return None
    blocks = kv.get("blocks")
    if not isinstance(blocks, int) or isinstance(blocks, bool) or not 0 < blocks <= BLOCKS_MAX:
        shown = blocks if isinstance(blocks, int | float) else type(blocks).__name__
        warn(f"ignoring {path}: malformed block count {shown}")
        return None
    env = data.get("environment", {})
    if not isinstance(env, dict) or not all(
        isinstance(v, str | int | float | type(None)) for v in env.values()
    ):
        warn(f"ignoring {path}: malformed environment (a mapping of names to versions)")
        return None
    if not isinstance(data.get("when", ""), str):
        warn(f"ignoring {path}: malformed date")
        return None
    if fingerprint is not None and data.get("fingerprint") != fingerprint:
        warn(f"ignoring {path}: a record of another plan, not of plan {fingerprint}")
        return None
    return data


def load_qualified(
    profile: Profile,
    fingerprint: str,
    warn: Callable[[str], None] = _warn,
    versions: dict[str, str | None] | None = None,
    driver: str | None = None,
) -> Qualified | None:
    """The qualified KV size for this fingerprint, or None (none, stale or unreadable)."""
    path = store_dir(profile, fingerprint) / NAME
    if not path.is_file():
        return None
    data = read_qualified(path, warn, fingerprint)
    if data is None:
        return None
    env = data.get("environment") or {}
    if env.get("gpu_kind") not in (None, profile.hardware.gpu):
        return None
    stale = stale_in(env, machine_stack(versions, driver))
    if stale:
        warn(f"ignoring {path}: qualified with other versions of {', '.join(stale)}")
        return None
    return Qualified(int(data["kv"]["blocks"]), str(data.get("when", "?"))[:10])
