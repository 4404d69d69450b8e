"""What the planned worker adds to vLLM's: prewarm -> measure -> size -> record -> watch.

``determine_available_memory`` runs every prewarm provider before vLLM profiles, so
vLLM's own measurement already sees what the prewarm kept; it arms the late-compile counters
when the stage ends (``worker.late``: everything after sizing counts, vLLM's own warmup too),
then returns the plan's budget instead of vLLM's figure (see ``launcher.runtime.budget``). After
the KV cache exists it logs planned against actual and writes the rank's measurement record.

The hooks here only order the parts: the stage (``stage``), the activation probe
(``activation``), the reserves (``headroom``, ``sizing``), device snapshots (``snapshot``),
the record (``recording``) and serving's steps (``steps``), over one ``WorkerState``.
"""

from __future__ import annotations

from typing import Any

from launcher.contract.names import ComponentName as Name
from launcher.contract.record import KvActual
from launcher.runtime import phases
from launcher.runtime.budget import BudgetError, beside_kv, kv_budget
from launcher.runtime.worker import activation, compiled, headroom, hold, recording, sizing, stage
from launcher.runtime.worker.log import delta, logger, say
from launcher.runtime.worker.runplan import NO_PLAN, RunPlan
from launcher.runtime.worker.serving import ServingWatch
from launcher.runtime.worker.snapshot import take
from launcher.runtime.worker.state import WorkerState
from launcher.runtime.worker.steps import watch_steps
from launcher.units import format_size


class PlannedMixin:
    """Mixed in before vLLM's worker class; ``platform`` is ``cuda`` or ``cpu``."""

    platform = "cuda"
    _state: WorkerState | None = None
    """This boot's state (None: no plan, and this is vLLM's worker)."""

    def determine_available_memory(self) -> int:
        run = RunPlan.from_env()
        if run is None:
            logger.warning(NO_PLAN)
            return super().determine_available_memory()  # type: ignore[misc]
        rank = self.rank  # type: ignore[attr-defined]
        self._state = state = WorkerState.start(run, rank, self.platform)
        say(f"rank {rank}: planned worker {type(self).__name__}, plan {run.fingerprint}")
        compiled.watch_dir(rank)  # before the prewarm's first forward compiles the model
        before = take(state.device)
        ran = stage.prewarm(self, run, rank, state.device)
        phases.begin("memory profile")
        stage.barrier()
        runner = getattr(self, "model_runner", None)
        # One sizing moment: the counters arm as the stage ends, before vLLM's own profile.
        linked = compiled.link_dir(runner, rank)  # before the cache oracle's baseline: not late
        state.late.arm(ran.providers, run.run_dir)
        with state.activation.probe(runner, state.device, state.vllm):
            vllm_available = super().determine_available_memory()  # type: ignore[misc]
        if not linked:  # no stage compiled the model: vLLM's profile did, before sizing
            compiled.link_dir(runner, rank)
        after = take(state.device)
        state.activation.stage_peak = ran.serving_peak
        kept = headroom.decide(run, rank, ran.measurement, ran.served)
        inputs = sizing.budget_inputs(state, self, vllm_available, kept, after)
        try:
            budget = kv_budget(inputs)
        except BudgetError as exc:
            raise RuntimeError(f"b12x-launch rank {rank}: {exc}") from None
        planned = inputs.planned_kv
        say(
            f"rank {rank}: KV budget {budget.describe()}; vLLM alone would offer "
            f"{format_size(vllm_available)}; the plan said {format_size(planned)} "
            f"({delta(budget.bytes, planned)}); jit_headroom from {kept.source}"
        )
        environment = recording.environment(run, self.platform, state.device)
        peak = activation.peak_activation(
            state.activation, self.platform, self, state.vllm, run, rank
        )
        measured = recording.measured(
            run, rank, before, after, ran.measurement, kept, state.activation.recordable(peak)
        )
        state.record = recording.sized_record(
            run, rank, environment, measured, int(vllm_available), budget, ran
        )
        state.late.attach(state.record, state.save)
        state.save()
        state.late.sized()
        return budget.bytes

    def initialize_from_config(self, kv_cache_config: Any) -> None:
        state = self._state
        before = take(state.device) if state is not None else None
        super().initialize_from_config(kv_cache_config)  # type: ignore[misc]
        if state is None:
            return
        after = take(state.device)
        if before and after:
            state.beside_kv = beside_kv(after.taken_since(before), kv_cache_config)
        if after:  # what vLLM built beside the KV cache is inside a measured graph reserve
            free = after.free + state.beside_kv
            state.sized.forecast_lowest_free = hold.forecast(state.sized.budget, free)
        blocks = int(state.vllm.read("kv.num_blocks", kv_cache_config))  # refused if missing
        kv = state.run.kv
        tokens = blocks * kv.block_tokens * kv.dcp
        state.sized.kv = KvActual(blocks=blocks, tokens=tokens, planned_tokens=kv.tokens)
        say(
            f"rank {state.rank}: KV cache {blocks:,} blocks = {tokens:,} tokens; plan "
            f"{kv.blocks_per_rank:,} blocks = {kv.tokens:,} tokens "
            f"({delta(tokens, kv.tokens)})"
        )
        state.save()
        if state.run.canary:  # vLLM's warmup window
            state.late.canary(state.run.run_dir, state.device)

    def compile_or_warm_up_model(self) -> Any:
        state = self._state
        before = take(state.device) if state is not None else None
        result = super().compile_or_warm_up_model()  # type: ignore[misc]
        if state is None:
            return result
        after = take(state.device)
        if before and after:
            _warmed(state, max(0, after.taken_since(before)), after.free, after.torch_reserved)
        runner = getattr(self, "model_runner", None)
        state.late.serving(runner)
        watch_steps(runner, state.device, state.sized, state.serving, state.save, state.rank)
        compiled.say_key(state.run, state.rank)
        strict = " (strict from now)" if state.late.strict else ""
        say(f"rank {state.rank}: vLLM's warmup done; serving's window{strict}")
        if state.run.canary:  # the serving window, vLLM's monitor on
            state.late.canary(state.run.run_dir, state.device)
        state.save()
        return result


