"""The numpy reference: the kernel ABI in numpy (:mod:`.kernels`; the fused kernels in
:mod:`.fused`), a plan interpreter
(:mod:`.interpreter`), and the verification of runner outputs against it: per step from the
runner's own state (:mod:`.steps`, the verdict) and over the whole trajectory (:mod:`.verify`,
a reported figure), and held-out loss and accuracy from given parameters (:mod:`.heldout`)."""

from . import fused  # noqa: F401  (registers the fused kernels in KERNELS)
from . import fused_bn  # noqa: F401  (registers the fused batch-norm kernels in KERNELS)
from .heldout import HeldoutResult, evaluate
from .interpreter import Interpreter, ReferenceResult, run_plan
from .kernels import KERNELS, run_kernel
from .steps import KAPPA, TOLERANCE_SOURCE, StepCheck, check_step, checked_iterations
from .verify import (check_steps, read_checkpoint, read_dumps, tensor_error, trajectory, verify,
                     verify_run_dir)

__all__ = ["HeldoutResult", "evaluate", "Interpreter", "ReferenceResult", "run_plan", "KERNELS", "run_kernel", "KAPPA",
           "TOLERANCE_SOURCE", "StepCheck", "check_step", "checked_iterations", "check_steps",
           "read_checkpoint", "read_dumps", "tensor_error", "trajectory", "verify",
           "verify_run_dir"]
