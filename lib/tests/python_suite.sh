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
# Debian's interpreter and its libpython3.11-testsuite (tools/deps.sh), not
# whatever python3 comes first in PATH.
set -uo pipefail

lib=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
mods=("$@")
((${#mods[@]})) || mods=(test_multiprocessing_fork test_subprocess test_mmap test_bytes)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "TAP version 13"
echo "1..$((${#mods[@]} + 2))"
if ! "$py" -c 'import test.libregrtest' 2>/dev/null; then
	for m in "${mods[@]}"; do
		echo "not ok - $m: Python's test suite is missing (libpython3.11-testsuite: make deps)"
	done
	echo "not ok - pool used"
	echo "not ok - forks with pool blocks"
	exit 1
fi

# One regrtest run; its JUnit XML in $1. -j1: one worker process, so the
# shim is under every test; --timeout catches a hang (a child that died of
# its parent's missing memory made multiprocessing wait forever).
suite() {	# xml [env...]
	local xml=$1
	shift
	(cd "$tmp" && env "$@" "$py" -m test -j1 --timeout 600 --junit-xml "$xml" \
		"${mods[@]}" >"$xml.log" 2>&1)
}
t0=$SECONDS
suite "$tmp/plain.xml"
t1=$SECONDS
# MRPOOL_PRELOAD_INHERIT=all: Python uses no RDMA here, and the shim would
# stay dormant (the real allocator's blocks) in every process of the run.
suite "$tmp/shim.xml" LD_PRELOAD="$lib/libmrpool-preload.so" MRPOOL_BACKEND=anon \
	MRPOOL_PRELOAD_INHERIT=all MRPOOL_PRELOAD_REPORT="$tmp/report"
t2=$SECONDS
echo "# without the shim $((t1 - t0)) s, with it $((t2 - t1)) s"

# Per module: each test case's outcome (passed, failed, error, skipped),
# the two runs side by side; a case in one run only counts as a difference.
"$py" - "$tmp/plain.xml" "$tmp/shim.xml" "${mods[@]}" <<'PY'
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
for mod in sys.argv[3:]:
    if plain is None or shim is None:
        print(f"not ok - {mod}: no JUnit XML ({perr or serr})")
        continue
    keys = {k for k in set(plain) | set(shim) if k.startswith(mod + ".") or
            k.startswith("test." + mod + ".")}
    diff = sorted(k for k in keys if plain.get(k) != shim.get(k))
    npass = sum(1 for k in keys if shim.get(k) == "passed")
    if not keys:
        print(f"not ok - {mod}: no test case ran")
    elif diff:
        print(f"not ok - {mod}: {len(diff)} of {len(keys)} cases differ with the shim")
        for k in diff[:20]:
            print(f"#   {k}: {plain.get(k, 'absent')} -> {shim.get(k, 'absent')}")
    else:
        print(f"ok - {mod}: the same outcome in all {len(keys)} cases "
              f"({npass} passed with the shim)")
PY

# The shim's report: one line per process that ran under it.
allocs=0 forks=0
if [ -f "$tmp/report" ]; then
	allocs=$(grep -o 'allocations from the pool [0-9]*' "$tmp/report" |
		awk '{s += $5} END {print s + 0}')
	forks=$(grep -o 'forks with pool blocks [0-9]*' "$tmp/report" |
		awk '{s += $5} END {print s + 0}')
fi
((allocs > 0)) && r=ok || r="not ok"
echo "$r - pool used: $allocs blocks from the pool, in $(wc -l <"$tmp/report" 2>/dev/null || echo 0) processes"
((forks > 0)) && r=ok || r="not ok"
echo "$r - forks with pool blocks: $forks (their children worked on their copies)"
