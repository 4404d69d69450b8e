"""The GPU tier's summary: per boot and rank, planned against measured, for docs/benchmarks.md.

Boots add themselves as they finish; pytest's terminal summary prints the tables and
``write`` puts the same rows as JSON into ``$OUT`` (when set) and the tier's work dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.gpu.boot import BootResult

GiB = 1024**3
_boots: list[BootResult] = []
root: Path | None = None
"""The tier's work directory (set by the ``lab`` fixture)."""


def add(result: BootResult) -> None:
    """Keep a finished boot and rewrite the summary files (a killed run keeps what ran)."""
    _boots.append(result)
    if root is not None:
        write(root)


def booted() -> bool:
    return bool(_boots)


def result(name: str) -> BootResult | None:
    """The boot named ``name`` in this pytest session (None: not run)."""
    return next((b for b in _boots if b.spec.name == name), None)


def ready_seconds(name: str) -> float | None:
    """Time to ready of the boot named ``name`` in this pytest session (None: not run)."""
    found = result(name)
    return found.ready_seconds if found else None


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GiB:.2f}"


def rows() -> list[dict[str, Any]]:
    out = []
    for b in _boots:
        kv = b.plan.get("kv", {})
        calibrated = (b.calibrated or {}).get("kv", {})
        for rank, device in enumerate(b.devices):
            rec = b.records.get(rank, {})
            planned = b.plan.get("ranks", [{}] * (rank + 1))[rank].get("components", {})
            low = (b.outcome.low_free if b.outcome else {}).get(device)
            out.append(
                {
                    "boot": b.spec.name,
                    "profile": b.spec.profile,
                    "plain": b.spec.plain,
                    "ready_seconds": b.ready_seconds,
                    "plan_seconds": b.plan_seconds,
                    "monitor_late": len(b.monitor_late),
                    "rank": rank,
                    "gpu": device,
                    "prewarm": b.spec.prewarm,
                    "strict_jit": b.spec.strict_jit,
                    "ballast": b.ballast,
                    "components": {
                        name: {
                            "planned": c.get("bytes"),
                            "source": c.get("source"),
                            "measured": rec.get("measured", {}).get(name),
                        }
                        for name, c in planned.items()
                    },
                    "vllm_available": rec.get("vllm_available"),
                    "budget": rec.get("budget", {}).get("bytes"),
                    "page_bytes": kv.get("page_bytes_per_rank"),
                    "kv_blocks_planned": kv.get("blocks_per_rank"),
                    "kv_blocks_vllm": rec.get("kv", {}).get("blocks"),
                    "kv_blocks_calibrated": calibrated.get("blocks_per_rank"),
                    "low_water_free": low,
                    "safety_margin": b.margin if b.plan else None,
                    "free_after_warmup": rec.get("free_after_warmup"),
                    "activation": rec.get("activation"),
                    # None, shown "-": not measured (plain vLLM, or a counter that was off)
                    "late_compiles": _late_count(rec, "triton_hooks"),
                    "late_by_window": _late_windows(rec),
                    "late_files": len(b.late_files)
                    if rank == 0 and b.late_files is not None
                    else None,
                    "late_file_names": (b.late_files or [])[:20] if rank == 0 else [],
                    "seed": b.outcome.seed if b.outcome else None,
                    "late_kernels": sorted({_kernel(k) for k in rec.get("late_compiles", [])}),
                    "requests_ok": b.outcome.ok if b.outcome else None,
                    "requests_failed": len(b.outcome.failed) if b.outcome else None,
                }
            )
    return out


def _late_count(rec: dict, counter: str) -> int | None:
    """Late compiles (after sizing) the counter saw, or None where it did not run."""
    if not rec or not rec.get("counters"):
        return None
    from launcher.contract.record import RankRecord

    typed = RankRecord.model_validate(rec)
    seen = [typed.late_by(counter, w) for w in ("warmup", "serving")]  # type: ignore[arg-type]
    return None if any(s is None for s in seen) else sum(len(s) for s in seen)


def _late_windows(rec: dict) -> dict[str, dict[str, int | None]]:
    if not rec or not rec.get("counters"):
        return {}
    from launcher.contract.record import RankRecord

    typed = RankRecord.model_validate(rec)
    return {
        c: {
            w: (None if (n := typed.late_by(c, w)) is None else len(n))
            for w in ("warmup", "serving")
        }
        for c in ("triton_hooks", "cache_oracle", "b12x_report")
    }


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def render(data: list[dict[str, Any]]) -> str:
    head = (
        f"{'boot':<16}{'rk':>3}{'gpu':>4} {'prewarm':<8}{'budget':>8}{'blk plan':>10}"
        f"{'blk vLLM':>10}{'blk calib':>10}{'low free':>9}{'margin':>7}{'late':>5}"
        f"{'mon':>5}{'file':>5}{'ready s':>8}  late kernels"
    )
    lines = [
        "GPU tier: KV blocks, low-water free memory (GiB, NVML), late compiles (watchdog; "
        "mon: vLLM's JIT monitor; file: new files in the compile caches after ready), time to "
        "ready",
        head,
    ]
    for r in data:
        lines.append(
            f"{r['boot']:<16}{r['rank']:>3}{r['gpu']:>4} "
            f"{('plain' if r.get('plain') else 'on' if r['prewarm'] else 'off'):<8}"
            f"{_gib(r['budget']):>8}{r['kv_blocks_planned'] or '-':>10}"
            f"{r['kv_blocks_vllm'] or '-':>10}"
            f"{r['kv_blocks_calibrated'] or '-':>10}{_gib(r['low_water_free']):>9}"
            f"{_gib(r['safety_margin']):>7}{_n(r['late_compiles']):>5}{r.get('monitor_late', 0):>5}"
            f"{_n(r.get('late_files')):>5}{_ready(r.get('ready_seconds')):>8}  "
            f"{', '.join(r['late_kernels'] + r.get('late_file_names', [])[:3])}"
        )
    lines += ["", "Planned vs measured components (GiB; source of the plan's figure)"]
    for r in data:
        parts = [
            f"{name} {_gib(c['planned'])} ({c['source']})"
            + (f" -> {_gib(c['measured'])}" if c["measured"] is not None else "")
            for name, c in r["components"].items()
        ]
        lines.append(f"{r['boot']} rank {r['rank']}: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def write(root: Path) -> list[Path]:
    data = rows()
    blob = json.dumps({"boots": data}, indent=1)
    targets = [root / "gpu-tier-summary.json"]
    if os.environ.get("OUT"):
        targets.append(Path(os.environ["OUT"]) / "gpu-tier-summary.json")
    written = []
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(blob)
        (path.parent / "gpu-tier-summary.txt").write_text(render(data))
        written.append(path)
    return written


def _ready(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}"


def _kernel(entry: Any) -> str:
    """A census entry's kernel (records before the census held plain strings)."""
    if isinstance(entry, dict):
        return str(entry.get("kernel", "?")).rsplit(".", 1)[-1]
    return str(entry).split("[")[0]
