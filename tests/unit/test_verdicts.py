"""A plan and a command the installed vLLM passed once are not checked again: the launch skips
importing vLLM (seconds) while the same install, plan and command come back, and checks again
when one changes. The verdicts live beside the plan's records, so ``bake`` carries them."""

from __future__ import annotations

import json

import pytest

from launcher import pipeline
from launcher.errors import Issue, ProfileError
from launcher.launch import start as launch_mod
from launcher.launch import verdicts
from tests.conftest import MINIMAL
from tests.unit.test_launch import probed, rtx

GPUS = [rtx(i) for i in range(4)]


def fake_vllm(root):
    """A vLLM package's files that build its parser, and one that does not."""
    for rel, text in {
        "__init__.py": "",
        "engine/arg_utils.py": "class EngineArgs: ...\n",
        "entrypoints/openai/cli_args.py": "def make_arg_parser(p): return p\n",
        "config/cache.py": "block_size = 16\n",
        "v1/worker/gpu_worker.py": "class Worker: ...\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def install(tmp_path, monkeypatch):
    root = fake_vllm(tmp_path / "site" / "vllm")
    monkeypatch.setattr(verdicts, "vllm_root", lambda: root)
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    return root


@pytest.fixture
def lines_checked(monkeypatch):
    """How often the plan was checked against the installed line (the check that imports
    the attention impl under DCP); an issue in ``refuse`` is what it finds."""
    calls: list[str] = []
    refuse: list[Issue] = []
    real = launch_mod.installed_line_issues

    def check(planned, installed, how):
        calls.append(installed.name)
        return list(refuse) or real(planned, installed, how)

    monkeypatch.setattr(launch_mod, "installed_line_issues", check)
    return calls, refuse


@pytest.fixture
def parsed(monkeypatch):
    """The command vLLM's parser was given, each time it was built; a flag in ``reject``
    fails as vLLM's parser fails it. The installed line is the profile's own."""
    monkeypatch.setattr(launch_mod, "require_vllm", lambda: None)
    monkeypatch.setattr(launch_mod, "probe_installed", probed("gilded-gnosis"))
    calls: list[list[str]] = []
    reject: set[str] = set()

    def check(flags, keys):
        calls.append(flags)
        if reject & set(flags):
            raise ProfileError([Issue("vLLM rejects it", key="serving.max_num_seqs")])

    monkeypatch.setattr(launch_mod, "check_argv", check)
    return calls, reject


def prepare(write, cache, tmp_path, *sets, force=False):
    path = write("p.yaml", MINIMAL)
    p = pipeline.make_plan(pipeline.load(str(path), (f"runtime.cache_root={cache}", *sets)))
    return pipeline.prepare(p, force=force, run_dir=str(tmp_path / "run"), gpus=GPUS)


def test_a_command_the_same_install_accepted_is_not_parsed_again(write, tmp_path, install, parsed):
    calls, _ = parsed
    first = prepare(write, tmp_path / "cache", tmp_path)
    prepare(write, tmp_path / "cache", tmp_path)
    assert len(calls) == 1
    folder = tmp_path / "cache" / "calibration" / first.planned.fingerprint
    assert len(json.loads((folder / verdicts.FILE).read_text())["keys"]) == 2  # plan, argv


def test_a_rejected_command_is_not_remembered(write, tmp_path, install, parsed):
    calls, reject = parsed
    reject.add("--model")
    for _ in range(2):
        with pytest.raises(ProfileError):
            prepare(write, tmp_path / "cache", tmp_path)
    assert len(calls) == 2


def test_another_install_or_command_is_parsed_again(write, tmp_path, install, parsed, monkeypatch):
    calls, _ = parsed
    prepare(write, tmp_path / "cache", tmp_path)
    (install / "config" / "cache.py").write_text("block_size = 32\n")  # a fork's option
    prepare(write, tmp_path / "cache", tmp_path)
    monkeypatch.setenv("VLLM_PLUGINS", "b12x")  # plugins may add choices
    prepare(write, tmp_path / "cache", tmp_path)
    prepare(write, tmp_path / "cache", tmp_path, "serving.max_num_seqs=3")
    prepare(write, tmp_path / "cache", tmp_path, "serving.max_num_seqs=3", force=True)
    assert len(calls) == 5
    (install / "v1" / "worker" / "gpu_worker.py").write_text("# not the parser\n")
    prepare(write, tmp_path / "cache", tmp_path, "serving.max_num_seqs=3", force=True)
    assert len(calls) == 5


def test_without_an_installed_vllm_the_command_is_always_parsed(
    write, tmp_path, parsed, monkeypatch
):
    calls, _ = parsed
    monkeypatch.setattr(verdicts, "vllm_root", lambda: None)
    for _ in range(2):
        prepare(write, tmp_path / "cache", tmp_path)
    assert len(calls) == 2


def test_an_unreadable_verdict_file_is_checked_again_and_rewritten(
    write, tmp_path, install, parsed, capsys
):
    calls, _ = parsed
    done = prepare(write, tmp_path / "cache", tmp_path)
    file = tmp_path / "cache" / "calibration" / done.planned.fingerprint / verdicts.FILE
    file.write_text("{half")
    capsys.readouterr()
    prepare(write, tmp_path / "cache", tmp_path)
    assert f"warning: {file}: malformed" in capsys.readouterr().err
    prepare(write, tmp_path / "cache", tmp_path)
    assert len(calls) == 2 and json.loads(file.read_text())["keys"]


def test_a_verdict_file_written_before_its_schema_key_is_still_read(
    write, tmp_path, install, parsed
):
    calls, _ = parsed
    done = prepare(write, tmp_path / "cache", tmp_path)
    file = tmp_path / "cache" / "calibration" / done.planned.fingerprint / verdicts.FILE
    file.write_text(json.dumps({"keys": json.loads(file.read_text())["keys"]}))
    prepare(write, tmp_path / "cache", tmp_path)
    assert len(calls) == 1


def test_a_free_port_or_another_host_is_the_same_command_and_a_port_that_is_no_number_is_not():
    base = ["--model", "m", "--host", "127.0.0.1", "--port", "8000"]
    other = ["--model", "m", "--host", "10.0.0.7", "--port", "44355"]
    assert verdicts.stable(base) == verdicts.stable(other)
    assert verdicts.stable(["--port", "http"]) == ["--port", "http"]
    assert verdicts.stable(["--model", "--port"]) == ["--model", "--port"]


def test_a_recalibrated_plan_is_the_same_command_and_a_figure_of_another_shape_is_not():
    """A fresh node plans from the baked node's calibrated records, so its memory figures
    differ from those of the boot that baked the verdict."""
    boot1 = ["--gpu-memory-utilization", "0.974", "--kv-cache-memory-bytes", "80000000000"]
    fresh = ["--gpu-memory-utilization", "0.969", "--kv-cache-memory-bytes", "79123456789"]
    assert verdicts.stable(boot1) == verdicts.stable(fresh)
    assert verdicts.stable(["--kv-cache-memory-bytes", "80G"])[1] == "80G"
    assert verdicts.stable(["--gpu-memory-utilization", ".9"])[1] == ".9"


def test_a_plan_the_same_install_passed_is_not_checked_again_and_a_refused_one_is(
    write, tmp_path, install, parsed, lines_checked
):
    calls, refuse = lines_checked
    prepare(write, tmp_path / "cache", tmp_path)
    prepare(write, tmp_path / "cache", tmp_path)
    assert calls == ["gilded-gnosis"]
    prepare(write, tmp_path / "cache", tmp_path, "serving.max_num_seqs=3")  # another plan
    assert len(calls) == 2
    refuse.append(Issue("not on this vLLM", key="vllm.attention_backend"))
    for _ in range(2):
        with pytest.raises(ProfileError):
            prepare(write, tmp_path / "cache", tmp_path, "serving.max_num_seqs=5")
    assert len(calls) == 4
    (install / "v1" / "attention" / "backends" / "mla").mkdir(parents=True)
    (install / "v1" / "attention" / "backends" / "mla" / "impl.py").write_text("dcp = True\n")
    refuse.clear()
    prepare(write, tmp_path / "cache", tmp_path)  # an impl class changed: checked again
    assert len(calls) == 5
