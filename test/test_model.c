/* test_model.c: the whole model on the CPU backend.
 *  - against the PyTorch reference (tools/reference.py, fixtures in test/fixtures/): logits, loss, every
 *    parameter gradient, the losses of 10 AdamW steps and the parameters after them;
 *  - chunked loss == unchunked; 6 sequences in one micro-batch (two lanes of 3) == 2 accumulated micro-batches
 *    of 3 (lanes of 2 and 1) == 6 of 1 (one lane), with dropout too;
 *    every recompute level gives the same gradients; dropout is reproducible;
 *  - dropout at every nanoGPT site in training (forward and backward on the same masks) and none in evaluation; with
 *    dropout, the gradients are the central differences of the step's loss;
 *  - an evaluation reads eval_iters x batch_size windows; the batches draw every window start, the last included;
 *  - the loss scale is divided out before clipping and AdamW (a step at scale 1024 is the step at 1, bit for bit);
 *  - nothing is allocated while training (malloc and friends are counted). */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "trainer_util.h"
#include "files.h"

/* ---- counting allocations: the test binary's own malloc family, forwarding to glibc ---- */
#ifndef NGPT_SANITIZE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static _Atomic long allocations;
void *malloc(size_t n) { atomic_fetch_add(&allocations, 1); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add(&allocations, 1); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add(&allocations, 1); return __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    atomic_fetch_add(&allocations, 1);
    *out = __libc_memalign(align, n);
    return *out ? 0 : ENOMEM;
}
void *aligned_alloc(size_t align, size_t n) { atomic_fetch_add(&allocations, 1); return __libc_memalign(align, n); }
#endif

/* ---- a fixture from tools/reference.py ---- */
typedef struct {
    int V, Vp, block_size, L, NH, C, bias, B, T, nsteps;
    float lr, beta1, beta2, eps, weight_decay, grad_clip;
    int32_t *tokens, *targets;
    float *params, *logits, loss, *grads, *step_losses, *params_after;
    size_t P;
} Fixture;

static int read_exact(FILE *f, void *p, size_t bytes) { return fread(p, 1, bytes, f) == bytes; }

static int fixture_load(Fixture *fx, const char *path) {
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    if (!f) { printf("cannot open %s\n", path); return 0; }
    int32_t h[16];
    float hy[8];
    int ok = read_exact(f, h, sizeof h) && h[0] == 20261121 && h[1] == 1 && read_exact(f, hy, sizeof hy);
    if (ok) {
        fx->V = h[2]; fx->Vp = h[3]; fx->block_size = h[4]; fx->L = h[5]; fx->NH = h[6]; fx->C = h[7]; fx->bias = h[8];
        fx->B = h[9]; fx->T = h[10]; fx->nsteps = h[11];
        fx->lr = hy[0]; fx->beta1 = hy[1]; fx->beta2 = hy[2]; fx->eps = hy[3]; fx->weight_decay = hy[4]; fx->grad_clip = hy[5];
        ModelShape ms = {fx->L, fx->NH, fx->C, fx->V, fx->Vp, fx->block_size, fx->bias};
        size_t sizes[N_PARAM_TENSORS];
        fx->P = param_sizes(&ms, sizes);
        size_t N = (size_t)fx->B * fx->T;
        fx->tokens = malloc(N * 4); fx->targets = malloc(N * 4);
        fx->params = malloc(fx->P * 4); fx->logits = malloc(N * fx->V * 4); fx->grads = malloc(fx->P * 4);
        fx->step_losses = malloc(fx->nsteps * 4); fx->params_after = malloc(fx->P * 4);
        ok = read_exact(f, fx->tokens, N * 4) && read_exact(f, fx->targets, N * 4) && read_exact(f, fx->params, fx->P * 4) &&
             read_exact(f, fx->logits, N * fx->V * 4) && read_exact(f, &fx->loss, 4) && read_exact(f, fx->grads, fx->P * 4) &&
             read_exact(f, fx->step_losses, fx->nsteps * 4) && read_exact(f, fx->params_after, fx->P * 4) && fgetc(f) == EOF;
    }
    fclose(f);
    if (!ok) printf("%s: not a valid fixture (regenerate with tools/reference.py)\n", path);
    return ok;
}

static void fixture_free(Fixture *fx) {
    free(fx->tokens); free(fx->targets); free(fx->params); free(fx->logits); free(fx->grads); free(fx->step_losses);
    free(fx->params_after);
}

/* The fixture's wpe has block_size rows but only T are used; nanogpt's model has exactly T (it crops, as
 * nanoGPT does). Copies src (fixture layout) to dst (model with maxT = T). */
static void crop_wpe(const Fixture *fx, const float *src, float *dst) {
    size_t wte = (size_t)fx->Vp * fx->C, wpe_used = (size_t)fx->T * fx->C, wpe_all = (size_t)fx->block_size * fx->C;
    memcpy(dst, src, wte * 4);
    memcpy(dst + wte, src + wte, wpe_used * 4);
    memcpy(dst + wte + wpe_used, src + wte + wpe_all, (fx->P - wte - wpe_all) * 4);
}

