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

The tensor-core GEMM (float16 / bfloat16 inputs; kernels "auto", "wmma", "mma", "wgmma", "wgmma-ws",
"wgmma-persistent", "cublas") takes op(A), op(B) in {N, T} natively, so every combination of row- and
column-major operands runs without a copy: a column-major op(x) is the row-major storage of x^T, i.e. op T.
Its output is row-major (allocated so when out is None); a column-major `out` is computed as
C^T = op(b)^T op(a)^T. Output dtype: out's, or the inputs' when out is None (out_dtype= overrides: float32,
float16 or bfloat16). It also fuses a per-column float32 bias and a GELU (tanh) / SiLU activation:
D = act(alpha * op(a) op(b) + beta * C + bias).
"""

from __future__ import annotations

import contextlib
import ctypes
import numbers
import sys

from . import _lib
from ._arrays import (Operand, as_operand, col_major_ld, describe_strides, overlaps, require_2d, row_major_ld)
from ._errors import InvalidArgumentError

# What kernel="auto" runs for float32 until the production (tensor-core) GEMM exists: the top of the ladder.
AUTO_FLOAT32 = "sgemm8"

_kernel_table: dict | None = None


_tc_kernel_list: list | None = None

TC_DTYPES = ("float16", "bfloat16")
_DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}  # parallax_dtype_t
_EPILOGUES = {None: 0, "none": 0, "gelu": 1, "silu": 2}   # parallax_epilogue_t


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


def tc_kernels() -> list[str]:
    """Valid gemm(kernel=...) values for float16 / bfloat16 inputs, from the library."""
    global _tc_kernel_list
    if _tc_kernel_list is None:
        _tc_kernel_list = [_lib.get_str("parallax_gemm_kernel_name", i)
                           for i in range(_lib.get_int("parallax_gemm_kernel_count"))]
    return _tc_kernel_list


def gemm_kernels(dtype: str = "float32") -> list[str]:
    """Valid values of gemm(kernel=...): for float32 "auto", the ladder levels "sgemm1".."sgemm8", "cublas";
    for float16 / bfloat16 the tensor-core kernels (tc_kernels())."""
    if dtype in TC_DTYPES:
        return list(tc_kernels())
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


def gemm(a, b, *, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, out=None, kernel="auto", bias=None,
         activation=None, out_dtype=None):
    """C = alpha * op(a) @ op(b) + beta * C, with op(x) = x.T when trans_x else x.

    a, b: 2-D CUDA arrays (torch tensors or objects exposing __cuda_array_interface__), float32 for the
    FP32 kernels, unit stride along one dimension with any leading dimension (see the module docstring for
    the layouts that can be combined). out: an m x n float32 CUDA array to write (and, when beta != 0, to
    read as C); when None a new array is allocated (torch if importable, else CuPy) and beta must be 0.
    kernel: "auto", "sgemm1".."sgemm8" (the FP32 ladder) or "cublas" (cublasSgemm, strict FP32).
    float16 / bfloat16 inputs run the tensor-core GEMM (see the module docstring): kernel one of tc_kernels(),
    bias (float32, n elements, contiguous), activation None / "gelu" / "silu", out_dtype.

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
    if a_op.dtype in TC_DTYPES:
        return _gemm_tc(a_op, b_op, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, out=out,
                        kernel=kernel, bias=bias, activation=activation, out_dtype=out_dtype)
    for arg_name, value in (("bias", bias), ("activation", activation), ("out_dtype", out_dtype)):
        if value is not None:
            raise TypeError(f"{arg_name}: applies to the tensor-core GEMM (float16 / bfloat16 inputs) only "
                            f"(got {a_op.dtype} inputs)")
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


def _operand_layout(op: Operand, trans: bool, name: str) -> tuple[int, int, int, int]:
    """(rows, cols, ld, op code) of op(x) for the tensor-core GEMM: a row-major op(x) is stored as is
    (op N); a column-major op(x) is the row-major storage of its transpose (op T)."""
    (rows, cols), (rs, cs) = op.shape, op.strides
    if trans:
        rows, cols, rs, cs = cols, rows, cs, rs
    row = row_major_ld(rows, cols, rs, cs)
    if row is not None:
        return rows, cols, row, 0
    col = col_major_ld(rows, cols, rs, cs)
    if col is not None:
        return rows, cols, col, 1
    raise ValueError(f"{name}: must have unit stride along one dimension and a leading dimension >= the other "
                     f"dimension's length (got {describe_strides(op)}); copy it with .contiguous()")


