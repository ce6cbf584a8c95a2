"""On a GPU: every parallax function against torch. GEMM results are compared with torch.matmul in float64
on random shapes (odd sizes, 1s, up to 2048), leading dimensions larger than the row length, offset
pointers, the transposed (all column-major) form, alpha/beta, and a NaN-poisoned output with beta = 0.

Skipped, with the reason, without torch or without a GPU (conftest.py)."""

from __future__ import annotations

import math
import os
import random
import zlib

import pytest

import parallax

torch = pytest.importorskip("torch", reason="torch is not installed (GPU tests compare with torch)")
pytestmark = pytest.mark.gpu

SEED = int(os.environ["PARALLAX_TEST_SEED"])
_rng = random.Random(SEED)
_SIZES = [1, 2, 3, 5, 7, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 257, 1000, 1023, 1024, 1025, 2047, 2048]
SHAPES = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (127, 1, 255), (1, 300, 70), (129, 257, 63), (255, 129, 1),
          (640, 480, 320), (2048, 2048, 2048)]
SHAPES += [tuple(_rng.randint(1, 2048) for _ in range(3)) for _ in range(3)]  # (m, n, k) uniform
SHAPES += [tuple(_rng.choice(_SIZES) for _ in range(3)) for _ in range(2)]  # around tile boundaries
LAYOUTS = ["contiguous", "padded", "transposed", "col_views"]
KERNELS = parallax.gemm_kernels()


def assert_fp32_close(out, ref, scale, k: int, what: str):
    """out (float32) against ref (float64, exact up to ~1e-16) elementwise within the worst-case rounding
    bound of an FP32 dot product of length k, |err| <= gamma_{k+2} * (|alpha| |A||B| + |beta| |C|) with
    gamma_n ~ n * 2^-24 (Higham; holds for any summation order, FMA or not), doubled for slack. Also
    normwise: an FP32 kernel lands near 1e-6 while a TF32 or bf16 path lands near 1e-3."""
    u = 2.0 ** -24
    bound = 2 * (k + 2) * u * scale
    err = (out.double() - ref).abs()
    bad = ~(err <= bound)  # NaN compares False: a NaN is a failure
    if bool(bad.any()):
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.numel()} elements outside the FP32 bound; first at "
                             f"{i}: got {out[i].item()!r}, want {ref[i].item()!r}, bound {bound[i].item():.3g} "
                             f"(PARALLAX_TEST_SEED={SEED})")
    rel = (err.norm() / ref.norm()).item() if ref.norm().item() > 0 else err.norm().item()
    assert rel < 2e-5, f"{what}: normwise relative error {rel:.3g} (PARALLAX_TEST_SEED={SEED})"


