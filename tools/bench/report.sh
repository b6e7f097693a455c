#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Turns one `make bench` run into DIR/report.md: every table is also
# written as DIR/<table>.csv, every plot as DIR/<plot>.png (gnuplot).
#   report.sh DIR
# DIR holds vm/{alloc,reg,rdma,odp,served,glibc}.csv, vm-startup/startup.csv, vm-7.3/odp.csv,
# vm/guest.txt, vm/peers.txt (from
# tools/bench/guest.sh in the VM), host-fastpath.csv, host-served.csv,
# host-glibc.csv and host.txt (from tools/bench/bench.sh on the host). A missing input becomes a line in the
# report saying so, never a silent gap.
set -euo pipefail

dir=${1:?usage: report.sh DIR}
vm=$dir/vm
md=$dir/report.md

# A CSV file as a markdown table: csv_md FILE
csv_md() {
	awk -F, 'NR == 1 { h = "|"; s = "|"; for (i = 1; i <= NF; i++) { h = h " " $i " |"; s = s " --- |" }
			   print h; print s; next }
		 { l = "|"; for (i = 1; i <= NF; i++) l = l " " $i " |"; print l }' "$1"
}

# Rows of SCENARIO.csv, or a sentence saying why there are none.
have() {	# file
	[ -s "$1" ] && [ "$(wc -l <"$1")" -gt 1 ]
}

# alloc: one table of every cell; ratios against mrpool at the same size
# and thread count (its ops/s over the peer's, the peer's p50 over its).
alloc_table() {
	awk -F, -v OFS=, 'NR == 1 || $2 == "timer" { next }
		{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i; key[n] = $3 "/" $4
		  if ($2 == "mrpool") { pops[$3 "/" $4] = $6; pp50[$3 "/" $4] = $7 } }
		END {
		  print "size,threads,peer,ops/s,p50 ns,p99 ns,max ns,mrpool ops/s ÷ peer,peer p50 ÷ mrpool,ibv_reg_mr per op,first op ibv_reg_mr,cache,status"
		  for (i = 1; i <= n; i++) {
			k = key[i]
			if (f[i, 14] !~ /^ok/) {
				print f[i, 3], f[i, 4], f[i, 2], "-", "-", "-", "-", "-", "-", "-", "-", "-", f[i, 14]
				continue
			}
			r1 = "-"; r2 = "-"
			if (f[i, 6] > 0 && pops[k] > 0) r1 = sprintf("%.1fx", pops[k] / f[i, 6])
			if (pp50[k] > 0) r2 = sprintf("%.1fx", f[i, 7] / pp50[k])
			print f[i, 3], f[i, 4], f[i, 2], sprintf("%.0f", f[i, 6]), f[i, 7], f[i, 8], f[i, 9],
			      r1, r2, f[i, 10], f[i, 12], f[i, 13], "ok"
		  }
		}' "$vm/alloc.csv"
}

reg_table() {
	awk -F, -v OFS=, 'NR == 1 { next }
		{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i
		  if ($2 ~ /^pool slice/) slice[$3] = $5 }
		END {
		  print "size,memory,rounds,ibv_reg_mr p50 us,ibv_dereg_mr p50 us,reg ÷ pool slice reg,status"
		  for (i = 1; i <= n; i++)
			print f[i, 3], f[i, 2], f[i, 4], f[i, 5], f[i, 7],
			      (slice[f[i, 3]] > 0 ? sprintf("%.2fx", f[i, 5] / slice[f[i, 3]]) : "-"), f[i, 9]
		}' "$vm/reg.csv"
}

rdma_table() {
	awk -F, -v OFS=, 'NR == 1 { next }
		{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i
		  if ($2 == "pool buffers") pool[$3] = $5 }
		END {
		  print "size,source buffer,messages,messages/s,MB/s,p50 us,p99 us,pool msg/s ÷ this,status"
		  for (i = 1; i <= n; i++)
			print f[i, 3], f[i, 2], f[i, 4], f[i, 5], f[i, 6], f[i, 7], f[i, 8],
			      (f[i, 5] > 0 ? sprintf("%.1fx", pool[f[i, 3]] / f[i, 5]) : "-"), f[i, 9]
		}' "$vm/rdma.csv"
}

