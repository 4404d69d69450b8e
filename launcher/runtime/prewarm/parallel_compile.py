"""Triton compiles in threads: the key enumeration's missing keys, and passes whose launches
only need to compile (the MoE buckets: nobody reads their outputs).

A compile is mostly ptxas and LLVM, which run outside the GIL: on the H200 the enumeration
compiled 157 keys in 19 s in 16 threads, where serial launches took about 0.8 s a key.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

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
    the block ends each key is compiled and loaded (its device memory taken before sizing);
    one that failed to compile is dropped, so serving compiles it again (late) instead of
    tripping on a failed future."""
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
    settle(kernels)


def _compiling(run: Any) -> Any:
    def compile_key(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return run(*args, grid=grid, warmup=True, **kwargs)

    return compile_key


def settle(kernels: Sequence[Any]) -> list[str]:
    """Load every compiled key of ``kernels``; drop the keys whose compile failed. Returns
    what failed, as ``kernel: error``."""
    failed: list[str] = []
    for fn in kernels:
        for caches in list(getattr(fn, "device_caches", {}).values()):
            cache = caches[0]
            for key, kernel in list(cache.items()):
                try:
                    kernel = kernel.result() if hasattr(kernel, "result") else kernel
                    if kernel is None:
                        raise RuntimeError("compile failed")
                    kernel._init_handles()
                except Exception as exc:  # the key compiles again at its first launch
                    cache.pop(key, None)
                    failed.append(f"{getattr(fn, '__name__', fn)}: {type(exc).__name__}: {exc}")
    return failed
