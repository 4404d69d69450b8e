"""Which layers and shards each rank holds (vLLM's rank order: TP inside PP)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankShape:
    rank: int
    node: int
    tp_rank: int
    tp: int
    stage: int
    stages: int
    first_layer: int
    end_layer: int
    """One past the last decoder layer this rank holds."""

    @property
    def layers(self) -> range:
        return range(self.first_layer, self.end_layer)

    @property
    def is_first_stage(self) -> bool:
        return self.stage == 0

    @property
    def is_last_stage(self) -> bool:
        return self.stage == self.stages - 1


def stage_bounds(num_layers: int, stages: int, stage: int) -> tuple[int, int]:
    """Even split; the remainder goes to the last stages (as vLLM's get_pp_indices does)."""
    base, extra = divmod(num_layers, stages)
    start = stage * base + max(0, stage - (stages - extra))
    size = base + (1 if stage >= stages - extra else 0)
    return start, start + size


def rank_shapes(num_layers: int, tp: int, pp: int, gpus_per_node: int) -> list[RankShape]:
    shapes = []
    for rank in range(tp * pp):
        stage, tp_rank = divmod(rank, tp)
        start, end = stage_bounds(num_layers, pp, stage)
        shapes.append(RankShape(rank, rank // gpus_per_node, tp_rank, tp, stage, pp, start, end))
    return shapes
