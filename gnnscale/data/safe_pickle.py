"""Reading the Planetoid raw files, which are pickles, without running code from them.

The files (``ind.cora.x`` etc.) are Python 2 pickles of numpy arrays, scipy CSR matrices and a
``defaultdict(list)``. :func:`load` unpickles them with an allow-list: numpy's array
reconstruction, a plain record standing in for scipy's CSR class (no scipy code runs; its
fields are read into a dense array by :func:`dense`), ``defaultdict`` and ``list``. Any other
global (``os.system``, ``builtins.eval``, ...) raises :class:`UnsafePickleError` before it is
called, so a planted or tampered raw file cannot run code.
"""

from __future__ import annotations

import importlib
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from gnnscale.data.convert import csr_to_dense


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle asks for a global outside the allow-list."""


class SparseRecord:
    """The state of a pickled ``scipy.sparse.csr_matrix`` (data, indices, indptr, shape)."""

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def shape(self) -> tuple[int, int]:
        """The matrix's (rows, columns)."""
        shape: Any = self.__dict__.get("_shape", self.__dict__.get("shape"))
        return int(shape[0]), int(shape[1])


def _numpy_rebuilders() -> tuple:
    """numpy's array rebuilders: ``_reconstruct`` (protocol 2) and ``_frombuffer`` (5)."""
    try:
        multiarray = importlib.import_module("numpy._core.multiarray")  # numpy >= 2
        numeric = importlib.import_module("numpy._core.numeric")
    except ImportError:  # pragma: no cover - numpy 1.x
        multiarray = importlib.import_module("numpy.core.multiarray")
        numeric = importlib.import_module("numpy.core.numeric")
    return multiarray._reconstruct, numeric._frombuffer


def _allowed() -> dict[tuple[str, str], object]:
    import collections

    rebuild, frombuffer = _numpy_rebuilders()
    table: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): rebuild,
        ("numpy._core.multiarray", "_reconstruct"): rebuild,
        ("numpy.core.numeric", "_frombuffer"): frombuffer,
        ("numpy._core.numeric", "_frombuffer"): frombuffer,
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list, ("builtins", "list"): list,
        ("_codecs", "encode"): _latin1_bytes,
    }
    for module in ("scipy.sparse.csr", "scipy.sparse._csr"):
        table[(module, "csr_matrix")] = SparseRecord
    return table


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """What protocol-2 pickles written by Python 3 use for bytes: ``_codecs.encode``."""
    if encoding != "latin1":
        raise UnsafePickleError(f"a Planetoid raw file encodes bytes as latin1, not {encoding!r}")
    return text.encode(encoding)


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, name: str) -> None:
        super().__init__(file, encoding="latin1")
        self.name = name
        self.allowed = _allowed()

    def find_class(self, module: str, name: str):
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self.name} asks the unpickler for {module}.{name}, which a Planetoid raw file "
                "never holds (only numpy arrays, CSR matrices and a dict of lists): refusing to "
                "read it, since unpickling it could run code. Replace the file with a copy from "
                "the Planetoid release (../shared/datasets/planetoid)."
            ) from None


def load(path: str | Path) -> object:
    """Unpickle the Planetoid raw file ``path`` with the allow-list."""
    path = Path(path)
    with open(path, "rb") as f:
        return _RestrictedUnpickler(io.BytesIO(f.read()), str(path)).load()


def dense(obj: object) -> np.ndarray:
    """A loaded matrix (numpy array or CSR record) as a dense array; repeated entries add up."""
    if isinstance(obj, np.ndarray):
        return obj
    if not isinstance(obj, SparseRecord):
        raise TypeError(f"expected a matrix, got {type(obj).__name__}")
    missing = {"data", "indices", "indptr"} - set(obj.__dict__)
    if missing or not ({"_shape", "shape"} & set(obj.__dict__)):
        raise ValueError(f"a pickled CSR matrix without {sorted(missing) or ['shape']}")
    data, indices, indptr = (np.asarray(obj.__dict__[k]) for k in ("data", "indices", "indptr"))
    return csr_to_dense(data, indices, indptr, obj.shape)
