/* test_gpu_ops.c - every op of the CUDA backend against its CPU twin, for each dtype the GPU supports.
 *
 * Built and run by test/gpu.sh on a machine with a GPU:
 *     nvcc -c nanogpt.cu ; cc -DNGPT_CUDA -c test/test_gpu_ops.c ; link both with nvcc
 *     ./test_gpu_ops [--small] [--skip-alloc-check] [--fail-fast] [--dtype f32|bf16|f16[,...]] [--matmul-only | --attention-only | --decode-only
 *                    | --default-kernels | --runs-with NGPT_VARIABLE] [--without NGPT_VARIABLE]
 * --small keeps to small shapes (for compute-sanitizer, and the CUDA emulator of test/cuda_emu.sh); the
 * default adds GPT-2-sized ones.
 * --matmul-only runs the matmul cases alone, on the kernel NGPT_MATMUL chooses (test/gpu.sh tries the TMA wgmma
 * kernel this way first, in its own process, so that a fault there, which poisons the CUDA context, cannot
 * take the other checks with it). --attention-only does the same with the attention cases (the wgmma
 * attention kernels, where the TMA matmul runs); --decode-only with the KV-cache decoding cases (test/cuda_emu.sh's
 * mutants of that kernel).
 * --default-kernels runs each dtype's sweep once, on the kernels the backend picks, without the runs on
 * mma.sync beside the TMA kernel and the NGPT_EPILOGUE, NGPT_TILE_N and NGPT_SPLITK_MAX variants (test/gpu.sh's f16 racecheck:
 * the bf16 one covers those templates, and each variant doubles a racecheck's minutes).
 * On the CUDA emulator, the f32 attention sweep leaves out the long sequences and the small dS^T scratch, which
 * only the tensor-core kernels' tiles need (tg_attention_sweep).
 * --runs-with NGPT_VARIABLE runs only the runs that set that variable (NGPT_SPLITK_MAX: the products unsplit;
 * test/cuda_emu.sh's mutant that only those runs catch, without the sweeps before them: minutes on the emulator).
 * --without NGPT_VARIABLE leaves out the runs that set that variable (test/gpu.sh: NGPT_PINGPONG where the ping-pong
 * kernel failed alone first, so that a hang there cannot take the rest of the sweep's time).
 * --skip-alloc-check leaves out the free-memory check (compute-sanitizer allocates device memory itself).
 * --fail-fast stops at the first failed case, exit status 1 (test/cuda_emu.sh's mutants: one failure is enough
 * to catch one, and the rest of the sweep is minutes on the emulator). The sweep runs the cheap ops first, then
 * attention, then the matmuls, so that a mutant of a cheap op is caught in seconds; so do the runs on
 * mma.sync beside the TMA kernel (attention, then the matmuls).
 *
 * For every op and shape: fresh random inputs (never zeros), rounded to the GPU's storage type so that
 * both backends see the same numbers; outputs poisoned with NaN bit patterns before each run, so an
 * element the kernel forgets to write fails; the GPU op run twice on the same inputs, and the two results
 * must be bit-identical (determinism); then the GPU result is compared with the CPU backend's fp32 result.
 * Every GPU buffer is followed by a guard zone whose pattern is checked after each case (the arena is one
 * allocation, so compute-sanitizer cannot see an overrun from one tensor into the next; the guards can).
 *
 * The error measure: err_i = |gpu_i - cpu_i| / max(|cpu_i|, rms(cpu)); the case prints the largest err_i,
 * where it is, and the relative norm ||gpu - cpu|| / ||cpu||. Thresholds:
 *   f32   1e-5 for elementwise ops; 1e-4 where a sum runs in another order than on the CPU (matmul over K,
 *         layernorm over C and over rows, attention over keys, cross-entropy over V).
 *   bf16  1e-2 (outputs are rounded to bf16: half an ulp is up to 2^-8 = 3.9e-3 relative; sums are fp32). Attention rounds its
 *         probabilities and dS to bf16 before the tensor-core products, as flash attention does: a numpy
 *         model of those rounding points gives a max err up to ~4e-2 (T=1024, hs=128) but a rel-norm of
 *         ~2.5e-3, so attention is held to max err 8e-2 and rel-norm 1e-2.
 *   f16   1e-2 as bf16; attention max err 1e-2 and rel-norm 2e-3 (the model: ~5e-3 and ~3e-4).
 *   f32 results (mean, rstd, lse, losses, master weights, norms) are held to 1e-4 in every dtype.
 *
 * No allocation after arena_alloc: the free device memory (cudaMemGetInfo through ngpt_cuda_mem_info) is
 * read after arena_alloc and again after the whole sweep of ops, and must not change. Run with
 * CUDA_MODULE_LOADING=EAGER (main sets it) so that lazy loading of kernels does not show up as memory use.
 * This is a check of behaviour, not of source text: any cudaMalloc, cudaMallocAsync, managed or pinned
 * allocation the library made during the ops would lower the free memory (allocations are at least one
 * 2 MiB page), and a cudaFree of something the arena did not own would raise it.
 */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "cuda_alloc_count.h"

/* ------------------------------------------------------------------------------------------------------
 * Test state: the CPU backend, the CUDA backend under test, and a bump allocator on each arena.
 * ---------------------------------------------------------------------------------------------------- */

static ngpt_backend *tg_cpu, *tg_gpu;
static char *tg_cpu_dev, *tg_gpu_dev, *tg_gpu_host;
static size_t tg_cpu_cap, tg_gpu_cap, tg_host_cap, tg_cpu_base, tg_gpu_base, tg_cpu_off, tg_gpu_off;
static int tg_small, tg_cc, tg_skip_alloc_check, tg_matmul_only, tg_attention_only, tg_decode_only, tg_default_kernels, tg_fail_fast;
static const char *tg_runs_with; /* --runs-with NAME: only the runs that set the variable NAME */
static const char *tg_without;   /* --without NAME: not the runs that set it */
static int tg_emulated;           /* on test/cuda_emu.h's CUDA emulator, which runs the kernels on the CPU */
static char tg_case[256];
static double tg_t0;
static double tg_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define TG_GUARD 256
#define TG_MAX_BUFS 64
static char *tg_guards[TG_MAX_BUFS];
static int tg_nguards;

static const char *tg_dtname(int dt) { return dt == NGPT_DTYPE_BF16 ? "bf16" : dt == NGPT_DTYPE_F16 ? "f16" : "f32"; }
/* name is one of list's comma-separated items (--dtype bf16,f16) */
static int tg_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list;; p++) {
        if (!strncmp(p, name, n) && (p[n] == ',' || !p[n])) return 1;
        if (!(p = strchr(p, ','))) return 0;
    }
}
static size_t tg_esz(int dt) { return dt == NGPT_DTYPE_F32 ? 4 : 2; }

