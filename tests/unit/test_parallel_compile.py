"""What the compile-only pass leaves in a kernel's cache (Triton's real compile needs a GPU:
tests/gpu/test_key_enumeration.py)."""

import threading
import time
from types import SimpleNamespace

import pytest

from launcher.runtime.prewarm.accelerators.parallel_compile import (
    compile_only,
    compile_only_run,
    parallel_compiles,
    settle,
)
from tests.conftest import need_serving


class Compiled:
    def __init__(self) -> None:
        self.module = None

    def _init_handles(self) -> None:
        self.module = "loaded"


class Failed:
    """A future whose compile raised (Triton's ``FutureKernel``)."""

    def result(self):
        raise RuntimeError("ptxas died")


def test_settle_loads_what_compiled_and_drops_what_failed():
    good, pending = Compiled(), Compiled()
    cache = {"a": good, "b": Failed(), "c": SimpleNamespace(result=lambda: pending)}
    fn = SimpleNamespace(__name__="fused_moe_kernel", device_caches={0: (cache, {})})
    loaded, failed = settle(fn)
    assert failed == ["fused_moe_kernel: RuntimeError: ptxas died"]
    assert set(cache) == {"a", "c"}  # serving compiles "b" again instead of tripping on it
    assert good.module == "loaded" and pending.module == "loaded"
    assert loaded == 2


def test_a_compile_only_launch_asks_triton_for_warmup():
    calls = []
    run = compile_only_run(lambda *a, grid, warmup, **k: calls.append((a, grid, warmup, k)))
    run(1, 2, grid=(4,), warmup=False, BLOCK=8)
    assert calls == [((1, 2), (4,), True, {"BLOCK": 8})]


def _stuck_block(release, cache, monkeypatch, threads=2):
    """A block whose first compile never returns (until ``release``) beside one that does,
    and, with one thread, one that never starts; run in a thread with a 0.2 s deadline."""
    from triton.runtime import _async_compile

    from launcher.runtime.prewarm.accelerators import parallel_compile

    monkeypatch.setattr(parallel_compile, "COMPILE_THREADS", threads)
    after: dict = {}

    def block() -> None:
        with parallel_compiles(time.monotonic() + 0.2):
            mode = _async_compile.active_mode.get()
            cache["stuck"] = mode.submit("stuck", release.wait, lambda k: None)
            cache["fine"] = mode.submit("fine", Compiled, lambda k: None)
            after["threads"] = [t for t in threading.enumerate() if t.name.startswith("b12x-")]
        after["mode"] = _async_compile.active_mode.get()

    worker = threading.Thread(target=block, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the block waited on a compile that never returns"
    return after


def test_a_stuck_compile_is_dropped_at_the_deadline_instead_of_hanging_the_block(monkeypatch):
    need_serving("triton")  # the code under test imports Triton
    release, cache = threading.Event(), {}
    try:
        after = _stuck_block(release, cache, monkeypatch)
        loaded, failed = settle(SimpleNamespace(__name__="k", device_caches={0: (cache, {})}))
    finally:
        release.set()
    assert loaded == 1 and set(cache) == {"fine"}
    assert failed == ["k: TimeoutError: still compiling at the deadline (stuck)"]
    assert after["mode"] is None  # Triton's own exit ran: the next block may open its mode
    # A stuck compile's thread must not hold the worker at exit (ThreadPoolExecutor's would).
    assert after["threads"] and all(t.daemon for t in after["threads"])


def test_a_compile_that_never_started_is_reported_as_such(monkeypatch):
    need_serving("triton")  # the code under test imports Triton
    release, cache = threading.Event(), {}
    try:
        _stuck_block(release, cache, monkeypatch, threads=1)
        _, failed = settle(SimpleNamespace(__name__="k", device_caches={0: (cache, {})}))
    finally:
        release.set()
    assert failed == [
        "k: TimeoutError: still compiling at the deadline (stuck)",
        "k: TimeoutError: not started: the compile threads were stuck at the deadline",
    ]
    assert not cache


def test_compile_only_settles_its_kernels_when_the_block_raises(monkeypatch):
    """Unsettled, a failed compile's future stays in the cache and trips serving's launch."""
    need_serving("triton")  # the code under test imports Triton
    cache = {"bad": Failed(), "good": Compiled()}
    fn = SimpleNamespace(__name__="fused_moe_kernel", device_caches={0: (cache, {})})
    fn.run = lambda *a, **k: None
    with pytest.raises(RuntimeError, match="bucket"), compile_only([fn]):
        raise RuntimeError("a bucket's forward failed")
    assert set(cache) == {"good"} and cache["good"].module == "loaded"


def _submitting_kernel(cache: dict, compile_fn) -> SimpleNamespace:
    """A kernel whose launch does what Triton's ``_do_compile`` does under the compile mode:
    puts the mode's future in its cache, the compile in the mode's threads."""
    from triton.runtime import _async_compile

    def run(*args, grid, warmup, **kwargs):
        assert warmup, "a compile-only launch runs nothing"
        key = args[0]
        mode = _async_compile.active_mode.get()
        finalize = lambda kernel: cache.__setitem__(key, kernel)  # noqa: E731 (Triton's shape)
        cache[key] = mode.submit(key, compile_fn, finalize)

    return SimpleNamespace(__name__="fused_moe_kernel", device_caches={0: (cache, {})}, run=run)


def test_compile_only_later_ends_its_block_before_its_compiles_and_settles_them_after():
    need_serving("triton")  # the code under test imports Triton
    from triton.runtime import _async_compile

    release, cache, later = threading.Event(), {}, []
    fn = _submitting_kernel(cache, lambda: release.wait(30) and Compiled())
    launch = fn.run
    with compile_only([fn], later=later):
        fn.run("n=16", grid=(1,), warmup=False)
    # Out of the block with the compile still running: the caller's next pass goes on.
    assert _async_compile.active_mode.get() is None and fn.run is launch
    assert [c.keys for c in later] == [1] and not isinstance(cache["n=16"], Compiled)
    time.sleep(0.05)
    release.set()
    loaded, failed, _ = later[0].settle()
    assert (loaded, failed) == (1, []) and cache["n=16"].module == "loaded"
    assert later[0].beside >= 0.05  # it compiled on after the block had ended


def test_compile_only_later_drops_a_compile_still_stuck_at_the_deadline(monkeypatch):
    need_serving("triton")  # the code under test imports Triton
    from launcher.runtime.prewarm.accelerators import parallel_compile

    monkeypatch.setattr(parallel_compile, "DEADLINE_S", 0.2)
    release, cache, later = threading.Event(), {}, []
    fn = _submitting_kernel(cache, lambda: release.wait(30) and Compiled())
    try:
        with compile_only([fn], later=later):
            fn.run("n=16", grid=(1,), warmup=False)
        loaded, failed, _ = later[0].settle()
    finally:
        release.set()
    assert loaded == 0 and failed == [
        "fused_moe_kernel: TimeoutError: still compiling at the deadline (stuck)"
    ]
    assert not cache  # serving's first launch of that key compiles it itself
