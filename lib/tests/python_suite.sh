#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Python's own test suite, unmodified, under the preload shim (issue 32):
# the modules that stress the allocator and fork (multiprocessing with the
# fork start method, subprocess, mmap, bytes), run once without the shim
# and once with it on the anonymous backend, must end with the same
# outcome for every test case (JUnit XML from regrtest, compared case by
# case), and the shimmed run must really have used the pool: blocks from
# it, and forks made with pool blocks live (whose children then worked on
# their copies). TAP on stdout, one line per module and two for the pool.
#
#   lib/tests/python_suite.sh [MODULE ...]
# MRPOOL_SUITE_BACKEND=anon (default) or kmod: the shimmed run's backend.
# kmod (MRPOOL_BACKEND=kernel, /dev/mrpool: the VM's
# selftests/preload_pysuite_test) counts only blocks the shim's report
# says came from the kernel pool, and adds a line: the module's counters
# (/sys/class/misc/mrpool/stats/allocs and fork_copies) must have moved
# during the shimmed run, and not during the plain one (nothing else uses
# the pool meanwhile).
# MRPOOL_SUITE_MATCH="PAT ...": a subset, each pattern passed to regrtest
# as -m PAT (a test case runs if any pattern matches its name, class or
# module; fnmatch patterns: test.test_x.Class.*).
# A case whose outcome differs is run again, alone, both ways (at most
# 10 of them): some of Python's tests assert timing (test_put's
# assertTimingAlmostEqual) and fail on a loaded machine whichever run they
# are in; only a case that differs again counts, and the first outcome of
# one that did not is said on a comment line.
# Debian's interpreter and its libpython3.11-testsuite (tools/deps.sh), not
# whatever python3 comes first in PATH.
set -uo pipefail

lib=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
mods=("$@")
((${#mods[@]})) || mods=(test_multiprocessing_fork test_subprocess test_mmap test_bytes)
backend=${MRPOOL_SUITE_BACKEND:-anon}
stats=/sys/class/misc/mrpool/stats
match=()
for p in ${MRPOOL_SUITE_MATCH:-}; do
	match+=(-m "$p")
done
case $backend in
anon) kind=anon extra=0 ;;
kmod) kind=kernel extra=1 ;;
*) echo "python_suite.sh: MRPOOL_SUITE_BACKEND: anon or kmod, not $backend" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "TAP version 13"
echo "1..$((${#mods[@]} + 2 + extra))"
if ! "$py" -c 'import test.libregrtest' 2>/dev/null; then
	for m in "${mods[@]}"; do
		echo "not ok - $m: Python's test suite is missing (libpython3.11-testsuite: make deps)"
	done
	echo "not ok - pool used"
	echo "not ok - forks with pool blocks"
	((extra == 0)) || echo "not ok - kernel pool counters"
	exit 1
fi
if [ "$backend" = kmod ] && { [ ! -c /dev/mrpool ] || [ ! -r $stats/allocs ]; }; then
	for m in "${mods[@]}"; do
		echo "not ok - $m: MRPOOL_SUITE_BACKEND=kmod needs /dev/mrpool and $stats (mrpool.ko)"
	done
	echo "not ok - pool used"
	echo "not ok - forks with pool blocks"
	echo "not ok - kernel pool counters"
	exit 1
fi

# The module's counters, "allocs fork_copies" (kmod only).
counters() {
	[ "$backend" = kmod ] && echo "$(<$stats/allocs) $(<$stats/fork_copies)"
}

