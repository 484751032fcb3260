/* tools/bench_cpu_ops.c - time every CPU backend op at the shapes of one training step, print ms and GFLOP/s.
 *
 *   mkdir -p build && cc -O3 -march=native -fno-trapping-math -fno-math-errno -Wno-unused-function -o build/bench_cpu_ops tools/bench_cpu_ops.c -lm -lpthread
 *   build/bench_cpu_ops [B T C NH L V [threads]]     (default: nanoGPT's CPU recipe, 12 64 128 4 4 65)
 *
 * Each op runs on the backend's thread pool, repeated until 0.2 s have passed; the table gives the fastest
 * call (on a shared or virtual machine the fastest is the least disturbed one) and the median, the FLOP rate
 * of the fastest (matmuls and attention), and the step's estimated total (each op's fastest time times the
 * number of calls one step makes). Correctness of these ops is test/test_ops.c's job; this only times. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *rand_buf(size_t n, uint64_t stream) {
    float *x = (float *)aligned_alloc(64, ALIGN_UP(n * sizeof(float), 64));
    if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * normal_at(7, stream, i);
    return x;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *ctx);
static double step_total_ms;

static void bench_op(const char *name, bench_fn fn, void *ctx, double flops, int calls_per_step) {
    double times[4096];
    int n = 0;
    fn(ctx); /* warm */
    double start = now_s();
    while (n < 4096 && (n < 5 || now_s() - start < 0.2)) {
        double t0 = now_s();
        fn(ctx);
        times[n++] = now_s() - t0;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    double best = times[0], med = times[n / 2];
    step_total_ms += 1e3 * best * calls_per_step;
    char rate[32] = "";
    if (flops > 0) snprintf(rate, sizeof rate, "%7.1f GFLOP/s", flops / best / 1e9);
    printf("%-24s %8.3f ms (median %8.3f) %15s  x%-3d %7.2f ms/step\n", name, 1e3 * best, 1e3 * med, rate, calls_per_step,
           1e3 * best * calls_per_step);
}

static ngpt_backend *be;
static int B, T, C, NH, L, V, Vp, N;

typedef struct { float *out, *inp, *w, *bias, *dinp, *dw, *dbias, *dout; int IC, OC; } MatCtx;
static void mm_fwd(void *p) { MatCtx *m = (MatCtx *)p; be->matmul_forward(be, m->out, m->inp, m->w, m->bias, N, m->IC, m->OC); }
static void mm_bwd(void *p) { MatCtx *m = (MatCtx *)p; be->matmul_backward(be, m->dinp, m->dw, m->dbias, m->dout, m->inp, m->w, N, m->IC, m->OC); }

typedef struct { float *out, *lse, *qkv, *dqkv, *dout; ngpt_dropout drop; } AttCtx;
static void att_fwd(void *p) { AttCtx *a = (AttCtx *)p; be->attention_forward(be, a->out, a->lse, a->qkv, B, T, C, NH, &a->drop); }
static void att_bwd(void *p) { AttCtx *a = (AttCtx *)p; be->attention_backward(be, a->dqkv, a->dout, a->qkv, a->out, a->lse, B, T, C, NH, &a->drop); }

typedef struct { float *out, *mean, *rstd, *inp, *w, *b, *dinp, *dw, *db, *dout; } LnCtx;
static void ln_fwd(void *p) { LnCtx *l = (LnCtx *)p; be->layernorm_forward(be, l->out, l->mean, l->rstd, l->inp, l->w, l->b, N, C); }
static void ln_bwd(void *p) { LnCtx *l = (LnCtx *)p; be->layernorm_backward(be, l->dinp, l->dw, l->db, l->dout, l->inp, l->w, l->mean, l->rstd, N, C); }

typedef struct { float *out, *inp, *dout, *dinp; size_t n; } EwCtx;
static void gelu_fwd(void *p) { EwCtx *e = (EwCtx *)p; be->gelu_forward(be, e->out, e->inp, e->n); }
static void gelu_bwd(void *p) { EwCtx *e = (EwCtx *)p; be->gelu_backward(be, e->dinp, e->inp, e->dout, e->n); }
static void resid(void *p) { EwCtx *e = (EwCtx *)p; be->residual_forward(be, e->out, e->inp, e->dout, e->n); }

typedef struct { float *logits, *losses; int32_t *targets; } CeCtx;
static void xent(void *p) { CeCtx *c = (CeCtx *)p; be->crossentropy(be, c->logits, c->losses, c->targets, N, V, Vp, 1.0f / N); }

typedef struct { float *param, *master, *grad, *m, *v; size_t n; ngpt_adamw h; } AdamCtx;
static void adam(void *p) { AdamCtx *a = (AdamCtx *)p; be->adamw(be, a->param, a->master, a->grad, a->m, a->v, a->n, &a->h); }

