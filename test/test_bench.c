/* test_bench.c: `nanogpt bench` on the CPU with a small model.
 *  - the matmul peak is measured in the AdamW moments and leaves them zero; a model too small for a 512^3
 *    product there gets no peak and no MFU;
 *  - the timed steps give tokens/s, and an MFU between 0 and 1 (a step cannot beat the matmul peak);
 *  - the profiled step sees every op category, and its categories add up to no more than the step;
 *  - profiling changes nothing: a profiled step gives the bits an unprofiled one gives;
 *  - the profiled step's categories are the sums of their ops, which are listed apart;
 *  - the kernel timings cover every matmul shape, attention, LayerNorm and the loss, and leave the moments zero;
 *  - ngpt_options.measure_peak (what `nanogpt train` sets): the progress callback and log.jsonl get an MFU, the
 *    moments are zero again after the measurement, and the run's losses are those of a run without it;
 *  - the training loop's report: tokens/s is a step's tokens (accumulation included) over its own time, and the
 *    ETA the mean step time times the steps left, in the progress callback and log.jsonl; an evaluation's line
 *    holds its train and val losses in their places; a NaN loss is reported unsigned; the log has a step line
 *    every log_interval steps, log.jsonl one every step;
 *  - a bench's trainer (no data read) takes vocab_size 0 from the dataset's meta.bin, as training does, and
 *    GPT-2's 50257 where the dataset has none. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include "trainer_util.h"

static void config(ngpt_config *c) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    c->vocab_size = 97; c->block_size = 32; c->n_layer = 2; c->n_head = 2; c->n_embd = 64; c->bias = 1;
    c->batch_size = 8; c->gradient_accumulation_steps = 2; c->threads = 2; c->max_iters = 100;
}

static ngpt_trainer *make_sized(int n_layer, int n_embd) {
    ngpt_config c;
    config(&c);
    c.n_layer = n_layer;
    c.n_embd = n_embd;
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1;
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); return NULL; }
    return tr;
}
static ngpt_trainer *make(void) { return make_sized(2, 64); }

static size_t nonzero_moments(ngpt_trainer *tr) {
    size_t mv = tr->plan.off_region - tr->plan.off_m, nonzero = 0;
    for (size_t i = 0; i < mv; i++) nonzero += tr->m[i] != 0;
    return nonzero;
}

/* a small model has no room for a 512^3 product in its moments: no peak, no MFU, the rest measured */
static void test_bench_numbers(void) {
    ngpt_trainer *tr = make();
    if (!tr) return;
    BenchResult r;
    CHECK(bench_run(tr, 1, 3, &r) == 0, "bench: %s", tr->err);
    CHECK(r.peak_size == 0 && r.mfu == -1, "peak size %d, MFU %g: expected none for a model this small", r.peak_size, r.mfu);
    CHECK(r.tokens_per_step == 8 * 2 * 32 && r.tokens_per_second > 0, "tokens/step %g, tokens/s %g", r.tokens_per_step, r.tokens_per_second);
    double sum = 0;
    for (int c = 0; c < N_PROF; c++) {
        CHECK(r.op_seconds[c] > 0, "category %s: %g s", prof_names[c], r.op_seconds[c]);
        sum += r.op_seconds[c];
    }
    CHECK(sum <= r.profiled_step_seconds, "categories %g s > the step %g s", sum, r.profiled_step_seconds);
    /* each category is the sum of its ops, listed apart: LayerNorm in elementwise, the loss in classifier */
    for (int c = 0; c < N_PROF; c++) {
        double by_op = 0;
        for (int o = 0; o < N_PROF_OPS; o++) by_op += r.by_op_seconds[c][o];
        CHECK(fabs(by_op - r.op_seconds[c]) <= 1e-9 * (1 + r.op_seconds[c]), "%s: its ops add to %g s, the category %g s", prof_names[c], by_op,
              r.op_seconds[c]);
    }
    CHECK(r.by_op_calls[PROF_ELEMENTWISE][PO_layernorm_forward] > 0 && r.by_op_calls[PROF_CLASSIFIER][PO_crossentropy] > 0 &&
              r.by_op_calls[PROF_CLASSIFIER][PO_layernorm_forward] == 0,
          "layernorm_forward: %d calls in elementwise, %d in classifier; crossentropy: %d in classifier",
          r.by_op_calls[PROF_ELEMENTWISE][PO_layernorm_forward], r.by_op_calls[PROF_CLASSIFIER][PO_layernorm_forward],
          r.by_op_calls[PROF_CLASSIFIER][PO_crossentropy]);
    CHECK(r.arena_bytes > 0 && r.memory_in_use > 0, "arena %g, resident %g", r.arena_bytes, r.memory_in_use);
    ngpt_trainer_free(tr);
}

/* a model with 25 MB of moments: the peak on 1024^3, the moments zero again, MFU = model FLOP/s over the peak.
 * Both rates are timed, at different moments, on a shared machine (under the sanitizers too), so the ratio
 * can pass 1 by noise; a bound of 10 still catches a wrong unit or FLOP count. */
