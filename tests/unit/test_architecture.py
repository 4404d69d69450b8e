"""The package reads in one direction: each room imports only the rooms before it.

Every module's imports are parsed (``ast``), the lazy ones inside functions included; imports
under ``if TYPE_CHECKING:`` are skipped (they never run). A room importing a later room, or an
import cycle between rooms, fails here unless it is listed in ``EXCEPTIONS`` with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "launcher"

ORDER = (
    "base",  # units, errors, atomic, owned files: leaf helpers every stage may use
    "vllm",  # what the project knows of vLLM: lines, capabilities, options, internals, checks
    "secrets",  # one redaction for all the launcher prints or writes (by vLLM's option reading)
    "contract",  # the types of all that crosses a process or a boot: plan, run file, records
    "gpu",  # beside vLLM: the cards' memory read from any process, as the contract's types
    "profile",  # schema, YAML with lines, extends/--set, coupling rules, which vLLM runtime
    "deployment",  # resolve once: the profile's derived values, each with its reason
    "plan",  # model/checkpoint/weights/KV facts, catalog, estimates, calibration, the planner
    "report",  # a plan rendered (the dry run ends here), pictures, sweeps, `report RUN_DIR`
    "launch",  # preflight, vLLM argv/env, run directory, exec (writes the run file)
    "artifact",  # a deployment's compiled caches and records as one artifact: bake, restore
    "runtime",  # inside vLLM: planned worker, prewarm providers, KV budget, JIT watchdog
    "pipeline",  # load -> plan -> render -> launch, step by step, for the commands
    "qualify",  # boots the planned deployment and drives its worst case
    "emit",  # the planned deployment as other targets' files (LeaderWorkerSet, compose)
    "cli",  # the command line and the container's entry point
)
"""Rooms in the order data flows; a room may import itself and any room before it."""

ROOM_OF_TOP_MODULE = {
    "units": "base",
    "errors": "base",
    "atomic": "base",
    "terminal": "base",  # what reaches a terminal: control sequences made visible
    "switches": "base",  # on/off switches read from the environment
    "buildid": "base",  # the image build id every compile cache and artifact is keyed by
    "buildfile": "contract",  # its file, build.json, read and written as contract.build
    "registryfile": "contract",  # the image's vLLM registry record, read and written
    "bounded": "base",  # reading input files: regular files of a bounded size
    "owned": "base",  # the owned-files boundary: every write, replace, delete; bounded reads
    "installed": "base",  # where an installed package lies, found without importing it
    "deployment": "deployment",
    "worker": "runtime",  # the alias vLLM's --worker-cls names (launcher.worker.PlannedWorker)
    "vllm_serve": "runtime",  # vLLM's serve entry, run as vLLM's process on every node
    "pipeline": "pipeline",
    "cli": "cli",
    "__main__": "cli",
    "entrypoint": "cli",
}

EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importer, imported) pairs allowed against the order, each with why (none today)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__version__":
        return "base"
    if parts[1] in ORDER:
        return parts[1]
    return ROOM_OF_TOP_MODULE[parts[1]]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    return skipped


def imports(path: Path) -> set[str]:
    """The launcher modules ``path`` imports at run time, at any depth of the file."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "launcher":  # from launcher import pipeline: the module named
                found.update(f"launcher.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: relative import; name the module in full")
    return {name for name in found if name.startswith("launcher.")}


