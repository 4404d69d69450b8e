"""One wrapper on a Triton kernel's ``run`` (``runtime.run_chain``): layers compose, come
off in any order, and leave the kernel's ``run`` as it was.

A stand-in kernel class with Triton's attribute (a ``run`` method) serves in the unit tier,
which has no Triton; the last test takes a real ``triton.jit`` kernel where Triton imports.
"""

from __future__ import annotations

import itertools
import threading

import pytest

from launcher.runtime import run_chain
from tests.conftest import need_serving


class Kernel:
    """A stand-in of ``JITFunction``: its ``run`` is a method of the class."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def run(self, *args, grid=None, warmup=False, **kwargs):
        self.calls.append({"warmup": warmup})
        return "ran"


def tagging(tag: str, seen: list[str]) -> run_chain.Layer:
    def layer(below):
        def run(*args, **kwargs):
            seen.append(tag)
            return below(*args, **kwargs)

        return run

    return layer


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_layers_removed_in_any_order_leave_the_original_run(order):
    kernel, seen = Kernel(), []
    held = [run_chain.observe(kernel, tagging(t, seen)) for t in "abc"]
    assert kernel.run(grid=(1,)) == "ran"
    assert seen == ["c", "b", "a"]  # the last one on is the outermost
    removed: set[int] = set()
    for i in order:
        held[i].remove()
        removed.add(i)
        seen.clear()
        kernel.run(grid=(1,))
        assert seen == [t for j, t in enumerate("abc") if j not in removed][::-1]
    assert "run" not in vars(kernel)  # the class's method again
    assert run_chain.layers(kernel) == 0
    held[0].remove()  # again: nothing


def test_nested_observers_each_see_the_launches_of_their_block():
    from launcher.runtime.prewarm.accelerators import parallel_compile

    kernel, seen = Kernel(), []
    with run_chain.observing([kernel], lambda fn: tagging("outer", seen)):
        with run_chain.observing([kernel], lambda fn: parallel_compile.compile_only_run):
            kernel.run(grid=(1,), warmup=False)
        kernel.run(grid=(1,), warmup=False)
    kernel.run(grid=(1,), warmup=False)
    assert seen == ["outer", "outer"]
    assert [c["warmup"] for c in kernel.calls] == [True, False, False]
    assert "run" not in vars(kernel)


def test_a_wrapper_from_outside_the_chain_is_below_it_and_put_back():
    kernel = Kernel()
    theirs_calls = []
    original = kernel.run

    def theirs(*args, **kwargs):
        theirs_calls.append(1)
        return original(*args, **kwargs)

    kernel.run = theirs
    layered = run_chain.observe(kernel, tagging("ours", []))
    kernel.run(grid=(1,))
    layered.remove()
    assert vars(kernel)["run"] is theirs and theirs_calls == [1]


def test_a_wrapper_put_on_over_the_chain_stays_and_the_chain_passes_through_under_it():
    kernel, seen = Kernel(), []
    layered = run_chain.observe(kernel, tagging("ours", seen))
    chain = kernel.run
    kernel.run = lambda *a, **k: chain(*a, **k)
    over = kernel.run
    layered.remove()
    assert vars(kernel)["run"] is over
    kernel.run(grid=(1,))
    assert seen == [] and len(kernel.calls) == 1  # nothing of ours left in the call
    again = run_chain.observe(kernel, tagging("again", seen))  # the same chain, under theirs
    kernel.run(grid=(1,))
    again.remove()
    assert seen == ["again"] and vars(kernel)["run"] is over


def test_a_layer_per_thread_leaves_other_threads_launches_alone():
    from launcher.runtime.prewarm.accelerators import sampler_ahead

    kernel = Kernel()
    patch = sampler_ahead.CompileOnlyHere(kernel, threading.get_ident())
    other = threading.Thread(target=lambda: kernel.run(grid=(1,), warmup=False))
    other.start()
    other.join()
    kernel.run(grid=(1,), warmup=False)
    patch.close()
    assert [c["warmup"] for c in kernel.calls] == [False, True]
    assert "run" not in vars(kernel)


def test_a_real_triton_kernel_gets_its_classs_run_back():
    triton = need_serving("triton")

    def _noop(x):
        pass

    fn = triton.jit(_noop)
    before = type(fn).run
    seen: list[str] = []
    first = run_chain.observe(fn, tagging("a", seen))
    second = run_chain.observe(fn, tagging("b", seen))
    first.remove()
    assert run_chain.layers(fn) == 1
    second.remove()
    assert "run" not in vars(fn) and type(fn).run is before
