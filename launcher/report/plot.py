"""Pictures of plans (``--plot FILE``, .svg or .png), drawn with matplotlib.

matplotlib is imported only when a picture is asked for, never on the dry-run path.
A plan is one stacked bar per rank: its components bottom to top, coloured by
component and hatched by where the number came from, the KV cache last. A sweep is KV
tokens against the first varied setting, one line per value of the others. A run is
each rank's plan beside what its worker measured.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher import atomic
from launcher.contract.names import ORDER, ComponentName, Source
from launcher.errors import EnvironmentProblem
from launcher.plan.planner import MemoryPlan

if TYPE_CHECKING:
    from launcher.contract.plan import PlanRecord, RankPlan
    from launcher.contract.record import RankRecord
    from launcher.report.sweep import Sweep

FORMATS = (".svg", ".png")
NEEDS_MATPLOTLIB = (
    "needs matplotlib: pip install '.[plot]' in the b12x-launch checkout (or pip install "
    "'matplotlib>=3.8')"
)
GiB = 2**30
COLOURS = {
    ComponentName.OTHER_PROCESSES: "#7f7f7f",
    ComponentName.CUDA_CONTEXT: "#9467bd",
    ComponentName.WEIGHTS: "#1f77b4",
    ComponentName.ACTIVATION_PEAK: "#ff7f0e",
    ComponentName.WORKSPACES: "#d62728",
    ComponentName.CUDAGRAPH_POOL: "#8c564b",
    ComponentName.TRANSIENTS: "#17becf",
    ComponentName.JIT_HEADROOM: "#e377c2",
    ComponentName.SAFETY_MARGIN: "#bcbd22",
    ComponentName.KV_CACHE: "#2ca02c",
}
HATCHES = {
    Source.MEASURED: "",
    Source.B12X: "++",
    Source.HEADERS: "--",
    Source.CATALOG: "||",
    Source.CONFIG_JSON: "||",
    Source.PROFILE: "..",
    Source.ESTIMATE: "//",
}
"""Where a figure came from, as a hatch (``qualified`` and any other: ``xx``)."""
KV = ComponentName.KV_CACHE


@dataclass(frozen=True)
class Segment:
    name: str
    bytes: int
    source: str


@dataclass(frozen=True)
class Bar:
    label: str
    total: int
    """The card's memory (drawn as a line)."""
    segments: tuple[Segment, ...]


def check_path(path: str) -> None:
    """Raises ValueError unless ``path`` names a picture format we write, in a folder that
    exists, and matplotlib is there to draw it (checked before any work, not imported)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError(f"{path}: {NEEDS_MATPLOTLIB}")
    if Path(path).suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: the file name must end in .svg or .png")
    folder = Path(path).parent
    if not folder.is_dir():
        raise ValueError(f"{path}: the folder {folder} does not exist; create it first")


def plan_bars(plan: MemoryPlan) -> list[Bar]:
    """One bar per rank: the plan's components in order, then the KV cache."""
    kv = plan.kv_source
    return [
        Bar(
            f"rank {r.rank}",
            r.total_bytes,
            (
                *(Segment(c.name, c.bytes, c.source) for c in r.components),
                Segment(KV, max(r.kv_bytes, 0), kv),
            ),
        )
        for r in plan.ranks
    ]


def _planned(r: RankPlan) -> tuple[Segment, ...]:
    """A rank's planned components, the KV cache last, as bar segments."""
    return tuple(
        Segment(n, max(c.bytes, 0), c.source)
        for n in (*ORDER, KV)
        if (c := r.components.get(n)) is not None
    )


def run_bars(plan: PlanRecord, records: list[RankRecord]) -> list[Bar]:
    """Per measured rank, its planned bar and its measured bar side by side.

    A component the worker did not measure (weights, margins) keeps the plan's figure and
    source; the measured bar's KV cache is the budget the worker handed vLLM.
    """
    bars = []
    for record in records:
        planned = plan.rank(record.rank)
        plan_segments = _planned(planned)
        got = []
        for s in plan_segments:
            if s.name == KV:
                got.append(Segment(s.name, record.budget.bytes, Source.MEASURED))
            elif s.name in record.measured:
                got.append(Segment(s.name, record.measured[s.name], Source.MEASURED))
            else:
                got.append(s)
        total = planned.total_bytes
        bars.append(Bar(f"rank {record.rank}\nplan", total, plan_segments))
        bars.append(Bar(f"rank {record.rank}\nmeasured", total, tuple(got)))
    return bars


def plot_plan(plan: MemoryPlan, path: str, fingerprint: str = "") -> Path:
    kv = plan.kv
    title = f"Memory plan: {plan.profile}" + (f" [{fingerprint}]" if fingerprint else "")
    subtitle = (
        f"KV {kv.tokens:,} tokens, {kv.max_concurrency:.2f} requests of "
        f"{kv.max_model_len:,} tokens (bounded by rank {kv.bounding_rank})"
        + ("" if plan.fits else "; DOES NOT FIT")
    )
    return _cards(plan_bars(plan), f"{title}\n{subtitle}", path)


def plot_run(plan: PlanRecord, records: list[RankRecord], name: str, path: str) -> Path:
    fingerprint = plan.fingerprint or "?"
    if not records:
        bars = [Bar(f"rank {r.rank}\nplan", r.total_bytes, _planned(r)) for r in plan.ranks]
        title = f"Run {name}: plan {fingerprint} (no measurement records)"
    else:
        bars = run_bars(plan, records)
        title = f"Run {name}: plan {fingerprint} vs measured"
    return _cards(bars, title, path)


