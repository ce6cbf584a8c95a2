"""parallax.gemm argument checks that need no GPU: each raises TypeError / ValueError naming the argument
and the rule, before the library is called. Operands are FakeCudaArray objects (conftest.py); a call whose
arguments are all valid gets as far as asking where its (fake) memory lives, which without a GPU is
parallax.NoDeviceError and on a GPU machine a ValueError saying it is not device memory."""

from __future__ import annotations

import re

import pytest

import parallax


def reaches_the_device_check(call):
    """The call passed every GPU-free check: it stops at the first question only a GPU can answer."""
    if parallax.device_count() == 0:
        with pytest.raises(parallax.NoDeviceError, match="no CUDA device visible"):
            call()
    else:
        with pytest.raises(ValueError, match=r"^a: must be CUDA device memory"):
            call()


def test_valid_row_major_arguments_pass_every_cpu_check(fake):
    a, b, out = fake((5, 7)), fake((7, 3), slot=1), fake((5, 3), slot=2)
    for kernel in parallax.gemm_kernels():
        reaches_the_device_check(lambda: parallax.gemm(a, b, out=out, kernel=kernel))


def test_any_leading_dimension_with_unit_inner_stride_is_accepted(fake):
    a = fake((5, 7), strides=(100, 1))  # a[:, :7] of a 5 x 100 buffer
    b = fake((7, 3), strides=(9, 1), slot=1)
    out = fake((5, 3), strides=(64, 1), slot=2)
    reaches_the_device_check(lambda: parallax.gemm(a, b, out=out, beta=0.5))


def test_all_column_major_is_accepted_through_the_transpose_identity(fake):
    # Contiguous storage read transposed: op(a) = a.T and op(b) = b.T are column-major; so is out.
    a, b = fake((7, 5)), fake((3, 7), slot=1)
    out_col = fake((5, 3), strides=(1, 5), slot=2)
    reaches_the_device_check(lambda: parallax.gemm(a, b, trans_a=True, trans_b=True, out=out_col))
    # Column-major views passed directly are the same thing.
    a_view, b_view = fake((5, 7), strides=(1, 5)), fake((7, 3), strides=(1, 7), slot=1)
    reaches_the_device_check(lambda: parallax.gemm(a_view, b_view, out=out_col))


def test_vectors_fit_either_layout(fake):
    # A single row or column has no second stride to get wrong: m = 1, n = 1 mix freely.
    a, b, out = fake((1, 7), strides=(1, 1)), fake((7, 1), strides=(1, 1), slot=1), fake((1, 1), slot=2)
    reaches_the_device_check(lambda: parallax.gemm(a, b, out=out))


@pytest.mark.parametrize("bad, exc, message", [
    ([[1.0]], TypeError, r"^a: must be a CUDA array .*got list"),
    (object(), TypeError, r"^a: must be a CUDA array"),
])
def test_non_arrays_are_type_errors(fake, bad, exc, message):
    with pytest.raises(exc, match=message):
        parallax.gemm(bad, fake((1, 1), slot=1))


def test_host_arrays_are_named_as_such(fake):
    class HostArray:
        __array_interface__ = {"shape": (2, 2), "typestr": "<f4", "data": (0, False), "version": 3}

    with pytest.raises(TypeError, match=r"^b: must be a CUDA array .* in host memory"):
        parallax.gemm(fake((2, 2)), HostArray())


def test_rank(fake):
    with pytest.raises(ValueError, match=r"^a: must be 2-D \(got 1-D, shape \(5,\)\)"):
        parallax.gemm(fake((5,)), fake((5, 3), slot=1))
    with pytest.raises(ValueError, match=r"^b: must be 2-D \(got 3-D"):
        parallax.gemm(fake((5, 7)), fake((2, 7, 3), slot=1))
    with pytest.raises(ValueError, match=r"^out: must be 2-D"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), out=fake((15,), slot=2))


