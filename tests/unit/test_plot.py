"""``--plot FILE``: the picture is written, is a real SVG or PNG, and names what it draws."""

import json
import re
import struct
import xml.etree.ElementTree as ET
import zlib

from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract.names import ORDER
from launcher.report.render import bar_cells
from tests.conftest import MINIMAL, PROFILES, ROOT, need_module
from tests.unit.test_run_report import make_run

GLM = str(PROFILES / "glm52.yaml")
GLM_TOKENS = f"{json.loads((ROOT / 'tests/golden/glm52.json').read_text())['kv']['tokens']:,}"
"""The shipped profile's KV tokens (the golden dry run; its figures change deliberately)."""
matplotlib = need_module("unit", "matplotlib", "matplotlib is in the test extra")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def svg_text(path) -> str:
    """Every piece of text the SVG shows (it keeps text as text), checked to be SVG."""
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return " ".join(t for el in root.iter() if el.tag.endswith("text") for t in el.itertext())


def png_chunks(path) -> dict[str, bytes]:
    """The PNG's chunks by type (text chunks joined), each CRC checked."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[str, bytes] = {}
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc
        chunks[kind.decode()] = chunks.get(kind.decode(), b"") + body
        pos += 12 + length
    assert "IHDR" in chunks and "IDAT" in chunks and "IEND" in chunks
    return chunks


def plan_components(profile: str, *sets: str) -> list[str]:
    plan = json.loads(invoke(profile, "--json", *sets).stdout)
    return list(plan["ranks"][0]["components"])


def test_dry_run_plot_svg_names_every_component_and_source(tmp_path):
    path = tmp_path / "plan.svg"
    out = invoke(GLM, "--dry-run", "--plot", str(path))
    assert out.exit_code == 0, out.output
    assert "Memory plan" in out.stdout and f"plot: {path}" in out.stderr
    text = svg_text(path)
    components = plan_components(GLM)
    assert components[-1] == "kv_cache" and len(components) >= 8
    for name in components:
        assert name in text, name
    for source in ("estimate", "profile"):
        assert source in text
    assert "rank 3" in text and GLM_TOKENS in text


def test_dry_run_plot_png_is_a_valid_png_naming_every_component(tmp_path):
    path = tmp_path / "plan.png"
    out = invoke(GLM, "--plot", str(path))  # --plot alone implies the dry run
    assert out.exit_code == 0, out.output
    chunks = png_chunks(path)
    description = chunks["tEXt"].decode("latin-1")
    for name in plan_components(GLM):
        assert name in description, name


def test_plot_of_a_plan_that_does_not_fit_is_written_and_exits_3(tmp_path):
    path = tmp_path / "nofit.svg"
    out = invoke(GLM, "--set", "serving.max_model_len=1000000", "--plot", str(path))
    assert out.exit_code == 3
    assert "DOES NOT FIT" in svg_text(path)


def test_sweep_plot_draws_kv_tokens_against_the_varied_key(tmp_path):
    path = tmp_path / "sweep.svg"
    out = invoke(
        "sweep",
        GLM,
        "--vary",
        "parallel.decode_context=1,2,4",
        "--vary",
        "serving.max_num_seqs=8,16",
        "--plot",
        str(path),
    )
    assert out.exit_code == 0, out.output
    text = svg_text(path)
    assert "parallel.decode_context" in text and "KV cache tokens" in text
    assert "max_num_seqs=8" in text and "max_num_seqs=16" in text


def test_a_max_model_len_sweep_draws_the_requests_that_fit_from_zero(tmp_path):
    """The KV tokens hardly move with max_model_len; how many such requests fit does."""
    from launcher.report.plot import SWEEP_Y

    path = tmp_path / "sweep.svg"
    out = invoke(
        "sweep", GLM, "--vary", "serving.max_model_len=65536,262144,1048576", "--plot", str(path)
    )
    assert out.exit_code == 0, out.output
    text = svg_text(path)
    assert SWEEP_Y["serving.max_model_len"] in text and "KV cache tokens" not in text
    ticks = [float(t.replace(",", "")) for t in re.findall(r"(?<![\w.])[\d,]+(?:\.\d+)?", text)]
    assert 0 in ticks  # the y axis starts at 0


def test_plots_and_plans_are_readable_by_the_group(tmp_path):
    path = tmp_path / "plan.svg"
    assert invoke(GLM, "--plot", str(path)).exit_code == 0
    assert path.stat().st_mode & 0o044 == 0o044  # not mkstemp's 0600


def test_report_plot_shows_plan_beside_measured(tmp_path, write):
    run, _ = make_run(tmp_path, write)
    path = tmp_path / "run.svg"
    out = invoke("report", str(run), "--plot", str(path))
    assert out.exit_code == 0, out.output
    text = svg_text(path)
    assert "vs measured" in text and "measured" in text
    # each rank's two bars, in both panels (the whole card, and all but the weights)
    assert len(re.findall(r"rank \d\s*plan", text)) == 8
    assert len(re.findall(r"rank \d\s*measured", text)) == 8
    for name in (n for n in (*ORDER, "kv_cache") if n != "other_processes"):
        assert name in text, name


def test_plot_refuses_an_unknown_format(tmp_path, write):
    out = invoke(str(write("p.yaml", MINIMAL)), "--plot", str(tmp_path / "plan.pdf"))
    assert out.exit_code == 2 and ".svg or .png" in out.output
    assert not (tmp_path / "plan.pdf").exists()


def test_bar_cells_are_proportional_and_show_every_part():
    cells = bar_cells([80, 1, 0, 19], width=60)
    assert sum(cells) == 60 and cells[1] == 1 and cells[2] == 0
    assert cells[0] > 3 * cells[3] > 0
    assert sum(bar_cells([1] * 100, width=60)) == 100  # more parts than cells: one each


def test_dry_run_table_has_a_bar_per_rank():
    out = invoke(GLM, "--dry-run")
    bars = [line for line in out.output.splitlines() if line.strip().startswith("ranks 0-3 |")]
    assert len(bars) == 1 and bars[0].rstrip().endswith("|")
    body = bars[0].split("|")[1]
    assert len(body) == 60 and body.startswith("c") and body.endswith("K") and "W" in body
    assert "K=kv_cache" in out.output
