"""The phase recorder, the boots history and the worker's phases (issue 67)."""

from __future__ import annotations

import json
import random
import threading

import pytest

from launcher.contract.base import ContractError
from launcher.contract.phases import (
    BOOTS_KEPT,
    Boots,
    BootTimes,
    Recorder,
    add_boot,
    phase_file,
    read_boots,
    read_phases,
)
from launcher.launch import phases as launch_phases
from launcher.runtime import phases as worker_phases


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _recorder(tmp_path, **kw):
    lines: list[str] = []
    clock = Clock()
    r = Recorder(
        tmp_path / "phases-rank0.json",
        "rank0",
        started=clock.t,
        say=lines.append,
        clock=clock,
        **kw,
    )
    return r, clock, lines


def test_begin_ends_the_running_phase_and_says_its_time(tmp_path):
    r, clock, lines = _recorder(tmp_path)
    r.begin("weights")
    clock.t += 12.5
    r.begin("stage")
    clock.t += 3
    r.end()
    assert lines == ["rank0: phase weights took 12.5s", "rank0: phase stage took 3.0s"]
    assert r.durations() == {"weights": 12.5, "stage": 3.0}
    assert r.current is None


def test_an_expected_time_is_said_with_where_it_came_from(tmp_path):
    r, clock, lines = _recorder(tmp_path, expected={"weights": 10.0}, expected_from="cold boot")
    r.begin("weights")
    clock.t += 11
    r.begin("stage")
    r.end()
    assert lines[0] == "rank0: phase weights took 11.0s (expected 10.0s, cold boot)"
    assert "expected" not in lines[1]


def test_every_boundary_rewrites_the_file_whole(tmp_path):
    r, clock, _ = _recorder(tmp_path)
    r.begin("stage")
    r.part("waves", 13, 27)
    f = read_phases(tmp_path / "phases-rank0.json")
    assert f.phases[-1].ended is None
    assert (f.phases[-1].progress.done, f.phases[-1].progress.total) == (13, 27)
    clock.t += 1
    r.end()
    assert read_phases(tmp_path / "phases-rank0.json").phases[-1].ended == clock.t
    assert [p.name for p in tmp_path.iterdir()] == ["phases-rank0.json"]  # no temporary left


def test_a_reader_of_a_live_file_never_sees_it_torn(tmp_path):
    r, clock, _ = _recorder(tmp_path)
    stop = threading.Event()
    written = [0]

    def write() -> None:
        while not stop.is_set() and written[0] < 200:
            clock.t += 0.01
            r.begin(f"phase {written[0] % 50}")
            r.part("waves", written[0], written[0] + 1)
            written[0] += 1

    r.begin("first")
    writer = threading.Thread(target=write)
    writer.start()
    reads: list[int] = []
    try:
        while writer.is_alive() and len(reads) < 2000:
            reads.append(len(read_phases(tmp_path / "phases-rank0.json").phases))
    finally:
        stop.set()
        writer.join()
    assert reads == sorted(reads) and reads[-1] > 1  # each read whole, and it grew


def test_an_unwritable_run_dir_is_said_once_and_the_boot_goes_on(tmp_path):
    (tmp_path / "file").write_text("")
    lines: list[str] = []
    r = Recorder(tmp_path / "file" / "phases-rank0.json", "rank0", started=1.0, say=lines.append)
    for name in ("a", "b", "c"):
        r.begin(name)
    notes = [ln for ln in lines if "not recorded" in ln]
    assert len(notes) == 1 and "file" in notes[0]


def _boot(build="b", kind="cold", ready=100.0, when=1.0):
    return BootTimes(build=build, kind=kind, when=when, ready=ready, phases={"rank0": {"w": 1.0}})


def test_the_boots_history_keeps_the_newest(tmp_path):
    path = tmp_path / "boots.json"
    for i in range(BOOTS_KEPT + 3):
        add_boot(path, _boot(ready=float(i)))
    boots = read_boots(path).boots
    assert len(boots) == BOOTS_KEPT and boots[-1].ready == BOOTS_KEPT + 2


