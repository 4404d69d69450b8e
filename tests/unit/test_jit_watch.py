"""launcher.runtime.jit_watch without a GPU: the hook logic through a stand-in hook holder, and
the hook slots of the installed Triton (skipped when triton is missing)."""

from __future__ import annotations

import types

import pytest

from launcher.runtime.jit_watch import JitWatch, LateCompileError
from tests.conftest import need_serving


class Slots:
    jit_cache_hook = None
    jit_post_compile_hook = None


def _compile(slots, name="gather", constants=None, key="k1"):
    """Call the hooks the way Triton's JITFunction._do_compile does."""
    jit_function = types.SimpleNamespace(arg_names=["src", "dst", "n", "DCP", "BLOCK"])
    fn = types.SimpleNamespace(module="kernels", name=name, jit_function=jit_function)
    kw = dict(
        key=key,
        repr=f"{name}[num_warps=4]",
        fn=fn,
        compile={"key": key, "device": 0, "constants": constants or {(3,): 4, (4,): 1024}},
        is_manual_warmup=False,
        already_compiled=False,
    )
    if slots.jit_cache_hook is not None and slots.jit_cache_hook(**kw):
        return "skipped"
    if slots.jit_post_compile_hook is not None:
        slots.jit_post_compile_hook(**kw)
    return "compiled"


@pytest.fixture
def slots():
    s = Slots()
    s.jit_cache_hook = None
    s.jit_post_compile_hook = None
    return s


def _watch(s):
    return JitWatch(slots=(s, "jit_cache_hook", "jit_post_compile_hook"))


def test_counts_compiles_and_names_the_specialization(slots):
    w = _watch(slots)
    assert w.install()
    _compile(slots)
    _compile(slots, key="k2", constants={(3,): 2, (4,): 1024})
    assert w.count == 2 and w.late_count == 0
    e = w.events[0]
    assert e.kernel == "kernels.gather"
    assert e.constexprs == {"DCP": 4, "BLOCK": 1024}
    assert e.describe() == "kernels.gather[DCP=4, BLOCK=1024]"
    assert e.seconds is not None and e.device == 0


def test_armed_compiles_are_late_and_reported(slots):
    w = _watch(slots)
    w.install()
    _compile(slots)
    seen = []
    assert w.arm(seen.append)
    _compile(slots, key="late")
    assert w.count == 2 and w.late_count == 1
    assert [e.key for e in seen] == ["late"]
    w.disarm()
    _compile(slots, key="after")
    assert w.count == 3 and w.late_count == 1


def test_strict_raises_before_the_compile(slots):
    w = _watch(slots)
    w.arm(strict=True)
    with pytest.raises(LateCompileError) as err:
        _compile(slots, key="late")
    assert "kernels.gather[DCP=4, BLOCK=1024]" in str(err.value)
    assert err.value.event.late


def test_chains_and_restores_previous_hooks(slots):
    calls = []
    slots.jit_cache_hook = lambda **kw: calls.append(("pre", kw["key"]))
    slots.jit_post_compile_hook = lambda **kw: calls.append(("post", kw["key"]))
    prev = slots.jit_cache_hook
    w = _watch(slots)
    w.install()
    assert _compile(slots) == "compiled"
    assert calls == [("pre", "k1"), ("post", "k1")]
    w.uninstall()
    assert slots.jit_cache_hook is prev and not w.installed


def test_a_previous_hook_may_still_skip_the_compile(slots):
    slots.jit_cache_hook = lambda **kw: True
    w = _watch(slots)
    w.install()
    assert _compile(slots) == "skipped"
    assert w.count == 1


def test_install_without_triton_is_a_no_op(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_triton(name, *a, **kw):
        if name == "triton" or name.startswith("triton."):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_triton)
    w = JitWatch()
    assert not w.install() and not w.arm()


def test_real_triton_hook_slots():
    triton = need_serving("triton")
    w = JitWatch()
    assert w.install()
    obj, pre, post = w._slots
    try:
        assert getattr(obj, pre) == w._pre_hook
        assert getattr(obj, post) == w._post_hook
        if hasattr(triton, "knobs"):
            assert obj is triton.knobs.runtime
    finally:
        w.uninstall()
    assert getattr(obj, pre) != w._pre_hook


