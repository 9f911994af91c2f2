"""Model zoo: `build_model(cfg.model, cfg.attention, schema)` picks the architecture by `model.name`."""

from __future__ import annotations

from typing import Any

from torch import nn

from data import Schema
from gem.config import typed
from gem.models.attention import AttentionConfig
from gem.models.dlrm import DLRM, DLRMConfig
from gem.models.gem import GEM, GEMConfig

CONFIGS: dict[str, type] = {"dlrm": DLRMConfig, "gem": GEMConfig}


def build_model(section: Any, attention_section: Any, schema: Schema) -> tuple[nn.Module, Any]:
    """Validate the `model` (and `attention`) sections and build the model, embedding tables on meta."""
    name = section.get("name") if hasattr(section, "get") else None
    if name not in CONFIGS:
        raise ValueError(f"model.name must be one of {sorted(CONFIGS)}, got {name!r}")
    cfg = typed(CONFIGS[name], section, "model")
    if name == "dlrm":
        return DLRM(cfg, schema), cfg
    return GEM(cfg, typed(AttentionConfig, attention_section, "attention"), schema), cfg
