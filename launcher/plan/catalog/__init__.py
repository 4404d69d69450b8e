"""Shipped data: GPU kinds, model architectures (facts from each model's config.json) and
published checkpoints by Hub repo id (their layout facts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from launcher.profile.yamlsource import load_plain
from launcher.units import parse_size

HERE = Path(__file__).parent


class CatalogMiss(LookupError):
    """A key the catalog does not have; the message lists the close ones."""


@dataclass(frozen=True)
class GpuKind:
    key: str
    name: str
    memory: int
    arch: str
    sms: int
    nvlink: bool
    match: tuple[str, ...]
    unified_memory: bool = False
    sold_as: str = ""
    """The marketing figure (``96GB``, binary: 96 GiB of memory), for the plan to explain
    its total (what the driver keeps is the difference)."""
    k8s_products: tuple[str, ...] = ()
    """The node label ``nvidia.com/gpu.product`` values of this card, for emit's affinity."""


@cache
def _gpus() -> dict[str, dict[str, Any]]:
    return load_plain((HERE / "gpus.yaml").read_text())


def gpu_kinds() -> list[str]:
    return list(_gpus())


def gpu(key: str) -> GpuKind:
    """The GPU kind ``key`` (for example ``rtx-pro-6000``)."""
    entry = _gpus().get(key)
    if entry is None:
        raise CatalogMiss(_miss("GPU kind", key, gpu_kinds()))
    return GpuKind(
        key=key,
        name=entry["name"],
        memory=parse_size(entry["memory"]),
        arch=entry["arch"],
        sms=entry["sms"],
        nvlink=entry["nvlink"],
        match=tuple(entry.get("match", ())),
        unified_memory=entry.get("unified_memory", False),
        sold_as=str(entry.get("sold_as", "")),
        k8s_products=tuple(entry.get("k8s_products", ())),
    )


def gpu_for_device_name(device_name: str) -> str | None:
    """The catalog key whose ``match`` strings occur in an NVML/CUDA device name."""
    for key, entry in _gpus().items():
        if any(m.lower() in device_name.lower() for m in entry.get("match", ())):
            return key
    return None


@cache
def _architectures() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in sorted((HERE / "models").glob("*.yaml")):
        out[f.stem] = load_plain(f.read_text())
    return out


def architectures() -> list[str]:
    return list(_architectures())


def architecture_config(key: str) -> dict[str, Any]:
    """The config.json-shaped facts of architecture ``key`` (an alias works too)."""
    table = _architectures()
    wanted = key.lower()
    for name, entry in table.items():
        if wanted == name or wanted in entry.get("aliases", ()):
            return dict(entry["config"])
    raise CatalogMiss(_miss("architecture", key, list(table)))


@cache
def _checkpoints() -> dict[str, dict[str, Any]]:
    return load_plain((HERE / "checkpoints.yaml").read_text())


def checkpoint_ids() -> list[str]:
    """Hub repo ids of the published checkpoints the catalog knows."""
    return list(_checkpoints())


def checkpoint(repo_id: str) -> dict[str, Any] | None:
    """The catalog entry of a published checkpoint (case-insensitive repo id), or None."""
    wanted = repo_id.strip().strip("/").lower()
    for key, entry in _checkpoints().items():
        if key.lower() == wanted:
            return {"id": key, **entry}
    return None


def _miss(what: str, key: str, known: list[str]) -> str:
    import difflib  # only for a miss: not on every plan

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what} {key!r}; {hint}known: {', '.join(known)}"