static void test_bench_peak_and_mfu(void) {
    ngpt_trainer *tr = make_sized(4, 256);
    if (!tr) return;
    BenchResult r;
    memset(&r, 0, sizeof r);
    r.peak_flops = matmul_peak(tr, &r.peak_size);
    CHECK(r.peak_size == 1024 && r.peak_flops > 1e8, "peak: %d^3, %g FLOP/s", r.peak_size, r.peak_flops); /* 1e8: ThreadSanitizer's build on a busy host */
    CHECK(nonzero_moments(tr) == 0, "%zu bytes of the AdamW moments are not zero after the peak measurement", nonzero_moments(tr));
    CHECK(bench_run(tr, 0, 2, &r) == 0, "bench: %s", tr->err);
    double model = r.tokens_per_second * r.flops_per_token;
    CHECK(r.mfu > 0 && r.mfu <= 1 && fabs(r.mfu - model / r.peak_flops) <= 1e-9 * r.mfu, "MFU %g (model %g FLOP/s, peak %g FLOP/s)", r.mfu, model,
          r.peak_flops);
    /* a peak measured below the steps' rate (a host busy at the start; it printed an MFU of 142%): the steps' rate is
     * the peak, MFU 1, the measured one kept to say; above it, MFU is the plain ratio */
    BenchResult low = {.tokens_per_second = 1000, .flops_per_token = 2e7, .peak_flops = 1e10, .mfu = -1};
    bench_take_mfu(&low);
    CHECK(low.peak_flops == 2e10 && low.peak_measured == 1e10 && low.mfu == 1, "low peak: %g (measured %g), MFU %g", low.peak_flops, low.peak_measured,
          low.mfu);
    BenchResult high = {.tokens_per_second = 1000, .flops_per_token = 2e7, .peak_flops = 8e10, .mfu = -1};
    bench_take_mfu(&high);
    CHECK(high.peak_flops == 8e10 && high.peak_measured == 0 && high.mfu == 0.25, "peak above: MFU %g", high.mfu);
    /* a bench that would run for over a minute at the peak says so first (GPT-2 124M on a CPU): here with a
     * pretended peak of 1 MFLOP/s; at the measured peak these steps take well under a minute */
    char note[400];
    double step_flops = r.flops_per_token * r.tokens_per_step;
    CHECK(!bench_duration_note(tr, r.peak_flops, 4, note, sizeof note) && note[0] == 0, "no note for 4 steps at %g FLOP/s: %s", r.peak_flops, note);
    int slow = bench_duration_note(tr, 1e6, 4, note, sizeof note);
    char want[64];
    snprintf(want, sizeof want, "at least %.0f s, %.0f min for the 4 steps", step_flops / 1e6, 4 * step_flops / 1e6 / 60);
    CHECK(slow && strstr(note, want) && strstr(note, "--gradient_accumulation_steps=1"), "the note at 1 MFLOP/s: %s (want '%s')", note, want);
    ngpt_trainer_free(tr);
}

/* the backend's sync, slowed: 0.2 s blocked a call, as a host waits for a device still at work; with sync_fails set, a
 * call on a copy of the table (the timed steps' WaitBackend, not the matmul peak's real table) records a failure instead */
static void (*real_sync)(ngpt_backend *);
static ngpt_backend *real_table;
static int sync_fails;
static void slow_sync(ngpt_backend *be) {
    if (sync_fails && be != real_table) {
        be->status = NGPT_ERR_DEVICE;
        snprintf(be->msg, sizeof be->msg, "the slowed sync's failure");
        return;
    }
    struct timespec d = {0, 200000000};
    nanosleep(&d, NULL);
    real_sync(be);
}

/* the host's share of a step: the steps' time less the host's waits for the device (sync, download, fence_wait, norm_sq).
 * On the CPU backend the ops run on the host, so nearly all of a step is the host's; with each sync blocked 0.2 s (a
 * sync a step at least), the steps' waits grow by that and the host's share falls */
static void test_bench_host_share(void) {
    ngpt_trainer *tr = make();
    if (!tr) return;
    BenchResult plain, slowed;
    CHECK(bench_run(tr, 1, 3, &plain) == 0, "bench: %s", tr->err);
    double plain_share = bench_host_share(&plain);
    CHECK(plain_share > 0.5 && plain_share <= 1 && plain.host_step_seconds > 0, "CPU backend: host share %g, %g s a step", plain_share,
          plain.host_step_seconds);
    real_sync = tr->be->sync;
    real_table = tr->be;
    tr->be->sync = slow_sync;
    CHECK(bench_run(tr, 1, 3, &slowed) == 0, "bench: %s", tr->err);
    double slowed_share = bench_host_share(&slowed);
    CHECK(slowed.wait_step_seconds >= 0.2 && slowed.wait_step_seconds >= plain.wait_step_seconds + 0.19 && slowed_share < plain_share &&
              slowed_share > 0,
          "slowed syncs: %g s a step in waits (%g before), %g s outside them (%g before), share %g (%g before)", slowed.wait_step_seconds,
          plain.wait_step_seconds, slowed.host_step_seconds, plain.host_step_seconds, slowed_share, plain_share);
    /* a failure the wrapped table records reaches the real one */
    sync_fails = 1;
    BenchResult failed;
    CHECK(bench_run(tr, 1, 3, &failed) != 0 && tr->be->status == NGPT_ERR_DEVICE && strstr(tr->be->msg, "slowed sync's failure"),
          "a sync's failure in the timed steps: status %d, '%s'", tr->be->status, tr->be->msg);
    sync_fails = 0;
    ngpt_trainer_free(tr);
}

static void test_profiling_changes_nothing(void) {
    ngpt_trainer *a = make(), *b = make();
    if (!a || !b) return;
    Rng ra = {7, 1, 0}, rb = {7, 1, 0};
    float la[3], lb[3];
    for (int i = 0; i < 3; i++) {
        CHECK(train_step_with(a, fill_random_tokens, &ra, &la[i], NULL, NULL) == 0, "%s", a->err);
        ProfBackend prof;
        ngpt_backend *real = b->be;
        int profiled = i == 1;
        if (profiled) {
            prof_wrap(&prof, real, pt(b, b->params, P_WTE, 0));
            b->be = &prof.be;
        }
        CHECK(train_step_with(b, fill_random_tokens, &rb, &lb[i], NULL, NULL) == 0, "%s", b->err);
        b->be = real;
        CHECK(!memcmp(&la[i], &lb[i], sizeof la[i]), "step %d%s: loss %.9g vs %.9g", i, profiled ? " (profiled)" : "", (double)la[i],
              (double)lb[i]);
    }
    CHECK(!memcmp(a->params, b->params, a->plan.nparams * sizeof(float)), "parameters differ after a profiled step");
    ngpt_trainer_free(a);
    ngpt_trainer_free(b);
}

