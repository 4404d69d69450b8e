"""What the planned worker adds to vLLM's: prewarm -> measure -> size -> record -> watch.

``determine_available_memory`` runs every prewarm provider before vLLM profiles, so
vLLM's own measurement already sees what the prewarm kept; it then returns the plan's
budget instead of vLLM's figure (see ``launcher.budget``). After the KV cache exists it
logs planned against actual, writes the rank's measurement record, and arms the late-JIT
watchdog once vLLM's own warmup is done.
"""

from __future__ import annotations

import datetime
import logging
import platform
import time
from typing import Any

from launcher import jit_watch
from launcher.budget import BudgetError, BudgetInputs, kv_budget
from launcher.calibration import save_record, stack_versions
from launcher.prewarm import PrewarmContext, PrewarmResult, load
from launcher.units import format_size
from launcher.worker.runplan import RunPlan

logger = logging.getLogger("vllm.b12x_launch")


class PlannedMixin:
    """Mixed in before vLLM's worker class; ``platform`` is ``cuda`` or ``cpu``."""

    platform = "cuda"
    _run: RunPlan | None = None
    _record: dict[str, Any]

    # -- sizing ---------------------------------------------------------------------------
    def determine_available_memory(self) -> int:
        run = RunPlan.from_env()
        if run is None:
            logger.warning("b12x-launch: no plan in the environment; sizing as vLLM does")
            return super().determine_available_memory()
        self._run = run
        rank = self.rank
        profile = run.profile
        _say(f"rank {rank}: planned worker {type(self).__name__}, plan {run.fingerprint}")
        before = self._device_snapshot()
        results, measurement = self._prewarm(run)
        self._barrier()
        vllm_available = super().determine_available_memory()
        after = self._device_snapshot()
        headroom, headroom_source = self._headroom(run, measurement)
        pinned = run.component(rank, "kv_cache") if run.pinned else None
        inputs = BudgetInputs(
            platform=self.platform,
            vllm_available=int(vllm_available),
            jit_headroom=headroom,
            safety_margin=profile.memory.safety_margin,
            planned_kv=run.component(rank, "kv_cache"),
            pinned_kv=pinned,
            free_after_profile=after["free"] if after else None,
            peak_activation=self._peak_activation(),
            cudagraph=self._cudagraph_reserve(run),
        )
        try:
            budget = kv_budget(inputs)
        except BudgetError as exc:
            raise RuntimeError(f"b12x-launch rank {rank}: {exc}") from None
        planned = inputs.planned_kv
        _say(
            f"rank {rank}: KV budget {budget.describe()}; vLLM alone would offer "
            f"{format_size(vllm_available)}; the plan said {format_size(planned)} "
            f"({_delta(budget.bytes, planned)}); jit_headroom from {headroom_source}"
        )
        self._record = {
            "fingerprint": run.fingerprint,
            "rank": rank,
            "when": datetime.datetime.now().isoformat(timespec="seconds"),
            "environment": self._environment(profile.hardware.gpu),
            "plan": {k: v["bytes"] for k, v in run.rank(rank)["components"].items()},
            "measured": self._measured(run, before, measurement, headroom, headroom_source),
            "prewarm": [vars(r) for r in results],
            "prewarm_measurement": measurement.to_dict() if measurement else None,
            "vllm_available": int(vllm_available),
            "budget": {"bytes": budget.bytes, "basis": budget.basis, **budget.reserved},
            "late_compiles": [],
        }
        self._save()
        return budget.bytes

    def initialize_from_config(self, kv_cache_config: Any) -> None:
        super().initialize_from_config(kv_cache_config)
        if self._run is None:
            return
        blocks = int(getattr(kv_cache_config, "num_blocks", 0))
        kv = self._run.kv
        tokens = blocks * kv["block_tokens"] * kv.get("dcp", 1)
        self._record["kv"] = {"blocks": blocks, "tokens": tokens, "planned_tokens": kv["tokens"]}
        _say(
            f"rank {self.rank}: KV cache {blocks:,} blocks = {tokens:,} tokens; plan "
            f"{kv['blocks_per_rank']:,} blocks = {kv['tokens']:,} tokens "
            f"({_delta(tokens, kv['tokens'])})"
        )
        self._save()

    def compile_or_warm_up_model(self) -> Any:
        before = self._device_snapshot()
        result = super().compile_or_warm_up_model()
        if self._run is None:
            return result
        after = self._device_snapshot()
        margin = self._run.profile.memory.safety_margin
        if before and after:
            self._record["measured"]["cudagraph_pool"] = max(0, before["free"] - after["free"])
            self._record["free_after_warmup"] = after["free"]
            if after["free"] < margin:
                logger.warning(
                    "b12x-launch rank %d: %s free after vLLM's warmup, below the safety margin %s",
                    self.rank,
                    format_size(after["free"]),
                    format_size(margin),
                )
        self._arm_watchdog()
        self._save()
        return result

    # -- parts ----------------------------------------------------------------------------
    def _prewarm(self, run: RunPlan) -> tuple[list[PrewarmResult], Any]:
        profile = run.profile
        if not profile.prewarm.enabled or not profile.prewarm.providers:
            return [], None
        from launcher.model import load_facts

        facts = load_facts(profile.model.path, profile.model.architecture)
        device = self._device_index()
        ctx = PrewarmContext(
            profile,
            facts,
            self.rank,
            f"cuda:{device}" if device is not None else "cpu",
            getattr(self, "model_runner", None),
            log=_say,
            worker=self,
        )
        self._providers = []
        results: list[PrewarmResult] = []

        def run_all() -> None:
            for name in profile.prewarm.providers:
                provider = load(name)
                if not provider.applies(ctx):
                    results.append(PrewarmResult(name, skipped="not used by this deployment"))
                    continue
                self._providers.append((provider, ctx))
                start = time.perf_counter()
                result = provider.run(ctx)
                result.seconds = result.seconds or time.perf_counter() - start
                results.append(result)
                _say(
                    f"rank {self.rank}: prewarm {name}: {result.compiled} compiled, "
                    f"{result.warmed} warmed in {result.seconds:.1f}s {result.skipped}"
                )

        if device is None:
            run_all()
            return results, None
        from launcher.measure import measure

        jit_watch.watch.install()
        _, measurement = measure(run_all, device)
        _say(
            f"rank {self.rank}: prewarm retained {format_size(measurement.retained_bytes)}, "
            f"transient peak {format_size(measurement.transient_peak_bytes)} "
            f"(torch reserved {format_size(measurement.torch_reserved_delta)})"
        )
        return results, measurement

    def _headroom(self, run: RunPlan, measurement: Any) -> tuple[int, str]:
        configured = run.profile.memory.jit_headroom
        if configured != "measure":
            return int(configured), "profile"
        if measurement is not None:
            from launcher.measure import jit_headroom

            return jit_headroom(measurement), "measured"
        comp = run.rank(self.rank)["components"]["jit_headroom"]
        return int(comp["bytes"]), f"plan ({comp['source']})"

    def _measured(
        self,
        run: RunPlan,
        before: dict | None,
        measurement: Any,
        headroom: int,
        headroom_source: str,
    ) -> dict[str, int]:
        out: dict[str, int] = {}
        if headroom_source == "measured":
            out["jit_headroom"] = headroom
        if measurement is not None:
            out["workspaces"] = max(0, measurement.retained_bytes)
        if before is not None:
            others = run.component(self.rank, "other_processes")
            out["cuda_context"] = max(0, before["used"] - before["torch_reserved"] - others)
        peak = self._peak_activation()
        if peak:
            out["activation_peak"] = peak
        return out

    def _peak_activation(self) -> int:
        peak = int(getattr(self, "peak_activation_memory", 0) or 0)
        return max(0, peak - self._cudagraph_applied())

    def _cudagraph_applied(self) -> int:
        import os

        flag = os.environ.get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1").lower()
        estimate = int(getattr(self, "cudagraph_memory_estimate", 0) or 0)
        return estimate if flag not in ("0", "false") else 0

    def _cudagraph_reserve(self, run: RunPlan) -> int:
        """vLLM's own CUDA-graph estimate when it made one, else the plan's."""
        estimate = int(getattr(self, "cudagraph_memory_estimate", 0) or 0)
        return estimate or run.component(self.rank, "cudagraph_pool")

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

        from launcher.measure import device_memory

        mem = device_memory(device)
        return {
            "free": mem.free,
            "total": mem.total,
            "used": mem.total - mem.free,
            "torch_reserved": torch.cuda.memory_reserved(device),
        }

    def _barrier(self) -> None:
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
        except Exception as exc:  # a failed barrier must not hide the real error later
            logger.warning("b12x-launch: barrier after prewarm failed: %s", exc)

    def _environment(self, gpu_kind: str) -> dict[str, Any]:
        env: dict[str, Any] = {"gpu_kind": gpu_kind, "host": platform.node(), **stack_versions()}
        if self.platform == "cuda":
            import torch

            env["gpu"] = torch.cuda.get_device_name(self._device_index())
            env["cuda"] = torch.version.cuda
            env["driver"] = _driver()
        return env

    def _arm_watchdog(self) -> None:
        profile = self._run.profile
        strict = profile.prewarm.strict_jit

        def late(event: Any, detail: str = "") -> None:
            what = event.describe() if hasattr(event, "describe") else f"{event} {detail}"
            self._record["late_compiles"].append(what)
            logger.warning("b12x-launch rank %d: LATE COMPILE after sizing: %s", self.rank, what)
            self._save()

        jit_watch.arm(late, strict=strict)
        for provider, ctx in getattr(self, "_providers", []):
            provider.freeze(ctx, late)
        _say(f"rank {self.rank}: late-JIT watchdog armed{' (strict)' if strict else ''}")

    def _save(self) -> None:
        try:
            save_record(self._record, self._run.run_dir, self._run.profile)
        except OSError as exc:
            logger.warning(
                "b12x-launch rank %d: cannot write the measurement record: %s", self.rank, exc
            )


def _driver() -> str | None:
    from launcher.hardware import NoGpuInfo, query_gpus

    try:
        gpus = query_gpus()
    except NoGpuInfo:
        return None
    return gpus[0].driver if gpus else None


def _say(message: str) -> None:
    logger.info("b12x-launch %s", message)


def _delta(actual: int, planned: int) -> str:
    if not planned:
        return "no plan figure"
    return f"{(actual - planned) / planned:+.1%} against the plan"
