"""Each coupling rule fires with a message that names the values and the fix."""

import pytest

from launcher.errors import ProfileError
from launcher.profile import load_profile
from launcher.profile.rules import auto_capture_sizes
from tests.conftest import MINIMAL


def only_issue(write, overrides):
    with pytest.raises(ProfileError) as exc:
        load_profile(write("p.yaml", MINIMAL), overrides)
    (issue,) = exc.value.issues
    return issue


@pytest.mark.parametrize(
    ("overrides", "key", "fragments"),
    [
        (
            ["parallel.decode_context=3"],
            "parallel.decode_context",
            ["must divide parallel.tensor (got 3, tensor 4)", "use one of 1, 2, 4"],
        ),
        (
            ["parallel.interleave=48"],
            "parallel.interleave",
            ["must divide the KV block (got 48, block_size 64)"],
        ),
        (
            ["serving.cudagraph_capture_sizes=[4, 6, 32]"],
            "serving.cudagraph_capture_sizes",
            ["multiples of 1 + speculative.tokens = 4", "[6]"],
        ),
        (
            ["serving.cudagraph_capture_sizes=[4, 8, 16]"],
            "serving.max_num_seqs",
            ["8 x 4 = 32 exceeds the largest capture size 16", "lower max_num_seqs to 4"],
        ),
        (
            ["memory.kv_tokens=100000", "memory.kv_cache_bytes=4GiB"],
            "memory.kv_tokens",
            ["both set", "keep one"],
        ),
        (
            ["vllm.attention_backend=FLASHINFER"],
            "serving.kv_cache_dtype",
            ["nvfp4_ds_mla needs an MLA sparse attention backend", "FLASHINFER"],
        ),
        (
            ["hardware.count=2"],
            "parallel.tensor",
            ["tensor x pipeline must equal the GPUs", "= 4", "= 2"],
        ),
        (["speculative.tokens=0"], "speculative.tokens", ["at least 1 with method mtp"]),
        (
            ["serving.max_num_batched_tokens=16"],
            "serving.max_num_batched_tokens",
            ["max_num_seqs x (1 + speculative.tokens) = 32 (got 16)"],
        ),
        (
            ["serving.enable_chunked_prefill=false"],
            "serving.max_num_batched_tokens",
            ["without chunked prefill"],
        ),
        (["env.1BAD=x"], "env.1BAD", ["not a valid environment variable name"]),
    ],
)
def test_rule_messages(write, overrides, key, fragments):
    issue = only_issue(write, overrides)
    assert issue.key == key
    for fragment in fragments:
        assert fragment in issue.message
    assert issue.file.endswith("p.yaml") or issue.file == "--set"


def test_rule_issue_points_at_the_line(write):
    path = write("q.yaml", MINIMAL.replace("decode_context: 4", "decode_context: 3"))
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    (issue,) = exc.value.issues
    assert str(issue).startswith(f"{path}:11 parallel.decode_context: must divide")


def test_auto_capture_sizes_are_multiples_of_the_step_and_cover_all_seqs(write):
    p = load_profile(write("p.yaml", MINIMAL), ["serving.max_num_seqs=20"]).profile
    sizes = auto_capture_sizes(p)
    assert all(s % 4 == 0 for s in sizes)
    assert max(sizes) == 80
