"""The command line: exit codes, output, and an import-light dry run."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import MINIMAL, PROFILES, ROOT

GLM = str(PROFILES / "glm52.yaml")


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_dry_run_prints_table_and_command():
    result = run(GLM, "--dry-run")
    assert result.exit_code == 0, result.output
    for text in (
        "Memory plan: glm52-exl3-tp4-dcp4-mtp3",
        "weights",
        "kv_cache",
        "estimate",
        "vllm serve /models/GLM-5.2-EXL3-TR3-3.42bpw",
        "--decode-context-parallel-size 4",
        "--worker-cls launcher.worker.PlannedWorker",
        "B12X_COMPILE_CACHE_DIR=",
    ):
        assert text in result.output


def test_json_contract():
    result = run(GLM, "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert {"profile", "fits", "ranks", "kv", "vllm"} <= set(data)
    assert data["fits"] is True and len(data["ranks"]) == 4
    rank = data["ranks"][0]
    assert {"rank", "total_bytes", "components"} <= set(rank)
    for name in (
        "cuda_context",
        "weights",
        "activation_peak",
        "workspaces",
        "cudagraph_pool",
        "jit_headroom",
        "safety_margin",
        "kv_cache",
    ):
        assert set(rank["components"][name]) >= {"bytes", "source"}
    assert {
        "bytes_per_token_per_rank",
        "block_tokens",
        "blocks_per_rank",
        "tokens",
        "max_model_len",
        "max_concurrency",
        "bounding_rank",
    } <= set(data["kv"])
    assert data["vllm"]["argv"][:2] == ["vllm", "serve"]
    assert isinstance(data["vllm"]["env"], dict)


def test_set_changes_the_plan():
    base = json.loads(run(GLM, "--json").output)
    half = json.loads(
        run(
            GLM,
            "--json",
            "--set",
            "parallel.decode_context=2",
            "--set",
            "serving.max_model_len=131072",
        ).output
    )
    assert half["kv"]["bytes_per_token_per_rank"] == 2 * base["kv"]["bytes_per_token_per_rank"]


def test_does_not_fit_exits_3_with_the_fix():
    result = run(GLM, "--dry-run", "--set", "serving.max_model_len=1048576")
    assert result.exit_code == 3
    assert "DOES NOT FIT" in result.output and "--set serving.max_model_len=" in result.output


def test_bad_profile_exits_1_without_traceback(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL.replace("decode_context: 4", "decode_context: 3"))
    result = CliRunner().invoke(cli, [str(path), "--dry-run"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert f"{path}:11 parallel.decode_context: must divide" in result.output


def test_missing_profile_file():
    result = CliRunner().invoke(cli, ["/nonexistent.yaml", "--dry-run"])
    assert result.exit_code == 1 and "file not found" in result.output


def test_unknown_gpu_kind_is_located(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL.replace("gpu: rtx-pro-6000", "gpu: rtx-pro-600"))
    result = CliRunner().invoke(cli, [str(path), "--dry-run"])
    assert result.exit_code == 1
    assert (
        ":7 hardware.gpu: unknown GPU kind 'rtx-pro-600'; did you mean 'rtx-pro-6000'"
        in result.output
    )


def test_bad_usage_exits_2():
    assert CliRunner().invoke(cli, [GLM, "--no-such-flag"]).exit_code == 2


def test_validate_all_shipped_profiles():
    result = run("validate", *map(str, sorted(PROFILES.glob("*.yaml"))))
    assert result.exit_code == 0 and result.output.count("ok: ") == len(
        list(PROFILES.glob("*.yaml"))
    )


def test_validate_reports_each_bad_profile(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {path: x}\n")
    result = CliRunner().invoke(cli, ["validate", GLM, str(bad)])
    assert (
        result.exit_code == 1 and "ok: " in result.output and "serving: required" in result.output
    )


def test_schema_has_descriptions():
    """Every field of every section carries its docstring as the JSON Schema description."""
    schema = json.loads(run("schema").output)
    assert schema["properties"]["serving"] and "extends" in schema["properties"]
    sections = schema.get("$defs", {})
    assert len(sections) >= 8
    missing = [
        f"{name}.{field}"
        for name, section in sections.items()
        for field, spec in section.get("properties", {}).items()
        if not (spec.get("description") or "").strip()
    ]
    assert not missing, missing


def test_print_command_is_one_shell_line_with_its_environment(tmp_path):
    """What runs: ``env K=V ... vllm serve ...``, one line sh reads, with the plan the planned
    worker needs (written, so the line works as printed) and the switch that makes a worker
    without it refuse."""
    result = CliRunner().invoke(cli, [GLM, "--print-command", "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    line = result.stdout
    assert line.count("\n") == 1 and line.startswith("env ")
    assert "Memory plan" not in line
    subprocess.run(["sh", "-n", "-c", line], check=True)
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in words[1 : words.index("vllm")])
    assert words[words.index("vllm") : words.index("vllm") + 2] == ["vllm", "serve"]
    assert env["BLAUNCH_REQUIRE_PLAN"] == "1"
    plan = json.loads(Path(env["BLAUNCH_PLAN"]).read_text())
    assert plan["fingerprint"] == env["BLAUNCH_FINGERPRINT"]
    assert plan["profile_data"]["model"]["path"] == "/models/GLM-5.2-EXL3-TR3-3.42bpw"
    assert env["B12X_COMPILE_CACHE_DIR"].endswith("/b12x")
    # the shell really hands the worker its plan: run the env part with a probe command
    probe = line.split(" vllm serve ")[0] + " sh -c 'echo $BLAUNCH_PLAN'"
    out = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == env["BLAUNCH_PLAN"]
    assert "wrote the plan to" in result.stderr


def test_print_command_of_a_plan_that_does_not_fit_writes_nothing(tmp_path):
    args = [GLM, "--print-command", "--run-dir", str(tmp_path / "r")]
    result = CliRunner().invoke(cli, [*args, "--set", "serving.max_model_len=1048576"])
    assert result.exit_code == 3 and result.stdout == ""
    assert "Would fit with" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_print_command_keeps_secrets_out_of_the_line(tmp_path):
    """Not even ``HF_TOKEN="$HF_TOKEN"``: the shell would expand it into the argv of ``env``,
    which every user's process list shows; vLLM inherits it from the shell instead."""
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL + "env:\n  HF_TOKEN: hf_supersecret\n")
    result = run(str(path), "--print-command", "--run-dir", str(tmp_path / "r"))
    assert "hf_supersecret" not in result.output
    assert "HF_TOKEN" not in result.stdout
    assert "HF_TOKEN (secret) is not in the line" in result.stderr
    assert "export it" in result.stderr


