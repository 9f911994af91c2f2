"""Jagged flash attention (JFA): one public entry point, several backends (see ``kernels.jfa``)."""

from kernels.common import JFAParams
from kernels.jfa import jagged_flash_attention

__all__ = ["JFAParams", "jagged_flash_attention"]
