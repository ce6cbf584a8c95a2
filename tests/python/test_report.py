"""scripts/report.py on the committed sample results and on broken ones (no GPU, no libparallax needed).

Run: python3 -m pytest -q tests/python
Plot tests need matplotlib and are reported as SKIPPED, with the reason, without it.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "report.py"
SAMPLE = ROOT / "tests" / "data" / "sample_results.json"

spec = importlib.util.spec_from_file_location("parallax_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

try:
    import matplotlib  # noqa: F401

    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False
needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed (pip install matplotlib)")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = ["roofline", "ladder", "attention", "attention_backward", "comm", "tp_strong", "tp_weak", "tp_breakdown"]


def sample():
    return json.loads(SAMPLE.read_text())


def run(tmp_path, doc=None, *extra, source=None):
    """Runs the script as a program (as `parallax report --from` does); returns (exit code, stderr, out dir)."""
    if source is None:
        source = tmp_path / "results.json"
        source.write_text(json.dumps(doc if doc is not None else sample()))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(SCRIPT), "--from", str(source), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr, out


def section(md, heading):
    """The text of one '## heading' section of report.md."""
    start = md.index("## " + heading)
    end = md.find("\n## ", start + 1)
    return md[start:end if end >= 0 else None]


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")]


def first_table_rows(text):
    """The rows of the first table of a section (header included); later tables (e.g. vs peers) are left out."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("| ")), len(lines))
    return table_rows("\n".join(lines[start:end]))


# ------------------------------------------------------------------------------------------------ the sample


def test_sample_is_what_its_generator_writes():
    """The committed sample is reproducible from the committed real results (no hand edits)."""
    gen = subprocess.run([sys.executable, str(ROOT / "tests/data/make_sample_results.py")], capture_output=True,
                         text=True, check=True)
    assert json.loads(gen.stdout) == sample()


def test_sample_marks_its_synthetic_suites():
    doc = sample()
    synthetic = doc["context"]["synthetic_suites"].split(",")
    assert set(synthetic) == {"attention_backward", "comm", "tp"}
    for r in doc["records"]:
        if report.report_suite(r) in synthetic or r["status"] == "failed":
            assert "SYNTHETIC" in r["notes"] or "SYNTHETIC" in r.get("failure", ""), r
        else:
            assert "SYNTHETIC" not in r.get("notes", ""), r


def test_report_md_has_every_table_complete(tmp_path):
    code, err, out = run(tmp_path, None, "--no-plots")
    assert code == 0, err
    md = (out / "report.md").read_text()
    assert "SYNTHETIC" in md  # the sample says it is a sample
    assert "Not measured in this run" not in md
    # Roofs: the measured H100 numbers.
    roofs = section(md, "Device roofs")
    assert "| copy, device to device (read + write) | GB/s | 3008 | 3352 |" in roofs
    assert "| cublasSgemm FP32 (TF32 off) | TFLOP/s | 52.0 | 66.9 |" in roofs
    # Ladder: a row per level plus cuBLAS, a column per size, every cell filled.
    ladder = section(md, "FP32 GEMM ladder")
    rows = table_rows(ladder)
    assert len(rows) == 1 + 8 + 1, rows
    assert all("| - |" not in r for r in rows), rows
    assert "| sgemm8 | pipelined, autotuned | 25515 (79%) | 32872 (96%) | 40044 (80%) | 47291 (91%) | 47612 (92%) |" in ladder
    assert "sgemm1 -> sgemm2: 12.09x (global-memory coalescing)" in ladder
    assert "Best: sgemm8 at 92.1% of cuBLAS." in ladder
    # Every suite's table has a row per record of that suite.
    doc = sample()
    for heading, suite in [("Tensor-core GEMM", "gemm"), ("Attention forward", "attention"),
                           ("Attention backward", "attention_backward"), ("Collectives", "comm"),
                           ("Tensor parallelism", "tp")]:
        n = sum(1 for r in doc["records"] if report.report_suite(r) == suite)
        assert len(first_table_rows(section(md, heading))) == 1 + n, heading
    # The failed sample row is listed with its reason, and counted.
    assert "FAILED: SYNTHETIC failed row: the report must list it" in md
    assert f"{len(doc['records']) - 1} of {len(doc['records'])} records passed" in md
    # Communication share grows with the GPU count in the sample, and the analysis says so.
    assert "Exposed communication as a share of the step time" in md
    assert "From 2 to 4 GPUs it goes from 9% to 24%" in md
    # The real attention records (shape key "seqlen") fill the sequence columns, and the peers are compared.
    fwd = section(md, "Attention forward")
    assert "| mma | bf16 | 8 | 2048 | 2048 | 32/32 | 64 | False |" in fwd
    assert "x torch-flash" in fwd and "x torch-cudnn" in fwd
    # A section that did not run fully is listed under its table.
    assert "- tp_strong_mlp_g2: skipped: this build does not support `parallax tp --layer mlp`" in md


