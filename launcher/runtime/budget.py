"""The worker's KV budget arithmetic, pure so it is tested without vLLM or a GPU.

On a GPU: what is physically free after vLLM's profile run, minus what the profile run showed
comes back (the activation peak), the CUDA-graph pool, the plan's transients (what request
features allocate after sizing), the JIT headroom and the safety margin. On the CPU backend
vLLM's figure is the ``--kv-cache-memory-bytes`` the launcher passed (the plan's KV plus the
two reserves), so the reserves are subtracted from it. A pinned KV size is returned exactly, or
refused if it no longer fits (on a GPU: if it does not fit the free memory less the safety
margin).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.contract.names import ComponentName as Name
from launcher.contract.record import Budget
from launcher.units import format_size
from launcher.vllm.internals import Missing, resolve


class BudgetError(RuntimeError):
    """The KV size the profile pins does not fit what the worker measured."""


@dataclass(frozen=True)
class BudgetInputs:
    platform: str
    """``cuda`` or ``cpu``."""
    vllm_available: int
    """What vLLM's own ``determine_available_memory`` returned."""
    jit_headroom: int
    safety_margin: int
    planned_kv: int
    pinned_kv: int | None = None
    free_after_profile: int | None = None
    """cudaMemGetInfo free right after vLLM's profile run (GPU only)."""
    peak_activation: int = 0
    cudagraph: int = 0
    transients: int = 0
    """The plan's ``transients``: what request features allocate after sizing, held back on a
    GPU like the activation peak (on the CPU backend the plan's KV figure already leaves it)."""
    calibrated: bool = False
    """Every measurable component of this rank's plan is a measurement of an earlier boot:
    the plan's KV size is then the contract (returned whenever it fits)."""


def kv_budget(i: BudgetInputs) -> Budget:
    """The KV bytes this rank offers vLLM."""
    reserved = {Name.JIT_HEADROOM: i.jit_headroom, Name.SAFETY_MARGIN: i.safety_margin}
    if i.platform == "cpu" or i.free_after_profile is None:
        room = i.vllm_available - i.jit_headroom - i.safety_margin
        basis = "vLLM's figure"
    else:
        graphs = {
            Name.ACTIVATION_PEAK: i.peak_activation,
            Name.CUDAGRAPH_POOL: i.cudagraph,
            Name.TRANSIENTS: i.transients,
        }
        reserved = {**graphs, **reserved}
        room = i.free_after_profile - sum(reserved.values())
        basis = f"measured free {format_size(i.free_after_profile)} after profiling"
    if i.pinned_kv is not None:
        after = "the reserves"
        if i.platform != "cpu" and i.free_after_profile is not None:
            # A pin is sized with the reserves in view: by hand, or by qualify, which measured
            # the worst case with them all in play. Refuse only what cannot be allocated
            # with the safety margin left.
            room = i.free_after_profile - i.safety_margin
            after = "the safety margin"
        if room < i.pinned_kv:
            raise BudgetError(
                f"the pinned KV cache ({format_size(i.pinned_kv)}) no longer fits: {basis} leaves "
                f"{format_size(max(room, 0))} after {after}; lower memory.kv_tokens or "
                "memory.kv_cache_bytes (or run b12x-launch qualify again), or free memory on "
                "the GPU"
            )
        return Budget.of(i.pinned_kv, "pinned by the profile", reserved, room)
    if i.calibrated and i.free_after_profile is not None and 0 < i.planned_kv <= room:
        # What a calibrated dry run printed is what the server gets; a little more room
        # (a warm compile cache, a smaller transient) stays free as margin.
        kept = format_size(room - i.planned_kv)
        calibrated = f"the calibrated plan ({basis}; {kept} more kept free)"
        return Budget.of(i.planned_kv, calibrated, reserved, room)
    if room <= 0:
        raise BudgetError(
            f"no memory left for the KV cache: {basis} leaves {format_size(room)} after the "
            "reserves; the plan was too optimistic (run b12x-launch report on this run)"
        )
    return Budget.of(room, basis, reserved, room)


def beside_kv(taken: int, kv_cache_config: Any) -> int:
    """What vLLM allocated beside the KV cache while building it (``taken``: device free
    before less after): attention metadata buffers and the like, which the budget must
    leave room for on the next boot. vLLM's ``KVCacheConfig`` names each tensor's bytes; a
    release without them (``kv.kv_cache_tensors``, declared: the check before the weights
    said so) measures nothing here."""
    tensors = resolve("kv.kv_cache_tensors", on=kv_cache_config)
    sizes = (
        [] if isinstance(tensors, Missing) else [resolve("kv.tensor_size", on=t) for t in tensors]
    )
    if not sizes or any(isinstance(size, Missing) for size in sizes):
        return 0
    kv = sum(int(size) for size in sizes)
    return max(0, taken - kv) if kv else 0
