"""The OpenCL library search knows Pixel's wrapper, libOpenCL-pixel.so, which exports no
OpenCL entry point but a loader: ``enableOpenCL()`` then ``loadOpenCLPointer(name)``. A
stand-in built here exports only those two and hands out the system ICD loader's entry points,
and only after enableOpenCL was called."""

from __future__ import annotations

import ctypes
import subprocess

from phonetrain import runner as rt

STAND_IN = r"""
#include <dlfcn.h>
#include <stddef.h>
static void *real;
static int enabled;
void enableOpenCL(void) { enabled = 1; real = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL); }
void *loadOpenCLPointer(const char *name) { return enabled && real ? dlsym(real, name) : NULL; }
"""


def test_a_library_with_only_the_pixel_loader_serves_opencl(runner, pocl, tmp_path):
    src = tmp_path / "pixel.c"
    src.write_text(STAND_IN)
    lib = tmp_path / "libOpenCL-pixel.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], check=True)
    stand_in = ctypes.CDLL(str(lib))
    assert hasattr(stand_in, "loadOpenCLPointer") and not hasattr(stand_in, "clGetPlatformIDs")
    doc = rt.info(runner, cl_lib=str(lib))
    assert doc["opencl_error"] is None and doc["runner"]["opencl_library"] == str(lib)
    assert any(p["name"] == "Portable Computing Language" and p["devices"]
               for p in doc["platforms"])
