"""gem/sharding.py: the planner's choices for the GPU-scale model (the planner is a cost model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from data import build_dataset
from gem.config import register_resolvers
from gem.models import build_model
from gem.sharding import ShardingConfig, sharders, sharding_planner


ROOT = Path(__file__).resolve().parents[2]


def _gpu_base_plan(world_size: int, sharding_types: list[str]) -> dict[str, tuple[str, list[int]]]:
    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["+experiment=gpu_base"])
    with torch.device("meta"):
        model, _ = build_model(cfg.model, cfg.attention, build_dataset(cfg.data, 0, world_size).schema)
    planner = sharding_planner(model, ShardingConfig(sharding_types=sharding_types), world_size, "cuda", 1024)
    plan = planner.plan(model, sharders())
    return {name: (p.sharding_type, p.ranks) for module in plan.plan.values() for name, p in module.items()}


@pytest.mark.parametrize("world_size", [2, 4])
def test_default_plan_shards_tables_whole_or_by_rows(world_size: int) -> None:
    """Row-wise Adagrad keeps one accumulator per row per shard: only whole rows on a rank keep a
    row's update independent of the rank count. At 4 ranks, with column_wise allowed, the planner
    picked it for every gem_base table (the H200 scaling runs of 2026-11-29)."""
    plan = _gpu_base_plan(world_size, ShardingConfig().sharding_types)
    kinds = {kind for kind, _ in plan.values()}
    assert kinds <= {"table_wise", "row_wise"}, plan
    assert plan["seq_seq_item"][0] == "row_wise" and sorted(plan["seq_seq_item"][1]) == list(range(world_size))
    if world_size == 4:
        assert kinds == {"table_wise", "row_wise"}  # both kinds in one plan, as the multi-GPU issue asks
    with_columns = _gpu_base_plan(world_size, ["table_wise", "row_wise", "column_wise"])
    assert with_columns["seq_seq_item"][0] == "column_wise"
