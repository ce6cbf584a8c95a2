"""Finding, loading and declaring libparallax.so (ctypes; nothing is compiled against Python or torch).

Where the library is looked for, in order:

1. ``$PARALLAX_LIB``: the path of libparallax.so, or a directory holding it. When set it is the only place
   looked at: an explicit choice that silently fell back to another copy would hide the mistake.
2. Next to this package: ``parallax/libparallax.so`` (copy it there before ``pip install ./python`` to
   bundle it; see docs/python.md).
3. The build folder of the source tree this package sits in: ``<repo>/build/src/libparallax.so`` (works
   when the package is used from a checkout without installing it).

If none loads, importing parallax raises ImportError saying where it looked and why each place failed.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
from ctypes import POINTER, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_uint64, c_void_p

from ._errors import STATUS_CLASSES, Error

# The C ABI version this binding is written for (PARALLAX_ABI_VERSION in parallax.h).
ABI_VERSION = 1
LIBRARY_NAME = "libparallax.so"
ENV_VAR = "PARALLAX_LIB"

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


def candidate_paths() -> list[tuple[str, pathlib.Path | None]]:
    """(how it was found, path) for each place the library is looked for, in order; path None: that place
    does not apply (an installed package has no source tree around it)."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = pathlib.Path(env).expanduser()
        if path.is_dir():
            path = path / LIBRARY_NAME
        return [(f"${ENV_VAR}", path)]
    places = [("next to the package", _PACKAGE_DIR / LIBRARY_NAME)]
    source_root = _PACKAGE_DIR.parent.parent  # <repo>/python/parallax -> <repo>
    if (source_root / "CMakeLists.txt").is_file() and (source_root / "include" / "parallax").is_dir():
        places.append(("build folder of the source tree", source_root / "build" / "src" / LIBRARY_NAME))
    else:
        places.append(("build folder of the source tree", None))  # installed: there is no source tree
    return places


def _load() -> tuple[ctypes.CDLL, pathlib.Path]:
    tried = []
    for how, path in candidate_paths():
        if path is None:
            tried.append(f"  {how}: not looked at (this package is not inside a parallax checkout)")
            continue
        if not path.is_file():
            tried.append(f"  {how}: {path} (no such file)")
            continue
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            # Typically a dependency that the loader cannot find (libcudart.so.13, libcublas.so.13).
            tried.append(f"  {how}: {path} (found but failed to load: {e}; check `ldd {path}`)")
            continue
        try:
            abi = lib.parallax_abi_version()
        except AttributeError:
            tried.append(f"  {how}: {path} (loaded, but it exports no parallax_abi_version: not libparallax?)")
            continue
        if abi != ABI_VERSION:
            tried.append(f"  {how}: {path} (C ABI version {abi}, this package needs {ABI_VERSION}: "
                         "rebuild the library or reinstall the package from the same checkout)")
            continue
        return lib, path
    raise ImportError(
        f"parallax: could not load {LIBRARY_NAME}. Looked in:\n" + "\n".join(tried) +
        f"\nBuild it (cmake -S . -B build -G Ninja && cmake --build build), then either set {ENV_VAR} to the"
        f" file (e.g. {ENV_VAR}=$PWD/build/src/{LIBRARY_NAME}) or copy it next to the package"
        f" ({_PACKAGE_DIR / LIBRARY_NAME})."
    )


class DeviceInfoStruct(ctypes.Structure):
    """Mirror of parallax_device_info_t. Its size travels in struct_size, so a drifted mirror is rejected by
    the library (PARALLAX_ERROR_INVALID_ARGUMENT naming 'info->struct_size') instead of being misread."""

    _fields_ = [
        ("struct_size", c_uint64),
        ("device", c_int32),
        ("cc_major", c_int32),
        ("cc_minor", c_int32),
        ("sm_count", c_int32),
        ("registers_per_sm", c_int32),
        ("max_threads_per_sm", c_int32),
        ("warp_size", c_int32),
        ("clock_khz", c_int32),
        ("memory_clock_khz", c_int32),
        ("memory_bus_bits", c_int32),
        ("global_memory_bytes", c_uint64),
        ("l2_bytes", c_uint64),
        ("shared_memory_per_block", c_uint64),
        ("shared_memory_per_block_optin", c_uint64),
        ("shared_memory_per_sm", c_uint64),
        ("theoretical_fp32_tflops", c_double),
        ("theoretical_dram_gbps", c_double),
        ("name", c_char * 256),
        ("arch", c_char * 16),
    ]


