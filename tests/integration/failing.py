"""A prewarm provider that fails, to prove a worker's prewarm error stops the launch."""

from launcher.runtime.prewarm import PrewarmContext, PrewarmResult


class FailingProvider:
    name = "failing"

    def applies(self, ctx: PrewarmContext) -> bool:
        return True

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return ["nothing: it raises"]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        raise RuntimeError("prewarm exploded on purpose")

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        pass
