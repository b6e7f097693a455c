#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The image of container_test's containers, from this root, no registry:
# a tar of a minimal tree holding busybox (static), container_grab
# (static), mrpool-demo with the shared libraries ldd names, and
# libibverbs' provider configuration and libraries with theirs.
# usage: selftests/container_image.sh OUT.tar   (from the repository top)
set -euo pipefail
out=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
# the image's / (mktemp made it 0700): a container's other users need it
chmod 755 "$tree"

# FILE at DEST (default: its own path), and every library ldd names.
add() {
	local f=$1 dest=${2:-$1} lib
	mkdir -p "$tree$(dirname "$dest")"
	cp -L "$f" "$tree$dest"
	ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		[ -e "$tree$lib" ] && continue
		mkdir -p "$tree$(dirname "$lib")"
		cp -L "$lib" "$tree$lib"
	done
}

mkdir -p "$tree/bin" "$tree/tmp" "$tree/etc"
cp /bin/busybox "$tree/bin/busybox"
ln -s busybox "$tree/bin/sh"
cp selftests/container_grab "$tree/bin/container_grab"
add tools/demo/mrpool-demo /bin/mrpool-demo
cp -r /etc/libibverbs.d "$tree/etc/"
for f in /usr/lib/x86_64-linux-gnu/libibverbs/*.so; do
	add "$f"
done
echo 'root:x:0:0::/:/bin/sh' >"$tree/etc/passwd"
tar -C "$tree" -cf "$out" .
