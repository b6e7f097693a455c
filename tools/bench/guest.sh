#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The VM half of `make bench` (tools/bench/bench.sh starts it with
# tools/vm/run): runs the scenarios of mrpool-scenarios named in
# $MRPOOL_BENCH_SCENARIOS (default: alloc reg rdma odp served glibc; startup
# runs in a guest of its own, see bench.sh) on rxe0 with mrpool.ko loaded,
# and records what the report must say about the guest and the peers'
# settings. served is not mrpool-scenarios': served-pair modeb --device
# under libmrpool-preload (run_served below), nor is glibc: issue 32's
# allocation patterns of ordinary programs without and under the shim on
# the kernel's pool (tools/bench/glibc-costs.sh, MRPOOL_BENCH_GLIBC_ROUNDS
# rounds, default 3). Writes to $MRPOOL_RESULTS
# (the run's results folder): SCENARIO.csv for each, guest.txt, peers.txt
# (when alloc runs).
# startup makes $MRPOOL_BENCH_STARTUP_SIZE bytes ready (default 2 GiB),
# $MRPOOL_BENCH_STARTUP_ROUNDS times (default 3).
# Exit status: 0, or 1 if a scenario failed (the others still run).
set -u
out=${MRPOOL_RESULTS:?run me through tools/vm/run}
bin=tools/bench/mrpool-scenarios
budget=${MRPOOL_BENCH_BUDGET:-1}
st=0

# libfabric's verbs provider resolves addresses through the RDMA CM
# (rdma_create_id fails with ENOMEM without rdma_ucm's device).
modprobe rdma_ucm 2>/dev/null || echo "rdma_ucm not loaded" >>"$out/guest.txt"
# UCX registers through its InfiniBand memory domain on rxe0.
export UCX_TLS=rc_verbs UCX_NET_DEVICES=rxe0:1

# The reg scenario's THP shmem row: memfds get huge folios on MADV_HUGEPAGE.
echo advise >/sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null ||
	echo "shmem_enabled not set: THP shmem row may be small pages" >>"$out/guest.txt"
{
	echo "kernel: $(uname -r) ($(uname -v))"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) vCPUs (QEMU TCG)"
	echo "memory: $(awk '/MemTotal/ {print int($2 / 1024) " MiB"}' /proc/meminfo)"
	echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled), shmem: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled)"
	echo "hugetlb: $(awk '/Hugepagesize/ {print $2 " kB pages"}' /proc/meminfo), nr_hugepages=$(cat /proc/sys/vm/nr_hugepages)"
	echo "mrpool: $(cat /sys/module/mrpool/parameters/max_mb 2>/dev/null) MiB max, pool_mb=$(cat /sys/module/mrpool/parameters/pool_mb 2>/dev/null), idle_trim_sec=$(cat /sys/module/mrpool/parameters/idle_trim_sec 2>/dev/null), pmd_map=$(cat /sys/module/mrpool/parameters/pmd_map 2>/dev/null), shmem_chunks=$(cat /sys/module/mrpool/parameters/shmem_chunks 2>/dev/null)"
	echo "rdma: $(rdma link show | tr '\n' ' ')"
	echo "cmdline: $(cat /proc/cmdline)"
} >>"$out/guest.txt"

read -ra scens <<<"${MRPOOL_BENCH_SCENARIOS:-alloc reg rdma odp served glibc}"

[[ " ${scens[*]} " == *" alloc "* ]] && {
	echo "## UCX"
	ucx_info -v | head -n1
	echo "UCX_TLS=$UCX_TLS UCX_NET_DEVICES=$UCX_NET_DEVICES"
	ucx_info -c | grep -E 'RCACHE|MEM_EVENTS|MEM_MALLOC_HOOKS|MEM_MMAP_HOOK_MODE|REG_METHODS'
	echo "## UCX memory domain, as it opens (debug log, registration cache lines)"
	UCX_LOG_LEVEL=debug ucx_info -d 2>&1 | grep -iE 'rcache|registration cache|memory hook|mem.*event' | sed 's/.*UCX  *[A-Z]* //' | sort -u | head -n 20
	echo "## libfabric"
	fi_info --version | head -n 2
	fi_info -p verbs -t FI_EP_MSG 2>/dev/null | grep -E 'provider|domain|type' | head -n 6
	echo "## libfabric MR cache settings (fi_info -e)"
	fi_info -e 2>/dev/null | grep -A1 -E 'FI_MR_CACHE_(MAX_SIZE|MAX_COUNT|MONITOR)' | grep -v '^--'
	echo "## libfabric verbs MR cache, as the domain opens and closes (info log)"
	FI_LOG_LEVEL=info "$bin" -t 0.05 -p fabric alloc 2>&1 >/dev/null |
		grep -iE 'cache|monitor' | sed 's/^libfabric:[0-9]*:[0-9]*:://' | sort | uniq -c | sort -rn | head -n 20
} >"$out/peers.txt" 2>&1
{
	echo "## ODP (ibv_devinfo -v)"
	ibv_devinfo -v -d rxe0 2>&1 | grep -i -A4 'odp' | head -n 40
} >"$out/odp-caps.txt" 2>&1