class GemmArgsStruct(ctypes.Structure):
    """Mirror of parallax_gemm_args_t (struct_size checked by the library, like DeviceInfoStruct)."""

    _fields_ = [
        ("struct_size", c_uint64),
        ("m", c_int64),
        ("n", c_int64),
        ("k", c_int64),
        ("op_a", c_int32),
        ("op_b", c_int32),
        ("ab_dtype", c_int32),
        ("c_dtype", c_int32),
        ("a", c_void_p),
        ("lda", c_int64),
        ("b", c_void_p),
        ("ldb", c_int64),
        ("c", c_void_p),
        ("ldc", c_int64),
        ("alpha", c_float),
        ("beta", c_float),
        ("bias", c_void_p),
        ("epilogue", c_int32),
        ("reserved", c_int32),
    ]


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of every entry point. Without them ctypes would pass Python ints as C int
    (truncating 64-bit pointers) and floats not at all."""
    status = c_int  # parallax_status_t is an int-sized enum
    i64 = c_int64
    signatures = {
        "parallax_last_error": (c_char_p, []),
        "parallax_status_name": (c_char_p, [c_int]),
        "parallax_abi_version": (c_int, []),
        "parallax_version": (c_char_p, []),
        "parallax_git_sha": (c_char_p, []),
        "parallax_device_count": (status, [POINTER(c_int)]),
        "parallax_get_device": (status, [POINTER(c_int)]),
        "parallax_set_device": (status, [c_int]),
        "parallax_pointer_device": (status, [c_void_p, POINTER(c_int)]),
        "parallax_device_info": (status, [c_int, POINTER(DeviceInfoStruct)]),
        "parallax_sgemm_level_count": (status, [POINTER(c_int)]),
        "parallax_sgemm_level_name": (status, [c_int, POINTER(c_char_p)]),
        "parallax_sgemm_level_description": (status, [c_int, POINTER(c_char_p)]),
        "parallax_sgemm_level_parse": (status, [c_char_p, POINTER(c_int)]),
        "parallax_sgemm": (status, [c_int, i64, i64, i64, c_float, c_void_p, i64, c_void_p, i64, c_float,
                                    c_void_p, i64, c_void_p]),
        "parallax_sgemm_cublas": (status, [i64, i64, i64, c_float, c_void_p, i64, c_void_p, i64, c_float,
                                           c_void_p, i64, c_void_p]),
        "parallax_gemm_kernel_count": (status, [POINTER(c_int)]),
        "parallax_gemm_kernel_name": (status, [c_int, POINTER(c_char_p)]),
        "parallax_gemm": (status, [POINTER(GemmArgsStruct), c_char_p, c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


lib, path = _load()
_declare(lib)


def last_error() -> str:
    return lib.parallax_last_error().decode("utf-8", "replace")


def status_name(code: int) -> str:
    return lib.parallax_status_name(code).decode()


def check(code: int) -> None:
    """Raises the parallax.Error subclass for a non-zero status, with the library's message.

    The message is read right after the call, on the same thread: parallax_last_error() is thread-local in
    the library, and ctypes makes the foreign call on the calling OS thread (releasing the GIL meanwhile),
    so another Python thread's failures cannot overwrite it."""
    if code != 0:
        cls = STATUS_CLASSES.get(code, Error)
        raise cls(last_error(), status_name(code), code)


def call(name: str, *args) -> None:
    """Calls lib.<name>(*args) and raises on a non-zero status."""
    check(getattr(lib, name)(*args))


def get_int(name: str, *args) -> int:
    """For entry points whose last parameter is an int out-parameter."""
    value = c_int(0)
    call(name, *args, ctypes.byref(value))
    return value.value


def get_str(name: str, *args) -> str:
    """For entry points whose last parameter is a const char** out-parameter."""
    value = c_char_p()
    call(name, *args, ctypes.byref(value))
    return value.value.decode()
