"""The plan: the one versioned contract between the Python lowering and the C runner.

A plan is one training iteration (forward, loss, backward, SGD update) lowered to an ordered
list of steps -- kernel launches, host<->device transfers and batch loads -- over a table of
tensors. The runner (``src/runner``) executes it without knowing what a layer is; the numpy
reference (:mod:`phonetrain.reference`) executes the same plan to verify the runner.

JSON layout (``PLAN_VERSION`` = 2; a plan that uses no version-2 field is written as
version 1, so plans lowered before version 2 keep their bytes and their SHA-256)::

    {
      "plan_version": 1 | 2,
      "name": "mlp_784_256_128_16/b32/opencl-resident-copy",
      "backend": "cpu" | "opencl" | "vulkan",
      "tensors": [Tensor...],
      "programs": [Program...],          # OpenCL programs (vulkan: one SPIR-V per kernel,
                                         # named after it); empty for the CPU backend
      "batches": [Batch...],             # per-iteration inputs read from bundle files
      "steps": [Step...],                # one iteration, in order
      "warmup": 2, "iterations": 10,     # warm-up (discarded) and measured iterations
      "loss_tensor": 17,                 # read from its host copy after every iteration
      "dumps": [3, 4],                   # tensors written to dumps/<name>.f32 at the end
      "checkpoints": {"iterations": [0, 1, -2, -1], "tensors": [3, 4, 9]},  # optional
      "buffers": [{"name": "buf0", "size_bytes": 4096}]                      # optional
    }

Tensor: ``{"id", "name", "shape", "dtype": "f32"|"i32", "role", "home": "host"|"device",
"init": Init}``. ``role`` is one of :data:`ROLES`. ``home`` says which copy is authoritative
at the end of an iteration (dumps read it). Init is ``{"kind": "zeros"}``,
``{"kind": "file", "path": "tensors/fc1.weight.f32"}`` (raw little-endian, exactly
``numel * 4`` bytes) or ``{"kind": "uniform", "seed": 7, "low": -0.1, "high": 0.1}`` (the
splitmix64 fill of :func:`uniform_fill`, reproduced by the runner).

Shared buffers (optional; plans without them are unchanged): a tensor may carry
``"buffer": "buf3"``, naming an entry of the top-level ``"buffers": [{"name": "buf3",
"size_bytes": 802816}, ...]``. Every tensor naming one buffer is stored at offset 0 of that
one allocation (host copy and device buffer alike), so the lowering gives one buffer only to
tensors whose lifetimes within an iteration do not overlap
(:mod:`phonetrain.lowering.reuse`); ``size_bytes`` is at least each such tensor's size.
A runner that ignores the field allocates per tensor and computes the same.

Program: ``{"name": "gemm", "source": "kernels/baseline/gemm.cl", "options": "-DTS=16"}``;
each source is one self-contained OpenCL C 1.2 program (see ``src/kernels/README.md``).
The reserved source ``"clblast"`` (``{"name": "gemm", "source": "clblast", "options": ""}``,
the ``clblast`` kernel version) is not a file: it marks ``gemm_nn``/``gemm_nt``/``gemm_tn``
steps as external, and the runner calls CLBlast's ``CLBlastSgemm`` for them (their
``global``/``local`` are ignored; the trace row spans the whole call). Where libclblast cannot
be loaded the runner exits with its missing-library code (8).

Batch: ``{"tensor": 0, "path": "data/digits/b32/images.f32", "count": 40}``: the file holds
``count`` consecutive batches of the tensor's size; iteration ``i`` (warm-up included,
0-based) loads batch ``i % count``.

Steps (``op`` selects the kind; every step may carry ``layer`` and ``phase`` in
:data:`PHASES`):

- ``{"op": "kernel", "name": "gemm_nt", "args": [{"i": 32}, {"f": 1.0}, {"t": 3}, ...],
  "global": [256, 32], "local": null | [16, 16], "flops": 123, "bytes": 456}``. A buffer
  argument may instead be ``{"t": 3, "image_width4": 196}``: the opencl backend binds an
  ``image2d_t`` (CL_RGBA, CL_FLOAT) ``image_width4`` pixels wide and
  ``ceil(numel / (4 * image_width4))`` rows over the tensor's buffer, float ``i`` at component
  ``i % 4`` of pixel ``i / 4`` (one width per tensor; the buffer is zero-padded to whole rows).
  It is a view of the buffer where the device has ``cl_khr_image2d_from_buffer`` (or OpenCL
  2.x), else a copy refreshed before each such kernel (a ``d2d`` trace row, op
  ``image_copy``). The cpu backend and the numpy reference treat it as ``{"t": 3}``. Only the
  ``image`` kernel version's GEMM operand B uses it; a device without image support exits with
  the missing-library code (8).
- ``{"op": "h2d", "tensor": 3}`` / ``{"op": "d2h", "tensor": 3}``: clEnqueueWrite/ReadBuffer
  of the whole tensor (blocking).
- ``{"op": "map", "tensor": 3, "access": "write"|"read"}``: map the tensor's
  ``CL_MEM_ALLOC_HOST_PTR`` buffer, then copy host->mapped (write) or mapped->host (read);
  the copy is its own ``host`` trace row. Must be followed later by ``{"op": "unmap",
  "tensor": 3}`` before any kernel uses the buffer.
- ``{"op": "load", "tensor": 0}``: read this iteration's batch into the host copy.

Bytes of transfers are the tensor's size; the runner records them in the trace.

Queues and wait lists (version 2; the ``pipelined`` placement writes them): any ``kernel``,
``h2d`` or ``d2h`` step may carry ``"queue": 0 | 1`` (default 0) and ``"wait": [j, ...]``
(default empty). Queue 0 is the in-order queue every version-1 command runs on; queue 1 is a
second in-order queue of the same device whose ``h2d``/``d2h`` are *non-blocking*. ``wait``
lists indices of earlier steps of the same iteration (``0 <= j < k``, each a ``kernel``,
``h2d`` or ``d2h`` step): the command starts only after those commands ended (OpenCL event
wait list). Ordering between the two queues is exactly what the wait lists say, so the
lowering must list every cross-queue hazard on a device buffer or host copy; ordering
within one queue is program order. Executing the steps one by one in list order (the CPU
backend, the numpy reference) is always a valid schedule of such a plan. ``load``, ``map``
and ``unmap`` stay on queue 0 without waits; the runner drains queue 1 before a ``load``.
A version-1 document with ``queue``/``wait`` is refused.

Checkpoints (optional; absent or null: none): after each listed iteration (0-based, warm-up
included; negative entries count from the end, ``-1`` = the last iteration run) the runner
keeps the ``tensors``' contents (their ``home`` copy) and writes them to
``checkpoints/<iteration>/<name>.f32``. The per-step verification
(:mod:`phonetrain.reference.steps`) checks each checkpointed iteration whose predecessor is
also checkpointed (iteration 0 from the plan's initial contents): from the runner's own state
before it, on the same batch. When the runner measures adaptively the last iterations are
known only at the end; it then places the counted-from-the-end checkpoints after its stop
decision (``src/runner/README.md``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from phonetrain.errors import PhonetrainError
from phonetrain.io import write_text

if TYPE_CHECKING:   # numpy only where a tensor is filled: every stage job reads this module
    import numpy as np

PLAN_VERSION = 2
PLAN_VERSIONS = (1, 2)
QUEUES = (0, 1)
EVENT_OPS = ("kernel", "h2d", "d2h")   # steps that have an event and may wait or use queue 1
# The runner's backends: its C kernels, OpenCL, Vulkan compute.
BACKENDS = ("cpu", "opencl", "vulkan")
ROLES = ("param", "grad", "activation", "input", "label", "scratch", "state", "loss")
PHASES = ("load", "forward", "loss", "backward", "update", "transfer")
DTYPES = {"f32": "float32", "i32": "int32"}   # plan dtype -> numpy's name of it
STEP_OPS = ("kernel", "h2d", "d2h", "map", "unmap", "load")


class PlanError(PhonetrainError, ValueError):
    """A plan document that breaks the contract; the message names the field."""


@dataclass
class Tensor:
    """One tensor of the plan. ``shape`` in elements; 4 bytes per element (f32 or i32)."""

    id: int
    name: str
    shape: list[int]
    role: str
    dtype: str = "f32"
    home: str = "host"
    init: dict[str, Any] = field(default_factory=lambda: {"kind": "zeros"})
    buffer: str | None = None   # a shared buffer's name (Plan.buffers); None: its own

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d["buffer"] is None:   # plans without reuse keep their bytes
            del d["buffer"]
        return d

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def size_bytes(self) -> int:
        return 4 * self.numel


@dataclass
class Program:
    """One OpenCL program: a ``.cl`` source path relative to the bundle, and build options."""

    name: str
    source: str
    options: str = ""


@dataclass
class Batch:
    """A per-iteration input: ``count`` consecutive batches of ``tensor`` in ``path``."""

    tensor: int
    path: str
    count: int


@dataclass
class Step:
    """One command of an iteration; fields beyond ``op`` depend on the op (module doc)."""

    op: str
    tensor: int | None = None
    name: str | None = None
    args: list[dict[str, Any]] | None = None
    global_size: list[int] | None = None
    local_size: list[int] | None = None
    access: str | None = None
    flops: int = 0
    bytes: int = 0
    layer: str = ""
    phase: str = ""
    queue: int = 0
    wait: list[int] = field(default_factory=list)

    @property
    def uses_queues(self) -> bool:
        """True when the step needs plan version 2 (a queue other than 0, or waits)."""
        return self.queue != 0 or bool(self.wait)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op}
        if self.op == "kernel":
            d.update(name=self.name, args=self.args, **{"global": self.global_size},
                     local=self.local_size, flops=self.flops, bytes=self.bytes)
        else:
            d["tensor"] = self.tensor
            if self.op == "map":
                d["access"] = self.access
            d["bytes"] = self.bytes
        d.update(layer=self.layer, phase=self.phase)
        if self.uses_queues:
            d.update(queue=self.queue, wait=list(self.wait))
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Step:
        return cls(op=d["op"], tensor=d.get("tensor"), name=d.get("name"), args=d.get("args"),
                   global_size=d.get("global"), local_size=d.get("local"),
                   access=d.get("access"), flops=int(d.get("flops", 0)),
                   bytes=int(d.get("bytes", 0)), layer=d.get("layer", ""),
                   phase=d.get("phase", ""), queue=d.get("queue", 0),
                   wait=list(d.get("wait") or []))


# what to do about a damaged plan file: the lower stage writes it again
_RELOWER = ("a plan is written by the lower stage, not by hand: delete its folder and rerun "
            "(snakemake ... all lowers it again)")
DEFAULT_WARMUP = 2       # warm-up iterations: ``measure.warmup``'s default (phonetrain.config)
DEFAULT_ITERATIONS = 10  # measured iterations: ``measure.iterations``'s default


@dataclass
class Plan:
    """One lowered training step plus run settings; see the module docstring for the JSON."""

    name: str
    backend: str
    tensors: list[Tensor]
    steps: list[Step]
    warmup: int
    iterations: int
    programs: list[Program] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    loss_tensor: int = -1
    dumps: list[int] = field(default_factory=list)
    checkpoints: dict[str, list[int]] | None = None
    buffers: list[dict[str, Any]] = field(default_factory=list)   # [{"name", "size_bytes"}]

    def tensor(self, tid: int) -> Tensor:
        return self.tensors[tid]

    def checkpoint_iterations(self, total: int) -> list[int]:
        """The checkpointed iterations of a run of ``total`` iterations (warm-up included),
        negative entries resolved, sorted, within ``0..total-1``."""
        its = (self.checkpoints or {}).get("iterations", [])
        return sorted({i if i >= 0 else total + i for i in its} & set(range(total)))

    def by_name(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def allocated_bytes(self) -> int:
        """Bytes of tensor storage the runner allocates for this plan: each tensor without a
        ``buffer`` at its own size, plus each shared buffer's ``size_bytes`` once (host
        arrays; on the OpenCL backend the device buffers too, image padding aside)."""
        own = sum(t.size_bytes for t in self.tensors if t.buffer is None)
        return own + sum(int(b["size_bytes"]) for b in self.buffers)

    @property
    def needed_version(self) -> int:
        """The lowest plan version that expresses this plan: 2 when a step uses queues."""
        return 2 if any(s.uses_queues for s in self.steps) else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "plan_version": self.needed_version, "name": self.name, "backend": self.backend,
            "tensors": [t.to_json() for t in self.tensors],
            "programs": [asdict(p) for p in self.programs],
            "batches": [asdict(b) for b in self.batches],
            "steps": [s.to_json() for s in self.steps],
            "warmup": self.warmup, "iterations": self.iterations,
            "loss_tensor": self.loss_tensor, "dumps": self.dumps,
            "checkpoints": self.checkpoints,
        } | ({"buffers": self.buffers} if self.buffers else {})

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Plan:
        if not isinstance(d, dict):
            raise PlanError(f"expected a JSON object, got {type(d).__name__}")
        version = d.get("plan_version")
        if version not in PLAN_VERSIONS or isinstance(version, bool):
            raise PlanError(f"plan_version {version!r} is not supported "
                            f"(this phonetrain reads versions {PLAN_VERSIONS}); "
                            "re-lower the plan")
        if version == 1:
            for k, s in enumerate(d["steps"]):
                if "queue" in s or "wait" in s:
                    raise PlanError(f"steps[{k}]: 'queue'/'wait' need plan_version 2 (this "
                                    "plan says 1); re-lower the plan")
        plan = cls(
            name=d["name"], backend=d["backend"],
            tensors=[Tensor(**t) for t in d["tensors"]],
            programs=[Program(**p) for p in d.get("programs", [])],
            batches=[Batch(**b) for b in d.get("batches", [])],
            steps=[Step.from_json(s) for s in d["steps"]],
            warmup=int(d.get("warmup", 0)), iterations=int(d["iterations"]),
            loss_tensor=int(d.get("loss_tensor", -1)), dumps=list(d.get("dumps", [])),
            checkpoints=d.get("checkpoints"), buffers=list(d.get("buffers") or []),
        )
        plan.validate()
        return plan

    def validate(self) -> None:
        """Check ids, roles, dtypes, ops and references; raise :class:`PlanError` naming the field."""
        if self.backend not in BACKENDS:
            raise PlanError(f"backend {self.backend!r} must be one of {BACKENDS}")
        if self.warmup < 0 or self.iterations < 1:
            raise PlanError(f"warmup {self.warmup} and iterations {self.iterations}: a plan "
                            "runs >= 0 warm-up and >= 1 measured iterations")
        for i, t in enumerate(self.tensors):
            if t.id != i:
                raise PlanError(f"tensors[{i}].id is {t.id}; ids must equal their index")
            if not isinstance(t.shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t.shape):
                raise PlanError(f"tensor {t.name!r}: shape {t.shape!r} is not a list of "
                                "sizes (integers >= 0)")
            if t.role not in ROLES or t.dtype not in DTYPES or t.home not in ("host", "device"):
                raise PlanError(f"tensor {t.name!r}: bad role/dtype/home "
                                f"({t.role}, {t.dtype}, {t.home})")
        n = len(self.tensors)

        def check_tid(tid: Any, where: str) -> None:
            if not isinstance(tid, int) or not 0 <= tid < n:
                raise PlanError(f"{where}: tensor id {tid!r} is not in 0..{n - 1}")

        for k, s in enumerate(self.steps):
            if s.op not in STEP_OPS:
                raise PlanError(f"steps[{k}].op {s.op!r} is not one of {STEP_OPS}")
            if s.op == "kernel":
                for a in s.args or []:
                    if "t" in a:
                        check_tid(a["t"], f"steps[{k}] ({s.name}) args")
                    w = a.get("image_width4", 1)   # optional: the tensor as an image2d_t
                    if not isinstance(w, int) or isinstance(w, bool) or w < 1 or \
                            ("image_width4" in a and "t" not in a):
                        raise PlanError(f"steps[{k}] ({s.name}) args: image_width4 {w!r} "
                                        f"needs a tensor \"t\" and a positive int width")
            else:
                check_tid(s.tensor, f"steps[{k}] ({s.op})")
            self._check_queue(k, s)
        for b in self.batches:
            check_tid(b.tensor, "batches")
        for tid in self.dumps:
            check_tid(tid, "dumps")
        if self.checkpoints is not None:
            c = self.checkpoints
            if not isinstance(c, dict) or set(c) != {"iterations", "tensors"}:
                raise PlanError("checkpoints must be {\"iterations\": [...], \"tensors\": [...]}")
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in c["iterations"]):
                raise PlanError(f"checkpoints.iterations {c['iterations']!r}: integers only "
                                "(negative counts from the end)")
            for tid in c["tensors"]:
                check_tid(tid, "checkpoints.tensors")
        if self.loss_tensor != -1:
            check_tid(self.loss_tensor, "loss_tensor")
        self._check_buffers()

    def _check_buffers(self) -> None:
        """Shared buffers: unique names, each at least as large as every tensor naming it,
        each named by some tensor; a tensor's ``buffer`` names a listed buffer."""
        sizes: dict[str, int] = {}
        for i, b in enumerate(self.buffers):
            n = b.get("size_bytes") if isinstance(b, dict) else None
            if not isinstance(b, dict) or set(b) != {"name", "size_bytes"} or \
                    not isinstance(b["name"], str) or not isinstance(n, int) or n < 1:
                raise PlanError(f"buffers[{i}] must be {{\"name\": str, \"size_bytes\": int > 0}}")
            if b["name"] in sizes:
                raise PlanError(f"buffers[{i}]: name {b['name']!r} is listed twice")
            sizes[b["name"]] = n
        used = set()
        for t in self.tensors:
            if t.buffer is None:
                continue
            if t.buffer not in sizes:
                raise PlanError(f"tensor {t.name!r}: buffer {t.buffer!r} is not in buffers")
            if t.size_bytes > sizes[t.buffer]:
                raise PlanError(f"tensor {t.name!r} ({t.size_bytes} bytes) does not fit buffer "
                                f"{t.buffer!r} ({sizes[t.buffer]} bytes)")
            used.add(t.buffer)
        if set(sizes) - used:
            raise PlanError(f"buffers {sorted(set(sizes) - used)} are named by no tensor")

    def _check_queue(self, k: int, s: Step) -> None:
        """Version-2 fields of step ``k``: queue index and wait references (module doc)."""
        where = f"steps[{k}] ({s.name or s.op})"
        if not isinstance(s.queue, int) or isinstance(s.queue, bool) or s.queue not in QUEUES:
            raise PlanError(f"{where}.queue {s.queue!r} must be 0 (compute) or 1 (transfers)")
        if s.uses_queues and s.op not in EVENT_OPS:
            raise PlanError(f"{where}: op {s.op!r} takes no queue or wait list (only "
                            f"{EVENT_OPS} do)")
        for i, j in enumerate(s.wait):
            if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < k:
                raise PlanError(f"{where}.wait[{i}] = {j!r} names no earlier step: a step "
                                f"waits only for steps 0..{k - 1} of the same iteration")
            if self.steps[j].op not in EVENT_OPS:
                raise PlanError(f"{where}.wait[{i}] = {j} names steps[{j}] (op "
                                f"{self.steps[j].op!r}), which has no event")

    def save(self, path: str | Path) -> None:
        """Write the plan as JSON atomically (temp file, then rename; parents created)."""
        write_text(path, json.dumps(self.to_json(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        """Read and validate a plan; :class:`PlanError` names the file on any defect."""
        try:
            return cls.from_json(json.loads(Path(path).read_text()))
        except PlanError as e:
            raise PlanError(f"{path}: {e.message}", e.hint or _RELOWER) from e
        except json.JSONDecodeError as e:
            raise PlanError(f"{path}: not JSON ({e})", _RELOWER) from e
        except KeyError as e:
            raise PlanError(f"{path}: key {e} is missing", _RELOWER) from e
        except (TypeError, ValueError) as e:   # ValueError: not UTF-8, a field of a bad type
            raise PlanError(f"{path}: {e}", _RELOWER) from e


def uniform_fill(seed: int, n: int, low: float, high: float) -> np.ndarray:
    """Seeded uniform float32 fill shared with the runner (``fill_uniform`` in plan.c).

    Element ``i`` is ``low + (high - low) * u`` with ``u = (x_i >> 40) / 2**24`` where ``x_i`` is
    the ``(i+1)``-th output of splitmix64 seeded with ``seed`` (Steele, Lea, Flood, "Fast
    splittable pseudorandom number generators", OOPSLA 2014): ``z = seed + (i+1)*0x9E3779B97F4A7C15``
    then the three xor-shift-multiply rounds below, all mod 2**64. ``u`` is computed in float64,
    the result rounded to float32.
    """
    import numpy as np

    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(n, dtype=np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (low + (high - low) * u).astype(np.float32)
