"""The serving hold on a real card (``launcher.runtime.worker.hold``), torch alone: the pool's
free blocks are drained first, so the hold adds new segments of the size asked even where a
cached block is larger; what serving allocates after it comes out of the pool and free device
memory does not move. Runs in the GPU tier (``test_hold.py``), and bare on a device machine
before the kit is staged, where pytest may be missing: ``python3 tests/gpu/hold_check.py``, and
so again under ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

MiB = 2**20
EXPANDABLE = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
"""``profiles/glm52.yaml`` runs torch's allocator so; the tier's profiles keep its default."""
SLACK = 20 * MiB if EXPANDABLE else 2 * MiB
"""Torch rounds a large request up to 2 MiB; an expandable segment maps the large pool's
pages 20 MiB at a time."""
CASES = {
    # what vLLM's warmup left cached (freed blocks), the hold, what serving then allocates
    "small cache": ((300 * MiB, 40 * MiB), 1024 * MiB, (600 * MiB, 300 * MiB, 100 * MiB)),
    # a free small-pool segment (a 512 KiB tensor's 2 MiB) is no large block to drain
    "a free small segment": ((512 << 10, 64 * MiB), 512 * MiB, (300 * MiB, 200 * MiB)),
    "cache larger than the hold": ((1536 * MiB,), 512 * MiB, (1400 * MiB, 500 * MiB)),
    "nothing cached": ((), 256 * MiB, (128 * MiB, 100 * MiB)),
}


def check(name: str, device: int = 0) -> list[str]:
    """The problems one case shows (empty: none)."""
    import torch

    from launcher.runtime.worker.hold import hold

    cached, size, serving = CASES[name]
    torch.cuda.set_device(device)
    torch.cuda.set_stream(torch.cuda.Stream(device))  # vLLM's: never the default stream
    torch.cuda.empty_cache()
    keep = torch.empty(8 * MiB, dtype=torch.uint8, device=device)  # a live neighbour
    freed = [torch.empty(b, dtype=torch.uint8, device=device) for b in cached]
    del freed
    torch.cuda.synchronize(device)
    free0, reserved0 = torch.cuda.mem_get_info(device)[0], torch.cuda.memory_reserved(device)
    held = hold(device, size)
    free1 = torch.cuda.mem_get_info(device)[0]
    problems = []
    if not size <= held <= size + SLACK:
        problems.append(f"{name}: held {held / MiB:.1f} MiB, asked {size / MiB:.0f} MiB")
    if abs((free0 - free1) - held) > SLACK:
        problems.append(f"{name}: free fell {(free0 - free1) / MiB:.1f} MiB for {held / MiB:.1f}")
    drawn = [torch.empty(b, dtype=torch.uint8, device=device) for b in serving]
    torch.cuda.synchronize(device)
    free2, reserved2 = torch.cuda.mem_get_info(device)[0], torch.cuda.memory_reserved(device)
    if reserved2 != reserved0 + held or abs(free2 - free1) > SLACK:
        problems.append(
            f"{name}: serving {sum(serving) / MiB:.0f} MiB grew torch's segments "
            f"{(reserved2 - reserved0 - held) / MiB:.1f} MiB past the hold"
        )
    del drawn, keep
    torch.cuda.empty_cache()
    return problems


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    found = [p for name in sorted(CASES) for p in check(name)]
    mode = "expandable segments" if EXPANDABLE else "torch's default segments"
    print("\n".join(found) or f"hold: {len(CASES)} cases, no problem ({mode})")
    sys.exit(1 if found else 0)
