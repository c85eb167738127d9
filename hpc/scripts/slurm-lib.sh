# slurm-lib.sh: the shell functions that slurm-local.sh (one node) and cluster-local.sh
# (several nodes in network namespaces) share: logging, pid files, health checks, munged,
# stopping daemons and cancelling jobs. Sourced, not run; the caller sets first:
#
#   LOG_PREFIX     the script's name, at the start of every message
#   WAIT           seconds each health check may take
#   MUNGE_DIR MUNGE_SOCKET MUNGE_PID   munged's folder, socket and pid file
#   CTLD_PID       slurmctld's pid file
#   SLURM_CONF     (exported) the slurm.conf the Slurm commands use
#   BASE PORT      (for conf_common) the state folder and slurmctld's port
#
# shellcheck shell=bash

# log and die print a message prefixed with LOG_PREFIX; die exits 1.
log() { echo "$LOG_PREFIX: $*"; }

die() {
	echo "$LOG_PREFIX: $*" >&2
	exit 1
}

# alive PIDFILE NAME succeeds if the pid file names a running process called NAME.
alive() {
	local pid
	[[ -s "$1" ]] || return 1
	pid=$(<"$1")
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == "$2" ]]
}

# wait_for SECONDS DESCRIPTION COMMAND... retries COMMAND every 0.2 s until it succeeds.
wait_for() {
	local secs=$1 what=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "gave up after ${secs} s waiting for: $what"
			return 1
		fi
		sleep 0.2
	done
}

# munge_ok succeeds if munged answers on MUNGE_SOCKET (a credential round trip).
munge_ok() { munge -n --socket="$MUNGE_SOCKET" | unmunge --socket="$MUNGE_SOCKET"; }

# ctld_ok succeeds if slurmctld of SLURM_CONF answers a ping.
ctld_ok() { scontrol ping | grep -q 'is UP'; }

# start_munged starts munged as user munge on MUNGE_SOCKET, with a key of the cluster's
# own, unless it already runs and answers; it waits until munge answers.
start_munged() {
	if alive "$MUNGE_PID" munged && munge_ok >/dev/null 2>&1; then
		return 0
	fi
	mkdir -p "$MUNGE_DIR"
	chown munge:munge "$MUNGE_DIR"
	chmod 755 "$MUNGE_DIR" # munged refuses a socket directory it considers insecure or private
	if [[ ! -s "$MUNGE_DIR/munge.key" ]]; then
		# A key of our own, so the cluster does not depend on the package's key.
		head -c 1024 /dev/urandom >"$MUNGE_DIR/munge.key"
	fi
	chown munge:munge "$MUNGE_DIR/munge.key"
	chmod 400 "$MUNGE_DIR/munge.key"
	rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
	runuser -u munge -- munged \
		--socket="$MUNGE_SOCKET" \
		--key-file="$MUNGE_DIR/munge.key" \
		--pid-file="$MUNGE_PID" \
		--log-file="$MUNGE_DIR/munged.log" \
		--seed-file="$MUNGE_DIR/munged.seed"
	wait_for "$WAIT" "munge -n | unmunge" munge_ok || {
		tail -n 20 "$MUNGE_DIR/munged.log" >&2 || true
		die "munged did not start"
	}
}

# stop PIDFILE:NAME... sends SIGTERM to each running daemon, then waits for all of them
# to exit (each takes about 2 s), with SIGKILL for any still there after 15 s.
stop() {
	local item pidfile name pid i
	local pids=() names=()
	for item in "$@"; do
		pidfile=${item%%:*} name=${item#*:}
		if alive "$pidfile" "$name"; then
			pid=$(<"$pidfile")
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
			names+=("$name")
		fi
		rm -f "$pidfile"
	done
	for i in "${!pids[@]}"; do
		pid=${pids[$i]}
		local deadline=$((SECONDS + 15))
		while [[ -d "/proc/$pid" ]] && ((SECONDS < deadline)); do
			sleep 0.1
		done
		if [[ -d "/proc/$pid" ]]; then
			log "${names[$i]} ($pid) ignored SIGTERM for 15 s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
		log "stopped ${names[$i]} ($pid)"
	done
}

# cancel_jobs cancels every job of the cluster and waits (at most 15 s) until none is
# left, so that stopping slurmd leaves no job step or rank behind.
cancel_jobs() {
	alive "$CTLD_PID" slurmctld || return 0
	[[ -n "$(squeue -h -o %i 2>/dev/null || true)" ]] || return 0
	log "cancelling jobs: $(squeue -h -o %i | tr '\n' ' ')"
	scancel --partition=debug 2>/dev/null || true
	local deadline=$((SECONDS + 15))
	while [[ -n "$(squeue -h -o %i 2>/dev/null || true)" ]] && ((SECONDS < deadline)); do
		sleep 0.2
	done
}

# conf_common NAME ADDRESS prints the slurm.conf lines both clusters share: cluster NAME,
# slurmctld on this host at ADDRESS and PORT, slurmd on PORT+1, munge on MUNGE_SOCKET,
# state and logs under BASE, slurmd's spool folder, pid and log files SLURMD_SPOOL,
# SLURMD_PIDFILE and SLURMD_LOG, and no cgroups.
conf_common() {
	cat <<EOF
ClusterName=$1
SlurmctldHost=$(hostname -s)($2)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$BASE/ctld
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PIDFILE
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: works without systemd, in containers and in VMs.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
EOF
}
