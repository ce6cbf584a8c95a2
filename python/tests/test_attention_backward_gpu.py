"""parallax.flash_attn_func gradients on the GPU against torch autograd through an fp32 reference (materialized
scores, bottom-right causal mask, GQA by repeat_interleave so dk / dv sum over each group): "reference",
"mma" and "wgmma" (compute capability 9.0 only) kernels, default and deterministic, bf16 / fp16, D 64 / 128,
Sq != Sk, fully masked rows, packed-qkv slices, and bitwise reproducibility of deterministic=True."""

from __future__ import annotations

import math
import os

import pytest

import parallax

torch = pytest.importorskip("torch", reason="torch is not installed (GPU tests compare with torch)")
pytestmark = pytest.mark.gpu
SEED = int(os.environ.get("PARALLAX_TEST_SEED", "0"))


def reference(q, k, v, causal, scale):
    """fp32 attention on fp32 leaves; torch autograd differentiates it."""
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    qf, kf, vf = (t.transpose(1, 2) for t in (q, k, v))
    kf = kf.repeat_interleave(H // Hkv, dim=1)
    vf = vf.repeat_interleave(H // Hkv, dim=1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(Sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (Sk - Sq), float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # fully masked rows: 0, and no gradient through them
    return (p @ vf).transpose(1, 2)


def inputs(B, Sq, Sk, H, Hkv, D, dtype, salt=0):
    gen = torch.Generator(device="cuda").manual_seed(SEED + salt)
    dt = getattr(torch, dtype)
    q = (torch.rand(B, Sq, H, D, device="cuda", generator=gen) * 4 - 2).to(dt)
    k = (torch.rand(B, Sk, Hkv, D, device="cuda", generator=gen) * 4 - 2).to(dt)
    v = (torch.rand(B, Sk, Hkv, D, device="cuda", generator=gen) * 2 - 1).to(dt)
    dout = (torch.rand(B, Sq, H, D, device="cuda", generator=gen) * 2 - 1).to(dt)
    return q, k, v, dout


def relative_error(got, ref):
    return ((got.float() - ref).norm() / ref.norm().clamp_min(1e-12)).item()


@pytest.mark.parametrize("kernel", ["reference", "mma", "wgmma"])
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(2, 128, 128, 8, 8, 64), (1, 100, 37, 8, 2, 128), (2, 17, 300, 4, 1, 64),
                                   (1, 1, 1, 2, 2, 128), (1, 300, 200, 4, 4, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_fp32_autograd(kernel, deterministic, dtype, shape, causal):
    if kernel == "reference" and deterministic:
        pytest.skip("level 1 is deterministic by construction; one run of it is enough")
    if kernel == "wgmma" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("kernel 'wgmma' needs compute capability 9.0")
    B, Sq, Sk, H, Hkv, D = shape
    q, k, v, dout = inputs(B, Sq, Sk, H, Hkv, D, dtype)
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    out = parallax.flash_attn_func(q, k, v, causal=causal, deterministic=deterministic, kernel=kernel)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    qf, kf, vf = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    ref = reference(qf, kf, vf, causal, 1 / math.sqrt(D))
    rq, rk, rv = torch.autograd.grad(ref, (qf, kf, vf), dout.float())
    # P and dS are rounded to the input type inside the kernels (u = 2^-9 bf16, 2^-11 f16), the outputs once more.
    tol = 3e-2 if dtype == "bfloat16" else 8e-3
    what = f"seed={SEED} {kernel} det={deterministic} {dtype} {shape} causal={causal}"
    for name, got, r in (("dq", dq, rq), ("dk", dk, rk), ("dv", dv, rv)):
        assert got.dtype == q.dtype and got.shape == r.shape, what
        assert torch.isfinite(got).all(), f"{what}: {name} has NaN/Inf"
        if r.norm() > 0:
            assert relative_error(got, r) <= tol, f"{what}: {name} relative error {relative_error(got, r)}"
        else:
            # A zero reference gradient (e.g. Sq = Sk = 1: P = 1, so dS = P (dP - Delta) = 0 in exact arithmetic)
            # comes out as rounding residue in the kernels: dP = dO.V and Delta = dO.O are summed in different
            # orders in fp32, leaving |dP - Delta| ~ 1e-7. Bound it absolutely instead of demanding exact zeros.
            assert got.float().abs().max().item() <= 1e-5, f"{what}: {name} must be ~0, got {got.abs().max()}"


@pytest.mark.parametrize("kernel", ["mma", "wgmma"])
def test_deterministic_is_bitwise_reproducible(kernel):
    if kernel == "wgmma" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("kernel 'wgmma' needs compute capability 9.0")
    q, k, v, dout = inputs(2, 1000, 1100, 8, 2, 128, "bfloat16", salt=1)
    runs = []
    for _ in range(2):
        qq, kk, vv = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = parallax.flash_attn_func(qq, kk, vv, causal=True, deterministic=True, kernel=kernel)
        runs.append(torch.autograd.grad(out, (qq, kk, vv), dout))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_packed_qkv_slices_get_gradients():
    B, S, H, D = 2, 65, 4, 64
    packed = ((torch.rand(B, S, 3, H, D, device="cuda") * 2 - 1).to(torch.bfloat16)).requires_grad_(True)
    q, k, v = packed[:, :, 0], packed[:, :, 1], packed[:, :, 2]
    out = parallax.flash_attn_func(q, k, v, causal=True)
    dout = torch.rand_like(out) - 0.5
    (dpacked,) = torch.autograd.grad(out, (packed,), dout)
    pf = packed.detach().float().requires_grad_(True)
    ref = reference(pf[:, :, 0], pf[:, :, 1], pf[:, :, 2], True, 1 / math.sqrt(D))
    (rpacked,) = torch.autograd.grad(ref, (pf,), dout.float())
    assert relative_error(dpacked, rpacked) <= 3e-2
