"""Launching: preflight (GPUs, free memory, vLLM), the vLLM argv and environment, the run
directory and the exec (``start.py``)."""
