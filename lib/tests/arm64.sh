#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Cross-build libmrpool for arm64 (aarch64-linux-gnu-gcc, -Werror as on
# the host) and run its host tests under qemu-aarch64 user mode. This
# checks the build, the ABI and the code paths on arm64; it cannot show
# what only an arm64 kernel gives: user mode on an x86-64 host hands out
# neither addresses above 2^47 nor pages other than 4 KiB (map_test
# covers those addresses with a backend that hands them out).
#
# Needs (Debian, with `dpkg --add-architecture arm64`): gcc-aarch64-linux-gnu
# qemu-user libc6:arm64 libibverbs-dev:arm64. Exits 4 (skip) without them.
# Builds in .cache/arm64/ so the host build in lib/ is left alone.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
cross=${CROSS_COMPILE:-aarch64-linux-gnu-}
qemu=${QEMU:-qemu-aarch64}
out=$top/.cache/arm64

skip() { echo "1..0 # SKIP $*"; exit 4; }
command -v "${cross}gcc" >/dev/null || skip "${cross}gcc not installed"
command -v "$qemu" >/dev/null || skip "$qemu not installed"
[ -e /lib/ld-linux-aarch64.so.1 ] || skip "libc6:arm64 not installed"
[ -e /usr/lib/aarch64-linux-gnu/libibverbs.so ] || skip "libibverbs-dev:arm64 not installed"
ksft=$(sed -n 's/^KSFT_DIR := //p' "$top/.cache/env.mk" 2>/dev/null || true)
[ -f "$ksft/kselftest_harness.h" ] || skip "kselftest_harness.h not found: run tools/deps.sh"

rm -rf "$out"
mkdir -p "$out"
cp -r "$top/lib" "$top/include" "$out/"
rm -rf "$out/lib/build" "$out"/lib/libmrpool.a "$out"/lib/libmrpool.so*
cd "$out/lib"
make -s clean
# file(1) is not always installed: the ELF header says the machine (183 = AArch64)
make -s TOP="$out" KSFT_DIR="$ksft" CC="${cross}gcc" all
machine=$(od -An -tu2 -j18 -N2 build/alloc.o | tr -d ' ')
[ "$machine" = 183 ] || { echo "not ok - cross build is not AArch64 (e_machine $machine)"; exit 1; }
echo "# built for AArch64: $(ls build/*.o | wc -l) objects, libmrpool.so.1.0.0 exports:"
"${cross}nm" -D --defined-only libmrpool.so.1.0.0 | awk '{print "#   " $3}'
make TOP="$out" KSFT_DIR="$ksft" CC="${cross}gcc" RUN="$qemu" test
