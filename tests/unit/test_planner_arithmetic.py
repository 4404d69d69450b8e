"""The planner's arithmetic where the plan's other tests did not reach it: each test here
kills mutants the mutation run left alive (``benchmarks/mutation.py``; the survivors and why
each is killed or cannot be are in ``benchmarks/mutation-survivors.md``)."""

from __future__ import annotations

from dataclasses import replace

from launcher.contract.names import Source
from launcher.deployment import resolve
from launcher.plan import estimates
from launcher.plan.catalog import architecture_config
from launcher.plan.model import ModelFacts, from_config
from launcher.plan.planner import Qualified, _per_rank, plan
from launcher.plan.weights import Recipe, decoder_layer_bytes
from launcher.profile import load_profile
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL, PROFILES, gathered


def planned(write, overrides=(), **input_changes):
    loaded = load_profile(write("p.yaml", MINIMAL), list(overrides))
    inputs = replace(gathered(loaded), **input_changes)
    return plan(loaded.profile, inputs)


def test_the_card_total_says_where_it_came_from(write):
    """The catalog's RTX PRO 6000 is sold as 96 GB and CUDA sees 95.01 GiB of it: 0.99 GiB
    kept by the driver and firmware; a profile's or the driver's figure says so instead."""
    catalog = planned(write)
    assert catalog.total_source == Source.CATALOG
    assert catalog.total_detail == (
        "what CUDA reports as the NVIDIA RTX PRO 6000 Blackwell's total; sold as 96GB, "
        "of which the driver and firmware keep 0.99 GiB"
    )
    pinned = planned(write, ["hardware.memory=80GiB"])
    assert pinned.total_source == Source.PROFILE and pinned.total_detail == "hardware.memory"
    assert {r.total_bytes for r in pinned.ranks} == {80 * GiB}
    seen = planned(write, gpu_memory=94 * GiB, gpu_memory_source=Source.MEASURED)
    assert seen.total_detail == "the card's total as the driver reports it now"
    assert {r.total_bytes for r in seen.ranks} == {94 * GiB}


def test_a_qualified_size_pins_every_rank_and_says_how_far_from_the_reserves(write):
    base = planned(write)
    left = base.kv.blocks_per_rank
    page = base.kv.layout.page_bytes
    for blocks, note in ((left - 100, "100 fewer"), (left + 7, "7 more"), (left, None)):
        p = planned(write, qualified=Qualified(blocks, "2026-12-01"))
        assert p.fits and p.kv.pinned == "qualified" and p.kv.blocks_per_rank == blocks
        assert p.kv_source == p.kv.pin_source == Source.QUALIFIED
        assert p.kv.pin_detail == "qualified 2026-12-01"
        assert {(r.kv_blocks, r.kv_bytes) for r in p.ranks} == {(blocks, blocks * page)}
        said = [n for n in p.notes if "pinned at the qualified" in n]
        if note is None:
            assert said == []
        else:
            assert said and f"{blocks:,} blocks, {note} than the reserves above" in said[0]


