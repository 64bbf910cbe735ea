"""Lowering: model + batch + backend placement -> plan (see :mod:`phonetrain.plan`).

``lower(spec)`` builds the plan in memory; ``write_plan_dir(spec, root)`` writes
``root/plans/<plan_id>/plan.json`` and its ``tensors/*.f32`` atomically; ``write_bundle``
also writes the data batches and stages the kernel sources, giving a complete staging root.

Only the spec (:mod:`phonetrain.lowering.spec`) is imported with the package: every stage job
parses specs, and most never lower a model, so the lowering itself (models, data, kernels)
is imported on first use of its names (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import Any

from .spec import DUMPS, PLACEMENTS, TRANSFERS, LowerError, LowerSpec

_LAZY = {"lower": ".build", "write_bundle": ".files", "write_plan_dir": ".files",
         "flops_per_step": ".flops", "init_params": ".init"}

__all__ = ["lower", "flops_per_step", "write_plan_dir", "write_bundle", "init_params", "LowerSpec", "LowerError",
           "PLACEMENTS", "TRANSFERS", "DUMPS"]


def __getattr__(name: str) -> Any:
    """The lowering's functions (:data:`_LAZY`), imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