# One process per family of alloc peers (-p matches peer names): UCX's
# memory hooks stay installed after ucp_cleanup() and would sit in every
# malloc, free and munmap of the peers measured after it. One header and
# one timer row (the first process's) in alloc.csv.
alloc_families=(mrpool malloc ucx fabric)

run_alloc() {
	local fam first=1
	for fam in "${alloc_families[@]}"; do
		"$bin" -t "$budget" -p "$fam" alloc >"$out/alloc-$fam.csv" 2>>"$out/alloc.err" || return 1
		if ((first)); then
			cat "$out/alloc-$fam.csv"
			first=0
		else
			awk -F, 'NR > 1 && $2 != "timer"' "$out/alloc-$fam.csv"
		fi
		rm -f "$out/alloc-$fam.csv"
	done
}

# served: issue 32's mode-B program (malloc 1 MiB, then ibv_reg_mr +
# ibv_dereg_mr of all of it per use) under the shim on rxe0, its pairs
# served from the pool against real pairs of 1 MiB the shim passes on to
# rxe (anonymous mmap memory), in one process, rounds interleaved
# (tools/bench/served-pair.c). Per pair, best of 5 rounds; the last column
# is the real pair's wall time over the served one's. MRPOOL_BENCH_SERVED_PAIRS
# served pairs a round (default 20000), a hundredth as many real ones.
run_served() {
	local r
	r=$(LD_PRELOAD=$PWD/lib/libmrpool-preload.so tools/bench/served-pair --device \
		-n "${MRPOOL_BENCH_SERVED_PAIRS:-20000}" modeb) || return 1
	echo "scenario,registration,memory,bytes,ns_per_pair_wall,ns_per_pair_cpu,real_vs_served"
	awk -v OFS=, '$1 == "served" { sw = $2; sc = $3 } $1 == "real" { rw = $2; rc = $3 }
		END {
			if (!(sw > 0) || !(rw > 0)) exit 1
			print "served", "served", "pool buffer (malloc)", 1048576, sw, sc, "1.0"
			print "served", "real", "anonymous mmap", 1048576, rw, rc, sprintf("%.1f", rw / sw)
		}' <<<"$r"
}

for scen in "${scens[@]}"; do
	echo "[bench] $scen (budget ${budget} s a measurement)"
	t0=$SECONDS
	case $scen in
	reg | odp) args=(-m "${MRPOOL_BENCH_MAX_SIZE:-$((256 << 20))}") ;;
	rdma) args=(-t "$(awk -v b="$budget" 'BEGIN { print b * 3 }')") ;;
	startup) args=(-m "${MRPOOL_BENCH_STARTUP_SIZE:-$((2 << 30))}" -r "${MRPOOL_BENCH_STARTUP_ROUNDS:-3}") ;;
	*) args=() ;;
	esac
	if [ "$scen" = alloc ]; then
		run_alloc >"$out/alloc.csv"
	elif [ "$scen" = served ]; then
		run_served >"$out/served.csv" 2>"$out/served.err"
	elif [ "$scen" = glibc ]; then
		MRPOOL_BACKEND=kernel MRPOOL_GLIBC_ROUNDS=${MRPOOL_BENCH_GLIBC_ROUNDS:-3} \
			tools/bench/glibc-costs.sh >"$out/glibc.csv" 2>"$out/glibc.err"
	else
		"$bin" "${args[@]}" "$scen" >"$out/$scen.csv" 2>"$out/$scen.err"
	fi || {
		echo "[bench] $scen failed: $(tail -n 3 "$out/$scen.err")"
		st=1
	}
	echo "[bench] $scen took $((SECONDS - t0)) s"
	cat "$out/$scen.csv"
done
exit "$st"
