#!/usr/bin/env python3
"""tools/wgmma_layout_check.py - no GPU needed: does nanogpt.cu's wgmma matmul put each operand element where
its shared-memory descriptors tell wgmma to read it?

It repeats, in Python, the placement of wg_load_tile (nanogpt.cu: 128 rows or columns x 64 k of 16-bit
elements, 16-byte chunks, 128-byte swizzle) and the descriptors of matmul_wgmma_kernel (start address, LBO,
SBO per warpgroup and k step), and reads every element back through the PTX ISA's canonical layouts for
128B swizzling ("Asynchronous warpgroup level matrix shared memory layout"):
    K-major  ((8,m),(T,2k)):((8T,SBO),(1,T))
    MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))      T = 8 elements of 16 bits
with the swizzle on byte addresses (bits 4-6 ^= bits 7-9; the tiles are 1024-byte aligned).
Keep it in step with nanogpt.cu when either changes.  Usage: python3 tools/wgmma_layout_check.py
"""
import sys


def swizzle(off):
    return off ^ ((off >> 3) & 0x70)


def placed(kcontig):
    """byte address of each element's first byte -> (row, k) as wg_load_tile stores them"""
    mem = {}
    for q in range(1024):  # 128 x 64 elements in chunks of 8
        if kcontig:  # K-major: row r holds k 0..63
            r, c = q >> 3, q & 7
            base = swizzle(r * 128 + c * 16)
            for j in range(8):
                mem[base + 2 * j] = (r, c * 8 + j)
        else:  # MN-major: k row holds 64 columns; columns 64.. in the second 8 KB block
            k, c = q >> 4, q & 15
            base = swizzle((c >> 3) * 8192 + k * 128 + (c & 7) * 16)
            for j in range(8):
                mem[base + 2 * j] = (c * 8 + j, k)
    return mem


def canonical(kmajor, mn, k, lbo, sbo):
    if kmajor:
        return (mn % 8) * 128 + (mn // 8) * sbo + (k % 8) * 2 + (k // 8) * 16
    return (mn % 8) * 2 + ((mn // 8) % 8) * 16 + (mn // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo


def main():
    bad = 0
    for kcontig in (True, False):
        mem = placed(kcontig)
        assert len(mem) == 128 * 64
        # A: each warpgroup wg reads its 64 rows; B: all 128 columns (n128)
        for rows, warpgroups in ((64, (0, 1)), (128, (0,))):
            for wg in warpgroups:
                for ks in range(4):  # four k16 steps per 64-wide k tile
                    if kcontig:
                        start, lbo, sbo = wg * 64 * 128 + ks * 32, 16, 1024
                    else:
                        start, lbo, sbo = wg * 8192 + ks * 2048, 8192, 1024
                    for mn in range(rows):
                        for k in range(16):
                            got = mem.get(swizzle(start + canonical(kcontig, mn, k, lbo, sbo)))
                            bad += got != (wg * 64 + mn, ks * 16 + k)
    print("wgmma layout check: %d mismatches" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