def test_dry_run_imports_no_heavy_module():
    heavy = (
        "torch",
        "vllm",
        "b12x",
        "triton",
        "numpy",
        "safetensors",
        "matplotlib",
        "huggingface_hub",
        "pynvml",
    )
    code = (
        f"import sys, runpy; sys.argv = ['b12x-launch', {GLM!r}, '--json']\n"
        "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
        "except SystemExit: pass\n"
        f"print('HEAVY', sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "HEAVY []" in out.stderr
    assert json.loads(out.stdout)["fits"] is True


def test_dry_run_with_an_empty_store_loads_no_record_model(tmp_path):
    """The table of a plan nothing calibrated yet needs none of the record, run-file or plan
    models (their schemas are a tenth of a dry run: ``benchmarks/dry_run.py``); ``--json``
    still builds the plan record."""
    models = (
        "launcher.contract.record",
        "launcher.contract.qualified",
        "launcher.contract.store",
        "launcher.contract.runfile",
        "launcher.contract.plan",
    )
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "120"}  # cache_root ~/.cache/...
    loaded = {}
    for flag in ("--dry-run", "--json"):
        code = (
            f"import sys, runpy; sys.argv = ['b12x-launch', {GLM!r}, {flag!r}]\n"
            "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
            "except SystemExit: pass\n"
            f"print('MODELS', sorted(m for m in {models!r} if m in sys.modules), file=sys.stderr)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
        )
        assert out.returncode == 0, out.stderr
        loaded[flag] = out.stderr.split("MODELS ")[-1].strip()
    assert loaded["--dry-run"] == "[]"
    assert "launcher.contract.plan" in loaded["--json"]
    assert not (tmp_path / ".cache").exists()  # a dry run writes nothing into the store


