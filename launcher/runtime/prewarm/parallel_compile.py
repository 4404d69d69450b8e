"""Triton compiles in threads: the key enumeration's missing keys, and passes whose launches
only need to compile (the MoE buckets: nobody reads their outputs).

A compile is mostly ptxas and LLVM, which run outside the GIL: on the H200 the enumeration
compiled 157 keys in 19 s in 16 threads, where serial launches took about 0.8 s a key.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)

COMPILE_THREADS = min(16, os.cpu_count() or 1)
DEADLINE_S = 600.0
"""How long the end of a block waits for its compiles. A key takes about a second (145 keys in
14 s on the H200), so one still compiling after this is stuck (a ptxas that never returns):
the boot goes on without it, and says so, instead of hanging."""


@contextlib.contextmanager
def parallel_compiles(deadline_s: float = DEADLINE_S) -> Iterator[bool]:
    """Triton's parallel compile mode (3.4+) for the block: compiles go to threads, and every
    kernel is in its cache when the block ends, but those still compiling after ``deadline_s``
    (``settle`` drops and reports them). Yields False where Triton lacks the mode."""
    try:
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime import _async_compile
    except ImportError:
        yield False
        return
    pool = ThreadPoolExecutor(COMPILE_THREADS)
    try:
        with _bounded(_async_compile, pool, deadline_s):
            yield True
    finally:  # a stuck compile's thread is left behind; nothing waits on it
        pool.shutdown(wait=False, cancel_futures=True)


def _bounded(module: Any, pool: Any, deadline_s: float) -> Any:
    """Triton's ``AsyncCompileMode`` whose exit waits at most ``deadline_s`` for the compiles
    (Triton's own waits without a limit): what is still running is taken off the list Triton's
    exit waits on, and the rest of that exit is Triton's."""

    class Bounded(module.AsyncCompileMode):
        def __exit__(self, *exc: object) -> Any:
            from concurrent.futures import wait

            futures = getattr(self, "raw_futures", None)
            if isinstance(futures, list) and futures:
                stuck = wait(list(futures), timeout=deadline_s).not_done
                if stuck:
                    futures[:] = [f for f in futures if f not in stuck]
                    logger.warning(
                        "b12x-launch: %d Triton compiles still running after %.0f s; "
                        "the boot goes on without them",
                        len(stuck),
                        deadline_s,
                    )
            return super().__exit__(*exc)

    return Bounded(pool, ignore_errors=True)


@contextlib.contextmanager
def compile_only(kernels: Sequence[Any]) -> Iterator[None]:
    """Inside the block, a launch of one of ``kernels`` (``@triton.jit`` functions) compiles
    its key in a thread and returns without running: the caller's outputs hold garbage. When
    the block ends each key is compiled and loaded (``settle``); what failed is logged."""
    with parallel_compiles() as parallel:
        if not parallel or not kernels:
            yield
            return
        for fn in kernels:
            fn.run = _compiling(fn.run)
        try:
            yield
        finally:
            for fn in kernels:
                vars(fn).pop("run", None)
    for fn in kernels:
        for failed in settle(fn)[1]:
            logger.warning("b12x-launch: compile-only launch: %s (compiled again if used)", failed)


def _compiling(run: Any) -> Any:
    def compile_key(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return run(*args, grid=grid, warmup=True, **kwargs)

    return compile_key


def settle(fn: Any, keys: Iterable[Any] | None = None) -> tuple[int, list[str]]:
    """Load ``fn``'s compiled keys (all of them, or ``keys``) so their device memory is taken
    now; drop a key whose compile or load failed, so its first launch compiles it again
    instead of tripping on a failed future. Returns (keys loaded, ``kernel: error`` each)."""
    loaded, failed = 0, []
    name = getattr(fn, "__name__", fn)
    for caches in list(getattr(fn, "device_caches", {}).values()):
        cache = caches[0]
        for key in list(cache) if keys is None else [k for k in keys if k in cache]:
            kernel = cache[key]
            try:
                future = getattr(kernel, "future", None)
                if future is not None and not future.done():
                    raise TimeoutError("still compiling at the deadline (stuck)")
                kernel = kernel.result() if hasattr(kernel, "result") else kernel
                if kernel is None:
                    raise RuntimeError("compile failed")
                kernel._init_handles()
                loaded += 1
            except Exception as exc:
                cache.pop(key, None)
                failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return loaded, failed
