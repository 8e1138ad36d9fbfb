"""Command line of ``python -m gnnscale.embed`` (``key=value`` arguments, as train.py's)."""

from __future__ import annotations

import sys

KEYS = {"run_dir": str, "out": str, "layer": int, "world_size": int, "batch_size": int,
        "progress": lambda v: v.lower() in ("1", "true", "yes"), "data_root": str,
        "format": str}
USAGE = ("usage: python -m gnnscale.embed run_dir=DIR [layer=-1] [out=FILE] [format=npy|parquet] "
         "[world_size=1] [batch_size=4096] [progress=true] [data_root=DIR]")


def parse(argv: list[str]) -> dict:
    """``key=value`` arguments into keyword arguments; an unknown key, a bad value or no
    ``run_dir`` is a :class:`~gnnscale.errors.UserError` of one line (status 2 in :func:`main`,
    as argparse's)."""
    from gnnscale.keyvalues import parse_key_values

    return parse_key_values(argv, KEYS)


def main(argv: list[str] | None = None) -> dict:
    """Write the embeddings; print where and how large, each rank's peak RSS."""
    from gnnscale.errors import UserError

    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return {}
    failed: tuple = ()  # RankFailed, once torch may be imported
    try:
        kwargs = parse(args)  # first: a bad argument is refused before torch is imported
        from gnnscale.distributed.threads import quiet_waits

        quiet_waits()  # before torch loads here and in the ranks
        from gnnscale.distributed.launch import RankFailed
        from gnnscale.runner.embed import embed

        failed = (RankFailed,)
        res = embed(**kwargs)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except failed as err:  # a rank (or the fork server starting them) failed: named
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    mib = ", ".join(f"{b / 2**20:.0f}" for b in res["peak_rss_per_rank"])
    ids = f" (ids: {res['ids']})" if res.get("ids") else ""
    where = res["path"]
    if res.get("per_type"):  # a typed graph: one array per node type
        where = ", ".join(f"{t} ({v['rows']} rows) {v['path']}"
                          for t, v in res["per_type"].items())
    print(f"embeddings {res['shape'][0]} x {res['shape'][1]} (layer {res['layer']}) -> "
          f"{where}{ids} in {res['seconds']:.1f}s; peak RSS per rank (MiB): {mib}",
          flush=True)
    return res


if __name__ == "__main__":
    from gnnscale.lazy import defer_heavy_imports

    defer_heavy_imports()  # a command of gnnscale's own: torch._dynamo's body on first use
    main()
