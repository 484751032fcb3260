/* nanogpt.c - everything of nanogpt that is not a GPU kernel, in one translation unit.
 *
 * Sections, in dependency order: utilities, thread pool, configuration, model shape, memory plan, CPU
 * backend, model graph, optimizer, data, trainer, command line. The public API is declared in nanogpt.h;
 * everything else is static. Build with ./build.sh; define NGPT_NO_MAIN to embed this file or test it.
 *
 * Dimension letters: B batch (sequences in a micro-batch), T time, C channels, L layers, NH heads,
 * hs head size (C/NH), V vocabulary, Vp vocabulary padded to a multiple of 64, N rows (B*T or a chunk).
 */
#define _GNU_SOURCE
#include "nanogpt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ======================================================================================================
 * Utilities
 * ==================================================================================================== */

#define NGPT_ERRLEN 512
#define ALIGN_UP(x, a) (((x) + (size_t)(a) - 1) / (size_t)(a) * (size_t)(a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

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

/* Human-readable bytes: "1.23 GiB". Writes into buf and returns it. */
static const char *fmt_bytes(char *buf, size_t n, double bytes) {
    if (bytes >= GiB) snprintf(buf, n, "%.2f GiB", bytes / GiB);
    else if (bytes >= MiB) snprintf(buf, n, "%.1f MiB", bytes / MiB);
    else if (bytes >= 1024.0) snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, n, "%.0f B", bytes);
    return buf;
}

/* Parses "2.68GiB", "512MiB", "3GB", "1e9" into bytes. Returns 0 on success. */
static int parse_bytes(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1;
    while (*end == ' ') end++;
    double mul = 1;
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

/* Box-Muller on the shared counter-based hash: the same numbers on every backend. */
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

static void *pool_worker(void *p) {
    PoolWorkerArg *wa = (PoolWorkerArg *)p;
    Pool *pool = wa->pool;
    int index = wa->index;
    unsigned long seen = 0;
    for (;;) {
        unsigned long gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen) {
            if (atomic_load(&pool->quit)) return NULL;
            if (++spins < 20000) { cpu_relax(); continue; }
            pthread_mutex_lock(&pool->mu);
            pool->sleepers++;
            while (atomic_load(&pool->generation) == seen && !atomic_load(&pool->quit))
                pthread_cond_wait(&pool->wake, &pool->mu);
            pool->sleepers--;
            pthread_mutex_unlock(&pool->mu);
            spins = 0;
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
    while (atomic_load_explicit(&pool->remaining, memory_order_acquire) > 0) cpu_relax();
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

static int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ======================================================================================================
 * Configuration: one table drives parsing, validation, printing and "did you mean" suggestions.
 * ==================================================================================================== */

enum { KEY_INT, KEY_FLOAT, KEY_BOOL, KEY_STR, KEY_BYTES, KEY_I64, KEY_IGNORED };

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
    CK(log_interval, KEY_INT, 1, 1e9, NULL, "print the training loss every this many steps"),
    CK(eval_iters, KEY_INT, 1, 1e9, NULL, "batches per split in each evaluation"),
    CK(eval_only, KEY_BOOL, 0, 1, NULL, "evaluate once and exit"),
    CK(always_save_checkpoint, KEY_BOOL, 0, 1, NULL, "save at every evaluation, not only on improvement"),
    CK(init_from, KEY_STR, 0, 0, NULL, "scratch, resume, or gpt2/gpt2-medium/gpt2-large/gpt2-xl"),
    CK(dataset, KEY_STR, 0, 0, NULL, "data/<dataset>/ holds train.bin and val.bin"),
    CK(data_dir, KEY_STR, 0, 0, NULL, "explicit data folder (overrides data/<dataset>)"),
    CK(input, KEY_STR, 0, 0, NULL, "text file the default dataset is prepared from"),
    CK(gradient_accumulation_steps, KEY_INT, 1, 1e6, NULL, "micro-steps per optimizer step"),
    CK(batch_size, KEY_INT, 1, 1e6, NULL, "sequences per micro-step (the planner may split it)"),
    CK(block_size, KEY_INT, 1, 1048576, NULL, "sequence length T"),
    CK(n_layer, KEY_INT, 1, 1024, NULL, "transformer blocks"),
    CK(n_head, KEY_INT, 1, 1024, NULL, "attention heads"),
    CK(n_embd, KEY_INT, 1, 65536, NULL, "channels"),
    CK(dropout, KEY_FLOAT, 0, 0.99, NULL, "dropout probability"),
    CK(bias, KEY_BOOL, 0, 1, NULL, "biases in Linear and LayerNorm layers"),
    CK(vocab_size, KEY_INT, 0, 16777216, NULL, "0 = from the dataset's meta.bin, else GPT-2's 50257"),
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
    CK(device, KEY_STR, 0, 0, "auto|cpu|cuda", "where to train"),
    CK(dtype, KEY_STR, 0, 0, "auto|float32|bfloat16|float16", "storage precision on the GPU"),
    CK(compile, KEY_BOOL, 0, 1, NULL, "accepted for nanoGPT configs; no effect"),
    CK(seed, KEY_I64, 0, 9.2e18, NULL, "random seed"),
    CK(max_memory, KEY_BYTES, 0, 1e15, NULL, "memory budget, e.g. 2.68GiB (0 = what is free)"),
    CK(micro_batch, KEY_INT, 0, 1e6, NULL, "pin the micro-batch (0 = the planner chooses)"),
    CK(recompute, KEY_INT, -1, 2, NULL, "-1 auto, 0 none, 1 GELU, 2 GELU and LayerNorm"),
    CK(logits_chunk, KEY_INT, 0, 1 << 30, NULL, "rows of logits per chunk (0 = the planner chooses)"),
    CK(threads, KEY_INT, 0, POOL_MAX_THREADS, NULL, "CPU threads (0 = one per core)"),
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
    memset(c, 0, sizeof *c);
    copy_str(c->out_dir, sizeof c->out_dir, "out");
    c->eval_interval = 2000;
    c->log_interval = 1;
    c->eval_iters = 200;
    c->always_save_checkpoint = 1;
    copy_str(c->init_from, sizeof c->init_from, "scratch");
    copy_str(c->dataset, sizeof c->dataset, "openwebtext");
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
    c->compile = 1;
    c->seed = 1337;
    c->recompute = -1;
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

static const ConfigKey *config_find(const char *key) {
    for (size_t i = 0; i < N_CONFIG_KEYS; i++)
        if (!strcmp(config_keys[i].name, key)) return &config_keys[i];
    return NULL;
}

static const char *config_closest(const char *key) {
    const char *best = NULL;
    size_t bestd = SIZE_MAX;
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        size_t d = edit_distance(key, config_keys[i].name);
        if (strstr(config_keys[i].name, key) && strlen(key) >= 3) d = MIN(d, 2);
        if (d < bestd) { bestd = d; best = config_keys[i].name; }
    }
    return best;
}

/* Strips Python-style quotes and surrounding blanks from a value into buf. */
static const char *config_unquote(const char *v, char *buf, size_t cap) {
    while (isspace((unsigned char)*v)) v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1])) n--;
    if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0]) { v++; n -= 2; }
    if (n >= cap) n = cap - 1;
    memcpy(buf, v, n);
    buf[n] = 0;
    return buf;
}

/* Parses a number, allowing products such as "5 * 8" as nanoGPT configs write them. */
static int parse_number(const char *s, double *out) {
    double v = 1;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        double f = strtod(p, &end);
        if (end == p || errno == ERANGE) return -1;
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

int ngpt_config_set(ngpt_config *cfg, const char *key, const char *value, char *err, size_t errlen) {
    const ConfigKey *k = config_find(key);
    if (!k) {
        return fail(err, errlen, NGPT_ERR_ARG, "unknown key '%s' (did you mean '%s'?); `nanogpt help config` lists them all",
                    key, config_closest(key));
    }
    char buf[512];
    const char *v = config_unquote(value, buf, sizeof buf);
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
        else return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be True or False (or 1/0)", key, v);
        *(int *)field = b;
        return NGPT_OK;
    }
    case KEY_BYTES: {
        double bytes;
        if (parse_bytes(v, &bytes) || bytes > k->hi)
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be a size such as 2.68GiB, 512MiB or 0 (no cap)", key, v);
        *(double *)field = bytes;
        return NGPT_OK;
    }
    default: {
        double x;
        int is_int = k->type == KEY_INT || k->type == KEY_I64;
        if (parse_number(v, &x) || (is_int && x != floor(x)) || x < k->lo || x > k->hi) {
            if (is_int)
                return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be an integer in [%.0f, %.0f]", key, v, k->lo, k->hi);
            return fail(err, errlen, NGPT_ERR_ARG, "%s = '%s': must be a number in [%g, %g]", key, v, k->lo, k->hi);
        }
        if (k->type == KEY_INT) *(int *)field = (int)x;
        else if (k->type == KEY_I64) *(long long *)field = (long long)x;
        else *(double *)field = x;
        return NGPT_OK;
    }
    }
}

int ngpt_config_load(ngpt_config *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open config file %s: %s", path, strerror(errno));
    char line[1024], msg[NGPT_ERRLEN];
    int lineno = 0, rc = NGPT_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d: line longer than %zu characters", path, lineno, sizeof line - 2);
            break;
        }
        /* cut a comment that is not inside quotes */
        char quote = 0;
        for (char *p = line; *p; p++) {
            if (quote) { if (*p == quote) quote = 0; }
            else if (*p == '\'' || *p == '"') quote = *p;
            else if (*p == '#') { *p = 0; break; }
        }
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p) continue;
        char *eq = strchr(p, '=');
        if (!eq) {
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s:%d: expected `key = value`, found '%.60s'", path, lineno, p);
            break;
        }
        char *kend = eq;
        while (kend > p && isspace((unsigned char)kend[-1])) kend--;
        *kend = 0;
        if ((rc = ngpt_config_set(cfg, p, eq + 1, msg, sizeof msg))) {
            fail(err, errlen, rc, "%s:%d: %s", path, lineno, msg);
            break;
        }
    }
    if (!rc && ferror(f)) rc = fail(err, errlen, NGPT_ERR_IO, "error reading %s: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

void ngpt_config_print(const ngpt_config *cfg, FILE *f) {
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        const ConfigKey *k = &config_keys[i];
        const char *field = (const char *)cfg + k->offset;
        switch (k->type) {
        case KEY_INT: fprintf(f, "%s = %d\n", k->name, *(const int *)field); break;
        case KEY_I64: fprintf(f, "%s = %lld\n", k->name, *(const long long *)field); break;
        case KEY_FLOAT: fprintf(f, "%s = %.9g\n", k->name, *(const double *)field); break;
        case KEY_BOOL: fprintf(f, "%s = %s\n", k->name, *(const int *)field ? "True" : "False"); break;
        case KEY_STR: fprintf(f, "%s = '%s'\n", k->name, field); break;
        case KEY_BYTES: fprintf(f, "%s = %.0f\n", k->name, *(const double *)field); break;
        default: break;
        }
    }
}

