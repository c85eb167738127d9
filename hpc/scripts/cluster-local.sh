#!/usr/bin/env bash
# cluster-local.sh runs a private multi-node cluster on one machine: each node is a
# Linux network namespace with its own address and hostname, running its own slurmd.
#
# Usage: hpc/scripts/cluster-local.sh up [N] | down | status | env | nodes | pids NODE |
#        link NODE up|down | crash NODE | boot NODE | exec NODE COMMAND...
#
#   up [N]    start N nodes (2 to 4, default 2): cleans up what an earlier run left
#             (after a crash, too), then creates the bridge, the namespaces and their
#             links, starts munged, slurmctld and one slurmd per node, and waits until
#             munge answers, `scontrol ping` says UP and sinfo shows every node idle
#   down      cancel the cluster's jobs, stop every daemon and every process inside
#             the nodes, remove the namespaces, links and bridge; the state folder is
#             kept (its logs help after a failure)
#   status    print the daemons, the nodes and their addresses, and the exports to use
#   env       print the `export NAME=value` lines the host shell needs:
#             eval "$(hpc/scripts/cluster-local.sh env)"
#   nodes     print the node names of the running cluster, one a line
#   pids NODE print the pids of every process inside NODE's network namespace
#   link NODE up|down   set NODE's link (the host end of its veth pair) up or down
#   crash NODE          SIGKILL NODE's slurmd and every process inside NODE (job steps,
#                       ranks), as a power cut would; the namespaces and the link stay
#   boot NODE           start NODE's slurmd again, resume it in Slurm, wait until idle
#   exec NODE COMMAND   run COMMAND inside NODE's namespaces
#
# The nodes, for N = 2 and the default address prefix 10.213.0:
#
#   host (bridge tdbr0)   10.213.0.1    slurmctld, munged, and the host shell's srun/mpirun
#   tdnode1 (tdveth1)     10.213.0.11   slurmd; hostname tdnode1, /etc/hosts of the cluster
#   tdnode2 (tdveth2)     10.213.0.12   slurmd; ...
#
# Every node is a network namespace (ip netns) whose interface eth0 is one end of a
# veth pair; the other end (tdvethI) is a port of the bridge tdbr0. The bridge has no
# other port and the host does not forward: the range is used only on these links and
# traffic never leaves the machine. A node's UTS and mount namespaces are held by a
# small process (`sleep infinity`) started in the network namespace: its hostname is
# the node's name and its /etc/hosts lists the cluster. Everything of a node, slurmd
# included, runs inside all three namespaces (`nsenter -t HOLDER -n -u -m`); the file
# system is otherwise shared, like a cluster's shared home. To fail a node's link:
#   ip link set tdveth2 down     (and up again)
#
# Open MPI's own launcher reaches the nodes through hpc/scripts/cluster-agent.sh, a
# plm_rsh_agent that enters the node's namespaces in place of ssh:
#   mpirun $TDMPI_CLUSTER_MPIRUN_FLAGS -np 2 PROGRAM
# (the variable, from `env`, holds --hostfile, the agent and the interfaces to use).
#
# Files: everything under one state folder, $TDMPI_CLUSTER_DIR (default
# /tmp/tdmpi-cluster): slurm.conf, hosts, hostfile, munge/, ctld/, spool/NODE/, log/,
# run/ (pid files). Outside it the script makes only the namespaces (ip netns: the
# mounts under /run/netns) and the links; `down` removes them all.
#
# It does not collide with slurm-local.sh's single-node Slurm (own folder, ports, munge
# socket and cluster name): both can run at once. Needs root, iproute2, util-linux
# (nsenter) and the Debian packages slurm-wlm and munge.
#
# Environment:
#   TDMPI_CLUSTER_DIR    state folder (default /tmp/tdmpi-cluster)
#   TDMPI_CLUSTER_PORT   slurmctld port; slurmd uses the next one (default 6830)
#   TDMPI_CLUSTER_NET    first three numbers of the nodes' addresses (default 10.213.0)
#   TDMPI_CLUSTER_WAIT   seconds to wait for each health check (default 30)
set -euo pipefail