def test_secrets_never_printed(tmp_path):
    path = tmp_path / "p.yaml"
    text = MINIMAL.replace(
        "vllm:\n  attention_backend: B12X_MLA_SPARSE\n",
        "vllm:\n  attention_backend: B12X_MLA_SPARSE\n  extra_args: [--api-key, sk-456]\n",
    )
    path.write_text(text + "env:\n  HF_TOKEN: hf_supersecret\n  MY_API_KEY: sk-123\n")
    run_dir = ["--run-dir", str(tmp_path / "r")]
    for args in (["--dry-run"], ["--json"], ["--print-command", *run_dir]):
        out = run(str(path), *args).output
        assert "hf_supersecret" not in out and "sk-123" not in out and "sk-456" not in out


def test_a_reader_that_closes_the_pipe_is_not_a_bug():
    """``b12x-launch ... --list | head -1``: no "internal error" and no traceback; click's
    own convention for a closed pipe (exit 1, nothing printed) applies."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "prewarm", str(PROFILES / "glm52.yaml"), "--list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 1)
    assert "internal error" not in err and "Traceback" not in err, err


def test_the_table_prints_data_that_looks_like_markup():
    # rich takes "[abc123]" (and "[word]" in any cell) for a tag and drops it.
    from launcher import pipeline
    from launcher.report.render import render_table

    planned = pipeline.make_plan(pipeline.load(GLM, ()))
    out = render_table(planned.plan, planned.command, fingerprint="abc123")
    assert "[abc123]" in out
    assert "[bold]" not in out  # the styles are still styles


def test_compile_key_variables_in_env_are_warned(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(MINIMAL + "env:\n  B12X_FOO: '1'\n  CUTLASS_X: a\n  B12X_AUTOTUNE: '0'\n")
    result = CliRunner().invoke(cli, [str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    warned = [x for x in result.stderr.splitlines() if x.startswith("warning: ")]
    first = MINIMAL.count("\n") + 2  # the line after MINIMAL's and "env:"
    assert [w.split()[1:3] for w in warned] == [
        [f"{path}:{first}", "env.B12X_FOO:"],
        [f"{path}:{first + 1}", "env.CUTLASS_X:"],
    ]
    assert "compile-cache key" in warned[0]
    validate = CliRunner().invoke(cli, ["validate", str(path)])
    assert validate.exit_code == 0 and "env.B12X_FOO" in validate.stderr
    shipped = CliRunner().invoke(cli, [GLM, "--dry-run"])
    assert "warning:" not in shipped.stderr


def test_a_mistyped_command_gets_a_did_you_mean():
    result = CliRunner().invoke(cli, ["prewram", GLM])
    assert result.exit_code == 2
    assert "no such command 'prewram'; did you mean 'prewarm'?" in result.stderr
    assert "Traceback" not in result.output
    # a file that exists is a profile, whatever its name; a far word stays a profile path
    assert CliRunner().invoke(cli, ["zzz", "--dry-run"]).exit_code == 1
    bad_flag = CliRunner().invoke(cli, [GLM, "--dry-rn"])
    assert bad_flag.exit_code == 2 and "'--dry-rn'" in bad_flag.stderr


def test_a_profile_named_like_a_command_still_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prewram").write_text((PROFILES / "glm52.yaml").read_text())
    assert CliRunner().invoke(cli, ["prewram", "--dry-run"]).exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["--debug", "GLM", "--dry-run", "--set", "serving.max_model_len=abc"],
        ["GLM", "--dry-run", "--debug", "--set", "serving.max_model_len=abc"],
        ["sweep", "GLM", "--debug", "--vary", "serving.max_model_len=abc"],
    ],
    ids=["before-the-profile", "after-the-profile", "after-a-subcommand"],
)
def test_debug_shows_the_traceback_wherever_it_is_typed(args):
    from launcher.errors import ProfileError

    args = [str(PROFILES / "glm52.yaml") if a == "GLM" else a for a in args]
    out = CliRunner().invoke(cli, args)
    assert isinstance(out.exception, ProfileError), out.output


def test_a_sweep_error_names_the_flag_that_was_typed():
    out = CliRunner().invoke(
        cli, ["sweep", str(PROFILES / "glm52.yaml"), "--vary", "serving.max_model_ln=1,2"]
    )
    assert out.exit_code == 1
    assert "error: --vary serving.max_model_ln: unknown key; did you mean" in out.stderr
    assert "--set" not in out.stderr


def test_the_table_fits_the_terminal_width():
    out = CliRunner(env={"COLUMNS": "80"}).invoke(cli, [GLM, "--dry-run"])
    assert out.exit_code == 0, out.output
    table = out.stdout.split("vllm serve")[0].splitlines()[:-1]  # the command is one line
    assert table and max(len(line) for line in table) <= 80
    wide = CliRunner().invoke(cli, [GLM, "--dry-run"]).stdout  # a pipe: 120, the same anywhere
    assert max(len(line) for line in wide.split("vllm serve")[0].splitlines()[:-1]) > 80


def test_the_card_total_says_where_it_comes_from_and_what_utilization_is_for():
    out = CliRunner().invoke(cli, [GLM, "--dry-run"])
    rows = [line.split("│") for line in out.stdout.splitlines() if line.startswith("│")]
    text = " ".join(cells[4].strip() for cells in rows[:4])  # the card total's HOW cell
    assert "sold as 96GB, of which the driver and firmware keep 0.99 GiB" in text
    assert "--gpu-memory-utilization 0.974 for its start-up check only" in text


def test_a_first_prefill_reserve_below_the_field_names_qualify():
    """glm52's estimated reserve for a first long prefill is under what the field measured
    (2,088 MiB); a calibrated or qualified plan has settled it and says nothing."""
    plan = json.loads(CliRunner().invoke(cli, [GLM, "--json", "--no-calibration"]).stdout)
    (note,) = [n for n in plan["notes"] if "first long prefill" in n]
    assert "below the 2,088 MiB the field measured" in note and "b12x-launch qualify" in note
    bigger = ("--set", "memory.jit_headroom=2GiB")
    plan = json.loads(CliRunner().invoke(cli, [GLM, "--json", "--no-calibration", *bigger]).stdout)
    assert not [n for n in plan["notes"] if "first long prefill" in n]


def test_an_assumed_catalog_layout_shows_its_band_and_what_settles_it():
    args = [GLM, "--json", "--set", "model.checkpoint=willfalco/GLM-5.2-EXL3-TR3-3.25bpw"]
    weights = json.loads(CliRunner().invoke(cli, args).stdout)["ranks"][0]["components"]["weights"]
    assert weights["source"] == "estimate"
    assert "shared_h_v1 would give -0.67 GiB per rank" in weights["detail"]
    assert "b12x-launch qualify measures what loads" in weights["detail"]


def test_prewarm_list_with_no_providers_says_there_is_nothing_to_prewarm():
    result = run("prewarm", str(PROFILES / "tiny-cpu.yaml"), "--list")
    assert result.exit_code == 0
    assert result.output == "nothing to prewarm: prewarm.providers is empty\n"


def test_a_bad_node_rank_is_blamed_on_the_flag_typed():
    out = CliRunner().invoke(
        cli, [str(PROFILES / "glm52-2node.yaml"), "--node-rank", "5", "--dry-run"]
    )
    assert out.exit_code == 1
    assert "error: --node-rank runtime.node_rank: must be below hardware.nodes (2)" in out.stderr
    assert "--set" not in out.stderr
