"""``bake``: an artifact holds the deployment's files only, hashed, and the same caches give the
same manifest and the same bytes."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile

import pytest

from launcher.artifact import FILES_DIR, MANIFEST_NAME, ArtifactError
from launcher.artifact import bake as bake_mod
from launcher.artifact.bake import bake
from launcher.artifact.manifest import Calibration, ManifestError, make_manifest, parse
from tests.unit.artifact_caches import FP, fill, keys, tree


def test_only_the_deployments_files_go_in(tmp_path):
    own = fill(tmp_path / "cache")
    baked = bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    listed = {f.path for f in baked.manifest.files}
    assert listed == set(own)
    assert tree(tmp_path / "art" / FILES_DIR) == own
    assert not [p for p in listed if "huggingface" in p or p.startswith(("runs/", "hub-"))]


def test_each_file_has_its_sha256_size_and_mode(tmp_path):
    own = fill(tmp_path / "cache")
    m = bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys()).manifest
    for f in m.files:
        assert f.sha256 == hashlib.sha256(own[f.path]).hexdigest(), f.path
        assert f.size == len(own[f.path])
        assert f.executable == f.path.endswith("kernel.abc/kernel.so")
    assert m.total_bytes == sum(map(len, own.values())) and m.file_count == len(own)
    so = tmp_path / "art" / FILES_DIR / "vllm/deep_gemm/cache/kernel.abc/kernel.so"
    assert os.stat(so).st_mode & 0o777 == 0o755


def test_caches_are_summarised_by_name(tmp_path):
    fill(tmp_path / "cache")
    m = bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys()).manifest
    assert set(m.caches) == {
        "b12x", "calibration", "cute-dsl", "deepgemm", "flashinfer", "inductor", "triton",
        "vllm", "vllm-compile", "xdg",
    }  # fmt: skip
    assert m.caches["vllm-compile"].files == 2 and m.caches["triton"].files == 4
    assert (m.calibration.ranks, m.calibration.qualified) == ([0, 1], True)
    assert m.calibration.census_entries == 1


@pytest.mark.parametrize("name", ["art", "art.tar", "art.tar.gz"])
def test_the_same_caches_give_the_same_manifest_and_bytes(tmp_path, name):
    """Reproducible: no build time, host or walk order in it (the second root is written in
    another order); each file's own modification time is in it, the same in both."""
    own = fill(tmp_path / "a")
    second = tmp_path / "b"
    for rel in sorted(own, reverse=True):
        (second / rel).parent.mkdir(parents=True, exist_ok=True)
        (second / rel).write_bytes(own[rel])
        st = (tmp_path / "a" / rel).stat()
        os.utime(second / rel, ns=(st.st_atime_ns, st.st_mtime_ns))
    (second / "vllm/deep_gemm/cache/kernel.abc/kernel.so").chmod(0o755)
    one = bake(tmp_path / "a", tmp_path / "1" / name, profile="p", keys=keys())
    two = bake(second, tmp_path / "2" / name, profile="p", keys=keys())
    assert one.manifest.canonical() == two.manifest.canonical()
    assert one.manifest.artifact_id == two.manifest.artifact_id
    if name != "art":
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()


def test_a_tar_starts_with_its_manifest_and_holds_nothing_else(tmp_path):
    own = fill(tmp_path / "cache")
    m = bake(tmp_path / "cache", tmp_path / "a.tar", profile="p", keys=keys()).manifest
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
        assert members[0].name == MANIFEST_NAME
        assert tar.extractfile(members[0]).read() == m.canonical()
        assert [x.name for x in members[1:]] == [f"{FILES_DIR}/{p}" for p in sorted(own)]
        assert {(x.mtime, x.uid, x.gid, x.uname, x.gname) for x in members} == {(0, 0, 0, "", "")}


