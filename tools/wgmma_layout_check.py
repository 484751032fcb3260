#!/usr/bin/env python3
"""tools/wgmma_layout_check.py - no GPU needed: do nanogpt.cu's wgmma matmuls put each operand element where
their shared-memory descriptors tell wgmma to read it?

It repeats, in Python, the copy-engine boxes of matmul_tma_kernel (a K-major tile as one box
of 64 k x its rows, an MN-major tile as boxes of 64 columns x 64 k, 8 KB apart; the copy engine writes
element (inner i, outer j) of a box with 128-byte rows at swizzle(j * 128 + 2 i) from the box's
1024-byte-aligned start), the byte count its "full" barrier expects, and its descriptors (A: 64 rows per
consumer warpgroup; B: 256 columns, m64n256k16, or in its narrower tiles 192, m64n192k16); and the ping-pong
build's tiles (matmul_tma_pingpong_kernel: A 64 rows, one warpgroup's, B 256 columns). Every element is read back through the PTX ISA's
canonical layouts for 128B swizzling ("Asynchronous warpgroup level matrix shared memory layout"):
    K-major  ((8,m),(T,2k)):((8T,SBO),(1,T))
    MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))      T = 8 elements of 16 bits
with the swizzle on byte addresses (bits 4-6 ^= bits 7-9; the tiles are 1024-byte aligned).
Keep it in step with nanogpt.cu when either changes.  Usage: python3 tools/wgmma_layout_check.py
"""
import os
import re
import sys


def swizzle(off):
    return off ^ ((off >> 3) & 0x70)


