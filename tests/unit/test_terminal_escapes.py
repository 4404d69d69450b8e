"""Text from records reaches the terminal with its control sequences escaped (issue 64, item
9): a ``qualified.json`` date, a record's late kernel in ``report``, a learned kernel in
``prewarm --list``; an OSC title sequence no longer swallows the rest of the plan."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.cli import cli
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.qualified import save_qualified
from launcher.terminal import printable
from tests.conftest import MINIMAL

OSC = "\x1b]0;pwned\x07"
HOSTILE = (OSC, "\x1b[2J", "\x9b31m", "\u202e", "\x07", "\x00")


@pytest.mark.parametrize("raw", HOSTILE)
def test_printable_leaves_no_control_character(raw):
    out = printable(f"a{raw}b\nc\td")
    assert all(c.isprintable() or c in "\n\t" for c in out)
    assert out.startswith("a") and "\nc\td" in out


def test_printable_keeps_styles_only_when_asked():
    styled = "\x1b[1;31mred\x1b[0m" + OSC
    assert printable(styled, keep_styles=True).startswith("\x1b[1;31mred\x1b[0m\\x1b]0;")
    assert "\x1b" not in printable(styled)


@pytest.fixture
def qualified_store(write, tmp_path):
    path = write("p.yaml", MINIMAL)
    sets = (f"runtime.cache_root={tmp_path / 'cache'}",)
    loaded = pipeline.load(str(path), sets)
    fp = profile_fingerprint(loaded.profile)
    record = {
        "when": "2026-11-30T18:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "kv": {"blocks": 100, "tokens": 100 * 256},
    }
    save_qualified(record, None, loaded.profile, fp)
    store = tmp_path / "cache" / "calibration" / fp / "qualified.json"
    return path, sets, store


def test_a_qualified_date_with_an_osc_sequence_is_escaped(qualified_store):
    path, sets, store = qualified_store
    data = json.loads(store.read_text())
    data["when"] = OSC + "2026"
    store.write_text(json.dumps(data))
    out = CliRunner().invoke(
        cli, [str(path), "--dry-run", *(a for s in sets for a in ("--set", s))]
    )
    assert out.exit_code in (0, 3), out.output
    assert "qualified \\x1b]0;pwned" in out.output
    assert "\x1b" not in out.output and "\x07" not in out.output
    assert "vLLM command:" in out.output  # the rest of the plan is still there


def test_a_late_kernel_with_escapes_reaches_report_dry_run_and_prewarm_list_escaped(
    tmp_path, write
):
    from launcher.contract import census
    from launcher.plan.calibration import save_record
    from launcher.profile import load_profile

    path = write("p.yaml", MINIMAL)
    sets = ["--set", f"runtime.cache_root={tmp_path}"]
    plan = json.loads(CliRunner().invoke(cli, [str(path), "--json", *sets]).output)
    profile = load_profile(path, [f"runtime.cache_root={tmp_path}"]).profile
    late = [census.entry("b12x", f"k{OSC}\x9b2J\u202eevil", " m=1", 8 * 2**20)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps(plan))
    for rank in range(4):
        record = {
            "fingerprint": plan["fingerprint"],
            "rank": rank,
            "when": "2026-11-30" + OSC,
            "measured": {"jit_headroom": 64 * 2**20},
            "late_compiles": late,
        }
        save_record(record, run, profile)
    outputs = {
        "report": CliRunner().invoke(cli, ["report", str(run)]),
        "dry run": CliRunner().invoke(cli, [str(path), "--dry-run", *sets]),
        "prewarm --list": CliRunner().invoke(cli, ["prewarm", str(path), "--list", *sets]),
    }
    for what, result in outputs.items():
        assert result.exit_code in (0, 3), (what, result.output)
        assert "k\\x1b]0;pwned" in result.output, what  # named, made visible
        for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
            assert raw not in result.output, (what, raw)