@pytest.mark.parametrize("typestr, name", [("<f8", "float64"), ("<i4", "int32")])
def test_dtype(fake, typestr, name):
    with pytest.raises(TypeError, match=rf"^a: must be float32 for kernel 'sgemm3' \(got {name}\)"):
        parallax.gemm(fake((5, 7), typestr=typestr), fake((7, 3), typestr=typestr, slot=1), kernel="sgemm3")
    with pytest.raises(TypeError, match=rf"^b: must have the dtype of a \(float32\) \(got {name}\)"):
        parallax.gemm(fake((5, 7)), fake((7, 3), typestr=typestr, slot=1))
    with pytest.raises(TypeError, match=rf"^out: must be float32 for kernel 'cublas' \(got {name}\)"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), out=fake((5, 3), typestr=typestr, slot=2),
                      kernel="cublas")


# ---- float16 inputs: the tensor-core GEMM (bfloat16 has no __cuda_array_interface__ typestr; torch tests cover it)

def h(shape, **kw):
    return dict(shape=shape, typestr="<f2", **kw)


def test_tensor_core_kernels_come_from_the_library():
    names = parallax.tc_kernels()
    assert names[0] == "auto" and "mma" in names and "wgmma-persistent" in names and names[-1] == "cublas"
    assert parallax.gemm_kernels("bfloat16") == names
    assert "sgemm1" in parallax.gemm_kernels()


def test_float16_any_layout_combination_passes_every_cpu_check(fake):
    # Row- and column-major operands mix freely (op N / op T); out row- or column-major.
    a_row, a_col = fake((5, 7), typestr="<f2"), fake((5, 7), strides=(1, 5), typestr="<f2")
    b_row, b_col = fake((7, 3), typestr="<f2", slot=1), fake((7, 3), strides=(1, 7), typestr="<f2", slot=1)
    for a in (a_row, a_col):
        for b in (b_row, b_col):
            for out in (fake((5, 3), typestr="<f4", slot=2), fake((5, 3), strides=(1, 5), typestr="<f2", slot=2)):
                for kernel in parallax.tc_kernels():
                    reaches_the_device_check(lambda: parallax.gemm(a, b, out=out, kernel=kernel, beta=1.0))


def test_float16_kernel_names_and_options(fake):
    a, b = fake((5, 7), typestr="<f2"), fake((7, 3), typestr="<f2", slot=1)
    with pytest.raises(ValueError, match=r"^kernel: unknown tensor-core kernel 'sgemm3' for float16 inputs; "
                                         r"valid: auto, wmma, mma"):
        parallax.gemm(a, b, kernel="sgemm3")
    with pytest.raises(ValueError, match=r"^activation: must be None, 'gelu' or 'silu'"):
        parallax.gemm(a, b, activation="relu")
    with pytest.raises(ValueError, match=r"^out_dtype: must be 'float32', 'float16' or 'bfloat16'"):
        parallax.gemm(a, b, out_dtype="float64")
    with pytest.raises(TypeError, match=r"^out_dtype: is 'float16' but out is float32"):
        parallax.gemm(a, b, out=fake((5, 3), slot=2), out_dtype="float16")
    with pytest.raises(TypeError, match=r"^out: must be float32, float16 or bfloat16 \(got float64\)"):
        parallax.gemm(a, b, out=fake((5, 3), typestr="<f8", slot=2))
    with pytest.raises(ValueError, match=r"^beta: must be 0 when out is None"):
        parallax.gemm(a, b, beta=1.0)
    with pytest.raises(ValueError, match=r"^b: op\(a\) is 5x7, so op\(b\) must have 7 rows"):
        parallax.gemm(a, fake((6, 3), typestr="<f2", slot=1))
    with pytest.raises(TypeError, match=r"^bias: applies to the tensor-core GEMM"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), bias=fake((3,), slot=2))


def test_float16_bias_rules(fake):
    a, b = fake((5, 7), typestr="<f2"), fake((7, 3), typestr="<f2", slot=1)
    out = fake((5, 3), typestr="<f2", slot=2)
    reaches_the_device_check(lambda: parallax.gemm(a, b, out=out, bias=fake((3,), slot=3), activation="gelu"))
    with pytest.raises(TypeError, match=r"^bias: must be float32 \(got float16\)"):
        parallax.gemm(a, b, out=out, bias=fake((3,), typestr="<f2", slot=3))
    with pytest.raises(ValueError, match=r"^bias: must be a contiguous 1-D array of n = 3 elements"):
        parallax.gemm(a, b, out=out, bias=fake((4,), slot=3))
    with pytest.raises(ValueError, match=r"^bias: needs a row-major out"):
        parallax.gemm(a, b, out=fake((5, 3), strides=(1, 5), typestr="<f2", slot=2), bias=fake((3,), slot=3))


