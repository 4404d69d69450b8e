"""Where vLLM's compiled pieces go, and where a warm boot looks for them (runtime.compile_dir).

The factor files under ``tests/field/vllm-compile-dirs`` are vLLM 0.26's own, from the H200
(2026-12-04): the GLM model's boot 1 named ``ba8db70dda``, its boot 2 ``150303e038``, with the
same variables, config and compiler hashes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.runtime import compile_dir
from launcher.runtime.compile_dir import Naming
from tests.conftest import ROOT

FIELD = ROOT / "tests" / "field" / "vllm-compile-dirs"


def field_factors(name: str) -> dict:
    return json.loads((FIELD / f"{name}-rank_0_0-backbone.json").read_text())


@pytest.mark.parametrize("name", ["ba8db70dda", "150303e038"])
def test_dir_name_names_vllms_own_directories_from_their_factor_files(name):
    assert compile_dir.dir_name(field_factors(name)) == name


def test_the_h200s_two_directories_differ_by_the_code_hash_alone():
    cold, warm = field_factors("ba8db70dda"), field_factors("150303e038")
    assert {k: cold[k] for k in cold if k != "code_hash"} == {
        k: warm[k] for k in warm if k != "code_hash"
    }
    assert compile_dir.dir_name(cold, warm["code_hash"]) == "150303e038"


def test_code_hash_reads_paths_and_text_in_order_and_leaves_generated_code_out(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    both = compile_dir.code_hash([str(b), str(a)])
    assert both == compile_dir.code_hash([str(a), str(b), "<string>"])
    assert both != compile_dir.code_hash([str(a)])
    b.write_text("y = 3\n")
    assert both != compile_dir.code_hash([str(a), str(b)])
    missing = compile_dir.code_hash([str(a), str(tmp_path / "gone.py")])
    assert missing != compile_dir.code_hash([str(a)])  # an unreadable file counts by its path


def test_kept_files_resolves_each_kept_module_to_its_file():
    info = SimpleNamespace(
        inlined_sources=[SimpleNamespace(module="json"), SimpleNamespace(module="launcher.units")]
    )
    import json as json_module

    import launcher.units

    assert compile_dir.kept_files(info) == {json_module.__file__, launcher.units.__file__}


class Tree:
    """A cold boot's directory as vLLM writes it: two parts, pieces, an index, factor files
    whose hashes name the directory; three traced files, one of which torch did not keep."""

    def __init__(self, root: Path):
        self.sources = [root / "src" / f"m{i}.py" for i in range(3)]
        for i, p in enumerate(self.sources):
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"v = {i}\n")
        self.traced = tuple(sorted(str(p) for p in self.sources))
        self.kept = {str(p) for p in self.sources[:2]}
        self.factors = {
            "env": {"VLLM_X": "1", "VLLM_Y": None},
            "config_hash": "c" * 10,
            "code_hash": compile_dir.code_hash(self.traced),
            "compiler_hash": "d" * 10,
        }
        self.cache = root / "vllm" / "torch_compile_cache"
        self.cold = self.cache / compile_dir.dir_name(self.factors) / "rank_0_0"
        for part in ("backbone", "eagle_head"):
            d = self.cold / part
            d.mkdir(parents=True)
            (d / compile_dir.FACTORS).write_text(json.dumps(self.factors))
            (d / compile_dir.INDEX).write_text(repr({((1, 2048), 0, "s"): str(d / "k1")}))
            (d / "k1").write_bytes(b"piece " + part.encode())
        self.warm_name = compile_dir.dir_name(self.factors, compile_dir.code_hash(self.kept))


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Tree:
    t = Tree(tmp_path)
    monkeypatch.setattr(compile_dir, "_naming", [Naming("backbone", t.traced, t.cold / "backbone")])
    return t


def test_a_cold_boots_pieces_are_linked_under_the_directory_a_warm_boot_names(tree):
    done = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert isinstance(done, compile_dir.Linked), done
    assert done.warm == tree.warm_name != done.cold
    assert done.files == 6
    assert done.left_out == (str(tree.sources[2]),)
    warm = tree.cache / tree.warm_name / "rank_0_0"
    for part in ("backbone", "eagle_head"):
        assert os.path.samefile(warm / part / "k1", tree.cold / part / "k1")
        index = warm / part / compile_dir.INDEX
        assert index.read_text() == (tree.cold / part / compile_dir.INDEX).read_text()
        assert not os.path.samefile(index, tree.cold / part / compile_dir.INDEX)
    factors = json.loads((warm / "backbone" / compile_dir.FACTORS).read_text())
    assert compile_dir.dir_name(factors) == tree.warm_name  # the naming part's: its directory
    other = (warm / "eagle_head" / compile_dir.FACTORS).read_text()
    assert other == (tree.cold / "eagle_head" / compile_dir.FACTORS).read_text()
    again = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert again.files == 0


def test_nothing_is_linked_when_torch_kept_every_traced_file(tree):
    done = compile_dir.link_for_warm_boots({"backbone": set(tree.traced)})
    assert done.warm == done.cold and done.files == 0
    assert sorted(p.name for p in tree.cache.iterdir()) == [tree.cold.parent.name]


def test_another_vllms_directory_naming_links_nothing(tree):
    (tree.cold / "backbone" / compile_dir.FACTORS).write_text(
        json.dumps({**tree.factors, "config_hash": "e" * 10})
    )
    done = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert isinstance(done, str) and "names its directories otherwise" in done
    assert sorted(p.name for p in tree.cache.iterdir()) == [tree.cold.parent.name]


def test_another_vllms_source_hash_links_nothing(tree, monkeypatch):
    naming = Naming("backbone", tree.traced[:1], tree.cold / "backbone")
    monkeypatch.setattr(compile_dir, "_naming", [naming])
    done = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert isinstance(done, str) and "hashes its traced files otherwise" in done
    assert sorted(p.name for p in tree.cache.iterdir()) == [tree.cold.parent.name]


def test_a_directory_set_in_vllms_config_is_where_every_boot_looks(tree, monkeypatch):
    naming = Naming("backbone", (), tree.cold / "backbone", given=True)
    monkeypatch.setattr(compile_dir, "_naming", [naming])
    done = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert done.warm == done.cold and done.files == 0


def test_pieces_kept_in_vllms_aot_artifact_need_no_link(tree):
    (tree.cold / "backbone" / compile_dir.INDEX).unlink()  # the mega artifact: no index here
    done = compile_dir.link_for_warm_boots({"backbone": tree.kept})
    assert isinstance(done, compile_dir.Unneeded) and "AOT artifact" in done.say()
    assert sorted(p.name for p in tree.cache.iterdir()) == [tree.cold.parent.name]


def test_a_boot_whose_naming_part_compiled_no_aot_graph_links_nothing(tree, monkeypatch):
    done = compile_dir.link_for_warm_boots({"eagle_head": set()})
    assert isinstance(done, str) and "backbone" in done
    monkeypatch.setattr(compile_dir, "_naming", [])
    assert "no backend call" in compile_dir.link_for_warm_boots({})


def test_a_piece_is_loaded_from_beside_its_index_when_vllm_recorded_another_root(tmp_path):
    here = tmp_path / "fresh" / "part"
    here.mkdir(parents=True)
    (here / "k1").write_bytes(b"x")
    elsewhere = str(tmp_path / "baked" / "part" / "k1")
    assert compile_dir.beside(str(here), ("k1", elsewhere)) == ("k1", str(here / "k1"))
    gone = ("k2", str(tmp_path / "baked" / "part" / "k2"))
    assert compile_dir.beside(str(here), gone) == gone  # no such file here: vLLM's own path
    assert compile_dir.beside(str(here), "not a handle") == "not a handle"


class Compiled:
    """What vLLM's ``support_torch_compile`` leaves on a module: the AOT function and whether
    it came from disk; the function's artifacts name the part (vLLM's ``prefix``)."""

    def __init__(self, part: str, module: str, from_disk: bool):
        info = SimpleNamespace(inlined_sources=[SimpleNamespace(module=module)])
        self.aot_compiled_fn = SimpleNamespace(
            _artifacts=SimpleNamespace(compiled_fn=SimpleNamespace(prefix=part)),
            source_info=lambda: info,
        )
        self.was_aot_compile_fn_loaded_from_disk = from_disk


class Model:
    def __init__(self, *modules):
        self._modules = [object(), *modules]

    def modules(self):
        return iter(self._modules)


class Wrapper:  # vLLM's CUDA graph wrapper: the model is behind unwrap()
    def __init__(self, model):
        self.model = model

    def unwrap(self):
        return self.model


def test_compiled_parts_are_the_aot_graphs_this_boot_compiled_not_those_it_loaded():
    import json as json_module

    import launcher.units

    model = Wrapper(Model(Compiled("backbone", "json", from_disk=False)))
    drafter = Model(Compiled("eagle_head", "launcher.units", from_disk=True))
    assert compile_dir.compiled_parts(model, drafter, None) == {"backbone": {json_module.__file__}}
    drafter = Model(Compiled("eagle_head", "launcher.units", from_disk=False))
    assert compile_dir.compiled_parts(model, drafter)["eagle_head"] == {launcher.units.__file__}
