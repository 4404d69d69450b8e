"""How an EXL3-TR3 checkpoint stores its routed experts: K tiers per layer and the rotation layout.

The GLM-5.2 EXL3-TR3 checkpoints quantize only the routed experts, each sliced per TP rank
(``...experts.{E}.{proj}.rank{r}.{trellis|suh|svh|mcg}``). One slice of a linear holds the
trellis (``in*out*K/8`` bytes), a 4-byte codebook marker and the Hadamard sign vectors
``suh`` (fp16 ``[in]``) and ``svh`` (fp16 ``[out]``). Two layouts differ in where those
vectors live (../shared/FIELD-NOTES.md, "Published GLM-5.2 EXL3 checkpoints"):

- ``per_expert_v1``: every expert slice has its own ``suh`` and ``svh``;
- ``shared_h_v1``: the vectors along the hidden dimension (gate/up ``suh``, down ``svh``) are
  shared by the layer's experts, one block per layer; each expert keeps the vectors along its
  intermediate slice.

The layout comes from ``config.json`` (``hybrid_tr3_tail`` and, for mixed checkpoints,
``tier_bitmap.json``) when the checkpoint is local, or from the catalog of published
checkpoints when it is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher import bounded

BITMAP_MAX = 64 << 20
"""The largest tier bitmap read (one K per expert and layer: a few MiB at most)."""
LAYOUTS = ("per_expert_v1", "shared_h_v1")
BF16 = 16
"""K of an expert stored unquantized (BF16): 16 bits per weight, no trellis overhead."""


class LayoutError(ValueError):
    """A ``hybrid_tr3_tail`` block or tier bitmap that cannot be read."""


@dataclass(frozen=True)
class Exl3Layout:
    """Routed-expert storage of one EXL3-TR3 checkpoint."""

    rotation: str
    """``per_expert_v1`` or ``shared_h_v1``."""
    tp: int
    """Rank slices per expert in the tensor names."""
    tiers: dict[int, dict[int, int]]
    """MoE layer -> {K: experts}; K 16 is an unquantized (BF16) expert."""
    source: str
    """``config.json`` or ``catalog``."""

    def expert_bytes(self, k: int, hidden: int, inter: int) -> int:
        """Bytes of one whole expert (gate, up and down, every rank slice) stored at ``k``."""
        if k == BF16:
            return 3 * hidden * inter * 2
        slice_inter = inter // self.tp
        trellis = 3 * hidden * inter * k // 8
        if self.rotation == "per_expert_v1":
            vectors = 3 * 2 * (hidden + slice_inter)
        else:  # only the vectors along the intermediate slice stay per expert
            vectors = 3 * 2 * slice_inter
        return trellis + self.tp * (vectors + 3 * 4)

    def shared_block_bytes(self, hidden: int) -> int:
        """The per-layer block of ``shared_h_v1`` (gate/up ``suh``, down ``svh``, every slice)."""
        return self.tp * 3 * 2 * hidden if self.rotation == "shared_h_v1" else 0

    def layer_bytes(self, layer: int, hidden: int, inter: int) -> int:
        """Routed experts of one MoE layer, whole model (all rank slices)."""
        tiers = self.tiers.get(layer, {})
        total = sum(n * self.expert_bytes(k, hidden, inter) for k, n in tiers.items())
        quantized = any(k != BF16 for k in tiers)
        return total + (self.shared_block_bytes(hidden) if quantized else 0)

    def mean_bits(self, layers: list[int]) -> float:
        """Mean K over the quantized experts of ``layers``."""
        n = sum(c for i in layers for k, c in self.tiers.get(i, {}).items() if k != BF16)
        bits = sum(k * c for i in layers for k, c in self.tiers.get(i, {}).items() if k != BF16)
        return bits / n if n else 0.0

    def describe(self, mtp_layer: int | None) -> str:
        """A short account: the main tiers, the layers that differ, the MTP layer's own K."""
        counts: dict[tuple[tuple[int, int], ...], list[int]] = {}
        for layer, tiers in sorted(self.tiers.items()):
            if layer == mtp_layer:
                continue
            counts.setdefault(tuple(sorted(tiers.items())), []).append(layer)
        main = max(counts.items(), key=lambda kv: len(kv[1]))
        parts = [f"{_tiers(dict(main[0]))} x {len(main[1])} layers"]
        for tiers, layers in counts.items():
            if tiers != main[0]:
                parts.append(f"layer {_span(layers)} {_tiers(dict(tiers))}")
        if mtp_layer is not None and mtp_layer in self.tiers:
            parts.append(f"MTP layer {_tiers(self.tiers[mtp_layer])}")
        return f"{self.rotation}, " + "; ".join(parts)


def _tiers(t: dict[int, int]) -> str:
    return " + ".join(f"{n} {'BF16' if k == BF16 else f'K{k}'}" for k, n in sorted(t.items()))


def _span(layers: list[int]) -> str:
    return str(layers[0]) if len(layers) == 1 else f"{layers[0]}-{layers[-1]}"


