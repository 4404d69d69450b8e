"""Gather what the planner reads: model facts, the GPU, weights, sizes, calibration.

This is the I/O edge in front of the pure ``plan()``. Problems become profile
issues located at the key that caused them.
"""

from __future__ import annotations

from pathlib import Path

from launcher.catalog import CatalogMiss, gpu
from launcher.checkpoint import (
    CheckpointError,
    checkpoint_files,
    exl3_bits,
    iter_tensors,
    rank_weights,
)
from launcher.errors import ProfileError
from launcher.model import ModelFacts, load_facts
from launcher.plan import Measured, PlanInputs
from launcher.profile import LoadedProfile
from launcher.ranks import rank_shapes
from launcher.weights import Recipe, estimate_rank_weights


def gather(
    loaded: LoadedProfile,
    *,
    b12x_sizing: bool = False,
    measured: dict[int, Measured] | None = None,
    gpu_memory: tuple[int, str] | None = None,
) -> PlanInputs:
    """Read the facts ``plan()`` needs for ``loaded``.

    Args:
        b12x_sizing: size workspaces with b12x's own plan functions (imports b12x and torch).
        measured: calibration records by rank.
        gpu_memory: (bytes, source) per GPU when a device query knows it.

    Raises:
        ProfileError: located at the key whose value could not be used.
    """
    p = loaded.profile
    try:
        kind = gpu(p.hardware.gpu)
    except CatalogMiss as exc:
        raise ProfileError([loaded.issue("hardware.gpu", str(exc))]) from None
    facts = _facts(loaded)
    check_against_facts(loaded, facts)
    weights, source, detail = _weights(loaded, facts)
    workspaces = None
    if b12x_sizing:
        from launcher.b12x_sizing import size_workspaces

        workspaces = size_workspaces(p, facts)
    memory, memory_source = gpu_memory if gpu_memory else (None, "catalog")
    return PlanInputs(
        facts=facts,
        gpu=kind,
        weights=tuple(weights),
        weights_source=source,
        weights_detail=detail,
        workspaces=workspaces,
        measured=measured or {},
        gpu_memory=memory,
        gpu_memory_source=memory_source,
    )


def _facts(loaded: LoadedProfile) -> ModelFacts:
    m = loaded.profile.model
    try:
        return load_facts(m.path, m.architecture)
    except CatalogMiss as exc:
        raise ProfileError([loaded.issue("model.architecture", str(exc))]) from None
    except FileNotFoundError as exc:
        raise ProfileError(
            [
                loaded.issue(
                    "model.path",
                    f"{exc}; point model.path at a checkpoint or set model.architecture",
                )
            ]
        ) from None
    except ValueError as exc:
        raise ProfileError([loaded.issue("model.path", str(exc))]) from None


def check_against_facts(loaded: LoadedProfile, f: ModelFacts) -> None:
    """Refuse settings the model cannot take (a sweep re-checks each combination)."""
    p = loaded.profile
    issues = []
    if p.mtp_tokens and f.mtp_layers == 0:
        issues.append(
            loaded.issue(
                "speculative.method",
                f"{f.name} has no MTP layer (num_nextn_predict_layers 0); "
                "set speculative.method: none",
            )
        )
    if f.max_position and p.serving.max_model_len > f.max_position:
        issues.append(
            loaded.issue(
                "serving.max_model_len",
                f"{p.serving.max_model_len:,} exceeds the model's "
                f"max_position_embeddings {f.max_position:,}; lower it to at most {f.max_position}",
            )
        )
    if p.parallel.pipeline > f.num_layers:
        issues.append(
            loaded.issue(
                "parallel.pipeline",
                f"{p.parallel.pipeline} stages for {f.num_layers} layers leaves stages without a "
                f"layer; use at most {f.num_layers}",
            )
        )
    heads = f.heads
    if heads % p.parallel.tensor:
        issues.append(
            loaded.issue(
                "parallel.tensor",
                f"must divide the model's {heads} attention heads (got {p.parallel.tensor})",
            )
        )
    if not f.is_mla and p.serving.kv_cache_dtype.endswith("_ds_mla"):
        issues.append(
            loaded.issue(
                "serving.kv_cache_dtype",
                f"{p.serving.kv_cache_dtype} applies to MLA models only; "
                f"{f.name} uses standard attention: use auto or fp8",
            )
        )
    if issues:
        raise ProfileError(issues)


def _weights(loaded: LoadedProfile, f: ModelFacts) -> tuple[list[int], str, str]:
    p = loaded.profile
    shapes = rank_shapes(f.num_layers, p.parallel.tensor, p.parallel.pipeline, p.hardware.count)
    with_mtp = p.mtp_tokens > 0
    model_dir = Path(p.model.path).expanduser()
    files = checkpoint_files(model_dir) if model_dir.is_dir() else []
    if files:
        try:
            tensors = list(iter_tensors(model_dir))
        except (CheckpointError, OSError) as exc:
            raise ProfileError([loaded.issue("model.path", str(exc))]) from None
        weights = rank_weights(tensors, f, shapes, ep=p.parallel.expert, with_mtp=with_mtp)
        detail = f"{len(files)} safetensors files"
        bits = exl3_bits(tensors)
        if bits:
            detail += ", EXL3 K=" + "/".join(f"{k}:{n}" for k, n in sorted(bits.items()))
        return weights, "headers", detail
    recipe = Recipe(p.model.quantization, p.model.bits_per_weight)
    if p.model.quantization == "exl3" and p.model.bits_per_weight is None:
        raise ProfileError(
            [
                loaded.issue(
                    "model.bits_per_weight",
                    "an EXL3 checkpoint that is not on disk needs its mean bits "
                    "per weight to be estimated (for example 3.42)",
                )
            ]
        )
    weights = [
        estimate_rank_weights(f, s, ep=p.parallel.expert, recipe=recipe, with_mtp=with_mtp)
        for s in shapes
    ]
    what = (
        f"routed experts EXL3 {recipe.routed_expert_bits:g} bpw, rest BF16"
        if p.model.quantization == "exl3"
        else f"quantization {p.model.quantization or 'none'}"
    )
    return weights, "estimate", f"from {f.source} architecture: {what}"