static uint64_t tg_rs = 0x9E3779B97F4A7C15ull; /* the inputs' random state: reseeded by tg_begin from the case's name */
static uint64_t tg_fnv(const void *p, size_t n, uint64_t h) { /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* Each output's bits by case: kept from a dtype's default run (TG_BITS_KEEP) and held against in a later run
 * of the same cases on a path that must give the same bits (TG_BITS_MATCH: the default matmul, the TMA or
 * mma.sync kernel, with NGPT_EPILOGUE=staged, whose whole tiles go through the staged epilogue, not the
 * direct one, in bf16 with NGPT_TILE_ORDER=m too, its tiles down the rows of a column; the TMA kernel with
 * NGPT_TILE_N=192, every product in tiles 192 wide, and with NGPT_PINGPONG=1, every product on the ping-pong kernel; the wgmma attention with
 * NGPT_ATTN_TURNS=0, its warpgroups issuing without taking turns, and with NGPT_ATTN_PERSISTENT=0, a block an
 * item; the loss with NGPT_LOSS_SMEM=0, each row read from global memory twice) */
enum { TG_BITS_OFF, TG_BITS_KEEP, TG_BITS_MATCH };
#define TG_MAX_BITS 2048
static struct { char key[300]; uint64_t hash; } tg_bits[TG_MAX_BITS];
static int tg_nbits, tg_bits_mode, tg_bits_matched;

/* The run with NGPT_SPLITK_MAX=1 (tg_unsplit) checks that no product was split along K: split-K slices are the
 * only thing a matmul writes into the scratch past the bias backward's partial sums (TG_BIAS_GROUPS rows of
 * OC floats: RED_GROUPS in nanogpt.cu), so tg_begin fills the scratch with TG_SCRATCH_MARK and tg_end finds it
 * there past the case's tg_scratch_keep bytes (set by the cases with a bias backward). */
#define TG_BIAS_GROUPS 64
#define TG_SCRATCH_MARK 0xA5
static int tg_unsplit;
static size_t tg_scratch_size, tg_scratch_keep;

/* the scratch goes through the host staging buffer in pieces of this many bytes */
static size_t tg_scratch_piece(void) { return tg_host_cap < ((size_t)4 << 20) ? tg_host_cap : ((size_t)4 << 20); }

static void tg_scratch_mark(void) {
    size_t chunk = tg_scratch_piece();
    memset(tg_gpu_host, TG_SCRATCH_MARK, chunk);
    for (size_t off = 0; off < tg_scratch_size; off += chunk)
        tg_gpu->upload(tg_gpu, tg_gpu_dev + off, tg_gpu_host, tg_scratch_size - off < chunk ? tg_scratch_size - off : chunk);
    tg_gpu->sync(tg_gpu);
}

/* bytes of the scratch past tg_scratch_keep (and the alignment set_scratch may add) that no longer hold the mark */
static size_t tg_scratch_changed(void) {
    size_t chunk = tg_scratch_piece(), changed = 0;
    for (size_t off = ALIGN_UP(tg_scratch_keep, 256) + 256; off < tg_scratch_size; off += chunk) {
        size_t n = tg_scratch_size - off < chunk ? tg_scratch_size - off : chunk;
        tg_gpu->download(tg_gpu, tg_gpu_host, tg_gpu_dev + off, n);
        for (size_t i = 0; i < n; i++) changed += (unsigned char)tg_gpu_host[i] != TG_SCRATCH_MARK;
    }
    return changed;
}

static void tg_begin(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(tg_case, sizeof tg_case, "%s ", tg_gpu ? tg_dtname(tg_gpu->dtype) : "-");
    vsnprintf(tg_case + n, sizeof tg_case - (size_t)n, fmt, ap);
    va_end(ap);
    /* a case's inputs depend on its name alone, so a run of part of the sweep draws what the whole one did */
    tg_rs = tg_fnv(tg_case, strlen(tg_case), 0xcbf29ce484222325ull) | 1;
    check_case_name = tg_case;
    check_case_failed = 0;
    tg_cpu_off = tg_cpu_base;
    tg_gpu_off = tg_gpu_base;
    tg_nguards = 0;
    tg_scratch_keep = 0;
    if (tg_unsplit) tg_scratch_mark();
    tg_t0 = tg_now();
    fflush(stdout);
}

/* the backends' sticky status: report it, then clear it so that later cases report their own failures */
static void tg_status(void) {
    if (tg_gpu->status) {
        CHECK(0, "cuda backend status %d (%s): %s", tg_gpu->status, ngpt_status_name(tg_gpu->status), tg_gpu->msg);
        tg_gpu->status = 0;
        tg_gpu->msg[0] = 0;
    }
    if (tg_cpu->status) {
        CHECK(0, "cpu backend status %d: %s", tg_cpu->status, tg_cpu->msg);
        tg_cpu->status = 0;
        tg_cpu->msg[0] = 0;
    }
}

static void tg_check_guards(void) {
    for (int i = 0; i < tg_nguards; i++) {
        tg_gpu->download(tg_gpu, tg_gpu_host, tg_guards[i], TG_GUARD);
        int bad = 0;
        for (int j = 0; j < TG_GUARD; j++) bad += (unsigned char)tg_gpu_host[j] != 0x5A;
        CHECK(bad == 0, "guard zone %d after a GPU buffer was overwritten (%d bytes changed): a kernel wrote out of bounds", i, bad);
    }
}

static void tg_end(void) {
    tg_status();
    tg_check_guards();
    if (tg_unsplit) {
        size_t changed = tg_scratch_changed();
        CHECK(changed == 0, "NGPT_SPLITK_MAX=1, yet %zu bytes of the scratch past the bias backward's %zu changed: a product was split along K",
              changed, tg_scratch_keep);
    }
    tg_status();
    printf("    (%.2f s)\n", tg_now() - tg_t0);
    if (check_case_failed) check_failed++;
    else { check_passed++; printf("ok %s\n", tg_case); }
    if (check_case_failed && tg_fail_fast) {
        printf("stopped at the first failed case (--fail-fast)\n");
        exit(check_summary());
    }
    fflush(stdout);
}

/* device memory of n bytes on the GPU arena, followed by a guard zone */
static char *tg_gpu_take(size_t bytes) {
    size_t off = ALIGN_UP(tg_gpu_off, 256);
    if (off + bytes + TG_GUARD > tg_gpu_cap || tg_nguards >= TG_MAX_BUFS) {
        fprintf(stderr, "test_gpu_ops: GPU test arena too small (%zu bytes asked at %zu of %zu)\n", bytes, off, tg_gpu_cap);
        exit(2);
    }
    char *p = tg_gpu_dev + off, *g = p + ALIGN_UP(bytes, 16);
    /* the guard starts 16-byte aligned right after the data, so writing one 16-byte chunk too far lands in it */
    memset(tg_gpu_host, 0x5A, TG_GUARD);
    tg_gpu->upload(tg_gpu, g, tg_gpu_host, TG_GUARD);
    tg_gpu->sync(tg_gpu);
    tg_guards[tg_nguards++] = g;
    tg_gpu_off = (size_t)(g - tg_gpu_dev) + TG_GUARD;
    return p;
}
static char *tg_cpu_take(size_t bytes) {
    size_t off = ALIGN_UP(tg_cpu_off, 64);
    if (off + bytes > tg_cpu_cap) {
        fprintf(stderr, "test_gpu_ops: CPU test arena too small\n");
        exit(2);
    }
    tg_cpu_off = off + bytes;
    return tg_cpu_dev + off;
}

/* ------------------------------------------------------------------------------------------------------
 * Numbers: random inputs, bf16/f16 conversions (round to nearest even, as the GPU's __float2*_rn).
 * ---------------------------------------------------------------------------------------------------- */

static double tg_urand(void) { /* (0, 1) */
    tg_rs ^= tg_rs << 13; tg_rs ^= tg_rs >> 7; tg_rs ^= tg_rs << 17;
    return ((tg_rs >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static float tg_nrand(void) { return (float)(sqrt(-2.0 * log(tg_urand())) * cos(6.283185307179586 * tg_urand())); }

static uint16_t tg_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float tg_bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t tg_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
    if (ax <= 0x33000000u) return (uint16_t)sign;             /* <= 2^-25: zero (2^-25 ties to even 0) */
    int e = (int)(ax >> 23);
    if (e < 113) { /* half subnormal */
        uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - e;
        uint32_t m = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = ax - (112u << 23);
    uint32_t h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}
static float tg_h2f(uint16_t h) {
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400u), (int)e - 25);
    return (h & 0x8000u) ? -f : f;
}
static float tg_round(float x, int dt) {
    return dt == NGPT_DTYPE_BF16 ? tg_bf2f(tg_f2bf(x)) : dt == NGPT_DTYPE_F16 ? tg_h2f(tg_f2h(x)) : x;
}
static void tg_to_dt(void *dst, const float *src, size_t n, int dt) {
    if (dt == NGPT_DTYPE_F32) { memcpy(dst, src, n * 4); return; }
    uint16_t *d = (uint16_t *)dst;
    for (size_t i = 0; i < n; i++) d[i] = dt == NGPT_DTYPE_BF16 ? tg_f2bf(src[i]) : tg_f2h(src[i]);
}
static void tg_from_dt(float *dst, const void *src, size_t n, int dt) {
    if (dt == NGPT_DTYPE_F32) { memcpy(dst, src, n * 4); return; }
    const uint16_t *s = (const uint16_t *)src;
    for (size_t i = 0; i < n; i++) dst[i] = dt == NGPT_DTYPE_BF16 ? tg_bf2f(s[i]) : tg_h2f(s[i]);
}

/* n normal numbers * scale (+ shift), rounded to the GPU's storage type; never zero */
static float *tg_rand(size_t n, float scale, float shift, int dt) {
    float *x = (float *)malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) {
        float v = shift + scale * tg_nrand();
        if (v == 0.0f) v = scale * 0.5f;
        x[i] = tg_round(v, dt);
    }
    return x;
}

/* ------------------------------------------------------------------------------------------------------
 * Buffers on both backends: act buffers in the GPU's dtype (f32 on the CPU), f32 buffers, int32 buffers.
 * ---------------------------------------------------------------------------------------------------- */

enum { TG_ACT, TG_F32, TG_I32 };
typedef struct {
    size_t n;
    int kind, dt; /* dt: the GPU storage type of the elements */
    char *g, *c;  /* GPU and CPU device pointers */
} TgBuf;

static TgBuf tg_buf(size_t n, int kind) {
    TgBuf b;
    b.n = n;
    b.kind = kind;
    b.dt = kind == TG_ACT ? tg_gpu->dtype : NGPT_DTYPE_F32;
    b.g = tg_gpu_take(n * tg_esz(b.dt));
    b.c = tg_cpu_take(n * 4);
    return b;
}
static size_t tg_gbytes(const TgBuf *b) { return b->n * tg_esz(b->dt); }

static void tg_put_gpu(TgBuf *b, const void *h) {
    if (tg_gbytes(b) > tg_host_cap) { fprintf(stderr, "test_gpu_ops: host staging too small\n"); exit(2); }
    if (b->kind == TG_I32) memcpy(tg_gpu_host, h, b->n * 4);
    else tg_to_dt(tg_gpu_host, (const float *)h, b->n, b->dt);
    tg_gpu->upload(tg_gpu, b->g, tg_gpu_host, tg_gbytes(b));
    tg_gpu->sync(tg_gpu); /* the staging area is reused by the next upload */
}
static void tg_put_cpu(TgBuf *b, const void *h) { tg_cpu->upload(tg_cpu, b->c, h, b->n * 4); }
static void tg_put(TgBuf *b, const void *h) { tg_put_gpu(b, h); tg_put_cpu(b, h); }

/* NaN bit patterns in an output before a run (all-ones bytes are a NaN in f32, bf16 and f16), on the
 * GPU (gpu_side) or the CPU */
static void tg_poison_side(TgBuf *b, int gpu_side) {
    if (gpu_side) {
        memset(tg_gpu_host, 0xFF, tg_gbytes(b));
        tg_gpu->upload(tg_gpu, b->g, tg_gpu_host, tg_gbytes(b));
        tg_gpu->sync(tg_gpu);
    } else {
        memset(b->c, 0xFF, b->n * 4);
    }
}

/* Each case runs three times: rep 0 on the CPU, reps 1 and 2 on the GPU (which must agree bit for bit).
 * PTR(b) is the buffer on this rep's backend, PUT(b, host) uploads to it, POISON(b) fills it with NaN. */
#define PTR(B) ((void *)(rep ? (B).g : (B).c))
#define PUT(B, H) (rep ? tg_put_gpu(&(B), (H)) : tg_put_cpu(&(B), (H)))
#define POISON(B) tg_poison_side(&(B), rep)

/* raw GPU bytes (for bit-identity) */
static void *tg_raw_gpu(const TgBuf *b) {
    void *r = malloc(tg_gbytes(b) + 4);
    tg_gpu->download(tg_gpu, tg_gpu_host, b->g, tg_gbytes(b));
    memcpy(r, tg_gpu_host, tg_gbytes(b));
    return r;
}
static float *tg_raw_to_f32(const TgBuf *b, const void *raw) {
    float *f = (float *)malloc(b->n * 4 + 4);
    tg_from_dt(f, raw, b->n, b->dt);
    return f;
}
static float *tg_get_cpu(const TgBuf *b) {
    float *f = (float *)malloc(b->n * 4 + 4);
    tg_cpu->download(tg_cpu, f, b->c, b->n * 4);
    return f;
}

/* ------------------------------------------------------------------------------------------------------
 * Comparison
 * ---------------------------------------------------------------------------------------------------- */

static double tg_tol(double f32_tol, double half_tol) { return tg_gpu->dtype == NGPT_DTYPE_F32 ? f32_tol : half_tol; }
static double tg_tol3(double f32_tol, double bf16_tol, double f16_tol) {
    return tg_gpu->dtype == NGPT_DTYPE_F32 ? f32_tol : tg_gpu->dtype == NGPT_DTYPE_BF16 ? bf16_tol : f16_tol;
}

/* max err <= tol, and (when tol_rn > 0) rel-norm <= tol_rn */
static void tg_compare(const char *what, const float *got, const float *want, size_t n, double tol, double tol_rn) {
    double ss = 0;
    size_t want_bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(want[i])) ss += (double)want[i] * want[i];
        else want_bad++;
    }
    double rms = n ? sqrt(ss / (double)n) : 0, se = 0, maxerr = 0;
    size_t at = 0, bad = 0, first_bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(want[i])) {
            int same = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];
            if (!same && bad++ == 0) first_bad = i;
            continue;
        }
        if (!isfinite(got[i])) {
            if (bad++ == 0) first_bad = i;
            continue;
        }
        double d = fabs((double)got[i] - want[i]), den = fabs(want[i]);
        if (den < rms) den = rms;
        if (den < 1e-30) den = 1e-30;
        se += d * d;
        if (d / den > maxerr) { maxerr = d / den; at = i; }
    }
    double relnorm = ss > 0 ? sqrt(se / ss) : sqrt(se);
    printf("    %-14s n=%-9zu max err %.2e at %zu (gpu %.7g cpu %.7g)  rel-norm %.2e  tol %.0e\n", what, n, maxerr, at,
           n ? got[at] : 0.0, n ? want[at] : 0.0, relnorm, tol);
    CHECK(tol_rn <= 0 || relnorm <= tol_rn, "%s: rel-norm %.3e exceeds %.1e", what, relnorm, tol_rn);
    CHECK(want_bad == 0, "%s: the CPU reference has %zu non-finite values", what, want_bad);
    CHECK(bad == 0, "%s: %zu elements non-finite or unwritten on the GPU (first at %zu: gpu %g cpu %g)", what, bad, first_bad,
          n ? got[first_bad] : 0.0, n ? want[first_bad] : 0.0);
    CHECK(maxerr <= tol, "%s: max error %.3e at %zu (gpu %.9g, cpu %.9g) exceeds %.1e", what, maxerr, at, n ? got[at] : 0.0,
          n ? want[at] : 0.0, tol);
}

/* GPU outputs of two runs: bit-identical, then compared with the CPU */
typedef struct {
    const char *what;
    TgBuf *b;
    double tol;
    void *raw[2];
    double tol_rn; /* 0: only the max error is checked */
} TgOut;

static void tg_grab(TgOut *o, int nout, int rep) {
    for (int i = 0; i < nout; i++) o[i].raw[rep] = tg_raw_gpu(o[i].b);
}
static void tg_bits_note(const char *what, const void *raw, size_t bytes) {
    char key[300];
    snprintf(key, sizeof key, "%s / %s", tg_case, what);
    uint64_t h = tg_fnv(raw, bytes, 0xcbf29ce484222325ull);
    if (tg_bits_mode == TG_BITS_KEEP && tg_nbits < TG_MAX_BITS) {
        snprintf(tg_bits[tg_nbits].key, sizeof tg_bits[tg_nbits].key, "%s", key);
        tg_bits[tg_nbits++].hash = h;
    } else if (tg_bits_mode == TG_BITS_MATCH) {
        for (int i = 0; i < tg_nbits; i++)
            if (!strcmp(tg_bits[i].key, key)) {
                CHECK(tg_bits[i].hash == h, "%s: not the bits of the default run", what);
                tg_bits_matched++;
                return;
            }
    }
}
static void tg_finish(TgOut *o, int nout) {
    for (int i = 0; i < nout; i++) {
        size_t bytes = tg_gbytes(o[i].b);
        CHECK(memcmp(o[i].raw[0], o[i].raw[1], bytes) == 0, "%s: two GPU runs on the same inputs differ (not deterministic)", o[i].what);
        tg_bits_note(o[i].what, o[i].raw[0], bytes);
        float *g = tg_raw_to_f32(o[i].b, o[i].raw[0]), *c = tg_get_cpu(o[i].b);
        tg_compare(o[i].what, g, c, o[i].b->n, o[i].tol, o[i].tol_rn);
        free(g);
        free(c);
        free(o[i].raw[0]);
        free(o[i].raw[1]);
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Op cases
 * ---------------------------------------------------------------------------------------------------- */

static void t_matmul(int N, int C, int OC, int bias) {
    int dt = tg_gpu->dtype;
    tg_begin("matmul N=%d C=%d OC=%d%s", N, C, OC, bias ? " bias" : "");
    float *inp = tg_rand((size_t)N * C, 1.0f, 0, dt), *w = tg_rand((size_t)OC * C, 1.0f / sqrtf((float)C), 0, dt);
    float *b = tg_rand((size_t)OC, 1.0f, 0, dt), *dout = tg_rand((size_t)N * OC, 1.0f, 0, dt);
    float *dw0 = tg_rand((size_t)OC * C, 1.0f, 0, dt), *db0 = tg_rand((size_t)OC, 1.0f, 0, dt);
    TgBuf Binp = tg_buf((size_t)N * C, TG_ACT), Bw = tg_buf((size_t)OC * C, TG_ACT), Bb = tg_buf((size_t)OC, TG_ACT);
    TgBuf Bout = tg_buf((size_t)N * OC, TG_ACT), Bdout = tg_buf((size_t)N * OC, TG_ACT), Bdinp = tg_buf((size_t)N * C, TG_ACT);
    TgBuf Bdw = tg_buf((size_t)OC * C, TG_ACT), Bdb = tg_buf((size_t)OC, TG_ACT);
    TgOut outs[] = {{"out", &Bout, tg_tol(1e-4, 1e-2), {0}, 0}, {"dinp", &Bdinp, tg_tol(1e-4, 1e-2), {0}, 0},
                    {"dw (+=)", &Bdw, tg_tol(1e-4, 1e-2), {0}, 0}, {"dbias (+=)", &Bdb, tg_tol(1e-4, 1e-2), {0}, 0}};
    int nout = bias ? 4 : 3;
    if (bias) tg_scratch_keep = (size_t)TG_BIAS_GROUPS * OC * sizeof(float);
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Binp, inp); PUT(Bw, w); PUT(Bb, b); PUT(Bdout, dout); PUT(Bdw, dw0); PUT(Bdb, db0);
        POISON(Bout); POISON(Bdinp);
        be->matmul_forward(be, PTR(Bout), PTR(Binp), PTR(Bw), bias ? PTR(Bb) : NULL, N, C, OC);
        be->matmul_backward(be, PTR(Bdinp), PTR(Bdw), bias ? PTR(Bdb) : NULL, PTR(Bdout), PTR(Binp), PTR(Bw), N, C, OC);
        be->sync(be);
        if (rep) tg_grab(outs, nout, rep - 1);
    }
    tg_finish(outs, nout);
    free(inp); free(w); free(b); free(dout); free(dw0); free(db0);
    tg_end();
}