int main(int argc, char **argv) {
    B = 12, T = 64, C = 128, NH = 4, L = 4, V = 65;
    int threads = 0;
    if (argc >= 7) { B = atoi(argv[1]); T = atoi(argv[2]); C = atoi(argv[3]); NH = atoi(argv[4]); L = atoi(argv[5]); V = atoi(argv[6]); }
    if (argc >= 8) threads = atoi(argv[7]);
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH || L <= 0 || V <= 0) { fprintf(stderr, "bad shape\n"); return 2; }
    Vp = (V + 63) / 64 * 64;
    N = B * T;
    char err[256];
    if (ngpt_cpu_backend_create(&be, threads, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    ngpt_shape shape = {B, T, C, NH, L, Vp, N};
    size_t sb = be->scratch_bytes(be, &shape);
    be->set_scratch(be, rand_buf(sb / sizeof(float) + 16, 99), sb);
    printf("shape B=%d T=%d C=%d NH=%d L=%d V=%d (Vp %d), %d threads\n", B, T, C, NH, L, V, Vp, cpu_of(be)->nthreads);

    size_t maxw = (size_t)4 * C * C, maxa = (size_t)N * 4 * C;
    MatCtx m = {rand_buf(maxa, 1), rand_buf(maxa, 2), rand_buf(maxw, 3), rand_buf(4 * C, 4), rand_buf(maxa, 5), rand_buf(maxw, 6),
                rand_buf(4 * C, 7), rand_buf(maxa, 8), 0, 0};
    struct { const char *name; int IC, OC, calls; } lin[] = {
        {"qkv", C, 3 * C, L}, {"attn proj", C, C, L}, {"fc", C, 4 * C, L}, {"mlp proj", 4 * C, C, L}, {"classifier", C, Vp, 1}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        char name[64];
        m.IC = lin[i].IC, m.OC = lin[i].OC;
        double fl = 2.0 * N * m.IC * m.OC;
        snprintf(name, sizeof name, "matmul fwd %s", lin[i].name);
        bench_op(name, mm_fwd, &m, fl, lin[i].calls);
        snprintf(name, sizeof name, "matmul bwd %s", lin[i].name);
        bench_op(name, mm_bwd, &m, 2 * fl, lin[i].calls);
    }
    AttCtx a = {rand_buf((size_t)N * C, 10), rand_buf((size_t)B * NH * T, 11), rand_buf((size_t)N * 3 * C, 12),
                rand_buf((size_t)N * 3 * C, 13), rand_buf((size_t)N * C, 14), {0, 1, 2, 0}};
    double att_fl = 2.0 * 2.0 * B * NH * (T * (T + 1.0) / 2.0) * (C / NH); /* causal: QK^T and PV over t2 <= t */
    att_fwd(&a); /* lse must be the forward's */
    bench_op("attention fwd", att_fwd, &a, att_fl, L);
    bench_op("attention bwd", att_bwd, &a, 2.5 * att_fl, L);
    LnCtx ln = {rand_buf((size_t)N * C, 20), rand_buf(N, 21), rand_buf(N, 22), rand_buf((size_t)N * C, 23), rand_buf(C, 24),
                rand_buf(C, 25), rand_buf((size_t)N * C, 26), rand_buf(C, 27), rand_buf(C, 28), rand_buf((size_t)N * C, 29)};
    ln_fwd(&ln);
    bench_op("layernorm fwd", ln_fwd, &ln, 0, 2 * L + 1);
    bench_op("layernorm bwd", ln_bwd, &ln, 0, 2 * L + 1);
    EwCtx g = {rand_buf(maxa, 30), rand_buf(maxa, 31), rand_buf(maxa, 32), rand_buf(maxa, 33), (size_t)N * 4 * C};
    bench_op("gelu fwd", gelu_fwd, &g, 0, L);
    bench_op("gelu bwd", gelu_bwd, &g, 0, L);
    EwCtx r = g;
    r.n = (size_t)N * C;
    bench_op("residual", resid, &r, 0, 2 * L);
    CeCtx ce = {rand_buf((size_t)N * Vp, 40), rand_buf(N, 41), (int32_t *)malloc(sizeof(int32_t) * N)};
    for (int i = 0; i < N; i++) ce.targets[i] = i % V;
    bench_op("crossentropy", xent, &ce, 0, 1);
    size_t np = (size_t)L * 12 * C * C + (size_t)Vp * C + (size_t)T * C;
    AdamCtx ad = {rand_buf(np, 50), rand_buf(np, 51), rand_buf(np, 52), rand_buf(np, 53), rand_buf(np, 54), np,
                  {1e-3f, 0.9f, 0.99f, 0.1f, 0.01f, 0.5f, 0.5f, 1e-8f, 0.1f, 1.0f, NGPT_DTYPE_F32, 0, 0}};
    for (size_t i = 0; i < np; i++) ad.v[i] = fabsf(ad.v[i]);
    bench_op("adamw (all parameters)", adam, &ad, 0, 1);
    printf("sum over one step: %.2f ms (ops only; the trainer adds encoder, copies and the loss read)\n", step_total_ms);
    be->destroy(be);
    return 0;
}
