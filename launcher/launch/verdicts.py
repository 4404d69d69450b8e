"""The installed vLLM's verdicts on a plan and its command, remembered beside its records.

Before the exec the launch checks the plan against the installed vLLM: what its attention
backend's impl class declares (``can_serve.on_installed``, under DCP) and the command through
vLLM's own parser, with ``vllm.extra_args`` read by its option table (``preflight.check_argv``),
so that what vLLM rejects is an error on its profile key. Each imports vLLM and torch with it
(8.6-13 s on the CPU machine; on the H200 the launch took 18-24 s to its plan file with the
command's verdict remembered and the impl still imported: docs/changelog.md, 2026-12-04), and
vLLM's own processes import them again. What the same install accepted once it accepts again,
so the launch remembers a passed check in the plan's calibration folder
(``calibration/<fingerprint>/vllm-verdicts.json``, ``launcher.contract.verdicts``), which
``bake`` carries to a fresh node.

A key is what was checked (the command, its port, host and planned memory figures left out, as
any value of theirs parses alike, and ``--force``; or the plan's fingerprint, the installed
line and what the check read of the model and the card) and the install, read without
importing it: the vLLM distribution's version, the contents of the files that define its
options (the server's and the engine's argument modules, its config classes, its quantization
registry) and its attention backends, every installed ``vllm.*`` entry point (plugins may add
choices) and ``VLLM_PLUGINS``. A key this misses costs only the friendly error: vLLM checks
again itself and stops on what it rejects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from launcher.contract.base import ContractError, read_model
from launcher.contract.verdicts import FILE, KEPT, VERDICTS_MAX, Verdicts
from launcher.owned import Refused
from launcher.owned import write as owned_write
from launcher.vllm.can_serve import IMPL_DIRS, installed_vllm_version, vllm_root
from launcher.vllm.options import PARSER_DIRS, PARSER_FILES


def installed_vllm(root: Path | None) -> list | None:
    """What the checks read of the vLLM package at ``root`` (its version, the sources of its
    parser and attention backends, its plugins), read without importing it; None when there is
    none."""
    if root is None or not root.is_dir():
        return None
    files = [root / f for f in PARSER_FILES if (root / f).is_file()]
    files += sorted(p for d in PARSER_DIRS for p in (root / d).glob("*.py"))
    files += sorted(p for d in IMPL_DIRS for p in (root / d).rglob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    eps = metadata.entry_points()
    plugins = sorted(
        f"{ep.group} {ep.name} {ep.value}"
        for group in eps.groups
        if group.startswith("vllm.")
        for ep in eps.select(group=group)
    )
    version = installed_vllm_version()
    return [version, digest.hexdigest(), plugins, os.environ.get("VLLM_PLUGINS")]


PER_BOOT = {
    "--host": ("HOST", r".+"),
    "--port": ("PORT", r"\d+"),
    "--gpu-memory-utilization": ("FRACTION", r"\d+(\.\d+)?"),
    "--kv-cache-memory-bytes": ("BYTES", r"\d+"),
}
"""Flags whose value changes from boot to boot or node to node and parses the same whatever
it is, as long as it has the shape given (vLLM's parser checks the type, never the range): a
host name is any string, a port any integer, and the plan's memory figures are calibrated
between boots (a fresh node plans from the baked node's records, not from its first boot)."""


def stable(flags: list[str]) -> list[str]:
    """``flags`` with the values of ``PER_BOOT`` flags that have their shape replaced by the
    flags' placeholders."""
    out = list(flags)
    for i in range(1, len(out)):
        name, shape = PER_BOOT.get(flags[i - 1], ("", ""))
        if shape and re.fullmatch(shape, flags[i]):
            out[i] = name
    return out


def key(flags: list[str], extra_args: list[str], force: bool) -> str | None:
    """The key of a parser verdict on ``flags`` (and the profile's ``extra_args``); None when
    the installed vLLM cannot be read (the check then runs)."""
    return _key([stable(flags), extra_args, force])


def plan_key(line: str, fingerprint: str, target: object) -> str | None:
    """The key of the installed vLLM's verdict on the plan itself (``can_serve.on_installed``:
    the line ``line`` the probe found, the plan's ``fingerprint``, what it read of the model
    and the card, ``target``); None when the installed vLLM cannot be read."""
    return _key(["plan", line, fingerprint, repr(target)])


def _key(what: list) -> str | None:
    try:
        vllm = installed_vllm(vllm_root())
    except (OSError, ImportError, ValueError):  # an install find_spec or a read trips on
        return None
    if vllm is None:
        return None
    text = json.dumps([vllm, *what], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _warn(line: str) -> None:
    print(f"b12x-launch: warning: {line}", file=sys.stderr)


def _keys(folder: Path, warn: Callable[[str], None] = _warn) -> list[str]:
    """The accepted keys in ``folder``; none (said, naming the file) when its verdicts file is
    damaged, of another layout or not a regular file: the checks then run again and rewrite
    it. On the shared volume: bounded, a regular file, not a link (``contract.base``)."""
    path = folder / FILE
    if not os.path.lexists(path):
        return []
    try:
        return read_model(path, Verdicts, "verdicts file", limit=VERDICTS_MAX).keys
    except ContractError as exc:
        warn(f"{exc}; the installed vLLM checks the plan again")
        return []


def unless_passed(folder: Path, k: str | None, check: Callable[[], None]) -> None:
    """Run ``check`` unless the verdict ``k`` is remembered in ``folder``; remember ``k`` when
    it passes (raises nothing). ``k`` None: always run, remember nothing."""
    if k is not None and k in _keys(folder):
        return
    check()
    if k is not None:
        remember(folder, k)


def remember(folder: Path, k: str) -> None:
    """Adds ``k`` to the folder's accepted keys (written atomically; a folder that cannot be
    written leaves the next launch to check again)."""
    keys = [*[x for x in _keys(folder, lambda line: None) if x != k], k][-KEPT:]
    cache_root = folder.parents[1]  # <cache_root>/calibration/<fingerprint>
    with contextlib.suppress(OSError, Refused):  # nothing written through a link below it
        owned_write.write_json(folder / FILE, Verdicts(keys=keys).to_json(), root=cache_root)
