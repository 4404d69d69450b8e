"""Architecture facts, from a checkpoint's config.json or the shipped catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launcher import bounded
from launcher.contract.facts import ModelFacts

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": 2}
CONFIG_MAX = 4 << 20
"""The largest config.json read (the largest real ones are tens of KiB)."""


class ConfigError(ValueError):
    """A config.json value the planner cannot use: the wrong type, or outside what any model
    has (a checkpoint's config is input like a profile: read, typed and bounded)."""


LAYERS_MAX = 1024
"""More decoder layers than any model has (the largest have about 128): a planner's loops run
per layer, so a value like 1e9 would hang it."""
WIDTH_MAX = 1 << 20
"""A ceiling for widths, head counts and ranks (hidden_size, intermediate sizes, heads)."""
COUNT_MAX = 1 << 24
"""A ceiling for the large counts (vocabulary, routed experts, positions are checked apart)."""
POSITIONS_MAX = 1 << 32


def _whole(cfg: dict[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    """``cfg[key]`` as a whole number from ``low`` to ``high``; a missing or null key (or 0
    where ``default`` is given, as HF configs write "none") is ``default``.

    Raises:
        ConfigError: a required key is missing, or the value is not a whole number in range.
    """
    value = cfg.get(key)
    if value is None or (default is not None and value == 0 and low > 0):
        if default is None:
            raise ConfigError(f"{key} is missing")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        shown = value if isinstance(value, int | float) else type(value).__name__
        raise ConfigError(f"{key} must be a whole number from {low} to {high} (got {shown})")
    if not low <= value <= high:
        raise ConfigError(f"{key} must be from {low} to {high} (got {value})")
    return value


def _mapping(cfg: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = cfg.get(key)
    if value is not None and not isinstance(value, dict):
        raise ConfigError(f"{key} must be a mapping (got {type(value).__name__})")
    return value


def from_config(cfg: dict[str, Any], name: str, source: str) -> ModelFacts:
    """Facts from a config.json dict (HF key names), each value typed and bounded.

    Raises:
        ConfigError: a value the planner cannot use, named by its key.
    """
    if not isinstance(cfg, dict):
        raise ConfigError(f"not a model config (a JSON object), got {type(cfg).__name__}")
    text = _mapping(cfg, "text_config")
    if text is not None:  # multimodal wrappers keep the LM under text_config
        cfg = {**cfg, **text}
    layers = _whole(cfg, "num_hidden_layers", 1, LAYERS_MAX)
    heads = _whole(cfg, "num_attention_heads", 1, WIDTH_MAX)
    hidden = _whole(cfg, "hidden_size", 1, WIDTH_MAX)
    index_heads = _whole(cfg, "index_n_heads", 0, WIDTH_MAX, 0)
    indexer_layers, mtp_indexer = _indexer_layers(cfg, layers, index_heads)
    experts = _whole(cfg, "n_routed_experts", 0, COUNT_MAX, 0) or _whole(
        cfg, "num_experts", 0, COUNT_MAX, 0
    )
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return ModelFacts(
        name=name,
        source=source,
        model_type=str(cfg.get("model_type", ""))[:200],
        num_layers=layers,
        mtp_layers=_whole(cfg, "num_nextn_predict_layers", 0, 64, 0),
        hidden=hidden,
        heads=heads,
        kv_heads=_whole(cfg, "num_key_value_heads", 1, WIDTH_MAX, heads),
        head_dim=_whole(cfg, "head_dim", 1, WIDTH_MAX, max(hidden // heads, 1)),
        vocab=_whole(cfg, "vocab_size", 1, COUNT_MAX),
        intermediate=_whole(cfg, "intermediate_size", 0, WIDTH_MAX, 0),
        max_position=_whole(cfg, "max_position_embeddings", 0, POSITIONS_MAX, 0),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        dtype_bytes=DTYPE_BYTES.get(dtype, 2) if isinstance(dtype, str) else 2,
        q_lora_rank=_whole(cfg, "q_lora_rank", 0, WIDTH_MAX, 0),
        kv_lora_rank=_whole(cfg, "kv_lora_rank", 0, WIDTH_MAX, 0),
        qk_nope=_whole(cfg, "qk_nope_head_dim", 0, WIDTH_MAX, 0),
        qk_rope=_whole(cfg, "qk_rope_head_dim", 0, WIDTH_MAX, 0),
        v_head=_whole(cfg, "v_head_dim", 0, WIDTH_MAX, 0),
        experts=experts,
        experts_per_token=_whole(cfg, "num_experts_per_tok", 0, WIDTH_MAX, 0),
        shared_experts=_whole(cfg, "n_shared_experts", 0, COUNT_MAX, 0),
        moe_intermediate=_whole(cfg, "moe_intermediate_size", 0, WIDTH_MAX, 0),
        first_dense=_whole(cfg, "first_k_dense_replace", 0, layers, 0),
        index_heads=index_heads,
        index_dim=_whole(cfg, "index_head_dim", 0, WIDTH_MAX, 0),
        index_topk=_whole(cfg, "index_topk", 0, COUNT_MAX, 0),
        indexer_layers=indexer_layers,
        mtp_has_indexer=mtp_indexer,
        exl3=_mapping(cfg, "hybrid_tr3_tail"),
        quant_method=_quant_method(cfg),
    )


def _quant_method(cfg: dict[str, Any]) -> str | None:
    qc = _mapping(cfg, "quantization_config")
    method = qc.get("quant_method") if qc else None
    return str(method).lower()[:100] if method else None


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
        chosen = cfg["index_layers"]
        if not isinstance(chosen, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in chosen
        ):
            raise ConfigError(
                f"index_layers must be a list of layer numbers from 0 to {layers - 1}"
            )
        return frozenset(chosen), bool(cfg.get("index_mtp_layer", True))
    pattern = _mapping(cfg, "index_layer_pattern")
    if pattern:
        first = _whole(pattern, "dense_first", 0, layers)
        period = _whole(pattern, "period", 1, layers)
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
    if config.exists() or config.is_symlink():  # a FIFO or a device is refused, not skipped
        try:
            cfg = bounded.read_json(config, CONFIG_MAX, "config.json")
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {config}: {exc}") from None
        try:
            return from_config(cfg, name=Path(model_path).name, source="config.json")
        except ConfigError as exc:
            raise ValueError(f"{config}: {exc}; is it a model's config.json?") from None
    if architecture is None:
        raise FileNotFoundError(
            f"no config.json under {model_path} and no model.architecture to fall back on"
        )
    return from_config(architecture_config(architecture), name=architecture, source="catalog")
