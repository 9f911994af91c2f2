"""Model zoo: `build_model(cfg.model, schema)` picks the architecture named by `model.name`."""

from __future__ import annotations

from typing import Any, Callable

from torch import nn

from data import Schema
from gem.config import typed
from gem.models.dlrm import DLRM, DLRMConfig

# name -> (config dataclass, model class)
MODELS: dict[str, tuple[type, Callable[[Any, Schema], nn.Module]]] = {
    "dlrm": (DLRMConfig, DLRM),
}


def build_model(section: Any, schema: Schema) -> tuple[nn.Module, Any]:
    """Validate the `model` section and build the model (embedding tables on the meta device)."""
    name = section["name"] if "name" in section else None
    if name not in MODELS:
        raise ValueError(f"model.name must be one of {sorted(MODELS)}, got {name!r}")
    config_cls, model_cls = MODELS[name]
    cfg = typed(config_cls, section, "model")
    return model_cls(cfg, schema), cfg
