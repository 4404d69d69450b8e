"""The early key enumeration: keys compiled into Triton's disk cache during the waves, found
there by the key pass's own compile; its threads end before the key pass.

Triton compiles for an H200 target here without a GPU (ptxas comes with its wheel): the disk
cache entries are real. A launch needs a GPU, so the kernel's per-device caches are set as
Triton's binder leaves them after one launch.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.runtime.prewarm.providers import early_keys, keys
from tests.conftest import need_serving

try:
    import triton.language as tl  # the test kernel's globals, read when Triton compiles it
except ImportError:  # the unit tier alone: the tests that compile need the integration tier
    tl = None

RANGES = keys.Ranges.of(8, 2048, 0)
OPTIONS = "{'debug': False}"
LAUNCHED = (("*fp32", "D"), ("i32", ""), ("constexpr", 128))
"""``x_ptr`` aligned, ``num_tokens`` of the "other" class, ``BLOCK=128``: one launch."""


def _copy_kernel(x_ptr, num_tokens, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < num_tokens) + 1.0, mask=i < num_tokens)


def _cubins(root: Path) -> set[Path]:
    return {p.parent for p in root.rglob("*.cubin")}


@pytest.fixture
def launched_once(tmp_path, monkeypatch):
    """A real ``@triton.jit`` kernel whose caches hold one launch on device 0 (an H200
    target), compiling into a disk cache of its own."""
    need_serving("triton")  # the code under test compiles with Triton
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend

    from launcher.runtime import jit_watch

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    fn = triton.jit(_copy_kernel)
    target = GPUTarget("cuda", 90, 32)
    fn.compile, fn.ASTSource = compile, ASTSource  # what Triton's create_binder sets
    key_cache = {(LAUNCHED, OPTIONS): "launched"}
    fn.device_caches = {0: ({"launched": object()}, key_cache, target, make_backend(target), None)}
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    return fn, tmp_path


def test_early_keys_land_in_the_disk_cache_where_the_key_pass_compile_finds_them(launched_once):
    """``num_tokens`` reaches 1, a multiple of 16 and other over 1..2048 tokens: the two
    missing keys compile in the background; the key pass's compile of each (Triton's
    ``_do_compile`` calls the same ``compile``) then adds nothing to the cache."""
    fn, cache = launched_once
    early = early_keys.EarlyKeys(RANGES, threads=2)
    early.served = ({keys.kernel_name(fn)},)
    assert early.submit() == 2
    assert early.submit() == 0  # nothing launched since: nothing enumerated again
    assert early.settled(timeout=120)  # the waves went on meanwhile
    closed = early.close()
    assert (closed.finished, closed.failed, closed.cancelled) == (2, 0, 0), early.account()
    compiled = _cubins(cache)
    assert len(compiled) == 2

    launches = [(LAUNCHED, OPTIONS)]
    enumerated = keys.enumerate_keys(keys.kernel_name(fn), keys.params_of(fn), launches, RANGES)
    _, _, target, backend, _ = fn.device_caches[0]
    for spec, _ in enumerated.missing:  # what the key pass's _do_compile does with each
        bound = {
            p.name: e[1] if e[0] == "constexpr" else None
            for p, e in zip(fn.params, spec, strict=True)
        }
        opts, signature, constexprs, attrs = fn._pack_args(
            backend, {"debug": False}, bound, list(spec), {"debug": False}
        )
        fn.compile(fn.ASTSource(fn, signature, constexprs, attrs), target, opts.__dict__)
    assert _cubins(cache) == compiled  # every key the pass compiles was a cache hit


def test_a_kernel_no_serving_pass_launched_is_left_to_the_key_pass(launched_once):
    _, cache = launched_once
    early = early_keys.EarlyKeys(RANGES, threads=1)
    early.served = ({"vllm.other.kernel"},)
    assert early.submit() == 0
    early.close()
    assert not _cubins(cache)


def _served_kernel_missing(specs: str, thunk, monkeypatch) -> early_keys.EarlyKeys:
    """Early keys on one thread for a served kernel missing a key per letter of ``specs``,
    each compiled by ``thunk()``."""
    from launcher.runtime import jit_watch

    fn = SimpleNamespace(fn=SimpleNamespace(__module__="vllm.fake", __qualname__="k"), params=[])
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    monkeypatch.setattr(keys, "launched", lambda f: {0: [("launched", OPTIONS)]})
    monkeypatch.setattr(keys, "params_of", lambda f: [])
    missing = SimpleNamespace(missing=[(spec, OPTIONS) for spec in specs])
    monkeypatch.setattr(keys, "enumerate_keys", lambda *a: missing)
    monkeypatch.setattr(early_keys, "disk_compile", lambda *a: thunk())
    early = early_keys.EarlyKeys(RANGES, threads=1)
    early.served = ({"vllm.fake.k"},)
    return early


def test_close_cancels_what_has_not_started_and_waits_for_what_runs(monkeypatch):
    """One thread, three keys: the first runs when the key pass starts, the two queued behind
    it go to the pass's own 16 threads instead of waiting their turn here."""

    running, release = threading.Event(), threading.Event()
    done: list[str] = []

    def thunk_for(name: str):
        def compile_() -> None:
            running.set()
            release.wait(5)
            done.append(name)

        return compile_

    specs = iter("abc")
    early = _served_kernel_missing("abc", lambda: thunk_for(next(specs)), monkeypatch)
    assert early.submit() == 3
    assert running.wait(5)
    threading.Timer(0.2, release.set).start()
    closed = early.close()
    assert (closed.finished, closed.cancelled, closed.unfinished) == (1, 2, 0)
    assert done == ["a"] and closed.waited >= 0.1
    assert early.submit() == 0  # closed: nothing more is handed to ended threads


