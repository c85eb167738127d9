#!/usr/bin/env bash
# cluster-test.sh runs tdmpi across the nodes of the local multi-node cluster
# (cluster-local.sh) and checks every job.
#
# Usage: hpc/scripts/cluster-test.sh [EXAMPLE...]
#
# It starts a 2-node cluster with `cluster-local.sh up 2` (after cleaning what an earlier
# run left), then:
#   1. srun -N 2 from the host shell: one task per node; the two must report distinct
#      hostnames and addresses; and mpirun from the host shell through the cluster's
#      hostfile and launch agent (cluster-agent.sh), the same check
#   2. every example (default: all of examples/), built into $TDMPI_BIN/examples, as a
#      batch job across the 2 nodes with each job script of hpc/slurm/ as written:
#      srun-pmix.sbatch and mpirun.sbatch, sbatch -N 2 --ntasks=NP (NP from the example's
#      `// np:` line, at least 2, so that every job spans both nodes; an example that
#      declares `// nodes: 1`, as memmap, whose ranks share files, runs on one node)
#   3. hpc/slurm/test-suite.sbatch as written on the packages $TDMPI_CLUSTER_TEST_PKGS
#      (if not empty): with srun on 2 ranks (one a node), then with mpirun on 4 ranks (2
#      a node); go test's flags come from $TDMPI_CLUSTER_TEST_GOFLAGS (default -short)
#   4. the cluster tests of package test (TestCluster*: transport, link down, link flap,
#      node crash, rank killed) with TDMPI_CLUSTER_TEST=1, as one process on the host
# Every batch job is waited for (polling scontrol) and must end with JobState=COMPLETED
# and ExitCode=0:0; its output must meet the example's `// expect:` lines (examples.sh
# check), or hold go test's `ok` lines and no FAIL. The script prints a summary with
# each job's state and time, stops the cluster on exit (unless it was up before, or
# TDMPI_CLUSTER_KEEP=1) and exits non-zero on any failure.
#
# Environment: TDMPI_CLUSTER_DIR (see cluster-local.sh), TDMPI_BIN (bin), GO (go),
# TDMPI_CLUSTER_TEST_PKGS, TDMPI_CLUSTER_TEST_GOFLAGS, TDMPI_CLUSTER_JOB_WAIT (seconds
# each example job may take, default 120; a test-suite job gets 10 times that),
# TDMPI_CLUSTER_GO_TEST_FLAGS (flags of step 4's go test, default -v).
set -euo pipefail

cd "$(dirname "$0")/../.."
root=$PWD
scripts=$root/hpc/scripts
GO=${GO:-go}
BIN=${TDMPI_BIN:-bin}
[[ "$BIN" == /* ]] || BIN=$root/$BIN
JOB_WAIT=${TDMPI_CLUSTER_JOB_WAIT:-120}
if [[ "$(id -u)" -eq 0 ]]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Two ranks on one node's two cores, and more on a loaded machine.
export OMPI_MCA_rmaps_base_oversubscribe=1

if [[ $# -eq 0 ]]; then
	mapfile -t examples < <("$scripts/examples.sh" list)
else
	examples=("$@")
fi

# shellcheck source=hpc/scripts/slurm-jobs.sh
source "$scripts/slurm-jobs.sh"
LOG_PREFIX=cluster-test
begin_jobs "$scripts/cluster-local.sh" "${TDMPI_CLUSTER_KEEP:-0}"

t0=$SECONDS
"$scripts/cluster-local.sh" up 2
eval "$("$scripts/cluster-local.sh" env)"
echo "cluster-test: cluster up in $((SECONDS - t0)) s"
failed=0

# spread LABEL COMMAND...: COMMAND prints one "HOSTNAME ADDRESS" line per task; there
# must be 2, with distinct hostnames and addresses.
spread() {
	local label=$1 out
	shift
	if ! out=$(timeout -k 5 60 "$@" 2>&1); then
		echo "cluster-test: $label failed:" >&2
		sed 's/^/    /' <<<"$out" >&2
		failed=1
		return
	fi
	echo "cluster-test: $label:"
	sed 's/^/    /' <<<"$out"
	if [[ $(awk '{print $1}' <<<"$out" | sort -u | wc -l) -ne 2 || $(awk '{print $2}' <<<"$out" | sort -u | wc -l) -ne 2 ]]; then
		echo "cluster-test: $label: want 2 tasks on 2 distinct hostnames and addresses" >&2
		failed=1
	fi
}
# shellcheck disable=SC2016 # expanded by the task's shell
task='echo "$(hostname) $(hostname -I | tr -d " ")"'
spread "srun -N 2 -n 2 from the host" srun -N 2 -n 2 bash -c "$task"
# shellcheck disable=SC2086 # the flags are words on purpose
spread "mpirun --hostfile (launch agent) from the host" mpirun $TDMPI_CLUSTER_MPIRUN_FLAGS -np 2 --map-by node bash -c "$task"

"$scripts/examples.sh" build "${examples[@]}"
for example in "${examples[@]}"; do
	np=$("$scripts/examples.sh" np "$example")
	((np >= 2)) || np=2
	nodes=$("$scripts/examples.sh" nodes "$example")
	((nodes > 0)) || nodes=2
	for style in srun-pmix mpirun; do
		if submit "$example-$style" "$root/hpc/slurm/$style.sbatch" "$JOB_WAIT" -N "$nodes" --ntasks="$np" -- "$BIN/examples/$example"; then
			check_example "$example" "$example-$style" || failed=1
		else
			failed=1
		fi
	done
done

pkgs=${TDMPI_CLUSTER_TEST_PKGS:-}
if [[ -n "$pkgs" ]]; then
	# The build folder of go test must be visible on every node (it is: one file system),
	# and the nodes have no route out: no module download there. The host fetches what
	# the tests import first (cluster-test alone, on a fresh machine, is the first go test).
	"$GO" mod download
	for run in srun:2 mpirun:4; do
		# shellcheck disable=SC2086 # the package list is words on purpose
		if GOFLAGS="${TDMPI_CLUSTER_TEST_GOFLAGS:--short}" GOPROXY=off TDMPI_LAUNCH=${run%%:*} \
			submit "test-suite-${run%%:*}" "$root/hpc/slurm/test-suite.sbatch" $((JOB_WAIT * 10)) \
			-N 2 --ntasks="${run#*:}" --time=00:30:00 -- $pkgs; then
			check_go_test "test-suite-${run%%:*}" || failed=1
		else
			failed=1
		fi
	done
fi

t1=$SECONDS
# shellcheck disable=SC2086 # the flags are words on purpose
if TDMPI_CLUSTER_TEST=1 timeout -k 10 900 "$GO" test -count=1 ${TDMPI_CLUSTER_GO_TEST_FLAGS:--v} -timeout 840s \
	-run '^TestCluster' ./test/ 2>&1 | tee "$outdir/cluster-tests.out" | grep --line-buffered -E '^(=== RUN|--- |\s+cluster_test\.go|ok|FAIL|PASS|panic)'; then
	summary+=("$(printf 'go test -run TestCluster ./test/  %3d s' $((SECONDS - t1)))")
else
	echo "cluster-test: the cluster tests failed; output:" >&2
	sed 's/^/    /' "$outdir/cluster-tests.out" >&2
	summary+=("$(printf 'go test -run TestCluster ./test/  FAIL %3d s' $((SECONDS - t1)))")
	failed=1
fi

echo "cluster-test: summary"
printf '  %s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
	echo "cluster-test: FAIL in $((SECONDS - t0)) s" >&2
	exit 1
fi
echo "cluster-test: PASS in $((SECONDS - t0)) s"