/* ---- trainers over a scratch dataset of random tokens ---- */
static char data_dir[256];

/* 0, or -1 with the current case failed */
static int make_dataset(int V) {
    if (test_folder(data_dir, sizeof data_dir, "model")) return -1;
    write_random_dataset(data_dir, V, 5000, 9);
    return 0;
}

static void base_config(ngpt_config *c, int V, int T, int L, int NH, int C, int bias, int B) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    copy_str(c->data_dir, sizeof c->data_dir, data_dir);
    snprintf(c->out_dir, sizeof c->out_dir, "%.240s/out", data_dir);
    c->vocab_size = V; c->block_size = T; c->n_layer = L; c->n_head = NH; c->n_embd = C; c->bias = bias;
    c->batch_size = B; c->gradient_accumulation_steps = 1; c->dropout = 0; c->decay_lr = 0; c->eval_iters = 1;
    c->threads = 2;
}

static ngpt_trainer *make_trainer(const ngpt_config *c) {
    char err[NGPT_ERRLEN];
    ngpt_trainer *tr;
    if (ngpt_trainer_create(c, NULL, &tr, err, sizeof err)) { printf("trainer: %s\n", err); return NULL; }
    return tr;
}

/* a fixed batch: sequence (micro * B + b) of `seqs` in h_tokens/h_targets */
typedef struct { const int32_t *tokens, *targets; } FixedBatch;
static void fill_fixed(ngpt_trainer *tr, int micro, void *ctx) {
    const FixedBatch *fb = (const FixedBatch *)ctx;
    size_t n = (size_t)tr->plan.micro_batch * tr->plan.req.T, off = (size_t)micro * n;
    memcpy(tr->h_tokens, fb->tokens + off, n * 4);
    memcpy(tr->h_targets, fb->targets + off, n * 4);
}

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}
/* max |a - b| over n, and where */
static double max_abs_diff(const float *a, const float *b, size_t n, size_t *where) {
    double m = 0;
    *where = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) { m = d; *where = i; }
    }
    return m;
}
static const char *param_of(const Fixture *fx, size_t i) {
    ModelShape ms = {fx->L, fx->NH, fx->C, fx->V, fx->Vp, fx->T, fx->bias};
    size_t sizes[N_PARAM_TENSORS], off = 0;
    param_sizes(&ms, sizes);
    for (int k = 0; k < N_PARAM_TENSORS; k++) {
        if (i < off + sizes[k]) return param_names[k];
        off += sizes[k];
    }
    return "?";
}

/* ---- against PyTorch ---- */
static void check_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "test/fixtures/%s", name);
    Fixture fx;
    if (!fixture_load(&fx, path)) { CHECK(0, "cannot load %s", path); fixture_free(&fx); return; }
    if (make_dataset(fx.V)) { fixture_free(&fx); return; }
    ngpt_config c;
    base_config(&c, fx.V, fx.T, fx.L, fx.NH, fx.C, fx.bias, fx.B);
    c.learning_rate = fx.lr; c.beta1 = fx.beta1; c.beta2 = fx.beta2; c.weight_decay = fx.weight_decay; c.grad_clip = fx.grad_clip;
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) { CHECK(0, "trainer"); remove_folder(data_dir); fixture_free(&fx); return; }
    CHECK(tr->plan.micro_batch == fx.B && one_pass_holds_logits(tr, &tr->plan.eval, fx.B, tr->plan.eval_chunk),
          "plan does not hold the fixture batch in one pass");
    size_t N = (size_t)fx.B * fx.T, P = tr->plan.nparams;
    float *params = malloc(P * 4), *got = malloc(P * 4), *want = malloc(P * 4);
    crop_wpe(&fx, fx.params, params);
    CHECK(copy_params_in(tr, params) == 0, "load params: %s", tr->err);

    /* logits: a forward pass in the eval layout leaves the (single) chunk of logits in place */
    memcpy(tr->h_tokens, fx.tokens, N * 4);
    memcpy(tr->h_targets, fx.targets, N * 4);
    use_scratch(tr, &tr->plan.eval);
    double loss_sum = run_micro_batch(tr, &tr->plan.eval, fx.B, 0, 0, 0);
    float *logits = malloc(N * fx.Vp * 4);
    download_logits(tr, &tr->plan.eval, fx.B, logits);
    double worst = 0;
    for (size_t i = 0; i < N; i++)
        for (int j = 0; j < fx.V; j++) worst = fmax(worst, fabs((double)logits[i * fx.Vp + j] - fx.logits[i * fx.V + j]));
    CHECK(worst < 2e-5, "%s logits: max abs diff %.3g", name, worst);
    CHECK_CLOSE(loss_sum / N, fx.loss, 1e-5, "eval loss");

    /* loss and every gradient of one step */
    FixedBatch fb = {fx.tokens, fx.targets};
    double mean;
    CHECK(forward_backward(tr, fill_fixed, &fb, &mean, NULL, NULL) == 0, "forward_backward: %s", tr->err);
    CHECK_CLOSE(mean, fx.loss, 1e-5, "training loss");
    copy_params_out(tr, got, tr->grads);
    crop_wpe(&fx, fx.grads, want);
    size_t w;
    double gscale = max_abs(want, P), gdiff = max_abs_diff(got, want, P, &w);
    printf("  %s: loss %.7f (torch %.7f), grads max abs diff %.3g (max |grad| %.3g) at %s\n", name, mean, (double)fx.loss, gdiff, gscale,
           param_of(&fx, w));
    CHECK(gdiff <= 1e-5 * gscale, "%s grads: max abs diff %.3g at %zu (%s): got %.8g want %.8g", name, gdiff, w, param_of(&fx, w),
          (double)got[w], (double)want[w]);

    /* 10 AdamW steps on the same batch (tr->step restarts at 0: bias corrections as in a fresh run) */
    double worst_loss = 0;
    for (int s = 0; s < fx.nsteps; s++) {
        float l;
        CHECK(train_step_with(tr, fill_fixed, &fb, &l, NULL, NULL) == 0, "step %d: %s", s, tr->err);
        double d = fabs((double)l - fx.step_losses[s]) / fx.step_losses[s];
        worst_loss = fmax(worst_loss, d);
        CHECK(d < 1e-5, "%s step %d loss %.7f, torch %.7f", name, s, (double)l, (double)fx.step_losses[s]);
    }
    copy_params_out(tr, got, tr->params);
    crop_wpe(&fx, fx.params_after, want);
    double pdiff = max_abs_diff(got, want, P, &w);
    printf("  %s: 10 AdamW steps: loss max rel diff %.3g, params max abs diff %.3g at %s\n", name, worst_loss, pdiff, param_of(&fx, w));
    /* see tools/reference.py: fp32 noise in exactly-zero gradients (the key bias) moves parameters by up
     * to lr per step under AdamW; PyTorch in fp32 itself lands 1.5e-4 away */
    CHECK(pdiff < 5e-4, "%s params after 10 steps: max abs diff %.3g at %zu (%s)", name, pdiff, w, param_of(&fx, w));
    ngpt_trainer_free(tr);
    remove_folder(data_dir);
    free(params); free(got); free(want); free(logits);
    fixture_free(&fx);
}