/* the documented meaning of the optional fusions, for a CPU backend that has none: the products bench --kernels
 * times fused (fc's forward with GELU, the MLP projection's input gradient with its derivative), counted */
static int fused_forward_calls, fused_backward_calls;
static void fused_forward_gelu(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    fused_forward_calls++;
    be->matmul_forward(be, pre, inp, w, bias, N, C, OC);
    be->gelu_forward(be, act, pre, (size_t)N * OC);
}
static void fused_backward_gelu(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                const void *pre, int N, int C, int OC) {
    fused_backward_calls++;
    CHECK(dinp && pre && !dw && !dbias, "the fused input gradient is timed alone, with GELU's input");
    be->matmul_backward(be, dinp, dw, dbias, dout, inp, w, N, C, OC);
    be->gelu_backward(be, dinp, pre, dinp, (size_t)N * C);
}

/* the backend's matmul_backward, counting the calls with a bias gradient: the weight gradient's alone */
static void (*real_matmul_backward)(ngpt_backend *, void *, void *, void *, const void *, const void *, const void *, int, int, int);
static int bias_gradient_calls;
static void counted_matmul_backward(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N,
                                    int C, int OC) {
    if (dbias) {
        bias_gradient_calls++;
        CHECK(!dinp && dw, "the weight gradient with its bias gradient is timed without the input gradient");
    }
    real_matmul_backward(be, dinp, dw, dbias, dout, inp, w, N, C, OC);
}

/* every product, attention, LayerNorm, GELU, the loss, decoding's products and its attention timed, in order; with the backend's GELU
 * fusions (here the test's), fc's forward and the MLP projection's input gradient again, fused, after their plain three */
static void test_kernel_timings(void) {
    ngpt_trainer *tr = make_sized(3, 64); /* (two layers' AdamW moments hold fc's fused forward, not the MLP projection's) */
    if (!tr) return;
    real_matmul_backward = tr->be->matmul_backward;
    tr->be->matmul_backward = counted_matmul_backward;
    for (int fused = 0; fused < 2; fused++) {
        bias_gradient_calls = 0;
        if (fused) {
            tr->be->matmul_forward_gelu = fused_forward_gelu;
            tr->be->matmul_backward_gelu = fused_backward_gelu;
        }
        KernelTime kt[N_KERNEL_TIMES];
        int crows = 0, n = bench_kernels(tr, kt, &crows), want = fused ? N_KERNEL_TIMES : N_KERNEL_TIMES - 2,
            products = want - 19; /* all but attention (2), LayerNorm (2), GELU (2), the loss and decoding's 12 */
        CHECK(crows == tr->plan.logits_chunk, "classifier rows %d, the planned chunk %d (the moments hold it)", crows, tr->plan.logits_chunk);
        CHECK(n == want, "fusions %d: %d kernel timings, expected %d", fused, n, want);
        for (int i = 0; i < n; i++) /* the products and attention count FLOPs, the memory-bound ops bytes */
            CHECK(kt[i].seconds > 0 && (i < products + 2 ? kt[i].flops > 0 && kt[i].bytes == 0 : kt[i].flops == 0 && kt[i].bytes > 0),
                  "%s: %g s, %g FLOP, %g bytes", kt[i].name, kt[i].seconds, kt[i].flops, kt[i].bytes);
        /* each layer: fwd, dinp, dweight, [its GELU-fused product,] dbias+dweight; the rows after fc's fused forward
         * move by one, after the MLP projection's by two */
        const int f = fused;
        CHECK(n == want && !strcmp(kt[1].name, "matmul qkv dinp") && !strcmp(kt[2].name, "matmul qkv dweight") &&
                  !strcmp(kt[3].name, "matmul qkv dbias+dweight") && !strcmp(kt[10].name, "matmul fc dweight") &&
                  !strcmp(kt[11 + f].name, "matmul fc dbias+dweight") && !strcmp(kt[12 + f].name, "matmul mlp proj fwd") &&
                  !strcmp(kt[15 + 2 * f].name, "matmul mlp proj dbias+dweight") && !strcmp(kt[16 + 2 * f].name, "matmul classifier chunk fwd") &&
                  !strcmp(kt[18 + 2 * f].name, "matmul classifier chunk dweight") && !strcmp(kt[20 + 2 * f].name, "attention bwd") &&
                  !strcmp(kt[21 + 2 * f].name, "layernorm fwd") && !strcmp(kt[23 + 2 * f].name, "gelu fwd") &&
                  !strcmp(kt[24 + 2 * f].name, "gelu bwd") && !strcmp(kt[25 + 2 * f].name, "classifier loss"),
              "fusions %d: names %s, %s, %s, %s", fused, kt[1].name, kt[12 + f].name, kt[16 + 2 * f].name, kt[n - 1].name);
        CHECK(kt[1].flops == kt[0].flops && kt[2].flops == kt[0].flops && kt[3].flops == kt[0].flops, "each product 2 N C OC FLOPs: %g, %g, %g, %g",
              kt[0].flops, kt[1].flops, kt[2].flops, kt[3].flops);
        CHECK(bias_gradient_calls >= 4 * 6, "%d calls with a bias gradient: the four dbias+dweight rows make at least 6 each", bias_gradient_calls);
        const double n4c = 4.0 * tr->plan.micro_batch * tr->plan.req.T * tr->ms.C * (double)act_size(tr); /* GELU's N x 4C values, bytes */
        CHECK(kt[23 + 2 * f].bytes == 2 * n4c && kt[24 + 2 * f].bytes == 3 * n4c, "GELU's bytes: %g and %g, want %g and %g (read, write; the backward reads dout too)",
              kt[23 + 2 * f].bytes, kt[24 + 2 * f].bytes, 2 * n4c, 3 * n4c);
        if (fused)
            CHECK(!strcmp(kt[11].name, "matmul fc fwd gelu") && !strcmp(kt[16].name, "matmul mlp proj dinp gelu") && kt[11].flops == kt[8].flops &&
                      kt[16].flops == kt[14].flops && fused_forward_calls > 5 && fused_backward_calls > 5,
                  "the fused products: %s (%g FLOPs), %s (%g FLOPs), called %d and %d times", kt[11].name, kt[11].flops, kt[16].name,
                  kt[16].flops, fused_forward_calls, fused_backward_calls);
        /* decoding's products last, each weight matrix at 1 and 10 rows, by their bytes: the weights, the rows in and out */
        const int d0 = 26 + 2 * f, C = tr->ms.C;
        const struct { const char *name; int C, OC; } dec[5] = {{"qkv", C, 3 * C}, {"attn proj", C, C}, {"fc", C, 4 * C}, {"mlp proj", 4 * C, C},
                                                               {"classifier", C, tr->ms.Vp}};
        CHECK(n == want && n == d0 + 12, "fusions %d: %d kernel timings, decoding's 12 from %d", fused, n, d0);
        for (int i = 0; i < 10 && d0 + i < n; i++) {
            const int rows = i % 2 ? 10 : 1, dc = dec[i / 2].C, doc = dec[i / 2].OC;
            char name[40];
            snprintf(name, sizeof name, "decode %s x%d", dec[i / 2].name, rows);
            const double bytes = ((double)doc * dc + (double)rows * dc + (double)rows * doc) * (double)act_size(tr);
            CHECK(!strcmp(kt[d0 + i].name, name) && kt[d0 + i].bytes == bytes && kt[d0 + i].flops == 0 && kt[d0 + i].seconds > 0,
                  "fusions %d: row %d is %s (%g bytes, %g s), want %s (%g bytes)", fused, d0 + i, kt[d0 + i].name, kt[d0 + i].bytes,
                  kt[d0 + i].seconds, name, bytes);
        }
        /* then decoding's attention, 1 and 10 sequences against a cache of the whole block: its keys and values, the
         * rows of q, k and v, the output */
        for (int i = 0; i < 2 && d0 + 10 + i < n; i++) {
            const int rows = i ? 10 : 1, T = tr->plan.req.T;
            const KernelTime *k = &kt[d0 + 10 + i];
            char name[40];
            snprintf(name, sizeof name, "kv-cache attention x%d", rows);
            const double bytes = ((double)rows * 2 * T * C + (double)rows * 3 * C + (double)rows * C) * (double)act_size(tr);
            CHECK(!strcmp(k->name, name) && k->bytes == bytes && k->flops == 0 && k->seconds > 0, "fusions %d: row %d is %s (%g bytes, %g s), want %s (%g bytes)",
                  fused, d0 + 10 + i, k->name, k->bytes, k->seconds, name, bytes);
        }
        CHECK(nonzero_moments(tr) == 0, "%zu bytes of the AdamW moments are not zero after the kernel timings", nonzero_moments(tr));
    }
    ngpt_trainer_free(tr);
}

