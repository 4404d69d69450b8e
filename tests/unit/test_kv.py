"""KV bytes per token per rank, pinned per architecture and kv dtype (FIELD-NOTES figures)."""

import pytest

from launcher.inputs import gather
from launcher.kv import indexer_bytes_per_token_layer, mla_bytes_per_token_layer
from launcher.model import load_facts
from launcher.plan import plan
from launcher.profile import load_profile
from tests.conftest import MINIMAL, PROFILES

GLM = load_facts("/nonexistent", "glm-5.2")


@pytest.mark.parametrize(
    ("dtype", "fork", "fp8_rope", "expected"),
    [
        ("auto", True, False, 1152),
        ("bfloat16", True, False, 1152),
        ("fp8", True, False, 576),
        ("fp8_e4m3", True, False, 576),
        ("fp8_ds_mla", True, False, 656),
        ("nvfp4_ds_mla", False, False, 352),
        ("nvfp4_ds_mla", True, False, 432),
        ("nvfp4_ds_mla", True, True, 368),
    ],
)
def test_mla_bytes_per_token_layer(dtype, fork, fp8_rope, expected):
    assert mla_bytes_per_token_layer(GLM, dtype, fork, fp8_rope) == expected


def test_indexer_cache_is_132_bytes():
    assert indexer_bytes_per_token_layer(GLM) == 132


def test_glm52_indexer_layers():
    assert len(GLM.indexer_layers) == 21
    assert {0, 1, 2, 6, 10, 74} <= GLM.indexer_layers and 3 not in GLM.indexer_layers
    assert GLM.mtp_has_indexer


def kv_of(write, overrides=(), text=MINIMAL):
    loaded = load_profile(write("p.yaml", text), list(overrides))
    return plan(loaded.profile, gather(loaded)).kv


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
    kv = plan(loaded.profile, gather(loaded)).kv
    assert kv.bytes_per_token_per_rank == 9258.0
    assert kv.layout.logical_block_tokens == 256


def test_deepseek_v32_every_layer_has_an_indexer():
    loaded = load_profile(PROFILES / "deepseek-v32.yaml")
    kv = plan(loaded.profile, gather(loaded)).kv
    assert kv.layout.page_bytes == 64 * 62 * (656 + 132)  # 61 layers + MTP, fp8_ds_mla + indexer
    assert kv.bytes_per_token_per_rank == pytest.approx(62 * (656 + 132) / 8)


def test_kimi_k2_has_no_indexer_and_no_mtp():
    loaded = load_profile(PROFILES / "kimi-k2.yaml")
    kv = plan(loaded.profile, gather(loaded)).kv
    assert kv.bytes_per_token_per_rank == 61 * 576


def test_tiny_llama_standard_attention():
    loaded = load_profile(PROFILES / "tiny-cpu.yaml")
    kv = plan(loaded.profile, gather(loaded)).kv
    assert kv.bytes_per_token_per_rank == 2 * 2 * 1 * 64 * 2  # layers x K,V x kv heads x dim x bf16
    assert kv.layout.block_tokens == 128