static void test_pytorch_bias(void) { check_fixture("gpt_tiny_bias.bin"); }
static void test_pytorch_nobias(void) { check_fixture("gpt_tiny_nobias.bin"); }

/* ---- equivalences on one random model ---- */
enum { EQ_V = 91, EQ_T = 24, EQ_L = 2, EQ_NH = 4, EQ_C = 32, EQ_SEQS = 6 };
static int32_t eq_tokens[EQ_SEQS * EQ_T], eq_targets[EQ_SEQS * EQ_T];

/* The interface's fusions as the ops one after the other (the CPU backend leaves them NULL): with them the
 * graph takes its fused paths, which must give the same bits. */
static _Atomic int fused_calls[3]; /* GELU forward, GELU backward, residual (lanes call them at once) */
static void fused_forward_gelu(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    fused_calls[0] = 1;
    be->matmul_forward(be, pre, inp, w, bias, N, C, OC);
    be->gelu_forward(be, act, pre, (size_t)N * OC);
}
static void fused_backward_gelu(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                const void *pre, int N, int C, int OC) {
    fused_calls[1] = 1;
    be->matmul_backward(be, dinp, dw, dbias, dout, inp, w, N, C, OC);
    be->gelu_backward(be, dinp, pre, dinp, (size_t)N * C);
}
static void fused_forward_residual(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, const void *res, int N, int C,
                                   int OC) {
    fused_calls[2] = 1;
    be->matmul_forward(be, out, inp, w, bias, N, C, OC); /* out aliases none of inp, w, res: a valid temporary */
    be->residual_forward(be, out, res, out, (size_t)N * OC);
}
static int eq_fused; /* grads_with gives the backend the fusions above */

/* one forward/backward of the 6 sequences with a config tweak; returns loss and all gradients. On the CPU a
 * micro-batch of B >= 2 runs as two lanes of ceil(B/2) and the rest sequences, each with its own gradients. */
static int eq_step; /* the step grads_with's trainer is at (dropout's masks are drawn per step) */
static double grads_with(int micro_batch, int logits_chunk, int recompute, double dropout, float *grads) {
    ngpt_config c;
    base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, EQ_SEQS);
    c.micro_batch = micro_batch;
    c.logits_chunk = logits_chunk;
    c.recompute = recompute;
    c.dropout = dropout;
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) return NAN;
    if (eq_fused) {
        tr->be->matmul_forward_gelu = fused_forward_gelu;
        tr->be->matmul_backward_gelu = fused_backward_gelu;
        tr->be->matmul_forward_residual = fused_forward_residual;
    }
    tr->step = eq_step;
    FixedBatch fb = {eq_tokens, eq_targets};
    double mean = NAN;
    if (forward_backward(tr, fill_fixed, &fb, &mean, NULL, NULL)) printf("forward_backward: %s\n", tr->err);
    copy_params_out(tr, grads, tr->grads);
    ngpt_trainer_free(tr);
    return mean;
}

