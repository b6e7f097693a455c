# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Sourced by tools/vm/guest.sh when the guest runs the debug kernel
# (tools/vm/run --kernel debug, built by tools/vm/debug-kernel.sh): its
# RDMA stack is built in, and the job ends with a kmemleak check. KASAN,
# lockdep and the list checks report in the kernel log, which the runner's
# gate reads.
# shellcheck shell=bash disable=SC2154	# res, gtap, GUEST_ROOT: guest.sh's

# What guest.sh loads (crc32_generic, ib_uverbs, rdma_rxe, dummy, ...) is
# built in: modprobe succeeds for a module in the tree's modules.builtin
# and fails for any other (there are no loadable ones).
modprobe() {	# module
	local m
	m=$(echo "$1" | tr - _)
	tr - _ <"$GUEST_ROOT/modules.builtin" | grep -q "/$m\.ko\$" && return 0
	echo "modprobe: $1 is not built into the debug kernel" >&2
	return 1
}

# Leaks from before the job (the kernel's own boot) are not the job's:
# one scan now reports them, and "clear" stops them being reported again.
# Whatever the job leaks from here on is reported at its end.
kmemleak=/sys/kernel/debug/kmemleak
if [ -w "$kmemleak" ]; then
	echo scan >"$kmemleak" && echo clear >"$kmemleak" ||
		fail "kmemleak scan and clear before the job"
else
	fail "no $kmemleak: the debug kernel runs kmemleak"
fi

# After the job and rmmod mrpool: two scans (an object is reported once
# it is found unreferenced and older than 5 s), and anything kmemleak then
# lists fails the run; the list is kept in kmemleak.txt.
debug_kmemleak_check() {
	local n
	sleep 6
	echo scan >"$kmemleak" && sleep 6 && echo scan >"$kmemleak"
	cat "$kmemleak" >"$res/kmemleak.txt" 2>&1
	n=$(grep -c '^unreferenced object' "$res/kmemleak.txt")
	if [ "$n" = 0 ] && ! [ -s "$res/kmemleak.txt" ]; then
		tap "ok - kmemleak: nothing unreferenced after the job"
	else
		tap "not ok - kmemleak: nothing unreferenced after the job ($n objects: kmemleak.txt)"
		head -n 40 "$res/kmemleak.txt" | sed 's/^/# /' | tee -a "$gtap"
	fi
}