static void t_layernorm(int N, int C, int bias) {
    int dt = tg_gpu->dtype;
    tg_begin("layernorm N=%d C=%d%s", N, C, bias ? " bias" : "");
    float *inp = tg_rand((size_t)N * C, 2.0f, 0.5f, dt), *w = tg_rand((size_t)C, 0.3f, 1.0f, dt), *b = tg_rand((size_t)C, 0.5f, 0, dt);
    float *dout = tg_rand((size_t)N * C, 1.0f, 0, dt), *dinp0 = tg_rand((size_t)N * C, 1.0f, 0, dt);
    float *dw0 = tg_rand((size_t)C, 1.0f, 0, dt), *db0 = tg_rand((size_t)C, 1.0f, 0, dt);
    TgBuf Binp = tg_buf((size_t)N * C, TG_ACT), Bw = tg_buf((size_t)C, TG_ACT), Bb = tg_buf((size_t)C, TG_ACT);
    TgBuf Bout = tg_buf((size_t)N * C, TG_ACT), Bmean = tg_buf((size_t)N, TG_F32), Brstd = tg_buf((size_t)N, TG_F32);
    TgBuf Bdout = tg_buf((size_t)N * C, TG_ACT), Bdinp = tg_buf((size_t)N * C, TG_ACT), Bdw = tg_buf((size_t)C, TG_ACT), Bdb = tg_buf((size_t)C, TG_ACT);
    TgBuf Bmean2 = tg_buf((size_t)N, TG_F32), Brstd2 = tg_buf((size_t)N, TG_F32);
    /* the backward runs on the CPU forward's mean and rstd on both backends, so it is tested alone */
    float *mean = NULL, *rstd = NULL;
    TgOut outs[] = {{"out", &Bout, tg_tol(1e-5, 1e-2), {0}, 0}, {"mean", &Bmean, 1e-4, {0}, 0}, {"rstd", &Brstd, 1e-4, {0}, 0},
                    {"dinp (+=)", &Bdinp, tg_tol(1e-4, 1e-2), {0}, 0}, {"dw (+=)", &Bdw, tg_tol(1e-4, 1e-2), {0}, 0},
                    {"db (+=)", &Bdb, tg_tol(1e-4, 1e-2), {0}, 0}};
    int nout = bias ? 6 : 5;
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Binp, inp); PUT(Bw, w); PUT(Bb, b); PUT(Bdout, dout); PUT(Bdinp, dinp0); PUT(Bdw, dw0); PUT(Bdb, db0);
        POISON(Bout); POISON(Bmean); POISON(Brstd);
        be->layernorm_forward(be, PTR(Bout), (float *)PTR(Bmean), (float *)PTR(Brstd), PTR(Binp), PTR(Bw), bias ? PTR(Bb) : NULL, N, C);
        be->sync(be);
        if (!rep) { mean = tg_get_cpu(&Bmean); rstd = tg_get_cpu(&Brstd); }
        PUT(Bmean2, mean);
        PUT(Brstd2, rstd);
        be->layernorm_backward(be, PTR(Bdinp), PTR(Bdw), bias ? PTR(Bdb) : NULL, PTR(Bdout), PTR(Binp), PTR(Bw), (float *)PTR(Bmean2),
                               (float *)PTR(Brstd2), N, C);
        be->sync(be);
        if (rep) tg_grab(outs, nout, rep - 1);
    }
    tg_finish(outs, nout);
    free(inp); free(w); free(b); free(dout); free(dinp0); free(dw0); free(db0); free(mean); free(rstd);
    tg_end();
}

/* scratch: the GPU backward's scratch, where not 0 (the wgmma backward keeps dS^T after D: with room for one
 * head's it runs the heads in groups, with less the mma.sync kernels run) */
static void t_attention_scratch(int B, int NH, int T, int hs, float p, size_t scratch) {
    int dt = tg_gpu->dtype, C = NH * hs;
    tg_begin("attention B=%d NH=%d T=%d hs=%d dropout=%g%s", B, NH, T, hs, p, scratch ? " (small scratch)" : "");
    ngpt_dropout drop = {.p = p, .seed = 1234567, .stream = 89, .offset = (uint64_t)B * NH * T * T * 3};
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    float *qkv = tg_rand(nqkv, 1.0f, 0, dt), *dout = tg_rand(nout, 1.0f, 0, dt);
    TgBuf Bqkv = tg_buf(nqkv, TG_ACT), Bout = tg_buf(nout, TG_ACT), Blse = tg_buf(nlse, TG_F32);
    TgBuf Bdout = tg_buf(nout, TG_ACT), Bout2 = tg_buf(nout, TG_ACT), Blse2 = tg_buf(nlse, TG_F32), Bdqkv = tg_buf(nqkv, TG_ACT);
    float *out_ref = NULL, *lse_ref = NULL;
    /* 16-bit: probabilities and dS are rounded before the tensor-core products. A numpy model of those
     * rounding points gives bf16 max err up to ~4e-2 (T=1024 or hs=128) with rel-norm ~2.5e-3, and f16
     * max err ~5e-3 with rel-norm ~3e-4 (see the thresholds at the top). */
    double tmax = tg_tol3(1e-4, 8e-2, 1e-2), trn = tg_tol3(0, 1e-2, 2e-3);
    TgOut outs[] = {{"out", &Bout, tmax, {0}, trn}, {"lse", &Blse, 1e-4, {0}, 0}, {"dqkv", &Bdqkv, tmax, {0}, trn}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Bqkv, qkv);
        PUT(Bdout, dout);
        POISON(Bout); POISON(Blse); POISON(Bdqkv);
        be->attention_forward(be, PTR(Bout), (float *)PTR(Blse), PTR(Bqkv), B, T, C, NH, &drop);
        be->sync(be);
        if (!rep) { /* the backward's out and lse: the CPU forward's, out rounded to the storage type */
            out_ref = tg_get_cpu(&Bout);
            for (size_t i = 0; i < nout; i++) out_ref[i] = tg_round(out_ref[i], dt);
            lse_ref = tg_get_cpu(&Blse);
        }
        PUT(Bout2, out_ref);
        PUT(Blse2, lse_ref);
        if (rep && scratch) tg_gpu->set_scratch(tg_gpu, tg_gpu_dev, scratch);
        be->attention_backward(be, PTR(Bdqkv), PTR(Bdout), PTR(Bqkv), PTR(Bout2), (float *)PTR(Blse2), B, T, C, NH, &drop);
        be->sync(be);
        if (rep && scratch) tg_gpu->set_scratch(tg_gpu, tg_gpu_dev, tg_gpu_base);
        if (rep) tg_grab(outs, 3, rep - 1);
    }
    tg_finish(outs, 3);
    free(qkv); free(dout); free(out_ref); free(lse_ref);
    tg_end();
}
static void t_attention(int B, int NH, int T, int hs, float p) { t_attention_scratch(B, NH, T, hs, p, 0); }

/* generation with a KV cache: positions t..t+n-1 of S sequences (row s*n+i: position t+i of s). The cache is random except
 * those positions, which are NaN until the op writes them; the positions after them must come back untouched.
 * graph: the GPU reads t from a device int32 (t_at), and the op is given another position as its t; there the op is
 * recorded as a graph (graph_begin .. graph_end, where the backend records graphs) and launched twice, first at
 * another position, then, on a fresh cache, at t: a graph that kept its recording's t, or its first launch's, fails;
 * then once more at a position outside the cache, which must leave every output NaN and the cache as it was */
static void t_attention_decode_as(int S, int NH, int hs, int t, int n, int maxT, int graph) {
    int dt = tg_gpu->dtype, C = NH * hs;
    tg_begin("attention_decode S=%d NH=%d hs=%d t=%d n=%d maxT=%d%s", S, NH, hs, t, n, maxT, graph ? " (t on the device, as a graph)" : "");
    size_t nkv = (size_t)S * 2 * maxT * C, rows = (size_t)n * S;
    float *qkv = tg_rand(rows * 3 * C, 1.0f, 0, dt), *kv = tg_rand(nkv, 1.0f, 0, dt);
    for (size_t i = 0; i < nkv; i++) {
        int pos = (int)((i / (size_t)C) % (size_t)maxT);
        if (pos >= t && pos < t + n) kv[i] = NAN;
    }
    const int32_t other = t ? 0 : maxT - n; /* a position the cache also has room for */
    TgBuf Bqkv = tg_buf(rows * 3 * C, TG_ACT), Bkv = tg_buf(nkv, TG_ACT), Bout = tg_buf(rows * C, TG_ACT), Bt = tg_buf(1, TG_I32);
    TgOut outs[] = {{"out", &Bout, tg_tol(1e-4, 1e-2), {0}, 0}, {"kv cache", &Bkv, tg_tol(1e-6, 1e-6), {0}, 0}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        const int32_t *t_at = graph && rep ? (const int32_t *)PTR(Bt) : NULL; /* the CPU's, the reference: at t itself */
        void *g = NULL;
        if (graph && rep && be->graph_begin) {
            be->graph_begin(be);
            be->attention_decode(be, PTR(Bout), PTR(Bkv), PTR(Bqkv), S, other, n, maxT, C, NH, t_at);
            g = be->graph_end(be);
            CHECK(g != NULL, "graph_end recorded no graph of attention_decode (the op then runs alone)");
        }
        if (g) {
            PUT(Bqkv, qkv);
            PUT(Bkv, kv);
            PUT(Bt, &other);
            be->graph_launch(be, g);
            be->sync(be);
        }
        PUT(Bqkv, qkv);
        PUT(Bkv, kv);
        POISON(Bout);
        if (graph) PUT(Bt, &t);
        if (g) be->graph_launch(be, g);
        else be->attention_decode(be, PTR(Bout), PTR(Bkv), PTR(Bqkv), S, t_at ? other : t, n, maxT, C, NH, t_at);
        be->sync(be);
        if (rep) tg_grab(outs, 2, rep - 1);
        if (graph && rep) { /* then at a position outside the cache: every output NaN, the cache as it was */
            const int32_t outside = maxT - n + 1;
            PUT(Bt, &outside);
            if (g) be->graph_launch(be, g);
            else be->attention_decode(be, PTR(Bout), PTR(Bkv), PTR(Bqkv), S, other, n, maxT, C, NH, t_at);
            be->sync(be);
            void *kv_raw = tg_raw_gpu(&Bkv), *out_raw = tg_raw_gpu(&Bout);
            float *got = tg_raw_to_f32(&Bout, out_raw);
            size_t finite = 0;
            for (size_t i = 0; i < rows * C; i++) finite += !isnan(got[i]);
            CHECK(finite == 0 && !memcmp(kv_raw, outs[1].raw[rep - 1], tg_gbytes(&Bkv)), "at position %d, outside the cache: %zu outputs not NaN, cache %s",
                  outside, finite, memcmp(kv_raw, outs[1].raw[rep - 1], tg_gbytes(&Bkv)) ? "written" : "as it was");
            free(kv_raw); free(out_raw); free(got);
        }
        if (g) be->graph_free(be, g);
    }
    tg_finish(outs, 2);
    free(qkv); free(kv);
    tg_end();
}
static void t_attention_decode(int S, int NH, int hs, int t, int n, int maxT) { t_attention_decode_as(S, NH, hs, t, n, maxT, 0); }

/* a recording the device cannot make (a wait inside it) gives no graph and leaves the backend's status clear, so the
 * caller runs the ops itself; the stream works after it */
static void t_graph_recording_fails(void) {
    tg_begin("graph_end after a wait inside the recording");
    if (!tg_gpu->graph_begin) {
        printf("  no graphs on this backend (NGPT_GRAPHS=0 or NGPT_CUDA_SYNC=1)\n");
        tg_end();
        return;
    }
    tg_gpu->graph_begin(tg_gpu);
    tg_gpu->sync(tg_gpu);
    void *g = tg_gpu->graph_end(tg_gpu);
    CHECK(g == NULL && tg_gpu->status == NGPT_OK, "a recording with a wait inside gave %s, status %d (%s)", g ? "a graph" : "no graph", tg_gpu->status,
          tg_gpu->msg);
    if (g) tg_gpu->graph_free(tg_gpu, g);
    int32_t v[64];
    for (int i = 0; i < 64; i++) v[i] = i * 7;
    TgBuf b = tg_buf(64, TG_I32);
    tg_put_gpu(&b, v);
    void *raw = tg_raw_gpu(&b);
    CHECK(!memcmp(raw, v, sizeof v), "the stream after the failed recording: an upload and a download disagree");
    free(raw);
    tg_end();
}

static void t_encoder(int B, int T, int C, int V, int Vp) {
    int dt = tg_gpu->dtype;
    tg_begin("encoder B=%d T=%d C=%d V=%d Vp=%d", B, T, C, V, Vp);
    size_t BT = (size_t)B * T;
    int32_t *tok = (int32_t *)malloc(BT * 4), *start = (int32_t *)malloc(((size_t)Vp + 1) * 4), *pos = (int32_t *)malloc(BT * 4);
    for (size_t i = 0; i < BT; i++) tok[i] = (int32_t)(tg_urand() * V) % V;
    /* buckets: positions grouped by token id, ascending (what the graph builds on the host) */
    int nb = 0, k = 0;
    start[0] = 0;
    for (int id = 0; id < Vp; id++) {
        int any = 0;
        for (size_t i = 0; i < BT; i++)
            if (tok[i] == id) { pos[k++] = (int32_t)i; any = 1; }
        if (any) start[++nb] = k;
    }
    float *wte = tg_rand((size_t)Vp * C, 1.0f, 0, dt), *wpe = tg_rand((size_t)T * C, 1.0f, 0, dt), *dout = tg_rand(BT * C, 1.0f, 0, dt);
    float *dwte0 = tg_rand((size_t)Vp * C, 1.0f, 0, dt), *dwpe0 = tg_rand((size_t)T * C, 1.0f, 0, dt);
    TgBuf Btok = tg_buf(BT, TG_I32), Bstart = tg_buf((size_t)nb + 1, TG_I32), Bpos = tg_buf(BT, TG_I32);
    TgBuf Bwte = tg_buf((size_t)Vp * C, TG_ACT), Bwpe = tg_buf((size_t)T * C, TG_ACT), Bout = tg_buf(BT * C, TG_ACT);
    TgBuf Bdout = tg_buf(BT * C, TG_ACT), Bdwte = tg_buf((size_t)Vp * C, TG_ACT), Bdwpe = tg_buf((size_t)T * C, TG_ACT);
    TgOut outs[] = {{"out", &Bout, tg_tol(1e-5, 1e-2), {0}, 0}, {"dwte (+=)", &Bdwte, tg_tol(1e-5, 1e-2), {0}, 0}, {"dwpe (+=)", &Bdwpe, tg_tol(1e-5, 1e-2), {0}, 0}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Btok, tok); PUT(Bstart, start); PUT(Bpos, pos);
        PUT(Bwte, wte); PUT(Bwpe, wpe); PUT(Bdout, dout); PUT(Bdwte, dwte0); PUT(Bdwpe, dwpe0);
        POISON(Bout);
        be->encoder_forward(be, PTR(Bout), (const int32_t *)PTR(Btok), PTR(Bwte), PTR(Bwpe), B, T, C);
        be->encoder_backward(be, PTR(Bdwte), PTR(Bdwpe), PTR(Bdout), (const int32_t *)PTR(Btok), (const int32_t *)PTR(Bstart),
                             (const int32_t *)PTR(Bpos), nb, B, T, C);
        be->sync(be);
        if (rep) tg_grab(outs, 3, rep - 1);
    }
    tg_finish(outs, 3);
    free(tok); free(start); free(pos); free(wte); free(wpe); free(dout); free(dwte0); free(dwpe0);
    tg_end();
}

