"""parallax: Python binding of libparallax.so through its C ABI (ctypes; nothing compiled against torch).

    import torch, parallax
    a = torch.randn(1000, 700, device="cuda")
    b = torch.randn(700, 300, device="cuda")
    c = parallax.gemm(a, b, kernel="sgemm5")      # any ladder level, or "cublas"

Works on torch tensors and on any object exposing __cuda_array_interface__ (CuPy, ...). See docs/python.md.
Importing parallax loads the library (see parallax._lib for where it is looked for) and raises ImportError,
listing the places it looked, when it cannot.
"""

from ._version import __version__
from ._errors import (CudaError, Error, InvalidArgumentError, NoDeviceError, OutOfMemoryError,
                      UnimplementedError)
from . import _lib
from ._device import DeviceInfo, device_count, device_info, git_sha, version
from ._gemm import gemm, gemm_kernels, tc_kernels
from ._attention import attention_backward, flash_attn, flash_attn_func

library_path = str(_lib.path)  # the libparallax.so that was loaded

__all__ = [
    "__version__", "library_path", "version", "git_sha",
    "device_count", "device_info", "DeviceInfo",
    "gemm", "gemm_kernels", "tc_kernels", "flash_attn", "flash_attn_func", "attention_backward",
    "Error", "InvalidArgumentError", "NoDeviceError", "UnimplementedError", "OutOfMemoryError", "CudaError",
]