/* Cross-field checks, run once before a trainer is made. */
static int config_validate(const ngpt_config *c, char *err, size_t errlen) {
    if (c->n_embd % c->n_head)
        return fail(err, errlen, NGPT_ERR_ARG, "n_embd = %d is not divisible by n_head = %d (valid n_head: divisors of %d)",
                    c->n_embd, c->n_head, c->n_embd);
    if (c->decay_lr && c->lr_decay_iters < c->warmup_iters)
        return fail(err, errlen, NGPT_ERR_ARG, "lr_decay_iters = %d is below warmup_iters = %d", c->lr_decay_iters, c->warmup_iters);
    if (c->min_lr > c->learning_rate && c->decay_lr)
        return fail(err, errlen, NGPT_ERR_ARG, "min_lr = %g is above learning_rate = %g", c->min_lr, c->learning_rate);
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
enum { RECOMPUTE_NONE = 0, RECOMPUTE_GELU = 1, RECOMPUTE_GELU_LN = 2 };

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

typedef struct {
    int B;                     /* sequences */
    int training;              /* keeps every layer's activations and the backward buffers */
    int slots[N_BATCH_BUFS];   /* per-layer buffers: how many layer slots (1 = reused by every layer) */
    size_t slot_bytes[N_BATCH_BUFS];
    size_t off[N_BATCH_BUFS], bytes[N_BATCH_BUFS]; /* from the start of the batch region */
    size_t end;
} BatchLayout;

typedef struct {
    ModelShape m;
    int T;
    int batch_size, grad_accum; /* as the user asked: batch_size * grad_accum sequences per step */
    int dtype;                  /* NGPT_DTYPE_* of params/grads/activations */
    int device;                 /* DEV_BACKEND_* */
    int nthreads;               /* CPU scratch is per thread */
    double budget;              /* bytes the arenas may take (CPU: device + host) */
    int pin_micro_batch, pin_recompute, pin_chunk; /* 0 / -1 / 0 = free */
    long long eval_seqs;        /* sequences per evaluation of one split (eval_iters * batch_size) */
} PlanRequest;

typedef struct {
    PlanRequest req;
    int fits;
    /* decisions */
    int micro_batch, grad_accum, recompute, logits_chunk, eval_micro_batch, moments_dtype;
    int eval_chunk;
    /* parameters */
    size_t param_off[N_PARAM_TENSORS], param_len[N_PARAM_TENSORS]; /* elements */
    size_t nparams;        /* real parameters */
    size_t nparams_padded; /* elements of the parameter block, with alignment gaps */
    /* device arena */
    size_t act_bytes, moment_bytes;
    size_t off_params, off_grads, off_master, off_m, off_v, off_region;
    size_t region_bytes, device_bytes;
    BatchLayout train, eval;
    /* host arena */
    size_t host_off[N_HOST_BUFS], host_bytes_of[N_HOST_BUFS], host_bytes;
    double cat_bytes[N_CATS];
} Plan;

static size_t dtype_bytes(int dtype) { return dtype == NGPT_DTYPE_F32 ? 4 : 2; }

/* Device scratch of the CPU backend: per thread, a packed GEMM panel, attention rows and LayerNorm
 * partial sums. */
#define CPU_GEMM_KC 256
#define CPU_GEMM_NR 16
static size_t cpu_scratch_bytes(const ngpt_shape *s, int nthreads) {
    size_t per_thread = ALIGN_UP((size_t)CPU_GEMM_KC * CPU_GEMM_NR * sizeof(float), 64) +
                        ALIGN_UP((size_t)2 * s->C * sizeof(float), 64) +
                        ALIGN_UP((size_t)2 * s->T * sizeof(float), 64);
    return (size_t)MAX(nthreads, 1) * per_thread + 64;
}

/* Device scratch the CUDA backend may use (its scratch_bytes must not exceed this; checked at start). */
static size_t cuda_scratch_bytes(const ngpt_shape *s) {
    size_t BT = (size_t)s->B * s->T, C = (size_t)s->C;
    return ALIGN_UP(BT * sizeof(float) * 2, 256) +                      /* per-row temporaries */
           ALIGN_UP((size_t)s->B * s->NH * s->T * sizeof(float), 256) + /* attention D = rowsum(dO*O) */
           ALIGN_UP((size_t)1024 * 4 * C * sizeof(float), 256) +        /* dbias / LayerNorm partial sums */
           ALIGN_UP((size_t)1024 * 2 * C * sizeof(float), 256) +
           ALIGN_UP((size_t)65536 * sizeof(double), 256);               /* reductions */
}

static size_t plan_scratch(const PlanRequest *r, int B, int chunk) {
    ngpt_shape s = {B, r->T, r->m.C, r->m.NH, r->m.L, r->m.Vp, chunk};
    return r->device == DEV_BACKEND_CUDA ? cuda_scratch_bytes(&s) : cpu_scratch_bytes(&s, r->nthreads);
}

static void layout_batch(BatchLayout *lay, const PlanRequest *r, int B, int training, int recompute, int chunk, size_t act) {
    size_t BT = (size_t)B * r->T, C = (size_t)r->m.C, L = (size_t)r->m.L;
    memset(lay, 0, sizeof *lay);
    lay->B = B;
    lay->training = training;
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
    per_slot[B_LSE] = (size_t)B * r->m.NH * r->T * 4;
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
    per_slot[B_SCRATCH] = plan_scratch(r, B, chunk);
    if (training) {
        slots[B_RES] = (int)L + 1;
        slots[B_RES_MID] = slots[B_LN1_STATS] = slots[B_QKV] = slots[B_ATTY] = slots[B_LSE] = (int)L;
        slots[B_LN2_STATS] = slots[B_FCH] = (int)L;
        slots[B_LN1] = slots[B_LN2] = recompute >= RECOMPUTE_GELU_LN ? 1 : (int)L;
        slots[B_GELU] = recompute >= RECOMPUTE_GELU ? 1 : (int)L;
    } else {
        slots[B_RES] = 2; /* ping-pong between layers */
    }
    size_t off = 0;
    for (int i = 0; i < N_BATCH_BUFS; i++) {
        lay->slots[i] = slots[i];
        lay->slot_bytes[i] = ALIGN_UP(per_slot[i], ARENA_ALIGN);
        lay->off[i] = off;
        lay->bytes[i] = lay->slot_bytes[i] * (size_t)slots[i];
        off += lay->bytes[i];
    }
    lay->end = off;
}

static int buf_category(int i, int training) {
    switch (i) {
    case B_TOKENS: case B_TARGETS: case B_BUCKETS: case B_LOSSES: return CAT_BATCH;
    case B_LOGITS: return CAT_LOGITS;
    case B_SCRATCH: return CAT_SCRATCH;
    case B_TMP: case B_DRES: case B_DBIG: case B_DATT: return CAT_WORK;
    default: return training ? CAT_ACTS : CAT_WORK;
    }
}

static int default_chunk(const PlanRequest *r, int small) {
    if (small) return 128;
    return r->device == DEV_BACKEND_CUDA ? 2048 : 512;
}

/* Lays out everything for one choice; returns the device bytes (CPU: device + host). */
static double plan_layout(Plan *p, const PlanRequest *r, int B, int recompute, int chunk_cap, int moments_dtype) {
    memset(p, 0, sizeof *p);
    p->req = *r;
    p->micro_batch = B;
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
    p->off_params = a; a += ALIGN_UP(np * p->act_bytes, ARENA_ALIGN);
    p->off_grads = a;  a += ALIGN_UP(np * p->act_bytes, ARENA_ALIGN);
    p->off_master = a; a += mixed ? ALIGN_UP(np * 4, ARENA_ALIGN) : 0;
    p->off_m = a;      a += ALIGN_UP(np * p->moment_bytes, ARENA_ALIGN);
    p->off_v = a;      a += ALIGN_UP(np * p->moment_bytes, ARENA_ALIGN);
    p->off_region = a;
    p->cat_bytes[CAT_PARAMS] = (double)(p->off_grads - p->off_params);
    p->cat_bytes[CAT_GRADS] = (double)(p->off_master - p->off_grads);
    p->cat_bytes[CAT_MASTER] = (double)(p->off_m - p->off_master);
    p->cat_bytes[CAT_MOMENTS] = (double)(p->off_region - p->off_m);

    size_t BT = (size_t)B * r->T;
    p->logits_chunk = (int)MIN((size_t)chunk_cap, BT);
    layout_batch(&p->train, r, B, 1, recompute, p->logits_chunk, p->act_bytes);
    p->region_bytes = p->train.end;
    for (int i = 0; i < N_BATCH_BUFS; i++) p->cat_bytes[buf_category(i, 1)] += (double)p->train.bytes[i];

    /* eval: the largest micro-batch whose forward-only layout fits in the training region */
    long long cap = MAX(r->eval_seqs, (long long)B);
    int lo = B, hi = (int)MIN(cap, (long long)1 << 20);
    BatchLayout ev;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        int ch = (int)MIN((size_t)chunk_cap, (size_t)mid * r->T);
        layout_batch(&ev, r, mid, 0, RECOMPUTE_NONE, ch, p->act_bytes);
        if (ev.end <= p->region_bytes) lo = mid; else hi = mid - 1;
    }
    p->eval_micro_batch = lo;
    p->eval_chunk = (int)MIN((size_t)chunk_cap, (size_t)lo * r->T);
    layout_batch(&p->eval, r, lo, 0, RECOMPUTE_NONE, p->eval_chunk, p->act_bytes);

    p->device_bytes = p->off_region + p->region_bytes;
    /* host arena: batch staging for the larger of the two micro-batches, loss readback, I/O staging */
    size_t maxBT = (size_t)MAX(B, lo) * r->T;
    size_t hb[N_HOST_BUFS] = {maxBT * 4, maxBT * 4, (2 * maxBT + 2) * 4, (size_t)r->m.Vp * 4, maxBT * 4, HOST_STAGING_BYTES};
    size_t h = 0;
    for (int i = 0; i < N_HOST_BUFS; i++) {
        p->host_off[i] = h;
        p->host_bytes_of[i] = ALIGN_UP(hb[i], ARENA_ALIGN);
        h += p->host_bytes_of[i];
    }
    p->host_bytes = h;
    return r->device == DEV_BACKEND_CUDA ? (double)p->device_bytes : (double)(p->device_bytes + p->host_bytes);
}

/* Fills *p with the plan for r. Returns NGPT_OK, or NGPT_ERR_NOMEM with the smallest plan in *p and an
 * explanation in err, or NGPT_ERR_ARG for a request that cannot be planned at all. */
static int plan_make(Plan *p, const PlanRequest *r, char *err, size_t errlen) {
    long long seqs = (long long)r->batch_size * r->grad_accum;
    if (r->T < 1 || r->batch_size < 1 || r->grad_accum < 1 || r->m.L < 1 || r->m.C < 1 || r->m.NH < 1 || r->m.V < 1)
        return fail(err, errlen, NGPT_ERR_ARG, "plan: sizes must be positive");
    if (r->pin_micro_batch && (r->pin_micro_batch > seqs || seqs % r->pin_micro_batch))
        return fail(err, errlen, NGPT_ERR_ARG,
                    "micro_batch = %d must divide batch_size * gradient_accumulation_steps = %lld so the tokens per step stay as asked",
                    r->pin_micro_batch, seqs);
    int moment_opts[2] = {NGPT_DTYPE_F32, NGPT_DTYPE_BF16};
    int n_moment_opts = r->dtype == NGPT_DTYPE_F32 ? 1 : 2;
    for (int mo = 0; mo < n_moment_opts; mo++) {
        long long B0 = r->pin_micro_batch ? r->pin_micro_batch : MIN((long long)r->batch_size, seqs);
        for (long long B = B0; B >= 1; B--) {
            if (seqs % B) continue;
            if (r->pin_micro_batch && B != r->pin_micro_batch) continue;
            /* trades in order of cost: recompute GELU, recompute LayerNorm, then a smaller logits chunk */
            for (int level = 0; level < 4; level++) {
                int rc = MIN(level, RECOMPUTE_GELU_LN);
                int small = level == 3;
                if (r->pin_recompute >= 0) {
                    if (level == 1 || level == 2) continue;
                    rc = r->pin_recompute;
                }
                if (r->pin_chunk && small) continue;
                int chunk = r->pin_chunk ? r->pin_chunk : default_chunk(r, small);
                if (plan_layout(p, r, (int)B, rc, chunk, moment_opts[mo]) <= r->budget) {
                    p->fits = 1;
                    return NGPT_OK;
                }
            }
        }
    }
    /* nothing fits: describe the smallest plan */
    int rc = r->pin_recompute >= 0 ? r->pin_recompute : RECOMPUTE_GELU_LN;
    int B = r->pin_micro_batch ? r->pin_micro_batch : 1;
    double need = plan_layout(p, r, B, rc, r->pin_chunk ? r->pin_chunk : default_chunk(r, 1), moment_opts[n_moment_opts - 1]);
    char nb[32], bb[32], hint[160] = "";
    if (r->T > 64) {
        PlanRequest half = *r;
        half.T = r->T / 2;
        half.batch_size = 1;
        half.grad_accum = 1;
        half.pin_micro_batch = 0;
        Plan tmp;
        char hb[32];
        double need_half = plan_layout(&tmp, &half, 1, rc, default_chunk(r, 1), moment_opts[n_moment_opts - 1]);
        snprintf(hint, sizeof hint, " (block_size %d would need %s)", half.T, fmt_bytes(hb, sizeof hb, need_half));
    }
    return fail(err, errlen, NGPT_ERR_NOMEM,
                "does not fit: the smallest plan (micro-batch %d, recompute %s, logits chunk %d, %s AdamW moments) needs %s "
                "and the budget is %s. What helps: a smaller block_size%s, a smaller model (n_layer, n_embd), "
                "or more memory (--max_memory, another device)",
                B, rc == 2 ? "GELU+LayerNorm" : rc == 1 ? "GELU" : "none", p->logits_chunk,
                p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", fmt_bytes(nb, sizeof nb, need),
                fmt_bytes(bb, sizeof bb, r->budget), hint);
}

static const char *recompute_name(int rc) {
    return rc == RECOMPUTE_GELU_LN ? "GELU+LayerNorm" : rc == RECOMPUTE_GELU ? "GELU" : "none";
}
static const char *dtype_name(int dtype) {
    return dtype == NGPT_DTYPE_BF16 ? "bfloat16" : dtype == NGPT_DTYPE_F16 ? "float16" : "float32";
}

static void plan_print(const Plan *p, FILE *f) {
    const PlanRequest *r = &p->req;
    char b1[32], b2[32];
    fprintf(f, "model        L=%d NH=%d C=%d V=%d (padded %d) block_size=%d bias=%s: %.2fM parameters\n", r->m.L, r->m.NH,
            r->m.C, r->m.V, r->m.Vp, r->T, r->m.bias ? "yes" : "no", (double)p->nparams / 1e6);
    fprintf(f, "device       %s, %s, budget %s\n", r->device == DEV_BACKEND_CUDA ? "cuda" : "cpu", dtype_name(r->dtype),
            fmt_bytes(b1, sizeof b1, r->budget));
    fprintf(f, "tokens/step  %lld = batch_size %d x gradient_accumulation_steps %d x block_size %d (as asked)\n",
            (long long)r->batch_size * r->grad_accum * r->T, r->batch_size, r->grad_accum, r->T);
    fprintf(f, "chosen       micro-batch %d x accumulation %d, recompute %s, logits chunk %d rows, AdamW moments %s\n",
            p->micro_batch, p->grad_accum, recompute_name(p->recompute), p->logits_chunk,
            p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16");
    fprintf(f, "eval         micro-batch %d (in the training activation memory), logits chunk %d rows\n", p->eval_micro_batch,
            p->eval_chunk);
    fprintf(f, "memory       %-34s %12s\n", "category", "bytes");
    for (int c = 0; c < N_CATS; c++)
        if (p->cat_bytes[c] > 0) fprintf(f, "             %-34s %12s\n", cat_names[c], fmt_bytes(b1, sizeof b1, p->cat_bytes[c]));
    fprintf(f, "             %-34s %12s\n", "device arena (one allocation)", fmt_bytes(b1, sizeof b1, (double)p->device_bytes));
    fprintf(f, "             %-34s %12s\n", r->device == DEV_BACKEND_CUDA ? "host arena (pinned)" : "host arena",
            fmt_bytes(b2, sizeof b2, (double)p->host_bytes));
}

static void plan_print_json(const Plan *p, FILE *f) {
    const PlanRequest *r = &p->req;
    fprintf(f, "{\"fits\": %s, \"device\": \"%s\", \"dtype\": \"%s\", \"budget\": %.0f, \"n_layer\": %d, \"n_head\": %d, "
               "\"n_embd\": %d, \"vocab_size\": %d, \"padded_vocab_size\": %d, \"block_size\": %d, \"parameters\": %zu, "
               "\"tokens_per_step\": %lld, \"micro_batch\": %d, \"gradient_accumulation_steps\": %d, \"recompute\": \"%s\", "
               "\"logits_chunk\": %d, \"eval_micro_batch\": %d, \"moments\": \"%s\", \"device_bytes\": %zu, \"host_bytes\": %zu, "
               "\"bytes\": {",
            p->fits ? "true" : "false", r->device == DEV_BACKEND_CUDA ? "cuda" : "cpu", dtype_name(r->dtype), r->budget,
            r->m.L, r->m.NH, r->m.C, r->m.V, r->m.Vp, r->T, p->nparams, (long long)r->batch_size * r->grad_accum * r->T,
            p->micro_batch, p->grad_accum, recompute_name(p->recompute), p->logits_chunk, p->eval_micro_batch,
            p->moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", p->device_bytes, p->host_bytes);
    for (int c = 0; c < N_CATS; c++) fprintf(f, "%s\"%s\": %.0f", c ? ", " : "", cat_keys[c], p->cat_bytes[c]);
    /* every buffer: device offsets are from the arena start, the batch region is laid out twice */
    fprintf(f, "}, \"parameters_by_tensor\": {");
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        fprintf(f, "%s\"%s\": {\"offset_elements\": %zu, \"elements\": %zu}", i ? ", " : "", param_names[i], p->param_off[i], p->param_len[i]);
    fprintf(f, "}, \"device_buffers\": {\"params\": [%zu, %zu], \"grads\": [%zu, %zu], \"master\": [%zu, %zu], \"adam_m\": [%zu, %zu], "
               "\"adam_v\": [%zu, %zu]",
            p->off_params, p->off_grads - p->off_params, p->off_grads, p->off_master - p->off_grads, p->off_master,
            p->off_m - p->off_master, p->off_m, p->off_v - p->off_m, p->off_v, p->off_region - p->off_v);
    const BatchLayout *lays[2] = {&p->train, &p->eval};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "}, \"%s_buffers\": {", k ? "eval" : "train");
        for (int i = 0; i < N_BATCH_BUFS; i++)
            fprintf(f, "%s\"%s\": [%zu, %zu]", i ? ", " : "", batch_buf_names[i], p->off_region + lays[k]->off[i], lays[k]->bytes[i]);
    }
    fprintf(f, "}, \"host_buffers\": {");
    for (int i = 0; i < N_HOST_BUFS; i++) fprintf(f, "%s\"%s\": [%zu, %zu]", i ? ", " : "", host_buf_names[i], p->host_off[i], p->host_bytes_of[i]);
    fprintf(f, "}}\n");
}

/* ======================================================================================================
 * CPU backend: fp32, every op threaded over the pool. Reductions run in a fixed order, so results are
 * reproducible for a given thread count.
 * ==================================================================================================== */

typedef struct {
    ngpt_backend be;
    PoolStorage pool;
    int nthreads;
    char *scratch;
    size_t scratch_bytes, scratch_per_thread;
    void *arena;
} CpuBackend;

static CpuBackend *cpu_of(ngpt_backend *be) { return (CpuBackend *)be; }

