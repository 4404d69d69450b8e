"""vLLM's compiled pieces, put where a warm boot looks for them.

vLLM (0.26) keeps the Inductor pieces of its compiled model under
``<VLLM_CACHE_ROOT>/torch_compile_cache/<dir>/rank_<r>_<dp>/<part>/``, ``<dir>`` a hash of
four factors: vLLM's variables, its config, its compiler and the source of the files Dynamo
traced. The first backend call of a process names it, for every part. A cold boot hashes the
files Dynamo *tried* to inline; a warm boot, loading the AOT graph, hashes the files torch
*kept* in it (``source_info``), and torch keeps only the inlines that succeeded. When one
failed (the GLM model: ``transformers``' ``PretrainedConfig`` attribute lookup), the warm boot
looks under another directory, finds no pieces, compiles them through Inductor and, for the
GLM model, cannot (its DSA kernel is not in Inductor's kernel table) and traces the model
again. On the H200 every warm boot of the GLM model did, plain vLLM's included (2026-12-04:
boot 1 ``ba8db70dda`` over 30 files, boot 2 ``150303e038`` over 29, the same config, compiler
and variables).

So once a boot has compiled (before the watchdog's baseline of the caches), the planned worker
computes the directory a warm boot will name, from the torch-kept files of the part that named
this boot's, and links this boot's pieces there: a bake after boot 1 carries both. Two checks
first, or nothing is linked: the factor file vLLM wrote must hash to its own directory's name,
and this boot's traced files to the factor file's code hash (another vLLM's formula fails
them). And a piece's file is looked up beside its index, by its key, when the absolute path
vLLM 0.26 recorded lies elsewhere (``install``; vLLM 0.32 does so itself): the index names the
baked node's cache root, which a fresh node's may not be.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher import atomic
from launcher.owned import Refused
from launcher.owned import paths as owned_paths
from launcher.owned import read as owned_read
from launcher.owned import write as owned_write
from launcher.runtime.prewarm import runtime_function
from launcher.vllm.compile_cache import FACTORS, FACTORS_MAX
from launcher.vllm.internals import by_name, holder_path, read_on
from launcher.vllm.releases import fits

INDEX = "vllm_compile_cache.py"
BACKEND = holder_path("compile.backend_call")
ADAPTOR = holder_path("compile.adaptor_load")


@dataclass(frozen=True)
class Naming:
    """The backend call that named this process's directory: its part and traced files."""

    part: str
    files: tuple[str, ...]
    local_dir: Path
    """``<dir>/rank_<r>_<dp>/<part>``, as vLLM set it for that call."""
    given: bool = False
    """The directory was set (``compilation_config.cache_dir``): every boot uses it as is."""


_naming: list[Naming] = []


def env_hash(env: dict[str, Any]) -> str:
    """vLLM's ``hash_factors`` of its variables."""
    return hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()


def code_hash(files: Iterable[str]) -> str:
    """The source hash vLLM's backend takes of the traced files: each path and its text, in
    order; a generated function's ``<string>`` left out, an unreadable file by its path."""
    content: list[str] = []
    for path in sorted(set(files)):
        if path == "<string>":
            continue
        content.append(path)
        try:
            with open(path) as f:
                content.append(f.read())
        except (OSError, UnicodeDecodeError):
            continue
    return hashlib.sha256("\n".join(content).encode()).hexdigest()


def dir_name(factors: dict[str, Any], code: str | None = None) -> str:
    """The directory vLLM names from ``factors`` (a ``cache_key_factors.json``), with another
    code hash if given."""
    keys = [
        env_hash(factors["env"]),
        factors["config_hash"],
        code if code is not None else factors["code_hash"],
        factors["compiler_hash"],
    ]
    return hashlib.sha256(str(keys).encode()).hexdigest()[:10]


