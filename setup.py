"""Builds the native extension ``gnnscale._C`` against the torch that is installed.

Sources are laid out like pyg-lib: ``csrc/<domain>/<op>.cpp`` (schemas and argument checks),
``csrc/<domain>/cpu/*.cpp`` (CPU kernels), ``csrc/<domain>/cuda/*.cu`` (CUDA kernels, built only
when torch has CUDA and nvcc exists; none are written yet), ``csrc/utils/`` (shared helpers).
"""

import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
cuda_sources = sorted(glob.glob(os.path.join("csrc", "**", "cuda", "*.cu"), recursive=True))
include_dirs = [os.path.join(here, "csrc")]  # includes are written from csrc/: "utils/rng.h"
flags = {"cxx": ["-O3", "-fopenmp"]}  # torch adds the C++ standard it needs (C++20)
with_cuda = torch.cuda.is_available() and CUDA_HOME is not None and cuda_sources
if with_cuda and os.environ.get("GNNSCALE_NO_CUDA") != "1":
    ext = CUDAExtension(
        "gnnscale._C",
        sources + cuda_sources,
        include_dirs=include_dirs,
        extra_compile_args={**flags, "nvcc": ["-O3"]},
        define_macros=[("GNNSCALE_WITH_CUDA", None)],
        extra_link_args=["-fopenmp"],
    )
else:
    ext = CppExtension("gnnscale._C", sources, include_dirs=include_dirs,
                       extra_compile_args=flags, extra_link_args=["-fopenmp"])

if os.environ.get("GNNSCALE_SKIP_NATIVE") == "1":  # the Makefile builds it in place
    ext = None
setup(
    ext_modules=[ext] if ext else [],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
