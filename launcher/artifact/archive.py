"""The artifact on disk: a directory or a tar, read member by member, each file checked.

Both forms hold ``manifest.json`` and ``files/<path>``; a tar holds the manifest first, so
a reader checks the keys before it reads a byte of the caches, and reads the rest as a stream
(from a pipe, a read-only image volume or a slow disk alike). Every file is hashed as it is
copied; a file whose size or sha256 is not the manifest's, a file the manifest does not list,
or one it lists and the artifact lacks, is refused by name.

A tar stores the bytes of several paths once (vLLM's compiled pieces linked under two
directories, ``runtime.compile_dir``): the first path in order as a file, the others as
hard-link members naming it; a directory hard-links them where its file system can. A reader
takes a link member only when it names an earlier file of the manifest with the same size and
sha256, and gets the bytes back from where that file was written (``extract``), checked again.

Written deterministically: tar members in path order, mode 0644 or 0755, owner 0, no names,
time 0, PAX headers, and a gzip header without time or file name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from launcher import bounded
from launcher.artifact import FILES_DIR, MANIFEST_NAME, ArtifactError, is_tar
from launcher.artifact.manifest import FileEntry, Manifest, ManifestError, parse
from launcher.owned import Refused
from launcher.owned import read as owned_read
from launcher.owned import write as owned_write

CHUNK = 1 << 20
MANIFEST_MAX = 256 << 20
"""A manifest larger than this is not one (a reader never loads more into memory)."""


class Mismatch(Exception):
    """A file whose bytes are not what the manifest says (size and sha256 as read)."""

    def __init__(self, entry: FileEntry, size: int, sha256: str):
        self.entry, self.size, self.sha256 = entry, size, sha256
        if size > entry.size and not sha256:  # cut off while it was copied
            super().__init__(
                f"{entry.path}: more than the manifest's {entry.size:,} bytes (cut off there)"
            )
            return
        super().__init__(
            f"{entry.path}: {size:,} bytes sha256 {sha256[:16]}..., the manifest says "
            f"{entry.size:,} bytes sha256 {entry.sha256[:16]}..."
        )


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256, size) of the file at ``path``."""
    h, n = hashlib.sha256(), 0
    with bounded.open_regular(path, "cache file") as f:  # a FIFO in a cache would never end
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


class _Hashing(io.RawIOBase):
    """A reader that hashes what passes through it (tarfile reads a member's bytes from it)."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.h, self.n = raw, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.h.update(data)
        self.n += len(data)
        return data

    def check(self, entry: FileEntry) -> None:
        if self.n != entry.size or self.h.hexdigest() != entry.sha256:
            raise Mismatch(entry, self.n, self.h.hexdigest())


def copy_verified(src: BinaryIO, dest: Path, entry: FileEntry) -> None:
    """Copy ``src`` into the new file ``dest`` (never an existing one, never through a link),
    checking its size while it copies and its sha256 after; set its mode and, where the
    manifest has it, the time it was modified when baked.

    Raises:
        Mismatch: the bytes are not the manifest's (``dest`` is left for the caller to remove;
            one cut off at its size is removed).
        OSError: the write failed (a full disk, an unwritable directory).
    """
    mode = 0o755 if entry.executable else 0o644
    try:  # at most one byte past the entry's size is read, none of it written
        sha256, size = owned_write.copy_limited(src, dest, entry.size, mode, entry.mtime_ns)
    except bounded.TooLarge:
        raise Mismatch(entry, entry.size + 1, "") from None
    if (sha256, size) != (entry.sha256, entry.size):
        raise Mismatch(entry, size, sha256)


# --- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SameAs:
    """A file whose bytes the artifact stores once, under an earlier path: ``first``'s."""

    first: FileEntry


Source = BinaryIO | SameAs
"""Where a file's bytes come from: a stream, or a file written before it."""


