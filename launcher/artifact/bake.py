"""``b12x-launch bake PROFILE OUT``: a deployment's compiled caches and records as one artifact.

What goes in is what this deployment's boot left under its own ``runtime.cache_root`` (in the
container ``/cache/<build id>``, which holds this image build's objects only):

- the JIT caches the launcher points vLLM's workers at (``contract.caches.CACHE_DIRS``):
  Triton, Inductor, vLLM's root (its ``torch.compile``/AOT cache and DeepGEMM's, which vLLM
  keeps under it), CuTe DSL, b12x, FlashInfer, and the XDG cache the rest falls back to;
- the calibration store's directory for this plan's fingerprint only
  (``calibration/<fingerprint>/``: the ranks' measurement records with their census, and
  ``qualified.json``), not other plans' records.

Left out: run directories, the Hub header cache, other plans' records, models and tokenizers
downloaded under the XDG cache (``xdg/huggingface``), and what no finished compile leaves:
lock files, temporary files, Triton's ``tmp.pid_*`` directories, ``__pycache__``, the
launcher's own probes and markers. A symbolic link or special file is left out with a note.

A host's ``runtime.cache_root`` is shared by every profile that points at it: there the JIT
caches hold other deployments' kernels too. Give a deployment its own cache root (as the
container does per build) to bake only its own.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from launcher.artifact import ArtifactError, is_tar
from launcher.artifact.archive import (
    Mismatch,
    SameAs,
    dir_listing,
    hash_file,
    open_artifact,
    write_dir,
    write_tar,
)
from launcher.artifact.manifest import (
    CALIBRATION,
    ArtifactKeys,
    Calibration,
    FileEntry,
    Manifest,
    make_manifest,
)
from launcher.contract import census
from launcher.contract.base import ContractError
from launcher.contract.caches import CACHE_DIRS
from launcher.contract.record import read_record
from launcher.owned import Refused
from launcher.owned import paths as owned_paths
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write

SKIP_SUFFIXES = (".lock", ".tmp", ".partial")
SKIP_PREFIXES = (".writable.", ".blaunch-", "tmp.pid_")
"""The launcher's probes and markers, and Triton's directories of a compile in progress."""
SKIP_DIRS = ("__pycache__",)
SKIP_PATHS = ("xdg/huggingface",)
"""Downloads, not compiles: models and tokenizers under the XDG cache (HF_HOME's default)."""
RANK_RECORD = re.compile(r"^rank(\d+)\.json$")
QUALIFIED = "qualified.json"


@dataclass(frozen=True)
class Collected:
    """The files of one deployment under a cache root, hashed."""

    files: list[FileEntry]
    sources: dict[str, Path]
    calibration: Calibration
    notes: list[str]


def skipped(rel: str) -> bool:
    """Whether the path ``rel`` (under the cache root) stays out of an artifact."""
    parts = rel.split("/")
    if any(rel == p or rel.startswith(p + "/") for p in SKIP_PATHS):
        return True
    return any(
        part in SKIP_DIRS or part.startswith(SKIP_PREFIXES) or part.endswith(SKIP_SUFFIXES)
        for part in parts
    )


def _walk(cache_root: Path, top: str, notes: list[str]) -> list[tuple[str, Path]]:
    try:  # a cache directory that is a link (or lies below one) is not this root's
        base = owned_paths.inside(cache_root, top)
    except Refused:
        notes.append(f"left out {top}: a link, or below one (nothing is followed)")
        return []
    if not base.is_dir():
        return []
    out = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        dirnames.sort()
        for name in list(dirnames):
            if (here / name).is_symlink():
                notes.append(f"left out {(here / name).relative_to(cache_root)}: a link")
                dirnames.remove(name)
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(cache_root).as_posix()
            if skipped(rel):
                continue
            if "\\" in rel:  # the manifest takes no backslash: a path another reader splits
                notes.append(f"left out {rel}: a backslash in its name")
                continue
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                notes.append(f"left out {rel}: not a plain file")
                continue
            out.append((rel, path))
    return [(rel, p) for rel, p in out if not skipped(rel)]


def _calibration(folder: Path) -> Calibration:
    ranks, entries = [], []
    if folder.is_dir():
        for path in sorted(folder.iterdir()):
            m = RANK_RECORD.match(path.name)
            if not m:
                continue
            ranks.append(int(m.group(1)))
            try:
                record = read_record(path)
            except ContractError:
                continue  # baked as it is; the plan reading it skips it with a warning
            entries.append(census.merge(record.learned, record.late_compiles))
    merged = census.merge(*entries) if entries else []
    return Calibration(
        ranks=sorted(ranks),
        qualified=(folder / QUALIFIED).is_file(),
        census_entries=len(merged),
    )


def collect(cache_root: Path, fingerprint: str) -> Collected:
    """Every file of the deployment under ``cache_root``, hashed (see the module's list)."""
    notes: list[str] = []
    found: list[tuple[str, Path]] = []
    for top in sorted(set(CACHE_DIRS.values())):
        found += _walk(cache_root, top, notes)
    records = cache_root / CALIBRATION / fingerprint
    found += [
        (rel, p)
        for rel, p in _walk(cache_root, f"{CALIBRATION}/{fingerprint}", notes)
        if rel.count("/") == 2  # the store's own files, not anything below them
    ]
    files, sources = [], {}
    for rel, path in sorted(found):
        sha, size = hash_file(path)
        st = path.stat()
        executable = bool(st.st_mode & stat.S_IXUSR)
        files.append(
            FileEntry(
                path=rel, size=size, sha256=sha, executable=executable, mtime_ns=st.st_mtime_ns
            )
        )
        sources[rel] = path
    try:  # a linked plan folder was left out above: its records are not this root's
        owned_paths.inside(cache_root, f"{CALIBRATION}/{fingerprint}")
        calibration = _calibration(records)
    except Refused:
        calibration = Calibration()
    return Collected(files, sources, calibration, notes)


@dataclass(frozen=True)
class Baked:
    manifest: Manifest
    path: Path
    notes: list[str]


def bake(
    cache_root: Path, out: Path, *, profile: str, keys: ArtifactKeys, replace: bool = False
) -> Baked:
    """Write the artifact of the deployment ``keys.fingerprint`` from ``cache_root`` to ``out``
    (a directory, or a tar by its suffix), whole or not at all.

    Raises:
        ArtifactError: nothing to bake, ``out`` exists (without ``replace``) or lies inside the
            cache root, a file changed while it was written, or ``out`` cannot be written.
    """
    cache_root, out = cache_root.absolute(), out.absolute()
    _check_out(cache_root, out, replace)
    got = collect(cache_root, keys.fingerprint)
    if not any(not f.path.startswith(CALIBRATION + "/") for f in got.files):
        raise ArtifactError(
            f"nothing to bake: the JIT caches under {cache_root} are empty; boot the deployment "
            "on its cards first (b12x-launch PROFILE, or qualify), then bake"
        )
    notes = list(got.notes)
    if not got.calibration.ranks:
        notes.append(
            f"no measurement records for plan {keys.fingerprint} under "
            f"{cache_root / CALIBRATION}: the artifact holds compiled caches only (a boot of "
            "this profile writes them; was it booted with other --set options?)"
        )
    manifest = make_manifest(profile, keys, got.files, got.calibration)
    _write(manifest, got.sources, out, replace)
    return Baked(manifest, out, notes)


def _check_out(cache_root: Path, out: Path, replace: bool) -> None:
    if out == cache_root or cache_root in out.parents:
        raise ArtifactError(
            f"{out} is inside the cache root {cache_root}: bake it somewhere else (the next bake "
            "would take it in)"
        )
    if not (out.exists() or out.is_symlink()):
        return
    if not replace:
        raise ArtifactError(f"{out} exists: choose another path, or pass --replace")
    try:
        owned_artifact(out)
    except Refused as exc:
        raise ArtifactError(
            f"{out} is no artifact b12x-launch baked ({exc}); --replace only replaces one: "
            "choose another path"
        ) from None


def owned_artifact(path: Path) -> dict[str, str] | None:
    """What the artifact the launcher baked at ``path`` holds (path -> sha256, for a
    directory; None for a tar, whose every member was read back and checked).

    Raises:
        Refused: ``path`` is a link, or no artifact, or one changed since it was baked.
    """
    if owned_paths.is_link(path):
        raise Refused(f"{path}: a symbolic link")
    if path.is_dir():
        _, listed = dir_listing(path)
        owned_remove.check_tree(path, listed)
        return listed
    if not is_tar(path.name) or not path.is_file():
        raise Refused(f"{path}: neither an artifact directory nor a tar")
    try:
        with open_artifact(path) as reader:
            for entry, src in reader.files():
                if not isinstance(src, SameAs):
                    _check_stream(src, entry)
    except (ArtifactError, Mismatch, OSError) as exc:
        raise Refused(str(exc)) from None
    return None


def _check_stream(src, entry: FileEntry) -> None:
    h, n = hashlib.sha256(), 0
    while chunk := src.read(min(1 << 20, entry.size + 1 - n)):
        n += len(chunk)
        if n > entry.size:
            break
        h.update(chunk)
    if (n, h.hexdigest()) != (entry.size, entry.sha256):
        raise Mismatch(entry, n, h.hexdigest() if n <= entry.size else "")


def _write(manifest: Manifest, sources: dict[str, Path], out: Path, replace: bool) -> None:
    """Into a temporary name beside ``out``, synced, then renamed into place; an artifact it
    replaces (checked again: baked, unchanged) is removed by its manifest."""
    tar = is_tar(out.name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = owned_write.new_scratch(out.parent, f".{out.name}.")
    except OSError as exc:
        raise ArtifactError(f"cannot write {out}: {exc.strerror or exc}") from None
    target = tmp / out.name
    try:
        if tar:
            write_tar(manifest, sources, target, gz=out.name.endswith(("gz", "tgz")))
        else:
            write_dir(manifest, sources, target)
        os.sync()
        if not (replace and os.path.lexists(out)):
            owned_write.move_new(target, out)
        elif tar:
            owned_artifact(out)
            owned_write.replace_file(target, out)
        else:
            listed = owned_artifact(out) or {}
            old = tmp / ".replaced"
            owned_write.move_new(out, old)
            try:
                owned_write.move_new(target, out)
            except OSError:
                owned_write.move_new(old, out)  # put the artifact it was to replace back
                raise
            owned_remove.remove_tree(old, listed)
    except Mismatch as exc:
        raise ArtifactError(
            f"a cache file changed while it was baked ({exc}); is a server of this deployment "
            "still compiling into the cache? Bake again when it is idle"
        ) from None
    except Refused as exc:
        raise ArtifactError(f"{out}: {exc}; --replace only replaces an artifact") from None
    except OSError as exc:
        raise ArtifactError(
            f"cannot write {out}: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else "")
        ) from None
    finally:
        owned_write.drop_scratch(tmp)
