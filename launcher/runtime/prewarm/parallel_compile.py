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


@contextlib.contextmanager
def parallel_compiles() -> Iterator[bool]:
    """Triton's parallel compile mode (3.4+) for the block: compiles go to threads, and every
    kernel is in its cache when the block ends. Yields False where Triton lacks the mode."""
    try:
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        yield False
        return
    with ThreadPoolExecutor(COMPILE_THREADS) as pool, AsyncCompileMode(pool, ignore_errors=True):
        yield True


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
                kernel = kernel.result() if hasattr(kernel, "result") else kernel
                if kernel is None:
                    raise RuntimeError("compile failed")
                kernel._init_handles()
                loaded += 1
            except Exception as exc:
                cache.pop(key, None)
                failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return loaded, failed