/* Per-thread scratch slices (sized by cpu_scratch_bytes): [GEMM panel | LayerNorm partials (2C) | attention rows (2T)] */
#define CPU_PANEL_BYTES ALIGN_UP((size_t)CPU_GEMM_KC * CPU_GEMM_NR * sizeof(float), 64)
static float *cpu_scratch_panel(CpuBackend *cb, int tid) {
    return (float *)(cb->scratch + (size_t)tid * cb->scratch_per_thread);
}
static float *cpu_scratch_ln(CpuBackend *cb, int tid) {
    return (float *)(cb->scratch + (size_t)tid * cb->scratch_per_thread + CPU_PANEL_BYTES);
}
static float *cpu_scratch_attn(CpuBackend *cb, int tid, int C) {
    return (float *)(cb->scratch + (size_t)tid * cb->scratch_per_thread + CPU_PANEL_BYTES + ALIGN_UP((size_t)2 * C * sizeof(float), 64));
}

typedef void (*range_fn)(void *ctx, size_t lo, size_t hi, int tid);
typedef struct {
    range_fn body;
    void *ctx;
    size_t n;
} ParFor;

static void parfor_thunk(void *arg, int i, int nt) {
    ParFor *pf = (ParFor *)arg;
    size_t lo, hi;
    split_range(pf->n, i, nt, &lo, &hi);
    if (lo < hi) pf->body(pf->ctx, lo, hi, i);
}

/* body(ctx, lo, hi, tid) over [0, n) split in contiguous ranges; small jobs stay on the calling thread. */
static void parallel_for(CpuBackend *cb, size_t n, size_t grain, range_fn body, void *ctx) {
    if (n == 0) return;
    if (cb->nthreads == 1 || n < 2 * grain) { body(ctx, 0, n, 0); return; }
    ParFor pf = {body, ctx, n};
    pool_run(&cb->pool.pool, parfor_thunk, &pf);
}

/* ---- GEMM: C (M,N) += A (M,K) B (K,N), A and B read through strides, C row-major. ----
 * B is packed in (KC x 16) panels per thread; a 6 x 16 register tile of C accumulates over each panel. */

typedef float v8f __attribute__((vector_size(32)));
typedef float v8fu __attribute__((vector_size(32), aligned(4)));
#define GEMM_MR 6
#define GEMM_MC 72

typedef struct {
    int M, N, K;
    const float *A; size_t ars, acs;
    const float *B; size_t brs, bcs;
    float *C; size_t ldc;
    CpuBackend *cb;
} Gemm;

static void gemm_pack_b(const Gemm *g, int k0, int kc, int n0, int nr, float *buf) {
    if (g->bcs == 1) {
        for (int kk = 0; kk < kc; kk++) {
            const float *src = g->B + (size_t)(k0 + kk) * g->brs + n0;
            float *dst = buf + (size_t)kk * CPU_GEMM_NR;
            int j = 0;
            for (; j < nr; j++) dst[j] = src[j];
            for (; j < CPU_GEMM_NR; j++) dst[j] = 0;
        }
    } else {
        for (int j = 0; j < CPU_GEMM_NR; j++) {
            if (j < nr) {
                const float *src = g->B + (size_t)(n0 + j) * g->bcs + (size_t)k0 * g->brs;
                for (int kk = 0; kk < kc; kk++) buf[(size_t)kk * CPU_GEMM_NR + j] = src[(size_t)kk * g->brs];
            } else {
                for (int kk = 0; kk < kc; kk++) buf[(size_t)kk * CPU_GEMM_NR + j] = 0;
            }
        }
    }
}

/* the 6 x 16 tile: C[0..5][0..15] += A[0..5][0..kc) * panel */
static inline void gemm_tile_6x16(int kc, const float *A, size_t ars, size_t acs, const float *panel, float *C, size_t ldc) {
    v8f c00 = *(const v8fu *)(C + 0 * ldc), c01 = *(const v8fu *)(C + 0 * ldc + 8);
    v8f c10 = *(const v8fu *)(C + 1 * ldc), c11 = *(const v8fu *)(C + 1 * ldc + 8);
    v8f c20 = *(const v8fu *)(C + 2 * ldc), c21 = *(const v8fu *)(C + 2 * ldc + 8);
    v8f c30 = *(const v8fu *)(C + 3 * ldc), c31 = *(const v8fu *)(C + 3 * ldc + 8);
    v8f c40 = *(const v8fu *)(C + 4 * ldc), c41 = *(const v8fu *)(C + 4 * ldc + 8);
    v8f c50 = *(const v8fu *)(C + 5 * ldc), c51 = *(const v8fu *)(C + 5 * ldc + 8);
    const float *a0 = A, *a1 = A + ars, *a2 = A + 2 * ars, *a3 = A + 3 * ars, *a4 = A + 4 * ars, *a5 = A + 5 * ars;
    for (int k = 0; k < kc; k++) {
        v8f b0 = *(const v8f *)(panel + (size_t)k * CPU_GEMM_NR);
        v8f b1 = *(const v8f *)(panel + (size_t)k * CPU_GEMM_NR + 8);
        size_t o = (size_t)k * acs;
        v8f x;
        x = (v8f){a0[o], a0[o], a0[o], a0[o], a0[o], a0[o], a0[o], a0[o]}; c00 += x * b0; c01 += x * b1;
        x = (v8f){a1[o], a1[o], a1[o], a1[o], a1[o], a1[o], a1[o], a1[o]}; c10 += x * b0; c11 += x * b1;
        x = (v8f){a2[o], a2[o], a2[o], a2[o], a2[o], a2[o], a2[o], a2[o]}; c20 += x * b0; c21 += x * b1;
        x = (v8f){a3[o], a3[o], a3[o], a3[o], a3[o], a3[o], a3[o], a3[o]}; c30 += x * b0; c31 += x * b1;
        x = (v8f){a4[o], a4[o], a4[o], a4[o], a4[o], a4[o], a4[o], a4[o]}; c40 += x * b0; c41 += x * b1;
        x = (v8f){a5[o], a5[o], a5[o], a5[o], a5[o], a5[o], a5[o], a5[o]}; c50 += x * b0; c51 += x * b1;
    }
    *(v8fu *)(C + 0 * ldc) = c00; *(v8fu *)(C + 0 * ldc + 8) = c01;
    *(v8fu *)(C + 1 * ldc) = c10; *(v8fu *)(C + 1 * ldc + 8) = c11;
    *(v8fu *)(C + 2 * ldc) = c20; *(v8fu *)(C + 2 * ldc + 8) = c21;
    *(v8fu *)(C + 3 * ldc) = c30; *(v8fu *)(C + 3 * ldc + 8) = c31;
    *(v8fu *)(C + 4 * ldc) = c40; *(v8fu *)(C + 4 * ldc + 8) = c41;
    *(v8fu *)(C + 5 * ldc) = c50; *(v8fu *)(C + 5 * ldc + 8) = c51;
}

/* edge tiles (fewer than 6 rows or 16 columns) */
static void gemm_tile_edge(int kc, int mr, int nr, const float *A, size_t ars, size_t acs, const float *panel, float *C, size_t ldc) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float acc = 0;
            for (int k = 0; k < kc; k++) acc += A[(size_t)i * ars + (size_t)k * acs] * panel[(size_t)k * CPU_GEMM_NR + j];
            C[(size_t)i * ldc + j] += acc;
        }
}

static void gemm_rows(void *arg, size_t lo, size_t hi, int tid) {
    const Gemm *g = (const Gemm *)arg;
    float *panel = cpu_scratch_panel(g->cb, tid);
    int m_lo = (int)lo * GEMM_MR, m_hi = MIN((int)hi * GEMM_MR, g->M);
    for (int mb = m_lo; mb < m_hi; mb += GEMM_MC) {
        int me = MIN(mb + GEMM_MC, m_hi);
        for (int k0 = 0; k0 < g->K; k0 += CPU_GEMM_KC) {
            int kc = MIN(CPU_GEMM_KC, g->K - k0);
            for (int n0 = 0; n0 < g->N; n0 += CPU_GEMM_NR) {
                int nr = MIN(CPU_GEMM_NR, g->N - n0);
                gemm_pack_b(g, k0, kc, n0, nr, panel);
                for (int m = mb; m < me; m += GEMM_MR) {
                    int mr = MIN(GEMM_MR, me - m);
                    const float *A = g->A + (size_t)m * g->ars + (size_t)k0 * g->acs;
                    float *C = g->C + (size_t)m * g->ldc + n0;
                    if (mr == GEMM_MR && nr == CPU_GEMM_NR) gemm_tile_6x16(kc, A, g->ars, g->acs, panel, C, g->ldc);
                    else gemm_tile_edge(kc, mr, nr, A, g->ars, g->acs, panel, C, g->ldc);
                }
            }
        }
    }
}

static void gemm(CpuBackend *cb, int M, int N, int K, const float *A, size_t ars, size_t acs, const float *B, size_t brs,
                 size_t bcs, float *C, size_t ldc) {
    Gemm g = {M, N, K, A, ars, acs, B, brs, bcs, C, ldc, cb};
    size_t tiles = (size_t)(M + GEMM_MR - 1) / GEMM_MR;
    size_t work_per_tile = (size_t)GEMM_MR * (size_t)N * (size_t)K;
    size_t grain = MAX((size_t)1, ((size_t)1 << 17) / MAX(work_per_tile, (size_t)1));
    parallel_for(cb, tiles, grain, gemm_rows, &g);
}

/* ---- matmul ---- */

typedef struct {
    float *out;
    const float *bias;
    int OC;
} RowInit;

static void rows_init_bias(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const RowInit *r = (const RowInit *)arg;
    for (size_t i = lo; i < hi; i++) {
        float *o = r->out + i * (size_t)r->OC;
        if (r->bias) memcpy(o, r->bias, (size_t)r->OC * sizeof(float));
        else memset(o, 0, (size_t)r->OC * sizeof(float));
    }
}

static void cpu_matmul_forward(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    CpuBackend *cb = cpu_of(be);
    RowInit ri = {(float *)out, (const float *)bias, OC};
    parallel_for(cb, (size_t)N, 256, rows_init_bias, &ri);
    /* out (N,OC) += inp (N,C) . w^T : B(k=c, n=o) = w[o*C + c] */
    gemm(cb, N, OC, C, (const float *)inp, (size_t)C, 1, (const float *)w, 1, (size_t)C, (float *)out, (size_t)OC);
}

typedef struct {
    float *dbias;
    const float *dout;
    int N, OC;
} ColSum;

static void colsum_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const ColSum *c = (const ColSum *)arg;
    for (int i = 0; i < c->N; i++) {
        const float *row = c->dout + (size_t)i * c->OC;
        for (size_t o = lo; o < hi; o++) c->dbias[o] += row[o];
    }
}

static void cpu_matmul_backward(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                int N, int C, int OC) {
    CpuBackend *cb = cpu_of(be);
    const float *dY = (const float *)dout;
    /* dinp (N,C) = dout (N,OC) . w (OC,C) */
    RowInit ri = {(float *)dinp, NULL, C};
    parallel_for(cb, (size_t)N, 256, rows_init_bias, &ri);
    gemm(cb, N, C, OC, dY, (size_t)OC, 1, (const float *)w, (size_t)C, 1, (float *)dinp, (size_t)C);
    /* dw (OC,C) += dout^T (OC,N) . inp (N,C) */
    gemm(cb, OC, C, N, dY, 1, (size_t)OC, (const float *)inp, (size_t)C, 1, (float *)dw, (size_t)C);
    if (dbias) {
        ColSum cs = {(float *)dbias, dY, N, OC};
        parallel_for(cb, (size_t)OC, 64, colsum_range, &cs);
    }
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
        float m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= (float)C;
        float v = 0;
        for (int c = 0; c < C; c++) { float d = x[c] - m; v += d * d; }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        float *o = a->out + i * (size_t)C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * a->w[c] + (a->b ? a->b[c] : 0.0f);
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
} LnBwd;

static void ln_backward_part(void *arg, int tid, int nt) {
    const LnBwd *a = (const LnBwd *)arg;
    int C = a->C;
    size_t lo, hi;
    split_range((size_t)a->N, tid, nt, &lo, &hi);
    float *part = cpu_scratch_ln(a->cb, tid);
    float *dw = part, *db = part + C;
    memset(part, 0, 2 * (size_t)C * sizeof(float));
    for (size_t i = lo; i < hi; i++) {
        const float *x = a->inp + i * (size_t)C, *dy = a->dout + i * (size_t)C;
        float m = a->mean[i], r = a->rstd[i];
        float dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * r, dn = a->w[c] * dy[c];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * n;
        }
        dnorm_mean /= (float)C;
        dnorm_norm_mean /= (float)C;
        float *dx = a->dinp + i * (size_t)C;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * r, dn = a->w[c] * dy[c];
            dx[c] += (dn - dnorm_mean - n * dnorm_norm_mean) * r;
            dw[c] += dy[c] * n;
            db[c] += dy[c];
        }
    }
}

static void cpu_layernorm_backward(ngpt_backend *be, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w,
                                   const float *mean, const float *rstd, int N, int C) {
    CpuBackend *cb = cpu_of(be);
    LnBwd a = {cb, (float *)dinp, (const float *)dout, (const float *)inp, (const float *)w, mean, rstd, N, C, db != NULL};
    int nt = N >= 64 ? cb->nthreads : 1;
    if (nt == 1) ln_backward_part(&a, 0, 1);
    else pool_run(&cb->pool.pool, ln_backward_part, &a);
    /* add the per-thread partial sums in thread order */
    for (int t = 0; t < nt; t++) {
        const float *part = cpu_scratch_ln(cb, t);
        for (int c = 0; c < C; c++) ((float *)dw)[c] += part[c];
        if (db)
            for (int c = 0; c < C; c++) ((float *)db)[c] += part[C + c];
    }
}

/* ---- causal self-attention, one query row at a time: scores, softmax, weighted sum; no T x T matrix ---- */

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

static void attn_forward_rows(void *arg, size_t lo, size_t hi, int tid) {
    const Attn *a = (const Attn *)arg;
    int T = a->T, C = a->C, NH = a->NH, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *p = cpu_scratch_attn(a->cb, tid, C);
    for (size_t row = lo; row < hi; row++) { /* row = (b*NH + h)*T + t */
        int t = (int)(row % (size_t)T);
        size_t bh = row / (size_t)T;
        int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
        const float *base = a->qkv + (size_t)b * T * 3 * C;
        const float *q = base + (size_t)t * 3 * C + (size_t)h * hs;
        float mx = -FLT_MAX;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = base + (size_t)t2 * 3 * C + C + (size_t)h * hs;
            float s = 0;
            for (int i = 0; i < hs; i++) s += q[i] * k[i];
            s *= scale;
            p[t2] = s;
            if (s > mx) mx = s;
        }
        float sum = 0;
        for (int t2 = 0; t2 <= t; t2++) { p[t2] = expf(p[t2] - mx); sum += p[t2]; }
        float inv = 1.0f / sum;
        float *o = a->out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0;
        for (int t2 = 0; t2 <= t; t2++) {
            float w = p[t2] * inv;
            if (a->drop.p > 0) w *= attn_keep(&a->drop, bh, T, t, t2);
            const float *v = base + (size_t)t2 * 3 * C + 2 * C + (size_t)h * hs;
            for (int i = 0; i < hs; i++) o[i] += w * v[i];
        }
        a->lse[row] = mx + logf(sum);
    }
}

