#!/usr/bin/env python3
"""Runs parallax's attention backward on one shape a few times, for a profiler to attach to (ncu, nsys).

    PARALLAX_LIB=build/src python3 scripts/profile_attn_bwd.py --seqlen 4096 --batch 4 --causal --kernel wgmma
    ncu --kernel-name regex:attention_bwd_wgmma --launch-skip 2 --launch-count 1 python3 scripts/profile_attn_bwd.py

Inputs are fresh random bf16 values (never zeros); out and lse come from parallax's own forward.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import parallax  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--kernel", default="wgmma")
    ap.add_argument("--iters", type=int, default=4)
    a = ap.parse_args()

    torch.manual_seed(0)
    shape = (a.batch, a.seqlen, a.heads, a.head_dim)
    q, k, v, dout = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = parallax.flash_attn(q, k, v, causal=a.causal, return_lse=True)
    for _ in range(a.iters):
        parallax.attention_backward(dout, q, k, v, out, lse, causal=a.causal, deterministic=a.deterministic,
                                    kernel=a.kernel)
    torch.cuda.synchronize()
    print(f"ran {a.iters} backward calls: B{a.batch} H{a.heads} S{a.seqlen} D{a.head_dim} causal={a.causal} "
          f"deterministic={a.deterministic} kernel={a.kernel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
