"""The owned-files boundary itself (``launcher.owned``): over generated paths, links and sizes,
nothing resolves outside its root or through a link, a copy stops at its limit, and only a
listed file with its recorded bytes is deleted. Seeded: the seed is printed."""

from __future__ import annotations

import hashlib
import io
import os
import random

import pytest

from launcher.bounded import TooLarge
from launcher.owned import Refused, paths, read, remove, write

SEED = int(os.environ.get("BLAUNCH_OWNED_SEED", "64"))
CASES = 400
PARTS = ["a", "b", "..", ".", "", "link", "file", "/", "c d", "\\", "x\x00"]


def _layout(tmp_path):
    """A root with a directory, a file, and a link to a directory outside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    (root / "file").write_bytes(b"f")
    (root / "link").symlink_to(outside)
    (root / "a" / "link").symlink_to(outside)
    return root, outside


def _generated(rng: random.Random) -> str:
    n = rng.randint(0, 5)
    text = "/".join(rng.choice(PARTS) for _ in range(n))
    return ("/" + text) if rng.random() < 0.1 else text


def test_no_generated_path_resolves_outside_its_root_or_through_a_link(tmp_path):
    print(f"seed {SEED} ({CASES} paths; BLAUNCH_OWNED_SEED=N for another)")
    root, _ = _layout(tmp_path)
    rng = random.Random(SEED)
    resolved = refused = 0
    for _ in range(CASES):
        rel = _generated(rng)
        try:
            got = paths.inside(root, rel)
        except Refused:
            refused += 1
            continue
        resolved += 1
        real = os.path.realpath(got)
        assert real.startswith(str(root) + os.sep), (rel, real)
        here = root
        for part in got.relative_to(root).parts[:-1]:
            here = here / part
            assert not here.is_symlink(), rel
    assert resolved and refused  # both sides of the rule were reached


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../x", "", "a//b", "./a"])
def test_a_path_that_leaves_the_root_is_refused(tmp_path, rel):
    root, _ = _layout(tmp_path)
    with pytest.raises(Refused):
        paths.inside(root, rel)


def test_writing_below_a_link_is_refused_and_nothing_lands_behind_it(tmp_path):
    root, outside = _layout(tmp_path)
    with pytest.raises(Refused, match="link"):
        write.write_text(root / "link" / "new.json", "{}", root=root)
    with pytest.raises(Refused, match="link"):
        paths.makedirs(root, "a/link/deeper")
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_write_over_a_link_is_refused_and_its_target_kept(tmp_path):
    root, outside = _layout(tmp_path)
    (root / "planted").symlink_to(outside / "secret")
    with pytest.raises(Refused, match="planted"):
        write.write_text(root / "planted", "new", root=root)
    assert (outside / "secret").read_bytes() == b"s" and (root / "planted").is_symlink()


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1 << 20, (1 << 20) + 1, 3 << 20])
def test_a_copy_stops_at_its_limit_before_writing_past_it(tmp_path, size):
    dest = tmp_path / "out"
    src = io.BytesIO(bytes(size))
    limit = 16 if size < 1 << 20 else 1 << 20
    if size > limit:
        with pytest.raises(TooLarge):
            write.copy_limited(src, dest, limit)
        assert not dest.exists() and src.tell() <= limit + 1
    else:
        sha, n = write.copy_limited(src, dest, limit)
        assert (n, sha) == (size, hashlib.sha256(bytes(size)).hexdigest())


def test_only_a_listed_file_with_its_recorded_bytes_is_deleted(tmp_path):
    root, outside = _layout(tmp_path)
    good = hashlib.sha256(b"f").hexdigest()
    assert not remove.remove_listed(root, "file", hashlib.sha256(b"other").hexdigest())
    assert (root / "file").exists()
    with pytest.raises(Refused):
        remove.remove_listed(root, "link/secret", hashlib.sha256(b"s").hexdigest())
    with pytest.raises(Refused):
        remove.remove_listed(root, "../outside/secret", hashlib.sha256(b"s").hexdigest())
    assert (outside / "secret").exists()
    assert remove.remove_listed(root, "file", good) and not (root / "file").exists()


def test_a_tree_with_anything_unlisted_is_not_deleted(tmp_path):
    tree = tmp_path / "t"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "x").write_bytes(b"x")
    (tree / "y").write_bytes(b"y")
    listed = {"d/x": hashlib.sha256(b"x").hexdigest()}
    with pytest.raises(Refused, match="y"):
        remove.remove_tree(tree, listed)
    assert (tree / "y").exists() and (tree / "d" / "x").exists()
    (tree / "y").unlink()
    remove.remove_tree(tree, listed)
    assert not tree.exists()


def test_the_reader_refuses_a_link_a_fifo_and_a_file_past_its_limit(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 101)
    (tmp_path / "ok").write_bytes(b"x" * 100)
    (tmp_path / "ln").symlink_to(tmp_path / "ok")
    os.mkfifo(tmp_path / "fifo")
    assert read.read_bytes(tmp_path / "ok", 100, "t") == b"x" * 100
    with pytest.raises(TooLarge):
        read.read_bytes(tmp_path / "big", 100, "t")
    with pytest.raises(Refused, match="link"):
        read.read_bytes(tmp_path / "ln", 100, "t")
    with pytest.raises(Refused, match="regular"):
        read.read_bytes(tmp_path / "fifo", 100, "t")


def test_a_marked_tree_is_removed_and_an_unmarked_one_or_a_link_is_not(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / ".m").write_text("{}")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "ln").symlink_to(tmp_path / "mine")
    with pytest.raises(Refused):
        remove.remove_marked_tree(tmp_path, "theirs", ".m")
    with pytest.raises(Refused):
        remove.remove_marked_tree(tmp_path, "ln", ".m")
    remove.remove_marked_tree(tmp_path, "mine", ".m")
    assert not (tmp_path / "mine").exists() and (tmp_path / "theirs").exists()


def test_a_path_below_a_file_is_refused_naming_the_file_in_its_way(tmp_path):
    root, _ = _layout(tmp_path)
    with pytest.raises(Refused, match=r"/file: not a directory, yet file/x lies below it"):
        paths.inside(root, "file/x")


def test_a_replace_over_a_link_or_a_directory_is_refused_and_both_are_kept(tmp_path):
    root, outside = _layout(tmp_path)
    (root / "planted").symlink_to(outside / "secret")
    (root / "new").write_bytes(b"n")
    for dest in (root / "planted", root / "a"):
        with pytest.raises(Refused, match="not a plain file"):
            write.replace_file(root / "new", dest)
    assert (root / "planted").is_symlink() and (outside / "secret").read_bytes() == b"s"
    assert (root / "a" / "b").is_dir() and (root / "new").read_bytes() == b"n"
    write.replace_file(root / "new", root / "file")
    assert (root / "file").read_bytes() == b"n" and not (root / "new").exists()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_written_file_is_readable_as_the_umask_allows_and_never_executable(tmp_path, umask, mode):
    """mkstemp makes 0600; the writer widens it to 0666 less the umask, as open() would."""
    old = os.umask(umask)
    try:
        path = write.write_text(tmp_path / "plan.json", "{}")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o7777 == mode


def test_json_is_written_two_space_indented_in_the_callers_key_order_with_a_final_newline(
    tmp_path,
):
    """Records, run files and manifests are read and diffed by people."""
    path = write.write_json(tmp_path / "r.json", {"z": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "z": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'


class _Watching(io.BytesIO):
    """A source that records the mode of the copy's file each time it is read from, and how
    many bytes were taken from it."""

    def __init__(self, data: bytes, dest):
        super().__init__(data)
        self.dest, self.modes, self.taken = dest, set(), 0

    def read(self, size=-1):
        self.modes.add(self.dest.stat().st_mode & 0o7777)
        data = super().read(size)
        self.taken += len(data)
        return data


def test_a_copy_is_private_while_it_is_written_then_0644_or_the_mode_asked(tmp_path):
    """Another user never reads a half-copied file; a whole one gets its mode at the end."""
    for mode, want in ((None, 0o644), (0o600, 0o600), (0o755, 0o755)):
        dest = tmp_path / f"out-{want:o}"
        src = _Watching(b"x" * 100, dest)
        write.copy_limited(src, dest, 100, *(() if mode is None else (mode,)))
        assert src.modes == {0o600}, mode
        assert dest.stat().st_mode & 0o7777 == want, mode


def test_only_real_scratch_directories_of_the_prefix_are_swept_and_counted(tmp_path):
    root, outside = _layout(tmp_path)
    (root / ".stage-1").mkdir()
    (root / ".stage-2" / "half").mkdir(parents=True)
    (root / ".stage-link").symlink_to(outside)
    (root / ".stage-file").write_bytes(b"f")
    assert write.remove_stale_scratch(root, ".stage-") == 2
    assert sorted(p.name for p in root.glob(".stage-*")) == [".stage-file", ".stage-link"]
    assert (outside / "secret").read_bytes() == b"s"
    assert write.remove_stale_scratch(root, ".stage-") == 0


def test_a_hash_with_a_limit_takes_a_file_of_exactly_that_size_and_refuses_one_more(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 10)
    assert remove.sha256_of(tmp_path / "f", 10) == (hashlib.sha256(b"x" * 10).hexdigest(), 10)
    with pytest.raises(TooLarge):
        remove.sha256_of(tmp_path / "f", 9)


def test_discard_says_whether_it_removed_a_file_or_a_link_and_leaves_a_directory(tmp_path):
    root, outside = _layout(tmp_path)
    assert remove.discard(root, "file") and not (root / "file").exists()
    assert remove.discard(root, "link") and not os.path.lexists(root / "link")
    assert (outside / "secret").read_bytes() == b"s"
    assert not remove.discard(root, "a") and (root / "a" / "b").is_dir()
    assert not remove.discard(root, "missing")
    with pytest.raises(Refused):
        remove.discard(root, "a/b")


def test_the_reader_reads_no_more_than_one_byte_past_its_limit(tmp_path, monkeypatch):
    """A file growing without end (a device, a log being written) costs limit + 1 bytes."""
    big = _Watching(bytes(1000), tmp_path)
    monkeypatch.setattr(read, "open_regular", lambda path, why="": big)
    with pytest.raises(TooLarge):
        read.read_bytes(tmp_path / "any", 100, "t")
    assert big.taken == 101
