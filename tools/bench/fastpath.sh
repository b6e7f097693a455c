#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The fastpath scenario of `make bench`, on the host (no VM: no device is
# needed, and TCG would distort what this measures): libmrpool's mrp_alloc
# + mrp_free against glibc malloc + free at 1 KiB and 8 KiB, one hot buffer
# and a ring of 1024 in flight, as
#   - instructions per pair: mrpool-bench's loop under callgrind, only the
#     loop collected (mrpool-bench(1)), divided by the iterations;
#   - ns per pair: mrpool-bench's own best of 5 rounds (wall and CPU time).
# The host has no mrpool.ko: the pool runs on its anon backend, without a
# PD (no keys), which is the same fast path. CSV on stdout.
set -euo pipefail

bench=$(dirname "$0")/mrpool-bench
iters=${MRPOOL_FASTPATH_ITERS:-2000000}
cg_iters=${MRPOOL_FASTPATH_CG_ITERS:-200000}
export MRPOOL_BACKEND=anon
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tools/bench/callgrind.sh
. "$(dirname "$0")/callgrind.sh"

# Instructions per pair of one loop: ir LOOP_FUNCTION ARGS...
ir() {
	local fn=$1 n
	shift
	n=$(cg_collected "$bench" "$fn" --no-rdma "$@") || exit 1
	awk -v n="$n" -v i="$cg_iters" 'BEGIN { printf "%.1f", n / i }'
}

echo "scenario,allocator,size,pattern,ir_per_pair,ns_per_pair,cpu_ns_per_pair,ir_vs_glibc,cpu_ns_vs_glibc"
for size in 1024 8192; do
	for pattern in hot ring1024; do
		ring=()
		suffix=
		if [ "$pattern" = ring1024 ]; then
			ring=(--ring 1024)
			suffix=_ring
		fi
		ir_pool=$(ir "loop_pool$suffix" -s "$size" "${ring[@]}" --only pool)
		ir_glibc=$(ir "loop_malloc$suffix" -s "$size" "${ring[@]}" --only malloc)
		"$bench" --no-rdma -s "$size" -n "$iters" -r 5 -t 1 "${ring[@]}" >"$tmp/out"
		read -r ns_pool cpu_pool < <(awk '$1 == "mrpool" { print $2, $4 }' "$tmp/out")
		read -r ns_glibc cpu_glibc < <(awk '$1 == "glibc" && $2 == "malloc" { print $3, $5 }' "$tmp/out")
		awk -v s="$size" -v p="$pattern" -v ip="$ir_pool" -v ig="$ir_glibc" \
			-v np="$ns_pool" -v cp="$cpu_pool" -v ng="$ns_glibc" -v cg="$cpu_glibc" 'BEGIN {
			printf "fastpath,mrpool,%d,%s,%s,%s,%s,%.2f,%.2f\n", s, p, ip, np, cp, ip / ig, cp / cg
			printf "fastpath,glibc malloc,%d,%s,%s,%s,%s,1.00,1.00\n", s, p, ig, ng, cg
		}'
	done
done
