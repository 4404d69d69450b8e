"""Taking a declared vLLM internal away gives a named refusal or a printed downgrade before
any weight loads: never a silent ``missing``, never a crash in vLLM's start.

The vLLM here is a stand-in package written from the declarations (each entry with the
parameters the release table read on 0.32), with one entry taken away at a time: every
entry, not a chosen few."""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

import pytest

from launcher import pipeline
from launcher.vllm import check, releases
from launcher.vllm.internals import DECLARED, Internal
from tests.conftest import PROFILES

ROW = releases.load()["0.32.0"]
EVERY_PROVIDER = ("b12x", "vllm", "triton", "keys")


def _params(entry: Internal) -> str:
    reading = ROW.get(entry.name)
    names = list(reading) if isinstance(reading, list) else list(entry.params)
    return ", ".join(names) or "*args"


def stand_in(root: Path, drop: set[str], version: str = "0.99.0") -> Path:
    """A ``vllm`` source tree holding every declared internal but those in ``drop``."""
    modules: dict[str, list[str]] = defaultdict(list)
    classes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in DECLARED:
        modules[e.module]  # every module exists, the dropped entry's too
        if e.name in drop:
            continue
        if e.path is None:
            continue
        head, _, member = e.path.partition(".")
        if e.kind == "assigned":  # set on a live object, as vLLM's code does
            modules[e.module].append(f"def _sets_{head}(obj):\n    obj.{head} = None\n")
        elif member:
            body = (
                f"    def {member}({_params(e)}): ...\n"
                if e.kind == "method"
                else f"    def __init__(self):\n        self.{member} = None\n"
            )
            classes[(e.module, head)].append(body)
        elif e.kind == "class":
            classes[(e.module, head)]
        else:
            deco = "@triton.jit\n" if e.kind == "kernel" else ""
            modules[e.module].append(f"{deco}def {head}({_params(e)}): ...\n")
    for (module, cls), bodies in classes.items():
        # each member in a base of its own: two set in __init__ need two __init__s
        parts = [f"class _{cls}{i}:\n{b}" for i, b in enumerate(bodies)]
        bases = ", ".join(f"_{cls}{i}" for i in range(len(bodies)))
        text = "".join(parts) + f"class {cls}({bases}):\n    pass\n"
        modules[module].append(text)
    dropped_modules = {e.module for e in DECLARED if e.path is None and e.name in drop}
    for module, bodies in modules.items():
        if module in dropped_modules:
            continue
        path = root.joinpath(*module.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in list(path.relative_to(root).parents)[:-1]:
            (root / parent / "__init__.py").touch()
        path.with_suffix(".py").write_text("import triton\n" + "".join(bodies))
    (root / "vllm" / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    return root


def _taken(entry: Internal) -> set[str]:
    """The entry, its alternatives when it has a group, a class's members, and each other
    entry declaring the same name (two parts may read one attribute): all gone."""
    return {
        e.name
        for e in DECLARED
        if e is entry
        or e.where == entry.where
        or (entry.group and e.group == entry.group)
        or (
            entry.kind == "class"
            and e.module == entry.module
            and (e.path or "").startswith(f"{entry.path}.")
        )
    }


def test_the_stand_in_has_everything(tmp_path):
    row = releases.read_all(stand_in(tmp_path, set()))
    assert [n for n, r in row.items() if r is False] == []


@pytest.mark.parametrize("entry", DECLARED, ids=lambda e: e.name)
def test_each_internal_taken_away_is_a_refusal_or_a_printed_downgrade(entry, tmp_path):
    taken = _taken(entry)
    root = stand_in(tmp_path, taken)
    fork = entry.fork_only
    group = [
        e for e in DECLARED if e.name in taken and (e is entry or e.group or e.where == entry.where)
    ]
    kinds = {e.without.kind for e in group}  # a group gone costs its strongest
    for strict in (False, True):
        stops = "refuse" in kinds or (strict and "skip" in kinds)
        if stops:
            named = "|".join(e.name.replace(".", r"\.") for e in group)
            with pytest.raises(check.InternalsRefused, match=named):
                check.before_weights("cuda", EVERY_PROVIDER, fork, strict, root)
            continue
        found = check.before_weights("cuda", EVERY_PROVIDER, fork, strict, root)
        said = [s for s in check.downgrade_lines(found) if f" {entry.name} missing" in s]
        assert said, (entry.name, check.downgrade_lines(found))
        assert entry.without.says in said[0]


def test_a_gap_the_release_table_knows_is_a_downgrade_even_under_strict_jit(tmp_path):
    """vLLM 0.32 has no block-table warmup (the table says so): nothing compiles late for
    it, so strict JIT does not refuse; the same gap on a release no one scanned does."""
    known = stand_in(tmp_path / "a", {"warmup.block_table"}, version="0.32.0")
    found = check.before_weights("cuda", EVERY_PROVIDER, False, True, known)
    assert [(m.name, m.expected) for m in found.missing] == [("warmup.block_table", True)]
    assert "as the release table says" in check.downgrade_lines(found)[0]
    unknown = stand_in(tmp_path / "b", {"warmup.block_table"}, version="0.34.0")
    with pytest.raises(check.InternalsRefused, match=r"warmup\.block_table"):
        check.before_weights("cuda", EVERY_PROVIDER, False, True, unknown)


def test_a_deployment_that_does_not_run_it_is_not_held_to_it(tmp_path):
    """A provider's internal is not needed where the profile runs no such provider, and a
    fork line's where the deployment is upstream."""
    root = stand_in(tmp_path, {"warmup.b12x", "triton.b12x_backend"})
    found = check.before_weights("cuda", (), False, True, root)
    assert not found.missing


class _Loads:
    loaded = False
    platform = "cpu"
    rank = 0
    _run = None

    def load_model(self) -> None:
        _Loads.loaded = True


@pytest.fixture
def planned_run(tmp_path, monkeypatch):
    sets = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]")
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, prepared.env[key])
    return prepared