static size_t eq_nparams(void) {
    ModelShape ms = {EQ_L, EQ_NH, EQ_C, EQ_V, pad_vocab(EQ_V), EQ_T, 1};
    size_t sizes[N_PARAM_TENSORS];
    return param_sizes(&ms, sizes);
}

static void expect_same(const char *what, double la, const float *ga, double lb, const float *gb, double tol) {
    size_t P = eq_nparams(), w;
    double d = max_abs_diff(ga, gb, P, &w), s = max_abs(gb, P);
    CHECK(fabs(la - lb) <= tol * fabs(lb), "%s: loss %.9g vs %.9g", what, la, lb);
    CHECK(d <= tol * s, "%s: grads max abs diff %.3g (max |grad| %.3g) at %zu", what, d, s, w);
}

static void test_chunked_loss_equals_unchunked(void) {
    size_t P = eq_nparams();
    float *full = malloc(P * 4), *g = malloc(P * 4);
    double lf = grads_with(EQ_SEQS, EQ_SEQS * EQ_T, 0, 0, full); /* one chunk per lane: all its logits at once */
    int chunks[3] = {1, 7, 64};
    for (int i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "logits chunk %d vs unchunked", chunks[i]);
        expect_same(what, grads_with(EQ_SEQS, chunks[i], 0, 0, g), g, lf, full, 1e-5);
    }
    free(full); free(g);
}

static void test_accumulation_equals_big_batch(void) {
    size_t P = eq_nparams();
    float *one = malloc(P * 4), *g = malloc(P * 4);
    double l1 = grads_with(6, 0, 0, 0, one);
    expect_same("2 micro-batches of 3 (lanes of 2 and 1) vs 1 of 6", grads_with(3, 0, 0, 0, g), g, l1, one, 1e-5);
    expect_same("6 micro-batches of 1 (one lane) vs 1 of 6", grads_with(1, 0, 0, 0, g), g, l1, one, 1e-5);
    /* dropout masks follow the sequence's place in the step, whatever the micro-batches and lanes */
    l1 = grads_with(6, 0, 0, 0.1, one);
    expect_same("with dropout: 3 micro-batches of 2 vs 1 of 6", grads_with(2, 0, 0, 0.1, g), g, l1, one, 1e-5);
    expect_same("with dropout: 6 micro-batches of 1 vs 1 of 6", grads_with(1, 0, 0, 0.1, g), g, l1, one, 1e-5);
    free(one); free(g);
}

static void test_recompute_levels_agree(void) {
    size_t P = eq_nparams();
    float *base = malloc(P * 4), *g = malloc(P * 4);
    double l0 = grads_with(6, 0, 0, 0.1, base); /* with dropout: recompute must not disturb the masks */
    expect_same("recompute GELU vs none", grads_with(6, 0, 1, 0.1, g), g, l0, base, 1e-6);
    expect_same("recompute GELU+LN vs none", grads_with(6, 0, 2, 0.1, g), g, l0, base, 1e-6);
    /* whole layers run again in the backward from the kept residual stream: the same inputs, masks and ops, so
     * the same bits, in one micro-batch of 6 (two lanes of 3) and in 6 of 1 (one lane) */
    for (int mb = 6; mb >= 1; mb -= 5) {
        double la = grads_with(mb, 0, 0, 0.1, base), lb = grads_with(mb, 0, 3, 0.1, g);
        size_t w;
        double d = max_abs_diff(g, base, eq_nparams(), &w);
        CHECK(la == lb && d == 0, "micro-batch %d: recompute whole layers vs none: loss %.9g vs %.9g, grads max abs diff %.3g at %zu", mb, lb, la,
              d, w);
    }
    free(base); free(g);
}

/* the graph's paths through the fused ops give the bits of the separate ops, with and without recomputing
 * GELU or whole layers in the backward, with and without dropout (which keeps the residual projections on the separate
 * ops: the fused one has no dropout) */
static void test_fusion_paths(void) {
    size_t P = eq_nparams();
    float *base = malloc(P * 4), *g = malloc(P * 4);
    for (int recompute = 0; recompute <= 3; recompute += recompute == 1 ? 2 : 1) /* none, GELU, whole layers */
        for (int drop = 0; drop <= 1; drop++) {
            double dropout = drop ? 0.1 : 0.0;
            eq_fused = 0;
            double l0 = grads_with(6, 0, recompute, dropout, base);
            eq_fused = 1;
            fused_calls[0] = fused_calls[1] = fused_calls[2] = 0;
            double l1 = grads_with(6, 0, recompute, dropout, g);
            eq_fused = 0;
            CHECK(fused_calls[0] && fused_calls[1] && fused_calls[2] == !drop,
                  "dropout %g: fused paths taken: GELU forward %d, backward %d, residual %d (want %d)", dropout, fused_calls[0], fused_calls[1],
                  fused_calls[2], !drop);
            size_t w;
            double d = max_abs_diff(g, base, P, &w);
            CHECK(l0 == l1 && d == 0, "recompute %d, dropout %g: fused paths loss %.9g vs %.9g, grads max abs diff %.3g at %zu", recompute, dropout,
                  l1, l0, d, w);
        }
    free(base); free(g);
}

