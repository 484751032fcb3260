#!/usr/bin/env python3
"""tools/tma_pipeline_model.py - no GPU needed: a model of the stage pipeline of nanogpt.cu's matmul_tma_kernel.

One producer thread and two consumer warpgroups walk a block's tiles (block, block + grid, ...) with any
number of k tiles each, through STAGES stages that each have a "full" mbarrier (count 1, plus the copies'
bytes) and an "empty" one (count 256: every consumer thread; 257 where the bias-gradient warp, tm_colsum,
also reads the stages: it waits on each stage's "full", reads it in the tiles it sums, then arrives once).
The agents follow the kernel's loops line for line (the waits' parities, expect-bytes before the copies, the
release of the previous stage after wgmma.wait_group 1, the tail release); the copies land and the wgmma
reads happen at random later times, in random interleavings. mbarrier semantics as the PTX ISA gives them: a phase completes when its
arrivals and its expected bytes are all in; try_wait.parity P succeeds once the phase of parity P (the
current one or the one before it) has completed, so a fresh barrier passes parity 1.
Checks: every read sees the k tile it expects (no stage refilled while a read of it is pending), nothing
deadlocks, every tile is finished by both consumers (and summed by the bias-gradient warp); and deliberate
bugs are caught (the wrong phase awaited, the last stage of a tile never released, a stage released before
its read; the bias-gradient warp left out of the empty count, or releasing a stage before it reads it).
Keep it in step with nanogpt.cu when either changes.  Usage: python3 tools/tma_pipeline_model.py [runs]"""
import os
import random
import re
import sys


def kernel_constants():
    """the stage count and the barriers' arrival counts (the empty one's with and without the bias-gradient warp),
    read from nanogpt.cu's matmul_tma_kernel, so the model follows the kernel"""
    src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nanogpt.cu")).read()
    stages = int(re.search(r"^#define TM_STAGES (\d+)", src, re.M).group(1))
    full = int(re.search(r"mbar_init\(&full\[s\], (\d+)\)", src).group(1))
    kernel = src[src.index("matmul_tma_kernel(const __grid_constant__"):]
    expr = re.search(r"tm_init_barriers\(full, empty, TM_STAGES, ([0-9 *+a-z]+)\);", kernel).group(1)
    assert re.fullmatch(r"[0-9 *+]*(colsum)?[0-9 *+]*", expr), expr  # digits, spaces, * and + and the one flag
    return stages, full, [eval(expr, {"__builtins__": {}, "colsum": c}) for c in (0, 1)]


STAGES, FULL_COUNT, EMPTY_COUNTS = kernel_constants()


class MBar:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, n=1):
        assert self.pending >= n, "more arrivals than the count in one phase"
        self.pending -= n
        self._maybe_complete()

    def expect_tx(self, nbytes):
        self.tx += nbytes
        self.arrive()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        assert self.tx >= 0
        self._maybe_complete()

    def try_wait(self, parity):  # the phase of this parity (the current one or the one before) has completed
        return (self.phase & 1) != parity


def tiles_of(block, grid, tiles, ktiles):
    return [(t, ktiles(t)) for t in range(block, tiles, grid)]


