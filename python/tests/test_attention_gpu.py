"""parallax.flash_attn on the GPU against an fp32 torch reference (materialized scores, bottom-right causal
mask): every kernel, bf16 / fp16, D 64 / 128, GQA, Sq != Sk, packed-qkv slices, lse."""

from __future__ import annotations

import math
import os

import pytest

import parallax

torch = pytest.importorskip("torch", reason="torch is not installed (GPU tests compare with torch)")
pytestmark = pytest.mark.gpu
SEED = int(os.environ.get("PARALLAX_TEST_SEED", "0"))


def reference(q, k, v, causal, scale):
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    kf = kf.repeat_interleave(H // Hkv, dim=1)
    vf = vf.repeat_interleave(H // Hkv, dim=1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (Sk - Sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf for fully masked rows
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse


@pytest.mark.parametrize("kernel", ["reference", "tiled", "mma", "wgmma", "auto"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(2, 128, 128, 8, 8, 64), (1, 100, 37, 8, 2, 128), (2, 17, 300, 4, 1, 64),
                                   (1, 1, 1, 2, 2, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_fp32_torch(kernel, dtype, shape, causal):
    B, Sq, Sk, H, Hkv, D = shape
    if kernel == "wgmma" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("kernel 'wgmma' (level 4) needs an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    dt = getattr(torch, dtype)
    q = (torch.rand(B, Sq, H, D, device="cuda", generator=gen) * 4 - 2).to(dt)
    k = (torch.rand(B, Sk, Hkv, D, device="cuda", generator=gen) * 2 - 1).to(dt)
    v = (torch.rand(B, Sk, Hkv, D, device="cuda", generator=gen) * 2 - 1).to(dt)
    try:
        out, lse = parallax.flash_attn(q, k, v, causal=causal, return_lse=True, kernel=kernel)
    except parallax.UnimplementedError as e:
        pytest.skip(f"kernel {kernel!r}: {e}")
    ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(D))
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    err = (out.float() - ref).abs().max().item()
    assert err <= tol, f"seed={SEED} {kernel} {dtype} {shape} causal={causal}: max abs err {err}"
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    assert (lse[finite] - ref_lse[finite]).abs().max().item() <= 1e-3 if finite.any() else True


def test_packed_qkv_slices_and_out_argument():
    B, S, H, D = 2, 65, 4, 64
    packed = (torch.rand(B, S, 3, H, D, device="cuda") * 2 - 1).to(torch.bfloat16)
    q, k, v = packed[:, :, 0], packed[:, :, 1], packed[:, :, 2]
    out = torch.empty(B, S, H, D, device="cuda", dtype=torch.bfloat16)
    got = parallax.flash_attn(q, k, v, causal=True, kernel="tiled", out=out)
    assert got.data_ptr() == out.data_ptr()
    ref, _ = reference(q, k, v, True, 1 / math.sqrt(D))
    assert (out.float() - ref).abs().max().item() <= 1e-2
