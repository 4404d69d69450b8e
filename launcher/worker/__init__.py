"""``--worker-cls launcher.worker.PlannedWorker``: the dotted path vLLM is given (and that
profiles, tests and docs name). The classes live in ``launcher.runtime.worker``; this alias
resolves them lazily, so importing it imports no vLLM."""

from launcher.runtime.worker import __getattr__ as __getattr__
