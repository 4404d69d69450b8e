"""The README's written deployment path names only commands and options that exist: every
``b12x-launch`` line of the section is checked against the CLI itself (a renamed option or
subcommand fails here, not in a user's shell)."""

from __future__ import annotations

import re
import shlex

from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import ROOT

SECTION = "## Deploying GLM-5.2"


def _path_lines() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", body, re.S).group(1)
    return [
        shlex.split(line.split(" && ")[-1])
        for line in block.splitlines()
        if "b12x-launch " in line and not line.lstrip().startswith("#")
    ]


def test_every_step_of_the_deployment_path_is_a_real_command():
    lines = _path_lines()
    assert len(lines) >= 5
    commands = set(cli.commands)
    for argv in lines:
        assert argv[0] == "b12x-launch", argv
        args = argv[1:]
        sub = args[0] if args[0] in commands else "launch"
        rest = args[1:] if sub != "launch" or args[0] == "launch" else args
        helped = CliRunner().invoke(cli, [sub, "--help"])
        assert helped.exit_code == 0, helped.output
        for option in (a for a in rest if a.startswith("--")):
            assert option in helped.output, f"{option} is not an option of {sub}"
        profile = next((a for a in rest if a.endswith(".yaml")), None)
        if profile:
            assert (ROOT / profile).is_file(), profile


def test_the_first_step_runs_here():
    result = CliRunner().invoke(cli, ["profiles/glm52.yaml", "--dry-run"])
    assert result.exit_code == 0, result.output