# startup (scen_startup.c): GB/s per memory and thread count, the ratio
# against malloc + ibv_reg_mr with as many threads.
startup_table() {
	awk -F, -v OFS=, 'NR == 1 { next }
		{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i
		  if ($2 == "malloc + ibv_reg_mr" && $14 ~ /^ok/) base[$3] = $7 }
		END {
		  print "threads,memory,block,rounds,GB/s p50,GB/s min-max,GB/s ÷ malloc+ibv_reg_mr,wall s p50,registration s (threads summed),ibv_reg_mr calls,chunks created,status"
		  for (i = 1; i <= n; i++) {
			b = f[i, 5] >= 1048576 ? (f[i, 5] / 1048576) " MiB" : f[i, 5]
			if (f[i, 14] !~ /^ok/) { print f[i, 3], f[i, 2], b, 0, "-", "-", "-", "-", "-", "-", "-", f[i, 14]; continue }
			print f[i, 3], f[i, 2], b, f[i, 6], f[i, 7], f[i, 8] "-" f[i, 9],
			      (base[f[i, 3]] > 0 ? sprintf("%.2fx", f[i, 7] / base[f[i, 3]]) : "-"),
			      f[i, 10], f[i, 11], f[i, 12], f[i, 13], f[i, 14]
		  }
		}' "$1"
}

# Where a cold pool's time goes, one line per thread count, from the rows
# of the same run: the library's ibv_reg_mr, the module's ALLOC of the
# same bytes cold and from reserved chunks, zeroing at the memset rate.
startup_cold() {
	awk -F, 'NR == 1 || $14 !~ /^ok/ { next }
		{ key = $2 "|" $3; bytes = $4; w[key] = $10; r[key] = $11; g[key] = $13; gb[key] = $7 }
		END {
		  for (k = 1; k <= 2; k++) {
			pc = "pool cold|" k; sc = "module slice (cold)|" k; sr = "module slice (reserved)|" k
			ms = "memset (no registration)|" k
			if (!(pc in w)) continue
			printf "- %d thread%s: pool cold %.2f s for %d MiB (%d chunks created); in the library'"'"'s ibv_reg_mr %.2f s (thread time)", k, (k > 1 ? "s" : ""), w[pc], bytes / 1048576, g[pc], r[pc]
			if ((sc in r) && (sr in r))
				printf "; the module'"'"'s ALLOC of the same bytes took %.2f s cold against %.3f s from reserved chunks (thread time%s)", r[sc], r[sr], (k > 1 ? ", the threads'"'"' calls overlapping" : "")
			z = ((ms in gb) && gb[ms] > 0) ? bytes / 1e9 / gb[ms] : -1
			if (z >= 0)
				printf "; zeroing the bytes at this run'"'"'s memset rate would take %.2f s", z
			if (k == 1 && (sc in r) && (sr in r) && g[sc] > 0) {
				d = (r[sc] - r[sr]) * 1000 / g[sc]
				printf ". Per chunk created the cold ALLOC took %.1f ms more", d
				if (z >= 0) {
					zc = 2097152 / 1e6 / gb[ms]
					printf ": zeroing its 2 MiB at the memset rate about %.1f ms, the rest (page allocation, the module'"'"'s registration of the chunk on the device) about %.1f ms, by difference", zc, d - zc
				}
			}
			print "."
		  }
		}' "$1"
}

