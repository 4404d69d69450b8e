"""The dry run against the field: published vLLM figures replayed through the planner.

Each row of tests/field/corpus.yaml sets profiles/glm52.yaml as a deployment was set, and
compares the plan's figure with the one vLLM logged. ``gate`` rows fail beyond 1% for
weights and beyond one block for the KV cache given the same budget. The table in
docs/benchmarks.md ("Dry run vs the field") is this corpus; regenerate it with
    python -m tests.unit.test_field
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest
import yaml

from launcher import pipeline
from launcher.plan.catalog import architecture_config, checkpoint, checkpoint_ids
from launcher.plan.exl3_layout import from_spec
from launcher.plan.model import from_config
from launcher.plan.ranks import rank_shapes
from launcher.plan.weights import Recipe, estimate_rank_weights
from launcher.units import parse_size
from tests.conftest import PROFILES, ROOT

CORPUS = ROOT / "tests" / "field" / "corpus.yaml"
DOCS = ROOT / "docs" / "benchmarks.md"
ROWS = yaml.safe_load(CORPUS.read_text())
GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Replay:
    row: dict
    plan: float
    logged: float
    unit: str

    @property
    def error(self) -> float:
        return (self.plan - self.logged) / self.logged


def replay(row: dict) -> Replay:
    loaded = pipeline.load(str(PROFILES / "glm52.yaml"), tuple(row["set"]))
    planned = pipeline.make_plan(loaded, calibrate=False)
    rank = planned.plan.ranks[0]
    metric = row["metric"]
    if metric == "kv_blocks":
        return Replay(row, planned.plan.kv.blocks_per_rank, row["logged"], "blocks")
    logged = parse_size(row["logged"])
    if metric == "weights":
        return Replay(row, rank.component("weights").bytes, logged, "GiB")
    if metric == "cudagraph":
        return Replay(row, rank.component("cudagraph_pool").bytes, logged, "GiB")
    if metric == "idle_free":
        resident = ("other_processes", "cuda_context", "weights", "workspaces", "cudagraph_pool")
        held = sum(c.bytes for c in rank.components if c.name in resident) + rank.kv_bytes
        return Replay(row, rank.total_bytes - held, logged, "MiB")
    if metric == "prefill_transient":
        transient = ("activation_peak", "jit_headroom")  # workspaces count as resident
        return Replay(row, sum(rank.component(n).bytes for n in transient), logged, "MiB")
    if metric == "first_use":
        after = ("activation_peak", "workspaces", "jit_headroom")
        return Replay(row, sum(rank.component(n).bytes for n in after), logged, "GiB")
    raise ValueError(f"unknown metric {metric!r}")


@pytest.mark.parametrize("row", [r for r in ROWS if r["check"] == "gate"], ids=lambda r: r["name"])
def test_gated_rows_match_the_field(row):
    r = replay(row)
    if row["metric"] == "kv_blocks":
        assert abs(r.plan - r.logged) <= 1, f"{r.plan} blocks, vLLM {r.logged}"
        assert r.plan * 64 * 4 == row["tokens"]  # logical tokens: blocks x block x DCP
    else:
        assert abs(r.error) <= 0.01, f"plan {r.plan / GiB:.2f} GiB, vLLM {r.logged / GiB:.2f}"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_every_row_is_well_formed(row):
    assert row["check"] in ("gate", "reference")
    assert row["check"] == "gate" or row.get("why"), "a reference row says why it is not gated"
    replay(row)


def test_the_pinned_kv_geometry_is_the_runtime_record():
    """2,032 blocks in 4,518,907,904 B: a 2,223,872 B page per rank, which is 79 attention
    layers (78 + the MTP draft) x 368 B x 64 plus 43 indexer layer-blocks x 132 B x 64 (21
    indexer layers stored twice at 2 shards of DCP4, the draft's indexer once)."""
    assert 4_518_907_904 % 2032 == 0
    page = 4_518_907_904 // 2032
    assert page == 79 * 368 * 64 + (21 * 2 + 1) * 132 * 64
    row = next(r for r in ROWS if r["metric"] == "kv_blocks")
    loaded = pipeline.load(str(PROFILES / "glm52.yaml"), tuple(row["set"]))
    assert pipeline.make_plan(loaded, calibrate=False).plan.kv.layout.page_bytes == page


@pytest.mark.parametrize("repo", checkpoint_ids())
def test_catalog_layouts_match_the_published_disk_size(repo):
    """Whole checkpoint (experts from the layout, the rest BF16) within 1% of its disk size."""
    entry = checkpoint(repo)
    f = from_config(architecture_config(entry["architecture"]), repo, "catalog")
    layers = [i for i in range(f.num_layers + f.mtp_layers) if f.is_moe_layer(i)]
    layout = from_spec(entry, layers=layers, experts=f.experts, source="catalog")
    (whole,) = rank_shapes(f.num_layers, 1, 1, 1)
    size = estimate_rank_weights(
        f, whole, ep=False, recipe=Recipe("exl3", None), with_mtp=True, layout=layout
    )
    disk = parse_size(entry["disk"])
    assert abs(size - disk) / disk < 0.01, f"{size / GiB:.1f} GiB vs {disk / GiB:.1f} GiB"


def _fmt(r: Replay, value: float) -> str:
    if r.unit == "blocks":
        return f"{int(value):,} blocks ({int(value) * 256:,} tokens)"
    scale = GiB if r.unit == "GiB" else MiB
    return f"{value / scale:,.2f} {r.unit}" if r.unit == "GiB" else f"{value / scale:,.0f} MiB"


def table() -> str:
    """The corpus as the markdown table docs/benchmarks.md carries."""
    lines = [
        "| deployment | settings (on profiles/glm52.yaml) | vLLM logged | dry run | "
        "difference | check |",
        "|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        r = replay(row)
        blocks = r.unit == "blocks"
        diff = f"{int(r.plan - r.logged):+d} blocks" if blocks else f"{r.error:+.2%}"
        check = "gate" if row["check"] == "gate" else f"reference: {row['why']}"
        settings = "<br>".join(f"`{s}`" for s in row["set"])
        lines.append(
            f"| {row['name']} ({row['metric']}) | {settings} | {_fmt(r, r.logged)} | "
            f"{_fmt(r, r.plan)} | {diff} | {check} |"
        )
    return "\n".join(lines) + "\n"


def test_docs_carry_the_corpus_table():
    assert table() in DOCS.read_text(), "regenerate it: python -m tests.unit.test_field"


if __name__ == "__main__":
    sys.stdout.write(table())
