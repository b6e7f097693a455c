#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The project's test command (make check runs it after deps and the build):
# host unit tests, checkpatch --strict and sparse over the module, the
# selftests inside the VM on both guest kernels (6.1 and 6.12), and one VM
# job from a copy of the tree under
# /tmp. Every step's TAP goes to results/check/; results/check/summary.tap
# lists each distinct test once; the last line is "N passed, N failed, N
# skipped" over those, and the exit status is non-zero on any failure.
#
# What counts as one test:
# - a kselftest result (binary + number), once however many times it ran:
#   the library's host tests run plain, under ASan+UBSan and under valgrind
#   and fail if any of the three fails (the failing variants are named);
# - a binary whose TAP plan (1..N) does not match its results, that timed
#   out, or that failed without a failed result: one failed test (nothing
#   when all is well);
# - per VM run, two checks of the whole run: "kernel log clean" and "rmmod
#   mrpool after the job" (and failures only: hung, no job status, setup);
# - checkpatch, sparse (each fails if its tool did not run), the /tmp copy,
#   make deb (lintian) and each check of the packages (tools/deb/test.sh),
#   each check of the OFA_DIR build (tools/ofa/test.sh).
# Steps that merely ran add nothing. A SKIP in a dedicated VM run
# (selftests/vm-runs) is a failure: that run exists to provide the
# precondition; unless its line says "skips" in a fourth field (a run
# whose SKIP says what cannot run here, outside software's own failure).
set -uo pipefail
shopt -s nullglob

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
eval "$(sed -n 's/^\([A-Z_0-9]*\) := \(.*\)$/\1="\2"/p' .cache/env.mk)"
out=$top/results/check
rm -rf "$out"
mkdir -p "$out"

say() { printf '\n[check] %s\n' "$*"; }
# A check of this script's own: one test, named.
step() {	# name status
	if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fi >>"$out/steps.tap"
}
# Inputs of the summary: "VAR=VALUE ... FILE" words for the awk below.
sum_args=()

start=$SECONDS

# The library's unit tests: plain, under ASan+UBSan, valgrind and TSan, and
# cross-built for arm64 under qemu-aarch64 user mode.
for t in test test-sanitize test-valgrind test-tsan test-arm64; do
	say "host unit tests (lib: make $t)"
	make -s -C lib "$t" 2>&1 | tee "$out/host-$t.tap"
	st=${PIPESTATUS[0]}
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/host-$t.tap"; then
		step "lib make $t: exited with status $st without a failed test" 1
	fi
	sum_args+=("src=lib" "var=${t#test-}" "plan=1" "strict=0" "$out/host-$t.tap")
done

# The same tests (and preload_test, which user mode cannot run) on arm64
# kernels in qemu-system-aarch64: Debian's 6.1 (4 KiB pages, 48-bit VA:
# the library's memory lies above 2^47) and its 6.12 with 16 KiB pages
# (tools/arm64/run; about 2.5 min: the cross build 30-60 s, each guest
# 40-85 s; 30 s more per kernel the first time, to fetch it and unpack its
# root into /var/cache/mrpool). Each guest is a variant of the tests.
say "host unit tests in arm64 system guests, 6.1 and 6.12 with 16 KiB pages (tools/arm64/run)"
rm -rf results/arm64-system results/arm64-system-6.12-16k
tools/arm64/run 2>&1 | tee "$out/arm64-system.log"
st=${PIPESTATUS[0]}
if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/arm64-system.log"; then
	step "tools/arm64/run: exited with status $st without a failed test" 1
fi
for k in 6.1 6.12-16k; do
	r=results/arm64-system
	[ "$k" = 6.1 ] || r+=-$k
	if [ -f "$r/guest.tap" ]; then
		cp -f "$r/guest.tap" "$out/host-arm64-system-$k.tap"
		sum_args+=("src=lib" "var=arm64-$k" "plan=1" "strict=0" "$out/host-arm64-system-$k.tap")
	elif [ "$st" != 4 ]; then
		step "tools/arm64/run: the $k guest left its TAP ($r/guest.tap)" 1
	fi
done

# mrpoolctl on a fabricated sysfs/debugfs tree: --json, exit codes, hints.
say "host tests (tools/mrpoolctl: make test)"
make -s -C tools/mrpoolctl test 2>&1 | tee "$out/host-mrpoolctl.tap"
st=${PIPESTATUS[0]}
if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/host-mrpoolctl.tap"; then
	step "mrpoolctl make test: exited with status $st without a failed test" 1
fi
sum_args+=("src=mrpoolctl" "var=" "plan=1" "strict=0" "$out/host-mrpoolctl.tap")

