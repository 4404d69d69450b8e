"""Render a plan: a table for people, JSON for tools (the contract in DESIGN.md)."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from launcher.plan import census
from launcher.plan.planner import Component, MemoryPlan
from launcher.secrets import is_secret, redact_argv, redact_env
from launcher.units import format_size, in_unit, table_unit

if TYPE_CHECKING:  # annotations only: rendering comes before the launch stage
    from launcher.launch.vllm_args import VllmCommand

SCHEMA_VERSION = 1


def _component_json(c: Component) -> dict[str, Any]:
    out: dict[str, Any] = {"bytes": c.bytes, "source": c.source}
    if c.detail:
        out["detail"] = c.detail
    if c.parts:
        out["parts"] = {p.name: _component_json(p) for p in c.parts}
    return out


def to_dict(plan: MemoryPlan, command: VllmCommand | None, fingerprint: str = "") -> dict[str, Any]:
    kv = plan.kv
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "profile": plan.profile,
        "fingerprint": fingerprint,
        "fits": plan.fits,
        "reasons": list(plan.reasons),
        "suggestions": list(plan.suggestions),
        "notes": list(plan.notes),
        "ranks": [
            {
                "rank": r.rank,
                "node": r.node,
                "total_bytes": r.total_bytes,
                "total_source": plan.total_source,
                "components": {
                    **{c.name: _component_json(c) for c in r.components},
                    "kv_cache": {"bytes": r.kv_bytes, "source": kv_source(plan)},
                },
                "kv_blocks_fit": r.kv_blocks,
                "learned": list(r.learned),
            }
            for r in plan.ranks
        ],
        "kv": {
            "bytes_per_token_per_rank": kv.bytes_per_token_per_rank,
            "page_bytes_per_rank": kv.layout.page_bytes,
            "block_tokens": kv.layout.block_tokens,
            "dcp": kv.layout.dcp,
            "blocks_per_rank": kv.blocks_per_rank,
            "tokens": kv.tokens,
            "max_model_len": kv.max_model_len,
            "max_concurrency": round(kv.max_concurrency, 4),
            "bounding_rank": kv.bounding_rank,
            "pinned": kv.pinned,
            "source": kv.source,
            "runtime": kv.runtime,
            "record": kv.record,
        },
    }
    if command is not None:
        out["vllm"] = {"argv": redact_argv(command.argv), "env": redact_env(command.env)}
    return out


def to_json(plan: MemoryPlan, command: VllmCommand | None, fingerprint: str = "") -> str:
    return json.dumps(to_dict(plan, command, fingerprint), indent=2) + "\n"


def fix_hint(plan: MemoryPlan) -> str:
    """What to change so the plan fits: the setting that caused it first, when the profile
    asked for more than the cards have (a pinned KV size, a safety margin)."""
    pinned = plan.kv.pinned
    if pinned in ("kv_tokens", "kv_cache_bytes") and any(
        f"memory.{pinned}" in r for r in plan.reasons
    ):
        blocks = min(r.kv_blocks for r in plan.ranks)
        if blocks <= 0:
            return f"Nothing is left for the KV cache: remove memory.{pinned}"
        if pinned == "kv_tokens":
            most = f"{plan.kv.layout.tokens_for_blocks(blocks)} tokens"
        else:
            most = format_size(min(r.kv_bytes for r in plan.ranks))
        return f"Lower memory.{pinned} to at most {most} (what fits), or remove it"
    for r in plan.ranks:
        fixed = sum(c.bytes for c in r.components)
        margin = sum(c.bytes for c in r.components if c.name == "safety_margin")
        if (
            fixed > r.total_bytes
            and margin >= fixed - r.total_bytes
            and margin > r.total_bytes // 8
        ):
            return (
                f"memory.safety_margin ({format_size(margin)}) alone is more than the card can "
                f"spare ({format_size(r.total_bytes)} per GPU): lower it (default 512MiB)"
            )
    if plan.suggestions:
        return "Would fit with: " + " ".join(f"--set {s}" for s in plan.suggestions)
    return (
        "Nothing smaller in serving.max_model_len or serving.max_num_seqs fits: lower the "
        "weights (model.bits_per_weight), add GPUs, or use a smaller kv_cache_dtype"
    )


def kv_source(plan: MemoryPlan) -> str:
    """The KV figure is as good as the weakest number it was derived from."""
    if plan.kv.pinned:
        return plan.kv.pin_source
    sources = {c.source for r in plan.ranks for c in r.components}
    return "estimate" if "estimate" in sources else "measured"


def _kv_how(plan: MemoryPlan) -> str:
    if not plan.kv.pinned:
        return "what is left"
    if plan.kv.pinned == "qualified":
        return "pinned by b12x-launch qualify (--no-calibration ignores it)"
    return f"pinned by memory.{plan.kv.pinned}"


def command_line(command: VllmCommand) -> str:
    return shlex.join(redact_argv(command.argv))


def shell_line(command: VllmCommand) -> str:
    """What runs, as one line ``sh`` reads: ``env K=V ... vllm serve ...``.

    The environment is part of the command: without the launcher's ``BLAUNCH_*`` variables
    the planned worker cannot find its plan. A secret variable is not in the line at all (not
    even as ``NAME="$NAME"``: the shell would expand it into ``env``'s argv, which a process
    list shows): vLLM inherits it from the shell that runs the line (``secret_names``).
    """
    parts = ["env"]
    for key, value in command.env.items():
        if not is_secret(key):
            parts.append(shlex.quote(f"{key}={value}"))
    return " ".join([*parts, command_line(command)])


def secret_names(command: VllmCommand) -> list[str]:
    """The secret variables ``shell_line`` leaves out (the shell that runs it must export them)."""
    return [k for k, v in command.env.items() if is_secret(k) and v]


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
        "kv_cache",
        *[fmt(r.kv_bytes) for r in shown],
        kv_source(plan),
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
    for line in rank_bars(plan, identical=identical, width=console.width):
        console.print(line, soft_wrap=True)
    for note in plan.notes:
        console.print(f"note: {note}")
    for r in plan.ranks:
        for entry in r.learned:
            console.print(f"learned (rank {r.rank}): {census.describe(entry)}")
    if not plan.fits:
        for reason in plan.reasons:
            console.print(f"DOES NOT FIT: {reason}", style="bold red")
        console.print(fix_hint(plan))
    if command is not None:
        console.print("\nvLLM command:", style="bold")
        console.print(command_line(command), soft_wrap=True)
        env = redact_env(command.env)
        if env:
            console.print("environment:", style="bold")
            for k, v in env.items():
                console.print(f"  {k}={shlex.quote(v)}", soft_wrap=True)
    return buf.getvalue()


BAR_WIDTH = 60
BAR_CHARS = {
    "other_processes": "o",
    "cuda_context": "c",
    "weights": "W",
    "activation_peak": "a",
    "workspaces": "w",
    "cudagraph_pool": "g",
    "jit_headroom": "j",
    "safety_margin": "s",
    "kv_cache": "K",
}


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
        parts = [(c.name, c.bytes) for c in r.components] + [("kv_cache", max(r.kv_bytes, 0))]
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
    used = {c.name for r in ranks for c in r.components if c.bytes > 0} | {"kv_cache"}
    legend = " ".join(f"{ch}={name}" for name, ch in BAR_CHARS.items() if name in used)
    if width is None:
        lines.append(f"{'':>10}  {legend}")
    else:
        import textwrap

        lines += textwrap.wrap(legend, width, initial_indent=" " * 12, subsequent_indent=" " * 12)
    return lines
