"""A tar artifact stores the bytes of several paths once: vLLM's compiled pieces, which the
planned worker links under a second directory (``runtime.compile_dir``), go in once, and every
path comes back on restore, as a file of its own; a link member that names anything but an
earlier file with the same bytes is refused."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from launcher.artifact import FILES_DIR, ArtifactError
from launcher.artifact.bake import bake
from launcher.artifact.restore import restore
from launcher.artifact.seed import seed
from launcher.buildid import BUILD_ID_ENV
from tests.unit.artifact_caches import fill, keys, tree

BUILD = {BUILD_ID_ENV: keys().build_id}
"""seed runs in the image the artifact was baked for (it refuses another build's)."""

COLD = "vllm/torch_compile_cache/9f1e/rank_0_0/backbone"
WARM = "vllm/torch_compile_cache/f5b3/rank_0_0/backbone"  # after COLD in path order
PIECES = {"artifact_compile_range_1_2048_subgraph_0": os.urandom(3000), "k2": os.urandom(1000)}


def cache_with_linked_pieces(root):
    """A boot's cache root whose pieces stand under two directories, hard-linked."""
    own = fill(root)
    for name, data in PIECES.items():
        (root / COLD / name).write_bytes(data)
        (root / WARM).mkdir(parents=True, exist_ok=True)
        os.link(root / COLD / name, root / WARM / name)
        own[f"{COLD}/{name}"] = own[f"{WARM}/{name}"] = data
    return own


def members(path) -> list[tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return tar.getmembers()


@pytest.mark.parametrize("name", ["art.tar", "art.tar.gz"])
def test_a_tar_holds_each_pieces_bytes_once_and_a_restore_gives_every_path(tmp_path, name):
    own = cache_with_linked_pieces(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / name, profile="p", keys=keys())
    held = {m.name: m for m in members(tmp_path / name)}
    for piece in PIECES:
        first, second = held[f"{FILES_DIR}/{COLD}/{piece}"], held[f"{FILES_DIR}/{WARM}/{piece}"]
        assert first.isfile() and first.size == len(PIECES[piece])
        assert second.islnk() and second.linkname == first.name and second.size == 0
    root = tmp_path / "node"
    root.mkdir()
    restore(tmp_path / name, root, keys())
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == own
    for piece in PIECES:  # copies: a cache that rewrites one in place leaves the other alone
        assert not os.path.samefile(root / COLD / piece, root / WARM / piece)


def test_the_tar_stores_the_manifests_bytes_less_the_shared_ones(tmp_path):
    cache_with_linked_pieces(tmp_path / "c")
    m = bake(tmp_path / "c", tmp_path / "art.tar", profile="p", keys=keys()).manifest
    stored = sum(x.size for x in members(tmp_path / "art.tar") if x.name.startswith(FILES_DIR))
    assert stored == m.total_bytes - sum(len(d) for d in PIECES.values())


def test_seeding_a_volume_from_the_tar_writes_every_path(tmp_path):
    own = cache_with_linked_pieces(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art.tar", profile="p", keys=keys())
    seed(tmp_path / "art.tar", tmp_path / "vol", env=BUILD)
    assert tree(tmp_path / "vol" / FILES_DIR) == own
    root = tmp_path / "node"
    root.mkdir()
    restore(tmp_path / "vol", root, keys())  # the seeded directory restores as the tar did
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == own


def relinked(path, out, linkname: str) -> None:
    """The tar at ``path`` with its first link member pointing at ``linkname``."""
    done = False
    with tarfile.open(path) as src, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.islnk() and not done:
                m.linkname, done = linkname, True
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    assert done


@pytest.mark.parametrize(
    ("linkname", "why"),
    [
        (f"{FILES_DIR}/{WARM}/k2", "no file before it"),  # itself or a later member
        (f"{FILES_DIR}/triton/EF34/_topk.ptx", "bytes the manifest says differ"),
        ("manifest.json", "no file before it"),
        ("/etc/passwd", "no file before it"),
        (f"{FILES_DIR}/../../etc/passwd", "no file before it"),
        (f"{FILES_DIR}/vllm/not/listed", "no file before it"),
    ],
)
def test_a_link_member_to_anything_but_an_earlier_file_with_its_bytes_is_refused(
    tmp_path, linkname, why
):
    cache_with_linked_pieces(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art.tar", profile="p", keys=keys())
    relinked(tmp_path / "art.tar", tmp_path / "bad.tar", linkname)
    root = tmp_path / "node"
    root.mkdir()
    with pytest.raises(ArtifactError, match=why) as exc:
        restore(tmp_path / "bad.tar", root, keys())
    assert "nothing was restored" in str(exc.value) or "bake it again" in str(exc.value)
    assert {k for k in tree(root) if not k.startswith(".blaunch-restore.lock")} == set()


def test_a_directory_artifact_hard_links_the_paths_that_share_bytes(tmp_path):
    own = cache_with_linked_pieces(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art", profile="p", keys=keys())
    files = tmp_path / "art" / FILES_DIR
    for piece in PIECES:
        assert os.path.samefile(files / COLD / piece, files / WARM / piece)
    root = tmp_path / "node"
    root.mkdir()
    restore(tmp_path / "art", root, keys())
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == own
    for piece in PIECES:
        assert not os.path.samefile(root / COLD / piece, root / WARM / piece)


def test_seeding_from_a_tar_whose_link_escapes_leaves_the_volume_as_it_was(tmp_path):
    """The init container's copy (``python -m launcher.artifact.seed``) reads the same way."""
    cache_with_linked_pieces(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art.tar", profile="p", keys=keys())
    relinked(tmp_path / "art.tar", tmp_path / "bad.tar", "/etc/passwd")
    (tmp_path / "vol").mkdir()
    (tmp_path / "vol" / "old").write_bytes(b"the volume's own")
    with pytest.raises(ArtifactError, match="no file before it"):
        seed(tmp_path / "bad.tar", tmp_path / "vol" / "art", env=BUILD)
    assert tree(tmp_path / "vol") == {"old": b"the volume's own"}