def plot_sweep(sweep: Sweep, path: str) -> Path:
    """What changes with the first varied key, against it: the requests of ``max_model_len``
    that fit at once when that is the key (the KV tokens barely move with it), else the KV
    tokens; a line per value of the other keys, the y axis from 0."""
    figure = _figure_class()
    fig = figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.add_subplot()
    key = sweep.keys[0]
    xs_raw = list(dict.fromkeys(r.settings[0][1] for r in sweep.rows))
    numeric = all(_number(x) is not None for x in xs_raw)
    position = {x: (_number(x) if numeric else i) for i, x in enumerate(xs_raw)}
    lines: dict[str, list] = {}
    for row in sweep.rows:
        if row.plan is None:
            continue
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in row.settings[1:]) or "kv"
        lines.setdefault(label, []).append(row)
    for label, rows in lines.items():
        xs = [position[r.settings[0][1]] for r in rows]
        ys = [_sweep_y(key, r.plan) for r in rows if r.plan]
        # Categories (dtypes, backends) have no order: points only, no line between them.
        style = "-" if numeric else "none"
        (line,) = ax.plot(xs, ys, linestyle=style)
        ax.plot([], [], color=line.get_color(), linestyle=style, marker="o", label=label)
        for x, y, r in zip(xs, ys, rows, strict=True):
            fit = bool(r.plan and r.plan.fits)
            ax.plot(
                [x],
                [y],
                marker="o" if fit else "x",
                color=line.get_color(),
                fillstyle="full" if fit else "none",
                markersize=7,
            )
    ax.set_xticks([position[x] for x in xs_raw], xs_raw)
    what = SWEEP_Y.get(key, "KV cache tokens")
    ax.set_xlabel(key)
    ax.set_ylabel(what)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_thousands())
    ax.grid(alpha=0.3)
    ax.set_title(f"Sweep of {sweep.profile}: {what} (o fits, x does not fit)")
    if sweep.keys[1:]:
        ax.legend(fontsize=8)
    names = [what, key, *sweep.keys[1:]]
    return _save(fig, path, names)


SWEEP_Y = {"serving.max_model_len": "requests of max_model_len at once"}
"""A varied key whose effect the KV tokens do not show, and what does."""


def _sweep_y(key: str, plan: MemoryPlan) -> float:
    if key == "serving.max_model_len":
        return plan.kv.max_concurrency
    return plan.kv.tokens


def _cards(bars: list[Bar], title: str, path: str) -> Path:
    """The whole card on the left; everything but the weights, magnified, on the right."""
    figure = _figure_class()  # first: it says what to install when matplotlib is missing
    from matplotlib.patches import Patch

    width = max(8.0, 2.0 + 1.4 * len(bars))
    fig = figure(figsize=(width, 6.5), layout="constrained")
    whole, rest = fig.subplots(1, 2)
    names = _draw(whole, bars, exclude=())
    _draw(rest, bars, exclude=(ComponentName.WEIGHTS,))
    whole.set_title("whole card")
    rest.set_title("everything but the weights")
    for ax in (whole, rest):
        ax.set_ylabel("GiB")
        ax.grid(axis="y", alpha=0.3)
    sources = list(dict.fromkeys(s.source for b in bars for s in b.segments))
    handles = [Patch(facecolor=_colour(n), edgecolor="black", label=n) for n in names]
    handles += [
        Patch(facecolor="white", edgecolor="black", hatch=HATCHES.get(s, "xx"), label=s)
        for s in sources
    ]
    fig.legend(handles=handles, loc="outside right center", title="component / source")
    fig.suptitle(title)
    return _save(fig, path, [*names, *sources])


def _draw(ax, bars: list[Bar], exclude: tuple[str, ...]) -> list[str]:
    """Stack each bar's segments; returns the component names drawn, in order."""
    names: list[str] = []
    for x, bar in enumerate(bars):
        bottom = 0.0
        for seg in bar.segments:
            if seg.name in exclude:
                continue
            if seg.name not in names:
                names.append(seg.name)
            height = seg.bytes / GiB
            ax.bar(
                x,
                height,
                bottom=bottom,
                width=0.7,
                color=_colour(seg.name),
                edgecolor="black",
                linewidth=0.4,
                hatch=HATCHES.get(seg.source, "xx"),
            )
            bottom += height
        if not exclude:
            ax.hlines(bar.total / GiB, x - 0.4, x + 0.4, colors="black", linestyles="dashed")
        else:
            ax.text(x, bottom, f"{bottom:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(bars)), [b.label for b in bars], fontsize=8)
    return names


def _colour(name: str) -> str:
    return COLOURS.get(name, "#c7c7c7")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _thousands():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def _figure_class():
    try:
        import matplotlib
    except ImportError:
        raise EnvironmentProblem(f"--plot {NEEDS_MATPLOTLIB}") from None
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return Figure


def _save(fig, path: str, names: list[str]) -> Path:
    """Render to memory, then write atomically. SVG keeps its text as text (searchable);
    both formats carry the names drawn in their metadata."""
    import matplotlib

    fmt = Path(path).suffix.lower().lstrip(".")
    buf = io.BytesIO()
    description = "b12x-launch plot: " + ", ".join(names)
    metadata: dict[str, Any] = {"Description": description}
    if fmt == "svg":
        metadata["Date"] = None  # the same plan draws the same file
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "b12x-launch"}):
        fig.savefig(buf, format=fmt, metadata=metadata, dpi=120)
    try:
        return atomic.write_bytes(path, buf.getvalue())
    except OSError as exc:
        from launcher.errors import EnvironmentProblem

        raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from None
