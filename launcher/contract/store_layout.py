"""Where the calibration store keeps one plan's records (``<cache_root>/calibration/<fp>/``).

Apart from ``launcher.contract.store`` (the records' rule, their models) so a plan can ask
whether anything is stored for it without loading the record models: a dry run with an
empty store reads none (``benchmarks/dry_run.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

CALIBRATION = "calibration"


def folder(cache_root: str | Path, fingerprint: str) -> Path:
    """The store's folder for one plan."""
    return Path(os.path.expanduser(cache_root)) / CALIBRATION / fingerprint


def rank_file(rank: int) -> str:
    return f"rank{rank}.json"
