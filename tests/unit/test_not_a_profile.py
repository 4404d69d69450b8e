"""What does not look like a profile is refused on its first line, none of it shown (issue 41,
case 5): ``extends: /etc/shadow`` printed every line of the file, hashes included, as unknown
keys. Every profile is read as a regular file of at most 1 MiB: a device, a FIFO or a huge file
is refused by name before it is read."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from launcher import entrypoint
from launcher.cli import cli
from tests.conftest import PROFILES, deadline, run_cli

HASH = "$6$rounds=5000$PLANTEDsalt$PLANTEDhashPLANTEDhashPLANTEDhash"
SHADOW = f"root:{HASH}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\nname: x\n"


def validate(*paths) -> tuple[int, str]:
    with deadline(20):
        result = CliRunner().invoke(cli, ["validate", *map(str, paths)])
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result.exit_code, result.output


def test_extends_of_a_file_that_is_not_a_profile_shows_none_of_it(write):
    shadow = write("shadow", SHADOW)
    child = write("p.yaml", f"# mine\nextends: {shadow}\n")
    code, out = validate(child)
    assert code == 1
    assert f"error: {shadow}:1: not a b12x-launch profile" in out
    assert f"named by {child}:2 extends" in out
    assert "PLANTED" not in out and "root:" not in out and "daemon" not in out


def test_a_file_that_is_not_a_profile_named_directly_shows_none_of_it(write):
    code, out = validate(write("shadow", SHADOW))
    assert code == 1 and "not a b12x-launch profile" in out
    assert "PLANTED" not in out and "daemon" not in out


def test_a_profile_with_a_typo_in_its_first_section_still_gets_did_you_mean(write):
    code, out = validate(
        write("p.yaml", f"hardwre:\n  gpu: cpu\nextends: {PROFILES}/tiny-cpu.yaml\n")
    )
    assert code == 1 and "did you mean 'hardware'" in out


def test_a_list_is_refused_as_not_a_mapping_without_its_items(write):
    code, out = validate(write("p.yaml", "- PLANTED-item\n- b\n"))
    assert code == 1 and "a profile is a mapping" in out and "PLANTED" not in out


@pytest.mark.parametrize("kind", ["device", "fifo", "large", "binary"])
def test_a_file_no_profile_is_refused_by_name_without_reading_it(tmp_path, kind):
    if kind == "device":
        path = "/dev/zero"
    else:
        path = tmp_path / "p.yaml"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "large":
            path.write_text("name: x\n" + "# PLANTED padding\n" * 70_000)
        else:
            path.write_bytes(b"\x7fELF\xff\xfe PLANTED")
    # in a subprocess under a time and memory limit: a reader of /dev/zero never returns
    result = run_cli(["validate", str(path)], timeout=30)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert f"error: {path}" in out and "not a b12x-launch profile" in out
    assert "PLANTED" not in out and "Traceback" not in out


def test_extends_of_a_device_names_the_extends_line(write):
    code, out = validate(write("p.yaml", "extends: /dev/zero\n"))
    assert code == 1 and "extends" in out and "/dev/zero" in out


def test_the_container_finds_no_profile_outside_its_profile_directories(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mine.yaml").write_text("name: mine\n")
    (tmp_path / "secret.yaml").write_text("name: other\n")
    cwd = tmp_path / "a" / "b" / "c"  # where ../secret.yaml is no file
    cwd.mkdir(parents=True)
    assert entrypoint.resolve_profile("mine", [profiles], cwd) == str(profiles / "mine.yaml")
    # ../secret.yaml from the profile directory lies outside it: left for b12x-launch to report
    assert entrypoint.resolve_profile("../secret.yaml", [profiles], cwd) == "../secret.yaml"
    assert entrypoint.resolve_profile("../../etc/shadow", [profiles], cwd) == "../../etc/shadow"


@pytest.mark.parametrize(
    "head", ["", "# a comment\n", "---\n", "--- # the profile\n", "%YAML 1.1\n---\n", "\ufeff"]
)
def test_a_profile_with_a_header_before_its_first_section_is_read(write, head):
    code, out = validate(write("p.yaml", f"{head}extends: {PROFILES}/tiny-cpu.yaml\n"))
    assert code == 0, out
