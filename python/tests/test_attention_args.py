"""parallax.flash_attn argument checks that need no GPU (and no torch): FakeTensor mimics the few torch.Tensor
methods the checks read. Each bad argument raises TypeError / ValueError naming it and the rule."""

from __future__ import annotations

import ctypes

import pytest

from parallax import _attention


class FakeTensor:
    def __init__(self, shape, dtype="torch.bfloat16", strides=None, device="cuda:0"):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        if strides is None:
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.insert(0, acc)
                acc *= n
        self._strides = tuple(strides)

    def dim(self):
        return len(self.shape)

    def stride(self, i=None):
        return self._strides if i is None else self._strides[i]

    def data_ptr(self):
        return 0x7F00_0000_0000


def qkv(B=2, Sq=5, Sk=7, H=4, Hkv=2, D=64, **kw):
    return FakeTensor((B, Sq, H, D), **kw), FakeTensor((B, Sk, Hkv, D), **kw), FakeTensor((B, Sk, Hkv, D), **kw)


def test_valid_arguments_pass():
    q, k, v = qkv()
    assert _attention.check_arguments(q, k, v) == (2, 5, 7, 4, 2, 64)
    assert _attention.check_arguments(q, k, v, causal=True, softmax_scale=0.1, return_lse=True, kernel="tiled",
                                      out=FakeTensor((2, 5, 4, 64))) == (2, 5, 7, 4, 2, 64)


def test_packed_qkv_slices_are_accepted():
    # q, k, v = packed[:, :, 0], packed[:, :, 1], packed[:, :, 2] of a [B, S, 3, H, D] tensor.
    B, S, H, D = 2, 9, 4, 128
    strides = (S * 3 * H * D, 3 * H * D, D, 1)
    q = FakeTensor((B, S, H, D), strides=strides)
    assert _attention.check_arguments(q, q, q) == (B, S, S, H, H, D)


@pytest.mark.parametrize("bad,match", [
    (dict(D=96), r"q: head_dim must be one of 64, 128 \(got 96\)"),
    (dict(Hkv=3), r"k: heads_kv=3 must divide the query heads 4"),
    (dict(dtype="torch.float32"), r"q: dtype must be torch.float16 or torch.bfloat16"),
    (dict(device="cpu"), r"q: must be a CUDA tensor"),
])
def test_bad_shapes_and_types(bad, match):
    q, k, v = qkv(**bad)
    with pytest.raises((TypeError, ValueError), match=match):
        _attention.check_arguments(q, k, v)


def test_each_argument_is_named():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^q: must be 4-D"):
        _attention.check_arguments(FakeTensor((5, 4, 64)), k, v)
    with pytest.raises(TypeError, match=r"^k, v: must have q's dtype"):
        _attention.check_arguments(q, FakeTensor(k.shape, dtype="torch.float16"), v)
    with pytest.raises(ValueError, match=r"^v: must have k's shape"):
        _attention.check_arguments(q, k, FakeTensor((2, 8, 2, 64)))
    with pytest.raises(ValueError, match=r"^k: must be \[batch=2"):
        _attention.check_arguments(q, FakeTensor((3, 7, 2, 64)), FakeTensor((3, 7, 2, 64)))
    with pytest.raises(ValueError, match=r"^q: the last \(head_dim\) dimension must be contiguous"):
        _attention.check_arguments(FakeTensor(q.shape, strides=(1280, 256, 64, 2)), k, v)
    with pytest.raises(ValueError, match=r"^softmax_scale: must be finite and > 0"):
        _attention.check_arguments(q, k, v, softmax_scale=-1.0)
    with pytest.raises(ValueError, match=r"^softmax_scale: must be finite and > 0"):
        _attention.check_arguments(q, k, v, softmax_scale=float("inf"))
    with pytest.raises(TypeError, match=r"^softmax_scale: must be a float or None"):
        _attention.check_arguments(q, k, v, softmax_scale="0.1")
    with pytest.raises(TypeError, match=r"^causal: must be a bool"):
        _attention.check_arguments(q, k, v, causal=1)
    with pytest.raises(ValueError, match=r"^kernel: unknown kernel 'flash'; valid: auto, reference, tiled"):
        _attention.check_arguments(q, k, v, kernel="flash")
    with pytest.raises(ValueError, match=r"^out: must be \[2, 5, 4, 64\]"):
        _attention.check_arguments(q, k, v, out=FakeTensor((2, 5, 4, 128)))
    with pytest.raises(TypeError, match=r"^q: must be a torch.Tensor"):
        _attention.check_arguments([1, 2], k, v)