def _worker():
    from launcher.runtime.worker.checked import CheckedFirst

    class Worker(CheckedFirst, _Loads):
        pass

    _Loads.loaded = False
    return Worker()


def test_the_worker_refuses_before_the_weights_load(planned_run, tmp_path, monkeypatch):
    root = stand_in(tmp_path / "vllm-src", {"kv.num_blocks"})
    monkeypatch.setattr(check, "installed_root", lambda: root)
    worker = _worker()
    with pytest.raises(RuntimeError, match=r"refused before the weights load: .*kv\.num_blocks"):
        worker.load_model()
    assert not _Loads.loaded


def test_the_worker_says_a_downgrade_and_loads(planned_run, tmp_path, monkeypatch, caplog):
    root = stand_in(tmp_path / "vllm-src", {"runner.get_model"})
    monkeypatch.setattr(check, "installed_root", lambda: root)
    worker = _worker()
    with caplog.at_level(logging.WARNING, logger="vllm.b12x_launch"):
        worker.load_model()
    assert _Loads.loaded
    assert [m.name for m in worker._internals.missing] == ["runner.get_model"]
    assert "not done on vLLM 0.99.0: runner.get_model missing" in caplog.text


def test_the_image_builds_check_fails_on_a_missing_internal_and_passes_a_whole_one(
    tmp_path, capsys
):
    """``RUN python -m launcher.vllm.check`` in the Dockerfile: exit 1 naming what the
    release lacks with nothing declared instead; exit 0 with the downgrades said."""
    whole = stand_in(tmp_path / "whole", {"warmup.block_table"})
    assert check.main(["--source", str(whole)]) == 0
    out = capsys.readouterr().out
    assert "warmup.block_table missing" in out and "every declared internal" in out
    broken = stand_in(tmp_path / "broken", {"kv.num_blocks"})
    assert check.main(["--source", str(broken)]) == 1
    assert "kv.num_blocks (vllm.v1.kv_cache_interface:KVCacheConfig.num_blocks)" in (
        capsys.readouterr().err
    )
