"""A boot from a cache artifact says whether vLLM loaded its compiled graph from it, and when it
compiled again, which factor of its key differs from the baked boot's.

The baked node's cache root is laid out as vLLM 0.26 leaves it (paths as on the H200, 2026-12-03,
logs), baked and restored with the real ``bake`` and ``restore``; this boot's writes come after
the restore, as vLLM's do.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

from launcher.artifact.bake import bake
from launcher.artifact.restore import restore
from launcher.runtime import compile_key
from tests.unit.artifact_caches import fill, keys

BAKED_KEY = "c9d7e627f0289bff35666d45793c606791e42402739d4b80ffaac6682493c568"
OTHER_KEY = "c69014704bb7edba8503dc77b4f42f02f989e6c02339d93b7beaf806d5fcdd9d"


def factors(xla: str, config_hash: str = "cfg-1", code_hash: str = "code-1") -> dict:
    """``cache_key_factors.json`` as vLLM writes it beside a compile."""
    return {
        "env": {"VLLM_XLA_CACHE_PATH": xla, "VLLM_USE_AOT_COMPILE": True},
        "config_hash": config_hash,
        "code_hash": code_hash,
        "compiler_hash": "inductor-1",
    }


def vllm_compiled(root: Path, key: str, part_hash: str, facts: dict, seed: int = 0) -> None:
    """What one cold compile of vLLM's leaves: the AOT graph and its Inductor cache under the
    key, the pieces and the factors under the config hash."""
    rng = random.Random(seed)
    cache = root / "vllm" / "torch_compile_cache"
    aot = cache / "torch_aot_compile" / key
    for rel in ("rank_0_0/model", "inductor_cache/fxgraph/ab/fabc"):
        (aot / rel).parent.mkdir(parents=True, exist_ok=True)
        (aot / rel).write_bytes(rng.randbytes(512))
    part = cache / part_hash / "rank_0_0" / "backbone"
    part.mkdir(parents=True, exist_ok=True)
    (part / "artifact_compile_range_1_2048_subgraph_0").write_bytes(rng.randbytes(256))
    (part / "cache_key_factors.json").write_text(json.dumps(facts, indent=2, sort_keys=True))


def fresh_node(tmp_path: Path) -> tuple[Path, str]:
    """A node's cache root from an artifact baked where vLLM compiled ``BAKED_KEY``."""
    baked_on = tmp_path / "baked-on"
    fill(baked_on)
    vllm_compiled(baked_on, BAKED_KEY, "81b28e5a77", factors("/baked-on/xdg/vllm/xla_cache"))
    bake(baked_on, tmp_path / "art", profile="p", keys=keys())
    root = tmp_path / "node"
    record = restore(tmp_path / "art", root, keys(), ranks=(0, 1))
    assert record.state == "restored"
    time.sleep(0.01)  # this boot's files come after the restore's marker
    return root, record.artifact_id


def test_a_boot_that_loaded_the_baked_key_says_so(tmp_path):
    root, artifact_id = fresh_node(tmp_path)
    found = compile_key.after_restore(str(root), artifact_id)
    assert found.loaded and BAKED_KEY in found.held_keys and found.new_keys == ()
    assert found.resaved == () and found.differing is None
    said = found.say(artifact_id)
    assert said.endswith("it loaded its compiled graph from the caches")


def test_pieces_saved_under_another_config_hash_name_the_factor_that_moved_them(tmp_path):
    """Loading the baked AOT graph, the H200's warm boots saved vLLM's pieces again under a
    config-hash directory the baked boot did not use (2026-12-04): vLLM then loads them through
    Inductor's cache, which the GLM model's user-defined Triton kernel fails. The line names
    the factor, never its value."""
    root, artifact_id = fresh_node(tmp_path)
    part = root / "vllm/torch_compile_cache/7046b5c4a4/rank_0_0/backbone"
    part.mkdir(parents=True)
    moved = factors("/baked-on/xdg/vllm/xla_cache", code_hash="code-2")
    (part / "cache_key_factors.json").write_text(json.dumps(moved))
    found = compile_key.after_restore(str(root), artifact_id)
    assert found.loaded and found.new_keys == () and found.differing == ("code_hash",)
    said = found.say(artifact_id)
    assert "loaded its compiled graph" in said
    assert "differ from the baked boot's in code_hash" in said
    assert "code-2" not in said


def test_a_boot_that_saved_the_baked_aot_graph_again_says_it_traced_again(tmp_path):
    """vLLM 0.26 could not load the GLM model's AOT graph on a planned warm boot (a
    user-defined Triton kernel in it) and saved it again under the same key: no new key, but no
    load either (2026-12-04), with its pieces under another config hash."""
    root, artifact_id = fresh_node(tmp_path)
    graph = root / "vllm/torch_compile_cache/torch_aot_compile" / BAKED_KEY / "rank_0_0/model"
    graph.write_bytes(b"traced again")
    part = root / "vllm/torch_compile_cache/150303e038/rank_0_0/backbone"
    part.mkdir(parents=True)
    moved = factors("/baked-on/xdg/vllm/xla_cache", config_hash="cfg-2")
    (part / "cache_key_factors.json").write_text(json.dumps(moved))
    found = compile_key.after_restore(str(root), artifact_id)
    assert found.loaded and found.resaved == (BAKED_KEY,)
    said = found.say(artifact_id)
    assert "did not load its AOT graph" in said and BAKED_KEY[:12] in said
    assert "loaded its compiled graph" not in said and said.endswith("in config_hash")


