#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The mrpool demonstration. Runs inside the VM, as root, from the repo top,
# with mrpool.ko loaded and rxe0 up:
#
#   tools/vm/run --name demo -- tools/demo/demo.sh [mrpool-demo options]
#
# Runs mrpool-demo (slices from /dev/mrpool, then libmrpool buffers;
# registered, RDMA WRITE and READ across a chunk boundary, bytes checked,
# timings), shows the pool from sysfs and debugfs while the demo holds its
# slices and again after it has freed them. Exits non-zero when the demo fails; a missing sysfs or
# debugfs file is reported, never fatal.
#
#   tools/demo/demo.sh --dump    only print the pool state

cd "$(dirname "$0")/../.." || exit 1

# Prints every readable file under a directory, "name: value" for one-line
# files, indented otherwise. Sysfs plumbing (sections, notes, holders,
# power, uevent, ...) says nothing about the pool and is skipped.
dump_dir() {
	local dir=$1 f rel out
	if [ ! -d "$dir" ]; then
		echo "  ($dir: not present)"
		return
	fi
	# A pipe, not process substitution: the guest has no /dev/fd.
	# The trailing slash follows a symlinked start (/sys/class/misc/*).
	find "$dir/" -maxdepth 4 -type f 2>/dev/null | sort | while IFS= read -r f; do
		rel=${f#"$dir"/}
		rel=${rel#/}
		case "$rel" in
		sections/* | notes/* | holders/* | drivers/* | power/* | uevent | dev | \
		srcversion | initstate | coresize | initsize | taint | refcnt)
			continue ;;
		esac
		[ -r "$f" ] || continue
		# Builtins only: every exec costs ~0.1 s in the guest.
		if ! out=$(<"$f"); then
			echo "  $rel: (unreadable)"
		elif [[ $out == *$'\n'* ]]; then
			echo "  $rel:"
			echo "    ${out//$'\n'/$'\n'    }"
		else
			echo "  $rel: $out"
		fi
	done 2>/dev/null	# a write-only knob says why on stderr
}

dump_state() {
	echo "== $1: /sys/module/mrpool"
	dump_dir /sys/module/mrpool
	if [ -d /sys/class/misc/mrpool ]; then
		echo "== $1: /sys/class/misc/mrpool"
		dump_dir /sys/class/misc/mrpool
	fi
	echo "== $1: /sys/kernel/debug/mrpool"
	dump_dir /sys/kernel/debug/mrpool
}

if [ "${1-}" = "--dump" ]; then
	dump_state "${2:-pool state}"
	exit 0
fi

demo=tools/demo/mrpool-demo
if [ ! -x "$demo" ]; then
	echo "demo.sh: $demo not built (run make at the top)" >&2
	exit 1
fi

echo "== RDMA devices"
rdma link show 2>/dev/null || ibv_devices
echo "== mrpool-demo $*"
"$demo" -x "tools/demo/demo.sh --dump 'while the demo holds its slices'" "$@"
rc=$?
dump_state "after the demo"
echo "== demo.sh: exit $rc"
exit $rc
