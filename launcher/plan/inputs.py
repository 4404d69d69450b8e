"""Gather what the planner reads: model facts, the GPU, weights, sizes, calibration.

This is the I/O edge in front of the pure ``plan()``. Problems become profile
issues located at the key that caused them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.deployment import Deployment
from launcher.errors import ProfileError
from launcher.plan import exl3_layout
from launcher.plan.catalog import CatalogMiss, GpuKind, architecture_config, checkpoint, gpu
from launcher.plan.checkpoint import (
    CheckpointError,
    TensorInfo,
    checkpoint_files,
    exl3_bits,
    iter_tensors,
    rank_weights,
)
from launcher.plan.exl3_layout import Exl3Layout, LayoutError
from launcher.plan.model import ConfigError, ModelFacts, from_config, load_facts
from launcher.plan.planner import Measured, PlanInputs
from launcher.plan.ranks import rank_shapes
from launcher.plan.weights import Recipe, estimate_rank_weights, load_buffers
from launcher.profile import LoadedProfile
from launcher.profile.settings_checks import quantization_matches_checkpoint
from launcher.profile.vllm_asks import asks_of
from launcher.vllm import can_serve
from launcher.vllm.lines import VllmLine


@dataclass(frozen=True)
class ModelSource:
    """Where the model's facts came from: a local checkpoint, the Hub's headers, the catalog
    of published checkpoints, or the architecture catalog."""

    facts: ModelFacts
    kind: str
    """``local``, ``headers`` (from the Hub), ``catalog`` (a published checkpoint) or
    ``architecture``."""
    tensors: list[TensorInfo] | None = None
    files: int = 0
    layout: Exl3Layout | None = None
    entry: dict[str, Any] | None = None
    """The published checkpoint's catalog entry."""
    notes: tuple[str, ...] = ()
    random_weights: bool = False
    """``--load-format dummy``: vLLM serves random weights, no checkpoint is read."""


def random_weights(profile) -> bool:
    """Whether ``vllm.extra_args`` passes ``--load-format dummy`` (random weights)."""
    args = list(profile.vllm.extra_args)
    for i, arg in enumerate(args):
        if arg == "--load-format=dummy" or (
            arg == "--load-format" and args[i + 1 : i + 2] == ["dummy"]
        ):
            return True
    return False


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")
"""What vLLM can load weights from (only safetensors headers are read for the plan)."""


def gather(
    loaded: LoadedProfile,
    deployment: Deployment,
    *,
    b12x_sizing: bool = False,
    measured: dict[int, Measured] | None = None,
    gpu_memory: tuple[int, str] | None = None,
) -> PlanInputs:
    """Read the facts ``plan()`` needs for ``loaded``.

    Args:
        deployment: ``loaded``'s derived values, resolved by the caller.
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
    model = _model_source(loaded)
    facts = model.facts
    check_against_facts(loaded, facts, kind, deployment.runtime)
    _check_quantization(loaded, model)
    weights, source, detail = _weights(loaded, model)
    workspaces = None
    if b12x_sizing:
        from launcher.plan.b12x_sizing import size_workspaces

        workspaces = size_workspaces(deployment, facts)
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
        notes=(*model.notes, *_internals_notes(deployment)),
        deployment=deployment,
    )


def _internals_notes(deployment: Deployment) -> list[str]:
    """What the vLLM release this plan is checked against lacks of the internals the
    deployment's worker uses (``launcher/vllm/releases.json``), each a named downgrade."""
    from launcher.vllm.capabilities import DRY_RUN_RELEASE
    from launcher.vllm.check import on_table

    p = deployment.profile
    release = p.vllm.release if p.vllm.release not in (None, "auto") else DRY_RUN_RELEASE
    platform = "cpu" if p.hardware.gpu == "cpu" else "cuda"
    fork = bool(deployment.runtime.markers)  # a fork line: no table of its source
    return on_table(release, fork, platform, deployment.prewarm)


def _check_quantization(loaded: LoadedProfile, model: ModelSource) -> None:
    """The profile's quantization against what the checkpoint is (its config, EXL3 trellis
    tensors or its catalogued EXL3 layout)."""
    f = model.facts
    exl3 = f.exl3 is not None or model.layout is not None or bool(exl3_bits(model.tensors or []))
    issues = quantization_matches_checkpoint(loaded.profile, f.quant_method, exl3)
    if issues := [loaded.issue(key, message) for key, message in issues]:
        raise ProfileError(issues)