def extract(reader: Reader, root: Path) -> None:
    """Write every file of ``reader`` under ``root`` (new files only), each checked against
    the manifest.

    Raises:
        ArtifactError: the artifact lists, holds or lacks another set of files.
        Mismatch: a file's bytes are not the manifest's.
        OSError: a write failed.
    """
    for entry, src in reader.files():
        dest = root / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, SameAs):  # a copy, not a link: a cache may rewrite either in place
            with open(root / src.first.path, "rb") as first:
                copy_verified(first, dest, entry)
        else:
            copy_verified(src, dest, entry)


class Reader:
    """An artifact opened for reading: its manifest, then each file once, in order.

    Use as a context manager; ``files()`` yields ``(entry, source)`` for every file of the
    manifest (``extract`` writes them) and raises ``ArtifactError`` when the artifact holds a
    file the manifest does not list, or lacks one it lists.
    """

    def __init__(self, path: Path):
        self.path = path
        self._stack = ExitStack()
        self.manifest_bytes = b""
        self.manifest: Manifest

    def __enter__(self) -> Reader:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _open(self) -> None:
        raise NotImplementedError

    def _parse(self, data: bytes, where: str) -> None:
        try:
            self.manifest = parse(data, where)
        except ManifestError as exc:
            raise ArtifactError(str(exc)) from None
        self.manifest_bytes = data

    def files(self) -> Iterator[tuple[FileEntry, Source]]:
        raise NotImplementedError


class DirReader(Reader):
    def _open(self) -> None:
        where = self.path / MANIFEST_NAME
        try:
            data = bounded.read_bytes(where, MANIFEST_MAX, MANIFEST_NAME)
        except bounded.TooLarge as exc:
            raise ArtifactError(f"{exc}; an artifact's manifest is a plain file") from None
        except OSError as exc:
            raise ArtifactError(
                f"{self.path}: no readable {MANIFEST_NAME} ({exc.strerror or exc}); an artifact "
                "is a directory or tar written by `b12x-launch bake PROFILE OUT`"
            ) from None
        self._parse(data[:MANIFEST_MAX], str(where))

    def _listed_on_disk(self) -> set[str]:
        root = self.path / FILES_DIR
        found: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in (*dirnames, *filenames):
                p = Path(dirpath) / name
                rel = p.relative_to(root).as_posix()
                if p.is_symlink():
                    raise ArtifactError(
                        f"{self.path}: {FILES_DIR}/{rel} is a symbolic link; an artifact holds "
                        "plain files only: bake it again"
                    )
                if name in filenames:
                    found.add(rel)
        return found

    def files(self) -> Iterator[tuple[FileEntry, Source]]:
        listed = {f.path for f in self.manifest.files}
        extra = sorted(self._listed_on_disk() - listed)
        if extra:
            raise ArtifactError(
                f"{self.path}: {len(extra)} file(s) the manifest does not list, first "
                f"{FILES_DIR}/{extra[0]}: the artifact was changed after it was baked; bake it "
                "again"
            )
        for entry in self.manifest.files:
            src = self.path / FILES_DIR / entry.path
            try:
                f = bounded.open_regular(src, "artifact file")  # a FIFO would never end
            except bounded.TooLarge as exc:
                raise ArtifactError(f"{exc}; an artifact holds plain files only") from None
            except FileNotFoundError:
                raise ArtifactError(
                    f"{self.path}: {FILES_DIR}/{entry.path} is missing (the manifest lists it): "
                    "the artifact is incomplete; copy it again or bake it again"
                ) from None
            with f:
                yield entry, f


