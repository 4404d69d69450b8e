"""A record's late-compile counters in words, for ``report RUN_DIR``: which ran over which
windows after sizing, and the files that appeared in the compile caches in each, grouped by the
kernel each was built for. A window a counter did not watch reads "not measured", never 0."""

from __future__ import annotations

from collections import Counter as Tally
from typing import get_args

from launcher.contract.census import Window
from launcher.contract.record import RankRecord

LATE: tuple[Window, ...] = tuple(w for w in get_args(Window) if w != "profile")
"""The windows after sizing: vLLM's warmup and serving (``profile`` comes before sizing)."""
SHOWN = 3
"""Kernels named per window; the rest are counted."""


def counter_line(record: RankRecord) -> str:
    """``counters: name (windows), ...; name not armed: why`` ("" for a record from before the
    counters were recorded: none of its counts is a measurement)."""
    if not record.counters:
        return ""
    parts = [
        f"{c.name} ({', '.join(c.windows)})" if c.armed else f"{c.name} not armed: {c.why or '?'}"
        for c in record.counters
    ]
    return "counters: " + "; ".join(parts)


def late_file_lines(record: RankRecord) -> list[str]:
    """One line per late window: the cache oracle's new files and whom they were built for."""
    oracle = record.counter("cache_oracle")
    if oracle is None or not oracle.armed:
        why = f" ({oracle.why})" if oracle is not None and oracle.why else ""
        return [f"late cache files: not measured, the cache oracle did not run{why}"]
    out = []
    for window in LATE:
        if record.late_by("cache_oracle", window) is None:  # the oracle did not watch it
            out.append(f"late cache files in {window}: not measured")
            continue
        files = [f for f in record.cache_files if f.window == window]
        if not files:
            out.append(f"late cache files in {window}: 0")
            continue
        owners = Tally(f.kernel or "no kernel named" for f in files).most_common()
        named = ", ".join(f"{n} for {k}" for k, n in owners[:SHOWN])
        more = f", {len(owners) - SHOWN} more kernels" if len(owners) > SHOWN else ""
        out.append(f"late cache files in {window}: {len(files)} ({named}{more})")
    return out
