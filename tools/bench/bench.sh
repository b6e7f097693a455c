#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# `make bench`: the alloc, reg, rdma and odp scenarios in one VM run
# (tools/bench/guest.sh; Debian's 6.1 guest under TCG, rxe0, mrpool.ko;
# rxe there has no ODP: the odp rows say SKIP and why), with the served
# step there too (a mode-B program's served 1 MiB pair under the shim
# against a real one on rxe0, tools/bench/served-pair.c modeb) and the glibc
# step (issue 32's allocation patterns of ordinary programs without and
# under the shim on the kernel's pool, tools/bench/glibc-costs.sh), the startup
# scenario in a 6.1 guest of its own with 8 GiB (MRPOOL_BENCH_STARTUP_SIZE
# bytes made ready for RDMA, default 2 GiB, up to about 4 GiB fits;
# results/bench/vm-startup/), the odp scenario
# again in the 7.3 guest (rxe's explicit ODP, 6.15+; results/bench/vm-7.3/),
# Open MPI's NetPIPE between two guests (6.1 and 6.12) with each engine
# registering per message, under the shim and with its own cache
# (selftests/mpi_netpipe_test with MRPOOL_MPI_MEASURE=1; make check runs
# only its integrity run), the fastpath, served and glibc scenarios on the
# host (tools/bench/fastpath.sh, served.sh, glibc-costs.sh on the anon
# backend), then the report
# (tools/bench/report.sh).
# Everything goes to results/bench/ (git-ignored): report.md, a CSV per
# table, a PNG per plot, the VMs' logs in vm/ and mpi/, each part's wall
# and CPU time in times.tsv (tools/timing.sh). The report is written even
# when a part failed (it says which); the exit status is then 1. Nothing
# here asserts a figure.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
res=$top/results/bench
cd "$top"
rm -rf "$res"
mkdir -p "$res"
. "$top/tools/timing.sh"
timing_init "$res/times.tsv"
say() { printf '[bench] %s\n' "$*"; }

{
	echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs, $(awk '/MemTotal/ {print int($2 / 1024) " MiB"}' /proc/meminfo)"
	echo "host kernel: $(uname -r); $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)"
	echo "host load at start: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share this machine: see the CPU-time columns)"
	# (one line per architecture installed: arm64 libibverbs1 too)
	echo "packages: $(dpkg-query -W -f='${Package} ${Version}\n' libucx0 libfabric1 libibverbs1 \
		qemu-system-x86 gnuplot-nox 2>/dev/null | sort -u | paste -sd, - | sed 's/,/, /g')"
} >"$res/host.txt"

st=0
say "VM: alloc, reg, rdma, odp, served, glibc (results/bench/vm/)"
# No slub_debug/page poisoning: they add kernel work to every page freed.
# max_mb: the reg scenario takes a 256 MiB slice next to the alloc buffers.
t0=$SECONDS
tools/vm/run --name bench/vm --no-debug --params "max_mb=768" --timeout 3600 \
	-- tools/bench/guest.sh || { st=1; say "the VM run failed: see results/bench/vm/"; }
timing_row vm bench/vm $((SECONDS - t0)) - "$(timing_vm_detail "$res/vm")"

startup_size=${MRPOOL_BENCH_STARTUP_SIZE:-$((2 << 30))}
say "VM: startup, $((startup_size >> 20)) MiB made ready for RDMA (results/bench/vm-startup/)"
# max_mb: the pool holds the whole size, with room for the library's
# arenas ahead of demand.
t0=$SECONDS
tools/vm/run --name bench/vm-startup --no-debug --mem 8192 \
	--params "max_mb=$(((startup_size >> 20) + 1024))" --timeout 3600 \
	-- env MRPOOL_BENCH_SCENARIOS=startup MRPOOL_BENCH_STARTUP_SIZE="$startup_size" \
	MRPOOL_BENCH_STARTUP_ROUNDS="${MRPOOL_BENCH_STARTUP_ROUNDS:-3}" tools/bench/guest.sh ||
	{ st=1; say "the startup VM run failed: see results/bench/vm-startup/"; }
timing_row vm bench/vm-startup $((SECONDS - t0)) - "$(timing_vm_detail "$res/vm-startup")"

say "VM 7.3: odp, ODP beside the pool (results/bench/vm-7.3/)"
t0=$SECONDS
tools/vm/run --name bench/vm-7.3 --kernel 7.3 --no-debug --params "max_mb=768" --timeout 3600 \
	-- env MRPOOL_BENCH_SCENARIOS=odp tools/bench/guest.sh ||
	{ st=1; say "the 7.3 VM run failed: see results/bench/vm-7.3/"; }
timing_row vm bench/vm-7.3 $((SECONDS - t0)) - "$(timing_vm_detail "$res/vm-7.3")"

say "VM: NetPIPE between two guests, three ways of registering (results/bench/mpi/)"
t0=$SECONDS
tools/vm/run --name bench/mpi --hosts 2 --kernel 6.1,6.12 --no-debug --timeout 7200 -- \
	env MRPOOL_MPI_MEASURE=1 MRPOOL_TEST_TIMEOUT=5400 selftests/run.sh selftests/mpi_netpipe_test ||
	{ st=1; say "the NetPIPE run failed: see results/bench/mpi/"; }
timing_row vm bench/mpi $((SECONDS - t0)) - "$(timing_vm_detail "$res/mpi")"

say "host: fastpath"
t0=$SECONDS
tools/bench/fastpath.sh >"$res/host-fastpath.csv" || { st=1; say "fastpath failed"; }
timing_row step fastpath $((SECONDS - t0)) - ""

say "host: served"
t0=$SECONDS
tools/bench/served.sh >"$res/host-served.csv" || { st=1; say "served failed"; }
timing_row step served $((SECONDS - t0)) - ""

say "host: glibc costs (anon backend)"
t0=$SECONDS
tools/bench/glibc-costs.sh >"$res/host-glibc.csv" 2>"$res/host-glibc.err" || { st=1; say "glibc costs failed: see results/bench/host-glibc.err"; }
timing_row step glibc $((SECONDS - t0)) - ""
echo "host load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/host.txt"

tools/bench/report.sh "$res"
timing_row total "make bench (tools/bench/bench.sh)" "$SECONDS" "$(timing_cpu)" ""
timing_report
exit "$st"
