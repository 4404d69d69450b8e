"""`b12x-launch qualify` refuses what it cannot drive, with one line and exit 1."""

from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import MINIMAL


def test_a_multi_node_profile_is_refused(write):
    path = write("p.yaml", MINIMAL)
    sets = ["hardware.nodes=2", "parallel.pipeline=2", "runtime.master_addr=10.0.0.1"]
    out = CliRunner().invoke(cli, ["qualify", str(path), *(a for s in sets for a in ("--set", s))])
    assert out.exit_code == 1
    assert "qualify drives one node" in out.output and "Traceback" not in out.output


def test_a_workload_longer_than_the_context_names_its_key(write):
    path = write("p.yaml", MINIMAL)
    out = CliRunner().invoke(cli, ["qualify", str(path), "--set", "qualify.output_tokens=200000"])
    assert out.exit_code == 1
    assert "qualify.output_tokens" in out.output


def test_help_lists_qualify():
    out = CliRunner().invoke(cli, ["--help"])
    assert "qualify" in out.output
