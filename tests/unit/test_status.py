"""``b12x-launch status RUN_DIR``: read from the run directory only, live or once, as a table
or JSON; a phase past its expected time flagged; broken files named, never a traceback."""

from __future__ import annotations

import io
import json
import os
import random
import threading
import time

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract.phases import STATUS_SCHEMA, BootStatus, Recorder, phase_file
from launcher.report import status as boot


def _file(run, who, started, phases, *, expected_all=None, ready_at=None):
    """A phase file: ``phases`` as (name, start offset, seconds or None while running)."""
    r = Recorder(run / phase_file(who), who, started=started, say=lambda _: None)
    r.file.expected_all = expected_all or {}
    for name, offset, took in phases:
        r.begin(name)
        r.file.phases[-1].started = started + offset
        if took is not None:
            r.file.phases[-1].ended = started + offset + took
    r.file.ready_at = ready_at
    r.write()
    return r


def test_a_phase_past_the_factor_and_the_floor_is_possibly_stuck(tmp_path):
    now = 10_000.0
    expected = {"rank0": {"weights": 30.0, "stage": 10.0}, "rank1": {"weights": 30.0}}
    _file(tmp_path, "launcher", now - 500, [("plan", 0, 1)], expected_all=expected)
    _file(tmp_path, "rank0", now - 400, [("weights", 0, 30), ("stage", 30, None)])
    _file(tmp_path, "rank1", now - 100, [("weights", 0, None)])
    s = boot.read(tmp_path, now)
    # rank0's stage: 370 s of 10 expected (past 3x and 60 s); rank1's weights: 100 s of 30
    assert s.stuck == ["rank0: stage", "rank1: weights"]
    assert boot.read(tmp_path, now, factor=20).stuck == ["rank0: stage"]
    assert boot.read(tmp_path, now, floor=1000).stuck == []


def test_a_short_phase_is_not_stuck_below_the_floor(tmp_path):
    _file(tmp_path, "launcher", 0.0, [], expected_all={"rank0": {"weights": 2.0}})
    _file(tmp_path, "rank0", 0.0, [("weights", 0, None)])
    assert boot.read(tmp_path, 7.0).stuck == []  # 3.5x of 2 s, below the 60 s floor
    assert boot.read(tmp_path, 61.0).stuck == ["rank0: weights"]


def test_the_slowest_rank_is_the_one_furthest_behind(tmp_path):
    _file(tmp_path, "rank0", 0.0, [("weights", 0, 10), ("stage", 10, None)])
    _file(tmp_path, "rank1", 0.0, [("weights", 0, None)])
    _file(tmp_path, "rank2", 0.0, [("weights", 0, 12), ("stage", 12, None)])
    assert boot.read(tmp_path, 20.0).slowest == "rank1"
    (tmp_path / phase_file("rank1")).unlink()
    assert boot.read(tmp_path, 20.0).slowest == "rank0"  # in its stage longest


def test_one_rank_names_no_slowest(tmp_path):
    _file(tmp_path, "rank0", 0.0, [("weights", 0, None)])
    assert boot.read(tmp_path, 5.0).slowest is None


def test_phases_ahead_show_their_expected_times(tmp_path):
    expected = {"rank0": {"weights": 5.0, "stage": 9.0}}
    _file(tmp_path, "launcher", 0.0, [("plan", 0, 1)], expected_all=expected)
    _file(tmp_path, "rank0", 1.0, [("weights", 0, None)])
    rank0 = next(p for p in boot.read(tmp_path, 3.0).processes if p.who == "rank0")
    assert [(p.name, p.state, p.expected) for p in rank0.phases] == [
        ("weights", "running", 5.0),
        ("stage", "not started", 9.0),
    ]


def test_ready_and_elapsed_are_from_the_launchs_start(tmp_path):
    _file(tmp_path, "launcher", 100.0, [("plan", 0, 2)])
    _file(tmp_path, "rank0", 103.0, [("weights", 0, 5), ("ready", 40, 0)], ready_at=143.0)
    s = boot.read(tmp_path, 500.0)
    assert (s.ready, s.elapsed) == (43.0, 43.0) and boot.finished(s)


def test_json_is_the_typed_status(tmp_path):
    _file(tmp_path, "rank0", 0.0, [("weights", 0, None)])
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == STATUS_SCHEMA
    assert BootStatus.model_validate(data).processes[0].current == "weights"


def test_once_prints_a_table_with_the_phases(tmp_path):
    t0 = time.time() - 5
    _file(tmp_path, "launcher", t0, [("plan", 0, 1.5)], expected_all={"rank0": {"stage": 70}})
    r = _file(tmp_path, "rank0", t0 + 2, [("stage", 0, None)])
    r.part("waves", 13, 27)
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--once"])
    assert result.exit_code == 0, result.output
    for words in ("plan", "1.5s", "stage", "running", "70.0s", "waves 14/27", "rank0"):
        assert words in result.output, words


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"phases-rank0.json": '{"schema": "b12x-launch/phases/1", "who'}, "unreadable"),
        ({"phases-rank0.json": '{"schema": "someone else"}'}, "not a b12x-launch phase file"),
        ({"phases-rank0.json": "[1, 2]"}, "not a JSON object"),
        ({"phases-rank0.json": " " * (2 << 20)}, "phase file"),
        ({"phases-rank0.json": '{"schema": "b12x-launch/phases/1", "who": "r", "started": -1}'},
         "started"),
    ],
)  # fmt: skip
def test_a_broken_file_is_named_and_the_rest_shown(tmp_path, files, why):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    _file(tmp_path, "rank1", 0.0, [("weights", 0, None)])
    s = boot.read(tmp_path, 1.0)
    assert len(s.problems) == 1 and "phases-rank0.json" in s.problems[0] and why in s.problems[0]
    assert [p.who for p in s.processes] == ["rank1"]
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--once"])
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "phases-rank0.json" in result.output