static void test_dropout_reproducible(void) {
    size_t P = eq_nparams();
    float *a = malloc(P * 4), *b = malloc(P * 4);
    double la = grads_with(6, 0, 0, 0.2, a), lb = grads_with(6, 0, 0, 0.2, b);
    size_t w;
    CHECK(la == lb && max_abs_diff(a, b, P, &w) == 0, "same seed, different result with dropout");
    double l0 = grads_with(6, 0, 0, 0, b);
    CHECK(la != l0, "dropout 0.2 gave the loss of dropout 0 (%.9g)", l0);
    /* the same parameters and batch a step later: other masks (nanoGPT's dropout draws new ones every step); without
     * dropout the step changes nothing */
    eq_step = 1;
    double next = grads_with(6, 0, 0, 0.2, b), next0 = grads_with(6, 0, 0, 0, a);
    eq_step = 0;
    CHECK(next != la && next0 == l0, "dropout 0.2 at step 1: loss %.9g, at step 0 %.9g (no dropout: %.9g and %.9g)", next, la, next0, l0);
    free(a); free(b);
}

/* ---- dropout through the whole model ---- */

/* The CPU backend's dropouts, counted by their stream (the site: step, layer, embeddings / attention / residual
 * projection): elementwise ones (the embeddings and each block's two projections back into the residual stream, forward
 * and backward) and those inside attention, forward and backward. Only calls with p > 0 count. */
enum { ELEMENTWISE, ATT_FORWARD, ATT_BACKWARD, DROP_KINDS };
static struct {
    pthread_mutex_t lock;
    int calls[DROP_KINDS], n[DROP_KINDS];
    uint64_t stream[DROP_KINDS][16];
    int uses[DROP_KINDS][16];
    float p;
} drops = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, {{0}}, {{0}}, 0};
static void count_drop(int kind, const ngpt_dropout *d) {
    if (!d || d->p <= 0) return;
    pthread_mutex_lock(&drops.lock);
    drops.calls[kind]++;
    drops.p = d->p;
    int i = 0;
    while (i < drops.n[kind] && drops.stream[kind][i] != d->stream) i++;
    if (i < 16) {
        if (i == drops.n[kind]) drops.stream[kind][drops.n[kind]++] = d->stream;
        drops.uses[kind][i]++;
    }
    pthread_mutex_unlock(&drops.lock);
}
static void counted_dropout(ngpt_backend *be, void *out, const void *inp, size_t n, const ngpt_dropout *d) {
    count_drop(ELEMENTWISE, d);
    cpu_dropout(be, out, inp, n, d);
}
static void counted_attention_forward(ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *d) {
    count_drop(ATT_FORWARD, d);
    cpu_attention_forward(be, out, lse, qkv, B, T, C, NH, d);
}
static void counted_attention_backward(ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                                       int T, int C, int NH, const ngpt_dropout *d) {
    count_drop(ATT_BACKWARD, d);
    cpu_attention_backward(be, dqkv, dout, qkv, out, lse, B, T, C, NH, d);
}
/* counts tr's dropouts from now on, from zero */
static void count_drops(ngpt_trainer *tr) {
    ngpt_backend *be = tr->be;
    if (be->dropout != counted_dropout) { /* the CPU backend's ops, called by the counting ones */
        CHECK(be->dropout == cpu_dropout && be->attention_forward == cpu_attention_forward && be->attention_backward == cpu_attention_backward,
              "the trainer's backend is not the CPU's");
        be->dropout = counted_dropout;
        be->attention_forward = counted_attention_forward;
        be->attention_backward = counted_attention_backward;
    }
    pthread_mutex_lock(&drops.lock);
    memset(drops.calls, 0, sizeof drops.calls);
    memset(drops.n, 0, sizeof drops.n);
    memset(drops.uses, 0, sizeof drops.uses);
    drops.p = 0;
    pthread_mutex_unlock(&drops.lock);
}

/* nanoGPT's dropout sites, every one in training and none in evaluation: in a step of 6 micro-batches of one sequence,
 * the embeddings' and each block's two residual projections' dropouts (2L + 1 streams) run in each micro-batch's forward
 * and again in its backward (12 uses each), and attention's (L streams) in each forward and each backward; an evaluation
 * of a trainer with dropout 0.2 draws none and gives the losses of one with dropout 0, bit for bit */
