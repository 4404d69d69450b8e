"""Compile work taken off the stage's own thread, so boot 1 waits less: Triton compiles in
threads (``parallel_compile``), Inductor's compile process pool (``inductor_pool``) and the
sampler's keys compiled beside the first wave (``sampler_ahead``). Each changes when a
kernel compiles, never which.
"""
