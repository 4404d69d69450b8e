"""Where a loaded model keeps its EXL3 MoE units, on every vLLM line.

b12x's ``PreparedExperts`` hang off the MoE layers as attributes (upstream, and the
layers' ``exl3_trellis_weights`` on the fork lines). The fork lines also cache each
layer shape's planned runtime (plans, scratch, the kernel API) in module-level dicts of
their EXL3 quantization module, filled when a layer first runs. Looking in only one of
the two places finds nothing on the other line; a deployment that uses EXL3 MoE and
shows zero units is a lookup that failed, which the caller reports loudly.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

from launcher.vllm.internals import module_of, read_on

EXL3_MODULES = (module_of("moe.exl3"),)
"""The fork's EXL3 quantization module (both lines)."""
RUNTIME_DICTS = ("_RANK_SLICED_RUNTIMES", "_EXACT_RANK_SLICED_RUNTIMES", "_MIXED_TRELLIS_RUNTIMES")
"""Its module-level caches of planned MoE runtimes, keyed by layer shape."""


@dataclass
class MoeUnits:
    experts: list[Any] = field(default_factory=list)
    """Distinct ``PreparedExperts`` (by experts x hidden x intermediate)."""
    tensor_experts: list[Any] = field(default_factory=list)
    """Distinct ``B12XFP4ExpertWeights``: what b12x 1.5.1's tensor-API ``prepare_weights``
    returns (the fork's EXL3 MoE). Its canonical planner takes only ``PreparedExperts``, so
    these are compiled by the runtime's own forward, at the token counts it runs."""
    runtimes: dict[str, list[Any]] = field(default_factory=dict)
    """Dict name -> the planned runtimes found in it."""
    looked: list[str] = field(default_factory=list)
    """Where the lookup looked, for the report."""

    @property
    def total(self) -> int:
        return (
            len(self.experts)
            + len(self.tensor_experts)
            + sum(len(v) for v in self.runtimes.values())
        )

    @property
    def where(self) -> str:
        return "looked in " + ", ".join(self.looked)

    def describe(self) -> str:
        found = ", ".join(f"{name} {len(v)}" for name, v in self.runtimes.items() if v)
        tensor = len(self.tensor_experts)
        return (
            f"{self.total} unit(s): {len(self.experts)} PreparedExperts attribute(s)"
            + (f", {tensor} B12XFP4ExpertWeights attribute(s)" if tensor else "")
            + (f", runtime dicts: {found}" if found else "")
        )


def find_moe_units(model_runner: Any) -> MoeUnits:
    """The EXL3 MoE units of the runner's model and its MTP draft, wherever they live."""
    units = MoeUnits()
    models = [read_on("runner.model", model_runner)]
    models.append(read_on("drafter.model", read_on("runner.drafter", model_runner)))
    kinds = [k for k in (_prepared_experts_type(), _tensor_experts_type()) if k is not None]
    seen: dict[type, dict[tuple[int, int, int], Any]] = {k: {} for k in kinds}
    modules = 0
    for model in models:
        if model is None or not hasattr(model, "modules"):
            continue
        for module in model.modules():
            modules += 1
            for value in vars(module).values():
                for kind in kinds:
                    if isinstance(value, kind):
                        key = (value.num_experts, value.hidden_size, value.intermediate_size)
                        seen[kind].setdefault(key, value)
    prepared, tensor = _prepared_experts_type(), _tensor_experts_type()
    units.experts = list(seen.get(prepared, {}).values()) if prepared else []
    units.tensor_experts = list(seen.get(tensor, {}).values()) if tensor else []
    units.looked.append(f"expert attributes of {modules} module(s)")
    for name in EXL3_MODULES:
        module = sys.modules.get(name) or _import(name)
        if module is None:
            units.looked.append(f"{name} (not importable)")
            continue
        for attr in RUNTIME_DICTS:
            cache = getattr(module, attr, None)
            if isinstance(cache, dict):
                units.runtimes[attr] = list(cache.values())
                units.looked.append(f"{name}.{attr}")
    return units


def _prepared_experts_type() -> type | None:
    try:
        from b12x.moe import fused_moe
    except Exception:  # no b12x: no PreparedExperts can exist in this process
        return None
    return fused_moe.PreparedExperts


def _tensor_experts_type() -> type | None:
    try:
        from b12x.moe.fused_moe._impl import B12XFP4ExpertWeights
    except Exception:  # no b12x, or a release without the tensor API
        return None
    return B12XFP4ExpertWeights


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception:  # another vLLM line, or one that fails to import without a GPU
        return None
