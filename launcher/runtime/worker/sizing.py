"""What the worker hands ``kv_budget``: vLLM's figure, what it measured after vLLM's profile,
and each reserve, from an earlier boot's measurement, vLLM's estimate or the plan."""

from __future__ import annotations

from typing import Any

from launcher.contract.names import ComponentName as Name
from launcher.runtime.budget import BudgetInputs
from launcher.runtime.worker.activation import peak_activation
from launcher.runtime.worker.headroom import Headroom
from launcher.runtime.worker.readings import Readings
from launcher.runtime.worker.runplan import RunPlan
from launcher.runtime.worker.snapshot import DeviceSnapshot
from launcher.runtime.worker.state import WorkerState
from launcher.vllm.internals import Missing


def budget_inputs(
    state: WorkerState,
    worker: Any,
    vllm_available: int,
    headroom: Headroom,
    after: DeviceSnapshot | None,
) -> BudgetInputs:
    run, rank = state.run, state.rank
    pinned = run.component(rank, Name.KV_CACHE) if run.pinned else None
    return BudgetInputs(
        platform=state.platform,
        vllm_available=int(vllm_available),
        jit_headroom=headroom.bytes,
        safety_margin=run.safety_margin,
        planned_kv=run.component(rank, Name.KV_CACHE),
        pinned_kv=pinned,
        free_after_profile=after.free if after else None,
        peak_activation=activation_reserve(state, worker),
        cudagraph=cudagraph_reserve(run, rank, state.platform, worker, state.vllm),
        transients=run.component(rank, Name.TRANSIENTS),
        calibrated=run.rank(rank).calibrated,
    )


def activation_reserve(state: WorkerState, worker: Any) -> int:
    """An earlier boot's net activation peak (``activation.net``), else this boot's."""
    measured = state.run.measured(state.rank, Name.ACTIVATION_PEAK)
    if measured is not None:
        return measured
    return peak_activation(
        state.activation, state.platform, worker, state.vllm, state.run, state.rank
    )


def cudagraph_reserve(run: RunPlan, rank: int, platform: str, worker: Any, vllm: Readings) -> int:
    """The pool an earlier boot measured, else vLLM's own estimate, else the plan's."""
    measured = run.measured(rank, Name.CUDAGRAPH_POOL)
    planned = run.component(rank, Name.CUDAGRAPH_POOL)
    if measured is not None:
        return measured
    if platform != "cuda":  # vLLM's CPU worker has no estimate; its budget takes none
        return planned
    estimate = vllm.read("worker.cudagraph_memory_estimate", worker)
    # 0: vLLM did not estimate (its estimate switched off); Missing: the declared fallback
    return planned if isinstance(estimate, Missing) or not estimate else int(estimate)
