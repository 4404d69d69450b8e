"""KV-cache bytes per token per rank, following vLLM's own rules.

MLA stores one latent per token per layer (kv_lora_rank + qk_rope), replicated on
every TP rank; decode context parallel (DCP) shards tokens over DCP ranks, so a
physical block of ``block`` tokens on one rank stands for ``block x DCP`` logical
tokens. A layer whose cache is replicated over DCP stores every logical token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from launcher.plan.model import ModelFacts
from launcher.vllm.lines import FP8_DTYPES, VllmLine


class KvDtypeError(ValueError):
    """The KV dtype does not apply to this architecture."""


def mla_bytes_per_token_layer(
    facts: ModelFacts, kv_dtype: str, runtime: VllmLine, env: dict[str, str]
) -> int:
    """Bytes one MLA layer stores per token, by ``--kv-cache-dtype``.

    For kv_lora 512 / rope 64: auto 1152, fp8 576, fp8_ds_mla 656; nvfp4_ds_mla is the
    runtime's record: 352 upstream, 432 or 368 (fp8 RoPE) in the fork lines
    (``VllmLine.nvfp4_record_bytes``).
    """
    lora, rope = facts.kv_lora_rank, facts.qk_rope
    if kv_dtype in ("auto", "bfloat16"):
        return (lora + rope) * facts.dtype_bytes
    if kv_dtype in FP8_DTYPES:
        return lora + rope
    if kv_dtype == "fp8_ds_mla":
        return lora + 4 * (lora // 128) + 2 * rope  # fp8 latent, fp32 scale per 128, bf16 RoPE
    if kv_dtype == "nvfp4_ds_mla":
        return runtime.nvfp4_record_bytes(facts, env)
    raise KvDtypeError(f"unknown kv_cache_dtype {kv_dtype!r}")


def mha_bytes_per_token_layer(facts: ModelFacts, kv_dtype: str, kv_heads_per_rank: int) -> int:
    """Bytes one standard attention layer stores per token on a rank (K and V)."""
    if kv_dtype in ("auto", "bfloat16"):
        elem = facts.dtype_bytes
    elif kv_dtype in FP8_DTYPES:
        elem = 1
    else:
        raise KvDtypeError(
            f"{kv_dtype} applies to MLA models only; {facts.name} uses standard attention"
        )
    return 2 * kv_heads_per_rank * facts.head_dim * elem


def indexer_bytes_per_token_layer(facts: ModelFacts) -> int:
    """DSA indexer cache: fp8 keys plus one fp32 scale per 128 (132 B for dim 128)."""
    return facts.index_dim + 4 * math.ceil(facts.index_dim / 128)


@dataclass(frozen=True)
class KvLayout:
    """What one rank stores per block, and how many logical tokens a block holds."""

    block_tokens: int
    dcp: int
    attention_layers: int
    attention_bytes: int
    """Bytes per token per attention layer."""
    indexer_layers: int
    indexer_bytes: int
    draft_layers: int
    draft_indexer_layers: int
    replicate_indexer: bool
    replicate_draft: bool
    indexer_shards: int = 0
    """DCP ranks the target's indexer cache is sharded over; 0: all of them."""

    @property
    def page_bytes(self) -> int:
        """Bytes of one block on one rank, every layer (vLLM's page size, summed)."""

        def cost(layers: int, per_token: int, copies: int) -> int:
            return layers * per_token * self.block_tokens * copies

        dcp = self.dcp
        shards = 1 if self.replicate_indexer else (self.indexer_shards or dcp)
        return (
            cost(self.attention_layers, self.attention_bytes, 1)
            + cost(self.indexer_layers, self.indexer_bytes, max(1, dcp // shards))
            + cost(self.draft_layers, self.attention_bytes, dcp if self.replicate_draft else 1)
            + cost(
                self.draft_indexer_layers,
                self.indexer_bytes,
                dcp if self.replicate_draft or self.replicate_indexer else 1,
            )
        )

    @property
    def logical_block_tokens(self) -> int:
        return self.block_tokens * self.dcp

    @property
    def bytes_per_token_per_rank(self) -> float:
        """Bytes one rank spends per logical token (fractional under DCP)."""
        return self.page_bytes / self.logical_block_tokens

    def blocks_for(self, kv_bytes: int) -> int:
        return max(0, kv_bytes) // self.page_bytes

    def tokens_for_blocks(self, blocks: int) -> int:
        return blocks * self.logical_block_tokens

    def blocks_for_tokens(self, tokens: int) -> int:
        return math.ceil(tokens / self.logical_block_tokens)


def kv_layout(
    facts: ModelFacts,
    *,
    kv_dtype: str,
    block_tokens: int,
    tp: int,
    dcp: int,
    layers: int,
    draft_layers: int,
    indexer_layers: int,
    draft_indexer_layers: int,
    runtime: VllmLine,
    env: dict[str, str],
    replicate_indexer: bool,
    replicate_draft: bool,
    indexer_shards: int = 0,
) -> KvLayout:
    """The KV layout of one rank that holds ``layers`` decoder layers (+ draft layers)."""
    if facts.is_mla:
        per_layer = mla_bytes_per_token_layer(facts, kv_dtype, runtime, env)
    else:
        per_layer = mha_bytes_per_token_layer(facts, kv_dtype, max(1, facts.kv_heads // tp))
    return KvLayout(
        block_tokens=block_tokens,
        dcp=dcp,
        attention_layers=layers,
        attention_bytes=per_layer,
        indexer_layers=indexer_layers,
        indexer_bytes=indexer_bytes_per_token_layer(facts) if facts.has_indexer else 0,
        draft_layers=draft_layers,
        draft_indexer_layers=draft_indexer_layers,
        replicate_indexer=replicate_indexer,
        replicate_draft=replicate_draft,
        indexer_shards=indexer_shards,
    )
