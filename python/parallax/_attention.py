"""parallax.flash_attn: FlashAttention forward on torch tensors [B, S, H, D], through the C ABI;
parallax.attention_backward: its gradients; parallax.flash_attn_func: both as a torch.autograd.Function.

Layouts: q and the result are [B, Sq, H, D], k and v [B, Sk, Hkv, D] with H % Hkv == 0 (GQA / MQA), any
strides as long as the last dimension is contiguous (stride 1), so slices of a packed qkv tensor need no
copy. float16 or bfloat16, D in (64, 128). Causal masking is aligned bottom-right when Sq != Sk; a row that
sees no key returns zeros and lse -inf. lse (return_lse=True) is float32 [B, H, Sq], natural log.
Runs asynchronously on torch's current stream of the tensors' device.
"""

from __future__ import annotations

import ctypes
import math

from . import _lib

_DTYPES = {"torch.float16": 1, "torch.bfloat16": 2}  # parallax_dtype_t
KERNELS = ("auto", "reference", "tiled", "mma", "wgmma")
BACKWARD_KERNELS = ("auto", "reference", "mma", "wgmma")  # the levels with a backward


class AttentionArgsStruct(ctypes.Structure):
    """Mirror of parallax_attention_args_t (include/parallax/parallax.h); struct_size guards drift."""
    _fields_ = [
        ("struct_size", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64),
        ("heads", ctypes.c_int64), ("heads_kv", ctypes.c_int64), ("head_dim", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("q_strides", ctypes.c_int64 * 3),
        ("k", ctypes.c_void_p), ("k_strides", ctypes.c_int64 * 3),
        ("v", ctypes.c_void_p), ("v_strides", ctypes.c_int64 * 3),
        ("out", ctypes.c_void_p), ("out_strides", ctypes.c_int64 * 3),
        ("lse", ctypes.c_void_p),
        ("softmax_scale", ctypes.c_float),
    ]


class AttentionBackwardArgsStruct(ctypes.Structure):
    """Mirror of parallax_attention_backward_args_t (include/parallax/parallax.h)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64), ("seqlen_k", ctypes.c_int64),
        ("heads", ctypes.c_int64), ("heads_kv", ctypes.c_int64), ("head_dim", ctypes.c_int64),
        ("q", ctypes.c_void_p), ("q_strides", ctypes.c_int64 * 3),
        ("k", ctypes.c_void_p), ("k_strides", ctypes.c_int64 * 3),
        ("v", ctypes.c_void_p), ("v_strides", ctypes.c_int64 * 3),
        ("out", ctypes.c_void_p), ("out_strides", ctypes.c_int64 * 3),
        ("dout", ctypes.c_void_p), ("dout_strides", ctypes.c_int64 * 3),
        ("lse", ctypes.c_void_p),
        ("dq", ctypes.c_void_p), ("dq_strides", ctypes.c_int64 * 3),
        ("dk", ctypes.c_void_p), ("dk_strides", ctypes.c_int64 * 3),
        ("dv", ctypes.c_void_p), ("dv_strides", ctypes.c_int64 * 3),
        ("softmax_scale", ctypes.c_float),
    ]


_declared = False


def _declare() -> None:
    global _declared
    if not _declared:
        fn = _lib.lib.parallax_attention_forward
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(AttentionArgsStruct), ctypes.c_char_p, ctypes.c_void_p]
        fn = _lib.lib.parallax_attention_backward
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(AttentionBackwardArgsStruct), ctypes.c_char_p, ctypes.c_void_p]
        _declared = True


def _check_tensor(name: str, t) -> None:
    if not hasattr(t, "data_ptr") or not hasattr(t, "stride"):
        raise TypeError(f"{name}: must be a torch.Tensor (got {type(t).__name__})")
    if t.dim() != 4:
        raise ValueError(f"{name}: must be 4-D [batch, seqlen, heads, head_dim] (got shape {tuple(t.shape)})")
    if str(t.dtype) not in _DTYPES:
        raise TypeError(f"{name}: dtype must be torch.float16 or torch.bfloat16 (got {t.dtype})")
    if t.shape[3] > 1 and t.stride(3) != 1:
        raise ValueError(f"{name}: the last (head_dim) dimension must be contiguous, stride 1 (got strides "
                         f"{tuple(t.stride())})")
    if any(s < 0 for s in t.stride()):
        raise ValueError(f"{name}: strides must be non-negative (got {tuple(t.stride())})")


def check_arguments(q, k, v, *, causal=False, softmax_scale=None, return_lse=False, kernel="auto", out=None):
    """Every check that needs no GPU; raises TypeError / ValueError naming the argument. Returns
    (B, Sq, Sk, H, Hkv, D)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    B, Sq, H, D = q.shape
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"k, v: must have q's dtype {q.dtype} (got k {k.dtype}, v {v.dtype})")
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"k: must be [batch={B}, seqlen_k, heads_kv, head_dim={D}] (got {tuple(k.shape)})")
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"v: must have k's shape {tuple(k.shape)} (got {tuple(v.shape)})")
    Sk, Hkv = k.shape[1], k.shape[2]
    if min(B, Sq, Sk, H, Hkv) < 1:
        raise ValueError(f"q, k: every dimension must be >= 1 (got q {tuple(q.shape)}, k {tuple(k.shape)})")
    if H % Hkv != 0:
        raise ValueError(f"k: heads_kv={Hkv} must divide the query heads {H} (GQA / MQA)")
    if D not in (64, 128):
        raise ValueError(f"q: head_dim must be one of 64, 128 (got {D})")
    if not isinstance(causal, bool):
        raise TypeError(f"causal: must be a bool (got {type(causal).__name__})")
    if softmax_scale is not None:
        if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float)):
            raise TypeError(f"softmax_scale: must be a float or None (got {type(softmax_scale).__name__})")
        if not math.isfinite(softmax_scale) or softmax_scale <= 0:
            raise ValueError(f"softmax_scale: must be finite and > 0 (got {softmax_scale})")
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse: must be a bool (got {type(return_lse).__name__})")
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel: unknown kernel {kernel!r}; valid: {', '.join(KERNELS)}")
    if out is not None:
        _check_tensor("out", out)
        if tuple(out.shape) != (B, Sq, H, D) or out.dtype != q.dtype:
            raise ValueError(f"out: must be [{B}, {Sq}, {H}, {D}] {q.dtype} (got {tuple(out.shape)} {out.dtype})")
    for name, t in (("q", q), ("k", k), ("v", v)) + ((("out", out),) if out is not None else ()):
        if str(getattr(t, "device", "cuda")).split(":")[0] != "cuda":
            raise ValueError(f"{name}: must be a CUDA tensor (got device {t.device})")
    return B, Sq, Sk, H, Hkv, D


