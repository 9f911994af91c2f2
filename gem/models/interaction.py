"""Interaction arch over the token set [non-sequence tokens ‖ sequence summaries] `[B, n, d]`.

- `dcn`: flatten, then DCNv2 low-rank cross layers (TorchRec `LowRankCrossNet`) -> `[B, n*d]`.
- `wukong`: Wukong layers (Zhang et al., 2024), each the concatenation of a factorisation-machine
  block (pairwise dot products, computed in the optimised `X (Xᵀ Y)` form, then an MLP back to
  tokens) and a linear compression block (a learned mix of the tokens), with a residual and a
  LayerNorm -> flattened `[B, n_out*d]`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torchrec.modules.crossnet import LowRankCrossNet
from torchrec.modules.mlp import MLP


@dataclass
class InteractionConfig:
    type: str = "dcn"  # dcn | wukong
    dcn_layers: int = 2
    dcn_low_rank: int = 64
    wukong_layers: int = 2
    wukong_fm_tokens: int = 8  # tokens produced by each FM block
    wukong_lcb_tokens: int = 8  # tokens produced by each linear compression block
    wukong_fm_rank: int = 16  # k in X (Xᵀ Y): compressed pairwise interactions per token
    wukong_mlp: int = 256

    def __post_init__(self) -> None:
        if self.type not in ("dcn", "wukong"):
            raise ValueError(f"model.interaction.type must be dcn or wukong, got {self.type!r}")


class DCNInteraction(nn.Module):
    def __init__(self, num_tokens: int, d: int, cfg: InteractionConfig) -> None:
        super().__init__()
        self.out_features = num_tokens * d
        self.cross = LowRankCrossNet(self.out_features, cfg.dcn_layers, cfg.dcn_low_rank)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.cross(tokens.flatten(1))


class WukongLayer(nn.Module):
    """`[B, n_in, d]` -> `[B, n_fm + n_lcb, d]`."""

    def __init__(self, n_in: int, d: int, cfg: InteractionConfig) -> None:
        super().__init__()
        n_out = cfg.wukong_fm_tokens + cfg.wukong_lcb_tokens
        self.fm_compress = nn.Parameter(torch.randn(n_in, cfg.wukong_fm_rank) * n_in ** -0.5)
        self.fm_mlp = nn.Sequential(MLP(n_in * cfg.wukong_fm_rank, [cfg.wukong_mlp]),
                                    nn.Linear(cfg.wukong_mlp, cfg.wukong_fm_tokens * d))
        self.lcb = nn.Linear(n_in, cfg.wukong_lcb_tokens, bias=False)
        self.residual = nn.Identity() if n_in == n_out else nn.Linear(n_in, n_out, bias=False)
        self.norm = nn.LayerNorm(d)
        self.fm_tokens, self.d = cfg.wukong_fm_tokens, d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        pairwise = torch.bmm(x, torch.matmul(x.transpose(1, 2), self.fm_compress))  # X (Xᵀ Y): [B, n, k]
        fm = self.fm_mlp(pairwise.flatten(1)).reshape(batch, self.fm_tokens, self.d)
        lcb = self.lcb(x.transpose(1, 2)).transpose(1, 2)
        residual = self.residual(x.transpose(1, 2)).transpose(1, 2)
        return self.norm(torch.cat([fm, lcb], dim=1) + residual)


class WukongInteraction(nn.Module):
    def __init__(self, num_tokens: int, d: int, cfg: InteractionConfig) -> None:
        super().__init__()
        n_out = cfg.wukong_fm_tokens + cfg.wukong_lcb_tokens
        self.layers = nn.Sequential(*(WukongLayer(num_tokens if i == 0 else n_out, d, cfg) for i in range(cfg.wukong_layers)))
        self.out_features = n_out * d

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.layers(tokens).flatten(1)


def build_interaction(num_tokens: int, d: int, cfg: InteractionConfig) -> nn.Module:
    return (DCNInteraction if cfg.type == "dcn" else WukongInteraction)(num_tokens, d, cfg)
