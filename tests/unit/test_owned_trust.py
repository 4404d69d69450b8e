"""What a writer of the cache volume, an artifact or an output path cannot make the launcher do
(issue 64): delete or write outside the trees it owns, follow a link, write past a size, plant
another plan's records, or replace what it did not make. Each case failed before the
owned-files boundary (``launcher.owned``)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import random
import shutil
import tarfile

import pytest

from launcher.artifact import FILES_DIR, MANIFEST_NAME, ArtifactError
from launcher.artifact import archive as archive_mod
from launcher.artifact import restore as restore_mod
from launcher.artifact import seed as seed_mod
from launcher.artifact.bake import bake
from launcher.artifact.manifest import FileEntry, Manifest, make_manifest, parse, summarise
from launcher.artifact.restore import JOURNAL, recover_interrupted, restore
from launcher.artifact.seed import main as seed_main
from launcher.buildid import BUILD_ID_ENV
from tests.unit.artifact_caches import OTHER_FP, fill, keys, tree


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def same_build(monkeypatch):
    """The image seed runs in is the build the artifacts were baked for."""
    monkeypatch.setenv(BUILD_ID_ENV, keys().build_id)


# --- 1. the restore journal -----------------------------------------------------------------


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_a_forged_journal_deletes_nothing_outside_the_cache_root(tmp_path, form):
    root = tmp_path / "cache"
    root.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"the operator's file")
    rel = "../victim.txt" if form == "relative" else str(victim)
    journal = {
        "artifact_id": "0123456789abcdef",
        "files": [{"path": rel, "sha256": sha(b"the operator's file")}],
    }
    (root / JOURNAL).write_text(json.dumps(journal))
    recover_interrupted(root)
    assert victim.read_bytes() == b"the operator's file"
    assert not (root / JOURNAL).exists()


def test_a_journal_through_a_link_deletes_nothing_behind_it(tmp_path):
    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (elsewhere / "k").write_bytes(b"key")
    (root / "triton").symlink_to(elsewhere)
    journal = {
        "artifact_id": "0123456789abcdef",
        "files": [{"path": "triton/k", "sha256": sha(b"key")}],
    }
    (root / JOURNAL).write_text(json.dumps(journal))
    recover_interrupted(root)
    assert (elsewhere / "k").read_bytes() == b"key"


def test_a_journal_past_its_limit_is_not_read_and_deletes_nothing(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    (root / "triton").mkdir(parents=True)
    (root / "triton" / "a").write_bytes(b"a")
    files = [{"path": "triton/a", "sha256": sha(b"a")}] + [
        {"path": f"triton/pad{i}", "sha256": "0" * 64} for i in range(50)
    ]
    (root / JOURNAL).write_text(json.dumps({"artifact_id": "0123456789abcdef", "files": files}))
    monkeypatch.setattr(restore_mod, "JOURNAL_MAX", 1000)
    note = recover_interrupted(root)
    assert (root / "triton" / "a").exists() and "not read" in (note or "")
    assert not (root / JOURNAL).exists()


def test_a_forged_marker_name_in_a_journal_deletes_nothing(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    (root / restore_mod.MARKERS).mkdir()
    victim = tmp_path / "v.json"
    victim.write_text("{}")
    journal = {"artifact_id": "../../v", "files": []}
    (root / JOURNAL).write_text(json.dumps(journal))
    recover_interrupted(root)
    assert victim.exists()


# --- 2. seed replaces only an artifact it made -----------------------------------------------


@pytest.fixture
def shipped(tmp_path):
    fill(tmp_path / "c")
    path = tmp_path / "ship" / "art"
    bake(tmp_path / "c", path, profile="p", keys=keys())
    return path


def test_seed_refuses_a_dest_that_is_a_users_directory(shipped, tmp_path, capsys, same_build):
    dest = tmp_path / "home"
    (dest / "notes").mkdir(parents=True)
    (dest / "notes" / "todo.txt").write_text("mine")
    assert seed_main([str(shipped), str(dest)]) == 1
    err = capsys.readouterr().err
    assert str(dest) in err and "Traceback" not in err and "choose" in err
    assert (dest / "notes" / "todo.txt").read_text() == "mine"


def test_seed_refuses_a_dest_that_is_a_plain_file(shipped, tmp_path, capsys, same_build):
    dest = tmp_path / "file"
    dest.write_text("data")
    assert seed_main([str(shipped), str(dest)]) == 1
    assert dest.read_text() == "data"


def test_seed_into_the_sources_parent_leaves_the_source(shipped, tmp_path, same_build):
    before = tree(shipped)
    assert seed_main([str(shipped), str(shipped.parent)]) == 1
    assert tree(shipped) == before


def test_seed_refuses_an_artifact_of_another_build(shipped, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(BUILD_ID_ENV, "vllm0.99-b12x9-ffffffffffff")
    dest = tmp_path / "cache" / "artifacts" / "x"
    assert seed_main([str(shipped), str(dest)]) == 1
    assert "build_id" in capsys.readouterr().err and not dest.exists()


def test_seed_refuses_an_artifact_larger_than_the_volume_has_room_for(
    shipped, tmp_path, capsys, monkeypatch, same_build
):
    monkeypatch.setattr(seed_mod, "free_bytes", lambda path: 100)
    dest = tmp_path / "cache" / "artifacts" / "x"
    assert seed_main([str(shipped), str(dest)]) == 1
    assert "free" in capsys.readouterr().err and not dest.exists()


# --- 3. a member larger than its entry ---------------------------------------------------------


def _bomb(tmp_path, member_bytes: int):
    """A .tar.gz whose manifest lists a 16-byte file and whose member holds ``member_bytes``."""
    small = b"0123456789abcdef"
    entry = FileEntry(path="triton/x/k.bin", size=len(small), sha256=sha(small), mtime_ns=0)
    m = make_manifest("p", keys(), [entry], _cal())
    out = tmp_path / "bomb.tar.gz"
    with gzip.open(out, "wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        data = m.canonical()
        info = tarfile.TarInfo(MANIFEST_NAME)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"{FILES_DIR}/triton/x/k.bin")
        info.size = member_bytes
        tar.addfile(info, io.BytesIO(bytes(member_bytes)))
    return out


def _cal():
    from launcher.artifact.manifest import Calibration

    return Calibration()


def test_a_member_larger_than_its_entry_is_cut_off_while_it_is_copied(tmp_path):
    bomb = _bomb(tmp_path, 8 << 20)
    assert bomb.stat().st_size < 1 << 20
    out = tmp_path / "out"
    out.mkdir()
    with (
        archive_mod.open_artifact(bomb) as reader,
        pytest.raises((archive_mod.Mismatch, ValueError)),
    ):
        archive_mod.extract(reader, out)
    assert sum(len(v) for v in tree(out).values()) <= 16


def test_a_bomb_is_refused_by_restore_and_seed_naming_the_file(tmp_path, capsys, same_build):
    bomb = _bomb(tmp_path, 4 << 20)
    root = tmp_path / "cache"
    root.mkdir()
    with pytest.raises(ArtifactError, match=r"triton/x/k\.bin"):
        restore(bomb, root, keys())
    assert seed_main([str(bomb), str(tmp_path / "seeded")]) == 1
    assert "triton/x/k.bin" in capsys.readouterr().err
    assert not (tmp_path / "seeded").exists()


# --- 4. an artifact restores only its own plan's records ---------------------------------------


def test_an_artifact_listing_another_plans_records_is_refused(tmp_path):
    fill(tmp_path / "c")
    art = tmp_path / "art"
    bake(tmp_path / "c", art, profile="p", keys=keys())
    m = parse((art / MANIFEST_NAME).read_bytes(), "m")
    planted = b'{"schema": "b12x-launch/qualified/1", "blocks": 2100}\n'
    rel = f"calibration/{OTHER_FP}/qualified.json"
    (art / FILES_DIR / rel).parent.mkdir(parents=True)
    (art / FILES_DIR / rel).write_bytes(planted)
    entry = FileEntry(path=rel, size=len(planted), sha256=sha(planted), mtime_ns=0)
    files = sorted([*m.files, entry], key=lambda f: f.path)
    forged = Manifest.model_construct(  # as a forger writes it: the reader must check
        **{
            **{k: getattr(m, k) for k in Manifest.model_fields},
            "files": files,
            "caches": summarise(files),
            "file_count": len(files),
            "total_bytes": m.total_bytes + entry.size,
        }
    )
    (art / MANIFEST_NAME).write_bytes(forged.canonical())
    root = tmp_path / "node"
    root.mkdir()
    with pytest.raises(ArtifactError, match=OTHER_FP):
        restore(art, root, keys())
    assert not (root / "calibration" / OTHER_FP).exists()


# --- 5. bake --replace replaces only an artifact -----------------------------------------------


def test_replace_keeps_a_directory_that_only_holds_a_manifest_json(tmp_path):
    fill(tmp_path / "c")
    site = tmp_path / "site"
    site.mkdir()
    (site / MANIFEST_NAME).write_text('{"name": "web app"}')
    (site / "index.html").write_text("<html>")
    with pytest.raises(ArtifactError, match="site"):
        bake(tmp_path / "c", site, profile="p", keys=keys(), replace=True)
    assert (site / "index.html").read_text() == "<html>"


def test_replace_keeps_a_tar_that_is_no_artifact(tmp_path):
    fill(tmp_path / "c")
    backup = tmp_path / "backup.tar"
    with tarfile.open(backup, "w") as tar:
        info = tarfile.TarInfo("home/notes.txt")
        tar.addfile(info, io.BytesIO(b""))
    before = backup.read_bytes()
    with pytest.raises(ArtifactError, match=r"backup\.tar"):
        bake(tmp_path / "c", backup, profile="p", keys=keys(), replace=True)
    assert backup.read_bytes() == before


def test_replace_keeps_an_artifact_directory_someone_added_to(tmp_path):
    fill(tmp_path / "c")
    art = tmp_path / "art"
    bake(tmp_path / "c", art, profile="p", keys=keys())
    (art / "README").write_text("mine")
    with pytest.raises(ArtifactError, match="README"):
        bake(tmp_path / "c", art, profile="p", keys=keys(), replace=True)
    assert (art / "README").read_text() == "mine"


@pytest.mark.parametrize("name", ["art", "art.tar", "art.tar.gz"])
def test_replace_replaces_an_artifact_the_launcher_baked(tmp_path, name):
    fill(tmp_path / "c")
    out = tmp_path / name
    bake(tmp_path / "c", out, profile="old", keys=keys())
    baked = bake(tmp_path / "c", out, profile="new", keys=keys(), replace=True)
    assert baked.manifest.profile == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c", name])


# --- 6. links in the cache root ---------------------------------------------------------------


def test_bake_leaves_out_a_linked_cache_directory_and_says_so(tmp_path):
    root = tmp_path / "c"
    fill(root)
    secret = tmp_path / "home" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_ed25519").write_text("PRIVATE KEY")
    (root / "cute-dsl").rename(tmp_path / "moved")
    (root / "cute-dsl").symlink_to(secret)
    baked = bake(root, tmp_path / "art", profile="p", keys=keys())
    assert not any(f.path.startswith("cute-dsl/") for f in baked.manifest.files)
    assert any("cute-dsl" in n and "link" in n for n in baked.notes)


def test_bake_leaves_out_a_linked_calibration_folder(tmp_path):
    root = tmp_path / "c"
    fill(root)
    other = tmp_path / "other"
    (root / "calibration" / "0123456789ab").rename(other)
    (root / "calibration" / "0123456789ab").symlink_to(other)
    baked = bake(root, tmp_path / "art", profile="p", keys=keys())
    assert not any(f.path.startswith("calibration/") for f in baked.manifest.files)
    assert any("calibration" in n and "link" in n for n in baked.notes)
    assert baked.manifest.calibration.ranks == [] and not baked.manifest.calibration.qualified


def test_restore_writes_nothing_through_a_linked_cache_directory(tmp_path):
    fill(tmp_path / "c")
    art = tmp_path / "art"
    bake(tmp_path / "c", art, profile="p", keys=keys())
    root, elsewhere = tmp_path / "node", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "triton").symlink_to(elsewhere)
    with pytest.raises(ArtifactError, match="link"):
        restore(art, root, keys())
    assert list(elsewhere.iterdir()) == []
    assert not (root / "inductor").exists()


# --- the calibration store ----------------------------------------------------------------------


def _linked_store(tmp_path):
    """A cache root whose plan folder in the store is a link to a directory elsewhere."""
    from tests.unit.artifact_caches import FP

    root, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    (root / "calibration").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "qualified.json").write_text("the other directory's own")
    (root / "calibration" / FP).symlink_to(elsewhere)
    return root, elsewhere


def test_the_store_writes_no_record_through_a_linked_folder(tmp_path):
    from launcher.contract import store
    from launcher.contract.record import read_record
    from tests.unit.artifact_caches import record

    root, elsewhere = _linked_store(tmp_path)
    (tmp_path / "rank0.json").write_bytes(record(0))
    rec = read_record(tmp_path / "rank0.json")
    with pytest.raises(ValueError, match="link"):  # the worker logs it and boots on
        store.save_record(rec, None, root, "h200")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["qualified.json"]


def test_withdrawing_the_qualified_size_deletes_nothing_through_a_link(tmp_path):
    from launcher.contract import store
    from tests.unit.artifact_caches import FP

    root, elsewhere = _linked_store(tmp_path)
    store.withdraw_qualified(root, FP)
    assert (elsewhere / "qualified.json").read_text() == "the other directory's own"


def test_a_marker_through_a_link_or_under_another_name_is_not_read_as_a_restore(tmp_path):
    from launcher.artifact.restore import MARKERS, restored_in

    fill(tmp_path / "c")
    art = tmp_path / "art"
    bake(tmp_path / "c", art, profile="p", keys=keys())
    root = tmp_path / "node"
    root.mkdir()
    record = restore(art, root, keys())
    markers = root / MARKERS
    real = markers / f"{record.artifact_id}.json"
    (markers / "ffffffffffffffff.json").write_bytes(real.read_bytes())
    (tmp_path / "elsewhere.json").write_bytes(real.read_bytes())
    (markers / "0000000000000000.json").symlink_to(tmp_path / "elsewhere.json")
    assert [r.artifact_id for _, r in restored_in(root)] == [record.artifact_id]


# --- generated: journals of every shape -------------------------------------------------------

JOURNAL_SEED = int(os.environ.get("BLAUNCH_OWNED_SEED", "64"))
PIECES = ["..", ".", "", "triton", "link", "victim.txt", "k", "/", "a\\b", "\x00", "%2e%2e"]


def _snapshot(path):
    return {
        p.relative_to(path).as_posix(): (
            p.read_bytes() if p.is_file() and not p.is_symlink() else ""
        )
        for p in path.rglob("*")
    }


def test_no_generated_journal_changes_anything_outside_the_cache_root(tmp_path):
    """Every path shape a forger may write (``..``, absolute, through a link, odd bytes), with
    the sha256 of a file outside: the next launch's recovery removes none of them."""
    print(f"seed {JOURNAL_SEED} (BLAUNCH_OWNED_SEED=N for another)")
    rng = random.Random(JOURNAL_SEED)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"v")
    (outside / "k").write_bytes(b"k")
    shas = [sha(b"v"), sha(b"k")]
    root = tmp_path / "cache"
    for case in range(60):
        root.mkdir()
        (root / "triton").mkdir()
        (root / "link").symlink_to(outside)
        files = []
        for _ in range(rng.randint(1, 6)):
            rel = "/".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5)))
            if rng.random() < 0.2:
                rel = str(outside / rng.choice(["victim.txt", "k"]))
            files.append({"path": rel or "x", "sha256": rng.choice(shas)})
        journal = {"artifact_id": "0123456789abcdef", "files": files}
        (root / JOURNAL).write_text(json.dumps(journal))
        before = _snapshot(tmp_path / "outside")
        recover_interrupted(root)
        assert _snapshot(tmp_path / "outside") == before, (case, files)
        assert not os.path.lexists(root / JOURNAL)
        shutil.rmtree(root)


