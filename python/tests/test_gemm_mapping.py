"""The mapping from parallax.gemm's arguments to the row-major NN C call, checked without a GPU.

The library's sgemm entry points are replaced by a Python emulation of their contract (row-major
C = alpha * A * B + beta * C with leading dimensions, beta == 0 never reading C) working on a fake "device
memory" (a float array at a fake address). Every layout gemm accepts (leading dimensions, offsets, trans
flags, column-major views, the C^T = B^T A^T form) is then compared with a float64 reference computed from
the logical matrices, and the memory around each output is checked untouched. This pins down the part
of the binding that the GPU tests can only see end to end."""

from __future__ import annotations

import array
import itertools
import math
import os
import random

import pytest

import parallax
from parallax import _gemm

BASE = 0x7E00_0000_0000  # fake address of memory[0]
SEED = int(os.environ["PARALLAX_TEST_SEED"])


class FakeMemory:
    def __init__(self):
        self.words = array.array("f")

    def alloc(self, count: int) -> int:
        """Address of `count` new floats (NaN-filled), with a gap so that allocations never touch."""
        ptr = BASE + 4 * len(self.words)
        self.words.extend([math.nan] * (count + 16))
        return ptr

    def index(self, ptr: int) -> int:
        assert (ptr - BASE) % 4 == 0 and ptr >= BASE
        return (ptr - BASE) // 4


class View:
    """A strided 2-D float32 matrix in FakeMemory, exposing __cuda_array_interface__."""

    def __init__(self, mem, ptr, shape, strides):
        self.mem, self.ptr, self.shape, self.strides = mem, ptr, shape, strides
        self.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", data=(ptr, False),
                                             strides=tuple(4 * s for s in strides), version=3)

    def at(self, i, j):
        return self.mem.index(self.ptr) + i * self.strides[0] + j * self.strides[1]

    def get(self, i, j):
        return self.mem.words[self.at(i, j)]

    def fill(self, rng):
        for i, j in itertools.product(range(self.shape[0]), range(self.shape[1])):
            self.mem.words[self.at(i, j)] = rng.uniform(-1, 1)

    def t(self):
        return View(self.mem, self.ptr, self.shape[::-1], self.strides[::-1])


def matrix(mem, rows, cols, layout, pad, rng, offset=0):
    """rows x cols view: "row" = strides (cols + pad, 1), "col" = strides (1, rows + pad)."""
    ld = (cols if layout == "row" else rows) + pad
    n_major = rows if layout == "row" else cols
    ptr = mem.alloc(n_major * ld + offset) + 4 * offset
    v = View(mem, ptr, (rows, cols), (ld, 1) if layout == "row" else (1, ld))
    v.fill(rng)
    return v


@pytest.fixture
def emulated(monkeypatch):
    """Routes parallax_sgemm / parallax_sgemm_cublas to an emulation; returns the fake memory and a call log."""
    mem, log = FakeMemory(), []
    real = _gemm._lib

    class Stub:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def get_int(name, *args):
            if name == "parallax_pointer_device":
                return 0
            if name == "parallax_get_device":
                return 0
            return real.get_int(name, *args)

        @staticmethod
        def call(name, *args):
            if name == "parallax_set_device":
                return
            if name == "parallax_sgemm":
                args = args[1:]
            elif name != "parallax_sgemm_cublas":
                return real.call(name, *args)
            m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream = args
            assert lda >= k and ldb >= n and ldc >= n, (lda, ldb, ldc)  # the library's own rules
            log.append(dict(m=m, n=n, k=k, lda=lda, ldb=ldb, ldc=ldc))
            w, ia, ib, ic = mem.words, mem.index(a), mem.index(b), mem.index(c)
            for i in range(m):
                for j in range(n):
                    acc = math.fsum(w[ia + i * lda + p] * w[ib + p * ldb + j] for p in range(k))
                    old = w[ic + i * ldc + j]
                    w[ic + i * ldc + j] = alpha * acc + (beta * old if beta != 0 else 0.0)

    monkeypatch.setattr(_gemm, "_lib", Stub())
    monkeypatch.setattr(_gemm, "_import_torch", lambda: None)
    return mem, log


CASES = list(itertools.product(["row", "col"], [False, True], [False, True]))


@pytest.mark.parametrize("storage, trans_a, trans_b", CASES,
                         ids=[f"{s}-ta{int(ta)}-tb{int(tb)}" for s, ta, tb in CASES])
def test_every_accepted_layout_computes_op_a_times_op_b(emulated, storage, trans_a, trans_b):
    mem, log = emulated
    rng = random.Random(SEED)
    for m, n, k in [(1, 1, 1), (3, 5, 4), (6, 1, 3), (1, 4, 7), (5, 6, 2)]:
        # Store a and b so that op(a) and op(b) share the layout `storage` (the combinations with an NN form).
        op_layout = storage

        def stored(rows, cols, trans):
            # op(x) is rows x cols in op_layout; x itself is its transpose when trans (layout flips too).
            if trans:
                return matrix(mem, cols, rows, "col" if op_layout == "row" else "row", pad=2, rng=rng, offset=1)
            return matrix(mem, rows, cols, op_layout, pad=3, rng=rng, offset=2)

        a, b = stored(m, k, trans_a), stored(k, n, trans_b)
        out = matrix(mem, m, n, op_layout, pad=1, rng=rng)
        before = list(mem.words)
        c0 = [[out.get(i, j) for j in range(n)] for i in range(m)]
        alpha, beta = 1.5, -0.25
        result = parallax.gemm(a, b, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, out=out)
        assert result is out
        op_a = a.t() if trans_a else a
        op_b = b.t() if trans_b else b
        for i, j in itertools.product(range(m), range(n)):
            want = alpha * math.fsum(op_a.get(i, p) * op_b.get(p, j) for p in range(k)) + beta * c0[i][j]
            assert out.get(i, j) == pytest.approx(want, rel=1e-5, abs=1e-6), (m, n, k, i, j)
        # Nothing outside out was written.
        written = {out.at(i, j) for i, j in itertools.product(range(m), range(n))}
        changed = {i for i, (x, y) in enumerate(zip(before, mem.words)) if not (x == y or (x != x and y != y))}
        assert changed <= written
        # All column-major is the swapped call (m and n exchanged) unless a vector makes both readings valid.
        if storage == "col" and m > 1 and n > 1:
            assert (log[-1]["m"], log[-1]["n"]) == (n, m)


def test_beta_zero_never_reads_out(emulated):
    mem, _ = emulated
    rng = random.Random(SEED)
    a, b = matrix(mem, 3, 4, "row", 0, rng), matrix(mem, 4, 2, "row", 0, rng)
    out = matrix(mem, 3, 2, "row", 0, rng)
    for i, j in itertools.product(range(3), range(2)):
        mem.words[out.at(i, j)] = math.nan
    parallax.gemm(a, b, out=out)
    assert all(not math.isnan(out.get(i, j)) for i, j in itertools.product(range(3), range(2)))
