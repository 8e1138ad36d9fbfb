"""Command line of ``python -m gnnscale.embed`` (``key=value`` arguments, as train.py's)."""

from __future__ import annotations

import sys

KEYS = {"run_dir": str, "out": str, "layer": int, "world_size": int, "batch_size": int,
        "progress": lambda v: v.lower() in ("1", "true", "yes"), "data_root": str}
USAGE = ("usage: python -m gnnscale.embed run_dir=DIR [layer=-1] [out=FILE.npy] "
         "[world_size=1] [batch_size=4096] [progress=true] [data_root=DIR]")


def parse(argv: list[str]) -> dict:
    """``key=value`` arguments into keyword arguments (unknown keys: an error)."""
    kwargs = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or key not in KEYS:
            raise SystemExit(f"error: unknown argument {arg!r}\n{USAGE}")
        try:
            kwargs[key] = KEYS[key](value)
        except ValueError:
            raise SystemExit(f"error: {key}={value!r} is not a valid value\n{USAGE}") from None
    if "run_dir" not in kwargs:
        raise SystemExit(f"error: run_dir= is required\n{USAGE}")
    return kwargs


def main(argv: list[str] | None = None) -> dict:
    """Write the embeddings; print where and how large, each rank's peak RSS."""
    from gnnscale.errors import UserError
    from gnnscale.runner.embed import embed

    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return {}
    try:
        res = embed(**parse(args))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    mib = ", ".join(f"{b / 2**20:.0f}" for b in res["peak_rss_per_rank"])
    print(f"embeddings {res['shape'][0]} x {res['shape'][1]} (layer {res['layer']}) -> "
          f"{res['path']} in {res['seconds']:.1f}s; peak RSS per rank (MiB): {mib}", flush=True)
    return res


if __name__ == "__main__":
    main()
