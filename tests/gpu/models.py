"""Checkpoints with random bf16 weights for the real-vLLM GPU tier (no hub).

``llama``: a small dense Llama (FlashAttention, no Triton in its hot path).
``deepseek_v2``: a small DeepSeek-V2-style model, MLA attention (kv_lora 512, rope 64) and
a MoE (16 routed experts, 4 per token, one shared, the first layer dense). vLLM runs the
experts through its fused-MoE Triton kernel, whose tile sizes follow the token count: a
request of a size no warmup ran compiles a new specialization while serving, the late-JIT
risk the planned worker measures.
``glm_dsa``: a small GLM-5-architecture model (``GlmMoeDsaForCausalLM``): sparse MLA with the
DSA indexer on every layer, the same MoE, and one MTP layer. vLLM 0.26 serves it with
``FLASHMLA_SPARSE`` and the indexer on its vendored DeepGEMM; its kernels exist only once a
KV cache does. It is served with ``--load-format dummy`` (config and tokenizer only: vLLM
fills the weights), so no tensor name can drift from vLLM's loader.

    python -m tests.gpu.models OUT_DIR        writes OUT_DIR/<kind> for every kind

The tensor names are the Hugging Face checkpoint names vLLM 0.26's ``deepseek_v2.py`` and
``llama.py`` load; tests/unit/test_gpu_models.py checks them against vLLM's loader.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.integration.tinymodel import (
    COMMON,
    Random,
    llama_config,
    llama_tensors,
    write_checkpoint,
    write_tokenizer,
)

VOCAB = 32000
MAX_POSITION = 32768


def llama(hidden: int = 1024, layers: int = 4, vocab: int = VOCAB) -> dict[str, Any]:
    return llama_config(
        hidden=hidden,
        layers=layers,
        heads=8,
        kv_heads=8,
        head_dim=128,
        inter=4 * hidden,
        vocab=vocab,
        max_position=MAX_POSITION,
    )


def deepseek_v2(
    hidden: int = 1024,
    layers: int = 4,
    heads: int = 16,
    experts: int = 16,
    vocab: int = VOCAB,
    kv_lora_rank: int = 512,
    moe_intermediate: int = 512,
) -> dict[str, Any]:
    """A scaled-down DeepSeek-V2-Lite: same attention and routing, fewer and smaller parts."""
    return {
        "architectures": ["DeepseekV2ForCausalLM"],
        "model_type": "deepseek_v2",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "intermediate_size": 4 * hidden,
        "vocab_size": vocab,
        "max_position_embeddings": MAX_POSITION,
        "q_lora_rank": None,
        "kv_lora_rank": kv_lora_rank,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": experts,
        "num_experts_per_tok": 4,
        "n_shared_experts": 1,
        "moe_intermediate_size": moe_intermediate,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "routed_scaling_factor": 1.0,
        "topk_method": "greedy",
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "scoring_func": "softmax",
        "aux_loss_alpha": 0.001,
        "seq_aux": True,
        "attention_bias": False,
        "rope_scaling": None,
        **{**COMMON, "rms_norm_eps": 1e-6},
    }


def deepseek_v2_tensors(cfg: dict[str, Any], rand: Random) -> dict:
    """Every tensor of a DeepSeek-V2 checkpoint (q_lora_rank null: a plain q_proj)."""
    hidden, vocab = cfg["hidden_size"], cfg["vocab_size"]
    heads, lora, rope = cfg["num_attention_heads"], cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
    nope, v = cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    moe, dense = cfg["moe_intermediate_size"], cfg["intermediate_size"]
    tensors = {
        "model.embed_tokens.weight": rand(vocab, hidden),
        "model.norm.weight": rand.ones(hidden),
        "lm_head.weight": rand(vocab, hidden),
    }

    def mlp(prefix: str, inter: int) -> dict:
        return {
            prefix + "gate_proj.weight": rand(inter, hidden),
            prefix + "up_proj.weight": rand(inter, hidden),
            prefix + "down_proj.weight": rand(hidden, inter),
        }

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        tensors |= {
            p + "input_layernorm.weight": rand.ones(hidden),
            p + "post_attention_layernorm.weight": rand.ones(hidden),
            a + "q_proj.weight": rand(heads * (nope + rope), hidden),
            a + "kv_a_proj_with_mqa.weight": rand(lora + rope, hidden),
            a + "kv_a_layernorm.weight": rand.ones(lora),
            a + "kv_b_proj.weight": rand(heads * (nope + v), lora),
            a + "o_proj.weight": rand(hidden, heads * v),
        }
        if i < cfg["first_k_dense_replace"]:
            tensors |= mlp(p + "mlp.", dense)
            continue
        tensors[p + "mlp.gate.weight"] = rand(cfg["n_routed_experts"], hidden)
        tensors |= mlp(p + "mlp.shared_experts.", moe * cfg["n_shared_experts"])
        for e in range(cfg["n_routed_experts"]):
            tensors |= mlp(f"{p}mlp.experts.{e}.", moe)
    return tensors


def glm_dsa(
    hidden: int = 1024,
    layers: int = 4,
    heads: int = 64,
    experts: int = 16,
    vocab: int = VOCAB,
    index_topk: int = 256,
) -> dict[str, Any]:
    """GLM-5's architecture scaled down: DeepSeek-V2's MLA and MoE plus a q LoRA, the DSA
    indexer (16 heads of 128, top-256: shorter than the tier's prompts, so the sparse path
    selects) and one MTP layer. 64 heads: FlashMLA's sparse kernels take 64 or 128."""
    return {
        **deepseek_v2(hidden=hidden, layers=layers, heads=heads, experts=experts, vocab=vocab),
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "q_lora_rank": 256,
        "index_head_dim": 128,
        "index_n_heads": 16,
        "index_topk": index_topk,
        "num_nextn_predict_layers": 1,
    }


BUILDERS = {"llama": (llama, llama_tensors), "deepseek_v2": (deepseek_v2, deepseek_v2_tensors)}
TOKENIZER = "bpe"
"""Byte-level BPE: structured outputs (xgrammar) refuse the word-level tokenizer (HTTP 500 on
plain vLLM too), and the features workload asks for them. Prompts stay token ids."""
DUMMY_WEIGHTS = {"glm_dsa": glm_dsa}
"""Kinds served with ``--load-format dummy``: config.json and tokenizer, no tensors."""
KINDS = (*BUILDERS, *DUMMY_WEIGHTS)


def write(kind: str, out: Path, seed: int = 0, **dims: Any) -> Path:
    """Write model ``kind`` (in ``KINDS``) to ``out``; skips an existing one."""
    if kind in DUMMY_WEIGHTS:
        cfg = DUMMY_WEIGHTS[kind](**dims)
        if not (out / "tokenizer.json").is_file():
            out.mkdir(parents=True, exist_ok=True)
            (out / "config.json").write_text(json.dumps(cfg, indent=2))
            write_tokenizer(out, cfg["vocab_size"], cfg["max_position_embeddings"], TOKENIZER)
        return out
    make_config, make_tensors = BUILDERS[kind]
    cfg = make_config(**dims)
    if (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file():
        return out
    return write_checkpoint(out, cfg, make_tensors(cfg, Random(seed)), TOKENIZER)


if __name__ == "__main__":
    root = Path(sys.argv[1])
    for name in KINDS:
        print(write(name, root / name))
