"""What the compile-only pass leaves in a kernel's cache (Triton's real compile needs a GPU:
tests/gpu/test_key_enumeration.py)."""

import threading
import time
from types import SimpleNamespace

import pytest

from launcher.runtime.prewarm.parallel_compile import (
    _compiling,
    compile_only,
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
    run = _compiling(lambda *a, grid, warmup, **k: calls.append((a, grid, warmup, k)))
    run(1, 2, grid=(4,), warmup=False, BLOCK=8)
    assert calls == [((1, 2), (4,), True, {"BLOCK": 8})]


def _stuck_block(release, cache, monkeypatch, threads=2):
    """A block whose first compile never returns (until ``release``) beside one that does,
    and, with one thread, one that never starts; run in a thread with a 0.2 s deadline."""
    from triton.runtime import _async_compile

    from launcher.runtime.prewarm import parallel_compile

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