def _model_source(loaded: LoadedProfile) -> ModelSource:
    """Facts from the local checkpoint, else the Hub (a repo id), else the catalog."""
    m = loaded.profile.model
    model_dir = Path(m.path).expanduser()
    if model_dir.exists() and not (model_dir.is_dir() or model_dir.is_file()):
        message = f"{model_dir} is a device, FIFO or socket, not a checkpoint directory"
        raise ProfileError([loaded.issue("model.path", message)])
    if model_dir.is_dir():
        facts = _facts(loaded)
        tensors, files = _local_tensors(loaded, model_dir)
        layout = _layout(loaded, facts, model_dir) if facts.exl3 else None
        dummy = random_weights(loaded.profile)
        if tensors is None and not dummy and not _any_weights(model_dir):
            raise ProfileError([loaded.issue("model.path", _no_checkpoint(model_dir))])
        return ModelSource(facts, "local", tensors, files, layout, random_weights=dummy)
    from launcher.plan.hub import is_repo_id

    repo = m.path if is_repo_id(m.path) else None
    notes: tuple[str, ...] = ()
    if repo:
        from launcher.plan.hub import HubUnavailable, read_checkpoint

        try:
            hub = read_checkpoint(repo, loaded.profile.runtime.cache_root)
        except HubUnavailable as exc:
            notes = (f"{repo}: Hub headers not read ({exc}); sized from the catalog",)
        else:
            try:
                facts = from_config(hub.config, name=repo, source="config.json")
            except ConfigError as exc:
                message = f"{repo}'s config.json: {exc}; is it a model's checkpoint?"
                raise ProfileError([loaded.issue("model.path", message)]) from None
            layout = _layout(loaded, facts, None, hub.aux) if facts.exl3 else None
            return ModelSource(facts, "headers", hub.tensors, hub.files, layout)
    entry = checkpoint(repo or m.checkpoint or "")
    if entry is None and m.checkpoint:
        raise ProfileError(
            [loaded.issue("model.checkpoint", f"{m.checkpoint!r} is not in the catalog")]
        )
    if entry is not None:
        facts = from_config(
            architecture_config(entry["architecture"]), name=entry["id"], source="catalog"
        )
        try:
            layout = exl3_layout.from_spec(
                entry, layers=_moe_layers(facts), experts=facts.experts, source="catalog"
            )
        except LayoutError as exc:  # a broken shipped entry is a bug, said plainly
            raise ValueError(f"catalog entry {entry['id']}: {exc}") from None
        return ModelSource(facts, "catalog", layout=layout, entry=entry, notes=notes)
    return ModelSource(_facts(loaded), "architecture", notes=notes)


def _no_checkpoint(model_dir: Path) -> str:
    has = "config.json" if (model_dir / "config.json").is_file() else "no config.json"
    return (
        f"{model_dir} has {has} but no checkpoint (no *.safetensors file): vLLM would fail "
        "loading its weights, and the plan could only estimate them. Download the checkpoint "
        f"into it (hf download REPO --local-dir {model_dir}), point model.path at the "
        "directory that has it, or pass --load-format dummy in vllm.extra_args to serve "
        "random weights"
    )


def _any_weights(model_dir: Path) -> bool:
    return any(next(model_dir.glob(pattern), None) for pattern in WEIGHT_FILES)


def _moe_layers(f: ModelFacts) -> list[int]:
    return [i for i in range(f.num_layers + f.mtp_layers) if f.is_moe_layer(i)]


def _layout(
    loaded: LoadedProfile, f: ModelFacts, model_dir: Path | None, aux: dict | None = None
) -> Exl3Layout | None:
    """The EXL3 layout a config's ``hybrid_tr3_tail`` describes (tier bitmap from the
    checkpoint directory or, for a Hub checkpoint, from the files already fetched)."""
    try:
        return exl3_layout.from_config(
            dict(f.exl3 or {}), model_dir, layers=_moe_layers(f), experts=f.experts, files=aux
        )
    except LayoutError as exc:
        raise ProfileError([loaded.issue("model.path", f"hybrid_tr3_tail: {exc}")]) from None


def _local_tensors(loaded: LoadedProfile, model_dir: Path) -> tuple[list[TensorInfo] | None, int]:
    files = checkpoint_files(model_dir)
    if not files:
        return None, 0
    try:
        return list(iter_tensors(model_dir)), len(files)
    except (CheckpointError, OSError) as exc:
        raise ProfileError([loaded.issue("model.path", str(exc))]) from None


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


