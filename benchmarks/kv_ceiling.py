"""The KV ceiling two ways: bisection over pinned KV sizes against one qualify boot (+ verify).

    python benchmarks/kv_ceiling.py PROFILE [--model PATH] [--tolerance 0.005]
        [--set KEY=VALUE ...] [--emulate-gib 95.01] [--force] [--max-boots 14]
        [--run-dir DIR] [--json-out kv_ceiling.json] [--bisect-margin 0]

Both drive the same workload (the profile's ``qualify:`` section, by default its worst
case) through the real server on 127.0.0.1:

- Bisection (what users do by hand): boot with the KV cache pinned at N blocks, run the
  workload, stop; a boot survives when every request completes and the server is still
  up. Its boots plan with ``--bisect-margin`` (default 0) as the safety margin, so the
  worker refuses no pin that can still be allocated and the search finds the physical
  ceiling, not the worker's own refusal. The bounds are the planned size (lowered until
  it survives) and every byte the plan does not give to weights or the CUDA context; stop
  when the gap is below ``--tolerance`` of the lower bound. The ceiling is the largest
  size that survived.
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
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from launcher import pipeline  # noqa: E402
from launcher.atomic import write_json  # noqa: E402
from launcher.errors import LauncherError  # noqa: E402
from launcher.launch.start import read_cards  # noqa: E402
from launcher.pipeline import on_cards  # noqa: E402
from launcher.plan.planner import Qualified  # noqa: E402
from launcher.qualify.boot import boot  # noqa: E402
from launcher.qualify.command import qualify  # noqa: E402
from launcher.qualify.progress import Progress  # noqa: E402
from launcher.qualify.workload import worst_case  # noqa: E402

GiB = 1024**3


@contextlib.contextmanager
def emulated(gib: float | None, devices: int):
    """Hold all but ``gib`` GiB of each of the first ``devices`` GPUs meanwhile (the GPU
    tier's ballast: another process, which the launch sees as memory held by others)."""
    if not gib:
        yield []
        return
    from tests.gpu.ballast import ballast

    with ballast(list(range(devices)), keep=int(gib * GiB)) as lines:
        yield lines


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


@dataclass
class Search:
    """Where a bisection stopped: ``ceiling`` survived (None: nothing did); ``failure`` is the
    smallest size seen to fail above it (None: none was seen)."""

    ceiling: int | None
    failure: int | None
    trials: list[tuple[int, bool]] = field(default_factory=list)


def search(
    low: int,
    high: int,
    tolerance: float,
    max_boots: int,
    trial: Callable[[int], bool],
    *,
    seen: Sequence[tuple[int, bool]] = (),
) -> Search:
    """Bisect for the largest size ``trial`` accepts: ``low`` should pass (halved until one
    does), ``high`` is an upper bound from arithmetic, not yet tried; stop once the gap is
    within ``tolerance`` of the survivor or ``max_boots`` trials were made. The arithmetic
    bound is tried last when no failure was seen, so a ceiling never rests on it. ``seen``:
    trials of an earlier run (counted); its largest survivor and the smallest failure above
    it replace ``low`` and ``high``."""
    trials: list[tuple[int, bool]] = list(seen)

    def attempt(size: int) -> bool:
        ok = trial(size)
        trials.append((size, ok))
        return ok

    survived = [size for size, ok in seen if ok]
    failure = None
    if survived:
        low = max(survived)
        above = [size for size, ok in seen if not ok and size > low]
        failure = min(above) if above else None
        high = failure or max(high, low)
    else:
        while not attempt(low):
            failure, low = low, low // 2
            if low == 0 or len(trials) >= max_boots:
                return Search(None, failure, trials)
        if failure is not None:
            high = failure
    while high - low > max(1, math.floor(tolerance * low)) and len(trials) < max_boots:
        mid = (low + high) // 2
        if attempt(mid):
            low = mid
        else:
            high = failure = mid
    if failure is None and len(trials) < max_boots:
        if attempt(high):
            low = high
        else:
            failure = high
    return Search(low, failure, trials)


def bisect(
    loaded,
    workload,
    tolerance: float,
    root: Path,
    force: bool,
    max_boots: int,
    progress,
    on_boot: Callable[[dict], object] = lambda partial: None,
    previous: Sequence[dict] = (),
) -> dict:
    # Against what the cards have free now (the ballast in place), as the launch plans.
    planned = pipeline.make_plan(loaded, use_qualified=False)
    if loaded.profile.hardware.gpu != "cpu":
        planned = on_cards(planned, read_cards(planned, force=force))
    rank = planned.plan.ranks[planned.plan.kv.bounding_rank]
    page = planned.plan.kv.layout.page_bytes
    held = sum(
        c.bytes for c in rank.components if c.name in ("other_processes", "cuda_context", "weights")
    )
    high = (rank.total_bytes - held) // page  # room for nothing but KV: cannot survive
    boots: list[dict] = [dict(b, earlier_run=True) for b in previous]
    start = time.monotonic()

    def trial(blocks: int) -> bool:
        result = survives(
            planned, blocks, root / f"boot{len(boots):02d}", workload, progress, force
        )
        boots.append(result)
        on_boot({"boots": boots, "ceiling_blocks": None, "ceiling_tokens": None, "seconds": 0})
        progress.say(
            f"bisection boot {len(boots)}: {blocks:,} blocks "
            f"{'survived' if result['ok'] else 'failed: ' + result['why']}"
        )
        return result["ok"]

    seen = [(b["blocks"], b["ok"]) for b in previous]
    found = search(planned.plan.kv.blocks_per_rank, high, tolerance, max_boots, trial, seen=seen)
    layout = planned.plan.kv.layout
    ceiling = found.ceiling
    return {
        "boots": boots,
        "ceiling_blocks": ceiling,
        "ceiling_tokens": layout.tokens_for_blocks(ceiling) if ceiling else None,
        "ceiling_bytes": ceiling * page if ceiling else None,
        "first_failure_blocks": found.failure,
        "arithmetic_bound_blocks": high,
        "planned_blocks": planned.plan.kv.blocks_per_rank,
        "seconds": round(time.monotonic() - start, 1),
    }


def table(out: dict) -> list[str]:
    """The summary lines of whatever ``out`` holds so far."""
    rows = [("method", "boots", "wall s", "KV blocks", "KV tokens", "late compiles")]
    record = out.get("qualify", {}).get("record")
    if record:
        verify = record.get("verify", {})
        late = len(record["late_compiles"]) + len(verify.get("late_compiles", []))
        kv = record["kv"]
        rows.append(
            ("qualify + verify", record["boots"], out["qualify"]["seconds"], kv["blocks"],
             kv["tokens"], late)
        )  # fmt: skip
    b = out.get("bisection")
    if b:
        late = sum(x.get("late_compiles", 0) for x in b["boots"])
        rows.append(
            ("bisection", len(b["boots"]), b["seconds"], b["ceiling_blocks"],
             b["ceiling_tokens"], late)
        )  # fmt: skip
    lines = [f"{r[0]:<18}" + "".join(f"{c!s:>16}" for c in r[1:]) for r in rows]
    if record and b and b.get("ceiling_blocks"):
        ratio = record["kv"]["blocks"] / b["ceiling_blocks"]
        seen = b.get("first_failure_blocks")
        lines.append(
            f"ratio qualify / ceiling: {ratio:.4f}; verify passed: "
            f"{record.get('verify', {}).get('passed')}; smallest failing boot: {seen}"
        )
    return lines


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
    ap.add_argument(
        "--json-out",
        default="kv_ceiling.json",
        help="results, rewritten after every boot; an existing file's other method is kept",
    )
    ap.add_argument(
        "--only",
        choices=("qualify", "bisection"),
        help="run one method (e.g. in two device calls, each under its time limit)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue the bisection in --json-out: its boots count, its bounds stand",
    )
    ap.add_argument(
        "--bisect-margin",
        default="0",
        help="memory.safety_margin of the bisection's boots (default 0: the physical ceiling)",
    )
    args = ap.parse_args()

    overrides = [*args.overrides, "serving.host=127.0.0.1"]
    if args.model:
        overrides.append(f"model.path={args.model}")
    loaded = pipeline.load(args.profile, tuple(overrides))
    root = Path(args.run_dir or f"runs/kv-ceiling-{time.strftime('%Y%m%d-%H%M%S')}")
    # One workload for both methods: the qualify boot's (its planned KV size, estimates).
    workload = worst_case(
        loaded.profile,
        pipeline.make_plan(loaded, use_qualified=False, calibrate=False).plan.kv.tokens,
    )
    loaded_bisect = pipeline.load(
        args.profile, (*overrides, f"memory.safety_margin={args.bisect_margin}")
    )
    json_out = Path(args.json_out)
    out: dict = json.loads(json_out.read_text()) if json_out.is_file() else {}
    out.update(
        profile=args.profile,
        overrides=overrides,
        tolerance=args.tolerance,
        emulate_gib=args.emulate_gib,
        bisect_margin=args.bisect_margin,
        workload=workload.to_dict(),
    )

    def save() -> None:
        write_json(json_out, out)  # atomic: a run stopped at its deadline keeps the last boot

    with (
        emulated(args.emulate_gib, loaded.profile.hardware.count) as ballast_lines,
        Progress() as progress,
    ):
        out["ballast"] = ballast_lines
        if args.only != "bisection":
            start = time.monotonic()
            record = qualify(
                loaded,
                run_dir=str(root / "qualify"),
                verify=True,
                force=args.force,
                progress=progress,
            ).to_json()  # the qualified record's JSON, as qualified.json holds it
            out["qualify"] = {
                "record": record,
                "boots": record["boots"],
                "seconds": round(time.monotonic() - start, 1),
            }
            save()
        if args.only != "qualify":
            out["bisection"] = bisect(
                loaded_bisect,
                workload,
                args.tolerance,
                root / "bisection",
                args.force,
                args.max_boots,
                progress,
                lambda partial: (out.__setitem__("bisection", partial), save()),
                previous=out.get("bisection", {}).get("boots", []) if args.resume else (),
            )
            save()
    print("\n".join(table(out)))
    print(f"wrote {json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
