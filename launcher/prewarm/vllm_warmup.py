"""vLLM's own kernel warmups, run before sizing instead of after KV allocation.

Upstream runs ``b12x_warmup`` and the JIT-warmup registry in
``compile_or_warm_up_model``, after the KV cache is sized; whatever they compile then
takes memory the KV cache was promised. This provider calls them from the planned
worker's ``determine_available_memory``. A warmup that needs the KV cache fails here and
is reported as skipped; it then runs in vLLM's own warmup, which the worker measures.
"""

from __future__ import annotations

import time

from launcher.prewarm import PrewarmContext, PrewarmResult


class VllmWarmupProvider:
    name = "vllm"

    def applies(self, ctx: PrewarmContext) -> bool:
        return ctx.worker is not None and ctx.profile.hardware.gpu != "cpu"

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return [
            "vLLM b12x_warmup: every b12x unit of the loaded model at max_num_batched_tokens "
            "and each CUDA-graph capture size",
            "vLLM JIT-warmup registry (kernel_config.enable_jit_warmup)",
        ]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        result = PrewarmResult(self.name)
        start = time.perf_counter()
        for label, step in (("b12x_warmup", self._b12x), ("jit_warmup", self._jit_registry)):
            try:
                if step(ctx):
                    result.warmed += 1
                    result.specializations.append(label)
            except Exception as exc:  # a warmup that needs the KV cache runs later in vLLM's
                result.skipped += f"{label}: {type(exc).__name__}: {exc}; "
        result.seconds = time.perf_counter() - start
        return result

    def freeze(self, ctx: PrewarmContext, on_late_compile) -> None:
        """vLLM's own ``--jit-monitor-mode`` watches its registry; nothing to arm here."""

    @staticmethod
    def _b12x(ctx: PrewarmContext) -> bool:
        from vllm.model_executor.warmup.b12x_warmup import b12x_warmup

        sizes = list(ctx.worker.vllm_config.compilation_config.cudagraph_capture_sizes or [])
        b12x_warmup(ctx.worker, sizes)
        return True

    @staticmethod
    def _jit_registry(ctx: PrewarmContext) -> bool:
        kernel_config = getattr(ctx.worker.vllm_config, "kernel_config", None)
        registry = getattr(ctx.model_runner, "jit_warmup_registry", None)
        if not getattr(kernel_config, "enable_jit_warmup", False) or registry is None:
            return False
        registry.warmup()
        return True
