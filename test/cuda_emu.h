/* cuda_emu.h - runs nanogpt.cu's kernels on the CPU: a host emulator of the CUDA runtime calls and of the
 * device features the backend uses, so that test_gpu_ops and test_gpu_train check every kernel of the
 * sm_75..sm_89 paths on machines without a GPU (CI's). It is a test of the kernels' logic, not a GPU run.
 *
 * test/cuda_emu.sh rewrites nanogpt.cu for a host C++ compiler (each `k<<<grid, block, smem, stream>>>(args)`
 * becomes emu::launch("k", (const void *)&k, [&]() { k(args); }, grid, block, smem, stream), and the functions in
 * inline PTX call the emulations below instead) and compiles it with this header forced in first
 * (-include); this header compiled alone with -DEMU_RUNTIME is the runtime (cudaMalloc, copies, device
 * attributes), an object of its own so that test_gpu_train can wrap cudaMalloc at link time as it does on
 * a GPU. The test programs link with those two objects in place of nanogpt.cu's and cudart's.
 *
 * What is emulated, and how strictly:
 * - A launch runs its blocks one after another. A block's threads are coroutines on one OS thread; the
 *   first ready one in thread order (reversed in every other block) runs until it waits: at __syncthreads
 *   (until every live thread of the block is there) or at a warp-wide operation (until all 32 lanes of its
 *   warp are there). So one warp runs as far ahead of the others as the barriers allow, which is what
 *   makes a missing barrier show. A block where no thread can go on is a deadlock, reported as a launch
 *   failure (a barrier only some threads reach, a full-mask shuffle some lanes never make).
 * - Warp operations with their PTX data layouts: __shfl_xor_sync, ldmatrix .x4 (and .trans), and
 *   mma.sync m16n8k16 (bf16, f16) and m16n8k8 (f16, the sm_75 path). ldmatrix rows and cp.async targets
 *   must be 16-byte aligned and inside the block's dynamic shared memory.
 * - cp.async: the target reads as NaN from the copy's issue until the issuing thread's wait_group lets the
 *   copy land, so reading a tile before its wait (or before the barrier after it), and refilling a buffer
 *   another warp still reads, both give NaN, which the tests catch.
 * - Dynamic shared memory is poisoned with 0xFF (NaN in every float type) before each block, and ends at
 *   an inaccessible page, so reading past what the launch asked for faults. A launch may ask for more than
 *   48 KiB only up to what cudaFuncSetAttribute allowed that kernel, as on a GPU.
 * - The runtime: one device of compute capability EMU_CC (80: bf16 and cp.async; 75: f16 with m16n8k8);
 *   cudaMalloc and friends are host allocations counted by cudaMemGetInfo (the no-allocation check reads
 *   it); copies are synchronous; a failed launch leaves a sticky error, as a real fault does. The driver's
 *   tensor-map encoder is absent, and the compute capability is never 9.0, so the wgmma kernels do not run.
 * Not emulated: timing, the memory model beyond barriers and cp.async, bank conflicts, the Hopper kernels.
 */
#ifndef NGPT_CUDA_EMU_H
#define NGPT_CUDA_EMU_H

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <vector>

#ifndef EMU_CC
#define EMU_CC 80
#endif
#define EMU_SMS 108                       /* an A100's SM count: split-K and grids decide as on one */
#define EMU_SMEM_OPTIN (EMU_CC >= 80 ? 166912 : 65536)
#define EMU_TOTAL_MEM ((size_t)8 << 30)

namespace emu {

/* ---- errors: a launch that fails leaves a sticky error, as a device fault does (state in the runtime
 * object: cuda_emu_runtime below) ----------------------------------------------------------------------- */
extern cudaError_t sticky, last;
void fail(cudaError_t e, const char *fmt, ...);
int smem_allowed(const void *kernel); /* dynamic shared memory a launch of kernel may ask for */

} // namespace emu

