"""Turning user arrays into (pointer, shape, strides, dtype, device), and the layout rules of the kernels.

Accepted: torch tensors (read directly: data_ptr(), stride(), device; this also works for tensors that
require grad, whose __cuda_array_interface__ torch refuses to export) and any object exposing
``__cuda_array_interface__`` (CuPy, Numba, JAX via dlpack wrappers, ...). torch is never imported here:
an object is only recognised as a torch tensor if torch is already loaded.

Everything in this module is pure Python: it runs (and raises) before the library is called.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

_TYPESTR_KINDS = {"f": "float", "i": "int", "u": "uint", "c": "complex", "b": "bool"}


@dataclass(frozen=True)
class Operand:
    name: str  # the Python argument name, for messages
    obj: object
    ptr: int
    shape: tuple
    strides: tuple  # in elements
    dtype: str  # "float32", "float16", "bfloat16", ...
    itemsize: int
    device: int | None  # None: unknown until the library is asked (bare __cuda_array_interface__)
    readonly: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def byte_range(self) -> tuple[int, int]:
        """Half-open [first, last + 1) byte range the elements occupy (strides are >= 0 once checked)."""
        span = sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1
        return self.ptr, self.ptr + span * self.itemsize


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(obj) -> bool:
    torch = _torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def _dtype_from_typestr(typestr: str, name: str) -> tuple[str, int]:
    if not isinstance(typestr, str) or len(typestr) < 3 or not typestr[2:].isdigit():
        raise TypeError(f"{name}: __cuda_array_interface__ has a malformed typestr {typestr!r}")
    order, kind, size = typestr[0], typestr[1], int(typestr[2:])
    if order == ">" and size > 1:
        raise TypeError(f"{name}: big-endian data ({typestr!r}) is not supported")
    base = _TYPESTR_KINDS.get(kind)
    if base is None:
        return f"unsupported ({typestr})", size
    if base == "bool":
        return "bool", size
    return f"{base}{8 * size}", size


def _from_torch(t, name: str) -> Operand:
    torch = _torch()
    if t.device.type != "cuda":
        raise ValueError(f"{name}: must be on a CUDA device (got a tensor on {t.device}); move it with .cuda()")
    if t.layout != torch.strided:
        raise ValueError(f"{name}: must be a dense (strided) tensor (got layout {t.layout})")
    dtype = str(t.dtype).removeprefix("torch.")
    return Operand(name=name, obj=t, ptr=int(t.data_ptr()), shape=tuple(t.shape), strides=tuple(t.stride()),
                   dtype=dtype, itemsize=t.element_size(), device=t.device.index)


def _from_cai(obj, cai, name: str) -> Operand:
    if not isinstance(cai, dict):
        raise TypeError(f"{name}: __cuda_array_interface__ must be a dict (got {type(cai).__name__})")
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise TypeError(f"{name}: __cuda_array_interface__ lacks the required key {key!r}")
    if cai.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays are not supported (__cuda_array_interface__ 'mask' is set)")
    dtype, itemsize = _dtype_from_typestr(cai["typestr"], name)
    shape = tuple(int(n) for n in cai["shape"])
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(f"{name}: __cuda_array_interface__ 'data' must be a (pointer, read_only) pair")
    ptr, readonly = int(data[0] or 0), bool(data[1])
    byte_strides = cai.get("strides")
    if byte_strides is None:  # C-contiguous
        strides, running = [], 1
        for n in reversed(shape):
            strides.append(running)
            running *= max(n, 1)
        strides = tuple(reversed(strides))
    else:
        byte_strides = tuple(int(s) for s in byte_strides)
        if len(byte_strides) != len(shape):
            raise ValueError(f"{name}: __cuda_array_interface__ has {len(shape)} dimensions but "
                             f"{len(byte_strides)} strides")
        if any(s % itemsize for s in byte_strides):
            raise ValueError(f"{name}: strides {byte_strides} (bytes) must be multiples of the element size "
                             f"{itemsize}")
        strides = tuple(s // itemsize for s in byte_strides)
    device = None
    dev = getattr(obj, "device", None)  # CuPy arrays say which GPU they live on; others are asked later
    if dev is not None and isinstance(getattr(dev, "id", None), int):
        device = dev.id
    return Operand(name=name, obj=obj, ptr=ptr, shape=shape, strides=strides, dtype=dtype, itemsize=itemsize,
                   device=device, readonly=readonly)


def as_operand(obj, name: str) -> Operand:
    """The one entry: a torch tensor, or anything exposing __cuda_array_interface__. Raises TypeError for
    other objects (host arrays included) and ValueError for CPU tensors."""
    if is_torch_tensor(obj):
        return _from_torch(obj, name)
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    except Exception as e:  # the producer exists but refuses to export (its message says why)
        raise TypeError(f"{name}: reading __cuda_array_interface__ failed: {e}") from e
    if cai is not None:
        return _from_cai(obj, cai, name)
    what = type(obj).__module__ + "." + type(obj).__qualname__
    if what.startswith("builtins."):
        what = type(obj).__qualname__
    host = hasattr(obj, "__array_interface__") or hasattr(obj, "__array__")
    raise TypeError(
        f"{name}: must be a CUDA array (a torch.Tensor on a CUDA device, or an object exposing "
        f"__cuda_array_interface__ such as a CuPy array); got {what}" + (" in host memory" if host else ""))


def require_2d(op: Operand) -> None:
    if op.ndim != 2:
        raise ValueError(f"{op.name}: must be 2-D (got {op.ndim}-D, shape {op.shape})")


def row_major_ld(rows: int, cols: int, row_stride: int, col_stride: int) -> int | None:
    """The leading dimension if a rows x cols matrix with these element strides can be read as row-major
    (unit stride along a row, consecutive rows >= cols elements apart), else None.

    A dimension of length 1 is never stepped over, so its stride does not matter: a single row is row-major
    whatever its row stride (and a single column whatever its column stride)."""
    if cols > 1 and col_stride != 1:
        return None
    if rows == 1:
        return cols
    if row_stride < cols:  # rows would overlap, or run backwards
        return None
    return row_stride


def col_major_ld(rows: int, cols: int, row_stride: int, col_stride: int) -> int | None:
    """Leading dimension if the matrix is column-major, i.e. its transpose is row-major."""
    return row_major_ld(cols, rows, col_stride, row_stride)


def describe_strides(op: Operand) -> str:
    return f"shape {op.shape}, strides {op.strides} in elements"


def overlaps(x: Operand, y: Operand) -> bool:
    (x0, x1), (y0, y1) = x.byte_range(), y.byte_range()
    return x0 < y1 and y0 < x1
