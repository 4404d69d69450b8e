"""The KV ceiling two ways: bisection over pinned KV sizes against one qualify boot (+ verify).

    python benchmarks/kv_ceiling.py PROFILE [--model PATH] [--tolerance 0.005]
        [--set KEY=VALUE ...] [--emulate-gib 95.01] [--force] [--max-boots 14]
        [--run-dir DIR] [--json-out kv_ceiling.json]

Both drive the same workload (the profile's ``qualify:`` section, by default its worst
case) through the real server on 127.0.0.1:

- Bisection (what users do by hand): boot with the KV cache pinned at N blocks, run the
  workload, stop; a boot survives when every request completes and the server is still
  up. The bounds are the planned size (lowered until it survives) and every byte the
  plan does not give to weights or the CUDA context; stop when the gap is below
  ``--tolerance`` of the lower bound. The ceiling is the largest size that survived.
- ``b12x-launch qualify --verify``: one boot at the planned size, the KV size that leaves
  the safety margin at the worst moment, and one verify boot at that size.

Prints a table (boots, wall time, blocks, tokens, ratio qualify / ceiling) and writes
the JSON. ``--emulate-gib`` holds a ballast allocation on every GPU (in its own process)
so each card shows that much memory, as the GPU tier emulates a 95.01 GiB RTX PRO 6000
on an H200; the launch sees the ballast as memory held by another process.
Needs GPUs, vLLM and nvidia-ml-py; never run by the test suites.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher import pipeline  # noqa: E402
from launcher.errors import LauncherError  # noqa: E402
from launcher.plan.planner import Qualified  # noqa: E402
from launcher.qualify.boot import boot  # noqa: E402
from launcher.qualify.command import qualify  # noqa: E402
from launcher.qualify.progress import Progress  # noqa: E402
from launcher.qualify.workload import worst_case  # noqa: E402

GiB = 1024**3
BALLAST = """
import sys, torch
dev = int(sys.argv[1]); keep = int(sys.argv[2])
free, total = torch.cuda.mem_get_info(dev)
x = torch.empty(max(0, total - keep), dtype=torch.uint8, device=f"cuda:{dev}")
print("ready", x.numel(), flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def ballast(gib: float | None, devices: int):
    """Hold ``total - gib`` on each of the first ``devices`` GPUs until the block ends."""
    if not gib:
        yield []
        return
    procs = []
    try:
        for dev in range(devices):
            p = subprocess.Popen(
                [sys.executable, "-c", BALLAST, str(dev), str(int(gib * GiB))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(p)
            line = p.stdout.readline().split()
            if not line or line[0] != "ready":
                raise RuntimeError(f"ballast on GPU {dev} failed")
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                p.stdin.close()
            p.terminate()
            p.wait(timeout=30)


def survives(planned, blocks: int, run_dir: Path, workload, progress, force: bool) -> dict:
    """One pinned boot: did the workload complete at ``blocks``?"""
    pinned = pipeline.pinned_at(planned, Qualified(blocks, "bisection"))
    start = time.monotonic()
    try:
        b = boot(pinned, run_dir, workload, progress, f"bisect {blocks:,} blocks", force=force)
    except LauncherError as exc:
        return {
            "blocks": blocks,
            "ok": False,
            "why": str(exc)[:300],
            "seconds": round(time.monotonic() - start, 1),
        }
    got = set(b.blocks.values())
    ok = b.survived() and got == {blocks}
    why = "" if ok else (b.result.failed[0].error[:300] if b.result.failed else f"blocks {got}")
    return {
        "blocks": blocks,
        "ok": ok,
        "why": why,
        "late_compiles": len(b.late),
        "seconds": round(time.monotonic() - start, 1),
    }


def bisect(loaded, tolerance: float, root: Path, force: bool, max_boots: int, progress) -> dict:
    planned = pipeline.make_plan(loaded, use_qualified=False)
    workload = worst_case(loaded.profile, planned.plan.kv.tokens)
    rank = planned.plan.ranks[planned.plan.kv.bounding_rank]
    page = planned.plan.kv.layout.page_bytes
    held = sum(
        c.bytes for c in rank.components if c.name in ("other_processes", "cuda_context", "weights")
    )
    high = (rank.total_bytes - held) // page + 1  # an upper bound that cannot survive
    low = planned.plan.kv.blocks_per_rank
    boots = []
    start = time.monotonic()

    def trial(blocks: int) -> bool:
        result = survives(
            planned, blocks, root / f"boot{len(boots):02d}", workload, progress, force
        )
        boots.append(result)
        progress.say(
            f"bisection boot {len(boots)}: {blocks:,} blocks "
            f"{'survived' if result['ok'] else 'failed: ' + result['why']}"
        )
        return result["ok"]

    while not trial(low):  # the planned size should survive; if not, halve until one does
        high, low = low, low // 2
        if low == 0 or len(boots) >= max_boots:
            return {"boots": boots, "ceiling_blocks": None, "seconds": time.monotonic() - start}
    while high - low > max(1, math.floor(tolerance * low)) and len(boots) < max_boots:
        mid = (low + high) // 2
        low, high = (mid, high) if trial(mid) else (low, mid)
    layout = planned.plan.kv.layout
    return {
        "boots": boots,
        "ceiling_blocks": low,
        "ceiling_tokens": layout.tokens_for_blocks(low),
        "ceiling_bytes": low * page,
        "first_failure_blocks": high,
        "planned_blocks": planned.plan.kv.blocks_per_rank,
        "seconds": round(time.monotonic() - start, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--model", help="checkpoint directory (sets model.path)")
    ap.add_argument(
        "--tolerance",
        type=float,
        default=0.005,
        help="stop bisecting when the gap is below this fraction (default 0.005)",
    )
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument(
        "--emulate-gib",
        type=float,
        default=None,
        help="ballast every GPU down to this many GiB (e.g. 95.01)",
    )
    ap.add_argument("--force", action="store_true", help="run on GPUs of another kind")
    ap.add_argument("--max-boots", type=int, default=14)
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--json-out", default="kv_ceiling.json")
    ap.add_argument("--skip-bisection", action="store_true")
    args = ap.parse_args()

    overrides = [*args.overrides, "serving.host=127.0.0.1"]
    if args.model:
        overrides.append(f"model.path={args.model}")
    loaded = pipeline.load(args.profile, tuple(overrides))
    root = Path(args.run_dir or f"runs/kv-ceiling-{time.strftime('%Y%m%d-%H%M%S')}")
    out: dict = {
        "profile": args.profile,
        "overrides": overrides,
        "tolerance": args.tolerance,
        "emulate_gib": args.emulate_gib,
        "workload": worst_case(
            loaded.profile, pipeline.make_plan(loaded, use_qualified=False).plan.kv.tokens
        ).to_dict(),
    }
    with ballast(args.emulate_gib, loaded.profile.hardware.count), Progress() as progress:
        start = time.monotonic()
        record = qualify(
            loaded, run_dir=str(root / "qualify"), verify=True, force=args.force, progress=progress
        )
        out["qualify"] = {
            "record": record,
            "boots": record["boots"],
            "seconds": round(time.monotonic() - start, 1),
        }
        if not args.skip_bisection:
            out["bisection"] = bisect(
                loaded, args.tolerance, root / "bisection", args.force, args.max_boots, progress
            )
    q = record["kv"]
    b = out.get("bisection", {})
    ceiling = b.get("ceiling_blocks")
    out["ratio"] = q["blocks"] / ceiling if ceiling else None
    verify = record.get("verify", {})
    rows = [
        ("method", "boots", "wall s", "KV blocks", "KV tokens", "late compiles"),
        (
            "qualify + verify",
            record["boots"],
            out["qualify"]["seconds"],
            q["blocks"],
            q["tokens"],
            len(record["late_compiles"]) + len(verify.get("late_compiles", [])),
        ),
    ]
    if b:
        rows.append(
            (
                "bisection",
                len(b["boots"]),
                b["seconds"],
                ceiling,
                b.get("ceiling_tokens"),
                sum(x.get("late_compiles", 0) for x in b["boots"]),
            )
        )
    for row in rows:
        print(f"{row[0]:<18}" + "".join(f"{c!s:>16}" for c in row[1:]))
    if out["ratio"] is not None:
        print(f"ratio qualify / ceiling: {out['ratio']:.4f}; verify passed: {verify.get('passed')}")
    Path(args.json_out).write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
