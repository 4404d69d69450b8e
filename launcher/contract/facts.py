"""What the planner knows about a model's architecture: the facts the run file carries to the
worker (which reads no checkpoint again). Made by ``launcher.plan.model`` from a checkpoint's
config.json or the shipped catalog; typed here because they cross a process."""

from __future__ import annotations

from typing import Any

from launcher.contract.base import Frozen
from launcher.contract.names import Source


class ModelFacts(Frozen):
    """What the planner needs to know about an architecture; counts are whole-model."""

    name: str
    """The architecture's name (the catalog's id, or the Hub repo / checkpoint path)."""
    source: Source
    """``config.json`` (read from the checkpoint) or ``catalog``."""
    model_type: str
    """config.json's ``model_type`` (``glm_moe_dsa``, ``llama``, ...)."""
    num_layers: int
    """Decoder layers (the MTP layers not counted)."""
    mtp_layers: int
    """Multi-token-prediction layers (``num_nextn_predict_layers``)."""
    hidden: int
    """Hidden size."""
    heads: int
    """Attention heads."""
    kv_heads: int
    """Key/value heads (GQA)."""
    head_dim: int
    """Dimension of one attention head."""
    vocab: int
    """Vocabulary size."""
    intermediate: int
    """The dense MLP's intermediate size."""
    max_position: int
    """``max_position_embeddings`` (0: not given)."""
    tie_embeddings: bool
    """Whether the output projection shares the embedding's weights."""
    dtype_bytes: int
    """Bytes per element of the checkpoint's dtype."""
    q_lora_rank: int = 0
    """MLA: the query's low rank (0 without MLA)."""
    kv_lora_rank: int = 0
    """MLA: the compressed KV's rank (0: plain multi-head attention)."""
    qk_nope: int = 0
    """MLA: the query/key part without RoPE, per head."""
    qk_rope: int = 0
    """MLA: the RoPE part of the query/key, per head."""
    v_head: int = 0
    """MLA: the value's dimension per head."""
    experts: int = 0
    """Routed experts (0: a dense model)."""
    experts_per_token: int = 0
    """Experts each token is routed to."""
    shared_experts: int = 0
    """Experts every token goes through."""
    moe_intermediate: int = 0
    """One expert's intermediate size."""
    first_dense: int = 0
    """Layers before the first MoE layer (dense ones)."""
    index_heads: int = 0
    """DSA indexer heads (0: no indexer)."""
    index_dim: int = 0
    """DSA indexer head dimension."""
    index_topk: int = 0
    """Tokens the DSA indexer selects per query."""
    indexer_layers: frozenset[int] = frozenset()
    """The decoder layers that own a DSA indexer."""
    mtp_has_indexer: bool = False
    """Whether the MTP layer has a DSA indexer too."""
    exl3: dict[str, Any] | None = None
    """The ``hybrid_tr3_tail`` block of an EXL3-TR3 config, when present."""
    quant_method: str | None = None
    """The config's ``quantization_config.quant_method`` (how the checkpoint is quantized)."""

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def has_indexer(self) -> bool:
        return self.index_heads > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer >= self.first_dense
