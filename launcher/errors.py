"""The errors a user can cause, each carrying where it came from and how to fix it.

Every domain error maps to one exit code in ``cli.py``: 0 ok, 1 bad profile or
environment, 2 bad usage (click's own), 3 the plan does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_USAGE = 2
EXIT_DOES_NOT_FIT = 3


@dataclass(frozen=True)
class Issue:
    """One problem, located: ``file:line key: message``."""

    message: str
    key: str = ""
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = _one_line(self.file or "<profile>")
        if self.line:
            where += f":{self.line}"
        message = _one_line(self.message)
        return f"{where} {_one_line(self.key)}: {message}" if self.key else f"{where}: {message}"


def _one_line(text: str) -> str:
    """Each issue is one line: control characters are shown escaped, whitespace runs folded."""
    text = "".join(c if c.isprintable() or c.isspace() else repr(c)[1:-1] for c in str(text))
    return " ".join(text.split())


class LauncherError(Exception):
    """Base of every error that is the user's to fix (no traceback is shown)."""

    exit_code = EXIT_USER_ERROR


class ProfileError(LauncherError):
    """A profile that cannot be read or is invalid; carries every issue found."""

    def __init__(self, issues: list[Issue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


class EnvironmentProblem(LauncherError):
    """The machine does not match the profile (no GPU, wrong kind, vLLM missing...)."""


class DoesNotFit(LauncherError):
    """The plan was computed but the deployment does not fit the cards."""

    exit_code = EXIT_DOES_NOT_FIT
