"""Keep secrets out of everything the launcher prints or writes."""

from __future__ import annotations

import re

_SECRET_KEY = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|PRIVATE|AUTH)", re.I)
SECRET_FLAGS: dict[str, str | None] = {
    "--api-key": "VLLM_API_KEY",
    "--hf-token": "HF_TOKEN",
    "--ssl-keyfile-password": None,
}
"""vLLM flags that carry a secret on the command line (masked wherever argv is shown), and
the variable that carries it instead where there is one (a process's argv is readable by
every user of the machine)."""
MASK = "***"


def is_secret(name: str) -> bool:
    return bool(_SECRET_KEY.search(name))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) and v else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append(MASK)
            hide = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                hide = True
            continue
        out.append(arg)
    return out
