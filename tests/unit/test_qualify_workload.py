"""The qualify workload: the worst case of the serving settings unless the profile says."""

import pytest

from launcher.errors import ProfileError
from launcher.profile import load_profile
from launcher.qualify.workload import dcp_share, prompt_ids, worst_case
from tests.conftest import MINIMAL


def load(write, *overrides):
    return load_profile(write("p.yaml", MINIMAL), list(overrides)).profile


def test_default_is_max_num_seqs_sequences_filling_max_model_len(write):
    p = load(write, "serving.max_num_seqs=6")
    w = worst_case(p)
    assert w.concurrency == 6
    assert len(w.requests) == 12  # a second wave prefills while the first decodes
    for r in w.requests:
        assert r.prompt_tokens + r.output_tokens == 131072
    assert w.requests[0].output_tokens == 1024  # max_model_len / 16, capped
    assert w.chunk_tokens == p.serving.max_num_batched_tokens
    assert w.max_seconds == p.qualify.max_seconds


def test_short_contexts_decode_a_sixteenth(write):
    w = worst_case(load(write, "serving.max_model_len=256"))
    assert (w.requests[0].prompt_tokens, w.requests[0].output_tokens) == (240, 16)


def test_explicit_workload_is_taken_as_given(write):
    p = load(
        write,
        "qualify.prompt_tokens=1000",
        "qualify.output_tokens=50",
        "qualify.concurrency=3",
        "qualify.requests=5",
        "qualify.max_seconds=60",
    )
    w = worst_case(p)
    assert [(r.prompt_tokens, r.output_tokens) for r in w.requests] == [(1000, 50)] * 5
    assert (w.concurrency, w.max_seconds) == (3, 60)
    assert w.total_tokens == 5 * 1050


def test_concurrency_never_exceeds_the_requests(write):
    assert worst_case(load(write, "qualify.requests=2")).concurrency == 2


def test_a_given_prompt_decodes_the_rest_of_the_context(write):
    w = worst_case(load(write, "serving.max_model_len=4096", "qualify.prompt_tokens=4000"))
    assert w.requests[0].output_tokens == 96


def test_longest_context_per_dcp_rank_is_the_interleaved_share(write):
    # MINIMAL: DCP 4, interleave 1, max_model_len 131072.
    assert worst_case(load(write)).tokens_per_dcp_rank == 131072 // 4
    assert dcp_share(1000, 4, 64) == 256  # 16 runs of 64: 4 per rank, the last one short
    assert dcp_share(10, 4, 64) == 10  # one run: one rank holds it all
    assert dcp_share(1000, 1, 1) == 1000


def test_prompts_are_reproducible_distinct_and_in_the_vocabulary(write):
    w = worst_case(load(write, "serving.max_model_len=512"))
    a, b = (prompt_ids(r, vocab=384) for r in w.requests[:2])
    assert a == prompt_ids(w.requests[0], vocab=384)
    assert a != b
    assert len(a) == w.requests[0].prompt_tokens
    assert all(10 <= t < 384 for t in a + b)


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["qualify.prompt_tokens=131072"], "qualify.prompt_tokens"),
        (["qualify.prompt_tokens=131000", "qualify.output_tokens=100"], "qualify.prompt_tokens"),
        (["qualify.output_tokens=131072"], "qualify.output_tokens"),
    ],
)
def test_a_workload_longer_than_max_model_len_is_refused_at_its_key(write, overrides, key):
    with pytest.raises(ProfileError) as err:
        load(write, *overrides)
    assert key in str(err.value) and "max_model_len" in str(err.value)


def test_a_cache_smaller_than_every_sequence_is_filled_not_overrun(write):
    p = load(write, "serving.max_num_seqs=8")  # max_model_len 131072
    kv = 553_728
    w = worst_case(p, kv_tokens=kv)
    first, rest = w.requests[0], w.requests[1:]
    assert first.prompt_tokens + first.output_tokens == 131072  # the longest context, once
    assert {r.prompt_tokens for r in rest} == {(kv - 131072) // 7 - 1024}
    wave = w.requests[: w.concurrency]
    assert sum(r.prompt_tokens + r.output_tokens for r in wave) <= kv
    assert "one 130,048-token prompt then" in w.describe()


def test_a_cache_that_holds_every_sequence_gets_max_model_len_prompts(write):
    p = load(write, "serving.max_num_seqs=2")
    w = worst_case(p, kv_tokens=10 * 131072)
    assert {r.prompt_tokens for r in w.requests} == {131072 - 1024}


def test_an_explicit_prompt_length_ignores_the_cache_size(write):
    p = load(write, "qualify.prompt_tokens=5000")
    assert {r.prompt_tokens for r in worst_case(p, kv_tokens=20_000).requests} == {5000}
