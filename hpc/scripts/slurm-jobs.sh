# slurm-jobs.sh: submitting and checking batch jobs, shared by slurm-test.sh (one node)
# and cluster-test.sh (several nodes). Sourced, not run; the caller sets first:
#
#   root       the repository (jobs run there: sbatch --chdir)
#   scripts    hpc/scripts, for examples.sh
#   outdir     a folder for the jobs' output files
#   SLURM_CONF (exported) the cluster to submit to
#
# and reads afterwards: out (the output file of the last job submitted), summary (one
# line per job: id, name, state, exit code, seconds) and jobs_submitted (their ids).
#
# shellcheck shell=bash

jobs_submitted=()
summary=()

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
	while [[ -n "$(squeue -h -j "$id" 2>/dev/null || true)" ]]; do
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