static void t_elementwise(size_t n) {
    int dt = tg_gpu->dtype;
    tg_begin("gelu, residual, dropout n=%zu", n);
    float *x = tg_rand(n, 1.5f, 0, dt), *y = tg_rand(n, 1.0f, 0, dt), *d = tg_rand(n, 1.0f, 0, dt);
    ngpt_dropout drop = {.p = 0.1f, .seed = 42, .stream = 7, .offset = 5 * n}, nodrop = {.p = 0.0f, .seed = 42, .stream = 7, .offset = 0};
    TgBuf Bx = tg_buf(n, TG_ACT), By = tg_buf(n, TG_ACT), Bgelu = tg_buf(n, TG_ACT), Bdg = tg_buf(n, TG_ACT), Bres = tg_buf(n, TG_ACT);
    TgBuf Bdrop = tg_buf(n, TG_ACT), Bdrop2 = tg_buf(n, TG_ACT), Bcopy = tg_buf(n, TG_ACT), Bgelu2 = tg_buf(n, TG_ACT);
    TgBuf Bgelu1 = tg_buf(n, TG_ACT), Bdg1 = tg_buf(n, TG_ACT), Bres1 = tg_buf(n, TG_ACT);
    double t1 = tg_tol(1e-5, 1e-2);
    TgOut outs[] = {{"gelu", &Bgelu, t1, {0}, 0}, {"gelu_bwd alias", &Bdg, t1, {0}, 0}, {"residual alias", &Bres, t1, {0}, 0},
                    {"dropout", &Bdrop, t1, {0}, 0}, {"dropout alias", &Bdrop2, t1, {0}, 0}, {"dropout p=0", &Bcopy, t1, {0}, 0},
                    {"gelu alias", &Bgelu2, t1, {0}, 0}, {"gelu from the second value", &Bgelu1, t1, {0}, 0},
                    {"gelu_bwd from the second value", &Bdg1, t1, {0}, 0}, {"residual from the second value", &Bres1, t1, {0}, 0}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        const size_t es = tg_esz(be->dtype); /* one value in: no longer 16-byte aligned, so the GPU takes one value at a time */
        PUT(Bx, x); PUT(By, y);
        POISON(Bgelu); POISON(Bdrop); POISON(Bcopy);
        PUT(Bdg, d);     /* gelu_backward in place: dinp aliases dout */
        PUT(Bres, x);    /* residual in place: out aliases a */
        PUT(Bdrop2, y);  /* dropout in place */
        PUT(Bgelu2, x);  /* gelu in place */
        PUT(Bgelu1, y); PUT(Bdg1, d); PUT(Bres1, x); /* the first value is left as it was */
        be->gelu_forward(be, PTR(Bgelu), PTR(Bx), n);
        be->gelu_backward(be, PTR(Bdg), PTR(Bx), PTR(Bdg), n);
        be->residual_forward(be, PTR(Bres), PTR(Bres), PTR(By), n);
        be->dropout(be, PTR(Bdrop), PTR(Bx), n, &drop);
        be->dropout(be, PTR(Bdrop2), PTR(Bdrop2), n, &drop);
        be->dropout(be, PTR(Bcopy), PTR(By), n, &nodrop);
        be->gelu_forward(be, PTR(Bgelu2), PTR(Bgelu2), n);
        be->gelu_forward(be, (char *)PTR(Bgelu1) + es, (char *)PTR(Bx) + es, n - 1);
        be->gelu_backward(be, (char *)PTR(Bdg1) + es, (char *)PTR(Bx) + es, (char *)PTR(Bdg1) + es, n - 1);
        be->residual_forward(be, (char *)PTR(Bres1) + es, (char *)PTR(Bres1) + es, (char *)PTR(By) + es, n - 1);
        be->sync(be);
        if (rep) tg_grab(outs, 10, rep - 1);
    }
    /* the masks agree exactly: the inputs are never zero, so an output is zero iff the element was dropped */
    {
        float *g = tg_raw_to_f32(&Bdrop, outs[3].raw[0]), *c = tg_get_cpu(&Bdrop);
        size_t differ = 0, dropped = 0;
        for (size_t i = 0; i < n; i++) {
            differ += (g[i] == 0.0f) != (c[i] == 0.0f);
            dropped += c[i] == 0.0f;
        }
        printf("    dropout mask: %zu of %zu dropped (p = 0.1), %zu differ\n", dropped, n, differ);
        CHECK(differ == 0, "dropout: %zu mask positions differ between GPU and CPU", differ);
        free(g);
        free(c);
    }
    tg_finish(outs, 10);
    free(x); free(y); free(d);
    tg_end();
}

/* confident: each target logit in [20, 30), far above the rest (a well-trained model's rows), so each loss is a
 * tiny positive number that must not come out below 0 (max * log2(e) - target * log2(e) left rounding of about
 * -1e-6). Without the gradient: its target entry, p - 1 with p within an ulp of 1, is rounding alone. */
static void t_crossentropy(int N, int V, int Vp, int with_grad, int confident) {
    int dt = tg_gpu->dtype;
    float dscale = with_grad ? 1.0f / (float)N : 0.0f;
    tg_begin("crossentropy N=%d V=%d Vp=%d dscale=%g%s", N, V, Vp, dscale, confident ? " confident" : "");
    float *logits = tg_rand((size_t)N * Vp, 2.0f, 0, dt);
    int32_t *tg = (int32_t *)malloc((size_t)N * 4);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(tg_urand() * V) % V;
    for (int i = 0; i < N && confident; i++) logits[(size_t)i * Vp + tg[i]] = tg_round(20.0f + 10.0f * (float)tg_urand(), dt);
    TgBuf Bl = tg_buf((size_t)N * Vp, TG_ACT), Bloss = tg_buf((size_t)N, TG_F32), Bt = tg_buf((size_t)N, TG_I32);
    /* confident losses are at the rounding of the logits (an ulp of 25 is 1.9e-6, on the CPU too): within 4x their rms */
    TgOut outs[] = {{"losses", &Bloss, confident ? 4.0 : 1e-4, {0}, 0}, {with_grad ? "dlogits" : "logits kept", &Bl, tg_tol(1e-4, 1e-2), {0}, 0}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Bl, logits);
        PUT(Bt, tg);
        POISON(Bloss);
        be->crossentropy(be, PTR(Bl), (float *)PTR(Bloss), (const int32_t *)PTR(Bt), N, V, Vp, dscale);
        be->sync(be);
        if (rep) tg_grab(outs, 2, rep - 1);
    }
    size_t negative = 0;
    for (int i = 0; i < N; i++) negative += ((const float *)outs[0].raw[0])[i] < 0.0f;
    CHECK(negative == 0, "crossentropy: %zu of %d losses below 0", negative, N);
    if (with_grad) { /* the padding columns are exactly zero */
        float *g = tg_raw_to_f32(&Bl, outs[1].raw[0]);
        size_t nz = 0;
        for (int i = 0; i < N; i++)
            for (int j = V; j < Vp; j++) nz += g[(size_t)i * Vp + j] != 0.0f;
        CHECK(nz == 0, "crossentropy: %zu padding gradients are not 0", nz);
        free(g);
    } else { /* dscale 0: the logits are left as they were, bit for bit */
        void *in = malloc(tg_gbytes(&Bl));
        tg_to_dt(in, logits, Bl.n, dt);
        CHECK(memcmp(in, outs[1].raw[0], tg_gbytes(&Bl)) == 0, "crossentropy with dscale 0 changed the logits");
        free(in);
    }
    tg_finish(outs, 2);
    free(logits); free(tg);
    tg_end();
}

static void t_norm_sq(size_t n) {
    int dt = tg_gpu->dtype;
    tg_begin("norm_sq n=%zu", n);
    float *x = tg_rand(n, 1.0f, 0, dt);
    TgBuf Bx = tg_buf(n, TG_ACT);
    tg_put(&Bx, x);
    double c = tg_cpu->norm_sq(tg_cpu, Bx.c, n);
    double g1 = tg_gpu->norm_sq(tg_gpu, Bx.g, n), g2 = tg_gpu->norm_sq(tg_gpu, Bx.g, n);
    printf("    norm_sq: gpu %.12g cpu %.12g rel %.2e\n", g1, c, fabs(g1 - c) / c);
    CHECK(memcmp(&g1, &g2, sizeof g1) == 0, "norm_sq: two runs differ (%.17g, %.17g)", g1, g2);
    CHECK(fabs(g1 - c) <= 1e-5 * c, "norm_sq: gpu %.12g cpu %.12g", g1, c);
    if (n > 1) { /* from the second element: x not 16-byte aligned, so every element takes the one-element path */
        double c1 = tg_cpu->norm_sq(tg_cpu, Bx.c + 4, n - 1), g = tg_gpu->norm_sq(tg_gpu, Bx.g + tg_esz(dt), n - 1);
        CHECK(fabs(g - c1) <= 1e-5 * c1, "norm_sq from x + 1: gpu %.12g cpu %.12g", g, c1);
    }
    /* inf and NaN reach the result (dynamic loss scaling reads them) */
    float bad[2] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        float saved = x[n / 2];
        x[n / 2] = bad[k];
        tg_put_gpu(&Bx, x);
        double r = tg_gpu->norm_sq(tg_gpu, Bx.g, n);
        CHECK(k == 0 ? isinf(r) : isnan(r), "norm_sq with one %s element gave %g", k ? "NaN" : "inf", r);
        x[n / 2] = saved;
    }
    free(x);
    tg_end();
}

static void t_adamw(size_t n, int moments_dtype) {
    int dt = tg_gpu->dtype;
    int use_master = dt != NGPT_DTYPE_F32 || moments_dtype == NGPT_DTYPE_BF16;
    tg_begin("adamw n=%zu moments=%s master=%s", n, tg_dtname(moments_dtype), use_master ? "yes" : "no");
    ngpt_adamw h;
    memset(&h, 0, sizeof h);
    h.lr = 3e-3f; h.beta1 = 0.9f; h.beta2 = 0.95f; h.eps = 1e-8f; h.weight_decay = 0.1f; h.grad_scale = 0.5f;
    h.one_minus_beta1 = (float)(1.0 - 0.9); h.one_minus_beta2 = (float)(1.0 - 0.95);
    h.bias_correction1 = (float)(1.0 - pow(0.9, 3)); h.bias_correction2 = (float)(1.0 - pow(0.95, 3)); /* step 3 */
    h.moments_dtype = moments_dtype;
    float *master = tg_rand(n, 0.05f, 0, NGPT_DTYPE_F32), *grad = tg_rand(n, 0.01f, 0, dt);
    float *m = tg_rand(n, 0.001f, 0, moments_dtype), *v = (float *)malloc(n * 4);
    for (size_t i = 0; i < n; i++) v[i] = tg_round(1e-5f * (float)tg_urand() + 1e-7f, moments_dtype);
    float *param = (float *)malloc(n * 4);
    for (size_t i = 0; i < n; i++) param[i] = use_master ? tg_round(master[i], dt) : master[i];
    TgBuf Bp = tg_buf(n, TG_ACT), Bmaster = tg_buf(n, TG_F32), Bg = tg_buf(n, TG_ACT);
    TgBuf Bm = tg_buf(n, TG_F32), Bv = tg_buf(n, TG_F32);
    if (moments_dtype == NGPT_DTYPE_BF16) { Bm.dt = Bv.dt = NGPT_DTYPE_BF16; } /* stored as bf16 on the GPU */
    /* the CPU backend keeps f32 moments and updates the parameter itself (its parameters are the master) */
    tg_put_cpu(&Bp, master); tg_put_cpu(&Bg, grad); tg_put_cpu(&Bm, m); tg_put_cpu(&Bv, v);
    ngpt_adamw h_cpu = h;
    h_cpu.moments_dtype = NGPT_DTYPE_F32; /* (the CPU refuses bf16 moments) */
    tg_cpu->adamw(tg_cpu, Bp.c, NULL, Bg.c, Bm.c, Bv.c, n, &h_cpu);
    TgOut outs[] = {{"param", &Bp, tg_tol(1e-5, 1e-2), {0}, 0}, {"m", &Bm, moments_dtype == NGPT_DTYPE_BF16 ? 1e-2 : 1e-5, {0}, 0},
                    {"v", &Bv, moments_dtype == NGPT_DTYPE_BF16 ? 1e-2 : 1e-5, {0}, 0}, {"master", &Bmaster, 1e-5, {0}, 0}};
    for (int rep = 0; rep < 2; rep++) {
        tg_put_gpu(&Bp, param); tg_put_gpu(&Bmaster, master); tg_put_gpu(&Bg, grad); tg_put_gpu(&Bm, m); tg_put_gpu(&Bv, v);
        /* the second run with f32 moments: the first value alone, then the rest from the second, no longer 16-byte
         * aligned, so one value at a time; held to the first run's bits (bf16 moments' dice follow the index) */
        const size_t first = rep == 1 && moments_dtype == NGPT_DTYPE_F32 && n > 1 ? 1 : n, es = tg_esz(dt);
        tg_gpu->adamw(tg_gpu, Bp.g, use_master ? (float *)Bmaster.g : NULL, Bg.g, Bm.g, Bv.g, first, &h);
        if (first < n)
            tg_gpu->adamw(tg_gpu, (char *)Bp.g + es, use_master ? (float *)Bmaster.g + 1 : NULL, (char *)Bg.g + es, (float *)Bm.g + 1,
                          (float *)Bv.g + 1, n - 1, &h);
        tg_gpu->sync(tg_gpu);
        tg_grab(outs, use_master ? 4 : 3, rep);
    }
    if (use_master) tg_cpu->upload(tg_cpu, Bmaster.c, Bp.c, n * 4); /* compare the GPU master with the CPU parameters */
    tg_finish(outs, use_master ? 4 : 3);
    free(master); free(grad); free(m); free(v); free(param);
    tg_end();
}

/* bf16 moments under beta2 = 0.999 (PyTorch's default): with zero gradients v must decay as beta2^t, which
 * rounding to nearest never does (0.999 v rounds back to v: the step is under half a bf16 ulp). The kernel
 * rounds stochastically, so the mean of v over n elements follows fp32's within a fraction of a percent; m
 * (beta1 = 0.9) too, while it is large enough to matter. Each step its own stream, as the trainer gives. */