def test_the_manifest_reads_back_as_written(tmp_path):
    fill(tmp_path / "cache")
    m = bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys()).manifest
    data = (tmp_path / "art" / MANIFEST_NAME).read_bytes()
    assert parse(data, "m") == m and data == m.canonical()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.replace(b'"version": 3', b'"version": 2'), "manifest version 2"),
        (lambda d: d.replace(b"b12x-launch/cache-artifact", b"x"), "not a b12x-launch cache"),
        (lambda d: d.replace(b'"path": "b12x/', b'"path": "../b12x/'), "not a relative path"),
        (lambda d: d.replace(b'"path": "b12x/', b'"path": "runs/'), "under none of the caches"),
        (lambda d: d.replace(b'"file_count": ', b'"file_count": 1'), "file_count"),
        (lambda d: d[:40], "not JSON"),
    ],
)
def test_a_damaged_or_foreign_manifest_is_refused_with_the_reason(tmp_path, edit, message):
    fill(tmp_path / "cache")
    bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    data = edit((tmp_path / "art" / MANIFEST_NAME).read_bytes())
    with pytest.raises(ManifestError, match=message):
        parse(data, "art/manifest.json")


def test_an_unsorted_file_list_is_refused():
    raw = make_manifest("p", keys(), [], Calibration()).model_dump(mode="json")
    raw["files"] = [
        {"path": "triton/b", "size": 0, "sha256": "0" * 64, "executable": False, "mtime_ns": 0},
        {"path": "triton/a", "size": 0, "sha256": "0" * 64, "executable": False, "mtime_ns": 0},
    ]
    raw.update(file_count=2, caches={"triton": {"files": 2, "bytes": 0}})
    with pytest.raises(ManifestError, match="not sorted"):
        parse(json.dumps(raw).encode(), "m")


def test_nothing_to_bake_is_refused_with_the_fix(tmp_path):
    (tmp_path / "cache" / "triton").mkdir(parents=True)
    with pytest.raises(ArtifactError, match=r"nothing to bake: .* boot the deployment"):
        bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    assert not (tmp_path / "art").exists()


def test_without_records_it_bakes_and_says_so(tmp_path):
    fill(tmp_path / "cache", fingerprint="eeeeeeeeeeee")
    baked = bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    assert any(f"no measurement records for plan {FP}" in n for n in baked.notes)
    assert baked.manifest.calibration.ranks == []


def test_an_existing_out_is_kept_unless_replace_and_only_an_artifact_is_replaced(tmp_path):
    fill(tmp_path / "cache")
    bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    with pytest.raises(ArtifactError, match="exists: choose another path, or pass --replace"):
        bake(tmp_path / "cache", tmp_path / "art", profile="p", keys=keys())
    again = bake(tmp_path / "cache", tmp_path / "art", profile="q", keys=keys(), replace=True)
    assert parse((tmp_path / "art" / MANIFEST_NAME).read_bytes(), "m") == again.manifest
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep me")
    with pytest.raises(ArtifactError, match="no artifact"):
        bake(tmp_path / "cache", tmp_path / "notes", profile="p", keys=keys(), replace=True)
    assert (tmp_path / "notes" / "mine.txt").read_text() == "keep me"


def test_out_inside_the_cache_root_is_refused(tmp_path):
    fill(tmp_path / "cache")
    with pytest.raises(ArtifactError, match="inside the cache root"):
        bake(tmp_path / "cache", tmp_path / "cache" / "art", profile="p", keys=keys())


def test_a_file_changing_while_it_is_baked_leaves_no_artifact(tmp_path, monkeypatch):
    fill(tmp_path / "cache")
    collect, compiles = bake_mod.collect, iter(range(10))

    def then_a_compile_rewrites_one(root, fingerprint):
        got = collect(root, fingerprint)
        (root / "triton/EF34/_topk.ptx").write_bytes(b"recompiled %d" % next(compiles))
        return got

    monkeypatch.setattr(bake_mod, "collect", then_a_compile_rewrites_one)
    for name in ("art", "art.tar"):
        with pytest.raises(ArtifactError, match=r"changed while it was baked .*_topk.ptx"):
            bake(tmp_path / "cache", tmp_path / name, profile="p", keys=keys())
        assert not (tmp_path / name).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