def serve_target(f: ModelFacts, kind: GpuKind) -> can_serve.Target:
    """What whether a vLLM line can serve the deployment reads of the model and the card."""
    return can_serve.Target(f.is_mla, f.has_indexer, f.heads, can_serve.arch_major(kind.arch))


def check_against_facts(
    loaded: LoadedProfile, f: ModelFacts, kind: GpuKind, line: VllmLine
) -> None:
    """Refuse what vLLM line ``line`` cannot run of the deployment on ``kind`` (its table at
    the profile's release: ``can_serve.on_table``), then settings the model cannot take (a
    sweep re-checks each combination on its shared facts)."""
    p = loaded.profile
    found = can_serve.on_table(asks_of(p), line.table(p.vllm.release), serve_target(f, kind))
    if found:
        raise ProfileError([loaded.issue(key, message) for key, message in found])
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


def _weights(loaded: LoadedProfile, model: ModelSource) -> tuple[list[int], str, str]:
    p, f = loaded.profile, model.facts
    shapes = rank_shapes(f.num_layers, p.parallel.tensor, p.parallel.pipeline, p.hardware.count)
    with_mtp = p.mtp_tokens > 0
    buffers, buffers_what = load_buffers(f, p.serving.max_num_batched_tokens)
    extra = f"; + {buffers_what} (built with the model)"
    if model.tensors is not None:
        weights = rank_weights(model.tensors, f, shapes, ep=p.parallel.expert, with_mtp=with_mtp)
        where = "from the Hub, " if model.kind == "headers" else ""
        detail = f"{where}{model.files} safetensors files"
        bits = exl3_bits(model.tensors)
        if bits:
            detail += ", EXL3 K=" + "/".join(f"{k}:{n}" for k, n in sorted(bits.items()))
        return [w + buffers for w in weights], "headers", detail + extra
    layout = model.layout
    if layout is not None and layout.tp != p.parallel.tensor:
        raise ProfileError(
            [
                loaded.issue(
                    "parallel.tensor",
                    f"{f.name} slices its experts for TP {layout.tp}; set parallel.tensor: "
                    f"{layout.tp}",
                )
            ]
        )
    recipe = Recipe(p.model.quantization, p.model.bits_per_weight)
    if model.random_weights:
        extra = "; --load-format dummy: random weights of these shapes, no checkpoint read" + extra
    if layout is None and p.model.quantization == "exl3" and p.model.bits_per_weight is None:
        raise ProfileError(
            [
                loaded.issue(
                    "model.bits_per_weight",
                    "an EXL3 checkpoint that is not on disk needs its mean bits "
                    "per weight to be estimated (for example 3.42), or model.checkpoint",
                )
            ]
        )
    weights = [
        estimate_rank_weights(
            f, s, ep=p.parallel.expert, recipe=recipe, with_mtp=with_mtp, layout=layout
        )
        + buffers
        for s in shapes
    ]
    mtp = f.num_layers if f.mtp_layers else None
    if layout is not None:
        what = f"routed experts {layout.describe(mtp)}; rest BF16 as vLLM shards it"
        if model.kind == "catalog" and model.entry is not None:
            assumed = model.entry.get("assumed")
            head = f"catalog {model.entry['id']}: "
            if assumed:
                band = _layout_band(f, shapes[0], p, recipe, with_mtp, layout)
                return (
                    weights,
                    "estimate",
                    head + what + f" (assumed: {assumed}; {band}; b12x-launch qualify measures "
                    "what loads)" + extra,
                )
            return weights, "catalog", head + what + extra
        source = "estimate" if model.random_weights else "config.json"
        return weights, source, f"config.json hybrid_tr3_tail: {what}" + extra
    what = (
        f"routed experts EXL3 {recipe.routed_expert_bits:g} bpw, rest BF16"
        if p.model.quantization == "exl3"
        else f"quantization {p.model.quantization or 'none'}"
    )
    return weights, "estimate", f"from {f.source} architecture: {what}" + extra


def _layout_band(f, shape, p, recipe, with_mtp: bool, layout: Exl3Layout) -> str:
    """How far the other expert-vector layout moves rank 0's weights: the band an assumed
    layout carries."""
    from dataclasses import replace as swap

    other = "shared_h_v1" if layout.rotation == "per_expert_v1" else "per_expert_v1"
    kw = {"ep": p.parallel.expert, "recipe": recipe, "with_mtp": with_mtp}
    here = estimate_rank_weights(f, shape, layout=layout, **kw)
    there = estimate_rank_weights(f, shape, layout=swap(layout, rotation=other), **kw)
    return f"{other} would give {(there - here) / 2**30:+.2f} GiB per rank"