typedef struct {
    int n;
    float loss[8];
    double mfu[8], eta[8];
    int peak_notes, eval_notes; /* log lines saying a step beat the peak, and how long the first evaluation takes */
    int layer_notes;            /* ... and that a stop waits for a layer of many seconds */
    int iter_lines;             /* step lines logged, which a progress callback replaces */
} Seen;
static void on_log(void *ctx, int level, const char *line) {
    (void)level;
    ((Seen *)ctx)->iter_lines += !strncmp(line, "iter ", 5);
    ((Seen *)ctx)->peak_notes += strstr(line, "above the matmul peak measured at the start") != NULL;
    ((Seen *)ctx)->eval_notes += strstr(line, "evaluating first: eval_iters 1 x batch_size 2 sequences of train and of val") != NULL;
    ((Seen *)ctx)->layer_notes += !strncmp(line, "note: one layer of a micro-batch takes at least ", 48) &&
                                  strstr(line, "a stop (Ctrl-C, SIGTERM) waits for the layer in progress") != NULL;
}
static void on_progress(void *ctx, const ngpt_progress *p) {
    Seen *s = (Seen *)ctx;
    if (!p->is_eval && s->n < 8) { s->loss[s->n] = p->loss; s->eta[s->n] = p->eta_seconds; s->mfu[s->n++] = p->mfu; }
}

/* more threads than CPUs are said (they slowed a run 13x, without a word) */
static void count_thread_notes(void *ctx, int level, const char *line) {
    (void)level;
    *(int *)ctx += strstr(line, "CPU") && strstr(line, "the threads take turns on them") != NULL;
}
static void test_threads_above_cpus(void) {
    for (int k = 0; k < 2; k++) {
        ngpt_config c;
        config(&c);
        c.threads = k ? cpu_count() + 1 : 1;
        int notes = 0;
        ngpt_options opt;
        memset(&opt, 0, sizeof opt);
        opt.no_data = 1;
        opt.log = count_thread_notes;
        opt.ctx = &notes;
        ngpt_trainer *tr;
        char err[NGPT_ERRLEN];
        CHECK(ngpt_trainer_create(&c, &opt, &tr, err, sizeof err) == 0, "create: %s", err);
        ngpt_trainer_free(tr);
        CHECK(notes == k, "threads %d on %d CPUs: %d notes", c.threads, cpu_count(), notes);
    }
}