static void t_adamw_bf16_decay(size_t n, int steps) {
    tg_begin("adamw bf16 moments decay n=%zu steps=%d beta2=0.999", n, steps);
    const double beta1 = 0.9, beta2 = 0.999;
    TgBuf Bp = tg_buf(n, TG_ACT), Bmaster = tg_buf(n, TG_F32), Bg = tg_buf(n, TG_ACT), Bm = tg_buf(n, TG_F32), Bv = tg_buf(n, TG_F32);
    Bm.dt = Bv.dt = NGPT_DTYPE_BF16;
    float *master = tg_rand(n, 0.05f, 0, NGPT_DTYPE_F32), *zero = (float *)calloc(n, 4), *param = (float *)malloc(n * 4);
    float *m = (float *)malloc(n * 4), *v = (float *)malloc(n * 4);
    double m0 = 0, v0 = 0;
    for (size_t i = 0; i < n; i++) {
        param[i] = tg_round(master[i], tg_gpu->dtype);
        m[i] = tg_round(1e-3f * (float)(1.0 + tg_urand()), NGPT_DTYPE_BF16);
        v[i] = tg_round(1e-3f * (float)(1.0 + tg_urand()), NGPT_DTYPE_BF16);
        m0 += m[i];
        v0 += v[i];
    }
    tg_put_gpu(&Bp, param); tg_put_gpu(&Bmaster, master); tg_put_gpu(&Bg, zero); tg_put_gpu(&Bm, m); tg_put_gpu(&Bv, v);
    for (int t = 1; t <= steps; t++) {
        ngpt_adamw h;
        memset(&h, 0, sizeof h);
        h.lr = 1e-4f; h.beta1 = (float)beta1; h.beta2 = (float)beta2; h.eps = 1e-8f; h.grad_scale = 1.0f;
        h.one_minus_beta1 = (float)(1.0 - beta1); h.one_minus_beta2 = (float)(1.0 - beta2);
        h.bias_correction1 = (float)(1.0 - pow(beta1, t)); h.bias_correction2 = (float)(1.0 - pow(beta2, t));
        h.moments_dtype = NGPT_DTYPE_BF16;
        h.round_seed = 1337;
        h.round_stream = (uint64_t)t;
        tg_gpu->adamw(tg_gpu, Bp.g, (float *)Bmaster.g, Bg.g, Bm.g, Bv.g, n, &h);
    }
    tg_gpu->sync(tg_gpu);
    void *raw_m = tg_raw_gpu(&Bm), *raw_v = tg_raw_gpu(&Bv);
    float *mf = tg_raw_to_f32(&Bm, raw_m), *vf = tg_raw_to_f32(&Bv, raw_v);
    double m1 = 0, v1 = 0;
    for (size_t i = 0; i < n; i++) { m1 += mf[i]; v1 += vf[i]; }
    const int m_steps = 20; /* m after 20 steps (0.9^20 = 0.12) is checked in a run of its own length */
    double v_ratio = v1 / (v0 * pow(beta2, steps)), m_ratio = steps == m_steps ? m1 / (m0 * pow(beta1, steps)) : 1.0;
    if (steps == m_steps) printf("    after %d steps: mean v / fp32's %.5f, mean m / fp32's %.5f\n", steps, v_ratio, m_ratio);
    else printf("    after %d steps: mean v / fp32's %.5f\n", steps, v_ratio);
    /* the mean's noise is about 0.05% at n = 8192: 0.5% is ten times that, and a fraction of what a bias gives */
    CHECK(fabs(v_ratio - 1.0) < 0.005, "mean v after %d steps of beta2 = 0.999 is %.4f x fp32's (rounded to nearest it stays put)", steps,
          v_ratio);
    CHECK(fabs(m_ratio - 1.0) < 0.005, "mean m after %d steps of beta1 = 0.9 is %.4f x fp32's", steps, m_ratio);
    free(master); free(zero); free(param); free(m); free(v); free(raw_m); free(raw_v); free(mf); free(vf);
    tg_end();
}

static void t_fill_cast_zero(size_t n) {
    int dt = tg_gpu->dtype;
    tg_begin("fill_normal, cast_from_f32, zero, copies n=%zu", n);
    TgBuf Bf = tg_buf(n, TG_F32), Bc = tg_buf(n, TG_ACT), Bz = tg_buf(n, TG_ACT);
    TgOut outs[] = {{"fill_normal", &Bf, 1e-5, {0}, 0}};
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        POISON(Bf);
        be->fill_normal(be, (float *)PTR(Bf), n, 0.25f, 2.0f, 1337, 4242);
        be->sync(be);
        if (rep) tg_grab(outs, 1, rep - 1);
    }
    {
        float *g = tg_raw_to_f32(&Bf, outs[0].raw[0]);
        double s = 0, s2 = 0;
        for (size_t i = 0; i < n; i++) { s += g[i]; s2 += (double)g[i] * g[i]; }
        double mean = s / n, sd = sqrt(s2 / n - mean * mean);
        printf("    fill_normal: mean %.4f (0.25) std %.4f (2.0)\n", mean, sd);
        CHECK(fabs(mean - 0.25) < 0.05 && fabs(sd - 2.0) < 0.05, "fill_normal statistics: mean %g std %g", mean, sd);
        free(g);
    }
    tg_finish(outs, 1);
    /* cast: bit-exact against round-to-nearest-even on the host, special values included */
    float *src = tg_rand(n, 3.0f, 0, NGPT_DTYPE_F32);
    float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e6f, -1e6f, 3.0e38f, 1e-8f, -1e-8f, 6.0e-8f, 5.96e-8f, 2.98e-8f,
                        1.00390625f, 1.01171875f, 1.0009765625f, INFINITY, -INFINITY, 1e-40f};
    size_t ns = sizeof specials / sizeof specials[0];
    for (size_t i = 0; i < ns && i < n; i++) src[i] = specials[i];
    tg_put_gpu(&Bf, src);
    tg_gpu->cast_from_f32(tg_gpu, Bc.g, (const float *)Bf.g, n);
    void *got = tg_raw_gpu(&Bc), *want = malloc(tg_gbytes(&Bc));
    tg_to_dt(want, src, n, dt);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int d = dt == NGPT_DTYPE_F32 ? memcmp((char *)got + 4 * i, (char *)want + 4 * i, 4) : ((uint16_t *)got)[i] != ((uint16_t *)want)[i];
        if (d && diff++ == 0) first = i;
    }
    CHECK(diff == 0, "cast_from_f32: %zu values differ from round-to-nearest-even (first at %zu: %g)", diff, first, src[first]);
    printf("    cast_from_f32: %zu values, %zu differ from the host's round-to-nearest-even\n", n, diff);
    if (dt == NGPT_DTYPE_F32) { /* dst == src is allowed for f32 and leaves the values */
        tg_gpu->cast_from_f32(tg_gpu, Bf.g, (const float *)Bf.g, n);
        void *same = tg_raw_gpu(&Bf);
        CHECK(memcmp(same, want, n * 4) == 0, "cast_from_f32 in place changed the values");
        free(same);
    }
    free(got); free(want); free(src);
    /* zero, and an upload/download round trip */
    tg_poison_side(&Bz, 1);
    tg_gpu->zero(tg_gpu, Bz.g, tg_gbytes(&Bz));
    unsigned char *z = (unsigned char *)tg_raw_gpu(&Bz);
    size_t nz = 0;
    for (size_t i = 0; i < tg_gbytes(&Bz); i++) nz += z[i] != 0;
    CHECK(nz == 0, "zero left %zu nonzero bytes", nz);
    free(z);
    /* the upload queued behind some milliseconds of work, so that only the fence keeps the host from
     * overwriting its source before the copy has read it */
    for (size_t i = 0; i < tg_gbytes(&Bz); i++) tg_gpu_host[i] = (char)(i * 7 + 3);
    for (int rep = 0; rep < 50; rep++) tg_gpu->fill_normal(tg_gpu, (float *)Bf.g, n, 0.0f, 1.0f, 1, (uint64_t)rep);
    tg_gpu->upload(tg_gpu, Bz.g, tg_gpu_host, tg_gbytes(&Bz));
    tg_gpu->fence_record(tg_gpu, 1);
    tg_gpu->fence_wait(tg_gpu, 1);
    unsigned char *back = (unsigned char *)malloc(tg_gbytes(&Bz));
    memset(tg_gpu_host, 0, tg_gbytes(&Bz));
    tg_gpu->download(tg_gpu, tg_gpu_host, Bz.g, tg_gbytes(&Bz));
    memcpy(back, tg_gpu_host, tg_gbytes(&Bz));
    size_t bad = 0;
    for (size_t i = 0; i < tg_gbytes(&Bz); i++) bad += back[i] != (unsigned char)(i * 7 + 3);
    CHECK(bad == 0, "upload/download round trip changed %zu bytes", bad);
    free(back);
    tg_end();
}

/* The GELU fusions: run 1 of the GPU uses matmul_forward_gelu / matmul_backward_gelu, run 2 the separate ops,
 * and the two must agree bit for bit (the check every op's two runs get); both against the CPU's ops. */
static void t_matmul_gelu(int N, int C, int OC) {
    int dt = tg_gpu->dtype;
    tg_begin("matmul + GELU fused N=%d C=%d OC=%d (GPU run 1 fused, run 2 separate: same bits)", N, C, OC);
    float *inp = tg_rand((size_t)N * C, 1.0f, 0, dt), *w = tg_rand((size_t)OC * C, 1.0f / sqrtf((float)C), 0, dt);
    float *b = tg_rand((size_t)OC, 1.0f, 0, dt), *dout = tg_rand((size_t)N * OC, 1.0f, 0, dt), *pre = tg_rand((size_t)N * C, 1.5f, 0, dt);
    float *dw0 = tg_rand((size_t)OC * C, 1.0f, 0, dt), *db0 = tg_rand((size_t)OC, 1.0f, 0, dt);
    TgBuf Binp = tg_buf((size_t)N * C, TG_ACT), Bw = tg_buf((size_t)OC * C, TG_ACT), Bb = tg_buf((size_t)OC, TG_ACT);
    TgBuf Bout = tg_buf((size_t)N * OC, TG_ACT), Bact = tg_buf((size_t)N * OC, TG_ACT), Bdout = tg_buf((size_t)N * OC, TG_ACT);
    TgBuf Bpre = tg_buf((size_t)N * C, TG_ACT), Bdinp = tg_buf((size_t)N * C, TG_ACT), Bdw = tg_buf((size_t)OC * C, TG_ACT);
    TgBuf Bdb = tg_buf((size_t)OC, TG_ACT);
    TgOut outs[] = {{"pre", &Bout, tg_tol(1e-4, 1e-2), {0}, 0},       {"act = gelu(pre)", &Bact, tg_tol(1e-4, 1e-2), {0}, 0},
                    {"dinp * gelu'", &Bdinp, tg_tol(1e-4, 1e-2), {0}, 0}, {"dw (+=)", &Bdw, tg_tol(1e-4, 1e-2), {0}, 0},
                    {"dbias (+=)", &Bdb, tg_tol(1e-4, 1e-2), {0}, 0}};
    if (!tg_gpu->matmul_forward_gelu || !tg_gpu->matmul_backward_gelu) {
        CHECK(0, "the CUDA backend has no GELU fusions");
        free(inp); free(w); free(b); free(dout); free(pre); free(dw0); free(db0);
        tg_end();
        return;
    }
    tg_scratch_keep = (size_t)TG_BIAS_GROUPS * OC * sizeof(float);
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Binp, inp); PUT(Bw, w); PUT(Bb, b); PUT(Bdout, dout); PUT(Bpre, pre); PUT(Bdw, dw0); PUT(Bdb, db0);
        POISON(Bout); POISON(Bact); POISON(Bdinp);
        if (rep == 1) {
            be->matmul_forward_gelu(be, PTR(Bout), PTR(Bact), PTR(Binp), PTR(Bw), PTR(Bb), N, C, OC);
            be->matmul_backward_gelu(be, PTR(Bdinp), PTR(Bdw), PTR(Bdb), PTR(Bdout), PTR(Binp), PTR(Bw), PTR(Bpre), N, C, OC);
        } else {
            be->matmul_forward(be, PTR(Bout), PTR(Binp), PTR(Bw), PTR(Bb), N, C, OC);
            be->gelu_forward(be, PTR(Bact), PTR(Bout), (size_t)N * OC);
            be->matmul_backward(be, PTR(Bdinp), PTR(Bdw), PTR(Bdb), PTR(Bdout), PTR(Binp), PTR(Bw), N, C, OC);
            be->gelu_backward(be, PTR(Bdinp), PTR(Bpre), PTR(Bdinp), (size_t)N * C);
        }
        be->sync(be);
        if (rep) tg_grab(outs, 5, rep - 1);
    }
    tg_finish(outs, 5);
    free(inp); free(w); free(b); free(dout); free(pre); free(dw0); free(db0);
    tg_end();
}

/* The residual fusion: run 1 of the GPU uses matmul_forward_residual, run 2 matmul_forward into a temporary
 * and residual_forward, and the two must agree bit for bit; both against the CPU's separate ops. */
static void t_matmul_residual(int N, int C, int OC) {
    int dt = tg_gpu->dtype;
    tg_begin("matmul + residual fused N=%d C=%d OC=%d (GPU run 1 fused, run 2 separate: same bits)", N, C, OC);
    float *inp = tg_rand((size_t)N * C, 1.0f, 0, dt), *w = tg_rand((size_t)OC * C, 1.0f / sqrtf((float)C), 0, dt);
    float *b = tg_rand((size_t)OC, 1.0f, 0, dt), *res = tg_rand((size_t)N * OC, 2.0f, 0, dt);
    TgBuf Binp = tg_buf((size_t)N * C, TG_ACT), Bw = tg_buf((size_t)OC * C, TG_ACT), Bb = tg_buf((size_t)OC, TG_ACT);
    TgBuf Bres = tg_buf((size_t)N * OC, TG_ACT), Btmp = tg_buf((size_t)N * OC, TG_ACT), Bout = tg_buf((size_t)N * OC, TG_ACT);
    TgOut outs[] = {{"out = res + inp . w^T + b", &Bout, tg_tol(1e-4, 1e-2), {0}, 0}};
    if (!tg_gpu->matmul_forward_residual) {
        CHECK(0, "the CUDA backend has no residual fusion");
        free(inp); free(w); free(b); free(res);
        tg_end();
        return;
    }
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Binp, inp); PUT(Bw, w); PUT(Bb, b); PUT(Bres, res);
        POISON(Bout); POISON(Btmp);
        if (rep == 1) {
            be->matmul_forward_residual(be, PTR(Bout), PTR(Binp), PTR(Bw), PTR(Bb), PTR(Bres), N, C, OC);
        } else {
            be->matmul_forward(be, PTR(Btmp), PTR(Binp), PTR(Bw), PTR(Bb), N, C, OC);
            be->residual_forward(be, PTR(Bout), PTR(Bres), PTR(Btmp), (size_t)N * OC);
        }
        be->sync(be);
        if (rep) tg_grab(outs, 1, rep - 1);
    }
    tg_finish(outs, 1);
    free(inp); free(w); free(b); free(res);
    tg_end();
}

/* Decoding's LayerNorm and product: run 1 of the GPU uses layernorm_matmul_forward (gelu: with GELU, out its input),
 * run 2 layernorm_forward then matmul_forward (and gelu_forward), and the two must agree bit for bit; both against
 * the CPU's separate ops. */
