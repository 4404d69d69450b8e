"""A restored cache that ninja reads: FlashInfer's JIT runs ninja on every load, so a fresh
node is warm only if ninja finds nothing to do in what the artifact restored. Real ninja over
a build laid out as FlashInfer 0.6 lays its workspace out (``generated/`` sources beside
``cached_ops/<module>/`` objects, a ``build.ninja`` naming absolute paths), baked and restored
with the launcher's own bake and restore. On the H100 (2026-12-06) a fresh node rebuilt
FlashInfer's sampling module in 93-119 s: the restore had stamped every file with its own
time, in path order, so the sources read newer than the objects built from them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from launcher.artifact.bake import bake
from launcher.artifact.restore import restore
from tests.unit.artifact_caches import fill, keys

WORKSPACE = "flashinfer/.cache/flashinfer/0.6.14/90a"


def _ninja() -> str:
    """The test extras' ninja (``pip install ninja``), else one on PATH: a tier asked for
    fails without it rather than skip."""
    here = Path(sys.executable).with_name("ninja")
    found = str(here) if here.is_file() else shutil.which("ninja")
    assert found, "ninja is missing: install the test extras (pip install -e '.[test]')"
    return found


def _write_if_different(path: Path, text: str) -> None:
    """What FlashInfer does with its sources and build file: rewritten only when changed."""
    if not (path.is_file() and path.read_text() == text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _module(root: Path) -> Path:
    """Lay out a JIT module under ``root`` as FlashInfer would; its build directory."""
    ws = root / WORKSPACE
    gen, ops = ws / "generated", ws / "cached_ops" / "sampling"
    _write_if_different(gen / "sampling.cu", "// sampling kernels\n")
    _write_if_different(gen / "sampling_config.inc", "// the module's config\n")
    _write_if_different(
        ops / "build.ninja",
        "ninja_required_version = 1.3\n"
        "rule compile\n  command = cat $in > $out\n"
        "rule link\n  command = cp $in $out\n"
        f"build {ops}/sampling.cuda.o: compile {gen}/sampling.cu | {gen}/sampling_config.inc\n"
        f"build {ops}/sampling.so: link {ops}/sampling.cuda.o\n",
    )
    return ops


def _ninja_plan(ops: Path) -> str:
    """What ninja would do in the module's build directory (a dry run, with its reasons)."""
    done = subprocess.run(
        [_ninja(), "-C", str(ops), "-n", "-d", "explain"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def _built_and_baked(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    fill(root)  # the rest of a boot's caches, and the plan's records
    ops = _module(root)
    subprocess.run([_ninja(), "-C", str(ops)], check=True, capture_output=True)
    assert "no work to do" in _ninja_plan(ops)
    bake(root, tmp_path / "art", profile="p", keys=keys())
    return root


def test_a_module_restored_under_the_same_cache_root_is_not_built_again(tmp_path):
    root = _built_and_baked(tmp_path)
    shutil.rmtree(root)  # a fresh node: the same profile, so the same cache root, empty
    restore(tmp_path / "art", root, keys(), ranks=[0, 1])
    assert "no work to do" in _ninja_plan(_module(root))


def test_stamped_with_the_restores_own_time_the_module_is_built_again(tmp_path):
    """What the restore did before it kept the times: the same files, each written in path
    order with the time of its writing."""
    root = _built_and_baked(tmp_path)
    shutil.rmtree(root)
    restore(tmp_path / "art", root, keys(), ranks=[0, 1])
    files = sorted(p for p in (root / WORKSPACE).rglob("*") if p.is_file())
    now = 2_000_000_000 * 10**9
    for i, p in enumerate(files):
        os.utime(p, ns=(now + i, now + i))
    plan = _ninja_plan(_module(root))
    assert "no work to do" not in plan and "older than most recent input" in plan, plan


def test_under_another_cache_root_the_module_is_built_again(tmp_path):
    """FlashInfer's build file names its workspace by absolute path: every node of a
    deployment takes the profile's one cache root (docs/operations.md, "Baking")."""
    _built_and_baked(tmp_path)
    other = tmp_path / "elsewhere"
    restore(tmp_path / "art", other, keys(), ranks=[0, 1])
    assert "no work to do" not in _ninja_plan(_module(other))
