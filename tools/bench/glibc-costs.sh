#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Issue 32's glibc costs: tools/bench/glibc-costs's scenarios (realloc
# growth, the same above MRPOOL_PRELOAD_MAX, a sparse calloc, shrinking
# reallocs, fork with 64 x 4 MiB blocks live, the child writing a byte per
# page or touching nothing, and the same forks of an RDMA program whose
# blocks are registered, where there is a device: -rdma rows, on the anon
# backend too in the guest) run without the shim and under it
# (mrpool-run --all: active from the start, as the program makes no verbs
# call), one after the other in every round, the order swapped each round,
# MRPOOL_GLIBC_ROUNDS rounds (default 5), each run a process of its own.
# The pool's backend is MRPOOL_BACKEND, else kernel where /dev/mrpool is
# (the guest, tools/bench/guest.sh's glibc step) and anon elsewhere (the
# host). CSV on stdout, one row per scenario: the medians of each side's
# wall and CPU time (the process's, its threads' and the fork child's) and
# the median of the rounds' shim ÷ glibc ratios, with what else the runs
# said (memory after, the fork() call alone, the shim's realloc copies);
# every run's own line on stderr. Nothing here asserts a time; a run whose
# data check failed (the program's exit status), or a shim run the pool
# served nothing (its MRPOOL_PRELOAD_REPORT line), makes the row's status
# FAIL and the exit status 1; a row without an RDMA device says skip.
#   glibc-costs.sh [SCENARIO...]   (default: all of them)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
prog=$here/glibc-costs
run=$top/tools/run/mrpool-run
rounds=${MRPOOL_GLIBC_ROUNDS:-5}
if [ -n "${MRPOOL_BACKEND:-}" ]; then
	backend=$MRPOOL_BACKEND
elif [ -c /dev/mrpool ]; then
	backend=kernel
else
	backend=anon
fi
unset MRPOOL_BACKEND MRPOOL_PRELOAD_REPORT
# The module's pages are not in the process's VmLck: its used_bytes is
# read beside VmRSS and VmLck (the whole pool's, every process's).
used=/sys/class/misc/mrpool/used_bytes
pargs=()
[ "$backend" = kernel ] && [ -r "$used" ] && pargs=(-u "$used")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -x "$prog" ] || { echo "glibc-costs.sh: $prog missing (make -C tools/bench glibc-costs)" >&2; exit 1; }

# NAME|program's arguments|the shim run's extra environment
table=(
	"grow|grow|"
	"grow-above-max|grow|MRPOOL_PRELOAD_MAX=16M"
	"calloc|calloc|"
	"shrink|shrink|"
	"fork|fork|"
	"fork-idle|fork-idle|"
	"fork-rdma|-d fork|"
	"fork-idle-rdma|-d fork-idle|"
	"fork-rdma-anon|-d fork|MRPOOL_BACKEND=anon"
)
want=("$@")

