#!/usr/bin/env python3
"""Builds tests/data/sample_results.json: the test input of the report path (CI runs `parallax report --from`
and scripts/report.py on it).

* device, roofs (ceilings) and the sgemm_ladder suite are the REAL committed H100 numbers from
  bench/results/nvidia-h100-80gb-hbm3/2026-11-22-b8983165b4ea (info.json, ladder.json); the gemm and attention
  (forward) sections are REAL H100 development-probe runs committed under bench/results (tc.json, attn.json
  with its torch peers), exactly as `parallax gemm` / `parallax attention` write them.
* the sections attention_backward, comm and tp are SYNTHETIC (plausible magnitudes, in the format their
  producers write: `parallax comm` extra busbw_gbs, `parallax tp` names like "column-forward-overlap-on" with
  the scaling/layer shape keys the report orchestrator adds), every such record carries notes "SYNTHETIC", and
  the document's context lists them under "synthetic_suites". The sample is test data, not a claim.

Deterministic (no randomness), so re-running it reproduces the committed file byte for byte:
    python3 tests/data/make_sample_results.py > tests/data/sample_results.json
"""

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "bench/results/nvidia-h100-80gb-hbm3/2026-11-22-b8983165b4ea"
GEMM_RUN = ROOT / "bench/results/nvidia-h100-80gb-hbm3/2026-11-22-e38ecdd/tc.json"
ATTN_RUN = ROOT / "bench/results/nvidia-h100-80gb-hbm3/2026-11-22-a1b43d3/attn.json"
SYNTHETIC = ["attention_backward", "comm", "tp"]


def record(suite, name, dtype, shape, ms, flops, nbytes, extra=None, peer=None, status="ok", failure=None):
    r = {"suite": suite, "name": name, "dtype": dtype, "shape": shape, "status": status}
    if status != "ok":
        r["failure"] = failure
    if status != "failed":
        r.update({"median_ms": ms, "min_ms": round(ms * 0.98, 6), "max_ms": round(ms * 1.05, 6), "repetitions": 20})
    r.update({"flops": flops, "bytes": nbytes})
    if status != "failed":
        r.update({"arithmetic_intensity": flops / nbytes if nbytes else 0, "gflops": flops / (ms * 1e6),
                  "gbps": nbytes / (ms * 1e6)})
    if peer:
        r["peer"] = {"name": peer[0], "median_ms": peer[1], "throughput_ratio": peer[1] / ms}
    r["errors"] = []
    r["extra"] = extra or {}
    r["notes"] = "SYNTHETIC sample data, not a measurement"
    return r


def gemm_suite():
    out = json.loads(GEMM_RUN.read_text())["records"]
    out.append(record("gemm", "wgmma-persistent", "bf16", {"m": 4095, "n": 4095, "k": 4095, "op_a": "N", "op_b": "T"},
                      0, 2.0 * 4095 ** 3, 2.0 * 3 * 4095 ** 2, status="failed",
                      failure="SYNTHETIC failed row: the report must list it"))
    return out


def attention_forward():
    out = json.loads(ATTN_RUN.read_text())["records"]
    for r in out:
        r["shape"]["direction"] = "forward"  # what the report orchestrator adds to the section's records
    return out


def attention_backward():
    """Backward records as `parallax attention --backward` is specified to write them (2.5x forward FLOPs)."""
    out = []
    impl_tflops = {"mma": 240, "torch-flash": 190, "torch-cudnn": 260}
    for d in (64, 128):
        for causal in (False, True):
            for s in (512, 1024, 2048, 4096, 8192):
                b, h = 16384 // s, 2048 // d
                flops = 2.5 * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                nbytes = 2.0 * 8 * b * h * s * d
                for name, t in impl_tflops.items():
                    eff = t * (s / (s + 1024.0)) * (0.85 if causal else 1.0)
                    ms = flops / (eff * 1e9)
                    shape = {"batch": b, "seqlen": s, "heads": h, "head_dim": d, "causal": causal, "dtype": "bf16",
                             "direction": "backward"}
                    out.append(record("attention", name, "bf16", shape, ms, flops, nbytes))
    return out


