#!/usr/bin/env python3
"""tools/streamk_walk_model.py - no GPU needed: a model of the stream-K walk of nanogpt.cu's TMA matmul
(streamk_plan, tm_walk and tm_next, TmStreamK), for GPU sizes the CUDA emulator's 8 SMs cannot show.

For a weight gradient of M x N (tiles of 128 x 256) and K on a GPU of G SMs, streamk_plan's choice (stream-K or
not), then each block's walk, step for step as the kernel takes it: its share of the tiles' k tiles from its end
back, the tile order of the k phases (t = p + period (jq share + jr), stepped down without dividing), each piece's
k range and first_block (-1: it leaves its tile unfinished). Checks: the tiles are each tile once; the pieces of a
tile cover its k tiles once, in consecutive blocks; a block leaves at most one tile unfinished, and walks that piece
first (so the finishing block never waits on a block that has yet to sum its piece: blocks that run in order, as on
the emulator, or start late, never wait on a later one); the finishing block's first_block is the block holding the
tile's first k tile; at most four pieces a tile; the blocks gridDim / g apart walk the same k ranges in step, and the
g tiles of each k phase are whole rows of tiles (A the larger operand) or whole columns (B), so each k tile of the
larger operand is read by all its tiles at once. And deliberate bugs are caught: the walk from the share's start, the
tiles in the usual order, first_block off by one.
Keep it in step with nanogpt.cu when either changes.  Usage: python3 tools/streamk_walk_model.py"""
import math
import sys

BM, BN, BK = 128, 256, 64


