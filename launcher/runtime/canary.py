"""The canary: one deliberately new Triton kernel compiled after sizing, to prove the counters.

A late count of 0 means something only if the counter was running. A canary boot
(``prewarm.canary: true``) compiles a kernel no cache can hold (its source carries a fresh
nonce, so Triton's on-disk key is new too) once in vLLM's warmup window and once in the
serving window; every armed counter must then report it: Triton's hooks and the cache oracle in
both windows, vLLM's JIT monitor in serving. The GPU tier boots one and checks each.
"""

from __future__ import annotations

import importlib.util
import secrets
from pathlib import Path

from launcher import atomic
from launcher.contract.census import CANARY_PREFIX as PREFIX
from launcher.contract.census import Window

_SOURCE = """import triton
import triton.language as tl


@triton.jit
def {name}(out_ptr):
    tl.store(out_ptr, {nonce})
"""


def compile_one(directory: Path, window: Window, device: int) -> str:
    """Write, compile and launch one canary kernel on ``device``; its ``module.name``.

    Raises whatever Triton or torch raise (the worker records it as the canary's skip)."""
    import torch

    nonce = secrets.randbits(31)
    name = f"{PREFIX}{window}_{nonce}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    # Triton reads a kernel's source from its file: the module must be a real one.
    atomic.write_text(path, _SOURCE.format(name=name, nonce=nonce))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = torch.zeros(1, dtype=torch.int32, device=f"cuda:{device}")
    getattr(module, name)[(1,)](out)
    torch.cuda.synchronize(device)
    if int(out.item()) != nonce:
        raise RuntimeError(f"canary {name} ran but wrote {int(out.item())}")
    return f"{name}.{name}"
