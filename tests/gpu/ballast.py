"""Optional ballast: another process holds (total - 95.01 GiB) so an H200 looks like an
RTX PRO 6000's 96 GB to everything after it (the shared-card path of the planner).

    with ballast(devices, keep=95.01 GiB): ...boot...

The child allocates with torch and sleeps until its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

RTX_PRO_6000 = int(95.01 * 1024**3)

_CHILD = r"""
import sys, torch
keep = int(sys.argv[1])
held = []
for d in range(torch.cuda.device_count()):
    free, total = torch.cuda.mem_get_info(d)
    held.append(torch.empty(max(0, total - keep), dtype=torch.uint8, device=f"cuda:{d}"))
    print(f"ballast cuda:{d} holds {held[-1].numel() / 2**30:.2f} GiB", flush=True)
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def ballast(devices: list[int], keep: int = RTX_PRO_6000) -> Iterator[list[str]]:
    """Hold all but ``keep`` bytes of each device in ``devices`` (NVML indices) meanwhile."""
    env_devices = ",".join(str(d) for d in devices)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(keep)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": env_devices},
    )
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "ready":
                break
        else:
            raise RuntimeError(f"ballast did not start: {lines}")
        yield lines
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