static void t_layernorm_matmul(int N, int C, int OC, int gelu, int ln_bias) {
    int dt = tg_gpu->dtype;
    tg_begin("layernorm + matmul%s fused N=%d C=%d OC=%d%s (GPU run 1 fused, run 2 separate: same bits)", gelu ? " + GELU" : "", N, C, OC,
             ln_bias ? "" : ", no LayerNorm bias");
    float *inp = tg_rand((size_t)N * C, 2.0f, 0.5f, dt), *lw = tg_rand((size_t)C, 0.5f, 1, dt), *lb = tg_rand((size_t)C, 0.5f, 0, dt);
    float *w = tg_rand((size_t)OC * C, 1.0f / sqrtf((float)C), 0, dt), *b = tg_rand((size_t)OC, 1.0f, 0, dt);
    TgBuf Binp = tg_buf((size_t)N * C, TG_ACT), Blw = tg_buf((size_t)C, TG_ACT), Blb = tg_buf((size_t)C, TG_ACT), Bln = tg_buf((size_t)N * C, TG_ACT);
    TgBuf Bw = tg_buf((size_t)OC * C, TG_ACT), Bb = tg_buf((size_t)OC, TG_ACT), Bout = tg_buf((size_t)N * OC, TG_ACT);
    TgBuf Bact = tg_buf((size_t)N * OC, TG_ACT), Bstats = tg_buf((size_t)2 * N, TG_F32);
    TgOut outs[] = {{gelu ? "out (GELU's input)" : "out = layernorm(inp) . w^T + b", &Bout, tg_tol(1e-4, 2e-2), {0}, 0},
                    {"act = gelu(out)", &Bact, tg_tol(1e-4, 2e-2), {0}, 0}};
    const int n_outs = gelu ? 2 : 1;
    if (!tg_gpu->layernorm_matmul_forward) {
        CHECK(0, "the CUDA backend has no LayerNorm and product fused");
        free(inp); free(lw); free(lb); free(w); free(b);
        tg_end();
        return;
    }
    for (int rep = 0; rep < 3; rep++) {
        ngpt_backend *be = rep ? tg_gpu : tg_cpu;
        PUT(Binp, inp); PUT(Blw, lw); PUT(Blb, lb); PUT(Bw, w); PUT(Bb, b);
        POISON(Bout); POISON(Bact); POISON(Bln);
        void *lbias = ln_bias ? PTR(Blb) : NULL;
        if (rep == 1) {
            be->layernorm_matmul_forward(be, PTR(Bout), gelu ? PTR(Bact) : NULL, PTR(Bln), PTR(Binp), PTR(Blw), lbias, PTR(Bw), PTR(Bb), N, C, OC);
        } else {
            float *stats = (float *)PTR(Bstats);
            be->layernorm_forward(be, PTR(Bln), stats, stats + N, PTR(Binp), PTR(Blw), lbias, N, C);
            be->matmul_forward(be, PTR(Bout), PTR(Bln), PTR(Bw), PTR(Bb), N, C, OC);
            if (gelu) be->gelu_forward(be, PTR(Bact), PTR(Bout), (size_t)N * OC);
        }
        be->sync(be);
        if (rep) tg_grab(outs, n_outs, rep - 1);
    }
    tg_finish(outs, n_outs);
    free(inp); free(lw); free(lb); free(w); free(b);
    tg_end();
}

/* the error contract: bad arguments are sticky NGPT_ERR_ARG with a message; too little scratch is
 * reported, not overrun; the CUDA scratch fits what nanogpt.c's planner reserves for it */
static void t_contract(void) {
    tg_begin("error contract and scratch sizing");
    tg_gpu->matmul_forward(tg_gpu, tg_gpu_dev, tg_gpu_dev, tg_gpu_dev, NULL, -1, 8, 8);
    CHECK(tg_gpu->status == NGPT_ERR_ARG && tg_gpu->msg[0], "a negative N gave status %d, msg '%s'", tg_gpu->status, tg_gpu->msg);
    char first[512];
    snprintf(first, sizeof first, "%s", tg_gpu->msg);
    tg_gpu->attention_forward(tg_gpu, tg_gpu_dev, (float *)tg_gpu_dev, tg_gpu_dev, 1, 4, 10, 3, NULL);
    CHECK(strcmp(first, tg_gpu->msg) == 0, "the first failure was not kept: '%s' became '%s'", first, tg_gpu->msg);
    printf("    sticky message: %s\n", tg_gpu->msg);
    tg_gpu->status = 0;
    tg_gpu->msg[0] = 0;
    /* scratch of 64 bytes: layernorm_backward must refuse rather than overrun */
    size_t keep = tg_gpu_base;
    tg_gpu->set_scratch(tg_gpu, tg_gpu_dev, 64);
    TgBuf x = tg_buf(64 * 64, TG_ACT), w = tg_buf(64, TG_ACT), mr = tg_buf(64, TG_F32);
    tg_gpu->layernorm_backward(tg_gpu, x.g, w.g, NULL, x.g, x.g, w.g, (float *)mr.g, (float *)mr.g, 64, 64);
    tg_gpu->sync(tg_gpu);
    CHECK(tg_gpu->status == NGPT_ERR_ARG, "layernorm_backward with 64 bytes of scratch gave status %d", tg_gpu->status);
    printf("    small scratch: %s\n", tg_gpu->msg);
    tg_gpu->status = 0;
    tg_gpu->msg[0] = 0;
    tg_gpu->set_scratch(tg_gpu, tg_gpu_dev, keep);
    ngpt_shape shapes[] = {{12, 1024, 768, 12, 12, 50304, 1024}, {1, 64, 96, 2, 2, 128, 64}, {64, 1024, 1600, 25, 48, 50304, 4096},
                           {4, 256, 48, 3, 1, 64, 256}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t mine = tg_gpu->scratch_bytes(tg_gpu, &shapes[i]), planned = cuda_scratch_bytes(&shapes[i], 0);
        CHECK(mine <= planned, "scratch_bytes %zu > the planner's cuda_scratch_bytes %zu for B=%d T=%d C=%d", mine, planned, shapes[i].B,
              shapes[i].T, shapes[i].C);
    }
    tg_end();
}

/* ------------------------------------------------------------------------------------------------------
 * The sweep and main
 * ---------------------------------------------------------------------------------------------------- */

/* decoding's few rows: the forward is a gemv (with NGPT_GEMV=simt, 16-bit rows of 16-byte vectors on gemv_kernel up
 * to its 8 rows, then the tiled kernel) */
static void tg_gemv_sweep(void) {
    static const int gemv_rows[] = {1, 2, 3, 4, 8, 9, 13, 16};
    for (size_t i = 0; i < sizeof gemv_rows / sizeof *gemv_rows; i++) {
        const int n = gemv_rows[i];
        t_matmul(n, 768, 67, 1); /* 16-bit: gemv_tc_kernel (up to 16 rows: 9 on its second 8 of the m16); f32: gemv_kernel up to 8 */
        t_matmul(n, 200, 70, 0); /* C = 200: the last chunk of 32 k holds 8 */
        t_matmul(n, 37, 70, 0);  /* rows that are not 16-byte vectors, shorter than a warp's stride: gemv_kernel up to 8 rows */
    }
    t_matmul(17, 768, 67, 1);     /* just past them all: the tiled kernel */
    t_matmul_gelu(5, 96, 200);    /* the fused ops follow a gemv (gemv_tc_kernel) */
    t_matmul_gelu(12, 96, 200);
    t_matmul_residual(7, 71, 51); /* (gemv_kernel: rows of 71) */
    t_matmul_residual(14, 72, 51); /* (gemv_tc_kernel) */
    /* decoding's LayerNorm and product: 16 bits on gemv_tc_kernel<T, true> (rows 9-16 on its second 8; C = 2048: the
     * LayerNorm kernel's most vectors a lane); f32, 17 rows, rows of 37 and of 2056 as the two ops */
    t_layernorm_matmul(1, 768, 67, 0, 1);
    t_layernorm_matmul(5, 96, 200, 1, 1);
    t_layernorm_matmul(9, 768, 67, 0, 0);
    t_layernorm_matmul(16, 200, 70, 1, 1);
    t_layernorm_matmul(3, 2048, 40, 0, 1);
    t_layernorm_matmul(3, 2056, 40, 1, 1);
    t_layernorm_matmul(17, 96, 50, 0, 1);
    t_layernorm_matmul(4, 37, 20, 1, 1);
    if (!tg_small) {
        t_matmul(3, 768, 50304, 0);  /* the classifier as decoding meets it (gemv_tc_kernel at 16 bits) */
        t_matmul(10, 768, 50304, 0); /* ten samples at once */
    }
}

static void tg_matmul_sweep(void) {
    t_matmul(111, 96, 200, 1); /* N = 37*3: nothing is a multiple of the tiles */
    t_matmul(111, 96, 200, 0);
    t_matmul(33, 70, 50, 1);   /* rows not a multiple of 8 elements: the scalar load path */
    t_matmul(1, 8, 3, 1);
    tg_gemv_sweep();
    t_matmul(300, 40, 24, 1);  /* K = 40: a partial k tile */
    t_matmul(130, 264, 136, 1);
    t_matmul(257, 200, 72, 1); /* K = 200: a full and a partial 64-wide k tile (wgmma), three 128-row tiles */
    t_matmul(2100, 40, 24, 1); /* dw: one tile, K = 2100: split-K, two slices (the second partial) */
    t_matmul(64, 2100, 40, 1); /* forward: K = 2100 splits too: the bias is added by the reduce kernel */
    t_matmul(4100, 33, 20, 1); /* dw: four slices (the last 836 wide), rows of 20 and 33: the scalar loads */
    t_matmul_gelu(111, 96, 200); /* the fused epilogues, at edges that are not multiples of the tiles */
    t_matmul_gelu(33, 71, 51);   /* odd widths: the single-element stores */
    t_matmul_gelu(64, 40, 2100); /* dinp with K = 2100 splits: the reduce kernel applies gelu' as the separate op's rounding */
    t_matmul_gelu(64, 2100, 40); /* the forward splits too: bias and gelu in the reduce */
    t_matmul_residual(111, 96, 200);  /* edges that are not multiples of the tiles */
    t_matmul_residual(33, 71, 51);    /* odd widths: the single-element stores */
    t_matmul_residual(64, 2100, 40);  /* K = 2100 splits: the reduce kernel adds the residual */
    /* whole tiles beside edge ones (rows 0-255, columns 0-511: four 128 x 256 tiles of the TMA kernel, eight
     * 128 x 128 of mma.sync), which both write straight from their accumulators (mm_epilogue_direct), each kind */
    t_matmul(300, 72, 520, 1);       /* the forward with a bias */
    t_matmul(300, 520, 72, 0);       /* the input gradient, no bias */
    t_matmul_gelu(300, 520, 520);    /* GELU in the forward, its derivative in the input gradient */
    t_matmul_residual(300, 72, 520); /* the residual in the forward */
    /* 1100 x 512 outputs: 18 tiles of the TMA kernel on the emulator's 8 SMs, so block 0 takes a whole tile, an
     * edge one, then a whole one, and block 1 two whole ones in a row (its copy engine's stores from the first
     * maybe still reading the boxes the second writes); each kind */
    t_matmul(1100, 64, 512, 1);
    t_matmul_gelu(1100, 512, 512);
    t_matmul_residual(1100, 64, 512);
    /* 1100 x 384: the TMA kernel's tiles 192 wide (tma_tile_n), three boxes each; block 1 takes two whole tiles in
     * a row, the second's first box in the box the first's last was stored from */
    t_matmul(1100, 64, 384, 1);
    t_matmul_gelu(1100, 384, 384);
    /* the weight gradient straight from the accumulators, adding the old values (mm_direct_acc): 512 x 512 with
     * K = 300, 256 wide on the TMA kernel (192 under NGPT_TILE_N, an edge tile beside), 16 mma.sync tiles */
    t_matmul(300, 512, 512, 1);
    /* the weight gradient's bias gradient summed by the TMA kernel (TmColsum) from the tiles of its first column
     * only: 600 x 520 in 15 tiles on the emulator's 8 SMs, so blocks take a tile it sums and one it does not, in
     * either order (block 1: columns 256.. first, then a first-column tile), K = 200 (a partial k tile) */
    t_matmul(200, 520, 600, 1);
    /* split-K slices of whole tiles straight from the accumulators (mm_slice_direct), two slices each: the weight
     * gradient (256 x 512, K = 2100; on the emulator's 8 SMs its 4 tiles on the TMA kernel are stream-K's, each
     * in two pieces: TmStreamK), the input gradient (128 x 512, K = 2100, as the classifier's, whose K is the
     * vocabulary; 192 wide on the TMA kernel, an edge tile staged beside), and the residual projection's forward
     * (the residual build; the reduce kernel adds it) */
    t_matmul(2100, 512, 256, 1);
    /* stream-K on the emulator's 8 SMs: a weight gradient of 3 tiles (104 x 600, K = 2048: 32 k tiles each, 12
     * a block), cut in 3, 4 and 3 pieces; block 2 finishes tile 0 after it starts tile 1; the bias gradient's
     * tile in pieces too, and the last an edge tile (on an H100's 132 SMs: GPT-2's qkv, fc and MLP projection
     * weight gradients below). And a weight gradient of 2 tiles, too few for stream-K: split-K's 4 slices of
     * whole tiles 256 wide (128 x 512, K = 4200) */
    t_matmul(2048, 600, 104, 1);
    t_matmul(4200, 512, 128, 1);
    t_matmul(128, 512, 2100, 0);
    t_matmul_residual(128, 2100, 512);
    if (!tg_small) t_matmul_gelu(2048, 768, 3072); /* GPT-2's MLP */
    if (!tg_small) t_matmul_residual(2048, 3072, 768); /* and its projection back into the residual stream */
    if (!tg_small) {
        t_matmul(2048, 768, 2304, 1);
        t_matmul(2048, 768, 3072, 1);
        t_matmul(2048, 3072, 768, 1);
        t_matmul(8192, 328, 1100, 1); /* the TMA kernel's persistent blocks: several tiles each, phases wrapping mid-tile */
        t_matmul(8192, 256, 128, 1);  /* dw: one tile, K = 8192: eight slices on the TMA kernel, four on the others */
        t_matmul(64, 768, 50304, 0); /* the classifier shape: OC = Vp */
    }
}

/* decoding with the KV cache: one position, and chunks of a prompt (at position 0 the 16-bit ones run on training's
 * attention forward) */