# The median of KEY=VALUE over the lines of FILE (- if none).
median() {	# file key
	grep -o "\b$2=[^ ]*" "$1" | cut -d= -f2 | sort -g |
		awk '{ v[NR] = $1 } END {
			if (!NR) { print "-"; exit }
			print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The median over the rounds of the shim's KEY over glibc's, the two
# runs of a round side by side (lines in the same order in both files).
ratio() {	# glibc-file shim-file key
	grep -o "\b$3=[^ ]*" "$1" | cut -d= -f2 >"$tmp/ratio.g"
	grep -o "\b$3=[^ ]*" "$2" | cut -d= -f2 >"$tmp/ratio.s"
	paste -d' ' "$tmp/ratio.g" "$tmp/ratio.s" |
		awk '$1 > 0 { print $2 / $1 }' | sort -g |
		awk '{ v[NR] = $1 } END {
			if (!NR) { print "-"; exit }
			printf "%.2f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The module's used_bytes after, where it was read.
used_kb() {
	[ "$(median "$g" file_kb)" != - ] && [ "$(median "$g" file_kb)" != -1 ] || return 0
	echo "; mrpool used_bytes glibc $(median "$g" file_kb) kB / shim $(median "$s" file_kb) kB"
}

# One run: out-file mode(glibc|shim) arguments env backend
one() {
	local out=$1 mode=$2 args=$3 env=$4 be=$5 line rep=$tmp/rep st=0
	local -a extra=() a
	read -ra a <<<"$args"
	rm -f "$rep"
	if [ "$mode" = glibc ]; then
		line=$("$prog" "${pargs[@]}" "${a[@]}") || st=$?
	else
		[ -n "$env" ] && extra=("$env")
		line=$(env MRPOOL_BACKEND="$backend" MRPOOL_PRELOAD_REPORT="$rep" "${extra[@]}" \
			"$run" --all "$prog" "${pargs[@]}" "${a[@]}") || st=$?
	fi
	echo "[glibc-costs] $mode ${env:+$env }$line" >&2
	if [ "$st" -eq 4 ] && [[ "$line" == *" skip: "* ]]; then
		echo "skip: ${line#* skip: }" >>"$out.skip"
		return
	fi
	if [ "$st" -ne 0 ] || [[ "$line" != *" ok" ]]; then
		echo "$mode run exit $st: ${line:-no output}" >>"$out.fail"
		return
	fi
	if [ "$mode" = shim ]; then
		# the parent's line (a forked child leaves by _exit: none)
		local r
		r=$(grep -m1 "backend $be," "$rep" 2>/dev/null) || r=
		echo "[glibc-costs] shim report: ${r:-none}" >&2
		local allocs
		allocs=$(sed -n 's/.*allocations from the pool \([0-9]*\).*/\1/p' <<<"$r")
		if [ -z "$r" ] || [ "${allocs:-0}" -eq 0 ]; then
			echo "shim run: the $be pool served nothing ($(head -c 300 "$rep" 2>/dev/null))" >>"$out.fail"
			return
		fi
		line+=" $(sed -n 's/.*(refused \([0-9]*\)).*realloc copies \([0-9]*\), bytes copied \([0-9]*\), calloc bytes zeroed \([0-9]*\).*/refused=\1 copies=\2 copied=\3 zeroed=\4/p' <<<"$r")"
	fi
	echo "$line" >>"$out.$mode"
}

echo "scenario,backend,rounds,glibc_wall_s,shim_wall_s,wall_shim_vs_glibc,glibc_cpu_s,shim_cpu_s,cpu_shim_vs_glibc,detail,status"
st=0
for row in "${table[@]}"; do
	IFS='|' read -r name args env <<<"$row"
	scen=${args##* }
	be=$backend
	[[ "$env" == MRPOOL_BACKEND=* ]] && be=${env#MRPOOL_BACKEND=}
	if [ "${#want[@]}" -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then
		continue
	fi
	f=$tmp/$name
	: >"$f.glibc"
	: >"$f.shim"
	for ((r = 1; r <= rounds; r++)); do
		if ((r % 2)); then
			one "$f" glibc "$args" "$env" "$be"
			one "$f" shim "$args" "$env" "$be"
		else
			one "$f" shim "$args" "$env" "$be"
			one "$f" glibc "$args" "$env" "$be"
		fi
		[ -s "$f.skip" ] && break
	done
	g=$f.glibc
	s=$f.shim
	case $scen in
	grow)
		detail="$(median "$g" steps) steps to $(median "$g" final_mib) MiB${env:+; $env for the shim}; shim: $(median "$s" copies) realloc copies of $(median "$s" copied) bytes; pool refusals $(median "$s" refused)"
		;;
	calloc)
		detail="$(median "$g" mib) MiB; VmRSS glibc $(median "$g" vmrss_kb) kB / shim $(median "$s" vmrss_kb) kB; VmLck glibc $(median "$g" vmlck_kb) kB / shim $(median "$s" vmlck_kb) kB; shim zeroed $(median "$s" zeroed) bytes$(used_kb)"
		;;
	shrink)
		detail="$(median "$g" blocks) x $(median "$g" mib) MiB to $(median "$g" keep_kib) KiB; then usable glibc $(median "$g" usable) / shim $(median "$s" usable); VmRSS glibc $(median "$g" vmrss_kb) kB / shim $(median "$s" vmrss_kb) kB; VmLck glibc $(median "$g" vmlck_kb) kB / shim $(median "$s" vmlck_kb) kB$(used_kb)"
		;;
	fork*)
		detail="$(median "$g" blocks) x $(median "$g" kib) KiB live$([ "$(median "$g" registered)" = 1 ] && echo "; each registered (local write) in a PD of the first device")${env:+; $env for the shim}; the fork() call glibc $(median "$g" fork_s) s / shim $(median "$s" fork_s) s (shim vs glibc $(ratio "$g" "$s" fork_s))"
		;;
	esac
	if [ -s "$f.skip" ]; then
		status=$(head -n1 "$f.skip" | tr ',' ';')
		detail=-
	elif [ -s "$f.fail" ]; then
		status="FAIL: $(head -n1 "$f.fail" | tr ',' ';')"
		st=1
	else
		status=ok
	fi
	printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$name" "$be" "$rounds" \
		"$(median "$g" wall_s)" "$(median "$s" wall_s)" "$(ratio "$g" "$s" wall_s)" \
		"$(median "$g" cpu_s)" "$(median "$s" cpu_s)" "$(ratio "$g" "$s" cpu_s)" \
		"$detail" "$status"
done
exit "$st"
