"""``b12x-launch sweep``: every row is the dry run of the same settings."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.pipeline import run_sweep
from launcher.plan.calibration import save_record
from launcher.profile import load_profile
from launcher.report.sweep import parse_vary
from tests.conftest import MINIMAL, PROFILES, ROOT
from tests.unit.test_checkpoint import write_checkpoint

GLM = str(PROFILES / "glm52.yaml")
GLM_TOKENS = f"{json.loads((ROOT / 'tests/golden/glm52.json').read_text())['kv']['tokens']:,}"
"""The shipped profile's KV tokens (the golden dry run; its figures change deliberately)."""


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def sweep_rows(profile: str, *args: str) -> tuple[int, list[dict]]:
    out = invoke("sweep", profile, "--json", *args)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    return out.exit_code, json.loads(out.stdout)["rows"]


def dry_run(profile: str, settings: dict, *args: str):
    sets = [a for k, v in settings.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    return invoke(profile, "--json", *sets, *args)


def assert_rows_are_dry_runs(profile: str, rows: list[dict], *args: str) -> None:
    for row in rows:
        single = dry_run(profile, row["settings"], *args)
        if row["status"] == "invalid":
            assert single.exit_code == 1, (row, single.output)
            # the same error, named for the flag each command was given
            same = [e.replace("--vary ", "--set ", 1) for e in row["errors"]]
            assert same and all(e in single.output for e in same)
            continue
        assert single.exit_code == (0 if row["fits"] else 3), (row, single.output)
        plan = json.loads(single.stdout)
        assert row["fits"] == plan["fits"]
        assert row["fingerprint"] == plan["fingerprint"]
        assert row["kv_tokens"] == plan["kv"]["tokens"]
        assert row["kv_source"] == plan["ranks"][0]["components"]["kv_cache"]["source"]
        assert row["max_concurrency"] == plan["kv"]["max_concurrency"]
        assert row["bounding_rank"] == plan["kv"]["bounding_rank"]
        assert row["max_model_len"] == plan["kv"]["max_model_len"]
        assert row["reasons"] == plan["reasons"]
        assert row["suggestions"] == plan["suggestions"]


def test_glm52_rows_equal_single_dry_runs():
    code, rows = sweep_rows(
        GLM,
        "--no-calibration",
        "--vary",
        "parallel.decode_context=1,2,4,3",
        "--vary",
        "serving.max_model_len=131072,1048576,2000000",
        "--vary",
        "serving.max_num_seqs=8,256",
    )
    assert code == 0 and len(rows) == 24
    statuses = {r["status"] for r in rows}
    assert statuses == {"fits", "does_not_fit", "invalid"}  # every kind of row is compared
    assert_rows_are_dry_runs(GLM, rows, "--no-calibration")


def test_sweep_reads_each_combinations_calibration(tmp_path, write):
    """A record measured for one combination changes that row only, as in its dry run."""
    profile = str(write("p.yaml", MINIMAL + f"runtime:\n  cache_root: {tmp_path}/cache\n"))
    measured = dry_run(profile, {"parallel.decode_context": 2})
    plan = json.loads(measured.stdout)
    loaded = load_profile(profile, ["parallel.decode_context=2"])
    for rank in range(4):
        save_record(
            {
                "fingerprint": plan["fingerprint"],
                "rank": rank,
                "when": "2026-11-30",
                "measured": {"activation_peak": 9 * 2**30},
            },
            None,
            loaded.profile,
        )
    code, rows = sweep_rows(profile, "--vary", "parallel.decode_context=1,2,4")
    assert code == 0
    assert_rows_are_dry_runs(profile, rows)
    calibrated = json.loads(dry_run(profile, {"parallel.decode_context": 2}).stdout)
    assert calibrated["ranks"][0]["components"]["activation_peak"]["source"] == "measured"
    assert rows[1]["kv_tokens"] == calibrated["kv"]["tokens"] < plan["kv"]["tokens"]


def test_checkpoint_on_disk_is_read_once_per_split(tmp_path, write):
    """Keys that change what gather() reads (TP, MTP) gather again; others re-use the facts,
    and still refuse what the model cannot take (a context past max_position)."""
    write_checkpoint(tmp_path / "ckpt")
    profile = str(
        write(
            "p.yaml",
            f"""\
hardware: {{gpu: rtx-pro-6000, count: 2}}
model: {{path: {tmp_path / "ckpt"}, quantization: exl3}}
parallel: {{tensor: 2}}
speculative: {{method: mtp, tokens: 1}}
serving: {{max_model_len: 1024, max_num_seqs: 2, max_num_batched_tokens: 512}}
""",
        )
    )
    vary = [
        parse_vary("hardware.count=1,2"),
        parse_vary("parallel.tensor=1,2"),
        parse_vary("speculative={method: none, tokens: 0},{method: mtp, tokens: 1}"),
        parse_vary("serving.max_model_len=1024,4096,8192"),
    ]
    sweep = run_sweep(profile, (), vary, calibrate=False)
    assert len(sweep.rows) == 24
    # one gather per valid (GPUs, TP, MTP), not one per combination
    assert sweep.gathered == 4
    assert {r.status for r in sweep.rows} == {"fits", "invalid"}
    too_long = {r.status for r in sweep.rows if dict(r.settings)["serving.max_model_len"] == "8192"}
    assert too_long == {"invalid"}
    _, rows = sweep_rows(
        profile, "--no-calibration", *(f"--vary={k}={','.join(v)}" for k, v in vary)
    )
    assert_rows_are_dry_runs(profile, rows, "--no-calibration")


def test_longest_model_len_is_the_edge_of_fitting():
    code, rows = sweep_rows(
        GLM,
        "--no-calibration",
        "--vary",
        "parallel.decode_context=1,4",
        "--vary",
        "serving.max_model_len=65536,524288",
    )
    assert code == 0
    for row in rows:
        longest = row["longest_fitting_model_len"]
        settings = {**row["settings"], "serving.max_model_len": longest}
        assert dry_run(GLM, settings, "--no-calibration").exit_code == 0, row
        settings["serving.max_model_len"] = longest + 1
        assert dry_run(GLM, settings, "--no-calibration").exit_code == 3, row
        if row["fits"]:
            assert longest >= row["max_model_len"]
        else:
            assert longest < row["max_model_len"]
        for fix in row["suggestions"]:  # the planner's "would fit with" is a length that fits
            if fix.startswith("serving.max_model_len="):
                assert int(fix.partition("=")[2]) <= longest


def test_table_lists_every_combination_and_why():
    out = invoke(
        "sweep",
        GLM,
        "--no-calibration",
        "--vary",
        "parallel.decode_context=1,4,3",
        "--vary",
        "serving.max_model_len=524288",
    )
    assert out.exit_code == 0, out.output
    assert "Sweep: " in out.output and "(3 combinations)" in out.output
    assert GLM_TOKENS in out.output  # the DCP4 row's KV tokens, as the golden dry run
    assert (
        "parallel.decode_context=1 serving.max_model_len=524288: the KV cache holds" in out.output
    )
    assert "Would fit with: --set serving.max_model_len=" in out.output
    assert "parallel.decode_context=3 serving.max_model_len=524288: --vary" in out.output
    assert "must divide parallel.tensor" in out.output


def test_exit_3_when_nothing_fits_and_1_when_every_combination_is_invalid():
    none_fit = invoke("sweep", GLM, "--vary", "serving.max_model_len=900000,1000000")
    assert none_fit.exit_code == 3, none_fit.output
    broken = invoke("sweep", GLM, "--vary", "parallel.decode_contxt=1,2")
    assert broken.exit_code == 1 and "did you mean 'decode_context'" in broken.output
    assert "Traceback" not in broken.output
    missing = invoke("sweep", "/nonexistent.yaml", "--vary", "serving.max_num_seqs=1,2")
    assert missing.exit_code == 1 and "file not found" in missing.output


@pytest.mark.parametrize(
    "vary",
    [
        ["--vary", "serving.max_num_seqs"],
        ["--vary", "serving.max_num_seqs=1,,2"],
        ["--vary", "serving.max_num_seqs=1", "--vary", "serving.max_num_seqs=2"],
        ["--vary", "a=" + ",".join(map(str, range(101))), "--vary", "b=" + ",".join("x" * 101)],
    ],
)
def test_bad_vary_is_a_usage_error(vary):
    out = invoke("sweep", GLM, *vary)
    assert out.exit_code == 2 and "--vary" in out.output


@pytest.mark.parametrize(
    "vary",
    [
        "env.HF_TOKEN=hf_row_one,hf_row_two",
        # issue 41 (6): a secret inside a mapping value printed both rows' tokens
        "env={HF_TOKEN: hf_row_one},{HF_TOKEN: hf_row_two}",
        "env={WANDB_KEY: hf_row_one},{A: b}",
    ],
)
def test_varying_a_secret_is_refused_without_printing_its_values(vary):
    out = invoke("sweep", GLM, "--vary", vary)
    assert out.exit_code == 2 and "a value names a secret" in out.output
    assert "hf_row_one" not in out.output and "hf_row_two" not in out.output


def test_vary_values_keep_commas_inside_brackets():
    key, values = parse_vary("serving.cudagraph_capture_sizes=[4,8],[4,8,16],auto")
    assert key == "serving.cudagraph_capture_sizes"
    assert values == ("[4,8]", "[4,8,16]", "auto")


def test_sweep_without_plot_imports_no_heavy_module():
    heavy = ("torch", "vllm", "b12x", "triton", "numpy", "safetensors", "matplotlib")
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['b12x-launch', 'sweep', {GLM!r}, '--vary', 'parallel.decode_context=1,4']\n"
        "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
        "except SystemExit: pass\n"
        f"print('HEAVY', sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "HEAVY []" in out.stderr
    assert GLM_TOKENS in out.stdout


def test_plan_only_keys_reuse_the_facts_and_others_gather_again():
    plan_only = [
        parse_vary("parallel.decode_context=1,2,4"),
        parse_vary("serving.max_model_len=131072,524288"),
        parse_vary("memory.safety_margin=256MiB,1GiB"),
        parse_vary("speculative.tokens=1,3"),
    ]
    assert run_sweep(GLM, (), plan_only, calibrate=False).gathered == 1
    facts = [
        parse_vary("model.bits_per_weight=3.42,4"),
        parse_vary("vllm.attention_backend=B12X_MLA_SPARSE,FLASHMLA_SPARSE"),
    ]
    assert run_sweep(GLM, (), facts, calibrate=False).gathered == 4


def test_a_qualified_record_pins_each_row_as_it_pins_the_dry_run(tmp_path):
    """Issue 42: with a qualified record for glm52's fingerprint the dry run printed
    `blocks_per_rank 2000, pinned qualified` and the sweep of the same settings the estimate
    (721,920 tokens): each row is now the dry run's own plan."""
    from launcher.plan.qualified import save_qualified

    cache = f"runtime.cache_root={tmp_path / 'cache'}"
    loaded = load_profile(GLM, [cache])
    record = {
        "when": "2026-11-30T18:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "kv": {"blocks": 2000, "tokens": 2000 * 256},
    }
    save_qualified(record, None, loaded.profile, json.loads(dry_run(GLM, {}).stdout)["fingerprint"])
    single = json.loads(invoke(GLM, "--json", "--set", cache).stdout)
    assert single["kv"]["blocks_per_rank"] == 2000
    code, rows = sweep_rows(GLM, "--set", cache, "--vary", "serving.max_num_seqs=8,4")
    assert code == 0
    assert rows[0]["kv_tokens"] == single["kv"]["tokens"] == 2000 * 256
    assert rows[0]["kv_source"] == "qualified"  # the date is the detail (docs/changelog.md)
    assert rows[1]["kv_source"] == "estimate"  # another fingerprint: no record of its own
    assert_rows_are_dry_runs(GLM, rows, "--set", cache)


def test_rows_varying_the_batched_tokens_are_dry_runs():
    """The weights' load buffers follow max_num_batched_tokens: a sweep that re-used the first
    row's facts for it printed other KV tokens than the dry run (784,896 for 791,296)."""
    code, rows = sweep_rows(
        GLM, "--no-calibration", "--vary", "serving.max_num_batched_tokens=8192,2048"
    )
    assert code == 0 and rows[0]["kv_tokens"] != rows[1]["kv_tokens"]
    assert_rows_are_dry_runs(GLM, rows, "--no-calibration")
