#!/usr/bin/env bash
# deps.sh installs the Debian packages tdmpi needs, and only those that are missing.
#
# Usage: hpc/scripts/deps.sh PACKAGE...
#
# Packages already installed are left alone, so a second run costs a few dpkg-query
# calls and no network. When something is missing, the script runs `apt-get update`
# once and then one non-interactive `apt-get install --no-install-recommends`.
# It needs root (or sudo) only when it has something to install.
#
# On systems without dpkg (not Debian or Ubuntu) it installs nothing: it checks that
# the commands the packages would provide are on PATH and says what is missing.
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: $0 PACKAGE..." >&2
	exit 2
fi

# command_for names a command that proves a package is usable, for systems without dpkg.
command_for() {
	case "$1" in
	openmpi-bin) echo mpirun ;;
	libopenmpi-dev) echo mpicc ;;
	mpich) echo mpiexec.hydra ;;
	libmpich-dev) echo mpicc.mpich ;;
	pkg-config) echo pkg-config ;;
	slurm-wlm) echo slurmctld ;;
	munge) echo munged ;;
	iproute2) echo ip ;;
	util-linux) echo nsenter ;;
	procps) echo pgrep ;;
	python3-mpi4py | python3-numpy) echo python3 ;;
	*) echo "$1" ;;
	esac
}

if ! command -v dpkg-query >/dev/null 2>&1; then
	status=0
	for p in "$@"; do
		c=$(command_for "$p")
		if ! command -v "$c" >/dev/null 2>&1; then
			echo "deps: $c (package $p) is not on PATH and this system has no dpkg; install it by hand" >&2
			status=1
		fi
	done
	exit "$status"
fi

missing=()
for p in "$@"; do
	if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
		missing+=("$p")
	fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "deps: present: $*"
	exit 0
fi

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo=(sudo)
	else
		echo "deps: missing ${missing[*]}; run as root or install them: apt-get install ${missing[*]}" >&2
		exit 1
	fi
fi

echo "deps: installing ${missing[*]}"
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "deps: installed ${missing[*]} in $(($(date +%s) - start)) s"