def test_a_fifo_or_a_link_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "phases-rank0.json")
    (tmp_path / "phases-rank1.json").symlink_to("/dev/zero")
    s = boot.read(tmp_path, 1.0)
    assert len(s.problems) == 2 and not s.processes
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--once"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no phase file could be read" in result.output


def test_foreign_names_are_not_read(tmp_path):
    (tmp_path / "phases-rank0.json.tmp").write_text("{")
    (tmp_path / "phases-../x.json").parent.mkdir(exist_ok=True)
    (tmp_path / "phases-evil.json").write_text("{")
    (tmp_path / "plan.json").write_text("{}")
    assert boot.phase_files(tmp_path) == []


@pytest.mark.parametrize("make", ["missing", "file"])
def test_no_run_dir_is_one_clear_line(tmp_path, make):
    path = tmp_path / "run"
    if make == "file":
        path.write_text("")
    result = CliRunner().invoke(cli, ["status", str(path), "--json"])
    assert result.exit_code == 1
    assert str(path) in result.output and "Traceback" not in result.output


def test_watch_follows_a_run_dir_being_written_until_ready(tmp_path):
    """Another thread boots (writes the files as the launcher and a worker would); status
    --watch --json prints what it sees until the boot is ready, then ends."""
    seed = random.randrange(1 << 30)
    rand = random.Random(seed)
    names = ["weights", "stage", "kv sizing", "warmup", "api server"]

    def booting() -> None:
        launch = Recorder(tmp_path / phase_file("launcher"), "launcher", started=time.time(),
                          say=lambda _: None)  # fmt: skip
        launch.begin("plan")
        launch.end()
        rank = Recorder(tmp_path / phase_file("rank0"), "rank0", started=time.time(),
                        say=lambda _: None)  # fmt: skip
        for name in names:
            rank.begin(name)
            time.sleep(rand.uniform(0.01, 0.1))
        rank.begin("ready")
        rank.file.ready_at = time.time()
        rank.end()

    writer = threading.Thread(target=booting)
    out = io.StringIO()
    writer.start()
    try:
        boot.show(tmp_path, watch=True, as_json=True, interval=0.02, out=out)
    finally:
        writer.join()
    seen = [BootStatus.model_validate(json.loads(line)) for line in out.getvalue().splitlines()]
    assert seen[-1].ready is not None, seed
    assert any(s.ready is None and s.processes for s in seen), seed  # seen during the boot
    last = {p.name: p.state for p in seen[-1].processes[-1].phases}
    assert all(state == "done" for state in last.values()) and set(names) <= set(last)


def test_watch_on_a_terminal_renders_live_until_ready(tmp_path):
    _file(tmp_path, "rank0", 0.0, [("weights", 0, 1), ("ready", 1, 0)], ready_at=1.0)
    out = io.StringIO()
    shown = boot.show(tmp_path, watch=True, as_json=False, out=out, sleep=lambda _: None)
    assert shown.ready is not None and boot.nothing_shown(shown) is None
    assert "ready in" in out.getvalue() and "weights" in out.getvalue()


def test_many_files_are_read_up_to_a_bound(tmp_path):
    for rank in range(boot.FILES_MAX + 5):
        (tmp_path / phase_file(f"rank{rank}")).write_text("{")
    assert len(boot.phase_files(tmp_path)) == boot.FILES_MAX


def test_a_rank_whose_process_is_gone_is_said_so_and_ends_the_watch(tmp_path):
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    r = _file(tmp_path, "rank0", time.time(), [("weights", 0, None)])
    r.file.host, r.file.pid = socket.gethostname(), int(gone.stdout)
    r.write()
    live = _file(tmp_path, "rank1", time.time(), [("weights", 0, None)])
    live.file.host, live.file.pid = socket.gethostname(), os.getpid()
    live.write()
    s = boot.read(tmp_path)
    states = {p.who: (p.alive, p.phases[0].state) for p in s.processes}
    assert states == {"rank0": (False, "process gone"), "rank1": (True, "running")}
    assert not boot.finished(s)
    (tmp_path / phase_file("rank1")).unlink()
    assert boot.finished(boot.read(tmp_path))  # only a gone rank left: nothing to wait for


def test_another_machines_process_is_not_asked(tmp_path):
    r = _file(tmp_path, "rank0", time.time(), [("weights", 0, None)])
    r.file.host, r.file.pid = "another-node", 1
    r.write()
    (proc,) = boot.read(tmp_path).processes
    assert proc.alive is None and proc.phases[0].state == "running"


def test_a_launch_stopped_before_vllm_ends_the_watch_saying_why(tmp_path):
    r = _file(tmp_path, "launcher", time.time(), [("plan", 0, 1), ("rendezvous", 1, None)])
    r.fail("node 1 did not join in 600s")
    s = boot.read(tmp_path)
    assert boot.finished(s) and s.processes[0].failed.startswith("node 1 did not join")
    result = CliRunner().invoke(cli, ["status", str(tmp_path), "--once"])
    assert "node 1 did not join" in result.output