def kept_files(source_info: Any) -> set[str]:
    """The files a warm boot hashes: those of the modules torch kept in the AOT graph,
    resolved as vLLM resolves them when it checks the graph's source."""
    files = set()
    for source in source_info.inlined_sources:
        files.add(inspect.getfile(sys.modules[source.module]))
    return files


@dataclass(frozen=True)
class Linked:
    """What ``link_for_warm_boots`` did."""

    cold: str
    warm: str
    files: int
    left_out: tuple[str, ...]
    """Files of the cold boot's list that torch did not keep (why the names differ)."""

    def say(self) -> str:
        if self.warm == self.cold:
            return f"vLLM's compiled pieces are under {self.cold}, where a warm boot looks"
        dropped = ", ".join(_short(f) for f in self.left_out[:3]) or "none"
        return (
            f"a warm boot looks for vLLM's compiled pieces under {self.warm}, not {self.cold} "
            f"(torch kept {dropped} out of its AOT graph's files): {self.files} files linked there"
        )


@dataclass(frozen=True)
class Unneeded:
    """Nothing to link, and nothing wrong: why."""

    why: str

    def say(self) -> str:
        return self.why


def _short(path: str) -> str:
    parts = Path(path).parts
    return "/".join(parts[-2:])


def link_for_warm_boots(part_files: dict[str, set[str]]) -> Linked | Unneeded | str:
    """Link this process's pieces under the directory a warm boot names.

    ``part_files``: the files torch kept in each part's AOT graph compiled on this boot. A
    string says why nothing was linked where a link was due."""
    if not _naming:
        return "no backend call of vLLM's was seen naming its directory"
    naming = _naming[0]
    rank_dir = naming.local_dir.parent
    cache_dir = rank_dir.parent
    if naming.given:
        return Linked(cache_dir.name, cache_dir.name, 0, ())
    if naming.part not in part_files:
        return f"the part that named the directory ({naming.part}) has no AOT graph of this boot"
    if not (naming.local_dir / INDEX).is_file():  # vLLM 0.32 on torch 2.12: the mega artifact
        return Unneeded(
            f"no index of vLLM's compiled pieces under {cache_dir.name}: they live in its AOT "
            "artifact (VLLM_USE_MEGA_AOT_ARTIFACT), which a warm boot loads whole"
        )
    factors_path = naming.local_dir / FACTORS
    try:
        factors = owned_read.read_json(factors_path, FACTORS_MAX, "vLLM factor file")
        named = dir_name(factors)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{factors_path} unread: {exc}"
    if named != cache_dir.name:
        return (
            f"vLLM names its directories otherwise ({named} from {factors_path}, "
            f"not {cache_dir.name})"
        )
    if code_hash(naming.files) != factors["code_hash"]:
        return "vLLM hashes its traced files otherwise than this launcher knows"
    kept = part_files[naming.part]
    warm_code = code_hash(kept)
    warm = dir_name(factors, warm_code)
    left_out = tuple(sorted(set(naming.files) - kept))
    if warm == cache_dir.name:
        return Linked(cache_dir.name, warm, 0, left_out)
    n = _link_tree(
        rank_dir, cache_dir.parent / warm / rank_dir.name, Path(naming.part) / FACTORS, warm_code
    )
    return Linked(cache_dir.name, warm, n, left_out)


def _link_tree(src: Path, dest: Path, naming_factors: Path, warm_code: str) -> int:
    """Every file of ``src`` at ``dest`` (none replaced): pieces hard-linked, indexes and factor
    files copied (vLLM rewrites an index whole), the naming part's factor file with the code
    hash its new directory is named by."""
    linked = 0
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src)
        target = dest / rel
        if os.path.lexists(target):
            continue
        try:  # below the cache root nothing is followed through a link (launcher.owned)
            dest.mkdir(parents=True, exist_ok=True)
            if rel.parent != Path("."):
                owned_paths.makedirs(dest, rel.parent.as_posix())
        except Refused:
            continue
        if rel == naming_factors:
            factors = owned_read.read_json(path, FACTORS_MAX, "vLLM factor file")
            factors["code_hash"] = warm_code
            atomic.write_text(target, json.dumps(factors, indent=2, sort_keys=True))
        elif path.name in (INDEX, FACTORS):
            atomic.write_bytes(target, path.read_bytes())
        else:
            owned_write.place(path, target)
        linked += 1
    return linked


