"""The key enumeration covers what sampled traffic launches: vLLM 0.26's sampler kernels bound
with Triton's binder on a CPU (nothing compiles).

On the H200 sampled traffic compiled ``_topk_topp_kernel`` late with one flag on (top-p alone,
what most OpenAI clients send; top-k alone), its ``K`` pointer then the logits' dtype, and at
the rejection sampler's draft rows; and the V2 runner's ``_topk_log_softmax_kernel`` for
logprobs 3. The sources are vLLM 0.26.0's own (tests/run extracts them: ``BLAUNCH_VLLM026_SRC``).
The template is what the serving waves launch once (both flags at 8 rows; logprobs 5, vLLM's
own warmup); what sampled serving launches must be among the enumerated keys.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from launcher.runtime.prewarm.providers import keys as K
from tests.conftest import need, need_serving
from tests.unit.test_key_enumeration import recording

# The GLM tier deployment of issue 40: 8 sequences, 2 speculative tokens (24 draft rows).
RANGES = K.Ranges.of(8, 2048, 2)
TOPK_TOPP = "vllm/v1/sample/ops/topk_topp_triton.py"
LOGPROB = "vllm/v1/worker/gpu/sample/logprob.py"


@pytest.fixture
def triton():
    need_serving("torch")
    return need_serving("triton")


def vllm026(monkeypatch, relative: str, name: str):
    src = os.environ.get("BLAUNCH_VLLM026_SRC", "")
    path = Path(src) / relative
    need("unit", bool(src) and path.is_file(), f"vLLM 0.26's {relative} (tests/run extracts it)")
    need_serving("vllm.platforms")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def enumerated(kernel, launches, ranges=RANGES) -> set:
    e = K.enumerate_keys("vllm.x." + kernel.__name__, K.params_of(kernel), launches, ranges)
    return set(e.keys)


# ------------------------------------------------------------------ _topk_topp_kernel


@pytest.fixture
def topk_topp(monkeypatch, triton):
    module = vllm026(monkeypatch, TOPK_TOPP, "vllm026_topk_topp")
    monkeypatch.setattr(module, "num_compute_units", lambda index: 132)  # an H200's SMs
    seen = recording(monkeypatch, triton, module, "_topk_topp_kernel")
    return module, seen


def sample(module, torch, rows: int, top_k: bool, top_p: bool, dtype=None) -> None:
    """vLLM's sampler on ``rows`` rows of logits (V1: float32) with the flags of the batch."""
    logits = torch.zeros(rows, 32000, dtype=dtype or torch.float32)
    k = torch.full((rows,), 20, dtype=torch.int32) if top_k else None
    p = torch.full((rows,), 0.9) if top_p else None
    module.apply_top_k_top_p_triton(logits, k, p)


def test_one_sided_sampler_keys_at_draft_rows_are_among_the_enumerated(topk_topp):
    import torch

    module, seen = topk_topp
    sample(module, torch, 8, top_k=True, top_p=True)  # the waves' sampled batch
    template = list(seen)
    seen.clear()
    # requests, and the rejection sampler's draft rows; vLLM sorts fewer than 8 in PyTorch
    for rows in (8, 16, 24):
        for top_k, top_p in ((False, True), (True, False), (True, True)):
            sample(module, torch, rows, top_k, top_p)
    served = set(seen)
    kernel = module._topk_topp_kernel
    missing = served - enumerated(kernel, template)
    assert not missing, sorted(missing)
    one_sided = [s for s, _ in served if s[-2:] == (("constexpr", False), ("constexpr", True))]
    assert one_sided and all(s[5] == ("*fp32", "D") for s in one_sided)  # K is the logits


def test_without_the_flag_variants_top_p_alone_would_compile_late(topk_topp, monkeypatch):
    import torch

    module, seen = topk_topp
    sample(module, torch, 8, top_k=True, top_p=True)
    template = list(seen)
    seen.clear()
    sample(module, torch, 8, top_k=False, top_p=True)
    monkeypatch.setattr(K, "VARIANT_RULES", {})
    assert not set(seen) <= enumerated(module._topk_topp_kernel, template)


def test_without_the_call_site_rule_16_draft_rows_would_compile_late(topk_topp, monkeypatch):
    """``BATCH_SIZE``'s name reads as a request count (1..8): the rejection sampler passes
    draft rows, 16 of them with 8 sequences drafting 1 token each, a multiple of 16."""
    import torch

    module, seen = topk_topp
    sample(module, torch, 8, top_k=True, top_p=True)
    template = list(seen)
    seen.clear()
    sample(module, torch, 16, top_k=True, top_p=True)
    assert set(seen) <= enumerated(module._topk_topp_kernel, template)
    monkeypatch.setattr(K, "SITE_RULES", {})
    assert not set(seen) <= enumerated(module._topk_topp_kernel, template)


