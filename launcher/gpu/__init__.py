"""Beside vLLM: reading the cards' memory from any process (NVML through nvidia-ml-py, and
``cudaMemGetInfo`` samplers). The planned worker, the ``prewarm`` command, ``qualify`` and the
GPU test tier all read the cards through it; it imports nothing else of the launcher, and
torch or the driver only inside the functions that need them."""
