#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make check-quick: the inner loop's check (issue 31), a few minutes
# instead of make check's twenty: the library's host tests plain and
# under ASan+UBSan, man pages, checkpatch and sparse, and one VM run of
# the selftests a change touches, through tools/check.sh's own jobs (same
# logs, TAP and summary in results/check/). Never a substitute for make
# check before landing.
#
#   tools/check-quick.sh [BINARY ...]
# The VM run's binaries (names of selftests/*_test, with or without the
# selftests/ prefix): those named, else those the change touches, found
# from the files changed since the branch left main (or HEAD's parent on
# main) plus uncommitted ones:
#   selftests/X_test.c          X_test
#   kmod/, include/, Kbuild     the module's core tests (below)
#   lib/tests/python_suite.sh   preload_pysuite_test
#   lib/                        the library's VM tests (lib_*_test)
#   tools/vm/, selftests/*.h    the module's core tests
# A binary that runs only in a dedicated run (selftests/vm-runs) is run
# in the default guest anyway, as make check-quick is for iterating.
# MRPOOL_QUICK_KERNELS (default 6.1; "6.1 6.12 7.3" for all three) picks
# the guests (7.3 needs make modules-new).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

# The module's core: UAPI, mappings, RDMA on slices, ownership and limits.
core=(pool_ioctl_test pool_mmap_test pool_rdma_test pool_tenant_test devices_ioctl_test)
tests=()
if (($#)); then
	for t; do tests+=("${t#selftests/}"); done
else
	base=$(git merge-base HEAD main 2>/dev/null)
	[ "$base" != "$(git rev-parse HEAD)" ] || base=HEAD~1
	changed=$( { git diff --name-only "$base"; git ls-files --others --exclude-standard; } | sort -u)
	while IFS= read -r f; do
		case $f in
		selftests/*_test.c) t=${f#selftests/}; tests+=("${t%.c}") ;;
		kmod/* | include/* | Kbuild | tools/vm/* | selftests/*.h) tests+=("${core[@]}") ;;
		lib/tests/python_suite.sh) tests+=(preload_pysuite_test) ;;
		lib/*) for t in selftests/lib_*_test.c; do t=${t#selftests/}; tests+=("${t%.c}"); done ;;
		esac
	done <<<"$changed"
fi
mapfile -t tests < <(printf '%s\n' "${tests[@]}" | awk 'NF && !seen[$0]++')
for t in "${tests[@]}"; do
	[ -f "selftests/$t.c" ] || { echo "check-quick: no selftests/$t.c" >&2; exit 2; }
done

only="host static"
if ((${#tests[@]})); then
	for k in ${MRPOOL_QUICK_KERNELS:-6.1}; do
		case $k in
		6.1) only+=" vm:selftests" ;;
		6.12) only+=" vm:selftests-6.12" ;;
		7.3 | new)
			n=$(sed -n 's/^NEW_SERIES := //p' .cache/newkernel.mk 2>/dev/null)
			only+=" vm:selftests-${n:-new}" ;;
		*) echo "check-quick: MRPOOL_QUICK_KERNELS: 6.1, 6.12, 7.3" >&2; exit 2 ;;
		esac
	done
	echo "[check-quick] VM tests: ${tests[*]} (kernels ${MRPOOL_QUICK_KERNELS:-6.1})"
else
	echo "[check-quick] no VM test touched: host tests and static checks only"
fi
MRPOOL_CHECK_ONLY=$only MRPOOL_CHECK_HOST="test test-sanitize" \
	MRPOOL_CHECK_TESTS="${tests[*]/#/selftests/}" exec tools/check.sh