# odp (scen_odp.c): one table per part of FILE; v1..v3 named per part,
# ratios against the row it is compared to at the same size (and op).
odp_table() {	# file part
	awk -F, -v OFS=, -v part="$2" 'NR == 1 || $2 != part { next }
		{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i
		  ok = ($9 == "ok")
		  if (part == "reg" && $3 ~ /^THP anon/ && ok) base[$4] = $6
		  if (part ~ /^first/ && $3 ~ /^THP anon/ && ok) base[$4] = $6
		  if (part == "rate" && $3 == "pool buffers" && ok) base[$4] = $6
		  if (part == "fallback" && $3 == "ODP" && ok) base[$4] = $6 }
		function sz(b) { return b >= 1048576 ? (b / 1048576) " MiB" : (b >= 1024 ? (b / 1024) " KiB" : b) }
		function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2fx", a / b) : "-" }
		END {
		  if (part == "reg") print "size,memory,rounds,registration p50 us,deregistration p50 us,reg ÷ THP anon reg,status"
		  else if (part ~ /^first/) print "size,target memory,rounds,first access p50 us,second access p50 us,prefetch p50 us,first ÷ THP anon first,status"
		  else if (part == "rate") print "size,source and target,messages,messages/s,p50 us,p99 us,pool msg/s ÷ this,status"
		  else if (part == "pin") print "size,memory,VmPin + kB,VmLck + kB,module used_bytes + kB,status"
		  else if (part == "fallback") print "size,fallback buffer,buffers,whole life p50 us,registration p50 us,first WRITE p50 us,life ÷ ODP life,status"
		  for (i = 1; i <= n; i++) {
			s = (f[i, 4] == 0 && f[i, 3] ~ /implicit/) ? "whole space" : sz(f[i, 4])
			if (f[i, 9] !~ /^ok/) { print s, f[i, 3], "-", "-", "-", "-", "-", f[i, 9]; continue }
			st = f[i, 9]
			if (part == "reg") print s, f[i, 3], f[i, 5], f[i, 6], f[i, 7], r(f[i, 6], base[f[i, 4]]), st
			else if (part ~ /^first/) print s, f[i, 3], f[i, 5], f[i, 6], f[i, 7], (f[i, 8] > 0 ? f[i, 8] : "-"), r(f[i, 6], base[f[i, 4]]), st
			else if (part == "rate") print s, f[i, 3], f[i, 5], f[i, 6], f[i, 7], f[i, 8], r(base[f[i, 4]], f[i, 6]), st
			else if (part == "pin") print s, f[i, 3], f[i, 6], f[i, 7], f[i, 8], st
			else print s, f[i, 3], f[i, 5], f[i, 6], f[i, 7], f[i, 8], r(f[i, 6], base[f[i, 4]]), st
		  }
		}' "$1"
}

fastpath_table() {
	awk -F, -v OFS=, 'NR == 1 { print "size,pattern,allocator,instructions/pair,ns/pair (wall),ns/pair (CPU),instructions ÷ glibc,CPU ns ÷ glibc"; next }
		{ print $3, $4, $2, $5, $6, $7, $8, $9 }' "$dir/host-fastpath.csv"
}

served_table() {
	awk -F, -v OFS=, 'NR == 1 { print "registration,memory,instructions/pair,ns/pair (CPU),instructions ÷ passed"; next }
		{ print $2, $3, $4, $5, $6 }' "$dir/host-served.csv"
}

# served on rxe0 (guest.sh run_served): the real pair's time over the served one's.
served_device_table() {
	awk -F, -v OFS=, 'NR == 1 { print "registration,memory,bytes,us/pair (wall),us/pair (CPU),real ÷ served (wall)"; next }
		{ print $2, $3, $4, sprintf("%.2f", $5 / 1000), sprintf("%.2f", $6 / 1000), $7 "x" }' "$vm/served.csv"
}

# glibc (tools/bench/glibc-costs.sh), host or guest: FILE as it is, headed for the report.
glibc_table() {	# file
	awk -F, -v OFS=, 'NR == 1 { print "scenario,backend,rounds,glibc wall s,shim wall s,shim ÷ glibc wall,glibc CPU s,shim CPU s,shim ÷ glibc CPU,detail,status"; next }
		{ print }' "$1"
}

# Plots: one data file per series (gnuplot reads whitespace columns).
plot_alloc() {	# threads png
	local t=$1 png=$2 plot='' p i=0 f
	for p in "mrpool" "glibc malloc" "malloc+ibv_reg_mr" "ucx map" "ucx rcache hit" "fabric reg" "fabric cache hit"; do
		f=$dir/.plot-alloc-$t-$i.dat
		awk -F, -v p="$p" -v t="$t" '$2 == p && $4 == t && $14 == "ok" && $6 > 0 { print $3 / 1024, $6 }' \
			"$vm/alloc.csv" >"$f"
		[ -s "$f" ] && plot+="${plot:+, }'$f' using 1:2 with linespoints title '$p'"
		i=$((i + 1))
	done
	[ -n "$plot" ] || return 0
	gnuplot <<GP
set terminal png size 900,520 noenhanced
set output '$png'
set title 'alloc: buffer get + give back, $t thread(s), guest under TCG (ratios only)'
set logscale xy
set xlabel 'buffer size (KiB)'
set ylabel 'operations per second'
set key outside right
set grid
plot $plot
GP
}

