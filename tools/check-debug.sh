#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make check-debug's test command (after deps, the build, the debug guest
# kernel and the modules for it): VM runs on the debug kernel
# (tools/vm/run --kernel debug: KASAN, lockdep, kmemleak, DEBUG_VM,
# DEBUG_LIST, atomic-sleep checks, fault injection):
#   - the default run of selftests/run.sh, as in make check;
#   - the short reliability suite: selftests/vm-runs 'reliability' (the
#     fuzzer and the kill storm beside the device churn) and 'pressure';
#   - 'faults': selftests/fault_inject_test, workloads under the module's
#     own fault attribute (mrpool/fail_alloc), then under failslab and
#     fail_page_alloc, the pool whole afterwards.
# Each run fails on any kernel report and on a kmemleak finding after the
# job (tools/vm/run's gate, tools/vm/guest-debug.sh). Results in
# results/check-debug/ (summary.tap: one line per test); the last line is
# "N passed, N failed, N skipped", the exit status non-zero on a failure.
#
# Guests on this kernel run about five times slower than on Debian's: the
# hang catchers (tools/vm/run --timeout, run.sh's MRPOOL_TEST_TIMEOUT)
# are five times theirs. No assertion changes.
set -uo pipefail
shopt -s nullglob

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
out=$top/results/check-debug
rm -rf "$out"
mkdir -p "$out"
slow=5

say() { printf '\n[check-debug] %s\n' "$*"; }
step() {	# name status
	if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fi >>"$out/steps.tap"
}
sum_args=()
start=$SECONDS
: >"$out/steps.tap"

# The runs: the default one, then these of selftests/vm-runs (a leading
# "-", off in make check, does not matter here).
runs=("selftests||selftests/run.sh")
for want in reliability pressure faults; do
	l=$(grep -E "^-?$want\|" selftests/vm-runs) ||
		{ step "VM run '$want' found in selftests/vm-runs" 1; continue; }
	runs+=("${l#-}")
done

for r in "${runs[@]}"; do
	IFS='|' read -r name opts cmd _ <<<"$r"
	# The run's own guest timeout (or the runner's default), times $slow;
	# --kernel debug replaces any kernel its options name.
	tmo=2700 o=()
	# shellcheck disable=SC2086
	set -- $opts
	while (($#)); do
		case $1 in
		--timeout) tmo=$2; shift 2 ;;
		--kernel) shift 2 ;;
		*) o+=("$1"); shift ;;
		esac
	done
	# run.sh's per-binary timeout likewise: the run's own, or its default.
	if t=$(grep -o 'MRPOOL_TEST_TIMEOUT=[0-9]*' <<<"$cmd"); then
		cmd=${cmd/$t/MRPOOL_TEST_TIMEOUT=$((${t#*=} * slow))}
	else
		cmd="env MRPOOL_TEST_TIMEOUT=$((1200 * slow)) $cmd"
	fi
	dname=debug-$name
	say "VM run '$dname' (debug kernel): $cmd"
	# shellcheck disable=SC2086
	tools/vm/run --name "$dname" --kernel debug "${o[@]}" --timeout $((tmo * slow)) -- \
		$cmd 2>&1 | tee "$out/vm-$dname.log"
	st=${PIPESTATUS[0]}
	strict=1
	[ "$r" = "${runs[0]}" ] && strict=0
	for f in selftests guest vm; do
		[ -f "results/$dname/$f.tap" ] || continue
		cp -f "results/$dname/$f.tap" "$out/vm-$dname-$f.tap"
		sum_args+=("src=VM:$dname" "var=" "plan=0" "strict=$strict" "$out/vm-$dname-$f.tap")
	done
	for f in dmesg.txt kmemleak.txt times; do
		cp -f "results/$dname/$f" "$out/$dname-$f" 2>/dev/null
	done
	if [ "$st" != 0 ] && ! cat "results/$dname"/*.tap 2>/dev/null | grep -q '^not ok'; then
		step "VM run $dname: exited with status $st without a failed test" 1
	fi
	say "VM run '$dname': status $st, $((SECONDS - start)) s so far"
done

sum_args+=("src=check" "var=" "plan=0" "strict=0" "$out/steps.tap")
awk -f "$top/tools/tap-summary.awk" "${sum_args[@]}" >"$out/summary.tap" 2>"$out/counts"

say "failures:"
grep '^not ok' "$out/summary.tap" || echo "(none)"
say "skipped:"
grep '# SKIP' "$out/summary.tap" || echo "(none)"
say "took $((SECONDS - start)) s; TAP and logs in results/check-debug/ (summary.tap: one line per test)"
cat "$out/counts"
grep -q ' 0 failed,' "$out/counts"
