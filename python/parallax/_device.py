"""Devices and library identity."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import _lib


@dataclass(frozen=True)
class DeviceInfo:
    """What a kernel author and a benchmark need to know about a GPU (parallax_device_info_t)."""

    device: int
    name: str
    arch: str  # "sm_90"
    cc_major: int
    cc_minor: int
    sm_count: int
    global_memory_bytes: int
    l2_bytes: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_sm: int
    registers_per_sm: int
    max_threads_per_sm: int
    warp_size: int
    clock_khz: int
    memory_clock_khz: int
    memory_bus_bits: int
    theoretical_fp32_tflops: float  # from clocks and unit counts: a lead, not a measurement
    theoretical_dram_gbps: float


def device_count() -> int:
    """Visible CUDA devices; 0 (not an error) without a driver or a GPU."""
    return _lib.get_int("parallax_device_count")


def device_info(device: int | None = None) -> DeviceInfo:
    """Properties of `device` (None: the current device). parallax.NoDeviceError without a GPU."""
    if device is None:
        device = -1
    elif isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device: must be an int device index or None (got {type(device).__name__})")
    elif device < 0:
        raise ValueError(f"device: must be >= 0, or None for the current device (got {device})")
    raw = _lib.DeviceInfoStruct()
    raw.struct_size = ctypes.sizeof(raw)
    _lib.call("parallax_device_info", device, ctypes.byref(raw))
    fields = {f.name: getattr(raw, f.name) for f in DeviceInfo.__dataclass_fields__.values()}
    fields["name"] = raw.name.decode("utf-8", "replace")
    fields["arch"] = raw.arch.decode()
    return DeviceInfo(**fields)


def version() -> str:
    """Version of the loaded libparallax.so."""
    return _lib.lib.parallax_version().decode()


def git_sha() -> str:
    """Git revision the loaded libparallax.so was built from ("unknown" outside a checkout)."""
    return _lib.lib.parallax_git_sha().decode()
