/* cuda_emu.h - runs nanogpt.cu's kernels on the CPU: a host emulator of the CUDA runtime calls and of the
 * device features the backend uses, so that test_gpu_ops and test_gpu_train check every kernel of the
 * sm_75..sm_90a paths on machines without a GPU (CI's). It is a test of the kernels' logic, not a GPU run.
 *
 * test/cuda_emu.sh rewrites nanogpt.cu for a host C++ compiler (each `k<<<grid, block, smem, stream>>>(args)`
 * becomes emu::launch("k", emu::kernel_address(k), [=]() { k(args); }, grid, block, smem, stream), and the
 * functions in inline PTX call the emulations below instead) and compiles it with this header forced in
 * first (-include); this header compiled alone with -DEMU_RUNTIME is the runtime (cudaMalloc, copies,
 * device attributes), an object of its own so that test_gpu_train can wrap cudaMalloc at link time as it
 * does on a GPU. The test programs link with those two objects in place of nanogpt.cu's and cudart's.
 *
 * What is emulated, and how strictly:
 * - A launch runs its blocks one after another. A block's threads are coroutines on one OS thread; the
 *   first ready one in thread order (reversed in every other block) runs until it waits: at __syncthreads
 *   (until every live thread of the block is there) or at a warp-wide operation (until all 32 lanes of its
 *   warp are there). So one warp runs as far ahead of the others as the barriers allow, which is what
 *   makes a missing barrier show. A thread spinning on a condition (an mbarrier phase, a wgmma group, the
 *   registers setmaxnreg.inc wants) waits until the ready threads have all waited, then looks again. A
 *   block where no thread can go on, or where the spinners looked again with nothing changed, is a
 *   deadlock, reported as a launch failure (a barrier only some threads reach, a full-mask shuffle some
 *   lanes never make, an mbarrier phase that never completes). Named barriers (bar.sync and bar.arrive with
 *   an id of 1 .. 15 and a thread count) count threads per phase: bar.sync waits for its phase to complete;
 *   two counts for one phase, or arrivals left in a phase when the block ends, fail the launch.
 * - Warp operations with their PTX data layouts: __shfl_xor_sync, __shfl_sync (each lane its own source lane,
 *   taken modulo 32), ldmatrix .x4 (and .trans), and
 *   mma.sync m16n8k16 (bf16, f16) and m16n8k8 (f16, the sm_75 path). ldmatrix rows and cp.async targets
 *   must be 16-byte aligned and inside the block's dynamic shared memory, and the 8 rows of each matrix an
 *   ldmatrix reads in 8 distinct groups of 4 banks (no bank conflict).
 * - __stcg: a plain store whose address must be aligned to the stored value's size (16 bytes for a uint4);
 *   __ldcg a plain load. Stream-K's flags: a wait for one that no earlier block and no thread of this one
 *   sets is a deadlock; setting one already set fails too.
 * - Programmatic dependent launches (cudaLaunchKernelEx with programmatic stream serialization, rewritten to
 *   emu::launch_ex; sm_90 only): the blocks run after the previous launch's as any launch's do, and each
 *   thread must run griddepcontrol.wait before the global accesses the emulator sees (cp.async, the copy
 *   engine, __ldg, __stcg, prefetch) and before it ends; griddepcontrol.launch_dependents before the wait
 *   fails too (nanogpt.cu's rule: at most two kernels in flight). Plain loads and stores are not seen.
 * - cp.async: the target reads as NaN from the copy's issue until the issuing thread's wait_group lets the
 *   copy land, so reading a tile before its wait (or before the barrier after it), and refilling a buffer
 *   another warp still reads, both give NaN, which the tests catch.
 * - Dynamic shared memory is poisoned with 0xFF (NaN in every float type) before each block, and ends at
 *   an inaccessible page, so reading past what the launch asked for faults. A launch may ask for more than
 *   48 KiB only up to what cudaFuncSetAttribute allowed that kernel, as on a GPU.
 * - sm_90 (EMU_CC 90): dynamic shared memory starts at a shared address that is 16-byte aligned and no more.
 *   mbarriers count arrivals and transaction bytes per phase and complete as the PTX ISA says (an overwritten
 *   or uninitialised one, one arrival too many, or a block that ends with a phase part done, as when a
 *   count is not the arrivals each phase gets, fails the launch). The copy engine (cp.async.bulk.tensor
 *   2-D, from maps the emulated cuTensorMapEncodeTiled checked and wrote) fills boxes with zeros out of
 *   bounds and 128-byte swizzling on shared addresses; its target reads as NaN until the copy lands, which
 *   is as late as may be: one copy at a time, only while a thread waits on its barrier. Its stores (shared to
 *   global, bulk groups) read shared memory when issued and fail the launch if it has changed by the
 *   issuing thread's wait_group.read, if the thread ends without waiting, or if a lane of its warp has not
 *   fenced the async proxy since its last group. wgmma (m64nNk16,
 *   bf16/f16, operands from descriptors with 128-byte swizzling, K- or MN-major, or A from registers as
 *   mma.sync's A fragment) is collected from the 128 threads of a warpgroup and computed when one of them
 *   waits for its group, so its shared-memory operands are read as late as a GPU may read them; a thread
 *   that writes a wgmma's accumulators or A registers between its issue and that wait, or issues one without
 *   a wgmma.fence since its last wait, fails, and its A registers read as NaN (all ones) from the issue to
 *   that wait (the PTX ISA leaves reading them then undefined). setmaxnreg moves registers through the block's pool
 *   (168 a thread at launch). The layouts are those of the PTX ISA as this project reads it (the kernels'
 *   authors read the same pages): a misreading both share would not show here, only on a GPU.
 * - The runtime: one device of compute capability EMU_CC (80: bf16 and cp.async; 75: f16 with m16n8k8;
 *   90: the above, with 8 SMs so the persistent TMA kernel's blocks loop over several tiles; 86 and 89: 80's
 *   with an RTX 3090's 82 SMs and 99 KB of shared memory a block);
 *   cudaMalloc and friends are host allocations counted by cudaMemGetInfo (the no-allocation check reads
 *   it); copies are synchronous; a failed launch leaves a sticky error, as a real fault does.
 * - Stream capture (CUDA graphs): between cudaStreamBeginCapture and cudaStreamEndCapture, launches, memsets and
 *   device-to-device copies are recorded with their arguments by value (as a graph node holds them), not run; a
 *   graph's launch runs them in order, on the memory as it is then. A wait (stream or event synchronize), an event
 *   record, an allocation, a copy to or from the host, or a graph's launch during the capture fails, and so
 *   does the capture's end (cudaErrorStreamCaptureInvalidated).
 * - The async proxy (sm_90): a 16-byte chunk a thread's cp.async wrote may be an operand of a wgmma issued
 *   only after that thread's fence.proxy.async (plain stores, the kernels' zero-filled edges, are not
 *   tracked); the copy engine's writes are the async proxy's own. The copy engine may be given an mbarrier
 *   only once the thread that initialised it has run fence.mbarrier_init (or fence.proxy.async).
 * Not emulated: timing, the memory model beyond barriers, cp.async, the copy engine and those proxy fences
 *   (which plain stores a fence covers: a bulk store only asks that every lane of the issuing warp has
 *   run fence.proxy.async since the issuing thread's last bulk group), bank conflicts other than ldmatrix's,
 *   clusters.
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

#include <algorithm>
#ifdef EMU_RUNTIME
#include <functional> /* the graphs' recorded operations */
#include <memory>
#endif
#include <map>
#include <type_traits>
#include <vector>

#ifndef __noinline__ /* CUDA's headers define it for nvcc alone */
#define __noinline__ __attribute__((noinline))
#endif
#ifndef EMU_CC
#define EMU_CC 80
#endif
/* SMs: an A100's count below sm_90, so split-K and grids decide as on one; on sm_90 an H100 cut down to 8
 * SMs, so that the persistent TMA kernel's blocks each take several output tiles on the tests' shapes; on sm_86
 * and sm_89 (not in CI's runs: `EMU_CCS=86`) an RTX 3090's 82, with the 99 KB of shared memory a block those
 * have (100 KB an SM: the mma.sync matmul's 48 KB fit two blocks, its 51-60 KB before 2026-12-07 one) */