plot_reg() {
	local plot='' i=0 f m
	for m in "fresh malloc" "THP anon" "THP shmem" "pool slice"; do
		f=$dir/.plot-reg-$i.dat
		awk -F, -v m="$m" 'index($2, m) == 1 && $9 == "ok" { print $3 / 1024, $5, $7 }' "$vm/reg.csv" >"$f"
		[ -s "$f" ] && plot+="${plot:+, }'$f' using 1:2 with linespoints title 'reg: $m', '$f' using 1:3 with linespoints dashtype 2 title 'dereg: $m'"
		i=$((i + 1))
	done
	[ -n "$plot" ] || return 0
	gnuplot <<GP
set terminal png size 900,520 noenhanced
set output '$dir/reg.png'
set title 'reg: ibv_reg_mr / ibv_dereg_mr by size, guest under TCG (ratios only)'
set logscale xy
set xlabel 'size (KiB)'
set ylabel 'microseconds (median)'
set key outside right
set grid
plot $plot
GP
}

plot_bars() {	# csv-table png title y-label label-columns(1,2,..) value-column
	local f=$dir/.plot-bars.dat
	awk -F, -v cols="$5" -v v="$6" 'NR > 1 && $v + 0 > 0 {
		n = split(cols, c, ","); l = $c[1]
		for (i = 2; i <= n; i++) l = l "/" $c[i]
		gsub(/ /, "-", l); print l, $v }' "$1" >"$f"
	[ -s "$f" ] || return 0
	gnuplot <<GP
set terminal png size 900,480 noenhanced
set output '$2'
set title '$3'
set style data histograms
set yrange [0:*]
set style fill solid 0.6
set boxwidth 0.8
set ylabel '$4'
set xtics rotate by -30
set grid ytics
plot '$f' using 2:xtic(1) notitle
GP
}