@needs_mpl
def test_plots_are_written_and_non_empty(tmp_path):
    code, err, out = run(tmp_path)
    assert code == 0, err
    md = (out / "report.md").read_text()
    for name in ALL_PLOTS:
        f = out / f"{name}.png"
        assert f.is_file(), name
        data = f.read_bytes()
        assert data.startswith(PNG_SIGNATURE), name
        assert len(data) > 10_000, f"{name}.png is suspiciously small ({len(data)} bytes)"
        assert f"]({name}.png)" in md, f"report.md does not show {name}.png"


def test_without_plots_says_so(tmp_path):
    code, err, out = run(tmp_path, None, "--no-plots")
    assert code == 0, err
    assert not list(out.glob("*.png"))
    assert "plots disabled (--no-plots)" in (out / "report.md").read_text()


# ------------------------------------------------------------------------------------------------ generic by suite


def test_missing_suites_say_not_measured_with_the_reason(tmp_path):
    doc = sample()
    doc["records"] = [r for r in doc["records"] if r["suite"] == "sgemm_ladder"]
    for k in [k for k in doc["context"] if k.startswith("report.section.tp_")]:
        del doc["context"][k]
    doc["context"]["report.section.tp"] = "skipped: needs 2 or more GPUs, 1 visible"
    code, err, out = run(tmp_path, doc, "--no-plots")
    assert code == 0, err
    md = (out / "report.md").read_text()
    assert "Not measured in this run (skipped: needs 2 or more GPUs, 1 visible)." in section(md, "Tensor parallelism")
    for heading in ("Tensor-core GEMM", "Attention forward", "Attention backward", "Collectives"):
        assert "Not measured in this run" in section(md, heading), heading


def test_tp_sections_that_did_not_run_are_each_listed(tmp_path):
    doc = sample()
    doc["records"] = [r for r in doc["records"] if r["suite"] != "tp"]
    doc["context"]["report.section.tp_strong_column_g2"] = "failed: stopped after the 40 s section limit"
    code, err, out = run(tmp_path, doc, "--no-plots")
    assert code == 0, err
    tp = section((out / "report.md").read_text(), "Tensor parallelism")
    assert "Not measured in this run:" in tp
    assert "- tp_strong_column_g2: failed: stopped after the 40 s section limit" in tp
    assert "- tp_strong_mlp_g2: skipped:" in tp


REAL_TP = ROOT / "bench/results/nvidia-h200/2026-11-22-1cc40254e5d0"


