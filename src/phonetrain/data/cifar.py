"""CIFAR-10 binary batches (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version").

Each ``data_batch_{1..5}.bin`` holds 10000 records of 3073 bytes: one label byte (0..9), then
3072 pixel bytes (1024 red, 1024 green, 1024 blue; each 32x32 row-major) -- already CHW.
``test_batch.bin`` (same format) is the held-out split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import DatasetError

RECORD_BYTES = 1 + 3 * 32 * 32
# Per-channel mean/std of the training set in [0, 1] (the usual published constants).
MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
STD = np.array([0.2470, 0.2435, 0.2616], np.float32)


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [N,3,32,32], labels uint8 [N])`` of one binary batch file; raises
    :class:`DatasetError` naming the file if its size is not a whole number of records or a
    label is outside 0..9."""
    raw = np.fromfile(path, np.uint8)
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise DatasetError(f"{path}: {raw.size} bytes is not a whole number of "
                           f"{RECORD_BYTES}-byte CIFAR-10 records (truncated or wrong file)")
    rec = raw.reshape(-1, RECORD_BYTES)
    labels = rec[:, 0]
    if labels.max() > 9:
        raise DatasetError(f"{path}: label {labels.max()} outside 0..9 (not CIFAR-10 binary?)")
    return rec[:, 1:].reshape(-1, 3, 32, 32), labels


def find_batches(folder: str | Path | None, test: bool = False) -> tuple[Path, list[Path]]:
    """The folder CIFAR-10 is read from (``folder`` or its ``cifar-10-batches-bin``
    subfolder) and its ``data_batch_*.bin`` files (``test_batch.bin`` with ``test``);
    :class:`DatasetError` when there are none."""
    if folder is None:
        raise DatasetError("cifar10: set the dataset folder (dataset.path) to the directory "
                           "holding data_batch_1.bin .. data_batch_5.bin (cifar-10-binary.tar.gz)")
    folder = Path(folder)
    if (folder / "cifar-10-batches-bin").is_dir():
        folder = folder / "cifar-10-batches-bin"
    pattern = "test_batch.bin" if test else "data_batch_*.bin"
    files = sorted(folder.glob(pattern))
    if not files:
        what = "does not exist" if not folder.is_dir() else f"holds no {pattern}"
        raise DatasetError(f"cifar10: dataset.path {folder} {what}; point it at the folder of "
                           "the binary batches (cifar-10-binary.tar.gz)")
    return folder, files


def load_cifar10(folder: str | Path | None = None, test: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Training split (``test``: the held-out ``test_batch.bin``): ``(images float32
    [N,3,32,32], labels int32 [N])``, pixels in [0, 1] standardized per channel with
    :data:`MEAN` / :data:`STD`. ``folder`` holds the ``data_batch_*.bin`` files (or a
    ``cifar-10-batches-bin`` subfolder)."""
    _, files = find_batches(folder, test)
    parts = [read_cifar_batch(f) for f in files]
    x = np.concatenate([p[0] for p in parts]).astype(np.float32) / 255.0
    x = (x - MEAN[None, :, None, None]) / STD[None, :, None, None]
    return x.astype(np.float32), np.concatenate([p[1] for p in parts]).astype(np.int32)
