"""``python -m gnnscale [group=option ...] [key=value ...]`` (or the ``gnnscale-train`` console
script): train from any folder, on the configs the package ships
(:data:`gnnscale.paths.CONFIGS`); ``hydra.searchpath=[file:///my/configs]`` adds a folder of the
user's own options (``dataset/mine.yaml`` there is ``dataset=mine``). ``train.py`` in a clone
is this same entry (:func:`main`)."""

import os
import sys
import time


def main() -> None:
    """Run one training (or a ``-m`` sweep) from the command line; exits with its status. The
    one entry of ``train.py``, ``python -m gnnscale`` and ``gnnscale-train``: the fork server
    started first (its imports on the other core while the launcher composes), a sweep's jobs
    checked before any trains, a single run's config composed once; a configuration error is
    one line, status 2 (in a sweep: reported, and the other jobs go on)."""
    os.environ.setdefault("GNNSCALE_T0", repr(time.time()))  # runner/phases.py: imports
    from gnnscale.lazy import defer_heavy_imports

    defer_heavy_imports()  # a command of gnnscale's own: torch._dynamo's body on first use
    from gnnscale.distributed.threads import quiet_waits
    from gnnscale.runner.warm import compose_once, stop_fork_server, warm_fork_server

    quiet_waits()  # OpenMP threads sleep, not spin, when they wait: before any torch import
    warm_fork_server(sys.argv[1:])  # ranks' imports on the other core, while we compose

    import hydra
    from omegaconf import DictConfig

    from gnnscale import registry
    from gnnscale.errors import UserError
    from gnnscale.paths import CONFIGS
    from gnnscale.runner import cli

    registry.load_all()  # every option's typed schema into Hydra's ConfigStore
    sweep: list = [None]  # a -m run's jobs (gnnscale/runner/cli.py)

    def train(cfg: DictConfig) -> None:
        from gnnscale.runner.run import run
        from gnnscale.runner.runlock import locked

        if sweep[0] is not None:  # each job: its folder locked before Hydra's record is written
            return sweep[0].job(cfg, locked(run))
        try:
            locked(run)(cfg)
        except UserError as err:  # what to change, without a traceback; status 2 like argparse
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
        except RuntimeError as err:  # a rank failed: its message carries the rank's traceback
            from gnnscale.distributed.launch import RankFailed

            if not isinstance(err, RankFailed):
                raise
            print(f"error: {err}", file=sys.stderr, flush=True)  # not the launcher's own stack
            sys.exit(1)

    train.__module__ = "train"  # Hydra names the job (train.log, hydra.job.name) after it
    entry = hydra.main(config_path=str(CONFIGS), config_name="config", version_base=None)(train)
    try:
        try:
            sweep[0] = cli.sweep_first(sys.argv[1:])
        except UserError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
        compose_once(sys.argv[1:])  # a single run's config composed once, not twice
        entry()
        if sweep[0] is not None:
            line, status = sweep[0].summary()
            print(line, file=sys.stderr if status else sys.stdout, flush=True)
            sys.exit(status)
    except KeyboardInterrupt:  # Ctrl-C outside the rank launcher (a 1-rank run, processing)
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one: the clean-up goes on
        print("gnnscale: interrupted", file=sys.stderr, flush=True)
        sys.exit(130)  # 128 + SIGINT, as a shell reports it; exit handlers clean up
    finally:
        stop_fork_server()  # ranks are done; one still importing must not outlive us
        import gc  # skip collecting torch/PyG's object graph at exit (~0.8 s): exit handlers

        gc.freeze()  # still run, the OS frees the memory


if __name__ == "__main__":
    main()