static void test_dropout_sites(void) {
    ngpt_config c;
    base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, EQ_SEQS);
    c.micro_batch = 1;
    c.dropout = 0.2;
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) { CHECK(0, "trainer"); return; }
    CHECK(tr->plan.micro_batch == 1 && tr->plan.grad_accum == EQ_SEQS, "micro-batch %d x %d", tr->plan.micro_batch, tr->plan.grad_accum);
    count_drops(tr);
    FixedBatch fb = {eq_tokens, eq_targets};
    double mean;
    CHECK(forward_backward(tr, fill_fixed, &fb, &mean, NULL, NULL) == 0, "forward_backward: %s", tr->err);
    const int L = EQ_L, steps = EQ_SEQS;
    CHECK(drops.calls[ELEMENTWISE] == 2 * steps * (2 * L + 1) && drops.n[ELEMENTWISE] == 2 * L + 1, "elementwise dropouts: %d calls of %d streams, want %d of %d",
          drops.calls[ELEMENTWISE], drops.n[ELEMENTWISE], 2 * steps * (2 * L + 1), 2 * L + 1);
    for (int i = 0; i < drops.n[ELEMENTWISE]; i++)
        CHECK(drops.uses[ELEMENTWISE][i] == 2 * steps, "elementwise stream %#llx used %d times, want %d (each forward and backward)",
              (unsigned long long)drops.stream[ELEMENTWISE][i], drops.uses[ELEMENTWISE][i], 2 * steps);
    CHECK(drops.calls[ATT_FORWARD] == steps * L && drops.n[ATT_FORWARD] == L && drops.calls[ATT_BACKWARD] == steps * L && drops.n[ATT_BACKWARD] == L,
          "attention dropouts: forward %d calls of %d streams, backward %d of %d, want %d of %d each", drops.calls[ATT_FORWARD], drops.n[ATT_FORWARD],
          drops.calls[ATT_BACKWARD], drops.n[ATT_BACKWARD], steps * L, L);
    for (int i = 0; i < drops.n[ATT_FORWARD]; i++) {
        int k = 0;
        while (k < drops.n[ATT_BACKWARD] && drops.stream[ATT_BACKWARD][k] != drops.stream[ATT_FORWARD][i]) k++;
        CHECK(k < drops.n[ATT_BACKWARD] && drops.uses[ATT_FORWARD][i] == steps && drops.uses[ATT_BACKWARD][k] == steps,
              "attention stream %#llx: %d forward uses, none or not %d backward", (unsigned long long)drops.stream[ATT_FORWARD][i],
              drops.uses[ATT_FORWARD][i], steps);
    }
    for (int i = 0; i < drops.n[ELEMENTWISE]; i++)
        for (int k = 0; k < drops.n[ATT_FORWARD]; k++)
            CHECK(drops.stream[ELEMENTWISE][i] != drops.stream[ATT_FORWARD][k], "stream %#llx drawn by attention and by a residual",
                  (unsigned long long)drops.stream[ATT_FORWARD][k]);
    CHECK(drops.p == 0.2f, "dropout p %g, configured 0.2", (double)drops.p);
    /* evaluation: none */
    count_drops(tr);
    float tl, vl, tl0, vl0;
    CHECK(ngpt_evaluate(tr, &tl, &vl) == 0, "evaluate: %s", tr->err);
    CHECK(drops.calls[ELEMENTWISE] + drops.calls[ATT_FORWARD] + drops.calls[ATT_BACKWARD] == 0, "an evaluation drew %d elementwise and %d attention dropouts",
          drops.calls[ELEMENTWISE], drops.calls[ATT_FORWARD]);
    c.dropout = 0;
    ngpt_trainer *plain = make_trainer(&c);
    if (!plain) { CHECK(0, "trainer"); ngpt_trainer_free(tr); return; }
    CHECK(ngpt_evaluate(plain, &tl0, &vl0) == 0 && tl == tl0 && vl == vl0, "evaluation at dropout 0.2: %.9g / %.9g, at 0: %.9g / %.9g", (double)tl,
          (double)vl, (double)tl0, (double)vl0);
    ngpt_trainer_free(plain);
    ngpt_trainer_free(tr);
}

/* With dropout (p = 0.5: half the masks' elements differ between two draws), the gradients are those of the loss
 * the same step computes: central differences of forward_backward's loss at the element of largest gradient of every
 * tensor, with the step's masks (drawn from the step, the same each call). Masks the backward did not share with the
 * forward, at any site, are off by about half a gradient. */