#ifndef EMU_RUNTIME /* the device side: compiled into the rewritten nanogpt.cu */
namespace emu {

/* ---- threads of one block ------------------------------------------------------------------------------ */
enum { READY, AT_BARRIER, AT_WARP, DONE };
struct Copy {
    void *dst;
    const void *src;
    long group; /* -1 until committed */
};
struct Thread {
    ucontext_t ctx; /* the coroutine's first entry (makecontext) */
    jmp_buf jb;     /* where it waits */
    uint3 tid;
    int linear, state, started;
    std::vector<Copy> copies; /* cp.async in flight */
    long committed;           /* cp.async groups committed so far */
};
enum { OP_SHFL_XOR, OP_LDSM, OP_LDSM_T, OP_MMA_BF16_K16, OP_MMA_F16_K16, OP_MMA_F16_K8 };
struct WarpSlot { /* one warp-wide operation being gathered */
    int arrived, op, param;
    uint32_t in[32][12], out[32][4];
    const void *ptr[32];
};
struct Block {
    uint3 idx, dim, grid;
    int nthreads, live, at_barrier, reverse, first_ready;
    std::vector<Thread> th; /* 1024 reserved at the first launch, so no Thread ever moves */
    std::vector<WarpSlot> warps;
    jmp_buf sched;
    unsigned char *smem; /* dynamic shared memory: smem_bytes, ending at a guard page */
    size_t smem_bytes;
    const char *kernel;
    void (*body)(void *);
    void *body_arg;
    int failed;
};
static Block blk;
static Thread *cur;

#define EMU_STACK ((size_t)256 << 10)
static std::vector<unsigned char *> stacks; /* one per thread slot, each above a guard page */
static unsigned char *smem_region;
static size_t smem_region_bytes;

static void *map_pages(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "cuda emulator: mmap of %zu bytes failed\n", bytes);
        abort();
    }
    return p;
}
static unsigned char *stack_of(int i) {
    while ((int)stacks.size() <= i) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        unsigned char *p = (unsigned char *)map_pages(EMU_STACK + page);
        mprotect(p, page, PROT_NONE); /* an overflowing stack faults instead of corrupting its neighbour */
        stacks.push_back(p + page);
    }
    return stacks[(size_t)i];
}
/* bytes of dynamic shared memory that end where an inaccessible page starts */
static unsigned char *smem_for(size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t need = (bytes + 16 + page - 1) / page * page;
    if (need > smem_region_bytes) {
        if (smem_region) munmap(smem_region, smem_region_bytes + page);
        smem_region = (unsigned char *)map_pages(need + page);
        mprotect(smem_region + need, page, PROT_NONE);
        smem_region_bytes = need;
    }
    size_t rounded = (bytes + 15) / 16 * 16;
    return smem_region + smem_region_bytes - rounded;
}

/* Switches between the scheduler and the threads: _setjmp / _longjmp, with no signal-mask system call (which
 * swapcontext makes at every switch). Each thread slot is a coroutine made once (makecontext) that runs one
 * block's thread after another: at the end of a body it waits as DONE, and the next block resumes it there. */
static void yield_as(int state) {
    cur->state = state;
    if (!_setjmp(cur->jb)) _longjmp(blk.sched, 1);
}
static void complete_copies(Thread &t, long keep_groups);
static void barrier_check();
static void thread_main() {
    for (;;) {
        blk.body(blk.body_arg);
        complete_copies(*cur, 0); /* copies nobody waited for land when the thread ends */
        blk.live--;
        barrier_check();
        yield_as(DONE);
    }
}
static void resume(Thread &t) {
    cur = &t;
    if (!_setjmp(blk.sched)) {
        if (!t.started) { /* a new coroutine on this slot's stack */
            t.started = 1;
            getcontext(&t.ctx);
            t.ctx.uc_stack.ss_sp = stack_of(t.linear);
            t.ctx.uc_stack.ss_size = EMU_STACK;
            t.ctx.uc_link = NULL;
            makecontext(&t.ctx, thread_main, 0);
            setcontext(&t.ctx);
        }
        _longjmp(t.jb, 1);
    }
    cur = NULL;
}
static void block_fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!blk.failed)
        fail(cudaErrorLaunchFailure, "%s, block (%u,%u,%u), thread (%u,%u,%u): %s", blk.kernel, blk.idx.x, blk.idx.y, blk.idx.z,
             cur ? cur->tid.x : 0, cur ? cur->tid.y : 0, cur ? cur->tid.z : 0, msg);
    blk.failed = 1;
    if (cur) yield_as(DONE); /* never resumed: the block is abandoned, and every slot starts afresh */
}

