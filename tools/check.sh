#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The project's test command (make check runs it after deps and the build):
# host unit tests, checkpatch --strict and sparse over the module, the
# selftests inside the VM on three guest kernels (Debian 12's 6.1 and
# 6.12, Debian 13 backports' newest: 7.3), the module built against the
# newest kernels (make modules-new's TAP), the packages, and one VM job
# from a copy of the tree under /tmp. The work is
# a list of jobs run side by side, one more at once than the machine has
# cores (tools/jobs.sh; MRPOOL_CHECK_JOBS=1 runs them one by one): each
# job's log is results/check/jobs/NAME.log, each step's and VM run's wall
# and CPU time a row of results/check/times.tsv (tools/timing.sh), the
# slowest ten printed at the end. Every step's TAP goes to results/check/;
# results/check/summary.tap lists each distinct test once; the last line
# is "N passed, N failed, N skipped" over those, and the exit status is
# non-zero on any failure.
#
# MRPOOL_CHECK_LIST=1 lists the jobs in the order they would start.
# MRPOOL_CHECK_ONLY="NAME ..." runs only the jobs named (shell patterns:
# 'vm:selftests*' 'vm:*-7.3' host static), MRPOOL_CHECK_TESTS only those binaries in
# the default VM run, MRPOOL_CHECK_HOST only those variants of the host
# tests (make check-quick sets all three: tools/check-quick.sh).
#
# What counts as one test:
# - a kselftest result (binary + number), once however many times it ran:
#   the library's host tests run plain, under ASan+UBSan, valgrind and
#   TSan, and fail if any variant fails (the failing variants are named);
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
. "$top/tools/timing.sh"
. "$top/tools/jobs.sh"
out=$top/results/check
[ -n "${MRPOOL_CHECK_LIST:-}" ] && out=$(mktemp -d)	# a listing leaves results/ alone
rm -rf "$out"
mkdir -p "$out/args"
JOBS_DIR=$out/jobs
timing_init "$out/times.tsv"

say() { printf '\n[check] %s\n' "$*"; }
# A check of this script's own: one test, named.
step() {	# name status
	if [ "$2" = 0 ]; then echo "ok - $1"; else echo "not ok - $1"; fi >>"$out/steps.tap"
}
# Inputs of the summary, per job (jobs run in subshells): "VAR=VALUE ...
# FILE" words for tools/tap-summary.awk, one per line, in
# results/check/args/JOB; read in the order the jobs were listed.
sum() {	# src var plan strict file
	# shellcheck disable=SC2031  # JOB: tools/jobs.sh sets it in the job's subshell
	printf '%s\n' "src=$1" "var=$2" "plan=$3" "strict=$4" "$5" >>"$out/args/$JOB"
}

start=$SECONDS
# make check's deps and builds, before this script (the Makefile says when
# it began).
if [[ ${MRPOOL_MAKE_START:-} =~ ^[0-9]+$ ]]; then
	timing_row step "deps and builds (make check, before tools/check.sh)" \
		$(($(date +%s) - MRPOOL_MAKE_START)) - ""
fi

# --- the jobs ---------------------------------------------------------------

# The library's unit tests: plain, under ASan+UBSan and TSan (valgrind
# runs them in a slice of the long proofs, tools/slices.sh: ASan and
# LeakSanitizer cover what it sees but reads of uninitialised bytes, at a
# third of its time). mrpoolctl on a fabricated sysfs/debugfs tree:
# --json, exit codes, hints.
job_host() {
	local t st
	for t in ${MRPOOL_CHECK_HOST:-test test-sanitize test-tsan}; do
		say "host unit tests (lib: make $t)"
		make -s -C lib "$t" >"$out/host-$t.tap" 2>&1
		st=$?
		if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/host-$t.tap"; then
			step "lib make $t: exited with status $st without a failed test" 1
		fi
		sum lib "${t#test-}" 1 0 "$out/host-$t.tap"
	done
	say "host tests (tools/mrpoolctl: make test)"
	make -s -C tools/mrpoolctl test >"$out/host-mrpoolctl.tap" 2>&1
	st=$?
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/host-mrpoolctl.tap"; then
		step "mrpoolctl make test: exited with status $st without a failed test" 1
	fi
	sum mrpoolctl "" 1 0 "$out/host-mrpoolctl.tap"
}