def uniform(*shape, gen):
    return torch.rand(*shape, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1


def run_case(kernel, m, n, k, layout, gen):
    """Builds operands in `layout`, runs parallax.gemm, returns (out, ref, scale, checks-after)."""
    alpha, beta, c0, out, checks = 1.0, 0.0, None, None, []
    if layout == "contiguous":
        a, b = uniform(m, k, gen=gen), uniform(k, n, gen=gen)
        result = parallax.gemm(a, b, kernel=kernel)
        checks.append(lambda r: r.is_contiguous() and r.shape == (m, n))
    elif layout == "padded":
        # Leading dimensions larger than the rows, pointers offset into their buffers, beta != 0.
        A, B, C = uniform(m, k + 5, gen=gen), uniform(k, n + 3, gen=gen), uniform(m, n + 7, gen=gen)
        a, b, out = A[:, :k], B[:, 1:n + 1], C[:, 2:n + 2]
        C_before = C.clone()
        c0, alpha, beta = out.clone(), 0.75, -0.5
        result = parallax.gemm(a, b, alpha=alpha, beta=beta, out=out, kernel=kernel)
        checks.append(lambda r: r is out)
        checks.append(lambda r: torch.equal(C[:, :2], C_before[:, :2]) and torch.equal(C[:, n + 2:], C_before[:, n + 2:]))
    elif layout == "transposed":
        # Contiguous storage read transposed: op(a), op(b) column-major -> C^T = B^T A^T, C column-major.
        at, bt = uniform(k, m, gen=gen), uniform(n, k, gen=gen)
        a, b = at.t(), bt.t()
        result = parallax.gemm(at, bt, trans_a=True, trans_b=True, kernel=kernel)
        checks.append(lambda r: r.shape == (m, n))
    elif layout == "col_views":
        # Column-major views with padding; out column-major, NaN-poisoned, beta = 0 must never read it.
        AT, BT = uniform(k, m + 4, gen=gen), uniform(n, k + 2, gen=gen)
        OT = torch.full((n, m + 3), float("nan"), device="cuda")
        a, b, out = AT[:, :m].t(), BT[:, :k].t(), OT[:, :m].t()
        alpha = 2.0
        result = parallax.gemm(a, b, alpha=alpha, out=out, kernel=kernel)
        checks.append(lambda r: r is out)
        checks.append(lambda r: bool(OT[:, m:].isnan().all()))  # padding untouched
    else:
        raise AssertionError(layout)
    ref = alpha * (a.double() @ b.double())
    scale = abs(alpha) * (a.double().abs() @ b.double().abs())
    if c0 is not None:
        ref = ref + beta * c0.double()
        scale = scale + abs(beta) * c0.double().abs()
    return result, ref, scale, checks


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
@pytest.mark.parametrize("kernel", KERNELS)
def test_gemm_matches_torch_fp64(kernel, m, n, k, layout):
    # Per-case seed derived from the run's seed and the case (crc32, not hash(): str hashes vary per process).
    gen = torch.Generator(device="cuda").manual_seed(SEED ^ zlib.crc32(f"{kernel} {m} {n} {k} {layout}".encode()))
    try:
        out, ref, scale, checks = run_case(kernel, m, n, k, layout, gen)
    except parallax.UnimplementedError as e:
        pytest.skip(f"{kernel} is not implemented yet: {e}")
    torch.cuda.synchronize()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.shape == (m, n)
    for i, check in enumerate(checks):
        assert check(out), f"{kernel} {layout} {m}x{n}x{k}: check {i} failed"
    assert_fp32_close(out, ref, scale, k, f"{kernel} {layout} m={m} n={n} k={k}")


def test_gemm_runs_on_torchs_current_stream():
    """On a side stream: a long sleep, then the inputs are written, then gemm. Launched on any other stream,
    gemm would read the inputs before they are written (the side stream does not block the default one)."""
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("torch.cuda._sleep is not available")
    m, n, k = 300, 200, 100
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    a_src, b = uniform(m, k, gen=gen), uniform(k, n, gen=gen)
    a = torch.zeros_like(a_src)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time
        a.copy_(a_src)
        out = parallax.gemm(a, b, kernel="cublas")
    side.synchronize()
    ref = a_src.double() @ b.double()
    assert_fp32_close(out, ref, a_src.double().abs() @ b.double().abs(), k, "side stream")


def test_any_cuda_array_interface_object_works():
    """The generic path: a bare __cuda_array_interface__ (device found by asking the library)."""

    class Bare:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    m, n, k = 65, 33, 129
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    A, b = uniform(m, k + 3, gen=gen), uniform(k, n, gen=gen)
    a = A[:, :k]
    out = torch.full((m, n), float("nan"), device="cuda")
    result = parallax.gemm(Bare(a), Bare(b), out=Bare(out), kernel="cublas")
    assert isinstance(result, Bare)
    torch.cuda.synchronize()
    assert_fp32_close(out, a.double() @ b.double(), a.double().abs() @ b.double().abs(), k, "bare CAI")


def test_tensors_that_require_grad_are_read_without_autograd():
    a = torch.ones(4, 3, device="cuda", requires_grad=True)
    b = torch.ones(3, 2, device="cuda")
    out = parallax.gemm(a, b, kernel="cublas")
    torch.cuda.synchronize()
    assert not out.requires_grad and torch.equal(out, torch.full((4, 2), 3.0, device="cuda"))


def test_cupy_arrays_if_cupy_is_installed():
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    a = cupy.random.rand(70, 50, dtype=cupy.float32)
    b = cupy.random.rand(50, 30, dtype=cupy.float32)
    out = parallax.gemm(a, b, kernel="cublas")  # returns a torch tensor: torch is importable here
    cupy.cuda.get_current_stream().synchronize()
    torch.cuda.synchronize()
    ref = torch.as_tensor(a, device="cuda").double() @ torch.as_tensor(b, device="cuda").double()
    assert_fp32_close(out, ref, ref.abs(), 50, "cupy")


def test_host_memory_is_rejected_before_any_kernel():
    class Bare:
        def __init__(self, ptr, shape):
            self.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", data=(ptr, False), strides=None,
                                                 version=3)

    b = torch.ones(3, 2, device="cuda")
    host = torch.ones(4, 3)
    with pytest.raises(ValueError, match=r"^a: must be CUDA device memory .*'ptr': is not CUDA device memory"):
        parallax.gemm(Bare(host.data_ptr(), (4, 3)), b, kernel="cublas")
    pinned = torch.ones(4, 3).pin_memory()
    with pytest.raises(ValueError, match=r"^a: must be CUDA device memory .*pinned host memory"):
        parallax.gemm(Bare(pinned.data_ptr(), (4, 3)), b, kernel="cublas")
    with pytest.raises(ValueError, match=r"^a: must be on a CUDA device \(got a tensor on cpu\)"):
        parallax.gemm(host, b)


