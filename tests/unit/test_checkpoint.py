"""Weights from real safetensors headers: an EXL3-TR3-style checkpoint the test writes."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from launcher.errors import ProfileError
from launcher.plan.checkpoint import (
    CheckpointError,
    exl3_bits,
    iter_tensors,
    rank_weights,
    read_header,
)
from launcher.plan.model import from_config
from launcher.plan.ranks import rank_shapes
from launcher.plan.weights import exl3_linear_bytes, load_buffers
from launcher.profile import load_profile
from tests.conftest import gathered

HIDDEN, INTER, EXPERTS, VOCAB, TP = 64, 32, 4, 128, 2
CONFIG = {
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 2,
    "num_nextn_predict_layers": 1,
    "hidden_size": HIDDEN,
    "num_attention_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 16,
    "v_head_dim": 16,
    "n_routed_experts": EXPERTS,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_intermediate_size": INTER,
    "intermediate_size": 96,
    "first_k_dense_replace": 1,
    "vocab_size": VOCAB,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def exl3_linear(prefix: str, n_in: int, n_out: int, k: int) -> dict[str, np.ndarray]:
    return {
        f"{prefix}.trellis": np.zeros((n_in // 16, n_out // 16, 16 * k), np.int16),
        f"{prefix}.suh": np.zeros((n_in,), np.float16),
        f"{prefix}.svh": np.zeros((n_out,), np.float16),
        f"{prefix}.mcg": np.zeros((), np.int32),
    }


def bf16(*shape) -> np.ndarray:
    return np.zeros(shape, np.float16)  # 2 bytes per element, as BF16


def write_checkpoint(path, k_of_layer=lambda layer: 3):
    tensors: dict[str, np.ndarray] = {
        "model.embed_tokens.weight": bf16(VOCAB, HIDDEN),
        "lm_head.weight": bf16(VOCAB, HIDDEN),
        "model.norm.weight": bf16(HIDDEN),
        # dense layer 0: replicated q_a, split o_proj and MLP
        "model.layers.0.self_attn.q_a_proj.weight": bf16(32, HIDDEN),
        "model.layers.0.self_attn.o_proj.weight": bf16(HIDDEN, 64),
        "model.layers.0.mlp.gate_proj.weight": bf16(96, HIDDEN),
        "model.layers.0.input_layernorm.weight": bf16(HIDDEN),
    }
    for layer in (1, 2):  # layer 2 is the MTP layer (index == num_hidden_layers)
        tensors[f"model.layers.{layer}.mlp.gate.weight"] = bf16(EXPERTS, HIDDEN)
        tensors[f"model.layers.{layer}.mlp.shared_experts.up_proj.weight"] = bf16(INTER, HIDDEN)
        for e in range(EXPERTS):
            for r in range(TP):
                for proj, (i, o) in {
                    "gate_proj": (HIDDEN, INTER // TP),
                    "down_proj": (INTER // TP, HIDDEN),
                }.items():
                    tensors.update(
                        exl3_linear(
                            f"model.layers.{layer}.mlp.experts.{e}.{proj}.rank{r}",
                            i,
                            o,
                            k_of_layer(layer),
                        )
                    )
    path.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors)
    save_file(
        {n: tensors[n] for n in names[: len(names) // 2]},
        str(path / "model-00001-of-00002.safetensors"),
    )
    save_file(
        {n: tensors[n] for n in names[len(names) // 2 :]},
        str(path / "model-00002-of-00002.safetensors"),
    )
    (path / "config.json").write_text(json.dumps(CONFIG))
    return tensors


def test_exl3_linear_formula_matches_the_header(tmp_path):
    t = exl3_linear("x", 64, 32, 3)
    save_file(t, str(tmp_path / "a.safetensors"))
    total = sum(i.nbytes for i in read_header(tmp_path / "a.safetensors"))
    assert total == exl3_linear_bytes(64, 32, 3) == 64 * 32 * 3 / 8 + 2 * (64 + 32) + 4


def expected_rank_bytes(with_mtp: bool) -> int:
    b = 2
    split = (VOCAB * HIDDEN * 2 + HIDDEN * 64 + 96 * HIDDEN) * b / TP  # embed, head, o_proj, MLP
    replicated = (HIDDEN + 32 * HIDDEN + HIDDEN) * b  # final norm, q_a, layernorm
    per_moe_layer = (
        EXPERTS * HIDDEN * b  # router, replicated
        + INTER * HIDDEN * b / TP  # shared expert, split
        + EXPERTS
        * (exl3_linear_bytes(HIDDEN, INTER // TP, 3) + exl3_linear_bytes(INTER // TP, HIDDEN, 3))
    )
    return int(split + replicated + per_moe_layer * (2 if with_mtp else 1))


@pytest.mark.parametrize("with_mtp", [False, True])
def test_rank_weights_from_headers(tmp_path, with_mtp):
    write_checkpoint(tmp_path)
    facts = from_config(CONFIG, "tiny-glm", "config.json")
    shapes = rank_shapes(facts.num_layers, TP, 1, TP)
    weights = rank_weights(list(iter_tensors(tmp_path)), facts, shapes, ep=False, with_mtp=with_mtp)
    assert weights == [expected_rank_bytes(with_mtp)] * TP


def test_rank_sliced_tensors_go_to_their_rank_only(tmp_path):
    write_checkpoint(tmp_path)
    facts = from_config(CONFIG, "tiny-glm", "config.json")
    tensors = [t for t in iter_tensors(tmp_path) if ".rank1." in t.name]
    shapes = rank_shapes(facts.num_layers, TP, 1, TP)
    r0, r1 = rank_weights(tensors, facts, shapes, ep=False, with_mtp=True)
    assert r0 == 0 and r1 == sum(t.nbytes for t in tensors)


def test_exl3_bits_counts_k(tmp_path):
    write_checkpoint(tmp_path, k_of_layer=lambda layer: 2 if layer == 1 else 4)
    assert exl3_bits(list(iter_tensors(tmp_path))) == {2: EXPERTS * TP * 2, 4: EXPERTS * TP * 2}


def test_profile_uses_headers_when_the_checkpoint_is_on_disk(tmp_path, write):
    write_checkpoint(tmp_path / "ckpt")
    profile = write(
        "p.yaml",
        f"""\
