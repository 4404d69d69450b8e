"""Architecture facts, from a checkpoint's config.json or the shipped catalog."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2}


@dataclass(frozen=True)
class ModelFacts:
    """What the planner needs to know about an architecture; counts are whole-model."""

    name: str
    source: str
    """``config.json`` (read from the checkpoint) or ``catalog``."""
    model_type: str
    num_layers: int
    mtp_layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    max_position: int
    tie_embeddings: bool
    dtype_bytes: int
    # MLA (DeepSeek-style); 0 when the model uses plain multi-head attention.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope: int = 0
    qk_rope: int = 0
    v_head: int = 0
    # MoE; 0 experts for a dense model.
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate: int = 0
    first_dense: int = 0
    # DSA indexer; 0 heads when the model has none.
    index_heads: int = 0
    index_dim: int = 0
    index_topk: int = 0
    indexer_layers: frozenset[int] = frozenset()
    mtp_has_indexer: bool = False
    exl3: dict[str, Any] | None = None
    """The ``hybrid_tr3_tail`` block of an EXL3-TR3 config, when present."""
    quant_method: str | None = None
    """The config's ``quantization_config.quant_method`` (how the checkpoint is quantized)."""

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def record(self) -> dict[str, Any]:
        """JSON for the run file (what the worker reads instead of the checkpoint again)."""
        data = dataclasses.asdict(self)
        data["indexer_layers"] = sorted(self.indexer_layers)
        return data

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ModelFacts:
        return cls(**{**data, "indexer_layers": frozenset(data.get("indexer_layers", ()))})

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def has_indexer(self) -> bool:
        return self.index_heads > 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer >= self.first_dense


def from_config(cfg: dict[str, Any], name: str, source: str) -> ModelFacts:
    """Facts from a config.json dict (HF key names)."""
    if "text_config" in cfg:  # multimodal wrappers keep the LM under text_config
        cfg = {**cfg, **cfg["text_config"]}
    layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    index_heads = int(cfg.get("index_n_heads") or 0)
    indexer_layers, mtp_indexer = _indexer_layers(cfg, layers, index_heads)
    return ModelFacts(
        name=name,
        source=source,
        model_type=str(cfg.get("model_type", "")),
        num_layers=layers,
        mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        hidden=hidden,
        heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or hidden // heads),
        vocab=int(cfg["vocab_size"]),
        intermediate=int(cfg.get("intermediate_size") or 0),
        max_position=int(cfg.get("max_position_embeddings") or 0),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dtype_bytes=DTYPE_BYTES.get(
            str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), 2
        ),
        q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
        qk_nope=int(cfg.get("qk_nope_head_dim") or 0),
        qk_rope=int(cfg.get("qk_rope_head_dim") or 0),
        v_head=int(cfg.get("v_head_dim") or 0),
        experts=int(cfg.get("n_routed_experts") or cfg.get("num_experts") or 0),
        experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
        shared_experts=int(cfg.get("n_shared_experts") or 0),
        moe_intermediate=int(cfg.get("moe_intermediate_size") or 0),
        first_dense=int(cfg.get("first_k_dense_replace") or 0),
        index_heads=index_heads,
        index_dim=int(cfg.get("index_head_dim") or 0),
        index_topk=int(cfg.get("index_topk") or 0),
        indexer_layers=indexer_layers,
        mtp_has_indexer=mtp_indexer,
        exl3=cfg.get("hybrid_tr3_tail"),
        quant_method=_quant_method(cfg),
    )


def _quant_method(cfg: dict[str, Any]) -> str | None:
    qc = cfg.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    return str(method).lower() if method else None


def _indexer_layers(
    cfg: dict[str, Any], layers: int, index_heads: int
) -> tuple[frozenset[int], bool]:
    """Which decoder layers own a DSA indexer (and whether the MTP layer does).

    ``index_layers`` (an explicit list) or ``index_layer_pattern`` ({dense_first, period}:
    layer i has one if i < dense_first or (i + 1 - dense_first) % period == 0) select
    some layers; otherwise a model with indexer heads has one on every layer.
    """
    if not index_heads:
        return frozenset(), False
    if "index_layers" in cfg:
        return frozenset(int(i) for i in cfg["index_layers"]), bool(
            cfg.get("index_mtp_layer", True)
        )
    pattern = cfg.get("index_layer_pattern")
    if pattern:
        first, period = int(pattern["dense_first"]), int(pattern["period"])
        chosen = {i for i in range(layers) if i < first or (i + 1 - first) % period == 0}
        return frozenset(chosen), bool(pattern.get("mtp", True))
    return frozenset(range(layers)), True


def load_facts(model_path: str, architecture: str | None) -> ModelFacts:
    """Facts from ``model_path/config.json`` when it exists, else from the catalog.

    Raises:
        FileNotFoundError: no config.json and no architecture to fall back on.
        CatalogMiss: the architecture key is unknown.
        ValueError: the config.json is unreadable or lacks a required key.
    """
    from launcher.plan.catalog import architecture_config

    config = Path(model_path).expanduser() / "config.json"
    if config.is_file():
        try:
            cfg = json.loads(config.read_text())
            return from_config(cfg, name=Path(model_path).name, source="config.json")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"cannot read {config}: {exc}") from None
    if architecture is None:
        raise FileNotFoundError(
            f"no config.json under {model_path} and no model.architecture to fall back on"
        )
    return from_config(architecture_config(architecture), name=architecture, source="catalog")