# Python's own test suite (multiprocessing with fork, subprocess, mmap,
# bytes), unmodified, with and without the preload shim on the anonymous
# backend: the same outcome case by case, the pool used, forks made with
# pool blocks live (lib/tests/python_suite.sh). Mostly waiting: about a
# third of a core for three and a half minutes.
job_pysuite() {
	local st
	say "Python's test suite with and without the shim (lib/tests/python_suite.sh)"
	lib/tests/python_suite.sh >"$out/host-pysuite.tap" 2>&1
	st=$?
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/host-pysuite.tap"; then
		step "lib/tests/python_suite.sh: exited with status $st without a failed test" 1
	fi
	sum lib pysuite 1 1 "$out/host-pysuite.tap"
}

# arm64: the library's tests cross-built (-Werror) and run on arm64
# kernels in qemu-system-aarch64, with preload_test: Debian's 6.1 (4 KiB
# pages, 48-bit VA: the library's memory lies above 2^47) and its 6.12
# with 16 KiB pages (tools/arm64/run; each guest is a variant of the
# tests). The same tests under qemu-aarch64 user mode (make -C lib
# test-arm64) run in a slice of the long proofs: on an x86-64 host kernel
# they see 4 KiB pages below 2^47, a subset of what the 6.1 guest shows.
job_arm64() {
	local st k r
	say "host unit tests in arm64 system guests, 6.1 and 6.12 with 16 KiB pages (tools/arm64/run)"
	rm -rf results/arm64-system results/arm64-system-6.12-16k
	tools/arm64/run >"$out/arm64-system.log" 2>&1
	st=$?
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/arm64-system.log"; then
		step "tools/arm64/run: exited with status $st without a failed test" 1
	fi
	for k in 6.1 6.12-16k; do
		r=results/arm64-system
		[ "$k" = 6.1 ] || r+=-$k
		if [ -f "$r/guest.tap" ]; then
			cp -f "$r/guest.tap" "$out/host-arm64-system-$k.tap"
			sum lib "arm64-$k" 1 0 "$out/host-arm64-system-$k.tap"
		elif [ "$st" != 4 ]; then
			step "tools/arm64/run: the $k guest left its TAP ($r/guest.tap)" 1
		fi
	done
}

# The scheduler itself (tools/jobs-test.sh), man pages, checkpatch
# --strict and sparse, and the builds against the newest kernels (make
# check ran make modules-new before this script: its TAP).
job_static() {
	local pages p warn lines srcs name st checked
	if [ -f .cache/newkernel.tap ]; then
		say "the module against the newest kernels (make modules-new: .cache/newkernel.tap)"
		cp -f .cache/newkernel.tap "$out/newkernel.tap"
		cat "$out/newkernel.tap"
		sum newkernel "" 1 0 "$out/newkernel.tap"
	fi
	say "the job scheduler on fake jobs (tools/jobs-test.sh)"
	tools/jobs-test.sh >"$out/jobs-test.tap" 2>&1
	st=$?
	cat "$out/jobs-test.tap"
	sum jobs "" 1 0 "$out/jobs-test.tap"
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/jobs-test.tap"; then
		step "tools/jobs-test.sh: exited with status $st without a failed test" 1
	fi

	say "man pages: each renders with man -l, and groff warns of nothing"
	pages=$(git ls-files '*.[1-8]')
	[ -n "$pages" ] || step "man pages (none found: git ls-files failed?)" 1
	for p in $pages; do
		warn=$(groff -man -ww -z -Tutf8 "$p" 2>&1)
		lines=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$p" 2>/dev/null | wc -l)
		echo "$p: $lines lines${warn:+; $warn}"
		step "man page $p renders cleanly${warn:+ (groff: ${warn%%$'\n'*})}" \
			"$([ -z "$warn" ] && ((lines > 10)) && echo 0 || echo 1)"
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

	# From a copy of the module's sources (the VM runs beside this job
	# load the tree's objects), kept with their times: C=2 checks every
	# file and compiles only what changed since the last run.
	say "sparse (make C=2)"
	name="sparse: no warnings"
	if ! command -v sparse >/dev/null; then
		echo "sparse is not installed: run tools/deps.sh"
		step "$name (sparse not installed: did not run)" 1
	else
		local b=$top/.cache/build-sparse
		mkdir -p "$b"
		git ls-files Kbuild kmod include | tar -cf - -T - | tar -C "$b" -xf -
		make -C "$GUEST_KDIR" M="$b" C=2 modules >"$out/sparse.log" 2>&1
		st=$?
		grep -E 'warning|error|not found' "$out/sparse.log" | tee "$out/sparse.txt"
		checked=$(grep -c '^  CHECK ' "$out/sparse.log")
		if [ "$st" != 0 ] || [ -s "$out/sparse.txt" ] || [ "$checked" = 0 ]; then
			step "$name (status $st, $checked files checked, $(wc -l <"$out/sparse.txt") reports)" 1
		else
			step "$name" 0
		fi
	fi
}

