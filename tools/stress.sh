#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make stress: the reliability suite's long form (issue 13), in the VM on
# both guest kernels. The short form runs in make check (selftests/vm-runs,
# "reliability") with each test's defaults; this one runs the same tests
# with the long counts:
#   device_churn_test  >= 50 add/delete cycles of an rxe device, for as
#                      long as the fuzzer (2,000,000 calls) and the kill
#                      storm (1,000 kills) run beside it
#   kill_storm_test    the 1,000 kills again on their own, with the
#                      pool-wide end checks a shared run leaves to the churn
#   mem_pressure_test  pool growth into an exhausted guest
#   pool_module_test   reload_cycles: 100 load/use/unload cycles
# Counts can be overridden from the environment (MRPOOL_FUZZ_CALLS,
# MRPOOL_KILLS, MRPOOL_CHURN_CYCLES, MRPOOL_RELOADS), and the kernels too
# (MRPOOL_STRESS_KERNELS, default "6.1 6.12": one kernel's half takes
# hours under TCG). Every run is bounded
# (per binary MRPOOL_TEST_TIMEOUT, per guest --timeout) and ends by itself;
# results in results/stress{0,1}[-6.12]/, the last line "N passed, N
# failed".
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
# shellcheck disable=SC2054  # the comma is MRPOOL_CHURN_WITH's list
env=(MRPOOL_FUZZ_CALLS="${MRPOOL_FUZZ_CALLS:-2000000}"
     MRPOOL_KILLS="${MRPOOL_KILLS:-1000}"
     MRPOOL_CHURN_CYCLES="${MRPOOL_CHURN_CYCLES:-50}"
     MRPOOL_RELOADS="${MRPOOL_RELOADS:-100}"
     MRPOOL_CHURN_WITH=selftests/uapi_fuzz_test,selftests/kill_storm_test
     MRPOOL_TEST_TIMEOUT=36000)
# Two guests per kernel: memory pressure runs in a fresh one (after the
# churn, in one guest, the job's final sync has shown soft lockups).
suites=("selftests/device_churn_test selftests/kill_storm_test selftests/pool_module_test"
	"selftests/mem_pressure_test")
pass=0 fail=0
kernels=${MRPOOL_STRESS_KERNELS:-6.1 6.12}
# Every name checked before the first guest boots, not hours into the run.
for kernel in $kernels; do
	case $kernel in
	6.1 | 6.12) ;;
	*) echo "[stress] MRPOOL_STRESS_KERNELS: no guest kernel '$kernel' (6.1, 6.12)" >&2
	   exit 2 ;;
	esac
done
for kernel in $kernels; do
	for i in "${!suites[@]}"; do
		name=stress$i
		[ "$kernel" = 6.1 ] || name=$name-$kernel
		echo "[stress] kernel $kernel: ${env[*]} ${suites[$i]}"
		start=$SECONDS
		# shellcheck disable=SC2086  # the suite is a list of binaries
		tools/vm/run --name "$name" --kernel "$kernel" --timeout 43200 -- \
			env "${env[@]}" selftests/run.sh ${suites[$i]}
		echo "[stress] $name took $((SECONDS - start)) s"
		for f in results/"$name"/{selftests,guest,vm}.tap; do
			[ -f "$f" ] || continue
			pass=$((pass + $(grep -cE '^ok ' "$f")))
			fail=$((fail + $(grep -cE '^not ok ' "$f")))
		done
		[ -f results/"$name"/guest.tap ] || fail=$((fail + 1))
	done
done
echo "[stress] kernels: $kernels"
echo "$pass passed, $fail failed"
((fail == 0))
