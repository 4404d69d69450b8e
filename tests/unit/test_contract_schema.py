"""The contract's JSON Schemas are generated from its types and published in docs/schemas/;
every field of a contract type has its docstring (the schema's description).

Regenerate the files after a change to the types with:
    python -m tests.unit.test_contract_schema
"""

import json
import sys

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract import schema
from tests.conftest import ROOT

SCHEMAS = ROOT / "docs" / "schemas"
FILES = {name: SCHEMAS / f"{name}.schema.json" for name in schema.DOCUMENTS}


def text(name: str) -> str:
    return json.dumps(schema.json_schema(name), indent=2) + "\n"


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_published_schema_is_what_the_types_generate(name):
    assert FILES[name].is_file(), "run python -m tests.unit.test_contract_schema"
    assert FILES[name].read_text() == text(name), (
        f"{FILES[name]} is not what the types generate: python -m tests.unit.test_contract_schema"
    )


@pytest.mark.parametrize("option, name", [("--run-file", "run-file"), ("--record", "record")])
def test_the_schema_command_prints_the_published_schema(option, name):
    out = CliRunner().invoke(cli, ["schema", option])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == json.loads(FILES[name].read_text())


def test_every_field_of_the_contract_has_its_docstring():
    assert schema.undocumented() == []


def test_the_run_file_schema_refuses_what_the_reader_refuses():
    """The schema is closed where the file is ours: an unknown key is an error for an editor
    as for the reader, and the KV cache's source is one of the sources."""
    run = schema.json_schema("run-file")
    assert run["additionalProperties"] is False
    sources = run["$defs"]["Source"]["enum"]
    assert {"measured", "estimate", "profile", "qualified", "config.json"} <= set(sources)
    names = run["$defs"]["RankPlan"]["properties"]["components"]["propertyNames"]
    assert "kv_cache" in run["$defs"][names["$ref"].rsplit("/", 1)[1]]["enum"]


if __name__ == "__main__":
    SCHEMAS.mkdir(exist_ok=True)
    for name, path in FILES.items():
        path.write_text(text(name))
        print("wrote", path, file=sys.stderr)
