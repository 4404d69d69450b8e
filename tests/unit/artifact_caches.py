"""A deployment's cache root as a boot leaves it, generated (seeded), for the artifact tests.

``fill`` writes the files a bake must take (the JIT caches, the plan's calibration records)
beside the files it must leave (another plan's records, run directories, the Hub header cache,
downloaded models, lock and temporary files, Triton's compiles in progress).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from launcher.artifact.manifest import ArtifactKeys
from launcher.contract import census
from launcher.contract.record import RECORD_SCHEMA_V1

FP = "0123456789ab"
OTHER_FP = "ba9876543210"
VERSIONS = {"vllm": "0.26.0", "torch": "2.9.0+cu128", "triton": "3.5.0", "b12x": "1.5.1"}


def keys(**changed) -> ArtifactKeys:
    base = {
        "fingerprint": FP,
        "gpu_kind": "h200",
        "compute_capability": "9.0",
        "cuda_driver": "12.8",
        "build_id": "vllm0.26.0-b12x1.5.1-0123456789ab",
        "versions": VERSIONS,
    }
    return ArtifactKeys(**{**base, **changed})


def record(rank: int, fingerprint: str = FP) -> bytes:
    late = census.entry("triton", "pkg.kernel", "[BLOCK=64]", 2**20, specialization="spec")
    data = {  # as a worker of version 1 wrote it: the store holds such records too
        "schema": RECORD_SCHEMA_V1,
        "fingerprint": fingerprint,
        "rank": rank,
        "when": "2026-12-01T10:00:00",
        "environment": {"gpu_kind": "h200", "vllm": "0.26.0"},
        "plan": {"jit_headroom": 2**29},
        "measured": {"jit_headroom": 2**28, "activation_peak": 2**30},
        "budget": {"bytes": 2**34, "basis": "measured"},
        "late_compiles": [late.to_json()] if rank == 0 else [],
        "learned": [],
    }
    return (json.dumps(data, indent=2) + "\n").encode()


def fill(root: Path, seed: int = 43, fingerprint: str = FP, ranks=(0, 1)) -> dict[str, bytes]:
    """Write a cache root; return the files a bake of ``fingerprint`` must hold (path: bytes)."""
    rng = random.Random(seed)
    own = {
        "triton/AB12CD/_fwd_kernel.cubin": rng.randbytes(4096),
        "triton/AB12CD/_fwd_kernel.json": b'{"name": "_fwd_kernel", "num_warps": 4}\n',
        "triton/AB12CD/__grp___fwd_kernel.json": b'{"child_paths": {}}\n',
        "triton/EF34/_topk.ptx": rng.randbytes(777),
        "inductor/fxgraph/q2/fq2abc": rng.randbytes(1500),
        "vllm/torch_compile_cache/9f1e/rank_0_0/backbone/computation_graph.py": b"graph\n",
        "vllm/torch_compile_cache/torch_aot_compile/7c2a/model": rng.randbytes(2048),
        "vllm/deep_gemm/cache/kernel.abc/kernel.so": rng.randbytes(900),
        "vllm/modelinfos/model.json": b"{}\n",
        "cute-dsl/sm90/mla_decode.o": rng.randbytes(640),
        "b12x/plans/p-11.bin": rng.randbytes(333),
        "flashinfer/.cache/flashinfer/0.5/90/cached_ops/norm/norm.so": rng.randbytes(1200),
        "xdg/tvm-ffi/libffi.so": rng.randbytes(100),
        "xdg/empty-file": b"",
    }
    for rank in ranks:
        own[f"calibration/{fingerprint}/rank{rank}.json"] = record(rank, fingerprint)
    own[f"calibration/{fingerprint}/qualified.json"] = b'{"schema": "b12x-launch/qualified/1"}\n'
    left = {
        f"calibration/{OTHER_FP}/rank0.json": record(0, OTHER_FP),
        f"calibration/{fingerprint}/old/rank0.json": b"below the store\n",
        "runs/20261201-120000-x/plan.json": b"{}\n",
        "hub-headers/org--model.json": b"{}\n",
        "xdg/huggingface/hub/models--x/model.safetensors": rng.randbytes(500),
        "triton/tmp.pid_12_3456/_fwd_kernel.cubin": b"half written",
        "triton/AB12CD/_fwd_kernel.lock": b"",
        "inductor/fxgraph/q2/fq2abc.tmp": b"partial",
        "vllm/__pycache__/x.cpython-311.pyc": b"pyc",
        "b12x/.writable.x1y2": b"",
        ".blaunch-build.json": b"{}\n",
    }
    for rel, data in {**left, **own}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "vllm/deep_gemm/cache/kernel.abc/kernel.so").chmod(0o755)
    return own


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (path: bytes), hidden ones included."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
