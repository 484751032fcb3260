/* test_model.c: the whole model on the CPU backend.
 *  - against the PyTorch reference (tools/reference.py, fixtures in test/fixtures/): logits, loss, every
 *    parameter gradient, the losses of 10 AdamW steps and the parameters after them;
 *  - chunked loss == unchunked; 6 sequences in one micro-batch (two lanes of 3) == 2 accumulated micro-batches
 *    of 3 (lanes of 2 and 1) == 6 of 1 (one lane), with dropout too;
 *    every recompute level gives the same gradients; dropout is reproducible;
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
    RUN(test_no_allocation_while_training);
    remove_folder(data_dir);
    RUN(test_pytorch_bias);
    RUN(test_pytorch_nobias);
    return check_summary();
}