def flash_attn(q, k, v, *, causal=False, softmax_scale=None, return_lse=False, kernel="auto", out=None):
    """softmax(softmax_scale * q k^T + mask) v for torch tensors q [B, Sq, H, D], k / v [B, Sk, Hkv, D].

    Returns out ([B, Sq, H, D], q's dtype), or (out, lse) with return_lse=True (lse float32 [B, H, Sq]).
    softmax_scale defaults to 1 / sqrt(D). kernel: "auto", "reference", "tiled", "mma" or "wgmma"."""
    B, Sq, Sk, H, Hkv, D = check_arguments(q, k, v, causal=causal, softmax_scale=softmax_scale,
                                           return_lse=return_lse, kernel=kernel, out=out)
    import torch  # the tensors are torch's, so torch is importable

    devices = {t.device for t in (q, k, v) + ((out,) if out is not None else ())}
    if len(devices) != 1:
        raise ValueError(f"q, k, v, out: must be on one device (got {sorted(str(d) for d in devices)})")
    device = q.device
    if out is None:
        out = torch.empty((B, Sq, H, D), dtype=q.dtype, device=device)
    lse = torch.empty((B, H, Sq), dtype=torch.float32, device=device) if return_lse else None
    args = AttentionArgsStruct()
    args.struct_size = ctypes.sizeof(AttentionArgsStruct)
    args.dtype = _DTYPES[str(q.dtype)]
    args.causal = int(causal)
    args.batch, args.seqlen_q, args.seqlen_k, args.heads, args.heads_kv, args.head_dim = B, Sq, Sk, H, Hkv, D
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        setattr(args, name, t.data_ptr())
        setattr(args, name + "_strides", (ctypes.c_int64 * 3)(*t.stride()[:3]))
    args.lse = lse.data_ptr() if lse is not None else None
    args.softmax_scale = float(softmax_scale) if softmax_scale is not None else 0.0
    _declare()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        _lib.call("parallax_attention_forward", ctypes.byref(args), kernel.encode(), ctypes.c_void_p(stream))
    return (out, lse) if return_lse else out


def check_backward_arguments(dout, q, k, v, out, lse, *, causal=False, softmax_scale=None, deterministic=False,
                             kernel="auto"):
    """Every check of attention_backward that needs no GPU; raises TypeError / ValueError naming the argument.
    Returns (B, Sq, Sk, H, Hkv, D)."""
    if not isinstance(kernel, str) or kernel not in BACKWARD_KERNELS:
        raise ValueError(f"kernel: {kernel!r} has no backward; valid: {', '.join(BACKWARD_KERNELS)}")
    B, Sq, Sk, H, Hkv, D = check_arguments(q, k, v, causal=causal, softmax_scale=softmax_scale, kernel=kernel,
                                           out=out)
    if out is None:
        raise ValueError("out: the forward's output is required by the backward")
    _check_tensor("dout", dout)
    if tuple(dout.shape) != (B, Sq, H, D) or dout.dtype != q.dtype:
        raise ValueError(f"dout: must be [{B}, {Sq}, {H}, {D}] {q.dtype} (got {tuple(dout.shape)} {dout.dtype})")
    if not hasattr(lse, "data_ptr") or tuple(lse.shape) != (B, H, Sq) or str(lse.dtype) != "torch.float32":
        raise ValueError(f"lse: must be the forward's float32 [{B}, {H}, {Sq}] "
                         f"(got {tuple(getattr(lse, 'shape', ()))} {getattr(lse, 'dtype', type(lse).__name__)})")
    lse_dense = (H * Sq, Sq, 1)
    if tuple(lse.stride()) != lse_dense and Sq > 1:
        raise ValueError(f"lse: must be contiguous (strides {lse_dense}; got {tuple(lse.stride())})")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic: must be a bool (got {type(deterministic).__name__})")
    for name, t in (("dout", dout), ("lse", lse)):
        if str(getattr(t, "device", "cuda")).split(":")[0] != "cuda":
            raise ValueError(f"{name}: must be a CUDA tensor (got device {t.device})")
    return B, Sq, Sk, H, Hkv, D


