"""The kernels wing: the kernel ABI, kernel versions and their launch geometry, GEMM
benchmarks and tuning. One module per concept, each importing only those before it:

- :mod:`~phonetrain.kernels.abi`: the ABI table (argument names and kinds, each kernel's
  file, buffer access, FLOPs, baseline global size);
- :mod:`~phonetrain.kernels.launch`: the registry of named launch-geometry rules
  (:func:`geometry`) and the image-operand helpers;
- :mod:`~phonetrain.kernels.versions`: a version folder and its ``version.yaml``
  (:func:`load_version`), its sources, hash and staging;
- :mod:`~phonetrain.kernels.abi_gen`: the files generated from the ABI table (the CPU
  backend's ``src/runner/kernel_abi.h``, the README's ABI table; ``python -m
  phonetrain.kernels.abi_gen``);
- :mod:`~phonetrain.kernels.gemm`: GEMM benchmark specs and tables (needs pandas);
- :mod:`~phonetrain.kernels.tuning`: per-device tuning over a version's candidates;
- :mod:`~phonetrain.kernels.vk_gemm`: GEMM timing on a Vulkan device (a bench-gemm spec as
  one plan for the runner's ``run`` mode, its result in bench-gemm's layout; needs numpy).

What a version *is* (defines, local sizes, geometry rule, device requirements, GEMM library,
image operand, tuning space) lives in ``src/kernels/<version>/version.yaml``; no module here
knows a version by its name. Importing the package loads ``abi``, ``launch`` and ``versions``
only (PyYAML is their one third-party dependency); ``gemm`` and ``tuning`` also need pandas.
"""

from __future__ import annotations

from .abi import (KERNEL_ARGS, GEMM_KERNELS, baseline_global, bind_args, buffer_access,
                  kernel_flops, kernels_mentioned)
from .launch import IMAGE_MAX_WIDTH4, geometry, image_width4, mark_image_args, reads_image, \
    register_geometry
from .versions import (KERNELS_ROOT, KernelVersion, KernelVersionError, assemble_source,
                       build_hash, common_source, load_version, resolve_sources, source_files, source_hash,
                       stage_kernels)

__all__ = ["KERNEL_ARGS", "GEMM_KERNELS", "baseline_global", "bind_args", "buffer_access",
           "kernel_flops", "kernels_mentioned", "IMAGE_MAX_WIDTH4", "geometry", "image_width4",
           "mark_image_args", "reads_image", "register_geometry", "KERNELS_ROOT",
           "KernelVersion", "KernelVersionError", "assemble_source", "build_hash", "common_source",
           "load_version", "resolve_sources", "source_files", "source_hash", "stage_kernels"]
