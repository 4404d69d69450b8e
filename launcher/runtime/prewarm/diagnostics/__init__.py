"""Where the stage's time goes, for the log only: every compile through Triton's JIT hooks,
slowest first (``compile_times``), and samples of the stage thread's Python stack
(``thread_samples``). Nothing here changes what the stage compiles.
"""
