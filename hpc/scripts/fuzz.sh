#!/usr/bin/env bash
# fuzz.sh finds every Go fuzz target of the module and fuzzes each for a fixed time.
#
# Usage: hpc/scripts/fuzz.sh [FUZZTIME]      (default 60s; any go test -fuzztime value)
#
# Targets are discovered, never listed by hand: the packages whose _test.go files
# declare a `func Fuzz...`, then `go test -list '^Fuzz'` in each of them. Each target
# runs alone (go test fuzzes one target at a time), without mpirun: fuzz targets
# exercise parsing and validation, which must not need peers. A failing input is saved
# under the package's testdata/fuzz/ by go test, where it becomes a regression test.
# Prints one line per target and exits non-zero if any failed.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded"
# when -fuzztime ends while a worker is busy (golang/go#75804, fixed in Go 1.27). Such a
# run wrote no failing input; it is reported as FLAKE and does not fail the script. Any
# other failure, and any run that saved a new input under testdata/fuzz/, fails.
#
# Environment: GO (go), TDMPI_FUZZ_TIMEOUT (extra seconds allowed beyond FUZZTIME for
# building and minimising, default 300).
set -euo pipefail

cd "$(dirname "$0")/../.."
GO=${GO:-go}
fuzztime=${1:-60s}
slack=${TDMPI_FUZZ_TIMEOUT:-300}

# Seconds of FUZZTIME, for the outer timeout; a count like 1000x gets the slack alone.
secs=0
case "$fuzztime" in
*ms) secs=1 ;;
*s) secs=${fuzztime%s} ;;
*m) secs=$((${fuzztime%m} * 60)) ;;
*h) secs=$((${fuzztime%h} * 3600)) ;;
esac
[[ "$secs" =~ ^[0-9]+$ ]] || secs=0

mapfile -t dirs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . 2>/dev/null |
	xargs -r -n1 dirname | sort -u)
if [[ ${#dirs[@]} -eq 0 ]]; then
	echo "fuzz: no fuzz targets found"
	exit 0
fi

# inputs DIR prints how many files the corpus folder DIR holds (0 if it does not exist).
inputs() {
	if [[ -d "$1" ]]; then
		find "$1" -type f | wc -l
	else
		echo 0
	fi
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
count=0
t0=$SECONDS
for d in "${dirs[@]}"; do
	mapfile -t targets < <("$GO" test -list '^Fuzz' "$d" | grep -E '^Fuzz' || true)
	for target in "${targets[@]}"; do
		count=$((count + 1))
		s=$SECONDS
		corpus=$d/testdata/fuzz/$target
		before=$(inputs "$corpus")
		if timeout -k 10 $((secs + slack)) "$GO" test -count=1 -run '^$' -fuzz "^${target}\$" \
			-fuzztime "$fuzztime" "$d" >"$log" 2>&1; then
			printf 'PASS  %-40s %s %d s\n' "$target" "$d" $((SECONDS - s))
		elif [[ "$(inputs "$corpus")" -eq "$before" ]] &&
			grep -A1 -E "^--- FAIL: $target " "$log" | grep -q -E '^[[:space:]]+context deadline exceeded$' &&
			[[ "$(grep -c -E '^[[:space:]]*--- FAIL' "$log")" -eq 1 ]]; then
			printf 'FLAKE %-40s %s %d s (context deadline exceeded at -fuzztime, no failing input: golang/go#75804)\n' \
				"$target" "$d" $((SECONDS - s))
		else
			printf 'FAIL  %-40s %s; output:\n' "$target" "$d"
			sed 's/^/    /' "$log"
			failed=1
		fi
	done
done
echo "fuzz: $count targets, $((SECONDS - t0)) s"
exit "$failed"
