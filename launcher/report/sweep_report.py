"""Render a sweep: one table row per combination for people, JSON for tools."""

from __future__ import annotations

import json
from typing import Any

import yaml

from launcher.profile.yamlsource import read_value
from launcher.report.render import fix_hint, kv_source, text_console
from launcher.report.sweep import Row, Sweep

SCHEMA_VERSION = 1


def _value(raw: str) -> Any:
    """The value as ``--set`` reads it (YAML), for the JSON."""
    try:
        return read_value(raw)
    except (yaml.YAMLError, ValueError, RecursionError):
        return raw


def why_not(row: Row) -> str:
    """Why a row does not fit or is invalid, and what would fit; empty when it fits."""
    if row.plan is None:
        return "; ".join(str(e) for e in row.errors)
    if row.plan.fits:
        return ""
    return "; ".join(row.plan.reasons) + ". " + fix_hint(row.plan)


def row_dict(row: Row) -> dict[str, Any]:
    out: dict[str, Any] = {
        "settings": {k: _value(v) for k, v in row.settings},
        "status": row.status,
        "fits": row.plan.fits if row.plan else False,
    }
    if row.plan is None:
        out["errors"] = [str(e) for e in row.errors]
        return out
    kv = row.plan.kv
    out.update(
        {
            "fingerprint": row.fingerprint,
            "kv_tokens": kv.tokens,
            "kv_source": kv_source(row.plan),
            "max_model_len": kv.max_model_len,
            "max_concurrency": round(kv.max_concurrency, 4),
            "bounding_rank": kv.bounding_rank,
            "longest_fitting_model_len": row.longest,
            "reasons": list(row.plan.reasons),
            "suggestions": list(row.plan.suggestions),
        }
    )
    return out


def to_json(sweep: Sweep) -> str:
    data = {
        "schema_version": SCHEMA_VERSION,
        "profile": sweep.profile,
        "varied": list(sweep.keys),
        "rows": [row_dict(r) for r in sweep.rows],
    }
    return json.dumps(data, indent=2) + "\n"


def _headers(keys: tuple[str, ...]) -> list[str]:
    """Each key's last part, or the whole key where two last parts clash."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return [s if last.count(s) == 1 else k for s, k in zip(last, keys, strict=True)]


def render_table(sweep: Sweep, color: bool = False) -> str:
    from io import StringIO

    from rich.table import Table

    buf = StringIO()
    console = text_console(buf, color)
    table = Table(
        title=f"Sweep: {sweep.profile} ({len(sweep.rows)} combinations)",
        title_justify="left",
    )
    for head in _headers(sweep.keys):
        table.add_column(head, justify="right")
    table.add_column("FITS")
    table.add_column("KV TOKENS", justify="right")
    table.add_column("SOURCE")
    table.add_column("CONCURRENCY", justify="right")
    table.add_column("BOUND", justify="right")
    table.add_column("LONGEST", justify="right")
    notes = []
    for row in sweep.rows:
        values = [v for _, v in row.settings]
        if row.status != "fits":
            notes.append(f"{' '.join(f'{k}={v}' for k, v in row.settings)}: {why_not(row)}")
        if row.plan is None:
            table.add_row(*values, "invalid", "-", "", "-", "-", "-", style="dim")
            continue
        kv = row.plan.kv
        table.add_row(
            *values,
            "yes" if row.plan.fits else "no",
            f"{kv.tokens:,}",
            kv_source(row.plan),
            f"{kv.max_concurrency:.2f}x",
            f"rank {kv.bounding_rank}",
            f"{row.longest:,}" if row.longest else "none",
            style=None if row.plan.fits else "red",
        )
    console.print(table)
    for note in notes:
        console.print(note, soft_wrap=True)
    console.print(
        "SOURCE: the weakest source the KV figure rests on (estimate until a run is measured); "
        "CONCURRENCY: requests of max_model_len tokens the KV cache holds at once; BOUND: the "
        "rank whose memory sets every rank's blocks; LONGEST: the largest max_model_len that "
        "fits, the rest as set."
    )
    return buf.getvalue()
