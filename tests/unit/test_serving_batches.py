"""The serving-shaped waves the scratch stage serves: a pure function of the deployment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from launcher.runtime.prewarm.stage import serving_batches as sb

GLM52 = sb.Shape(
    max_model_len=262144,
    max_num_batched_tokens=3072,
    max_num_seqs=8,
    spec_tokens=3,
    block_size=64,
    dcp=4,
    capture_sizes=(4, 8, 16, 32),
    index_topk=2048,
)
TIER = sb.Shape(20480, 2048, 8, 2, 64, 1, (3, 6, 12, 24), index_topk=256)


def _long(shape: sb.Shape) -> list[sb.Arrival]:
    return [w.arrivals[0] for w in sb.waves(shape) if "long" in w.name]


@pytest.mark.parametrize("shape", [GLM52, TIER], ids=["glm52", "tier"])
def test_the_longest_prompt_ends_in_the_largest_chunk_the_context_leaves(shape):
    # Serving's longest prompt grew more of torch's segments than a ragged 37-token last
    # chunk did (H200, gen1-1): the last chunk's tensors and the context's are both largest.
    longest = _long(shape)[0]
    assert longest.prompt + longest.max_tokens <= shape.max_model_len
    assert longest.prompt == shape.max_model_len - 8


@pytest.mark.parametrize("shape", [GLM52, TIER], ids=["glm52", "tier"])
def test_a_ragged_long_prompt_reaches_the_context_in_full_chunks_and_a_short_last_one(shape):
    ragged = _long(shape)[1]
    chunk = shape.max_num_batched_tokens
    assert ragged.prompt % chunk == sb.RAGGED and ragged.prompt // chunk >= 1
    assert ragged.prompt + ragged.max_tokens <= shape.max_model_len
    assert ragged.prompt + chunk + ragged.max_tokens > shape.max_model_len  # no chunk more fits


BLOCKS_OVER_CHUNKS = sb.Shape(256, 64, 2, 0, 128)  # vLLM's CPU backend: blocks of 128


@pytest.mark.parametrize(
    "shape", [GLM52, TIER, BLOCKS_OVER_CHUNKS], ids=["glm52", "tier", "blocks-over-chunks"]
)
def test_the_ragged_prompt_repeats_the_longest_ones_whole_chunks_and_blocks_and_no_more(shape):
    # Prefix caching then hits whole blocks and prefills only the ragged tokens, in one step
    # over the context; without caching those same tokens are the last chunk.
    longest, ragged = _long(shape)
    a, b = sb.prompt_ids(longest, 7919, shape.vocab), sb.prompt_ids(ragged, 7919 * 2, shape.vocab)
    shared = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert shared == ragged.prefix > 0
    assert shared % shape.max_num_batched_tokens == 0 and shared % shape.logical_block == 0
    assert len(b) - shared == sb.RAGGED


def test_a_context_of_whole_chunks_names_its_last_chunk_full():
    shape = replace(TIER, max_model_len=2048 * 3 + 8)
    (name,) = [w.name for w in sb.waves(shape) if w.name.startswith("the longest prompt")]
    assert "2 prefill chunks and one of 2048" in name


def test_single_prompts_cross_every_triton_integer_class_up_to_the_chunk():
    prompts = [w.arrivals[0].prompt for w in sb.waves(TIER)[3:] if len(w.arrivals) == 1]
    assert {1, 15, 16, 17, 2047, 2048} <= set(prompts)
    assert {n % 16 for n in prompts} >= {0, 1, 15}
    assert max(prompts) <= TIER.max_num_batched_tokens


def test_every_batch_size_decodes_and_prefills_run_behind_decode_rows():
    plan = sb.waves(TIER)
    decodes = next(w for w in plan if "one by one" in w.name)
    assert len(decodes.arrivals) == TIER.max_num_seqs
    ends = [a.max_tokens for a in decodes.arrivals]
    assert ends == sorted(set(ends))  # they finish one after another
    mixed = next(w for w in plan if w.name.startswith("prefills behind"))
    rows = [a for a in mixed.arrivals if a.step == 0]
    late = [a for a in mixed.arrivals if a.step > 0]
    assert 1 <= len(rows) <= 3 and all(a.max_tokens > 10 for a in rows)
    assert sorted(a.step for a in late) == [2, 4, 4]  # one prompt, then two in one step
    assert any(a.sampled for a in late)


def test_a_short_context_deployment_keeps_every_prompt_inside_max_model_len():
    tiny = sb.Shape(256, 128, 2, 0, 16)
    for wave in sb.waves(tiny):
        for a in wave.arrivals:
            assert a.prompt >= 1 and a.prompt + a.max_tokens <= 256, wave.name
        assert len([a for a in wave.arrivals if a.step == 0]) <= tiny.max_num_seqs


def test_the_scratch_cache_holds_the_largest_wave_in_logical_blocks():
    plan = sb.waves(GLM52)
    blocks = sb.blocks_needed(GLM52, plan)
    long = plan[1].arrivals[0]
    held = -(-(long.prompt + long.max_tokens) // (64 * 4))  # a logical block: block x DCP
    assert held <= blocks <= held * 5 // 4 + 200  # the long prompt, and room to spare
    dcp4 = replace(TIER, dcp=4)  # a logical block holds 4x the tokens
    assert sb.blocks_needed(dcp4, sb.waves(dcp4)) < sb.blocks_needed(TIER, sb.waves(TIER)) / 3


def test_a_continuing_chunk_shares_a_step_with_a_fresh_prompt():
    """The case vLLM's merge of attention states masks an empty context for."""
    chunk = TIER.max_num_batched_tokens
    together = set()
    for wave in (w for w in sb.waves(TIER) if "second chunk" in w.name):
        first, second = wave.arrivals
        assert first.step == 0 and chunk < first.prompt < 2 * chunk
        assert second.step == 1 and (first.prompt - chunk) + second.prompt <= chunk
        together.add(((first.prompt - chunk) + second.prompt) % 16 == 0)
    # the merge's LSE head stride is the step's prefill tokens: Triton specializes on % 16
    assert together == {True, False}