/* ngpt_train with and without measure_peak, on a model whose moments hold a 512^3 product (about 800K
 * parameters), from scratch and then resumed (the peak is measured before the checkpoint's moments are
 * loaded): the same losses bit for bit, an MFU in the progress callback and log.jsonl only with it */
static void test_train_measures_peak(void) {
    char dir[64], data[96], out[2][96], path[128], err[NGPT_ERRLEN];
    if (test_folder(dir, sizeof dir, "bench_peak")) return;
    snprintf(data, sizeof data, "%s/data", dir);
    write_random_dataset(data, 97, 4000, 11);
    for (int resume = 0; resume < 2; resume++) {
        Seen seen[2];
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < 2; k++) {
            ngpt_config c;
            config(&c);
            c.n_layer = 4; c.n_embd = 128; c.block_size = 16; c.batch_size = 2; c.gradient_accumulation_steps = 1;
            c.max_iters = resume ? 6 : 3; c.eval_interval = 1000; c.eval_iters = 1;
            if (resume) copy_str(c.init_from, sizeof c.init_from, "resume"); /* from step 4, saved at the end of the first run */
            copy_str(c.data_dir, sizeof c.data_dir, data);
            snprintf(out[k], sizeof out[k], "%s/out%d", dir, k);
            copy_str(c.out_dir, sizeof c.out_dir, out[k]);
            ngpt_options opt;
            memset(&opt, 0, sizeof opt);
            opt.progress = on_progress;
            opt.log = on_log;
            opt.ctx = &seen[k];
            opt.measure_peak = k;
            ngpt_trainer *tr;
            if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); continue; }
            CHECK(k ? tr->peak_flops > 1e8 : tr->peak_flops == 0, "measure_peak %d: peak %g FLOP/s", k, tr->peak_flops);
            CHECK(resume || nonzero_moments(tr) == 0, "measure_peak %d: %zu bytes of the AdamW moments are not zero after creation", k,
                  nonzero_moments(tr));
            CHECK(!resume || nonzero_moments(tr) > 0, "measure_peak %d: the resumed moments are zero", k);
            CHECK(ngpt_train(tr) == 0, "train: %s", tr->err);
            ngpt_trainer_free(tr);
        }
        int want = resume ? 3 : 4;
        CHECK(seen[0].n == want && seen[1].n == want, "%d and %d steps reported, expected %d", seen[0].n, seen[1].n, want);
        CHECK(seen[0].eval_notes == 0 && seen[1].eval_notes == 0, "a first evaluation of milliseconds: no note (%d, %d)", seen[0].eval_notes,
              seen[1].eval_notes);
        CHECK(seen[0].layer_notes == 0 && seen[1].layer_notes == 0, "layers of milliseconds: no note of a stop's wait (%d, %d)", seen[0].layer_notes,
              seen[1].layer_notes);
        CHECK(seen[0].iter_lines == 0 && seen[1].iter_lines == 0, "the progress callback has the steps, the log none: %d, %d lines",
              seen[0].iter_lines, seen[1].iter_lines);
        for (int i = 0; i < seen[0].n && i < seen[1].n; i++) {
            CHECK(!memcmp(&seen[0].loss[i], &seen[1].loss[i], sizeof(float)), "%s step %d: loss %.9g measured, %.9g not",
                  resume ? "resumed" : "first run", i, (double)seen[1].loss[i], (double)seen[0].loss[i]);
            CHECK(seen[1].mfu[i] >= 0 && seen[1].mfu[i] < 10 && seen[0].mfu[i] < 0, "step %d: MFU %g with the peak, %g without", i,
                  seen[1].mfu[i], seen[0].mfu[i]);
        }
    }
    /* a peak measured far too low (a host busy at start): the first step that beats it raises it, and no MFU
     * is over 1 */
    {
        ngpt_config c;
        config(&c);
        c.n_layer = 4; c.n_embd = 128; c.block_size = 16; c.batch_size = 2; c.gradient_accumulation_steps = 1;
        c.max_iters = 2; c.eval_interval = 1000; c.eval_iters = 1;
        copy_str(c.data_dir, sizeof c.data_dir, data);
        snprintf(path, sizeof path, "%s/out_low_peak", dir);
        copy_str(c.out_dir, sizeof c.out_dir, path);
        Seen low;
        memset(&low, 0, sizeof low);
        ngpt_options opt;
        memset(&opt, 0, sizeof opt);
        opt.progress = on_progress;
        opt.log = on_log;
        opt.ctx = &low;
        opt.measure_peak = 1;
        ngpt_trainer *tr;
        if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err) == 0) {
            tr->peak_flops = 1e3;
            CHECK(ngpt_train(tr) == 0, "train: %s", tr->err);
            CHECK(tr->peak_flops > 1e6, "the peak raised to a step's rate: %g FLOP/s", tr->peak_flops);
            for (int i = 0; i < low.n; i++) CHECK(low.mfu[i] > 0 && low.mfu[i] <= 1, "step %d: MFU %g over a peak measured low", i, low.mfu[i]);
            CHECK(low.n == 3 && low.mfu[0] == 1, "%d steps, the first at MFU %g: the peak it set", low.n, low.mfu[0]);
            CHECK(low.peak_notes == 1, "the raised peak said once: %d notes", low.peak_notes); /* else 100% would go unexplained */
            CHECK(low.eval_notes == 1, "a first evaluation of hours at that peak: %d notes", low.eval_notes);
            CHECK(low.layer_notes == 1, "layers of hours at that peak: %d notes of a stop's wait", low.layer_notes);
            /* the ETA counts the steps left up to max_iters, itself included: none after the last alone */
            CHECK(low.eta[0] > 0 && low.eta[1] > 0 && low.eta[2] == 0, "ETA after steps 0, 1, 2 of max_iters 2: %g, %g, %g s", low.eta[0],
                  low.eta[1], low.eta[2]);
            ngpt_trainer_free(tr);
        } else CHECK(0, "create: %s", err);
    }
    for (int k = 0; k < 2; k++) { /* log.jsonl: "mfu" a number with the peak, null without */
        char text[4096] = "";
        snprintf(path, sizeof path, "%.96s/log.jsonl", out[k]);
        FILE *f = fopen(path, "r");
        if (f) { text[fread(text, 1, sizeof text - 1, f)] = 0; fclose(f); }
        const char *m = strstr(text, "\"mfu\": ");
        CHECK(m && (k ? m[7] >= '0' && m[7] <= '9' : !strncmp(m + 7, "null}", 5)), "measure_peak %d: log.jsonl: %.300s", k, text);
        /* the learning rate in full: step 0 of a 2000-step warmup is 3e-7, which six decimals would write as 0 */
        ngpt_config c;
        config(&c);
        const char *lr = strstr(text, "\"lr\": ");
        double logged = lr ? strtod(lr + 6, NULL) : 0;
        CHECK(fabs(logged - lr_at(&c, 0)) <= 1e-6 * lr_at(&c, 0), "log.jsonl's lr at step 0: %g, expected %g", logged, (double)lr_at(&c, 0));
    }
    CHECK(!remove_folder(dir), "remove %s", dir);
}

