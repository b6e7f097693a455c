#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make stress: the reliability suite's long form (issue 13), in the VM on
# both guest kernels, in parts that each end within 40 minutes on this
# 2-core machine (issue 31), so that every part can run to its end in one
# sitting, and CI runs one part per landing (tools/slices.sh). The short
# form runs in make check (selftests/vm-runs, "reliability", "pressure").
# Per kernel, the parts add up to the long form:
#   churn1..4  device_churn_test: >= 50 add/delete cycles of an rxe
#              device for as long as the fuzzer (500,000 calls a part,
#              2,000,000 in all) and the kill storm (250 kills a part)
#              run beside it
#   kills1..2  kill_storm_test on its own, 500 kills a part, with the
#              pool-wide end checks a shared run leaves to the churn
#   reloads    pool_module_test: reload_cycles with 100 load/use/unload
#              cycles
#   pressure   mem_pressure_test: pool growth into an exhausted guest
# Each part is one guest of its own, with its own seeds (each test prints
# its seed; MRPOOL_FUZZ_SEED, MRPOOL_KILL_SEED replay it).
#
#   tools/stress.sh              every part of every kernel, in turn
#   tools/stress.sh --part N     part N only (1-based, over both kernels)
#   tools/stress.sh --list       the parts, numbered
# MRPOOL_STRESS_KERNELS (default "6.1 6.12") keeps the parts of those
# kernels (numbers stay those of the full list). Counts can be overridden
# from the environment (MRPOOL_FUZZ_CALLS, MRPOOL_KILLS,
# MRPOOL_CHURN_CYCLES, MRPOOL_RELOADS: per part). Every run is bounded
# (per binary MRPOOL_TEST_TIMEOUT, per guest --timeout); results in
# results/stress-PART[-6.12]/, each part's wall and CPU time in
# results/stress/times.tsv, the last line "N passed, N failed".
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
. "$top/tools/timing.sh"

# KERNEL|NAME|ENV (words)|BINARIES
churn_env="MRPOOL_FUZZ_CALLS=${MRPOOL_FUZZ_CALLS:-500000} MRPOOL_KILLS=${MRPOOL_KILLS:-250}"
churn_env+=" MRPOOL_CHURN_CYCLES=${MRPOOL_CHURN_CYCLES:-50}"
churn_env+=" MRPOOL_CHURN_WITH=selftests/uapi_fuzz_test,selftests/kill_storm_test"
parts=()
for kernel in 6.1 6.12; do
	for i in 1 2 3 4; do
		parts+=("$kernel|churn$i|$churn_env|selftests/device_churn_test")
	done
	for i in 1 2; do
		parts+=("$kernel|kills$i|MRPOOL_KILLS=${MRPOOL_KILLS:-500}|selftests/kill_storm_test")
	done
	parts+=("$kernel|reloads|MRPOOL_RELOADS=${MRPOOL_RELOADS:-100}|selftests/pool_module_test")
	parts+=("$kernel|pressure||selftests/mem_pressure_test")
done

usage() { sed -n '/^#   tools\/stress.sh/p' "$0" >&2; exit 2; }
only=''
case ${1:-} in
--list)
	for i in "${!parts[@]}"; do
		IFS='|' read -r k n e b <<<"${parts[$i]}"
		printf '%d\t%s\t%s\t%s %s\n' $((i + 1)) "$k" "$n" "$e" "$b"
	done
	exit 0 ;;
--part)
	if ! [[ ${2:-} =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > ${#parts[@]})); then
		echo "[stress] --part: 1..${#parts[@]} (tools/stress.sh --list)" >&2
		exit 2
	fi
	only=$2 ;;
'') ;;
*) usage ;;
esac

kernels=${MRPOOL_STRESS_KERNELS:-6.1 6.12}
# Every name checked before the first guest boots, not hours into the run.
for kernel in $kernels; do
	case $kernel in
	6.1 | 6.12) ;;
	*) echo "[stress] MRPOOL_STRESS_KERNELS: no guest kernel '$kernel' (6.1, 6.12)" >&2
	   exit 2 ;;
	esac
done

mkdir -p results/stress
timing_init results/stress/times.tsv
pass=0 fail=0 ran=()
for i in "${!parts[@]}"; do
	[ -z "$only" ] || [ "$only" = $((i + 1)) ] || continue
	IFS='|' read -r kernel pname env bins <<<"${parts[$i]}"
	[[ " $kernels " == *" $kernel "* ]] || continue
	name=stress-$pname
	[ "$kernel" = 6.1 ] || name+=-$kernel
	echo "[stress] part $((i + 1)) ($name), kernel $kernel: $env $bins"
	t0=$SECONDS c0=$(timing_cpu)
	# shellcheck disable=SC2086  # env and the binaries are lists of words
	tools/vm/run --name "$name" --kernel "$kernel" --timeout 3600 -- \
		env $env MRPOOL_TEST_TIMEOUT=3000 selftests/run.sh $bins
	timing_row vm "$name" $((SECONDS - t0)) "$(timing_cpu_since "$c0")" "$(timing_vm_detail "results/$name")"
	timing_vm_tests "results/$name" "$name"
	echo "[stress] $name took $((SECONDS - t0)) s"
	for f in results/"$name"/{selftests,guest,vm}.tap; do
		[ -f "$f" ] || continue
		pass=$((pass + $(grep -cE '^ok ' "$f")))
		fail=$((fail + $(grep -cE '^not ok ' "$f")))
	done
	[ -f results/"$name"/guest.tap ] || fail=$((fail + 1))
	ran+=("$((i + 1)):$name")
done
((${#ran[@]})) || { echo "[stress] no part of kernels '$kernels' selected" >&2; exit 2; }
timing_row total "make stress${only:+ PART=$only}" "$SECONDS" "$(timing_cpu)" ""
timing_report
echo "[stress] parts: ${ran[*]}"
echo "$pass passed, $fail failed"
((fail == 0))