# The TAP a VM run left, for the summary (src VM:NAME, or VM:NAME/hostN
# for each guest of a --hosts 2 run), and its times.
vm_tap() {	# dir strict status [name]
	local f d tag name=${4:-$(basename "$1")}
	for d in "$1" "$1"/host[0-9]; do
		tag=$name
		[ "$d" = "$1" ] || tag+=/$(basename "$d")
		for f in selftests guest vm; do
			[ -f "$d/$f.tap" ] || continue
			cp -f "$d/$f.tap" "$out/vm-${tag//\//-}-$f.tap"
			sum "VM:$tag" "" 0 "$2" "$out/vm-${tag//\//-}-$f.tap"
		done
		cp -f "$d/dmesg.txt" "$out/dmesg-${tag//\//-}.txt" 2>/dev/null
	done
	if [ "$3" != 0 ] && ! cat "$1"/*.tap "$1"/host[0-9]/*.tap 2>/dev/null | grep -q '^not ok'; then
		step "VM run $name: exited with status $3 without a failed test" 1
	fi
	timing_vm_tests "$1" "$name"
}

# One VM run: NAME KERNEL-OPTION STRICT OPTIONS CMD (OPTIONS and CMD as
# words in one argument each).
job_vm() {	# name kernel strict opts cmd
	local name=$1 kernel=$2 strict=$3 opts=$4 cmd=$5 kopt=() st want got stalled g c d t0
	[ -z "$kernel" ] || kopt=(--kernel "$kernel")
	say "VM run '$name' (kernel ${kernel:-as in its options}): $cmd"
	t0=$SECONDS
	# shellcheck disable=SC2086
	tools/vm/run --name "$name" "${kopt[@]}" $opts -- $cmd >"$out/vm-$name.log" 2>&1
	st=$?
	# A guest that died before the job began (no guest.tap: TCG has
	# crashed an untainted 6.12 kernel at boot) gets one more boot; the
	# first run's consoles go to results/check/first-run-*. Two guests
	# boot again when either died. Not after a boot that hung twice: the
	# runner has booted that guest again already.
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
		tools/vm/run --name "$name" "${kopt[@]}" $opts -- $cmd >"$out/vm-$name.log" 2>&1
		st=$?
	fi
	cat "$out/vm-$name.log"
	vm_tap "results/$name" "$strict" "$st"
	timing_row vm "$name" $((SECONDS - t0)) - "$(timing_vm_detail "results/$name")"
	echo "[time] VM run $name: $((SECONDS - t0)) s ($(timing_vm_detail "results/$name"))"
	return "$st"
}

# Issue 10: a build against MLNX_OFED/DOCA's ib_core (make OFA_DIR=...),
# checked against a stand-in OFED tree (there is no OFED here).
job_ofa() {
	local st
	say "OFA_DIR build: OFED's headers and symbol versions (stand-in tree)"
	tools/ofa/test.sh >"$out/ofa.tap" 2>&1
	st=$?
	cat "$out/ofa.tap"
	sum ofa "" 1 0 "$out/ofa.tap"
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/ofa.tap"; then
		step "tools/ofa/test.sh: exited with status $st without a failed test" 1
	fi
}

# Issue 10: the Debian packages, built and checked by lintian, installed on
# this machine, used in both guests (modprobe, udev rule, a pkg-config
# build moving data), purged (tools/deb/test.sh). Class hostroot: no
# other guest runs meanwhile (they mount this root).
job_deb() {
	local st
	say "Debian packages: make deb, then installed, used in both guests, purged"
	make -s deb >"$out/deb-build.log" 2>&1
	step "make deb: the packages build and lintian reports nothing (deb-build.log)" $?
	tools/deb/test.sh 2>&1 | tee "$out/deb-test.log"
	st=${PIPESTATUS[0]}
	cp -f results/deb/deb.tap "$out/deb.tap" 2>/dev/null
	sum deb "" 1 0 "$out/deb.tap"
	if [ "$st" != 0 ] && ! grep -q '^not ok' "$out/deb.tap" 2>/dev/null; then
		step "tools/deb/test.sh: exited with status $st without a failed test" 1
	fi
	timing_vm_row results/deb-6.1 deb-6.1
	timing_vm_row results/deb-6.12 deb-6.12
}

# Issue 10: the guest hides /tmp under a tmpfs; a checkout there must work
# too. A copy of the built tree (its .cache a link to this one's: nothing
# is downloaded or rebuilt) runs the demo in the VM.
job_anywhere() {
	local any st
	say "a checkout under /tmp: the demo in the VM from a copy of the tree there"
	any=$(mktemp -d /tmp/mrpool-anywhere.XXXXXX)
	tar -C "$top" --exclude=./.git --exclude=./results --exclude=./.cache --exclude=./build -cf - . |
		tar -C "$any" -xf -
	ln -s "$top/.cache" "$any/.cache"
	"$any/tools/vm/run" --name anywhere -- tools/demo/demo.sh 2>&1
	st=$?
	echo "# the copy was $any" >>"$out/steps.tap"
	step "checkout under /tmp: the demo runs in the VM from there" "$st"
	vm_tap "$any/results/anywhere" 0 "$st" anywhere
	timing_vm_row "$any/results/anywhere" anywhere
	rm -rf "$any"
}

# --- the job list -------------------------------------------------------------

# Which jobs run: all, or those MRPOOL_CHECK_ONLY names (shell patterns).
wanted() {	# name
	local p pats
	[ -n "${MRPOOL_CHECK_ONLY:-}" ] || return 0
	# Split into words without pathname expansion: under nullglob a
	# pattern no file matches ('vm:*-7.3') would vanish.
	read -ra pats <<<"$MRPOOL_CHECK_ONLY"
	for p in "${pats[@]}"; do
		# shellcheck disable=SC2053
		[[ $1 == $p ]] && return 0
	done
	return 1
}
add() {	# name class function [args...]
	wanted "$1" || return 0
	job_add "$@"
}

# The packages first (they change the root every guest mounts, so no guest
# runs beside them) while host jobs take the other cores (the first job
# that fits starts); then the rest, the longest first (below).
add deb hostroot job_deb

# VM runs: the default one, plus selftests/vm-runs (NAME|VM OPTIONS|CMD
# [|skips]), each on every guest kernel: Debian 12's 6.1 and its 6.12, and
# Debian 13 backports' newest (the series tools/newkernel/build.sh
# --fetch wrote in .cache/newkernel.mk: 7.3, runs NAME-7.3; NAME-new
# when none was fetched, which then fails saying so). A run whose options
# name its kernels (--kernel 6.1,6.12 for two hosts, or --kernel 6.12
# for one) runs once, on those. MRPOOL_CHECK_TESTS narrows the default
# run to those binaries.
newk=$(sed -n 's/^NEW_SERIES := //p' .cache/newkernel.mk 2>/dev/null)
kernels=(6.1 6.12 "${newk:-new}")
runs=("selftests||selftests/run.sh ${MRPOOL_CHECK_TESTS:-}")
while IFS= read -r l; do
	# A run named "-NAME" is off: its binaries stay out of the default
	# run (run.sh), and make stress or check-debug runs them instead.
	case $l in ''|'#'*|-*) continue ;; esac
	runs+=("$l")
done <selftests/vm-runs
for r in "${runs[@]}"; do
	IFS='|' read -r name opts cmd flags <<<"$r"
	strict=1
	[ "$r" = "${runs[0]}" ] || [ "$flags" = skips ] && strict=0
	if [[ " $opts " == *" --kernel "* ]]; then
		add "vm:$name" vm job_vm "$name" "" "$strict" "$opts" "$cmd"
		continue
	fi
	for kernel in "${kernels[@]}"; do
		n=$name
		[ "$kernel" = 6.1 ] || n+=-$kernel
		add "vm:$n" vm job_vm "$n" "$kernel" "$strict" "$opts" "$cmd"
	done
done
add vm:anywhere vm job_anywhere
add host host job_host
add pysuite host job_pysuite
add arm64 host job_arm64
add static host job_static
add ofa host job_ofa

# Longest first, by the last run's times on this machine (kept beside the
# guest kernels' caches, for every clone), else by these seconds of a run
# on this 2-core machine (2026-12-04, at load 7; any other job: 60). The
# packages stay first: see above.
estimate() {	# job
	case $1 in
	vm:selftests) echo 370 ;;
	vm:selftests-6.12) echo 320 ;;
	vm:selftests-7.3) echo 330 ;;
	host | arm64 | pysuite) echo 230 ;;
	vm:reliability*) echo 190 ;;
	vm:mpi) echo 180 ;;
	static | ofa) echo 120 ;;
	vm:pyverbs) echo 100 ;;
	vm:hosts) echo 70 ;;
	*) echo 60 ;;
	esac
}
last=${MRPOOL_CACHE:-/var/cache/mrpool}/check-times.tsv
mapfile -t order < <(for i in "${!JOBS_NAMES[@]}"; do
	w=''
	[ ! -f "$last" ] || w=$(awk -F'\t' -v n="${JOBS_NAMES[$i]}" \
		'$1 == "step" && $2 == n {print $3}' "$last")
	[ -n "$w" ] || w=$(estimate "${JOBS_NAMES[$i]}")
	[ "${JOBS_NAMES[$i]}" != deb ] || w=999999
	printf '%s\t%s\n' "$w" "$i"
done | sort -t$'\t' -k1,1nr -s | cut -f2)
n=() c=() m=()
for i in "${order[@]}"; do
	n+=("${JOBS_NAMES[$i]}") c+=("${JOBS_CLASS[$i]}") m+=("${JOBS_CMD[$i]}")
done
JOBS_NAMES=("${n[@]}") JOBS_CLASS=("${c[@]}") JOBS_CMD=("${m[@]}")

# MRPOOL_CHECK_LIST=1: the jobs, in the order they would start, and no run.
if [ -n "${MRPOOL_CHECK_LIST:-}" ]; then
	printf '%s\n' "${JOBS_NAMES[@]}"
	rm -rf "$out"
	exit 0
fi
jobs_run
jobs_st=$?
if ((jobs_st)) && ! grep -qs '^not ok' "$out"/*.tap; then
	step "every job ended with status 0 or a failed test (see results/check/jobs/)" 1
fi

# --- the summary ------------------------------------------------------------

sum_args=()
for j in "${JOBS_NAMES[@]}"; do
	[ ! -f "$out/args/$j" ] || mapfile -t -O "${#sum_args[@]}" sum_args <"$out/args/$j"
done
[ -f "$out/steps.tap" ] || : >"$out/steps.tap"
sum_args+=("src=check" "var=" "plan=0" "strict=0" "$out/steps.tap")

# One line per distinct test in summary.tap, then the counts.
awk -f "$top/tools/tap-summary.awk" "${sum_args[@]}" >"$out/summary.tap" 2>"$out/counts"

timing_row total "tools/check.sh" $((SECONDS - start)) "$(timing_cpu)" \
	"$(jobs_slots) jobs at a time"
if [[ ${MRPOOL_MAKE_START:-} =~ ^[0-9]+$ ]]; then
	timing_row total "make check" $(($(date +%s) - MRPOOL_MAKE_START)) - ""
fi
# A run of some jobs only (make check-quick) would misorder the next.
if [ -z "${MRPOOL_CHECK_ONLY:-}" ]; then
	mkdir -p "$(dirname "$last")" && cp -f "$out/times.tsv" "$last"
fi
say "failures:"
grep '^not ok' "$out/summary.tap" || echo "(none)"
say "skipped:"
grep '# SKIP' "$out/summary.tap" || echo "(none)"
# A guest that died before its job or hung in its boot was booted again
# (job_vm, tools/vm/run): it passed the second time, or failed above;
# either way, every such boot is listed here, with its console kept.
say "guests booted again:"
{
	grep -h 'booting once more' "$out/steps.tap"
	grep -h '^# .*booted again' "$out"/vm-*-vm.tap
} 2>/dev/null | grep . || echo "(none)"
say "took $((SECONDS - start)) s${MRPOOL_MAKE_START:+ ($(($(date +%s) - MRPOOL_MAKE_START)) s since make check began)}; TAP and logs in results/check/ (summary.tap: one line per test)"
timing_report
cat "$out/counts"
grep -q ' 0 failed,' "$out/counts"
