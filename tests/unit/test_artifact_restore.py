"""Restoring an artifact: keys checked by name, every file hashed, and never half a restore
(a damaged file, a full disk while staging, a failure or a kill while linking into place)."""

from __future__ import annotations

import errno
import io
import shutil
import tarfile

import pytest

from launcher.artifact import FILES_DIR, ArtifactError
from launcher.artifact import archive as archive_mod
from launcher.artifact import restore as restore_mod
from launcher.artifact.bake import bake
from launcher.artifact.restore import (
    JOURNAL,
    STAGING,
    recover_interrupted,
    restore,
    restored_in,
)
from tests.unit.artifact_caches import FP, OTHER_FP, VERSIONS, fill, keys, tree

FORMS = ["art", "art.tar", "art.tar.gz"]


@pytest.fixture(params=FORMS)
def artifact(request, tmp_path):
    """An artifact baked from a generated cache root, in each form; its files by path."""
    own = fill(tmp_path / "baked-on")
    path = tmp_path / request.param
    bake(tmp_path / "baked-on", path, profile="p", keys=keys())
    return path, own


def node(tmp_path, files: dict[str, bytes] | None = None):
    """A fresh node's cache root (with ``files`` already in it)."""
    root = tmp_path / "node"
    root.mkdir()
    for rel, data in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_a_restore_places_every_file_and_records_what_it_held(artifact, tmp_path):
    path, own = artifact
    root = node(tmp_path)
    record = restore(path, root, keys(), ranks=[0, 1])
    restored = {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")}
    assert restored == own
    assert (record.state, record.files_restored, record.covers, record.warm) == (
        "restored",
        len(own),
        True,
        True,
    )
    assert record.calibration_ranks == (0, 1) and record.qualified and record.census_entries == 1
    assert record.caches["triton"].files == 4
    assert not list(root.glob(STAGING + "*")) and not (root / JOURNAL).exists()
    assert [r.artifact_id for _, r in restored_in(root)] == [record.artifact_id]


def test_a_second_start_finds_it_present_and_copies_nothing(artifact, tmp_path, monkeypatch):
    path, own = artifact
    root = node(tmp_path)
    first = restore(path, root, keys(), ranks=[0])
    monkeypatch.setattr(restore_mod, "extract", lambda *a: pytest.fail("copied again"))
    again = restore(path, root, keys(), ranks=[0])
    assert (again.state, again.files_present, again.artifact_id) == (
        "present",
        len(own),
        first.artifact_id,
    )


def test_a_node_missing_a_rank_record_is_not_covered(artifact, tmp_path):
    path, _ = artifact
    record = restore(path, node(tmp_path), keys(), ranks=[0, 1, 2, 3])
    assert record.state == "restored" and not record.covers and not record.warm


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fingerprint", "fedcba987654"),
        ("gpu_kind", "rtx-pro-6000"),
        ("compute_capability", "12.0"),
        ("cuda_driver", "12.9"),
        ("build_id", "vllm0.27.0-b12x1.5.1-fedcba987654"),
    ],
)
def test_each_differing_key_is_refused_by_name_and_nothing_is_written(
    artifact, tmp_path, key, value
):
    path, _ = artifact
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)
    with pytest.raises(ArtifactError) as exc:
        restore(path, root, keys(**{key: value}))
    message = str(exc.value)
    assert f"{key}: artifact " in message and f"here {value}" in message
    assert "does not fit this node" in message and "--force" in message
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == before


def test_another_build_names_the_versions_that_differ(artifact, tmp_path):
    path, _ = artifact
    here = keys(build_id="other", versions={**VERSIONS, "vllm": "0.27.0"})
    with pytest.raises(ArtifactError, match=r"build_id: .*\(vllm 0\.26\.0 -> 0\.27\.0\)"):
        restore(path, node(tmp_path), here)


def test_force_boots_without_a_mismatched_artifact_and_says_why(artifact, tmp_path):
    path, _ = artifact
    root = node(tmp_path)
    record = restore(path, root, keys(gpu_kind="rtx-pro-6000"), force=True, ranks=[0])
    assert record.state == "ignored" and not record.warm and not record.covers
    assert record.note == (
        "--force: booted without it (gpu_kind: artifact h200, here rtx-pro-6000)"
    )
    assert not [k for k in tree(root) if not k.startswith(".blaunch")]