static void tg_decode_sweep(void) {
    t_attention_decode(3, 2, 64, 0, 1, 16);
    t_attention_decode(2, 3, 48, 37, 1, 70);
    t_attention_decode(4, 4, 32, 99, 1, 100);
    t_attention_decode(3, 2, 64, 0, 16, 16); /* a prompt: the whole cache at once */
    t_attention_decode(2, 3, 48, 0, 37, 70); /* head size 48, a chunk of 37 */
    t_attention_decode(2, 3, 48, 37, 5, 70); /* after cached positions */
    t_attention_decode(4, 4, 32, 90, 10, 100);
    t_attention_decode_as(3, 2, 64, 5, 1, 16, 1); /* sampling's graphs: one position, t read when the graph runs */
    t_attention_decode_as(2, 3, 48, 9, 4, 70, 1); /* a chunk recorded at 0: run on the kernel of a position a row, not the prompt's */
    t_graph_recording_fails();
    if (!tg_small) {
        t_attention_decode(8, 12, 64, 700, 1, 1024);
        t_attention_decode(2, 12, 64, 100, 400, 1024);
        t_attention_decode(2, 12, 64, 0, 1024, 1024); /* GPT-2's whole block as a prompt */
        t_attention_decode(3, 12, 64, 0, 300, 1024);
    }
}

static void tg_attention_sweep(void) {
    int S = tg_small;
    /* the long sequences and the small scratch hold the tensor-core kernels' tiles, stages and dS^T scratch to the
     * CPU; f32's SIMT kernels have none of those (a warp a row, every key in turn), and the CUDA emulator runs their
     * per-key shuffles slowly (these cases 100 s on a 2-core VM): there, they are left to the 16-bit runs */
    int tiled = !(tg_emulated && tg_gpu->dtype == NGPT_DTYPE_F32);
    t_attention(2, 2, 1, 64, 0.0f);
    t_attention(2, 3, 65, 64, 0.0f);
    t_attention(2, 3, 65, 64, 0.1f);
    t_attention(1, 2, 77, 48, 0.0f);  /* hs 48: zero-padded to 64 */
    t_attention(1, 3, 50, 20, 0.1f);  /* hs 20: rows not a multiple of 8 elements */
    t_attention(1, 2, 70, 128, 0.0f);
    t_attention(2, 4, 100, 32, 0.1f);
    t_attention(1, 2, 200, 64, 0.1f); /* four key tiles: each double buffer is refilled after use (a missing barrier races) */
    if (tiled) {
        t_attention(1, 2, 520, 64, 0.0f); /* five 128-key tiles: each of the wgmma forward's three stages is refilled */
        t_attention(2, 2, 256, 64, 0.0f); /* two sequences of whole 128-row tiles (the copy engine's boxes end at the sequence) */
        /* 48 work items of each persistent wgmma kernel, six a block on the emulator's 8 SMs (the forward's 3, 3,
         * 2, 2, 1, 1 tiles, dK, dV's 5, 5, 3, 3, 1, 1): the Q buffers (forward) and K, V buffers (dK, dV) each taken
         * three times, the stages' ring and the dS^T boxes going on across items, and an item of one tile between
         * two others, where only a buffer's own barriers keep the producer from refilling it under the item
         * before */
        t_attention(4, 4, 300, 64, 0.0f);
        /* the wgmma backward's dS^T in a scratch of D (3 KB) and 1.5 heads' tiles (6 of 16 KB each): three
         * groups of one head */
        t_attention_scratch(1, 3, 200, 64, 0.0f, 3072 + 9 * 16384);
    }
    t_attention_scratch(2, 2, 65, 64, 0.0f, 2048); /* a scratch of D alone: the mma.sync kernels, and the SIMT ones */
    if (!S) {
        t_attention(1, 4, 256, 64, 0.0f);
        t_attention(2, 12, 256, 64, 0.1f);
        t_attention(2, 4, 256, 32, 0.0f);
        t_attention(1, 2, 256, 128, 0.1f);
        t_attention(1, 12, 1024, 64, 0.0f);
        t_attention(8, 12, 256, 64, 0.0f); /* 192 work items of each persistent kernel: on an H100's or H200's 132 SMs, two a block for 60 */
    }
}

/* With the gradient, 16-byte rows keep the row in shared memory between the passes where it fits (the run with
 * NGPT_LOSS_SMEM=0 holds the other way to these bits); 20,000 columns: several turns of the loads in flight */
static void tg_loss_sweep(void) {
    t_crossentropy(37, 65, 128, 1, 0);
    t_crossentropy(37, 65, 128, 0, 0);
    t_crossentropy(5, 1000, 1024, 1, 0);
    t_crossentropy(6, 20000, 20008, 1, 0);
    t_crossentropy(9, 300, 301, 1, 0); /* rows not 16-byte aligned: the one-element path */
    t_crossentropy(9, 300, 301, 0, 0);
    t_crossentropy(64, 1000, 1024, 0, 1);
    t_crossentropy(64, 300, 301, 0, 1);
    if (!tg_small) t_crossentropy(64, 50257, 50304, 1, 0);
}

static void tg_sweep(void) {
    int S = tg_small;
    t_contract();
    t_fill_cast_zero(S ? 4099 : 1000003);
    t_elementwise(S ? 4099 : (1u << 20) + 7);
    t_encoder(2, 37, 96, 50, 64);
    t_encoder(3, 5, 40, 3, 64); /* few distinct tokens: long buckets */
    /* rows of 90 values: one a lane in every dtype, three warps a bucket; buckets of about 40 rows (two windows of
     * 32 positions, turns of 8) */
    t_encoder(4, 20, 90, 2, 64);
    if (!S) t_encoder(4, 1024, 768, 50257, 50304);
    t_layernorm(111, 96, 1);
    t_layernorm(111, 96, 0);
    t_layernorm(300, 100, 1);
    t_layernorm(3, 1600, 1);
    /* the backward's register kernel at each of its widths, 16-byte vectors a lane (16-bit, f32): C = 96 one
     * (12 or 24 lanes of 32 in use), 480 two or four, 768 three or six, 1600 eight (seven in use) or the
     * fallback; C = 100 and 62 the fallback, one element at a time, in every dtype */
    t_layernorm(50, 480, 0);
    t_layernorm(70, 768, 1);
    /* more rows than the backward's blocks x 8 warps (at most 512 x 8): a warp adds many rows' dw/db terms */
    t_layernorm(4500, 64, 1);
    t_layernorm(4500, 62, 0);
    if (!S) { t_layernorm(2048, 768, 1); t_layernorm(1024, 1600, 0); }
    tg_loss_sweep();
    t_norm_sq(1);
    t_norm_sq(1000);
    t_norm_sq(S ? 100003 : 3000017);
    t_adamw(S ? 4099 : 100003, NGPT_DTYPE_F32);
    t_adamw(S ? 4099 : 100003, NGPT_DTYPE_BF16);
    t_adamw_bf16_decay(S ? 8192 : 65536, 20);
    t_adamw_bf16_decay(S ? 8192 : 65536, S ? 500 : 2000);
    tg_decode_sweep();
    tg_attention_sweep(); /* the long sweeps last (--fail-fast) */
    tg_matmul_sweep();
}

/* The environment switches as README's table "Kernel switches" gives them: with each value it lists, and with none
 * (set but empty), the backend is made; with a value it does not list (each's first one here: NGPT_MATMUL=wgmma is
 * the kernel session 56 removed), ngpt_cuda_backend_create and ngpt_cuda_describe refuse it, naming the switch, the
 * value and the values it takes. Each switch is set alone, and left as it was. */
static void tg_env_switches(void) {
    static const struct {
        const char *name, *bad, *good[9];
    } sw[] = {
        {"NGPT_MATMUL", "wgmma", {"mma"}},
        {"NGPT_ATTENTION", "wgmma", {"mma"}},
        {"NGPT_EPILOGUE", "direct", {"staged"}},
        {"NGPT_TILE_N", "128", {"192", "256"}},
        {"NGPT_TILE_ORDER", "n", {"m"}},
        {"NGPT_PINGPONG", "all", {"0", "1", "gelu"}},
        {"NGPT_SPLITK_MAX", "9", {"1", "2", "3", "4", "5", "6", "7", "8"}},
        {"NGPT_ATTN_TURNS", "off", {"0", "1"}},
        {"NGPT_ATTN_PERSISTENT", "no", {"0", "1"}},
        {"NGPT_FUSE_GELU", "false", {"0", "1"}},
        {"NGPT_LOSS_SMEM", "00", {"0", "1"}},
        {"NGPT_DBIAS", "fused", {"separate"}},
        {"NGPT_STREAMK", "2", {"0", "1"}},
        {"NGPT_GEMV", "tc", {"simt"}},
        {"NGPT_PDL", "on", {"0", "1"}},
        {"NGPT_CUDA_SYNC", "yes", {"0", "1"}},
    };
    check_case_name = "environment switches: the values README lists taken, others refused by name";
    check_case_failed = 0;
    char err[512], desc[512];
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++) {
        const char *was = getenv(sw[i].name);
        char *saved = was ? strdup(was) : NULL;
        for (int k = -1; k < 9; k++) { /* -1: the bad value; then "" and each good one */
            const char *value = k < 0 ? sw[i].bad : k == 0 ? "" : sw[i].good[k - 1];
            if (!value) break;
            setenv(sw[i].name, value, 1);
            ngpt_backend *be = NULL;
            err[0] = desc[0] = 0;
            int rc = ngpt_cuda_backend_create(&be, NGPT_DTYPE_F32, err, sizeof err), drc = ngpt_cuda_describe(desc, sizeof desc);
            if (be) be->destroy(be);
            if (k < 0) {
                char named[96];
                snprintf(named, sizeof named, "%s=%s is not a value", sw[i].name, value);
                CHECK(rc == NGPT_ERR_ARG && strstr(err, named) && strstr(err, sw[i].good[0]), "%s=%s: create returned %d: %s", sw[i].name, value, rc, err);
                CHECK(drc == NGPT_ERR_ARG && strstr(desc, named), "%s=%s: describe returned %d: %s", sw[i].name, value, drc, desc);
            } else {
                CHECK(rc == NGPT_OK, "%s=%s: create returned %d: %s", sw[i].name, value, rc, err);
                CHECK(drc == NGPT_OK, "%s=%s: describe returned %d: %s", sw[i].name, value, drc, desc);
            }
        }
        if (saved) setenv(sw[i].name, saved, 1);
        else unsetenv(sw[i].name);
        free(saved);
    }
    if (check_case_failed) check_failed++;
    else { check_passed++; printf("ok %s\n", check_case_name); }
}

