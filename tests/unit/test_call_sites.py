"""A pointer every call site allocates fresh is aligned at every launch, whatever its name: the
key enumeration keeps it aligned instead of varying it as a per-request slice (issue 40: vLLM
0.26's ``_build_prefill_chunk_metadata_kernel`` compiled 56 keys where 18 are reachable)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from launcher.runtime.prewarm.model.call_sites import fresh_arguments
from launcher.runtime.prewarm.providers import keys as K
from tests.conftest import need

INDEXER = "vllm/v1/attention/backends/mla/indexer.py"
KERNEL = "_build_prefill_chunk_metadata_kernel"

SITES = """
import torch

def kern(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, n, BLOCK: tl.constexpr):
    pass

def launch(x, lens, starts, i, j):
    a = torch.empty(4, dtype=torch.int32)
    b = a
    starts = starts[i:] - starts[i]
    if i:
        lens = torch.zeros(4)
    for e in range(3):
        pass
    kern[(1,)](a, b, starts, lens, e, i, BLOCK=4)

def other(x, y):
    c = torch.cumsum(y, dim=0)
    kern[(2,)](torch.empty(1), x.clone(), c, x[1:], x, 1, BLOCK=4)
"""


def test_a_pointer_is_fresh_only_where_every_call_site_allocates_it():
    fresh = fresh_arguments(SITES, "kern")
    # a: empty() at one site, empty() at the other; b: an alias of a, then clone();
    # c: an arithmetic result over a parameter rebound at the top level, then cumsum().
    assert set(fresh) == {"a_ptr", "b_ptr", "c_ptr"}, fresh
    assert fresh["b_ptr"] == "b: a: made by empty()"
    # d: a parameter rebound only in a branch (the argument reaches), and a slice elsewhere;
    # e: a loop target, and a parameter.


def test_a_tuple_target_a_cumsum_into_out_and_star_arguments_are_not_fresh():
    unpacked = SITES.replace("    b = a\n", "    b, _ = a, 0\n")
    assert "b_ptr" not in fresh_arguments(unpacked, "kern")
    into = SITES.replace("torch.cumsum(y, dim=0)", "torch.cumsum(y, dim=0, out=y)")
    assert "c_ptr" not in fresh_arguments(into, "kern")
    starred = SITES.replace("kern[(2,)](torch.empty(1)", "kern[(2,)](*x, torch.empty(1)")
    assert fresh_arguments(starred, "kern") == {}
    assert fresh_arguments("def f(:", "kern") == {}  # no source: the name rules stand


def vllm026_indexer() -> str:
    src = os.environ.get("BLAUNCH_VLLM026_SRC", "")
    path = Path(src) / INDEXER
    # Fetched with the integration tier's packages (the unit tier alone stays offline).
    why = f"vLLM 0.26's {INDEXER} (tests/run extracts it for the integration tier)"
    need("integration", bool(src) and path.is_file(), why)
    return path.read_text()


def test_vllm_026s_prefill_chunk_kernel_gets_one_pointer_that_varies():
    source = vllm026_indexer()
    fresh = fresh_arguments(source, KERNEL)
    assert "uncompressed_seq_lens_ptr" not in fresh  # a slice of a per-request array
    assert {"query_start_loc_ptr", "cu_compressed_seq_lens_ptr",
            "row_start_cu_compressed_seq_lens_ptr"} <= set(fresh)  # fmt: skip
    params = kernel_params(source, fresh)
    launches = [h200_launch(params, start, stop) for start, stop in H200_SLICES]
    e = K.enumerate_keys(f"indexer.{KERNEL}", params, launches, K.Ranges.of(12, 3000, 3))
    assert not e.too_many and len(e.keys) == 18, e.to_dict()  # 2 alignments x 3 x 3 classes
    assert all(h in e.keys for h in launches)
    unaligned = {k for k in e.keys if k[0][1] == ("*i32", "")}  # uncompressed_seq_lens_ptr
    assert len(unaligned) == 9


# The H200's glm39 boot launched the kernel with these query slices (1 and 16k starts; 16k
# and other stops), every pointer aligned.
H200_SLICES = [(1, 16), (1, 7), (16, 32), (16, 5), (1, 32), (16, 48), (1, 3), (16, 9)]


def kernel_params(source: str, fresh: dict[str, str]) -> list[K.Param]:
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == KERNEL)
    return [
        K.Param(a.arg, is_constexpr="constexpr" in ast.unparse(a.annotation or ast.Constant("")),
                fresh=fresh.get(a.arg, ""))
        for a in fn.args.args
    ]  # fmt: skip


def h200_launch(params: list[K.Param], start: int, stop: int) -> K.Launch:
    spec = []
    for p in params:
        if p.is_constexpr:
            spec.append(("constexpr", 1024 if p.name == "BLOCK_SIZE" else 1))
        elif p.name.endswith("_ptr"):
            spec.append(("*i32", "D"))
        elif p.name == "query_slice_start":
            spec.append(("constexpr", 1) if start == 1 else ("i32", "D"))
        elif p.name == "query_slice_stop":
            spec.append(("i32", "D") if stop % 16 == 0 else ("i32", ""))
        elif p.name == "DCP_RANK":  # 0: divisible by 16
            spec.append(("i32", "D"))
        else:  # DCP_WORLD, DCP_INTERLEAVE: 1
            spec.append(("constexpr", 1))
    return tuple(spec), "{}"