/* ---- the training loop's report: the progress callback, the log's step lines and log.jsonl ---- */

enum { REPORT_ITERS = 5, REPORT_BATCH = 4, REPORT_ACCUM = 3, REPORT_MAX_LINES = 16 };

/* a tiny model on a random dataset made in dir/data, out_dir dir/out; evaluations at 0 and at max_iters */
static void report_config(ngpt_config *c, const char *dir) {
    char data[96], out[96];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    config(c);
    write_random_dataset(data, c->vocab_size, 4000, 5);
    c->n_layer = 1; c->n_embd = 32; c->block_size = 16; c->batch_size = REPORT_BATCH; c->gradient_accumulation_steps = REPORT_ACCUM;
    c->max_iters = REPORT_ITERS; c->eval_interval = REPORT_ITERS; c->eval_iters = 1;
    copy_str(c->data_dir, sizeof c->data_dir, data);
    copy_str(c->out_dir, sizeof c->out_dir, out);
}

/* the number after "key": in a log.jsonl line; NaN when the line has no such key */
static double jsonl_field(const char *line, const char *key) {
    char at[48];
    snprintf(at, sizeof at, "\"%s\": ", key);
    const char *p = strstr(line, at);
    return p ? strtod(p + strlen(at), NULL) : NAN;
}

/* out_dir/log.jsonl's lines (without their newlines), up to REPORT_MAX_LINES of 256 bytes; how many */
static int jsonl_lines(const char *out_dir, char lines[REPORT_MAX_LINES][256]) {
    char path[160];
    snprintf(path, sizeof path, "%.140s/log.jsonl", out_dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    for (; f && n < REPORT_MAX_LINES && fgets(lines[n], sizeof lines[n], f); n++) lines[n][strcspn(lines[n], "\n")] = 0;
    if (f) fclose(f);
    return n;
}

/* what the progress callback got: the steps and the evaluations in order */
typedef struct {
    int n, n_eval;
    ngpt_progress step[REPORT_MAX_LINES], eval[REPORT_MAX_LINES];
} Reports;
static void keep_report(void *ctx, const ngpt_progress *p) {
    Reports *r = (Reports *)ctx;
    if (p->is_eval && r->n_eval < REPORT_MAX_LINES) r->eval[r->n_eval++] = *p;
    else if (!p->is_eval && r->n < REPORT_MAX_LINES) r->step[r->n++] = *p;
}

/* a trainer on report_config's run in a new test folder (its name into dir), its progress reports kept in seen;
 * NULL (the folder removed) when it cannot be made */
static ngpt_trainer *report_trainer(const char *name, char *dir, size_t dir_size, ngpt_config *c, Reports *seen) {
    char err[NGPT_ERRLEN];
    if (test_folder(dir, dir_size, name)) return NULL;
    report_config(c, dir);
    memset(seen, 0, sizeof *seen);
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.progress = keep_report;
    opt.ctx = seen;
    ngpt_trainer *tr;
    if (ngpt_trainer_create(c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); remove_folder(dir); return NULL; }
    return tr;
}

/* each step's tokens/s is its batch_size * block_size * gradient_accumulation_steps tokens over its own time, in the
 * progress callback and in log.jsonl; the ETA is the mean step time so far times the steps left up to max_iters,
 * itself included (an evaluation's: the steps from its own) */
static void test_report_rates_and_eta(void) {
    char dir[64], lines[REPORT_MAX_LINES][256];
    ngpt_config c;
    Reports seen;
    ngpt_trainer *tr = report_trainer("report_rates", dir, sizeof dir, &c, &seen);
    if (!tr) return;
    CHECK(ngpt_train(tr) == 0, "train: %s", tr->err);
    ngpt_trainer_free(tr);
    const double tokens = (double)REPORT_BATCH * c.block_size * REPORT_ACCUM;
    CHECK(seen.n == REPORT_ITERS + 1 && seen.n_eval == 2, "%d steps and %d evaluations reported", seen.n, seen.n_eval);
    double total = 0, before_last = 0; /* the step times, all and all but the last (the last evaluation comes before it) */
    for (int i = 0; i < seen.n; i++) {
        const ngpt_progress *p = &seen.step[i];
        before_last = total;
        total += p->step_seconds;
        double mean = total / (i + 1), eta = mean * (REPORT_ITERS - p->step);
        CHECK(p->step == i && fabs(p->tokens_per_second * p->step_seconds - tokens) <= 1e-9 * tokens,
              "step %d (reported as %d): %g tokens/s over %g s, not %g tokens", i, p->step, p->tokens_per_second, p->step_seconds, tokens);
        CHECK(fabs(p->eta_seconds - eta) <= 1e-9 * eta, "step %d: ETA %.9g s, expected the mean %.9g s x %d steps left = %.9g s", i,
              p->eta_seconds, mean, REPORT_ITERS - p->step, eta);
    }
    const ngpt_progress *last_eval = &seen.eval[1];
    double eval_eta = before_last / REPORT_ITERS * (REPORT_ITERS + 1 - last_eval->step);
    CHECK(seen.n_eval == 2 && seen.eval[0].eta_seconds == 0 && last_eval->step == REPORT_ITERS &&
              fabs(last_eval->eta_seconds - eval_eta) <= 1e-9 * eval_eta,
          "evaluations' ETA: %g s before any step, %.9g s at step %d (expected %.9g s)", seen.eval[0].eta_seconds, last_eval->eta_seconds,
          last_eval->step, eval_eta);
    /* log.jsonl: the callback's numbers, as rounded there (dt_ms to 3 decimals, tokens/s to 1), so their product
     * is the step's tokens up to those roundings */
    int n = jsonl_lines(c.out_dir, lines), logged = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(jsonl_field(lines[i], "loss"))) continue; /* an evaluation */
        double dt_ms = jsonl_field(lines[i], "dt_ms"), rate = jsonl_field(lines[i], "tokens_per_second");
        int step = (int)jsonl_field(lines[i], "step");
        if (step != logged || logged >= seen.n) { CHECK(0, "line %d of log.jsonl is step %d, expected %d: %s", i + 1, step, logged, lines[i]); break; }
        const ngpt_progress *p = &seen.step[logged++];
        CHECK(fabs(dt_ms - p->step_seconds * 1e3) <= 5e-4 + 1e-9 && fabs(rate - p->tokens_per_second) <= 0.05 + 1e-9 * rate &&
                  fabs(rate * dt_ms / 1e3 - tokens) <= tokens * (5e-4 / dt_ms + 0.05 / rate + 1e-9),
              "log.jsonl step %d: %g tokens/s over %g ms (the callback: %g over %g ms), not %g tokens", step, rate, dt_ms, p->tokens_per_second,
              p->step_seconds * 1e3, tokens);
    }
    CHECK(logged == REPORT_ITERS + 1, "log.jsonl holds %d step lines, expected %d", logged, REPORT_ITERS + 1);
    CHECK(!remove_folder(dir), "remove %s", dir);
}

