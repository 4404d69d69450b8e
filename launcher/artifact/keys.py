"""This node's keys: what an artifact must have been baked under to be restored here.

The GPU kind comes from the cards a launch reads anyway (``launch.preflight.GpuFacts``); the
compute capability and the driver's CUDA version from NVML (``launcher.gpu.nvml``; no torch or
CUDA context); the build id from ``launcher.buildid``, as the container's entry point keys its
cache directory. A CPU profile has no GPU keys (None on both sides).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from launcher.artifact import ArtifactError
from launcher.artifact.manifest import ArtifactKeys
from launcher.buildfile import resolve_build
from launcher.buildid import BuildIdError, build_info
from launcher.gpu import nvml
from launcher.launch.hardware import NoGpuInfo


@dataclass(frozen=True)
class CudaTarget:
    """What compiled GPU code is built for on this node."""

    compute_capability: str | None
    """The visible cards' compute capability (several, comma-separated, if they differ)."""
    cuda_driver: str | None
    """The highest CUDA version the driver supports."""


def read_cuda_target(env: Mapping[str, str] | None = None) -> CudaTarget:
    """The visible cards' compute capability (``CUDA_VISIBLE_DEVICES``: indices or UUIDs; all
    cards without it) and the driver's CUDA version, from NVML.

    Raises:
        NoGpuInfo: NVML cannot answer (no binding or no driver: the message names the fix).
    """
    env = os.environ if env is None else env
    try:
        spec = env.get("CUDA_VISIBLE_DEVICES")
        if spec is None:
            indices = list(range(nvml.device_count()))
        else:
            indices = [nvml.index_of(s.strip()) for s in spec.split(",") if s.strip()]
        caps = {nvml.compute_capability(i) for i in indices}
        cuda = nvml.cuda_driver_version()
    except nvml.NvmlError as exc:
        raise NoGpuInfo(str(exc)) from None
    return CudaTarget(", ".join(sorted(caps)) or None, cuda)


def node_keys(
    fingerprint: str,
    gpu_kind: str,
    cuda: CudaTarget | None,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> ArtifactKeys:
    """This node's keys for the plan ``fingerprint`` on cards of ``gpu_kind`` (``cuda``: None
    on CPU).

    Raises:
        ArtifactError: the image's build id cannot be read.
    """
    env = os.environ if env is None else env
    try:
        build_id, info = resolve_build(env, say) if say else resolve_build(env)
    except BuildIdError as exc:
        raise ArtifactError(str(exc)) from None
    versions = info.get("versions")
    if not isinstance(versions, dict):  # BLAUNCH_BUILD_ID names the build; versions are read
        versions = build_info(env)["versions"]
    return ArtifactKeys(
        fingerprint=fingerprint,
        gpu_kind=gpu_kind,
        compute_capability=cuda.compute_capability if cuda else None,
        cuda_driver=cuda.cuda_driver if cuda else None,
        build_id=build_id,
        versions={str(k): (str(v) if v is not None else None) for k, v in versions.items()},
    )


def cuda_target_or_error(
    gpu: bool, read: Callable[[], CudaTarget] | None = None
) -> CudaTarget | None:
    """The node's CUDA target for a GPU profile (None for a CPU one; ``read``: default
    NVML).

    Raises:
        ArtifactError: a GPU profile on a machine where NVML cannot say it.
    """
    if not gpu:
        return None
    try:
        return (read or read_cuda_target)()
    except NoGpuInfo as exc:
        raise ArtifactError(
            f"{exc}: an artifact is keyed by the cards' compute capability and the driver's CUDA "
            "version; run this on the node with the profile's GPUs"
        ) from None