class TarReader(Reader):
    def _open(self) -> None:
        try:
            raw = self._stack.enter_context(bounded.open_regular(self.path, "tar artifact"))
            tar = tarfile.open(fileobj=raw, mode="r|*")  # noqa: SIM115  (closed by the stack)
            self._tar = self._stack.enter_context(tar)
            first = self._tar.next()
        except bounded.TooLarge as exc:
            raise ArtifactError(f"{exc}; a tar artifact is a plain file") from None
        except (OSError, tarfile.TarError) as exc:
            raise ArtifactError(f"{self.path}: not a readable tar ({exc})") from None
        if first is None or _name(first.name) != MANIFEST_NAME or not first.isfile():
            raise ArtifactError(
                f"{self.path}: the tar's first member is not {MANIFEST_NAME}; a tar artifact "
                "starts with its manifest (b12x-launch bake PROFILE OUT.tar writes one)"
            )
        if first.size > MANIFEST_MAX:
            raise ArtifactError(f"{self.path}: its {MANIFEST_NAME} is {first.size:,} bytes")
        stream = self._tar.extractfile(first)
        assert stream is not None  # a regular file
        self._parse(stream.read(), f"{self.path}:{MANIFEST_NAME}")

    def files(self) -> Iterator[tuple[FileEntry, Source]]:
        wanted = {f.path: f for f in self.manifest.files}
        seen: set[str] = set()
        try:
            while (member := self._tar.next()) is not None:
                name = _name(member.name)
                if member.isdir() and (name == FILES_DIR or name.startswith(_PREFIX)):
                    continue
                rel = _rel(name)
                entry = wanted.get(rel or "")
                if entry is None or rel in seen or not (member.isfile() or member.islnk()):
                    what = "a second copy of" if rel in seen else "a member"
                    kind = "" if member.isfile() else " (not a plain file)"
                    raise ArtifactError(
                        f"{self.path}: {what} {name!r}{kind} the manifest does not list: the "
                        "artifact was changed after it was baked; bake it again"
                    )
                if member.islnk():
                    source: Source = SameAs(self._first(member, entry, wanted, seen))
                else:
                    stream = self._tar.extractfile(member)
                    assert stream is not None
                    source = stream
                seen.add(entry.path)
                yield entry, source
        except tarfile.TarError as exc:
            raise ArtifactError(f"{self.path}: the tar is damaged ({exc})") from None
        missing = sorted(set(wanted) - seen)
        if missing:
            raise ArtifactError(
                f"{self.path}: {len(missing)} file(s) the manifest lists are missing, first "
                f"{FILES_DIR}/{missing[0]}: the artifact is incomplete; copy it again or bake "
                "it again"
            )

    def _first(
        self,
        member: tarfile.TarInfo,
        entry: FileEntry,
        wanted: dict[str, FileEntry],
        seen: set[str],
    ) -> FileEntry:
        """The earlier file a hard-link member stands for, when its bytes are the entry's."""
        first = wanted.get(_rel(_name(member.linkname)) or "")
        if first is None or first.path not in seen:
            raise ArtifactError(
                f"{self.path}: {member.name!r} links to {member.linkname!r}, no file before it in "
                "the artifact: the artifact was changed after it was baked; bake it again"
            )
        if _bytes_key(first) != _bytes_key(entry):
            raise ArtifactError(
                f"{self.path}: {member.name!r} links to {member.linkname!r}, whose bytes the "
                "manifest says differ: the artifact was changed after it was baked; bake it again"
            )
        return first


_PREFIX = FILES_DIR + "/"


def _name(name: str) -> str:
    """A member's name (or link target) as a path: no leading ``./``, no trailing ``/``."""
    while name.startswith("./"):
        name = name[2:]
    return name.rstrip("/")


def _rel(name: str) -> str | None:
    """The path under ``files/`` a member's name stands for."""
    return name[len(_PREFIX) :] if name.startswith(_PREFIX) else None


def open_artifact(path: Path) -> Reader:
    """A reader for the artifact at ``path`` (a tar by its suffix, else a directory).

    Raises:
        ArtifactError: nothing at ``path``.
    """
    if not path.exists():
        raise ArtifactError(f"{path}: no such artifact (a directory or tar from `bake`)")
    if is_tar(path.name) and path.is_file():
        return TarReader(path)
    if path.is_dir():
        return DirReader(path)
    raise ArtifactError(
        f"{path}: neither a directory nor a tar ({', '.join(('.tar', '.tar.gz', '.tgz'))})"
    )


