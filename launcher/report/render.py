"""Render a plan: a table for people, JSON for tools (the contract in DESIGN.md).

The JSON is the contract's ``PlanRecord`` (``launcher.plan.record`` makes it); this module
only prints it, and draws the table beside it.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from launcher.contract.command import command_line, command_record
from launcher.contract.names import ComponentName, Source, calibrated
from launcher.plan.advice import fix_hint
from launcher.plan.planner import Component, MemoryPlan
from launcher.secrets import redact_env
from launcher.units import GiB, in_unit, table_unit

if TYPE_CHECKING:  # annotations only: rendering comes before the launch stage
    from launcher.launch.vllm_args import VllmCommand

__all__ = ["fix_hint", "kv_source", "render_table", "to_json"]


def to_json(plan: MemoryPlan, command: VllmCommand | None, fingerprint: str = "") -> str:
    """``--json``: the plan record, with the vLLM command (secrets masked)."""
    from launcher.plan.record import plan_record  # the record's models: --json's, not the table's

    vllm = command_record(command.argv, command.env) if command is not None else None
    record = plan_record(plan, fingerprint, vllm)
    return json.dumps(record.to_json(), indent=2) + "\n"


def kv_source(plan: MemoryPlan) -> Source:
    """The KV figure's source (``MemoryPlan.kv_source``)."""
    return plan.kv_source


def _kv_how(plan: MemoryPlan) -> str:
    if not plan.kv.pinned:
        return "what is left"
    if plan.kv.pinned == "qualified":
        return f"{plan.kv.pin_detail}: pinned by b12x-launch qualify (--no-calibration ignores it)"
    return f"pinned by memory.{plan.kv.pinned}"


def _part(comp: Component, j: int, fmt) -> str:
    """One sub-row cell; a rank whose component was measured whole has no parts."""
    return fmt(comp.parts[j].bytes) if j < len(comp.parts) else "-"


def _total_how(plan: MemoryPlan, command: VllmCommand | None) -> str:
    how = plan.total_detail
    argv = command.argv if command is not None else []
    if "--gpu-memory-utilization" in argv:
        value = argv[argv.index("--gpu-memory-utilization") + 1]
        how += (
            f"; vLLM is passed --gpu-memory-utilization {value} for its start-up check only "
            "(the planned worker sizes the KV cache from this plan)"
        )
    return how


def output_width() -> int:
    """The terminal's width when the output is one (``COLUMNS`` first), else 120 columns:
    files and pipes get the same text on every machine."""
    import os
    import shutil
    import sys

    if "COLUMNS" in os.environ or sys.stdout.isatty():
        return max(60, shutil.get_terminal_size((120, 24)).columns)
    return 120


def text_console(buf, color: bool):
    """A rich console writing plain data into ``buf`` at ``output_width()``. emoji=False: no
    ``:name:`` here is an emoji, and rich then skips loading its emoji table (a third of its
    import time on the dry run); markup=False: rich would drop a "[abc123]" it took for a tag."""
    from rich.console import Console

    return Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        width=output_width(),
        highlight=False,
        emoji=False,
        markup=False,
    )


def render_table(
    plan: MemoryPlan, command: VllmCommand | None, fingerprint: str = "", color: bool = False
) -> str:
    """The plan as text: per-rank components, the KV geometry, the command."""
    from io import StringIO

    from rich.table import Table

    buf = StringIO()
    console = text_console(buf, color)
    ranks = plan.ranks
    identical = all(
        [(c.name, c.bytes) for c in r.components]
        == [(c.name, c.bytes) for c in ranks[0].components]
        for r in ranks
    )
    shown = ranks[:1] if identical else ranks
    unit = table_unit(ranks[0].total_bytes)

    def fmt(n: int) -> str:
        return in_unit(n, unit)

    title = f"{plan.profile}  [{fingerprint}]" if fingerprint else plan.profile
    table = Table(title=f"Memory plan: {title}", title_justify="left")
    table.add_column("COMPONENT")
    for r in shown:
        head = (
            f"RANKS 0-{len(ranks) - 1} ({unit})"
            if identical and len(ranks) > 1
            else f"RANK {r.rank} ({unit})"
        )
        table.add_column(head, justify="right")
    table.add_column("SOURCE")
    table.add_column("HOW")
    table.add_row(
        "card total",
        *[fmt(r.total_bytes) for r in shown],
        plan.total_source,
        _total_how(plan, command),
    )
    for i, comp in enumerate(shown[0].components):
        cells = [fmt(r.components[i].bytes) for r in shown]
        table.add_row(comp.name, *cells, comp.source, comp.detail)
        for j, part in enumerate(comp.parts):
            sub = [_part(r.components[i], j, fmt) for r in shown]
            table.add_row(
                f"  {part.name}",
                *sub,
                part.source,
                part.detail,
                style="dim",
            )
    table.add_row(
        ComponentName.KV_CACHE,
        *[fmt(r.kv_bytes) for r in shown],
        plan.kv_source,
        _kv_how(plan),
        style="bold",
    )
    console.print(table)
    kv = plan.kv
    console.print(
        f"KV cache: {kv.bytes_per_token_per_rank:,.1f} B/token/rank ({kv.source}; {kv.record}), "
        f"block {kv.layout.block_tokens} x DCP {kv.layout.dcp} = {kv.layout.logical_block_tokens} "
        f"tokens, {kv.blocks_per_rank:,} blocks/rank -> {kv.tokens:,} tokens; "
        f"{kv.max_concurrency:.2f} requests of {kv.max_model_len:,} tokens "
        f"(bounded by rank {kv.bounding_rank})",
    )
    console.print(_lowest_free(plan))
    for line in rank_bars(plan, identical=identical, width=console.width):
        console.print(line, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}")
    for r in plan.ranks:
        for entry in r.learned:
            console.print(f"learned (rank {r.rank}): {entry.describe()}")
    if not plan.fits:
        for reason in plan.reasons:
            console.print(f"DOES NOT FIT: {reason}", style="bold red")
        console.print(fix_hint(plan))
    if command is not None:
        console.print("\nvLLM command:", style="bold")
        console.print(command_line(command.argv), soft_wrap=True)
        env = redact_env(command.env)
        if env:
            console.print("environment:", style="bold")
            for k, v in env.items():
                console.print(f"  {k}={shlex.quote(v)}", soft_wrap=True)
    return buf.getvalue()


