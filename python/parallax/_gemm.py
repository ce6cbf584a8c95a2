"""parallax.gemm: C = alpha * op(a) @ op(b) + beta * C on CUDA arrays, through the C ABI.

Layouts the FP32 kernels accept (the ladder levels and the cuBLAS reference compute row-major C = A * B,
"NN", and nothing else):

* Every 2-D operand must have unit stride along one dimension: row-major, strides (ld, 1), with
  ld >= number of columns; or column-major, strides (1, ld), with ld >= number of rows. Any leading
  dimension works, so slices like ``big[:, :k]`` need no copy.
* op(x) is x, or x transposed when trans_x=True. A transpose is free: it only swaps the strides, so a
  contiguous x with trans_x=True is a column-major op(x), exactly like passing ``x.t()``.
* op(a), op(b) and C all row-major: one kernel call, C = A * B.
* op(a), op(b) and C all column-major: a column-major matrix is the row-major storage of its transpose, so
  C^T = op(b)^T * op(a)^T is again an all-row-major product, computed with a and b swapped and m, n swapped.
  When out is None the result is then allocated column-major (a transposed view of an n x m buffer).
* Mixed (one of op(a), op(b) row-major and the other column-major, e.g. ``gemm(x, w, trans_b=True)`` with
  both contiguous) has no NN form: ValueError. Copy one operand into the other's layout first.
"""

from __future__ import annotations

import contextlib
import numbers
import sys

from . import _lib
from ._arrays import (Operand, as_operand, col_major_ld, describe_strides, overlaps, require_2d, row_major_ld)
from ._errors import InvalidArgumentError

# What kernel="auto" runs for float32 until the production (tensor-core) GEMM exists: the top of the ladder.
AUTO_FLOAT32 = "sgemm8"

_kernel_table: dict | None = None


def _kernels() -> dict:
    """name -> ("ladder", level) | ("cublas", None), built once from the library (the one source of names)."""
    global _kernel_table
    if _kernel_table is None:
        table = {}
        for level in range(1, _lib.get_int("parallax_sgemm_level_count") + 1):
            table[_lib.get_str("parallax_sgemm_level_name", level)] = ("ladder", level)
        table["cublas"] = ("cublas", None)
        _kernel_table = table
    return _kernel_table


def gemm_kernels() -> list[str]:
    """Valid values of gemm(kernel=...): "auto", the ladder levels "sgemm1".."sgemm8", "cublas"."""
    return ["auto", *_kernels()]


def _resolve_kernel(kernel, dtype: str) -> tuple[str, str, int | None]:
    if not isinstance(kernel, str):
        raise TypeError(f"kernel: must be a str, one of {gemm_kernels()} (got {type(kernel).__name__})")
    if kernel != "auto" and kernel not in _kernels():
        raise ValueError(f"kernel: unknown kernel {kernel!r}; valid: {', '.join(gemm_kernels())}")
    if kernel == "auto":
        if dtype != "float32":
            raise TypeError(f"a: kernel 'auto' supports float32 only for now (got {dtype}); the float16/bfloat16 "
                            "tensor-core GEMM is not built yet")
        kernel = AUTO_FLOAT32
    kind, level = _kernels()[kernel]
    return kernel, kind, level


