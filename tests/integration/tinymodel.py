"""Write a tiny random Llama checkpoint vLLM can serve: config.json, bf16 safetensors, tokenizer.

Matches the ``tiny-llama`` architecture in the catalog (2 layers, hidden 128, 2 heads,
1 KV head of 64, vocab 384). Needs torch (bf16) and tokenizers, both vLLM dependencies.
The pieces (config, tensors, tokenizer) take dimensions, so the GPU tier builds bigger
models from them (tests/gpu/models.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 128, 2, 2, 1, 64, 256, 384
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
COMMON = {
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "torch_dtype": "bfloat16",
}


def llama_config(
    hidden: int = HIDDEN,
    layers: int = LAYERS,
    heads: int = HEADS,
    kv_heads: int = KV_HEADS,
    head_dim: int = HEAD_DIM,
    inter: int = INTER,
    vocab: int = VOCAB,
    max_position: int = 512,
) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "max_position_embeddings": max_position,
        **COMMON,
    }


def config() -> dict:
    return llama_config()


class Random:
    """Seeded bf16 tensors: small normal weights, unit norms."""

    def __init__(self, seed: int):
        import torch

        self.torch = torch
        self.gen = torch.Generator().manual_seed(seed)

    def __call__(self, *shape: int):
        t = self.torch
        return (t.randn(*shape, generator=self.gen) * 0.02).to(t.bfloat16)

    def ones(self, n: int):
        return self.torch.ones(n, dtype=self.torch.bfloat16)


def llama_tensors(cfg: dict[str, Any], rand: Random) -> dict:
    """Every tensor of a Llama checkpoint, by the Hugging Face names vLLM loads."""
    hidden, vocab, inter = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    tensors = {
        "model.embed_tokens.weight": rand(vocab, hidden),
        "model.norm.weight": rand.ones(hidden),
        "lm_head.weight": rand(vocab, hidden),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "input_layernorm.weight": rand.ones(hidden),
            p + "post_attention_layernorm.weight": rand.ones(hidden),
            p + "self_attn.q_proj.weight": rand(q, hidden),
            p + "self_attn.k_proj.weight": rand(kv, hidden),
            p + "self_attn.v_proj.weight": rand(kv, hidden),
            p + "self_attn.o_proj.weight": rand(hidden, q),
            p + "mlp.gate_proj.weight": rand(inter, hidden),
            p + "mlp.up_proj.weight": rand(inter, hidden),
            p + "mlp.down_proj.weight": rand(hidden, inter),
        }
    return tensors


def write_tokenizer(out: Path, vocab: int, max_len: int, kind: str = "word") -> None:
    """A tokenizer of exactly ``vocab`` tokens. ``word``: ``w<i>`` is one token, so a prompt's
    length in words is exact. ``bpe``: byte-level BPE (the 256 bytes, then merges of byte pairs
    in a fixed order), which grammar backends (xgrammar) accept for structured outputs."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if kind == "bpe":
        alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
        table = {tok: i for i, tok in enumerate(SPECIALS + alphabet)}
        merges = []
        for a in alphabet:
            for b in alphabet:
                if len(table) >= vocab:
                    break
                table[a + b] = len(table)
                merges.append((a, b))
        tok = Tokenizer(models.BPE(vocab=table, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    else:
        words = [f"w{i}" for i in range(vocab - len(SPECIALS))]
        table = {tok: i for i, tok in enumerate(SPECIALS + words)}
        tok = Tokenizer(models.WordLevel(vocab=table, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(SPECIALS)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "model_max_length": max_len,
            }
        )
    )
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))


def write_checkpoint(
    out: Path, cfg: dict[str, Any], tensors: dict, tokenizer: str = "word"
) -> Path:
    """config.json, one safetensors file and the tokenizer (``write_tokenizer``'s kind)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(out, cfg["vocab_size"], cfg["max_position_embeddings"], tokenizer)
    return out


def write_tiny_llama(out: Path, seed: int = 0) -> Path:
    cfg = config()
    return write_checkpoint(out, cfg, llama_tensors(cfg, Random(seed)))
