"""This node's keys: what an artifact must have been baked under to be restored here.

The GPU kind comes from the cards a launch reads anyway (``launch.preflight.GpuFacts``); the
compute capability and the driver's CUDA version from ``nvidia-smi`` (no NVML, torch or CUDA
import); the build id from ``launcher.buildid``, as the container's entry point keys its cache
directory. A CPU profile has no GPU keys (None on both sides).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from launcher.artifact import ArtifactError
from launcher.artifact.manifest import ArtifactKeys
from launcher.buildid import BuildIdError, build_info, resolve_build
from launcher.launch.hardware import NoGpuInfo

_CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)")


@dataclass(frozen=True)
class CudaTarget:
    """What compiled GPU code is built for on this node."""

    compute_capability: str | None
    """The visible cards' compute capability (several, comma-separated, if they differ)."""
    cuda_driver: str | None
    """The highest CUDA version the driver supports."""


def read_cuda_target(
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    env: Mapping[str, str] | None = None,
    timeout: float = 20.0,
) -> CudaTarget:
    """The visible cards' compute capability and the driver's CUDA version, from nvidia-smi.

    Raises:
        NoGpuInfo: nvidia-smi is missing, fails, or says neither.
    """
    env = os.environ if env is None else env
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise NoGpuInfo("nvidia-smi not found: no NVIDIA driver on this machine")
    query = [exe, "--query-gpu=index,compute_cap", "--format=csv,noheader"]
    try:
        caps = run(query, capture_output=True, text=True, timeout=timeout, check=True).stdout
        header = run([exe], capture_output=True, text=True, timeout=timeout, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        raise NoGpuInfo(f"nvidia-smi failed: {exc}") from None
    return parse_cuda_target(caps, header, env.get("CUDA_VISIBLE_DEVICES"))


def parse_cuda_target(caps: str, header: str, visible: str | None = None) -> CudaTarget:
    """``caps``: ``nvidia-smi --query-gpu=index,compute_cap --format=csv,noheader``;
    ``header``: plain ``nvidia-smi`` (its ``CUDA Version``); ``visible``: CUDA_VISIBLE_DEVICES
    (indices) or None for every card."""
    wanted = None if visible is None else {v.strip() for v in visible.split(",") if v.strip()}
    found = set()
    for line in caps.strip().splitlines():
        index, _, cap = (p.strip() for p in line.partition(","))
        if cap and (wanted is None or index in wanted):
            found.add(cap)
    cuda = _CUDA_VERSION.search(header)
    if not found and cuda is None:
        raise NoGpuInfo("nvidia-smi reported neither a compute capability nor a CUDA version")
    return CudaTarget(", ".join(sorted(found)) or None, cuda.group(1) if cuda else None)


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
    nvidia-smi).

    Raises:
        ArtifactError: a GPU profile on a machine where nvidia-smi cannot say it.
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
