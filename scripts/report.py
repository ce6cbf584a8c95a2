#!/usr/bin/env python3
"""parallax report: tables, a short analysis and plots from ONE results.json (schema parallax.results/1).

    python3 scripts/report.py --from results.json --out DIR [--no-plots]

writes DIR/report.md and DIR/*.png. It reads nothing but the results file, so the same report can be rebuilt
on any machine (`parallax report --from results.json` calls this script). docs/results-schema.md lists the
suites and fields read here.

Design:
* generic by suite: the suites known here (sgemm_ladder, gemm, attention, attention_backward, comm, tp) get
  their own table, analysis and plot; any other suite gets a generic table; a known suite with no records
  gets a "not measured in this run" line (with the orchestrator's reason when it recorded one).
* every number in the analysis is computed from the file; nothing is hard-coded about a GPU.
* without matplotlib, report.md is still written and says the plots were skipped (exit 0, warning on stderr).
* a malformed file is an error naming the offending field (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import OrderedDict, defaultdict

SCHEMA = "parallax.results/1"

# Suites with a dedicated section, in report order, with their headings.
KNOWN_SUITES = OrderedDict(
    [
        ("sgemm_ladder", "FP32 GEMM ladder vs cuBLAS"),
        ("gemm", "Tensor-core GEMM vs cuBLAS"),
        ("attention", "Attention forward"),
        ("attention_backward", "Attention backward"),
        ("comm", "Collectives (NCCL)"),
        ("tp", "Tensor parallelism: strong and weak scaling"),
    ]
)
# Sections the orchestrator runs that are not a suite of records (their status is still reported).
ROOFS_SECTION = "roofs"
# Suites whose records span several GPUs (kept off the single-GPU roofline).
MULTI_GPU_SUITES = ("tp", "comm")


class MalformedResults(Exception):
    """The results file cannot be reported on; the message names the file and the field."""


# ------------------------------------------------------------------------------------------------ loading


def _require(obj, key, kind, path):
    if not isinstance(obj, dict) or key not in obj:
        raise MalformedResults(f"field '{path + '.' if path else ''}{key}': missing")
    value = obj[key]
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        kind_name = "a number"
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        kind_name = "an integer"
    else:
        ok = isinstance(value, kind)
        kind_name = {str: "a string", list: "an array", dict: "an object"}.get(kind, str(kind))
    if not ok:
        raise MalformedResults(
            f"field '{path + '.' if path else ''}{key}': expected {kind_name}, got {type(value).__name__}"
        )
    return value


def load(path: str) -> dict:
    """Reads and validates what this script relies on; raises MalformedResults naming the field."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise MalformedResults(f"cannot read: {e.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise MalformedResults(f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MalformedResults(f"the document must be a JSON object, got {type(doc).__name__}")
    if "schema" not in doc:
        raise MalformedResults("field 'schema': missing (not a parallax results document?)")
    if doc["schema"] != SCHEMA:
        raise MalformedResults(f"field 'schema': unsupported version '{doc['schema']}'; this script reads '{SCHEMA}'")
    device = _require(doc, "device", dict, "")
    _require(device, "name", str, "device")
    if doc.get("ceilings") is not None:
        ceilings = _require(doc, "ceilings", dict, "")
        for key in ("copy_gbps", "cublas_sgemm_gflops", "cublas_bf16_gflops"):
            _require(ceilings, key, float, "ceilings")
    if doc.get("context") is not None:
        _require(doc, "context", dict, "")
    records = _require(doc, "records", list, "")
    for i, r in enumerate(records):
        p = f"records[{i}]"
        if not isinstance(r, dict):
            raise MalformedResults(f"field '{p}': expected an object, got {type(r).__name__}")
        for key in ("suite", "name", "dtype", "status"):
            _require(r, key, str, p)
        _require(r, "shape", dict, p)
        if r["status"] not in ("ok", "incorrect", "failed"):
            raise MalformedResults(f"field '{p}.status': unknown status '{r['status']}' (valid: ok, incorrect, failed)")
        if r["status"] != "failed":
            for key in ("median_ms", "gflops"):
                _require(r, key, float, p)
        if r.get("extra") is not None:
            _require(r, "extra", dict, p)
    return doc


# ------------------------------------------------------------------------------------------------ helpers


def ok_records(records):
    return [r for r in records if r["status"] == "ok"]


def num(value, decimals=1):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{decimals}f}".replace(",", "")


def pct(value, decimals=1):
    return "-" if value is None else f"{value:.{decimals}f}%"


def md_table(headers, rows):
    """A GitHub-flavoured markdown table; every row must have len(headers) cells."""
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {row} has {len(row)} cells for {len(headers)} columns")
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def shape_text(shape):
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def status_cell(r):
    if r["status"] == "ok":
        return "ok"
    why = r.get("failure") or "no reason recorded"
    return ("FAILED: " if r["status"] == "failed" else "WRONG: ") + why


def is_peer(r):
    return (r.get("extra") or {}).get("role") == "peer"


def peer_percent(r):
    p = r.get("peer")
    if isinstance(p, dict) and isinstance(p.get("throughput_ratio"), (int, float)):
        return 100.0 * p["throughput_ratio"]
    return None


def section_note(doc, section):
    """What the orchestrator recorded about a section: context 'report.section.<name>' (or None)."""
    return (doc.get("context") or {}).get(f"report.section.{section}")


def section_notes(doc, prefix):
    """(section, status) of every section named `prefix` or `prefix_...` (the TP study runs one per GPU count)."""
    out = []
    for k, v in (doc.get("context") or {}).items():
        if k.startswith("report.section."):
            name = k[len("report.section."):]
            if name == prefix or name.startswith(prefix + "_"):
                out.append((name, str(v)))
    return out


# --- the producers' formats ----------------------------------------------------------------------------------
# The report reads what the subcommands really write (docs/results-schema.md) and a few equivalent spellings, so
# a producer that grows a field does not break it: shape first, then extra, then what the record name says.


def field(r, *keys):
    """The first of `keys` present in the record's shape, then in its extra (None if none)."""
    for where in (r.get("shape") or {}, r.get("extra") or {}):
        for k in keys:
            if k in where:
                return where[k]
    return None


def is_backward(r):
    """Attention backward: suite attention_backward, a 'direction'/'pass' of backward, or a '-bwd' name."""
    if r["suite"] == "attention_backward":
        return True
    d = field(r, "direction", "pass")
    if isinstance(d, str):
        return d.lower() in ("backward", "bwd")
    return r["name"].endswith(("-bwd", "_bwd", "-backward", "_backward"))


def report_suite(r):
    """The report section a record belongs to (attention records split by direction)."""
    if r["suite"] in ("attention", "attention_backward"):
        return "attention_backward" if is_backward(r) else "attention"
    return r["suite"]


def seqlen(r, which="q"):
    v = field(r, f"seqlen_{which}", "seqlen")
    return v if isinstance(v, (int, float)) else 0


def comm_bw(r, kind):
    """algbw / busbw in GB/s: `parallax comm` writes extra algbw_gbs / busbw_gbs."""
    v = field(r, f"{kind}_gbs", kind)
    return v if isinstance(v, (int, float)) else None


def comm_op(r):
    return str(field(r, "op") or r["name"])


def _on(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return v.lower() in ("on", "true", "yes", "1")
    return None


def tp_info(r):
    """(layer, pass, overlap, scaling, transport) of a TP record: shape/extra keys, else its name
    ('column-forward-overlap-on', as `parallax tp` writes it)."""
    name = r["name"].replace("_", "-")
    parts = name.split("-")
    layer = field(r, "layer") or (parts[0] if parts and parts[0] in ("column", "row", "mlp") else None)
    pas = field(r, "pass", "direction")
    if pas is None:
        pas = "backward" if "-backward" in name else "forward" if "-forward" in name else None
    overlap = _on(field(r, "overlap"))
    if overlap is None and "-overlap-" in name:
        overlap = _on(name.split("-overlap-", 1)[1].split("-")[0])
    scaling = field(r, "scaling")
    transport = field(r, "transport")
    return layer, pas, overlap, scaling, transport


def roofs(doc):
    """(fp32 GFLOP/s, bf16 GFLOP/s, copy GB/s) measured in the run, or None without ceilings."""
    c = doc.get("ceilings")
    if not c:
        return None
    return c["cublas_sgemm_gflops"], c["cublas_bf16_gflops"], c["copy_gbps"]


def compute_roof_for(dtype, r):
    """Which measured compute roof a record sits under: FP32 CUDA cores or the BF16/FP16 tensor cores."""
    if r is None:
        return None
    fp32, bf16, _ = r
    return fp32 if dtype in ("fp32", "float32", "f32") else bf16


# ------------------------------------------------------------------------------------------------ sections


class Report:
    def __init__(self, doc, out_dir, plots_enabled):
        self.doc = doc
        self.out = out_dir
        self.plots_enabled = plots_enabled
        self.plt = None
        self.plot_files = []  # written PNGs (relative names)
        self.plot_notes = []
        self.md = []
        by_suite = OrderedDict()
        for r in doc["records"]:
            by_suite.setdefault(report_suite(r), []).append(r)
        self.by_suite = by_suite

    # --- plotting plumbing -------------------------------------------------------------------------

    def figure(self):
        return self.plt.subplots(figsize=(8, 5), dpi=110)

    def save(self, fig, name, caption):
        path = os.path.join(self.out, name)
        fig.tight_layout()
        fig.savefig(path)
        self.plt.close(fig)
        self.plot_files.append(name)
        self.md.append(f"\n![{caption}]({name})\n")

    def plotting(self):
        return self.plt is not None

    # --- document ------------------------------------------------------------------------------------

    def header(self):
        d = self.doc
        dev = d["device"]
        self.md.append("# parallax report\n")
        rows = [
            ["GPU", f"{dev.get('name')} ({dev.get('arch', '?')}, {dev.get('sm_count', '?')} SMs)"],
            ["GPUs used", str((d.get("context") or {}).get("report.gpus", 1))],
            ["parallax", f"{d.get('parallax_version', '?')} ({d.get('git_sha', '?')})"],
            ["measured", d.get("timestamp_utc", "?")],
            ["host", d.get("host", "?")],
            ["command", f"`{d.get('command') or '?'}`"],
            ["records", str(len(d["records"]))],
        ]
        if (d.get("context") or {}).get("report.quick") is True:
            rows.append(["mode", "--quick (reduced sizes: read trends, not peaks)"])
        self.md.append(md_table(["", ""], rows))
        synthetic = (d.get("context") or {}).get("synthetic_suites")
        if synthetic:
            self.md.append(
                f"\n> **Sample data.** The suites {synthetic} in this file are SYNTHETIC test data "
                "(see the file's context), not measurements.\n"
            )
        self.sections_status()

    def sections_status(self):
        ctx = self.doc.get("context") or {}
        rows = []
        for k, v in ctx.items():
            if k.startswith("report.section."):
                name = k[len("report.section."):]
                seconds = ctx.get("report.seconds." + name)
                rows.append([name, str(v), num(seconds, 1) if isinstance(seconds, (int, float)) else "-"])
        if rows:
            self.md.append("\n## Sections of this run\n")
            self.md.append(md_table(["section", "status", "seconds"], rows))

    def roofs_section(self):
        self.md.append("\n## Device roofs (measured)\n")
        r = roofs(self.doc)
        if r is None:
            note = section_note(self.doc, ROOFS_SECTION)
            self.md.append("Not measured in this run" + (f" ({note})." if note else "."))
            return
        fp32, bf16, copy = r
        dev = self.doc["device"]
        rows = [
            ["copy, device to device (read + write)", "GB/s", num(copy, 0), num(dev.get("theoretical_dram_gbps"), 0)],
            ["cublasSgemm FP32 (TF32 off)", "TFLOP/s", num(fp32 / 1e3, 1), num(dev.get("theoretical_fp32_tflops"), 1)],
            ["cublasGemmEx BF16 (FP32 accumulate)", "TFLOP/s", num(bf16 / 1e3, 1),
             num((self.doc.get("context") or {}).get("theoretical_bf16_tflops"), 0)],
        ]
        self.md.append(md_table(["roof", "unit", "measured", "theoretical"], rows))
        self.md.append(
            f"\nRidge points (FLOP per byte where a kernel stops being memory-bound): "
            f"FP32 {fp32 / copy:.1f}, BF16 tensor cores {bf16 / copy:.1f}. "
            "Each kernel's arithmetic intensity below uses the fewest bytes its shape needs "
            "(inputs read once, output written once), so it is an upper bound on the real intensity.\n"
        )

    def roofline(self):
        """Every ok record with work placed under the measured roofs (plot + bound classification)."""
        r = roofs(self.doc)
        # Single-GPU kernels only: a tensor-parallel step spans several GPUs and has no place under one GPU's roofs.
        points = [
            x for x in ok_records(self.doc["records"])
            if x["suite"] not in MULTI_GPU_SUITES and x.get("flops", 0) > 0 and x.get("bytes", 0) > 0 and x.get("gflops", 0) > 0
        ]
        self.md.append("\n## Roofline\n")
        if r is None or not points:
            self.md.append("Not drawn: " + ("no measured roofs in this run." if r is None else "no timed kernels."))
            return
        _, _, copy = r
        # Classification by suite and dtype: share of kernels on each side of the ridge, and the best
        # fraction of the attainable roof reached.
        groups = OrderedDict()
        for x in points:
            groups.setdefault((report_suite(x), x["dtype"]), []).append(x)
        rows = []
        for (suite, dtype), xs in groups.items():
            peak = compute_roof_for(dtype, r)
            ridge = peak / copy
            memory = sum(1 for x in xs if x["flops"] / x["bytes"] < ridge)
            # The best of our own kernels (a peer such as cuBLAS reaching its own roof says nothing new).
            own = [x for x in xs if not is_peer(x)] or xs
            best = max(own, key=lambda x: x["gflops"] / min(peak, copy * x["flops"] / x["bytes"]))
            attain = min(peak, copy * best["flops"] / best["bytes"])
            rows.append([
                suite, dtype, str(len(xs)), f"{memory} memory / {len(xs) - memory} compute",
                f"{best['name']} ({shape_text(best['shape'])}): {100 * best['gflops'] / attain:.0f}%",
            ])
        self.md.append(md_table(["suite", "dtype", "kernels", "bound (by ideal intensity)",
                                 "best share of its attainable roof"], rows))
        self.md.append(
            "\nA kernel left of its ridge point is memory-bound (its roof is bandwidth x intensity), right of it "
            "compute-bound. Kernels far below their roof on the compute side are limited by something the "
            "ideal intensity does not see: on-chip traffic (L2, shared memory), latency or occupancy.\n"
        )
        if not self.plotting():
            return
        fig, ax = self.figure()
        xs_all = [x["flops"] / x["bytes"] for x in points]
        lo, hi = min(xs_all + [1.0]) / 2, max(xs_all + [r[1] / copy]) * 4
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        for peak, label, style in ((r[0], "FP32 roof (cublasSgemm)", "-"), (r[1], "BF16 roof (cuBLAS)", "--")):
            ax.plot(grid, [min(peak, copy * g) for g in grid], style, color="black", linewidth=1.2,
                    label=f"{label}: {peak / 1e3:.0f} TFLOP/s, {copy:.0f} GB/s")
        markers = "osD^v<>ph*"
        for i, ((suite, dtype), xs) in enumerate(groups.items()):
            ax.scatter([x["flops"] / x["bytes"] for x in xs], [x["gflops"] for x in xs], s=18,
                       marker=markers[i % len(markers)], label=f"{suite} ({dtype})", alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte, ideal traffic)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"Roofline, {self.doc['device']['name']} (measured roofs)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        self.save(fig, "roofline.png", "roofline")

    def missing(self, suite):
        notes = section_notes(self.doc, suite)
        if len(notes) == 1:
            self.md.append(f"Not measured in this run ({notes[0][1]}).")
        elif notes:
            self.md.append("Not measured in this run:\n\n" + "\n".join(f"- {n}: {v}" for n, v in notes))
        else:
            self.md.append("Not measured in this run.")

    def sections_not_ok(self, suite):
        """Sections of this suite that did not run fully (e.g. one TP layer this build lacks), after its table."""
        bad = [(n, v) for n, v in section_notes(self.doc, suite) if not v.startswith("ok")]
        if bad:
            self.md.append("\nNot all of this section ran:\n\n" + "\n".join(f"- {n}: {v}" for n, v in bad))

    # --- FP32 ladder ---------------------------------------------------------------------------------

    def ladder(self, records):
        by_size = OrderedDict()
        for r in records:
            s = r["shape"]
            by_size.setdefault((s.get("m"), s.get("n"), s.get("k")), []).append(r)
        sizes = list(by_size)
        levels = []
        for r in records:
            if not is_peer(r) and r["name"] not in levels:
                levels.append(r["name"])
        headers = ["level", "what it adds"] + [self.size_label(s) for s in sizes]
        desc = {r["name"]: (r.get("extra") or {}).get("description", "") for r in records}
        rows = []
        pct_of = defaultdict(dict)  # level -> size -> % of cuBLAS
        for name in levels:
            row = [name, desc.get(name, "")]
            for s in sizes:
                r = next((x for x in by_size[s] if x["name"] == name), None)
                if r is None:
                    row.append("-")
                elif r["status"] != "ok":
                    row.append("failed" if r["status"] == "failed" else "WRONG")
                else:
                    p = peer_percent(r)
                    if p is not None:
                        pct_of[name][s] = p
                    row.append(f"{num(r['gflops'], 0)} ({pct(p, 0)})")
            rows.append(row)
        peer_row = ["cuBLAS", "peer, same run"]
        for s in sizes:
            p = next((x for x in by_size[s] if is_peer(x) and x["status"] != "failed"), None)
            peer_row.append(num(p["gflops"], 0) if p else "-")
        rows.append(peer_row)
        self.md.append("GFLOP/s (% of cuBLAS in the same run) per square size:\n")
        self.md.append(md_table(headers, rows))

        # Where the big steps come from: ratio between consecutive passing levels at the largest size.
        big = sizes[-1]
        ok = [(n, next((x for x in by_size[big] if x["name"] == n and x["status"] == "ok"), None)) for n in levels]
        ok = [(n, r) for n, r in ok if r is not None]
        steps = []
        for (n0, r0), (n1, r1) in zip(ok, ok[1:]):
            steps.append((r1["gflops"] / r0["gflops"], n0, n1, desc.get(n1, "")))
        if steps:
            first, last = ok[0][1], ok[-1][1]
            lines = [f"\nAt {self.size_label(big)} the ladder goes from {num(first['gflops'], 0)} to "
                     f"{num(last['gflops'], 0)} GFLOP/s ({last['gflops'] / first['gflops']:.0f}x). "
                     "The biggest steps:\n"]
            for ratio, n0, n1, d in sorted(steps, reverse=True)[:3]:
                lines.append(f"- {n0} -> {n1}: {ratio:.2f}x ({d})")
            regress = [s for s in steps if s[0] < 0.97]
            for ratio, n0, n1, d in regress:
                lines.append(f"- {n0} -> {n1} is a step back at this size ({ratio:.2f}x): {d} does not pay here")
            best = max((r for _, r in ok), key=lambda r: r["gflops"])
            lines.append(f"\nBest: {best['name']} at {pct(peer_percent(best))} of cuBLAS.")
            self.md.append("\n".join(lines))

        if self.plotting() and pct_of:
            fig, ax = self.figure()
            width = 0.8 / max(1, len(sizes))
            for j, s in enumerate(sizes):
                xs = [i + (j - (len(sizes) - 1) / 2) * width for i in range(len(levels))]
                ax.bar(xs, [pct_of[n].get(s, 0) for n in levels], width, label=self.size_label(s))
            ax.axhline(100, color="black", linewidth=1, linestyle="--")
            ax.set_xticks(range(len(levels)))
            ax.set_xticklabels(levels, rotation=0, fontsize=8)
            ax.set_ylabel("% of cuBLAS (same run)")
            ax.set_title("FP32 ladder as % of cublasSgemm")
            ax.legend(fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
            self.save(fig, "ladder.png", "ladder as % of cuBLAS")

    @staticmethod
    def size_label(s):
        m, n, k = s
        return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"

    # --- tensor-core GEMM ----------------------------------------------------------------------------

    def gemm(self, records):
        rows = []
        for r in records:
            s = r["shape"]
            p = peer_percent(r)
            if p is None and is_peer(r):
                p = 100.0
            rows.append([
                r["name"], r["dtype"], f"{s.get('m')}x{s.get('n')}x{s.get('k')}",
                f"{s.get('op_a', 'N')}{s.get('op_b', 'N')}",
                "-" if r["status"] == "failed" else num(r["gflops"] / 1e3, 1), pct(p), status_cell(r),
            ])
        self.md.append(md_table(["kernel", "dtype", "m x n x k", "ops", "TFLOP/s", "% of cuBLAS", "check"], rows))
        contenders = [r for r in ok_records(records) if not is_peer(r) and peer_percent(r) is not None]
        if contenders:
            best = max(contenders, key=peer_percent)
            self.md.append(f"\nBest tensor-core kernel: {best['name']} at {pct(peer_percent(best))} of cuBLAS "
                           f"({shape_text(best['shape'])}).")
            r = roofs(self.doc)
            if r is not None:
                self.md.append(f" The measured BF16 roof is {num(r[1] / 1e3, 0)} TFLOP/s; this kernel reaches "
                               f"{pct(100 * best['gflops'] / r[1])} of it.")

    # --- attention -----------------------------------------------------------------------------------

    def attention(self, suite, records):
        rows = []
        for r in records:
            s = r["shape"]
            heads = s.get("heads", "-")
            rows.append([
                r["name"], r["dtype"], str(s.get("batch", "-")), str(seqlen(r, "q") or "-"),
                str(seqlen(r, "k") or "-"), f"{heads}/{s.get('heads_kv', heads)}",
                str(s.get("head_dim", "-")), str(s.get("causal", "-")),
                "-" if r["status"] == "failed" else num(r["gflops"] / 1e3, 1),
                "-" if r["status"] == "failed" else num(r["median_ms"], 3), status_cell(r),
            ])
        self.md.append(md_table(["impl", "dtype", "batch", "S_q", "S_k", "heads/kv", "d", "causal", "TFLOP/s",
                                 "median ms", "check"], rows))
        ok = ok_records(records)
        torch = (self.doc.get("context") or {}).get("report.torch")
        if torch is not None:
            self.md.append(f"\ntorch: {torch}.")
        peers = sorted({r["name"] for r in ok if r["name"].startswith("torch")})
        if not peers:
            self.md.append("\nNo torch SDPA peer in this run (torch not importable or not requested): "
                           "parallax implementations are compared with each other only.")
        # Per implementation at the longest sequence: which is fastest, and its share of the BF16 roof.
        if ok:
            longest = max(seqlen(r) for r in ok)
            at = [r for r in ok if seqlen(r) == longest]
            best = max(at, key=lambda r: r["gflops"])
            line = f"\nAt S = {longest} the fastest is {best['name']} with {num(best['gflops'] / 1e3, 1)} TFLOP/s"
            r = roofs(self.doc)
            if r is not None:
                line += f" ({pct(100 * best['gflops'] / r[1])} of the measured BF16 GEMM roof)"
            self.md.append(line + ".")
        if peers and ok:
            self.attention_vs_peers(ok, peers)
        if self.plotting() and ok:
            # One line per (implementation, head_dim, causal): TFLOP/s against the sequence length.
            lines = OrderedDict()
            for r in ok:
                s = r["shape"]
                key = (r["name"], s.get("head_dim"), s.get("causal"))
                lines.setdefault(key, {})[seqlen(r)] = max(r["gflops"] / 1e3, lines.get(key, {}).get(seqlen(r), 0))
            fig, ax = self.figure()
            for (name, d, causal), pts in lines.items():
                xs = sorted(pts)
                label = name + (f", d={d}" if d is not None else "") + (", causal" if causal is True else "")
                style = "--" if name.startswith("torch") else "-"
                ax.plot(xs, [pts[x] for x in xs], style, marker="o", markersize=3, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("sequence length S")
            ax.set_ylabel("TFLOP/s")
            ax.set_title(KNOWN_SUITES[suite] + ": TFLOP/s vs S (dashed: torch SDPA)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
            self.save(fig, f"{suite}.png", f"{suite} TFLOP/s vs sequence length")

    def attention_vs_peers(self, ok, peers):
        """Best parallax implementation against each torch SDPA backend, configuration by configuration."""
        configs = OrderedDict()
        for r in ok:
            s = r["shape"]
            key = (s.get("batch"), s.get("heads"), seqlen(r), seqlen(r, "k"), s.get("head_dim"), s.get("causal"))
            configs.setdefault(key, []).append(r)
        rows, ratios = [], defaultdict(list)
        for (b, h, sq, sk, d, causal), rs in configs.items():
            ours = [r for r in rs if not r["name"].startswith("torch")]
            if not ours:
                continue
            best = max(ours, key=lambda r: r["gflops"])
            row = [f"B{b} H{h} S{sq}{'' if sk in (sq, 0) else f'/{sk}'} D{d}" + (" causal" if causal is True else ""),
                   best["name"], num(best["gflops"] / 1e3, 1)]
            for p in peers:
                pr = next((r for r in rs if r["name"] == p), None)
                if pr is None:
                    row.append("-")
                else:
                    x = pr["median_ms"] / best["median_ms"]
                    ratios[p].append((x, sq, d, causal))
                    row.append(f"{x:.2f}x")
            rows.append(row)
        if not rows:
            return
        self.md.append("\nAgainst the torch SDPA backends (same run; peer time / parallax time, above 1 = parallax "
                       "faster):\n")
        self.md.append(md_table(["config", "best parallax", "TFLOP/s"] + [f"x {p}" for p in peers], rows))
        summary = []
        for p, xs in ratios.items():
            wins = sum(1 for x in xs if x[0] >= 1.0)
            worst, best = min(xs), max(xs)
            summary.append(f"{p}: parallax is faster in {wins} of {len(xs)} configurations (from {worst[0]:.2f}x at "
                           f"S {worst[1]} D{worst[2]}{' causal' if worst[3] is True else ''} to {best[0]:.2f}x at "
                           f"S {best[1]} D{best[2]}{' causal' if best[3] is True else ''})")
        self.md.append("\n" + "; ".join(summary) + ".")

    # --- collectives ---------------------------------------------------------------------------------

    def comm(self, records):
        rows = []
        for r in records:
            s = r["shape"]
            rows.append([
                comm_op(r), human_bytes(s.get("bytes")), str(s.get("ranks", "-")),
                "-" if r["status"] == "failed" else num(r["median_ms"] * 1e3, 1),
                num(comm_bw(r, "algbw"), 1), num(comm_bw(r, "busbw"), 1), status_cell(r),
            ])
        self.md.append(md_table(["op", "bytes", "ranks", "median us", "algbw GB/s", "busbw GB/s", "check"], rows))
        ok = [r for r in ok_records(records) if comm_bw(r, "busbw") is not None]
        if ok:
            best = max(ok, key=lambda r: comm_bw(r, "busbw"))
            small = min(ok, key=lambda r: r["shape"].get("bytes", 0))
            self.md.append(f"\nPeak bus bandwidth: {num(comm_bw(best, 'busbw'), 0)} GB/s "
                           f"({comm_op(best)}, {human_bytes(best['shape'].get('bytes'))}, "
                           f"{best['shape'].get('ranks')} ranks). The smallest message "
                           f"({human_bytes(small['shape'].get('bytes'))}, {comm_op(small)}) reaches "
                           f"{num(comm_bw(small, 'busbw'), 0)} GB/s in {num(small['median_ms'] * 1e3, 1)} us: "
                           "small messages are latency-bound, large ones bandwidth-bound.")
        if self.plotting() and ok:
            fig, ax = self.figure()
            series = OrderedDict()
            for r in ok:
                series.setdefault((comm_op(r), r["shape"].get("ranks")), []).append(
                    (r["shape"].get("bytes", 0), comm_bw(r, "busbw")))
            for (op, ranks), pts in series.items():
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=f"{op}, {ranks} GPUs")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("bus bandwidth (GB/s)")
            ax.set_title("Collectives: bus bandwidth vs message size")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
            self.save(fig, "comm.png", "collective bus bandwidth")

    # --- tensor parallelism --------------------------------------------------------------------------

    @staticmethod
    def tp_series_label(layer, pas, overlap, transport):
        label = f"{layer} {pas or ''}".strip()
        if overlap is not None:
            label += ", overlap " + ("on" if overlap else "off")
        if transport:
            label += f", {transport}"
        return label

    def tp(self, records):
        rows = []
        for r in records:
            s, e = r["shape"], r.get("extra") or {}
            layer, pas, overlap, scaling, transport = tp_info(r)
            eff = e.get("efficiency")
            rows.append([
                str(scaling or "-"), str(layer or "-"), str(pas or "-"), str(s.get("gpus", "-")),
                f"{s.get('t', '-')}x{s.get('k', '-')}x{s.get('n', '-')}",
                "-" if overlap is None else ("on" if overlap else "off"),
                "-" if r["status"] == "failed" else num(r["median_ms"], 3),
                num(e.get("gemm_ms"), 3), num(e.get("comm_ms"), 3), num(e.get("exposed_comm_ms"), 3),
                num(e.get("speedup"), 2), pct(100 * eff if isinstance(eff, (int, float)) else None), status_cell(r),
            ])
        self.md.append(md_table(["scaling", "layer", "pass", "GPUs", "t x k x n", "overlap", "median ms", "GEMM ms",
                                 "comm ms", "exposed comm ms", "speedup", "efficiency", "check"], rows))
        ok = [r for r in ok_records(records) if r["median_ms"] > 0]
        # Communication share = exposed communication / step time, by GPU count (the growth the issue asks for),
        # per scaling mode: strong scaling shrinks each GPU's GEMM while the gathered output stays the same size.
        for mode in ("strong", "weak", None):
            share = defaultdict(list)
            for r in ok:
                e = r.get("extra") or {}
                if tp_info(r)[3] == mode and isinstance(e.get("exposed_comm_ms"), (int, float)):
                    share[r["shape"].get("gpus")].append(100 * e["exposed_comm_ms"] / r["median_ms"])
            if not share:
                continue
            parts = [f"{g} GPUs: {sum(v) / len(v):.0f}%" for g, v in sorted(share.items())]
            what = f"{mode} scaling" if mode else "scaling mode not recorded"
            line = (f"\nExposed communication as a share of the step time ({what}, mean over layers, passes and "
                    "overlap settings): " + ", ".join(parts) + ".")
            g = sorted(share)
            if len(g) >= 2:
                a, b = sum(share[g[0]]) / len(share[g[0]]), sum(share[g[-1]]) / len(share[g[-1]])
                line += (f" From {g[0]} to {g[-1]} GPUs it goes from {a:.0f}% to {b:.0f}%: "
                         + ("communication grows into the bottleneck as each GPU's share of the work shrinks."
                            if b > a + 1 else "it stays in check." if abs(b - a) <= 1 else "it shrinks."))
            self.md.append(line)
        # Efficiency at the largest GPU count, per scaling mode: the headline of the study.
        for mode in ("strong", "weak"):
            rs = [r for r in ok if tp_info(r)[3] == mode and isinstance((r.get("extra") or {}).get("efficiency"),
                                                                         (int, float))]
            if rs:
                top = max(r["shape"].get("gpus", 0) for r in rs)
                at = [r for r in rs if r["shape"].get("gpus", 0) == top]
                best = max(at, key=lambda r: r["extra"]["efficiency"])
                worst = min(at, key=lambda r: r["extra"]["efficiency"])
                self.md.append(f"\n{mode.capitalize()} scaling on {top} GPUs: efficiency from "
                               f"{pct(100 * worst['extra']['efficiency'], 0)} ({self.tp_series_label(*tp_info(worst)[:3], tp_info(worst)[4])}) "
                               f"to {pct(100 * best['extra']['efficiency'], 0)} ({self.tp_series_label(*tp_info(best)[:3], tp_info(best)[4])}).")
        if not self.plotting() or not ok:
            return
        for mode in ("strong", "weak"):
            rs = [r for r in ok if tp_info(r)[3] == mode]
            if not rs:
                self.plot_notes.append(f"no {mode}-scaling records: tp_{mode}.png not drawn")
                continue
            fig, ax = self.figure()
            series = OrderedDict()
            for r in rs:
                e = r.get("extra") or {}
                y = e.get("speedup") if mode == "strong" else e.get("efficiency")
                if isinstance(y, (int, float)):
                    layer, pas, overlap, _, transport = tp_info(r)
                    series.setdefault(self.tp_series_label(layer, pas, overlap, transport), {})[
                        r["shape"].get("gpus", 1)] = y
            top = 1
            for label, pts in series.items():
                pts.setdefault(1, 1.0)  # one GPU is the reference of both curves
                xs = sorted(pts)
                top = max(top, xs[-1])
                ax.plot(xs, [pts[x] for x in xs], marker="o", markersize=4, label=label)
            if mode == "strong":
                ax.plot([1, top], [1, top], ":", color="black", label="ideal")
                ax.set_ylabel("speedup over 1 GPU (same total work)")
            else:
                ax.axhline(1.0, linestyle=":", color="black", label="ideal")
                ax.set_ylabel("efficiency (1-GPU time / N-GPU time, work per GPU fixed)")
            ax.set_xlabel("GPUs")
            ax.set_xticks(sorted({x for pts in series.values() for x in pts}))
            ax.set_title(f"Tensor parallelism: {mode} scaling")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
            self.save(fig, f"tp_{mode}.png", f"{mode} scaling")
        # Compute / communication breakdown per GPU count: GEMM, exposed and hidden communication (strong scaling
        # when present, overlap on when present, else whatever was measured).
        rs = [r for r in ok if tp_info(r)[3] == "strong"] or ok
        rs = [r for r in rs if tp_info(r)[2] is not False] or rs
        bars = OrderedDict()
        for r in sorted(rs, key=lambda r: (str(tp_info(r)[0]), str(tp_info(r)[1]), r["shape"].get("gpus", 0))):
            e = r.get("extra") or {}
            if not all(isinstance(e.get(k), (int, float)) for k in ("gemm_ms", "comm_ms", "exposed_comm_ms")):
                continue
            layer, pas, _, _, _ = tp_info(r)
            bars[f"{layer}\n{(pas or '')[:3]} {r['shape'].get('gpus')}g"] = (
                e["gemm_ms"], max(0.0, e["comm_ms"] - e["exposed_comm_ms"]), e["exposed_comm_ms"])
        if bars:
            fig, ax = self.figure()
            names = list(bars)
            g = [bars[n][0] for n in names]
            hidden = [bars[n][1] for n in names]
            exposed = [bars[n][2] for n in names]
            ax.bar(names, g, label="GEMM")
            ax.bar(names, exposed, bottom=g, label="exposed communication")
            ax.bar(names, hidden, bottom=[a + b for a, b in zip(g, exposed)], label="communication hidden by overlap",
                   alpha=0.4)
            ax.set_ylabel("ms (rank 0)")
            ax.set_title("Compute / communication breakdown")
            ax.tick_params(axis="x", labelsize=6)
            ax.legend(fontsize=7)
            self.save(fig, "tp_breakdown.png", "compute/communication breakdown")

    # --- anything else -------------------------------------------------------------------------------

    def generic(self, records):
        rows = []
        for r in records:
            rows.append([
                r["name"], r["dtype"], shape_text(r["shape"]),
                "-" if r["status"] == "failed" else num(r["median_ms"], 3),
                "-" if r["status"] == "failed" else num(r["gflops"], 1), status_cell(r),
            ])
        self.md.append(md_table(["name", "dtype", "shape", "median ms", "GFLOP/s", "check"], rows))

    # --- driver --------------------------------------------------------------------------------------

    def build(self):
        if self.plots_enabled:
            try:
                import matplotlib

                matplotlib.use("Agg")  # no display needed: files only
                import matplotlib.pyplot as plt

                self.plt = plt
            except ImportError:
                self.plot_notes.append("matplotlib is not installed (pip install matplotlib): plots skipped")
        else:
            self.plot_notes.append("plots disabled (--no-plots)")

        self.header()
        self.roofs_section()
        self.roofline()
        for suite, title in KNOWN_SUITES.items():
            self.md.append(f"\n## {title}\n")
            records = self.by_suite.get(suite)
            if not records:
                self.missing(suite)
                continue
            if suite == "sgemm_ladder":
                self.ladder(records)
            elif suite == "gemm":
                self.gemm(records)
            elif suite in ("attention", "attention_backward"):
                self.attention(suite, records)
            elif suite == "comm":
                self.comm(records)
            elif suite == "tp":
                self.tp(records)
            self.sections_not_ok(suite)
        for suite, records in self.by_suite.items():
            if suite in KNOWN_SUITES:
                continue
            self.md.append(f"\n## Suite `{suite}`\n")
            self.generic(records)
        bad = [r for r in self.doc["records"] if r["status"] != "ok"]
        self.md.append("\n## Checks\n")
        self.md.append(f"{len(self.doc['records']) - len(bad)} of {len(self.doc['records'])} records passed their "
                       "checks" + ("." if not bad else "; the others are listed in their tables as FAILED or WRONG."))
        if self.plot_notes:
            self.md.append("\n## Plots\n")
            self.md.append("\n".join(f"- {n}" for n in self.plot_notes))
        return "\n".join(self.md) + "\n"


def human_bytes(b):
    if not isinstance(b, (int, float)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" or b == int(b) else f"{b:.1f} {unit}"
        b /= 1024
    return str(b)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Tables, analysis and plots from a parallax results.json")
    ap.add_argument("--from", dest="source", required=True, help="results.json (schema parallax.results/1)")
    ap.add_argument("--out", required=True, help="directory for report.md and the PNG plots (created)")
    ap.add_argument("--no-plots", action="store_true", help="write report.md only")
    args = ap.parse_args(argv)
    try:
        doc = load(args.source)
    except MalformedResults as e:
        print(f"report.py: error: results JSON {args.source}: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    report = Report(doc, args.out, not args.no_plots)
    text = report.build()
    path = os.path.join(args.out, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    for note in report.plot_notes:
        print(f"report.py: note: {note}", file=sys.stderr)
    print(f"report.py: wrote {path} and {len(report.plot_files)} plots ({', '.join(report.plot_files) or 'none'})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
