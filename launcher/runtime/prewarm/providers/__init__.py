"""The providers, each registered by name in ``launcher.profile.prewarm_providers``: b12x's
plans (``b12x``), vLLM's own warmups and the scratch stage's waves (``vllm_warmup``), the DCP
Triton helpers (``triton_kernels``), the late-JIT census's replay (``census``) and the key
enumeration (``keys``).

Beside them, what only the key enumeration uses: a key's JSON form in the record
(``key_json``) and its early start while the stage still serves (``early_keys``), which the
worker begins before the providers run.
"""