static void test_dropout_gradients_are_the_losses(void) {
    ngpt_config c;
    base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, EQ_SEQS);
    c.dropout = 0.5;
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) { CHECK(0, "trainer"); return; }
    size_t P = tr->plan.nparams;
    float *params = malloc(P * 4), *grads = malloc(P * 4);
    FixedBatch fb = {eq_tokens, eq_targets};
    double loss, up, down, h = 1e-2, worst = 0;
    CHECK(forward_backward(tr, fill_fixed, &fb, &loss, NULL, NULL) == 0, "forward_backward: %s", tr->err);
    copy_params_out(tr, grads, tr->grads);
    copy_params_out(tr, params, tr->params);
    size_t off = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        size_t n = tr->plan.param_len[i], at = off;
        if (!n) continue;
        for (size_t j = off; j < off + n; j++)
            if (fabsf(grads[j]) > fabsf(grads[at])) at = j;
        off += n;
        float was = params[at];
        params[at] = was + (float)h;
        int rc = copy_params_in(tr, params) || forward_backward(tr, fill_fixed, &fb, &up, NULL, NULL);
        params[at] = was - (float)h;
        rc = rc || copy_params_in(tr, params) || forward_backward(tr, fill_fixed, &fb, &down, NULL, NULL);
        params[at] = was;
        CHECK(!rc, "%s: %s", param_names[i], tr->err);
        double fd = (up - down) / ((double)(was + (float)h) - (double)(was - (float)h)), g = grads[at], err = fabs(fd - g) / fabs(g);
        worst = fmax(worst, err);
        CHECK(err < 0.03, "%s[%zu]: gradient %.6g, central difference of the loss %.6g", param_names[i], at - (off - n), g, fd);
    }
    printf("  dropout 0.5: the largest gradient of each tensor vs the loss's central difference: worst relative difference %.2g\n", worst);
    free(params); free(grads);
    ngpt_trainer_free(tr);
}

/* ---- evaluation and the batches' windows ---- */

/* nanoGPT's estimate_loss: eval_iters batches of batch_size sequences. eval_iters 2 of batch 3 reads the 6 windows that
 * eval_iters 3 of batch 2 reads (the windows of an evaluation are one stream, whatever the batches), and eval_iters 1 of
 * batch 3 the first 3 of them. */
static void test_evaluation_reads_eval_iters_batches(void) {
    const int iters[3] = {2, 3, 1}, batch[3] = {3, 2, 3};
    float tl[3] = {0}, vl[3] = {0};
    for (int k = 0; k < 3; k++) {
        ngpt_config c;
        base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, batch[k]);
        c.eval_iters = iters[k];
        ngpt_trainer *tr = make_trainer(&c);
        if (!tr) { CHECK(0, "trainer"); return; }
        CHECK(ngpt_evaluate(tr, &tl[k], &vl[k]) == 0, "evaluate: %s", tr->err);
        ngpt_trainer_free(tr);
    }
    CHECK(fabsf(tl[0] - tl[1]) <= 1e-6f * tl[1] && fabsf(vl[0] - vl[1]) <= 1e-6f * vl[1],
          "6 sequences: eval_iters 2 x batch 3 gave %.7f / %.7f, 3 x 2 gave %.7f / %.7f", (double)tl[0], (double)vl[0], (double)tl[1], (double)vl[1]);
    CHECK(fabsf(tl[0] - tl[2]) > 1e-5f * tl[2] && fabsf(vl[0] - vl[2]) > 1e-5f * vl[2],
          "eval_iters 2 x batch 3 gave the losses of 1 x 3: %.7f / %.7f", (double)tl[2], (double)vl[2]);
}

/* nanoGPT's get_batch draws a window's start uniformly from every start that leaves T + 1 tokens: with train.bin the
 * 9 tokens 0..8 and block 4, the starts 0..4, each with its targets one token on, the last start as often as the others */
static void test_batches_draw_every_window(void) {
    char dir[256], path[300];
    if (test_folder(dir, sizeof dir, "windows")) return;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, k ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "wb");
        for (uint16_t t = 0; t < 9; t++) fwrite(&t, 2, 1, f);
        fclose(f);
    }
    ngpt_config c;
    base_config(&c, 16, 4, 1, 2, 16, 1, 8);
    copy_str(c.data_dir, sizeof c.data_dir, dir);
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) { CHECK(0, "trainer"); remove_folder(dir); return; }
    const int T = 4, B = tr->plan.micro_batch, draws = 400;
    int seen[16] = {0}, wrong = 0;
    for (int n = 0; n < draws; n += B) {
        sample_batch(tr, &tr->train_data, &tr->rng_train, B);
        for (int b = 0; b < B; b++) {
            int start = tr->h_tokens[b * T];
            if (start < 0 || start > 15) { wrong++; continue; }
            seen[start]++;
            for (int t = 0; t < T; t++) wrong += tr->h_tokens[b * T + t] != start + t || tr->h_targets[b * T + t] != start + t + 1;
        }
    }
    int total = 0;
    for (int s = 0; s < 16; s++) total += seen[s];
    CHECK(!wrong && total >= draws, "%d of %d windows not consecutive tokens from a start in 0..4", wrong, total);
    for (int s = 0; s < 5; s++)
        CHECK(seen[s] > total / 10, "start %d drawn %d times of %d (uniform: about %d)", s, seen[s], total, total / 5);
    ngpt_trainer_free(tr);
    remove_folder(dir);
}

/* ---- the optimizer step ---- */

/* The loss scale (fp16's dynamic one; 1 otherwise) scales the gradients and is divided out before clipping and AdamW: a
 * step at loss scale 1024 is the step at 1 bit for bit (powers of two scale exactly), clipped or not. A clipped first
 * step leaves the first moment at (1 - beta1) times the clipped gradient: grad_clip in norm. */