def _import_torch():
    """torch if it can be imported (it is then used for the stream and for allocating results), else None."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    try:
        import torch  # deferred: importing torch takes seconds, and it is optional
    except ImportError:
        return None
    return torch


def _is_cupy(op: Operand) -> bool:
    return type(op.obj).__module__.split(".")[0] == "cupy"


def _resolve_devices(ops: list[Operand]) -> int:
    """The one device all operands live on. torch and CuPy say; for other arrays the library is asked
    (cudaPointerGetAttributes), which also rejects host memory by name. Needs a GPU: runs after every
    check that does not."""
    first = None
    for op in ops:
        device = op.device
        if device is None:
            try:
                device = _lib.get_int("parallax_pointer_device", op.ptr)
            except InvalidArgumentError as e:  # host memory, or not a CUDA allocation
                raise ValueError(f"{op.name}: must be CUDA device memory ({e.message})") from None
        if first is None:
            first = (op.name, device)
        elif device != first[1]:
            raise ValueError(f"{op.name}: is on cuda:{device} but {first[0]} is on cuda:{first[1]}; all operands "
                             "must be on the same device")
    return first[1]


@contextlib.contextmanager
def _on_device(device: int, torch):
    """Makes `device` current for the call, and restores the previous device after it. Done both in the
    library's CUDA runtime and, when present, torch's (each process-wide runtime copy keeps its own notion
    of the current device; torch's matters for its stream and allocator)."""
    previous = _lib.get_int("parallax_get_device")
    if previous != device:
        _lib.call("parallax_set_device", device)
    try:
        if torch is not None:
            with torch.cuda.device(device):
                yield
        else:
            yield
    finally:
        if previous != device:
            _lib.call("parallax_set_device", previous)


def _current_stream(device: int, torch, ops: list[Operand]) -> int:
    """torch's current stream when torch is importable (so `with torch.cuda.stream(s):` works), else CuPy's
    current stream for CuPy operands, else the legacy default stream (0)."""
    if torch is not None:
        return torch.cuda.current_stream(device).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None and any(_is_cupy(op) for op in ops):
        return cupy.cuda.get_current_stream().ptr
    return 0


def gemm(a, b, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, out=None, kernel="auto"):
    """C = alpha * op(a) @ op(b) + beta * C, with op(x) = x.T when trans_x else x.

    a, b: 2-D CUDA arrays (torch tensors or objects exposing __cuda_array_interface__), float32 for the
    FP32 kernels, unit stride along one dimension with any leading dimension (see the module docstring for
    the layouts that can be combined). out: an m x n float32 CUDA array to write (and, when beta != 0, to
    read as C); when None a new array is allocated (torch if importable, else CuPy) and beta must be 0.
    kernel: "auto", "sgemm1".."sgemm8" (the FP32 ladder) or "cublas" (cublasSgemm, strict FP32).

    Runs asynchronously on torch's current stream (see _current_stream). Returns out, or the new array.
    Argument errors raise TypeError / ValueError before anything runs; a library failure raises
    parallax.Error (UnimplementedError for a ladder level that is not written yet).
    """
    a_op = as_operand(a, "a")
    b_op = as_operand(b, "b")
    require_2d(a_op)
    require_2d(b_op)
    if a_op.dtype != b_op.dtype:
        raise TypeError(f"b: must have the dtype of a ({a_op.dtype}) (got {b_op.dtype})")
    name, kind, level = _resolve_kernel(kernel, a_op.dtype)
    for op in (a_op, b_op):
        if op.dtype != "float32":
            raise TypeError(f"{op.name}: must be float32 for kernel '{name}' (got {op.dtype})")
    for flag_name, flag in (("trans_a", trans_a), ("trans_b", trans_b)):
        if flag not in (True, False):
            raise TypeError(f"{flag_name}: must be a bool (got {flag!r})")
    for scalar_name, scalar in (("alpha", alpha), ("beta", beta)):
        if not isinstance(scalar, numbers.Real):
            raise TypeError(f"{scalar_name}: must be a real number (got {type(scalar).__name__})")
    alpha, beta = float(alpha), float(beta)

    # op(x): a transpose swaps shape and strides, nothing else.
    def op_view(op: Operand, trans: bool):
        (rows, cols), (rs, cs) = op.shape, op.strides
        return ((cols, rows), (cs, rs)) if trans else ((rows, cols), (rs, cs))

    (m, ka), a_strides = op_view(a_op, bool(trans_a))
    (kb, n), b_strides = op_view(b_op, bool(trans_b))
    if ka != kb:
        raise ValueError(f"b: op(a) is {m}x{ka}, so op(b) must have {ka} rows (got op(b) {kb}x{n}; "
                         f"trans_a={bool(trans_a)}, trans_b={bool(trans_b)})")
    k = ka
    for op, what, size in ((a_op, "m (rows of op(a))", m), (b_op, "n (columns of op(b))", n),
                           (a_op, "k (columns of op(a))", k)):
        if size == 0:
            raise ValueError(f"{op.name}: {what} is 0; every dimension must be >= 1 (got shape {op.shape})")

    a_row, a_col = row_major_ld(m, k, *a_strides), col_major_ld(m, k, *a_strides)
    b_row, b_col = row_major_ld(k, n, *b_strides), col_major_ld(k, n, *b_strides)
    rule = ("must have unit stride along one dimension and a leading dimension >= the other dimension's "
            "length: row-major (strides (ld, 1)) or column-major (strides (1, ld))")
    for op, row, col in ((a_op, a_row, a_col), (b_op, b_row, b_col)):
        if row is None and col is None:
            raise ValueError(f"{op.name}: {rule} (got {describe_strides(op)}); copy it with .contiguous()")

    out_op = None
    c_row = c_col = None
    if out is not None:
        out_op = as_operand(out, "out")
        require_2d(out_op)
        if out_op.dtype != "float32":
            raise TypeError(f"out: must be float32 for kernel '{name}' (got {out_op.dtype})")
        if out_op.shape != (m, n):
            raise ValueError(f"out: must have shape ({m}, {n}) = (rows of op(a), columns of op(b)) "
                             f"(got {out_op.shape})")
        if out_op.readonly:
            raise ValueError("out: is read-only (its __cuda_array_interface__ says so)")
        c_row, c_col = row_major_ld(m, n, *out_op.strides), col_major_ld(m, n, *out_op.strides)
        if c_row is None and c_col is None:
            raise ValueError(f"out: {rule} (got {describe_strides(out_op)})")
        for op in (a_op, b_op):
            if overlaps(out_op, op):
                raise ValueError(f"out: overlaps {op.name}; the result is written in place, so out must not share "
                                 f"memory with a or b")
    elif beta != 0.0:
        raise ValueError(f"beta: must be 0 when out is None, there is no C to accumulate into (got beta={beta}); "
                         "pass out=C to compute alpha * op(a) @ op(b) + beta * C")

    # Pick the NN form: all row-major (direct), or all column-major (C^T = op(b)^T op(a)^T).
    direct = a_row is not None and b_row is not None and (out_op is None or c_row is not None)
    swapped = a_col is not None and b_col is not None and (out_op is None or c_col is not None)
    if not direct and not swapped:
        both_row = a_row is not None and b_row is not None
        both_col = a_col is not None and b_col is not None
        if not (both_row or both_col):
            a_is = "row-major" if a_row is not None else "column-major"
            b_is = "row-major" if b_row is not None else "column-major"
            raise ValueError(
                f"b: op(b) is {b_is} but op(a) is {a_is}; the FP32 kernels compute row-major C = A * B only, "
                "so op(a), op(b) and out must be all row-major (strides (ld, 1)) or all column-major "
                "(strides (1, ld), computed as C^T = B^T * A^T). Copy one operand into the other's layout "
                "first (x.contiguous() is row-major; x.t().contiguous().t() is column-major)")
        need = "row-major (strides (ld, 1))" if both_row else "column-major (strides (1, ld))"
        raise ValueError(f"out: must be {need} like op(a) and op(b) (got {describe_strides(out_op)})")

    torch = _import_torch()
    if out_op is None and torch is None and sys.modules.get("cupy") is None:
        raise TypeError("out: is required when neither torch nor cupy is installed (parallax allocates results "
                        "with one of them)")

    # The only checks that need a GPU: where the operands live.
    device = _resolve_devices([a_op, b_op] + ([out_op] if out_op is not None else []))

    with _on_device(device, torch):
        stream = _current_stream(device, torch, [a_op, b_op])
        if out_op is None:
            # Row-major m x n, or (swapped form) column-major: the transposed view of a row-major n x m buffer.
            shape = (m, n) if direct else (n, m)
            if torch is not None:
                buffer = torch.empty(shape, dtype=torch.float32, device=f"cuda:{device}")
            else:
                cupy = sys.modules["cupy"]
                with cupy.cuda.Device(device):
                    buffer = cupy.empty(shape, dtype="float32")
            out = buffer if direct else buffer.T
            out_ptr = int(buffer.data_ptr()) if torch is not None else int(buffer.data.ptr)
            ldc = n if direct else m
        else:
            out_ptr = out_op.ptr
            ldc = c_row if direct else c_col

        if direct:
            args = (m, n, k, alpha, a_op.ptr, a_row, b_op.ptr, b_row, beta, out_ptr, ldc, stream)
        else:
            args = (n, m, k, alpha, b_op.ptr, b_col, a_op.ptr, a_col, beta, out_ptr, ldc, stream)
        if kind == "ladder":
            _lib.call("parallax_sgemm", level, *args)
        else:
            _lib.call("parallax_sgemm_cublas", *args)
    return out
