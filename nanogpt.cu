/* nanogpt.cu - the CUDA backend of nanogpt: one device arena, every kernel, and the extern "C" entry points.
 *
 * The model graph in nanogpt.c calls the ops of `struct ngpt_backend` (nanogpt.h); this file fills that
 * table for the GPU. It uses the CUDA runtime and nothing else: matrix products are written here with
 * tensor-core `mma.sync` instructions (and `wgmma` on Hopper), attention is a flash-attention pair of
 * kernels, and every reduction runs in a fixed order, so the same inputs give the same bits on every run.
 *
 * Storage types: NGPT_DTYPE_BF16 (bf16 storage, fp32 math; sm_80 and newer), NGPT_DTYPE_F16 (fp16 storage
 * for sm_75, where bf16 tensor cores do not exist; the graph does dynamic loss scaling) and NGPT_DTYPE_F32
 * (fp32 everywhere with simple SIMT kernels, for debugging). Accumulation is fp32 everywhere; norm_sq adds
 * its block partials in double.
 *
 * Memory: arena_alloc makes the only cudaMalloc and the only cudaMallocHost of a run; every other buffer,
 * the reduction scratch included, is a pointer into them. No kernel allocates.
 *
 * Errors: every CUDA call goes through CU_CHECK and every launch through CU_LAUNCH, which checks it. The first
 * failure is kept in be->status / be->msg (the call, the CUDA error, file:line); nothing here prints or exits.
 *
 * Dimension letters: B batch, T time, C channels, NH heads, hs head size (C/NH), V vocabulary,
 * Vp padded vocabulary, N rows (B*T or a chunk of it), OC output channels of a matmul.
 *
 * Sections: errors and types | arena and copies | elementwise | encoder | layernorm | matmul |
 * attention | loss | optimizer | backend table and entry points.
 */
#include <cuda.h> /* CUtensorMap and its enums only: the encoder is reached through the runtime */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "nanogpt.h"

/* ======================================================================================================
 * Errors and types
 * ==================================================================================================== */

typedef struct {
    cudaStream_t stream;
    cudaEvent_t fences[NGPT_FENCES]; /* made with the stream, recorded by fence_record */
    int sm_count;
    size_t smem_optin;         /* the most dynamic shared memory one block may ask for */
    int device_sm75;           /* compute capability 7.x: the device code is sm_75's (DEVICE_SM75), the attention's layout AttnSmem's TURING */
    int use_tma;               /* 16-bit matmuls on the sm_90a TMA wgmma kernel where the operands allow it (else mma.sync); see matmul_choice */
    int direct_epilogue;       /* TMA and mma.sync tiles from the accumulators (NGPT_EPILOGUE=staged: not, to compare) */
    int tma_tile_n;            /* NGPT_TILE_N=192 or 256: every TMA product in tiles that wide (to compare); 0: chosen per product */
    int tma_pingpong;          /* NGPT_PINGPONG=1 (TMA_PINGPONG_ALL) or gelu: those TMA products on the ping-pong kernel (to compare) */
    int tiles_down_columns;    /* NGPT_TILE_ORDER=m: every 16-bit matmul's tiles down the rows of a column (to compare); 0: the
                                * order chosen per product (tiles_rows_first) */
    int splitk_most;           /* NGPT_SPLITK_MAX=1..8: at most that many split-K slices a product (to compare); 0: splitk_slices' rule */
    int fused_dbias;           /* the TMA kernel sums a weight gradient's bias gradient from its own tiles (TmColsum; NGPT_DBIAS=separate:
                                * bias_backward reads dout again, to compare) */
    int streamk;               /* weight gradients of too few tiles for the SMs in stream-K pieces (streamk_plan; NGPT_STREAMK=0: not) */
    int *streamk_ready;        /* its flags, STREAMK_FLAG_BYTES after the arena (zero between launches) */
    int use_wgmma_attention;   /* attention at hs = 64 on the sm_90a wgmma kernels: with the TMA matmul, and their registers */
    int attn_turns;            /* their two consumer warpgroups take turns (WgTurns; NGPT_ATTN_TURNS=0: not, to compare) */
    int attn_persistent;       /* the wgmma forward, dK, dV and dQ kernels on one block an SM, each walking its work items
                                * (NGPT_ATTN_PERSISTENT=0: a block an item, to compare) */
    void *encode_tensor_map;   /* the driver's cuTensorMapEncodeTiled (TMA kernel only) */
    int mm_blocks_per_sm;      /* blocks of that matmul kernel one SM runs at once (split-K's wave size) */
    int sync_each_launch;      /* NGPT_CUDA_SYNC=1: wait for every kernel (debugging: faults named by kernel) */
    int capturing;             /* between graph_begin and graph_end, recording the stream's work (a status set then is the
                                * recording's: graph_end clears it) */
    int programmatic_launch;   /* kernels launched as programmatic dependents (compute capability 9.0 on, kernels built for it;
                                * NGPT_PDL=0: not, to compare): see after_previous_kernel */
    const void *ln_bwd_kernel; /* layernorm_backward's last kernel and row width (its warps and shared memory follow from C): */
    int ln_bwd_C;              /* its blocks an SM asked once, not at each of a step's calls */
    int ln_bwd_per_sm;
    int gemv_tensor_cores;     /* 16-bit products of a few rows by gemv_tc_kernel (NGPT_GEMV=simt: gemv_kernel up to its rows, the tiled
                                * kernels beyond, to compare) */
    int loss_smem;             /* the loss keeps each row in shared memory between its passes where it fits (NGPT_LOSS_SMEM=0: not) */
    int xent_Vp;               /* the row width it was last asked for, and the shared memory that takes (0: none) */
    size_t xent_smem;
    void *dev_arena, *host_arena;
    void *scratch;             /* device scratch handed over by set_scratch, 256-byte aligned */
    size_t scratch_bytes;
} CudaImpl;
#define STREAMK_FLAG_BYTES 8192 /* 3 flags a block: stream-K runs on at most 682 SMs */

static CudaImpl *impl_of(ngpt_backend *be) { return (CudaImpl *)be->impl; }
enum { TMA_PINGPONG_ALL = 1, TMA_PINGPONG_GELU = 2 };

/* Records the first failure (sticky). */
static void cu_fail(ngpt_backend *be, int status, const char *fmt, ...) {
    if (be->status != NGPT_OK) return;
    be->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->msg, sizeof be->msg, fmt, ap);
    va_end(ap);
}

static int cu_check_(ngpt_backend *be, cudaError_t e, const char *call, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    cu_fail(be, e == cudaErrorMemoryAllocation ? NGPT_ERR_NOMEM : NGPT_ERR_DEVICE, "cuda: %s failed: %s (%s) at %s:%d", call,
            cudaGetErrorString(e), cudaGetErrorName(e), file, line);
    return 1;
}
/* The launch that just happened. A kernel's fault shows at a later call, under that call's name; with
 * NGPT_CUDA_SYNC=1 (sync_each_launch) every launch is waited for, so a fault is named by its own kernel. */
static int cu_launched_(ngpt_backend *be, const char *what, const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && impl_of(be)->sync_each_launch) e = cudaStreamSynchronize(impl_of(be)->stream);
    return cu_check_(be, e, what, file, line);
}
/* CU_CHECK(be, call) is nonzero when the call failed. */
#define CU_CHECK(be, call) cu_check_((be), (call), #call, __FILE__, __LINE__)

/* Launches kernel(args) on the backend's stream and checks the launch (cu_launched_). Where programmatic_launch is
 * set the launch is a programmatic dependent one: its blocks may be placed on the SMs while the kernel before it
 * drains its last wave, instead of after it has ended; each kernel's first statement, after_previous_kernel(),
 * holds them until that kernel has completed and its writes are visible. */
template <typename... Param, typename... Arg>
static int cu_launch_(ngpt_backend *be, const char *what, const char *file, int line, void (*kernel)(Param...), dim3 grid, dim3 block,
                      size_t smem, Arg... args) {
    CudaImpl *im = impl_of(be);
    cudaError_t e = cudaSuccess;
    if (im->programmatic_launch) {
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {grid, block, smem, im->stream, attr, 1}; /* gridDim, blockDim, dynamicSmemBytes, stream, attrs, numAttrs */
        e = cudaLaunchKernelEx(&cfg, kernel, args...);
    } else {
        kernel<<<grid, block, smem, im->stream>>>(args...);
    }
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported here, not again by the next launch's check */
        return cu_check_(be, e, what, file, line);
    }
    return cu_launched_(be, what, file, line);
}
/* CU_LAUNCH(be, "name", kernel, grid, block, shared memory bytes, args...): nonzero when the launch failed */
#define CU_LAUNCH(be, name, ...) cu_launch_((be), "launch of " name, __FILE__, __LINE__, __VA_ARGS__)

/* Programmatic dependent launch, the device side (compute capability 9.0 on). griddepcontrol.wait holds the
 * thread until the grids its launch depends on have completed and their writes are visible; before it, a kernel
 * launched programmatically may not touch memory the previous kernel writes or reads. launch_dependents lets the
 * next kernel's launch begin once every block of this one has run it (or ended). Both are no-ops in a kernel
 * launched the usual way. */
static __device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/* Every kernel's first statement, in every thread: the wait, then the next kernel's early launch. So no kernel
 * overlaps the one before it in anything but its launch and the placing of its blocks (at most two kernels are
 * in flight), and the order of the stream holds as without programmatic launches. */
static __device__ __forceinline__ void after_previous_kernel() {
    grid_dependency_wait();
    grid_dependents_launch();
}

/* Storage types: float, __nv_bfloat16 and __half; math in float. */
static __device__ __forceinline__ float to_f(float x) { return x; }
static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <typename T> static __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }

/* Runs STMT with T bound to the storage type of dtype. */
#define DISPATCH_DTYPE(dtype, T, ...)                                         \
    do {                                                                      \
        switch (dtype) {                                                      \
        case NGPT_DTYPE_BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break; \
        case NGPT_DTYPE_F16: { typedef __half T; __VA_ARGS__; } break;         \
        default: { typedef float T; __VA_ARGS__; } break;                      \
        }                                                                     \
    } while (0)

static size_t dtype_size(int dtype) { return dtype == NGPT_DTYPE_F32 ? 4 : 2; }

/* Reductions with a fixed order: the xor butterfly gives every lane the same bits. */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ double block_sum_d(double v) {
    __shared__ double s[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) s[warp] = v;
    __syncthreads();
    double r = 0;
    for (int i = 0; i < nw; i++) r += s[i];
    return r;
}

/* Grid for a grid-stride loop over n elements. */
#define EW_THREADS 256
static unsigned ew_blocks(size_t n) {
    size_t b = (n + EW_THREADS - 1) / EW_THREADS;
    return (unsigned)(b > 65536 ? 65536 : (b ? b : 1));
}
#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Argument checks: a bad shape is NGPT_ERR_ARG, not a launch with a negative grid. */
static int bad_dims(ngpt_backend *be, const char *op, long long a, long long b, long long c) {
    if (a < 0 || b < 0 || c < 0) {
        cu_fail(be, NGPT_ERR_ARG, "cuda %s: negative dimension (%lld, %lld, %lld)", op, a, b, c);
        return 1;
    }
    return 0;
}

/* The device scratch, or NULL (with NGPT_ERR_ARG) when it is smaller than an op needs. All ops run in
 * order on one stream, so each op may use the whole scratch from its start. */
static void *scratch_get(ngpt_backend *be, size_t bytes, const char *op) {
    CudaImpl *im = impl_of(be);
    if (!im->scratch || im->scratch_bytes < bytes) {
        cu_fail(be, NGPT_ERR_ARG,
                "cuda %s needs %zu bytes of scratch but set_scratch gave %zu: the shape passed to scratch_bytes must "
                "cover every call",
                op, bytes, im->scratch ? im->scratch_bytes : (size_t)0);
        return NULL;
    }
    return im->scratch;
}

/* ======================================================================================================
 * Arena and copies
 * ==================================================================================================== */

static void cu_arena_free(ngpt_backend *be) {
    CudaImpl *im = impl_of(be);
    if (im->dev_arena || im->host_arena) CU_CHECK(be, cudaStreamSynchronize(im->stream));
    if (im->dev_arena) CU_CHECK(be, cudaFree(im->dev_arena));
    if (im->host_arena) CU_CHECK(be, cudaFreeHost(im->host_arena));
    im->dev_arena = im->host_arena = NULL;
    im->streamk_ready = NULL;
    im->scratch = NULL;
    im->scratch_bytes = 0;
}

static int cu_arena_alloc(ngpt_backend *be, size_t device_bytes, void **device, size_t host_bytes, void **host) {
    CudaImpl *im = impl_of(be);
    *device = *host = NULL;
    if (im->dev_arena || im->host_arena) {
        cu_fail(be, NGPT_ERR_STATE, "cuda arena_alloc: the arena is already allocated");
        return NGPT_ERR_STATE;
    }
    const size_t flags_at = (device_bytes + 255) / 256 * 256; /* stream-K's flags after the caller's bytes */
    cudaError_t e = cudaMalloc(&im->dev_arena, flags_at + STREAMK_FLAG_BYTES);
    if (e != cudaSuccess) {
        im->dev_arena = NULL;
        cudaGetLastError();
        size_t free_b = 0, total_b = 0; /* for the message; what cudaMalloc found is the error itself */
        char mem[96] = "free memory unknown";
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            snprintf(mem, sizeof mem, "%.3f GiB free of %.3f GiB", free_b / 1073741824.0, total_b / 1073741824.0);
        else
            cudaGetLastError();
        cu_fail(be, e == cudaErrorMemoryAllocation ? NGPT_ERR_NOMEM : NGPT_ERR_DEVICE, "cuda: cudaMalloc of the %.3f GiB device arena failed: %s (%s)",
                device_bytes / 1073741824.0, cudaGetErrorString(e), mem);
        return be->status;
    }
    im->streamk_ready = (int *)((char *)im->dev_arena + flags_at);
    if (CU_CHECK(be, cudaMemsetAsync(im->streamk_ready, 0, STREAMK_FLAG_BYTES, im->stream))) {
        cu_arena_free(be);
        return be->status;
    }
    e = cudaMallocHost(&im->host_arena, host_bytes ? host_bytes : 256);
    if (e != cudaSuccess) {
        im->host_arena = NULL;
        cudaGetLastError();
        cu_fail(be, e == cudaErrorMemoryAllocation ? NGPT_ERR_NOMEM : NGPT_ERR_DEVICE,
                "cuda: cudaMallocHost of the %.3f GiB pinned host arena failed: %s", host_bytes / 1073741824.0,
                cudaGetErrorString(e));
        cu_arena_free(be); /* after the message: a failure freeing the device arena does not replace it */
        return be->status;
    }
    *device = im->dev_arena;
    *host = im->host_arena;
    return NGPT_OK;
}

/* Scratch needs per op (the largest is asked for; one op at a time uses it):
 *   layernorm_backward  up to LN_GROUPS blocks x 2C floats of dw/db partial sums
 *   matmul_backward     up to RED_GROUPS row groups x OC floats of dbias partial sums (OC <= 4C planned;
 *                       a larger OC uses fewer groups)
 *   norm_sq             NORM_BLOCKS + 1 doubles
 *   attention_decode    a 16-bit prompt's chunk at position 0: its log-sum-exp, S*NH*n floats (n <= T); without
 *                       that room, the kernel of a warp a row
 *   attention_backward  D = rowsum(dO * O): B*NH*T floats. The wgmma backward (head size 64, sm_90a) keeps
 *                       its dS^T tiles in the scratch after D (from the next 1024 bytes), as many heads at a
 *                       time as fit; where not even one head's fit, the mma.sync kernels run. So that
 *                       much more is optional: for training nanogpt.c's planner makes room for every head
 *                       (cuda_attn_ds_bytes), in the logits chunk's bytes and the scratch after them, which
 *                       the trainer hands over for the attention backward alone (use_backward_scratch).
 * nanogpt.c's planner reserves cuda_scratch_bytes(s), which must stay >= this. */
#define LN_GROUPS 512
#define RED_GROUPS 64
#define NORM_BLOCKS 1024
static size_t cu_scratch_bytes(ngpt_backend *be, const ngpt_shape *s) {
    (void)be;
    size_t C = s->C > 0 ? (size_t)s->C : 0;
    size_t ln = (size_t)LN_GROUPS * 2 * C * sizeof(float);
    size_t db = (size_t)RED_GROUPS * 4 * C * sizeof(float);
    size_t nrm = (size_t)(NORM_BLOCKS + 1) * sizeof(double);
    size_t att = (size_t)(s->B > 0 ? s->B : 0) * (size_t)(s->NH > 0 ? s->NH : 0) * (size_t)(s->T > 0 ? s->T : 0) * sizeof(float);
    size_t m = ln;
    if (db > m) m = db;
    if (nrm > m) m = nrm;
    if (att > m) m = att;
    return (m + 255) / 256 * 256 + 255; /* + the most cu_set_scratch can lose aligning the caller's pointer */
}

static void cu_set_scratch(ngpt_backend *be, void *scratch, size_t bytes) {
    CudaImpl *im = impl_of(be);
    uintptr_t p = (uintptr_t)scratch, a = (p + 255) / 256 * 256;
    if (!scratch || bytes < a - p) { im->scratch = NULL; im->scratch_bytes = 0; return; }
    im->scratch = (void *)a;
    im->scratch_bytes = bytes - (size_t)(a - p);
}

static void cu_upload(ngpt_backend *be, void *dst, const void *host_src, size_t bytes) {
    if (!bytes) return;
    CU_CHECK(be, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, impl_of(be)->stream));
}
static void cu_download(ngpt_backend *be, void *host_dst, const void *src, size_t bytes) {
    if (bytes) CU_CHECK(be, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, impl_of(be)->stream));
    CU_CHECK(be, cudaStreamSynchronize(impl_of(be)->stream));
}
static void cu_download_async(ngpt_backend *be, void *host_dst, const void *src, size_t bytes) {
    if (bytes) CU_CHECK(be, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, impl_of(be)->stream));
}
static void cu_fence_record(ngpt_backend *be, int fence) {
    CU_CHECK(be, cudaEventRecord(impl_of(be)->fences[fence], impl_of(be)->stream));
}
static void cu_fence_wait(ngpt_backend *be, int fence) { CU_CHECK(be, cudaEventSynchronize(impl_of(be)->fences[fence])); }
static void cu_sync(ngpt_backend *be) { CU_CHECK(be, cudaStreamSynchronize(impl_of(be)->stream)); }
static void cu_zero(ngpt_backend *be, void *dst, size_t bytes) {
    if (bytes) CU_CHECK(be, cudaMemsetAsync(dst, 0, bytes, impl_of(be)->stream));
}
static void cu_copy(ngpt_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes) CU_CHECK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_of(be)->stream));
}

/* Graphs (CUDA graphs): the stream's work between graph_begin and graph_end recorded, not run (stream capture),
 * and replayed by graph_launch as one launch, so that a decoding step's dozens of small kernels cost the host one
 * call, not one each. Programmatic launches are recorded as such (their edges let each kernel's blocks be placed
 * while the one before drains, as in the stream). A recording that fails (a call stream capture does not allow,
 * an op's argument error) leaves the status as it was at graph_begin: the caller runs the ops itself, and any
 * error of its own shows again there. */
static void cu_graph_begin(ngpt_backend *be) {
    CudaImpl *im = impl_of(be);
    im->capturing = 0;
    if (be->status != NGPT_OK) return;
    if (cudaStreamBeginCapture(im->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError(); /* no recording: the ops run one by one, where an error of the device's shows */
        return;
    }
    im->capturing = 1;
}
static void *cu_graph_end(ngpt_backend *be) {
    CudaImpl *im = impl_of(be);
    if (!im->capturing) return NULL;
    im->capturing = 0;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture(im->stream, &graph);
    if (e == cudaSuccess && be->status == NGPT_OK) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) (void)cudaGraphDestroy(graph);
    if (e != cudaSuccess || be->status != NGPT_OK) {
        if (exec) (void)cudaGraphExecDestroy(exec);
        (void)cudaGetLastError();
        be->status = NGPT_OK;
        be->msg[0] = '\0';
        return NULL;
    }
    return (void *)exec;
}
static void cu_graph_launch(ngpt_backend *be, void *graph) {
    CU_CHECK(be, cudaGraphLaunch((cudaGraphExec_t)graph, impl_of(be)->stream));
}
static void cu_graph_free(ngpt_backend *be, void *graph) {
    if (graph) CU_CHECK(be, cudaGraphExecDestroy((cudaGraphExec_t)graph));
}

/* ======================================================================================================
 * Elementwise: fill_normal, cast, gelu, residual, dropout
 * ==================================================================================================== */

/* VEC consecutive elements (of a row, or of an elementwise op's array), loaded and stored as one access: 16
 * bytes (VEC = 16 / sizeof(T)) where the pointers are 16-byte aligned (and, for rows, the row length is a
 * multiple of VEC), else VEC = 1 */
template <typename T, int VEC> struct alignas(VEC * sizeof(T)) RowVec { T v[VEC]; };
template <typename... P> static bool aligned16(const P *...p) { return ((0 | ... | (uintptr_t)p) & 15) == 0; }
/* Rows of C values are VEC-wide vectors: C a multiple of VEC, every row array 16-byte aligned */
template <typename T, typename... P> static bool rows_vectorizable(int C, const P *...rows) {
    return C % (16 / (int)sizeof(T)) == 0 && aligned16(rows...);
}
/* An elementwise op over n values VEC at a time: f(i, width) for the whole vectors (i = their first value,
 * width VEC), then for the n % VEC values after them one at a time (width 1) by the grid's first threads */
template <int VEC, typename F> static __device__ __forceinline__ void ew_vectors(size_t n, F f) {
    const size_t nv = n / VEC, tail = nv * VEC + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    GRID_STRIDE(i, nv) f(i * VEC, std::integral_constant<int, VEC>());
    if (VEC > 1 && tail < n) f(tail, std::integral_constant<int, 1>());
}
/* The grid of an elementwise kernel over n values, 16 bytes a thread a turn (vec) or one value */
template <typename T> static unsigned ew_vec_blocks(size_t n, bool vec) { return ew_blocks(vec ? n / (16 / sizeof(T)) : n); }

/* Box-Muller on the shared hash, the formula of nanogpt.c's normal_at. */
__global__ void fill_normal_kernel(float *dst, size_t n, float mean, float std, uint64_t seed, uint64_t stream) {
    after_previous_kernel();
    GRID_STRIDE(i, n) {
        float u1 = (float)((ngpt_hash(seed, stream, 2 * (uint64_t)i) >> 8) + 1) * (1.0f / 16777216.0f);
        float u2 = (float)(ngpt_hash(seed, stream, 2 * (uint64_t)i + 1) >> 8) * (1.0f / 16777216.0f);
        float z = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
        dst[i] = mean + std * z;
    }
}
static void cu_fill_normal(ngpt_backend *be, float *dst, size_t n, float mean, float std, uint64_t seed, uint64_t stream) {
    if (!n) return;
    CU_LAUNCH(be, "fill_normal_kernel", fill_normal_kernel, ew_blocks(n), EW_THREADS, 0, dst, n, mean, std, seed, stream);
}

template <typename T> __global__ void cast_kernel(T *dst, const float *src, size_t n) {
    after_previous_kernel();
    GRID_STRIDE(i, n) dst[i] = from_f<T>(src[i]);
}
static void cu_cast_from_f32(ngpt_backend *be, void *dst, const float *src, size_t n) {
    if (!n || (be->dtype == NGPT_DTYPE_F32 && dst == (const void *)src)) return;
    DISPATCH_DTYPE(be->dtype, T, CU_LAUNCH(be, "cast_kernel", cast_kernel<T>, ew_blocks(n), EW_THREADS, 0, (T *)dst, src, n));
}

#define GELU_SCALE 0.70710678118654752f   /* 1/sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143268f /* 1/sqrt(2 pi) */
/* exact GELU and its derivative; the matmul epilogues use the same two, so fused and separate agree bit for bit */
static __device__ __forceinline__ float gelu_of(float x) { return 0.5f * x * (1.0f + erff(x * GELU_SCALE)); }
static __device__ __forceinline__ float gelu_grad(float x) {
    float cdf = 0.5f * (1.0f + erff(x * GELU_SCALE)), pdf = INV_SQRT_2PI * expf(-0.5f * x * x);
    return cdf + x * pdf;
}
/* out may alias inp, and in the backward dinp may alias dout: each vector is read, then written, by the same thread */
template <typename T, int VEC> __global__ void gelu_forward_kernel(T *out, const T *inp, size_t n) {
    after_previous_kernel();
    ew_vectors<VEC>(n, [&](size_t i, auto width) {
        constexpr int W = decltype(width)::value;
        typedef RowVec<T, W> V;
        V x = *(const V *)(inp + i);
#pragma unroll
        for (int e = 0; e < W; e++) x.v[e] = from_f<T>(gelu_of(to_f(x.v[e])));
        *(V *)(out + i) = x;
    });
}
template <typename T, int VEC> __global__ void gelu_backward_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    after_previous_kernel();
    ew_vectors<VEC>(n, [&](size_t i, auto width) {
        constexpr int W = decltype(width)::value;
        typedef RowVec<T, W> V;
        const V x = *(const V *)(inp + i);
        V g = *(const V *)(dout + i);
#pragma unroll
        for (int e = 0; e < W; e++) g.v[e] = from_f<T>(to_f(g.v[e]) * gelu_grad(to_f(x.v[e])));
        *(V *)(dinp + i) = g;
    });
}
static void cu_gelu_forward(ngpt_backend *be, void *out, const void *inp, size_t n) {
    if (!n) return;
    const bool vec = aligned16(out, inp);
    DISPATCH_DTYPE(be->dtype, T, {
        auto *kernel = vec ? gelu_forward_kernel<T, 16 / sizeof(T)> : gelu_forward_kernel<T, 1>;
        CU_LAUNCH(be, "gelu_forward_kernel", kernel, ew_vec_blocks<T>(n, vec), EW_THREADS, 0, (T *)out, (const T *)inp, n);
    });
}
static void cu_gelu_backward(ngpt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    if (!n) return;
    const bool vec = aligned16(dinp, inp, dout);
    DISPATCH_DTYPE(be->dtype, T, {
        auto *kernel = vec ? gelu_backward_kernel<T, 16 / sizeof(T)> : gelu_backward_kernel<T, 1>;
        CU_LAUNCH(be, "gelu_backward_kernel", kernel, ew_vec_blocks<T>(n, vec), EW_THREADS, 0, (T *)dinp, (const T *)inp, (const T *)dout, n);
    });
}

template <typename T, int VEC> __global__ void residual_kernel(T *out, const T *a, const T *b, size_t n) {
    after_previous_kernel();
    ew_vectors<VEC>(n, [&](size_t i, auto width) {
        constexpr int W = decltype(width)::value;
        typedef RowVec<T, W> V;
        V x = *(const V *)(a + i);
        const V y = *(const V *)(b + i);
#pragma unroll
        for (int e = 0; e < W; e++) x.v[e] = from_f<T>(to_f(x.v[e]) + to_f(y.v[e]));
        *(V *)(out + i) = x;
    });
}
static void cu_residual_forward(ngpt_backend *be, void *out, const void *a, const void *b, size_t n) {
    if (!n) return;
    const bool vec = aligned16(out, a, b);
    DISPATCH_DTYPE(be->dtype, T, {
        auto *kernel = vec ? residual_kernel<T, 16 / sizeof(T)> : residual_kernel<T, 1>;
        CU_LAUNCH(be, "residual_kernel", kernel, ew_vec_blocks<T>(n, vec), EW_THREADS, 0, (T *)out, (const T *)a, (const T *)b, n);
    });
}

/* A dropout site on the device: element i is kept when ngpt_uniform(seed, stream, offset + i) >= p. */
typedef struct {
    float p, inv_keep; /* p = 0: no dropout; inv_keep = 1/(1-p) */
    uint64_t seed, stream, offset;
} DropArgs;
static float keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }
static DropArgs drop_args(const ngpt_dropout *d) {
    DropArgs a = {0.0f, 1.0f, 0, 0, 0};
    if (d && d->p > 0) { a.p = d->p; a.inv_keep = keep_scale(d->p); a.seed = d->seed; a.stream = d->stream; a.offset = d->offset; }
    return a;
}
/* 0 or 1/(1-p) for element i of a dropout site */
static __device__ __forceinline__ float drop_factor(const DropArgs &d, uint64_t i) {
    return ngpt_uniform(d.seed, d.stream, d.offset + i) >= d.p ? d.inv_keep : 0.0f;
}

template <typename T> __global__ void dropout_kernel(T *out, const T *inp, size_t n, DropArgs dr) {
    after_previous_kernel();
    GRID_STRIDE(i, n) out[i] = from_f<T>(to_f(inp[i]) * drop_factor(dr, i));
}
static void cu_dropout(ngpt_backend *be, void *out, const void *inp, size_t n, const ngpt_dropout *drop) {
    if (!n) return;
    if (!drop || drop->p <= 0) {
        if (out != inp) CU_CHECK(be, cudaMemcpyAsync(out, inp, n * dtype_size(be->dtype), cudaMemcpyDeviceToDevice, impl_of(be)->stream));
        return;
    }
    DropArgs dr = drop_args(drop);
    DISPATCH_DTYPE(be->dtype, T, CU_LAUNCH(be, "dropout_kernel", dropout_kernel<T>, ew_blocks(n), EW_THREADS, 0, (T *)out, (const T *)inp, n, dr));
}

/* ======================================================================================================
 * Encoder: token + position embeddings, and their deterministic backward
 * ==================================================================================================== */

/* Each thread one vector of VEC values of a row: 16 bytes where C is a multiple of that and the arrays are
 * 16-byte aligned, else one value */
template <typename T, int VEC> __global__ void encoder_forward_kernel(T *out, const int32_t *tokens, const T *wte, const T *wpe, int B, int T_, int C) {
    after_previous_kernel();
    typedef RowVec<T, VEC> V;
    const int cv = C / VEC; /* vectors a row */
    GRID_STRIDE(i, (size_t)B * T_ * cv) {
        const size_t row = i / (size_t)cv;
        const int c = (int)(i - row * cv) * VEC, t = (int)(row % (size_t)T_);
        const V e = *(const V *)(wte + (size_t)tokens[row] * C + c), p = *(const V *)(wpe + (size_t)t * C + c);
        V o;
#pragma unroll
        for (int k = 0; k < VEC; k++) o.v[k] = from_f<T>(to_f(e.v[k]) + to_f(p.v[k]));
        *(V *)(out + row * C + c) = o;
    }
}

#define ENC_BWD_WARPS 8 /* buckets a block */
#define ENC_BWD_LOADS 8 /* dout rows in flight a lane (a divisor of 32) */
/* dwte: a warp per (bucket, 32 VEC columns): a bucket is a distinct token id, so no two warps touch one
 * element. Each lane adds its VEC columns of the bucket's dout rows in ascending position order, starting from
 * the old value as the CPU backend does; the warp reads 32 of the bucket's positions at a time (one a lane,
 * handed round by shuffles) and keeps ENC_BWD_LOADS rows' loads in flight: a frequent token's bucket (hundreds
 * of rows in real text) costs a few dozen latencies, not two a row. */
template <typename T, int VEC>
__global__ void __launch_bounds__(ENC_BWD_WARPS * 32) encoder_backward_wte_kernel(T *dwte, const T *dout, const int32_t *tokens,
                                                                                 const int32_t *bucket_start, const int32_t *bucket_pos,
                                                                                 int nbuckets, int C) {
    after_previous_kernel();
    typedef RowVec<T, VEC> V;
    const int k = blockIdx.x * ENC_BWD_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31, c = (blockIdx.y * 32 + lane) * VEC;
    if (k >= nbuckets) return; /* the whole warp */
    const int first = bucket_start[k], last = bucket_start[k + 1];
    if (first >= last) return;
    const bool mine = c < C; /* this lane has columns (every lane takes part in the shuffles) */
    T *dst = dwte + (size_t)tokens[bucket_pos[first]] * C + c;
    const V old = mine ? *(const V *)dst : V();
    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; e++) acc[e] = to_f(old.v[e]);
    for (int j0 = first; j0 < last; j0 += 32) {
        const int rows = last - j0 < 32 ? last - j0 : 32, pos = lane < rows ? bucket_pos[j0 + lane] : 0;
        for (int u0 = 0; u0 < rows; u0 += ENC_BWD_LOADS) {
            V g[ENC_BWD_LOADS];
#pragma unroll
            for (int u = 0; u < ENC_BWD_LOADS; u++) {
                const int p = __shfl_sync(0xffffffffu, pos, u0 + u);
                if (mine && u0 + u < rows) g[u] = *(const V *)(dout + (size_t)p * C + c);
            }
#pragma unroll
            for (int u = 0; u < ENC_BWD_LOADS; u++)
                if (mine && u0 + u < rows)
#pragma unroll
                    for (int e = 0; e < VEC; e++) acc[e] += to_f(g[u].v[e]);
        }
    }
    if (mine) {
        V o;
#pragma unroll
        for (int e = 0; e < VEC; e++) o.v[e] = from_f<T>(acc[e]);
        *(V *)dst = o;
    }
}
/* dwpe: one thread per VEC-wide vector of (t, c), adding over b in order */
template <typename T, int VEC> __global__ void encoder_backward_wpe_kernel(T *dwpe, const T *dout, int B, int T_, int C) {
    after_previous_kernel();
    typedef RowVec<T, VEC> V;
    const size_t n = (size_t)T_ * C;
    GRID_STRIDE(i, n / VEC) {
        const V old = *(const V *)(dwpe + i * VEC);
        float acc[VEC];
#pragma unroll
        for (int e = 0; e < VEC; e++) acc[e] = to_f(old.v[e]);
#pragma unroll 4
        for (int b = 0; b < B; b++) {
            const V g = *(const V *)(dout + (size_t)b * n + i * VEC);
#pragma unroll
            for (int e = 0; e < VEC; e++) acc[e] += to_f(g.v[e]);
        }
        V o;
#pragma unroll
        for (int e = 0; e < VEC; e++) o.v[e] = from_f<T>(acc[e]);
        *(V *)(dwpe + i * VEC) = o;
    }
}

static void cu_encoder_forward(ngpt_backend *be, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C) {
    if (bad_dims(be, "encoder_forward", B, T, C)) return;
    size_t n = (size_t)B * T * C;
    if (!n) return;
    DISPATCH_DTYPE(be->dtype, Ty, {
        const bool vec = rows_vectorizable<Ty>(C, out, wte, wpe);
        auto *kernel = vec ? encoder_forward_kernel<Ty, 16 / sizeof(Ty)> : encoder_forward_kernel<Ty, 1>;
        CU_LAUNCH(be, "encoder_forward_kernel", kernel, ew_vec_blocks<Ty>(n, vec), EW_THREADS, 0, (Ty *)out, tokens, (const Ty *)wte, (const Ty *)wpe,
                  B, T, C);
    });
}
static void cu_encoder_backward(ngpt_backend *be, void *dwte, void *dwpe, const void *dout, const int32_t *tokens, const int32_t *bucket_start,
                                const int32_t *bucket_pos, int nbuckets, int B, int T, int C) {
    if (bad_dims(be, "encoder_backward", B, T, C) || bad_dims(be, "encoder_backward", nbuckets, 0, 0)) return;
    if (!B || !T || !C) return;
    DISPATCH_DTYPE(be->dtype, Ty, {
        constexpr int VEC = 16 / sizeof(Ty);
        if (nbuckets > 0) {
            const int width = rows_vectorizable<Ty>(C, dwte, dout) ? VEC : 1; /* a lane's columns */
            auto *kernel = width > 1 ? encoder_backward_wte_kernel<Ty, VEC> : encoder_backward_wte_kernel<Ty, 1>;
            const dim3 grid((unsigned)((nbuckets + ENC_BWD_WARPS - 1) / ENC_BWD_WARPS), (unsigned)((C + 32 * width - 1) / (32 * width)));
            CU_LAUNCH(be, "encoder_backward_wte_kernel", kernel, grid, ENC_BWD_WARPS * 32, 0, (Ty *)dwte, (const Ty *)dout, tokens, bucket_start,
                      bucket_pos, nbuckets, C);
        }
        const bool vec = rows_vectorizable<Ty>(C, dwpe, dout);
        auto *kernel = vec ? encoder_backward_wpe_kernel<Ty, VEC> : encoder_backward_wpe_kernel<Ty, 1>;
        CU_LAUNCH(be, "encoder_backward_wpe_kernel", kernel, ew_vec_blocks<Ty>((size_t)T * C, vec), EW_THREADS, 0, (Ty *)dwpe, (const Ty *)dout, B, T,
                  C);
    });
}

/* ======================================================================================================
 * LayerNorm (eps 1e-5): forward one warp per row; backward one warp per row too, with per-block dw/db
 * partial sums in scratch, added in block order by a second kernel.
 * ==================================================================================================== */

#define LN_EPS 1e-5f
#define LN_FWD_ROWS 8 /* warps (rows) per block */
/* the register kernels' most vectors a lane, forward and backward: rows of up to 8 x 32 x VEC columns (2048
 * in 16 bits, 1024 in f32) */
#define LN_MAX_NV 8
/* A row of C values in a warp's registers: lane l loads columns (l + 32 j) VEC .. + VEC - 1 for j < NV (the
 * vectors past C masked), all NV loads in flight at once. The row's mean and 1 / standard deviation from them:
 * two sums over the registers (each lane's in column order, then the warp's), the variance about the mean. The
 * LayerNorm kernel and the gemv that normalizes its rows (gemv_tc_kernel<T, true>) share these and ln_value, so
 * they give the same bits. */
template <typename T, int VEC, int NV>
static __device__ __forceinline__ void ln_load_row(RowVec<T, VEC> (&xv)[NV], const T *x, int C, int lane) {
#pragma unroll
    for (int j = 0; j < NV; j++)
        if ((lane + 32 * j) * VEC < C) xv[j] = *(const RowVec<T, VEC> *)(x + (lane + 32 * j) * VEC);
}
template <typename T, int VEC, int NV> static __device__ __forceinline__ float2 ln_row_stats(const RowVec<T, VEC> (&xv)[NV], int C, int lane) {
    float s = 0;
#pragma unroll
    for (int j = 0; j < NV; j++)
        if ((lane + 32 * j) * VEC < C)
#pragma unroll
            for (int e = 0; e < VEC; e++) s += to_f(xv[j].v[e]);
    const float m = warp_sum(s) / (float)C;
    float v = 0;
#pragma unroll
    for (int j = 0; j < NV; j++)
        if ((lane + 32 * j) * VEC < C)
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                const float d = to_f(xv[j].v[e]) - m;
                v += d * d;
            }
    return make_float2(m, 1.0f / sqrtf(warp_sum(v) / (float)C + LN_EPS));
}
static __device__ __forceinline__ float ln_value(float x, float m, float rs, float w, float b) { return (x - m) * rs * w + b; }
/* One warp per row, the row in registers (ln_load_row, ln_row_stats), then the output. */
template <typename T, int VEC, int NV>
__global__ void layernorm_forward_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N, int C) {
    after_previous_kernel();
    typedef RowVec<T, VEC> V;
    const int row = blockIdx.x * LN_FWD_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    V xv[NV];
    ln_load_row<T, VEC, NV>(xv, inp + (size_t)row * C, C, lane);
    const float2 stats = ln_row_stats<T, VEC, NV>(xv, C, lane);
    const float m = stats.x, rs = stats.y;
    T *o = out + (size_t)row * C;
#pragma unroll
    for (int j = 0; j < NV; j++) {
        const int c = (lane + 32 * j) * VEC;
        if (c >= C) continue;
        const V wv = *(const V *)(w + c);
        const V bv = b ? *(const V *)(b + c) : V();
        V ov;
#pragma unroll
        for (int e = 0; e < VEC; e++) ov.v[e] = from_f<T>(ln_value(to_f(xv[j].v[e]), m, rs, to_f(wv.v[e]), b ? to_f(bv.v[e]) : 0.0f));
        *(V *)(o + c) = ov;
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}
/* The fallback for rows that are not 16-byte vectors or are longer than the register kernel takes: the same
 * warp a row and sums, one element at a time, reading the row three times. */
template <typename T>
__global__ void layernorm_forward_any_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w, const T *b, int N, int C) {
    after_previous_kernel();
    const int row = blockIdx.x * LN_FWD_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) s += to_f(x[c]);
    const float m = warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane; c < C; c += 32) {
        const float d = to_f(x[c]) - m;
        v += d * d;
    }
    const float rs = 1.0f / sqrtf(warp_sum(v) / (float)C + LN_EPS);
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) o[c] = from_f<T>((to_f(x[c]) - m) * rs * to_f(w[c]) + (b ? to_f(b[c]) : 0.0f));
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}

#define LN_BWD_WARPS 8 /* warps per block, fewer where their dw/db sums (2C floats each) do not fit in shared memory */
/* The end of both backward kernels: each warp's dw/db sums are in its 2C floats of shared memory; the block
 * adds them in warp order into partial[blockIdx.x] */
static __device__ __forceinline__ void ln_block_partial(float *partial, const float *sums, int W, int C) {
    __syncthreads(); /* every warp's sums are complete */
    float *p = partial + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        float sum = 0.0f;
        for (int k = 0; k < W; k++) sum += sums[(size_t)k * 2 * C + c];
        p[c] = sum;
    }
}
/* One warp per row: warp w of block g takes rows g W + w, g W + w + G W, ... (W warps a block, G blocks);
 * lane l holds columns (l + 32 j) VEC .. + VEC - 1 for j < NV, the vectors past C masked. Each row is read
 * once: its x, dout and dinp slices stay in registers between the two sums (by shuffles) and the update.
 * A warp adds its rows' dw/db terms into its own 2C floats of shared memory, 16 bytes at a time (each column
 * always by the same lane, rows in order); at the end the block adds its warps' sums in warp order into
 * partial[g], and layernorm_reduce_kernel adds the blocks in a fixed order: the same bits on every run. */
template <typename T, int VEC, int NV>
__global__ void __launch_bounds__(LN_BWD_WARPS * 32) layernorm_backward_kernel(T *dinp, float *partial, const T *dout, const T *inp, const T *w,
                                                                               const float *mean, const float *rstd, int N, int C, int G) {
    after_previous_kernel();
    extern __shared__ float4 ln_smem4[]; /* per warp: dw sums [C], db sums [C]; C % 4 == 0 */
    typedef RowVec<T, VEC> V;
    const int W = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *sums = (float *)ln_smem4, *sdw = sums + (size_t)warp * 2 * C, *sdb = sdw + C;
    for (int c = lane; c < 2 * C; c += 32) sdw[c] = 0.0f;
    __syncwarp(); /* zeroed by lane c % 32, added to below by the lane that owns the column */
    for (int row = blockIdx.x * W + warp; row < N; row += G * W) {
        const T *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        T *dx = dinp + (size_t)row * C;
        const float m = mean[row], rs = rstd[row];
        V xv[NV], gv[NV], dv[NV];
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = (lane + 32 * j) * VEC;
            if (c < C) {
                xv[j] = *(const V *)(x + c);
                gv[j] = *(const V *)(dy + c);
                dv[j] = *(const V *)(dx + c);
            }
        }
        float a = 0.0f, bs = 0.0f;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = (lane + 32 * j) * VEC;
            if (c >= C) continue;
            const V wv = *(const V *)(w + c);
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                const float xn = (to_f(xv[j].v[e]) - m) * rs, dn = to_f(gv[j].v[e]) * to_f(wv.v[e]);
                a += dn;
                bs += dn * xn;
            }
        }
        const float dnorm_mean = warp_sum(a) / (float)C, dnorm_norm_mean = warp_sum(bs) / (float)C;
#pragma unroll
        for (int j = 0; j < NV; j++) {
            const int c = (lane + 32 * j) * VEC;
            if (c >= C) continue;
            const V wv = *(const V *)(w + c);
#pragma unroll
            for (int q = 0; q < VEC; q += 4) {
                float4 sw = *(float4 *)(sdw + c + q), sb = *(float4 *)(sdb + c + q);
                float *pw = &sw.x, *pb = &sb.x;
#pragma unroll
                for (int e = q; e < q + 4; e++) {
                    const float g = to_f(gv[j].v[e]), xn = (to_f(xv[j].v[e]) - m) * rs, dn = g * to_f(wv.v[e]);
                    dv[j].v[e] = from_f<T>(to_f(dv[j].v[e]) + (dn - dnorm_mean - xn * dnorm_norm_mean) * rs);
                    pw[e - q] += g * xn;
                    pb[e - q] += g;
                }
                *(float4 *)(sdw + c + q) = sw;
                *(float4 *)(sdb + c + q) = sb;
            }
            *(V *)(dx + c) = dv[j];
        }
    }
    ln_block_partial(partial, sums, W, C);
}
/* The fallback for rows that are not 16-byte vectors or are longer than the register kernel takes: the same
 * rows a warp and the same sums, each lane adding its columns' dw/db terms into its warp's shared memory. */
template <typename T>
__global__ void __launch_bounds__(LN_BWD_WARPS * 32) layernorm_backward_any_kernel(T *dinp, float *partial, const T *dout, const T *inp, const T *w,
                                                                                   const float *mean, const float *rstd, int N, int C, int G) {
    after_previous_kernel();
    extern __shared__ float ln_smem[]; /* per warp: dw sums [C], db sums [C] */
    const int W = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *sdw = ln_smem + (size_t)warp * 2 * C, *sdb = sdw + C;
    for (int c = lane; c < 2 * C; c += 32) sdw[c] = 0.0f;
    __syncwarp(); /* zeroed by lane c % 32, added to below by the lane that owns the column */
    for (int row = blockIdx.x * W + warp; row < N; row += G * W) {
        const T *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        const float m = mean[row], rs = rstd[row];
        float a = 0.0f, bs = 0.0f;
        for (int c = lane; c < C; c += 32) {
            const float xn = (to_f(x[c]) - m) * rs, dn = to_f(dy[c]) * to_f(w[c]);
            a += dn;
            bs += dn * xn;
        }
        const float dnorm_mean = warp_sum(a) / (float)C, dnorm_norm_mean = warp_sum(bs) / (float)C;
        T *dx = dinp + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            const float g = to_f(dy[c]), xn = (to_f(x[c]) - m) * rs, dn = g * to_f(w[c]);
            dx[c] = from_f<T>(to_f(dx[c]) + (dn - dnorm_mean - xn * dnorm_norm_mean) * rs);
            sdw[c] += g * xn;
            sdb[c] += g;
        }
    }
    ln_block_partial(partial, ln_smem, W, C);
}
#define LN_REDUCE_WARPS 16
#define LN_REDUCE_LOADS 8 /* loads in flight a lane */
/* dw[c] += the G blocks' sums, db[c] too: each block 32 of the 2C columns of the partial sums (dw's, then db's),
 * warp k adding groups k, k + 16, k + 32, ... in order, LN_REDUCE_LOADS of them in flight at a time (the
 * partial sums are in the L2, just written by the backward: a turn costs about one L2 latency), then warp 0 the
 * warps' sums in order */
template <typename T> __global__ void __launch_bounds__(LN_REDUCE_WARPS * 32) layernorm_reduce_kernel(T *dw, T *db, const float *partial, int C, int G) {
    after_previous_kernel();
    __shared__ float sums[LN_REDUCE_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, c = blockIdx.x * 32 + lane;
    float s = 0;
    if (c < 2 * C)
        for (int g0 = warp; g0 < G; g0 += LN_REDUCE_LOADS * LN_REDUCE_WARPS) {
            float v[LN_REDUCE_LOADS];
#pragma unroll
            for (int i = 0; i < LN_REDUCE_LOADS; i++) {
                const int g = g0 + i * LN_REDUCE_WARPS;
                v[i] = g < G ? partial[(size_t)g * 2 * C + c] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < LN_REDUCE_LOADS; i++) s += v[i];
        }
    sums[warp][lane] = s;
    __syncthreads();
    if (warp || c >= 2 * C) return;
    s = 0;
    for (int k = 0; k < LN_REDUCE_WARPS; k++) s += sums[k][lane];
    T *out = c < C ? (dw ? dw + c : NULL) : (db ? db + (c - C) : NULL);
    if (out) *out = from_f<T>(to_f(*out) + s);
}

/* The register kernels' builds, forward and backward: f(LnVectors<NV>()) for the least NV of 1, 2, 3, 4, 6 and
 * LN_MAX_NV that holds nv vectors a lane (nv <= LN_MAX_NV) */
template <int NV> struct LnVectors {
    static constexpr int value = NV;
};
template <typename F> static void ln_by_vectors(int nv, F f) {
    if (nv == 1) f(LnVectors<1>());
    else if (nv == 2) f(LnVectors<2>());
    else if (nv == 3) f(LnVectors<3>());
    else if (nv == 4) f(LnVectors<4>());
    else if (nv <= 6) f(LnVectors<6>());
    else f(LnVectors<LN_MAX_NV>());
}

/* Rows the register kernels take: 16-byte vectors, at most LN_MAX_NV of them a lane */
template <typename T> static bool ln_rows_in_registers(int C, const void *out, const void *inp, const void *w, const void *b) {
    return rows_vectorizable<T>(C, out, inp, w, b) && (C / (16 / (int)sizeof(T)) + 31) / 32 <= LN_MAX_NV;
}

static void cu_layernorm_forward(ngpt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    if (bad_dims(be, "layernorm_forward", N, C, 0) || !N || !C) return;
    unsigned blocks = (unsigned)((N + LN_FWD_ROWS - 1) / LN_FWD_ROWS);
    DISPATCH_DTYPE(be->dtype, T, {
        constexpr int VEC = 16 / sizeof(T);
        auto *kernel = layernorm_forward_any_kernel<T>;
        if (ln_rows_in_registers<T>(C, out, inp, w, b))
            ln_by_vectors((C / VEC + 31) / 32, [&](auto k) { kernel = layernorm_forward_kernel<T, VEC, decltype(k)::value>; });
        CU_LAUNCH(be, "layernorm_forward_kernel", kernel, blocks, 32 * LN_FWD_ROWS, 0, (T *)out, mean, rstd, (const T *)inp, (const T *)w,
                  (const T *)b, N, C);
    });
}

/* The backward: the register kernel where the rows are 16-byte vectors of at most LN_MAX_NV a lane,
 * else the fallback; G blocks (the SMs times the blocks each holds, at most LN_GROUPS, at most one per W
 * rows), then the reduction of their G partial sums into dw, db. */
template <typename T>
static void layernorm_backward_t(ngpt_backend *be, T *dinp, T *dw, T *db, const T *dout, const T *inp, const T *w, const float *mean,
                                 const float *rstd, int N, int C) {
    CudaImpl *im = impl_of(be);
    const size_t per_warp = (size_t)2 * C * sizeof(float);
    if (per_warp > im->smem_optin) {
        cu_fail(be, NGPT_ERR_ARG, "cuda layernorm_backward: C = %d needs %zu bytes of shared memory per warp; this GPU gives %zu a block", C,
                per_warp, im->smem_optin);
        return;
    }
    int W = LN_BWD_WARPS;
    while (W > 1 && W * per_warp > im->smem_optin) W--;
    const size_t smem = W * per_warp;
    int G = 0;
    float *partial = NULL;
    auto launch = [&](auto *kernel) { /* false on failure */
        /* the limit is the kernel's in the whole process, not this backend's: set to the device's most, the one value
         * every trainer sets (set to each row width's need, two trainers on two host threads could lower it between
         * another's setting and its launch); a host call, no GPU work */
        if (smem > 48 * 1024 &&
            CU_CHECK(be, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)im->smem_optin)))
            return false;
        if (im->ln_bwd_kernel != (const void *)kernel || im->ln_bwd_C != C) {
            int n = 0;
            if (CU_CHECK(be, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * W, smem))) return false;
            im->ln_bwd_kernel = (const void *)kernel;
            im->ln_bwd_C = C;
            im->ln_bwd_per_sm = n;
        }
        const int per_sm = im->ln_bwd_per_sm;
        long long g = (long long)im->sm_count * (per_sm > 0 ? per_sm : 1), rows = ((long long)N + W - 1) / W;
        G = (int)(g < rows ? (g < LN_GROUPS ? g : LN_GROUPS) : (rows < LN_GROUPS ? rows : LN_GROUPS));
        partial = (float *)scratch_get(be, (size_t)G * per_warp, "layernorm_backward");
        if (!partial) return false;
        return !CU_LAUNCH(be, "layernorm_backward_kernel", kernel, (unsigned)G, 32 * W, smem, dinp, partial, dout, inp, w, mean, rstd, N, C, G);
    };
    constexpr int VEC = 16 / sizeof(T);
    const int nv = (C / VEC + 31) / 32; /* vectors a lane */
    bool ok;
    if (!rows_vectorizable<T>(C, dinp, dout, inp, w) || nv > LN_MAX_NV) ok = launch(layernorm_backward_any_kernel<T>);
    else ln_by_vectors(nv, [&](auto k) { ok = launch(layernorm_backward_kernel<T, VEC, decltype(k)::value>); });
    if (!ok) return;
    CU_LAUNCH(be, "layernorm_reduce_kernel", layernorm_reduce_kernel<T>, (unsigned)((2 * C + 31) / 32), LN_REDUCE_WARPS * 32, 0, dw, db, partial, C, G);
}
static void cu_layernorm_backward(ngpt_backend *be, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                                  const float *mean, const float *rstd, int N, int C) {
    if (bad_dims(be, "layernorm_backward", N, C, 0) || !N || !C) return;
    DISPATCH_DTYPE(be->dtype, T,
                   layernorm_backward_t<T>(be, (T *)dinp, (T *)dw, (T *)db, (const T *)dout, (const T *)inp, (const T *)w, mean, rstd, N, C));
}

/* ======================================================================================================
 * Matmul. One generic product C (M,N) = A (M,K) B (K,N) [+ bias] [+= old C] with the operands read either
 * way round, used three ways:
 *   forward   out  (N,OC) = inp (N,C) . w^T     A k-contiguous, B = w (OC,C): k-contiguous, + bias
 *   dinp      dinp (N,C)  = dout (N,OC) . w     A k-contiguous, B = w (OC,C): n-contiguous
 *   dw        dw   (OC,C) += dout^T . inp       A = dout (N,OC): m-contiguous, B = inp (N,C): n-contiguous
 * 16-bit types run on tensor cores: 128x128x32 block tiles, 8 warps of 64x32, a 3-stage cp.async pipeline
 * (plain loads on sm_75), ldmatrix (.trans for the m/n-contiguous operands) and mma.sync m16n8k16 (two
 * m16n8k8 on sm_75). On sm_90a (Hopper) they run on wgmma instead, matmul_tma_kernel, where the operands
 * suit the copy engine, and on mma.sync where they do not (or NGPT_MATMUL=mma asks, to compare). A product whose tiles would
 * leave much of the GPU idle (the weight gradients of the C x C layers: K = B*T is long, the output small)
 * runs as 2-4 slices of K (2-8 on the TMA kernel) into fp32 scratch, added in slice order by a second
 * kernel. Edges are predicated: any M, N, K work, and rows whose length is not a multiple of 8 elements
 * take a scalar load path. F32 runs a SIMT kernel. dbias is a two-pass column sum.
 * ==================================================================================================== */

/* --- tensor-core building blocks (sm_75+; cp.async on sm_80+) --- */
/* Device code for sm_75 (Turing): no cp.async, 64 KB of shared memory an SM. (The CUDA emulator rewrites this
 * guard to its own compute capability.) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define DEVICE_SM75 1
#else
#define DEVICE_SM75 0
#endif
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
    *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}
static __device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> static __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

static __device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* Fragment loads for mma m16n8k16 from shared-memory tiles whose layout `at` places element (row, column) of
 * the tile as stored at s + at(row, column) (rows of 16-bit values; a column a multiple of 8 starts a 16-byte
 * chunk, which the layout keeps whole). Lane l addresses row (l % 8) of the 8x8 matrix l / 8; the four
 * matrices land in r[0..3]. */
/* A (16 rows x 16 k) from a [m][k] tile: a0..a3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) */
template <typename T, typename At>
static __device__ __forceinline__ void frag_a_mk(uint32_t (&a)[4], const T *s, At at, int m0, int k0, int lane) {
    ldsm_x4(a, s + at(m0 + (lane & 15), k0 + (lane >> 4) * 8));
}
/* A (16 rows x 16 k) from a [k][m] tile (transposed load) */
template <typename T, typename At>
static __device__ __forceinline__ void frag_a_km(uint32_t (&a)[4], const T *s, At at, int m0, int k0, int lane) {
    ldsm_x4_t(a, s + at(k0 + (lane & 7) + (lane >> 4) * 8, m0 + ((lane >> 3) & 1) * 8));
}
/* B of two n8 tiles (n0..n0+15) x 16 k from a [n][k] tile: b[0], b[1] for n0..n0+7, b[2], b[3] for n0+8.. */
template <typename T, typename At>
static __device__ __forceinline__ void frag_b_nk(uint32_t (&b)[4], const T *s, At at, int n0, int k0, int lane) {
    ldsm_x4(b, s + at(n0 + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8));
}
/* B of two n8 tiles from a [k][n] tile (transposed load) */
template <typename T, typename At>
static __device__ __forceinline__ void frag_b_kn(uint32_t (&b)[4], const T *s, At at, int n0, int k0, int lane) {
    ldsm_x4_t(b, s + at(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8));
}
/* The layout of the mma.sync kernels' shared-memory tiles: rows of COLS 16-bit values, unpadded, each row's
 * 16-byte chunks XOR-swizzled so that 8 consecutive rows at one chunk (what an ldmatrix matrix reads) lie in the
 * 8 distinct groups of 4 banks, (byte offset / 16) % 8. A row of 8 or more chunks has its chunk c at c ^ (r % 8);
 * narrower rows share a 128-byte line (4 chunks: 2 rows), so the line, r / 2, picks the swizzle, c ^ (r / 2 % 4).
 * A quarter warp's 16-byte stores of 8 consecutive chunks land in distinct groups too. A tile may be addressed
 * from any row that is a multiple of 8 (the swizzle repeats every 8 rows). */
template <int COLS> struct SwizzledRows {
    static constexpr int CHUNKS = COLS / 8, SPAN = CHUNKS < 8 ? CHUNKS : 8, ROWS_A_LINE = 8 / SPAN;
    static_assert(COLS % 8 == 0 && CHUNKS >= 2 && (CHUNKS & (CHUNKS - 1)) == 0, "rows of 2, 4, 8, ... 16-byte chunks");
    /* element (row, col) of the tile (col a multiple of 8: the start of its 16-byte chunk, which stays whole) */
    __device__ __forceinline__ int operator()(int row, int col) const {
        return row * COLS + (((col >> 3) ^ (row / ROWS_A_LINE % SPAN)) << 3) + (col & 7);
    }
};

/* d (16x8, f32) += a (16x16) b (16x8). Accumulator layout: d[0], d[1] at (row lane/4, cols 2*(lane%4) + 0, 1),
 * d[2], d[3] at row lane/4 + 8. */
template <typename T> static __device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
    (void)d; (void)a; (void)b0; (void)b1;
    __trap(); /* bf16 tensor cores need sm_80; the backend refuses bf16 on older GPUs */
#endif
}
template <> __device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
    /* sm_75: k16 = two k8 steps; a0,a1 with b0 cover k 0-7, a2,a3 with b1 cover k 8-15 */
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

/* two floats into one register of 16-bit halves (lo in the low half: the lower k index) */
template <typename T> static __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    uint32_t r;
    memcpy(&r, &v, 4);
    return r;
}

/* The 8 values src[outer * ld + inner + j], j < 8, as 16 bytes; zero where outer >= outer_lim or inner + j >=
 * inner_lim. vec: one 16-byte load is allowed (ld a multiple of 8 elements and src 16-byte aligned). */
template <typename T>
static __device__ __forceinline__ uint4 fetch_chunk8(const T *src, size_t ld, int outer, int outer_lim, int inner, int inner_lim, int vec) {
    static_assert(sizeof(T) == 2, "8 values of a 16-bit type");
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (outer < outer_lim && inner < inner_lim) {
        const T *g = src + (size_t)outer * ld + inner;
        if (vec && inner + 8 <= inner_lim) return *(const uint4 *)g;
        T e[8];
        for (int j = 0; j < 8; j++) e[j] = inner + j < inner_lim ? g[j] : from_f<T>(0.0f);
        memcpy(&r, e, sizeof r);
    }
    return r;
}
/* the same 8 values into dst (16-byte aligned shared memory), whole chunks by cp.async */
template <typename T>
static __device__ __forceinline__ void copy_chunk8(T *dst, const T *src, size_t ld, int outer, int outer_lim, int inner, int inner_lim, int vec) {
    if (vec && outer < outer_lim && inner + 8 <= inner_lim) cp_async16(dst, src + (size_t)outer * ld + inner);
    else *(uint4 *)dst = fetch_chunk8(src, ld, outer, outer_lim, inner, inner_lim, 0);
}
static int vec_ok(const void *p, size_t ld) { return ((uintptr_t)p % 16 == 0) && (ld % 8 == 0); }

#define MM_BM 128
#define MM_BN 128
#define MM_BK 32
#define MM_STAGES 3
#define MM_THREADS 256

/* An operand's stage, swizzled (SwizzledRows): KCONTIG, ROWS rows (m or n) of BK; else BK rows (k) of ROWS.
 * Unpadded, the three stages take 48 KB, so an SM of 100 KB (sm_86, sm_89) runs two blocks, not one. */
template <bool KCONTIG, int ROWS> struct MmTile : SwizzledRows<KCONTIG ? MM_BK : ROWS> {
    static constexpr int ELEMS = ROWS * MM_BK;
};
#define MM_SMEM_BYTES (MM_STAGES * (MM_BM + MM_BN) * MM_BK * 2) /* every layout's stages */
static_assert(MM_SMEM_BYTES <= 48 * 1024 && 2 * (MM_SMEM_BYTES + 1024) <= 100 * 1024,
              "the mma.sync matmul launches without opting into more shared memory, two blocks to an SM of 100 KB (sm_86, sm_89: 1 KB kept a block)");

/* One ROWS x BK tile of an operand: row r (m or n) in [r0, r0 + ROWS), k in [k0, k0 + BK). KCONTIG: element (r, k)
 * at g[r * ld + k]; else at g[k * ld + r]. The tile is CHUNKS 16-byte chunks; thread t takes chunks t, t + MM_THREADS,
 * ...: chunk q is the 8 values from (row, col) of the stage (rows of KCONTIG ? BK : ROWS), which are (outer, inner)
 * of g from (o0, i0). */
template <bool KCONTIG, int ROWS> struct MmOperandTile {
    static constexpr int CHUNKS = ROWS * MM_BK / 8, A_THREAD = CHUNKS / MM_THREADS, PER_ROW = (KCONTIG ? MM_BK : ROWS) / 8;
    static_assert(CHUNKS % MM_THREADS == 0, "whole chunks a thread");
    int o0, olim, i0, ilim;
    __device__ __forceinline__ MmOperandTile(int r0, int R, int k0, int K)
        : o0(KCONTIG ? r0 : k0), olim(KCONTIG ? R : K), i0(KCONTIG ? k0 : r0), ilim(KCONTIG ? K : R) {}
    static __device__ __forceinline__ int row(int q) { return q / PER_ROW; }
    static __device__ __forceinline__ int col(int q) { return q % PER_ROW * 8; }
};
/* the tile into its stage s, by cp.async where whole chunks allow */
template <typename T, bool KCONTIG, int ROWS>
static __device__ __forceinline__ void mm_load_tile(T *s, const T *g, size_t ld, int r0, int R, int k0, int K, int vec) {
    constexpr MmTile<KCONTIG, ROWS> at;
    typedef MmOperandTile<KCONTIG, ROWS> Op;
    const Op t(r0, R, k0, K);
    for (int q = threadIdx.x; q < Op::CHUNKS; q += MM_THREADS) /* rolled: sm_80 120-121 registers, unrolled 123-128 */
        copy_chunk8(s + at(Op::row(q), Op::col(q)), g, ld, t.o0 + Op::row(q), t.olim, t.i0 + Op::col(q), t.ilim, vec);
}
/* sm_75 has no cp.async, and there a copy to shared memory is a load whose wait holds the thread before it can
 * store: a block would stall on each k tile's loads before its products, and the only block of the SM with it
 * (48 KB of the 64). There the kernel fetches a k tile into registers (mm_fetch_tile) before the products of the
 * tile before it, and stores them to their stage (mm_store_tile) after those, so the loads' latency passes under
 * the products. */
#define MM_STAGE_IN_REGISTERS DEVICE_SM75
/* the two blocks an SM the kernel's registers are bounded for; one on sm_75, which runs one */
#define MM_BLOCKS_AN_SM (DEVICE_SM75 ? 1 : 2)
template <typename T, bool KCONTIG, int ROWS>
static __device__ __forceinline__ void mm_fetch_tile(uint4 (&v)[MmOperandTile<KCONTIG, ROWS>::A_THREAD], const T *g, size_t ld, int r0, int R,
                                                     int k0, int K, int vec) {
    typedef MmOperandTile<KCONTIG, ROWS> Op;
    const Op t(r0, R, k0, K);
#pragma unroll
    for (int i = 0; i < Op::A_THREAD; i++) {
        const int q = threadIdx.x + i * MM_THREADS;
        v[i] = fetch_chunk8(g, ld, t.o0 + Op::row(q), t.olim, t.i0 + Op::col(q), t.ilim, vec);
    }
}
template <typename T, bool KCONTIG, int ROWS>
static __device__ __forceinline__ void mm_store_tile(T *s, const uint4 (&v)[MmOperandTile<KCONTIG, ROWS>::A_THREAD]) {
    constexpr MmTile<KCONTIG, ROWS> at;
    typedef MmOperandTile<KCONTIG, ROWS> Op;
#pragma unroll
    for (int i = 0; i < Op::A_THREAD; i++) {
        const int q = threadIdx.x + i * MM_THREADS;
        *(uint4 *)(s + at(Op::row(q), Op::col(q))) = v[i];
    }
}

/* Split-K (the small weight-gradient products): slice blockIdx.z of kps k values, from k = z * kps. */
template <bool A_K, bool B_K, typename T>
static __device__ __forceinline__ void mm_split_slice(const T *&A, const T *&B, int &K, size_t lda, size_t ldb, int kps) {
    if (!kps) return;
    int kb = (int)blockIdx.z * kps;
    K = min(K - kb, kps);
    A += A_K ? (size_t)kb : (size_t)kb * lda;
    B += B_K ? (size_t)kb : (size_t)kb * ldb;
}
/* What a product does with each fp32 result v at (row, col) of out (row stride ldc): + bias[col], + the old
 * value, rounded to T; then EPI_GELU also writes aux = gelu(out), EPI_DGELU makes out = out * gelu'(aux)
 * (aux: GELU's input) and EPI_RESIDUAL makes out = aux + out (aux: the residual stream). Each in the order
 * and roundings of the separate ops (matmul, then gelu_forward, gelu_backward or residual_forward), so the
 * fused products give their bits. A split-K slice (partial) stores v alone. */
enum { EPI_PLAIN, EPI_GELU, EPI_DGELU, EPI_RESIDUAL };
static __host__ __device__ __forceinline__ bool epi_reads_aux(int kind) { return kind == EPI_DGELU || kind == EPI_RESIDUAL; }
template <typename T> struct MmEpilogue {
    T *out;
    size_t ldc;
    const T *bias; /* or NULL */
    int accumulate, kind;
    T *aux;         /* EPI_GELU: written; EPI_DGELU: read; same strides as out */
    float *partial; /* split-K: the slices' fp32 results, M x N each; NULL otherwise */
    int direct;     /* the TMA and mma.sync kernels may write whole tiles from their accumulators (gemm_tma, gemm_tc set it) */
};
/* The value stored for result v of a product of epilogue kind `kind`, given its column's bias b (added when
 * add_bias), the old value (added when accumulating) and aux x (read for EPI_DGELU and EPI_RESIDUAL): the one
 * place the epilogue's arithmetic is written. mm_round calls it with the kind read at run time, the direct
 * epilogue (mm_epilogue_direct) with its build's kind fixed at compile time. */
template <typename T> static __device__ __forceinline__ T mm_value(int kind, bool add_bias, bool accumulate, float v, T b, T old, T x) {
    if (add_bias) v += to_f(b);
    if (accumulate) v += to_f(old);
    T r = from_f<T>(v);
    if (kind == EPI_DGELU) return from_f<T>(to_f(r) * gelu_grad(to_f(x)));
    if (kind == EPI_RESIDUAL) return from_f<T>(to_f(x) + to_f(r));
    return r;
}
template <typename T> static __device__ __forceinline__ T mm_round(const MmEpilogue<T> &ep, float v, T b, T old, T x) {
    return mm_value(ep.kind, ep.bias != NULL, ep.accumulate != 0, v, b, old, x);
}
template <typename T> static __device__ __forceinline__ void mm_finish(const MmEpilogue<T> &ep, size_t i, int col, float v) {
    const T zero = from_f<T>(0.0f);
    T r = mm_round(ep, v, ep.bias ? ep.bias[col] : zero, ep.accumulate ? ep.out[i] : zero, epi_reads_aux(ep.kind) ? ep.aux[i] : zero);
    ep.out[i] = r;
    if (ep.kind == EPI_GELU) ep.aux[i] = from_f<T>(gelu_of(to_f(r)));
}
/* The tensor-core kernels' epilogue, through shared memory. A warp stages 16 rows x 32 columns of its fp32
 * results at a time (mm_stage: the accumulator fragments' layout, four fragments of 8 columns), then writes
 * them as 64 row segments of 8 columns (mm_drain_seg): 16-byte loads and stores of whole 32-byte sectors.
 * The chunk loop is not unrolled, so the epilogue's code is in each kernel once: unrolled over every fragment,
 * with every epilogue kind inlined at each, it made the TMA kernel 504 KB of machine code (sm_90a), the
 * wgmma one 277 KB, and on an H200 each output tile paid about 50 us, the products with K = 768 running
 * at a third of the rate of the long ones (docs/performance.md, 2026-11-26). Each value still goes through
 * mm_round, so the bits are those of the separate ops. */
#define STG_LD 36                     /* floats per staged row: 32 + 4, so every row stays 16-byte aligned */
#define STG_WARP_FLOATS (16 * STG_LD) /* one warp's staging block, 2304 bytes */
template <typename T> struct alignas(16) MmVec8 { T v[8]; };
/* the mma.sync kernel stages in its tiles' memory (after a barrier): room for its 8 warps in every layout */
static_assert(MM_SMEM_BYTES >= 8 * STG_WARP_FLOATS * 4, "the mma.sync kernel's tiles cannot hold the epilogue's staging");
/* fragment jj (0..3) of a 16 x 32 chunk: (v0, v1) at row g, columns 8 jj + 2 tq and + 1; (v2, v3) at row g + 8 */
static __device__ __forceinline__ void mm_stage(float *stg, int lane, int jj, float v0, float v1, float v2, float v3) {
    const int g = lane >> 2, tq = lane & 3;
    *(float2 *)&stg[g * STG_LD + jj * 8 + 2 * tq] = make_float2(v0, v1);
    *(float2 *)&stg[(g + 8) * STG_LD + jj * 8 + 2 * tq] = make_float2(v2, v3);
}
/* A lane's part of a chunk: row segments h = 0 and 1, each 8 columns at row row0 + lane / 4 + 8 h, columns
 * col0 + (lane % 4) * 8 .. + 7. What a segment reads from global memory (its old values when accumulating,
 * aux for EPI_DGELU and EPI_RESIDUAL; the columns' bias, once for both) is loaded apart from its writing,
 * so the wgmma kernels have both segments' loads in flight while the chunk is staged; before, each
 * segment's loads were waited for in turn, twice per chunk and eight chunks per tile. */
template <typename T> struct MmSeg {
    MmVec8<T> old, x;
    bool vec; /* the 16-byte path: whole, aligned, in range, not split-K */
};
/* the bias of the lane's 8 columns, the same for both segments (zeros where the 16-byte path cannot run) */
template <typename T> static __device__ __forceinline__ MmVec8<T> mm_load_bias(const MmEpilogue<T> &ep, int N, int col0, int lane) {
    const int col = col0 + (lane & 3) * 8;
    MmVec8<T> b;
#pragma unroll
    for (int e = 0; e < 8; e++) b.v[e] = ep.bias && !ep.partial && col + 8 <= N ? ep.bias[col + e] : from_f<T>(0.0f);
    return b;
}
template <typename T>
static __device__ __forceinline__ void mm_load_seg(const MmEpilogue<T> &ep, int M, int N, int row0, int col0, int lane, int h, MmSeg<T> &sg) {
    const int row = row0 + (lane >> 2) + 8 * h, col = col0 + (lane & 3) * 8;
    const size_t i = (size_t)row * ep.ldc + col;
    const T *o = ep.out + i, *a = ep.kind == EPI_PLAIN ? o : ep.aux + i;
    sg.vec = !ep.partial && row < M && col + 8 <= N && (((uintptr_t)o | (uintptr_t)a) & 15) == 0;
#pragma unroll
    for (int e = 0; e < 8; e++) sg.old.v[e] = sg.x.v[e] = from_f<T>(0.0f);
    if (!sg.vec) return;
    if (ep.accumulate) sg.old = *(const MmVec8<T> *)o;
    if (epi_reads_aux(ep.kind)) sg.x = *(const MmVec8<T> *)a;
}
/* a segment off the 16-byte path (the edges, unaligned rows) one value at a time; not inlined, so the two
 * segments' inlined code in the wgmma kernels stays small */
template <typename T> static __device__ __noinline__ void mm_finish_seg(const MmEpilogue<T> ep, size_t i, int col, int N, const float *src) {
#pragma unroll 1
    for (int e = 0; e < 8 && col + e < N; e++) mm_finish(ep, i + e, col + e, src[e]);
}
/* segment h of the staged chunk (this warp's stg) to the output (or split-K slice) at rows row0.., columns col0.. */
template <typename T>
static __device__ __forceinline__ void mm_drain_seg(const MmEpilogue<T> &ep, int M, int N, int slice, int row0, int col0, const float *stg, int lane,
                                                    int h, const MmVec8<T> &bias, const MmSeg<T> &sg) {
    const int r = (lane >> 2) + 8 * h, c = (lane & 3) * 8, row = row0 + r, col = col0 + c;
    if (row >= M || col >= N) return;
    const float *src = stg + r * STG_LD + c;
    if (ep.partial) {
        float *p = ep.partial + ((size_t)slice * M + row) * N + col;
        if (col + 8 <= N && ((uintptr_t)p & 15) == 0) {
            *(float4 *)p = *(const float4 *)src;
            *(float4 *)(p + 4) = *(const float4 *)(src + 4);
        } else {
#pragma unroll 1
            for (int e = 0; e < 8 && col + e < N; e++) p[e] = src[e];
        }
        return;
    }
    const size_t i = (size_t)row * ep.ldc + col;
    if (sg.vec) {
        const float4 lo = *(const float4 *)src, hi = *(const float4 *)(src + 4);
        const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        MmVec8<T> res, g;
#pragma unroll
        for (int e = 0; e < 8; e++) res.v[e] = mm_round(ep, v[e], bias.v[e], sg.old.v[e], sg.x.v[e]);
        *(MmVec8<T> *)(ep.out + i) = res;
        if (ep.kind == EPI_GELU) {
#pragma unroll
            for (int e = 0; e < 8; e++) g.v[e] = from_f<T>(gelu_of(to_f(res.v[e])));
            *(MmVec8<T> *)(ep.aux + i) = g;
        }
    } else {
        mm_finish_seg(ep, i, col, N, src);
    }
}

/* The epilogue of a warp holding 16 rows x 32 NC columns in wgmma's accumulator layout (fragment i: d[4i] ..
 * d[4i + 3], columns 8i .. 8i + 7), NC chunks of 32 columns, each staged and written as above */
template <int NC, typename T>
static __device__ __forceinline__ void mm_epilogue_rows(const MmEpilogue<T> &ep, int M, int N, int slice, int row0, int col0, const float (&d)[16 * NC],
                                                        float *stg, int lane) {
#pragma unroll 1
    for (int c = 0; c < NC && col0 + 32 * c < N; c++) {
        MmSeg<T> s0, s1; /* both segments' loads in flight while the chunk is staged */
        const MmVec8<T> bias = mm_load_bias(ep, N, col0 + 32 * c, lane);
        mm_load_seg(ep, M, N, row0, col0 + 32 * c, lane, 0, s0);
        mm_load_seg(ep, M, N, row0, col0 + 32 * c, lane, 1, s1);
#pragma unroll
        for (int cc = 0; cc < NC; cc++) /* the chunk's registers, named at compile time */
            if (cc == c) {
#pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    const int i = 4 * cc + jj;
                    mm_stage(stg, lane, jj, d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
                }
            }
        __syncwarp();
#pragma unroll 1
        for (int h = 0; h < 2; h++) { /* one copy of the segment's code: s1 is selected, register by register, not indexed */
            MmSeg<T> sg = s0;
            if (h) {
                sg.vec = s1.vec;
#pragma unroll
                for (int e = 0; e < 8; e++) sg.old.v[e] = s1.old.v[e], sg.x.v[e] = s1.x.v[e];
            }
            mm_drain_seg(ep, M, N, slice, row0, col0 + 32 * c, stg, lane, h, bias, sg);
        }
        __syncwarp(); /* the chunk is written before the next one is staged */
    }
}

/* The TMA and mma.sync kernels' epilogue of a whole tile (every row and column inside the matrix) that is not
 * a split-K slice (those: mm_slice_direct, below), where out, aux and bias are 4-byte aligned and ldc is even,
 * adding the old values (ACC) in the weight gradient's builds (mm_direct_acc) and in no other: a
 * warp's 16 rows x 8 NF columns straight from its accumulators (rows row0 + g and row0 + g + 8, g = lane /
 * 4; fragment i at columns col0 + 8i + 2tq, +1, tq = lane % 4, as in mm_epilogue_rows), with the kind fixed
 * at compile time. The staged epilogue above runs every kind through the same generic code, a chunk of 32
 * columns at a time staged, read back and waiting for its loads; on an H200 the TMA kernel's products with
 * K = 768 paid about 12 us a tile outside their 8 us main loop (docs/performance.md, fifth session). Here
 * the fragments go a group (FG: four, or two) at a time, the next group's bias, aux and old-value loads (two
 * adjacent columns a load) issued before this group's stores. Where there are several groups, the kinds with GELU's
 * erff unroll that loop twice, not fully (their code would be about 80 KB a kernel), and shift d down a
 * group each time, so every index into d stays a compile-time one.
 *
 * The mma.sync kernel (BULK false) stores two adjacent columns at a time to global memory. The TMA kernel
 * (BULK, where out and GELU's aux are also 16-byte aligned with rows a multiple of 16 bytes apart: gemm_tma
 * encodes their tensor maps) stores to shared memory, a box of 16 rows x 64 columns at a time, each row
 * 128 bytes with its 16-byte chunk c at c ^ (row % 8) (the copy engine's 128-byte swizzle, which also puts
 * a store's 32 lanes on 32 different banks), and the copy engine writes the box out whole (tma_store)
 * while the warp goes on.
 * A warp has two boxes (buf, 2 x MM_BOX_BYTES, 1024-byte aligned): the plain, residual and derivative kinds
 * alternate them, waiting before each box until the store from the other box is the only one that may
 * still be reading, and before a tile's first box until none is (the last tile's last box, which a tile
 * 192 wide, of three boxes, stored from the same box, has had this tile's main loop to be read); GELU
 * stores out and aux from the two and waits until nothing is in flight. On an H200
 * the global stores made the direct epilogue store-bound: each 4-byte store instruction writes 8 rows x 16
 * bytes, half of each 32-byte sector, and 73% of the epilogue's stall samples were warps waiting for
 * earlier stores to read their registers (docs/performance.md, fourth GPU run); the copy engine writes
 * whole 128-byte lines. Each value goes through mm_value, as the staged epilogue's do, so the bits are
 * those of the staged epilogue and of the separate ops (test_gpu_ops holds them to NGPT_EPILOGUE=staged's
 * bits). */
template <typename T> struct alignas(2 * sizeof(T)) MmVec2 { T v[2]; };
#define MM_DIRECT_FG 4      /* fragments a group */
#define MM_BOX_BYTES 2048   /* a box the copy engine stores: 16 rows x 64 16-bit columns */
/* The copy engine's stores (sm_90a; only the TMA kernel calls these): the box at (c0 inner, c1 outer) of
 * the map from shared memory, into this thread's open bulk group; closing the group; waiting until the
 * copy engine has read the shared memory of all but this thread's newest N groups (bulk_wait_written, with
 * the TMA kernel: until it has written them all); this thread's shared-memory writes made visible to the
 * copy engine (the async proxy) */
static __device__ __forceinline__ void tma_store(const CUtensorMap *map, int c0, int c1, const void *src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"((uint64_t)map), "r"(c0), "r"(c1),
                 "r"((uint32_t)__cvta_generic_to_shared(src))
                 : "memory");
}
static __device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void fence_async_proxy() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
template <int KIND, int NF, bool BULK, bool ACC, typename T>
static __device__ __forceinline__ void mm_epilogue_direct(const MmEpilogue<T> &ep, int row0, int col0, float (&d)[4 * NF], int lane,
                                                          unsigned char *buf = NULL, const CUtensorMap *map_out = NULL,
                                                          const CUtensorMap *map_aux = NULL) {
    /* GELU's derivative through the copy engine: two fragments a group, else its f16 build spills */
    constexpr int FG = KIND == EPI_DGELU && BULK ? 2 : MM_DIRECT_FG, GROUPS = NF / FG, GPB = 64 / (8 * FG); /* GPB: groups a box */
    [[maybe_unused]] constexpr int UNROLL = (KIND == EPI_GELU || KIND == EPI_DGELU) && GROUPS > 1 ? 2 : GROUPS; /* read by nvcc's pragma alone */
    static_assert(NF % FG == 0 && GROUPS % UNROLL == 0, "whole groups, whole turns");
    static_assert(!BULK || (GROUPS % GPB == 0 && 64 * sizeof(T) == 128), "whole boxes of 128-byte rows");
    const int g = lane >> 2, tq = lane & 3;
    constexpr bool AUX = KIND == EPI_DGELU || KIND == EPI_RESIDUAL;
    const size_t first = (size_t)(row0 + g) * ep.ldc + col0 + 2 * tq, second = first + 8 * ep.ldc;
    const T *bias = ep.bias ? ep.bias + col0 + 2 * tq : NULL;
    /* this group's bias, aux and (ACC) old values (rows g, g + 8), and the next group's */
    MmVec2<T> b[FG] = {}, x[2 * FG] = {}, o[2 * FG] = {}, nb[FG] = {}, nx[2 * FG] = {}, no[2 * FG] = {};
    auto load = [&](int grp, MmVec2<T>(&bb)[FG], MmVec2<T>(&xx)[2 * FG], MmVec2<T>(&oo)[2 * FG]) {
#pragma unroll
        for (int j = 0; j < FG; j++) {
            const int c = 8 * (FG * grp + j);
            if (bias) bb[j] = *(const MmVec2<T> *)(bias + c);
            if (AUX) {
                xx[2 * j] = *(const MmVec2<T> *)(ep.aux + first + c);
                xx[2 * j + 1] = *(const MmVec2<T> *)(ep.aux + second + c);
            }
            if (ACC) {
                oo[2 * j] = *(const MmVec2<T> *)(ep.out + first + c);
                oo[2 * j + 1] = *(const MmVec2<T> *)(ep.out + second + c);
            }
        }
    };
    load(0, b, x, o);
#pragma unroll UNROLL
    for (int grp = 0; grp < GROUPS; grp++) {
        const int box = grp / GPB; /* BULK: the box (64 columns) this group is part of, and where it goes */
        unsigned char *box_out = NULL, *box_aux = NULL;
        if (grp + 1 < GROUPS) load(grp + 1, nb, nx, no);
        if constexpr (BULK) {
            box_out = buf + (KIND == EPI_GELU ? 0 : (box & 1) * MM_BOX_BYTES);
            box_aux = buf + MM_BOX_BYTES;
            if (grp % GPB == 0) { /* a box's first group: the copy engine has read what it last stored from there */
                if (lane == 0) {
                    if (KIND == EPI_GELU || box == 0) bulk_wait_read<0>();
                    else bulk_wait_read<1>();
                }
                __syncwarp();
            }
        }
#pragma unroll
        for (int j = 0; j < FG; j++) {
            const int c = 8 * (FG * grp + j);
            MmVec2<T> r[2];
#pragma unroll
            for (int h = 0; h < 2; h++) /* h: row g, row g + 8 */
#pragma unroll
                for (int e = 0; e < 2; e++)
                    r[h].v[e] = mm_value(KIND, bias != NULL, ACC, d[4 * j + 2 * h + e], b[j].v[e], ACC ? o[2 * j + h].v[e] : from_f<T>(0.0f),
                                         AUX ? x[2 * j + h].v[e] : from_f<T>(0.0f));
            /* BULK: row g + 8h of the box, its 16-byte chunk FG (grp % GPB) + j (the fragment) swizzled by the row */
            const int at = g * 128 + (((FG * (grp % GPB) + j) ^ g) << 4) + 4 * tq;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if constexpr (BULK) *(MmVec2<T> *)(box_out + at + h * 8 * 128) = r[h];
                else *(MmVec2<T> *)(ep.out + (h ? second : first) + c) = r[h];
            }
            if (KIND == EPI_GELU) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    MmVec2<T> gl;
#pragma unroll
                    for (int e = 0; e < 2; e++) gl.v[e] = from_f<T>(gelu_of(to_f(r[h].v[e])));
                    if constexpr (BULK) *(MmVec2<T> *)(box_aux + at + h * 8 * 128) = gl;
                    else *(MmVec2<T> *)(ep.aux + (h ? second : first) + c) = gl;
                }
            }
        }
        if constexpr (BULK) {
            if (grp % GPB == GPB - 1) { /* the box is whole: every lane's writes to the async proxy, then one lane stores it */
                fence_async_proxy();
                __syncwarp();
                if (lane == 0) {
                    tma_store(map_out, col0 + 64 * box, row0, box_out);
                    if (KIND == EPI_GELU) tma_store(map_aux, col0 + 64 * box, row0, box_aux);
                    bulk_commit();
                }
            }
        }
#pragma unroll
        for (int k = 0; k + 4 * FG < 4 * NF; k++) d[k] = d[k + 4 * FG]; /* the next group's fragments to the front */
#pragma unroll
        for (int j = 0; j < FG; j++) {
            b[j] = nb[j];
            x[2 * j] = nx[2 * j];
            x[2 * j + 1] = nx[2 * j + 1];
            o[2 * j] = no[2 * j];
            o[2 * j + 1] = no[2 * j + 1];
        }
    }
}
/* A split-K slice's whole tile straight from the accumulators: a warp's 16 rows x 8 NF columns of fp32 results
 * (d as in mm_epilogue_direct) to rows prow0 .. prow0 + 15 of the slices, which are one matrix of N columns and
 * splits x M rows (slice z's row r at z M + r; splitk_reduce_kernel adds them). The mma.sync kernel (BULK false)
 * stores 8 bytes a row a fragment, four lanes' 32 bytes a whole sector. The TMA kernel stores a box of 16 rows x 32
 * floats (128-byte rows in the 16-bit boxes' swizzle) at a time through the copy engine (map: the slices' matrix),
 * alternating the warp's two boxes as the plain kind does. The staged epilogue wrote the slices in whole sectors
 * too, but through its staging, a chunk of 32 columns at a time; the weight gradients of GPT-2's layers (K = the
 * micro-batch's tokens, 54 to 72 tiles of 128 x 256) and the classifier's input gradient (K = the vocabulary) all
 * run as slices. */
template <int NF, bool BULK>
static __device__ __forceinline__ void mm_slice_direct(float *slices, int N, int prow0, int col0, const float (&d)[4 * NF], int lane,
                                                       unsigned char *buf = NULL, const CUtensorMap *map = NULL) {
    static_assert(NF % 4 == 0, "whole boxes of 32 columns");
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int box = 0; box < NF / 4; box++) {
        unsigned char *bx = NULL; /* the box this group is written into (BULK: the warp's two alternate) */
        if constexpr (BULK) { /* the copy engine has read what it last stored from this box (a tile's first: from either) */
            bx = buf + (box & 1) * MM_BOX_BYTES;
            if (lane == 0) {
                if (box == 0) bulk_wait_read<0>();
                else bulk_wait_read<1>();
            }
            __syncwarp();
        }
#pragma unroll
        for (int j = 0; j < 4; j++) { /* fragment 4 box + j: columns 8 j + 2 tq, + 1 of the box, bytes 32 j + 8 tq of its row */
            const int i = 4 * box + j;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float2 v = make_float2(d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
                if constexpr (BULK) *(float2 *)(bx + (g + 8 * h) * 128 + (((2 * j + (tq >> 1)) ^ g) << 4) + 8 * (tq & 1)) = v;
                else *(float2 *)(slices + (size_t)(prow0 + g + 8 * h) * N + col0 + 8 * i + 2 * tq) = v;
            }
        }
        if constexpr (BULK) {
            fence_async_proxy();
            __syncwarp();
            if (lane == 0) {
                tma_store(map, col0 + 32 * box, prow0, bx);
                bulk_commit();
            }
        }
    }
}

/* The epilogue kinds the TMA and mma.sync kernels are built with a direct path for (EK), by layout: the
 * forward's (plain, GELU, residual) and the input gradient's (plain, GELU's derivative). One kind a build keeps
 * each build's machine code to the main loop, the staged epilogue and one direct one (all four in one build
 * made the TMA kernel 114 KB on sm_90a). */
template <bool A_K, bool B_K> static constexpr bool mm_direct_kind(int kind) {
    return kind == EPI_PLAIN || (A_K && B_K && (kind == EPI_GELU || kind == EPI_RESIDUAL)) || (A_K && !B_K && kind == EPI_DGELU);
}
/* Whether a layout's direct path accumulates (adds the old values, as mm_value does when accumulating): the
 * weight gradient's (A and B m- and n-contiguous), which the model always accumulates, and only it */
template <bool A_K, bool B_K> static __host__ __device__ constexpr bool mm_direct_acc() { return !A_K && !B_K; }
/* launch(std::integral_constant<int, EK>()) for a product of epilogue kind `kind`: EK = kind where that
 * layout has a build for it, else EPI_PLAIN (whose direct path the other kinds never take) */
template <bool A_K, bool B_K, typename F> static void mm_launch_kind(int kind, F &&launch) {
    if (mm_direct_kind<A_K, B_K>(EPI_GELU) && kind == EPI_GELU) launch(std::integral_constant<int, EPI_GELU>());
    else if (mm_direct_kind<A_K, B_K>(EPI_DGELU) && kind == EPI_DGELU) launch(std::integral_constant<int, EPI_DGELU>());
    else if (mm_direct_kind<A_K, B_K>(EPI_RESIDUAL) && kind == EPI_RESIDUAL) launch(std::integral_constant<int, EPI_RESIDUAL>());
    else launch(std::integral_constant<int, EPI_PLAIN>());
}
/* Whether a bm x bn tile at (m0, n0) is written straight from the accumulators: a whole tile of a split-K
 * slice (mm_slice_direct; N even, so every row of the slices is 8-byte aligned), or a whole one of a product of
 * the build's kind EK that accumulates where the build does (ACC: mm_direct_acc) with out, aux and bias 4-byte
 * aligned and ldc even (mm_epilogue_direct) */
template <int EK, bool ACC, typename T>
static __device__ __forceinline__ bool mm_direct_ok(const MmEpilogue<T> &ep, int M, int N, int m0, int n0, int bm, int bn) {
    if (!ep.direct || m0 + bm > M || n0 + bn > N) return false;
    if (ep.partial) return (N & 1) == 0;
    return ep.kind == EK && (ep.accumulate != 0) == ACC && (ep.ldc & 1) == 0 &&
           (((uintptr_t)ep.out | (uintptr_t)ep.aux | (uintptr_t)ep.bias) & (2 * sizeof(T) - 1)) == 0;
}

/* The mma.sync kernel's direct epilogue: a warp's 64 x 32 (acc[i][j]: rows 16 i.., fragment j), 16 rows at a
 * time, to out or (ep.partial) to slice `slice` of M rows; the GELU kinds keep that loop rolled, moving acc
 * down a row block each turn */
template <int EK, bool ACC, typename T>
static __device__ __forceinline__ void mm_tc_direct(const MmEpilogue<T> &ep, int M, int N, int slice, int row0, int col0, float (&acc)[4][4][4],
                                                    int lane) {
    [[maybe_unused]] constexpr int UNROLL = EK == EPI_GELU || EK == EPI_DGELU ? 1 : 4; /* read by nvcc's pragma alone */
#pragma unroll UNROLL
    for (int i = 0; i < 4; i++) {
        float d[16];
#pragma unroll
        for (int k = 0; k < 16; k++) d[k] = acc[0][k >> 2][k & 3];
        if (ep.partial) mm_slice_direct<4, false>(ep.partial, N, slice * M + row0 + 16 * i, col0, d, lane);
        else mm_epilogue_direct<EK, 4, false, ACC>(ep, row0 + 16 * i, col0, d, lane);
#pragma unroll
        for (int k = 0; k < 48; k++) acc[k >> 4][(k >> 2) & 3][k & 3] = acc[(k >> 4) + 1][(k >> 2) & 3][k & 3]; /* the next row block to the front */
    }
}

/* The order in which a 16-bit matmul's blocks take their output tiles (tiles_m x tiles_n of them): along the
 * columns of a row of tiles where there are at least as many rows of tiles as columns of tiles, else down the
 * rows of a column (the raster order Hopper GEMM schedulers pick by this rule, without their swizzle), so
 * that the blocks at work at once share the tiles of the operand that has more of them, which is then read
 * from memory about once, and the other one's, fewer, come again from L2. Down the columns everywhere
 * (every kernel's order before 2026-12-01), GPT-2 124M's input gradients (A: dout, 12,288 x 2304 or 3072
 * at batch 12) and the MLP projection's forward (A: the GELU output, 12,288 x 3072) read A about once per
 * wave of blocks, 3 times on 132 SMs, and the classifier's weight gradient (A: a chunk's dlogits^T, 50,304 x
 * 2048) once per column of tiles, 3 times; A (57-206 MB) is larger than the L2 (50 MB on an H100, 6-72 MB on
 * sm_86 and sm_89 cards).
 * No bits change: each tile is the same sums. NGPT_TILE_ORDER=m keeps the order down the columns, to
 * compare. A grid's rows of tiles go in gridDim.y then, at most 65535. */
static int tiles_rows_first(const CudaImpl *im, int tiles_m, int tiles_n) { return !im->tiles_down_columns && tiles_m >= tiles_n && tiles_m <= 65535; }

/* The grid of a kernel whose block (x, y, z) computes one bm x bn output tile of split-K slice z: x walks the
 * columns of a row of tiles and y the rows where *rows_first (tiles_rows_first), else the other way round */
static dim3 tiles_grid(const CudaImpl *im, int M, int N, int bm, int bn, int splits, int *rows_first) {
    const unsigned tm = (unsigned)((M + bm - 1) / bm), tn = (unsigned)((N + bn - 1) / bn);
    *rows_first = tiles_rows_first(im, (int)tm, (int)tn);
    return *rows_first ? dim3(tn, tm, (unsigned)splits) : dim3(tm, tn, (unsigned)splits);
}

template <typename T, bool A_K, bool B_K, int EK>
__global__ void __launch_bounds__(MM_THREADS, MM_BLOCKS_AN_SM) /* every build alike (split-K counts on the plain one's) */
    matmul_tc_kernel(const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, int vecA, int vecB, int kps, int rows_first,
                     MmEpilogue<T> ep) {
    after_previous_kernel();
    extern __shared__ __align__(16) unsigned char mm_smem[];
    typedef MmTile<A_K, MM_BM> TA;
    typedef MmTile<B_K, MM_BN> TB;
    T *sA = (T *)mm_smem, *sB = sA + MM_STAGES * TA::ELEMS;
    const int m0 = (rows_first ? blockIdx.y : blockIdx.x) * MM_BM, n0 = (rows_first ? blockIdx.x : blockIdx.y) * MM_BN; /* tiles_grid */
    mm_split_slice<A_K, B_K>(A, B, K, lda, ldb, kps);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32; /* this warp's 64 x 32 sub-tile */
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    const int KT = (K + MM_BK - 1) / MM_BK;
#pragma unroll
    for (int s = 0; s < MM_STAGES - 1; s++) {
        if (s < KT) {
            mm_load_tile<T, A_K, MM_BM>(sA + s * TA::ELEMS, A, lda, m0, M, s * MM_BK, K, vecA);
            mm_load_tile<T, B_K, MM_BN>(sB + s * TB::ELEMS, B, ldb, n0, N, s * MM_BK, K, vecB);
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<MM_STAGES - 2>(); /* this thread's copies of tile kt have landed */
        __syncthreads();                /* ... everyone's have, and everyone is done with tile kt - 1 */
        const int nk = kt + MM_STAGES - 1, st = nk % MM_STAGES; /* refill the stage tile kt - 1 used */
        uint4 fa[MmOperandTile<A_K, MM_BM>::A_THREAD], fb[MmOperandTile<B_K, MM_BN>::A_THREAD]; /* MM_STAGE_IN_REGISTERS */
        if (nk < KT) {
            if constexpr (MM_STAGE_IN_REGISTERS) {
                mm_fetch_tile<T, A_K, MM_BM>(fa, A, lda, m0, M, nk * MM_BK, K, vecA);
                mm_fetch_tile<T, B_K, MM_BN>(fb, B, ldb, n0, N, nk * MM_BK, K, vecB);
            } else {
                mm_load_tile<T, A_K, MM_BM>(sA + st * TA::ELEMS, A, lda, m0, M, nk * MM_BK, K, vecA);
                mm_load_tile<T, B_K, MM_BN>(sB + st * TB::ELEMS, B, ldb, n0, N, nk * MM_BK, K, vecB);
            }
        }
        cp_async_commit();
        const T *a = sA + (kt % MM_STAGES) * TA::ELEMS, *b = sB + (kt % MM_STAGES) * TB::ELEMS;
#pragma unroll
        for (int kk = 0; kk < MM_BK; kk += 16) {
            uint32_t af[4][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (A_K) frag_a_mk(af[i], a, TA(), wm + i * 16, kk, lane);
                else frag_a_km(af[i], a, TA(), wm + i * 16, kk, lane);
            }
#pragma unroll
            for (int p = 0; p < 2; p++) {
                uint32_t r[4];
                if (B_K) frag_b_nk(r, b, TB(), wn + p * 16, kk, lane);
                else frag_b_kn(r, b, TB(), wn + p * 16, kk, lane);
                bf[2 * p][0] = r[0]; bf[2 * p][1] = r[1];
                bf[2 * p + 1][0] = r[2]; bf[2 * p + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
        if constexpr (MM_STAGE_IN_REGISTERS) {
            if (nk < KT) { /* tile nk, fetched before these products, into the stage tile kt - 1 left */
                mm_store_tile<T, A_K, MM_BM>(sA + st * TA::ELEMS, fa);
                mm_store_tile<T, B_K, MM_BN>(sB + st * TB::ELEMS, fb);
            }
        }
    }
    cp_async_wait<0>();
    if (mm_direct_ok<EK, mm_direct_acc<A_K, B_K>()>(ep, M, N, m0, n0, MM_BM, MM_BN)) { /* the same for the whole block */
        mm_tc_direct<EK, mm_direct_acc<A_K, B_K>()>(ep, M, N, blockIdx.z, m0 + wm, n0 + wn, acc, lane);
        return;
    }
    __syncthreads(); /* every warp is done with the tiles: their memory stages the epilogue */

    /* chunk i: this warp's rows wm + 16 i .. + 15, its 32 columns (fragments acc[i][0..3]) */
    float *stg = (float *)mm_smem + warp * STG_WARP_FLOATS;
#pragma unroll 1
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int ii = 0; ii < 4; ii++)
            if (ii == i) {
#pragma unroll
                for (int j = 0; j < 4; j++) mm_stage(stg, lane, j, acc[ii][j][0], acc[ii][j][1], acc[ii][j][2], acc[ii][j][3]);
            }
        __syncwarp();
        const MmVec8<T> bias = mm_load_bias(ep, N, n0 + wn, lane);
#pragma unroll 1
        for (int h = 0; h < 2; h++) { /* one segment's loads at a time: both at once, beside 64 accumulators, cost 40 registers */
            MmSeg<T> sg;
            mm_load_seg(ep, M, N, m0 + wm + i * 16, n0 + wn, lane, h, sg);
            mm_drain_seg(ep, M, N, blockIdx.z, m0 + wm + i * 16, n0 + wn, stg, lane, h, bias, sg);
        }
        __syncwarp(); /* the chunk is written before the next one is staged */
    }
}

/* F32: 64x64 tiles, 256 threads of 4x4 outputs, k steps of 16 */
#define SM_TILE 64
#define SM_BK 16
template <bool A_K, bool B_K>
__global__ void __launch_bounds__(256) matmul_simt_kernel(float *out, const float *A, const float *B, const float *bias, int M, int N, int K,
                                                          size_t lda, size_t ldb, size_t ldc, int accumulate) {
    after_previous_kernel();
    __shared__ float sA[SM_BK][SM_TILE + 1], sB[SM_BK][SM_TILE + 1];
    const int m0 = blockIdx.x * SM_TILE, n0 = blockIdx.y * SM_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    float acc[4][4] = {{0.0f}};
    for (int k0 = 0; k0 < K; k0 += SM_BK) {
        for (int e = threadIdx.x; e < SM_TILE * SM_BK; e += 256) {
            int m, k;
            if (A_K) { m = e / SM_BK; k = e % SM_BK; }
            else { k = e / SM_TILE; m = e % SM_TILE; }
            int gm = m0 + m, gk = k0 + k;
            sA[k][m] = (gm < M && gk < K) ? (A_K ? A[(size_t)gm * lda + gk] : A[(size_t)gk * lda + gm]) : 0.0f;
            int n;
            if (B_K) { n = e / SM_BK; k = e % SM_BK; }
            else { k = e / SM_TILE; n = e % SM_TILE; }
            int gn = n0 + n;
            gk = k0 + k;
            sB[k][n] = (gn < N && gk < K) ? (B_K ? B[(size_t)gn * ldb + gk] : B[(size_t)gk * ldb + gn]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < SM_BK; k++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) { a[i] = sA[k][ty + 16 * i]; b[i] = sB[k][tx + 16 * i]; }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
            if (row < M && col < N) {
                float v = acc[i][j];
                if (bias) v += bias[col];
                float *o = out + (size_t)row * ldc + col;
                if (accumulate) v += *o;
                *o = v;
            }
        }
}

/* The build of the mma.sync kernel for epilogue kind EK where it has one (mm_direct_kind), else the plain one */
template <typename T, bool A_K, bool B_K, int EK>
static void tc_launch(ngpt_backend *be, const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, int splits, int kps,
                      const MmEpilogue<T> &ep) {
    constexpr int built = mm_direct_kind<A_K, B_K>(EK) ? EK : EPI_PLAIN;
    int rows_first;
    const dim3 grid = tiles_grid(impl_of(be), M, N, MM_BM, MM_BN, splits, &rows_first);
    CU_LAUNCH(be, "matmul_tc_kernel", matmul_tc_kernel<T, A_K, B_K, built>, grid, MM_THREADS, MM_SMEM_BYTES, A, B, M, N, K, lda, ldb,
              vec_ok(A, lda), vec_ok(B, ldb), kps, rows_first, ep);
}
template <typename T, bool A_K, bool B_K>
static void gemm_tc(ngpt_backend *be, const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, int splits, int kps,
                    const MmEpilogue<T> &ep) {
    MmEpilogue<T> ep1 = ep;
    ep1.direct = impl_of(be)->direct_epilogue;
    mm_launch_kind<A_K, B_K>(ep.kind, [&](auto ek) { tc_launch<T, A_K, B_K, decltype(ek)::value>(be, A, B, M, N, K, lda, ldb, splits, kps, ep1); });
}
template <bool A_K, bool B_K>
static void gemm_simt(ngpt_backend *be, float *out, const float *A, const float *B, const float *bias, int M, int N, int K, size_t lda, size_t ldb,
                      size_t ldc, int accumulate) {
    dim3 grid((unsigned)((M + SM_TILE - 1) / SM_TILE), (unsigned)((N + SM_TILE - 1) / SM_TILE));
    CU_LAUNCH(be, "matmul_simt_kernel", matmul_simt_kernel<A_K, B_K>, grid, 256, 0, out, A, B, bias, M, N, K, lda, ldb, ldc, accumulate);
}

/* --- Hopper (sm_90a): wgmma's building blocks -------------------------------------------------------
 * Shared memory holds each operand the way wgmma reads it with 128-byte swizzling: rows of 64 elements
 * (128 bytes), the 16-byte chunk c of row r stored at chunk c ^ (r % 8), every tile 1024-byte aligned. A
 * k-contiguous operand is K-major (row = m or n, 64 k per row); an m- or n-contiguous operand is MN-major
 * (row = k, 64 m or n per row, blocks of 64 columns 8 KB apart) and wgmma transposes it. Descriptor strides
 * (PTX ISA, "canonical layouts", 128B swizzle): K-major: SBO = 1024 (8 rows to the next 8), LBO unused;
 * MN-major: LBO = 8192 (64 columns to the next 64), SBO = 1024 (8 k rows to the next 8). The kernels built
 * on them are compiled only for sm_90a; elsewhere their bodies are empty and the backend never launches
 * them (ngpt_wgmma_built). */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define NGPT_WGMMA_DEVICE 1
__device__ int ngpt_wgmma_built = 1;
#else
__device__ int ngpt_wgmma_built = 0;
#endif

#define WG_BK 64 /* k a stage */

#ifdef NGPT_WGMMA_DEVICE
static __device__ __forceinline__ uint64_t wg_desc(const unsigned char *smem, uint32_t lbo, uint32_t sbo) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}
#endif

#define WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_D16(i) WG_D4(i), WG_D4(i + 4), WG_D4(i + 8), WG_D4(i + 12)
#define WG_D64(i) WG_D16(i), WG_D16(i + 16), WG_D16(i + 32), WG_D16(i + 48)
/* One wgmma with f32 accumulators, for T's 16-bit type (T in scope): SHAPE ("m64n128k16"), OPERANDS the text
 * after the type (accumulator registers, A, B and the modifiers), OUTS the accumulators' constraints (one macro
 * name), then the inputs' constraints */
#define WG_MMA_ASYNC(SHAPE, OPERANDS, OUTS, ...)                                                                      \
    do {                                                                                                              \
        if constexpr (std::is_same<T, __half>::value)                                                                 \
            asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32.f16.f16 " OPERANDS ";\n" : OUTS : __VA_ARGS__);   \
        else                                                                                                          \
            asm volatile("wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 " OPERANDS ";\n" : OUTS : __VA_ARGS__); \
    } while (0)
#define WG_REGS64                                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
/* d (64x128 per warpgroup, f32) += A (64x16) B (16x128); TA / TB: the operand is MN-major */
template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
#ifdef NGPT_WGMMA_DEVICE
    WG_MMA_ASYNC("m64n128k16", WG_REGS64 ", %64, %65, 1, 1, 1, %66, %67", WG_D64(0), "l"(da), "l"(db), "n"(TA), "n"(TB));
#else
    (void)d; (void)da; (void)db;
#endif
}

/* --- Hopper (sm_90a): wgmma fed by the tensor memory accelerator, warp-specialised and persistent -----
 * 128x256x64 block tiles and three warpgroups. The first produces: one thread asks the copy engine
 * (cp.async.bulk.tensor) for each stage's A and B tiles, which complete on the stage's "full" mbarrier by
 * byte count. The other two consume: each owns 64 rows x 256 columns (wgmma m64n256k16, 128 fp32
 * accumulators a thread), waits for a stage to be full, and once the wgmma that read it has completed
 * arrives on its "empty" mbarrier, which the producer waits on before refilling it. The copy engine writes
 * the 128-byte swizzled layout above (a K-major tile is one box of 64 k x 128 or 256 rows; an MN-major tile
 * is boxes of 64 columns x 64 k, 8 KB apart); rows, columns and k past the matrix arrive as zeros. The grid is one block per SM
 * looping over output tiles (and split-K slices), so the producer fills the next tile's stages while the
 * consumers store the last one; whole tiles are stored through shared memory by the copy engine too
 * (mm_epilogue_direct), whose writes go on while the consumers start the next tile. setmaxnreg moves
 * registers from the producer (40) to the consumers (232).
 * The operands must be 16-byte aligned with row strides a multiple of 8 elements (the copy engine's rule);
 * other products run on mma.sync. Tensor maps are encoded on the host for every launch through
 * the driver's cuTensorMapEncodeTiled, reached with cudaGetDriverEntryPointByVersion (no library linked). */
#define TM_BM 128
#define TM_BN 256        /* the tiles' width, and the stages' room for B */
#define TM_BN_NARROW 192 /* the other width (wgmma m64n192k16), where its tiles fill the SMs' waves better: tma_tile_n */
#define TM_STAGES 4
#define TM_THREADS 384
#define TM_A_BYTES (TM_BM * WG_BK * 2)                                       /* 16 KB */
#define TM_B_BYTES (TM_BN * WG_BK * 2)                                       /* 32 KB */
#define TM_WARP_EPI_BYTES (2 * MM_BOX_BYTES) /* a consumer warp's epilogue memory: its two boxes, or the staged epilogue's staging */
static_assert(STG_WARP_FLOATS * 4 <= TM_WARP_EPI_BYTES, "the staged epilogue's staging does not fit a warp's boxes");
/* + alignment slack, + the epilogue's memory (8 consumer warps), + the mbarriers */
#define TM_SMEM_BYTES (TM_STAGES * (TM_A_BYTES + TM_B_BYTES) + 1024 + 8 * TM_WARP_EPI_BYTES + 1024)
static_assert(TM_SMEM_BYTES <= 232448, "the TMA kernel asks for more shared memory than a Hopper block may have (227 KB)");
/* setmaxnreg: the producer warpgroup gives registers back, the two consumers take them. An increase waits
 * until the block's pool has them, so the pool the kernel starts with (TM_THREADS x its register count, 168
 * under its launch bounds) must cover both: checked at backend creation (tma_registers_ok), else the cp.async
 * kernel runs. */
/* The bias gradient of a weight gradient's product (A MN-major: dout, K rows of M; dbias[m] is the sum of
 * column m over k): summed from the A tiles the product loads anyway, by warp 1 of the producer warpgroup (idle
 * otherwise), rather than by bias_backward reading dout from memory a second time (2 GB a step of GPT-2 124M
 * at batch 12). The tiles of the first column of tiles (n0 = 0) hold every k of their rows, each once: for
 * those the warp adds each stage's rows into one fp32 sum per column, in k order, before it releases the
 * stage (the stages' "empty" barriers count its arrival too), and at the tile's end adds its sums into dbias,
 * or, where the product is split along K, writes slice z's sums to partial[z M + m], which splitk_reduce_kernel's
 * last blocks add in slice order.
 * Each column's sum runs over k in the same order in the cooperative and the ping-pong kernels and at either
 * tile width, so the bits do not depend on the kernel. dbias NULL: nothing summed. */
template <typename T> struct TmColsum {
    T *dbias;
    float *partial; /* split-K: the slices' sums, splits x M floats; NULL otherwise */
};
/* Stream-K, for a weight gradient whose tiles are fewer than the SMs (streamk_plan): one block an SM, and block
 * b takes the b-th of gridDim.x equal shares of all the tiles' k tiles in a row (tile by tile), so a tile's k
 * range may be cut in up to four pieces, each summed by another block. Blocks gridDim.x / g apart (g: the
 * greatest common divisor of the tiles and the blocks) walk the same k at the same time, on tiles `period` =
 * tiles / g apart: the tiles are ordered so that those g tiles include every tile that reads the same rows of
 * the larger operand (a row of tiles, for A; a column, for B), which the L2 then holds for all of them, as when
 * every tile runs whole in one wave (in equal shares taken in the usual order, those tiles would read the same k
 * tiles at different times: up to three times A, 170 MB, for GPT-2's qkv, six times B for its MLP projection).
 * Each block walks its pieces from the end of its share back: first the piece that starts a tile and leaves it
 * unfinished (written to part's slot b, flag ready[b] set), last the one that finishes a tile another block
 * started. That finishing block waits for the flags of the blocks before it that hold the tile's earlier pieces
 * (each wrote its piece first, so the wait is short, and holds no block of a later SM back), adds their pieces
 * to its own, the latest first, and runs the epilogue; it clears the flags (zero between launches: they live
 * past the arena, not in the scratch). The bias-gradient warp writes its column sums of each piece of a tile it
 * sums (colpart, flags ready[gridDim.x + ...]: its 40 registers hold no more), and the finishing block's
 * consumers add them, in the same order, into the bias gradient. A tile's pieces depend only on the shape and
 * the SM count, so the bits do too. kt = 0: no stream-K (every other build ignores it). */
struct TmStreamK {
    float *part;    /* gridDim.x slots of TM_BM x TM_BN floats */
    float *colpart; /* 2 gridDim.x slots of TM_BM floats: each block's unfinished piece's, then its finishing one's */
    int *ready;     /* 3 gridDim.x flags: part's, then colpart's */
    int kt;         /* the k tiles of a tile (every tile has all K) */
    int period;     /* tiles / g */
    int rows_share; /* 1: the g tiles of one k phase are whole rows of tiles (sharing A), 0: whole columns (B) */
    int share;      /* the tiles of such a row (tiles_n) or column (tiles_m) */
    int groups;     /* g / share: the rows (columns) of one k phase */
};
#define TM_PRODUCER_REGS 40
#define TM_CONSUMER_REGS 232
#define TM_REGS_NEEDED (128 * TM_PRODUCER_REGS + 2 * 128 * TM_CONSUMER_REGS)
static_assert(TM_REGS_NEEDED <= 65536 / TM_THREADS / 8 * 8 * TM_THREADS, "setmaxnreg: the producer and consumers need more than the block's registers");

#ifdef NGPT_WGMMA_DEVICE
static __device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* the first 1024-byte aligned shared address at or after p (wgmma's and the copy engine's swizzled tiles) */
static __device__ __forceinline__ unsigned char *smem_align1024(unsigned char *p) { return p + ((1024u - (smem_addr(p) & 1023u)) & 1023u); }
/* A hint: the 128-byte line holding p into L2, nothing waits for it */
static __device__ __forceinline__ void prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}
/* What a TMA tile's epilogue will read from global memory (aux for EPI_DGELU and EPI_RESIDUAL, the old values
 * when accumulating) asked into L2 as its main loop starts, so the epilogue's loads, a chunk at a time, find
 * it there rather than in DRAM: thread t of the THREADS consumer threads working on the BM x BN tile takes row
 * m0 + t % BM, and of its 128-byte lines every (THREADS / BM)-th from line t / BM */
template <int BM, int BN, int THREADS, typename T>
static __device__ __forceinline__ void mm_prefetch_tile(const MmEpilogue<T> &ep, int M, int N, int m0, int n0, unsigned t) {
    static_assert(THREADS % BM == 0, "whole rows of threads");
    constexpr int LINE = 128 / sizeof(T);
    const int row = m0 + (int)(t % BM);
    if (ep.partial || row >= M || !(epi_reads_aux(ep.kind) || ep.accumulate)) return;
#pragma unroll
    for (int j = (int)(t / BM); j * LINE < BN; j += THREADS / BM) {
        const int col = n0 + j * LINE;
        if (col >= N) break;
        const size_t i = (size_t)row * ep.ldc + col;
        if (epi_reads_aux(ep.kind)) prefetch_l2(ep.aux + i);
        if (ep.accumulate) prefetch_l2(ep.out + i);
    }
}
static __device__ __forceinline__ void mbar_init(uint64_t *bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
/* the producer's arrival: this phase completes when the copies have written `bytes` more */
static __device__ __forceinline__ void mbar_expect_bytes(uint64_t *bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* until the phase of this parity has completed (a fresh barrier counts the phase before it, parity 1, as done) */
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, unsigned parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory");
}
/* until this thread's copy-engine stores (tma_store) have been written to global memory, not only read */
static __device__ __forceinline__ void bulk_wait_written() {
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
/* box (c0: inner coordinate, c1: outer) of the tensor map into shared memory, completing on bar */
static __device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
                     smem_addr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
                 : "memory");
}
#endif

#define WG_D128 WG_D64(0), WG_D64(64)
#define WG_REGS128                                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "\
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "\
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, "\
    "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, "\
    "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "\
    "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
/* d (64x256 per warpgroup, f32) += A (64x16) B (16x256); TA / TB: the operand is MN-major */
template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db) {
#ifdef NGPT_WGMMA_DEVICE
    WG_MMA_ASYNC("m64n256k16", WG_REGS128 ", %128, %129, 1, 1, 1, %130, %131", WG_D128, "l"(da), "l"(db), "n"(TA), "n"(TB));
#else
    (void)d; (void)da; (void)db;
#endif
}

#define WG_D96 WG_D64(0), WG_D16(64), WG_D16(80)
#define WG_REGS96                                                                                               \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "\
    "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "\
    "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, "\
    "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, "\
    "%90, %91, %92, %93, %94, %95}"
/* d (64x192 per warpgroup, f32) += A (64x16) B (16x192); TA / TB: the operand is MN-major */
template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], uint64_t da, uint64_t db) {
#ifdef NGPT_WGMMA_DEVICE
    WG_MMA_ASYNC("m64n192k16", WG_REGS96 ", %96, %97, 1, 1, 1, %98, %99", WG_D96, "l"(da), "l"(db), "n"(TA), "n"(TB));
#else
    (void)d; (void)da; (void)db;
#endif
}

#ifdef NGPT_WGMMA_DEVICE
/* Output tile t of a launch: its first row and column, its split-K slice and its k range [kb, kb + klen).
 * Consecutive tiles walk along the columns of one row of tiles (rows_first: the blocks of a wave share A's
 * tiles), else down the rows of one column (sharing B's); tiles_rows_first chooses. */
struct TmTile {
    int m0, n0, slice, kb, klen;
    int first_block; /* stream-K: the block holding the tile's first k tile (the pieces: blocks first_block .. this);
                      * -1: the piece leaves its tile unfinished (and goes to the block's slot); else this block */
};
static __device__ __forceinline__ TmTile tm_tile(int t, int M, int N, int K, int kps, int bm, int bn, int rows_first) {
    const int tiles_m = (M + bm - 1) / bm, tiles_n = (N + bn - 1) / bn;
    const int inner = rows_first ? tiles_n : tiles_m, outer = rows_first ? tiles_m : tiles_n, rest = t / inner;
    const int i = t % inner, o = rest % outer;
    TmTile r;
    r.m0 = (rows_first ? o : i) * bm;
    r.n0 = (rows_first ? i : o) * bn;
    r.slice = rest / outer;
    r.kb = kps ? r.slice * kps : 0;
    r.klen = kps ? min(K - r.kb, kps) : K;
    r.first_block = blockIdx.x;
    return r;
}
/* A block's walk (the producer, the bias-gradient warp and the consumers take the same): tiles blockIdx.x,
 * + gridDim.x, ..., or in the stream-K build (SK: TmStreamK) the pieces of its share [lo, hi) of the tiles' k
 * tiles, from its end back (32-bit: streamk_plan keeps the products of the shares' bounds and gridDim.x
 * under 2^31). The stream-K walk is a build of its own: one walk that chose between the two at run time made
 * the compiler build the consumers' whole loop twice (65 KB of machine code became 106). */
struct TmWalk {
    unsigned lo, hi; /* stream-K: the share's part still to walk; else hi is the next tile */
    int t, p, jq, jr; /* stream-K: the tile holding k tile hi - 1: t = p + period (jq share + jr) */
};
template <bool SK> static __device__ __forceinline__ TmWalk tm_walk(int tiles, const TmStreamK &sk) {
    if constexpr (!SK) return {0, blockIdx.x, 0, 0, 0, 0};
    const unsigned total = (unsigned)tiles * (unsigned)sk.kt, lo = blockIdx.x * total / gridDim.x, hi = (blockIdx.x + 1) * total / gridDim.x;
    const int t = hi > lo ? (int)((hi - 1) / (unsigned)sk.kt) : 0, j = t / sk.period;
    return {lo, hi, t, t % sk.period, j / sk.share, j % sk.share};
}
/* the walk's next tile (or stream-K piece) into tl; false at its end. Stream-K's tiles in their k phases
 * (TmStreamK): tile t = p + period j, j = jq share + jr, is row (column) of tiles p groups + jq, and the
 * jr-th tile of it; the walk steps t down without dividing */
template <bool SK>
static __device__ __forceinline__ bool tm_next(TmWalk &w, TmTile &tl, int M, int N, int K, int kps, int bm, int bn, int rows_first, int tiles,
                                               const TmStreamK &sk) {
    if constexpr (!SK) {
        if (w.hi >= (unsigned)tiles) return false;
        tl = tm_tile((int)w.hi, M, N, K, kps, bm, bn, rows_first);
        w.hi += gridDim.x;
        return true;
    }
    if (w.hi <= w.lo) return false;
    const unsigned kt = (unsigned)sk.kt, t0 = (unsigned)w.t * kt, k0 = (w.lo > t0 ? w.lo : t0) - t0, k1 = w.hi - t0;
    const int across = w.p * sk.groups + w.jq;
    tl.m0 = (sk.rows_share ? across : w.jr) * bm;
    tl.n0 = (sk.rows_share ? w.jr : across) * bn;
    tl.slice = 0;
    tl.kb = (int)k0 * WG_BK;
    tl.klen = min(K, (int)k1 * WG_BK) - tl.kb;
    /* the block whose share holds k tile t0 */
    tl.first_block = k1 != kt ? -1 : k0 ? (int)(((t0 + 1) * gridDim.x - 1) / ((unsigned)tiles * kt)) : (int)blockIdx.x;
    w.hi = t0 + k0;
    w.t--;
    if (w.p) {
        w.p--;
    } else {
        w.p = sk.period - 1;
        if (w.jr) {
            w.jr--;
        } else {
            w.jr = sk.share - 1;
            w.jq--;
        }
    }
    return true;
}
/* Stream-K's flags (TmStreamK): set publishes the stores its block made before the barrier that precedes it;
 * wait_clear spins until the flag is set (acquiring those stores for the barrier after it), then clears it */
static __device__ __forceinline__ void flag_set(int *flag) {
    asm volatile("fence.acq_rel.gpu;\n"
                 "st.relaxed.gpu.global.b32 [%0], 1;\n" ::"l"(flag)
                 : "memory");
}
static __device__ __forceinline__ void flag_wait_clear(int *flag) {
    int v = 0;
    do asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    while (!v);
    asm volatile("st.relaxed.gpu.global.b32 [%0], 0;\n" ::"l"(flag) : "memory");
}
#endif

#ifdef NGPT_WGMMA_DEVICE
/* Named barriers (0 is __syncthreads'): `threads` arrivals complete one; sync waits for it, arrive does not */
static __device__ __forceinline__ void named_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
static __device__ __forceinline__ void named_bar_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/* The TMA kernels' parts. Their barriers: each stage's "full" completes on the producer's expect-bytes
 * arrival and the copies' bytes, its "empty" on the arrivals of the `consumers` threads that read it. */
static __device__ __forceinline__ void tm_init_barriers(uint64_t *full, uint64_t *empty, int stages, unsigned consumers) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], consumers);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}
/* The producer warpgroup: it gives registers back, one thread issues, the rest leave. Tile t of the block's
 * (blockIdx.x + i gridDim.x) walk, BM x BN, k tile by k tile through the STAGES stages (A's BM x 64 at sA,
 * A_STAGE bytes apart, B's BN x 64 at sB, B_STAGE apart); `it` counts the k tiles passed so far over all its
 * tiles, so k tile it uses stage it % STAGES for the (it / STAGES)-th time, its phases of parity
 * (it / STAGES) & 1. */
template <bool A_K, bool B_K, int BM, int BN, int STAGES, int A_STAGE, int B_STAGE, bool SK, int REGS = TM_PRODUCER_REGS>
static __device__ __forceinline__ void tm_producer(const CUtensorMap *tmA, const CUtensorMap *tmB, unsigned char *sA, unsigned char *sB,
                                                   uint64_t *full, uint64_t *empty, int M, int N, int K, int kps, int tiles, int rows_first,
                                                   const TmStreamK &sk) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
    if (threadIdx.x != 0) return;
    uint32_t it = 0;
    TmTile tl;
    for (TmWalk w = tm_walk<SK>(tiles, sk); tm_next<SK>(w, tl, M, N, K, kps, BM, BN, rows_first, tiles, sk);) {
        for (int k = tl.kb; k < tl.kb + tl.klen; k += WG_BK, it++) {
            const int s = it % STAGES;
            mbar_wait(&empty[s], ((it / STAGES) & 1) ^ 1); /* its last use released (the first passes) */
            mbar_expect_bytes(&full[s], (BM + BN) * WG_BK * 2);
            unsigned char *a = sA + s * A_STAGE, *b = sB + s * B_STAGE;
            if (A_K) {
                tma_load(a, tmA, k, tl.m0, &full[s]);
            } else {
#pragma unroll
                for (int j = 0; j < BM / 64; j++) tma_load(a + j * 8192, tmA, tl.m0 + j * 64, k, &full[s]);
            }
            if (B_K) {
                tma_load(b, tmB, k, tl.n0, &full[s]);
            } else {
#pragma unroll
                for (int j = 0; j < BN / 64; j++) tma_load(b + j * 8192, tmB, tl.n0 + j * 64, k, &full[s]);
            }
        }
    }
}
/* A consumer warpgroup's main loop over the KT k tiles of its tile from stage it % STAGES on: issue(a, b)
 * issues the k tile's wgmma from the stage's A and B tiles, issued() runs once the last k tile's are issued
 * (after the loop: a call inside it, a branch between a wgmma's commit and its wait, made ptxas serialise the
 * wgmma, C7515); each stage is released once the wgmma that read it has completed, and every product is done
 * when this returns */
template <int STAGES, int A_STAGE, int B_STAGE, typename Issue, typename Issued>
static __device__ __forceinline__ void tm_consume(const unsigned char *sA, const unsigned char *sB, uint64_t *full, uint64_t *empty, uint32_t &it,
                                                  int KT, Issue &&issue, Issued &&issued) {
    for (int kt = 0; kt < KT; kt++, it++) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        issue(sA + s * A_STAGE, sB + s * B_STAGE);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* k tile kt - 1's products are done ... */
        if (kt > 0) mbar_arrive(&empty[(it - 1) % STAGES]);          /* ... so its stage may be refilled */
    }
    issued();
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    if (KT > 0) mbar_arrive(&empty[(it - 1) % STAGES]);
}
/* The bias-gradient warp (TmColsum): the block's tiles as its producer walks them (BM x BN, A's BM x 64 k
 * tile at sA, A_STAGE bytes apart, in boxes of 64 columns x 64 k, 8 KB apart, rows of 128 bytes swizzled);
 * lane l sums columns l (BM / 32) .. + BM / 32 - 1 of the tiles it sums and reads them 4 or 8 bytes at a time
 * (a warp's loads of one k row: whole rows of the boxes, no bank conflicts). Rows and columns past the matrix
 * arrive as zeros. */
template <typename T, int BM, int BN, int STAGES, int A_STAGE, bool SK>
static __device__ __forceinline__ void tm_colsum(const TmColsum<T> &cs, const unsigned char *sA, uint64_t *full, uint64_t *empty, int M, int N,
                                                 int K, int kps, int tiles, int rows_first, const TmStreamK &sk) {
    constexpr int CPL = BM / 32; /* columns a lane */
    const int lane = threadIdx.x & 31, c0 = lane * CPL;
    const int box = c0 / 64 * 8192, chunk = c0 % 64 / 8, within = c0 % 8 * (int)sizeof(T);
    uint32_t it = 0; /* as the producer's */
    TmTile tl;
    for (TmWalk w = tm_walk<SK>(tiles, sk); tm_next<SK>(w, tl, M, N, K, kps, BM, BN, rows_first, tiles, sk);) {
        const bool sums = tl.n0 == 0;
        float acc[CPL];
#pragma unroll
        for (int e = 0; e < CPL; e++) acc[e] = 0.0f;
        for (int k = tl.kb; k < tl.kb + tl.klen; k += WG_BK, it++) {
            const int s = it % STAGES;
            mbar_wait(&full[s], (it / STAGES) & 1);
            if (sums) {
                const unsigned char *a = sA + s * A_STAGE + box + within;
#pragma unroll 8
                for (int r = 0; r < WG_BK; r++) {
                    const RowVec<T, CPL> v = *(const RowVec<T, CPL> *)(a + r * 128 + ((chunk ^ (r & 7)) << 4));
#pragma unroll
                    for (int e = 0; e < CPL; e++) acc[e] += to_f(v.v[e]);
                }
            }
            __syncwarp(); /* every lane's reads of the stage are done ... */
            if (lane == 0) mbar_arrive(&empty[s]); /* ... so it may be refilled */
        }
        if (!sums) continue;
        if (SK && tl.first_block != (int)blockIdx.x) { /* stream-K: this piece's sums to the block's slot (of two: the
                                                        * piece that leaves its tile unfinished, the one that finishes it),
                                                        * for the finishing block's consumers to add (TmStreamK) */
            const int slot = tl.first_block < 0 ? 0 : 1;
#pragma unroll
            for (int e = 0; e < CPL; e++) sk.colpart[((size_t)slot * gridDim.x + blockIdx.x) * BM + c0 + e] = acc[e];
            __syncwarp();
            if (lane == 0) flag_set(&sk.ready[(1 + slot) * gridDim.x + blockIdx.x]);
            continue;
        }
#pragma unroll
        for (int e = 0; e < CPL; e++) {
            const int m = tl.m0 + c0 + e;
            if (m >= M) break;
            if (cs.partial) cs.partial[(size_t)tl.slice * M + m] = acc[e];
            else cs.dbias[m] = from_f<T>(to_f(cs.dbias[m]) + acc[e]);
        }
    }
}
/* A consumer warp's 16 rows from row0 of tile tl, BN columns wide (d: wgmma's accumulator layout: d[4i], d[4i+1]
 * at (row g, columns 8i + 2tq, +1), d[4i+2], d[4i+3] at row g + 8), written
 * straight from d where the tile is whole (`whole`: mm_direct_ok), else staged 32 columns at a time */
template <int EK, bool A_K, bool B_K, int BN, typename T>
static __device__ __forceinline__ void tm_epilogue(const MmEpilogue<T> &ep, int M, int N, const TmTile &tl, int row0, float (&d)[BN / 2], bool whole,
                                                   int lane, unsigned char *warp_epi, const CUtensorMap *tmOut, const CUtensorMap *tmAux) {
    if (whole) {
        if (ep.partial) mm_slice_direct<BN / 8, true>(ep.partial, N, tl.slice * M + row0, tl.n0, d, lane, warp_epi, tmOut);
        else mm_epilogue_direct<EK, BN / 8, true, mm_direct_acc<A_K, B_K>()>(ep, row0, tl.n0, d, lane, warp_epi, tmOut, tmAux);
    } else {
        if (lane == 0) bulk_wait_read<0>(); /* the staging overwrites the boxes: the copy engine has read them */
        __syncwarp();
        mm_epilogue_rows<BN / 32>(ep, M, N, tl.slice, row0, tl.n0, d, (float *)warp_epi, lane);
    }
}
#endif

/* tmOut, tmAux: out and aux in boxes of 64 columns x 16 rows, for the direct epilogue's stores (made where
 * ep.direct is set; tmAux for EPI_GELU); for split-K, tmOut is the fp32 slices in boxes of 32 x 16. BN: the
 * tiles' width, TM_BN or TM_BN_NARROW (tma_tile_n) */
template <typename T, bool A_K, bool B_K, int EK, int BN, bool SK = false>
__global__ void __launch_bounds__(TM_THREADS, 1)
    matmul_tma_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmOut,
                      const __grid_constant__ CUtensorMap tmAux, int M, int N, int K, int kps, int tiles, int rows_first, MmEpilogue<T> ep,
                      TmColsum<T> cs, TmStreamK sk) {
    after_previous_kernel();
#ifdef NGPT_WGMMA_DEVICE
    extern __shared__ __align__(1024) unsigned char tm_smem[];
    unsigned char *base = smem_align1024(tm_smem);
    unsigned char *sA = base, *sB = base + TM_STAGES * TM_A_BYTES, *epi = sB + TM_STAGES * TM_B_BYTES; /* every part 1024-byte aligned */
    uint64_t *full = (uint64_t *)(epi + 8 * TM_WARP_EPI_BYTES), *empty = full + TM_STAGES;
    const bool colsum = !A_K && cs.dbias; /* warp 1 sums the bias gradient (TmColsum) */
    static_assert(!SK || (!A_K && !B_K && BN == TM_BN && EK == EPI_PLAIN), "stream-K: weight gradients, tiles 256 wide");
    tm_init_barriers(full, empty, TM_STAGES, 2 * 128 + colsum); /* a stage is read by both consumer warpgroups (and that warp) */
    if (threadIdx.x < 128) {
        tm_producer<A_K, B_K, TM_BM, BN, TM_STAGES, TM_A_BYTES, TM_B_BYTES, SK>(&tmA, &tmB, sA, sB, full, empty, M, N, K, kps, tiles, rows_first, sk);
        if constexpr (!A_K)
            if (colsum && threadIdx.x >> 5 == 1)
                tm_colsum<T, TM_BM, BN, TM_STAGES, TM_A_BYTES, SK>(cs, sA, full, empty, M, N, K, kps, tiles, rows_first, sk);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(TM_CONSUMER_REGS));
    const int cw = (threadIdx.x >> 7) - 1; /* consumer warpgroup: rows cw*64 .. cw*64+63 of the tile */
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
    unsigned char *warp_epi = epi + ((threadIdx.x >> 5) - 4) * TM_WARP_EPI_BYTES; /* consumer warps 4..11 */
    float d[BN / 2];
    uint32_t it = 0; /* as the producer's */
    TmTile tl;
    for (TmWalk wk = tm_walk<SK>(tiles, sk); tm_next<SK>(wk, tl, M, N, K, kps, TM_BM, BN, rows_first, tiles, sk);) {
        if (tl.first_block >= 0) mm_prefetch_tile<TM_BM, BN, 256>(ep, M, N, tl.m0, tl.n0, threadIdx.x - 128);
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
        const int KT = (tl.klen + WG_BK - 1) / WG_BK;
        tm_consume<TM_STAGES, TM_A_BYTES, TM_B_BYTES>(sA, sB, full, empty, it, KT, [&](const unsigned char *a, const unsigned char *b) {
#pragma unroll
            for (int ks = 0; ks < WG_BK / 16; ks++) {
                uint64_t da = A_K ? wg_desc(a + cw * 64 * 128 + ks * 32, 16, 1024) : wg_desc(a + cw * 8192 + ks * 2048, 8192, 1024);
                uint64_t db = B_K ? wg_desc(b + ks * 32, 16, 1024) : wg_desc(b + ks * 2048, 8192, 1024);
                if constexpr (BN == 256) wgmma_m64n256k16<T, A_K ? 0 : 1, B_K ? 0 : 1>(d, da, db);
                else wgmma_m64n192k16<T, A_K ? 0 : 1, B_K ? 0 : 1>(d, da, db);
            }
        }, [] {});
#pragma unroll
        for (int i = 0; i < BN / 2; i++) asm volatile("" : "+f"(d[i])::"memory"); /* no read of d moves above the wait */
        if constexpr (SK) { /* stream-K (TmStreamK) */
            const int ctid = threadIdx.x - 128;
            if (tl.first_block < 0) { /* this piece to the block's slot, for the block that finishes the tile */
                float4 *mine = (float4 *)(sk.part + (size_t)blockIdx.x * TM_BM * TM_BN);
#pragma unroll
                for (int q = 0; q < BN / 8; q++) __stcg(mine + q * 256 + ctid, make_float4(d[4 * q], d[4 * q + 1], d[4 * q + 2], d[4 * q + 3]));
                named_bar_sync(3, 256);
                if (ctid == 0) flag_set(&sk.ready[blockIdx.x]);
                continue;
            }
            /* a tile this block finishes: the earlier pieces' blocks first_block .. blockIdx.x - 1 (none when it ran
             * whole), added to this one's, the latest first; every tile passes here, so the epilogue has one way in */
            const int pieces_before = (int)blockIdx.x - tl.first_block;
            const bool sums = cs.dbias && tl.n0 == 0 && pieces_before; /* the bias-gradient warp wrote this tile's sums */
            if (ctid == 0)
#pragma unroll 1
                for (int b = tl.first_block; b < (int)blockIdx.x; b++) {
                    flag_wait_clear(&sk.ready[b]);
                    if (sums) flag_wait_clear(&sk.ready[gridDim.x + b]);
                }
            if (sums && ctid == 0) flag_wait_clear(&sk.ready[2 * gridDim.x + blockIdx.x]); /* this block's own sums */
            named_bar_sync(3, 256);
#pragma unroll 1
            for (int b = (int)blockIdx.x - 1; b >= tl.first_block; b--) { /* a loop: each turn 32 loads of 16 bytes */
                const float4 *piece = (const float4 *)(sk.part + (size_t)b * TM_BM * TM_BN);
#pragma unroll
                for (int q = 0; q < BN / 8; q++) {
                    const float4 u = __ldcg(piece + q * 256 + ctid);
                    d[4 * q] += u.x, d[4 * q + 1] += u.y, d[4 * q + 2] += u.z, d[4 * q + 3] += u.w;
                }
            }
            if (sums && ctid < TM_BM && tl.m0 + ctid < M) { /* the bias gradient's column m0 + ctid, in the same order */
                float v = __ldcg(sk.colpart + ((size_t)gridDim.x + blockIdx.x) * TM_BM + ctid);
#pragma unroll 1
                for (int b = (int)blockIdx.x - 1; b >= tl.first_block; b--) v += __ldcg(sk.colpart + (size_t)b * TM_BM + ctid);
                cs.dbias[tl.m0 + ctid] = from_f<T>(to_f(cs.dbias[tl.m0 + ctid]) + v);
            }
        }
        const bool whole = mm_direct_ok<EK, mm_direct_acc<A_K, B_K>()>(ep, M, N, tl.m0, tl.n0, TM_BM, BN);
        tm_epilogue<EK, A_K, B_K, BN>(ep, M, N, tl, tl.m0 + cw * 64 + w * 16, d, whole, lane, warp_epi, &tmOut, &tmAux);
    }
    if (lane == 0) bulk_wait_written(); /* the stores are written, and the block's shared memory outlives their reads of it */
#else
    (void)tmA; (void)tmB; (void)tmOut; (void)tmAux; (void)M; (void)N; (void)K; (void)kps; (void)tiles; (void)rows_first; (void)ep; (void)cs; (void)sk;
#endif
}

/* The TMA kernel's ping-pong build (NGPT_PINGPONG): the same producer, but each consumer warpgroup works
 * on tiles of its own, 64 x 256 (the cooperative kernel's own half of a tile: wgmma m64n256k16, 128
 * accumulators a thread), the block's tiles taken in turn, so one warpgroup's epilogue runs while the other's
 * products keep the tensor cores busy. In the cooperative kernel above both warpgroups finish a tile together
 * and the tensor cores wait through its epilogue: on an H200 fc's forward with GELU took 1.5x, and the MLP
 * projection's input gradient with GELU's derivative 1.8x, the plain product's time (docs/performance.md,
 * seventh GPU run). The main loops take turns too (the order barrier of ping-pong GEMM schedules; the
 * attention's WgTurns): tile j's starts once tile j - 1's has waited for all its stages and issued its products
 * (named barrier 1 + its warpgroup). Without that, a warpgroup could wait for a stage two phases ahead of it,
 * which an mbarrier's parity cannot tell from the phase before: it would read the other's k tile. The price: a
 * 64 x 256 tile reads two thirds more of A and B per product from L2 than a 128 x 256 one. (A first version
 * with tiles of 128 x 128, a third more, two wgmma m64n128k16 a k step into two sets of 64 accumulators, had
 * ptxas serialise every wgmma, C7515; the cause turned out to be the turn's hand-over inside the main loop, not
 * the tile, so 128 x 128 with the hand-over after it is untried.) A stage holds 8 KB of A and 32 KB of B: four fit. Each output is summed over k in
 * the same order and split-K slices are chosen as for the cooperative kernel, so the bits are its bits
 * (test_gpu_ops holds them to its run). */
#define TP_BM 64
#define TP_STAGES 4
#define TP_A_BYTES (TP_BM * WG_BK * 2) /* 8 KB */
#define TP_SMEM_BYTES (TP_STAGES * (TP_A_BYTES + TM_B_BYTES) + 1024 + 8 * TM_WARP_EPI_BYTES + 1024)
static_assert(TP_SMEM_BYTES <= 232448, "the ping-pong TMA kernel asks for more shared memory than a Hopper block may have (227 KB)");
/* Its builds with A K-major have no bias-gradient warp (TmColsum), so the producer keeps only what its issuing
 * thread needs and the consumers take 240: with 232, ptxas spilled 16 to 52 bytes in its GELU epilogues (4 to 24 at
 * 240). The block's pool covers either split (tma_registers_ok checks TM_REGS_NEEDED). */
#define TP_PRODUCER_REGS 24
#define TP_CONSUMER_REGS 240
static_assert(128 * TP_PRODUCER_REGS + 2 * 128 * TP_CONSUMER_REGS <= TM_REGS_NEEDED, "setmaxnreg: the ping-pong split needs more than the pool checked");
template <typename T, bool A_K, bool B_K, int EK>
__global__ void __launch_bounds__(TM_THREADS, 1)
    matmul_tma_pingpong_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                               const __grid_constant__ CUtensorMap tmOut, const __grid_constant__ CUtensorMap tmAux, int M, int N, int K, int kps,
                               int tiles, int rows_first, MmEpilogue<T> ep, TmColsum<T> cs) {
    after_previous_kernel();
#ifdef NGPT_WGMMA_DEVICE
    extern __shared__ __align__(1024) unsigned char tp_smem[];
    unsigned char *base = smem_align1024(tp_smem);
    unsigned char *sA = base, *sB = base + TP_STAGES * TP_A_BYTES, *epi = sB + TP_STAGES * TM_B_BYTES;
    uint64_t *full = (uint64_t *)(epi + 8 * TM_WARP_EPI_BYTES), *empty = full + TP_STAGES;
    const bool colsum = !A_K && cs.dbias; /* as the cooperative kernel's */
    tm_init_barriers(full, empty, TP_STAGES, 128 + colsum); /* a stage is read by one consumer warpgroup (and the bias-gradient warp) */
    if (threadIdx.x < 128) {
        const TmStreamK whole_tiles = {NULL, NULL, NULL, 0, 1, 1, 1, 1};
        tm_producer<A_K, B_K, TP_BM, TM_BN, TP_STAGES, TP_A_BYTES, TM_B_BYTES, false, A_K ? TP_PRODUCER_REGS : TM_PRODUCER_REGS>(
            &tmA, &tmB, sA, sB, full, empty, M, N, K, kps, tiles, rows_first, whole_tiles);
        if constexpr (!A_K)
            if (colsum && threadIdx.x >> 5 == 1)
                tm_colsum<T, TP_BM, TM_BN, TP_STAGES, TP_A_BYTES, false>(cs, sA, full, empty, M, N, K, kps, tiles, rows_first, whole_tiles);
        return;
    }
    constexpr int consumer_regs = A_K ? TP_CONSUMER_REGS : TM_CONSUMER_REGS;
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_regs));
    const int cw = (threadIdx.x >> 7) - 1; /* consumer warpgroup 0 takes the block's tiles 0, 2, 4, ... of its walk, 1 the others */
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
    unsigned char *warp_epi = epi + ((threadIdx.x >> 5) - 4) * TM_WARP_EPI_BYTES;
    float d[TM_BN / 2];
    uint32_t it = 0; /* as the producer's: this warpgroup steps over the other's k tiles */
    if (cw == 1) named_bar_arrive(1, 256); /* warpgroup 0's first main loop needs no wait */
    for (int t = blockIdx.x + cw * gridDim.x; t < tiles; t += 2 * gridDim.x) {
        if (t != (int)blockIdx.x) /* the other warpgroup's tile, before this one */
            it += (tm_tile(t - gridDim.x, M, N, K, kps, TP_BM, TM_BN, rows_first).klen + WG_BK - 1) / WG_BK;
        const TmTile tl = tm_tile(t, M, N, K, kps, TP_BM, TM_BN, rows_first);
        const int KT = (tl.klen + WG_BK - 1) / WG_BK;
        mm_prefetch_tile<TP_BM, TM_BN, 128>(ep, M, N, tl.m0, tl.n0, threadIdx.x & 127);
#pragma unroll
        for (int i = 0; i < TM_BN / 2; i++) d[i] = 0.0f;
        named_bar_sync(1 + cw, 256); /* this main loop's turn */
        const bool next = t + (int)gridDim.x < tiles; /* the other warpgroup has a tile after this one */
        tm_consume<TP_STAGES, TP_A_BYTES, TM_B_BYTES>(sA, sB, full, empty, it, KT, [&](const unsigned char *a, const unsigned char *b) {
#pragma unroll
            for (int ks = 0; ks < WG_BK / 16; ks++) {
                uint64_t da = A_K ? wg_desc(a + ks * 32, 16, 1024) : wg_desc(a + ks * 2048, 8192, 1024);
                uint64_t db = B_K ? wg_desc(b + ks * 32, 16, 1024) : wg_desc(b + ks * 2048, 8192, 1024);
                wgmma_m64n256k16<T, A_K ? 0 : 1, B_K ? 0 : 1>(d, da, db);
            }
        }, [&] {
            if (next) named_bar_arrive(2 - cw, 256); /* its turn (never an arrival nobody waits for) */
        });
#pragma unroll
        for (int i = 0; i < TM_BN / 2; i++) asm volatile("" : "+f"(d[i])::"memory"); /* no read of d moves above the wait */
        const bool whole = mm_direct_ok<EK, mm_direct_acc<A_K, B_K>()>(ep, M, N, tl.m0, tl.n0, TP_BM, TM_BN);
        tm_epilogue<EK, A_K, B_K, TM_BN>(ep, M, N, tl, tl.m0 + w * 16, d, whole, lane, warp_epi, &tmOut, &tmAux);
    }
    if (lane == 0) bulk_wait_written(); /* every store written before the block's shared memory goes */
#else
    (void)tmA; (void)tmB; (void)tmOut; (void)tmAux; (void)M; (void)N; (void)K; (void)kps; (void)tiles; (void)rows_first; (void)ep; (void)cs;
#endif
}

/* The driver's tensor-map encoder, found once per backend (NULL where the driver has none: no TMA kernel) */
typedef CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                         const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                         CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static void *find_tensor_map_encoder(void) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return fn;
}

/* A row-major matrix of `outer` rows of `inner` elements (16-bit, or fp32 split-K slices; row stride ld) read
 * or written by the copy engine in boxes of box_inner x box_outer with 128-byte swizzling; 0 on success. */
template <typename T>
static int tma_map(const CudaImpl *im, CUtensorMap *map, const T *p, size_t inner, size_t outer, size_t ld, unsigned box_inner, unsigned box_outer) {
    cuuint64_t dims[2] = {(cuuint64_t)inner, (cuuint64_t)outer}, strides[1] = {(cuuint64_t)(ld * sizeof(T))};
    cuuint32_t box[2] = {box_inner, box_outer}, unit[2] = {1, 1};
    CUtensorMapDataType type = std::is_same<T, float>::value    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                               : std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    return ((TensorMapEncodeTiled)im->encode_tensor_map)(map, type, 2, (void *)p, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
}

/* The build of the TMA kernel for epilogue kind EK where it has one (mm_direct_kind), else the plain one (whose
 * direct path the other kinds never take): the cooperative kernel's of width BN, or (PINGPONG) the ping-pong one */
template <typename T, bool A_K, bool B_K, int EK, int BN, bool PINGPONG>
static void tma_launch(ngpt_backend *be, unsigned grid, const CUtensorMap &ma, const CUtensorMap &mb, const CUtensorMap &mo, const CUtensorMap &mx,
                       int M, int N, int K, int kps, int tiles, int rows_first, const MmEpilogue<T> &ep, const TmColsum<T> &cs,
                       const TmStreamK &sk) {
    constexpr int built = mm_direct_kind<A_K, B_K>(EK) ? EK : EPI_PLAIN;
    if constexpr (PINGPONG) {
        CU_LAUNCH(be, "matmul_tma_pingpong_kernel", matmul_tma_pingpong_kernel<T, A_K, B_K, built>, grid, TM_THREADS, TP_SMEM_BYTES, ma, mb, mo, mx,
                  M, N, K, kps, tiles, rows_first, ep, cs);
    } else if (sk.kt) {
        if constexpr (!A_K && !B_K && BN == TM_BN && built == EPI_PLAIN)
            CU_LAUNCH(be, "matmul_tma_kernel", matmul_tma_kernel<T, A_K, B_K, built, BN, true>, grid, TM_THREADS, TM_SMEM_BYTES, ma, mb, mo, mx, M, N,
                      K, kps, tiles, rows_first, ep, cs, sk);
        else
            cu_fail(be, NGPT_ERR_ARG, "cuda matmul: stream-K asked of a build without it (a %d x %d product)", M, N);
    } else {
        CU_LAUNCH(be, "matmul_tma_kernel", matmul_tma_kernel<T, A_K, B_K, built, BN>, grid, TM_THREADS, TM_SMEM_BYTES, ma, mb, mo, mx, M, N, K, kps,
                  tiles, rows_first, ep, cs, sk);
    }
}

/* The TMA kernel's tile width for an M x N product in `splits` slices: TM_BN_NARROW where its waves (tiles
 * over SMs, the last one counted whole) times its width come under 0.9x TM_BN's, else TM_BN. GPT-2 124M's
 * products with N = 768 are 288 tiles of 128 x 256 on an H100 or H200's 132 SMs, three waves of which the
 * last holds 24 (73% of the SMs' time at work), or 384 of 128 x 192, three waves at 97%. The width changes
 * no bits: every output is summed over k in the same order. NGPT_TILE_N fixes it, to compare. */
static int tma_tile_n(const CudaImpl *im, int M, int N, int splits) {
    if (im->tma_tile_n) return im->tma_tile_n;
    auto cost = [&](int bn) {
        const long long tiles = (long long)((M + TM_BM - 1) / TM_BM) * ((N + bn - 1) / bn) * splits;
        return (double)((tiles + im->sm_count - 1) / im->sm_count) * bn;
    };
    return cost(TM_BN_NARROW) < 0.9 * cost(TM_BN) ? TM_BN_NARROW : TM_BN;
}

/* Stream-K (TmStreamK) for a weight gradient on the TMA kernel, into *sk: where its 128 x 256 tiles are fewer than
 * the SMs but at least a third as many (a tile is then cut in at most four pieces), K >= 2048, the blocks' pieces
 * fit the scratch, and the tiles of one k phase can hold whole rows of tiles (where A is the larger operand) or
 * whole columns (B); elsewhere *sk is left as it was (kt = 0: split-K's rule). GPT-2 124M's at batch 12 on an H100
 * or H200 (132 SMs, K = 12288): qkv's (54 tiles) and fc's and the MLP projection's (72), which split-K's rule ran
 * as 108 blocks (qkv in two slices) and 96 (the others whole, in tiles 192 wide), so a quarter of the SMs idled.
 * The pieces take precedence over NGPT_TILE_N and NGPT_PINGPONG, and take the tiles in their own order whatever
 * NGPT_TILE_ORDER says, so those variants keep the default's bits; NGPT_SPLITK_MAX=1 (nothing split) turns them
 * off, as NGPT_STREAMK=0 does. */
static void streamk_plan(const CudaImpl *im, int M, int N, int K, TmStreamK *sk) {
    const int tiles_m = (M + TM_BM - 1) / TM_BM, tiles_n = (N + TM_BN - 1) / TM_BN, blocks = im->sm_count;
    const long long tiles = (long long)tiles_m * tiles_n;
    if (!im->streamk || !im->streamk_ready || im->splitk_most == 1 || K < 2048 || blocks * 3 * (long long)sizeof(int) > STREAMK_FLAG_BYTES)
        return;
    if (tiles >= blocks || 3 * tiles < blocks || (size_t)blocks * (TM_BM * TM_BN + 2 * TM_BM) * sizeof(float) > im->scratch_bytes) return;
    const int kt = (K + WG_BK - 1) / WG_BK;
    if ((tiles * kt + 1) * blocks >= INT_MAX) return; /* the walk's 32-bit bounds (TmWalk) */
    int g = blocks, r = (int)tiles; /* g = gcd(tiles, blocks): the tiles of one k phase */
    while (r) {
        const int q = g % r;
        g = r;
        r = q;
    }
    const int rows_share = M >= N, share = rows_share ? tiles_n : tiles_m; /* A (dout, K x M) the larger: its rows of tiles share a phase, else B's columns */
    if (g % share) return;
    *sk = {(float *)im->scratch, (float *)im->scratch + (size_t)blocks * TM_BM * TM_BN, im->streamk_ready, kt, (int)tiles / g, rows_share, share, g / share};
}

/* The TMA kernel for this product (operands checked with vec_ok by the caller), with its bias gradient where
 * cs.dbias is set, in stream-K pieces where streamk_plan set sk: 1 when launched, 0 when the driver would not
 * encode a tensor map for them (nothing happened) */
template <typename T, bool A_K, bool B_K>
static int gemm_tma(ngpt_backend *be, const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, int splits, int kps, const TmStreamK &sk,
                    const MmEpilogue<T> &ep_in, const TmColsum<T> &cs) {
    CudaImpl *im = impl_of(be);
    const bool pingpong = !sk.kt && (im->tma_pingpong == TMA_PINGPONG_ALL ||
                                     (im->tma_pingpong == TMA_PINGPONG_GELU && (ep_in.kind == EPI_GELU || ep_in.kind == EPI_DGELU)));
    const int bm = pingpong ? TP_BM : TM_BM, bn = pingpong || sk.kt ? TM_BN : tma_tile_n(im, M, N, splits);
    CUtensorMap ma, mb;
    if (tma_map(im, &ma, A, A_K ? K : M, A_K ? M : K, lda, 64, A_K ? (unsigned)bm : 64) ||
        tma_map(im, &mb, B, B_K ? K : N, B_K ? N : K, ldb, 64, B_K ? (unsigned)bn : 64))
        return 0;
    long long tiles = (long long)((M + bm - 1) / bm) * ((N + bn - 1) / bn) * splits;
    if (tiles > INT_MAX) return 0;
    unsigned grid = (unsigned)(tiles < im->sm_count && !sk.kt ? tiles : im->sm_count);
    MmEpilogue<T> ep = ep_in;
    /* the direct epilogue's stores go through the copy engine: out (and GELU's aux) 16-byte aligned with rows
     * a multiple of 16 bytes apart, else every tile is staged; split-K slices (rows of N floats) likewise */
    CUtensorMap mo, mx;
    memset(&mo, 0, sizeof mo);
    memset(&mx, 0, sizeof mx);
    const bool gelu = ep.kind == EPI_GELU;
    if (ep.partial)
        ep.direct = im->direct_epilogue && N % 4 == 0 && ((uintptr_t)ep.partial & 15) == 0 &&
                    !tma_map(im, &mo, ep.partial, (size_t)N, (size_t)M * splits, (size_t)N, 32, 16);
    else
        ep.direct = im->direct_epilogue && (ep.accumulate != 0) == mm_direct_acc<A_K, B_K>() && mm_direct_kind<A_K, B_K>(ep.kind) &&
                    (ep.ldc * sizeof(T)) % 16 == 0 && (((uintptr_t)ep.out | (gelu ? (uintptr_t)ep.aux : 0)) & 15) == 0 &&
                    !tma_map(im, &mo, ep.out, (size_t)N, (size_t)M, ep.ldc, 64, 16) &&
                    !(gelu && tma_map(im, &mx, ep.aux, (size_t)N, (size_t)M, ep.ldc, 64, 16));
    mm_launch_kind<A_K, B_K>(ep.kind, [&](auto ek) {
        constexpr int EK = decltype(ek)::value;
        const int rows_first = tiles_rows_first(im, (M + bm - 1) / bm, (N + bn - 1) / bn); /* (stream-K: its own order) */
        if (pingpong) tma_launch<T, A_K, B_K, EK, TM_BN, true>(be, grid, ma, mb, mo, mx, M, N, K, kps, (int)tiles, rows_first, ep, cs, sk);
        else if (bn == TM_BN_NARROW)
            tma_launch<T, A_K, B_K, EK, TM_BN_NARROW, false>(be, grid, ma, mb, mo, mx, M, N, K, kps, (int)tiles, rows_first, ep, cs, sk);
        else tma_launch<T, A_K, B_K, EK, TM_BN, false>(be, grid, ma, mb, mo, mx, M, N, K, kps, (int)tiles, rows_first, ep, cs, sk);
    });
    return 1;
}

/* Split-K's second pass: the sum of the slices (ep.partial) in slice order, finished as any product's
 * result. Deterministic: the slice count depends only on the shape, the GPU and the planned scratch. A thread
 * takes 4 adjacent results (SPLITK_VEC), reading them 16 bytes at a time from each slice where N is a multiple
 * of 4 (every row of the slices then starts 16-byte aligned), else one at a time. The blocks from sums_block
 * on (none when cs.partial is NULL) add the slices' bias-gradient sums instead (TmColsum), one column a
 * thread in slice order, as colsum_final_kernel does: one launch fewer for each split weight gradient. */
#define SPLITK_VEC 4
template <typename T> __device__ void colsum_add_slices(T *dbias, const float *partial, int OC, int G, int c) {
    float t = 0;
    for (int g = 0; g < G; g++) t += partial[(size_t)g * OC + c];
    dbias[c] = from_f<T>(to_f(dbias[c]) + t);
}
template <typename T> __global__ void splitk_reduce_kernel(MmEpilogue<T> ep, int M, int N, int splits, TmColsum<T> cs, unsigned sums_block) {
    after_previous_kernel();
    if (blockIdx.x >= sums_block) {
        const int c = (int)((blockIdx.x - sums_block) * blockDim.x + threadIdx.x);
        if (c < M) colsum_add_slices(cs.dbias, cs.partial, M, splits, c);
        return;
    }
    const size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * SPLITK_VEC, MN = (size_t)M * N;
    if (i0 >= MN) return;
    float v[SPLITK_VEC] = {};
    if (N % SPLITK_VEC == 0) {
        for (int z = 0; z < splits; z++) {
            const float4 p = *(const float4 *)(ep.partial + (size_t)z * MN + i0);
            v[0] += p.x, v[1] += p.y, v[2] += p.z, v[3] += p.w;
        }
    } else {
        for (int z = 0; z < splits; z++)
#pragma unroll
            for (int e = 0; e < SPLITK_VEC; e++)
                if (i0 + e < MN) v[e] += ep.partial[(size_t)z * MN + i0 + e];
    }
#pragma unroll
    for (int e = 0; e < SPLITK_VEC; e++) {
        const size_t i = i0 + e;
        if (i < MN) mm_finish(ep, (i / (size_t)N) * ep.ldc + i % (size_t)N, (int)(i % (size_t)N), v[e]);
    }
}

/* How many K slices a 16-bit product runs as: as many as its bm x bn tiles fit in one wave of the GPU's block
 * slots (slots: SMs x blocks per SM), up to most, while each slice keeps at least 1024 of a K of 2048 or more
 * and the fp32 slices fit the scratch. Never a second wave: a product whose tiles fill more than half the
 * slots runs whole. On an H200 (2026-11-28, bench --kernels) filling more waves lost to the slices' round
 * trip through memory: qkv's weight gradient in 7 slices against 2, fc's and the MLP projection's in 5
 * against 1, the classifier's input gradient in 5 against 2 (0.91-0.96x), where the attention projection's
 * 18 tiles in 7 slices (one wave) beat 2 slices by 1.33x. */
static int splitk_slices(ngpt_backend *be, int M, int N, int K, int bm, int bn, long long slots, int most) {
    CudaImpl *im = impl_of(be);
    const long long tiles = (long long)((M + bm - 1) / bm) * ((N + bn - 1) / bn);
    int splits = 1;
    if (K < 2048) return 1;
    while (splits < most && tiles * (splits + 1) <= slots && K / (splits + 1) >= 1024 &&
           (size_t)(splits + 1) * M * N * sizeof(float) <= im->scratch_bytes)
        splits++;
    return splits;
}

/* dbias: block (x: 32 columns, y: row group) -> partial[group][col]; 8 warps take rows in turn and their sums
 * are added in warp order. Then one thread per column adds the groups in order. */
template <typename T> __global__ void colsum_partial_kernel(float *partial, const T *x, int N, int OC, int rows_per_group) {
    after_previous_kernel();
    __shared__ float s[8][33];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int col = blockIdx.x * 32 + lane, g = blockIdx.y;
    int r0 = g * rows_per_group, r1 = min(N, r0 + rows_per_group);
    float acc = 0;
    if (col < OC)
        for (int r = r0 + warp; r < r1; r += 8) acc += to_f(x[(size_t)r * OC + col]);
    s[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && col < OC) {
        float t = 0;
        for (int w = 0; w < 8; w++) t += s[w][lane];
        partial[(size_t)g * OC + col] = t;
    }
}
template <typename T> __global__ void colsum_final_kernel(T *dbias, const float *partial, int OC, int G) {
    after_previous_kernel();
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < OC) colsum_add_slices(dbias, partial, OC, G, c);
}
static void bias_backward(ngpt_backend *be, void *dbias, const void *dout, int N, int OC) {
    CudaImpl *im = impl_of(be);
    if (N <= 0 || OC <= 0) return;
    size_t have = im->scratch ? im->scratch_bytes / ((size_t)OC * sizeof(float)) : 0;
    int G = RED_GROUPS;
    if ((size_t)G > have) G = (int)have;
    if (G > N) G = N;
    if (G < 1) {
        scratch_get(be, (size_t)OC * sizeof(float), "matmul_backward (dbias)");
        return;
    }
    int rpg = (N + G - 1) / G;
    G = (N + rpg - 1) / rpg;
    float *partial = (float *)im->scratch;
    dim3 grid((unsigned)((OC + 31) / 32), (unsigned)G);
    int failed = 0;
    DISPATCH_DTYPE(be->dtype, T, failed = CU_LAUNCH(be, "colsum_partial_kernel", colsum_partial_kernel<T>, grid, 256, 0, partial, (const T *)dout, N,
                                                    OC, rpg));
    if (failed) return;
    DISPATCH_DTYPE(be->dtype, T, CU_LAUNCH(be, "colsum_final_kernel", colsum_final_kernel<T>, (OC + 255) / 256, 256, 0, (T *)dbias, partial, OC, G));
}

/* The three layouts the model uses: FWD (A k-contig, B k-contig), DINP (A k-contig, B n-contig), DW (A m-contig, B n-contig) */
enum { MM_FWD, MM_DINP, MM_DW };
#define GEMM_LAYOUTS(CALL_T)                                   \
    switch (layout) {                                          \
    case MM_FWD: CALL_T(true, true); break;                    \
    case MM_DINP: CALL_T(true, false); break;                  \
    default: CALL_T(false, false); break;                      \
    }

/* 16-bit products: on sm_90a the TMA kernel where the operands allow it; elsewhere, and for the rest, mma.sync. Split along K when that fills the GPU better (the slices in fp32 scratch, then
 * finished in order by splitk_reduce_kernel, epilogue included). Whether a product splits depends on its
 * shape and the kernel alone, never on its epilogue, so a fused product rounds as the separate one does.
 * dbias (a weight gradient's, DW: A is dout, lda = M): += A's column sums, by the TMA kernel from its own
 * tiles (TmColsum; a split product's slices' sums in the scratch after the slices, where they fit), else
 * by bias_backward. */
template <typename T, bool A_K, bool B_K>
static void gemm_16_layout(ngpt_backend *be, const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, const MmEpilogue<T> &ep,
                           T *dbias) {
    CudaImpl *im = impl_of(be);
    const int tma = im->use_tma && vec_ok(A, lda) && vec_ok(B, ldb);
    /* the TMA kernel's 128x256 tiles are twice as few: up to 8 slices (the attention projection's weight
     * gradient, 18 tiles for C = 768, fills 126 of 132 SMs with 7) */
    const int rule_most = tma ? 8 : 4, most = im->splitk_most && im->splitk_most < rule_most ? im->splitk_most : rule_most;
    TmStreamK sk = {NULL, NULL, NULL, 0, 1, 1, 1, 1}; /* kt = 0: whole tiles (or split-K's slices) */
    if (tma && !A_K && !B_K && ep.kind == EPI_PLAIN) streamk_plan(im, M, N, K, &sk);
    int splits = sk.kt ? 1
               : tma ? splitk_slices(be, M, N, K, TM_BM, TM_BN, im->sm_count, most)
                     : splitk_slices(be, M, N, K, 128, 128, (long long)im->sm_count * im->mm_blocks_per_sm, most);
    int kps = 0;
    if (splits > 1) {
        kps = ((K + splits - 1) / splits + 63) / 64 * 64; /* whole 64-wide k tiles per slice */
        splits = (K + kps - 1) / kps;
    }
    if (splits < 2) {
        splits = 1;
        kps = 0;
    }
    MmEpilogue<T> ep1 = ep;
    if (kps) ep1.partial = (float *)im->scratch;
    TmColsum<T> cs = {NULL, NULL};
    if (dbias && !A_K && im->fused_dbias && (!kps || (size_t)splits * M * (N + 1) * sizeof(float) <= im->scratch_bytes))
        cs = {dbias, kps ? ep1.partial + (size_t)splits * M * N : NULL};
    const bool tma_ran = tma && gemm_tma<T, A_K, B_K>(be, A, B, M, N, K, lda, ldb, splits, kps, sk, ep1, cs);
    if (!tma_ran) gemm_tc<T, A_K, B_K>(be, A, B, M, N, K, lda, ldb, splits, kps, ep1);
    const bool tile_sums = tma_ran && cs.dbias; /* else bias_backward's, after the product */
    if (kps && be->status == NGPT_OK) {
        const size_t MN = (size_t)M * N;
        const unsigned sums_block = (unsigned)((MN + 256 * SPLITK_VEC - 1) / (256 * SPLITK_VEC));
        const unsigned blocks = sums_block + (tile_sums ? (unsigned)((M + 255) / 256) : 0);
        CU_LAUNCH(be, "splitk_reduce_kernel", splitk_reduce_kernel<T>, blocks, 256, 0, ep1, M, N, splits, tile_sums ? cs : TmColsum<T>{NULL, NULL},
                  sums_block);
    }
    if (dbias && !tile_sums && be->status == NGPT_OK) bias_backward(be, dbias, A, K, M);
}
template <typename T>
static void gemm_16(ngpt_backend *be, int layout, const T *A, const T *B, int M, int N, int K, size_t lda, size_t ldb, const MmEpilogue<T> &ep,
                    T *dbias) {
#define CALL_16(AK, BK) gemm_16_layout<T, AK, BK>(be, A, B, M, N, K, lda, ldb, ep, dbias)
    GEMM_LAYOUTS(CALL_16)
#undef CALL_16
}

/* out (M,N, row stride ldc) = A B [+ bias] [+= old out], then the epilogue kind (EPI_GELU: aux = gelu(out);
 * EPI_DGELU: out *= gelu'(aux); EPI_RESIDUAL: out = aux + out). F32 runs the SIMT kernel and the separate op
 * after it (the same results). dbias (MM_DW only, A dense: lda = M): += the sums of A's columns over its K rows,
 * the bias gradient (gemm_16_layout). */
static void gemm(ngpt_backend *be, int layout, void *out, const void *A, const void *B, const void *bias, int M, int N, int K, size_t lda,
                 size_t ldb, size_t ldc, int accumulate, int kind = EPI_PLAIN, void *aux = NULL, void *dbias = NULL) {
    if (dbias && (layout != MM_DW || lda != (size_t)M)) {
        cu_fail(be, NGPT_ERR_ARG, "cuda matmul: a bias gradient needs the weight gradient's layout and a dense dout");
        return;
    }
    if (M <= 0 || N <= 0 || K <= 0 || be->dtype == NGPT_DTYPE_F32) {
        if (dbias) bias_backward(be, dbias, A, K, M); /* the SIMT kernel's sums, or nothing to fuse with */
        dbias = NULL;
    }
    if (M <= 0 || N <= 0) return;
    const int tile_n = be->dtype == NGPT_DTYPE_F32 ? SM_TILE : MM_BN; /* the narrowest tiles of the kernels gridded on N */
    if ((unsigned)((N + tile_n - 1) / tile_n) > 65535u) {
        cu_fail(be, NGPT_ERR_ARG, "cuda matmul: N = %d is too large for one launch (at most %d)", N, 65535 * tile_n);
        return;
    }
    if (be->dtype == NGPT_DTYPE_F32) {
#define CALL_SIMT(AK, BK) \
    gemm_simt<AK, BK>(be, (float *)out, (const float *)A, (const float *)B, (const float *)bias, M, N, K, lda, ldb, ldc, accumulate)
        GEMM_LAYOUTS(CALL_SIMT)
#undef CALL_SIMT
        if (kind != EPI_PLAIN && ldc != (size_t)N) cu_fail(be, NGPT_ERR_ARG, "cuda matmul: a fused epilogue needs a dense output");
        else if (kind == EPI_GELU) cu_gelu_forward(be, aux, out, (size_t)M * N);
        else if (kind == EPI_DGELU) cu_gelu_backward(be, out, aux, out, (size_t)M * N);
        else if (kind == EPI_RESIDUAL) cu_residual_forward(be, out, aux, out, (size_t)M * N);
    } else if (be->dtype == NGPT_DTYPE_BF16) {
        typedef __nv_bfloat16 T;
        gemm_16<T>(be, layout, (const T *)A, (const T *)B, M, N, K, lda, ldb, MmEpilogue<T>{(T *)out, ldc, (const T *)bias, accumulate, kind, (T *)aux, NULL, 0},
                   (T *)dbias);
    } else {
        typedef __half T;
        gemm_16<T>(be, layout, (const T *)A, (const T *)B, M, N, K, lda, ldb, MmEpilogue<T>{(T *)out, ldc, (const T *)bias, accumulate, kind, (T *)aux, NULL, 0},
                   (T *)dbias);
    }
}
#undef GEMM_LAYOUTS

/* out (N,OC) = bias + inp (N,C) . w^T for a few rows (decoding: one row per sample), where a 128-row tile
 * would leave the GPU nearly idle (GPT-2's 768 outputs are 6 tiles) and read each weight through a tile's
 * pipeline on a few SMs. The result does not depend on the launch: each kernel adds its partial sums in a fixed
 * order. Each result goes through the products' epilogue (mm_finish: the bias, then EPI_GELU's or EPI_RESIDUAL's
 * step, in the separate ops' roundings), so the fused forwards of a few rows are one launch with their bits. */
#define GEMV_WARPS 8
/* F32, and 16-bit rows that are not 16-byte vectors, up to GEMV_MAX_ROWS rows: one warp per output column reads
 * its weight row once, coalesced, and dots it with every input row (read through the cache); the lanes' sums are
 * added by a fixed shuffle tree. */
#define GEMV_MAX_ROWS 8
template <typename T>
__global__ void __launch_bounds__(GEMV_WARPS * 32) gemv_kernel(MmEpilogue<T> ep, const T *inp, const T *w, int N, int C, int OC) {
    after_previous_kernel();
    const int lane = threadIdx.x & 31, o = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (o >= OC) return;
    const T *wr = w + (size_t)o * C;
    float acc[GEMV_MAX_ROWS];
#pragma unroll
    for (int n = 0; n < GEMV_MAX_ROWS; n++) acc[n] = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float wv = to_f(wr[c]);
#pragma unroll
        for (int n = 0; n < GEMV_MAX_ROWS; n++)
            if (n < N) acc[n] = fmaf(to_f(__ldg(inp + (size_t)n * C + c)), wv, acc[n]);
    }
#pragma unroll
    for (int n = 0; n < GEMV_MAX_ROWS; n++)
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) acc[n] += __shfl_xor_sync(0xffffffffu, acc[n], d);
    if (lane == 0)
#pragma unroll
        for (int n = 0; n < GEMV_MAX_ROWS; n++)
            if (n < N) mm_finish(ep, (size_t)n * OC + o, o, acc[n]);
}

/* 16-bit rows of 16-byte vectors (C a multiple of 8), up to GEMV_TC_ROWS rows, on the tensor cores: a block
 * takes 8 output columns (one n8 tile of mma m16n8k16, the rows its m16) and its warps split C between them 32
 * at a time (chunk j to warp j % GEMV_WARPS). In a chunk, lane (g, q) = (lane / 4, lane % 4) loads 16 bytes,
 * k = 8q..8q+7, of weight row g and of input rows g and g + 8, and the chunk's two mma take those eight k in an
 * order both operands share (the first 8q, 8q+1 as its k 2q, 2q+1 and 8q+2, 8q+3 as 2q+8, 2q+9; the second the
 * other four likewise): each weight is one 16-byte load of one lane, each input vector feeds 8 columns, and a
 * lane keeps GEMV_TC_LOADS chunks' loads in flight. Rows past N, columns past OC and k past C are zeros. The
 * warps' accumulators are then added in warp order. */
#define GEMV_TC_ROWS 16
#define GEMV_TC_LOADS 4
/* LayerNorm of 8 values of a row (a 16-byte vector x) whose mean and 1 / standard deviation are st, by the LayerNorm
 * weights w and biases b of their columns: layernorm_forward_kernel's arithmetic */
template <typename T> static __device__ __forceinline__ uint4 ln_normalize(uint4 x, float2 st, uint4 w, uint4 b) {
    RowVec<T, 8> xv, wv, bv;
    memcpy(&xv, &x, 16);
    memcpy(&wv, &w, 16);
    memcpy(&bv, &b, 16);
#pragma unroll
    for (int e = 0; e < 8; e++) xv.v[e] = from_f<T>(ln_value(to_f(xv.v[e]), st.x, st.y, to_f(wv.v[e]), to_f(bv.v[e])));
    memcpy(&x, &xv, 16);
    return x;
}
/* LN: the input rows are LayerNorm's input, normalized on the way in by ln_w and ln_b (ln_b may be NULL), in
 * layernorm_forward_kernel's bits: each block first works out its rows' mean and 1 / standard deviation, a warp a
 * row, as that kernel does (rows of at most LN_MAX_NV vectors a lane), then normalizes each loaded vector. */
template <typename T, bool LN>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_tc_kernel(MmEpilogue<T> ep, const T *inp, const T *w, int N, int C, int OC, const T *ln_w, const T *ln_b) {
    after_previous_kernel();
    __shared__ float4 part[GEMV_WARPS][32];
    __shared__ float2 row_stats[GEMV_TC_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3, o0 = blockIdx.x * 8;
    const bool has_w = o0 + g < OC, has_lo = g < N, has_hi = g + 8 < N;
    const T *wr = w + (size_t)(has_w ? o0 + g : 0) * C + 8 * q, *lo_row = inp + (size_t)(has_lo ? g : 0) * C + 8 * q,
            *hi_row = inp + (size_t)(has_hi ? g + 8 : 0) * C + 8 * q;
    const int chunks = (C + 31) / 32;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    float2 st_lo = make_float2(0.0f, 0.0f), st_hi = st_lo;
    if constexpr (LN) {
        for (int r = warp; r < N; r += GEMV_WARPS) {
            RowVec<T, 8> xv[LN_MAX_NV];
            ln_load_row<T, 8, LN_MAX_NV>(xv, inp + (size_t)r * C, C, lane);
            const float2 st = ln_row_stats<T, 8, LN_MAX_NV>(xv, C, lane);
            if (lane == 0) row_stats[r] = st;
        }
        __syncthreads();
        if (has_lo) st_lo = row_stats[g];
        if (has_hi) st_hi = row_stats[g + 8];
    }
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j0 = warp; j0 < chunks; j0 += GEMV_WARPS * GEMV_TC_LOADS) {
        uint4 wv[GEMV_TC_LOADS], lo[GEMV_TC_LOADS], hi[GEMV_TC_LOADS], lnw[LN ? GEMV_TC_LOADS : 1], lnb[LN ? GEMV_TC_LOADS : 1];
#pragma unroll
        for (int u = 0; u < GEMV_TC_LOADS; u++) {
            const int k = (j0 + u * GEMV_WARPS) * 32; /* the chunk's first k; this lane's are k + 8q.. */
            const bool in = k + 8 * q < C;           /* C % 8 == 0: all eight or none */
            wv[u] = in && has_w ? __ldg((const uint4 *)(wr + k)) : zero;
            lo[u] = in && has_lo ? __ldg((const uint4 *)(lo_row + k)) : zero;
            hi[u] = in && has_hi ? __ldg((const uint4 *)(hi_row + k)) : zero;
            if constexpr (LN) {
                lnw[u] = in ? __ldg((const uint4 *)(ln_w + k + 8 * q)) : zero;
                lnb[u] = in && ln_b ? __ldg((const uint4 *)(ln_b + k + 8 * q)) : zero;
            }
        }
#pragma unroll
        for (int u = 0; u < GEMV_TC_LOADS; u++)
            if (j0 + u * GEMV_WARPS < chunks) { /* the whole warp */
                if constexpr (LN)
                    if ((j0 + u * GEMV_WARPS) * 32 + 8 * q < C) { /* k past C, and rows past N (not stored), stay zeros */
                        if (has_lo) lo[u] = ln_normalize<T>(lo[u], st_lo, lnw[u], lnb[u]);
                        if (has_hi) hi[u] = ln_normalize<T>(hi[u], st_hi, lnw[u], lnb[u]);
                    }
                const uint32_t a0[4] = {lo[u].x, hi[u].x, lo[u].y, hi[u].y}, a1[4] = {lo[u].z, hi[u].z, lo[u].w, hi[u].w};
                mma16816<T>(d, a0, wv[u].x, wv[u].y);
                mma16816<T>(d, a1, wv[u].z, wv[u].w);
            }
    }
    part[warp][lane] = make_float4(d[0], d[1], d[2], d[3]); /* rows g, g + 8 x columns o0 + 2q, o0 + 2q + 1 */
    __syncthreads();
    if (warp) return;
    float4 s = part[0][lane];
#pragma unroll
    for (int v = 1; v < GEMV_WARPS; v++) {
        const float4 p = part[v][lane];
        s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w;
    }
    const int o = o0 + 2 * q;
    if (has_lo && o < OC) mm_finish(ep, (size_t)g * OC + o, o, s.x);
    if (has_lo && o + 1 < OC) mm_finish(ep, (size_t)g * OC + o + 1, o + 1, s.y);
    if (has_hi && o < OC) mm_finish(ep, (size_t)(g + 8) * OC + o, o, s.z);
    if (has_hi && o + 1 < OC) mm_finish(ep, (size_t)(g + 8) * OC + o + 1, o + 1, s.w);
}

/* Whether matmul_forward of N rows is a gemv, and which: 2 on the tensor cores, 1 the SIMT one, 0 not */
static int gemv_kind(ngpt_backend *be, int N, int C, const void *inp, const void *w) {
    if (be->dtype != NGPT_DTYPE_F32 && impl_of(be)->gemv_tensor_cores && N <= GEMV_TC_ROWS && C % 8 == 0 && aligned16(inp, w)) return 2;
    return N <= GEMV_MAX_ROWS;
}

/* gemv_tc_kernel (16-bit types alone: tensor_cores is never set for f32; with ln_w, normalizing its input rows)
 * or gemv_kernel */
template <typename T>
static void launch_gemv(ngpt_backend *be, bool tensor_cores, MmEpilogue<T> ep, const void *inp, const void *w, int N, int C, int OC,
                        const void *ln_w = NULL, const void *ln_b = NULL) {
    if constexpr (sizeof(T) == 2)
        if (tensor_cores) {
            CU_LAUNCH(be, "gemv_tc_kernel", ln_w ? gemv_tc_kernel<T, true> : gemv_tc_kernel<T, false>, (unsigned)((OC + 7) / 8), GEMV_WARPS * 32, 0,
                      ep, (const T *)inp, (const T *)w, N, C, OC, (const T *)ln_w, (const T *)ln_b);
            return;
        }
    CU_LAUNCH(be, "gemv_kernel", gemv_kernel<T>, (unsigned)((OC + GEMV_WARPS - 1) / GEMV_WARPS), GEMV_WARPS * 32, 0, ep, (const T *)inp, (const T *)w,
              N, C, OC);
}
/* matmul_forward of rows that are a gemv, as one launch with epilogue `kind` (EPI_PLAIN; EPI_GELU: aux = gelu(out);
 * EPI_RESIDUAL: out = aux + out, aux the residual stream); false, and nothing launched, when they are not */
static bool gemv_forward(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC, int kind, void *aux) {
    const int how = gemv_kind(be, N, C, inp, w);
    if (!how) return false;
    if (N > 0 && OC > 0)
        DISPATCH_DTYPE(be->dtype, T,
                       launch_gemv<T>(be, how == 2, MmEpilogue<T>{(T *)out, (size_t)OC, (const T *)bias, 0, kind, (T *)aux, NULL, 0}, inp, w, N, C, OC));
    return true;
}

static void cu_matmul_forward(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    if (bad_dims(be, "matmul_forward", N, C, OC) || N == 0 || OC == 0 || gemv_forward(be, out, inp, w, bias, N, C, OC, EPI_PLAIN, NULL)) return;
    gemm(be, MM_FWD, out, inp, w, bias, N, OC, C, (size_t)C, (size_t)C, (size_t)OC, 0);
}
static void cu_matmul_forward_gelu(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    if (bad_dims(be, "matmul_forward_gelu", N, C, OC) || gemv_forward(be, pre, inp, w, bias, N, C, OC, EPI_GELU, act)) return;
    gemm(be, MM_FWD, pre, inp, w, bias, N, OC, C, (size_t)C, (size_t)C, (size_t)OC, 0, EPI_GELU, act);
}
static void cu_matmul_forward_residual(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, const void *res, int N, int C,
                                       int OC) {
    if (bad_dims(be, "matmul_forward_residual", N, C, OC)) return;
    if (!res || out == res || out == inp || out == w) {
        cu_fail(be, NGPT_ERR_ARG, "cuda matmul_forward_residual: res is required and out must alias none of inp, w, res");
        return;
    }
    if (gemv_forward(be, out, inp, w, bias, N, C, OC, EPI_RESIDUAL, (void *)res)) return;
    gemm(be, MM_FWD, out, inp, w, bias, N, OC, C, (size_t)C, (size_t)C, (size_t)OC, 0, EPI_RESIDUAL, (void *)res);
}
/* layernorm_forward into ln (mean and rstd not kept), then matmul_forward of ln, or with act matmul_forward_gelu
 * (out GELU's input, act its output). Rows that are a gemv on the tensor cores, and that the LayerNorm register
 * kernel would take, are one launch of gemv_tc_kernel normalizing its input rows (ln left unwritten), with those
 * ops' bits; the rest run the two ops. */
static void cu_layernorm_matmul_forward(ngpt_backend *be, void *out, void *act, void *ln, const void *inp, const void *ln_w, const void *ln_b,
                                        const void *w, const void *bias, int N, int C, int OC) {
    if (bad_dims(be, "layernorm_matmul_forward", N, C, OC) || N == 0 || OC == 0) return;
    bool fused = false;
    if (gemv_kind(be, N, C, inp, w) == 2) /* 16 bits, C % 8 == 0 */
        DISPATCH_DTYPE(be->dtype, T, if ((fused = ln_rows_in_registers<T>(C, ln, inp, ln_w, ln_b))) {
            launch_gemv<T>(be, true, MmEpilogue<T>{(T *)out, (size_t)OC, (const T *)bias, 0, act ? EPI_GELU : EPI_PLAIN, (T *)act, NULL, 0}, inp,
                           w, N, C, OC, ln_w, ln_b);
        });
    if (fused) return;
    cu_layernorm_forward(be, ln, NULL, NULL, inp, ln_w, ln_b, N, C);
    if (act) cu_matmul_forward_gelu(be, out, act, ln, w, bias, N, C, OC);
    else cu_matmul_forward(be, out, ln, w, bias, N, C, OC);
}
/* matmul_backward, with dinp's epilogue kind (EPI_DGELU: times gelu'(pre)) */
static void matmul_backward_with(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N,
                                 int C, int OC, int kind, const void *pre) {
    if (dinp) gemm(be, MM_DINP, dinp, dout, w, NULL, N, C, OC, (size_t)OC, (size_t)C, (size_t)C, 0, kind, (void *)pre);
    if (dw) gemm(be, MM_DW, dw, dout, inp, NULL, OC, C, N, (size_t)OC, (size_t)C, (size_t)C, 1, EPI_PLAIN, NULL, dbias); /* dbias with it */
    else if (dbias) bias_backward(be, dbias, dout, N, OC);
}
static void cu_matmul_backward(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N, int C,
                               int OC) {
    if (bad_dims(be, "matmul_backward", N, C, OC)) return;
    matmul_backward_with(be, dinp, dw, dbias, dout, inp, w, N, C, OC, EPI_PLAIN, NULL);
}
static void cu_matmul_backward_gelu(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                    const void *pre, int N, int C, int OC) {
    if (bad_dims(be, "matmul_backward_gelu", N, C, OC)) return;
    if (!dinp || !pre) {
        cu_fail(be, NGPT_ERR_ARG, "cuda matmul_backward_gelu: dinp and pre are required");
        return;
    }
    matmul_backward_with(be, dinp, dw, dbias, dout, inp, w, N, C, OC, EPI_DGELU, pre);
}

/* ======================================================================================================
 * Attention: causal, softmax scale 1/sqrt(hs), dropout on the probabilities from the hash of
 * offset + i with i = ((b*NH + h)*T + t)*T + t2.
 * 16-bit types with hs <= 128: flash attention on tensor cores. 64-query x 64-key tiles, 4 warps of 16
 * rows; the head dimension is padded to HS = 32, 64 or 128 with zeros. Forward keeps a running max and
 * sum per row (online softmax, exp2 domain) and saves lse. Backward is deterministic: D = rowsum(dO*O),
 * then one kernel per key tile for dK, dV (looping over query tiles) and one per query tile for dQ
 * (looping over key tiles); every output element is written once, by one thread. Each loop loads its next
 * tile while it computes with the current one (two buffers; at HS = 128 the backward keeps one; on sm_75 every
 * kernel one, two blocks an SM taking turns instead: AttnSmem).
 * On Hopper, at hs = 64 without dropout, the same algorithm runs on wgmma (attn_forward_wgmma_kernel and
 * the backward pair after it).
 * F32 (and a 16-bit head size the tensor-core kernels cannot fit) runs SIMT kernels of the same math,
 * one warp per row. Decoding with a KV cache (one new position per sequence) is one warp per head.
 * ==================================================================================================== */

#define ATT_B 64 /* query rows and keys per tile */
#define ATT_THREADS 128
/* sm_75's 64 KB of shared memory hold two blocks of each kernel at head size 64 (AttnSmem), and so do its registers
 * at up to 255 a thread (65,536 an SM): bounded for two blocks, ptxas gives them the registers they use; left to
 * itself it held dQ at head size 64 to 168 and spilled 28 bytes (nvcc 13.0). Elsewhere ptxas's own choice (dQ
 * 167-168 on sm_80 and sm_86, three blocks an SM by registers). */
#if DEVICE_SM75
#define ATT_LAUNCH_BOUNDS __launch_bounds__(ATT_THREADS, 2)
#else
#define ATT_LAUNCH_BOUNDS __launch_bounds__(ATT_THREADS)
#endif
#define LOG2E_F 1.4426950408889634f
#define LN2_F 0.6931471805599453f

/* Shared memory: the forward holds Q and FWD_BUFS K, V pairs (with two, the next key tile loads while the current
 * one is used); each backward kernel holds its fixed pair (K, V or Q, dO) and BWD_BUFS of the tiles it loops over
 * (with, for dK/dV, their rows of lse and D where STATS_SHARED). Two buffers up to HS = 64, where the forward takes
 * 40 KiB and the backward 48-48.5 KiB, so that an SM of sm_86/89 (100 KiB, 1 KiB kept a block) runs two blocks of
 * each; one at HS = 128, which keeps the backward at 64.5 KiB, inside what those allow a block (99 KiB).
 * TURING (sm_75: DEVICE_SM75 in device code, compute capability 7.x on the host): one buffer in every kernel, and
 * up to HS = 64 dK/dV reads lse and D from global memory, so that at HS = 64 the forward takes 24 KiB and each
 * backward 32 KiB, two blocks of each in an SM's 64 KiB (sm_75 keeps none a block). At HS = 128 (64.5 KiB, over
 * sm_75's 64 a block) the SIMT kernels run; its dK/dV keeps the statistics in shared memory, where reading them
 * from global memory spilled 8 bytes at its 255 registers. Without cp.async a second buffer's loads wait
 * in the threads that issue them, before the tile they were to overlap (one block an SM stood idle through every
 * load); with two blocks an SM one block's loads overlap the other's products. The host may size a launch for
 * the layout of compute capability 8.0 and on while the device runs sm_75 code (its PTX compiled for a newer
 * GPU): every size of that layout covers TURING's. */
template <int HS, bool TURING = false> struct AttnSmem {
    static constexpr int FWD_BUFS = TURING ? 1 : 2;
    static constexpr int BWD_BUFS = HS <= 64 && !TURING ? 2 : 1;
    static constexpr bool STATS_SHARED = !TURING || HS > 64;
    static constexpr size_t TILE = (size_t)ATT_B * HS * 2; /* rows unpadded, swizzled (SwizzledRows<HS>) */
    static constexpr size_t FWD = (1 + 2 * FWD_BUFS) * TILE;
    static constexpr size_t DQ = (2 + 2 * BWD_BUFS) * TILE;
    static constexpr size_t DKDV = DQ + (STATS_SHARED ? (size_t)BWD_BUFS * 2 * ATT_B * sizeof(float) : 0);
    static constexpr size_t MOST = FWD > DKDV ? FWD : DKDV;
};
static_assert(2 * (AttnSmem<64>::MOST + 1024) <= 100 * 1024 && AttnSmem<128>::MOST <= 99 * 1024,
              "the mma.sync attention at HS 64 two blocks to an SM of sm_86/89, at HS 128 one");
static_assert(2 * AttnSmem<64, true>::MOST <= 64 * 1024, "the mma.sync attention at HS 64 two blocks to an SM of sm_75");
/* the shared memory of each kernel at padded head size HS, as the device's code lays it out (AttnSmem) */
struct AttnSmemBytes {
    size_t fwd, dq, dkdv, most;
};
template <int HS, bool TURING> static AttnSmemBytes attn_smem_bytes_of() {
    typedef AttnSmem<HS, TURING> L;
    return {L::FWD, L::DQ, L::DKDV, L::MOST};
}
/* whether a GPU of compute capability cc runs sm_75's device code (DEVICE_SM75): 7.x, the oldest the builds have */
static bool device_code_sm75(int cc) { return cc < 80; }
template <int HS> static AttnSmemBytes attn_smem_bytes(bool device_sm75) {
    return device_sm75 ? attn_smem_bytes_of<HS, true>() : attn_smem_bytes_of<HS, false>();
}

/* one 64 x HS tile of rows t0.. of a (B*T, ld) matrix part, columns [0, hs), zero-padded */
template <typename T, int HS>
static __device__ __forceinline__ void attn_load_tile(T *s, const T *base, size_t ld, int t0, int T_, int hs, int vec) {
    constexpr SwizzledRows<HS> at;
    constexpr int CPR = HS / 8; /* chunks per row */
    for (int q = threadIdx.x; q < ATT_B * CPR; q += ATT_THREADS) {
        int r = q / CPR, c = (q % CPR) * 8;
        copy_chunk8(s + at(r, c), base, ld, t0 + r, T_, c, hs, vec);
    }
}

/* One step of a kernel's loop over tiles it..last: makes tile it ready in buffer it % BUFS (loaded by
 * load(tile, buffer), one cp.async group per step). With two buffers the first tile's group was committed
 * before the loop, and each step starts tile it + 1 into the other buffer first, so that load overlaps the
 * work on tile it; the first barrier keeps it off the buffer of tile it - 1 until everyone is done with
 * that. With one buffer each step loads its own tile and waits for it. */
template <int BUFS, typename Load> static __device__ __forceinline__ void attn_tile_step(const Load &load, int it, int last) {
    __syncthreads();
    if (BUFS == 2) {
        if (it < last) load(it + 1, (it + 1) & 1);
        cp_async_commit();
        cp_async_wait<1>(); /* every group but the one just committed: tile it has landed */
    } else {
        load(it, 0);
        cp_async_commit();
        cp_async_wait<0>();
    }
    __syncthreads();
}

/* The mma.sync kernels' two tile products, one warp's 16 rows each. Accumulators as mma16816's: x[j] holds
 * columns 8j .. 8j + 7 of the warp's rows. NJ: the tile's 64 columns (8 blocks), or a part of them, 8 NJ columns
 * from the B rows (attn_tile_abt) or the k rows (attn_tile_pb) B points at; the products over the parts, one after
 * another, add in the order of the whole tile's. */
/* x = A B^T over the head dims: A's 16 rows from row0 and B's 8 NJ rows, both tiles of SwizzledRows<HS> */
template <typename T, int HS, int NJ = 8>
static __device__ __forceinline__ void attn_tile_abt(float (&x)[NJ][4], const T *A, int row0, const T *B, int lane) {
    constexpr SwizzledRows<HS> at;
    static_assert(NJ % 2 == 0 && NJ <= 8, "16-column blocks of the 64");
#pragma unroll
    for (int j = 0; j < NJ; j++) x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HS; ks += 16) {
        uint32_t a[4];
        frag_a_mk(a, A, at, row0, ks, lane);
#pragma unroll
        for (int p = 0; p < NJ / 2; p++) {
            uint32_t b[4];
            frag_b_nk(b, B, at, p * 16, ks, lane);
            mma16816<T>(x[2 * p], a, b[0], b[1]);
            mma16816<T>(x[2 * p + 1], a, b[2], b[3]);
        }
    }
}
/* acc += P B: P (16 x 8 NJ) is x's accumulators rounded to 16 bits, whose layout for two adjacent 8-column
 * blocks is the A fragment of one k16 step; B is 8 NJ rows x HS, a tile of SwizzledRows<HS> */
template <typename T, int HS, int NJ = 8>
static __device__ __forceinline__ void attn_tile_pb(float (&acc)[HS / 8][4], const float (&x)[NJ][4], const T *B, int lane) {
    constexpr SwizzledRows<HS> at;
#pragma unroll
    for (int kk = 0; kk < NJ / 2; kk++) {
        const uint32_t pa[4] = {pack2<T>(x[2 * kk][0], x[2 * kk][1]), pack2<T>(x[2 * kk][2], x[2 * kk][3]),
                                pack2<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]), pack2<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < HS / 16; dp++) {
            uint32_t b[4];
            frag_b_kn(b, B, at, dp * 16, kk * 16, lane);
            mma16816<T>(acc[2 * dp], pa, b[0], b[1]);
            mma16816<T>(acc[2 * dp + 1], pa, b[2], b[3]);
        }
    }
}
/* 32 columns of a row of 16-bit values from the quad of lanes that holds them in the tensor cores' accumulator
 * layout: lane tq's w[j] is its word of group j (columns 8 j + 2 tq, + 1). The quad's 4 x 4 words are transposed
 * by two exchanges (the halves of the word index's bit 1 with lane tq ^ 2, then of bit 0 with tq ^ 1), so lane
 * tq stores group tq, columns 8 tq .. + 7 of dst (16-byte aligned), as one 16-byte vector: a quad writes 64
 * contiguous bytes where 4-byte stores wrote 16 into each of 8 rows' sectors (the seventh run's profile: the
 * wgmma forward's stores 49% excess sectors). Every lane of the warp takes part (the shuffles); those with store
 * unset write nothing. nvcc split a plain uint4 store of these into four 4-byte ones; __stcg (the L2-only hint,
 * which an output the next kernel reads from the L2 does not mind) stays one. */
template <typename T>
static __device__ __forceinline__ void quad_store16(T *dst, uint32_t (&w)[4], int tq, bool store) {
    const bool hi = tq & 2, odd = tq & 1;
#pragma unroll
    for (int j0 = 0; j0 < 2; j0++) { /* the words whose bit 1 is not the lane's: to and from lane tq ^ 2 */
        const uint32_t x = __shfl_xor_sync(0xffffffffu, hi ? w[j0] : w[2 + j0], 2);
        if (hi) w[j0] = x;
        else w[2 + j0] = x;
    }
#pragma unroll
    for (int j1 = 0; j1 < 2; j1++) { /* then those whose bit 0 is not the lane's: to and from lane tq ^ 1 */
        const uint32_t x = __shfl_xor_sync(0xffffffffu, odd ? w[2 * j1] : w[2 * j1 + 1], 1);
        if (odd) w[2 * j1] = x;
        else w[2 * j1 + 1] = x;
    }
    if (store) __stcg((uint4 *)(dst + 8 * tq), make_uint4(w[0], w[1], w[2], w[3]));
}
/* row r (0: the lane's row g, 1: g + 8) of a warp's 16 x HS accumulators times scale, into dst[0, hs) where store
 * is set. vec (uniform over the warp: hs = HS, and dst 16-byte aligned): 16 bytes a lane (quad_store16), every
 * lane of the warp taking part; else one value at a time */
template <typename T, int ND>
static __device__ __forceinline__ void attn_store_row(T *dst, const float (&acc)[ND][4], int r, int tq, int hs, float scale, bool vec, bool store) {
    static_assert(ND % 4 == 0, "head sizes padded to a multiple of 32");
    if (vec) {
#pragma unroll
        for (int a = 0; a < ND / 4; a++) {
            uint32_t w[4];
#pragma unroll
            for (int j = 0; j < 4; j++) w[j] = pack2<T>(acc[4 * a + j][2 * r] * scale, acc[4 * a + j][2 * r + 1] * scale);
            quad_store16(dst + 32 * a, w, tq, store);
        }
        return;
    }
    if (!store) return;
#pragma unroll
    for (int d = 0; d < ND; d++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
            const int col = d * 8 + tq * 2 + c;
            if (col < hs) dst[col] = from_f<T>(acc[d][r * 2 + c] * scale);
        }
}
/* exp2f(x) where keep, else 0, with no branch: exp2f(-inf) is +0, the bits of the select. Written as a conditional
 * call, nvcc branched around each element's exp2f, so each paid the MUFU's whole latency in turn (the attention
 * backward's masked probabilities, the dK, dV wgmma kernel's 32 a tile: 42% of its stall samples in the seventh
 * run's profile; the loss's exponentials of each vector's values, the last ones past V) where a straight run
 * issues them back to back. Callers compute keep with & and |, not && and ||, which also branch. */
static __device__ __forceinline__ float exp2_kept(bool keep, float x) { return exp2f(keep ? x : -INFINITY); }

/* VEC_OUT: out's rows in 16-byte vectors (attn_store_row's vec), a template argument here: with both ways of
 * storing in one kernel ptxas spilled 8 bytes at HS = 64 (its 128 registers), with either alone none */
template <typename T, int HS, bool VEC_OUT>
__global__ void ATT_LAUNCH_BOUNDS
    attn_forward_tc_kernel(T *out, float *lse, const T *qkv, int T_, int C, int NH, int hs, float scale_log2, DropArgs dr, int vec) {
    after_previous_kernel();
    constexpr int LD = HS, ND = HS / 8; /* a tile's rows (SwizzledRows<HS>): offsets of whole rows, multiples of 8, keep the swizzle */
    extern __shared__ __align__(16) unsigned char att_smem[];
    constexpr int BUFS = AttnSmem<HS, DEVICE_SM75>::FWD_BUFS;
    T *Qs = (T *)att_smem; /* then K, V of even key tiles, then (two buffers) K, V of odd ones */
    const int nqb = (T_ + ATT_B - 1) / ATT_B;
    const int qb = nqb - 1 - (int)blockIdx.x; /* longest rows first */
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = qb * ATT_B;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const size_t ld = (size_t)3 * C;
    const T *qbase = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    auto load_key_tile = [&](int kb, int buf) { /* K, V of key tile kb into buffer buf */
        T *Kd = Qs + (1 + 2 * buf) * ATT_B * LD;
        attn_load_tile<T, HS>(Kd, qbase + C, ld, kb * ATT_B, T_, hs, vec);
        attn_load_tile<T, HS>(Kd + ATT_B * LD, qbase + 2 * C, ld, kb * ATT_B, T_, hs, vec);
    };
    attn_load_tile<T, HS>(Qs, qbase, ld, q0, T_, hs, vec);
    if (BUFS == 2) load_key_tile(0, 0);
    cp_async_commit(); /* group 0: Q (and, double-buffered, key tile 0); then one group per key tile */

    float o[ND][4];
#pragma unroll
    for (int d = 0; d < ND; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
    int qrow[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

    for (int kb = 0; kb <= qb; kb++) {
        attn_tile_step<BUFS>(load_key_tile, kb, qb);
        const T *Ks = Qs + (1 + 2 * (BUFS == 2 ? kb & 1 : 0)) * ATT_B * LD, *Vs = Ks + ATT_B * LD;

        float s[8][4];
        attn_tile_abt<T, HS>(s, Qs, warp * 16, Ks, lane);
        /* mask and scale (log2 domain), row max over this tile */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = kb * ATT_B + j * 8 + tq * 2 + (e & 1), r = e >> 1;
                float v = (key <= qrow[r] && key < T_) ? s[j][e] * scale_log2 : -INFINITY;
                s[j][e] = v;
                mx[r] = fmaxf(mx[r], v);
            }
        float corr[2], rsum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            float mnew = fmaxf(mrow[r], mx[r]); /* finite: every row sees key kb*64 <= its row in every tile */
            corr[r] = exp2f(mrow[r] - mnew);
            mrow[r] = mnew;
        }
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e >> 1;
                float pe = exp2f(s[j][e] - mrow[r]);
                rsum[r] += pe;
                if (dr.p > 0.0f) {
                    int key = kb * ATT_B + j * 8 + tq * 2 + (e & 1);
                    uint64_t idx = ((uint64_t)bh * T_ + (uint64_t)qrow[r]) * (uint64_t)T_ + (uint64_t)key;
                    pe *= drop_factor(dr, idx);
                }
                s[j][e] = pe;
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            rsum[r] += __shfl_xor_sync(0xffffffffu, rsum[r], 1);
            rsum[r] += __shfl_xor_sync(0xffffffffu, rsum[r], 2);
            lrow[r] = lrow[r] * corr[r] + rsum[r];
        }
#pragma unroll
        for (int d = 0; d < ND; d++) {
            o[d][0] *= corr[0]; o[d][1] *= corr[0];
            o[d][2] *= corr[1]; o[d][3] *= corr[1];
        }
        attn_tile_pb<T, HS>(o, s, Vs, lane); /* O += P V */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) { /* rows past T: the lanes still shuffle, store nothing */
        const int t = qrow[r];
        attn_store_row<T, ND>(out + ((size_t)b * T_ + t) * C + (size_t)h * hs, o, r, tq, hs, 1.0f / lrow[r], VEC_OUT, t < T_);
        if (tq == 0 && t < T_) lse[(size_t)bh * T_ + t] = (mrow[r] + log2f(lrow[r])) * LN2_F;
    }
}

/* D[(b*NH + h)*T + t] = sum_d dO * O: ROWDOT_LANES lanes a row, each VEC elements of dO and O at a time
 * (16 bytes where the head's rows allow it, else 1), the lanes' sums added by shuffles */
#define ROWDOT_LANES 8
template <typename T, int VEC> __global__ void attn_rowdot_kernel(float *D, const T *dout, const T *out, int B, int T_, int C, int NH, int hs) {
    after_previous_kernel();
    typedef RowVec<T, VEC> V;
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / ROWDOT_LANES;
    const int l = threadIdx.x % ROWDOT_LANES;
    const bool live = row < (size_t)B * NH * T_; /* the rest of the last warp adds zeros: every lane shuffles */
    float s = 0;
    if (live) {
        const int t = (int)(row % (size_t)T_);
        const size_t bh = row / (size_t)T_;
        const int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
        const size_t off = ((size_t)b * T_ + t) * C + (size_t)h * hs;
        for (int d = l * VEC; d < hs; d += ROWDOT_LANES * VEC) {
            const V g = *(const V *)(dout + off + d), o = *(const V *)(out + off + d);
#pragma unroll
            for (int e = 0; e < VEC; e++) s += to_f(g.v[e]) * to_f(o.v[e]);
        }
    }
#pragma unroll
    for (int k = ROWDOT_LANES / 2; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffffu, s, k);
    if (live && l == 0) D[row] = s;
}

/* dK, dV of one 64-key tile: loop over the query tiles at and after it. Per warp 16 keys; S^T = K Q^T has
 * the keys as rows, so P^T and dS^T are A fragments of dV += P^T dO and dK += dS^T Q. */
template <typename T, int HS>
__global__ void ATT_LAUNCH_BOUNDS
    attn_backward_dkdv_tc_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, int T_, int C, int NH, int hs,
                                 float scale, float scale_log2, DropArgs dr, int vec_qkv, int vec_do, int vec_out) {
    after_previous_kernel();
    constexpr int LD = HS, ND = HS / 8; /* a tile's rows (SwizzledRows<HS>): offsets of whole rows, multiples of 8, keep the swizzle */
    extern __shared__ __align__(16) unsigned char att_smem[];
    typedef AttnSmem<HS, DEVICE_SM75> L;
    constexpr int BUFS = L::BWD_BUFS;
    T *Ks = (T *)att_smem, *Vs = Ks + ATT_B * LD, *Qbuf = Vs + ATT_B * LD; /* buffer i: Q, dO at Qbuf + 2i tiles */
    float *stats = (float *)(Qbuf + BUFS * 2 * ATT_B * LD); /* STATS_SHARED: buffer i's lse, D at stats + 2i * ATT_B */
    const int nqb = (T_ + ATT_B - 1) / ATT_B;
    const int kb = blockIdx.x; /* small kb first: they have the longest loops */
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int k0 = kb * ATT_B;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const size_t ld = (size_t)3 * C;
    const T *qbase = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    const T *dobase = dout + (size_t)b * T_ * C + (size_t)h * hs;
    /* query tile qb into buffer buf: Q and dO by cp.async, lse (log2 domain) and D (STATS_SHARED) by plain stores */
    auto load_query_tile = [&](int qb, int buf) {
        const int q0 = qb * ATT_B;
        T *Qd = Qbuf + buf * 2 * ATT_B * LD;
        float *st = stats + buf * 2 * ATT_B;
        attn_load_tile<T, HS>(Qd, qbase, ld, q0, T_, hs, vec_qkv);
        attn_load_tile<T, HS>(Qd + ATT_B * LD, dobase, (size_t)C, q0, T_, hs, vec_do);
        if (L::STATS_SHARED)
            for (int i = threadIdx.x; i < ATT_B; i += ATT_THREADS) {
                int q = q0 + i;
                st[i] = q < T_ ? lse[(size_t)bh * T_ + q] * LOG2E_F : 0.0f;
                st[ATT_B + i] = q < T_ ? Dsum[(size_t)bh * T_ + q] : 0.0f;
            }
    };
    attn_load_tile<T, HS>(Ks, qbase + C, ld, k0, T_, hs, vec_qkv);
    attn_load_tile<T, HS>(Vs, qbase + 2 * C, ld, k0, T_, hs, vec_qkv);
    if (BUFS == 2) load_query_tile(kb, 0);
    cp_async_commit(); /* group 0: K, V (and, double-buffered, query tile kb); then one group per iteration */

    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int d = 0; d < ND; d++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[d][e] = dv[d][e] = 0.0f;
    const int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};

    for (int qb = kb; qb < nqb; qb++) {
        const int q0 = qb * ATT_B, buf = BUFS == 2 ? (qb - kb) & 1 : 0;
        attn_tile_step<BUFS>([&](int it, int into) { load_query_tile(kb + it, into); }, qb - kb, nqb - 1 - kb);
        const T *Qs = Qbuf + buf * 2 * ATT_B * LD, *dOs = Qs + ATT_B * LD;
        const float *lse_s = stats + buf * 2 * ATT_B, *D_s = lse_s + ATT_B;

        /* the query tile in PARTS of 8 NJ queries each: at head size 128, dK and dV's accumulators take 128 registers
         * a thread, and S^T and dP^T of the whole tile 64 more (255 with spills on sm_80); half as many in halves */
        constexpr int PARTS = HS > 64 ? 2 : 1, NJ = 8 / PARTS;
#pragma unroll 1
        for (int part = 0; part < PARTS; part++) {
            const int c0 = part * 8 * NJ; /* the part's first query of the tile */
            float st[NJ][4], dpt[NJ][4];
            attn_tile_abt<T, HS, NJ>(st, Ks, warp * 16, Qs + c0 * LD, lane);   /* S^T */
            attn_tile_abt<T, HS, NJ>(dpt, Vs, warp * 16, dOs + c0 * LD, lane); /* dP^T */
            /* st -> dropped P^T (for dV), dpt -> dS^T (for dK) */
#pragma unroll
            for (int j = 0; j < NJ; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int qi = c0 + j * 8 + tq * 2 + (e & 1), q = q0 + qi, kr = key[e >> 1];
                    const bool valid = (q < T_) & (kr <= q) & (kr < T_);
                    /* lse and D from global memory where not STATS_SHARED: a row past T reads row T - 1's (p is 0) */
                    const size_t row = (size_t)bh * T_ + (q < T_ ? q : T_ - 1);
                    const float p = exp2_kept(valid, st[j][e] * scale_log2 - (L::STATS_SHARED ? lse_s[qi] : lse[row] * LOG2E_F));
                    float f = 1.0f;
                    if (dr.p > 0.0f && valid) f = drop_factor(dr, ((uint64_t)bh * T_ + (uint64_t)q) * (uint64_t)T_ + (uint64_t)kr);
                    st[j][e] = p * f;
                    dpt[j][e] = p * (dpt[j][e] * f - (L::STATS_SHARED ? D_s[qi] : Dsum[row]));
                }
            attn_tile_pb<T, HS, NJ>(dv, st, dOs + c0 * LD, lane); /* dV += P^T dO */
            attn_tile_pb<T, HS, NJ>(dk, dpt, Qs + c0 * LD, lane); /* dK += dS^T Q */
        }
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; r++) { /* keys past T: shuffled (vec_out), not stored */
        const int t = key[r];
        T *drow = dqkv + ((size_t)b * T_ + t) * ld + (size_t)h * hs;
        attn_store_row<T, ND>(drow + C, dk, r, tq, hs, scale, vec_out, t < T_);
        attn_store_row<T, ND>(drow + 2 * C, dv, r, tq, hs, 1.0f, vec_out, t < T_);
    }
}

/* dQ of one 64-query tile: loop over the key tiles up to the diagonal. */
template <typename T, int HS>
__global__ void ATT_LAUNCH_BOUNDS
    attn_backward_dq_tc_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, int T_, int C, int NH, int hs, float scale,
                               float scale_log2, DropArgs dr, int vec_qkv, int vec_do, int vec_out) {
    after_previous_kernel();
    constexpr int LD = HS, ND = HS / 8; /* a tile's rows (SwizzledRows<HS>): offsets of whole rows, multiples of 8, keep the swizzle */
    extern __shared__ __align__(16) unsigned char att_smem[];
    constexpr int BUFS = AttnSmem<HS, DEVICE_SM75>::BWD_BUFS;
    T *Qs = (T *)att_smem, *dOs = Qs + ATT_B * LD, *Kbuf = dOs + ATT_B * LD; /* buffer i: K, V at Kbuf + 2i tiles */
    const int nqb = (T_ + ATT_B - 1) / ATT_B;
    const int qb = nqb - 1 - (int)blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int q0 = qb * ATT_B;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const size_t ld = (size_t)3 * C;
    const T *qbase = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    auto load_key_tile = [&](int kb, int buf) {
        T *Kd = Kbuf + buf * 2 * ATT_B * LD;
        attn_load_tile<T, HS>(Kd, qbase + C, ld, kb * ATT_B, T_, hs, vec_qkv);
        attn_load_tile<T, HS>(Kd + ATT_B * LD, qbase + 2 * C, ld, kb * ATT_B, T_, hs, vec_qkv);
    };
    attn_load_tile<T, HS>(Qs, qbase, ld, q0, T_, hs, vec_qkv);
    attn_load_tile<T, HS>(dOs, dout + (size_t)b * T_ * C + (size_t)h * hs, (size_t)C, q0, T_, hs, vec_do);
    if (BUFS == 2) load_key_tile(0, 0);
    cp_async_commit(); /* group 0: Q, dO (and, double-buffered, key tile 0); then one group per iteration */

    const int qrow[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lse2[r] = qrow[r] < T_ ? lse[(size_t)bh * T_ + qrow[r]] * LOG2E_F : 0.0f;
        Dr[r] = qrow[r] < T_ ? Dsum[(size_t)bh * T_ + qrow[r]] : 0.0f;
    }
    float dq[ND][4];
#pragma unroll
    for (int d = 0; d < ND; d++) dq[d][0] = dq[d][1] = dq[d][2] = dq[d][3] = 0.0f;

    for (int kb = 0; kb <= qb; kb++) {
        const int buf = BUFS == 2 ? kb & 1 : 0;
        attn_tile_step<BUFS>(load_key_tile, kb, qb);
        const T *Ks = Kbuf + buf * 2 * ATT_B * LD, *Vs = Ks + ATT_B * LD;

        float s[8][4], dp[8][4];
        attn_tile_abt<T, HS>(s, Qs, warp * 16, Ks, lane);
        attn_tile_abt<T, HS>(dp, dOs, warp * 16, Vs, lane);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e >> 1, kk = kb * ATT_B + j * 8 + tq * 2 + (e & 1), q = qrow[r];
                const bool valid = (q < T_) & (kk <= q) & (kk < T_);
                const float p = exp2_kept(valid, s[j][e] * scale_log2 - lse2[r]);
                float f = 1.0f;
                if (dr.p > 0.0f && valid) f = drop_factor(dr, ((uint64_t)bh * T_ + (uint64_t)q) * (uint64_t)T_ + (uint64_t)kk);
                s[j][e] = p * (dp[j][e] * f - Dr[r]); /* dS */
            }
        attn_tile_pb<T, HS>(dq, s, Ks, lane); /* dQ += dS K */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) { /* rows past T: shuffled (vec_out), not stored */
        const int t = qrow[r];
        attn_store_row<T, ND>(dqkv + ((size_t)b * T_ + t) * ld + (size_t)h * hs, dq, r, tq, hs, scale, vec_out, t < T_);
    }
}

/* --- Hopper (sm_90a): the attention forward on wgmma, head size 64 ---------------------------------------
 * Every GPT-2 has hs = 64. Where the TMA matmul runs (sm_90a code, the driver's tensor-map encoder), unless
 * NGPT_ATTENTION=mma, 16-bit causal attention at hs = 64 runs here. A work item is 128 query rows of one
 * (b, h); a block has three warpgroups. The kernel is persistent: one block an SM walks its share of the items
 * (fa_walk), so the next item's tiles load while the last one's rows finish and are stored, where a block an
 * item paid the copies' first latency and its own launch each time (the seventh run's profile: 7% of the
 * samples waiting for the first tiles, SMs without a block 13% of the time). The first warpgroup produces:
 * one thread asks the copy engine, item after item, for the Q tile (into one of two buffers, each with a
 * "full" and an "empty" mbarrier: a buffer is refilled once the consumers' last product from it is done) and,
 * for each 128-key tile, its K and V tiles (boxes of 64 head dims x 128 rows of qkv, 128-byte swizzled) into
 * FA_STAGES stages, a ring that goes on across items, each tile on its own "full" mbarrier; a stage is refilled
 * once every consumer thread has arrived on its "empty" one.
 * The other two consume, 64 query rows each:
 *   S = Q K^T      wgmma m64n128k16, both operands from shared memory, K-major (a row is 64 head dims);
 *   softmax        online, on S's accumulators in registers (exp2 domain, as the mma.sync kernel; the
 *                  keys past the row or T are masked in the diagonal tile alone, the last);
 *   O += P V       wgmma m64n64k16 with P from registers: S's accumulator layout (d[4i..4i+3] at rows g,
 *                  g + 8, columns 8i + 2tq, +1) is, packed to 16 bits, the A fragment of k step i / 2
 *                  (mma.sync m16n8k16's), and V is MN-major (a row is a key's 64 head dims).
 * The loop is pipelined as FlashAttention-3's: step j issues S_j and then P_{j-1} V_{j-1}, so the softmax
 * of S_j runs while the tensor cores compute P_{j-1} V_{j-1}; O is rescaled by S_j's correction after that
 * product completes. Rows past T (the next sequence's, or zeros past the last) are computed and not stored.
 * Without dropout (GPT-2's pretraining; with it the mma.sync kernel runs: the hash, unrolled over S's 64
 * values, would more than double the kernel's code). setmaxnreg moves registers from the producer (24) to the consumers (240),
 * which hold S (64), O (32) and P (32) besides the softmax's; as in the TMA matmul, the block's pool at
 * launch (384 threads x 168) must cover both: checked at backend creation (attn_registers_ok). */
#define FA_BM 128 /* query rows a block */
#define FA_BN 128 /* keys a tile */
#define FA_HS 64
#define FA_STAGES 3
#define FA_THREADS 384
#define FA_TILE_BYTES (128 * FA_HS * 2) /* 16 KB: 128 rows x 64 head dims */
/* the forward's two Q buffers, the K and V stages, alignment slack, the mbarriers */
#define FA_SMEM_BYTES ((2 + 2 * FA_STAGES) * FA_TILE_BYTES + 1024 + 256)
#define FA_PRODUCER_REGS 24
#define FA_CONSUMER_REGS 240
#define FA_REGS_NEEDED (128 * FA_PRODUCER_REGS + 2 * 128 * FA_CONSUMER_REGS)
static_assert(FA_BN == FA_BM, "the forward and dQ kernels take query tile qt's last key tile, qt, as its diagonal");
static_assert(FA_REGS_NEEDED <= 65536 / FA_THREADS / 8 * 8 * FA_THREADS, "setmaxnreg: the producer and consumers need more than the block's registers");

#define WG_D32 WG_D16(0), WG_D16(16)
#define WG_REGS32                                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
    "%24, %25, %26, %27, %28, %29, %30, %31}"
/* d (64x64 per warpgroup, f32) += A (64x16 from registers: each warp's 16 rows as mma.sync m16n8k16's A
 * fragment) B (16x64 from shared memory; TB: MN-major) */
template <typename T, int TB> static __device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
#ifdef NGPT_WGMMA_DEVICE
    WG_MMA_ASYNC("m64n64k16", WG_REGS32 ", {%32, %33, %34, %35}, %36, 1, 1, 1, %37", WG_D32, "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
#else
    (void)d; (void)a; (void)db;
#endif
}

#ifdef NGPT_WGMMA_DEVICE
/* The online softmax of one key tile's scores s (this thread's: s[4i + 2r + e] at row qrow[r], key k0 + 8i +
 * 2tq + e): masks keys past the row or T (MASK, the diagonal tile), updates each row's running max m (log2
 * domain, scaled) and sum l, gives the factor corr the output so far is rescaled by, and leaves in s the
 * probabilities. */
template <bool MASK>
static __device__ __forceinline__ void fa_softmax(float (&s)[64], float (&m)[2], float (&l)[2], float (&corr)[2], int k0, const int (&qrow)[2], int tq,
                                                  int T_, float scale_log2) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 16; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = e >> 1, key = k0 + 8 * i + 2 * tq + (e & 1);
            if (MASK && (key > qrow[r] || key >= T_)) s[4 * i + e] = -INFINITY;
            mx[r] = fmaxf(mx[r], s[4 * i + e]);
        }
    float rsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mnew = fmaxf(m[r], mx[r] * scale_log2); /* finite: key k0 <= every row, in every tile */
        corr[r] = exp2f(m[r] - mnew);
        m[r] = mnew;
    }
#pragma unroll
    for (int i = 0; i < 16; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = e >> 1;
            s[4 * i + e] = exp2f(fmaf(s[4 * i + e], scale_log2, -m[r]));
            rsum[r] += s[4 * i + e];
        }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        rsum[r] += __shfl_xor_sync(0xffffffffu, rsum[r], 1);
        rsum[r] += __shfl_xor_sync(0xffffffffu, rsum[r], 2);
        l[r] = l[r] * corr[r] + rsum[r];
    }
}
/* 16 accumulators of a 64 x 16 slab (d[8kk .. 8kk + 7]) as the A fragment of k step kk, packed to 16 bits */
template <typename T, int NK> static __device__ __forceinline__ void fa_pack_a(uint32_t (&a)[NK][4], const float (&d)[8 * NK]) {
#pragma unroll
    for (int kk = 0; kk < NK; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) a[kk][x] = pack2<T>(d[8 * kk + 2 * x], d[8 * kk + 2 * x + 1]);
}
/* S = Q K^T for the warpgroup's 64 rows (q: its rows of the Q tile) and a 128-key tile k */
template <typename T> static __device__ __forceinline__ void fa_issue_s(float (&s)[64], const unsigned char *q, const unsigned char *k) {
#pragma unroll
    for (int ks = 0; ks < FA_HS / 16; ks++) wgmma_m64n128k16<T, 0, 0>(s, wg_desc(q + ks * 32, 16, 1024), wg_desc(k + ks * 32, 16, 1024));
}
/* O += P V for a 128-key tile v (its rows, the keys, 128 bytes each: MN-major with k = key) */
template <typename T> static __device__ __forceinline__ void fa_issue_pv(float (&o)[32], const uint32_t (&p)[8][4], const unsigned char *v) {
#pragma unroll
    for (int kk = 0; kk < FA_BN / 16; kk++) wgmma_m64n64k16_rs<T, 1>(o, p[kk], wg_desc(v + kk * 2048, 8192, 1024));
}
/* The attention kernels' two consumer warpgroups take turns to issue their products (FA3's scheduler barrier):
 * warpgroup cw waits on named barrier 1 + cw until the other has issued its round, issues its own, and lets the
 * other go. So one's exponentials (as much time as the products at head size 64) run while the other's
 * products do, instead of both computing exponentials at once while the tensor cores wait. Barrier 0 is
 * __syncthreads'; each round's barrier counts both consumer warpgroups (256 threads, the producer's excluded).
 * Both warpgroups run the same number of rounds (the persistent kernels' items are the same for both);
 * warpgroup 0 goes first, and takes warpgroup 1's last turn at the end (end()), so every arrival is waited
 * for. Off (NGPT_ATTN_TURNS=0, to compare), each issues as it comes; the results are the same bits either way. */
struct WgTurns {
    int cw;  /* this consumer warpgroup: 0 or 1 */
    bool on; /* the same for the whole block */
    __device__ __forceinline__ void begin() const { /* warpgroup 0's first turn */
        if (on && cw == 1) named_bar_arrive(1, 256);
    }
    __device__ __forceinline__ void mine() const { /* before a round's products are issued */
        if (on) named_bar_sync(1 + cw, 256);
    }
    __device__ __forceinline__ void yours() const { /* once they are issued */
        if (on) named_bar_arrive(2 - cw, 256);
    }
    __device__ __forceinline__ void end() const { /* after the last round: warpgroup 1's last turn, given to nobody, taken */
        if (on && cw == 0) named_bar_sync(1, 256);
    }
};
/* The attention kernels' mbarriers, made by thread 0 before a block barrier: nfull "full" ones, each completed
 * by the producer's expect-bytes arrival and the copies' bytes (the kernels' tiles loaded once first), and
 * nempty "empty" ones (the stages', then the forward's Q buffers') by every consumer thread. Fenced for the
 * copy engine. */
static __device__ __forceinline__ void fa_init_barriers(uint64_t *full, int nfull, uint64_t *empty, int nempty = FA_STAGES) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < nfull; s++) mbar_init(&full[s], 1);
        for (int s = 0; s < nempty; s++) mbar_init(&empty[s], 2 * 128);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}
/* The forward's work item i of n (query tile qt, head bh: the longest rows first) */
static __device__ __forceinline__ void fa_item(int i, int nbh, int nqt, int &qt, int &bh) {
    qt = nqt - 1 - i / nbh;
    bh = i % nbh;
}
/* This block's r-th work item of items, or -1 once it has walked them all: rounds of one item a block, every
 * other round walked backwards, so with the items longest first each block's sum of tile counts stays within a
 * few percent of the mean */
static __device__ __forceinline__ int fa_walk(int r, int items) {
    const int g = (int)gridDim.x, b = (int)blockIdx.x, item = r * g + ((r & 1) ? g - 1 - b : b);
    return item < items ? item : -1;
}
/* Row g + 8 r of a warp's 16 x 64 part of an m64n64 accumulator (lane 4 g + tq holds its columns 8 i + 2 tq, + 1 in
 * acc[4 i + 2 r], acc[4 i + 2 r + 1], i < 8), times scale, into the 16-bit row dst (16-byte aligned), 16 bytes a
 * lane (quad_store16; every lane of the warp takes part, those with store unset write nothing) */
template <typename T>
static __device__ __forceinline__ void fa_store_row(T *dst, const float (&acc)[32], int r, float scale, int tq, bool store) {
#pragma unroll
    for (int a = 0; a < 2; a++) {
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; j++) w[j] = pack2<T>(acc[4 * (4 * a + j) + 2 * r] * scale, acc[4 * (4 * a + j) + 2 * r + 1] * scale);
        quad_store16(dst + 32 * a, w, tq, store);
    }
}
#endif

template <typename T>
__global__ void __launch_bounds__(FA_THREADS, 1)
    attn_forward_wgmma_kernel(const __grid_constant__ CUtensorMap tm, T *out, float *lse, int T_, int C, int NH, int nbh, float scale_log2,
                              int turns) {
    after_previous_kernel();
#ifdef NGPT_WGMMA_DEVICE
    extern __shared__ __align__(1024) unsigned char fa_smem[];
    unsigned char *sQ = smem_align1024(fa_smem); /* two Q buffers: item n's in n % 2 */
    unsigned char *sK = sQ + 2 * FA_TILE_BYTES, *sV = sK + FA_STAGES * FA_TILE_BYTES;
    uint64_t *full_q = (uint64_t *)(sV + FA_STAGES * FA_TILE_BYTES), *full_k = full_q + 2, *full_v = full_k + FA_STAGES,
             *empty = full_v + FA_STAGES, *empty_q = empty + FA_STAGES;
    const int nqt = (T_ + FA_BM - 1) / FA_BM, items = nqt * nbh;
    fa_init_barriers(full_q, 2 + 2 * FA_STAGES, empty, FA_STAGES + 2); /* full_q, full_k, full_v; empty, then empty_q */
    if (threadIdx.x < 128) { /* producer warpgroup: one thread issues, the rest leave */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(FA_PRODUCER_REGS));
        if (threadIdx.x != 0) return;
        int g = 0; /* key tiles loaded so far, over the block's items: the stages' ring goes on from item to item */
        for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
            int qt, bh;
            fa_item(item, nbh, nqt, qt, bh);
            const int row0 = (bh / NH) * T_, h = bh % NH, qb = n & 1;
            mbar_wait(&empty_q[qb], ((n >> 1) & 1) ^ 1); /* item n - 2's products are done with this buffer (the first passes) */
            mbar_expect_bytes(&full_q[qb], FA_TILE_BYTES);
            tma_load(sQ + qb * FA_TILE_BYTES, &tm, h * FA_HS, row0 + qt * FA_BM, &full_q[qb]);
            for (int j = 0; j <= qt; j++, g++) {
                const int s = g % FA_STAGES;
                mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */
                mbar_expect_bytes(&full_k[s], FA_TILE_BYTES);
                tma_load(sK + s * FA_TILE_BYTES, &tm, C + h * FA_HS, row0 + j * FA_BN, &full_k[s]);
                mbar_expect_bytes(&full_v[s], FA_TILE_BYTES);
                tma_load(sV + s * FA_TILE_BYTES, &tm, 2 * C + h * FA_HS, row0 + j * FA_BN, &full_v[s]);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(FA_CONSUMER_REGS));
    const int cw = (threadIdx.x >> 7) - 1; /* consumer warpgroup: rows cw*64 .. cw*64+63 of the item's */
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g8 = lane >> 2, tq = lane & 3;
    const WgTurns turn = {cw, turns != 0};
    turn.begin();
    int g = 0; /* key tiles consumed so far, as the producer counts them */
    for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
        int qt, bh;
        fa_item(item, nbh, nqt, qt, bh);
        const int q0 = qt * FA_BM, nk = qt + 1; /* key tiles 0 .. qt: FA_BN = FA_BM, so tile qt is the diagonal */
        const int row0 = (bh / NH) * T_, h = bh % NH, qb = n & 1; /* qkv's row of (b, t = 0) */
        const int qrow[2] = {q0 + cw * 64 + w * 16 + g8, q0 + cw * 64 + w * 16 + g8 + 8};
        const unsigned char *q = sQ + qb * FA_TILE_BYTES + cw * 64 * 128;
        float s[64], o[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
        uint32_t p[8][4]; /* P of the previous key tile: the A fragments of O += P V's eight k steps */
#pragma unroll
        for (int i = 0; i < 32; i++) o[i] = 0.0f;
        auto softmax = [&](int j) {
            if (j == nk - 1) fa_softmax<true>(s, m, l, corr, j * FA_BN, qrow, tq, T_, scale_log2);
            else fa_softmax<false>(s, m, l, corr, j * FA_BN, qrow, tq, T_, scale_log2);
        };

        /* rounds 0 .. nk: S_0; then S_j with P_{j-1} V_{j-1}; then P_{nk-1} V_{nk-1} */
        mbar_wait(&full_q[qb], (n >> 1) & 1);
        mbar_wait(&full_k[g % FA_STAGES], (g / FA_STAGES) & 1);
#pragma unroll
        for (int i = 0; i < 64; i++) s[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(s[i])::"memory"); /* the zeros made before the fence, not at the wgmma */
        turn.mine();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        fa_issue_s<T>(s, q, sK + (g % FA_STAGES) * FA_TILE_BYTES);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        turn.yours();
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(s[i])::"memory"); /* no read of s moves above the wait */
        if (nk == 1) mbar_arrive(&empty_q[qb]); /* its last product from Q is done: the buffer may take item n + 2's */
        softmax(0);
        fa_pack_a<T, 8>(p, s); /* P_j from S_j into the A fragments */
        for (int j = 1; j < nk; j++) {
            const int st = (g + j) % FA_STAGES, pst = (g + j - 1) % FA_STAGES;
            mbar_wait(&full_k[st], ((g + j) / FA_STAGES) & 1);
            mbar_wait(&full_v[pst], ((g + j - 1) / FA_STAGES) & 1);
#pragma unroll
            for (int i = 0; i < 64; i++) s[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < 64; i++) asm volatile("" : "+f"(s[i])::"memory");
            turn.mine();
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            fa_issue_s<T>(s, q, sK + st * FA_TILE_BYTES);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            fa_issue_pv<T>(o, p, sV + pst * FA_TILE_BYTES);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            turn.yours();
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* S_j is done; P_{j-1} V_{j-1} may still run */
#pragma unroll
            for (int i = 0; i < 64; i++) asm volatile("" : "+f"(s[i])::"memory");
            if (j == nk - 1) mbar_arrive(&empty_q[qb]); /* the item's last product from Q is done */
            softmax(j);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); /* P_{j-1} V_{j-1} is done ... */
#pragma unroll
            for (int i = 0; i < 32; i++) asm volatile("" : "+f"(o[i])::"memory");
#pragma unroll
            for (int kk = 0; kk < 8; kk++) asm volatile("" : "+r"(p[kk][0]), "+r"(p[kk][1]), "+r"(p[kk][2]), "+r"(p[kk][3])::"memory");
            mbar_arrive(&empty[pst]); /* ... so its stage may be refilled, and P and O may be written */
#pragma unroll
            for (int i = 0; i < 32; i++) o[i] *= corr[(i >> 1) & 1];
            fa_pack_a<T, 8>(p, s);
        }
        const int lst = (g + nk - 1) % FA_STAGES;
        mbar_wait(&full_v[lst], ((g + nk - 1) / FA_STAGES) & 1);
        turn.mine();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        fa_issue_pv<T>(o, p, sV + lst * FA_TILE_BYTES);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        turn.yours();
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 32; i++) asm volatile("" : "+f"(o[i])::"memory");
        mbar_arrive(&empty[lst]);
        g += nk;
#pragma unroll
        for (int r = 0; r < 2; r++) { /* rows past T: the lanes still shuffle, store nothing */
            const int t = qrow[r];
            fa_store_row<T>(out + ((size_t)row0 + t) * C + (size_t)h * FA_HS, o, r, 1.0f / l[r], tq, t < T_);
            if (tq == 0 && t < T_) lse[(size_t)bh * T_ + t] = (m[r] + log2f(l[r])) * LN2_F;
        }
    }
    turn.end();
#else
    (void)tm; (void)out; (void)lse; (void)T_; (void)C; (void)NH; (void)nbh; (void)scale_log2; (void)turns;
#endif
}

/* --- Hopper (sm_90a): the attention backward on wgmma, head size 64 --------------------------------------
 * Two deterministic kernels (every output element written once, by one thread), with the forward's
 * producer, stages and barriers, where the wgmma forward runs and there is no dropout.
 * dK, dV: a work item is 128 keys of a head (64 a consumer warpgroup), which loops over the 64-query tiles
 * from its first key on (Q and dO tiles through FA_STAGES stages); the kernel is persistent as the forward
 * is (one block an SM walking its items, K and V in two buffers: the next item's load while the last one's
 * tiles run). S^T = K Q^T and dP^T = V dO^T are wgmma m64n64k16 with
 * both operands K-major in shared memory; P^T and dS^T = P^T (dP^T - D) are computed in registers (lse and D
 * of the tile's 64 queries read by each thread for its 16 columns), and dV += P^T dO, dK += dS^T Q take them
 * as register A operands with dO and Q MN-major (k = query). Each tile's dS^T, rounded to 16 bits as dK's
 * product takes it, is also stored for the dQ kernel: each consumer warp writes its 16 keys x 64 queries into
 * one of its two boxes of shared memory (128-byte rows, the copy engine's swizzle) and the copy engine stores
 * the box while the warp goes on (the matmul epilogue's way, mm_epilogue_direct).
 * dQ: a work item is 128 queries of a head (two 64-query tiles, one a consumer warpgroup), which loops over
 * the 128-key blocks up to its diagonal: dQ += dS K on m64n64k16, dS read back as the MN-major A operand
 * (k = key) of the stored dS^T tile, K MN-major; persistent too, its stages' ring going on from item to item,
 * so the next item's first K and dS^T tiles load while the last one's dQ is stored (the seventh run's profile:
 * the kernel waited on these loads, 35% of its samples, with a block an item of at most eight key blocks each
 * paying the first tiles' latency alone). So S and dP are computed once, not again for dQ: five products a tile, not
 * seven, for a scratch of 16 KB a (key block, query tile) pair, T^2 / 4 bytes a head; attn_backward_wgmma
 * runs the heads in groups whose tiles fit the scratch after D.
 * The stored tiles of one group of heads: head y (0 .. heads in the group - 1), key block kb, query tile
 * qt (2 kb .. nqt - 1) at rows (y fb_ds_tiles(T) + fb_ds_tile(kb, nqt) + qt - 2 kb) x 128 of a 64-column
 * matrix; keys and queries past T hold zeros. */
/* d (64x64 per warpgroup, f32) += A (64x16) B (16x64); TA / TB: the operand is MN-major */
template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t da, uint64_t db) {
#ifdef NGPT_WGMMA_DEVICE
    WG_MMA_ASYNC("m64n64k16", WG_REGS32 ", %32, %33, 1, 1, 1, %34, %35", WG_D32, "l"(da), "l"(db), "n"(TA), "n"(TB));
#else
    (void)d; (void)da; (void)db;
#endif
}
#define FB_BQ 64 /* the dK/dV kernel's query tiles */
#define FB_Q_BYTES (FB_BQ * FA_HS * 2) /* 8 KB */
/* the stored dS^T tiles of a head before key block kb's (nqt query tiles of 64): kb's has nqt - 2 kb */
static __host__ __device__ __forceinline__ long long fb_ds_tile(long long kb, long long nqt) { return kb * nqt - kb * (kb - 1); }
/* the stored dS^T tiles of a head of T_ positions */
static __host__ __device__ __forceinline__ long long fb_ds_tiles(int T_) { return fb_ds_tile((T_ + FA_BN - 1) / FA_BN, (T_ + FB_BQ - 1) / FB_BQ); }
/* two K and two V buffers, the Q and dO stages, each consumer warp's two boxes of dS^T, alignment slack, the mbarriers */
#define FB_DKDV_SMEM_BYTES (4 * FA_TILE_BYTES + 2 * FA_STAGES * FB_Q_BYTES + 8 * 2 * MM_BOX_BYTES + 1024 + 256)
/* the stages: K and the two query tiles' dS^T; alignment slack, the mbarriers */
#define FB_DQ_SMEM_BYTES (3 * FA_STAGES * FA_TILE_BYTES + 1024 + 256)


/* The dK/dV kernel's dS^T of one query tile for the dQ kernel: this warp's A fragments of it (sa, whose wgmma has
 * completed: the PTX ISA leaves reading a wgmma's A registers before its wait_group undefined) into its box, rows
 * g, g + 8 (sa[kk][x]: row g + 8 (x & 1), queries 8 (2 kk + x / 2) + 2 tq, + 1), 16-byte chunk c of row r at
 * c ^ (r % 8) = c ^ g; then the box out to row ds_row of the map */
#ifdef NGPT_WGMMA_DEVICE
static __device__ __forceinline__ void fb_store_ds(unsigned char *box, const uint32_t (&sa)[4][4], const CUtensorMap *tm_ds, int ds_row, int lane) {
    const int g = lane >> 2, tq = lane & 3;
    if (lane == 0) bulk_wait_read<1>(); /* the copy engine has read what it stored from this box two tiles ago */
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) *(uint32_t *)(box + (g + 8 * (x & 1)) * 128 + (((2 * kk + (x >> 1)) ^ g) << 4) + 4 * tq) = sa[kk][x];
    fence_async_proxy(); /* every lane's writes to the async proxy, then one lane stores the box */
    __syncwarp();
    if (lane == 0) {
        tma_store(tm_ds, 0, ds_row, box);
        bulk_commit();
    }
}
#endif

template <typename T>
__global__ void __launch_bounds__(FA_THREADS, 1)
    attn_backward_dkdv_wgmma_kernel(const __grid_constant__ CUtensorMap tm_qkv, const __grid_constant__ CUtensorMap tm_do,
                                    const __grid_constant__ CUtensorMap tm_ds, T *dqkv, const float *lse, const float *Dsum, int T_, int C, int NH,
                                    int bh0, int ny, float scale, float scale_log2, int turns) {
    after_previous_kernel();
#ifdef NGPT_WGMMA_DEVICE
    extern __shared__ __align__(1024) unsigned char fb_smem[];
    unsigned char *sK = smem_align1024(fb_smem); /* two K and two V buffers: item n's in n % 2 */
    unsigned char *sV = sK + 2 * FA_TILE_BYTES, *sQ = sV + 2 * FA_TILE_BYTES, *sO = sQ + FA_STAGES * FB_Q_BYTES;
    unsigned char *sBox = sO + FA_STAGES * FB_Q_BYTES; /* consumer warp v's boxes of dS^T: sBox + (2v, 2v + 1) MM_BOX_BYTES */
    uint64_t *full_kv = (uint64_t *)(sBox + 8 * 2 * MM_BOX_BYTES), *full = full_kv + 2, *empty = full + FA_STAGES, *empty_kv = empty + FA_STAGES;
    const int nqt = (T_ + FB_BQ - 1) / FB_BQ, items = (T_ + FA_BN - 1) / FA_BN * ny; /* item i: key block i / ny of head bh0 + i % ny */
    fa_init_barriers(full_kv, 2 + FA_STAGES, empty, FA_STAGES + 2); /* full_kv, full; empty, then empty_kv */
    if (threadIdx.x < 128) { /* producer warpgroup: one thread issues, the rest leave */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(FA_PRODUCER_REGS));
        if (threadIdx.x != 0) return;
        int g = 0; /* query tiles loaded so far, over the block's items: the stages' ring goes on from item to item */
        for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
            const int kb = item / ny, bh = bh0 + item % ny, row0 = (bh / NH) * T_, h = bh % NH, k0 = kb * FA_BN, kvb = n & 1;
            mbar_wait(&empty_kv[kvb], ((n >> 1) & 1) ^ 1); /* item n - 2's products are done with these buffers (the first passes) */
            mbar_expect_bytes(&full_kv[kvb], 2 * FA_TILE_BYTES);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                tma_load(sK + kvb * FA_TILE_BYTES + half * FB_Q_BYTES, &tm_qkv, C + h * FA_HS, row0 + k0 + half * FB_BQ, &full_kv[kvb]);
                tma_load(sV + kvb * FA_TILE_BYTES + half * FB_Q_BYTES, &tm_qkv, 2 * C + h * FA_HS, row0 + k0 + half * FB_BQ, &full_kv[kvb]);
            }
            for (int qt = 2 * kb; qt < nqt; qt++, g++) {
                const int s = g % FA_STAGES;
                mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */
                mbar_expect_bytes(&full[s], 2 * FB_Q_BYTES);
                tma_load(sQ + s * FB_Q_BYTES, &tm_qkv, h * FA_HS, row0 + qt * FB_BQ, &full[s]);
                tma_load(sO + s * FB_Q_BYTES, &tm_do, h * FA_HS, row0 + qt * FB_BQ, &full[s]);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(FA_CONSUMER_REGS));
    const int cw = (threadIdx.x >> 7) - 1; /* consumer warpgroup: keys cw*64 .. cw*64+63 of the item's */
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g8 = lane >> 2, tq = lane & 3;
    /* lse and D of a query tile wholly before T in 8-byte pairs: half the loads (each tile's 32 were 3% of the stall
     * samples in the seventh run's profile) */
    const bool pairs = T_ % 2 == 0 && ((uintptr_t)lse | (uintptr_t)Dsum) % 8 == 0;
    unsigned char *box = sBox + 2 * (4 * cw + w) * MM_BOX_BYTES; /* this warp's two boxes, taken in turn over all its stores */
    /* two rounds a query tile (WgTurns): S^T and dP^T, then dV and dK */
    const WgTurns turn = {cw, turns != 0};
    turn.begin();
    int g = 0, stores = 0; /* query tiles consumed and dS^T boxes stored so far */
    for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
        const int kb = item / ny, y = item % ny, bh = bh0 + y, row0 = (bh / NH) * T_, h = bh % NH, k0 = kb * FA_BN, kvb = n & 1;
        const int qt0 = 2 * kb; /* query tiles qt0 .. nqt - 1 */
        /* the stored dS^T row of query tile qt0's first key: tile qt0 + i's at + i FA_BN (< INT_MAX: the host's group) */
        const int ds_row0 = (int)(((long long)y * fb_ds_tiles(T_) + fb_ds_tile(kb, nqt)) * FA_BN);
        const int key[2] = {k0 + cw * 64 + w * 16 + g8, k0 + cw * 64 + w * 16 + g8 + 8};
        const unsigned char *kr = sK + kvb * FA_TILE_BYTES + cw * 64 * 128, *vr = sV + kvb * FA_TILE_BYTES + cw * 64 * 128;
        float st[32], dpt[32], dk[32], dv[32], lse2[16], Dq[16];
        uint32_t pa[4][4], sa[4][4]; /* P^T and dS^T of the previous query tile: A fragments of dV's and dK's k steps */
#pragma unroll
        for (int i = 0; i < 32; i++) dk[i] = dv[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; i++) asm volatile("" : "+f"(dk[i]), "+f"(dv[i])::"memory"); /* the zeros made here, not at the wgmma (C7515) */
        mbar_wait(&full_kv[kvb], (n >> 1) & 1);
        int i = 0;
        for (; qt0 + i < nqt; i++) {
            const int s = (g + i) % FA_STAGES, q0 = (qt0 + i) * FB_BQ;
            if (pairs && q0 + FB_BQ <= T_) { /* this thread's 16 query columns, q0 + 8 (c / 2) + 2tq + c % 2: 8-byte pairs */
                const float *lq = lse + (size_t)bh * T_ + q0 + 2 * tq, *dq = Dsum + (size_t)bh * T_ + q0 + 2 * tq;
#pragma unroll
                for (int c = 0; c < 16; c += 2) {
                    const float2 l2 = *(const float2 *)(lq + 4 * c), d2 = *(const float2 *)(dq + 4 * c);
                    lse2[c] = l2.x * LOG2E_F;
                    lse2[c + 1] = l2.y * LOG2E_F;
                    Dq[c] = d2.x;
                    Dq[c + 1] = d2.y;
                }
            } else {
#pragma unroll
                for (int c = 0; c < 16; c++) { /* one at a time, those past T zero */
                    const int q = q0 + 8 * (c >> 1) + 2 * tq + (c & 1);
                    lse2[c] = q < T_ ? lse[(size_t)bh * T_ + q] * LOG2E_F : 0.0f;
                    Dq[c] = q < T_ ? Dsum[(size_t)bh * T_ + q] : 0.0f;
                }
            }
            mbar_wait(&full[s], ((g + i) / FA_STAGES) & 1);
            const unsigned char *q = sQ + s * FB_Q_BYTES, *o = sO + s * FB_Q_BYTES;
#pragma unroll
            for (int x = 0; x < 32; x++) st[x] = dpt[x] = 0.0f;
#pragma unroll
            for (int x = 0; x < 32; x++) asm volatile("" : "+f"(st[x]), "+f"(dpt[x])::"memory"); /* zeros before the fence (else ptxas
                                                                                                     serialises the wgmma) */
            turn.mine();
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int ks = 0; ks < FA_HS / 16; ks++) {
                wgmma_m64n64k16<T, 0, 0>(st, wg_desc(kr + ks * 32, 16, 1024), wg_desc(q + ks * 32, 16, 1024));
                wgmma_m64n64k16<T, 0, 0>(dpt, wg_desc(vr + ks * 32, 16, 1024), wg_desc(o + ks * 32, 16, 1024));
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            turn.yours();
            if (i > 0) { /* the previous tile's dS^T, while S^T, dP^T run */
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* the previous tile's dV, dK are done: sa may be read */
#pragma unroll
                for (int kk = 0; kk < 4; kk++) asm volatile("" : "+r"(sa[kk][0]), "+r"(sa[kk][1]), "+r"(sa[kk][2]), "+r"(sa[kk][3])::"memory");
                fb_store_ds(box + (stores++ & 1) * MM_BOX_BYTES, sa, &tm_ds, ds_row0 + (i - 1) * FA_BN + cw * 64 + w * 16, lane);
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); /* S^T, dP^T, and the previous tile's dV, dK */
#pragma unroll
            for (int x = 0; x < 32; x++) asm volatile("" : "+f"(st[x]), "+f"(dpt[x]), "+f"(dk[x]), "+f"(dv[x])::"memory");
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                asm volatile("" : "+r"(pa[kk][0]), "+r"(pa[kk][1]), "+r"(pa[kk][2]), "+r"(pa[kk][3]), "+r"(sa[kk][0]), "+r"(sa[kk][1]),
                             "+r"(sa[kk][2]), "+r"(sa[kk][3])::"memory");
            if (i > 0) mbar_arrive(&empty[(g + i - 1) % FA_STAGES]); /* the previous tile's Q and dO are read */
            if (qt0 + i + 1 == nqt) mbar_arrive(&empty_kv[kvb]); /* the item's last products from K and V are done */
            const bool mask = q0 < k0 + FA_BN || q0 + FB_BQ > T_; /* a query before a key of the item, or past T */
#pragma unroll
            for (int x = 0; x < 32; x++) {
                const int c = 2 * (x >> 2) + (x & 1), r = (x >> 1) & 1, qq = q0 + 8 * (x >> 2) + 2 * tq + (x & 1);
                const float p = exp2_kept(!(mask & ((qq < key[r]) | (qq >= T_))), fmaf(st[x], scale_log2, -lse2[c]));
                st[x] = p;
                dpt[x] = p * (dpt[x] - Dq[c]);
            }
            fa_pack_a<T, 4>(pa, st);
            fa_pack_a<T, 4>(sa, dpt);
            turn.mine();
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < FB_BQ / 16; kk++) {
                wgmma_m64n64k16_rs<T, 1>(dv, pa[kk], wg_desc(o + kk * 2048, 8192, 1024));
                wgmma_m64n64k16_rs<T, 1>(dk, sa[kk], wg_desc(q + kk * 2048, 8192, 1024));
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            turn.yours();
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int x = 0; x < 32; x++) asm volatile("" : "+f"(dk[x]), "+f"(dv[x])::"memory");
#pragma unroll
        for (int kk = 0; kk < 4; kk++) asm volatile("" : "+r"(sa[kk][0]), "+r"(sa[kk][1]), "+r"(sa[kk][2]), "+r"(sa[kk][3])::"memory");
        /* the last tile's dS^T (every item has one: key block kb < T / 128 has query tile 2 kb) */
        mbar_arrive(&empty[(g + i - 1) % FA_STAGES]);
        fb_store_ds(box + (stores++ & 1) * MM_BOX_BYTES, sa, &tm_ds, ds_row0 + (i - 1) * FA_BN + cw * 64 + w * 16, lane);
        g += i;
        const size_t ld = (size_t)3 * C;
#pragma unroll
        for (int r = 0; r < 2; r++) { /* keys past T: shuffled, not stored */
            const int t = key[r];
            T *drow = dqkv + ((size_t)row0 + t) * ld + (size_t)h * FA_HS;
            fa_store_row<T>(drow + C, dk, r, scale, tq, t < T_);
            fa_store_row<T>(drow + 2 * C, dv, r, 1.0f, tq, t < T_);
        }
    }
    turn.end();
    if (lane == 0) bulk_wait_written(); /* the dS^T tiles are written, and the block's shared memory outlives their reads of it */
#else
    (void)tm_qkv; (void)tm_do; (void)tm_ds; (void)dqkv; (void)lse; (void)Dsum; (void)T_; (void)C; (void)NH; (void)bh0; (void)ny; (void)scale;
    (void)scale_log2; (void)turns;
#endif
}

template <typename T>
__global__ void __launch_bounds__(FA_THREADS, 1)
    attn_backward_dq_wgmma_kernel(const __grid_constant__ CUtensorMap tm_qkv, const __grid_constant__ CUtensorMap tm_ds, T *dqkv, int T_, int C, int NH,
                                  int bh0, int ny, float scale) {
    after_previous_kernel();
#ifdef NGPT_WGMMA_DEVICE
    extern __shared__ __align__(1024) unsigned char fb_smem[];
    unsigned char *sK = smem_align1024(fb_smem);
    unsigned char *sS = sK + FA_STAGES * FA_TILE_BYTES; /* stage s: query tile 2m + cw's dS^T at sS + (2s + cw) FA_TILE_BYTES */
    uint64_t *full = (uint64_t *)(sS + 2 * FA_STAGES * FA_TILE_BYTES), *empty = full + FA_STAGES;
    /* item i: query tiles 2m, 2m + 1 of head bh0 + y (fa_item: the longest loops first, m = nm - 1 - i / ny) */
    const int nqt = (T_ + FB_BQ - 1) / FB_BQ, nm = (T_ + FA_BM - 1) / FA_BM, items = nm * ny;
    fa_init_barriers(full, FA_STAGES, empty);
    if (threadIdx.x < 128) { /* producer warpgroup: one thread issues, the rest leave */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(FA_PRODUCER_REGS));
        if (threadIdx.x != 0) return;
        int g = 0; /* key blocks loaded so far, over the block's items: the stages' ring goes on from item to item */
        for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
            int m, y;
            fa_item(item, ny, nm, m, y);
            const int bh = bh0 + y, row0 = (bh / NH) * T_, h = bh % NH;
            const bool two = 2 * m + 1 < nqt; /* else tile 2m + 1 is past T: no dS^T tile of it is stored */
            for (int kb = 0; kb <= m; kb++, g++) {
                const int s = g % FA_STAGES;
                const int tile = (int)((long long)y * fb_ds_tiles(T_) + fb_ds_tile(kb, nqt) + 2 * (m - kb)); /* (kb, query tile 2m) */
                mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */
                mbar_expect_bytes(&full[s], (two ? 3 : 2) * FA_TILE_BYTES);
                tma_load(sK + s * FA_TILE_BYTES, &tm_qkv, C + h * FA_HS, row0 + kb * FA_BN, &full[s]);
                tma_load(sS + 2 * s * FA_TILE_BYTES, &tm_ds, 0, tile * FA_BN, &full[s]);
                if (two) tma_load(sS + (2 * s + 1) * FA_TILE_BYTES, &tm_ds, 0, (tile + 1) * FA_BN, &full[s]);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(FA_CONSUMER_REGS));
    const int cw = (threadIdx.x >> 7) - 1; /* consumer warpgroup: query tile 2m + cw */
    const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3, g = lane >> 2, tq = lane & 3;
    const size_t ld = (size_t)3 * C;
    int kbs = 0; /* key blocks consumed so far, as the producer counts them */
    for (int n = 0, item; (item = fa_walk(n, items)) >= 0; n++) {
        int m, y;
        fa_item(item, ny, nm, m, y);
        const int bh = bh0 + y, row0 = (bh / NH) * T_, h = bh % NH, nk = m + 1; /* key blocks 0 .. m */
        const bool active = cw == 0 || 2 * m + 1 < nqt; /* else this warpgroup only keeps the barriers' count */
        float dq[32];
#pragma unroll
        for (int x = 0; x < 32; x++) dq[x] = 0.0f;
#pragma unroll
        for (int x = 0; x < 32; x++) asm volatile("" : "+f"(dq[x])::"memory"); /* the zeros made before the first fence, not at the wgmma */
        /* nk >= 1 (m >= 0); said, so that no path where the loop never runs sets dq by ordinary instructions
         * where the last wait ends the in-flight products on it (ptxas would serialise every wgmma) */
        if (nk < 1) __builtin_unreachable();
        for (int kb = 0; kb < nk; kb++, kbs++) {
            const int st = kbs % FA_STAGES;
            mbar_wait(&full[st], (kbs / FA_STAGES) & 1);
            if (active) {
                const unsigned char *k = sK + st * FA_TILE_BYTES, *ds = sS + (2 * st + cw) * FA_TILE_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < FA_BN / 16; kk++) /* 16 keys a step: dS (MN-major, its rows the keys) times K (MN-major) */
                    wgmma_m64n64k16<T, 1, 1>(dq, wg_desc(ds + kk * 2048, 8192, 1024), wg_desc(k + kk * 2048, 8192, 1024));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
                for (int x = 0; x < 32; x++) asm volatile("" : "+f"(dq[x])::"memory");
            }
            mbar_arrive(&empty[st]); /* the stage is read: the producer may load the next key block (this item's or the next's) */
        }
#pragma unroll
        for (int r = 0; r < 2; r++) { /* rows past T (all of them where the warpgroup is not active): shuffled, not stored */
            const int t = (2 * m + cw) * FB_BQ + w * 16 + g + 8 * r;
            fa_store_row<T>(dqkv + ((size_t)row0 + t) * ld + (size_t)h * FA_HS, dq, r, scale, tq, t < T_);
        }
    }
#else
    (void)tm_qkv; (void)tm_ds; (void)dqkv; (void)T_; (void)C; (void)NH; (void)bh0; (void)ny; (void)scale;
#endif
}

/* --- SIMT attention: one warp per row, lane owns channels lane, lane+32, lane+64, lane+96 (hs <= 128) --- */
#define ATT_SIMT_WARPS 4
#define ATT_MAXD 4
/* One key and value of a warp's online softmax (lane owns channels lane + 32i): the score of q against k, then the
 * running max m, sum l and output acc updated; keep scales the value's weight (dropout) but not the sum. */
template <typename T>
__device__ __forceinline__ void attend_one_key(const T *k, const T *v, const float (&q)[ATT_MAXD], float (&acc)[ATT_MAXD], float &m, float &l,
                                               int lane, int hs, float scale, float keep) {
    float sc = 0;
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        if (d < hs) sc += q[i] * to_f(k[d]);
    }
    sc = warp_sum(sc) * scale;
    float mnew = fmaxf(m, sc), corr = expf(m - mnew), pe = expf(sc - mnew);
    l = l * corr + pe;
    pe *= keep;
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        acc[i] = acc[i] * corr + (d < hs ? pe * to_f(v[d]) : 0.0f);
    }
    m = mnew;
}

template <typename T>
__global__ void attn_forward_simt_kernel(T *out, float *lse, const T *qkv, int B, int T_, int C, int NH, int hs, float scale, DropArgs dr) {
    after_previous_kernel();
    size_t row = (size_t)blockIdx.x * ATT_SIMT_WARPS + (threadIdx.x >> 5); /* (b*NH + h)*T + t */
    int lane = threadIdx.x & 31;
    if (row >= (size_t)B * NH * T_) return;
    int t = (int)(row % (size_t)T_);
    size_t bh = row / (size_t)T_;
    int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
    const size_t ld = (size_t)3 * C;
    const T *base = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    float q[ATT_MAXD], acc[ATT_MAXD];
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        q[i] = d < hs ? to_f(base[(size_t)t * ld + d]) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        float keep = dr.p > 0.0f ? drop_factor(dr, (uint64_t)row * T_ + (uint64_t)t2) : 1.0f;
        attend_one_key(base + (size_t)t2 * ld + C, base + (size_t)t2 * ld + 2 * C, q, acc, m, l, lane, hs, scale, keep);
    }
    T *o = out + ((size_t)b * T_ + t) * C + (size_t)h * hs;
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        if (d < hs) o[d] = from_f<T>(acc[i] / l);
    }
    if (lane == 0) lse[row] = m + logf(l);
}

/* dQ, one warp per query row */
template <typename T>
__global__ void attn_backward_dq_simt_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, int B, int T_, int C, int NH,
                                             int hs, float scale, DropArgs dr) {
    after_previous_kernel();
    size_t row = (size_t)blockIdx.x * ATT_SIMT_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= (size_t)B * NH * T_) return;
    int t = (int)(row % (size_t)T_);
    size_t bh = row / (size_t)T_;
    int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
    const size_t ld = (size_t)3 * C;
    const T *base = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    const T *dO = dout + ((size_t)b * T_ + t) * C + (size_t)h * hs;
    float q[ATT_MAXD], g[ATT_MAXD], dq[ATT_MAXD];
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        q[i] = d < hs ? to_f(base[(size_t)t * ld + d]) : 0.0f;
        g[i] = d < hs ? to_f(dO[d]) : 0.0f;
        dq[i] = 0.0f;
    }
    float L = lse[row], Dv = Dsum[row];
    for (int t2 = 0; t2 <= t; t2++) {
        const T *k = base + (size_t)t2 * ld + C, *v = base + (size_t)t2 * ld + 2 * C;
        float s = 0, dp = 0, kk[ATT_MAXD];
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) {
            int d = lane + 32 * i;
            kk[i] = d < hs ? to_f(k[d]) : 0.0f;
            s += q[i] * kk[i];
            if (d < hs) dp += g[i] * to_f(v[d]);
        }
        s = warp_sum(s);
        dp = warp_sum(dp);
        float p = expf(s * scale - L);
        float f = dr.p > 0.0f ? drop_factor(dr, (uint64_t)row * T_ + (uint64_t)t2) : 1.0f;
        float ds = p * (dp * f - Dv) * scale;
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) dq[i] += ds * kk[i];
    }
    T *d_q = dqkv + ((size_t)b * T_ + t) * ld + (size_t)h * hs;
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        if (d < hs) d_q[d] = from_f<T>(dq[i]);
    }
}

/* dK, dV, one warp per key row t2, looping over the queries t >= t2 */
template <typename T>
__global__ void attn_backward_dkdv_simt_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, int B, int T_, int C,
                                               int NH, int hs, float scale, DropArgs dr) {
    after_previous_kernel();
    size_t krow = (size_t)blockIdx.x * ATT_SIMT_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (krow >= (size_t)B * NH * T_) return;
    int t2 = (int)(krow % (size_t)T_);
    size_t bh = krow / (size_t)T_;
    int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
    const size_t ld = (size_t)3 * C;
    const T *base = qkv + (size_t)b * T_ * ld + (size_t)h * hs;
    float k[ATT_MAXD], v[ATT_MAXD], dk[ATT_MAXD], dv[ATT_MAXD];
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        k[i] = d < hs ? to_f(base[(size_t)t2 * ld + C + d]) : 0.0f;
        v[i] = d < hs ? to_f(base[(size_t)t2 * ld + 2 * C + d]) : 0.0f;
        dk[i] = dv[i] = 0.0f;
    }
    for (int t = t2; t < T_; t++) {
        const T *q = base + (size_t)t * ld;
        const T *dO = dout + ((size_t)b * T_ + t) * C + (size_t)h * hs;
        float s = 0, dp = 0, qq[ATT_MAXD], gg[ATT_MAXD];
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) {
            int d = lane + 32 * i;
            qq[i] = d < hs ? to_f(q[d]) : 0.0f;
            gg[i] = d < hs ? to_f(dO[d]) : 0.0f;
            s += qq[i] * k[i];
            dp += gg[i] * v[i];
        }
        s = warp_sum(s);
        dp = warp_sum(dp);
        size_t qrow = bh * (size_t)T_ + t;
        float p = expf(s * scale - lse[qrow]);
        float f = dr.p > 0.0f ? drop_factor(dr, (uint64_t)qrow * T_ + (uint64_t)t2) : 1.0f;
        float ds = p * (dp * f - Dsum[qrow]) * scale;
        float pf = p * f;
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) {
            dv[i] += pf * gg[i];
            dk[i] += ds * qq[i];
        }
    }
    T *drow = dqkv + ((size_t)b * T_ + t2) * ld + (size_t)h * hs;
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        if (d < hs) {
            drow[C + d] = from_f<T>(dk[i]);
            drow[2 * C + d] = from_f<T>(dv[i]);
        }
    }
}

/* Decoding (generation with a KV cache): a block of DEC_WARPS warps per (row, head h) of positions t..t+n-1 of S
 * sequences (row s*n+i: position t+i of sequence s). Stores k and v of the row's qkv (3C) at its position of the
 * cache kv (S, 2, maxT, C), then out (n*S, C) = softmax(q K^T * scale) V over positions 0..t+i: those before t from
 * the cache, t.. from qkv itself (another block may be storing them). A warp a row over every key in turn waits
 * on a chain of one load and one shuffle reduction after another, which at a few samples and a long context is
 * what decoding's attention takes: here the keys are split between the warps (warp w takes w, w + DEC_WARPS, ...),
 * and a warp takes DEC_KEYS of its keys a step, their loads and reductions independent of each other. Each warp
 * keeps its own running max, sum and output (lane: channels lane + 32i), which the block then merges in warp order. */
#define DEC_WARPS 8
#define DEC_KEYS 4
static_assert(DEC_WARPS >= ATT_MAXD, "the merge takes a thread a channel of a head");
template <typename T>
__global__ void __launch_bounds__(DEC_WARPS * 32)
    attn_decode_kernel(T *out, T *kv, const T *qkv, int S, int t, int n, int maxT, int C, int NH, int hs, float scale, const int *t_at) {
    after_previous_kernel();
    __shared__ float part_acc[DEC_WARPS][32 * ATT_MAXD]; /* warp w's output, channel d at d */
    __shared__ float part_m[DEC_WARPS], part_l[DEC_WARPS];
    const size_t rh = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (rh >= (size_t)n * S * NH) return;
    size_t r = rh / (size_t)NH, s = r / (size_t)n, C3 = 3 * (size_t)C, hoff = (size_t)(rh % (size_t)NH) * hs;
    if (t_at) t = *t_at; /* a graph's replay: this step's position */
    if (t < 0 || t > maxT - n) { /* outside the cache: NaN out, nothing stored */
        if ((int)threadIdx.x < hs) out[r * (size_t)C + hoff + threadIdx.x] = from_f<T>(NAN);
        return;
    }
    int i_pos = (int)(r % (size_t)n), last = t + i_pos;
    const T *row = qkv + r * C3 + hoff;
    T *K = kv + s * 2 * (size_t)maxT * C + hoff, *V = K + (size_t)maxT * C;
    float q[ATT_MAXD], acc[ATT_MAXD];
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) {
        int d = lane + 32 * i;
        q[i] = d < hs ? to_f(row[d]) : 0.0f;
        acc[i] = 0.0f;
        if (warp == 0 && d < hs) {
            K[(size_t)last * C + d] = row[C + d];
            V[(size_t)last * C + d] = row[2 * C + d];
        }
    }
    float m = -INFINITY, l = 0.0f;
    for (int j0 = warp; j0 <= last; j0 += DEC_WARPS * DEC_KEYS) {
        float sc[DEC_KEYS], vv[DEC_KEYS][ATT_MAXD]; /* the step's values loaded with its keys: one wait for both */
#pragma unroll
        for (int u = 0; u < DEC_KEYS; u++) { /* key j: before t from the cache, from t on the chunk's own rows */
            int j = min(j0 + u * DEC_WARPS, last);
            const T *kp = j < t ? K + (size_t)j * C : qkv + (s * n + (size_t)(j - t)) * C3 + hoff + C;
            const T *vp = j < t ? V + (size_t)j * C : kp + C;
            sc[u] = 0.0f;
#pragma unroll
            for (int i = 0; i < ATT_MAXD; i++) {
                int d = lane + 32 * i;
                vv[u][i] = d < hs ? to_f(vp[d]) : 0.0f;
                if (d < hs) sc[u] += q[i] * to_f(kp[d]);
            }
        }
        float mnew = m;
#pragma unroll
        for (int u = 0; u < DEC_KEYS; u++) { /* the keys past the last (the warp's last step) weigh nothing */
            sc[u] = j0 + u * DEC_WARPS <= last ? warp_sum(sc[u]) * scale : -INFINITY;
            mnew = fmaxf(mnew, sc[u]);
        }
        float corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int i = 0; i < ATT_MAXD; i++) acc[i] *= corr;
#pragma unroll
        for (int u = 0; u < DEC_KEYS; u++) {
            float pe = expf(sc[u] - mnew);
            l += pe;
#pragma unroll
            for (int i = 0; i < ATT_MAXD; i++) acc[i] += pe * vv[u][i];
        }
        m = mnew;
    }
#pragma unroll
    for (int i = 0; i < ATT_MAXD; i++) part_acc[warp][lane + 32 * i] = acc[i];
    if (lane == 0) { part_m[warp] = m; part_l[warp] = l; }
    __syncthreads();
    const int d = threadIdx.x; /* a thread a channel (hs <= 128 < the block's threads) */
    if (d >= hs) return;
    float mx = -INFINITY, sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int w = 0; w < DEC_WARPS; w++) mx = fmaxf(mx, part_m[w]);
#pragma unroll
    for (int w = 0; w < DEC_WARPS; w++) {
        float f = part_l[w] > 0.0f ? expf(part_m[w] - mx) : 0.0f; /* a warp that had no key: l = 0, m = -inf */
        sum += part_l[w] * f;
        o += part_acc[w][d] * f;
    }
    out[r * (size_t)C + hoff + d] = from_f<T>(o / sum);
}

/* A chunk's keys and values into the cache: row s*n+i of qkv (S, n, 3C) at position t+i of sequence s of kv
 * (S, 2, maxT, C); a thread an element of the keys and of the values. */
template <typename T>
__global__ void kv_store_kernel(T *kv, const T *qkv, int S, int t, int n, int maxT, int C) {
    after_previous_kernel();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)S * n * C) return;
    size_t c = i % (size_t)C, r = i / (size_t)C, s = r / (size_t)n;
    const T *row = qkv + r * 3 * (size_t)C;
    T *k = kv + (s * 2 * (size_t)maxT + (size_t)t + r % (size_t)n) * C + c;
    k[0] = row[C + c];
    k[(size_t)maxT * C] = row[2 * C + c];
}

/* the padded head size of the tensor-core kernels for hs, or 0 when they cannot run it here */
static int attn_tc_hs(ngpt_backend *be, int hs, int B, int NH) {
    if (be->dtype == NGPT_DTYPE_F32 || hs <= 0 || hs > 128) return 0;
    if ((long long)B * NH > 65535) return 0; /* their grid.y; the SIMT kernels' grids are one-dimensional */
    int HS = hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
    /* room for the largest of the three kernels (the forward's tiles, or dK, dV's buffers) */
    const CudaImpl *im = impl_of(be);
    const bool sm75 = im->device_sm75;
    size_t need = HS == 32 ? attn_smem_bytes<32>(sm75).most : HS == 64 ? attn_smem_bytes<64>(sm75).most : attn_smem_bytes<128>(sm75).most;
    return need <= im->smem_optin ? HS : 0;
}

static int attn_check(ngpt_backend *be, const char *op, int B, int T, int C, int NH) {
    if (bad_dims(be, op, B, T, C) || bad_dims(be, op, NH, 0, 0)) return 1;
    if (NH <= 0 || C % NH != 0 || C / NH > 32 * ATT_MAXD) {
        cu_fail(be, NGPT_ERR_ARG, "cuda %s: C = %d and NH = %d give a head size that is not a whole number in 1..%d", op, C, NH, 32 * ATT_MAXD);
        return 1;
    }
    if ((unsigned long long)B * NH * T / ATT_SIMT_WARPS >= 0x7fffffffull) { /* the SIMT kernels: a warp per row */
        cu_fail(be, NGPT_ERR_ARG, "cuda %s: B*NH*T = %lld rows are too many for one launch (at most %lld)", op, (long long)B * NH * T,
                0x7fffffffll * ATT_SIMT_WARPS);
        return 1;
    }
    return 0;
}

template <typename T, int HS>
static void attn_forward_tc(ngpt_backend *be, T *out, float *lse, const T *qkv, int B, int T_, int C, int NH, DropArgs dr) {
    int hs = C / NH;
    float scale_log2 = LOG2E_F / sqrtf((float)hs);
    dim3 grid((unsigned)((T_ + ATT_B - 1) / ATT_B), (unsigned)(B * NH));
    int vec = vec_ok(qkv, (size_t)3 * C) && hs % 8 == 0 && C % 8 == 0;
    const bool vec_out = vec_ok(out, (size_t)C) && hs == HS; /* whole 32-column groups of the head, 16-byte aligned */
    auto *kernel = vec_out ? attn_forward_tc_kernel<T, HS, true> : attn_forward_tc_kernel<T, HS, false>;
    const size_t smem = attn_smem_bytes<HS>(impl_of(be)->device_sm75).fwd;
    CU_LAUNCH(be, "attn_forward_tc_kernel", kernel, grid, ATT_THREADS, smem, out, lse, qkv, T_, C, NH, hs, scale_log2, dr, vec);
}
/* Whether the wgmma attention kernels may run this shape: head size 64, no dropout, a backend that runs them
 * (use_wgmma_attention), B*NH blocks in grid.y, the copy engine's row coordinates in an int */
static bool attn_wgmma_shape(const CudaImpl *im, int B, int T_, int C, int NH, const DropArgs &dr) {
    return im->use_wgmma_attention && dr.p == 0.0f && C == NH * FA_HS && (long long)B * NH <= 65535 && (long long)B * T_ <= INT_MAX - FA_BN;
}
/* The persistent wgmma kernels' blocks for this many work items: one an SM (NGPT_ATTN_PERSISTENT=0: one an item) */
static int attn_blocks(const CudaImpl *im, int items) { return im->attn_persistent && items > im->sm_count ? im->sm_count : items; }
/* The wgmma forward: 1 when launched, 0 when it cannot run these operands (nothing happened; out must be 16-byte
 * aligned, its rows stored as 16-byte vectors by fa_store_row, as dqkv must for the backward) */
template <typename T>
static int attn_forward_wgmma(ngpt_backend *be, T *out, float *lse, const T *qkv, int B, int T_, int C, int NH, DropArgs dr) {
    CudaImpl *im = impl_of(be);
    if (!attn_wgmma_shape(im, B, T_, C, NH, dr) || !vec_ok(qkv, (size_t)3 * C) || (uintptr_t)out % 16) return 0;
    CUtensorMap map;
    if (tma_map(im, &map, qkv, (size_t)3 * C, (size_t)B * T_, (size_t)3 * C, FA_HS, FA_BM)) return 0;
    const int grid = attn_blocks(im, (T_ + FA_BM - 1) / FA_BM * B * NH);
    CU_LAUNCH(be, "attn_forward_wgmma_kernel", attn_forward_wgmma_kernel<T>, grid, FA_THREADS, FA_SMEM_BYTES, map, out, lse, T_, C, NH, B * NH,
              LOG2E_F / sqrtf((float)FA_HS), im->attn_turns);
    return 1;
}
/* The wgmma backward (dK, dV and the dS^T tiles, then dQ from them), in groups of heads whose tiles fit the
 * scratch after D: 1 when launched, 0 when it cannot run these operands (nothing happened) */
template <typename T>
static int attn_backward_wgmma(ngpt_backend *be, T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, T *ds, size_t ds_bytes,
                               int B, int T_, int C, int NH, DropArgs dr) {
    CudaImpl *im = impl_of(be);
    if (!attn_wgmma_shape(im, B, T_, C, NH, dr) || !vec_ok(qkv, (size_t)3 * C) || !vec_ok(dout, (size_t)C) || (uintptr_t)dqkv % 16) return 0;
    const long long heads = (long long)B * NH, tiles = fb_ds_tiles(T_);
    long long group = (long long)(ds_bytes / ((size_t)tiles * FA_TILE_BYTES));
    if (group > heads) group = heads;
    if (group > INT_MAX / (tiles * FA_BN)) group = INT_MAX / (tiles * FA_BN); /* the tiles' rows: the copy engine's int coordinates */
    if (group < 1) return 0;
    const size_t rows = (size_t)B * T_, ds_rows = (size_t)(group * tiles * FA_BN);
    /* boxes of 64 head dims x 64 rows (dK, dV's query tiles, K and V in halves) and x 128 rows (dQ's K); the
     * dS^T tiles in boxes of 64 queries x 16 keys (a warp's store) and x 128 keys (dQ's loads) */
    CUtensorMap qkv64, do64, qkv128, ds16, ds128;
    if (tma_map(im, &qkv64, qkv, (size_t)3 * C, rows, (size_t)3 * C, FA_HS, FB_BQ) || tma_map(im, &do64, dout, (size_t)C, rows, (size_t)C, FA_HS, FB_BQ) ||
        tma_map(im, &qkv128, qkv, (size_t)3 * C, rows, (size_t)3 * C, FA_HS, FA_BM) || tma_map(im, &ds16, ds, FB_BQ, ds_rows, FB_BQ, FB_BQ, 16) ||
        tma_map(im, &ds128, ds, FB_BQ, ds_rows, FB_BQ, FB_BQ, FA_BN))
        return 0;
    const float scale = 1.0f / sqrtf((float)FA_HS), scale_log2 = LOG2E_F * scale;
    const unsigned blocks = (unsigned)((T_ + FA_BM - 1) / FA_BM); /* 128 keys (dK, dV) or 128 queries (dQ) a block */
    for (long long bh0 = 0; bh0 < heads; bh0 += group) {
        const int ny = (int)(heads - bh0 < group ? heads - bh0 : group);
        const int nblocks = attn_blocks(im, (int)blocks * ny); /* both kernels: blocks x ny items */
        if (CU_LAUNCH(be, "attn_backward_dkdv_wgmma_kernel", attn_backward_dkdv_wgmma_kernel<T>, nblocks, FA_THREADS, FB_DKDV_SMEM_BYTES, qkv64, do64,
                      ds16, dqkv, lse, D, T_, C, NH, (int)bh0, ny, scale, scale_log2, im->attn_turns)) return 1;
        if (CU_LAUNCH(be, "attn_backward_dq_wgmma_kernel", attn_backward_dq_wgmma_kernel<T>, nblocks, FA_THREADS, FB_DQ_SMEM_BYTES, qkv128, ds128,
                      dqkv, T_, C, NH, (int)bh0, ny, scale)) return 1;
    }
    return 1;
}
template <typename T, int HS>
static void attn_backward_tc(ngpt_backend *be, T *dqkv, const T *dout, const T *qkv, const float *lse, const float *D, int B, int T_, int C, int NH,
                             DropArgs dr) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs), scale_log2 = LOG2E_F * scale;
    dim3 grid((unsigned)((T_ + ATT_B - 1) / ATT_B), (unsigned)(B * NH));
    int vq = vec_ok(qkv, (size_t)3 * C) && hs % 8 == 0 && C % 8 == 0, vd = vec_ok(dout, (size_t)C) && hs % 8 == 0;
    int vo = vec_ok(dqkv, (size_t)3 * C) && hs == HS; /* dQ, dK, dV rows: whole 32-column groups, 16-byte aligned */
    const AttnSmemBytes smem = attn_smem_bytes<HS>(impl_of(be)->device_sm75);
    if (CU_LAUNCH(be, "attn_backward_dkdv_tc_kernel", attn_backward_dkdv_tc_kernel<T, HS>, grid, ATT_THREADS, smem.dkdv, dqkv, dout, qkv, lse, D,
                  T_, C, NH, hs, scale, scale_log2, dr, vq, vd, vo)) return;
    CU_LAUNCH(be, "attn_backward_dq_tc_kernel", attn_backward_dq_tc_kernel<T, HS>, grid, ATT_THREADS, smem.dq, dqkv, dout, qkv, lse, D, T_, C, NH, hs,
              scale, scale_log2, dr, vq, vd, vo);
}

template <typename T>
static void attention_forward_t(ngpt_backend *be, T *out, float *lse, const T *qkv, int B, int T_, int C, int NH, DropArgs dr) {
    int hs = C / NH;
    if constexpr (sizeof(T) == 2) {
        if (attn_forward_wgmma<T>(be, out, lse, qkv, B, T_, C, NH, dr)) return;
        switch (attn_tc_hs(be, hs, B, NH)) {
        case 32: attn_forward_tc<T, 32>(be, out, lse, qkv, B, T_, C, NH, dr); return;
        case 64: attn_forward_tc<T, 64>(be, out, lse, qkv, B, T_, C, NH, dr); return;
        case 128: attn_forward_tc<T, 128>(be, out, lse, qkv, B, T_, C, NH, dr); return;
        default: break; /* SIMT below */
        }
    }
    size_t rows = (size_t)B * NH * T_;
    CU_LAUNCH(be, "attn_forward_simt_kernel", attn_forward_simt_kernel<T>, (unsigned)((rows + ATT_SIMT_WARPS - 1) / ATT_SIMT_WARPS),
              32 * ATT_SIMT_WARPS, 0, out, lse, qkv, B, T_, C, NH, hs, 1.0f / sqrtf((float)hs), dr);
}
template <typename T>
static void attention_backward_t(ngpt_backend *be, T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, int B, int T_, int C, int NH,
                                 DropArgs dr) {
    CudaImpl *im = impl_of(be);
    size_t rows = (size_t)B * NH * T_;
    int hs = C / NH;
    float *D = (float *)scratch_get(be, rows * sizeof(float), "attention_backward");
    if (!D) return;
    constexpr int VEC = 16 / sizeof(T);
    const unsigned rowdot_blocks = (unsigned)((rows * ROWDOT_LANES + 255) / 256);
    auto *rowdot = rows_vectorizable<T>(hs, dout, out) && C % VEC == 0 ? attn_rowdot_kernel<T, VEC> : attn_rowdot_kernel<T, 1>;
    if (CU_LAUNCH(be, "attn_rowdot_kernel", rowdot, rowdot_blocks, 256, 0, D, dout, out, B, T_, C, NH, hs)) return;
    if constexpr (sizeof(T) == 2) {
        const size_t d_bytes = (rows * sizeof(float) + 1023) / 1024 * 1024; /* the wgmma backward's dS^T tiles take the scratch after D */
        const size_t ds_bytes = im->scratch_bytes > d_bytes ? im->scratch_bytes - d_bytes : 0;
        if (attn_backward_wgmma<T>(be, dqkv, dout, qkv, lse, D, (T *)((char *)D + d_bytes), ds_bytes, B, T_, C, NH, dr)) return;
        switch (attn_tc_hs(be, hs, B, NH)) {
        case 32: attn_backward_tc<T, 32>(be, dqkv, dout, qkv, lse, D, B, T_, C, NH, dr); return;
        case 64: attn_backward_tc<T, 64>(be, dqkv, dout, qkv, lse, D, B, T_, C, NH, dr); return;
        case 128: attn_backward_tc<T, 128>(be, dqkv, dout, qkv, lse, D, B, T_, C, NH, dr); return;
        default: break; /* SIMT below */
        }
    }
    unsigned blocks = (unsigned)((rows + ATT_SIMT_WARPS - 1) / ATT_SIMT_WARPS);
    float scale = 1.0f / sqrtf((float)hs);
    if (CU_LAUNCH(be, "attn_backward_dkdv_simt_kernel", attn_backward_dkdv_simt_kernel<T>, blocks, 32 * ATT_SIMT_WARPS, 0, dqkv, dout, qkv, lse, D, B,
                  T_, C, NH, hs, scale, dr)) return;
    CU_LAUNCH(be, "attn_backward_dq_simt_kernel", attn_backward_dq_simt_kernel<T>, blocks, 32 * ATT_SIMT_WARPS, 0, dqkv, dout, qkv, lse, D, B, T_, C,
              NH, hs, scale, dr);
}

static void cu_attention_forward(ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *drop) {
    if (attn_check(be, "attention_forward", B, T, C, NH) || !B || !T || !C) return;
    DISPATCH_DTYPE(be->dtype, Ty, attention_forward_t<Ty>(be, (Ty *)out, lse, (const Ty *)qkv, B, T, C, NH, drop_args(drop)));
}
static void cu_attention_backward(ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B, int T,
                                  int C, int NH, const ngpt_dropout *drop) {
    if (attn_check(be, "attention_backward", B, T, C, NH) || !B || !T || !C) return;
    DISPATCH_DTYPE(be->dtype, Ty,
                   attention_backward_t<Ty>(be, (Ty *)dqkv, (const Ty *)dout, (const Ty *)qkv, (const Ty *)out, lse, B, T, C, NH, drop_args(drop)));
}

/* A chunk of a prompt at position 0 of 16-bit caches: its rows attend among themselves alone, which is the causal
 * self-attention of training's forward over (S, n) (the tensor-core kernels, not a warp a row over every key in turn),
 * with its log-sum-exp in the scratch; the keys and values stored beside it. False (nothing launched) when the
 * scratch cannot hold the log-sum-exp. */
template <typename T>
static bool attention_prompt_t(ngpt_backend *be, T *out, T *kv, const T *qkv, int S, int n, int maxT, int C, int NH) {
    CudaImpl *im = impl_of(be);
    if (sizeof(T) != 2 || n < 2 || !im->scratch || im->scratch_bytes < (size_t)S * NH * n * sizeof(float)) return false;
    size_t elems = (size_t)S * n * C;
    if (!CU_LAUNCH(be, "kv_store_kernel", kv_store_kernel<T>, (unsigned)((elems + 255) / 256), 256, 0, kv, qkv, S, 0, n, maxT, C))
        attention_forward_t<T>(be, out, (float *)im->scratch, qkv, S, n, C, NH, drop_args(NULL));
    return true;
}

static void cu_attention_decode(ngpt_backend *be, void *out, void *kv, const void *qkv, int S, int t, int n, int maxT, int C, int NH,
                                const int32_t *t_at) {
    if (attn_check(be, "attention_decode", S, maxT, C, NH) || !S || !C) return;
    if (t < 0 || n < 1 || n > maxT - t) {
        cu_fail(be, NGPT_ERR_ARG, "cuda attention_decode: positions t = %d .. t + n - 1 (n = %d) are not within the cache's 0..%d", t, n,
                maxT - 1);
        return;
    }
    if (t == 0 && !t_at && (long long)S * n <= INT_MAX / 3) {
        bool done = false;
        DISPATCH_DTYPE(be->dtype, Ty, done = attention_prompt_t<Ty>(be, (Ty *)out, (Ty *)kv, (const Ty *)qkv, S, n, maxT, C, NH));
        if (done) return;
    }
    int hs = C / NH;
    size_t blocks = (size_t)n * S * NH;
    if (blocks > INT_MAX) {
        cu_fail(be, NGPT_ERR_ARG, "cuda attention_decode: %zu (row, head) pairs (n %d x S %d x heads %d), more than a launch's %d blocks", blocks,
                n, S, NH, INT_MAX);
        return;
    }
    DISPATCH_DTYPE(be->dtype, Ty,
                   CU_LAUNCH(be, "attn_decode_kernel", attn_decode_kernel<Ty>, (unsigned)blocks, 32 * DEC_WARPS, 0, (Ty *)out, (Ty *)kv,
                             (const Ty *)qkv, S, t, n, maxT, C, NH, hs, 1.0f / sqrtf((float)hs), (const int *)t_at));
}

/* ======================================================================================================
 * Loss: softmax cross-entropy over the first V of Vp columns, one block per row, gradient in place.
 * Two passes over the row: an online softmax (each thread keeps the running max and the sum of exp
 * relative to it; the threads' pairs are merged in a fixed order), then the gradient. The max stays in the
 * logits' own units, so a target that is the row's max gives a loss of exactly log(sum) >= 0 (in log2
 * units, max * log2(e) - target * log2(e) would not cancel).
 * Rows whose 16-byte alignment allows it are read and written 16 bytes at a time, XENT_LOADS vectors a
 * thread in flight at once. With the gradient, where two blocks' rows fit in an SM's shared memory (GPT-2's
 * 50,304 bf16 logits are 98 KB), the first pass keeps the row there and the second reads it from there: the
 * logits are read from global memory once, not twice (xent_row_cached; NGPT_LOSS_SMEM=0: not, to compare).
 * ==================================================================================================== */

#define XENT_THREADS 512
#define XENT_LOADS 4
/* (m, s) += (m2, s2): two partial sums of exp(x - max), each relative to its own max, made relative to the larger */
static __device__ __forceinline__ void softmax_merge(float &m, float &s, float m2, float s2) {
    float mx = fmaxf(m, m2);
    s = s * exp2f((m - mx) * LOG2E_F) + s2 * exp2f((m2 - mx) * LOG2E_F);
    m = mx;
}
/* VEC = 16 / sizeof(T) when Vp is a multiple of it and the logits are 16-byte aligned, else 1; CACHED: the
 * row's first V values (rounded up to whole vectors) in dynamic shared memory between the passes (VEC > 1) */
template <typename T, int VEC, bool CACHED>
__global__ void __launch_bounds__(XENT_THREADS, 2)
    crossentropy_kernel(T *logits, float *losses, const int32_t *targets, int V, int Vp, float dscale) {
    after_previous_kernel();
    typedef RowVec<T, VEC> Vec;
    extern __shared__ float4 xent_row4[]; /* CACHED: the row's vectors */
    Vec *row_cache = (Vec *)xent_row4;
    __shared__ float2 part[XENT_THREADS / 32];
    int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T *z = logits + (size_t)row * Vp;
    int tg = targets[row];
    float zt = (tg >= 0 && tg < V) ? to_f(z[tg]) : 0.0f; /* read before anything is overwritten */
    float m = -FLT_MAX, s = 0.0f; /* this thread's max of the logits, and sum of exp(x - m) */
    constexpr int STEP = XENT_THREADS * VEC;
    for (int j0 = threadIdx.x * VEC; j0 < V; j0 += XENT_LOADS * STEP) {
        Vec x[XENT_LOADS];
#pragma unroll
        for (int u = 0; u < XENT_LOADS; u++) /* the loads first, all in flight together */
            if (j0 + u * STEP < V) x[u] = *(const Vec *)(z + j0 + u * STEP);
#pragma unroll
        for (int u = 0; u < XENT_LOADS; u++) {
            const int j = j0 + u * STEP;
            if (j >= V) break;
            if (CACHED) row_cache[j / VEC] = x[u];
            float y[VEC], vmax = -FLT_MAX;
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                y[k] = to_f(x[u].v[k]);
                vmax = fmaxf(vmax, j + k < V ? y[k] : -FLT_MAX); /* a select: a conditional fmaxf was a branch too */
            }
            if (vmax > m) {
                s *= exp2f((m - vmax) * LOG2E_F);
                m = vmax;
            }
#pragma unroll
            for (int k = 0; k < VEC; k++) s += exp2_kept(j + k < V, (y[k] - m) * LOG2E_F); /* + 0 past V: the same bits */
        }
    }
    for (int o = 16; o > 0; o >>= 1) softmax_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) part[warp] = make_float2(m, s);
    __syncthreads(); /* also orders every read above before the writes below, and the row's cache before its reads */
    m = -FLT_MAX, s = 0.0f;
    for (int w = 0; w < XENT_THREADS / 32; w++) softmax_merge(m, s, part[w].x, part[w].y);
    float ls2 = log2f(s); /* the row's log-sum-exp is m + ls2 * ln(2) */
    if (threadIdx.x == 0) losses[row] = (tg >= 0 && tg < V) ? (m - zt) + ls2 * LN2_F : NAN;
    if (dscale == 0.0f) return;
    for (int j = threadIdx.x * VEC; j < Vp; j += STEP) {
        Vec x = Vec();
        if (j < V) x = CACHED ? row_cache[j / VEC] : *(const Vec *)(z + j); /* the padding's gradient is 0 whatever it held */
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            const float e = exp2_kept(j + k < V, (to_f(x.v[k]) - m) * LOG2E_F - ls2);
            const float g = j + k < V ? (e - (j + k == tg ? 1.0f : 0.0f)) * dscale : 0.0f;
            x.v[k] = from_f<T>(g);
        }
        *(Vec *)(z + j) = x;
    }
}
/* The shared memory that keeps a row of Vp logits for the second pass, where two blocks with it fit on an SM
 * (else 0: both passes read global memory). Asked of the runtime once per Vp. */
template <typename T> static size_t xent_row_cached(ngpt_backend *be, int Vp) {
    CudaImpl *im = impl_of(be);
    if (!im->loss_smem) return 0;
    if (im->xent_Vp != Vp) {
        const size_t bytes = (size_t)Vp * sizeof(T);
        auto *kernel = crossentropy_kernel<T, 16 / sizeof(T), true>;
        int n = 0;
        im->xent_Vp = Vp;
        im->xent_smem = 0;
        if (bytes <= im->smem_optin &&
            !CU_CHECK(be, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)im->smem_optin)) &&
            !CU_CHECK(be, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, XENT_THREADS, bytes)) && n >= 2)
            im->xent_smem = bytes;
    }
    return im->xent_smem;
}
static void cu_crossentropy(ngpt_backend *be, void *logits, float *losses, const int32_t *targets, int N, int V, int Vp, float dscale) {
    if (bad_dims(be, "crossentropy", N, V, Vp) || !N) return;
    if (V < 1 || V > Vp) {
        cu_fail(be, NGPT_ERR_ARG, "cuda crossentropy: V = %d must be in 1..Vp (%d)", V, Vp);
        return;
    }
    DISPATCH_DTYPE(be->dtype, T, {
        constexpr int VEC = 16 / sizeof(T);
        const bool vec = rows_vectorizable<T>(Vp, logits);
        const size_t cache = vec && dscale != 0.0f ? xent_row_cached<T>(be, Vp) : 0;
        if (be->status != NGPT_OK) return;
        auto *xent = cache ? crossentropy_kernel<T, VEC, true> : vec ? crossentropy_kernel<T, VEC, false> : crossentropy_kernel<T, 1, false>;
        CU_LAUNCH(be, "crossentropy_kernel", xent, (unsigned)N, XENT_THREADS, cache, (T *)logits, losses, targets, V, Vp, dscale);
    });
}

/* ======================================================================================================
 * Optimizer: the squared norm of the gradients (two deterministic passes) and AdamW
 * ==================================================================================================== */

#define NORM_THREADS 256
/* pass 1: NB blocks; thread t of the grid (j*256 + tid) sums, in float, the 16-byte vectors t + k*NB*256 of x
 * (four at a time, their loads in flight together: with one element a load the fifth GPU run's step spent
 * 223 us here, 1.1 TB/s counting its synchronisation, on an H200 that reads 4.8), then the elements past
 * the last whole vector (all of x when it is not 16-byte aligned) the same way; then in double. The order
 * is fixed by n, x's alignment and NB, so the result is the same every run. */
template <typename T> __global__ void __launch_bounds__(NORM_THREADS) norm_partial_kernel(double *partial, const T *x, size_t n) {
    after_previous_kernel();
    constexpr int V = 16 / sizeof(T);
    struct alignas(16) Vec { T v[V]; };
    const size_t stride = (size_t)gridDim.x * blockDim.x, nv = (uintptr_t)x % 16 ? 0 : n / V;
    const Vec *xv = (const Vec *)x;
    float s = 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < nv; i += 4 * stride) {
        Vec a[4];
#pragma unroll
        for (int u = 0; u < 4; u++) a[u] = xv[i + u * stride];
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int e = 0; e < V; e++) {
                float v = to_f(a[u].v[e]);
                s += v * v;
            }
    }
    for (; i < nv; i += stride) {
        const Vec a = xv[i];
#pragma unroll
        for (int e = 0; e < V; e++) {
            float v = to_f(a.v[e]);
            s += v * v;
        }
    }
    for (size_t k = nv * V + (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        float v = to_f(x[k]);
        s += v * v;
    }
    double t = block_sum_d((double)s);
    if (threadIdx.x == 0) partial[blockIdx.x] = t;
}
/* pass 2: one block adds the partials; result in partial[NB] */
__global__ void __launch_bounds__(NORM_THREADS) norm_final_kernel(double *partial, int nb) {
    after_previous_kernel();
    double s = 0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) s += partial[i];
    s = block_sum_d(s);
    if (threadIdx.x == 0) partial[nb] = s;
}
static double cu_norm_sq(ngpt_backend *be, const void *x, size_t n) {
    if (!n) return 0.0;
    CudaImpl *im = impl_of(be);
    double *partial = (double *)scratch_get(be, (size_t)(NORM_BLOCKS + 1) * sizeof(double), "norm_sq");
    if (!partial) return NAN;
    const size_t per_thread = 4 * 16 / dtype_size(be->dtype); /* at least four 16-byte vectors a thread */
    size_t want = (n + NORM_THREADS * per_thread - 1) / (NORM_THREADS * per_thread);
    int nb = (int)(want < 1 ? 1 : want > NORM_BLOCKS ? NORM_BLOCKS : want);
    int failed = 0;
    DISPATCH_DTYPE(be->dtype, T, failed = CU_LAUNCH(be, "norm_partial_kernel", norm_partial_kernel<T>, nb, NORM_THREADS, 0, partial, (const T *)x, n));
    if (failed) return NAN;
    if (CU_LAUNCH(be, "norm_final_kernel", norm_final_kernel, 1, NORM_THREADS, 0, partial, nb)) return NAN;
    double r = NAN; /* pageable destination: the copy is synchronous, nothing is allocated */
    if (CU_CHECK(be, cudaMemcpyAsync(&r, partial + nb, sizeof r, cudaMemcpyDeviceToHost, im->stream))) return NAN;
    if (CU_CHECK(be, cudaStreamSynchronize(im->stream))) return NAN;
    return r;
}

/* An AdamW moment into its storage: f32 as it is; bf16 rounded up or down with the odds of its distance to
 * each (bits' low 16 are the dice), so on average it keeps what rounding to nearest would drop each step
 * (beta2 v rounds back to v once 1 - beta2 is under half a bf16 step). Inf and NaN round as they are. */
static __device__ __forceinline__ void store_moment(float *dst, float x, uint32_t) { *dst = x; }
static __device__ __forceinline__ void store_moment(__nv_bfloat16 *dst, float x, uint32_t bits) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        *dst = __float2bfloat16_rn(x);
        return;
    }
    __nv_bfloat16_raw r;
    r.x = (unsigned short)((u + (bits & 0xffffu)) >> 16);
    *dst = __nv_bfloat16(r);
}

/* AdamW in the arithmetic nanogpt.h gives (the caller precomputes the constants, so every backend uses
 * the same floats). The master copy (f32) is the truth when present; param gets it in the storage type.
 * VEC values a thread a turn: ADAMW_VEC (16 bytes of each f32 array, 8 of each 16-bit one) where every array
 * is 16-byte aligned, else 1; the same arithmetic per value either way. */
#define ADAMW_VEC 4
template <typename T, typename M, int VEC>
__global__ void adamw_kernel(T *param, float *master, const T *grad, M *m, M *v, size_t n, ngpt_adamw h) {
    after_previous_kernel();
    ew_vectors<VEC>(n, [&](size_t i0, auto width) {
        constexpr int W = decltype(width)::value;
        const RowVec<T, W> gr = *(const RowVec<T, W> *)(grad + i0);
        RowVec<M, W> mv = *(const RowVec<M, W> *)(m + i0), vv = *(const RowVec<M, W> *)(v + i0);
        RowVec<float, W> master_v{};
        RowVec<T, W> param_v{};
        if (master) master_v = *(const RowVec<float, W> *)(master + i0);
        else param_v = *(const RowVec<T, W> *)(param + i0);
#pragma unroll
        for (int e = 0; e < W; e++) {
            const size_t i = i0 + e;
            float g = to_f(gr.v[e]) * h.grad_scale;
            float mi = h.beta1 * to_f(mv.v[e]) + h.one_minus_beta1 * g;
            float vi = h.beta2 * to_f(vv.v[e]) + h.one_minus_beta2 * g * g;
            const uint32_t dice = ngpt_hash(h.round_seed, h.round_stream, i); /* bf16 moments only: f32 drops it */
            store_moment(&mv.v[e], mi, dice);
            store_moment(&vv.v[e], vi, dice >> 16);
            float p = master ? master_v.v[e] : to_f(param_v.v[e]);
            p = p - h.lr * (mi / h.bias_correction1 / (sqrtf(vi / h.bias_correction2) + h.eps) + h.weight_decay * p);
            master_v.v[e] = p;
            param_v.v[e] = from_f<T>(p);
        }
        *(RowVec<M, W> *)(m + i0) = mv;
        *(RowVec<M, W> *)(v + i0) = vv;
        if (master) *(RowVec<float, W> *)(master + i0) = master_v;
        *(RowVec<T, W> *)(param + i0) = param_v;
    });
}
static void cu_adamw(ngpt_backend *be, void *param, float *master, const void *grad, void *m, void *v, size_t n, const ngpt_adamw *h) {
    if (!n) return;
    if (!master && be->dtype != NGPT_DTYPE_F32) {
        cu_fail(be, NGPT_ERR_ARG, "cuda adamw: a 16-bit parameter needs its f32 master copy (master was NULL)");
        return;
    }
    if (h->moments_dtype != NGPT_DTYPE_F32 && h->moments_dtype != NGPT_DTYPE_BF16) {
        cu_fail(be, NGPT_ERR_ARG, "cuda adamw: moments_dtype %d is not f32 or bf16", h->moments_dtype);
        return;
    }
    /* ADAMW_VEC values a thread a turn (16 bytes of each f32 array) where every array is 16-byte aligned */
    const bool vec = aligned16(param, master, grad, m, v);
    const unsigned nb = ew_blocks(vec ? n / ADAMW_VEC : n);
    if (h->moments_dtype == NGPT_DTYPE_F32) {
        DISPATCH_DTYPE(be->dtype, T, {
            auto *kernel = vec ? adamw_kernel<T, float, ADAMW_VEC> : adamw_kernel<T, float, 1>;
            CU_LAUNCH(be, "adamw_kernel", kernel, nb, EW_THREADS, 0, (T *)param, master, (const T *)grad, (float *)m, (float *)v, n, *h);
        });
    } else {
        DISPATCH_DTYPE(be->dtype, T, {
            auto *kernel = vec ? adamw_kernel<T, __nv_bfloat16, ADAMW_VEC> : adamw_kernel<T, __nv_bfloat16, 1>;
            CU_LAUNCH(be, "adamw_kernel", kernel, nb, EW_THREADS, 0, (T *)param, master, (const T *)grad, (__nv_bfloat16 *)m, (__nv_bfloat16 *)v, n,
                      *h);
        });
    }
}

/* ======================================================================================================
 * Backend table and entry points
 * ==================================================================================================== */

static void cu_destroy(ngpt_backend *be) {
    if (!be) return;
    CudaImpl *im = impl_of(be);
    if (im) {
        /* the stream's work first, also where the embedder handed in the arenas (cu_arena_free waits only for
         * its own): they are the embedder's again when this returns. destroy returns nothing, so what fails
         * while tearing down is dropped; a sticky error leaves nothing more to do */
        if (im->stream) (void)cudaStreamSynchronize(im->stream);
        cu_arena_free(be);
        for (int i = 0; i < NGPT_FENCES; i++)
            if (im->fences[i]) (void)cudaEventDestroy(im->fences[i]);
        if (im->stream) (void)cudaStreamDestroy(im->stream);
        (void)cudaGetLastError();
        free(im);
    }
    free(be);
}

static int errf(char *err, size_t errlen, int status, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* The environment switches (README, "Kernel switches"), each with the values it takes: all but NGPT_CUDA_SYNC run
 * another kernel or way of the backend, to compare with the default, which runs where one is unset or empty. A set
 * switch with any other value is an error (env_switches_check), so that a misspelt value, or one a switch no longer
 * takes, cannot leave a comparison timing the default twice. The backend reads them through env_switch only. */
struct EnvSwitch {
    const char *name;
    const char *values; /* ", " between them */
};
static const EnvSwitch env_switches[] = {
    {"NGPT_MATMUL", "mma"},
    {"NGPT_ATTENTION", "mma"},
    {"NGPT_EPILOGUE", "staged"},
    {"NGPT_TILE_N", "192, 256"},
    {"NGPT_TILE_ORDER", "m"},
    {"NGPT_PINGPONG", "0, 1, gelu"},
    {"NGPT_SPLITK_MAX", "1, 2, 3, 4, 5, 6, 7, 8"},
    {"NGPT_ATTN_TURNS", "0, 1"},
    {"NGPT_ATTN_PERSISTENT", "0, 1"},
    {"NGPT_FUSE_GELU", "0, 1"},
    {"NGPT_LOSS_SMEM", "0, 1"},
    {"NGPT_DBIAS", "separate"},
    {"NGPT_STREAMK", "0, 1"},
    {"NGPT_GEMV", "simt"},
    {"NGPT_PDL", "0, 1"},
    {"NGPT_GRAPHS", "0, 1"},
    {"NGPT_CUDA_SYNC", "0, 1"},
};
/* switch name's value; NULL where it is unset or empty */
static const char *env_switch(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
/* whether value is one of list's (", " between them) */
static bool env_value_listed(const char *list, const char *value) {
    const size_t n = strlen(value);
    for (const char *p = list;; p += 2) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, value, n)) return true;
        if (!end) return false;
        p = end;
    }
}
/* NGPT_OK, or NGPT_ERR_ARG with err naming the first switch set to a value it does not take, and the values it does */
static int env_switches_check(char *err, size_t errlen) {
    for (const EnvSwitch &s : env_switches) {
        const char *v = env_switch(s.name);
        if (v && !env_value_listed(s.values, v))
            return errf(err, errlen, NGPT_ERR_ARG, "the environment's %s=%s is not a value that switch takes (%s; unset or empty: the default)", s.name,
                        v, s.values);
    }
    return NGPT_OK;
}

/* Device, compute capability, and whether this binary carries kernels for it. */
static int probe_device(int *device, int *cc, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (e == cudaErrorInsufficientDriver) /* what the runtime says when there is no driver at all, too */
            return errf(err, errlen, NGPT_ERR_DEVICE, "no usable CUDA device: no NVIDIA driver is installed, or it is older than CUDA %d.%d needs "
                                                      "(cudaErrorInsufficientDriver)", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        return errf(err, errlen, NGPT_ERR_DEVICE, "no usable CUDA device: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    }
    if (count < 1) return errf(err, errlen, NGPT_ERR_DEVICE, "no CUDA device found");
    if ((e = cudaGetDevice(device)) != cudaSuccess) return errf(err, errlen, NGPT_ERR_DEVICE, "cudaGetDevice failed: %s", cudaGetErrorString(e));
    int major = 0, minor = 0;
    if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *device)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, *device)) != cudaSuccess) {
        cudaGetLastError();
        return errf(err, errlen, NGPT_ERR_DEVICE, "cudaDeviceGetAttribute (compute capability) failed: %s", cudaGetErrorString(e));
    }
    *cc = major * 10 + minor;
    if (*cc < 75)
        return errf(err, errlen, NGPT_ERR_DEVICE, "the GPU has compute capability %d.%d; nanogpt needs 7.5 or newer (tensor-core mma and ldmatrix)",
                    major, minor);
    cudaFuncAttributes fa;
    e = cudaFuncGetAttributes(&fa, fill_normal_kernel);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return errf(err, errlen, NGPT_ERR_DEVICE,
                    "this build has no kernels for compute capability %d.%d (%s): rebuild with CUDA_ARCHS=%d ./build.sh (nvcc: "
                    "-gencode arch=compute_%d,code=sm_%d)",
                    major, minor, cudaGetErrorString(e), *cc, *cc, *cc);
    }
    return NGPT_OK;
}

/* Whether kernels are launched as programmatic dependents (after_previous_kernel): on compute capability 9.0 and
 * newer, where the kernels were compiled for 9.0 or newer (the code that waits; kernels from older PTX, compiled
 * by the driver, have no wait and run the usual way). NGPT_PDL=0: not, to compare. */
static bool programmatic_launch_on(int cc) {
    const char *env = env_switch("NGPT_PDL");
    if (cc < 90 || (env && !strcmp(env, "0"))) return false;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, fill_normal_kernel) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return fa.ptxVersion >= 90;
}

/* Whether every build of the TMA matmul (and of the wgmma attention kernels) starts with the registers its
 * setmaxnreg moves (TM_REGS_NEEDED, FA_REGS_NEEDED): with fewer, the consumers' increase would wait for
 * registers that never come. */
static bool registers_cover(const void *kernel, int threads, long long needed) {
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return (long long)fa.numRegs * threads >= needed;
}
/* every build of the TMA matmul (mm_direct_kind, at each tile width), then the ping-pong kernel's, then the
 * stream-K weight gradient's */
#define TM_WIDTH_BUILDS 6
#define TM_BUILDS (3 * TM_WIDTH_BUILDS + 1)
template <typename T, int BN> static void tma_builds_of_width(const void **k) {
    const void *all[TM_WIDTH_BUILDS] = {
        (const void *)matmul_tma_kernel<T, true, true, EPI_PLAIN, BN>,    (const void *)matmul_tma_kernel<T, true, true, EPI_GELU, BN>,
        (const void *)matmul_tma_kernel<T, true, true, EPI_RESIDUAL, BN>, (const void *)matmul_tma_kernel<T, true, false, EPI_PLAIN, BN>,
        (const void *)matmul_tma_kernel<T, true, false, EPI_DGELU, BN>,   (const void *)matmul_tma_kernel<T, false, false, EPI_PLAIN, BN>};
    memcpy(k, all, sizeof all);
}
template <typename T> static void tma_builds(const void *(&k)[TM_BUILDS]) {
    tma_builds_of_width<T, TM_BN>(k);
    tma_builds_of_width<T, TM_BN_NARROW>(k + TM_WIDTH_BUILDS);
    const void *pingpong[TM_WIDTH_BUILDS] = {
        (const void *)matmul_tma_pingpong_kernel<T, true, true, EPI_PLAIN>,    (const void *)matmul_tma_pingpong_kernel<T, true, true, EPI_GELU>,
        (const void *)matmul_tma_pingpong_kernel<T, true, true, EPI_RESIDUAL>, (const void *)matmul_tma_pingpong_kernel<T, true, false, EPI_PLAIN>,
        (const void *)matmul_tma_pingpong_kernel<T, true, false, EPI_DGELU>,   (const void *)matmul_tma_pingpong_kernel<T, false, false, EPI_PLAIN>};
    memcpy(k + 2 * TM_WIDTH_BUILDS, pingpong, sizeof pingpong);
    k[3 * TM_WIDTH_BUILDS] = (const void *)matmul_tma_kernel<T, false, false, EPI_PLAIN, TM_BN, true>;
}
template <typename T> static bool tma_registers_ok() {
    const void *k[TM_BUILDS];
    tma_builds<T>(k);
    for (int i = 0; i < TM_BUILDS; i++)
        if (!registers_cover(k[i], TM_THREADS, TM_REGS_NEEDED)) return false;
    return true;
}
template <typename T> static bool attn_registers_ok() {
    return registers_cover((const void *)attn_forward_wgmma_kernel<T>, FA_THREADS, FA_REGS_NEEDED) &&
           registers_cover((const void *)attn_backward_dkdv_wgmma_kernel<T>, FA_THREADS, FA_REGS_NEEDED) &&
           registers_cover((const void *)attn_backward_dq_wgmma_kernel<T>, FA_THREADS, FA_REGS_NEEDED);
}

/* Which kernel 16-bit matmuls run on. The TMA wgmma kernel runs where it can: a compute capability 9.0 GPU, a
 * binary with sm_90a code (ngpt_wgmma_built reads 1 only there), the driver's tensor-map encoder and the kernel's
 * register budget (tma_registers_ok); everywhere else mma.sync, which also takes the products whose operands the
 * copy engine cannot read. The TMA choice also brings the wgmma attention kernels (head size 64, no dropout; their
 * own register check, attn_registers_ok), which NGPT_ATTENTION=mma alone turns off. NGPT_MATMUL=mma keeps the
 * matmuls and attention on mma.sync, to compare. *encoder: the encoder when the choice is MATMUL_TMA, else NULL. */
enum { MATMUL_MMA, MATMUL_TMA };
static int matmul_choice(int cc, void **encoder) {
    const char *force = env_switch("NGPT_MATMUL");
    *encoder = NULL;
    if (cc != 90 || (force && !strcmp(force, "mma"))) return MATMUL_MMA;
    int built = 0;
    if (cudaMemcpyFromSymbol(&built, ngpt_wgmma_built, sizeof built) != cudaSuccess) {
        cudaGetLastError();
        return MATMUL_MMA;
    }
    if (!built || !tma_registers_ok<__nv_bfloat16>() || !tma_registers_ok<__half>()) return MATMUL_MMA;
    *encoder = find_tensor_map_encoder();
    return *encoder ? MATMUL_TMA : MATMUL_MMA;
}
/* how many mma.sync matmul blocks an SM runs at once (two where the SM has the shared memory for them: not on
 * sm_75's 64 KB); the forward layout stands for all three (the same shared memory, registers within a few) */
template <typename T> static cudaError_t mma_matmul_blocks_an_sm(int *n) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, matmul_tc_kernel<T, true, true, EPI_PLAIN>, MM_THREADS, MM_SMEM_BYTES);
}
/* the 16-bit matmul kernel chosen, and for mma.sync its blocks an SM */
static void matmul_describe(int choice, char *out, size_t outlen) {
    int n = 0;
    if (choice == MATMUL_TMA) {
        snprintf(out, outlen, "wgmma+tma");
    } else if (mma_matmul_blocks_an_sm<__half>(&n) != cudaSuccess) {
        cudaGetLastError();
        snprintf(out, outlen, "mma.sync");
    } else {
        snprintf(out, outlen, "mma.sync, %d block%s an SM", n, n == 1 ? "" : "s");
    }
}

/* The 16-bit attention at head size 64: wgmma, or mma.sync and the blocks of its dK, dV kernel (the most shared
 * memory and registers of the three) an SM, in the layout of compute capability cc (AttnSmem) */
static void attention_describe(int wgmma, int cc, char *out, size_t outlen) {
    const AttnSmemBytes smem = attn_smem_bytes<64>(device_code_sm75(cc));
    auto *kernel = attn_backward_dkdv_tc_kernel<__half, 64>;
    int n = 0;
    if (wgmma) {
        snprintf(out, outlen, "wgmma at head size 64");
    } else if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem.dkdv) != cudaSuccess ||
               cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, ATT_THREADS, smem.dkdv) != cudaSuccess) {
        cudaGetLastError();
        snprintf(out, outlen, "mma.sync");
    } else {
        snprintf(out, outlen, "mma.sync, %d block%s an SM", n, n == 1 ? "" : "s");
    }
}

/* The attention kernels of padded head size HS, where attn_tc_hs lets them run: their shared memory. */
template <typename T, int HS> static int set_attn_smem_attrs(ngpt_backend *be) {
    const AttnSmemBytes smem = attn_smem_bytes<HS>(impl_of(be)->device_sm75);
    if (smem.most > impl_of(be)->smem_optin) return 0;
    int bad = 0;
    bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_forward_tc_kernel<T, HS, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem.fwd));
    bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_forward_tc_kernel<T, HS, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem.fwd));
    bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_backward_dkdv_tc_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem.dkdv));
    bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_backward_dq_tc_kernel<T, HS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem.dq));
    return bad;
}

/* Opt the big-tile kernels into more than 48 KB of dynamic shared memory (the mma.sync matmul needs no more),
 * and note how many mma.sync matmul blocks an SM runs at once. */
template <typename T> static int set_smem_attrs(ngpt_backend *be) {
    int bad = 0;
    CudaImpl *im = impl_of(be);
    if (im->use_tma) {
        const void *k[TM_BUILDS];
        tma_builds<T>(k);
        for (int i = 0; i < TM_BUILDS; i++)
            bad |= CU_CHECK(be, cudaFuncSetAttribute(k[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     i < 2 * TM_WIDTH_BUILDS || i == 3 * TM_WIDTH_BUILDS ? TM_SMEM_BYTES : TP_SMEM_BYTES));
        bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_forward_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, FA_SMEM_BYTES));
        bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_backward_dkdv_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, FB_DKDV_SMEM_BYTES));
        bad |= CU_CHECK(be, cudaFuncSetAttribute(attn_backward_dq_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, FB_DQ_SMEM_BYTES));
    }
    int n = 0;
    if (!bad) bad |= CU_CHECK(be, mma_matmul_blocks_an_sm<T>(&n));
    im->mm_blocks_per_sm = n > 0 ? n : 1;
    bad |= set_attn_smem_attrs<T, 32>(be);
    bad |= set_attn_smem_attrs<T, 64>(be);
    bad |= set_attn_smem_attrs<T, 128>(be);
    return bad;
}

extern "C" {

int ngpt_cuda_available(char *why, size_t whylen) {
    int device = 0, cc = 0;
    if (why && whylen) why[0] = 0;
    return probe_device(&device, &cc, why, whylen) == NGPT_OK ? 1 : 0;
}

int ngpt_cuda_compute_capability(void) {
    int device = 0, cc = 0;
    return probe_device(&device, &cc, NULL, 0) == NGPT_OK ? cc : 0;
}

/* attribute attr of the device probe_device picks, and its compute capability into *cc (when cc is not NULL); 0 where
 * there is no device or the query fails */
static int probed_device_attribute(cudaDeviceAttr attr, int *cc) {
    int device = 0, value = 0, capability = 0;
    if (probe_device(&device, &capability, NULL, 0) != NGPT_OK) return 0;
    if (cc) *cc = capability;
    if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return value;
}

int ngpt_cuda_sm_count(void) { return probed_device_attribute(cudaDevAttrMultiProcessorCount, NULL); }

int ngpt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen) {
    if (!free_bytes || !total_bytes) return errf(err, errlen, NGPT_ERR_ARG, "ngpt_cuda_mem_info: NULL output");
    *free_bytes = *total_bytes = 0;
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return errf(err, errlen, NGPT_ERR_DEVICE, "cudaMemGetInfo failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return NGPT_OK;
}

/* whether 16-bit matmuls run on the TMA kernel: matmul_choice's, where a block may have its shared memory (optin) */
static int tma_matmul_on(int choice, size_t optin) { return choice == MATMUL_TMA && optin >= (size_t)TM_SMEM_BYTES; }

/* Whether 16-bit attention at head size 64 runs on the sm_90a wgmma kernels: beside the TMA matmul (tma), unless
 * NGPT_ATTENTION=mma keeps it on mma.sync (to compare, or to work around), and where their registers are what
 * setmaxnreg needs */
static int wgmma_attention_choice(int tma) {
    const char *env = env_switch("NGPT_ATTENTION");
    return tma && !(env && !strcmp(env, "mma")) && attn_registers_ok<__nv_bfloat16>() && attn_registers_ok<__half>();
}

int ngpt_cuda_wgmma_attention(void) {
    int cc = 0, optin = probed_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, &cc);
    if (!optin) return 0;
    void *encoder = NULL; /* as ngpt_cuda_backend_create chooses for a 16-bit dtype */
    return wgmma_attention_choice(tma_matmul_on(matmul_choice(cc, &encoder), (size_t)optin));
}

int ngpt_cuda_describe(char *out, size_t outlen) {
    int device = 0, cc = 0;
    char err[256];
    if (env_switches_check(err, sizeof err)) return errf(out, outlen, NGPT_ERR_ARG, "cuda: %s", err);
    int rc = probe_device(&device, &cc, err, sizeof err);
    if (rc) return errf(out, outlen, rc, "cuda: %s", err);
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return errf(out, outlen, NGPT_ERR_DEVICE, "cuda: cudaGetDeviceProperties failed");
    }
    size_t fb = 0, tb = 0;
    cudaError_t e = cudaMemGetInfo(&fb, &tb);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return errf(out, outlen, NGPT_ERR_DEVICE, "cuda: %s: cudaMemGetInfo failed: %s", prop.name, cudaGetErrorString(e));
    }
    void *encoder = NULL;
    const int choice = matmul_choice(cc, &encoder);
    const int wgmma_attention = wgmma_attention_choice(tma_matmul_on(choice, prop.sharedMemPerBlockOptin));
    char matmul[64], attention[64];
    matmul_describe(choice, matmul, sizeof matmul);
    attention_describe(wgmma_attention, cc, attention, sizeof attention);
    return errf(out, outlen, NGPT_OK, "cuda: %s, sm_%d, %d SMs, %.1f GiB (%.1f GiB free), bf16 %s, 16-bit matmul %s, attention %s, programmatic launches %s",
                prop.name, cc, prop.multiProcessorCount, tb / 1073741824.0, fb / 1073741824.0, cc >= 80 ? "yes" : "no (fp16 with loss scaling)",
                matmul, attention, programmatic_launch_on(cc) ? "on" : "off");
}

int ngpt_cuda_backend_create(ngpt_backend **out, int dtype, char *err, size_t errlen) {
    *out = NULL;
    if (dtype != NGPT_DTYPE_F32 && dtype != NGPT_DTYPE_BF16 && dtype != NGPT_DTYPE_F16)
        return errf(err, errlen, NGPT_ERR_ARG, "cuda backend: unknown dtype %d", dtype);
    if (int rc = env_switches_check(err, errlen)) return rc;
    int device = 0, cc = 0;
    int rc = probe_device(&device, &cc, err, errlen);
    if (rc) return rc;
    if (dtype == NGPT_DTYPE_BF16 && cc < 80)
        return errf(err, errlen, NGPT_ERR_DEVICE, "bfloat16 needs compute capability 8.0 or newer; this GPU is %d.%d: use dtype float16", cc / 10, cc % 10);
    ngpt_backend *be = (ngpt_backend *)calloc(1, sizeof *be);
    CudaImpl *im = (CudaImpl *)calloc(1, sizeof *im);
    if (!be || !im) {
        free(be);
        free(im);
        return errf(err, errlen, NGPT_ERR_NOMEM, "out of host memory creating the CUDA backend");
    }
    be->name = "cuda";
    be->dtype = dtype;
    be->impl = im;
    int sms = 0, optin = 0;
    if (CU_CHECK(be, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) ||
        CU_CHECK(be, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device))) {
        rc = errf(err, errlen, be->status, "%s", be->msg);
        cu_destroy(be);
        return rc;
    }
    im->sm_count = sms;
    im->smem_optin = optin > 0 ? (size_t)optin : 48 * 1024;
    im->device_sm75 = device_code_sm75(cc);
    void *encoder = NULL;
    int choice = dtype == NGPT_DTYPE_F32 ? MATMUL_MMA : matmul_choice(cc, &encoder);
    im->use_tma = tma_matmul_on(choice, im->smem_optin);
    im->encode_tensor_map = im->use_tma ? encoder : NULL;
    im->use_wgmma_attention = wgmma_attention_choice(im->use_tma);
    const char *turns_env = env_switch("NGPT_ATTN_TURNS"); /* "0": the wgmma attention's warpgroups issue as they come, to compare */
    im->attn_turns = !(turns_env && !strcmp(turns_env, "0"));
    const char *persistent_env = env_switch("NGPT_ATTN_PERSISTENT"); /* "0": the wgmma forward, dK, dV and dQ a block an item, to compare */
    im->attn_persistent = !(persistent_env && !strcmp(persistent_env, "0"));
    const char *epilogue_env = env_switch("NGPT_EPILOGUE"); /* "staged": every TMA and mma.sync tile through the staged epilogue, to compare */
    im->direct_epilogue = !(epilogue_env && !strcmp(epilogue_env, "staged"));
    const char *tile_env = env_switch("NGPT_TILE_N"); /* "192" or "256": the TMA kernel's tile width for every product, to compare */
    im->tma_tile_n = tile_env && !strcmp(tile_env, "192") ? TM_BN_NARROW : tile_env && !strcmp(tile_env, "256") ? TM_BN : 0;
    const char *pingpong_env = env_switch("NGPT_PINGPONG"); /* "1": every TMA product on the ping-pong kernel, "gelu": those with GELU, to compare */
    im->tma_pingpong = !pingpong_env ? 0 : !strcmp(pingpong_env, "1") ? TMA_PINGPONG_ALL : !strcmp(pingpong_env, "gelu") ? TMA_PINGPONG_GELU : 0;
    const char *order_env = env_switch("NGPT_TILE_ORDER"); /* "m": every 16-bit matmul's tiles down the rows of a column, to compare */
    im->tiles_down_columns = order_env && !strcmp(order_env, "m");
    const char *splitk_env = env_switch("NGPT_SPLITK_MAX"); /* "1" .. "8": at most that many split-K slices, to compare ("1": none) */
    im->splitk_most = splitk_env && splitk_env[0] >= '1' && splitk_env[0] <= '8' && !splitk_env[1] ? splitk_env[0] - '0' : 0;
    const char *dbias_env = env_switch("NGPT_DBIAS"); /* "separate": every bias gradient by bias_backward, to compare */
    im->fused_dbias = !(dbias_env && !strcmp(dbias_env, "separate"));
    const char *streamk_env = env_switch("NGPT_STREAMK"); /* "0": those weight gradients by split-K's rule, to compare */
    im->streamk = !(streamk_env && !strcmp(streamk_env, "0"));
    const char *gemv_env = env_switch("NGPT_GEMV"); /* "simt": a few rows of 16-bit products as before gemv_tc_kernel, to compare */
    im->gemv_tensor_cores = !(gemv_env && !strcmp(gemv_env, "simt"));
    const char *loss_env = env_switch("NGPT_LOSS_SMEM"); /* "0": the loss reads each row from global memory in both passes, to compare */
    im->loss_smem = !(loss_env && !strcmp(loss_env, "0"));
    const char *sync_env = env_switch("NGPT_CUDA_SYNC");
    im->sync_each_launch = sync_env && !strcmp(sync_env, "1");
    im->programmatic_launch = programmatic_launch_on(cc);
    int made = !CU_CHECK(be, cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    for (int i = 0; i < NGPT_FENCES && made; i++)
        made = !CU_CHECK(be, cudaEventCreateWithFlags(&im->fences[i], cudaEventDisableTiming));
    if (made) {
        if (dtype == NGPT_DTYPE_BF16) set_smem_attrs<__nv_bfloat16>(be);
        else if (dtype == NGPT_DTYPE_F16) set_smem_attrs<__half>(be);
    }
    if (be->status != NGPT_OK) {
        rc = errf(err, errlen, be->status, "%s", be->msg);
        cu_destroy(be);
        return rc;
    }
    be->destroy = cu_destroy;
    be->arena_alloc = cu_arena_alloc;
    be->arena_free = cu_arena_free;
    be->scratch_bytes = cu_scratch_bytes;
    be->set_scratch = cu_set_scratch;
    be->upload = cu_upload;
    be->download = cu_download;
    be->download_async = cu_download_async;
    be->fence_record = cu_fence_record;
    be->fence_wait = cu_fence_wait;
    be->sync = cu_sync;
    be->zero = cu_zero;
    be->copy = cu_copy;
    be->fill_normal = cu_fill_normal;
    be->cast_from_f32 = cu_cast_from_f32;
    be->encoder_forward = cu_encoder_forward;
    be->encoder_backward = cu_encoder_backward;
    be->layernorm_forward = cu_layernorm_forward;
    be->layernorm_backward = cu_layernorm_backward;
    be->matmul_forward = cu_matmul_forward;
    be->matmul_backward = cu_matmul_backward;
    const char *fuse_env = env_switch("NGPT_FUSE_GELU"); /* "0": no GELU fusions, the step runs each product then the GELU op, to compare */
    const bool fuse_gelu = !(fuse_env && !strcmp(fuse_env, "0"));
    be->matmul_forward_gelu = fuse_gelu ? cu_matmul_forward_gelu : NULL;
    be->matmul_backward_gelu = fuse_gelu ? cu_matmul_backward_gelu : NULL;
    be->matmul_forward_residual = cu_matmul_forward_residual;
    be->layernorm_matmul_forward = cu_layernorm_matmul_forward;
    be->attention_forward = cu_attention_forward;
    be->attention_backward = cu_attention_backward;
    be->attention_decode = cu_attention_decode;
    be->gelu_forward = cu_gelu_forward;
    be->gelu_backward = cu_gelu_backward;
    be->residual_forward = cu_residual_forward;
    be->dropout = cu_dropout;
    be->crossentropy = cu_crossentropy;
    be->norm_sq = cu_norm_sq;
    be->adamw = cu_adamw;
    const char *graphs_env = env_switch("NGPT_GRAPHS"); /* "0": decoding's ops launched one by one, to compare */
    if (!(graphs_env && !strcmp(graphs_env, "0")) && !im->sync_each_launch) { /* a wait after each launch cannot be recorded */
        be->graph_begin = cu_graph_begin;
        be->graph_end = cu_graph_end;
        be->graph_launch = cu_graph_launch;
        be->graph_free = cu_graph_free;
    }
    *out = be;
    return NGPT_OK;
}

} /* extern "C" */