@pytest.mark.parametrize("shape", [GLM52, TIER], ids=["glm52", "tier"])
def test_short_prompts_meet_the_dense_prefill_under_the_indexers_top_k(shape):
    """Sparse MLA runs dense MHA for a step whose prompts are all within top-k; there a
    short prompt's next chunk beside a new one masks the empty context (the H200 compiled
    mask_empty_context_kernel late: every other wave's prompts were longer than top-k)."""
    dense = [w for w in sb.waves(shape) if "dense prefill" in w.name]
    chunk, top = shape.max_num_batched_tokens, shape.index_topk
    together = set()
    for wave in dense:
        filler, first, fresh = wave.arrivals
        head = chunk - filler.prompt  # what step 0's budget leaves of the short prompt
        assert filler.step == first.step == 0 and fresh.step == 1
        assert 0 < head < first.prompt <= top and fresh.prompt <= top
        together.add((first.prompt - head + fresh.prompt) % 16 == 0)
    assert together == {True, False}


def test_no_dense_prefill_waves_without_an_indexer():
    assert not [w for w in sb.waves(replace(TIER, index_topk=0)) if "dense" in w.name]


# ------------------------------------------------------------------ request features


def _features(plan) -> dict[str, list]:
    out: dict[str, list] = {}
    for wave in plan:
        for a in wave.arrivals:
            if a.feature:
                out.setdefault(a.feature, []).append((wave.name, a))
    return out


def test_each_sampler_flag_combination_runs_alone_and_the_triton_kernel_once_with_both():
    """Top-p alone, top-k alone and both each run alone at one row (the sort path); the
    Triton kernel runs once, at eight rows with both flags on: the template from which the
    enumeration derives the one-sided keys (tests/unit/test_sampler_keys.py), instead of a
    wave per combination that compiled each in series."""
    (wave,) = [w for w in sb.feature_waves(TIER) if "at 1 row each" in w.name]
    steps = sorted({a.step for a in wave.arrivals})
    singles = [a for a in wave.arrivals if a.step in steps[:3]]
    assert [a.feature for a in singles] == ["top_p", "top_k", "top_k_top_p"]
    assert all(a.max_tokens == 2 for a in singles)  # alone: one ends before the next arrives
    batch = [a for a in wave.arrivals if a.step == steps[3]]
    assert len(batch) == sb.SAMPLER_ROWS and {a.feature for a in batch} == {"top_k_top_p"}


def test_the_sampler_batch_runs_again_beside_a_greedy_row_and_beside_a_seeded_row():
    """vLLM's V2 sampler takes Triton on the model-dtype logits, not FlashInfer, when a batch
    holds a greedy or a seeded row: each such batch is served, after the all-sampled one."""
    (wave,) = [w for w in sb.feature_waves(TIER) if "at 1 row each" in w.name]
    first = max(a.step for a in wave.arrivals if a.max_tokens > 2)
    later = {}
    for a in wave.arrivals:
        if a.step > first:
            later.setdefault(a.step, []).append(a.feature)
    batches = [sorted(set(f)) for _, f in sorted(later.items())]
    assert batches == [["greedy", "top_k_top_p"], ["seed", "top_k_top_p"]]
    assert all(len(f) == sb.SAMPLER_ROWS for f in later.values())
    assert "beside one greedy row" in wave.name and "beside one seed row" in wave.name


def test_every_other_accepted_feature_is_served_beside_the_others_in_max_num_seqs_rows():
    from launcher.vllm import request_features

    served = _features(sb.feature_waves(TIER))
    accepted = {f.name for f in request_features.accepted(TIER.spec_tokens)} - {"stream"}
    assert set(served) == accepted
    sides = [w for w in sb.feature_waves(TIER) if "side by side" in w.name]
    assert len(sides) >= 2  # more features than rows: several waves, each max_num_seqs rows
    for side in sides:
        assert len(side.arrivals) == TIER.max_num_seqs and all(a.step == 0 for a in side.arrivals)


