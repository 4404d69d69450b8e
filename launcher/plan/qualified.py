"""The qualified KV size as the next plan reads it from the calibration store.

``qualify`` writes ``qualified.json`` into the run directory and the store
(``launcher.contract.store``); the next plan of the same deployment pins its KV cache to the
record's blocks (source ``qualified``). The store's one rule decides whether a record may pin
this profile's plan (its fingerprint, cards and software); the planner checks it against the
card too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.contract import qualified as contract
from launcher.contract import store
from launcher.contract.qualified import NAME, SCHEMA, QualifiedRecord
from launcher.plan.calibration import expected
from launcher.plan.planner import Qualified
from launcher.profile.schema import Profile

__all__ = ["NAME", "SCHEMA", "load_qualified", "save_qualified"]


def _warn(message: str) -> None:
    print(f"b12x-launch: warning: {message}", file=sys.stderr)


def save_qualified(
    record: QualifiedRecord | dict[str, Any],
    run_dir: Path | None,
    profile: Profile,
    fingerprint: str,
) -> list[Path]:
    """Write the record into the run directory and the calibration store, atomically; one
    made on ``other_cards`` stays out of the store. A dict (a hand-made record in version 1's
    layout) is read as version 1 is read first."""
    if isinstance(record, dict):
        data = {**record, "schema": contract.SCHEMA_V1, "fingerprint": fingerprint}
        record = contract.upgrade(data, "<qualified record>")
    return store.save_qualified(record, run_dir, profile.runtime.cache_root, profile.hardware.gpu)


def load_qualified(
    profile: Profile,
    fingerprint: str,
    warn: Callable[[str], None] = _warn,
    versions: dict[str, str | None] | None = None,
    driver: str | None = None,
) -> Qualified | None:
    """The qualified KV size for this fingerprint, or None (none, stale or unreadable)."""
    rule = expected(profile, fingerprint, versions, driver)
    record = store.usable_qualified(profile.runtime.cache_root, rule, warn)
    if record is None:
        return None
    return Qualified(record.kv.blocks, record.when[:10])
