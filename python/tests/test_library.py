"""The library loads, reports itself, and its C-side errors become parallax.Error. Runs without a GPU."""

from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

import parallax
from parallax import _lib

PACKAGE_DIR = pathlib.Path(parallax.__file__).resolve().parent


def test_library_loads_and_reports_itself():
    assert pathlib.Path(parallax.library_path).is_file()
    assert parallax.version() == parallax.__version__  # package and library are versioned together
    assert parallax.git_sha()
    assert _lib.lib.parallax_abi_version() == _lib.ABI_VERSION


def test_device_count_works_without_a_gpu():
    count = parallax.device_count()
    assert isinstance(count, int) and count >= 0


def test_kernel_names_come_from_the_library():
    names = parallax.gemm_kernels()
    assert names == ["auto"] + [f"sgemm{i}" for i in range(1, 9)] + ["cublas"]


def test_device_info_argument_checks():
    with pytest.raises(ValueError, match=r"^device: must be >= 0"):
        parallax.device_info(-1)
    with pytest.raises(TypeError, match=r"^device: must be an int"):
        parallax.device_info("0")
    with pytest.raises(TypeError, match=r"^device: must be an int"):
        parallax.device_info(True)


def test_device_info_without_a_gpu_is_no_device_error():
    """Also proves the ctypes mirror of parallax_device_info_t has the C size: a mismatch would be reported
    as INVALID_ARGUMENT naming 'info->struct_size' before the library looks for a GPU."""
    if parallax.device_count() > 0:
        pytest.skip("checks the no-GPU path; this machine has a GPU")
    with pytest.raises(parallax.NoDeviceError, match="no CUDA device visible") as info:
        parallax.device_info()
    assert info.value.status == "PARALLAX_ERROR_NO_DEVICE"


def test_struct_mirror_is_checked_by_the_library():
    raw = _lib.DeviceInfoStruct()
    raw.struct_size = ctypes.sizeof(raw) + 8  # what a drifted mirror would send
    with pytest.raises(parallax.InvalidArgumentError, match=r"'info->struct_size'"):
        _lib.call("parallax_device_info", 0, ctypes.byref(raw))


def test_exception_classes_also_derive_from_builtins():
    assert issubclass(parallax.InvalidArgumentError, parallax.Error)
    assert issubclass(parallax.InvalidArgumentError, ValueError)
    assert issubclass(parallax.UnimplementedError, NotImplementedError)
    assert issubclass(parallax.Error, RuntimeError)


def test_a_c_status_becomes_parallax_error_with_the_library_message():
    # Calls the C ABI directly with arguments the Python layer would have caught: the library's own check.
    with pytest.raises(parallax.InvalidArgumentError) as info:
        _lib.call("parallax_sgemm", 0, 4, 4, 4, 1.0, 1 << 40, 4, 2 << 40, 4, 0.0, 3 << 40, 4, None)
    e = info.value
    assert str(e) == e.message
    assert e.message.startswith("parallax_sgemm: invalid argument 'level': must be a ladder level 1..8")
    assert e.status == "PARALLAX_ERROR_INVALID_ARGUMENT" and e.code == 1
    with pytest.raises(parallax.InvalidArgumentError, match=r"parallax_sgemm_cublas: invalid argument 'lda'"):
        _lib.call("parallax_sgemm_cublas", 4, 4, 4, 1.0, 1 << 40, 3, 2 << 40, 4, 0.0, 3 << 40, 4, None)
    with pytest.raises(parallax.InvalidArgumentError, match=r"invalid argument 'text'.*valid: sgemm1"):
        _lib.get_int("parallax_sgemm_level_parse", b"sgemm42")
    assert _lib.get_int("parallax_sgemm_level_parse", b"smem") == 3


def test_valid_sgemm_call_without_a_gpu_reports_why():
    if parallax.device_count() > 0:
        pytest.skip("fake pointers must never reach a real GPU")
    args = (64, 64, 64, 1.0, 1 << 40, 64, 2 << 40, 64, 0.0, 3 << 40, 64, None)
    with pytest.raises(parallax.NoDeviceError):
        _lib.call("parallax_sgemm", 1, *args)
    with pytest.raises(parallax.NoDeviceError):
        _lib.call("parallax_sgemm_cublas", *args)
    for level in range(2, 9):  # a level still being written says so; a written one finds no GPU
        with pytest.raises((parallax.NoDeviceError, parallax.UnimplementedError)):
            _lib.call("parallax_sgemm", level, *args)


def test_last_error_is_per_thread():
    """Two Python threads fail on different arguments at the same time; each reads its own message."""
    barrier = threading.Barrier(2)
    seen: dict[str, list[str]] = {"lda": [], "ldb": []}

    def worker(bad: str):
        for _ in range(100):
            lda, ldb = (3, 4) if bad == "lda" else (4, 3)
            code = _lib.lib.parallax_sgemm(1, 4, 4, 4, 1.0, 1 << 40, lda, 2 << 40, ldb, 0.0, 3 << 40, 4, None)
            barrier.wait()  # both have failed before either reads
            seen[bad].append(f"{code} {_lib.last_error()}")
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(bad,)) for bad in ("lda", "ldb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for bad, messages in seen.items():
        assert len(messages) == 100
        assert all(m.startswith("1 ") and f"invalid argument '{bad}'" in m for m in messages), messages[:3]


# --- locating the library (fresh interpreters, so each sees its own environment) -------------------------

def _import_in_subprocess(package_parent: pathlib.Path, env_lib: str | None):
    env = {k: v for k, v in os.environ.items() if k != "PARALLAX_LIB"}
    if env_lib is not None:
        env["PARALLAX_LIB"] = env_lib
    code = f"import sys; sys.path.insert(0, {str(package_parent)!r}); import parallax; print(parallax.library_path)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_parallax_lib_pointing_nowhere_is_an_import_error_naming_it(tmp_path):
    missing = tmp_path / "nope" / "libparallax.so"
    r = _import_in_subprocess(PACKAGE_DIR.parent, str(missing))
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "$PARALLAX_LIB" in r.stderr and str(missing) in r.stderr, r.stderr


def test_parallax_lib_may_name_a_directory():
    r = _import_in_subprocess(PACKAGE_DIR.parent, str(pathlib.Path(parallax.library_path).parent))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(pathlib.Path(parallax.library_path))


def test_without_parallax_lib_it_lists_where_it_looked(tmp_path):
    # A copy of the package outside the source tree, with no library beside it: nowhere to find one.
    copy = tmp_path / "site"
    shutil.copytree(PACKAGE_DIR, copy / "parallax", ignore=shutil.ignore_patterns("libparallax.so", "__pycache__"))
    r = _import_in_subprocess(copy, None)
    assert r.returncode != 0
    assert "next to the package" in r.stderr and str(copy / "parallax" / "libparallax.so") in r.stderr, r.stderr
    assert "build folder" in r.stderr and "PARALLAX_LIB" in r.stderr, r.stderr


def test_a_library_next_to_the_package_is_found(tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(PACKAGE_DIR, copy / "parallax", ignore=shutil.ignore_patterns("libparallax.so", "__pycache__"))
    shutil.copy2(parallax.library_path, copy / "parallax" / "libparallax.so")
    r = _import_in_subprocess(copy, None)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(copy / "parallax" / "libparallax.so")
