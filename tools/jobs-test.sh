#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The job scheduler of make check (tools/jobs.sh) on fake jobs that log
# when they run: no more jobs at once than its slots, a hostroot job never
# beside a VM job or another hostroot job, the first job that fits starts
# first, every job runs once, and a failing job fails the run but not the
# others. TAP on stdout; make check runs it (job "static").
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tools/timing.sh
. "$top/tools/timing.sh"
# shellcheck source=tools/jobs.sh
. "$top/tools/jobs.sh"
JOBS_DIR=$work/logs
timing_init "$work/times.tsv"
echo "# selftest: tools/jobs.sh"
n=0 bad=0
ok() {	# status description
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad=1; fi
}

# A fake job: its class and start and end on the shared log.
# shellcheck disable=SC2317,SC2031  # run by jobs_run, JOB set there
fake() {	# class seconds status
	echo "start $JOB $1" >>"$work/events"
	sleep "$2"
	echo "end $JOB $1" >>"$work/events"
	return "$3"
}
job_add root1 hostroot fake hostroot 1.0 0
job_add vm1 vm fake vm 0.6 0
job_add h1 host fake host 0.3 0
job_add h2 host fake host 0.3 0
job_add vm2 vm fake vm 0.6 3
job_add root2 hostroot fake hostroot 0.3 0
job_add vm3 vm fake vm 0.3 0
MRPOOL_CHECK_JOBS=2 jobs_run >"$work/out" 2>&1
st=$?

# Replay the events: what ran at once, and beside what.
awk '
	$1 == "start" { run[$2] = $3; n = 0; for (j in run) n++
		if (n > max) max = n
		for (j in run) if (j != $2) {
			if ($3 == "hostroot" && run[j] != "host") clash = clash " " $2 "+" j
			if ($3 == "vm" && run[j] == "hostroot") clash = clash " " $2 "+" j
		}
		order = order " " $2; starts[$2]++ }
	$1 == "end" { delete run[$2] }
	END { print max; print clash; print order
		for (j in starts) if (starts[j] != 1) twice = twice " " j; print twice }
' "$work/events" >"$work/replay"
{ read -r max; read -r clash; read -r order; read -r twice; } <"$work/replay"
[ "$max" = 2 ]
ok $? "at most 2 jobs at once with 2 slots (seen: $max)"
[ -z "$clash" ]
ok $? "no hostroot job beside a VM job or another hostroot job${clash:+ (seen:$clash)}"
[ "$(wc -w <<<"$order")" = 7 ] && [ -z "$twice" ]
ok $? "every job ran once (${twice:+twice:$twice}$order)"
# root1 first; h1 is the first job that fits beside it (vm1 does not);
# the VM jobs start in their order (however long anything took). The
# scheduler's own order: the jobs' events may race each other.
started=$(sed -n 's/^\[jobs\] start //p' "$work/out" | paste -sd' ')
[[ $started == "root1 h1 "* ]] && [ "$(tr ' ' '\n' <<<"$started" | grep '^vm' | paste -sd' ')" = "vm1 vm2 vm3" ]
ok $? "the first job that fits starts first (order: $started)"
[ "$st" != 0 ] && grep -q 'done  vm2: status 3' "$work/out" && grep -q 'done  vm3: status 0' "$work/out"
ok $? "a job's failure fails the run (status $st), the others still run"
[ "$(awk -F'\t' '$1 == "step"' "$work/times.tsv" | wc -l)" = 7 ]
ok $? "each job's wall and CPU time is a row of times.tsv"
echo "1..$n"
exit "$bad"
