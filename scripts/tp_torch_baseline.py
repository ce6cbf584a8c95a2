#!/usr/bin/env python3
"""Plain torch + NCCL column-parallel linear layer: the peer numbers for `parallax tp` (issue 7).

One process per GPU (torch.multiprocessing spawn, no torchrun), bf16, the same shape as the bar
(T 8192, K 8192, N 28672 by default). Rank r owns W[:, split_r] (uneven splits like parallax: the first
N % P ranks take one more column).

  forward  : Y_r = X @ W_r, then all_gather_into_tensor of the padded blocks (+ the column scatter into Y)
  backward : dX = all_reduce(dY_r @ W_r^T), dW_r = X^T @ dY_r; sequential, and with the all-reduce launched
             async_op=True before the dW GEMM (the "overlapped" variant of the issue)
  1 GPU    : X @ W and the two backward GEMMs of the whole layer on GPU 0

Prints median milliseconds (CUDA events, --iters timed after --warmup) and the strong-scaling efficiency
of the forward (1-GPU time / (P * TP time)). NCCL_NVLS_ENABLE=0 is set unless already set.

  python3 scripts/tp_torch_baseline.py --gpus 2 [--t 8192 --k 8192 --n 28672] [--json out.json]
"""
import argparse
import json
import os
import statistics


def timed(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def splits(total, parts):
    base, extra = divmod(total, parts)
    sizes = [base + (1 if r < extra else 0) for r in range(parts)]
    offsets = [sum(sizes[:r]) for r in range(parts)]
    return sizes, offsets


def worker(rank, args, port, results):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.gpus)
    t, k, n, P = args.t, args.k, args.n, args.gpus
    sizes, offsets = splits(n, P)
    nr, padded = sizes[rank], max(sizes)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = torch.randn(t, k, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(k, nr, device="cuda", dtype=torch.bfloat16, generator=g) * k ** -0.5
    dy = torch.randn(t, n, device="cuda", dtype=torch.bfloat16, generator=g)
    y = torch.empty(t, n, device="cuda", dtype=torch.bfloat16)
    local = torch.empty(t, padded, device="cuda", dtype=torch.bfloat16)
    gathered = torch.empty(P, t, padded, device="cuda", dtype=torch.bfloat16)

    def forward():
        torch.matmul(x, w, out=local[:, :nr])
        dist.all_gather_into_tensor(gathered, local)
        for q in range(P):
            y[:, offsets[q]:offsets[q] + sizes[q]] = gathered[q, :, :sizes[q]]

    dy_r = dy[:, offsets[rank]:offsets[rank] + nr]

    def backward(overlap):
        dx = dy_r @ w.t()
        work = dist.all_reduce(dx, async_op=overlap)
        dw = x.t() @ dy_r
        if overlap:
            work.wait()
        return dx, dw

    out = {
        "forward_ms": timed(torch, forward, args.warmup, args.iters),
        "forward_gemm_ms": timed(torch, lambda: torch.matmul(x, w, out=local[:, :nr]), args.warmup, args.iters),
        "backward_sequential_ms": timed(torch, lambda: backward(False), args.warmup, args.iters),
        "backward_overlapped_ms": timed(torch, lambda: backward(True), args.warmup, args.iters),
    }
    if rank == 0:
        xf = torch.randn(t, k, device="cuda", dtype=torch.bfloat16)
        wf = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * k ** -0.5
        out["single_gpu_forward_ms"] = timed(torch, lambda: xf @ wf, args.warmup, args.iters)
        out["single_gpu_backward_ms"] = timed(torch, lambda: (dy @ wf.t(), xf.t() @ dy), args.warmup, args.iters)
        results.update(out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--t", type=int, default=8192)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--n", type=int, default=28672)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--json", help="also write the numbers to this file")
    args = p.parse_args()
    if args.gpus < 1 or min(args.t, args.k, args.n) < 1:
        p.error("--gpus, --t, --k, --n must be >= 1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.multiprocessing as mp

    if torch.cuda.device_count() < args.gpus:
        p.error(f"--gpus {args.gpus} but only {torch.cuda.device_count()} CUDA device(s) visible")
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(worker, args=(args, args.port, results), nprocs=args.gpus, join=True)
        r = dict(results)
    eff = r["single_gpu_forward_ms"] / (args.gpus * r["forward_ms"])
    print(f"torch + NCCL column-parallel, t={args.t} k={args.k} n={args.n} bf16, {args.gpus} GPU(s)")
    print(f"  1-GPU forward GEMM        {r['single_gpu_forward_ms']:.3f} ms")
    print(f"  TP forward (GEMM+gather)  {r['forward_ms']:.3f} ms   (local GEMM {r['forward_gemm_ms']:.3f} ms)"
          f"   strong-scaling efficiency {100 * eff:.1f}%")
    print(f"  TP backward sequential    {r['backward_sequential_ms']:.3f} ms")
    print(f"  TP backward async a-r     {r['backward_overlapped_ms']:.3f} ms")
    print(f"  1-GPU backward            {r['single_gpu_backward_ms']:.3f} ms")
    if args.json:
        r.update(vars(args), forward_efficiency=eff)
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)


if __name__ == "__main__":
    main()
