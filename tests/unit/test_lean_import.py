"""pydantic is imported without asyncio, and asyncio is whole afterwards."""

import subprocess
import sys
import types
from pathlib import Path

import pytest

from launcher.profile import lean_import

ROOT = Path(__file__).resolve().parents[2]
GLM = str(ROOT / "profiles" / "glm52.yaml")
OLD_PYTHON = pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13 needs no stand-in")


def _python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return out.stdout


@OLD_PYTHON
def test_the_dry_run_imports_no_asyncio():
    code = (
        f"import sys, runpy; sys.argv = ['b12x-launch', {GLM!r}, '--dry-run']\n"
        "try:\n    runpy.run_module('launcher', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('ASYNC', sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))\n"
    )
    assert "ASYNC []" in _python(code)


def test_asyncio_is_the_real_one_afterwards():
    code = (
        "import sys, launcher.profile, asyncio, asyncio.coroutines, pydantic_core.core_schema\n"
        "async def f():\n    return 3\n"
        "assert asyncio.run(f()) == 3 and asyncio.__file__ and asyncio.coroutines.__file__\n"
        "assert asyncio.coroutines.iscoroutinefunction(f)\n"
        "assert pydantic_core.core_schema.field_before_validator_function.__deprecated__\n"
        "print('OK')\n"
    )
    assert _python(code).strip() == "OK"


@OLD_PYTHON
def test_a_stand_in_that_is_not_enough_falls_back_to_the_real_asyncio():
    code = (
        "import sys, launcher.profile.lean_import as li\n"  # the import did the real work: redo
        "for n in [n for n in sys.modules if n.split('.')[0] in ('pydantic', 'pydantic_core',"
        " 'asyncio', 'typing_extensions')]:\n    del sys.modules[n]\n"
        "real = li._import\n"
        "def picky():\n"
        "    import asyncio\n"
        "    asyncio.get_event_loop_policy  # the stand-in has no such attribute\n"
        "    real()\n"
        "li._import = picky\n"
        "li.import_pydantic()\n"
        "import asyncio, pydantic\n"
        "assert asyncio.__file__ and pydantic.BaseModel\n"
        "print('OK')\n"
    )
    assert _python(code).strip() == "OK"


def test_a_module_that_kept_the_stand_in_gets_the_real_asyncio():
    import asyncio
    import asyncio.coroutines

    stand_in, stand_in_coroutines = types.ModuleType("asyncio"), types.ModuleType("asyncio.c")
    stand_in_coroutines.__name__ = "asyncio.coroutines"
    holder = types.ModuleType("holder")
    holder.asyncio, holder.coroutines = stand_in, stand_in_coroutines
    lean_import._replace_references([holder], {id(stand_in), id(stand_in_coroutines)})
    assert holder.asyncio is asyncio and holder.coroutines is asyncio.coroutines
