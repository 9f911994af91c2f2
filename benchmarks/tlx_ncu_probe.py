"""One forward and one backward of the TLX kernels on one `tlx_hopper_bench` shape, for Nsight
Compute (`ncu --clock-control none ...`, see benchmarks/tlx_device_run.sh):

    python -m benchmarks.tlx_ncu_probe [--shape "PMA q128 fill0.9"] [--fwd-config F=V[,...]]
        [--bwd-config F=V[,...]]
"""

import argparse

import torch

from benchmarks.tlx_hopper_bench import build, override_configs, shape_params, shapes
from kernels import tlx_hopper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="PMA q128 fill0.9", help="a tlx_hopper_bench shape name")
    ap.add_argument("--fwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="FwdConfig fields changed from the launcher's choice")
    ap.add_argument("--bwd-config", default="", metavar="FIELD=VALUE[,...]",
                    help="BwdConfig fields changed from the launcher's choice")
    args = ap.parse_args()
    names = [s["name"] for s in shapes()]
    if args.shape not in names:
        raise SystemExit(f"--shape: expected one of {names}, got {args.shape!r}")
    override_configs(args.fwd_config, args.bwd_config)
    sh = shapes()[names.index(args.shape)]
    x = build(sh)
    params, q_off = shape_params(sh, x), x["q_off"]  # q_off: None for broadcast Q
    out, lse = tlx_hopper.forward(x["q"], x["k"], x["v"], q_off, x["k_off"], params)
    do = torch.randn_like(out)
    tlx_hopper.backward(do, x["q"], x["k"], x["v"], out, lse, q_off, x["k_off"], params)
    torch.cuda.synchronize()
    print(args.shape, "fwd bytes", x["fwd_bytes"], "flops", x["flops"])


if __name__ == "__main__":
    main()