def test_wrong_dtype_tensor_is_a_type_error():
    a = torch.ones(4, 3, device="cuda", dtype=torch.float64)
    with pytest.raises(TypeError, match=r"^a: must be float32 for kernel 'cublas' \(got float64\)"):
        parallax.gemm(a, a.t(), kernel="cublas")
    h = torch.ones(4, 3, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"^b: must have the dtype of a \(bfloat16\) \(got float32\)"):
        parallax.gemm(h, h.t().float())


def test_mixed_layout_tensors_are_rejected_with_the_rule():
    x, w = torch.ones(8, 4, device="cuda"), torch.ones(5, 4, device="cuda")
    with pytest.raises(ValueError, match=r"^b: op\(b\) is column-major but op\(a\) is row-major"):
        parallax.gemm(x, w, trans_b=True)
    out = parallax.gemm(x, w.t().contiguous(), kernel="cublas")  # the documented fix
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full((8, 5), 4.0, device="cuda"))


def test_operands_on_two_devices_are_rejected_and_the_device_is_followed():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    a0, b1 = torch.ones(4, 3, device="cuda:0"), torch.ones(3, 2, device="cuda:1")
    with pytest.raises(ValueError, match=r"^b: is on cuda:1 but a is on cuda:0"):
        parallax.gemm(a0, b1)
    a1 = torch.ones(4, 3, device="cuda:1")
    with torch.cuda.device(0):
        out = parallax.gemm(a1, b1, kernel="cublas")  # runs on cuda:1 although cuda:0 is current
        assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    assert out.device == torch.device("cuda:1") and torch.equal(out, torch.full((4, 2), 3.0, device="cuda:1"))


def test_device_info_matches_torch():
    assert parallax.device_count() == torch.cuda.device_count()
    for d in range(torch.cuda.device_count()):
        info, props = parallax.device_info(d), torch.cuda.get_device_properties(d)
        assert info.device == d
        assert info.name == props.name
        assert (info.cc_major, info.cc_minor) == (props.major, props.minor)
        assert info.arch == f"sm_{props.major}{props.minor}"
        assert info.sm_count == props.multi_processor_count
        assert info.global_memory_bytes == props.total_memory
        assert info.warp_size == 32
        assert info.theoretical_fp32_tflops > 0 and info.theoretical_dram_gbps > 0
    assert parallax.device_info().device == torch.cuda.current_device()
    with pytest.raises(parallax.InvalidArgumentError, match=r"invalid argument 'device'"):
        parallax.device_info(torch.cuda.device_count())


