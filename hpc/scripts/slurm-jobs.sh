# slurm-jobs.sh: submitting and checking batch jobs, shared by slurm-test.sh (one node)
# and cluster-test.sh (several nodes). Sourced, not run; the caller sets first:
#
#   root       the repository (jobs run there: sbatch --chdir)
#   scripts    hpc/scripts, for examples.sh
#   LOG_PREFIX the script's name, at the start of every message
#   SLURM_CONF (exported) the cluster to submit to
#
# then calls begin_jobs, and reads afterwards: outdir (the jobs' output folder), out (the
# output file of the last job submitted), summary (one line per job: id, name, state,
# exit code, nodes, seconds) and jobs_submitted (their ids).
#
# shellcheck shell=bash

jobs_submitted=()
summary=()
outdir=
was_up=0

# begin_jobs CLUSTER KEEP notes whether the cluster that the script CLUSTER (slurm-local.sh
# or cluster-local.sh) runs is up already, makes $outdir, and sets the exit trap: cancel
# the jobs submitted, take the cluster down (unless it was up before, or KEEP is 1),
# remove $outdir, and exit with the script's status.
begin_jobs() {
	cluster_script=$1 keep=$2
	if "$cluster_script" status >/dev/null 2>&1; then
		was_up=1
	fi
	outdir=$(mktemp -d "/tmp/tdmpi-$LOG_PREFIX.XXXXXX")
	trap end_jobs EXIT
	trap 'exit 143' TERM INT
}

# end_jobs is begin_jobs's exit trap.
end_jobs() {
	local rc=$?
	cancel_submitted
	if [[ $was_up -eq 0 && "$keep" != 1 ]]; then
		"$cluster_script" down || true
	fi
	rm -rf "$outdir"
	exit "$rc"
}

# submit NAME SCRIPT WAIT SBATCH-ARGS... -- SCRIPT-ARGS...: submit, wait at most WAIT s
# (cancelling the job then), record the job's state; sets $out to the job's output file.
# Returns non-zero unless the job ended with JobState=COMPLETED and ExitCode=0:0.
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
	echo "$LOG_PREFIX: submitted $name as job $id"
	local deadline=$((SECONDS + wait))
	# Wait while scontrol reports a state that is not final. A failed query
	# (a busy slurmctld times out) is asked again, not taken for the job's
	# end: squeue's empty answer once ended the wait for a job still running.
	while :; do
		state=$(scontrol show job "$id" 2>/dev/null | sed -n -E 's/.*JobState=([A-Z_]+).*/\1/p' | head -n 1 || true)
		case "$state" in
		'' | PENDING | CONFIGURING | RUNNING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | SIGNALING | STAGE_OUT) ;;
		*) break ;;
		esac
		if ((SECONDS >= deadline)); then
			echo "$LOG_PREFIX: job $id ($name) still queued or running after $wait s; cancelling" >&2
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
	local nodes
	nodes=$(sed -n -E 's/^ *NodeList=([^ ]+).*/\1/p' <<<"$info" | grep -v null | head -n 1)
	summary+=("$(printf 'job %-5s %-24s JobState=%-10s ExitCode=%-5s %-14s %3d s' "$id" "$name" "${state:-?}" "${code:-?}" "${nodes:-}" $((SECONDS - t1)))")
	if [[ "$state" == COMPLETED && "$code" == 0:0 ]]; then
		return 0
	fi
	echo "$LOG_PREFIX: job $id ($name) ended with JobState=${state:-?} ExitCode=${code:-?}; output:" >&2
	sed 's/^/    /' "$out" >&2 || true
	return 1
}

# check_example EXAMPLE NAME: the output of job NAME must meet EXAMPLE's expectations.
check_example() {
	if ! "$scripts/examples.sh" check "$1" "$out"; then
		echo "$LOG_PREFIX: $2 output does not match examples/$1/main.go; output:" >&2
		sed 's/^/    /' "$out" >&2
		return 1
	fi
}

# check_go_test NAME: the output of go test job NAME must have an `ok` line and no failure.
check_go_test() {
	grep -E '^(ok|FAIL|\?) ' "$out" | sed 's/^/    /' || true
	if grep -E -q '^(FAIL|panic:)' "$out" || ! grep -E -q '^ok ' "$out"; then
		echo "$LOG_PREFIX: $1 job reports failures or no passing package; output:" >&2
		sed 's/^/    /' "$out" >&2
		return 1
	fi
}

# cancel_submitted cancels every job submitted (those still running; for the exit trap).
cancel_submitted() {
	if [[ ${#jobs_submitted[@]} -gt 0 ]]; then
		scancel "${jobs_submitted[@]}" 2>/dev/null || true
	fi
}
