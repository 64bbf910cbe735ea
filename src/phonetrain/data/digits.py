"""scikit-learn's bundled handwritten digits, upsampled to MNIST's 28x28.

Source: ``sklearn.datasets.load_digits`` (UCI "Optical Recognition of Handwritten Digits",
1797 8x8 images, 16 grey levels 0..16, 10 classes), shipped inside scikit-learn: real data,
no network.
"""

from __future__ import annotations

import numpy as np


def load_digits_28() -> tuple[np.ndarray, np.ndarray]:
    """``(images float32 [1797, 1, 28, 28], labels int32 [1797] in 0..9)``.

    Each 8x8 image is scaled to [0, 1] (divided by 16) and upsampled by 3.5 with bilinear
    interpolation on pixel centres (``scipy.ndimage.zoom(order=1, grid_mode=True,
    mode="nearest")``, the same as PyTorch's ``interpolate(mode="bilinear",
    align_corners=False)``), then standardized with the mean and standard deviation over all
    pixels of the whole upsampled set (float64 statistics), giving mean 0 and std 1.
    """
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    d = load_digits()
    imgs = d.images.astype(np.float64) / 16.0
    up = zoom(imgs, (1, 3.5, 3.5), order=1, grid_mode=True, mode="nearest")
    up = (up - up.mean()) / up.std()
    return up[:, None].astype(np.float32), d.target.astype(np.int32)