BASE=${TDMPI_CLUSTER_DIR:-/tmp/tdmpi-cluster}
PORT=${TDMPI_CLUSTER_PORT:-6830}
NET=${TDMPI_CLUSTER_NET:-10.213.0}
WAIT=${TDMPI_CLUSTER_WAIT:-30}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
AGENT=$SCRIPTS/cluster-agent.sh
CONF=$BASE/slurm.conf
MUNGE_DIR=$BASE/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
MUNGE_PID=$MUNGE_DIR/munged.pid
CTLD_PID=$BASE/run/slurmctld.pid
BRIDGE=tdbr0
NODE_PREFIX=tdnode
VETH_PREFIX=tdveth
MAX_NODES=4
HOST_ADDR=$NET.1
export SLURM_CONF=$CONF
LOG_PREFIX=cluster-local
# shellcheck source=hpc/scripts/slurm-lib.sh
source "$SCRIPTS/slurm-lib.sh"

node_name() { echo "$NODE_PREFIX$1"; }
node_addr() { echo "$NET.$((10 + $1))"; }
holder_pidfile() { echo "$BASE/run/holder-$1.pid"; }
slurmd_pidfile() { echo "$BASE/run/slurmd-$1.pid"; }

# nodes_ready N succeeds when sinfo lists N nodes, every one of them idle (or in use).
nodes_ready() {
	local states
	states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
	[[ $(wc -l <<<"$states") -eq $1 ]] || return 1
	! grep -v -E ' (idle|mix|alloc|comp)$' <<<"$states" >/dev/null
}

# existing_nodes prints the numbers of the node namespaces that exist now.
existing_nodes() {
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ "$ns" =~ ^$NODE_PREFIX([0-9]+)$ ]] && echo "${BASH_REMATCH[1]}"
	done
	return 0
}

require() {
	[[ "$(id -u)" -eq 0 ]] || die "must run as root (network namespaces, SlurmUser=root, munged as user munge)"
	local c
	for c in ip nsenter unshare munged munge unmunge slurmctld slurmd scontrol sinfo runuser; do
		command -v "$c" >/dev/null 2>&1 || die "$c not found; install the Debian packages: apt-get install iproute2 util-linux slurm-wlm munge"
	done
	id munge >/dev/null 2>&1 || die "user munge does not exist; install the Debian package munge"
}

