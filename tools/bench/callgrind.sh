# shellcheck shell=bash disable=SC2154  # $tmp and $cg_iters: the caller's
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Sourced by fastpath.sh and fastpath-pd.sh: one mrpool-bench loop under
# callgrind, only that loop collected (--toggle-collect), so set-up and
# teardown do not count. Needs $tmp (a scratch directory) and $cg_iters.

# Instructions the loop executed: cg_collected BENCH LOOP_FUNCTION ARGS...
# (the profile stays in $tmp/cg for callgrind_annotate).
cg_collected() {
	local bench=$1 fn=$2 n
	shift 2
	n=$(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
		--toggle-collect="$fn" "$bench" -n "$cg_iters" "$@" 2>&1 |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
	[ -n "$n" ] || { echo "$(basename "$0"): callgrind gave no count for $fn" >&2; return 1; }
	echo "$n"
}
