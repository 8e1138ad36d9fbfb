"""gnnscale from Python: train with the same config as ``train.py``, load a finished run, and
get its embeddings and predictions (docs/python-api.md).

:func:`train` composes the config ``train.py`` composes (Hydra's compose API on the package's
``configs/``, from any working directory) from the same ``group=option``/``key=value``
overrides, runs it through the same runner (:func:`gnnscale.runner.run.run`: every check
first, then the ranks) and returns a :class:`Run`. Nothing calls ``sys.exit``: a bad setting is
one :class:`~gnnscale.errors.UserError` (``ConfigError``) naming what to change, a failed rank
one :class:`~gnnscale.distributed.launch.RankFailed` naming the rank; Ctrl-C is a
``KeyboardInterrupt``. Ranks are started, stopped and cleaned up as ``train.py``'s are (no rank
outlives the call; their temp folders are removed when it returns). The fork server that
starts the ranks is kept for the next call in the same process (a notebook's repeated calls
start ranks in a fraction of a second) and ends with the process, or at :func:`shutdown`.
The process's ``$TMPDIR`` is as it was after each call.

``data=`` takes a :class:`~gnnscale.data.graph.GraphStore`, a torch_geometric ``Data`` or a
path (a graph file for ``dataset=custom``, or a processed folder): a graph given from memory is
saved once into ``<data_root>/python-<checksum>/processed`` (a repeated call with the same
graph reuses it) and trained on as ``dataset=saved``. ``ids=`` stores the user's node ids
beside it (:mod:`gnnscale.data.idmap`), so predictions and embeddings come back keyed by them.
``model=`` takes an option name (``"gcn"``) or a model class, which becomes ``model=custom
model.target=<module>.<qualname>`` with ``model_kwargs`` as ``model.kwargs``.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from gnnscale import registry
from gnnscale.errors import ConfigError, UserError

#: Overrides ``data=`` sets; giving one of them as well is refused.
DATA_KEYS = ("dataset", "dataset.path")


def _in_a_rank() -> bool:
    """Whether this process is a rank that is importing the launching script (its
    ``__main__`` re-run by multiprocessing)."""
    return multiprocessing.current_process().name.startswith("gnnscale-rank-")


@contextmanager
def _as_caller_had_it() -> Iterator[None]:
    """The caller's ``$TMPDIR`` and ``tempfile.tempdir`` back on the way out (the launcher
    points them at its private folder, :func:`~gnnscale.distributed.guard.run_temp_dir`);
    Ctrl-C raised as ``KeyboardInterrupt`` (the launcher's ``Terminated``)."""
    from gnnscale.distributed.guard import Terminated

    env, tmp = os.environ.get("TMPDIR"), tempfile.tempdir
    try:
        yield
    except Terminated as err:
        if err.signum == 2:  # SIGINT
            raise KeyboardInterrupt from None
        raise
    finally:
        tempfile.tempdir = tmp
        if env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = env


@contextmanager
def _main_from_stdin_hidden() -> Iterator[None]:
    """A launching script read from standard input (``python - <<EOF``, ``python < x.py``)
    has ``__main__.__file__ == "<stdin>"``, which every rank would run as a file and not find;
    while it trains, hide that name, so ranks start without re-running the script, as they do
    from a notebook or ``python -c``."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _value(overrides: Sequence[str], key: str) -> str | None:
    """The last value ``overrides`` give ``key``."""
    found = None
    for o in overrides:
        if "=" in o and _key(o) == key:
            found = o.split("=", 1)[1]
    return found


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The config ``train.py`` composes for ``overrides`` (without Hydra's own node); a
    misspelt option or key is a :class:`ConfigError` of one line."""
    from gnnscale.compose import compose as compose_root
    from gnnscale.runner.cli import check_options

    registry.load_all()
    overrides = [str(o) for o in overrides]
    check_options(overrides)
    try:
        return compose_root(overrides, job_name="gnnscale", own=True)
    except Exception as err:  # noqa: BLE001 - Hydra's message, first line
        text = str(err).strip()
        raise ConfigError(text.splitlines()[0] if text else repr(err)) from None


def _data_root(overrides: Sequence[str], data_root: str | None) -> Path:
    if data_root is not None:
        return Path(os.path.expanduser(str(data_root))).absolute()
    root = _value(overrides, "data_root") or os.environ.get("GNNSCALE_DATA") or "data"
    return Path(os.path.expanduser(root)).absolute()


def _graph_of(data: Any) -> Any:
    """``data`` as a GraphStore (a torch_geometric ``Data`` converted as ``dataset=custom``
    converts a saved one: symmetrized, a seeded 60/20/20 split of the labelled nodes when it
    has none)."""
    from gnnscale.data.graph import GraphStore

    if isinstance(data, GraphStore):
        return data
    if hasattr(data, "edge_index") and hasattr(data, "keys"):
        from gnnscale.data.checks import check_task
        from gnnscale.data.custom import graph_from_arrays

        keys = data.keys() if callable(data.keys) else data.keys
        arrays = {k: data[k] for k in keys}
        arrays["num_nodes"] = data.num_nodes
        graph = graph_from_arrays(arrays, Path("data="), symmetrize=True, train_ratio=0.6,
                                  val_ratio=0.2, split_seed=0)
        check_task(graph, "data=", inferred_classes="num_classes" not in arrays)
        return graph
    raise UserError(f"data= takes a GraphStore, a torch_geometric Data or a path, got "
                    f"{type(data).__name__}")


def save_data(data: Any, root: Path, ids: Any = None) -> Path:
    """The processed folder of ``data`` under ``root`` (saved on the first call, keyed by its
    checksum and its ids), with the user's ``ids`` (an array for a one-type graph, or a dict
    per node type) saved beside it."""
    import hashlib

    import numpy as np

    from gnnscale.data import processed
    from gnnscale.data.idmap import IdMap

    graph = _graph_of(data)
    key = f"python-{processed.checksum(graph)[:16]}"
    idmap = None
    if ids is not None:
        per_type = ids if isinstance(ids, Mapping) else {graph.node_types[0]: ids}
        try:
            idmap = IdMap(dict(per_type))  # a list of str stays exact (NULs kept)
        except ValueError as err:
            raise UserError(f"ids=: {err}") from None
        for t, arr in idmap.ids.items():
            if t not in graph.node_types or len(arr) != graph.num_nodes_of(t):
                want = graph.num_nodes_of(t) if t in graph.node_types else "no"
                raise UserError(f"ids= gives {len(arr)} ids of node type {t!r}; the graph has "
                                f"{want} nodes of it")
            if len(np.unique(arr)) != len(arr):
                raise UserError(f"ids= of node type {t!r} repeat an id: each node needs its own")
        digest = hashlib.blake2b(digest_size=6)
        stored = idmap.files()  # string ids by their UTF-8 bytes, not object pointers
        for t, arr in sorted(idmap.ids.items()):
            if idmap.is_text(t):
                digest.update(t.encode() + b"utf8" + stored[f"idends__{t}"].tobytes()
                              + stored[f"idtext__{t}"].tobytes())
            else:
                digest.update(t.encode() + arr.dtype.str.encode() + arr.tobytes())
        key += f"-ids{digest.hexdigest()}"
    folder = root / key / "processed"
    if not processed.is_processed(folder):  # the ids are side arrays: listed and verified
        processed.save(graph, folder, share=root,
                       side=None if idmap is None else idmap.files())
    return folder


def _data_overrides(data: Any, root: Path, ids: Any) -> list[str]:
    if isinstance(data, (str, os.PathLike)):
        from gnnscale.data import processed

        path = Path(os.path.expanduser(str(data))).absolute()
        if ids is not None:
            raise UserError("ids= goes with a graph given from memory; a file or folder keeps "
                            "its ids beside it (ids__<type>.npy)")
        for folder in (path, path / "processed"):
            if processed.is_processed(folder):
                return ["dataset=saved", f"dataset.path={folder}"]
        return ["dataset=custom", f"dataset.path={path}"]
    return ["dataset=saved", f"dataset.path={save_data(data, root, ids)}"]


def _model_overrides(model: Any) -> list[str]:
    if isinstance(model, str):
        return [f"model={model}"]
    if not isinstance(model, type):
        raise UserError(f"model= takes an option name (sage, gcn, ...) or a model class, got "
                        f"{type(model).__name__}")
    return ["model=custom", f"model.target={model.__module__}.{model.__qualname__}"]


def _default_run_dir() -> Path:
    """``outputs/<date>/<time>`` as ``train.py``'s, to the microsecond (repeated calls)."""
    now = datetime.datetime.now()
    return Path("outputs").absolute() / now.strftime("%Y-%m-%d") / now.strftime(
        "%H-%M-%S-%f")


def config(overrides: Sequence[str] = (), data: Any = None, model: Any = None,
           model_kwargs: Mapping[str, Any] | None = None, ids: Any = None,
           run_dir: str | os.PathLike | None = None,
           data_root: str | os.PathLike | None = None) -> DictConfig:
    """The config :func:`train` runs (arguments as there), composed and completed."""
    overrides = [str(o) for o in overrides]
    root = _data_root(overrides, None if data_root is None else str(data_root))
    extra = []
    if data is not None:
        given = [o for o in overrides if _key(o) in DATA_KEYS]
        if given:
            raise UserError(f"give data= or {given[0]}, not both")
        extra += _data_overrides(data, root, ids)
    elif ids is not None:
        raise UserError("ids= names the nodes of data=: give data= too")
    if model is not None:
        if any(_key(o) == "model" for o in overrides):
            raise UserError("give model= or a model= override, not both")
        extra += _model_overrides(model)
    if model_kwargs and model is None:
        raise UserError("model_kwargs= goes with model=<class>")
    cfg = compose([*overrides, *extra])
    with open_dict(cfg):
        cfg.data_root = str(root)
        if run_dir is not None:
            cfg.run_dir = str(Path(os.path.expanduser(str(run_dir))).absolute())
        elif _value(overrides, "run_dir") is None:
            cfg.run_dir = str(_default_run_dir())
        if model_kwargs:
            cfg.model.kwargs = dict(model_kwargs)
    if isinstance(model, type) and model.__module__ == "__main__" and \
            cfg.dist.world_size != 1:
        raise UserError(f"model={model.__qualname__} is defined in __main__, which ranks "
                        "cannot import: move the class into a module (or train with "
                        "dist.world_size=1)")
    return cfg


def train(overrides: Sequence[str] = (), data: Any = None, model: Any = None,
          model_kwargs: Mapping[str, Any] | None = None, ids: Any = None,
          run_dir: str | os.PathLike | None = None,
          data_root: str | os.PathLike | None = None, verbose: bool | None = None) -> Run:
    """Train as ``python train.py *overrides`` would and return the finished :class:`Run`.

    ``data``, ``ids``, ``model`` and ``model_kwargs``: see the module docstring; ``run_dir``
    (default ``outputs/<date>/<time>`` under the working directory) and ``data_root`` as the
    keys of the same names. Quiet unless ``verbose=True`` (or a ``verbose=true`` override):
    the per-epoch lines and the summary table go to ``train.log`` in the run folder only, and a
    progress bar shows only on a terminal (``progress=``)."""
    if _in_a_rank():
        raise UserError("gnnscale.train was called while a rank imported the launching script: "
                        "put the call under `if __name__ == \"__main__\":`")
    from gnnscale.distributed.threads import quiet_waits

    quiet_waits()
    with _as_caller_had_it():
        cfg = config(overrides, data, model, model_kwargs, ids, run_dir, data_root)
        if verbose is not None or cfg.get("verbose") is None:
            with open_dict(cfg):
                cfg.verbose = bool(verbose)
        from gnnscale.runner.run import run

        with _main_from_stdin_hidden():
            results = run(cfg)
    return Run(cfg.run_dir, results=results)


def load_run(run_dir: str | os.PathLike, data_root: str | os.PathLike | None = None) -> Run:
    """The finished run in ``run_dir`` (its ``results.json``, and its checkpoint for the
    model); ``data_root`` where its dataset is when it moved."""
    from gnnscale.runner.plan import RunPlan

    path = Path(os.path.expanduser(str(run_dir)))
    if not (path / "results.json").is_file() and not (path / "checkpoint.pt").is_file():
        raise UserError(f"{path} holds no finished run (no results.json or checkpoint.pt)")
    root = None if data_root is None else str(data_root)
    # every config the folder holds checked now: one that names what gnnscale does not
    # declare is refused here, before anything is imported or built
    plan = RunPlan.from_run(path, root, need_checkpoint=False)
    run = Run(path, data_root=root)
    run.__dict__["config"] = plan.config
    return run


def shutdown() -> None:
    """End the fork server that starts ranks (the next multi-rank call starts a new one; it
    also ends with this process)."""
    from gnnscale.runner.warm import stop_fork_server

    stop_fork_server()


def torch_module() -> type:
    """``torch.nn.Module`` (imported when a run's model is)."""
    from torch import nn

    return nn.Module


class Run:
    """A finished run: its folder, config, results, model, and what it predicts."""

    def __init__(self, run_dir: str | os.PathLike, results: dict | None = None,
                 data_root: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self._results = results
        self.data_root = data_root

    def __repr__(self) -> str:
        return f"Run({str(self.run_dir)!r})"

    @property
    def results(self) -> dict:
        """``results.json``: ``summary``, ``history`` (one record per epoch), ``config``."""
        if self._results is None:
            path = self.run_dir / "results.json"
            if not path.is_file():
                raise UserError(f"{path} is missing: the run in {self.run_dir} did not finish")
            self._results = json.loads(path.read_text())
        return self._results

    @property
    def summary(self) -> dict:
        """Final and best metrics (``final_test_acc``, ``best_val``, ...)."""
        return self.results["summary"]

    @property
    def history(self) -> list[dict]:
        """Each epoch's metrics, as ``metrics.jsonl`` holds them."""
        return self.results["history"]

    @property
    def metrics(self) -> dict:
        """The last epoch's metrics."""
        return self.history[-1] if self.history else {}

    @cached_property
    def config(self) -> DictConfig:
        """The config it trained with."""
        if self._results is not None:
            return OmegaConf.create(self.results["config"])
        from gnnscale.runner.plan import RunPlan

        return RunPlan.from_run(self.run_dir, self.data_root, need_checkpoint=False).config

    @cached_property
    def _loaded(self) -> Any:
        from gnnscale.runner.predict import load

        with _as_caller_had_it():
            return load(self.run_dir, self.data_root)

    @property
    def model(self) -> Any:
        """The trained model, on the CPU, in eval mode, callable as a PyG model:
        ``run.model(x, edge_index)`` on a graph that fits memory gives every node's output. A
        ``model=custom`` run's is your own class with the trained weights; a built-in model's
        is gnnscale's (with the task's head), which also takes sampled blocks."""
        model = self._loaded.model
        net = getattr(model, "net", None)
        return net if isinstance(net, torch_module()) else model

    @property
    def graph(self) -> Any:
        """The graph it trained on, as its task prepared it (link: the message graph)."""
        return self._loaded.graph

    def embed(self, out: str | os.PathLike | None = None, layer: int | None = None,
              format: str = "npy", world_size: int = 1, batch_size: int = 4096,
              progress: bool | None = None) -> Any:
        """Every node's rows after layer ``layer`` (0-based; default the last hidden layer,
        ``-1`` the output). Without ``out``: ``(rows, ids)`` in node order, ``rows`` a float32
        numpy array, ``ids`` the dataset's own ids exactly as :meth:`predict`'s ``id`` column
        holds them (string ids: a numpy object array of ``str``, NUL characters kept; else
        int64; a typed graph: ``{node_type: (rows, ids)}``), nothing written to the run
        folder and no id refused. With ``out``: written there keyed by the ids;
        returns where, the shape and the seconds (see :func:`gnnscale.runner.embed.embed`)."""
        import numpy as np

        from gnnscale.runner.embed import embed
        from gnnscale.runner.outputs import show_progress

        if layer is None:  # the last hidden layer (the only one of a 1-layer model)
            layers = int(self.config.model.get("num_layers") or 1)
            layer = max(layers - 2, 0)
        with _as_caller_had_it():
            if out is not None:
                return embed(str(self.run_dir), str(out), layer, world_size, batch_size,
                             show_progress(progress), self.data_root, format)
            with tempfile.TemporaryDirectory(prefix="gnnscale-embed-") as tmp:
                got = embed(str(self.run_dir), str(Path(tmp) / "embeddings.npy"), layer,
                            world_size, batch_size, show_progress(progress), self.data_root,
                            "npy", ids_in_memory=True)
                if got.get("per_type"):
                    return {t: (np.load(e["path"]), e["id_values"])
                            for t, e in got["per_type"].items()}
                return np.load(got["path"]), got["id_values"]

    def predict(self, out: str | os.PathLike | None = None, format: str = "parquet",
                split: str = "all", pairs: Any = None, top_k: int = 0, sources: Any = None,
                batch_size: int = 4096, progress: bool | None = None, **chunks: int
                ) -> dict[str, dict[str, Any]]:
        """Its predictions as tables of columns (``nodes``; ``pairs``, ``top_k``), written to
        ``out`` too when given (see :mod:`gnnscale.runner.predict`). ``pairs``: a file, a
        ``(src, dst)`` tuple of the user's ids, or ``"val"``/``"test"``."""
        from gnnscale.runner.predict import predict_loaded

        with _as_caller_had_it():
            return predict_loaded(self._loaded, out, format, batch_size, progress,
                                  split=split, pairs=pairs, top_k=top_k, sources=sources,
                                  **chunks)