def test_float16_strides_without_a_row_or_column_major_reading_are_rejected(fake):
    with pytest.raises(ValueError, match=r"^a: must have unit stride along one dimension"):
        parallax.gemm(fake((5, 7), strides=(14, 2), typestr="<f2"), fake((7, 3), typestr="<f2", slot=1))
    with pytest.raises(ValueError, match=r"^out: overlaps a"):
        parallax.gemm(fake((5, 7), typestr="<f2"), fake((7, 3), typestr="<f2", slot=1),
                      out=fake((5, 3), typestr="<f2"))


def test_kernel_name(fake):
    with pytest.raises(ValueError, match=r"^kernel: unknown kernel 'sgemm9'; valid: auto, sgemm1, .*, cublas"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), kernel="sgemm9")
    with pytest.raises(TypeError, match=r"^kernel: must be a str"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), kernel=3)


def test_inner_dimensions_must_agree(fake):
    with pytest.raises(ValueError, match=re.escape("b: op(a) is 5x7, so op(b) must have 7 rows (got op(b) 6x3")):
        parallax.gemm(fake((5, 7)), fake((6, 3), slot=1))
    with pytest.raises(ValueError, match=re.escape("b: op(a) is 7x5, so op(b) must have 5 rows (got op(b) 7x3")):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1), trans_a=True)


def test_empty_dimensions_are_rejected(fake):
    with pytest.raises(ValueError, match=r"^a: m \(rows of op\(a\)\) is 0; every dimension must be >= 1"):
        parallax.gemm(fake((0, 7)), fake((7, 3), slot=1))
    with pytest.raises(ValueError, match=r"^b: n \(columns of op\(b\)\) is 0"):
        parallax.gemm(fake((5, 7)), fake((7, 0), slot=1))
    with pytest.raises(ValueError, match=r"^a: k \(columns of op\(a\)\) is 0"):
        parallax.gemm(fake((5, 0)), fake((0, 3), slot=1))


@pytest.mark.parametrize("strides", [(14, 2), (2, 14), (3, 1), (-7, 1), (0, 1)],
                         ids=["no-unit-stride", "no-unit-stride-T", "ld-too-small", "negative", "broadcast"])
def test_strides_without_a_row_or_column_major_reading_are_rejected(fake, strides):
    with pytest.raises(ValueError, match=r"^a: must have unit stride along one dimension and a leading dimension "
                                         r">= the other dimension's length"):
        parallax.gemm(fake((5, 7), strides=strides), fake((7, 3), slot=1))


def test_byte_strides_must_be_whole_elements(fake):
    a = fake((5, 7))
    a.__cuda_array_interface__["strides"] = (30, 4)
    with pytest.raises(ValueError, match=r"^a: strides \(30, 4\) \(bytes\) must be multiples of the element size 4"):
        parallax.gemm(a, fake((7, 3), slot=1))


def test_mixed_layouts_have_no_nn_form(fake):
    a, b = fake((5, 7)), fake((3, 7), slot=1)  # op(b) = b.T is column-major, op(a) row-major
    with pytest.raises(ValueError, match=r"^b: op\(b\) is column-major but op\(a\) is row-major; the FP32 kernels "
                                         r"compute row-major C = A \* B only"):
        parallax.gemm(a, b, trans_b=True, out=fake((5, 3), slot=2))


def test_out_layout_must_match_the_operands(fake):
    a, b = fake((5, 7)), fake((7, 3), slot=1)
    with pytest.raises(ValueError, match=r"^out: must be row-major \(strides \(ld, 1\)\) like op\(a\) and op\(b\)"):
        parallax.gemm(a, b, out=fake((5, 3), strides=(1, 5), slot=2))
    with pytest.raises(ValueError, match=r"^out: must be column-major"):
        parallax.gemm(fake((7, 5)), fake((3, 7), slot=1), trans_a=True, trans_b=True, out=fake((5, 3), slot=2))
    with pytest.raises(ValueError, match=r"^out: must have unit stride"):
        parallax.gemm(a, b, out=fake((5, 3), strides=(6, 2), slot=2))