/* The scheduler runs the first ready thread in thread order (reversed in every other block) until it waits:
 * so one warp runs as far ahead of the others as the barriers allow, which shows races between warps.
 * first_ready: no thread before that position in this order is ready. */
static int position(int linear) { return blk.reverse ? blk.nthreads - 1 - linear : linear; }
static void make_ready(Thread &t) {
    t.state = READY;
    if (position(t.linear) < blk.first_ready) blk.first_ready = position(t.linear);
}
/* releases the barrier once every live thread has reached it */
static void barrier_check() {
    if (blk.at_barrier > 0 && blk.at_barrier == blk.live) {
        for (int i = 0; i < blk.nthreads; i++)
            if (blk.th[(size_t)i].state == AT_BARRIER) make_ready(blk.th[(size_t)i]);
        blk.at_barrier = 0;
    }
}

static void run_block() {
    blk.live = blk.nthreads;
    blk.at_barrier = 0;
    blk.reverse = (blk.idx.x + blk.idx.y + blk.idx.z) & 1;
    blk.first_ready = 0;
    if (blk.smem_bytes) memset(blk.smem, 0xFF, blk.smem_bytes);
    for (WarpSlot &w : blk.warps) w.arrived = 0;
    for (int i = 0; i < blk.nthreads; i++) {
        Thread &t = blk.th[(size_t)i];
        t.linear = i;
        t.tid = make_uint3((unsigned)i % blk.dim.x, (unsigned)i / blk.dim.x % blk.dim.y, (unsigned)i / (blk.dim.x * blk.dim.y));
        t.state = READY;
        t.copies.clear();
        t.committed = 0;
    }
    for (;;) {
        Thread *next = NULL;
        for (; blk.first_ready < blk.nthreads; blk.first_ready++) {
            Thread &t = blk.th[(size_t)(blk.reverse ? blk.nthreads - 1 - blk.first_ready : blk.first_ready)];
            if (t.state == READY) {
                next = &t;
                break;
            }
        }
        if (next) {
            resume(*next);
            if (blk.failed) {
                for (Thread &t : blk.th) t.started = 0; /* abandoned mid-kernel */
                return;
            }
            continue;
        }
        if (blk.live == 0) return;
        int bar = 0, warp = 0;
        for (int i = 0; i < blk.nthreads; i++) bar += blk.th[(size_t)i].state == AT_BARRIER, warp += blk.th[(size_t)i].state == AT_WARP;
        blk.failed = 1;
        for (Thread &t : blk.th) t.started = 0;
        fail(cudaErrorLaunchFailure, "%s, block (%u,%u,%u): deadlock: %d of %d threads at __syncthreads, %d at a warp-wide operation, %d ended",
             blk.kernel, blk.idx.x, blk.idx.y, blk.idx.z, bar, blk.nthreads, warp, blk.nthreads - blk.live);
        return;
    }
}

template <class F> static void call_body(void *f) { (*(F *)f)(); }

