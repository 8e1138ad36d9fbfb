"""Command line of ``python -m gnnscale.predict`` (``key=value`` arguments, as train.py's)."""

from __future__ import annotations

import sys


def _flag(value: str) -> bool:
    if value.lower() not in ("1", "true", "yes", "0", "false", "no"):
        raise ValueError(value)
    return value.lower() in ("1", "true", "yes")


KEYS = {"run_dir": str, "out": str, "format": str, "split": str, "pairs": str, "top_k": int,
        "sources": str, "batch_size": int, "chunk_sources": int, "chunk_destinations": int,
        "progress": _flag, "data_root": str}
USAGE = ("usage: python -m gnnscale.predict run_dir=DIR [out=DIR (default DIR/predictions)] "
         "[format=parquet|npy]\n  node task: [split=all|train|val|test]\n  link task: "
         "[pairs=FILE|val|test] [top_k=K [sources=FILE] [chunk_sources=256] "
         "[chunk_destinations=16384]]\n  [batch_size=4096] [progress=true] [data_root=DIR]")


def parse(argv: list[str]) -> dict:
    """``key=value`` arguments into keyword arguments; an unknown key, a bad value or no
    ``run_dir`` is a :class:`~gnnscale.errors.UserError` of one line (status 2 in :func:`main`)."""
    from gnnscale.keyvalues import parse_key_values

    return parse_key_values(argv, KEYS)


def main(argv: list[str] | None = None) -> dict:
    """Write the predictions; print each table's path and size."""
    from gnnscale.errors import UserError

    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return {}
    try:
        kwargs = parse(args)  # first: a bad argument is refused before torch is imported
        from gnnscale.distributed.threads import quiet_waits

        quiet_waits()
        from pathlib import Path

        from gnnscale.runner.outputs import table_path
        from gnnscale.runner.predict import predict

        run_dir = kwargs.pop("run_dir")
        out = Path(kwargs.pop("out", None) or Path(run_dir) / "predictions")
        tables = predict(run_dir, out, kwargs.pop("data_root", None), **kwargs)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    for name, cols in tables.items():
        rows = len(next(iter(cols.values())))
        where = table_path(out, name, kwargs.get("format", "parquet"))
        print(f"{name}: {rows} rows ({', '.join(cols)}) -> {where}", flush=True)
    return tables


if __name__ == "__main__":
    from gnnscale.lazy import defer_heavy_imports

    defer_heavy_imports()  # a command of gnnscale's own: torch._dynamo's body on first use
    main()
