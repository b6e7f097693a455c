#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs inside the guest (tools/vm/run), as root, from the repository top,
# with mrpool.ko loaded and rxe0 up: every selftests/*_test binary (or the
# ones named as arguments) in turn, each printing TAP. Without arguments,
# binaries named in selftests/vm-runs (a word of a command, or an item of a
# comma list in one) are left out: they run (and must pass, not skip) in
# their own VM run; and so is, on any guest kernel but Debian 12's own
# ($MRPOOL_KERNEL other than 6.1 or debug), a binary whose source says
# "VM kernels: one" in its header comment: it exercises the library or the
# test helpers, nothing that differs between kernels (which paths of the
# kernel it takes, other tests take on every kernel), so one kernel proves
# it (issue 31).
#
# Each binary runs in its own session under `timeout` (MRPOOL_TEST_TIMEOUT
# seconds, default 1200: a hang catcher, ample on a busy host); whatever it
# leaves running afterwards (a child a failed ASSERT never killed) is
# killed with its session, so it cannot hold the output or the pool.
# Reported as failed tests ("not ok - ..."): a timeout, a binary missing or
# not executable, a TAP plan (1..N) that does not match the number of
# results, and a non-zero exit without a failed test. The TAP of every
# binary, with these lines, is appended to $MRPOOL_RESULTS/selftests.tap
# when that is set (tools/vm/guest.sh sets it), and each binary's wall time
# to $MRPOOL_RESULTS/selftests-times.tsv ("binary<TAB>seconds"), which
# make check's times.tsv collects.
cd "$(dirname "$0")/.." || exit 1
set +m	# no job control: a background job is then no group leader, so
	# setsid(1) calls setsid() without forking and the job's pid is its
	# session id.
tmo=${MRPOOL_TEST_TIMEOUT:-1200}
tap=${MRPOOL_RESULTS:+$MRPOOL_RESULTS/selftests.tap}
times=${MRPOOL_RESULTS:+$MRPOOL_RESULTS/selftests-times.tsv}
rc=0
tests=("$@")
if ((${#tests[@]} == 0)); then
	own=$(sed -e '/^[[:space:]]*#/d' -e 's/^[^|]*|[^|]*|//' selftests/vm-runs 2>/dev/null |
		tr ' \t,=|' '\n\n\n\n\n' | grep '_test$')
	# From the sources: a test that was not built is reported, not lost.
	for s in selftests/*_test.c; do
		t=${s%.c}
		grep -qxF "$t" <<<"$own" && continue
		case ${MRPOOL_KERNEL:-6.1} in
		6.1 | debug) ;;
		*) if grep -q '^ \* VM kernels: one' "$s"; then
			echo "# selftest: $t: on Debian 12's 6.1 only (VM kernels: one)"
			continue
		   fi ;;
		esac
		tests+=("$t")
	done
fi

# A result line of our own: on the console and in the TAP file.
report() {
	echo "$*"
	[ -z "$tap" ] || echo "$*" >>"$tap"
}

# Live processes (not zombies) in session $1, as "pid comm" lines.
session_procs() {
	ps -e -o sid=,pid=,stat=,comm= | awk -v s="$1" '$1 == s && $3 !~ /^Z/ {print $2, $4}'
}

for t in "${tests[@]}"; do
	echo "# selftest: $t"
	[ -z "$tap" ] || echo "# selftest: $t" >>"$tap"
	if [ ! -x "$t" ]; then
		report "not ok - $t: not built or not executable"
		rc=1
		continue
	fi
	out=$(mktemp)
	t0=$SECONDS
	setsid timeout -k 5 "$tmo" "$t" >"$out" 2>&1 </dev/null &
	sid=$!
	tail -s 0.2 -n +1 -f --pid="$sid" "$out" &	# live on the console
	tailpid=$!
	wait "$sid"
	st=$?
	left=$(session_procs "$sid")
	if [ -n "$left" ]; then
		pkill -KILL -s "$sid"
		for _ in $(seq 50); do
			[ -z "$(session_procs "$sid")" ] && break
			sleep 0.1
		done
	fi
	wait "$tailpid"
	[ -z "$times" ] || printf '%s\t%d\n' "$t" $((SECONDS - t0)) >>"$times"
	[ -z "$tap" ] || cat "$out" >>"$tap"
	[ -z "$left" ] || report "# $t left processes running; killed: $(echo $left)"
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$out" | head -n1)
	n=$(grep -cE '^(not )?ok [0-9]' "$out")
	bad=0
	[ "$st" -eq 0 ] || [ "$st" -eq 4 ] || bad=1 rc=1
	if [ "$st" = 124 ] || [ "$st" = 137 ]; then
		report "not ok - $t: timed out after $tmo s (killed with its children)"
	elif [ -z "$plan" ]; then
		report "not ok - $t: printed no TAP plan (1..N), exit status $st"
		rc=1
	elif [ "$plan" != "$n" ]; then
		report "not ok - $t: TAP plan 1..$plan but $n results, exit status $st"
		rc=1
	elif [ "$bad" = 1 ] && ! grep -q '^not ok' "$out"; then
		report "not ok - $t: exited with status $st without reporting a failure"
	fi
	rm -f "$out"
done
exit $rc
