"""``b12x-launch qualify``: drive the deployment's worst case, then pin the largest KV cache
that leaves exactly the safety margin free at the worst moment.

workload (pure) -> server (child process) + client (loopback API) + sampler (NVML)
-> ceiling (pure arithmetic) -> record (run directory and calibration store).
"""
