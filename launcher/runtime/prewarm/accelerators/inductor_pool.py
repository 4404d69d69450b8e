"""Inductor's Triton compiles in its own process pool while the runtime provider's passes run.

vLLM sets ``TORCHINDUCTOR_COMPILE_THREADS=1`` (``vllm/env_override.py``), so Inductor compiles
every Triton kernel of a graph one after another on the thread that traced it: the model's
torch.compile in the first wave, the MoE blocks', and the compiled sampler and logprob helpers
the feature waves reach. On the H200 that was about 20 s of a GLM boot's stage that no
``JITFunction`` hook saw (docs/changelog.md, 2026-12-03). Inductor's own answer is a pool of
compile processes (``AsyncCompile``): a graph's kernels go out together and the graph waits for
them all. The kernels and the caches they land in are the same; ``compile_threads`` is not part
of Inductor's cache key. The pool's processes import torch but never touch a GPU (they compile
with ``warm_cache_only``).

On for the passes, off after: the pool is shut down and ``compile_threads`` put back before
vLLM's own steps run, so whatever compiles after sizing compiles as in plain vLLM.
``prewarm.inductor_pool: 0`` turns it off; ``prewarm.inductor_pool: N`` asks for N processes.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

MOST = 8
"""A cap: Inductor hands a pool one graph's kernels at a time (vLLM's pieces hold few), and each
process costs a torch import. The H200 ran 8 (docs/changelog.md, 2026-12-03)."""


def processes(asked: Literal["auto"] | int, cpus: int | None = None, ranks: int = 1) -> int:
    """How many compile processes a rank gets: ``asked`` (``prewarm.inductor_pool``) when it
    is a number (0: off), else the rank's share of the CPUs less one for itself, at most
    ``MOST`` (fewer than 2 is no pool)."""
    if isinstance(asked, int):
        n = asked
    else:
        if cpus is None:
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        n = min(MOST, cpus // max(1, ranks) - 1)
    return n if n >= 2 else 0


class InductorPool:
    """Inductor's compile processes for the block; ``close`` shuts them down and puts
    ``compile_threads`` back. Made with 0 processes it does nothing."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.error = ""
        self._before: Any = None
        self._started = 0.0
        self._kernels = 0
        self.ready_after: float | None = None
        """Seconds from ``start`` until the pool's first job returned (Inductor sends it
        kernels from then on); None while it has not."""

    def start(self) -> InductorPool:
        if self.n < 2:
            return self
        try:
            from torch._inductor import config
            from torch._inductor.async_compile import AsyncCompile

            self._before = config.compile_threads
            config.compile_threads = self.n
            self._started = time.perf_counter()
            AsyncCompile.warm_pool()  # the sidecar process starts
            wakeup = getattr(AsyncCompile, "wakeup", None)
            if wakeup is not None:  # its workers start now, not at the first kernel
                wakeup()
            else:
                AsyncCompile.use_process_pool()
            future = getattr(AsyncCompile, "_ready_future", None)
            if future is not None:  # when Inductor starts sending kernels to it
                future.add_done_callback(self._stamp)
            self._kernels = _inductor_kernels()
        except Exception as exc:  # Inductor compiles in this process, as vLLM has it
            self.error = f"{type(exc).__name__}: {exc}"
            self._put_back()
        return self

    def _stamp(self, _future: Any) -> None:
        if self.ready_after is None:
            self.ready_after = time.perf_counter() - self._started

    def ready(self) -> bool:
        """Whether Inductor now sends kernels to the pool (it compiles in this process until
        the pool's first job returns)."""
        return self.ready_after is not None and not self.error

    def close(self) -> str:
        """Shuts the pool down and puts ``compile_threads`` back; says what it was."""
        if self.n < 2:
            return "Inductor's compile pool: off (vLLM's one compile thread)"
        if self.error:
            return f"Inductor's compile pool: not started ({self.error})"
        kernels = _inductor_kernels() - self._kernels
        self._put_back()
        if self.error:
            return f"Inductor's compile pool: {self.n} processes, not shut down ({self.error})"
        ready = (
            f"ready {self.ready_after:.1f}s after it started"
            if self.ready_after is not None
            else "never ready (Inductor compiled in this process)"
        )
        return (
            f"Inductor's compile pool: {self.n} processes, {ready}; Inductor compiled "
            f"{kernels} Triton kernels meanwhile; shut down"
        )

    def _put_back(self) -> None:
        try:
            from torch._inductor import config
            from torch._inductor.async_compile import shutdown_compile_workers

            shutdown_compile_workers()
            config.compile_threads = self._before if self._before is not None else 1
        except Exception as exc:  # the pool stays; say so
            self.error = self.error or f"shutdown: {type(exc).__name__}: {exc}"


def _inductor_kernels() -> int:
    """Triton kernels Inductor compiled in this process so far, in the pool or not (its own
    counter)."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["async_compile_cache_miss"])
