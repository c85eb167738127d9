#!/usr/bin/env bash
# examples.sh builds and runs the programs under examples/, each with its declared rank count.
#
# Usage:
#   hpc/scripts/examples.sh list                  names of the examples, one a line
#   hpc/scripts/examples.sh np NAME               the rank count NAME declares
#   hpc/scripts/examples.sh nodes NAME            the node count NAME needs (0: any)
#   hpc/scripts/examples.sh path NAME             where build puts NAME's program
#   hpc/scripts/examples.sh build [NAME...]       go build each into $TDMPI_BIN/examples/NAME
#   hpc/scripts/examples.sh run [NAME...]         build, then run each under mpirun on shared
#                                                 memory and once more over TCP (loopback)
#   hpc/scripts/examples.sh check NAME FILE       check FILE (a run's output) against NAME's
#                                                 expectations
#
# An example is a folder examples/NAME/ with a main.go. main.go declares how to run and
# check it with comment lines of this form, anywhere in the file (the examples keep them
# in a comment block of their own at the top, separated by a blank line from the package
# doc comment, so that they are not part of the program's documentation):
#
#   // np: 2                          ranks to start (default 2)
#   // nodes: 1                       nodes its ranks must run on (default: any; the
#                                     multi-node cluster test spreads them over 2)
#   // expect: ^rank 0 of 2: ok$      an extended regular expression (grep -E) that must
#                                     match at least one line of the combined output;
#                                     repeat the line for more expectations
#
# A run passes when mpirun exits 0 and every expectation matches. The script prints one
# line per run and exits non-zero if any failed.
#
# Environment: GO (go), MPIRUN (mpirun), TDMPI_BIN (bin), TDMPI_MPI_TIMEOUT (seconds a run
# may take, default 60), TDMPI_TCP_FLAGS (the mpirun options of the TCP run),
# TDMPI_EXAMPLES_TCP=0 (run on shared memory only).
#
# TDMPI_MPI=mpich selects the second MPI family: the examples are built with -tags mpich
# into $TDMPI_BIN/examples-mpich/ and run under MPICH's mpiexec (TDMPI_MPICH_MPIEXEC,
# default mpiexec.hydra; the time limit through MPIEXEC_TIMEOUT), the TCP run with
# TDMPI_MPICH_TCP_FLAGS (default: UCX over TCP only).
set -euo pipefail

cd "$(dirname "$0")/../.."
GO=${GO:-go}
MPIRUN=${MPIRUN:-mpirun}
BIN=${TDMPI_BIN:-bin}
TIMEOUT=${TDMPI_MPI_TIMEOUT:-60}
TCP_FLAGS=${TDMPI_TCP_FLAGS:---mca btl self,tcp --mca btl_tcp_if_include lo}
LAUNCH_FLAGS=(--bind-to none --timeout "$TIMEOUT")
EXDIR=$BIN/examples
case "${TDMPI_MPI:-openmpi}" in
openmpi) ;;
mpich)
	MPIRUN=${TDMPI_MPICH_MPIEXEC:-mpiexec.hydra}
	TCP_FLAGS=${TDMPI_MPICH_TCP_FLAGS:--genv UCX_TLS tcp,self}
	LAUNCH_FLAGS=()
	export MPIEXEC_TIMEOUT=$TIMEOUT
	export GOFLAGS="-tags=mpich${GOFLAGS:+ $GOFLAGS}"
	EXDIR=$BIN/examples-mpich
	;;
*)
	echo "examples: TDMPI_MPI must be openmpi or mpich, not ${TDMPI_MPI}" >&2
	exit 2
	;;
esac
# Open MPI refuses root unless told it is intended (containers, CI); examples may ask for
# more ranks than there are cores.
if [[ "$(id -u)" -eq 0 ]]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}

# meta NAME KEY prints the values of the `// KEY: value` lines of examples/NAME/main.go.
meta() {
	sed -n -E "s|^[[:space:]]*//[[:space:]]*$2:[[:space:]]*(.*[^[:space:]])[[:space:]]*\$|\1|p" "examples/$1/main.go"
}

list() {
	local d
	for d in examples/*/; do
		[[ -f "$d/main.go" ]] && basename "$d"
	done
	return 0
}

np() {
	local n
	n=$(meta "$1" np | head -n 1)
	n=${n:-2}
	[[ "$n" =~ ^[1-9][0-9]*$ ]] || {
		echo "examples: examples/$1/main.go: np must be a positive integer, not \"$n\"" >&2
		return 2
	}
	echo "$n"
}

# nodes NAME prints the node count NAME declares with `// nodes: N`, or 0 (any).
nodes() {
	local n
	n=$(meta "$1" nodes | head -n 1)
	n=${n:-0}
	[[ "$n" =~ ^[0-9]+$ ]] || {
		echo "examples: examples/$1/main.go: nodes must be a non-negative integer, not \"$n\"" >&2
		return 2
	}
	echo "$n"
}

build() {
	local name
	mkdir -p "$EXDIR"
	for name in "$@"; do
		"$GO" build -o "$EXDIR/$name" "./examples/$name"
	done
}

# check NAME FILE succeeds if every `// expect:` pattern of NAME matches a line of FILE.
check() {
	local pat ok=0
	while IFS= read -r pat; do
		if ! grep -E -q -- "$pat" "$2"; then
			echo "examples: $1: no output line matches: $pat" >&2
			ok=1
		fi
	done < <(meta "$1" expect)
	return "$ok"
}

# run_one NAME LABEL MPIRUN-FLAGS... runs one example once and reports.
run_one() {
	local name=$1 label=$2 n out rc t0 ms
	shift 2
	n=$(np "$name")
	out=$(mktemp)
	t0=${EPOCHREALTIME/[.,]/}
	rc=0
	# shellcheck disable=SC2086 # the flags are words on purpose
	timeout -k 10 $((TIMEOUT + 20)) "$MPIRUN" -np "$n" "${LAUNCH_FLAGS[@]}" "$@" \
		"$EXDIR/$name" >"$out" 2>&1 || rc=$?
	ms=$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))
	if [[ $rc -eq 0 ]] && check "$name" "$out"; then
		printf 'PASS  %-20s np=%s %-4s %d.%03d s\n' "$name" "$n" "$label" $((ms / 1000)) $((ms % 1000))
		rm -f "$out"
		return 0
	fi
	printf 'FAIL  %-20s np=%s %-4s exit %s; output:\n' "$name" "$n" "$label" "$rc"
	sed 's/^/    /' "$out"
	rm -f "$out"
	return 1
}

run() {
	local name failed=0
	build "$@"
	for name in "$@"; do
		run_one "$name" shm || failed=1
		[[ ${TDMPI_EXAMPLES_TCP:-1} == 0 ]] && continue
		# shellcheck disable=SC2086
		run_one "$name" tcp $TCP_FLAGS || failed=1
	done
	return "$failed"
}

cmd=${1:-}
shift || true
case "$cmd" in
list) list ;;
path) echo "$EXDIR/$1" ;;
np) np "$1" ;;
nodes) nodes "$1" ;;
check) check "$1" "$2" ;;
build | run)
	if [[ $# -eq 0 ]]; then
		mapfile -t names < <(list)
		set -- "${names[@]}"
	fi
	if [[ $# -eq 0 ]]; then
		echo "examples: no examples/*/main.go found" >&2
		exit 1
	fi
	"$cmd" "$@"
	;;
*)
	echo "usage: $0 list | np NAME | nodes NAME | path NAME | build [NAME...] | run [NAME...] | check NAME FILE" >&2
	exit 2
	;;
esac