def attention_backward(dout, q, k, v, out, lse, *, causal=False, softmax_scale=None, deterministic=False,
                       kernel="auto"):
    """Gradients (dq, dk, dv) of flash_attn(q, k, v, causal=..., softmax_scale=...) given dout = dL/dout, out and
    lse = the forward's results. dq is [B, Sq, H, D], dk / dv [B, Sk, Hkv, D] (summed over each GQA group), all
    in q's dtype. deterministic=True: bitwise reproducible (no atomics; slower). kernel: "auto", "reference",
    "mma"."""
    B, Sq, Sk, H, Hkv, D = check_backward_arguments(dout, q, k, v, out, lse, causal=causal,
                                                    softmax_scale=softmax_scale, deterministic=deterministic,
                                                    kernel=kernel)
    import torch

    devices = {t.device for t in (dout, q, k, v, out, lse)}
    if len(devices) != 1:
        raise ValueError(f"dout, q, k, v, out, lse: must be on one device (got {sorted(str(d) for d in devices)})")
    device = q.device
    dq = torch.empty((B, Sq, H, D), dtype=q.dtype, device=device)
    dk = torch.empty((B, Sk, Hkv, D), dtype=q.dtype, device=device)
    dv = torch.empty((B, Sk, Hkv, D), dtype=q.dtype, device=device)
    args = AttentionBackwardArgsStruct()
    args.struct_size = ctypes.sizeof(AttentionBackwardArgsStruct)
    args.dtype = _DTYPES[str(q.dtype)]
    args.causal = int(causal)
    args.deterministic = int(deterministic)
    args.batch, args.seqlen_q, args.seqlen_k, args.heads, args.heads_kv, args.head_dim = B, Sq, Sk, H, Hkv, D
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("dq", dq), ("dk", dk), ("dv", dv)):
        setattr(args, name, t.data_ptr())
        setattr(args, name + "_strides", (ctypes.c_int64 * 3)(*t.stride()[:3]))
    args.lse = lse.data_ptr()
    args.softmax_scale = float(softmax_scale) if softmax_scale is not None else 0.0
    _declare()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        _lib.call("parallax_attention_backward", ctypes.byref(args), kernel.encode(), ctypes.c_void_p(stream))
    return dq, dk, dv


_function = None


def _autograd_function():
    """torch.autograd.Function subclass, built on first use so that importing parallax needs no torch."""
    global _function
    if _function is None:
        import torch

        class FlashAttnFunc(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal, softmax_scale, deterministic, kernel):
                out, lse = flash_attn(q, k, v, causal=causal, softmax_scale=softmax_scale, return_lse=True,
                                      kernel=kernel)
                ctx.save_for_backward(q, k, v, out, lse)
                ctx.options = (causal, softmax_scale, deterministic, kernel)
                return out

            @staticmethod
            def backward(ctx, dout):
                q, k, v, out, lse = ctx.saved_tensors
                causal, softmax_scale, deterministic, kernel = ctx.options
                if dout.stride(3) != 1:  # autograd may hand over any layout; the kernels need unit stride in D
                    dout = dout.contiguous()
                dq, dk, dv = attention_backward(dout, q, k, v, out, lse, causal=causal, softmax_scale=softmax_scale,
                                                deterministic=deterministic, kernel=kernel)
                return dq, dk, dv, None, None, None, None

        _function = FlashAttnFunc
    return _function


def flash_attn_func(q, k, v, causal=False, softmax_scale=None, deterministic=False, kernel="auto"):
    """flash_attn with gradients: a torch.autograd.Function whose forward saves out and lse and whose backward
    calls parallax's attention backward. Same layouts and options as flash_attn; deterministic=True makes the
    gradients bitwise reproducible. kernel ("auto", "reference", "mma", "wgmma") is used for both directions."""
    if not isinstance(kernel, str) or kernel not in BACKWARD_KERNELS:
        raise ValueError(f"kernel: {kernel!r} has no backward; valid: {', '.join(BACKWARD_KERNELS)}")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic: must be a bool (got {type(deterministic).__name__})")
    check_arguments(q, k, v, causal=causal, softmax_scale=softmax_scale, kernel=kernel)
    return _autograd_function().apply(q, k, v, causal, softmax_scale, deterministic, kernel)
