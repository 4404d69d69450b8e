"""vLLM's request space, placed field by field (``launcher.vllm.request_fields``): every field
of the completions and chat request models at each recorded release is a catalogue feature,
reaches no kernel, or is refused, each with why."""

from __future__ import annotations

import random

import pytest

from launcher.vllm import request_features
from launcher.vllm import request_fields as rf

RELEASES = rf.recorded()


def test_the_supported_releases_are_recorded():
    assert {"0.26.0", "0.32.0", "0.33.0"} <= set(RELEASES)
    for endpoints in RELEASES.values():
        assert set(endpoints) == set(rf.PROTOCOLS)
        assert {"prompt_logprobs", "logprob_token_ids", "allowed_token_ids"} <= set(
            endpoints["completions"]
        )


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_field_of_a_recorded_release_is_placed(release):
    assert rf.unplaced(RELEASES[release]) == []


def test_every_placement_says_why_and_names_features_the_catalogue_has():
    names = {
        f.name
        for spec, most in ((0, 20), (3, 20), (0, -1))
        for f in request_features.features(spec, most)
    }
    for field, placement in rf.PLACEMENTS.items():
        assert placement.why, field
        if placement.place is rf.Place.FEATURE:
            assert placement.features and set(placement.features) <= names, field
        else:
            assert not placement.features, field


def _protocol(tmp_path, extra: list[str]):
    """A protocol file like vLLM's: a ClassVar and private attributes are no fields."""
    body = "\n".join(f"    {name}: int | None = None" for name in extra)
    path = tmp_path / "protocol.py"
    path.write_text(
        "from typing import ClassVar\n"
        "class OpenAIBaseModel: pass\n"
        "class CompletionRequest(OpenAIBaseModel):\n"
        "    field_names: ClassVar[set[str] | None] = None\n"
        "    _DEFAULT_SAMPLING_PARAMS: dict = {}\n"
        f"{body}\n"
        "    def method(self) -> int:\n        x: int = 1\n        return x\n"
    )
    return path


def test_a_field_a_new_release_adds_is_reported_unplaced(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    known = rng.sample(sorted(rf.PLACEMENTS), 5)
    new = f"new_field_{rng.randrange(1000)}"
    read = rf.fields_from_source(_protocol(tmp_path, [*known, new]), "CompletionRequest")
    assert read == (*known, new), f"seed {seed}"
    assert rf.unplaced({"completions": read}) == [new], f"seed {seed}"


def test_a_release_whose_protocol_moved_names_the_file(tmp_path):
    with pytest.raises(LookupError, match="no class ChatCompletionRequest"):
        rf.fields_from_source(_protocol(tmp_path, ["n"]), "ChatCompletionRequest")


def test_a_live_max_logprobs_above_20_serves_every_v2_block_it_reaches():
    for most in (21, 64, 300, 1023, 5000, -1):
        counts = request_features.logprob_counts(most)
        bound = 1024 if most < 0 else min(most, 1024)
        blocks = {min(1 << k.bit_length(), 1024) for k in counts}  # next_power_of_2(1 + k)
        reached = {min(1 << k.bit_length(), 1024) for k in range(bound + 1)}
        assert blocks == reached, most
        accepted = {f.logprobs for f in request_features.accepted(0, most) if f.logprobs}
        assert max(accepted) == bound


def test_logprob_token_ids_serve_every_padded_width_to_128():
    widths = {1 << (n - 1).bit_length() for n in request_features.logprob_token_id_counts()}
    assert widths == {1, 2, 4, 8, 16, 32, 64, 128}
    one = next(f for f in request_features.features(3) if f.name == "logprob_token_ids=3")
    assert one.accepted
    assert one.sampling_kwargs() == {"logprob_token_ids": [5, 6, 7]}


def test_bias_kernel_features_are_accepted_under_speculation():
    served = {f.name for f in request_features.accepted(3)}
    assert {"allowed_token_ids", "min_tokens_stop"} <= served


def test_the_stage_serves_the_live_max_logprobs_blocks_and_minus_one_is_the_vocabulary():
    from launcher.runtime.prewarm.stage import serving_batches as sb

    class ModelConfig:
        max_logprobs = -1

        def get_vocab_size(self) -> int:
            return 154_880

    most = sb.live_max_logprobs(ModelConfig())
    assert most == 154_880
    shape = sb.Shape(
        max_model_len=8192,
        max_num_batched_tokens=2048,
        max_num_seqs=8,
        spec_tokens=0,
        block_size=64,
        max_logprobs=most,
    )
    served = {f.logprobs for f in sb.served_features(shape) if f.logprobs is not None}
    blocks = {min(1 << k.bit_length(), 1024) for k in served}
    assert blocks == {1 << i for i in range(11)}


def test_a_profile_refusing_prompt_logprobs_has_the_stage_serve_none():
    from launcher.runtime.prewarm.stage import serving_batches as sb

    base = dict(max_model_len=8192, max_num_batched_tokens=2048, max_num_seqs=8)
    for mode, served in (("reserve", True), ("refuse", False)):
        shape = sb.Shape(**base, spec_tokens=0, block_size=64, prompt_logprobs=mode)
        names = {f.name for f in sb.served_features(shape)}
        assert ({"prompt_logprobs", "echo"} <= names) is served
        assert "logprobs=1" in names