def test_the_latest_boot_prefers_the_kind_asked_then_any_of_the_build():
    boots = Boots(boots=[_boot(kind="cold", ready=1), _boot(kind="warm", ready=2),
                         _boot(build="other", kind="artifact", ready=3)])  # fmt: skip
    assert boots.latest("b", "cold").ready == 1
    assert boots.latest("b", "artifact").ready == 2  # none of that kind: the newest of b
    assert boots.latest("other").ready == 3
    assert boots.latest("nope") is None


@pytest.mark.parametrize(
    "text", ["", "{", "[]", '{"schema": "x"}', '{"schema": "b12x-launch/boots/1", "boots": 3}']
)
def test_a_broken_boots_file_is_refused_by_name_and_add_starts_afresh(tmp_path, text):
    path = tmp_path / "boots.json"
    path.write_text(text)
    with pytest.raises(ContractError, match=r"boots\.json"):
        read_boots(path)
    add_boot(path, _boot())
    assert len(read_boots(path).boots) == 1


def test_boot_kind_and_expected_times_from_the_store(tmp_path):
    folder = tmp_path / "fp"
    folder.mkdir()
    empty = Boots()
    assert launch_phases.boot_kind(empty, "b", artifact=False, folder=folder) == "cold"
    assert launch_phases.boot_kind(empty, "b", artifact=True, folder=folder) == "artifact"
    (folder / "rank0.json").write_text("{}")  # a record of an earlier boot: caches are warm
    assert launch_phases.boot_kind(empty, "b", artifact=False, folder=folder) == "warm"
    boots = Boots(boots=[_boot(kind="cold", ready=200), _boot(kind="warm", ready=50)])
    phases, source = launch_phases.expected_from(boots, "b", "warm")
    assert phases == {"rank0": {"w": 1.0}} and source.startswith("warm boot of")
    _, source = launch_phases.expected_from(Boots(boots=[_boot(kind="cold")]), "b", "warm")
    assert source.startswith("cold boot of")  # none warm yet: the cold one, said so
    assert launch_phases.expected_from(boots, "other build", "cold") == ({}, "")


class _Runner:
    def capture_model(self) -> int:
        return 7


class _VllmWorker:
    """The steps vLLM's engine calls on a worker, in order, as plain methods."""

    rank = 0

    def __init__(self):
        self.model_runner = _Runner()

    def init_device(self):
        pass

    def load_model(self):
        pass

    def determine_available_memory(self) -> int:
        worker_phases.begin("memory profile")  # the planned worker's own boundary
        return 1

    def initialize_from_config(self, config):
        pass

    def compile_or_warm_up_model(self):
        return self.model_runner.capture_model()


class _Worker(worker_phases.PhasedMixin, _VllmWorker):
    pass


@pytest.fixture
def fresh_worker_state(monkeypatch):
    monkeypatch.setattr(worker_phases, "_recorder", None)
    monkeypatch.setattr(worker_phases, "_launch", None)


def _launcher_file(run, boots, expected=None):
    lines: list[str] = []
    r = Recorder(run / phase_file("launcher"), "launcher", started=1.0, say=lines.append)
    r.file.boots_file, r.file.build, r.file.boot_kind = str(boots), "b", "cold"
    r.file.ready_url = "http://127.0.0.1:9/health"
    r.file.expected_all = expected or {}
    r.file.expected_from = "cold boot of then" if expected else ""
    r.begin("plan")
    r.begin("exec")
    r.end()
    return r


def _run_with_a_launcher_file(tmp_path, monkeypatch, expected=None):
    """A run directory with the launcher's phase file, named to the worker; no ready thread."""
    run, boots = tmp_path / "run", tmp_path / "store" / "boots.json"
    run.mkdir()
    _launcher_file(run, boots, expected=expected)
    monkeypatch.setenv("BLAUNCH_RUN_DIR", str(run))
    monkeypatch.setattr(worker_phases.threading, "Thread", lambda **kw: type(
        "T", (), {"start": lambda self: None})())  # fmt: skip
    return run, boots


