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
# qemu-user libc6:arm64 libc6-dev:arm64 libibverbs-dev:arm64. Exits 4
# (skip) without them.
# Builds in .cache/arm64/ so the host build in lib/ is left alone.
#
#   lib/tests/arm64.sh           build, then run the tests under qemu-aarch64
#   lib/tests/arm64.sh --build   build only, the tests and preload_test (which
#                                user mode cannot run) for an arm64 system
#                                (tools/arm64/run boots one)
set -euo pipefail

build_only=0
case ${1:-} in
--build) build_only=1 ;;
'') ;;
*) echo "usage: $0 [--build]" >&2; exit 2 ;;
esac

top=$(cd "$(dirname "$0")/../.." && pwd)
cross=${CROSS_COMPILE:-aarch64-linux-gnu-}
qemu=${QEMU:-qemu-aarch64}
out=$top/.cache/arm64

skip() { echo "1..0 # SKIP $*"; exit 4; }
command -v "${cross}gcc" >/dev/null || skip "${cross}gcc not installed"
((build_only)) || command -v "$qemu" >/dev/null || skip "$qemu not installed"
[ -e /lib/ld-linux-aarch64.so.1 ] || skip "libc6:arm64 not installed"
[ -e /usr/include/aarch64-linux-gnu/bits/wordsize.h ] ||
	skip "libc6-dev:arm64 not installed"
[ -e /usr/lib/aarch64-linux-gnu/libibverbs.so ] || skip "libibverbs-dev:arm64 not installed"
ksft=$(sed -n 's/^KSFT_DIR := //p' "$top/.cache/env.mk" 2>/dev/null || true)
[ -f "$ksft/kselftest_harness.h" ] || skip "kselftest_harness.h not found: run tools/deps.sh"

rm -rf "$out"
mkdir -p "$out"
cp -r "$top/lib" "$top/include" "$out/"
# preload_test runs mrpool-run through wrappers (MRP_RUN_PATH)
mkdir -p "$out/tools"
cp -r "$top/tools/run" "$out/tools/"
# preload_prog_test runs make bench's glibc-costs at small sizes
mkdir -p "$out/tools/bench"
cp "$top/tools/bench/glibc-costs.c" "$out/tools/bench/"
rm -rf "$out/lib/build" "$out"/lib/libmrpool.a "$out"/lib/libmrpool.so*
cd "$out/lib"
make -s clean
# file(1) is not always installed: the ELF header says the machine (183 = AArch64)
make -s TOP="$out" KSFT_DIR="$ksft" CC="${cross}gcc" all
machine=$(od -An -tu2 -j18 -N2 build/alloc.o | tr -d ' ')
[ "$machine" = 183 ] || { echo "not ok - cross build is not AArch64 (e_machine $machine)"; exit 1; }
echo "# built for AArch64: $(ls build/*.o | wc -l) objects, libmrpool.so.1 exports:"
"${cross}nm" -D --defined-only libmrpool.so.1 | awk '{print "#   " $3}'
if ((build_only)); then
	# no "Entering directory" lines among the names: a make above this
	# one (make check-busy) may have put w in MAKEFLAGS, which -s keeps
	read -ra bins < <(make -s --no-print-directory TOP="$out" KSFT_DIR="$ksft" \
		print-test-bins)
	make -s TOP="$out" KSFT_DIR="$ksft" CC="${cross}gcc" "${bins[@]}"
	exit 0
fi
make TOP="$out" KSFT_DIR="$ksft" CC="${cross}gcc" RUN="$qemu" test