{
	echo "# mrpool benchmark report"
	echo
	echo "Written by \`make bench\` ($(date -u '+%Y-%m-%d %H:%M UTC'), tree $(git -C "$dir" rev-parse --short HEAD 2>/dev/null || echo '?'))."
	echo
	echo "**Absolute times are not hardware times.** The alloc, reg, rdma and startup scenarios run in a"
	echo "QEMU guest under TCG (instruction emulation, roughly 5-20x slower than the host, unevenly"
	echo "so) with Soft-RoCE (rxe), a software RDMA device whose registration and transfers are"
	echo "CPU work. Only ratios between rows measured in this one run mean anything; compare them,"
	echo "never the absolute figures, and never across runs. The fastpath scenario runs on the host."
	echo
	echo "## Machine"
	echo
	echo '```'
	cat "$dir/host.txt" 2>/dev/null || echo "host: (host.txt missing)"
	echo "guest:"
	sed 's/^/  /' "$vm/guest.txt" 2>/dev/null || echo "  (guest.txt missing: the VM run failed)"
	echo '```'
	echo

	echo "## alloc: an RDMA-ready buffer, got and given back"
	echo
	echo "One operation: get a buffer of the size, touch its first byte, give it back. Peers:"
	echo "\`mrpool\` (mrp_alloc + mrp_free, keys of an attached PD included), \`glibc malloc\`"
	echo "(malloc + free: no RDMA at all, the floor), \`malloc+ibv_reg_mr\` (malloc + ibv_reg_mr +"
	echo "ibv_dereg_mr + free), \`ucx map\` (malloc + ucp_mem_map + ucp_mem_unmap + free),"
	echo "\`ucx rcache hit\` (one buffer, ucp_mem_map + ucp_mem_unmap again and again),"
	echo "\`fabric reg\` (malloc + fi_mr_reg + fi_close + free, verbs provider) and \`fabric cache hit\`"
	echo "(one buffer, fi_mr_reg + fi_close again and again). ops/s come from a phase without a clock"
	echo "read per operation; p50/p99/max from a second phase that reads the clock around each one"
	echo "(the timer's own cost, a clock_gettime pair: $(awk -F, '$2 == "timer" { print $7 " ns p50" }' "$vm/alloc.csv" 2>/dev/null))."
	echo "\`ibv_reg_mr per op\` counts every registration call the process made (UCX's and"
	echo "libfabric's included: the bench interposes on libibverbs), which is what the cache column"
	echo "is read from: a cache that hits makes none after the first operation of a cell (the"
	echo "\`first op ibv_reg_mr\` column). \`ucx map\` and \`fabric reg\` malloc a new buffer each time,"
	echo "but glibc hands the same address back, so their caches hit too: what is left of their cost"
	echo "is the cache lookup and the library's own bookkeeping around it. A 2-thread cell that"
	echo "registers nothing at all found the 1-thread cell's buffers still in the cache. Under TCG a"
	echo "clock read costs about as much as a pool or malloc operation, so the p50 of the fast peers"
	echo "(mrpool, glibc, libfabric's hits) is mostly the timer: compare their ops/s instead."
	echo
	if have "$vm/alloc.csv"; then
		alloc_table | { IFS= read -r h; echo "$h"; sort -s -t, -k1,1n -k2,2n; } >"$dir/alloc.csv"
		csv_md "$dir/alloc.csv"
		echo
		plot_alloc 1 "$dir/alloc-1thread.png"
		plot_alloc 2 "$dir/alloc-2threads.png"
		echo "![alloc, 1 thread](alloc-1thread.png)"
		echo "![alloc, 2 threads](alloc-2threads.png)"
		echo
		echo "Settings each peer ran with (and why a peer could not run):"
		echo
		awk -F, 'NR > 1 && $2 != "timer" { s = ($14 ~ /^unavailable/) ? $14 : $15
			 if (!seen[$2 s]++) print "- `" $2 "`: " s }' "$vm/alloc.csv"
		echo
		echo "What UCX and libfabric said about their caches in the guest:"
		echo
		echo '```'
		cat "$vm/peers.txt" 2>/dev/null || echo "(peers.txt missing)"
		echo '```'
	else
		echo "No alloc figures: the scenario did not run or failed ($(tail -n 2 "$vm/alloc.err" 2>/dev/null | tr '\n' ' '))."
	fi
	echo

	echo "## reg: registration cost by size"
	echo
	echo "ibv_reg_mr + ibv_dereg_mr of one range, medians of 5 rounds (3 from 64 MiB): \`fresh"
	echo "malloc\` (memory as malloc returns it, untouched: the pin faults and zeroes every page),"
	echo "\`THP anon\` (2 MiB-aligned anonymous memory, MADV_HUGEPAGE, prefaulted), \`THP shmem\` (a"
	echo "memfd mapped shared the same way, shmem_enabled=advise: the folios GUP-fast pins on 6.5+,"
	echo "as the pool's shmem chunks are), \`pool slice\` (a"
	echo "libmrpool buffer of that size from the module's pinned chunks). Timed with librdmatest's"
	echo "rdt_reg_time(), as selftests/pool_regcost_test does."
	echo
	if have "$vm/reg.csv"; then
		reg_table >"$dir/reg.csv"
		csv_md "$dir/reg.csv"
		plot_reg
		echo
		echo "![reg](reg.png)"
	else
		echo "No reg figures: the scenario did not run or failed ($(tail -n 2 "$vm/reg.err" 2>/dev/null | tr '\n' ' '))."
	fi
	echo

	echo "## rdma: RC RDMA WRITE over rxe"
	echo
	echo "Two RC QPs on rxe0 connected to each other; each message gets its own source buffer, either"
	echo "from the pool (registered once) or malloc'd and registered for that message (ibv_reg_mr,"
	echo "WRITE, ibv_dereg_mr, free). One message in flight: the rate is the inverse of the time per"
	echo "message; MB/s is that rate times the size. The target is one pool buffer for both."
	echo
	if have "$vm/rdma.csv"; then
		rdma_table >"$dir/rdma.csv"
		csv_md "$dir/rdma.csv"
		plot_bars "$dir/rdma.csv" "$dir/rdma.png" 'rdma: RDMA WRITE messages per second (TCG guest, ratios only)' 'messages/s' 1,2 4
		echo
		echo "![rdma](rdma.png)"
	else
		echo "No rdma figures: the scenario did not run or failed ($(tail -n 2 "$vm/rdma.err" 2>/dev/null | tr '\n' ' '))."
	fi
	echo

	echo "## startup: memory made ready for RDMA at start"
	echo
	su=$dir/vm-startup/startup.csv
	echo "tools/bench/scen_startup.c in a 6.1 guest of its own (8 GiB, results/bench/vm-startup/):"
	echo "what an inference server pays at start to get $(awk -F, 'NR == 2 { print $4 / 1048576 }' "$su" 2>/dev/null) MiB"
	echo "ready for RDMA (allocated, zeroed or touched as the peer does it by itself, registered), in"
	echo "GB/s (10^9 bytes a second), 1 and 2 threads (each takes every other block). \`pool cold\`:"
	echo "libmrpool allocations after the module's free chunks were trimmed (idle_trim_sec=1, then"
	echo "0): the module creates, zeroes and registers (its kernel PD) every chunk, the library"
	echo "registers each arena in the PD; \`pool reserved\`: the chunks already in the module, free"
	echo "(the state pool_mb= gives at load; they were zeroed when the previous round freed them,"
	echo "outside the clock); \`pool 2 MiB blocks\`: the same in 2 MiB allocations; \`module slice\`:"
	echo "MRPOOL_IOC_ALLOC + mmap + a write to every page, registered only in the module's kernel PD"
	echo "(a process's QPs would still need an ibv_reg_mr); \`malloc\`, \`THP anon\` (MADV_HUGEPAGE)"
	echo "and \`hugetlb memfd\` + ibv_reg_mr of untouched memory (the pin faults and zeroes it);"
	echo "\`memset\`: zeroing memory already mapped, the bandwidth every zeroing path is bounded by."
	echo "Each round runs every row once, in this order; medians over the rounds. TCG: compare the"
	echo "ratios, never the absolute figures."
	echo
	if have "$su"; then
		startup_table "$su" >"$dir/startup.csv"
		csv_md "$dir/startup.csv"
		plot_bars "$dir/startup.csv" "$dir/startup.png" 'startup: GB/s made ready for RDMA (TCG guest, ratios only)' 'GB/s' 1,2 5
		echo
		echo "Where the cold pool's time goes (from the rows above):"
		echo
		startup_cold "$su"
		echo
		echo "![startup](startup.png)"
	else
		echo "No startup figures: the run did not get that far ($(tail -n 2 "$dir/vm-startup/startup.err" 2>/dev/null | tr '\n' ' '))."
	fi
	echo

	echo "## odp: On-Demand Paging beside the pool, THP anon and registration per message"
	echo
	odp=$dir/vm-7.3/odp.csv
	echo "tools/bench/scen_odp.c in the 7.3 guest (rxe has explicit ODP since 6.15, prefetch since"
	echo "6.17), results/bench/vm-7.3/. The device's ODP is probed (ibv_query_device_ex: odp_caps),"
	echo "never assumed; the rows compared are measured round by round in turn, in one process."
	echo "\`ODP\` registers memory never touched with IBV_ACCESS_ON_DEMAND: nothing is pinned, the"
	echo "device faults pages in when an RDMA operation reaches them. Device caps as probed:"
	echo "$(awk -F, '$2 == "caps" { printf "%s: general_caps 0x%x, RC 0x%x, UD 0x%x (%s)", $3, $6, $7, $8, $9 }' "$odp" 2>/dev/null)."
	if [ -s "$vm/odp.csv" ]; then
		echo "On Debian 12's 6.1 (the alloc/reg/rdma guest) every ODP row is a SKIP:"
		echo "$(awk -F, '$2 == "caps" { print $9 }' "$vm/odp.csv")."
	fi
	echo
	if have "$odp"; then
		echo "### registration by size"
		echo
		echo "One registration and deregistration, medians of 5 rounds (3 from 64 MiB): ODP of untouched"
		echo "memory, ibv_reg_mr of prefaulted THP anon, and a pool buffer (mrp_alloc with the PD's"
		echo "keys: the arena was registered once; deregistration is mrp_free). Implicit ODP only where"
		echo "the device reports IBV_ODP_SUPPORT_IMPLICIT."
		echo
		odp_table "$odp" reg >"$dir/odp-reg.csv"
		csv_md "$dir/odp-reg.csv"
		echo
		for op in WRITE READ; do
			echo "### the first RDMA $op into untouched memory"
			echo
			if [ $op = WRITE ]; then
				echo "One 1 KiB WRITE (a single packet) from a pinned source to the start of every page of a"
				echo "target registered just before, the range's pages in turn: ODP untouched (the responder"
				echo "faults each page in), ODP after ibv_advise_mr(PREFETCH_WRITE, FLUSH) (its own time in the"
				echo "prefetch column), pinned THP anon; the same again (mapped) beside. Single packets at page"
				echo "starts: rxe's ODP on 7.3.4 copies each packet at the start of its page (selftests/odp_test),"
				echo "so only these arrive intact there; a fault is one per page either way."
			else
				echo "One 1 KiB READ at every page, from a pinned source into the target memory (the requester"
				echo "faults it in), as above."
			fi
			odp_table "$odp" "first $op" >"$dir/odp-first-$op.csv"
			csv_md "$dir/odp-first-$op.csv"
			echo
		done
		echo "### steady-state RC WRITE"
		echo
		echo "One message in flight, source and target of the same kind, every page mapped before the"
		echo "clock starts; five rounds of a fifth of the budget each, the kinds in turn. \`register"
		echo "each\`: the source malloc'd and registered for its message, the target a pool buffer."
		echo
		odp_table "$odp" rate >"$dir/odp-rate.csv"
		csv_md "$dir/odp-rate.csv"
		echo
		echo "### memory pinned"
		echo
		echo "64 MiB registered and RDMA-written in 64 KiB steps, what it adds to VmPin and VmLck"
		echo "(/proc/self/status) and to the module's used_bytes (the pool's pages are pinned by"
		echo "mrpool.ko, counted there, not in the process)."
		echo
		odp_table "$odp" pin >"$dir/odp-pin.csv"
		csv_md "$dir/odp-pin.csv"
		echo
		echo "### the library's fallback buffer: pinned or ODP"
		echo
		echo "lib/reg.c's fallback (arenas ran out, MRPOOL_FALLBACK): a fresh mapping, MADV_DONTFORK,"
		echo "ibv_reg_mr; here also the buffer's first RDMA WRITE (its whole length), then"
		echo "ibv_dereg_mr and munmap. Today's pinned registration against IBV_ACCESS_ON_DEMAND."
		echo
		odp_table "$odp" fallback >"$dir/odp-fallback.csv"
		csv_md "$dir/odp-fallback.csv"
	else
		echo "No odp figures from the 7.3 guest: the run did not get that far ($(tail -n 2 "$dir/vm-7.3/odp.err" 2>/dev/null | tr '\n' ' '))."
	fi
	echo
	echo "## mpi: Open MPI's NetPIPE between two guests"
	echo
	echo "NPopenmpi between a 6.1 and a 6.12 guest over rxe on an emulated Ethernet segment"
	echo "(selftests/mpi_netpipe_test, MRPOOL_MPI_MEASURE=1), through libfabric's verbs;ofi_rxm:"
	echo "\`direct\` registers every message, \`shim\` the same under mrpool-run (registrations"
	echo "served from the pool), \`cache\` libfabric's own registration cache. One-way time per"
	echo "message and the rate against \`direct\` (TCG: ratios within the run only)."
	echo
	if grep -q 'NetPIPE one-way time' "$dir/mpi/host1/selftests.tap" 2>/dev/null; then
		echo '```'
		sed -n '/NetPIPE one-way time/,/^ok\|^not ok/p' "$dir/mpi/host1/selftests.tap" |
			grep '^#' | sed 's/^# *//; s/^[^ ]*\.c:[0-9]*:[^:]*://'
		echo '```'
	else
		echo "No NetPIPE figures: the run did not get that far (results/bench/mpi/)."
	fi
	echo

	echo "## fastpath: the allocator alone, on the host"
	echo
	echo "mrpool-bench's loops (tools/bench/fastpath.sh): instructions per alloc + free pair from"
	echo "callgrind (only the loop collected, divided by its iterations) and ns per pair (best of 5"
	echo "rounds; the CPU-time column is immune to other load on the host). \`hot\`: one buffer"
	echo "allocated and freed again; \`ring1024\`: each buffer freed 1024 allocations later. The host"
	echo "has no mrpool.ko: the pool runs on its anonymous-memory backend without a PD, the same"
	echo "fast path."
	echo
	if have "$dir/host-fastpath.csv"; then
		fastpath_table >"$dir/fastpath.csv"
		csv_md "$dir/fastpath.csv"
		plot_bars "$dir/fastpath.csv" "$dir/fastpath.png" 'fastpath: instructions per alloc + free pair (host)' 'instructions' 1,2,3 4
		echo
		echo "![fastpath](fastpath.png)"
	else
		echo "No fastpath figures: fastpath.sh did not run or failed."
	fi
	echo

	echo "## served: a registration under the shim, on the host"
	echo
	echo "tools/bench/served.sh: one ibv_reg_mr + ibv_dereg_mr pair (4 KiB, local write) of a program"
	echo "under libmrpool-preload, instructions from callgrind (only the loop collected, divided by"
	echo "its iterations) and ns per pair (CPU time, best of 5 rounds). \`served\`: inside a pool"
	echo "buffer, answered from the arena's MR; \`passed\`: the same of glibc memory, passed on. The"
	echo "host has no device: lib/tests/fake_verbs.c takes what is passed on (a lock, a calloc and a"
	echo "list insert), so the passed row is a floor; a device's registration adds a system call and"
	echo "the pin."
	echo
	if have "$dir/host-served.csv"; then
		served_table >"$dir/served.csv"
		csv_md "$dir/served.csv"
	else
		echo "No served figures: served.sh did not run or failed."
	fi
	echo
	echo "### served on rxe0, in the 6.1 guest"
	echo
	echo "tools/bench/guest.sh run_served: issue 32's mode-B program under libmrpool-preload (malloc"
	echo "1 MiB, then ibv_reg_mr + ibv_dereg_mr of all of it per use, local write) on rxe0 with"
	echo "mrpool.ko: \`served\`, the malloc'd 1 MiB, a pool buffer the shim answers from its arena's MR;"
	echo "\`real\`, 1 MiB of anonymous mmap memory, which the shim passes on to rxe. One process, rounds"
	echo "interleaved, per pair the best of 5 rounds; the ratio is within that run (QEMU TCG: the"
	echo "guest's times are slow, their ratio is the figure)."
	echo
	if have "$vm/served.csv"; then
		served_device_table >"$dir/served-device.csv"
		csv_md "$dir/served-device.csv"
	else
		echo "No device served figures: the guest's served step did not run or failed (vm/served.err)."
	fi
	echo

	echo "## glibc: what ordinary programs' allocations cost under the shim"
	echo
	echo "tools/bench/glibc-costs.sh: issue 32's patterns, each run of tools/bench/glibc-costs.c a"
	echo "process of its own, without the shim (glibc) and under \`mrpool-run --all\` in turn, the order"
	echo "swapped each round: \`grow\` (realloc by 1 MiB steps to 256 MiB, a word written at each"
	echo "step's start and end), \`grow-above-max\` (the same with MRPOOL_PRELOAD_MAX=16M for the shim),"
	echo "\`calloc\` (512 MiB, one page written), \`shrink\` (8 x: malloc 64 MiB, write 1 MiB, realloc to"
	echo "100 KiB; memory read after), \`fork\` (64 x 4 MiB live, a word in each page; the child checks"
	echo "each page's word and writes a byte in every page, the parent waits) and \`fork-idle\` (the"
	echo "child exits at once), and both forks again of an RDMA program (\`-rdma\`: the first device"
	echo "opened and a PD allocated before the blocks, every block registered, local write, before the"
	echo "fork; under the shim served from its arena, which is registered in the PD; \`fork-rdma-anon\`:"
	echo "the shim on the anon backend; no device: skip). Every run checks its bytes (the child sees"
	echo "the parent's, the parent never the child's; kept, grown and zeroed bytes): a wrong byte is a"
	echo "FAIL status. Times are medians of the rounds, wall and CPU (the process's threads and the fork"
	echo "child's); the ratio columns are the median of each round's shim ÷ glibc. Pages pinned for DMA"
	echo "(a registration's) are copied into the child in fork() (Linux 5.13 and later), glibc's or the"
	echo "pool's; the anon backend's arenas of a program that registers nothing are only mlocked, and a"
	echo "fork copies none of them. The module copies every slice mapping at fork"
	echo "(MRPOOL_ALLOC_FORK_COPY), registered or not. VmLck does not show the module's pages: its"
	echo "used_bytes (the whole pool's) is read beside it in the guest."
	echo
	echo "### host, anon backend (no /dev/mrpool)"
	echo
	if have "$dir/host-glibc.csv"; then
		glibc_table "$dir/host-glibc.csv" >"$dir/glibc-host.csv"
		csv_md "$dir/glibc-host.csv"
	else
		echo "No host glibc figures: glibc-costs.sh did not run or failed."
	fi
	echo
	echo "### 6.1 guest, kernel backend (mrpool.ko, max_mb=768; TCG: ratios only)"
	echo
	if have "$vm/glibc.csv"; then
		glibc_table "$vm/glibc.csv" >"$dir/glibc-guest.csv"
		csv_md "$dir/glibc-guest.csv"
	else
		echo "No guest glibc figures: the guest's glibc step did not run or failed (vm/glibc.err)."
	fi
} >"$md"
rm -f "$dir"/.plot-*.dat
echo "[bench] report: $md"
