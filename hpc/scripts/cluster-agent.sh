#!/usr/bin/env bash
# cluster-agent.sh is a launch agent for Open MPI's rsh launcher (plm_rsh_agent) that
# reaches the nodes of hpc/scripts/cluster-local.sh by entering their namespaces
# instead of logging in with ssh.
#
# Usage (Open MPI calls it the way it calls ssh):
#   cluster-agent.sh [-x] NODE COMMAND [ARGS...]
#   mpirun --hostfile /tmp/tdmpi-cluster/hostfile --mca plm_rsh_agent hpc/scripts/cluster-agent.sh ...
#
# NODE is a node name (tdnode1) or its address (10.213.0.11). The agent runs
# COMMAND with its arguments, joined by spaces and read by /bin/sh as ssh's remote
# shell would, inside the node's network, UTS and mount namespaces (those of the node's
# holder process, see cluster-local.sh), so that the command sees the node's hostname,
# interface and /etc/hosts. The environment and the working directory are kept (a
# shared file system). Options before NODE that ssh would take (-x, -T, -n) are ignored.
#
# Environment: TDMPI_CLUSTER_DIR (default /tmp/tdmpi-cluster), as for cluster-local.sh.
set -euo pipefail

BASE=${TDMPI_CLUSTER_DIR:-/tmp/tdmpi-cluster}

while [[ $# -gt 0 && "$1" == -* ]]; do
	shift
done
if [[ $# -lt 2 ]]; then
	echo "cluster-agent: usage: $0 NODE COMMAND [ARGS...]" >&2
	exit 2
fi
node=$1
shift

# An address: find its name in the cluster's hosts file.
if [[ "$node" =~ ^[0-9.]+$ ]]; then
	name=$(awk -v a="$node" '$1 == a { print $2; exit }' "$BASE/hosts" 2>/dev/null || true)
	[[ -n "$name" ]] || {
		echo "cluster-agent: $node is not an address of the cluster in $BASE/hosts" >&2
		exit 255
	}
	node=$name
fi
pidfile=$BASE/run/holder-$node.pid
pid=$(cat "$pidfile" 2>/dev/null || true)
if [[ ! "$pid" =~ ^[0-9]+$ || "$(cat "/proc/$pid/comm" 2>/dev/null || true)" != sleep ]]; then
	echo "cluster-agent: node $node is not up (no live holder in $pidfile); run: hpc/scripts/cluster-local.sh up N" >&2
	exit 255 # what ssh returns when it cannot reach the host
fi
exec nsenter -t "$pid" -n -u -m --wd="$PWD" -- /bin/sh -c "$*"
