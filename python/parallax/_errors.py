"""Exceptions raised by parallax.

Two families, on purpose:

* Argument checks done in Python before anything reaches the library raise the built-in ``TypeError``
  (wrong kind of object, wrong dtype) or ``ValueError`` (wrong device, rank, shape, stride, value). The
  message starts with the argument's name and states the rule: ``"b: must be float32 for kernel 'sgemm3'
  (got float16)"``.
* A failure reported by the C library (a non-zero ``parallax_status_t``) raises ``parallax.Error`` or one of
  its subclasses, carrying the library's own message (``parallax_last_error()``) and the status name.
  Subclasses also derive from the matching built-in where one exists, so that
  ``except ValueError`` catches a library-side argument rejection too.
"""

from __future__ import annotations


class Error(RuntimeError):
    """A call into libparallax failed. ``status`` is the C status name, ``code`` its value."""

    def __init__(self, message: str, status: str = "PARALLAX_ERROR_RUNTIME", code: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class InvalidArgumentError(Error, ValueError):
    """PARALLAX_ERROR_INVALID_ARGUMENT: the library rejected an argument; nothing ran on the device."""


class NoDeviceError(Error):
    """PARALLAX_ERROR_NO_DEVICE: the operation needs a CUDA GPU and none is visible."""


class UnimplementedError(Error, NotImplementedError):
    """PARALLAX_ERROR_NOT_IMPLEMENTED: the kernel (or dtype, or option) is not written yet."""


class OutOfMemoryError(Error):
    """PARALLAX_ERROR_OUT_OF_MEMORY: device or host memory is exhausted."""


class CudaError(Error):
    """PARALLAX_ERROR_CUDA: a CUDA runtime or cuBLAS call failed (the message names it)."""


# parallax_status_t value -> exception class (values from include/parallax/parallax.h).
STATUS_CLASSES = {
    1: InvalidArgumentError,
    2: NoDeviceError,
    3: UnimplementedError,
    4: OutOfMemoryError,
    5: CudaError,
}
