"""What the planned worker adds to vLLM's: prewarm -> measure -> size -> record -> watch.

``determine_available_memory`` runs every prewarm provider before vLLM profiles, so
vLLM's own measurement already sees what the prewarm kept; it arms the late-compile counters
when the stage ends (``worker.late``: everything after sizing counts, vLLM's own warmup too),
then returns the plan's budget instead of vLLM's figure (see ``launcher.runtime.budget``). After
the KV cache exists it logs planned against actual and writes the rank's measurement record.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import platform
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from launcher.contract import census, store
from launcher.contract.names import ComponentName as Name
from launcher.contract.names import Source
from launcher.contract.record import (
    Activation,
    EntryPoint,
    Environment,
    HeldKernel,
    KvActual,
    PrewarmOutcome,
    RankRecord,
)
from launcher.runtime import phases
from launcher.runtime.budget import BudgetError, BudgetInputs, beside_kv, kv_budget
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
from launcher.runtime.worker.late import LateCounters
from launcher.runtime.worker.readings import Readings
from launcher.runtime.worker.runplan import NO_PLAN, RunPlan
from launcher.runtime.worker.serving import ServingWatch
from launcher.units import format_size
from launcher.vllm.internals import LOGGER, Missing

logger = logging.getLogger(LOGGER)


@dataclass(frozen=True)
class Headroom:
    """The JIT headroom this boot keeps free, and how it was decided."""

    bytes: int
    source: str
    """Where it came from, in words (``profile``, ``measured``, ``plan (estimate)``...)."""
    measured: int | None = None
    """The prewarm's figure this boot records as ``measured.jit_headroom`` (None: not a
    measurement: the profile's size, or the plan's); the census's reserve is never in it."""


