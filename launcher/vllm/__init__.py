"""vLLM's internals the launcher names, in one room."""
