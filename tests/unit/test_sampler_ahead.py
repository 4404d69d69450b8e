"""The sampler's Triton keys compiled beside the first wave: launches from the ahead thread are
compile-only, every other thread's run as before, and the kernel's ``run`` is back as it was
after ``join``. Triton's own ``kernel[grid](...)`` dispatch is used where Triton is installed."""

from __future__ import annotations

import threading

import pytest

from launcher.runtime.prewarm.accelerators import sampler_ahead as sa
from tests.conftest import need_serving


@pytest.mark.parametrize(
    ("seqs", "spec", "rows"),
    [(12, 3, [8, 16]), (8, 0, [8]), (4, 1, [8]), (4, 0, []), (1, 3, [])],
)
def test_one_row_count_per_batch_size_class_the_triton_sampler_reaches(seqs, spec, rows):
    assert sa.rows_for(seqs, spec) == rows


def _seen(arg):
    """A tensor argument as (shape, dtype); anything else as it is."""
    return (tuple(arg.shape), str(arg.dtype)) if hasattr(arg, "dtype") else arg


class Kernel:
    """A ``@triton.jit`` stand-in: ``kernel[grid](...)`` calls ``self.run`` as Triton's does."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, bool, tuple]] = []

    def run(self, *args, grid, warmup, **kwargs):
        self.calls.append((threading.get_ident(), warmup, tuple(_seen(a) for a in args)))

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def test_only_the_ahead_threads_launches_are_compile_only_and_run_comes_back():
    kernel = Kernel()
    patched = threading.Event()
    ahead = threading.Thread(target=lambda: patched.wait() and kernel[(1,)]("ahead"))
    ahead.start()
    patch = sa.CompileOnlyHere(kernel, ahead.ident)
    patched.set()
    ahead.join()
    kernel[(1,)]("main")
    patch.close()
    assert [(w, a) for _, w, a in kernel.calls] == [(True, ("ahead",)), (False, ("main",))]
    assert "run" not in vars(kernel)


def test_a_wrapper_put_on_before_stays_and_one_put_on_after_is_not_removed():
    kernel = Kernel()
    seen = []
    record = kernel.run

    def serving_record(*args, **kwargs):  # what jit_watch.launched_in_block puts on
        seen.append(kwargs["warmup"])
        return record(*args, **kwargs)

    kernel.run = serving_record
    patch = sa.CompileOnlyHere(kernel, threading.get_ident())
    kernel[(1,)]("here")
    patch.close()
    assert seen == [True] and vars(kernel)["run"] is serving_record
    patch = sa.CompileOnlyHere(kernel, threading.get_ident())
    later = kernel.run
    kernel.run = lambda *a, **k: later(*a, **k)  # someone wraps after us
    theirs = kernel.run
    patch.close()
    assert vars(kernel)["run"] is theirs


def test_the_thread_calls_vllms_wrapper_at_each_row_count_and_flag_compile_only():
    need_serving("torch")  # the thread makes the wrapper's tensors
    kernel = Kernel()

    def wrapper(logits, k, p):  # vLLM's apply_top_k_top_p_triton, reduced to its launch
        kernel[(logits.shape[0],)](logits, k, p)
        return logits

    found = {sa.WRAPPER: wrapper, sa.KERNEL: kernel}
    dtypes = sa.logits_dtypes("bfloat16")
    ahead = sa.SamplerAhead("cpu", 1000, [8, 16], dtypes, find=found.get).start()
    line = ahead.join()
    assert line.startswith(
        "sampler ahead: the top-k/top-p kernel at 8 and 16 rows on float32 and bfloat16 logits, "
        "top-k and top-p, each alone and both, compiled in "
    )
    assert [w for _, w, _ in kernel.calls] == [True] * 12
    # top-p alone hands the wrapper no k (the kernel then gets the logits as K), and so on;
    # V2's sampler hands it the model's dtype when a greedy or seeded row keeps FlashInfer off
    launched = [(*a[0], a[1] is not None, a[2] is not None) for _, _, a in kernel.calls]
    assert launched == [
        (shape, f"torch.{dtype}", top_k, top_p)
        for shape in ((8, 1000), (16, 1000))
        for dtype in ("float32", "bfloat16")
        for top_k, top_p in ((True, True), (True, False), (False, True))
    ]
    assert "run" not in vars(kernel)


def test_a_failing_wrapper_is_reported_and_leaves_the_kernel_as_it_was():
    need_serving("torch")
    kernel = Kernel()

    def wrapper(logits, k, p):
        raise RuntimeError("no CUDA here")

    found = {sa.WRAPPER: wrapper, sa.KERNEL: kernel}
    line = sa.SamplerAhead("cpu", 1000, [8], find=found.get).start().join()
    assert line == "sampler ahead: not done: RuntimeError: no CUDA here"
    assert "run" not in vars(kernel)


def test_the_logits_dtypes_are_float32_and_the_models_own():
    assert sa.logits_dtypes("bfloat16") == ("float32", "bfloat16")
    assert sa.logits_dtypes("float16") == ("float32", "float16")
    assert sa.logits_dtypes("auto") == ("float32", "bfloat16", "float16")


def test_a_vllm_without_the_triton_sampler_starts_no_thread():
    ahead = sa.SamplerAhead("cpu", 1000, [8], find=lambda path: None).start()
    assert ahead.join() == "sampler ahead: not done: this vLLM has no Triton top-k/top-p wrapper"


def test_tritons_own_launch_syntax_goes_through_the_ahead_wrapper():
    triton = need_serving("triton")

    def _noop(x):
        pass

    fn = triton.jit(_noop)
    seen = []
    fn.run = lambda *args, grid, warmup, **kwargs: seen.append(warmup)
    patch = sa.CompileOnlyHere(fn, threading.get_ident())
    fn[(1,)](0)
    other = threading.Thread(target=lambda: fn[(1,)](0))
    other.start()
    other.join()
    patch.close()
    assert seen == [True, False]


def test_the_stage_starts_it_when_wanted_and_only_where_sampled_rows_reach_triton(
    monkeypatch,
):
    from launcher.runtime.prewarm.stage.serving_batches import Shape

    said = []
    reaching = Shape(4096, 2048, 12, 3, 64)
    assert sa.for_stage(reaching, "cpu", False, said.append, wanted=False) is None
    assert said == []
    for shape, replay in ((Shape(4096, 2048, 4, 0, 64), False), (reaching, True)):
        assert sa.for_stage(shape, "cpu", replay, said.append, wanted=True) is None
    assert (
        said == ["sampler ahead: nothing to do (no sampled rows reach vLLM's Triton sampler)"] * 2
    )
