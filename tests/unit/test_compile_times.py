"""The prewarm's compile timer: Triton's own hook slots, called the way its JIT calls them, from
the stage's thread and from a compile thread; the line names what the stage's thread waited on."""

from __future__ import annotations

import threading
import time
import types

from launcher.runtime import jit_watch
from launcher.runtime.prewarm.diagnostics import compile_times
from tests.conftest import need_serving


def _compile(obj, pre, post, name: str, seconds: float, warmup: bool = False) -> None:
    """One compile as Triton's ``JITFunction._do_compile`` reports it: pre hook, work, post."""
    fn = types.SimpleNamespace(
        module="vllm.v1.sample.ops", name=name, jit_function=types.SimpleNamespace(arg_names=[])
    )
    kw = dict(key=f"{name}-key", repr=name, fn=fn, compile={}, is_manual_warmup=warmup)
    assert getattr(obj, pre)(**kw) is None  # None: Triton goes on and compiles
    time.sleep(seconds)
    getattr(obj, post)(**kw, already_compiled=False)


def test_the_timer_names_the_stage_threads_slowest_compiles_and_counts_the_rest_beside():
    need_serving("triton")  # the hooks installed are Triton's own
    with compile_times.timed() as compiles:
        obj, pre, post = jit_watch._runtime_slots()
        _compile(obj, pre, post, "_topk_topp_kernel", 0.05)
        _compile(obj, pre, post, "expand_kernel", 0.0)
        _compile(obj, pre, post, "fused_moe_kernel", 0.0, warmup=True)  # compile-only
        other = threading.Thread(target=_compile, args=(obj, pre, post, "k_beside", 0.0))
        other.start()
        other.join()
    assert compiles.hooked
    waited = compiles.on_thread()
    assert [e.kernel.rsplit(".", 1)[-1] for e in waited] == ["_topk_topp_kernel", "expand_kernel"]
    assert waited[0].seconds >= 0.05
    line = compiles.describe()
    assert line.startswith("compiles in the prewarm: 2 Triton keys on its thread, ")
    assert "(slowest: _topk_topp_kernel " in line
    assert "; 2 compile-only or on other threads; 0 Inductor kernels reported" in line


def test_the_timer_puts_triton_s_hooks_back_as_they_were():
    need_serving("triton")
    obj, pre, post = jit_watch._runtime_slots()
    before = (getattr(obj, pre), getattr(obj, post))
    with compile_times.timed():
        assert getattr(obj, pre) is not before[0]
    assert (getattr(obj, pre), getattr(obj, post)) == before


def test_without_triton_the_line_says_no_times_were_taken():
    compiles = compile_times.StageCompiles(thread=threading.get_ident(), started=0.0)
    assert compiles.describe() == "compile times not taken: Triton's hooks are not there"
