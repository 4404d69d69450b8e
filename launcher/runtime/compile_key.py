"""Whether vLLM found its compiled graph in a restored cache artifact, and if not, why.

vLLM keeps its AOT-compiled model under ``<VLLM_CACHE_ROOT>/torch_compile_cache/
torch_aot_compile/<key>/`` (the Inductor cache it uses lives there too), the key a hash of its
config and of every ``VLLM_*`` variable. A key the artifact did not hold means vLLM compiled its
graph on a boot the run file calls warm. Beside each compile vLLM writes the factors of its key
(``<hash>/rank_*/<part>/cache_key_factors.json``: the raw variables and the config, code and
compiler hashes); comparing this boot's with the baked boot's names what differs (2026-12-03:
``VLLM_XLA_CACHE_PATH``, which followed the cache root).

What is this boot's and what came with the artifact is told by time: the restore's marker
(``<cache_root>/.blaunch-artifacts/<id>.json``) is written when the restore ends, before vLLM
starts, and every restored file is older than it; this boot's files are newer than its run file
(written by the launch, after the restore), so a later boot of a node that once compiled is not
taken for one that compiled now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from launcher.contract.artifact import marker_path
from launcher.vllm.compile_cache import TORCH_COMPILE, factor_files

AOT = "torch_aot_compile"
HASHES = ("config_hash", "code_hash", "compiler_hash")


@dataclass(frozen=True)
class KeyCheck:
    """vLLM's compile keys on a boot from an artifact."""

    new_keys: tuple[str, ...]
    """AOT keys written after this boot started (and after the restore): graphs vLLM compiled
    on this boot."""
    held_keys: tuple[str, ...]
    """AOT keys the restore brought (or an earlier boot left)."""
    differing: tuple[str, ...] | None
    """The factors of the keys this boot wrote (an AOT key, or the config-hash directory of
    vLLM's compiled pieces) that differ from the nearest restored one's (``env X``,
    ``config_hash``, ...); () when they are the same, None when there was no pair of factor
    files to compare."""
    resaved: tuple[str, ...] = ()
    """Held keys whose AOT graph (``rank_*/model``) this boot wrote again: vLLM could not load
    it, traced the model again and took the compiled graph from Inductor's cache under the same
    key. On the H200 every warm boot of the GLM model did, plain vLLM's too ("Kernel index N
    not found in id_to_kernel": its DSA indexer is a user-defined Triton kernel): it looked for
    vLLM's pieces under another config-hash directory than the cold boot's, named from fewer
    source files, and compiled them through Inductor (``runtime.compile_dir``, which links a
    cold boot's pieces there)."""

    @property
    def loaded(self) -> bool:
        return not self.new_keys and bool(self.held_keys)

    def say(self, artifact_id: str) -> str:
        if self.loaded and self.resaved:
            keys = ", ".join(k[:12] for k in self.resaved)
            return (
                f"vLLM made no new torch.compile key on this boot from cache artifact "
                f"{artifact_id}, but did not load its AOT graph {keys}: it traced the model "
                "again and saved the graph anew, compiled from the caches (vLLM's log: "
                "'Compiling model again due to a load failure')" + self._pieces()
            )
        if self.loaded:
            return (
                f"vLLM made no new torch.compile key on this boot from cache artifact "
                f"{artifact_id}: it loaded its compiled graph from the caches" + self._pieces()
            )
        if not self.new_keys:
            return f"no AOT-compiled graph of vLLM's under the cache root (artifact {artifact_id})"
        keys = ", ".join(k[:12] for k in self.new_keys)
        why = (
            "no factor files to compare"
            if self.differing is None
            else "its factors differ from the baked boot's in " + ", ".join(self.differing)
            if self.differing
            else "its recorded factors are the baked boot's"
        )
        return (
            f"vLLM compiled its graph on this boot from cache artifact {artifact_id}: its "
            f"torch.compile key {keys} was not in the caches ({why}); see docs/operations.md, "
            "'Where the cache root lies'"
        )

    def _pieces(self) -> str:
        """The config-hash directory this boot saved vLLM's pieces under, when its factors are
        not the baked boot's: vLLM then loads the pieces through Inductor's cache, not its own."""
        if not self.differing:
            return ""
        return (
            "; it saved its compiled pieces under a cache key whose factors differ from the "
            f"baked boot's in {', '.join(self.differing)}"
        )