def tma_placed(kcontig, rows):
    """byte address -> (row, k) as matmul_tma_kernel's copies store a tile of `rows` rows (m or n) x 64 k"""
    mem = {}

    def box(start, inner, outer, element):  # a box of inner x outer elements, 128-byte rows
        assert inner * 2 == 128 and start % 1024 == 0
        for j in range(outer):
            for i in range(inner):
                mem[start + swizzle(j * 128 + 2 * i)] = element(i, j)

    if kcontig:  # tma_load(a, map, k, row0): inner = k, outer = rows
        box(0, 64, rows, lambda i, j: (j, i))
    else:  # tma_load(a + b * 8192, map, col0 + b * 64, k): inner = columns, outer = k
        for b in range(rows // 64):
            box(b * 8192, 64, 64, lambda i, j, b=b: (b * 64 + i, j))
    return mem


def canonical(kmajor, mn, k, lbo, sbo):
    if kmajor:
        return (mn % 8) * 128 + (mn // 8) * sbo + (k % 8) * 2 + (k // 8) * 16
    return (mn % 8) * 2 + ((mn // 8) % 8) * 16 + (mn // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo


def read_back(mem, kcontig, start0, rows, row0):
    """mismatches when wgmma reads `rows` rows x 64 k (four k16 steps) from start0 with this kernel's strides"""
    bad = 0
    for ks in range(4):
        if kcontig:
            start, lbo, sbo = start0 + ks * 32, 16, 1024
        else:
            start, lbo, sbo = start0 + ks * 2048, 8192, 1024
        for mn in range(rows):
            for k in range(16):
                got = mem.get(swizzle(start + canonical(kcontig, mn, k, lbo, sbo)))
                bad += got != (row0 + mn, ks * 16 + k)
    return bad


def tile_constants():
    """the tile sizes this check models, as nanogpt.cu defines them"""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nanogpt.cu")).read()
    consts = {name: int(re.search(r"^#define %s (\d+)" % name, src, re.M).group(1))
              for name in ("WG_BK", "TM_BM", "TM_BN", "TM_BN_NARROW", "TP_BM")}
    # the bytes a stage's "full" barrier expects for a BM x BN tile: the argument of tm_producer's
    # mbar_expect_bytes, with TM_A_BYTES, TM_B_BYTES and TP_A_BYTES evaluated from their definitions
    for name in ("TM_A_BYTES", "TM_B_BYTES", "TP_A_BYTES"):
        expr = re.search(r"^#define %s (\([A-Z_0-9 *]+\))" % name, src, re.M).group(1)
        consts[name] = eval(expr, {"__builtins__": {}}, consts)
    producer = src[src.index("static __device__ __forceinline__ void tm_producer("):]
    expr = re.search(r"mbar_expect_bytes\(&full\[s\], ([A-Z_0-9 ()+*]+)\);", producer).group(1)
    for bm, bn in ((consts["TM_BM"], consts["TM_BN"]), (consts["TM_BM"], consts["TM_BN_NARROW"]), (consts["TP_BM"], consts["TM_BN"])):
        consts["expected_%d_%d" % (bm, bn)] = eval(expr, {"__builtins__": {}}, dict(consts, BM=bm, BN=bn))
    return consts


def main():
    bad = 0
    consts = tile_constants()
    if {k: consts[k] for k in ("WG_BK", "TM_BM", "TM_BN", "TM_BN_NARROW", "TP_BM")} != {"WG_BK": 64, "TM_BM": 128, "TM_BN": 256, "TM_BN_NARROW": 192,
                                                                                     "TP_BM": 64}:
        print("nanogpt.cu's tiles changed (%s): update this check" % consts)
        return 1
    for kcontig in (True, False):
        # the TMA kernel: A 128 x 64 (two consumer warpgroups of 64 rows), B BN x 64 (n256 or n192), in a
        # stage with room for TM_B_BYTES of B
        mem_a = tma_placed(kcontig, 128)
        for bn in (consts["TM_BN"], consts["TM_BN_NARROW"]):
            mem_b = tma_placed(kcontig, bn)
            if len(mem_a) * 2 + len(mem_b) * 2 != consts["expected_128_%d" % bn]:
                print("TMA stage (%s, tiles %d wide): the copies write %d bytes, the full barrier expects %d" %
                      ("K-major" if kcontig else "MN-major", bn, (len(mem_a) + len(mem_b)) * 2, consts["expected_128_%d" % bn]))
                bad += 1
            for name, mem, want, room in (("A", mem_a, consts["TM_A_BYTES"], consts["TM_A_BYTES"]),
                                          ("B", mem_b, bn * consts["WG_BK"] * 2, consts["TM_B_BYTES"])):
                if len(mem) * 2 != want or max(mem) + 2 > room:
                    print("TMA %s tile (%s, tiles %d wide): %d bytes written, up to byte %d; %d expected in a stage of %d" %
                          (name, "K-major" if kcontig else "MN-major", bn, len(mem) * 2, max(mem) + 2, want, room))
                    bad += 1
            bad += read_back(mem_b, kcontig, 0, bn, 0)
        for cw in (0, 1):
            bad += read_back(mem_a, kcontig, cw * 64 * 128 if kcontig else cw * 8192, 64, cw * 64)
        # the ping-pong build: A 64 x 64 (one box either way), read whole by one warpgroup; B as the 256-wide tiles'
        mem_pa = tma_placed(kcontig, consts["TP_BM"])
        if len(mem_pa) * 2 != consts["TP_A_BYTES"] or max(mem_pa) + 2 > consts["TP_A_BYTES"] or \
                len(mem_pa) * 2 + consts["TM_BN"] * consts["WG_BK"] * 2 != consts["expected_64_%d" % consts["TM_BN"]]:
            print("ping-pong TMA stage (%s): A writes %d bytes up to byte %d in %d; the full barrier expects %d" %
                  ("K-major" if kcontig else "MN-major", len(mem_pa) * 2, max(mem_pa) + 2, consts["TP_A_BYTES"],
                   consts["expected_64_%d" % consts["TM_BN"]]))
            bad += 1
        bad += read_back(mem_pa, kcontig, 0, 64, 0)
    print("wgmma layout check: %d mismatches" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