hardware: {{gpu: rtx-pro-6000, count: 2}}
model: {{path: {tmp_path / "ckpt"}, quantization: exl3}}
parallel: {{tensor: 2}}
speculative: {{method: mtp, tokens: 1}}
serving: {{max_model_len: 1024, max_num_seqs: 2, max_num_batched_tokens: 512}}
""",
    )
    inputs = gathered(load_profile(profile))
    assert inputs.weights_source == "headers"
    assert "EXL3 K=3:" in inputs.weights_detail
    # + what vLLM builds with the model: the RoPE caches and the DSA top-k buffer (none here)
    buffers, _ = load_buffers(inputs.facts, 512)
    assert buffers == 4096 * 16 * 2
    assert list(inputs.weights) == [expected_rank_bytes(True) + buffers] * TP
    assert inputs.facts.source == "config.json"


def test_corrupt_header(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(CheckpointError, match="not JSON"):
        read_header(tmp_path / "bad.safetensors")


LOCAL = """\
hardware: {{gpu: rtx-pro-6000, count: 2}}
model: {{path: {path}, quantization: exl3, bits_per_weight: 3.0}}
parallel: {{tensor: 2}}
speculative: {{method: mtp, tokens: 1}}
serving: {{max_model_len: 1024, max_num_seqs: 2, max_num_batched_tokens: 512}}
"""


def test_a_directory_without_its_checkpoint_is_an_error(tmp_path, write):
    """config.json but no safetensors: vLLM would fail loading, and the plan used to switch
    to estimates without a word."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(CONFIG))
    profile = write("p.yaml", LOCAL.format(path=ckpt))
    with pytest.raises(ProfileError) as exc:
        gathered(load_profile(profile))
    (issue,) = exc.value.issues
    assert issue.key == "model.path" and issue.line == 2
    assert f"{ckpt} has config.json but no checkpoint (no *.safetensors file)" in issue.message
    assert "hf download" in issue.message and "--load-format dummy" in issue.message


def test_random_weights_need_no_checkpoint_and_are_an_estimate(tmp_path, write):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(CONFIG))
    text = LOCAL.format(path=ckpt) + "vllm: {extra_args: [--load-format, dummy]}\n"
    inputs = gathered(load_profile(write("p.yaml", text)))
    assert inputs.weights_source == "estimate"
    assert "--load-format dummy: random weights" in inputs.weights_detail
    eq = LOCAL.format(path=ckpt) + "vllm: {extra_args: [--load-format=dummy]}\n"
    assert gathered(load_profile(write("q.yaml", eq))).weights_source == "estimate"


def test_the_cli_names_the_missing_checkpoint(tmp_path, write):
    from click.testing import CliRunner

    from launcher.cli import cli

    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(CONFIG))
    profile = write("p.yaml", LOCAL.format(path=tmp_path / "ckpt"))
    out = CliRunner().invoke(cli, [str(profile), "--dry-run"])
    assert out.exit_code == 1 and out.stdout == ""
    assert f"error: {profile}:2 model.path: " in out.stderr and "Traceback" not in out.output
