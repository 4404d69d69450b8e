"""The source reader (``launcher.vllm.source``) on a small vLLM-shaped tree: what ``scan``
and the worker's check see without importing anything."""

from __future__ import annotations

import textwrap

from launcher.vllm.source import Release


def _tree(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return Release(root)


def test_members_through_bases_reexports_star_imports_and_self_assignments(tmp_path):
    release = _tree(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/dist/__init__.py": "from .state import *\n",
            "vllm/dist/state.py": "def get_group(): ...\n",
            "vllm/base.py": """
                class Base:
                    size: int = 0
                    def run(self, a, *args, b=1, **kw): ...
            """,
            "vllm/worker.py": """
                from vllm.base import Base as Base
                try:
                    import fast
                except ImportError:
                    fast = None
                class Worker(Base):
                    def __init__(self):
                        self.peak: int = 0
                        self.model = None
            """,
            "vllm/api.py": "from .worker import Worker\n",
        },
    )
    assert release.member("vllm.dist", "get_group") is not None  # from .state import *
    assert release.member("vllm.worker", "Worker.peak") is not None  # self.x: T = ... in a method
    assert release.member("vllm.worker", "Worker.size") is not None  # the base's class field
    assert release.member("vllm.api", "Worker.run") is not None  # a re-exported class's base
    assert release.member("vllm.worker", "fast") is not None  # bound inside try
    assert release.member("vllm.worker", "Worker.gone") is None
    assert release.member("vllm.nowhere", "x") is None
    from launcher.vllm.source import params

    run = release.member("vllm.worker", "Worker.run")
    assert params(run) == ("self", "a", "*args", "b", "**kw")


def test_a_class_marked_after_its_definition_is_still_the_class(tmp_path):
    """vLLM 0.26's ``RoutedExperts.weight_loader.supports_moe_loading = True`` below the class
    binds no ``RoutedExperts``: its members stay readable (they read as absent before)."""
    release = _tree(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/experts.py": """
                class Experts:
                    def __init__(self):
                        self.top_k = 2
                    def weight_loader(self): ...
                Experts.weight_loader.supports = True
                a, (b, *c) = 1, (2, 3)
            """,
        },
    )
    assert release.member("vllm.experts", "Experts.top_k") is not None
    assert all(release.member("vllm.experts", n) is not None for n in ("a", "b", "c"))


def test_an_attribute_set_on_an_object_the_module_does_not_define_is_found(tmp_path):
    """An ``assigned`` internal: ``x.attr = ...`` inside a closure a decorator returns
    (annotated, augmented, among a tuple's targets), ``setattr(x, "attr", ...)`` and
    ``layer.register_parameter("w13_weight", p)`` each set it; a read or a name only
    mentioned does not, nor an assignment in another module."""
    release = _tree(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/decorators.py": """
                def compile_it(cls):
                    def __call__(self, *args):
                        self.aot_compiled_fn = object()
                        self.calls: int = 0
                        self.depth += 1
                        self.first, (self.second, *self.rest) = 1, (2, 3)
                    cls.__call__ = __call__
                    return cls
            """,
            "vllm/moe.py": """
                class Method:
                    def create_weights(self, layer, p):
                        layer.register_parameter("w13_weight", p)
                        setattr(layer, "w2_weight", p)
            """,
            "vllm/reads.py": """
                def peek(model, layer):
                    fn = model.aot_compiled_fn
                    w = getattr(layer, "w13_weight", None)
                    name = "w2_weight"
                    layer.w13_weight.data = w
                    return fn, w, name, model.register_buffer("depth", w)
            """,
        },
    )
    for attr in ("aot_compiled_fn", "calls", "depth", "first", "second", "rest"):
        assert release.assignment("vllm.decorators", attr) is not None, attr
    assert release.assignment("vllm.moe", "w13_weight") is not None  # register_parameter
    assert release.assignment("vllm.moe", "w2_weight") is not None  # setattr
    for attr in ("aot_compiled_fn", "w13_weight", "w2_weight", "depth"):
        assert release.assignment("vllm.reads", attr) is None, attr  # reads only
    assert release.assignment("vllm.moe", "aot_compiled_fn") is None  # set elsewhere
    assert release.assignment("vllm.nowhere", "aot_compiled_fn") is None


def test_an_assigned_entry_reads_present_only_where_its_module_sets_it(tmp_path):
    """The table's rule for the ``assigned`` kind (``releases.read``): the runner's JIT
    registry set in the runner (0.29's layout) is present for that entry and absent for its
    group's other one, whose module only reads it."""
    from launcher.vllm import releases
    from launcher.vllm.internals import by_name

    runner = by_name("warmup.runner_jit_registry")
    capture = by_name("warmup.runner_jit_registry_capture")
    release = _tree(
        tmp_path,
        {
            runner.module.replace(".", "/") + ".py": """
                class GPUModelRunner:
                    def __init__(self, cfg):
                        self.jit_warmup_registry = Registry(cfg)
            """,
            capture.module.replace(".", "/") + ".py": """
                def warm(runner):
                    return runner.jit_warmup_registry.warmup()
            """,
        },
    )
    assert releases.read(release, runner) is True
    assert releases.read(release, capture) is False
    assert releases.outcome(capture, {runner.name: True, capture.name: False}) is None