def test_a_boot_that_compiled_again_names_the_factor_that_differs(tmp_path):
    root, artifact_id = fresh_node(tmp_path)
    vllm_compiled(root, OTHER_KEY, "b2919361d6", factors("/node/xdg/vllm/xla_cache"), seed=1)
    found = compile_key.after_restore(str(root), artifact_id)
    assert not found.loaded and found.new_keys == (OTHER_KEY,)
    assert found.differing == ("env VLLM_XLA_CACHE_PATH",)
    line = found.say(artifact_id)
    assert "compiled its graph on this boot" in line and "VLLM_XLA_CACHE_PATH" in line
    assert "/node/xdg" not in line  # names, never values: a variable may hold a secret


def test_another_config_is_named_as_the_config_hash(tmp_path):
    root, artifact_id = fresh_node(tmp_path)
    other = factors("/baked-on/xdg/vllm/xla_cache", config_hash="cfg-2")
    vllm_compiled(root, OTHER_KEY, "0a0b0c0d0e", other, seed=2)
    assert compile_key.after_restore(str(root), artifact_id).differing == ("config_hash",)


def test_no_factor_file_to_compare_is_said_as_such(tmp_path):
    root, artifact_id = fresh_node(tmp_path)
    vllm_compiled(root, OTHER_KEY, "b2919361d6", factors("/node"), seed=1)
    for path in root.rglob("cache_key_factors.json"):
        if "81b28e5a77" in str(path):
            path.unlink()
    found = compile_key.after_restore(str(root), artifact_id)
    assert found.differing is None and "no factor files to compare" in found.say(artifact_id)


def test_nothing_to_tell_without_the_restores_marker_or_vllms_cache(tmp_path):
    root, artifact_id = fresh_node(tmp_path)
    assert compile_key.after_restore(str(root), "0" * 16) is None
    os.rename(root / "vllm", tmp_path / "elsewhere")
    assert compile_key.after_restore(str(root), artifact_id) is None


def test_a_later_boot_that_loaded_what_an_earlier_one_compiled_is_not_taken_for_a_compile(
    tmp_path,
):
    root, artifact_id = fresh_node(tmp_path)
    vllm_compiled(root, OTHER_KEY, "b2919361d6", factors("/node"), seed=1)  # the first boot's
    time.sleep(0.01)
    started = time.time()  # the next launch writes its run file, then vLLM loads OTHER_KEY
    found = compile_key.after_restore(str(root), artifact_id, started)
    assert found.loaded and OTHER_KEY in found.held_keys
    assert compile_key.after_restore(str(root), artifact_id).new_keys == (OTHER_KEY,)


def test_the_worker_says_at_ready_which_factor_made_vllm_compile(tmp_path, caplog):
    from types import SimpleNamespace

    from launcher.runtime.worker import compiled

    root, artifact_id = fresh_node(tmp_path)
    record = restore(tmp_path / "art", root, keys(), ranks=(0, 1))  # found present: the same
    plan = tmp_path / "plan.json"
    plan.write_text("{}")  # the launch writes the run file, then vLLM starts and compiles
    time.sleep(0.01)
    vllm_compiled(root, OTHER_KEY, "b2919361d6", factors("/node/xdg/vllm/xla_cache"), seed=1)
    run = SimpleNamespace(  # RunPlan's fields the line reads
        file=SimpleNamespace(artifact=record), cache_root=str(root), written_at=plan.stat().st_mtime
    )
    with caplog.at_level(logging.INFO, logger="vllm.b12x_launch"):
        compiled.say_artifact_key(run, 0)
    assert record.state == "present" and record.artifact_id == artifact_id
    assert "compiled its graph on this boot from cache artifact" in caplog.text
    assert "env VLLM_XLA_CACHE_PATH" in caplog.text


def test_inductors_fx_graph_cache_counts_are_said_from_torchs_counters(monkeypatch):
    import collections
    import sys
    import types

    utils = types.ModuleType("torch._dynamo.utils")
    utils.counters = collections.defaultdict(collections.Counter)
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", utils)
    assert compile_key.inductor_cache_line() is None  # nothing looked up
    utils.counters["inductor"].update(fxgraph_cache_hit=12, fxgraph_cache_miss=1)
    said = compile_key.inductor_cache_line()
    assert said == "Inductor's FX graph cache on this boot: 12 hits, 1 miss, 0 bypasses"


def test_no_fx_graph_cache_line_before_torchs_compiler_is_imported(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    assert compile_key.inductor_cache_line() is None
