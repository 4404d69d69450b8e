"""Numbers as YAML 1.2 reads them (issue 41, case 8): PyYAML follows YAML 1.1, where
``010000`` is the octal 4096 and ``1:30`` the base-60 number 90. A profile or a ``--set`` value
in one of those forms is refused where it stands, with the spelling of each reading; the forms
both versions read alike are numbers as before."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.errors import ProfileError
from launcher.profile import load_profile
from launcher.profile.yamlsource import ValueIssues, read_value
from tests.conftest import PROFILES

TINY = str(PROFILES / "tiny-cpu.yaml")


@pytest.mark.parametrize(
    ("setting", "yaml11", "fix"),
    [
        ("serving.port=010000", "4096", "write 10000"),
        ("serving.port=1:30", "base-60 number 90", "write 90"),
        ("serving.max_model_len=01000000", "262144", "write 1000000"),
    ],
)
def test_a_yaml11_number_on_the_command_line_is_refused(setting, yaml11, fix):
    result = CliRunner().invoke(cli, [TINY, "--dry-run", "--set", setting])
    assert result.exit_code == 1, result.output
    key = setting.partition("=")[0]
    assert result.stderr.startswith(f"error: --set {key}: "), result.stderr
    assert yaml11 in result.stderr and fix in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


def test_a_yaml11_number_in_a_profile_is_refused_at_its_line(write):
    path = write("p.yaml", f"extends: {TINY}\nserving:\n  port: 010000\nenv:\n  T: 1:30\n")
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    found = {(i.key, i.line) for i in exc.value.issues}
    assert found == {("serving.port", 3), ("env.T", 5)}
    assert "octal number 4096" in str(exc.value) and '"1:30"' in str(exc.value)


def test_a_yaml11_number_inside_a_mapping_value_names_its_key():
    with pytest.raises(ValueIssues) as exc:
        read_value("{port: 010, nested: {t: 2:00}}")
    assert [i.key for i in exc.value.issues] == ["port", "nested.t"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10000", 10000),
        ("0", 0),
        ("-7", -7),
        ("0x1F", 31),
        ("0o17", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("1.5", 1.5),
        ("-1.5e+3", -1500.0),
        ('"010000"', "010000"),
        ('"1:30"', "1:30"),
        ("10.0.0.1", "10.0.0.1"),
        ("expandable_segments:True", "expandable_segments:True"),
    ],
)
def test_numbers_both_versions_read_alike_are_read(text, value):
    assert read_value(text) == value


def test_a_quoted_leading_zero_stays_text_in_the_environment():
    loaded = load_profile(TINY, ('env.X="0123"', "serving.port=10000"))
    assert loaded.profile.env["X"] == "0123"
    assert loaded.profile.serving.port == 10000
