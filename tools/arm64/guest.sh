#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# /init of the arm64 system guest (tools/arm64/run): busybox sh on the
# Debian arm64 root of tools/arm64/image.sh, with the cross-built library
# tests at the path they were built in (dlopen_test and preload_test open
# their libraries by absolute path). Reads /run-arm64.conf (LIBDIR, TESTS),
# prints TAP between two marker lines, the run's status on the last one,
# and powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# Debian's busybox-static ships no applet links.
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
# /tmp stays the initramfs's own (writable): a checkout under /tmp has its
# tests there, which a tmpfs mounted over it would hide.
mkdir -p /tmp
chmod 1777 /tmp
. /run-arm64.conf

echo "MRPOOL-ARM64-BEGIN"
check() {	# status name
	if [ "$1" = 0 ]; then echo "ok - $2"; else echo "not ok - $2"; fi
}
echo "# uname -m: $(uname -m), kernel $(uname -r)"
check "$([ "$(uname -m)" = aarch64 ]; echo $?)" "arm64 system guest: uname -m is aarch64"
# arm64's /proc/cpuinfo has no address sizes: the stack, placed at the top
# of the user address space, shows the VA size (just below 2^48 for 48 bits).
stack=$(grep '\[stack\]' /proc/self/maps | cut -d' ' -f1)
echo "# stack $stack"
echo "# $(grep -m1 'CPU part' /proc/cpuinfo); $(grep -c ^processor /proc/cpuinfo) CPUs;" \
	"$(grep MemTotal /proc/meminfo | tr -s ' ')"

rc=0
cd "$LIBDIR" || rc=1
for t in $TESTS; do
	echo "# $t"
	./"$t" || rc=1
done
echo "# build/addr_probe"
/addr_probe || rc=1
echo "MRPOOL-ARM64-END $rc"
sync
poweroff -f