say "man pages: each renders with man -l, and groff warns of nothing"
pages=$(git ls-files '*.[1-8]')
[ -n "$pages" ] || step "man pages (none found: git ls-files failed?)" 1
for p in $pages; do
	warn=$(groff -man -ww -z -Tutf8 "$p" 2>&1)
	lines=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$p" 2>/dev/null | wc -l)
	echo "$p: $lines lines${warn:+; $warn}"
	step "man page $p renders cleanly${warn:+ (groff: ${warn%%$'\n'*})}" \
		$([ -z "$warn" ] && ((lines > 10)) && echo 0 || echo 1)
done

say "checkpatch --strict (kmod/, include/, test kernel modules)"
srcs=$(git ls-files 'kmod/*.[ch]' 'include/*.h' 'selftests/*/*.[ch]')
name="checkpatch --strict: no errors, warnings or checks"
if [ ! -f "${CHECKPATCH:-}" ]; then
	echo "checkpatch.pl not found (CHECKPATCH='${CHECKPATCH:-}'): run tools/deps.sh"
	step "$name (checkpatch.pl not found: did not run)" 1
elif [ -z "$srcs" ]; then
	step "$name (no sources found: git ls-files failed?)" 1
else
	# shellcheck disable=SC2086
	perl "$CHECKPATCH" --no-tree --strict --terse --show-types -f $srcs \
		>"$out/checkpatch.txt" 2>&1
	st=$?
	cat "$out/checkpatch.txt"
	if [ "$st" != 0 ] || [ -s "$out/checkpatch.txt" ]; then
		step "$name (status $st, $(grep -cE 'ERROR|WARNING|CHECK' "$out/checkpatch.txt") reports)" 1
	else
		step "$name" 0
	fi
fi

say "sparse (make C=2)"
name="sparse: no warnings"
if ! command -v sparse >/dev/null; then
	echo "sparse is not installed: run tools/deps.sh"
	step "$name (sparse not installed: did not run)" 1
else
	make -C "$GUEST_KDIR" M="$top" C=2 modules >"$out/sparse.log" 2>&1
	st=$?
	grep -E 'warning|error|not found' "$out/sparse.log" | tee "$out/sparse.txt"
	checked=$(grep -c '^  CHECK ' "$out/sparse.log")
	if [ "$st" != 0 ] || [ -s "$out/sparse.txt" ] || [ "$checked" = 0 ]; then
		step "$name (status $st, $checked files checked, $(wc -l <"$out/sparse.txt") reports)" 1
	else
		step "$name" 0
	fi
fi