/* k<<<grid, block, smem, stream>>>(args) as emu::launch("k", (const void *)&k, [&]() { k(args); }, grid, block, smem, stream) */
template <class F>
static void launch(const char *name, const void *kernel, F &&body, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
    (void)stream;
    if (sticky != cudaSuccess) return; /* the context is dead after a fault */
    unsigned long long n = (unsigned long long)block.x * block.y * block.z;
    if (n == 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || grid.x > 2147483647u) {
        fail(cudaErrorInvalidConfiguration, "%s: invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u)", name, grid.x, grid.y, grid.z,
             block.x, block.y, block.z);
        return;
    }
    if (smem > (size_t)smem_allowed(kernel)) {
        fail(cudaErrorInvalidValue, "%s: %zu bytes of dynamic shared memory, more than the %d its cudaFuncSetAttribute allowed", name, smem,
             smem_allowed(kernel));
        return;
    }
    typedef typename std::remove_reference<F>::type Body;
    blk.kernel = name;
    blk.body = call_body<Body>;
    blk.body_arg = (void *)&body;
    blk.dim = block;
    blk.grid = grid;
    blk.nthreads = (int)n;
    blk.failed = 0;
    if (blk.th.capacity() < 1024) blk.th.reserve(1024);
    if (blk.th.size() < n) blk.th.resize(n);
    blk.warps.resize((n + 31) / 32);
    blk.smem_bytes = smem;
    blk.smem = smem ? smem_for(smem) : NULL;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blk.idx = make_uint3(x, y, z);
                run_block();
                if (blk.failed) return;
            }
}

static void *dynamic_smem() { return blk.smem; }

/* ---- barriers and warp-wide operations --------------------------------------------------------------- */
static void syncthreads() {
    blk.at_barrier++;
    if (blk.at_barrier == blk.live) {
        barrier_check();
        return;
    }
    yield_as(AT_BARRIER);
}

