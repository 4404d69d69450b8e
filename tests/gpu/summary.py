"""The GPU tier's summary: per boot and rank, planned against measured, for docs/benchmarks.md.

Boots add themselves as they finish; pytest's terminal summary prints the tables and
``write`` puts the same rows as JSON into ``$OUT`` (when set) and the tier's work dir.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import median
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
                    "forecast_lowest_free": _forecast(b, rank),
                    "safety_margin": b.margin if b.plan else None,
                    "free_after_warmup": rec.get("free_after_warmup"),
                    "activation": rec.get("activation"),
                    # None, shown "-": not measured (plain vLLM, or a counter that was off)
                    "late_compiles": _late_count(late := _late_windows(rec), "triton_hooks"),
                    "late_by_window": late,
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


def _late_windows(rec: dict) -> dict[str, dict[str, int | None]]:
    """Late compiles per counter and window after sizing; None where that counter did not
    watch that window; {} for a record without counters (it measured nothing)."""
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


def _late_count(windows: dict[str, dict[str, int | None]], counter: str) -> int | None:
    """The counter's late compiles over both windows, or None where it did not run."""
    seen = list(windows.get(counter, {None: None}).values())
    return None if any(n is None for n in seen) else sum(seen)  # type: ignore[arg-type]


def _forecast(b: BootResult, rank: int) -> int | None:
    """The lowest free memory forecast for ``rank`` (``row_verdict.forecast_of``; None: plain
    vLLM, or a boot from before the worker forecast)."""
    if b.spec.plain or not b.plan.get("ranks"):
        return None
    from tests.gpu.row_verdict import forecast_of

    return forecast_of(b, rank)[0]


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def render(data: list[dict[str, Any]]) -> str:
    head = (
        f"{'boot':<16}{'rk':>3}{'gpu':>4} {'prewarm':<8}{'budget':>8}{'blk plan':>10}"
        f"{'blk vLLM':>10}{'blk calib':>10}{'low free':>9}{'fcst':>6}{'margin':>7}{'late':>5}"
        f"{'mon':>5}{'file':>5}{'ready s':>8}  late kernels"
    )
    lines = [
        "GPU tier: KV blocks, low-water free memory (GiB, NVML) and its forecast (fcst), late "
        "compiles (watchdog; "
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
            f"{_gib(r.get('forecast_lowest_free')):>6}{_gib(r['safety_margin']):>7}"
            f"{_n(r['late_compiles']):>5}{r.get('monitor_late', 0):>5}"
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


# The evidence standard (docs/benchmarks.md, "How a figure is measured"): a timing bar is
# the medians of at least MIN_SAMPLES interleaved samples a side from one call, and a boot
# that hit a known upstream fault is counted apart, not averaged in.

MIN_SAMPLES = 3
"""Clean samples a side below which no timing bar is called met or missed."""
NOT_ENOUGH = "not enough samples"
LOAD_FAILURE = "Compiling model again due to a load failure"
"""vLLM's line when a warm boot cannot load its AOT graph and traces the model again."""
LOADED = "Directly load AOT compilation"
"""vLLM's line when a warm boot loads its AOT graph."""
SECTION = re.compile(r"^== (?:call \S+, |\S+/)?(\S+)$", re.M)
"""A boot's section in a logs file: ``== call X, BOOT`` or ``== DEVICE/BOOT``."""


@dataclass(frozen=True)
class Sample:
    boot: str
    side: str
    """``plain`` (vLLM alone) or ``launcher``."""
    seconds: float
    fault: str | None = None
    """The known upstream fault this boot hit (None: none seen, or no log to look in)."""
    checked: bool | None = None
    """Whether a log of this boot was read for faults (None: no known fault applies)."""


@dataclass(frozen=True)
class Side:
    samples: tuple[Sample, ...]

    @property
    def clean(self) -> tuple[float, ...]:
        return tuple(s.seconds for s in self.samples if s.fault is None)

    @property
    def faulted(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.fault is not None)

    def stats(self) -> str:
        c = self.clean
        head = f"n={len(c)}"
        if c:
            head += f" median {median(c):.1f} min {min(c):.1f} max {max(c):.1f} s"
        unchecked = sum(s.checked is False for s in self.samples)
        if unchecked:
            head += f"; {unchecked} not checked for faults (no log)"
        if self.faulted:
            apart = ", ".join(f"{s.boot} {s.seconds:.1f} s ({s.fault})" for s in self.faulted)
            head += f"; counted apart: {apart}"
        return head


@dataclass(frozen=True)
class Bar:
    """One timing bar over one call's boots: the launcher's median within a limit of plain's."""

    name: str
    plain: Side
    launcher: Side
    order: str
    """Run order of the samples, ``A`` plain and ``B`` the launcher (e.g. ``ABAB``)."""
    kind: str
    """``margin``: launcher <= plain + limit seconds; ``ratio``: launcher / plain <= limit."""
    limit: float

    def interleaved(self) -> bool:
        """ABAB or ABBA: every consecutive pair of samples holds one of each side."""
        pairs = [self.order[i : i + 2] for i in range(0, len(self.order), 2)]
        return all(sorted(p) == ["A", "B"] for p in pairs)

    def figure(self) -> str:
        """The launcher's median against plain's (any sample count: a figure, not a verdict)."""
        a, b = self.plain.clean, self.launcher.clean
        if not a or not b:
            return "none (no clean sample on a side)"
        if self.kind == "margin":
            return f"{median(b) - median(a):+.1f} s (medians)"
        return f"{median(b) / median(a):.2f}x (medians)"

    def verdict(self) -> str:
        a, b = self.plain.clean, self.launcher.clean
        if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
            return (
                f"{NOT_ENOUGH} ({len(a)} plain, {len(b)} launcher clean; "
                f"{MIN_SAMPLES} a side, interleaved, in one call or back-to-back calls on one "
                "machine)"
            )
        if not self.interleaved():
            return f"not interleaved ({self.order})"
        if self.kind == "margin":
            ok = median(b) <= median(a) + self.limit
            return f"{'met' if ok else 'missed'} (bar +{self.limit:g} s)"
        ok = median(b) / median(a) <= self.limit
        return f"{'met' if ok else 'missed'} (bar {self.limit:g}x)"

    def met(self) -> bool:
        return self.verdict().startswith("met")

    def render(self) -> str:
        return (
            f"{self.name}: order {self.order}\n"
            f"  plain vLLM: {self.plain.stats()}\n"
            f"  launcher:   {self.launcher.stats()}\n"
            f"  figure:     {self.figure()}\n"
            f"  verdict:    {self.verdict()}"
        )


def faults(log_text: str) -> dict[str, str | None]:
    """Per boot in a logs file (``== call X, BOOT`` sections), the known fault it hit.

    A boot that expected its AOT graph warm and traced the model again (vLLM's load failure,
    or no direct load at all) hit vLLM's warm-load fault.
    """
    out: dict[str, str | None] = {}
    marks = list(SECTION.finditer(log_text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(log_text)
        body = log_text[m.end() : end].split("\n== ", 1)[0]
        if LOAD_FAILURE in body:
            out[m.group(1)] = "vLLM load failure: traced again"
        elif LOADED not in body:
            out[m.group(1)] = "no direct AOT load: traced again"
        else:
            out[m.group(1)] = None
    return out


def _ready_rows(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per boot (rank 0), in run order."""
    return [r for r in data if r.get("rank", 0) == 0 and r.get("ready_seconds") is not None]


def bars(
    data: list[dict[str, Any]], logs: str | None = None, slack_s: float = 10.0, ratio: float = 1.2
) -> list[Bar]:
    """The timing bars a call's rows hold.

    ``B-plain-warm[-N]`` against ``B-fresh[-N]``: the fresh node's warm bar (+``slack_s``);
    ``B-plain[-N]`` against ``B[-N]``: the first boot against plain vLLM's (``ratio``).
    Warm samples are checked for vLLM's load fault when ``logs`` is given.
    """
    names = {r["boot"] for r in _ready_rows(data)}
    found: list[Bar] = []
    for stem in dict.fromkeys(_stem(r["boot"], names) for r in _ready_rows(data)):  # run order
        if stem.endswith("-plain-warm"):
            pair = (stem, stem[: -len("-plain-warm")] + "-fresh")
            bar = bar_between(data, *pair, kind="margin", limit=slack_s, logs=logs)
        elif stem.endswith("-plain"):
            bar = bar_between(data, stem, stem[: -len("-plain")], kind="ratio", limit=ratio)
        else:
            continue
        if bar is not None:
            found.append(bar)
    return found


def bar_between(
    data: list[dict[str, Any]],
    plain: str,
    launcher: str,
    kind: str = "ratio",
    limit: float = 1.2,
    logs: str | None = None,
) -> Bar | None:
    """The bar of the boots named ``plain[-N]`` against ``launcher[-N]``, in run order (None
    where either side has no boot). Samples are checked for vLLM's warm-load fault where
    ``logs`` is given and the bar is a warm one (``margin``)."""
    boots = _ready_rows(data)
    names = {r["boot"] for r in boots}
    warm = kind == "margin"
    seen = faults(logs) if logs is not None and warm else {}
    samples = []
    for r in boots:
        side = {plain: "plain", launcher: "launcher"}.get(_stem(r["boot"], names))
        if side is None:
            continue
        checked = (r["boot"] in seen) if warm else None
        fault = seen.get(r["boot"]) if checked else None
        samples.append(Sample(r["boot"], side, r["ready_seconds"], fault, checked))
    if not any(s.side == "plain" for s in samples) or not any(
        s.side == "launcher" for s in samples
    ):
        return None
    return Bar(
        name=f"{launcher} against {plain}",
        plain=Side(tuple(s for s in samples if s.side == "plain")),
        launcher=Side(tuple(s for s in samples if s.side == "launcher")),
        order="".join("A" if s.side == "plain" else "B" for s in samples),
        kind=kind,
        limit=limit,
    )


def report(runs: list[Path], logs: Path | None = None, together: bool = False) -> str:
    """The table and the timing bars of each call (one summary JSON a call), in order;
    ``together``: of the calls as one, which must have run back to back on one machine and
    one launcher tree (``machine_of`` each JSON's directory)."""
    text = logs.read_text() if logs else None
    out = []
    calls = [(run.name, json.loads(run.read_text())["boots"]) for run in runs]
    if together:
        machines = {machine_of(run.parent) for run in runs}
        if len(machines) != 1 or None in machines:
            raise ValueError(
                "--together needs each call's versions.txt beside its JSON, naming one machine "
                f"and one launcher tree; found {sorted(map(str, machines))}"
            )
        names = " + ".join(run.parent.name for run in runs)
        calls = [(f"{names} (one machine)", [r for _, data in calls for r in data])]
    for name, data in calls:
        out.append(f"# {name}" + (f" (faults from {logs.name})" if logs else ""))
        out.append(render(data).rstrip("\n"))
        found = bars(data, text)
        out.append("\nTiming bars (A plain vLLM, B the launcher, in run order)")
        out += [bar.render() for bar in found] or ["none in this call"]
        out.append("")
    return "\n".join(out)


MACHINE = ("machine boot ", "launcher tree ")
"""The lines of a call's versions.txt (``run-tier.sh``) that name its machine and code."""


def machine_of(run_dir: Path) -> tuple[str, ...] | None:
    """The machine (boot id, GPUs) and launcher tree a call's versions.txt names (None:
    no file, or not both lines)."""
    path = run_dir / "versions.txt"
    if not path.is_file():
        return None
    lines = path.read_text(errors="replace").splitlines()
    found = tuple(next((x for x in lines if x.startswith(p)), "") for p in MACHINE)
    return found if all(found) else None


def same_machine_rows(here: Path) -> list[dict[str, Any]]:
    """The rows of the calls before this one (``here``'s ``run-HHMMSS`` siblings, in run
    order) that ran on this machine and launcher tree: a bar whose samples outlast one call
    takes them from back-to-back calls on one held machine (a fresh machine has another boot
    id, so nothing of it is taken)."""
    mine = machine_of(here)
    if mine is None:
        return []
    out: list[dict[str, Any]] = []
    for call in sorted(here.parent.glob("run-*")):
        summary_json = call / "gpu-tier-summary.json"
        if call.name >= here.name or machine_of(call) != mine or not summary_json.is_file():
            continue
        out += json.loads(summary_json.read_text())["boots"]
    return out


def _stem(name: str, names: set[str]) -> str:
    """``B`` for ``B-N`` when the call also ran ``B`` (its next sample), else the name."""
    stem = re.sub(r"-\d+$", "", name)
    return stem if stem in names else name


def parser() -> argparse.ArgumentParser:
    """The command line of ``main``; ``tests/unit/test_gpu_summary.py`` reads each
    ``SUMMARY.txt`` command with it, so a new flag is read there too."""
    parser = argparse.ArgumentParser(prog="python -m tests.gpu.summary", description=main.__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="gpu-tier-summary.json files")
    parser.add_argument("--logs", type=Path, help="the calls' server.log lines (faults)")
    parser.add_argument(
        "--together", action="store_true", help="the calls as one (back to back, one machine)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.gpu.summary RUN.json... [--logs LOGS.txt] [--together]``: tables and
    bars."""
    args = parser().parse_args(argv)
    print(report(args.runs, args.logs, args.together), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