def test_a_failing_enumeration_stops_early_submitting_and_never_raises(monkeypatch):
    from launcher.runtime import jit_watch

    def broken() -> list:
        raise RuntimeError("a cache layout of another Triton")

    monkeypatch.setattr(jit_watch, "jit_functions", broken)
    early = early_keys.EarlyKeys(RANGES, threads=1)
    assert early.submit() == 0
    assert "early submitting stopped: RuntimeError: a cache layout" in early.account()


def test_a_failed_early_compile_is_counted_and_left_to_the_key_pass(monkeypatch):

    def ptxas_died() -> None:
        raise RuntimeError("ptxas died")

    early = _served_kernel_missing("a", lambda: ptxas_died, monkeypatch)
    assert early.submit() == 1 and early.settled(timeout=5)
    assert early.close().failed == 1
    assert "1 failed (compiled again here), first: RuntimeError: ptxas died" in early.account()


def test_each_serving_pass_hands_its_live_launches_to_the_early_enumeration(monkeypatch):
    """Inside a serving pass the enumeration reads the kernels launched so far (the block's
    live set, not the one filled at its end); after the pass it submits once more."""
    from launcher.runtime import jit_watch
    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.prewarm.providers import vllm_warmup

    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [])
    seen: list[set[str]] = []

    class Recording:
        served: tuple = ()

        def submit(self) -> int:
            seen.append(set().union(*self.served))
            return 0

    def waves() -> None:
        live = ctx.early.served[1]
        live.add("vllm.fake.sampler_kernel")  # what launched_in_block's wrapper does
        ctx.early.submit()  # serve()'s after_wave

    point = vllm_warmup.EntryPoint(
        "serving_batches", lambda c: "waves", lambda c: [("waves", waves)], serving=True
    )
    ctx = SimpleNamespace(early=Recording())
    serving = vllm_warmup.Serving(launches={"vllm.fake.moe"})
    vllm_warmup._run_points([point], ctx, PrewarmResult("vllm"), serving)
    assert seen == [{"vllm.fake.moe", "vllm.fake.sampler_kernel"}] * 2