def dir_listing(path: Path) -> tuple[bytes, dict[str, str]]:
    """The directory artifact at ``path`` as the launcher wrote it: its manifest's bytes, and
    every file it must hold (``files/<path>`` and the manifest) with its sha256. Nothing is
    hashed here (``launcher.owned.remove.check_tree`` does that before a replace).

    Raises:
        Refused: a link, no directory, or no manifest of an artifact in it.
    """
    if os.path.islink(path) or not path.is_dir():
        raise Refused(f"{path}: not a directory")
    try:
        data = owned_read.read_bytes(path / MANIFEST_NAME, MANIFEST_MAX, MANIFEST_NAME)
        m = parse(data, str(path / MANIFEST_NAME))
    except (OSError, ValueError) as exc:
        raise Refused(f"no artifact's {MANIFEST_NAME}: {exc}") from None
    listed = {f"{FILES_DIR}/{f.path}": f.sha256 for f in m.files}
    listed[MANIFEST_NAME] = hashlib.sha256(data).hexdigest()
    return data, listed


# --- writing ------------------------------------------------------------------------------


def write_dir(manifest: Manifest, sources: dict[str, Path], out: Path) -> None:
    """Write the artifact as the directory ``out`` (which must not exist).

    Raises:
        Mismatch: a source file changed since it was hashed.
    """
    out.mkdir()
    for entry, first in _with_first(manifest.files):
        dest = out / FILES_DIR / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if first is not None:
            try:  # the artifact is read, never written in place: its paths may share bytes
                os.link(out / FILES_DIR / first.path, dest)
                continue
            except OSError:
                pass  # a file system without hard links: a file per path
        with open(sources[entry.path], "rb") as src:
            copy_verified(src, dest, entry)
    owned_write.write_bytes(out / MANIFEST_NAME, manifest.canonical(), root=out)


def write_tar(manifest: Manifest, sources: dict[str, Path], out: Path, *, gz: bool) -> None:
    """Write the artifact as the tar ``out`` (gzip-compressed with ``gz``), deterministically.

    Raises:
        Mismatch: a source file changed since it was hashed.
    """
    with open(out, "xb") as raw, ExitStack() as stack:
        sink: BinaryIO = raw
        if gz:  # no time, no name in the header: the same bytes every time
            sink = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
        with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as tar:
            data = manifest.canonical()
            tar.addfile(_info(MANIFEST_NAME, len(data), False), io.BytesIO(data))
            for entry, first in _with_first(manifest.files):
                name = f"{FILES_DIR}/{entry.path}"
                if first is not None:
                    info = _info(name, 0, entry.executable)
                    info.type, info.linkname = tarfile.LNKTYPE, f"{FILES_DIR}/{first.path}"
                    tar.addfile(info)
                    continue
                with open(sources[entry.path], "rb") as src:
                    reader = _Hashing(src)
                    tar.addfile(_info(name, entry.size, entry.executable), reader)
                    reader.check(entry)


def _bytes_key(entry: FileEntry) -> tuple[int, str, bool]:
    return entry.size, entry.sha256, entry.executable


def _with_first(files: Iterable[FileEntry]) -> Iterator[tuple[FileEntry, FileEntry | None]]:
    """Each file with the first one before it of the same bytes and mode (None: it is the
    first, or empty, where a link would save nothing)."""
    firsts: dict[tuple[int, str, bool], FileEntry] = {}
    for entry in files:
        first = firsts.setdefault(_bytes_key(entry), entry)
        yield entry, (first if first is not entry and entry.size else None)


def _info(name: str, size: int, executable: bool) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o755 if executable else 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info
