"""The transients the plan reserves for what request features allocate after sizing
(``launcher.plan.transients``): the arithmetic, over generated deployments, and the shipped
GLM-5.2 profile's figures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from launcher.contract.names import ComponentName
from launcher.errors import ProfileError
from launcher.launch.refusals import RefusePromptLogprobs, refused
from launcher.plan import transients
from launcher.plan.planner import FREE_AFTER_SIZING, plan
from launcher.profile import load_profile
from launcher.profile.vllm_flags import REFUSE_MIDDLEWARE
from tests.conftest import MINIMAL, PROFILES, gathered

GLM_VOCAB = 154_880


def _plan(tmp: Path, overrides: list[str], text: str = MINIMAL):
    path = tmp / "p.yaml"
    path.write_text(text)
    loaded = load_profile(path, overrides)
    return plan(loaded.profile, gathered(loaded))


def _parts(r) -> dict[str, int]:
    return {p.name: p.bytes for p in r.component(ComponentName.TRANSIENTS).parts}


def test_prompt_logprobs_over_glm52s_chunk_is_chunk_x_vocab_x_10_bytes():
    # 3,072 x 154,880: bf16 logits 0.95 GB, the fp32 cast 1.9 GB and the fp32 log-probs 1.9 GB
    assert transients.prompt_logprob_bytes(3072, GLM_VOCAB, 2, 4) == 3072 * GLM_VOCAB * 10
    assert transients.prompt_logprob_bytes(8192, GLM_VOCAB, 2, 4) == 8192 * GLM_VOCAB * 10


def test_fp32_logits_need_no_cast_and_a_wide_gather_can_exceed_the_softmax():
    assert transients.prompt_logprob_bytes(100, 1000, 4, 1) == 100 * 1000 * 8
    assert transients.prompt_logprob_bytes(100, 1000, 4, 8) == 100 * 1000 * 4 * 2 + 100 * 125 * 4


def test_from_two_ranks_fp32_logits_gathered_outweigh_the_softmax():
    # 2 x 100 x 1000 x 4 B + 100 x 500 x 4 B = 1.0 MB against the softmax's 0.8 MB
    assert transients.prompt_logprob_bytes(100, 1000, 4, 2) == 100 * 1000 * 4 * 2 + 100 * 500 * 4


def test_the_dcp_gather_is_nothing_without_dcp_and_one_plus_two_dcp_copies_with_it():
    assert transients.dcp_gather_bytes(10, 4, 8, 2, 1) == 0
    assert transients.dcp_gather_bytes(10, 4, 8, 2, 0) == 0
    assert transients.dcp_gather_bytes(10, 4, 8, 2, 2) == 10 * 4 * 8 * 2 * 5


def test_the_prompt_logprob_figure_names_the_fp32_cast_of_half_precision_logits():
    loaded = load_profile(PROFILES / "glm52.yaml")
    r = plan(loaded.profile, gathered(loaded)).ranks[0]
    parts = {c.name: c for c in r.component(ComponentName.TRANSIENTS).parts}
    assert "x (2 logits + 4 (fp32 cast) + 4 fp32 log-probs)" in parts["prompt_logprobs"].detail


def test_the_glm52_dry_run_shows_the_transients_with_the_prompt_logprob_figure():
    loaded = load_profile(PROFILES / "glm52.yaml")
    p = plan(loaded.profile, gathered(loaded))
    r = p.ranks[0]
    comp = r.component(ComponentName.TRANSIENTS)
    parts = {c.name: c for c in comp.parts}
    assert set(parts) == {
        "prompt_logprobs",
        "dcp_all_gather",
        "sampled_logprobs",
        "n_fanout",
        "structured_bitmask",
    }
    assert parts["n_fanout"].bytes == 0 and "max_num_seqs 8" in parts["n_fanout"].detail
    # glm52 refuses prompt logprobs: nothing reserved, the figure it would need said
    assert parts["prompt_logprobs"].bytes == 0
    assert "would need 4.43 GiB" in parts["prompt_logprobs"].detail
    # sparse MLA, DCP 4: 3,072 tokens x 16 heads x 576 x 2 B x (1 + 4 + 4)
    assert parts["dcp_all_gather"].bytes == 3072 * 16 * 576 * 2 * 9
    assert comp.bytes == sum(c.bytes for c in comp.parts)  # max(0, gather) + the rest
    assert all(c.source == "estimate" for c in comp.parts)


def test_reserving_glm52s_prompt_logprobs_does_not_fit_and_names_the_key(tmp_path):
    text = (PROFILES / "glm52.yaml").read_text()
    p = _plan(tmp_path, ["serving.prompt_logprobs=reserve"], text)
    assert _parts(p.ranks[0])["prompt_logprobs"] == 3072 * GLM_VOCAB * 10
    assert not p.fits
    assert any("serving.prompt_logprobs=reserve keeps 4.43 GiB" in r for r in p.reasons)
    assert p.suggestions == ("serving.prompt_logprobs=refuse",)


def test_a_refusing_profile_runs_the_middleware_and_a_reserving_one_does_not(tmp_path):
    from launcher.deployment import resolve
    from launcher.launch.vllm_args import build_command

    for value, expect in (("refuse", True), ("reserve", False)):
        path = tmp_path / "q.yaml"
        path.write_text(MINIMAL)
        loaded = load_profile(path, [f"serving.prompt_logprobs={value}"])
        d = resolve(loaded.profile)
        argv = build_command(
            loaded.profile, plan(loaded.profile, gathered(loaded)), deployment=d
        ).argv
        assert (REFUSE_MIDDLEWARE in argv) is expect
    module, name = REFUSE_MIDDLEWARE.rsplit(".", 1)
    assert getattr(__import__(module, fromlist=[name]), name) is RefusePromptLogprobs


SHIPPED = ("glm52.yaml", "glm52-dcp2.yaml", "deepseek-v32.yaml", "kimi-k2.yaml", "tiny-cpu.yaml")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    base=st.sampled_from(SHIPPED),
    chunk=st.sampled_from([256, 1024, 2048, 3072, 4096, 8192]),
    seqs=st.integers(1, 8),
    max_logprobs=st.sampled_from([-1, 0, 5, 20, 64, 1000]),
    mode=st.sampled_from(["reserve", "refuse"]),
)
def test_transients_over_generated_deployments(base, chunk, seqs, max_logprobs, mode):
    """Each part is the arithmetic of the deployment's model (vocabulary, dtype, heads, latent
    width), chunk, rows and ranks, over the shipped architectures (derandomized: the same
    examples every run)."""
    overrides = [
        f"serving.max_num_batched_tokens={chunk}",
        f"serving.max_num_seqs={seqs}",
        f"serving.max_logprobs={max_logprobs}",
        f"serving.prompt_logprobs={mode}",
        "serving.cudagraph_capture_sizes=auto",
    ]
    try:
        loaded = load_profile(PROFILES / base, overrides)
    except ProfileError:  # a combination the profile's rules refuse (a chunk below max_model_len)
        assume(False)
    inputs = gathered(loaded)
    f, d, prof = inputs.facts, inputs.deployment, loaded.profile
    p = plan(prof, inputs)
    tp, dcp = prof.parallel.tensor, prof.parallel.decode_context
    rows = seqs * (1 + prof.mtp_tokens)
    v, dt = f.vocab, f.dtype_bytes
    softmax = chunk * v * (dt + (4 if dt != 4 else 0) + 4)
    gather = chunk * v * dt * 2 + chunk * -(-v // tp) * dt if tp > 1 else 0
    for r in p.ranks:
        parts = _parts(r)
        assert parts["prompt_logprobs"] == (max(softmax, gather) if mode == "reserve" else 0)
        if dcp > 1:
            width = f.kv_lora_rank + f.qk_rope if f.is_mla else f.head_dim
            tokens = chunk if d.sparse_mla else rows
            one = tokens * max(1, f.heads // tp) * width * dt
            assert parts["dcp_all_gather"] == one * (1 + 2 * dcp)
        else:
            assert "dcp_all_gather" not in parts
        k = v if max_logprobs < 0 else min(max_logprobs, v)
        assert parts["sampled_logprobs"] == rows * v * 4 + rows * (k + 1) * 12
        assert parts["structured_bitmask"] == rows * -(-v // 32) * 4
        shared = max(parts["prompt_logprobs"], parts.get("dcp_all_gather", 0))
        total = r.component(ComponentName.TRANSIENTS).bytes
        assert total == shared + parts["sampled_logprobs"] + parts["structured_bitmask"]
        # the predicted lowest free: what the card keeps free by design, plus the KV's rounding
        kept = sum(c.bytes for c in r.components if c.name in FREE_AFTER_SIZING)
        if p.fits and not p.kv.pinned:
            assert kept <= r.lowest_free < kept + p.kv.layout.page_bytes
    if mode == "reserve" and not p.fits and parts["prompt_logprobs"]:
        assert any("serving.prompt_logprobs=reserve keeps" in x for x in p.reasons)


def _asgi(body: dict, path: str = "/v1/completions") -> tuple[int, bool]:
    seen = {"app": False}

    async def app(scope, receive, send):
        seen["app"] = json.loads((await receive())["body"]) == body
        await send({"type": "http.response.start", "status": 200, "headers": []})

    status = {}

    async def send(message):
        if message["type"] == "http.response.start":
            status["code"] = message["status"]

    async def receive():
        return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}

    scope = {"type": "http", "path": path}
    asyncio.run(RefusePromptLogprobs(app)(scope, receive, send))
    return status["code"], seen["app"]


def test_the_middleware_answers_400_to_prompt_logprobs_and_echo_and_passes_the_rest():
    assert _asgi({"prompt": "x", "prompt_logprobs": 0}) == (400, False)
    assert _asgi({"prompt": "x", "echo": True, "logprobs": 1}) == (400, False)
    chat = {"messages": [], "prompt_logprobs": 1}
    assert _asgi(chat, "/v1/chat/completions") == (400, False)
    assert _asgi({"prompt": "x", "logprobs": 5}) == (200, True)
    assert _asgi({"prompt": "x", "echo": True}) == (200, True)
    assert _asgi({"prompt": "x", "prompt_logprobs": 1}, "/v1/models") == (200, True)
    assert not refused(b"not json") and not refused(b"[1]")
