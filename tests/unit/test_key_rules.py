"""The key enumeration's class rules on their own (``launcher.runtime.prewarm.providers.keys``):
Triton's int classes of a range, a pointer's alignment class, and the ranges the per-step counts
reach.

Pure: no Triton, torch or vLLM, so they run in every tier. Each pins a rule that the mutation
run (``benchmarks/mutation.py --group keys``) found no other test checking."""

from __future__ import annotations

import pytest

from launcher.runtime.prewarm.providers import keys as K

RANGES = K.Ranges(max_num_seqs=8, max_tokens=2048, spec_tokens=2)


def _classes_by_hand(lo: int, hi: int) -> tuple[str, ...]:
    """Every int in lo..hi classed one by one, as Triton classes a launch's plain int."""
    seen = {
        K.ONE if v == 1 else K.MULTIPLE_OF_16 if v % 16 == 0 else K.OTHER for v in range(lo, hi + 1)
    }
    return tuple(c for c in K.INT_CLASSES if c in seen)


def test_the_int_classes_of_a_range_are_those_of_its_members():
    for lo in range(0, 50):
        for hi in range(lo, 70):
            assert K.int_classes(lo, hi) == _classes_by_hand(lo, hi), (lo, hi)


def test_a_range_with_no_member_has_no_class():
    assert K.int_classes(5, 4) == ()


def test_a_pointers_class_is_aligned_for_triton_d_and_unaligned_otherwise():
    p = K.Param("x")
    assert K.class_of(("*bf16", "D"), p) == ("pointer", K.ALIGNED)
    assert K.class_of(("*bf16", ""), p) == ("pointer", K.UNALIGNED)


def test_an_ints_class_is_one_for_a_1_a_multiple_of_16_for_triton_d_and_other_otherwise():
    """Triton passes a plain 1 as a constexpr, a declared int type's 1 with its type."""
    p = K.Param("n")
    assert K.class_of(("constexpr", 1), p) == ("int", K.ONE)
    assert K.class_of(("constexpr", 32), p) is None  # a constexpr the launch fixed
    assert K.class_of(("constexpr", None), p) is None
    assert K.class_of(("constexpr", 1), K.Param("n", do_not_specialize=True)) is None
    assert K.class_of(("i32", 1), p) == ("int", K.ONE)
    assert K.class_of(("i32", "D"), p) == ("int", K.MULTIPLE_OF_16)
    assert K.class_of(("i64", ""), p) == ("int", K.OTHER)


@pytest.mark.parametrize(
    ("max_logprobs", "blocks"),
    [(3, (1, 2, 4)), (4, (1, 2, 4, 8)), (7, (1, 2, 4, 8)), (8, (1, 2, 4, 8, 16))],
)
def test_the_logprob_block_covers_the_sampled_token_and_every_logprob_count(max_logprobs, blocks):
    """1 + 0..max_logprobs: at max_logprobs 4 the full count (5) needs the block of 8."""
    rule = K.CONSTEXPR_RULES[("_topk_log_softmax_kernel", "TOPK_BLOCK_SIZE")]
    r = K.Ranges(max_num_seqs=8, max_tokens=2048, max_logprobs=max_logprobs)
    assert rule(r)[0] == blocks


def test_the_logprob_kernels_topk_reaches_one_up_to_the_sampled_token_and_every_logprob():
    """topk is 1..1 + max_logprobs: at 14 logprobs it reaches 15, never a multiple of 16."""
    kernel = "vllm.v1.worker.gpu.sample.logprob._topk_log_softmax_kernel"
    for max_logprobs, classes in ((14, (K.ONE, K.OTHER)), (15, (K.ONE, K.MULTIPLE_OF_16, K.OTHER))):
        r = K.Ranges(max_num_seqs=8, max_tokens=2048, max_logprobs=max_logprobs)
        got = K.reach(K.Param("topk"), "int", {K.ONE}, r, kernel=kernel)
        assert got.classes == classes and got.derived, max_logprobs


@pytest.mark.parametrize(
    ("spec_tokens", "classes"),
    [(2, (K.ONE, K.OTHER)), (14, (K.ONE, K.OTHER)), (15, (K.ONE, K.MULTIPLE_OF_16, K.OTHER))],
)
def test_the_sampled_width_reaches_one_when_every_draft_is_cut_up_to_one_plus_the_drafts(
    spec_tokens, classes
):
    """1..1 + spec_tokens: at 14 drafts the width reaches 15, never 16."""
    r = K.Ranges(max_num_seqs=8, max_tokens=2048, spec_tokens=spec_tokens)
    got = K.reach(K.Param("num_sampled_tokens_per_req"), "int", {K.OTHER}, r)
    assert got.classes == classes


def test_a_routed_token_count_reaches_every_class_of_tokens_times_top_k_but_one():
    """tokens x top-k starts at top-k (> 1): never the 1 class, both others."""
    r = K.Ranges(max_num_seqs=8, max_tokens=2048, top_k=8)
    for name in ("num_valid_tokens", "EM"):
        got = K.reach(K.Param(name), "int", {K.OTHER}, r)
        assert got.classes == (K.MULTIPLE_OF_16, K.OTHER), name


def test_with_one_expert_a_token_a_routed_count_is_a_token_count_and_reaches_one():
    r = K.Ranges(max_num_seqs=8, max_tokens=2048, top_k=1)
    got = K.reach(K.Param("num_valid_tokens"), "int", {K.OTHER}, r)
    assert got.classes == (K.ONE, K.MULTIPLE_OF_16, K.OTHER)


def test_an_unnamed_int_seen_in_two_classes_varies_over_every_token_count():
    got = K.reach(K.Param("x_size"), "int", {K.MULTIPLE_OF_16, K.OTHER}, RANGES)
    assert got.classes == (K.ONE, K.MULTIPLE_OF_16, K.OTHER) and not got.derived
    fixed = K.reach(K.Param("x_size"), "int", {K.OTHER}, RANGES)
    assert fixed.classes == (K.OTHER,) and "fixed" in fixed.basis
