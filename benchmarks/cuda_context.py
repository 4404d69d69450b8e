"""What a rank holds before any weight: CUDA context, cuBLAS, NCCL (grounds estimates.py).

    python benchmarks/cuda_context.py [--ranks 2]

Each rank is a fresh process; device memory is read with NVML (used by this process's
card) around each step, so memory outside torch's allocator is counted.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def used_mib(index: int) -> float:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20


def rank_main(rank: int, world: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    steps = {"before": used_mib(rank)}
    torch.cuda.set_device(rank)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    steps["context"] = used_mib(rank)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
    torch.cuda.synchronize()
    steps["cublas"] = used_mib(rank)
    if world > 1:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device(rank))
        t = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        steps["nccl"] = used_mib(rank)
        dist.destroy_process_group()
    steps["torch_reserved"] = torch.cuda.memory_reserved() / 2**20
    out[rank] = steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=min(2, torch.cuda.device_count()))
    args = ap.parse_args()
    out = mp.Manager().dict()
    mp.spawn(rank_main, args=(args.ranks, out), nprocs=args.ranks, join=True)
    result = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "ranks": dict(out),
    }
    for rank, s in sorted(result["ranks"].items()):
        deltas = [f"{k} {s[k] - s['before']:.0f}" for k in ("context", "cublas", "nccl") if k in s]
        print(
            f"rank {rank}: MiB above the idle card: "
            + ", ".join(deltas)
            + f" (torch reserved {s['torch_reserved']:.0f})"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