write_files() {
	local n=$1 i node_hw
	# slurmd -C prints this machine's node line (cores, memory) and an UpTime line;
	# every node gets the real hardware, minus the NodeName, which we set.
	node_hw=$(slurmd -C | head -n 1)
	[[ "$node_hw" == NodeName=* ]] || die "unexpected output of slurmd -C: $node_hw"
	node_hw=${node_hw#NodeName=* }
	{
		echo "# Generated by hpc/scripts/cluster-local.sh; rewritten on every up."
		echo "127.0.0.1 localhost"
		echo "$HOST_ADDR $(hostname -s) tdhead"
		for ((i = 1; i <= n; i++)); do
			echo "$(node_addr "$i") $(node_name "$i")"
		done
	} >"$BASE/hosts"
	: >"$BASE/hostfile"
	for ((i = 1; i <= n; i++)); do
		echo "$(node_name "$i") slots=$(nproc)" >>"$BASE/hostfile"
	done
	cat >"$CONF.tmp" <<EOF
# Generated by hpc/scripts/cluster-local.sh; rewritten on every up.
# %n is the node's name: the nodes share the file system, not these folders.
$(SLURMD_SPOOL="$BASE/spool/%n" SLURMD_PIDFILE="$BASE/run/slurmd-%n.pid" SLURMD_LOG="$BASE/log/slurmd-%n.log" conf_common tdmpicluster "$HOST_ADDR")
TmpFS=$BASE/spool/%n/tmp
# Short intervals: a test cluster should notice a lost node quickly (slurmctld
# pings every SlurmdTimeout/3 s and marks a node DOWN after SlurmdTimeout s).
SlurmctldTimeout=30
SlurmdTimeout=10
MessageTimeout=5
InactiveLimit=0
MinJobAge=300
KillWait=5
EOF
	for ((i = 1; i <= n; i++)); do
		echo "NodeName=$(node_name "$i") NodeHostname=$(node_name "$i") NodeAddr=$(node_addr "$i") $node_hw State=UNKNOWN" >>"$CONF.tmp"
	done
	echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$CONF.tmp"
	mv "$CONF.tmp" "$CONF"
}

# make_node I creates node I: namespace, veth pair on the bridge, address, and the
# holder of its hostname and /etc/hosts.
make_node() {
	local i=$1 name addr veth
	name=$(node_name "$i") addr=$(node_addr "$i") veth=$VETH_PREFIX$i
	ip netns add "$name"
	ip link add "$veth" type veth peer name eth0 netns "$name"
	ip link set "$veth" master "$BRIDGE" up
	ip -n "$name" addr add "$addr/24" dev eth0
	ip -n "$name" link set lo up
	ip -n "$name" link set eth0 up
	mkdir -p "$BASE/spool/$name/tmp"
	# The holder enters the network namespace and makes a UTS and a mount namespace of
	# its own (not `ip netns exec`, whose fresh /sys lacks the cgroup mounts slurmd
	# reads). The bind mount of /etc/hosts lives and dies with that mount namespace;
	# mounts made later on the host still reach it (slave propagation).
	local pidfile
	pidfile=$(holder_pidfile "$name")
	rm -f "$pidfile"
	nsenter --net="/run/netns/$name" -- unshare --uts --mount --propagation slave --fork -- /bin/sh -c '
		hostname "$1" && mount --bind "$2" /etc/hosts && echo $$ >"$3.tmp" && mv "$3.tmp" "$3" &&
		exec sleep infinity' holder "$name" "$BASE/hosts" "$pidfile" </dev/null >/dev/null 2>&1 &
	disown
	wait_for 10 "the holder of $name" test -s "$pidfile" || die "$name: the namespace holder did not start"
}

# in_node NAME COMMAND... runs COMMAND inside node NAME (network, UTS and mount namespaces).
in_node() {
	local name=$1 pid
	shift
	pid=$(<"$(holder_pidfile "$name")")
	nsenter -t "$pid" -n -u -m -- "$@"
}

up() {
	local n=${1:-2}
	[[ "$n" =~ ^[0-9]+$ ]] && ((n >= 2 && n <= MAX_NODES)) || die "up: N must be 2 to $MAX_NODES, not $n"
	require
	local t0=$SECONDS i name
	if status_ok "$n" >/dev/null 2>&1; then
		log "already up with $n nodes ($CONF)"
		return 0
	fi
	# Whatever an earlier run left (a crash, a kill, another N): remove it first.
	down >/dev/null
	mkdir -p "$BASE" "$BASE/ctld" "$BASE/spool" "$BASE/log" "$BASE/run"
	chmod 755 "$BASE"
	rm -rf "${BASE:?}/ctld/"* "${BASE:?}/spool/"*
	write_files "$n"

	ip link add "$BRIDGE" type bridge
	ip addr add "$HOST_ADDR/24" dev "$BRIDGE"
	ip link set "$BRIDGE" up
	for ((i = 1; i <= n; i++)); do
		make_node "$i"
	done

	start_munged
	slurmctld -c -f "$CONF"
	wait_for "$WAIT" "scontrol ping: UP" ctld_ok || {
		tail -n 20 "$BASE/log/slurmctld.log" >&2 || true
		die "slurmctld did not start"
	}
	for ((i = 1; i <= n; i++)); do
		name=$(node_name "$i")
		in_node "$name" slurmd -f "$CONF" -N "$name"
	done
	wait_for "$WAIT" "$n nodes idle in sinfo" nodes_ready "$n" || {
		sinfo -N >&2 || true
		tail -n 20 "$BASE/log/slurmd-$NODE_PREFIX"*.log >&2 || true
		die "the nodes did not become idle"
	}
	echo "$n" >"$BASE/run/nodes"
	log "up with $n nodes in $((SECONDS - t0)) s"
	env_lines
}

# kill_node NAME stops node NAME's slurmd, then kills every process left in its
# network namespace (job steps, ranks, the holder) and waits for them to exit.
kill_node() {
	local name=$1 pids sig
	stop "$(slurmd_pidfile "$name"):slurmd"
	for sig in TERM KILL; do
		pids=$(ip netns pids "$name" 2>/dev/null || true)
		[[ -n "$pids" ]] || break
		# shellcheck disable=SC2086 # a list of pids
		kill -"$sig" $pids 2>/dev/null || true
		local deadline=$((SECONDS + 5))
		while [[ -n "$(ip netns pids "$name" 2>/dev/null || true)" ]] && ((SECONDS < deadline)); do
			sleep 0.1
		done
	done
	rm -f "$(holder_pidfile "$name")"
}

down() {
	local i name
	cancel_jobs
	for i in $(existing_nodes); do
		kill_node "$(node_name "$i")"
	done
	stop "$CTLD_PID:slurmctld" "$MUNGE_PID:munged"
	rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" "$BASE/run/nodes"
	# What Open MPI's processes on the nodes leave when they are killed: session folders
	# and shared-memory segments, named after the node (every such process is gone now).
	rm -rf /tmp/ompi."$NODE_PREFIX"[0-9].* "${TMPDIR:-/tmp}"/ompi."$NODE_PREFIX"[0-9].* \
		/dev/shm/vader_segment."$NODE_PREFIX"[0-9].*
	for i in $(existing_nodes); do
		name=$(node_name "$i")
		ip netns del "$name" 2>/dev/null || log "could not remove namespace $name"
	done
	for ((i = 1; i <= MAX_NODES; i++)); do
		if ip link show "$VETH_PREFIX$i" >/dev/null 2>&1; then
			ip link del "$VETH_PREFIX$i" 2>/dev/null || true # may go with its namespace meanwhile
		fi
	done
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE"
	fi
	# The first `ip netns add` makes /run/netns a mount point; undo it once no namespace is left.
	if [[ -d /run/netns && -z "$(ls -A /run/netns)" ]] && mountpoint -q /run/netns; then
		umount /run/netns || log "could not unmount /run/netns"
	fi
	log "down"
}

# status_ok N succeeds if the cluster runs with N nodes (any N when N is empty), all healthy.
status_ok() {
	local want=${1:-} n i name
	[[ -s "$BASE/run/nodes" ]] || return 1
	n=$(<"$BASE/run/nodes")
	[[ -z "$want" || "$want" == "$n" ]] || return 1
	alive "$MUNGE_PID" munged && alive "$CTLD_PID" slurmctld || return 1
	for ((i = 1; i <= n; i++)); do
		name=$(node_name "$i")
		alive "$(holder_pidfile "$name")" sleep && alive "$(slurmd_pidfile "$name")" slurmd || return 1
	done
	munge_ok >/dev/null 2>&1 && ctld_ok && nodes_ready "$n"
}

status() {
	local rc=0 i name n=0
	[[ -s "$BASE/run/nodes" ]] && n=$(<"$BASE/run/nodes")
	for item in "$MUNGE_PID:munged" "$CTLD_PID:slurmctld"; do
		if alive "${item%%:*}" "${item#*:}"; then
			echo "${item#*:}: running (pid $(<"${item%%:*}"))"
		else
			echo "${item#*:}: stopped"
			rc=1
		fi
	done
	for i in $(existing_nodes); do
		name=$(node_name "$i")
		local state=stopped
		alive "$(slurmd_pidfile "$name")" slurmd && state="running (pid $(<"$(slurmd_pidfile "$name")"))"
		echo "$name: $(node_addr "$i") link $(ip -br link show "$VETH_PREFIX$i" 2>/dev/null | awk '{print $2}'); slurmd $state; processes $(ip netns pids "$name" | wc -l)"
	done
	if ((n == 0)); then
		echo "nodes: none (run: $0 up N)"
		rc=1
	elif ! status_ok "$n" >/dev/null 2>&1; then
		rc=1
	fi
	if alive "$CTLD_PID" slurmctld; then
		sinfo -N -l || rc=1
	fi
	env_lines
	return "$rc"
}

# env_lines prints what the host shell needs to use the cluster. --bind-to none: the
# nodes share the machine's cores, and Open MPI binds the first rank of every node to
# core 0; two ranks polling on one core then see each message a scheduler tick late
# (a C ping-pong of 1 KiB across two nodes: 4 ms one way, 6.3 us without binding).
env_lines() {
	echo "export SLURM_CONF=$CONF"
	echo "export TDMPI_CLUSTER_HOSTFILE=$BASE/hostfile"
	echo "export TDMPI_CLUSTER_MPIRUN_FLAGS='--hostfile $BASE/hostfile --mca plm_rsh_agent $AGENT --mca oob_tcp_if_include $NET.0/24 --mca btl_tcp_if_include $NET.0/24 --bind-to none'"
}

# node_number NAME prints the number of node NAME of the running cluster, or fails.
node_number() {
	local i
	[[ "$1" =~ ^$NODE_PREFIX([0-9]+)$ ]] && i=${BASH_REMATCH[1]} && alive "$(holder_pidfile "$1")" sleep ||
		die "$1 is not a node of the running cluster (see: $0 nodes)"
	echo "$i"
}

# crash_node NAME kills, with SIGKILL and at once, node NAME's slurmd and every process
# inside it (job steps, ranks) except the holder of its namespaces: a node that lost
# power, as far as its processes go. The link stays up; `boot NAME` starts it again.
crash_node() {
	local name=$1 holder parent pid n=0
	node_number "$name" >/dev/null
	holder=$(<"$(holder_pidfile "$name")")
	parent=$(awk '/^PPid:/ {print $2}' "/proc/$holder/status") # unshare, waiting for it
	for pid in $(ip netns pids "$name"); do
		if [[ "$pid" != "$holder" && "$pid" != "$parent" ]]; then
			kill -KILL "$pid" 2>/dev/null && n=$((n + 1))
		fi
	done
	rm -f "$(slurmd_pidfile "$name")"
	log "crashed $name: killed $n processes"
}

# boot_node NAME starts node NAME's slurmd if it is not running, returns the node to
# service if Slurm marked it down, and waits until sinfo shows it idle.
boot_node() {
	local name=$1 t0=$SECONDS
	node_number "$name" >/dev/null
	if ! alive "$(slurmd_pidfile "$name")" slurmd; then
		in_node "$name" slurmd -f "$CONF" -N "$name"
	fi
	node_idle() {
		local st
		st=$(sinfo -h -N -n "$name" -o '%t')
		case $st in
		idle) return 0 ;;
		down* | drain* | drng* | fail*) scontrol update nodename="$name" state=resume >/dev/null 2>&1 || true ;;
		esac
		return 1
	}
	wait_for "$WAIT" "$name idle in sinfo" node_idle || {
		sinfo -N >&2 || true
		die "$name did not become idle"
	}
	log "$name up in $((SECONDS - t0)) s"
}