static uint16_t half_bits(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static float bf16_to_f(uint16_t b) { /* the CUDA headers' own conversions, on the host */
    __nv_bfloat16_raw r;
    r.x = b;
    return __bfloat162float(__nv_bfloat16(r));
}
static float f16_to_f(uint16_t b) {
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

/* the last lane to arrive computes everyone's results */
static void warp_compute(WarpSlot &w) {
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        switch (w.op) {
        case OP_SHFL_XOR:
            memcpy(w.out[l], w.in[l ^ w.param], 8);
            break;
        case OP_LDSM:
        case OP_LDSM_T:
            for (int j = 0; j < 4; j++) { /* matrix j: rows from lanes 8j..8j+7 */
                uint16_t lo, hi;
                if (w.op == OP_LDSM) {
                    const uint16_t *row = (const uint16_t *)w.ptr[8 * j + g];
                    lo = half_bits(row + 2 * t);
                    hi = half_bits(row + 2 * t + 1);
                } else {
                    lo = half_bits((const uint16_t *)w.ptr[8 * j + 2 * t] + g);
                    hi = half_bits((const uint16_t *)w.ptr[8 * j + 2 * t + 1] + g);
                }
                w.out[l][j] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
            break;
        default: break;
        }
    }
    if (w.op >= OP_MMA_BF16_K16) { /* D (16x8) = A (16xK) B (Kx8) + C, fp32 sums in k order */
        int K = w.op == OP_MMA_F16_K8 ? 8 : 16;
        float A[16][16], B[16][8], Cm[16][8];
        float (*cvt)(uint16_t) = w.op == OP_MMA_BF16_K16 ? bf16_to_f : f16_to_f;
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            const uint32_t *in = w.in[l]; /* a[4] (a[2] for k8), b[2] (b[1]), c[4] as floats after them */
            int na = K == 16 ? 4 : 2, nb = K == 16 ? 2 : 1;
            for (int r = 0; r < na; r++) {
                int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
                A[row][col] = cvt((uint16_t)in[r]);
                A[row][col + 1] = cvt((uint16_t)(in[r] >> 16));
            }
            for (int r = 0; r < nb; r++) {
                B[2 * t + r * 8][g] = cvt((uint16_t)in[na + r]);
                B[2 * t + r * 8 + 1][g] = cvt((uint16_t)(in[na + r] >> 16));
            }
            float c[4];
            memcpy(c, in + na + nb, 16);
            Cm[g][2 * t] = c[0];
            Cm[g][2 * t + 1] = c[1];
            Cm[g + 8][2 * t] = c[2];
            Cm[g + 8][2 * t + 1] = c[3];
        }
        for (int l = 0; l < 32; l++) {
            int g = l >> 2, t = l & 3;
            float d[4];
            for (int e = 0; e < 4; e++) {
                int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
                float s = 0.0f;
                for (int k = 0; k < K; k++) s += A[row][k] * B[k][col];
                d[e] = s + Cm[row][col];
            }
            memcpy(w.out[l], d, 16);
        }
    }
}
/* this lane's part of a warp-wide operation; returns its results once all 32 lanes have given theirs */
static const uint32_t *warp_op(int op, int param, const uint32_t *in, int nin, const void *ptr) {
    if (blk.nthreads % 32) block_fail("a warp-wide operation in a block of %d threads (not whole warps)", blk.nthreads);
    int lane = cur->linear & 31;
    WarpSlot &w = blk.warps[(size_t)(cur->linear >> 5)];
    if (w.arrived == 0) {
        w.op = op;
        w.param = param;
    } else if (w.op != op || w.param != param) {
        block_fail("lanes of one warp are at different warp-wide operations (%d/%d and %d/%d)", w.op, w.param, op, param);
    }
    if (nin) memcpy(w.in[lane], in, (size_t)nin * 4);
    w.ptr[lane] = ptr;
    if (++w.arrived == 32) {
        warp_compute(w);
        w.arrived = 0;
        int base = cur->linear & ~31;
        for (int l = 0; l < 32; l++)
            if (blk.th[(size_t)(base + l)].state == AT_WARP) make_ready(blk.th[(size_t)(base + l)]);
    } else {
        yield_as(AT_WARP);
    }
    return w.out[lane];
}

template <typename V> static V shfl_xor(unsigned mask, V v, int lane_mask) {
    static_assert(sizeof(V) <= 8, "shuffle of more than 8 bytes");
    if (mask != 0xffffffffu) block_fail("__shfl_xor_sync with mask %#x (only full warps are emulated)", mask);
    if (lane_mask < 0 || lane_mask > 31) block_fail("__shfl_xor_sync lane mask %d", lane_mask);
    uint32_t in[2] = {0, 0};
    memcpy(in, &v, sizeof v);
    const uint32_t *out = warp_op(OP_SHFL_XOR, lane_mask, in, 2, NULL);
    V r;
    memcpy(&r, out, sizeof r);
    return r;
}

/* p must lie in the block's dynamic shared memory, 16-byte aligned, with bytes readable */
static void check_smem(const void *p, size_t bytes, const char *what) {
    const unsigned char *c = (const unsigned char *)p;
    if (!blk.smem || c < blk.smem || c + bytes > blk.smem + blk.smem_bytes)
        block_fail("%s at %p: not inside the %zu bytes of dynamic shared memory", what, p, blk.smem_bytes);
    if ((uintptr_t)p % 16) block_fail("%s at %p: not 16-byte aligned", what, p);
}
static void ldmatrix_x4(uint32_t (&r)[4], const void *p, bool trans) {
    check_smem(p, 16, trans ? "ldmatrix.trans row" : "ldmatrix row");
    const uint32_t *out = warp_op(trans ? OP_LDSM_T : OP_LDSM, 0, NULL, 0, p);
    for (int j = 0; j < 4; j++) r[j] = out[j];
}
static void mma(int op, float (&d)[4], const uint32_t *a, int na, const uint32_t *b, int nb) {
    uint32_t in[12];
    memcpy(in, a, (size_t)na * 4);
    memcpy(in + na, b, (size_t)nb * 4);
    memcpy(in + na + nb, d, 16);
    const uint32_t *out = warp_op(op, 0, in, na + nb + 4, NULL);
    memcpy(d, out, 16);
}
static void mma16816_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if EMU_CC >= 80
    uint32_t b[2] = {b0, b1};
    mma(OP_MMA_BF16_K16, d, a, 4, b, 2);
#else
    (void)d; (void)a; (void)b0; (void)b1;
    block_fail("bf16 mma.sync on sm_%d (needs sm_80)", EMU_CC);
#endif
}
static void mma16816_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if EMU_CC >= 80
    uint32_t b[2] = {b0, b1};
    mma(OP_MMA_F16_K16, d, a, 4, b, 2);
