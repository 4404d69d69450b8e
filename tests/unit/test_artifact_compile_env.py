"""The variables of vLLM's compile key that follow the node, against the factor files the
caches hold. That ``config_root`` resolves as vLLM's own getter does, over the space of
``HOME``, ``XDG_CONFIG_HOME`` and ``VLLM_CONFIG_ROOT``: tests/integration/test_compile_key.py."""

from __future__ import annotations

import json

from launcher.artifact import compile_env

FACTORS = "vllm/torch_compile_cache/{}/rank_0_0/backbone/cache_key_factors.json"


def factors(root, key: str, env) -> None:
    path = root / FACTORS.format(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"env": env, "config_hash": "c"}))


def test_caches_without_factor_files_say_nothing(tmp_path):
    assert compile_env.differing(tmp_path, {"HOME": "/root"}) == []


def test_a_value_any_compile_hashed_matches(tmp_path):
    factors(tmp_path, "a1", {"VLLM_CONFIG_ROOT": "/home/a/.config/vllm"})
    factors(tmp_path, "b2", {"VLLM_CONFIG_ROOT": "/root/.config/vllm"})
    assert compile_env.differing(tmp_path, {"HOME": "/root"}) == []


def test_another_value_is_named_with_both_paths_and_the_fix(tmp_path):
    factors(tmp_path, "a1", {"VLLM_CONFIG_ROOT": "/home/a/.config/vllm"})
    (line,) = compile_env.differing(tmp_path, {"HOME": "/root", "XDG_CONFIG_HOME": "/etc/xdg"})
    assert "VLLM_CONFIG_ROOT is /etc/xdg/vllm here and was /home/a/.config/vllm there" in line
    assert "set VLLM_CONFIG_ROOT=/home/a/.config/vllm" in line


def test_unreadable_or_foreign_factor_files_are_passed_over(tmp_path):
    factors(tmp_path, "a1", {"VLLM_CONFIG_ROOT": 3})
    broken = tmp_path / FACTORS.format("b2")
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    other = tmp_path / FACTORS.format("c3")
    other.parent.mkdir(parents=True)
    other.write_text("[]")
    assert compile_env.differing(tmp_path, {"HOME": "/root"}) == []
