"""``python -m gnnscale [group=option ...] [key=value ...]`` (or the ``gnnscale-train`` console
script): train as ``train.py`` does in a clone, from any folder, on the configs the package
ships (:data:`gnnscale.paths.CONFIGS`); ``hydra.searchpath=[file:///my/configs]`` adds a
folder of the user's own options (``dataset/mine.yaml`` there is ``dataset=mine``)."""

import os
import sys
import time


def main() -> None:
    """Run one training (or a ``-m`` sweep) from the command line; exits with its status."""
    os.environ.setdefault("GNNSCALE_T0", repr(time.time()))  # runner/phases.py: imports
    from gnnscale.distributed.threads import quiet_waits
    from gnnscale.runner.warm import stop_fork_server, warm_fork_server

    quiet_waits()  # OpenMP threads sleep, not spin, when they wait: before any torch import
    warm_fork_server(sys.argv[1:])

    import hydra
    from omegaconf import DictConfig

    from gnnscale import registry
    from gnnscale.errors import UserError
    from gnnscale.paths import CONFIGS
    from gnnscale.runner import cli

    registry.load_all()
    sweep: list = [None]

    def train(cfg: DictConfig) -> None:
        from gnnscale.runner.run import run
        from gnnscale.runner.runlock import locked

        if sweep[0] is not None:
            return sweep[0].job(cfg, locked(run))
        try:
            locked(run)(cfg)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)

    train.__module__ = "train"  # Hydra names the job (train.log, hydra.job.name) after it
    entry = hydra.main(config_path=str(CONFIGS), config_name="config", version_base=None)(train)
    try:
        try:
            sweep[0] = cli.sweep_first(sys.argv[1:])
        except UserError as err:
            print(f"error: {err}", file=sys.stderr, flush=True)
            sys.exit(2)
        entry()
        if sweep[0] is not None:
            line, status = sweep[0].summary()
            print(line, file=sys.stderr if status else sys.stdout, flush=True)
            sys.exit(status)
    except KeyboardInterrupt:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("gnnscale: interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
    finally:
        stop_fork_server()


if __name__ == "__main__":
    main()