class PlannedMixin:
    """Mixed in before vLLM's worker class; ``platform`` is ``cuda`` or ``cpu``."""

    platform = "cuda"
    _run: RunPlan | None = None
    _record: RankRecord
    """This rank's record, built up step by step and written whole by ``_save`` after each."""

    @cached_property
    def _vllm(self) -> Readings:
        """The declared internals this worker reads on vLLM's live objects."""
        return Readings(lambda line: logger.warning("b12x-launch rank %d: %s", self.rank, line))

    # -- sizing ---------------------------------------------------------------------------
    def determine_available_memory(self) -> int:
        run = RunPlan.from_env()
        if run is None:
            logger.warning(NO_PLAN)
            return super().determine_available_memory()
        self._run = run
        rank = self.rank
        profile = run.profile
        _say(f"rank {rank}: planned worker {type(self).__name__}, plan {run.fingerprint}")
        self._watch_compile_dir()  # before the prewarm's first forward compiles the model
        before = self._device_snapshot()
        results, measurement = self._prewarm(run)
        phases.begin("memory profile")
        self._barrier()
        # One sizing moment: the counters arm as the stage ends, before vLLM's own profile.
        self._late = LateCounters(rank, profile.prewarm.strict_jit, _say)
        linked = self._link_compile_dir()  # before the cache oracle's baseline: not late
        self._late.arm(getattr(self, "_providers", []), run.run_dir)
        with self._activation_probe():
            vllm_available = super().determine_available_memory()
        if not linked:  # no stage compiled the model: vLLM's profile did, before sizing
            self._link_compile_dir()
        after = self._device_snapshot()
        served = any(r.scratch for r in results)
        self._stage_peak = max((r.serving_peak for r in results), default=0)
        headroom = self._headroom(run, measurement, served)
        self._after_profile = after
        pinned = run.component(rank, Name.KV_CACHE) if run.pinned else None
        inputs = BudgetInputs(
            platform=self.platform,
            vllm_available=int(vllm_available),
            jit_headroom=headroom.bytes,
            safety_margin=profile.memory.safety_margin,
            planned_kv=run.component(rank, Name.KV_CACHE),
            pinned_kv=pinned,
            free_after_profile=after["free"] if after else None,
            peak_activation=self._activation_reserve(run),
            cudagraph=self._cudagraph_reserve(run),
            transients=run.component(rank, Name.TRANSIENTS),
            calibrated=self._calibrated(run),
        )
        try:
            budget = kv_budget(inputs)
        except BudgetError as exc:
            raise RuntimeError(f"b12x-launch rank {rank}: {exc}") from None
        planned = inputs.planned_kv
        _say(
            f"rank {rank}: KV budget {budget.describe()}; vLLM alone would offer "
            f"{format_size(vllm_available)}; the plan said {format_size(planned)} "
            f"({_delta(budget.bytes, planned)}); jit_headroom from {headroom.source}"
        )
        self._record = RankRecord(
            fingerprint=run.fingerprint,
            rank=rank,
            when=datetime.datetime.now().isoformat(timespec="seconds"),
            environment=self._environment(run),
            plan={k: c.bytes for k, c in run.rank(rank).components.items()},
            measured=self._measured(run, before, after, measurement, headroom),
            vllm_available=int(vllm_available),
            budget=budget,
            prewarm=[outcome(r) for r in results],
            prewarm_seconds={r.provider: round(r.seconds, 2) for r in results},
            prewarm_measurement=measurement,
            # What earlier boots learned stays learned: a boot that replayed it compiles
            # nothing late, and without this the next plan would forget it (seen on the H200:
            # the boot after a clean one compiled the replayed kernel late again).
            learned=list(run.rank(rank).learned),
        )
        self._late.attach(self._record, self._save)
        self._save()
        self._late.sized()
        return budget.bytes

    def initialize_from_config(self, kv_cache_config: Any) -> None:
        before = self._device_snapshot() if self._run is not None else None
        super().initialize_from_config(kv_cache_config)
        if self._run is None:
            return
        after = self._device_snapshot()
        if before and after:
            self._beside_kv = beside_kv(before["free"] - after["free"], kv_cache_config)
        blocks = int(self._vllm.read("kv.num_blocks", kv_cache_config))  # refused if missing
        kv = self._run.kv
        tokens = blocks * kv.block_tokens * kv.dcp
        self._record.kv = KvActual(blocks=blocks, tokens=tokens, planned_tokens=kv.tokens)
        _say(
            f"rank {self.rank}: KV cache {blocks:,} blocks = {tokens:,} tokens; plan "
            f"{kv.blocks_per_rank:,} blocks = {kv.tokens:,} tokens "
            f"({_delta(tokens, kv.tokens)})"
        )
        self._save()
        if self._run.profile.prewarm.canary:  # vLLM's warmup window
            self._late.canary(self._run.run_dir, self._device_index())

    def compile_or_warm_up_model(self) -> Any:
        before = self._device_snapshot()
        result = super().compile_or_warm_up_model()
        if self._run is None:
            return result
        after = self._device_snapshot()
        margin = self._run.profile.memory.safety_margin
        if before and after:
            warmup = max(0, before["free"] - after["free"])
            beside = getattr(self, "_beside_kv", 0)
            self._record.measured[Name.CUDAGRAPH_POOL] = warmup + beside
            if beside:
                self._record.measured_why[Name.CUDAGRAPH_POOL] = (
                    f"graphs and warmup {format_size(warmup)} + {format_size(beside)} vLLM "
                    "allocated beside the KV cache when it built it"
                )
            self._record.free_after_warmup = after["free"]
            self._record.reserved_after_warmup = after["torch_reserved"]
            self._net_activation()
            activation = self._record.measured.get(Name.ACTIVATION_PEAK, 0)
            self._serving = ServingWatch(self._record, margin, activation)
            if after["free"] < margin:
                logger.warning(
                    "b12x-launch rank %d: %s free after vLLM's warmup, below the safety margin %s",
                    self.rank,
                    format_size(after["free"]),
                    format_size(margin),
                )
        self._late.serving(getattr(self, "model_runner", None))
        self._watch_steps()
        self._say_compile_key()
        from launcher.runtime.compile_key import inductor_cache_line

        if said := inductor_cache_line():
            _say(f"rank {self.rank}: {said}")
        strict = " (strict from now)" if self._late.strict else ""
        _say(f"rank {self.rank}: vLLM's warmup done; serving's window{strict}")
        if self._run.profile.prewarm.canary:  # the serving window, vLLM's monitor on
            self._late.canary(self._run.run_dir, self._device_index())
        self._save()
        return result

    # -- parts ----------------------------------------------------------------------------
    def _watch_compile_dir(self) -> None:
        """Where vLLM names its compiled pieces' directory, and where it loads them from
        (``runtime.compile_dir``)."""
        from launcher.runtime import compile_dir

        try:
            compile_dir.install()
        except Exception as exc:  # another vLLM: the pieces stay where vLLM puts them
            logger.warning(
                "b12x-launch rank %d: vLLM's compile directory unwatched: %r", self.rank, exc
            )

    def _link_compile_dir(self) -> bool:
        """A boot that compiled vLLM's model links its pieces where a warm boot will look;
        False when nothing was compiled yet to link."""
        from launcher.runtime import compile_dir

        runner = getattr(self, "model_runner", None)
        if runner is None:
            return False
        try:
            model = runner.get_model() if hasattr(runner, "get_model") else runner.model
            drafter = getattr(getattr(runner, "drafter", None), "model", None)
            parts = compile_dir.compiled_parts(model, drafter)
            if not parts:  # nothing compiled here (loaded, eager, or vLLM's CPU backend)
                return False
            done = compile_dir.link_for_warm_boots(parts)
        except Exception as exc:  # the pieces stay where vLLM put them; the boot goes on
            logger.warning("b12x-launch rank %d: compiled pieces not linked: %r", self.rank, exc)
            return True
        if isinstance(done, str):
            logger.warning("b12x-launch rank %d: compiled pieces not linked: %s", self.rank, done)
        else:
            _say(f"rank {self.rank}: {done.say()}")
        return True

    def _prewarm(self, run: RunPlan) -> tuple[list[PrewarmResult], Any]:
        deployment = run.deployment  # resolved by the launcher, read from the run file
        if not deployment.prewarm:
            return [], None
        facts = run.facts
        device = self._device_index()
        ctx = PrewarmContext(
            deployment,
            facts,
            self.rank,
            f"cuda:{device}" if device is not None else "cpu",
            getattr(self, "model_runner", None),
            log=_say,
            worker=self,
            learned=tuple(run.rank(self.rank).learned),
            replay=self._replay(run),
        )
        self._providers = []
        results: list[PrewarmResult] = []
        names = list(deployment.prewarm)

        def run_all() -> None:
            if ctx.profile.prewarm.early_keys and "keys" in names:  # before the scratch stage
                ctx.early = early_keys.EarlyKeys(ranges_of(ctx))
            timed = ctx.profile.prewarm.compile_times  # hooks off before vLLM's own steps
            with compile_times.timed() if timed else contextlib.nullcontext() as compiles:
                try:
                    with self._vllm_config_context():
                        run_providers()
                finally:
                    if ctx.early is not None:  # no compile thread outlives the stage
                        ctx.early.close()
            if compiles is not None:
                _say(f"rank {self.rank}: {compiles.describe()}")
                if compiles.samples is not None:
                    _say(f"rank {self.rank}: {compiles.samples.describe()}")

        def step(provider: Provider, index: int, count: int) -> PrewarmResult:
            name = provider.name
            phases.part(f"prewarm {name}", index, count)
            self._providers.append((provider, ctx))
            thread_samples.mark(f"provider {name}")
            start = time.perf_counter()
            result = provider.run(ctx)
            result.seconds = result.seconds or time.perf_counter() - start
            points = "; ".join(e.line() for e in outcome(result).entry_points)
            _say(
                f"rank {self.rank}: prewarm {name}: {result.compiled} compiled, "
                f"{result.warmed} warmed in {result.seconds:.1f}s"
                + (f"; entry points: {points}" if points else "")
                + (f"; {result.skipped}" if result.skipped else "")
            )
            return result

        def run_providers() -> None:
            results.extend(flow.run([load(name) for name in names], ctx, step))
            run_after_forward(ctx)  # no scratch forward ran: what waited for one runs now
            _say(f"rank {self.rank}: prewarm took {stage_times(results)}")

        if device is None:
            run_all()
            return results, None
        from launcher.gpu.measure import measure

        # No Triton hook before sizing (prewarm.compile_times adds the timer's, off after
        # the prewarm): the prewarm counts compiles by reading Triton's
        # caches (jit_watch.loaded); the watchdog's hooks go in after vLLM's own warmup.
        _, measurement = measure(run_all, device)
        _say(
            f"rank {self.rank}: prewarm retained {format_size(measurement.retained_bytes)}, "
            f"transient peak {format_size(measurement.transient_peak_bytes)} "
            f"(torch reserved {format_size(measurement.torch_reserved_delta)})"
        )
        return results, measurement

    def _replay(self, run: RunPlan) -> tuple[HeldKernel, ...]:
        """The baked boot's keys when a cache artifact restored this deployment whole (the
        launcher says so in the run file); else none, and the stage serves every wave."""
        artifact = run.file.artifact
        if artifact is None or not artifact.warm:
            return ()
        cache_root = run.profile.runtime.cache_root
        record = store.newest_record(cache_root, run.fingerprint, self.rank, _warn)
        keys = tuple(record.held()) if record is not None else ()
        _say(
            f"rank {self.rank}: warm boot from cache artifact {artifact.artifact_id}: "
            + (f"replaying {sum(len(k.keys) for k in keys)} keys of {len(keys)} kernels"
               if keys else "its record holds no keys to replay; the waves run")
        )  # fmt: skip
        return keys

    def _headroom(self, run: RunPlan, measurement: Any, served: bool) -> Headroom:
        """The JIT headroom to keep free. The plan's component carries its parts (what the
        last boot's prewarm measured, the census's reserve for late compiles it cannot
        replay): this boot measures the first again and keeps the larger, and keeps the
        reserve as planned. ``served``: the prewarm ran the serving path on a scratch KV
        cache."""
        planned = run.rank(self.rank).jit_headroom
        if planned.pinned:  # the profile's size: the plan decided it, it is kept as is
            return Headroom(planned.bytes, "profile")
        if measurement is None:
            return Headroom(planned.bytes, f"plan ({planned.source})")
        from launcher.gpu.measure import jit_headroom

        fresh = jit_headroom(measurement)
        late = planned.late_compiles
        if planned.source is Source.MEASURED and planned.prewarm > fresh:
            # An earlier boot needed more (a cold cache): keep the larger, as the plan does.
            return Headroom(planned.prewarm + late, "measured (calibrated plan)", planned.prewarm)
        if not served and planned.source is Source.ESTIMATE and planned.bytes > fresh:
            # Without a serving pass before sizing, what the first requests load (kernels
            # vLLM's profile run skips, the sampler's top-k/top-p) is not in the measurement:
            # the estimate stays (the H200's MoE boot fell 21 MiB under the margin without).
            return Headroom(planned.bytes, "plan (estimate): no serving pass ran before sizing")
        return Headroom(fresh + late, "measured", fresh)

    def _measured(
        self,
        run: RunPlan,
        before: dict | None,
        after: dict | None,
        measurement: Any,
        headroom: Headroom,
    ) -> dict[Name, int]:
        """This rank's components as measured, closing the loop with the plan.

        Everything the engine holds after vLLM's profile (free at launch, as the launcher
        read it per card, minus free now) is split into weights (torch's allocation after
        loading), what the prewarm kept (workspaces) and the rest (cuda_context: context,
        cuBLAS, NCCL and whatever the profile run kept outside torch). A calibrated plan
        made of these figures then equals the budget this worker returns, to the block.
        """
        out: dict[Name, int] = {}
        if headroom.measured is not None:
            out[Name.JIT_HEADROOM] = headroom.measured
        retained = max(0, measurement.retained_bytes) if measurement is not None else 0
        if measurement is not None:
            out[Name.WORKSPACES] = retained
        if before is not None and after is not None:
            plan = run.rank(self.rank)
            launch_free = plan.total_bytes - plan.bytes(Name.OTHER_PROCESSES)
            out[Name.WEIGHTS] = before["torch_allocated"]
            engine = launch_free - after["free"]
            out[Name.CUDA_CONTEXT] = max(0, engine - before["torch_allocated"] - retained)
        peak = self._peak_activation()
        if peak or getattr(self, "_activation_peak", None) is not None:  # measured: 0 counts
            out[Name.ACTIVATION_PEAK] = peak
        return out

    @contextlib.contextmanager
    def _activation_probe(self):
        """Measure torch's peak above the start of vLLM's own profile run (its dummy batch of
        max_num_batched_tokens): the activations serving comes back to. vLLM reports this as
        ``peak_activation_memory`` with or without its CUDA-graph estimate depending on the
        release (0.26 without, 0.33 with), so the worker measures it itself.

        Both the allocated peak and the segments the caching allocator grew by are kept: vLLM
        empties the cache after profiling, and its warmup runs the batch again and keeps the
        segments, not the peak (H200, GLM-5 architecture, PIECEWISE: 0.43 GiB more, which
        left 63 MiB free against a 512 MiB margin when only the peak was reserved)."""
        runner = getattr(self, "model_runner", None)
        device = self._device_index()
        if runner is None or device is None:  # vLLM's CPU backend: no device peak to read
            yield
            return
        profile = self._vllm.read("runner.profile_run", runner)
        if isinstance(profile, Missing):  # said and recorded: vLLM's figure, else the plan's
            yield
            return
        import torch

        def probed() -> Any:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            base_reserved = torch.cuda.memory_reserved(device)
            try:
                return profile()
            finally:
                torch.cuda.synchronize(device)
                self._activation_peak = max(0, torch.cuda.max_memory_allocated(device) - base)
                grown = torch.cuda.max_memory_reserved(device) - base_reserved
                self._activation_segments = max(0, grown)

        runner.profile_run = probed
        try:
            yield
        finally:
            del runner.profile_run  # the class's method again

    def _peak_activation(self) -> int:
        """The activations to reserve: the largest of what the allocator held for the profile
        batch (its allocated peak, its segments' growth) and what the scratch stage's served
        waves took above what they left (a prompt reaching the context: vLLM's profile batch
        has none; the H200's MoE row took 0.13 GiB past the profile's figure serving one),
        else vLLM's figure."""
        measured = getattr(self, "_activation_peak", None)
        if measured is not None:
            segments = int(getattr(self, "_activation_segments", 0))
            return max(int(measured), segments, int(getattr(self, "_stage_peak", 0)))
        if self.platform != "cuda":  # vLLM's CPU worker has no figure; its budget takes none
            return 0
        peak = self._vllm.read("worker.peak_activation_memory", self)
        if isinstance(peak, Missing):  # the declared fallback, said and recorded
            return self._run.component(self.rank, Name.ACTIVATION_PEAK) if self._run else 0
        return max(0, int(peak) - self._cudagraph_applied())

    def _cudagraph_applied(self) -> int:
        """vLLM's CUDA-graph estimate inside its ``peak_activation_memory`` (0: not in it,
        or not read on this release, which the read has said)."""
        import os

        flag = os.environ.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1").lower()
        estimate = self._vllm.read("worker.cudagraph_memory_estimate", self)
        if isinstance(estimate, Missing) or flag in ("0", "false"):
            return 0
        return int(estimate)

    def _calibrated(self, run: RunPlan) -> bool:
        """Whether this rank's plan is made of an earlier boot's measurements."""
        return run.rank(self.rank).calibrated

    def _activation_reserve(self, run: RunPlan) -> int:
        """An earlier boot's net activation peak (``_net_activation``), else this boot's."""
        measured = run.measured(self.rank, Name.ACTIVATION_PEAK)
        return self._peak_activation() if measured is None else measured

    def _net_activation(self) -> None:
        """Record no activation peak when vLLM's warmup left it cached in torch's default
        pool: the warmup ran the largest batch again, its activations stay cached for
        serving and are already inside the measured ``cudagraph_pool`` (the warmup's whole
        footprint); counting them twice left 2.1 GiB unused on the H200 (GLM-5 architecture,
        vLLM 0.26: 2.58 GiB cached, peak 2.09 GiB). A cache smaller than the peak is
        incidental (0.07 then 0.02 GiB on two boots of the MoE model) and is not relied on."""
        peak = self._record.measured.get(Name.ACTIVATION_PEAK)
        device = self._device_index()
        if peak is None or device is None:
            return
        cached = _default_pool_cached(device)
        # The warmup ran the batch again when its cache holds the allocated peak; the
        # reserve (the segments) may be larger than what it happened to keep.
        allocated = int(getattr(self, "_activation_peak", None) or peak)
        self._record.measured[Name.ACTIVATION_PEAK] = 0 if cached >= allocated else peak
        segments = int(getattr(self, "_activation_segments", 0))
        self._record.activation = Activation(
            profile_peak=allocated,
            warmup_cached=cached,
            profile_segments=segments,
            stage_peak=int(getattr(self, "_stage_peak", 0)),
        )

    def _cudagraph_reserve(self, run: RunPlan) -> int:
        """The pool an earlier boot measured, else vLLM's own estimate, else the plan's."""
        measured = run.measured(self.rank, Name.CUDAGRAPH_POOL)
        planned = run.component(self.rank, Name.CUDAGRAPH_POOL)
        if measured is not None:
            return measured
        if self.platform != "cuda":  # vLLM's CPU worker has no estimate; its budget takes none
            return planned
        estimate = self._vllm.read("worker.cudagraph_memory_estimate", self)
        # 0: vLLM did not estimate (its estimate switched off); Missing: the declared fallback
        return planned if isinstance(estimate, Missing) or not estimate else int(estimate)

    def _device_index(self) -> int | None:
        if self.platform != "cuda":
            return None
        import torch

        return torch.cuda.current_device()

    def _device_snapshot(self) -> dict[str, int] | None:
        device = self._device_index()
        if device is None:
            return None
        import torch

        from launcher.gpu.measure import device_memory

        mem = device_memory(device)
        return {
            "free": mem.free,
            "total": mem.total,
            "used": mem.total - mem.free,
            "torch_reserved": torch.cuda.memory_reserved(device),
            "torch_allocated": torch.cuda.memory_allocated(device),
        }

    def _barrier(self) -> None:
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

    def _vllm_config_context(self):
        """vLLM's config context, as its own warmups run in (some read it globally)."""
        import contextlib

        config = getattr(self, "vllm_config", None)
        try:
            from vllm.config import set_current_vllm_config
        except ImportError:
            return contextlib.nullcontext()
        return set_current_vllm_config(config) if config is not None else contextlib.nullcontext()

    def _environment(self, run: RunPlan) -> Environment:
        # The cards' kind: under --force it is not the profile's, and the records must not
        # calibrate the profile's own cards.
        kind = run.file.cards.gpu_kind or run.profile.hardware.gpu
        packages = store.stack_versions()
        if self.platform != "cuda":
            return Environment(gpu_kind=kind, host=platform.node(), packages=packages)
        import torch

        return Environment(
            gpu_kind=kind,
            host=platform.node(),
            gpu=torch.cuda.get_device_name(self._device_index()),
            cuda=torch.version.cuda,
            driver=run.driver,  # read by the launcher on the cards, via the run file
            packages=packages,
        )

    def _say_compile_key(self) -> None:
        """On a boot from a cache artifact: whether vLLM loaded its compiled graph from it or
        compiled again, and which factor of its key differs (``runtime.compile_key``)."""
        from launcher.runtime import compile_key

        artifact = self._run.file.artifact
        if artifact is None or artifact.state == "ignored" or not artifact.artifact_id:
            return
        try:
            found = compile_key.after_restore(
                self._run.profile.runtime.cache_root, artifact.artifact_id, self._run.written_at
            )
        except OSError as exc:  # a cache being rewritten under us: nothing to tell
            logger.warning("b12x-launch rank %d: vLLM's compile key unread: %s", self.rank, exc)
            return
        if found is None:
            return
        line = f"rank {self.rank}: {found.say(artifact.artifact_id)}"
        if found.loaded:
            _say(line)
        else:
            logger.warning("b12x-launch %s", line)

    def _watch_steps(self) -> None:
        """Read free device memory at each serving step's edges: charge a step that compiled
        late with what it kept outside torch's allocator (modules, local memory: the census's
        cost), and keep serving's low-water for the next plan (``ServingWatch``)."""
        runner = getattr(self, "model_runner", None)
        step = getattr(runner, "execute_model", None)
        device = self._device_index()
        serving = getattr(self, "_serving", None)
        if step is None or device is None:
            return
        import torch

        late = self._record.late_compiles

        def watched(*args: Any, **kwargs: Any) -> Any:
            seen = len(late)
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
                    changed = self._serving_seen(serving, *low) or changed
                if changed:
                    self._save()

        runner.execute_model = watched

    def _serving_seen(self, serving: ServingWatch, free: int, reserved: int) -> bool:
        """One low-water reading; a watch that fails is stopped with a warning, never the
        step it reads around (issue 39: never a crash)."""
        if serving.stopped:
            return False
        try:
            changed = serving.seen(free, reserved)
        except Exception as exc:
            serving.stopped = True
            logger.warning(
                "b12x-launch rank %d: serving's free-memory watch stopped: %s: %s",
                self.rank,
                type(exc).__name__,
                exc,
            )
            return False
        if serving.below_margin():
            logger.warning(
                "b12x-launch rank %d: %s free while serving, below the safety margin %s (%s); "
                "the next plan reserves what serving took",
                self.rank,
                format_size(free),
                format_size(serving.margin),
                serving.split(),
            )
        return changed

    def _save(self) -> None:
        profile = self._run.profile
        self._record.internals = self._vllm.into(self._record.internals)
        try:
            store.save_record(
                self._record, self._run.run_dir, profile.runtime.cache_root, profile.hardware.gpu
            )
        except (OSError, ValueError, TypeError) as exc:
            # The record is what the next plan learns from, not what this boot serves with: a
            # record that cannot be written (a full disk, a value of no JSON form) is logged
            # loudly and the boot goes on, as plain vLLM would (issue 39: never a crash).
            logger.error(
                "b12x-launch rank %d: cannot write the measurement record, so the next plan "
                "will not learn from this boot: %s: %s",
                self.rank,
                type(exc).__name__,
                exc,
            )