def test_library_failures_become_parallax_errors_on_a_gpu():
    # Valid tensors, but the library's own check on the raw call (here: ldc < n) is what fires.
    a, b, c = (torch.ones(4, 4, device="cuda") for _ in range(3))
    with pytest.raises(parallax.InvalidArgumentError, match=r"^parallax_sgemm: invalid argument 'ldc'"):
        parallax._lib.call("parallax_sgemm", 1, 4, 4, 4, 1.0, a.data_ptr(), 4, b.data_ptr(), 4, 0.0,
                           c.data_ptr(), 2, None)
    assert math.isfinite(float(c.sum()))


# ---- tensor-core GEMM (float16 / bfloat16) against float64 torch ----------------------------------------

TC_SHAPES = [(1, 1, 1), (8, 17, 129), (127, 129, 1000), (1000, 127, 17), (256, 384, 512)]
TC_KERNELS = [k for k in parallax.tc_kernels() if k != "auto"] + ["auto"]


def _tc_supported(kernel: str) -> bool:
    return not kernel.startswith("wgmma") or torch.cuda.get_device_capability()[0] == 9


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("trans", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("m,n,k", TC_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in TC_SHAPES])
@pytest.mark.parametrize("kernel", TC_KERNELS)
def test_tc_gemm_matches_torch_fp64(kernel, m, n, k, trans, dtype):
    if not _tc_supported(kernel):
        pytest.skip(f"{kernel} needs an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(SEED ^ zlib.crc32(f"tc {kernel} {m} {n} {k} {trans} {dtype}".encode()))
    tdt = getattr(torch, dtype)
    # Stored operands: A is m x k (N) or k x m (T, passed as a transposed view), same for B.
    a = uniform(m, k, gen=gen).to(tdt) if trans[0] == "N" else uniform(k, m, gen=gen).to(tdt).t()
    b = uniform(k, n, gen=gen).to(tdt) if trans[1] == "N" else uniform(n, k, gen=gen).to(tdt).t()
    bias = uniform(n, gen=gen)
    c = torch.full((m, n + 8), float("nan"), device="cuda", dtype=torch.float32)
    out = c[:, :n]  # fp32 output with padding, NaN-poisoned, beta = 0 never reads it
    result = parallax.gemm(a, b, out=out, kernel=kernel, alpha=0.5, bias=bias, activation="silu")
    torch.cuda.synchronize()
    assert result is out
    pre = 0.5 * (a.double() @ b.double()) + bias.double()
    ref = pre * torch.sigmoid(pre)
    scale = 0.5 * (a.double().abs() @ b.double().abs()) + bias.double().abs()
    err = (out.double() - ref).abs()
    bound = 4 * (1 + math.sqrt(k)) * 2.0 ** -22 * scale * 1.2 + 2.0 ** -22 * ref.abs() + 1e-30
    bad = ~(err <= bound)
    assert not bool(bad.any()), (f"{kernel} {trans} {dtype} {m}x{n}x{k}: {int(bad.sum())} elements off; first "
                                 f"{tuple(bad.nonzero()[0].tolist())} (PARALLAX_TEST_SEED={SEED})")
    assert bool(c[:, n:].isnan().all()), "padding written"
    # 16-bit output allocated by the binding, row-major, rounding to the dtype once.
    r16 = parallax.gemm(a, b, kernel=kernel)
    torch.cuda.synchronize()
    assert r16.dtype == tdt and r16.shape == (m, n) and r16.is_contiguous()
    ref16 = a.double() @ b.double()
    tol = (2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10) * ref16.abs() + 4 * (1 + math.sqrt(k)) * 2.0 ** -22 * (
        a.double().abs() @ b.double().abs()) + 2.0 ** -24
    assert bool(((r16.double() - ref16).abs() <= tol).all()), f"{kernel} {trans} {dtype} 16-bit output"


def test_tc_gemm_column_major_out_uses_the_transpose_identity():
    a = torch.randn(65, 33, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(33, 47, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(47, 65, device="cuda", dtype=torch.float32).t()  # column-major 65 x 47
    parallax.gemm(a, b, out=out, kernel="cublas")
    torch.cuda.synchronize()
    assert torch.allclose(out.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-4)