def test_the_stores_verdicts_file_is_read_bounded_and_written_through_no_link(tmp_path):
    """``vllm-verdicts.json`` lies in the plan's store folder on the shared volume: a FIFO
    there must not hang a launch, a huge one is not read, and a linked folder takes no write."""
    from launcher.launch import verdicts
    from tests.unit.artifact_caches import FP

    folder = tmp_path / "cache" / "calibration" / FP
    folder.mkdir(parents=True)
    os.mkfifo(folder / verdicts.FILE)
    assert verdicts._keys(folder) == []  # a FIFO with no writer: refused, not waited on
    (folder / verdicts.FILE).unlink()
    (folder / verdicts.FILE).write_text(json.dumps({"keys": ["k" * 64] * 40000}))
    assert verdicts._keys(folder) == []  # past its bound
    root, elsewhere = _linked_store(tmp_path / "linked")
    verdicts.remember(root / "calibration" / FP, "0" * 64)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["qualified.json"]


def test_a_fifo_or_a_huge_factor_file_in_the_cache_is_passed_over(tmp_path, monkeypatch):
    from launcher.vllm import compile_cache

    part = tmp_path / compile_cache.TORCH_COMPILE / "abc" / "rank_0_0" / "backbone"
    part.mkdir(parents=True)
    os.mkfifo(part / compile_cache.FACTORS)
    other = part.parent / "eagle_head"
    other.mkdir()
    (other / compile_cache.FACTORS).write_text(json.dumps({"pad": "x" * 200}))
    monkeypatch.setattr(compile_cache, "FACTORS_MAX", 100)
    assert list(compile_cache.factor_files(tmp_path)) == []