def _corrupt(path, own):
    """Flip one byte of one file inside the artifact, whatever its form."""
    victim = "triton/EF34/_topk.ptx"
    if path.is_dir():
        f = path / FILES_DIR / victim
        data = bytearray(f.read_bytes())
        data[10] ^= 0xFF
        f.write_bytes(bytes(data))
        return victim
    members = []
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            members.append((m, tar.extractfile(m).read()))
    mode = "w:gz" if path.name.endswith("gz") else "w"
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tar:
        for m, data in members:
            if m.name == f"{FILES_DIR}/{victim}":
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            tar.addfile(m, io.BytesIO(data))
    return victim


def test_a_corrupted_file_is_refused_by_name_and_the_caches_are_untouched(artifact, tmp_path):
    path, own = artifact
    victim = _corrupt(path, own)
    root = node(tmp_path, {"inductor/mine": b"the node's own"})
    before = tree(root)
    with pytest.raises(ArtifactError) as exc:
        restore(path, root, keys(), ranks=[0])
    assert victim in str(exc.value) and "damaged" in str(exc.value)
    assert "nothing was restored" in str(exc.value)
    after = tree(root)
    assert {k: v for k, v in after.items() if not k.startswith(".blaunch-restore.lock")} == before
    assert not list(root.glob(STAGING + "*"))


def test_force_ignores_a_corrupted_artifact_too(artifact, tmp_path):
    path, own = artifact
    _corrupt(path, own)
    record = restore(path, node(tmp_path), keys(), force=True, ranks=[0])
    assert record.state == "ignored" and "_topk.ptx" in record.note


def test_a_file_the_manifest_does_not_list_is_refused(tmp_path):
    fill(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art", profile="p", keys=keys())
    (tmp_path / "art" / FILES_DIR / "triton" / "smuggled.so").write_bytes(b"x")
    with pytest.raises(ArtifactError, match=r"does not list, first files/triton/smuggled.so"):
        restore(tmp_path / "art", node(tmp_path), keys())


def test_a_missing_file_is_refused(tmp_path):
    fill(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "art", profile="p", keys=keys())
    (tmp_path / "art" / FILES_DIR / "b12x" / "plans" / "p-11.bin").unlink()
    with pytest.raises(ArtifactError, match=r"b12x/plans/p-11.bin is missing"):
        restore(tmp_path / "art", node(tmp_path), keys())


def test_a_tar_without_its_manifest_first_is_refused(tmp_path):
    with tarfile.open(tmp_path / "x.tar", "w") as tar:
        info = tarfile.TarInfo("files/triton/a")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ArtifactError, match=r"first member is not manifest\.json"):
        restore(tmp_path / "x.tar", node(tmp_path), keys())


def test_no_artifact_at_the_path_is_refused_or_with_force_ignored(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match=r"no readable manifest\.json"):
        restore(tmp_path / "empty", node(tmp_path), keys())
    record = restore(tmp_path / "empty", tmp_path / "node", keys(), force=True)
    assert record.state == "ignored" and "no readable manifest.json" in record.note
    assert not record.warm and record.artifact_id == ""


def test_a_disk_that_fills_while_staging_restores_nothing(artifact, tmp_path, monkeypatch):
    path, _ = artifact
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)
    real, calls = archive_mod.copy_verified, []

    def fills_on_the_third(src, dest, entry):
        calls.append(entry.path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(dest))
        real(src, dest, entry)

    monkeypatch.setattr(archive_mod, "copy_verified", fills_on_the_third)
    with pytest.raises(ArtifactError, match=r"No space left on device.*nothing was restored"):
        restore(path, root, keys())
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == before
    assert not list(root.glob(STAGING + "*")) and not (root / JOURNAL).exists()


