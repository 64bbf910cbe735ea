"""IDX files (LeCun's MNIST format), raw or gzip-compressed.

Layout (http://yann.lecun.com/exdb/mnist/): magic ``00 00 <type> <ndim>``, then ``ndim``
big-endian uint32 dimensions, then the data big-endian. Type ``0x08`` = uint8 (the only type
MNIST and Fashion-MNIST use; ``0x09`` int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32,
``0x0E`` float64 are read too).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from .errors import DatasetError

_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path, expect_ndim: int | None = None) -> np.ndarray:
    """Read one IDX file (``.gz`` decompressed by content, not by name).

    Returns an array of the file's shape and native dtype. Raises :class:`DatasetError` naming
    the file for a damaged gzip stream, a bad magic, an unknown type, an unexpected number of
    dimensions, or a truncated or over-long body.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # zlib.error: damage inside the stream
        raise DatasetError(f"{path}: cannot read IDX file ({type(e).__name__}: {e}); the file "
                           "is damaged: download or copy it again") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _TYPES:
        raise DatasetError(f"{path}: bad IDX magic {raw[:4].hex() or '(empty)'}; expected "
                           "00 00 <type> <ndim> -- not an IDX file (or a wrong/corrupt download)")
    ndim = raw[3]
    if expect_ndim is not None and ndim != expect_ndim:
        raise DatasetError(f"{path}: IDX file has {ndim} dimensions, expected {expect_ndim}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(f"{path}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, 4))
    dtype = np.dtype(_TYPES[raw[2]])
    need = header + int(np.prod(dims)) * dtype.itemsize
    if len(raw) != need:
        raise DatasetError(f"{path}: IDX body is {len(raw) - header} bytes, dims {dims} need "
                           f"{need - header} "
                           f"({'truncated' if len(raw) < need else 'trailing data'})")
    return np.frombuffer(raw, dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> None:
    """Write ``array`` (uint8) as an IDX file, gzip-compressed if ``compress``."""
    a = np.ascontiguousarray(array, dtype=np.uint8)
    body = bytes([0, 0, 0x08, a.ndim]) + np.asarray(a.shape, ">u4").tobytes() + a.tobytes()
    Path(path).write_bytes(gzip.compress(body) if compress else body)
