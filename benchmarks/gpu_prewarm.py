"""Prewarm physics on a real GPU: size the KV cache before or after the kernels' first run.

    python benchmarks/gpu_prewarm.py [--margin-mib 512] [--weights-gib 85] [--nvml]
        [--json-out results.json]

A ballast allocation makes the card look like a 96 GB RTX PRO 6000 (95.01 GiB
CUDA-visible), "weights" take most of it, then a "first long request" runs: several
Triton constexpr specializations (standing in for kernels specialised on DCP size,
interleave and rank), a CUDA kernel with 16 KiB of local memory per thread (a
spilling CuTe kernel: its first launch grows the context's local memory for good)
and a transient scratch workspace (autotune / compile scratch).

- Scenario A (upstream order): free after weights − margin becomes the KV cache,
  then the request runs and meets memory nobody reserved.
- Scenario B (the launcher's order): the request runs once under
  ``launcher.gpu.measure.measure`` before sizing, ``jit_headroom`` + margin is kept
  free, the KV cache takes the rest, and the request runs with the Triton watchdog
  armed strictly.

Each scenario runs in a fresh process (``--child A|B``): local memory never shrinks
within a context and a failed launch must not leak into the next. The parent runs
each with a cold Triton cache (a fresh ``TRITON_CACHE_DIR``) and again warm (reused).
``tests/gpu/test_prewarm_physics.py`` runs the children and asserts on their JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MiB, GiB = 1024**2, 1024**3
RTX_PRO_6000_VISIBLE = int(95.01 * GiB)
SPECS = [(dcp, inter, dcp - 1) for dcp in (1, 2, 4) for inter in (1, 16, 64)]
"""(DCP size, interleave, rank): one Triton specialization each."""
LOCAL_FLOATS = 4096  # 16 KiB of local memory per thread

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:

    @triton.jit
    def _dcp_gather(
        src, dst, n, DCP: tl.constexpr, INTER: tl.constexpr, RANK: tl.constexpr, BLOCK: tl.constexpr
    ):
        # Local token i of rank RANK is global token (i // INTER * DCP + RANK) * INTER + i % INTER.
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        g = ((offs // INTER) * DCP + RANK) * INTER + offs % INTER
        x = tl.load(src + g, mask=g < n, other=0.0)
        tl.store(dst + offs, x * 2.0, mask=offs < n)

    @triton.jit
    def _fill(dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, offs.to(tl.float32), mask=offs < n)


SPILL_SRC = r"""
extern "C" __global__ void spill(float* out, int n, int salt) {
    float buf[NLOCAL];  // indexed dynamically below: it lives in local memory
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int i = 0; i < NLOCAL; ++i) buf[i] = (float)(i ^ salt ^ t);
    float acc = 0.f;
    for (int i = 0; i < 64; ++i) acc += buf[(t * 31 + i * salt) & (NLOCAL - 1)];
    if (t < n) out[t] = acc;
}
""".replace("NLOCAL", str(LOCAL_FLOATS))


class _State:
    def __init__(self, dev: int, scratch_bytes: int):
        import cupy
        import torch

        self.torch, self.dev, self.scratch_bytes = torch, dev, scratch_bytes
        self.n = 1 << 20
        self.src = torch.empty(self.n, dtype=torch.float32, device=dev)
        self.dst = torch.empty(self.n, dtype=torch.float32, device=dev)
        self.spill = cupy.RawKernel(SPILL_SRC, "spill")
        self.probes: list[int] = []

    def free(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.dev)[0])

    def request(self, hold_s: float = 0.02) -> None:
        """The first long request: every specialization, the spilling kernel, scratch."""
        import numpy as np

        torch, grid = self.torch, (triton.cdiv(self.n, 1024),)
        for dcp, inter, rank in SPECS:
            _dcp_gather[grid](
                self.src, self.dst, self.n, DCP=dcp, INTER=inter, RANK=rank, BLOCK=1024
            )
        with self.torch.cuda.device(self.dev):
            ptr = np.uint64(self.dst.data_ptr())
            self.spill((264,), (256,), (ptr, np.int32(self.n), np.int32(7)))
        scratch = torch.empty(self.scratch_bytes // 4, dtype=torch.float32, device=self.dev)
        _fill[(triton.cdiv(scratch.numel(), 1024),)](scratch, scratch.numel(), BLOCK=1024)
        torch.cuda.synchronize(self.dev)
        self.probes.append(self.free())  # the direct reading at the peak
        time.sleep(hold_s)
        del scratch


def _is_oom(error: str) -> bool:
    text = error.lower()
    return "outofmemory" in text or "out of memory" in text or "out_of_memory" in text


def child(scenario: str, a: argparse.Namespace) -> dict:
    import torch

    from launcher.gpu import measure as M
    from launcher.runtime.jit_watch import JitWatch, LateCompileError

    dev, margin = 0, a.margin_mib * MiB
    torch.cuda.set_device(dev)
    torch.empty(1, device=dev)  # the context
    total, free_at_start = M.device_memory(dev).total, M.device_memory(dev).free
    ballast = torch.empty(max(0, total - RTX_PRO_6000_VISIBLE), dtype=torch.uint8, device=dev)
    weights = torch.empty(int(a.weights_gib * GiB), dtype=torch.uint8, device=dev)
    st = _State(dev, a.scratch_mib * MiB)
    torch.cuda.synchronize(dev)
    out: dict = {
        "scenario": scenario,
        "method": a.method,
        "margin": margin,
        "total": total,
        "free_at_start": free_at_start,
        "ballast": ballast.numel(),
        "weights": weights.numel(),
        "free_after_weights": st.free(),
    }
    watch = JitWatch()
    watch.install()
    if scenario == "B":
        d0 = st.free()
        _, m = M.measure(st.request, dev, method=a.method)
        d1 = st.free()
        out["prewarm"] = m.to_dict()
        out["prewarm_compiles"] = watch.count
        out["direct_retained"] = d0 - d1
        out["direct_transient"] = d0 - min([*st.probes, d1])
        out["headroom"] = M.jit_headroom(m)
        free = st.free()
        out["free_after_prewarm"] = free
        kv_plan = free - out["headroom"] - margin
    else:
        kv_plan = out["free_after_weights"] - margin
    out["kv_planned"] = kv_plan
    kv = torch.empty(max(0, kv_plan), dtype=torch.uint8, device=dev)
    torch.cuda.synchronize(dev)
    out["kv_allocated"] = kv.numel()
    out["free_after_kv"] = st.free()
    watch.arm(strict=scenario == "B")
    sampler = M.HighWaterSampler(dev, method="cudart")
    out["error"] = ""
    start = time.perf_counter()
    try:
        with sampler:
            st.request()
            torch.cuda.synchronize(dev)
    except LateCompileError as exc:
        out["error"] = f"LateCompileError: {exc}"
    except Exception as exc:  # the point of scenario A: what an unplanned first run does
        out["error"] = f"{type(exc).__name__}: {exc}"[:400]
    out["oom"] = _is_oom(out["error"])
    out["request_seconds"] = time.perf_counter() - start
    out["request_min_free"] = sampler.min_free
    out["late_compiles"] = watch.late_count
    out["late_kernels"] = [e.describe() for e in watch.late][:20]
    try:
        torch.cuda.synchronize(dev)
        out["free_after_request"] = st.free()
    except Exception as exc:
        out["free_after_request"] = -1
        out["error"] += f" | after: {exc}"[:200]
    watch.uninstall()
    return out


def run_child(scenario: str, cache: Path, extra: list[str]) -> dict:
    env = {
        **os.environ,
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "CUPY_CACHE_DIR": str(cache / "cupy"),
        "PYTHONPATH": str(ROOT),
    }
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, __file__, "--child", scenario, "--result", f.name, *extra]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"child {scenario} failed ({proc.returncode}):\n{proc.stderr}")
        return json.loads(Path(f.name).read_text())


def _card() -> dict:
    import torch

    info = {"torch": torch.__version__, "triton": getattr(triton, "__version__", "-")}
    q = "--query-gpu=name,driver_version,memory.total"
    smi = subprocess.run(["nvidia-smi", q, "--format=csv,noheader"], capture_output=True, text=True)
    info["nvidia_smi"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else "?"
    return info


def _table(runs: dict[str, dict]) -> str:
    def mib(v):
        return "-" if v is None else f"{v / MiB:,.0f}"

    def pre(r, k):
        return r.get("prewarm", {}).get(k)

    rows = [
        ("prewarm seconds", lambda r: "-" if "prewarm" not in r else f"{pre(r, 'seconds'):.2f}"),
        ("Triton compiles in prewarm", lambda r: r.get("prewarm_compiles", "-")),
        ("retained MiB (measured)", lambda r: mib(pre(r, "retained_bytes"))),
        ("retained MiB (direct)", lambda r: mib(r.get("direct_retained"))),
        ("transient peak MiB (measured)", lambda r: mib(pre(r, "transient_peak_bytes"))),
        ("transient peak MiB (direct)", lambda r: mib(r.get("direct_transient"))),
        ("jit_headroom MiB", lambda r: mib(r.get("headroom"))),
        ("torch reserved delta MiB", lambda r: mib(pre(r, "torch_reserved_delta"))),
        ("torch allocated delta MiB", lambda r: mib(pre(r, "torch_allocated_delta"))),
        ("sampler samples", lambda r: pre(r, "samples") or "-"),
        ("free after weights MiB", lambda r: mib(r["free_after_weights"])),
        ("KV planned MiB", lambda r: mib(r["kv_planned"])),
        ("KV allocated MiB", lambda r: mib(r["kv_allocated"])),
        ("request", lambda r: "OOM" if r["oom"] else (r["error"][:30] or "ok")),
        ("late Triton compiles", lambda r: r["late_compiles"]),
        ("min free during request MiB", lambda r: mib(r["request_min_free"])),
        ("free after request MiB", lambda r: mib(r["free_after_request"])),
        ("safety margin MiB", lambda r: mib(r["margin"])),
    ]
    names = list(runs)
    lines = ["| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for label, get in rows:
        lines.append(f"| {label} | " + " | ".join(str(get(runs[n])) for n in names) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child", choices=["A", "B"])
    p.add_argument("--result")
    p.add_argument("--margin-mib", type=int, default=512)
    p.add_argument("--weights-gib", type=float, default=85.0)
    p.add_argument("--scratch-mib", type=int, default=1024)
    p.add_argument("--method", choices=["cudart", "nvml"], default="cudart")
    p.add_argument("--nvml", action="store_true", help="also run B warm sampling NVML")
    p.add_argument("--json-out")
    a = p.parse_args()
    if a.child:
        Path(a.result).write_text(json.dumps(child(a.child, a)))
        return
    extra = [
        "--margin-mib",
        str(a.margin_mib),
        "--weights-gib",
        str(a.weights_gib),
        "--scratch-mib",
        str(a.scratch_mib),
    ]
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as cold_a, tempfile.TemporaryDirectory() as cold_b:
        runs["A cold"] = run_child("A", Path(cold_a), extra)
        runs["B cold"] = run_child("B", Path(cold_b), extra)
        runs["A warm"] = run_child("A", Path(cold_b), extra)
        runs["B warm"] = run_child("B", Path(cold_b), extra)
        if a.nvml:
            runs["B warm nvml"] = run_child("B", Path(cold_b), [*extra, "--method", "nvml"])
    card = _card()
    print(json.dumps(card))
    print(_table(runs))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"card": card, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
