"""Lowering: model + batch + backend placement -> plan (see :mod:`phonetrain.plan`).

``lower(spec)`` builds the plan in memory; ``write_plan_dir(spec, root)`` writes
``root/plans/<plan_id>/plan.json`` and its ``tensors/*.f32`` atomically; ``write_bundle``
also writes the data batches and stages the kernel sources, giving a complete staging root.
"""

from .build import lower
from .files import write_bundle, write_plan_dir
from .flops import flops_per_step
from .init import init_params
from .spec import DUMPS, PLACEMENTS, TRANSFERS, LowerError, LowerSpec

__all__ = ["lower", "flops_per_step", "write_plan_dir", "write_bundle", "init_params", "LowerSpec", "LowerError",
           "PLACEMENTS", "TRANSFERS", "DUMPS"]
