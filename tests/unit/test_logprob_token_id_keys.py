"""The keys of vLLM V2's ``_fill_logprob_token_ids_kernel``, derived whole (``keys.WHOLE_RULES``).

On the H100 (vLLM 0.26, MoE tier, users' traffic, 2026-12-06) three keys of this kernel
compiled late in serving: the waves had served ``logprob_token_ids`` rows of 1..128 ids side by
side, so the kernel launched with the batch's largest count only (NUM_TOPK 0, PADDED_COLS 16 and
128), and the enumeration kept NUM_TOPK and PADDED_COLS as launched. The call site computes
both constexprs and the strides of the tensors it allocates from one count, so the rule lists
the combinations it makes: 178 at ``--max-logprobs`` 20 and vLLM's cap of 128 ids.

The pure tests run everywhere; the binder tests bind vLLM 0.26.0's own source
(``BLAUNCH_VLLM026_SRC``) and the installed vLLM's module (0.32) with Triton's binder, calling
the real ``compute_topk_scores`` (nothing compiles).
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from launcher.contract.record import KernelEnumeration
from launcher.runtime.prewarm.providers import keys as K
from tests.conftest import need_serving

KERNEL = "vllm.v1.worker.gpu.sample.logprob._fill_logprob_token_ids_kernel"
NAMES = (
    "out_token_ids_ptr",
    "out_token_ids_stride",
    "out_valid_mask_ptr",
    "out_valid_mask_stride",
    "sampled_token_ids_ptr",
    "topk_indices_ptr",
    "topk_indices_stride",
    "expanded_idx_mapping_ptr",
    "num_per_req_token_ids_ptr",
    "per_req_token_ids_ptr",
    "per_req_token_ids_stride",
    "NUM_TOPK",
    "PADDED_COLS",
)
PARAMS = [K.Param(n, is_constexpr=n.isupper()) for n in NAMES]
OPTIONS = "{'debug': False, 'instrumentation_mode': ''}"
RANGES = K.Ranges.of(8, 2048, 0)  # the MoE tier: max_logprobs 20 (vLLM's default)
SEED = 20261206


def spec(out_stride, topk_stride, num_topk, padded) -> tuple:
    """The key Triton makes at this call site (the H100's late keys' layout)."""
    return (
        ("*i64", "D"), out_stride, ("*u1", "D"), out_stride, ("*i64", "D"), ("*i32", "D"),
        topk_stride, ("*i32", "D"), ("*i32", "D"), ("*i32", "D"), ("i32", "D"),
        ("constexpr", num_topk), ("constexpr", padded),
    )  # fmt: skip


OTHER, SIXTEEN = ("i32", ""), ("i32", "D")
WAVES = [(spec(OTHER, SIXTEEN, 0, 16), OPTIONS), (spec(OTHER, SIXTEEN, 0, 128), OPTIONS)]
"""What the waves launched (logprobs 0; 16 and 128 ids the batches' largest)."""
LATE = [
    (spec(OTHER, SIXTEEN, 0, 4), OPTIONS),
    (spec(OTHER, SIXTEEN, 16, 16), OPTIONS),
    (spec(OTHER, SIXTEEN, 0, 1), OPTIONS),
]
"""The H100's three late keys (measure-rank0.json's ``late_compiles[*].specialization``)."""


def derived(launches=WAVES, ranges=RANGES) -> K.Enumeration:
    return K.enumerate_keys(KERNEL, PARAMS, launches, ranges)


def int_entry(v: int) -> tuple:
    """Triton's entry for a plain int (unannotated)."""
    return ("constexpr", 1) if v == 1 else ("i32", "D" if v % 16 == 0 else "")


def call_site_key(num_logprobs: int, per_req_ids: list[int]) -> tuple:
    """vLLM 0.26's ``compute_topk_scores`` arithmetic, by hand, for one batch."""
    most = max(per_req_ids)
    cols = max(num_logprobs, most)
    topk_stride = num_logprobs if num_logprobs else K.MAX_LOGPROB_TOKEN_IDS
    padded = 1 << (cols - 1).bit_length()
    return spec(int_entry(1 + cols), int_entry(topk_stride), num_logprobs, padded)


def sampled_batches(n: int, max_logprobs: int = 20) -> list[tuple[int, list[int]]]:
    """Seeded batches that launch the kernel: the batch's logprobs, each request's ids count
    (log-uniform over 1..128, or none; at least one request names some)."""
    rng = random.Random(SEED)

    def ids() -> int:
        return min(K.MAX_LOGPROB_TOKEN_IDS, int(2 ** rng.uniform(0, 7.01)))

    out = []
    for _ in range(n):
        counts = [rng.choice((0, ids())) for _ in range(rng.randint(1, 8))]
        counts[rng.randrange(len(counts))] = ids()
        out.append((rng.randint(0, max_logprobs), counts))
    return out


# ------------------------------------------------------------------ the rule, pure


def test_the_h100s_three_late_keys_are_derived_from_what_the_waves_launched():
    keys = set(derived().keys)
    assert all(k in keys for k in LATE), [k for k in LATE if k not in keys]


def test_without_the_whole_rule_the_late_keys_stay_late(monkeypatch):
    monkeypatch.setattr(K, "WHOLE_RULES", {})
    keys = set(derived().keys)
    assert not any(k in keys for k in LATE)


def test_the_rule_derives_178_keys_at_20_logprobs_and_the_128_id_cap():
    """0 logprobs: 12 (8 widths, the four from 16 with both output stride classes); 1..20
    logprobs: 166 (fewer widths as the logprobs grow). Two of them launched."""
    e = derived()
    assert len(e.keys) == 178 and len(e.missing) == 176 and not e.too_many
    assert K.Ranges.of(8, 2048, 0).max_logprob_token_ids == 128


def test_every_key_of_a_seeded_sample_of_batches_is_derived():
    keys = {s for s, _ in derived().keys}
    made = {call_site_key(k, ids) for k, ids in sampled_batches(3000)}
    assert made <= keys, sorted(made - keys)[:3]
    assert len(made) > 120  # the sample reaches most of the space, not a corner of it


def test_the_derived_keys_are_exactly_what_the_call_site_makes():
    """Every (logprobs, ids) pair at the call site, by hand: no key more, none fewer."""
    made = {call_site_key(k, [m]) for k in range(21) for m in range(1, 129)}
    assert {s for s, _ in derived().keys} == made


@pytest.mark.parametrize("max_logprobs", [0, 20, 100, 5000])
def test_no_derived_key_pads_its_columns_below_its_logprobs(max_logprobs):
    ranges = K.Ranges.of(8, 2048, 0, max_logprobs=max_logprobs)
    for s, _ in derived(ranges=ranges).keys:
        assert s[12][1] >= s[11][1] and s[12][1] & (s[12][1] - 1) == 0, s[11:]


def test_over_the_cap_the_smallest_logprobs_are_kept_and_the_record_says_which():
    """``--max-logprobs -1`` (the vocabulary): a key per count above 128, past the cap."""
    e = derived(ranges=K.Ranges.of(8, 2048, 0, max_logprobs=150_000))
    assert e.too_many and len(e.keys) == K.MAX_KEYS_PER_KERNEL
    assert "of 150375 keys" in e.reduced and "left to the census" in e.reduced
    kept = {s[11][1] for s, _ in e.keys}
    assert min(kept) == 0 and max(kept) < 150


def test_the_record_says_what_was_derived_whole_and_why():
    record = derived().to_dict()
    assert record["derived"].startswith("178 combinations of NUM_TOPK, PADDED_COLS")
    assert "0..20 logprobs and 1..128 logprob_token_ids" in record["derived"]
    assert "NUM_TOPK {0..20} (derived whole (see derived))" in record["args"]
    assert "NUM_TOPK" not in record["assumed"] and "out_token_ids_stride" not in record["assumed"]
    assert KernelEnumeration.model_validate({**record, "compiled": 0}).derived == record["derived"]


def test_a_kernel_without_the_rules_arguments_keeps_the_per_argument_rules_and_says_so():
    params = [p for p in PARAMS if p.name != "topk_indices_stride"]
    launches = [(s[:6] + s[7:], o) for s, o in WAVES]
    e = K.enumerate_keys(KERNEL, params, launches, RANGES)
    assert e.derived == "not derived whole: the kernel has no topk_indices_stride"
    assert len(e.keys) == 2  # as launched: nothing invented


def test_a_launched_key_outside_the_rule_is_kept_and_named():
    odd = (spec(OTHER, SIXTEEN, 3, 2), OPTIONS)  # PADDED_COLS below NUM_TOPK: no such call
    e = derived([*WAVES, odd])
    assert odd in e.keys and odd not in e.missing
    assert "1 launched keys outside them" in e.derived


# ------------------------------------------------------------------ vLLM's call site, bound


@pytest.fixture(params=["0.26.0 source", "installed"])
def call_site(request, monkeypatch):
    """vLLM's logprob module with its three kernels' launches recorded by Triton's binder."""
    from tests.unit.test_key_enumeration import recording
    from tests.unit.test_sampler_keys import LOGPROB, vllm026

    need_serving("torch")
    triton = need_serving("triton")
    if request.param == "installed":
        module = need_serving("vllm.v1.worker.gpu.sample.logprob")
    else:
        module = vllm026(monkeypatch, LOGPROB, "vllm026_logprob_ids")
    fill = recording(monkeypatch, triton, module, "_fill_logprob_token_ids_kernel")
    for other in ("_topk_log_softmax_kernel", "_ranks_kernel"):
        recording(monkeypatch, triton, module, other)
    return module, fill


def serve(module, num_logprobs: int, per_req_ids: list[int]) -> None:
    """The V2 sampler's ``compute_topk_scores`` for one batch (a row per request)."""
    import torch

    rows = len(per_req_ids)
    state = SimpleNamespace(
        token_ids=SimpleNamespace(gpu=torch.zeros(8, 128, dtype=torch.int32)),
        num_token_ids=SimpleNamespace(
            gpu=torch.tensor(per_req_ids + [0] * (8 - rows), dtype=torch.int32)
        ),
    )
    module.compute_topk_scores(
        torch.randn(rows, 512),
        num_logprobs,
        torch.zeros(rows, dtype=torch.int64),
        logprob_token_ids_state=state,
        expanded_idx_mapping=torch.arange(rows, dtype=torch.int32),
        max_per_req_token_ids=max(per_req_ids),
    )


def test_the_binders_keys_of_the_late_batches_are_the_h100s_and_are_derived(call_site):
    module, fill = call_site
    for k, ids in ((0, [16, 1, 8]), (0, [128, 64])):
        serve(module, k, ids)
    waves = list(fill)
    assert {s[11:] for s, _ in waves} == {(("constexpr", 0), ("constexpr", p)) for p in (16, 128)}
    fill.clear()
    for k, ids in ((0, [4, 3]), (16, [16, 2]), (0, [1])):
        serve(module, k, ids)
    late = [s for s, _ in fill]
    assert late == [s for s, _ in LATE]  # the binder agrees with the H100's record
    params = K.params_of(module._fill_logprob_token_ids_kernel)
    keys = {s for s, _ in K.enumerate_keys(KERNEL, params, waves, RANGES).keys}
    assert set(late) <= keys


def test_every_key_vllms_call_site_makes_for_a_seeded_sample_is_derived(call_site):
    module, fill = call_site
    serve(module, 0, [16, 3])  # the waves' template
    serve(module, 0, [128])
    params = K.params_of(module._fill_logprob_token_ids_kernel)
    e = K.enumerate_keys(KERNEL, params, list(fill), RANGES)
    fill.clear()
    for k, ids in sampled_batches(1000):
        serve(module, k, ids)
    served = set(fill)
    assert not served - set(e.keys), sorted(served - set(e.keys))[:3]
    assert len(served) > 120  # of the 178: the sample is not a corner of the space
    assert all(s[12][1] >= s[11][1] for s, _ in e.keys)
