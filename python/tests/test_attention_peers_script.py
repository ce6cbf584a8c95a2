"""Pure-Python parts of scripts/attention_peers.py (no GPU, no torch): configurations, FLOP count, JSON shape."""

from __future__ import annotations

import importlib.util
import json
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "attention_peers.py"
spec = importlib.util.spec_from_file_location("attention_peers", SCRIPT)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)


def test_configs_keep_16k_tokens_and_2048_model_width():
    cfgs = peers.configs()
    assert len(cfgs) == 2 * 2 * 6 + 2
    for B, S, H, D, _ in cfgs[:-2]:
        assert B * S == 16384 and H * D == 2048
    assert cfgs[-2:] == [(4, 1024, 16, 64, False), (4, 1024, 16, 64, True)]
    assert {S for _, S, _, _, _ in cfgs} == {512, 1024, 2048, 4096, 8192, 16384}
    assert len(peers.configs(quick=True)) == 2 * 2 * 2 + 2


def test_flops_match_the_cpp_convention():
    assert peers.attention_flops(1, 1, 1, 1, 64, False) == 256.0
    assert peers.attention_flops(4, 16, 1024, 1024, 64, True) == 2.0 * 4 * 16 * 1024 * 1024 * 64


def test_record_and_document_shape():
    rec = peers.make_record("torch-flash", 4, 1024, 16, 64, True, "bf16", [2.0, 1.0, 3.0])
    assert rec["suite"] == "attention" and rec["name"] == "torch-flash" and rec["status"] == "ok"
    assert rec["shape"] == {"batch": 4, "seqlen": 1024, "heads": 16, "head_dim": 64, "causal": True, "dtype": "bf16"}
    assert rec["median_ms"] == 2.0 and rec["repetitions"] == 3
    assert rec["gflops"] == peers.attention_flops(4, 16, 1024, 1024, 64, True) / 2e6
    failed = peers.make_record("torch-cudnn", 1, 16384, 16, 128, False, "bf16", failure="no kernel")
    assert failed["status"] == "failed" and "median_ms" not in failed
    doc = json.loads(json.dumps(peers.make_document([rec, failed])))
    assert doc["schema"] == "parallax.results/1" and len(doc["records"]) == 2
    # What the C++ reader (src/bench/results.cpp) requires of every document and record.
    assert set(peers.DEVICE_KEYS) | {"name"} <= set(doc["device"])
    for key in ("parallax_version", "git_sha", "timestamp_utc", "host", "records"):
        assert key in doc
    for r in doc["records"]:
        for key in ("suite", "name", "dtype", "shape", "status", "flops", "bytes"):
            assert key in r
    assert rec["min_ms"] <= rec["median_ms"] <= rec["max_ms"]


def test_backward_records_use_their_suite_and_two_and_a_half_times_the_flops():
    rec = peers.make_record("torch-flash", 2, 2048, 16, 128, True, "bf16", [4.0], backward=True)
    assert rec["suite"] == "attention_backward" and rec["name"] == "torch-flash" and rec["status"] == "ok"
    assert rec["flops"] == 2.5 * peers.attention_flops(2, 16, 2048, 2048, 128, True)
    assert rec["flops"] == peers.attention_backward_flops(2, 16, 2048, 2048, 128, True)
    assert rec["bytes"] == 8.0 * 2 * 2048 * 16 * 128 * 2
    assert rec["gflops"] == rec["flops"] / 4e6
    failed = peers.make_record("torch-cudnn", 1, 512, 16, 128, False, "bf16", failure="no kernel", backward=True)
    assert failed["suite"] == "attention_backward" and failed["status"] == "failed"
    # The forward's records are unchanged by the new keyword.
    assert peers.make_record("torch-flash", 1, 512, 16, 128, False, "bf16", [1.0])["suite"] == "attention"