static void cpu_attention_forward(ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *drop) {
    Attn a = {cpu_of(be), (float *)out, lse, NULL, (const float *)qkv, NULL, NULL, B, T, C, NH, *drop};
    parallel_for(cpu_of(be), (size_t)B * NH * T, 16, attn_forward_rows, &a);
}

/* one (b, h) pair per item: dq written, dk and dv accumulated over the query rows of that pair only */
static void attn_backward_heads(void *arg, size_t lo, size_t hi, int tid) {
    const Attn *a = (const Attn *)arg;
    int T = a->T, C = a->C, NH = a->NH, hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    float *p = cpu_scratch_attn(a->cb, tid, C), *dp = p + T;
    for (size_t bh = lo; bh < hi; bh++) {
        int h = (int)(bh % (size_t)NH), b = (int)(bh / (size_t)NH);
        const float *base = a->qkv + (size_t)b * T * 3 * C;
        float *dbase = a->dqkv + (size_t)b * T * 3 * C;
        for (int t = 0; t < T; t++) {
            float *dk = dbase + (size_t)t * 3 * C + C + (size_t)h * hs, *dv = dk + C;
            for (int i = 0; i < hs; i++) dk[i] = dv[i] = 0;
        }
        for (int t = 0; t < T; t++) {
            const float *q = base + (size_t)t * 3 * C + (size_t)h * hs;
            const float *dO = a->dout + ((size_t)b * T + t) * C + (size_t)h * hs;
            const float *O = a->fout + ((size_t)b * T + t) * C + (size_t)h * hs;
            float lse = a->lse[bh * (size_t)T + t];
            float D = 0;
            for (int i = 0; i < hs; i++) D += dO[i] * O[i];
            for (int t2 = 0; t2 <= t; t2++) {
                const float *k = base + (size_t)t2 * 3 * C + C + (size_t)h * hs, *v = k + C;
                float s = 0, g = 0;
                for (int i = 0; i < hs; i++) { s += q[i] * k[i]; g += dO[i] * v[i]; }
                p[t2] = expf(s * scale - lse);
                float keep = a->drop.p > 0 ? attn_keep(&a->drop, bh, T, t, t2) : 1.0f;
                dp[t2] = g * keep;
                float *dv = dbase + (size_t)t2 * 3 * C + 2 * C + (size_t)h * hs;
                float pv = p[t2] * keep;
                for (int i = 0; i < hs; i++) dv[i] += pv * dO[i];
            }
            float *dq = dbase + (size_t)t * 3 * C + (size_t)h * hs;
            for (int i = 0; i < hs; i++) dq[i] = 0;
            for (int t2 = 0; t2 <= t; t2++) {
                float ds = p[t2] * (dp[t2] - D) * scale;
                const float *k = base + (size_t)t2 * 3 * C + C + (size_t)h * hs;
                float *dk = dbase + (size_t)t2 * 3 * C + C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) { dq[i] += ds * k[i]; dk[i] += ds * q[i]; }
            }
        }
    }
}

static void cpu_attention_backward(ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                   int B, int T, int C, int NH, const ngpt_dropout *drop) {
    Attn a = {cpu_of(be), NULL, (float *)lse, (float *)dqkv, (const float *)qkv, (const float *)dout, (const float *)out, B, T, C, NH, *drop};
    parallel_for(cpu_of(be), (size_t)B * NH, 1, attn_backward_heads, &a);
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
    for (size_t i = lo; i < hi; i++) { float x = e->a[i]; e->out[i] = 0.5f * x * (1.0f + erff(x * GELU_SCALE)); }
}
static void gelu_bwd_range(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Elem *e = (const Elem *)arg; /* a = inp, b = dout */
    for (size_t i = lo; i < hi; i++) {
        float x = e->a[i];
        float cdf = 0.5f * (1.0f + erff(x * GELU_SCALE)), pdf = INV_SQRT_2PI * expf(-0.5f * x * x);
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
    float *logits, *losses;
    const int32_t *targets;
    int V, Vp;
    float dscale;
} Xent;

static void xent_rows(void *arg, size_t lo, size_t hi, int tid) {
    (void)tid;
    const Xent *x = (const Xent *)arg;
    for (size_t i = lo; i < hi; i++) {
        float *z = x->logits + i * (size_t)x->Vp;
        float mx = -FLT_MAX;
        for (int j = 0; j < x->V; j++) mx = z[j] > mx ? z[j] : mx;
        float sum = 0;
        for (int j = 0; j < x->V; j++) sum += expf(z[j] - mx);
        float lse = mx + logf(sum);
        int tg = x->targets[i];
        x->losses[i] = lse - z[tg];
        if (x->dscale != 0) {
            for (int j = 0; j < x->V; j++) z[j] = (expf(z[j] - lse) - (j == tg)) * x->dscale;
            for (int j = x->V; j < x->Vp; j++) z[j] = 0;
        }
    }
}
static void cpu_crossentropy(ngpt_backend *be, void *logits, float *losses, const int32_t *targets, int N, int V, int Vp, float dscale) {
    Xent x = {(float *)logits, losses, targets, V, Vp, dscale};
    parallel_for(cpu_of(be), (size_t)N, 8, xent_rows, &x);
}

/* ---- optimizer ---- */

typedef struct {
    CpuBackend *cb;
    const float *x;
    size_t n;
    double partial[POOL_MAX_THREADS];
} NormSq;

static void norm_part(void *arg, int tid, int nt) {
    NormSq *a = (NormSq *)arg;
    size_t lo, hi;
    split_range(a->n, tid, nt, &lo, &hi);
    double s = 0;
    for (size_t i = lo; i < hi; i++) s += (double)a->x[i] * a->x[i];
    a->partial[tid] = s;
}
static double cpu_norm_sq(ngpt_backend *be, const void *x, size_t n) {
    CpuBackend *cb = cpu_of(be);
    NormSq a = {.cb = cb, .x = (const float *)x, .n = n};
    int nt = n >= 65536 ? cb->nthreads : 1;
    if (nt == 1) norm_part(&a, 0, 1);
    else pool_run(&cb->pool.pool, norm_part, &a);
    double s = 0;
    for (int t = 0; t < nt; t++) s += a.partial[t];
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
static size_t cpu_backend_scratch_bytes(ngpt_backend *be, const ngpt_shape *s) { return cpu_scratch_bytes(s, cpu_of(be)->nthreads); }
static void cpu_set_scratch(ngpt_backend *be, void *scratch, size_t bytes) {
    CpuBackend *cb = cpu_of(be);
    cb->scratch = (char *)ALIGN_UP((uintptr_t)scratch, 64);
    cb->scratch_bytes = bytes;
    cb->scratch_per_thread = (bytes - 64) / (size_t)cb->nthreads / 64 * 64;
}
static void cpu_copy(ngpt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (dst != src && bytes) memmove(dst, src, bytes);
}
static void cpu_sync(ngpt_backend *be) { (void)be; }
static void cpu_zero(ngpt_backend *be, void *dst, size_t bytes) {
    (void)be;
    memset(dst, 0, bytes);
}
static void cpu_destroy(ngpt_backend *be) {
    CpuBackend *cb = cpu_of(be);
    cpu_arena_free(be);
    pool_free(&cb->pool);
    free(cb);
}

int ngpt_cpu_backend_create(ngpt_backend **out, int nthreads, char *err, size_t errlen) {
    *out = NULL;
    CpuBackend *cb = (CpuBackend *)calloc(1, sizeof *cb);
    if (!cb) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory creating the CPU backend");
    if (nthreads <= 0) nthreads = cpu_count();
    nthreads = MIN(nthreads, POOL_MAX_THREADS);
    int rc = pool_init(&cb->pool, nthreads, err, errlen);
    if (rc) { pool_free(&cb->pool); free(cb); return rc; }
    cb->nthreads = cb->pool.pool.nthreads;
    ngpt_backend *be = &cb->be;
    be->name = "cpu";
    be->dtype = NGPT_DTYPE_F32;
    be->impl = cb;
    be->destroy = cpu_destroy;
    be->arena_alloc = cpu_arena_alloc;
    be->arena_free = cpu_arena_free;
    be->scratch_bytes = cpu_backend_scratch_bytes;
    be->set_scratch = cpu_set_scratch;
    be->upload = cpu_copy;
    be->download = cpu_copy;
    be->sync = cpu_sync;
    be->zero = cpu_zero;
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
    be->gelu_forward = cpu_gelu_forward;
    be->gelu_backward = cpu_gelu_backward;
    be->residual_forward = cpu_residual_forward;
    be->dropout = cpu_dropout;
    be->crossentropy = cpu_crossentropy;
    be->norm_sq = cpu_norm_sq;
    be->adamw = cpu_adamw;
    *out = be;
    return NGPT_OK;
}

#ifndef NGPT_CUDA
int ngpt_cuda_available(char *why, size_t whylen) {
    fail(why, whylen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA (nvcc was not found by build.sh)");
    return 0;
}
int ngpt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen) {
    *free_bytes = *total_bytes = 0;
    return fail(err, errlen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA");
}
int ngpt_cuda_backend_create(ngpt_backend **out, int dtype, char *err, size_t errlen) {
    (void)dtype;
    *out = NULL;
    return fail(err, errlen, NGPT_ERR_DEVICE, "this nanogpt was built without CUDA: rebuild with ./build.sh where nvcc is installed");
}
int ngpt_cuda_describe(char *out, size_t outlen) {
    snprintf(out, outlen, "no CUDA (CPU-only build)");
    return NGPT_ERR_DEVICE;
}
#endif

/* ======================================================================================================
 * Data: nanoGPT's train.bin/val.bin (raw uint16 tokens) and llm.c's shards (a 256-int32 header with magic
 * 20240520, version 1 and the token count, then uint16 tokens). Files are memory-mapped, checked once
 * (size, header, every id below the vocabulary size) and sampled as nanoGPT samples them: random windows
 * of block_size + 1 tokens.
 * ==================================================================================================== */

#define LLMC_MAGIC 20240520
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

/* Opens and checks a token file: ids must be < vocab, and there must be at least min_tokens of them. */
static int tokenfile_open(TokenFile *f, const char *path, int vocab, size_t min_tokens, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    copy_str(f->path, sizeof f->path, path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, NGPT_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    size_t bytes = (size_t)st.st_size;
    if (bytes == 0) { close(fd); return fail(err, errlen, NGPT_ERR_FORMAT, "%s is empty", path); }
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return fail(err, errlen, NGPT_ERR_IO, "cannot map %s: %s", path, strerror(e));
    f->map = map;
    f->map_bytes = bytes;
    const unsigned char *p = (const unsigned char *)map;
    int32_t magic = 0;
    if (bytes >= 4) memcpy(&magic, p, 4);
    if (magic == LLMC_MAGIC) {
        int32_t hdr[3];
        if (bytes < LLMC_HEADER_INTS * 4) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c shard header truncated (%zu bytes, the header is %d)", path, bytes, LLMC_HEADER_INTS * 4);
        }
        memcpy(hdr, p, sizeof hdr);
        if (hdr[1] != 1) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: llm.c shard version %d; this build reads version 1 (uint16 tokens)", path, hdr[1]);
        }
        size_t want = (size_t)LLMC_HEADER_INTS * 4 + (size_t)(uint32_t)hdr[2] * 2;
        if (hdr[2] < 0 || want != bytes) {
            tokenfile_close(f);
            return fail(err, errlen, NGPT_ERR_FORMAT, "%s: header says %d tokens (%zu bytes), the file has %zu bytes (truncated or not an llm.c shard)",
                        path, hdr[2], want, bytes);
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

/* ---- character vocabulary (meta.bin): "ngptchar", uint32 version 1, uint32 count, then per id a length
 * byte (1-4) and the UTF-8 bytes of its character, ids in code point order ---- */

#define CHARVOCAB_MAGIC "ngptchar"
#define CHARVOCAB_VERSION 1

typedef struct {
    int n;
    uint32_t cp[65536]; /* code point of each id */
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

static int charvocab_save(const CharVocab *v, const char *path, char *err, size_t errlen);
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
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: entry %d (U+%04X) is out of code point order", path, i, cp);
            else v->cp[i] = cp;
        }
    }
    fclose(f);
    return rc;
}

/* Decodes ids to UTF-8 text into out (cap bytes, NUL-terminated). Unknown ids become U+FFFD. */
static size_t charvocab_decode(const CharVocab *v, const int32_t *ids, size_t n, char *out, size_t cap) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        int k = utf8_encode(ids[i] >= 0 && ids[i] < v->n ? v->cp[ids[i]] : 0xFFFD, b);
        if (len + (size_t)k + 1 > cap) break;
        memcpy(out + len, b, (size_t)k);
        len += (size_t)k;
    }
    if (cap) out[len < cap ? len : cap - 1] = 0;
    return len;
}

/* ======================================================================================================
 * Trainer state and the model graph. The graph is written once, as calls to the backend; it knows
 * nothing of threads or grids, and the backends know nothing of the model.
 * ==================================================================================================== */

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
    int32_t *h_tokens, *h_targets, *h_buckets, *h_counts;
    float *h_losses;
    void *h_staging;
    int nbuckets; /* distinct tokens of the current micro-batch */
    /* data */
    TokenFile train_data, val_data;
    CharVocab *charvocab; /* NULL unless the dataset has meta.bin */
    Rng rng_train;
    FILE *resume_file; /* open only while the trainer is being made */
    _Atomic int stop_requested;
    /* progress */
    int step;
    int eval_count; /* evaluations done; seeds the eval batches */
    float best_val_loss, last_loss, lr;
    double last_step_seconds;
    double last_step_tokens;
};

const char *ngpt_last_error(const ngpt_trainer *tr) { return tr ? tr->err : "no trainer"; }

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
    tr->opt.log(tr->opt.log_ctx, level, line);
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
/* layer l's slot of batch buffer b */
static void *slot(const ngpt_trainer *tr, const BatchLayout *lay, int b, int l) {
    return tr->region + lay->off[b] + (size_t)(l % lay->slots[b]) * lay->slot_bytes[b];
}
static float *slot_f(const ngpt_trainer *tr, const BatchLayout *lay, int b, int l) { return (float *)slot(tr, lay, b, l); }
/* row r of an act tensor with `width` columns */
static void *rows(const ngpt_trainer *tr, void *base, size_t r, size_t width) { return (char *)base + r * width * act_size(tr); }

enum { DROP_EMBED, DROP_ATTN, DROP_ATTN_RESID, DROP_MLP_RESID };

/* The dropout of one site for micro-batch `micro` (of B sequences); off outside training. The masks of a
 * step are indexed by the sequence's place in the whole step, so any micro-batch split gives the same. */
static ngpt_dropout drop_site(const ngpt_trainer *tr, int training, int micro, int B, int layer, int site) {
    ngpt_dropout d = {0, 0, 0, 0};
    if (!training || tr->cfg.dropout <= 0) return d;
    uint64_t T = (uint64_t)tr->plan.req.T, seq0 = (uint64_t)micro * (uint64_t)B;
    d.p = (float)tr->cfg.dropout;
    d.seed = (uint64_t)tr->cfg.seed;
    d.stream = ((uint64_t)tr->step << 24) ^ ((uint64_t)layer << 4) ^ (uint64_t)site ^ 0x5A5A000000000000ull;
    d.offset = site == DROP_ATTN ? seq0 * (uint64_t)tr->ms.NH * T * T : seq0 * T * (uint64_t)tr->ms.C;
    return d;
}