static void test_loss_scale_divided_out(void) {
    FixedBatch fb = {eq_tokens, eq_targets};
    for (int clip = 0; clip < 2; clip++) {
        float *p[2] = {NULL, NULL}, *m[2] = {NULL, NULL}, *v[2] = {NULL, NULL};
        size_t P = 0;
        for (int k = 0; k < 2; k++) {
            ngpt_config c;
            base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, EQ_SEQS);
            c.grad_clip = clip ? 1e-3 : 0;
            ngpt_trainer *tr = make_trainer(&c);
            if (!tr) { CHECK(0, "trainer"); break; }
            CHECK(tr->plan.moments_dtype == NGPT_DTYPE_F32 && tr->loss_scale == 1.0f, "moments %d, loss scale %g", tr->plan.moments_dtype, (double)tr->loss_scale);
            tr->loss_scale = k ? 1024.0f : 1.0f;
            float loss;
            CHECK(train_step_with(tr, fill_fixed, &fb, &loss, NULL, NULL) == 0, "step: %s", tr->err);
            P = tr->plan.nparams;
            p[k] = malloc(P * 4); m[k] = malloc(P * 4); v[k] = malloc(P * 4);
            copy_params_out(tr, p[k], tr->params);
            copy_params_out(tr, m[k], tr->m);
            copy_params_out(tr, v[k], tr->v);
            ngpt_trainer_free(tr);
        }
        if (!p[1]) { free(p[0]); free(m[0]); free(v[0]); return; }
        CHECK(!memcmp(p[0], p[1], P * 4) && !memcmp(m[0], m[1], P * 4) && !memcmp(v[0], v[1], P * 4),
              "grad_clip %s: a step at loss scale 1024 differs from one at 1 (parameters %d, moments %d, %d)", clip ? "1e-3" : "off",
              !!memcmp(p[0], p[1], P * 4), !!memcmp(m[0], m[1], P * 4), !!memcmp(v[0], v[1], P * 4));
        if (clip) {
            double sq = 0;
            for (size_t i = 0; i < P; i++) sq += (double)m[1][i] * m[1][i];
            CHECK(fabs(sqrt(sq) - 0.1 * 1e-3) <= 1e-3 * 0.1 * 1e-3, "a first step clipped to 1e-3: first moment's norm %.6g, want (1 - 0.9) x 1e-3", sqrt(sq));
        }
        for (int k = 0; k < 2; k++) { free(p[k]); free(m[k]); free(v[k]); }
    }
}

/* ---- no allocation while training ---- */
static void test_no_allocation_while_training(void) {
#ifdef NGPT_SANITIZE
    printf("  (the sanitizer owns malloc here: counted in the plain build)\n");
#else
    ngpt_config c;
    base_config(&c, EQ_V, EQ_T, EQ_L, EQ_NH, EQ_C, 1, 4);
    c.gradient_accumulation_steps = 2;
    c.dropout = 0.1;
    c.eval_iters = 3;
    c.eval_interval = 2;
    c.log_interval = 1;
    c.max_iters = 5;
    ngpt_trainer *tr = make_trainer(&c);
    if (!tr) { CHECK(0, "trainer"); return; }
    long before = atomic_load(&allocations);
    CHECK(before > 0, "the allocation counter saw nothing while the trainer was made: interposition inactive");
    int rc = ngpt_train(tr); /* steps, evaluations and logging (no log sink: nothing printed) */
    long during = atomic_load(&allocations) - before;
    CHECK(rc == 0, "train: %s", tr->err);
    CHECK(tr->step == 6, "ran %d steps, expected max_iters + 1 = 6", tr->step);
    CHECK(during == 0, "%ld allocations during training", during);
    printf("  %ld allocations during %d steps and %d evaluations\n", during, tr->step, tr->eval_count);
    ngpt_trainer_free(tr);
#endif
}

int main(void) {
    if (make_dataset(EQ_V)) return 1;
    for (int i = 0; i < EQ_SEQS * EQ_T; i++) {
        eq_tokens[i] = (int32_t)(ngpt_hash(3, 1, (uint64_t)i) % EQ_V);
        eq_targets[i] = (int32_t)(ngpt_hash(3, 2, (uint64_t)i) % EQ_V);
    }
    RUN(test_chunked_loss_equals_unchunked);
    RUN(test_accumulation_equals_big_batch);
    RUN(test_recompute_levels_agree);
    RUN(test_fusion_paths);
    RUN(test_dropout_reproducible);
    RUN(test_dropout_sites);
    RUN(test_dropout_gradients_are_the_losses);
    RUN(test_evaluation_reads_eval_iters_batches);
    RUN(test_batches_draw_every_window);
    RUN(test_loss_scale_divided_out);
    RUN(test_no_allocation_while_training);
    remove_folder(data_dir);
    RUN(test_pytorch_bias);
    RUN(test_pytorch_nobias);
    return check_summary();
}
