"""Inside vLLM: the planned worker, prewarm providers, physical measurement, the late-JIT
watchdog and the KV budget arithmetic. Imported by vLLM's workers, never by the dry run."""