def test_a_failure_while_linking_into_place_unlinks_what_was_placed(
    artifact, tmp_path, monkeypatch
):
    path, _ = artifact
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)
    real, calls = restore_mod._place, []

    def fails_on_the_fifth(src, dest):
        calls.append(dest)
        if len(calls) == 5:
            raise OSError(errno.EIO, "Input/output error", str(dest))
        real(src, dest)

    monkeypatch.setattr(restore_mod, "_place", fails_on_the_fifth)
    with pytest.raises(ArtifactError, match="nothing was restored"):
        restore(path, root, keys())
    assert len(calls) == 5
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == before
    assert not (root / JOURNAL).exists() and not restored_in(root)
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["triton"]


def test_a_restore_killed_while_linking_is_rolled_back_by_the_next_launch(
    artifact, tmp_path, monkeypatch
):
    path, _ = artifact
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)
    real, calls = restore_mod._place, []

    def killed_on_the_fourth(src, dest):
        calls.append(dest)
        if len(calls) == 4:
            raise KeyboardInterrupt  # the process dies here: no undo runs
        real(src, dest)

    monkeypatch.setattr(restore_mod, "_place", killed_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        restore(path, root, keys())
    assert (root / JOURNAL).exists()
    note = recover_interrupted(root)
    assert note and "rolled back an interrupted restore" in note and "(3 files)" in note
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == before
    assert not (root / JOURNAL).exists() and not list(root.glob(STAGING + "*"))
    monkeypatch.setattr(restore_mod, "_place", real)
    assert restore(path, root, keys()).state == "restored"


def test_files_the_node_has_are_never_replaced(artifact, tmp_path):
    path, own = artifact
    rel = "triton/AB12CD/_fwd_kernel.cubin"
    root = node(
        tmp_path,
        {rel: b"the node compiled its own", "b12x/plans/p-11.bin": own["b12x/plans/p-11.bin"]},
    )
    record = restore(path, root, keys())
    assert (root / rel).read_bytes() == b"the node compiled its own"
    assert (record.files_kept, record.files_present, record.files_restored) == (
        1,
        1,
        len(own) - 2,
    )


def test_a_restore_without_links_copies_into_place(artifact, tmp_path, monkeypatch):
    path, own = artifact

    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(restore_mod.os, "link", no_links)
    root = node(tmp_path)
    restore(path, root, keys())
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == own


def test_a_present_artifact_whose_files_were_removed_is_restored_again(artifact, tmp_path):
    path, own = artifact
    root = node(tmp_path)
    restore(path, root, keys())
    shutil.rmtree(root / "triton")
    record = restore(path, root, keys())
    assert record.state == "restored" and record.files_restored == 4
    assert {k: v for k, v in tree(root).items() if not k.startswith(".blaunch")} == own


def test_the_fingerprint_key_is_checked_before_any_file_is_read(tmp_path, monkeypatch):
    fill(tmp_path / "c")
    bake(tmp_path / "c", tmp_path / "a.tar", profile="p", keys=keys())
    monkeypatch.setattr(archive_mod, "copy_verified", lambda *a: pytest.fail("read a file"))
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)
    with pytest.raises(ArtifactError, match="fingerprint") as refused:
        restore(tmp_path / "a.tar", root, keys(fingerprint=OTHER_FP))
    assert FP in str(refused.value) and OTHER_FP in str(refused.value)  # both plans named
    after = {k: v for k, v in tree(root).items() if k != ".blaunch-restore.lock"}
    assert after == before  # no file placed, no marker written (the empty lock stays)


def test_a_restore_that_cannot_write_its_marker_takes_back_what_it_placed(
    artifact, tmp_path, monkeypatch
):
    path, _ = artifact
    root = node(tmp_path, {"triton/mine/k.cubin": b"the node's own"})
    before = tree(root)

    (root / "a-file").write_bytes(b"")  # the marker's directory cannot be made under it
    monkeypatch.setattr(restore_mod, "marker_path", lambda r, i: r / "a-file" / f"{i}.json")
    with pytest.raises(ArtifactError, match=r"cannot record the restore .* nothing was restored"):
        restore(path, root, keys())
    after = tree(root)
    assert {k: v for k, v in after.items() if not k.startswith((".blaunch", "a-file"))} == before
    assert not (root / JOURNAL).exists()