def beside(cache_dir: str, handle: Any) -> Any:
    """A piece's ``(key, path)`` handle with the path of the key's file beside the index when
    there is one: vLLM 0.26 loads the absolute path it recorded, the baked node's; later vLLMs
    load ``<index dir>/<key>`` themselves (0.32 does)."""
    if not (isinstance(handle, tuple) and len(handle) == 2 and isinstance(handle[1], str)):
        return handle
    local = os.path.join(cache_dir, str(handle[0]))
    if local != handle[1] and os.path.isfile(local):
        return (handle[0], local)
    return handle


def install() -> list[str]:
    """Wrap vLLM's backend call (record the call that names the directory) and its piece
    loader (``beside``); what was wrapped. Nothing when vLLM lacks either (another version)."""
    wrapped = []
    backend = runtime_function(BACKEND)
    if (
        backend is not None
        and not getattr(backend.__call__, "_blaunch", False)
        and fits(by_name("compile.backend_call"), backend.__call__)  # else: the check said it
    ):
        original_call = backend.__call__

        # wraps: the original stays reachable (inspect.unwrap), so a check of vLLM's
        # signatures after the patch still reads vLLM's, not this wrapper's
        @functools.wraps(original_call)
        def __call__(self: Any, graph: Any, example_inputs: Any) -> Any:
            config = getattr(self, "compilation_config", None)
            first = config is not None and not _naming
            if first:
                files, given = tuple(sorted(config.traced_files)), bool(config.cache_dir)
            try:
                return original_call(self, graph, example_inputs)  # names and sets the dirs
            finally:  # a call that failed (a warm boot's load) still named the directory
                if first and config.local_cache_dir:
                    local = Path(config.local_cache_dir)
                    _naming.append(Naming(str(self.prefix), files, local, given))

        __call__._blaunch = True  # type: ignore[attr-defined]
        backend.__call__ = __call__
        wrapped.append("VllmBackend.__call__")
    adaptor = runtime_function(ADAPTOR)
    if (
        adaptor is not None
        and not getattr(adaptor.load, "_blaunch", False)
        and fits(by_name("compile.adaptor_load"), adaptor.load)
    ):
        original_load = adaptor.load

        @functools.wraps(original_load)
        def load(self: Any, handle: Any, *args: Any, **kwargs: Any) -> Any:
            return original_load(self, beside(self.cache_dir, handle), *args, **kwargs)

        load._blaunch = True  # type: ignore[attr-defined]
        adaptor.load = load
        wrapped.append("InductorStandaloneAdaptor.load")
    return wrapped


def compiled_parts(*models: Any) -> dict[str, set[str]]:
    """Each part vLLM AOT-compiled on this boot (not loaded from disk) in ``models``, with the
    files torch kept in its graph."""
    parts: dict[str, set[str]] = {}
    for model in models:
        if hasattr(model, "unwrap"):  # vLLM's CUDA graph wrappers around a model
            model = model.unwrap()
        if model is None or not hasattr(model, "modules"):
            continue
        for module in model.modules():
            fn = read_on("compile.aot_compiled_fn", module)  # None: not a compiled part
            if fn is None or read_on("compile.was_aot_compile_fn_loaded_from_disk", module, True):
                continue
            artifacts = getattr(fn, "_artifacts", None)
            part = read_on("compile.piece_prefix", getattr(artifacts, "compiled_fn", None))
            if part is None:
                continue
            parts[str(part)] = kept_files(fn.source_info())
    return parts
