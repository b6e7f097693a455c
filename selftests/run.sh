#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs inside the guest (tools/vm/run), as root, from the repository top,
# with mrpool.ko loaded and rxe0 up: every selftests/*_test binary (or the
# ones named as arguments) in turn, each printing TAP. A binary that fails
# without reporting a failed test is reported as one failed test itself.
cd "$(dirname "$0")/.." || exit 1
rc=0
tests=("$@")
((${#tests[@]})) || tests=(selftests/*_test)
for t in "${tests[@]}"; do
	[ -x "$t" ] || continue
	echo "# selftest: $t"
	out=$(mktemp)
	"$t" 2>&1 | tee "$out"
	st=${PIPESTATUS[0]}
	if [ "$st" -ne 0 ] && [ "$st" -ne 4 ]; then
		rc=1
		grep -q '^not ok' "$out" ||
			echo "not ok - $t exited with status $st without reporting a failure"
	fi
	rm -f "$out"
done
exit $rc
