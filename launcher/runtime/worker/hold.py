"""The serving reserves held in torch's cache from vLLM's warmup on.

The budget keeps the activation and transient reserves out of the KV cache, and serving draws
on them. Left free, they read as free memory that serving may or may not take: on the H100
(vLLM 0.26, the same seeded users' traffic) the MoE tier model took 0.58 to 0.72 GiB of its
1.67 GiB across boots, so no forecast made before serving could name the lowest free memory to
128 MiB, and another process on the card could take them. Held as cached blocks of torch's
default pool on vLLM's stream, serving's activations and transients come out of them: the card
reads the forecast from ready on, and what serving drew is torch's allocated peak.

The hold drains the pool's free blocks first, so what it adds is new segments of exactly the
reserves (what vLLM's warmup left cached is counted in the graph pool already, and stays).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.contract.names import ComponentName as Name
from launcher.units import MiB

if TYPE_CHECKING:  # the hold itself needs torch only: tests/gpu/test_hold.py runs it bare
    from launcher.contract.record import Budget

SMALL = 1 * MiB
"""Torch's small-pool limit: a free block this size or smaller serves no large request."""

HELD = (Name.ACTIVATION_PEAK, Name.TRANSIENTS)
"""The reserves serving draws on past vLLM's warmup, which the worker holds."""

KEPT = (Name.JIT_HEADROOM, Name.SAFETY_MARGIN)
"""What the budget keeps free after sizing, which the hold never takes."""


@dataclass(frozen=True)
class HoldSize:
    """How much to hold, and why it is less than the reserves where it is."""

    bytes: int
    reserves: int
    capped: str = ""
    """Why the hold is smaller than the reserves ("" when it is not)."""


def hold_size(budget: Budget, free: int) -> HoldSize:
    """The reserves to hold, never into the JIT headroom or the safety margin the budget kept:
    where vLLM's warmup took more than its reserve (a first boot's graph estimate runs short),
    the hold is that much smaller, and the record says so."""
    reserved = budget.reserved
    want = sum(reserved.get(n, 0) for n in HELD)
    room = max(0, free - sum(reserved.get(n, 0) for n in KEPT))
    if want <= room:
        return HoldSize(want, want)
    why = "vLLM's warmup took more than its reserve"
    return HoldSize(room, want, why)


def forecast(budget: Budget, free: int) -> int:
    """The lowest free memory a boot forecasts from ``free``, the device's free memory once the
    KV cache exists with what vLLM built beside it given back (a calibrated graph reserve holds
    that; a first boot's, vLLM's estimate, does not): what vLLM's warmup and serving draw on
    comes off, the JIT headroom and the margin stay."""
    drawn = (Name.CUDAGRAPH_POOL, *HELD)
    return free - sum(budget.reserved.get(n, 0) for n in drawn)


def stream(device: int) -> int:
    """The current stream's handle: the hold's blocks serve requests on it only, so the
    worker checks serving's first step runs on it."""
    import torch

    return int(torch.cuda.current_stream(device).cuda_stream)


def hold(device: int, size: int) -> int:
    """Hold ``size`` bytes in torch's default pool on the current stream (vLLM's) as new
    cached segments; the bytes torch's segments grew by. Nothing held on an allocation
    failure (the caller says so)."""
    import torch

    before = torch.cuda.memory_reserved(device)
    taken = [torch.empty(b, dtype=torch.uint8, device=device) for b in _free_blocks(device)]
    try:
        if size > 0:
            taken.append(torch.empty(size, dtype=torch.uint8, device=device))
        return torch.cuda.memory_reserved(device) - before
    finally:
        del taken


def _free_blocks(device: int) -> list[int]:
    """Sizes of the free large blocks of torch's default pool on the current stream: the
    drain that makes the hold's request a new segment."""
    import torch

    on = stream(device)
    sizes = []
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") != device or seg.get("stream") != on:
            continue
        if tuple(seg.get("segment_pool_id") or (0, 0)) != (0, 0):
            continue  # a CUDA graph's private pool: eager requests never come from it
        if seg.get("segment_type") != "large":
            continue  # a free small-pool segment (2 MiB) would be asked of the large pool,
            # which makes a new 20 MiB segment for it: 22 MiB past the hold on the H100
        sizes += [
            int(b["size"])
            for b in seg.get("blocks", ())
            if b.get("state") == "inactive" and int(b["size"]) > SMALL
        ]
    return sizes