@needs_mpl
def test_real_tp_records_give_curves_and_the_share(tmp_path):
    """`parallax tp` as it writes today (names 'column-forward-overlap-on', no overlap/pass keys), tagged by the
    report orchestrator with scaling and layer: strong curve, breakdown, share growth from 2 to 4 GPUs."""
    doc = sample()
    doc["records"] = [r for r in doc["records"] if r["suite"] != "tp"]
    for f in ("tp_col_2.json", "tp_col_4.json"):
        for r in json.loads((REAL_TP / f).read_text())["records"]:
            r["shape"].update(scaling="strong", layer="column")
            doc["records"].append(r)
    code, err, out = run(tmp_path, doc)
    assert code == 0, err
    tp = section((out / "report.md").read_text(), "Tensor parallelism")
    assert "| strong | column | forward | 2 | 8192x8192x28672 | on | 3.965 |" in tp
    assert "| strong | column | backward | 4 | 8192x8192x28672 | off |" in tp
    assert "(strong scaling, mean over layers, passes and overlap settings): 2 GPUs: 18%, 4 GPUs: 40%" in tp
    assert "Strong scaling on 4 GPUs: efficiency from 39% (column forward, overlap off)" in tp
    for name in ("tp_strong", "tp_breakdown"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
    assert not (out / "tp_weak.png").exists()


def test_backward_attention_records_are_split_by_marker(tmp_path):
    """Backward records may say so by a 'direction' key, or by a '-bwd' name; both land in the backward section."""
    doc = sample()
    fwd = [r for r in doc["records"] if report.report_suite(r) == "attention"]
    doc["records"] = [r for r in doc["records"] if report.report_suite(r) not in ("attention", "attention_backward")]
    for r in fwd[:3]:
        b = copy.deepcopy(r)
        b["shape"].pop("direction", None)
        b["name"] += "-bwd"
        doc["records"].append(b)
    doc["records"] += fwd
    code, err, out = run(tmp_path, doc, "--no-plots")
    assert code == 0, err
    md = (out / "report.md").read_text()
    assert len(first_table_rows(section(md, "Attention backward"))) == 1 + 3
    assert len(first_table_rows(section(md, "Attention forward"))) == 1 + len(fwd)


def test_unknown_suite_gets_a_generic_table(tmp_path):
    doc = sample()
    r = copy.deepcopy(doc["records"][0])
    r.update(suite="layernorm", name="fused", shape={"rows": 4096, "cols": 1024})
    doc["records"].append(r)
    code, err, out = run(tmp_path, doc, "--no-plots")
    assert code == 0, err
    md = (out / "report.md").read_text()
    generic = section(md, "Suite `layernorm`")
    assert "| fused | fp32 | rows=4096, cols=1024 |" in generic


def test_no_ceilings_no_roofline(tmp_path):
    doc = sample()
    del doc["ceilings"]
    code, err, out = run(tmp_path, doc, "--no-plots")
    assert code == 0, err
    md = (out / "report.md").read_text()
    assert "Not drawn: no measured roofs in this run." in md
    assert "Not measured in this run" in section(md, "Device roofs")


# ------------------------------------------------------------------------------------------------ malformed


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.pop("schema"), "field 'schema': missing"),
        (lambda d: d.update(schema="parallax.results/2"), "unsupported version 'parallax.results/2'"),
        (lambda d: d.pop("records"), "field 'records': missing"),
        (lambda d: d.update(records={}), "field 'records': expected an array, got dict"),
        (lambda d: d["records"][3].pop("suite"), "field 'records[3].suite': missing"),
        (lambda d: d["records"][5].update(status="great"), "field 'records[5].status': unknown status 'great'"),
        (lambda d: d["records"][0].update(gflops="fast"), "field 'records[0].gflops': expected a number, got str"),
        (lambda d: d["ceilings"].pop("copy_gbps"), "field 'ceilings.copy_gbps': missing"),
        (lambda d: d["device"].pop("name"), "field 'device.name': missing"),
    ],
)
def test_malformed_results_give_a_clear_error(tmp_path, edit, message):
    doc = sample()
    edit(doc)
    code, err, out = run(tmp_path, doc)
    assert code == 2
    assert message in err, err
    assert "Traceback" not in err
    assert not (out / "report.md").exists()


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    code, err, _ = run(tmp_path, source=bad)
    assert code == 2 and "not valid JSON" in err and "Traceback" not in err
    code, err, _ = run(tmp_path, source=tmp_path / "absent.json")
    assert code == 2 and "cannot read" in err


def test_md_table_rejects_ragged_rows():
    with pytest.raises(ValueError, match="has 1 cells for 2 columns"):
        report.md_table(["a", "b"], [["x"]])


def test_without_matplotlib_report_md_is_still_written(tmp_path):
    """A matplotlib that cannot be imported (shadowed on PYTHONPATH) must not stop report.md."""
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('matplotlib hidden by the test')\n")
    source = tmp_path / "results.json"
    source.write_text(json.dumps(sample()))
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "shadow"))
    p = subprocess.run([sys.executable, str(SCRIPT), "--from", str(source), "--out", str(out)], capture_output=True,
                       text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "matplotlib is not installed" in p.stderr
    md = (out / "report.md").read_text()
    assert "matplotlib is not installed (pip install matplotlib): plots skipped" in md
    assert "| sgemm8 | pipelined, autotuned |" in md
    assert not list(out.glob("*.png"))
