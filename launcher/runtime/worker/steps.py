"""Serving's steps, read at their edges: free device memory before and after each one
charges a step that compiled late with what it kept outside torch's allocator (modules,
local memory: the census's cost), and keeps serving's low-water for the next plan
(``ServingWatch``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.contract import census
from launcher.contract.record import RankRecord
from launcher.runtime.worker.log import logger
from launcher.runtime.worker.serving import ServingWatch
from launcher.units import format_size
from launcher.vllm.internals import read_on


def watch_steps(
    runner: Any,
    device: int | None,
    record: RankRecord,
    serving: ServingWatch | None,
    save: Callable[[], None],
    rank: int,
) -> None:
    """Wrap the runner's ``execute_model`` (nothing without a runner or a device)."""
    step = read_on("runner.execute_model", runner)
    if step is None or device is None:
        return
    import torch

    late = record.late_compiles

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen = len(late)
        first = serving is not None and serving.hold_stream is not None  # after the hold
        if first and serving.off_stream(torch.cuda.current_stream(device).cuda_stream):
            release(rank, "serving steps on another stream than the hold's")
        free0, _ = torch.cuda.mem_get_info(device)
        reserved0 = torch.cuda.memory_reserved(device)
        try:
            return step(*args, **kwargs)
        finally:
            changed = len(late) > seen  # a late compile: its cost needs the step finished
            if changed:
                torch.cuda.synchronize(device)
            free1, _ = torch.cuda.mem_get_info(device)
            reserved1 = torch.cuda.memory_reserved(device)
            if changed:
                grown = reserved1 - reserved0
                cost = min(max(0, int(free0 - free1 - grown)), census.COST_MAX)
                late[seen] = late[seen].model_copy(update={"cost_bytes": cost})
            if serving is not None:  # the reading at the lower free, and torch's then
                low = (free0, reserved0) if free0 < free1 else (free1, reserved1)
                peak = torch.cuda.max_memory_allocated(device)
                changed = serving_seen(serving, *low, peak, rank) or changed
                if serving.release_due():
                    release(rank, "below the safety margin")
            if changed:
                save()

    runner.execute_model = watched


def serving_seen(
    serving: ServingWatch, free: int, reserved: int, peak: int | None, rank: int
) -> bool:
    """One low-water reading (with torch's allocated peak); a watch that fails is stopped
    with a warning, never the step it reads around (issue 39: never a crash)."""
    if serving.stopped:
        return False
    try:
        changed = serving.seen(free, reserved, peak)
    except Exception as exc:
        serving.stopped = True
        logger.warning(
            "b12x-launch rank %d: serving's free-memory watch stopped: %s: %s",
            rank,
            type(exc).__name__,
            exc,
        )
        return False
    if serving.below_margin():
        logger.warning(
            "b12x-launch rank %d: %s free while serving, below the safety margin %s (%s); "
            "the next plan reserves what serving took",
            rank,
            format_size(free),
            format_size(serving.margin),
            serving.split(),
        )
    return changed


def release(rank: int, why: str) -> None:
    """The held reserves' unused blocks go back to the card: below the safety margin, free
    memory serves what is not torch's (a library's workspace, another process) better than
    torch's cache does. A failure is said, never raised into the step."""
    import torch

    try:
        torch.cuda.empty_cache()
    except Exception as exc:
        logger.warning("b12x-launch rank %d: could not release the held reserves: %s", rank, exc)
        return
    logger.warning(
        "b12x-launch rank %d: %s: the held serving reserves' unused blocks went back to the card",
        rank,
        why,
    )
