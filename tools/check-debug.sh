#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make check-debug's test command (after deps, the build, the debug guest
# kernel and the modules for it): VM runs on the debug kernel
# (tools/vm/run --kernel debug: KASAN, lockdep, kmemleak, DEBUG_VM,
# DEBUG_LIST, atomic-sleep checks, fault injection), in two parts that
# each end within 40 minutes on this 2-core machine (issue 31; CI runs one
# part per landing, tools/slices.sh):
#   part 1: the default run of selftests/run.sh, as in make check;
#   part 2: the short reliability suite, selftests/vm-runs 'reliability'
#     (the fuzzer and the kill storm beside the device churn) and
#     'pressure', and 'faults': selftests/fault_inject_test, workloads
#     under the module's own fault attribute (mrpool/fail_alloc), then
#     under failslab and fail_page_alloc restricted to mrpool.ko's call
#     sites, the pool whole afterwards.
# The runs of a part go side by side (tools/jobs.sh, MRPOOL_CHECK_JOBS).
# Each run fails on any kernel report and on a kmemleak finding after the
# job (tools/vm/run's gate, tools/vm/guest-debug.sh). Results in
# results/check-debug/ (summary.tap: one line per test, times.tsv); the
# last line is "N passed, N failed, N skipped", the exit status non-zero
# on a failure.
#
#   tools/check-debug.sh [--part 1|2]     (make check-debug [PART=N])
#
# Guests on this kernel run about five times slower than on Debian's: the
# hang catchers (tools/vm/run --timeout, run.sh's MRPOOL_TEST_TIMEOUT)
# are five times theirs. No assertion changes.
set -uo pipefail
shopt -s nullglob

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
. "$top/tools/timing.sh"
. "$top/tools/jobs.sh"
part=''
case ${1:-} in
--part) [[ ${2:-} =~ ^[12]$ ]] || { echo "check-debug: --part 1|2" >&2; exit 2; }
	part=$2 ;;
'') ;;
*) sed -n '/^#   tools\/check-debug.sh/p' "$0" >&2; exit 2 ;;
esac
out=$top/results/check-debug
rm -rf "$out"
mkdir -p "$out/args"
JOBS_DIR=$out/jobs
timing_init "$out/times.tsv"
slow=5

say() { printf '\n[check-debug] %s\n' "$*"; }
step() {	# name status
	if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fi >>"$out/steps.tap"
}
start=$SECONDS
: >"$out/steps.tap"

# One run on the debug kernel: its own guest timeout (or the runner's
# default) and run.sh's per-binary timeout, times $slow; --kernel debug
# replaces any kernel its options name.
job_debug_vm() {	# name opts cmd strict
	local name=$1 opts=$2 cmd=$3 strict=$4 tmo=2700 o=() t st f dname t0
	# shellcheck disable=SC2086
	set -- $opts
	while (($#)); do
		case $1 in
		--timeout) tmo=$2; shift 2 ;;
		--kernel) shift 2 ;;
		*) o+=("$1"); shift ;;
		esac
	done
	if t=$(grep -o 'MRPOOL_TEST_TIMEOUT=[0-9]*' <<<"$cmd"); then
		cmd=${cmd/$t/MRPOOL_TEST_TIMEOUT=$((${t#*=} * slow))}
	else
		cmd="env MRPOOL_TEST_TIMEOUT=$((1200 * slow)) $cmd"
	fi
	dname=debug-$name
	say "VM run '$dname' (debug kernel): $cmd"
	t0=$SECONDS
	# shellcheck disable=SC2086
	tools/vm/run --name "$dname" --kernel debug "${o[@]}" --timeout $((tmo * slow)) -- \
		$cmd 2>&1 | tee "$out/vm-$dname.log"
	st=${PIPESTATUS[0]}
	for f in selftests guest vm; do
		[ -f "results/$dname/$f.tap" ] || continue
		cp -f "results/$dname/$f.tap" "$out/vm-$dname-$f.tap"
		# shellcheck disable=SC2031  # JOB: tools/jobs.sh sets it in the job's subshell
		printf '%s\n' "src=VM:$dname" "var=" "plan=0" "strict=$strict" \
			"$out/vm-$dname-$f.tap" >>"$out/args/$JOB"
	done
	for f in dmesg.txt kmemleak.txt times; do
		cp -f "results/$dname/$f" "$out/$dname-$f" 2>/dev/null
	done
	if [ "$st" != 0 ] && ! cat "results/$dname"/*.tap 2>/dev/null | grep -q '^not ok'; then
		step "VM run $dname: exited with status $st without a failed test" 1
	fi
	timing_vm_tests "results/$dname" "$dname"
	timing_row vm "$dname" $((SECONDS - t0)) - "$(timing_vm_detail "results/$dname")"
	return "$st"
}

# Part 1: the default run; part 2: these of selftests/vm-runs (a leading
# "-", off in make check, does not matter here).
if [ -z "$part" ] || [ "$part" = 1 ]; then
	job_add debug-selftests vm job_debug_vm selftests "" selftests/run.sh 0
fi
if [ -z "$part" ] || [ "$part" = 2 ]; then
	for want in reliability faults pressure; do
		l=$(grep -E "^-?$want\|" selftests/vm-runs) ||
			{ step "VM run '$want' found in selftests/vm-runs" 1; continue; }
		IFS='|' read -r name opts cmd _ <<<"${l#-}"
		job_add "debug-$name" vm job_debug_vm "$name" "$opts" "$cmd" 1
	done
fi
jobs_run
jobs_st=$?
if ((jobs_st)) && ! grep -qs '^not ok' "$out"/*.tap; then
	step "every run ended with status 0 or a failed test (see results/check-debug/jobs/)" 1
fi

sum_args=()
for j in "${JOBS_NAMES[@]}"; do
	[ ! -f "$out/args/$j" ] || mapfile -t -O "${#sum_args[@]}" sum_args <"$out/args/$j"
done
sum_args+=("src=check" "var=" "plan=0" "strict=0" "$out/steps.tap")
awk -f "$top/tools/tap-summary.awk" "${sum_args[@]}" >"$out/summary.tap" 2>"$out/counts"

say "failures:"
grep '^not ok' "$out/summary.tap" || echo "(none)"
say "skipped:"
grep '# SKIP' "$out/summary.tap" || echo "(none)"
timing_row total "make check-debug${part:+ PART=$part}" $((SECONDS - start)) "$(timing_cpu)" ""
say "took $((SECONDS - start)) s; TAP and logs in results/check-debug/ (summary.tap: one line per test)"
timing_report
cat "$out/counts"
grep -q ' 0 failed,' "$out/counts"