NOT_RECORDED = ("serving_peak", "handed")
"""A result's parts the record does not keep as the outcome: the stage's served peak (kept
once, as ``Activation.stage_peak``) and what a provider handed the ones after it."""


def outcome(result: PrewarmResult) -> PrewarmOutcome:
    """A provider's result as the record keeps it. A third party's provider may hand back
    what the record's types refuse: its outcome is then kept without those parts, and says
    so, rather than stop the boot. The stage's served peak is not the outcome's: the record
    keeps it once, as ``Activation.stage_peak``."""
    data = {k: v for k, v in vars(result).items() if k not in NOT_RECORDED}
    try:
        return PrewarmOutcome.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
    where = ", ".join(".".join(map(str, e["loc"])) for e in errors[:3])
    note = f"its result's {where} not recorded (not the record's types)"
    refused = {e["loc"][0] for e in errors if e["loc"]}
    kept = {k: v for k, v in data.items() if k not in refused}
    kept["skipped"] = "; ".join(filter(None, [result.skipped, note]))
    try:  # everything but the refused fields (the H200's held keys: the scratch stage stays)
        return PrewarmOutcome.model_validate(kept)
    except ValidationError:
        basic = {k: getattr(result, k) for k in ("provider", "compiled", "warmed", "seconds")}
        return PrewarmOutcome.model_validate({**basic, "skipped": kept["skipped"]})


