"""Request features as a derived axis: what the API accepts and refuses, from the deployment."""

from __future__ import annotations

from launcher.vllm import request_features as rf


def test_speculative_decoding_refuses_min_p_and_logit_bias_with_the_reason():
    with_spec = {f.name: f for f in rf.features(spec_tokens=3)}
    assert not with_spec["min_p"].accepted and not with_spec["logit_bias"].accepted
    assert "_validate_spec_decode" in with_spec["min_p"].refused
    without = {f.name: f for f in rf.features(spec_tokens=0)}
    assert without["min_p"].accepted and without["logit_bias"].accepted


def test_logprob_counts_over_max_logprobs_are_refused():
    names = {f.name for f in rf.accepted(0, max_logprobs=5)}
    assert {"logprobs=0", "logprobs=3"} <= names and "logprobs=7" not in names


def test_the_logprob_counts_cross_every_power_of_two_block_up_to_twenty():
    blocks = {1 << (k).bit_length() for k in rf.LOGPROB_COUNTS}  # next_power_of_2(1 + k)
    assert blocks == {1, 2, 4, 8, 16, 32}


def test_the_sampler_flags_are_each_one_sided_combination_and_both():
    assert rf.sampler_flags(2) == ((False, True), (True, False), (True, True))


def test_sampling_kwargs_are_what_vllm_takes():
    f = {x.name: x for x in rf.features(0)}
    assert f["logit_bias"].sampling_kwargs()["logit_bias"] == {5: 5.0}
    assert f["echo"].sampling_kwargs() == {"logprobs": 1, "prompt_logprobs": 1}
    assert "response_format" not in f["json_object"].sampling_kwargs()
    assert f["n"].sampling_kwargs()["n"] == 2


def test_the_list_says_what_is_refused_and_why():
    lines = rf.describe(spec_tokens=2)
    assert any(line.startswith("refused by the API") and "min_p" in line for line in lines)


def test_prompt_logprobs_is_accepted_but_not_with_stream():
    f = {x.name: x for x in rf.features(0)}
    assert f["prompt_logprobs"].accepted and not f["prompt_logprobs"].streams
    assert any("prompt_logprobs with stream" in line for line in rf.describe(0))
