"""Before vLLM starts: the variables of vLLM's ``torch.compile`` key whose defaults follow the
node, against the values the baked boot hashed.

vLLM (0.26) hashes the value of every variable of its own into that key
(``vllm.envs.compile_factors``) and writes them beside each compile, under ``env``
(``launcher.vllm.compile_cache.factor_files`` reads them). The launch pins the one that followed the
cache root (``vllm_args.COMPILE_KEY_ENV``); ``VLLM_CONFIG_ROOT`` still follows the user's home,
so a node started under another home than the baking node's compiles vLLM's graphs again
(minutes), found only at ready by ``runtime.compile_key``. Said here before any weight loads,
with the value to set. The value is a directory under a home, printed (the key's other
variables are never printed: one may hold a secret). The launch does not set it itself: vLLM
reads the user's opt-out of usage statistics there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from launcher.vllm.compile_cache import factor_files


def config_root(env: Mapping[str, str]) -> str:
    """``VLLM_CONFIG_ROOT`` as vLLM 0.26 resolves it under ``env``: the variable, else
    ``$XDG_CONFIG_HOME/vllm``, else ``~/.config/vllm``; ``~`` expanded as ``os.path.expanduser``
    does, from ``env``'s ``HOME``."""
    default = os.path.join(
        env.get("XDG_CONFIG_HOME", os.path.join(_expand("~", env), ".config")), "vllm"
    )
    return _expand(env.get("VLLM_CONFIG_ROOT", default), env)


def _expand(path: str, env: Mapping[str, str]) -> str:
    """``os.path.expanduser`` with ``env`` in place of the process's environment."""
    if path != "~" and not path.startswith("~/"):
        return os.path.expanduser(path) if path.startswith("~") else path  # ~user: the passwd
    if "HOME" in env:
        home = env["HOME"]
    else:
        import pwd

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return path
    return (home.rstrip("/") + path[1:]) or "/"


FOLLOW_THE_NODE = {"VLLM_CONFIG_ROOT": config_root}
"""vLLM variables in its compile key whose default follows the node, and how to resolve each."""


def baked_values(cache_root: Path) -> dict[str, set[str]]:
    """Each ``FOLLOW_THE_NODE`` variable's values in vLLM's factor files under ``cache_root``
    (the artifact's, and an earlier boot's on this node)."""
    out: dict[str, set[str]] = {name: set() for name in FOLLOW_THE_NODE}
    for _, factors in factor_files(cache_root):
        env = factors.get("env")
        for name in FOLLOW_THE_NODE:
            if isinstance(env, dict) and isinstance(env.get(name), str):
                out[name].add(env[name])
    return out


def differing(cache_root: Path, env: Mapping[str, str]) -> list[str]:
    """One line per ``FOLLOW_THE_NODE`` variable whose value under ``env`` (the launch's
    environment) is none of those the caches' compiles hashed; empty when the caches hold no
    factor file or every value matches."""
    lines = []
    for name, values in baked_values(cache_root).items():
        here = FOLLOW_THE_NODE[name](env)
        if values and here not in values:
            baked = sorted(values)[0]
            lines.append(
                f"vLLM's torch.compile key will differ from the baked boot's: {name} is "
                f"{here} here and was {baked} there (it follows HOME or XDG_CONFIG_HOME when "
                f"unset), so vLLM compiles its graphs again on this boot; set {name}={baked} "
                f"(profile key env) to load them"
            )
    return lines
