#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The served scenario of `make bench`, on the host: what an ibv_reg_mr +
# ibv_dereg_mr pair costs a program under libmrpool-preload, served from
# the pool (a registration inside a pool buffer) and passed on (the same of
# glibc memory), as
#   - instructions per pair: served-pair's loop under callgrind, only the
#     loop collected (callgrind.sh), divided by the iterations: repeatable
#     on a loaded machine, where times are not;
#   - ns per pair: served-pair's own best of 5 rounds (CPU time).
# No device here: the host tests' fake verbs (lib/tests/fake_verbs.c) are
# preloaded after the shim and take what it passes on, so the passed row
# is the shim's part plus a lock, a calloc and a list insert where a
# device would make a system call and pin pages. The pool runs on its anon
# backend. CSV on stdout. SHIM, FAKE (paths) and MRPOOL_SERVED_CG_ITERS
# apply.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bench=$here/served-pair
shim=${SHIM:-$top/lib/libmrpool-preload.so}
fake=${FAKE:-$top/lib/build/preload_fake_verbs.so}
iters=${MRPOOL_SERVED_ITERS:-1000000}
cg_iters=${MRPOOL_SERVED_CG_ITERS:-200000}
export MRPOOL_BACKEND=anon
# active from the start: without --device, served-pair makes no verbs call
# before it allocates its buffer, which a dormant shim leaves to glibc
export MRPOOL_PRELOAD_INHERIT=all
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for f in "$bench" "$shim" "$fake"; do
	[ -e "$f" ] || { echo "served.sh: $f missing (make -C lib all build/preload_fake_verbs.so; make -C tools/bench)" >&2; exit 1; }
done

# shellcheck source=tools/bench/callgrind.sh
. "$here/callgrind.sh"

echo "scenario,registration,memory,ir_per_pair,cpu_ns_per_pair,ir_vs_passed"
ir_passed=
for what in passed served; do
	n=$(LD_PRELOAD="$shim $fake" cg_collected "$bench" "loop_$what" --once "$what") || exit 1
	ir=$(awk -v n="$n" -v i="$cg_iters" 'BEGIN { printf "%.1f", n / i }')
	ns=$(LD_PRELOAD="$shim $fake" "$bench" -n "$iters" "$what" | awk -v w="$what" '$1 == w { print $2 }')
	[ "$what" = passed ] && ir_passed=$ir
	mem="glibc block"
	[ "$what" = served ] && mem="pool buffer"
	awk -v w="$what" -v m="$mem" -v ir="$ir" -v ns="$ns" -v p="$ir_passed" 'BEGIN {
		printf "served,%s,%s,%s,%s,%.2f\n", w, m, ir, ns, ir / p }'
done
