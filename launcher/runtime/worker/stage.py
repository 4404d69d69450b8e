"""The prewarm stage inside vLLM's worker, before vLLM profiles: every provider through the
one loop (``prewarm.flow``), timed, logged and, on a GPU, measured; then every rank waits for
the others."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from launcher.contract import store
from launcher.contract.record import HeldKernel, Measurement, PrewarmOutcome
from launcher.runtime import phases
from launcher.runtime.prewarm import (
    PrewarmContext,
    PrewarmResult,
    Provider,
    flow,
    load,
    run_after_forward,
)
from launcher.runtime.prewarm.diagnostics import compile_times, thread_samples
from launcher.runtime.prewarm.providers import early_keys
from launcher.runtime.prewarm.providers.keys import ranges_of
from launcher.runtime.worker.log import logger, say, warn
from launcher.runtime.worker.outcomes import outcome, stage_times
from launcher.runtime.worker.runplan import RunPlan
from launcher.units import format_size
from launcher.vllm.internals import read_on


@dataclass(frozen=True)
class Stage:
    """What the stage ran and measured."""

    results: list[PrewarmResult] = field(default_factory=list)
    measurement: Measurement | None = None
    """The stage's device memory (None: no device, or no provider listed)."""
    providers: list[tuple[Provider, PrewarmContext]] = field(default_factory=list)
    """Each provider that ran, with its context: the late-compile counters freeze them."""

    @property
    def served(self) -> bool:
        """Whether the stage ran the serving path on a scratch KV cache."""
        return any(r.scratch for r in self.results)

    @property
    def serving_peak(self) -> int:
        """What the scratch stage's served waves took above what they left."""
        return max((r.serving_peak for r in self.results), default=0)

    def outcomes(self) -> list[PrewarmOutcome]:
        """Each provider's result as the record keeps it."""
        return [outcome(r) for r in self.results]

    def seconds(self) -> dict[str, float]:
        return {r.provider: round(r.seconds, 2) for r in self.results}


def prewarm(worker: Any, run: RunPlan, rank: int, device: int | None) -> Stage:
    """Run the deployment's providers on ``worker`` (vLLM's, its weights loaded)."""
    deployment = run.deployment  # resolved by the launcher, read from the run file
    if not deployment.prewarm:
        return Stage()
    ctx = PrewarmContext(
        deployment,
        run.facts,
        rank,
        f"cuda:{device}" if device is not None else "cpu",
        read_on("worker.model_runner", worker),
        log=say,
        worker=worker,
        learned=tuple(run.rank(rank).learned),
        replay=replay(run, rank),
    )
    providers: list[tuple[Provider, PrewarmContext]] = []
    results: list[PrewarmResult] = []
    names = list(deployment.prewarm)

    def run_all() -> None:
        if ctx.profile.prewarm.early_keys and "keys" in names:  # before the scratch stage
            ctx.early = early_keys.EarlyKeys(ranges_of(ctx))
        timed = ctx.profile.prewarm.compile_times  # hooks off before vLLM's own steps
        with compile_times.timed() if timed else contextlib.nullcontext() as compiles:
            try:
                with vllm_config_context(worker):
                    run_providers()
            finally:
                if ctx.early is not None:  # no compile thread outlives the stage
                    ctx.early.close()
        if compiles is not None:
            say(f"rank {rank}: {compiles.describe()}")
            if compiles.samples is not None:
                say(f"rank {rank}: {compiles.samples.describe()}")

    def step(provider: Provider, index: int, count: int) -> PrewarmResult:
        name = provider.name
        phases.part(f"prewarm {name}", index, count)
        providers.append((provider, ctx))
        thread_samples.mark(f"provider {name}")
        start = time.perf_counter()
        result = provider.run(ctx)
        result.seconds = result.seconds or time.perf_counter() - start
        points = "; ".join(e.line() for e in outcome(result).entry_points)
        say(
            f"rank {rank}: prewarm {name}: {result.compiled} compiled, "
            f"{result.warmed} warmed in {result.seconds:.1f}s"
            + (f"; entry points: {points}" if points else "")
            + (f"; {result.skipped}" if result.skipped else "")
        )
        return result

    def run_providers() -> None:
        results.extend(flow.run([load(name) for name in names], ctx, step))
        run_after_forward(ctx)  # no scratch forward ran: what waited for one runs now
        say(f"rank {rank}: prewarm took {stage_times(results)}")

    if device is None:
        run_all()
        return Stage(results, None, providers)
    from launcher.gpu.measure import measure

    # No Triton hook before sizing (prewarm.compile_times adds the timer's, off after
    # the prewarm): the prewarm counts compiles by reading Triton's
    # caches (jit_watch.loaded); the watchdog's hooks go in after vLLM's own warmup.
    _, measurement = measure(run_all, device)
    say(
        f"rank {rank}: prewarm retained {format_size(measurement.retained_bytes)}, "
        f"transient peak {format_size(measurement.transient_peak_bytes)} "
        f"(torch reserved {format_size(measurement.torch_reserved_delta)})"
    )
    return Stage(results, measurement, providers)


def replay(run: RunPlan, rank: int) -> tuple[HeldKernel, ...]:
    """The baked boot's keys when a cache artifact restored this deployment whole (the
    launcher says so in the run file); else none, and the stage serves every wave."""
    artifact = run.file.artifact
    if artifact is None or not artifact.warm:
        return ()
    record = store.newest_record(run.cache_root, run.fingerprint, rank, warn)
    keys = tuple(record.held()) if record is not None else ()
    say(
        f"rank {rank}: warm boot from cache artifact {artifact.artifact_id}: "
        + (f"replaying {sum(len(k.keys) for k in keys)} keys of {len(keys)} kernels"
           if keys else "its record holds no keys to replay; the waves run")
    )  # fmt: skip
    return keys


def vllm_config_context(worker: Any) -> contextlib.AbstractContextManager[Any]:
    """vLLM's config context, as its own warmups run in (some read it globally)."""
    config = read_on("worker.vllm_config", worker)
    try:
        from vllm.config import set_current_vllm_config
    except ImportError:
        return contextlib.nullcontext()
    return set_current_vllm_config(config) if config is not None else contextlib.nullcontext()


def barrier() -> None:
    """Wait for every rank's prewarm on vLLM's world group, CPU side (gloo).

    The default process group is NCCL and otherwise unused: its first collective
    would build one more communicator (device buffers nobody planned) just before
    vLLM measures memory.
    """
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        from vllm.distributed.parallel_state import get_world_group

        dist.barrier(group=get_world_group().cpu_group)
    except Exception as exc:  # a failed barrier must not hide the real error later
        logger.warning("b12x-launch: barrier after prewarm failed: %s", exc)
