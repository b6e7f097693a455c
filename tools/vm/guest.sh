#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs inside the guest, with the host's root as its root (tools/vm/init), as root. Brings up
# the RDMA stack and mrpool, runs the job, records its exit status.
# /mnt is the run's results folder (read-write); /mnt/env says what to do.
# The guest's own checks go to /mnt/guest.tap as TAP lines: the unload of
# mrpool after the job (a leak fails it), the kernel log reader, the setup.
set -u
. /mnt/env
res=/mnt
gtap=$res/guest.tap
: >"$gtap"
dmesg -w >"$res/dmesg.txt" 2>&1 &
kmsg_pid=$!
say() { echo "[guest] $*"; }
tap() { echo "$*"; echo "$*" >>"$gtap"; }
fail() {
	tap "not ok - guest setup failed: $*"
	echo 2 >"$res/status"
	exit 2
}

# The guest's own modules, where modprobe looks for them (with a packaged
# mrpool added, tools/vm/run --packaged). The debug kernel has them all
# built in, and checks of its own (tools/vm/guest-debug.sh).
if [ "${DEBUG_KERNEL:-0}" = 1 ]; then
	. "$MRPOOL_TOP/tools/vm/guest-debug.sh"
else
	# A kernel this host has no headers for (7.3: built in a chroot)
	# has no /lib/modules/KABI to mount over: a tmpfs gets one.
	if [ ! -d "/lib/modules/$KABI" ]; then
		mount -t tmpfs -o size=1m,mode=755 modules /lib/modules &&
			mkdir "/lib/modules/$KABI" || fail "/lib/modules/$KABI"
	fi
	mount --bind "$MODS_ROOT/lib/modules/$KABI" "/lib/modules/$KABI" ||
		fail "bind-mount guest modules"
fi
# rxe's ICRC took crc32 from the crypto API (crc32_generic) until it
# called the crc32 library ("RDMA/rxe: switch to using the crc32
# library", 6.15): 7.3 has no such module, nor needs one.
if modinfo crc32_generic >/dev/null 2>&1; then
	modprobe crc32_generic || fail "crc32_generic"
fi
modprobe ib_uverbs || fail "ib_uverbs"
modprobe rdma_rxe || fail "rdma_rxe"
# /dev/infiniband/rdma_cm: librdmacm's users (libfabric's verbs provider,
# UCX's rdmacm component) find no RDMA device without it.
modprobe rdma_ucm || [ -e /dev/infiniband/rdma_cm ] || fail "rdma_ucm"
ip link set lo up
if [ -n "${HOST_INDEX:-}" ]; then
	# tools/vm/run --hosts 2: rxe0 on the NIC QEMU joined to the other
	# guest's, found by the MAC the runner gave it.
	modprobe virtio_net || fail "virtio_net"
	nic=
	for _ in $(seq 50); do
		for d in /sys/class/net/*; do
			[ "$(cat "$d/address" 2>/dev/null)" = "$HOST_MAC" ] && nic=${d##*/}
		done
		[ -n "$nic" ] && break
		sleep 0.1
	done
	[ -n "$nic" ] || fail "no NIC with MAC $HOST_MAC"
	{ ip addr add "$HOST_IP/24" dev "$nic" && ip link set "$nic" up; } ||
		fail "$nic $HOST_IP"
	rdma link add rxe0 type rxe netdev "$nic" || fail "rxe0 on $nic"
	# a name of its own ("(none)" otherwise, which Open MPI's launcher refuses)
	hostname "mrpool-host$HOST_INDEX" || fail "hostname"
	export MRPOOL_HOST_INDEX=$HOST_INDEX MRPOOL_HOST_IP=$HOST_IP MRPOOL_PEER_IP=$PEER_IP
else
	modprobe dummy || fail "dummy"
	ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy || fail "add dummy0"
	ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up || fail "dummy0"
	rdma link add rxe0 type rxe netdev dummy0 || fail "rxe0"
fi

if [ "${TWO_HOSTS:-0}" = 1 ]; then
	# A second "host": rxe1 on veth0 (10.77.1.1) and rxe2 on veth1
	# (10.77.1.2), so RoCE packets between them cross a veth pair. Both
	# ends stay in this network namespace: 6.1's rdma_rxe listens on UDP
	# 4791 in init_net only, so an rxe device in another namespace never
	# receives. Policy routing sends traffic between the two addresses
	# out through the veth instead of looping it back locally.
	modprobe veth || fail "veth"
	ip link add veth0 type veth peer name veth1 || fail "veth pair"
	ip addr add 10.77.1.1/32 dev veth0 && ip addr add 10.77.1.2/32 dev veth1 ||
		fail "veth addresses"
	ip link set veth0 up && ip link set veth1 up || fail "veth up"
	for d in all default veth0 veth1; do
		sysctl -qw "net.ipv4.conf.$d.rp_filter=0" "net.ipv4.conf.$d.accept_local=1"
	done
	# Our rules before the local table: .1 <-> .2 leaves via the veth.
	ip rule add pref 1000 lookup local && ip rule del pref 0 || fail "ip rule"
	ip rule add pref 10 from 10.77.1.1 to 10.77.1.2 iif lo lookup 101 &&
	ip rule add pref 11 from 10.77.1.2 to 10.77.1.1 iif lo lookup 102 &&
	ip route add 10.77.1.2 dev veth0 src 10.77.1.1 table 101 &&
	ip route add 10.77.1.1 dev veth1 src 10.77.1.2 table 102 || fail "veth routes"
	rdma link add rxe1 type rxe netdev veth0 || fail "rxe1"
	rdma link add rxe2 type rxe netdev veth1 || fail "rxe2"
