#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make OFA_DIR=... (issue 10): what a build against MLNX_OFED/DOCA's ib_core
# must do, checked against a stand-in OFED tree made from the guest
# kernel's own (no OFED here): its rdma/ headers come before the kernel's,
# its compat header is included first, and the module's symbol versions
# (__versions) are OFED's, not the kernel's ib_core's, so that it loads
# beside OFED's modules. TAP on stdout; exit status non-zero on a failure.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
eval "$(sed -n 's/^\([A-Z_0-9]*\) := \(.*\)$/\1="\2"/p' "$top/.cache/env.mk")"
kdir=$GUEST_KDIR
work=$(mktemp -d /tmp/mrpool-ofa.XXXXXX)
trap 'rm -rf "$work"' EXIT
n=0 bad=0
ok() {	# status description
	local r=ok
	n=$((n + 1))
	[ "$1" = 0 ] || { r="not ok"; bad=1; }
	echo "$r $n - $2"
}
echo "# selftest: ofa-build"

# The stand-in: the kernel's rdma/ headers, an empty compat header, and
# ib_core's exports under another module path with other CRCs, as OFED's
# Module.symvers lists its own ib_core.
ofa=$work/ofa
common=$(readlink -f "${kdir%/build}/source" 2>/dev/null || true)
[ -d "$common/include/rdma" ] || common=$(readlink -f "$kdir")
mkdir -p "$ofa/include/linux" "$ofa/include/uapi"
cp -r "$common/include/rdma" "$ofa/include/"
echo "/* stand-in for OFED's compat header */" >"$ofa/include/linux/compat-2.6.h"
crc=0x0fedcba9
awk -F'\t' -v OFS='\t' -v crc=$crc '$3 ~ /^drivers\/infiniband\/core\// {
	$1 = crc; $3 = "ofa/" $3; print }' "$kdir/Module.symvers" >"$ofa/Module.symvers"
[ -s "$ofa/Module.symvers" ]
ok $? "stand-in OFED tree: $(wc -l <"$ofa/Module.symvers") ib_core/ib_uverbs exports"

build() {	# dir [make args]
	local d=$1
	shift
	mkdir -p "$d"
	git -C "$top" ls-files Kbuild kmod include | tar -C "$top" -cf - -T - | tar -C "$d" -xf -
	make -s -C "$kdir" M="$d" "$@" modules >"$d.log" 2>&1
}
vers() { /sbin/modprobe --dump-modversions "$1/kmod/mrpool.ko" | awk '$2 == "ib_register_client" { print $1 }'; }

build "$work/plain"
ok $? "the module builds without OFA_DIR"
kcrc=$(awk -F'\t' '$2 == "ib_register_client" { print $1 }' "$kdir/Module.symvers")
[ -n "$kcrc" ] && [ "$(vers "$work/plain")" = "$kcrc" ]
ok $? "without OFA_DIR: ib_register_client's version is the kernel's ($kcrc)"

build "$work/ofed" OFA_DIR="$ofa"
st=$?
ok $st "the module builds with OFA_DIR (log: $(tail -1 "$work/ofed.log" 2>/dev/null))"
[ "$(vers "$work/ofed")" = "$crc" ]
ok $? "with OFA_DIR: ib_register_client's version is OFED's ($crc)"
deps=$work/ofed/kmod/.ib_reg.o.cmd
grep -q "$ofa/include/rdma/ib_verbs.h" "$deps" && ! grep -q "$common/include/rdma/ib_verbs.h" "$deps"
ok $? "with OFA_DIR: rdma/ib_verbs.h is OFED's, not the kernel's"
grep -q "$ofa/include/linux/compat-2.6.h" "$deps"
ok $? "with OFA_DIR: OFED's compat-2.6.h is included"
echo "1..$n"
exit $bad
