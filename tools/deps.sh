#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Installs and caches everything the build, the demo and the tests need on a
# Debian 12 machine. Idempotent: a second run downloads nothing.
#
#   Debian packages  qemu, busybox, rdma-core, perftest, kernel headers, ...
#   .cache/guest/    the guest kernels (linux-image-<abi>: Debian 12's 6.1 and
#                    its 6.12 from the security suite), unpacked, depmod'ed;
#                    and Debian 13 backports' newest (7.3), with the chroot
#                    its modules build in (tools/newkernel/build.sh --fetch:
#                    .cache/newkernel.mk, the chroot in /var/cache/mrpool)
#   .cache/ksrc/     kselftest headers and checkpatch.pl from linux-source-6.1
#   .cache/env.mk    KABI, KDIR, GUEST_ROOT (and *_612 for 6.12), KSFT_DIR,
#                    CHECKPATCH for make
#
#   tools/deps.sh --demo    only what make demo needs: the packages that build
#                           the module, the library and the tools and boot the
#                           6.1 guest, and that guest's kernel; env.mk names
#                           what is there (6.12 and KSFT_DIR once a full run
#                           has cached them)
#   tools/deps.sh --bench   also what make bench needs (UCX, libfabric, gnuplot)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=$top/.cache
mkdir -p "$cache"

say() { printf '[deps] %s\n' "$*"; }

mode=${1:-all}
case $mode in
all | --demo | --bench) ;;
*) echo "usage: tools/deps.sh [--demo | --bench]" >&2; exit 2 ;;
esac

# make demo: the module against the 6.1 guest's headers (gcc, make and the
# headers metapackage, which brings kbuild and gcc-12), the library and the
# tools (libibverbs-dev brings ibverbs-providers, whose rxe provider the
# guest's verbs use, and libnl-3-dev; mrpoolctl links libnl-genl-3 through
# pkg-config), the guest (QEMU, busybox and cpio for its initramfs, kmod
# for its modules, xz to cut the vmlinux QEMU boots out of the 6.1
# bzImage (tools/vm/run); in the guest, ip and rdma from iproute2).
# Nothing else: the first make demo on a bare machine should not wait for
# the suite's packages.
pkgs=(qemu-system-x86 busybox-static kmod cpio xz-utils iproute2
      linux-headers-amd64 gcc libc6-dev make pkg-config
      libibverbs-dev ibverbs-providers libnl-genl-3-dev)
# Everything else is for make check (and make bench, make deb, ...):
# rdma-core and the verbs, CM and perftest tools, the 6.12 headers (zstd
# for its guest's vmlinux, which nothing here depends on), the static
# checkers, the 32-bit compat test's compiler, valgrind, man, pyverbs,
# Open MPI and NetPIPE, the packaging tools, and Python's own test suite
# (the modules that stress the allocator and fork, run with and without
# the preload shim: lib/tests/python_suite.sh).
if [ "$mode" != --demo ]; then
	pkgs+=(zstd rdma-core librdmacm-dev ibverbs-utils perftest rdmacm-utils
	       libnl-3-dev libnl-route-3-dev linux-headers-6.12-amd64 sparse dkms
	       build-essential perl gcc-12-multilib valgrind groff-base man-db
	       python3-pyverbs openmpi-bin netpipe-openmpi debhelper dh-dkms lintian
	       libpython3.11-testsuite)
	# selftests/container_test: the pool in a real container runtime,
	# Debian 12's podman 4.3 (it reads CDI specs) with crun, and uidmap's
	# setuid newuidmap/newgidmap for rootless podman's subuid ranges; no
	# recommends (fuse-overlayfs, slirp4netns: the test uses vfs storage
	# and the host's network). About 19 MB of packages, 87 MB installed.
	pkgs+=(podman crun uidmap)
	# make -C lib test's preload_jemalloc: a program linked with jemalloc
	# (its header and libjemalloc.so) under the shim, whose real malloc is
	# then not glibc's; skipped without it
	pkgs+=(libjemalloc-dev)
fi
# --bench (make bench only, never make check): UCX and libfabric as the
# alloc scenario's peers (headers for tools/bench/mrpool-scenarios; ucx_info
# and fi_info for the report), and gnuplot for its plots. The guest runs
# this machine's root, so what is installed here is what the guest has.
if [ "$mode" = --bench ]; then
	pkgs+=(libucx-dev ucx-utils libfabric-dev libfabric-bin gnuplot-nox)
fi

# The library's arm64 build and its host tests under qemu-aarch64
# (make -C lib test-arm64): a cross compiler and arm64 libraries. The same
# tests in an arm64 system guest (tools/arm64/run): qemu-system-aarch64,
# and mmdebstrap for the guest's root (Debian's arm64 packages unpacked,
# cached in /var/cache/mrpool with Debian's arm64 kernel).
# libc6-dev:arm64 by name: the cross compiler only recommends its headers
# (libc6-dev-arm64-cross), and nothing else here depends on them.
if [ "$mode" != --demo ]; then
	pkgs+=(gcc-aarch64-linux-gnu qemu-user libc6:arm64 libc6-dev:arm64
	       libibverbs-dev:arm64 qemu-system-arm mmdebstrap)
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		say "adding the arm64 architecture (for libibverbs-dev:arm64)"
		dpkg --add-architecture arm64
	fi
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	say "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
	say "Debian packages: all present"
