#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# tools/busy.sh CMD [ARGS...]: run CMD while every CPU is kept busy by a
# kernel build, as on a loaded build host (issue 8: make check must pass
# with no test depending on timing). One build loop per CPU, each compiling
# the module from its own scratch copy against the guest kernel's headers
# (.cache/env.mk), so nothing in this tree is touched. Exits with CMD's
# status; the loops die with it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
kdir=$(sed -n 's/^GUEST_KDIR := //p' "$top/.cache/env.mk" 2>/dev/null)
[ -d "$kdir" ] || { echo "busy.sh: no guest kernel headers: run 'make deps'" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: tools/busy.sh CMD [ARGS...]" >&2; exit 2; }

scratch=$(mktemp -d /tmp/mrpool-busy.XXXXXX)
pids=()
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -- "-$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One loop: clean and build the module in $2 with the headers in $1.
# shellcheck disable=SC2016  # expanded by the loop's own bash
loop='n=0
while :; do
	make -s -C "$1" M="$2" clean >/dev/null 2>&1
	make -s -C "$1" M="$2" modules >/dev/null 2>&1 || exit 1
	n=$((n + 1))
	echo "$n" >"$2/.builds"
done'

set +m
for i in $(seq "$(nproc)"); do
	mkdir -p "$scratch/$i"
	git -C "$top" ls-files Kbuild kmod include |
		tar -C "$top" -cf - -T - | tar -C "$scratch/$i" -xf -
	setsid bash -c "$loop" busy "$kdir" "$scratch/$i" &
	pids+=($!)
done
echo "busy.sh: $(nproc) kernel build loops running (pids ${pids[*]})"

"$@"
st=$?
total=0
for i in $(seq "$(nproc)"); do
	total=$((total + $(cat "$scratch/$i/.builds" 2>/dev/null || echo 0)))
done
for p in "${pids[@]}"; do
	kill -0 "$p" 2>/dev/null || echo "busy.sh: build loop $p stopped early" >&2
done
echo "busy.sh: the build loops finished $total module builds meanwhile; '$*' exited $st"
exit "$st"