#else /* sm_75: two m16n8k8, as the kernel issues them there */
    mma(OP_MMA_F16_K8, d, a, 2, &b0, 1);
    mma(OP_MMA_F16_K8, d, a + 2, 2, &b1, 1);
#endif
}

/* ---- cp.async: a copy lands when its thread's wait_group lets it, not before ------------------------- */
static void complete_copies(Thread &t, long keep_groups) {
    /* every committed group but the newest keep_groups lands; uncommitted copies stay in flight */
    long limit = t.committed - keep_groups;
    size_t kept = 0;
    for (size_t i = 0; i < t.copies.size(); i++) {
        Copy &c = t.copies[i];
        if (c.group >= 0 && c.group < limit) memcpy(c.dst, c.src, 16);
        else t.copies[kept++] = c;
    }
    t.copies.resize(kept);
}
static void cp_async16(void *smem, const void *gmem) {
    check_smem(smem, 16, "cp.async destination");
    if ((uintptr_t)gmem % 16) block_fail("cp.async source %p: not 16-byte aligned", gmem);
#if EMU_CC >= 80
    Copy c = {smem, gmem, -1};
    cur->copies.push_back(c);
    memset(smem, 0xFF, 16); /* in flight, its target is undefined: whoever still reads it sees NaN */
#else
    memcpy(smem, gmem, 16); /* sm_75: a plain 16-byte load and store */
#endif
}
static void cp_async_commit() {
#if EMU_CC >= 80
    for (Copy &c : cur->copies)
        if (c.group < 0) c.group = cur->committed;
    cur->committed++;
#endif
}
static void cp_async_wait(int n) {
#if EMU_CC >= 80
    complete_copies(*cur, n);
#else
    (void)n;
#endif
}

} // namespace emu

/* ---- the device side of CUDA C++ that the kernels use ------------------------------------------------ */
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
#define threadIdx (emu::cur->tid)
#define blockIdx (emu::blk.idx)
#define blockDim (emu::blk.dim)
#define gridDim (emu::blk.grid)
#define __syncthreads() emu::syncthreads()
#define __shfl_xor_sync(mask, v, lane_mask) emu::shfl_xor((mask), (v), (lane_mask))
#define __ldg(p) (*(p))
#define __trap() emu::block_fail("__trap()")
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

/* the C++ overloads nvcc's headers give (only under nvcc) */
template <class F> static cudaError_t cudaFuncSetAttribute(F *func, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)func, attr, value);
}
template <class F> static cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, F *func) {
    return cudaFuncGetAttributes(attr, (const void *)func);
}
template <class F> static cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F *func, int block, size_t smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, (const void *)func, block, smem);
}
template <class S>
static cudaError_t cudaMemcpyFromSymbol(void *dst, const S &symbol, size_t bytes = sizeof(S), size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
    return cudaMemcpyFromSymbol(dst, (const void *)&symbol, bytes, offset, kind);
}

#else /* EMU_RUNTIME: the runtime API, as far as nanogpt.cu calls it; its own object, so that a test can wrap
        * cudaMalloc and friends at link time as it does with the real runtime */
