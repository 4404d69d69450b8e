"""The ptxas every process of a boot hands to Triton, fixed before vLLM starts.

Triton's cache key holds the version of ptxas that a process first asked for (Triton 3.6
caches ``get_ptxas_version`` per process). PyTorch's Inductor points Triton at torch's own
ptxas (``TRITON_PTXAS_PATH``) in its compile workers at their start, and in the main process
only when that process first compiles. torch 2.11 (cu130) ships ptxas 13.0 and Triton 3.6
bundles 12.8, so a kernel has two keys, and which one a boot computes depends on which process
compiled it and what that process ran first. Seen on the H200 (2026-12-04): a node restoring
the GLM model's artifact compiled vLLM's indexer kernel in the main process while the baked
node's compile workers had, keyed it apart, and compiled it again. Set before any process
starts, every process of every boot asks the same ptxas, so one kernel has one key. Cards of
compute capability 10 and up (Blackwell) compile with Triton's ``ptxas-blackwell``
(``TRITON_PTXAS_BLACKWELL_PATH`` in Triton 3.6), which Inductor does not switch: the pin
changes nothing there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from launcher.installed import package_root

PTXAS_ENV = "TRITON_PTXAS_PATH"


def torch_ptxas() -> Path | None:
    """torch's bundled ptxas, found without importing torch; None on builds without one
    (CPU, ROCm) or without torch."""
    root = package_root("torch")
    path = root / "bin" / "ptxas" if root else None
    return path if path and path.is_file() and os.access(path, os.X_OK) else None


def pinned_env(profile_env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``TRITON_PTXAS_PATH`` set to torch's ptxas, the one Inductor would switch to, unless the
    profile or the caller's environment names one already (theirs is kept)."""
    if PTXAS_ENV in profile_env or PTXAS_ENV in environ:
        return {}
    path = torch_ptxas()
    return {PTXAS_ENV: str(path)} if path else {}
