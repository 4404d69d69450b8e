"""Measurements kept between runs, read for the plan being made.

A worker writes one record per rank into the run directory and into the calibration store
(``launcher.contract.store``: ``<cache_root>/calibration/<fingerprint>/rank<N>.json``); the next
dry run of the same profile reads them here and labels those numbers ``measured`` with their
date. What may calibrate this profile (its fingerprint, ranks, cards, the card's memory, this
machine's software) is the store's one rule; this module says what this profile expects.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.contract import census, record_v1, store
from launcher.contract.base import validate
from launcher.contract.names import MEASURABLE
from launcher.contract.record import RECORD_SCHEMA, RECORD_SCHEMA_V1, KernelEnumeration, RankRecord
from launcher.contract.store import machine_stack, stack_versions
from launcher.plan.measured import Measured
from launcher.profile.schema import Profile

SCHEMA = RECORD_SCHEMA
__all__ = ["SCHEMA", "load_measured", "save_record", "stack_versions", "store_dir"]


def _warn(message: str) -> None:
    print(f"b12x-launch: warning: {message}", file=sys.stderr)


def store_dir(profile: Profile, fingerprint: str) -> Path:
    return store.folder(profile.runtime.cache_root, fingerprint)


def other_cards(kind: str | None, profile: Profile) -> bool:
    """Whether cards of ``kind`` are another kind than the profile names (``--force``)."""
    return store.other_cards(kind, profile.hardware.gpu)


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


def expected(
    profile: Profile,
    fingerprint: str,
    versions: dict[str, str | None] | None = None,
    driver: str | None = None,
) -> store.Expected:
    """What a record in the store must be to calibrate ``profile``'s plan ``fingerprint``
    (``versions``, default the installed packages, and ``driver``, when a GPU is visible:
    what this machine can tell about its stack)."""
    return store.Expected(
        fingerprint=fingerprint,
        gpu_kind=profile.hardware.gpu,
        ranks=profile.hardware.count * profile.hardware.nodes,
        ceiling=card_ceiling(profile),
        stack=machine_stack(versions, driver),
    )


def load_measured(
    profile: Profile,
    fingerprint: str,
    warn: Callable[[str], None] = _warn,
    versions: dict[str, str | None] | None = None,
    driver: str | None = None,
) -> dict[int, Measured]:
    """The newest usable record of each rank for this fingerprint, as the planner reads it.
    Nothing is looked up unless records exist."""
    if not store_dir(profile, fingerprint).is_dir():
        return {}
    rule = expected(profile, fingerprint, versions, driver)
    records = store.usable_records(profile.runtime.cache_root, rule, warn)
    return {rank: measured(record) for rank, record in records.items()}


def measured(record: RankRecord) -> Measured:
    """One record's figures for the planner: the measurable components and the census."""
    figures = {k: v for k, v in record.measured.items() if k in MEASURABLE}
    learned = census.merge(record.learned, record.late_compiles)
    why = {k: v for k, v in record.measured_why.items() if k in figures}
    dip = record.serving_dip()
    return Measured(figures, record.when[:10], tuple(learned), why, max(0, dip[0]) if dip else None)


def last_enumeration(
    profile: Profile, fingerprint: str, rank: int = 0, warn: Callable[[str], None] = _warn
) -> tuple[KernelEnumeration, ...]:
    """The key enumeration the newest record of ``rank`` holds (``prewarm --list``)."""
    record = store.newest_record(profile.runtime.cache_root, fingerprint, rank, warn)
    return tuple(record.enumeration()) if record is not None else ()


def save_record(
    record: RankRecord | dict[str, Any], run_dir: Path | None, profile: Profile
) -> list[Path]:
    """Write a rank's record into the run directory and the calibration store. A worker
    passes its ``RankRecord``; a dict (a hand-made record, in version 1's layout: the tests'
    and the tools') is read as version 1 is read first. A record made on ``other_cards``
    stays out of the store."""
    if isinstance(record, dict):
        data = record_v1.upgrade({"schema": RECORD_SCHEMA_V1, **record}, "<record>")
        record = validate(RankRecord, data, "<record>", "measurement record")
    return store.save_record(record, run_dir, profile.runtime.cache_root, profile.hardware.gpu)
