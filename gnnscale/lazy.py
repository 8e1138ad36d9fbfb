"""Exports a package loads on first use, so that importing the package (for its torch-free
``schemas``) imports nothing heavy; and third-party modules that PyG imports but a run does not
use, deferred to their first use (:func:`defer_heavy_imports`)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import types
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a module path)
    the first time ``name`` is asked for."""

    def __getattr__(name: str) -> object:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


#: Modules imported by PyG (``torch_geometric/isinstance.py``) that it does not use while
#: gnnscale runs: ``torch._dynamo`` pulls in sympy, the fx symbolic-shapes machinery and most of
#: inductor (~1.5 s of a launch's CPU), for ``torch.compile`` alone.
DEFERRED = ("torch._dynamo",)
_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module whose body has not run yet: it runs at the first read of a name the module
    does not have. Its ``__file__``, ``__spec__``, ``__path__`` are there from the start, so
    that what scans ``sys.modules`` (``inspect.getmodule``) does not run it in the middle of
    another import; other dunder names (but ``__all__``) are absent until it has run."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") and name.endswith("__") and name != "__all__":
            raise AttributeError(name)
        _run_body(self)
        return getattr(self, name)


def _run_body(module: types.ModuleType) -> None:
    """Run a :class:`_Deferred` module's body now (once, whichever thread asks first); on an
    error it leaves ``sys.modules`` as a failed import does."""
    with _LOCK:
        if type(module) is not _Deferred:
            return
        spec = module.__spec__
        assert spec is not None and isinstance(spec.loader, _DeferLoader)
        real = spec.loader.real
        spec.loader = module.__loader__ = real
        setattr(module, "__class__", types.ModuleType)  # noqa: B010 - mypy narrowed its type
        try:
            real.exec_module(module)
        except BaseException:
            sys.modules.pop(spec.name, None)
            raise


class _DeferLoader(importlib.abc.Loader):
    """Creates the module as its own loader would, and leaves its body for later."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: ModuleSpec) -> types.ModuleType | None:
        """The real loader's module (None: Python's default)."""
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        """Mark ``module`` deferred: its body runs on first use."""
        module.__class__ = _Deferred


class _Loaded(importlib.abc.Loader):
    """A submodule that its package's deferred body imported while Python was looking for it:
    the module itself, not a second copy (its own spec put back)."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        """The module already imported."""
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: its spec back in place of the stand-in's."""
        module.__spec__ = self.spec


class _Defer(importlib.abc.MetaPathFinder):
    """Finds each :data:`DEFERRED` module where Python would, and loads it on first use."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> ModuleSpec | None:
        """The module's own spec with a deferring loader; None for every other module."""
        parent = name.rpartition(".")[0]
        if parent in DEFERRED and type(sys.modules.get(parent)) is _Deferred:
            _run_body(sys.modules[parent])  # a package's body runs before its submodules
            if name in sys.modules:  # and it imported this one
                return ModuleSpec(name, _Loaded(sys.modules[name]))
            return None
        if name not in DEFERRED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _DeferLoader(spec.loader)
        return spec


def defer_heavy_imports() -> None:
    """Make ``import torch._dynamo`` (what ``import torch_geometric`` runs) cheap until the
    module is used: its body runs at the first read of one of its names (``torch.compile``
    reads them, and works as before). Called by gnnscale's own commands (train.py,
    ``python -m gnnscale``, ``gnnscale.predict``, ``gnnscale.embed``), never by ``import
    gnnscale``: a library leaves its caller's import system as it is. Once per process;
    ``GNNSCALE_EAGER_IMPORTS=1`` turns it off, and the rank fork server undoes it
    (:func:`eager_imports`)."""
    if os.environ.get("GNNSCALE_EAGER_IMPORTS") == "1":
        return
    if not any(isinstance(f, _Defer) for f in sys.meta_path):
        sys.meta_path.insert(0, _Defer())


def eager_imports() -> None:
    """Undo :func:`defer_heavy_imports` in this process, and run the body of a deferred module
    already imported: for the rank fork server, whose ranks use ``torch._dynamo`` (DDP reads
    it when built) and would each run its body after the fork, where the server runs it once."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Defer)]
    for name in DEFERRED:
        module = sys.modules.get(name)
        if type(module) is _Deferred:
            _run_body(module)