# One regrtest run; its JUnit XML in $1. -j1: one worker process, so the
# shim is under every test; --timeout catches a hang (a child that died of
# its parent's missing memory made multiprocessing wait forever).
# $rerun, when set: regrtest -m patterns that replace $match.
rerun=()
suite() {	# xml [env...]
	local xml=$1 sel=("${match[@]}")
	shift
	((${#rerun[@]} == 0)) || sel=("${rerun[@]}")
	(cd "$tmp" && env "$@" "$py" -m test -j1 --timeout 600 --junit-xml "$xml" \
		"${sel[@]}" "${mods[@]}" >"$xml.log" 2>&1)
}
# MRPOOL_PRELOAD_INHERIT=all: Python uses no RDMA here, and the shim would
# stay dormant (the real allocator's blocks) in every process of the run.
shimmed() {	# xml
	suite "$1" LD_PRELOAD="$lib/libmrpool-preload.so" MRPOOL_BACKEND=$kind \
		MRPOOL_PRELOAD_INHERIT=all MRPOOL_PRELOAD_REPORT="$tmp/report"
}
c0=$(counters)
t0=$SECONDS
suite "$tmp/plain.xml"
t1=$SECONDS
c1=$(counters)
shimmed "$tmp/shim.xml"
t2=$SECONDS
c2=$(counters)
echo "# without the shim $((t1 - t0)) s, with it $((t2 - t1)) s"

# Per module: each test case's outcome (passed, failed, error, skipped),
# the two runs side by side; a case in one run only counts as a difference.
# compare.py PLAIN SHIM RERUN_PLAIN RERUN_SHIM DIFFS MODULE...: a case
# differs when it did in both pairs (a rerun XML that is missing: no
# rerun, every first difference counts); DIFFS gets the first pair's.
cat >"$tmp/compare.py" <<'PY'
import os
import sys
import xml.etree.ElementTree as ET

def cases(path):
    out = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        return None, str(e)
    for tc in root.iter("testcase"):
        name = tc.get("name", "")  # test.test_mmap.MmapTests.test_basic
        if tc.get("classname"):
            name = tc.get("classname") + "." + name
        state = "passed"
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                state = child.tag
        out[name] = state
    return out, None

plain, perr = cases(sys.argv[1])
shim, serr = cases(sys.argv[2])
reran = os.path.exists(sys.argv[3]) or os.path.exists(sys.argv[4])
rplain, _ = cases(sys.argv[3]) if reran else ({}, None)
rshim, _ = cases(sys.argv[4]) if reran else ({}, None)
rplain, rshim = rplain or {}, rshim or {}
first = []
for mod in sys.argv[6:]:
    if plain is None or shim is None:
        print(f"not ok - {mod}: no JUnit XML ({perr or serr})")
        continue
    keys = {k for k in set(plain) | set(shim) if k.startswith(mod + ".") or
            k.startswith("test." + mod + ".")}
    once = sorted(k for k in keys if plain.get(k) != shim.get(k))
    first += once
    # A case the rerun did not run again (absent both ways) still differs.
    diff = [k for k in once if not reran or rplain.get(k) != rshim.get(k)]
    npass = sum(1 for k in keys if shim.get(k) == "passed")
    if not keys:
        print(f"not ok - {mod}: no test case ran")
    elif diff:
        print(f"not ok - {mod}: {len(diff)} of {len(keys)} cases differ with the shim")
        for k in diff[:20]:
            again = (f"; again: {rplain.get(k, 'absent')} -> "
                     f"{rshim.get(k, 'absent')}" if reran else "")
            print(f"#   {k}: {plain.get(k, 'absent')} -> "
                  f"{shim.get(k, 'absent')}{again}")
    else:
        print(f"ok - {mod}: the same outcome in all {len(keys)} cases "
              f"({npass} passed with the shim)")
    for k in once:
        if k not in diff:
            print(f"#   {k}: {plain.get(k)} -> {shim.get(k)} at first, "
                  f"{rplain.get(k)} both ways when run again")
with open(sys.argv[5], "w") as f:
    f.write("".join(k + "\n" for k in first))
PY
compare() {	# rerun_plain rerun_shim
	"$py" "$tmp/compare.py" "$tmp/plain.xml" "$tmp/shim.xml" "$1" "$2" \
		"$tmp/diffs" "${mods[@]}"
}
compare "$tmp/none" "$tmp/none" >/dev/null
mapfile -t diffs <"$tmp/diffs"
if ((${#diffs[@]} > 0 && ${#diffs[@]} <= 10)); then
	for k in "${diffs[@]}"; do
		rerun+=(-m "$k")
	done
	suite "$tmp/rerun-plain.xml"
	shimmed "$tmp/rerun-shim.xml"
	compare "$tmp/rerun-plain.xml" "$tmp/rerun-shim.xml"
else
	compare "$tmp/none" "$tmp/none"
fi

# The shim's report: one line per process that ran under it. On the
# kernel backend only the lines of processes whose pool was the kernel's
# count (the shim falls back to nothing silently: a line says its backend).
allocs=0 forks=0 from=
[ "$backend" = anon ] || from=", the kernel's"
if [ -f "$tmp/report" ]; then
	lines() {
		if [ "$backend" = anon ]; then
			cat "$tmp/report"
		else
			grep ': backend kernel,' "$tmp/report"
		fi
	}
	allocs=$(lines | grep -o 'allocations from the pool [0-9]*' |
		awk '{s += $5} END {print s + 0}')
	forks=$(lines | grep -o 'forks with pool blocks [0-9]*' |
		awk '{s += $5} END {print s + 0}')
fi
((allocs > 0)) && r=ok || r="not ok"
echo "$r - pool used: $allocs blocks from the pool$from, in $(wc -l <"$tmp/report" 2>/dev/null || echo 0) processes"
((forks > 0)) && r=ok || r="not ok"
echo "$r - forks with pool blocks: $forks (their children worked on their copies)"
if [ "$backend" = kmod ]; then
	read -r a0 f0 <<<"$c0"
	read -r a1 f1 <<<"$c1"
	read -r a2 f2 <<<"$c2"
	# The plain run must leave them alone: else the deltas are not ours.
	((a1 == a0 && f1 == f0 && a2 > a1 && f2 > f1)) && r=ok || r="not ok"
	echo "$r - kernel pool counters: allocs +$((a2 - a1)), fork_copies +$((f2 - f1))" \
		"with the shim (+$((a1 - a0)), +$((f1 - f0)) without)"
fi