def test_a_refused_feature_adds_no_flag_variant():
    """Only what the API accepts is compiled: with top-k refused the variants lack it."""
    ranges = K.Ranges.of(8, 2048, 2, sampler_flags=((False, True),))
    assert ranges.sampler_flags == ((False, True),)
    assert ranges.draft_rows == 24


# ------------------------------------------------------------------ _topk_log_softmax_kernel


@pytest.fixture
def logprob(monkeypatch, triton):
    module = vllm026(monkeypatch, LOGPROB, "vllm026_logprob")
    seen = recording(monkeypatch, triton, module, "_topk_log_softmax_kernel")
    return module, seen


def logprobs(module, torch, rows: int, k: int) -> None:
    """The V2 sampler's logprobs for ``k`` top logprobs beside the sampled token."""
    logits = torch.zeros(rows, 32000, dtype=torch.bfloat16)
    module.compute_token_logprobs(logits, torch.zeros(rows, 1 + k, dtype=torch.int64))


@pytest.mark.parametrize("k", [0, 2, 3, *range(8, 21)])
def test_logprob_keys_for_every_count_the_api_accepts_are_among_the_enumerated(logprob, k):
    import torch

    module, seen = logprob
    logprobs(module, torch, 4, 5)  # vLLM's own warmup: logprobs 5
    template = list(seen)
    seen.clear()
    logprobs(module, torch, 4, k)
    assert set(seen) <= enumerated(module._topk_log_softmax_kernel, template), k


def test_without_the_block_rule_logprobs_3_would_compile_late(logprob, monkeypatch):
    import torch

    module, seen = logprob
    logprobs(module, torch, 4, 5)
    template = list(seen)
    seen.clear()
    logprobs(module, torch, 4, 3)  # TOPK_BLOCK_SIZE=4: the H200's late key
    monkeypatch.setattr(K, "CONSTEXPR_RULES", {})
    assert not set(seen) <= enumerated(module._topk_log_softmax_kernel, template)


def test_batch_size_one_is_not_enumerated_on_the_triton_sampler_path():
    """vLLM sorts fewer than 8 rows in PyTorch: ``BATCH_SIZE`` == 1 never reaches the Triton
    kernel, so its key would be compiled and never run."""
    lo, hi, why = K.SITE_RULES[("_topk_topp_kernel", "BATCH_SIZE")](K.Ranges.of(8, 2048, 2))
    assert (lo, hi) == (8, 24) and "Triton path" in why
    assert K.int_classes(lo, hi) == (K.MULTIPLE_OF_16, K.OTHER)


def test_the_indexers_query_slice_offsets_range_over_the_whole_batch_by_rule():
    """Not by vLLM's warmup happening to launch 0 and 1: 0..max_num_batched_tokens, every
    class (1, a multiple of 16 with 0, other)."""
    r = K.Ranges.of(8, 2048, 2)
    for name in ("query_slice_start", "query_slice_stop"):
        lo, hi, _ = K.SITE_RULES[("_build_prefill_chunk_metadata_kernel", name)](r)
        assert (lo, hi) == (0, 2048)
        assert K.int_classes(lo, hi) == (K.ONE, K.MULTIPLE_OF_16, K.OTHER)


def test_a_live_max_logprobs_above_20_ranges_topk_block_size_to_1024():
    """``--max-logprobs 100`` (or -1) lets a request ask for more: V2's logprob kernel is then
    launched with blocks up to 128 (up to 1024), which the enumeration must reach."""
    from types import SimpleNamespace

    def ctx(max_logprobs):
        model = SimpleNamespace(max_logprobs=max_logprobs, get_vocab_size=lambda: 4000)
        live = SimpleNamespace(
            scheduler_config=SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=2048),
            speculative_config=None,
            model_config=model,
        )
        profile = SimpleNamespace(
            serving=SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=2048, max_logprobs=20),
            mtp_tokens=0,
        )
        facts = SimpleNamespace(experts_per_token=1, vocab=4000)
        return SimpleNamespace(
            worker=SimpleNamespace(vllm_config=live), profile=profile, facts=facts
        )

    blocks = K.CONSTEXPR_RULES[("_topk_log_softmax_kernel", "TOPK_BLOCK_SIZE")]
    assert max(blocks(K.ranges_of(ctx(20)))[0]) == 32
    assert max(blocks(K.ranges_of(ctx(100)))[0]) == 128
    assert max(blocks(K.ranges_of(ctx(-1)))[0]) == 1024
