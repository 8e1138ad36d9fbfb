#!/usr/bin/env bash
# Installs gnnscale the way a user does, into a fresh venv of its own (no system site
# packages), and trains one 2-rank run from a folder outside the clone.
#
#   scripts/check_install.sh [TORCH_SPEC] [MODE]
#
# TORCH_SPEC: the torch the user has (default torch==2.13.0; extra pip arguments such as
#   "torch==2.12.1 --index-url https://download.pytorch.org/whl/cpu" pass through TORCH_PIP).
# MODE: wheel   - `pip wheel --no-build-isolation` against the clone's venv's torch (what
#                 `python -m build --no-isolation` makes), installed into the fresh venv;
#       plain   - `pip install <clone>` (isolated build: no torch there, so a pure-Python
#                 install) then `python -m gnnscale.native build` against the venv's torch;
#       nobuild - as plain, without the native build: the torch-only ops must train too.
# Works in $CHECK_DIR when given (and leaves its venv and run folder there), else in a new /tmp
# folder that is removed at any exit; prints each step's wall seconds and ends with
# "install check: ok".
set -euo pipefail
CLONE="$(cd "$(dirname "$0")/.." && pwd)"
TORCH_SPEC="${1:-torch==2.13.0}"
MODE="${2:-wheel}"
if [ -z "${CHECK_DIR:-}" ]; then
  CHECK_DIR="$(mktemp -d /tmp/gnnscale-install-XXXXXX)"
  trap 'rm -rf "$CHECK_DIR"' EXIT
  trap 'exit 130' INT TERM  # the EXIT trap then removes the folder
fi
HOST_PY="${HOST_PY:-python3}"
VENV="$CHECK_DIR/venv"
PY="$VENV/bin/python"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"

step() { echo "== $1 ($(( $(date +%s) - T0 )) s so far)"; }
T0=$(date +%s)
mkdir -p "$CHECK_DIR"
step "fresh venv in $VENV"
"$HOST_PY" -m venv "$VENV"
# shellcheck disable=SC2086  # TORCH_SPEC may carry pip options
"$PY" -m pip install -q $TORCH_SPEC ${TORCH_PIP:-}
"$PY" -c "import torch; print('torch', torch.__version__)"

case "$MODE" in
  wheel)
    step "wheel built against the clone's torch"
    "$CLONE/.venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation "$CLONE" \
        -w "$CHECK_DIR/dist"
    "$PY" -m pip install -q "$CHECK_DIR"/dist/gnnscale-*.whl ;;
  plain|nobuild)
    step "pip install <clone> (isolated build)"
    "$PY" -m pip install -q "$CLONE"
    if [ "$MODE" = plain ]; then
      step "python -m gnnscale.native build"
      (cd "$CHECK_DIR" && "$PY" -m gnnscale.native build)
    fi ;;
  *) echo "unknown MODE $MODE (wheel, plain, nobuild)" >&2; exit 2 ;;
esac

RUN="$CHECK_DIR/run"
mkdir -p "$RUN"
cd "$RUN"  # outside the clone: configs come from the package
step "status from $RUN"
"$PY" -m gnnscale.native status
if [ "$MODE" != nobuild ]; then
  "$PY" -c "from gnnscale.ops import available; assert available(), 'native ops not loaded'"
fi
step "2-rank training: python -m gnnscale"
"$PY" -m gnnscale dataset=synthetic dataset.preset=tiny model.hidden=32 model.num_layers=2 \
    'sampler.fanouts=[5,5]' strategy.batch_size=128 eval_batch_size=512 logger=none \
    epochs=2 dist.world_size=2 progress=false hydra.run.dir="$RUN/cli"
test -f "$RUN/cli/results.json" || { echo "no results.json from the CLI run" >&2; exit 1; }
step "gnnscale.train([...]) and predict from Python"
"$PY" - "$RUN" <<'EOF'
import sys
from pathlib import Path

import gnnscale

run = gnnscale.train(["dataset=synthetic", "dataset.preset=tiny", "model.hidden=32",
                      "model.num_layers=2", "sampler.fanouts=[5,5]", "epochs=1",
                      "dist.world_size=1", "logger=none", "progress=false"],
                     run_dir=Path(sys.argv[1]) / "api")
print("trained", run.run_dir)
out = run.predict(out=Path(sys.argv[1]) / "predictions")
print("predicted", sorted(out))
EOF
step "install check: ok"
