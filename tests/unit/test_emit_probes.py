"""``emit``'s probes from this plan's measured boots, the one table of targets, and the
headless worker's probe (issue 67)."""

from __future__ import annotations

import math
import random
import socket

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract import store
from launcher.contract.phases import BOOTS_FILE, BootTimes, add_boot
from launcher.emit import probes
from launcher.emit import targets as table
from launcher.launch import probe
from tests.conftest import PROFILES

TWO_NODES = PROFILES / "glm52-2node.yaml"


def _fingerprint(profile, cache) -> str:
    result = CliRunner().invoke(
        cli, [str(profile), "--dry-run", "--json", "--set", f"runtime.cache_root={cache}"]
    )
    return yaml.safe_load(result.output)["fingerprint"]


def _record(cache, fingerprint, kind, ready):
    boot = BootTimes(build="b", kind=kind, when=1.8e9, ready=ready, phases={"rank0": {"w": 1.0}})
    add_boot(store.folder(cache, fingerprint) / BOOTS_FILE, boot)


def _emit(out, cache, *args) -> dict[str, str]:
    result = CliRunner().invoke(
        cli,
        ["emit", str(TWO_NODES), str(out), "--set", f"runtime.cache_root={cache}",
         "--set", "runtime.master_addr=10.9.8.7", *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {p.name: p.read_text() for p in out.iterdir() if p.suffix == ".yaml"}


def _leader_startup(files) -> dict:
    lws = yaml.safe_load(files["leaderworkerset.yaml"])
    c = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    return c["startupProbe"]


def test_without_a_record_the_budget_stays_the_default_and_says_so(tmp_path):
    files = _emit(tmp_path / "out", tmp_path / "cache")
    startup = _leader_startup(files)
    assert (startup["failureThreshold"], startup["periodSeconds"]) == (180, 10)
    assert (
        "180 x 10 s = 30 min: the default, no measured cold boot"
        in files["leaderworkerset.yaml"].split("apiVersion")[0]
    )
    compose = yaml.safe_load(files["compose.node0.yaml"])
    assert compose["services"]["vllm"]["healthcheck"]["start_period"] == "1800s"


def test_a_measured_cold_boot_sets_the_budget_with_factor_and_floor(tmp_path):
    cache = tmp_path / "cache"
    fp = _fingerprint(TWO_NODES, cache)
    _record(cache, fp, "cold", 640.0)
    files = _emit(tmp_path / "out", cache)
    want = math.ceil(probes.FACTOR * 640.0 / probes.PERIOD_S)
    assert _leader_startup(files)["failureThreshold"] == want
    head = files["leaderworkerset.yaml"].split("apiVersion")[0]
    assert "2 x the cold boot of" in head and "ready in 640 s" in head
    compose = yaml.safe_load(files["compose.node0.yaml"])
    assert compose["services"]["vllm"]["healthcheck"]["start_period"] == f"{want * 10}s"


def test_a_seeded_cache_gets_the_shorter_budget_its_boot_measured(tmp_path):
    cache = tmp_path / "cache"
    fp = _fingerprint(TWO_NODES, cache)
    _record(cache, fp, "cold", 900.0)
    _record(cache, fp, "artifact", 200.0)
    cold = probes.startup_budget(cache, fp, artifact=False)
    seeded = probes.startup_budget(cache, fp, artifact=True)
    assert seeded.seconds < cold.seconds
    assert seeded.seconds == max(probes.FLOOR_S, 400) and "artifact boot" in seeded.why


def test_only_warm_boots_leave_a_fresh_node_the_default(tmp_path):
    cache = tmp_path / "cache"
    _record(cache, "fp", "warm", 50.0)
    budget = probes.startup_budget(cache, "fp", artifact=False)
    assert budget.failures == probes.DEFAULT_FAILURES and "only warm boots" in budget.why


def test_the_budget_is_the_rule_for_any_ready_time():
    seed = random.randrange(1 << 30)
    rand = random.Random(seed)
    for _ in range(200):
        ready = rand.uniform(0, 20_000)
        boot = BootTimes(build="b", kind="cold", when=0.0, ready=ready, phases={})
        budget = probes.from_boot(boot)
        assert budget.seconds >= max(probes.FLOOR_S, probes.FACTOR * ready), (seed, ready)
        assert budget.seconds < max(probes.FLOOR_S, probes.FACTOR * ready) + budget.period


def test_a_broken_boots_file_keeps_the_default_and_names_it(tmp_path):
    folder = store.folder(tmp_path, "fp")
    folder.mkdir(parents=True)
    (folder / BOOTS_FILE).write_text("{")
    budget = probes.startup_budget(tmp_path, "fp", artifact=False)
    assert budget.failures == probes.DEFAULT_FAILURES and BOOTS_FILE in budget.why


def test_worker_pods_and_nodes_probe_their_vllm_and_the_leaders_port(tmp_path):
    files = _emit(tmp_path / "out", tmp_path / "cache")
    lws = yaml.safe_load(files["leaderworkerset.yaml"])
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    for kind in ("startupProbe", "livenessProbe"):
        command = worker[kind]["exec"]["command"]
        assert command[:3] == ["python3", "-m", "launcher.launch.probe"]
        assert command[command.index("--port") + 1] == "29500"
    assert "readinessProbe" not in worker
    node1 = yaml.safe_load(files["compose.node1.yaml"])["services"]["vllm"]["healthcheck"]
    assert node1["test"][-2:] == ["--leader", "10.9.8.7"] and "disable" not in node1


def test_the_targets_come_from_one_table():
    emit = cli.commands["emit"]
    option = next(p for p in emit.params if p.name == "targets")
    assert list(option.type.choices) == table.names() == [t.name for t in table.TARGETS]
    assert all(t.name in option.help for t in table.TARGETS)
    for t in table.TARGETS:
        assert callable(t.render())


def test_a_new_target_is_one_row(tmp_path, monkeypatch):
    import sys
    import types

    module = types.ModuleType("fake_target")
    module.render = lambda t: {"fake.yaml": f"plan: {t.fingerprint}\n"}
    monkeypatch.setitem(sys.modules, "fake_target", module)
    row = table.EmitTarget("fake", "fake_target", "a fake", kubernetes=False, default=False)
    monkeypatch.setattr(table, "TARGETS", (*table.TARGETS, row))
    from launcher.emit.command import emit
    from launcher.pipeline import load, make_plan

    planned = make_plan(load(str(PROFILES / "tiny-cpu.yaml")))
    paths = emit(planned, tmp_path, ("fake",), "img:1", None)
    assert [p.name for p in paths] == ["fake.yaml"]


def test_a_claim_is_refused_for_every_target_off_kubernetes(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["emit", str(PROFILES / "tiny-cpu.yaml"), str(tmp_path), "--target", "kserve",
         "--target", "compose", "--cache-from", "pvc:claim"],
    )  # fmt: skip
    assert result.exit_code == 1 and "compose files mount" in result.output
    assert "--target k8s or kserve" in result.output


def test_the_probe_passes_with_vllm_alive_and_the_leader_listening(tmp_path):
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cmdline").write_bytes(b"python3\0-m\0vllm.entrypoints.cli.main\0serve\0")
    (proc / "4242" / "stat").write_text("4242 (python3) S 1 1 1")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        args = ["--port", str(port), "--leader", "127.0.0.1", "--timeout", "2"]
        assert probe.main(args, proc) == 0
        (proc / "4242" / "stat").write_text("4242 (python3) Z 1 1 1")  # a zombie is not alive
        assert probe.main(args, proc) == 1
    (proc / "4242" / "stat").write_text("4242 (python3) S 1 1 1")
    assert probe.main(args, proc) == 1  # nothing listens any more


def test_the_probe_without_a_leader_address_says_so(tmp_path, monkeypatch, capsys):
    for name in probe.LEADER_ENV:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "cmdline").write_bytes(b"vllm\0serve\0")
    (tmp_path / "7" / "stat").write_text("7 (vllm) R")
    assert probe.main(["--port", "1"], tmp_path) == 1
    assert "LWS_LEADER_ADDRESS" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["1", "self", "x"])
def test_a_process_table_without_vllm_is_unhealthy(tmp_path, name):
    (tmp_path / name).mkdir()
    (tmp_path / name / "cmdline").write_bytes(b"sleep\0infinity\0")
    (tmp_path / name / "stat").write_text(f"{name} (sleep) S")
    assert not probe.vllm_alive(tmp_path)
