"""KV bytes per token per rank, pinned per architecture and kv dtype (FIELD-NOTES figures)."""

import pytest

from launcher.plan.kv import indexer_bytes_per_token_layer, mla_bytes_per_token_layer
from launcher.plan.model import load_facts
from launcher.plan.planner import plan
from launcher.profile import load_profile
from launcher.vllm.lines import VLLM_LINES
from tests.conftest import MINIMAL, PROFILES, gathered

GLM = load_facts("/nonexistent", "glm-5.2")


@pytest.mark.parametrize(
    ("dtype", "runtime", "env", "expected"),
    [
        ("auto", "gilded-gnosis", {}, 1152),
        ("bfloat16", "upstream", {}, 1152),
        ("fp8", "upstream", {}, 576),
        ("fp8_e4m3", "b12x-fork", {}, 576),
        ("fp8_ds_mla", "gilded-gnosis", {}, 656),
        ("nvfp4_ds_mla", "upstream", {}, 352),
        ("nvfp4_ds_mla", "upstream", {"KV_FP8_ROPE": "1"}, 352),
        ("nvfp4_ds_mla", "gilded-gnosis", {}, 432),
        ("nvfp4_ds_mla", "gilded-gnosis", {"KV_FP8_ROPE": "0"}, 432),
        ("nvfp4_ds_mla", "gilded-gnosis", {"KV_FP8_ROPE": "1"}, 368),
        # The b12x-package line forces fp8 RoPE for GLM-DSA and ignores the variable.
        ("nvfp4_ds_mla", "b12x-fork", {}, 368),
        ("nvfp4_ds_mla", "b12x-fork", {"KV_FP8_ROPE": "0"}, 368),
    ],
)
def test_mla_bytes_per_token_layer(dtype, runtime, env, expected):
    assert mla_bytes_per_token_layer(GLM, dtype, VLLM_LINES[runtime], env) == expected


def test_the_gilded_gnosis_line_keeps_bf16_rope_for_models_other_than_glm():
    deepseek = load_facts("/nonexistent", "deepseek-v3.2")
    env = {"KV_FP8_ROPE": "1"}
    assert (
        mla_bytes_per_token_layer(deepseek, "nvfp4_ds_mla", VLLM_LINES["gilded-gnosis"], env) == 432
    )
    assert mla_bytes_per_token_layer(deepseek, "nvfp4_ds_mla", VLLM_LINES["b12x-fork"], env) == 368


def test_indexer_cache_is_132_bytes():
    assert indexer_bytes_per_token_layer(GLM) == 132


def test_glm52_indexer_layers():
    assert len(GLM.indexer_layers) == 21
    assert {0, 1, 2, 6, 10, 74} <= GLM.indexer_layers and 3 not in GLM.indexer_layers
    assert GLM.mtp_has_indexer


def kv_of(write, overrides=(), text=MINIMAL):
    loaded = load_profile(write("p.yaml", text), list(overrides))
    return plan(loaded.profile, gathered(loaded)).kv


# GLM-5.2, nvfp4 (fork, 432 B), 78 layers + 1 MTP, indexer on 21 + 1 layers at 132 B.
GLM_TOKEN = 79 * 432 + 22 * 132  # 37,032 B per token, all layers


@pytest.mark.parametrize(
    ("overrides", "per_token_per_rank", "page"),
    [
        ([], GLM_TOKEN / 4, 64 * GLM_TOKEN),
        (["parallel.decode_context=2"], GLM_TOKEN / 2, 64 * GLM_TOKEN),
        (["parallel.decode_context=1"], GLM_TOKEN, 64 * GLM_TOKEN),
        (
            ["speculative.method=none", "speculative.tokens=0"],
            (78 * 432 + 21 * 132) / 4,
            64 * (78 * 432 + 21 * 132),
        ),
        (["env.KV_FP8_ROPE='1'"], (79 * 368 + 22 * 132) / 4, 64 * (79 * 368 + 22 * 132)),
        (
            ["serving.kv_cache_dtype=fp8_ds_mla"],
            (79 * 656 + 22 * 132) / 4,
            64 * (79 * 656 + 22 * 132),
        ),
        # a replicated indexer stores every logical token on every DCP rank
        (
            ["parallel.replicate_indexer_cache=true"],
            (79 * 432) / 4 + 22 * 132,
            64 * (79 * 432 + 4 * 22 * 132),
        ),
        # a replicated draft layer: its latent and its indexer cost full size
        (
            ["parallel.replicate_draft_cache=true"],
            (78 * 432 + 21 * 132) / 4 + 432 + 132,
            64 * (78 * 432 + 21 * 132 + 4 * (432 + 132)),
        ),
    ],
)
def test_glm52_kv_geometry(write, overrides, per_token_per_rank, page):
    kv = kv_of(write, overrides)
    assert kv.bytes_per_token_per_rank == pytest.approx(per_token_per_rank)
    assert kv.layout.page_bytes == page
    assert kv.tokens == kv.blocks_per_rank * 64 * kv.layout.dcp


def test_shipped_glm52_geometry():
    loaded = load_profile(PROFILES / "glm52.yaml")
    kv = plan(loaded.profile, gathered(loaded)).kv
    # gilded-gnosis with KV_FP8_ROPE=1: 368 B records on 79 layers, 132 B on 22 indexers
    assert kv.bytes_per_token_per_rank == (79 * 368 + 22 * 132) / 4 == 7994.0
    assert kv.runtime == "gilded-gnosis" and "368 B nvfp4 record" in kv.record
    assert kv.layout.logical_block_tokens == 256


def test_deepseek_v32_every_layer_has_an_indexer():
    loaded = load_profile(PROFILES / "deepseek-v32.yaml")
    kv = plan(loaded.profile, gathered(loaded)).kv
    assert kv.layout.page_bytes == 64 * 62 * (656 + 132)  # 61 layers + MTP, fp8_ds_mla + indexer
    assert kv.bytes_per_token_per_rank == pytest.approx(62 * (656 + 132) / 8)


def test_kimi_k2_has_no_indexer_and_no_mtp():
    loaded = load_profile(PROFILES / "kimi-k2.yaml")
    kv = plan(loaded.profile, gathered(loaded)).kv
    assert kv.bytes_per_token_per_rank == 61 * 576


def test_tiny_llama_standard_attention():
    loaded = load_profile(PROFILES / "tiny-cpu.yaml")
    kv = plan(loaded.profile, gathered(loaded)).kv
    assert kv.bytes_per_token_per_rank == 2 * 2 * 1 * 64 * 2  # layers x K,V x kv heads x dim x bf16
    assert kv.layout.block_tokens == 128