/* ---- forward: embeddings, L blocks, final LayerNorm. B sequences in layout lay. ---- */
static void graph_forward(ngpt_trainer *tr, const BatchLayout *lay, int B, int training, int micro) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int T = tr->plan.req.T, C = m->C, NH = m->NH, L = m->L;
    int N = B * T;
    size_t NC = (size_t)N * C;
    char *P = tr->params;
    const int32_t *tokens = (const int32_t *)slot(tr, lay, B_TOKENS, 0);
    void *res0 = slot(tr, lay, B_RES, 0);
    be->encoder_forward(be, res0, tokens, pt(tr, P, P_WTE, 0), pt(tr, P, P_WPE, 0), B, T, C);
    ngpt_dropout d = drop_site(tr, training, micro, B, L, DROP_EMBED);
    if (d.p > 0) be->dropout(be, res0, res0, NC, &d);
    for (int l = 0; l < L; l++) {
        void *res = slot(tr, lay, B_RES, l), *res_out = slot(tr, lay, B_RES, l + 1);
        void *res_mid = slot(tr, lay, B_RES_MID, l);
        void *ln1 = slot(tr, lay, B_LN1, l), *ln2 = slot(tr, lay, B_LN2, l);
        float *ln1s = slot_f(tr, lay, B_LN1_STATS, l), *ln2s = slot_f(tr, lay, B_LN2_STATS, l);
        void *qkv = slot(tr, lay, B_QKV, l), *atty = slot(tr, lay, B_ATTY, l), *fch = slot(tr, lay, B_FCH, l);
        void *gelu = slot(tr, lay, B_GELU, l), *tmp = slot(tr, lay, B_TMP, 0);
        float *lse = slot_f(tr, lay, B_LSE, l);
        be->layernorm_forward(be, ln1, ln1s, ln1s + N, res, pt(tr, P, P_LN1W, l), pt_bias(tr, P, P_LN1B, l), N, C);
        be->matmul_forward(be, qkv, ln1, pt(tr, P, P_QKVW, l), pt_bias(tr, P, P_QKVB, l), N, C, 3 * C);
        d = drop_site(tr, training, micro, B, l, DROP_ATTN);
        be->attention_forward(be, atty, lse, qkv, B, T, C, NH, &d);
        be->matmul_forward(be, tmp, atty, pt(tr, P, P_ATTPROJW, l), pt_bias(tr, P, P_ATTPROJB, l), N, C, C);
        d = drop_site(tr, training, micro, B, l, DROP_ATTN_RESID);
        if (d.p > 0) be->dropout(be, tmp, tmp, NC, &d);
        be->residual_forward(be, res_mid, res, tmp, NC);
        be->layernorm_forward(be, ln2, ln2s, ln2s + N, res_mid, pt(tr, P, P_LN2W, l), pt_bias(tr, P, P_LN2B, l), N, C);
        be->matmul_forward(be, fch, ln2, pt(tr, P, P_FCW, l), pt_bias(tr, P, P_FCB, l), N, C, 4 * C);
        be->gelu_forward(be, gelu, fch, 4 * NC);
        be->matmul_forward(be, tmp, gelu, pt(tr, P, P_FCPROJW, l), pt_bias(tr, P, P_FCPROJB, l), N, 4 * C, C);
        d = drop_site(tr, training, micro, B, l, DROP_MLP_RESID);
        if (d.p > 0) be->dropout(be, tmp, tmp, NC, &d);
        be->residual_forward(be, res_out, res_mid, tmp, NC);
    }
    float *lnfs = slot_f(tr, lay, B_LNF_STATS, 0);
    be->layernorm_forward(be, slot(tr, lay, B_LNF, 0), lnfs, lnfs + N, slot(tr, lay, B_RES, L), pt(tr, P, P_LNFW, 0),
                          pt_bias(tr, P, P_LNFB, 0), N, C);
}

/* ---- the classifier over chunks of rows: logits = lnf . wte^T, softmax cross-entropy; when dscale != 0
 * the gradient goes straight back through the chunk: dlnf rows into B_TMP and dwte += . Never more than
 * one chunk of logits exists. Per-token losses land in B_LOSSES. ---- */
static void graph_classifier(ngpt_trainer *tr, const BatchLayout *lay, int B, int chunk, float dscale) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int N = B * tr->plan.req.T, C = m->C;
    void *lnf = slot(tr, lay, B_LNF, 0), *logits = slot(tr, lay, B_LOGITS, 0), *dlnf = slot(tr, lay, B_TMP, 0);
    float *losses = slot_f(tr, lay, B_LOSSES, 0);
    const int32_t *targets = (const int32_t *)slot(tr, lay, B_TARGETS, 0);
    void *wte = pt(tr, tr->params, P_WTE, 0), *dwte = pt(tr, tr->grads, P_WTE, 0);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = MIN(chunk, N - r0);
        void *x = rows(tr, lnf, (size_t)r0, (size_t)C);
        be->matmul_forward(be, logits, x, wte, NULL, n, C, m->Vp);
        be->crossentropy(be, logits, losses + r0, targets + r0, n, m->V, m->Vp, dscale);
        if (dscale != 0) be->matmul_backward(be, rows(tr, dlnf, (size_t)r0, (size_t)C), dwte, NULL, logits, x, wte, n, C, m->Vp);
    }
}

/* ---- backward: from dlnf (in B_TMP) to every parameter gradient (accumulated) ---- */
static void graph_backward(ngpt_trainer *tr, const BatchLayout *lay, int B, int micro) {
    ngpt_backend *be = tr->be;
    const ModelShape *m = &tr->ms;
    int T = tr->plan.req.T, C = m->C, NH = m->NH, L = m->L;
    int N = B * T;
    size_t NC = (size_t)N * C;
    char *P = tr->params, *G = tr->grads;
    void *tmp = slot(tr, lay, B_TMP, 0), *dres = slot(tr, lay, B_DRES, 0);
    void *dbig = slot(tr, lay, B_DBIG, 0), *datt = slot(tr, lay, B_DATT, 0);
    float *lnfs = slot_f(tr, lay, B_LNF_STATS, 0);
    be->zero(be, dres, NC * act_size(tr));
    be->layernorm_backward(be, dres, pt(tr, G, P_LNFW, 0), pt_bias(tr, G, P_LNFB, 0), tmp, slot(tr, lay, B_RES, L),
                           pt(tr, P, P_LNFW, 0), lnfs, lnfs + N, N, C);
    for (int l = L - 1; l >= 0; l--) {
        void *res = slot(tr, lay, B_RES, l), *res_mid = slot(tr, lay, B_RES_MID, l);
        void *ln1 = slot(tr, lay, B_LN1, l), *ln2 = slot(tr, lay, B_LN2, l);
        float *ln1s = slot_f(tr, lay, B_LN1_STATS, l), *ln2s = slot_f(tr, lay, B_LN2_STATS, l);
        void *qkv = slot(tr, lay, B_QKV, l), *atty = slot(tr, lay, B_ATTY, l), *fch = slot(tr, lay, B_FCH, l);
        void *gelu = slot(tr, lay, B_GELU, l);
        float *lse = slot_f(tr, lay, B_LSE, l);
        /* recompute what the plan chose not to keep */
        if (tr->plan.recompute >= RECOMPUTE_GELU_LN) {
            be->layernorm_forward(be, ln1, ln1s, ln1s + N, res, pt(tr, P, P_LN1W, l), pt_bias(tr, P, P_LN1B, l), N, C);
            be->layernorm_forward(be, ln2, ln2s, ln2s + N, res_mid, pt(tr, P, P_LN2W, l), pt_bias(tr, P, P_LN2B, l), N, C);
        }
        if (tr->plan.recompute >= RECOMPUTE_GELU) be->gelu_forward(be, gelu, fch, 4 * NC);
        /* MLP: res_out = res_mid + drop(gelu(ln2 . fcw^T) . fcprojw^T) */
        ngpt_dropout d = drop_site(tr, 1, micro, B, l, DROP_MLP_RESID);
        const void *dproj = dres;
        if (d.p > 0) { be->dropout(be, tmp, dres, NC, &d); dproj = tmp; }
        be->matmul_backward(be, dbig, pt(tr, G, P_FCPROJW, l), pt_bias(tr, G, P_FCPROJB, l), dproj, gelu, pt(tr, P, P_FCPROJW, l), N, 4 * C, C);
        be->gelu_backward(be, dbig, fch, dbig, 4 * NC);
        be->matmul_backward(be, tmp, pt(tr, G, P_FCW, l), pt_bias(tr, G, P_FCB, l), dbig, ln2, pt(tr, P, P_FCW, l), N, C, 4 * C);
        be->layernorm_backward(be, dres, pt(tr, G, P_LN2W, l), pt_bias(tr, G, P_LN2B, l), tmp, res_mid, pt(tr, P, P_LN2W, l), ln2s, ln2s + N, N, C);
        /* attention: res_mid = res + drop(attention(ln1 . qkvw^T) . attprojw^T) */
        d = drop_site(tr, 1, micro, B, l, DROP_ATTN_RESID);
        dproj = dres;
        if (d.p > 0) { be->dropout(be, tmp, dres, NC, &d); dproj = tmp; }
        be->matmul_backward(be, datt, pt(tr, G, P_ATTPROJW, l), pt_bias(tr, G, P_ATTPROJB, l), dproj, atty, pt(tr, P, P_ATTPROJW, l), N, C, C);
        d = drop_site(tr, 1, micro, B, l, DROP_ATTN);
        be->attention_backward(be, dbig, datt, qkv, atty, lse, B, T, C, NH, &d);
        be->matmul_backward(be, tmp, pt(tr, G, P_QKVW, l), pt_bias(tr, G, P_QKVB, l), dbig, ln1, pt(tr, P, P_QKVW, l), N, C, 3 * C);
        be->layernorm_backward(be, dres, pt(tr, G, P_LN1W, l), pt_bias(tr, G, P_LN1B, l), tmp, res, pt(tr, P, P_LN1W, l), ln1s, ln1s + N, N, C);
    }
    ngpt_dropout d = drop_site(tr, 1, micro, B, L, DROP_EMBED);
    if (d.p > 0) be->dropout(be, dres, dres, NC, &d);
    const int32_t *buckets = (const int32_t *)slot(tr, lay, B_BUCKETS, 0);
    be->encoder_backward(be, pt(tr, G, P_WTE, 0), pt(tr, G, P_WPE, 0), dres, (const int32_t *)slot(tr, lay, B_TOKENS, 0), buckets,
                         buckets + N + 1, tr->nbuckets, B, T, C);
}

/* ---- one micro-batch: the tokens and targets are in the host arena (h_tokens, h_targets) ---- */

/* Groups the N positions of h_tokens by token id for the deterministic embedding backward:
 * h_buckets = [bucket starts (nb + 1) ... | positions (N) from index N + 1]. h_counts is all zero before
 * and after. */
static void bucketize(ngpt_trainer *tr, int N) {
    const int32_t *tok = tr->h_tokens;
    int32_t *start = tr->h_buckets, *pos = tr->h_buckets + N + 1, *cnt = tr->h_counts;
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
    tr->nbuckets = nb;
}

/* Forward (and backward when training) of B sequences; returns the sum of the B*T token losses. */
static double run_micro_batch(ngpt_trainer *tr, const BatchLayout *lay, int B, int training, int micro, float dscale) {
    ngpt_backend *be = tr->be;
    int N = B * tr->plan.req.T;
    be->upload(be, slot(tr, lay, B_TOKENS, 0), tr->h_tokens, (size_t)N * 4);
    be->upload(be, slot(tr, lay, B_TARGETS, 0), tr->h_targets, (size_t)N * 4);
    if (training) {
        bucketize(tr, N);
        be->upload(be, slot(tr, lay, B_BUCKETS, 0), tr->h_buckets, (size_t)(2 * N + 1) * 4);
    }
    graph_forward(tr, lay, B, training, micro);
    int chunk = training ? tr->plan.logits_chunk : tr->plan.eval_chunk;
    graph_classifier(tr, lay, B, chunk, training ? dscale : 0.0f);
    if (training) graph_backward(tr, lay, B, micro);
    be->download(be, tr->h_losses, slot(tr, lay, B_LOSSES, 0), (size_t)N * 4);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += tr->h_losses[i];
    return sum;
}

/* nanoGPT's get_batch: B random windows of T + 1 tokens into h_tokens / h_targets */
static void sample_batch(ngpt_trainer *tr, const TokenFile *f, Rng *rng, int B) {
    int T = tr->plan.req.T;
    for (int b = 0; b < B; b++) {
        size_t ix = (size_t)rng_below(rng, f->ntok - (size_t)T);
        for (int t = 0; t < T; t++) {
            tr->h_tokens[(size_t)b * T + t] = f->tokens[ix + (size_t)t];
            tr->h_targets[(size_t)b * T + t] = f->tokens[ix + (size_t)t + 1];
        }
    }
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

/* Clips and applies AdamW with learning rate lr to every parameter tensor. Returns the gradient norm
 * (before clipping), or NaN/Inf when the gradients are not finite (then nothing is updated). */
static double optimizer_step(ngpt_trainer *tr, float lr) {
    ngpt_backend *be = tr->be;
    const ngpt_config *c = &tr->cfg;
    double norm = sqrt(be->norm_sq(be, tr->grads, tr->plan.nparams_padded));
    if (!isfinite(norm)) return norm;
    float scale = 1.0f;
    if (c->grad_clip > 0 && norm > c->grad_clip) scale = (float)(c->grad_clip / (norm + 1e-6));
    size_t mb = tr->plan.moment_bytes;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        if (!tr->plan.param_len[i]) continue;
        double t = tr->step + 1;
        ngpt_adamw h = {lr, (float)c->beta1, (float)c->beta2, (float)(1.0 - c->beta1), (float)(1.0 - c->beta2),
                        (float)(1.0 - pow(c->beta1, t)), (float)(1.0 - pow(c->beta2, t)), 1e-8f,
                        param_decays(i) ? (float)c->weight_decay : 0.0f, scale, tr->plan.moments_dtype};
        float *master = tr->plan.req.dtype == NGPT_DTYPE_F32 ? NULL : (float *)tensor_at(tr, tr->master, i, 4);
        be->adamw(be, pt(tr, tr->params, i, 0), master, pt(tr, tr->grads, i, 0), tensor_at(tr, tr->m, i, mb),
                  tensor_at(tr, tr->v, i, mb), tr->plan.param_len[i], &h);
    }
    return norm;
}

/* ======================================================================================================
 * Trainer: create (device, data, plan, the one allocation, init), step, evaluate, the nanoGPT loop.
 * ==================================================================================================== */

/* GPU budget: free memory minus this margin for what the CUDA runtime allocates after startup (lazily
 * loaded kernel modules, launch resources); see docs/memory.md. */
#define CUDA_SAFETY_MARGIN ((size_t)256 << 20)

static double host_memory_available(void) {
    long pages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0) return 4.0 * GiB;
    return 0.9 * (double)pages * (double)psize;
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

/* Parameters (or gradients) to host floats, in the packed order of param_sizes (no alignment gaps). */
static void copy_params_out(ngpt_trainer *tr, float *dst, char *base) {
    size_t k = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        download_as_f32(tr, dst + k, pt(tr, base, i, 0), tr->plan.param_len[i]);
        k += tr->plan.param_len[i];
    }
}

