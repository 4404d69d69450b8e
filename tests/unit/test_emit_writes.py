"""``emit`` writes and deletes only files it made (issue 41, case 1): a hand-written
``service.yaml`` was overwritten and a ``profile.notes.yaml`` deleted by ``--replace``, and
emitting the same plan again with ``--target compose`` was refused as another emit. Emit now
records its files in ``b12x-launch-emit.manifest`` and treats every other file as the
operator's."""

from __future__ import annotations

import json

from click.testing import CliRunner

from launcher.cli import cli
from launcher.emit.manifest import MANIFEST
from tests.conftest import PROFILES

GLM = str(PROFILES / "glm52.yaml")
TWO_NODE = str(PROFILES / "glm52-2node.yaml")
MINE = "# my own Service, not emit's\nkind: Service\n"


def emit(*args: str):
    result = CliRunner().invoke(cli, ["emit", *args])
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result


def test_the_operators_files_are_never_written_over_or_deleted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "service.yaml").write_text(MINE)
    (out / "profile.notes.yaml").write_text("notes: mine\n")
    for replace in ([], ["--replace"]):
        result = emit(GLM, str(out), *replace)
        assert result.exit_code == 1, result.output
        assert "service.yaml (not written by emit)" in result.stderr
        assert "--replace or not" in result.stderr
    assert (out / "service.yaml").read_text() == MINE
    assert (out / "profile.notes.yaml").read_text() == "notes: mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["profile.notes.yaml", "service.yaml"]


def test_a_file_that_is_no_name_emit_writes_is_left_alone(tmp_path):
    out = tmp_path / "out"
    assert emit(TWO_NODE, str(out)).exit_code == 0
    (out / "profile.notes.yaml").write_text("notes: mine\n")
    assert emit(GLM, str(out), "--replace").exit_code == 0
    assert (out / "profile.notes.yaml").read_text() == "notes: mine\n"
    assert not (out / "compose.node1.yaml").exists()  # emit's own, of the other plan


def test_the_same_plan_again_for_one_target_is_not_another_emit(tmp_path):
    out = tmp_path / "out"
    assert emit(GLM, str(out)).exit_code == 0
    again = emit(GLM, str(out), "--target", "compose")
    assert again.exit_code == 0, again.output
    assert (out / "leaderworkerset.yaml").exists()  # the same plan's other target stays
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert "leaderworkerset.yaml" in listed and "compose.node0.yaml" in listed


def test_a_file_edited_since_emit_wrote_it_is_the_operators(tmp_path):
    out = tmp_path / "out"
    assert emit(GLM, str(out)).exit_code == 0
    (out / "service.yaml").write_text(MINE)
    result = emit(GLM, str(out), "--replace")
    assert result.exit_code == 1 and "service.yaml (edited since emit wrote it)" in result.stderr
    assert (out / "service.yaml").read_text() == MINE


def test_a_manifest_cannot_point_emit_outside_its_directory(tmp_path):
    out = tmp_path / "out"
    victim = tmp_path / "victim.yaml"
    victim.write_text("keep me\n")
    out.mkdir()
    forged = {"schema": "b12x-launch/emit-manifest/1", "fingerprint": "x",
              "files": {"../victim.yaml": "0" * 64, "compose.node1.yaml": "0" * 64}}  # fmt: skip
    (out / MANIFEST).write_text(json.dumps(forged))
    result = emit(GLM, str(out), "--replace")
    assert result.exit_code == 1 and "not a file name directly in the directory" in result.stderr
    assert victim.read_text() == "keep me\n"
    assert not (out / "leaderworkerset.yaml").exists()