def import_graph() -> dict[str, set[str]]:
    return {_module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_room():
    for module in import_graph():
        assert room(module) in ORDER, module


def test_no_stage_imports_a_later_one():
    rank = {name: i for i, name in enumerate(ORDER)}
    wrong = [
        f"{importer} ({room(importer)}) imports {imported} ({room(imported)})"
        for importer, targets in import_graph().items()
        for imported in sorted(targets)
        if rank[room(imported)] > rank[room(importer)] and (importer, imported) not in EXCEPTIONS
    ]
    assert not wrong, "imports against the flow:\n" + "\n".join(wrong)


def test_no_import_cycle_between_rooms():
    edges: dict[str, set[str]] = {}
    for importer, targets in import_graph().items():
        for imported in targets:
            if room(imported) != room(importer) and (importer, imported) not in EXCEPTIONS:
                edges.setdefault(room(importer), set()).add(room(imported))
    assert _cycle(edges) is None, f"rooms import each other: {_cycle(edges)}"


def test_every_exception_is_still_needed():
    graph = import_graph()
    for importer, imported in EXCEPTIONS:
        assert imported in graph.get(importer, ()), (
            f"{importer} no longer imports {imported}: drop the exception"
        )


DERIVED = {"capture_sizes", "auto_capture_sizes", "default_block_size", "runtime_of"}
"""``profile.rules`` helpers whose results the Deployment holds."""


def test_only_the_deployment_derives_what_it_holds():
    """Past the profile stage a derived value is read off the Deployment, never derived again."""
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if room(module) in ("profile", "deployment"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "launcher.profile.rules":
                wrong += [f"{module}: {a.name}" for a in node.names if a.name in DERIVED]
    assert not wrong, "read these off launcher.deployment.Deployment:\n" + "\n".join(wrong)


def test_the_checks_catch_a_backward_import(tmp_path):
    """The parser sees a lazy import inside a function, and skips TYPE_CHECKING ones."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from launcher.cli import cli\n"
        "def f():\n    from launcher.report import render\n"
        "    import launcher.runtime.budget\n"
    )
    assert imports(source) == {"launcher.report", "launcher.runtime.budget"}
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_readme_layout_names_every_room_and_top_module():
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    names = [p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    names += [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    missing = [name for name in sorted(names) if name not in layout]
    assert not missing, f"README's Layout does not name: {missing}"


WORKER = PACKAGE / "runtime" / "worker"
NOT_IN_THE_WORKER = ("launcher.plan.planner", "launcher.profile.load", "launcher.plan.inputs")
"""The worker reads the run file the launcher wrote: it plans nothing and loads no profile."""


def _imports(path: Path) -> set[tuple[str, str]]:
    """(module, name) for every import in ``path``, lazy ones included."""
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {(node.module, a.name) for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {(a.name, "") for a in node.names}
    return out


def test_the_worker_neither_plans_nor_resolves_again():
    found = {
        (path.name, module, name)
        for path in WORKER.glob("*.py")
        for module, name in _imports(path)
        if module in NOT_IN_THE_WORKER
        or (module == "launcher.deployment" and name == "resolve")
        or (module == "launcher.plan.model" and name == "load_facts")
    }
    assert not found, sorted(found)


def _count_resolves(monkeypatch) -> list[str]:
    """Every ``resolve`` runs ``runtime_of`` once: count those calls, by profile name."""
    import launcher.deployment as deployment

    calls: list[str] = []
    real = deployment.runtime_of

    def counted(p):
        calls.append(p.name)
        return real(p)

    monkeypatch.setattr(deployment, "runtime_of", counted)
    return calls


def test_a_dry_run_resolves_the_deployment_once(monkeypatch):
    from click.testing import CliRunner

    from launcher.cli import cli
    from tests.conftest import PROFILES

    calls = _count_resolves(monkeypatch)
    out = CliRunner().invoke(cli, [str(PROFILES / "glm52.yaml"), "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    assert len(calls) == 1, calls


def test_a_launch_resolves_once_more_only_for_another_vllm_line(monkeypatch, tmp_path):
    """Up to the exec, on four cards: the plan again on the cards reuses the deployment; an
    installed vLLM of another line than the dry run inferred is another deployment."""
    from launcher import pipeline
    from launcher.launch import start
    from launcher.launch.hardware import Gpu
    from launcher.units import GiB, MiB
    from launcher.vllm.lines import VLLM_LINES
    from tests.conftest import MINIMAL

    total = int(95.59 * GiB)
    name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    gpus = [Gpu(i, name, total, 300 * MiB, total - 300 * MiB) for i in range(4)]
    monkeypatch.setattr(start, "require_vllm", lambda: None)
    monkeypatch.setattr(start, "check_argv", lambda flags, keys: None)
    monkeypatch.setattr(start, "probe_installed", lambda: (VLLM_LINES["gilded-gnosis"], "test"))
    profile = tmp_path / "p.yaml"
    profile.write_text(MINIMAL)
    calls = _count_resolves(monkeypatch)
    cache = f"runtime.cache_root={tmp_path / 'cache'}"
    # B12X_MLA_SPARSE: the dry run infers the installed line; FLASHMLA_SPARSE: upstream
    for backend, more in (("B12X_MLA_SPARSE", 0), ("FLASHMLA_SPARSE", 1)):
        sets = (cache, f"vllm.attention_backend={backend}", "vllm.release=0.33")
        planned = pipeline.make_plan(pipeline.load(str(profile), sets))
        calls.clear()
        done = pipeline.prepare(planned, force=False, run_dir=str(tmp_path / backend), gpus=gpus)
        assert done.planned.deployment.runtime.name == "gilded-gnosis"
        assert len(calls) == more, (backend, calls)


TYPE_ONLY_EXCEPTIONS: dict[tuple[str, str], str] = {
    (
        "launcher.report.render",
        "launcher.launch.vllm_args",
    ): "VllmCommand, rendered beside the plan",
}
"""Annotation-only imports against the order that remain, each with the type it names."""


def _type_only_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    return {
        node.module
        for node in ast.walk(tree)
        if id(node) in skipped
        and isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("launcher.")
    }


def test_types_that_cross_rooms_live_in_the_lower_room():
    """An import under ``if TYPE_CHECKING:`` runs never, but a later room named there is a
    cycle of meaning (``launch`` naming the pipeline's ``Planned`` was one): such a type
    belongs to the lowest room its parts come from."""
    rank = {name: i for i, name in enumerate(ORDER)}
    wrong = sorted(
        f"{_module_name(path)} -> {imported}"
        for path in PACKAGE.rglob("*.py")
        for imported in _type_only_imports(path)
        if rank[room(imported)] > rank[room(_module_name(path))]
        and (_module_name(path), imported) not in TYPE_ONLY_EXCEPTIONS
    )
    assert not wrong, "type-only imports against the flow:\n" + "\n".join(wrong)


def test_the_launch_does_not_import_the_renderer():
    """The run file is the contract's type, written by the launch; the report only shows it."""
    wrong = sorted(
        f"{importer} imports {imported}"
        for importer, targets in import_graph().items()
        if room(importer) == "launch"
        for imported in targets
        if room(imported) == "report"
    )
    assert not wrong, wrong


PLAN_IN_THE_RUNTIME = {"launcher.plan.b12x_sizing"}
"""What the runtime takes from the plan room: b12x's sizing (the b12x provider prewarms
exactly the groups the plan sized). Records, census and store are the contract's."""


def test_the_runtime_imports_nothing_of_the_plan_but_b12x_sizing():
    """Lazy and annotation-only imports included (``from launcher.plan import x`` is x)."""
    found = {
        f"{module}.{name}" if module == "launcher.plan" else module
        for path in (PACKAGE / "runtime").rglob("*.py")
        for module, name in _imports(path)
        if module.startswith("launcher.") and room(module) == "plan"
    }
    assert found <= PLAN_IN_THE_RUNTIME, sorted(found - PLAN_IN_THE_RUNTIME)


NOT_IN_THE_RUNTIME = ("launch", "artifact")
"""Rooms the runtime (what vLLM's workers load) never imports: what it shares with the launch
and the artifact (the cache layout, the restore marker, vLLM's compile-cache files) lives in
the contract or in ``launcher.vllm``, below all three."""


def test_the_runtime_imports_neither_the_launch_nor_the_artifact_room():
    """Lazy imports included; an annotation-only one (``if TYPE_CHECKING:``) never runs."""
    found = sorted(
        f"{importer} imports {imported}"
        for importer, targets in import_graph().items()
        if room(importer) == "runtime"
        for imported in targets
        if room(imported) in NOT_IN_THE_RUNTIME
    )
    assert not found, "\n".join(found)


INTO_THE_WORKER_ROOM = {
    ("launcher.cli", "launcher.runtime.prewarm.command"): "`prewarm` runs the providers itself",
}
"""The only imports of the runtime room (what vLLM's workers load, with the ``--worker-cls``
alias ``launcher.worker``) from another room; the launcher's tools read the cards through
``launcher.gpu`` instead."""


def test_only_the_prewarm_command_reaches_inside_vllm():
    found = {
        (importer, imported)
        for importer, targets in import_graph().items()
        if room(importer) != "runtime"
        for imported in targets
        if room(imported) == "runtime"
    }
    assert found == set(INTO_THE_WORKER_ROOM), sorted(found)


PREWARM = "launcher.runtime.prewarm"
PREWARM_ORDER = ("api", "diagnostics", "accelerators", "model", "stage", "providers", "command")
"""The prewarm room's parts in the order they may import each other: the provider API
(``__init__``, ``flow``), what times the stage, compile work off its thread, the model's own
passes, the scratch stage, the providers that drive them all, and the ``prewarm`` command."""


def prewarm_part(module: str) -> str:
    rest = module.removeprefix(PREWARM).lstrip(".").split(".")[0]
    return rest if rest in PREWARM_ORDER else "api"


def test_every_prewarm_module_sits_in_a_known_part():
    top = PACKAGE / "runtime" / "prewarm"
    parts = {p.name for p in top.iterdir() if (p / "__init__.py").is_file()}
    loose = {p.stem for p in top.glob("*.py")} - {"__init__", "flow", "command"}
    assert parts <= set(PREWARM_ORDER) and not loose, (sorted(parts), sorted(loose))


def test_no_prewarm_part_imports_a_later_one():
    """Lazy imports included: the parts read in one direction, so none is a cycle's half."""
    rank = {name: i for i, name in enumerate(PREWARM_ORDER)}
    wrong = sorted(
        f"{importer} ({prewarm_part(importer)}) imports {imported} ({prewarm_part(imported)})"
        for importer, targets in import_graph().items()
        if importer.startswith(PREWARM)
        for imported in targets
        if imported.startswith(PREWARM)
        and rank[prewarm_part(imported)] > rank[prewarm_part(importer)]
    )
    assert not wrong, "\n".join(wrong)


OWNED = PACKAGE / "owned"
DESTRUCTIVE = {
    ("os", "unlink"),
    ("os", "remove"),
    ("os", "rmdir"),
    ("os", "removedirs"),
    ("os", "rename"),
    ("os", "renames"),
    ("os", "replace"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
}
"""Module functions that delete or move a file; a Path's ``unlink``, ``rmdir``, ``rename`` and
one-argument ``replace`` are the same."""
PATH_METHODS = {"unlink", "rmdir", "rename"}


def destructive_calls(path: Path, base: Path = PACKAGE.parent) -> list[str]:
    """``file:line call`` for each call in ``path`` that deletes, renames or replaces a file
    (the file named relative to ``base``)."""
    tree = ast.parse(path.read_text(), str(path))
    aliases = {}  # from os import unlink as u: u -> (os, unlink)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil"):
            aliases.update({a.asname or a.name: (node.module, a.name) for a in node.names})
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        hit = False
        if isinstance(f, ast.Name):
            hit = aliases.get(f.id) in DESTRUCTIVE
        elif isinstance(f, ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else None
            hit = (
                (owner, f.attr) in DESTRUCTIVE
                or (f.attr in PATH_METHODS and owner not in ("os", "shutil"))
                or (f.attr == "replace" and len(node.args) == 1 and not node.keywords)
            )
        if hit:
            found.append(f"{path.relative_to(base)}:{node.lineno} {ast.unparse(f)}")
    return found


def test_only_the_owned_files_boundary_deletes_renames_or_replaces_a_file():
    """Every write, replace and delete goes through ``launcher.owned`` (issue 64): a writer
    that unlinks or renames on its own decides for itself what it may touch."""
    found = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if OWNED not in path.parents
        for call in destructive_calls(path)
    ]
    assert not found, "outside launcher/owned: " + ", ".join(found)


def test_the_boundary_check_catches_each_form(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import os, shutil\nfrom os import unlink as u\nfrom pathlib import Path\n"
        "os.unlink('a')\nshutil.rmtree('b')\nu('c')\nPath('d').unlink()\n"
        "Path('e').rename('f')\nPath('g').replace('h')\nos.replace('i', 'j')\n"
        "'k'.replace('l', 'm')\n"
    )
    lines = [call.split(":")[1].split()[0] for call in destructive_calls(src, tmp_path)]
    assert lines == ["4", "5", "6", "7", "8", "9", "10"]
