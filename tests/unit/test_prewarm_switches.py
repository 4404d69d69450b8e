"""The prewarm stage's switches as profile keys (issue 65): validated, carried to the worker in
the run file's profile, hashed into the fingerprint away from their defaults (compile_times, a
diagnostic, never), said in the plan, and the environment variables they replaced refused."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.cli import cli
from launcher.errors import EnvironmentProblem, ProfileError
from launcher.plan.fingerprint import profile_fingerprint
from launcher.profile import load_profile
from launcher.profile.retired_env import RETIRED, key_value
from tests.conftest import PROFILES

TINY = PROFILES / "tiny-cpu.yaml"


def _prewarm(*sets: str):
    return load_profile(TINY, sets).profile.prewarm


def test_the_defaults_are_what_the_environment_switches_defaulted_to():
    w = _prewarm()
    assert (w.early_keys, w.sampler_ahead, w.inductor_pool, w.compile_times) == (
        True,
        True,
        "auto",
        False,
    )


@pytest.mark.parametrize(("value", "held"), [("auto", "auto"), ("0", 0), ("2", 2), ("12", 12)])
def test_the_inductor_pool_takes_auto_off_or_a_number_of_processes(value, held):
    assert _prewarm(f"prewarm.inductor_pool={value}").inductor_pool == held


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1", "a pool of one process is none"),
        ("-3", "expected auto, 0 (no pool) or a number of compile processes from 2 to 256"),
        ("257", "from 2 to 256"),
        ("many", "expected auto, 0 (no pool)"),
        ("2.5", "expected auto, 0 (no pool)"),
        ("off", "not a yes/no value"),
    ],
)
def test_a_bad_inductor_pool_is_refused_with_what_it_takes(value, said):
    with pytest.raises(ProfileError) as err:
        _prewarm(f"prewarm.inductor_pool={value}")
    (issue,) = err.value.issues
    assert issue.key == "prewarm.inductor_pool" and said in issue.message


@pytest.mark.parametrize("key", ["early_keys", "sampler_ahead", "compile_times"])
def test_a_switch_is_a_boolean(key):
    assert getattr(_prewarm(f"prewarm.{key}=false"), key) is False
    with pytest.raises(ProfileError, match=f"prewarm.{key}"):
        _prewarm(f"prewarm.{key}=sometimes")


def test_the_worker_reads_the_switches_from_the_run_files_profile(tmp_path):
    from launcher.runtime.worker.runplan import RunPlan

    sets = (
        f"runtime.cache_root={tmp_path / 'cache'}",
        "prewarm.early_keys=false",
        "prewarm.sampler_ahead=false",
        "prewarm.inductor_pool=5",
        "prewarm.compile_times=true",
    )
    planned = pipeline.make_plan(pipeline.load(str(TINY), sets))
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    w = RunPlan.from_env(prepared.env).profile.prewarm
    assert (w.early_keys, w.sampler_ahead, w.inductor_pool, w.compile_times) == (
        False,
        False,
        5,
        True,
    )


@pytest.mark.parametrize(
    "setting",
    [
        "prewarm.early_keys=false",
        "prewarm.sampler_ahead=false",
        "prewarm.inductor_pool=0",
        "prewarm.inductor_pool=4",
    ],
)
def test_a_switch_away_from_its_default_changes_the_fingerprint(setting):
    default = profile_fingerprint(load_profile(TINY).profile)
    assert profile_fingerprint(load_profile(TINY, [setting]).profile) != default


@pytest.mark.parametrize(
    "setting",
    [
        "prewarm.early_keys=true",
        "prewarm.sampler_ahead=true",
        "prewarm.inductor_pool=auto",
        "prewarm.compile_times=true",
    ],
)
def test_a_switch_at_its_default_or_the_diagnostic_keeps_the_fingerprint(setting):
    default = profile_fingerprint(load_profile(TINY).profile)
    assert profile_fingerprint(load_profile(TINY, [setting]).profile) == default


def test_the_plan_says_a_switch_set_away_from_its_default_and_nothing_at_the_defaults():
    def notes(*sets: str) -> list[str]:
        return list(pipeline.make_plan(pipeline.load(str(TINY), sets)).plan.notes)

    assert not any(n.startswith("prewarm.") for n in notes())
    said = notes("prewarm.early_keys=false", "prewarm.inductor_pool=0")
    assert [n.split(":")[0] for n in said if n.startswith("prewarm.")] == [
        "prewarm.early_keys false (profile; default true)",
        "prewarm.inductor_pool 0 (profile; default auto)",
    ]


@pytest.mark.parametrize(
    ("name", "value", "key"),
    [
        ("BLAUNCH_EARLY_KEYS", "0", "prewarm.early_keys: false"),
        ("BLAUNCH_SAMPLER_AHEAD", "off", "prewarm.sampler_ahead: false"),
        ("BLAUNCH_INDUCTOR_POOL", "6", "prewarm.inductor_pool: 6"),
        ("BLAUNCH_COMPILE_TIMES", "1", "prewarm.compile_times: true"),
    ],
)
def test_a_retired_variable_in_the_environment_is_refused_naming_its_key(
    monkeypatch, name, value, key
):
    monkeypatch.setenv(name, value)
    with pytest.raises(EnvironmentProblem) as err:
        pipeline.load(str(TINY))
    said = str(err.value)
    assert "\n" not in said
    assert said.startswith(f"{name} is set in the environment") and key in said


def test_the_cli_refuses_a_retired_variable_in_one_line_without_a_traceback(monkeypatch):
    monkeypatch.setenv("BLAUNCH_EARLY_KEYS", "0")
    result = CliRunner().invoke(cli, [str(TINY), "--dry-run"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "set prewarm.early_keys: false in the profile" in lines[0]


def test_an_empty_retired_variable_meant_the_default_and_is_let_through(monkeypatch):
    monkeypatch.setenv("BLAUNCH_SAMPLER_AHEAD", "")
    assert pipeline.load(str(TINY)).profile.prewarm.sampler_ahead is True


def test_a_retired_variable_in_the_profiles_env_is_refused_at_its_key():
    with pytest.raises(ProfileError) as err:
        load_profile(TINY, ["env.BLAUNCH_INDUCTOR_POOL=off"])
    (issue,) = err.value.issues
    assert issue.key == "env.BLAUNCH_INDUCTOR_POOL"
    assert "set prewarm.inductor_pool: 0 in the profile" in issue.message


@pytest.mark.parametrize(
    ("name", "value", "written"),
    [
        ("BLAUNCH_EARLY_KEYS", "yes", "true"),
        ("BLAUNCH_EARLY_KEYS", "maybe", "true"),  # not a switch value: the default it had
        ("BLAUNCH_COMPILE_TIMES", "maybe", "false"),
        ("BLAUNCH_COMPILE_TIMES", "On", "true"),
        ("BLAUNCH_INDUCTOR_POOL", "1", "0"),  # one process was no pool
        ("BLAUNCH_INDUCTOR_POOL", "on", "auto"),  # on: the default share
        ("BLAUNCH_INDUCTOR_POOL", "False", "0"),
    ],
)
def test_the_refusal_suggests_the_value_the_variable_was_read_as(name, value, written):
    assert key_value(name, value) == written


def test_every_retired_variable_names_a_key_of_the_schema():
    for key in RETIRED.values():
        section, name = key.split(".")
        assert section == "prewarm" and hasattr(_prewarm(), name)