def test_out_shape_and_writability(fake):
    a, b = fake((5, 7)), fake((7, 3), slot=1)
    with pytest.raises(ValueError, match=re.escape("out: must have shape (5, 3) = (rows of op(a), columns of op(b)) "
                                                   "(got (3, 5))")):
        parallax.gemm(a, b, out=fake((3, 5), slot=2))
    with pytest.raises(ValueError, match=r"^out: is read-only"):
        parallax.gemm(a, b, out=fake((5, 3), slot=2, readonly=True))


def test_out_must_not_overlap_the_inputs(fake):
    a, b = fake((5, 7)), fake((7, 3), slot=1)
    with pytest.raises(ValueError, match=r"^out: overlaps a; the result is written in place"):
        parallax.gemm(a, b, out=fake((5, 3)))  # same slot as a
    with pytest.raises(ValueError, match=r"^out: overlaps b"):
        parallax.gemm(a, b, out=fake((5, 3), slot=1, offset_bytes=8))
    with pytest.raises(ValueError, match=r"^out: overlaps a"):  # the last byte of a is the first of out
        parallax.gemm(a, b, out=fake((5, 3), offset_bytes=(5 * 7 - 1) * 4))
    reaches_the_device_check(lambda: parallax.gemm(a, b, out=fake((5, 3), offset_bytes=5 * 7 * 4)))  # adjacent


def test_flags_and_scalars(fake):
    a, b, out = fake((5, 7)), fake((7, 3), slot=1), fake((5, 3), slot=2)
    with pytest.raises(TypeError, match=r"^trans_a: must be a bool \(got 'yes'\)"):
        parallax.gemm(a, b, trans_a="yes", out=out)
    with pytest.raises(TypeError, match=r"^alpha: must be a real number \(got str\)"):
        parallax.gemm(a, b, alpha="2", out=out)
    with pytest.raises(TypeError, match=r"^beta: must be a real number \(got complex\)"):
        parallax.gemm(a, b, beta=1j, out=out)
    with pytest.raises(ValueError, match=r"^beta: must be 0 when out is None"):
        parallax.gemm(a, b, beta=1.0)


def test_cuda_array_interface_must_be_well_formed(fake):
    b = fake((7, 3), slot=1)
    for mutate, exc, message in [
        (lambda d: d.pop("typestr"), TypeError, r"^a: __cuda_array_interface__ lacks the required key 'typestr'"),
        (lambda d: d.update(mask=object()), ValueError, r"^a: masked arrays are not supported"),
        (lambda d: d.update(typestr=">f4"), TypeError, r"^a: big-endian data"),
        (lambda d: d.update(strides=(4,)), ValueError, r"^a: __cuda_array_interface__ has 2 dimensions but 1 strides"),
        (lambda d: d.update(data=7), TypeError, r"^a: __cuda_array_interface__ 'data' must be"),
    ]:
        a = fake((5, 7))
        mutate(a.__cuda_array_interface__)
        with pytest.raises(exc, match=message):
            parallax.gemm(a, b)


def test_a_producer_that_refuses_to_export_is_reported():
    class Refuses:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("cannot export a tensor that requires grad")

    with pytest.raises(TypeError, match=r"^a: reading __cuda_array_interface__ failed: cannot export"):
        parallax.gemm(Refuses(), Refuses())


def test_allocation_needs_torch_or_cupy(fake):
    import importlib.util
    if importlib.util.find_spec("torch") or importlib.util.find_spec("cupy"):
        pytest.skip("torch or cupy is installed: gemm can allocate out itself")
    with pytest.raises(TypeError, match=r"^out: is required when neither torch nor cupy is installed"):
        parallax.gemm(fake((5, 7)), fake((7, 3), slot=1))


def test_torch_cpu_tensors_are_rejected_by_device():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    a = torch.ones(5, 7)
    with pytest.raises(ValueError, match=r"^a: must be on a CUDA device \(got a tensor on cpu\)"):
        parallax.gemm(a, a.t())
