"""Datasets that yield `Batch`es of TorchRec KeyedJaggedTensors for the GEM trainer."""

import logging


class _DropFbgemmVersionTableWarning(logging.Filter):
    # fbgemm-gpu 1.6.0 warns on every import that its torch-compat table lacks its own version; the
    # pairing with torch 2.11 is pinned and verified in pyproject.toml, so the warning is noise.
    def filter(self, record: logging.LogRecord) -> bool:
        return "_fbgemm_torch_compat_table has no entry" not in record.getMessage()


logging.getLogger().addFilter(_DropFbgemmVersionTableWarning())

from omegaconf import DictConfig, OmegaConf  # noqa: E402

from data.batch import Batch  # noqa: E402
from data.schema import Schema  # noqa: E402
from data.parquet import ParquetConfig, ParquetDataset  # noqa: E402
from data.synthetic import SyntheticConfig, SyntheticDataset  # noqa: E402
from gem.config import typed  # noqa: E402

# data.name -> (config dataclass, dataset class)
_DATASETS = {"synthetic": (SyntheticConfig, SyntheticDataset), "parquet": (ParquetConfig, ParquetDataset)}


def build_dataset(
    cfg: DictConfig | SyntheticConfig | ParquetConfig, rank: int = 0, world_size: int = 1
) -> SyntheticDataset | ParquetDataset:
    """The dataset named by `cfg.name` as seen from `rank` of `world_size` data-parallel ranks.

    `cfg` is the `data` config section. It is checked against the dataset's config dataclass before
    anything is built: an unknown key, a wrong type or a value out of range raises ValueError.
    """
    section = OmegaConf.structured(cfg) if not isinstance(cfg, DictConfig) else cfg
    name = section.get("name", "synthetic")
    if name not in _DATASETS:
        raise ValueError(f"data.name={name!r} is not one of {sorted(_DATASETS)}")
    config_cls, dataset_cls = _DATASETS[name]
    return dataset_cls(typed(config_cls, section, "data"), rank, world_size)


__all__ = ["Batch", "ParquetConfig", "ParquetDataset", "Schema", "SyntheticConfig", "SyntheticDataset", "build_dataset"]