def test_a_qualified_record_larger_than_the_card_pins_nothing(write):
    base = planned(write)
    total, page = base.ranks[0].total_bytes, base.kv.layout.page_bytes
    over = planned(write, qualified=Qualified(total // page + 1, "2026-12-01"))
    assert over.kv.pinned is None and over.kv.blocks_per_rank == base.kv.blocks_per_rank
    assert over.kv.pin_detail == "" and over.kv_source == base.kv_source
    assert any(n.startswith("ignored the qualified record of 2026-12-01") for n in over.notes)
    blocks = total // page  # a card of exactly that many pages: the KV cache fills it, no more
    exact = planned(write, [f"hardware.memory={blocks * page}"], qualified=Qualified(blocks, "x"))
    assert exact.ranks[0].total_bytes == blocks * page and exact.kv.pinned == "qualified"


def test_a_refusal_names_the_ranks_it_applies_to(write):
    p = planned(write, ["hardware.memory=4GiB"])
    assert not p.fits
    assert len(p.reasons) == 1 and p.reasons[0].startswith("ranks 0-3: fixed costs ")
    assert _per_rank(["a", "", "a", "b"]) == ["ranks 0,2: a", "rank 3: b"]
    assert _per_rank(["", "c", "c", "c"]) == ["ranks 1-3: c"]
    assert _per_rank(["", ""]) == []


def test_nothing_is_suggested_when_no_setting_fits(write):
    p = planned(write, ["hardware.memory=4GiB"])
    assert not p.fits and p.suggestions == ()


def test_the_suggested_max_num_seqs_is_the_largest_that_fits(write):
    """The bisection's answer, checked by planning it and one more sequence."""
    fits_at = planned(write, ["serving.max_num_seqs=1", "serving.max_num_batched_tokens=2048"])
    r, layout = fits_at.ranks[0], fits_at.kv.layout
    spare = r.kv_bytes - layout.page_bytes * layout.blocks_for_tokens(131072)
    weights = f"model.weights_per_rank={r.component('weights').bytes + spare - 1 * MiB}"
    p = planned(write, [weights, "serving.max_num_seqs=64", "serving.max_num_batched_tokens=8192"])
    assert not p.fits
    seqs = int(p.suggestions[0].removeprefix("serving.max_num_seqs="))
    assert p.suggestions[1:] == ("serving.max_num_batched_tokens=2048",)  # min(8192, 2048)

    def fits(n: int) -> bool:
        sets = [weights, f"serving.max_num_seqs={n}", "serving.max_num_batched_tokens=2048"]
        return planned(write, sets).fits

    assert 1 <= seqs < 64 and fits(seqs) and not fits(seqs + 1)


MTP_DCP = "MTP with DCP is tested with the MLA sparse backends only"


def test_mtp_with_dcp_on_a_dense_backend_is_noted_and_nothing_else_is(write):
    dense = ["vllm.attention_backend=FLASHMLA", "serving.kv_cache_dtype=auto"]
    assert MTP_DCP in planned(write, dense).notes
    assert MTP_DCP not in planned(write).notes  # the sparse backend
    assert MTP_DCP not in planned(write, [*dense, "parallel.decode_context=1"]).notes
    assert (
        MTP_DCP
        not in planned(write, [*dense, "speculative.method=none", "speculative.tokens=0"]).notes
    )


def _facts(key: str) -> ModelFacts:
    return from_config(architecture_config(key), key, "catalog")


def test_a_rank_holds_at_least_one_kv_head():
    """With fewer KV heads than TP ranks vLLM replicates them: each rank holds one, as if
    there were one per rank (tiny-llama: 1 KV head, TP 2)."""
    one = _facts("tiny-llama")
    assert one.kv_heads == 1 and not one.is_mla
    per_rank = one.model_copy(update={"kv_heads": 2})
    recipe = Recipe(None, None)
    assert decoder_layer_bytes(one, 0, 2, False, recipe, False) == decoder_layer_bytes(
        per_rank, 0, 2, False, recipe, False
    )
    assert decoder_layer_bytes(one, 0, 1, False, recipe, False) < decoder_layer_bytes(
        per_rank, 0, 1, False, recipe, False
    )


def test_the_mla_context_stand_in_covers_four_pages_per_sequence(write):
    """Short contexts and many sequences: 4 pages of 64 tokens for each of 64 sequences is
    16,384 tokens, more than 8 x max_model_len (8,192); GLM-5.2 on TP4 up-projects 16 heads
    of 192 + 256 dims in BF16. A model without MLA has no such stand-in."""
    loaded = load_profile(
        write("p.yaml", MINIMAL), ["serving.max_model_len=1024", "serving.max_num_seqs=64"]
    )
    f = _facts("glm-5.2")
    assert estimates.mla_prefill_context(loaded.profile, f, 64) == 16384 * 16 * (192 + 256) * 2
    assert estimates.mla_prefill_context(loaded.profile, _facts("tiny-llama"), 64) == 0


def test_the_cuda_contexts_source_note_closes_its_last_part(write):
    detail = planned(write).ranks[0].component("cuda_context").detail
    assert detail.startswith("context+cuBLAS 740 MiB + NCCL TP 840 MiB + NCCL DCP 384 MiB (H200")
    assert detail.count("(H200-measured figures") == 1


def test_the_sparse_mla_scratch_formula_gives_b12x_151s_figures():
    """GLM-5.2 on TP4/DCP4: the figures b12x 1.5.1's own planner gives (``test_b12x_sizing``
    compares them with b12x where it is installed; here they hold without it)."""
    assert estimates.sparse_mla_scratch(3072, 64, 512, 32, decode=False) == 202_114_048
    assert estimates.sparse_mla_scratch(32, 64, 512, 32, decode=True) == 67_382_272


def test_the_indexer_workspace_is_its_logits_its_top_k_and_its_pages(write):
    """GLM-5.2 at T=3,072 (the minimal profile's chunk) with 131,072 tokens of context over
    DCP 4 (32,768 a rank): fp32 logits over a 32,768-token tile (3,072 x 32,768 x 4: 384 MiB),
    top-2,048 indices and scores at 8 bytes (48 MiB) and 512 pages of 64 KiB (32 MiB). A shared
    part: the largest of them counts, so the plan's total alone does not show it."""
    parts = {c.name: c.bytes for c in planned(write).ranks[0].component("workspaces").parts}
    assert parts["dsa_indexer"] == 384 * MiB + 48 * MiB + 32 * MiB


def test_a_drafter_without_an_indexer_leaves_only_its_mla_stand_in(write):
    loaded = load_profile(write("p.yaml", MINIMAL))
    f = _facts("glm-5.2")
    assert f.mtp_layers and f.mtp_has_indexer
    mla = estimates.mla_prefill_context(loaded.profile, f, 64)
    no_index = f.model_copy(update={"mtp_has_indexer": False})
    assert estimates.drafter_stand_ins(loaded.profile, no_index, 64, True) == mla
    index = estimates.indexer_logits(loaded.profile, f)
    assert estimates.drafter_stand_ins(loaded.profile, f, 64, True) == mla + index > mla


def test_the_cpu_backend_reserves_no_device_memory_of_its_own():
    """No device context, no device JIT, no first-forward allocations on the CPU backend:
    with ``jit_headroom: measure`` its headroom is 0 (the shipped CPU profile pins 16 MiB)."""
    loaded = load_profile(PROFILES / "tiny-cpu.yaml", ["memory.jit_headroom=measure"])
    p = plan(loaded.profile, gathered(loaded))
    comps = {c.name: c for c in p.ranks[0].components}
    assert comps["cuda_context"].bytes == 0 and comps["jit_headroom"].bytes == 0
    assert comps["jit_headroom"].detail == "no device JIT on the CPU backend"


def test_the_fork_lines_estimate_counts_attention_where_it_outweighs_the_mlp(write):
    """The estimate fork runtimes keep (``legacy_activation_peak``) takes the larger of a
    layer's attention and MLP intermediates. The catalog's large models all have the larger
    MLP; a small dense model on TP4 (tiny-llama: 1 of 2 heads and its 1 KV head per rank)
    and an MLA model with a one-expert, near-empty MoE have the larger attention."""
    loaded = load_profile(write("p.yaml", MINIMAL))
    d = resolve(loaded.profile)
    t, rows = loaded.profile.serving.max_num_batched_tokens, d.draft_rows
    tiny = _facts("tiny-llama")
    attn = t * (1 + 2 * 1) * 64 * 2 * 2  # q, k and v heads x head_dim, BF16, twice
    expected = 4 * t * tiny.hidden * 2 + attn + 2 * rows * tiny.vocab * 4
    assert attn > t * 3 * (tiny.intermediate // 4) * 2
    assert estimates.legacy_activation_peak(d, tiny)[0] == expected
    glm = _facts("glm-5.2").model_copy(update={"experts_per_token": 1, "moe_intermediate": 4})
    attn = t * 16 * ((192 + 64) + (192 + 256) + 256) * 2  # q, up-projected k/v, output
    assert attn > t * 1 * (3 * 1 + glm.hidden) * 2
    expected = 4 * t * glm.hidden * 2 + attn + 2 * rows * glm.vocab * 4
    assert estimates.legacy_activation_peak(d, glm)[0] == expected
