"""One table of the flags the launcher writes (``launcher.profile.vllm_flags``): the argv, the
flag -> key map for vLLM's refusals and the flags ``vllm.extra_args`` must not repeat all come
from it."""

from __future__ import annotations

import json

import pytest

from launcher.profile.schema import Profile
from launcher.profile.vllm_flags import FLAG_KEYS, FLAGS
from tests.conftest import ROOT

GOLDEN = sorted((ROOT / "tests" / "golden").glob("*.json"))


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.stem)
def test_every_flag_written_has_a_row(golden):
    argv = json.loads(golden.read_text())["argv"]
    planned = argv[argv.index("--host") :]  # the profile's command (and its own flags) before
    flags = [a for a in planned if a.startswith("--")]
    assert flags and all(f in FLAG_KEYS for f in flags), [f for f in flags if f not in FLAG_KEYS]


@pytest.mark.parametrize("row", FLAGS, ids=lambda r: r.flag)
def test_every_key_is_a_profile_key(row):
    model: type = Profile
    for part in row.key.split("."):
        assert part in model.model_fields, row.key
        model = model.model_fields[part].annotation  # a section, or the key's own type


def test_both_spellings_of_a_toggle_and_the_short_aliases_are_planned():
    assert {"--no-enable-prefix-caching", "-tp", "-q"} <= set(FLAG_KEYS)
    assert FLAG_KEYS["-tp"] == "parallel.tensor"
    assert len({row.flag for row in FLAGS}) == len(FLAGS)
