#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The long proofs, one slice at a time (issue 31): each part of make
# stress (tools/stress.sh --list) and of make check-debug (two parts) is
# a slice that ends within 40 minutes on this 2-core machine, and so are
# the host test variants make check leaves out (the library's tests under
# valgrind and under qemu-aarch64 user mode: see tools/check.sh). CI runs
# make check and then one slice, chosen from the commit (the number of
# commits in HEAD's history, modulo the number of slices), so that
# consecutive landings rotate through all of them and a regression in any
# long proof fails some landing within a few days.
#
#   tools/slices.sh list      the slices, numbered
#   tools/slices.sh run N     slice N (builds what it needs: the modules
#                             for 6.12, the debug kernel if not cached)
#   tools/slices.sh ci        the slice of this commit
# The exit status is the slice's.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

slices=()
while IFS=$'\t' read -r n kernel name _; do
	slices+=("stress|$n|stress part $n: $name on $kernel")
done < <(tools/stress.sh --list)
slices+=("check-debug|1|check-debug part 1: the default selftests on the debug kernel")
slices+=("check-debug|2|check-debug part 2: reliability, pressure and faults on the debug kernel")
slices+=("host|valgrind arm64|the library's host tests under valgrind and under qemu-aarch64 user mode")

run() {	# index (1-based)
	local kind part what kdir
	IFS='|' read -r kind part what <<<"${slices[$1 - 1]}"
	echo "[slices] slice $1 of ${#slices[@]}: $what"
	kdir=$(sed -n 's/^GUEST_KDIR := //p' .cache/env.mk 2>/dev/null)
	[ -n "$kdir" ] || { echo "[slices] run 'make deps' first" >&2; return 2; }
	make -s -f "$top/Makefile" all KDIR="$kdir" || return 2
	case $kind in
	stress)
		make -s -f "$top/Makefile" modules-6.12 || return 2
		tools/stress.sh --part "$part" ;;
	check-debug)
		make -s -f "$top/Makefile" modules-debug || return 2
		tools/check-debug.sh --part "$part" ;;
	host)
		# shellcheck disable=SC2086  # the variants are words
		host_variants $part ;;
	esac
}

# The library's tests in variants (make -C lib test-VARIANT), their TAP
# and "N passed, N failed".
host_variants() {	# variant...
	local v st=0 log
	mkdir -p results/slices
	for v; do
		log=results/slices/host-test-$v.tap
		echo "[slices] make -C lib test-$v"
		make -s -C lib "test-$v" 2>&1 | tee "$log"
		# shellcheck disable=SC2181  # the pipeline's first command
		[ "${PIPESTATUS[0]}" = 0 ] || st=1
	done
	# A skip is "ok N # SKIP": counted as skipped, not as passed.
	cat results/slices/host-test-*.tap | awk '
		/^ok .*# SKIP/ { s++; next }
		/^ok / { p++ }
		/^not ok / { f++ }
		END { printf "%d passed, %d failed, %d skipped\n", p, f, s }'
	return "$st"
}

case ${1:-} in
list)
	for i in "${!slices[@]}"; do
		printf '%d\t%s\n' $((i + 1)) "${slices[$i]##*|}"
	done ;;
run)
	if ! [[ ${2:-} =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > ${#slices[@]})); then
		echo "[slices] run N: 1..${#slices[@]}" >&2
		exit 2
	fi
	run "$2" ;;
ci)
	n=$(git rev-list --count HEAD) || exit 2
	echo "[slices] commit $(git rev-parse --short HEAD), $n in its history: slice $((n % ${#slices[@]} + 1))"
	run $((n % ${#slices[@]} + 1)) ;;
*)
	sed -n '/^#   tools\/slices.sh/p' "$0" >&2
	exit 2 ;;
esac