def after_restore(cache_root: str, artifact_id: str, started: float = 0.0) -> KeyCheck | None:
    """vLLM's keys under the profile's ``cache_root`` against the restore of ``artifact_id``
    into it, for a boot that started at ``started`` (its run file's time)."""
    root = Path(os.path.expanduser(cache_root))
    return check(root, marker_path(root, artifact_id), started)


def check(cache_root: Path, marker: Path, started: float = 0.0) -> KeyCheck | None:
    """vLLM's keys under ``cache_root`` against the restore that wrote ``marker``; None when
    the marker or vLLM's compile cache is not there (nothing to tell)."""
    try:
        restored_at = marker.stat().st_mtime
    except OSError:
        return None
    now = max(restored_at, started)  # what is newer was written by this boot
    root = cache_root / TORCH_COMPILE
    aot = root / AOT
    if not aot.is_dir():
        return None
    new, held, resaved = [], [], []
    for key in sorted(p for p in aot.iterdir() if p.is_dir()):
        oldest = min((f.stat().st_mtime for f in key.rglob("*") if f.is_file()), default=None)
        if oldest is None:
            continue
        (held if oldest <= now else new).append(key.name)
        if oldest <= now and any(g.stat().st_mtime > now for g in key.glob("rank_*/model")):
            resaved.append(key.name)
    differing = _differing(cache_root, restored_at, now)
    return KeyCheck(tuple(new), tuple(held), differing, tuple(resaved))


def _differing(cache_root: Path, restored_at: float, now: float) -> tuple[str, ...] | None:
    mine, theirs = [], []
    for path, factors in factor_files(cache_root):
        written = path.stat().st_mtime
        if written <= restored_at:
            theirs.append(factors)  # the artifact's
        elif written > now:
            mine.append(factors)
    if not mine or not theirs:
        return None
    names: set[str] = set()
    for ours in mine:  # one per compiled part (the backbone, an MTP head): each to its nearest
        names.update(min((diff(ours, t) for t in theirs), key=len))
    return tuple(sorted(names))


def diff(ours: dict, theirs: dict) -> tuple[str, ...]:
    """The names of the factors that differ (never their values: a variable may hold a
    secret)."""
    env_ours, env_theirs = ours.get("env") or {}, theirs.get("env") or {}
    names = sorted(
        f"env {k}" for k in set(env_ours) | set(env_theirs) if env_ours.get(k) != env_theirs.get(k)
    )
    return (*names, *(h for h in HASHES if ours.get(h) != theirs.get(h)))


FX_COUNTERS = {"hit": "hits", "miss": "misses", "bypass": "bypasses"}
"""torch's ``fxgraph_cache_<name>`` counters, and their plurals."""


def inductor_cache_line() -> str | None:
    """What Inductor's FX graph cache did in this process so far (torch's own counters), as
    ``FX graph cache: 12 hits, 1 miss``; None before torch's compiler was imported or when
    nothing was looked up. A miss on a warm boot is a graph Inductor compiled again, its
    kernels from Triton's cache or compiled anew."""
    import sys

    counters = getattr(sys.modules.get("torch._dynamo.utils"), "counters", None)
    if counters is None:
        return None
    inductor = counters.get("inductor", {})
    counts = {c: int(inductor.get(f"fxgraph_cache_{c}", 0)) for c in FX_COUNTERS}
    if not any(counts.values()):
        return None
    said = ", ".join(f"{n} {c if n == 1 else FX_COUNTERS[c]}" for c, n in counts.items())
    return f"Inductor's FX graph cache on this boot: {said}"
