"""What the compile-only pass leaves in a kernel's cache (Triton's real compile needs a GPU:
tests/gpu/test_key_enumeration.py)."""

import threading
from types import SimpleNamespace

from launcher.runtime.prewarm.parallel_compile import _compiling, parallel_compiles, settle


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


def test_a_stuck_compile_is_dropped_at_the_deadline_instead_of_hanging_the_block():
    from triton.runtime import _async_compile

    release, ended = threading.Event(), threading.Event()
    cache: dict = {}

    def block() -> None:
        with parallel_compiles(deadline_s=0.2):
            mode = _async_compile.active_mode.get()
            cache["stuck"] = mode.submit("stuck", release.wait, lambda k: None)
            cache["fine"] = mode.submit("fine", Compiled, lambda k: None)
        ended.set()

    worker = threading.Thread(target=block, daemon=True)
    worker.start()
    try:
        assert ended.wait(30), "the block waited on a compile that never returns"
        fn = SimpleNamespace(__name__="k", device_caches={0: (cache, {})})
        loaded, failed = settle(fn)
    finally:
        release.set()
    assert loaded == 1 and set(cache) == {"fine"}
    assert failed == ["k: TimeoutError: still compiling at the deadline (stuck)"]
    assert _async_compile.active_mode.get() is None
