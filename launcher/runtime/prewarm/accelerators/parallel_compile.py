"""Triton compiles in threads: the key enumeration's missing keys, and passes whose launches
only need to compile (the MoE buckets: nobody reads their outputs).

A compile is mostly ptxas and LLVM, which run outside the GIL: on the H200 the enumeration
compiled 157 keys in 19 s in 16 threads, where serial launches took about 0.8 s a key.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, wait
from typing import Any

logger = logging.getLogger(__name__)

COMPILE_THREADS = min(16, os.cpu_count() or 1)
DEADLINE_S = 600.0
"""How long a worker's compiles may take, from the start of a pass (the key enumeration shares
one deadline over all its kernels). A key takes about a second (145 keys in 14 s on the H200),
so a compile still running after this is stuck (a ptxas that never returns): the boot goes on
without it, and says so, instead of hanging."""


def deadline() -> float:
    """A pass's deadline on the monotonic clock."""
    return time.monotonic() + DEADLINE_S


@contextlib.contextmanager
def parallel_compiles(until: float | None = None) -> Iterator[bool]:
    """Triton's parallel compile mode (3.4+) for the block: compiles go to threads, and every
    kernel is in its cache when the block ends, but those unfinished at ``until`` (default: a
    fresh ``deadline()``), which ``settle`` drops and reports. Yields False where Triton lacks
    the mode."""
    try:
        from triton.runtime import _async_compile
    except ImportError:
        yield False
        return
    if getattr(_async_compile, "AsyncCompileMode", None) is None:
        yield False
        return
    pool = DaemonPool(COMPILE_THREADS)
    try:
        with _bounded(_async_compile, pool, deadline() if until is None else until):
            yield True
    finally:
        pool.shutdown()


class DaemonPool:
    """The executor Triton's compile mode submits to, on daemon threads: a stuck compile's
    thread must not hold the worker at its exit (``ThreadPoolExecutor`` joins its threads
    there, finished or not)."""

    def __init__(self, threads: int) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"b12x-compile-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[], Any]) -> Future:
        future: Future = Future()
        self._queue.put((future, fn))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # the compile's own failure, for settle to report
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Cancel what has not started, and let idle threads end."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)


def _bounded(module: Any, pool: Any, until: float) -> Any:
    """Triton's ``AsyncCompileMode`` whose exit waits for the compiles until ``until`` at most
    (Triton's own waits without a limit): what is unfinished then is taken off the list
    Triton's exit waits on, and the rest of that exit is Triton's."""

    class Bounded(module.AsyncCompileMode):
        def __exit__(self, *exc: object) -> Any:
            futures = getattr(self, "raw_futures", None)
            if isinstance(futures, list) and futures:
                left = max(0.0, until - time.monotonic())
                unfinished = wait(list(futures), timeout=left).not_done
                if unfinished:
                    futures[:] = [f for f in futures if f not in unfinished]
                    running = sum(f.running() for f in unfinished)
                    logger.warning(
                        "b12x-launch: at the compile deadline %d Triton compiles were still "
                        "running and %d not started; the boot goes on without them",
                        running,
                        len(unfinished) - running,
                    )
            return super().__exit__(*exc)

    return Bounded(pool, ignore_errors=True)


@contextlib.contextmanager
def compile_only(kernels: Sequence[Any], later: list[Compiling] | None = None) -> Iterator[None]:
    """Inside the block, a launch of one of ``kernels`` (``@triton.jit`` functions) compiles
    its key in a thread and returns without running: the caller's outputs hold garbage. When
    the block ends each key is compiled and loaded (``settle``), also when the block raises: an
    unfinished compile left in a cache would stop serving's first launch of its key; what
    failed is logged.

    With ``later`` the block ends without waiting: the launches run as before from then on,
    the compiles go on in their threads beside whatever the caller does next, and a
    ``Compiling`` appended to ``later`` settles them. A launch of a key still compiling waits
    for it (the cache holds Triton's ``FutureKernel``, whose attributes wait for the compile).
    """
    compiling = Compiling.start(kernels) if later is not None else None
    if compiling is not None:
        try:
            with _compile_only_launches(kernels):
                yield
        finally:
            later.append(compiling.leave())
        return
    patched = False
    try:
        with parallel_compiles() as parallel:
            if not parallel or not kernels:
                yield
                return
            with _compile_only_launches(kernels):
                patched = True
                yield
    finally:
        for fn in kernels if patched else ():
            for failed in settle(fn)[1]:
                logger.warning(
                    "b12x-launch: compile-only launch: %s (compiled again if used)", failed
                )


