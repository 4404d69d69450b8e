"""b12x-launch: a configuration-driven vLLM launcher with a memory-budget planner."""

__version__ = "0.1.0"
