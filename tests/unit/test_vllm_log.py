from launcher.report.vllm_log import parse_kv_lines

ONE_LINE = (
    "(EngineCore_DP0 pid=77) INFO 11-30 10:00:00 [kv_cache_utils.py:1234] GPU KV cache size: "
    "646,400 tokens, Maximum concurrency for 524,288 tokens per request: 1.23x\n"
)
TWO_LINES = (
    "INFO 11-30 [gpu_worker.py:300] Available KV cache memory: 5.03 GiB\n"
    "INFO 11-30 [gpu_worker.py:300] Available KV cache memory: 5.01 GiB\n"
    "INFO 11-30 [kv_cache_utils.py:700] GPU KV cache size: 583,168 tokens\n"
    "INFO 11-30 [kv_cache_utils.py:701] Maximum concurrency for 524,288 tokens per request: 1.11x\n"
)


def test_one_line_format():
    log = parse_kv_lines(ONE_LINE)
    assert (log.tokens, log.max_model_len, log.concurrency) == (646400, 524288, 1.23)


def test_two_line_format_and_available_memory():
    log = parse_kv_lines(TWO_LINES)
    assert (log.tokens, log.max_model_len, log.concurrency) == (583168, 524288, 1.11)
    assert log.available_gib == [5.03, 5.01]


def test_cpu_backend_line():
    assert parse_kv_lines("INFO CPU KV cache size: 3,305 tokens").tokens == 3305


def test_nothing_found():
    log = parse_kv_lines("no kv here")
    assert log.tokens is None and log.concurrency is None and log.available_gib is None