def _compile_only_launches(kernels: Sequence[Any]) -> contextlib.AbstractContextManager[None]:
    """Every launch of ``kernels`` compiles only while the block runs (a ``run_chain``
    layer: what other layers observe stays observed, and each comes off alone)."""
    from launcher.runtime import run_chain

    return run_chain.observing(kernels, lambda fn: compile_only_run)


class Compiling:
    """A compile-only pass's compiles, left running in their threads (``compile_only`` with
    ``later``) until ``settle``."""

    def __init__(self, kernels: Sequence[Any], module: Any) -> None:
        self._kernels, self._module = kernels, module
        self._until = deadline()
        self._pool = DaemonPool(COMPILE_THREADS)
        # Triton's own mode: its exit (which waits without a limit) never runs; settle waits.
        self._mode = module.AsyncCompileMode(self._pool, ignore_errors=True)
        self.keys = 0
        self.left = 0.0
        self.last_done = 0.0
        """When the pass's block ended, and when its last compile finished (monotonic)."""

    @classmethod
    def start(cls, kernels: Sequence[Any]) -> Compiling | None:
        """Triton's compile mode entered on this thread; None where nothing would compile in
        threads (no kernels, or a Triton without the mode: the launches then compile inline)."""
        try:
            from triton.runtime import _async_compile
        except ImportError:
            return None
        if not kernels or getattr(_async_compile, "AsyncCompileMode", None) is None:
            return None
        compiling = cls(kernels, _async_compile)
        compiling._mode.__enter__()
        return compiling

    def leave(self) -> Compiling:
        """This thread out of the compile mode without Triton's wait: ``settle`` waits."""
        self._module.active_mode.set(None)
        self.left = time.monotonic()
        self.keys = len(self._mode.raw_futures)
        for future in self._mode.raw_futures:
            future.add_done_callback(self._finished)
        return self

    def _finished(self, _: Future) -> None:
        self.last_done = max(self.last_done, time.monotonic())

    @property
    def beside(self) -> float:
        """How long its compiles went on after the pass's block ended (0: none did)."""
        return max(0.0, self.last_done - self.left)

    def settle(self) -> tuple[int, list[str], float]:
        """Wait for the compiles (until the pass's deadline), load every key, drop the failed
        and the unfinished, end the threads: (keys loaded, ``kernel: error`` each, seconds
        waited here)."""
        start = time.monotonic()
        futures = list(self._mode.raw_futures)
        wait(futures, timeout=max(0.0, self._until - start))
        for future in futures:
            if future.done() and not future.cancelled():  # into the kernel's cache, as Triton
                self._mode.future_kernels[future._key].result(ignore_errors=True)
        self._pool.shutdown()
        loaded, failed = 0, []
        for fn in self._kernels:
            n, errors = settle(fn)
            loaded, failed = loaded + n, failed + errors
        return loaded, failed, time.monotonic() - start


def compile_only_run(run: Any, thread: int | None = None) -> Any:
    """``run`` whose launches compile only (Triton's ``warmup``): every launch, or those made
    on ``thread`` alone (the others run as before)."""

    def compile_key(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        here = thread is None or threading.get_ident() == thread
        return run(*args, grid=grid, warmup=warmup or here, **kwargs)

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
                if future is not None and future.cancelled():
                    raise TimeoutError(
                        "not started: the compile threads were stuck at the deadline"
                    )
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
