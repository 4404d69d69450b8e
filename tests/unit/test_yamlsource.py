"""libyaml reads a profile exactly as the pure-Python loader does, errors included."""

from pathlib import Path

import pytest
import yaml

from launcher.errors import ProfileError
from launcher.profile import yamlsource
from tests.conftest import need

ROOT = Path(__file__).resolve().parents[2]
TINY = "model: {path: m}\nserving: {max_model_len: 64}\n"
TRICKY = {
    "control-character": TINY + "description: a\x01b\n",
    "tab-indent": "serving:\n\tmax_model_len: 64\n",
    "duplicate-key": TINY + "name: a\nname: b\n",
    "int-key": TINY + "env: {1: x}\n",
    "recursive-alias": TINY + "vllm: {extra_args: &x [*x]}\n",
    "merge-key": "base: &b {port: 1}\nserving: {<<: *b, max_model_len: 64}\n",
    "deep": "a: " + "[" * 600 + "]" * 600 + "\n",
    "too-deep-for-libyaml": "a: " + "[" * 20000 + "]" * 20000 + "\n",
    "big-int": TINY + "name: " + "9" * 5000 + "\n",
    "python-tag": TINY + "name: !!python/object:os.system x\n",
    "unclosed": TINY + "env: {A: [1, 2\n",
    "bom-and-unicode": "\ufeff" + TINY + "description: caf\u00e9 \u2603\n",
    "empty": "",
    "comment-only": "# nothing\n",
    "two-documents": TINY + "---\n" + TINY,
    "bare-scalar": "just text\n",
    "yaml11-octal": TINY + "hardware: {count: 010}\n",
    "yaml11-base-60": TINY + "env: {T: 1:30, U: 1:30.5}\n",
    "yaml12-numbers": TINY + "env: {A: 0x1F, B: 0o17, C: 0b11, D: 1_000, E: 0, F: -1.5e+3}\n",
}


def _cases():
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        yield path.name, path.read_text()
    for path in sorted((ROOT / "tests/corpus/bad").rglob("*.yaml")):
        yield path.name, path.read_text()
    yield from TRICKY.items()


def _read(path: Path):
    try:
        return yamlsource.read_yaml(path, "p.yaml")
    except ProfileError as exc:
        return [(i.message, i.key, i.file, i.line) for i in exc.issues]


def _need_libyaml() -> None:
    """PyYAML's wheels carry libyaml: a unit run on one without it cannot check the fast path."""
    need("unit", yamlsource.FAST_SAFE_LOADER is not yaml.SafeLoader, "PyYAML without libyaml")


@pytest.mark.parametrize(("name", "text"), list(_cases()), ids=[n for n, _ in _cases()])
def test_libyaml_reads_as_the_pure_python_loader(name, text, tmp_path, monkeypatch):
    _need_libyaml()
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    fast = _read(path)
    monkeypatch.setattr(yamlsource, "FAST_SAFE_LOADER", yaml.SafeLoader)
    assert repr(fast) == repr(_read(path))  # repr: a recursive alias builds a cyclic list


def test_catalog_files_read_the_same_through_libyaml():
    catalog = ROOT / "launcher/plan/catalog"
    for path in sorted(catalog.rglob("*.yaml")):
        assert yamlsource.load_plain(path.read_text()) == yaml.safe_load(path.read_text())


def test_shipped_profiles_take_the_libyaml_path(monkeypatch):
    _need_libyaml()
    used = []
    read = yamlsource._read
    monkeypatch.setattr(
        yamlsource,
        "_read",
        lambda text, display, cls, **kw: used.append(cls) or read(text, display, cls, **kw),
    )
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        yamlsource.read_yaml(path, path.name)
    assert set(used) == {yamlsource.FAST_PROFILE_LOADER}
