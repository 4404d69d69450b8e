"""The scratch stage: a throwaway KV cache built and released through vLLM's own path
(``scratch_kv``), the serving-shaped batches its waves run through vLLM's scheduler and
runner (``serving_batches``), and the runner's buffers snapshotted before it and put back
after (``runner_state``). The ``vllm`` provider drives it; the key enumeration reads its
shapes.
"""
