"""One forward and one backward of the TLX kernels on PMA B=768 max_kv=1024 H=4 q=128 fill 0.9,
for Nsight Compute (`ncu --clock-control none ...`, see benchmarks/tlx_device_run.sh)."""

import math

import torch

from benchmarks.tlx_hopper_bench import build, shapes
from kernels import tlx_hopper
from kernels.common import JFAParams

sh = [s for s in shapes() if s["name"] == "PMA q128 fill0.9"][0]
x = build(sh)
params = JFAParams(max_seq_len_q=sh["q"], max_seq_len_kv=sh["max_kv"],
                   sm_scale=1 / math.sqrt(x["q"].shape[-1]), broadcast_q=True)
out, lse = tlx_hopper.forward(x["q"], x["k"], x["v"], None, x["k_off"], params)
do = torch.randn_like(out)
tlx_hopper.backward(do, x["q"], x["k"], x["v"], out, lse, None, x["k_off"], params)
torch.cuda.synchronize()
print("fwd bytes", x["fwd_bytes"], "flops", x["flops"])
