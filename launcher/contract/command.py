"""The vLLM command as it leaves the launcher: in the run file and ``--json`` (secrets
masked), and in the run directory's ``command.txt`` (one line ``sh`` runs)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from launcher.secrets import redact_argv, redact_env, secret_env

if TYPE_CHECKING:
    from launcher.contract.plan import CommandRecord


def command_record(argv: Sequence[str], env: Mapping[str, str]) -> CommandRecord:
    """The command with every secret masked (``launcher.secrets``)."""
    # Imported here: the table's command line needs no plan model (``benchmarks/dry_run.py``).
    from launcher.contract.plan import CommandRecord

    return CommandRecord(argv=redact_argv(list(argv)), env=redact_env(dict(env)))


def command_line(argv: Sequence[str]) -> str:
    """The command line, secrets masked, as one shell line."""
    return shlex.join(redact_argv(list(argv)))


def shell_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """What runs, as one line ``sh`` reads: ``env K=V ... vllm serve ...``.

    The environment is part of the command: without the launcher's ``BLAUNCH_*`` variables
    the planned worker cannot find its plan. A secret variable is not in the line at all (not
    even as ``NAME="$NAME"``: the shell would expand it into ``env``'s argv, which a process
    list shows): vLLM inherits it from the shell that runs the line (``secret_names``).
    """
    parts = ["env"]
    for key, value in env.items():
        if not secret_env(key, value):
            parts.append(shlex.quote(f"{key}={value}"))
    return " ".join([*parts, command_line(argv)])


def secret_names(env: Mapping[str, str]) -> list[str]:
    """The secret variables ``shell_line`` leaves out (the shell that runs it must export them)."""
    return [k for k, v in env.items() if secret_env(k, v) and v]
