#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# In the guest (tools/vm/run --packaged), for tools/deb/test.sh: the module
# dkms built from mrpool-dkms, loaded the way an installed host loads it,
# the package's udev rule applied, mrpool-utils' CDI rule run by a real
# udevd, and XFER (built against the installed libmrpool-dev) moving data
# through the pool as root and as a member of the group "mrpool". TAP on
# stdout.
set -u
xfer=$1
n=0 bad=0
ok() {	# status description
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; bad=1; fi
}
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_member() { setpriv --reuid=nobody --regid=nogroup --groups=mrpool "$@"; }

! grep -q '^mrpool ' /proc/modules
ok $? "mrpool not loaded before modprobe"
modprobe mrpool
ok $? "modprobe mrpool"
path=$(modinfo -n mrpool)
echo "# modinfo -n mrpool: $path"
[[ $path == */updates/dkms/mrpool.ko* ]]
ok $? "modprobe's mrpool is the dkms build (updates/dkms)"
# The loaded module is that file: the same GNU build ID (the module has
# no MODULE_VERSION, so no srcversion: comparing two empty srcversions
# passed whatever was loaded). The note in sysfs ends with the 20-byte ID.
ko=$path
case $ko in
*.xz) xz -dc "$ko" >/tmp/mrpool.ko && ko=/tmp/mrpool.ko ;;
*.zst) zstd -dcq "$ko" >/tmp/mrpool.ko && ko=/tmp/mrpool.ko ;;
esac
want=$(readelf -n "$ko" 2>/dev/null | sed -n 's/^ *Build ID: //p')
have=$(od -An -tx1 -v /sys/module/mrpool/notes/.note.gnu.build-id 2>/dev/null | tr -d ' \n' |
	tail -c "${#want}")
echo "# build ID: file ${want:-none}, loaded ${have:-none}"
[ -n "$want" ] && [ "$want" = "$have" ]
ok $? "the loaded module is that file (GNU build ID)"

# The package's udev rule, applied by udev's own rule engine: 'udevadm
# test' (udevd and 'udevadm trigger' do nothing in a chroot, as here).
udevadm test --action=add /sys/class/misc/mrpool >"$MRPOOL_RESULTS/udevadm-test.txt" 2>&1
st=$?
mode=$(stat -c '%a %G' /dev/mrpool)
echo "# /dev/mrpool after udev (status $st): $mode"
[ "$mode" = "660 mrpool" ]
ok $? "udev rule: /dev/mrpool is 0660, group mrpool"
! as_nobody bash -c 'exec 3<>/dev/mrpool' 2>/dev/null
ok $? "a user outside the group cannot open /dev/mrpool"
as_member bash -c 'exec 3<>/dev/mrpool'
ok $? "a member of the group can"

# The package's CDI rule and tool as installed, run by a real udevd (the
# guest has none of its own): adding an rxe device puts its uverbs node
# in /run/cdi/mrpool.json, deleting it takes it out (selftests/cdi_udev_test).
MRPOOL_CDI_RULE=/lib/udev/rules.d/60-mrpool-cdi.rules MRPOOLCTL=/usr/sbin/mrpoolctl \
	selftests/cdi_udev_test >"$MRPOOL_RESULTS/cdi_udev_test.tap" 2>&1
st=$?
sed 's/^/# cdi_udev_test: /' "$MRPOOL_RESULTS/cdi_udev_test.tap"
ok $st "the installed udev rule keeps /run/cdi/mrpool.json in step with rxe add and delete (cdi_udev_test)"

"$xfer"
ok $? "xfer (pkg-config build) through pool buffers, as root"
as_member "$xfer"
ok $? "xfer through pool buffers, as a member of the group"
echo "1..$n"
exit $bad