def test_loaded_counts_triton_specializations_without_installing_a_hook(monkeypatch):
    """The prewarm's count reads Triton's in-process caches; no hook slot is touched."""
    import sys
    import types

    need_serving("triton")
    import triton
    from triton.runtime.jit import JITFunction

    from launcher.runtime import jit_watch

    def add(x_ptr, n):
        pass

    kernel = JITFunction(add)
    module = types.ModuleType("fake_kernels_for_loaded")
    module.add = kernel
    monkeypatch.setitem(sys.modules, module.__name__, module)
    slots = triton.knobs.runtime
    hooks = (slots.jit_cache_hook, slots.jit_post_compile_hook)
    before = jit_watch.loaded()
    # what two compiles (or disk loads) leave: (kernel cache, key cache, target, backend, binder)
    kernel.device_caches = {0: ({"spec-a": object(), "spec-b": object()}, {}, None, None, None)}
    name = f"{__name__}.{add.__qualname__}"
    assert jit_watch.new_since(before) == {name: 2}
    assert (
        triton.knobs.runtime.jit_cache_hook,
        triton.knobs.runtime.jit_post_compile_hook,
    ) == hooks


def test_a_compile_only_pass_inside_a_serving_block_leaves_both_wrappers_sound():
    """On the H200 the MoE buckets' compile-only pass took the serving block's ``run`` wrapper
    off with its own, and the block's unwrap then raised AttributeError: the buckets failed and
    the waves' kernels went unrecorded (so the key enumeration skipped them)."""
    from types import SimpleNamespace

    from launcher.runtime import jit_watch
    from launcher.runtime.prewarm.accelerators import parallel_compile

    class Kernel:
        def __init__(self):
            self.fn = SimpleNamespace(__module__="vllm.fake", __qualname__="k")
            self.device_caches = {}
            self.calls = 0

        def run(self, *args, grid=None, warmup=False, **kwargs):
            self.calls += 1

    kernel = Kernel()
    real = jit_watch.jit_functions
    jit_watch.jit_functions = lambda: [kernel]
    try:
        with jit_watch.launched_in_block() as found:
            with parallel_compile.compile_only([kernel]):
                kernel.run(grid=(1,), warmup=False)
            kernel.run(grid=(1,), warmup=False)  # our wrapper is back on after the pass
    finally:
        jit_watch.jit_functions = real
    assert found == {"vllm.fake.k"} and "run" not in vars(kernel) and kernel.calls == 2


def test_the_kernel_census_reads_a_module_again_only_when_it_grew_or_was_replaced(
    monkeypatch, tmp_path
):
    """The stage asks after every wave: unchanged modules are not read again, and a kernel a
    module gains later (one still importing) or a module put in another's place is found."""
    need_serving("triton")
    import importlib.util
    import sys

    from launcher.runtime import jit_watch

    source = tmp_path / "census_kernels.py"
    source.write_text(
        "import triton\n"
        + "".join(f"@triton.jit\ndef {n}(x):\n    pass\n" for n in ("first", "second", "third"))
    )
    spec = importlib.util.spec_from_file_location("census_kernels", source)
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    kernel_named = lambda name: getattr(kernels, name)  # noqa: E731

    module = types.ModuleType("fake_kernels_census")
    module.first = kernel_named("first")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    names = lambda: {f.fn.__name__ for f in jit_watch.jit_functions()}  # noqa: E731
    assert "first" in names()
    held = jit_watch._SCANNED[module.__name__]
    assert "first" in names() and jit_watch._SCANNED[module.__name__] is held  # not read again
    module.second = kernel_named("second")  # the module grew
    assert {"first", "second"} <= names()
    other = types.ModuleType(module.__name__)
    other.third = kernel_named("third")
    monkeypatch.setitem(sys.modules, module.__name__, other)  # another module in its place
    assert "third" in names() and not {"first", "second"} & names()
