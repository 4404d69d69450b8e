"""The files the launcher writes and reads back outside the run file and the records (issue 65):
each is a contract type, written whole and read back into it; a damaged or foreign one is one
line naming the file; the layout today's launcher wrote before the ``schema`` key still reads."""

from __future__ import annotations

import json

import pytest

from launcher.contract.artifact import JournalEntry, RestoreJournal
from launcher.contract.base import ContractError, read_model
from launcher.contract.build import BuildInfo
from launcher.contract.caches import CacheBaseline
from launcher.contract.emit_manifest import EmitManifest
from launcher.contract.verdicts import Verdicts
from launcher.owned import write as owned_write
from launcher.vllm.registry_record import VllmRegistryRecord

SHA = "ab" * 32
SAMPLES = {
    "restore journal": RestoreJournal(
        artifact_id="0123456789abcdef", files=[JournalEntry(path="triton/ab/k.cubin", sha256=SHA)]
    ),
    "cache baseline": CacheBaseline(
        dirs={"TRITON_CACHE_DIR": "/cache/triton"}, files=["TRITON_CACHE_DIR/ab/k.cubin"]
    ),
    "verdicts file": Verdicts(keys=[SHA]),
    "build file": BuildInfo(build_id="vllm0.33.0-b12x1.5.1-0123456789ab", versions={"vllm": None}),
    "vLLM registry record": VllmRegistryRecord(attention_backends=["FLASH_ATTN"]),
    "emit manifest": EmitManifest(fingerprint="0123456789ab", files={"compose.yaml": SHA}),
}
OLD_SHAPES = {
    "cache baseline": (CacheBaseline, {"dirs": {}, "files": []}),
    "verdicts file": (Verdicts, {"keys": [SHA]}),
    "build file": (
        BuildInfo,
        {
            "build_id": "vllm0.26.0-b12x1.5.1-0123456789ab",
            "epoch": "",
            "machine": "x86_64",
            "python": "3.12.3",
            "versions": {"vllm": "0.26.0", "b12x": None},
        },
    ),
    "restore journal": (RestoreJournal, {"artifact_id": "0" * 16, "files": []}),
}


@pytest.mark.parametrize("what", sorted(SAMPLES))
def test_each_format_reads_back_what_was_written(tmp_path, what):
    model = SAMPLES[what]
    path = owned_write.write_json(tmp_path / "f.json", model.to_json(), root=tmp_path)
    assert read_model(path, type(model), what) == model


@pytest.mark.parametrize("what", sorted(SAMPLES))
@pytest.mark.parametrize("text", ["{half", "[]", '{"unknown": 1}'])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, what, text):
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(ContractError) as caught:
        read_model(path, type(SAMPLES[what]), what)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


@pytest.mark.parametrize("what", sorted(w for w in SAMPLES if w != "restore journal"))
def test_another_layout_is_named_with_what_to_do(tmp_path, what):
    path = tmp_path / "f.json"
    path.write_text(json.dumps({**SAMPLES[what].to_json(), "schema": "b12x-launch/other/9"}))
    with pytest.raises(ContractError, match=r"another layout .*'b12x-launch/other/9'.*: \w"):
        read_model(path, type(SAMPLES[what]), what, fix="do this")


@pytest.mark.parametrize("what", sorted(OLD_SHAPES))
def test_the_layout_written_before_the_schema_key_still_reads(tmp_path, what):
    kind, data = OLD_SHAPES[what]
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data))
    got = read_model(path, kind, what).to_json()
    assert {k: v for k, v in got.items() if k != "schema"} == data


@pytest.mark.parametrize(
    "path", ["../victim.txt", "/etc/passwd", "triton/../../x", "triton//k", "elsewhere/k", "triton"]
)
def test_a_journal_naming_a_path_outside_the_caches_fails_validation(tmp_path, path):
    """The type refuses it before any removal is tried (the removal checks stay behind it)."""
    journal = tmp_path / "j"
    entry = {"path": path, "sha256": SHA}
    journal.write_text(json.dumps({"artifact_id": "0" * 16, "files": [entry]}))
    with pytest.raises(ContractError, match=r"files\.0\.path"):
        read_model(journal, RestoreJournal, "restore journal")


@pytest.mark.parametrize("name", ["../x.yaml", "a/b.yaml", "..", "."])
def test_an_emit_manifest_naming_a_file_outside_its_directory_fails_validation(tmp_path, name):
    path = tmp_path / "m"
    path.write_text(json.dumps({"schema": "b12x-launch/emit-manifest/1", "files": {name: SHA}}))
    with pytest.raises(ContractError, match="not a file name directly in the directory"):
        read_model(path, EmitManifest, "emit manifest")