fi

# A guest runs the kernel that a headers metapackage was built for, so the
# module built against those headers loads there. Resolve the ABI, never
# hard-code it: it moves with every security update.
kabi_of() {	# headers metapackage
	local hdr
	hdr=$(dpkg-query -W -f='${Depends}' "$1" | grep -o 'linux-headers-[^ ,]*-amd64' | head -n1)
	[ -n "$hdr" ] || { echo "cannot resolve the kernel ABI of $1" >&2; exit 1; }
	echo "${hdr#linux-headers-}"
}
kdir_of() {	# abi
	if [ -d "/lib/modules/$1/build" ]; then echo "/lib/modules/$1/build"
	else echo "/usr/src/linux-headers-$1"; fi
}
# The image unpacked into the cache (no postinst, no initramfs).
fetch_guest() {	# abi
	local guest=$cache/guest/$1
	if [ -f "$guest/.done" ]; then
		say "guest kernel $1: cached"
		return
	fi
	say "fetching guest kernel linux-image-$1"
	rm -rf "$guest" && mkdir -p "$guest"
	# quiet, unless it fails: then again, to show why
	(cd "$cache/guest" &&
		{ apt-get download -q "linux-image-$1" >/dev/null 2>&1 ||
			apt-get download "linux-image-$1"; })
	dpkg -x "$cache/guest/linux-image-${1}_"*.deb "$guest"
	rm -f "$cache/guest/linux-image-${1}_"*.deb
	depmod -b "$guest" "$1"
	touch "$guest/.done"
}

kabi=$(kabi_of linux-headers-amd64)
fetch_guest "$kabi"
# --demo: the 6.1 guest only. The 6.12 guest and the kselftest headers
# are named in env.mk when a full run cached them (make check after make
# demo, or make demo after make check, both keep them).
kabi612=
if [ "$mode" != --demo ]; then
	kabi612=$(kabi_of linux-headers-6.12-amd64)
	fetch_guest "$kabi612"
elif dpkg-query -W -f='${Status}' linux-headers-6.12-amd64 2>/dev/null | grep -q 'ok installed'; then
	kabi612=$(kabi_of linux-headers-6.12-amd64)
	[ -f "$cache/guest/$kabi612/.done" ] || kabi612=
fi

ksrc=$cache/ksrc
if [ "$mode" = --demo ]; then
	:
elif [ ! -f "$ksrc/.done" ]; then
	say "fetching kselftest harness and checkpatch.pl from linux-source-6.1"
	rm -rf "$ksrc" && mkdir -p "$ksrc/dl"
	(cd "$ksrc/dl" &&
		{ apt-get download -q linux-source-6.1 >/dev/null 2>&1 ||
			apt-get download linux-source-6.1; })
	dpkg -x "$ksrc/dl/"linux-source-6.1_*.deb "$ksrc/dl/x"
	tar -xJf "$ksrc/dl/x/usr/src/linux-source-6.1.tar.xz" -C "$ksrc" \
		--strip-components=1 --wildcards \
		'linux-source-6.1/tools/testing/selftests/kselftest*' \
		'linux-source-6.1/scripts/checkpatch.pl' \
		'linux-source-6.1/scripts/spelling.txt' \
		'linux-source-6.1/scripts/const_structs.checkpatch'
	rm -rf "$ksrc/dl"
	touch "$ksrc/.done"
else
	say "kselftest harness and checkpatch.pl: cached"
fi

# The third guest kernel, Debian 13 backports' newest (7.3), and the chroot
# of that suite its modules build in (its linux-kbuild needs a newer glibc
# than this host's): make check, not make demo. The script's own apt
# resolves and fetches them; the host's apt sources stay as they are.
if [ "$mode" != --demo ]; then
	say "the newest kernel for the third guest (tools/newkernel/build.sh --fetch)"
	"$top/tools/newkernel/build.sh" --out "$cache" --fetch | sed 's/^/[deps] /'
fi

{
	echo "# written by tools/deps.sh${1:+ $1}"
	echo "KABI := $kabi"
	echo "GUEST_KDIR := $(kdir_of "$kabi")"
	echo "GUEST_ROOT := $cache/guest/$kabi"
	if [ -n "$kabi612" ]; then
		echo "KABI_612 := $kabi612"
		echo "GUEST_KDIR_612 := $(kdir_of "$kabi612")"
		echo "GUEST_ROOT_612 := $cache/guest/$kabi612"
	fi
	if [ -f "$ksrc/.done" ]; then
		echo "KSFT_DIR := $ksrc/tools/testing/selftests"
		echo "CHECKPATCH := $ksrc/scripts/checkpatch.pl"
	fi
} >"$cache/env.mk.tmp"
mv "$cache/env.mk.tmp" "$cache/env.mk"
newkabi=
[ "$mode" = --demo ] || newkabi=$(sed -n 's/^NEW_KABI := //p' "$cache/newkernel.mk" 2>/dev/null)
say "ready: guest kernels $kabi${kabi612:+, $kabi612}${newkabi:+, $newkabi}"
