"""Weights per rank from safetensors headers alone (no tensor data is read).

A safetensors file starts with an 8-byte little-endian header length and a JSON
header giving each tensor's dtype, shape and byte range. Tensors are assigned to
ranks as vLLM shards them; EXL3 tensors named ``...rank{r}...`` belong to rank r
alone. Anything not recognised is counted as replicated (the safe side).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from launcher import bounded
from launcher.plan.model import ModelFacts
from launcher.plan.ranks import RankShape

MAX_HEADER = 100 * 1024 * 1024

# Split across TP ranks (vLLM's column/row-parallel layers and vocab-parallel embeddings).
_SPLIT = re.compile(
    r"(q_b_proj|kv_b_proj|o_proj|q_proj|k_proj|v_proj|qkv_proj|shared_experts?\.|"
    r"mlp\.(gate|up|down|gate_up)_proj|embed_tokens|lm_head|shared_head\.head|"
    r"mlp\.experts\.)"
)
_RANK = re.compile(r"\.rank(\d+)\.")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class CheckpointError(ValueError):
    """A checkpoint file that is not valid safetensors."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def read_header(path: Path) -> list[TensorInfo]:
    """The tensors of one ``.safetensors`` file, from its header."""
    try:
        fh = bounded.open_regular(path, "safetensors file")
    except bounded.TooLarge as exc:
        raise CheckpointError(str(exc)) from None
    with fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise CheckpointError(f"{path}: too short to be safetensors")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER:
            raise CheckpointError(f"{path}: header of {size} bytes is not plausible")
        try:
            header = bounded.parse_json(fh.read(size))
        except ValueError as exc:
            raise CheckpointError(f"{path}: header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    out = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = meta["data_offsets"]
            out.append(tensor_info(name, meta["dtype"], meta["shape"], start, end))
        except (KeyError, TypeError, ValueError) as exc:
            shown = name if len(name) <= 200 else name[:200] + "..."
            raise CheckpointError(f"{path}: malformed entry for {shown!r} ({exc})") from None
    return out


TENSOR_MAX = 1 << 46
"""64 TiB: more bytes, or elements along one dimension, than any tensor of a checkpoint has."""


def _whole(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TENSOR_MAX:
        raise ValueError(f"{what} must be a whole number from 0 to {TENSOR_MAX} (got {value!r})")
    return value


def tensor_info(name: str, dtype: object, shape: object, start: object, end: object) -> TensorInfo:
    """One header entry, typed and bounded (a header is a file like any other input).

    Raises:
        ValueError: a field of the wrong type or out of range.
    """
    if not isinstance(dtype, str) or not isinstance(shape, list) or len(shape) > 16:
        raise ValueError("dtype must be a string and shape a list of at most 16 dimensions")
    dims = tuple(_whole(d, "a dimension") for d in shape)
    first, last = _whole(start, "data_offsets"), _whole(end, "data_offsets")
    if last < first:
        raise ValueError(f"data_offsets end before they start ({first}, {last})")
    return TensorInfo(name, dtype, dims, last - first)


def checkpoint_files(model_dir: Path) -> list[Path]:
    return sorted(model_dir.glob("*.safetensors"))


def iter_tensors(model_dir: Path) -> Iterator[TensorInfo]:
    for f in checkpoint_files(model_dir):
        yield from read_header(f)


def exl3_bits(tensors: list[TensorInfo]) -> dict[int, int]:
    """Count of EXL3 trellis tensors by K (bits per weight = last dim // 16)."""
    counts: dict[int, int] = {}
    for t in tensors:
        if t.name.endswith(".trellis") and t.shape:
            k = t.shape[-1] // 16
            counts[k] = counts.get(k, 0) + 1
    return counts


def _layer_of(name: str) -> int | None:
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def _on_stage(name: str, shape: RankShape) -> bool:
    """Whether a tensor outside the decoder layers lives on this pipeline stage."""
    if "embed_tokens" in name:
        return shape.is_first_stage
    if "lm_head" in name or name.endswith("model.norm.weight"):
        return shape.is_last_stage
    return True


def tensor_share(
    t: TensorInfo, shape: RankShape, facts: ModelFacts, *, ep: bool, with_mtp: bool
) -> float:
    """The bytes of ``t`` that rank ``shape`` holds."""
    name = t.name
    layer = _layer_of(name)
    if layer is not None:
        if layer >= facts.num_layers:  # an MTP layer: loaded only with MTP, on the last stage
            if not (with_mtp and shape.is_last_stage):
                return 0.0
            # The draft's copies of the LM head (always) and of the embedding (with one
            # stage) are dropped for the target's before vLLM measures the load.
            if "shared_head.head" in name or ("embed_tokens" in name and shape.is_first_stage):
                return 0.0
        elif layer not in shape.layers:
            return 0.0
    elif not _on_stage(name, shape):
        return 0.0
    rank = _RANK.search(name)
    if rank:
        return float(t.nbytes) if int(rank.group(1)) == shape.tp_rank else 0.0
    if _SPLIT.search(name):
        if "mlp.experts." in name and ep:
            return t.nbytes / shape.tp  # whole experts, E / TP per rank
        if ("k_proj" in name or "v_proj" in name) and facts.kv_heads < shape.tp:
            return t.nbytes / facts.kv_heads  # KV heads replicated across TP groups
        return t.nbytes / shape.tp
    return float(t.nbytes)


def rank_weights(
    tensors: list[TensorInfo],
    facts: ModelFacts,
    shapes: list[RankShape],
    *,
    ep: bool,
    with_mtp: bool,
) -> list[int]:
    """Weights per rank from the tensors of a checkpoint's safetensors headers."""
    totals = [0.0] * len(shapes)
    for t in tensors:
        for i, shape in enumerate(shapes):
            totals[i] += tensor_share(t, shape, facts, ep=ep, with_mtp=with_mtp)
    return [int(x) for x in totals]
