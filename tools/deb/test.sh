#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# make check-deb (issue 10): the Debian packages of build/deb/ (make deb)
# installed on this machine as a user installs them; their postinst has
# dkms build the module for both guest kernels; each guest boots, loads it
# with modprobe and runs a program built with 'pkg-config --cflags --libs
# mrpool' against the installed libmrpool-dev (tools/deb/guest.sh); then
# 'dpkg --purge' must leave no file, directory, dkms tree or group behind.
# TAP in results/deb/deb.tap; exit status non-zero on any failure.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
out=$top/results/deb
rm -rf "$out" && mkdir -p "$out"
tap=$out/deb.tap
echo "# selftest: debian-packages" >"$tap"
n=0 bad=0
ok() {	# status description
	local r=ok
	n=$((n + 1))
	[ "$1" = 0 ] || { r="not ok"; bad=1; }
	echo "$r $n - $2" | tee -a "$tap"
}
eval "$(sed -n 's/^\([A-Z_0-9]*\) := \(.*\)$/\1="\2"/p' .cache/env.mk)"
pkgs=(mrpool-dkms libmrpool1 libmrpool-dev mrpool-utils)
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
debs=()
for p in "${pkgs[@]}"; do
	d=(build/deb/"${p}"_*.deb)
	[ -f "${d[0]}" ] || { echo "deb-test: no $p in build/deb: run 'make deb'" >&2; exit 2; }
	debs+=("${d[0]}")