fi

cd "$MRPOOL_TOP" || fail "cd $MRPOOL_TOP"
# Modules built for another guest kernel (tools/vm/run --kernel) stand in
# for the tree's own, at the same paths, so every test's insmod finds them.
if [ -n "${MRPOOL_MODS:-}" ]; then
	for ko in $(cd "$MRPOOL_MODS" && find . -name '*.ko'); do
		mount --bind "$MRPOOL_MODS/$ko" "$ko" || fail "bind-mount $ko"
	done
fi
if [ "${LOAD_MRPOOL:-1}" = 1 ]; then
	# shellcheck disable=SC2086
	insmod kmod/mrpool.ko $MRPOOL_PARAMS || fail "insmod mrpool.ko $MRPOOL_PARAMS"
fi
up=$(cut -d' ' -f1 /proc/uptime)
say "ready after ${up%.*} s of uptime: $(rdma link show | tr '\n' ' ')"

export MRPOOL_VM=1 MRPOOL_RESULTS=$res MRPOOL_KERNEL
t0=$SECONDS
bash "$res/job.sh"
st=$?
say "job exited with status $st after $((SECONDS - t0)) s"
printf 'ready_s=%s\njob_s=%s\n' "${up%.*}" $((SECONDS - t0)) >"$res/times"
# Every run ends by unloading the module: it refuses while anything is
# still held (a slice, a mapping, an open file), so a leak fails the run.
# A job that left the module unloaded fails too, and the module must load
# and unload again.
pool_state() {	# TAP comments for diagnosis
	local f
	echo "# /sys/module/mrpool/refcnt: $(cat /sys/module/mrpool/refcnt 2>&1)"
	for f in chunks slices clients; do
		echo "# debugfs $f:"
		sed 's/^/#   /' "/sys/kernel/debug/mrpool/$f" 2>&1
	done
	echo "# processes holding /dev/mrpool (pid comm):"
	for f in /proc/[0-9]*; do
		ls -l "$f/fd/" "$f/map_files/" 2>/dev/null | grep -qF /dev/mrpool &&
			echo "#   ${f#/proc/} $(cat "$f/comm")"
	done
}
if [ "${LOAD_MRPOOL:-1}" = 1 ]; then
	if [ ! -d /sys/module/mrpool ]; then
		tap "not ok - mrpool.ko still loaded after the job (the job unloaded it and left it unloaded)"
		# shellcheck disable=SC2086
		if insmod kmod/mrpool.ko $MRPOOL_PARAMS && rmmod mrpool; then
			say "mrpool.ko loads and unloads again"
		else
			tap "not ok - mrpool.ko loads and unloads again after the job"
		fi
	else
		# A process the job killed may still be on its way out: give
		# the last files and mappings a few seconds to close.
		for _ in $(seq 20); do
			rmmod mrpool 2>/dev/null && break
			sleep 0.25
		done
		if [ -d /sys/module/mrpool ]; then
			state=$(pool_state)
			held=$(($(wc -l </sys/kernel/debug/mrpool/slices) - 1))
			tap "not ok - rmmod mrpool after the job (pool not whole: $held slices held, refcnt $(cat /sys/module/mrpool/refcnt); $(rmmod mrpool 2>&1 | head -n1))"
			echo "$state" | tee -a "$gtap"
		else
			tap "ok - rmmod mrpool after the job (pool whole: nothing held)"
		fi
	fi
fi
[ "${DEBUG_KERNEL:-0}" = 0 ] || debug_kmemleak_check
# The kernel log gate (tools/vm/run) reads what this reader wrote: if it
# died, the gate saw nothing after that and the run cannot pass.
if ! kill -0 "$kmsg_pid" 2>/dev/null; then
	tap "not ok - kernel log reader (dmesg -w) alive at the end of the job (it died: the log gate is blind)"
fi
grep -q '^not ok' "$gtap" && [ "$st" = 0 ] && st=1
echo "$st" >"$res/status"
# The log reader stays up across the final sync, so whatever that sets
# off in the kernel reaches dmesg.txt whole; after it, the console shows
# every level (a report then still reaches kernel.log with its trace).
sync
dmesg -n 8 2>/dev/null
sleep 0.5	# let the log reader drain
kill "$kmsg_pid" 2>/dev/null
sync
# Power off from here instead of exiting. This shell is the last process
# mapping bash, libc and ld.so from the 9p root: its exit frees their page
# cache, and after a long job that took minutes of the vCPU (soft lockups
# and RCU stalls in __kernel_poison_pages under v9fs_evict_inode, with 5 MB
# of page cache in all). Most likely QEMU (TCG) drops, on page_poison's
# writes, every block it translated from those text pages for thousands
# of processes. Nothing of the run is left to write.
echo o >/proc/sysrq-trigger
sleep 600
