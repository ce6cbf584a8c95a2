#!/usr/bin/env python3
"""Peers of `parallax attention`: torch SDPA with the FLASH_ATTENTION and CUDNN_ATTENTION backends on the
same configurations and FLOP convention, written as a parallax.results/1 JSON that
`parallax attention --peers FILE` reads (records suite "attention", names "torch-flash" / "torch-cudnn").

Configurations: for D in (64, 128): H = 2048 / D, S in 512 .. 16384 with B * S = 16384, plus B4 H16 S1024 D64;
causal off and on. TFLOP/s = 4 B H S S D / time, halved when causal. Timing: CUDA events around each call,
warm-up runs first, median of the timed runs. Inputs [B, S, H, D] (transposed views to SDPA's [B, H, S, D],
as FlashAttention users call it).

    python scripts/attention_peers.py --out peers.json [--dtype bf16] [--quick] [--backward]

--backward times the backward instead (suite "attention_backward", same names, FLOPs 2.5 x the forward's, as
`parallax attention --backward`): q, k, v require grad, the forward runs once outside the timing, then each
timed call is torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) with one fixed random dout, between
CUDA events: the backend's backward kernels (its dO.O preprocessing and dq conversion included) plus autograd's
small per-call overhead, without the forward.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys

SCHEMA = "parallax.results/1"
BACKENDS = {"torch-flash": "FLASH_ATTENTION", "torch-cudnn": "CUDNN_ATTENTION"}


def configs(head_dims=(64, 128), causal_modes=(False, True), quick=False):
    """(B, S, H, D, causal) in the order `parallax attention` runs them."""
    lengths = (512, 2048) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    out = [(16384 // S, S, 2048 // D, D, c) for D in head_dims for c in causal_modes for S in lengths]
    if 64 in head_dims:
        out += [(4, 1024, 16, 64, c) for c in causal_modes]
    return out


def attention_flops(B, H, Sq, Sk, D, causal):
    full = 4.0 * B * H * Sq * Sk * D
    return full / 2 if causal else full


def attention_backward_flops(B, H, Sq, Sk, D, causal):
    """parallax::attention_backward_flops: 2.5 x the forward (five GEMMs against two)."""
    return 2.5 * attention_flops(B, H, Sq, Sk, D, causal)


def make_record(name, B, S, H, D, causal, dtype, samples_ms=None, failure=None, backward=False):
    """One record in the shape the C++ side writes (results.hpp). backward: suite "attention_backward", FLOPs
    2.5x and bytes those of q, k, v, out, dout read and dq, dk, dv written (as `parallax attention --backward`)."""
    shape = {"batch": B, "seqlen": S, "heads": H, "head_dim": D, "causal": causal, "dtype": dtype}
    suite = "attention_backward" if backward else "attention"
    flops = (attention_backward_flops if backward else attention_flops)(B, H, S, S, D, causal)
    byts = (8.0 if backward else 4.0) * B * S * H * D * 2
    rec = {"suite": suite, "name": name, "shape": shape, "dtype": dtype, "flops": flops, "bytes": byts}
    if failure is not None:
        rec.update(status="failed", failure=failure or "unknown failure")
        return rec
    median = statistics.median(samples_ms)
    rec.update(status="ok", median_ms=median, min_ms=min(samples_ms), max_ms=max(samples_ms),
               repetitions=len(samples_ms), arithmetic_intensity=flops / byts,
               gflops=flops / (median * 1e6), gbps=byts / (median * 1e6))
    return rec


DEVICE_KEYS = ("index", "cc_major", "cc_minor", "sm_count", "global_memory_bytes", "l2_bytes",
               "shared_memory_per_block", "shared_memory_per_block_optin", "shared_memory_per_sm",
               "registers_per_sm", "max_threads_per_sm", "warp_size", "clock_khz", "memory_clock_khz",
               "memory_bus_bits")


def device_dict(torch=None):
    """The device object the C++ reader requires (every key present; 0 where torch does not say)."""
    d = {key: 0 for key in DEVICE_KEYS}
    d.update(name="", warp_size=32)
    if torch is not None:
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        d.update(index=torch.cuda.current_device(), name=p.name, cc_major=p.major, cc_minor=p.minor,
                 sm_count=p.multi_processor_count, global_memory_bytes=p.total_memory,
                 l2_bytes=getattr(p, "L2_cache_size", 0))
    return d


def make_document(records, device=None, command=""):
    return {"schema": SCHEMA, "parallax_version": "", "git_sha": "",
            "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": platform.node(), "command": command, "device": device or device_dict(),
            "context": {"source": "scripts/attention_peers.py"}, "records": records}


def time_backend(torch, backend, q, k, v, causal, warmup, reps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel(getattr(SDPBackend, backend)):
        for _ in range(warmup):
            F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        samples = []
        for _ in range(reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop))
    return samples


def time_backend_backward(torch, backend, q, k, v, causal, warmup, reps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel(getattr(SDPBackend, backend)):
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    dout = torch.randn_like(out)
    for _ in range(warmup):
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    samples = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return samples


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--backward", action="store_true", help="time the backward (records '<name>-bwd')")
    args = ap.parse_args(argv)
    import torch

    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    records = []
    cfgs = configs(quick=args.quick)
    for n, (B, S, H, D, causal) in enumerate(cfgs):
        q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=dt) for _ in range(3))
        for name, backend in BACKENDS.items():
            label = name + (" backward" if args.backward else "")
            print(f"[{n + 1}/{len(cfgs)}] B{B} H{H} S{S} D{D}{' causal' if causal else ''} {label}", file=sys.stderr)
            timer = time_backend_backward if args.backward else time_backend
            try:
                samples = timer(torch, backend, q, k, v, causal, args.warmup, args.reps)
                records.append(make_record(name, B, S, H, D, causal, args.dtype, samples, backward=args.backward))
            except Exception as e:  # a backend unavailable for this shape / GPU: recorded, not fatal
                records.append(make_record(name, B, S, H, D, causal, args.dtype, failure=str(e)[:300],
                                           backward=args.backward))
    doc = make_document(records, device_dict(torch), " ".join(sys.argv))
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