# The TAP a VM run left, for the summary (src VM:NAME, or VM:NAME/hostN
# for each guest of a --hosts 2 run).
vm_tap() {	# dir strict status
	local f d tag
	for d in "$1" "$1"/host[0-9]; do
		tag=$(basename "$1")
		[ "$d" = "$1" ] || tag+=/$(basename "$d")
		for f in selftests guest vm; do
			[ -f "$d/$f.tap" ] || continue
			cp -f "$d/$f.tap" "$out/vm-${tag//\//-}-$f.tap"
			sum_args+=("src=VM:$tag" "var=" "plan=0" "strict=$2" \
				"$out/vm-${tag//\//-}-$f.tap")
		done
		cp -f "$d/dmesg.txt" "$out/dmesg-${tag//\//-}.txt" 2>/dev/null
	done
	if [ "$3" != 0 ] && ! cat "$1"/*.tap "$1"/host[0-9]/*.tap 2>/dev/null | grep -q '^not ok'; then
		step "VM run $(basename "$1"): exited with status $3 without a failed test" 1
	fi
}

# VM runs: the default one, plus selftests/vm-runs (NAME|VM OPTIONS|CMD).
runs=("selftests||selftests/run.sh")
if [ -f selftests/vm-runs ]; then
	while IFS= read -r l; do
		# A run named "-NAME" is off: its binaries stay out of the
		# default run (run.sh), and make stress runs them instead.
		case $l in ''|'#'*|-*) continue ;; esac
		runs+=("$l")
	done <selftests/vm-runs
fi
# Each run on both guest kernels: Debian 12's 6.1 and its 6.12. A run
# whose options name its kernels (--kernel 6.1,6.12 for two hosts) runs
# once, on those.
for kernel in 6.1 6.12; do
	for r in "${runs[@]}"; do
		IFS='|' read -r name opts cmd flags <<<"$r"
		kopt=(--kernel "$kernel")
		if [[ " $opts " == *" --kernel "* ]]; then
			[ "$kernel" = 6.1 ] || continue
			kopt=()
		elif [ "$kernel" != 6.1 ]; then
			name=$name-$kernel
		fi
		say "VM run '$name' (kernel ${kopt[1]:-as in its options}): $cmd"
		# shellcheck disable=SC2086
		tools/vm/run --name "$name" "${kopt[@]}" $opts -- $cmd 2>&1 |
			tee "$out/vm-$name.log"
		st=${PIPESTATUS[0]}
		# A guest that died before the job began (no guest.tap: TCG has
		# crashed an untainted 6.12 kernel at boot) gets one more boot;
		# the first run's consoles go to results/check/first-run-*. Two
		# guests boot again when either died. Not after a boot that hung
		# twice: the runner has booted that guest again already.
		want=1 got=0
		[ -d "results/$name/host1" ] && want=2
		for g in "results/$name"/guest.tap "results/$name"/host[0-9]/guest.tap; do
			[ ! -f "$g" ] || got=$((got + 1))
		done
		stalled=0
		for g in "results/$name"/boot-stalled "results/$name"/host[0-9]/boot-stalled; do
			[ ! -f "$g" ] || stalled=1
		done
		if [ "$st" != 0 ] && ((got < want)) && ((!stalled)); then
			for c in "results/$name"/console*.log "results/$name"/host[0-9]/console.log \
				 "results/$name"/host[0-9]-console-boot1.log; do
				d=${c#results/}	# NAME/host1/console.log: first-run-vm-NAME-host1-console.log
				mv "$c" "$out/first-run-vm-${d//\//-}"
			done
			echo "# $name: a guest died before its job; booting once more" |
				tee -a "$out/steps.tap"
			# shellcheck disable=SC2086
			tools/vm/run --name "$name" "${kopt[@]}" $opts -- $cmd 2>&1 |
				tee "$out/vm-$name.log"
			st=${PIPESTATUS[0]}
		fi
		strict=1
		[ "$r" = "${runs[0]}" ] || [ "$flags" = skips ] && strict=0
		vm_tap "results/$name" "$strict" "$st"
	done
done

# Issue 10: a build against MLNX_OFED/DOCA's ib_core (make OFA_DIR=...),
# checked against a stand-in OFED tree (there is no OFED here).
say "OFA_DIR build: OFED's headers and symbol versions (stand-in tree)"
tools/ofa/test.sh 2>&1 | tee "$out/ofa.tap"
st=${PIPESTATUS[0]}
sum_args+=("src=ofa" "var=" "plan=1" "strict=0" "$out/ofa.tap")
if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/ofa.tap"; then
	step "tools/ofa/test.sh: exited with status $st without a failed test" 1
fi

# Issue 10: the Debian packages, built and checked by lintian, installed on
# this machine, used in both guests (modprobe, udev rule, a pkg-config
# build moving data), purged (tools/deb/test.sh).
say "Debian packages: make deb, then installed, used in both guests, purged"
make -s deb >"$out/deb-build.log" 2>&1
step "make deb: the packages build and lintian reports nothing (deb-build.log)" $?
tools/deb/test.sh 2>&1 | tee "$out/deb-test.log"
st=${PIPESTATUS[0]}
cp -f results/deb/deb.tap "$out/deb.tap" 2>/dev/null
sum_args+=("src=deb" "var=" "plan=1" "strict=0" "$out/deb.tap")
if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/deb.tap" 2>/dev/null; then
	step "tools/deb/test.sh: exited with status $st without a failed test" 1
fi

# Issue 10: the guest hides /tmp under a tmpfs; a checkout there must work
# too. A copy of the built tree (its .cache a link to this one's: nothing
# is downloaded or rebuilt) runs the demo in the VM.
say "a checkout under /tmp: the demo in the VM from a copy of the tree there"
any=$(mktemp -d /tmp/mrpool-anywhere.XXXXXX)
tar -C "$top" --exclude=./.git --exclude=./results --exclude=./.cache --exclude=./build -cf - . |
	tar -C "$any" -xf -
ln -s "$top/.cache" "$any/.cache"
"$any/tools/vm/run" --name anywhere -- tools/demo/demo.sh 2>&1 | tee "$out/vm-anywhere.log"
st=${PIPESTATUS[0]}
echo "# the copy was $any" >>"$out/steps.tap"
step "checkout under /tmp: the demo runs in the VM from there" "$st"
vm_tap "$any/results/anywhere" 0 "$st"
rm -rf "$any"

sum_args+=("src=check" "var=" "plan=0" "strict=0" "$out/steps.tap")

# One line per distinct test in summary.tap, then the counts.
awk -f "$top/tools/tap-summary.awk" "${sum_args[@]}" >"$out/summary.tap" 2>"$out/counts"

say "failures:"
grep '^not ok' "$out/summary.tap" || echo "(none)"
say "skipped:"
grep '# SKIP' "$out/summary.tap" || echo "(none)"
say "took $((SECONDS - start)) s; TAP and logs in results/check/ (summary.tap: one line per test)"
cat "$out/counts"
grep -q ' 0 failed,' "$out/counts"