#define EMU_SMS (EMU_CC >= 90 ? 8 : EMU_CC == 86 || EMU_CC == 89 ? 82 : 108)
#define EMU_SMEM_OPTIN (EMU_CC >= 90 ? 232448 : EMU_CC == 86 || EMU_CC == 89 ? 101376 : EMU_CC >= 80 ? 166912 : 65536)
/* registers a thread, as every kernel reports them on the emulated sm_90: the TMA kernel's count under its
 * launch bounds (384 threads, one block an SM), which is what its setmaxnreg budget starts from */
#define EMU_REGS (EMU_CC >= 90 ? 168 : 64)
#define EMU_TOTAL_MEM ((size_t)8 << 30)

namespace emu {

/* ---- errors: a launch that fails leaves a sticky error, as a device fault does (state in the runtime
 * object: cuda_emu_runtime below) ----------------------------------------------------------------------- */
extern cudaError_t sticky, last;
void fail(cudaError_t e, const char *fmt, ...);
int smem_allowed(const void *kernel); /* dynamic shared memory a launch of kernel may ask for */
/* Stream capture (CUDA graphs): while the stream is captured (capture_active), a launch, copy or memset is appended to
 * the graph being recorded instead of run; a graph's launch runs them in order. capture_record appends a launch:
 * run(arg) at each of the graph's launches, destroy(arg) with the last graph that holds it. */
bool capture_active();
void capture_record(void (*run)(void *), void (*destroy)(void *), void *arg);

/* What the emulated driver's cuTensorMapEncodeTiled writes into a CUtensorMap (128 opaque bytes), and the
 * emulated copy engine reads: a 2-D tiled map of 16-bit or 32-bit floats, 128-byte swizzling, zeros out of bounds */
struct TensorMap {
    uint64_t magic;
    const unsigned char *base;
    uint64_t dims[2];   /* elements: inner, outer */
    uint64_t stride;    /* bytes from one outer index to the next */
    uint32_t box[2];    /* elements: inner, outer */
    uint32_t elem_bytes;
};
#define EMU_TENSOR_MAP_MAGIC 0x454d55544d415031ull
static_assert(sizeof(TensorMap) <= sizeof(CUtensorMap), "the emulated tensor map must fit a CUtensorMap");

} // namespace emu

