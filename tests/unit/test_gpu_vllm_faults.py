"""vLLM's own named request faults (``tests/gpu/vllm_faults.py``): a failure is vLLM's only
under speculation, with a grammar, answered 500, and matched one to one by its log line."""

from __future__ import annotations

from tests.gpu import vllm_faults

MTP = {"vllm": {"argv": ["vllm", "serve", "m", "--speculative-config", '{"method":"mtp"}']}}
PLAIN = {"vllm": {"argv": ["vllm", "serve", "m"]}}
LINE = (
    "(EngineCore pid=2277) ERROR 12-06 14:50:02 [scheduler.py:1748] Unexpected: grammar "
    "rejected tokens [0] for request cmpl-9f74-0-885c. Terminating request.\n"
)
GRAMMAR_500 = "1534 tokens: stream, structured_outputs, top_p, user: HTTP 500"


def test_a_grammar_500_under_speculation_with_its_log_line_is_vllms():
    assert vllm_faults.split([GRAMMAR_500], LINE, MTP) == ([GRAMMAR_500], [])


def test_each_line_answers_for_one_failure_only():
    own, other = vllm_faults.split([GRAMMAR_500, GRAMMAR_500], LINE, MTP)
    assert own == [GRAMMAR_500] and other == [GRAMMAR_500]


def test_without_speculation_or_the_line_or_a_grammar_it_is_the_launchers():
    assert vllm_faults.split([GRAMMAR_500], LINE, PLAIN) == ([], [GRAMMAR_500])
    assert vllm_faults.split([GRAMMAR_500], "", MTP) == ([], [GRAMMAR_500])
    other = "12 tokens: top_p: HTTP 500"
    assert vllm_faults.split([other], LINE, MTP) == ([], [other])
    timeout = "1534 tokens: structured_outputs: not sent, past the deadline"
    assert vllm_faults.split([timeout], LINE, MTP) == ([], [timeout])