def comm_suite():
    out = []
    for ranks in (2, 4):
        for op, factor in (("all-reduce", 2.0 * (ranks - 1) / ranks), ("all-gather", (ranks - 1) / ranks),
                           ("reduce-scatter", (ranks - 1) / ranks)):
            for e in range(20, 31, 2):
                nbytes = 2 ** e
                busbw = 340.0 * nbytes / (nbytes + 8.0e6)  # GB/s, saturating, synthetic
                algbw = busbw / factor
                ms = nbytes / (algbw * 1e6)
                shape = {"bytes": nbytes, "ranks": ranks}
                out.append(record("comm", op, "fp32", shape, ms, 0.0, float(nbytes),
                                  {"algbw_gbs": algbw, "busbw_gbs": busbw, "busbw_factor": factor}))
    return out


def tp_suite():
    out = []
    t, k, n = 8192, 8192, 28672
    gemm_one = 2.0 * t * k * n / 700e12 * 1e3  # ms of the forward on one GPU at 700 TFLOP/s, synthetic
    for scaling in ("strong", "weak"):
        for layer in ("column", "row"):
            for gpus in (2, 4):
                for pas, work in (("forward", 1.0), ("backward", 2.0)):
                    for overlap in (True, False):
                        if scaling == "weak" and not overlap:
                            continue  # the report runs weak scaling with overlap on only
                        one = gemm_one * work
                        gemm_ms = one / gpus if scaling == "strong" else one
                        comm_ms = (t * (n if layer == "column" else k) * 2 * (gpus - 1) / gpus) / 300e9 * 1e3
                        exposed = comm_ms * ((0.3 + 0.1 * gpus) if overlap else 1.0)
                        ms = gemm_ms + exposed
                        speedup = one / ms
                        efficiency = speedup / gpus if scaling == "strong" else one / ms
                        kk, nn = (k, n * (gpus if scaling == "weak" else 1)) if layer == "column" else \
                            (k * (gpus if scaling == "weak" else 1), n)
                        shape = {"t": t, "k": kk, "n": nn, "gpus": gpus, "chunks": 4, "scaling": scaling,
                                 "layer": layer}
                        out.append(record("tp", f"{layer}-{pas}-overlap-{'on' if overlap else 'off'}", "bf16", shape,
                                          ms, 0.0, 0.0,
                                          {"gemm_ms": gemm_ms, "comm_ms": comm_ms, "exposed_comm_ms": exposed,
                                           "single_gpu_ms": one, "speedup": speedup, "efficiency": efficiency,
                                           "gemm_kernel": "auto"}))
    return out


def main():
    info = json.loads((RUN / "info.json").read_text())
    ladder = json.loads((RUN / "ladder.json").read_text())
    doc = {k: info[k] for k in ("schema", "parallax_version", "git_sha", "timestamp_utc", "host")}
    doc["command"] = "sample: parallax info + parallax gemm --ladder (H100, real) + synthetic suites"
    doc["cuda_runtime_version"] = info["cuda_runtime_version"]
    doc["cuda_driver_version"] = info["cuda_driver_version"]
    doc["device"] = info["device"]
    doc["ceilings"] = info["ceilings"]
    doc["context"] = {
        "sample": "tests/data/make_sample_results.py",
        "real_source": str(RUN.relative_to(ROOT)),
        "synthetic_suites": ",".join(SYNTHETIC),
        "theoretical_bf16_tflops": info["context"]["theoretical_bf16_tflops"],
        "report.gpus": 4,
        "report.quick": False,
        "report.torch": "torch (version not recorded by the probe run)",
        "report.section.roofs": "ok (real H100 numbers)",
        "report.section.sgemm_ladder": "ok (real H100 numbers)",
        "report.section.gemm": "ok (real H100 probe run)",
        "report.section.attention": "ok (real H100 probe run, --quick)",
        "report.section.attention_backward": "ok (SYNTHETIC)",
        "report.section.comm": "ok (SYNTHETIC)",
    }
    for scaling in ("strong", "weak"):
        for layer in ("column", "row"):
            for g in (2, 4):
                doc["context"][f"report.section.tp_{scaling}_{layer}_g{g}"] = "ok (SYNTHETIC)"
    doc["context"]["report.section.tp_strong_mlp_g2"] = (
        "skipped: this build does not support `parallax tp --layer mlp` (SYNTHETIC sample note)")
    records = list(ladder["records"])
    records += gemm_suite()
    records += attention_forward()
    records += attention_backward()
    records += comm_suite()
    records += tp_suite()
    doc["records"] = records
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
