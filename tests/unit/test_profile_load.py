"""Loading: extends, --set, and every kind of bad input, each located."""

from pathlib import Path

import pytest

from launcher.errors import ProfileError
from launcher.profile import load_profile
from launcher.profile.load import deep_merge
from tests.conftest import MINIMAL, PROFILES


def issues_of(path, overrides=()):
    with pytest.raises(ProfileError) as exc:
        load_profile(path, overrides)
    return exc.value.issues


def test_shipped_profiles_load():
    for path in PROFILES.glob("*.yaml"):
        assert load_profile(path).profile.serving.max_model_len > 0


def test_name_defaults_to_file_stem(write):
    assert load_profile(write("mine.yaml", MINIMAL)).profile.name == "mine"


@pytest.mark.parametrize("blank", ["name=", "name=' '"])
def test_a_blank_name_defaults_to_file_stem(write, blank):
    # not an empty plan title and a run directory named "<time>-"
    assert load_profile(write("mine.yaml", MINIMAL), [blank]).profile.name == "mine"


def test_extends_deep_merges_maps_and_replaces_lists(write):
    base = MINIMAL.replace(
        "  kv_cache_dtype:", "  cudagraph_capture_sizes: [4, 8, 16, 32]\n  kv_cache_dtype:"
    )
    write("base.yaml", base + "env:\n  A: '1'\n")
    child = write(
        "child.yaml",
        "extends: base.yaml\nserving:\n  max_num_seqs: 4\n  cudagraph_capture_sizes: [4, 16]\n"
        "env:\n  B: '2'\n",
    )
    loaded = load_profile(child)
    p = loaded.profile
    assert p.serving.max_num_seqs == 4
    assert p.serving.max_model_len == 131072  # kept from the parent
    assert p.serving.cudagraph_capture_sizes == [4, 16]  # replaced, not merged
    assert p.env == {"A": "1", "B": "2"}
    assert [Path(c).name for c in loaded.chain] == ["base.yaml", "child.yaml"]


def test_errors_point_at_the_file_that_set_the_key(write):
    write("base.yaml", MINIMAL)
    child = write("child.yaml", "extends: base.yaml\nparallel:\n  decode_context: 3\n")
    (issue,) = issues_of(child)
    assert issue.file.endswith("child.yaml")
    assert issue.line == 3
    assert issue.key == "parallel.decode_context"
    assert "must divide parallel.tensor (got 3, tensor 4)" in issue.message


def test_parent_key_errors_point_at_the_parent(write):
    write("base.yaml", MINIMAL.replace("max_model_len: 131072", "max_model_len: -5"))
    child = write("child.yaml", "extends: base.yaml\n")
    (issue,) = issues_of(child)
    assert issue.file.endswith("base.yaml")
    assert issue.key == "serving.max_model_len"
    assert issue.line == MINIMAL.splitlines().index("  max_model_len: 131072") + 1


def test_extends_cycle_is_reported_with_its_chain(write):
    write("a.yaml", "extends: b.yaml\n" + MINIMAL)
    write("b.yaml", "extends: a.yaml\n")
    a = write("a.yaml", "extends: b.yaml\n" + MINIMAL)
    (issue,) = issues_of(a)
    assert "extends cycle" in issue.message
    assert "a.yaml -> " in issue.message and "b.yaml -> " in issue.message


def test_missing_parent(write):
    (issue,) = issues_of(write("c.yaml", "extends: nowhere.yaml\n" + MINIMAL))
    assert issue.key == "extends" and "not found" in issue.message and issue.line == 1


def test_a_parent_that_is_a_directory_is_named_at_the_extends_line(write, tmp_path):
    (tmp_path / "base").mkdir()
    (issue,) = issues_of(write("c.yaml", "extends: base\n" + MINIMAL))
    assert issue.key == "extends" and issue.line == 1 and issue.file.endswith("c.yaml")
    assert "'base' is a directory, not a profile" in issue.message


def test_set_overrides_and_deletes(write):
    path = write("p.yaml", MINIMAL + "env:\n  A: '1'\n")
    p = load_profile(
        path, ["serving.max_model_len=65536", "~env.A", "memory.safety_margin=1GiB"]
    ).profile
    assert p.serving.max_model_len == 65536
    assert p.env == {}
    assert p.memory.safety_margin == 1024**3


