"""benchmarks/tlx_packed_bound.py's CPU parts: the packed lengths and the block counts (the A/B
itself needs the H200)."""

import pytest
import torch

from benchmarks.tlx_packed_bound import blocks_per_head, main, packed_lengths


@pytest.mark.parametrize("block", [32, 64, 128])
@pytest.mark.parametrize("seed", [0, 1])
def test_packed_lengths_are_whole_blocks_as_even_as_possible(block, seed):
    g = torch.Generator().manual_seed(seed)
    kl = torch.randint(0, 300, (257,), generator=g)
    packed = packed_lengths(kl, block, seed)
    assert packed.shape == kl.shape and packed.dtype == torch.int64
    assert bool((packed % block == 0).all())
    assert int(packed.sum()) == round(int(kl.sum()) / block) * block  # the key count, whole blocks
    assert int(packed.max() - packed.min()) <= block
    assert torch.equal(packed, packed_lengths(kl, block, seed))  # deterministic
    assert blocks_per_head(packed, block) == int(packed.sum()) // block  # no padded block


def test_longer_sequences_are_spread_over_the_batch():
    packed = packed_lengths(torch.full((1000,), 48), 32)  # 1,500 blocks: 500 sequences get 2
    longer = (packed == 64).nonzero().flatten()
    assert longer.numel() == 500
    assert 150 < int((longer < 500).sum()) < 350  # not all at one end


def test_the_q128_fill01_rows_block_counts():
    """The counts the notes quote for the bench's PMA q128 fill-0.1 lengths (seed 0, 32-key
    blocks): 2,870 blocks per head per sequence today, 2,477 packed."""
    from benchmarks.tlx_hopper_bench import lengths

    kl = lengths(768, 1024, 0.1, torch.Generator().manual_seed(0))
    assert blocks_per_head(kl, 32) == 2870
    assert blocks_per_head(packed_lengths(kl, 32), 32) == 2477


@pytest.mark.parametrize("kl,block,match", [
    (torch.tensor([3, 4]), 0, "block: must be >= 1"),
    (torch.tensor([], dtype=torch.int64), 32, "key_lengths: expected a non-empty 1-D"),
    (torch.tensor([[3, 4]]), 32, "key_lengths: expected a non-empty 1-D"),
    (torch.tensor([3, -1]), 32, "key_lengths: must be >= 0"),
])
def test_bad_lengths_or_block_are_refused(kl, block, match):
    with pytest.raises(ValueError, match=match):
        packed_lengths(kl, block)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_main_needs_a_gpu():
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        main([])
