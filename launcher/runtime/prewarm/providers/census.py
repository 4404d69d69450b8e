"""Replay the late-JIT census before sizing: what an earlier boot compiled late.

Each replayable entry (``launcher.contract.census``) names a ``@triton.jit`` kernel by module and
name and carries Triton's own specialization data; ``JITFunction.preload`` compiles that
exact specialization into the in-process cache, so serving finds it compiled. Entries it
cannot replay (b12x/CuTe programs, a kernel that no longer exists) stay reserved in the
plan's ``jit_headroom``.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from launcher.runtime.prewarm import PrewarmContext, PrewarmResult
from launcher.runtime.prewarm.flow import NONE, Fact


def _jit_function(kernel: str) -> Any:
    """The JITFunction behind ``module.name`` (unwrapping autotuners and heuristics)."""
    module, _, name = kernel.rpartition(".")
    obj = getattr(importlib.import_module(module), name)
    while not hasattr(obj, "preload") and hasattr(obj, "fn"):
        obj = obj.fn
    if not hasattr(obj, "preload"):
        raise TypeError(f"{kernel} is not a Triton JIT function")
    return obj


class CensusProvider:
    name = "census"
    provides = frozenset({Fact.LAUNCHED})
    needs = uses = NONE

    def applies(self, ctx: PrewarmContext) -> bool:
        return bool(ctx.learned)

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return [f"learned: {e.describe()}" for e in ctx.learned]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        result = PrewarmResult(self.name)
        start = time.perf_counter()
        problems = []
        for e in ctx.learned:
            if not e.replayable:
                continue
            try:
                _jit_function(e.kernel).preload(e.specialization)
            except Exception as exc:  # the kernel moved or its key changed: stay reserved
                problems.append(f"{e.kernel}: {type(exc).__name__}: {exc}")
                continue
            result.compiled += 1
            result.specializations.append(f"{e.kernel}{e.detail}")
        result.skipped = "; ".join(problems)
        result.seconds = time.perf_counter() - start
        return result

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        """Late Triton compiles are caught by ``runtime.jit_watch``, which the worker arms."""
