/* nanogpt.c - everything of nanogpt that is not a GPU kernel, in one translation unit.
 *
 * Sections, in dependency order: utilities, thread pool, configuration, model shape, memory plan, CPU
 * backend, model graph, optimizer, data, trainer, command line. The public API is declared in nanogpt.h;
 * everything else is static. Build with ./build.sh; define NGPT_NO_MAIN to embed this file or test it.
 *
 * Dimension letters: B batch (sequences in a micro-batch), T time, C channels, L layers, NH heads,
 * hs head size (C/NH), V vocabulary, Vp vocabulary padded to a multiple of 64, N rows (B*T or a chunk).
 */
#ifndef _GNU_SOURCE /* a build system may define it for every file */
#define _GNU_SOURCE
#endif
#include "nanogpt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#if defined(__FMA__) && defined(__AVX__)
#include <immintrin.h>
#endif

/* marks what only the command line (and the tests) call, so that the library build (NGPT_NO_MAIN) does not
 * warn that it is unused */
#define CLI_USED __attribute__((unused))

/* ======================================================================================================
 * Utilities
 * ==================================================================================================== */

#define NGPT_ERRLEN 1024
#define ALIGN_UP(x, a) (((x) + (size_t)(a) - 1) / (size_t)(a) * (size_t)(a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) MIN(MAX(x, lo), hi)
#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

/* the first bytes of the binary files nanogpt reads (their sections say more), and of llm.c's tokenizer file */
#define LLMC_MAGIC 20240520           /* llm.c token shards */
#define LLMC_MODEL_MAGIC 20240326     /* llm.c model files */
#define LLMC_TOKENIZER_MAGIC 20240328 /* llm.c's gpt2_tokenizer.bin (ngpt_tokenizer_load_llmc) */
#define LLMC_DEBUG_MAGIC 20240327     /* llm.c's debug state (gpt2_124M_debug_state.bin), not read either */
#define LLMC_STATE_MAGIC 20240527     /* llm.c's optimizer state (state_00005000_00000.bin), not read either */
#define LLMC_LLAMA3_MAGIC 20240801    /* llm.c's Llama 3 token shards (uint32 tokens), not read */
#define CKPT_MAGIC "ngptckpt"         /* nanogpt's own checkpoints, which are not pretrained weights */

const char *ngpt_status_name(int status) {
    switch (status) {
    case NGPT_OK: return "ok";
    case NGPT_ERR_ARG: return "bad argument";
    case NGPT_ERR_IO: return "i/o error";
    case NGPT_ERR_FORMAT: return "bad file format";
    case NGPT_ERR_NOMEM: return "out of memory budget";
    case NGPT_ERR_DEVICE: return "device error";
    case NGPT_ERR_NUMERIC: return "non-finite values";
    case NGPT_ERR_STATE: return "bad state";
    case NGPT_ERR_INTERRUPTED: return "interrupted";
    default: return "unknown status";
    }
}

/* Formats a message into err (when err is not NULL) and returns code: `return fail(err, n, CODE, ...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

CLI_USED static const char *fmt_flops(char *buf, size_t n, double flops_per_second) {
    if (flops_per_second >= 1e12) snprintf(buf, n, "%.1f TFLOP/s", flops_per_second / 1e12);
    else snprintf(buf, n, "%.1f GFLOP/s", flops_per_second / 1e9);
    return buf;
}
/* "1h05m", "3m20s", "42s" (in doubles: an estimate of years does not overflow an int) */
static const char *fmt_duration(char *buf, size_t n, double s) {
    if (s >= 3600) snprintf(buf, n, "%.0fh%02.0fm", floor(s / 3600), fmod(floor(s / 60), 60));
    else if (s >= 60) snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(floor(s), 60));
    else snprintf(buf, n, "%.0fs", s);
    return buf;
}
/* A parameter count as nanoGPT prints it, "124.44M", or whole below 10,000 (which would read "0.00M") */
static const char *fmt_params(char *buf, size_t n, double count) {
    if (count >= 1e4) snprintf(buf, n, "%.2fM", count / 1e6);
    else snprintf(buf, n, "%.0f", count);
    return buf;
}
/* Human-readable bytes: "1.23 GiB". Writes into buf and returns it. */
static const char *fmt_bytes(char *buf, size_t n, double bytes) {
    if (bytes >= GiB) snprintf(buf, n, "%.2f GiB", bytes / GiB);
    else if (bytes >= MiB) snprintf(buf, n, "%.1f MiB", bytes / MiB);
    else if (bytes >= 1024.0) snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, n, "%.0f B", bytes);
    return buf;
}

/* need and budget as fmt_bytes writes them, or in MiB (else bytes) where those would read the same: "needs 2.08
 * GiB and the budget is 2.08 GiB" reads as if it fit */
static void fmt_need_and_budget(char *need_s, char *budget_s, size_t n, double need, double budget) {
    fmt_bytes(need_s, n, need);
    fmt_bytes(budget_s, n, budget);
    if (strcmp(need_s, budget_s) || need == budget) return;
    snprintf(need_s, n, "%.1f MiB", need / MiB);
    snprintf(budget_s, n, "%.1f MiB", budget / MiB);
    if (strcmp(need_s, budget_s)) return;
    snprintf(need_s, n, "%.0f B", need);
    snprintf(budget_s, n, "%.0f B", budget);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* NGPT_OK when path is a regular file, or names nothing stat can see (opening it then says why); else an error
 * naming what it is, before anything opens it: a pipe would block the open until a writer came, a device would
 * never end */
static int regular_or_missing(const char *path, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) || S_ISREG(st.st_mode)) return NGPT_OK;
    return fail(err, errlen, NGPT_ERR_IO, "%s %s is %s, not a regular file", what, path,
                S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a pipe" : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
}

/* Where a save that renames a new file over path writes (*file): path itself, or the file a symbolic link there
 * names, so that the link is kept (as export does). An error (what, then the path) when that is no regular file
 * and not missing: renamed over, a folder would fail late and a pipe or device (root's /dev/null) be replaced;
 * or when the link names nothing that can be made. target holds PATH_MAX bytes. */
static int save_target(const char *path, const char *what, char *target, const char **file, char *err, size_t errlen) {
    struct stat st;
    *file = path;
    if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
        if (!realpath(path, target))
            return fail(err, errlen, NGPT_ERR_IO, "%s %s is a symbolic link to nothing that can be written (%s)", what, path, strerror(errno));
        *file = target;
    }
    return regular_or_missing(*file, what, err, errlen);
}

/* The units parse_bytes reads, for error messages. */
#define BYTE_UNITS "B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024)"

/* Parses "2.68GiB", "512MiB", "3GB", "1e9B" into bytes. A number needs a unit (is "2.68" 2.68 GiB or 3
 * bytes?), except 0 and, with bare_bytes, any number (the bytes checkpoints stored before they wrote a
 * unit). Returns 0 on success. */
static int parse_bytes(const char *s, int bare_bytes, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    if (!*end && v != 0 && !bare_bytes) return -1;
    if (!*end || !strcasecmp(end, "b")) mul = 1;
    else if (!strcasecmp(end, "k") || !strcasecmp(end, "kib")) mul = 1024.0;
    else if (!strcasecmp(end, "kb")) mul = 1e3;
    else if (!strcasecmp(end, "m") || !strcasecmp(end, "mib")) mul = MiB;
    else if (!strcasecmp(end, "mb")) mul = 1e6;
    else if (!strcasecmp(end, "g") || !strcasecmp(end, "gib")) mul = GiB;
    else if (!strcasecmp(end, "gb")) mul = 1e9;
    else if (!strcasecmp(end, "t") || !strcasecmp(end, "tib")) mul = GiB * 1024.0;
    else if (!strcasecmp(end, "tb")) mul = 1e12;
    else return -1;
    *out = v * mul;
    return 0;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, u;
    if (exp == 0) {
        if (!man) u = sign;
        else { /* subnormal */
            exp = 127 - 15 + 1;
            while (!(man & 1024)) { man <<= 1; exp--; }
            u = sign | exp << 23 | (man & 1023) << 13;
        }
    } else if (exp == 31) u = sign | 0x7F800000u | man << 13;
    else u = sign | (exp + 127 - 15) << 23 | man << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Box-Muller on the shared counter-based hash: the same draws on every backend (the GPU's logf/cosf may
 * round the last bits differently). */
static float normal_at(uint64_t seed, uint64_t stream, uint64_t i) {
    float u1 = (float)((ngpt_hash(seed, stream, 2 * i) >> 8) + 1) * (1.0f / 16777216.0f);
    float u2 = (float)(ngpt_hash(seed, stream, 2 * i + 1) >> 8) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* A sequential generator for host-side choices (data windows): a counter into the shared hash, so its
 * whole state is (seed, stream, counter) and a run can be resumed exactly. */
typedef struct {
    uint64_t seed, stream, counter;
} Rng;

static uint64_t rng_next(Rng *r) {
    uint64_t hi = ngpt_hash(r->seed, r->stream, r->counter++);
    uint64_t lo = ngpt_hash(r->seed, r->stream, r->counter++);
    return hi << 32 | lo;
}

/* uniform integer in [0, n), n > 0, without modulo bias */
static uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = rng_next(r);
        if (x < limit) return x % n;
    }
}

/* ======================================================================================================
 * Thread pool: persistent workers that spin briefly, then sleep. pool_run(fn, arg) runs fn(arg, i, n)
 * for i in [0, n) on n threads (the caller is thread 0) and returns when all are done. Nothing is
 * allocated after pool_init.
 * ==================================================================================================== */

#define POOL_MAX_THREADS 256
typedef void (*pool_fn)(void *arg, int ithread, int nthreads);

typedef struct Pool {
    int nthreads;
    pthread_t threads[POOL_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t wake;
    _Atomic unsigned long generation; /* bumped once per pool_run */
    _Atomic int remaining;            /* workers still running the current job */
    _Atomic int quit;
    int sleepers;                     /* workers blocked on `wake` (under mu) */
    pool_fn fn;
    void *arg;
} Pool;

typedef struct {
    Pool *pool;
    int index;
} PoolWorkerArg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* How long a thread spins for the next job (worker) or for the workers (caller) before it sleeps or yields,
 * by the clock: a pause lasts 10 to 150 cycles depending on the processor. Long spins cost dearly on a
 * virtual machine whose host is busy: a vCPU spinning on pause is exited and descheduled by the hypervisor
 * (pause-loop exiting): on a busy host the recipe's step took 150-210 ms spinning 20,000 pauses and 85-96 ms
 * spinning 5-20 us (2 vCPUs, 2026-11-21, docs/performance.md). */
#ifndef POOL_SPIN_NS
#define POOL_SPIN_NS 20000
#endif
static inline int64_t pool_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *pool_worker(void *p) {
    PoolWorkerArg *wa = (PoolWorkerArg *)p;
    Pool *pool = wa->pool;
    int index = wa->index;
    unsigned long seen = 0;
    for (;;) {
        unsigned long gen;
        int spins = 0;
        int64_t spin_until = pool_clock_ns() + POOL_SPIN_NS;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (atomic_load(&pool->quit)) return NULL;
            if ((++spins & 31) || pool_clock_ns() < spin_until) { cpu_relax(); continue; }
            pthread_mutex_lock(&pool->mu);
            pool->sleepers++;
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pool->sleepers--;
            pthread_mutex_unlock(&pool->mu);
            spins = 0;
            spin_until = pool_clock_ns() + POOL_SPIN_NS;
        }
        seen = gen;
        if (atomic_load(&pool->quit)) return NULL;
        pool->fn(pool->arg, index, pool->nthreads);
        atomic_fetch_sub_explicit(&pool->remaining, 1, memory_order_acq_rel);
    }
}

typedef struct PoolStorage {
    Pool pool;
    PoolWorkerArg args[POOL_MAX_THREADS];
} PoolStorage;

static int pool_init(PoolStorage *ps, int nthreads, char *err, size_t errlen) {
    Pool *pool = &ps->pool;
    memset(ps, 0, sizeof *ps);
    if (nthreads < 1) nthreads = 1;
    if (nthreads > POOL_MAX_THREADS) nthreads = POOL_MAX_THREADS;
    pool->nthreads = nthreads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->wake, NULL);
    for (int i = 1; i < nthreads; i++) {
        ps->args[i].pool = pool;
        ps->args[i].index = i;
        int rc = pthread_create(&pool->threads[i], NULL, pool_worker, &ps->args[i]);
        if (rc) {
            pool->nthreads = i;
            return fail(err, errlen, NGPT_ERR_NOMEM, "pthread_create failed for worker %d: %s", i, strerror(rc));
        }
    }
    return NGPT_OK;
}

static void pool_run(Pool *pool, pool_fn fn, void *arg) {
    if (pool->nthreads == 1) { fn(arg, 0, 1); return; }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store(&pool->remaining, pool->nthreads - 1);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_mutex_lock(&pool->mu);
    if (pool->sleepers) pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    fn(arg, 0, pool->nthreads);
    /* wait for the workers: spin, then yield the core (a descheduled worker needs it on a busy machine) */
    int64_t spin_until = 0;
    for (int spins = 0; atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0; spins++) {
        if (spins == 32) spin_until = pool_clock_ns() + POOL_SPIN_NS;
        if (spins < 32 || (spins & 31) || pool_clock_ns() < spin_until) cpu_relax();
        else sched_yield();
    }
}

static void pool_free(PoolStorage *ps) {
    Pool *pool = &ps->pool;
    atomic_store(&pool->quit, 1);
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i < pool->nthreads; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->wake);
}

/* The share [lo, hi) of n items that thread i of nt takes. */
static inline void split_range(size_t n, int i, int nt, size_t *lo, size_t *hi) {
    size_t q = n / (size_t)nt, r = n % (size_t)nt;
    *lo = (size_t)i * q + MIN((size_t)i, r);
    *hi = *lo + q + ((size_t)i < r);
}

/* ---- What a container or taskset leaves this process. Inside a container /proc/meminfo and the online CPUs are the
 * host's: a plan against them would take memory the container's limit refuses (the kernel kills the process, as a GPU
 * runs out of memory), and threads would take turns on the CPUs it may use. Linux cgroups (v1 and v2) set those
 * limits, in this process's cgroup folder or any above it; sched_getaffinity says which CPUs it may run on. ---- */

/* The first line of dir/name into buf; 0 when read */
static int cgroup_read(const char *dir, const char *name, char *buf, int cap) {
    char path[1200];
    snprintf(path, sizeof path, "%.1000s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, cap, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

/* The bytes key counts in dir/memory.stat (a line "key N"); 0 when it is not there */
static double cgroup_stat(const char *dir, const char *key) {
    char path[1200], line[256];
    snprintf(path, sizeof path, "%.1000s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    double v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ' ') {
            v = strtod(line + n + 1, NULL);
            break;
        }
    if (f) fclose(f);
    return v;
}

/* Calls visit(dir, ctx) on each cgroup folder of controller (a v1 line "N:a,b:path" of /proc/self/cgroup's text
 * proc_text that names it, else the v2 line "0::path") from this process's own up to the hierarchy's root, under
 * root (/sys/fs/cgroup). A folder that is not there is skipped: inside a container the path is often the host's,
 * and the container's own cgroup is what is mounted as the root. */
static void cgroup_walk(const char *root, const char *proc_text, const char *controller, void (*visit)(const char *dir, void *ctx),
                        void *ctx) {
    char base[600] = "", path[600] = "", dir[1300];
    for (const char *line = proc_text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *end = strchr(line, '\n');
        if (!c2 || (end && c2 > end)) continue;
        int ctl_len = (int)(c2 - c1 - 1), path_len = end ? (int)(end - c2 - 1) : (int)strlen(c2 + 1);
        if (ctl_len == 0 && !base[0]) { /* v2: one hierarchy, used when no v1 line names the controller */
            snprintf(base, sizeof base, "%.500s", root);
            snprintf(path, sizeof path, "%.*s", MIN(path_len, 500), c2 + 1);
        }
        for (const char *w = c1 + 1; w < c2;) { /* v1: "cpu,cpuacct" is mounted as root/cpu,cpuacct */
            const char *comma = memchr(w, ',', (size_t)(c2 - w)), *we = comma ? comma : c2;
            if ((size_t)(we - w) == strlen(controller) && !strncmp(w, controller, (size_t)(we - w))) {
                snprintf(base, sizeof base, "%.500s/%.*s", root, MIN(ctl_len, 90), c1 + 1);
                struct stat st;
                if (stat(base, &st)) snprintf(base, sizeof base, "%.500s/%s", root, controller);
                snprintf(path, sizeof path, "%.*s", MIN(path_len, 500), c2 + 1);
                goto found;
            }
            w = we + 1;
        }
    }
found:
    if (!base[0]) return;
    for (;;) {
        snprintf(dir, sizeof dir, "%s%s", base, path);
        struct stat st;
        if (!stat(dir, &st) && S_ISDIR(st.st_mode)) visit(dir, ctx);
        char *slash = strrchr(path, '/');
        if (!slash) break;
        *slash = 0; /* "/a/b" -> "/a" -> "" (the root itself) */
    }
}

/* the memory a cgroup folder's limit leaves (the limit less what its processes use, less the page cache the kernel
 * takes back first), the smallest of the folders' */
static void cgroup_memory_visit(const char *dir, void *ctx) {
    char buf[64];
    double limit = -1, usage = 0, cache = 0;
    if (!cgroup_read(dir, "memory.max", buf, sizeof buf)) { /* v2; "max": none */
        if (strncmp(buf, "max", 3)) limit = strtod(buf, NULL);
        if (!cgroup_read(dir, "memory.current", buf, sizeof buf)) usage = strtod(buf, NULL);
        cache = cgroup_stat(dir, "inactive_file");
    } else if (!cgroup_read(dir, "memory.limit_in_bytes", buf, sizeof buf)) { /* v1; none is a number near 2^63 */
        limit = strtod(buf, NULL);
        double above = cgroup_stat(dir, "hierarchical_memory_limit"); /* the folders above's too, seen or not (a pod's) */
        if (above > 0 && above < limit) limit = above;
        if (limit >= 0x1p60) limit = -1;
        if (!cgroup_read(dir, "memory.usage_in_bytes", buf, sizeof buf)) usage = strtod(buf, NULL);
        cache = cgroup_stat(dir, "total_inactive_file");
    }
    if (limit < 0) return;
    double left = limit - MAX(usage - cache, 0.0), *least = (double *)ctx;
    if (left < 0) left = 0;
    if (*least < 0 || left < *least) *least = left;
}

/* the CPUs a cgroup folder's quota gives (quota / period: 1.5 for docker's --cpus=1.5), the fewest of the folders' */
static void cgroup_cpu_visit(const char *dir, void *ctx) {
    char buf[64];
    double quota = -1, period = 0;
    if (!cgroup_read(dir, "cpu.max", buf, sizeof buf)) { /* v2: "QUOTA PERIOD", QUOTA "max" for none */
        if (strncmp(buf, "max", 3) && sscanf(buf, "%lf %lf", &quota, &period) != 2) quota = -1;
    } else if (!cgroup_read(dir, "cpu.cfs_quota_us", buf, sizeof buf)) { /* v1: -1 for none */
        quota = strtod(buf, NULL);
        if (cgroup_read(dir, "cpu.cfs_period_us", buf, sizeof buf)) quota = -1;
        else period = strtod(buf, NULL);
    }
    double *least = (double *)ctx;
    if (quota > 0 && period > 0 && (*least < 0 || quota / period < *least)) *least = quota / period;
}

/* The memory this process's cgroups leave it, under root with /proc/self/cgroup's text proc_text; -1 when none limits it */
static double cgroup_memory_left(const char *root, const char *proc_text) {
    double least = -1;
    cgroup_walk(root, proc_text, "memory", cgroup_memory_visit, &least);
    return least;
}

/* The CPUs this process's cgroups' quotas give it (a fraction is the CPU time of part of one); -1 when none limits it */
static double cgroup_cpu_quota(const char *root, const char *proc_text) {
    double least = -1;
    cgroup_walk(root, proc_text, "cpu", cgroup_cpu_visit, &least);
    return least;
}

/* /proc/self/cgroup's text into buf ("" where there is none) */
static const char *own_cgroups(char *buf, size_t cap) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return buf;
}

/* The CPUs this process may use: the online ones, fewer where its affinity (taskset) or a cgroup's quota (docker's
 * --cpus) says so; into *online (if not NULL) the machine's */
static int usable_cpus(int *online) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (online) *online = (int)n;
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n) n = CPU_COUNT(&set);
    char text[4096];
    double quota = cgroup_cpu_quota("/sys/fs/cgroup", own_cgroups(text, sizeof text));
    if (quota > 0 && ceil(quota) < n) n = (long)ceil(quota); /* 1.5 CPUs' time: 2 threads */
    return (int)n;
}
static int cpu_count(void) { return usable_cpus(NULL); }

/* ======================================================================================================
 * Configuration: one table drives parsing, validation, printing and "did you mean" suggestions.
 * ==================================================================================================== */

enum { KEY_INT, KEY_FLOAT, KEY_BOOL, KEY_STR, KEY_BYTES, KEY_I64, KEY_IGNORED };
#define MAX_KEEP_CHECKPOINTS 1000

typedef struct {
    const char *name;
    int type;
    size_t offset, size; /* field in ngpt_config (size: for strings) */
    double lo, hi;       /* valid range for numbers */
    const char *choices; /* for strings: "a|b|c", or NULL for free text */
    const char *help;
} ConfigKey;

#define CK(name, type, lo, hi, choices, help) \
    { #name, type, offsetof(ngpt_config, name), sizeof(((ngpt_config *)0)->name), lo, hi, choices, help }
#define CK_IGNORED(name, help) { #name, KEY_IGNORED, 0, 0, 0, 0, NULL, help }

static const ConfigKey config_keys[] = {
    CK(out_dir, KEY_STR, 0, 0, NULL, "folder for checkpoints and logs"),
    CK(eval_interval, KEY_INT, 1, 1e9, NULL, "evaluate every this many steps"),
    CK(log_interval, KEY_INT, 1, 1e9, NULL, "print the training loss every this many steps (on a terminal the steps between update one live line)"),
    CK(eval_iters, KEY_INT, 1, 1e9, NULL, "batches per split in each evaluation"),
    CK(eval_only, KEY_BOOL, 0, 1, NULL, "evaluate once at the model's step, save nothing, and exit (a loaded model in forward-only memory)"),
    CK(always_save_checkpoint, KEY_BOOL, 0, 1, NULL, "save at every evaluation, not only on improvement"),
    CK(keep_checkpoints, KEY_INT, 1, MAX_KEEP_CHECKPOINTS, NULL, "the newest ckpt_<step>.bin kept in out_dir (best.bin is kept besides)"),
    CK(init_from, KEY_STR, 0, 0, NULL, "scratch, resume, gpt2/gpt2-medium/gpt2-large/gpt2-xl, or a weights path (.safetensors, llm.c .bin)"),
    CK(dataset, KEY_STR, 0, 0, NULL, "data/<dataset>/ holds train.bin and val.bin (an absolute path is that folder, as in nanoGPT)"),
    CK(data_dir, KEY_STR, 0, 0, NULL, "explicit data folder (overrides data/<dataset>)"),
    CK(input, KEY_STR, 0, 0, NULL, "text file a recipe's dataset (shakespeare_char, shakespeare) is prepared from when it has no train.bin"),
    CK(tokenizer_dir, KEY_STR, 0, 0, NULL, "GPT-2 vocabulary folder (encoder.json + vocab.bpe, gpt2.tok, or llm.c's gpt2_tokenizer.bin, which it may name itself)"),
    CK(pretrained_dir, KEY_STR, 0, 0, NULL, "where init_from = gpt2.. finds <name>/model.safetensors"),
    CK(gradient_accumulation_steps, KEY_INT, 1, 1e6, NULL, "micro-steps per optimizer step"),
    CK(batch_size, KEY_INT, 1, 1e6, NULL, "sequences per micro-step (the planner may split it)"),
    CK(block_size, KEY_INT, 1, 1048576, NULL, "sequence length T"),
    CK(n_layer, KEY_INT, 1, 1024, NULL, "transformer blocks"),
    CK(n_head, KEY_INT, 1, 1024, NULL, "attention heads"),
    CK(n_embd, KEY_INT, 1, 65536, NULL, "channels"),
    CK(dropout, KEY_FLOAT, 0, 0.99, NULL, "dropout probability"),
    CK(bias, KEY_BOOL, 0, 1, NULL, "biases in Linear and LayerNorm layers"),
    CK(vocab_size, KEY_INT, 0, 65536, NULL, "0 = from the dataset's meta.bin (or nanoGPT's meta.pkl), else GPT-2's 50257 (token files hold uint16 ids)"),
    CK(learning_rate, KEY_FLOAT, 0, 10, NULL, "peak learning rate"),
    CK(max_iters, KEY_INT, 0, 2e9, NULL, "optimizer steps"),
    CK(weight_decay, KEY_FLOAT, 0, 10, NULL, "AdamW weight decay (2-D weights only)"),
    CK(beta1, KEY_FLOAT, 0, 0.999999, NULL, "AdamW beta1"),
    CK(beta2, KEY_FLOAT, 0, 0.999999999, NULL, "AdamW beta2"),
    CK(grad_clip, KEY_FLOAT, 0, 1e9, NULL, "clip the global gradient norm to this (0 = off)"),
    CK(decay_lr, KEY_BOOL, 0, 1, NULL, "warmup then cosine decay of the learning rate"),
    CK(warmup_iters, KEY_INT, 0, 2e9, NULL, "linear warmup steps"),
    CK(lr_decay_iters, KEY_INT, 1, 2e9, NULL, "step where the cosine reaches min_lr"),
    CK(min_lr, KEY_FLOAT, 0, 10, NULL, "final learning rate"),
    CK(device, KEY_STR, 0, 0, "auto|cpu|cuda", "where to train (nanoGPT's 'cuda:0' is cuda: the first visible GPU)"),
    CK(dtype, KEY_STR, 0, 0, "auto|float32|bfloat16|float16", "storage precision on the GPU"),
    CK(compile, KEY_BOOL, 0, 1, NULL, "accepted for nanoGPT configs; no effect"),
    CK(seed, KEY_I64, 0, 9.2e18, NULL, "random seed"),
    CK(max_memory, KEY_BYTES, 0, 1e15, NULL, "memory budget with a unit, e.g. 2.68GiB or 512MB (0 = what is free)"),
    CK(micro_batch, KEY_INT, 0, 1e6, NULL, "pin the micro-batch (0 = the planner chooses)"),
    CK(recompute, KEY_INT, -1, 3, NULL, "-1 auto, 0 none, 1 GELU, 2 GELU and LayerNorm, 3 whole layers"),
    CK(logits_chunk, KEY_INT, 0, 1 << 30, NULL, "rows of logits per chunk (0 = the planner chooses)"),
    CK(moments_dtype, KEY_STR, 0, 0, "auto|float32|bfloat16", "AdamW moments: auto keeps fp32 wherever a plan fits; bfloat16 halves them (GPU, dtype bfloat16/float16)"),
    CK(threads, KEY_INT, 0, POOL_MAX_THREADS, NULL, "CPU threads (0 = one per usable core, or one alone while that measures faster); sampling's draws use them on a GPU too"),
    CK(on_nonfinite, KEY_STR, 0, 0, "skip|halt", "a NaN/Inf loss or gradient: skip the step (more than 10 in a row halt) or halt"),
    CK_IGNORED(wandb_log, "nanoGPT's wandb logging: not supported, ignored"),
    CK_IGNORED(wandb_project, "ignored"),
    CK_IGNORED(wandb_run_name, "ignored"),
    CK_IGNORED(backend, "nanoGPT's DDP backend: ignored (one device)"),
};
#define N_CONFIG_KEYS (sizeof config_keys / sizeof config_keys[0])

static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

void ngpt_config_defaults(ngpt_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    copy_str(c->out_dir, sizeof c->out_dir, "out");
    c->eval_interval = 2000;
    c->log_interval = 1;
    c->eval_iters = 200;
    c->always_save_checkpoint = 1;
    c->keep_checkpoints = 3;
    copy_str(c->init_from, sizeof c->init_from, "scratch");
    copy_str(c->dataset, sizeof c->dataset, "openwebtext");
    copy_str(c->tokenizer_dir, sizeof c->tokenizer_dir, "data/gpt2");
    copy_str(c->pretrained_dir, sizeof c->pretrained_dir, "pretrained");
    c->gradient_accumulation_steps = 5 * 8;
    c->batch_size = 12;
    c->block_size = 1024;
    c->n_layer = 12;
    c->n_head = 12;
    c->n_embd = 768;
    c->learning_rate = 6e-4;
    c->max_iters = 600000;
    c->weight_decay = 1e-1;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->grad_clip = 1.0;
    c->decay_lr = 1;
    c->warmup_iters = 2000;
    c->lr_decay_iters = 600000;
    c->min_lr = 6e-5;
    copy_str(c->device, sizeof c->device, "auto");
    copy_str(c->dtype, sizeof c->dtype, "auto");
    copy_str(c->moments_dtype, sizeof c->moments_dtype, "auto");
    c->compile = 1;
    c->seed = 1337;
    c->recompute = -1;
    copy_str(c->on_nonfinite, sizeof c->on_nonfinite, "skip");
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            d[i][j] = MIN(sub, MIN(d[i - 1][j] + 1, d[i][j - 1] + 1));
        }
    return d[la][lb];
}

/* For a path that is not there: " (did you mean P?)" into hint (cap bytes), P the entry of its folder of the kind
 * asked for (a folder when want_dir, else a file) whose name is nearest its last part, within 2 edits (a quarter of
 * the name, for longer ones; 1 for names of up to 4 characters); "" when there is none. A typo in data/shakespear_char or train_cpu.cgf. */
static const char *did_you_mean_path(const char *path, int want_dir, char *hint, size_t cap) {
    char dir[600], name[256];
    hint[0] = 0;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--; /* data/shakespear_char/ */
    if (len == 0 || len >= sizeof dir) return hint;
    memcpy(dir, path, len);
    dir[len] = 0;
    char *slash = strrchr(dir, '/');
    snprintf(name, sizeof name, "%.255s", slash ? slash + 1 : dir);
    if (slash == dir) dir[1] = 0; /* /name: the root */
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d || !name[0]) {
        if (d) closedir(d);
        return hint;
    }
    size_t best = (strlen(name) <= 4 ? 1 : MAX((size_t)2, strlen(name) / 4)) + 1; /* a short name is near anything */
    char found[256] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && name[0] != '.') continue;
        size_t dist = edit_distance(name, e->d_name);
        if (!strcmp(name, e->d_name) || dist >= best) continue; /* 0: another case */
        char full[900];
        struct stat st;
        snprintf(full, sizeof full, "%s/%.255s", dir, e->d_name);
        if (stat(full, &st) || (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) continue;
        best = dist;
        snprintf(found, sizeof found, "%s", e->d_name);
    }
    closedir(d);
    if (found[0]) { /* the precisions keep the longest within the callers' 700 bytes */
        if (slash) snprintf(hint, cap, " (did you mean %.420s%s%.255s?)", dir, strcmp(dir, "/") ? "/" : "", found);
        else snprintf(hint, cap, " (did you mean %.255s?)", found);
    }
    return hint;
}

static const ConfigKey *config_find(const char *key) {
    for (size_t i = 0; i < N_CONFIG_KEYS; i++)
        if (!strcmp(config_keys[i].name, key)) return &config_keys[i];
    return NULL;
}

/* how far a typed key is from a name: the edit distance, at most 2 when the key is a part of the name */
static size_t key_distance(const char *key, const char *name) {
    size_t d = edit_distance(key, name);
    return strstr(name, key) && strlen(key) >= 3 ? MIN(d, 2) : d;
}

/* the config key closest to key; *distance (when not NULL) its key_distance, 1 for another trainer's name of a key */
static const char *config_closest_at(const char *key, size_t *distance) {
    static const char *const aliases[][2] = { /* names other trainers (llm.c, Hugging Face, ...) use */
        {"lr", "learning_rate"}, {"max_lr", "learning_rate"}, {"lr_min", "min_lr"}, {"bs", "batch_size"},
        {"micro_batch_size", "micro_batch"}, {"grad_accum", "gradient_accumulation_steps"},
        {"accumulation_steps", "gradient_accumulation_steps"}, {"seq_len", "block_size"}, {"sequence_length", "block_size"},
        {"context_length", "block_size"}, {"max_steps", "max_iters"}, {"steps", "max_iters"}, {"num_iterations", "max_iters"},
        {"warmup_steps", "warmup_iters"}, {"wd", "weight_decay"}, {"clip", "grad_clip"}, {"max_grad_norm", "grad_clip"},
        {"n_embed", "n_embd"}, {"d_model", "n_embd"}, {"hidden_size", "n_embd"}, {"num_layers", "n_layer"},
        {"num_heads", "n_head"}, {"precision", "dtype"}, {"input_bin", "data_dir"}, {"input_val_bin", "data_dir"},
        {"output_dir", "out_dir"}, {"val_loss_every", "eval_interval"}, {"val_max_steps", "eval_iters"}, {"model", "init_from"},
        {"inference_only", "eval_only"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(key, aliases[i][0])) {
            if (distance) *distance = 1;
            return aliases[i][1];
        }
    const char *best = NULL;
    size_t bestd = SIZE_MAX;
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        size_t d = key_distance(key, config_keys[i].name);
        if (d < bestd) { bestd = d; best = config_keys[i].name; }
    }
    if (distance) *distance = bestd;
    return best;
}
static const char *config_closest(const char *key) { return config_closest_at(key, NULL); }

/* A stored config line's value (config_line wrote it) into buf: surrounding blanks and one pair of quotes
 * stripped. NULL when the value is too long, or opens a quote it does not close (*unclosed is set then). */
static const char *config_unquote(const char *v, char *buf, size_t cap, int *unclosed) {
    while (isspace((unsigned char)*v)) v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1])) n--;
    *unclosed = 0;
    if (n >= 1 && (v[0] == '\'' || v[0] == '"')) {
        if (n < 2 || v[n - 1] != v[0]) { *unclosed = 1; return NULL; }
        v++;
        n -= 2;
    }
    if (n >= cap) return NULL; /* never cut a value short: "1*1*...*7" would silently become another number */
    memcpy(buf, v, n);
    buf[n] = 0;
    return buf;
}

enum { VALUE_OK, VALUE_UNCLOSED, VALUE_AFTER_QUOTE, VALUE_AFTER_PLUS, VALUE_QUOTE_IN_TEXT, VALUE_LONG, VALUE_BAD_ESCAPE };
#define CONFIG_VALUE_MAX 511 /* characters */
#define VALUE_LITERALS "nanogpt reads literals ('text', 'a' + 'b', 3e-4, 5 * 8, True), not Python expressions"

/* The Python string escape at e (a backslash): its character into utf8 (as UTF-8); returns (characters of e it
 * takes) << 8 | (bytes written), 0 when it is no escape Python knows (the backslash is then itself), -1 for one
 * that gives no character a text setting holds (a NUL, a surrogate, past U+10FFFF) or that Python refuses (\x4
 * with too few digits) or nanogpt does not read (\N{...}). \\ \' \" \a \b \f \n \r \t \v, octal \ooo, \xhh,
 * \uXXXX, \UXXXXXXXX. */
static int python_escape(const char *e, unsigned char utf8[4]) {
    static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
    const char *simple = strchr(from, e[1]);
    if (e[1] && simple) {
        utf8[0] = (unsigned char)to[simple - from];
        return 2 << 8 | 1;
    }
    uint32_t cp = 0;
    int used = 1, digits = e[1] == 'x' ? 2 : e[1] == 'u' ? 4 : e[1] == 'U' ? 8 : 0;
    if (digits) {
        for (used = 2; used < 2 + digits; used++) {
            if (!isxdigit((unsigned char)e[used])) return -1; /* Python's SyntaxError */
            cp = cp * 16 + (uint32_t)(isdigit((unsigned char)e[used]) ? e[used] - '0' : (tolower((unsigned char)e[used]) - 'a' + 10));
        }
    } else if (e[1] >= '0' && e[1] <= '7') {
        for (; used < 4 && e[used] >= '0' && e[used] <= '7'; used++) cp = cp * 8 + (uint32_t)(e[used] - '0');
    } else return e[1] == 'N' ? -1 : 0;
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    int bytes = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes == 1) utf8[0] = (unsigned char)cp;
    else if (bytes == 2) utf8[0] = (unsigned char)(0xC0 | cp >> 6), utf8[1] = (unsigned char)(0x80 | (cp & 0x3F));
    else if (bytes == 3)
        utf8[0] = (unsigned char)(0xE0 | cp >> 12), utf8[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), utf8[2] = (unsigned char)(0x80 | (cp & 0x3F));
    else
        utf8[0] = (unsigned char)(0xF0 | cp >> 18), utf8[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F)),
        utf8[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)), utf8[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return used << 8 | bytes;
}

/* A value as Python reads the literals nanoGPT's configs use, into out (cap bytes, never cut short): a quoted
 * string, or quoted strings joined by + ('a' + 'b' is ab), else bare text (a number, True, 5 * 8) without
 * its surrounding blanks. A quoted string takes Python's escapes (python_escape: start = 'it\'s', '\u00e9'; a
 * NUL, a surrogate, \N{...} and a short \x are refused; a backslash before anything else is itself, as Python keeps it). file: a config file's value, where
 * # starts a comment and a quote in bare text is refused (int('8') or os.path.join('a', 'b') would be read
 * as text); else the command line's raw text, where only a leading quote is special. Returns VALUE_OK with
 * *at the offset of the value's first character and *quoted whether it is a quoted string, or what is wrong
 * with *at the offset in s it is about. */
static int config_value(const char *s, int file, char *out, size_t cap, size_t *at, int *quoted) {
    const char *p = s;
    size_t n = 0;
    while (isspace((unsigned char)*p)) p++;
    *at = (size_t)(p - s);
    *quoted = *p == '\'' || *p == '"';
    if (*quoted) {
        for (;;) {
            const char *c = p + 1;
            while (*c && *c != *p) {
                if (*c != '\\' || !c[1]) {
                    if (n + 1 >= cap) return VALUE_LONG;
                    out[n++] = *c++;
                    continue;
                }
                unsigned char utf8[4];
                int len = python_escape(c, utf8);
                if (len < 0) { *at = (size_t)(c - s); return VALUE_BAD_ESCAPE; }
                if (len == 0) { /* no escape Python knows: the backslash is itself */
                    if (n + 1 >= cap) return VALUE_LONG;
                    out[n++] = *c++;
                    continue;
                }
                size_t used = (size_t)(len >> 8), bytes = (size_t)(len & 0xff);
                if (n + bytes >= cap) return VALUE_LONG;
                memcpy(out + n, utf8, bytes);
                n += bytes;
                c += used;
            }
            if (!*c) { *at = (size_t)(p - s); return VALUE_UNCLOSED; }
            for (p = c + 1; isspace((unsigned char)*p); p++) {}
            if (*p != '+') break;
            for (p++; isspace((unsigned char)*p); p++) {}
            if (*p != '\'' && *p != '"') { *at = (size_t)(p - s); return VALUE_AFTER_PLUS; }
        }
        if (*p && !(file && *p == '#')) { *at = (size_t)(p - s); return VALUE_AFTER_QUOTE; }
    } else {
        n = file ? strcspn(p, "#'\"") : strlen(p);
        if (p[n] == '\'' || p[n] == '"') { *at = (size_t)(p + n - s); return VALUE_QUOTE_IN_TEXT; }
        while (n && isspace((unsigned char)p[n - 1])) n--;
        if (n >= cap) return VALUE_LONG;
        memcpy(out, p, n);
    }
    out[n] = 0;
    return VALUE_OK;
}

/* A command-line value as nanoGPT's configurator reads it (literal_eval, else the text): a whole Python string
 * literal ('out', "ROMEO:") is its text, into buf; any other value is itself ('tis) */
CLI_USED static const char *arg_text(const char *v, char *buf, size_t cap) {
    size_t at;
    int quoted;
    return config_value(v, 0, buf, cap, &at, &quoted) == VALUE_OK && quoted ? buf : v;
}

/* nanoGPT's device strings: 'cuda:0' is nanogpt's cuda (it drives one GPU, the first visible one: *v becomes
 * "cuda"); another GPU, or Apple's mps, is refused with what to do instead. */
static int device_alias(const char **v, char *err, size_t errlen) {
    const char *s = *v;
    char *end;
    if (!strncmp(s, "cuda:", 5) && isdigit((unsigned char)s[5])) {
        long n = strtol(s + 5, &end, 10);
        if (!*end && n == 0) { *v = "cuda"; return NGPT_OK; }
        if (!*end)
            return fail(err, errlen, NGPT_ERR_ARG, "device = '%s': nanogpt drives one GPU, the first visible one; to train on GPU %ld, "
                                                   "run with CUDA_VISIBLE_DEVICES=%ld and device = 'cuda'", s, n, n);
    }
    if (!strcmp(s, "mps")) return fail(err, errlen, NGPT_ERR_ARG, "device = 'mps': nanogpt has no Apple GPU (Metal) backend; use device = 'cpu'");
    return NGPT_OK;
}

/* Parses a number, allowing products such as "5 * 8" as nanoGPT configs write them, and Python's underscores
 * between digits (5_000). */
static int parse_number(const char *text, double *out) {
    char s[128];
    size_t n = 0;
    for (const char *c = text; *c; c++) {
        if (*c == '_' && c > text && isdigit((unsigned char)c[-1]) && isdigit((unsigned char)c[1])) continue;
        if (n + 1 >= sizeof s) return -1;
        s[n++] = *c;
    }
    s[n] = 0;
    double v = 1;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        double f = strtod(p, &end);
        if (end == p || (errno == ERANGE && fabs(f) > 1)) return -1; /* an overflow; an underflow reads as the tiny value
                                                                        or 0, as Python's float() does */
        v *= f;
        while (isspace((unsigned char)*end)) end++;
        if (*end == '*') { p = end + 1; continue; }
        if (*end) return -1;
        break;
    }
    if (!isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* The exact value of an integer whose text is one whole number (digits, with Python's _ between them): a double
 * holds integers exactly only up to 2^53, and a seed goes to 9.2e18 (1234567890123456789 was stored as
 * ...768). x, parse_number's value, for any other text (1e18, 2**62 written as a product). */
static long long exact_integer(const char *text, double x) {
    char s[32];
    size_t n = 0;
    const char *c = text;
    while (isspace((unsigned char)*c)) c++;
    if (*c == '+') c++;
    for (; *c && !isspace((unsigned char)*c); c++) {
        if (*c == '_') continue;
        if (!isdigit((unsigned char)*c) || n + 1 >= sizeof s) return (long long)x;
        s[n++] = *c;
    }
    while (isspace((unsigned char)*c)) c++;
    if (*c || !n) return (long long)x;
    s[n] = 0;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    return errno ? (long long)x : v;
}

/* The options a command reads besides the config keys, for "did you mean" (sample first: parse_args and
 * config_unknown name its options where a config key is expected) */
static const struct {
    const char *command, *options[7];
} command_option_table[] = {
    {"sample", {"start", "num_samples", "max_new_tokens", "temperature", "top_k", "seed", NULL}},
    {"bench", {"steps", "warmup", "kernels", "sample", "prompt", NULL}},
    {"plan", {"json", "sample", NULL}},
};

static int config_unknown(const char *key, char *err, size_t errlen) {
    if (!key[0]) return fail(err, errlen, NGPT_ERR_ARG, "no key before '=' (a setting is key = value; `nanogpt help config` lists the keys)");
    size_t n = strlen(key), op = 0;
    while (op < 3 && op < n && strchr("+-*/%@&|^<>", key[n - 1 - op])) op++;
    if (op && op < n) { /* Python's batch_size *= 2 (or //=, **=, >>=), split at its '=' */
        char base[64];
        snprintf(base, sizeof base, "%.*s", (int)MIN(n - op, sizeof base - 1), key);
        for (size_t k = strlen(base); k > 0 && base[k - 1] == ' '; k--) base[k - 1] = 0;
        if (config_find(base))
            return fail(err, errlen, NGPT_ERR_ARG, "'%s=' is Python's augmented assignment, which nanogpt does not run: set %s to its value "
                                                   "(products such as 2 * 8 are read)", key, base);
    }
    for (int i = 0; command_option_table[0].options[i]; i++) /* sample.py's own settings, in a config file */
        if (!strcmp(key, command_option_table[0].options[i]))
            return fail(err, errlen, NGPT_ERR_ARG, "%s is a setting of `nanogpt sample` (in its config files, or --%s=...), not a training "
                                                   "config key", key, key);
    static const char *const no_key[][2] = { /* llm.c's train_gpt2.py settings that are no one key here */
        {"total_batch_size", "the tokens per step are batch_size x gradient_accumulation_steps x block_size"},
        {"sample_every", "`nanogpt sample` samples a checkpoint"},
        {"zero_stage", "nanogpt trains on one device"}};
    for (size_t i = 0; i < sizeof no_key / sizeof no_key[0]; i++)
        if (!strcmp(key, no_key[i][0]))
            return fail(err, errlen, NGPT_ERR_ARG, "unknown key '%s' (llm.c's; here %s); `nanogpt help config` lists the keys", key, no_key[i][1]);
    return fail(err, errlen, NGPT_ERR_ARG, "unknown key '%s' (did you mean '%s'?); `nanogpt help config` lists them all", key,
                config_closest(key));
}

/* Key k from its value's text v (quotes already read); stored: as config_set */
static int config_assign(ngpt_config *cfg, const ConfigKey *k, const char *v, int stored, char *err, size_t errlen) {
    const char *key = k->name;
    for (const char *q = v; *q; q++)
        if ((unsigned char)*q < 0x20)
            return fail(err, errlen, NGPT_ERR_ARG, "%s: the value holds a control character (byte 0x%02X at %d)", key, (unsigned char)*q, (int)(q - v));
    /* config_line quotes a string with the quote it does not hold: one holding both could not be read back */
    if (k->type == KEY_STR && !stored && strchr(v, '\'') && strchr(v, '"'))
        return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: holds both ' and \" (a config file or checkpoint could not store it)", key, v);
    if (!strcmp(key, "device")) {
        int rc = device_alias(&v, err, errlen);
        if (rc) return rc;
    }
    char before_semicolon[CONFIG_VALUE_MAX + 1];
    const char *semicolon = k->type == KEY_STR ? NULL : strchr(v, ';');
    if (semicolon) { /* Python's `max_iters = 5000;` ends a statement; more after it is a second one */
        if (semicolon[1 + strspn(semicolon + 1, " \t")])
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': one `key = value` per line (nanogpt does not split lines at ;)", key, v);
        size_t n = MIN((size_t)(semicolon - v), sizeof before_semicolon - 1);
        while (n && isspace((unsigned char)v[n - 1])) n--;
        memcpy(before_semicolon, v, n);
        before_semicolon[n] = 0;
        v = before_semicolon;
    }
    char *field = (char *)cfg + k->offset;
    switch (k->type) {
    case KEY_IGNORED: return NGPT_OK;
    case KEY_STR: {
        if (strlen(v) >= k->size)
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': longer than %zu characters", key, v, k->size - 1);
        if (k->choices) {
            const char *c = k->choices;
            size_t n = strlen(v);
            int ok = 0;
            while (*c) {
                size_t m = strcspn(c, "|");
                if (m == n && !strncmp(c, v, n)) ok = 1;
                c += m + (c[m] == '|');
            }
            if (!ok) return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be one of %s", key, v, k->choices);
        }
        copy_str(field, k->size, v);
        return NGPT_OK;
    }
    case KEY_BOOL: {
        int b;
        if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) b = 1;
        else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) b = 0;
        else return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be True or False (or 1/0, yes/no, on/off)", key, v);
        *(int *)field = b;
        return NGPT_OK;
    }
    case KEY_BYTES: {
        double bytes;
        if (parse_bytes(v, stored, &bytes) || bytes > k->hi)
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be a size with a unit, such as 2.68GiB or 512MB, up to %.0fTB, "
                                                   "or 0 (what is free); units: " BYTE_UNITS, key, v, k->hi / 1e12);
        *(double *)field = bytes;
        return NGPT_OK;
    }
    default: {
        double x;
        int is_int = k->type == KEY_INT || k->type == KEY_I64;
        int not_number = parse_number(v, &x);
        if (not_number || (is_int && x != floor(x)) || x < k->lo || x > k->hi) {
            /* an expression, or a name (max_iters, a variable) whose value Python would look up */
            const char *why = not_number && (strpbrk(v, "()/+*%[]<>") || config_find(v)) ? "; " VALUE_LITERALS : "";
            if (is_int)
                return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be an integer in [%.0f, %.0f]%s", key, v, k->lo, k->hi, why);
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be a number in [%.10g, %.10g]%s", key, v, k->lo, k->hi, why);
        }
        if (k->type == KEY_INT) *(int *)field = (int)x;
        else if (k->type == KEY_I64) *(long long *)field = exact_integer(v, x);
        else *(double *)field = x;
        return NGPT_OK;
    }
    }
}

/* What config_value found wrong (e) in key's value, at offset at */
static int config_value_fail(int e, const char *key, const char *value, size_t at, char *err, size_t errlen) {
    const char *s = value + strspn(value, " \t");
    if (e == VALUE_LONG) return fail(err, errlen, NGPT_ERR_ARG, "%s: the value is longer than %d characters", key, CONFIG_VALUE_MAX);
    if (e == VALUE_UNCLOSED) return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: the quote is not closed", key, s);
    if (e == VALUE_BAD_ESCAPE)
        return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: the escape at character %zu gives no character a text setting holds (a NUL, a "
                                               "surrogate, past U+10FFFF), or is one Python refuses (\\x4) or nanogpt does not read (\\N{...}: "
                                               "write the character itself)", key, s, at - (size_t)(s - value) + 1);
    if (e == VALUE_QUOTE_IN_TEXT) return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: a quote inside an unquoted value; " VALUE_LITERALS, key, s);
    return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: %s `%.30s`; " VALUE_LITERALS, key, s,
                e == VALUE_AFTER_QUOTE ? "after the closing quote, unexpected" : "+ joins quoted strings, not", value + at);
}

/* ngpt_config_set; stored: the value comes from a checkpoint's stored config (config_line's quoting; a size
 * may be bare bytes) */
static int config_set(ngpt_config *cfg, const char *key, const char *value, int stored, char *err, size_t errlen) {
    const ConfigKey *k = config_find(key);
    if (!k) return config_unknown(key, err, errlen);
    if (k->type == KEY_IGNORED) return NGPT_OK; /* nanoGPT evaluates these (wandb_run_name = 'ft-' + str(time.time())); never read */
    char buf[CONFIG_VALUE_MAX + 1];
    const char *v = buf;
    if (stored) {
        int unclosed;
        v = config_unquote(value, buf, sizeof buf, &unclosed);
        if (unclosed) return fail(err, errlen, NGPT_ERR_ARG, "%s = %.60s: the quote is not closed", key, value + strspn(value, " \t"));
        if (!v) return fail(err, errlen, NGPT_ERR_ARG, "%s: the value is longer than %zu characters", key, sizeof buf - 1);
    } else {
        size_t at;
        int quoted, e = config_value(value, 0, buf, sizeof buf, &at, &quoted);
        if (e) return config_value_fail(e, key, value, at, err, errlen);
    }
    return config_assign(cfg, k, v, stored, err, errlen);
}

int ngpt_config_set(ngpt_config *cfg, const char *key, const char *value, char *err, size_t errlen) {
    if (!cfg || !key || !value) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_config_set: cfg, key and value must not be NULL");
    return config_set(cfg, key, value, 0, err, errlen);
}

/* nanoGPT's configs are Python: `import time` (or `from x import y`) serves an expression nanoGPT evaluates,
 * here a value never read (wandb_run_name) */
static int python_import(const char *p) {
    size_t code = strcspn(p, "#");
    const char *imp = strstr(p, " import ");
    if (memchr(p, '=', code)) return 0;
    if (!strncmp(p, "import", 6) && (p[6] == ' ' || p[6] == '\t')) return 1;
    return !strncmp(p, "from", 4) && (p[4] == ' ' || p[4] == '\t') && imp && (size_t)(imp - p) < code;
}

/* The binary files nanogpt knows by their first bytes: llm.c's, its own checkpoints, safetensors, zip */
typedef enum {
    KNOWN_NONE,
    KNOWN_LLMC_MODEL,
    KNOWN_LLMC_STATE,
    KNOWN_LLMC_DEBUG_STATE,
    KNOWN_LLMC_TOKENIZER,
    KNOWN_LLMC_SHARD,
    KNOWN_LLMC_LLAMA3_SHARD,
    KNOWN_CHECKPOINT,
    KNOWN_SAFETENSORS,
    KNOWN_ZIP,
    KNOWN_KINDS
} KnownFile;

/* What a file whose first n bytes are head is. With tokens_possible (a data file, which may be raw uint16 tokens
 * and so start with anything) only 8-byte signatures count: a checkpoint's magic, or an llm.c magic followed by a
 * version in 1..16 (3 or 5 for a model), which tokens match by chance about once in 10^17 files. Elsewhere (a
 * config file, a text to prepare, export's --out) llm.c's 4-byte magics, safetensors and zip count too. */
static KnownFile known_file(const unsigned char *head, size_t n, int tokens_possible) {
    if (n >= 8 && !memcmp(head, CKPT_MAGIC, 8)) return KNOWN_CHECKPOINT;
    int32_t h[2] = {0, 0};
    memcpy(h, head, MIN(n, sizeof h));
    int version_ok = n >= 8 && h[1] >= 1 && h[1] <= 16, model_version_ok = n >= 8 && (h[1] == 3 || h[1] == 5);
    if (n >= 4 && (!tokens_possible || version_ok)) {
        switch (h[0]) {
        case LLMC_MODEL_MAGIC:
            if (!tokens_possible || model_version_ok) return KNOWN_LLMC_MODEL;
            break;
        case LLMC_STATE_MAGIC: return KNOWN_LLMC_STATE;
        case LLMC_DEBUG_MAGIC: return KNOWN_LLMC_DEBUG_STATE;
        case LLMC_TOKENIZER_MAGIC: return KNOWN_LLMC_TOKENIZER;
        case LLMC_MAGIC: return KNOWN_LLMC_SHARD;
        case LLMC_LLAMA3_MAGIC: return KNOWN_LLMC_LLAMA3_SHARD;
        default: break;
        }
    }
    if (tokens_possible) return KNOWN_NONE;
    uint64_t json_len = 0;
    if (n >= 8) memcpy(&json_len, head, 8);
    if (n > 8 && json_len > 1 && json_len < ((uint64_t)1 << 32) && head[8] == '{') return KNOWN_SAFETENSORS; /* text's 8 bytes: above 2^56 */
    if (n >= 4 && !memcmp(head, "PK\3\4", 4)) return KNOWN_ZIP;
    return KNOWN_NONE;
}

/* Whether the file f (at path) is one of the binary files nanogpt (or llm.c) knows, or any binary (a NUL byte
 * in its first 512 bytes): if so, what it is and where it goes, into says; 0 for text. Reads f's head and
 * rewinds it. */
static int binary_file_says(FILE *f, const char *path, char *says, size_t cap) {
    unsigned char head[512];
    size_t n = fread(head, 1, sizeof head, f);
    rewind(f);
    static const char *const what_is[KNOWN_KINDS] = {
        [KNOWN_LLMC_MODEL] = "an llm.c model file: train from it or sample it with --init_from=%s",
        [KNOWN_LLMC_STATE] = "llm.c's optimizer state, which nanogpt does not read: its model file (model_<step>.bin) goes as --init_from",
        [KNOWN_LLMC_DEBUG_STATE] = "llm.c's debug state (gpt2_124M_debug_state.bin), which nanogpt does not read: its model file "
                                   "(gpt2_124M.bin) goes as --init_from",
        [KNOWN_LLMC_TOKENIZER] = "llm.c's tokenizer file: GPT-2's vocabulary, which goes as --tokenizer_dir=%s",
        [KNOWN_LLMC_SHARD] = "an llm.c token shard: pass the folder that holds it as --data_dir",
        [KNOWN_LLMC_LLAMA3_SHARD] = "an llm.c Llama 3 token shard (uint32 tokens), which nanogpt does not read",
        [KNOWN_CHECKPOINT] = "a nanogpt checkpoint: sample it with `nanogpt sample --init_from=%s`, or resume its run with --init_from=resume "
                             "and its out_dir",
        [KNOWN_SAFETENSORS] = "safetensors weights: train from them with --init_from=%s",
        [KNOWN_ZIP] = "a zip archive, as PyTorch's torch.save writes (nanoGPT's ckpt.pt), which nanogpt does not read",
    };
    const char *what = what_is[known_file(head, n, 0)];
    const unsigned char *nul = memchr(head, 0, n);
    if (what) snprintf(says, cap, what, path); /* the messages without %s ignore it */
    else if (nul) snprintf(says, cap, "a binary file (byte %td is NUL)", nul - head);
    return what || nul;
}

/* A file given where a config file goes that binary_file_says knows: an error saying what it is (0 for text) */
static int config_binary_file(FILE *f, const char *path, char *err, size_t errlen) {
    char says[700];
    if (!binary_file_says(f, path, says, sizeof says)) return NGPT_OK;
    return fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a config file (`key = value` lines): it is %s", path, says);
}

/* A command's own settings in its config files (sample.py's start, num_samples, ... in sample's): set(ctx, key,
 * value, quoted, ...) takes a key that is no config key, its value as config files read values (quoted: whether
 * it was a quoted string; -1 for a value from the command line); it returns CONFIG_NOT_OURS for a key it does
 * not know either */
typedef struct {
    int (*set)(void *ctx, const char *key, const char *value, int quoted, char *err, size_t errlen);
    void *ctx;
} ConfigExtra;
#define CONFIG_NOT_OURS (-1000)

/* ngpt_config_load; line_of (NULL, or one per config key) gets the line that set each key; extra (NULL: none)
 * takes the keys that are no config keys */
static int config_load_extra(ngpt_config *cfg, const char *path, int *line_of, const ConfigExtra *extra, char *err, size_t errlen) {
    struct stat pre; /* before the open: a pipe without a writer would hold it for good */
    if (!stat(path, &pre) && !S_ISREG(pre.st_mode) && !S_ISDIR(pre.st_mode))
        return fail(err, errlen, NGPT_ERR_ARG, "config file %s is no regular file (a pipe, <(...)): a command reads its config files more "
                                               "than once; write it to a file and pass that", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        char cfg_path[600], hint[700] = ""; /* data/shakespeare_char/train_cpu for train_cpu.cfg */
        snprintf(cfg_path, sizeof cfg_path, "%.590s.cfg", path);
        if (file_exists(cfg_path)) snprintf(hint, sizeof hint, " (did you mean %s?)", cfg_path);
        else did_you_mean_path(path, 0, hint, sizeof hint);
        static const char *const nanogpt_configs[][2] = { /* nanoGPT's config/NAME.py, and nanogpt's file for it */
            {"train_shakespeare_char", "data/shakespeare_char/train.cfg"}, {"finetune_shakespeare", "data/shakespeare/finetune.cfg"},
            {"train_gpt2", "data/openwebtext/train_gpt2.cfg"}, {"eval_gpt2", "data/openwebtext/eval_gpt2.cfg"},
            {"eval_gpt2_medium", "data/openwebtext/eval_gpt2.cfg --init_from=gpt2-medium"},
            {"eval_gpt2_large", "data/openwebtext/eval_gpt2.cfg --init_from=gpt2-large"},
            {"eval_gpt2_xl", "data/openwebtext/eval_gpt2.cfg --init_from=gpt2-xl"}};
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        size_t stem = strlen(base) > 3 && !strcmp(base + strlen(base) - 3, ".py") ? strlen(base) - 3 : strlen(base);
        for (size_t i = 0; !hint[0] && i < sizeof nanogpt_configs / sizeof nanogpt_configs[0]; i++)
            if (strlen(nanogpt_configs[i][0]) == stem && !strncmp(base, nanogpt_configs[i][0], stem))
                snprintf(hint, sizeof hint, " (nanoGPT's %s.py is nanogpt's %s)", nanogpt_configs[i][0], nanogpt_configs[i][1]);
        return fail(err, errlen, NGPT_ERR_IO, "cannot open config file %s: %s%s", path, strerror(e), hint);
    }
    struct stat st;
    int is_stat = !fstat(fileno(f), &st);
    if (is_stat && S_ISDIR(st.st_mode)) {
        fclose(f);
        return fail(err, errlen, NGPT_ERR_ARG, "%s is a folder, not a config file (`key = value` lines); an out_dir is set as "
                                               "out_dir = %s (--out_dir=%s)", path, path, path);
    }
    if (is_stat && !S_ISREG(st.st_mode)) { /* a pipe read here would be empty for the command's next read */
        fclose(f);
        return fail(err, errlen, NGPT_ERR_ARG, "config file %s is no regular file (a pipe, <(...)): a command reads its config files more "
                                               "than once; write it to a file and pass that", path);
    }
    int binary = config_binary_file(f, path, err, errlen);
    if (binary) {
        fclose(f);
        return binary;
    }
    char line[1024], msg[NGPT_ERRLEN];
    int lineno = 0, rc = NGPT_OK;
    long at = ftell(f); /* where the line starts: fewer characters than bytes read is a NUL byte in it */
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        long next = ftell(f);
        if (at >= 0 && next >= 0 && (size_t)(next - at) != n) { /* past the head binary_file_says reads: it would cut the line there */
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%zu: a NUL byte; a config file is text", path, lineno, n + 1);
            break;
        }
        at = next;
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d: line longer than %zu characters", path, lineno, sizeof line - 2);
            break;
        }
        if (lineno == 1 && !memcmp(line, "\xEF\xBB\xBF", 3)) { /* a UTF-8 byte order mark */
            memmove(line, line + 3, n - 2);
            n -= 3;
        }
        while (n && isspace((unsigned char)line[n - 1])) line[--n] = 0;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#' || python_import(p)) continue;
        char *eq = p + strcspn(p, "=#");
        if (*eq != '=') {
            while (eq > p && isspace((unsigned char)eq[-1])) eq--;
            *eq = 0;
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d: expected `key = value`, found '%.60s'", path, lineno, p);
            break;
        }
        if (eq[1] == '=') {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%d: `==` compares; a setting is `key = value`", path, lineno, (int)(eq - line) + 1);
            break;
        }
        char *kend = eq;
        while (kend > p && isspace((unsigned char)kend[-1])) kend--;
        *kend = 0;
        const ConfigKey *k = config_find(p);
        /* a command's own setting (extra asked with no value: whether the key is its) */
        int ours = !k && extra && extra->set(extra->ctx, p, NULL, 0, msg, sizeof msg) != CONFIG_NOT_OURS;
        if (!k && !ours) {
            rc = config_unknown(p, msg, sizeof msg);
            fail(err, errlen, rc, "%s:%d: %s", path, lineno, msg);
            break;
        }
        if (k && k->type == KEY_IGNORED) { /* an ignored key's value is any Python nanoGPT evaluates: never read */
            if (line_of) line_of[k - config_keys] = lineno;
            continue;
        }
        char value[CONFIG_VALUE_MAX + 1], *v = eq + 1;
        size_t at;
        int quoted, e = config_value(v, 1, value, sizeof value, &at, &quoted), col = (int)(v + at - line) + 1;
        if (e == VALUE_UNCLOSED) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%d: the quote %c opened here is not closed: %.60s", path, lineno, col, v[at], v + at);
            break;
        }
        if (e) {
            config_value_fail(e, p, v, at, msg, sizeof msg);
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%d: %s", path, lineno, col, msg);
            break;
        }
        if (ours) {
            if ((rc = extra->set(extra->ctx, p, value, quoted, msg, sizeof msg))) {
                fail(err, errlen, rc, "%s:%d:%d: %s", path, lineno, col, msg);
                break;
            }
            continue;
        }
        if (k->type == KEY_STR && !quoted && !*value) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%d: %s has no value: a text setting is a quoted string ('...')", path, lineno, col, p);
            break;
        }
        if (k->type == KEY_STR && !quoted) { /* Python would read a name (wandb_run_name) or a call */
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d:%d: %s = %.60s: a text setting in a config file is a quoted string, as in Python "
                      "('...'); " VALUE_LITERALS " (a variable, a call)", path, lineno, col, p, value);
            break;
        }
        if ((rc = config_assign(cfg, k, value, 0, msg, sizeof msg))) {
            fail(err, errlen, rc, "%s:%d: %s", path, lineno, msg);
            break;
        }
        if (line_of) line_of[k - config_keys] = lineno;
    }
    if (!rc && ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

static int config_load(ngpt_config *cfg, const char *path, int *line_of, char *err, size_t errlen) {
    return config_load_extra(cfg, path, line_of, NULL, err, errlen);
}

int ngpt_config_load(ngpt_config *cfg, const char *path, char *err, size_t errlen) {
    if (!cfg || !path) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_config_load: cfg and path must not be NULL");
    ngpt_config loaded = *cfg; /* a file refused on its tenth line leaves none of its first nine set */
    int rc = config_load(&loaded, path, NULL, err, errlen);
    if (!rc) *cfg = loaded;
    return rc;
}

/* Key i of the table as one `key = value` line (with its newline) into line; returns its length (0 for
 * an ignored key). Numbers are written exactly: reading the line back gives the same bits. python: for a config
 * file, whose reader takes Python's escapes (a backslash doubled); else raw, as a checkpoint stores it
 * (config_unquote reads it back). */
static int config_line(const ngpt_config *cfg, size_t i, int python, char *line, size_t cap) {
    const ConfigKey *k = &config_keys[i];
    const char *field = (const char *)cfg + k->offset;
    int n = 0;
    switch (k->type) {
    case KEY_INT: n = snprintf(line, cap, "%s = %d\n", k->name, *(const int *)field); break;
    case KEY_BOOL: n = snprintf(line, cap, "%s = %s\n", k->name, *(const int *)field ? "True" : "False"); break;
    case KEY_I64: n = snprintf(line, cap, "%s = %lld\n", k->name, *(const long long *)field); break;
    case KEY_FLOAT: case KEY_BYTES: {
        double v = *(const double *)field;
        char num[40];
        snprintf(num, sizeof num, "%.15g", v);
        if (strtod(num, NULL) != v) snprintf(num, sizeof num, "%.17g", v);
        n = snprintf(line, cap, "%s = %s%s\n", k->name, num, k->type == KEY_BYTES ? "B" : "");
        break;
    }
    case KEY_STR: { /* in double quotes when it holds a single one, so that a config file reads it back */
        char q = strchr(field, '\'') && !strchr(field, '"') ? '"' : '\'', text[2 * CONFIG_VALUE_MAX + 2];
        size_t t = 0;
        for (const char *c = field; *c && t + 2 < sizeof text; c++) { /* python: as a config file's reader takes it back (\\ a backslash) */
            if (python && *c == '\\') text[t++] = '\\';
            text[t++] = *c;
        }
        text[t] = 0;
        n = snprintf(line, cap, "%s = %c%s%c\n", k->name, q, text, q);
        break;
    }
    default: break;
    }
    return n < 0 ? 0 : MIN(n, (int)cap - 1);
}

void ngpt_config_print(const ngpt_config *cfg, FILE *f) {
    if (!cfg || !f) return;
    char line[600];
    for (size_t i = 0; i < N_CONFIG_KEYS; i++)
        if (config_line(cfg, i, 1, line, sizeof line)) fputs(line, f);
}

/* What would make n_embd (C) a multiple of n_head (NH), into buf: the nearest valid n_embd values, and
 * the n_head values that divide n_embd (within n_head's range). */
static const char *embd_head_advice(int C, int NH, char *buf, size_t cap) {
    const ConfigKey *kc = config_find("n_embd"), *kh = config_find("n_head");
    int below = C / NH * NH, above = below + NH;
    size_t o = (size_t)snprintf(buf, cap, "use n_embd = ");
    if (below >= kc->lo) o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%d%s", below, above <= kc->hi ? " or " : "");
    if (above <= kc->hi) o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%d", above);
    o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, " (multiples of n_head = %d), or n_head = ", NH);
    for (int d = 1, first = 1; d <= C && d <= kh->hi; d++)
        if (C % d == 0) {
            o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%s%d", first ? "" : ", ", d);
            first = 0;
        }
    snprintf(buf + o, o < cap ? cap - o : 0, " (divisors of n_embd = %d)", C);
    return buf;
}

/* What nanoGPT's get_lr does with a schedule that looks mistaken but runs (nanogpt runs it the same), into
 * note; empty when nothing is odd. */
CLI_USED static void lr_schedule_note(const ngpt_config *c, char *note, size_t cap) {
    note[0] = 0;
    if (!c->decay_lr) return;
    if (c->lr_decay_iters < c->warmup_iters)
        snprintf(note, cap, "lr_decay_iters = %d is below warmup_iters = %d: the learning rate warms up for %d steps, then holds min_lr = %g "
                 "(as nanoGPT's get_lr; its configs set lr_decay_iters = max_iters)", c->lr_decay_iters, c->warmup_iters, c->warmup_iters, c->min_lr);
    else if (c->min_lr > c->learning_rate)
        snprintf(note, cap, "min_lr = %g is above learning_rate = %g: after warmup the cosine schedule raises the rate to min_lr (as nanoGPT's "
                 "get_lr); nanoGPT's configs set min_lr = learning_rate / 10", c->min_lr, c->learning_rate);
}

/* Every field as ngpt_config_set checks it (an embedder may set the struct directly: n_head 0, eval_iters -3),
 * then the cross-field checks; run once before a trainer is made. */
static int config_validate(const ngpt_config *c, char *err, size_t errlen) {
    char advice[400];
    ngpt_config scratch = *c; /* config_assign's target: each field is re-set from its own printed value */
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        const ConfigKey *k = &config_keys[i];
        if (k->type == KEY_IGNORED) continue;
        if (k->type == KEY_STR && !memchr((const char *)c + k->offset, 0, k->size))
            return fail(err, errlen, NGPT_ERR_ARG, "%s: the string is not terminated within its %zu bytes", k->name, k->size);
        int flag = k->type == KEY_BOOL ? *(const int *)((const char *)c + k->offset) : 0;
        if (flag != 0 && flag != 1) /* printed as True, it would pass below; a checkpoint storing bias = 2 would load nowhere */
            return fail(err, errlen, NGPT_ERR_ARG, "%s = %d: a boolean field holds 0 (False) or 1 (True)", k->name, flag);
        char line[600], buf[600], msg[NGPT_ERRLEN];
        int unclosed;
        config_line(c, i, 0, line, sizeof line);
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        const char *v = config_unquote(strchr(line, '=') + 1, buf, sizeof buf, &unclosed);
        if (!v || config_assign(&scratch, k, v, 1, msg, sizeof msg)) return fail(err, errlen, NGPT_ERR_ARG, "%s", v ? msg : line);
    }
    if (c->n_embd % c->n_head)
        return fail(err, errlen, NGPT_ERR_ARG, "n_embd = %d is not a multiple of n_head = %d: %s", c->n_embd, c->n_head,
                    embd_head_advice(c->n_embd, c->n_head, advice, sizeof advice));
    if (!c->out_dir[0]) return fail(err, errlen, NGPT_ERR_ARG, "out_dir is empty: name a folder (nanoGPT's default is 'out')");
    /* counts of sequences the loops keep in an int */
    if ((long long)c->batch_size * c->gradient_accumulation_steps > INT_MAX)
        return fail(err, errlen, NGPT_ERR_ARG, "batch_size x gradient_accumulation_steps = %d x %d = %lld sequences a step: at most %d",
                    c->batch_size, c->gradient_accumulation_steps, (long long)c->batch_size * c->gradient_accumulation_steps, INT_MAX);
    if ((long long)c->batch_size * c->eval_iters > INT_MAX)
        return fail(err, errlen, NGPT_ERR_ARG, "eval_iters x batch_size = %d x %d = %lld sequences an evaluation of each split: at most %d",
                    c->eval_iters, c->batch_size, (long long)c->eval_iters * c->batch_size, INT_MAX);
    return NGPT_OK;
}

/* ======================================================================================================
 * Model shape and parameter table. Parameters are one contiguous block in llm.c's order; with bias off
 * the bias tensors have size 0 (LayerNorms too, as in nanoGPT).
 * ==================================================================================================== */

enum {
    P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB, P_LN2W, P_LN2B,
    P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, N_PARAM_TENSORS
};
static const char *const param_names[N_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
    "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

typedef struct {
    int L, NH, C;
    int V, Vp;      /* vocabulary and its padding to a multiple of 64 */
    int maxT;       /* rows of wpe (block_size of the model) */
    int bias;
} ModelShape;

static int pad_vocab(int V) { return (V + 63) / 64 * 64; }

/* Elements of each parameter tensor; returns the total. */
static size_t param_sizes(const ModelShape *m, size_t sizes[N_PARAM_TENSORS]) {
    size_t L = (size_t)m->L, C = (size_t)m->C, b = m->bias ? 1 : 0;
    sizes[P_WTE] = (size_t)m->Vp * C;
    sizes[P_WPE] = (size_t)m->maxT * C;
    sizes[P_LN1W] = L * C;
    sizes[P_LN1B] = b * L * C;
    sizes[P_QKVW] = L * 3 * C * C;
    sizes[P_QKVB] = b * L * 3 * C;
    sizes[P_ATTPROJW] = L * C * C;
    sizes[P_ATTPROJB] = b * L * C;
    sizes[P_LN2W] = L * C;
    sizes[P_LN2B] = b * L * C;
    sizes[P_FCW] = L * 4 * C * C;
    sizes[P_FCB] = b * L * 4 * C;
    sizes[P_FCPROJW] = L * C * 4 * C;
    sizes[P_FCPROJB] = b * L * C;
    sizes[P_LNFW] = C;
    sizes[P_LNFB] = b * C;
    size_t total = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) total += sizes[i];
    return total;
}

/* Weight decay applies to the 2-D tensors (nanoGPT's configure_optimizers: p.dim() >= 2). */
static int param_decays(int i) {
    return i == P_WTE || i == P_WPE || i == P_QKVW || i == P_ATTPROJW || i == P_FCW || i == P_FCPROJW;
}

/* ======================================================================================================
 * The memory plan: a pure function from (model, block size, tokens per step, precision, budget) to every
 * buffer's offset and size in one device arena and one host arena, plus the micro-batch, accumulation,
 * recompute level, logits chunk and eval micro-batch. It allocates nothing and touches no device.
 *
 * Device arena: [parameters | gradients | fp32 master | AdamW m | AdamW v | batch region]. The batch
 * region is laid out twice over the same bytes: once for training (activations of every layer kept for
 * backward) and once for evaluation (forward only: one layer's activations, reused layer after layer), so
 * evaluation never needs memory of its own and gets a larger micro-batch for free.
 * ==================================================================================================== */

#define ARENA_ALIGN 256
#define PARAM_ALIGN 64 /* elements: every parameter tensor starts on a 64-element boundary */

enum { DEV_BACKEND_CPU = 0, DEV_BACKEND_CUDA = 1 };
/* What the backward pass recomputes instead of keeping: nothing; GELU's output; also both LayerNorms' outputs;
 * or whole layers (only each layer's input, the residual stream, is kept, and the backward runs each layer's
 * forward again, all of it but the MLP projection, before that layer's backward) */
enum { RECOMPUTE_NONE = 0, RECOMPUTE_GELU = 1, RECOMPUTE_GELU_LN = 2, RECOMPUTE_LAYERS = 3 };

/* buffers of the batch region */
enum {
    B_TOKENS, B_TARGETS, B_BUCKETS, B_LOSSES,
    B_RES, B_RES_MID, B_LN1, B_LN1_STATS, B_QKV, B_ATTY, B_LSE, B_LN2, B_LN2_STATS, B_FCH, B_GELU,
    B_LNF, B_LNF_STATS, B_TMP, B_DRES, B_DBIG, B_DATT, B_LOGITS, B_SCRATCH, N_BATCH_BUFS
};
static const char *const batch_buf_names[N_BATCH_BUFS] = {
    "tokens", "targets", "token buckets", "losses", "residual", "residual (mid)", "ln1", "ln1 stats", "qkv",
    "attention out", "attention lse", "ln2", "ln2 stats", "fc", "gelu", "lnf", "lnf stats", "tmp", "dresidual",
    "dbig", "dattention", "logits chunk", "backend scratch"};

/* host arena buffers */
enum { H_TOKENS, H_TARGETS, H_BUCKETS, H_COUNTS, H_LOSSES, H_STAGING, N_HOST_BUFS };
static const char *const host_buf_names[N_HOST_BUFS] = {"tokens", "targets", "token buckets", "bucket counts", "losses", "staging"};
#define HOST_STAGING_BYTES ((size_t)4 << 20)

enum { CAT_PARAMS, CAT_GRADS, CAT_MASTER, CAT_MOMENTS, CAT_ACTS, CAT_WORK, CAT_LOGITS, CAT_BATCH, CAT_SCRATCH, N_CATS };
static const char *const cat_names[N_CATS] = {
    "parameters", "gradients", "fp32 master weights", "AdamW moments", "activations kept for backward",
    "working buffers", "logits chunk", "batch (tokens, targets, losses)", "backend scratch"};
static const char *const cat_keys[N_CATS] = {"params", "grads", "master", "moments", "activations", "work", "logits", "batch", "scratch"};

/* GPT-2's four sizes, by their Hugging Face names; each has 50257 tokens and 1024 positions */
static const struct {
    const char *name;
    int L, NH, C;
} gpt2_sizes[4] = {{"gpt2", 12, 12, 768}, {"gpt2-medium", 24, 16, 1024}, {"gpt2-large", 36, 20, 1280}, {"gpt2-xl", 48, 25, 1600}};

/* The batch region: `lanes` copies of every buffer but the backend scratch, one per lane (a lane holds up to
 * lane_B of the micro-batch's sequences), then the scratch: [lane 0 | lane 1 | ... | scratch]. */
typedef struct {
    int B;                     /* sequences */
    int lanes, lane_B;         /* lanes and the sequences one holds at most: ceil(B / lanes) */
    int training;              /* keeps every layer's activations and the backward buffers */
    int slots[N_BATCH_BUFS];   /* per-layer buffers: how many layer slots (1 = reused by every layer) */
    size_t slot_bytes[N_BATCH_BUFS];
    size_t off[N_BATCH_BUFS];  /* lane 0's buffer from the start of the batch region */
    size_t bytes[N_BATCH_BUFS]; /* all lanes' */
    size_t lane_bytes, end;
    size_t backward_scratch;   /* training where the attention backward keeps dS^T (plan_wants_ds; one lane): the bytes from the logits chunk to the end of
                                * the scratch, the attention backward's scratch (use_backward_scratch); 0: none */
} BatchLayout;

enum { MOMENTS_FREE, MOMENTS_F32, MOMENTS_BF16 }; /* PlanRequest.pin_moments: config moments_dtype */

typedef struct {
    ModelShape m;
    int T;
    int batch_size, grad_accum; /* as the user asked: batch_size * grad_accum sequences per step */
    int dtype;                  /* NGPT_DTYPE_* of params/grads/activations */
    int device;                 /* DEV_BACKEND_* */
    int nthreads;               /* CPU scratch is per thread */
    double budget;              /* bytes the arenas may take (CPU: device + host) */
    double device_cap, host_cap; /* the embedder's arenas (0: none): each part of the plan must fit its own */
    int pin_micro_batch, pin_recompute, pin_chunk; /* 0 / -1 / 0 = free */
    int pin_moments;            /* MOMENTS_FREE (fp32 where a plan fits, else bf16), MOMENTS_F32 or MOMENTS_BF16 */
    long long eval_seqs;        /* sequences per evaluation of one split (eval_iters * batch_size) */
    int inference;              /* forward passes only: no gradients, moments or kept activations (ngpt_options.sample_only,
                                 * or eval_only from a checkpoint or pretrained weights) */
    int eval_only;              /* with inference: the forward passes are evaluations (only what the plan says differs) */
    int pretrained;             /* the model's shape comes with its weights (init_from): a refusal names smaller GPT-2s, not knobs */
    int resumed;                /* init_from = resume: the model and block_size are the checkpoint's, so a refusal names neither */
    int attn_ds;                /* the CUDA backend's attention backward keeps dS^T in scratch: its wgmma kernels run
                                 * (ngpt_cuda_wgmma_attention), without dropout */
    int gpu_sms;                /* the CUDA device's SMs (plan_gpu_speed); 0 when unknown (no device here): an H100's 132 assumed */
} PlanRequest;

typedef struct {
    PlanRequest req;
    int fits;
    /* decisions */
    int micro_batch, grad_accum, recompute, logits_chunk, eval_micro_batch, moments_dtype;
    int eval_chunk;             /* logits_chunk and eval_chunk: rows per lane */
    int lanes;                  /* parts of a micro-batch the backend may run at once, each with its own gradients */
    int passed_micro_batch, passed_recompute, passed_chunk; /* on a GPU, the cheaper trades' largest micro-batch that fits,
                                                               its trade and logits chunk, where plan_gpu_speed rated another
                                                               plan faster; else 0 */
    int grown_from;             /* on a GPU, batch_size where plan_grow_micro_batch took a larger micro-batch; else 0 */
    double grown_gain;          /* and its plan_gpu_speed over batch_size's plan's */
    int bf16_micro_batch, bf16_recompute; /* fp32 moments chosen freely on a GPU where the plan with bf16 moments (this one)
                                             is rated at least BF16_MOMENTS_HINT as fast; else 0 */
    int bf16_grad_accum;                  /* that plan's accumulation steps */
    size_t bf16_device_bytes;             /* and its arena on the device */
    double bf16_gain;                     /* that plan's plan_gpu_speed over this one's */
    /* parameters */
    size_t param_off[N_PARAM_TENSORS], param_len[N_PARAM_TENSORS]; /* elements */
    size_t nparams;        /* real parameters */
    size_t nparams_padded; /* elements of the parameter block, with alignment gaps */
    /* device arena */
    size_t act_bytes, moment_bytes;
    size_t off_params, off_grads, off_lane_grads, off_master, off_m, off_v, off_region; /* lane_grads: lanes 1.. */
    size_t region_bytes, device_bytes;
    BatchLayout train, eval;
    /* host arena */
    size_t host_off[N_HOST_BUFS], host_bytes_of[N_HOST_BUFS], host_bytes;
    double cat_bytes[N_CATS];
} Plan;

static size_t dtype_bytes(int dtype) { return dtype == NGPT_DTYPE_F32 ? 4 : 2; }

/* Device scratch of the CPU backend: one shared block of packed GEMM B panels, then per thread: a packed
 * GEMM A block, its own B panels (for the single-threaded matmuls inside attention), and one region for the
 * temporaries of one op at a time: LayerNorm's partial sums (2C), attention's score blocks, the loss's row
 * of exponentials (Vp). */
#define CPU_GEMM_KC 256 /* depth of a packed block */
#define CPU_GEMM_NC 256 /* columns of a packed B block */
#define CPU_GEMM_MC 72  /* rows of a packed A block */
#define CPU_GEMM_NR 16  /* columns of the register tile */
#define CPU_GEMM_MR 6   /* rows of the register tile */
#define CPU_ATTN_QB 32  /* query rows per attention block */
#define CPU_LANES 2     /* a micro-batch runs as two halves at once, each on its own threads (graph lanes) */
#define CPU_GEMM_B_FLOATS ((size_t)CPU_GEMM_KC * CPU_GEMM_NC)
#define CPU_GEMM_A_FLOATS ((size_t)CPU_GEMM_MC * CPU_GEMM_KC)
static size_t cpu_attn_floats(const ngpt_shape *s) { /* a block of scores and one of score gradients */
    return 2 * ALIGN_UP((size_t)MIN(s->T, CPU_ATTN_QB) * (size_t)s->T, 16);
}
static size_t cpu_scratch_per_thread(const ngpt_shape *s) {
    size_t op = MAX(MAX(ALIGN_UP((size_t)2 * s->C, 16), cpu_attn_floats(s)), ALIGN_UP((size_t)s->Vp, 16));
    return (CPU_GEMM_A_FLOATS + CPU_GEMM_B_FLOATS + op) * sizeof(float);
}
static size_t cpu_scratch_bytes(const ngpt_shape *s, int nthreads) {
    return CPU_LANES * CPU_GEMM_B_FLOATS * sizeof(float) + (size_t)MAX(nthreads, 1) * cpu_scratch_per_thread(s) + 64;
}

/* Scratch the CUDA backend's attention backward at head size 64 on its wgmma kernels (sm_90a) uses after D when it is there
 * (the wgmma kernels store dS^T for the dQ kernel, a group of heads at a time; without one head's room the
 * mma.sync kernels run): 16 KB for every (128-key block, 64-query tile) pair at or below the diagonal, for
 * every head, or as many heads as fit in 256 MiB (at least one). Only training runs the backward;
 * `reserve`: a training layout that wants it (plan_wants_ds). */
static size_t cuda_attn_ds_bytes(const ngpt_shape *s, int reserve) {
    if (!reserve || s->NH <= 0 || s->C != s->NH * 64 || s->B <= 0 || s->T <= 0) return 0;
    if ((long long)s->B * s->NH > 65535 || (long long)s->B * s->T > INT_MAX - 128) return 0; /* shapes the kernels refuse (attn_wgmma_shape) */
    const size_t cap = (size_t)256 << 20, nqt = ((size_t)s->T + 63) / 64, nkb = ((size_t)s->T + 127) / 128;
    const size_t tiles = nkb * nqt - nkb * (nkb - 1);
    if (tiles * 128 > INT_MAX) return 0; /* one head's tile rows past an int (T from 524161): the kernels refuse it too */
    const size_t head = tiles * 16384, all = head * (size_t)s->B * (size_t)s->NH;
    return all <= cap ? all : head >= cap ? head : cap / head * head;
}
/* Device scratch the CUDA backend may use (its scratch_bytes must not exceed this; checked at start). */
static size_t cuda_scratch_bytes(const ngpt_shape *s, int attn_ds) {
    size_t BT = (size_t)s->B * s->T, C = (size_t)s->C;
    return ALIGN_UP(BT * sizeof(float) * 2, 256) +                      /* per-row temporaries */
           ALIGN_UP((size_t)s->B * s->NH * s->T * sizeof(float), 1024) + /* attention D = rowsum(dO*O) */
           ALIGN_UP(cuda_attn_ds_bytes(s, attn_ds), 256) +               /* and dS^T */
           ALIGN_UP((size_t)1024 * 4 * C * sizeof(float), 256) +        /* dbias / LayerNorm partial sums */
           ALIGN_UP((size_t)1024 * 2 * C * sizeof(float), 256) +
           ALIGN_UP((size_t)65536 * sizeof(double), 256);               /* reductions */
}

/* whether a layout keeps room for the attention backward's dS^T (cuda_attn_ds_bytes) */
static int plan_wants_ds(const PlanRequest *r, int training) {
    return r->device == DEV_BACKEND_CUDA && training && r->attn_ds && r->dtype != NGPT_DTYPE_F32;
}
/* The scratch slot of a layout whose logits chunk slot takes logits_bytes. The dS^T tiles are needed only
 * by the attention backward, in the layers' backward, when the logits chunk is dead (the classifier's
 * chunks are done), and on a GPU (one lane) the logits chunk is the last buffer before the scratch: so the
 * attention backward gets both as its scratch, and the scratch slot holds only what of the dS^T room the
 * logits slot does not (at 2.68 GiB that took the chunk from 256 rows, with dS^T beside it, to 1408). */
static size_t plan_scratch(const PlanRequest *r, int B, int chunk, int training, size_t logits_bytes) {
    ngpt_shape s = {B, r->T, r->m.C, r->m.NH, r->m.L, r->m.Vp, chunk};
    if (r->device != DEV_BACKEND_CUDA) return cpu_scratch_bytes(&s, r->nthreads);
    size_t base = cuda_scratch_bytes(&s, 0);
    if (!plan_wants_ds(r, training)) return base;
    size_t full = cuda_scratch_bytes(&s, 1);
    return full > base + logits_bytes ? full - logits_bytes : base;
}

/* the sequences of a micro-batch of B that lane 0 (the fullest) holds */
static int lane_seqs(int B, int lanes) { return B / lanes + (B % lanes != 0); } /* (B + lanes - 1) / lanes overflows at B = INT_MAX */

static void layout_batch(BatchLayout *lay, const PlanRequest *r, int B, int lanes, int training, int recompute, int chunk, size_t act) {
    memset(lay, 0, sizeof *lay);
    lay->B = B;
    lay->lanes = lanes;
    lay->lane_B = lane_seqs(B, lanes);
    lay->training = training;
    size_t BT = (size_t)lay->lane_B * r->T, C = (size_t)r->m.C, L = (size_t)r->m.L;
    size_t per_slot[N_BATCH_BUFS] = {0};
    int slots[N_BATCH_BUFS];
    for (int i = 0; i < N_BATCH_BUFS; i++) slots[i] = 1;
    per_slot[B_TOKENS] = BT * 4;
    per_slot[B_TARGETS] = BT * 4;
    per_slot[B_BUCKETS] = (2 * BT + 2) * 4;
    per_slot[B_LOSSES] = BT * 4;
    per_slot[B_RES] = BT * C * act;
    per_slot[B_RES_MID] = BT * C * act;
    per_slot[B_LN1] = BT * C * act;
    per_slot[B_LN1_STATS] = 2 * BT * 4;
    per_slot[B_QKV] = BT * 3 * C * act;
    per_slot[B_ATTY] = BT * C * act;
    per_slot[B_LSE] = (size_t)lay->lane_B * r->m.NH * r->T * 4;
    per_slot[B_LN2] = BT * C * act;
    per_slot[B_LN2_STATS] = 2 * BT * 4;
    per_slot[B_FCH] = BT * 4 * C * act;
    per_slot[B_GELU] = BT * 4 * C * act;
    per_slot[B_LNF] = BT * C * act;
    per_slot[B_LNF_STATS] = 2 * BT * 4;
    per_slot[B_TMP] = BT * C * act;
    per_slot[B_DRES] = training ? BT * C * act : 0;
    per_slot[B_DBIG] = training ? BT * 4 * C * act : 0;
    per_slot[B_DATT] = training ? BT * C * act : 0;
    per_slot[B_LOGITS] = (size_t)chunk * r->m.Vp * act;
    const int fold = plan_wants_ds(r, training) && lanes == 1; /* the logits slot is the scratch's in the layers' backward */
    per_slot[B_SCRATCH] = plan_scratch(r, B, chunk, training, fold ? ALIGN_UP(per_slot[B_LOGITS], ARENA_ALIGN) : 0);
    if (training) {
        int kept = recompute >= RECOMPUTE_LAYERS ? 1 : (int)L; /* whole layers recomputed: one layer's, reused */
        slots[B_RES] = (int)L + 1;
        slots[B_RES_MID] = slots[B_LN1_STATS] = slots[B_QKV] = slots[B_ATTY] = slots[B_LSE] = kept;
        slots[B_LN2_STATS] = slots[B_FCH] = kept;
        slots[B_LN1] = slots[B_LN2] = recompute >= RECOMPUTE_GELU_LN ? 1 : (int)L;
        slots[B_GELU] = recompute >= RECOMPUTE_GELU ? 1 : (int)L;
    } else {
        slots[B_RES] = 2; /* ping-pong between layers */
    }
    size_t off = 0;
    for (int i = 0; i < N_BATCH_BUFS; i++) {
        if (i == B_SCRATCH) continue;
        lay->slots[i] = slots[i];
        lay->slot_bytes[i] = ALIGN_UP(per_slot[i], ARENA_ALIGN);
        lay->off[i] = off;
        lay->bytes[i] = lay->slot_bytes[i] * (size_t)slots[i] * (size_t)lanes;
        off += lay->slot_bytes[i] * (size_t)slots[i];
    }
    lay->lane_bytes = off;
    lay->slots[B_SCRATCH] = 1;
    lay->slot_bytes[B_SCRATCH] = lay->bytes[B_SCRATCH] = ALIGN_UP(per_slot[B_SCRATCH], ARENA_ALIGN);
    lay->off[B_SCRATCH] = off * (size_t)lanes;
    lay->end = lay->off[B_SCRATCH] + lay->bytes[B_SCRATCH];
    lay->backward_scratch = fold ? lay->slot_bytes[B_LOGITS] + lay->slot_bytes[B_SCRATCH] : 0;
}
_Static_assert(B_LOGITS + 1 == B_SCRATCH && B_SCRATCH + 1 == N_BATCH_BUFS,
               "the logits chunk is the last buffer of a lane, so with one lane it ends where the scratch starts");

static int buf_category(int i, int training) {
    switch (i) {
    case B_TOKENS: case B_TARGETS: case B_BUCKETS: case B_LOSSES: return CAT_BATCH;
    case B_LOGITS: return CAT_LOGITS;
    case B_SCRATCH: return CAT_SCRATCH;
    case B_TMP: case B_DRES: case B_DBIG: case B_DATT: return CAT_WORK;
    default: return training ? CAT_ACTS : CAT_WORK;
    }
}

/* Rows of logits per chunk: the planner starts at the default (the classifier's products run well at that
 * height) and, as its last trade, goes below it in multiples of CHUNK_STEP rows (plan_fit_smaller_chunk). */
#define CHUNK_STEP 128
static int default_chunk(const PlanRequest *r) { return r->device == DEV_BACKEND_CUDA ? 2048 : 512; }

/* What a plan takes from the budget: the device arena (on the CPU, both arenas) */
static double plan_need(const Plan *p) {
    return p->req.device == DEV_BACKEND_CUDA ? (double)p->device_bytes : (double)(p->device_bytes + p->host_bytes);
}

/* Sampling's buffers in the batch region (nothing trains meanwhile): the KV cache of S sequences, the activations
 * of n positions of each (a prompt is fed n positions at a time), the last position's logits, the tokens fed (and the
 * step's first position after them), the backend's scratch.
 * S_QKV holds a layer's q, k, v (3C a row) until its attention is done, then GELU's input (4C a row); the residual
 * stream goes from S_X to S_TMP and back in each layer. */
enum { S_KV, S_X, S_LN, S_STATS, S_QKV, S_ATT, S_TMP, S_FC, S_LOGITS, S_TOKENS, S_SCRATCH, N_SAMPLE_BUFS };

static ngpt_shape sample_shape(const ModelShape *m, int S) { return (ngpt_shape){S, m->maxT, m->C, m->NH, m->L, m->Vp, S}; }

/* offsets of sampling's buffers for S sequences fed n positions at a time (act: bytes an activation; scratch: the
 * backend's); returns the bytes */
static size_t sample_layout_of(const ModelShape *m, size_t act, int S, int n, size_t scratch, size_t off[N_SAMPLE_BUFS]) {
    size_t a = act, C = (size_t)m->C, s = (size_t)S, r = s * (size_t)n;
    size_t bytes[N_SAMPLE_BUFS] = {(size_t)m->L * s * 2 * (size_t)m->maxT * C * a, r * C * a, r * C * a, 2 * r * 4, r * 4 * C * a,
                                   r * C * a, r * C * a, r * 4 * C * a, s * (size_t)m->Vp * a, (r + 1) * 4, scratch};
    size_t o = 0;
    for (int i = 0; i < N_SAMPLE_BUFS; i++) {
        off[i] = o;
        o += ALIGN_UP(bytes[i], ARENA_ALIGN);
    }
    return o;
}

/* Lays out everything for one choice; returns the device bytes (CPU: device + host). */
static double plan_layout(Plan *p, const PlanRequest *r, int B, int lanes, int recompute, int chunk_cap, int moments_dtype) {
    memset(p, 0, sizeof *p);
    p->req = *r;
    p->micro_batch = B;
    p->lanes = lanes = r->inference ? 1 : MIN(lanes, B);
    p->grad_accum = (int)(((long long)r->batch_size * r->grad_accum) / B);
    p->recompute = recompute;
    p->moments_dtype = moments_dtype;
    p->act_bytes = dtype_bytes(r->dtype);
    p->moment_bytes = dtype_bytes(moments_dtype);
    size_t sizes[N_PARAM_TENSORS];
    p->nparams = param_sizes(&r->m, sizes);
    size_t off = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        p->param_off[i] = off;
        p->param_len[i] = sizes[i];
        off = ALIGN_UP(off + sizes[i], PARAM_ALIGN);
    }
    p->nparams_padded = off;
    size_t np = p->nparams_padded;
    int mixed = r->dtype != NGPT_DTYPE_F32;
    size_t a = 0;
    size_t train = r->inference ? 0 : 1; /* sampling keeps the parameters alone (fp32 values reach them through
                                          * a window in the batch region: param_window_floats) */
    p->off_params = a; a += ALIGN_UP(np * p->act_bytes, ARENA_ALIGN);
    p->off_grads = a;  a += train * ALIGN_UP(np * p->act_bytes, ARENA_ALIGN);
    p->off_lane_grads = a; a += (size_t)(lanes - 1) * ALIGN_UP(np * p->act_bytes, ARENA_ALIGN);
    p->off_master = a; a += mixed ? train * ALIGN_UP(np * 4, ARENA_ALIGN) : 0;
    p->off_m = a;      a += train * ALIGN_UP(np * p->moment_bytes, ARENA_ALIGN);
    p->off_v = a;      a += train * ALIGN_UP(np * p->moment_bytes, ARENA_ALIGN);
    p->off_region = a;
    p->cat_bytes[CAT_PARAMS] = (double)(p->off_grads - p->off_params);
    p->cat_bytes[CAT_GRADS] = (double)(p->off_master - p->off_grads);
    p->cat_bytes[CAT_MASTER] = (double)(p->off_m - p->off_master);
    p->cat_bytes[CAT_MOMENTS] = (double)(p->off_region - p->off_m);

    size_t lane_BT = (size_t)lane_seqs(B, lanes) * r->T;
    p->logits_chunk = (int)MIN((size_t)chunk_cap, lane_BT);
    layout_batch(&p->train, r, B, lanes, !r->inference, recompute, p->logits_chunk, p->act_bytes);
    p->region_bytes = p->train.end;
    if (r->inference) { /* and room to sample one sequence: a deep model's KV cache outgrows a forward pass of it */
        ngpt_shape one = sample_shape(&r->m, 1);
        size_t off[N_SAMPLE_BUFS], scratch = r->device == DEV_BACKEND_CUDA ? cuda_scratch_bytes(&one, 0) : cpu_scratch_bytes(&one, r->nthreads);
        size_t need = sample_layout_of(&r->m, p->act_bytes, 1, 1, scratch, off);
        if (need > p->region_bytes) { /* counted with the working buffers, so the categories still add up to the arena */
            p->cat_bytes[CAT_WORK] += (double)(need - p->region_bytes);
            p->region_bytes = need;
        }
    }
    for (int i = 0; i < N_BATCH_BUFS; i++) p->cat_bytes[buf_category(i, !r->inference)] += (double)p->train.bytes[i];

    /* eval: the largest micro-batch whose forward-only layout fits in the training region */
    long long cap = MAX(r->eval_seqs, (long long)B);
    int lo = B, hi = (int)MIN(cap, (long long)1 << 20);
    BatchLayout ev;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        int ch = (int)MIN((size_t)chunk_cap, (size_t)lane_seqs(mid, lanes) * r->T);
        layout_batch(&ev, r, mid, lanes, 0, RECOMPUTE_NONE, ch, p->act_bytes);
        if (ev.end <= p->region_bytes) lo = mid; else hi = mid - 1;
    }
    p->eval_micro_batch = lo;
    p->eval_chunk = (int)MIN((size_t)chunk_cap, (size_t)lane_seqs(lo, lanes) * r->T);
    layout_batch(&p->eval, r, lo, lanes, 0, RECOMPUTE_NONE, p->eval_chunk, p->act_bytes);

    p->device_bytes = p->off_region + p->region_bytes;
    /* host arena: NGPT_FENCES sets (micro-batches in flight) of batch staging for the larger of the two
     * micro-batches and loss readback, the bucket counts, I/O staging */
    size_t maxBT = (size_t)MAX(B, lo) * r->T;
    size_t hb[N_HOST_BUFS] = {maxBT * 4, maxBT * 4, (size_t)lanes * (2 * lane_BT + 2) * 4, (size_t)r->m.Vp * 4, maxBT * 4, HOST_STAGING_BYTES};
    int sets[N_HOST_BUFS] = {NGPT_FENCES, NGPT_FENCES, NGPT_FENCES, 1, NGPT_FENCES, 1};
    size_t h = 0;
    for (int i = 0; i < N_HOST_BUFS; i++) {
        p->host_off[i] = h;
        p->host_bytes_of[i] = ALIGN_UP(hb[i], ARENA_ALIGN) * (size_t)sets[i];
        h += p->host_bytes_of[i];
    }
    p->host_bytes = h;
    return plan_need(p);
}

/* whether the plan just laid out (p, of total bytes) fits: within the budget, and each part within the
 * embedder's arena for it */
static int plan_fits(const Plan *p, const PlanRequest *r, double total) {
    return total <= r->budget && !(r->device_cap > 0 && (double)p->device_bytes > r->device_cap) &&
           !(r->host_cap > 0 && (double)p->host_bytes > r->host_cap);
}

/* The smaller-chunk trade, below the default chunk (as plan_layout caps it for this micro-batch): the fewest
 * chunks per pass over a lane's rows that fit, each the smallest multiple of CHUNK_STEP rows that makes that
 * count (2048 rows in a budget that holds 1664: two chunks of 1024, not 1664 + 384). Lays the plan out in
 * *p and returns its chunk, or 0 when not even CHUNK_STEP rows fit. */
static int plan_fit_smaller_chunk(Plan *p, const PlanRequest *r, int B, int lanes, int recompute, int moments_dtype) {
    long long rows = (long long)lane_seqs(B, r->inference ? 1 : MIN(lanes, B)) * r->T;
    int top = (int)MIN((long long)default_chunk(r), rows);
    for (int chunk = (top - 1) / CHUNK_STEP * CHUNK_STEP; chunk >= CHUNK_STEP; chunk -= CHUNK_STEP)
        if (plan_fits(p, r, plan_layout(p, r, B, lanes, recompute, chunk, moments_dtype))) {
            long long passes = (rows + chunk - 1) / chunk;
            int even = (int)(((rows + passes - 1) / passes + CHUNK_STEP - 1) / CHUNK_STEP * CHUNK_STEP);
            if (even < chunk) plan_layout(p, r, B, lanes, recompute, chunk = even, moments_dtype); /* fewer bytes: fits too */
            return chunk;
        }
    return 0;
}

/* Lanes: the CPU runs a micro-batch of two or more sequences as CPU_LANES parts at once, each on its share of
 * the threads, which synchronise once per micro-batch instead of once or twice per op. The split depends on the
 * micro-batch alone, never on the thread count, so the results do not either. */
static int plan_lanes(const PlanRequest *r, int B) { return r->device == DEV_BACKEND_CPU ? MIN(CPU_LANES, B) : 1; }

/* One trade of memory for time: a recompute level, and whether the logits chunk goes below the default */
typedef struct {
    int recompute, smaller_chunk;
} PlanTrade;
/* Micro-batch B's trades in order of cost, at AdamW moments of moments_dtype. Pass 0, those that cost an
 * elementwise pass or less: recompute GELU, recompute LayerNorm too, then a smaller logits chunk (a pinned
 * recompute level in place of the first three). Pass 1: whole layers recomputed (about a quarter more of the
 * layers' compute), then with a smaller chunk. Lays the first plan that fits out in *p and returns 1; 0 if
 * none fits. */
static int plan_fit_micro_batch(Plan *p, const PlanRequest *r, int B, int pass, int moments_dtype) {
    PlanTrade trades[4];
    int n = 0;
    if (pass || r->pin_recompute >= 0) {
        int rc = pass ? RECOMPUTE_LAYERS : r->pin_recompute;
        trades[n++] = (PlanTrade){rc, 0};
        trades[n++] = (PlanTrade){rc, 1};
    } else {
        for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_GELU_LN; rc++) trades[n++] = (PlanTrade){rc, 0};
        trades[n++] = (PlanTrade){RECOMPUTE_GELU_LN, 1};
    }
    const int chunk = r->pin_chunk ? r->pin_chunk : default_chunk(r);
    for (int t = 0; t < n; t++) {
        if (r->pin_chunk && trades[t].smaller_chunk) continue;
        /* lanes cost a second gradient buffer: without them before a costlier trade */
        for (int lanes = plan_lanes(r, B); lanes >= 1; lanes = lanes > 1 ? 1 : 0)
            if (trades[t].smaller_chunk ? plan_fit_smaller_chunk(p, r, B, lanes, trades[t].recompute, moments_dtype) > 0
                                        : plan_fits(p, r, plan_layout(p, r, B, lanes, trades[t].recompute, chunk, moments_dtype)))
                return 1;
    }
    return 0;
}

/* The planner's model of a GPU's training speed (tokens a second, relative) at micro-batch B with a recompute
 * level and a logits chunk, to weigh micro-batches, recompute levels and chunks against each other: the
 * cheaper trades among themselves, and whole layers recomputed at a larger micro-batch against them at a
 * smaller one. Speed = rate / (cost(recompute) x cost(chunk)).
 * rate: the products of a micro-batch fill the SMs' waves better as their outputs grow, counted as B x T x C in
 * GPT-2 124M's rows (C = 768) a 132-SM GPU's worth (an H100, H200): GPU_SPEED_RATES at each halving below 65,536
 * such rows (64 x 1024 rows is 1, 16 x 1024 0.999, 8 x 1024 0.935, 2 x 1024 0.671, 1 x 1024 0.513), a straight
 * line between two halvings, and past the last one half for each halving (one sequence of 1024 rows leaves the
 * SMs idle already: half of it takes as long). A GPU with fewer SMs fills them with fewer rows.
 * cost(recompute): 1 + the time recomputing takes: GELU 4%, GELU with the LayerNorms 7.5% (an H200's profile at
 * micro-batch 2), whole layers their share of the step's FLOPs (15% for GPT-2 124M at block 1024).
 * cost(chunk): a logits chunk smaller than the micro-batch's rows (and the default chunk) costs the classifier's
 * products CLASSIFIER_CHUNK_ROWS more rows a chunk (each chunk reads and writes the whole weight gradient, and a
 * small product's last wave is part empty: on an H200 0.89 us a row at 256 rows, 0.47 at 1408, 0.43 at 2048);
 * the classifier's products take CLASSIFIER_TIME_PER_FLOP of their FLOPs' share of the step (they run faster
 * than its mean: 16% of the time for 29% of GPT-2 124M's FLOPs).
 * Fitted, not derived, on an H200 (the seventh GPU run, 2026-12-04, GPT-2 124M, bf16, relative to micro-batch 64
 * without recomputing, 490,303 tokens/s): 8 without recomputing 0.935, 8 recomputing whole layers 0.803 (chunk
 * 1408) and with bf16 moments 0.793 (chunk 1024), 16 and 2 recomputing GELU and LayerNorm 0.929 and 0.609
 * (chunk 1024), 1 recomputing whole layers 0.395 (chunk 256). The rate at 4 x 1024 rows is the line between 8's
 * and 2's, not measured. Other widths, GPUs and dtypes are its guess. */
static const double GPU_SPEED_RATES[] = {1.0, 0.9995, 0.999, 0.935, 0.803, 0.671, 0.513};
#define CLASSIFIER_CHUNK_ROWS 370.0
#define CLASSIFIER_TIME_PER_FLOP 0.55
/* a training step's FLOPs a token, as the speed model counts them: 6N + 6LCT (the causal attention's half) */
static double plan_flops_per_token(const PlanRequest *r) {
    const double L = r->m.L, C = r->m.C, N = 12.0 * L * C * C + (double)r->m.Vp * C;
    return 6.0 * N + 6.0 * L * C * r->T;
}
static double plan_gpu_speed(const PlanRequest *r, int B, int recompute, int chunk) {
    const double sms = r->gpu_sms > 0 ? r->gpu_sms : 132;
    const double halvings = log2(65536.0 * 768 * (sms / 132) / ((double)B * r->T * r->m.C));
    const int last = (int)(sizeof GPU_SPEED_RATES / sizeof GPU_SPEED_RATES[0]) - 1;
    double rate;
    if (halvings <= 0) rate = GPU_SPEED_RATES[0];
    else if (halvings >= last) rate = GPU_SPEED_RATES[last] * exp2(last - halvings);
    else {
        const int h = (int)halvings;
        rate = GPU_SPEED_RATES[h] + (halvings - h) * (GPU_SPEED_RATES[h + 1] - GPU_SPEED_RATES[h]);
    }
    const double C = r->m.C, flops = plan_flops_per_token(r);
    double cost = 1.0;
    if (recompute == RECOMPUTE_GELU) cost = 1.04;
    else if (recompute == RECOMPUTE_GELU_LN) cost = 1.075;
    else if (recompute >= RECOMPUTE_LAYERS) { /* (L - 1) layers' forward again but the MLP projection: 8C^2 products and causal attention */
        cost = 1.0 + (r->m.L - 1) * (16.0 * C * C + 2.0 * C * r->T) / flops;
        if (cost < 1.075) cost = 1.075; /* it recomputes GELU and the LayerNorms too (one layer, or a small one's share) */
    }
    const double top = MIN((double)(r->pin_chunk ? r->pin_chunk : default_chunk(r)), (double)B * r->T);
    if (chunk > 0 && chunk < top) {
        const double share = CLASSIFIER_TIME_PER_FLOP * 6.0 * (double)r->m.Vp * C / flops;
        cost *= 1.0 + share * ((1.0 + CLASSIFIER_CHUNK_ROWS / chunk) / (1.0 + CLASSIFIER_CHUNK_ROWS / top) - 1.0);
    }
    return rate / cost;
}

static const char *recompute_name(int rc) {
    return rc == RECOMPUTE_LAYERS ? "whole layers" : rc == RECOMPUTE_GELU_LN ? "GELU+LayerNorm" : rc == RECOMPUTE_GELU ? "GELU" : "none";
}

static int plan_make(Plan *p, const PlanRequest *r, char *err, size_t errlen);

/* On a GPU, where the micro-batch asked for (batch_size) fits and was chosen as it is: a larger one, a divisor of the
 * step's sequences, whose products fill the SMs better. Of the larger micro-batches that fit (each at its cheapest
 * trade, plan_fit_micro_batch's pass 0), the smallest that plan_gpu_speed rates within GROW_TIE of the fastest of
 * them, taken where that one is rated at least GROW_GAIN as fast as the plan asked for: *p becomes its plan, and
 * grown_from batch_size. The tokens per step stay as asked; --micro_batch pins batch_size's. GPT-2 124M at nanoGPT's
 * 12 x 40 on a GPU of 132 SMs: 16 x 30, modeled 1.03x (12 x 1024 rows of C = 768 rated 0.972, 16's 0.999; the
 * seventh GPU run's bench step at 12, less its AdamW, came to about 0.97 of training's rate at 64), where on 80 SMs
 * 12 already fills them. The smallest near the fastest, not the fastest: more rows buy under GROW_TIE, and cost memory. */
#define GROW_GAIN 1.01
#define GROW_TIE 0.998
/* The divisors of n (1 .. 2^31 - 1) above lo, ascending, into out, which has room for MAX_DIVISORS (no such n has
 * more); their count. Trial division to the square root: 46,341 turns at the most. */
#define MAX_DIVISORS 1600
static int divisors_above(long long n, long long lo, int *out) {
    int lows = 0, highs = 0, high[MAX_DIVISORS / 2];
    for (long long i = 1; i * i <= n; i++)
        if (n % i == 0) {
            if (i > lo) out[lows++] = (int)i;
            if (n / i != i && n / i > lo) high[highs++] = (int)(n / i);
        }
    while (highs > 0) out[lows++] = high[--highs];
    return lows;
}
static void plan_grow_micro_batch(Plan *p, const PlanRequest *r, long long seqs) {
    const int asked = p->micro_batch;
    const double base = plan_gpu_speed(r, asked, p->recompute, p->logits_chunk);
    int larger[MAX_DIVISORS], weighed = 0; /* the larger divisors, and how many of them fit */
    double speed[MAX_DIVISORS], best = 0;    /* each one's, at its cheapest trade */
    const int n = divisors_above(seqs, asked, larger);
    Plan q;
    for (; weighed < n; weighed++) {
        const int B = larger[weighed];
        if (!plan_fit_micro_batch(&q, r, B, 0, p->moments_dtype)) break; /* nor will any larger one */
        speed[weighed] = plan_gpu_speed(r, B, q.recompute, q.logits_chunk);
        best = MAX(best, speed[weighed]);
        if (plan_gpu_speed(r, B, RECOMPUTE_NONE, 0) >= GPU_SPEED_RATES[0]) { /* the rate at its most: more rows buy nothing */
            weighed++;
            break;
        }
    }
    if (best < base * GROW_GAIN) return;
    int i = 0;
    while (speed[i] < best * GROW_TIE) i++; /* ends at the fastest, at the latest */
    plan_fit_micro_batch(p, r, larger[i], 0, p->moments_dtype); /* fits: it did above */
    p->fits = 1;
    p->grown_from = asked;
    p->grown_gain = speed[i] / base;
}

/* For a pretrained model that does not fit, the advice that follows "What helps: a smaller block_size" into buf:
 * the largest smaller GPT-2 whose plan fits the same request, else any smaller pretrained model; "" for GPT-2
 * 124M, which has none smaller */
static void smaller_gpt2(const PlanRequest *r, char *buf, size_t cap) {
    int size = -1;
    for (int i = 0; i < 4; i++)
        if (r->m.L == gpt2_sizes[i].L && r->m.C == gpt2_sizes[i].C) size = i;
    snprintf(buf, cap, "%s", size == 0 ? "" : ", a smaller pretrained model (init_from)");
    for (int i = size - 1; i >= 0; i--) {
        PlanRequest q = *r;
        q.m = (ModelShape){gpt2_sizes[i].L, gpt2_sizes[i].NH, gpt2_sizes[i].C, r->m.V, r->m.Vp, r->m.maxT, r->m.bias};
        q.pretrained = 0;
        Plan p;
        if (plan_make(&p, &q, NULL, 0) == NGPT_OK) {
            char b[32], split[64] = "";
            if (!r->inference) snprintf(split, sizeof split, "micro-batch %d x %d accumulation steps, ", p.micro_batch, p.grad_accum);
            snprintf(buf, cap, ", a smaller GPT-2: init_from = %s fits (%s%s)", gpt2_sizes[i].name, split, fmt_bytes(b, sizeof b, plan_need(&p)));
            return;
        }
    }
}

/* plan_print's hint: bf16 AdamW moments would buy a plan rated at least this much faster */
#define BF16_MOMENTS_HINT 1.2

/* For a plan that took fp32 moments freely on a GPU: where bf16 moments (half their bytes) would leave room for a
 * plan plan_gpu_speed rates at least BF16_MOMENTS_HINT as fast, that plan's micro-batch, recompute level and
 * gain into *p, which plan_print and training's first lines offer as moments_dtype = bfloat16. fp32 stays the
 * default: it is PyTorch's AdamW, whose loss curve users compare against (GPT-2 124M drops from 8 x 8 with bf16
 * moments at 2.18 GiB to 1 x 64 with fp32 at 2.19, modeled 2.0x slower, measured 2.0x on an H200). top_B is
 * plan_make's largest micro-batch to try. */
static void plan_note_bf16_moments(Plan *p, const PlanRequest *r, int top_B) {
    const int top_rc = r->pin_recompute >= 0 ? r->pin_recompute : RECOMPUTE_NONE;
    const double speed = plan_gpu_speed(r, p->micro_batch, p->recompute, p->logits_chunk);
    if (plan_gpu_speed(r, top_B, top_rc, 0) / speed < BF16_MOMENTS_HINT)
        return; /* not even the fastest plan could be rated that much faster */
    PlanRequest q = *r;
    q.pin_moments = MOMENTS_BF16;
    Plan alt;
    if (plan_make(&alt, &q, NULL, 0) != NGPT_OK) return;
    double gain = plan_gpu_speed(r, alt.micro_batch, alt.recompute, alt.logits_chunk) / speed;
    if (gain < BF16_MOMENTS_HINT) return;
    p->bf16_micro_batch = alt.micro_batch;
    p->bf16_recompute = alt.recompute;
    p->bf16_grad_accum = alt.grad_accum;
    p->bf16_device_bytes = alt.device_bytes;
    p->bf16_gain = gain;
}

/* Fills *p with the plan for r. Returns NGPT_OK, or NGPT_ERR_NOMEM with the smallest plan in *p and an
 * explanation in err, or NGPT_ERR_ARG for a request that cannot be planned at all. */
static int plan_make(Plan *p, const PlanRequest *r, char *err, size_t errlen) {
    long long seqs = (long long)r->batch_size * r->grad_accum;
    if (r->T < 1 || r->batch_size < 1 || r->grad_accum < 1 || r->m.L < 1 || r->m.C < 1 || r->m.NH < 1 || r->m.V < 1)
        return fail(err, errlen, NGPT_ERR_ARG, "plan: sizes must be positive");
    if (r->inference) { /* sampling: the largest micro-batch up to batch_size whose forward pass fits */
        for (int B = r->batch_size; B >= 1; B--)
            if (plan_fits(p, r, plan_layout(p, r, B, 1, RECOMPUTE_NONE, r->pin_chunk ? r->pin_chunk : default_chunk(r), NGPT_DTYPE_F32)) ||
                (!r->pin_chunk && plan_fit_smaller_chunk(p, r, B, 1, RECOMPUTE_NONE, NGPT_DTYPE_F32))) {
                p->fits = 1;
                return NGPT_OK;
            }
        char nb[32], bb[32], smaller[300] = "";
        double need = plan_layout(p, r, 1, 1, RECOMPUTE_NONE, r->pin_chunk ? r->pin_chunk : CHUNK_STEP, NGPT_DTYPE_F32);
        if (r->pretrained) smaller_gpt2(r, smaller, sizeof smaller);
        fmt_need_and_budget(nb, bb, sizeof nb, need, r->budget);
        return fail(err, errlen, NGPT_ERR_NOMEM,
                    "does not fit: %s this model (its parameters and the forward pass of one sequence of block_size %d) needs %s "
                    "and the budget is %s. What helps: %s%s%smore memory (a larger max_memory, another device)%s",
                    r->eval_only ? "evaluating" : "sampling", r->T, nb, bb,
                    r->resumed ? "" : "a smaller block_size", smaller, r->resumed ? "" : ", or ",
                    r->resumed ? "; the model and its block_size are the checkpoint's (init_from = resume)" : "");
    }
    if (r->pin_micro_batch && (r->pin_micro_batch > seqs || seqs % r->pin_micro_batch))
        return fail(err, errlen, NGPT_ERR_ARG,
                    "micro_batch = %d must divide batch_size * gradient_accumulation_steps = %lld so the tokens per step stay as asked",
                    r->pin_micro_batch, seqs);
    if (r->pin_moments == MOMENTS_BF16 && r->dtype == NGPT_DTYPE_F32)
        return fail(err, errlen, NGPT_ERR_ARG,
                    "moments_dtype = bfloat16 needs a GPU run in dtype bfloat16 or float16 (this one is float32%s): a float32 run "
                    "keeps its AdamW moments in fp32", r->device == DEV_BACKEND_CPU ? ", on the cpu" : "");
    int moment_opts[2] = {r->pin_moments == MOMENTS_BF16 ? NGPT_DTYPE_BF16 : NGPT_DTYPE_F32, NGPT_DTYPE_BF16};
    int n_moment_opts = r->dtype == NGPT_DTYPE_F32 || r->pin_moments != MOMENTS_FREE ? 1 : 2;
    for (int mo = 0; mo < n_moment_opts; mo++) {
        long long B0 = r->pin_micro_batch ? r->pin_micro_batch : MIN((long long)r->batch_size, seqs);
        /* Pass 0, the cheaper trades: on the CPU their largest micro-batch that fits; on a GPU the micro-batch
         * (each at its cheapest trade that fits) that plan_gpu_speed rates fastest, the larger on a tie, so a
         * smaller one without recomputing can win over a larger one recomputing GELU and LayerNorm. Pass 1,
         * whole layers: on the CPU their largest micro-batch that fits, and only when no cheaper trade fits at
         * any micro-batch (its speed hardly grows with the micro-batch); on a GPU the micro-batch plan_gpu_speed
         * rates fastest (the largest can fit only with a small logits chunk), taken where it is rated ahead of
         * pass 0's. No margin for the model's error: with one, more memory could pick a plan the model rates
         * slower (the cheaper trades at 4 where a smaller budget got whole layers at 8); without, more memory
         * at one AdamW moment precision only adds plans to choose from (fp32 moments still come first where
         * they fit, at any speed). Last, on a GPU where batch_size's micro-batch was chosen as it is, one above
         * it where the model rates that faster (plan_grow_micro_batch) */
        Plan cheap, layers;
        int cheap_B = 0, layers_B = 0, largest_B = 0, largest_rc = 0, largest_chunk = 0;
        double cheap_speed = 0, layers_speed = 0;
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1 && (r->pin_recompute >= 0 ||
                              (cheap_B && (r->device == DEV_BACKEND_CPU || plan_gpu_speed(r, (int)B0, RECOMPUTE_LAYERS, 0) <= cheap_speed))))
                break; /* a pinned level is tried in pass 0; on the CPU nothing beats the cheaper trades, on a GPU nothing
                          beats a plan rated at least whole layers' best (the largest micro-batch at the default chunk) */
            for (long long B = B0; B >= 1; B--) {
                /* nothing smaller can be rated faster: rate grows with B, and recomputing and smaller chunks only cost */
                if (pass == 0 && cheap_B && (r->device == DEV_BACKEND_CPU || plan_gpu_speed(r, (int)B, RECOMPUTE_NONE, 0) <= cheap_speed))
                    break;
                if (pass == 1 && layers_B && (r->device == DEV_BACKEND_CPU || plan_gpu_speed(r, (int)B, RECOMPUTE_LAYERS, 0) <= layers_speed))
                    break;
                if (seqs % B || (r->pin_micro_batch && B != r->pin_micro_batch) || !plan_fit_micro_batch(p, r, (int)B, pass, moment_opts[mo]))
                    continue;
                double speed = plan_gpu_speed(r, (int)B, p->recompute, p->logits_chunk);
                if (pass == 1) {
                    if (!layers_B || speed > layers_speed) {
                        layers = *p;
                        layers_B = (int)B;
                        layers_speed = speed;
                    }
                    continue;
                }
                if (!largest_B) {
                    largest_B = (int)B;
                    largest_rc = p->recompute;
                    largest_chunk = p->logits_chunk;
                }
                if (!cheap_B || speed > cheap_speed) {
                    cheap = *p;
                    cheap_B = (int)B;
                    cheap_speed = speed;
                }
            }
        }
        int whole_layers = layers_B && (!cheap_B || layers_speed > cheap_speed);
        if (!whole_layers && !cheap_B) continue;
        *p = whole_layers ? layers : cheap;
        p->fits = 1;
        if (largest_B && (largest_B != p->micro_batch || largest_rc != p->recompute)) {
            p->passed_micro_batch = largest_B;
            p->passed_recompute = largest_rc;
            p->passed_chunk = largest_chunk;
        }
        if (r->device == DEV_BACKEND_CUDA && !r->pin_micro_batch && p->micro_batch == B0 && !p->passed_micro_batch) plan_grow_micro_batch(p, r, seqs);
        if (n_moment_opts == 2 && mo == 0 && r->device == DEV_BACKEND_CUDA) plan_note_bf16_moments(p, r, (int)B0);
        return NGPT_OK;
    }
    /* nothing fits: describe the smallest plan */
    int rc = r->pin_recompute >= 0 ? r->pin_recompute : RECOMPUTE_LAYERS;
    int B = r->pin_micro_batch ? r->pin_micro_batch : 1;
    double need = plan_layout(p, r, B, 1, rc, r->pin_chunk ? r->pin_chunk : CHUNK_STEP, moment_opts[n_moment_opts - 1]);
    if (!err) return NGPT_ERR_NOMEM; /* no message wanted: nor the plans it would weigh (plan_note_bf16_moments' call) */
    char nb[32], bb[32], hint[160] = "", unpin[400] = "";
    Plan tmp;
    int block_helps = 0; /* the largest of half the block, a quarter, ... down to 64, whose smallest plan (pins kept) fits */
    for (int T = r->T / 2; T >= 64 && !block_helps; T /= 2) {
        PlanRequest half = *r;
        half.T = T;
        char hb[32];
        double need_half = plan_layout(&tmp, &half, B, 1, rc, r->pin_chunk ? r->pin_chunk : CHUNK_STEP, moment_opts[n_moment_opts - 1]);
        if ((block_helps = plan_fits(&tmp, &half, need_half)))
            snprintf(hint, sizeof hint, "a smaller block_size (block_size %d would need %s), ", T, fmt_bytes(hb, sizeof hb, need_half));
    }
    if (r->pin_micro_batch || r->pin_recompute >= 0 || r->pin_chunk || r->pin_moments == MOMENTS_F32) { /* what the planner would choose without the pins */
        PlanRequest free_req = *r;
        free_req.pin_micro_batch = free_req.pin_chunk = 0;
        free_req.pin_moments = r->pin_moments == MOMENTS_BF16 ? MOMENTS_BF16 : MOMENTS_FREE; /* a bf16 pin only saves memory */
        free_req.pin_recompute = -1;
        if (plan_make(&tmp, &free_req, NULL, 0) == NGPT_OK) {
            const char *pinned[4] = {r->pin_micro_batch ? "micro_batch" : NULL, r->pin_recompute >= 0 ? "recompute" : NULL,
                                     r->pin_chunk ? "logits_chunk" : NULL,
                                     r->pin_moments == MOMENTS_F32 && tmp.moments_dtype != moment_opts[0] ? "moments_dtype" : NULL};
            /* (an fp32 moments pin the free plan agrees with is not named) */
            char names[80] = "", fb[32];
            for (int k = 0; k < 4; k++)
                if (pinned[k]) snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", pinned[k]);
            snprintf(unpin, sizeof unpin, "leaving %s to the planner (it would pick micro-batch %d x %d accumulation steps, recompute %s, "
                     "logits chunk %d%s: %s), ", names, tmp.micro_batch, tmp.grad_accum, recompute_name(tmp.recompute), tmp.logits_chunk,
                     tmp.moments_dtype == NGPT_DTYPE_BF16 ? ", bf16 AdamW moments" : "", fmt_bytes(fb, sizeof fb, plan_need(&tmp)));
        }
    }
    char smaller[300] = ", a smaller model (n_layer, n_embd)"; /* (", " first, as smaller_gpt2 writes it) */
    if (r->pretrained) smaller_gpt2(r, smaller, sizeof smaller);
    fmt_need_and_budget(nb, bb, sizeof nb, need, r->budget);
    if (r->resumed)
        return fail(err, errlen, NGPT_ERR_NOMEM,
                    "does not fit: the smallest plan (micro-batch %d, recompute %s, logits chunk %d, %s AdamW moments) needs %s "
                    "and the budget is %s. What helps: %smore memory (a larger max_memory, another device); the model and its "
                    "block_size are the checkpoint's (init_from = resume)",
                    B, recompute_name(rc), p->logits_chunk, p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", nb, bb, unpin);
    /* what helps: each item ends ", " (a smaller block_size only where one fits) */
    return fail(err, errlen, NGPT_ERR_NOMEM,
                "does not fit: the smallest plan (micro-batch %d, recompute %s, logits chunk %d, %s AdamW moments) needs %s "
                "and the budget is %s. What helps: %s%s%s%s%smore memory (a larger max_memory, another device)",
                B, recompute_name(rc), p->logits_chunk, p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", nb, bb, unpin, hint,
                smaller[0] ? smaller + 2 : "", smaller[0] ? ", " : "", unpin[0] || hint[0] || smaller[0] ? "or " : "");
}

static const char *dtype_name(int dtype) {
    return dtype == NGPT_DTYPE_BF16 ? "bfloat16" : dtype == NGPT_DTYPE_F16 ? "float16" : "float32";
}

/* GPU budget: free memory (or max_memory) minus this margin for what the CUDA runtime allocates after
 * startup (launch resources; kernel modules, where an embedder leaves loading lazy); see docs/memory.md. */
#define CUDA_SAFETY_MARGIN ((size_t)256 << 20)

/* *budget less that margin; an error when nothing is left (from_max_memory: the bytes are max_memory's, else the
 * card's free memory) */
static int cuda_budget_after_margin(double *budget, int from_max_memory, char *err, size_t errlen) {
    char have[32], margin[32];
    if (*budget <= (double)CUDA_SAFETY_MARGIN)
        return fail(err, errlen, NGPT_ERR_NOMEM, "%s %s%s, no more than the %s kept for the CUDA runtime (kernels it loads, launch "
                                                  "resources): %s", from_max_memory ? "max_memory is" : "the GPU has",
                    fmt_bytes(have, sizeof have, *budget), from_max_memory ? "" : " free", fmt_bytes(margin, sizeof margin, (double)CUDA_SAFETY_MARGIN),
                    from_max_memory ? "give it more than that" : "the rest is held by other processes (nvidia-smi lists them)");
    *budget -= (double)CUDA_SAFETY_MARGIN;
    return NGPT_OK;
}

/* The parameters as training counts them: without the padded vocabulary rows the arena holds besides */
static size_t plan_params_unpadded(const Plan *p) { return p->nparams - (size_t)(p->req.m.Vp - p->req.m.V) * p->req.m.C; }

/* Why the micro-batch is above batch_size (p->grown_from set), into buf: plan's why line, training's note */
static const char *grown_micro_batch_why(const Plan *p, char *buf, size_t cap) {
    const PlanRequest *r = &p->req;
    snprintf(buf, cap, "micro-batch %d, above batch_size %d: modeled %.2fx as fast on a GPU of %d SMs%s, the tokens per step as asked "
             "(--micro_batch=%d keeps batch_size's)", p->micro_batch, p->grown_from, p->grown_gain, r->gpu_sms > 0 ? r->gpu_sms : 132,
             r->gpu_sms > 0 ? "" : " (assumed: no GPU here)", p->grown_from);
    return buf;
}

/* The offer of bf16 AdamW moments (p->bf16_micro_batch set), into buf */
static const char *bf16_moments_hint(const Plan *p, char *buf, size_t cap) {
    const PlanRequest *r = &p->req;
    long long seqs = (long long)r->batch_size * r->grad_accum;
    snprintf(buf, cap, "moments_dtype = bfloat16 fits micro-batch %d x %lld, recompute %s: modeled %.2fx as fast on a GPU of %d SMs%s "
             "(AdamW moments in bf16, half their bytes; fp32, as PyTorch's AdamW, stays the default)",
             p->bf16_micro_batch, seqs / p->bf16_micro_batch, recompute_name(p->bf16_recompute), p->bf16_gain,
             r->gpu_sms > 0 ? r->gpu_sms : 132, r->gpu_sms > 0 ? "" : " (assumed: no GPU here)");
    return buf;
}

CLI_USED static void plan_print(const Plan *p, FILE *f) {
    const PlanRequest *r = &p->req;
    char b1[32], b2[32];
    /* the count training prints (without the padded vocabulary rows), then what the arena holds */
    fprintf(f, "model        L=%d NH=%d C=%d V=%d (padded %d) block_size=%d bias=%s: %s parameters (%s with the padding)\n", r->m.L,
            r->m.NH, r->m.C, r->m.V, r->m.Vp, r->T, r->m.bias ? "yes" : "no", fmt_params(b1, sizeof b1, (double)plan_params_unpadded(p)),
            fmt_params(b2, sizeof b2, (double)p->nparams));
    fprintf(f, "device       %s, %s, budget %s", r->device == DEV_BACKEND_CUDA ? "cuda" : "cpu", dtype_name(r->dtype),
            fmt_bytes(b1, sizeof b1, r->budget));
    if (r->device == DEV_BACKEND_CUDA)
        fprintf(f, " (%s, less %s kept for the CUDA runtime)", fmt_bytes(b1, sizeof b1, r->budget + (double)CUDA_SAFETY_MARGIN),
                fmt_bytes(b2, sizeof b2, (double)CUDA_SAFETY_MARGIN));
    fputc('\n', f);
    if (r->inference && r->eval_only) {
        fprintf(f, "eval_only    the parameters and forward passes only: no gradients, AdamW moments, fp32 master or kept activations\n");
        fprintf(f, "chosen       eval micro-batch %d (eval_iters x batch_size = %lld sequences a split), logits chunk %d rows\n",
                p->eval_micro_batch, r->eval_seqs, p->eval_chunk);
    } else if (r->inference) {
        fprintf(f, "sampling     the parameters and a forward pass only: no gradients, AdamW moments, fp32 master or kept activations\n");
        fprintf(f, "chosen       up to %d sequence%s at once (batch_size %d), logits chunk %d rows\n", p->micro_batch,
                p->micro_batch == 1 ? "" : "s", r->batch_size, p->logits_chunk);
    } else {
        fprintf(f, "tokens/step  %lld = batch_size %d x gradient_accumulation_steps %d x block_size %d (as asked)\n",
                (long long)r->batch_size * r->grad_accum * r->T, r->batch_size, r->grad_accum, r->T);
        fprintf(f, "chosen       micro-batch %d x accumulation %d, recompute %s, logits chunk %d rows, AdamW moments %s\n",
                p->micro_batch, p->grad_accum, recompute_name(p->recompute), p->logits_chunk,
                p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16");
        if (p->passed_micro_batch) {
            char chosen[64]; /* "whole layers at 8 are", "recompute none at 8 is" */
            if (p->recompute == RECOMPUTE_LAYERS) snprintf(chosen, sizeof chosen, "whole layers at %d are", p->micro_batch);
            else snprintf(chosen, sizeof chosen, "recompute %s at %d is", recompute_name(p->recompute), p->micro_batch);
            fprintf(f, "why          recompute %s fits micro-batch %d; %s modeled %.2fx as fast on a GPU of %d SMs%s (docs/memory.md)\n",
                    recompute_name(p->passed_recompute), p->passed_micro_batch, chosen,
                    plan_gpu_speed(r, p->micro_batch, p->recompute, p->logits_chunk) /
                        plan_gpu_speed(r, p->passed_micro_batch, p->passed_recompute, p->passed_chunk),
                    r->gpu_sms > 0 ? r->gpu_sms : 132, r->gpu_sms > 0 ? "" : " (assumed: no GPU here)");
        }
        if (p->grown_from) {
            char why[256];
            fprintf(f, "why          %s (docs/memory.md)\n", grown_micro_batch_why(p, why, sizeof why));
        }
        if (p->bf16_micro_batch) {
            char hint[300];
            fprintf(f, "faster       %s\n", bf16_moments_hint(p, hint, sizeof hint));
        }
        fprintf(f, "eval         micro-batch %d (in the training activation memory), logits chunk %d rows\n", p->eval_micro_batch,
                p->eval_chunk);
    }
    if (p->lanes > 1) {
        fprintf(f, "lanes        %d: each micro-batch runs as %d parts (up to %d sequences each, %d in evaluation), each with its own gradients, ",
                p->lanes, p->lanes, p->train.lane_B, p->eval.lane_B);
        if (r->nthreads % p->lanes == 0)
            fprintf(f, "at once on %d thread%s each\n", r->nthreads / p->lanes, r->nthreads / p->lanes > 1 ? "s" : "");
        else if (r->nthreads == 1)
            fprintf(f, "one after the other on the one thread; the results are the same\n");
        else /* as cpu_lanes_at_once decides: unequal teams would wait for each other */
            fprintf(f, "one after the other on all %d threads (an odd count); the results are the same\n", r->nthreads);
    }
    fprintf(f, "memory       %-34s %12s\n", "category", "bytes");
    for (int c = 0; c < N_CATS; c++)
        if (p->cat_bytes[c] > 0) fprintf(f, "             %-34s %12s\n", cat_names[c], fmt_bytes(b1, sizeof b1, p->cat_bytes[c]));
    fprintf(f, "             %-34s %12s\n", "device arena (one allocation)", fmt_bytes(b1, sizeof b1, (double)p->device_bytes));
    fprintf(f, "             %-34s %12s\n", r->device == DEV_BACKEND_CUDA ? "host arena (pinned)" : "host arena",
            fmt_bytes(b2, sizeof b2, (double)p->host_bytes));
}

/* s as a JSON string, quotes included */
CLI_USED static void json_print_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    fputc('"', f);
}

/* The plan as one JSON object; error (NULL: none) is why it does not fit. */
CLI_USED static void plan_print_json(const Plan *p, const char *error, FILE *f) {
    const PlanRequest *r = &p->req;
    fprintf(f, "{\"fits\": %s, ", p->fits ? "true" : "false");
    if (error) {
        fprintf(f, "\"error\": ");
        json_print_string(f, error);
        fprintf(f, ", ");
    }
    fprintf(f, "\"sampling\": %s, \"eval_only\": %s, \"device\": \"%s\", \"dtype\": \"%s\", \"budget\": %.0f, \"n_layer\": %d, "
               "\"n_head\": %d, \"n_embd\": %d, \"vocab_size\": %d, \"padded_vocab_size\": %d, \"block_size\": %d, \"parameters\": %zu, ",
            r->inference && !r->eval_only ? "true" : "false", r->eval_only ? "true" : "false",
            r->device == DEV_BACKEND_CUDA ? "cuda" : "cpu",
            dtype_name(r->dtype), r->budget, r->m.L, r->m.NH, r->m.C, r->m.V, r->m.Vp, r->T, p->nparams);
    /* a forward-only plan leaves out the training keys; a sampling plan's micro_batch is the sequences generated
     * at once, an eval_only plan's eval_micro_batch the sequences an evaluation pass takes */
    if (!r->inference)
        fprintf(f, "\"tokens_per_step\": %lld, \"gradient_accumulation_steps\": %d, \"recompute\": \"%s\", \"moments\": \"%s\", "
                   "\"moments_dtype\": \"%s\", ", (long long)r->batch_size * r->grad_accum * r->T, p->grad_accum, recompute_name(p->recompute),
                p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", p->moments_dtype == NGPT_DTYPE_F32 ? "float32" : "bfloat16");
    if (p->bf16_micro_batch) /* plan_print's "faster" line: the plan --moments_dtype=bfloat16 gets */
        fprintf(f, "\"bf16_moments_offer\": {\"moments_dtype\": \"bfloat16\", \"micro_batch\": %d, \"gradient_accumulation_steps\": %d, "
                   "\"recompute\": \"%s\", \"device_bytes\": %zu, \"modeled_speedup\": %.3f}, ", p->bf16_micro_batch, p->bf16_grad_accum,
                recompute_name(p->bf16_recompute), p->bf16_device_bytes, p->bf16_gain);
    if (p->grown_from) /* plan_print's why line for it */
        fprintf(f, "\"micro_batch_above_batch_size\": {\"batch_size\": %d, \"modeled_speedup\": %.3f}, ", p->grown_from, p->grown_gain);
    if (!r->inference || r->eval_only) fprintf(f, "\"eval_micro_batch\": %d, ", p->eval_micro_batch);
    fprintf(f, "\"micro_batch\": %d, \"logits_chunk\": %d, \"lanes\": %d, \"device_bytes\": %zu, \"host_bytes\": %zu, \"bytes\": {",
            p->micro_batch, p->logits_chunk, p->lanes, p->device_bytes, p->host_bytes);
    for (int c = 0; c < N_CATS; c++) fprintf(f, "%s\"%s\": %.0f", c ? ", " : "", cat_keys[c], p->cat_bytes[c]);
    /* every buffer: device offsets are from the arena start, the batch region is laid out twice; a batch
     * buffer is [lane 0's offset, one lane's bytes], lane g's copy lane_bytes * g further */
    fprintf(f, "}, \"parameters_by_tensor\": {");
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        fprintf(f, "%s\"%s\": {\"offset_elements\": %zu, \"elements\": %zu}", i ? ", " : "", param_names[i], p->param_off[i], p->param_len[i]);
    fprintf(f, "}, \"device_buffers\": {\"params\": [%zu, %zu], \"grads\": [%zu, %zu], \"lane_grads\": [%zu, %zu], "
               "\"master\": [%zu, %zu], \"adam_m\": [%zu, %zu], \"adam_v\": [%zu, %zu]",
            p->off_params, p->off_grads - p->off_params, p->off_grads, p->off_lane_grads - p->off_grads, p->off_lane_grads,
            p->off_master - p->off_lane_grads, p->off_master, p->off_m - p->off_master, p->off_m, p->off_v - p->off_m, p->off_v,
            p->off_region - p->off_v);
    const BatchLayout *lays[2] = {&p->train, &p->eval};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "}, \"%s_lane_bytes\": %zu, \"%s_buffers\": {", k ? "eval" : "train", lays[k]->lane_bytes, k ? "eval" : "train");
        for (int i = 0; i < N_BATCH_BUFS; i++)
            fprintf(f, "%s\"%s\": [%zu, %zu]", i ? ", " : "", batch_buf_names[i], p->off_region + lays[k]->off[i],
                    lays[k]->slot_bytes[i] * (size_t)lays[k]->slots[i]);
    }
    fprintf(f, "}, \"host_buffers\": {");
    for (int i = 0; i < N_HOST_BUFS; i++) fprintf(f, "%s\"%s\": [%zu, %zu]", i ? ", " : "", host_buf_names[i], p->host_off[i], p->host_bytes_of[i]);
    fprintf(f, "}}\n");
}

/* ======================================================================================================
 * CPU backend: fp32, every op threaded over the pool, or over a lane's team of threads (run_lanes).
 * Reductions run in a fixed order that does not follow the threads, so results do not depend on their count.
 * ==================================================================================================== */

/* The threads an op runs on: all of them, or those of one lane (run_lanes). Thread i of a team is the pool's
 * thread i and uses the per-thread scratch of thread tid0 + i; the team's parallel GEMMs share B panels
 * number `panel`. */
typedef struct CpuBackend CpuBackend;
typedef struct {
    CpuBackend *cb;
    Pool *pool;
    int tid0, n, panel;
} CpuTeam;

struct CpuBackend {
    ngpt_backend be;
    PoolStorage pool;           /* every thread (the caller is thread 0) */
    int nthreads;
    int active;                 /* threads the ops use now: nthreads, or 1 (cpu_use_all_threads) */
    CpuTeam all, team[CPU_LANES];
    PoolStorage lane_pool;      /* one thread per lane, each the thread 0 of its team's pool */
    PoolStorage team_pool[CPU_LANES];
    char *scratch;
    size_t scratch_bytes, scratch_per_thread;
    void *arena;
};

static CpuBackend *cpu_of(ngpt_backend *be) { return (CpuBackend *)be->impl; } /* impl: a copy of the table works too */

/* the team of the calling thread: its lane's while it runs one (cpu_run_lanes), else every thread */
static _Thread_local const CpuTeam *cpu_lane_team;
static const CpuTeam *cpu_team(CpuBackend *cb) {
    const CpuTeam *t = cpu_lane_team;
    return t && t->cb == cb ? t : &cb->all;
}

/* Scratch layout (sized by cpu_scratch_bytes): [CPU_LANES shared B panels (one per team) | per thread: A block
 * | B panels | one region for the temporaries of the op running now (LayerNorm partial sums, attention score
 * blocks, a row of exponentials in the loss)] */
static float *cpu_scratch_shared_b(CpuBackend *cb, const CpuTeam *t) { return (float *)cb->scratch + (size_t)t->panel * CPU_GEMM_B_FLOATS; }
static float *cpu_scratch_thread(CpuBackend *cb, int tid) {
    return (float *)(cb->scratch + CPU_LANES * CPU_GEMM_B_FLOATS * sizeof(float) + (size_t)tid * cb->scratch_per_thread);
}
static float *cpu_scratch_a(CpuBackend *cb, int tid) { return cpu_scratch_thread(cb, tid); }
static float *cpu_scratch_b(CpuBackend *cb, int tid) { return cpu_scratch_thread(cb, tid) + CPU_GEMM_A_FLOATS; }
static float *cpu_scratch_op(CpuBackend *cb, int tid) { return cpu_scratch_b(cb, tid) + CPU_GEMM_B_FLOATS; }

typedef void (*range_fn)(void *ctx, size_t lo, size_t hi, int tid);
typedef struct {
    range_fn body;
    void *ctx;
    size_t n;
    int tid0;
} ParFor;

static void parfor_thunk(void *arg, int i, int nt) {
    ParFor *pf = (ParFor *)arg;
    size_t lo, hi;
    split_range(pf->n, i, nt, &lo, &hi);
    if (lo < hi) pf->body(pf->ctx, lo, hi, pf->tid0 + i);
}

/* the same over chunks of `chunk` items that the threads take in turn from a shared counter: for work whose
 * result does not depend on which thread does it (rows of a product), so a thread slowed by the machine holds
 * up the others for at most one chunk */
typedef struct {
    range_fn body;
    void *ctx;
    size_t n, chunk;
    int tid0;
    _Atomic size_t next;
} ParForDyn;

static void parfor_dyn_thunk(void *arg, int i, int nt) {
    (void)nt;
    ParForDyn *pf = (ParForDyn *)arg;
    for (;;) {
        size_t lo = atomic_fetch_add_explicit(&pf->next, pf->chunk, memory_order_relaxed);
        if (lo >= pf->n) return;
        pf->body(pf->ctx, lo, MIN(lo + pf->chunk, pf->n), pf->tid0 + i);
    }
}

/* Both run on the calling thread's team (cpu_team); tid is the scratch index of the thread running body. */
static void parallel_for_chunks(CpuBackend *cb, size_t n, size_t chunk, range_fn body, void *ctx) {
    const CpuTeam *t = cpu_team(cb);
    if (n == 0) return;
    if (cb->active == 1 || t->n == 1 || n <= chunk) { body(ctx, 0, n, t->tid0); return; }
    ParForDyn pf = {body, ctx, n, chunk, t->tid0, 0};
    pool_run(t->pool, parfor_dyn_thunk, &pf);
}

/* body(ctx, lo, hi, tid) over [0, n) split in contiguous ranges; small jobs stay on the calling thread. */
static void parallel_for(CpuBackend *cb, size_t n, size_t grain, range_fn body, void *ctx) {
    const CpuTeam *t = cpu_team(cb);
    if (n == 0) return;
    if (cb->active == 1 || t->n == 1 || n < 2 * grain) { body(ctx, 0, n, t->tid0); return; }
    ParFor pf = {body, ctx, n, t->tid0};
    pool_run(t->pool, parfor_thunk, &pf);
}

/* ---- 8-wide vectors (GCC/Clang vector extensions: AVX with -march=native, plain SSE or scalar code otherwise) ---- */

typedef float v8f __attribute__((vector_size(32)));
typedef float v8fu __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* a * b + c, fused where the target has FMA (ISO C modes such as -std=c11 do not contract a * b + c); a macro,
 * as a function taking 32-byte vectors would change the ABI on targets without AVX */
#if defined(__FMA__) && defined(__AVX__)
#define VFMA(a, b, c) ((v8f)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define SFMA(a, b, c) fmaf(a, b, c) /* one instruction with FMA (and vectorised by gcc in simple loops) */
#else
#define VFMA(a, b, c) ((a) * (b) + (c))
#define SFMA(a, b, c) ((a) * (b) + (c))
#endif
#define V8(c) ((v8f){c, c, c, c, c, c, c, c})

/* ---- vectorisable math: exp and erf without libm calls, so elementwise loops compile to SIMD (gcc needs
 * -fno-trapping-math to if-convert them; build.sh passes it) ---- */

/* e^x for x in about [-87, 88]: 2^k * p(r) with r = x - k ln2, p a degree-6 polynomial in Horner form with
 * fused multiply-adds where the target has them (rel. error ~1e-7). Outside that range x is clamped; a NaN
 * comes back as NaN (the clamp sends it to -87 first, so the integer conversion never sees it: a non-finite
 * loss must stay visible). */
static inline float fast_expf(float x) {
    float c = x > -87.0f ? x : -87.0f;
    c = c < 88.0f ? c : 88.0f;
    int32_t ki = (int32_t)SFMA(c, 1.44269504f, 256.5f) - 256; /* round(c / ln2); the shift keeps the cast a floor */
    float k = (float)ki;
    float r = SFMA(-k, 1.42860677e-6f, SFMA(-k, 0.693145752f, c));
    float p = SFMA(0.00138878408f, r, 0.00833336823f);
    p = SFMA(p, r, 0.0416666493f);
    p = SFMA(p, r, 0.166666672f);
    p = SFMA(p, r, 0.5f);
    p = SFMA(p, r, 1.0f);
    p = SFMA(p, r, 1.0f);
    int32_t bits = (ki + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return x == x ? p * scale : x;
}

/* erf(x), Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7) */
static inline float erf_with_gauss(float x, float gauss) { /* gauss = exp(-x^2), shared with GELU's backward */
    float ax = x < 0 ? -x : x, t = 1.0f / SFMA(0.3275911f, ax, 1.0f);
    float p = SFMA(1.061405429f, t, -1.453152027f);
    p = SFMA(p, t, 1.421413741f);
    p = SFMA(p, t, -0.284496736f);
    p = SFMA(p, t, 0.254829592f);
    float y = SFMA(-(t * p), gauss, 1.0f);
    return x < 0 ? -y : y;
}
static inline float fast_erff(float x) { return erf_with_gauss(x, fast_expf(-x * x)); }

/* 8 lanes of fast_expf and erf_with_gauss, operation for operation (the same results): gcc does not
 * vectorise the scalar versions inside a loop (the clamps and the sign select stay branches). Vectors go in
 * and out through pointers: passing 32-byte vectors by value changes the ABI on targets without AVX. */
#define V8_SELECT(mask, a, b) ((v8f)(((v8i)(a) & (mask)) | ((v8i)(b) & ~(mask))))
static inline void v8_exp(const v8f *xp, v8f *out) {
    const v8f lo = V8(-87.0f), hi = V8(88.0f);
    v8f x = *xp, c = V8_SELECT(x > lo, x, lo);
    c = V8_SELECT(c < hi, c, hi);
    v8i ki = __builtin_convertvector(VFMA(c, V8(1.44269504f), V8(256.5f)), v8i) - 256;
    v8f k = __builtin_convertvector(ki, v8f);
    v8f r = VFMA(-k, V8(1.42860677e-6f), VFMA(-k, V8(0.693145752f), c));
    v8f p = VFMA(V8(0.00138878408f), r, V8(0.00833336823f));
    p = VFMA(p, r, V8(0.0416666493f));
    p = VFMA(p, r, V8(0.166666672f));
    p = VFMA(p, r, V8(0.5f));
    p = VFMA(p, r, V8(1.0f));
    p = VFMA(p, r, V8(1.0f));
    v8f scale = (v8f)((ki + 127) << 23);
    *out = V8_SELECT(x == x, p * scale, x);
}
static inline void v8_erf_with_gauss(const v8f *xp, const v8f *gauss, v8f *out) {
    const v8i sign = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN};
    const v8f zero = {0, 0, 0, 0, 0, 0, 0, 0};
    v8f x = *xp, ax = (v8f)((v8i)x & ~sign), t = 1.0f / VFMA(V8(0.3275911f), ax, V8(1.0f));
    v8f p = VFMA(V8(1.061405429f), t, V8(-1.453152027f));
    p = VFMA(p, t, V8(1.421413741f));
    p = VFMA(p, t, V8(-0.284496736f));
    p = VFMA(p, t, V8(0.254829592f));
    v8f y = VFMA(-(t * p), *gauss, V8(1.0f));
    *out = (v8f)((v8i)y ^ ((x < zero) & sign));
}

/* dot product of n floats with 8-wide partial sums */
static inline float dot(const float *a, const float *b, int n) {
    v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += *(const v8fu *)(a + i) * *(const v8fu *)(b + i);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* sum and maximum of n floats with 8-wide partial results (fixed order: reproducible) */
static inline float vsum(const float *x, int n) {
    v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) acc += *(const v8fu *)(x + i);
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += x[i];
    return s;
}
static inline float vmax(const float *x, int n) {
    float m = -FLT_MAX;
    int i = 0;
    if (n >= 8) {
        v8f acc = *(const v8fu *)x;
        for (i = 8; i + 8 <= n; i += 8) {
            v8f v = *(const v8fu *)(x + i);
            v8i gt = acc > v; /* lanes of all ones where acc is larger */
            acc = (v8f)(((v8i)acc & gt) | ((v8i)v & ~gt));
        }
        for (int j = 0; j < 8; j++) m = acc[j] > m ? acc[j] : m;
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* sum over i of (x[i] - m)^2 */
static inline float vsum_sq_dev(const float *x, float m, int n) {
    v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f d = *(const v8fu *)(x + i) - m;
        acc += d * d;
    }
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return s;
}

/* ---- GEMM: C (M,N) += A (M,K) B (K,N), A and B read through strides, C row-major. ----
 * Blocked as in GotoBLAS/BLIS: each KC x NC block of B is packed once into 16-column panels; each thread packs
 * MC x KC blocks of its rows of A into 6-row micro-panels and runs a 6 x 16 register tile over every
 * (micro-panel, panel) pair, so a panel (16 KB) stays in L1 while the A block streams from L2. Threads split
 * the rows of C and share the packed B of the parallel GEMM; gemm_serial runs the same code on one thread
 * with that thread's own B panels (the small products inside attention). */


typedef struct {
    int M, N, K;
    const float *A; size_t ars, acs;
    const float *B; size_t brs, bcs;
    float *C; size_t ldc;
    CpuBackend *cb;
    int overwrite;      /* 1: C = (bias) + A B, C's old contents ignored; 0: C += A B */
    const float *bias;  /* with overwrite: added to every row of C (N values), or NULL */
    int n0, nc, k0, kc; /* the B block being worked on */
    float *bpack;       /* its packed panels: panel p at bpack + p * kc * NR, row kk of it at + kk * NR */
    float *a_row_sums;  /* or NULL: row i of A summed over the depth, in order, added to a_row_sums[i] */
    int causal, diag;   /* causal attention's products: what the diagonal lets a tile skip (GEMM_*) */
} Gemm;

/* The zeros of causal attention (query i sees keys k <= i + diag) that a product may skip, whole tiles and
 * depth ranges at a time; the results are those of the full product (skipped terms are exact zeros). */
enum {
    GEMM_DENSE = 0,
    GEMM_OUT_CAUSAL,   /* C(i, j) is not wanted for j > i + diag (S = Q K^T): such tiles are left as they were */
    GEMM_A_CAUSAL,     /* A(i, k) = 0 for k > i + diag (O = P V, dQ = dS K) */
    GEMM_A_ANTICAUSAL, /* A(i, k) = 0 for k < i - diag (dV = P^T dO, dK = dS^T Q) */
};

#if defined(__AVX__)
/* dst[i * NR + j] = src[j][k + i] for i, j in [0, 8): eight 8-float column pieces written as eight rows of the
 * packed panel (row stride NR) */
static inline void transpose_8x8_store(const float *const *src, int k, float *dst) {
    __m256 r0 = _mm256_loadu_ps(src[0] + k), r1 = _mm256_loadu_ps(src[1] + k), r2 = _mm256_loadu_ps(src[2] + k);
    __m256 r3 = _mm256_loadu_ps(src[3] + k), r4 = _mm256_loadu_ps(src[4] + k), r5 = _mm256_loadu_ps(src[5] + k);
    __m256 r6 = _mm256_loadu_ps(src[6] + k), r7 = _mm256_loadu_ps(src[7] + k);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3);
    __m256 t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE), s2 = _mm256_shuffle_ps(t1, t3, 0x44);
    __m256 s3 = _mm256_shuffle_ps(t1, t3, 0xEE), s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_store_ps(dst + 0 * CPU_GEMM_NR, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_store_ps(dst + 1 * CPU_GEMM_NR, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_store_ps(dst + 2 * CPU_GEMM_NR, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_store_ps(dst + 3 * CPU_GEMM_NR, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_store_ps(dst + 4 * CPU_GEMM_NR, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_store_ps(dst + 5 * CPU_GEMM_NR, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_store_ps(dst + 6 * CPU_GEMM_NR, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_store_ps(dst + 7 * CPU_GEMM_NR, _mm256_permute2f128_ps(s3, s7, 0x31));
}
#endif

static void gemm_pack_b_panels(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Gemm *g = (const Gemm *)arg;
    int kc = g->kc;
    for (size_t p = lo; p < hi; p++) {
        int n0 = g->n0 + (int)p * CPU_GEMM_NR, nr = MIN(CPU_GEMM_NR, g->N - n0);
        float *buf = g->bpack + p * (size_t)kc * CPU_GEMM_NR;
        if (g->bcs == 1) {
            for (int kk = 0; kk < kc; kk++) {
                const float *src = g->B + (size_t)(g->k0 + kk) * g->brs + n0;
                float *dst = buf + (size_t)kk * CPU_GEMM_NR;
                if (nr == CPU_GEMM_NR) {
                    *(v8f *)dst = *(const v8fu *)src;
                    *(v8f *)(dst + 8) = *(const v8fu *)(src + 8);
                } else {
                    int j = 0;
                    for (; j < nr; j++) dst[j] = src[j];
                    for (; j < CPU_GEMM_NR; j++) dst[j] = 0;
                }
            }
        } else { /* B read down its columns (a weight used transposed): 16 column streams, one row at a time */
            const float *src[CPU_GEMM_NR];
            for (int j = 0; j < CPU_GEMM_NR; j++) src[j] = g->B + (size_t)(n0 + MIN(j, nr - 1)) * g->bcs + (size_t)g->k0 * g->brs;
            int kk = 0;
#if defined(__AVX__)
            if (g->brs == 1 && nr == CPU_GEMM_NR) /* each column contiguous: 8 x 8 blocks transposed in registers */
                for (; kk + 8 <= kc; kk += 8) {
                    transpose_8x8_store(src, kk, buf + (size_t)kk * CPU_GEMM_NR);
                    transpose_8x8_store(src + 8, kk, buf + (size_t)kk * CPU_GEMM_NR + 8);
                }
#endif
            for (; kk < kc; kk++) {
                float *dst = buf + (size_t)kk * CPU_GEMM_NR;
                size_t o = (size_t)kk * g->brs;
                for (int j = 0; j < CPU_GEMM_NR; j++) dst[j] = j < nr ? src[j][o] : 0.0f;
            }
        }
    }
}

/* rows [mb, me) x depth [k0, k0 + kc) of A as 6-row micro-panels: element (r, kk) of the panel of rows
 * [m, m + 6) at dst[(m - mb) * kc + kk * MR + r], rows past me zero. Only for A read down its columns
 * (acs != 1, as dout^T in the weight gradient): each depth step is then one contiguous read of the rows. */
static void gemm_pack_a(const Gemm *g, int mb, int me, float *dst) {
    int kc = g->kc, rows = me - mb;
    const float *src = g->A + (size_t)mb * g->ars + (size_t)g->k0 * g->acs;
    float *sums = g->a_row_sums && g->n0 == 0 ? g->a_row_sums + mb : NULL; /* summed while the rows pass by */
    for (int kk = 0; kk < kc; kk++) {
        const float *s = src + (size_t)kk * g->acs;
        for (int m = 0; m < rows; m += CPU_GEMM_MR) {
            float *d = dst + (size_t)m * kc + (size_t)kk * CPU_GEMM_MR;
            int mr = MIN(CPU_GEMM_MR, rows - m), r = 0;
            if (g->ars == 1 && mr == CPU_GEMM_MR && kk + 1 < kc && mb + m + 8 <= g->M) {
                /* the 6 rows are contiguous: one 8-float move, whose last 2 floats land in the next depth
                 * step's slot (written after this one) and come from rows that exist */
                *(v8fu *)d = *(const v8fu *)(s + m);
            } else {
                for (; r < mr; r++) d[r] = s[(size_t)(m + r) * g->ars];
                for (r = mr; r < CPU_GEMM_MR; r++) d[r] = 0;
            }
            if (sums)
                for (r = 0; r < mr; r++) sums[m + r] += d[r];
        }
    }
}

/* a_row_sums for rows [mb, me) of A read in place (rows contiguous), over the current depth block */
static void gemm_sum_a_rows(const Gemm *g, int mb, int me) {
    if (!g->a_row_sums || g->n0 != 0) return;
    for (int i = mb; i < me; i++) {
        const float *row = g->A + (size_t)i * g->ars + g->k0;
        float sum = g->a_row_sums[i];
        for (int kk = 0; kk < g->kc; kk++) sum += row[kk];
        g->a_row_sums[i] = sum;
    }
}

/* the 6 x 16 register tile: C[0..5][0..15] += A (6 x kc; element (r, k) at a[r * ars + k * acs]) . b (kc x 16,
 * packed). Inlined for the full tiles with the packed strides (1, 6) folded in and with A's own row stride
 * (acs = 1), and for the edges: for the last rows of C (mr < 6) rows past mr repeat row mr - 1, so they
 * compute and store its values again instead of reading past A and C. */
static inline __attribute__((always_inline)) void gemm_tile_6x16(int kc, int mr, const float *a, size_t ars, size_t acs, const float *b,
                                                                 float *C, size_t ldc) {
    float *C0 = C, *C1 = C + (size_t)MIN(1, mr - 1) * ldc, *C2 = C + (size_t)MIN(2, mr - 1) * ldc;
    float *C3 = C + (size_t)MIN(3, mr - 1) * ldc, *C4 = C + (size_t)MIN(4, mr - 1) * ldc, *C5 = C + (size_t)MIN(5, mr - 1) * ldc;
    v8f c00 = *(const v8fu *)C0, c01 = *(const v8fu *)(C0 + 8);
    v8f c10 = *(const v8fu *)C1, c11 = *(const v8fu *)(C1 + 8);
    v8f c20 = *(const v8fu *)C2, c21 = *(const v8fu *)(C2 + 8);
    v8f c30 = *(const v8fu *)C3, c31 = *(const v8fu *)(C3 + 8);
    v8f c40 = *(const v8fu *)C4, c41 = *(const v8fu *)(C4 + 8);
    v8f c50 = *(const v8fu *)C5, c51 = *(const v8fu *)(C5 + 8);
    const float *a0 = a, *a1 = a + (size_t)MIN(1, mr - 1) * ars, *a2 = a + (size_t)MIN(2, mr - 1) * ars;
    const float *a3 = a + (size_t)MIN(3, mr - 1) * ars, *a4 = a + (size_t)MIN(4, mr - 1) * ars, *a5 = a + (size_t)MIN(5, mr - 1) * ars;
    for (int k = 0; k < kc; k++, b += CPU_GEMM_NR) {
        v8f b0 = *(const v8f *)b, b1 = *(const v8f *)(b + 8), x;
        size_t o = (size_t)k * acs;
        x = (v8f){a0[o], a0[o], a0[o], a0[o], a0[o], a0[o], a0[o], a0[o]}; c00 = VFMA(x, b0, c00); c01 = VFMA(x, b1, c01);
        x = (v8f){a1[o], a1[o], a1[o], a1[o], a1[o], a1[o], a1[o], a1[o]}; c10 = VFMA(x, b0, c10); c11 = VFMA(x, b1, c11);
        x = (v8f){a2[o], a2[o], a2[o], a2[o], a2[o], a2[o], a2[o], a2[o]}; c20 = VFMA(x, b0, c20); c21 = VFMA(x, b1, c21);
        x = (v8f){a3[o], a3[o], a3[o], a3[o], a3[o], a3[o], a3[o], a3[o]}; c30 = VFMA(x, b0, c30); c31 = VFMA(x, b1, c31);
        x = (v8f){a4[o], a4[o], a4[o], a4[o], a4[o], a4[o], a4[o], a4[o]}; c40 = VFMA(x, b0, c40); c41 = VFMA(x, b1, c41);
        x = (v8f){a5[o], a5[o], a5[o], a5[o], a5[o], a5[o], a5[o], a5[o]}; c50 = VFMA(x, b0, c50); c51 = VFMA(x, b1, c51);
    }
    *(v8fu *)C5 = c50; *(v8fu *)(C5 + 8) = c51; /* the repeated rows first, so row mr - 1 ends as itself */
    *(v8fu *)C4 = c40; *(v8fu *)(C4 + 8) = c41;
    *(v8fu *)C3 = c30; *(v8fu *)(C3 + 8) = c31;
    *(v8fu *)C2 = c20; *(v8fu *)(C2 + 8) = c21;
    *(v8fu *)C1 = c10; *(v8fu *)(C1 + 8) = c11;
    *(v8fu *)C0 = c00; *(v8fu *)(C0 + 8) = c01;
}

/* one 6 x 16 tile of C (mr x nr valid): A read in place (acs == 1: its rows are contiguous) or from its packed
 * micro-panel; on the first depth block of an overwriting GEMM the tile starts as the bias (or zero) */
static inline void gemm_tile(const Gemm *g, int m, int mr, const float *apanel, const float *panel, int n, int nr) {
    /* the depth steps [kb, ke) of this block that the tile needs */
    int kb = 0, ke = g->kc;
    if (g->causal == GEMM_A_CAUSAL) ke = CLAMP(m + mr + g->diag - g->k0, 0, g->kc);
    else if (g->causal == GEMM_A_ANTICAUSAL) kb = CLAMP(m - g->diag - g->k0, 0, g->kc);
    int kc = MAX(ke - kb, 0);
    const float *a = apanel ? apanel + (size_t)kb * CPU_GEMM_MR : g->A + (size_t)m * g->ars + g->k0 + kb;
    panel += (size_t)kb * CPU_GEMM_NR;
    float *C = g->C + (size_t)m * g->ldc + n;
    if (g->overwrite && g->k0 == 0) {
        if (nr == CPU_GEMM_NR) {
            v8f z0 = {0, 0, 0, 0, 0, 0, 0, 0}, z1 = z0;
            if (g->bias) z0 = *(const v8fu *)(g->bias + n), z1 = *(const v8fu *)(g->bias + n + 8);
            for (int i = 0; i < mr; i++) *(v8fu *)(C + (size_t)i * g->ldc) = z0, *(v8fu *)(C + (size_t)i * g->ldc + 8) = z1;
        } else {
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < nr; j++) C[(size_t)i * g->ldc + j] = g->bias ? g->bias[n + j] : 0.0f;
        }
    }
    if (kc == 0) return;
    if (nr == CPU_GEMM_NR) {
        if (mr == CPU_GEMM_MR) {
            if (apanel) gemm_tile_6x16(kc, CPU_GEMM_MR, a, 1, CPU_GEMM_MR, panel, C, g->ldc);
            else gemm_tile_6x16(kc, CPU_GEMM_MR, a, g->ars, 1, panel, C, g->ldc);
        } else {
            gemm_tile_6x16(kc, mr, a, apanel ? 1 : g->ars, apanel ? CPU_GEMM_MR : 1, panel, C, g->ldc);
        }
        return;
    }
    /* fewer than 16 columns: the tile on a local copy of C's valid part */
    float tile[CPU_GEMM_MR * CPU_GEMM_NR] = {0};
    for (int i = 0; i < mr; i++) memcpy(tile + i * CPU_GEMM_NR, C + (size_t)i * g->ldc, (size_t)nr * sizeof(float));
    gemm_tile_6x16(kc, mr, a, apanel ? 1 : g->ars, apanel ? CPU_GEMM_MR : 1, panel, tile, CPU_GEMM_NR);
    for (int i = 0; i < mr; i++) memcpy(C + (size_t)i * g->ldc, tile + i * CPU_GEMM_NR, (size_t)nr * sizeof(float));
}

/* rows [m_lo, m_hi) of C against the packed B block; A packed MC rows at a time into apack when acs != 1 */
static void gemm_block_rows(const Gemm *g, int m_lo, int m_hi, float *apack) {
    int kc = g->kc, panels = (g->nc + CPU_GEMM_NR - 1) / CPU_GEMM_NR, packed = g->acs != 1;
    for (int mb = m_lo; mb < m_hi; mb += CPU_GEMM_MC) {
        int me = MIN(mb + CPU_GEMM_MC, m_hi);
        if (packed) gemm_pack_a(g, mb, me, apack);
        else gemm_sum_a_rows(g, mb, me);
        for (int p = 0; p < panels; p++) {
            int n = g->n0 + p * CPU_GEMM_NR;
            const float *panel = g->bpack + (size_t)p * kc * CPU_GEMM_NR;
            for (int m = mb; m < me; m += CPU_GEMM_MR) {
                int mr = MIN(CPU_GEMM_MR, me - m);
                if (g->causal == GEMM_OUT_CAUSAL && n > m + mr - 1 + g->diag) continue; /* all above the diagonal */
                gemm_tile(g, m, mr, packed ? apack + (size_t)(m - mb) * kc : NULL, panel, n, MIN(CPU_GEMM_NR, g->N - n));
            }
        }
    }
}

static void gemm_rows(void *arg, size_t lo, size_t hi, int tid) {
    const Gemm *g = (const Gemm *)arg;
    gemm_block_rows(g, (int)lo * CPU_GEMM_MR, MIN((int)hi * CPU_GEMM_MR, g->M), cpu_scratch_a(g->cb, tid));
}

/* Walks the blocks of B: packs each, then computes every row of C against it. serial_tid < 0: on the pool,
 * with the shared B panels; otherwise on that (calling) thread alone, with its own panels. */
static void gemm_drive(Gemm *g, int serial_tid) {
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0) {
        if (g->overwrite)
            for (int i = 0; i < g->M; i++)
                for (int j = 0; j < g->N; j++) g->C[(size_t)i * g->ldc + j] = g->bias ? g->bias[j] : 0.0f;
        return;
    }
    CpuBackend *cb = g->cb;
    const CpuTeam *team = cpu_team(cb);
    g->bpack = serial_tid < 0 ? cpu_scratch_shared_b(cb, team) : cpu_scratch_b(cb, serial_tid);
    size_t tiles = (size_t)(g->M + CPU_GEMM_MR - 1) / CPU_GEMM_MR;
    for (g->n0 = 0; g->n0 < g->N; g->n0 += CPU_GEMM_NC) {
        g->nc = MIN(CPU_GEMM_NC, g->N - g->n0);
        size_t panels = (size_t)(g->nc + CPU_GEMM_NR - 1) / CPU_GEMM_NR;
        for (g->k0 = 0; g->k0 < g->K; g->k0 += CPU_GEMM_KC) {
            g->kc = MIN(CPU_GEMM_KC, g->K - g->k0);
            if (serial_tid >= 0) {
                gemm_pack_b_panels(g, 0, panels, serial_tid);
                gemm_block_rows(g, 0, g->M, cpu_scratch_a(cb, serial_tid));
                continue;
            }
            size_t work_per_tile = (size_t)CPU_GEMM_MR * (size_t)g->nc * (size_t)g->kc;
            parallel_for(cb, panels, MAX((size_t)1, ((size_t)1 << 14) / ((size_t)g->kc * CPU_GEMM_NR)), gemm_pack_b_panels, g);
            /* about 8 chunks per thread; one thread alone below 2^18 multiply-adds */
            size_t chunk = tiles * work_per_tile < ((size_t)1 << 18) ? tiles : MAX((size_t)1, tiles / (8 * (size_t)team->n));
            parallel_for_chunks(cb, tiles, chunk, gemm_rows, g);
        }
    }
}

/* C (M,N) = bias + A B when overwrite (bias: N values or NULL), else C += A B; on the pool */
static void gemm(CpuBackend *cb, int M, int N, int K, const float *A, size_t ars, size_t acs, const float *B, size_t brs,
                 size_t bcs, float *C, size_t ldc, int overwrite, const float *bias) {
    Gemm g = {.M = M, .N = N, .K = K, .A = A, .ars = ars, .acs = acs, .B = B, .brs = brs, .bcs = bcs, .C = C, .ldc = ldc, .cb = cb,
              .overwrite = overwrite, .bias = bias};
    gemm_drive(&g, -1);
}

/* the same product (no bias) on the calling thread only, with its own B panels; causal (GEMM_*) and diag as
 * in Gemm */
static void gemm_serial(CpuBackend *cb, int tid, int M, int N, int K, const float *A, size_t ars, size_t acs, const float *B,
                        size_t brs, size_t bcs, float *C, size_t ldc, int overwrite, int causal, int diag) {
    Gemm g = {.M = M, .N = N, .K = K, .A = A, .ars = ars, .acs = acs, .B = B, .brs = brs, .bcs = bcs, .C = C, .ldc = ldc, .cb = cb,
              .overwrite = overwrite, .causal = causal, .diag = diag};
    gemm_drive(&g, tid);
}

/* ---- matmul ---- */

/* out (N,OC) = bias + inp (N,C) . w^T for a few rows (generation: one row per sample). Each weight row is read
 * once, in place, and dotted with every input row, four at a time; the GEMM would first pack all of w, which
 * for so few rows costs as much as the product. Threads split the output columns, and each output is one
 * thread's sum in a fixed order, so the result does not depend on the thread count. */
#define CPU_GEMV_MAX_ROWS 8
typedef struct {
    float *out;
    const float *inp, *w, *bias;
    int N, C, OC;
} Gemv;

/* the 8 lanes summed; by pointer, as a 32-byte vector argument would change the ABI on targets without AVX */
static inline float v8_sum(const v8f *v) {
    const float *a = (const float *)v;
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

static void gemv_columns(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Gemv *g = (const Gemv *)arg;
    size_t C = (size_t)g->C, C16 = C & ~(size_t)15, C8 = C & ~(size_t)7;
    for (size_t o = lo; o < hi; o++) {
        const float *wr = g->w + o * C;
        float b = g->bias ? g->bias[o] : 0.0f;
        for (int n0 = 0; n0 < g->N; n0 += 4) {
            int nr = MIN(4, g->N - n0); /* rows past nr repeat the last one and are not stored */
            const float *x0 = g->inp + (size_t)n0 * C, *x1 = x0 + (size_t)MIN(1, nr - 1) * C;
            const float *x2 = x0 + (size_t)MIN(2, nr - 1) * C, *x3 = x0 + (size_t)MIN(3, nr - 1) * C;
            /* eight independent sums (four rows x two halves of 16 columns) keep both FMA pipes busy */
            v8f a0 = V8(0.0f), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            size_t c = 0;
            for (; c < C16; c += 16) {
                v8f wa = *(const v8fu *)(wr + c), wb = *(const v8fu *)(wr + c + 8);
                a0 = VFMA(*(const v8fu *)(x0 + c), wa, a0);
                a1 = VFMA(*(const v8fu *)(x1 + c), wa, a1);
                a2 = VFMA(*(const v8fu *)(x2 + c), wa, a2);
                a3 = VFMA(*(const v8fu *)(x3 + c), wa, a3);
                b0 = VFMA(*(const v8fu *)(x0 + c + 8), wb, b0);
                b1 = VFMA(*(const v8fu *)(x1 + c + 8), wb, b1);
                b2 = VFMA(*(const v8fu *)(x2 + c + 8), wb, b2);
                b3 = VFMA(*(const v8fu *)(x3 + c + 8), wb, b3);
            }
            for (; c < C8; c += 8) {
                v8f wa = *(const v8fu *)(wr + c);
                a0 = VFMA(*(const v8fu *)(x0 + c), wa, a0);
                a1 = VFMA(*(const v8fu *)(x1 + c), wa, a1);
                a2 = VFMA(*(const v8fu *)(x2 + c), wa, a2);
                a3 = VFMA(*(const v8fu *)(x3 + c), wa, a3);
            }
            v8f s4[4] = {a0 + b0, a1 + b1, a2 + b2, a3 + b3};
            float sum[4] = {v8_sum(&s4[0]), v8_sum(&s4[1]), v8_sum(&s4[2]), v8_sum(&s4[3])};
            for (size_t c = C8; c < C; c++) {
                sum[0] = SFMA(x0[c], wr[c], sum[0]);
                sum[1] = SFMA(x1[c], wr[c], sum[1]);
                sum[2] = SFMA(x2[c], wr[c], sum[2]);
                sum[3] = SFMA(x3[c], wr[c], sum[3]);
            }
            for (int r = 0; r < nr; r++) g->out[(size_t)(n0 + r) * (size_t)g->OC + o] = b + sum[r];
        }
    }
}

static void gemv(CpuBackend *cb, float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC) {
    Gemv g = {out, inp, w, bias, N, C, OC};
    /* about 2^16 multiply-adds per task */
    parallel_for(cb, (size_t)OC, MAX((size_t)1, ((size_t)1 << 16) / ((size_t)C * (size_t)((N + 3) & ~3))), gemv_columns, &g);
}

static void cpu_matmul_forward(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    if (N <= CPU_GEMV_MAX_ROWS) {
        gemv(cpu_of(be), (float *)out, (const float *)inp, (const float *)w, (const float *)bias, N, C, OC);
        return;
    }
    /* out (N,OC) = bias + inp (N,C) . w^T : B(k=c, n=o) = w[o*C + c] */
    gemm(cpu_of(be), N, OC, C, (const float *)inp, (size_t)C, 1, (const float *)w, 1, (size_t)C, (float *)out, (size_t)OC, 1,
         (const float *)bias);
}

static void cpu_matmul_backward(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                int N, int C, int OC) {
    CpuBackend *cb = cpu_of(be);
    const float *dY = (const float *)dout;
    /* dinp (N,C) = dout (N,OC) . w (OC,C) */
    if (dinp) gemm(cb, N, C, OC, dY, (size_t)OC, 1, (const float *)w, (size_t)C, 1, (float *)dinp, (size_t)C, 1, NULL);
    if (!dw) { /* without the weight gradient (bench --kernels times each product alone): the bias's sum, in the same order */
        for (int i = 0; dbias && i < N; i++)
            for (int o = 0; o < OC; o++) ((float *)dbias)[o] += dY[(size_t)i * OC + o];
        return;
    }
    /* dw (OC,C) += dout^T (OC,N) . inp (N,C); dbias (OC) += the rows of dout^T summed, as they are packed */
    Gemm g = {.M = OC, .N = C, .K = N, .A = dY, .ars = 1, .acs = (size_t)OC, .B = (const float *)inp, .brs = (size_t)C, .bcs = 1,
              .C = (float *)dw, .ldc = (size_t)C, .cb = cb, .a_row_sums = (float *)dbias};
    gemm_drive(&g, -1);
}

/* ---- LayerNorm (eps 1e-5, as torch.nn.LayerNorm) ---- */

typedef struct {
    float *out, *mean, *rstd;
    const float *inp, *w, *b;
    int C;
} LnFwd;

static void ln_forward_rows(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const LnFwd *a = (const LnFwd *)arg;
    int C = a->C;
    for (size_t i = lo; i < hi; i++) {
        const float *x = a->inp + i * (size_t)C;
        float m = vsum(x, C) / (float)C;
        float v = vsum_sq_dev(x, m, C) / (float)C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float *o = a->out + i * (size_t)C;
        if (a->b)
            for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * a->w[c] + a->b[c];
        else
            for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * a->w[c];
        a->mean[i] = m;
        a->rstd[i] = s;
    }
}

static void cpu_layernorm_forward(ngpt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    LnFwd a = {(float *)out, mean, rstd, (const float *)inp, (const float *)w, (const float *)b, C};
    parallel_for(cpu_of(be), (size_t)N, 64, ln_forward_rows, &a);
}

typedef struct {
    CpuBackend *cb;
    float *dinp;
    const float *dout, *inp, *w, *mean, *rstd;
    int N, C, has_bias;
    int groups;      /* row groups, each with its own partial dw / db sums (2C floats) */
    float *partials; /* groups x 2C floats */
} LnBwd;

/* The row groups of LayerNorm's backward: their number depends on N and C alone, never on the thread count,
 * so dw and db are the same sums in the same order on any machine. Their groups x 2C floats of partial sums
 * go in the shared B panels; past C = 32768 a single group uses the calling thread's op region instead. */
static int ln_backward_groups(int N, int C) {
    int g = (int)MIN((size_t)32, CPU_GEMM_B_FLOATS / (2 * (size_t)MAX(C, 1)));
    return CLAMP(g, 1, MAX(N, 1));
}

static void ln_backward_group(const LnBwd *a, int group) {
    int C = a->C;
    size_t lo, hi;
    split_range((size_t)a->N, group, a->groups, &lo, &hi);
    float *part = a->partials + (size_t)group * 2 * C;
    float *dw = part, *db = part + C;
    memset(part, 0, 2 * (size_t)C * sizeof(float));
    for (size_t i = lo; i < hi; i++) {
        const float *x = a->inp + i * (size_t)C, *dy = a->dout + i * (size_t)C;
        float m = a->mean[i], r = a->rstd[i];
        /* the means over c of dn = w dy and of dn * (x - m) r */
        v8f s1 = {0, 0, 0, 0, 0, 0, 0, 0}, s2 = s1;
        int c = 0;
        for (; c + 8 <= C; c += 8) {
            v8f dn = *(const v8fu *)(a->w + c) * *(const v8fu *)(dy + c);
            s1 += dn;
            s2 += dn * (*(const v8fu *)(x + c) - m);
        }
        float dnorm_mean = ((s1[0] + s1[4]) + (s1[1] + s1[5])) + ((s1[2] + s1[6]) + (s1[3] + s1[7]));
        float dnorm_norm_mean = ((s2[0] + s2[4]) + (s2[1] + s2[5])) + ((s2[2] + s2[6]) + (s2[3] + s2[7]));
        for (; c < C; c++) {
            float dn = a->w[c] * dy[c];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * (x[c] - m);
        }
        dnorm_mean /= (float)C;
        dnorm_norm_mean *= r / (float)C;
        float *dx = a->dinp + i * (size_t)C;
        for (c = 0; c < C; c++) {
            float n = (x[c] - m) * r, dn = a->w[c] * dy[c];
            dx[c] += (dn - dnorm_mean - n * dnorm_norm_mean) * r;
            dw[c] += dy[c] * n;
        }
        if (a->has_bias)
            for (c = 0; c < C; c++) db[c] += dy[c];
    }
}

static void ln_backward_groups_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    for (size_t g = lo; g < hi; g++) ln_backward_group((const LnBwd *)arg, (int)g);
}

static void cpu_layernorm_backward(ngpt_backend *be, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                                   const float *mean, const float *rstd, int N, int C) {
    CpuBackend *cb = cpu_of(be);
    int groups = ln_backward_groups(N, C), shared = (size_t)groups * 2 * C <= CPU_GEMM_B_FLOATS;
    LnBwd a = {cb, (float *)dinp, (const float *)dout, (const float *)inp, (const float *)w, mean, rstd, N, C, db != NULL, groups,
               shared ? cpu_scratch_shared_b(cb, cpu_team(cb)) : cpu_scratch_op(cb, cpu_team(cb)->tid0)};
    /* one group runs on the calling thread, as the op-region fallback needs */
    parallel_for_chunks(cb, (size_t)groups, N >= 64 ? 1 : (size_t)groups, ln_backward_groups_range, &a);
    /* add the groups' partial sums in group order */
    for (int g = 0; g < a.groups; g++) {
        const float *part = a.partials + (size_t)g * 2 * C;
        for (int c = 0; c < C; c++) ((float *)dw)[c] += part[c];
        if (db)
            for (int c = 0; c < C; c++) ((float *)db)[c] += part[C + c];
    }
}

/* ---- causal self-attention as small matrix products per (sequence, head) and block of query rows ----
 * For query rows [q0, q0 + qn) only keys [0, q0 + qn) can be seen: S = Q K^T over that block (a QB x T tile in
 * the thread's scratch, never T x T per head for long blocks), softmax in place, O = P V. The backward pass
 * recomputes P from the saved log-sum-exp: dP = dO V^T, dS = P (dP - rowsum(dO O)) / sqrt(hs), dV += P^T dO,
 * dQ = dS K, dK += dS^T Q. Entries above the diagonal are zeroed, so they add nothing. */

typedef struct {
    CpuBackend *cb;
    float *out, *lse, *dqkv;
    const float *qkv, *dout, *fout;
    int B, T, C, NH;
    ngpt_dropout drop;
} Attn;

/* attention-probability dropout factor of (b, h, t, t2): 0 or 1/(1-p) */
static inline float attn_keep(const ngpt_dropout *d, size_t bh, int T, int t, int t2) {
    uint64_t i = d->offset + (bh * (size_t)T + (size_t)t) * (size_t)T + (size_t)t2;
    return ngpt_uniform(d->seed, d->stream, i) >= d->p ? 1.0f / (1.0f - d->p) : 0.0f;
}

/* row r of a score block (query t = q0 + r, kn keys): p = exp(s * scale - lse) for keys <= t, 0 after */
static inline void attn_probs_row(float *s, int t, int kn, float scale, float lse) {
    for (int t2 = 0; t2 <= t; t2++) s[t2] = fast_expf(s[t2] * scale - lse);
    for (int t2 = t + 1; t2 < kn; t2++) s[t2] = 0;
}

static void attn_forward_heads(void *arg, size_t lo, size_t hi, int tid) {
    const Attn *a = (const Attn *)arg;
    int T = a->T, C = a->C, NH = a->NH, hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs), *S = cpu_scratch_op(a->cb, tid);
    for (size_t bh = lo; bh < hi; bh++) {
        int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
        const float *Q = a->qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C, *V = Q + 2 * C;
        for (int q0 = 0; q0 < T; q0 += CPU_ATTN_QB) {
            int qn = MIN(CPU_ATTN_QB, T - q0), kn = q0 + qn;
            /* S (qn, kn) = Q[q0:] . K^T */
            gemm_serial(a->cb, tid, qn, kn, hs, Q + (size_t)q0 * C3, C3, 1, K, 1, C3, S, (size_t)kn, 1, GEMM_OUT_CAUSAL, q0);
            for (int r = 0; r < qn; r++) {
                int t = q0 + r;
                float *s = S + (size_t)r * kn;
                float mx = vmax(s, t + 1) * scale;
                attn_probs_row(s, t, kn, scale, mx);
                float sum = vsum(s, t + 1), inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) s[t2] *= inv;
                if (a->drop.p > 0)
                    for (int t2 = 0; t2 <= t; t2++) s[t2] *= attn_keep(&a->drop, bh, T, t, t2);
                a->lse[bh * (size_t)T + t] = mx + logf(sum);
            }
            /* O[q0:] (qn, hs) = P . V[:kn] */
            gemm_serial(a->cb, tid, qn, hs, kn, S, (size_t)kn, 1, V, C3, 1, a->out + ((size_t)b * T + q0) * C + (size_t)h * hs,
                        (size_t)C, 1, GEMM_A_CAUSAL, q0);
        }
    }
}

static void cpu_attention_forward(ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *drop) {
    Attn a = {cpu_of(be), (float *)out, lse, NULL, (const float *)qkv, NULL, NULL, B, T, C, NH, *drop};
    parallel_for(cpu_of(be), (size_t)B * NH, 1, attn_forward_heads, &a);
}

/* one (b, h) pair per item: dq written, dk and dv accumulated over the query blocks of that pair only */
static void attn_backward_heads(void *arg, size_t lo, size_t hi, int tid) {
    const Attn *a = (const Attn *)arg;
    int T = a->T, C = a->C, NH = a->NH, hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    float *P = cpu_scratch_op(a->cb, tid), *dS = P + (size_t)MIN(T, CPU_ATTN_QB) * T;
    for (size_t bh = lo; bh < hi; bh++) {
        int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
        const float *Q = a->qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C, *V = Q + 2 * C;
        const float *dO = a->dout + (size_t)b * T * C + (size_t)h * hs, *O = a->fout + (size_t)b * T * C + (size_t)h * hs;
        float *dQ = a->dqkv + (size_t)b * T * C3 + (size_t)h * hs, *dK = dQ + C, *dV = dQ + 2 * C;
        for (int t = 0; t < T; t++) {
            memset(dK + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
            memset(dV + (size_t)t * C3, 0, (size_t)hs * sizeof(float));
        }
        for (int q0 = 0; q0 < T; q0 += CPU_ATTN_QB) {
            int qn = MIN(CPU_ATTN_QB, T - q0), kn = q0 + qn;
            gemm_serial(a->cb, tid, qn, kn, hs, Q + (size_t)q0 * C3, C3, 1, K, 1, C3, P, (size_t)kn, 1, GEMM_OUT_CAUSAL, q0); /* S = Q K^T */
            gemm_serial(a->cb, tid, qn, kn, hs, dO + (size_t)q0 * C, (size_t)C, 1, V, 1, C3, dS, (size_t)kn, 1, GEMM_OUT_CAUSAL,
                        q0); /* dP = dO V^T */
            for (int r = 0; r < qn; r++) {
                int t = q0 + r;
                float *p = P + (size_t)r * kn, *ds = dS + (size_t)r * kn;
                attn_probs_row(p, t, kn, scale, a->lse[bh * (size_t)T + t]);
                float D = dot(dO + (size_t)t * C, O + (size_t)t * C, hs);
                if (a->drop.p > 0) {
                    for (int t2 = 0; t2 <= t; t2++) {
                        float keep = attn_keep(&a->drop, bh, T, t, t2);
                        ds[t2] = p[t2] * (ds[t2] * keep - D) * scale;
                        p[t2] *= keep;
                    }
                } else {
                    for (int t2 = 0; t2 <= t; t2++) ds[t2] = p[t2] * (ds[t2] - D) * scale;
                }
                for (int t2 = t + 1; t2 < kn; t2++) ds[t2] = 0;
            }
            /* dV[:kn] += P^T dO[q0:];  dQ[q0:] = dS K[:kn];  dK[:kn] += dS^T Q[q0:] */
            gemm_serial(a->cb, tid, kn, hs, qn, P, 1, (size_t)kn, dO + (size_t)q0 * C, (size_t)C, 1, dV, C3, 0, GEMM_A_ANTICAUSAL, q0);
            gemm_serial(a->cb, tid, qn, hs, kn, dS, (size_t)kn, 1, K, C3, 1, dQ + (size_t)q0 * C3, C3, 1, GEMM_A_CAUSAL, q0);
            gemm_serial(a->cb, tid, kn, hs, qn, dS, 1, (size_t)kn, Q + (size_t)q0 * C3, C3, 1, dK, C3, 0, GEMM_A_ANTICAUSAL, q0);
        }
    }
}

static void cpu_attention_backward(ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                   int B, int T, int C, int NH, const ngpt_dropout *drop) {
    Attn a = {cpu_of(be), NULL, (float *)lse, (float *)dqkv, (const float *)qkv, (const float *)dout, (const float *)out, B, T, C, NH, *drop};
    parallel_for(cpu_of(be), (size_t)B * NH, 1, attn_backward_heads, &a);
}

/* decoding positions t..t+n-1 (row s * n + i: position t + i of sequence s): store each row's k, v at its position,
 * attend over 0..t+i; one (row, head) per item. Positions t.. are read from qkv, not from the cache another item
 * may be writing. */
typedef struct {
    CpuBackend *cb;
    float *out, *kv;
    const float *qkv;
    int n, t, maxT, C, NH;
} Decode;

static void attn_decode_heads(void *arg, size_t lo, size_t hi, int tid) {
    const Decode *d = (const Decode *)arg;
    int C = d->C, hs = C / d->NH, t = d->t;
    size_t C3 = 3 * (size_t)C, n = (size_t)d->n;
    float scale = 1.0f / sqrtf((float)hs), *p = cpu_scratch_op(d->cb, tid);
    for (size_t rh = lo; rh < hi; rh++) {
        size_t r = rh / (size_t)d->NH, sidx = r / n, hoff = (size_t)(rh % (size_t)d->NH) * hs;
        const float *chunk = d->qkv + sidx * n * C3 + hoff; /* the sequence's rows at t.. */
        int last = t + (int)(r % n); /* this row's position */
        const float *q = d->qkv + r * C3 + hoff;
        float *K = d->kv + sidx * 2 * (size_t)d->maxT * C + hoff, *V = K + (size_t)d->maxT * C;
        memcpy(K + (size_t)last * C, q + C, (size_t)hs * sizeof(float));
        memcpy(V + (size_t)last * C, q + 2 * C, (size_t)hs * sizeof(float));
        float mx = -FLT_MAX, sum = 0;
        for (int t2 = 0; t2 <= last; t2++) {
            const float *k = t2 < t ? K + (size_t)t2 * C : chunk + (size_t)(t2 - t) * C3 + C;
            p[t2] = dot(q, k, hs) * scale;
            mx = fmaxf(mx, p[t2]);
        }
        for (int t2 = 0; t2 <= last; t2++) { p[t2] = fast_expf(p[t2] - mx); sum += p[t2]; }
        float *o = d->out + r * C + hoff;
        for (int c = 0; c < hs; c++) o[c] = 0;
        for (int t2 = 0; t2 <= last; t2++) {
            const float *v = t2 < t ? V + (size_t)t2 * C : chunk + (size_t)(t2 - t) * C3 + 2 * C;
            float w = p[t2] / sum;
            for (int c = 0; c < hs; c++) o[c] += w * v[c];
        }
    }
}

static void cpu_attention_decode(ngpt_backend *be, void *out, void *kv, const void *qkv, int S, int t, int n, int maxT, int C, int NH,
                                 const int32_t *t_at) {
    if (t_at) t = *t_at;
    if (t < 0 || t > maxT - n) { /* a position read from t_at that is outside the cache */
        for (size_t i = 0; i < (size_t)n * S * C; i++) ((float *)out)[i] = NAN;
        return;
    }
    Decode d = {cpu_of(be), (float *)out, (float *)kv, (const float *)qkv, n, t, maxT, C, NH};
    parallel_for(cpu_of(be), (size_t)n * S * NH, 4, attn_decode_heads, &d);
}

/* ---- elementwise ops ---- */

typedef struct {
    float *out;
    const float *a, *b;
    ngpt_dropout drop;
    uint64_t seed, stream;
    float mean, std;
} Elem;

#define GELU_SCALE 0.70710678118654752f /* 1/sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143268f

static void gelu_fwd_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg;
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f x = *(const v8fu *)(e->a + i), z = x * GELU_SCALE, mz2 = -z * z, gauss, erf;
        v8_exp(&mz2, &gauss);
        v8_erf_with_gauss(&z, &gauss, &erf);
        *(v8fu *)(e->out + i) = 0.5f * x * (1.0f + erf);
    }
    for (; i < hi; i++) { float x = e->a[i]; e->out[i] = 0.5f * x * (1.0f + fast_erff(x * GELU_SCALE)); }
}
static void gelu_bwd_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg; /* a = inp, b = dout */
    size_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        v8f x = *(const v8fu *)(e->a + i), mhx2 = -0.5f * x * x, z = x * GELU_SCALE, gauss, erf;
        v8_exp(&mhx2, &gauss);
        v8_erf_with_gauss(&z, &gauss, &erf);
        v8f cdf = 0.5f * (1.0f + erf), pdf = INV_SQRT_2PI * gauss;
        *(v8fu *)(e->out + i) = *(const v8fu *)(e->b + i) * (cdf + x * pdf);
    }
    for (; i < hi; i++) {
        float x = e->a[i];
        float gauss = fast_expf(-0.5f * x * x); /* exp(-(x/sqrt2)^2): erf's and the pdf's exponential */
        float cdf = 0.5f * (1.0f + erf_with_gauss(x * GELU_SCALE, gauss)), pdf = INV_SQRT_2PI * gauss;
        e->out[i] = e->b[i] * (cdf + x * pdf);
    }
}
static void residual_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg;
    for (size_t i = lo; i < hi; i++) e->out[i] = e->a[i] + e->b[i];
}
static void dropout_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg;
    float scale = 1.0f / (1.0f - e->drop.p);
    for (size_t i = lo; i < hi; i++)
        e->out[i] = ngpt_uniform(e->drop.seed, e->drop.stream, e->drop.offset + i) >= e->drop.p ? e->a[i] * scale : 0.0f;
}
static void normal_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg;
    for (size_t i = lo; i < hi; i++) e->out[i] = e->mean + e->std * normal_at(e->seed, e->stream, i);
}

#define ELEM_GRAIN 16384
static void cpu_gelu_forward(ngpt_backend *be, void *out, const void *inp, size_t n) {
    Elem e = {.out = (float *)out, .a = (const float *)inp};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, gelu_fwd_range, &e);
}
static void cpu_gelu_backward(ngpt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    Elem e = {.out = (float *)dinp, .a = (const float *)inp, .b = (const float *)dout};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, gelu_bwd_range, &e);
}
static void cpu_residual_forward(ngpt_backend *be, void *out, const void *a, const void *b, size_t n) {
    Elem e = {.out = (float *)out, .a = (const float *)a, .b = (const float *)b};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, residual_range, &e);
}
static void cpu_dropout(ngpt_backend *be, void *out, const void *inp, size_t n, const ngpt_dropout *drop) {
    if (drop->p <= 0) {
        if (out != inp) memcpy(out, inp, n * sizeof(float));
        return;
    }
    Elem e = {.out = (float *)out, .a = (const float *)inp, .drop = *drop};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, dropout_range, &e);
}
static void cpu_fill_normal(ngpt_backend *be, float *dst, size_t n, float mean, float std, uint64_t seed, uint64_t stream) {
    Elem e = {.out = dst, .seed = seed, .stream = stream, .mean = mean, .std = std};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, normal_range, &e);
}
static void cpu_cast_from_f32(ngpt_backend *be, void *dst, const float *src, size_t n) {
    (void)be;
    if (dst != src) memcpy(dst, src, n * sizeof(float));
}

/* ---- embeddings ---- */

typedef struct {
    float *out, *dwte, *dwpe;
    const float *wte, *wpe, *dout;
    const int32_t *tokens, *bucket_start, *bucket_pos;
    int B, T, C;
} Enc;

static void enc_forward_rows(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Enc *e = (const Enc *)arg;
    for (size_t i = lo; i < hi; i++) {
        int t = (int)(i % (size_t)e->T);
        const float *we = e->wte + (size_t)e->tokens[i] * e->C, *pe = e->wpe + (size_t)t * e->C;
        float *o = e->out + i * (size_t)e->C;
        for (int c = 0; c < e->C; c++) o[c] = we[c] + pe[c];
    }
}
static void enc_backward_buckets(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Enc *e = (const Enc *)arg;
    for (size_t k = lo; k < hi; k++) {
        int first = e->bucket_start[k], last = e->bucket_start[k + 1];
        float *dw = e->dwte + (size_t)e->tokens[e->bucket_pos[first]] * e->C;
        for (int j = first; j < last; j++) {
            const float *d = e->dout + (size_t)e->bucket_pos[j] * e->C;
            for (int c = 0; c < e->C; c++) dw[c] += d[c];
        }
    }
}
static void enc_backward_positions(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Enc *e = (const Enc *)arg;
    for (size_t t = lo; t < hi; t++) {
        float *dw = e->dwpe + t * (size_t)e->C;
        for (int b = 0; b < e->B; b++) {
            const float *d = e->dout + ((size_t)b * e->T + t) * e->C;
            for (int c = 0; c < e->C; c++) dw[c] += d[c];
        }
    }
}
static void cpu_encoder_forward(ngpt_backend *be, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C) {
    Enc e = {.out = (float *)out, .wte = (const float *)wte, .wpe = (const float *)wpe, .tokens = tokens, .B = B, .T = T, .C = C};
    parallel_for(cpu_of(be), (size_t)B * T, 256, enc_forward_rows, &e);
}
static void cpu_encoder_backward(ngpt_backend *be, void *dwte, void *dwpe, const void *dout, const int32_t *tokens, const int32_t *bucket_start,
                                 const int32_t *bucket_pos, int nbuckets, int B, int T, int C) {
    Enc e = {.dwte = (float *)dwte, .dwpe = (float *)dwpe, .dout = (const float *)dout, .tokens = tokens,
             .bucket_start = bucket_start, .bucket_pos = bucket_pos, .B = B, .T = T, .C = C};
    parallel_for(cpu_of(be), (size_t)nbuckets, 16, enc_backward_buckets, &e);
    parallel_for(cpu_of(be), (size_t)T, 16, enc_backward_positions, &e);
}

/* ---- softmax cross-entropy over the first V of Vp columns ---- */

typedef struct {
    CpuBackend *cb;
    float *logits, *losses;
    const int32_t *targets;
    int V, Vp;
    float dscale;
} Xent;

static void xent_rows(void *arg, size_t lo, size_t hi, int tid) {
    const Xent *x = (const Xent *)arg;
    float *e = cpu_scratch_op(x->cb, tid); /* exp(z - max) of one row */
    for (size_t i = lo; i < hi; i++) {
        float *z = x->logits + i * (size_t)x->Vp;
        float mx = vmax(z, x->V);
        for (int j = 0; j < x->V; j++) e[j] = fast_expf(z[j] - mx);
        float sum = vsum(e, x->V), inv = 1.0f / sum;
        int tg = x->targets[i];
        x->losses[i] = mx + logf(sum) - z[tg];
        if (x->dscale != 0) {
            for (int j = 0; j < x->V; j++) z[j] = e[j] * inv * x->dscale;
            z[tg] -= x->dscale;
            for (int j = x->V; j < x->Vp; j++) z[j] = 0;
        }
    }
}
static void cpu_crossentropy(ngpt_backend *be, void *logits, float *losses, const int32_t *targets, int N, int V, int Vp, float dscale) {
    Xent x = {cpu_of(be), (float *)logits, losses, targets, V, Vp, dscale};
    parallel_for(cpu_of(be), (size_t)N, 8, xent_rows, &x);
}

/* ---- optimizer ---- */

/* sum of squares in double over fixed chunks (their size depends on n alone), added in chunk order: the same
 * result for any thread count */
#define NORM_CHUNKS_MAX 256
typedef struct {
    const float *x;
    size_t n, chunk;
    double partial[NORM_CHUNKS_MAX];
} NormSq;

typedef double v4d __attribute__((vector_size(32)));
typedef float v4fu __attribute__((vector_size(16), aligned(4)));
#define V4D_OF(x) __builtin_convertvector(*(const v4fu *)(x), v4d) /* a macro: no vector-returning function (ABI) */

static void norm_chunks(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    NormSq *a = (NormSq *)arg;
    for (size_t c = lo; c < hi; c++) {
        size_t i = c * a->chunk, end = MIN((c + 1) * a->chunk, a->n);
        /* four independent 4-wide double sums, so the adds do not wait on one another */
        v4d s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
        for (; i + 16 <= end; i += 16) {
            v4d x0 = V4D_OF(a->x + i), x1 = V4D_OF(a->x + i + 4), x2 = V4D_OF(a->x + i + 8), x3 = V4D_OF(a->x + i + 12);
            s0 += x0 * x0, s1 += x1 * x1, s2 += x2 * x2, s3 += x3 * x3;
        }
        v4d t = (s0 + s1) + (s2 + s3);
        double s = (t[0] + t[2]) + (t[1] + t[3]);
        for (; i < end; i++) s += (double)a->x[i] * a->x[i];
        a->partial[c] = s;
    }
}
static double cpu_norm_sq(ngpt_backend *be, const void *x, size_t n) {
    NormSq a = {.x = (const float *)x, .n = n, .chunk = MAX((size_t)65536, (n + NORM_CHUNKS_MAX - 1) / NORM_CHUNKS_MAX)};
    size_t chunks = (n + a.chunk - 1) / a.chunk;
    parallel_for_chunks(cpu_of(be), chunks, 1, norm_chunks, &a);
    double s = 0;
    for (size_t c = 0; c < chunks; c++) s += a.partial[c];
    return s;
}

typedef struct {
    float *param, *m, *v;
    const float *grad;
    ngpt_adamw h;
} Adam;

static void adamw_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Adam *a = (const Adam *)arg;
    const ngpt_adamw *h = &a->h;
    for (size_t i = lo; i < hi; i++) {
        float g = a->grad[i] * h->grad_scale;
        float m = h->beta1 * a->m[i] + h->one_minus_beta1 * g;
        float v = h->beta2 * a->v[i] + h->one_minus_beta2 * g * g;
        a->m[i] = m;
        a->v[i] = v;
        float p = a->param[i];
        a->param[i] = p - h->lr * (m / h->bias_correction1 / (sqrtf(v / h->bias_correction2) + h->eps) + h->weight_decay * p);
    }
}
static void cpu_adamw(ngpt_backend *be, void *param, float *master, const void *grad, void *m, void *v, size_t n, const ngpt_adamw *h) {
    (void)master; /* fp32: the parameters are the master copy */
    if (h->moments_dtype != NGPT_DTYPE_F32) { /* the planner refuses bf16 moments on the CPU; a library caller may not */
        if (be->status == NGPT_OK)
            be->status = fail(be->msg, sizeof be->msg, NGPT_ERR_ARG, "cpu adamw: the CPU keeps AdamW moments in fp32 (moments_dtype %d)",
                              h->moments_dtype);
        return;
    }
    Adam a = {(float *)param, (float *)m, (float *)v, (const float *)grad, *h};
    parallel_for(cpu_of(be), n, ELEM_GRAIN, adamw_range, &a);
}

/* ---- memory ---- */

static int cpu_arena_alloc(ngpt_backend *be, size_t device_bytes, void **device, size_t host_bytes, void **host) {
    CpuBackend *cb = cpu_of(be);
    if (cb->arena) return fail(be->msg, sizeof be->msg, NGPT_ERR_STATE, "the CPU arena is already allocated");
    size_t dev = ALIGN_UP(device_bytes, 4096), total = dev + ALIGN_UP(host_bytes, 4096);
    void *p = NULL;
    if (posix_memalign(&p, 4096, total ? total : 4096) != 0)
        return fail(be->msg, sizeof be->msg, NGPT_ERR_NOMEM, "cannot allocate the %.2f GiB arena in host memory", (double)total / GiB);
    cb->arena = p;
    *device = p;
    *host = (char *)p + dev;
    return NGPT_OK;
}
static void cpu_arena_free(ngpt_backend *be) {
    CpuBackend *cb = cpu_of(be);
    free(cb->arena);
    cb->arena = NULL;
}
/* Lanes at once on teams of equal size only: with an odd thread count one lane would get a thread less than
 * the other and keep it waiting (3 threads: a step of half the batch on one thread, slower than the three
 * threads on each op in turn), so there the lanes run one after another on every thread. */
static int cpu_lanes_at_once(const CpuBackend *cb) { return cb->nthreads >= CPU_LANES && cb->nthreads % CPU_LANES == 0; }
/* all the pool's threads (1) or the calling thread alone (0); the results are the same either way */
static void cpu_use_all_threads(ngpt_backend *be, int all) {
    CpuBackend *cb = cpu_of(be);
    cb->active = all ? cb->nthreads : 1;
}

static size_t cpu_backend_scratch_bytes(ngpt_backend *be, const ngpt_shape *s) { return cpu_scratch_bytes(s, cpu_of(be)->nthreads); }
static void cpu_set_scratch(ngpt_backend *be, void *scratch, size_t bytes) {
    CpuBackend *cb = cpu_of(be);
    cb->scratch = (char *)ALIGN_UP((uintptr_t)scratch, 64);
    cb->scratch_bytes = bytes;
    cb->scratch_per_thread = (bytes - 64 - CPU_LANES * CPU_GEMM_B_FLOATS * sizeof(float)) / (size_t)cb->nthreads / 64 * 64;
}
static void cpu_copy(ngpt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (dst != src && bytes) memmove(dst, src, bytes);
}
static void cpu_sync(ngpt_backend *be) { (void)be; }
static void cpu_fence(ngpt_backend *be, int fence) { /* every op has completed when it returns */
    (void)be;
    (void)fence;
}
static void zero_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    memset((char *)arg + lo, 0, hi - lo);
}
/* the gradients (both lanes' on the CPU) are cleared at every step: split over the threads */
static void cpu_zero(ngpt_backend *be, void *dst, size_t bytes) { parallel_for(cpu_of(be), bytes, (size_t)1 << 18, zero_range, dst); }

/* ---- lanes: fn(ctx, g) for g < lanes, lane g on team g at once (its ops run on that team's threads), or one
 * after another on the calling thread when a single thread is in use. The results are the same either way, as
 * every op's are for any number of threads. ---- */
typedef struct {
    CpuBackend *cb;
    void (*fn)(void *ctx, int lane);
    void *ctx;
    int lanes;
} LaneJob;

static void lane_thunk(void *arg, int i, int nt) {
    const LaneJob *j = (const LaneJob *)arg;
    cpu_lane_team = &j->cb->team[i];
    for (int g = i; g < j->lanes; g += nt) j->fn(j->ctx, g);
    cpu_lane_team = NULL;
}

static void cpu_run_lanes(ngpt_backend *be, int lanes, void (*fn)(void *ctx, int lane), void *ctx) {
    CpuBackend *cb = cpu_of(be);
    if (cb->active == 1 || !cpu_lanes_at_once(cb) || lanes < 2) {
        for (int g = 0; g < lanes; g++) fn(ctx, g);
        return;
    }
    LaneJob j = {cb, fn, ctx, lanes};
    pool_run(&cb->lane_pool.pool, lane_thunk, &j);
}

static void cpu_destroy(ngpt_backend *be) {
    CpuBackend *cb = cpu_of(be);
    cpu_arena_free(be);
    pool_free(&cb->pool);
    if (cpu_lanes_at_once(cb)) {
        pool_free(&cb->lane_pool);
        for (int g = 0; g < CPU_LANES; g++) pool_free(&cb->team_pool[g]);
    }
    free(cb);
}

/* the lanes' threads: a pool that starts them and, per lane, a pool of nthreads / CPU_LANES threads whose
 * thread 0 is the lane's */
static int cpu_lanes_init(CpuBackend *cb, char *err, size_t errlen) {
    int rc = pool_init(&cb->lane_pool, CPU_LANES, err, errlen);
    for (int g = 0, tid0 = 0; g < CPU_LANES; g++) {
        int n = cb->nthreads / CPU_LANES;
        int rg = pool_init(&cb->team_pool[g], n, err, errlen);
        if (!rc) rc = rg;
        cb->team[g] = (CpuTeam){cb, &cb->team_pool[g].pool, tid0, cb->team_pool[g].pool.nthreads, g};
        tid0 += n;
    }
    return rc; /* pool_init fails, with its message, whenever it starts fewer threads than asked */
}

int ngpt_cpu_backend_create(ngpt_backend **out, int nthreads, char *err, size_t errlen) {
    *out = NULL;
    CpuBackend *cb = (CpuBackend *)calloc(1, sizeof *cb);
    if (!cb) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory creating the CPU backend");
    if (nthreads <= 0) nthreads = cpu_count();
    nthreads = MIN(nthreads, POOL_MAX_THREADS);
    int rc = pool_init(&cb->pool, nthreads, err, errlen);
    if (rc) { pool_free(&cb->pool); free(cb); return rc; }
    cb->nthreads = cb->active = cb->pool.pool.nthreads;
    cb->all = (CpuTeam){cb, &cb->pool.pool, 0, cb->nthreads, 0};
    ngpt_backend *be = &cb->be;
    be->impl = cb;
    if (cpu_lanes_at_once(cb) && (rc = cpu_lanes_init(cb, err, errlen))) { cpu_destroy(be); return rc; }
    be->name = "cpu";
    be->dtype = NGPT_DTYPE_F32;
    be->destroy = cpu_destroy;
    be->arena_alloc = cpu_arena_alloc;
    be->arena_free = cpu_arena_free;
    be->scratch_bytes = cpu_backend_scratch_bytes;
    be->set_scratch = cpu_set_scratch;
    be->upload = cpu_copy;
    be->download = cpu_copy;
    be->download_async = cpu_copy;
    be->fence_record = cpu_fence;
    be->fence_wait = cpu_fence;
    be->sync = cpu_sync;
    be->zero = cpu_zero;
    be->copy = cpu_copy;
    be->fill_normal = cpu_fill_normal;
    be->cast_from_f32 = cpu_cast_from_f32;
    be->encoder_forward = cpu_encoder_forward;
    be->encoder_backward = cpu_encoder_backward;
    be->layernorm_forward = cpu_layernorm_forward;
    be->layernorm_backward = cpu_layernorm_backward;
    be->matmul_forward = cpu_matmul_forward;
    be->matmul_backward = cpu_matmul_backward;
    be->attention_forward = cpu_attention_forward;
    be->attention_backward = cpu_attention_backward;
    be->attention_decode = cpu_attention_decode;
    be->gelu_forward = cpu_gelu_forward;
    be->gelu_backward = cpu_gelu_backward;
    be->residual_forward = cpu_residual_forward;
    be->dropout = cpu_dropout;
    be->crossentropy = cpu_crossentropy;
    be->norm_sq = cpu_norm_sq;
    be->adamw = cpu_adamw;
    be->run_lanes = cpu_run_lanes;
    *out = be;
    return NGPT_OK;
}

#ifndef NGPT_CUDA
int ngpt_cuda_available(char *why, size_t whylen) {
    fail(why, whylen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA, which ./build.sh adds where nvcc is installed");
    return 0;
}
int ngpt_cuda_compute_capability(void) { return 0; }
int ngpt_cuda_sm_count(void) { return 0; }
int ngpt_cuda_wgmma_attention(void) { return 0; }
int ngpt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen) {
    if (!free_bytes || !total_bytes) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_cuda_mem_info: NULL output");
    *free_bytes = *total_bytes = 0;
    return fail(err, errlen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA");
}
int ngpt_cuda_backend_create(ngpt_backend **out, int dtype, char *err, size_t errlen) {
    (void)dtype;
    *out = NULL;
    return fail(err, errlen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA: rebuild with ./build.sh where nvcc is installed");
}
int ngpt_cuda_describe(char *out, size_t outlen) {
    snprintf(out, outlen, "cuda: none (a CPU-only build: ./build.sh builds with CUDA where nvcc is installed)");
    return NGPT_ERR_DEVICE;
}
#endif

/* ======================================================================================================
 * Data: nanoGPT's train.bin/val.bin (raw uint16 tokens) and llm.c's shards (a 256-int32 header with magic
 * 20240520, version 1 and the token count, then uint16 tokens). Files are memory-mapped, checked once
 * (size, header, every id below the vocabulary size) and sampled as nanoGPT samples them: random windows
 * of block_size + 1 tokens.
 * ==================================================================================================== */

#define LLMC_HEADER_INTS 256

typedef struct {
    char path[512];
    const uint16_t *tokens;
    size_t ntok;
    void *map;
    size_t map_bytes;
    int llmc;
} TokenFile;

static void tokenfile_close(TokenFile *f) {
    if (f->map) munmap(f->map, f->map_bytes);
    memset(f, 0, sizeof *f);
}

/* What a data file holds when it is another of llm.c's (or nanogpt's) files, not tokens (known_file's 8-byte
 * signatures); NULL for tokens */
static const char *not_token_data(const unsigned char *p, size_t bytes) {
    static const char *const what_is[KNOWN_KINDS] = { /* a shard is data; safetensors and zip are not told from tokens */
        [KNOWN_LLMC_MODEL] = "an llm.c model file: weights go in init_from (--init_from=FILE)",
        [KNOWN_LLMC_STATE] = "llm.c's optimizer state, which nanogpt does not read",
        [KNOWN_LLMC_DEBUG_STATE] = "llm.c's debug state, which nanogpt does not read",
        [KNOWN_LLMC_TOKENIZER] = "llm.c's tokenizer file: GPT-2's vocabulary, which goes as tokenizer_dir",
        [KNOWN_LLMC_LLAMA3_SHARD] = "an llm.c Llama 3 shard (uint32 tokens), which nanogpt does not read: it trains GPT-2 on uint16 tokens "
                                    "(GPT-2's shards have magic 20240520)",
        [KNOWN_CHECKPOINT] = "a nanogpt checkpoint: sample it, or resume its run with init_from = resume",
    };
    return what_is[known_file(p, bytes, 1)];
}

/* Opens and checks a token file: ids must be < vocab, and there must be at least min_tokens of them. A file
 * that starts with llm.c's magic is an llm.c shard, any other raw uint16 tokens (nanoGPT's train.bin);
 * with shard set (a file found by llm.c's shard names) the header is required. */
static int tokenfile_open(TokenFile *f, const char *path, int vocab, size_t min_tokens, int shard, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    copy_str(f->path, sizeof f->path, path);
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO in its place must not block the open */
    if (fd < 0) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, NGPT_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* a token file is mapped: a pipe or a device has no size to map */
        close(fd);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a regular file (a token file is mapped into memory)", path);
    }
    size_t bytes = (size_t)st.st_size;
    if (bytes == 0) {
        close(fd);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s is empty; it needs at least block_size + 1 = %zu tokens (%zu bytes%s)", path, min_tokens,
                    min_tokens * 2 + (shard ? LLMC_HEADER_INTS * 4 : 0), shard ? " with llm.c's header" : " of uint16 tokens");
    }
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(err, errlen, NGPT_ERR_IO, "cannot map %s: %s", path, strerror(e));
    f->map = map;
    f->map_bytes = bytes;
    const unsigned char *p = (const unsigned char *)map;
    int32_t magic = 0;
    if (bytes >= 4) memcpy(&magic, p, 4);
    const char *other_file = not_token_data(p, bytes);
    if (other_file) {
        tokenfile_close(f);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s is no token data: it is %s; the data folder holds train.bin and val.bin (uint16 tokens) "
                                                   "or llm.c's GPT-2 shards", path, other_file);
    }
    if (shard && magic != LLMC_MAGIC) {
        tokenfile_close(f);
        if (bytes < 4)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes, too short for llm.c's shard header (magic %d, version 1, token count, "
                                                       "%d bytes in all)", path, bytes, LLMC_MAGIC, LLMC_HEADER_INTS * 4);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: magic %d at byte offset 0, expected %d: a file named as an llm.c shard (*_train_*.bin, "
                                                   "*_val_*.bin) must start with llm.c's header (magic %d, version 1, token count); "
                                                   "headerless uint16 tokens go in train.bin / val.bin", path, magic, LLMC_MAGIC, LLMC_MAGIC);
    }
    if (magic == LLMC_MAGIC) {
        int32_t hdr[3];
        if (bytes < LLMC_HEADER_INTS * 4) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c shard header truncated (%zu bytes, the header is %d)", path, bytes, LLMC_HEADER_INTS * 4);
        }
        memcpy(hdr, p, sizeof hdr);
        if (hdr[1] != 1) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c shard version %d at byte offset 4, expected 1; this build reads version 1 "
                                                       "(uint16 tokens)", path, hdr[1]);
        }
        size_t want = (size_t)LLMC_HEADER_INTS * 4 + (size_t)(uint32_t)hdr[2] * 2;
        if (hdr[2] < 0) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c shard token count %d at byte offset 8 is negative (the file has %zu bytes, "
                                                       "room for %zu tokens after the header)", path, hdr[2], bytes,
                        bytes > LLMC_HEADER_INTS * 4 ? (bytes - LLMC_HEADER_INTS * 4) / 2 : 0);
        }
        if (want != bytes) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: header says %d tokens (%zu bytes with the header), the file has %zu bytes (%s)", path,
                        hdr[2], want, bytes, bytes < want ? "truncated, or not an llm.c shard" : "bytes after the tokens, or not an llm.c shard");
        }
        f->llmc = 1;
        f->tokens = (const uint16_t *)(p + LLMC_HEADER_INTS * 4);
        f->ntok = (size_t)hdr[2];
    } else {
        if (bytes % 2) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes is an odd size; a nanoGPT .bin holds uint16 tokens (2 bytes each)", path, bytes);
        }
        f->tokens = (const uint16_t *)p;
        f->ntok = bytes / 2;
    }
    if (f->ntok < min_tokens) {
        size_t n = f->ntok;
        tokenfile_close(f);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s has %zu tokens; block_size needs at least %zu (block_size + 1)", path, n, min_tokens);
    }
    for (size_t i = 0; i < f->ntok; i++) {
        if (f->tokens[i] >= vocab) {
            size_t off = (size_t)((const unsigned char *)&f->tokens[i] - p);
            int id = f->tokens[i];
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: token id %d at byte offset %zu is out of range: the vocabulary has %d ids (0..%d)",
                        path, id, off, vocab, vocab - 1);
        }
    }
    return NGPT_OK;
}

/* A split of a dataset: DIR/<split>.bin, or else every llm.c-style shard DIR/..._<split>_....bin in name order.
 * Windows never cross a file boundary; a window is drawn uniformly over all of them. */
#define MAX_SHARDS 4096
typedef struct {
    int n;
    TokenFile *files;
    size_t *windows_before; /* windows in the files before file i */
    size_t windows;         /* all windows of T + 1 tokens */
    char split[8];          /* train or val */
    int shards_unread;      /* llm.c shards of the split beside DIR/<split>.bin, which is read instead */
    int ids;                /* the ids a token may be, 0..ids-1: checked at opening, and again as windows are read */
} TokenSet;

static void tokenset_close(TokenSet *s) {
    for (int i = 0; i < s->n; i++) tokenfile_close(&s->files[i]);
    free(s->files);
    free(s->windows_before);
    memset(s, 0, sizeof *s);
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* where the split's name is a word of a shard's name (fineweb_train_000001.bin: at train), NULL if nowhere */
static const char *shard_split_word(const char *name, const char *split) {
    size_t ls = strlen(split);
    const char *hit = strstr(name, split);
    while (hit && !((hit == name || hit[-1] == '_') && (hit[ls] == '_' || hit[ls] == '.'))) hit = strstr(hit + 1, split);
    return hit;
}

/* whether a file name is one of llm.c's shards of split: fineweb_train_000001.bin, tiny_shakespeare_val.bin (and
 * festival_val_000000.bin: the split is a whole word between underscores, or before .bin, wherever it is one) */
static int shard_of(const char *name, const char *split) {
    size_t ln = strlen(name);
    return ln > 4 && !strcmp(name + ln - 4, ".bin") && shard_split_word(name, split);
}

/* For a relative folder that is not there: "; DIR is relative to the current folder, CWD" (a run started
 * from another folder than its training run's); "" otherwise */
static const char *relative_dir_note(const char *dir, char *buf, size_t cap) {
    char cwd[PATH_MAX];
    struct stat st;
    buf[0] = 0;
    if (dir[0] != '/' && stat(dir, &st) && getcwd(cwd, sizeof cwd)) snprintf(buf, cap, "; %s is relative to the current folder, %s", dir, cwd);
    return buf;
}

/* whether dir holds split's data: split.bin or llm.c shards of it */
CLI_USED static int has_split(const char *dir, const char *split) {
    char path[700];
    snprintf(path, sizeof path, "%.400s/%s.bin", dir, split);
    if (file_exists(path)) return 1;
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d)) != NULL) found = shard_of(e->d_name, split);
    if (d) closedir(d);
    return found;
}

static int tokenset_open(TokenSet *s, const char *dir, const char *split, int vocab, int T, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->ids = vocab;
    char path[700], *names[MAX_SHARDS];
    int n = 0, rc = NGPT_OK, sharded = 0;
    snprintf(path, sizeof path, "%.400s/%s.bin", dir, split);
    copy_str(s->split, sizeof s->split, split);
    if (file_exists(path)) {
        names[n++] = strdup(path);
        DIR *d = opendir(dir); /* shards beside it are said (tokenset_describe): they are not read */
        struct dirent *e;
        char own[16];
        snprintf(own, sizeof own, "%s.bin", split);
        while (d && (e = readdir(d)) != NULL) s->shards_unread += strcmp(e->d_name, own) && shard_of(e->d_name, split);
        if (d) closedir(d);
    } else {
        sharded = 1;
        DIR *d = opendir(dir);
        if (!d) {
            int e = errno;
            struct stat st;
            if ((e == ENOTDIR && !stat(dir, &st) && S_ISREG(st.st_mode)) || strpbrk(dir, "*?[")) { /* llm.c's -i takes a file or a pattern */
                char parent[400];
                copy_str(parent, sizeof parent, dir);
                char *slash = strrchr(parent, '/');
                if (slash) *slash = 0;
                else copy_str(parent, sizeof parent, ".");
                return fail(err, errlen, NGPT_ERR_ARG, "the data folder %s is %s: data_dir (or data/<dataset>) is the folder that holds "
                                                        "train.bin and val.bin, or llm.c's shards *_train_*.bin and *_val_*.bin: "
                                                        "data_dir = %s (--data_dir=%s)", dir, strpbrk(dir, "*?[") ? "a file pattern" : "a file", parent,
                            parent);
            }
            char rel[PATH_MAX + 600], near[700];
            if (e == ENOENT && did_you_mean_path(dir, 1, near, sizeof near)[0])
                return fail(err, errlen, NGPT_ERR_IO, "cannot open data folder %s: %s%s", dir, strerror(e), near);
            return fail(err, errlen, NGPT_ERR_IO, "cannot open data folder %s: %s (prepare it with `nanogpt prepare`)%s", dir, strerror(e),
                        relative_dir_note(dir, rel, sizeof rel));
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n <= MAX_SHARDS) {
            if (shard_of(e->d_name, split)) {
                if (n == MAX_SHARDS) { n++; break; }
                snprintf(path, sizeof path, "%.400s/%.255s", dir, e->d_name);
                names[n++] = strdup(path);
            }
        }
        closedir(d);
        if (n > MAX_SHARDS) {
            for (int i = 0; i < MAX_SHARDS; i++) free(names[i]);
            return fail(err, errlen, NGPT_ERR_ARG, "%s holds more than %d llm.c shards *_%s_*.bin; this build reads at most %d per split", dir,
                        MAX_SHARDS, split, MAX_SHARDS);
        }
        if (!n) {
            char readme[420], how[460] = "prepare it with `nanogpt prepare`";
            snprintf(readme, sizeof readme, "%.400s/README.md", dir);
            if (file_exists(readme)) snprintf(how, sizeof how, "%s says how to get it", readme);
            return fail(err, errlen, NGPT_ERR_IO, "%s has no %s.bin (nor llm.c shards *_%s_*.bin); %s", dir, split, split, how);
        }
        qsort(names, (size_t)n, sizeof names[0], name_cmp);
    }
    s->files = (TokenFile *)calloc((size_t)n, sizeof *s->files);
    s->windows_before = (size_t *)calloc((size_t)n + 1, sizeof *s->windows_before);
    if (!s->files || !s->windows_before) rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory");
    for (int i = 0; i < n && !rc; i++) {
        if (!names[i]) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory"); break; }
        rc = tokenfile_open(&s->files[i], names[i], vocab, (size_t)T + 1, sharded, err, errlen);
        if (!rc) {
            s->n = i + 1;
            s->windows_before[i] = s->windows;
            s->windows += s->files[i].ntok - (size_t)T;
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    if (rc) tokenset_close(s);
    return rc;
}

/* "1,003,854 tokens (train.bin)", "400,000,000 tokens in 4 shards (fineweb_train_000001.bin .. fineweb_train_000004.bin)" */
static const char *tokenset_describe(const TokenSet *s, char *buf, size_t cap) {
    size_t tokens = 0;
    for (int i = 0; i < s->n; i++) tokens += s->files[i].ntok;
    char num[32], *o = num + sizeof num - 1;
    *o = 0;
    for (int digits = 0; digits == 0 || tokens; digits++, tokens /= 10) {
        if (digits && digits % 3 == 0) *--o = ',';
        *--o = (char)('0' + tokens % 10);
    }
    const char *first = strrchr(s->files[0].path, '/'), *last = strrchr(s->files[s->n - 1].path, '/');
    first = first ? first + 1 : s->files[0].path;
    last = last ? last + 1 : s->files[s->n - 1].path;
    /* shards of more than one name (fineweb_train_*, tiny_shakespeare_train): one dataset of them all, said */
    const char *other = NULL;
    const char *word = shard_split_word(first, s->split);
    size_t stem = word ? (size_t)(word - first) : 0;
    for (int i = 1; i < s->n && !other; i++) {
        const char *name = strrchr(s->files[i].path, '/') ? strrchr(s->files[i].path, '/') + 1 : s->files[i].path;
        if (shard_split_word(name, s->split) != name + stem || strncmp(name, first, stem)) other = name;
    }
    char also[200] = "";
    if (s->shards_unread)
        snprintf(also, sizeof also, "; %d llm.c shard%s *_%s_*.bin beside it not read", s->shards_unread, s->shards_unread > 1 ? "s" : "", s->split);
    else if (other) snprintf(also, sizeof also, "; names %.*s* and %.60s, all read as one dataset", (int)MIN(stem, 60), first, other);
    if (s->n == 1) snprintf(buf, cap, "%s tokens (%.200s%.140s)", o, first, also); /* the precisions: within the callers' 600 bytes */
    else snprintf(buf, cap, "%s tokens in %d shards (%.180s .. %.180s%.140s)", o, s->n, first, last, also);
    return buf;
}

/* the first token of window g, and the file it is in */
static const uint16_t *tokenset_window(const TokenSet *s, size_t g, const TokenFile **file) {
    int lo = 0, hi = s->n - 1;
    while (lo < hi) { /* the last file whose first window is <= g */
        int mid = (lo + hi + 1) / 2;
        if (s->windows_before[mid] <= g) lo = mid; else hi = mid - 1;
    }
    *file = &s->files[lo];
    return s->files[lo].tokens + (g - s->windows_before[lo]);
}

/* ---- character vocabulary (meta.bin): "ngptchar", uint32 version 1, uint32 count, then per id a length
 * byte (1-4) and the UTF-8 bytes of its character, ids in code point order ---- */

#define CHARVOCAB_MAGIC "ngptchar"
#define CHARVOCAB_VERSION 1

typedef struct {
    int n;
    uint32_t cp[65536];    /* code point of each id */
    const char *file_name; /* where a dataset's came from: "meta.bin", or nanoGPT's "meta.pkl" */
} CharVocab;

static int utf8_encode(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { out[0] = (unsigned char)(0xC0 | cp >> 6); out[1] = (unsigned char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | cp >> 12); out[1] = (unsigned char)(0x80 | (cp >> 6 & 63)); out[2] = (unsigned char)(0x80 | (cp & 63));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | cp >> 18); out[1] = (unsigned char)(0x80 | (cp >> 12 & 63));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 63)); out[3] = (unsigned char)(0x80 | (cp & 63));
    return 4;
}

/* Decodes one UTF-8 sequence from s[0..n). Returns its length, 0 when more bytes are needed, -1 when invalid. */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        if ((s[i] & 0xC0) != 0x80) return -1;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return -1;
    *cp = v;
    return len;
}

static int charvocab_load(CharVocab *v, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char magic[8];
    uint32_t hdr[2];
    int rc = NGPT_OK;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CHARVOCAB_MAGIC, 8) || fread(hdr, 4, 2, f) != 2) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a nanogpt character vocabulary (expected magic '%s')", path, CHARVOCAB_MAGIC);
    } else if (hdr[0] != CHARVOCAB_VERSION) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: version %u; this build reads version %d", path, hdr[0], CHARVOCAB_VERSION);
    } else if (hdr[1] < 1 || hdr[1] > 65536) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: vocabulary size %u out of range [1, 65536]", path, hdr[1]);
    } else {
        v->n = (int)hdr[1];
        for (int i = 0; i < v->n && !rc; i++) {
            long off = ftell(f);
            int len = fgetc(f);
            unsigned char b[4];
            uint32_t cp;
            if (len < 1 || len > 4 || fread(b, 1, (size_t)len, f) != (size_t)len || utf8_decode(b, (size_t)len, &cp) != len)
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: entry %d at byte offset %ld is truncated or not one UTF-8 character", path, i, off);
            else if (i > 0 && cp <= v->cp[i - 1])
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: entry %d at byte offset %ld (U+%04X) %s entry %d's U+%04X: the characters are in "
                                                        "rising code point order, each once", path, i, off, cp,
                          cp == v->cp[i - 1] ? "repeats" : "comes after", i - 1, v->cp[i - 1]);
            else v->cp[i] = cp;
        }
        long end = ftell(f);
        if (!rc && fgetc(f) != EOF) /* a count too small, or two vocabularies joined: the ids would be another text's */
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: trailing bytes after its %d characters (from byte offset %ld): the file is not one "
                                                    "vocabulary; prepare the data again", path, v->n, end);
    }
    fclose(f);
    return rc;
}

/* ---- nanoGPT's meta.pkl: its prepare.py writes pickle.dump({'vocab_size': n, 'itos': {id: char, ...},
 * 'stoi': {char: id, ...}}). Read by an unpickler of the opcodes pickle writes for a dict of ints and strings
 * (protocols 1 to 5); any other opcode is an error naming it and its byte. The characters must be in code
 * point order, as prepare.py's sorted(set(text)) makes them, so that the ids are those meta.bin would give. ---- */

enum { PKL_INT, PKL_STR, PKL_DICT };
#define PKL_MARK (-1)           /* a mark on the stack */
#define PKL_MAX_BYTES (64 << 20) /* 65536 characters both ways take about 1.5 MB */
typedef struct {
    int type;
    int64_t value;   /* PKL_INT */
    size_t off, len; /* PKL_STR: its bytes in the file */
    size_t at;       /* the byte of the opcode that made it */
} PklObj;
typedef struct { int owner, key, value; } PklPair; /* one item of the dict object owner */
typedef struct {
    const unsigned char *buf;
    size_t n;
    PklObj *obj;
    PklPair *pair;
    int *stack, *memo; /* object indices (PKL_MARK on the stack for a mark; -1 in memo: unset) */
    size_t n_obj, n_pair, n_stack, n_memo, cap_obj, cap_pair, cap_stack, cap_memo;
} Pkl;

/* items (capacity *cap elements of esize bytes) with room for need: the same array, a larger one (*cap
 * updated), or NULL when out of memory (items still valid) */
static void *pkl_grow(void *items, size_t *cap, size_t need, size_t esize) {
    if (need <= *cap) return items;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need) cap2 *= 2;
    void *grown = realloc(items, cap2 * esize);
    if (grown) *cap = cap2;
    return grown;
}

static int pkl_push(Pkl *p, int index) {
    int *stack = (int *)pkl_grow(p->stack, &p->cap_stack, p->n_stack + 1, sizeof *p->stack);
    if (!stack) return 0;
    p->stack = stack;
    p->stack[p->n_stack++] = index;
    return 1;
}

/* a new object, pushed; returns its index, -1 when out of memory */
static int pkl_new(Pkl *p, int type, int64_t value, size_t off, size_t len, size_t at) {
    PklObj *obj = (PklObj *)pkl_grow(p->obj, &p->cap_obj, p->n_obj + 1, sizeof *p->obj);
    if (!obj) return -1;
    p->obj = obj;
    if (!pkl_push(p, (int)p->n_obj)) return -1;
    p->obj[p->n_obj] = (PklObj){type, value, off, len, at};
    return (int)p->n_obj++;
}

/* the little-endian unsigned of k bytes at *at; 0 when the file ends first */
static int pkl_uint(const Pkl *p, size_t *at, int k, uint64_t *v) {
    if (p->n - *at < (size_t)k) return 0;
    *v = 0;
    for (int i = k - 1; i >= 0; i--) *v = *v << 8 | p->buf[*at + (size_t)i];
    *at += (size_t)k;
    return 1;
}

static int pkl_str_is(const Pkl *p, int i, const char *s) {
    return p->obj[i].type == PKL_STR && p->obj[i].len == strlen(s) && !memcmp(p->buf + p->obj[i].off, s, p->obj[i].len);
}

/* the items above a mark (or for SETITEM the top two) into the dict owner */
static int pkl_set_items(Pkl *p, int owner, size_t first) {
    for (size_t i = first; i + 1 < p->n_stack; i += 2) {
        PklPair *pair = (PklPair *)pkl_grow(p->pair, &p->cap_pair, p->n_pair + 1, sizeof *p->pair);
        if (!pair) return 0;
        p->pair = pair;
        p->pair[p->n_pair++] = (PklPair){owner, p->stack[i], p->stack[i + 1]};
    }
    return 1;
}

/* Runs the opcodes to STOP; *root: the object it returns. */
static int pkl_run(Pkl *p, const char *path, int *root, char *err, size_t errlen) {
#define PKL_READ(k, v)                                                                                                             \
    do {                                                                                                                           \
        if (!pkl_uint(p, &at, (k), (v)))                                                                                           \
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: opcode 0x%02x is cut off by the end of the file (%zu bytes)", \
                        path, op_at, op, p->n);                                                                                    \
    } while (0)
#define PKL_NOMEM(cond) \
    if (cond) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path)
    size_t at = 0;
    for (;;) {
        if (at >= p->n) return fail(err, errlen, NGPT_ERR_FORMAT, "%s ends at byte %zu before pickle's STOP opcode", path, p->n);
        size_t op_at = at;
        unsigned op = p->buf[at++];
        uint64_t u = 0;
        int top = p->n_stack ? p->stack[p->n_stack - 1] : PKL_MARK;
        switch (op) {
        case 0x80: /* PROTO */
            PKL_READ(1, &u);
            if (u > 5) return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: pickle protocol %llu (this reader knows 1 to 5)", path, op_at, (unsigned long long)u);
            break;
        case 0x95: PKL_READ(8, &u); break; /* FRAME: only a length */
        case '}': PKL_NOMEM(pkl_new(p, PKL_DICT, 0, 0, 0, op_at) < 0); break;
        case '(': PKL_NOMEM(!pkl_push(p, PKL_MARK)); break;
        case 0x94: case 'q': case 'r': { /* MEMOIZE (at the next index), BINPUT, LONG_BINPUT */
            if (op == 0x94) u = p->n_memo++;
            else PKL_READ(op == 'q' ? 1 : 4, &u);
            if (top == PKL_MARK || u >= (1u << 24))
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: memo entry %llu for no object (or beyond 2^24)", path, op_at,
                            (unsigned long long)u);
            size_t had = p->cap_memo;
            int *memo = (int *)pkl_grow(p->memo, &p->cap_memo, (size_t)u + 1, sizeof *p->memo);
            PKL_NOMEM(!memo);
            p->memo = memo;
            for (size_t i = had; i < p->cap_memo; i++) p->memo[i] = -1;
            p->memo[u] = top;
            break;
        }
        case 'h': case 'j': /* BINGET, LONG_BINGET */
            PKL_READ(op == 'h' ? 1 : 4, &u);
            if (u >= p->cap_memo || p->memo[u] < 0)
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: memo entry %llu was never set", path, op_at, (unsigned long long)u);
            PKL_NOMEM(!pkl_push(p, p->memo[u]));
            break;
        case 0x8c: case 'X': case 0x8d: /* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8 */
            PKL_READ(op == 0x8c ? 1 : op == 'X' ? 4 : 8, &u);
            if (u > p->n - at)
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: a string of %llu bytes runs past the end of the file (%zu bytes)", path,
                            op_at, (unsigned long long)u, p->n);
            PKL_NOMEM(pkl_new(p, PKL_STR, 0, at, (size_t)u, op_at) < 0);
            at += (size_t)u;
            break;
        case 'K': case 'M': case 'J': /* BININT1, BININT2, BININT (signed) */
            PKL_READ(op == 'K' ? 1 : op == 'M' ? 2 : 4, &u);
            PKL_NOMEM(pkl_new(p, PKL_INT, op == 'J' ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u, 0, 0, op_at) < 0);
            break;
        case 0x8a: { /* LONG1: a length byte, then the two's complement bytes */
            uint64_t nb;
            PKL_READ(1, &nb);
            if (nb > 8) return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: an integer of %llu bytes (at most 8 here)", path, op_at, (unsigned long long)nb);
            if (nb) PKL_READ((int)nb, &u);
            int64_t v = nb && nb < 8 && (u >> (8 * nb - 1) & 1) ? (int64_t)(u | ~((1ull << (8 * nb)) - 1)) : (int64_t)u;
            PKL_NOMEM(pkl_new(p, PKL_INT, v, 0, 0, op_at) < 0);
            break;
        }
        case 's': case 'u': case 'd': { /* SETITEM (the top two); SETITEMS and DICT (the items above the mark) */
            size_t first = p->n_stack; /* the first key */
            if (op == 's') first = p->n_stack >= 2 ? p->n_stack - 2 : 0;
            else
                while (first > 0 && p->stack[first - 1] != PKL_MARK) first--;
            size_t below = op == 's' ? first : first - 1; /* where the items (and the mark) start */
            int ok = (op == 's' ? p->n_stack >= 3 : first > 0) && (p->n_stack - first) % 2 == 0, owner = PKL_MARK;
            for (size_t i = first; ok && i < p->n_stack; i++) ok = p->stack[i] != PKL_MARK;
            if (ok && op != 'd') { /* the dict they go into, under them */
                owner = below >= 1 ? p->stack[below - 1] : PKL_MARK;
                ok = owner != PKL_MARK && p->obj[owner].type == PKL_DICT;
            }
            if (!ok)
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: opcode '%c' needs %s", path, op_at, op,
                            op == 'd' ? "a mark, then key-value pairs" : "a dict, then key-value pairs");
            if (op == 'd') {
                PKL_NOMEM(pkl_new(p, PKL_DICT, 0, 0, 0, op_at) < 0);
                owner = p->stack[--p->n_stack]; /* it goes in the mark's place */
            }
            PKL_NOMEM(!pkl_set_items(p, owner, first));
            p->n_stack = below;
            if (op == 'd') p->stack[p->n_stack++] = owner;
            break;
        }
        case '.': /* STOP */
            if (top == PKL_MARK) return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: STOP with nothing to return", path, op_at);
            *root = top;
            return NGPT_OK;
        default:
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: pickle opcode 0x%02x, which a pickled dict of ints and strings "
                                                      "(nanoGPT's meta.pkl) does not hold", path, op_at, op);
        }
    }
#undef PKL_READ
#undef PKL_NOMEM
}

/* meta.pkl (nanoGPT's character vocabulary) into v; errors name the file and the byte */
static int charvocab_load_pickle(CharVocab *v, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size > PKL_MAX_BYTES) {
        fclose(f);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a regular file of at most %d MiB (nanoGPT's meta.pkl)", path, PKL_MAX_BYTES >> 20);
    }
    Pkl p;
    memset(&p, 0, sizeof p);
    p.n = (size_t)st.st_size;
    unsigned char *buf = (unsigned char *)malloc(p.n ? p.n : 1);
    int rc = buf ? NGPT_OK : fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path);
    if (!rc && fread(buf, 1, p.n, f) != p.n) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s", path);
    fclose(f);
    p.buf = buf;
    int root = -1, size_obj = -1, itos = -1;
    if (!rc) rc = pkl_run(&p, path, &root, err, errlen);
    if (!rc && p.obj[root].type != PKL_DICT)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s holds no dict (nanoGPT's meta.pkl is {'vocab_size': n, 'itos': {...}, 'stoi': {...}})", path);
    for (size_t i = 0; !rc && i < p.n_pair; i++)
        if (p.pair[i].owner == root) {
            if (pkl_str_is(&p, p.pair[i].key, "vocab_size")) size_obj = p.pair[i].value;
            if (pkl_str_is(&p, p.pair[i].key, "itos")) itos = p.pair[i].value;
        }
    if (!rc && (size_obj < 0 || itos < 0))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: its dict has no '%s' (nanoGPT's meta.pkl holds 'vocab_size' and 'itos')", path,
                  size_obj < 0 ? "vocab_size" : "itos");
    int64_t n = rc ? 0 : p.obj[size_obj].value;
    if (!rc && (p.obj[size_obj].type != PKL_INT || n < 1 || n > 65536))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: vocab_size is not an integer in [1, 65536]", path, p.obj[size_obj].at);
    if (!rc && p.obj[itos].type != PKL_DICT) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: itos is not a dict", path, p.obj[itos].at);
    for (int64_t i = 0; !rc && i < n; i++) v->cp[i] = UINT32_MAX; /* not yet seen */
    int64_t seen = 0;
    for (size_t i = 0; !rc && i < p.n_pair; i++) {
        if (p.pair[i].owner != itos) continue;
        const PklObj *key = &p.obj[p.pair[i].key], *value = &p.obj[p.pair[i].value];
        uint32_t cp = 0;
        if (key->type != PKL_INT || key->value < 0 || key->value >= n)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: an itos key that is not an id in [0, %lld]", path, key->at, (long long)n - 1);
        else if (value->type != PKL_STR || value->len < 1 || value->len > 4 || utf8_decode(p.buf + value->off, value->len, &cp) != (int)value->len)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: itos[%lld] is not one character", path, value->at, (long long)key->value);
        else if (v->cp[key->value] != UINT32_MAX)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: byte %zu: itos[%lld] is set twice", path, key->at, (long long)key->value);
        else {
            v->cp[key->value] = cp;
            seen++;
        }
    }
    if (!rc && seen != n) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: itos has %lld of the vocab_size = %lld ids", path, (long long)seen, (long long)n);
    for (int64_t i = 1; !rc && i < n; i++)
        if (v->cp[i] <= v->cp[i - 1])
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: itos[%lld] (U+%04X) does not follow itos[%lld] (U+%04X) in code point order, as "
                                                    "prepare.py's sorted(set(text)) puts them", path, (long long)i, v->cp[i], (long long)i - 1,
                      v->cp[i - 1]);
    if (!rc) v->n = (int)n;
    free(buf);
    free(p.obj);
    free(p.pair);
    free(p.stack);
    free(p.memo);
    return rc;
}

/* ids -> UTF-8 text in out[0..cap) (not NUL-terminated; whole characters while they fit); *len_out: the bytes
 * of the whole text. NGPT_ERR_ARG for an id outside the vocabulary (*len_out: the text before it) or a text
 * longer than cap. */
static int charvocab_decode(const CharVocab *v, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len_out, char *err,
                            size_t errlen) {
    size_t len = 0;
    int fits = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n) {
            *len_out = len;
            return fail(err, errlen, NGPT_ERR_ARG, "id %d at position %zu is outside the character vocabulary (0..%d)", ids[i], i, v->n - 1);
        }
        unsigned char b[4];
        size_t k = (size_t)utf8_encode(v->cp[ids[i]], b);
        fits = fits && len + k <= cap;
        if (fits) memcpy(out + len, b, k);
        len += k;
    }
    *len_out = len;
    return len > cap ? fail(err, errlen, NGPT_ERR_ARG, "the text needs %zu bytes, the buffer holds %zu", len, cap) : NGPT_OK;
}

/* UTF-8 text -> ids (at most cap written; *n_out: how many the whole text has). NGPT_ERR_ARG for invalid
 * UTF-8 or a character outside the vocabulary (naming its byte; *n_out: the ids before it), or more ids
 * than cap. */
static int charvocab_encode(const CharVocab *v, const char *text, size_t len, int32_t *ids, size_t cap, size_t *n_out, char *err,
                            size_t errlen) {
    size_t i = 0, n = 0;
    while (i < len) {
        uint32_t cp;
        int k = utf8_decode((const unsigned char *)text + i, len - i, &cp);
        int lo = 0, hi = v->n - 1;
        while (k > 0 && lo < hi) {
            int mid = (lo + hi) / 2;
            if (v->cp[mid] < cp) lo = mid + 1;
            else hi = mid;
        }
        if (k <= 0 || v->cp[lo] != cp) {
            *n_out = n;
            if (k <= 0) return fail(err, errlen, NGPT_ERR_ARG, "invalid UTF-8 at byte %zu", i);
            return fail(err, errlen, NGPT_ERR_ARG, "the character U+%04X at byte %zu is not in the vocabulary (%d characters)", cp, i, v->n);
        }
        if (n < cap) ids[n] = lo;
        n++;
        i += (size_t)k;
    }
    *n_out = n;
    return n > cap ? fail(err, errlen, NGPT_ERR_ARG, "the text has %zu characters, the buffer holds %zu ids", n, cap) : NGPT_OK;
}

/* ======================================================================================================
 * Tokenizer: GPT-2's byte-level BPE (OpenAI's encoder.json + vocab.bpe, or nanogpt's compact file)
 *
 * Text is split into pre-tokens by GPT-2's pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (written out by hand in tok_piece_end, with \s the Unicode White_Space property as in OpenAI's
 * encoder.py and tiktoken), then each pre-token's bytes are merged by BPE: repeatedly join every
 * occurrence of the adjacent pair with the lowest merge rank, as encoder.py does.
 *
 * Bytes that are not valid UTF-8 (the reference cannot take them: it encodes Python or JS strings) are
 * split as the U+FFFD a decoder would put in their place would be -- one "other" character each -- but
 * BPE runs on the original bytes, so decode(encode(x)) == x for every byte string x.
 *
 * Streaming: tok_piece_end reads a pre-token one character at a time, and with a "soft" end (more text
 * may follow) it gives up instead of reading past the buffer. A pre-token it returns therefore depends
 * only on bytes in the buffer, and since the pattern restarts at each pre-token's end and looks behind
 * nothing, the encoding of the settled prefix is that of the whole text (ngpt_tokenizer_encode_chunk).
 *
 * The one block: the tokenizer is a single allocation (struct, token bytes, merges, two hash tables and
 * the class table of the Basic Multilingual Plane). Encoding allocates nothing, except scratch for a
 * pre-token longer than TOK_SMALL bytes. A tokenizer is never written after loading, so threads may share
 * one.
 * ---------------------------------------------------------------------------------------------------- */

enum { TOK_OTHER = 0, TOK_LETTER = 1, TOK_NUMBER = 2, TOK_SPACE = 3, TOK_END = 4 };
#define TOK_L(lo, hi) {(lo), (uint32_t)(hi) | (uint32_t)TOK_LETTER << 24}
#define TOK_N(lo, hi) {(lo), (uint32_t)(hi) | (uint32_t)TOK_NUMBER << 24}
#define TOK_S(lo, hi) {(lo), (uint32_t)(hi) | (uint32_t)TOK_SPACE << 24}

/* BEGIN GENERATED: tools/gen_unicode_tables.py */
/* Character classes of GPT-2's pre-tokenizer, Unicode 14.0.0 (Python unicodedata): sorted, disjoint ranges of
 * letters L (131756 code points), numbers N (1791) and White_Space S (25); all else is "other".
 * Do not edit: rerun python3 tools/gen_unicode_tables.py on this file. */
#define TOK_UNICODE_VERSION "14.0.0"
#define TOK_UNI_NRANGES 792
static const uint32_t tok_uni_ranges[TOK_UNI_NRANGES][2] = {
    TOK_S(0x0009, 0x000D), TOK_S(0x0020, 0x0020), TOK_N(0x0030, 0x0039), TOK_L(0x0041, 0x005A),
    TOK_L(0x0061, 0x007A), TOK_S(0x0085, 0x0085), TOK_S(0x00A0, 0x00A0), TOK_L(0x00AA, 0x00AA),
    TOK_N(0x00B2, 0x00B3), TOK_L(0x00B5, 0x00B5), TOK_N(0x00B9, 0x00B9), TOK_L(0x00BA, 0x00BA),
    TOK_N(0x00BC, 0x00BE), TOK_L(0x00C0, 0x00D6), TOK_L(0x00D8, 0x00F6), TOK_L(0x00F8, 0x02C1),
    TOK_L(0x02C6, 0x02D1), TOK_L(0x02E0, 0x02E4), TOK_L(0x02EC, 0x02EC), TOK_L(0x02EE, 0x02EE),
    TOK_L(0x0370, 0x0374), TOK_L(0x0376, 0x0377), TOK_L(0x037A, 0x037D), TOK_L(0x037F, 0x037F),
    TOK_L(0x0386, 0x0386), TOK_L(0x0388, 0x038A), TOK_L(0x038C, 0x038C), TOK_L(0x038E, 0x03A1),
    TOK_L(0x03A3, 0x03F5), TOK_L(0x03F7, 0x0481), TOK_L(0x048A, 0x052F), TOK_L(0x0531, 0x0556),
    TOK_L(0x0559, 0x0559), TOK_L(0x0560, 0x0588), TOK_L(0x05D0, 0x05EA), TOK_L(0x05EF, 0x05F2),
    TOK_L(0x0620, 0x064A), TOK_N(0x0660, 0x0669), TOK_L(0x066E, 0x066F), TOK_L(0x0671, 0x06D3),
    TOK_L(0x06D5, 0x06D5), TOK_L(0x06E5, 0x06E6), TOK_L(0x06EE, 0x06EF), TOK_N(0x06F0, 0x06F9),
    TOK_L(0x06FA, 0x06FC), TOK_L(0x06FF, 0x06FF), TOK_L(0x0710, 0x0710), TOK_L(0x0712, 0x072F),
    TOK_L(0x074D, 0x07A5), TOK_L(0x07B1, 0x07B1), TOK_N(0x07C0, 0x07C9), TOK_L(0x07CA, 0x07EA),
    TOK_L(0x07F4, 0x07F5), TOK_L(0x07FA, 0x07FA), TOK_L(0x0800, 0x0815), TOK_L(0x081A, 0x081A),
    TOK_L(0x0824, 0x0824), TOK_L(0x0828, 0x0828), TOK_L(0x0840, 0x0858), TOK_L(0x0860, 0x086A),
    TOK_L(0x0870, 0x0887), TOK_L(0x0889, 0x088E), TOK_L(0x08A0, 0x08C9), TOK_L(0x0904, 0x0939),
    TOK_L(0x093D, 0x093D), TOK_L(0x0950, 0x0950), TOK_L(0x0958, 0x0961), TOK_N(0x0966, 0x096F),
    TOK_L(0x0971, 0x0980), TOK_L(0x0985, 0x098C), TOK_L(0x098F, 0x0990), TOK_L(0x0993, 0x09A8),
    TOK_L(0x09AA, 0x09B0), TOK_L(0x09B2, 0x09B2), TOK_L(0x09B6, 0x09B9), TOK_L(0x09BD, 0x09BD),
    TOK_L(0x09CE, 0x09CE), TOK_L(0x09DC, 0x09DD), TOK_L(0x09DF, 0x09E1), TOK_N(0x09E6, 0x09EF),
    TOK_L(0x09F0, 0x09F1), TOK_N(0x09F4, 0x09F9), TOK_L(0x09FC, 0x09FC), TOK_L(0x0A05, 0x0A0A),
    TOK_L(0x0A0F, 0x0A10), TOK_L(0x0A13, 0x0A28), TOK_L(0x0A2A, 0x0A30), TOK_L(0x0A32, 0x0A33),
    TOK_L(0x0A35, 0x0A36), TOK_L(0x0A38, 0x0A39), TOK_L(0x0A59, 0x0A5C), TOK_L(0x0A5E, 0x0A5E),
    TOK_N(0x0A66, 0x0A6F), TOK_L(0x0A72, 0x0A74), TOK_L(0x0A85, 0x0A8D), TOK_L(0x0A8F, 0x0A91),
    TOK_L(0x0A93, 0x0AA8), TOK_L(0x0AAA, 0x0AB0), TOK_L(0x0AB2, 0x0AB3), TOK_L(0x0AB5, 0x0AB9),
    TOK_L(0x0ABD, 0x0ABD), TOK_L(0x0AD0, 0x0AD0), TOK_L(0x0AE0, 0x0AE1), TOK_N(0x0AE6, 0x0AEF),
    TOK_L(0x0AF9, 0x0AF9), TOK_L(0x0B05, 0x0B0C), TOK_L(0x0B0F, 0x0B10), TOK_L(0x0B13, 0x0B28),
    TOK_L(0x0B2A, 0x0B30), TOK_L(0x0B32, 0x0B33), TOK_L(0x0B35, 0x0B39), TOK_L(0x0B3D, 0x0B3D),
    TOK_L(0x0B5C, 0x0B5D), TOK_L(0x0B5F, 0x0B61), TOK_N(0x0B66, 0x0B6F), TOK_L(0x0B71, 0x0B71),
    TOK_N(0x0B72, 0x0B77), TOK_L(0x0B83, 0x0B83), TOK_L(0x0B85, 0x0B8A), TOK_L(0x0B8E, 0x0B90),
    TOK_L(0x0B92, 0x0B95), TOK_L(0x0B99, 0x0B9A), TOK_L(0x0B9C, 0x0B9C), TOK_L(0x0B9E, 0x0B9F),
    TOK_L(0x0BA3, 0x0BA4), TOK_L(0x0BA8, 0x0BAA), TOK_L(0x0BAE, 0x0BB9), TOK_L(0x0BD0, 0x0BD0),
    TOK_N(0x0BE6, 0x0BF2), TOK_L(0x0C05, 0x0C0C), TOK_L(0x0C0E, 0x0C10), TOK_L(0x0C12, 0x0C28),
    TOK_L(0x0C2A, 0x0C39), TOK_L(0x0C3D, 0x0C3D), TOK_L(0x0C58, 0x0C5A), TOK_L(0x0C5D, 0x0C5D),
    TOK_L(0x0C60, 0x0C61), TOK_N(0x0C66, 0x0C6F), TOK_N(0x0C78, 0x0C7E), TOK_L(0x0C80, 0x0C80),
    TOK_L(0x0C85, 0x0C8C), TOK_L(0x0C8E, 0x0C90), TOK_L(0x0C92, 0x0CA8), TOK_L(0x0CAA, 0x0CB3),
    TOK_L(0x0CB5, 0x0CB9), TOK_L(0x0CBD, 0x0CBD), TOK_L(0x0CDD, 0x0CDE), TOK_L(0x0CE0, 0x0CE1),
    TOK_N(0x0CE6, 0x0CEF), TOK_L(0x0CF1, 0x0CF2), TOK_L(0x0D04, 0x0D0C), TOK_L(0x0D0E, 0x0D10),
    TOK_L(0x0D12, 0x0D3A), TOK_L(0x0D3D, 0x0D3D), TOK_L(0x0D4E, 0x0D4E), TOK_L(0x0D54, 0x0D56),
    TOK_N(0x0D58, 0x0D5E), TOK_L(0x0D5F, 0x0D61), TOK_N(0x0D66, 0x0D78), TOK_L(0x0D7A, 0x0D7F),
    TOK_L(0x0D85, 0x0D96), TOK_L(0x0D9A, 0x0DB1), TOK_L(0x0DB3, 0x0DBB), TOK_L(0x0DBD, 0x0DBD),
    TOK_L(0x0DC0, 0x0DC6), TOK_N(0x0DE6, 0x0DEF), TOK_L(0x0E01, 0x0E30), TOK_L(0x0E32, 0x0E33),
    TOK_L(0x0E40, 0x0E46), TOK_N(0x0E50, 0x0E59), TOK_L(0x0E81, 0x0E82), TOK_L(0x0E84, 0x0E84),
    TOK_L(0x0E86, 0x0E8A), TOK_L(0x0E8C, 0x0EA3), TOK_L(0x0EA5, 0x0EA5), TOK_L(0x0EA7, 0x0EB0),
    TOK_L(0x0EB2, 0x0EB3), TOK_L(0x0EBD, 0x0EBD), TOK_L(0x0EC0, 0x0EC4), TOK_L(0x0EC6, 0x0EC6),
    TOK_N(0x0ED0, 0x0ED9), TOK_L(0x0EDC, 0x0EDF), TOK_L(0x0F00, 0x0F00), TOK_N(0x0F20, 0x0F33),
    TOK_L(0x0F40, 0x0F47), TOK_L(0x0F49, 0x0F6C), TOK_L(0x0F88, 0x0F8C), TOK_L(0x1000, 0x102A),
    TOK_L(0x103F, 0x103F), TOK_N(0x1040, 0x1049), TOK_L(0x1050, 0x1055), TOK_L(0x105A, 0x105D),
    TOK_L(0x1061, 0x1061), TOK_L(0x1065, 0x1066), TOK_L(0x106E, 0x1070), TOK_L(0x1075, 0x1081),
    TOK_L(0x108E, 0x108E), TOK_N(0x1090, 0x1099), TOK_L(0x10A0, 0x10C5), TOK_L(0x10C7, 0x10C7),
    TOK_L(0x10CD, 0x10CD), TOK_L(0x10D0, 0x10FA), TOK_L(0x10FC, 0x1248), TOK_L(0x124A, 0x124D),
    TOK_L(0x1250, 0x1256), TOK_L(0x1258, 0x1258), TOK_L(0x125A, 0x125D), TOK_L(0x1260, 0x1288),
    TOK_L(0x128A, 0x128D), TOK_L(0x1290, 0x12B0), TOK_L(0x12B2, 0x12B5), TOK_L(0x12B8, 0x12BE),
    TOK_L(0x12C0, 0x12C0), TOK_L(0x12C2, 0x12C5), TOK_L(0x12C8, 0x12D6), TOK_L(0x12D8, 0x1310),
    TOK_L(0x1312, 0x1315), TOK_L(0x1318, 0x135A), TOK_N(0x1369, 0x137C), TOK_L(0x1380, 0x138F),
    TOK_L(0x13A0, 0x13F5), TOK_L(0x13F8, 0x13FD), TOK_L(0x1401, 0x166C), TOK_L(0x166F, 0x167F),
    TOK_S(0x1680, 0x1680), TOK_L(0x1681, 0x169A), TOK_L(0x16A0, 0x16EA), TOK_N(0x16EE, 0x16F0),
    TOK_L(0x16F1, 0x16F8), TOK_L(0x1700, 0x1711), TOK_L(0x171F, 0x1731), TOK_L(0x1740, 0x1751),
    TOK_L(0x1760, 0x176C), TOK_L(0x176E, 0x1770), TOK_L(0x1780, 0x17B3), TOK_L(0x17D7, 0x17D7),
    TOK_L(0x17DC, 0x17DC), TOK_N(0x17E0, 0x17E9), TOK_N(0x17F0, 0x17F9), TOK_N(0x1810, 0x1819),
    TOK_L(0x1820, 0x1878), TOK_L(0x1880, 0x1884), TOK_L(0x1887, 0x18A8), TOK_L(0x18AA, 0x18AA),
    TOK_L(0x18B0, 0x18F5), TOK_L(0x1900, 0x191E), TOK_N(0x1946, 0x194F), TOK_L(0x1950, 0x196D),
    TOK_L(0x1970, 0x1974), TOK_L(0x1980, 0x19AB), TOK_L(0x19B0, 0x19C9), TOK_N(0x19D0, 0x19DA),
    TOK_L(0x1A00, 0x1A16), TOK_L(0x1A20, 0x1A54), TOK_N(0x1A80, 0x1A89), TOK_N(0x1A90, 0x1A99),
    TOK_L(0x1AA7, 0x1AA7), TOK_L(0x1B05, 0x1B33), TOK_L(0x1B45, 0x1B4C), TOK_N(0x1B50, 0x1B59),
    TOK_L(0x1B83, 0x1BA0), TOK_L(0x1BAE, 0x1BAF), TOK_N(0x1BB0, 0x1BB9), TOK_L(0x1BBA, 0x1BE5),
    TOK_L(0x1C00, 0x1C23), TOK_N(0x1C40, 0x1C49), TOK_L(0x1C4D, 0x1C4F), TOK_N(0x1C50, 0x1C59),
    TOK_L(0x1C5A, 0x1C7D), TOK_L(0x1C80, 0x1C88), TOK_L(0x1C90, 0x1CBA), TOK_L(0x1CBD, 0x1CBF),
    TOK_L(0x1CE9, 0x1CEC), TOK_L(0x1CEE, 0x1CF3), TOK_L(0x1CF5, 0x1CF6), TOK_L(0x1CFA, 0x1CFA),
    TOK_L(0x1D00, 0x1DBF), TOK_L(0x1E00, 0x1F15), TOK_L(0x1F18, 0x1F1D), TOK_L(0x1F20, 0x1F45),
    TOK_L(0x1F48, 0x1F4D), TOK_L(0x1F50, 0x1F57), TOK_L(0x1F59, 0x1F59), TOK_L(0x1F5B, 0x1F5B),
    TOK_L(0x1F5D, 0x1F5D), TOK_L(0x1F5F, 0x1F7D), TOK_L(0x1F80, 0x1FB4), TOK_L(0x1FB6, 0x1FBC),
    TOK_L(0x1FBE, 0x1FBE), TOK_L(0x1FC2, 0x1FC4), TOK_L(0x1FC6, 0x1FCC), TOK_L(0x1FD0, 0x1FD3),
    TOK_L(0x1FD6, 0x1FDB), TOK_L(0x1FE0, 0x1FEC), TOK_L(0x1FF2, 0x1FF4), TOK_L(0x1FF6, 0x1FFC),
    TOK_S(0x2000, 0x200A), TOK_S(0x2028, 0x2029), TOK_S(0x202F, 0x202F), TOK_S(0x205F, 0x205F),
    TOK_N(0x2070, 0x2070), TOK_L(0x2071, 0x2071), TOK_N(0x2074, 0x2079), TOK_L(0x207F, 0x207F),
    TOK_N(0x2080, 0x2089), TOK_L(0x2090, 0x209C), TOK_L(0x2102, 0x2102), TOK_L(0x2107, 0x2107),
    TOK_L(0x210A, 0x2113), TOK_L(0x2115, 0x2115), TOK_L(0x2119, 0x211D), TOK_L(0x2124, 0x2124),
    TOK_L(0x2126, 0x2126), TOK_L(0x2128, 0x2128), TOK_L(0x212A, 0x212D), TOK_L(0x212F, 0x2139),
    TOK_L(0x213C, 0x213F), TOK_L(0x2145, 0x2149), TOK_L(0x214E, 0x214E), TOK_N(0x2150, 0x2182),
    TOK_L(0x2183, 0x2184), TOK_N(0x2185, 0x2189), TOK_N(0x2460, 0x249B), TOK_N(0x24EA, 0x24FF),
    TOK_N(0x2776, 0x2793), TOK_L(0x2C00, 0x2CE4), TOK_L(0x2CEB, 0x2CEE), TOK_L(0x2CF2, 0x2CF3),
    TOK_N(0x2CFD, 0x2CFD), TOK_L(0x2D00, 0x2D25), TOK_L(0x2D27, 0x2D27), TOK_L(0x2D2D, 0x2D2D),
    TOK_L(0x2D30, 0x2D67), TOK_L(0x2D6F, 0x2D6F), TOK_L(0x2D80, 0x2D96), TOK_L(0x2DA0, 0x2DA6),
    TOK_L(0x2DA8, 0x2DAE), TOK_L(0x2DB0, 0x2DB6), TOK_L(0x2DB8, 0x2DBE), TOK_L(0x2DC0, 0x2DC6),
    TOK_L(0x2DC8, 0x2DCE), TOK_L(0x2DD0, 0x2DD6), TOK_L(0x2DD8, 0x2DDE), TOK_L(0x2E2F, 0x2E2F),
    TOK_S(0x3000, 0x3000), TOK_L(0x3005, 0x3006), TOK_N(0x3007, 0x3007), TOK_N(0x3021, 0x3029),
    TOK_L(0x3031, 0x3035), TOK_N(0x3038, 0x303A), TOK_L(0x303B, 0x303C), TOK_L(0x3041, 0x3096),
    TOK_L(0x309D, 0x309F), TOK_L(0x30A1, 0x30FA), TOK_L(0x30FC, 0x30FF), TOK_L(0x3105, 0x312F),
    TOK_L(0x3131, 0x318E), TOK_N(0x3192, 0x3195), TOK_L(0x31A0, 0x31BF), TOK_L(0x31F0, 0x31FF),
    TOK_N(0x3220, 0x3229), TOK_N(0x3248, 0x324F), TOK_N(0x3251, 0x325F), TOK_N(0x3280, 0x3289),
    TOK_N(0x32B1, 0x32BF), TOK_L(0x3400, 0x4DBF), TOK_L(0x4E00, 0xA48C), TOK_L(0xA4D0, 0xA4FD),
    TOK_L(0xA500, 0xA60C), TOK_L(0xA610, 0xA61F), TOK_N(0xA620, 0xA629), TOK_L(0xA62A, 0xA62B),
    TOK_L(0xA640, 0xA66E), TOK_L(0xA67F, 0xA69D), TOK_L(0xA6A0, 0xA6E5), TOK_N(0xA6E6, 0xA6EF),
    TOK_L(0xA717, 0xA71F), TOK_L(0xA722, 0xA788), TOK_L(0xA78B, 0xA7CA), TOK_L(0xA7D0, 0xA7D1),
    TOK_L(0xA7D3, 0xA7D3), TOK_L(0xA7D5, 0xA7D9), TOK_L(0xA7F2, 0xA801), TOK_L(0xA803, 0xA805),
    TOK_L(0xA807, 0xA80A), TOK_L(0xA80C, 0xA822), TOK_N(0xA830, 0xA835), TOK_L(0xA840, 0xA873),
    TOK_L(0xA882, 0xA8B3), TOK_N(0xA8D0, 0xA8D9), TOK_L(0xA8F2, 0xA8F7), TOK_L(0xA8FB, 0xA8FB),
    TOK_L(0xA8FD, 0xA8FE), TOK_N(0xA900, 0xA909), TOK_L(0xA90A, 0xA925), TOK_L(0xA930, 0xA946),
    TOK_L(0xA960, 0xA97C), TOK_L(0xA984, 0xA9B2), TOK_L(0xA9CF, 0xA9CF), TOK_N(0xA9D0, 0xA9D9),
    TOK_L(0xA9E0, 0xA9E4), TOK_L(0xA9E6, 0xA9EF), TOK_N(0xA9F0, 0xA9F9), TOK_L(0xA9FA, 0xA9FE),
    TOK_L(0xAA00, 0xAA28), TOK_L(0xAA40, 0xAA42), TOK_L(0xAA44, 0xAA4B), TOK_N(0xAA50, 0xAA59),
    TOK_L(0xAA60, 0xAA76), TOK_L(0xAA7A, 0xAA7A), TOK_L(0xAA7E, 0xAAAF), TOK_L(0xAAB1, 0xAAB1),
    TOK_L(0xAAB5, 0xAAB6), TOK_L(0xAAB9, 0xAABD), TOK_L(0xAAC0, 0xAAC0), TOK_L(0xAAC2, 0xAAC2),
    TOK_L(0xAADB, 0xAADD), TOK_L(0xAAE0, 0xAAEA), TOK_L(0xAAF2, 0xAAF4), TOK_L(0xAB01, 0xAB06),
    TOK_L(0xAB09, 0xAB0E), TOK_L(0xAB11, 0xAB16), TOK_L(0xAB20, 0xAB26), TOK_L(0xAB28, 0xAB2E),
    TOK_L(0xAB30, 0xAB5A), TOK_L(0xAB5C, 0xAB69), TOK_L(0xAB70, 0xABE2), TOK_N(0xABF0, 0xABF9),
    TOK_L(0xAC00, 0xD7A3), TOK_L(0xD7B0, 0xD7C6), TOK_L(0xD7CB, 0xD7FB), TOK_L(0xF900, 0xFA6D),
    TOK_L(0xFA70, 0xFAD9), TOK_L(0xFB00, 0xFB06), TOK_L(0xFB13, 0xFB17), TOK_L(0xFB1D, 0xFB1D),
    TOK_L(0xFB1F, 0xFB28), TOK_L(0xFB2A, 0xFB36), TOK_L(0xFB38, 0xFB3C), TOK_L(0xFB3E, 0xFB3E),
    TOK_L(0xFB40, 0xFB41), TOK_L(0xFB43, 0xFB44), TOK_L(0xFB46, 0xFBB1), TOK_L(0xFBD3, 0xFD3D),
    TOK_L(0xFD50, 0xFD8F), TOK_L(0xFD92, 0xFDC7), TOK_L(0xFDF0, 0xFDFB), TOK_L(0xFE70, 0xFE74),
    TOK_L(0xFE76, 0xFEFC), TOK_N(0xFF10, 0xFF19), TOK_L(0xFF21, 0xFF3A), TOK_L(0xFF41, 0xFF5A),
    TOK_L(0xFF66, 0xFFBE), TOK_L(0xFFC2, 0xFFC7), TOK_L(0xFFCA, 0xFFCF), TOK_L(0xFFD2, 0xFFD7),
    TOK_L(0xFFDA, 0xFFDC), TOK_L(0x10000, 0x1000B), TOK_L(0x1000D, 0x10026), TOK_L(0x10028, 0x1003A),
    TOK_L(0x1003C, 0x1003D), TOK_L(0x1003F, 0x1004D), TOK_L(0x10050, 0x1005D), TOK_L(0x10080, 0x100FA),
    TOK_N(0x10107, 0x10133), TOK_N(0x10140, 0x10178), TOK_N(0x1018A, 0x1018B), TOK_L(0x10280, 0x1029C),
    TOK_L(0x102A0, 0x102D0), TOK_N(0x102E1, 0x102FB), TOK_L(0x10300, 0x1031F), TOK_N(0x10320, 0x10323),
    TOK_L(0x1032D, 0x10340), TOK_N(0x10341, 0x10341), TOK_L(0x10342, 0x10349), TOK_N(0x1034A, 0x1034A),
    TOK_L(0x10350, 0x10375), TOK_L(0x10380, 0x1039D), TOK_L(0x103A0, 0x103C3), TOK_L(0x103C8, 0x103CF),
    TOK_N(0x103D1, 0x103D5), TOK_L(0x10400, 0x1049D), TOK_N(0x104A0, 0x104A9), TOK_L(0x104B0, 0x104D3),
    TOK_L(0x104D8, 0x104FB), TOK_L(0x10500, 0x10527), TOK_L(0x10530, 0x10563), TOK_L(0x10570, 0x1057A),
    TOK_L(0x1057C, 0x1058A), TOK_L(0x1058C, 0x10592), TOK_L(0x10594, 0x10595), TOK_L(0x10597, 0x105A1),
    TOK_L(0x105A3, 0x105B1), TOK_L(0x105B3, 0x105B9), TOK_L(0x105BB, 0x105BC), TOK_L(0x10600, 0x10736),
    TOK_L(0x10740, 0x10755), TOK_L(0x10760, 0x10767), TOK_L(0x10780, 0x10785), TOK_L(0x10787, 0x107B0),
    TOK_L(0x107B2, 0x107BA), TOK_L(0x10800, 0x10805), TOK_L(0x10808, 0x10808), TOK_L(0x1080A, 0x10835),
    TOK_L(0x10837, 0x10838), TOK_L(0x1083C, 0x1083C), TOK_L(0x1083F, 0x10855), TOK_N(0x10858, 0x1085F),
    TOK_L(0x10860, 0x10876), TOK_N(0x10879, 0x1087F), TOK_L(0x10880, 0x1089E), TOK_N(0x108A7, 0x108AF),
    TOK_L(0x108E0, 0x108F2), TOK_L(0x108F4, 0x108F5), TOK_N(0x108FB, 0x108FF), TOK_L(0x10900, 0x10915),
    TOK_N(0x10916, 0x1091B), TOK_L(0x10920, 0x10939), TOK_L(0x10980, 0x109B7), TOK_N(0x109BC, 0x109BD),
    TOK_L(0x109BE, 0x109BF), TOK_N(0x109C0, 0x109CF), TOK_N(0x109D2, 0x109FF), TOK_L(0x10A00, 0x10A00),
    TOK_L(0x10A10, 0x10A13), TOK_L(0x10A15, 0x10A17), TOK_L(0x10A19, 0x10A35), TOK_N(0x10A40, 0x10A48),
    TOK_L(0x10A60, 0x10A7C), TOK_N(0x10A7D, 0x10A7E), TOK_L(0x10A80, 0x10A9C), TOK_N(0x10A9D, 0x10A9F),
    TOK_L(0x10AC0, 0x10AC7), TOK_L(0x10AC9, 0x10AE4), TOK_N(0x10AEB, 0x10AEF), TOK_L(0x10B00, 0x10B35),
    TOK_L(0x10B40, 0x10B55), TOK_N(0x10B58, 0x10B5F), TOK_L(0x10B60, 0x10B72), TOK_N(0x10B78, 0x10B7F),
    TOK_L(0x10B80, 0x10B91), TOK_N(0x10BA9, 0x10BAF), TOK_L(0x10C00, 0x10C48), TOK_L(0x10C80, 0x10CB2),
    TOK_L(0x10CC0, 0x10CF2), TOK_N(0x10CFA, 0x10CFF), TOK_L(0x10D00, 0x10D23), TOK_N(0x10D30, 0x10D39),
    TOK_N(0x10E60, 0x10E7E), TOK_L(0x10E80, 0x10EA9), TOK_L(0x10EB0, 0x10EB1), TOK_L(0x10F00, 0x10F1C),
    TOK_N(0x10F1D, 0x10F26), TOK_L(0x10F27, 0x10F27), TOK_L(0x10F30, 0x10F45), TOK_N(0x10F51, 0x10F54),
    TOK_L(0x10F70, 0x10F81), TOK_L(0x10FB0, 0x10FC4), TOK_N(0x10FC5, 0x10FCB), TOK_L(0x10FE0, 0x10FF6),
    TOK_L(0x11003, 0x11037), TOK_N(0x11052, 0x1106F), TOK_L(0x11071, 0x11072), TOK_L(0x11075, 0x11075),
    TOK_L(0x11083, 0x110AF), TOK_L(0x110D0, 0x110E8), TOK_N(0x110F0, 0x110F9), TOK_L(0x11103, 0x11126),
    TOK_N(0x11136, 0x1113F), TOK_L(0x11144, 0x11144), TOK_L(0x11147, 0x11147), TOK_L(0x11150, 0x11172),
    TOK_L(0x11176, 0x11176), TOK_L(0x11183, 0x111B2), TOK_L(0x111C1, 0x111C4), TOK_N(0x111D0, 0x111D9),
    TOK_L(0x111DA, 0x111DA), TOK_L(0x111DC, 0x111DC), TOK_N(0x111E1, 0x111F4), TOK_L(0x11200, 0x11211),
    TOK_L(0x11213, 0x1122B), TOK_L(0x11280, 0x11286), TOK_L(0x11288, 0x11288), TOK_L(0x1128A, 0x1128D),
    TOK_L(0x1128F, 0x1129D), TOK_L(0x1129F, 0x112A8), TOK_L(0x112B0, 0x112DE), TOK_N(0x112F0, 0x112F9),
    TOK_L(0x11305, 0x1130C), TOK_L(0x1130F, 0x11310), TOK_L(0x11313, 0x11328), TOK_L(0x1132A, 0x11330),
    TOK_L(0x11332, 0x11333), TOK_L(0x11335, 0x11339), TOK_L(0x1133D, 0x1133D), TOK_L(0x11350, 0x11350),
    TOK_L(0x1135D, 0x11361), TOK_L(0x11400, 0x11434), TOK_L(0x11447, 0x1144A), TOK_N(0x11450, 0x11459),
    TOK_L(0x1145F, 0x11461), TOK_L(0x11480, 0x114AF), TOK_L(0x114C4, 0x114C5), TOK_L(0x114C7, 0x114C7),
    TOK_N(0x114D0, 0x114D9), TOK_L(0x11580, 0x115AE), TOK_L(0x115D8, 0x115DB), TOK_L(0x11600, 0x1162F),
    TOK_L(0x11644, 0x11644), TOK_N(0x11650, 0x11659), TOK_L(0x11680, 0x116AA), TOK_L(0x116B8, 0x116B8),
    TOK_N(0x116C0, 0x116C9), TOK_L(0x11700, 0x1171A), TOK_N(0x11730, 0x1173B), TOK_L(0x11740, 0x11746),
    TOK_L(0x11800, 0x1182B), TOK_L(0x118A0, 0x118DF), TOK_N(0x118E0, 0x118F2), TOK_L(0x118FF, 0x11906),
    TOK_L(0x11909, 0x11909), TOK_L(0x1190C, 0x11913), TOK_L(0x11915, 0x11916), TOK_L(0x11918, 0x1192F),
    TOK_L(0x1193F, 0x1193F), TOK_L(0x11941, 0x11941), TOK_N(0x11950, 0x11959), TOK_L(0x119A0, 0x119A7),
    TOK_L(0x119AA, 0x119D0), TOK_L(0x119E1, 0x119E1), TOK_L(0x119E3, 0x119E3), TOK_L(0x11A00, 0x11A00),
    TOK_L(0x11A0B, 0x11A32), TOK_L(0x11A3A, 0x11A3A), TOK_L(0x11A50, 0x11A50), TOK_L(0x11A5C, 0x11A89),
    TOK_L(0x11A9D, 0x11A9D), TOK_L(0x11AB0, 0x11AF8), TOK_L(0x11C00, 0x11C08), TOK_L(0x11C0A, 0x11C2E),
    TOK_L(0x11C40, 0x11C40), TOK_N(0x11C50, 0x11C6C), TOK_L(0x11C72, 0x11C8F), TOK_L(0x11D00, 0x11D06),
    TOK_L(0x11D08, 0x11D09), TOK_L(0x11D0B, 0x11D30), TOK_L(0x11D46, 0x11D46), TOK_N(0x11D50, 0x11D59),
    TOK_L(0x11D60, 0x11D65), TOK_L(0x11D67, 0x11D68), TOK_L(0x11D6A, 0x11D89), TOK_L(0x11D98, 0x11D98),
    TOK_N(0x11DA0, 0x11DA9), TOK_L(0x11EE0, 0x11EF2), TOK_L(0x11FB0, 0x11FB0), TOK_N(0x11FC0, 0x11FD4),
    TOK_L(0x12000, 0x12399), TOK_N(0x12400, 0x1246E), TOK_L(0x12480, 0x12543), TOK_L(0x12F90, 0x12FF0),
    TOK_L(0x13000, 0x1342E), TOK_L(0x14400, 0x14646), TOK_L(0x16800, 0x16A38), TOK_L(0x16A40, 0x16A5E),
    TOK_N(0x16A60, 0x16A69), TOK_L(0x16A70, 0x16ABE), TOK_N(0x16AC0, 0x16AC9), TOK_L(0x16AD0, 0x16AED),
    TOK_L(0x16B00, 0x16B2F), TOK_L(0x16B40, 0x16B43), TOK_N(0x16B50, 0x16B59), TOK_N(0x16B5B, 0x16B61),
    TOK_L(0x16B63, 0x16B77), TOK_L(0x16B7D, 0x16B8F), TOK_L(0x16E40, 0x16E7F), TOK_N(0x16E80, 0x16E96),
    TOK_L(0x16F00, 0x16F4A), TOK_L(0x16F50, 0x16F50), TOK_L(0x16F93, 0x16F9F), TOK_L(0x16FE0, 0x16FE1),
    TOK_L(0x16FE3, 0x16FE3), TOK_L(0x17000, 0x187F7), TOK_L(0x18800, 0x18CD5), TOK_L(0x18D00, 0x18D08),
    TOK_L(0x1AFF0, 0x1AFF3), TOK_L(0x1AFF5, 0x1AFFB), TOK_L(0x1AFFD, 0x1AFFE), TOK_L(0x1B000, 0x1B122),
    TOK_L(0x1B150, 0x1B152), TOK_L(0x1B164, 0x1B167), TOK_L(0x1B170, 0x1B2FB), TOK_L(0x1BC00, 0x1BC6A),
    TOK_L(0x1BC70, 0x1BC7C), TOK_L(0x1BC80, 0x1BC88), TOK_L(0x1BC90, 0x1BC99), TOK_N(0x1D2E0, 0x1D2F3),
    TOK_N(0x1D360, 0x1D378), TOK_L(0x1D400, 0x1D454), TOK_L(0x1D456, 0x1D49C), TOK_L(0x1D49E, 0x1D49F),
    TOK_L(0x1D4A2, 0x1D4A2), TOK_L(0x1D4A5, 0x1D4A6), TOK_L(0x1D4A9, 0x1D4AC), TOK_L(0x1D4AE, 0x1D4B9),
    TOK_L(0x1D4BB, 0x1D4BB), TOK_L(0x1D4BD, 0x1D4C3), TOK_L(0x1D4C5, 0x1D505), TOK_L(0x1D507, 0x1D50A),
    TOK_L(0x1D50D, 0x1D514), TOK_L(0x1D516, 0x1D51C), TOK_L(0x1D51E, 0x1D539), TOK_L(0x1D53B, 0x1D53E),
    TOK_L(0x1D540, 0x1D544), TOK_L(0x1D546, 0x1D546), TOK_L(0x1D54A, 0x1D550), TOK_L(0x1D552, 0x1D6A5),
    TOK_L(0x1D6A8, 0x1D6C0), TOK_L(0x1D6C2, 0x1D6DA), TOK_L(0x1D6DC, 0x1D6FA), TOK_L(0x1D6FC, 0x1D714),
    TOK_L(0x1D716, 0x1D734), TOK_L(0x1D736, 0x1D74E), TOK_L(0x1D750, 0x1D76E), TOK_L(0x1D770, 0x1D788),
    TOK_L(0x1D78A, 0x1D7A8), TOK_L(0x1D7AA, 0x1D7C2), TOK_L(0x1D7C4, 0x1D7CB), TOK_N(0x1D7CE, 0x1D7FF),
    TOK_L(0x1DF00, 0x1DF1E), TOK_L(0x1E100, 0x1E12C), TOK_L(0x1E137, 0x1E13D), TOK_N(0x1E140, 0x1E149),
    TOK_L(0x1E14E, 0x1E14E), TOK_L(0x1E290, 0x1E2AD), TOK_L(0x1E2C0, 0x1E2EB), TOK_N(0x1E2F0, 0x1E2F9),
    TOK_L(0x1E7E0, 0x1E7E6), TOK_L(0x1E7E8, 0x1E7EB), TOK_L(0x1E7ED, 0x1E7EE), TOK_L(0x1E7F0, 0x1E7FE),
    TOK_L(0x1E800, 0x1E8C4), TOK_N(0x1E8C7, 0x1E8CF), TOK_L(0x1E900, 0x1E943), TOK_L(0x1E94B, 0x1E94B),
    TOK_N(0x1E950, 0x1E959), TOK_N(0x1EC71, 0x1ECAB), TOK_N(0x1ECAD, 0x1ECAF), TOK_N(0x1ECB1, 0x1ECB4),
    TOK_N(0x1ED01, 0x1ED2D), TOK_N(0x1ED2F, 0x1ED3D), TOK_L(0x1EE00, 0x1EE03), TOK_L(0x1EE05, 0x1EE1F),
    TOK_L(0x1EE21, 0x1EE22), TOK_L(0x1EE24, 0x1EE24), TOK_L(0x1EE27, 0x1EE27), TOK_L(0x1EE29, 0x1EE32),
    TOK_L(0x1EE34, 0x1EE37), TOK_L(0x1EE39, 0x1EE39), TOK_L(0x1EE3B, 0x1EE3B), TOK_L(0x1EE42, 0x1EE42),
    TOK_L(0x1EE47, 0x1EE47), TOK_L(0x1EE49, 0x1EE49), TOK_L(0x1EE4B, 0x1EE4B), TOK_L(0x1EE4D, 0x1EE4F),
    TOK_L(0x1EE51, 0x1EE52), TOK_L(0x1EE54, 0x1EE54), TOK_L(0x1EE57, 0x1EE57), TOK_L(0x1EE59, 0x1EE59),
    TOK_L(0x1EE5B, 0x1EE5B), TOK_L(0x1EE5D, 0x1EE5D), TOK_L(0x1EE5F, 0x1EE5F), TOK_L(0x1EE61, 0x1EE62),
    TOK_L(0x1EE64, 0x1EE64), TOK_L(0x1EE67, 0x1EE6A), TOK_L(0x1EE6C, 0x1EE72), TOK_L(0x1EE74, 0x1EE77),
    TOK_L(0x1EE79, 0x1EE7C), TOK_L(0x1EE7E, 0x1EE7E), TOK_L(0x1EE80, 0x1EE89), TOK_L(0x1EE8B, 0x1EE9B),
    TOK_L(0x1EEA1, 0x1EEA3), TOK_L(0x1EEA5, 0x1EEA9), TOK_L(0x1EEAB, 0x1EEBB), TOK_N(0x1F100, 0x1F10C),
    TOK_N(0x1FBF0, 0x1FBF9), TOK_L(0x20000, 0x2A6DF), TOK_L(0x2A700, 0x2B738), TOK_L(0x2B740, 0x2B81D),
    TOK_L(0x2B820, 0x2CEA1), TOK_L(0x2CEB0, 0x2EBE0), TOK_L(0x2F800, 0x2FA1D), TOK_L(0x30000, 0x3134A),
};
/* END GENERATED: tools/gen_unicode_tables.py */

#define TOK_EOT_TEXT "<|endoftext|>"  /* the key of GPT-2's end-of-text token in encoder.json */
#define TOK_SMALL 256                 /* pre-tokens up to this many bytes are merged on the stack */
#define TOK_NO_RANK UINT32_MAX        /* no merge for this pair */
#define TOK_DIRTY (UINT32_MAX - 1)    /* tok_bpe_small: the pair's rank must be looked up again */
#define TOK_MAX_VOCAB ((1 << 21) - 1) /* ids fit the pair table's 21 bits (and ranks its 22) */
#define TOK_MAX_PIECE ((size_t)1 << 31)

typedef struct { int32_t left, right, result; } tok_merge;             /* merges[rank] */
/* A token in the vocab table: its first 8 bytes (zero-padded) and length are in the slot, so most
 * lookups read only the slot. id -1: empty. */
typedef struct { uint64_t head; int32_t id; uint32_t len; } tok_vocab_slot;
/* A merge in the pair table: left << 43 | right << 22 | rank, so one 8-byte read answers a lookup
 * (ids < 2^21, ranks < 2^22); TOK_PAIR_EMPTY: empty. */
typedef uint64_t tok_pair_slot;
#define TOK_PAIR_EMPTY UINT64_MAX

struct ngpt_tokenizer {
    int32_t n_vocab;             /* V, 50257 for GPT-2 */
    int32_t n_merges;            /* 50000 for GPT-2 */
    int32_t eot;                 /* id of <|endoftext|>, or -1 */
    int32_t max_len;             /* longest token, in bytes */
    size_t n_bytes;              /* bytes of all tokens together */
    uint32_t *off;               /* (V+1) token id -> its bytes are bytes[off[id] .. off[id+1]) */
    unsigned char *bytes;        /* (n_bytes) */
    tok_merge *merges;           /* (n_merges) in rank order */
    tok_vocab_slot *vocab;       /* (vocab_mask+1) open addressing on a token's bytes */
    tok_pair_slot *pairs;        /* (pair_mask+1) open addressing on (left, right) */
    size_t vocab_mask, pair_mask;  /* table sizes - 1 (powers of two) */
    unsigned char *whole;        /* (V) 1 when BPE of the token's own bytes gives just the token back */
    unsigned char *bmp_class;    /* (65536) TOK_* class of each code point below U+10000 */
    int32_t byte_tok[256];       /* id of each single-byte token */
};

/* ---- small helpers ---------------------------------------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
#define TOK_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TOK_PRINTF(fmt, args)
#endif



/* Writes up to max bytes of p as a quoted, escaped C-like string into buf (for error messages). */
static const char *tok_quote(char *buf, size_t cap, const unsigned char *p, size_t n, size_t max) {
    size_t o = 0, i;
    if (cap < 8) { if (cap) buf[0] = 0; return buf; }
    buf[o++] = '\'';
    for (i = 0; i < n && i < max && o + 6 < cap; i++) {
        unsigned c = p[i];
        if (c == '\'' || c == '\\') { buf[o++] = '\\'; buf[o++] = (char)c; }
        else if (c >= 0x20 && c < 0x7f) buf[o++] = (char)c;
        else if (c == '\n') { buf[o++] = '\\'; buf[o++] = 'n'; }
        else { snprintf(buf + o, cap - o, "\\x%02X", c); o += 4; }
    }
    if (i < n && o + 4 < cap) { buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.'; }
    buf[o++] = '\'';
    buf[o] = 0;
    return buf;
}

static uint64_t tok_mix(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93u;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93u;
    x ^= x >> 32;
    return x;
}

static uint64_t tok_hash(const unsigned char *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15u * (uint64_t)(n + 1), w;
    for (; n > 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdu;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, p, n);
    return tok_mix(h ^ w);
}

static uint32_t tok_get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void tok_put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}

/* CRC-32 (IEEE 802.3, the one of zlib and `crc32`), continuing from crc (0 to start). */
static uint32_t tok_crc32(uint32_t crc, const unsigned char *p, size_t n) {
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* Reads a whole file into a malloc'd buffer (one spare byte past the end, set to 0). */
static int tok_read_file(const char *path, unsigned char **out, size_t *len, char *err, size_t errlen) {
    if (regular_or_missing(path, "tokenizer file", err, errlen)) return NGPT_ERR_IO; /* it is read whole: /dev/zero never ends */
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf;
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory reading the file", path); }
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break;
        if (cap > SIZE_MAX / 2) { free(buf); fclose(f); return fail(err, errlen, NGPT_ERR_NOMEM, "%s: file too large", path); }
        unsigned char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return fail(err, errlen, NGPT_ERR_IO, "%s: read error: %s", path, strerror(e));
    }
    fclose(f);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return NGPT_OK;
}

/* ---- Unicode classes and UTF-8 ---------------------------------------------------------------------- */

/* Class of a code point at or above U+10000 (the BMP ones are in t->bmp_class). */
static int tok_class_supp(uint32_t cp) {
    size_t lo = 0, hi = TOK_UNI_NRANGES;
    while (lo < hi) { /* first range whose start is above cp */
        size_t mid = lo + (hi - lo) / 2;
        if (tok_uni_ranges[mid][0] <= cp) lo = mid + 1; else hi = mid;
    }
    if (lo == 0 || (tok_uni_ranges[lo - 1][1] & 0xffffffu) < cp) return TOK_OTHER;
    return (int)(tok_uni_ranges[lo - 1][1] >> 24);
}

/* Decodes the UTF-8 sequence at s[i] (i < n, s[i] >= 0x80) by Unicode's Table 3-7: returns its length and
 * sets *cp, or returns 0 when s[i] does not start a well-formed sequence, or -1 when the bytes so far are
 * well-formed but n cuts the sequence short. */
static inline int tok_utf8(const unsigned char *s, size_t i, size_t n, uint32_t *cp) {
    unsigned c = s[i], lo = 0x80, hi = 0xBF;
    int need;
    if (c >= 0xC2 && c <= 0xDF) { need = 1; *cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; *cp = c & 0x0F; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; *cp = c & 0x07; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    for (int k = 1; k <= need; k++) {
        unsigned b;
        if (i + (size_t)k >= n) return -1;
        b = s[i + (size_t)k];
        if (b < lo || b > hi) return 0;
        lo = 0x80; hi = 0xBF;
        *cp = *cp << 6 | (b & 0x3F);
    }
    return need + 1;
}

/* Class of the character that starts at s[i] and its length in bytes. A byte that does not start a
 * well-formed UTF-8 sequence is a one-byte "other" character (as the U+FFFD it would decode to is).
 * Returns TOK_END when i >= n, or when soft and n cuts a well-formed sequence short. */
static inline int tok_class_at(const ngpt_tokenizer *t, const unsigned char *s, size_t i, size_t n, int soft,
                               size_t *len) {
    uint32_t cp;
    int r;
    if (i >= n) return TOK_END;
    *len = 1;
    if (s[i] < 0x80) return t->bmp_class[s[i]];
    r = tok_utf8(s, i, n, &cp);
    if (r > 0) {
        *len = (size_t)r;
        return cp < 0x10000 ? t->bmp_class[cp] : tok_class_supp(cp);
    }
    return r < 0 && soft ? TOK_END : TOK_OTHER;
}

/* GPT-2's files spell bytes as characters: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for
 * themselves and the other 68 bytes, in order, for U+0100..U+0143. Returns the byte, or -1. */
static int tok_unicode_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp < 0x100 || cp >= 0x100 + 68) return -1;
    cp -= 0x100;
    return cp < 33 ? (int)cp : cp < 67 ? (int)(0x7F + cp - 33) : 0xAD;
}

/* ---- lookups ---------------------------------------------------------------------------------------- */

/* The first 8 bytes of p[0..n), zero-padded, as one word (in memory order). */
static inline uint64_t tok_head(const unsigned char *p, size_t n) {
    uint64_t w = 0;
    memcpy(&w, p, n < 8 ? n : 8);
    return w;
}

static int32_t tok_vocab_find(const ngpt_tokenizer *t, const unsigned char *p, size_t n) {
    uint64_t head = tok_head(p, n);
    for (size_t i = (size_t)tok_hash(p, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const tok_vocab_slot *v = &t->vocab[i];
        if (v->id < 0) return -1;
        if (v->head == head && v->len == n && (n <= 8 || memcmp(t->bytes + t->off[v->id] + 8, p + 8, n - 8) == 0)) return v->id;
    }
}

static inline uint64_t tok_pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 21 | (uint32_t)right;
}

static inline size_t tok_pair_slot_of(const ngpt_tokenizer *t, uint64_t key) {
    return (size_t)tok_mix(key) & t->pair_mask;
}

/* Rank of merging left and right, or TOK_NO_RANK; merges[rank].result is what they make. */
static inline uint32_t tok_pair_rank(const ngpt_tokenizer *t, int32_t left, int32_t right) {
    uint64_t key = tok_pair_key(left, right);
    for (size_t i = tok_pair_slot_of(t, key);; i = (i + 1) & t->pair_mask) {
        tok_pair_slot s = t->pairs[i];
        if (s == TOK_PAIR_EMPTY) return TOK_NO_RANK;
        if (s >> 22 == key) return (uint32_t)(s & ((1u << 22) - 1));
    }
}

/* ---- BPE -------------------------------------------------------------------------------------------- */

/* BPE the obvious way, for short pieces: sym (n) holds the byte tokens on entry and the merged tokens on
 * return; rank (n) is scratch. Each round finds the lowest-ranked adjacent pair and merges all its
 * occurrences left to right, as encoder.py does. O(n^2). Returns the number of tokens. */
static size_t tok_bpe_small(const ngpt_tokenizer *t, int32_t *sym, uint32_t *rank, size_t n) {
    size_t i, w;
    int32_t made;
    if (n < 2) return n;
    for (i = 0; i + 1 < n; i++) rank[i] = tok_pair_rank(t, sym[i], sym[i + 1]);
    rank[n - 1] = TOK_NO_RANK;
    for (;;) {
        uint32_t r = TOK_NO_RANK;
        for (i = 0; i + 1 < n; i++) if (rank[i] < r) r = rank[i];
        if (r == TOK_NO_RANK) return n;
        made = t->merges[r].result;
        for (i = 0, w = 0; i < n; w++) {
            if (rank[i] == r) { /* merge i and i+1 (rank[n-1] is never r) */
                sym[w] = made;
                rank[w] = TOK_DIRTY;
                if (w) rank[w - 1] = TOK_DIRTY;
                i += 2;
            } else {
                sym[w] = sym[i];
                rank[w] = rank[i];
                i++;
            }
        }
        n = w;
        if (n < 2) return n;
        for (i = 0; i < n; i++)
            if (rank[i] == TOK_DIRTY) rank[i] = i + 1 < n ? tok_pair_rank(t, sym[i], sym[i + 1]) : TOK_NO_RANK;
    }
}

static void tok_heap_push(uint64_t *heap, size_t *len, uint64_t v) {
    size_t i = (*len)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (heap[p] <= v) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = v;
}

static uint64_t tok_heap_pop(uint64_t *heap, size_t *len) {
    uint64_t top = heap[0], v = heap[--*len];
    size_t i = 0, n = *len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= v) break;
        heap[i] = heap[c];
        i = c;
    }
    if (n) heap[i] = v;
    return top;
}

/* The same merges as tok_bpe_small in O(n log n), for long pieces: a linked list of symbols and a
 * min-heap of (rank, position). Each round pops every pair of the lowest rank, merges those still
 * present left to right, and only then pushes the new pairs. n < 2^31. Returns the count, or
 * (size_t)-1 when out of memory. */
static size_t tok_bpe_heap(const ngpt_tokenizer *t, int32_t *sym, size_t n) {
    uint32_t *next, *prev, *done;
    uint64_t *heap;
    size_t hn = 0, i, w;
    const uint32_t NIL = UINT32_MAX;
    unsigned char *mem;
    if (n < 2) return n;
    if (n > TOK_MAX_PIECE || n > SIZE_MAX / 40) return (size_t)-1;
    mem = malloc(n * (3 * sizeof(uint32_t) + 3 * sizeof(uint64_t)));
    if (!mem) return (size_t)-1;
    heap = (uint64_t *)mem;                  /* (3n) at most n-1 pairs, then 2 per merge */
    next = (uint32_t *)(heap + 3 * n);       /* (n) */
    prev = next + n;                         /* (n) */
    done = prev + n;                         /* (n) positions merged in this round */
    for (i = 0; i < n; i++) { next[i] = i + 1 < n ? (uint32_t)(i + 1) : NIL; prev[i] = i ? (uint32_t)(i - 1) : NIL; }
    for (i = 0; i + 1 < n; i++) {
        uint32_t r = tok_pair_rank(t, sym[i], sym[i + 1]);
        if (r != TOK_NO_RANK) tok_heap_push(heap, &hn, (uint64_t)r << 32 | i);
    }
    while (hn) {
        uint32_t r = (uint32_t)(heap[0] >> 32);
        size_t nd = 0;
        while (hn && (uint32_t)(heap[0] >> 32) == r) { /* pops in position order */
            uint32_t p = (uint32_t)tok_heap_pop(heap, &hn), q;
            if (sym[p] < 0 || (q = next[p]) == NIL || tok_pair_rank(t, sym[p], sym[q]) != r) continue;
            sym[p] = t->merges[r].result;
            sym[q] = -1;
            next[p] = next[q];
            if (next[q] != NIL) prev[next[q]] = p;
            done[nd++] = p;
        }
        for (i = 0; i < nd; i++) {
            uint32_t p = done[i], rr;
            if (prev[p] != NIL && (rr = tok_pair_rank(t, sym[prev[p]], sym[p])) != TOK_NO_RANK)
                tok_heap_push(heap, &hn, (uint64_t)rr << 32 | prev[p]);
            if (next[p] != NIL && (rr = tok_pair_rank(t, sym[p], sym[next[p]])) != TOK_NO_RANK)
                tok_heap_push(heap, &hn, (uint64_t)rr << 32 | p);
        }
    }
    for (i = 0, w = 0; i != NIL; i = next[i]) sym[w++] = sym[i];
    free(mem);
    return w;
}

/* Encodes one pre-token p (n >= 1 bytes) into out (room for n ids). Returns the number of ids, or
 * (size_t)-1 when out of memory. */
static size_t tok_bpe(const ngpt_tokenizer *t, const unsigned char *p, size_t n, int32_t *out) {
    if (n == 1) { out[0] = t->byte_tok[p[0]]; return 1; }
    if (n <= (size_t)t->max_len) {
        int32_t id = tok_vocab_find(t, p, n);
        if (id >= 0 && t->whole[id]) { out[0] = id; return 1; }
    }
    for (size_t i = 0; i < n; i++) out[i] = t->byte_tok[p[i]];
    if (n <= TOK_SMALL) {
        uint32_t rank[TOK_SMALL];
        return tok_bpe_small(t, out, rank, n);
    }
    return tok_bpe_heap(t, out, n);
}

/* ---- pre-tokenizer ---------------------------------------------------------------------------------- */

/* Where the pre-token that starts at s[i] (i < n) ends, by GPT-2's pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * tried alternative by alternative as a backtracking regex engine does. With soft set, n is not the end
 * of the text: the function returns 0 whenever the answer would depend on a byte at or past n (that is,
 * whenever it would look at one), and so a pre-token it returns is the one the whole text has there. */
static int tok_piece_end(const ngpt_tokenizer *t, const unsigned char *s, size_t i, size_t n, int soft, size_t *end) {
    size_t l, k, last;
    int c = tok_class_at(t, s, i, n, soft, &l), ck;
    if (c == TOK_END) return 0;
    if (s[i] == '\'') { /* 's 't 're 've 'm 'll 'd, case-sensitive as in GPT-2 */
        if (i + 1 >= n) { if (soft) return 0; }
        else {
            unsigned char a = s[i + 1];
            if (a == 's' || a == 't' || a == 'm' || a == 'd') { *end = i + 2; return 1; }
            if (a == 'r' || a == 'v' || a == 'l') {
                if (i + 2 >= n) { if (soft) return 0; }
                else if (s[i + 2] == (a == 'l' ? 'l' : 'e')) { *end = i + 3; return 1; }
            }
        }
    }
    k = i;
    if (s[i] == ' ') { /* the optional space of ' ?\p{L}+', ' ?\p{N}+' and ' ?[^\s\p{L}\p{N}]+' */
        size_t l1;
        int c1 = tok_class_at(t, s, i + 1, n, soft, &l1);
        if (c1 == TOK_END && soft) return 0;
        if (c1 != TOK_END && c1 != TOK_SPACE) { k = i + 1; c = c1; l = l1; }
    }
    if (c != TOK_SPACE) { /* a run of letters, of numbers, or of other characters */
        for (k += l;; k += l) {
            ck = tok_class_at(t, s, k, n, soft, &l);
            if (ck == TOK_END) { if (soft) return 0; break; }
            if (ck != c) break;
        }
        *end = k;
        return 1;
    }
    /* whitespace: \s+(?!\S) takes the run up to the end of the text, or all of it but its last character
     * when a non-space follows; when the run is that one character, \s+ takes it alone */
    for (k = i, last = i;; k += l) {
        ck = tok_class_at(t, s, k, n, soft, &l);
        if (ck == TOK_END) { if (soft) return 0; *end = k; return 1; }
        if (ck != TOK_SPACE) break;
        last = k;
    }
    *end = last > i ? last : k;
    return 1;
}

/* ---- encoding --------------------------------------------------------------------------------------- */

/* First occurrence of needle (m >= 1 bytes) in s[0..n), or NULL. */
static const unsigned char *tok_find(const unsigned char *s, size_t n, const unsigned char *needle, size_t m) {
    const unsigned char *p = s, *last;
    if (n < m) return NULL;
    last = s + (n - m);
    while (p <= last) {
        p = memchr(p, needle[0], (size_t)(last - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
        p++;
    }
    return NULL;
}

enum { TOK_STOP_NONE, TOK_STOP_END, TOK_STOP_CAP };

/* Encodes text s[0..len) into ids. Pre-tokens are emitted only when settled: with is_last 0, a pre-token
 * that may still change with what follows len, or a possible start of <|endoftext|> at the very end,
 * stops the encoding (*stop = TOK_STOP_END). With stop_at_cap, a pre-token whose ids do not all fit in
 * cap stops it too (TOK_STOP_CAP); otherwise ids past cap are counted and not written. *consumed is the
 * number of bytes encoded and *n_out the number of ids (written or, past cap, counted). */
static int tok_encode_core(const ngpt_tokenizer *t, const unsigned char *s, size_t len, int is_last,
                           int allow_special, int stop_at_cap, int32_t *ids, size_t cap, size_t *n_out,
                           size_t *consumed, int *stop, char *err, size_t errlen) {
    int32_t tmp[TOK_SMALL];
    size_t pos = 0, count = 0;
    const unsigned char *eot = NULL;
    size_t eot_len = 0;
    *stop = TOK_STOP_NONE;
    if (allow_special && t->eot >= 0) {
        eot = t->bytes + t->off[t->eot];
        eot_len = t->off[t->eot + 1] - t->off[t->eot];
    }
    while (pos < len) {
        size_t seg_end = len, sp = SIZE_MAX;
        int soft = !is_last;
        if (eot) {
            const unsigned char *f = tok_find(s + pos, len - pos, eot, eot_len);
            if (f) { sp = (size_t)(f - s); seg_end = sp; soft = 0; }
            else if (!is_last) { /* the text may go on with the rest of <|endoftext|>: stop before it */
                size_t q = len - pos < eot_len ? pos : len - eot_len + 1;
                while (q < len && memcmp(s + q, eot, len - q) != 0) q++;
                seg_end = q;
            }
        }
        while (pos < seg_end) {
            size_t e, n, m, room = count < cap ? cap - count : 0;
            int32_t *dst;
            int in_place;
            if (!tok_piece_end(t, s, pos, seg_end, soft, &e)) { *stop = TOK_STOP_END; goto done; }
            n = e - pos;
            in_place = n <= room; /* room > 0: ids is not NULL */
            dst = in_place ? ids + count : n <= TOK_SMALL ? tmp : NULL;
            if (!dst && (n > SIZE_MAX / sizeof(int32_t) || !(dst = malloc(n * sizeof(int32_t)))))
                return fail(err, errlen, NGPT_ERR_NOMEM, "tokenizer: out of memory for a pre-token of %zu bytes at byte %zu", n, pos);
            m = tok_bpe(t, s + pos, n, dst);
            if (m == (size_t)-1) {
                if (!in_place && dst != tmp) free(dst);
                if (n > TOK_MAX_PIECE)
                    return fail(err, errlen, NGPT_ERR_ARG, "tokenizer: the pre-token at byte %zu is %zu bytes long; this tokenizer merges at most %zu", pos, n, TOK_MAX_PIECE);
                return fail(err, errlen, NGPT_ERR_NOMEM, "tokenizer: out of memory for a pre-token of %zu bytes at byte %zu", n, pos);
            }
            if (!in_place) {
                if (stop_at_cap && m > room) {
                    if (dst != tmp) free(dst);
                    *stop = TOK_STOP_CAP;
                    if (count == 0) count = m; /* what the caller needs to make progress */
                    goto done;
                }
                if (room) memcpy(ids + count, dst, (m < room ? m : room) * sizeof(int32_t));
                if (dst != tmp) free(dst);
            }
            count += m;
            pos = e;
        }
        if (sp == SIZE_MAX) {
            if (seg_end < len) *stop = TOK_STOP_END;
            break;
        }
        if (count >= cap && stop_at_cap) { *stop = TOK_STOP_CAP; if (count == 0) count = 1; break; }
        if (count < cap) ids[count] = t->eot;
        count++;
        pos = sp + eot_len;
    }
done:
    *n_out = count;
    *consumed = pos;
    return NGPT_OK;
}

int ngpt_tokenizer_encode(const ngpt_tokenizer *t, const char *text, size_t len, int allow_special,
                          int32_t *ids, size_t cap, size_t *n_out, char *err, size_t errlen) {
    size_t n = 0, consumed;
    int stop, rc;
    if (n_out) *n_out = 0;
    if (!t || !n_out || (!text && len) || (!ids && cap))
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_encode: %s is NULL",
                        !t ? "the tokenizer" : !n_out ? "n_out" : !ids && cap ? "ids (with cap > 0)" : "text (with len > 0)");
    rc = tok_encode_core(t, (const unsigned char *)text, len, 1, allow_special, 0, ids, cap, &n, &consumed, &stop,
                         err, errlen);
    if (rc) return rc;
    *n_out = n;
    if (n > cap)
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_encode: ids has room for %zu ids; these %zu bytes need %zu "
                        "(cap >= len always suffices)", cap, len, n);
    return NGPT_OK;
}

int ngpt_tokenizer_encode_chunk(const ngpt_tokenizer *t, const char *text, size_t len, int is_last,
                                int allow_special, int32_t *ids, size_t cap, size_t *n_out, size_t *consumed,
                                char *err, size_t errlen) {
    size_t n = 0, used = 0;
    int stop, rc;
    if (n_out) *n_out = 0;
    if (consumed) *consumed = 0;
    if (!t || !n_out || !consumed || (!text && len) || (!ids && cap))
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_encode_chunk: %s is NULL",
                        !t ? "the tokenizer" : !n_out ? "n_out" : !consumed ? "consumed" :
                        !ids && cap ? "ids (with cap > 0)" : "text (with len > 0)");
    rc = tok_encode_core(t, (const unsigned char *)text, len, is_last, allow_special, 1, ids, cap, &n, &used, &stop,
                         err, errlen);
    if (rc) return rc;
    *n_out = n;
    *consumed = used;
    if (stop == TOK_STOP_CAP && used == 0) /* nothing fitted: n is what the first pre-token needs */
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_encode_chunk: ids has room for %zu ids; the pre-token at the "
                        "start of the chunk needs %zu (cap >= len always suffices)", cap, n);
    return NGPT_OK;
}

/* ---- decoding --------------------------------------------------------------------------------------- */

int ngpt_tokenizer_decode(const ngpt_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap,
                          size_t *len_out, char *err, size_t errlen) {
    size_t total = 0;
    if (len_out) *len_out = 0;
    if (!t || !len_out || (!ids && n) || (!out && cap))
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_decode: %s is NULL",
                        !t ? "the tokenizer" : !len_out ? "len_out" : !out && cap ? "out (with cap > 0)" : "ids (with n > 0)");
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        size_t m;
        if (id < 0 || id >= t->n_vocab)
            return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_decode: ids[%zu] = %ld is not a token id (valid: 0..%ld)",
                            i, (long)id, (long)t->n_vocab - 1);
        m = t->off[id + 1] - t->off[id];
        if (total < cap) memcpy(out + total, t->bytes + t->off[id], m < cap - total ? m : cap - total);
        total += m;
    }
    *len_out = total;
    if (total > cap)
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_decode: out has room for %zu bytes; these %zu ids need %zu",
                        cap, n, total);
    return NGPT_OK;
}

const char *ngpt_tokenizer_token(const ngpt_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_vocab) { if (len) *len = 0; return NULL; }
    if (len) *len = t->off[id + 1] - t->off[id];
    return (const char *)(t->bytes + t->off[id]);
}

int ngpt_tokenizer_vocab_size(const ngpt_tokenizer *t) { return t ? (int)t->n_vocab : 0; }

int32_t ngpt_tokenizer_eot(const ngpt_tokenizer *t) { return t ? t->eot : -1; }

void ngpt_tokenizer_free(ngpt_tokenizer *t) { free(t); }

/* ---- building the tables ---------------------------------------------------------------------------- */

static size_t tok_pow2_at_least(size_t x) {
    size_t p = 16;
    while (p < x) p *= 2;
    return p;
}

/* One block for a tokenizer of V tokens, M merges and nb token bytes: sizes first, then pointers. */
static ngpt_tokenizer *tok_alloc(int32_t V, int32_t M, size_t nb) {
    size_t vcap = tok_pow2_at_least((size_t)V + (size_t)V / 4), pcap = tok_pow2_at_least((size_t)M + (size_t)M / 4), o = 0, sz[8], i;
    ngpt_tokenizer *t;
    unsigned char *base;
    sz[0] = sizeof(ngpt_tokenizer);
    sz[1] = ((size_t)V + 1) * sizeof(uint32_t);        /* off */
    sz[2] = (size_t)M * sizeof(tok_merge);             /* merges */
    sz[3] = vcap * sizeof(tok_vocab_slot);             /* vocab */
    sz[4] = pcap * sizeof(tok_pair_slot);              /* pairs */
    sz[5] = (size_t)V;                                 /* whole */
    sz[6] = 65536;                                     /* bmp_class */
    sz[7] = nb + 1;                                    /* bytes */
    for (i = 0; i < 8; i++) o += (sz[i] + 15) & ~(size_t)15;
    base = calloc(1, o);
    if (!base) return NULL;
    t = (ngpt_tokenizer *)base;
    o = (sz[0] + 15) & ~(size_t)15;
    t->off = (uint32_t *)(base + o);        o += (sz[1] + 15) & ~(size_t)15;
    t->merges = (tok_merge *)(base + o);    o += (sz[2] + 15) & ~(size_t)15;
    t->vocab = (tok_vocab_slot *)(base + o); o += (sz[3] + 15) & ~(size_t)15;
    t->pairs = (tok_pair_slot *)(base + o); o += (sz[4] + 15) & ~(size_t)15;
    t->whole = base + o;                    o += (sz[5] + 15) & ~(size_t)15;
    t->bmp_class = base + o;                o += (sz[6] + 15) & ~(size_t)15;
    t->bytes = base + o;
    t->n_vocab = V;
    t->n_merges = M;
    t->n_bytes = nb;
    t->eot = -1;
    t->vocab_mask = vcap - 1;
    t->pair_mask = pcap - 1;
    return t;
}

/* Indexes the tokens of a tokenizer whose off and bytes are filled: checks that they are distinct and
 * non-empty and that every byte has one, builds the vocab table and the class table. what names the
 * source in messages; with src, at[id] is the byte offset in src of where token id is defined. */
typedef struct tok_src tok_src;
static int tok_src_fail(const tok_src *src, size_t at, int status, const char *fmt, ...) TOK_PRINTF(4, 5);

static int tok_index_tokens(ngpt_tokenizer *t, const char *what, const tok_src *src, const size_t *at, char *err,
                            size_t errlen) {
    char q1[96];
    int32_t V = t->n_vocab, id;
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    t->max_len = 0;
    for (size_t i = 0; i <= t->vocab_mask; i++) t->vocab[i].id = -1;
    for (id = 0; id < V; id++) {
        size_t n = t->off[id + 1] - t->off[id];
        const unsigned char *p = t->bytes + t->off[id];
        uint64_t h;
        size_t i;
        if (t->off[id + 1] < t->off[id] || t->off[id + 1] > t->n_bytes)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %ld has a bad extent (%lu..%lu of %zu bytes)", what,
                            (long)id, (unsigned long)t->off[id], (unsigned long)t->off[id + 1], t->n_bytes);
        if (n == 0) return fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %ld is empty; every token needs at least one byte", what, (long)id);
        h = tok_hash(p, n);
        if (n > UINT32_MAX) return fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %ld is too long", what, (long)id);
        for (i = (size_t)h & t->vocab_mask; t->vocab[i].id >= 0; i = (i + 1) & t->vocab_mask) {
            int32_t o = t->vocab[i].id;
            if (t->off[o + 1] - t->off[o] == n && memcmp(t->bytes + t->off[o], p, n) == 0) {
                if (src) {
                    size_t a = at[o] > at[id] ? at[o] : at[id];
                    return tok_src_fail(src, a, NGPT_ERR_FORMAT, "the key %s appears twice (ids %ld and %ld); keys must be distinct",
                                        tok_quote(q1, sizeof q1, p, n, 40), (long)o, (long)id);
                }
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tokens %ld and %ld are both %s; every token must be distinct",
                                what, (long)o, (long)id, tok_quote(q1, sizeof q1, p, n, 40));
            }
        }
        t->vocab[i].id = id;
        t->vocab[i].head = tok_head(p, n);
        t->vocab[i].len = (uint32_t)n;
        if (n == 1) t->byte_tok[p[0]] = id;
        if (n > (size_t)t->max_len) t->max_len = (int32_t)n;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_tok[b] < 0)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: no token for the byte 0x%02X; byte-level BPE needs one for each of the 256 bytes", what, b);
    memset(t->bmp_class, TOK_OTHER, 65536);
    for (size_t r = 0; r < TOK_UNI_NRANGES && tok_uni_ranges[r][0] < 0x10000; r++) {
        uint32_t hi = tok_uni_ranges[r][1] & 0xffffffu;
        for (uint32_t cp = tok_uni_ranges[r][0]; cp <= hi && cp < 0x10000; cp++)
            t->bmp_class[cp] = (unsigned char)(tok_uni_ranges[r][1] >> 24);
    }
    return NGPT_OK;
}

/* Indexes the merges (merges[].left/right filled, tokens indexed): checks them, finds what each makes,
 * builds the pair table and, with find_whole, the whole-token flags. Merge r is on line line0 + r of
 * what, or is called "merge r" when line0 < 0. */
static int tok_index_merges(ngpt_tokenizer *t, const char *what, long line0, int find_whole, char *err, size_t errlen) {
    char q1[96], q2[96];
    int32_t V = t->n_vocab, id;
    for (size_t i = 0; i <= t->pair_mask; i++) t->pairs[i] = TOK_PAIR_EMPTY;
    for (int32_t r = 0; r < t->n_merges; r++) {
        tok_merge *m = &t->merges[r];
        unsigned char cat[512];
        size_t nl, nr, i;
        uint64_t key;
        long line = line0 >= 0 ? line0 + r : r;
        const char *unit = line0 >= 0 ? "" : " merge "; /* "vocab.bpe:7: ..." or "x.tok: merge 5: ..." */
        if (m->left < 0 || m->left >= V || m->right < 0 || m->right >= V)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s:%s%ld: merges tokens %ld and %ld; ids must be 0..%ld", what, unit,
                            line, (long)m->left, (long)m->right, (long)V - 1);
        nl = t->off[m->left + 1] - t->off[m->left];
        nr = t->off[m->right + 1] - t->off[m->right];
        m->result = -1;
        if (nl + nr <= sizeof cat) {
            memcpy(cat, t->bytes + t->off[m->left], nl);
            memcpy(cat + nl, t->bytes + t->off[m->right], nr);
            m->result = tok_vocab_find(t, cat, nl + nr);
        }
        if (m->result < 0)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s:%s%ld: merges %s and %s, but their concatenation is not a token",
                            what, unit, line, tok_quote(q1, sizeof q1, t->bytes + t->off[m->left], nl, 40),
                            tok_quote(q2, sizeof q2, t->bytes + t->off[m->right], nr, 40));
        key = tok_pair_key(m->left, m->right);
        for (i = tok_pair_slot_of(t, key); t->pairs[i] != TOK_PAIR_EMPTY; i = (i + 1) & t->pair_mask)
            if (t->pairs[i] >> 22 == key)
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s:%s%ld: repeats the merge of %s and %s (first on %s %ld)", what,
                                unit, line, tok_quote(q1, sizeof q1, t->bytes + t->off[m->left], nl, 40),
                                tok_quote(q2, sizeof q2, t->bytes + t->off[m->right], nr, 40), line0 >= 0 ? "line" : "merge",
                                (line0 >= 0 ? line0 : 0) + (long)(t->pairs[i] & ((1u << 22) - 1)));
        t->pairs[i] = key << 22 | (uint64_t)r;
    }
    /* A pre-token that is itself a token is usually that one token; the shortcut is taken only for the
     * tokens where BPE of their own bytes says so, which keeps it exact for any vocabulary. */
    for (id = 0; find_whole && id < V; id++) {
        size_t n = t->off[id + 1] - t->off[id], m;
        const unsigned char *p = t->bytes + t->off[id];
        int32_t one[TOK_SMALL], *sym = n <= TOK_SMALL ? one : malloc(n * sizeof(int32_t));
        if (!sym) return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", what);
        for (size_t i = 0; i < n; i++) sym[i] = t->byte_tok[p[i]];
        if (n <= TOK_SMALL) {
            uint32_t rank[TOK_SMALL];
            m = tok_bpe_small(t, sym, rank, n);
        } else {
            m = tok_bpe_heap(t, sym, n);
        }
        t->whole[id] = m == 1 && sym[0] == id;
        if (sym != one) free(sym);
        if (m == (size_t)-1) return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", what);
    }
    return NGPT_OK;
}

/* ---- OpenAI's encoder.json and vocab.bpe ------------------------------------------------------------ */

struct tok_src {
    const char *path;
    const unsigned char *s;
    size_t n;
    char *err;
    size_t errlen;
};

/* An error at byte offset at of src: "PATH:LINE:COL (byte AT): message". */
static int tok_src_fail(const tok_src *src, size_t at, int status, const char *fmt, ...) {
    size_t line = 1, col = 1, o;
    va_list ap;
    if (!src->err || !src->errlen) return status;
    for (size_t i = 0; i < at && i < src->n; i++) {
        if (src->s[i] == '\n') { line++; col = 1; }
        else if ((src->s[i] & 0xC0) != 0x80) col++;
    }
    snprintf(src->err, src->errlen, "%s:%zu:%zu (byte %zu): ", src->path, line, col, at);
    o = strlen(src->err);
    va_start(ap, fmt);
    vsnprintf(src->err + o, src->errlen - o, fmt, ap);
    va_end(ap);
    return status;
}

/* What is at s[i], for messages: "end of file", "'x'", "byte 0xNN". */
static const char *tok_src_what(const tok_src *src, size_t i, char *buf, size_t cap) {
    /* buf needs room for 48 bytes */
    if (i >= src->n) snprintf(buf, cap, "the end of the file (it is truncated)");
    else if (src->s[i] >= 0x20 && src->s[i] < 0x7f) snprintf(buf, cap, "'%c'", src->s[i]);
    else snprintf(buf, cap, "byte 0x%02X", src->s[i]);
    return buf;
}

/* Decodes one well-formed UTF-8 character at s[*i] (advancing *i); -1 if there is none. */
static int32_t tok_utf8_next(const unsigned char *s, size_t n, size_t *i) {
    uint32_t cp;
    int r;
    if (s[*i] < 0x80) return s[(*i)++];
    if ((r = tok_utf8(s, *i, n, &cp)) <= 0) return -1;
    *i += (size_t)r;
    return (int32_t)cp;
}

/* Appends the byte GPT-2's alphabet gives code point cp to buf; fails naming the code point. */
static int tok_push_symbol(const tok_src *src, size_t at, int32_t cp, unsigned char *buf, size_t *len, size_t cap) {
    int b = tok_unicode_to_byte((uint32_t)cp);
    if (b < 0)
        return tok_src_fail(src, at, NGPT_ERR_FORMAT, "U+%04lX is not one of the 256 characters GPT-2's byte-level "
                            "vocabulary spells bytes with (U+0021..U+007E, U+00A1..U+00AC, U+00AE..U+0143)", (long)cp);
    if (*len >= cap) return tok_src_fail(src, at, NGPT_ERR_FORMAT, "a token longer than %zu bytes", cap);
    buf[(*len)++] = (unsigned char)b;
    return NGPT_OK;
}

static size_t tok_json_ws(const tok_src *src, size_t i) {
    while (i < src->n && (src->s[i] == ' ' || src->s[i] == '\t' || src->s[i] == '\n' || src->s[i] == '\r')) i++;
    return i;
}

static int tok_hex4(const unsigned char *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p[k], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Parses the JSON string at s[*i] (a '"') into token bytes. */
static int tok_json_key(const tok_src *src, size_t *i, unsigned char *buf, size_t *len, size_t cap) {
    size_t start = *i, j = *i + 1;
    char w[64];
    int rc;
    *len = 0;
    for (;;) {
        size_t at = j;
        int32_t cp;
        if (j >= src->n) return tok_src_fail(src, start, NGPT_ERR_FORMAT, "the string that starts here has no closing '\"' (the file is truncated)");
        if (src->s[j] == '"') break;
        if (src->s[j] < 0x20)
            return tok_src_fail(src, j, NGPT_ERR_FORMAT, "raw control byte 0x%02X inside a string; JSON needs it escaped", src->s[j]);
        if (src->s[j] == '\\') {
            unsigned char e = j + 1 < src->n ? src->s[j + 1] : 0;
            j += 2;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = 8; break;
            case 'f': cp = 12; break;
            case 'n': cp = 10; break;
            case 'r': cp = 13; break;
            case 't': cp = 9; break;
            case 'u':
                if (j + 4 > src->n || (cp = tok_hex4(src->s + j)) < 0)
                    return tok_src_fail(src, at, NGPT_ERR_FORMAT, "bad escape: \\u must be followed by 4 hex digits");
                j += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return tok_src_fail(src, at, NGPT_ERR_FORMAT, "unpaired low surrogate \\u%04X (it must follow a high surrogate \\uD800..\\uDBFF)", (unsigned)cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    int lo = j + 6 <= src->n && src->s[j] == '\\' && src->s[j + 1] == 'u' ? tok_hex4(src->s + j + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return tok_src_fail(src, at, NGPT_ERR_FORMAT, "unpaired high surrogate \\u%04X (expected a low surrogate \\uDC00..\\uDFFF after it)", (unsigned)cp);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    j += 6;
                }
                break;
            default:
                if (at + 1 >= src->n) return tok_src_fail(src, start, NGPT_ERR_FORMAT, "the string that starts here has no closing '\"' (the file is truncated)");
                if (e > 0x20 && e < 0x7f)
                    return tok_src_fail(src, at, NGPT_ERR_FORMAT, "bad escape \\%c in a string; expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", e);
                return tok_src_fail(src, at, NGPT_ERR_FORMAT, "bad escape: byte 0x%02X after a backslash; expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX", e);
            }
        } else if ((cp = tok_utf8_next(src->s, src->n, &j)) < 0) {
            return tok_src_fail(src, at, NGPT_ERR_FORMAT, "%s inside a string is not valid UTF-8", tok_src_what(src, at, w, sizeof w));
        }
        if ((rc = tok_push_symbol(src, at, cp, buf, len, cap))) return rc;
    }
    if (*len == 0) return tok_src_fail(src, start, NGPT_ERR_FORMAT, "an empty key; every token needs at least one byte");
    *i = j + 1;
    return NGPT_OK;
}

typedef struct { size_t at; uint32_t off, len; int64_t id; } tok_entry; /* at: byte offset of the key */

/* Parses encoder.json ({"token": id, ...}) into entries and their bytes (both malloc'd). */
static int tok_parse_encoder(const tok_src *src, tok_entry **entries_out, size_t *count_out, unsigned char **blob_out,
                             size_t *blob_len_out) {
    size_t i, cap = 0, count = 0, blob_cap = 1 << 16, blob_len = 0;
    tok_entry *entries = NULL;
    unsigned char *blob = malloc(blob_cap), key[1024];
    char w[64];
    int rc = NGPT_OK;
    if (!blob) return tok_src_fail(src, 0, NGPT_ERR_NOMEM, "out of memory");
    i = tok_json_ws(src, 0);
    if (i >= src->n || src->s[i] != '{') {
        rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "expected '{' to open the JSON object of token -> id, found %s",
                          tok_src_what(src, i, w, sizeof w));
        goto fail;
    }
    i = tok_json_ws(src, i + 1);
    if (i < src->n && src->s[i] == '}') { rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "the object has no tokens"); goto fail; }
    for (;;) {
        size_t at = i, klen, nd = 0;
        int64_t v = 0;
        int neg = 0;
        if (i >= src->n || src->s[i] != '"') {
            rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "expected a '\"' to start a token string, found %s", tok_src_what(src, i, w, sizeof w));
            goto fail;
        }
        if ((rc = tok_json_key(src, &i, key, &klen, sizeof key))) goto fail;
        i = tok_json_ws(src, i);
        if (i >= src->n || src->s[i] != ':') {
            rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "expected ':' after the key, found %s", tok_src_what(src, i, w, sizeof w));
            goto fail;
        }
        i = tok_json_ws(src, i + 1);
        size_t vat = i;
        if (i < src->n && src->s[i] == '-') { neg = 1; i++; }
        while (i < src->n && src->s[i] >= '0' && src->s[i] <= '9') {
            if (v < INT64_C(1) << 40) v = v * 10 + (src->s[i] - '0');
            i++;
            nd++;
        }
        if (nd == 0) {
            rc = tok_src_fail(src, vat, NGPT_ERR_FORMAT, "expected an integer token id, found %s", tok_src_what(src, vat, w, sizeof w));
            goto fail;
        }
        if (i < src->n && (src->s[i] == '.' || src->s[i] == 'e' || src->s[i] == 'E')) {
            rc = tok_src_fail(src, vat, NGPT_ERR_FORMAT, "token ids are integers; this one has a fraction or exponent");
            goto fail;
        }
        if (nd > 1 && src->s[vat + neg] == '0') {
            rc = tok_src_fail(src, vat, NGPT_ERR_FORMAT, "a number with a leading zero is not JSON");
            goto fail;
        }
        if (neg) v = -v; /* the range is checked once the count is known */
        if (count == cap) {
            size_t nc = cap ? 2 * cap : 1 << 14;
            tok_entry *ne = realloc(entries, nc * sizeof *ne);
            if (!ne) { rc = tok_src_fail(src, at, NGPT_ERR_NOMEM, "out of memory"); goto fail; }
            entries = ne;
            cap = nc;
        }
        while (blob_len + klen > blob_cap) {
            unsigned char *nb = realloc(blob, blob_cap * 2);
            if (!nb) { rc = tok_src_fail(src, at, NGPT_ERR_NOMEM, "out of memory"); goto fail; }
            blob = nb;
            blob_cap *= 2;
        }
        if (count >= TOK_MAX_VOCAB || blob_len + klen > UINT32_MAX) {
            rc = tok_src_fail(src, at, NGPT_ERR_FORMAT, "more tokens than this tokenizer takes (%d)", TOK_MAX_VOCAB);
            goto fail;
        }
        memcpy(blob + blob_len, key, klen);
        entries[count].at = at;
        entries[count].off = (uint32_t)blob_len;
        entries[count].len = (uint32_t)klen;
        entries[count].id = v;
        count++;
        blob_len += klen;
        i = tok_json_ws(src, i);
        if (i < src->n && src->s[i] == ',') { i = tok_json_ws(src, i + 1); continue; }
        if (i < src->n && src->s[i] == '}') break;
        rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "expected ',' or '}' after a token id, found %s", tok_src_what(src, i, w, sizeof w));
        goto fail;
    }
    i = tok_json_ws(src, i + 1);
    if (i < src->n) {
        rc = tok_src_fail(src, i, NGPT_ERR_FORMAT, "unexpected %s after the end of the JSON object", tok_src_what(src, i, w, sizeof w));
        goto fail;
    }
    *entries_out = entries;
    *count_out = count;
    *blob_out = blob;
    *blob_len_out = blob_len;
    return NGPT_OK;
fail:
    free(entries);
    free(blob);
    return rc;
}

/* Parses one side of a merge line ("Ġt") into bytes. */
static int tok_bpe_word(const tok_src *src, size_t a, size_t b, unsigned char *buf, size_t *len, size_t cap) {
    int rc;
    *len = 0;
    while (a < b) {
        size_t at = a;
        int32_t cp = tok_utf8_next(src->s, b, &a);
        if (cp < 0) return tok_src_fail(src, at, NGPT_ERR_FORMAT, "byte 0x%02X is not valid UTF-8", src->s[at]);
        if ((rc = tok_push_symbol(src, at, cp, buf, len, cap))) return rc;
    }
    return NGPT_OK;
}

/* Every token of more than one byte, but for special ones ("<|endoftext|>"), must be some merge's result: BPE
 * makes no other (a weaker form of tiktoken's check, which asks merge r to make id 256 + r). Merges cut short
 * (what, a vocab.bpe or a compact file) load without this, and encode text into other ids than GPT-2's. */
static int tok_check_reachable(const ngpt_tokenizer *t, const char *what, char *err, size_t errlen) {
    unsigned char *made = calloc((size_t)t->n_vocab, 1);
    if (!made) return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", what);
    for (int32_t r = 0; r < t->n_merges; r++) made[t->merges[r].result] = 1;
    int32_t missing = 0, first = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const unsigned char *p = t->bytes + t->off[id];
        size_t n = t->off[id + 1] - t->off[id];
        int special = n >= 4 && !memcmp(p, "<|", 2) && !memcmp(p + n - 2, "|>", 2);
        if (n < 2 || made[id] || special) continue;
        if (!missing++) first = id;
    }
    free(made);
    if (!missing) return NGPT_OK;
    char q[96];
    return fail(err, errlen, NGPT_ERR_FORMAT,
                "%s: its %ld merges make no token %s (id %ld) nor %ld other tokens of its %ld: every token of two bytes or more "
                "(but special ones like <|endoftext|>) must be a merge's result (GPT-2 has 50000 merges, vocab.bpe one a line "
                "after its '#version' header); the merges look cut short or from another vocabulary", what, (long)t->n_merges,
                tok_quote(q, sizeof q, t->bytes + t->off[first], t->off[first + 1] - t->off[first], 40), (long)first, (long)(missing - 1),
                (long)t->n_vocab);
}

int ngpt_tokenizer_load_gpt2(const char *encoder_json, const char *vocab_bpe, ngpt_tokenizer **out, char *err,
                             size_t errlen) {
    unsigned char *js = NULL, *bp = NULL, *blob = NULL;
    size_t *first = NULL;  /* (count) 1 + index of the entry with each id, 0 if none */
    size_t js_len, bp_len, count = 0, blob_len = 0, i, n_lines = 0, line_start;
    tok_entry *entries = NULL;
    ngpt_tokenizer *t = NULL;
    tok_src src;
    int rc;
    if (out) *out = NULL;
    if (!encoder_json || !vocab_bpe || !out)
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_load_gpt2: %s is NULL", !encoder_json ? "encoder_json" : !vocab_bpe ? "vocab_bpe" : "out");
    if ((rc = tok_read_file(encoder_json, &js, &js_len, err, errlen))) goto done;
    if ((rc = tok_read_file(vocab_bpe, &bp, &bp_len, err, errlen))) goto done;

    src = (tok_src){encoder_json, js, js_len, err, errlen};
    if ((rc = tok_parse_encoder(&src, &entries, &count, &blob, &blob_len))) goto done;
    /* ids must be exactly 0..count-1 */
    first = calloc(count, sizeof *first);
    if (!first) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", encoder_json); goto done; }
    for (i = 0; i < count; i++) {
        char q[96], q2[96];
        if (entries[i].id < 0 || (uint64_t)entries[i].id >= count) {
            rc = tok_src_fail(&src, entries[i].at, NGPT_ERR_FORMAT, "id %s%lld of %s is out of range: the file has %zu tokens, so ids are 0..%zu",
                              entries[i].id >= INT64_C(1) << 40 ? ">= " : "", (long long)entries[i].id, tok_quote(q, sizeof q, blob + entries[i].off, entries[i].len, 40), count, count - 1);
            goto done;
        }
        if (first[entries[i].id]) {
            const tok_entry *o = &entries[first[entries[i].id] - 1];
            rc = tok_src_fail(&src, entries[i].at, NGPT_ERR_FORMAT, "id %ld of %s is also the id of %s (byte %zu); ids must be distinct",
                              (long)entries[i].id, tok_quote(q, sizeof q, blob + entries[i].off, entries[i].len, 40),
                              tok_quote(q2, sizeof q2, blob + o->off, o->len, 40), o->at);
            goto done;
        }
        first[entries[i].id] = i + 1;
    }

    /* vocab.bpe: "#version: ..." then one "left right" merge per line, in rank order */
    src = (tok_src){vocab_bpe, bp, bp_len, err, errlen};
    if (bp_len < 9 || memcmp(bp, "#version:", 9) != 0) {
        char q[96];
        size_t e = 0;
        while (e < bp_len && bp[e] != '\n') e++;
        rc = tok_src_fail(&src, 0, NGPT_ERR_FORMAT, "expected the header line '#version: 0.2' of GPT-2's merges file, found %s",
                          tok_quote(q, sizeof q, bp, e, 40));
        goto done;
    }
    for (i = 0; i < bp_len; i++) n_lines += bp[i] == '\n';
    if (bp_len && bp[bp_len - 1] != '\n') n_lines++;  /* a last line without its newline */
    n_lines -= 1;                                     /* the header */
    if (n_lines >= TOK_MAX_VOCAB) { rc = tok_src_fail(&src, 0, NGPT_ERR_FORMAT, "more merges than this tokenizer takes (%d)", TOK_MAX_VOCAB); goto done; }

    t = tok_alloc((int32_t)count, (int32_t)n_lines, blob_len);
    if (!t) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", encoder_json); goto done; }
    {
        size_t o = 0;
        for (int32_t id = 0; id < (int32_t)count; id++) {
            const tok_entry *e = &entries[first[id] - 1];
            t->off[id] = (uint32_t)o;
            memcpy(t->bytes + o, blob + e->off, e->len);
            o += e->len;
        }
        t->off[count] = (uint32_t)o;
    }
    {
        size_t *at = malloc(count * sizeof *at);
        if (!at) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", encoder_json); goto done; }
        for (size_t id = 0; id < count; id++) at[id] = entries[first[id] - 1].at;
        src = (tok_src){encoder_json, js, js_len, err, errlen};
        rc = tok_index_tokens(t, encoder_json, &src, at, err, errlen);
        free(at);
        if (rc) goto done;
        src = (tok_src){vocab_bpe, bp, bp_len, err, errlen};
    }
    for (i = 0; i < bp_len && bp[i] != '\n'; i++) {}
    line_start = i + 1;
    {
        size_t line = 2, r = 0;
        while (line_start < bp_len) {
            size_t e = line_start, sp = SIZE_MAX, end, ln, rn;
            unsigned char lb[1024], rb[1024];
            int32_t left, right;
            char q[96];
            while (e < bp_len && bp[e] != '\n') { if (bp[e] == ' ' && sp == SIZE_MAX) sp = e; e++; }
            end = e > line_start && bp[e - 1] == '\r' ? e - 1 : e;  /* tolerate CRLF */
            if (end == line_start) {
                rc = tok_src_fail(&src, line_start, NGPT_ERR_FORMAT, "an empty line; expected a merge 'left right'");
                goto done;
            }
            if (sp == SIZE_MAX || sp >= end || sp == line_start || sp + 1 == end || memchr(bp + sp + 1, ' ', end - sp - 1)) {
                rc = tok_src_fail(&src, line_start, NGPT_ERR_FORMAT, "expected a merge 'left right' (two tokens and one space), found %s",
                                  tok_quote(q, sizeof q, bp + line_start, end - line_start, 60));
                goto done;
            }
            if ((rc = tok_bpe_word(&src, line_start, sp, lb, &ln, sizeof lb))) goto done;
            if ((rc = tok_bpe_word(&src, sp + 1, end, rb, &rn, sizeof rb))) goto done;
            left = tok_vocab_find(t, lb, ln);
            right = tok_vocab_find(t, rb, rn);
            if (left < 0 || right < 0) {
                int l = left < 0;
                rc = tok_src_fail(&src, l ? line_start : sp + 1, NGPT_ERR_FORMAT, "the merge names %s, which is not a token of %s",
                                  tok_quote(q, sizeof q, l ? lb : rb, l ? ln : rn, 40), encoder_json);
                goto done;
            }
            t->merges[r].left = left;
            t->merges[r].right = right;
            r++;
            line++;
            line_start = e + 1;
        }
        t->n_merges = (int32_t)r;
    }
    if ((rc = tok_index_merges(t, vocab_bpe, 2, 1, err, errlen))) goto done;
    t->eot = tok_vocab_find(t, (const unsigned char *)TOK_EOT_TEXT, strlen(TOK_EOT_TEXT));
    if ((rc = tok_check_reachable(t, vocab_bpe, err, errlen))) goto done;
    *out = t;
    t = NULL;
done:
    free(t);
    free(first);
    free(entries);
    free(blob);
    free(js);
    free(bp);
    return rc;
}

/* ---- llm.c's gpt2_tokenizer.bin ---------------------------------------------------------------------- *
 * A 1024-byte header of int32 (magic 20240328, version 1 or 2, V, and in version 2 the id of <|endoftext|>),
 * then each token as a length byte and its bytes. It holds no merges, but GPT-2's ids are its merge ranks:
 * ids 0..255 are the single bytes and merge r makes id 256 + r (tiktoken builds its GPT-2 ranks from
 * vocab.bpe this way and checks them against encoder.json). So merge r is found again as the pair that BPE
 * of token 256 + r's own bytes, by the merges before it, leaves: the lowest-id adjacent pair that is a token
 * below 256 + r, taken until none is left, must leave exactly two tokens. */

#define LLMC_TOKENIZER_HEADER_BYTES 1024

/* The two tokens that BPE of token id's bytes by the tokens below id (as ranks) leaves, into pair; 0 if it
 * leaves another number of them */
static int tok_llmc_merge_of(const ngpt_tokenizer *t, int32_t id, int32_t pair[2]) {
    const unsigned char *p = t->bytes + t->off[id];
    size_t n = t->off[id + 1] - t->off[id], start[256], len[256], m = n;
    if (n > 256) return 0;
    for (size_t i = 0; i < n; i++) start[i] = i, len[i] = 1;
    for (;;) {
        int32_t best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            int32_t joined = tok_vocab_find(t, p + start[i], len[i] + len[i + 1]);
            if (joined >= 0 && joined < id && (best < 0 || joined < best)) best = joined, at = i;
        }
        if (best < 0) break;
        len[at] += len[at + 1];
        memmove(start + at + 1, start + at + 2, (m - at - 2) * sizeof *start);
        memmove(len + at + 1, len + at + 2, (m - at - 2) * sizeof *len);
        m--;
    }
    if (m != 2) return 0;
    pair[0] = tok_vocab_find(t, p, len[0]);
    pair[1] = tok_vocab_find(t, p + len[0], len[1]);
    return pair[0] >= 0 && pair[1] >= 0;
}

int ngpt_tokenizer_load_llmc(const char *path, ngpt_tokenizer **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!path || !out) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_load_llmc: %s is NULL", !path ? "path" : "out");
    unsigned char *file = NULL;
    size_t size = 0;
    int rc = tok_read_file(path, &file, &size, err, errlen);
    if (rc) return rc;
    int32_t h[4] = {0, 0, 0, 0};
    if (size >= sizeof h) memcpy(h, file, sizeof h);
    ngpt_tokenizer *t = NULL;
    if (size < LLMC_TOKENIZER_HEADER_BYTES || h[0] != LLMC_TOKENIZER_MAGIC) {
        char found[64];
        if (size < LLMC_TOKENIZER_HEADER_BYTES) snprintf(found, sizeof found, "%zu bytes, shorter than its header", size);
        else snprintf(found, sizeof found, "magic %d at byte 0", h[0]);
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s; llm.c's tokenizer file (gpt2_tokenizer.bin) starts with a %d-byte header, magic %d", path,
                  found, LLMC_TOKENIZER_HEADER_BYTES, LLMC_TOKENIZER_MAGIC);
        goto done;
    }
    int32_t V = h[2], eot = h[1] == 2 ? h[3] : V - 1; /* version 1 (GPT-2 only): <|endoftext|> last */
    if (h[1] != 1 && h[1] != 2) { rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: version %d; llm.c's tokenizer files are versions 1 and 2", path, h[1]); goto done; }
    if (V < 257 || V >= TOK_MAX_VOCAB || eot != V - 1) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %d tokens with <|endoftext|> at id %d; a GPT-2 vocabulary has 256 bytes, their merges, then "
                                                "<|endoftext|> last (50257 tokens, id 50256)", path, V, eot);
        goto done;
    }
    size_t o = LLMC_TOKENIZER_HEADER_BYTES, token_bytes = 0;
    for (int32_t id = 0; id < V; id++) { /* the extents first: each token whole inside the file, nothing after the last */
        if (o >= size || file[o] == 0 || o + 1 + file[o] > size) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %d at byte offset %zu: %s (the file has %zu bytes)", path, id, o,
                      o >= size ? "the file ends before it (cut short, or a length byte before it is wrong)"
                      : file[o] == 0 ? "length 0; every token has at least one byte"
                                     : "its bytes run past the end (cut short, or its length byte is wrong)",
                      size);
            goto done;
        }
        token_bytes += file[o];
        o += 1 + (size_t)file[o];
    }
    if (o != size) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes after its %d tokens (from byte offset %zu)", path, size - o, V, o);
        goto done;
    }
    t = tok_alloc(V, V - 257, token_bytes);
    if (!t) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", path); goto done; }
    o = LLMC_TOKENIZER_HEADER_BYTES;
    for (int32_t id = 0, at = 0; id < V; id++) {
        t->off[id] = (uint32_t)at;
        memcpy(t->bytes + at, file + o + 1, file[o]);
        at += file[o];
        o += 1 + (size_t)file[o];
    }
    t->off[V] = (uint32_t)token_bytes;
    if ((rc = tok_index_tokens(t, path, NULL, NULL, err, errlen))) goto done;
    for (int32_t id = 0; id < 256; id++)
        if (t->off[id + 1] - t->off[id] != 1) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %d is %u bytes long; GPT-2's ids 0..255 are the single bytes", path, id,
                      t->off[id + 1] - t->off[id]);
            goto done;
        }
    for (int32_t r = 0; r < t->n_merges; r++) {
        int32_t pair[2];
        if (!tok_llmc_merge_of(t, 256 + r, pair)) {
            char q[96];
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: token %d (%s) is not one merge of two tokens before it: not GPT-2's vocabulary, whose "
                                                    "ids are its merge ranks", path, 256 + r,
                      tok_quote(q, sizeof q, t->bytes + t->off[256 + r], t->off[257 + r] - t->off[256 + r], 40));
            goto done;
        }
        t->merges[r] = (tok_merge){.left = pair[0], .right = pair[1]};
    }
    if ((rc = tok_index_merges(t, path, -1, 1, err, errlen))) goto done;
    t->eot = eot;
    *out = t;
    t = NULL;
done:
    free(t);
    free(file);
    return rc;
}

/* ---- the compact file ------------------------------------------------------------------------------- *
 * Little-endian; see docs/formats.md. Header (48 bytes), then the payload:
 *   0  char[8] "NGPT-TOK"     8 u32 version (1)      12 u32 header bytes (48)   16 u32 V   20 u32 M
 *  24  i32 eot id or -1      28 u32 0 (reserved)    32 u64 token bytes B
 *  40  u32 CRC-32 of the payload                    44 u32 CRC-32 of header bytes 0..43
 *  48  u32 length of each token (V), the token bytes (B), (u32 left, u32 right) per merge (M), then the
 *      whole-token flags, bit id % 8 of byte id / 8 (ceil(V / 8) bytes): saved because finding them
 *      takes a BPE of every token, most of the time of loading. */

/* The name a file is written through before a rename puts it in place: PATH.tmp.PID, beside it (one file system, so
 * the rename replaces the file whole) and per process (two trainers may prepare one folder at once); "" (no file
 * opens it) and -1 when it does not fit in cap bytes */
static int temporary_name(char *out, size_t cap, const char *path) {
    int n = snprintf(out, cap, "%s.tmp.%ld", path, (long)getpid());
    if (n >= 0 && (size_t)n < cap) return 0;
    if (cap) out[0] = 0;
    return -1;
}

/* Makes the renames and links into the folder of file path durable: the folder synced, best effort (a file system
 * may refuse a folder's fsync; the renames stand either way) */
static void sync_folder_of(const char *path) {
    char dir[4200];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

#define TOK_FILE_MAGIC "NGPT-TOK"
#define TOK_FILE_VERSION 1
#define TOK_FILE_HEADER 48

int ngpt_tokenizer_save(const ngpt_tokenizer *t, const char *path, char *err, size_t errlen) {
    size_t V, M, size, o, plen;
    unsigned char *buf, *p;
    char *tmp, target[PATH_MAX];
    const char *file;
    int fd, rc = NGPT_OK;
    if (!t || !path || !*path) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_save: %s", !t ? "the tokenizer is NULL" : "no path");
    if (save_target(path, "ngpt_tokenizer_save:", target, &file, err, errlen)) return NGPT_ERR_IO;
    V = (size_t)t->n_vocab;
    M = (size_t)t->n_merges;
    size = TOK_FILE_HEADER + 4 * V + t->n_bytes + 8 * M + (V + 7) / 8;
    buf = malloc(size);
    plen = strlen(file);
    tmp = malloc(plen + 32);
    if (!buf || !tmp) { free(buf); free(tmp); return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", path); }
    memset(buf, 0, TOK_FILE_HEADER);
    memcpy(buf, TOK_FILE_MAGIC, 8);
    tok_put_u32(buf + 8, TOK_FILE_VERSION);
    tok_put_u32(buf + 12, TOK_FILE_HEADER);
    tok_put_u32(buf + 16, (uint32_t)V);
    tok_put_u32(buf + 20, (uint32_t)M);
    tok_put_u32(buf + 24, (uint32_t)t->eot);
    tok_put_u32(buf + 32, (uint32_t)t->n_bytes);
    tok_put_u32(buf + 36, (uint32_t)((uint64_t)t->n_bytes >> 32));
    p = buf + TOK_FILE_HEADER;
    for (size_t id = 0; id < V; id++, p += 4) tok_put_u32(p, t->off[id + 1] - t->off[id]);
    memcpy(p, t->bytes, t->n_bytes);
    p += t->n_bytes;
    for (size_t r = 0; r < M; r++, p += 8) {
        tok_put_u32(p, (uint32_t)t->merges[r].left);
        tok_put_u32(p + 4, (uint32_t)t->merges[r].right);
    }
    memset(p, 0, (V + 7) / 8);
    for (size_t id = 0; id < V; id++) p[id / 8] |= (unsigned char)(t->whole[id] << (id % 8));
    tok_put_u32(buf + 40, tok_crc32(0, buf + TOK_FILE_HEADER, size - TOK_FILE_HEADER));
    tok_put_u32(buf + 44, tok_crc32(0, buf, 44));

    /* write next to the target, flush to disk, then rename over it: readers see the old or the new file */
    temporary_name(tmp, plen + 32, file);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { rc = fail(err, errlen, NGPT_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto done; }
    for (o = 0; o < size;) {
        ssize_t w = write(fd, buf + o, size - o);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = fail(err, errlen, NGPT_ERR_IO, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
            close(fd);
            remove(tmp);
            goto done;
        }
        o += (size_t)w;
    }
    if (fsync(fd) != 0) {
        rc = fail(err, errlen, NGPT_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        close(fd);
        remove(tmp);
        goto done;
    }
    if (close(fd) != 0) { rc = fail(err, errlen, NGPT_ERR_IO, "%s: close failed: %s", tmp, strerror(errno)); remove(tmp); goto done; }
    if (rename(tmp, file) != 0) { rc = fail(err, errlen, NGPT_ERR_IO, "%s: cannot rename to %s: %s", tmp, file, strerror(errno)); remove(tmp); goto done; }
    sync_folder_of(file);
done:
    free(buf);
    free(tmp);
    return rc;
}

int ngpt_tokenizer_load(const char *path, ngpt_tokenizer **out, char *err, size_t errlen) {
    unsigned char *buf = NULL;
    size_t n, V, M, need;
    uint64_t nb;
    uint32_t version, hdr;
    int32_t eot;
    ngpt_tokenizer *t = NULL;
    int rc;
    if (out) *out = NULL;
    if (!path || !out) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_tokenizer_load: %s is NULL", !path ? "path" : "out");
    if ((rc = tok_read_file(path, &buf, &n, err, errlen))) return rc;
    rc = NGPT_ERR_FORMAT;
    if (n < 12 || memcmp(buf, TOK_FILE_MAGIC, 8) != 0) {
        char q[64];
        fail(err, errlen, rc, "%s: not a nanogpt tokenizer file: it starts with %s, expected '%s' (make one with ngpt_tokenizer_save)",
                 path, tok_quote(q, sizeof q, buf, n < 8 ? n : 8, 8), TOK_FILE_MAGIC);
        goto done;
    }
    version = tok_get_u32(buf + 8);
    if (version != TOK_FILE_VERSION) {
        fail(err, errlen, rc, "%s: tokenizer file version %lu; this build reads version %d: re-create it from encoder.json and "
                 "vocab.bpe with this build", path, (unsigned long)version, TOK_FILE_VERSION);
        goto done;
    }
    if (n < TOK_FILE_HEADER) {
        fail(err, errlen, rc, "%s: truncated: %zu bytes, shorter than the %d-byte header", path, n, TOK_FILE_HEADER);
        goto done;
    }
    if (tok_get_u32(buf + 44) != tok_crc32(0, buf, 44)) {
        fail(err, errlen, rc, "%s: the header is corrupt (its CRC-32 is 0x%08lX, the header's bytes give 0x%08lX)", path,
                 (unsigned long)tok_get_u32(buf + 44), (unsigned long)tok_crc32(0, buf, 44));
        goto done;
    }
    hdr = tok_get_u32(buf + 12);
    V = tok_get_u32(buf + 16);
    M = tok_get_u32(buf + 20);
    eot = (int32_t)tok_get_u32(buf + 24);
    nb = (uint64_t)tok_get_u32(buf + 32) | (uint64_t)tok_get_u32(buf + 36) << 32;
    if (hdr != TOK_FILE_HEADER || V < 256 || V > TOK_MAX_VOCAB || M > TOK_MAX_VOCAB || nb > UINT32_MAX || eot < -1 ||
        eot >= (int32_t)V) {
        fail(err, errlen, rc, "%s: bad header: header bytes %lu (expected %d), %zu tokens (256..%d), %zu merges (0..%d), "
                 "%llu token bytes (< 4 GiB), end-of-text id %ld", path, (unsigned long)hdr, TOK_FILE_HEADER, V, TOK_MAX_VOCAB, M,
                 TOK_MAX_VOCAB, (unsigned long long)nb, (long)eot);
        goto done;
    }
    need = TOK_FILE_HEADER + 4 * V + (size_t)nb + 8 * M + (V + 7) / 8;
    if (n != need) {
        fail(err, errlen, rc, "%s: %s: the file has %zu bytes, its header says %zu", path, n < need ? "truncated" : "trailing bytes",
                 n, need);
        goto done;
    }
    if (tok_get_u32(buf + 40) != tok_crc32(0, buf + TOK_FILE_HEADER, n - TOK_FILE_HEADER)) {
        fail(err, errlen, rc, "%s: the contents are corrupt (CRC-32 mismatch over bytes %d..%zu)", path, TOK_FILE_HEADER, n);
        goto done;
    }
    t = tok_alloc((int32_t)V, (int32_t)M, (size_t)nb);
    if (!t) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of memory", path); goto done; }
    {
        const unsigned char *p = buf + TOK_FILE_HEADER;
        uint64_t o = 0;
        for (size_t id = 0; id < V; id++, p += 4) {
            t->off[id] = (uint32_t)o;
            o += tok_get_u32(p);
            if (o > nb) {
                fail(err, errlen, rc, "%s: token %zu ends at byte %llu of the token bytes, past their %llu", path, id,
                         (unsigned long long)o, (unsigned long long)nb);
                goto done;
            }
        }
        if (o != nb) {
            fail(err, errlen, rc, "%s: the token lengths add up to %llu bytes, the header says %llu", path, (unsigned long long)o,
                     (unsigned long long)nb);
            goto done;
        }
        t->off[V] = (uint32_t)o;
        memcpy(t->bytes, p, (size_t)nb);
        p += nb;
        for (size_t r = 0; r < M; r++, p += 8) {
            t->merges[r].left = (int32_t)tok_get_u32(p);
            t->merges[r].right = (int32_t)tok_get_u32(p + 4);
        }
        for (size_t id = 0; id < V; id++) t->whole[id] = (unsigned char)(p[id / 8] >> (id % 8) & 1);
        if (V % 8 && p[V / 8] >> (V % 8)) {
            fail(err, errlen, rc, "%s: the whole-token flags have bits set past token %zu", path, V - 1);
            goto done;
        }
    }
    if ((rc = tok_index_tokens(t, path, NULL, NULL, err, errlen)) || (rc = tok_index_merges(t, path, -1, 0, err, errlen)) ||
        (rc = tok_check_reachable(t, path, err, errlen)))
        goto done;
    t->eot = eot;
    *out = t;
    t = NULL;
done:
    free(t);
    free(buf);
    return rc;
}

#define MAX_NONFINITE_SKIPS 10 /* on_nonfinite = skip: more in a row than this halts */

/* ======================================================================================================
 * Trainer state and the model graph. The graph is written once, as calls to the backend; it knows
 * nothing of threads or grids, and the backends know nothing of the model.
 * ==================================================================================================== */

#define THREAD_TUNER_HISTORY 16
typedef struct {
    int enabled;
    int every;     /* steps to the first probe, and after each switch; doubled after each probe that loses, up to 16x */
    int gap, next; /* the current spacing, and the counter value of the next probe */
    int one;       /* 1: the calling thread alone now; 0: all the pool's threads */
    int counter;   /* steps since the tuner started */
    int n;         /* recent step times on the current setting, oldest first */
    double recent[THREAD_TUNER_HISTORY];
    int switches;
} ThreadTuner;

/* Pretrained weights left in their mapped file (the pretrained loaders, below) */
typedef struct Weights Weights;
static void weights_fill(const Weights *w, size_t first, size_t count, float *dst);
static int params_check_finite(const ModelShape *ms, const float *p, size_t first, size_t count, const char *file, char *err, size_t errlen);
static const char *weights_file(const Weights *w);
static void weights_close(Weights *w);

struct ngpt_trainer {
    ngpt_config cfg;
    ngpt_options opt;
    char err[NGPT_ERRLEN];
    ngpt_backend *be;
    ModelShape ms;
    Plan plan;
    /* the arenas and the views into them */
    char *dev, *host, *region;
    char *params, *grads, *m, *v;
    float *master; /* == params (as float) when the dtype is f32 */
    int32_t *h_tokens, *h_targets, *h_buckets, *h_counts; /* tokens, targets, buckets, losses: the host set in use */
    float *h_losses;
    int h_set;                  /* that set, 0 .. NGPT_FENCES-1 */
    int h_pending[NGPT_FENCES]; /* per set: token losses its fence will bring back (0: nothing queued) */
    void *h_staging;
    /* data */
    TokenSet train_data, val_data;
    CharVocab *charvocab; /* NULL unless the dataset has meta.bin */
    Rng rng_train;
    FILE *resume_file; /* open only while the trainer is being made */
    long long kept_steps[MAX_KEEP_CHECKPOINTS + 1]; /* ckpt_<step>.bin in out_dir, oldest first: the newest found at start, then each save */
    int n_kept;
    int jsonl_failed;  /* a line of out_dir/log.jsonl could not be written: said once */
    int out_dir_taken; /* out_dir held another run's checkpoints when this run (not a resume) was made: ngpt_train refuses */
    int in_train;      /* inside ngpt_train: a call of it from its own progress callback is refused */
    int resumed, resumed_step; /* made by init_from = resume, from the checkpoint of that step */
    long long known_from;      /* the oldest checkpoint step listed in out_dir at creation (-1: none was there) */
    int resumed_vocab_from_data; /* that checkpoint's run took its vocabulary from its data (stored vocab_size 0), the folder read now */
    int loaded_moment_bits;      /* the AdamW moments' precision in the run of the checkpoint loaded last: 32, 16, 0 (none, or not stored) */
    char data_changed[700];      /* where the batch being read held an id past the vocabulary ("": nowhere; sample_batch) */
    _Atomic int stop_requested;
    _Atomic int micro_left; /* a stop left the last micro-batch run_micro_batches started before its end (a lane saw it between layers) */
    int plan_only; /* set up to the plan, allocate nothing (ngpt_plan_arenas) */
    int weights_only; /* export: the parameters alone; the data folder's vocabulary is not read */
    Weights *pretrained; /* init_from = gpt2.. or a path: its weights, left in the file until they are in the arena */
    int nonfinite_run; /* consecutive steps skipped for a non-finite loss or gradient */
    int nonfinite_skipped; /* all such steps of this trainer (each counts toward max_iters, as a step torch's GradScaler skips does) */
    float loss_scale;  /* fp16: the dynamic loss scale (2^16 at start); 1 otherwise */
    int good_steps;    /* fp16: steps since the scale last changed (it doubles after 2000) */
    /* progress */
    int step;
    int eval_count; /* evaluations done; seeds the eval batches */
    float best_val_loss, last_loss, lr;
    double last_step_seconds;
    double last_step_tokens;
    double peak_flops; /* the backend's matmul FLOP/s measured at creation (ngpt_options.measure_peak); 0: not measured */
    int peak_raised;   /* a step beat peak_flops, which was said once and raised to it */
    int unlogged;      /* the last ngpt_train wrote no log.jsonl (eval_only into an out_dir it cannot write) */
    long long graph_steps; /* decoding steps run as a recorded graph (decode_step), since creation */
    ThreadTuner tune; /* CPU with threads = 0: all cores or one, whichever runs steps faster */
};

const char *ngpt_last_error(const ngpt_trainer *tr) { return tr ? tr->err : "no trainer"; }

/* ---- the CPU thread count, chosen by measured steps ----
 * On a shared or virtual machine a busy host can make every core but one slow, and then one thread runs a
 * step faster than all of them (docs/performance.md measured 64 ms on one thread against 150-210 ms on two
 * on such a host). With threads = 0 the trainer runs a probe step now and then on the other setting and switches
 * when that step beats the median of the recent ones by 15%. The results do not depend on the thread count
 * (the CPU backend's reductions never follow the threads), so switching changes the speed only. A probe that
 * loses doubles the spacing (50, 100, ... 800 steps): on a quiet 8-core machine (the most the tuner runs on)
 * a one-thread probe costs about 7 extra step times, about 8 of them in 5,000 steps, about 1% (estimated). */
static int thread_probe_wins(const double *recent, int n, double probe_seconds) {
    if (n < 5) return 0;
    double sorted[THREAD_TUNER_HISTORY];
    memcpy(sorted, recent, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++) /* insertion sort: at most 16 values */
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            double t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    return probe_seconds < 0.85 * median;
}

static int tr_fail(ngpt_trainer *tr, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int tr_fail(ngpt_trainer *tr, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tr->err, sizeof tr->err, fmt, ap);
    va_end(ap);
    return code;
}

static void tr_log(ngpt_trainer *tr, int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void tr_log(ngpt_trainer *tr, int level, const char *fmt, ...) {
    if (!tr->opt.log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tr->opt.log(tr->opt.ctx, level, line);
}

/* A backend failure becomes the trainer's error. */
static int be_check(ngpt_trainer *tr, const char *phase) {
    if (tr->be->status == NGPT_OK) return NGPT_OK;
    return tr_fail(tr, tr->be->status, "%s backend failed during %s: %s", tr->be->name, phase, tr->be->msg);
}

/* ---- views ---- */

static size_t act_size(const ngpt_trainer *tr) { return tr->plan.act_bytes; }

/* parameter (or gradient, when base is tr->grads) tensor i, layer l */
static void *pt(const ngpt_trainer *tr, char *base, int i, int l) {
    size_t per_layer = tr->plan.param_len[i] / (i == P_WTE || i == P_WPE || i >= P_LNFW ? 1 : (size_t)tr->ms.L);
    return base + (tr->plan.param_off[i] + (size_t)l * per_layer) * act_size(tr);
}
/* bias tensors are absent without bias */
static void *pt_bias(const ngpt_trainer *tr, char *base, int i, int l) {
    return tr->plan.param_len[i] ? pt(tr, base, i, l) : NULL;
}
/* layer l's slot of batch buffer b in lane g (the scratch is one for all lanes) */
static void *lane_slot(const ngpt_trainer *tr, const BatchLayout *lay, int g, int b, int l) {
    return tr->region + (b == B_SCRATCH ? 0 : (size_t)g * lay->lane_bytes) + lay->off[b] + (size_t)(l % lay->slots[b]) * lay->slot_bytes[b];
}
static void *slot(const ngpt_trainer *tr, const BatchLayout *lay, int b, int l) { return lane_slot(tr, lay, 0, b, l); }
/* hands the backend the scratch of a layout (training and evaluation place it differently) before a pass */
static void use_scratch(ngpt_trainer *tr, const BatchLayout *lay) {
    tr->be->set_scratch(tr->be, slot(tr, lay, B_SCRATCH, 0), lay->slot_bytes[B_SCRATCH]);
}
/* the attention backward's scratch: with backward_scratch, the logits chunk's slot and the scratch after it
 * (plan_scratch); the stream orders the classifier's last use of the logits before anything written there */
static void use_backward_scratch(ngpt_trainer *tr, const BatchLayout *lay) {
    if (lay->backward_scratch) tr->be->set_scratch(tr->be, slot(tr, lay, B_LOGITS, 0), lay->backward_scratch);
    else use_scratch(tr, lay);
}

/* One lane of a micro-batch: its sequences, its buffers, its gradients (lane 0 accumulates into tr->grads,
 * the others into their own copies, added to it once the step's micro-batches are done). */
typedef struct {
    const BatchLayout *lay;
    int g;                 /* lane index: which copy of the batch buffers */
    int B;                 /* its sequences */
    long long seq0;        /* the first one's place among the step's sequences (dropout masks) */
    char *grads;
    int nbuckets;          /* token buckets of its positions (embedding backward) */
} Lane;
static void *lslot(const ngpt_trainer *tr, const Lane *ln, int b, int l) { return lane_slot(tr, ln->lay, ln->g, b, l); }
static float *lslot_f(const ngpt_trainer *tr, const Lane *ln, int b, int l) { return (float *)lslot(tr, ln, b, l); }
/* row r of an act tensor with `width` columns */
static void *rows(const ngpt_trainer *tr, void *base, size_t r, size_t width) { return (char *)base + r * width * act_size(tr); }

enum { DROP_EMBED, DROP_ATTN, DROP_ATTN_RESID, DROP_MLP_RESID };

/* The dropout of one site for the sequences of a lane; off outside training. The masks of a step are indexed
 * by the sequence's place in the whole step, so any split in micro-batches and lanes gives the same. */
static ngpt_dropout drop_site(const ngpt_trainer *tr, int training, const Lane *ln, int layer, int site) {
    ngpt_dropout d = {0, 0, 0, 0};
    if (!training || tr->cfg.dropout <= 0) return d;
    uint64_t T = (uint64_t)tr->plan.req.T, seq0 = (uint64_t)ln->seq0;
    d.p = (float)tr->cfg.dropout;
    d.seed = (uint64_t)tr->cfg.seed;
    d.stream = ((uint64_t)tr->step << 24) ^ ((uint64_t)layer << 4) ^ (uint64_t)site ^ 0x5A5A000000000000ull;
    d.offset = site == DROP_ATTN ? seq0 * (uint64_t)tr->ms.NH * T * T : seq0 * T * (uint64_t)tr->ms.C;
    return d;
}

/* A block's projection back into the residual stream: out = res + dropout(inp . w^T + bias), through tmp
 * (N x OC); one fused op where the backend has it and there is no dropout (the same bits either way). */
static void matmul_dropout_residual(ngpt_backend *be, void *out, const void *res, void *tmp, const void *inp, const void *w, const void *bias,
                                    int N, int C, int OC, const ngpt_dropout *d) {
    if (be->matmul_forward_residual && d->p <= 0) {
        be->matmul_forward_residual(be, out, inp, w, bias, res, N, C, OC);
        return;
    }
    be->matmul_forward(be, tmp, inp, w, bias, N, C, OC);
    if (d->p > 0) be->dropout(be, tmp, tmp, (size_t)N * OC, d);
    be->residual_forward(be, out, res, tmp, (size_t)N * OC);
}

/* pre = inp . w^T + bias, act = gelu(pre): one fused op where the backend has it (the same bits either way) */
static void matmul_gelu(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    if (be->matmul_forward_gelu) {
        be->matmul_forward_gelu(be, pre, act, inp, w, bias, N, C, OC);
        return;
    }
    be->matmul_forward(be, pre, inp, w, bias, N, C, OC);
    be->gelu_forward(be, act, pre, (size_t)N * OC);
}

/* ln = layernorm(inp) (mean and rstd kept), then out = ln . w^T + bias, or with act matmul_gelu's pre (out) and act;
 * one fused op where the backend has it (the same bits; mean, rstd and ln are then not written). Decoding's
 * alone: the training step keeps mean, rstd and ln for its backward. */
static void layernorm_matmul(ngpt_backend *be, void *out, void *act, void *ln, float *mean, float *rstd, const void *inp, const void *ln_w,
                             const void *ln_b, const void *w, const void *bias, int N, int C, int OC) {
    if (be->layernorm_matmul_forward && (!act || be->matmul_forward_gelu)) { /* NGPT_FUSE_GELU=0: GELU apart, as in the step */
        be->layernorm_matmul_forward(be, out, act, ln, inp, ln_w, ln_b, w, bias, N, C, OC);
        return;
    }
    be->layernorm_forward(be, ln, mean, rstd, inp, ln_w, ln_b, N, C);
    if (act) matmul_gelu(be, out, act, ln, w, bias, N, C, OC);
    else be->matmul_forward(be, out, ln, w, bias, N, C, OC);
}

/* ---- one block's forward over the sequences of one lane: from the residual stream res[l] to res[l + 1],
 * keeping in layer l's slots what the backward needs. The backward of a plan that recomputes whole layers runs
 * it again (backward = 1: no MLP projection, whose output res[l + 1] is kept and is not needed to go back
 * through the block) into the one layer's slots that plan has; the same inputs, dropout masks and kernels give
 * the same bits. ---- */
static void layer_forward(ngpt_trainer *tr, const Lane *ln, int l, int training, int backward) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int B = ln->B, T = tr->plan.req.T, C = m->C, NH = m->NH;
    int N = B * T;
    char *P = tr->params;
    void *res = lslot(tr, ln, B_RES, l), *res_out = lslot(tr, ln, B_RES, l + 1);
    void *res_mid = lslot(tr, ln, B_RES_MID, l);
    void *ln1 = lslot(tr, ln, B_LN1, l), *ln2 = lslot(tr, ln, B_LN2, l);
    float *ln1s = lslot_f(tr, ln, B_LN1_STATS, l), *ln2s = lslot_f(tr, ln, B_LN2_STATS, l);
    void *qkv = lslot(tr, ln, B_QKV, l), *atty = lslot(tr, ln, B_ATTY, l), *fch = lslot(tr, ln, B_FCH, l);
    void *gelu = lslot(tr, ln, B_GELU, l), *tmp = lslot(tr, ln, B_TMP, 0);
    float *lse = lslot_f(tr, ln, B_LSE, l);
    be->layernorm_forward(be, ln1, ln1s, ln1s + N, res, pt(tr, P, P_LN1W, l), pt_bias(tr, P, P_LN1B, l), N, C);
    be->matmul_forward(be, qkv, ln1, pt(tr, P, P_QKVW, l), pt_bias(tr, P, P_QKVB, l), N, C, 3 * C);
    ngpt_dropout d = drop_site(tr, training, ln, l, DROP_ATTN);
    be->attention_forward(be, atty, lse, qkv, B, T, C, NH, &d);
    d = drop_site(tr, training, ln, l, DROP_ATTN_RESID);
    matmul_dropout_residual(be, res_mid, res, tmp, atty, pt(tr, P, P_ATTPROJW, l), pt_bias(tr, P, P_ATTPROJB, l), N, C, C, &d);
    be->layernorm_forward(be, ln2, ln2s, ln2s + N, res_mid, pt(tr, P, P_LN2W, l), pt_bias(tr, P, P_LN2B, l), N, C);
    matmul_gelu(be, fch, gelu, ln2, pt(tr, P, P_FCW, l), pt_bias(tr, P, P_FCB, l), N, C, 4 * C);
    if (backward) return;
    d = drop_site(tr, training, ln, l, DROP_MLP_RESID);
    matmul_dropout_residual(be, res_out, res_mid, tmp, gelu, pt(tr, P, P_FCPROJW, l), pt_bias(tr, P, P_FCPROJB, l), N, 4 * C, C, &d);
}

/* whether a stop (NULL: none may leave this micro-batch) is requested */
static int stop_now(_Atomic int *stop) { return stop && atomic_load(stop); }

/* ---- forward: embeddings, L blocks, final LayerNorm, over the sequences of one lane; with stop set between
 * two blocks, left there (returns 0; 1 when whole) ---- */
static int graph_forward(ngpt_trainer *tr, const Lane *ln, int training, _Atomic int *stop) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int B = ln->B, T = tr->plan.req.T, C = m->C, L = m->L;
    int N = B * T;
    char *P = tr->params;
    const int32_t *tokens = (const int32_t *)lslot(tr, ln, B_TOKENS, 0);
    void *res0 = lslot(tr, ln, B_RES, 0);
    be->encoder_forward(be, res0, tokens, pt(tr, P, P_WTE, 0), pt(tr, P, P_WPE, 0), B, T, C);
    ngpt_dropout d = drop_site(tr, training, ln, L, DROP_EMBED);
    if (d.p > 0) be->dropout(be, res0, res0, (size_t)N * C, &d);
    for (int l = 0; l < L; l++) {
        if (stop_now(stop)) return 0;
        layer_forward(tr, ln, l, training, 0);
    }
    float *lnfs = lslot_f(tr, ln, B_LNF_STATS, 0);
    be->layernorm_forward(be, lslot(tr, ln, B_LNF, 0), lnfs, lnfs + N, lslot(tr, ln, B_RES, L), pt(tr, P, P_LNFW, 0),
                          pt_bias(tr, P, P_LNFB, 0), N, C);
    return 1;
}

/* ---- the classifier over chunks of rows: logits = lnf . wte^T, softmax cross-entropy; when dscale != 0
 * the gradient goes straight back through the chunk: dlnf rows into B_TMP and dwte += . Never more than
 * one chunk of logits exists. Per-token losses land in B_LOSSES. With stop set between two chunks, left there
 * (returns 0; 1 when whole) ---- */
static int graph_classifier(ngpt_trainer *tr, const Lane *ln, int chunk, float dscale, _Atomic int *stop) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int N = ln->B * tr->plan.req.T, C = m->C;
    void *lnf = lslot(tr, ln, B_LNF, 0), *logits = lslot(tr, ln, B_LOGITS, 0), *dlnf = lslot(tr, ln, B_TMP, 0);
    float *losses = lslot_f(tr, ln, B_LOSSES, 0);
    const int32_t *targets = (const int32_t *)lslot(tr, ln, B_TARGETS, 0);
    void *wte = pt(tr, tr->params, P_WTE, 0), *dwte = pt(tr, ln->grads, P_WTE, 0);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        if (stop_now(stop)) return 0;
        int n = MIN(chunk, N - r0);
        void *x = rows(tr, lnf, (size_t)r0, (size_t)C);
        be->matmul_forward(be, logits, x, wte, NULL, n, C, m->Vp);
        be->crossentropy(be, logits, losses + r0, targets + r0, n, m->V, m->Vp, dscale);
        if (dscale != 0) be->matmul_backward(be, rows(tr, dlnf, (size_t)r0, (size_t)C), dwte, NULL, logits, x, wte, n, C, m->Vp);
    }
    return 1;
}

/* ---- backward: from dlnf (in B_TMP) to every parameter gradient (accumulated); with stop set between two
 * blocks, left there, the gradients part-made (returns 0; 1 when whole) ---- */
static int graph_backward(ngpt_trainer *tr, const Lane *ln, _Atomic int *stop) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int B = ln->B, T = tr->plan.req.T, C = m->C, NH = m->NH, L = m->L;
    int N = B * T;
    size_t NC = (size_t)N * C;
    char *P = tr->params, *G = ln->grads;
    void *tmp = lslot(tr, ln, B_TMP, 0), *dres = lslot(tr, ln, B_DRES, 0);
    void *dbig = lslot(tr, ln, B_DBIG, 0), *datt = lslot(tr, ln, B_DATT, 0);
    float *lnfs = lslot_f(tr, ln, B_LNF_STATS, 0);
    be->zero(be, dres, NC * act_size(tr));
    be->layernorm_backward(be, dres, pt(tr, G, P_LNFW, 0), pt_bias(tr, G, P_LNFB, 0), tmp, lslot(tr, ln, B_RES, L),
                           pt(tr, P, P_LNFW, 0), lnfs, lnfs + N, N, C);
    for (int l = L - 1; l >= 0; l--) {
        if (stop_now(stop)) return 0;
        void *res = lslot(tr, ln, B_RES, l), *res_mid = lslot(tr, ln, B_RES_MID, l);
        void *ln1 = lslot(tr, ln, B_LN1, l), *ln2 = lslot(tr, ln, B_LN2, l);
        float *ln1s = lslot_f(tr, ln, B_LN1_STATS, l), *ln2s = lslot_f(tr, ln, B_LN2_STATS, l);
        void *qkv = lslot(tr, ln, B_QKV, l), *atty = lslot(tr, ln, B_ATTY, l), *fch = lslot(tr, ln, B_FCH, l);
        void *gelu = lslot(tr, ln, B_GELU, l);
        float *lse = lslot_f(tr, ln, B_LSE, l);
        /* recompute what the plan chose not to keep */
        if (tr->plan.recompute >= RECOMPUTE_LAYERS) {
            if (l < L - 1) layer_forward(tr, ln, l, 1, 1); /* the last layer's are still there from the forward */
        } else if (tr->plan.recompute >= RECOMPUTE_GELU_LN) {
            be->layernorm_forward(be, ln1, ln1s, ln1s + N, res, pt(tr, P, P_LN1W, l), pt_bias(tr, P, P_LN1B, l), N, C);
            be->layernorm_forward(be, ln2, ln2s, ln2s + N, res_mid, pt(tr, P, P_LN2W, l), pt_bias(tr, P, P_LN2B, l), N, C);
        }
        if (tr->plan.recompute >= RECOMPUTE_GELU && tr->plan.recompute < RECOMPUTE_LAYERS) be->gelu_forward(be, gelu, fch, 4 * NC);
        /* MLP: res_out = res_mid + drop(gelu(ln2 . fcw^T) . fcprojw^T) */
        ngpt_dropout d = drop_site(tr, 1, ln, l, DROP_MLP_RESID);
        const void *dproj = dres;
        if (d.p > 0) { be->dropout(be, tmp, dres, NC, &d); dproj = tmp; }
        if (be->matmul_backward_gelu) {
            be->matmul_backward_gelu(be, dbig, pt(tr, G, P_FCPROJW, l), pt_bias(tr, G, P_FCPROJB, l), dproj, gelu, pt(tr, P, P_FCPROJW, l), fch,
                                     N, 4 * C, C);
        } else {
            be->matmul_backward(be, dbig, pt(tr, G, P_FCPROJW, l), pt_bias(tr, G, P_FCPROJB, l), dproj, gelu, pt(tr, P, P_FCPROJW, l), N, 4 * C, C);
            be->gelu_backward(be, dbig, fch, dbig, 4 * NC);
        }
        be->matmul_backward(be, tmp, pt(tr, G, P_FCW, l), pt_bias(tr, G, P_FCB, l), dbig, ln2, pt(tr, P, P_FCW, l), N, C, 4 * C);
        be->layernorm_backward(be, dres, pt(tr, G, P_LN2W, l), pt_bias(tr, G, P_LN2B, l), tmp, res_mid, pt(tr, P, P_LN2W, l), ln2s, ln2s + N, N, C);
        /* attention: res_mid = res + drop(attention(ln1 . qkvw^T) . attprojw^T) */
        d = drop_site(tr, 1, ln, l, DROP_ATTN_RESID);
        dproj = dres;
        if (d.p > 0) { be->dropout(be, tmp, dres, NC, &d); dproj = tmp; }
        be->matmul_backward(be, datt, pt(tr, G, P_ATTPROJW, l), pt_bias(tr, G, P_ATTPROJB, l), dproj, atty, pt(tr, P, P_ATTPROJW, l), N, C, C);
        d = drop_site(tr, 1, ln, l, DROP_ATTN);
        /* the logits chunk's bytes too (one lane: nothing runs beside it), for this op alone: every other op sees
         * the scratch the forward saw, so a recomputed layer splits its products as the forward did */
        if (ln->lay->backward_scratch) use_backward_scratch(tr, ln->lay);
        be->attention_backward(be, dbig, datt, qkv, atty, lse, B, T, C, NH, &d);
        if (ln->lay->backward_scratch) use_scratch(tr, ln->lay);
        be->matmul_backward(be, tmp, pt(tr, G, P_QKVW, l), pt_bias(tr, G, P_QKVB, l), dbig, ln1, pt(tr, P, P_QKVW, l), N, C, 3 * C);
        be->layernorm_backward(be, dres, pt(tr, G, P_LN1W, l), pt_bias(tr, G, P_LN1B, l), tmp, res, pt(tr, P, P_LN1W, l), ln1s, ln1s + N, N, C);
    }
    ngpt_dropout d = drop_site(tr, 1, ln, L, DROP_EMBED);
    if (d.p > 0) be->dropout(be, dres, dres, NC, &d);
    const int32_t *buckets = (const int32_t *)lslot(tr, ln, B_BUCKETS, 0);
    be->encoder_backward(be, pt(tr, G, P_WTE, 0), pt(tr, G, P_WPE, 0), dres, (const int32_t *)lslot(tr, ln, B_TOKENS, 0), buckets,
                         buckets + N + 1, ln->nbuckets, B, T, C);
    return 1;
}

/* The host buffers of micro-batch set j (tokens, targets, buckets, losses): NGPT_FENCES sets, so that the host
 * prepares one micro-batch while the device runs the previous one. */
static char *host_set_buffer(ngpt_trainer *tr, int buf, int j) {
    const Plan *p = &tr->plan;
    return tr->host + p->host_off[buf] + (size_t)j * (p->host_bytes_of[buf] / NGPT_FENCES);
}
static void host_set_use(ngpt_trainer *tr, int j) {
    tr->h_set = j;
    tr->h_tokens = (int32_t *)host_set_buffer(tr, H_TOKENS, j);
    tr->h_targets = (int32_t *)host_set_buffer(tr, H_TARGETS, j);
    tr->h_buckets = (int32_t *)host_set_buffer(tr, H_BUCKETS, j);
    tr->h_losses = (float *)host_set_buffer(tr, H_LOSSES, j);
}

/* ---- micro-batches: tokens and targets in a host set (h_tokens, h_targets), uploaded, run, losses read back ---- */

/* Groups the N positions of tok by token id for the deterministic embedding backward:
 * out = [bucket starts (nb + 1) ... | positions (N) from index N + 1]; returns nb. h_counts is all zero
 * before and after. */
static int bucketize(ngpt_trainer *tr, const int32_t *tok, int N, int32_t *out) {
    int32_t *start = out, *pos = out + N + 1, *cnt = tr->h_counts;
    for (int i = 0; i < N; i++) cnt[tok[i]]++;
    int nb = 0, next = 0;
    for (int i = 0; i < N; i++) {
        int32_t *c = &cnt[tok[i]];
        if (*c > 0) { /* first sight: claim a range, then count down negative write positions */
            start[nb++] = next;
            int w = next;
            next += *c;
            *c = -(w + 1);
        }
        int w = -*c - 1;
        pos[w] = i;
        *c = -(w + 2);
    }
    start[nb] = N;
    for (int i = 0; i < N; i++) cnt[tok[i]] = 0;
    return nb;
}

/* Waits for the micro-batch that last used host set j (its uploads and its loss readback) and adds its token
 * losses to *sum; nothing to wait for when the set is idle. */
static void host_set_drain(ngpt_trainer *tr, int j, double *sum) {
    int n = tr->h_pending[j];
    if (!n) return;
    tr->be->fence_wait(tr->be, j);
    const float *losses = (const float *)host_set_buffer(tr, H_LOSSES, j);
    for (int i = 0; i < n; i++) *sum += losses[i];
    tr->h_pending[j] = 0;
}

/* the gradients lane g accumulates into: lane 0 in tr->grads, the others in copies of its size after it */
static char *lane_grads(const ngpt_trainer *tr, int g) {
    const Plan *p = &tr->plan;
    return tr->grads + (size_t)g * (p->off_lane_grads - p->off_grads);
}

typedef struct {
    ngpt_trainer *tr;
    int training, chunk;
    float dscale;
    _Atomic int *stop; /* set, it leaves the micro-batch between two blocks or two logits chunks (NULL: it runs whole) */
    Lane lane[CPU_LANES];
} MicroBatch;

static void run_lane(void *ctx, int g) {
    const MicroBatch *mb = (const MicroBatch *)ctx;
    const Lane *ln = &mb->lane[g];
    if (!ln->B) return;
    int whole = graph_forward(mb->tr, ln, mb->training, mb->stop) &&
                graph_classifier(mb->tr, ln, mb->chunk, mb->training ? mb->dscale : 0.0f, mb->stop) &&
                (!mb->training || graph_backward(mb->tr, ln, mb->stop));
    if (!whole) atomic_store(&mb->tr->micro_left, 1);
}

/* Queues the forward (and backward when training) of the B sequences in the host set in use, lane g taking
 * sequences [g lane_B, (g + 1) lane_B); the losses come back to the set by an asynchronous copy, behind the
 * set's fence. With stop (NULL, or a flag) set while it is queued, it is left part-done and tr->micro_left says so
 * (on the CPU, which runs each op as it is queued, a micro-batch of GPT-2 124M takes minutes). */
static void enqueue_micro_batch(ngpt_trainer *tr, const BatchLayout *lay, int B, int training, int micro, float dscale, _Atomic int *stop) {
    ngpt_backend *be = tr->be;
    int T = tr->plan.req.T;
    MicroBatch mb = {tr, training, training ? tr->plan.logits_chunk : tr->plan.eval_chunk, dscale, stop, {{0}}};
    for (int g = 0; g < lay->lanes; g++) {
        Lane *ln = &mb.lane[g];
        int first = MIN(B, g * lay->lane_B);
        *ln = (Lane){lay, g, MIN(lay->lane_B, B - first), (long long)micro * B + first, lane_grads(tr, g), 0};
        size_t N = (size_t)ln->B * T, at = (size_t)first * T;
        if (!N) continue;
        be->upload(be, lslot(tr, ln, B_TOKENS, 0), tr->h_tokens + at, N * 4);
        be->upload(be, lslot(tr, ln, B_TARGETS, 0), tr->h_targets + at, N * 4);
        if (training) {
            int32_t *hb = tr->h_buckets + (size_t)g * (2 * (size_t)lay->lane_B * T + 2);
            ln->nbuckets = bucketize(tr, tr->h_tokens + at, (int)N, hb);
            be->upload(be, lslot(tr, ln, B_BUCKETS, 0), hb, (2 * N + 1) * 4);
        }
    }
    if (lay->lanes > 1 && be->run_lanes) be->run_lanes(be, lay->lanes, run_lane, &mb);
    else
        for (int g = 0; g < lay->lanes; g++) run_lane(&mb, g);
    for (int g = 0; g < lay->lanes; g++) {
        const Lane *ln = &mb.lane[g];
        if (ln->B) be->download_async(be, tr->h_losses + (size_t)g * lay->lane_B * T, lslot(tr, ln, B_LOSSES, 0), (size_t)ln->B * T * 4);
    }
    be->fence_record(be, tr->h_set);
    tr->h_pending[tr->h_set] = B * T;
}

/* Runs a sequence of micro-batches with NGPT_FENCES of them in flight: fill(k) writes micro-batch k into the
 * host set in use, once the micro-batch that used that set before has completed. Returns the sum of the
 * token losses, added in micro-batch order. With stop (NULL, or a flag another thread or a signal handler
 * may set), no micro-batch starts once it is set, and the one running is left between two blocks, except that
 * a training step past its half runs to its end (stop_leaves_step); *ran (NULL, or where to put it) gets how
 * many ran whole, and tr->micro_left whether one after them was left part-done. */
typedef void (*micro_fill_fn)(ngpt_trainer *tr, int k, void *ctx, int *B);
/* A stop requested while a training step runs, met before its micro-batch k of count: the step is left there
 * (dropped: the run saves the step before it, and a resume runs this one again) while no more than half of it
 * has run, else it runs to its end, so a stop waits for at most half a step and wastes at most half a step (on
 * the CPU, GPT-2 124M's step of 40 micro-batches takes the better part of an hour) */
static int stop_leaves_step(int k, int count) { return 2 * (long long)k <= count; }
static double run_micro_batches(ngpt_trainer *tr, const BatchLayout *lay, int count, int training, float dscale, micro_fill_fn fill,
                                void *ctx, _Atomic int *stop, int *ran) {
    double sum = 0;
    int k = 0;
    atomic_store(&tr->micro_left, 0);
    for (; k < count && !atomic_load(&tr->micro_left) && !(stop_now(stop) && (!training || stop_leaves_step(k, count))); k++) {
        int j = k % NGPT_FENCES, B = 0;
        host_set_drain(tr, j, &sum);
        host_set_use(tr, j);
        fill(tr, k, ctx, &B);
        enqueue_micro_batch(tr, lay, B, training, training ? k : 0, dscale, !training || stop_leaves_step(k, count) ? stop : NULL);
    }
    if (ran) *ran = k - atomic_load(&tr->micro_left); /* a micro-batch left part-done did not run */
    for (int d = k; d < k + NGPT_FENCES; d++) host_set_drain(tr, d % NGPT_FENCES, &sum);
    return sum;
}

/* nanoGPT's get_batch: B random windows of T + 1 tokens into h_tokens / h_targets */
/* B windows of set into the host batch. The files were checked when opened, but they are mapped: one written over
 * in place since (nanoGPT's prepare.py, a `>` redirect, dd) shows its new bytes here. An id past the vocabulary
 * goes in as 0, which keeps every read of the model's tables in bounds, and tr->data_changed says where it was: the
 * step or evaluation that read it fails before it changes anything (data_changed_error). */
static void sample_batch(ngpt_trainer *tr, const TokenSet *set, Rng *rng, int B) {
    int T = tr->plan.req.T;
    const unsigned ids = (unsigned)set->ids;
    for (int b = 0; b < B; b++) {
        const TokenFile *file;
        const uint16_t *w = tokenset_window(set, (size_t)rng_below(rng, set->windows), &file);
        int32_t *tokens = tr->h_tokens + (size_t)b * T, *targets = tr->h_targets + (size_t)b * T;
        unsigned bad = 0;
        for (int t = 0; t < T; t++) { /* the values copied are the ones checked: the file may change between two reads */
            tokens[t] = w[t];
            targets[t] = w[t + 1];
            bad |= ((unsigned)tokens[t] >= ids) | ((unsigned)targets[t] >= ids);
        }
        for (int t = 0; bad && t < T; t++)
            for (int k = 0; k < 2; k++) {
                int32_t *id = k ? &targets[t] : &tokens[t]; /* token t + k of the window */
                if ((unsigned)*id < ids) continue;
                if (!tr->data_changed[0])
                    snprintf(tr->data_changed, sizeof tr->data_changed, "%s: token id %d at byte offset %zu is out of range (0..%d)", file->path,
                             (int)*id, (size_t)((const char *)(w + t + k) - (const char *)file->map), set->ids - 1);
                *id = 0;
            }
    }
}

/* The failure of a step or an evaluation that read an id past the vocabulary (sample_batch): nothing was updated. */
static int data_changed_error(ngpt_trainer *tr, const char *what) {
    return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s, which was in range when training opened the file: it was written over since, in place "
                   "(nanoGPT's prepare.py, a redirect, dd). The %s changed nothing and no checkpoint was saved; prepare the data into "
                   "another folder (nanogpt prepare writes new files and renames them into place), then resume", what, tr->data_changed, what);
}

/* ======================================================================================================
 * Optimizer: nanoGPT's learning-rate schedule, global-norm clipping, AdamW (decay on 2-D weights only).
 * ==================================================================================================== */

static float lr_at(const ngpt_config *c, int it) {
    if (!c->decay_lr) return (float)c->learning_rate;
    if (it < c->warmup_iters) return (float)(c->learning_rate * (it + 1) / (c->warmup_iters + 1));
    if (it > c->lr_decay_iters || c->lr_decay_iters == c->warmup_iters) return (float)c->min_lr;
    double ratio = (double)(it - c->warmup_iters) / (double)(c->lr_decay_iters - c->warmup_iters);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(c->min_lr + coeff * (c->learning_rate - c->min_lr));
}

/* element i of tensor p in a block of elements of esize bytes */
static void *tensor_at(const ngpt_trainer *tr, void *base, int p, size_t esize) {
    return (char *)base + tr->plan.param_off[p] * esize;
}

/* The global gradient norm (waits for it). */
static double grad_norm(ngpt_trainer *tr) { return sqrt(tr->be->norm_sq(tr->be, tr->grads, tr->plan.nparams_padded)); }

/* The stream of bf16 moments' stochastic rounding (ngpt_adamw) for one tensor at one step: its own for each pair
 * (steps below 2^40, tensors below 256), and a function of the step alone, so a resume rounds as the run did */
static uint64_t adamw_round_stream(long long step, int tensor) {
    return ((uint64_t)step << 8) ^ (uint64_t)tensor ^ 0xA5A5000000000000ull;
}

/* Clips to grad_clip given the (unscaled) gradient norm and applies AdamW with learning rate lr to every
 * tensor; the loss scale is divided out on the way. */
static void optimizer_step(ngpt_trainer *tr, float lr, double norm) {
    ngpt_backend *be = tr->be;
    const ngpt_config *c = &tr->cfg;
    float scale = 1.0f / tr->loss_scale;
    if (c->grad_clip > 0 && norm > c->grad_clip) scale = (float)(c->grad_clip / (norm + 1e-6)) / tr->loss_scale;
    size_t mb = tr->plan.moment_bytes;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        if (!tr->plan.param_len[i]) continue;
        double t = tr->step + 1;
        ngpt_adamw h = {lr, (float)c->beta1, (float)c->beta2, (float)(1.0 - c->beta1), (float)(1.0 - c->beta2),
                        (float)(1.0 - pow(c->beta1, t)), (float)(1.0 - pow(c->beta2, t)), 1e-8f,
                        param_decays(i) ? (float)c->weight_decay : 0.0f, scale, tr->plan.moments_dtype,
                        (uint64_t)c->seed, adamw_round_stream(tr->step, i)};
        float *master = tr->plan.req.dtype == NGPT_DTYPE_F32 ? NULL : (float *)tensor_at(tr, tr->master, i, 4);
        be->adamw(be, pt(tr, tr->params, i, 0), master, pt(tr, tr->grads, i, 0), tensor_at(tr, tr->m, i, mb),
                  tensor_at(tr, tr->v, i, mb), tr->plan.param_len[i], &h);
    }
}

/* A max_memory above what there is (what: "free on the GPU"): a cap, not a raise, into buf */
static const char *max_memory_above_note(double max_memory, double there, const char *what, char *buf, size_t cap) {
    char a[32], b[32];
    snprintf(buf, cap, "max_memory = %s is more than the %s %s: the plan keeps within those (max_memory only lowers the budget)",
             fmt_bytes(a, sizeof a, max_memory), fmt_bytes(b, sizeof b, there), what);
    return buf;
}

/* ======================================================================================================
 * Trainer: create (device, data, plan, the one allocation, init), step, evaluate, the nanoGPT loop.
 * ==================================================================================================== */

/* The bytes of the MemAvailable line of a /proc/meminfo read into f; 0 when there is none (before Linux 3.14) */
static double meminfo_available(FILE *f) {
    char line[128];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    return (double)kib * 1024.0;
}

/* 90% of the memory available: Linux's MemAvailable, which counts the page cache the kernel gives back when
 * asked (free memory alone, _SC_AVPHYS_PAGES, leaves out a machine's cached files), else the free pages */
static double host_budget(double meminfo_bytes, long free_pages, long page_size) {
    if (meminfo_bytes > 0) return 0.9 * meminfo_bytes;
    if (free_pages <= 0 || page_size <= 0) return 4.0 * GiB; /* nothing to ask: a guess a run can override (max_memory) */
    return 0.9 * (double)free_pages * (double)page_size;
}
/* ... and no more than 90% of what this process's cgroups' memory limit leaves it (into *limited, if not NULL, whether
 * that is what bounds it) */
static double host_memory_available_why(int *limited) {
    FILE *f = fopen("/proc/meminfo", "r");
    double avail = meminfo_available(f);
    if (f) fclose(f);
    double budget = host_budget(avail, avail > 0 ? 0 : sysconf(_SC_AVPHYS_PAGES), sysconf(_SC_PAGESIZE));
    char text[4096];
    double left = cgroup_memory_left("/sys/fs/cgroup", own_cgroups(text, sizeof text));
    if (limited) *limited = left >= 0 && 0.9 * left < budget;
    return left >= 0 && 0.9 * left < budget ? 0.9 * left : budget;
}
static double host_memory_available(void) { return host_memory_available_why(NULL); }

/* Copies n act-dtype values from the device to host floats, through the staging buffer. */
static void download_as_f32(ngpt_trainer *tr, float *dst, const void *src, size_t n) {
    ngpt_backend *be = tr->be;
    size_t es = act_size(tr), per = HOST_STAGING_BYTES / es;
    for (size_t i = 0; i < n; i += per) {
        size_t k = MIN(per, n - i);
        be->download(be, tr->h_staging, (const char *)src + i * es, k * es);
        const uint16_t *h = (const uint16_t *)tr->h_staging;
        for (size_t j = 0; j < k; j++)
            dst[i + j] = es == 4 ? ((const float *)tr->h_staging)[j]
                       : be->dtype == NGPT_DTYPE_BF16 ? bf16_to_f32(h[j]) : f16_to_f32(h[j]);
    }
}

/* A sampling plan keeps no fp32 master copy of the parameters: fp32 values (a checkpoint, pretrained weights)
 * reach the parameters through a window at the start of the batch region, free while nothing runs, a chunk at
 * a time, cast on the way. The window's capacity in floats; 0 when the parameters have their master. */
static size_t param_window_floats(const ngpt_trainer *tr) {
    return tr->plan.req.inference ? MIN(tr->plan.region_bytes, HOST_STAGING_BYTES) / 4 : 0;
}

/* c fp32 values on the host into tensor i from element j: into the master (the caller casts the tensor to
 * the parameters afterwards), or through the window straight into the parameters. Waits, so that the host
 * buffer can be refilled. */
static void upload_param_chunk(ngpt_trainer *tr, int i, size_t j, const float *host, size_t c) {
    ngpt_backend *be = tr->be;
    if (param_window_floats(tr)) {
        float *window = (float *)tr->region;
        be->upload(be, window, host, c * 4);
        be->cast_from_f32(be, (char *)pt(tr, tr->params, i, 0) + j * act_size(tr), window, c);
    } else {
        be->upload(be, (float *)tensor_at(tr, tr->master, i, 4) + j, host, c * 4);
    }
    be->sync(be);
}

/* The parameters from their fp32 master once upload_param_chunk has filled it (through the window they are
 * already set) */
static void params_from_master(ngpt_trainer *tr) {
    if (param_window_floats(tr)) return;
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        tr->be->cast_from_f32(tr->be, pt(tr, tr->params, i, 0), (float *)tensor_at(tr, tr->master, i, 4), tr->plan.param_len[i]);
}

/* The parameters' fp32 values (the master, or the parameters widened) to host floats, in packed order. */
CLI_USED static void copy_master_out(ngpt_trainer *tr, float *dst) {
    size_t k = 0, per = HOST_STAGING_BYTES / 4;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        if (param_window_floats(tr)) {
            download_as_f32(tr, dst + k, pt(tr, tr->params, i, 0), tr->plan.param_len[i]);
            k += tr->plan.param_len[i];
            continue;
        }
        const float *src = (const float *)tensor_at(tr, tr->master, i, 4);
        for (size_t j = 0; j < tr->plan.param_len[i]; j += per) {
            size_t c = MIN(per, tr->plan.param_len[i] - j);
            tr->be->download(tr->be, tr->h_staging, src + j, c * 4);
            memcpy(dst + k + j, tr->h_staging, c * 4);
        }
        k += tr->plan.param_len[i];
    }
}

/* Sets the parameters (packed, llm.c's order) from host floats src, or from weights w in their file: a window
 * at a time through the staging buffer, into the fp32 master or a sampling plan's window. */
static int copy_params_in_from(ngpt_trainer *tr, const float *src, const Weights *w) {
    size_t per = param_window_floats(tr) ? param_window_floats(tr) : HOST_STAGING_BYTES / 4, k = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        size_t n = tr->plan.param_len[i];
        for (size_t j = 0; j < n; j += per) {
            size_t c = MIN(per, n - j);
            if (w) {
                weights_fill(w, k + j, c, (float *)tr->h_staging);
                char msg[NGPT_ERRLEN];
                int rc = params_check_finite(&tr->ms, (const float *)tr->h_staging, k + j, c, weights_file(w), msg, sizeof msg);
                if (rc) return tr_fail(tr, rc, "%s", msg);
            } else memcpy(tr->h_staging, src + k + j, c * 4);
            upload_param_chunk(tr, i, j, (const float *)tr->h_staging, c);
        }
        k += n;
    }
    params_from_master(tr);
    return be_check(tr, "loading parameters");
}
CLI_USED static int copy_params_in(ngpt_trainer *tr, const float *src) { return copy_params_in_from(tr, src, NULL); }

/* nanoGPT's initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), LayerNorm weights 1,
 * biases 0, and the vocabulary padding rows 0. */
static int init_params(ngpt_trainer *tr) {
    ngpt_backend *be = tr->be;
    if (param_window_floats(tr)) { /* a sampling trainer (no master to draw into) starts at zero until loaded */
        be->zero(be, tr->params, tr->plan.nparams_padded * act_size(tr));
        return be_check(tr, "initialisation");
    }
    float proj_std = 0.02f / sqrtf(2.0f * (float)tr->ms.L);
    uint64_t seed = (uint64_t)tr->cfg.seed;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        size_t n = tr->plan.param_len[i];
        if (!n) continue;
        float *master = (float *)tensor_at(tr, tr->master, i, 4);
        switch (i) {
        case P_WTE:
            be->fill_normal(be, master, (size_t)tr->ms.V * tr->ms.C, 0.0f, 0.02f, seed, 1000 + (uint64_t)i);
            be->fill_normal(be, master + (size_t)tr->ms.V * tr->ms.C, n - (size_t)tr->ms.V * tr->ms.C, 0.0f, 0.0f, seed, 0);
            break;
        case P_WPE: case P_QKVW: case P_FCW:
            be->fill_normal(be, master, n, 0.0f, 0.02f, seed, 1000 + (uint64_t)i);
            break;
        case P_ATTPROJW: case P_FCPROJW:
            be->fill_normal(be, master, n, 0.0f, proj_std, seed, 1000 + (uint64_t)i);
            break;
        case P_LN1W: case P_LN2W: case P_LNFW:
            be->fill_normal(be, master, n, 1.0f, 0.0f, seed, 0);
            break;
        default: /* biases */
            be->fill_normal(be, master, n, 0.0f, 0.0f, seed, 0);
            break;
        }
        be->cast_from_f32(be, pt(tr, tr->params, i, 0), master, n);
    }
    return be_check(tr, "initialisation");
}

static const char *dataset_dir(const ngpt_config *c, char *buf, size_t n) {
    if (c->data_dir[0]) snprintf(buf, n, "%s", c->data_dir);
    else if (c->dataset[0] == '/') snprintf(buf, n, "%s", c->dataset); /* os.path.join('data', dataset) keeps an absolute path */
    else snprintf(buf, n, "data/%s", c->dataset);
    return buf;
}


/* The GPU storage type for a dtype name on a card of compute capability cc (0: none to ask, as for
 * `nanogpt plan`): "auto" is bfloat16 where the card has it (8.0 and newer, or no card) and float16 below,
 * as nanoGPT chooses. */
static int cuda_dtype(const char *name, int cc) {
    if (!strcmp(name, "float32")) return NGPT_DTYPE_F32;
    if (!strcmp(name, "float16")) return NGPT_DTYPE_F16;
    if (!strcmp(name, "bfloat16")) return NGPT_DTYPE_BF16; /* the backend refuses it on cards without bf16 */
    return cc && cc < 80 ? NGPT_DTYPE_F16 : NGPT_DTYPE_BF16;
}

/* Picks the backend and the dtype. Writes a notice into note when it falls back to the CPU. */
static int resolve_device(const ngpt_config *c, int *device, int *dtype, char *note, size_t notelen, char *err, size_t errlen) {
    note[0] = 0;
    char why[NGPT_ERRLEN];
    const char *dev = c->device; /* the struct may be set without ngpt_config_set: cuda:0 is cuda here too, a typo no CPU run */
    int rc = device_alias(&dev, err, errlen);
    if (rc) return rc;
    if (strcmp(dev, "cuda") && strcmp(dev, "auto") && strcmp(dev, "cpu"))
        return fail(err, errlen, NGPT_ERR_ARG, "device = '%s': must be one of auto|cpu|cuda", dev);
    int want_cuda = !strcmp(dev, "cuda"), auto_dev = !strcmp(dev, "auto");
    *device = DEV_BACKEND_CPU;
    if (want_cuda || auto_dev) {
        if (ngpt_cuda_available(why, sizeof why)) *device = DEV_BACKEND_CUDA;
        else if (want_cuda) return fail(err, errlen, NGPT_ERR_DEVICE, "device = cuda, but %s", why);
        else snprintf(note, notelen, "training on the CPU: %.400s", why);
    }
    if (*device == DEV_BACKEND_CPU) {
        if (strcmp(c->dtype, "auto") && strcmp(c->dtype, "float32"))
            snprintf(note + strlen(note), notelen - strlen(note), "%sdtype = %s: the CPU backend computes in float32", note[0] ? "; " : "", c->dtype);
        *dtype = NGPT_DTYPE_F32;
        return NGPT_OK;
    }
    *dtype = cuda_dtype(c->dtype, ngpt_cuda_compute_capability());
    return NGPT_OK;
}

static void trainer_carve(ngpt_trainer *tr) {
    const Plan *p = &tr->plan;
    tr->params = tr->dev + p->off_params;
    tr->grads = tr->dev + p->off_grads;
    tr->master = (float *)(p->req.dtype == NGPT_DTYPE_F32 ? tr->params : tr->dev + p->off_master);
    tr->m = tr->dev + p->off_m;
    tr->v = tr->dev + p->off_v;
    tr->region = tr->dev + p->off_region;
    host_set_use(tr, 0);
    tr->h_counts = (int32_t *)(tr->host + p->host_off[H_COUNTS]);
    tr->h_staging = tr->host + p->host_off[H_STAGING];
}

/* The plan request for a config on a device with a budget; sampling: sample's forward-only plan, whatever
 * eval_only says. */
static void plan_request_from_config(PlanRequest *r, const ngpt_config *c, const ModelShape *ms, int device, int dtype, int nthreads,
                                     double budget, int sampling) {
    memset(r, 0, sizeof *r);
    r->m = *ms;
    r->T = c->block_size;
    r->batch_size = c->batch_size;
    r->grad_accum = c->gradient_accumulation_steps;
    r->dtype = dtype;
    r->device = device;
    r->nthreads = nthreads;
    r->budget = budget;
    r->pin_micro_batch = c->micro_batch;
    r->pin_recompute = c->recompute;
    r->pin_chunk = c->logits_chunk;
    r->pin_moments = !strcmp(c->moments_dtype, "float32") ? MOMENTS_F32 : !strcmp(c->moments_dtype, "bfloat16") ? MOMENTS_BF16 : MOMENTS_FREE;
    r->eval_seqs = (long long)c->eval_iters * c->batch_size;
    /* eval_only evaluates a model it loads in forward passes alone (nanoGPT's eval configs: GPT-2 XL in the
     * memory sampling it needs); from scratch it keeps the training plan, whose fp32 master the random
     * initialisation is drawn into */
    r->eval_only = !sampling && c->eval_only && strcmp(c->init_from, "scratch");
    r->inference = sampling || r->eval_only;
    r->pretrained = strcmp(c->init_from, "scratch") && strcmp(c->init_from, "resume");
    r->resumed = !strcmp(c->init_from, "resume");
    /* dropout runs attention on the mma.sync kernels (attn_wgmma_shape), which keep no dS^T */
    r->attn_ds = device == DEV_BACKEND_CUDA && c->dropout == 0 && ngpt_cuda_wgmma_attention();
    r->gpu_sms = device == DEV_BACKEND_CUDA ? ngpt_cuda_sm_count() : 0;
}

/* ======================================================================================================
 * Pretrained weights: Hugging Face GPT-2 safetensors in, llm.c model files in and out.
 *
 * Both readers produce a ModelShape (bias = 1) and a malloc'd float array of every parameter in the packed
 * order of param_sizes(), wte padded to Vp rows of zeros; the caller frees it. Given params = NULL they check
 * the header (and the file's size) and give the shape alone, without touching the weights (nanogpt plan).
 * Files are mapped, not read into a second buffer, so a 6 GB gpt2-xl file costs its parameters once. Errors
 * name the file and what was expected and found. Uses fail, pad_vocab, param_sizes, utf8_decode, bf16_to_f32 and f16_to_f32
 * from above.
 * ==================================================================================================== */

/* ---- a strict JSON reader (RFC 8259) for the safetensors header and config.json ----
 * The text is parsed into a flat array of nodes in document order; an object's members are key, value,
 * key, value, ... and `next` is the index just past a node's subtree, so siblings are walked by jumping. */

enum { JSON_OBJECT, JSON_ARRAY, JSON_STRING, JSON_NUMBER, JSON_TRUE, JSON_FALSE, JSON_NULL };
#define JSON_MAX_DEPTH 64
#define JSON_MAX_NODES (1 << 22) /* a gpt2-xl header has about 7000 */

typedef struct {
    int type;
    int next;     /* index of the node after this one's subtree */
    int count;    /* members of an object, elements of an array */
    size_t start; /* strings: the first byte inside the quotes; others: the first byte of the value */
    size_t end;   /* strings: the closing quote; others: one past the last byte */
} JsonNode;

typedef struct {
    const char *s;
    size_t n;
    JsonNode *nodes;
    int len, cap;
    size_t err_at;      /* on failure: byte offset of the problem within s */
    const char *err_what;
} Json;

static int json_err(Json *j, size_t at, const char *what) {
    j->err_at = at;
    j->err_what = what;
    return -1;
}

static void json_ws(const Json *j, size_t *p) {
    while (*p < j->n && (j->s[*p] == ' ' || j->s[*p] == '\t' || j->s[*p] == '\n' || j->s[*p] == '\r')) (*p)++;
}

static int json_push(Json *j, int type, size_t start) {
    if (j->len >= JSON_MAX_NODES) return -1;
    if (j->len == j->cap) {
        int cap = j->cap ? 2 * j->cap : 256;
        JsonNode *nn = (JsonNode *)realloc(j->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return -1;
        j->nodes = nn;
        j->cap = cap;
    }
    JsonNode *nd = &j->nodes[j->len];
    nd->type = type;
    nd->next = j->len + 1;
    nd->count = 0;
    nd->start = nd->end = start;
    return j->len++;
}

static int json_hex4(const Json *j, size_t p, uint32_t *v) {
    if (p + 4 > j->n) return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->s[p + (size_t)i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* a string starting at the opening quote *p; leaves *p past the closing quote */
static int json_string_at(Json *j, size_t *p) {
    int k = json_push(j, JSON_STRING, *p + 1);
    if (k < 0) return json_err(j, *p, "out of memory, or more than 4M values");
    size_t i = *p + 1;
    for (;;) {
        if (i >= j->n) return json_err(j, *p, "unterminated string");
        unsigned char c = (unsigned char)j->s[i];
        if (c == '"') break;
        if (c < 0x20) return json_err(j, i, "control character inside a string (must be escaped)");
        if (c == '\\') {
            if (i + 1 >= j->n) return json_err(j, i, "unterminated string");
            char e = j->s[i + 1];
            if (e == 'u') {
                uint32_t u, lo;
                if (json_hex4(j, i + 2, &u)) return json_err(j, i, "bad \\u escape (needs 4 hex digits)");
                i += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return json_err(j, i - 6, "\\u escape is a lone low surrogate");
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (i + 1 >= j->n || j->s[i] != '\\' || j->s[i + 1] != 'u' || json_hex4(j, i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return json_err(j, i - 6, "\\u escape is a high surrogate without its low half");
                    i += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || !e) return json_err(j, i, "unknown escape in a string");
            i += 2;
            continue;
        }
        if (c >= 0x80) {
            uint32_t cp;
            int len = utf8_decode((const unsigned char *)j->s + i, j->n - i, &cp);
            if (len <= 0) return json_err(j, i, "invalid UTF-8 in a string");
            i += (size_t)len;
            continue;
        }
        i++;
    }
    j->nodes[k].end = i;
    *p = i + 1;
    return k;
}

static int json_number_at(Json *j, size_t *p) {
    size_t i = *p, n = j->n;
    const char *s = j->s;
    if (i < n && s[i] == '-') i++;
    if (i >= n || !(s[i] >= '0' && s[i] <= '9')) return json_err(j, i, "expected a digit");
    if (s[i] == '0') i++;
    else while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !(s[i] >= '0' && s[i] <= '9')) return json_err(j, i, "expected a digit after the decimal point");
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !(s[i] >= '0' && s[i] <= '9')) return json_err(j, i, "expected a digit in the exponent");
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    int k = json_push(j, JSON_NUMBER, *p);
    if (k < 0) return json_err(j, *p, "out of memory, or more than 4M values");
    j->nodes[k].end = i;
    *p = i;
    return k;
}

static int json_value_at(Json *j, size_t *p, int depth) {
    json_ws(j, p);
    if (*p >= j->n) return json_err(j, *p, "unexpected end of the text, expected a value");
    char c = j->s[*p];
    if (c == '"') return json_string_at(j, p);
    if (c == '-' || (c >= '0' && c <= '9')) return json_number_at(j, p);
    static const char *const words[3] = {"true", "false", "null"};
    static const int word_types[3] = {JSON_TRUE, JSON_FALSE, JSON_NULL};
    for (int w = 0; w < 3; w++) {
        size_t len = strlen(words[w]);
        if (c == words[w][0]) {
            if (j->n - *p < len || memcmp(j->s + *p, words[w], len)) return json_err(j, *p, "unknown literal");
            int k = json_push(j, word_types[w], *p);
            if (k < 0) return json_err(j, *p, "out of memory, or more than 4M values");
            *p += len;
            j->nodes[k].end = *p;
            return k;
        }
    }
    if (c != '{' && c != '[') return json_err(j, *p, "unexpected character, expected a value");
    if (depth >= JSON_MAX_DEPTH) return json_err(j, *p, "nested too deeply");
    int obj = c == '{';
    int k = json_push(j, obj ? JSON_OBJECT : JSON_ARRAY, *p);
    if (k < 0) return json_err(j, *p, "out of memory, or more than 4M values");
    (*p)++;
    json_ws(j, p);
    char close = obj ? '}' : ']';
    if (*p < j->n && j->s[*p] == close) {
        (*p)++;
    } else {
        for (;;) {
            if (obj) {
                json_ws(j, p);
                if (*p >= j->n || j->s[*p] != '"') return json_err(j, *p, "expected a string key");
                if (json_string_at(j, p) < 0) return -1;
                json_ws(j, p);
                if (*p >= j->n || j->s[*p] != ':') return json_err(j, *p, "expected ':' after a key");
                (*p)++;
            }
            if (json_value_at(j, p, depth + 1) < 0) return -1;
            j->nodes[k].count++;
            json_ws(j, p);
            if (*p < j->n && j->s[*p] == ',') { (*p)++; continue; }
            if (*p < j->n && j->s[*p] == close) { (*p)++; break; }
            return json_err(j, *p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    j->nodes[k].end = *p;
    j->nodes[k].next = j->len;
    return k;
}

/* Parses s[0..n) as one JSON value (surrounded by whitespace only). 0, or -1 with err_at/err_what. */
static int json_parse(Json *j, const char *s, size_t n) {
    memset(j, 0, sizeof *j);
    j->s = s;
    j->n = n;
    size_t p = 0;
    if (json_value_at(j, &p, 0) < 0) return -1;
    json_ws(j, &p);
    if (p != n) return json_err(j, p, "unexpected bytes after the JSON value");
    return 0;
}

static void json_free(Json *j) {
    free(j->nodes);
    j->nodes = NULL;
}

/* The decoded text of string node k into buf (NUL-terminated, UTF-8). Returns its length, or -1 when it
 * does not fit in cap bytes. The escapes were validated by the parser. */
static long json_str(const Json *j, int k, char *buf, size_t cap) {
    const JsonNode *nd = &j->nodes[k];
    size_t o = 0;
    for (size_t i = nd->start; i < nd->end;) {
        unsigned char tmp[4];
        size_t len = 1;
        char c = j->s[i];
        if (c != '\\') { tmp[0] = (unsigned char)c; i++; }
        else {
            char e = j->s[i + 1];
            if (e == 'u') {
                uint32_t u = 0, lo = 0xDC00;
                json_hex4(j, i + 2, &u);
                i += 6;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    json_hex4(j, i + 2, &lo);
                    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
                len = (size_t)utf8_encode(u, tmp);
            } else {
                tmp[0] = (unsigned char)(e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e);
                i += 2;
            }
        }
        if (o + len >= cap) return -1;
        memcpy(buf + o, tmp, len);
        o += len;
    }
    buf[o] = 0;
    return (long)o;
}

/* The value of member `key` of object node k, or -1. */
static int json_get(const Json *j, int k, const char *key) {
    char buf[256];
    int i = k + 1;
    for (int m = 0; m < j->nodes[k].count; m++) {
        if (json_str(j, i, buf, sizeof buf) >= 0 && !strcmp(buf, key)) return i + 1;
        i = j->nodes[i + 1].next;
    }
    return -1;
}

/* A non-negative integer node (no sign, fraction or exponent) as uint64. 0, or -1 when it is not one or
 * does not fit. */
static int json_u64(const Json *j, int k, uint64_t *out) {
    const JsonNode *nd = &j->nodes[k];
    if (nd->type != JSON_NUMBER) return -1;
    uint64_t v = 0;
    for (size_t i = nd->start; i < nd->end; i++) {
        char c = j->s[i];
        if (c < '0' || c > '9') return -1;
        if (v > (UINT64_MAX - (uint64_t)(c - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(c - '0');
    }
    *out = v;
    return 0;
}

/* ---- number formats ---- */

/* float -> bfloat16, round to nearest even; NaN becomes the quiet NaN 0x7FC0 (both as torch) */
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
    u += 0x7FFFu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

enum { ST_F32, ST_F16, ST_BF16, ST_OTHER };

/* n values of a file dtype (little-endian, any alignment) to floats */
static void convert_to_f32(float *dst, const unsigned char *src, int dtype, size_t n) {
    if (dtype == ST_F32) { memcpy(dst, src, n * 4); return; }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = dtype == ST_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
}

/* Rows o_begin..o_end-1 of the Linear weight (out, in) that a Conv1D weight (in, out) in the file is the
 * transpose of, into dst, in 64x64 tiles. */
static void convert_transposed_rows(float *dst, const unsigned char *src, int dtype, size_t in, size_t out, size_t o_begin, size_t o_end) {
    enum { TILE = 64 };
    float tile[TILE][TILE];
    size_t es = dtype == ST_F32 ? 4 : 2;
    for (size_t i0 = 0; i0 < in; i0 += TILE) {
        size_t ni = MIN((size_t)TILE, in - i0);
        for (size_t o0 = o_begin; o0 < o_end; o0 += TILE) {
            size_t no = MIN((size_t)TILE, o_end - o0);
            for (size_t i = 0; i < ni; i++) convert_to_f32(tile[i], src + ((i0 + i) * out + o0) * es, dtype, no);
            for (size_t o = 0; o < no; o++)
                for (size_t i = 0; i < ni; i++) dst[(o0 - o_begin + o) * in + i0 + i] = tile[i][o];
        }
    }
}

/* Values a..a+n-1 of that Linear weight (row-major (out, in)) into dst: a partial first row and last row one
 * value at a time, the whole rows between in tiles. */
static void convert_transposed_part(float *dst, const unsigned char *src, int dtype, size_t in, size_t out, size_t a, size_t n) {
    size_t es = dtype == ST_F32 ? 4 : 2, d = a, end = a + n;
    for (; d < end && d % in; d++) convert_to_f32(dst++, src + ((d % in) * out + d / in) * es, dtype, 1);
    size_t rows = (end - d) / in;
    if (rows) convert_transposed_rows(dst, src, dtype, in, out, d / in, d / in + rows);
    dst += rows * in;
    for (d += rows * in; d < end; d++) convert_to_f32(dst++, src + ((d % in) * out + d / in) * es, dtype, 1);
}

/* ---- Pretrained weights left in their mapped file and read into the arena a window at a time, so that
 * loading them needs no fp32 copy of the whole model (docs/memory.md): the parameters in llm.c's order, as
 * runs of one tensor's values each ---- */

typedef struct {
    size_t dst, count;        /* the llm.c-order parameters (of the model's shape) it gives */
    const unsigned char *src; /* NULL: zeros (the vocabulary padding) */
    int dtype;                /* ST_F32, ST_F16 or ST_BF16 */
    size_t in, out;           /* in > 0: the source is a Conv1D weight (in, out), the run its transpose (out, in) */
} WeightRun;

struct Weights {
    void *map; /* the file, mapped read-only */
    size_t map_bytes;
    char file[4100]; /* its path, for errors (init_from may be a name: gpt2) */
    WeightRun *run;
    int n_run, cap_run;
};

static const char *weights_file(const Weights *w) { return w->file; }

static void weights_close(Weights *w) {
    if (w->map) munmap(w->map, w->map_bytes);
    free(w->run);
    memset(w, 0, sizeof *w);
}

static void weights_add(Weights *w, size_t dst, size_t count, const unsigned char *src, int dtype, size_t in, size_t out) {
    /* an empty run (no vocabulary padding) is left out: at wpe's offset it would be taken for wpe by weights_crop */
    if (count && w->n_run < w->cap_run) w->run[w->n_run++] = (WeightRun){dst, count, src, dtype, in, out};
}

/* Parameters first..first+count-1 (llm.c's order) into dst as fp32. */
static void weights_fill(const Weights *w, size_t first, size_t count, float *dst) {
    for (int k = 0; k < w->n_run; k++) {
        const WeightRun *r = &w->run[k];
        size_t lo = MAX(first, r->dst), hi = MIN(first + count, r->dst + r->count);
        if (lo >= hi) continue;
        size_t a = lo - r->dst, n = hi - lo, es = r->dtype == ST_F32 ? 4 : 2;
        float *out = dst + (lo - first);
        if (!r->src) memset(out, 0, n * sizeof(float));
        else if (!r->in) convert_to_f32(out, r->src + a * es, r->dtype, n);
        else convert_transposed_part(out, r->src, r->dtype, r->in, r->out, a, n);
    }
}

/* nanoGPT's crop_block_size on weights still in their file: wpe's first T rows (T <= ms->maxT, the shape
 * before the crop), the runs after it moved up */
static void weights_crop(Weights *w, const ModelShape *ms, int T) {
    size_t wpe_at = (size_t)ms->Vp * ms->C, cut = (size_t)(ms->maxT - T) * ms->C;
    for (int k = 0; k < w->n_run; k++) {
        if (w->run[k].dst == wpe_at) w->run[k].count -= cut;
        else if (w->run[k].dst > wpe_at) w->run[k].dst -= cut;
    }
}

/* Element e of the parameters of a model of shape ms, packed in llm.c's order, by name into buf: "wte, element 12 of
 * its 38597376", "ln1w of layer 1, element 3 of its 768" (a layered tensor's element within its layer) */
static void param_element_name(const ModelShape *ms, size_t e, char *buf, size_t cap) {
    size_t sizes[N_PARAM_TENSORS];
    param_sizes(ms, sizes);
    int t = 0;
    while (t < N_PARAM_TENSORS - 1 && e >= sizes[t]) e -= sizes[t++];
    int layered = t >= P_LN1W && t <= P_FCPROJB;
    size_t per = layered ? sizes[t] / (size_t)ms->L : sizes[t]; /* one layer's part of a layered tensor */
    char layer[48] = "";
    if (layered) snprintf(layer, sizeof layer, " of layer %zu", e / per);
    snprintf(buf, cap, "%s%s, element %zu of its %zu", param_names[t], layer, e % per, per);
}

/* NGPT_OK when p (count floats: parameters first.. of a model of shape ms, packed in llm.c's order, as read
 * from file) are all finite; else an error naming the first NaN or Inf's tensor (llm.c's names), its layer and
 * the file. */
static int params_check_finite(const ModelShape *ms, const float *p, size_t first, size_t count, const char *file, char *err, size_t errlen) {
    enum { BLOCK = 4096 };
    for (size_t b = 0; b < count; b += BLOCK) {
        size_t n = MIN((size_t)BLOCK, count - b);
        uint32_t special = 0; /* exponent all ones: Inf or NaN (a branch-free loop the compiler vectorises) */
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, p + b + i, 4);
            special |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (!special) continue;
        size_t at = b;
        while (isfinite(p[at])) at++;
        char where[160];
        param_element_name(ms, first + at, where, sizeof where);
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: the weights hold %s: %s in llm.c's layout: the file is damaged (download or "
                    "export it again)", file, isnan(p[at]) ? "NaN" : "Inf", where);
    }
    return NGPT_OK;
}

/* The whole model as one fp32 array (malloced, NULL on failure): for export and the tests. */
static int weights_to_f32(const Weights *w, const ModelShape *ms, float **params, const char *path, char *err, size_t errlen) {
    size_t sizes[N_PARAM_TENSORS], total = param_sizes(ms, sizes);
    float *p = (float *)malloc(total * sizeof(float));
    if (!p) return fail(err, errlen, NGPT_ERR_NOMEM, "%s: out of host memory for %zu parameters (%.2f GiB)", path, total, (double)total * 4 / GiB);
    weights_fill(w, 0, total, p);
    int rc = params_check_finite(ms, p, 0, total, w->file[0] ? w->file : path, err, errlen);
    if (rc) {
        free(p);
        p = NULL;
    }
    *params = p;
    return rc;
}

/* ---- Hugging Face safetensors: u64 header length N, N bytes of JSON {name: {dtype, shape, data_offsets},
 * "__metadata__": {...}}, then the data; offsets are relative to the data, which the tensors must cover
 * exactly (no holes, no overlaps). GPT-2's Conv1D weights are stored (in, out). ---- */

#define ST_MAX_HEADER 100000000u /* the limit of the safetensors library */
#define ST_MAX_DIMS 8

/* the tensors of one GPT-2 block, in Hugging Face's names, and where each goes */
enum { HF_LN1W, HF_LN1B, HF_QKVW, HF_QKVB, HF_ATTPROJW, HF_ATTPROJB, HF_LN2W, HF_LN2B, HF_FCW, HF_FCB, HF_FCPROJW, HF_FCPROJB, N_HF_LAYER };
static const char *const hf_layer_names[N_HF_LAYER] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
static const int hf_layer_param[N_HF_LAYER] = {P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
                                               P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB};
/* the tensors outside the blocks */
enum { HF_WTE, HF_WPE, HF_LNFW, HF_LNFB, N_HF_GLOBAL };
static const char *const hf_global_names[N_HF_GLOBAL] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};

typedef struct {
    char name[256];
    int dtype;               /* ST_* */
    char dtype_name[16];
    int ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;     /* byte offsets within the data section */
} StTensor;

static size_t st_dtype_size(const char *d) {
    static const char *const one[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0"}, *const two[] = {"I16", "U16", "F16", "BF16"},
                             *const four[] = {"I32", "U32", "F32"}, *const eight[] = {"I64", "U64", "F64", "C64"};
    for (size_t i = 0; i < sizeof one / sizeof *one; i++) if (!strcmp(d, one[i])) return 1;
    for (size_t i = 0; i < sizeof two / sizeof *two; i++) if (!strcmp(d, two[i])) return 2;
    for (size_t i = 0; i < sizeof four / sizeof *four; i++) if (!strcmp(d, four[i])) return 4;
    for (size_t i = 0; i < sizeof eight / sizeof *eight; i++) if (!strcmp(d, eight[i])) return 8;
    return 0;
}

static const char *st_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && o < cap; d++) o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Reads one tensor entry {"dtype": .., "shape": [..], "data_offsets": [b, e]} of the header. */
static int st_parse_entry(const Json *j, int v, StTensor *t, const char *path, size_t hdr_at, char *err, size_t errlen) {
    const JsonNode *nd = &j->nodes[v];
    if (nd->type != JSON_OBJECT)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: header entry \"%s\" (byte %zu) is not an object {dtype, shape, data_offsets}", path,
                    t->name, hdr_at + nd->start);
    int kd = json_get(j, v, "dtype"), ks = json_get(j, v, "shape"), ko = json_get(j, v, "data_offsets");
    if (kd < 0 || ks < 0 || ko < 0)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: header entry \"%s\" (byte %zu) lacks \"%s\"", path, t->name, hdr_at + nd->start,
                    kd < 0 ? "dtype" : ks < 0 ? "shape" : "data_offsets");
    if (j->nodes[kd].type != JSON_STRING || json_str(j, kd, t->dtype_name, sizeof t->dtype_name) < 0)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: dtype (byte %zu) is not a known dtype name", path, t->name, hdr_at + j->nodes[kd].start);
    if (!st_dtype_size(t->dtype_name))
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s has unknown dtype \"%s\" (safetensors dtypes: F32, F16, BF16, F64, I64, ..., BOOL)",
                    path, t->name, t->dtype_name);
    t->dtype = !strcmp(t->dtype_name, "F32") ? ST_F32 : !strcmp(t->dtype_name, "F16") ? ST_F16 : !strcmp(t->dtype_name, "BF16") ? ST_BF16 : ST_OTHER;
    if (j->nodes[ks].type != JSON_ARRAY || j->nodes[ks].count > ST_MAX_DIMS)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: shape (byte %zu) is not an array of at most %d sizes", path, t->name,
                    hdr_at + j->nodes[ks].start, ST_MAX_DIMS);
    t->ndim = j->nodes[ks].count;
    for (int d = 0; d < t->ndim; d++)
        if (json_u64(j, ks + 1 + d, &t->shape[d]))
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: shape entry %d (byte %zu) is not a non-negative integer", path, t->name, d,
                        hdr_at + j->nodes[ks + 1 + d].start);
    if (j->nodes[ko].type != JSON_ARRAY || j->nodes[ko].count != 2 || json_u64(j, ko + 1, &t->begin) || json_u64(j, ko + 2, &t->end))
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: data_offsets (byte %zu) is not [begin, end] with non-negative integers", path,
                    t->name, hdr_at + j->nodes[ko].start);
    return NGPT_OK;
}

static int st_cmp_begin(const void *a, const void *b) {
    const StTensor *x = (const StTensor *)a, *y = (const StTensor *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks that each tensor holds shape x dtype bytes and that together they tile the data section
 * [0, data_len) exactly (no holes, no overlaps: also what makes a duplicated name harmless). Sorts t by
 * offset. */
static int st_check_offsets(StTensor *t, int n, uint64_t data_len, const char *path, char *err, size_t errlen) {
    char sh[128];
    for (int i = 0; i < n; i++) {
        uint64_t elems = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] && elems > UINT64_MAX / 8 / t[i].shape[d])
                return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: shape %s is too large", path, t[i].name, st_shape_str(t[i].shape, t[i].ndim, sh, sizeof sh));
            elems *= t[i].shape[d];
        }
        uint64_t bytes = elems * st_dtype_size(t[i].dtype_name);
        if (t[i].begin > t[i].end)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] end before they begin", path, t[i].name,
                        (unsigned long long)t[i].begin, (unsigned long long)t[i].end);
        if (t[i].end > data_len)
            return fail(err, errlen, NGPT_ERR_FORMAT,
                        "%s: tensor %s: data_offsets [%llu, %llu] reach past the end of the data section (%llu bytes): the file is truncated or "
                        "its header is wrong", path, t[i].name, (unsigned long long)t[i].begin, (unsigned long long)t[i].end,
                        (unsigned long long)data_len);
        if (t[i].end - t[i].begin != bytes)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but shape %s of %s needs %llu",
                        path, t[i].name, (unsigned long long)t[i].begin, (unsigned long long)t[i].end,
                        (unsigned long long)(t[i].end - t[i].begin), st_shape_str(t[i].shape, t[i].ndim, sh, sizeof sh), t[i].dtype_name,
                        (unsigned long long)bytes);
    }
    qsort(t, (size_t)n, sizeof *t, st_cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].begin < at)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensors %s and %s overlap (bytes %llu..%llu of the data section)", path, t[i - 1].name,
                        t[i].name, (unsigned long long)t[i].begin, (unsigned long long)at);
        if (t[i].begin > at)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: bytes %llu..%llu of the data section belong to no tensor (safetensors allows no holes)",
                        path, (unsigned long long)at, (unsigned long long)t[i].begin);
        at = t[i].end;
    }
    if (at != data_len)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: the tensors cover %llu bytes of the %llu-byte data section: %llu bytes after them belong to no tensor",
                    path, (unsigned long long)at, (unsigned long long)data_len, (unsigned long long)(data_len - at));
    return NGPT_OK;
}

/* Which tensor of ours a Hugging Face name is: *global in HF_* (layer -1), or *layer >= 0 and *slot in
 * HF_LN1W..; returns 1 when it is one of ours, 0 when it is to be ignored. */
static int st_classify(const char *name, int *layer, int *slot) {
    if (!strncmp(name, "transformer.", 12)) name += 12;
    for (int g = 0; g < N_HF_GLOBAL; g++)
        if (!strcmp(name, hf_global_names[g])) { *layer = -1; *slot = g; return 1; }
    if (name[0] != 'h' || name[1] != '.' || !(name[2] >= '0' && name[2] <= '9')) return 0;
    const char *p = name + 2;
    if (p[0] == '0' && p[1] != '.') return 0; /* no leading zeros */
    long l = 0;
    while (*p >= '0' && *p <= '9') {
        l = l * 10 + (*p++ - '0');
        if (l > 100000) return 0;
    }
    if (*p++ != '.') return 0;
    for (int s = 0; s < N_HF_LAYER; s++)
        if (!strcmp(p, hf_layer_names[s])) { *layer = (int)l; *slot = s; return 1; }
    return 0; /* attn.bias / attn.masked_bias buffers, or unknown */
}

/* The expected Hugging Face shape of slot s of a block; returns its dimensions (2: a Conv1D weight, stored
 * (in, out), the transpose of ours). */
static int hf_layer_shape(int s, uint64_t C, uint64_t shape[2]) {
    switch (s) {
    case HF_QKVW: shape[0] = C; shape[1] = 3 * C; return 2;
    case HF_ATTPROJW: shape[0] = C; shape[1] = C; return 2;
    case HF_FCW: shape[0] = C; shape[1] = 4 * C; return 2;
    case HF_FCPROJW: shape[0] = 4 * C; shape[1] = C; return 2;
    case HF_QKVB: shape[0] = 3 * C; return 1;
    case HF_FCB: shape[0] = 4 * C; return 1;
    default: shape[0] = C; return 1;
    }
}

/* n_head: config.json next to the .safetensors file ("n_head"), else GPT-2's sizes by C. Cross-checks the
 * other sizes config.json gives. */
static int st_n_head(const char *path, const ModelShape *ms, int *NH, char *err, size_t errlen) {
    char cfg[4096];
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(cfg, sizeof cfg, "%.*s/config.json", (int)(slash - path), path);
    else snprintf(cfg, sizeof cfg, "config.json");
    FILE *f = fopen(cfg, "rb");
    if (!f) {
        if (errno != ENOENT) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s (for the n_head of %s): %s", cfg, path, strerror(errno));
        for (int i = 0; i < 4; i++)
            if (ms->C == gpt2_sizes[i].C) { *NH = gpt2_sizes[i].NH; return NGPT_OK; }
        return fail(err, errlen, NGPT_ERR_FORMAT,
                    "%s: cannot tell the number of heads: safetensors files do not store it, there is no %s, and n_embd = %d is none of "
                    "GPT-2's sizes (768, 1024, 1280, 1600): put the model's config.json (with \"n_head\") next to the file",
                    path, cfg, ms->C);
    }
    char *text = NULL;
    size_t n = 0, cap = 0;
    int rc = NGPT_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 24)) {
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: larger than 16 MiB, not the config of %s", cfg, path);
                break;
            }
            cap = cap ? 2 * cap : 4096;
            char *t = (char *)realloc(text, cap);
            if (!t) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", cfg); break; }
            text = t;
        }
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "cannot read %s (for the n_head of %s): %s", cfg, path, strerror(errno));
            break;
        }
    }
    fclose(f);
    Json j;
    memset(&j, 0, sizeof j);
    if (!rc && json_parse(&j, text, n))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: bad JSON at byte %zu: %s (read for the n_head of %s)", cfg, j.err_at, j.err_what, path);
    if (!rc && j.nodes[0].type != JSON_OBJECT)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: not a JSON object (read for the n_head of %s)", cfg, path);
    if (!rc) {
        uint64_t v;
        int k = json_get(&j, 0, "n_head");
        if (k < 0 || json_u64(&j, k, &v) || v == 0 || v > (uint64_t)ms->C)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: \"n_head\" %s, needed for %s (safetensors files do not store it)", cfg,
                      k < 0 ? "is missing" : "is not a positive integer no larger than n_embd", path);
        else *NH = (int)v;
        static const char *const keys[4] = {"n_embd", "n_layer", "vocab_size", "n_positions"};
        const int want[4] = {ms->C, ms->L, ms->V, ms->maxT};
        const char *from[4] = {"wte", "the h.* blocks", "wte", "wpe"};
        for (int i = 0; i < 4 && !rc; i++) {
            if ((k = json_get(&j, 0, keys[i])) < 0) continue;
            int not_integer = json_u64(&j, k, &v);
            if (not_integer || v != (uint64_t)want[i])
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: \"%s\" is %s%.*s%s%s %s in %s has %d%s", cfg, keys[i], not_integer ? "'" : "",
                          (int)MIN(j.nodes[k].end - j.nodes[k].start, (size_t)40), text + j.nodes[k].start, not_integer ? "'" : "",
                          not_integer ? ", not a JSON integer;" : " but", from[i], path, want[i],
                          not_integer ? "" : ": the config belongs to another model");
        }
    }
    json_free(&j);
    free(text);
    return rc;
}

/* GPT-2 ties lm_head to wte; files saved from GPT2LMHeadModel may carry lm_head.weight as a copy. nanogpt
 * has no separate head, so a copy that differs (an untied fine-tune) is refused rather than dropped. */
static int st_check_tied_head(const StTensor *t, int n, const StTensor *wte, const unsigned char *data, const char *path, char *err,
                              size_t errlen) {
    for (int i = 0; i < n; i++) {
        const StTensor *h = &t[i];
        if (strcmp(h->name, "lm_head.weight") && strcmp(h->name, "transformer.lm_head.weight")) continue;
        char sh[128], sh2[128];
        if (h->ndim != 2 || h->shape[0] != wte->shape[0] || h->shape[1] != wte->shape[1] || h->dtype == ST_OTHER)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s has shape %s and dtype %s; a tied copy of wte.weight %s %s was expected", path,
                        h->name, st_shape_str(h->shape, h->ndim, sh, sizeof sh), h->dtype_name,
                        st_shape_str(wte->shape, wte->ndim, sh2, sizeof sh2), wte->dtype_name);
        size_t C = (size_t)wte->shape[1], esw = wte->dtype == ST_F32 ? 4 : 2, esh = h->dtype == ST_F32 ? 4 : 2;
        float a[256], b[256];
        for (uint64_t r = 0; r < wte->shape[0]; r++)
            for (size_t c0 = 0; c0 < C; c0 += 256) {
                size_t k = MIN((size_t)256, C - c0);
                convert_to_f32(a, data + wte->begin + (r * C + c0) * esw, wte->dtype, k);
                convert_to_f32(b, data + h->begin + (r * C + c0) * esh, h->dtype, k);
                if (memcmp(a, b, k * sizeof(float)))
                    return fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s differs from wte.weight (row %llu): nanogpt, like GPT-2, ties the output "
                                                              "head to the token embedding and cannot load an untied head", path, h->name,
                                (unsigned long long)r);
            }
    }
    return NGPT_OK;
}

/* Maps path read-only: *map (NULL for an empty file), *size. */
static int map_file(const char *path, void **map, size_t *size, char *err, size_t errlen) {
    *map = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return fail(err, errlen, NGPT_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, NGPT_ERR_IO, "%s is not a regular file", path);
    }
    *size = (size_t)st.st_size;
    if (*size) {
        void *m = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fail(err, errlen, NGPT_ERR_IO, "cannot map %s: %s", path, strerror(e));
        }
        madvise(m, *size, MADV_SEQUENTIAL);
        *map = m;
    }
    close(fd);
    return NGPT_OK;
}

static int st_fail_unmap(void *map, size_t size, int rc) {
    if (map) munmap(map, size);
    return rc;
}

/* Opens a Hugging Face GPT-2 model.safetensors (F32, F16 or BF16; names with or without "transformer."): its
 * shape into ms and, unless w is NULL, its weights as runs over the mapped file (weights_close releases them).
 * n_head comes from config.json in the same folder, else from GPT-2's sizes. */
static int safetensors_open_gpt2(const char *path, ModelShape *ms, Weights *w, char *err, size_t errlen) {
    if (w) memset(w, 0, sizeof *w);
    void *map;
    size_t fsize = 0;
    int rc = map_file(path, &map, &fsize, err, errlen);
    if (rc) return rc;
    const unsigned char *file = (const unsigned char *)map;
    if (fsize < 8)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes, too short for safetensors (an 8-byte header length, "
                                                                             "the JSON header, the data): the file is truncated", path, fsize));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | file[i];
    if (hlen > fsize - 8)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT,
                                              "%s: the header length (first 8 bytes) says %llu bytes of JSON, but only %zu bytes follow: the file "
                                              "is truncated or is not safetensors", path, (unsigned long long)hlen, fsize - 8));
    if (hlen < 2 || hlen > ST_MAX_HEADER || file[8] != '{')
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT,
                                              "%s: not safetensors: expected a header length of 2..%u bytes followed by '{', found %llu and 0x%02x",
                                              path, ST_MAX_HEADER, (unsigned long long)hlen, fsize > 8 ? file[8] : 0));
    Json j;
    if (json_parse(&j, (const char *)file + 8, (size_t)hlen)) {
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: bad JSON in the header at byte %zu of the file: %s", path, 8 + j.err_at, j.err_what);
        json_free(&j);
        return st_fail_unmap(map, fsize, rc);
    }
    const size_t hdr_at = 8; /* file offset of the JSON */
    uint64_t data_len = fsize - 8 - hlen;
    const unsigned char *data = file + 8 + hlen;
    int ntensors = j.nodes[0].count;
    StTensor *t = (StTensor *)calloc((size_t)(ntensors ? ntensors : 1), sizeof *t);
    if (!t) { json_free(&j); return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path)); }
    int n = 0;
    for (int m = 0, k = 1; m < j.nodes[0].count && !rc; m++, k = j.nodes[k + 1].next) {
        char name[256];
        if (json_str(&j, k, name, sizeof name) < 0) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: a tensor name at byte %zu is longer than 255 bytes", path, hdr_at + j.nodes[k].start);
            break;
        }
        if (!strcmp(name, "__metadata__")) {
            const JsonNode *md = &j.nodes[k + 1];
            if (md->type != JSON_OBJECT) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: __metadata__ (byte %zu) is not an object", path, hdr_at + md->start);
            for (int q = 0, v = k + 2; q < md->count && !rc; q++, v = j.nodes[v + 1].next)
                if (j.nodes[v + 1].type != JSON_STRING)
                    rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: __metadata__ value at byte %zu is not a string", path, hdr_at + j.nodes[v + 1].start);
            continue;
        }
        memcpy(t[n].name, name, sizeof name);
        rc = st_parse_entry(&j, k + 1, &t[n], path, hdr_at, err, errlen);
        n++;
    }
    json_free(&j);
    if (!rc) rc = st_check_offsets(t, n, data_len, path, err, errlen);

    /* find our tensors: the globals, and the blocks 0..L-1 */
    int L = 0;
    for (int i = 0; i < n && !rc; i++) {
        int layer, s;
        if (st_classify(t[i].name, &layer, &s) && layer + 1 > L) L = layer + 1;
    }
    const StTensor *glob[N_HF_GLOBAL] = {0};
    const StTensor **lay = NULL;
    if (!rc && L > n) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: block h.%d exists, but there are only %d tensors", path, L - 1, n);
    if (!rc && !(lay = (const StTensor **)calloc((size_t)L * N_HF_LAYER + 1, sizeof *lay)))
        rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path);
    for (int i = 0; i < n && !rc; i++) {
        int layer, s;
        if (!st_classify(t[i].name, &layer, &s)) continue;
        const StTensor **slotp = layer < 0 ? &glob[s] : &lay[(size_t)layer * N_HF_LAYER + (size_t)s];
        if (*slotp)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensors %s and %s are the same parameter (with and without \"transformer.\")", path,
                      (*slotp)->name, t[i].name);
        *slotp = &t[i];
    }
    for (int g = 0; g < N_HF_GLOBAL && !rc; g++)
        if (!glob[g]) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: missing tensor %s (not a GPT-2 model?)", path, hf_global_names[g]);
    for (int l = 0; l < L && !rc; l++)
        for (int s = 0; s < N_HF_LAYER && !rc; s++)
            if (!lay[(size_t)l * N_HF_LAYER + (size_t)s])
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: missing tensor h.%d.%s (the file has blocks up to h.%d)", path, l, hf_layer_names[s], L - 1);
    if (!rc && L == 0) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: no transformer blocks (h.0.*)", path);

    /* shapes: wte (V, C) and wpe (maxT, C) set the sizes, everything else must agree */
    char sh[128], sh2[128];
    if (!rc) {
        const StTensor *wte = glob[HF_WTE], *wpe = glob[HF_WPE];
        if (wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1] || !wte->shape[0] || !wte->shape[1] || !wpe->shape[0])
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: wte.weight %s and wpe.weight %s should be (V, C) and (maxT, C) with the same C > 0", path,
                      st_shape_str(wte->shape, wte->ndim, sh, sizeof sh), st_shape_str(wpe->shape, wpe->ndim, sh2, sizeof sh2));
        else if (wte->shape[0] > (uint64_t)INT_MAX - 64 || wte->shape[1] > 65536 || wpe->shape[0] > (uint64_t)INT_MAX)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: wte.weight %s / wpe.weight %s: sizes out of range", path,
                      st_shape_str(wte->shape, wte->ndim, sh, sizeof sh), st_shape_str(wpe->shape, wpe->ndim, sh2, sizeof sh2));
        else {
            ms->L = L;
            ms->C = (int)wte->shape[1];
            ms->V = (int)wte->shape[0];
            ms->Vp = pad_vocab(ms->V);
            ms->maxT = (int)wpe->shape[0];
            ms->bias = 1;
            ms->NH = 0;
        }
    }
    for (int g = HF_LNFW; g < N_HF_GLOBAL && !rc; g++) {
        const StTensor *x = glob[g];
        if (x->ndim != 1 || x->shape[0] != (uint64_t)ms->C)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s has shape %s, expected [%d] (C, from wte.weight)", path, x->name,
                      st_shape_str(x->shape, x->ndim, sh, sizeof sh), ms->C);
    }
    for (int l = 0; l < L && !rc; l++)
        for (int s = 0; s < N_HF_LAYER && !rc; s++) {
            const StTensor *x = lay[(size_t)l * N_HF_LAYER + (size_t)s];
            uint64_t want[2];
            int nd = hf_layer_shape(s, (uint64_t)ms->C, want);
            if (x->ndim != nd || x->shape[0] != want[0] || (nd == 2 && x->shape[1] != want[1]))
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s (C = %d from wte.weight%s)", path, x->name,
                          st_shape_str(x->shape, x->ndim, sh, sizeof sh), st_shape_str(want, nd, sh2, sizeof sh2), ms->C,
                          nd == 2 ? "; GPT-2's Conv1D stores (in, out)" : "");
        }
    for (int i = 0; i < n && !rc; i++) {
        int layer, s;
        if (st_classify(t[i].name, &layer, &s) && t[i].dtype == ST_OTHER)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: tensor %s has dtype %s; nanogpt reads F32, F16 and BF16", path, t[i].name, t[i].dtype_name);
    }
    if (!rc && w) rc = st_check_tied_head(t, n, glob[HF_WTE], data, path, err, errlen); /* reads the weights */
    if (!rc) rc = st_n_head(path, ms, &ms->NH, err, errlen);
    if (!rc && ms->C % ms->NH)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: n_head = %d does not divide n_embd = %d", path, ms->NH, ms->C);

    /* the packed parameter array as runs over the file, read when the arena is filled */
    size_t sizes[N_PARAM_TENSORS], off[N_PARAM_TENSORS];
    if (!rc && w) {
        param_sizes(ms, sizes);
        for (int i = 0; i < N_PARAM_TENSORS; i++) off[i] = i ? off[i - 1] + sizes[i - 1] : 0;
        w->cap_run = N_HF_GLOBAL + 1 + L * N_HF_LAYER;
        if (!(w->run = (WeightRun *)calloc((size_t)w->cap_run, sizeof *w->run))) rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path);
    }
    if (!rc && w) {
        size_t C = (size_t)ms->C, V = (size_t)ms->V;
        const int gparam[N_HF_GLOBAL] = {P_WTE, P_WPE, P_LNFW, P_LNFB};
        for (int g = 0; g < N_HF_GLOBAL; g++) {
            const StTensor *x = glob[g];
            weights_add(w, off[gparam[g]], g == HF_WTE ? V * C : g == HF_WPE ? sizes[P_WPE] : C, data + x->begin, x->dtype, 0, 0);
        }
        weights_add(w, off[P_WTE] + V * C, ((size_t)ms->Vp - V) * C, NULL, ST_F32, 0, 0);
        for (int l = 0; l < L; l++)
            for (int s = 0; s < N_HF_LAYER; s++) {
                const StTensor *x = lay[(size_t)l * N_HF_LAYER + (size_t)s];
                int pi = hf_layer_param[s];
                size_t per = sizes[pi] / (size_t)L;
                weights_add(w, off[pi] + (size_t)l * per, per, data + x->begin, x->dtype, x->ndim == 2 ? (size_t)x->shape[0] : 0,
                            x->ndim == 2 ? (size_t)x->shape[1] : 0);
            }
        w->map = map; /* kept until weights_close */
        copy_str(w->file, sizeof w->file, path);
        w->map_bytes = fsize;
        map = NULL;
    }
    free(lay);
    free(t);
    return st_fail_unmap(map, fsize, rc);
}

/* The end of a read of the whole model: open_rc is the opener's status, w what it opened when params is not
 * NULL; the weights become one fp32 array in *params (NULL on failure) and w is closed. name: the file, for errors. */
static int weights_whole(int open_rc, Weights *w, const ModelShape *ms, float **params, const char *name, char *err, size_t errlen) {
    if (!params) return open_rc;
    *params = NULL;
    if (open_rc) return open_rc;
    int rc = weights_to_f32(w, ms, params, name, err, errlen);
    weights_close(w);
    return rc;
}

/* A weights file opened by open_fn, then the whole model as one fp32 array (params NULL: the shape only) */
static int weights_read_whole(int (*open_fn)(const char *, ModelShape *, Weights *, char *, size_t), const char *path, ModelShape *ms,
                              float **params, char *err, size_t errlen) {
    Weights w;
    return weights_whole(open_fn(path, ms, params ? &w : NULL, err, errlen), &w, ms, params, path, err, errlen);
}

CLI_USED static int safetensors_read_gpt2(const char *path, ModelShape *ms, float **params, char *err, size_t errlen) {
    return weights_read_whole(safetensors_open_gpt2, path, ms, params, err, errlen);
}

/* ---- llm.c model files (llm.c's train_gpt2.py write_model): int32 header[256] = magic 20240326, version
 * (3: fp32 parameters, 5: bf16), maxT, V, L, NH, C, Vp, zeros; then the parameters in llm.c's order, which
 * is ours with biases, wte padded to Vp rows (llm.c pads to a multiple of 128, nanogpt's arena to 64: a file's
 * padding rows are skipped on reading, and export writes llm.c's). ---- */

#define LLMC_MODEL_HEADER_BYTES 1024

static int llmc_open_model(const char *path, ModelShape *ms, Weights *w, char *err, size_t errlen) {
    if (w) memset(w, 0, sizeof *w);
    void *map;
    size_t fsize = 0;
    int rc = map_file(path, &map, &fsize, err, errlen);
    if (rc) return rc;
    if (fsize < LLMC_MODEL_HEADER_BYTES)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes, too short for an llm.c model file (a %d-byte header, "
                                                                             "then the parameters): the file is truncated", path, fsize, LLMC_MODEL_HEADER_BYTES));
    int32_t h[8];
    memcpy(h, map, sizeof h);
    if (h[0] != LLMC_MODEL_MAGIC) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        int step, rank, used = 0;
        char state[160] = " (llm.c's optimizer state file, not its model file: model_<step>.bin beside it is)";
        if (sscanf(base, "state_%d_%d.bin%n", &step, &rank, &used) == 2 && used == (int)strlen(base) && step >= 0)
            snprintf(state, sizeof state, " (llm.c's optimizer state file, not its model file: model_%08d.bin beside it is)", step);
        KnownFile kind = known_file((const unsigned char *)map, fsize, 0);
        const char *what = kind == KNOWN_LLMC_DEBUG_STATE        ? " (llm.c's debug state file, not its model file)"
                           : kind == KNOWN_LLMC_STATE            ? state
                           : kind == KNOWN_LLMC_TOKENIZER        ? " (llm.c's tokenizer file, not its model file)"
                           : kind == KNOWN_LLMC_SHARD            ? " (an llm.c token data shard, not a model file)"
                           : kind == KNOWN_LLMC_LLAMA3_SHARD     ? " (an llm.c Llama 3 token shard, not a model file)"
                           : kind == KNOWN_CHECKPOINT            ? " (a nanogpt checkpoint, not an llm.c model file)"
                           : kind == KNOWN_SAFETENSORS           ? " (safetensors weights)"
                           : kind == KNOWN_ZIP                   ? " (a zip archive, as PyTorch's torch.save writes)"
                                                                 : "";
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: magic %d%s; an llm.c model file starts with %d (llm.c's gpt2_124M.bin)",
                                              path, h[0], what, LLMC_MODEL_MAGIC));
    }
    if (h[1] != 3 && h[1] != 5)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c model file version %d; nanogpt reads version 3 (fp32) and 5 "
                                                                             "(bf16): re-export it with llm.c's train_gpt2.py", path, h[1]));
    int maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    const char *bad = maxT <= 0 || V <= 0 || L <= 0 || NH <= 0 || C <= 0 ? "every size must be positive"
                      : C % NH              ? "NH must divide C"
                      : Vp < V              ? "the padded vocabulary Vp is below V"
                      : V > INT_MAX - 64    ? "V is out of range"
                      : C > 65536           ? "C is above 65536"
                                            : NULL;
    if (bad)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c header has maxT %d, V %d, L %d, NH %d, C %d, Vp %d: %s", path,
                                              maxT, V, L, NH, C, Vp, bad));
    size_t es = h[1] == 3 ? 4 : 2, sizes[N_PARAM_TENSORS];
    /* count the parameters in double first: L 12 C^2 alone can pass 2^64 and wrap param_sizes' size_t sum
     * to a small number that a short file then matches (a 1024-byte file claimed 0 parameters) */
    double dparams = (double)C * ((double)Vp + maxT + 2 + (double)L * (12.0 * C + 13));
    /* the size of the other version's data: a version field that disagrees with the data is said as such */
    double other_version_bytes = (double)LLMC_MODEL_HEADER_BYTES + dparams * (double)(6 - es);
    char version_note[120] = "";
    if ((double)fsize == other_version_bytes)
        snprintf(version_note, sizeof version_note, "; its size is exactly that of version %d (%s) data: is the version at byte offset 4 wrong?",
                 es == 4 ? 5 : 3, es == 4 ? "bf16" : "fp32");
    if (dparams * (double)es > (double)fsize)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT, "%s: %zu bytes, but its header (version %d = %s; maxT %d, V %d, L %d, "
                                                                             "NH %d, C %d, Vp %d) needs %.0f: the file is truncated or its header is wrong%s",
                                              path, fsize, h[1], es == 4 ? "fp32" : "bf16", maxT, V, L, NH, C, Vp,
                                              (double)LLMC_MODEL_HEADER_BYTES + dparams * (double)es, version_note));
    ModelShape fms = {L, NH, C, V, Vp, maxT, 1};
    size_t fparams = param_sizes(&fms, sizes);
    size_t want = LLMC_MODEL_HEADER_BYTES + fparams * es;
    if (fsize != want)
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_FORMAT,
                                              "%s: %zu bytes, but its header (version %d = %s; maxT %d, V %d, L %d, NH %d, C %d, Vp %d) needs %zu: the "
                                              "file is %s%s", path, fsize, h[1], es == 4 ? "fp32" : "bf16", maxT, V, L, NH, C, Vp, want,
                                              fsize < want ? "truncated" : "longer than the model (trailing bytes)", version_note));
    *ms = (ModelShape){L, NH, C, V, pad_vocab(V), maxT, 1};
    if (!w) return st_fail_unmap(map, fsize, NGPT_OK);
    size_t total = param_sizes(ms, sizes), wpe = (size_t)maxT * C;
    w->cap_run = 4;
    if (!(w->run = (WeightRun *)calloc((size_t)w->cap_run, sizeof *w->run)))
        return st_fail_unmap(map, fsize, fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory reading %s", path));
    const unsigned char *src = (const unsigned char *)map + LLMC_MODEL_HEADER_BYTES;
    int dt = es == 4 ? ST_F32 : ST_BF16;
    /* wte: the first V rows, then our padding (rows V..Vp-1 of the file are padding too and never used); wpe
     * a run of its own (a crop shortens it), then the rest */
    weights_add(w, 0, (size_t)V * C, src, dt, 0, 0);
    weights_add(w, (size_t)V * C, (size_t)(ms->Vp - V) * C, NULL, dt, 0, 0);
    src += (size_t)Vp * C * es;
    weights_add(w, sizes[P_WTE], wpe, src, dt, 0, 0);
    weights_add(w, sizes[P_WTE] + wpe, total - sizes[P_WTE] - wpe, src + wpe * es, dt, 0, 0);
    w->map = map; /* kept until weights_close */
    w->map_bytes = fsize;
    copy_str(w->file, sizeof w->file, path);
    return NGPT_OK;
}

CLI_USED static int llmc_read_model(const char *path, ModelShape *ms, float **params, char *err, size_t errlen) {
    return weights_read_whole(llmc_open_model, path, ms, params, err, errlen);
}

/* The descriptor that path names when it is one of this process's open files (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N); -1 otherwise. Written through that descriptor, output goes where the stream is (after what
 * `>>` or an earlier command wrote); opened by name, the file behind it would be rewritten from its start. */
CLI_USED static int own_descriptor(const char *path) {
    if (!strcmp(path, "/dev/stdout")) return 1;
    if (!strcmp(path, "/dev/stderr")) return 2;
    const char *n = !strncmp(path, "/dev/fd/", 8) ? path + 8 : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
    if (!n || !isdigit((unsigned char)*n)) return -1;
    char *end;
    long fd = strtol(n, &end, 10);
    return *end || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0 ? -1 : (int)fd;
}

/* Writes an llm.c model file (version 3 fp32, or 5 bf16 rounded to nearest even) atomically: a temporary
 * file, fsync, rename. wte is padded with zero rows to a multiple of 128, as llm.c's write_model pads it (the
 * header's Vp says so). llm.c's format always has biases; a model without them (bias = 0) is the same model as
 * one whose biases and LayerNorm biases are zero, so zeros are written in their place. */
CLI_USED static int llmc_write_model(const char *path, const ModelShape *ms, const float *params, int bf16, char *err, size_t errlen) {
    if (ms->L <= 0 || ms->NH <= 0 || ms->C <= 0 || ms->V <= 0 || ms->Vp < ms->V || ms->maxT <= 0)
        return fail(err, errlen, NGPT_ERR_ARG, "cannot export %s: bad model shape (L %d, NH %d, C %d, V %d, Vp %d, maxT %d)", path, ms->L, ms->NH,
                    ms->C, ms->V, ms->Vp, ms->maxT);
    /* a file is written under a temporary name and renamed into place (a link: into the file it names); what is no
     * file (a FIFO), and an open stream of this process (/dev/stdout, also when it is a file), is written as it is */
    char tmp[4200], dest[PATH_MAX];
    struct stat st;
    int stream = own_descriptor(path), direct = stream >= 0 || (!stat(path, &st) && !S_ISREG(st.st_mode));
    if (!lstat(path, &st) && S_ISLNK(st.st_mode) && stat(path, &st)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        return fail(err, errlen, NGPT_ERR_IO, "cannot write %s: it is a link to %s, which does not exist (the file a link names is replaced)", path, target);
    }
    if (direct || !realpath(path, dest)) copy_str(dest, sizeof dest, path);
    const char *dest_slash = strrchr(dest, '/'), *name = dest_slash ? dest_slash + 1 : dest;
    if (strlen(name) + 16 <= NAME_MAX) temporary_name(tmp, sizeof tmp, dest);
    else /* a name near the file system's limit has no room for the suffix: a short one beside it */
        snprintf(tmp, sizeof tmp, "%.*s.nanogpt_export.tmp.%d", dest_slash ? (int)(dest_slash - dest + 1) : 0, dest, (int)getpid());
    int stream_copy = stream >= 0 ? dup(stream) : -1;
    FILE *f = stream >= 0 ? (stream_copy >= 0 ? fdopen(stream_copy, "wb") : NULL) : fopen(direct ? path : tmp, "wb");
    if (!f && stream_copy >= 0) close(stream_copy);
    if (!f) { /* the error names the file asked for, not its temporary sibling */
        int e = errno, descriptor = !strncmp(path, "/dev/fd/", 8) || !strncmp(path, "/proc/self/fd/", 14);
        return fail(err, errlen, NGPT_ERR_IO, "cannot write %s: %s%s", path, strerror(e),
                    e != ENOENT ? "" : descriptor ? " (no such descriptor is open)" : " (its folder does not exist)");
    }
    int32_t h[256];
    memset(h, 0, sizeof h);
    h[0] = LLMC_MODEL_MAGIC;
    h[1] = bf16 ? 5 : 3;
    ModelShape file_shape = *ms; /* llm.c's: biases, and wte's rows padded to 128 */
    file_shape.bias = 1;
    file_shape.Vp = (int)(((long long)ms->V + 127) / 128 * 128);
    h[2] = ms->maxT; h[3] = ms->V; h[4] = ms->L; h[5] = ms->NH; h[6] = ms->C; h[7] = file_shape.Vp;
    int failed = fwrite(h, sizeof h, 1, f) != 1 ? (errno ? errno : EIO) : 0;
    size_t sizes[N_PARAM_TENSORS], file_sizes[N_PARAM_TENSORS];
    param_sizes(ms, sizes);
    param_sizes(&file_shape, file_sizes);
    enum { CHUNK = 8192 };
    uint16_t half[CHUNK];
    static const float zeros[CHUNK];
    const float *src = params;
    for (int i = 0; i < N_PARAM_TENSORS && !failed; i++) {
        /* the model's values (wte: its V rows; a bias the model does not have: none), then zeros to the file's size */
        size_t n = file_sizes[i], have = i == P_WTE ? (size_t)ms->V * ms->C : sizes[i];
        for (size_t k = 0, c; k < n && !failed; k += c) {
            c = MIN((size_t)CHUNK, (k < have ? have : n) - k);
            const float *x = k < have ? src + k : zeros;
            size_t ok;
            if (bf16) {
                for (size_t q = 0; q < c; q++) half[q] = f32_to_bf16(x[q]);
                ok = fwrite(half, 2, c, f);
            } else ok = fwrite(x, 4, c, f);
            if (ok != c) failed = errno ? errno : EIO;
        }
        src += sizes[i];
    }
    if (!failed && (fflush(f) || (!direct && fsync(fileno(f))))) failed = errno ? errno : EIO;
    if (fclose(f) && !failed) failed = errno ? errno : EIO;
    if (!failed && !direct && rename(tmp, dest)) failed = errno ? errno : EIO;
    if (direct) return failed ? fail(err, errlen, NGPT_ERR_IO, "writing %s failed: %s", path, strerror(failed)) : NGPT_OK;
    if (failed) {
        unlink(tmp);
        return fail(err, errlen, NGPT_ERR_IO, "writing %s failed: %s", path, strerror(failed));
    }
    sync_folder_of(dest);
    return NGPT_OK;
}

/* ---- which reader: by content ---- */

/* Opens GPT-2 weights at path: an llm.c model file (by its magic), a safetensors file, or a folder holding
 * model.safetensors (and config.json), as Hugging Face's downloads are laid out. w NULL: the shape only. */
static int pretrained_open_file(const char *path, ModelShape *ms, Weights *w, char *err, size_t errlen) {
    if (w) memset(w, 0, sizeof *w);
    struct stat st;
    if (stat(path, &st)) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        char file[4200];
        snprintf(file, sizeof file, "%.4000s/model.safetensors", path);
        if (stat(file, &st))
            return fail(err, errlen, NGPT_ERR_IO, "%s is a folder without model.safetensors: download model.safetensors and config.json from "
                                                   "Hugging Face (e.g. huggingface.co/gpt2) into it", path);
        return safetensors_open_gpt2(file, ms, w, err, errlen);
    }
    if (!S_ISREG(st.st_mode)) /* a pipe: its head, read here, would be gone for the reader */
        return fail(err, errlen, NGPT_ERR_ARG, "%s is no regular file (a pipe, <(...)): model files and checkpoints are read more than once; "
                                               "save it to a file and pass that", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char head[9] = {0};
    ssize_t got = pread(fd, head, sizeof head, 0);
    close(fd);
    int32_t magic;
    memcpy(&magic, head, 4);
    if (got >= 8 && !memcmp(head, CKPT_MAGIC, 8))
        return fail(err, errlen, NGPT_ERR_ARG, "%s is a nanogpt checkpoint, not pretrained weights: continue its run with init_from = resume and "
                                               "its folder as out_dir; sampling reads it as it is (`nanogpt sample --init_from=%s`), and "
                                               "`nanogpt export` makes an llm.c model file of it to start new runs from", path, path);
    if (got >= 4 && magic == LLMC_MODEL_MAGIC) return llmc_open_model(path, ms, w, err, errlen);
    if (got == 9 && head[8] == '{') return safetensors_open_gpt2(path, ms, w, err, errlen);
    if (got >= 4 && !memcmp(head, "PK\3\4", 4))
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s is a zip archive, as PyTorch's torch.save writes (nanoGPT's ckpt.pt): nanogpt reads no "
                                                   "PyTorch files; its weights come from safetensors (Hugging Face's GPT-2 layout) or llm.c "
                                                   "model files", path);
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".bin")) return llmc_open_model(path, ms, w, err, errlen); /* its errors say why */
    if (n > 12 && !strcmp(path + n - 12, ".safetensors")) return safetensors_open_gpt2(path, ms, w, err, errlen);
    return fail(err, errlen, NGPT_ERR_FORMAT, "%s is neither an llm.c model file (magic %d) nor safetensors (a JSON header after 8 bytes)", path,
                LLMC_MODEL_MAGIC);
}

/* pretrained_open_file, and a shape outside the config's ranges refused: trained, its checkpoints would load
 * nowhere (an llm.c header of 2000 layers trained, and resume and sample refused what it saved) */
static int pretrained_open_path(const char *path, ModelShape *ms, Weights *w, char *err, size_t errlen) {
    int rc = pretrained_open_file(path, ms, w, err, errlen);
    if (rc) return rc;
    const struct { const char *key; int value; } sizes[] = {
        {"n_layer", ms->L}, {"n_head", ms->NH}, {"n_embd", ms->C}, {"vocab_size", ms->V}, {"block_size", ms->maxT}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !rc; i++) {
        double hi = config_find(sizes[i].key)->hi;
        if (sizes[i].value > hi) {
            if (w) weights_close(w);
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: the model's %s is %d; nanogpt trains and saves models with %s in [1, %.0f]", path,
                      sizes[i].key, sizes[i].value, sizes[i].key, hi);
        }
    }
    return rc;
}

/* nanoGPT's crop_block_size: keeps the first T rows of wpe (T <= maxT), moving the tensors after it (params
 * NULL: the shape only). */
static int pretrained_crop(ModelShape *ms, float *params, int T, char *err, size_t errlen) {
    if (T <= 0 || T > ms->maxT)
        return fail(err, errlen, NGPT_ERR_ARG, "block_size = %d: the pretrained model has %d positions, so 1..%d", T, ms->maxT, ms->maxT);
    if (!params) { ms->maxT = T; return NGPT_OK; }
    size_t sizes[N_PARAM_TENSORS];
    size_t total = param_sizes(ms, sizes), C = (size_t)ms->C;
    size_t after = sizes[P_WTE] + sizes[P_WPE];
    memmove(params + sizes[P_WTE] + (size_t)T * C, params + after, (total - after) * sizeof(float));
    ms->maxT = T;
    return NGPT_OK;
}

/* The weights file of one of GPT-2's names (init_from): <pretrained_dir>/<name>/model.safetensors into file, or
 * an error saying how to download it when it is not there */
static int gpt2_weights_file(const char *name, const char *pretrained_dir, char *file, size_t cap, char *err, size_t errlen) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%.4000s/%s", pretrained_dir && *pretrained_dir ? pretrained_dir : "pretrained", name);
    snprintf(file, cap, "%s/model.safetensors", dir);
    struct stat st;
    if (stat(file, &st))
        return fail(err, errlen, NGPT_ERR_IO,
                    "init_from = %s reads %s (with config.json beside it), which does not exist: download both from Hugging Face, e.g. "
                    "`huggingface-cli download openai-community/%s model.safetensors config.json --local-dir %s`, or set pretrained_dir",
                    name, file, name, dir);
    return NGPT_OK;
}

/* llm.c's model descriptor dN (train_gpt2.cu's -e d12): a new GPT-2 of N layers, with the channels and heads llm.c
 * gives that depth. 1 with the shape, -1 for a dN llm.c has no shape for, 0 for any other text. */
static int llmc_descriptor(const char *s, int *L, int *NH, int *C) {
    static const int shapes[][3] = {{6, 6, 384},     {12, 12, 768},   {24, 16, 1024}, {36, 20, 1280},
                                    {48, 25, 1600},  {60, 30, 1920},  {72, 30, 2880}, {84, 36, 3456}}; /* layers, heads, channels */
    int depth = 0, used = 0;
    if (s[0] != 'd' || !isdigit((unsigned char)s[1]) || sscanf(s, "d%d%n", &depth, &used) != 1 || used != (int)strlen(s)) return 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        if (depth == shapes[k][0]) {
            *L = shapes[k][0], *NH = shapes[k][1], *C = shapes[k][2];
            return 1;
        }
    return -1;
}

/* What init_from names: "gpt2", "gpt2-medium", "gpt2-large" and "gpt2-xl" are Hugging Face downloads in
 * <pretrained_dir>/<name>/ (model.safetensors and config.json; pretrained_dir NULL or "" = "pretrained");
 * anything else is a path for pretrained_open_path. Its shape into ms, and unless w is NULL its weights as runs
 * over the mapped file (weights_close releases them); w NULL: the shape only, which for the four names is
 * GPT-2's and needs no file. */
static int pretrained_open(const char *init_from, const char *pretrained_dir, ModelShape *ms, Weights *w, char *err, size_t errlen) {
    if (w) memset(w, 0, sizeof *w);
    for (int i = 0; i < 4; i++) {
        if (strcmp(init_from, gpt2_sizes[i].name)) continue;
        if (!w) {
            *ms = (ModelShape){gpt2_sizes[i].L, gpt2_sizes[i].NH, gpt2_sizes[i].C, 50257, pad_vocab(50257), 1024, 1};
            return NGPT_OK;
        }
        char file[4300];
        int rc = gpt2_weights_file(init_from, pretrained_dir, file, sizeof file, err, errlen);
        return rc ? rc : safetensors_open_gpt2(file, ms, w, err, errlen);
    }
    struct stat st;
    if (stat(init_from, &st)) {
        int e = errno, L, NH, C, known = llmc_descriptor(init_from, &L, &NH, &C); /* llm.c's -e d12: a new model of 12 layers */
        char descriptor[200] = "";
        if (known > 0)
            snprintf(descriptor, sizeof descriptor, " (llm.c's d%d is a new model: --init_from=scratch --n_layer=%d --n_head=%d --n_embd=%d --bias=True)",
                     L, L, NH, C);
        else if (known < 0)
            snprintf(descriptor, sizeof descriptor, " (llm.c's descriptors dN are d6, d12, d24, d36, d48, d60, d72 and d84)");
        return fail(err, errlen, NGPT_ERR_ARG,
                    "init_from = %s: %s%s; init_from is scratch, resume, gpt2, gpt2-medium, gpt2-large, gpt2-xl, or the path of weights "
                    "(a .safetensors file, a folder holding model.safetensors, an llm.c model file)", init_from, strerror(e), descriptor);
    }
    return pretrained_open_path(init_from, ms, w, err, errlen);
}

CLI_USED static int pretrained_read(const char *path, ModelShape *ms, float **params, char *err, size_t errlen) {
    return weights_read_whole(pretrained_open_path, path, ms, params, err, errlen);
}

/* pretrained_open, then the whole model as one fp32 array (params NULL: the shape only): for export */
static int pretrained_load(const char *init_from, const char *pretrained_dir, ModelShape *ms, float **params, char *err, size_t errlen) {
    Weights w;
    return weights_whole(pretrained_open(init_from, pretrained_dir, ms, params ? &w : NULL, err, errlen), &w, ms, params, init_from, err, errlen);
}

/* ======================================================================================================
 * Checkpoints (docs/formats.md): magic "ngptckpt", a version, a table of sections each with its own
 * checksum, then the sections: the config, the model shape, the training state (step, RNG position, best
 * val loss), the fp32 parameters and the AdamW moments. Written to a temporary file, fsynced and renamed,
 * so a crash or a full disk leaves the previous checkpoint whole.
 * ==================================================================================================== */

#define CKPT_VERSION 1
enum { SEC_CONFIG = 1, SEC_MODEL, SEC_STATE, SEC_PARAMS, SEC_ADAM_M, SEC_ADAM_V, N_SECTIONS = 6 };
static const char *const section_names[N_SECTIONS + 1] = {"", "config", "model", "state", "parameters", "AdamW m", "AdamW v"};

typedef struct {
    uint32_t id, reserved;
    uint64_t offset, bytes, checksum;
} CkptSection;

typedef struct {
    char magic[8];
    uint32_t version, nsections;
    CkptSection sec[N_SECTIONS];
} CkptHeader;

typedef struct {
    int32_t L, NH, C, V, Vp, maxT, bias, reserved;
} CkptModel;

typedef struct {
    int64_t step, eval_count, rng_train_counter, seed;
    double best_val_loss, last_loss;
    double loss_scale;  /* fp16's dynamic loss scale; 0 in checkpoints written before it was stored */
    int64_t good_steps; /* fp16: steps since the scale last changed */
    int64_t chars;      /* the character vocabulary's checksum (chars_checksum); 0: none, or a file written before it was stored */
    int64_t chars_n;    /* ... over its chars_n characters */
    int64_t moment_bits; /* the AdamW moments' precision in the run, 32 or 16 (the section holds them as fp32 either way) */
} CkptState;
/* a state section as files written before moment_bits was stored hold it (read with moment_bits 0: not known) */
#define CKPT_STATE_BYTES_BEFORE_MOMENT_BITS offsetof(CkptState, moment_bits)

/* FNV-1a over little-endian 64-bit words, then the remaining bytes and the length; streaming. */
typedef struct {
    uint64_t h, len;
    unsigned char buf[8];
    int nbuf;
} Hash64;
#define FNV_PRIME 0x100000001B3ull
static void hash_init(Hash64 *s) { memset(s, 0, sizeof *s); s->h = 0xCBF29CE484222325ull; }
static void hash_update(Hash64 *s, const void *data, size_t n) {
    const unsigned char *b = (const unsigned char *)data;
    s->len += n;
    while (n && s->nbuf) {
        s->buf[s->nbuf++] = *b++;
        n--;
        if (s->nbuf == 8) { uint64_t w; memcpy(&w, s->buf, 8); s->h = (s->h ^ w) * FNV_PRIME; s->nbuf = 0; }
    }
    for (; n >= 8; b += 8, n -= 8) { uint64_t w; memcpy(&w, b, 8); s->h = (s->h ^ w) * FNV_PRIME; }
    memcpy(s->buf + s->nbuf, b, n); /* n < 8 and nbuf == 0 here */
    s->nbuf += (int)n;
}
static uint64_t hash_final(const Hash64 *s) {
    uint64_t h = s->h;
    for (int i = 0; i < s->nbuf; i++) h = (h ^ s->buf[i]) * FNV_PRIME;
    return (h ^ s->len) * FNV_PRIME;
}

/* The checksum (never 0) of a character vocabulary's first n characters: their code points as uint32, hashed as
 * a checkpoint section is. A checkpoint keeps its run's, so that a folder prepared again from other text (with as
 * many characters or not) is not taken for the vocabulary the model learned: its ids would read as other
 * characters. */
static int64_t chars_checksum(const CharVocab *v, int n) {
    Hash64 h;
    hash_init(&h);
    hash_update(&h, v->cp, (size_t)n * sizeof v->cp[0]);
    uint64_t x = hash_final(&h);
    return (int64_t)(x ? x : 1);
}

/* Whether v still gives a checkpoint's ids the characters its run trained them as: its first chars_n characters
 * are the run's (characters added after them take ids the run left unused). A checkpoint without characters (no
 * meta.bin, or a file written before they were kept) is not checked. */
static int chars_still_match(const CkptState *st, const CharVocab *v) {
    return !st->chars || (st->chars_n > 0 && st->chars_n <= v->n && chars_checksum(v, (int)st->chars_n) == st->chars);
}

/* The refusal of a checkpoint (path) whose characters v no longer holds (chars_still_match): dir is the data
 * folder read now, trained_dir the one its run read ("" when unknown), what_to_do the way out */
static int chars_changed_error(char *err, size_t errlen, const char *path, const char *dir, const CharVocab *v, const char *trained_dir,
                               const char *what_to_do) {
    char trained[400] = "";
    if (trained_dir[0]) snprintf(trained, sizeof trained, " (its run read %.300s)", trained_dir);
    return fail(err, errlen, NGPT_ERR_ARG, "%s was trained on other characters than %s/%s holds (%d)%s: its ids would read as other "
                                           "characters; the folder was prepared again from other text since, or is another dataset's. %s",
                path, dir, v->file_name, v->n, trained, what_to_do);
}

/* Checkpoints are written with plain file descriptors (no stdio buffers): saving during training
 * allocates nothing. */
typedef struct {
    int fd;
    uint64_t offset;
    Hash64 hash;
    int failed; /* errno of the first failure */
} CkptWriter;

static void ckpt_put(CkptWriter *w, const void *p, size_t n) {
    if (w->failed || !n) return;
    hash_update(&w->hash, p, n);
    const char *b = (const char *)p;
    while (n) {
        ssize_t k = write(w->fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { w->failed = k < 0 ? errno : ENOSPC; return; }
        b += k;
        n -= (size_t)k;
        w->offset += (uint64_t)k;
    }
}

/* a tensor block (n values of esize bytes on the device) as fp32, through the staging buffer */
static void ckpt_put_tensor(ngpt_trainer *tr, CkptWriter *w, const void *src, size_t n, size_t esize) {
    float *stage = (float *)tr->h_staging;
    size_t per = HOST_STAGING_BYTES / 8;
    for (size_t i = 0; i < n; i += per) {
        size_t k = MIN(per, n - i);
        if (esize == 4) tr->be->download(tr->be, stage, (const char *)src + i * 4, k * 4);
        else {
            uint16_t *raw = (uint16_t *)(stage + per);
            tr->be->download(tr->be, raw, (const char *)src + i * 2, k * 2);
            for (size_t j = 0; j < k; j++) stage[j] = bf16_to_f32(raw[j]);
        }
        ckpt_put(w, stage, k * 4);
    }
}

static void ckpt_begin_section(CkptWriter *w, CkptHeader *h, int id) {
    CkptSection *s = &h->sec[id - 1];
    s->id = (uint32_t)id;
    s->offset = w->offset;
    hash_init(&w->hash);
}
static void ckpt_end_section(CkptWriter *w, CkptHeader *h, int id) {
    CkptSection *s = &h->sec[id - 1];
    s->bytes = w->offset - s->offset;
    s->checksum = hash_final(&w->hash);
}

static int mkdir_p(const char *dir) {
    char buf[512];
    if (strlen(dir) >= sizeof buf) { errno = ENAMETOOLONG; return -1; } /* cut short, it would make another folder */
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf[0] ? buf + 1 : buf; *p; p++)
        if (*p == '/') {
            *p = 0;
            int failed = mkdir(buf, 0777) && errno != EEXIST; /* the first failure's reason, not a later ENOENT */
            *p = '/';
            if (failed) return -1;
        }
    return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* The length of dir's first part that does not exist (up to a '/', or the whole): the first folder mkdir_p(dir)
 * makes; 0 when dir exists */
static size_t first_missing_folder(const char *dir) {
    char buf[512];
    size_t n = strlen(dir);
    if (n >= sizeof buf || file_exists(dir)) return 0;
    /* a .. part may lead back into folders that were there (new/../data): nothing is removed then */
    for (const char *p = dir; (p = strstr(p, "..")) != NULL; p++)
        if ((p == dir || p[-1] == '/') && (p[2] == '/' || !p[2])) return 0;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i < n; i++)
        if (buf[i] == '/' && buf[i - 1] != '/') {
            buf[i] = 0;
            int there = file_exists(buf);
            buf[i] = '/';
            if (!there) return i;
        }
    return n;
}
/* The first part of path dir (into buf, cap bytes) that is there and is no folder (a file, not a folder, where
 * mkdir_p would make one): 2 when that is dir itself (trailing slashes aside), 1 when it is above dir; 0 when there
 * is none */
CLI_USED static int file_above(const char *dir, char *buf, size_t cap) {
    size_t n = strlen(dir);
    if (n >= cap) return 0;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if ((buf[i] == '/' || !buf[i]) && buf[i - 1] != '/') {
            char c = buf[i];
            struct stat st;
            buf[i] = 0;
            if (!stat(buf, &st) && !S_ISDIR(st.st_mode)) return dir[i + strspn(dir + i, "/")] ? 1 : 2;
            buf[i] = c;
        }
    return 0;
}

/* After a failure: removes the folders mkdir_p(dir) made (from dir's first made_from bytes on, as
 * first_missing_folder said before), deepest first, each only while it is empty */
static void rmdir_made(const char *dir, size_t made_from) {
    char buf[512];
    size_t n = strlen(dir);
    if (!made_from || n >= sizeof buf) return;
    memcpy(buf, dir, n + 1);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0; /* out/: out */
    while (n >= made_from && rmdir(buf) == 0) {
        do { /* up to the parent's end, past any . part (new/./x) */
            while (n > 0 && buf[n - 1] != '/') n--;
            while (n > 0 && buf[n - 1] == '/') n--;
            buf[n] = 0;
        } while (n > 0 && buf[n - 1] == '.' && (n == 1 || buf[n - 2] == '/'));
    }
}

static int resume_checkpoint(const char *dir, char *path, size_t cap);

/* The file name of path when path is a file of the trainer's out_dir (as the trainer's saves write it: out_dir/NAME);
 * NULL otherwise */
static const char *name_in_out_dir(const ngpt_trainer *tr, const char *path) {
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    char folder[PATH_MAX];
    struct stat in, out;
    if (!*name || (slash ? (size_t)(slash - path) : 1) >= sizeof folder) return NULL;
    if (slash) snprintf(folder, sizeof folder, "%.*s", slash == path ? 1 : (int)(slash - path), path); /* "/x": the root */
    else snprintf(folder, sizeof folder, ".");
    /* the same folder, however each is spelt (out/ and ./out): its device and inode */
    return !stat(folder, &in) && !stat(tr->cfg.out_dir, &out) && in.st_dev == out.st_dev && in.st_ino == out.st_ino ? name : NULL;
}

/* Creates the file a save writes before renaming it over path: path.tmp.PID.K, the first K that names no file (O_EXCL),
 * so saves to one path at once, from threads or processes, each write their own and none replaces another file
 * (nanogpt_save.tmp.PID.K beside it for a file name with no room for the suffix); -1 (errno) when it cannot */
static int checkpoint_temporary_open(const char *path, char *tmp, size_t cap) {
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    const int folder = slash ? (int)(slash - path + 1) : 0, own_name = strlen(name) + 24 > NAME_MAX;
    for (int k = 0; k < 1000; k++) {
        int n = own_name ? snprintf(tmp, cap, "%.*snanogpt_save.tmp.%ld.%d", folder, path, (long)getpid(), k)
                         : snprintf(tmp, cap, "%s.tmp.%ld.%d", path, (long)getpid(), k);
        if (n < 0 || (size_t)n >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1; /* errno EEXIST */
}

/* Writes the trainer's whole state to path (atomically); never a model with non-finite weights. */
static int checkpoint_write(ngpt_trainer *tr, const char *path) {
    double wn = tr->be->norm_sq(tr->be, tr->params, tr->plan.nparams_padded);
    int failed = be_check(tr, "the check of the parameters before a save"); /* a failed device gives NaN too: its error, not "NaN" */
    if (failed) return failed;
    if (!isfinite(wn))
        return tr_fail(tr, NGPT_ERR_NUMERIC, "the parameters hold NaN or Inf: %s was not written, the previous checkpoints are kept", path);
    char tmp[620];
    if (strlen(path) > 580) /* the longest whose temporary file's name fits */
        return tr_fail(tr, NGPT_ERR_ARG, "cannot save %.80s...: the path is %zu bytes long, more than the 580 a checkpoint's path may have",
                       path, strlen(path));
    CkptWriter w = {checkpoint_temporary_open(path, tmp, sizeof tmp), 0, {0, 0, {0}, 0}, 0};
    if (w.fd < 0) return tr_fail(tr, NGPT_ERR_IO, "cannot create checkpoint %s (written first as %s): %s", path, tmp, strerror(errno));
    CkptHeader h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.nsections = N_SECTIONS;
    ckpt_put(&w, &h, sizeof h); /* placeholder, rewritten last */

    ckpt_begin_section(&w, &h, SEC_CONFIG);
    char line[600];
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) ckpt_put(&w, line, (size_t)config_line(&tr->cfg, i, 0, line, sizeof line)); /* read back raw */
    ckpt_end_section(&w, &h, SEC_CONFIG);

    ckpt_begin_section(&w, &h, SEC_MODEL);
    CkptModel m = {tr->ms.L, tr->ms.NH, tr->ms.C, tr->ms.V, tr->ms.Vp, tr->ms.maxT, tr->ms.bias, 0};
    ckpt_put(&w, &m, sizeof m);
    ckpt_end_section(&w, &h, SEC_MODEL);

    ckpt_begin_section(&w, &h, SEC_STATE);
    CkptState st;
    memset(&st, 0, sizeof st);
    st.step = tr->step;
    st.eval_count = tr->eval_count;
    st.rng_train_counter = (int64_t)tr->rng_train.counter;
    st.seed = tr->cfg.seed;
    st.best_val_loss = tr->best_val_loss;
    st.last_loss = tr->last_loss;
    st.loss_scale = tr->loss_scale;
    st.good_steps = tr->good_steps;
    st.chars = tr->charvocab ? chars_checksum(tr->charvocab, tr->charvocab->n) : 0;
    st.chars_n = tr->charvocab ? tr->charvocab->n : 0;
    st.moment_bits = tr->plan.moments_dtype == NGPT_DTYPE_BF16 ? 16 : 32;
    ckpt_put(&w, &st, sizeof st);
    ckpt_end_section(&w, &h, SEC_STATE);

    int ids[3] = {SEC_PARAMS, SEC_ADAM_M, SEC_ADAM_V};
    void *bases[3] = {tr->master, tr->m, tr->v};
    size_t esizes[3] = {4, tr->plan.moment_bytes, tr->plan.moment_bytes};
    for (int k = 0; k < 3; k++) {
        ckpt_begin_section(&w, &h, ids[k]);
        for (int i = 0; i < N_PARAM_TENSORS; i++)
            ckpt_put_tensor(tr, &w, tensor_at(tr, bases[k], i, esizes[k]), tr->plan.param_len[i], esizes[k]);
        ckpt_end_section(&w, &h, ids[k]);
    }
    /* the backend first: a download that failed left the staging buffer's old bytes in the file, with checksums that
     * vouch for them, so nothing is renamed over path then */
    int rc = be_check(tr, "writing a checkpoint");
    if (!rc && !w.failed && pwrite(w.fd, &h, sizeof h, 0) != (ssize_t)sizeof h) w.failed = errno ? errno : EIO;
    if (!rc && !w.failed && fsync(w.fd)) w.failed = errno ? errno : EIO;
    if (close(w.fd) && !w.failed) w.failed = errno ? errno : EIO;
    if (!rc && !w.failed && rename(tmp, path)) w.failed = errno ? errno : EIO;
    if (w.failed || rc) {
        unlink(tmp);
        if (rc) return rc;
        /* into out_dir: whether the run has a checkpoint to fall back on; elsewhere (ngpt_save) the file as it was */
        char earlier[600];
        return tr_fail(tr, NGPT_ERR_IO, "writing checkpoint %s failed: %s; %s", path, strerror(w.failed),
                       !name_in_out_dir(tr, path) ? "the file is as it was before"
                       : resume_checkpoint(tr->cfg.out_dir, earlier, sizeof earlier) ? "the earlier checkpoints are untouched"
                                                                                      : "no checkpoint was saved before it");
    }
    sync_folder_of(path); /* the rename for good: checkpoint_save prunes older checkpoints after it */
    return NGPT_OK;
}

typedef struct {
    FILE *f;
    CkptHeader h;
    CkptModel model;
    CkptState state;
} CkptReader;

#define CKPT_CONFIG_MAX (1u << 20) /* bytes of the stored config a reader accepts */

static int checksum_mismatch(char *err, size_t errlen, const char *path, int id, const CkptSection *s) {
    return fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s section (offset %llu, %llu bytes): checksum mismatch (the file is corrupt)", path,
                section_names[id], (unsigned long long)s->offset, (unsigned long long)s->bytes);
}

/* A model section nanogpt could have written: each field in its config key's range (a resume's or a sample's config
 * then holds it: a resume once planned n_layer 2000000), the padded vocabulary pad_vocab's, heads dividing n_embd, the
 * reserved word 0. The error names the field, its byte in the file and what it may be. */
static int checkpoint_model_check(const CkptModel *m, const char *path, uint64_t at, char *err, size_t errlen) {
    static const struct { const char *key; size_t offset; } fields[] = {
        {"n_layer", offsetof(CkptModel, L)}, {"n_head", offsetof(CkptModel, NH)}, {"n_embd", offsetof(CkptModel, C)},
        {"vocab_size", offsetof(CkptModel, V)}, {"block_size", offsetof(CkptModel, maxT)}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int32_t v;
        memcpy(&v, (const char *)m + fields[i].offset, sizeof v);
        double hi = config_find(fields[i].key)->hi;
        if (v < 1 || v > hi)
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: model section, byte %llu: %s %d outside [1, %.0f]", path,
                        (unsigned long long)(at + fields[i].offset), fields[i].key, v, hi);
    }
    if (m->C % m->NH)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: model section, byte %llu: n_embd %d is not a multiple of n_head %d", path,
                    (unsigned long long)(at + offsetof(CkptModel, C)), m->C, m->NH);
    if (m->Vp != pad_vocab(m->V))
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: model section, byte %llu: padded vocabulary %d; vocab_size %d pads to %d", path,
                    (unsigned long long)(at + offsetof(CkptModel, Vp)), m->Vp, m->V, pad_vocab(m->V));
    if (m->bias & ~1)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: model section, byte %llu: bias %d; it is 0 or 1", path,
                    (unsigned long long)(at + offsetof(CkptModel, bias)), m->bias);
    if (m->reserved)
        return fail(err, errlen, NGPT_ERR_FORMAT, "%s: model section, byte %llu: reserved word %d; nanogpt writes 0", path,
                    (unsigned long long)(at + offsetof(CkptModel, reserved)), m->reserved);
    return NGPT_OK;
}

/* Opens a checkpoint and checks its header, section table, model and state sections. */
static int checkpoint_open(CkptReader *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (regular_or_missing(path, "checkpoint", err, errlen)) return NGPT_ERR_IO;
    r->f = fopen(path, "rb");
    if (!r->f) return fail(err, errlen, NGPT_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(r->f), &st)) {
        int e = errno;
        fclose(r->f);
        r->f = NULL;
        return fail(err, errlen, NGPT_ERR_IO, "cannot stat checkpoint %s: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)st.st_size, end = sizeof r->h;
    int rc = NGPT_OK;
    size_t got = fread(&r->h, 1, sizeof r->h, r->f);
    if (got < 8 || memcmp(r->h.magic, CKPT_MAGIC, 8))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a nanogpt checkpoint (no '%s' magic; %llu bytes)", path, CKPT_MAGIC,
                  (unsigned long long)size);
    else if (got < sizeof r->h) /* a copy cut short: its magic is there */
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: a nanogpt checkpoint cut short (truncated?): %llu bytes, and its header alone is %zu", path,
                  (unsigned long long)size, sizeof r->h);
    else if (r->h.version != CKPT_VERSION)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s is checkpoint version %u; this build reads version %d", path, r->h.version, CKPT_VERSION);
    else if (r->h.nsections != N_SECTIONS)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %u sections, expected %d", path, r->h.nsections, N_SECTIONS);
    for (int i = 0; i < N_SECTIONS && !rc; i++) {
        const CkptSection *s = &r->h.sec[i];
        if (s->id != (uint32_t)(i + 1) || s->reserved)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: section table entry %d (bytes %zu..%zu) reads id %u, reserved %u; expected id %d, reserved 0",
                      path, i + 1, offsetof(CkptHeader, sec) + (size_t)i * sizeof *s, offsetof(CkptHeader, sec) + (size_t)(i + 1) * sizeof *s - 1,
                      s->id, s->reserved, i + 1);
        else if (s->offset < sizeof r->h || s->offset > size || s->bytes > size - s->offset)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: section %d (%s) at offset %llu with %llu bytes lies outside the %llu-byte file (truncated?)",
                      path, i + 1, section_names[i + 1], (unsigned long long)s->offset, (unsigned long long)s->bytes, (unsigned long long)size);
        else end = MAX(end, s->offset + s->bytes);
    }
    if (!rc && end != size) /* nanogpt writes the sections back to back up to the end of the file */
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %llu bytes after the last section, which ends at offset %llu (the file has %llu bytes: "
                  "appended to, or two files joined?)", path, (unsigned long long)(size - end), (unsigned long long)end,
                  (unsigned long long)size);
    /* the small sections: read (model, state) or hashed through (config) and verified now */
    struct { int id; void *dst; size_t n; } small[3] = {
        {SEC_CONFIG, NULL, 0}, {SEC_MODEL, &r->model, sizeof r->model}, {SEC_STATE, &r->state, sizeof r->state}};
    for (int k = 0; k < 3 && !rc; k++) {
        const CkptSection *s = &r->h.sec[small[k].id - 1];
        size_t n = small[k].n;
        if (small[k].id == SEC_STATE && s->bytes == CKPT_STATE_BYTES_BEFORE_MOMENT_BITS) n = (size_t)s->bytes;
        if (small[k].dst && s->bytes != n) {
            char older[96] = "";
            if (small[k].id == SEC_STATE)
                snprintf(older, sizeof older, " (%zu in files written before it stored the moments' precision)",
                         (size_t)CKPT_STATE_BYTES_BEFORE_MOMENT_BITS);
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s section (offset %llu) has %llu bytes; nanogpt writes %zu%s", path,
                      section_names[small[k].id], (unsigned long long)s->offset, (unsigned long long)s->bytes, n, older);
            break;
        }
        if (!small[k].dst && (s->bytes == 0 || s->bytes > CKPT_CONFIG_MAX)) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: config section (offset %llu) has %llu bytes, outside [1, %u]: nanogpt writes every "
                      "key there", path, (unsigned long long)s->offset, (unsigned long long)s->bytes, CKPT_CONFIG_MAX);
            break;
        }
        Hash64 hs;
        hash_init(&hs);
        int bad = fseek(r->f, (long)s->offset, SEEK_SET) != 0;
        if (!bad && small[k].dst) {
            bad = fread(small[k].dst, n, 1, r->f) != 1;
            hash_update(&hs, small[k].dst, n);
        }
        for (uint64_t done = 0; !bad && !small[k].dst && done < s->bytes;) {
            char buf[4096];
            size_t want = (size_t)MIN((uint64_t)sizeof buf, s->bytes - done);
            bad = fread(buf, 1, want, r->f) != want;
            hash_update(&hs, buf, want);
            done += want;
        }
        if (bad) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s section unreadable", path, section_names[small[k].id]);
        else if (hash_final(&hs) != s->checksum) rc = checksum_mismatch(err, errlen, path, small[k].id, s);
    }
    if (!rc) rc = checkpoint_model_check(&r->model, path, r->h.sec[SEC_MODEL - 1].offset, err, errlen);
    const CkptState *state = &r->state;
    const uint64_t state_at = r->h.sec[SEC_STATE - 1].offset;
    const int has_moment_bits = r->h.sec[SEC_STATE - 1].bytes == sizeof *state;
    /* the integers: each in the range a run gives it (the data generator's position and the seed as int64, never
     * negative; the characters at most the model's vocabulary) */
    const struct { const char *what; size_t offset; int64_t lo, hi; } ints[] = {
        {"step", offsetof(CkptState, step), 0, 2000000001LL}, /* after step max_iters (at most 2e9): max_iters + 1 */
        {"evaluation count", offsetof(CkptState, eval_count), 0, INT_MAX},
        {"training-data generator position", offsetof(CkptState, rng_train_counter), 0, INT64_MAX},
        {"seed", offsetof(CkptState, seed), 0, INT64_MAX},
        {"fp16 good-step count", offsetof(CkptState, good_steps), 0, INT_MAX},
        {"character count", offsetof(CkptState, chars_n), 0, r->model.V}};
    for (size_t i = 0; !rc && i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v;
        memcpy(&v, (const char *)state + ints[i].offset, sizeof v);
        if (v < ints[i].lo || v > ints[i].hi)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: state section, byte %llu: %s %lld outside [%lld, %lld]", path,
                      (unsigned long long)(state_at + ints[i].offset), ints[i].what, (long long)v, (long long)ints[i].lo,
                      (long long)ints[i].hi);
    }
    if (!rc && (state->chars == 0) != (state->chars_n == 0))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: state section, byte %llu: character checksum %lld with %lld characters (both are 0 or "
                                                "neither is)", path, (unsigned long long)(state_at + offsetof(CkptState, chars)),
                  (long long)state->chars, (long long)state->chars_n);
    if (!rc && has_moment_bits && state->moment_bits != 16 && state->moment_bits != 32)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: state section, byte %llu: AdamW moments' precision %lld bits; it is 32 or 16", path,
                  (unsigned long long)(state_at + offsetof(CkptState, moment_bits)), (long long)state->moment_bits);
    if (!rc && !(state->best_val_loss >= 0 && state->best_val_loss <= FLT_MAX))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: state section, byte %llu: best val loss %g outside [0, %g]", path,
                  (unsigned long long)(state_at + offsetof(CkptState, best_val_loss)), state->best_val_loss, (double)FLT_MAX);
    if (!rc && (state->loss_scale != 0 && !(state->loss_scale >= 1 && state->loss_scale <= 1e30)))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: state section, byte %llu: fp16 loss scale %g outside [1, 1e30] (0 = not stored)", path,
                  (unsigned long long)(state_at + offsetof(CkptState, loss_scale)), state->loss_scale);
    if (rc) { fclose(r->f); r->f = NULL; }
    return rc;
}

/* One big section (parameters, a moment): its size checked against the model, the file at its start, its
 * hash begun. */
static int checkpoint_section_start(ngpt_trainer *tr, CkptReader *r, const char *path, int id, Hash64 *hs) {
    const CkptSection *s = &r->h.sec[id - 1];
    if (s->bytes != (uint64_t)tr->plan.nparams * 4)
        return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section has %llu bytes, the model needs %zu", path, section_names[id],
                       (unsigned long long)s->bytes, tr->plan.nparams * 4);
    if (fseek(r->f, (long)s->offset, SEEK_SET)) return tr_fail(tr, NGPT_ERR_IO, "%s: seek failed", path);
    hash_init(hs);
    return NGPT_OK;
}

/* Reads one big section into the device tensors at bases (esize bytes per value), checking its size and
 * checksum. */
/* A value a tensor section never holds as nanogpt saves it: a parameter or m that is not finite, a v that is NaN or
 * below zero (+Inf is one: g * g past FLT_MAX with grad_clip = 0). Bits, so the scan below vectorises. */
static int ckpt_value_bad(int id, uint32_t u) {
    if (id != SEC_ADAM_V) return (u & 0x7f800000u) == 0x7f800000u;
    return ((u & 0x7fffffffu) > 0x7f800000u) | (u > 0x80000000u);
}
typedef struct {
    int found;
    size_t at; /* element of the section */
    float value;
} CkptBadValue;
/* the first bad value of x (k of them, from element `first` of section id: its tensors one after another) into *b */
static void ckpt_scan_values(CkptBadValue *b, int id, const float *x, size_t k, size_t first) {
    if (b->found) return;
    int any = 0;
    for (size_t q = 0; q < k; q++) {
        uint32_t u;
        memcpy(&u, &x[q], 4);
        any |= ckpt_value_bad(id, u);
    }
    for (size_t q = 0; any && q < k; q++) {
        uint32_t u;
        memcpy(&u, &x[q], 4);
        if (ckpt_value_bad(id, u)) {
            *b = (CkptBadValue){1, first + q, x[q]};
            return;
        }
    }
}
/* the error for b: the tensor, its layer and the element (reported once the section's checksum holds, so that a
 * flipped bit is a checksum mismatch; another program's file, or damage the checksum was made again over, is this) */
static int ckpt_bad_value(ngpt_trainer *tr, const char *path, int id, const CkptBadValue *b) {
    char where[160], value[32];
    param_element_name(&tr->ms, b->at, where, sizeof where);
    if (isnan(b->value)) snprintf(value, sizeof value, "NaN");
    else if (isinf(b->value)) snprintf(value, sizeof value, "%sInf", b->value < 0 ? "-" : "");
    else snprintf(value, sizeof value, "%g", (double)b->value);
    return tr_fail(tr, NGPT_ERR_FORMAT, "%s: the %s section holds %s at %s: nanogpt saves %s, so the file is damaged or not nanogpt's",
                   path, section_names[id], value, where, id == SEC_ADAM_V ? "no NaN and no negative value there" : "only finite values");
}

static int checkpoint_read_tensors(ngpt_trainer *tr, CkptReader *r, const char *path, int id, void *base, size_t esize) {
    const CkptSection *s = &r->h.sec[id - 1];
    Hash64 hs;
    int rc = checkpoint_section_start(tr, r, path, id, &hs);
    if (rc) return rc;
    float *stage = (float *)tr->h_staging;
    int to_params = id == SEC_PARAMS && param_window_floats(tr); /* no master: through the window */
    size_t per = to_params ? MIN(param_window_floats(tr), HOST_STAGING_BYTES / 8) : HOST_STAGING_BYTES / 8, first = 0;
    CkptBadValue bad = {0, 0, 0.0f};
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        char *dst = (char *)tensor_at(tr, base, i, esize);
        size_t n = tr->plan.param_len[i];
        for (size_t j = 0; j < n; j += per) {
            size_t k = MIN(per, n - j);
            if (fread(stage, 4, k, r->f) != k) return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section truncated", path, section_names[id]);
            hash_update(&hs, stage, k * 4);
            ckpt_scan_values(&bad, id, stage, k, first + j);
            if (to_params) upload_param_chunk(tr, i, j, stage, k);
            else if (esize == 4) tr->be->upload(tr->be, dst + j * 4, stage, k * 4);
            else {
                uint16_t *raw = (uint16_t *)(stage + per);
                for (size_t q = 0; q < k; q++) raw[q] = f32_to_bf16(stage[q]); /* exact for a bf16 run's moments */
                tr->be->upload(tr->be, dst + j * 2, raw, k * 2);
            }
            tr->be->sync(tr->be);
        }
        first += n;
    }
    if (hash_final(&hs) != s->checksum) return checksum_mismatch(tr->err, sizeof tr->err, path, id, s);
    if (bad.found) return ckpt_bad_value(tr, path, id, &bad);
    return be_check(tr, "loading a checkpoint");
}

/* Reads one big section through its checksum without loading it (in the host staging buffer), so that a
 * corrupt file is refused before it overwrites anything. */
static int checkpoint_verify_tensors(ngpt_trainer *tr, CkptReader *r, const char *path, int id) {
    const CkptSection *s = &r->h.sec[id - 1];
    Hash64 hs;
    int rc = checkpoint_section_start(tr, r, path, id, &hs);
    if (rc) return rc;
    CkptBadValue bad = {0, 0, 0.0f};
    for (uint64_t done = 0; done < s->bytes;) {
        size_t want = (size_t)MIN((uint64_t)HOST_STAGING_BYTES, s->bytes - done);
        if (fread(tr->h_staging, 1, want, r->f) != want) return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section truncated", path, section_names[id]);
        hash_update(&hs, tr->h_staging, want);
        ckpt_scan_values(&bad, id, (const float *)tr->h_staging, want / 4, (size_t)(done / 4));
        done += want;
    }
    if (hash_final(&hs) != s->checksum) return checksum_mismatch(tr->err, sizeof tr->err, path, id, s);
    if (bad.found) return ckpt_bad_value(tr, path, id, &bad);
    return NGPT_OK;
}

/* the length of ckpt_<step>.bin at the start of nm (the step in 9 digits, or 10 from step 1e9: max_iters goes to 2e9);
 * 0 where nm starts otherwise */
static size_t checkpoint_name_length(const char *nm) {
    size_t digits = strncmp(nm, "ckpt_", 5) ? 0 : strspn(nm + 5, "0123456789");
    return (digits == 9 || (digits == 10 && nm[5] != '0')) && !strncmp(nm + 5 + digits, ".bin", 4) ? 9 + digits : 0;
}
/* whether nm is ckpt_<step>.bin followed by suffix */
static int is_checkpoint_name(const char *nm, const char *suffix) {
    size_t n = checkpoint_name_length(nm);
    return n && !strcmp(nm + n, suffix);
}

/* checkpoint_list's step of the entry nm, into steps (n of cap held): the newest cap are kept */
static void checkpoint_list_add(const char *nm, long long *steps, int cap, int *n) {
    if (!is_checkpoint_name(nm, "")) return;
    long long step = atoll(nm + 5);
    if (*n < cap) { steps[(*n)++] = step; return; }
    int oldest = 0; /* full: the newer replaces the oldest */
    for (int i = 1; i < *n; i++) oldest = steps[i] < steps[oldest] ? i : oldest;
    if (*n && step > steps[oldest]) steps[oldest] = step;
}

/* Steps of the ckpt_<step>.bin files in dir, ascending: the newest cap of them; returns how many. With glibc it
 * reads the folder into a buffer on the stack (getdents64), so that ngpt_train, which lists out_dir as it starts,
 * allocates nothing; readdir's DIR is allocated. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30))
#define NGPT_GETDENTS 1
#endif
static int checkpoint_list(const char *dir, long long *steps, int cap) {
    int n = 0;
#ifdef NGPT_GETDENTS
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    _Alignas(struct dirent64) char buf[4096];
    ssize_t got;
    while ((got = getdents64(fd, buf, sizeof buf)) > 0)
        for (ssize_t at = 0; at < got;) {
            const struct dirent64 *e = (const struct dirent64 *)(buf + at);
            at += e->d_reclen;
            checkpoint_list_add(e->d_name, steps, cap, &n);
        }
    close(fd);
#else
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) checkpoint_list_add(e->d_name, steps, cap, &n);
    closedir(d);
#endif
    for (int i = 1; i < n; i++) /* insertion sort: a handful of files */
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) { long long t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    return n;
}

/* whether dir holds checkpoints: best.bin or a ckpt_<step>.bin (*newest: the newest one's step, else -1) */
CLI_USED static int holds_checkpoints(const char *dir, long long *newest) {
    char best[600];
    snprintf(best, sizeof best, "%.580s/best.bin", dir);
    if (!checkpoint_list(dir, newest, 1)) *newest = -1;
    return *newest >= 0 || file_exists(best);
}

static void checkpoint_path(const char *dir, long long step, char *path, size_t n) { snprintf(path, n, "%.400s/ckpt_%09lld.bin", dir, step); }

/* " (its ckpt.pt is nanoGPT's ...)" when dir holds nanoGPT's checkpoint, for "no checkpoint" errors; "" otherwise */
static const char *pytorch_checkpoint_note(const char *dir) {
    char pt[600];
    snprintf(pt, sizeof pt, "%.580s/ckpt.pt", dir);
    return file_exists(pt) ? " (its ckpt.pt is nanoGPT's PyTorch checkpoint, which nanogpt does not read)" : "";
}

/* The checkpoint a resume reads from dir, into path: the newest ckpt_<step>.bin, else best.bin (a folder whose
 * other checkpoints were removed; best.bin is a whole checkpoint too); 0 when there is neither */
static int resume_checkpoint(const char *dir, char *path, size_t cap) {
    long long newest;
    if (checkpoint_list(dir, &newest, 1)) {
        checkpoint_path(dir, newest, path, cap);
        return 1;
    }
    snprintf(path, cap, "%.400s/best.bin", dir);
    return file_exists(path);
}

/* One run at a time trains into an out_dir: two would replace each other's checkpoints and mix their logs. The
 * lock is the folder's own flock, let go when *fd is closed or the process dies; *fd is -1 where the folder cannot
 * be opened or has no locks (nothing is locked then). Returns 1 when another run holds it. */
static int out_dir_lock(const char *dir, int *fd) {
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0 || !flock(*fd, LOCK_EX | LOCK_NB)) return 0;
    int busy = errno == EWOULDBLOCK;
    close(*fd);
    *fd = -1;
    return busy;
}

/* The process whose save named nm, a save's temporary file in out_dir (checkpoint_temporary_open): ckpt_<step>.bin.tmp.PID.K,
 * or nanogpt_save.tmp.PID.K (that of an ngpt_save to a file name with no room for the suffix); -1 for ckpt_<step>.bin.tmp, as saves
 * named it before 2026-12-03; 0 for a name that is no such file */
static long checkpoint_temporary_pid(const char *nm) {
    const int long_names = !strncmp(nm, "nanogpt_save.tmp", 16);
    size_t head = long_names ? 12 : checkpoint_name_length(nm);
    const char *p = nm + head;
    if (!head || strncmp(p, ".tmp", 4)) return 0;
    p += 4;
    if (!*p) return long_names ? 0 : -1;
    size_t pid_digits = *p == '.' ? strspn(p + 1, "0123456789") : 0; /* as %ld writes it: no leading zero */
    long pid = pid_digits && pid_digits <= 10 && p[1] != '0' ? strtol(p + 1, NULL, 10) : 0;
    if (pid <= 0 || pid > INT_MAX) return 0;
    p += 1 + pid_digits;
    size_t k_digits = *p == '.' ? strspn(p + 1, "0123456789") : 0; /* .K: checkpoint_temporary_open's 0..999 */
    return k_digits && k_digits <= 3 && (k_digits == 1 || p[1] != '0') && !p[1 + k_digits] ? pid : 0;
}

/* Removes the temporary files a save in dir leaves when the process dies inside it (checkpoint_temporary_pid's of
 * a process that is gone, best.bin.tmp): a save ended normally or by an error removes its own. Nothing is removed
 * while a run trains in dir (its lock): its temporary file is its save in progress; nor while another process's
 * ngpt_save into dir runs. */
static void checkpoint_remove_stale(const char *dir) {
    int lock;
    if (out_dir_lock(dir, &lock)) return;
    DIR *d = opendir(dir);
    if (!d) {
        if (lock >= 0) close(lock);
        return;
    }
    struct dirent *e;
    char path[600];
    while ((e = readdir(d)) != NULL) {
        long pid = checkpoint_temporary_pid(e->d_name);
        if (pid == -1 || (pid > 0 && kill((pid_t)pid, 0) && errno == ESRCH) || !strcmp(e->d_name, "best.bin.tmp")) {
            snprintf(path, sizeof path, "%.400s/%.60s", dir, e->d_name); /* the names matched are short */
            unlink(path);
        }
    }
    closedir(d);
    if (lock >= 0) close(lock);
}

/* Adds a ckpt_<step>.bin just saved in out_dir to kept_steps, as the newest (saved again: moved there); the oldest
 * goes when the list is full (a save prunes it to keep_checkpoints at once; ngpt_save does not prune) */
static void kept_record(ngpt_trainer *tr, long long step) {
    long long *kept = tr->kept_steps;
    int n = 0;
    for (int i = 0; i < tr->n_kept; i++)
        if (kept[i] != step) kept[n++] = kept[i];
    if (n == MAX_KEEP_CHECKPOINTS + 1) memmove(kept, kept + 1, (size_t)--n * sizeof *kept);
    kept[n++] = step;
    tr->n_kept = n;
}

/* Saves ckpt_<step>.bin in out_dir, keeps the newest cfg.keep_checkpoints, and points best.bin at it when
 * is_best (a hard link: pruning never removes the best). */
static int checkpoint_save(ngpt_trainer *tr, int is_best) {
    const char *dir = tr->cfg.out_dir;
    char path[512], best[512], tmp[530];
    if (mkdir_p(dir)) return tr_fail(tr, NGPT_ERR_IO, "cannot create out_dir %s: %s", dir, strerror(errno));
    checkpoint_path(dir, tr->step, path, sizeof path);
    int rc = checkpoint_write(tr, path);
    if (rc) return rc;
    if (is_best) {
        snprintf(best, sizeof best, "%.400s/best.bin", dir);
        snprintf(tmp, sizeof tmp, "%s.tmp", best);
        unlink(tmp);
        if (link(path, tmp) || rename(tmp, best)) return tr_fail(tr, NGPT_ERR_IO, "cannot link %s to %s: %s", best, path, strerror(errno));
        sync_folder_of(best); /* best.bin in place for good before an older checkpoint goes */
    }
    /* the newest keep_checkpoints stay: kept_steps knows them (filled from out_dir at start, no listing now) */
    kept_record(tr, tr->step);
    long long *kept = tr->kept_steps;
    int n = tr->n_kept;
    int extra = MAX(0, n - tr->cfg.keep_checkpoints);
    for (int i = 0; i < extra; i++) {
        checkpoint_path(dir, kept[i], path, sizeof path);
        unlink(path);
    }
    memmove(kept, kept + extra, (size_t)(n - extra) * sizeof *kept);
    tr->n_kept = n - extra;
    tr_log(tr, 0, "saved checkpoint %.400s/ckpt_%09d.bin%s", dir, tr->step, is_best ? " (best so far)" : "");
    return NGPT_OK;
}

#define SAMPLE_ONLY_REFUSAL "this trainer was made for forward passes only (sample_only, or eval_only of a loaded model): it holds no " \
                            "gradients or optimizer state"

int ngpt_save(ngpt_trainer *tr, const char *path) {
    if (!tr) return NGPT_ERR_ARG;
    if (!path || !*path) return tr_fail(tr, NGPT_ERR_ARG, "ngpt_save: no path");
    if (tr->plan.req.inference) return tr_fail(tr, NGPT_ERR_STATE, "cannot save %s: " SAMPLE_ONLY_REFUSAL, path);
    char target[PATH_MAX];
    const char *file;
    if (save_target(path, "ngpt_save:", target, &file, tr->err, sizeof tr->err)) return NGPT_ERR_IO;
    int rc = checkpoint_write(tr, file);
    const char *name = name_in_out_dir(tr, path);
    if (!rc && name && is_checkpoint_name(name, "")) kept_record(tr, atoll(name + 5)); /* out_dir's checkpoint, this trainer's own */
    return rc;
}

/* the checkpoint's model is the trainer's */
static int checkpoint_same_model(ngpt_trainer *tr, const CkptReader *r, const char *path) {
    const CkptModel *m = &r->model;
    const ModelShape *ms = &tr->ms;
    if (m->L != ms->L || m->NH != ms->NH || m->C != ms->C || m->V != ms->V || m->maxT != ms->maxT || m->bias != ms->bias)
        return tr_fail(tr, NGPT_ERR_FORMAT,
                       "%s holds a different model (n_layer %d, n_head %d, n_embd %d, vocab %d, block_size %d, bias %d) than this trainer "
                       "(%d, %d, %d, %d, %d, %d)",
                       path, m->L, m->NH, m->C, m->V, m->maxT, m->bias, ms->L, ms->NH, ms->C, ms->V, ms->maxT, ms->bias);
    return NGPT_OK;
}

/* Loads parameters, moments and training state from an open checkpoint whose model matches (a sampling
 * trainer, which has no moments: the parameters and the state). */
static int checkpoint_load(ngpt_trainer *tr, CkptReader *r, const char *path) {
    int rc = checkpoint_same_model(tr, r, path);
    if (!rc) rc = checkpoint_read_tensors(tr, r, path, SEC_PARAMS, tr->master, 4);
    if (!rc && !tr->plan.req.inference) rc = checkpoint_read_tensors(tr, r, path, SEC_ADAM_M, tr->m, tr->plan.moment_bytes);
    if (!rc && !tr->plan.req.inference) rc = checkpoint_read_tensors(tr, r, path, SEC_ADAM_V, tr->v, tr->plan.moment_bytes);
    if (rc) return rc;
    params_from_master(tr);
    tr->step = (int)r->state.step;
    tr->eval_count = (int)r->state.eval_count;
    tr->rng_train.counter = (uint64_t)r->state.rng_train_counter;
    tr->best_val_loss = (float)r->state.best_val_loss;
    tr->last_loss = (float)r->state.last_loss;
    tr->loaded_moment_bits = (int)r->state.moment_bits;
    tr->nonfinite_run = 0; /* the steps skipped in a row were the trainer's before, not the checkpoint's */
    tr->lr = tr->step > 0 ? lr_at(&tr->cfg, tr->step - 1) : 0.0f; /* the last step's, as after that step (ngpt_stats.lr) */
    if (tr->plan.req.dtype == NGPT_DTYPE_F16 && r->state.loss_scale != 0) { /* an older file (0) keeps the starting 2^16 */
        tr->loss_scale = (float)r->state.loss_scale;
        tr->good_steps = (int)r->state.good_steps;
    }
    tr->be->sync(tr->be);
    return be_check(tr, "loading a checkpoint");
}

/* A resumed run that keeps its AdamW moments at another precision than its checkpoint's run kept them (moments_dtype
 * auto picks by what fits, so that can change with the device or the batch, as well as with moments_dtype): a line
 * saying so and how to keep the run's. "" when they match, when nothing trains, or when the checkpoint does not say
 * (written before it stored the precision). */
CLI_USED static const char *resume_moments_note(const ngpt_trainer *tr, char *buf, size_t cap) {
    const int bits = tr->plan.moments_dtype == NGPT_DTYPE_BF16 ? 16 : 32;
    buf[0] = 0;
    if (!tr->resumed || tr->plan.req.inference || !tr->loaded_moment_bits || tr->loaded_moment_bits == bits) return buf;
    snprintf(buf, cap, "AdamW moments %s (its run: %s): the checkpoint's were %s; %s", bits == 16 ? "bf16" : "fp32",
             bits == 16 ? "fp32" : "bf16", bits == 16 ? "rounded to bf16" : "widened to fp32, exactly",
             bits == 32 && tr->plan.req.dtype == NGPT_DTYPE_F32 ? "bf16 moments need a GPU run in dtype bfloat16 or float16, as its run was"
             : bits == 32 ? "pass --moments_dtype=bfloat16 to go on in bf16"
             : strcmp(tr->cfg.moments_dtype, "auto") ? "pass --moments_dtype=auto to go on in fp32 where they fit"
                                                     : "fp32 ones do not fit this device's plan");
    return buf;
}

/* The model's shape as a checkpoint holds it, into cfg (the stored config may leave vocab_size 0, to the data) */
static void config_set_model(ngpt_config *c, const CkptModel *m) {
    c->n_layer = m->L;
    c->n_head = m->NH;
    c->n_embd = m->C;
    c->vocab_size = m->V;
    c->block_size = m->maxT;
    c->bias = m->bias;
}

/* whether the file at path starts with a checkpoint's magic */
CLI_USED static int is_checkpoint_file(const char *path) {
    char magic[8];
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return 0; /* a pipe would lose its bytes (or wait for a writer) */
    FILE *f = fopen(path, "rb");
    int yes = f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, CKPT_MAGIC, 8);
    if (f) fclose(f);
    return yes;
}

/* An out_dir to read checkpoints from that is a file, or below one: an error (NGPT_ERR_ARG) that says so, and, for a
 * checkpoint file, what reads it (use: "samples it"); NGPT_OK when it is none */
CLI_USED static int out_dir_file_error(const char *out_dir, const char *use, char *err, size_t errlen) {
    char above[300], how[160] = "";
    int kind = file_above(out_dir, above, sizeof above);
    if (!kind) return NGPT_OK;
    if (kind == 2 && is_checkpoint_file(above)) snprintf(how, sizeof how, " (--init_from= this file %s)", use);
    return fail(err, errlen, NGPT_ERR_ARG, "out_dir = %s: %s is a file, not a folder: out_dir is the folder a run saved its checkpoints in%s",
                out_dir, above, how);
}

/* Applies the config stored in the open checkpoint r (at path; its `key = value` lines) to cfg, as it was saved (the
 * model's shape aside: vocab_size 0 when the run took its vocabulary from its data). r's file position is kept. */
static int checkpoint_stored_config(CkptReader *r, const char *path, ngpt_config *cfg, char *err, size_t errlen) {
    const CkptSection *sec = &r->h.sec[SEC_CONFIG - 1];
    char *text = (char *)malloc(sec->bytes + 1); /* checkpoint_open checked its size and checksum */
    long at = ftell(r->f);
    int rc = NGPT_OK;
    if (!text || at < 0 || fseek(r->f, (long)sec->offset, SEEK_SET) || fread(text, 1, sec->bytes, r->f) != sec->bytes || fseek(r->f, at, SEEK_SET))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: config section unreadable", path);
    const char *nul = rc ? NULL : memchr(text, 0, sec->bytes); /* the lines after it would go unread */
    if (nul)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: config section, byte %llu of the file: a NUL byte; nanogpt writes `key = value` text there", path,
                  (unsigned long long)(sec->offset + (uint64_t)(nul - text)));
    for (char *line = text, *next; !rc && line && line < text + sec->bytes; line = next) {
        text[sec->bytes] = 0;
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        char *kend = eq;
        while (kend > line && kend[-1] == ' ') kend--;
        *kend = 0;
        char msg[NGPT_ERRLEN];
        if (config_set(cfg, line, eq + 1, 1, msg, sizeof msg)) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: stored config: %s", path, msg);
    }
    free(text);
    return rc;
}

/* Applies the config stored in a checkpoint (its `key = value` lines), then its model's shape, to cfg. */
CLI_USED static int checkpoint_read_config(const char *path, ngpt_config *cfg, char *err, size_t errlen) {
    CkptReader r;
    int rc = checkpoint_open(&r, path, err, errlen);
    if (rc) return rc;
    rc = checkpoint_stored_config(&r, path, cfg, err, errlen);
    if (!rc) config_set_model(cfg, &r.model);
    fclose(r.f);
    return rc;
}

/* The data folder the run that saved the open checkpoint r (at path) read, into buf ("" when its config cannot
 * be read) */
static const char *checkpoint_trained_dir(CkptReader *r, const char *path, char *buf, size_t n) {
    ngpt_config stored;
    ngpt_config_defaults(&stored);
    char ignored[NGPT_ERRLEN];
    buf[0] = 0;
    if (!checkpoint_stored_config(r, path, &stored, ignored, sizeof ignored)) dataset_dir(&stored, buf, n);
    return buf;
}

/* Whether the run that saved the open checkpoint r (at path) took its vocabulary from its data (stored vocab_size 0:
 * meta.bin's characters, else GPT-2's) and that data is the folder c reads: then the model's ids are that folder's
 * vocabulary, unless it was prepared again since */
static int checkpoint_vocab_from_data(CkptReader *r, const char *path, const ngpt_config *c) {
    ngpt_config stored;
    ngpt_config_defaults(&stored);
    char ignored[NGPT_ERRLEN], trained[300], now[300], real_trained[PATH_MAX], real_now[PATH_MAX];
    if (checkpoint_stored_config(r, path, &stored, ignored, sizeof ignored) || stored.vocab_size) return 0;
    dataset_dir(&stored, trained, sizeof trained);
    dataset_dir(c, now, sizeof now);
    return realpath(trained, real_trained) && realpath(now, real_now) && !strcmp(real_trained, real_now);
}

int ngpt_load(ngpt_trainer *tr, const char *path) {
    if (!tr) return NGPT_ERR_ARG;
    if (!path || !*path) return tr_fail(tr, NGPT_ERR_ARG, "ngpt_load: no path");
    CkptReader r;
    int rc = checkpoint_open(&r, path, tr->err, sizeof tr->err);
    if (rc) return rc;
    /* every section it will read is checked first: a corrupt file leaves the trainer as it was */
    rc = checkpoint_same_model(tr, &r, path);
    if (!rc && tr->charvocab && !chars_still_match(&r.state, tr->charvocab)) { /* as a resume refuses it */
        char dir[300], trained[300];
        dataset_dir(&tr->cfg, dir, sizeof dir);
        rc = chars_changed_error(tr->err, sizeof tr->err, path, dir, tr->charvocab, checkpoint_trained_dir(&r, path, trained, sizeof trained),
                                 "Load it into a trainer on the data it was trained on");
    }
    for (int id = SEC_PARAMS; !rc && id <= (tr->plan.req.inference ? SEC_PARAMS : SEC_ADAM_V); id++)
        rc = checkpoint_verify_tensors(tr, &r, path, id);
    if (!rc) rc = checkpoint_load(tr, &r, path);
    fclose(r.f);
    return rc;
}

/* init_from = resume with no checkpoint in out_dir: the error, which says when out_dir is not there at all (a
 * mistyped or relative path) */
static int resume_none_error(const char *out_dir, char *err, size_t errlen) {
    char rel[PATH_MAX + 600];
    if (!file_exists(out_dir))
        return fail(err, errlen, NGPT_ERR_IO, "init_from = resume, but out_dir %s does not exist (train first, or pass the --out_dir of a run)%s",
                    out_dir, relative_dir_note(out_dir, rel, sizeof rel));
    return fail(err, errlen, NGPT_ERR_IO, "init_from = resume, but out_dir %s holds no checkpoint: resume reads the newest ckpt_<step>.bin, "
                                          "the step in 9 digits (ckpt_000000030.bin, as training names them), else best.bin%s", out_dir,
                pytorch_checkpoint_note(out_dir));
}

/* init_from = resume: opens the newest checkpoint in out_dir (its path into path) and takes its model's shape
 * into c; on success the caller closes r->f. */
static int resume_open(ngpt_config *c, CkptReader *r, char *path, size_t cap, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (out_dir_file_error(c->out_dir, "samples it", err, errlen)) return NGPT_ERR_ARG;
    if (!resume_checkpoint(c->out_dir, path, cap)) return resume_none_error(c->out_dir, err, errlen);
    int rc = checkpoint_open(r, path, err, errlen);
    if (!rc) config_set_model(c, &r->model);
    return rc;
}

/* Whether the big sections of an opened checkpoint (the parameters and the AdamW moments, which checkpoint_open
 * leaves to the loader) match their checksums: read through once, 1 MiB at a time */
static int checkpoint_tensors_intact(CkptReader *r) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = (unsigned char *)malloc(CHUNK);
    int intact = buf != NULL;
    for (int id = SEC_PARAMS; id <= SEC_ADAM_V && intact; id++) {
        const CkptSection *s = &r->h.sec[id - 1];
        Hash64 hs;
        hash_init(&hs);
        intact = fseeko(r->f, (off_t)s->offset, SEEK_SET) == 0;
        for (uint64_t done = 0; intact && done < s->bytes;) {
            size_t want = (size_t)MIN((uint64_t)CHUNK, s->bytes - done);
            intact = fread(buf, 1, want, r->f) == want;
            hash_update(&hs, buf, want);
            done += want;
        }
        intact = intact && hash_final(&hs) == s->checksum;
    }
    free(buf);
    return intact;
}

/* When broken, a checkpoint in dir, does not read: the newest other ckpt_<step>.bin, into other (cap bytes), when
 * it reads whole (its tensors' checksums too); 0 when it does not, or there is none. Another name of the same file
 * (best.bin is a link to one) is no other. */
CLI_USED static int checkpoint_other_readable(const char *dir, const char *broken, char *other, size_t cap) {
    long long steps[2];
    struct stat b, o;
    int known = !stat(broken, &b);
    for (int i = checkpoint_list(dir, steps, 2) - 1; i >= 0; i--) {
        checkpoint_path(dir, steps[i], other, cap);
        if (!strcmp(other, broken) || (known && !stat(other, &o) && o.st_dev == b.st_dev && o.st_ino == b.st_ino)) continue;
        CkptReader r;
        char ignored[NGPT_ERRLEN];
        if (checkpoint_open(&r, other, ignored, sizeof ignored)) return 0;
        int intact = checkpoint_tensors_intact(&r);
        fclose(r.f);
        return intact;
    }
    return 0;
}

/* A resume whose newest checkpoint (path) does not read, msg saying why: when it is corrupt or cut short and the one
 * before it opens, the error says how to resume from that one */
static int resume_failed(ngpt_trainer *tr, int rc, const char *msg, const char *path) {
    char before[512];
    if (rc != NGPT_ERR_FORMAT || !checkpoint_other_readable(tr->cfg.out_dir, path, before, sizeof before)) return tr_fail(tr, rc, "%s", msg);
    return tr_fail(tr, rc, "%s; to resume from the checkpoint before it, %s, move %s out of out_dir", msg, before, path);
}

/* Pretrained weights of shape pm (w NULL: the shape alone) set the model in c, as nanoGPT's from_pretrained:
 * their sizes, bias, and block_size cropped to c's (sampling takes the model's whole context when c's is larger). */
static int pretrained_config(ngpt_config *c, ModelShape *pm, Weights *w, int sample_only, char *err, size_t errlen) {
    if (sample_only && c->block_size > pm->maxT) c->block_size = pm->maxT;
    ModelShape uncropped = *pm;
    int rc = pretrained_crop(pm, NULL, c->block_size, err, errlen);
    if (rc) return rc;
    if (w) weights_crop(w, &uncropped, pm->maxT);
    c->n_layer = pm->L;
    c->n_head = pm->NH;
    c->n_embd = pm->C;
    c->bias = 1;
    c->vocab_size = pm->V;
    return NGPT_OK;
}

/* The model that init_from names, into c as trainer_setup makes it, from file headers alone: resume, the newest
 * checkpoint in out_dir; a GPT-2 name, its known sizes (no download needed); a path, its header (nanogpt plan);
 * for sampling also a checkpoint file, its model section. */
CLI_USED static int init_from_config(ngpt_config *c, int sample_only, char *err, size_t errlen) {
    if (!strcmp(c->init_from, "scratch")) return NGPT_OK;
    if (!strcmp(c->init_from, "resume")) {
        CkptReader r;
        char path[512];
        int rc = resume_open(c, &r, path, sizeof path, err, errlen);
        if (!rc) fclose(r.f);
        return rc;
    }
    if (sample_only && is_checkpoint_file(c->init_from)) { /* sampling reads a checkpoint file as it reads out_dir's */
        CkptReader r;
        int rc = checkpoint_open(&r, c->init_from, err, errlen);
        if (rc) return rc;
        config_set_model(c, &r.model);
        fclose(r.f);
        return NGPT_OK;
    }
    ModelShape pm;
    int rc = pretrained_load(c->init_from, c->pretrained_dir, &pm, NULL, err, errlen);
    return rc ? rc : pretrained_config(c, &pm, NULL, sample_only, err, errlen);
}

/* The vocabulary: vocab_size, else the characters of the dataset's meta.bin (or, without one, nanoGPT's meta.pkl),
 * else GPT-2's 50257. A meta.bin (or meta.pkl) that exists is always read (kept in *cv when cv is not NULL): a bad
 * one is an error, and so is a vocab_size below its characters, or above what uint16 token files hold. */
static int data_vocab(const ngpt_config *c, CharVocab **cv, int *V, char *err, size_t errlen) {
    char dir[300], path[400];
    snprintf(path, sizeof path, "%s/meta.bin", dataset_dir(c, dir, sizeof dir));
    *V = c->vocab_size;
    int from_pickle = 0; /* nanoGPT's meta.pkl, when its folder has no meta.bin */
    if (!file_exists(path)) {
        snprintf(path, sizeof path, "%s/meta.pkl", dir);
        from_pickle = file_exists(path);
    }
    if (from_pickle || file_exists(path)) {
        CharVocab *v = (CharVocab *)malloc(sizeof *v);
        if (!v) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory");
        int rc = from_pickle ? charvocab_load_pickle(v, path, err, errlen) : charvocab_load(v, path, err, errlen);
        v->file_name = from_pickle ? "meta.pkl" : "meta.bin";
        if (!rc && *V && *V < v->n) rc = fail(err, errlen, NGPT_ERR_ARG, "vocab_size = %d is below the %d characters of %s", *V, v->n, path);
        if (!rc && !*V) *V = v->n;
        if (rc || !cv) free(v);
        else *cv = v;
        if (rc) return rc;
    }
    if (*V == 0) *V = 50257;
    if (*V > 65536) return fail(err, errlen, NGPT_ERR_ARG, "vocab_size = %d: token files hold uint16 ids, so at most 65536", *V);
    return NGPT_OK;
}

static double matmul_peak(ngpt_trainer *tr, int *size); /* in the benchmark's section */

static int trainer_setup(ngpt_trainer *tr) {
    ngpt_config *c = &tr->cfg;
    char msg[NGPT_ERRLEN], note[NGPT_ERRLEN], dir[300];
    int rc = config_validate(c, msg, sizeof msg);
    if (rc) return tr_fail(tr, rc, "%s", msg);
    int device = DEV_BACKEND_CPU, dtype = NGPT_DTYPE_F32;
    if ((rc = resolve_device(c, &device, &dtype, note, sizeof note, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
    if (note[0]) tr_log(tr, 1, "note: %s", note);

    /* resume: the model comes from the newest checkpoint in out_dir, the rest of the config from the caller */
    CkptReader resume = {0};
    char resume_path[512] = "";
    if (!strcmp(c->init_from, "resume")) {
        if ((rc = resume_open(c, &resume, resume_path, sizeof resume_path, msg, sizeof msg))) return resume_failed(tr, rc, msg, resume_path);
        tr->resume_file = resume.f;
        tr->resumed_vocab_from_data = checkpoint_vocab_from_data(&resume, resume_path, c);
        tr_log(tr, 0, "resuming from %s (step %lld)", resume_path, (long long)resume.state.step);
    }

    /* pretrained weights: the model's shape comes from the file, as in nanoGPT's from_pretrained */
    if (strcmp(c->init_from, "scratch") && strcmp(c->init_from, "resume")) {
        ModelShape pm;
        if (!(tr->pretrained = (Weights *)calloc(1, sizeof *tr->pretrained))) return tr_fail(tr, NGPT_ERR_NOMEM, "out of host memory");
        if ((rc = pretrained_open(c->init_from, c->pretrained_dir, &pm, tr->pretrained, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        int file_positions = pm.maxT;
        if ((rc = pretrained_config(c, &pm, tr->pretrained, tr->opt.sample_only, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        char cropped[96] = "";
        if (pm.maxT < file_positions) /* nanoGPT's crop_block_size */
            snprintf(cropped, sizeof cropped, " (cropped from the file's %d positions, as nanoGPT's crop_block_size)", file_positions);
        tr_log(tr, 0, "initialising from %s: n_layer %d, n_head %d, n_embd %d, vocab %d, block_size %d%s", c->init_from, pm.L, pm.NH, pm.C,
               pm.V, c->block_size, cropped);
    }

    /* data and vocabulary */
    dataset_dir(c, dir, sizeof dir);
    int V, model_V = c->vocab_size;
    /* a resume whose run took its vocabulary from its data takes it so again (and saves vocab_size = 0 so): the data
     * must still say the model's ids, or its folder was prepared again from other text since */
    if (tr->resumed_vocab_from_data) c->vocab_size = 0;
    if (tr->weights_only) V = c->vocab_size;
    else if ((rc = data_vocab(c, &tr->charvocab, &V, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
    if (tr->resumed_vocab_from_data && V != model_V) {
        char now[400];
        if (tr->charvocab) snprintf(now, sizeof now, "%s/%s now holds %d characters", dir, tr->charvocab->file_name, tr->charvocab->n);
        else snprintf(now, sizeof now, "%s now has no meta.bin (GPT-2's %d tokens)", dir, V);
        return tr_fail(tr, NGPT_ERR_ARG, "resuming %s: its run took its vocabulary from its data (vocab_size = 0), %d ids, but %s: the data was "
                                         "prepared again since (from other text, or with the other tokenizer). Resume with the data the run trained on, or start a new run in "
                                         "another out_dir", resume_path, model_V, now);
    }
    if (resume.f && tr->charvocab && !chars_still_match(&resume.state, tr->charvocab)) { /* as many characters, other ones */
        char trained[300];
        chars_changed_error(msg, sizeof msg, resume_path, dir, tr->charvocab, checkpoint_trained_dir(&resume, resume_path, trained, sizeof trained),
                            "Resume with the data the run trained on, or start a new run in another out_dir");
        return tr_fail(tr, NGPT_ERR_ARG, "%s", msg);
    }
    if (!tr->opt.no_data && !tr->opt.sample_only) {
        /* a character vocabulary's ids are its characters: a vocab_size above them widens the model, not the data */
        const int ids = tr->charvocab ? tr->charvocab->n : V;
        char wider[200] = "";
        if (ids < V)
            snprintf(wider, sizeof wider, " (the data's ids are %s's characters; vocab_size = %d widens the model, not them)",
                     tr->charvocab->file_name, V);
        if ((rc = tokenset_open(&tr->train_data, dir, "train", ids, c->block_size, msg, sizeof msg)) ||
            (rc = tokenset_open(&tr->val_data, dir, "val", ids, c->block_size, msg, sizeof msg)))
            return tr_fail(tr, rc, "%s%s", msg, strstr(msg, "is out of range") ? wider : "");
        char train_says[600], val_says[600];
        tr_log(tr, 0, "data: %s: train %s, val %s; vocabulary %d %s%s%s%s", dir, tokenset_describe(&tr->train_data, train_says, sizeof train_says),
               tokenset_describe(&tr->val_data, val_says, sizeof val_says), V,
               tr->charvocab ? (V == tr->charvocab->n ? "characters" : "ids (vocab_size, above the characters")
                             : V == 50257 ? "tokens (GPT-2's)" : "ids (vocab_size)",
               tr->charvocab ? (V == tr->charvocab->n ? " (" : " of ") : "", tr->charvocab ? tr->charvocab->file_name : "", tr->charvocab ? ")" : "");
    }

    /* the model and the budget */
    tr->ms = (ModelShape){c->n_layer, c->n_head, c->n_embd, V, pad_vocab(V), c->block_size, c->bias};
    int cpus = cpu_count(), nthreads = c->threads > 0 ? c->threads : cpus;
    if (device == DEV_BACKEND_CPU && c->threads > cpus) /* torch's habit of a large number: here each op waits for the slowest thread */
        tr_log(tr, 0, "note: threads = %d is more than the %d CPU%s this process may use: the threads take turns on them, and every op waits for the "
                      "last (threads = 0 takes one per CPU)", c->threads, cpus, cpus == 1 ? "" : "s");
    double budget;
    if (tr->opt.device_arena) {
        /* the embedder's arenas are the budget: on a GPU its arena has already left the free memory */
        budget = (double)tr->opt.device_arena_bytes + (device == DEV_BACKEND_CUDA ? 0.0 : (double)tr->opt.host_arena_bytes);
        if (c->max_memory > 0 && c->max_memory < budget) budget = c->max_memory;
    } else if (device == DEV_BACKEND_CUDA) {
        size_t fr, total;
        if ((rc = ngpt_cuda_mem_info(&fr, &total, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        budget = (double)fr;
        const int capped = c->max_memory > 0 && c->max_memory < budget;
        if (c->max_memory > budget) tr_log(tr, 1, "note: %s", max_memory_above_note(c->max_memory, budget, "free on the GPU", msg, sizeof msg));
        if (capped) budget = c->max_memory;
        if ((rc = cuda_budget_after_margin(&budget, capped, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
    } else {
        budget = host_memory_available();
        if (c->max_memory > budget) tr_log(tr, 1, "note: %s", max_memory_above_note(c->max_memory, budget, "of this machine's memory to plan with", msg, sizeof msg));
        if (c->max_memory > 0 && c->max_memory < budget) budget = c->max_memory;
    }
    PlanRequest req;
    plan_request_from_config(&req, c, &tr->ms, device, dtype, nthreads, budget, tr->opt.sample_only);
    if (tr->opt.device_arena) { /* each part of the plan in its own arena: a small device arena gets a smaller micro-batch */
        req.device_cap = (double)tr->opt.device_arena_bytes;
        req.host_cap = (double)tr->opt.host_arena_bytes;
    }
    rc = plan_make(&tr->plan, &req, msg, sizeof msg);
    if (rc == NGPT_ERR_NOMEM && tr->opt.device_arena) /* tr->plan: the smallest plan, each part against its arena */
        return tr_fail(tr, rc, "the arenas handed in are too small: the smallest plan needs %zu device and %zu host bytes, the arenas hold "
                               "%zu and %zu (%s)",
                       tr->plan.device_bytes, tr->plan.host_bytes, tr->opt.device_arena_bytes, tr->opt.host_arena_bytes, msg);
    if (rc) return tr_fail(tr, rc, "%s", msg);

    if (tr->plan_only) return NGPT_OK; /* ngpt_plan_arenas: sizes only */

    /* the backend and the one allocation */
    if (device == DEV_BACKEND_CUDA) rc = ngpt_cuda_backend_create(&tr->be, dtype, msg, sizeof msg);
    else rc = ngpt_cpu_backend_create(&tr->be, nthreads, msg, sizeof msg);
    if (rc) return tr_fail(tr, rc, "%s", msg);
    /* a probe on one thread costs about nthreads steps: the tuner runs on machines of up to 8 cores */
    tr->tune = (ThreadTuner){.enabled = device != DEV_BACKEND_CUDA && c->threads == 0 && nthreads > 1 && nthreads <= 8, .every = 50,
                             .gap = 50, .next = 50};
    for (int which = 0; which < 2; which++) {
        const BatchLayout *lay = which ? &tr->plan.eval : &tr->plan.train;
        int chunk = which ? tr->plan.eval_chunk : tr->plan.logits_chunk;
        ngpt_shape s = {lay->B, req.T, tr->ms.C, tr->ms.NH, tr->ms.L, tr->ms.Vp, chunk};
        size_t need = tr->be->scratch_bytes(tr->be, &s);
        if (need > lay->slot_bytes[B_SCRATCH])
            return tr_fail(tr, NGPT_ERR_STATE, "internal: the %s backend needs %zu bytes of scratch, the plan reserved %zu",
                           tr->be->name, need, lay->slot_bytes[B_SCRATCH]);
    }
    void *dev = NULL, *host = NULL;
    if (tr->opt.device_arena) { /* the embedder's own memory */
        if (tr->opt.device_arena_bytes < tr->plan.device_bytes || tr->opt.host_arena_bytes < tr->plan.host_bytes) /* plan_fits */
            return tr_fail(tr, NGPT_ERR_STATE, "internal: the plan (%zu device, %zu host bytes) exceeds the arenas handed in (%zu, %zu)",
                           tr->plan.device_bytes, tr->plan.host_bytes, tr->opt.device_arena_bytes, tr->opt.host_arena_bytes);
        dev = tr->opt.device_arena;
        host = tr->opt.host_arena;
    } else if ((rc = tr->be->arena_alloc(tr->be, tr->plan.device_bytes, &dev, tr->plan.host_bytes, &host))) {
        char b1[32];
        return tr_fail(tr, rc, "allocating the planned %s arena failed (another process may have taken memory since it was measured): %s",
                       fmt_bytes(b1, sizeof b1, (double)tr->plan.device_bytes), tr->be->msg);
    }
    tr->dev = (char *)dev;
    tr->host = (char *)host;
    trainer_carve(tr);
    memset(tr->h_counts, 0, tr->plan.host_bytes_of[H_COUNTS]);
    /* scratch: the train and eval layouts place it differently; hand over the one in use before each pass */
    use_scratch(tr, &tr->plan.train);

    /* parameters, gradients, master and moments, the alignment gaps between tensors too: the arena's memory may
     * hold anything (an earlier trainer's, the embedder's), and the gaps are summed with the tensors
     * (checkpoint_write's finiteness check, the gradient norm) */
    tr->be->zero(tr->be, tr->dev + tr->plan.off_params, tr->plan.off_region - tr->plan.off_params);
    if (tr->opt.measure_peak && !tr->plan.req.inference) {
        /* in the moments while they are zero (before a resume loads them); they are zeroed again after */
        double t0 = now_seconds();
        int S;
        tr->peak_flops = matmul_peak(tr, &S);
        if ((rc = be_check(tr, "measuring the matmul peak"))) return rc;
        char b[32];
        if (S)
            tr_log(tr, 0, "matmul peak of this backend: %s (%d^3 in %s, measured in %.2f s); MFU is model FLOP/s over it", fmt_flops(b, sizeof b, tr->peak_flops),
                   S, dtype_name(dtype), now_seconds() - t0);
        else tr_log(tr, 0, "no MFU: this model's AdamW moments are too small to hold the 512^3 matmul that measures the peak; GFLOP/s instead");
    }
    tr->rng_train = (Rng){(uint64_t)c->seed, 1, 0};
    tr->best_val_loss = 1e9f;
    tr->loss_scale = dtype == NGPT_DTYPE_F16 ? 65536.0f : 1.0f;
    /* the checkpoints a save may prune (the first save trims them to keep_checkpoints); a resume also clears
     * the litter of the save that a crash or kill interrupted (only a resume: another run, a bench say, may be
     * saving into the same out_dir while a fresh trainer is made) */
    tr->n_kept = checkpoint_list(c->out_dir, tr->kept_steps, MAX_KEEP_CHECKPOINTS);
    char best_path[600];
    snprintf(best_path, sizeof best_path, "%.400s/best.bin", c->out_dir);
    tr->out_dir_taken = !resume.f && (tr->n_kept > 0 || file_exists(best_path));
    tr->known_from = tr->n_kept ? tr->kept_steps[0] : -1;
    tr->resumed = resume.f != NULL;
    if (resume.f) {
        checkpoint_remove_stale(c->out_dir);
        rc = checkpoint_load(tr, &resume, resume_path);
        fclose(resume.f);
        tr->resume_file = NULL;
        if (rc) {
            copy_str(msg, sizeof msg, tr->err);
            return resume_failed(tr, rc, msg, resume_path);
        }
        tr->resumed_step = tr->step;
    } else if (tr->pretrained && tr->pretrained->map) {
        rc = copy_params_in_from(tr, NULL, tr->pretrained);
        weights_close(tr->pretrained);
        if (rc) return rc;
    } else if ((rc = init_params(tr))) return rc;
    tr->be->sync(tr->be);
    return be_check(tr, "setup");
}

/* ngpt_trainer_create; weights_only: for export, which writes the parameters alone, so the data folder's
 * vocabulary is not read (cfg's vocab_size is the checkpoint's) */
static int trainer_create(const ngpt_config *cfg, const ngpt_options *opt, int weights_only, ngpt_trainer **out, char *err, size_t errlen) {
    if (!out) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_trainer_create: out must not be NULL");
    *out = NULL;
    if (!cfg) return fail(err, errlen, NGPT_ERR_ARG, "ngpt_trainer_create: cfg must not be NULL");
    ngpt_trainer *tr = (ngpt_trainer *)calloc(1, sizeof *tr);
    if (!tr) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory creating the trainer");
    tr->cfg = *cfg;
    if (opt) tr->opt = *opt;
    tr->weights_only = weights_only;
    const ngpt_options *o = &tr->opt;
    int rc = NGPT_OK;
    if (!o->device_arena != !o->host_arena)
        rc = tr_fail(tr, NGPT_ERR_ARG, "ngpt_options: %s is given but not %s: give both arenas (sized by ngpt_plan_arenas), or neither for the "
                                       "library's own allocation", o->device_arena ? "device_arena" : "host_arena", o->device_arena ? "host_arena" : "device_arena");
    else if (((uintptr_t)o->device_arena | (uintptr_t)o->host_arena) % NGPT_ARENA_ALIGNMENT)
        rc = tr_fail(tr, NGPT_ERR_ARG, "ngpt_options: device_arena %p and host_arena %p must be aligned to %d bytes (malloc, aligned_alloc, "
                                       "cudaMalloc and cudaMallocHost give that)", o->device_arena, o->host_arena, NGPT_ARENA_ALIGNMENT);
    if (!rc) rc = trainer_setup(tr);
    if (rc) {
        fail(err, errlen, rc, "%s", tr->err);
        ngpt_trainer_free(tr);
        return rc;
    }
    *out = tr;
    return NGPT_OK;
}

int ngpt_trainer_create(const ngpt_config *cfg, const ngpt_options *opt, ngpt_trainer **out, char *err, size_t errlen) {
    return trainer_create(cfg, opt, 0, out, err, errlen);
}

int ngpt_plan_arenas(const ngpt_config *cfg, const ngpt_options *opt, size_t *device_bytes, size_t *host_bytes, char *err,
                     size_t errlen) {
    if (!cfg || !device_bytes || !host_bytes)
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_plan_arenas: cfg and the outputs must not be NULL");
    ngpt_trainer *tr = (ngpt_trainer *)calloc(1, sizeof *tr);
    if (!tr) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory");
    tr->cfg = *cfg;
    if (opt) { /* what shapes the plan (sample_only, no_data); not the arenas it is to size, nor the callbacks */
        tr->opt.sample_only = opt->sample_only;
        tr->opt.no_data = opt->no_data;
    }
    tr->plan_only = 1;
    int rc = trainer_setup(tr);
    if (rc) fail(err, errlen, rc, "%s", tr->err);
    else {
        *device_bytes = tr->plan.device_bytes;
        *host_bytes = tr->plan.host_bytes;
    }
    ngpt_trainer_free(tr);
    return rc;
}

void ngpt_trainer_free(ngpt_trainer *tr) {
    if (!tr) return;
    if (tr->resume_file) fclose(tr->resume_file);
    if (tr->pretrained) weights_close(tr->pretrained);
    free(tr->pretrained);
    if (tr->be) tr->be->destroy(tr->be);
    tokenset_close(&tr->train_data);
    tokenset_close(&tr->val_data);
    free(tr->charvocab);
    free(tr);
}

/* The forward-backward of one optimizer step over the micro-batches already chosen by fill(k), then the
 * update. fill(tr, k, ctx) writes micro-batch k into h_tokens/h_targets. Returns the mean loss in *loss. */
typedef void (*batch_fill_fn)(ngpt_trainer *tr, int micro, void *ctx);

typedef struct {
    batch_fill_fn fill;
    void *ctx;
} TrainFill;
static void train_fill(ngpt_trainer *tr, int k, void *arg, int *B) {
    const TrainFill *tf = (const TrainFill *)arg;
    tf->fill(tr, k, tf->ctx);
    *B = tr->plan.micro_batch;
}

/* Gradients of one optimizer step (zeroed first, accumulated over the planned micro-batches); the mean
 * loss goes to *mean. With stop (NULL, or the flag ngpt_request_stop sets) the step may be left before its end
 * (stop_leaves_step): NGPT_ERR_INTERRUPTED, and *ran (when not NULL) says how many micro-batches ran. */
static int forward_backward(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, double *mean, _Atomic int *stop, int *ran) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    int B = p->micro_batch, GA = p->grad_accum, T = p->req.T;
    use_scratch(tr, &p->train);
    be->zero(be, tr->grads, p->off_master - p->off_grads);
    float dscale = tr->loss_scale / ((float)B * (float)T * (float)GA);
    TrainFill tf = {fill, ctx};
    int done = 0;
    double sum = run_micro_batches(tr, &p->train, GA, 1, dscale, train_fill, &tf, stop, &done);
    if (ran) *ran = done;
    if (done == GA)
        for (int g = 1; g < p->lanes; g++) be->residual_forward(be, tr->grads, tr->grads, lane_grads(tr, g), p->nparams_padded);
    *mean = sum / ((double)B * T * GA);
    int rc = be_check(tr, "the forward/backward pass");
    return rc ? rc : done < GA ? NGPT_ERR_INTERRUPTED : NGPT_OK;
}

/* One optimizer step; stop and ran as forward_backward's: a step left before its end changes nothing of the
 * training but the batches' random state, which the caller restores */
static int train_step_once(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, float *loss, _Atomic int *stop, int *ran) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    double t0 = now_seconds();
    int B = p->micro_batch, GA = p->grad_accum, T = p->req.T;
    float lr = lr_at(&tr->cfg, tr->step);
    double mean;
    tr->data_changed[0] = 0;
    const Rng data_at_start = tr->rng_train;
    int rc = forward_backward(tr, fill, ctx, &mean, stop, ran);
    if (rc) return rc;
    if (tr->data_changed[0]) { /* nothing changes: the data position neither, so the step, run again, reads the same windows */
        tr->rng_train = data_at_start;
        return data_changed_error(tr, "training step");
    }
    double norm = grad_norm(tr) / tr->loss_scale;
    if (tr->plan.req.dtype == NGPT_DTYPE_F16 && isfinite(mean) && !isfinite(norm)) {
        /* fp16: the scaled gradients overflowed. Halve the loss scale and skip the step (dynamic loss
         * scaling, as torch's GradScaler) */
        tr->loss_scale *= 0.5f;
        tr->good_steps = 0;
        if (tr->loss_scale < 1.0f)
            return tr_fail(tr, NGPT_ERR_NUMERIC, "step %d: fp16 gradients overflow even at loss scale 1: use dtype bfloat16 or float32", tr->step);
        tr_log(tr, 1, "fp16: gradient overflow at step %d, loss scale now %g, step skipped", tr->step, (double)tr->loss_scale);
    } else if (!isfinite(mean) || !isfinite(norm)) {
        /* a poisoned step never reaches the parameters: skip it (on_nonfinite = skip) or stop */
        tr->nonfinite_run++;
        if (isnan(mean)) mean = NAN; /* unsigned: "nan" in the messages below, not "-nan" */
        if (isnan(norm)) norm = NAN;
        if (!strcmp(tr->cfg.on_nonfinite, "halt") || tr->nonfinite_run > MAX_NONFINITE_SKIPS)
            return tr_fail(tr, NGPT_ERR_NUMERIC, "step %d: the loss (%g) or the gradient norm (%g) is not finite%s; the parameters were not updated",
                           tr->step, mean, norm, tr->nonfinite_run > 1 ? " again" : "");
        tr->nonfinite_skipped++;
        tr_log(tr, 1, "warning: step %d: loss %g, gradient norm %g: not finite, step skipped (%d in a row)", tr->step, mean, norm,
               tr->nonfinite_run);
    } else {
        tr->nonfinite_run = 0;
        optimizer_step(tr, lr, norm);
        if (tr->plan.req.dtype == NGPT_DTYPE_F16 && ++tr->good_steps == 2000) { tr->loss_scale *= 2.0f; tr->good_steps = 0; }
    }
    if ((rc = be_check(tr, "the optimizer step"))) return rc;
    be->sync(be);
    tr->step++;
    tr->last_loss = (float)mean;
    tr->lr = lr;
    tr->last_step_seconds = now_seconds() - t0;
    tr->last_step_tokens = (double)B * T * GA;
    if (loss) *loss = (float)mean;
    return NGPT_OK;
}

/* one optimizer step (stop and ran as train_step_once's); on the CPU with threads = 0, now and then a probe step
 * on the other thread setting (a step left before its end counts as one; the thread setting changes no bits) */
static int train_step_with(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, float *loss, _Atomic int *stop, int *ran) {
    ThreadTuner *tn = &tr->tune;
    int probe = tn->enabled && ++tn->counter > 3 && tn->counter >= tn->next;
    if (!probe) {
        int rc = train_step_once(tr, fill, ctx, loss, stop, ran);
        if (!rc && tn->enabled && tn->counter > 3) {
            if (tn->n == THREAD_TUNER_HISTORY) memmove(tn->recent, tn->recent + 1, (THREAD_TUNER_HISTORY - 1) * sizeof(double)), tn->n--;
            tn->recent[tn->n++] = tr->last_step_seconds;
        }
        return rc;
    }
    ngpt_backend *be = tr->be;
    cpu_use_all_threads(be, tn->one);
    int rc = train_step_once(tr, fill, ctx, loss, stop, ran);
    if (!rc) {
        if (thread_probe_wins(tn->recent, tn->n, tr->last_step_seconds)) {
            int cores = cpu_of(be)->nthreads;
            int from = tn->one ? 1 : cores, to = tn->one ? cores : 1;
            tr_log(tr, 1, "cpu threads: %d -> %d (a step on %d took %.1f ms, over 15%% less than the recent median on %d)", from, to, to,
                   1e3 * tr->last_step_seconds, from);
            tn->one = !tn->one;
            tn->n = 0;
            tn->switches++;
            tn->gap = tn->every;
        } else {
            tn->gap = MIN(2 * tn->gap, 16 * tn->every);
        }
    }
    tn->next = tn->counter + tn->gap;
    cpu_use_all_threads(be, !tn->one); /* back to the current setting, after a failed step too */
    return rc;
}

static void fill_from_train(ngpt_trainer *tr, int micro, void *ctx) {
    (void)micro;
    (void)ctx;
    sample_batch(tr, &tr->train_data, &tr->rng_train, tr->plan.micro_batch);
}

/* NGPT_OK when tr can train on its dataset, else the refusal */
static int can_train(ngpt_trainer *tr) {
    if (tr->plan.req.inference) return tr_fail(tr, NGPT_ERR_STATE, SAMPLE_ONLY_REFUSAL);
    if (!tr->train_data.n) return tr_fail(tr, NGPT_ERR_STATE, "this trainer was made without data (no_data)");
    return NGPT_OK;
}

int ngpt_train_step(ngpt_trainer *tr, float *loss) {
    if (!tr) return NGPT_ERR_ARG;
    int rc = can_train(tr);
    return rc ? rc : train_step_with(tr, fill_from_train, NULL, loss, NULL, NULL);
}

typedef struct {
    const TokenSet *set;
    Rng rng;
    long long total; /* sequences */
    int micro;       /* sequences per micro-batch (the last may have fewer) */
} EvalFill;
static void eval_fill(ngpt_trainer *tr, int k, void *arg, int *B) {
    EvalFill *ef = (EvalFill *)arg;
    *B = (int)MIN((long long)ef->micro, ef->total - (long long)k * ef->micro);
    sample_batch(tr, ef->set, &ef->rng, *B);
}

/* mean loss over eval_iters * batch_size sequences of one split, in eval micro-batches; with stop (as
 * run_micro_batches takes it) set before the last micro-batch ends, NGPT_ERR_INTERRUPTED and no loss */
static int eval_split(ngpt_trainer *tr, const TokenSet *f, uint64_t stream, _Atomic int *stop, float *out) {
    const Plan *p = &tr->plan;
    int T = p->req.T, ran = 0;
    long long total = (long long)tr->cfg.eval_iters * tr->cfg.batch_size;
    EvalFill ef = {f, {(uint64_t)tr->cfg.seed, stream, 0}, total, p->eval_micro_batch};
    int count = (int)((total + p->eval_micro_batch - 1) / p->eval_micro_batch);
    tr->data_changed[0] = 0;
    double sum = run_micro_batches(tr, &p->eval, count, 0, 0.0f, eval_fill, &ef, stop, &ran);
    int rc = be_check(tr, "evaluation");
    if (rc) return rc;
    if (tr->data_changed[0]) return data_changed_error(tr, "evaluation");
    if (ran < count) return NGPT_ERR_INTERRUPTED;
    *out = (float)(sum / ((double)total * T));
    return NGPT_OK;
}

/* ngpt_evaluate; stop as eval_split takes it (an evaluation left unfinished changes nothing) */
static int evaluate(ngpt_trainer *tr, _Atomic int *stop, float *train_loss, float *val_loss) {
    if (!tr->train_data.n)
        return tr_fail(tr, NGPT_ERR_STATE, "this trainer was made without data (%s)", tr->opt.sample_only ? "sample_only" : "no_data");
    use_scratch(tr, &tr->plan.eval);
    /* fresh windows at every evaluation, reproducible from (seed, step): a resumed run sees the same */
    uint64_t base = 0x1000 + (uint64_t)tr->step * 2;
    float tl = 0, vl = 0; /* either output may be NULL */
    int rc = eval_split(tr, &tr->train_data, base, stop, &tl);
    if (!rc) rc = eval_split(tr, &tr->val_data, base + 1, stop, &vl);
    if (rc) return rc;
    tr->eval_count++;
    if (train_loss) *train_loss = tl;
    if (val_loss) *val_loss = vl;
    return NGPT_OK;
}

int ngpt_evaluate(ngpt_trainer *tr, float *train_loss, float *val_loss) {
    if (!tr) return NGPT_ERR_ARG;
    return evaluate(tr, NULL, train_loss, val_loss);
}

/* ---- generation with a KV cache, laid out in the batch region (nothing trains meanwhile) ---- */

/* sampling's layout in the batch region: KV caches for `seqs` sequences, rows for seqs * feed positions a pass */
typedef struct {
    size_t off[N_SAMPLE_BUFS];
    int seqs, feed;
} SampleFit;

/* lays out f for S sequences fed n positions at a time; returns the bytes */
static size_t sample_layout(ngpt_trainer *tr, int S, int n, SampleFit *f) {
    ngpt_shape shape = sample_shape(&tr->ms, S);
    f->seqs = S;
    f->feed = n;
    return sample_layout_of(&tr->ms, act_size(tr), S, n, tr->be->scratch_bytes(tr->be, &shape), f->off);
}

/* A decoding step's layers and logits recorded as one graph (the backend's graph_begin .. graph_end), for S sequences
 * at one new position each: every later step of S sequences replays it, reading its position from the device (the
 * int32 after the step's tokens). graph NULL: not recorded yet, or recorded for another S; failed: recordings that
 * failed (each such step runs its ops one by one; after the first, which may have been an op's first call, setting
 * up what the recording could not, a second gives up on graphs for the call). */
typedef struct {
    void *graph;
    int S, failed;
} DecodeGraph;
#define DECODE_GRAPH_TRIES 2

/* decode_step's layers and logits: positions t..t+n-1 of S sequences from their embeddings in S_X (t_at: NULL, or
 * where attention_decode reads t) */
static void decode_layers(ngpt_trainer *tr, const SampleFit *f, int S, int t, int n, const int32_t *t_at) {
    ngpt_backend *be = tr->be;
    const size_t *off = f->off;
    const ModelShape *m = &tr->ms;
    int C = m->C;
    char *R = tr->region, *P = tr->params;
    void *x = R + off[S_X], *ln = R + off[S_LN], *qkv = R + off[S_QKV], *att = R + off[S_ATT], *tmp = R + off[S_TMP], *fc = R + off[S_FC];
    float *mean = (float *)(R + off[S_STATS]), *rstd = mean + (size_t)S * n;
    size_t kv_layer = (size_t)f->seqs * 2 * (size_t)m->maxT * C * act_size(tr);
    int N = n * S; /* rows */
    const ngpt_dropout no_dropout = {0};
    for (int l = 0; l < m->L; l++) {
        layernorm_matmul(be, qkv, NULL, ln, mean, rstd, x, pt(tr, P, P_LN1W, l), pt_bias(tr, P, P_LN1B, l), pt(tr, P, P_QKVW, l),
                         pt_bias(tr, P, P_QKVB, l), N, C, 3 * C);
        be->attention_decode(be, att, R + off[S_KV] + (size_t)l * kv_layer, qkv, S, t, n, m->maxT, C, m->NH, t_at);
        matmul_dropout_residual(be, tmp, x, tmp, att, pt(tr, P, P_ATTPROJW, l), pt_bias(tr, P, P_ATTPROJB, l), N, C, C, &no_dropout);
        layernorm_matmul(be, qkv, fc, ln, mean, rstd, tmp, pt(tr, P, P_LN2W, l), pt_bias(tr, P, P_LN2B, l), pt(tr, P, P_FCW, l),
                         pt_bias(tr, P, P_FCB, l), N, C, 4 * C); /* GELU's input in S_QKV, free now */
        matmul_dropout_residual(be, x, tmp, x, fc, pt(tr, P, P_FCPROJW, l), pt_bias(tr, P, P_FCPROJB, l), N, 4 * C, C, &no_dropout);
    }
    /* the logits of the last position only: with one position, the S rows at once; else each sequence's last row */
    if (n == 1) {
        layernorm_matmul(be, R + off[S_LOGITS], NULL, ln, mean, rstd, x, pt(tr, P, P_LNFW, 0), pt_bias(tr, P, P_LNFB, 0), pt(tr, P, P_WTE, 0), NULL,
                         S, C, m->Vp);
        return;
    }
    for (int s = 0; s < S; s++) {
        size_t r = (size_t)s * n + (size_t)n - 1;
        be->layernorm_forward(be, (char *)ln + (size_t)s * C * act_size(tr), mean + r, rstd + r, (char *)x + r * C * act_size(tr), pt(tr, P, P_LNFW, 0),
                              pt_bias(tr, P, P_LNFB, 0), 1, C);
    }
    be->matmul_forward(be, R + off[S_LOGITS], ln, pt(tr, P, P_WTE, 0), NULL, S, C, m->Vp);
}

/* Runs positions t..t+n-1 of the first S sequences of layout f (S * n at most its rows) whose tokens are tok[0..S*n)
 * (tok[s*n+i]: position t+i of sequence s); leaves the logits of position t+n-1 in S_LOGITS. The tokens go up from
 * host set t % NGPT_FENCES, with t after them: its fence, recorded after that set's last upload, has passed before
 * the set is written again (an upload may still be queued behind the previous step's kernels). With g (not NULL) and
 * a backend that records graphs, a step of one position runs its layers as g's graph, recorded at the first such
 * step of S sequences (tr->graph_steps counts the steps it ran). */
static void decode_step(ngpt_trainer *tr, const SampleFit *f, int S, int t, int n, const int32_t *tok, DecodeGraph *g) {
    ngpt_backend *be = tr->be;
    int C = tr->ms.C;
    int32_t *dtok = (int32_t *)(tr->region + f->off[S_TOKENS]);
    int set = t % NGPT_FENCES;
    int32_t *h_tok = (int32_t *)host_set_buffer(tr, H_TOKENS, set);
    int N = n * S; /* rows */
    be->fence_wait(be, set);
    memcpy(h_tok, tok, (size_t)N * 4);
    h_tok[N] = t;
    be->upload(be, dtok, h_tok, (size_t)(N + 1) * 4);
    be->fence_record(be, set);
    const void *wpe_row = rows(tr, pt(tr, tr->params, P_WPE, 0), (size_t)t, (size_t)C); /* the position's: outside a graph */
    be->encoder_forward(be, tr->region + f->off[S_X], dtok, pt(tr, tr->params, P_WTE, 0), wpe_row, S, n, C);
    if (n == 1 && g && be->graph_begin && g->failed < DECODE_GRAPH_TRIES) {
        if (g->graph && g->S != S) {
            be->graph_free(be, g->graph);
            g->graph = NULL;
        }
        if (!g->graph) {
            be->graph_begin(be);
            decode_layers(tr, f, S, t, n, dtok + N);
            g->graph = be->graph_end(be);
            g->S = S;
            g->failed += !g->graph;
        }
        if (g->graph) {
            be->graph_launch(be, g->graph);
            tr->graph_steps++;
            return;
        }
    }
    decode_layers(tr, f, S, t, n, NULL);
}

/* The k-th largest of x[0..n) (1 <= k <= n), counting equal values apart; tmp has room for n. For k up to n / 64
 * (nanoGPT's top_k of 200 among GPT-2's 50,257 ids), the least of a min-heap of the k largest seen, which most
 * values pass by with one comparison; for larger k, quickselect on a copy in tmp (at 50,257 the heap is the faster
 * up to about k = 700). */
static float kth_largest(const float *x, float *tmp, int n, int k) {
    if (k <= n / 64) { /* tmp[0..k): the heap, its least at tmp[0] */
        for (int i = 0; i < k; i++) { /* the first k, each a new leaf sifted up */
            tmp[i] = x[i];
            for (int at = i; at > 0 && tmp[at] < tmp[(at - 1) / 2]; at = (at - 1) / 2) {
                float t = tmp[at]; tmp[at] = tmp[(at - 1) / 2]; tmp[(at - 1) / 2] = t;
            }
        }
        for (int i = k; i < n; i++) { /* a larger one replaces the least, and sifts down */
            if (!(x[i] > tmp[0])) continue;
            tmp[0] = x[i];
            for (int at = 0;;) {
                int least = at, c = 2 * at + 1;
                if (c < k && tmp[c] < tmp[least]) least = c;
                if (c + 1 < k && tmp[c + 1] < tmp[least]) least = c + 1;
                if (least == at) break;
                float t = tmp[at]; tmp[at] = tmp[least]; tmp[least] = t;
                at = least;
            }
        }
        return tmp[0];
    }
    memcpy(tmp, x, (size_t)n * sizeof *tmp);
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = tmp[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (tmp[i] > pivot) i++;
            while (tmp[j] < pivot) j--;
            if (i <= j) { float t = tmp[i]; tmp[i] = tmp[j]; tmp[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return tmp[want];
}

/* sample_token's working memory, each array of V */
typedef struct {
    float *select;  /* kth_largest's */
    int32_t *kept;  /* the ids at or above the cut, ascending */
    double *weight; /* and their weights */
} SampleScratch;

/* The largest of x[lo..hi) (hi > lo) and its lowest id */
static void largest_in(const float *x, int lo, int hi, float *most, int32_t *best) {
    int32_t at = lo;
    float m = x[lo]; /* held, not read again through at: no chain of loads from one id to the next */
    for (int j = lo + 1; j < hi; j++)
        if (x[j] > m) m = x[at = j];
    *most = m;
    *best = at;
}

/* The ids j of [lo, hi) whose logit is at or above cut, ascending, into kept, and their weights exp((logit - mx) *
 * inv_t) in double into weight, each added to *sum in turn (sum NULL: not summed); returns how many */
static int keep_at_or_above(const float *logits, int lo, int hi, float cut, double mx, double inv_t, int32_t *kept, double *weight, double *sum) {
    int n = 0;
    for (int j = lo; j < hi; j++)
        if (logits[j] >= cut) {
            kept[n] = j;
            weight[n] = exp(((double)logits[j] - mx) * inv_t);
            if (sum) *sum += weight[n];
            n++;
        }
    return n;
}

/* One draw from the kept ids, in segments (segment i: count[i] ids from start[i] of kept and weight, the segments in
 * the order of their ids) whose weights add up to sum, added in the order of the ids: walked in that order */
static int32_t draw_kept(const int32_t *kept, const double *weight, const int *start, const int *count, int nseg, double sum, Rng *rng) {
    const double u = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0;
    int32_t last = 0;
    for (int i = 0; i < nseg; i++)
        for (int e = start[i]; e < start[i] + count[i]; e++) {
            acc += weight[e];
            if (acc > u) return kept[e];
            last = kept[e];
        }
    return last;
}

/* nanoGPT's sampling from logits[0..V): / temperature, keep the top_k (ties included), softmax, draw. The weights
 * are exp((logit - max) / temperature) in double, so a tiny temperature gives the most likely token rather than
 * inf - inf; temperature 0 is that token without a draw (the lowest id among equal logits). Each kept id's weight
 * is computed once, and summed and drawn from in the order of the ids. */
static int32_t sample_token(const float *logits, const SampleScratch *sc, int V, float temperature, int top_k, Rng *rng) {
    float most;
    int32_t best;
    largest_in(logits, 0, V, &most, &best);
    if (temperature == 0) return best;
    const float cut = top_k > 0 && top_k < V ? kth_largest(logits, sc->select, V, top_k) : -FLT_MAX;
    double sum = 0;
    const int start = 0, n = keep_at_or_above(logits, 0, V, cut, most, 1.0 / temperature, sc->kept, sc->weight, &sum);
    return draw_kept(sc->kept, sc->weight, &start, &n, 1, sum, rng);
}

/* One sample's draw split between the threads of a pool, sample_token's token: thread i takes the ids [lo_i, hi_i)
 * (split_range), finds their largest logit and, for a top_k cut, the logits at or above its range's top_k-th
 * largest, into cand at lo_i (they hold the whole vocabulary's top_k, so the k-th largest of all the ranges' is the
 * vocabulary's: the calling thread takes it as the cut); then thread i keeps its ids at or above the cut, with their
 * weights, at lo_i of kept and weight, and the calling thread draws from them in the order of the ids. */
typedef struct {
    const float *logits;
    float *cand, *merged;   /* V each: the ranges' candidates (and kth_largest's scratch for a range), all of them */
    int32_t *kept;          /* V */
    double *weight;         /* V */
    int V, top_k, keeping;  /* keeping: the second pass */
    float cut;
    double mx, inv_t;
    int start[POOL_MAX_THREADS], count[POOL_MAX_THREADS]; /* candidates, then kept, of each range */
    float most[POOL_MAX_THREADS];
    int32_t best[POOL_MAX_THREADS];
} SplitDraw;

static void split_draw_range(void *arg, int ithread, int nthreads) {
    SplitDraw *d = (SplitDraw *)arg;
    size_t lo, hi;
    split_range((size_t)d->V, ithread, nthreads, &lo, &hi);
    const int l = (int)lo, h = (int)hi;
    d->start[ithread] = l;
    d->count[ithread] = 0;
    if (l == h) { d->best[ithread] = -1; return; } /* more threads than ids */
    if (d->keeping) {
        d->count[ithread] = keep_at_or_above(d->logits, l, h, d->cut, d->mx, d->inv_t, d->kept + l, d->weight + l, NULL);
        return;
    }
    largest_in(d->logits, l, h, &d->most[ithread], &d->best[ithread]);
    if (d->top_k > 0 && d->top_k < d->V) { /* a range of top_k or fewer gives all its logits */
        const float c = d->top_k < h - l ? kth_largest(d->logits + l, d->cand + l, h - l, d->top_k) : -INFINITY;
        int n = 0;
        for (int j = l; j < h; j++)
            if (d->logits[j] >= c) d->cand[l + n++] = d->logits[j];
        d->count[ithread] = n;
    }
}

static int32_t sample_token_split(Pool *pool, SplitDraw *d, const float *logits, int V, float temperature, int top_k, Rng *rng) {
    const int nt = pool->nthreads;
    d->logits = logits;
    d->V = V;
    d->top_k = top_k;
    d->keeping = 0;
    pool_run(pool, split_draw_range, d);
    float most = -INFINITY;
    int32_t best = -1;
    for (int i = 0; i < nt; i++) /* the first range's largest, then any larger: the lowest id among equals */
        if (d->best[i] >= 0 && (best < 0 || d->most[i] > most)) most = d->most[i], best = d->best[i];
    if (temperature == 0) return best;
    float cut = -FLT_MAX;
    if (top_k > 0 && top_k < V) {
        int n = 0;
        for (int i = 0; i < nt; i++) {
            memmove(d->merged + n, d->cand + d->start[i], (size_t)d->count[i] * sizeof(float));
            n += d->count[i];
        }
        if (n >= top_k) cut = kth_largest(d->merged, d->cand, n, top_k); /* fewer only where logits are NaN */
    }
    d->cut = cut;
    d->mx = most;
    d->inv_t = 1.0 / temperature;
    d->keeping = 1;
    pool_run(pool, split_draw_range, d);
    double sum = 0; /* in the order of the ids, as one thread adds them */
    for (int i = 0; i < nt; i++)
        for (int e = d->start[i]; e < d->start[i] + d->count[i]; e++) sum += d->weight[e];
    return draw_kept(d->kept, d->weight, d->start, d->count, nt, sum, rng);
}

#define SAMPLE_RNG_STREAM ((uint64_t)1 << 40) /* + the sample's index: apart from training's streams */

/* One step's draws: each of the n samples' next token (seqs[s * total + len]) from its row of logits, with its own
 * stream; the samples split between the threads, each with its own scratch, so the tokens are the same on any
 * number of threads */
typedef struct {
    const float *logits;
    int Vp, V, top_k, n, len;
    float temperature;
    size_t total;
    Rng *rng;
    int32_t *seqs;
    const SampleScratch *scratch; /* one a thread */
} SampleDraws;
static void sample_draws(void *arg, int ithread, int nthreads) {
    const SampleDraws *d = (const SampleDraws *)arg;
    for (int s = ithread; s < d->n; s += nthreads)
        d->seqs[(size_t)s * d->total + d->len] = sample_token(d->logits + (size_t)s * d->Vp, &d->scratch[ithread], d->V, d->temperature, d->top_k,
                                                              &d->rng[s]);
}

/* How sampling fits the region for num_samples: f->seqs sequences decoded at once (as many as the token staging and
 * the region hold, at most num_samples), and rows for f->feed positions of each a pass (as many as then fit, up to
 * block_size: a prompt, or the window a cache is rebuilt from, goes in that many at a time; each new token is one
 * position). Nonzero when not even one sequence's KV cache fits. */
static int sample_fit(ngpt_trainer *tr, int num_samples, SampleFit *f) {
    size_t host_set_tokens = tr->plan.host_bytes_of[H_TOKENS] / NGPT_FENCES / sizeof(int32_t) - 1; /* decode_step's staging, less t */
    int S = (int)MIN((size_t)num_samples, host_set_tokens), feed = 1;
    while (S > 1 && sample_layout(tr, S, 1, f) > tr->plan.region_bytes) S--;
    if (sample_layout(tr, S, 1, f) > tr->plan.region_bytes) return 1;
    for (int hi = (int)MIN((size_t)tr->ms.maxT, host_set_tokens / (size_t)S); feed < hi;) {
        int mid = feed + (hi - feed + 1) / 2;
        if (sample_layout(tr, S, mid, f) <= tr->plan.region_bytes) feed = mid;
        else hi = mid - 1;
    }
    sample_layout(tr, S, feed, f);
    return 0;
}

/* Whether n samples decoded together share their prompt: fed to the first alone, then its cache copied (share_prompt) */
static int sample_shares_prompt(const ngpt_trainer *tr, int n) { return n > 1 && tr->be->copy != NULL; }

/* Positions of each of `fed` sequences one decode_step takes: the rows sample_fit planned, split between them */
static int sample_pass_positions(const ngpt_trainer *tr, const SampleFit *f, int fed) { return MIN(tr->ms.maxT, f->seqs * f->feed / fed); }

/* After the shared prompt was fed to sequence 0 alone (its pos positions): its keys and values, and its logits, copied to
 * sequences 1..n-1 */
static void share_prompt(ngpt_trainer *tr, const SampleFit *f, int n, int pos) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    size_t a = act_size(tr), half = (size_t)m->maxT * m->C * a, used = (size_t)pos * m->C * a; /* a sequence's keys (or values) */
    for (int l = 0; l < m->L; l++) {
        char *kv = tr->region + f->off[S_KV] + (size_t)l * f->seqs * 2 * half;
        for (int s = 1; s < n; s++) {
            be->copy(be, kv + (size_t)s * 2 * half, kv, used);
            be->copy(be, kv + (size_t)s * 2 * half + half, kv + half, used);
        }
    }
    char *logits = tr->region + f->off[S_LOGITS];
    for (int s = 1; s < n; s++) be->copy(be, logits + (size_t)s * m->Vp * a, logits, (size_t)m->Vp * a);
}

/* The host threads a step's draws run on: pool NULL, the calling thread alone; own, a pool started for the call */
typedef struct {
    Pool *pool;
    PoolStorage *own;
} DrawThreads;

/* asked 0 (ngpt_sample): on the CPU backend its own pool, whose threads stay warm from the step's ops, on the threads
 * those ops use now (one where the thread tuner measured one faster); on a GPU, which has no host pool, a pool of
 * the configured threads (one per core by default) started for the call. asked > 0: a pool of that many started for
 * the call (1: the calling thread). A thread that did not start leaves its share to the others. Nonzero: out of
 * host memory. */
static int draw_threads_start(ngpt_trainer *tr, int asked, DrawThreads *dt) {
    *dt = (DrawThreads){NULL, NULL};
    if (!asked && tr->plan.req.device != DEV_BACKEND_CUDA) {
        CpuBackend *cb = cpu_of(tr->be);
        if (cb->active > 1) dt->pool = &cb->pool.pool;
        return 0;
    }
    int n = asked ? asked : tr->plan.req.nthreads;
    if (n < 2) return 0;
    if (!(dt->own = (PoolStorage *)malloc(sizeof(PoolStorage)))) return 1;
    char err[NGPT_ERRLEN];
    pool_init(dt->own, n, err, sizeof err);
    dt->pool = &dt->own->pool;
    return 0;
}
static void draw_threads_stop(DrawThreads *dt) {
    if (dt->own) pool_free(dt->own);
    free(dt->own);
}

/* ngpt_sample; with reuse_prompt, a round of samples after the first takes the prompt's keys and values from the cache
 * where the round before left them (its samples never rebuilt their window), and the prompt's logits as the first
 * round drew them, rather than feeding the prompt again (0: fed each round, the slow obvious way tests hold it to).
 * A step's draws split between host threads (draw_threads_start's `asked`); on a GPU the device waits for them. */
static int sample_rounds(ngpt_trainer *tr, const int32_t *prompt, int n_prompt, int num_samples, int max_new, float temperature, int top_k,
                         uint64_t seed, int32_t *out, int reuse_prompt, int draw_threads_asked) {
    if (!tr) return NGPT_ERR_ARG;
    if (!prompt || !out) return tr_fail(tr, NGPT_ERR_ARG, "ngpt_sample: prompt and out must not be NULL");
    const ModelShape *m = &tr->ms;
    if (n_prompt < 1 || num_samples < 1 || max_new < 0 || max_new > INT_MAX - n_prompt || !(temperature >= 0 && temperature <= FLT_MAX) ||
        top_k < 0)
        return tr_fail(tr, NGPT_ERR_ARG, "sample: need a prompt of at least one token, num_samples >= 1, max_new_tokens 0..%d (INT_MAX less the "
                                         "prompt), temperature >= 0, top_k >= 0 (0 = all); got %d, %d, %d, %g, %d",
                       n_prompt >= 1 ? INT_MAX - n_prompt : INT_MAX - 1, n_prompt, num_samples, max_new, (double)temperature, top_k);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= m->V) return tr_fail(tr, NGPT_ERR_ARG, "sample: prompt token %d is %d, outside the vocabulary (0..%d)", i, prompt[i], m->V - 1);
    SampleFit fit;
    if (sample_fit(tr, num_samples, &fit))
        return tr_fail(tr, NGPT_ERR_NOMEM, "sample: the KV cache of one sequence does not fit the planned batch region");
    const int S = fit.seqs;
    ngpt_backend *be = tr->be;
    be->set_scratch(be, tr->region + fit.off[S_SCRATCH], tr->plan.region_bytes - fit.off[S_SCRATCH]);
    int total = n_prompt + max_new, rc = NGPT_OK;
    float *logits = (float *)malloc((size_t)m->Vp * S * sizeof(float)), *prompt_logits = (float *)malloc((size_t)m->Vp * sizeof(float));
    int32_t *tok = (int32_t *)malloc((size_t)fit.seqs * fit.feed * sizeof(int32_t));
    Rng *rng = (Rng *)malloc((size_t)S * sizeof(Rng));
    DrawThreads dt;
    int no_threads = draw_threads_start(tr, draw_threads_asked, &dt);
    const int draw_nt = dt.pool ? dt.pool->nthreads : 1;
    const size_t V = (size_t)m->V, drawing = (size_t)MIN(S, draw_nt); /* threads past the samples have none to draw */
    SampleScratch *scratch = (SampleScratch *)malloc(drawing * sizeof(SampleScratch));
    float *select = (float *)malloc(drawing * V * sizeof(float));
    int32_t *kept = (int32_t *)malloc(drawing * V * sizeof(int32_t));
    double *weight = (double *)malloc(drawing * V * sizeof(double));
    /* a step of few samples (at most half the threads) splits each one's draw between the threads; the last round has
     * the fewest samples, so when it does not split, no round does and the split's candidates are never allocated */
    const int last_round = num_samples - (num_samples - 1) / S * S, splits = dt.pool && 2 * last_round <= draw_nt;
    float *cand = splits ? (float *)malloc(V * sizeof(float)) : NULL;
    if (!logits || !prompt_logits || !tok || !rng || !scratch || !select || !kept || !weight || no_threads || (splits && !cand))
        rc = tr_fail(tr, NGPT_ERR_NOMEM, "out of host memory");
    for (size_t i = 0; !rc && i < drawing; i++) scratch[i] = (SampleScratch){select + i * V, kept + i * V, weight + i * V};
    SplitDraw split = {.cand = cand, .merged = select, .kept = kept, .weight = weight};
    /* after a round that drew from the prompt and never rebuilt a window: every cache the next round uses (it has no
     * more samples) holds the prompt at positions 0..prompt_pos-1, and prompt_logits its last position's logits */
    int prompt_cached = 0, prompt_pos = 0;
    DecodeGraph graph = {NULL, 0, 0};
    for (int first = 0; first < num_samples && !rc; first += S) {
        int n = MIN(S, num_samples - first);
        /* each sample its own stream of draws, so sample k draws the same numbers however many are asked for and
         * however many the plan decodes at once (nanoGPT draws them one after another) */
        for (int s = 0; s < n; s++) rng[s] = (Rng){seed, SAMPLE_RNG_STREAM + (uint64_t)(first + s), 0};
        int32_t *seqs = out + (size_t)first * total;
        for (int s = 0; s < n; s++) memcpy(seqs + (size_t)s * total, prompt, (size_t)n_prompt * sizeof(int32_t));
        int len = n_prompt, pos = 0, start = 0; /* the cache holds tokens start..start+pos-1 at positions 0..pos-1 */
        if (len > m->maxT) start = len - m->maxT;
        int cached = reuse_prompt && prompt_cached, rebuilt = 0;
        if (cached) pos = prompt_pos;
        int shared = !cached && sample_shares_prompt(tr, n); /* the samples' windows are the prompt's until their first new token */
        while (len < total && !rc) {
            /* feed what the cache lacks (a prompt shared by the samples to sample 0 alone, then copied), then sample one token */
            int fed = shared ? 1 : n, per = sample_pass_positions(tr, &fit, fed);
            while (start + pos < len) {
                if (pos == m->maxT) { start = len - MAX(1, m->maxT / 2); pos = 0; rebuilt = 1; } /* full: rebuild from the last half (one token at block_size 1) */
                int k = MIN(MIN(len - (start + pos), m->maxT - pos), per);
                for (int i = 0; i < k; i++)
                    for (int s = 0; s < fed; s++) tok[s * k + i] = seqs[(size_t)s * total + start + pos + i];
                decode_step(tr, &fit, fed, pos, k, tok, shared ? NULL : &graph); /* a shared prompt's one token: not recorded for it */
                pos += k;
            }
            if (shared) share_prompt(tr, &fit, n, pos);
            shared = 0;
            if (cached) {
                for (int s = 0; s < n; s++) memcpy(logits + (size_t)s * m->Vp, prompt_logits, (size_t)m->Vp * sizeof(float));
                cached = 0;
            } else {
                download_as_f32(tr, logits, tr->region + fit.off[S_LOGITS], (size_t)n * m->Vp); /* one wait for all n rows */
                if (len == n_prompt) memcpy(prompt_logits, logits, (size_t)m->Vp * sizeof(float)), prompt_pos = pos;
            }
            if (splits && 2 * n <= draw_nt) {
                for (int s = 0; s < n; s++)
                    seqs[(size_t)s * total + len] = sample_token_split(dt.pool, &split, logits + (size_t)s * m->Vp, m->V, temperature, top_k, &rng[s]);
            } else {
                SampleDraws draws = {logits, m->Vp, m->V, top_k, n, len, temperature, (size_t)total, rng, seqs, scratch};
                if (dt.pool) pool_run(dt.pool, sample_draws, &draws);
                else sample_draws(&draws, 0, 1);
            }
            len++;
            rc = be_check(tr, "sampling");
        }
        prompt_cached = max_new > 0 && !rebuilt;
    }
    if (graph.graph) be->graph_free(be, graph.graph);
    if (!rc) rc = be_check(tr, "sampling");
    draw_threads_stop(&dt);
    free(logits);
    free(prompt_logits);
    free(tok);
    free(rng);
    free(scratch);
    free(select);
    free(kept);
    free(weight);
    free(cand);
    return rc;
}

int ngpt_sample(ngpt_trainer *tr, const int32_t *prompt, int n_prompt, int num_samples, int max_new, float temperature, int top_k,
                uint64_t seed, int32_t *out) {
    return sample_rounds(tr, prompt, n_prompt, num_samples, max_new, temperature, top_k, seed, out, 1, 0);
}

#define NO_CHARS                                                                                                       \
    "this trainer has no character vocabulary: no meta.bin (or meta.pkl) was read (set dataset or data_dir to the folder whose meta.bin " \
    "holds the model's characters); a model of GPT-2 tokens uses ngpt_tokenizer_encode and ngpt_tokenizer_decode"

int ngpt_chars_encode(ngpt_trainer *tr, const char *text, size_t len, int32_t *ids, size_t cap, size_t *n_out) {
    if (!tr) return NGPT_ERR_ARG;
    if (!n_out || (!text && len) || (!ids && cap)) return tr_fail(tr, NGPT_ERR_ARG, "ngpt_chars_encode: a NULL buffer with a size");
    *n_out = 0;
    if (!tr->charvocab) return tr_fail(tr, NGPT_ERR_STATE, NO_CHARS);
    char msg[NGPT_ERRLEN];
    int rc = charvocab_encode(tr->charvocab, text, len, ids, cap, n_out, msg, sizeof msg);
    return rc ? tr_fail(tr, rc, "%s", msg) : NGPT_OK;
}

int ngpt_chars_decode(ngpt_trainer *tr, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len_out) {
    if (!tr) return NGPT_ERR_ARG;
    if (!len_out || (!ids && n) || (!out && cap)) return tr_fail(tr, NGPT_ERR_ARG, "ngpt_chars_decode: a NULL buffer with a size");
    *len_out = 0;
    if (!tr->charvocab) return tr_fail(tr, NGPT_ERR_STATE, NO_CHARS);
    char msg[NGPT_ERRLEN];
    int rc = charvocab_decode(tr->charvocab, ids, n, out, cap, len_out, msg, sizeof msg);
    return rc ? tr_fail(tr, rc, "%s", msg) : NGPT_OK;
}

void ngpt_get_stats(const ngpt_trainer *tr, ngpt_stats *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!tr) return;
    st->step = tr->step;
    st->best_val_loss = tr->best_val_loss;
    st->last_loss = tr->last_loss;
    st->lr = tr->lr;
    st->micro_batch = tr->plan.micro_batch;
    st->grad_accum = tr->plan.grad_accum;
    st->eval_micro_batch = tr->plan.eval_micro_batch;
    st->lanes = tr->plan.lanes;
    st->recompute = tr->plan.recompute;
    st->logits_chunk = tr->plan.logits_chunk;
    st->parameters = plan_params_unpadded(&tr->plan);
    st->device_bytes = tr->plan.device_bytes;
    st->host_bytes = tr->plan.host_bytes;
    st->tokens_per_second = tr->last_step_seconds > 0 ? tr->last_step_tokens / tr->last_step_seconds : 0;
    st->device = tr->be->name;
    st->skipped_steps = tr->nonfinite_skipped;
}

void ngpt_request_stop(ngpt_trainer *tr) {
    if (tr) atomic_store(&tr->stop_requested, 1);
}

/* model FLOPs per token, as nanoGPT's estimate_mfu counts them: 6N (N without the position embeddings)
 * plus 12 L C T for attention */
static double flops_per_token(const ngpt_trainer *tr) {
    double N = (double)(plan_params_unpadded(&tr->plan) - tr->plan.param_len[P_WPE]);
    return 6.0 * N + 12.0 * tr->ms.L * tr->ms.C * tr->plan.req.T;
}

/* a number for a JSON line: fmt (one double), or null for NaN and Inf, which JSON cannot hold */
static const char *json_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "null");
    return buf;
}

/* one line to the JSONL log: formatted on the stack and written with write(2), so nothing is allocated. A line
 * that cannot be written whole (a full disk, a file size limit) is taken back, so the log holds whole lines, and
 * said once; training goes on (its checkpoints say for themselves whether they are saved). */
static void jsonl_line(ngpt_trainer *tr, int fd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void jsonl_line(ngpt_trainer *tr, int fd, const char *fmt, ...) {
    if (fd < 0) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    size_t len = (size_t)MIN(n, (int)sizeof line - 1);
    off_t end = lseek(fd, 0, SEEK_END);
    ssize_t put = write(fd, line, len), more = 0;
    if (put >= 0 && (size_t)put < len && (more = write(fd, line + put, len - (size_t)put)) > 0) put += more; /* the rest, or its errno */
    if (put == (ssize_t)len) return;
    int e = put < 0 || more < 0 ? errno : EIO;
    if (end >= 0 && ftruncate(fd, end)) { /* the part stays; plot skips a line it cannot read */ }
    if (!tr->jsonl_failed)
        tr_log(tr, 1, "warning: %s/log.jsonl cannot be written (%s): step %d and on may be missing from it (and from nanogpt plot); "
                      "training goes on", tr->cfg.out_dir, strerror(e), tr->step);
    tr->jsonl_failed = 1;
}

/* Reports a step or an evaluation: the progress callback, the log (every log_interval steps when there is
 * no progress callback) and one line of out_dir/log.jsonl. */
static void report(ngpt_trainer *tr, int jsonl, int is_eval, float train_loss, float val_loss, double mean_step_seconds) {
    const ngpt_config *c = &tr->cfg;
    ngpt_progress p;
    memset(&p, 0, sizeof p);
    p.step = is_eval ? tr->step : tr->step - 1;
    p.max_iters = c->max_iters;
    p.is_eval = is_eval;
    /* a NaN loss as an unsigned NaN, which prints as "nan" (Python's spelling), not "-nan" */
    p.loss = isnan(tr->last_loss) ? NAN : tr->last_loss;
    p.lr = tr->lr;
    p.train_loss = isnan(train_loss) ? NAN : train_loss;
    p.val_loss = isnan(val_loss) ? NAN : val_loss;
    p.step_seconds = tr->last_step_seconds;
    p.tokens_per_second = tr->last_step_seconds > 0 ? tr->last_step_tokens / tr->last_step_seconds : 0;
    p.flops_per_second = p.tokens_per_second * flops_per_token(tr);
    /* a step faster than the peak measured at start (on a host busy then) shows the peak was measured low: the
     * best rate a step reaches is a truer one, and MFU stays a fraction of it */
    if (!is_eval && tr->peak_flops > 0 && p.flops_per_second > tr->peak_flops) {
        char was[32], now[32];
        if (!tr->peak_raised++)
            tr_log(tr, 0, "note: step %d ran %s of model FLOPs, above the matmul peak measured at the start (%s: the machine was busier then); MFU "
                          "is now over the best rate a step reaches, so 100%% means as fast as any step so far", p.step,
                   fmt_flops(now, sizeof now, p.flops_per_second), fmt_flops(was, sizeof was, tr->peak_flops));
        tr->peak_flops = p.flops_per_second;
    }
    p.mfu = tr->peak_flops > 0 ? p.flops_per_second / tr->peak_flops : -1;
    p.eta_seconds = mean_step_seconds * (double)MAX(0, c->max_iters + 1 - tr->step);
    p.memory_bytes = tr->plan.device_bytes + tr->plan.host_bytes;
    if (tr->opt.progress) tr->opt.progress(tr->opt.ctx, &p);
    char n1[32], n2[32], n3[32], n4[32], n5[32];
    if (is_eval) {
        tr_log(tr, 0, "step %d: train loss %.4f, val loss %.4f", p.step, (double)p.train_loss, (double)p.val_loss);
        jsonl_line(tr, jsonl, "{\"step\": %d, \"train_loss\": %s, \"val_loss\": %s%s}\n", p.step, json_num(n1, sizeof n1, "%.6f", p.train_loss),
                   json_num(n2, sizeof n2, "%.6f", p.val_loss), c->eval_only ? ", \"eval_only\": true" : "");
    } else {
        if (!tr->opt.progress && p.step % c->log_interval == 0)
            tr_log(tr, 0, "iter %d: loss %.4f, time %.2fms, lr %.3e, %.0f tok/s", p.step, (double)p.loss, p.step_seconds * 1e3, (double)p.lr,
                   p.tokens_per_second);
        jsonl_line(tr, jsonl, "{\"step\": %d, \"loss\": %s, \"lr\": %s, \"dt_ms\": %s, \"tokens_per_second\": %s, \"mfu\": %s}\n", p.step,
                   json_num(n1, sizeof n1, "%.6f", p.loss), json_num(n2, sizeof n2, "%.6e", p.lr), json_num(n3, sizeof n3, "%.3f", p.step_seconds * 1e3),
                   json_num(n4, sizeof n4, "%.1f", p.tokens_per_second), json_num(n5, sizeof n5, "%.4f", p.mfu >= 0 ? p.mfu : NAN));
    }
}

/* out_dir's newest checkpoint is of this step (saved by this run, or the one it resumed from) */
static int step_saved(const ngpt_trainer *tr) { return tr->n_kept && tr->kept_steps[tr->n_kept - 1] == tr->step; }

/* A stop request met at tr->step: where (after a step: "") says where the run stopped, dropped whether an
 * evaluation was left unfinished. The step's state is saved unless nothing is to be saved: eval_only, no step
 * trained yet, or out_dir's newest checkpoint is this step's. */
static int stop_here(ngpt_trainer *tr, const char *where, int dropped) {
    if (tr->cfg.eval_only) return tr_fail(tr, NGPT_ERR_INTERRUPTED, "stopped at step %d%s: eval_only saves nothing", tr->step, where);
    if (tr->step == 0) return tr_fail(tr, NGPT_ERR_INTERRUPTED, "stopped at step 0%s, before the first step: nothing to save", where);
    int rc = step_saved(tr) ? NGPT_OK : checkpoint_save(tr, 0);
    if (rc) return rc;
    return tr_fail(tr, NGPT_ERR_INTERRUPTED, "stopped at step %d%s%s; the checkpoint is saved in %s: resume from it with init_from = resume",
                   tr->step, where, dropped ? " (a resume runs it again)" : "", tr->cfg.out_dir);
}

/* The flag that may leave ngpt_train's step at tr->step before its end: none for the step an evaluation comes
 * before (step % eval_interval == 0), whose resume from the step before would evaluate again, which costs more
 * than the step in nanoGPT's configs (train_gpt2: 2 x 200 batches of 12 forward, against 40 of 12 forward and
 * backward); a stop there lets the step end. */
static _Atomic int *step_stop_flag(ngpt_trainer *tr) { return tr->step % tr->cfg.eval_interval ? &tr->stop_requested : NULL; }

/* A step of ngpt_train's: one that a stop request may leave before its end (stop_leaves_step, step_stop_flag),
 * with the training batches' random state put back as the step found it, so that a resume from the step before
 * draws this step's batches again. *ran: how many of its micro-batches ran. */
static int train_loop_step(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, int *ran) {
    Rng at_start = tr->rng_train;
    int rc = can_train(tr);
    if (!rc) rc = train_step_with(tr, fill, ctx, NULL, step_stop_flag(tr), ran);
    if (rc == NGPT_ERR_INTERRUPTED) tr->rng_train = at_start;
    return rc;
}

/* stop_here for a step that train_loop_step left after ran of its micro-batches (none: the step never began) */
static int stop_in_step(ngpt_trainer *tr, int ran) {
    char where[96] = "";
    int left = atomic_load(&tr->micro_left); /* inside micro-batch ran + 1 */
    if (left) snprintf(where, sizeof where, ", left midway through micro-batch %d of its %d", ran + 1, tr->plan.grad_accum);
    else if (ran) snprintf(where, sizeof where, ", %d of its %d micro-batches run", ran, tr->plan.grad_accum);
    return stop_here(tr, where, ran > 0 || left);
}

/* Before the run's first evaluation, which comes before any step's line: when it will take a while (above 10 s
 * even at the matmul peak, as GPT-2 124M's eval_iters 200 does on a CPU), how long at the least */
static void first_evaluation_note(ngpt_trainer *tr) {
    const ngpt_config *c = &tr->cfg;
    if (tr->peak_flops <= 0) return;
    double tokens = 2.0 * c->eval_iters * c->batch_size * tr->plan.req.T; /* train and val */
    double seconds = tokens * flops_per_token(tr) / 3 / tr->peak_flops;  /* the forward pass: a third of 6N + 12LCT */
    char took[32];
    if (seconds > 10)
        tr_log(tr, 0, "evaluating first: eval_iters %d x batch_size %d sequences of train and of val, forward only; at least %s at the "
                      "matmul peak", c->eval_iters, c->batch_size, fmt_duration(took, sizeof took, seconds));
}

/* Before the run's first evaluation or step: when one layer of a micro-batch takes over 10 s even at the matmul peak
 * (a long block_size on a CPU), that a stop waits for the layer in progress, and how long it may take */
static void long_layer_note(ngpt_trainer *tr) {
    if (tr->peak_flops <= 0) return;
    /* a layer's parameters (the embeddings and the classifier, whose chunks a stop may end between, are not a layer's) */
    const double C = tr->ms.C, T = tr->plan.req.T;
    const double layer_params = ((double)plan_params_unpadded(&tr->plan) - (double)tr->ms.V * C - (double)tr->plan.param_len[P_WPE]) / tr->ms.L;
    const double per_layer = (6 * layer_params + 12 * C * T) * T; /* a sequence's, forward and backward */
    const double train = tr->cfg.eval_only ? 0 : tr->plan.micro_batch * per_layer, eval = tr->plan.eval_micro_batch * per_layer / 3; /* forward only */
    const double seconds = MAX(train, eval) / tr->peak_flops;
    char took[32];
    if (seconds > 10)
        tr_log(tr, 0, "note: one layer of a micro-batch takes at least %s here at the matmul peak, and a stop (Ctrl-C, SIGTERM) waits for the "
                      "layer in progress; on the command line, another one a second later quits at once, without saving",
               fmt_duration(took, sizeof took, seconds));
}

static int train_loop(ngpt_trainer *tr, int jsonl) {
    const ngpt_config *c = &tr->cfg;
    double run_seconds = 0;
    int run_steps = 0;
    long_layer_note(tr);
    for (;;) {
        /* eval_only: one evaluation at the step the model is at, then the end, with nothing saved (nanoGPT
         * stops after its step-0 evaluation, so a resumed eval_only run there trained on) */
        if (tr->step % c->eval_interval == 0 || c->eval_only) {
            if (!run_steps) first_evaluation_note(tr);
            float tl = 0, vl = 0, best_before = tr->best_val_loss;
            int rc = evaluate(tr, &tr->stop_requested, &tl, &vl);
            if (rc == NGPT_ERR_INTERRUPTED) return stop_here(tr, ", during its evaluation", 1);
            if (rc) return rc;
            if (vl < tr->best_val_loss) tr->best_val_loss = vl; /* the run's own evaluations: one an embedder asks for decides no save */
            report(tr, jsonl, 1, tl, vl, run_steps ? run_seconds / run_steps : 0);
            if (c->eval_only) break;
            /* nanoGPT: save when val improves, or at every evaluation with always_save_checkpoint */
            if (tr->step > 0 && (vl < best_before || c->always_save_checkpoint) && (rc = checkpoint_save(tr, vl < best_before)))
                return rc;
            /* a request that came as the evaluation ended (from its progress callback, say): not one step more */
            if (atomic_load(&tr->stop_requested)) return stop_here(tr, ", after its evaluation", 0);
        }
        if (tr->step >= c->max_iters + 1) break;
        int ran = 0, rc = train_loop_step(tr, fill_from_train, NULL, &ran);
        if (rc == NGPT_ERR_INTERRUPTED) return stop_in_step(tr, ran);
        if (rc) return rc;
        run_seconds += tr->last_step_seconds;
        run_steps++;
        report(tr, jsonl, 0, 0, 0, run_seconds / run_steps);
        if (tr->step > c->max_iters) {
            /* the end of the run: its final state is kept too (nanoGPT keeps only evaluation saves) */
            if (!step_saved(tr) && (rc = checkpoint_save(tr, 0))) return rc;
            break;
        }
        if (atomic_load(&tr->stop_requested)) return stop_here(tr, "", 0);
    }
    return NGPT_OK;
}

/* The refusal of a new run (not a resume) into an out_dir that holds another run's checkpoints, the newest at
 * step newest (-1: best.bin alone) */
static int out_dir_taken_error(const ngpt_config *c, long long newest, char *err, size_t errlen) {
    char what[64] = "best.bin", best[600];
    if (newest >= 0) snprintf(what, sizeof what, "the newest ckpt_%09lld.bin", newest);
    snprintf(best, sizeof best, "%.580s/best.bin", c->out_dir);
    int has_best = file_exists(best);
    return fail(err, errlen, NGPT_ERR_ARG,
                "out_dir %.400s holds another run's checkpoints (%s): a new run (init_from = %s) would %s. Continue that run with "
                "init_from = resume, give this one another out_dir, or remove them first",
                c->out_dir, what, c->init_from, newest < 0 ? "replace its best.bin" : has_best ? "replace its best.bin and prune them" : "prune them");
}

/* The newest ckpt_<step>.bin in out_dir that this trainer does not know (neither there when it was made nor saved
 * by it): another run's, saved since; -1 when there is none. Files older than the oldest listed at its creation
 * (beyond the newest MAX_KEEP_CHECKPOINTS) are not its to judge. */
static long long foreign_checkpoint(const ngpt_trainer *tr) {
    long long steps[MAX_KEEP_CHECKPOINTS];
    for (int i = checkpoint_list(tr->cfg.out_dir, steps, MAX_KEEP_CHECKPOINTS) - 1; i >= 0 && steps[i] >= tr->known_from; i--) {
        int known = 0;
        for (int k = 0; k < tr->n_kept && !known; k++) known = tr->kept_steps[k] == steps[i];
        if (!known) return steps[i];
    }
    return -1;
}

static int train_run(ngpt_trainer *tr) {
    char path[600];
    /* a new run's saves would replace best.bin and prune the other run's checkpoints, and a later resume could
     * pick either run's: a mistyped out_dir (or one left from a config) must not cost a trained model */
    if (tr->out_dir_taken && !tr->cfg.eval_only)
        return out_dir_taken_error(&tr->cfg, tr->n_kept ? tr->kept_steps[tr->n_kept - 1] : -1, tr->err, sizeof tr->err);
    snprintf(path, sizeof path, "%.580s/log.jsonl", tr->cfg.out_dir);
    int jsonl = -1;
    if (tr->out_dir_taken) { /* eval_only of a model from elsewhere: out_dir's log is its own run's curve */
        tr->unlogged = 1;
        tr_log(tr, 0, "eval_only: out_dir %s holds another run's checkpoints: the evaluation is printed, not logged into its log.jsonl",
               tr->cfg.out_dir);
    } else if (mkdir_p(tr->cfg.out_dir)) {
        if (!tr->cfg.eval_only) return tr_fail(tr, NGPT_ERR_IO, "cannot create out_dir %s: %s", tr->cfg.out_dir, strerror(errno));
    } else if ((jsonl = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0 && !tr->cfg.eval_only)
        return tr_fail(tr, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (!tr->out_dir_taken && (tr->unlogged = jsonl < 0)) /* eval_only saves nothing, as in nanoGPT: a read-only out_dir costs it only its log line */
        tr_log(tr, 0, "eval_only: %s cannot be written (%s): the evaluation is printed, not logged", path, strerror(errno));
    if (!tr->cfg.eval_only && access(tr->cfg.out_dir, W_OK | X_OK)) { /* else the first save would fail, a whole eval_interval in */
        int e = errno;
        close(jsonl);
        return tr_fail(tr, NGPT_ERR_IO, "cannot create checkpoints in out_dir %s: %s (its log.jsonl can be written, the folder cannot): give "
                                        "the run a folder it may write, or make this one writable", tr->cfg.out_dir, strerror(e));
    }
    int lock = -1; /* held while this call trains */
    if (!tr->cfg.eval_only && out_dir_lock(tr->cfg.out_dir, &lock)) {
        if (jsonl >= 0) close(jsonl);
        return tr_fail(tr, NGPT_ERR_ARG, "out_dir %s is in use by another run training into it now: two runs would replace each other's "
                                           "checkpoints and mix their logs; give this one another out_dir, or wait for that one to end",
                       tr->cfg.out_dir);
    }
    /* what the folder held was read when this trainer was made; another run may have trained into it and ended
     * since (the lock is held only while one trains) */
    long long foreign = tr->cfg.eval_only ? -1 : foreign_checkpoint(tr);
    int rc = NGPT_OK;
    if (foreign >= 0 && !tr->resumed)
        rc = out_dir_taken_error(&tr->cfg, foreign, tr->err, sizeof tr->err);
    else if (foreign >= 0)
        rc = fail(tr->err, sizeof tr->err, NGPT_ERR_ARG, "out_dir %.400s holds ckpt_%09lld.bin, which another run saved after this one resumed "
                  "from step %d there: training on would mix the two runs' checkpoints; resume again (init_from = resume reads the newest) "
                  "or give this run another out_dir", tr->cfg.out_dir, foreign, tr->resumed_step);
    if (!rc) rc = train_loop(tr, jsonl);
    if (jsonl >= 0) close(jsonl);
    if (lock >= 0) close(lock);
    return rc;
}

int ngpt_train(ngpt_trainer *tr) {
    if (!tr) return NGPT_ERR_ARG;
    if (tr->in_train) /* a progress callback's; its run goes on */
        return tr_fail(tr, NGPT_ERR_STATE, "ngpt_train was called while this trainer's ngpt_train runs (from its progress callback): "
                                           "call ngpt_request_stop there, and ngpt_train again after it returns");
    int rc = tr->cfg.eval_only ? NGPT_OK : can_train(tr); /* refused before out_dir or its log is made */
    tr->in_train = 1;
    if (!rc) rc = train_run(tr);
    tr->in_train = 0;
    atomic_store(&tr->stop_requested, 0); /* used up by any return: a later ngpt_train continues the run */
    return rc;
}

/* ======================================================================================================
 * Benchmark (`nanogpt bench`): steps on random tokens, the backend's own matmul peak, and the time of one
 * step per op category.
 * ==================================================================================================== */

enum { PROF_MATMUL, PROF_ATTENTION, PROF_CLASSIFIER, PROF_ELEMENTWISE, PROF_OPTIMIZER, N_PROF };
CLI_USED static const char *const prof_names[N_PROF] = {"matmul", "attention", "classifier", "elementwise", "optimizer"};
/* the backend ops the profile times, each also on its own within its category */
#define PROF_OPS(X)                                                                                                                 \
    X(encoder_forward) X(encoder_backward) X(layernorm_forward) X(layernorm_backward) X(matmul_forward) X(matmul_backward)         \
        X(matmul_forward_gelu) X(matmul_backward_gelu) X(matmul_forward_residual) X(attention_forward) X(attention_backward)       \
            X(gelu_forward) X(gelu_backward) X(residual_forward) X(dropout) X(crossentropy) X(adamw) X(zero) X(norm_sq)
#define PROF_OP_ID(name) PO_##name,
#define PROF_OP_NAME(name) #name,
enum { PROF_OPS(PROF_OP_ID) N_PROF_OPS };
CLI_USED static const char *const prof_op_names[N_PROF_OPS] = {PROF_OPS(PROF_OP_NAME)};
#undef PROF_OP_ID
#undef PROF_OP_NAME

/* A copy of the backend's table whose compute ops wait for the device before and after each call and add
 * the time to a category. The copy shares impl, so the real functions work on it; a failure it records is
 * handed back to the real table. The classifier's matmuls are told apart by their weight (wte). */
typedef struct {
    ngpt_backend be;    /* what the trainer calls while profiling */
    ngpt_backend inner; /* the real table */
    const void *wte;
    double seconds[N_PROF];
    double op_seconds[N_PROF][N_PROF_OPS]; /* each op's share of its category */
    int op_calls[N_PROF][N_PROF_OPS];
} ProfBackend;

static double prof_begin(ProfBackend *p) {
    p->inner.sync(&p->be);
    return now_seconds();
}
static void prof_end(ProfBackend *p, int cat, int op, double t0) {
    p->inner.sync(&p->be);
    double dt = now_seconds() - t0;
    p->seconds[cat] += dt;
    p->op_seconds[cat][op] += dt;
    p->op_calls[cat][op]++;
}

#define PROF_OP(name, cat, params, args)                                                                         \
    static void prof_##name params {                                                                              \
        ProfBackend *p = (ProfBackend *)be;                                                                       \
        double t0 = prof_begin(p);                                                                                \
        p->inner.name args;                                                                                       \
        prof_end(p, cat, PO_##name, t0);                                                                          \
    }
PROF_OP(encoder_forward, PROF_ELEMENTWISE, (ngpt_backend *be, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C),
        (be, out, tokens, wte, wpe, B, T, C))
PROF_OP(encoder_backward, PROF_ELEMENTWISE,
        (ngpt_backend *be, void *dwte, void *dwpe, const void *dout, const int32_t *tokens, const int32_t *bucket_start, const int32_t *bucket_pos,
         int nbuckets, int B, int T, int C),
        (be, dwte, dwpe, dout, tokens, bucket_start, bucket_pos, nbuckets, B, T, C))
PROF_OP(layernorm_forward, PROF_ELEMENTWISE,
        (ngpt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C),
        (be, out, mean, rstd, inp, w, b, N, C))
PROF_OP(layernorm_backward, PROF_ELEMENTWISE,
        (ngpt_backend *be, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w, const float *mean, const float *rstd,
         int N, int C),
        (be, dinp, dw, db, dout, inp, w, mean, rstd, N, C))
PROF_OP(matmul_forward, w == p->wte ? PROF_CLASSIFIER : PROF_MATMUL,
        (ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC), (be, out, inp, w, bias, N, C, OC))
PROF_OP(matmul_backward, w == p->wte ? PROF_CLASSIFIER : PROF_MATMUL,
        (ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N, int C, int OC),
        (be, dinp, dw, dbias, dout, inp, w, N, C, OC))
PROF_OP(matmul_forward_gelu, PROF_MATMUL,
        (ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC),
        (be, pre, act, inp, w, bias, N, C, OC))
PROF_OP(matmul_backward_gelu, PROF_MATMUL,
        (ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, const void *pre, int N, int C,
         int OC),
        (be, dinp, dw, dbias, dout, inp, w, pre, N, C, OC))
PROF_OP(matmul_forward_residual, PROF_MATMUL,
        (ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, const void *res, int N, int C, int OC),
        (be, out, inp, w, bias, res, N, C, OC))
PROF_OP(attention_forward, PROF_ATTENTION,
        (ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *drop),
        (be, out, lse, qkv, B, T, C, NH, drop))
PROF_OP(attention_backward, PROF_ATTENTION,
        (ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B, int T, int C, int NH,
         const ngpt_dropout *drop),
        (be, dqkv, dout, qkv, out, lse, B, T, C, NH, drop))
PROF_OP(gelu_forward, PROF_ELEMENTWISE, (ngpt_backend *be, void *out, const void *inp, size_t n), (be, out, inp, n))
PROF_OP(gelu_backward, PROF_ELEMENTWISE, (ngpt_backend *be, void *dinp, const void *inp, const void *dout, size_t n), (be, dinp, inp, dout, n))
PROF_OP(residual_forward, PROF_ELEMENTWISE, (ngpt_backend *be, void *out, const void *a, const void *b, size_t n), (be, out, a, b, n))
PROF_OP(dropout, PROF_ELEMENTWISE, (ngpt_backend *be, void *out, const void *inp, size_t n, const ngpt_dropout *drop), (be, out, inp, n, drop))
PROF_OP(crossentropy, PROF_CLASSIFIER,
        (ngpt_backend *be, void *logits, float *losses, const int32_t *targets, int N, int V, int Vp, float dscale),
        (be, logits, losses, targets, N, V, Vp, dscale))
PROF_OP(adamw, PROF_OPTIMIZER, (ngpt_backend *be, void *param, float *master, const void *grad, void *m, void *v, size_t n, const ngpt_adamw *h),
        (be, param, master, grad, m, v, n, h))
PROF_OP(zero, PROF_OPTIMIZER, (ngpt_backend *be, void *dst, size_t bytes), (be, dst, bytes))
#undef PROF_OP
static double prof_norm_sq(ngpt_backend *be, const void *x, size_t n) {
    ProfBackend *p = (ProfBackend *)be;
    double t0 = prof_begin(p), s = p->inner.norm_sq(be, x, n);
    prof_end(p, PROF_OPTIMIZER, PO_norm_sq, t0);
    return s;
}

static void prof_wrap(ProfBackend *p, ngpt_backend *real, const void *wte) {
    memset(p, 0, sizeof *p);
    p->inner = *real;
    p->be = *real;
    p->wte = wte;
    ngpt_backend *b = &p->be;
    b->encoder_forward = prof_encoder_forward;
    b->encoder_backward = prof_encoder_backward;
    b->layernorm_forward = prof_layernorm_forward;
    b->layernorm_backward = prof_layernorm_backward;
    b->matmul_forward = prof_matmul_forward;
    b->matmul_backward = prof_matmul_backward;
    b->matmul_forward_gelu = real->matmul_forward_gelu ? prof_matmul_forward_gelu : NULL; /* timed as matmul, GELU inside */
    b->matmul_backward_gelu = real->matmul_backward_gelu ? prof_matmul_backward_gelu : NULL;
    b->matmul_forward_residual = real->matmul_forward_residual ? prof_matmul_forward_residual : NULL; /* timed as matmul */
    b->layernorm_matmul_forward = NULL; /* decoding's: a step runs its LayerNorms and products as the ops timed here */
    b->attention_forward = prof_attention_forward;
    b->attention_backward = prof_attention_backward;
    b->gelu_forward = prof_gelu_forward;
    b->gelu_backward = prof_gelu_backward;
    b->residual_forward = prof_residual_forward;
    b->dropout = prof_dropout;
    b->crossentropy = prof_crossentropy;
    b->adamw = prof_adamw;
    b->zero = prof_zero;
    b->norm_sq = prof_norm_sq;
    b->run_lanes = NULL; /* the lanes one after another: one op at a time, timed alone */
}

/* A copy of the backend's table that adds up the time the host is blocked waiting for the device (sync, download,
 * fence_wait, and norm_sq, whose two launches count with its wait): the timed steps run on it, so a step's time less
 * those waits is the host's own (launching the ops, drawing the batch, the loop). Near the whole step, the device
 * waits for the host; on the CPU backend every op runs on the host, so there it says nothing. Shares impl and hands
 * a failure back to the real table as ProfBackend does. */
typedef struct {
    ngpt_backend be;    /* what the trainer calls */
    ngpt_backend inner; /* the real table */
    double waited;      /* seconds blocked in the calls above */
} WaitBackend;

static void wait_sync(ngpt_backend *be) {
    WaitBackend *w = (WaitBackend *)be;
    double t0 = now_seconds();
    w->inner.sync(be);
    w->waited += now_seconds() - t0;
}
static void wait_download(ngpt_backend *be, void *host_dst, const void *src, size_t bytes) {
    WaitBackend *w = (WaitBackend *)be;
    double t0 = now_seconds();
    w->inner.download(be, host_dst, src, bytes);
    w->waited += now_seconds() - t0;
}
static void wait_fence_wait(ngpt_backend *be, int fence) {
    WaitBackend *w = (WaitBackend *)be;
    double t0 = now_seconds();
    w->inner.fence_wait(be, fence);
    w->waited += now_seconds() - t0;
}
static double wait_norm_sq(ngpt_backend *be, const void *x, size_t n) {
    WaitBackend *w = (WaitBackend *)be;
    double t0 = now_seconds(), s = w->inner.norm_sq(be, x, n);
    w->waited += now_seconds() - t0;
    return s;
}
static void wait_wrap(WaitBackend *w, ngpt_backend *real) {
    memset(w, 0, sizeof *w);
    w->inner = *real;
    w->be = *real;
    w->be.sync = wait_sync;
    w->be.download = wait_download;
    w->be.fence_wait = wait_fence_wait;
    w->be.norm_sq = wait_norm_sq;
}
/* ends a wrap (WaitBackend, ProfBackend): a failure recorded on the copy of the table goes to the real one */
static void hand_back_status(const ngpt_backend *copy, ngpt_backend *real) {
    if (copy->status && !real->status) {
        real->status = copy->status;
        memcpy(real->msg, copy->msg, sizeof real->msg);
    }
}

typedef struct {
    int steps, warmup;
    double median_step_seconds, tokens_per_step, tokens_per_second;
    double host_step_seconds; /* the timed steps' time outside waits for the device (WaitBackend), a step on average */
    double wait_step_seconds; /* their time in those waits, a step on average */
    double flops_per_token;    /* nanoGPT's estimate_mfu count */
    int peak_size;             /* the square matmul the peak was measured on (0: no room) */
    double peak_flops;         /* FLOP/s of the backend's matmul at peak_size, in the run's precision, or the steps' model
                                * FLOP/s where that is more (peak_measured then says what was measured) */
    double peak_measured;      /* the measured peak, when the steps ran faster than it (a host busy at the start); else 0 */
    double mfu;                /* model FLOP/s / peak_flops, at most 1; -1 without a peak */
    double op_seconds[N_PROF]; /* one profiled step */
    double by_op_seconds[N_PROF][N_PROF_OPS]; /* the same, by op within each category */
    int by_op_calls[N_PROF][N_PROF_OPS];
    double profiled_step_seconds;
    double arena_bytes;        /* device + host arenas */
    double memory_in_use;      /* CUDA: device memory in use (cudaMemGetInfo); CPU: peak resident set */
} BenchResult;

/* random tokens for every micro-batch: the counter generator, ids below V */
static void fill_random_tokens(ngpt_trainer *tr, int micro, void *ctx) {
    (void)micro;
    Rng *rng = (Rng *)ctx;
    size_t n = (size_t)tr->plan.micro_batch * tr->plan.req.T;
    for (size_t i = 0; i < n; i++) {
        tr->h_tokens[i] = (int32_t)rng_below(rng, (uint64_t)tr->ms.V);
        tr->h_targets[i] = (int32_t)rng_below(rng, (uint64_t)tr->ms.V);
    }
}

static int cmp_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Kernel timings at the model's own shapes, in the AdamW moments (zeroed again after): each linear layer's
 * three products (the forward, the input gradient and the weight gradient, each alone; fc's forward and the MLP
 * projection's input gradient also with GELU fused, as the step runs them; the weight gradient again with its
 * bias gradient, as the step runs it), the classifier's over
 * one planned chunk, attention forward and backward over one micro-batch, LayerNorm forward and backward, GELU
 * forward and backward as ops of their own, the loss over one chunk; and decoding's products (sampling with the
 * KV cache: 1 and 10 rows, one a sample, by each weight matrix, the calls of a decode run back to back). Each the
 * fastest of repeated calls (time_best). */
typedef struct {
    char name[40];
    double flops, bytes, seconds; /* a product or attention: its FLOPs; a memory-bound op: the bytes it must move at least */
} KernelTime;
enum { N_KERNEL_TIMES = 40, DECODE_CALLS = 32 };

/* The fastest of repeated runs after a warm-up run: at least 5, and on until 0.2 s have passed (at most 200),
 * so that a shared machine's quiet moments are found (a peak measured in a busy one made MFU exceed 100%). */
static double time_best_over(ngpt_backend *be, void (*run)(void *), void *ctx, double seconds) {
    double best = 1e30, start = 0;
    for (int i = 0; i <= 200 && (i <= 5 || now_seconds() - start < seconds); i++) {
        be->sync(be);
        double t0 = now_seconds();
        if (i == 1) start = t0;
        run(ctx);
        be->sync(be);
        if (i) best = MIN(best, now_seconds() - t0);
    }
    return best;
}
static double time_best(ngpt_backend *be, void (*run)(void *), void *ctx) { return time_best_over(be, run, ctx, 0.2); }

typedef struct {
    ngpt_backend *be;
    char *x, *w, *y, *dx, *dw;
    char *pre; /* a product with GELU fused (matmul_forward_gelu's act, matmul_backward_gelu's pre); NULL for a plain one */
    float *lse;
    int N, C, OC, B, T, NH, backward;
    char *bias, *dbias; /* LayerNorm's; dbias also a weight gradient's bias gradient */
    int32_t *targets;   /* the loss's */
} KernelCall;
static void kernel_matmul(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    if (k->pre && k->backward) k->be->matmul_backward_gelu(k->be, k->dx, k->dw, NULL, k->y, k->x, k->w, k->pre, k->N, k->C, k->OC);
    else if (k->pre) k->be->matmul_forward_gelu(k->be, k->y, k->pre, k->x, k->w, NULL, k->N, k->C, k->OC);
    else if (k->backward) k->be->matmul_backward(k->be, k->dx, k->dw, k->dbias, k->y, k->x, k->w, k->N, k->C, k->OC);
    else k->be->matmul_forward(k->be, k->y, k->x, k->w, NULL, k->N, k->C, k->OC);
}
static void kernel_attention(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    ngpt_dropout none = {0, 0, 0, 0};
    if (k->backward) k->be->attention_backward(k->be, k->dx, k->y, k->x, k->w, k->lse, k->B, k->T, k->C, k->NH, &none);
    else k->be->attention_forward(k->be, k->w, k->lse, k->x, k->B, k->T, k->C, k->NH, &none);
}
/* LayerNorm of x (N x C) into y; backward: dout in y, adding into dx, dw, dbias; mean and rstd in lse[0, 2N) */
static void kernel_layernorm(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    if (k->backward) k->be->layernorm_backward(k->be, k->dx, k->dw, k->dbias, k->y, k->x, k->w, k->lse, k->lse + k->N, k->N, k->C);
    else k->be->layernorm_forward(k->be, k->y, k->lse, k->lse + k->N, k->x, k->w, k->bias, k->N, k->C);
}
/* GELU over the N x C values of x into dx; backward: dx = dout (y) times GELU's derivative at x, the separate ops
 * a step runs where the backend does not fuse them into the products */
static void kernel_gelu(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    if (k->backward) k->be->gelu_backward(k->be, k->dx, k->x, k->y, (size_t)k->N * k->C);
    else k->be->gelu_forward(k->be, k->dx, k->x, (size_t)k->N * k->C);
}
/* the loss over N rows of logits x (OC = Vp columns, the first C = V of them the vocabulary), losses into lse,
 * the gradient in place */
static void kernel_loss(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    k->be->crossentropy(k->be, k->x, k->lse, k->targets, k->N, k->C, k->OC, 1.0f / (float)k->N);
}
/* decoding's product, DECODE_CALLS times back to back (each a few microseconds on a GPU: one call between two
 * synchronisations would time the synchronisation) */
static void kernel_decode(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    for (int i = 0; i < DECODE_CALLS; i++) k->be->matmul_forward(k->be, k->y, k->x, k->w, NULL, k->N, k->C, k->OC);
}
/* decoding's attention, DECODE_CALLS times: a new position of each of N sequences (its q, k, v in x) against a KV
 * cache (w) of T positions, the new one the last, into y */
static void kernel_kv_attention(void *arg) {
    KernelCall *k = (KernelCall *)arg;
    for (int i = 0; i < DECODE_CALLS; i++) k->be->attention_decode(k->be, k->y, k->w, k->x, k->N, k->T - 1, 1, k->T, k->C, k->NH, NULL);
}

/* n values of the backend's dtype at dst, drawn from N(0, 1) through tmp (tmp_bytes, at least 4, apart from
 * dst): the benchmarks time products and attention on random data, as their PyTorch peer does, never on
 * zeros (on which a GPU's tensor cores run faster) */
static void bench_fill_random(ngpt_trainer *tr, char *dst, size_t n, char *tmp, size_t tmp_bytes, uint64_t stream) {
    ngpt_backend *be = tr->be;
    size_t a = act_size(tr), chunk = tmp_bytes / 4;
    if (a != 4 && !chunk) { /* no room to draw in (a 1-element product): zeros, too small to time anyway */
        be->zero(be, dst, n * a);
        return;
    }
    if (a == 4) {
        be->fill_normal(be, (float *)dst, n, 0.0f, 1.0f, (uint64_t)tr->cfg.seed, stream);
        return;
    }
    for (size_t off = 0; off < n; off += chunk) {
        size_t c = MIN(chunk, n - off);
        be->fill_normal(be, (float *)tmp, c, 0.0f, 1.0f, (uint64_t)tr->cfg.seed, stream + off / chunk);
        be->cast_from_f32(be, dst + off * a, (const float *)tmp, c);
    }
}

/* The backend's matmul on S x S x S in the AdamW moments (zero before the first step, zeroed again after):
 * the largest S (a multiple of 128 from 512, at most 4096 on a GPU and 1024 on the CPU) that fits, none when
 * 512 does not (a small model: no MFU then); the best rate of
 * the forward product and of the backward pair (dX and dW, which read their operands the other way round).
 * Returns the FLOP/s (0: none measured); *size = S (0: none). */
static double matmul_peak(ngpt_trainer *tr, int *size) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    size_t room = p->off_region - p->off_m, a = act_size(tr);
    int S = strcmp(be->name, "cpu") ? 4096 : 1024;
    while (S >= 512 && 5 * (size_t)S * S * a > room) S -= 128;
    *size = S >= 512 ? S : 0; /* below 512 the product measures overheads, not the peak */
    if (!*size) return 0;
    size_t SS = (size_t)S * S * a;
    char *x = tr->m, *w = x + SS, *y = w + SS, *dx = y + SS, *dw = dx + SS;
    for (int i = 0; i < 3; i++) bench_fill_random(tr, x + i * SS, (size_t)S * S, dx, SS, 100 + (uint64_t)i * 1000000);
    be->zero(be, dx, 2 * SS);
    use_scratch(tr, &p->train);
    KernelCall k = {.be = be, .x = x, .w = w, .y = y, .dx = dx, .dw = dw, .N = S, .C = S, .OC = S};
    double peak = 0;
    for (k.backward = 0; k.backward < 2; k.backward++) {
        double rate = (k.backward ? 4.0 : 2.0) * S * (double)S * S / time_best(be, kernel_matmul, &k);
        peak = MAX(peak, rate);
    }
    be->zero(be, tr->m, p->off_region - p->off_m);
    return peak;
}

/* returns how many entries of out were filled (those that fit in the moments); *classifier_rows: the rows of
 * the classifier product timed */
CLI_USED static int bench_kernels(ngpt_trainer *tr, KernelTime out[N_KERNEL_TIMES], int *classifier_rows) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    const ModelShape *m = &tr->ms;
    size_t room = p->off_region - p->off_m, a = act_size(tr);
    int B = p->micro_batch, T = p->req.T, C = m->C, N = B * T, n = 0;
    use_scratch(tr, &p->train);
    /* the classifier over one planned chunk of rows, or as many rows as the moments hold beside wte */
    double fit = ((double)room / (double)a - 2.0 * m->Vp * C) / (2.0 * C + m->Vp);
    *classifier_rows = (int)MIN((double)p->logits_chunk, MAX(fit, 0.0));
    struct { const char *name; int N, C, OC; } lin[] = {
        {"qkv", N, C, 3 * C}, {"attn proj", N, C, C}, {"fc", N, C, 4 * C}, {"mlp proj", N, 4 * C, C}, {"classifier chunk", *classifier_rows, C, m->Vp}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        size_t nx = (size_t)lin[i].N * lin[i].C, nw = (size_t)lin[i].OC * lin[i].C, ny = (size_t)lin[i].N * lin[i].OC;
        if (lin[i].N < 1 || (2 * nx + 2 * nw + ny) * a > room) continue;
        KernelCall k = {.be = be, .x = tr->m, .w = tr->m + nx * a, .y = tr->m + (nx + nw) * a, .dx = tr->m + (nx + nw + ny) * a,
                        .dw = tr->m + (2 * nx + nw + ny) * a, .N = lin[i].N, .C = lin[i].C, .OC = lin[i].OC};
        bench_fill_random(tr, k.x, nx, k.dx, nx * a, 200); /* dx is the draws' scratch, then an output */
        bench_fill_random(tr, k.w, nw, k.dx, nx * a, 300000000);
        be->zero(be, k.dw, nw * a);
        char *dx = k.dx, *dw = k.dw;
        /* the backward's two products, each alone; then, where the backend fuses GELU into a product and the room
         * holds its other N x 4C operand, that product again fused, as the step runs it: fc's forward (which also
         * writes GELU of its output) and the MLP projection's input gradient (times GELU's derivative at the
         * forward's input); then a layer's weight gradient with its bias gradient (dout's column sums: a
         * reduction of its own, or on the TMA matmul summed from the tiles the product loads) */
        static const char *const products[3] = {"fwd", "dinp", "dweight"};
        int gelu_product = !strcmp(lin[i].name, "fc") ? 0 : !strcmp(lin[i].name, "mlp proj") ? 1 : -1;
        if ((gelu_product == 0 && !be->matmul_forward_gelu) || (gelu_product == 1 && !be->matmul_backward_gelu))
            gelu_product = -1; /* the backend has not fused it: the step runs the ops one by one */
        const size_t npre = gelu_product == 0 ? ny : nx;
        const int has_gelu = gelu_product >= 0 && (2 * nx + 2 * nw + ny + npre) * a <= room;
        const int has_bias = strcmp(lin[i].name, "classifier chunk") && (2 * nx + 2 * nw + ny + (size_t)lin[i].OC) * a <= room; /* the classifier has none */
        const int nprod = 3 + has_gelu + has_bias;
        for (int pr = 0; pr < nprod; pr++, n++) {
            const int fused = pr == 3 && has_gelu, with_bias = pr == nprod - 1 && has_bias, backward = fused ? gelu_product : pr > 0;
            if (pr == 1) bench_fill_random(tr, k.y, ny, k.dx, nx * a, 600000000); /* dout: the forward wrote y */
            if (fused) {
                k.pre = tr->m + (2 * nx + 2 * nw + ny) * a;
                if (backward) bench_fill_random(tr, k.pre, npre, dx, nx * a, 700000000); /* GELU's input; dx the draws' scratch */
            }
            if (with_bias) { /* GELU's operand is done with: its room holds the bias gradient */
                k.pre = NULL;
                k.dbias = tr->m + (2 * nx + 2 * nw + ny) * a;
                be->zero(be, k.dbias, (size_t)lin[i].OC * a);
            }
            k.backward = backward;
            k.dx = pr == 2 || with_bias ? NULL : dx;
            k.dw = pr == 1 || fused ? NULL : dw;
            snprintf(out[n].name, sizeof out[n].name, "matmul %s %s", lin[i].name,
                     with_bias ? "dbias+dweight" : fused ? (backward ? "dinp gelu" : "fwd gelu") : products[pr]);
            out[n].flops = 2.0 * lin[i].N * (double)lin[i].C * lin[i].OC;
            out[n].bytes = 0;
            out[n].seconds = time_best(be, kernel_matmul, &k);
        }
    }
    size_t nqkv = (size_t)N * 3 * C, no = (size_t)N * C, nlse = (size_t)B * m->NH * T;
    if ((2 * nqkv + 2 * no) * a + nlse * 4 <= room) {
        KernelCall k = {.be = be, .x = tr->m, .w = tr->m + nqkv * a, .y = tr->m + (nqkv + no) * a, .dx = tr->m + (nqkv + 2 * no) * a,
                        .lse = (float *)(tr->m + (2 * nqkv + 2 * no) * a), .N = N, .C = C, .B = B, .T = T, .NH = m->NH};
        bench_fill_random(tr, k.x, nqkv, k.dx, nqkv * a, 700); /* qkv and dout; dqkv is the scratch */
        bench_fill_random(tr, k.y, no, k.dx, nqkv * a, 800000000);
        be->zero(be, k.dx, nqkv * a);
        double causal = 2.0 * 2.0 * B * m->NH * (T * (T + 1.0) / 2.0) * (C / m->NH); /* QK^T and PV below the diagonal */
        use_backward_scratch(tr, &p->train); /* as the step's attention backward has it */
        for (k.backward = 0; k.backward < 2; k.backward++, n++) {
            snprintf(out[n].name, sizeof out[n].name, "attention %s", k.backward ? "bwd" : "fwd");
            out[n].flops = (k.backward ? 2.5 : 1.0) * causal; /* backward: recompute S, then dV, dP, dQ, dK */
            out[n].bytes = 0;
            out[n].seconds = time_best(be, kernel_attention, &k);
        }
        use_scratch(tr, &p->train);
    }
    /* the memory-bound ops, by the bytes each must move at least: LayerNorm over the N x C activations (its
     * backward adds into dinp, so reads it too), GELU and its derivative over the N x 4C ones as separate ops
     * (beside the fused products above: what fusing saves or costs), and the loss over one classifier chunk */
    size_t nc = (size_t)N * C, off_w = ALIGN_UP(3 * nc * a, 256), off_st = ALIGN_UP(off_w + 4 * (size_t)C * a, 256);
    if (off_st + 2 * (size_t)N * 4 <= room) {
        char *w = tr->m + off_w; /* weight, bias, their gradients: C each */
        KernelCall k = {.be = be, .x = tr->m, .y = tr->m + nc * a, .dx = tr->m + 2 * nc * a, .w = w, .bias = w + C * a, .dw = w + 2 * C * a,
                        .dbias = w + 3 * C * a, .lse = (float *)(tr->m + off_st), .N = N, .C = C};
        bench_fill_random(tr, k.x, nc, k.dx, nc * a, 900); /* dx is the draws' scratch, then an output */
        bench_fill_random(tr, k.w, 2 * (size_t)C, k.dx, nc * a, 1000000000); /* weight and bias */
        be->zero(be, k.dx, nc * a);
        be->zero(be, k.dw, 2 * (size_t)C * a);
        for (k.backward = 0; k.backward < 2; k.backward++, n++) {
            if (k.backward) { /* dout: the forward wrote y */
                bench_fill_random(tr, k.y, nc, k.dx, nc * a, 1100000000);
                be->zero(be, k.dx, nc * a);
            }
            snprintf(out[n].name, sizeof out[n].name, "layernorm %s", k.backward ? "bwd" : "fwd");
            out[n].flops = 0;
            out[n].bytes = (k.backward ? 4.0 : 2.0) * (double)nc * (double)a;
            out[n].seconds = time_best(be, kernel_layernorm, &k);
        }
    }
    size_t ng = (size_t)N * 4 * C;
    if (3 * ng * a <= room) {
        KernelCall k = {.be = be, .x = tr->m, .y = tr->m + ng * a, .dx = tr->m + 2 * ng * a, .N = N, .C = 4 * C};
        bench_fill_random(tr, k.x, ng, k.dx, ng * a, 1300000000); /* GELU's input; dx is the draws' scratch, then the output */
        bench_fill_random(tr, k.y, ng, k.dx, ng * a, 1400000000); /* dout */
        for (k.backward = 0; k.backward < 2; k.backward++, n++) {
            snprintf(out[n].name, sizeof out[n].name, "gelu %s", k.backward ? "bwd" : "fwd");
            out[n].flops = 0;
            out[n].bytes = (k.backward ? 3.0 : 2.0) * (double)ng * (double)a;
            out[n].seconds = time_best(be, kernel_gelu, &k);
        }
    }
    size_t rows = (size_t)*classifier_rows, nz = rows * m->Vp, off_loss = ALIGN_UP(nz * a, 256), off_tmp = ALIGN_UP(off_loss + rows * 8, 256);
    if (rows > 0 && off_tmp <= room) {
        KernelCall k = {.be = be, .x = tr->m, .lse = (float *)(tr->m + off_loss), .targets = (int32_t *)(tr->m + off_loss + rows * 4), .N = (int)rows,
                        .C = m->V, .OC = m->Vp};
        bench_fill_random(tr, k.x, nz, tr->m + off_tmp, room - off_tmp, 1200000000);
        be->zero(be, k.targets, rows * 4); /* token 0 as every target: the time does not depend on which */
        snprintf(out[n].name, sizeof out[n].name, "classifier loss");
        out[n].flops = 0;
        out[n].bytes = 2.0 * (double)nz * (double)a; /* the logits read, the gradient written in their place */
        out[n++].seconds = time_best(be, kernel_loss, &k);
    }
    /* decoding's products: 1 and 10 rows by each weight matrix, by the bytes each call must move at least (the
     * weights, the rows in and out); 0.02 s of runs each, a run DECODE_CALLS calls */
    struct { const char *name; int C, OC; } dec[] = {{"qkv", C, 3 * C}, {"attn proj", C, C}, {"fc", C, 4 * C}, {"mlp proj", 4 * C, C}, {"classifier", C, m->Vp}};
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
        for (int rows = 1; rows <= 10; rows += 9, n++) {
            size_t nx = (size_t)rows * dec[i].C, nw = (size_t)dec[i].OC * dec[i].C, ny = (size_t)rows * dec[i].OC;
            size_t off_x = ALIGN_UP(nw * a, 256), off_y = ALIGN_UP(off_x + nx * a, 256);
            if (off_y + ny * a > room) break; /* no room in the moments: untimed */
            KernelCall k = {.be = be, .w = tr->m, .x = tr->m + off_x, .y = tr->m + off_y, .N = rows, .C = dec[i].C, .OC = dec[i].OC};
            bench_fill_random(tr, k.w, nw, k.y, room - off_y, (15 + 2 * (uint64_t)i) * 100000000);
            bench_fill_random(tr, k.x, nx, k.y, room - off_y, (16 + 2 * (uint64_t)i) * 100000000);
            snprintf(out[n].name, sizeof out[n].name, "decode %s x%d", dec[i].name, rows);
            out[n].flops = 0;
            out[n].bytes = (double)(nw + nx + ny) * (double)a;
            out[n].seconds = time_best_over(be, kernel_decode, &k, 0.02) / DECODE_CALLS;
        }
    /* decoding's attention: a new position of 1 and of 10 sequences against a cache of block_size positions (the
     * block's last position, the longest), by the bytes it must move at least (the cache's keys and values, the
     * rows of q, k, v in and the output) */
    for (int rows = 1; rows <= 10; rows += 9, n++) {
        size_t nkv = (size_t)rows * 2 * T * C, nq = (size_t)rows * 3 * C, no = (size_t)rows * C;
        size_t off_q = ALIGN_UP(nkv * a, 256), off_o = ALIGN_UP(off_q + nq * a, 256);
        if (off_o + no * a > room) break; /* no room in the moments: untimed */
        KernelCall k = {.be = be, .w = tr->m, .x = tr->m + off_q, .y = tr->m + off_o, .N = rows, .T = T, .C = C, .NH = m->NH};
        bench_fill_random(tr, k.w, nkv, k.y, room - off_o, 2500000000);
        bench_fill_random(tr, k.x, nq, k.y, room - off_o, 2600000000);
        snprintf(out[n].name, sizeof out[n].name, "kv-cache attention x%d", rows);
        out[n].flops = 0;
        out[n].bytes = (double)(nkv + nq + no) * (double)a;
        out[n].seconds = time_best_over(be, kernel_kv_attention, &k, 0.02) / DECODE_CALLS;
    }
    be->zero(be, tr->m, room);
    return n;
}

/* Memory measured, not planned: on a GPU the device's memory in use (cudaMemGetInfo, so every process's), on the
 * CPU this process's peak resident set; 0 when it cannot be measured. */
CLI_USED static double memory_measured(const ngpt_backend *be) {
    if (strcmp(be->name, "cpu")) {
        size_t fr = 0, total = 0;
        char msg[NGPT_ERRLEN];
        return ngpt_cuda_mem_info(&fr, &total, msg, sizeof msg) ? 0 : (double)(total - fr);
    }
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : (double)ru.ru_maxrss * 1024.0;
}

/* Into note (else ""), when nsteps steps would take over a minute even at the matmul peak: how long, and a
 * smaller run (GPT-2 124M's default steps of 491,520 tokens take most of an hour each on a laptop's CPU). */
CLI_USED static int bench_duration_note(const ngpt_trainer *tr, double peak_flops, int nsteps, char *note, size_t cap) {
    const Plan *p = &tr->plan;
    double step = flops_per_token(tr) * (double)p->micro_batch * p->grad_accum * p->req.T / peak_flops;
    note[0] = 0;
    if (!(peak_flops > 0) || step * nsteps <= 60) return 0;
    snprintf(note, cap, "bench: at the measured matmul peak each step takes at least %.0f s, %.0f min for the %d steps; on a CPU, "
                        "a smaller run: --n_layer=4 --n_head=4 --n_embd=128 --block_size=64 --gradient_accumulation_steps=1",
             step, step * nsteps / 60, nsteps);
    return 1;
}

/* r's MFU from its tokens/s and peak; a peak below the steps' model FLOP/s was measured low (on a host busy then), and,
 * as train's MFU takes it, the steps' rate is the truer peak (the measured one kept in peak_measured) */
static void bench_take_mfu(BenchResult *r) {
    double model = r->tokens_per_second * r->flops_per_token;
    if (r->peak_flops > 0 && model > r->peak_flops) {
        r->peak_measured = r->peak_flops;
        r->peak_flops = model;
    }
    if (r->peak_flops > 0) r->mfu = model / r->peak_flops;
}

/* the host's share of r's timed steps: their time outside waits for the device over their time (0 without steps) */
CLI_USED static double bench_host_share(const BenchResult *r) {
    double step = r->host_step_seconds + r->wait_step_seconds;
    return step > 0 ? r->host_step_seconds / step : 0;
}

/* warmup + steps optimizer steps on random tokens (timed), then one more with every op timed */
CLI_USED static int bench_run(ngpt_trainer *tr, int warmup, int steps, BenchResult *r) {
    memset(r, 0, sizeof *r);
    r->warmup = warmup;
    r->steps = steps;
    r->mfu = -1;
    tr->tune.enabled = 0; /* every timed step on the threads asked for */
    r->peak_flops = matmul_peak(tr, &r->peak_size);
    int rc = be_check(tr, "measuring the matmul peak");
    if (rc) return rc;
    char note[400];
    int slow = bench_duration_note(tr, r->peak_flops, warmup + steps + 1, note, sizeof note);
    if (slow) fprintf(stderr, "%s\n", note);
    Rng rng = {(uint64_t)tr->cfg.seed, 0xBE7C4, 0};
    double *times = (double *)calloc((size_t)MAX(steps, 1), sizeof *times);
    if (!times) return tr_fail(tr, NGPT_ERR_NOMEM, "out of host memory for %d step times", steps);
    ngpt_backend *real = tr->be;
    WaitBackend waits;
    wait_wrap(&waits, real);
    tr->be = &waits.be;
    double timed = 0, timed_waits = 0;
    for (int i = 0; i < warmup + steps && !rc; i++) {
        float loss;
        double waited = waits.waited;
        rc = train_step_with(tr, fill_random_tokens, &rng, &loss, NULL, NULL);
        if (!rc && i >= warmup) {
            times[i - warmup] = tr->last_step_seconds;
            timed += tr->last_step_seconds;
            timed_waits += waits.waited - waited;
        }
        if (!rc && slow) fprintf(stderr, "bench: step %d of %d: %.1f s\n", i + 1, warmup + steps + 1, tr->last_step_seconds);
    }
    tr->be = real;
    hand_back_status(&waits.be, real);
    if (!rc && steps > 0) {
        r->host_step_seconds = MAX(0.0, timed - timed_waits) / steps;
        r->wait_step_seconds = timed_waits / steps;
        qsort(times, (size_t)steps, sizeof *times, cmp_doubles);
        r->median_step_seconds = times[steps / 2];
        r->tokens_per_step = tr->last_step_tokens;
        r->tokens_per_second = r->tokens_per_step / r->median_step_seconds;
        r->flops_per_token = flops_per_token(tr);
        bench_take_mfu(r);
    }
    free(times);
    if (rc) return rc;
    ProfBackend prof;
    prof_wrap(&prof, real, pt(tr, tr->params, P_WTE, 0));
    tr->be = &prof.be;
    float loss;
    double t0 = now_seconds();
    rc = train_step_with(tr, fill_random_tokens, &rng, &loss, NULL, NULL);
    tr->be = real;
    hand_back_status(&prof.be, real);
    if (rc) return rc;
    r->profiled_step_seconds = now_seconds() - t0;
    memcpy(r->op_seconds, prof.seconds, sizeof r->op_seconds);
    memcpy(r->by_op_seconds, prof.op_seconds, sizeof r->by_op_seconds);
    memcpy(r->by_op_calls, prof.op_calls, sizeof r->by_op_calls);
    r->arena_bytes = (double)(tr->plan.device_bytes + tr->plan.host_bytes);
    r->memory_in_use = memory_measured(real);
    return be_check(tr, "the benchmark");
}

/* ======================================================================================================
 * Preparing data: text -> train.bin / val.bin (nanoGPT's raw uint16) and meta.bin, at the character
 * level, streaming (two passes over the file: one for the vocabulary, one to write the ids).
 * ==================================================================================================== */

/* v written whole into tmp (synced), for the caller to rename over path; on a failure tmp is removed */
static int charvocab_write(const CharVocab *v, const char *tmp, char *err, size_t errlen) {
    FILE *f = fopen(tmp, "wb");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    uint32_t hdr[2] = {CHARVOCAB_VERSION, (uint32_t)v->n};
    int ok = fwrite(CHARVOCAB_MAGIC, 1, 8, f) == 8 && fwrite(hdr, 4, 2, f) == 2;
    for (int i = 0; i < v->n && ok; i++) {
        unsigned char b[5];
        int k = utf8_encode(v->cp[i], b + 1);
        b[0] = (unsigned char)k;
        ok = fwrite(b, 1, (size_t)k + 1, f) == (size_t)k + 1;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        if (!e) e = errno;
        unlink(tmp);
        return fail(err, errlen, NGPT_ERR_IO, "cannot write %s: %s", tmp, strerror(e));
    }
    return NGPT_OK;
}

/* the vocabulary path holds is v (an earlier prepare of text with the same characters): its token files read alike */
static int charvocab_same_as_file(const CharVocab *v, const char *path) {
    CharVocab *old = (CharVocab *)malloc(sizeof *old);
    char err[NGPT_ERRLEN];
    int same = old && file_exists(path) && charvocab_load(old, path, err, sizeof err) == NGPT_OK && old->n == v->n &&
               !memcmp(old->cp, v->cp, sizeof v->cp[0] * (size_t)v->n);
    free(old);
    return same;
}

/* An input of prepare, open at its start, that binary_file_says knows (a token file, a model, a checkpoint, any
 * file with a NUL in its first 512 bytes): an error naming it, and f closed; NGPT_OK for text */
static int prepare_input_text(FILE *f, const char *path, int piped, char *err, size_t errlen) {
    char says[700];
    if (!binary_file_says(f, piped ? "FILE" : path, says, sizeof says)) return NGPT_OK; /* a pipe's model is used from a file */
    fclose(f);
    return fail(err, errlen, NGPT_ERR_FORMAT, "%s is not text to prepare: it is %s; prepare reads UTF-8 text", path, says);
}

/* Opens an input of prepare, which reads it twice (it counts, then encodes), once it is known to be text: a
 * regular file as it is; anything else (a pipe: --input=<(zcat x.gz), /dev/stdin) copied first into a nameless
 * file in out_dir, which rewind reads again and which goes when it is closed (*spooled says which; NULL where
 * the caller opens regular files again by path). */
static int prepare_input_open(const char *path, const char *out_dir, FILE **in, int *spooled, char *err, size_t errlen) {
    *in = NULL;
    if (spooled) *spooled = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) || S_ISREG(st.st_mode)) {
        int rc = prepare_input_text(f, path, 0, err, errlen);
        if (!rc) *in = f;
        return rc;
    }
    if (S_ISDIR(st.st_mode)) {
        fclose(f);
        return fail(err, errlen, NGPT_ERR_ARG, "the input %s is a folder; prepare reads text files (on the command line, several as "
                                               "--input=a.txt,b.txt)", path);
    }
    if (S_ISCHR(st.st_mode) && !isatty(fileno(f))) { /* /dev/zero or /dev/urandom would be copied until the disk is full */
        fclose(f);
        return fail(err, errlen, NGPT_ERR_ARG, "the input %s is a device, not text; prepare reads text files, or a pipe (<(zcat x.gz))", path);
    }
    char spool[700];
    snprintf(spool, sizeof spool, "%.600s/.prepare_input.%d", out_dir, (int)getpid());
    int fd = mkdir_p(out_dir) ? -1 : open(spool, O_RDWR | O_CREAT | O_EXCL, 0600);
    FILE *copy = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    int e = errno;
    if (fd >= 0) unlink(spool); /* nameless from here: a crash leaves nothing behind */
    enum { BUF = 1 << 20 };
    char *buf = copy ? (char *)malloc(BUF) : NULL;
    int rc = NGPT_OK;
    if (!copy) rc = fail(err, errlen, NGPT_ERR_IO, "cannot copy %s (not a regular file, which prepare reads twice) into %s: %s", path, out_dir, strerror(e));
    else if (!buf) rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory");
    size_t got;
    while (!rc && (got = fread(buf, 1, BUF, f)) > 0)
        if (fwrite(buf, 1, got, copy) != got) rc = fail(err, errlen, NGPT_ERR_IO, "copying %s into %s failed: %s", path, out_dir, strerror(errno));
    if (!rc && ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s", path);
    if (!rc && fflush(copy)) rc = fail(err, errlen, NGPT_ERR_IO, "copying %s into %s failed: %s", path, out_dir, strerror(errno));
    free(buf);
    fclose(f);
    if (rc) {
        if (copy) fclose(copy);
        else if (fd >= 0) close(fd);
        return rc;
    }
    rewind(copy);
    if ((rc = prepare_input_text(copy, path, 1, err, errlen))) return rc;
    *in = copy;
    if (spooled) *spooled = 1;
    return NGPT_OK;
}

/* An input prepare reads twice, as its first read found it: a regular file's identity, size and modification time,
 * to tell a text written to between or during the reads, even where its length stays, and (where the second read opens
 * it again: GPT-2's prepare) a file put in its place; a copy of a pipe, which only prepare writes, is not watched */
typedef struct {
    int watched;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} InputStamp;
static void input_stamp(FILE *f, int spooled, InputStamp *s) {
    struct stat st;
    memset(s, 0, sizeof *s);
    if (spooled || fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) return;
    *s = (InputStamp){1, st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}
/* f, open on the input now, is not the file s stamped as it was then */
static int input_changed(FILE *f, const InputStamp *s) {
    InputStamp now;
    input_stamp(f, 0, &now);
    return s->watched && (!now.watched || now.dev != s->dev || now.ino != s->ino || now.size != s->size || now.mtime.tv_sec != s->mtime.tv_sec ||
                          now.mtime.tv_nsec != s->mtime.tv_nsec);
}
static int input_changed_error(const char *input, const char *out_dir, char *err, size_t errlen) {
    return fail(err, errlen, NGPT_ERR_FORMAT, "%s changed while it was being prepared (appended to, written over or replaced): its identity, "
                                              "size or modification time is not what prepare's first read found. Nothing in %s was replaced: prepare "
                                              "it again once nothing writes to it", input, out_dir);
}

/* Streams the code points of the UTF-8 file f (read from where it is; path names it) to fn(ctx, cp) in 1 MiB reads. */
typedef int (*cp_fn)(void *ctx, uint32_t cp);
static int for_each_codepoint(FILE *f, const char *path, cp_fn fn, void *ctx, char *err, size_t errlen) {
    enum { BUF = 1 << 20 };
    unsigned char *buf = (unsigned char *)malloc(BUF + 4);
    if (!buf) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory");
    size_t have = 0, offset = 0; /* offset: file position of buf[0] */
    int rc = NGPT_OK, eof = 0;
    while (!rc) {
        size_t got = eof ? 0 : fread(buf + have, 1, BUF - have, f);
        if (got == 0) eof = 1;
        have += got;
        if (have == 0) break;
        size_t i = 0;
        while (i < have) {
            uint32_t cp;
            int k = utf8_decode(buf + i, have - i, &cp);
            if (k == 0 && !eof) break; /* sequence continues in the next read */
            if (k <= 0) {
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: invalid UTF-8 at byte offset %zu (byte 0x%02X)", path, offset + i, buf[i]);
                break;
            }
            if ((rc = fn(ctx, cp))) break;
            i += (size_t)k;
        }
        memmove(buf, buf + i, have - i);
        offset += i;
        have -= i;
        if (eof && !rc && have) rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: truncated UTF-8 sequence at byte offset %zu", path, offset);
        if (eof) break;
    }
    if (!rc && ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s", path);
    free(buf);
    return rc;
}

typedef struct {
    uint8_t *seen;      /* bitmap over code points */
    int32_t *id_of;     /* code point -> id */
    size_t count, n_train, written;
    FILE *train, *val;
    uint16_t out[4096];
    size_t nout;
    int to_val;
    int write_errno;    /* a write of train.bin or val.bin failed: its errno */
    enum { TEXT_SAME, TEXT_NEW_CHARACTER, TEXT_LONGER, TEXT_SHORTER, TEXT_WRITTEN } changed; /* the second read against the first */
    uint32_t unseen_cp; /* TEXT_NEW_CHARACTER: the character, at character `written` */
} CharPrep;

static int prep_count(void *ctx, uint32_t cp) {
    CharPrep *p = (CharPrep *)ctx;
    p->seen[cp >> 3] |= (uint8_t)(1u << (cp & 7));
    p->count++;
    return 0;
}

static int prep_flush(CharPrep *p) {
    FILE *f = p->to_val ? p->val : p->train;
    int ok = fwrite(p->out, 2, p->nout, f) == p->nout;
    p->nout = 0;
    if (!ok) p->write_errno = errno ? errno : EIO;
    return ok ? 0 : NGPT_ERR_IO;
}

/* The second read of the text, into the token files: a character the first read did not see, or more of them, is
 * a text that changed in between (appended to while being prepared), whose ids would be wrong */
static int prep_write(void *ctx, uint32_t cp) {
    CharPrep *p = (CharPrep *)ctx;
    if (p->written == p->count || !(p->seen[cp >> 3] >> (cp & 7) & 1)) {
        p->changed = p->written == p->count ? TEXT_LONGER : TEXT_NEW_CHARACTER;
        p->unseen_cp = cp;
        return NGPT_ERR_FORMAT;
    }
    if (p->written == p->n_train && !p->to_val) {
        if (prep_flush(p)) return NGPT_ERR_IO;
        p->to_val = 1;
    }
    p->out[p->nout++] = (uint16_t)p->id_of[cp];
    p->written++;
    if (p->nout == sizeof p->out / sizeof p->out[0]) return prep_flush(p);
    return 0;
}

/* A prepare puts its files in place (renames over the folder's, removes what no longer goes with them) with SIGINT and
 * SIGTERM held back in its thread, so a stop that comes then is taken after, on a folder holding all the new files,
 * never a mix of old and new; prepare_committed says, to the CLI's handler, that they are in place. */
static _Atomic int prepare_committed;
/* holds SIGINT and SIGTERM back in the calling thread; *was is the mask to put back (release_stops) */
static void hold_stops(sigset_t *was) {
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stops, was);
}
static void release_stops(const sigset_t *was) { pthread_sigmask(SIG_SETMASK, was, NULL); }
static char prepare_dir[512]; /* the folder the command line's prepare (prepare_signals) prepares; "" in library use */
/* the end of a prepare's renames, under hold_stops since their first: committed says the new files are all in place */
static void prepare_commit_release(const sigset_t *was, int committed) {
    if (committed && prepare_dir[0]) atomic_store(&prepare_committed, 1);
    release_stops(was);
}

/* The files a prepare puts in its folder, each written through its temporary_name first; gpt2.tok's is itself saved
 * through one (ngpt_tokenizer_save), so a stop can leave gpt2.tok.tmp.PID.tmp.PID too */
enum { PREPARED_FILES = 4, PREPARED_VOCAB = 3 };
static const char *const prepared_files[PREPARED_FILES] = {"train.bin", "val.bin", "meta.bin", "gpt2.tok"};

/* The process whose prepare named a file name (a prepared file's temporary_name, or its temporary's); 0 for a name
 * that is no such temporary */
static long prepare_temporary_pid(const char *name) {
    for (int k = 0; k < PREPARED_FILES; k++) {
        size_t n = strlen(prepared_files[k]);
        if (strncmp(name, prepared_files[k], n)) continue;
        long pid = 0;
        for (const char *p = name + n; *p;) {
            size_t digits = strncmp(p, ".tmp.", 5) ? 0 : strspn(p + 5, "0123456789");
            if (!digits || digits > 10) return 0;
            if (!pid) pid = strtol(p + 5, NULL, 10);
            p += 5 + digits;
        }
        return pid <= INT_MAX ? pid : 0;
    }
    return 0;
}

/* Removes from dir the temporary files of prepares whose process is gone: a prepare killed midway leaves its own, and
 * its name is no later prepare's. Those of a live process (one preparing the folder now) stay. */
static void remove_dead_prepare_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = prepare_temporary_pid(e->d_name);
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[1100];
        snprintf(path, sizeof path, "%.800s/%.250s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* The temporary files a stop of this process's prepare removes (on_prepare_signal): the prepared files' and, at
 * PREPARED_VOCAB and after it, the vocabulary copy's and its own. The names are made beforehand: a signal handler
 * may unlink, not format. */
enum { PREPARE_TEMPORARIES = PREPARED_FILES + 1 };
static char prepare_temporaries[PREPARE_TEMPORARIES][PATH_MAX + 64];
/* the vocabulary's copy is written through vocab_tmp: beside gpt2.tok's place, or its link's target (in library use,
 * where no handler reads the names, nothing: the library writes no global state) */
static void prepare_temporaries_vocab(const char *vocab_tmp) {
    if (!prepare_dir[0]) return;
    sigset_t unheld;
    hold_stops(&unheld); /* the handler never reads half a name */
    copy_str(prepare_temporaries[PREPARED_VOCAB], sizeof prepare_temporaries[0], vocab_tmp);
    temporary_name(prepare_temporaries[PREPARED_VOCAB + 1], sizeof prepare_temporaries[0], vocab_tmp);
    release_stops(&unheld);
}

/* After prepare's summary line: a split too short for GPT-2's block_size of 1024 (a window is block_size + 1
 * tokens) is said now, not at the first evaluation of a training run */
static void prepare_short_split_note(FILE *log, unsigned long long n_train, unsigned long long n_val) {
    for (int k = 0; k < 2 && log; k++) {
        unsigned long long n = k ? n_val : n_train;
        if (n >= 1025) continue;
        char fits[64] = "too few for any block_size";
        if (n >= 2) snprintf(fits, sizeof fits, "enough for block_size %llu at most", n - 1);
        fprintf(log, "note: %s.bin has %llu token%s: %s (a window is block_size + 1 tokens; GPT-2's block_size 1024 needs 1025); %s "
                "--val_fraction for more\n", k ? "val" : "train", n, n == 1 ? "" : "s", fits, k ? "raise" : "lower");
    }
}

/* text file -> out_dir/{train,val}.bin + meta.bin; the last val_fraction of the characters is val */
/* A prepare's out_dir: a path that data_dir can name (and that the paths of its files, built from it, hold whole) */
static int prepare_out_dir_fits(const char *out_dir, char *err, size_t errlen) {
    size_t cap = sizeof ((ngpt_config *)0)->data_dir - 1;
    if (!out_dir[0]) return fail(err, errlen, NGPT_ERR_ARG, "the data folder to prepare into is empty: name one (--out=DIR)");
    if (strlen(out_dir) > cap)
        return fail(err, errlen, NGPT_ERR_ARG, "the data folder %.80s... is %zu bytes long; a data folder's path holds at most %zu (data_dir's "
                                               "limit): prepare into a shorter path", out_dir, strlen(out_dir), cap);
    return NGPT_OK;
}

/* called between a prepare's two reads of each text, when set (a test changes the text there) */
static void (*prepare_between_reads)(const char *input);
/* called in the GPT-2 prepare's second read of each text, after its first block was read, when set (a test changes the
 * text there) */
static void (*prepare_during_second_read)(const char *input);
/* called by both prepares once their files' renames hold SIGINT and SIGTERM back, before the first, when set (a test
 * stops the prepare there) */
static void (*prepare_committing)(void);

static int prepare_char(const char *input, const char *out_dir, double val_fraction, FILE *log, char *err, size_t errlen) {
    if (prepare_out_dir_fits(out_dir, err, errlen)) return NGPT_ERR_ARG;
    CharPrep p;
    memset(&p, 0, sizeof p);
    CharVocab *v = (CharVocab *)calloc(1, sizeof *v);
    p.seen = (uint8_t *)calloc(0x110000 / 8, 1);
    p.id_of = (int32_t *)calloc(0x110000, sizeof(int32_t));
    char tpath[600], vpath[600], mpath[600], ttmp[630] = "", vtmp[630] = "", mtmp[630] = "";
    int rc = NGPT_OK, held = 0;
    sigset_t unheld;
    size_t made_from = first_missing_folder(out_dir); /* the folders a failure removes again */
    FILE *in = NULL;
    InputStamp stamp;
    int spooled;
    if (!v || !p.seen || !p.id_of) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory"); goto done; }
    if ((rc = prepare_input_open(input, out_dir, &in, &spooled, err, errlen))) goto done;
    input_stamp(in, spooled, &stamp);
    if ((rc = for_each_codepoint(in, input, prep_count, &p, err, errlen))) goto done;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (p.seen[cp >> 3] >> (cp & 7) & 1) {
            if (v->n == 65536) { rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s has more than 65536 distinct characters (ids are uint16)", input); goto done; }
            p.id_of[cp] = v->n;
            v->cp[v->n++] = cp;
        }
    if (p.count < 2) { rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s has %zu characters; need at least 2", input, p.count); goto done; }
    p.n_train = (size_t)((double)p.count * (1.0 - val_fraction));
    p.n_train = p.n_train < 1 ? 1 : p.n_train > p.count - 1 ? p.count - 1 : p.n_train; /* train and val a character each, at the least */
    if (mkdir_p(out_dir)) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot create %s: %s", out_dir, strerror(errno)); goto done; }
    remove_dead_prepare_temporaries(out_dir);
    snprintf(tpath, sizeof tpath, "%s/train.bin", out_dir);
    snprintf(vpath, sizeof vpath, "%s/val.bin", out_dir);
    snprintf(mpath, sizeof mpath, "%s/meta.bin", out_dir);
    temporary_name(ttmp, sizeof ttmp, tpath);
    temporary_name(vtmp, sizeof vtmp, vpath);
    p.train = fopen(ttmp, "wb");
    p.val = fopen(vtmp, "wb");
    if (!p.train || !p.val) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot create %s: %s", !p.train ? ttmp : vtmp, strerror(errno)); goto done; }
    if (prepare_between_reads) prepare_between_reads(input);
    rewind(in);
    rc = for_each_codepoint(in, input, prep_write, &p, err, errlen);
    if (!rc && p.written < p.count) p.changed = TEXT_SHORTER;
    else if (!rc && input_changed(in, &stamp)) p.changed = TEXT_WRITTEN;
    if (!rc && !p.changed) rc = prep_flush(&p);
    if (p.changed) {
        char what[120];
        if (p.changed == TEXT_NEW_CHARACTER)
            snprintf(what, sizeof what, "character %zu (from 1) is U+%04X, which the first did not see", p.written + 1, p.unseen_cp);
        else if (p.changed == TEXT_WRITTEN)
            snprintf(what, sizeof what, "as many and none new, but the file had been written to (its size or modification time changed)");
        else snprintf(what, sizeof what, "%s %zu characters", p.changed == TEXT_LONGER ? "more than" : "only", p.written);
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s changed while it was being prepared (appended to, or written over): its first read found %zu "
                                                "characters, %d distinct; in the second, %s. Nothing in %s was replaced: prepare it again once "
                                                "nothing writes to it", input, p.count, v->n, what, out_dir);
        goto done;
    }
    if (p.write_errno) { rc = fail(err, errlen, NGPT_ERR_IO, "writing %s or %s failed: %s", ttmp, vtmp, strerror(p.write_errno)); goto done; }
    if (rc) goto done; /* reading it (for_each_codepoint's error) */
    if (fflush(p.train) || fsync(fileno(p.train)) || fflush(p.val) || fsync(fileno(p.val))) {
        rc = fail(err, errlen, NGPT_ERR_IO, "writing %s failed: %s", out_dir, strerror(errno));
        goto done;
    }
    fclose(p.train);
    fclose(p.val);
    p.train = p.val = NULL;
    /* A new vocabulary: written beside the old one, then an earlier prepare's train.bin goes before meta.bin is
     * replaced, so a prepare cut off between the renames below leaves a folder that is not prepared (no
     * train.bin), never the new meta.bin beside old tokens, which would read as other characters. The same
     * vocabulary (the same text prepared again) stays, and so does train.bin until the new one replaces it */
    const int new_vocab = !charvocab_same_as_file(v, mpath);
    if (new_vocab) {
        temporary_name(mtmp, sizeof mtmp, mpath);
        if ((rc = charvocab_write(v, mtmp, err, errlen))) {
            mtmp[0] = 0; /* removed by charvocab_write */
            goto done;
        }
    }
    hold_stops(&unheld); /* from the first change to the folder's files to the last */
    held = 1;
    if (prepare_committing) prepare_committing();
    if (new_vocab && unlink(tpath) && errno != ENOENT) {
        rc = fail(err, errlen, NGPT_ERR_IO, "cannot replace %s: %s", tpath, strerror(errno));
        goto done;
    }
    /* train.bin last: its presence is what says the folder is prepared (ensure_dataset) */
    if ((new_vocab && rename(mtmp, mpath)) || rename(vtmp, vpath) || rename(ttmp, tpath)) {
        rc = fail(err, errlen, NGPT_ERR_IO, "cannot rename into %s: %s%s", out_dir, strerror(errno),
                  new_vocab ? "; its train.bin, of the earlier vocabulary, was removed: the folder is not prepared, prepare it again" : "");
        goto done;
    }
    if (log) {
        fprintf(log, "prepared %s: %zu characters, vocabulary %d; train has %zu tokens, val has %zu tokens -> %s/{train,val,meta}.bin\n",
                input, p.count, v->n, p.n_train, p.count - p.n_train, out_dir);
        prepare_short_split_note(log, p.n_train, p.count - p.n_train);
    }
    /* an earlier GPT-2 prepare's vocabulary no longer goes with the folder's tokens (sample would offer it for them) */
    char old_vocab[620];
    snprintf(old_vocab, sizeof old_vocab, "%.580s/gpt2.tok", out_dir);
    if (file_exists(old_vocab)) {
        if (unlink(old_vocab) && log)
            fprintf(log, "note: cannot remove %s, an earlier GPT-2 prepare's vocabulary (%s): the folder now holds characters; remove it\n",
                    old_vocab, strerror(errno));
        else if (log) fprintf(log, "removed %s: an earlier GPT-2 prepare's vocabulary, which does not go with these characters\n", old_vocab);
    }
done:
    if (in) fclose(in);
    if (p.train) fclose(p.train);
    if (p.val) fclose(p.val);
    if (rc && ttmp[0]) unlink(ttmp); /* a temporary file left by a failure would stay for good: its name is this process's */
    if (rc && vtmp[0]) unlink(vtmp);
    if (rc && mtmp[0]) unlink(mtmp);
    if (rc) rmdir_made(out_dir, made_from); /* a failure leaves no empty folder behind (a pipe's copy made them) */
    if (held) prepare_commit_release(&unheld, !rc);
    free(v);
    free(p.seen);
    free(p.id_of);
    return rc;
}

/* ---- GPT-2 BPE: text files -> train/val token files, as nanoGPT's shakespeare/prepare.py (the first
 * 1 - val_fraction of the characters are train, the rest val, each encoded on its own) and llm.c's
 * shards (--format llmc). Several files are several documents, with <|endoftext|> between them. The
 * inputs are streamed in 1 MiB reads, so they may be larger than memory. ---- */

/* llm.c's tokenizer file that tokenizer_dir names: the folder's gpt2_tokenizer.bin, or tokenizer_dir itself when it
 * is a file (the one file a tokenizer_dir may name: its reader says what is wrong with another); into path (cap
 * bytes), 0 when there is none */
static int llmc_tokenizer_in(const char *dir, char *path, size_t cap) {
    struct stat st;
    if (!stat(dir, &st) && S_ISREG(st.st_mode)) {
        snprintf(path, cap, "%s", dir);
        return 1;
    }
    snprintf(path, cap, "%.500s/gpt2_tokenizer.bin", dir);
    return file_exists(path);
}

/* Which of GPT-2's vocabulary files tokenizer_dir dir holds, in the order they are read: llm.c's file that dir names
 * itself, gpt2.tok (nanogpt's compact file), encoder.json + vocab.bpe, llm.c's gpt2_tokenizer.bin in dir. The file to
 * read goes to path (encoder.json's for the pair, and where there is none) */
enum { VOCAB_NONE, VOCAB_LLMC, VOCAB_COMPACT, VOCAB_OPENAI };
static int gpt2_vocab_find(const char *dir, char *path, size_t cap) {
    char llmc[600], bpe[600];
    int llmc_found = llmc_tokenizer_in(dir, llmc, sizeof llmc);
    if (llmc_found && !strcmp(llmc, dir)) {
        snprintf(path, cap, "%s", llmc);
        return VOCAB_LLMC;
    }
    snprintf(path, cap, "%.580s/gpt2.tok", dir);
    if (file_exists(path)) return VOCAB_COMPACT;
    snprintf(path, cap, "%.580s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%.580s/vocab.bpe", dir);
    if (file_exists(path) && file_exists(bpe)) return VOCAB_OPENAI;
    if (!llmc_found) return VOCAB_NONE;
    snprintf(path, cap, "%s", llmc);
    return VOCAB_LLMC;
}

/* GPT-2's vocabulary from dir, as gpt2_vocab_find finds it */
CLI_USED static int load_gpt2_tokenizer(const char *dir, ngpt_tokenizer **out, char *err, size_t errlen) {
    char a[600], b[600];
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    if (!strcmp(base, "encoder.json") || !strcmp(base, "vocab.bpe") || !strcmp(base, "gpt2.tok")) {
        char folder[600] = "."; /* the folder the file is in: ".", "/" or the path before its last slash */
        if (base > dir) snprintf(folder, sizeof folder, "%.*s", base - dir > 1 ? (int)(base - dir - 1) : 1, dir);
        return fail(err, errlen, NGPT_ERR_ARG, "tokenizer_dir = %s names one of the vocabulary's files: tokenizer_dir is the folder that holds "
                    "encoder.json and vocab.bpe (or gpt2.tok), here %s, or llm.c's gpt2_tokenizer.bin itself", dir, folder);
    }
    int rc, kind = gpt2_vocab_find(dir, a, sizeof a);
    if (kind == VOCAB_LLMC) return ngpt_tokenizer_load_llmc(a, out, err, errlen); /* returned as it is: its loader requires <|endoftext|> */
    if (kind == VOCAB_COMPACT) rc = ngpt_tokenizer_load(a, out, err, errlen);
    else {
        if (!file_exists(a)) /* (encoder.json without vocab.bpe: its loader names the missing one) */
            return fail(err, errlen, NGPT_ERR_IO,
                        "no GPT-2 vocabulary in %s: put OpenAI's encoder.json and vocab.bpe there (README, Data: where to get them), or llm.c's "
                        "gpt2_tokenizer.bin, or set tokenizer_dir to the folder that holds them (or to llm.c's file)", dir);
        snprintf(b, sizeof b, "%.580s/vocab.bpe", dir);
        rc = ngpt_tokenizer_load_gpt2(a, b, out, err, errlen);
    }
    if (!rc && ngpt_tokenizer_eot(*out) < 0) { /* prepare separates documents with it, sample starts an empty prompt at it */
        ngpt_tokenizer_free(*out);
        *out = NULL;
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: no token \"<|endoftext|>\" (GPT-2's last, id 50256), which nanogpt separates documents "
                                                "with and starts an empty prompt at", a);
    }
    return rc;
}

typedef struct {
    int fd;
    int llmc;
    uint64_t count;
    char tmp[640], path[600];
    uint16_t buf[8192];
    size_t nbuf;
} TokWriter;

static int tokwriter_flush(TokWriter *w) {
    size_t bytes = w->nbuf * 2;
    const char *p = (const char *)w->buf;
    while (bytes) {
        ssize_t k = write(w->fd, p, bytes);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        bytes -= (size_t)k;
    }
    w->nbuf = 0;
    return 0;
}

static int tokwriter_open(TokWriter *w, const char *dir, const char *name, int llmc) {
    memset(w, 0, sizeof *w);
    w->llmc = llmc;
    snprintf(w->path, sizeof w->path, "%.580s/%s", dir, name);
    temporary_name(w->tmp, sizeof w->tmp, w->path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (w->fd < 0) return -1;
    if (llmc) {
        int32_t hdr[LLMC_HEADER_INTS] = {0};
        if (write(w->fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) return -1;
    }
    return 0;
}

/* 0, -1 for a failed write (errno), -2 when an llm.c file would count more tokens than its int32 header holds */
static int tokwriter_put(TokWriter *w, const int32_t *ids, size_t n) {
    if (w->llmc && w->count + n > INT32_MAX) return -2;
    for (size_t i = 0; i < n; i++) {
        w->buf[w->nbuf++] = (uint16_t)ids[i];
        if (w->nbuf == sizeof w->buf / sizeof w->buf[0] && tokwriter_flush(w)) return -1;
    }
    w->count += n;
    return 0;
}

/* The temporary file written whole (its last tokens, llm.c's header) and closed; -1 (errno set) on failure, the
 * temporary file then removed */
static int tokwriter_finish(TokWriter *w) {
    int bad = tokwriter_flush(w) != 0;
    if (!bad && w->llmc) {
        int32_t hdr[3] = {LLMC_MAGIC, 1, (int32_t)w->count};
        bad = w->count > INT32_MAX || pwrite(w->fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr;
    }
    bad = bad || fsync(w->fd) != 0;
    int e = errno;
    bad = close(w->fd) != 0 || bad;
    w->fd = -1;
    if (bad) unlink(w->tmp), errno = e;
    return bad ? -1 : 0;
}
/* A finished file in its place */
static int tokwriter_commit(TokWriter *w) {
    if (rename(w->tmp, w->path) == 0) return 0;
    int e = errno;
    unlink(w->tmp);
    errno = e;
    return -1;
}

/* tokwriter_put's failure as an error */
static int tokwriter_fail(const TokWriter *w, int put, char *err, size_t errlen) {
    if (put == -2)
        return fail(err, errlen, NGPT_ERR_ARG, "%s would hold more than %d tokens, the most an llm.c shard's int32 header counts: prepare the "
                                                "text in parts (into several --out folders, then name the files as shards), or in nanoGPT's "
                                                "format (--format=nanogpt), which has no header", w->path, INT32_MAX);
    return fail(err, errlen, NGPT_ERR_IO, "writing %s: %s", w->tmp, strerror(errno));
}

static int utf8_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/* A character vocabulary an earlier prepare left in dir (nanogpt's meta.bin, nanoGPT's meta.pkl), with which training
 * would read GPT-2 tokens as characters, must go when GPT-2 tokens replace the folder's. Before anything changes,
 * gpt2_leftovers_blocked refuses one that unlink would refuse for a reason it can see (a folder; the sticky bit on
 * another user's file; a folder it cannot write); after the tokens are in place, gpt2_leftovers_remove removes
 * them. At no moment, a crash included, are GPT-2 tokens beside no vocabulary while the characters' are: the
 * folder holds the old tokens with their vocabulary, the new tokens with the old vocabulary (which training
 * refuses: the ids are past its characters), or the new tokens alone. */
static const char *const gpt2_leftover_names[2] = {"meta.bin", "meta.pkl"};

static int gpt2_leftovers_blocked(const char *dir, char *err, size_t errlen) {
    struct stat ds;
    for (int i = 0; i < 2; i++) {
        char path[600], why[200] = "";
        struct stat fs;
        snprintf(path, sizeof path, "%.580s/%s", dir, gpt2_leftover_names[i]);
        if (stat(path, &fs)) continue; /* none (a dangling link: training does not read it either) */
        if (lstat(path, &fs)) continue; /* unlink removes the entry itself: a link, not what it names */
        if (S_ISDIR(fs.st_mode)) snprintf(why, sizeof why, "it is a folder");
        else if (access(dir, W_OK | X_OK)) snprintf(why, sizeof why, "%s", strerror(errno));
        else if (!stat(dir, &ds) && (ds.st_mode & S_ISVTX) && geteuid() != 0 && geteuid() != fs.st_uid && geteuid() != ds.st_uid)
            snprintf(why, sizeof why, "the folder has the sticky bit, and the file and the folder are other users'");
        if (why[0])
            return fail(err, errlen, NGPT_ERR_IO, "cannot remove %s, an earlier prepare's character vocabulary, with which training would read "
                                                  "GPT-2 tokens as characters (%s): the folder's files are as they were; remove it, or "
                                                  "prepare into another folder", path, why);
    }
    return NGPT_OK;
}

static int gpt2_leftovers_remove(const char *dir, FILE *log, char *err, size_t errlen) {
    for (int i = 0; i < 2; i++) {
        char path[600];
        snprintf(path, sizeof path, "%.580s/%s", dir, gpt2_leftover_names[i]);
        if (!file_exists(path)) continue;
        if (unlink(path))
            return fail(err, errlen, NGPT_ERR_IO, "train.bin and val.bin in %s now hold GPT-2 tokens, but %s, an earlier prepare's character "
                                                  "vocabulary, cannot be removed (%s): remove it before training, which refuses these tokens "
                                                  "beside it", dir, path, strerror(errno));
        if (log) fprintf(log, "removed %s: an earlier prepare's character vocabulary, with which training would read these tokens as characters\n", path);
    }
    return NGPT_OK;
}

static int prepare_gpt2(const char *const *inputs, int n_inputs, const char *out_dir, double val_fraction, int llmc, const ngpt_tokenizer *tok,
                        FILE *log, char *err, size_t errlen) {
    if (prepare_out_dir_fits(out_dir, err, errlen)) return NGPT_ERR_ARG;
    if (ngpt_tokenizer_vocab_size(tok) > 65536) /* each id would be cut to its low 16 bits: other tokens, without a word */
        return fail(err, errlen, NGPT_ERR_ARG, "the vocabulary has %d tokens; token files hold uint16 ids (nanoGPT's and llm.c's formats), "
                                               "so at most 65536", ngpt_tokenizer_vocab_size(tok));
    /* the vocabulary goes beside the tokens, as gpt2.tok: one that cannot be written there is said before the text is read */
    char vocab[600], vocab_target[PATH_MAX], vocab_tmp[PATH_MAX + 32] = "";
    const char *vocab_file;
    snprintf(vocab, sizeof vocab, "%.580s/gpt2.tok", out_dir);
    if (save_target(vocab, "the vocabulary's copy", vocab_target, &vocab_file, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, ": nothing was written; remove it, or prepare into another folder");
        return NGPT_ERR_IO;
    }
    /* pass 1: characters (code points; a stray byte counts as one) of all inputs */
    uint64_t chars = 0, total_bytes = 0;
    enum { BUF = 1 << 20 };
    unsigned char *buf = (unsigned char *)malloc(BUF + 64);
    int32_t *ids = (int32_t *)malloc((BUF + 64) * sizeof(int32_t));
    FILE **spools = (FILE **)calloc((size_t)n_inputs, sizeof *spools); /* the inputs that are no regular files, copied */
    InputStamp *stamps = (InputStamp *)calloc((size_t)n_inputs, sizeof *stamps); /* each as pass 1 opened it */
    int rc = NGPT_OK, held = 0, tokens_in = 0;
    sigset_t unheld;
    size_t made_from = first_missing_folder(out_dir); /* the folders a failure removes again */
    TokWriter w[2];
    w[0].fd = w[1].fd = -1;
    w[0].tmp[0] = w[1].tmp[0] = 0;
    if (!buf || !ids || !spools || !stamps) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory"); goto done; }
    for (int i = 0; i < n_inputs && !rc; i++) {
        FILE *f;
        int spooled;
        if ((rc = prepare_input_open(inputs[i], out_dir, &f, &spooled, err, errlen))) break;
        input_stamp(f, spooled, &stamps[i]);
        size_t got;
        while ((got = fread(buf, 1, BUF, f)) > 0) {
            total_bytes += got;
            for (size_t k = 0; k < got; k++) chars += !utf8_continuation(buf[k]);
        }
        if (ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s", inputs[i]);
        if (spooled) spools[i] = f; /* read again in pass 2; regular files are opened again, so any number of them fits */
        else fclose(f);
    }
    if (!rc && chars < 2) /* as prepare_char: train and val get a character each */
        rc = n_inputs == 1 ? fail(err, errlen, NGPT_ERR_FORMAT, "%s has %llu characters; need at least 2", inputs[0], (unsigned long long)chars)
                           : fail(err, errlen, NGPT_ERR_FORMAT, "the %d inputs have %llu characters in all; need at least 2", n_inputs, (unsigned long long)chars);
    if (rc) goto done;
    uint64_t train_chars = (uint64_t)((double)chars * (1.0 - val_fraction));
    train_chars = train_chars < 1 ? 1 : train_chars > chars - 1 ? chars - 1 : train_chars; /* a character each, at the least */
    if (mkdir_p(out_dir)) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot create %s: %s", out_dir, strerror(errno)); goto done; }
    remove_dead_prepare_temporaries(out_dir);
    if (tokwriter_open(&w[0], out_dir, "train.bin", llmc) || tokwriter_open(&w[1], out_dir, "val.bin", llmc)) {
        rc = fail(err, errlen, NGPT_ERR_IO, "cannot create token files in %s: %s", out_dir, strerror(errno));
        goto done;
    }
    /* pass 2: encode, switching from train to val at the character cut */
    uint64_t seen_chars = 0, seen_bytes = 0, next_report = 64u << 20;
    int split = 0;
    for (int i = 0; i < n_inputs && !rc; i++) {
        if (prepare_between_reads) prepare_between_reads(inputs[i]);
        FILE *f = spools[i] ? spools[i] : fopen(inputs[i], "rb");
        if (!f) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", inputs[i], strerror(errno)); break; }
        if (spools[i]) rewind(f);
        spools[i] = NULL;
        if (input_changed(f, &stamps[i])) { /* written to, or replaced, since pass 1 read it */
            fclose(f);
            rc = input_changed_error(inputs[i], out_dir, err, errlen);
            break;
        }
        size_t have = 0;
        int eof = 0, first_block = 1;
        while (!rc) {
            size_t got = eof ? 0 : fread(buf + have, 1, BUF - have, f);
            if (got == 0) eof = 1;
            if (first_block && prepare_during_second_read) prepare_during_second_read(inputs[i]);
            first_block = 0;
            /* where this split ends inside the new bytes: at the character cut */
            size_t end = have + got;
            int cut_here = 0;
            if (split == 0) {
                for (size_t k = have; k < have + got; k++) {
                    if (!utf8_continuation(buf[k])) {
                        if (seen_chars == train_chars) { end = k; cut_here = 1; break; }
                        seen_chars++;
                    }
                }
            }
            seen_bytes += (uint64_t)(end - have);
            int last = eof || cut_here;
            size_t n = 0, used = 0;
            if (ngpt_tokenizer_encode_chunk(tok, (const char *)buf, end, last, 0, ids, BUF + 64, &n, &used, err, errlen)) {
                rc = NGPT_ERR_FORMAT;
                break;
            }
            int put = tokwriter_put(&w[split], ids, n);
            if (put) { rc = tokwriter_fail(&w[split], put, err, errlen); break; }
            if (last && used != end) { rc = fail(err, errlen, NGPT_ERR_STATE, "internal: the encoder left %zu bytes at the end", end - used); break; }
            memmove(buf, buf + used, have + got - used);
            have = have + got - used;
            if (cut_here) split = 1; /* the rest of this buffer starts the val text */
            if (log && total_bytes > (64u << 20) && seen_bytes >= next_report) {
                fprintf(log, "prepare: %.0f of %.0f MiB, %llu train + %llu val tokens\r", seen_bytes / MiB, total_bytes / MiB,
                        (unsigned long long)w[0].count, (unsigned long long)w[1].count);
                fflush(log);
                next_report += 64u << 20;
            }
            if (eof && have == 0) break;
        }
        if (!rc && ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s", inputs[i]);
        if (!rc && input_changed(f, &stamps[i])) rc = input_changed_error(inputs[i], out_dir, err, errlen); /* while pass 2 read it */
        fclose(f);
        if (!rc && i + 1 < n_inputs) { /* documents are separated by <|endoftext|> */
            int32_t eot = ngpt_tokenizer_eot(tok);
            int put = tokwriter_put(&w[split], &eot, 1);
            if (put) rc = tokwriter_fail(&w[split], put, err, errlen);
        }
    }
    if (!rc) {
        /* both written whole before either replaces an earlier prepare's (a full disk at train's last tokens left a new
         * val.bin beside the old train.bin); then val, then train: train.bin's presence says the folder is prepared
         * (ensure_dataset) */
        for (int k = 1; k >= 0 && !rc; k--)
            if (tokwriter_finish(&w[k])) rc = fail(err, errlen, NGPT_ERR_IO, "writing %s failed: %s; the folder's files are as they were", w[k].path,
                                                   strerror(errno));
        if (!rc) rc = gpt2_leftovers_blocked(out_dir, err, errlen);
        /* the vocabulary the tokens were made with, which sample reads when tokenizer_dir has none, written whole
         * beside its place before the tokens go to theirs, and renamed into it after them */
        if (!rc) {
            temporary_name(vocab_tmp, sizeof vocab_tmp, vocab_file);
            prepare_temporaries_vocab(vocab_tmp);
            if ((rc = ngpt_tokenizer_save(tok, vocab_tmp, err, errlen))) vocab_tmp[0] = 0; /* none left */
        }
        if (!rc) {
            hold_stops(&unheld); /* from the first change to the folder's files to the last */
            held = 1;
            if (prepare_committing) prepare_committing();
        }
        for (int k = 1; k >= 0 && !rc; k--)
            if (tokwriter_commit(&w[k])) rc = fail(err, errlen, NGPT_ERR_IO, "cannot rename %s to %s: %s", w[k].tmp, w[k].path, strerror(errno));
        tokens_in = !rc;
        char vocab_err[NGPT_ERRLEN] = "";
        int vocab_rc = NGPT_OK;
        if (!rc && rename(vocab_tmp, vocab_file))
            vocab_rc = fail(vocab_err, sizeof vocab_err, NGPT_ERR_IO, "cannot rename %s to %s: %s", vocab_tmp, vocab_file, strerror(errno));
        else if (!rc) vocab_tmp[0] = 0;
        char size[32];
        if (!rc && log) {
            fprintf(log, "prepared %d file%s, %s, %llu characters: train has %llu tokens, val has %llu tokens (GPT-2 BPE, %s format) -> "
                         "%s/{train,val}.bin%s\n",
                    n_inputs, n_inputs == 1 ? "" : "s", fmt_bytes(size, sizeof size, total_bytes), (unsigned long long)chars, (unsigned long long)w[0].count,
                    (unsigned long long)w[1].count, llmc ? "llm.c" : "nanoGPT", out_dir, vocab_rc ? "" : ", and the vocabulary in gpt2.tok");
            prepare_short_split_note(log, (unsigned long long)w[0].count, (unsigned long long)w[1].count);
        }
        if (!rc) rc = gpt2_leftovers_remove(out_dir, log, err, errlen);
        if (!rc && vocab_rc) { /* an earlier prepare's vocabulary does not go with the new tokens */
            int removed = file_exists(vocab) && !unlink(vocab);
            rc = fail(err, errlen, vocab_rc, "%s: the tokens are in place, but not their vocabulary%s", vocab_err,
                      removed ? " (the folder's earlier gpt2.tok, which went with the earlier tokens, was removed): sample decodes them with "
                                "tokenizer_dir's" : ": sample decodes them with tokenizer_dir's");
        }
    }
done:
    for (int k = 0; k < 2; k++) { /* after a failure no temporary file is left: open, or finished and not renamed */
        if (w[k].fd >= 0) close(w[k].fd);
        if (rc && w[k].tmp[0]) unlink(w[k].tmp);
    }
    if (vocab_tmp[0]) unlink(vocab_tmp);
    for (int i = 0; spools && i < n_inputs; i++)
        if (spools[i]) fclose(spools[i]);
    if (rc) rmdir_made(out_dir, made_from); /* a failure leaves no empty folder behind (a pipe's copy made them) */
    if (held) prepare_commit_release(&unheld, tokens_in);
    free(spools);
    free(stamps);
    free(buf);
    free(ids);
    return rc;
}

int ngpt_prepare(const char *input, const char *out_dir, const ngpt_tokenizer *tok, double val_fraction, char *err, size_t errlen) {
    if (!input || !*input || !out_dir || !*out_dir || !(val_fraction > 0 && val_fraction < 1))
        return fail(err, errlen, NGPT_ERR_ARG, "ngpt_prepare: needs an input file, an out_dir (neither empty), and val_fraction in (0, 1) (got %g)",
                    val_fraction);
    if (!tok) return prepare_char(input, out_dir, val_fraction, NULL, err, errlen);
    return prepare_gpt2(&input, 1, out_dir, val_fraction, 0, tok, NULL, err, errlen);
}

/* ======================================================================================================
 * Command line
 * ==================================================================================================== */

/* The default job: nanoGPT's shakespeare_char recipe (data/shakespeare_char/train.cfg) on a GPU, and its
 * documented CPU variant (data/shakespeare_char/train_cpu.cfg) on the CPU. */
#define DEFAULT_JOB_OUT_DIR "out-shakespeare-char"
CLI_USED static const char *const preset_shakespeare_char[] = {
    "out_dir=" DEFAULT_JOB_OUT_DIR, "eval_interval=250", "eval_iters=200", "log_interval=10", "always_save_checkpoint=False",
    "dataset=shakespeare_char", "gradient_accumulation_steps=1", "batch_size=64", "block_size=256", "n_layer=6", "n_head=6",
    "n_embd=384", "dropout=0.2", "learning_rate=1e-3", "max_iters=5000", "lr_decay_iters=5000", "min_lr=1e-4", "beta2=0.99",
    "warmup_iters=100", NULL};
CLI_USED static const char *const preset_shakespeare_char_cpu[] = {
    "out_dir=" DEFAULT_JOB_OUT_DIR, "eval_interval=250", "eval_iters=20", "log_interval=10", "always_save_checkpoint=False",
    "dataset=shakespeare_char", "gradient_accumulation_steps=1", "batch_size=12", "block_size=64", "n_layer=4", "n_head=4",
    "n_embd=128", "dropout=0.0", "learning_rate=1e-3", "max_iters=2000", "lr_decay_iters=2000", "min_lr=1e-4", "beta2=0.99",
    "warmup_iters=100", NULL};

#define TINY_SHAKESPEARE_URL "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"

CLI_USED static void apply_preset(ngpt_config *c, const char *const *kv) {
    char err[NGPT_ERRLEN];
    for (; *kv; kv++) {
        char key[64];
        const char *eq = strchr(*kv, '=');
        size_t n = (size_t)(eq - *kv);
        memcpy(key, *kv, n);
        key[n] = 0;
        ngpt_config_set(c, key, eq + 1, err, sizeof err);
    }
}

#ifndef NGPT_NO_MAIN

/* The display: plain lines every log_interval steps, as nanoGPT prints them; on a terminal the steps between
 * them on a live line, which the next plain line replaces; messages and evaluations always on their own lines. */
typedef struct {
    int tty, log_interval, live; /* live: the last thing printed is the live line */
} Display;

static void display_log(void *ctx, int level, const char *line) {
    Display *d = (Display *)ctx;
    FILE *f = level ? stderr : stdout;
    if (d->live) { fputs("\r\033[K", stdout); fflush(stdout); d->live = 0; }
    fprintf(f, "%s\n", line);
    fflush(f);
}

static void display_progress(void *ctx, const ngpt_progress *p) {
    Display *d = (Display *)ctx;
    if (p->is_eval) return; /* the log line says it */
    if (!d->tty && p->step % d->log_interval) return;
    char eta[32], mem[32], perf[48];
    fmt_duration(eta, sizeof eta, p->eta_seconds);
    fmt_bytes(mem, sizeof mem, (double)p->memory_bytes);
    if (p->mfu >= 0) snprintf(perf, sizeof perf, "MFU %.1f%%", 100 * p->mfu);
    else snprintf(perf, sizeof perf, "%.1f GFLOP/s", p->flops_per_second / 1e9);
    if (d->tty) printf("\r\033[K");
    printf("iter %d/%d: loss %.4f, lr %.2e, %.2fms, %.0f tok/s, %s, mem %s, ETA %s", p->step, p->max_iters, (double)p->loss, (double)p->lr,
           p->step_seconds * 1e3, p->tokens_per_second, perf, mem, eta);
    d->live = d->tty && p->step % d->log_interval;
    if (!d->live) printf("\n");
    fflush(stdout);
}

static ngpt_trainer *volatile running_trainer; /* for the signal handler */
static volatile sig_atomic_t stop_signal;       /* the signal that stopped the run (0: none) */

/* SIGINT/SIGTERM: the first stops the run between two blocks of the micro-batch running (stop_leaves_step,
 * step_stop_flag: the step runs to its end when over half done or just after an evaluation, else is left for a
 * resume to run again; an evaluation is left there too) and saves where there is something to save; another one within a second of it is taken for a
 * double press and ignored (it would lose the save); later, one more quits at once. */
static void on_signal(int sig) {
    static const char msg[] = "\nstopping at the next layer, then saving a checkpoint (none at step 0 or with eval_only): a step over "
                              "half done, or one just after an evaluation, runs to its end; one less done, or an evaluation, is left "
                              "for a resume to run again. Ctrl-C again, a second or more from now, quits at once without saving\n";
    static const char term_msg[] = "\nSIGTERM: stopping at the next layer, then saving a checkpoint (none at step 0 or with eval_only): a step "
                                   "over half done, or one just after an evaluation, runs to its end; one less done, or an evaluation, is "
                                   "left for a resume to run again. Another SIGTERM or SIGINT, a second or more from now, quits at once "
                                   "without saving\n";
    static volatile sig_atomic_t stopping;
    static struct timespec first;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!stopping) {
        stopping = 1;
        stop_signal = sig;
        first = now;
        int said = sig == SIGTERM ? (int)write(2, term_msg, sizeof term_msg - 1) : (int)write(2, msg, sizeof msg - 1);
        (void)said; /* nothing to do when stderr is gone */
        if (running_trainer) ngpt_request_stop(running_trainer);
        return;
    }
    if ((double)(now.tv_sec - first.tv_sec) + 1e-9 * (double)(now.tv_nsec - first.tv_nsec) < 1.0) return;
    static const char quit[] = "\nquitting now, without saving this step: the checkpoints already in out_dir stay as they were\n";
    if (write(2, quit, sizeof quit - 1) < 0) { /* nothing to do */ }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* SIGBUS: a memory-mapped token file read past its end, because another program (nanoGPT's prepare.py, cp) cut it short
 * or rewrote it in place while the run reads it. The file is named and the run ends with an error; a SIGBUS elsewhere
 * is left to its default action. (A file written over at its size raises nothing: sample_batch checks its ids.) */
static void on_data_bus_error(int sig, siginfo_t *info, void *context) {
    (void)context;
    ngpt_trainer *tr = running_trainer;
    const char *path = NULL;
    for (int set = 0; tr && set < 2 && !path; set++) {
        const TokenSet *ts = set ? &tr->val_data : &tr->train_data;
        for (int i = 0; i < ts->n && !path; i++) {
            const char *map = (const char *)ts->files[i].map, *at = (const char *)info->si_addr;
            if (map && at >= map && at < map + ts->files[i].map_bytes) path = ts->files[i].path;
        }
    }
    if (!path) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    static const char head[] = "\nerror: ", tail[] = " is shorter than when the run opened it: another program (nanoGPT's prepare.py, "
                                                    "cp, truncate) cut it short or rewrote it in place while training read it (token "
                                                    "files are memory-mapped; nanogpt's prepare writes new files and renames them into "
                                                    "place); the checkpoints this run saved, if any, stay as they were: resume from the "
                                                    "newest with --init_from=resume once the data is whole\n";
    if (write(2, head, sizeof head - 1) < 0 || write(2, path, strlen(path)) < 0 || write(2, tail, sizeof tail - 1) < 0) { /* nothing to do */ }
    _exit(1);
}

#define USAGE_HEAD                                                                                                      \
    "usage: nanogpt <command> [config files] [--key=value ...] (in any order, each over what came before, as nanoGPT's;\n" \
    "       sample: its settings over its config files)\n"
static const char usage_commands[] =
            "  train     train a model (no config: the baby GPT on Tiny Shakespeare characters)\n"
            "  plan      print the memory plan for a config (--json for JSON, --sample for sampling's); no GPU needed;\n"
            "            the model from init_from, from file headers only (--sample without init_from: out_dir's checkpoint,\n"
            "            as sample reads it)\n"
            "  bench     tokens/s, MFU and time per op category on random tokens (default: GPT-2 124M, block 1024)\n"
            "            [config files] [--key=value ...] [--steps=20] [--warmup=3] [--kernels: each kernel alone]\n"
            "            [--sample=S: generation of S samples, --steps new tokens each, with the sampling plan;\n"
            "            --prompt=P: first a P-token prompt fed to them, in prompt tokens/s]\n"
            "  prepare   text -> train.bin/val.bin: --input=FILE[,FILE...] --out=DIR [--tokenizer=char|gpt2] [--format=nanogpt|llmc]\n"
            "            [--tokenizer_dir=data/gpt2] [--val_fraction=0.1]\n"
            "  sample    [config files] text from out_dir's best checkpoint (--out_dir=DIR), one checkpoint file or pretrained weights\n"
            "            (--init_from=CKPT|resume: the newest checkpoint|gpt2|FILE):\n"
            "            --start=TEXT|FILE:path --num_samples=10 --max_new_tokens=500 --temperature=0.8 --top_k=200 --seed=1337\n"
            "            (nanoGPT's sample.py; --temperature=0: always the most likely token; memory for the weights and a forward\n"
            "            pass only)\n"
            "  export    out_dir's best checkpoint as an llm.c model file: --out_dir=DIR --out=FILE [--bf16]; --init_from=CHECKPOINT_FILE,\n"
            "            resume (out_dir's newest) or pretrained weights (gpt2..gpt2-xl from --pretrained_dir=DIR, .safetensors, an llm.c\n"
            "            file) instead\n"
            "  plot      OUT_DIR (or --out_dir=OUT_DIR): OUT_DIR/log.jsonl -> OUT_DIR/loss.svg\n"
            "  info      the devices this build can use (`nanogpt --version`: the version alone)\n"
            "  help      this text; `nanogpt help config` lists every config key; `nanogpt help COMMAND` (or COMMAND --help)\n"
            "            one command's\n";

static void usage(FILE *f) { fprintf(f, "nanogpt %s - train GPT-2 in C, planned to never run out of memory\n\n" USAGE_HEAD "%s", NGPT_VERSION, usage_commands); }

static void print_config_keys(void);

/* `nanogpt help COMMAND`, `nanogpt COMMAND --help`: that command's lines of the usage (its name at a line's start, then
 * the lines indented under it); for the commands that read config keys, the keys after them */
static void usage_of(const char *command) {
    printf(USAGE_HEAD);
    size_t n = strlen(command);
    for (const char *line = usage_commands; *line;) {
        const char *end = strchr(line, '\n');
        if (!strncmp(line + 2, command, n) && line[2 + n] == ' ')
            do {
                printf("%.*s\n", (int)(end - line), line);
                line = end + 1;
                end = strchr(line, '\n');
            } while (*line && !strncmp(line, "            ", 12));
        else line = end + 1;
    }
    int keys = !strcmp(command, "train") || !strcmp(command, "plan") || !strcmp(command, "bench");
    printf("\n`nanogpt help` lists every command\n");
    if (keys) print_config_keys();
}

static void print_config_keys(void) {
    ngpt_config d;
    ngpt_config_defaults(&d);
    printf("config keys (nanoGPT's names; a config file holds `key = value` lines, --key=value overrides); the defaults are\n"
           "nanoGPT's (`nanogpt train` without a config file starts from the default job's instead):\n");
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        const ConfigKey *k = &config_keys[i];
        if (k->type == KEY_IGNORED) continue;
        char line[600];
        size_t n = (size_t)config_line(&d, i, 1, line, sizeof line);
        if (n && line[n - 1] == '\n') line[n - 1] = 0;
        printf("  %-28s %s", k->name, k->help);
        if (k->choices) printf(" (%s)", k->choices);
        printf("; default %s", strchr(line, '=') ? strchr(line, '=') + 2 : "?");
        if (k->type == KEY_INT || k->type == KEY_I64 || k->type == KEY_FLOAT) printf(", in [%.10g, %.10g]", k->lo, k->hi);
        printf("\n");
    }
}

/* Where key k got its value (line_of: its line in path, 0 = not there, -1 - i = argument i of the command
 * line), into buf. */
static const char *config_origin(const char *path, const int *line_of, int k, int preset, char *buf, size_t cap) {
    if (line_of[k] > 0) snprintf(buf, cap, "%.400s:%d", path, line_of[k]);
    else if (line_of[k] < 0) snprintf(buf, cap, "--%s", config_keys[k].name);
    else snprintf(buf, cap, "%s", preset ? "the default job's value" : "the default");
    return buf;
}

/* A key that is neither a config key nor one of command's own options, but close to one of those options (as
 * close as to any config key, and within 2 edits): an error naming that option. 0 otherwise. */
static int command_option_typo(const char *command, const char *key, char *err, size_t errlen) {
    if (config_find(key)) return NGPT_OK;
    static const char *const sample_aliases[][2] = { /* other samplers' names of sample's options */
        {"prompt", "start"}, {"steps", "max_new_tokens"}, {"max_tokens", "max_new_tokens"}, {"length", "max_new_tokens"},
        {"n_samples", "num_samples"}, {"temp", "temperature"}, {"topk", "top_k"}};
    for (size_t i = 0; !strcmp(command, "sample") && i < sizeof sample_aliases / sizeof sample_aliases[0]; i++)
        if (!strcasecmp(key, sample_aliases[i][0]))
            return fail(err, errlen, NGPT_ERR_ARG, "unknown option --%s (did you mean --%s, an option of `nanogpt sample`?)", key,
                        sample_aliases[i][1]);
    size_t config_d, best_d = SIZE_MAX;
    config_closest_at(key, &config_d);
    const char *best = NULL;
    for (size_t c = 0; c < sizeof command_option_table / sizeof command_option_table[0]; c++)
        for (int i = 0; strcmp(command, command_option_table[c].command) == 0 && command_option_table[c].options[i]; i++) {
            size_t d = key_distance(key, command_option_table[c].options[i]);
            if (d < best_d) { best_d = d; best = command_option_table[c].options[i]; }
        }
    if (!best || best_d == 0 || best_d > 2 || best_d > config_d) return NGPT_OK; /* 0: the option itself */
    return fail(err, errlen, NGPT_ERR_ARG, "unknown option --%s (did you mean --%s, an option of `nanogpt %s`?)", key, best, command);
}

/* The key of a --key[=value] argument a into key (cap bytes) */
static void arg_key(const char *a, char *key, size_t cap) {
    const char *eq = strchr(a, '=');
    size_t n = MIN((size_t)((eq ? eq : a + strlen(a)) - a - 2), cap - 1);
    memcpy(key, a + 2, n);
    key[n] = 0;
}

/* A single-dash argument (llm.c's -b 4 -t 1024): an error naming nanogpt's setting for llm.c's flag (0 for any
 * other argument) */
static int single_dash_flag(const char *a, char *err, size_t errlen) {
    if (a[0] != '-' || !a[1] || a[1] == '-' || file_exists(a)) return NGPT_OK;
    static const char *const llmc[][2] = {
        {"i", "--data_dir=DIR (the folder of the *_train_*.bin shards)"}, {"j", "--data_dir=DIR (the folder of the *_val_*.bin shards)"},
        {"e", "--init_from=FILE (an llm.c model file; a descriptor dN is a new model: --n_layer=N with --n_embd and --n_head, d12 "
              "being 12, 768, 12, and --bias=True)"},
        {"o", "--out_dir=DIR"}, {"b", "--batch_size"}, {"t", "--block_size"}, {"nk", "--keep_checkpoints"},
        {"k", "--decay_lr (True: nanoGPT's cosine, False: a constant rate)"},
        {"d", "--batch_size x --gradient_accumulation_steps x --block_size (the tokens per step)"}, {"l", "--learning_rate"},
        {"u", "--warmup_iters"}, {"q", "--min_lr (a learning rate, not a fraction)"}, {"c", "--weight_decay"}, {"x", "--max_iters"},
        {"v", "--eval_interval"}, {"m", "--eval_iters"}, {"n", "--eval_interval (checkpoints are saved at evaluations)"},
        {"g", "--max_new_tokens of `nanogpt sample`"}, {"s", "`nanogpt sample` after training"}, {"r", "--recompute"},
        {"y", "--init_from=resume"}};
    /* llm.c's flags for what nanogpt decides itself or does not do */
    static const char *const llmc_none[] = {"nm", "lg", "sl", "sg", "ge", "a", "f", "w", "z", "pn", "pr", "pg", "pm", "pi", "pf", "ps", "pp", "yd", "yf",
                                            "h"}; /* -h 1: HellaSwag (-h alone is help, in main) */
    for (size_t i = 0; i < sizeof llmc / sizeof llmc[0]; i++)
        if (!strcmp(a + 1, llmc[i][0]))
            return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': nanogpt takes --key=value settings; llm.c's -%s is %s", a, llmc[i][0], llmc[i][1]);
    for (size_t i = 0; i < sizeof llmc_none / sizeof llmc_none[0]; i++)
        if (!strcmp(a + 1, llmc_none[i]))
            return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': llm.c's -%s has no nanogpt setting: nanogpt decides it itself or has no such "
                                                   "feature (`nanogpt help config` lists the settings)", a, llmc_none[i]);
    return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': nanogpt takes --key=value settings (`nanogpt help config` lists them)", a);
}

/* The folder of llm.c's -i or -j value (a folder, or a file or pattern in one): *v moves to its start; returns its
 * length (/x: /, x: .) */
static int llmc_pattern_folder(const char **v) {
    struct stat st;
    if (!stat(*v, &st) && S_ISDIR(st.st_mode)) return (int)strlen(*v);
    const char *slash = strrchr(*v, '/');
    if (slash) return MAX(1, (int)(slash - *v));
    *v = ".";
    return 1;
}

/* Whether the folders a and b (their first alen and blen bytes) are one, however each is spelt (dir, dir/, ./dir):
 * the same text, or the same device and inode */
static int same_folder(const char *a, int alen, const char *b, int blen) {
    if (alen == blen && !strncmp(a, b, (size_t)alen)) return 1;
    char fa[PATH_MAX], fb[PATH_MAX];
    struct stat sa, sb;
    snprintf(fa, sizeof fa, "%.*s", alen, a);
    snprintf(fb, sizeof fb, "%.*s", blen, b);
    return !stat(fa, &sa) && !stat(fb, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* For -i or -j's value v (a file or llm.c's glob pattern) naming only some of its folder's shards of split, which
 * data_dir reads all of (tokenset_open), a note saying so into note ("" otherwise: v is a folder, matches every
 * shard, its folder cannot be read, or the folder's <split>.bin is read instead of shards). Hidden files match as
 * llm.c's glob matches them (FNM_PERIOD). */
static const char *llmc_subset_note(const char *v, const char *split, char *note, size_t cap) {
    note[0] = 0;
    const char *folder = v, *slash = strrchr(v, '/'), *pattern = slash ? slash + 1 : v;
    int len = llmc_pattern_folder(&folder);
    if (folder == v && len == (int)strlen(v)) return note; /* v is the folder itself */
    char dir[PATH_MAX], own[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%.*s", len, folder);
    snprintf(own, sizeof own, "%s/%s.bin", dir, split);
    DIR *d = file_exists(own) ? NULL : opendir(dir);
    if (!d) return note;
    int total = 0, matched = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (shard_of(e->d_name, split)) {
            total++;
            matched += !fnmatch(pattern, e->d_name, FNM_PERIOD);
        }
    closedir(d);
    if (matched < total)
        snprintf(note, cap, " (%.100s matches %d of the %d %s shards in that folder, and data_dir reads them all: link the ones wanted, "
                            "with the %s ones, into a folder of their own and pass that)", pattern, matched, total, split,
                 strcmp(split, "train") ? "train" : "val");
    return note;
}

/* llm.c's flags among args (-b 4 -t 1024 -l 0.0003 -i dir/x_train_*.bin) as nanogpt's settings, into out ("" for
 * none): those that are one setting each (-i and -j: the folder of their file or pattern), -x N as max_iters N - 1
 * (llm.c runs N steps, nanoGPT's loop max_iters + 1), -e as the model, -d as gradient_accumulation_steps and -q as
 * min_lr where -b and -t (or -l) say what they are in nanoGPT's terms (after data_dir, where -i or -j names only
 * some of its folder's shards, that data_dir reads them all); then the flags not carried over */
static const char *llmc_flags_as_settings(int argc, char **argv, char *out, size_t cap) {
    static const char *const one_key[][2] = {{"b", "batch_size"}, {"t", "block_size"}, {"l", "learning_rate"}, {"u", "warmup_iters"},
                                             {"c", "weight_decay"}, {"v", "eval_interval"}, {"m", "eval_iters"}, {"o", "out_dir"},
                                             {"i", "data_dir"}, {"j", "data_dir"}, {"nk", "keep_checkpoints"}};
    const char *flag_value[128] = {0}; /* by the flag's first letter, for -d, -q and -x: the value of -b, -t, -l */
    for (int i = 0; i + 1 < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] && !argv[i][2] && (unsigned char)argv[i][1] < 128) flag_value[(unsigned char)argv[i][1]] = argv[i + 1];
    size_t n = 0;
    char left_out[400] = "";
    out[0] = 0;
#define SAY(...) (void)(n < cap ? n += (size_t)snprintf(out + n, cap - n, __VA_ARGS__) : 0)
    for (int i = 0; i + 1 < argc; i++) {
        const char *a = argv[i], *v = argv[i + 1];
        if (a[0] != '-' || a[1] == '-' || !a[1]) continue;
        int took = 0, L, NH, C;
        for (size_t k = 0; k < sizeof one_key / sizeof one_key[0] && !took; k++) {
            if (strcmp(a + 1, one_key[k][0])) continue;
            took = 1;
            int folder = !strcmp(one_key[k][1], "data_dir"), len = folder ? llmc_pattern_folder(&v) : (int)strlen(v);
            char note[400];
            if (folder && !strcmp(a, "-j") && flag_value['i']) { /* one data_dir, -i's (the training shards): -j's folder is said if another */
                const char *train = flag_value['i'];
                int train_len = llmc_pattern_folder(&train);
                if (!same_folder(train, train_len, v, len))
                    snprintf(left_out + strlen(left_out), sizeof left_out - strlen(left_out), " %s %.60s", a, argv[i + 1]);
                else SAY("%s", llmc_subset_note(argv[i + 1], "val", note, sizeof note));
                continue;
            }
            SAY("%s--%s=%.*s", n ? " " : "", one_key[k][1], len, v);
            if (folder) SAY("%s", llmc_subset_note(argv[i + 1], a[1] == 'i' ? "train" : "val", note, sizeof note));
        }
        double x = 0, b = 0, t = 0, lr = 0;
        if (took) { /* one setting each, said above */
        } else if (!strcmp(a, "-e") && llmc_descriptor(v, &L, &NH, &C) > 0) {
            SAY("%s--init_from=scratch --n_layer=%d --n_head=%d --n_embd=%d --bias=True", n ? " " : "", L, NH, C); /* llm.c's GPT-2 has biases */
            took = 1;
        } else if (!strcmp(a, "-e") && llmc_descriptor(v, &L, &NH, &C) == 0) { /* a file, there or not: init_from says if not */
            SAY("%s--init_from=%s", n ? " " : "", v);
            took = 1;
        } else if (!strcmp(a, "-x") && !parse_number(v, &x) && x >= 1 && x == floor(x)) {
            SAY("%s--max_iters=%.0f --lr_decay_iters=%.0f", n ? " " : "", x - 1, x - 1); /* llm.c's schedule spans its -x steps */
            took = 1;
        } else if (!strcmp(a, "-d") && flag_value['b'] && flag_value['t'] && !parse_number(v, &x) && !parse_number(flag_value['b'], &b) &&
                   !parse_number(flag_value['t'], &t) && b >= 1 && t >= 1 && x >= b * t && fmod(x, b * t) == 0) {
            SAY("%s--gradient_accumulation_steps=%.0f", n ? " " : "", x / (b * t));
            took = 1;
        } else if (!strcmp(a, "-q") && flag_value['l'] && !parse_number(v, &x) && !parse_number(flag_value['l'], &lr)) {
            SAY("%s--min_lr=%g", n ? " " : "", lr * x);
            took = 1;
        }
        if (!took) snprintf(left_out + strlen(left_out), sizeof left_out - strlen(left_out), " %s %.60s", a, v);
        i++; /* past the value */
    }
    if (n && left_out[0]) SAY(" (not carried over:%s)", left_out);
#undef SAY
    return out;
}

/* whether argument a names a config file: not --key=value, and holding no '=' unless it is an existing file (nanoGPT's
 * configurator takes every argument without '=' for a config file) */
static int config_file_arg(const char *a) { return strncmp(a, "--", 2) && (!strchr(a, '=') || file_exists(a)); }

/* moves the config files among args to the front, each group keeping its order; returns how many there are */
static int files_first(char **args, int n) {
    int files = 0;
    for (int i = 0; i < n; i++) {
        if (!config_file_arg(args[i])) continue;
        char *file = args[i];
        memmove(args + files + 1, args + files, (size_t)(i - files) * sizeof *args);
        args[files++] = file;
    }
    return files;
}

/* For a run refused whose block_size no argument or config file set (line_of, parse_args') and is more than the
 * positions of the pretrained model init_from names: where that block_size came from, the default job's recipe
 * (default_job: no config file gave the run one) or nanoGPT's default; "" otherwise */
static const char *unset_block_size_hint(const ngpt_config *c, int has_file, const int *line_of, int default_job) {
    if (line_of[config_find("block_size") - config_keys] || !strcmp(c->init_from, "scratch") || !strcmp(c->init_from, "resume") ||
        is_checkpoint_file(c->init_from))
        return "";
    ModelShape pm;
    char ignored[NGPT_ERRLEN];
    if (pretrained_load(c->init_from, c->pretrained_dir, &pm, NULL, ignored, sizeof ignored) || c->block_size <= pm.maxT) return "";
    return default_job && !has_file ? " (that block_size is the default job's recipe; pass --block_size)"
                                    : " (that block_size is nanoGPT's default; pass --block_size)";
}

/* ---- sample.py's settings, which `nanogpt sample` reads and `nanogpt plan --sample` takes too ---- */

/* sample.py's settings: its defaults, then sample's config files, then its command line */
typedef struct {
    char start[65536];
    char start_file[600]; /* the file start came from (FILE:path), "" for text */
    int num_samples, max_new, top_k;
    double temperature;
    long long seed; /* also a config key: a config file sets it as one */
} SampleSettings;

/* One of sample.py's settings from its text, into s (start: the text, or FILE:path to read it from); an error says
 * why (err, without the setting), CONFIG_NOT_OURS for a key that is none of them. value NULL: whether key is one. */
static int sample_setting(SampleSettings *s, const char *key, const char *value, char *err, size_t errlen) {
    static const struct { const char *key; double lo, hi; int whole; const char *range; } nums[] = {
        {"num_samples", 1, 1e6, 1, "a whole number in [1, 1e6]"},
        {"max_new_tokens", 0, 1e7, 1, "a whole number in [0, 1e7]"},
        {"temperature", 0, 1e6, 0, "a number in [0, 1e6] (0: always the most likely token)"},
        {"top_k", 0, INT_MAX, 1, "a whole number >= 0 (0 = all tokens)"},
        {"seed", 0, 9.2e18, 1, "a whole number in [0, 9.2e18] (as the config key)"}};
    int which = -1;
    for (int k = 0; k < (int)(sizeof nums / sizeof nums[0]); k++)
        if (!strcmp(key, nums[k].key)) which = k;
    if (which < 0 && strcmp(key, "start")) return CONFIG_NOT_OURS;
    if (!value) return NGPT_OK;
    if (which >= 0) { /* each number checked against its own range */
        double x;
        if (parse_number(value, &x) || !(x >= nums[which].lo && x <= nums[which].hi) || (nums[which].whole && x != floor(x)))
            return fail(err, errlen, NGPT_ERR_ARG, "%s is %s", nums[which].key, nums[which].range);
        if (which == 0) s->num_samples = (int)x;
        else if (which == 1) s->max_new = (int)x;
        else if (which == 2) s->temperature = x;
        else if (which == 3) s->top_k = (int)x;
        else s->seed = exact_integer(value, x);
        return NGPT_OK;
    }
    size_t got;
    s->start_file[0] = 0;
    if (!strncmp(value, "FILE:", 5)) {
        snprintf(s->start_file, sizeof s->start_file, "%s", value + 5);
        if (!value[5]) return fail(err, errlen, NGPT_ERR_ARG, "names no file (FILE:path reads the start text from path)");
        FILE *f = fopen(value + 5, "rb");
        if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", value + 5, strerror(errno));
        got = fread(s->start, 1, sizeof s->start, f);
        int read_error = ferror(f) ? errno : 0;
        fclose(f);
        if (read_error) return fail(err, errlen, NGPT_ERR_IO, "%s", strerror(read_error));
    } else {
        got = strlen(value);
        memcpy(s->start, value, MIN(got, sizeof s->start));
    }
    if (got > sizeof s->start - 1) return fail(err, errlen, NGPT_ERR_ARG, "the start text is longer than its limit of %zu bytes", sizeof s->start - 1);
    s->start[got] = 0;
    const char *nul = memchr(s->start, 0, got);
    if (nul) return fail(err, errlen, NGPT_ERR_ARG, "a NUL byte at byte %td: the start text is UTF-8 text", nul - s->start);
    return NGPT_OK;
}

/* sample_setting for a config file (ConfigExtra; config_value has read a quoted value's escapes: start = "\n",
 * sample.py's default): as in Python, the start text is a quoted string and a number is not one (quoted -1: the
 * command line's value, taken as it is) */
static int sample_file_setting(void *ctx, const char *key, const char *value, int quoted, char *err, size_t errlen) {
    char why[NGPT_ERRLEN];
    if (sample_setting(NULL, key, NULL, NULL, 0) == CONFIG_NOT_OURS) return CONFIG_NOT_OURS;
    if (value && quoted >= 0 && !strcmp(key, "start") != !!quoted)
        return fail(err, errlen, NGPT_ERR_ARG, quoted ? "%s = '%.200s': a number, not a quoted string" :
                                                        "%s = %.200s: the start text is a quoted string ('...'), as in Python", key, value);
    int rc = sample_setting((SampleSettings *)ctx, key, value, why, sizeof why);
    if (rc) fail(err, errlen, rc, "%s = %.200s: %s", key, value, why);
    return rc;
}

/* ConfigExtra for a second read of sample's config files: its settings, taken on the first, are left as they are */
static int sample_key_read_before(void *ctx, const char *key, const char *value, int quoted, char *err, size_t errlen) {
    (void)ctx, (void)value, (void)quoted, (void)err, (void)errlen;
    return sample_setting(NULL, key, NULL, NULL, 0);
}

/* Config files and --key=value settings over cfg, which holds the base (nanoGPT's defaults, or a checkpoint's
 * stored config), applied in their order as nanoGPT's configurator does (a later one overrides an earlier one).
 * Without a file, train and plan (default_job) take the default job's preset for the device they will run on.
 * Unknown arguments are errors. Sets *json for --json (the caller sets it beforehand where the arguments' own
 * errors must be JSON too). line_of (NULL, or one per config key) gets what set each key: its line in a file,
 * -1 - i for argument i, 0 for neither. n_embd and n_head are checked here, where that is known. */
static int parse_args(const char *command, int argc, char **argv, int default_job, ngpt_config *cfg, int *has_file, int *json,
                      const ConfigExtra *extra, int *line_of, char *err, size_t errlen) {
    int own_lines[N_CONFIG_KEYS], file_of[N_CONFIG_KEYS], preset = 0; /* file_of: the argument that is the file of line_of's line */
    long long set_at[N_CONFIG_KEYS];                                   /* the order the keys were set in: argument, then line */
    if (!line_of) line_of = own_lines;
    memset(line_of, 0, sizeof own_lines);
    memset(set_at, 0, sizeof set_at);
    memset(file_of, 0, sizeof file_of);
    *has_file = 0;
    for (int i = 0; i < argc; i++) {
        if (single_dash_flag(argv[i], err, errlen)) {
            char settings[1024];
            if (llmc_flags_as_settings(argc, argv, settings, sizeof settings)[0]) {
                size_t len = strlen(err);
                snprintf(err + len, errlen > len ? errlen - len : 0, ". llm.c's flags here as nanogpt's settings: %.900s", settings);
            }
            return NGPT_ERR_ARG;
        }
        if (!strncmp(argv[i], "--", 2)) continue;
        if (!config_file_arg(argv[i]))
            return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': expected a config file, or a setting as --key=value", argv[i]);
        *has_file = 1;
    }
    if (!*has_file && default_job) {
        /* the default job: which preset depends on where it will run */
        ngpt_config probe = *cfg;
        char msg[NGPT_ERRLEN];
        for (int i = 0; i < argc; i++)
            if (!strncmp(argv[i], "--device=", 9)) ngpt_config_set(&probe, "device", argv[i] + 9, msg, sizeof msg); /* as the run will read it (cuda:0) */
        int device = DEV_BACKEND_CPU, dtype = NGPT_DTYPE_F32;
        char note[NGPT_ERRLEN];
        int gpu = !strcmp(probe.device, "cuda") || /* named: plan's answer for a GPU from a machine without one */
                  (resolve_device(&probe, &device, &dtype, note, sizeof note, msg, sizeof msg) == NGPT_OK && device == DEV_BACKEND_CUDA);
        apply_preset(cfg, gpu ? preset_shakespeare_char : preset_shakespeare_char_cpu);
        preset = 1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        long long order = ((long long)i + 1) << 32;
        if (strncmp(a, "--", 2)) {
            int lines[N_CONFIG_KEYS] = {0};
            int rc = config_load_extra(cfg, a, lines, extra, err, errlen);
            if (rc) return rc;
            for (int k = 0; k < (int)N_CONFIG_KEYS; k++)
                if (lines[k]) line_of[k] = lines[k], file_of[k] = i, set_at[k] = order + lines[k];
            continue;
        }
        if (json && !strcmp(a, "--json")) { *json = 1; continue; }
        char key[128];
        const char *eq = strchr(a, '=');
        arg_key(a, key, sizeof key);
        if (command_option_typo(command, key, err, errlen)) return NGPT_ERR_ARG;
        if (!eq) return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': expected --key=value", a);
        char msg[NGPT_ERRLEN];
        int rc = ngpt_config_set(cfg, key, eq + 1, msg, sizeof msg);
        if (rc && extra && !config_find(key)) { /* seed is both: its range is the answer */
            int own = extra->set(extra->ctx, key, eq + 1, -1, msg, sizeof msg);
            if (own == NGPT_OK) continue;
            if (own != CONFIG_NOT_OURS) return fail(err, errlen, own, "--%s", msg);
        }
        const char *const *sample_options = command_option_table[0].options; /* "sample" */
        for (size_t j = 0; rc && !config_find(key) && sample_options[j]; j++)
            if (!strcmp(key, sample_options[j]))
                return fail(err, errlen, rc, "--%s is an argument of `nanogpt sample`, not a config key%s", key,
                            strcmp(command, "plan") ? "" : "; `nanogpt plan --sample` takes it (and plans batch_size sequences at once)");
        if (rc) return fail(err, errlen, rc, "--%s: %s", key, msg);
        const ConfigKey *k = config_find(key);
        if (k) line_of[k - config_keys] = -1 - i, set_at[k - config_keys] = order;
    }
    if (cfg->n_embd % cfg->n_head) {
        int ke = (int)(config_find("n_embd") - config_keys), kh = (int)(config_find("n_head") - config_keys);
        char oe[440], oh[440], advice[400];
        config_origin(line_of[ke] > 0 ? argv[file_of[ke]] : "", line_of, ke, preset, oe, sizeof oe);
        config_origin(line_of[kh] > 0 ? argv[file_of[kh]] : "", line_of, kh, preset, oh, sizeof oh);
        embd_head_advice(cfg->n_embd, cfg->n_head, advice, sizeof advice);
        if (set_at[kh] > set_at[ke]) /* the one set last comes first */
            return fail(err, errlen, NGPT_ERR_ARG, "%s: n_head = %d does not divide n_embd = %d (n_embd from %s): %s", oh, cfg->n_head,
                        cfg->n_embd, oe, advice);
        return fail(err, errlen, NGPT_ERR_ARG, "%s: n_embd = %d is not a multiple of n_head = %d (n_head from %s): %s", oe, cfg->n_embd,
                    cfg->n_head, oh, advice);
    }
    return NGPT_OK;
}

/* The default dataset: data/shakespeare_char from the input file, downloading Tiny Shakespeare if needed. */
#define GPT2_VOCAB_URL "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"

/* url -> path with curl (or wget), through path.part */
static int download(const char *url, const char *path, char *err, size_t errlen) {
    char cmd[2048], part[620];
    snprintf(part, sizeof part, "%.600s.part.%d", path, (int)getpid()); /* per process, as the prepares' temporary files */
    printf("downloading %s\n", url);
    fflush(stdout);
    snprintf(cmd, sizeof cmd, "curl -fsSL --max-time 120 -o '%s' '%s' 2>/dev/null || wget -q -T 120 -O '%s' '%s' 2>/dev/null", part, url, part, url);
    if (system(cmd) != 0 || rename(part, path) != 0) {
        unlink(part);
        return fail(err, errlen, NGPT_ERR_IO, "could not download %s (offline?)", url);
    }
    return NGPT_OK;
}

/* a GPT-2 vocabulary in dir, as load_gpt2_tokenizer finds one, with nothing to download */
static int gpt2_vocab_in(const char *dir) {
    char path[600];
    return gpt2_vocab_find(dir, path, sizeof path) != VOCAB_NONE;
}

/* GPT-2's encoder.json and vocab.bpe in dir (or its compact gpt2.tok), downloaded when missing */
static int ensure_gpt2_vocab(const char *dir, char *err, size_t errlen) {
    const char *names[2] = {"encoder.json", "vocab.bpe"};
    char path[600], where[PATH_MAX + 80] = "";
    if (llmc_tokenizer_in(dir, path, sizeof path)) return NGPT_OK; /* llm.c's: read as it is, nothing to download */
    char cwd[PATH_MAX];
    if (dir[0] != '/' && !file_exists(dir) && getcwd(cwd, sizeof cwd)) /* a run's stored tokenizer_dir, sampled from another folder */
        snprintf(where, sizeof where, " (tokenizer_dir is relative to the current folder, %s)", cwd);
    size_t n = strlen(dir);
    if (!file_exists(dir) && n > 4 && !strcmp(dir + n - 4, ".bin")) /* a file's name: no folder of that name to make and fill */
        return fail(err, errlen, NGPT_ERR_IO, "tokenizer_dir = %s: no such file%s", dir, where);
    size_t made_from = first_missing_folder(dir);
    snprintf(path, sizeof path, "%.500s/gpt2.tok", dir);
    for (int i = 0; i < 2 && !file_exists(path); i++) {
        char file[600], url[300];
        snprintf(file, sizeof file, "%.500s/%s", dir, names[i]);
        snprintf(url, sizeof url, "%s/%s", GPT2_VOCAB_URL, names[i]);
        mkdir_p(dir);
        if (!file_exists(file) && download(url, file, err, errlen)) {
            rmdir_made(dir, made_from); /* no empty folder left behind */
            return fail(err, errlen, NGPT_ERR_IO, "could not download GPT-2's %s (offline?). Put encoder.json and vocab.bpe, or llm.c's "
                                                  "gpt2_tokenizer.bin, in %s%s", names[i], dir, where);
        }
    }
    return NGPT_OK;
}

/* A prepare that Ctrl-C or SIGTERM stops removes the temporary files it was writing beside the folder's files
 * (prepare_temporaries), which would otherwise stay until the next prepare of that folder, and the folders it made,
 * when empty. The renames that put its files in place hold those signals back (hold_stops), so the folder
 * holds its earlier files or all the new ones. */
static size_t prepare_made_from; /* rmdir_made's: 0 when the folder was there */
static struct sigaction prepare_saved[2]; /* SIGINT's and SIGTERM's actions before */
static void on_prepare_signal(int sig) {
    for (int i = 0; i < PREPARE_TEMPORARIES; i++)
        if (prepare_temporaries[i][0]) unlink(prepare_temporaries[i]);
    rmdir_made(prepare_dir, prepare_made_from);
    static const char before[] = "\nprepare stopped: its temporary files are removed, and the folder's files are as they were\n";
    static const char after[] = "\nprepare stopped just after its new files were put in place: the folder holds them whole\n";
    int said = atomic_load(&prepare_committed) ? (int)write(2, after, sizeof after - 1) : (int)write(2, before, sizeof before - 1);
    (void)said; /* nothing to do when stderr is gone */
    signal(sig, SIG_DFL);
    raise(sig);
}
/* before a prepare into dir (made_from: first_missing_folder's, taken before anything made it): the handler, for its
 * names, where the signal was not ignored (a shell's background job ignores SIGINT); after it (dir NULL): the actions
 * from before */
static void prepare_signals(const char *dir, size_t made_from) {
    static const int sigs[2] = {SIGINT, SIGTERM};
    if (!dir) {
        for (int k = 0; k < 2; k++) sigaction(sigs[k], &prepare_saved[k], NULL);
        prepare_dir[0] = 0;
        return;
    }
    atomic_store(&prepare_committed, 0);
    prepare_made_from = made_from;
    snprintf(prepare_dir, sizeof prepare_dir, "%.500s", dir);
    for (int i = 0; i < PREPARED_FILES; i++) {
        char path[700];
        snprintf(path, sizeof path, "%.600s/%s", dir, prepared_files[i]);
        temporary_name(prepare_temporaries[i], sizeof prepare_temporaries[i], path);
    }
    temporary_name(prepare_temporaries[PREPARED_VOCAB + 1], sizeof prepare_temporaries[0], prepare_temporaries[PREPARED_VOCAB]);
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_prepare_signal;
    sigemptyset(&act.sa_mask);
    for (int k = 0; k < 2; k++) {
        sigaction(sigs[k], NULL, &prepare_saved[k]);
        if (prepare_saved[k].sa_handler != SIG_IGN) sigaction(sigs[k], &act, NULL);
    }
}

/* ensure_dataset's preparation of dir from input (chars: characters, else GPT-2 BPE) */
static int ensure_dataset_in(const ngpt_config *cfg, const char *dir, char *input, size_t input_cap, int chars, char *err, size_t errlen) {
    mkdir_p(dir);
    if (!file_exists(input) && !cfg->input[0]) { /* both datasets are Tiny Shakespeare: the other's copy will do */
        ngpt_config other = *cfg;
        char other_dir[300], other_input[400];
        copy_str(other.dataset, sizeof other.dataset, chars ? "shakespeare" : "shakespeare_char");
        snprintf(other_input, sizeof other_input, "%s/input.txt", dataset_dir(&other, other_dir, sizeof other_dir));
        if (file_exists(other_input)) {
            printf("preparing %s from the Tiny Shakespeare in %s\n", cfg->dataset, other_input);
            copy_str(input, input_cap, other_input);
        }
    }
    if (!file_exists(input)) {
        if (cfg->input[0]) return fail(err, errlen, NGPT_ERR_IO, "input = %s: no such file", cfg->input);
        if (download(TINY_SHAKESPEARE_URL, input, err, errlen))
            return fail(err, errlen, NGPT_ERR_IO, "could not download Tiny Shakespeare (offline?). Put the text at %s, or pass --input=/path/to/input.txt",
                        input);
    }
    ngpt_tokenizer *tok = NULL;
    int rc = chars ? NGPT_OK : ensure_gpt2_vocab(cfg->tokenizer_dir, err, errlen);
    if (!rc && !chars) rc = load_gpt2_tokenizer(cfg->tokenizer_dir, &tok, err, errlen);
    const char *inputs[1] = {input};
    if (!rc) rc = chars ? prepare_char(input, dir, 0.1, stdout, err, errlen) : prepare_gpt2(inputs, 1, dir, 0.1, 0, tok, stdout, err, errlen);
    ngpt_tokenizer_free(tok);
    return rc;
}

/* The recipes' datasets prepare themselves: shakespeare_char (characters) and shakespeare (GPT-2 BPE)
 * from data/<dataset>/input.txt (downloaded when missing, or --input). */
static int ensure_dataset(const ngpt_config *cfg, char *err, size_t errlen) {
    char dir[300], path[600], input[400];
    int chars = !strcmp(cfg->dataset, "shakespeare_char"), bpe = !strcmp(cfg->dataset, "shakespeare");
    /* input is read once, to prepare a recipe's dataset that has no train.bin: said when it is not read (a resume
     * carries its run's input on; that is no news) */
    int input_note = cfg->input[0] && strcmp(cfg->init_from, "resume");
    if (cfg->data_dir[0] || (!chars && !bpe)) {
        if (input_note)
            fprintf(stderr, "note: input = %s is not read: only the recipes' datasets (shakespeare_char, shakespeare) are prepared from it; "
                            "`nanogpt prepare --input=%s --out=data/NAME` prepares any text, and --dataset=NAME trains on it\n", cfg->input, cfg->input);
        return NGPT_OK;
    }
    dataset_dir(cfg, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    if (file_exists(path)) {
        if (input_note)
            fprintf(stderr, "note: input = %s is not read: %s is prepared already (its train.bin); to train on other text, `nanogpt prepare "
                            "--input=%s --out=data/NAME`, then --dataset=NAME\n", cfg->input, dir, cfg->input);
        return NGPT_OK;
    }
    if (cfg->input[0]) snprintf(input, sizeof input, "%s", cfg->input);
    else snprintf(input, sizeof input, "%s/input.txt", dir);
    size_t made_from = first_missing_folder(dir);
    prepare_signals(dir, made_from); /* a stop during the download or the prepare leaves nothing of them either */
    int rc = ensure_dataset_in(cfg, dir, input, sizeof input, chars, err, errlen);
    prepare_signals(NULL, 0);
    if (rc) rmdir_made(dir, made_from); /* a failure leaves no empty folder behind (data/<dataset>, data/) */
    return rc;
}

/* the config keys of a model's shape, which a checkpoint or pretrained weights decide over a config */
static const char *const model_keys[6] = {"n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size"};

static void model_values(const ngpt_config *c, int v[6]) {
    const int x[6] = {c->n_layer, c->n_head, c->n_embd, c->block_size, c->bias, c->vocab_size};
    memcpy(v, x, sizeof x);
}

/* "n_layer 4 (not 8), bias False (not True)": each model key that set[k] marks as given and whose given value
 * the model's (used) replaced; "" for none */
static const char *model_overrides(const ngpt_config *given, const ngpt_config *used, const int set[6], char *buf, size_t cap) {
    int g[6], u[6];
    model_values(given, g);
    model_values(used, u);
    buf[0] = 0;
    for (int k = 0; k < 6; k++) {
        if (!set[k] || g[k] == u[k]) continue;
        size_t len = strlen(buf);
        if (k == 4) /* bias */
            snprintf(buf + len, cap - len, "%sbias %s (not %s)", len ? ", " : "", u[k] ? "True" : "False", g[k] ? "True" : "False");
        else if (k == 5 && u[k] == 0) /* a run that took its vocabulary from its data goes on so */
            snprintf(buf + len, cap - len, "%svocab_size from the data, as its run took it (not %d)", len ? ", " : "", g[k]);
        else snprintf(buf + len, cap - len, "%s%s %d (not %d)", len ? ", " : "", model_keys[k], u[k], g[k]);
    }
    return buf;
}

/* init_from (resume, pretrained weights) decides the model: a note where it overrides a model key that a config
 * file or the command line (line_of) gave; given is the config before, used after */
static void model_set_note(FILE *to, const ngpt_config *given, const ngpt_config *used, const int *line_of, int has_file) {
    int set[6];
    for (int k = 0; k < 6; k++) set[k] = line_of[config_find(model_keys[k]) - config_keys] != 0;
    char overridden[512];
    if (model_overrides(given, used, set, overridden, sizeof overridden)[0])
        fprintf(to, "note: init_from = %s sets the model, over the %s: %s\n", used->init_from, has_file ? "config files and command line" : "command line",
                overridden);
}

/* init_from = resume: when the checkpoint's run read other data than cfg names, a line saying so into data_note,
 * and, when neither dataset nor data_dir was given (data_given 0), cfg takes the run's (a resume without the config
 * file of a GPT-2 BPE run trained it on the default job's characters); when its optimisation settings (the
 * learning-rate schedule, the batch, AdamW's) differ from cfg's, as a resume without the run's config file makes
 * them, a line listing them into settings_note ("" for none) */
static void resume_notes(ngpt_config *cfg, int data_given, int has_file, char *data_note, size_t data_cap, char *settings_note, size_t settings_cap) {
    char path[700], err[NGPT_ERRLEN];
    ngpt_config stored;
    data_note[0] = settings_note[0] = 0;
    if (strcmp(cfg->init_from, "resume") || !resume_checkpoint(cfg->out_dir, path, sizeof path)) return;
    ngpt_config_defaults(&stored);
    if (checkpoint_read_config(path, &stored, err, sizeof err)) return;
    char stored_dir[300], dir[300], real_stored[PATH_MAX], real_dir[PATH_MAX]; /* the folders read (data_dir over dataset), however written */
    dataset_dir(&stored, stored_dir, sizeof stored_dir);
    dataset_dir(cfg, dir, sizeof dir);
    if (strcmp(stored_dir, dir) && !(realpath(stored_dir, real_stored) && realpath(dir, real_dir) && !strcmp(real_stored, real_dir))) {
        if (!data_given) {
            copy_str(cfg->dataset, sizeof cfg->dataset, stored.dataset);
            copy_str(cfg->data_dir, sizeof cfg->data_dir, stored.data_dir);
            snprintf(data_note, data_cap, "init_from = resume reads the data the checkpoint's run read, %s %s (--dataset or --data_dir reads "
                     "other data)", stored.data_dir[0] ? "data_dir" : "dataset", stored.data_dir[0] ? stored.data_dir : stored.dataset);
        } else if (stored.data_dir[0])
            snprintf(data_note, data_cap, "the checkpoint's run read data_dir %s; this one reads %s (pass --data_dir=%s to go on with its data)",
                     stored.data_dir, cfg->data_dir[0] ? cfg->data_dir : cfg->dataset, stored.data_dir);
        else
            snprintf(data_note, data_cap, "the checkpoint's run read dataset %s; this one reads %s (pass --dataset=%s to go on with its data)",
                     stored.dataset, cfg->data_dir[0] ? cfg->data_dir : cfg->dataset, stored.dataset);
    }
    static const char *const settings[] = {"learning_rate", "min_lr", "warmup_iters", "lr_decay_iters", "decay_lr", "batch_size",
                                           "gradient_accumulation_steps", "weight_decay", "beta1", "beta2", "grad_clip", "dropout", "seed"};
    size_t len = 0;
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        size_t k = (size_t)(config_find(settings[i]) - config_keys);
        char now[600], then[600];
        config_line(cfg, k, 0, now, sizeof now);
        config_line(&stored, k, 0, then, sizeof then);
        if (!strcmp(now, then)) continue;
        const char *now_value = strstr(now, " = ") + 3, *then_value = strstr(then, " = ") + 3;
        now[strcspn(now, "\n")] = then[strcspn(then, "\n")] = 0;
        int n = snprintf(settings_note + len, settings_cap - len, "%s%s %s (its run: %s)", len ? ", " : "", settings[i], now_value, then_value);
        if (n < 0 || len + (size_t)n >= settings_cap) { settings_note[0] = 0; return; } /* too long to say whole: nothing, not a cut list */
        len += (size_t)n;
    }
    if (len && snprintf(settings_note + len, settings_cap - len, ": the checkpoint's run trained with other settings%s",
                        has_file ? "; these go on from here" : " (pass its config file to go on with them)") >= (int)(settings_cap - len))
        settings_note[0] = 0;
}

static int cmd_train(int argc, char **argv) {
    ngpt_config cfg;
    char err[NGPT_ERRLEN];
    int has_file;
    ngpt_config_defaults(&cfg);
    int line_of[N_CONFIG_KEYS];
    if (parse_args("train", argc, argv, 1, &cfg, &has_file, NULL, NULL, line_of, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    /* what would refuse the run after the data is prepared (or downloaded) and the peak measured, refused first:
     * an init_from that cannot be read (its header only), an out_dir holding another run's checkpoints (the
     * library's ngpt_train refuses it too) */
    ngpt_config model = cfg;
    char weights[4300];
    int gpt2_name = 0;
    for (int i = 0; i < 4; i++) gpt2_name |= !strcmp(cfg.init_from, gpt2_sizes[i].name);
    if (gpt2_name && gpt2_weights_file(cfg.init_from, cfg.pretrained_dir, weights, sizeof weights, err, sizeof err)) { /* a shape needs no file */
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    if (strcmp(cfg.init_from, "scratch") && strcmp(cfg.init_from, "resume") && init_from_config(&model, 0, err, sizeof err)) {
        fprintf(stderr, "error: %s%s\n", err, unset_block_size_hint(&cfg, has_file, line_of, 1));
        return 1;
    }
    char above[300];
    int above_kind = file_above(cfg.out_dir, above, sizeof above);
    if (above_kind) { /* said now, not after the data and the plan */
        if (above_kind == 1) /* out_dir = notes.txt/run: no folder can be made */
            fprintf(stderr, "error: out_dir = %s cannot be made: %s is a file, not a folder\n", cfg.out_dir, above);
        else
            fprintf(stderr, "error: out_dir = %s is a file, not a folder: out_dir is where the checkpoints and log.jsonl go%s\n", cfg.out_dir,
                    is_checkpoint_file(above) ? " (it is a checkpoint: `nanogpt sample --init_from=` it samples it; --init_from=resume "
                                                      "with its folder as out_dir goes on from the folder's newest checkpoint)" : "");
        return 1;
    }
    long long newest; /* after init_from's own errors: a mistyped init_from (Resume, gpt3) is not a new run */
    if (strcmp(cfg.init_from, "resume") && !cfg.eval_only && holds_checkpoints(cfg.out_dir, &newest)) {
        out_dir_taken_error(&cfg, newest, err, sizeof err);
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    /* the first line says where the settings come from (stdout, flushed before the notes on stderr) */
    if (!has_file && !strcmp(cfg.init_from, "scratch"))
        printf("no config file: %s nanoGPT's shakespeare_char recipe (n_layer %d, n_embd %d, block_size %d, max_iters %d)\n",
               argc ? "the command line's settings over" : "the default job,", cfg.n_layer, cfg.n_embd, cfg.block_size, cfg.max_iters);
    else if (!has_file && !strcmp(cfg.init_from, "resume")) /* the model comes from the checkpoint (its own line follows), the rest from the recipe */
        printf("no config file: the command line's settings over nanoGPT's shakespeare_char recipe (max_iters %d)\n", cfg.max_iters);
    else if (!has_file) /* pretrained weights: their model cropped to the recipe's block_size, unless the command line set one */
        printf("no config file: the command line's settings over nanoGPT's shakespeare_char recipe (block_size %d, max_iters %d; "
               "data/shakespeare/finetune.cfg is nanoGPT's finetuning recipe)\n", cfg.block_size, cfg.max_iters);
    fflush(stdout);
    /* a resume on other data than its run read: said before that data is prepared (or downloaded) */
    char data_note[1600], settings_note[2048];
    int data_given = line_of[config_find("dataset") - config_keys] || line_of[config_find("data_dir") - config_keys];
    resume_notes(&cfg, data_given, has_file, data_note, sizeof data_note, settings_note, sizeof settings_note);
    if (data_note[0]) fprintf(stderr, "note: %s\n", data_note);
    if (settings_note[0] && !cfg.eval_only) fprintf(stderr, "note: %s\n", settings_note);
    char lr_note[400];
    lr_schedule_note(&cfg, lr_note, sizeof lr_note);
    if (lr_note[0] && !cfg.eval_only) fprintf(stderr, "note: %s\n", lr_note);
    if (ensure_dataset(&cfg, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    Display disp = {isatty(1), cfg.log_interval, 0};
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.log = display_log;
    opt.progress = display_progress;
    opt.ctx = &disp;
    opt.measure_peak = !cfg.eval_only; /* the live line shows MFU (an eval_only run has no training steps) */
    ngpt_trainer *tr;
    if (ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    running_trainer = tr;
    for (int k = 0; k < 2; k++) { /* not where the signal is ignored: a script's background job ignores Ctrl-C, as prepare_signals */
        int sig = k ? SIGTERM : SIGINT;
        struct sigaction was;
        if (!sigaction(sig, NULL, &was) && was.sa_handler != SIG_IGN) signal(sig, on_signal);
    }
    struct sigaction bus;
    memset(&bus, 0, sizeof bus);
    bus.sa_sigaction = on_data_bus_error;
    bus.sa_flags = SA_SIGINFO;
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
    /* init_from (resume, pretrained weights) decides the model: say so where it overrides what the command line gave */
    const ngpt_config *eff = &tr->cfg;
    model_set_note(stdout, &cfg, eff, line_of, has_file);
    ngpt_stats st;
    ngpt_get_stats(tr, &st);
    char b1[32], b2[32], b3[64] = "";
    char lanes[48] = "", arenas[128];
    int gpu = strcmp(tr->be->name, "cpu") != 0;
    if (st.lanes > 1)
        snprintf(lanes, sizeof lanes, " in %d lanes%s", st.lanes, gpu || cpu_lanes_at_once(cpu_of(tr->be)) ? "" : " one after the other");
    snprintf(arenas, sizeof arenas, "arena %s%s + %s %s", fmt_bytes(b1, sizeof b1, (double)st.device_bytes), gpu ? " on the GPU" : "",
             fmt_bytes(b2, sizeof b2, (double)st.host_bytes), gpu ? "pinned host" : "for batches and staging");
    /* nanoGPT's "number of parameters" leaves out the position embeddings, and its model from scratch without a
     * meta.bin has 50304 tokens where this one has vocab_size's (50257) */
    size_t nano = st.parameters - (size_t)tr->ms.maxT * (size_t)tr->ms.C;
    if (!strcmp(eff->init_from, "scratch") && !tr->charvocab && tr->ms.V < 50304) nano += (size_t)(50304 - tr->ms.V) * (size_t)tr->ms.C;
    char where[48]; /* the device, and on the CPU the threads it starts with */
    if (gpu) snprintf(where, sizeof where, "%s", st.device);
    else snprintf(where, sizeof where, "%s (%d thread%s)", st.device, cpu_of(tr->be)->nthreads, cpu_of(tr->be)->nthreads > 1 ? "s" : "");
    char params[160], ours[32], theirs[32];
    snprintf(params, sizeof params, "%s parameters (nanoGPT counts %s: no position embeddings%s)", fmt_params(ours, sizeof ours, (double)st.parameters),
             fmt_params(theirs, sizeof theirs, (double)nano), !strcmp(eff->init_from, "scratch") && !tr->charvocab && tr->ms.V < 50304 ? ", 50304 tokens" : "");
    if (tr->plan.req.inference) /* eval_only of a loaded model */
        printf("%s: %s; plan: evaluation only (forward passes: no gradients or optimizer state), eval micro-batch %d, logits chunk %d; %s\n",
               where, params, st.eval_micro_batch, tr->plan.eval_chunk, arenas);
    else
        printf("%s: %s; plan: micro-batch %d x accumulation %d (%lld tokens/step)%s, recompute %s, logits chunk %d, eval micro-batch %d%s; %s\n",
               where, params, st.micro_batch, st.grad_accum, (long long)st.micro_batch * st.grad_accum * eff->block_size, lanes,
               recompute_name(st.recompute), st.logits_chunk, st.eval_micro_batch,
               tr->plan.moments_dtype == NGPT_DTYPE_BF16 ? ", AdamW moments bf16" : "", arenas);
    if (tr->plan.grown_from) {
        char why[256];
        printf("note: %s\n", grown_micro_batch_why(&tr->plan, why, sizeof why));
    }
    if (tr->plan.bf16_micro_batch) {
        char hint[300];
        printf("note: %s\n", bf16_moments_hint(&tr->plan, hint, sizeof hint));
    }
    char moments_note[300];
    if (resume_moments_note(tr, moments_note, sizeof moments_note)[0]) printf("note: %s\n", moments_note);
    double t0 = now_seconds();
    int step0 = st.step; /* a resumed run starts at its checkpoint's step */
    int rc = ngpt_train(tr);
    running_trainer = NULL;
    if (disp.live) printf("\n");
    ngpt_get_stats(tr, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fmt_bytes(b1, sizeof b1, (double)st.device_bytes + (st.device[0] == 'c' && st.device[1] == 'p' ? (double)st.host_bytes : 0));
    fmt_bytes(b2, sizeof b2, (double)ru.ru_maxrss * 1024.0);
    if (gpu) { /* on a GPU the device's own count: the arena, and what the CUDA libraries took */
        char b[32];
        snprintf(b3, sizeof b3, ", device memory in use %s", fmt_bytes(b, sizeof b, memory_measured(tr->be)));
    }
    if (rc == NGPT_ERR_INTERRUPTED) { /* the library's message names the config key; here, the command line's spelling */
        const char *msg = ngpt_last_error(tr), *key = strstr(msg, "init_from = resume");
        printf("%.*s%s%s; memory: arena %s (allocated once)%s, process peak resident %s\n", key ? (int)(key - msg) : (int)strlen(msg), msg,
               key ? "--init_from=resume" : "", key ? key + strlen("init_from = resume") : "", b1, b3, b2);
    } else if (rc) fprintf(stderr, "error: %s\n", ngpt_last_error(tr));
    else if (cfg.eval_only) /* its losses are on the evaluation's line; best val loss may be an earlier step's */
        printf("done: evaluated the model of step %d in %.1f s, nothing trained or saved; memory: arena %s (allocated once)%s, process peak "
               "resident %s; %s%s%s\n",
               st.step, now_seconds() - t0, b1, b3, b2, tr->unlogged ? "not logged" : "log in ", tr->unlogged ? "" : cfg.out_dir,
               tr->unlogged ? "" : "/log.jsonl");
    else {
        char from[160] = "";
        if (step0 > 0 && st.step == step0)
            snprintf(from, sizeof from, " (the checkpoint is at step %d, past max_iters %d: raise --max_iters to train on)", step0, cfg.max_iters);
        else if (step0 > 0) snprintf(from, sizeof from, " (from step %d to %d)", step0, st.step);
        /* best_val_loss starts at nanoGPT's 1e9 and stays there while no evaluation comes under it (every one NaN, say) */
        char skipped[160] = "", best[48] = "no val loss under 1e9";
        if (st.skipped_steps)
            snprintf(skipped, sizeof skipped, ", %d of them skipped (a NaN/Inf loss or gradient: the parameters were not updated)", st.skipped_steps);
        if (st.best_val_loss < 1e9f) snprintf(best, sizeof best, "best val loss %.4f", (double)st.best_val_loss);
        printf("done: %d step%s%s%s in %.1f s, %s; memory: arena %s (allocated once)%s, process peak resident %s; log in %s/log.jsonl\n",
               st.step - step0, st.step - step0 == 1 ? "" : "s", from, skipped, now_seconds() - t0, best, b1, b3, b2, cfg.out_dir);
    }
    ngpt_trainer_free(tr);
    if (rc == NGPT_ERR_INTERRUPTED && stop_signal) {
        /* saved, and now ended by the signal, as Python ends on an unhandled Ctrl-C: the shell sees a program that
         * SIGINT (or SIGTERM) ended, so a script's loop or `&&` stops here too, and a scheduler does not record success */
        fflush(NULL);
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
        return 128 + stop_signal;
    }
    return rc == NGPT_OK ? 0 : 1;
}

/* A refused plan: the error on stderr and, for --json, {"fits": false, "error": "..."} on stdout; exit status 1. */
static int plan_refused(int json, const char *err) {
    fprintf(stderr, "error: %s\n", err);
    if (!json) return 1;
    printf("{\"fits\": false, \"error\": ");
    json_print_string(stdout, err);
    printf("}\n");
    return 1;
}

/* An out_dir without checkpoints (nanoGPT's default, out, or a folder that does not exist) when the default job's
 * has some: an error naming the default job's. 0 otherwise (an out_dir of its own, a run that has not saved yet). */
static int default_job_checkpoints(const char *out_dir, char *err, size_t errlen) {
    long long step;
    if (holds_checkpoints(out_dir, &step) || !strcmp(out_dir, DEFAULT_JOB_OUT_DIR) || !holds_checkpoints(DEFAULT_JOB_OUT_DIR, &step) ||
        (strcmp(out_dir, "out") && file_exists(out_dir)))
        return NGPT_OK;
    return fail(err, errlen, NGPT_ERR_IO, "%s out_dir %s; `nanogpt train` without a config file saved into %s: pass --out_dir=%s",
                file_exists(out_dir) ? "no checkpoint in" : "no such folder as", out_dir, DEFAULT_JOB_OUT_DIR, DEFAULT_JOB_OUT_DIR);
}

/* Whether dir/log.jsonl is a training run's: a line that is no eval_only evaluation among its first 64, or none yet
 * (a run starting); eval_only runs log there too, and save nothing */
static int log_of_training(const char *dir) {
    char path[600], line[1024];
    snprintf(path, sizeof path, "%.580s/log.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int lines = 0, evaluations = 0;
    while (lines < 64 && fgets(line, sizeof line, f)) {
        lines++;
        evaluations += strstr(line, "\"eval_only\": true") != NULL;
    }
    fclose(f);
    return lines == 0 || evaluations < lines;
}

/* sample's words after err, why out_dir's checkpoint path did not read (rc): of one corrupt or cut short, the newest
 * other checkpoint in its folder, when that opens */
static void sample_checkpoint_hint(const char *path, int rc, char *err, size_t errlen) {
    char other[512], dir[512];
    size_t n = strlen(err);
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (rc == NGPT_ERR_FORMAT && n < errlen && checkpoint_other_readable(dir, path, other, sizeof other))
        snprintf(err + n, errlen - n, "; out_dir's newest other checkpoint opens: --init_from=%s samples it", other);
}

/* The checkpoint that sample, export and plan --sample read from out_dir: best.bin (the lowest val loss), else the newest
 * ckpt_<step>.bin. cfg becomes its stored config and model shape (checkpoint_read_config), with init_from =
 * scratch: the caller makes a trainer from cfg and loads the file's parameters into it with ngpt_load. */
static int checkpoint_to_read(const char *out_dir, char *path, size_t cap, ngpt_config *cfg, char *err, size_t errlen) {
    long long newest;
    int n = checkpoint_list(out_dir, &newest, 1);
    if (out_dir_file_error(out_dir, "samples it", err, errlen)) return NGPT_ERR_ARG;
    snprintf(path, cap, "%.400s/best.bin", out_dir);
    if (!file_exists(path)) {
        int rc = default_job_checkpoints(out_dir, err, errlen);
        if (rc) return rc;
        if (!n && log_of_training(out_dir))
            return fail(err, errlen, NGPT_ERR_IO, "no checkpoint in out_dir %s yet: its run (log.jsonl) has saved none; a run saves at its "
                                                   "evaluations (eval_interval) when the val loss improves, and when it ends", out_dir);
        if (!n && !file_exists(out_dir)) {
            char rel[PATH_MAX + 600];
            return fail(err, errlen, NGPT_ERR_IO, "out_dir %s does not exist (train first, or pass the --out_dir of a run)%s", out_dir,
                        relative_dir_note(out_dir, rel, sizeof rel));
        }
        if (!n) return fail(err, errlen, NGPT_ERR_IO, "no checkpoint in out_dir %s%s (train first, or pass --out_dir)", out_dir,
                            pytorch_checkpoint_note(out_dir));
        checkpoint_path(out_dir, newest, path, cap);
    }
    int rc = checkpoint_read_config(path, cfg, err, errlen);
    if (!rc) copy_str(cfg->init_from, sizeof cfg->init_from, "scratch");
    return rc;
}

/* nanogpt plan: the memory plan that train (or with --sample, sample) would make, the model's shape taken from
 * init_from, from file headers alone; with --sample and no init_from, out_dir's checkpoint when it has one (best.bin,
 * else the newest), as sample reads it */
static int cmd_plan(int argc, char **argv) {
    ngpt_config cfg;
    char err[NGPT_ERRLEN], **rest = argv; /* the arguments parse_args reads, gathered in place */
    int has_file, json = 0, json_args = 0, sampling = 0, init_given = 0, n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1, json_args++; /* known before the arguments are parsed: their errors are JSON too */
        if (!strncmp(argv[i], "--init_from=", 12)) init_given = 1;
        if (!strcmp(argv[i], "--sample")) sampling = 1; /* the plan `nanogpt sample` makes (ngpt_options.sample_only) */
        else rest[n++] = argv[i];
    }
    if (sampling) files_first(rest, n); /* sample's order: its config files first, its settings over them */
    /* --sample plans what `nanogpt sample` makes: from nanoGPT's defaults, not the default job's preset; without
     * init_from, out_dir's checkpoint (best.bin, else the newest), its stored config the base that the arguments
     * override, as sample reads it; with no checkpoint there (nor the default job's), the config's model */
    ngpt_config_defaults(&cfg);
    int line_of[N_CONFIG_KEYS];
    static SampleSettings sample_settings; /* checked as sample checks them; they do not change the plan */
    const ConfigExtra sample_keys = {sample_file_setting, &sample_settings}, *extra = sampling ? &sample_keys : NULL;
    int rc = parse_args("plan", n, rest, !sampling, &cfg, &has_file, &json, extra, line_of, err, sizeof err);
    if (!rc && sampling && !init_given) {
        char ckpt[700];
        long long newest;
        if (holds_checkpoints(cfg.out_dir, &newest)) {
            ngpt_config base;
            ngpt_config_defaults(&base);
            rc = checkpoint_to_read(cfg.out_dir, ckpt, sizeof ckpt, &base, err, sizeof err);
            const ConfigExtra sample_keys_read = {sample_key_read_before, NULL}; /* a start = 'FILE:...' was read above */
            if (!rc) rc = parse_args("plan", n, rest, 0, &base, &has_file, &json, &sample_keys_read, line_of, err, sizeof err);
            cfg = base;
            copy_str(cfg.init_from, sizeof cfg.init_from, ckpt); /* the model: the checkpoint's header */
        } else if (!(rc = out_dir_file_error(cfg.out_dir, "samples it", err, sizeof err)))
            rc = default_job_checkpoints(cfg.out_dir, err, sizeof err);
    }
    if (!rc) rc = config_validate(&cfg, err, sizeof err);
    if (!rc && !strcmp(cfg.init_from, "resume")) rc = default_job_checkpoints(cfg.out_dir, err, sizeof err);
    ngpt_config before_model = cfg;
    if (!rc && (rc = init_from_config(&cfg, sampling, err, sizeof err)))
        strncat(err, unset_block_size_hint(&before_model, has_file, line_of, !sampling), sizeof err - strlen(err) - 1);
    if (!rc) model_set_note(stderr, &before_model, &cfg, line_of, has_file); /* as train says it */
    int V = 0;
    if (!rc) rc = data_vocab(&cfg, NULL, &V, err, sizeof err);
    if (rc) return plan_refused(json, err);
    char dir[300], meta[400];
    snprintf(meta, sizeof meta, "%s/meta.bin", dataset_dir(&cfg, dir, sizeof dir));
    if (!cfg.vocab_size && !file_exists(meta) && !has_split(dir, "train")) /* not prepared yet: a character dataset's size is unknown */
        fprintf(stderr, "note: %s holds no data yet (no meta.bin, train.bin or shards): GPT-2's vocabulary of %d tokens assumed; a "
                        "character-level dataset's comes from its meta.bin (Tiny Shakespeare has 65 characters)\n", dir, V);
    ModelShape ms = {cfg.n_layer, cfg.n_head, cfg.n_embd, V, pad_vocab(V), cfg.block_size, cfg.bias};
    int device = strcmp(cfg.device, "cuda") ? DEV_BACKEND_CPU : DEV_BACKEND_CUDA, dtype = NGPT_DTYPE_F32;
    char note[NGPT_ERRLEN];
    if (!strcmp(cfg.device, "auto") && !resolve_device(&cfg, &device, &dtype, note, sizeof note, err, sizeof err)) {}
    if (device == DEV_BACKEND_CUDA) dtype = cuda_dtype(cfg.dtype, ngpt_cuda_compute_capability());
    double budget = cfg.max_memory;
    if (device == DEV_BACKEND_CUDA) {
        size_t fr = 0, total = 0;
        const int measured = !ngpt_cuda_mem_info(&fr, &total, err, sizeof err) && (budget <= 0 || (double)fr < budget);
        if (measured && budget > 0) fprintf(stderr, "note: %s\n", max_memory_above_note(budget, (double)fr, "free on the GPU", err, sizeof err));
        if (measured) budget = (double)fr;
        if (budget <= 0)
            return plan_refused(json, "no GPU here to measure; give the card's free memory with --max_memory (e.g. --max_memory=2.68GiB)");
        if (cuda_budget_after_margin(&budget, !measured, err, sizeof err)) return plan_refused(json, err);
    } else {
        double avail = host_memory_available(); /* as train: max_memory caps the budget, never raises it */
        if (budget > avail) fprintf(stderr, "note: %s\n", max_memory_above_note(budget, avail, "of this machine's memory to plan with", err, sizeof err));
        if (budget <= 0 || budget > avail) budget = avail;
    }
    PlanRequest req;
    plan_request_from_config(&req, &cfg, &ms, device, dtype, cfg.threads > 0 ? cfg.threads : cpu_count(), budget, sampling);
    Plan p;
    rc = plan_make(&p, &req, err, sizeof err);
    if (rc && rc != NGPT_ERR_NOMEM) return plan_refused(json, err); /* nothing was planned */
    if (!has_file && !sampling) /* as train says it */
        fprintf(stderr, "note: no config file: %s nanoGPT's shakespeare_char recipe (data/shakespeare_char/train%s.cfg)\n",
                n > json_args ? "the command line's settings over" : "the default job,", device == DEV_BACKEND_CUDA ? "" : "_cpu");
    /* a plan that fits, or (NGPT_ERR_NOMEM) the smallest one, which does not */
    if (json) plan_print_json(&p, rc ? err : NULL, stdout);
    else plan_print(&p, stdout);
    if (rc) fprintf(stderr, "error: %s\n", err);
    return rc ? 1 : 0;
}

/* nanogpt bench [config file] [--key=value ...] [--steps=20] [--warmup=3] [--kernels]: nanoGPT's defaults
 * (GPT-2 124M, block 1024) on random tokens unless told otherwise; --kernels times the model's matmul shapes,
 * attention, LayerNorm and the loss instead of training steps */
/* nanogpt bench --sample=S [--prompt=P]: a sampling trainer (its plan, its kernels) with random weights generates
 * `steps` tokens after a one-token prompt for S samples at once (temperature 1, top_k 200); with --prompt, first a
 * P-token prompt of random tokens is fed to the S samples and one token drawn after it (the faster of two runs: the
 * first loads the kernels) */
static int bench_sampling(ngpt_config *cfg, int samples, int steps, int prompt_len) {
    char err[NGPT_ERRLEN];
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    ngpt_trainer *tr;
    if (ngpt_trainer_create(cfg, &opt, &tr, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
    /* random weights (N(0, 0.02); a sampling trainer starts at zero), a window's worth at a time */
    size_t per = param_window_floats(tr);
    float *host = (float *)tr->h_staging;
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        for (size_t j = 0; j < tr->plan.param_len[i]; j += per) {
            size_t c = MIN(per, tr->plan.param_len[i] - j);
            for (size_t q = 0; q < c; q++) host[q] = 0.02f * normal_at(1, 2000 + (uint64_t)i, j + q);
            upload_param_chunk(tr, i, j, host, c);
        }
    if (prompt_len > tr->ms.maxT) {
        fprintf(stderr, "error: --prompt=%d: a prompt of 1..%d tokens (block_size)\n", prompt_len, tr->ms.maxT);
        ngpt_trainer_free(tr);
        return 1;
    }
    int32_t prompt[1] = {0};
    int32_t *out = (int32_t *)malloc((size_t)samples * (size_t)(1 + MAX(steps, prompt_len)) * sizeof(int32_t));
    int32_t *long_prompt = (int32_t *)malloc((size_t)MAX(prompt_len, 1) * sizeof(int32_t));
    if (!out || !long_prompt) {
        fprintf(stderr, "error: out of host memory\n");
        free(out);
        free(long_prompt);
        ngpt_trainer_free(tr);
        return 1;
    }
    char b1[32];
    printf("bench: sampling, n_layer %d, n_head %d, n_embd %d, block_size %d, vocab %d, %s on %s; arena %s; samples %d x %d new tokens "
           "each after a 1-token prompt (top_k 200)%s, random weights\n",
           tr->ms.L, tr->ms.NH, tr->ms.C, tr->ms.maxT, tr->ms.V, dtype_name(tr->plan.req.dtype), tr->be->name,
           fmt_bytes(b1, sizeof b1, (double)tr->plan.device_bytes + (double)tr->plan.host_bytes), samples, steps,
           prompt_len ? ", after a timed prompt" : "");
    fflush(stdout);
    int rc = NGPT_OK;
    if (prompt_len) {
        for (int i = 0; i < prompt_len; i++) long_prompt[i] = (int32_t)(ngpt_hash(3, 3, (uint64_t)i) % (uint32_t)tr->ms.V);
        double best = 0;
        for (int run = 0; run < 2 && !rc; run++) {
            double t0 = now_seconds();
            rc = ngpt_sample(tr, long_prompt, prompt_len, samples, 1, 1.0f, 200, 1, out);
            double t = now_seconds() - t0;
            if (!run || t < best) best = t;
        }
        SampleFit fit;
        if (!rc && !sample_fit(tr, samples, &fit)) {
            int shared = sample_shares_prompt(tr, fit.seqs), per = MIN(sample_pass_positions(tr, &fit, shared ? 1 : fit.seqs), prompt_len);
            int rounds = (samples + fit.seqs - 1) / fit.seqs;
            char later[96] = "";
            if (rounds > 1) snprintf(later, sizeof later, "; in %d rounds, the later ones taking the prompt from the cache", rounds);
            printf("prompt       %.4f s: %d tokens of each of %d samples fed (%d at a time: %s, %d positions a pass%s), and one new token "
                   "drawn, %.1f prompt tokens/s\n", best, prompt_len, samples, fit.seqs, shared ? "to one, its cache copied to the others" : "to each",
                   per, later, samples * prompt_len / best);
            printf("bench_result prompt_tokens_per_s=%.1f\n", samples * prompt_len / best);
            fflush(stdout);
        }
    }
    double t0 = now_seconds();
    const long long graph_steps = tr->graph_steps;
    if (!rc) rc = ngpt_sample(tr, prompt, 1, samples, steps, 1.0f, 200, 1, out);
    double t = now_seconds() - t0;
    if (rc) fprintf(stderr, "error: %s\n", ngpt_last_error(tr));
    else {
        char graphs[96] = "";
        if (tr->be->graph_begin) snprintf(graphs, sizeof graphs, "; %lld steps' layers as one recorded graph each", tr->graph_steps - graph_steps);
        printf("sampling     %.2f s: %.1f ms per step of all samples, %.1f tokens/s%s\n", t, 1e3 * t / steps, samples * steps / t, graphs);
        printf("bench_result sample_tokens_per_s=%.1f\n", samples * steps / t);
    }
    free(out);
    free(long_prompt);
    ngpt_trainer_free(tr);
    return rc ? 1 : 0;
}

static int cmd_bench(int argc, char **argv) {
    int steps = 20, warmup = 3, n = 0, has_file, kernels = 0, samples = 0, prompt_len = 0;
    char **rest = argv, err[NGPT_ERRLEN]; /* the arguments parse_args reads, gathered in place */
    for (int i = 0; i < argc; i++) {
        double x;
        if (!strcmp(argv[i], "--kernels")) {
            kernels = 1;
        } else if (!strncmp(argv[i], "--sample=", 9)) {
            if (parse_number(argv[i] + 9, &x) || x != floor(x) || x < 1 || x > 4096) {
                fprintf(stderr, "error: %s: the number of samples is a whole number in [1, 4096]\n", argv[i]);
                return 1;
            }
            samples = (int)x;
        } else if (!strncmp(argv[i], "--prompt=", 9)) {
            if (parse_number(argv[i] + 9, &x) || x != floor(x) || x < 1 || x > 1e6) {
                fprintf(stderr, "error: %s: the prompt's length is a whole number of tokens in [1, block_size]\n", argv[i]);
                return 1;
            }
            prompt_len = (int)x;
        } else if (!strncmp(argv[i], "--steps=", 8) || !strncmp(argv[i], "--warmup=", 9)) {
            int is_steps = argv[i][2] == 's';
            const char *v = strchr(argv[i], '=') + 1;
            if (parse_number(v, &x) || x != floor(x) || x < (is_steps ? 1 : 0) || x > 100000) {
                fprintf(stderr, "error: %s: %s is a whole number in [%d, 100000]\n", argv[i], is_steps ? "steps" : "warmup", is_steps ? 1 : 0);
                return 1;
            }
            if (is_steps) steps = (int)x;
            else warmup = (int)x;
        } else rest[n++] = argv[i];
    }
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    int line_of[N_CONFIG_KEYS];
    if (parse_args("bench", n, rest, 0, &cfg, &has_file, NULL, NULL, line_of, err, sizeof err) || config_validate(&cfg, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    /* vocab_size 0 is resolved as in training: the dataset's meta.bin (or meta.pkl) when it has one, else GPT-2's 50257 */
    if (prompt_len && !samples) {
        fprintf(stderr, "error: --prompt=%d times a prompt fed to sampling: give --sample=S too\n", prompt_len);
        return 1;
    }
    if (samples) return bench_sampling(&cfg, samples, steps, prompt_len);
    cfg.max_iters = warmup + steps + 1;
    cfg.always_save_checkpoint = 0;
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1;
    ngpt_config model = cfg; /* the weights' shape first, as train reads it: its errors get the block_size hint, others not */
    if (strcmp(cfg.init_from, "scratch") && strcmp(cfg.init_from, "resume") && init_from_config(&model, 0, err, sizeof err)) {
        fprintf(stderr, "error: %s%s\n", err, unset_block_size_hint(&cfg, has_file, line_of, 0));
        return 1;
    }
    ngpt_trainer *tr;
    if (ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    const Plan *p = &tr->plan;
    printf("bench: n_layer %d, n_head %d, n_embd %d, block_size %d, vocab %d, %s on %s; micro-batch %d x accumulation %d "
           "(%d tokens per step), recompute %s, logits chunk %d rows%s; ",
           tr->ms.L, tr->ms.NH, tr->ms.C, p->req.T, tr->ms.V, dtype_name(p->req.dtype), tr->be->name, p->micro_batch, p->grad_accum,
           p->micro_batch * p->grad_accum * p->req.T, recompute_name(p->recompute), p->logits_chunk,
           p->moments_dtype == NGPT_DTYPE_BF16 ? ", AdamW moments bf16" : "");
    if (kernels)
        printf("each kernel: the fastest of 5 to 200 calls (0.2 s) after a warm-up call; decoding's products (decode NAME xROWS) and attention "
               "(kv-cache attention xROWS) per call, of the fastest of 5 to 200 runs of %d calls back to back (0.02 s)\n", DECODE_CALLS);
    else printf("%d warm-up + %d timed steps on random tokens, then one with each op timed\n", warmup, steps);
    fflush(stdout);
    if (kernels) {
        KernelTime kt[N_KERNEL_TIMES];
        int crows = 0, nk = bench_kernels(tr, kt, &crows), rc = be_check(tr, "the kernel benchmark");
        char b1[32];
        /* the kernels run in the AdamW moments' memory, which a small model's cannot fill with a whole chunk */
        if (crows >= p->logits_chunk) printf("classifier chunk rows %d\n", crows);
        else if (crows > 0)
            printf("classifier chunk rows %d, not the plan's %d: the kernels run in the AdamW moments' memory, which holds no more\n", crows,
                   p->logits_chunk);
        else printf("classifier chunk not timed: the kernels run in the AdamW moments' memory, which cannot hold its weights\n");
        /* every kernel where the moments hold its operands: the GELU-fused products only where the backend fuses */
        const int all = N_KERNEL_TIMES - (tr->be->matmul_forward_gelu && tr->be->matmul_backward_gelu ? 0 : 2);
        if (nk < all)
            printf("%d of the %d kernels not timed: the AdamW moments' memory (%s), where the kernels run, cannot hold their operands at "
                   "micro-batch %d; a smaller micro-batch (--micro_batch, or batch_size with --gradient_accumulation_steps=1) may time them\n",
                   all - nk, all, fmt_bytes(b1, sizeof b1, (double)(p->off_region - p->off_m)), p->micro_batch);
        for (int i = 0; i < nk && !rc; i++) {
            if (kt[i].flops > 0) fmt_flops(b1, sizeof b1, kt[i].flops / kt[i].seconds);
            else snprintf(b1, sizeof b1, "%.0f GB/s", kt[i].bytes / kt[i].seconds / 1e9);
            printf("kernel %-31s %10.5f ms %s\n", kt[i].name, 1e3 * kt[i].seconds, b1);
        }
        if (rc) fprintf(stderr, "error: %s\n", tr->err);
        ngpt_trainer_free(tr);
        return rc ? 1 : 0;
    }
    BenchResult r;
    int rc = bench_run(tr, warmup, steps, &r);
    if (rc) {
        fprintf(stderr, "error: %s\n", tr->err);
        ngpt_trainer_free(tr);
        return 1;
    }
    char b1[32], b2[32];
    printf("step         %.2f ms (median), %.0f tokens/s\n", 1e3 * r.median_step_seconds, r.tokens_per_second);
    if (strcmp(tr->be->name, "cpu"))
        printf("host         %.2f ms a step outside waits for the device, %.0f%% of the steps' time (near 100%%: the device waits "
               "for the host's launches)\n", 1e3 * r.host_step_seconds, 100 * bench_host_share(&r));
    if (r.peak_size && r.peak_measured > 0)
        printf("matmul peak  %s, the steps' model FLOP/s: above the %s measured on this backend's matmul (%d x %d x %d, %s) while the "
               "machine was busier, so MFU is over the steps' own rate\n", fmt_flops(b1, sizeof b1, r.peak_flops),
               fmt_flops(b2, sizeof b2, r.peak_measured), r.peak_size, r.peak_size, r.peak_size, dtype_name(p->req.dtype));
    else if (r.peak_size)
        printf("matmul peak  %s (this backend's matmul, %d x %d x %d, %s)\n", fmt_flops(b1, sizeof b1, r.peak_flops), r.peak_size,
               r.peak_size, r.peak_size, dtype_name(p->req.dtype));
    if (r.mfu >= 0)
        printf("MFU          %.1f%% (%s of model FLOPs, nanoGPT's 6N + 12LCT per token)\n", 100 * r.mfu,
               fmt_flops(b1, sizeof b1, r.tokens_per_second * r.flops_per_token));
    printf("one step, each op timed with the device synchronised around it (%.2f ms in all):\n", 1e3 * r.profiled_step_seconds);
    double ops = 0;
    for (int c = 0; c < N_PROF; c++) {
        printf("  %-12s %9.2f ms %5.1f%%\n", prof_names[c], 1e3 * r.op_seconds[c], 100 * r.op_seconds[c] / r.profiled_step_seconds);
        for (int o = 0; o < N_PROF_OPS; o++)
            if (r.by_op_calls[c][o])
                printf("    %-24s %9.2f ms in %d call%s, %.1f us each\n", prof_op_names[o], 1e3 * r.by_op_seconds[c][o], r.by_op_calls[c][o],
                       r.by_op_calls[c][o] == 1 ? "" : "s",
                       1e6 * r.by_op_seconds[c][o] / r.by_op_calls[c][o]);
        ops += r.op_seconds[c];
    }
    printf("  %-12s %9.2f ms %5.1f%%  (copies, host work, synchronisation)\n", "other", 1e3 * (r.profiled_step_seconds - ops),
           100 * (r.profiled_step_seconds - ops) / r.profiled_step_seconds);
    fmt_bytes(b1, sizeof b1, r.arena_bytes);
    fmt_bytes(b2, sizeof b2, r.memory_in_use);
    printf("memory       arenas %s (allocated once); %s %s\n", b1, strcmp(tr->be->name, "cpu") ? "device memory in use" : "peak resident", b2);
    printf("bench_result tokens_per_s=%.0f mfu=%.4f peak_tflops=%.2f memory_bytes=%.0f host_share=%.4f\n", r.tokens_per_second, r.mfu,
           r.peak_flops / 1e12, r.memory_in_use, bench_host_share(&r));
    ngpt_trainer_free(tr);
    return 0;
}

static int cmd_prepare(int argc, char **argv) {
    const char *out = NULL, *tokenizer = "char", *format = "nanogpt", *tok_dir = "data/gpt2";
    char **inputs = NULL, err[NGPT_ERRLEN] = "";
    int n_inputs = 0, inputs_cap = 0, rc = NGPT_OK, tokenizer_given = 0;
    double val_fraction = 0.1;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--input=", 8)) {
            /* comma-separated list, or repeated --input; a file whose name has a comma (a,b.txt) is that file */
            char *list = strdup(a + 8), *save = NULL;
            const char *separators = file_exists(a + 8) ? "" : ",";
            if (!list) rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory");
            for (char *t = list ? strtok_r(list, separators, &save) : NULL; t && !rc; t = strtok_r(NULL, separators, &save)) {
                if (n_inputs == inputs_cap) {
                    int cap = inputs_cap ? 2 * inputs_cap : 16;
                    char **grown = (char **)realloc(inputs, (size_t)cap * sizeof *inputs);
                    if (!grown) { rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory"); break; }
                    inputs = grown;
                    inputs_cap = cap;
                }
                inputs[n_inputs++] = strdup(t);
            }
            free(list);
        } else if (!strncmp(a, "--out=", 6)) out = a + 6;
        else if (!strncmp(a, "--tokenizer=", 12)) tokenizer = a + 12, tokenizer_given = 1;
        else if (!strncmp(a, "--format=", 9)) format = a + 9;
        else if (!strncmp(a, "--tokenizer_dir=", 16)) tok_dir = a + 16;
        else if (!strncmp(a, "--val_fraction=", 15)) {
            if (parse_number(a + 15, &val_fraction) || val_fraction <= 0 || val_fraction >= 1)
                rc = fail(err, sizeof err, NGPT_ERR_ARG, "--val_fraction=%s: must be a number in (0, 1)", a + 15);
        } else
            rc = fail(err, sizeof err, NGPT_ERR_ARG, "prepare: unknown argument '%s' (valid: --input=FILE[,FILE...] --out=DIR --tokenizer=char|gpt2 "
                                                     "--format=nanogpt|llmc --tokenizer_dir=DIR --val_fraction=X)", a);
    }
    int gpt2 = !strcmp(tokenizer, "gpt2"), llmc = !strcmp(format, "llmc");
    for (int i = 0; i < n_inputs && !rc; i++)
        if (!inputs[i]) rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory");
    if (!rc && !gpt2 && strcmp(tokenizer, "char"))
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "--tokenizer=%s: the tokenizer is char (one id per character) or gpt2 (GPT-2's BPE)", tokenizer);
    if (!rc && !llmc && strcmp(format, "nanogpt"))
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "--format=%s: the format is nanogpt (raw uint16, as nanoGPT's prepare.py) or llmc (llm.c's shards)", format);
    if (!rc && (!n_inputs || !out)) rc = fail(err, sizeof err, NGPT_ERR_ARG, "prepare needs --input=FILE and --out=DIR");
    if (!rc && !gpt2 && llmc)
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "--format=llmc writes llm.c's GPT-2 shards: it takes --tokenizer=gpt2 (character data is "
                                                  "nanoGPT's format: train.bin, val.bin and meta.bin)");
    if (!rc && !gpt2 && n_inputs > 1)
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "character-level data is one text file in nanoGPT's format (use --tokenizer=gpt2 for documents or llm.c shards)");
    char above[300];
    if (!rc && file_above(out, above, sizeof above))
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "--out=%s: %s is a file, not a folder: prepare writes train.bin and val.bin into the folder --out "
                                                  "names", out, above);
    /* a vocabulary named for characters, which need none: GPT-2's BPE was meant, unless --tokenizer=char says otherwise */
    if (!rc && !gpt2 && strcmp(tok_dir, "data/gpt2") && !tokenizer_given)
        rc = fail(err, sizeof err, NGPT_ERR_ARG, "--tokenizer_dir=%s names GPT-2's vocabulary, which only --tokenizer=gpt2 reads: add it for GPT-2 "
                                                  "tokens (the tokenizer is char by default), or leave --tokenizer_dir out for characters", tok_dir);
    else if (!rc && !gpt2 && strcmp(tok_dir, "data/gpt2"))
        fprintf(stderr, "note: --tokenizer_dir=%s is not read: --tokenizer=char needs no vocabulary\n", tok_dir);
    const int signals_set = !rc;
    if (signals_set) prepare_signals(out, first_missing_folder(out));
    if (!rc && !gpt2) rc = prepare_char(inputs[0], out, val_fraction, stdout, err, sizeof err);
    else if (!rc) {
        ngpt_tokenizer *tok = NULL;
        rc = load_gpt2_tokenizer(tok_dir, &tok, err, sizeof err);
        if (!rc) rc = prepare_gpt2((const char *const *)inputs, n_inputs, out, val_fraction, llmc, tok, stdout, err, sizeof err);
        ngpt_tokenizer_free(tok);
    }
    if (signals_set) prepare_signals(NULL, 0);
    for (int i = 0; i < n_inputs; i++) free(inputs[i]);
    free(inputs);
    if (rc) fprintf(stderr, "error: %s\n", err);
    return rc ? 1 : 0;
}

/* ---- nanogpt sample: nanoGPT's sample.py ---- */

/* cmd_sample with its config files apart from its other arguments */
static int sample_with(int argc, char **argv, int n_files, char **cfg_files) {
    static SampleSettings settings; /* sample.py's defaults */
    static char start_literal[65536];
    strcpy(settings.start, "\n");
    settings.num_samples = 10;
    settings.max_new = 500;
    settings.top_k = 200;
    settings.temperature = 0.8;
    settings.seed = 1337;
    const ConfigExtra sample_keys = {sample_file_setting, &settings};
    char *start = settings.start;
    const size_t prompt_cap = sizeof settings.start; /* ids: at most one per byte of the start text */
    char err[NGPT_ERRLEN], path[700];
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    /* pretrained weights (--init_from=gpt2, a .safetensors file or folder, an llm.c model file), as nanoGPT's
     * sample.py; otherwise out_dir's checkpoint, whose config is the base that the config files (the training
     * run's, say), then the command line, override; the model's shape stays the checkpoint's. A config file's
     * init_from is where its training started (finetune.cfg's gpt2-xl), not what to sample: only --init_from
     * says that. */
    const char *init_from = "";
    ngpt_config args_cfg; /* --init_from, read as train reads it (nanoGPT's configurator: 'resume' is resume) */
    ngpt_config_defaults(&args_cfg);
    if (n_files) { /* sample.py's settings from the files here, their config keys (out_dir; seed, which is both) too */
        ngpt_config file_cfg;
        ngpt_config_defaults(&file_cfg);
        int line_of[N_CONFIG_KEYS] = {0};
        for (int i = 0; i < n_files; i++)
            if (config_load_extra(&file_cfg, cfg_files[i], line_of, &sample_keys, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
        copy_str(cfg.out_dir, sizeof cfg.out_dir, file_cfg.out_dir);
        if (line_of[config_find("seed") - config_keys]) settings.seed = file_cfg.seed;
    }
    for (int i = 0; i < argc; i++) { /* every argument is --key=value, checked before a checkpoint is looked for */
        char key[128];
        if (strncmp(argv[i], "--", 2) || !strchr(argv[i], '=')) { fprintf(stderr, "error: argument '%s': expected --key=value\n", argv[i]); return 1; }
        arg_key(argv[i], key, sizeof key);
        if (command_option_typo("sample", key, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
        int rc = !strcmp(key, "out_dir") ? ngpt_config_set(&cfg, key, strchr(argv[i], '=') + 1, err, sizeof err)
                 : !strcmp(key, "init_from") ? ngpt_config_set(&args_cfg, key, strchr(argv[i], '=') + 1, err, sizeof err)
                                             : NGPT_OK;
        if (rc) { fprintf(stderr, "error: --%s: %s\n", key, err); return 1; }
        if (!strcmp(key, "init_from")) init_from = args_cfg.init_from;
    }
    int checkpoint_file = init_from[0] && is_checkpoint_file(init_from); /* --init_from=out/ckpt_000000500.bin */
    int resume = !strcmp(init_from, "resume"); /* out_dir's newest checkpoint, as train's resume and export read it */
    int from_checkpoint = !init_from[0] || resume || checkpoint_file;
    if (!strcmp(init_from, "scratch")) { fprintf(stderr, "error: --init_from=scratch: a fresh model has nothing to say; sample a checkpoint or gpt2\n"); return 1; }
    if (resume && !resume_checkpoint(cfg.out_dir, path, sizeof path)) {
        if (out_dir_file_error(cfg.out_dir, "samples it", err, sizeof err) || default_job_checkpoints(cfg.out_dir, err, sizeof err))
            fprintf(stderr, "error: --init_from=resume: %s\n", err);
        else {
            resume_none_error(cfg.out_dir, err, sizeof err);
            fprintf(stderr, "error: %s\n", err);
        }
        return 1;
    }
    if (checkpoint_file || resume) {
        if (!resume) copy_str(path, sizeof path, init_from);
        int rc = checkpoint_read_config(path, &cfg, err, sizeof err);
        if (rc && resume) sample_checkpoint_hint(path, rc, err, sizeof err);
        if (rc) { fprintf(stderr, "error: %s\n", err); return 1; }
    } else if (from_checkpoint) {
        int rc = checkpoint_to_read(cfg.out_dir, path, sizeof path, &cfg, err, sizeof err);
        if (rc == NGPT_ERR_FORMAT) sample_checkpoint_hint(path, rc, err, sizeof err);
        else if (rc == NGPT_ERR_IO) /* no checkpoint there */
            strncat(err, "; --init_from=gpt2 (or a weights file) samples pretrained weights instead", sizeof err - strlen(err) - 1);
        if (rc) { fprintf(stderr, "error: %s\n", err); return 1; }
    }
    char trained_dir[300] = ""; /* the data folder the checkpoint's run read, before anything overrides it */
    CkptState trained_state;     /* the checkpoint's training state (its characters' checksum) */
    memset(&trained_state, 0, sizeof trained_state);
    if (from_checkpoint) dataset_dir(&cfg, trained_dir, sizeof trained_dir);
    ngpt_config checkpoint_model = cfg; /* with from_checkpoint, the shape that neither the files nor the settings change */
    int set[6] = {0};                    /* the model keys the command line sets */
    if (n_files) {
        const ConfigExtra sample_keys_read = {sample_key_read_before, NULL}; /* a start = 'FILE:/dev/stdin' is read once */
        for (int i = 0; i < n_files; i++) /* the config keys over the checkpoint's; sample's own were taken above */
            if (config_load_extra(&cfg, cfg_files[i], NULL, &sample_keys_read, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
        copy_str(cfg.init_from, sizeof cfg.init_from, init_from[0] ? init_from : "scratch");
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        char key[128];
        arg_key(a, key, sizeof key);
        const char *v = !strcmp(key, "start") ? arg_text(eq + 1, start_literal, sizeof start_literal) : eq + 1;
        int rc = sample_setting(&settings, key, v, err, sizeof err);
        if (rc && rc != CONFIG_NOT_OURS) {
            fprintf(stderr, "error: --%s=%.600s: %s\n", key, v, err);
            return 1;
        }
        if (rc == CONFIG_NOT_OURS) {
            if (ngpt_config_set(&cfg, key, eq + 1, err, sizeof err)) { fprintf(stderr, "error: --%s: %s\n", key, err); return 1; }
            for (int k = 0; k < 6; k++) set[k] |= !strcmp(key, model_keys[k]);
        }
    }
    const int num_samples = settings.num_samples, max_new = settings.max_new, top_k = settings.top_k;
    const double temperature = settings.temperature;
    const long long seed = settings.seed;
    if (from_checkpoint) { /* the checkpoint's model: a shape from the files is its training run's, one on the command line is said */
        char overridden[512];
        if (model_overrides(&cfg, &checkpoint_model, set, overridden, sizeof overridden)[0])
            fprintf(stderr, "note: the checkpoint sets the model, over the command line: %s\n", overridden);
        const ngpt_config *m = &checkpoint_model;
        config_set_model(&cfg, &(CkptModel){.L = m->n_layer, .NH = m->n_head, .C = m->n_embd, .V = m->vocab_size, .maxT = m->block_size, .bias = m->bias});
        copy_str(cfg.init_from, sizeof cfg.init_from, "scratch");
        /* a run that took its vocabulary from its data: its data folder read now must say the model's ids (prepared
         * again from other text, it would print other characters; resume refuses it too). Another folder's
         * vocabulary is checked below, naming the run's. */
        CkptReader r;
        memset(&r, 0, sizeof r);
        ngpt_config data_cfg = cfg;
        data_cfg.vocab_size = 0;
        char dir[300];
        dataset_dir(&cfg, dir, sizeof dir);
        const int opened = !checkpoint_open(&r, path, err, sizeof err);
        int from_data = opened && checkpoint_vocab_from_data(&r, path, &cfg), data_V = 0;
        if (opened) trained_state = r.state; /* (a file that does not open fails the load below) */
        if (r.f) fclose(r.f);
        if (from_data && !data_vocab(&data_cfg, NULL, &data_V, err, sizeof err) && data_V != cfg.vocab_size) {
            fprintf(stderr, "error: %s: its run took its vocabulary from its data (vocab_size = 0), %d ids, but %s %s %d %s: the data was "
                            "prepared again since (from other text, or with the other tokenizer)\n", path, cfg.vocab_size, dir, data_V == 50257 ? "has no meta.bin: GPT-2's" : "now holds",
                    data_V, data_V == 50257 ? "tokens" : "characters");
            return 1;
        }
    }
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    ngpt_trainer *tr;
    if (ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
    ngpt_tokenizer *tok = NULL;
    int32_t *prompt = (int32_t *)malloc(prompt_cap * sizeof(int32_t));
    int np = 0, rc = prompt ? NGPT_OK : fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory");
    if (!rc && !tr->charvocab && tr->ms.V < 50257) { /* GPT-2's tokens would fall outside the model's vocabulary */
        char dir[300], rel[PATH_MAX + 600];
        dataset_dir(&cfg, dir, sizeof dir); /* before relative_dir_note reads it: arguments have no order */
        if (!file_exists(dir)) /* a run's relative data folder, sampled from another folder */
            rc = fail(err, sizeof err, NGPT_ERR_ARG, "the model's vocabulary has %d tokens, too few for GPT-2's 50257: its characters are in the "
                                                      "meta.bin of its data, but the data folder %s does not exist%s; pass --data_dir=DIR, that "
                                                      "folder's path from here", tr->ms.V, dir, relative_dir_note(dir, rel, sizeof rel));
        else rc = fail(err, sizeof err, NGPT_ERR_ARG, "the model's vocabulary has %d tokens, too few for GPT-2's 50257, and %s has no meta.bin (or "
                                                  "nanoGPT's meta.pkl), a character vocabulary: pass --dataset=NAME or --data_dir=DIR whose "
                                                  "meta.bin holds the model's characters (e.g. --dataset=shakespeare_char)%s",
                  tr->ms.V, dir, relative_dir_note(dir, rel, sizeof rel));
    }
    if (!rc && tr->charvocab && tr->ms.V != tr->charvocab->n) {
        /* a model wider than its characters: a checkpoint trained so on this very meta.bin (vocab_size above its
         * characters) is sampled; another meta.bin is not its vocabulary, and its ids would print as U+FFFD. Weights
         * from a file that does not name its data are sampled with the meta.bin given, when it has fewer characters and
         * the model fewer ids than GPT-2's (GPT-2's weights with a meta.bin are refused: their ids are no characters). */
        char dir[300];
        dataset_dir(&cfg, dir, sizeof dir);
        char real_trained[PATH_MAX], real_dir[PATH_MAX]; /* the same folder however it is written */
        if (!trained_dir[0] && tr->ms.V > tr->charvocab->n && tr->ms.V < 50257) /* a character model's weights (an exported llm.c
                                                                                     * file) do not say their data: taken as said */
            fprintf(stderr, "note: %s/%s's %d characters are taken for the model's vocabulary (it has %d token ids, as a run with vocab_size "
                            "above its characters makes); an id above them prints as U+FFFD\n", dir, tr->charvocab->file_name,
                    tr->charvocab->n, tr->ms.V);
        else if (!trained_dir[0] || !realpath(trained_dir, real_trained) || !realpath(dir, real_dir) || strcmp(real_trained, real_dir)) {
            char trained[400] = "";
            if (trained_dir[0]) snprintf(trained, sizeof trained, " (the checkpoint was trained on %s)", trained_dir);
            rc = fail(err, sizeof err, NGPT_ERR_ARG, "the model has %d token ids, but %s/%s holds %d characters: not the vocabulary it was "
                                                      "trained on; pass the --dataset or --data_dir of its training data%s", tr->ms.V, dir,
                      tr->charvocab->file_name, tr->charvocab->n, trained);
        }
    }
    if (!rc && tr->charvocab && !chars_still_match(&trained_state, tr->charvocab)) { /* as many characters, other ones */
        char dir[300];
        rc = chars_changed_error(err, sizeof err, path, dataset_dir(&cfg, dir, sizeof dir), tr->charvocab, trained_dir,
                                 "Pass the --dataset or --data_dir of its training data");
    }
    /* the weights, once the vocabulary is known to be theirs (the checks above say more than ngpt_load's own) */
    if (!rc && from_checkpoint) {
        if ((rc = ngpt_load(tr, path))) {
            fail(err, sizeof err, rc, "%s", ngpt_last_error(tr));
            if (!checkpoint_file) sample_checkpoint_hint(path, rc, err, sizeof err); /* cfg.out_dir is the checkpoint's stored one by now */
        } else fprintf(stderr, "sampling %s (step %d)\n", path, tr->step); /* which of out_dir's checkpoints */
    }
    if (!rc && tr->charvocab) {
        size_t nn = 0;
        char msg[NGPT_ERRLEN];
        size_t at = 0;
        if (charvocab_encode(tr->charvocab, start, strlen(start), prompt, prompt_cap, &nn, msg, sizeof msg)) {
            const char *byte = strstr(msg, "at byte ");
            if (settings.start_file[0] && byte && sscanf(byte, "at byte %zu", &at) == 1) { /* where in the file, as an editor counts */
                int line = 1, col = 1;
                for (size_t i = 0; i < at && start[i]; i++) {
                    if (start[i] == '\n') line++, col = 1;
                    else col += (start[i] & 0xC0) != 0x80;
                }
                rc = fail(err, sizeof err, NGPT_ERR_ARG, "start text %s:%d:%d: %s", settings.start_file, line, col, msg);
            } else rc = fail(err, sizeof err, NGPT_ERR_ARG, "start text: %s", msg);
        }
        else if (nn == 0) /* a GPT-2 model starts at <|endoftext|>; characters have no such token */
            rc = fail(err, sizeof err, NGPT_ERR_ARG, "--start is empty: a character model needs at least one character to start from "
                                                      "(the default is a newline)");
        np = (int)nn;
    } else if (!rc) {
        size_t nn = 0;
        /* tokenizer_dir's vocabulary; else the one prepare saved beside the tokens (a dataset prepared with its own
         * --tokenizer_dir, trained without it); else tokenizer_dir's, downloaded */
        const char *vocab_dir = cfg.tokenizer_dir;
        char data[300], saved[600];
        snprintf(saved, sizeof saved, "%.290s/gpt2.tok", dataset_dir(&cfg, data, sizeof data));
        if (!gpt2_vocab_in(cfg.tokenizer_dir) && file_exists(saved)) {
            fprintf(stderr, "note: tokenizer_dir = %s holds no vocabulary: decoding with %s, which prepare saved with the dataset's tokens\n",
                    cfg.tokenizer_dir, saved);
            vocab_dir = data;
        }
        rc = ensure_gpt2_vocab(vocab_dir, err, sizeof err);
        if (!rc) rc = load_gpt2_tokenizer(vocab_dir, &tok, err, sizeof err);
        if (!rc) rc = ngpt_tokenizer_encode(tok, start, strlen(start), 1, prompt, prompt_cap, &nn, err, sizeof err);
        np = (int)nn;
        if (!rc && np == 0) prompt[np++] = ngpt_tokenizer_eot(tok); /* nanoGPT starts an empty prompt at <|endoftext|> */
    }
    int total = np + max_new;
    /* every sample's ids are kept until they are printed: within the machine's memory */
    double out_bytes = (double)num_samples * total * sizeof(int32_t);
    long phys_pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    int32_t *out = NULL;
    if (!rc && phys_pages > 0 && page_size > 0 && out_bytes > (double)phys_pages * page_size)
        rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "num_samples x (prompt + max_new_tokens) = %d x (%d + %d) ids take %.3g GiB, more than this "
                                                     "machine's %.3g GiB of memory: ask for fewer samples or tokens", num_samples, np, max_new,
                  out_bytes / (1 << 30), (double)phys_pages * page_size / (1 << 30));
    if (!rc) out = (int32_t *)malloc((size_t)out_bytes);
    if (!rc && !out)
        rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory for num_samples x (prompt + max_new_tokens) = %d x (%d + %d) ids (%.3g GiB)",
                  num_samples, np, max_new, out_bytes / (1 << 30));
    if (!rc && ngpt_sample(tr, prompt, np, num_samples, max_new, (float)temperature, top_k, (uint64_t)seed, out))
        rc = fail(err, sizeof err, NGPT_ERR_STATE, "%s", ngpt_last_error(tr));
    for (int sidx = 0; !rc && sidx < num_samples; sidx++) {
        const int32_t *ids = out + (size_t)sidx * total;
        for (int i = 0; i < total; i++) {
            if (tr->charvocab) { /* a model trained wider than its characters (vocab_size) may draw ids past them: U+FFFD */
                char b[4];
                size_t len;
                if (charvocab_decode(tr->charvocab, ids + i, 1, b, sizeof b, &len, NULL, 0)) fputs("\xEF\xBF\xBD", stdout);
                else fwrite(b, 1, len, stdout);
            } else {
                size_t len;
                const char *b = ngpt_tokenizer_token(tok, ids[i], &len);
                if (b) fwrite(b, 1, len, stdout);
            }
        }
        printf("\n---------------\n");
    }
    if (rc) fprintf(stderr, "error: %s\n", err);
    free(prompt);
    free(out);
    ngpt_tokenizer_free(tok);
    ngpt_trainer_free(tr);
    return rc ? 1 : 0;
}

/* nanogpt sample [config files] [--key=value ...]: the config files, wherever they are, in their order; the
 * command line's settings override them all */
static int cmd_sample(int argc, char **argv) {
    char err[NGPT_ERRLEN];
    for (int i = 0; i < argc; i++)
        if (single_dash_flag(argv[i], err, sizeof err)) { /* llm.c's -e 4: the flag is the error, not its value */
            fprintf(stderr, "error: %s\n", err);
            return 1;
        }
    int n_files = files_first(argv, argc);
    return sample_with(argc - n_files, argv + n_files, n_files, argv);
}

/* ---- nanogpt export: a checkpoint's weights as an llm.c model file ---- */
static int cmd_export(int argc, char **argv) {
    const char *out = NULL;
    int bf16 = 0;
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    const char *from = NULL; /* --init_from: one checkpoint file, resume (out_dir's newest), or pretrained weights */
    char from_arg[PATH_MAX];
    for (int i = 0; i < argc; i++) {
        char key[128] = "", err[NGPT_ERRLEN];
        if (!strncmp(argv[i], "--", 2) && strchr(argv[i], '=')) arg_key(argv[i], key, sizeof key);
        /* read as train reads them (nanoGPT's configurator: 'out' is out); init_from, a path of any length */
        if (!strcmp(key, "init_from")) from = arg_text(argv[i] + 12, from_arg, sizeof from_arg);
        else if (!strcmp(key, "out_dir") || !strcmp(key, "pretrained_dir")) {
            if (ngpt_config_set(&cfg, key, strchr(argv[i], '=') + 1, err, sizeof err)) { fprintf(stderr, "error: --%s: %s\n", key, err); return 1; }
        }
        else if (!strncmp(argv[i], "--out=", 6)) out = argv[i] + 6;
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else if (!strcmp(key, "bf16") && (!strcmp(argv[i] + 7, "True") || !strcmp(argv[i] + 7, "False"))) bf16 = argv[i][7] == 'T'; /* as a config's bool */
        else {
            fprintf(stderr, "error: export: unknown argument '%s' (valid: --out_dir=DIR or --init_from=CHECKPOINT_FILE|resume|WEIGHTS, "
                            "--out=FILE [--bf16] [--pretrained_dir=DIR])\n", argv[i]);
            return 1;
        }
    }
    if (!out || !*out) { fprintf(stderr, "error: export needs --out=FILE (an llm.c model file; --bf16 for version 5)\n"); return 1; }
    struct stat st;
    if (out[strlen(out) - 1] == '/' || (!stat(out, &st) && S_ISDIR(st.st_mode))) {
        fprintf(stderr, "error: --out=%s is a folder; --out names the file to write (e.g. --out=%s%sgpt2_124M.bin)\n", out, out,
                out[strlen(out) - 1] != '/' ? "/" : "");
        return 1;
    }
    int stream = own_descriptor(out); /* --out=/dev/stdout: the model goes where stdout goes, and holds the model alone */
    FILE *said = stream >= 0 || (!stat(out, &st) && !S_ISREG(st.st_mode)) ? stderr : stdout;
    struct stat err_st;
    if (stream >= 0 && !fstat(stream, &st) && !fstat(2, &err_st) && st.st_dev == err_st.st_dev && st.st_ino == err_st.st_ino) {
        fprintf(stderr, "error: --out=%s: stderr goes to the same file or pipe, so export's messages would be written into the model; "
                        "send stderr elsewhere (2>/dev/null), or name a file with --out\n", out);
        return 1;
    }
    FILE *existing = stream < 0 && !stat(out, &st) && S_ISREG(st.st_mode) && st.st_size > 0 ? fopen(out, "rb") : NULL;
    if (existing) { /* an earlier export is replaced; any other file (a checkpoint, a token shard, notes) is the user's */
        unsigned char head[8] = {0};
        char says[700] = "text";
        KnownFile kind = known_file(head, fread(head, 1, sizeof head, existing), 0);
        int model = kind == KNOWN_LLMC_MODEL, checkpoint = kind == KNOWN_CHECKPOINT;
        rewind(existing);
        if (!model && !checkpoint) binary_file_says(existing, out, says, sizeof says);
        fclose(existing);
        if (checkpoint) { /* its AdamW state and step would be gone, and a resume or sample of its run would fail */
            fprintf(stderr, "error: --out=%s is a nanogpt checkpoint, which export does not replace: --out names a new llm.c model file (e.g. "
                            "--out=gpt2_124M.bin)\n", out);
            return 1;
        }
        if (!model) {
            fprintf(stderr, "error: --out=%s exists and is no llm.c model file (it is %.600s): export replaces only an earlier export; "
                            "remove it first, or name another file\n", out, says);
            return 1;
        }
    }
    char err[NGPT_ERRLEN], path[700] = ""; /* the checkpoint to export, when --init_from names one */
    long long newest;
    if (!from && is_checkpoint_file(cfg.out_dir)) from = cfg.out_dir; /* --out_dir=out/ckpt_000000500.bin */
    if (from && !strcmp(from, "resume")) {
        if (!resume_checkpoint(cfg.out_dir, path, sizeof path)) {
            if (out_dir_file_error(cfg.out_dir, "exports it", err, sizeof err) || default_job_checkpoints(cfg.out_dir, err, sizeof err))
                fprintf(stderr, "error: init_from = resume: %s\n", err);
            else {
                resume_none_error(cfg.out_dir, err, sizeof err);
                fprintf(stderr, "error: %s\n", err);
            }
            return 1;
        }
    } else if (from && is_checkpoint_file(from)) {
        copy_str(path, sizeof path, from);
    } else if (from) { /* pretrained weights (GPT-2 by name, safetensors, an llm.c file) into llm.c's format, or a folder of checkpoints */
        if (holds_checkpoints(from, &newest)) {
            fprintf(stderr, "error: --init_from=%s is a folder of checkpoints: --out_dir=%s exports its best\n", from, from);
            return 1;
        }
        ModelShape ms;
        float *params = NULL;
        int rc = pretrained_load(from, cfg.pretrained_dir, &ms, &params, err, sizeof err);
        if (!rc) rc = llmc_write_model(out, &ms, params, bf16, err, sizeof err);
        if (rc) fprintf(stderr, "error: %s\n", err);
        else fprintf(said, "wrote %s (llm.c version %d, the pretrained weights of %s)\n", out, bf16 ? 5 : 3, from);
        free(params);
        return rc ? 1 : 0;
    }
    if (path[0]) {
        if (checkpoint_read_config(path, &cfg, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
        copy_str(cfg.init_from, sizeof cfg.init_from, "scratch");
    } else if (checkpoint_to_read(cfg.out_dir, path, sizeof path, &cfg, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    ngpt_trainer *tr;
    if (trainer_create(&cfg, &opt, 1, &tr, err, sizeof err)) { fprintf(stderr, "error: %s\n", err); return 1; }
    int rc = ngpt_load(tr, path) ? fail(err, sizeof err, NGPT_ERR_FORMAT, "%s", ngpt_last_error(tr)) : NGPT_OK;
    float *params = rc ? NULL : (float *)malloc(tr->plan.nparams * sizeof(float));
    if (!rc && !params) rc = fail(err, sizeof err, NGPT_ERR_NOMEM, "out of host memory");
    if (!rc) {
        copy_master_out(tr, params);
        rc = llmc_write_model(out, &tr->ms, params, bf16, err, sizeof err);
    }
    if (rc) fprintf(stderr, "error: %s\n", err);
    else fprintf(said, "wrote %s (llm.c version %d, step %d of %s)\n", out, bf16 ? 5 : 3, tr->step, path);
    free(params);
    ngpt_trainer_free(tr);
    return rc ? 1 : 0;
}

/* ---- nanogpt plot OUT_DIR: out_dir/log.jsonl -> out_dir/loss.svg (train loss per step, and the train
 * and val losses of each evaluation), a self-contained SVG ---- */

typedef struct {
    double *x, *y;
    size_t n, cap;
} Series;

static int series_add(Series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *nx = (double *)realloc(s->x, cap * sizeof *nx), *ny;
        if (!nx) return -1;
        s->x = nx;
        ny = (double *)realloc(s->y, cap * sizeof *ny);
        if (!ny) return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n++] = y;
    return 0;
}

/* drops the points at x >= from (a series is in ascending x) */
static void series_cut(Series *s, double from) {
    while (s->n && s->x[s->n - 1] >= from) s->n--;
}

static void series_free(Series *s) {
    free(s->x);
    free(s->y);
}

/* the spacing of about five ticks over range: 1, 2 or 5 x 10^k */
static double tick_spacing(double range) {
    double raw = range / 5, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* the number after "key": in a JSON line; NAN when the key is missing or its value is not a number (null:
 * a non-finite value) */
static double json_number(const char *line, const char *key) {
    char pat[64], *end;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (!(*p == '-' || (*p >= '0' && *p <= '9'))) return NAN; /* null, or anything else JSON would not call a number */
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

static void svg_polyline(FILE *f, const Series *s, double x0, double x1, double y0, double y1, const char *color, int dots) {
    const double W = 720, H = 400, L = 70, T = 20, PW = W - L - 20, PH = H - T - 50;
    if (!dots) fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.2' points='", color);
    for (size_t i = 0; i < s->n; i++) {
        double px = L + (s->x[i] - x0) / (x1 - x0) * PW, py = T + PH - (s->y[i] - y0) / (y1 - y0) * PH;
        if (dots) fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", px, py, color);
        else fprintf(f, "%.1f,%.1f ", px, py);
    }
    if (!dots) fprintf(f, "'/>\n");
}

static int cmd_plot(int argc, char **argv) {
    if (argc != 1) { fprintf(stderr, "usage: nanogpt plot OUT_DIR or --out_dir=OUT_DIR (reads OUT_DIR/log.jsonl, writes OUT_DIR/loss.svg)\n"); return 2; }
    const char *dir = argv[0];
    ngpt_config c; /* --out_dir=DIR read as sample and export read it ('out' is out) */
    char err[NGPT_ERRLEN];
    if (!strncmp(argv[0], "--out_dir=", 10)) {
        ngpt_config_defaults(&c);
        if (ngpt_config_set(&c, "out_dir", argv[0] + 10, err, sizeof err)) { fprintf(stderr, "error: --out_dir: %s\n", err); return 1; }
        dir = c.out_dir;
    }
    char in[600], out[600];
    snprintf(in, sizeof in, "%.580s/log.jsonl", dir);
    snprintf(out, sizeof out, "%.580s/loss.svg", dir);
    FILE *f = fopen(in, "r");
    if (!f) { fprintf(stderr, "error: cannot open %s: %s\n", in, strerror(errno)); return 1; }
    Series tr = {0}, ev_train = {0}, ev_val = {0};
    int bad = 0;
    /* the log is appended to by every run: a run resumed from a checkpoint logs again from that checkpoint's
     * step, and its lines replace the earlier run's from there on. Within a run the steps never go back and
     * neither kind of line repeats a step. */
    double last = -1, last_of[2] = {-1, -1}; /* the step of the previous line, and of the previous line of each kind */
    long line_no = 0, skipped = 0, first_skipped = 0; /* lines no run logs (edited, or cut short by a crash) */
    char *line = NULL;
    size_t line_cap = 0;
    for (ssize_t len; (len = getline(&line, &line_cap, f)) > 0;) {
        line_no++;
        int whole = line[len - 1] == '\n' && strlen(line) == (size_t)len; /* ends in a newline, holds no NUL */
        double step = json_number(line, "step");
        int eval = strstr(line, "\"val_loss\":") != NULL;
        if (!whole || !isfinite(step) || step < 0 || step != floor(step) || (!eval && !strstr(line, "\"loss\":"))) {
            if (!skipped++) first_skipped = line_no;
            continue;
        }
        if (strstr(line, "\"eval_only\": true")) continue; /* an evaluation of a model, maybe from elsewhere: no run's curve */
        if (step < last || step <= last_of[eval]) {
            series_cut(&tr, step);
            series_cut(&ev_train, step);
            series_cut(&ev_val, step);
            last_of[0] = last_of[1] = -1;
        }
        last = last_of[eval] = step;
        /* null (a non-finite value) is no point */
        double loss = json_number(line, "loss"), tl = json_number(line, "train_loss"), vl = json_number(line, "val_loss");
        if (!eval && !isnan(loss)) bad |= series_add(&tr, step, loss);
        if (eval && !isnan(tl)) bad |= series_add(&ev_train, step, tl);
        if (eval && !isnan(vl)) bad |= series_add(&ev_val, step, vl);
    }
    const int read_failed = !feof(f); /* getline stopped before the end: a read error, or no memory for a line */
    free(line);
    fclose(f);
    if (skipped)
        fprintf(stderr, "note: %s: %ld of its %ld lines left out, the first line %ld: no line training writes (a whole step, at least 0, "
                        "with its loss, or an evaluation's losses, ending in a newline): edited, or cut short by a crash\n",
                in, skipped, line_no, first_skipped);
    int rc = 1;
    FILE *o = NULL;
    if (read_failed) fprintf(stderr, "error: reading %s failed after its line %ld\n", in, line_no);
    else if (bad) fprintf(stderr, "error: out of host memory reading %s\n", in);
    else if (tr.n + ev_val.n == 0) fprintf(stderr, "error: %s holds no losses\n", in);
    else if (!(o = fopen(out, "w"))) fprintf(stderr, "error: cannot write %s: %s\n", out, strerror(errno));
    if (!o) goto done;
    double x0 = 0, x1 = 1, y0 = 1e30, y1 = -1e30;
    const Series *all[3] = {&tr, &ev_train, &ev_val};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < all[k]->n; i++) {
            x1 = fmax(x1, all[k]->x[i]);
            if (isfinite(all[k]->y[i])) { y0 = fmin(y0, all[k]->y[i]); y1 = fmax(y1, all[k]->y[i]); }
        }
    /* a span that doubles can step through in ticks (losses equal to 1e-16 gave ticks that never advanced) */
    if (y1 <= y0) y1 = y0 + 1;
    else if (y1 - y0 < 1e-6 * fmax(1.0, fabs(y0))) y1 = y0 + 1e-6 * fmax(1.0, fabs(y0));
    double pad = 0.05 * (y1 - y0);
    y0 -= pad;
    y1 += pad;
    fprintf(o, "<svg xmlns='http://www.w3.org/2000/svg' width='720' height='400' font-family='sans-serif' font-size='12'>\n"
               "<rect width='720' height='400' fill='white'/>\n"
               "<rect x='70' y='20' width='630' height='330' fill='none' stroke='#888'/>\n");
    /* ticks at round values: steps at a whole multiple of 1, 2 or 5 x 10^k, losses with the decimals their spacing needs */
    double sx = fmax(1.0, tick_spacing(x1 - x0)), sy = tick_spacing(y1 - y0);
    int decimals = (int)fmax(0.0, -floor(log10(sy) + 1e-9));
    /* tick k at first + k * spacing: about five of each, at most 12 (counted, whatever the doubles do) */
    double first_y = ceil(y0 / sy - 1e-9) * sy;
    for (int k = 0; k < 12 && first_y + k * sy <= y1 + 1e-9 * sy; k++) {
        double yv = first_y + k * sy, py = 20 + 330 - 330.0 * (yv - y0) / (y1 - y0);
        fprintf(o, "<line x1='66' y1='%.1f' x2='700' y2='%.1f' stroke='#eee'/><text x='62' y='%.1f' text-anchor='end'>%.*f</text>\n", py, py,
                py + 4, decimals, yv);
    }
    for (int k = 0; k < 12 && x0 + k * sx <= x1 + 1e-9; k++)
        fprintf(o, "<text x='%.1f' y='368' text-anchor='middle'>%.0f</text>\n", 70 + 630.0 * k * sx / (x1 - x0), x0 + k * sx);
    fprintf(o, "<text x='385' y='390' text-anchor='middle'>step</text>\n"
               "<text x='16' y='185' transform='rotate(-90 16 185)' text-anchor='middle'>loss</text>\n");
    svg_polyline(o, &tr, x0, x1, y0, y1, "#9ab", 0);
    svg_polyline(o, &ev_train, x0, x1, y0, y1, "#1f77b4", 1);
    svg_polyline(o, &ev_val, x0, x1, y0, y1, "#d62728", 1);
    if (ev_val.n > 1) svg_polyline(o, &ev_val, x0, x1, y0, y1, "#d62728", 0);
    fprintf(o, "<text x='560' y='40' fill='#9ab'>train (each step)</text><text x='560' y='56' fill='#1f77b4'>train (eval)</text>"
               "<text x='560' y='72' fill='#d62728'>val (eval)</text>\n</svg>\n");
    if (fclose(o)) fprintf(stderr, "error: writing %s failed\n", out);
    else {
        printf("wrote %s (%zu step%s, %zu evaluation%s)\n", out, tr.n, tr.n == 1 ? "" : "s", ev_val.n, ev_val.n == 1 ? "" : "s");
        rc = 0;
    }
done:
    series_free(&tr);
    series_free(&ev_train);
    series_free(&ev_val);
    return rc;
}

static int cmd_info(int argc, char **argv) {
    char line[512];
    if (argc > 0) {
        fprintf(stderr, "error: argument '%s': info takes no arguments\n", argv[0]);
        return 1;
    }
    printf("nanogpt %s\n", NGPT_VERSION);
#ifdef NGPT_CUDA
    const char *cuda = "with the CUDA backend";
#else
    const char *cuda = "CPU only";
#endif
#if defined(__AVX512F__)
    const char *simd = "AVX-512";
#elif defined(__AVX2__)
    const char *simd = "AVX2";
#else
    const char *simd = "no AVX2 (build with -march=native for speed)";
#endif
#if defined(__GNUC__) && !defined(__clang__)
    const char *compiler = "gcc "; /* clang's __VERSION__ names itself */
#else
    const char *compiler = "";
#endif
    printf("build: %s, compiled by %s%s, CPU kernels %s\n", cuda, compiler, __VERSION__, simd);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    char total[32] = "unknown", avail[32];
    if (pages > 0 && psize > 0) fmt_bytes(total, sizeof total, (double)pages * (double)psize);
    int limited, online, cpus = usable_cpus(&online);
    fmt_bytes(avail, sizeof avail, host_memory_available_why(&limited) / 0.9);
    char of[64] = "";
    if (cpus < online) snprintf(of, sizeof of, " this process may use (of %d online)", online);
    printf("cpu: %d core%s%s, memory %s physical, %s available%s; float32 only (no bf16: dtype bfloat16/float16 are for the GPU, the CPU "
           "backend computes and stores float32)\n", cpus, cpus == 1 ? "" : "s", of, total, avail, limited ? " (what its cgroup's memory limit leaves)" : "");
    int rc = ngpt_cuda_describe(line, sizeof line);
    printf("%s\n", line);
    return rc == NGPT_OK || rc == NGPT_ERR_DEVICE ? 0 : 1;
}

int main(int argc, char **argv) {
    static const char *const commands[] = {"train", "plan", "bench", "prepare", "sample", "export", "plot", "info", "help"};
    /* past a file-size limit (ulimit -f) a write fails with EFBIG instead of killing the process unannounced:
     * a checkpoint save then reports it, removes its temporary file and keeps the previous checkpoint */
    signal(SIGXFSZ, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* piped into a log, each line in its place among stderr's */
    /* every kernel loaded when CUDA starts, before the free memory is measured, not at its first launch in
     * the middle of training (CUDA's default, lazy loading, takes device memory then); a user's setting stays */
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    for (int i = 2; i < argc; i++) /* `nanogpt train --help`: the usage, not an argument error (but -h 1 is llm.c's HellaSwag flag) */
        if (!strcmp(argv[i], "--help") || (!strcmp(argv[i], "-h") && !(i + 1 < argc && isdigit((unsigned char)argv[i + 1][0])))) {
            int known = 0;
            for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) known |= !strcmp(cmd, commands[k]);
            if (known && strcmp(cmd, "help")) usage_of(cmd);
            else usage(stdout);
            return 0;
        }
    for (int i = 2; i + 1 < argc; i++) { /* argparse's `--batch_size 4`: a config key (or sample's setting) apart from its value */
        const char *a = argv[i];
        int setting = !strncmp(a, "--", 2) && !strchr(a, '=') && strncmp(argv[i + 1], "--", 2) &&
                      (config_find(a + 2) || (!strcmp(cmd, "sample") && sample_setting(NULL, a + 2, NULL, NULL, 0) != CONFIG_NOT_OURS));
        if (setting && strcmp(cmd, "prepare")) {
            fprintf(stderr, "error: arguments '%s %s': a setting is one argument, --key=value: %s=%s\n", a, argv[i + 1], a, argv[i + 1]);
            return 1;
        }
    }
    if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "prepare")) return cmd_prepare(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) { /* `info` says more */
        if (argc > 2) {
            fprintf(stderr, "error: argument '%s': %s takes no arguments (`nanogpt info` says the version and the devices)\n", argv[2], cmd);
            return 1;
        }
        printf("nanogpt %s\n", NGPT_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "plot")) return cmd_plot(argc - 2, argv + 2);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc - 2, argv + 2);
    if (!strcmp(cmd, "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        int topic_is_command = 0;
        for (size_t i = 0; argc > 2 && i < sizeof commands / sizeof commands[0]; i++) topic_is_command |= !strcmp(argv[2], commands[i]);
        if (argc > 3 && (topic_is_command || !strcmp(argv[2], "config"))) {
            fprintf(stderr, "error: help takes one topic (a command, or config), not '%s' after '%s': `nanogpt help %s`\n", argv[3], argv[2], argv[2]);
            return 2;
        }
        if (argc > 2 && !strcmp(argv[2], "config")) print_config_keys();
        else if (argc > 2 && topic_is_command && strcmp(argv[2], "help")) usage_of(argv[2]);
        else if (argc <= 2 || topic_is_command) usage(stdout);
        else {
            fprintf(stderr, "error: no help on '%s': `nanogpt help` shows the commands, `nanogpt help config` the config keys\n", argv[2]);
            return 2;
        }
        return 0;
    }
    static const char *const other_names[][2] = { /* what users of other trainers type, and nanogpt's way to do it */
        {"eval", "`nanogpt train --eval_only=True` evaluates (with --init_from=resume, gpt2 or a model file)"},
        {"evaluate", "`nanogpt train --eval_only=True` evaluates (with --init_from=resume, gpt2 or a model file)"},
        {"generate", "`nanogpt sample` generates text"},
        {"finetune", "`nanogpt train --init_from=gpt2` fine-tunes (data/shakespeare/finetune.cfg is nanoGPT's finetune_shakespeare)"},
        {"resume", "`nanogpt train --init_from=resume` resumes out_dir's run"}};
    for (size_t i = 0; i < sizeof other_names / sizeof other_names[0]; i++)
        if (!strcmp(cmd, other_names[i][0])) {
            fprintf(stderr, "error: unknown command '%s': %s\n", cmd, other_names[i][1]);
            return 2;
        }
    const char *closest = NULL;
    size_t closest_d = SIZE_MAX;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        size_t d = edit_distance(cmd, commands[i]);
        if (d < closest_d) { closest_d = d; closest = commands[i]; }
    }
    if (closest_d <= 2) fprintf(stderr, "error: unknown command '%s' (did you mean '%s'?)\n", cmd, closest);
    else fprintf(stderr, "error: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
#endif /* NGPT_NO_MAIN */
