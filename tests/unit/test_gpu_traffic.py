"""The GPU tier's generated traffic: seeded, drawn from vLLM's request model under its rules,
and every field of the installed vLLM placed (drawn, or named with why not)."""

from __future__ import annotations

import pytest

from tests.conftest import need_serving
from tests.gpu import traffic

SHAPE = traffic.Shape(
    max_model_len=20480, max_num_seqs=8, max_num_batched_tokens=2048, vocab=4000, spec_tokens=2
)
SENT = sorted(traffic.DRAW)


@pytest.mark.parametrize("seed", [0, 7, 2026])
def test_the_same_seed_sends_the_same_requests_and_another_seed_does_not(seed):
    one = traffic.generate(SHAPE, seed, 48, SENT)
    assert [r.body for r in one] == [r.body for r in traffic.generate(SHAPE, seed, 48, SENT)]
    assert [r.body for r in one] != [r.body for r in traffic.generate(SHAPE, seed + 1, 48, SENT)]


@pytest.mark.parametrize("seed", range(20))
def test_no_request_breaks_a_rule_the_api_refuses(seed):
    for r in traffic.generate(SHAPE, seed, 48, SENT):
        body = r.body
        assert not set(traffic.SPEC_REFUSES) & set(body), r.label  # MTP drafts here
        if body.get("stream"):
            assert not set(traffic.NO_STREAM) & set(body), r.label
        assert not ("response_format" in body and "structured_outputs" in body)
        assert len(body["prompt"]) <= SHAPE.max_model_len - SHAPE.out_tokens
        assert all(traffic.FIRST_ID <= t < SHAPE.vocab for t in body["prompt"])


def test_the_traffic_reaches_the_longest_prompt_and_prompt_logprobs_over_two_chunks():
    reqs = traffic.generate(SHAPE, 3, 48, SENT)
    assert max(len(r.body["prompt"]) for r in reqs) == SHAPE.max_model_len - SHAPE.out_tokens
    logprob = [r for r in reqs if r.body.get("prompt_logprobs") == traffic.MAX_LOGPROBS]
    assert any(len(r.body["prompt"]) == 2 * SHAPE.max_num_batched_tokens for r in logprob)


def test_over_many_seeds_every_field_it_draws_is_sent():
    """The space, not a list: across seeds each drawable field appears in some request (a
    field the rules always drop would show here)."""
    seen: set[str] = set()
    no_spec = traffic.Shape(20480, 8, 2048, 4000, spec_tokens=0)
    for seed in range(30):
        seen |= set(traffic.coverage(traffic.generate(no_spec, seed, 48, SENT)))
    assert seen == set(traffic.DRAW), sorted(set(traffic.DRAW) - seen)


def test_the_installed_vllms_request_fields_are_each_placed_or_known_to_be_unreviewed():
    need_serving("vllm")
    fields = traffic.protocol_fields()
    assert traffic.unplaced(fields) == sorted(set(traffic.NEWER) & set(fields))
    assert not set(traffic.DRAW) & set(traffic.NOT_SENT)


@pytest.mark.parametrize("seed", range(20))
def test_every_request_obeys_the_protocols_rules_between_fields(seed):
    """What vLLM's completions protocol refuses together is never sent (a 400 is the
    generator's fault, not the deployment's)."""
    no_spec = traffic.Shape(20480, 8, 2048, 4000, spec_tokens=0)
    for r in traffic.generate(no_spec, seed, 60, sorted(traffic.DRAW)):
        body = r.body
        if body.get("logprob_token_ids"):
            assert body.get("logprobs") is not None, r.label
        if "response_format" in body or "structured_outputs" in body:
            assert "n" not in body, r.label


@pytest.mark.parametrize("seed", range(5))
def test_what_vllm_fails_under_speculation_is_not_drawn_there(seed):
    for r in traffic.generate(SHAPE, seed, 60, sorted(traffic.DRAW)):
        assert not set(traffic.SPEC_FAULTS) & set(r.body), r.label
