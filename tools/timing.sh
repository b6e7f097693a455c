# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# shellcheck shell=bash
#
# Sourced by the long scripts (tools/check.sh, tools/check-debug.sh,
# tools/stress.sh, tools/bench/bench.sh): the wall and CPU time of each
# step and VM run, in a TSV file, and the slowest ten at the end. The
# figures say where a run's time goes, so that the suite can be kept to
# what this machine affords (issue 31); nothing is ever asserted on them.
#
# times.tsv, one row per timed thing, a header first:
#   kind    step (a step of the script), vm (one VM run), test (one
#           selftest binary inside a VM run, from the guest's
#           selftests-times.tsv), total (the whole script)
#   name    the step, the VM run (results/NAME), or VM:RUN/BINARY
#   wall_s  seconds from start to end
#   cpu_s   user + system seconds of the step and of every process it
#           waited for (QEMU included): cpu_s / wall_s is how many cores
#           it kept busy ("-" where unknown: a test inside a guest)
#   detail  for a VM run, each guest's seconds: "init" (its uptime when
#           /init had the host's root mounted: the kernel's boot, the
#           virtio devices), "ready" (its uptime when the
#           job began: modules, rxe0, mrpool.ko), "job", and "guest"
#           (QEMU's whole run, the shutdown included)

# timing_init FILE: start FILE (the header only).
timing_init() {
	TIMES=$1
	printf 'kind\tname\twall_s\tcpu_s\tdetail\n' >"$TIMES"
}

# "$(timing_cpu)": the CPU seconds the calling shell and the children it
# has reaped used so far (/proc/PID/stat utime, stime, cutime, cstime,
# counted from the end of the command name, which may hold spaces). It
# runs in the command substitution's subshell: the caller is its parent.
timing_cpu() {
	local stat ppid
	stat=$(<"/proc/$BASHPID/stat")
	stat=${stat##*) }
	read -r _ ppid _ <<<"$stat"
	sed 's/^.*) //' "/proc/$ppid/stat" |
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($12 + $13 + $14 + $15) / hz }'
}

# CPU seconds since timing_cpu printed $1.
timing_cpu_since() {
	awk -v now="$(timing_cpu)" -v then="$1" 'BEGIN { printf "%.1f", now - then }'
}

timing_row() {	# kind name wall cpu detail
	[ -n "${TIMES:-}" ] || return 0
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$TIMES"
}

# The guests' own figures of a VM run's results folder (DIR/times, written
# by tools/vm/guest.sh; DIR/hostN/times for --hosts 2): "ready 31 s, job
# 250 s" or "host1 ready 40 s, job 600 s; host2 ...".
timing_vm_detail() {	# dir
	local d out='' f
	for d in "$1" "$1"/host[0-9]; do
		f=$d/times
		[ -f "$f" ] || continue
		[ "$d" = "$1" ] || out+="${out:+; }$(basename "$d") "
		out+=$(awk -F= '{ v[$1] = $2 } END {
			n = split("init_s ready_s job_s wall_s", k, " ")
			split("init ready job guest", w, " ")
			for (i = 1; i <= n; i++)
				if (k[i] in v) s = s (s == "" ? "" : ", ") w[i] " " v[k[i]] " s"
			print s }' "$f")
	done
	echo "$out"
}

# A VM run some other script started (DIR/times has the runner's
# wall_s): its row, and a line for the log ("[time] ..."; tools/jobs.sh
# repeats such lines when the job ends).
timing_vm_row() {	# dir name
	local wall detail
	wall=$(sed -n 's/^wall_s=//p' "$1/times" 2>/dev/null | head -n1)
	detail=$(timing_vm_detail "$1")
	timing_row vm "$2" "${wall:--}" - "$detail"
	echo "[time] VM run $2: ${wall:-?} s${detail:+ ($detail)}"
}

# The selftest binaries a VM run timed (DIR/selftests-times.tsv, from
# selftests/run.sh), as test rows named VM:RUN/BINARY.
timing_vm_tests() {	# dir run-name
	local d f tag
	for d in "$1" "$1"/host[0-9]; do
		f=$d/selftests-times.tsv
		[ -f "$f" ] || continue
		tag=$2
		[ "$d" = "$1" ] || tag+=/$(basename "$d")
		while IFS=$'\t' read -r bin secs; do
			timing_row test "VM:$tag/${bin#selftests/}" "$secs" - ""
		done <"$f"
	done
}

# timing_report: the slowest ten steps and VM runs, then the slowest ten
# selftest binaries, from $TIMES.
timing_report() {
	[ -f "${TIMES:-}" ] || return 0
	echo "slowest steps and VM runs (wall s, CPU s, cores busy; all in ${TIMES#"$PWD"/}):"
	# A job "vm:NAME" (tools/jobs.sh) and its VM run NAME are one line:
	# the job's times with the run's details.
	awk -F'\t' -v OFS='\t' '
		NR == FNR { if ($1 == "step") step["vm:" substr($2, 4)] = 1
			    if ($1 == "vm") det[$2] = $5; next }
		FNR == 1 { next }
		$1 == "step" && $2 ~ /^vm:/ && (substr($2, 4) in det) { $5 = det[substr($2, 4)] }
		$1 == "vm" && (("vm:" $2) in step) { next }
		$1 == "step" || $1 == "vm"' "$TIMES" "$TIMES" | sort -t$'\t' -k3,3nr |
		head -n 10 | awk -F'\t' '{
			c = ($4 != "-" && $3 > 0) ? sprintf("%.2f", $4 / $3) : "-"
			printf "  %6d %7s %5s  %s%s\n", $3, $4, c, $2, ($5 != "" ? "  (" $5 ")" : "")
		}'
	if awk -F'\t' '$1 == "test" { f = 1 } END { exit !f }' "$TIMES"; then
		echo "slowest selftest binaries (wall s inside the guest):"
		awk -F'\t' 'NR > 1 && $1 == "test"' "$TIMES" | sort -t$'\t' -k3,3nr | head -n 10 |
			awk -F'\t' '{ printf "  %6d  %s\n", $3, $2 }'
	fi
}