def _gemm_tc(a_op: Operand, b_op: Operand, *, trans_a, trans_b, alpha, beta, out, kernel, bias, activation,
             out_dtype):
    valid = tc_kernels()
    if not isinstance(kernel, str):
        raise TypeError(f"kernel: must be a str, one of {valid} (got {type(kernel).__name__})")
    if kernel not in valid:
        raise ValueError(f"kernel: unknown tensor-core kernel {kernel!r} for {a_op.dtype} inputs; valid: "
                         f"{', '.join(valid)}")
    for flag_name, flag in (("trans_a", trans_a), ("trans_b", trans_b)):
        if flag not in (True, False):
            raise TypeError(f"{flag_name}: must be a bool (got {flag!r})")
    for scalar_name, scalar in (("alpha", alpha), ("beta", beta)):
        if not isinstance(scalar, numbers.Real):
            raise TypeError(f"{scalar_name}: must be a real number (got {type(scalar).__name__})")
    alpha, beta = float(alpha), float(beta)
    if activation not in _EPILOGUES:
        raise ValueError(f"activation: must be None, 'gelu' or 'silu' (got {activation!r})")

    m, ka, lda, op_a = _operand_layout(a_op, bool(trans_a), "a")
    kb, n, ldb, op_b = _operand_layout(b_op, bool(trans_b), "b")
    if ka != kb:
        raise ValueError(f"b: op(a) is {m}x{ka}, so op(b) must have {ka} rows (got op(b) {kb}x{n}; "
                         f"trans_a={bool(trans_a)}, trans_b={bool(trans_b)})")
    k = ka
    for what, size in (("m (rows of op(a))", m), ("n (columns of op(b))", n), ("k (columns of op(a))", k)):
        if size == 0:
            raise ValueError(f"a: {what} is 0; every dimension must be >= 1")

    out_op = None
    c_transposed = False
    if out is not None:
        out_op = as_operand(out, "out")
        require_2d(out_op)
        if out_op.dtype not in _DTYPE_CODES:
            raise TypeError(f"out: must be float32, float16 or bfloat16 (got {out_op.dtype})")
        if out_dtype is not None and out_dtype != out_op.dtype:
            raise TypeError(f"out_dtype: is {out_dtype!r} but out is {out_op.dtype}; give one of them")
        if out_op.shape != (m, n):
            raise ValueError(f"out: must have shape ({m}, {n}) = (rows of op(a), columns of op(b)) "
                             f"(got {out_op.shape})")
        if out_op.readonly:
            raise ValueError("out: is read-only (its __cuda_array_interface__ says so)")
        ldc = row_major_ld(m, n, *out_op.strides)
        if ldc is None:
            ldc = col_major_ld(m, n, *out_op.strides)
            c_transposed = ldc is not None
        if ldc is None:
            raise ValueError(f"out: must be row-major (strides (ld, 1)) or column-major (strides (1, ld)) "
                             f"(got {describe_strides(out_op)})")
        for op in (a_op, b_op):
            if overlaps(out_op, op):
                raise ValueError(f"out: overlaps {op.name}; the result is written in place, so out must not share "
                                 "memory with a or b")
        c_dtype = out_op.dtype
    else:
        if beta != 0.0:
            raise ValueError(f"beta: must be 0 when out is None, there is no C to accumulate into (got beta={beta}); "
                             "pass out=C to compute alpha * op(a) @ op(b) + beta * C")
        c_dtype = a_op.dtype if out_dtype is None else out_dtype
        if c_dtype not in _DTYPE_CODES:
            raise ValueError(f"out_dtype: must be 'float32', 'float16' or 'bfloat16' (got {out_dtype!r})")
        ldc = n

    bias_op = None
    if bias is not None:
        bias_op = as_operand(bias, "bias")
        if bias_op.dtype != "float32":
            raise TypeError(f"bias: must be float32 (got {bias_op.dtype})")
        if bias_op.shape != (n,) or bias_op.strides[0] != 1:
            raise ValueError(f"bias: must be a contiguous 1-D array of n = {n} elements (got shape {bias_op.shape}, "
                             f"strides {bias_op.strides})")
        if c_transposed:
            raise ValueError("bias: needs a row-major out (the kernels add bias per column of a row-major C)")
        if out_op is not None and overlaps(out_op, bias_op):
            raise ValueError("out: overlaps bias")

    torch = _import_torch()
    if out_op is None and torch is None and sys.modules.get("cupy") is None:
        raise TypeError("out: is required when neither torch nor cupy is installed (parallax allocates results "
                        "with one of them)")
    device = _resolve_devices([a_op, b_op] + [x for x in (out_op, bias_op) if x is not None])

    with _on_device(device, torch):
        stream = _current_stream(device, torch, [a_op, b_op])
        if out_op is None:
            if torch is not None:
                out = torch.empty((m, n), dtype=getattr(torch, c_dtype), device=f"cuda:{device}")
                out_ptr = int(out.data_ptr())
            else:
                cupy = sys.modules["cupy"]
                if c_dtype == "bfloat16":
                    raise TypeError("out: CuPy cannot allocate bfloat16; pass out= or use torch")
                with cupy.cuda.Device(device):
                    out = cupy.empty((m, n), dtype=c_dtype)
                out_ptr = int(out.data.ptr)
        else:
            out_ptr = out_op.ptr

        args = _lib.GemmArgsStruct()
        args.struct_size = ctypes.sizeof(_lib.GemmArgsStruct)
        if not c_transposed:
            args.m, args.n, args.k = m, n, k
            args.op_a, args.op_b = op_a, op_b
            args.a, args.lda, args.b, args.ldb = a_op.ptr, lda, b_op.ptr, ldb
        else:
            # C^T (n x m, row-major with ld) = op(b)^T op(a)^T; transposing an operand flips its op code.
            args.m, args.n, args.k = n, m, k
            args.op_a, args.op_b = 1 - op_b, 1 - op_a
            args.a, args.lda, args.b, args.ldb = b_op.ptr, ldb, a_op.ptr, lda
        args.ab_dtype = _DTYPE_CODES[a_op.dtype]
        args.c_dtype = _DTYPE_CODES[c_dtype]
        args.c, args.ldc = out_ptr, ldc
        args.alpha, args.beta = alpha, beta
        args.bias = bias_op.ptr if bias_op is not None else None
        args.epilogue = _EPILOGUES[activation]
        _lib.call("parallax_gemm", ctypes.byref(args), kernel.encode(), stream)
    return out
