"""Installs gnnscale; builds the native extension ``gnnscale._C`` when torch is importable.

torch is not a build requirement (pyproject.toml): an install never downloads a torch of its
own. With the user's torch visible to the build (``pip install --no-build-isolation``, or the
Makefile) the extension is compiled against it (gnnscale/native.py: one translation unit, about
half a minute of one core); otherwise, or with ``GNNSCALE_SKIP_NATIVE=1``, the package installs
pure Python and runs the torch-only ops until ``python -m gnnscale.native build`` compiles the
extension against the torch that is installed then. The configs and the C++ sources ship inside
the package (``gnnscale/configs``, ``gnnscale/_csrc``) so an install works from any folder.
"""

import importlib.util
import os
import sys

from setuptools import find_packages, setup

here = os.path.dirname(os.path.abspath(__file__))
os.chdir(here)


def _native_module():
    spec = importlib.util.spec_from_file_location(
        "_gnnscale_native", os.path.join(here, "gnnscale", "native.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torch_importable() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


ext_modules, cmdclass = [], {}
building = any(a in sys.argv for a in ("build_ext", "bdist_wheel", "build", "install",
                                       "develop", "editable_wheel", "bdist_egg"))
if os.environ.get("GNNSCALE_SKIP_NATIVE") == "1":
    pass
elif _torch_importable():
    from torch.utils.cpp_extension import BuildExtension

    native = _native_module()
    ext_modules = [native.extension(relative_to=here)]
    cmdclass["build_ext"] = BuildExtension.with_options(use_ninja=True)
elif building:
    print("gnnscale: torch is not importable in this build environment, so the native "
          "extension is not compiled (the torch-only ops run); build it against your torch "
          "with `python -m gnnscale.native build`, or install with --no-build-isolation",
          file=sys.stderr)

setup(
    packages=find_packages(include=["gnnscale", "gnnscale.*"]) + ["gnnscale.configs",
                                                                   "gnnscale._csrc"],
    package_dir={"gnnscale.configs": "configs", "gnnscale._csrc": "csrc"},
    package_data={"gnnscale.configs": ["*.yaml", "**/*.yaml"],
                  "gnnscale._csrc": ["**/*.cpp", "**/*.h", "**/*.cu", "**/*.cuh"]},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