def test_the_worker_records_vllms_steps_in_order_and_ready_records_the_boot(
    tmp_path, monkeypatch, fresh_worker_state
):
    run, boots = _run_with_a_launcher_file(
        tmp_path, monkeypatch, expected={"rank0": {"weights": 5.0}}
    )
    w = _Worker()
    w.init_device()
    w.load_model()
    w.determine_available_memory()
    w.initialize_from_config(None)
    assert w.compile_or_warm_up_model() == 7
    assert "capture_model" not in vars(w.model_runner)  # the class's own again
    worker_phases.ready()
    f = read_phases(run / "phases-rank0.json")
    names = [p.name for p in f.phases]
    assert names == [
        "vllm start", "device init", "weights", "stage", "memory profile", "kv sizing",
        "warmup", "graph capture", "warmup after capture", "api server", "ready",
    ]  # fmt: skip
    assert all(p.ended is not None for p in f.phases) and f.ready_at is not None
    assert f.phases[2].expected == 5.0
    stored = read_boots(boots).boots
    assert len(stored) == 1 and set(stored[0].phases) == {"launcher", "rank0"}
    assert stored[0].phases["launcher"].keys() == {"plan", "exec"}


def test_the_boot_is_in_the_store_before_the_phase_file_says_ready(
    tmp_path, monkeypatch, fresh_worker_state
):
    """Whoever stops the server once ``status`` says ready must not lose the boot's times (the
    integration tier's second boot expected nothing when the first was stopped in between)."""
    run, boots = _run_with_a_launcher_file(tmp_path, monkeypatch)
    w = _Worker()
    w.init_device()
    w.load_model()
    w.compile_or_warm_up_model()
    seen = []
    write = worker_phases._recorder.write

    def noting_write():
        if worker_phases._recorder.file.ready_at is not None:  # the write that says ready
            seen.append(len(read_boots(boots).boots))
        write()

    monkeypatch.setattr(worker_phases._recorder, "write", noting_write)
    worker_phases.ready()
    assert seen == [1]
    assert read_phases(run / "phases-rank0.json").ready_at is not None


def test_without_a_run_dir_the_worker_records_nothing(tmp_path, monkeypatch, fresh_worker_state):
    monkeypatch.delenv("BLAUNCH_RUN_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    w = _Worker()
    w.init_device()
    w.load_model()
    w.compile_or_warm_up_model()
    assert worker_phases._recorder is None and list(tmp_path.iterdir()) == []


def test_without_the_launchers_file_the_worker_records_but_expects_nothing(
    tmp_path, monkeypatch, fresh_worker_state
):
    monkeypatch.setenv("BLAUNCH_RUN_DIR", str(tmp_path))
    w = _Worker()
    w.init_device()
    w.load_model()
    w.compile_or_warm_up_model()
    f = read_phases(tmp_path / "phases-rank0.json")
    assert [p.name for p in f.phases][:2] == ["device init", "weights"]
    assert f.phases[-1].ended is not None  # no server to wait for: the last phase ends
    assert all(p.expected is None for p in f.phases)


def test_random_phase_files_round_trip(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rand = random.Random(seed)
    for i in range(20):
        clock = Clock(rand.uniform(0, 2e9))
        r = Recorder(tmp_path / f"{i}.json", f"rank{i}", started=clock.t, say=lambda _: None,
                     clock=clock)  # fmt: skip
        r.write()
        for n in range(rand.randint(0, 10)):
            clock.t += rand.expovariate(0.1)
            r.begin(rand.choice(["weights", "stage", "warmup", f"p{n}"]))
            if rand.random() < 0.3:
                r.part("waves", rand.randint(0, 99), rand.randint(0, 99))
        if rand.random() < 0.5:
            r.end()
        back = read_phases(tmp_path / f"{i}.json")
        assert back == r.file, seed
        assert json.loads((tmp_path / f"{i}.json").read_text())["schema"] == "b12x-launch/phases/1"
