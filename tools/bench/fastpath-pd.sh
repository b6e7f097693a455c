#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# fastpath.sh's instruction count with keys: mrp_alloc + mrp_free with no
# PD, a PD in slot 0 and in slot 1 (mrp_alloc searches for it), and
# mrp_alloc_pdh (the PD's handle) + mrp_free in both slots, one hot buffer
# and a ring of 1024 in flight. mrpool-bench-fake's loops under callgrind,
# only the loop collected, as fastpath.sh does; the host has no device, so
# lib/tests/fake_verbs.c stands in for the registrations (never called
# inside the loops). Columns: Ir per pair of the whole loop (fastpath.sh's
# figure), and of the library alone (the loop function's own Ir taken off).
# CSV on stdout. SIZE (default 8192) and MRPOOL_FASTPATH_CG_ITERS apply.
set -euo pipefail

bench=$(dirname "$0")/mrpool-bench-fake
size=${SIZE:-8192}
cg_iters=${MRPOOL_FASTPATH_CG_ITERS:-200000}
export MRPOOL_BACKEND=anon
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/callgrind.sh
. "$(dirname "$0")/callgrind.sh"

# "loop library" Ir per pair of one loop: ir LOOP_FUNCTION ARGS...
ir() {
	local fn=$1 n self
	shift
	n=$(cg_collected "$bench" "$fn" "$@") || exit 1
	self=$(callgrind_annotate --threshold=100 "$tmp/cg" 2>/dev/null |
		awk -v f="$fn" '$0 ~ (":" f " ") || $0 ~ (":" f "$") { gsub(",", "", $1); print $1; exit }')
	awk -v n="$n" -v s="${self:-0}" -v i="$cg_iters" \
		'BEGIN { printf "%.1f,%.1f", n / i, (n - s) / i }'
}

echo "size,pattern,call,pd_slot,ir_per_pair,lib_ir_per_pair"
for pattern in hot ring1024; do
	ring=()
	suffix=
	if [ "$pattern" = ring1024 ]; then
		ring=(--ring 1024)
		suffix=_ring
	fi
	echo "$size,$pattern,mrp_alloc,none,$(ir "loop_pool$suffix" -s "$size" "${ring[@]}" \
		--only pool --no-rdma)"
	for slot in 0 1; do
		echo "$size,$pattern,mrp_alloc,$slot,$(ir "loop_pool$suffix" -s "$size" \
			"${ring[@]}" --only pool --pd-slot "$slot")"
		echo "$size,$pattern,mrp_alloc_pdh,$slot,$(ir "loop_pool_pdh$suffix" -s "$size" \
			"${ring[@]}" --only pool-pdh --pd-slot "$slot")"
	done
done
