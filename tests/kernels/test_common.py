"""kernels.common: the mask rule's pair count against a brute-force count."""

import pytest
import torch

from kernels.common import visible_pairs


def brute_force_pairs(q_len: int, kv_len: int, causal: bool, window: int | None) -> int:
    return sum((not causal or j <= i) and (window is None or abs(i - j) <= window)
               for i in range(q_len) for j in range(kv_len))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 0, 2, 3])
def test_visible_pairs_match_brute_force(causal: bool, window: int | None) -> None:
    q, kv = [3, 0, 7, 5, 1], [4, 6, 0, 9, 1]  # self-like, cross, empty q, empty kv
    got = visible_pairs(torch.tensor(q), torch.tensor(kv), causal, window)
    assert got.tolist() == [brute_force_pairs(a, b, causal, window) for a, b in zip(q, kv)]