def from_spec(spec: dict[str, Any], *, layers: list[int], experts: int, source: str) -> Exl3Layout:
    """A layout from the catalog's ``experts`` map: ``default`` tiers plus per-layer ones.

    Tier maps are ``{K: count}``; the key ``bf16`` stands for an unquantized expert.
    """
    table = spec.get("experts") or {}
    default = table.get("default")
    tiers: dict[int, dict[int, int]] = {}
    for layer in layers:
        raw = table.get(layer, table.get(str(layer), default))
        if raw is None:
            raise LayoutError(f"no expert tiers for layer {layer} and no default")
        tiers[layer] = _tier_map(raw, experts, f"layer {layer}")
    return Exl3Layout(
        rotation=_rotation(spec.get("layout")),
        tp=int(spec.get("tp", 4)),
        tiers=tiers,
        source=source,
    )


def from_config(
    block: dict[str, Any],
    model_dir: Path | None,
    *,
    layers: list[int],
    experts: int,
    files: dict[str, Any] | None = None,
) -> Exl3Layout:
    """A layout from a ``hybrid_tr3_tail`` block (and its tier bitmap file when mixed).

    Read as: ``bits`` an integer K for every expert, or ``"mixed"`` with
    ``bits_per_expert: "<file>:<key>"`` naming a JSON file in the checkpoint whose ``key``
    maps each MoE layer (as a string) to one K per expert; ``moe_layers`` the quantized
    layers (a list, or ``"first-last"``; default: every MoE layer); ``rotation_layout``
    (default ``per_expert_v1``); ``tp`` the rank slices. MoE layers outside ``moe_layers``
    are unquantized (BF16). ``files`` holds JSON files already read (a Hub checkpoint's).
    """
    quantized = _layers(block.get("moe_layers"), layers)
    bits = block.get("bits")
    per_expert: dict[str, list[int]] = {}
    if str(bits) == "mixed":
        ref = str(block.get("bits_per_expert") or "")
        file, _, key = ref.partition(":")
        if not file or (model_dir is None and file not in (files or {})):
            raise LayoutError("bits 'mixed' needs bits_per_expert '<file>:<key>' in the checkpoint")
        try:
            data = (files or {}).get(file) or _bitmap(model_dir, file)
            per_expert = data[key or "k"]
            if not isinstance(per_expert, dict):
                raise TypeError(f"{key or 'k'} is not a mapping of layers")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LayoutError(f"cannot read {file} in the checkpoint: {exc}") from None
    tiers: dict[int, dict[int, int]] = {}
    for layer in layers:
        if layer not in quantized:
            tiers[layer] = {BF16: experts}
        elif per_expert:
            ks = per_expert.get(str(layer))
            if not isinstance(ks, list) or len(ks) != experts:
                raise LayoutError(f"tier bitmap has no {experts} K values for layer {layer}")
            if not all(isinstance(k, int) and not isinstance(k, bool) and 0 < k <= 16 for k in ks):
                raise LayoutError(f"tier bitmap's K values for layer {layer} are not 1 to 16")
            counts: dict[int, int] = {}
            for k in ks:
                counts[k] = counts.get(k, 0) + 1
            tiers[layer] = counts
        else:
            try:
                tiers[layer] = {int(bits): experts}
            except (TypeError, ValueError):
                raise LayoutError(f"bits {bits!r} is neither an integer K nor 'mixed'") from None
    return Exl3Layout(
        rotation=_rotation(block.get("rotation_layout")),
        tp=int(block.get("tp", 4)),
        tiers=tiers,
        source="config.json",
    )


def _rotation(value: Any) -> str:
    rotation = str(value or "per_expert_v1")
    if rotation not in LAYOUTS:
        raise LayoutError(f"unknown rotation layout {rotation!r}; known: {', '.join(LAYOUTS)}")
    return rotation


def _tier_map(raw: Any, experts: int, where: str) -> dict[int, int]:
    try:
        out = {BF16 if str(k).lower() == "bf16" else int(k): int(n) for k, n in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise LayoutError(f"{where}: tiers must map K to a count, got {repr(raw)[:80]}") from None
    if sum(out.values()) != experts:
        raise LayoutError(f"{where}: tiers count {sum(out.values())} experts, not {experts}")
    return out


def _layers(value: Any, layers: list[int]) -> set[int]:
    """The quantized layers, among the model's own (a range is clipped to them: ``0-1e9``
    names no more layers than the model has)."""
    if value is None:
        return set(layers)
    known = set(layers)
    try:
        if isinstance(value, str) and "-" in value:
            first, last = (int(x) for x in value.split("-", 1))
            return {i for i in known if first <= i <= last}
        return {int(i) for i in value} & known
    except (TypeError, ValueError):
        shown = repr(value)[:80]
        raise LayoutError(f"moe_layers {shown} is neither a list nor 'first-last'") from None


def _bitmap(model_dir: Path | None, name: str) -> Any:
    """The tier bitmap file ``name`` of a checkpoint: a file directly in it, read bounded."""
    if model_dir is None or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a file of the checkpoint's directory")
    return bounded.read_json(model_dir / name, BITMAP_MAX, "tier bitmap")