int main(int argc, char **argv) {
    setenv("CUDA_MODULE_LOADING", "EAGER", 0); /* before the first CUDA call: load every kernel now */
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) tg_small = 1;
        else if (!strcmp(argv[i], "--matmul-only")) tg_matmul_only = 1;
        else if (!strcmp(argv[i], "--attention-only")) tg_attention_only = 1;
        else if (!strcmp(argv[i], "--decode-only")) tg_decode_only = 1;
        else if (!strcmp(argv[i], "--default-kernels")) tg_default_kernels = 1;
        else if (!strcmp(argv[i], "--skip-alloc-check")) tg_skip_alloc_check = 1; /* under compute-sanitizer, which allocates */
        else if (!strcmp(argv[i], "--fail-fast")) tg_fail_fast = 1;
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--runs-with") && i + 1 < argc) tg_runs_with = argv[++i];
        else if (!strcmp(argv[i], "--without") && i + 1 < argc) tg_without = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--small] [--skip-alloc-check] [--fail-fast] [--dtype f32|bf16|f16[,...]] [--matmul-only | --attention-only | "
                    "--decode-only | --default-kernels | --runs-with NGPT_VARIABLE] [--without NGPT_VARIABLE]\n",
                    argv[0]);
            return 2;
        }
    }
    char why[512], desc[512], err[512];
    check_case_name = "cuda available";
    check_case_failed = 0;
    if (!ngpt_cuda_available(why, sizeof why)) {
        CHECK(0, "%s", why);
        check_failed++;
        return check_summary();
    }
    ngpt_cuda_describe(desc, sizeof desc);
    printf("%s\n", desc);
    const char *sm = strstr(desc, "sm_");
    tg_cc = sm ? atoi(sm + 3) : 0;
    tg_emulated = strstr(desc, "CUDA emulator") != NULL;
    /* the planner keeps room for the wgmma attention's dS^T by ngpt_cuda_wgmma_attention, the description says the
     * attention kernels: both from the helpers the backend chooses with (tma_matmul_on, wgmma_attention_choice), here
     * seen to agree on this device and under this run's NGPT_MATMUL and NGPT_ATTENTION */
    check_case_name = "planner's attention choice";
    check_case_failed = 0;
    CHECK(ngpt_cuda_wgmma_attention() == (strstr(desc, "attention wgmma at head size 64") != NULL), "ngpt_cuda_wgmma_attention() %d for: %s",
          ngpt_cuda_wgmma_attention(), desc);
    /* and each override turns both off (the planner then reserves no dS^T); the emulator's sm_90, which has the
     * TMA matmul, runs them when nothing overrides */
    {
        const char *vars[2] = {"NGPT_ATTENTION", "NGPT_MATMUL"}, *overrides[2][2] = {{"NGPT_ATTENTION", "mma"}, {"NGPT_MATMUL", "mma"}};
        char *saved[2];
        int was_set[2];
        for (int v = 0; v < 2; v++) {
            const char *e = getenv(vars[v]);
            was_set[v] = e != NULL;
            saved[v] = strdup(e ? e : "");
        }
        if (tg_emulated && tg_cc == 90 && !was_set[0] && !was_set[1])
            CHECK(ngpt_cuda_wgmma_attention() == 1, "the emulated sm_90 with no override: ngpt_cuda_wgmma_attention() is 0 (%s)", desc);
        for (int o = 0; o < 2; o++) {
            for (int v = 0; v < 2; v++) unsetenv(vars[v]);
            setenv(overrides[o][0], overrides[o][1], 1);
            char with[512];
            ngpt_cuda_describe(with, sizeof with);
            CHECK(ngpt_cuda_wgmma_attention() == 0 && strstr(with, "attention mma.sync"), "%s=%s: ngpt_cuda_wgmma_attention() %d for: %s",
                  overrides[o][0], overrides[o][1], ngpt_cuda_wgmma_attention(), with);
            /* two blocks of its dK, dV kernel at head size 64 an SM on every GPU it runs on: 64 KiB of shared memory
             * an SM hold two in sm_75's layout, 100 KiB or more in the others', and 255 registers a thread would */
            const char *mma = strstr(with, "attention mma.sync, ");
            CHECK(mma && atoi(mma + strlen("attention mma.sync, ")) >= 2, "%s=%s: not two mma.sync attention blocks an SM: %s", overrides[o][0],
                  overrides[o][1], with);
        }
        for (int v = 0; v < 2; v++) {
            if (was_set[v] && saved[v]) setenv(vars[v], saved[v], 1);
            else unsetenv(vars[v]);
            free(saved[v]);
        }
    }
    if (check_case_failed) check_failed++;
    else { check_passed++; printf("ok %s\n", check_case_name); }

    /* kernels launched as programmatic dependents from compute capability 9.0 on, unless NGPT_PDL=0 (on the emulated
     * sm_90 too: there its checks, that each kernel waits for the one before it, have launches to look at) */
    check_case_name = "programmatic launches where the device has them";
    check_case_failed = 0;
    {
        const char *pdl = getenv("NGPT_PDL");
        const int want = tg_cc >= 90 && !(pdl && !strcmp(pdl, "0"));
        CHECK(strstr(desc, want ? "programmatic launches on" : "programmatic launches off") != NULL, "want them %s (NGPT_PDL %s): %s",
              want ? "on" : "off", pdl ? pdl : "unset", desc);
    }
    if (check_case_failed) check_failed++;
    else { check_passed++; printf("ok %s\n", check_case_name); }

    tg_env_switches();

    if (ngpt_cpu_backend_create(&tg_cpu, 0, err, sizeof err)) { printf("FAIL cpu backend: %s\n", err); return 1; }
    ngpt_shape shape = {16, 1024, 1600, 25, 1, 50304, 1024};
    tg_cpu_cap = tg_small ? ((size_t)256 << 20) : ((size_t)3 << 30);
    void *cdev = NULL, *chost = NULL;
    if (tg_cpu->arena_alloc(tg_cpu, tg_cpu_cap, &cdev, 4096, &chost)) { printf("FAIL cpu arena: %s\n", tg_cpu->msg); return 1; }
    tg_cpu_dev = (char *)cdev;
    size_t cs = tg_cpu->scratch_bytes(tg_cpu, &shape);
    tg_cpu->set_scratch(tg_cpu, tg_cpu_dev, cs);
    tg_cpu_base = ALIGN_UP(cs, 256);

    /* Each dtype's whole sweep; where 16-bit matmuls run on the TMA wgmma kernel (sm_90a), the matmuls and attention
     * once more on mma.sync (NGPT_MATMUL=mma, with the mma.sync attention, where the default is the wgmma one at
     * hs = 64), so every kernel is held to the CPU; the 16-bit matmuls once more with NGPT_EPILOGUE=staged (whole
     * tiles through the staged epilogue, where the default writes them from the accumulators), and on the TMA kernel
     * with NGPT_TILE_N=192 (every product in tiles 192 wide, where the default picks per product) and
     * with NGPT_PINGPONG=1 (every product on the ping-pong kernel, its warpgroups on tiles 64 x 256 of their own),
     * each held to the default run's bits (in bf16 the staged run's tiles also go down the rows of a column,
     * NGPT_TILE_ORDER=m, where the default walks along the columns of a row wherever there are more rows of
     * tiles); and in bf16 with NGPT_SPLITK_MAX=1 (no product split along K, which
     * each case checks in the scratch: tg_scratch_changed; the long-K cases whole, the weight gradients' tiles
     * accumulating straight from the accumulators), against the CPU alone (splitting changes the order of the
     * sums); where attention runs on the wgmma kernels, the attention sweep once more in bf16 with
     * NGPT_ATTN_TURNS=0 (the warpgroups issue without taking turns) and with NGPT_ATTN_PERSISTENT=0 (the forward,
     * dK, dV and dQ kernels a block a work item, where the default walks them with one block an SM), each held to
     * the default run's bits; and the loss
     * sweep in bf16 with NGPT_LOSS_SMEM=0 (each row read from global memory in both passes), held to the default
     * run's bits too; and the gemv cases in bf16 and f16 with NGPT_GEMV=simt (the SIMT gemv and the tiled kernel
     * where the default takes the tensor-core gemv; test/gpu.sh's sampling bench compares the two), against the CPU. */
    int tma = strstr(desc, "matmul wgmma+tma") != NULL;
    int wgmma_attention = strstr(desc, "attention wgmma") != NULL;
    struct { int dtype; const char *env, *value, *env2, *value2; } runs[] = {
        {NGPT_DTYPE_F32, NULL, NULL, NULL, NULL},
        {NGPT_DTYPE_BF16, NULL, NULL, NULL, NULL},
        {NGPT_DTYPE_F16, NULL, NULL, NULL, NULL},
        /* the runs with a knob, the newest first: a sweep cut short (test/gpu.sh's GPU_SH_OPS_S) loses the oldest */
        {NGPT_DTYPE_BF16, "NGPT_GEMV", "simt", NULL, NULL},
        {NGPT_DTYPE_F16, "NGPT_GEMV", "simt", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_LOSS_SMEM", "0", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_ATTN_PERSISTENT", "0", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_PINGPONG", "1", NULL, NULL},
        {NGPT_DTYPE_F16, "NGPT_PINGPONG", "1", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_ATTN_TURNS", "0", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_SPLITK_MAX", "1", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_TILE_N", "192", NULL, NULL},
        {NGPT_DTYPE_F16, "NGPT_TILE_N", "192", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_EPILOGUE", "staged", "NGPT_TILE_ORDER", "m"},
        {NGPT_DTYPE_F16, "NGPT_EPILOGUE", "staged", NULL, NULL},
        {NGPT_DTYPE_BF16, "NGPT_MATMUL", "mma", NULL, NULL},
        {NGPT_DTYPE_F16, "NGPT_MATMUL", "mma", NULL, NULL}};
    for (int k = 0; k < (int)(sizeof runs / sizeof runs[0]); k++) {
        int dt = runs[k].dtype, narrow = runs[k].env && !strcmp(runs[k].env, "NGPT_TILE_N");
        int pingpong = runs[k].env && !strcmp(runs[k].env, "NGPT_PINGPONG");
        int unsplit = runs[k].env && !strcmp(runs[k].env, "NGPT_SPLITK_MAX");
        int staged = narrow || pingpong || (runs[k].env && !strcmp(runs[k].env, "NGPT_EPILOGUE")); /* a matmul run held to the default's bits */
        int attn_variant = runs[k].env && !strncmp(runs[k].env, "NGPT_ATTN_", 10); /* an attention run held to the default's bits */
        int uncached = runs[k].env && !strcmp(runs[k].env, "NGPT_LOSS_SMEM");      /* a loss run held to the default's bits */
        int gemv_simt = runs[k].env && !strcmp(runs[k].env, "NGPT_GEMV");          /* the gemv cases, against the CPU */
        const int on_mma = runs[k].env && !strcmp(runs[k].env, "NGPT_MATMUL"); /* NGPT_MATMUL=mma: mma.sync beside the TMA kernel */
        if (((on_mma || narrow || pingpong) && !tma) ||
            (attn_variant && !wgmma_attention) || (runs[k].env && dt == NGPT_DTYPE_BF16 && tg_cc && tg_cc < 80))
            continue; /* mma.sync again only where it is not the default; tiles 192 wide and the ping-pong kernel only where the
                       * TMA kernel runs; turns and persistence only where attention runs on wgmma; bf16's refusal below sm_80 checked once */
        if ((only && !tg_listed(only, tg_dtname(dt))) || ((tg_matmul_only || tg_attention_only || tg_decode_only || tg_default_kernels) && runs[k].env))
            continue; /* --matmul-only, --attention-only, --decode-only, --default-kernels: the chosen kernels alone */
        if (tg_runs_with && !((runs[k].env && !strcmp(runs[k].env, tg_runs_with)) || (runs[k].env2 && !strcmp(runs[k].env2, tg_runs_with))))
            continue; /* --runs-with: those runs alone (a mutant only they catch, without the sweeps before them) */
        if (tg_without && runs[k].env && !strcmp(runs[k].env, tg_without)) continue; /* --without: not those */
        tg_bits_mode = staged || attn_variant || uncached ? TG_BITS_MATCH : dt != NGPT_DTYPE_F32 && !runs[k].env ? TG_BITS_KEEP : TG_BITS_OFF;
        tg_bits_matched = 0;
        tg_gpu = NULL;
        const char *envs[2] = {runs[k].env, runs[k].env2}, *values[2] = {runs[k].value, runs[k].value2};
        char saved[2][32];
        int had[2] = {0, 0};
        for (int e = 0; e < 2 && envs[e]; e++) {
            const char *user_choice = getenv(envs[e]);
            had[e] = user_choice != NULL;
            snprintf(saved[e], sizeof saved[e], "%s", user_choice ? user_choice : "");
            setenv(envs[e], values[e], 1);
        }
        int rc = ngpt_cuda_backend_create(&tg_gpu, dt, err, sizeof err);
        for (int e = 0; e < 2 && envs[e]; e++) {
            if (had[e]) setenv(envs[e], saved[e], 1);
            else unsetenv(envs[e]);
        }
        if (dt == NGPT_DTYPE_BF16 && tg_cc && tg_cc < 80) {
            check_case_name = "bf16 refused below sm_80";
            check_case_failed = 0;
            CHECK(rc == NGPT_ERR_DEVICE, "bf16 on sm_%d: create returned %d", tg_cc, rc);
            if (check_case_failed) check_failed++;
            else { check_passed++; printf("ok bf16 refused below sm_80: %s\n", err); }
            if (!rc) tg_gpu->destroy(tg_gpu);
            tg_gpu = NULL;
            continue;
        }
        if (rc) {
            printf("FAIL create cuda backend %s: %s\n", tg_dtname(dt), err);
            check_failed++;
            continue;
        }
        tg_gpu_cap = tg_small ? ((size_t)256 << 20) : ((size_t)2 << 30);
        tg_host_cap = tg_small ? ((size_t)64 << 20) : ((size_t)512 << 20);
        void *gdev = NULL, *ghost = NULL;
        if (tg_gpu->arena_alloc(tg_gpu, tg_gpu_cap, &gdev, tg_host_cap, &ghost)) {
            printf("FAIL cuda arena %s: %s\n", tg_dtname(dt), tg_gpu->msg);
            check_failed++;
            tg_gpu->destroy(tg_gpu);
            continue;
        }
        tg_gpu_dev = (char *)gdev;
        tg_gpu_host = (char *)ghost;
        size_t gs = tg_gpu->scratch_bytes(tg_gpu, &shape);
        if (!tg_small && gs < ((size_t)64 << 20)) gs = (size_t)64 << 20; /* room for the big shapes to split along K */
        tg_gpu->set_scratch(tg_gpu, tg_gpu_dev, gs);
        tg_gpu_base = ALIGN_UP(gs, 256);
        tg_scratch_size = gs;
        tg_unsplit = unsplit;
        printf("== %s%s%s%s%s%s%s%s%s: device arena %.0f MiB, scratch %.1f MiB\n", tg_dtname(dt),
               runs[k].env ? (attn_variant ? ", attention with " : uncached ? ", loss with " : ", matmuls with ") : "", runs[k].env ? runs[k].env : "", runs[k].env ? "=" : "",
               runs[k].env ? runs[k].value : "", runs[k].env2 ? " " : "", runs[k].env2 ? runs[k].env2 : "", runs[k].env2 ? "=" : "",
               runs[k].env2 ? runs[k].value2 : "", tg_gpu_cap / MiB, gs / MiB);
        size_t free0 = 0, free1 = 0, total = 0;
        long calls0 = cuda_alloc_calls;
        ngpt_cuda_mem_info(&free0, &total, err, sizeof err);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (tg_matmul_only) tg_matmul_sweep();
        else if (tg_attention_only) tg_attention_sweep();
        else if (tg_decode_only) tg_decode_sweep();
        else if (staged || unsplit) tg_matmul_sweep();
        else if (attn_variant) tg_attention_sweep();
        else if (uncached) tg_loss_sweep();
        else if (gemv_simt) tg_gemv_sweep();
        else if (runs[k].env) { tg_attention_sweep(); tg_matmul_sweep(); } /* NGPT_MATMUL=mma also runs attention on mma.sync */
        else tg_sweep();
        if (staged || attn_variant || uncached) {
            tg_begin(uncached ? "NGPT_LOSS_SMEM=0: the loss's bits are the default run's"
                     : attn_variant && !strcmp(runs[k].env, "NGPT_ATTN_TURNS") ? "NGPT_ATTN_TURNS=0: the attention's bits are the default run's"
                     : attn_variant ? "NGPT_ATTN_PERSISTENT=0: the attention's bits are the default run's"
                     : narrow ? "NGPT_TILE_N=192: the matmuls' bits are the default run's"
                     : pingpong ? "NGPT_PINGPONG=1: the matmuls' bits are the default run's"
                     : runs[k].env2 ? "NGPT_EPILOGUE=staged NGPT_TILE_ORDER=m: the matmuls' bits are the default run's"
                                    : "NGPT_EPILOGUE=staged: the matmuls' bits are the default run's");
            printf("    %d outputs held to the default run's bits\n", tg_bits_matched);
            CHECK(tg_bits_matched >= (uncached ? 16 : 20), "only %d outputs matched a case of the default run (was it run first?)", tg_bits_matched);
            tg_end();
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ngpt_cuda_mem_info(&free1, &total, err, sizeof err);
        printf("    %s sweep: %.1f s\n", tg_dtname(dt), (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        if (!tg_skip_alloc_check) {
            tg_begin("no device allocation during the sweep");
            printf("    free device memory: %zu bytes before the sweep, %zu after\n", free0, free1);
            long calls = cuda_alloc_calls - calls0;
            CHECK(calls == 0, "%ld CUDA allocation calls during the op sweep", calls);
            /* free memory is device-wide: it also catches what the runtime allocates by itself (local memory grown
             * for a kernel), and anything another process on the GPU does */
            CHECK(free0 == free1, "free device memory changed by %lld bytes during the op sweep%s", (long long)free1 - (long long)free0,
                  calls ? "" : ", with no allocation call of this process: the CUDA runtime allocated by itself, or another process is "
                               "using this GPU (run the GPU checks with the GPU to themselves)");
            tg_end();
        }
        tg_unsplit = 0;
        tg_gpu->destroy(tg_gpu);
        tg_gpu = NULL;
    }
    tg_cpu->destroy(tg_cpu);
    return check_summary();
}