case "${1:-}" in
up) up "${2:-2}" ;;
down) down ;;
status) status ;;
env) env_lines ;;
nodes)
	[[ -s "$BASE/run/nodes" ]] || die "the cluster is not up"
	for ((i = 1; i <= $(<"$BASE/run/nodes"); i++)); do node_name "$i"; done
	;;
pids)
	[[ -n "${2:-}" ]] || die "usage: $0 pids NODE"
	ip netns pids "$2"
	;;
link)
	# link NODE up|down: set the host end of NODE's link up or down (a cable pulled).
	[[ $# -eq 3 && "$3" =~ ^(up|down)$ ]] || die "usage: $0 link NODE up|down"
	i=$(node_number "$2")
	ip link set "$VETH_PREFIX$i" "$3"
	;;
crash)
	[[ $# -eq 2 ]] || die "usage: $0 crash NODE"
	crash_node "$2"
	;;
boot)
	[[ $# -eq 2 ]] || die "usage: $0 boot NODE"
	boot_node "$2"
	;;
exec)
	# exec NODE COMMAND...: run COMMAND inside NODE (what the launch agent does).
	[[ $# -ge 3 ]] || die "usage: $0 exec NODE COMMAND..."
	name=$2
	shift 2
	alive "$(holder_pidfile "$name")" sleep || die "node $name is not up"
	in_node "$name" "$@"
	;;
*)
	echo "usage: $0 up [N] | down | status | env | nodes | pids NODE | link NODE up|down | crash NODE | boot NODE | exec NODE COMMAND..." >&2
	exit 2
	;;
esac
