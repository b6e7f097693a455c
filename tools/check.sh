#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The project's test command (make check runs it after deps and the build):
# host unit tests, checkpatch --strict and sparse over the module, then the
# selftests inside the VM. Every step's TAP goes to results/check/; the last
# line is "N passed, N failed, N skipped" and the exit status is non-zero
# on any failure.
set -uo pipefail
shopt -s nullglob

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
eval "$(sed -n 's/^\([A-Z_]*\) := \(.*\)$/\1="\2"/p' .cache/env.mk)"
out=$top/results/check
rm -rf "$out"
mkdir -p "$out"

say() { printf '\n[check] %s\n' "$*"; }
# A step that is not itself TAP counts as one test.
step() {	# name status
	if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fi >>"$out/steps.tap"
}

start=$SECONDS

# The library's unit tests, plain, under ASan+UBSan and under valgrind.
for t in test test-sanitize test-valgrind; do
	say "host unit tests (lib: make $t)"
	make -s -C lib "$t" 2>&1 | tee "$out/host-$t.tap"
	st=${PIPESTATUS[0]}
	grep -q '^not ok' "$out/host-$t.tap" || step "lib $t ran to completion" "$st"
done

say "checkpatch --strict (kmod/, include/, test kernel modules)"
srcs=$(git ls-files 'kmod/*.[ch]' 'include/*.h' 'selftests/*/*.[ch]')
# shellcheck disable=SC2086
perl "$CHECKPATCH" --no-tree --strict --terse --show-types -f $srcs 2>/dev/null \
	| grep -E 'ERROR|WARNING|CHECK' | tee "$out/checkpatch.txt"
[ -s "$out/checkpatch.txt" ]; step "checkpatch --strict: no errors, warnings or checks" $((!$?))

say "sparse (make C=2)"
make -s -C "$GUEST_KDIR" M="$top" C=2 modules 2>&1 | grep -E 'warning|error' | tee "$out/sparse.txt"
[ -s "$out/sparse.txt" ]; step "sparse: no warnings" $((!$?))

# VM runs: the default one, plus selftests/vm-runs (NAME|VM OPTIONS|CMD).
runs=("selftests||selftests/run.sh")
if [ -f selftests/vm-runs ]; then
	while IFS= read -r l; do
		case $l in ''|'#'*) continue ;; esac
		runs+=("$l")
	done <selftests/vm-runs
fi
for r in "${runs[@]}"; do
	IFS='|' read -r name opts cmd <<<"$r"
	say "VM run '$name': $cmd"
	# shellcheck disable=SC2086
	tools/vm/run --name "$name" $opts -- $cmd 2>&1 | tee "$out/vm-$name.tap"
	st=${PIPESTATUS[0]}
	case $st in
	0|1) step "VM run $name: completed, kernel log clean" 0 ;;
	124) step "VM run $name: guest hung" 1 ;;
	3) step "VM run $name: kernel log shows BUG/WARNING/Oops" 1 ;;
	*) step "VM run $name: guest setup or job failed (status $st)" 1 ;;
	esac
	cp -f "results/$name/dmesg.txt" "$out/dmesg-$name.txt" 2>/dev/null
done

pass=$(cat "$out"/*.tap | grep -E '^ok ' | grep -vc '# SKIP')
skip=$(cat "$out"/*.tap | grep -E '^ok ' | grep -c '# SKIP')
fail=$(cat "$out"/*.tap | grep -c '^not ok')
say "failures:"
cat "$out"/*.tap | grep '^not ok' || echo "(none)"
say "took $((SECONDS - start)) s; TAP and logs in results/check/"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