def entry_line(e: EntryPoint) -> str:
    """One entry point for the log: its status, kernels and time; why, unless it was called
    (a failure says its exception type and text)."""
    return e.line()


def stage_times(results: list[PrewarmResult]) -> str:
    """The stage's time per part: each provider, and the scratch stage's waves."""
    total = sum(r.seconds for r in results)
    parts = [f"{r.provider} {r.seconds:.1f}s" for r in results if r.seconds]
    points = [e for r in results for e in outcome(r).entry_points]
    slow = sorted((e for e in points if e.seconds is not None), key=lambda e: -(e.seconds or 0))
    inner = ", ".join(f"{e.name.split('(')[0]} {e.seconds:.1f}s" for e in slow[:3])
    return f"{total:.1f}s: {', '.join(parts)}" + (f" (longest: {inner})" if inner else "")


def _warn(message: str) -> None:
    logger.warning("b12x-launch: %s", message)


def _say(message: str) -> None:
    logger.info("b12x-launch %s", message)


def _delta(actual: int, planned: int) -> str:
    if not planned:
        return "no plan figure"
    return f"{(actual - planned) / planned:+.1%} against the plan"


def _default_pool_cached(device: int) -> int:
    """Bytes torch's allocator holds free in its default pool (not a CUDA graph's private
    pool, which eager activations cannot use)."""
    import torch

    free = 0
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") == device and tuple(seg.get("segment_pool_id") or (0, 0)) == (0, 0):
            free += int(seg["total_size"]) - int(seg["allocated_size"])
    return free
