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