def _warmed(state: WorkerState, warmup: int, free: int, reserved: int) -> None:
    """What vLLM's warmup took (graphs, with what it allocated beside the KV cache), the
    activations netted against what it left cached, and serving's watch from here."""
    record, margin = state.sized, state.run.safety_margin
    record.measured[Name.CUDAGRAPH_POOL] = warmup + state.beside_kv
    if state.beside_kv:
        record.measured_why[Name.CUDAGRAPH_POOL] = (
            f"graphs and warmup {format_size(warmup)} + {format_size(state.beside_kv)} vLLM "
            "allocated beside the KV cache when it built it"
        )
    record.free_after_warmup = free
    record.reserved_after_warmup = reserved
    activation.net(record, state.activation, state.device)
    figure = record.measured.get(Name.ACTIVATION_PEAK, 0)
    state.serving = ServingWatch(record, margin, figure)
    _hold(state, free)
    if free < margin:
        logger.warning(
            "b12x-launch rank %d: %s free after vLLM's warmup, below the safety margin %s",
            state.rank,
            format_size(free),
            format_size(margin),
        )


def _hold(state: WorkerState, free: int) -> None:
    """Hold the activation and transient reserves in torch's cache (``hold``), and start
    reading what serving draws on them: torch's allocated peak from here."""
    record, device = state.sized, state.device
    if device is None:
        return
    import torch

    size = hold.hold_size(record.budget, free)
    try:
        record.held_for_serving = hold.hold(device, size.bytes)
        if state.serving is not None:
            state.serving.hold_stream = hold.stream(device)
    except Exception as exc:  # never the boot (issue 39): the reserves stay free instead
        logger.warning(
            "b12x-launch rank %d: could not hold the serving reserves: %s: %s",
            state.rank,
            type(exc).__name__,
            exc,
        )
    torch.cuda.reset_peak_memory_stats(device)
    record.allocated_after_warmup = torch.cuda.memory_allocated(device)
    held = record.held_for_serving
    if held is None:
        return
    capped = f" (of {format_size(size.reserves)}: {size.capped})" if size.capped else ""
    said = record.forecast_lowest_free
    say(
        f"rank {state.rank}: holding {format_size(held)}{capped} in torch's cache for the "
        f"activation and transient reserves; {format_size(free - held)} free from here"
        + (f" (forecast at sizing {format_size(said)})" if said is not None else "")
    )
