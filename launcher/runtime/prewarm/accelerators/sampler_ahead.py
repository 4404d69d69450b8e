"""The sampler's Triton keys compiled beside the first wave's torch.compile.

On boot 1 the stage's first step compiles the model with torch.compile (26-41 s on the H200's
GLM tier model), and then the sampler's first launch of vLLM's top-k/top-p Triton kernel
compiles on the same thread: a 37 KB kernel, 7-10 s a key (docs/changelog.md, 2026-12-03).
Nothing about those keys waits on the model: the kernel's wrapper takes logits as wide as the
vocabulary and each row's k and p. So a thread calls vLLM's own wrapper while the first step
compiles, and that thread's launches of the kernel are compile-only (Triton's ``warmup``:
compiled and cached, not run); the step's sampler then finds its key compiled. A compile in a
thread left a busy Python thread 91-98% of its speed on a 2-core CPU, as a compile process did
(``benchmarks/compile_parallelism.py``): the compile does not hold the GIL against the stage.
On the H200 (docs/changelog.md, 2026-12-03) its six keys compiled in 13.5 s beside glm39's
first wave, whose sampler tail went from 22 s to 11 s, with 0 late compiles. On by default;
``prewarm.sampler_ahead: false`` turns it off.

The thread ends before the waves do (``join``), and its compile-only wrapper comes off the
kernel with it, so the wrappers put on before it (the serving pass's launch record) are back
as they were. What it leaves is what the sampler wave leaves: vLLM's per-device buffer and
tables for the kernel, and the compiled keys. A failure is logged and left to the wave.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from launcher.runtime.prewarm.accelerators.parallel_compile import parallel_compiles
from launcher.vllm.internals import module_path

WRAPPER = module_path("kernel.topk_topp_wrapper")
KERNEL = module_path("kernel.topk_topp")
TRITON_ROWS = 8
FLAGS = ((True, True), (True, False), (False, True))
"""Top-k and top-p, top-k alone, top-p alone: each its own key (the flags are constexprs),
and top-p alone passes the logits as ``K``, another pointer type."""


def logits_dtypes(model_dtype: str) -> tuple[str, ...]:
    """The logits dtypes the kernel meets: float32 (V1's sampler, and the rejection sampler),
    and the model's own (vLLM 0.26's V2 sampler keeps the logits' dtype, and runs Triton rather
    than FlashInfer when a batch holds a greedy or a seeded row); ``auto``: both half types."""
    half = (model_dtype,) if model_dtype in ("bfloat16", "float16") else ("bfloat16", "float16")
    return ("float32", *half)


"""vLLM's sampler takes its Triton top-k/top-p path from this many rows."""


def rows_for(max_num_seqs: int, spec_tokens: int) -> list[int]:
    """One row count per ``BATCH_SIZE`` class the deployment's sampler reaches on the Triton
    path: Triton specializes integers on 1 and on divisibility by 16, and the rejection
    sampler runs ``max_num_seqs x (1 + spec)`` rows."""
    from launcher.profile.rules import draft_rows

    most = draft_rows(max_num_seqs, spec_tokens)
    return [n for n in (TRITON_ROWS, 16) if n <= most]


def for_stage(
    shape: Any,
    device: str,
    replay: bool,
    log: Callable[[str], None],
    model_dtype: str = "bfloat16",
    *,
    wanted: bool,
) -> SamplerAhead | None:
    """Started when ``wanted`` (``prewarm.sampler_ahead``) and the deployment's sampled rows
    reach vLLM's Triton sampler (``shape``: ``serving_batches.Shape``); else None, said in
    the log unless not wanted."""
    if not wanted:
        return None
    rows = rows_for(shape.max_num_seqs, shape.spec_tokens)
    if rows and shape.sampling and not replay:
        return SamplerAhead(device, shape.vocab, rows, logits_dtypes(model_dtype)).start()
    log("sampler ahead: nothing to do (no sampled rows reach vLLM's Triton sampler)")
    return None


class CompileOnlyHere:
    """``fn``'s launches from one thread compile only; every other thread's run as before
    (a ``run_chain`` layer). ``close`` takes the layer out, and only it."""

    def __init__(self, fn: Any, thread: int) -> None:
        from functools import partial

        from launcher.runtime import run_chain
        from launcher.runtime.prewarm.accelerators.parallel_compile import compile_only_run

        self._layer = run_chain.observe(fn, partial(compile_only_run, thread=thread))

    def close(self) -> None:
        self._layer.remove()


class SamplerAhead:
    """A thread that calls vLLM's top-k/top-p wrapper with each of ``FLAGS``, ``rows`` rows at
    a time, compile-only, on ``device`` (``cuda:N``)."""

    def __init__(
        self,
        device: str,
        vocab: int,
        rows: list[int],
        dtypes: tuple[str, ...] = ("float32",),
        find: Callable[[str], Any] | None = None,
    ) -> None:
        from launcher.runtime.prewarm import runtime_function

        self._device, self._vocab, self._rows, self._dtypes = device, vocab, rows, dtypes
        self._find = find or runtime_function
        self._thread = threading.Thread(target=self._run, name="b12x-sampler-ahead", daemon=True)
        self._ready = threading.Event()
        self._patch: CompileOnlyHere | None = None
        self.seconds = 0.0
        self.error = ""

    def start(self) -> SamplerAhead:
        wrapper, kernel = self._find(WRAPPER), self._find(KERNEL)
        if wrapper is None or kernel is None or not hasattr(kernel, "run"):
            self.error = "this vLLM has no Triton top-k/top-p wrapper"
            return self
        self._wrapper = wrapper
        self._thread.start()
        # The wrapper goes on from here, once the thread's id is known: before the thread runs.
        self._patch = CompileOnlyHere(kernel, self._thread.ident or 0)
        self._ready.set()
        return self

    def _run(self) -> None:
        self._ready.wait()
        start = time.perf_counter()
        try:
            import torch

            device = torch.device(self._device)
            if device.type == "cuda":
                torch.cuda.set_device(device)  # Triton compiles for the current device
            # Each launch hands its compile to the mode's threads and returns: the keys compile
            # side by side, and a launch of one still compiling elsewhere waits for it.
            with parallel_compiles():
                for rows in self._rows:
                    k = torch.full((rows,), 20, dtype=torch.int32, device=device)
                    p = torch.full((rows,), 0.9, dtype=torch.float32, device=device)
                    for dtype in self._dtypes:
                        logits = torch.zeros(
                            rows, self._vocab, dtype=getattr(torch, dtype), device=device
                        )
                        for top_k, top_p in FLAGS:
                            self._wrapper(logits, k if top_k else None, p if top_p else None)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as exc:  # the sampler wave compiles it as before
            self.error = f"{type(exc).__name__}: {exc}"
        self.seconds = time.perf_counter() - start

    def join(self, timeout: float = 60.0) -> str:
        """Waits for the thread, takes the wrapper off, and says what it did."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        if self._patch is not None:
            self._patch.close()
        if self._thread.is_alive():
            return f"sampler ahead: still compiling after {timeout:.0f}s (a daemon thread)"
        if self.error:
            return f"sampler ahead: not done: {self.error}"
        rows = " and ".join(str(r) for r in self._rows)
        dtypes = " and ".join(self._dtypes)
        return (
            f"sampler ahead: the top-k/top-p kernel at {rows} rows on {dtypes} logits, top-k "
            f"and top-p, each alone and both, compiled in {self.seconds:.1f}s beside the first wave"
        )
