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
# scontrol), then requires JobState=COMPLETED and ExitCode=0:0 from scontrol and checks the
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
# shellcheck source=hpc/scripts/slurm-jobs.sh
source "$scripts/slurm-jobs.sh"
LOG_PREFIX=slurm-test
begin_jobs "$scripts/slurm-local.sh" "${TDMPI_SLURM_KEEP:-0}"

t0=$SECONDS
"$scripts/slurm-local.sh" up
echo "slurm-test: cluster up in $((SECONDS - t0)) s"

failed=0

for style in srun-pmix mpirun; do
	if submit "$style" "$root/hpc/slurm/$style.sbatch" "$JOB_WAIT" --ntasks="$np" -- "$prog"; then
		check_example "$example" "$style" || failed=1
	else
		failed=1
	fi
done

pkgs=${TDMPI_SLURM_TEST_PKGS:-}
if [[ -n "$pkgs" ]]; then
	# shellcheck disable=SC2086 # the package list is words on purpose
	if TDMPI_LAUNCH=${TDMPI_SLURM_TEST_LAUNCH:-srun} submit test-suite "$root/hpc/slurm/test-suite.sbatch" \
		$((JOB_WAIT * 10)) --ntasks=2 --time=00:30:00 -- $pkgs; then
		check_go_test test-suite || failed=1
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