def test_set_value_is_yaml_and_errors_name_set(write):
    path = write("p.yaml", MINIMAL)
    p = load_profile(path, ["serving.cudagraph_capture_sizes=[4, 8, 16, 32]"]).profile
    assert p.serving.cudagraph_capture_sizes == [4, 8, 16, 32]
    (issue,) = issues_of(path, ["serving.max_num_seqs=lots"])
    assert issue.file == "--set" and issue.key == "serving.max_num_seqs"


def test_set_syntax_error(write):
    (issue,) = issues_of(write("p.yaml", MINIMAL), ["serving.max_num_seqs"])
    assert "KEY=VALUE" in issue.message


def test_an_unknown_section_from_set_is_blamed_on_set_not_the_profile(write):
    # the file has no `servng:`: the key the error is about came from the command line
    for flag in ("--set", "--vary"):
        (issue,) = issues_of(write("p.yaml", MINIMAL), [("servng.max_model_len=1", flag)])
        assert issue.file == flag and issue.key == "servng"
        assert "did you mean 'serving'" in issue.message


@pytest.mark.parametrize(
    "override",
    ["env.HF_TOKEN=[hf_not_for_the_screen", "HF_TOKEN:hf_not_for_the_screen",
     "~env.HF_TOKEN=hf_not_for_the_screen"],
    ids=["value-not-yaml", "no-equals", "delete-with-value"],
)  # fmt: skip
def test_a_set_error_does_not_show_a_secret_value(write, override):
    (issue,) = issues_of(write("p.yaml", MINIMAL), [override])
    assert "hf_not_for_the_screen" not in str(issue)
    assert "HF_TOKEN" in str(issue) and "not shown" in issue.message


def test_unknown_key_suggests_the_close_one(write):
    (issue,) = issues_of(write("p.yaml", MINIMAL.replace("decode_context:", "decode_contxt:")))
    assert issue.key == "parallel.decode_contxt"
    assert "did you mean 'decode_context'" in issue.message
    assert issue.line == 11


def test_unknown_section_lists_known_keys(write):
    (issue,) = issues_of(write("p.yaml", MINIMAL + "zzz: 1\n"))
    assert issue.key == "zzz" and "known keys" in issue.message


def test_wrong_type_shows_the_value(write):
    (issue,) = issues_of(write("p.yaml", MINIMAL.replace("count: 4", "count: four")))
    assert issue.key == "hardware.count" and "'four'" in issue.message


def test_all_schema_errors_at_once(write):
    bad = MINIMAL.replace("count: 4", "count: 0").replace("tensor: 4", "tensr: 4")
    keys = {i.key for i in issues_of(write("p.yaml", bad))}
    assert keys == {"hardware.count", "parallel.tensr"}


def test_missing_required_key(write):
    (issue,) = issues_of(write("p.yaml", "serving:\n  max_model_len: 10\n"))
    assert issue.key == "model" and "required" in issue.message


def test_malformed_yaml_has_a_line(write):
    (issue,) = issues_of(write("p.yaml", "model:\n  path: [unclosed\nserving: {}\n"))
    assert "malformed YAML" in issue.message and issue.line is not None


def test_object_constructing_tag_is_refused(write):
    (issue,) = issues_of(write("p.yaml", "model: !!python/object/apply:os.system ['echo hi']\n"))
    assert "not allowed" in issue.message and issue.line == 1


def test_duplicate_key_is_refused(write):
    (issue,) = issues_of(write("p.yaml", MINIMAL + "serving:\n  max_model_len: 5\n"))
    assert "twice" in issue.message and issue.key == "serving"


def test_missing_file():
    (issue,) = issues_of("/nonexistent/profile.yaml")
    assert issue.message == "file not found"


def test_not_a_mapping(write):
    (issue,) = issues_of(write("p.yaml", "- a\n- b\n"))
    assert "mapping" in issue.message


def test_empty_file_reports_missing_sections(write):
    keys = {i.key for i in issues_of(write("p.yaml", ""))}
    assert keys == {"model", "serving"}


def test_deep_merge_does_not_alias():
    base = {"a": {"b": [1]}}
    merged = deep_merge(base, {"a": {"c": [2]}})
    merged["a"]["c"].append(3)
    assert base == {"a": {"b": [1]}}
