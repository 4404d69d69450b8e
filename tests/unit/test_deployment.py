"""The resolved deployment: each derived value decided once, with its reason, and what the
argv and the plan use is what it holds."""

from __future__ import annotations

import json
from pathlib import Path

from launcher import pipeline
from launcher.deployment import resolve
from launcher.profile import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def test_glm52_resolves_with_a_reason_for_each_value():
    d = resolve(load_profile(PROFILES / "glm52.yaml").profile)
    assert (d.block_size, d.why["block_size"]) == (64, "profile serving.block_size")
    assert d.decode_rows == (1, 4, 8, 16, 32)
    assert d.capture_sizes and d.why["capture_sizes"].startswith("auto")
    assert set(d.why) == {"runtime", "block_size", "capture_sizes", "decode_rows", "prewarm"}


def test_without_a_profile_block_the_backend_decides():
    d = resolve(load_profile(PROFILES / "glm52.yaml", ["~serving.block_size"]).profile)
    assert (d.block_size, d.why["block_size"]) == (64, "the sparse-MLA backend's block")


def test_overrides_change_the_decision_and_its_reason():
    loaded = load_profile(
        PROFILES / "glm52.yaml",
        ["serving.block_size=128", "serving.cudagraph_mode=NONE"],
    )
    d = resolve(loaded.profile)
    assert (d.block_size, d.why["block_size"]) == (128, "profile serving.block_size")
    assert d.capture_sizes == ()
    assert d.why["capture_sizes"].startswith("serving.cudagraph_mode NONE")


def test_the_argv_and_the_plan_use_what_the_deployment_holds():
    planned = pipeline.make_plan(load_profile(PROFILES / "glm52.yaml"))
    d = resolve(planned.loaded.profile)
    argv = planned.command.argv
    assert argv[argv.index("--block-size") + 1] == str(d.block_size)
    compilation = json.loads(argv[argv.index("--compilation-config") + 1])
    assert compilation["cudagraph_capture_sizes"] == list(d.capture_sizes)
    assert planned.plan.kv.layout.block_tokens == d.block_size
    assert planned.plan.kv.runtime == d.runtime.name


def test_the_prewarm_list_appends_the_providers_that_always_run():
    d = resolve(load_profile(PROFILES / "glm52.yaml", ["prewarm.providers=[triton]"]).profile)
    assert d.prewarm == ("triton", "census")
    off = resolve(load_profile(PROFILES / "glm52.yaml", ["prewarm.enabled=false"]).profile)
    assert off.prewarm == () and off.why["prewarm"].startswith("prewarm off")
