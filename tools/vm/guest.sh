#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Runs inside the guest, chrooted into the host's root, as root. Brings up
# the RDMA stack and mrpool, runs the job, records its exit status.
# /mnt is the run's results folder (read-write); /mnt/env says what to do.
set -u
. /mnt/env
res=/mnt
dmesg -w >"$res/dmesg.txt" 2>&1 &
kmsg_pid=$!
say() { echo "[guest] $*"; }
fail() { echo "[guest] setup failed: $*"; echo 2 >"$res/status"; exit 2; }

# The guest's own modules, where modprobe looks for them.
mount --bind "$GUEST_ROOT/lib/modules/$KABI" "/lib/modules/$KABI" ||
	fail "bind-mount guest modules"
modprobe crc32_generic || fail "crc32_generic"
modprobe ib_uverbs || fail "ib_uverbs"
modprobe rdma_rxe || fail "rdma_rxe"
modprobe dummy || fail "dummy"
ip link set lo up
ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy || fail "add dummy0"
ip addr add 10.77.0.1/24 dev dummy0 && ip link set dummy0 up || fail "dummy0"
rdma link add rxe0 type rxe netdev dummy0 || fail "rxe0"

if [ "${TWO_HOSTS:-0}" = 1 ]; then
	# A second "host": network namespace "peer" behind a veth pair, each
	# end with its own rxe device (rxe1 here, rxe2 in the namespace).
	modprobe veth || fail "veth"
	ip netns add peer || fail "netns"
	ip link add veth0 type veth peer name veth1 netns peer || fail "veth pair"
	ip addr add 10.77.1.1/24 dev veth0 && ip link set veth0 up || fail "veth0"
	ip -n peer addr add 10.77.1.2/24 dev veth1 || fail "veth1 addr"
	ip -n peer link set veth1 up && ip -n peer link set lo up || fail "veth1 up"
	rdma link add rxe1 type rxe netdev veth0 || fail "rxe1"
	ip netns exec peer rdma link add rxe2 type rxe netdev veth1 || fail "rxe2"
fi

cd "$MRPOOL_TOP" || fail "cd $MRPOOL_TOP"
if [ "${LOAD_MRPOOL:-1}" = 1 ]; then
	# shellcheck disable=SC2086
	insmod kmod/mrpool.ko $MRPOOL_PARAMS || fail "insmod mrpool.ko $MRPOOL_PARAMS"
fi
say "ready: $(rdma link show | tr '\n' ' ')"

export MRPOOL_VM=1 MRPOOL_RESULTS=$res
bash "$res/job.sh"
st=$?
say "job exited with status $st"
# Every run ends by unloading the module: it refuses while anything is
# still held, so a leak fails the run.
if [ "${LOAD_MRPOOL:-1}" = 1 ] && [ -d /sys/module/mrpool ]; then
	if ! rmmod mrpool; then
		say "rmmod mrpool failed after the job"
		[ "$st" = 0 ] && st=1
	fi
fi
echo "$st" >"$res/status"
sleep 0.5	# let the log reader drain
kill "$kmsg_pid" 2>/dev/null
sync
exit 0