done
[ "$(id -u)" = 0 ] || { echo "deb-test: installs packages: run as root" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive

# What exists where the packages write, before and after. dkms makes its
# module-signing key (MOK) on its first build, for every module it will
# build: dkms's state, not the packages'.
snapshot() {
	find /usr /etc /var/lib/dkms /opt -xdev 2>/dev/null |
		grep -vxE '/var/lib/dkms/mok\.(key|pub)' | LC_ALL=C sort
	getent group mrpool
}
purge() { dpkg --purge "${pkgs[@]}" >>"$out/purge.log" 2>&1; }
purge	# what an earlier, interrupted run left
snapshot >"$out/before.txt"
# The spec earlier builds' postinst wrote, "default" alone, byte for byte
# (mrpoolctl cdi --no-rdma): this one's removes it on a first install,
# and /etc/cdi with it, now empty (made here only where there is none, so
# the snapshots above and below stay alike).
old_spec=0
if [ ! -e /etc/cdi ]; then
	mkdir /etc/cdi &&
		printf '{\n\t"cdiVersion": "0.3.0",\n\t"kind": "mrpool.io/pool",\n\t"devices": [\n\t\t{\n\t\t\t"name": "default",\n\t\t\t"containerEdits": {\n\t\t\t\t"deviceNodes": [\n\t\t\t\t\t{ "path": "/dev/mrpool" }\n\t\t\t\t]\n\t\t\t}\n\t\t}\n\t]\n}\n' \
			>/etc/cdi/mrpool.json && old_spec=1
fi

apt-get install -y -q --no-install-recommends "${debs[@]/#/./}" >"$out/install.log" 2>&1
ok $? "apt-get install ./${pkgs[*]} (log: results/deb/install.log)"
for p in "${pkgs[@]}"; do
	[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ]
	ok $? "$p installed"
done
getent group mrpool >/dev/null
ok $? "the group mrpool exists"
# mrpool-utils' postinst wrote the CDI spec (mrpoolctl cdi --update):
# valid JSON whose "default" device is /dev/mrpool, no "rdma" as
# /etc/default/mrpool-cdi ships; the purge below removes it.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not (d["kind"] == "mrpool.io/pool" and [x["name"] for x in d["devices"]] == ["default"] and d["devices"][0]["containerEdits"]["deviceNodes"] == [{"path": "/dev/mrpool"}]))' /run/cdi/mrpool.json
ok $? "/run/cdi/mrpool.json: the CDI spec, kind mrpool.io/pool, default /dev/mrpool alone (no rdma)"
if [ "$old_spec" = 1 ]; then
	[ ! -e /etc/cdi ]
	ok $? "the postinst removed the /etc/cdi/mrpool.json of earlier builds (default alone), and /etc/cdi"
else
	n=$((n + 1))
	echo "ok $n # SKIP /etc/cdi existed before the install: no spec of an earlier build put there" | tee -a "$tap"
fi
# The same on an upgrade: dpkg runs the postinst with the version it
# replaces. From a 0.1 build the spec it wrote goes; from 0.2 on, and one
# naming "rdma" from any version, stays (the operator's to move). Run
# where /etc/cdi was ours, so the snapshots stay alike.
postinst=/var/lib/dpkg/info/mrpool-utils.postinst
plant() { mkdir -p /etc/cdi && mrpoolctl cdi --no-rdma | sed "$1" >/etc/cdi/mrpool.json; }
if [ "$old_spec" = 1 ]; then
	plant "" && "$postinst" configure 0.1 >>"$out/install.log" 2>&1 &&
		[ ! -e /etc/cdi ]
	ok $? "an upgrade from 0.1 (postinst configure 0.1) removed the spec 0.1 wrote, and /etc/cdi"
	plant "" && "$postinst" configure 0.2 >>"$out/install.log" 2>&1 &&
		[ -f /etc/cdi/mrpool.json ]
	ok $? "a configure from 0.2 left /etc/cdi/mrpool.json alone"
	rm -rf /etc/cdi
	plant 's/"name": "default"/"name": "rdma"/' && "$postinst" configure 0.1 2>"$out/rdma-spec.txt" &&
		[ -f /etc/cdi/mrpool.json ] && grep -q "MRPOOL_CDI_RDMA=yes" "$out/rdma-spec.txt"
	ok $? "an upgrade from 0.1 kept a spec naming rdma and said how to move the choice"
	rm -rf /etc/cdi
else
	for what in "removal on an upgrade from 0.1" "no removal from 0.2" "an rdma spec kept"; do
		n=$((n + 1))
		echo "ok $n # SKIP $what: /etc/cdi existed before the install (not ours to change)" | tee -a "$tap"
	done
fi
dpkg-query -W -f='${Conffiles}\n' mrpool-utils | grep -q '^ /etc/default/mrpool-cdi ' &&
	grep -qx 'MRPOOL_CDI_RDMA=no' /etc/default/mrpool-cdi
ok $? "/etc/default/mrpool-cdi: a conffile of mrpool-utils, MRPOOL_CDI_RDMA=no"
# The rule that keeps the spec (the guest runs it with a real udevd:
# tools/deb/guest.sh): the tree's, and every command it runs installed.
rule=/lib/udev/rules.d/60-mrpool-cdi.rules
cmp -s "$rule" debian/mrpool-utils.mrpool-cdi.udev
ok $? "$rule: debian/mrpool-utils.mrpool-cdi.udev as shipped"
runs=$(sed -n 's/.*RUN+="\([^" ]*\).*/\1/p' "$rule" | sort -u)
[ "$runs" = /usr/sbin/mrpoolctl ] && [ -x "$runs" ] &&
	[ "$(grep -c '^ACTION=="add|remove",.*RUN+="/usr/sbin/mrpoolctl cdi --update"$' "$rule")" = 2 ]
ok $? "$rule: its two rules (uverbs; mrpool and rdma_cm) run the installed mrpoolctl cdi --update on add and remove"
[ -f "/usr/src/mrpool-$ver/dkms.conf" ]
ok $? "module sources in /usr/src/mrpool-$ver (dkms.conf's version)"

# The package's postinst has dkms build for every kernel with headers:
# here, the two guests' (the host's own kernel has none).
for k in "$KABI" "$KABI_612"; do
	dkms status -m mrpool -v "$ver" -k "$k" >"$out/dkms-$k.txt" 2>&1
	grep -q ': installed' "$out/dkms-$k.txt"
	ok $? "installing mrpool-dkms built and installed mrpool/$ver for $k (dkms status)"
	modinfo -k "$k" -F vermagic "/lib/modules/$k/updates/dkms/mrpool.ko"* 2>/dev/null |
		grep -q "^$k "
	ok $? "/lib/modules/$k/updates/dkms/mrpool.ko built for $k"
done

# A user program from the installed -dev package, not from the tree.
make -s -C selftests cdi_udev_test >/dev/null
flags=$(pkg-config --cflags --libs mrpool)
ok $? "pkg-config --cflags --libs mrpool: $flags"
make -s -C tools/rdma >/dev/null
xfer=$top/results/deb/xfer
# shellcheck disable=SC2046,SC2086 # the flags are words
cc -std=gnu11 -Wall -Wextra -Werror -O2 -Itools/rdma -o "$xfer" tools/deb/xfer.c \
	tools/rdma/librdmatest.a $flags $(pkg-config --libs libibverbs) >"$out/cc.log" 2>&1
ok $? "xfer.c builds against the installed header and library"
ldd "$xfer" | tee "$out/ldd.txt" |
	grep -qE "libmrpool.so.1 => (/usr)?/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libmrpool"
ok $? "xfer runs with the packaged libmrpool.so.1"

for kern in 6.1 6.12; do
	tools/vm/run --name "deb-$kern" --kernel "$kern" --packaged -- \
		tools/deb/guest.sh "$xfer" >"$out/vm-$kern.log" 2>&1
	st=$?
	# The guest's own TAP (tools/deb/guest.sh), kept as comments.
	grep -aE '^(not )?ok [0-9]+ - ' "$out/vm-$kern.log" | tr -d '\r' | sed 's/^/# guest: /' >>"$tap"
	ok "$st" "guest $kern: packaged module by modprobe, udev rule, RDMA transfer (results/deb-$kern)"
done

purge
ok $? "dpkg --purge ${pkgs[*]} (log: results/deb/purge.log)"
[ ! -e /run/cdi/mrpool.json ]
ok $? "the purge removed /run/cdi/mrpool.json"
# dkms's depmod leaves an index for kernels whose image is not installed
# here (only their headers are): not the packages' files; removed.
for k in "$KABI" "$KABI_612"; do
	if ! grep -qx "/usr/lib/modules/$k/modules.dep" "$out/before.txt"; then
		rm -f "/usr/lib/modules/$k"/modules.*
		rmdir "/usr/lib/modules/$k/updates/dkms" "/usr/lib/modules/$k/updates" 2>/dev/null
	fi
done
snapshot >"$out/after.txt"
diff "$out/before.txt" "$out/after.txt" >"$out/left.txt"
ok $? "nothing left behind after the purge ($(grep -c '^[<>]' "$out/left.txt") paths differ, results/deb/left.txt)"
echo "1..$n" >>"$tap"
exit $bad