def _lowest_free(plan: MemoryPlan) -> str:
    """The footer's predicted lowest free memory, per rank where the ranks differ, and what
    it rests on."""
    values = sorted({r.lowest_free for r in plan.ranks})
    shown = (
        f"{values[0] / GiB:.2f} GiB"
        if len(values) == 1
        else ", ".join(f"rank {r.rank} {r.lowest_free / GiB:.2f}" for r in plan.ranks) + " GiB"
    )
    basis = (
        "the card less every component at its peak and the KV blocks: the worker holds the "
        "activation and transient reserves from vLLM's warmup on, so the safety margin and "
        "the JIT headroom's prewarm part stay free"
    )
    ranks = [[(c.name, c.bytes, c.source) for c in r.components] for r in plan.ranks]
    measured = all(calibrated(figures) for figures in ranks)
    basis = f"{'measured' if measured else 'estimate'}: {basis}"
    dips = [r.serving_dip for r in plan.ranks if r.serving_dip is not None]
    if dips:
        basis += (
            f"; serving drew {max(dips) / GiB:.2f} GiB of those reserves on the boot this "
            "plan is calibrated from"
        )
    return f"Predicted lowest free after sizing: {shown} per rank ({basis})"


BAR_WIDTH = 60
BAR_CHARS = dict(zip(ComponentName, "ocWawgtjsK", strict=True))
"""One letter per component, in plan order."""


def bar_cells(sizes: list[int], width: int = BAR_WIDTH) -> list[int]:
    """Cells per part, summing to ``width``: proportional (largest remainder), and every
    non-zero part gets at least one cell so that it is seen (with more parts than cells,
    one each)."""
    total = sum(sizes)
    if total <= 0:
        return [0] * len(sizes)
    shown = sum(1 for n in sizes if n > 0)
    room = max(width - shown, 0)
    exact = [n * room / total for n in sizes]
    cells = [int(e) + (n > 0) for e, n in zip(exact, sizes, strict=True)]
    order = sorted(range(len(sizes)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order[: max(width - sum(cells), 0)]:
        cells[i] += 1
    return cells


def rank_bars(plan: MemoryPlan, identical: bool = False, width: int | None = None) -> list[str]:
    """One text bar per rank (one for all when the ranks are identical), and its legend
    (wrapped to ``width`` columns, if given)."""
    ranks = plan.ranks[:1] if identical else plan.ranks
    lines = []
    for r in ranks:
        kv = (ComponentName.KV_CACHE, max(r.kv_bytes, 0))
        parts = [(c.name, c.bytes) for c in r.components] + [kv]
        cells = bar_cells([n for _, n in parts])
        bar = "".join(
            BAR_CHARS.get(name, "?") * k for (name, _), k in zip(parts, cells, strict=True)
        )
        who = (
            f"ranks 0-{len(plan.ranks) - 1}"
            if identical and len(plan.ranks) > 1
            else f"rank {r.rank}"
        )
        lines.append(f"{who:>10} |{bar}|")
    used = {c.name for r in ranks for c in r.components if c.bytes > 0} | {ComponentName.KV_CACHE}
    legend = " ".join(f"{ch}={name}" for name, ch in BAR_CHARS.items() if name in used)
    if width is None:
        lines.append(f"{'':>10}  {legend}")
    else:
        import textwrap

        lines += textwrap.wrap(legend, width, initial_indent=" " * 12, subsequent_indent=" " * 12)
    return lines
