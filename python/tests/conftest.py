"""Shared by the parallax Python tests.

* `import parallax` resolves to this source tree (python/parallax), not to some installed copy, so that CI
  tests the code it checked out. The library comes from $PARALLAX_LIB (scripts/test.sh sets it to the build).
  If it cannot be loaded the import fails and so does the run, as it should.
* Tests marked `gpu` need a CUDA GPU and torch (they compare with torch.matmul). Without either they are
  reported as SKIPPED with the reason, never as passed.
* Random inputs use a fresh seed per run, printed in the header; PARALLAX_TEST_SEED=<n> replays a run.
"""

from __future__ import annotations

import os
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import pytest  # noqa: E402

import parallax  # noqa: E402

SEED = int(os.environ.get("PARALLAX_TEST_SEED") or random.SystemRandom().randrange(2**31))
os.environ["PARALLAX_TEST_SEED"] = str(SEED)  # test modules read it from here (they parametrize with it)


def gpu_skip_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed (GPU tests compare with torch)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    if parallax.device_count() == 0:
        return "libparallax sees no CUDA device"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and torch; skipped with the reason otherwise")


def pytest_report_header(config):
    reason = gpu_skip_reason()
    return [f"parallax library: {parallax.library_path} (version {parallax.version()}, git {parallax.git_sha()})",
            f"parallax GPU tests: {'run' if reason is None else 'skipped: ' + reason}",
            f"parallax test seed: {SEED} (replay with PARALLAX_TEST_SEED={SEED})"]


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class FakeCudaArray:
    """Exposes a __cuda_array_interface__ dict and nothing else: lets the CPU tests drive every argument
    check without a GPU, torch or CuPy. The pointer is fake; the binding must reject the arguments (or
    stop at "no device") before any kernel could touch it."""

    def __init__(self, shape, *, typestr="<f4", strides=None, ptr=0x7F00_0000_0000, readonly=False, **extra):
        itemsize = int(typestr[2:])
        self.__cuda_array_interface__ = dict(
            shape=tuple(shape), typestr=typestr, data=(ptr, readonly),
            strides=None if strides is None else tuple(s * itemsize for s in strides), version=3, **extra)


@pytest.fixture
def fake():
    """fake(shape, strides_in_elements=None, slot=0, offset_bytes=0, **kw): a FakeCudaArray; arrays in distinct
    slots never overlap."""

    def make(shape, strides=None, slot=0, offset_bytes=0, **kw):
        return FakeCudaArray(shape, strides=strides, ptr=0x7F00_0000_0000 + slot * (1 << 36) + offset_bytes, **kw)

    return make