/* Sets the parameters from host floats in packed order (fp32 master, then the working copy). */
static int copy_params_in(ngpt_trainer *tr, const float *src) {
    ngpt_backend *be = tr->be;
    size_t per = HOST_STAGING_BYTES / 4, k = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        float *master = (float *)tensor_at(tr, tr->master, i, 4);
        size_t n = tr->plan.param_len[i];
        for (size_t j = 0; j < n; j += per) {
            size_t c = MIN(per, n - j);
            memcpy(tr->h_staging, src + k + j, c * 4);
            be->upload(be, master + j, tr->h_staging, c * 4);
            be->sync(be); /* the staging buffer is reused next round */
        }
        be->cast_from_f32(be, pt(tr, tr->params, i, 0), master, n);
        k += n;
    }
    return be_check(tr, "loading parameters");
}

/* nanoGPT's initialisation: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), LayerNorm weights 1,
 * biases 0, and the vocabulary padding rows 0. */
static int init_params(ngpt_trainer *tr) {
    ngpt_backend *be = tr->be;
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
    else snprintf(buf, n, "data/%s", c->dataset);
    return buf;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Picks the backend and the dtype. Writes a notice into note when it falls back to the CPU. */
static int resolve_device(const ngpt_config *c, int *device, int *dtype, char *note, size_t notelen, char *err, size_t errlen) {
    note[0] = 0;
    char why[NGPT_ERRLEN];
    int want_cuda = !strcmp(c->device, "cuda"), auto_dev = !strcmp(c->device, "auto");
    *device = DEV_BACKEND_CPU;
    if (want_cuda || auto_dev) {
        if (ngpt_cuda_available(why, sizeof why)) *device = DEV_BACKEND_CUDA;
        else if (want_cuda) return fail(err, errlen, NGPT_ERR_DEVICE, "device = cuda, but %s", why);
        else snprintf(note, notelen, "no usable GPU (%.400s): training on the CPU", why);
    }
    if (*device == DEV_BACKEND_CPU) {
        if (strcmp(c->dtype, "auto") && strcmp(c->dtype, "float32"))
            snprintf(note + strlen(note), notelen - strlen(note), "%sdtype = %s: the CPU backend computes in float32", note[0] ? "; " : "", c->dtype);
        *dtype = NGPT_DTYPE_F32;
        return NGPT_OK;
    }
    if (!strcmp(c->dtype, "float32")) *dtype = NGPT_DTYPE_F32;
    else if (!strcmp(c->dtype, "float16")) *dtype = NGPT_DTYPE_F16;
    else *dtype = NGPT_DTYPE_BF16; /* "auto" and "bfloat16"; the backend refuses bf16 on cards without it */
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
    tr->h_tokens = (int32_t *)(tr->host + p->host_off[H_TOKENS]);
    tr->h_targets = (int32_t *)(tr->host + p->host_off[H_TARGETS]);
    tr->h_buckets = (int32_t *)(tr->host + p->host_off[H_BUCKETS]);
    tr->h_counts = (int32_t *)(tr->host + p->host_off[H_COUNTS]);
    tr->h_losses = (float *)(tr->host + p->host_off[H_LOSSES]);
    tr->h_staging = tr->host + p->host_off[H_STAGING];
}

/* The plan request for a config on a device with a budget. */
static void plan_request_from_config(PlanRequest *r, const ngpt_config *c, const ModelShape *ms, int device, int dtype, int nthreads,
                                     double budget) {
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
    r->eval_seqs = (long long)c->eval_iters * c->batch_size;
}

/* ======================================================================================================
 * Checkpoints (docs/formats.md): magic "ngptckpt", a version, a table of sections each with its own
 * checksum, then the sections: the config, the model shape, the training state (step, RNG position, best
 * val loss), the fp32 parameters and the AdamW moments. Written to a temporary file, fsynced and renamed,
 * so a crash or a full disk leaves the previous checkpoint whole.
 * ==================================================================================================== */

#define CKPT_MAGIC "ngptckpt"
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
    int64_t reserved[4];
} CkptState;

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
    while (n--) s->buf[s->nbuf++] = *b++;
}
static uint64_t hash_final(const Hash64 *s) {
    uint64_t h = s->h;
    for (int i = 0; i < s->nbuf; i++) h = (h ^ s->buf[i]) * FNV_PRIME;
    return (h ^ s->len) * FNV_PRIME;
}

typedef struct {
    FILE *f;
    const char *path;
    Hash64 hash;
    int failed;
} CkptWriter;

static void ckpt_put(CkptWriter *w, const void *p, size_t n) {
    if (w->failed || !n) return;
    if (fwrite(p, 1, n, w->f) != n) w->failed = errno ? errno : EIO;
    hash_update(&w->hash, p, n);
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
    s->offset = (uint64_t)ftell(w->f);
    hash_init(&w->hash);
}
static void ckpt_end_section(CkptWriter *w, CkptHeader *h, int id) {
    CkptSection *s = &h->sec[id - 1];
    s->bytes = (uint64_t)ftell(w->f) - s->offset;
    s->checksum = hash_final(&w->hash);
}

static int mkdir_p(const char *dir) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0777); *p = '/'; }
    return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* Writes the trainer's whole state to path (atomically). */
static int checkpoint_write(ngpt_trainer *tr, const char *path) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%.580s.tmp", path);
    CkptWriter w = {fopen(tmp, "wb"), tmp, {0}, 0};
    if (!w.f) return tr_fail(tr, NGPT_ERR_IO, "cannot create checkpoint %s: %s", tmp, strerror(errno));
    CkptHeader h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    h.nsections = N_SECTIONS;
    errno = 0;
    if (fwrite(&h, sizeof h, 1, w.f) != 1) w.failed = errno ? errno : EIO; /* placeholder, rewritten last */

    ckpt_begin_section(&w, &h, SEC_CONFIG);
    char line[600];
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) { /* the config as `key = value` lines, as ngpt_config_print */
        const ConfigKey *k = &config_keys[i];
        const char *field = (const char *)&tr->cfg + k->offset;
        int n = 0;
        switch (k->type) {
        case KEY_INT: case KEY_BOOL: n = snprintf(line, sizeof line, "%s = %d\n", k->name, *(const int *)field); break;
        case KEY_I64: n = snprintf(line, sizeof line, "%s = %lld\n", k->name, *(const long long *)field); break;
        case KEY_FLOAT: n = snprintf(line, sizeof line, "%s = %.17g\n", k->name, *(const double *)field); break;
        case KEY_BYTES: n = snprintf(line, sizeof line, "%s = %.0f\n", k->name, *(const double *)field); break;
        case KEY_STR: n = snprintf(line, sizeof line, "%s = '%s'\n", k->name, field); break;
        default: break;
        }
        ckpt_put(&w, line, (size_t)MAX(n, 0));
    }
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
    if (!w.failed && (fseek(w.f, 0, SEEK_SET) || fwrite(&h, sizeof h, 1, w.f) != 1)) w.failed = errno ? errno : EIO;
    if (!w.failed && (fflush(w.f) || fsync(fileno(w.f)))) w.failed = errno ? errno : EIO;
    if (fclose(w.f) && !w.failed) w.failed = errno ? errno : EIO;
    if (!w.failed && rename(tmp, path)) w.failed = errno ? errno : EIO;
    int rc = be_check(tr, "writing a checkpoint");
    if (w.failed || rc) {
        unlink(tmp);
        if (rc) return rc;
        return tr_fail(tr, NGPT_ERR_IO, "writing checkpoint %s failed: %s; the previous checkpoint is untouched", path, strerror(w.failed));
    }
    return NGPT_OK;
}

typedef struct {
    FILE *f;
    CkptHeader h;
    CkptModel model;
    CkptState state;
} CkptReader;

/* Opens a checkpoint and checks its header, section table, model and state sections. */
static int checkpoint_open(CkptReader *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->f = fopen(path, "rb");
    if (!r->f) return fail(err, errlen, NGPT_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct stat st;
    fstat(fileno(r->f), &st);
    uint64_t size = (uint64_t)st.st_size;
    int rc = NGPT_OK;
    if (fread(&r->h, sizeof r->h, 1, r->f) != 1 || memcmp(r->h.magic, CKPT_MAGIC, 8))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s is not a nanogpt checkpoint (no '%s' magic; %llu bytes)", path, CKPT_MAGIC,
                  (unsigned long long)size);
    else if (r->h.version != CKPT_VERSION)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s is checkpoint version %u; this build reads version %d", path, r->h.version, CKPT_VERSION);
    else if (r->h.nsections != N_SECTIONS)
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %u sections, expected %d", path, r->h.nsections, N_SECTIONS);
    for (int i = 0; i < N_SECTIONS && !rc; i++) {
        const CkptSection *s = &r->h.sec[i];
        if (s->id != (uint32_t)(i + 1) || s->offset < sizeof r->h || s->offset > size || s->bytes > size - s->offset)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: section %d (%s) at offset %llu with %llu bytes lies outside the %llu-byte file (truncated?)",
                      path, i + 1, section_names[i + 1], (unsigned long long)s->offset, (unsigned long long)s->bytes, (unsigned long long)size);
    }
    /* small sections: read and verify now */
    struct { int id; void *dst; size_t n; } small[2] = {{SEC_MODEL, &r->model, sizeof r->model}, {SEC_STATE, &r->state, sizeof r->state}};
    for (int k = 0; k < 2 && !rc; k++) {
        const CkptSection *s = &r->h.sec[small[k].id - 1];
        Hash64 hs;
        hash_init(&hs);
        if (s->bytes != small[k].n || fseek(r->f, (long)s->offset, SEEK_SET) || fread(small[k].dst, small[k].n, 1, r->f) != 1)
            rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s section unreadable", path, section_names[small[k].id]);
        else {
            hash_update(&hs, small[k].dst, small[k].n);
            if (hash_final(&hs) != s->checksum)
                rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: %s section checksum mismatch (the file is corrupt)", path, section_names[small[k].id]);
        }
    }
    const CkptModel *m = &r->model;
    if (!rc && (m->L < 1 || m->NH < 1 || m->C < 1 || m->C % m->NH || m->V < 1 || m->Vp != pad_vocab(m->V) || m->maxT < 1 || (m->bias & ~1)))
        rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s: impossible model shape (L %d, NH %d, C %d, V %d, Vp %d, block %d)", path, m->L, m->NH, m->C,
                  m->V, m->Vp, m->maxT);
    if (rc) { fclose(r->f); r->f = NULL; }
    return rc;
}

/* Reads one big section into the device tensors at bases (esize bytes per value), checking its size and
 * checksum. */
static int checkpoint_read_tensors(ngpt_trainer *tr, CkptReader *r, const char *path, int id, void *base, size_t esize) {
    const CkptSection *s = &r->h.sec[id - 1];
    if (s->bytes != (uint64_t)tr->plan.nparams * 4)
        return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section has %llu bytes, the model needs %zu", path, section_names[id],
                       (unsigned long long)s->bytes, tr->plan.nparams * 4);
    if (fseek(r->f, (long)s->offset, SEEK_SET)) return tr_fail(tr, NGPT_ERR_IO, "%s: seek failed", path);
    Hash64 hs;
    hash_init(&hs);
    float *stage = (float *)tr->h_staging;
    size_t per = HOST_STAGING_BYTES / 8;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        char *dst = (char *)tensor_at(tr, base, i, esize);
        size_t n = tr->plan.param_len[i];
        for (size_t j = 0; j < n; j += per) {
            size_t k = MIN(per, n - j);
            if (fread(stage, 4, k, r->f) != k) return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section truncated", path, section_names[id]);
            hash_update(&hs, stage, k * 4);
            if (esize == 4) tr->be->upload(tr->be, dst + j * 4, stage, k * 4);
            else {
                uint16_t *raw = (uint16_t *)(stage + per);
                for (size_t q = 0; q < k; q++) { uint32_t u; memcpy(&u, &stage[q], 4); raw[q] = (uint16_t)(u >> 16); }
                tr->be->upload(tr->be, dst + j * 2, raw, k * 2);
            }
            tr->be->sync(tr->be);
        }
    }
    if (hash_final(&hs) != s->checksum)
        return tr_fail(tr, NGPT_ERR_FORMAT, "%s: %s section checksum mismatch (the file is corrupt)", path, section_names[id]);
    return be_check(tr, "loading a checkpoint");
}

/* Steps of the ckpt_<step>.bin files in dir, ascending; returns how many (at most cap). */
static int checkpoint_list(const char *dir, long long *steps, int cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strlen(nm) == 18 && !strncmp(nm, "ckpt_", 5) && !strcmp(nm + 14, ".bin") && strspn(nm + 5, "0123456789") == 9 && n < cap)
            steps[n++] = atoll(nm + 5);
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: a handful of files */
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) { long long t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    return n;
}

static void checkpoint_path(const char *dir, long long step, char *path, size_t n) { snprintf(path, n, "%.400s/ckpt_%09lld.bin", dir, step); }

#define KEEP_CHECKPOINTS 3

/* Saves ckpt_<step>.bin in out_dir, keeps the newest KEEP_CHECKPOINTS, and points best.bin at it when
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
    }
    long long steps[256];
    int n = checkpoint_list(dir, steps, 256);
    for (int i = 0; i + KEEP_CHECKPOINTS < n; i++) {
        checkpoint_path(dir, steps[i], path, sizeof path);
        unlink(path);
    }
    tr_log(tr, 0, "saved checkpoint %.400s/ckpt_%09d.bin%s", dir, tr->step, is_best ? " (best so far)" : "");
    return NGPT_OK;
}

int ngpt_save(ngpt_trainer *tr, const char *path) { return checkpoint_write(tr, path); }

/* Loads parameters, moments and training state from an open checkpoint whose model matches. */
static int checkpoint_load(ngpt_trainer *tr, CkptReader *r, const char *path) {
    const CkptModel *m = &r->model;
    const ModelShape *ms = &tr->ms;
    if (m->L != ms->L || m->NH != ms->NH || m->C != ms->C || m->V != ms->V || m->maxT != ms->maxT || m->bias != ms->bias)
        return tr_fail(tr, NGPT_ERR_FORMAT,
                       "%s holds a different model (n_layer %d, n_head %d, n_embd %d, vocab %d, block_size %d, bias %d) than this trainer "
                       "(%d, %d, %d, %d, %d, %d)",
                       path, m->L, m->NH, m->C, m->V, m->maxT, m->bias, ms->L, ms->NH, ms->C, ms->V, ms->maxT, ms->bias);
    int rc = checkpoint_read_tensors(tr, r, path, SEC_PARAMS, tr->master, 4);
    if (!rc) rc = checkpoint_read_tensors(tr, r, path, SEC_ADAM_M, tr->m, tr->plan.moment_bytes);
    if (!rc) rc = checkpoint_read_tensors(tr, r, path, SEC_ADAM_V, tr->v, tr->plan.moment_bytes);
    if (rc) return rc;
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        tr->be->cast_from_f32(tr->be, pt(tr, tr->params, i, 0), (float *)tensor_at(tr, tr->master, i, 4), tr->plan.param_len[i]);
    tr->step = (int)r->state.step;
    tr->eval_count = (int)r->state.eval_count;
    tr->rng_train.counter = (uint64_t)r->state.rng_train_counter;
    tr->best_val_loss = (float)r->state.best_val_loss;
    tr->last_loss = (float)r->state.last_loss;
    tr->be->sync(tr->be);
    return be_check(tr, "loading a checkpoint");
}

int ngpt_load(ngpt_trainer *tr, const char *path) {
    CkptReader r;
    int rc = checkpoint_open(&r, path, tr->err, sizeof tr->err);
    if (rc) return rc;
    rc = checkpoint_load(tr, &r, path);
    fclose(r.f);
    return rc;
}

