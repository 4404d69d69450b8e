"""Settings that would make what runs differ from the plan (``launcher.profile.settings_checks``),
and the CLI's refusals that used to be tracebacks or misleading (issue 31)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.profile import extra_args
from launcher.profile.vllm_flags import FLAG_KEYS
from launcher.vllm.options import load_table
from tests.conftest import PROFILES

GLM = str(PROFILES / "glm52.yaml")


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("spelling", sorted(FLAG_KEYS))
def test_every_flag_the_planner_writes_is_protected(spelling):
    takes = load_table().by_option[spelling].takes
    found = extra_args.findings([spelling] if takes == "0" else [spelling, "1"])
    assert [(f.index, f.kind) for f in found] == [(0, "plan")], found
    assert FLAG_KEYS[spelling] in found[0].message


def test_force_lets_a_planned_flag_through_and_it_runs_last():
    args = (GLM, "--dry-run", "--set", "vllm.extra_args=[--max-model-len, '4096']")
    refused = run(*args)
    assert refused.exit_code == 1 and "--force" in refused.output
    forced = run(*args, "--force")
    assert forced.exit_code == 0, forced.output
    assert "--max-model-len 4096" in forced.output


def test_an_entry_point_or_dotted_provider_is_accepted():
    result = run(GLM, "--dry-run", "--set", "prewarm.providers=[b12x, pkg.mod:Provider]")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("setting", "warned"),
    [
        ("vllm.worker_cls=my.pkg.Worker", "vllm.worker_cls: my.pkg.Worker is not the planned"),
        ("hardware.memory=96GB", "hardware.memory: is 96 GB = 89.41 GiB"),
    ],
)
def test_warned_settings(setting, warned):
    result = run("validate", GLM, "--set", setting)
    assert result.exit_code == 0, result.output
    assert f"warning: --set {warned}" in result.stderr


@pytest.mark.parametrize("other", ["--json", "--dry-run"])
def test_print_command_is_not_combined_with_a_plan(other):
    result = run(GLM, "--print-command", other)
    assert result.exit_code == 2
    assert "--print-command prints the launch line alone" in result.output
    assert "Traceback" not in result.output


def test_plot_into_a_missing_folder_is_refused(tmp_path):
    result = run(GLM, "--plot", str(tmp_path / "no" / "plan.svg"))
    assert result.exit_code == 2
    assert "does not exist; create it first" in result.output
    assert "internal error" not in result.output


def test_b12x_sizing_without_triton_is_an_environment_problem(monkeypatch):
    import sys
    import types

    from launcher.plan import b12x_sizing

    monkeypatch.setitem(sys.modules, "b12x", types.ModuleType("b12x"))
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))

    def no_triton(*a, **k):
        raise ModuleNotFoundError("No module named 'triton'", name="triton")

    monkeypatch.setattr(b12x_sizing, "specs", no_triton)
    result = run(GLM, "--dry-run", "--b12x-sizing")
    assert result.exit_code == 1, result.output
    assert "b12x needs triton" in result.output and "internal error" not in result.output


def test_a_bare_name_outside_the_checkout_says_where_profiles_are(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("glm52", "--dry-run")
    assert result.exit_code == 1
    assert "file not found; a profile is a file path" in result.output
    assert "/opt/b12x-launch/profiles" in result.output


def test_a_bare_name_in_the_checkout_is_pointed_at(monkeypatch):
    monkeypatch.chdir(PROFILES.parent)
    result = run("glm52", "--dry-run")
    assert "did you mean profiles/glm52.yaml?" in result.output
