"""Datasets that yield `Batch`es of TorchRec KeyedJaggedTensors for the GEM trainer."""

import logging


class _DropFbgemmVersionTableWarning(logging.Filter):
    # fbgemm-gpu 1.6.0 warns on every import that its torch-compat table lacks its own version; the
    # pairing with torch 2.11 is pinned and verified in pyproject.toml, so the warning is noise.
    def filter(self, record: logging.LogRecord) -> bool:
        return "_fbgemm_torch_compat_table has no entry" not in record.getMessage()


logging.getLogger().addFilter(_DropFbgemmVersionTableWarning())

from data.batch import Batch  # noqa: E402
from data.schema import Schema  # noqa: E402

__all__ = ["Batch", "Schema"]