def run(seed, grid, block, tiles, ktiles, bug=None, colsum=False, sums=lambda t: t % 3 == 0):
    """colsum: the bias-gradient warp walks the tiles too, reading the stages of the tiles sums(t) picks"""
    rng = random.Random(seed)
    full = [MBar(FULL_COUNT) for _ in range(STAGES)]
    empty = [MBar(EMPTY_COUNTS[colsum and bug != "sum-uncounted"]) for _ in range(STAGES)]
    smem = [None] * STAGES
    copies = []  # (stage, id, bytes) in flight
    reads = [[], []]  # per consumer: pending wgmma reads (stage, id), oldest first
    work = tiles_of(block, grid, tiles, ktiles)
    consumed = [[], []]
    summed = []
    sum_reads = []  # the bias-gradient warp's reads of a stage released before them (bug "sum-early-release")

    def producer():
        it = 0
        for t, KT in work:
            for kt in range(KT):
                s = it % STAGES
                parity = ((it // STAGES) & 1) ^ 1  # its last use released (a fresh barrier passes parity 1)
                while not empty[s].try_wait(parity if bug != "wrong-empty-parity" else parity ^ 1):
                    yield
                full[s].expect_tx(3)
                for part in range(3):  # several boxes per stage
                    copies.append((s, (t, kt), 1))
                it += 1
                yield

    def consumer(c):
        it = 0
        for t, KT in work:
            for kt in range(KT):
                s = it % STAGES
                while not full[s].try_wait((it // STAGES) & 1):
                    yield
                reads[c].append((s, (t, kt)))  # wgmma issued: its read of the stage happens later
                if bug == "early-release":  # the stage released before its wgmma has read it
                    empty[s].arrive(128)
                    it += 1
                    yield
                    continue
                while len(reads[c]) > 1:  # wgmma.wait_group 1: all but the newest read done
                    yield
                if kt > 0:
                    empty[(it - 1) % STAGES].arrive(128)
                it += 1
                yield
            while reads[c]:
                yield
            if KT > 0 and bug != "no-tail-release" and bug != "early-release":
                empty[(it - 1) % STAGES].arrive(128)
            consumed[c].append(t)
            yield

    def summer():  # tm_colsum: its loads are done before __syncwarp and its lane 0's arrival
        it = 0
        for t, KT in work:
            for kt in range(KT):
                s = it % STAGES
                while not full[s].try_wait((it // STAGES) & 1):
                    yield
                if sums(t):
                    if bug == "sum-early-release":
                        sum_reads.append((s, (t, kt)))
                    elif smem[s] != (t, kt):
                        raise AssertionError("the bias-gradient warp read stage %d holding %s, wanted %s" % (s, smem[s], (t, kt)))
                empty[s].arrive(1)
                it += 1
                yield
            if sums(t):
                summed.append(t)

    agents = {"p": producer(), "c0": consumer(0), "c1": consumer(1)}
    if colsum:
        agents["sum"] = summer()
    steps = 0
    while True:
        steps += 1
        if steps > 200000:
            return "deadlock"
        choices = list(agents)
        if copies:
            choices.append("copy")
        if sum_reads:
            choices.append("sumread")
        for c in (0, 1):
            if reads[c]:
                choices.append("read%d" % c)
        if not choices:
            break
        a = rng.choice(choices)
        if a == "copy":
            i = rng.randrange(len(copies))
            s, ident, nbytes = copies.pop(i)
            smem[s] = ident
            full[s].complete_tx(nbytes)
        elif a == "sumread":
            s, ident = sum_reads.pop(0)
            if smem[s] != ident:
                return "the bias-gradient warp read stage %d holding %s, wanted %s" % (s, smem[s], ident)
        elif a.startswith("read"):
            c = int(a[4])
            s, ident = reads[c].pop(0)  # the oldest pending read is performed
            if smem[s] != ident:
                return "consumer %d read stage %d holding %s, wanted %s" % (c, s, smem[s], ident)
        else:
            try:
                next(agents[a])
            except StopIteration:
                del agents[a]
            except AssertionError as e:
                return str(e)
    want = [t for t, _ in work]
    if consumed[0] != want or consumed[1] != want:
        return "tiles consumed %s %s, wanted %s" % (consumed[0], consumed[1], want)
    if colsum and summed != [t for t in want if sums(t)]:
        return "tiles summed %s, wanted %s" % (summed, [t for t in want if sums(t)])
    if any(b.pending != b.count or b.tx for b in full + empty):
        return "a barrier ended with a phase part done: its count is not the arrivals each phase gets"
    return None


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    bad = 0
    rng = random.Random(1)
    for trial in range(runs):
        grid = rng.randint(1, 5)
        tiles = rng.randint(1, 12)
        block = rng.randrange(grid)
        kts = [rng.choice([1, 2, 3, 4, 5, 6, 9, 12]) for _ in range(tiles)]
        err = run(trial, grid, block, tiles, lambda t: kts[t], colsum=trial % 2 == 1)
        if err:
            bad += 1
            if bad < 5:
                print("trial %d (grid %d, block %d, k tiles %s): %s" % (trial, grid, block, kts, err))
    # the model must catch these: the wrong phase awaited, a stage never released, one released too early
    missed = []
    for bug in ("wrong-empty-parity", "no-tail-release", "early-release", "sum-uncounted", "sum-early-release"):
        if not any(run(trial, 2, 0, 6, lambda t: 5, bug, colsum=bug.startswith("sum")) for trial in range(20)):
            missed.append(bug)
    print("tma pipeline model: %d of %d random runs failed; mutations missed: %s" % (bad, runs, ", ".join(missed) or "none"))
    return 1 if bad or missed else 0


if __name__ == "__main__":
    sys.exit(main())