/* an evaluation's line in log.jsonl holds its train loss and its val loss, each in its place: at step 0, those
 * ngpt_evaluate gives there (the batches come from the seed and the step), which differ on this data; at
 * max_iters those the progress callback got */
static void test_report_evaluation_losses(void) {
    char dir[64], lines[REPORT_MAX_LINES][256];
    ngpt_config c;
    Reports seen;
    ngpt_trainer *tr = report_trainer("report_eval", dir, sizeof dir, &c, &seen);
    if (!tr) return;
    float train0 = 0, val0 = 0;
    CHECK(ngpt_evaluate(tr, &train0, &val0) == 0, "evaluate: %s", tr->err);
    CHECK(fabsf(train0 - val0) > 1e-4f, "train loss %.6f, val loss %.6f: the test needs losses that differ", (double)train0, (double)val0);
    CHECK(ngpt_train(tr) == 0, "train: %s", tr->err);
    ngpt_trainer_free(tr);
    const float want_train[2] = {train0, seen.eval[1].train_loss}, want_val[2] = {val0, seen.eval[1].val_loss};
    CHECK(seen.n_eval == 2 && seen.eval[0].train_loss == train0 && seen.eval[0].val_loss == val0 && seen.eval[1].step == REPORT_ITERS,
          "the callback's evaluations: %d, the first train %.6f val %.6f (ngpt_evaluate: %.6f, %.6f)", seen.n_eval,
          (double)seen.eval[0].train_loss, (double)seen.eval[0].val_loss, (double)train0, (double)val0);
    int n = jsonl_lines(c.out_dir, lines), evals = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(jsonl_field(lines[i], "val_loss"))) continue; /* a step */
        if (evals >= 2) { CHECK(0, "a third evaluation in log.jsonl: %s", lines[i]); break; }
        double tl = jsonl_field(lines[i], "train_loss"), vl = jsonl_field(lines[i], "val_loss");
        CHECK((int)jsonl_field(lines[i], "step") == (evals ? REPORT_ITERS : 0) && fabs(tl - want_train[evals]) <= 1e-6 &&
                  fabs(vl - want_val[evals]) <= 1e-6,
              "log.jsonl: %.200s, expected train_loss %.6f, val_loss %.6f", lines[i], (double)want_train[evals], (double)want_val[evals]);
        evals++;
    }
    CHECK(evals == 2, "log.jsonl holds %d evaluations, expected 2", evals);
    CHECK(!remove_folder(dir), "remove %s", dir);
}

/* a NaN loss, whatever its sign bit, reaches the progress callback and the log as an unsigned NaN: "nan", not
 * "-nan" */
