#!/usr/bin/env bash
# slurm-test.sh submits tdmpi's job scripts to a private single-node Slurm and checks them.
#
# Usage: hpc/scripts/slurm-test.sh [EXAMPLE]
#
# It starts the cluster with slurm-local.sh up, then submits with sbatch:
#   1. hpc/slurm/srun-pmix.sbatch   running $TDMPI_BIN/examples/EXAMPLE with srun --mpi=pmix
#   2. hpc/slurm/mpirun.sbatch      running the same program with mpirun in the allocation
#   3. hpc/slurm/test-suite.sbatch  running go test on $TDMPI_SLURM_TEST_PKGS (if not empty)
#                                   with the launcher $TDMPI_SLURM_TEST_LAUNCH (default srun)
# EXAMPLE defaults to hello; it must be built already (hpc/scripts/examples.sh build) and
# is started with the rank count its main.go declares. For every job it waits (polling
# squeue), then requires JobState=COMPLETED and ExitCode=0:0 from scontrol and checks the
# job's output: the example's `// expect:` lines (see examples.sh), or go test's `ok` lines.
# It prints each job id with its state and time, stops the cluster on exit (unless it
# was already running before, or TDMPI_SLURM_KEEP=1), and exits non-zero on any failure.
#
# TDMPI_MPI=mpich checks the MPICH build instead (see examples.sh): the job scripts then
# launch with srun --mpi=pmi2 (Debian's MPICH speaks PMI-1/2; with pmix or none each
# rank would start as a singleton) and with MPICH's mpiexec inside the allocation, and
# the test suite is built with -tags mpich.
#
# Environment: TDMPI_SLURM_DIR (see slurm-local.sh), TDMPI_BIN (bin),
# TDMPI_SLURM_JOB_WAIT (seconds to wait for each example job, default 120; the test
# suite job gets 10 times that).
set -euo pipefail

cd "$(dirname "$0")/../.."
root=$PWD
scripts=$root/hpc/scripts
example=${1:-hello}
if [[ "${TDMPI_MPI:-openmpi}" == mpich ]]; then
	export TDMPI_MPI GOFLAGS="-tags=mpich${GOFLAGS:+ $GOFLAGS}" # for the jobs (sbatch --export=ALL)
fi
JOB_WAIT=${TDMPI_SLURM_JOB_WAIT:-120}
prog=$("$root/hpc/scripts/examples.sh" path "$example")
[[ "$prog" == /* ]] || prog=$root/$prog

[[ -x "$prog" ]] || {
	echo "slurm-test: $prog does not exist; run: hpc/scripts/examples.sh build $example" >&2
	exit 2
}
np=$("$scripts/examples.sh" np "$example")

eval "$("$scripts/slurm-local.sh" env)"
was_up=0
if "$scripts/slurm-local.sh" status >/dev/null 2>&1; then
	was_up=1
fi
outdir=$(mktemp -d /tmp/tdmpi-slurm-test.XXXXXX)
jobs_submitted=()
cleanup() {
	local rc=$?
	if [[ ${#jobs_submitted[@]} -gt 0 ]]; then
		scancel "${jobs_submitted[@]}" 2>/dev/null || true
	fi
	if [[ $was_up -eq 0 && "${TDMPI_SLURM_KEEP:-0}" != 1 ]]; then
		"$scripts/slurm-local.sh" down || true
	fi
	rm -rf "$outdir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

t0=$SECONDS
"$scripts/slurm-local.sh" up
echo "slurm-test: cluster up in $((SECONDS - t0)) s"

failed=0
summary=()

# submit NAME SCRIPT WAIT SBATCH-ARGS... -- SCRIPT-ARGS...: submit, wait, check state;
# sets $out to the job's output file. Returns non-zero if the job did not complete cleanly.
submit() {
	local name=$1 script=$2 wait=$3
	shift 3
	local sargs=()
	while [[ $# -gt 0 && "$1" != -- ]]; do
		sargs+=("$1")
		shift
	done
	shift || true
	out=$outdir/$name.out
	local id t1=$SECONDS state code
	id=$(sbatch --parsable --chdir="$root" --output="$out" "${sargs[@]}" "$script" "$@")
	id=${id%%;*}
	jobs_submitted+=("$id")
	echo "slurm-test: submitted $name as job $id"
	local deadline=$((SECONDS + wait))
	while [[ -n "$(squeue -h -j "$id" 2>/dev/null || true)" ]]; do
		if ((SECONDS >= deadline)); then
			echo "slurm-test: job $id ($name) still queued or running after $wait s; cancelling" >&2
			scancel "$id" || true
			sleep 1
			break
		fi
		sleep 0.2
	done
	local info
	info=$(scontrol show job "$id" 2>&1 || true)
	state=$(sed -n -E 's/.*JobState=([A-Z_]+).*/\1/p' <<<"$info" | head -n 1)
	code=$(sed -n -E 's/.*[^a-zA-Z]ExitCode=([0-9]+:[0-9]+).*/\1/p' <<<"$info" | head -n 1)
	summary+=("$(printf 'job %-5s %-12s JobState=%-10s ExitCode=%-5s %3d s' "$id" "$name" "${state:-?}" "${code:-?}" $((SECONDS - t1)))")
	if [[ "$state" == COMPLETED && "$code" == 0:0 ]]; then
		return 0
	fi
	echo "slurm-test: job $id ($name) ended with JobState=${state:-?} ExitCode=${code:-?}; output:" >&2
	sed 's/^/    /' "$out" >&2 || true
	return 1
}

# check_example NAME: the output of an example job must meet the example's expectations.
check_example() {
	if ! "$scripts/examples.sh" check "$example" "$out"; then
		echo "slurm-test: $1 output does not match examples/$example/main.go; output:" >&2
		sed 's/^/    /' "$out" >&2
		return 1
	fi
}

for style in srun-pmix mpirun; do
	if submit "$style" "$root/hpc/slurm/$style.sbatch" "$JOB_WAIT" --ntasks="$np" -- "$prog"; then
		check_example "$style" || failed=1
	else
		failed=1
	fi
done

pkgs=${TDMPI_SLURM_TEST_PKGS:-}
if [[ -n "$pkgs" ]]; then
	# shellcheck disable=SC2086 # the package list is words on purpose
	if TDMPI_LAUNCH=${TDMPI_SLURM_TEST_LAUNCH:-srun} submit test-suite "$root/hpc/slurm/test-suite.sbatch" \
		$((JOB_WAIT * 10)) --ntasks=2 --time=00:30:00 -- $pkgs; then
		grep -E '^(ok|FAIL|\?) ' "$out" | sed 's/^/    /' || true
		if grep -E -q '^(FAIL|panic:)' "$out" || ! grep -E -q '^ok ' "$out"; then
			echo "slurm-test: test-suite job reports failures or no passing package; output:" >&2
			sed 's/^/    /' "$out" >&2
			failed=1
		fi
	else
		failed=1
	fi
fi

echo "slurm-test: summary"
printf '  %s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
	echo "slurm-test: FAIL" >&2
	exit 1
fi
echo "slurm-test: PASS in $((SECONDS - t0)) s"
