"""Weights per rank estimated from the architecture and the quantization recipe.

Used when the checkpoint is not on disk. Follows how vLLM shards by TP:
q_b, kv_b, o_proj, shared experts, dense MLP, vocab embedding and LM head are
split; q_a, kv_a (with MQA), the DSA indexer, norms and the router are
replicated. Routed experts are split by TP (or by expert under EP).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.model import ModelFacts
from launcher.ranks import RankShape


@dataclass(frozen=True)
class Recipe:
    """How the checkpoint stores its tensors."""

    quantization: str | None
    bits_per_weight: float | None
    unquantized_bytes: int = 2

    @property
    def routed_expert_bits(self) -> float:
        if self.quantization == "exl3":
            return self.bits_per_weight or 4.0
        if self.quantization in ("fp8", "fp8_e4m3"):
            return 8.0
        return self.bits_per_weight or self.unquantized_bytes * 8.0

    @property
    def linear_bits(self) -> float:
        """Bits per weight of non-expert linears (EXL3-TR3 keeps them BF16)."""
        if self.quantization in ("fp8", "fp8_e4m3"):
            return 8.0
        return self.unquantized_bytes * 8.0


def exl3_linear_bytes(n_in: int, n_out: int, bits: float) -> float:
    """One EXL3 linear: trellis ``in*out*K/8``, fp16 ``suh``/``svh``, a 4-byte codebook marker."""
    return n_in * n_out * bits / 8 + 2 * (n_in + n_out) + 4


def _dense(n_in: int, n_out: int, bits: float) -> float:
    return n_in * n_out * bits / 8


def decoder_layer_bytes(
    f: ModelFacts, layer: int, tp: int, ep: bool, recipe: Recipe, indexer: bool
) -> float:
    """Bytes of one decoder layer on one TP rank."""
    b = recipe.unquantized_bytes
    lin = recipe.linear_bits
    total = 2 * f.hidden * b  # input and post-attention norms
    if f.is_mla:
        qk = f.qk_nope + f.qk_rope
        local_heads = f.heads // tp
        if f.q_lora_rank:
            total += _dense(f.hidden, f.q_lora_rank, lin) + f.q_lora_rank * b
            total += _dense(f.q_lora_rank, local_heads * qk, lin)
        else:
            total += _dense(f.hidden, local_heads * qk, lin)
        total += _dense(f.hidden, f.kv_lora_rank + f.qk_rope, lin) + f.kv_lora_rank * b
        total += _dense(f.kv_lora_rank, local_heads * (f.qk_nope + f.v_head), lin)
        total += _dense(local_heads * f.v_head, f.hidden, lin)
    else:
        local_heads = f.heads // tp
        local_kv = max(1, f.kv_heads // tp)
        total += _dense(f.hidden, (local_heads + 2 * local_kv) * f.head_dim, lin)
        total += _dense(local_heads * f.head_dim, f.hidden, lin)
    if indexer:
        q_in = f.q_lora_rank or f.hidden
        total += (
            q_in * f.index_heads * f.index_dim
            + f.hidden * f.index_dim
            + f.hidden * f.index_heads
            + 2 * f.index_dim
        ) * b
    if f.is_moe_layer(layer):
        total += f.hidden * f.experts * b + 4 * f.experts  # router + fp32 correction bias
        if f.shared_experts:
            total += 3 * _dense(f.hidden, f.shared_experts * f.moe_intermediate // tp, lin)
        total += routed_experts_bytes(f, tp, ep, recipe)
    elif f.intermediate:
        total += 3 * _dense(f.hidden, f.intermediate // tp, lin)
    return total


def routed_experts_bytes(f: ModelFacts, tp: int, ep: bool, recipe: Recipe) -> float:
    """Routed experts of one MoE layer on one rank (gate, up and down projections)."""
    bits = recipe.routed_expert_bits
    per_linear = exl3_linear_bytes if recipe.quantization == "exl3" else _dense
    if ep:  # whole experts, E / TP of them
        inter, experts = f.moe_intermediate, f.experts / tp
    else:  # every expert, sliced along the intermediate dimension
        inter, experts = f.moe_intermediate / tp, f.experts
    one = 2 * per_linear(f.hidden, inter, bits) + per_linear(inter, f.hidden, bits)
    return experts * one


def estimate_rank_weights(
    f: ModelFacts, shape: RankShape, *, ep: bool, recipe: Recipe, with_mtp: bool
) -> int:
    """Weights on one rank: its decoder layers, embeddings/head by stage, the MTP layer."""
    b = recipe.unquantized_bytes
    tp = shape.tp
    vocab_shard = f.vocab * f.hidden * b / tp
    total = 0.0
    for layer in shape.layers:
        total += decoder_layer_bytes(f, layer, tp, ep, recipe, layer in f.indexer_layers)
    if shape.is_first_stage:
        total += vocab_shard
    if shape.is_last_stage:
        total += f.hidden * b  # final norm
        if not (f.tie_embeddings and shape.is_first_stage):
            total += vocab_shard
    if with_mtp and shape.is_last_stage:
        for i in range(f.mtp_layers):
            layer = f.num_layers + i
            total += decoder_layer_bytes(f, layer, tp, ep, recipe, f.mtp_has_indexer)
            # enorm, hnorm, eh_proj (2h -> h, replicated), its own embedding and head shards
            total += 2 * f.hidden * b + 2 * f.hidden * f.hidden * b + f.hidden * b
            total += 2 * vocab_shard
    return int(total)
