#!/usr/bin/env bash
# run.sh runs examples/torchpeer against a real PyTorch peer, in both modes, when this
# machine has one, and says why it skips otherwise (make torchpeer).
#
# The peer is the Python interpreter $TORCHPEER_PYTHON (default: python3), which must
# import torch with the "mpi" backend (torch.distributed.is_mpi_available()) and
# tensordict. If $TORCHPEER_ENV (default /tmp/tdpy/env.sh, a local build of tensordict on
# torch with ProcessGroupMPI) exists, it is sourced first and its $PY is used.
#
# Environment: GO (go), MPIRUN (mpirun), TDMPI_BIN (bin), TDMPI_MPI_TIMEOUT (seconds a run
# may take, default 120).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
MPIRUN=${MPIRUN:-mpirun}
BIN=${TDMPI_BIN:-bin}
TIMEOUT=${TDMPI_MPI_TIMEOUT:-120}
ENVFILE=${TORCHPEER_ENV:-/tmp/tdpy/env.sh}
if [[ "$(id -u)" -eq 0 ]]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}

PY=${TORCHPEER_PYTHON:-}
if [[ -z "$PY" && -f "$ENVFILE" ]]; then
	# shellcheck disable=SC1090
	source "$ENVFILE"
	export TDPY_MPI=1 # that build's switch for torch's MPI process group
fi
PY=${TORCHPEER_PYTHON:-${PY:-python3}}
if ! command -v "$PY" >/dev/null; then
	echo "make torchpeer: skipped: no Python interpreter $PY"
	exit 0
fi
why=$("$PY" - <<'PYEOF' 2>&1
import sys
try:
    import torch, torch.distributed as dist
except Exception as e:
    sys.exit(f"torch does not import ({e})")
if not dist.is_mpi_available():
    sys.exit(f"torch {torch.__version__} has no MPI backend (torch.distributed.is_mpi_available() is False: this build was made without MPI, as PyPI's and Debian's are)")
try:
    import tensordict
except Exception as e:
    sys.exit(f"tensordict does not import ({e})")
PYEOF
) || {
	echo "make torchpeer: skipped: $PY: ${why##*$'\n'}"
	exit 0
}

mkdir -p "$BIN/examples"
"$GO" build -o "$BIN/examples/torchpeer" ./examples/torchpeer
failed=0
for run in "p2p 1" "bcast 2"; do
	set -- $run
	out=$(mktemp)
	# --tag-output: mpirun forwards each rank's output line by line, tagged with
	# its rank (without it, the Python rank's line and the Go rank's "OK" were
	# once joined into one line).
	if TORCHPEER_MODE=$1 timeout -k 10 $((TIMEOUT + 30)) "$MPIRUN" --bind-to none --timeout "$TIMEOUT" --tag-output \
		-np 1 "$PY" examples/torchpeer/learner.py : -np "$2" "$BIN/examples/torchpeer" >"$out" 2>&1 &&
		grep -qE '<stdout>:python: .*: OK$' "$out" && grep -qE '<stdout>:OK$' "$out"; then
		echo "ok   torchpeer $1 (1 Python rank, $2 Go)"
	else
		echo "FAIL torchpeer $1 (1 Python rank, $2 Go):"
		sed 's/^/    /' "$out"
		failed=1
	fi
	rm -f "$out"
done
exit $failed