namespace emu {
cudaError_t sticky = cudaSuccess, last = cudaSuccess;
void fail(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuda emulator: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (last == cudaSuccess) last = e;
    if (sticky == cudaSuccess && e != cudaErrorInvalidValue && e != cudaErrorInvalidConfiguration) sticky = e;
}
static std::map<void *, size_t> device_allocs; /* device memory: host allocations, counted */
static std::map<const void *, int> smem_attr;    /* cudaFuncAttributeMaxDynamicSharedMemorySize of each kernel */
int smem_allowed(const void *kernel) {
    auto it = smem_attr.find(kernel);
    return it == smem_attr.end() ? 48 * 1024 : it->second;
}
static size_t device_bytes;
static int fake_handle;
} // namespace emu

static cudaError_t emu_ret(cudaError_t e) {
    if (e != cudaSuccess && emu::last == cudaSuccess) emu::last = e;
    return e;
}
cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (device != 0) return emu_ret(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = EMU_CC / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *value = EMU_CC % 10; break;
    case cudaDevAttrMultiProcessorCount: *value = EMU_SMS; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = EMU_SMEM_OPTIN; break;
    default: return emu_ret(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
    if (device != 0) return emu_ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "nanogpt's CUDA emulator (sm_%d, on the CPU)", EMU_CC);
    prop->major = EMU_CC / 10;
    prop->minor = EMU_CC % 10;
    prop->multiProcessorCount = EMU_SMS;
    prop->totalGlobalMem = EMU_TOTAL_MEM;
    prop->sharedMemPerBlockOptin = EMU_SMEM_OPTIN;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    if (emu::sticky) return emu::sticky;
    *total = EMU_TOTAL_MEM;
    *free_bytes = EMU_TOTAL_MEM - emu::device_bytes;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    if (emu::sticky) return emu::sticky;
    if (bytes > EMU_TOTAL_MEM - emu::device_bytes) return emu_ret(cudaErrorMemoryAllocation);
    size_t rounded = (bytes + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20); /* whole 2 MiB pages, as the driver counts */
    if (posix_memalign(p, 256, bytes ? bytes : 1)) return emu_ret(cudaErrorMemoryAllocation);
    emu::device_allocs[*p] = rounded;
    emu::device_bytes += rounded;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = emu::device_allocs.find(p);
    if (it == emu::device_allocs.end()) return emu_ret(cudaErrorInvalidValue);
    emu::device_bytes -= it->second;
    emu::device_allocs.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    if (emu::sticky) return emu::sticky;
    if (posix_memalign(p, 256, bytes ? bytes : 1)) return emu_ret(cudaErrorMemoryAllocation);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
    (void)kind; (void)stream;
    if (emu::sticky) return emu::sticky;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    (void)stream;
    if (emu::sticky) return emu::sticky;
    if (bytes) memset(dst, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t bytes, size_t offset, cudaMemcpyKind kind) {
    (void)kind;
    memcpy(dst, (const char *)symbol + offset, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = (cudaStream_t)&emu::fake_handle;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    return emu::sticky;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    *e = (cudaEvent_t)&emu::fake_handle;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)e; (void)s;
    return emu::sticky;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    (void)e;
    return emu::sticky;
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = emu::last != cudaSuccess ? emu::last : emu::sticky;
    emu::last = cudaSuccess;
    return e;
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure (see the emulator's message above)";
    default: return "emulated CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaError (emulated)";
    }
}
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > EMU_SMEM_OPTIN) return emu_ret(cudaErrorInvalidValue);
        emu::smem_attr[func] = value;
    }
    return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func) {
    (void)func;
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 64;
    attr->binaryVersion = attr->ptxVersion = EMU_CC;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem) {
    (void)func; (void)block;
    *n = smem > (size_t)EMU_SMEM_OPTIN ? 0 : smem > (size_t)EMU_SMEM_OPTIN / 2 ? 1 : 2;
    return cudaSuccess;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult *status) {
    (void)symbol; (void)version; (void)flags;
    *fn = NULL;
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

#endif /* EMU_RUNTIME */

#endif /* NGPT_CUDA_EMU_H */
