"""A Triton kernel of the shape vLLM's metadata kernels have (a per-request index array, a
request count, a stride that follows the token count), for the key-enumeration GPU test."""

import triton
import triton.language as tl


@triton.jit
def masked_rows(out, query_start_loc, head_stride, token_stride, num_reqs, HEADS: tl.constexpr):
    req = tl.program_id(0)
    if req >= num_reqs:
        return
    start = tl.load(query_start_loc + req)
    for h in range(HEADS):
        tl.store(out + h * head_stride + start * token_stride, -1.0)
