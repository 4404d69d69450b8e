"""What the compile-only pass leaves in a kernel's cache (Triton's real compile needs a GPU:
tests/gpu/test_key_enumeration.py)."""

from types import SimpleNamespace

from launcher.runtime.prewarm.parallel_compile import _compiling, settle


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