def plan(M, N, K, G, scratch=20 << 20):
    """streamk_plan: None (split-K's rule) or the TmStreamK fields"""
    tiles_m, tiles_n = -(-M // BM), -(-N // BN)
    tiles = tiles_m * tiles_n
    if K < 2048 or G * 3 * 4 > 8192:
        return None
    if tiles >= G or 3 * tiles < G or G * (BM * BN + 2 * BM) * 4 > scratch:
        return None
    kt = -(-K // BK)
    if (tiles * kt + 1) * G >= 2**31 - 1:
        return None
    g = math.gcd(tiles, G)
    rows_share = M >= N
    share = tiles_n if rows_share else tiles_m
    if g % share:
        return None
    return dict(tiles=tiles, tiles_m=tiles_m, tiles_n=tiles_n, kt=kt, period=tiles // g, rows_share=rows_share,
                share=share, groups=g // share, g=g)


def walk(b, G, sk, bug=None):
    """block b's pieces in the order it walks them: (tile (m, n), k0, k1, first_block)"""
    tiles, kt = sk["tiles"], sk["kt"]
    total = tiles * kt
    lo, hi = b * total // G, (b + 1) * total // G
    if bug == "forward":  # the share walked from its start: the same pieces, in the opposite order
        return list(reversed(walk(b, G, sk)))
    t = (hi - 1) // kt if hi > lo else 0
    j = t // sk["period"]
    p, jq, jr = t % sk["period"], j // sk["share"], j % sk["share"]
    out = []
    while hi > lo:
        t0 = t * kt
        k0, k1 = max(lo, t0) - t0, hi - t0
        if bug == "usual order":
            m, n = divmod(t, sk["tiles_n"])
        else:
            across = p * sk["groups"] + jq
            m, n = (across, jr) if sk["rows_share"] else (jr, across)
        if k1 != kt:
            first = -1
        elif k0:
            first = ((t0 + 1) * G - 1) // total if bug != "first_block" else (t0 * G) // total + 1
        else:
            first = b
        out.append(((m, n), k0, k1, first))
        hi = t0 + k0
        t -= 1
        if p:
            p -= 1
        else:
            p = sk["period"] - 1
            if jr:
                jr -= 1
            else:
                jr, jq = sk["share"] - 1, jq - 1
    return out


def check(M, N, K, G, bug=None):
    """the failures of the checks above for this product (an empty list: none), or None when it is not stream-K"""
    sk = plan(M, N, K, G)
    if not sk:
        return None
    bad = []
    walks = [walk(b, G, sk, bug) for b in range(G)]
    pieces = {}
    for b, w in enumerate(walks):
        unfinished = [i for i, pc in enumerate(w) if pc[3] < 0]
        if len(unfinished) > 1 or (unfinished and unfinished[0] != 0):
            bad.append(f"block {b} leaves a tile unfinished after its first piece: {w}")
        for pos, (tile, k0, k1, first) in enumerate(w):
            pieces.setdefault(tile, []).append((k0, k1, b, first, pos))
    want = {(m, n) for m in range(sk["tiles_m"]) for n in range(sk["tiles_n"])}
    if set(pieces) != want:
        bad.append(f"the walk's tiles are not each tile once ({len(pieces)} of {len(want)})")
    for tile, ps in pieces.items():
        ps.sort()
        if ps[0][0] != 0 or ps[-1][1] != sk["kt"] or any(a[1] != c[0] or c[2] != a[2] + 1 for a, c in zip(ps, ps[1:])):
            bad.append(f"tile {tile}: pieces {ps} do not cover its k tiles once in consecutive blocks")
            continue
        if len(ps) > 4:
            bad.append(f"tile {tile}: {len(ps)} pieces")
        fin = ps[-1]
        if fin[3] != ps[0][2] or any(p[3] >= 0 for p in ps[:-1]):
            bad.append(f"tile {tile}: first_block {fin[3]}, its first piece in block {ps[0][2]}")
        for p in ps[:-1]:  # the earlier pieces: their blocks' first walked, so summed before any wait
            if p[4] != 0:
                bad.append(f"tile {tile}: block {p[2]} sums its piece after {p[4]} others, and block {fin[2]} waits on it")
    step = G // sk["g"]
    for b in range(G - step):
        if [(k0, k1) for _, k0, k1, _ in walks[b]] != [(k0, k1) for _, k0, k1, _ in walks[b + step]]:
            bad.append(f"blocks {b} and {b + step} do not walk in step")
            break
    phase = {}  # the tiles the blocks of one phase class hold at each step of their walk
    for b, w in enumerate(walks):
        for i, (tile, k0, k1, _) in enumerate(w):
            phase.setdefault((b % step, i, k0, k1), []).append(tile)
    for key, ts in phase.items():
        lines = [m for m, n in ts] if sk["rows_share"] else [n for m, n in ts]
        if any(lines.count(v) != sk["share"] for v in set(lines)):
            bad.append(f"a k phase holds {ts}: not whole {'rows' if sk['rows_share'] else 'columns'} of tiles")
            break
    return bad


def main():
    shapes = []
    for G in (132, 114, 78, 108, 8):  # H100 SXM and H200, H100 PCIe, a smaller part, A100's count, the emulator
        for rows in (2048, 4096, 8192, 12288, 16384, 65536):
            for M, N in ((2304, 768), (768, 768), (3072, 768), (768, 3072), (3840, 1280), (1280, 5120), (5120, 1280)):
                shapes.append((M, N, rows, G))
    shapes += [(104, 600, 2048, 8), (256, 512, 2100, 8), (128, 512, 4200, 8)]  # test_gpu_ops' cases on the emulator
    ran, fails = 0, []
    for s in shapes:
        r = check(*s)
        if r is None:
            continue
        ran += 1
        fails += [f"{s}: {x}" for x in r]
    gpt2 = [s for s in ((2304, 768, 12288, 132), (3072, 768, 12288, 132), (768, 3072, 12288, 132)) if plan(*s)]
    if len(gpt2) != 3:
        fails.append("GPT-2 124M's qkv, fc and MLP projection weight gradients at batch 12 on 132 SMs are not all stream-K")
    missed = []
    for bug in ("forward", "usual order", "first_block"):
        if not any(check(*s, bug=bug) for s in shapes if plan(*s)):
            missed.append(bug)
    if fails or missed:
        print("\n".join(fails[:10]) + (f"\nmutations missed: {', '.join(missed)}" if missed else ""))
        return 1
    print(f"stream-K walk model: {ran} products (of {len(shapes)}) in stream-K, 0 failed; mutations missed: none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
