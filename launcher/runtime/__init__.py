"""Inside vLLM: the planned worker, prewarm providers, the late-JIT watchdog and the KV
budget arithmetic, loaded by vLLM's workers (the ``prewarm`` command also runs the providers
in its own process). Never imported by the dry run. Reading the cards' memory is
``launcher.gpu``, the room beside vLLM that the worker and the launcher's tools share."""