typedef struct {
    ngpt_progress p;
    char line[256];
} LastReport;
static void keep_last_report(void *ctx, const ngpt_progress *p) { ((LastReport *)ctx)->p = *p; }
static void keep_last_line(void *ctx, int level, const char *line) {
    (void)level;
    copy_str(((LastReport *)ctx)->line, sizeof ((LastReport *)ctx)->line, line);
}
static void test_report_unsigned_nan(void) {
    ngpt_trainer *tr = make();
    if (!tr) return;
    const float negative_nan = copysignf(NAN, -1.0f);
    LastReport last;
    memset(&last, 0, sizeof last);
    tr->opt.progress = keep_last_report;
    tr->opt.log = keep_last_line;
    tr->opt.ctx = &last;
    tr->step = 1;
    tr->last_loss = negative_nan;
    report(tr, -1, 0, 0, 0, 0);
    CHECK(isnan(last.p.loss) && !signbit(last.p.loss), "a step's loss of -NaN reaches the callback as %f", (double)last.p.loss);
    report(tr, -1, 1, negative_nan, negative_nan, 0);
    CHECK(isnan(last.p.train_loss) && !signbit(last.p.train_loss) && isnan(last.p.val_loss) && !signbit(last.p.val_loss),
          "an evaluation's losses of -NaN reach the callback as %f, %f", (double)last.p.train_loss, (double)last.p.val_loss);
    CHECK(!strcmp(last.line, "step 1: train loss nan, val loss nan"), "the evaluation's log line: %s", last.line);
    tr->opt.progress = NULL; /* the step's line is logged */
    report(tr, -1, 0, 0, 0, 0);
    CHECK(!strncmp(last.line, "iter 0: loss nan, ", 18), "the step's log line: %s", last.line);
    ngpt_trainer_free(tr);
}

/* without a progress callback the log has a line for every log_interval-th step (nanoGPT's iter_num % log_interval),
 * the last one included, and log.jsonl one for every step */
enum { INTERVAL_ITERS = 10, INTERVAL = 5 };
static void log_iter_steps(void *ctx, int level, const char *line) {
    (void)level;
    int step;
    if (sscanf(line, "iter %d: loss ", &step) == 1 && step >= 0 && step <= INTERVAL_ITERS) *(unsigned *)ctx |= 1u << step;
}
static void test_report_log_interval(void) {
    char dir[64], err[NGPT_ERRLEN], lines[REPORT_MAX_LINES][256];
    if (test_folder(dir, sizeof dir, "report_interval")) return;
    ngpt_config c;
    report_config(&c, dir);
    c.batch_size = 2; c.gradient_accumulation_steps = 1; c.max_iters = INTERVAL_ITERS; c.eval_interval = 1000; c.log_interval = INTERVAL;
    unsigned logged = 0; /* bit s: a line for step s */
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.log = log_iter_steps;
    opt.ctx = &logged;
    ngpt_trainer *tr;
    if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); remove_folder(dir); return; }
    CHECK(ngpt_train(tr) == 0, "train: %s", tr->err);
    ngpt_trainer_free(tr);
    const unsigned want = 1u << 0 | 1u << INTERVAL | 1u << INTERVAL_ITERS;
    CHECK(logged == want, "the log's step lines: mask 0x%x, expected 0x%x (steps 0, %d, %d)", logged, want, INTERVAL, INTERVAL_ITERS);
    int n = jsonl_lines(c.out_dir, lines), steps = 0;
    for (int i = 0; i < n; i++) steps += !isnan(jsonl_field(lines[i], "loss")) && (int)jsonl_field(lines[i], "step") == steps;
    CHECK(steps == INTERVAL_ITERS + 1, "log.jsonl: %d step lines in order of its %d lines, expected %d", steps, n, INTERVAL_ITERS + 1);
    CHECK(!remove_folder(dir), "remove %s", dir);
}

/* `nanogpt bench` leaves vocab_size 0 to the trainer: a char dataset's meta.bin gives its character count even
 * though the bench reads no tokens; a dataset without one gets GPT-2's vocabulary */
static void test_bench_vocab_from_dataset(void) {
    char dir[64], path[128], err[NGPT_ERRLEN];
    if (test_folder(dir, sizeof dir, "bench")) return;
    snprintf(path, sizeof path, "%s/in.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) { CHECK(0, "cannot write %s", path); return; }
    for (int i = 0; i < 200; i++) fputs("to be or not to be, that is the question\n", f); /* 15 distinct characters */
    fclose(f);
    snprintf(path, sizeof path, "%s/chars", dir);
    char in[128];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    CHECK(prepare_char(in, path, 0.1, NULL, err, sizeof err) == 0, "prepare: %s", err);
    const char *data_dirs[2] = {path, dir}; /* the prepared dataset; a folder without meta.bin */
    const int want[2] = {15, 50257};
    for (int k = 0; k < 2; k++) {
        ngpt_config c;
        config(&c);
        c.vocab_size = 0;
        copy_str(c.data_dir, sizeof c.data_dir, data_dirs[k]);
        ngpt_options opt;
        memset(&opt, 0, sizeof opt);
        opt.no_data = 1;
        ngpt_trainer *tr;
        if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create with %s: %s", data_dirs[k], err); continue; }
        CHECK(tr->ms.V == want[k] && tr->ms.Vp == pad_vocab(want[k]), "data_dir %s: vocab %d (padded %d), expected %d", data_dirs[k],
              tr->ms.V, tr->ms.Vp, want[k]);
        ngpt_trainer_free(tr);
    }
    CHECK(!remove_folder(dir), "remove %s", dir);
}

int main(void) {
    RUN(test_threads_above_cpus);
    RUN(test_bench_numbers);
    RUN(test_bench_peak_and_mfu);
    RUN(test_bench_host_share);
    RUN(test_train_measures_peak);
    RUN(test_report_rates_and_eta);
    RUN(test_report_evaluation_losses);
    RUN(test_report_unsigned_nan);
    RUN(test_report_log_interval);
    RUN(test_profiling_changes_nothing);
    RUN(test_kernel_timings);
    RUN(test_bench_vocab_from_dataset);
    return check_summary();
}
