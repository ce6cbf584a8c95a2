#!/usr/bin/env python3
"""Builds tests/data/sample_results.json: the test input of the report path (CI runs `parallax report --from`
and scripts/report.py on it).

* device, roofs (ceilings) and the sgemm_ladder suite are the REAL committed H100 numbers from
  bench/results/nvidia-h100-80gb-hbm3/2026-11-22-b8983165b4ea (info.json, ladder.json).
* the suites gemm, attention, attention_backward, comm and tp had not been measured when this sample was
  made: their records are SYNTHETIC (plausible shapes and magnitudes so every table and plot of the report is
  exercised), every one carries notes "SYNTHETIC", and the document's context lists them under
  "synthetic_suites". The sample is test data, not a claim about any kernel.

Deterministic (no randomness), so re-running it reproduces the committed file byte for byte:
    python3 tests/data/make_sample_results.py > tests/data/sample_results.json
"""

import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = ROOT / "bench/results/nvidia-h100-80gb-hbm3/2026-11-22-b8983165b4ea"
SYNTHETIC = ["gemm", "attention", "attention_backward", "comm", "tp"]


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
    out = []
    # TFLOP/s per kernel at each size (synthetic), cuBLAS last.
    tflops = {"wmma": (180, 260, 300), "mma": (320, 450, 520), "wgmma": (420, 610, 680), "cublas": (480, 700, 760)}
    for i, n in enumerate((1024, 4096, 8192)):
        flops = 2.0 * n ** 3
        nbytes = 2.0 * 3 * n * n
        cublas_ms = flops / (tflops["cublas"][i] * 1e9)
        for name, t in tflops.items():
            ms = flops / (t[i] * 1e9)
            shape = {"m": n, "n": n, "k": n, "op_a": "N", "op_b": "N"}
            if name == "cublas":
                out.append(record("gemm", name, "bf16", shape, ms, flops, nbytes, {"role": "peer"}))
            else:
                out.append(record("gemm", name, "bf16", shape, ms, flops, nbytes, peer=("cublas", cublas_ms)))
    out.append(record("gemm", "wgmma_persistent", "bf16", {"m": 4095, "n": 4095, "k": 4095, "op_a": "N", "op_b": "T"},
                      0, 2.0 * 4095 ** 3, 2.0 * 3 * 4095 ** 2, status="failed",
                      failure="not implemented (synthetic failed row: the report must list it)"))
    return out


def attention_suite(suite, factor):
    out = []
    impl_tflops = {"tiled": 60, "mma": 280, "torch-flash": 330, "torch-cudnn": 390}
    for causal in (False, True):
        for s in (512, 1024, 2048, 4096, 8192):
            b, h, d = 4, 16, 128
            flops = factor * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
            nbytes = 2.0 * 4 * b * h * s * d
            for name, t in impl_tflops.items():
                # Short sequences reach less of the peak (launch and tail effects), synthetic shape of the curve.
                eff = t * (s / (s + 1024.0)) * (0.85 if causal else 1.0)
                ms = flops / (eff * 1e9)
                shape = {"batch": b, "seqlen_q": s, "seqlen_k": s, "heads": h, "heads_kv": h, "head_dim": d,
                         "causal": causal}
                out.append(record(suite, name, "bf16", shape, ms, flops, nbytes))
    return out


def comm_suite():
    out = []
    for ranks in (2,):
        for op, factor in (("all_reduce", 2.0 * (ranks - 1) / ranks), ("all_gather", (ranks - 1) / ranks)):
            for e in range(10, 31, 4):
                nbytes = 2 ** e
                algbw = 380.0 * nbytes / (nbytes + 4.0e6)  # GB/s, saturating, synthetic
                ms = nbytes / (algbw * 1e6)
                shape = {"op": op, "bytes": nbytes, "ranks": ranks}
                out.append(record("comm", op, "bf16", shape, ms, 0.0, float(nbytes),
                                  {"algbw": algbw, "busbw": algbw * factor}))
    return out


def tp_suite():
    out = []
    t, k, n = 8192, 8192, 28672
    for layer in ("column", "row"):
        for overlap in (False, True):
            for scaling in ("strong", "weak"):
                base_gemm = 2.0 * t * k * n / 700e12 * 1e3  # ms on one GPU at 700 TFLOP/s, synthetic
                for gpus in (1, 2):
                    gemm_ms = base_gemm / gpus if scaling == "strong" else base_gemm
                    comm_ms = 0.0 if gpus == 1 else (2.0 * t * n * 2 / gpus) / 300e9 * 1e3
                    exposed = comm_ms * (0.25 if overlap else 1.0)
                    ms = gemm_ms + exposed
                    one = base_gemm
                    speedup = one / ms if scaling == "strong" else gpus * one / ms
                    efficiency = speedup / gpus if scaling == "strong" else one / ms
                    shape = {"layer": layer, "gpus": gpus, "t": t, "k": k, "n": n, "overlap": overlap,
                             "scaling": scaling}
                    flops = 2.0 * t * k * n * (1 if scaling == "strong" else gpus)
                    out.append(record("tp", f"{layer}_parallel", "bf16", shape, ms, flops, 2.0 * (t * k + k * n + t * n),
                                      {"gemm_ms": gemm_ms, "comm_ms": comm_ms, "exposed_comm_ms": exposed,
                                       "efficiency": efficiency, "speedup": speedup}))
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
        "report.gpus": 2,
        "report.quick": False,
        "report.section.roofs": "ok (real H100 numbers)",
        "report.section.sgemm_ladder": "ok (real H100 numbers)",
        "report.section.gemm": "ok (SYNTHETIC)",
        "report.section.attention": "ok (SYNTHETIC)",
        "report.section.attention_backward": "ok (SYNTHETIC)",
        "report.section.comm": "ok (SYNTHETIC)",
        "report.section.tp": "ok (SYNTHETIC)",
    }
    records = list(ladder["records"])
    records += gemm_suite()
    records += attention_suite("attention", 1.0)
    records += attention_suite("attention_backward", 2.5)
    records += comm_suite()
    records += tp_suite()
    doc["records"] = records
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