def test_what_the_api_refuses_with_speculative_decoding_is_never_served():
    served = _features(sb.feature_waves(TIER))  # TIER drafts 2 tokens
    assert "min_p" not in served and "logit_bias" not in served
    no_spec = sb.Shape(20480, 2048, 8, 0, 64)
    assert {"min_p", "logit_bias"} <= set(_features(sb.feature_waves(no_spec)))


def test_the_cpu_backend_serves_only_features_that_draw_no_random_numbers():
    cpu = sb.Shape(2048, 512, 4, 0, 128, sampling=False)
    served = _features(sb.feature_waves(cpu))
    assert {"logprobs=20", "prompt_logprobs", "min_tokens", "json_object"} <= set(served)
    assert not {"temperature", "top_p", "seed", "n", "penalties"} & set(served)


def test_structured_rows_run_alone_and_beside_an_unstructured_row():
    waves = [w for w in sb.feature_waves(TIER) if "structured" in w.name]
    alone, beside = waves
    assert all(a.feature for a in alone.arrivals) and len(alone.arrivals) == 8
    assert {a.feature for a in alone.arrivals} == {"json_object", "structured_choice"}
    assert [bool(a.feature) for a in beside.arrivals] == [True, False]


@pytest.mark.parametrize("shape", [GLM52, TIER], ids=["glm52", "tier"])
def test_the_sampler_kernels_wave_comes_first_then_the_shape_waves(shape):
    """The early key enumeration compiles what a wave's launches derive while the later waves
    run: the sampler's Triton kernel (the slowest compile) goes first."""
    plan = sb.waves(shape)
    features = sb.feature_waves(shape)
    assert plan[0].sampler_kernel and plan[0] == features[0]
    assert plan[1].name.startswith("the longest prompt")
    assert plan[1:] == sb._shape_waves(shape) + features[1:]


def test_without_a_sampled_feature_the_shape_waves_come_first():
    greedy_only = replace(TIER, sampling=False)
    assert not any(w.sampler_kernel for w in sb.waves(greedy_only))
    assert sb.waves(greedy_only)[0].name.startswith("the longest prompt")


def test_a_wave_names_its_slowest_steps_and_none_when_every_step_is_quick():
    assert sb._slow_steps([0.1, 3.2, 0.6, 1.0, 0.7]) == (
        ", slowest: step 1 3.2s, step 3 1.0s, step 4 0.7s"
    )
    assert sb._slow_steps([0.1, 0.2]) == ""


def test_logprob_token_ids_rows_run_in_waves_of_their_own_after_the_structured_rows():
    """vLLM 0.26 under MTP failed a batch of them beside logprobs=N rows (H100, 2026-12-06):
    apart, and last, so a failure there leaves no other feature unserved."""
    waves = sb.feature_waves(TIER)
    with_ids = [i for i, w in enumerate(waves) if "logprob_token_ids" in w.name]
    structured = [i for i, w in enumerate(waves) if "structured" in w.name]
    assert with_ids and min(with_ids) > max(structured)
    for i in with_ids:
        assert all(a.feature.startswith("logprob_token_ids") for a in waves[i].arrivals)
    assert not any("logprob_token_ids" in w.name for w in waves[: min(with_ids)])


class _FailingLoop:
    """Stands in for vLLM's scheduler loop: the wave named ``bad`` fails its step."""

    def __init__(self, worker, config):
        self.steps, self.tokens, self.served, self.abandoned = 0, 0, [], 0

    def run(self, wave, n, vocab, max_steps):
        if wave.name == "bad":
            raise RuntimeError("shape mismatch")
        self.served.append(wave.name)
        return [0.1]

    def abandon(self):
        self.abandoned += 1


def _serve_with(monkeypatch, loop_cls, names):
    loops = []
    monkeypatch.setattr(sb, "_Loop", lambda w, c: loops.append(loop_cls(w, c)) or loops[-1])
    monkeypatch.setattr(sb, "shape_of", lambda w: TIER)
    logged: list[str] = []
    plan = [sb.Wave(n, (sb.Arrival(0, 3, 2),)) for n in names]
    return loops, logged, lambda: sb.serve(object(), object(), plan, logged.append)


def test_a_failed_wave_is_abandoned_and_the_waves_after_it_still_run(monkeypatch):
    loops, logged, serve = _serve_with(monkeypatch, _FailingLoop, ["a", "bad", "c"])
    with pytest.raises(RuntimeError, match=r"1 of 3 waves failed: wave 1 \(bad\)"):
        serve()
    assert loops[0].served == ["a", "c"] and loops[0].abandoned == 1
    assert any("wave 1 FAILED" in line for line in logged)


def test_a_wave_vllm_cannot_take_back_stops_the_stage_with_its_own_error(monkeypatch):
    class Stuck(_FailingLoop):
        def abandon(self):
            raise RuntimeError("State error")

    loops, _, serve = _serve_with(monkeypatch, Stuck, ["a", "bad", "c"])
    with pytest.raises(RuntimeError, match="shape mismatch"):
        serve()
    assert loops[0].served == ["a"]