#ifndef EMU_RUNTIME /* the device side: compiled into the rewritten nanogpt.cu */
namespace emu {

/* ---- threads of one block ------------------------------------------------------------------------------ */
/* POLLING: spinning on a condition another thread must make true (an mbarrier phase, a wgmma group every
 * thread of the warpgroup has committed, registers setmaxnreg waits for); run again once the ready ones wait */
enum { READY, AT_BARRIER, AT_WARP, POLLING, DONE };
struct Copy {
    void *dst;
    const void *src;
    long group; /* -1 until committed */
};
struct BulkStore {            /* a copy-engine store (cp.async.bulk.tensor, shared to global) of this thread */
    const unsigned char *src;   /* its shared memory, */
    std::vector<unsigned char> data; /* what that held when the store was issued (and what went to global memory) */
    long group;                 /* -1 until committed */
};
struct Thread {
    ucontext_t ctx; /* the coroutine's first entry (makecontext) */
    jmp_buf jb;     /* where it waits */
    uint3 tid;
    int linear, state, started;
    std::vector<Copy> copies; /* cp.async in flight */
    long committed;           /* cp.async groups committed so far */
    long wg_issued, wg_committed; /* wgmma instructions and groups this thread has issued and committed */
    long wg_released;             /* its groups [0, wg_released) it has waited for: their A registers hold their values again */
    bool wg_fenced;               /* it has run wgmma.fence since its last wgmma.wait_group (or its start) */
    bool grid_waited;             /* it has run griddepcontrol.wait */
    int regs;                     /* registers it holds (setmaxnreg) */
    std::vector<size_t> unfenced; /* sm_90: 16-byte chunks its cp.async wrote since its last fence.proxy.async */
    std::vector<BulkStore> bulk;  /* its copy-engine stores whose shared memory it has not waited to be read */
    long bulk_committed;          /* bulk groups committed so far */
    long proxy_fences;            /* fence.proxy.async it has run */
    long lane_fences[32];         /* each lane's proxy_fences when this thread last committed a bulk group */
};
/* sm_90 state of a block, all of it emptied when the block starts */
struct Mbarrier {            /* an mbarrier object in shared memory (its bytes hold a signature the emulator checks) */
    uint64_t *addr;
    int expected, pending;   /* arrivals a phase needs, and those still missing in the current one */
    long tx;                 /* transaction bytes still to come in the current phase */
    unsigned phase;          /* phases completed */
    int init_thread;         /* the thread that ran its mbarrier.init */
    bool init_fenced;        /* that thread has since run fence.mbarrier_init (or fence.proxy.async): the copy
                                engine, in the async proxy, may see the initialised barrier */
};
struct TmaCopy {             /* a copy-engine load in flight: its bytes land when a thread waits on its barrier */
    unsigned char *dst;
    std::vector<unsigned char> data;
    uint64_t *bar;
};
struct WgmmaOp {             /* one wgmma.mma_async of a warpgroup: D (64 x n) += A (64 x 16) B (16 x n) */
    uint64_t da, db;         /* da: 0 when A comes from registers */
    int f16, ta, tb, n, issued, a_regs;
    float *d[128];           /* each thread's accumulator fragment */
    uint32_t *a[128];        /* A from registers: each thread's four, which read as A_IN_FLIGHT until its wait for the group, */
    uint32_t a_held[128][4]; /* ... while this holds them (and is what the tensor cores read, as late as a GPU may) */
    uint64_t d_hash[128];    /* the accumulators when the thread issued it, */
    bool chained[128];       /* ... unless an earlier wgmma still in flight then writes the same accumulators */
};
struct WgmmaGroup {
    long first, last;        /* its ops [first, last) */
    int committed, done;
};
struct Warpgroup {
    long computed;           /* its ops [0, computed) have been computed (groups complete in order) */
    std::vector<WgmmaOp> ops;
    std::vector<WgmmaGroup> groups;
};
enum { OP_SHFL_XOR, OP_SHFL_IDX, OP_LDSM, OP_LDSM_T, OP_SYNCWARP, OP_MMA_BF16_K16, OP_MMA_F16_K16, OP_MMA_F16_K8 }; /* the mma ops last */
struct WarpSlot { /* one warp-wide operation being gathered */
    int arrived, op, param;
    uint32_t in[32][12], out[32][4];
    const void *ptr[32];
};
struct NamedBarrier { /* bar.sync / bar.arrive id: the threads of its current phase */
    int arrived, threads;
    long phase;
};
struct Block {
    uint3 idx, dim, grid;
    int nthreads, live, at_barrier, reverse, first_ready;
    std::vector<Thread> th; /* 1024 reserved at the first launch, so no Thread ever moves */
    std::vector<WarpSlot> warps;
    long events;            /* anything a thread did that could let a polling thread go on */
    std::vector<Mbarrier> mbars;
    std::vector<TmaCopy> tma;
    std::vector<Warpgroup> wgs;
    NamedBarrier named[16]; /* 0 is __syncthreads' own */
    long regs_free;         /* the block's registers that setmaxnreg.dec gave back and .inc has not taken */
    std::vector<int> unfenced; /* sm_90, per 16-byte chunk of dynamic shared memory: 1 + the thread whose cp.async
                                * wrote it and that has not fenced since (the async proxy, wgmma, may not read it
                                * yet), else 0 */
    jmp_buf sched;
    unsigned char *smem; /* dynamic shared memory: smem_bytes, ending at a guard page */
    size_t smem_bytes;
    const char *kernel;
    bool programmatic; /* launched as a programmatic dependent (cudaLaunchKernelEx, ProgrammaticStreamSerialization): its
                        * threads must run griddepcontrol.wait before touching global memory */
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
    if (state != POLLING) blk.events++;
    cur->state = state;
    if (!_setjmp(cur->jb)) _longjmp(blk.sched, 1);
}
static void complete_copies(Thread &t, long keep_groups);
static void barrier_check();
static void wgmma_check_ended();
static void bulk_check_ended();
static void block_fail(const char *fmt, ...);
static void thread_main() {
    for (;;) {
        blk.body(blk.body_arg);
        if (blk.programmatic && !cur->grid_waited)
            block_fail("ended without griddepcontrol.wait in a programmatic launch (each thread waits: the launch overlaps the previous kernel)");
        complete_copies(*cur, 0); /* copies nobody waited for land when the thread ends */
        wgmma_check_ended();
        bulk_check_ended();
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
    blk.events = 0;
    blk.mbars.clear();
    blk.tma.clear();
    blk.wgs.assign((size_t)(blk.nthreads + 127) / 128, Warpgroup());
    blk.regs_free = 0;
    for (NamedBarrier &b : blk.named) b = NamedBarrier{0, 0, 0};
    if (EMU_CC >= 90) blk.unfenced.assign(blk.smem_bytes / 16, 0);
    for (int i = 0; i < blk.nthreads; i++) {
        Thread &t = blk.th[(size_t)i];
        t.linear = i;
        t.tid = make_uint3((unsigned)i % blk.dim.x, (unsigned)i / blk.dim.x % blk.dim.y, (unsigned)i / (blk.dim.x * blk.dim.y));
        t.state = READY;
        t.copies.clear();
        t.committed = 0;
        t.wg_issued = t.wg_committed = t.wg_released = 0;
        t.wg_fenced = false;
        t.grid_waited = false;
        t.regs = EMU_REGS;
        t.unfenced.clear();
        t.bulk.clear();
        t.bulk_committed = 0;
        t.proxy_fences = 0;
        memset(t.lane_fences, 0, sizeof t.lane_fences);
    }
    long events_seen = -1; /* blk.events when the polling threads last ran */
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
        if (blk.live == 0) {
            for (int id = 1; id < 16; id++)
                if (blk.named[id].arrived) {
                    blk.failed = 1;
                    fail(cudaErrorLaunchFailure, "%s, block (%u,%u,%u): named barrier %d: %d of its %d threads arrived and the block ended", blk.kernel,
                         blk.idx.x, blk.idx.y, blk.idx.z, id, blk.named[id].arrived, blk.named[id].threads);
                    return;
                }
            for (const Mbarrier &m : blk.mbars) /* a count that is not the arrivals a phase gets shows as a phase left part done */
                if (m.pending != m.expected || m.tx != 0) {
                    blk.failed = 1;
                    fail(cudaErrorLaunchFailure,
                         "%s, block (%u,%u,%u): the mbarrier at shared offset %ld ended with a phase part done (%d of its %d arrivals, %ld "
                         "transaction bytes still to come): its count is not the arrivals each phase gets",
                         blk.kernel, blk.idx.x, blk.idx.y, blk.idx.z, (long)((unsigned char *)m.addr - blk.smem), m.expected - m.pending,
                         m.expected, m.tx);
                    return;
                }
            return;
        }
        int bar = 0, warp = 0, poll = 0;
        for (int i = 0; i < blk.nthreads; i++) {
            int st = blk.th[(size_t)i].state;
            bar += st == AT_BARRIER, warp += st == AT_WARP, poll += st == POLLING;
        }
        if (poll && blk.events != events_seen) { /* something happened since the pollers last looked: again */
            events_seen = blk.events;
            for (int i = 0; i < blk.nthreads; i++)
                if (blk.th[(size_t)i].state == POLLING) make_ready(blk.th[(size_t)i]);
            continue;
        }
        blk.failed = 1;
        for (Thread &t : blk.th) t.started = 0;
        fail(cudaErrorLaunchFailure,
             "%s, block (%u,%u,%u): deadlock: %d of %d threads at __syncthreads, %d at a warp-wide operation, %d waiting on an mbarrier, "
             "a wgmma group, registers or a named barrier, %d ended",
             blk.kernel, blk.idx.x, blk.idx.y, blk.idx.z, bar, blk.nthreads, warp, poll, blk.nthreads - blk.live);
        return;
    }
}

template <class F> static void call_body(void *f) { (*(F *)f)(); }

/* the kernel k names, or a pointer k holds (a launch through a variable): the key of its cudaFuncSetAttribute */
template <class F> static const void *kernel_address(F *k) { return (const void *)k; }

/* Runs a launch's blocks: body(body_arg) is the kernel with its arguments, in every thread of every block */
static void launch_blocks(const char *name, const void *kernel, void (*body)(void *), void *body_arg, dim3 grid, dim3 block, size_t smem,
                          bool programmatic) {
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
    blk.kernel = name;
    blk.programmatic = programmatic;
    blk.body = body;
    blk.body_arg = body_arg;
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

/* A launch recorded into a graph: its body (the [=] lambda, which holds the arguments by value, as a graph node does)
 * and its configuration */
template <class Body> struct RecordedLaunch {
    Body body;
    const char *name;
    const void *kernel;
    dim3 grid, block;
    size_t smem;
    bool programmatic;
};
template <class Body> static void run_recorded(void *p) {
    RecordedLaunch<Body> *r = (RecordedLaunch<Body> *)p;
    if (sticky != cudaSuccess) return;
    launch_blocks(r->name, r->kernel, call_body<const Body>, (void *)&r->body, r->grid, r->block, r->smem, r->programmatic);
}
template <class Body> static void delete_recorded(void *p) { delete (RecordedLaunch<Body> *)p; }

/* k<<<grid, block, smem, stream>>>(args) as emu::launch("k", emu::kernel_address(k), [=]() { k(args); }, grid, block, smem, stream);
 * programmatic: a programmatic dependent launch (launch_ex). The blocks run after the previous launch's as any
 * launch's do; what is checked is that each thread waits (griddepcontrol.wait) before its first global access
 * that the emulator sees (cp.async, the copy engine, __ldg, __stcg) and before it ends. While the stream is
 * captured, the launch is recorded instead. */
template <class F>
static void launch(const char *name, const void *kernel, F &&body, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0,
                   bool programmatic = false) {
    (void)stream;
    if (sticky != cudaSuccess) return; /* the context is dead after a fault */
    typedef typename std::decay<F>::type Body;
    if (capture_active()) {
        capture_record(run_recorded<Body>, delete_recorded<Body>, new RecordedLaunch<Body>{body, name, kernel, grid, block, smem, programmatic});
        return;
    }
    launch_blocks(name, kernel, call_body<const Body>, (void *)&body, grid, block, smem, programmatic);
}

/* cudaLaunchKernelEx(&cfg, k, args...) as emu::launch_ex("what", &cfg, k, args...): the attributes the emulator knows are
 * ProgrammaticStreamSerialization's (a programmatic launch); any other fails the launch */
template <class... Param, class... Arg>
static cudaError_t launch_ex(const char *name, const cudaLaunchConfig_t *cfg, void (*kernel)(Param...), Arg... args) {
    bool programmatic = false;
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        if (cfg->attrs[i].id != cudaLaunchAttributeProgrammaticStreamSerialization) {
            fail(cudaErrorInvalidValue, "%s: launch attribute %d, which the emulator does not know", name, (int)cfg->attrs[i].id);
            return cudaErrorInvalidValue;
        }
        programmatic = cfg->attrs[i].val.programmaticStreamSerializationAllowed != 0;
    }
    if (programmatic && EMU_CC < 90) {
        fail(cudaErrorNotSupported, "%s: a programmatic dependent launch on compute capability %d (9.0 on)", name, EMU_CC);
        return cudaErrorNotSupported;
    }
    launch(name, kernel_address(kernel), [=]() { kernel(args...); }, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, cfg->stream, programmatic);
    return cudaSuccess;
}

static void *dynamic_smem() { return blk.smem; }

/* griddepcontrol: the wait (the launch's blocks run after the previous launch's here, so it only marks the
 * thread), and launch_dependents, which nanogpt.cu's kernels run only after the wait (so at most two kernels
 * are in flight): earlier fails */
static void grid_dependency_wait() { cur->grid_waited = true; }
static void grid_dependents_launch() {
    if (!cur->grid_waited) block_fail("griddepcontrol.launch_dependents before griddepcontrol.wait");
}
/* a global access the emulator sees (what): in a programmatic launch, only after the thread's wait */
static void global_access(const char *what) {
    if (blk.programmatic && !cur->grid_waited)
        block_fail("%s before griddepcontrol.wait in a programmatic launch: the previous kernel may still be running", what);
}

/* ---- barriers and warp-wide operations --------------------------------------------------------------- */
static void syncthreads() {
    blk.at_barrier++;
    if (blk.at_barrier == blk.live) {
        barrier_check();
        return;
    }
    yield_as(AT_BARRIER);
}

/* bar.sync (wait) and bar.arrive: this thread counts toward named barrier id's phase of `threads` threads */
static void named_barrier(int id, int threads, bool wait) {
    const char *what = wait ? "bar.sync" : "bar.arrive";
    if (id < 1 || id > 15) block_fail("%s %d: named barriers are 1 .. 15 here (0 is __syncthreads')", what, id);
    if (threads < 32 || threads % 32 || threads > blk.nthreads)
        block_fail("%s %d, %d threads: a multiple of 32, at most the block's %d", what, id, threads, blk.nthreads);
    NamedBarrier &b = blk.named[id];
    if (b.arrived == 0) b.threads = threads;
    else if (b.threads != threads) block_fail("%s %d: %d threads in a phase another thread counted as %d", what, id, threads, b.threads);
    const long phase = b.phase;
    blk.events++;
    if (++b.arrived == threads) {
        b.arrived = 0;
        b.phase++;
        return;
    }
    while (wait && blk.named[id].phase == phase) yield_as(POLLING);
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

/* Shared memory serves 128 bytes a cycle from 32 banks of 4 bytes; ldmatrix reads each 8x8 matrix's eight 16-byte
 * rows at once, so without a conflict they lie in the 8 distinct groups of 4 banks, (address / 16) % 8. A
 * conflict serialises the matrix (the kernels' tiles are padded or swizzled so that none does): fail on one.
 * Groups are counted from the block's shared memory, whose start is 16-byte aligned: any start moves all alike. */
static void ldmatrix_banks_check(const WarpSlot &w) {
    for (int j = 0; j < 4; j++) {
        int lane_of_group[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
        for (int r = 0; r < 8; r++) {
            const int lane = 8 * j + r, group = (int)(((const unsigned char *)w.ptr[lane] - blk.smem) >> 4 & 7);
            if (lane_of_group[group] >= 0)
                block_fail("ldmatrix matrix %d: the rows of lanes %d and %d (shared offsets %td, %td) are in the same banks", j,
                           lane_of_group[group], lane, (const unsigned char *)w.ptr[lane_of_group[group]] - blk.smem,
                           (const unsigned char *)w.ptr[lane] - blk.smem);
            lane_of_group[group] = lane;
        }
    }
}

/* the last lane to arrive computes everyone's results */
static void warp_compute(WarpSlot &w) {
    if (w.op == OP_LDSM || w.op == OP_LDSM_T) ldmatrix_banks_check(w);
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        switch (w.op) {
        case OP_SHFL_XOR:
            memcpy(w.out[l], w.in[l ^ w.param], 8);
            break;
        case OP_SHFL_IDX: /* in: the value's 8 bytes, then the source lane */
            memcpy(w.out[l], w.in[w.in[l][2] & 31], 8);
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

template <typename V> static V shfl_idx(unsigned mask, V v, int src_lane) {
    static_assert(sizeof(V) <= 8, "shuffle of more than 8 bytes");
    if (mask != 0xffffffffu) block_fail("__shfl_sync with mask %#x (only full warps are emulated)", mask);
    uint32_t in[3] = {0, 0, (uint32_t)src_lane};
    memcpy(in, &v, sizeof v);
    const uint32_t *out = warp_op(OP_SHFL_IDX, 0, in, 3, NULL);
    V r;
    memcpy(&r, out, sizeof r);
    return r;
}

/* __syncwarp(): every lane of the warp waits for the others */
static void syncwarp() { warp_op(OP_SYNCWARP, 0, NULL, 0, NULL); }

/* p must lie in the block's dynamic shared memory, aligned (16 bytes unless said), with bytes readable */
static void check_smem(const void *p, size_t bytes, const char *what, size_t align = 16) {
    const unsigned char *c = (const unsigned char *)p;
    if (!blk.smem || c < blk.smem || c + bytes > blk.smem + blk.smem_bytes)
        block_fail("%s at %p: not inside the %zu bytes of dynamic shared memory", what, p, blk.smem_bytes);
    if ((uintptr_t)p % align) block_fail("%s at %p: not %zu-byte aligned", what, p, align);
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
        if (c.group >= 0 && c.group < limit) {
            memcpy(c.dst, c.src, 16);
            if (EMU_CC >= 90) { /* written by the generic proxy: wgmma may read it after this thread's proxy fence */
                size_t chunk = (size_t)((unsigned char *)c.dst - blk.smem) / 16;
                blk.unfenced[chunk] = t.linear + 1;
                t.unfenced.push_back(chunk);
            }
        } else {
            t.copies[kept++] = c;
        }
    }
    t.copies.resize(kept);
}
/* prefetch.global.L2: a hint, with nothing to do here */
static void prefetch_l2(const void *p) {
    (void)p;
    global_access("prefetch.global.L2");
}
static void cp_async16(void *smem, const void *gmem) {
    global_access("cp.async");
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

/* ---- sm_90: shared-memory addresses, mbarriers, the copy engine (TMA), wgmma, setmaxnreg --------------
 * Dynamic shared memory starts at shared address EMU_SMEM_BASE: 16-byte aligned and no more, so a kernel
 * that needs its tiles 1024-byte aligned must align them itself, as on a GPU. */
#define EMU_SMEM_BASE 0x410u
static void poll_wait() { yield_as(POLLING); }
static size_t cvta_shared(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (!blk.smem || c < blk.smem || c > blk.smem + blk.smem_bytes)
        block_fail("__cvta_generic_to_shared(%p): not in the block's %zu bytes of dynamic shared memory", p, blk.smem_bytes);
    return EMU_SMEM_BASE + (size_t)(c - blk.smem);
}
/* the bytes at shared address a, which must lie inside dynamic shared memory */
static unsigned char *shared_at(uint64_t a, size_t bytes, const char *what) {
    if (a < EMU_SMEM_BASE || a - EMU_SMEM_BASE + bytes > blk.smem_bytes)
        block_fail("%s: shared address %#llx (+%zu bytes) is outside dynamic shared memory [%#x, %#llx)", what, (unsigned long long)a, bytes,
                   EMU_SMEM_BASE, (unsigned long long)(EMU_SMEM_BASE + blk.smem_bytes));
    return blk.smem + (a - EMU_SMEM_BASE);
}
/* 128-byte swizzling, on shared addresses: the 16-byte chunk (bits 4..6) XOR the 128-byte row within each
 * 1024 bytes (bits 7..9), for the copy engine's writes and wgmma's reads alike */
static uint64_t swizzle128(uint64_t a) { return a ^ (((a >> 7) & 7) << 4); }

static void require_sm90(const char *what) {
    if (EMU_CC < 90) block_fail("%s on sm_%d (needs sm_90a)", what, EMU_CC);
}

/* mbarriers: expected arrivals, pending ones, transaction bytes, phase; try_wait.parity(p) is true once the
 * phase of parity p has completed (on a fresh barrier, the phase "before" it, parity 1, counts as done) */
#define EMU_MBAR_SIGNATURE 0x4d42415252494552ull
static Mbarrier &mbar_of(uint64_t *bar, const char *what) {
    require_sm90(what);
    check_smem(bar, 8, what, 8);
    for (Mbarrier &m : blk.mbars)
        if (m.addr == bar) {
            if (*bar != EMU_MBAR_SIGNATURE) block_fail("%s: the mbarrier's 8 bytes were overwritten since its init", what);
            return m;
        }
    block_fail("%s at %p: no mbarrier.init there", what, (void *)bar);
    return blk.mbars[0]; /* not reached */
}
static void mbar_try_complete(Mbarrier &m) {
    if (m.pending == 0 && m.tx == 0) {
        m.phase++;
        m.pending = m.expected;
        blk.events++;
    }
}
static void mbar_init(uint64_t *bar, unsigned count) {
    require_sm90("mbarrier.init");
    check_smem(bar, 8, "mbarrier.init", 8);
    if (count < 1 || count > (1u << 20) - 1) block_fail("mbarrier.init with count %u (1 .. 2^20 - 1)", count);
    Mbarrier *m = NULL;
    for (Mbarrier &x : blk.mbars)
        if (x.addr == bar) m = &x;
    if (!m) {
        blk.mbars.push_back(Mbarrier());
        m = &blk.mbars.back();
    }
    *m = Mbarrier{bar, (int)count, (int)count, 0, 0, cur->linear, false};
    *bar = EMU_MBAR_SIGNATURE;
    blk.events++;
}
static void mbar_arrive(uint64_t *bar) {
    Mbarrier &m = mbar_of(bar, "mbarrier.arrive");
    if (--m.pending < 0) block_fail("mbarrier.arrive: more arrivals in one phase than its count %d", m.expected);
    blk.events++;
    mbar_try_complete(m);
}
static void mbar_expect_bytes(uint64_t *bar, unsigned bytes) {
    Mbarrier &m = mbar_of(bar, "mbarrier.arrive.expect_tx");
    m.tx += bytes;
    mbar_arrive(bar);
}
/* the oldest copy in flight to this barrier lands; 0 when there is none */
static int tma_land_one(uint64_t *bar) {
    for (size_t i = 0; i < blk.tma.size(); i++)
        if (blk.tma[i].bar == bar) {
            TmaCopy c = std::move(blk.tma[i]);
            blk.tma.erase(blk.tma.begin() + (long)i);
            memcpy(c.dst, c.data.data(), c.data.size());
            size_t first = (size_t)(c.dst - blk.smem) / 16; /* written by the async proxy itself */
            std::fill(blk.unfenced.begin() + (long)first, blk.unfenced.begin() + (long)(first + c.data.size() / 16), 0);
            Mbarrier &m = mbar_of(bar, "the copy engine's complete_tx");
            m.tx -= (long)c.data.size();
            blk.events++;
            mbar_try_complete(m);
            return 1;
        }
    return 0;
}
/* The copies land as late as they may, one at a time, only while a thread waits on their barrier; the
 * waiting thread goes on as soon as its phase completes, even with copies still in flight (so a phase that
 * expects fewer bytes than its copies bring lets the consumers read the missing ones as NaN). */
static void mbar_wait(uint64_t *bar, unsigned parity) {
    if (parity > 1) block_fail("mbarrier.try_wait.parity with parity %u", parity);
    for (;;) {
        if ((mbar_of(bar, "mbarrier.try_wait.parity").phase & 1) != parity) return;
        if (!tma_land_one(bar)) poll_wait();
    }
}

/* Stream-K's flags (nanogpt.cu's flag_set, flag_wait_clear), between blocks and within one. The blocks run one
 * after another here, so a wait for a flag no thread of this block will set (one a later block would set, on
 * a GPU a wait that may hang) ends as a deadlock, which fails the launch; so does a flag set twice before the
 * waiting block cleared it. */
static void flag_set(int *flag) {
    global_access("a stream-K flag's store");
    if (*flag) block_fail("stream-K: flag %p set again before the block that waits on it cleared it", (void *)flag);
    *flag = 1;
}
static void flag_wait_clear(int *flag) {
    global_access("a stream-K flag's load");
    while (!*flag) poll_wait();
    *flag = 0;
}

/* A box of the copy engine in shared memory at smem: its map (checked), its shared address (128-byte
 * aligned, inside dynamic shared memory), the bytes of a row and of the box */
struct TmaBox {
    TensorMap tm;
    uint64_t a;
    size_t row, bytes;
};
static TmaBox tma_box(const CUtensorMap *map, const void *smem, const char *what) {
    require_sm90(what);
    TmaBox b;
    memcpy(&b.tm, map, sizeof b.tm);
    if (b.tm.magic != EMU_TENSOR_MAP_MAGIC) block_fail("%s: the tensor map was not made by cuTensorMapEncodeTiled", what);
    b.row = (size_t)b.tm.box[0] * b.tm.elem_bytes;
    b.bytes = b.row * b.tm.box[1];
    check_smem(smem, b.bytes, what);
    b.a = cvta_shared(smem);
    if (b.a % 128) block_fail("%s at shared address %#llx: not 128-byte aligned", what, (unsigned long long)b.a);
    return b;
}
/* fn(offset in the 128-byte swizzled box, global address) for each element of the box at (c0 inner, c1
 * outer) inside the tensor; those out of bounds are left out */
template <typename F> static void tma_box_elements(const TmaBox &b, int c0, int c1, F fn) {
    for (uint32_t j = 0; j < b.tm.box[1]; j++)
        for (uint32_t i = 0; i < b.tm.box[0]; i++) {
            long long x = (long long)c0 + i, y = (long long)c1 + j;
            if (x >= 0 && y >= 0 && (uint64_t)x < b.tm.dims[0] && (uint64_t)y < b.tm.dims[1])
                fn((size_t)(swizzle128(b.a + j * b.row + (size_t)i * b.tm.elem_bytes) - b.a),
                   (unsigned char *)b.tm.base + (uint64_t)y * b.tm.stride + (uint64_t)x * b.tm.elem_bytes);
        }
}
/* cp.async.bulk.tensor.2d: the box at (c0 inner, c1 outer) of the map, out-of-bounds elements zero,
 * written with 128-byte swizzling; its bytes count against the barrier's transaction count when they land.
 * Until then the destination reads as NaN. */
static void tma_load(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    global_access("cp.async.bulk.tensor");
    const TmaBox b = tma_box(map, dst, "cp.async.bulk.tensor destination");
    Mbarrier &m = mbar_of(bar, "cp.async.bulk.tensor's mbarrier");
    if (!m.init_fenced)
        block_fail("cp.async.bulk.tensor's mbarrier at shared address %#llx: thread %d's mbarrier.init was not made visible to the "
                   "async proxy (fence.mbarrier_init or fence.proxy.async) before the copy engine was given it",
                   (unsigned long long)cvta_shared(bar), m.init_thread);
    TmaCopy c;
    c.dst = (unsigned char *)dst;
    c.bar = bar;
    c.data.assign(b.bytes, 0);
    tma_box_elements(b, c0, c1, [&](size_t at, unsigned char *g) { memcpy(&c.data[at], g, b.tm.elem_bytes); });
    memset(dst, 0xFF, b.bytes);
    blk.tma.push_back(std::move(c));
    blk.events++;
}
/* cp.async.bulk.tensor.2d, shared to global: the box at (c0 inner, c1 outer) of the map from 128-byte
 * swizzled shared memory at src, elements out of bounds not written. The copy engine may read src at any
 * time until the thread's cp.async.bulk.wait_group.read lets the store go: here it is read at the issue
 * (so a lane's write still to come is missing from global memory) and compared at that wait (so a write in
 * between, into a box it may still be reading, fails the launch). */
static void tma_store(const CUtensorMap *map, int c0, int c1, const void *src) {
    global_access("cp.async.bulk.tensor (store)");
    const TmaBox b = tma_box(map, src, "cp.async.bulk.tensor (store) source");
    /* The warp's lanes write the box; each must have run fence.proxy.async since this thread's last bulk
     * group, else the copy engine may not see its writes (the emulator cannot see which plain stores went
     * where, so it asks this of every lane of the warp) */
    const int warp0 = cur->linear & ~31;
    for (int l = 0; l < 32 && warp0 + l < blk.nthreads; l++)
        if (blk.th[(size_t)(warp0 + l)].proxy_fences == cur->lane_fences[l])
            block_fail("cp.async.bulk.tensor (store) by thread %d: lane %d of its warp has not run fence.proxy.async since the thread's "
                       "last bulk group, so the copy engine may miss that lane's shared-memory writes", cur->linear, l);
    BulkStore st;
    st.src = (const unsigned char *)src;
    st.data.assign(st.src, st.src + b.bytes);
    st.group = -1;
    tma_box_elements(b, c0, c1, [&](size_t at, unsigned char *g) { memcpy(g, &st.data[at], b.tm.elem_bytes); });
    cur->bulk.push_back(std::move(st));
}
static void bulk_commit() {
    require_sm90("cp.async.bulk.commit_group");
    for (BulkStore &st : cur->bulk)
        if (st.group < 0) st.group = cur->bulk_committed;
    cur->bulk_committed++;
    const int warp0 = cur->linear & ~31;
    for (int l = 0; l < 32 && warp0 + l < blk.nthreads; l++) cur->lane_fences[l] = blk.th[(size_t)(warp0 + l)].proxy_fences;
}
/* cp.async.bulk.wait_group(.read) n: every committed group but the newest n is done with its shared memory */
static void bulk_wait(int n) {
    require_sm90("cp.async.bulk.wait_group");
    size_t kept = 0;
    for (size_t i = 0; i < cur->bulk.size(); i++) {
        BulkStore &st = cur->bulk[i];
        if (st.group >= 0 && st.group < cur->bulk_committed - n) {
            if (memcmp(st.src, st.data.data(), st.data.size()))
                block_fail("thread %d wrote the shared memory of its bulk store (shared address %#llx) before cp.async.bulk.wait_group.read "
                           "let the store go", cur->linear, (unsigned long long)cvta_shared(st.src));
        } else {
            if (kept != i) cur->bulk[kept] = std::move(st); /* not onto itself: a vector moved onto itself may come out empty */
            kept++;
        }
    }
    cur->bulk.resize(kept);
}
static void bulk_check_ended() {
    if (!cur->bulk.empty())
        block_fail("thread %d ended with %zu bulk store(s) not waited for (cp.async.bulk.wait_group): the copy engine may still read the "
                   "block's shared memory", cur->linear, cur->bulk.size());
}
/* the mbarriers this thread initialised become visible to the async proxy (the copy engine's complete_tx) */
static void fence_barrier_inits() {
    for (Mbarrier &m : blk.mbars)
        if (m.init_thread == cur->linear) m.init_fenced = true;
}
/* fence.proxy.async.shared::cta: what this thread wrote to shared memory (the emulator tracks its cp.async
 * and its mbarrier.init) becomes visible to the async proxy, wgmma's reads and the copy engine's */
static void fence_proxy_async() {
    require_sm90("fence.proxy.async");
    cur->proxy_fences++;
    for (size_t chunk : cur->unfenced)
        if (blk.unfenced[chunk] == cur->linear + 1) blk.unfenced[chunk] = 0;
    cur->unfenced.clear();
    fence_barrier_inits();
}
static void fence_mbarrier_init() {
    require_sm90("fence.mbarrier_init");
    fence_barrier_inits();
}

/* wgmma: each thread of a warpgroup issues the same instructions with its own accumulator fragment; a group
 * is computed once all 128 have committed it and one of them waits for it, so its shared-memory operands are
 * read as late as a GPU may read them, and a stage refilled before the wait gives NaN. */
static Warpgroup &my_warpgroup(const char *what) {
    require_sm90(what);
    if (blk.nthreads % 128) block_fail("%s in a block of %d threads (not whole warpgroups)", what, blk.nthreads);
    return blk.wgs[(size_t)(cur->linear / 128)];
}
static void wgmma_fence() {
    my_warpgroup("wgmma.fence");
    cur->wg_fenced = true;
}
/* the shared address of element (mn, k) of a K-major (mn_major 0) or MN-major operand, 128-byte swizzle
 * (PTX ISA, canonical layouts: K-major ((8,m),(T,2k)) : ((8T,SBO),(1,T)); MN-major ((T,8,m),(8,k)) :
 * ((1,T,LBO),(8T,SBO)); T = 8 16-bit elements, one 16-byte chunk) */
static uint64_t operand_address(uint64_t desc, int mn_major, int mn, int k) {
    uint64_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4, sbo = ((desc >> 32) & 0x3FFF) << 4;
    if ((desc >> 49) & 7) block_fail("wgmma descriptor %#llx: base offset %d (only 0 is emulated)", (unsigned long long)desc, (int)((desc >> 49) & 7));
    if ((desc >> 62) != 1) block_fail("wgmma descriptor %#llx: swizzle mode %d (only 1, 128 bytes, is emulated)", (unsigned long long)desc, (int)(desc >> 62));
    uint64_t a = mn_major ? start + (uint64_t)(mn / 64) * lbo + (uint64_t)(mn % 64) * 2 + (uint64_t)(k / 8) * sbo + (uint64_t)(k % 8) * 128
                          : start + (uint64_t)(mn / 8) * sbo + (uint64_t)(mn % 8) * 128 + (uint64_t)k * 2;
    return swizzle128(a);
}
/* Once the whole warpgroup has issued a wgmma, the tensor cores may read its operands through the async
 * proxy at any time until its wait: a cp.async write whose thread has not fenced since (fence.proxy.async,
 * after its wait) may not be seen. (The values are read at the wait, the latest moment; see below.) */
static void check_operand_visible(uint64_t desc, int mn_major, int mn_count, const char *what) {
    for (int mn = 0; mn < mn_count; mn++)
        for (int k = 0; k < 16; k++) {
            uint64_t a = operand_address(desc, mn_major, mn, k);
            int writer = blk.unfenced[(size_t)(shared_at(a, 2, what) - blk.smem) / 16];
            if (writer)
                block_fail("%s at shared address %#llx: thread %d wrote it with cp.async and had not run fence.proxy.async since "
                           "when the wgmma was issued, so the tensor cores may not see it", what, (unsigned long long)a, writer - 1);
        }
}
static void wgmma_check_visible(const WgmmaOp &op) {
    if (!op.a_regs) check_operand_visible(op.da, op.ta, 64, "wgmma operand A");
    check_operand_visible(op.db, op.tb, op.n, "wgmma operand B");
}
static uint64_t bytes_hash(const void *p, size_t n) { /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}
/* A wgmma's A registers from its issue to the wait that completes it: NaN in bf16 and f16 alike. The PTX ISA
 * leaves reading them then undefined (the tensor cores may be reading them), so a kernel that does reads this. */
static const uint32_t A_IN_FLIGHT = 0xFFFFFFFFu;
/* Registers a wgmma reads (its accumulators, its A fragment) may not be written between its issue and the
 * wait that completes it: the tensor cores read them at some moment in between. */
static void wgmma_check_registers(const WgmmaOp &op) {
    for (int t = 0; t < 128; t++) {
        if (!op.chained[t] && bytes_hash(op.d[t], sizeof(float) * (size_t)op.n / 2) != op.d_hash[t])
            block_fail("thread %d wrote the accumulators of a wgmma between its issue and the wait that completes it", t);
        for (int x = 0; op.a_regs && x < 4; x++)
            if (op.a[t][x] != A_IN_FLIGHT) block_fail("thread %d wrote the A registers of a wgmma between its issue and the wait that completes it", t);
    }
}
/* Thread t has waited for op i of wg: its A registers hold their values again, unless a later wgmma of the thread,
 * which it has not waited for, reads the same ones (a thread waits for its groups in order) */
static void wgmma_release_registers(Warpgroup &wg, long i, int t) {
    const WgmmaOp &op = wg.ops[(size_t)i];
    if (!op.a_regs) return;
    bool still_read = false;
    for (size_t j = (size_t)i + 1; j < wg.ops.size() && !still_read; j++) still_read = wg.ops[j].a[t] == op.a[t];
    if (!still_read) memcpy(op.a[t], op.a_held[t], sizeof op.a_held[t]);
}
static void wgmma_compute(WgmmaOp &op) {
    static float D[64][256];
    wgmma_check_registers(op);
    float A[64][16], B[16][256];
    float (*cvt)(uint16_t) = op.f16 ? f16_to_f : bf16_to_f;
    if (op.a_regs) { /* thread t of warp w: a[x] = (row 16w + g + 8 (x & 1), k 2q + 8 (x >> 1), +1), the lower k in the low half */
        for (int t = 0; t < 128; t++) {
            int w = t / 32, g = (t % 32) / 4, q = t % 4;
            for (int x = 0; x < 4; x++) {
                int m = 16 * w + g + (x & 1) * 8, k = 2 * q + (x >> 1) * 8;
                A[m][k] = cvt((uint16_t)(op.a_held[t][x] & 0xFFFFu));
                A[m][k + 1] = cvt((uint16_t)(op.a_held[t][x] >> 16));
            }
        }
    } else {
        for (int m = 0; m < 64; m++)
            for (int k = 0; k < 16; k++) A[m][k] = cvt(half_bits(shared_at(operand_address(op.da, op.ta, m, k), 2, "wgmma operand A")));
    }
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < op.n; n++) B[k][n] = cvt(half_bits(shared_at(operand_address(op.db, op.tb, n, k), 2, "wgmma operand B")));
    /* accumulator fragments: warp w of the warpgroup holds rows 16w .. 16w + 15; d[4i], d[4i+1] at (row g,
     * columns 8i + 2t, +1), d[4i+2], d[4i+3] at row g + 8 (g = lane / 4, t = lane % 4) */
    for (int t = 0; t < 128; t++) {
        int w = t / 32, g = (t % 32) / 4, q = t % 4;
        for (int i = 0; i < op.n / 8; i++)
            for (int e = 0; e < 4; e++) D[16 * w + g + (e >> 1) * 8][8 * i + 2 * q + (e & 1)] = op.d[t][4 * i + e];
    }
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < op.n; n++) {
            float sum = 0.0f;
            for (int k = 0; k < 16; k++) sum += A[m][k] * B[k][n];
            D[m][n] += sum;
        }
    for (int t = 0; t < 128; t++) {
        int w = t / 32, g = (t % 32) / 4, q = t % 4;
        for (int i = 0; i < op.n / 8; i++)
            for (int e = 0; e < 4; e++) op.d[t][4 * i + e] = D[16 * w + g + (e >> 1) * 8][8 * i + 2 * q + (e & 1)];
    }
}
/* one thread's wgmma.mma_async: d (n / 2 registers) += A (descriptor da, or this thread's registers a) B */
static void wgmma_issue(float *d, int n, uint64_t da, const uint32_t *a, uint64_t db, int ta, int tb, int f16) {
    Warpgroup &wg = my_warpgroup("wgmma.mma_async");
    /* its registers may have been touched since the last wait (that is what the fence orders): the PTX ISA
     * asks for wgmma.fence between such accesses and the wgmma, and these kernels fence after every wait */
    if (!cur->wg_fenced) block_fail("wgmma.mma_async without a wgmma.fence since the thread's last wgmma.wait_group (or its start)");
    long i = cur->wg_issued++;
    int a_regs = a != NULL;
    if (i == (long)wg.ops.size()) {
        WgmmaOp op;
        memset(&op, 0, sizeof op);
        op.da = da, op.db = db, op.f16 = f16, op.ta = ta, op.tb = tb, op.n = n, op.a_regs = a_regs;
        wg.ops.push_back(op);
    }
    WgmmaOp &op = wg.ops[(size_t)i];
    if (op.da != da || op.db != db || op.f16 != f16 || op.ta != ta || op.tb != tb || op.n != n || op.a_regs != a_regs)
        block_fail("threads of one warpgroup issue different wgmma.mma_async (descriptors %#llx %#llx and %#llx %#llx)",
                   (unsigned long long)op.da, (unsigned long long)op.db, (unsigned long long)da, (unsigned long long)db);
    const int t = cur->linear % 128;
    op.d[t] = d;
    op.a[t] = const_cast<uint32_t *>(a); /* the kernel's own registers, not const */
    op.d_hash[t] = bytes_hash(d, sizeof(float) * (size_t)n / 2);
    if (a) {
        const uint32_t *held = a;
        const long unreleased = cur->wg_released ? wg.groups[(size_t)cur->wg_released - 1].last : 0; /* this thread's first op not waited for */
        for (long j = unreleased; j < i; j++) /* an earlier wgmma in flight reads these too: they read A_IN_FLIGHT now, its copy holds them */
            if (wg.ops[(size_t)j].a[t] == a) {
                for (int x = 0; x < 4; x++)
                    if (a[x] != A_IN_FLIGHT) block_fail("thread %d wrote the A registers of a wgmma between its issue and the wait that completes it", t);
                held = wg.ops[(size_t)j].a_held[t];
            }
        memcpy(op.a_held[t], held, sizeof op.a_held[t]);
        for (int x = 0; x < 4; x++) op.a[t][x] = A_IN_FLIGHT;
    }
    op.chained[t] = false;
    for (long j = wg.computed; j < i; j++) /* an earlier one in flight on the same accumulators writes them first */
        if (wg.ops[(size_t)j].d[t] == d) op.chained[t] = true;
    if (++op.issued == 128) wgmma_check_visible(op);
    blk.events++;
}
template <typename T, int TA, int TB, int NREG> static void wgmma(float (&d)[NREG], uint64_t da, uint64_t db) {
    static_assert(NREG % 4 == 0 && NREG * 2 <= 256, "wgmma: n = 2 x the accumulator registers, at most 256");
    wgmma_issue(d, NREG * 2, da, NULL, db, TA, TB, std::is_same<T, __half>::value);
}
/* A from registers: the four of mma.sync m16n8k16's A fragment */
template <typename T, int TB, int NREG> static void wgmma_rs(float (&d)[NREG], const uint32_t (&a)[4], uint64_t db) {
    static_assert(NREG % 4 == 0 && NREG * 2 <= 256, "wgmma: n = 2 x the accumulator registers, at most 256");
    wgmma_issue(d, NREG * 2, 0, a, db, 0, TB, std::is_same<T, __half>::value);
}
static void wgmma_commit() {
    Warpgroup &wg = my_warpgroup("wgmma.commit_group");
    long g = cur->wg_committed++;
    long first = g ? wg.groups[(size_t)g - 1].last : 0; /* this thread committed group g - 1, so it exists */
    if (g == (long)wg.groups.size()) wg.groups.push_back(WgmmaGroup{first, cur->wg_issued, 0, 0});
    WgmmaGroup &grp = wg.groups[(size_t)g];
    if (grp.last != cur->wg_issued) block_fail("threads of one warpgroup commit different wgmma groups");
    grp.committed++;
    blk.events++;
}
/* wgmma.wait_group n: every group this thread committed but the newest n is complete */
static void wgmma_wait(int n) {
    Warpgroup &wg = my_warpgroup("wgmma.wait_group");
    cur->wg_fenced = false;
    for (long g = 0; g < cur->wg_committed - n; g++) {
        while (wg.groups[(size_t)g].committed < 128) poll_wait(); /* (others may add groups meanwhile: index, not reference) */
        if (!wg.groups[(size_t)g].done) {                          /* else another thread of the warpgroup computed it */
            for (long i = wg.groups[(size_t)g].first; i < wg.groups[(size_t)g].last; i++) wgmma_compute(wg.ops[(size_t)i]);
            wg.groups[(size_t)g].done = 1;
            wg.computed = wg.groups[(size_t)g].last;
            blk.events++;
        }
        if (g == cur->wg_released) { /* this thread's own wait lets its A registers be read again, another's does not */
            for (long i = wg.groups[(size_t)g].first; i < wg.groups[(size_t)g].last; i++) wgmma_release_registers(wg, i, cur->linear % 128);
            cur->wg_released = g + 1;
        }
    }
}
/* a thread may not end with a wgmma in flight: its accumulators would be written after it is gone */
static void wgmma_check_ended() {
    if (!cur->wg_issued) return;
    Warpgroup &wg = blk.wgs[(size_t)(cur->linear / 128)];
    if (cur->wg_committed < (long)wg.groups.size() || wg.groups.empty() || wg.groups.back().last != cur->wg_issued ||
        !wg.groups[(size_t)cur->wg_committed - 1].done)
        block_fail("the thread ends with wgmma instructions not committed or not waited for");
}

/* setmaxnreg: .dec gives registers back to the block's pool, .inc waits until the pool has them (a GPU
 * waits forever when it never will: here, a deadlock) */
static void setmaxnreg(int inc, int regs) {
    require_sm90("setmaxnreg");
    if (regs < 24 || regs > 256 || regs % 8) block_fail("setmaxnreg %d (24 .. 256, a multiple of 8)", regs);
    if (inc ? regs < cur->regs : regs > cur->regs)
        block_fail("setmaxnreg.%s %d from %d registers", inc ? "inc" : "dec", regs, cur->regs);
    if (inc)
        while (blk.regs_free < regs - cur->regs) poll_wait();
    blk.regs_free -= regs - cur->regs;
    cur->regs = regs;
    blk.events++;
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
#define __syncwarp() emu::syncwarp()
#define __shfl_xor_sync(mask, v, lane_mask) emu::shfl_xor((mask), (v), (lane_mask))
#define __shfl_sync(mask, v, src_lane) emu::shfl_idx((mask), (v), (src_lane))
template <typename V> static inline V emu_ldg(const V *p) {
    emu::global_access("__ldg");
    return *p;
}
#define __ldg(p) emu_ldg(p)
template <typename V> static inline V emu_ldcg(const V *p) {
    emu::global_access("__ldcg");
    return *p;
}
#define __ldcg(p) emu_ldcg(p)
/* a store with the L2-only hint: the store, its address aligned to the value's size as on a GPU (a 16-byte
 * vector's to 16) */
template <typename V> static inline void emu_stcg(V *p, V v) {
    emu::global_access("__stcg");
    if ((uintptr_t)p % sizeof(V)) emu::block_fail("__stcg of %zu bytes to %p, not aligned to them", sizeof(V), (void *)p);
    *p = v;
}
#define __stcg(p, v) emu_stcg((p), (v))
#define __trap() emu::block_fail("__trap()")
#define __cvta_generic_to_shared(p) emu::cvta_shared(p)
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
/* the graph being recorded (NULL: none), and whether a call the capture does not allow has spoilt it */
static std::vector<std::function<void()>> *capturing;
static bool capture_invalidated;
bool capture_active() { return capturing != NULL; }
void capture_record(void (*run)(void *), void (*destroy)(void *), void *arg) {
    std::shared_ptr<void> held(arg, destroy); /* the graph and each instance of it share the recorded launch */
    capturing->push_back([run, held]() { run(held.get()); });
}
/* a copy or memset: recorded when the stream is captured (true), else for the caller to run */
static bool capture_op(const std::function<void()> &op) {
    if (!capturing) return false;
    capturing->push_back(op);
    return true;
}
/* a call that waits for the device or allocates, which stream capture does not allow: it fails, and so does the capture */
static bool capture_refuses(const char *call) {
    if (!capturing) return false;
    fprintf(stderr, "cuda emulator: %s during stream capture (not allowed)\n", call);
    capture_invalidated = true;
    if (last == cudaSuccess) last = cudaErrorStreamCaptureUnsupported;
    return true;
}
} // namespace emu
struct CUgraph_st { std::vector<std::function<void()>> ops; };
struct CUgraphExec_st { std::vector<std::function<void()>> ops; };

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
    if (emu::capture_refuses("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
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
    (void)stream;
    if (emu::sticky) return emu::sticky;
    if (emu::capturing && kind != cudaMemcpyDeviceToDevice) { /* the graphs nanogpt.cu records copy between device buffers only */
        emu::capture_refuses("a copy to or from the host");
        return cudaErrorStreamCaptureUnsupported;
    }
    if (emu::capture_op([=]() { if (bytes) memmove(dst, src, bytes); })) return cudaSuccess;
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    (void)stream;
    if (emu::sticky) return emu::sticky;
    if (emu::capture_op([=]() { if (bytes) memset(dst, value, bytes); })) return cudaSuccess;
    if (bytes) memset(dst, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    (void)s; (void)mode;
    if (emu::sticky) return emu::sticky;
    if (emu::capturing) return emu_ret(cudaErrorIllegalState);
    emu::capturing = new std::vector<std::function<void()>>();
    emu::capture_invalidated = false;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    (void)s;
    *graph = NULL;
    if (!emu::capturing) return emu_ret(cudaErrorIllegalState);
    std::vector<std::function<void()>> *ops = emu::capturing;
    emu::capturing = NULL;
    if (emu::capture_invalidated) {
        delete ops;
        return emu_ret(cudaErrorStreamCaptureInvalidated);
    }
    *graph = new CUgraph_st{*ops};
    delete ops;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    (void)flags;
    *exec = new CUgraphExec_st{graph->ops};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    (void)s;
    if (emu::sticky) return emu::sticky;
    if (emu::capture_refuses("cudaGraphLaunch")) return cudaErrorStreamCaptureUnsupported; /* nanogpt.cu records no graph in a graph */
    for (const std::function<void()> &op : exec->ops) op();
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
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
    if (emu::capture_refuses("cudaStreamSynchronize")) return cudaErrorStreamCaptureUnsupported;
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
    if (emu::capture_refuses("cudaEventRecord")) return cudaErrorStreamCaptureUnsupported;
    return emu::sticky;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    (void)e;
    if (emu::capture_refuses("cudaEventSynchronize")) return cudaErrorStreamCaptureUnsupported;
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
    attr->numRegs = EMU_REGS;
    attr->binaryVersion = attr->ptxVersion = EMU_CC;
    return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem) {
    (void)func; (void)block;
    *n = smem > (size_t)EMU_SMEM_OPTIN ? 0 : smem > (size_t)EMU_SMEM_OPTIN / 2 ? 1 : 2;
    return cudaSuccess;
}
/* The driver's cuTensorMapEncodeTiled for what the emulator's copy engine does: 2-D maps of 16-bit or 32-bit
 * floats with 128-byte swizzling, checked against the driver's documented rules (else CUDA_ERROR_INVALID_VALUE) */
static CUresult emu_encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *addr, const cuuint64_t *dims,
                                 const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *elem_strides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                 CUtensorMapFloatOOBfill fill) {
    (void)l2;
    const char *why = NULL;
    const cuuint32_t elem = type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ? 4 : 2;
    if (type != CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
        why = "data type (only 16-bit and 32-bit floats are emulated)";
    else if (rank != 2) why = "rank (only 2 is emulated)";
    else if (!map || ((uintptr_t)map % 64)) why = "the map's address (64-byte aligned)";
    else if (!addr || (uintptr_t)addr % 16) why = "global address (16-byte aligned)";
    else if (dims[0] < 1 || dims[1] < 1 || dims[0] > (1ull << 32) || dims[1] > (1ull << 32)) why = "dimensions (1 .. 2^32)";
    else if (strides[0] % 16 || strides[0] >= (1ull << 40)) why = "row stride (a multiple of 16 bytes, below 2^40)";
    else if (box[0] < 1 || box[0] > 256 || box[1] < 1 || box[1] > 256 || (box[0] * elem) % 16) why = "box (1 .. 256 each, inner a multiple of 16 bytes)";
    else if (elem_strides[0] != 1 || elem_strides[1] != 1) why = "element strides (only 1 is emulated)";
    else if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE) why = "interleave (only none is emulated)";
    else if (swizzle != CU_TENSOR_MAP_SWIZZLE_128B) why = "swizzle (only 128 bytes is emulated)";
    else if (box[0] * elem != 128) why = "box's inner size (128 bytes with 128-byte swizzling; shorter ones are not emulated)";
    else if (fill != CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) why = "out-of-bounds fill (only zeros are emulated)";
    if (why) {
        fprintf(stderr, "cuda emulator: cuTensorMapEncodeTiled: bad %s\n", why);
        return CUDA_ERROR_INVALID_VALUE;
    }
    emu::TensorMap tm;
    memset(&tm, 0, sizeof tm);
    tm.magic = EMU_TENSOR_MAP_MAGIC;
    tm.base = (const unsigned char *)addr;
    tm.dims[0] = dims[0], tm.dims[1] = dims[1];
    tm.stride = strides[0];
    tm.box[0] = box[0], tm.box[1] = box[1];
    tm.elem_bytes = elem;
    memset(map, 0, sizeof *map);
    memcpy(map, &tm, sizeof tm);
    return CUDA_SUCCESS;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult *status) {
    (void)version; (void)flags;
    *fn = NULL;
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    if (EMU_CC >= 90 && !strcmp(symbol, "cuTensorMapEncodeTiled")) {
        *fn = (void *)emu_encode_tiled;
        if (status) *status = cudaDriverEntryPointSuccess;
    }
    return cudaSuccess;
}

#endif /* EMU_RUNTIME */

#endif /* NGPT_CUDA_EMU_H */