static int trainer_setup(ngpt_trainer *tr) {
    ngpt_config *c = &tr->cfg;
    char msg[NGPT_ERRLEN], note[NGPT_ERRLEN], dir[300], path[400];
    int rc = config_validate(c, msg, sizeof msg);
    if (rc) return tr_fail(tr, rc, "%s", msg);
    int device, dtype;
    if ((rc = resolve_device(c, &device, &dtype, note, sizeof note, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
    if (note[0]) tr_log(tr, 1, "note: %s", note);

    /* resume: the model comes from the newest checkpoint in out_dir, the rest of the config from the caller */
    CkptReader resume = {0};
    char resume_path[512] = "";
    if (!strcmp(c->init_from, "resume")) {
        long long steps[256];
        int n = checkpoint_list(c->out_dir, steps, 256);
        if (!n) return tr_fail(tr, NGPT_ERR_IO, "init_from = resume, but out_dir %s holds no checkpoint (ckpt_<step>.bin)", c->out_dir);
        checkpoint_path(c->out_dir, steps[n - 1], resume_path, sizeof resume_path);
        if ((rc = checkpoint_open(&resume, resume_path, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        tr->resume_file = resume.f;
        c->n_layer = resume.model.L;
        c->n_head = resume.model.NH;
        c->n_embd = resume.model.C;
        c->block_size = resume.model.maxT;
        c->bias = resume.model.bias;
        c->vocab_size = resume.model.V;
        tr_log(tr, 0, "resuming from %s (step %lld)", resume_path, (long long)resume.state.step);
    }

    /* data and vocabulary */
    dataset_dir(c, dir, sizeof dir);
    int V = c->vocab_size;
    snprintf(path, sizeof path, "%s/meta.bin", dir);
    if (file_exists(path)) {
        tr->charvocab = (CharVocab *)malloc(sizeof *tr->charvocab);
        if (!tr->charvocab) return tr_fail(tr, NGPT_ERR_NOMEM, "out of host memory");
        if ((rc = charvocab_load(tr->charvocab, path, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        if (V == 0) V = tr->charvocab->n;
        else if (V < tr->charvocab->n)
            return tr_fail(tr, NGPT_ERR_ARG, "vocab_size = %d is below the %d characters of %s", V, tr->charvocab->n, path);
    }
    if (V == 0) V = 50257;
    if (V > 65536) return tr_fail(tr, NGPT_ERR_ARG, "vocab_size = %d: token files hold uint16 ids, so at most 65536", V);
    size_t min_tokens = (size_t)c->block_size + 1;
    snprintf(path, sizeof path, "%s/train.bin", dir);
    if ((rc = tokenfile_open(&tr->train_data, path, V, min_tokens, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    if ((rc = tokenfile_open(&tr->val_data, path, V, min_tokens, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);

    /* the model and the budget */
    tr->ms = (ModelShape){c->n_layer, c->n_head, c->n_embd, V, pad_vocab(V), c->block_size, c->bias};
    int nthreads = c->threads > 0 ? c->threads : cpu_count();
    double budget;
    if (device == DEV_BACKEND_CUDA) {
        size_t fr, total;
        if ((rc = ngpt_cuda_mem_info(&fr, &total, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);
        budget = (double)fr;
        if (c->max_memory > 0 && c->max_memory < budget) budget = c->max_memory;
        budget -= (double)CUDA_SAFETY_MARGIN;
    } else {
        budget = host_memory_available();
        if (c->max_memory > 0 && c->max_memory < budget) budget = c->max_memory;
    }
    PlanRequest req;
    plan_request_from_config(&req, c, &tr->ms, device, dtype, nthreads, budget);
    if ((rc = plan_make(&tr->plan, &req, msg, sizeof msg))) return tr_fail(tr, rc, "%s", msg);

    /* the backend and the one allocation */
    if (device == DEV_BACKEND_CUDA) rc = ngpt_cuda_backend_create(&tr->be, dtype, msg, sizeof msg);
    else rc = ngpt_cpu_backend_create(&tr->be, nthreads, msg, sizeof msg);
    if (rc) return tr_fail(tr, rc, "%s", msg);
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
    if ((rc = tr->be->arena_alloc(tr->be, tr->plan.device_bytes, &dev, tr->plan.host_bytes, &host))) {
        char b1[32];
        return tr_fail(tr, rc, "allocating the planned %s arena failed (another process may have taken memory since it was measured): %s",
                       fmt_bytes(b1, sizeof b1, (double)tr->plan.device_bytes), tr->be->msg);
    }
    tr->dev = (char *)dev;
    tr->host = (char *)host;
    trainer_carve(tr);
    memset(tr->h_counts, 0, tr->plan.host_bytes_of[H_COUNTS]);
    /* scratch: the train and eval layouts place it differently; hand over the one in use before each pass */
    tr->be->set_scratch(tr->be, slot(tr, &tr->plan.train, B_SCRATCH, 0), tr->plan.train.slot_bytes[B_SCRATCH]);

    tr->be->zero(tr->be, tr->grads, tr->plan.off_master - tr->plan.off_grads);
    tr->be->zero(tr->be, tr->m, tr->plan.off_region - tr->plan.off_m);
    tr->rng_train = (Rng){(uint64_t)c->seed, 1, 0};
    tr->best_val_loss = 1e9f;
    if (resume.f) {
        rc = checkpoint_load(tr, &resume, resume_path);
        fclose(resume.f);
        tr->resume_file = NULL;
        if (rc) return rc;
    } else if ((rc = init_params(tr))) return rc;
    tr->be->sync(tr->be);
    return be_check(tr, "setup");
}

int ngpt_trainer_create(const ngpt_config *cfg, const ngpt_options *opt, ngpt_trainer **out, char *err, size_t errlen) {
    *out = NULL;
    ngpt_trainer *tr = (ngpt_trainer *)calloc(1, sizeof *tr);
    if (!tr) return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory creating the trainer");
    tr->cfg = *cfg;
    if (opt) tr->opt = *opt;
    int rc = trainer_setup(tr);
    if (rc) {
        fail(err, errlen, rc, "%s", tr->err);
        ngpt_trainer_free(tr);
        return rc;
    }
    *out = tr;
    return NGPT_OK;
}

void ngpt_trainer_free(ngpt_trainer *tr) {
    if (!tr) return;
    if (tr->resume_file) fclose(tr->resume_file);
    if (tr->be) tr->be->destroy(tr->be);
    tokenfile_close(&tr->train_data);
    tokenfile_close(&tr->val_data);
    free(tr->charvocab);
    free(tr);
}

/* The forward-backward of one optimizer step over the micro-batches already chosen by fill(k), then the
 * update. fill(tr, k, ctx) writes micro-batch k into h_tokens/h_targets. Returns the mean loss in *loss. */
typedef void (*batch_fill_fn)(ngpt_trainer *tr, int micro, void *ctx);

/* Gradients of one optimizer step (zeroed first, accumulated over the planned micro-batches); the mean
 * loss goes to *mean. */
static int forward_backward(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, double *mean) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    int B = p->micro_batch, GA = p->grad_accum, T = p->req.T;
    be->set_scratch(be, slot(tr, &p->train, B_SCRATCH, 0), p->train.slot_bytes[B_SCRATCH]);
    be->zero(be, tr->grads, p->off_master - p->off_grads);
    float dscale = 1.0f / ((float)B * (float)T * (float)GA);
    double sum = 0;
    for (int k = 0; k < GA; k++) {
        fill(tr, k, ctx);
        sum += run_micro_batch(tr, &p->train, B, 1, k, dscale);
    }
    *mean = sum / ((double)B * T * GA);
    return be_check(tr, "the forward/backward pass");
}

static int train_step_with(ngpt_trainer *tr, batch_fill_fn fill, void *ctx, float *loss) {
    ngpt_backend *be = tr->be;
    const Plan *p = &tr->plan;
    double t0 = now_seconds();
    int B = p->micro_batch, GA = p->grad_accum, T = p->req.T;
    float lr = lr_at(&tr->cfg, tr->step);
    double mean;
    int rc = forward_backward(tr, fill, ctx, &mean);
    if (rc) return rc;
    double norm = optimizer_step(tr, lr);
    if ((rc = be_check(tr, "the optimizer step"))) return rc;
    if (!isfinite(mean) || !isfinite(norm))
        return tr_fail(tr, NGPT_ERR_NUMERIC, "step %d: the loss (%g) or the gradient norm (%g) is not finite; the parameters were not updated",
                       tr->step, mean, norm);
    be->sync(be);
    tr->step++;
    tr->last_loss = (float)mean;
    tr->lr = lr;
    tr->last_step_seconds = now_seconds() - t0;
    tr->last_step_tokens = (double)B * T * GA;
    if (loss) *loss = (float)mean;
    return NGPT_OK;
}

static void fill_from_train(ngpt_trainer *tr, int micro, void *ctx) {
    (void)micro;
    (void)ctx;
    sample_batch(tr, &tr->train_data, &tr->rng_train, tr->plan.micro_batch);
}

int ngpt_train_step(ngpt_trainer *tr, float *loss) { return train_step_with(tr, fill_from_train, NULL, loss); }

/* mean loss over eval_iters * batch_size sequences of one split, in eval micro-batches */
static int eval_split(ngpt_trainer *tr, const TokenFile *f, uint64_t stream, float *out) {
    const Plan *p = &tr->plan;
    int T = p->req.T;
    long long total = (long long)tr->cfg.eval_iters * tr->cfg.batch_size;
    Rng rng = {(uint64_t)tr->cfg.seed, stream, 0};
    double sum = 0;
    for (long long done = 0; done < total;) {
        int B = (int)MIN((long long)p->eval_micro_batch, total - done);
        sample_batch(tr, f, &rng, B);
        sum += run_micro_batch(tr, &p->eval, B, 0, 0, 0.0f);
        done += B;
    }
    int rc = be_check(tr, "evaluation");
    if (rc) return rc;
    *out = (float)(sum / ((double)total * T));
    return NGPT_OK;
}

int ngpt_evaluate(ngpt_trainer *tr, float *train_loss, float *val_loss) {
    ngpt_backend *be = tr->be;
    be->set_scratch(be, slot(tr, &tr->plan.eval, B_SCRATCH, 0), tr->plan.eval.slot_bytes[B_SCRATCH]);
    /* fresh windows at every evaluation, reproducible from (seed, step): a resumed run sees the same */
    uint64_t base = 0x1000 + (uint64_t)tr->step * 2;
    int rc = eval_split(tr, &tr->train_data, base, train_loss);
    if (!rc) rc = eval_split(tr, &tr->val_data, base + 1, val_loss);
    if (rc) return rc;
    tr->eval_count++;
    if (*val_loss < tr->best_val_loss) tr->best_val_loss = *val_loss;
    return NGPT_OK;
}

void ngpt_get_stats(const ngpt_trainer *tr, ngpt_stats *st) {
    memset(st, 0, sizeof *st);
    st->step = tr->step;
    st->best_val_loss = tr->best_val_loss;
    st->last_loss = tr->last_loss;
    st->lr = tr->lr;
    st->micro_batch = tr->plan.micro_batch;
    st->grad_accum = tr->plan.grad_accum;
    st->eval_micro_batch = tr->plan.eval_micro_batch;
    st->recompute = tr->plan.recompute;
    st->logits_chunk = tr->plan.logits_chunk;
    st->parameters = tr->plan.nparams - (size_t)(tr->ms.Vp - tr->ms.V) * tr->ms.C;
    st->device_bytes = tr->plan.device_bytes;
    st->host_bytes = tr->plan.host_bytes;
    st->tokens_per_second = tr->last_step_seconds > 0 ? tr->last_step_tokens / tr->last_step_seconds : 0;
    st->device = tr->be->name;
}

void ngpt_request_stop(ngpt_trainer *tr) { atomic_store(&tr->stop_requested, 1); }

int ngpt_train(ngpt_trainer *tr) {
    const ngpt_config *c = &tr->cfg;
    for (;;) {
        if (tr->step % c->eval_interval == 0) {
            float tl, vl, best_before = tr->best_val_loss;
            int rc = ngpt_evaluate(tr, &tl, &vl);
            if (rc) return rc;
            tr_log(tr, 0, "step %d: train loss %.4f, val loss %.4f", tr->step, (double)tl, (double)vl);
            /* nanoGPT: save when val improves, or at every evaluation with always_save_checkpoint */
            if (tr->step > 0 && (vl < best_before || c->always_save_checkpoint) && (rc = checkpoint_save(tr, vl < best_before)))
                return rc;
        }
        if (tr->step == 0 && c->eval_only) break;
        if (tr->step >= c->max_iters + 1) break;
        float loss;
        int rc = ngpt_train_step(tr, &loss);
        if (rc) return rc;
        int it = tr->step - 1;
        if (it % c->log_interval == 0) {
            ngpt_stats st;
            ngpt_get_stats(tr, &st);
            tr_log(tr, 0, "iter %d: loss %.4f, time %.2fms, lr %.3e, %.0f tok/s", it, (double)loss, tr->last_step_seconds * 1e3,
                   (double)tr->lr, st.tokens_per_second);
        }
        if (tr->step > c->max_iters) break;
        if (atomic_load(&tr->stop_requested)) {
            int rc = checkpoint_save(tr, 0);
            if (rc) return rc;
            return tr_fail(tr, NGPT_ERR_INTERRUPTED, "stopped at step %d; the checkpoint is saved: resume with --init_from=resume", tr->step);
        }
    }
    return NGPT_OK;
}

/* ======================================================================================================
 * Preparing data: text -> train.bin / val.bin (nanoGPT's raw uint16) and meta.bin, at the character
 * level, streaming (two passes over the file: one for the vocabulary, one to write the ids).
 * ==================================================================================================== */

static int charvocab_save(const CharVocab *v, const char *path, char *err, size_t errlen) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%.1000s.tmp", path);
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
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return fail(err, errlen, NGPT_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return NGPT_OK;
}

/* Streams the code points of a UTF-8 file to fn(ctx, cp) in 1 MiB reads. */
typedef int (*cp_fn)(void *ctx, uint32_t cp);
static int for_each_codepoint(const char *path, cp_fn fn, void *ctx, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, errlen, NGPT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    enum { BUF = 1 << 20 };
    unsigned char *buf = (unsigned char *)malloc(BUF + 4);
    if (!buf) { fclose(f); return fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory"); }
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
    fclose(f);
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
    return ok ? 0 : NGPT_ERR_IO;
}

static int prep_write(void *ctx, uint32_t cp) {
    CharPrep *p = (CharPrep *)ctx;
    if (p->written == p->n_train && !p->to_val) {
        if (prep_flush(p)) return NGPT_ERR_IO;
        p->to_val = 1;
    }
    p->out[p->nout++] = (uint16_t)p->id_of[cp];
    p->written++;
    if (p->nout == sizeof p->out / sizeof p->out[0]) return prep_flush(p);
    return 0;
}

/* text file -> out_dir/{train,val}.bin + meta.bin; the last val_fraction of the characters is val */
static int prepare_char(const char *input, const char *out_dir, double val_fraction, FILE *log, char *err, size_t errlen) {
    CharPrep p;
    memset(&p, 0, sizeof p);
    CharVocab *v = (CharVocab *)calloc(1, sizeof *v);
    p.seen = (uint8_t *)calloc(0x110000 / 8, 1);
    p.id_of = (int32_t *)calloc(0x110000, sizeof(int32_t));
    char tpath[600], vpath[600], mpath[600], ttmp[610], vtmp[610];
    int rc = NGPT_OK;
    if (!v || !p.seen || !p.id_of) { rc = fail(err, errlen, NGPT_ERR_NOMEM, "out of host memory"); goto done; }
    if ((rc = for_each_codepoint(input, prep_count, &p, err, errlen))) goto done;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (p.seen[cp >> 3] >> (cp & 7) & 1) {
            if (v->n == 65536) { rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s has more than 65536 distinct characters (ids are uint16)", input); goto done; }
            p.id_of[cp] = v->n;
            v->cp[v->n++] = cp;
        }
    if (p.count < 2) { rc = fail(err, errlen, NGPT_ERR_FORMAT, "%s has %zu characters; need at least 2", input, p.count); goto done; }
    p.n_train = (size_t)((double)p.count * (1.0 - val_fraction));
    mkdir(out_dir, 0777);
    snprintf(tpath, sizeof tpath, "%s/train.bin", out_dir);
    snprintf(vpath, sizeof vpath, "%s/val.bin", out_dir);
    snprintf(mpath, sizeof mpath, "%s/meta.bin", out_dir);
    snprintf(ttmp, sizeof ttmp, "%s.tmp", tpath);
    snprintf(vtmp, sizeof vtmp, "%s.tmp", vpath);
    p.train = fopen(ttmp, "wb");
    p.val = fopen(vtmp, "wb");
    if (!p.train || !p.val) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot create %s: %s", !p.train ? ttmp : vtmp, strerror(errno)); goto done; }
    rc = for_each_codepoint(input, prep_write, &p, err, errlen);
    if (!rc && prep_flush(&p)) rc = NGPT_ERR_IO;
    if (rc == NGPT_ERR_IO) { fail(err, errlen, rc, "writing %s or %s failed: %s", ttmp, vtmp, strerror(errno)); goto done; }
    if (rc) goto done;
    if (fflush(p.train) || fsync(fileno(p.train)) || fflush(p.val) || fsync(fileno(p.val))) {
        rc = fail(err, errlen, NGPT_ERR_IO, "writing %s failed: %s", out_dir, strerror(errno));
        goto done;
    }
    fclose(p.train);
    fclose(p.val);
    p.train = p.val = NULL;
    if ((rc = charvocab_save(v, mpath, err, errlen))) goto done;
    if (rename(ttmp, tpath) || rename(vtmp, vpath)) { rc = fail(err, errlen, NGPT_ERR_IO, "cannot rename into %s: %s", out_dir, strerror(errno)); goto done; }
    if (log)
        fprintf(log, "prepared %s: %zu characters, vocabulary %d; train has %zu tokens, val has %zu tokens -> %s/{train,val,meta}.bin\n",
                input, p.count, v->n, p.n_train, p.count - p.n_train, out_dir);
done:
    if (p.train) { fclose(p.train); unlink(ttmp); }
    if (p.val) { fclose(p.val); unlink(vtmp); }
    free(v);
    free(p.seen);
    free(p.id_of);
    return rc;
}

/* ======================================================================================================
 * Command line
 * ==================================================================================================== */

/* The default job: nanoGPT's shakespeare_char recipe (data/shakespeare_char/train.cfg) on a GPU, and its
 * documented CPU variant (data/shakespeare_char/train_cpu.cfg) on the CPU. */
static const char *const preset_shakespeare_char[] = {
    "out_dir=out-shakespeare-char", "eval_interval=250", "eval_iters=200", "log_interval=10", "always_save_checkpoint=False",
    "dataset=shakespeare_char", "gradient_accumulation_steps=1", "batch_size=64", "block_size=256", "n_layer=6", "n_head=6",
    "n_embd=384", "dropout=0.2", "learning_rate=1e-3", "max_iters=5000", "lr_decay_iters=5000", "min_lr=1e-4", "beta2=0.99",
    "warmup_iters=100", NULL};
static const char *const preset_shakespeare_char_cpu[] = {
    "out_dir=out-shakespeare-char", "eval_interval=250", "eval_iters=20", "log_interval=10", "always_save_checkpoint=False",
    "dataset=shakespeare_char", "gradient_accumulation_steps=1", "batch_size=12", "block_size=64", "n_layer=4", "n_head=4",
    "n_embd=128", "dropout=0.0", "learning_rate=1e-3", "max_iters=2000", "lr_decay_iters=2000", "min_lr=1e-4", "beta2=0.99",
    "warmup_iters=100", NULL};

#define TINY_SHAKESPEARE_URL "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"

static void apply_preset(ngpt_config *c, const char *const *kv) {
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

static void print_log(void *ctx, int level, const char *line) {
    (void)ctx;
    FILE *f = level ? stderr : stdout;
    fprintf(f, "%s\n", line);
    fflush(f);
}

static void usage(FILE *f) {
    fprintf(f,
            "nanogpt %s - train GPT-2 in C, planned to never run out of memory\n"
            "\n"
            "usage: nanogpt <command> [config file] [--key=value ...]\n"
            "  train     train a model (no config: the baby GPT on Tiny Shakespeare characters)\n"
            "  plan      print the memory plan for a config (--json for JSON); no GPU needed\n"
            "  prepare   text -> train.bin/val.bin/meta.bin (character level): --input=FILE --out=DIR [--val_fraction=0.1]\n"
            "  info      the devices this build can use\n"
            "  help      this text; `nanogpt help config` lists every config key\n",
            NGPT_VERSION);
}

static void print_config_keys(void) {
    ngpt_config d;
    ngpt_config_defaults(&d);
    printf("config keys (nanoGPT's names; a config file holds `key = value` lines, --key=value overrides):\n");
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        const ConfigKey *k = &config_keys[i];
        if (k->type == KEY_IGNORED) continue;
        printf("  %-28s %s", k->name, k->help);
        if (k->choices) printf(" (%s)", k->choices);
        printf("\n");
    }
}

/* Parses [config file] [--key=value ...] into cfg. When there is no config file, the default job's preset
 * for device applies first. Unknown arguments are errors. Sets *json for --json. */
static int parse_args(int argc, char **argv, ngpt_config *cfg, int *has_file, int *json, char *err, size_t errlen) {
    ngpt_config_defaults(cfg);
    *has_file = 0;
    if (json) *json = 0;
    if (argc > 0 && strncmp(argv[0], "--", 2)) {
        *has_file = 1;
        int rc = ngpt_config_load(cfg, argv[0], err, errlen);
        if (rc) return rc;
    } else {
        /* the default job: which preset depends on where it will run */
        ngpt_config probe = *cfg;
        for (int i = 0; i < argc; i++)
            if (!strncmp(argv[i], "--device=", 9)) copy_str(probe.device, sizeof probe.device, argv[i] + 9);
        int device, dtype;
        char note[NGPT_ERRLEN], msg[NGPT_ERRLEN];
        int gpu = resolve_device(&probe, &device, &dtype, note, sizeof note, msg, sizeof msg) == NGPT_OK && device == DEV_BACKEND_CUDA;
        apply_preset(cfg, gpu ? preset_shakespeare_char : preset_shakespeare_char_cpu);
    }
    for (int i = *has_file; i < argc; i++) {
        const char *a = argv[i];
        if (json && !strcmp(a, "--json")) { *json = 1; continue; }
        if (strncmp(a, "--", 2) || !strchr(a, '='))
            return fail(err, errlen, NGPT_ERR_ARG, "argument '%s': expected --key=value (the config file, if any, comes first)", a);
        char key[128];
        const char *eq = strchr(a, '=');
        size_t n = MIN((size_t)(eq - a - 2), sizeof key - 1);
        memcpy(key, a + 2, n);
        key[n] = 0;
        char msg[NGPT_ERRLEN];
        int rc = ngpt_config_set(cfg, key, eq + 1, msg, sizeof msg);
        if (rc) return fail(err, errlen, rc, "--%s: %s", key, msg);
    }
    return NGPT_OK;
}

/* The default dataset: data/shakespeare_char from the input file, downloading Tiny Shakespeare if needed. */
static int ensure_shakespeare_char(const ngpt_config *cfg, char *err, size_t errlen) {
    char dir[300], path[400], input[400];
    dataset_dir(cfg, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    if (file_exists(path) || strcmp(cfg->dataset, "shakespeare_char") || cfg->data_dir[0]) return NGPT_OK;
    if (cfg->input[0]) snprintf(input, sizeof input, "%s", cfg->input);
    else snprintf(input, sizeof input, "%s/input.txt", dir);
    if (!file_exists(input)) {
        if (cfg->input[0]) return fail(err, errlen, NGPT_ERR_IO, "input = %s: no such file", cfg->input);
        mkdir("data", 0777);
        mkdir(dir, 0777);
        printf("downloading Tiny Shakespeare from %s\n", TINY_SHAKESPEARE_URL);
        fflush(stdout);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "curl -fsSL --max-time 60 -o '%s.part' '%s' 2>/dev/null || wget -q -T 60 -O '%s.part' '%s' 2>/dev/null",
                 input, TINY_SHAKESPEARE_URL, input, TINY_SHAKESPEARE_URL);
        char part[420];
        snprintf(part, sizeof part, "%s.part", input);
        if (system(cmd) != 0 || rename(part, input) != 0) {
            unlink(part);
            return fail(err, errlen, NGPT_ERR_IO,
                        "could not download Tiny Shakespeare (offline?). Put the text at %s, or pass --input=/path/to/input.txt", input);
        }
    }
    return prepare_char(input, dir, 0.1, stdout, err, errlen);
}

static int cmd_train(int argc, char **argv) {
    ngpt_config cfg;
    char err[NGPT_ERRLEN];
    int has_file;
    if (parse_args(argc, argv, &cfg, &has_file, NULL, err, sizeof err) || ensure_shakespeare_char(&cfg, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    if (!has_file)
        printf("no config file: the default job, nanoGPT's shakespeare_char recipe (n_layer %d, n_embd %d, block_size %d, %d iterations)\n",
               cfg.n_layer, cfg.n_embd, cfg.block_size, cfg.max_iters);
    ngpt_options opt = {print_log, NULL};
    ngpt_trainer *tr;
    if (ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    ngpt_stats st;
    ngpt_get_stats(tr, &st);
    char b1[32], b2[32];
    printf("%s: %.2fM parameters; plan: micro-batch %d x accumulation %d (%d tokens/step), recompute %s, logits chunk %d, eval micro-batch %d; "
           "arena %s device + %s host\n",
           st.device, (double)st.parameters / 1e6, st.micro_batch, st.grad_accum, st.micro_batch * st.grad_accum * cfg.block_size,
           recompute_name(st.recompute), st.logits_chunk, st.eval_micro_batch, fmt_bytes(b1, sizeof b1, (double)st.device_bytes),
           fmt_bytes(b2, sizeof b2, (double)st.host_bytes));
    double t0 = now_seconds();
    int rc = ngpt_train(tr);
    if (rc) fprintf(stderr, "error: %s\n", ngpt_last_error(tr));
    else {
        ngpt_get_stats(tr, &st);
        printf("done: %d steps in %.1f s, best val loss %.4f\n", st.step, now_seconds() - t0, (double)st.best_val_loss);
    }
    ngpt_trainer_free(tr);
    return rc ? 1 : 0;
}

static int cmd_plan(int argc, char **argv) {
    ngpt_config cfg;
    char err[NGPT_ERRLEN], dir[300], path[400];
    int has_file, json;
    if (parse_args(argc, argv, &cfg, &has_file, &json, err, sizeof err) || config_validate(&cfg, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    int V = cfg.vocab_size;
    snprintf(path, sizeof path, "%s/meta.bin", dataset_dir(&cfg, dir, sizeof dir));
    if (!V && file_exists(path)) {
        CharVocab *cv = (CharVocab *)malloc(sizeof *cv);
        if (cv && !charvocab_load(cv, path, err, sizeof err)) V = cv->n;
        free(cv);
    }
    if (!V) V = 50257;
    ModelShape ms = {cfg.n_layer, cfg.n_head, cfg.n_embd, V, pad_vocab(V), cfg.block_size, cfg.bias};
    int device = strcmp(cfg.device, "cuda") ? DEV_BACKEND_CPU : DEV_BACKEND_CUDA, dtype = NGPT_DTYPE_F32;
    char note[NGPT_ERRLEN];
    if (!strcmp(cfg.device, "auto") && !resolve_device(&cfg, &device, &dtype, note, sizeof note, err, sizeof err)) {}
    if (device == DEV_BACKEND_CUDA)
        dtype = !strcmp(cfg.dtype, "float32") ? NGPT_DTYPE_F32 : !strcmp(cfg.dtype, "float16") ? NGPT_DTYPE_F16 : NGPT_DTYPE_BF16;
    double budget = cfg.max_memory;
    if (device == DEV_BACKEND_CUDA) {
        size_t fr = 0, total = 0;
        if (!ngpt_cuda_mem_info(&fr, &total, err, sizeof err) && (budget <= 0 || (double)fr < budget)) budget = (double)fr;
        if (budget <= 0) {
            fprintf(stderr, "error: no GPU here to measure; give the card's free memory with --max_memory (e.g. --max_memory=2.68GiB)\n");
            return 1;
        }
        budget -= (double)CUDA_SAFETY_MARGIN;
    } else if (budget <= 0) budget = host_memory_available();
    PlanRequest req;
    plan_request_from_config(&req, &cfg, &ms, device, dtype, cfg.threads > 0 ? cfg.threads : cpu_count(), budget);
    Plan p;
    int rc = plan_make(&p, &req, err, sizeof err);
    if (json) plan_print_json(&p, stdout);
    else plan_print(&p, stdout);
    if (rc) fprintf(stderr, "error: %s\n", err);
    return rc ? 1 : 0;
}

static int cmd_prepare(int argc, char **argv) {
    const char *input = NULL, *out = NULL;
    double val_fraction = 0.1;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "--input=", 8)) input = argv[i] + 8;
        else if (!strncmp(argv[i], "--out=", 6)) out = argv[i] + 6;
        else if (!strncmp(argv[i], "--val_fraction=", 15)) {
            if (parse_number(argv[i] + 15, &val_fraction) || val_fraction <= 0 || val_fraction >= 1) {
                fprintf(stderr, "error: --val_fraction=%s: must be a number in (0, 1)\n", argv[i] + 15);
                return 1;
            }
        } else {
            fprintf(stderr, "error: prepare: unknown argument '%s' (valid: --input=FILE --out=DIR --val_fraction=X)\n", argv[i]);
            return 1;
        }
    }
    if (!input || !out) {
        fprintf(stderr, "error: prepare needs --input=FILE and --out=DIR\n");
        return 1;
    }
    char err[NGPT_ERRLEN];
    if (prepare_char(input, out, val_fraction, stdout, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    return 0;
}

static int cmd_info(void) {
    char line[512];
    printf("nanogpt %s\n", NGPT_VERSION);
    printf("cpu: %d cores, %.1f GiB available\n", cpu_count(), host_memory_available() / 0.9 / GiB);
    int rc = ngpt_cuda_describe(line, sizeof line);
    printf("cuda: %s\n", line);
    return rc == NGPT_OK || rc == NGPT_ERR_DEVICE ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc - 2, argv + 2);
    if (!strcmp(cmd, "prepare")) return cmd_prepare(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info();
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2 && !strcmp(argv[2], "config")) print_config_keys();
        else usage(stdout);
        return 0;
    }
    fprintf(stderr, "error: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
#endif /* NGPT_NO_MAIN */
