"""What a booted row of the GPU tier's matrix must show (``tests/gpu/test_matrix.py``).

Each check returns the problems it found, one line each, and an empty list only when every
reading it needs was taken: a counter that was not running, a record without the figure or a
card the sampler never read is a problem, never a 0 (the tier's own runs once counted a boot
that had not booted, and a counter that was not armed, as "0 late").
"""

from __future__ import annotations

from tests.gpu import vllm_faults
from tests.gpu.boot import BootResult

GIB = 2**30
MONITOR_FLAGS = ("--jit-monitor-mode", "--jit-monitor-verbose")
"""vLLM's JIT monitor logs one line per compile during inference only with both."""


def failure(r: BootResult) -> str | None:
    """Why a boot did not boot and serve, or None. A failure that is vLLM's own named fault
    (``tests.gpu.vllm_faults``, matched line for line in the server's log) is not the row's."""
    if not r.healthy:
        return f"never healthy (exit {r.exit_code})"
    if r.outcome is None:
        return "no workload outcome"
    _vllm, ours = vllm_faults.split(r.outcome.failed, r.log(), r.plan)
    if ours:
        return f"requests failed: {ours[:3]}"
    return None


def _ranks(r: BootResult) -> range:
    return range(len(r.devices))


def late(r: BootResult) -> list[str]:
    """Late compiles of a planned boot by each of the three counters, which must all have run:
    the worker's watchdog (each rank's record, ``late_compiles``), the cache oracle (files in
    the compile caches after each rank's baseline) and vLLM's own monitor (its log lines)."""
    from launcher.runtime.cache_oracle import BASELINE

    out = []
    if r.records and all(rec.get("counters") for rec in r.records.values()):
        # a worker that records its counters: each must have watched every window after the
        # stage (tests/gpu/counters.py), and saw nothing late
        from tests.gpu import counters

        typed = counters.typed(r.records)
        out += counters.unarmed(typed) + counters.late(typed)
    for rank in _ranks(r):
        record = r.records.get(rank)
        if record is None:
            out.append(f"rank {rank}: no record, so no watchdog count")
        elif record.get("late_compiles") is None:
            out.append(f"rank {rank}: its record has no late_compiles (the watchdog did not say)")
        elif found := record["late_compiles"]:
            out.append(f"rank {rank}: {len(found)} late compile(s) by the watchdog: {found[:3]}")
    unarmed = [rank for rank in _ranks(r) if not (r.run_dir / BASELINE.format(rank=rank)).is_file()]
    if unarmed:
        out.append(f"rank(s) {unarmed}: no cache baseline, so the cache oracle was not armed")
    elif r.late_files is None:
        out.append("the cache oracle was not read after the workload: not measured")
    elif r.late_files:
        out.append(f"{len(r.late_files)} file(s) compiled after ready: {r.late_files[:3]}")
    argv = (r.plan.get("vllm") or {}).get("argv") or []
    if missing := [flag for flag in MONITOR_FLAGS if flag not in argv]:
        out.append(f"vLLM's monitor was not on ({', '.join(missing)} not in its command)")
    elif r.monitor_late:
        out.append(f"{len(r.monitor_late)} compile(s) during inference by vLLM's monitor")
    return out


def under_margin(r: BootResult) -> list[str]:
    """Where free memory went below the plan's safety margin, or was not read: after vLLM's
    warmup (each rank's record) and at the lowest under the workload (NVML, each card)."""
    out = []
    for rank in _ranks(r):
        free = (r.records.get(rank) or {}).get("free_after_warmup")
        if free is None:
            out.append(f"rank {rank}: no free memory after vLLM's warmup in its record")
        elif free < r.margin:
            out.append(f"rank {rank}: {free / GIB:.2f} GiB free after vLLM's warmup")
    low = r.outcome.low_free if r.outcome else {}
    for device in r.devices:
        if device not in low:
            out.append(f"GPU {device}: no low-water reading under the workload")
        elif low[device] < r.margin:
            out.append(f"GPU {device}: {low[device] / GIB:.2f} GiB free at the lowest")
    return out


FORECAST = 128 * 2**20
"""Issue 63: the predicted lowest free memory within this of the measured, on every boot."""


def forecast_of(r: BootResult, rank: int) -> tuple[int | None, str]:
    """The lowest free memory predicted for ``rank``, and whose: a calibrated plan's own
    figure (every measurable component an earlier boot's), else the worker's forecast made as
    the KV cache was built, since a first boot's plan is an estimate the worker re-measures."""
    from launcher.contract.plan import RankPlan

    rank_plan = RankPlan.model_validate(r.plan["ranks"][rank])
    if rank_plan.calibrated:
        return rank_plan.predicted_lowest_free, "the calibrated plan's"
    record = r.records.get(rank) or {}
    return record.get("forecast_lowest_free"), "the worker's, at sizing"


def forecast_missed(r: BootResult) -> list[str]:
    """Where NVML's lowest free memory under the workload is more than ``FORECAST`` from the
    forecast (``forecast_of``), or either was not read."""
    out = []
    low = r.outcome.low_free if r.outcome else {}
    for rank, device in enumerate(r.devices):
        predicted, whose = forecast_of(r, rank)
        if predicted is None:
            out.append(f"rank {rank}: no forecast of its lowest free memory ({whose})")
        elif device not in low:
            out.append(f"GPU {device}: no low-water reading under the workload")
        elif abs(low[device] - predicted) > FORECAST:
            out.append(
                f"rank {rank}: {whose} forecast {predicted / 2**20:.0f} MiB free at the lowest, "
                f"measured {low[device] / 2**20:.0f} MiB"
            )
    return out
