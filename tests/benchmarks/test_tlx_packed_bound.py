"""benchmarks/tlx_packed_bound.py's CPU parts: the packed lengths, the block counts and the A/B's
sides with the device replaced by fakes (the timing itself needs the H200)."""

import json

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


def test_the_ab_times_the_row_against_its_packed_lengths(monkeypatch):
    """A side: the row's inputs; B side: the inputs built from its packed lengths at the launcher's
    block_n; the real kernel on both (the device replaced by fakes; fbtriton for the imports)."""
    pytest.importorskip("triton.language.extra.tlx")
    from types import SimpleNamespace

    from benchmarks import tlx_hopper_bench as tb
    from benchmarks import tlx_packed_bound
    from kernels import tlx_hopper, tlx_hopper_fwd

    real, timed, built = tlx_hopper_fwd.jfa_fwd_kernel, [], []
    kl = torch.tensor([5, 40, 70, 0])

    def inputs(lengths):
        return dict(q="q", k=f"k{len(built)}", v="v", q_off=None, k_off="off", kl=lengths)

    def build_from_lengths(sh, lengths):
        built.append(lengths)
        return inputs(lengths)

    def forward(q, k, v, q_off, k_off, params):
        assert tlx_hopper_fwd.jfa_fwd_kernel is real
        timed.append(k)
        return None, None

    def bench(fn, grads=None):
        fn()
        return 0.9 if timed[-1] == "k0" else 0.8

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tb, "build", lambda sh: inputs(kl))
    monkeypatch.setattr(tb, "build_from_lengths", build_from_lengths)
    monkeypatch.setattr(tb, "shape_params", lambda sh, x: None)
    monkeypatch.setattr(tb, "bench", bench)
    monkeypatch.setattr(tb, "flush_us", lambda: 75.0)
    monkeypatch.setattr(tlx_hopper, "call_fwd_config", lambda *args: SimpleNamespace(block_n=32))
    monkeypatch.setattr(tlx_hopper, "forward", forward)
    rows = []
    monkeypatch.setattr("builtins.print", lambda line, **kw: rows.append(line))
    assert tlx_packed_bound.main(["--only", "PMA q128 fill0.1", "--rounds", "2"]) == 0
    assert tlx_hopper_fwd.jfa_fwd_kernel is real
    assert torch.equal(built[0], packed_lengths(kl, 32))  # 115 keys -> 4 blocks of 32 -> 32 each
    assert timed[2:] == ["k0", "k1", "k1", "k0"]  # after one warm call each: A, then B | B A
    row = json.loads(rows[0])
    assert (row["block_n"], row["keys"], row["packed_keys"]) == (32, 115, 128)
    assert (row["blocks_per_head"], row["packed_blocks_per_head"]) == (6, 4)
    assert row["packed_ratio"] == pytest.approx(0.8 / 0.9)
