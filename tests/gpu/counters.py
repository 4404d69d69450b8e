"""What the GPU tier asks of a boot's late-compile counters, over its typed records and its log.

Pure (no GPU): the unit tier runs these over records it builds, so a check that cannot fail is
caught on a CPU.
"""

from __future__ import annotations

from launcher.contract.census import CANARY_PREFIX
from launcher.contract.record import CounterName, RankRecord

LATE = ("warmup", "serving")
"""The windows after sizing: each held to 0 late compiles."""
WATCHED: tuple[CounterName, ...] = ("triton_hooks", "cache_oracle")
"""The counters every planned boot arms from the stage's end (b12x's report only where the b12x
provider runs; vLLM's monitor from serving, checked in the log)."""
MONITOR_LINE = "compilation during inference"
"""What vLLM's JIT monitor logs for a compile (``--jit-monitor-verbose``: every one)."""


def typed(records: dict[int, dict]) -> dict[int, RankRecord]:
    return {rank: RankRecord.model_validate(rec) for rank, rec in records.items()}


def unarmed(records: dict[int, RankRecord], monitor: bool = True) -> list[str]:
    """Each counter that did not watch a window it should have: a boot with one fails."""
    out = []
    for rank, rec in records.items():
        if not rec.counters:
            out.append(f"rank {rank}: no counters recorded (a worker from before them?)")
            continue
        for name in WATCHED:
            c = rec.counter(name)
            windows = c.windows if c and c.armed else []
            missing = [w for w in ("profile", *LATE) if w not in windows]
            if missing:
                why = c.why if c else "not recorded"
                out.append(f"rank {rank}: {name} did not watch {missing} ({why})")
        m = rec.counter("vllm_monitor")
        if monitor and not (m and m.armed and "serving" in m.windows):
            out.append(f"rank {rank}: vLLM's monitor was off ({m.why if m else 'not recorded'})")
    return out


def late(records: dict[int, RankRecord], canary: bool = False) -> list[str]:
    """Every late compile or cache file each armed counter saw after sizing, canaries left out
    unless ``canary``; an unarmed counter's window is itself a finding, never a 0.

    A canary's cache file is one named for it, or one the worker recorded as built for it
    (``CacheFile.kernel``: the launcher module its new signature built, H100, 2026-12-06, one in
    ``warmup``); a launcher module beside no compile, or beside another, has no kernel in the
    record, is nobody's canary and counts."""
    out = []
    for rank, rec in records.items():
        owner = {f.name: f.kernel for f in rec.cache_files}
        for name in WATCHED:
            for window in LATE:
                seen = rec.late_by(name, window)
                if seen is None:
                    out.append(f"rank {rank}: {name} {window}: not measured")
                    continue
                out += [
                    f"rank {rank}: {name} {window}: {k}"
                    for k in seen
                    if canary or not _canarys(k, owner.get(k, ""))
                ]
    return out


def _canarys(seen: str, owner: str) -> bool:
    """A kernel, or a cache file, that is a canary's: named for one, or built for one."""
    return CANARY_PREFIX in seen or CANARY_PREFIX in owner


def monitor_lines(log: str, canary: bool = False) -> list[str]:
    lines = [ln for ln in log.splitlines() if MONITOR_LINE in ln]
    return lines if canary else [ln for ln in lines if CANARY_PREFIX not in ln]


def canary_missed(records: dict[int, RankRecord], log: str) -> list[str]:
    """What a canary boot's counters failed to report: each canary kernel by Triton's hooks in
    its window, a new cache file in each window, and the serving one in vLLM's monitor."""
    out = []
    for rank, rec in records.items():
        canary = rec.canary
        if canary is None or set(canary.kernels) != set(LATE):
            out.append(f"rank {rank}: canary not compiled in both windows ({canary})")
            continue
        for window, kernel in canary.kernels.items():
            hooks = rec.late_by("triton_hooks", window) or []
            if kernel not in hooks:
                out.append(f"rank {rank}: Triton's hooks missed {kernel} ({window})")
            files = rec.late_by("cache_oracle", window) or []
            if not any(kernel.split(".")[0] in f for f in files):
                out.append(f"rank {rank}: the cache oracle saw no file of {kernel} ({window})")
        serving = canary.kernels["serving"].split(".")[-1]
        if not any(serving in ln for ln in monitor_lines(log, canary=True)):
            out.append(f"rank {rank}: vLLM's monitor did not log {serving}")
    return out