def test_struct_mirror_matches_the_c_layout():
    # 8 (size) + 4 + 4 + 6 * 8 + 4 * (8 + 24) + 8 (lse) + 4 (scale) + 4 (padding) = 208 bytes on LP64.
    assert ctypes.sizeof(_attention.AttentionArgsStruct) == 208
    assert _attention.AttentionArgsStruct.softmax_scale.offset == 200


# ---- backward (issue 6): attention_backward / flash_attn_func checks, no GPU -------------------------------

def backward_args(B=2, Sq=5, Sk=7, H=4, Hkv=2, D=64):
    q, k, v = qkv(B, Sq, Sk, H, Hkv, D)
    out, dout = FakeTensor((B, Sq, H, D)), FakeTensor((B, Sq, H, D))
    lse = FakeTensor((B, H, Sq), dtype="torch.float32")
    return dout, q, k, v, out, lse


def test_backward_valid_arguments_pass():
    assert _attention.check_backward_arguments(*backward_args(), causal=True, deterministic=True) == (2, 5, 7, 4, 2, 64)


def test_backward_kernel_must_have_a_backward():
    for bad in ("tiled", "flash9", 3):
        with pytest.raises(ValueError, match="kernel: .* has no backward; valid: auto, reference, mma, wgmma"):
            _attention.check_backward_arguments(*backward_args(), kernel=bad)
    for good in ("auto", "reference", "mma"):
        _attention.check_backward_arguments(*backward_args(), kernel=good)


def test_backward_dout_lse_and_flags():
    dout, q, k, v, out, lse = backward_args()
    with pytest.raises(ValueError, match=r"dout: must be \[2, 5, 4, 64\]"):
        _attention.check_backward_arguments(FakeTensor((2, 5, 4, 128)), q, k, v, out, lse)
    with pytest.raises(ValueError, match="dout: must be"):
        _attention.check_backward_arguments(FakeTensor((2, 5, 4, 64), dtype="torch.float16"), q, k, v, out, lse)
    with pytest.raises(ValueError, match="lse: must be the forward's float32"):
        _attention.check_backward_arguments(dout, q, k, v, out, FakeTensor((2, 4, 5), dtype="torch.bfloat16"))
    with pytest.raises(ValueError, match="lse: must be the forward's float32"):
        _attention.check_backward_arguments(dout, q, k, v, out, FakeTensor((2, 5, 4), dtype="torch.float32"))
    with pytest.raises(ValueError, match="lse: must be contiguous"):
        _attention.check_backward_arguments(dout, q, k, v, out,
                                            FakeTensor((2, 4, 5), dtype="torch.float32", strides=(40, 10, 2)))
    with pytest.raises(ValueError, match="out: the forward's output is required"):
        _attention.check_backward_arguments(dout, q, k, v, None, lse)
    with pytest.raises(TypeError, match="deterministic: must be a bool"):
        _attention.check_backward_arguments(dout, q, k, v, out, lse, deterministic=1)
    with pytest.raises(ValueError, match="dout: must be a CUDA tensor"):
        _attention.check_backward_arguments(FakeTensor((2, 5, 4, 64), device="cpu"), q, k, v, out, lse)
    # The forward's rules apply too.
    with pytest.raises(ValueError, match="head_dim must be one of 64, 128"):
        _attention.check_backward_arguments(*backward_args(D=96))


def test_flash_attn_func_checks_before_touching_torch():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="has no backward"):
        _attention.flash_attn_func(q, k, v, kernel="tiled")
    with pytest.raises(TypeError, match="deterministic: must be a bool"):
        _attention.flash_attn_func(q, k, v, deterministic="yes")
    with pytest.raises(ValueError, match="softmax_scale: must be finite and > 0"):
        _attention.flash_attn_func(q, k, v, softmax_scale=-1.0)


def test_backward_struct_mirrors_the_c_header():
    # 4 x u32 flags after struct_size, 6 dims, 8 tensors with 3 strides each (lse without), the float scale.
    s = _attention.AttentionBackwardArgsStruct
    assert s.dtype.offset == 8 and s.reserved.offset == 20 and s.batch.offset == 24
    assert s.q.offset == 24 + 6 * 8
    assert s.lse.offset == s.dout_strides.offset + 24 and s.dq.offset == s.lse.offset + 8
    assert ctypes.sizeof(s) == s.softmax_scale.offset + 8  # 4-byte float padded to the struct's 8-byte alignment
