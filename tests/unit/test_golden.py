"""Golden plans for the shipped profiles: a change to any figure must be deliberate.

Regenerate after an intended change with:
    python -m tests.unit.test_golden
and explain the change in the commit message.
"""

import json
import sys

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import PROFILES, ROOT

GOLDEN = ROOT / "tests" / "golden"


def summary(profile: str) -> dict:
    out = CliRunner().invoke(cli, [str(PROFILES / profile), "--json", "--no-calibration"])
    data = json.loads(out.output)
    rank0 = data["ranks"][0]
    return {
        "fits": data["fits"],
        "components": {k: [v["bytes"], v["source"]] for k, v in rank0["components"].items()},
        "kv": {
            k: data["kv"][k]
            for k in (
                "bytes_per_token_per_rank",
                "block_tokens",
                "blocks_per_rank",
                "tokens",
                "max_concurrency",
                "bounding_rank",
            )
        },
        # A profile naming Python runs the launcher's interpreter, which differs per machine.
        "argv": ["{sys.executable}" if a == sys.executable else a for a in data["vllm"]["argv"]],
    }


@pytest.mark.parametrize("profile", sorted(p.name for p in PROFILES.glob("*.yaml")))
def test_golden_plan(profile):
    path = GOLDEN / profile.replace(".yaml", ".json")
    assert path.exists(), f"no golden plan for {profile}; run python -m tests.unit.test_golden"
    assert summary(profile) == json.loads(path.read_text())


if __name__ == "__main__":
    GOLDEN.mkdir(exist_ok=True)
    for p in sorted(PROFILES.glob("*.yaml")):
        (GOLDEN / p.name.replace(".yaml", ".json")).write_text(
            json.dumps(summary(p.name), indent=1) + "\n"
        )
        print("wrote", p.name, file=sys.stderr)
