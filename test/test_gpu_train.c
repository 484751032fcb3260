/* test_gpu_train.c: the CUDA backend through the whole trainer, against the CPU backend (GPU only; run by
 * test/gpu.sh, linked with -Wl,--wrap for the CUDA allocation calls; with --quick, on a smaller model and
 * without the 300-step curve, as test/cuda_emu.sh runs it on the CUDA emulator; with --no-curve, without the curve).
 *  - one training step on a tiny config: loss and every parameter gradient, CUDA (fp32 and bf16) vs CPU;
 *  - whole layers recomputed in the backward give the bits of keeping every activation;
 *  - the same seed twice gives bit-identical losses on the GPU;
 *  - nothing is allocated on the device (cudaMalloc & co.) or the host (counted in the trainer's calls)
 *    after the trainer is made: steps, evaluations, checkpoints;
 *  - 300 steps of the default Tiny Shakespeare char model: the GPU loss curve follows the CPU's;
 *  - a run resumed from a checkpoint on the GPU is bit-identical to an uninterrupted one (fp32 and bf16 moments),
 *    and one resumed at the other moments precision steps on;
 *  - generation with the KV cache gives the full forward's logits at every step, and its steps of one position run
 *    as a recorded CUDA graph (unless NGPT_GRAPHS=0);
 *  - a sampling-only bf16 trainer, loaded from a checkpoint, samples as the trained one;
 *  - moments_dtype = bfloat16 halves the moments and follows the fp32 moments' losses;
 *  - fp16's dynamic loss scale doubles after 2000 good steps, halves on an overflow (whose step changes nothing) and
 *    is divided out before clipping. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "trainer_util.h"
#include "files.h"

#include "cuda_alloc_count.h"

static char dir[256], out_dir[300];
static int quick; /* --quick: a smaller model, and no 300-step curve (for the CUDA emulator, test/cuda_emu.sh) */

static void config(ngpt_config *c, const char *device, const char *dtype) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, device);
    copy_str(c->dtype, sizeof c->dtype, dtype);
    copy_str(c->data_dir, sizeof c->data_dir, dir);
    copy_str(c->out_dir, sizeof c->out_dir, out_dir);
    c->vocab_size = 65; c->block_size = 64; c->n_layer = 2; c->n_head = 4; c->n_embd = 128; c->bias = 1;
    c->batch_size = 8; c->gradient_accumulation_steps = 2; c->dropout = 0.1; c->eval_iters = 4; c->eval_interval = 1000;
    c->learning_rate = 1e-3; c->warmup_iters = 5; c->lr_decay_iters = 100; c->min_lr = 1e-4;
    if (quick) { c->n_embd = 64; c->n_head = 2; c->batch_size = 4; } /* an eighth of the matmul work; head size 32 */
    c->micro_batch = c->batch_size; /* two micro-batches a step, as the CPU's: on a GPU the planner would take both at once */
}

/* a test that saves checkpoints writes them into its own folder: resume reads the newest in out_dir, which
 * must be its own, not another test's later step */
static void own_out_dir(ngpt_config *c, const char *name) {
    snprintf(c->out_dir, sizeof c->out_dir, "%.200s/%s", dir, name);
    mkdir(c->out_dir, 0777);
}

static ngpt_trainer *make(const ngpt_config *c) {
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(c, NULL, &tr, err, sizeof err)) { CHECK(0, "create (%s): %s", c->device, err); return NULL; }
    return tr;
}

/* loss and gradients of the first step, CUDA vs CPU (same init: both backends draw from the same hash).
 * gpt2_heads: GPT-2's head size, 64, without dropout and with block 192 (one and a half 128-row tiles),
 * where a Hopper runs attention on wgmma, its backward keeping dS^T in the scratch the plan adds for it;
 * the GPU's gradients are then also held bit-identical on a second trainer. */
static void check_step(const char *dtype, double tol, int gpt2_heads) {
    ngpt_config cc, gc;
    config(&cc, "cpu", "float32");
    config(&gc, "cuda", dtype);
    if (gpt2_heads) {
        cc.n_head = gc.n_head = cc.n_embd / 64;
        cc.dropout = gc.dropout = 0;
        cc.block_size = gc.block_size = 192;
    }
    ngpt_trainer *cpu = make(&cc), *gpu = make(&gc);
    if (!cpu || !gpu) return;
    double lc, lg;
    CHECK(forward_backward(cpu, fill_from_train, NULL, &lc, NULL, NULL) == 0, "%s", cpu->err);
    CHECK(forward_backward(gpu, fill_from_train, NULL, &lg, NULL, NULL) == 0, "%s", gpu->err);
    size_t P = cpu->plan.nparams;
    float *gc_ = malloc(P * 4), *gg = malloc(P * 4);
    copy_params_out(cpu, gc_, cpu->grads);
    copy_params_out(gpu, gg, gpu->grads);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < P; i++) { worst = fmax(worst, fabs((double)gg[i] - gc_[i])); scale = fmax(scale, fabs((double)gc_[i])); }
    printf("  %s: loss gpu %.6f cpu %.6f; grads max abs diff %.3g (max |grad| %.3g)\n", dtype, lg, lc, worst, scale);
    CHECK(fabs(lg - lc) <= tol * lc, "%s loss: gpu %.6f cpu %.6f", dtype, lg, lc);
    CHECK(worst <= tol * 10 * scale, "%s grads: max abs diff %.3g of %.3g", dtype, worst, scale);
    if (gpt2_heads) { /* the query weights' gradients, which come through dQ alone, small at the initialisation: held to their own scale */
        size_t sizes[N_PARAM_TENSORS], C = (size_t)cpu->ms.C;
        param_sizes(&cpu->ms, sizes);
        const size_t qkvw = sizes[P_WTE] + sizes[P_WPE] + sizes[P_LN1W] + sizes[P_LN1B];
        double wq = 0, sq = 0;
        for (size_t l = 0; l < (size_t)cpu->ms.L; l++)
            for (size_t i = qkvw + l * 3 * C * C; i < qkvw + l * 3 * C * C + C * C; i++) {
                wq = fmax(wq, fabs((double)gg[i] - gc_[i]));
                sq = fmax(sq, fabs((double)gc_[i]));
            }
        printf("  %s: query weights' grads max abs diff %.3g (max |grad| %.3g)\n", dtype, wq, sq);
        CHECK(wq <= tol * 10 * sq, "%s query weights' grads: max abs diff %.3g of %.3g", dtype, wq, sq);
    }
    ngpt_trainer *again = gpt2_heads ? make(&gc) : NULL;
    if (again) {
        float *g2 = malloc(P * 4);
        double l2;
        CHECK(forward_backward(again, fill_from_train, NULL, &l2, NULL, NULL) == 0, "%s", again->err);
        copy_params_out(again, g2, again->grads);
        CHECK(l2 == lg && !memcmp(g2, gg, P * 4), "%s: a second trainer's loss or gradients differ in their bits", dtype);
        free(g2);
        ngpt_trainer_free(again);
    }
    free(gc_); free(gg);
    ngpt_trainer_free(cpu);
    ngpt_trainer_free(gpu);
}
static void test_step_fp32(void) { check_step("float32", 1e-5, 0); }
static void test_step_bf16(void) { check_step("bfloat16", 1e-2, 0); }
static void test_step_gpt2_heads_bf16(void) { check_step("bfloat16", 1e-2, 1); }

/* whole layers recomputed in the backward (recompute = 3) give the GPU's gradients of keeping everything
 * (recompute = 0), bit for bit, at the same micro-batch: with dropout, and at GPT-2's head size 64 (a Hopper's
 * wgmma attention, which the backward's recomputed forward runs again) */
static void test_whole_layers_bit_identical_bf16(void) {
    for (int gpt2_heads = 0; gpt2_heads <= 1; gpt2_heads++) {
        ngpt_config c;
        config(&c, "cuda", "bfloat16");
        c.micro_batch = c.batch_size / 2; /* two micro-batches a step */
        if (gpt2_heads) {
            c.n_head = c.n_embd / 64;
            c.dropout = 0;
            c.block_size = 192;
        }
        double loss[2];
        size_t P = 0;
        float *g[2] = {NULL, NULL};
        for (int k = 0; k < 2; k++) {
            c.recompute = k ? 3 : 0;
            ngpt_trainer *tr = make(&c);
            if (!tr) break;
            CHECK(tr->plan.recompute == c.recompute && tr->plan.micro_batch == c.micro_batch, "plan: recompute %d, micro-batch %d",
                  tr->plan.recompute, tr->plan.micro_batch);
            CHECK(forward_backward(tr, fill_from_train, NULL, &loss[k], NULL, NULL) == 0, "%s", tr->err);
            P = tr->plan.nparams;
            g[k] = malloc(P * 4);
            copy_params_out(tr, g[k], tr->grads);
            ngpt_trainer_free(tr);
        }
        if (g[0] && g[1]) {
            size_t diff = 0;
            for (size_t i = 0; i < P; i++) diff += memcmp(&g[0][i], &g[1][i], 4) != 0;
            printf("  %s: loss %.6f and %.6f; %zu of %zu gradients differ in their bits\n", gpt2_heads ? "head size 64" : "with dropout",
                   loss[0], loss[1], diff, P);
            CHECK(loss[0] == loss[1] && diff == 0, "%s: whole layers recomputed vs kept: loss %.9g vs %.9g, %zu gradients differ",
                  gpt2_heads ? "head size 64" : "with dropout", loss[1], loss[0], diff);
        }
        free(g[0]); free(g[1]);
    }
}

static void test_deterministic_and_no_allocation(void) {
    ngpt_config c;
    config(&c, "cuda", "bfloat16");
    own_out_dir(&c, "determinism");
    c.eval_interval = 5;
    c.max_iters = 12;
    c.always_save_checkpoint = 1;
    float a[20], b[20];
    for (int run = 0; run < 2; run++) {
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        long before = cuda_alloc_calls;
        for (int s = 0; s < 12; s++) CHECK(ngpt_train_step(tr, run ? &b[s] : &a[s]) == 0, "%s", tr->err);
        float tl, vl;
        CHECK(ngpt_evaluate(tr, &tl, &vl) == 0 && checkpoint_save(tr, 0) == 0, "%s", tr->err);
        CHECK(cuda_alloc_calls == before, "%ld CUDA allocation calls while training", cuda_alloc_calls - before);
        ngpt_trainer_free(tr);
    }
    CHECK(!memcmp(a, b, 12 * sizeof(float)), "the same seed gave different losses on the GPU");
}

/* a run resumed from its step-4 checkpoint: the losses of steps 4..9 are the straight run's, bit for bit; with
 * bf16 moments too (saved widened, read back exactly; their stochastic rounding's dice follow the step) */
static void resume_bit_identical(const char *moments_dtype) {
    ngpt_config c;
    config(&c, "cuda", "bfloat16");
    copy_str(c.moments_dtype, sizeof c.moments_dtype, moments_dtype);
    own_out_dir(&c, strcmp(moments_dtype, "bfloat16") ? "resume" : "resume_bf16_moments");
    float straight[10], resumed[10];
    ngpt_trainer *a = make(&c), *b;
    if (!a) return;
    for (int s = 0; s < 10; s++) ngpt_train_step(a, &straight[s]);
    b = make(&c);
    if (!b) return;
    for (int s = 0; s < 4; s++) ngpt_train_step(b, &resumed[s]);
    CHECK(checkpoint_save(b, 0) == 0, "%s", b->err);
    ngpt_trainer_free(b);
    copy_str(c.init_from, sizeof c.init_from, "resume");
    b = make(&c);
    if (!b) return;
    char note[300];
    CHECK(!resume_moments_note(b, note, sizeof note)[0], "moments_dtype = %s resumed as it ran: a note '%s'", moments_dtype, note);
    for (int s = 4; s < 10; s++) ngpt_train_step(b, &resumed[s]);
    CHECK(!memcmp(straight, resumed, sizeof straight), "the resumed GPU run differs (moments_dtype = %s)", moments_dtype);
    ngpt_trainer_free(a);
    ngpt_trainer_free(b);
}
/* a checkpoint of one moments precision resumed at the other: fp32 moments read into bf16 storage rounded to
 * nearest (they were cut before 2026-12-02), bf16 ones widened back into fp32 exactly; compared, bits, with the
 * file's first 4096 values of each moment; the resumed trainer then steps on */
static void test_resume_across_moments_dtype(void) {
    for (int k = 0; k < 2; k++) {
        const char *from = k ? "bfloat16" : "float32", *to = k ? "float32" : "bfloat16";
        ngpt_config c;
        config(&c, "cuda", "bfloat16");
        copy_str(c.moments_dtype, sizeof c.moments_dtype, from);
        own_out_dir(&c, k ? "resume_bf16_to_fp32" : "resume_fp32_to_bf16");
        ngpt_trainer *a = make(&c);
        if (!a) return;
        for (int s = 0; s < 4; s++) ngpt_train_step(a, NULL);
        CHECK(checkpoint_save(a, 0) == 0, "%s", a->err);
        ngpt_trainer_free(a);
        copy_str(c.moments_dtype, sizeof c.moments_dtype, to);
        copy_str(c.init_from, sizeof c.init_from, "resume");
        ngpt_trainer *b = make(&c);
        if (!b) return;
        CHECK(b->plan.moments_dtype == (k ? NGPT_DTYPE_F32 : NGPT_DTYPE_BF16), "moments %s -> %s: the resumed trainer's are %d", from, to,
              b->plan.moments_dtype);
        /* the checkpoint says which precision its run kept, and training's note names both and the way back */
        char note[300];
        resume_moments_note(b, note, sizeof note);
        CHECK(b->loaded_moment_bits == (k ? 16 : 32) &&
                  !strcmp(note, k ? "AdamW moments fp32 (its run: bf16): the checkpoint's were widened to fp32, exactly; pass "
                                    "--moments_dtype=bfloat16 to go on in bf16"
                                  : "AdamW moments bf16 (its run: fp32): the checkpoint's were rounded to bf16; pass --moments_dtype=auto to "
                                    "go on in fp32 where they fit"),
              "moments %s -> %s: the checkpoint's bits %d, the note '%s'", from, to, b->loaded_moment_bits, note);
        enum { N = 4096 };
        char path[512], err[NGPT_ERRLEN];
        checkpoint_path(c.out_dir, 4, path, sizeof path);
        CkptReader r;
        const int opened = checkpoint_open(&r, path, err, sizeof err) == NGPT_OK;
        int differ = 0, unread = !opened;
        size_t n = MIN((size_t)N, b->plan.param_len[P_WTE]), mb = b->plan.moment_bytes;
        for (int sec = SEC_ADAM_M; !unread && sec <= SEC_ADAM_V; sec++) {
            static float file[N], got[N];
            static uint16_t got16[N];
            unread = fseek(r.f, (long)r.h.sec[sec - 1].offset, SEEK_SET) || fread(file, 4, n, r.f) != n;
            void *dev = tensor_at(b, sec == SEC_ADAM_M ? b->m : b->v, P_WTE, mb);
            b->be->download(b->be, mb == 4 ? (void *)got : (void *)got16, dev, n * mb);
            for (size_t q = 0; q < n; q++) differ += mb == 4 ? memcmp(&got[q], &file[q], 4) != 0 : got16[q] != f32_to_bf16(file[q]);
        }
        if (opened) fclose(r.f);
        CHECK(!unread && !differ, "moments %s -> %s: %d of wte's first %zu m and v differ from the file's %s (%s)", from, to, differ, n,
              k ? "values" : "rounded to nearest", unread ? err : "read");
        float loss = 0;
        CHECK(ngpt_train_step(b, &loss) == 0 && isfinite(loss) && b->step == 5, "moments %s -> %s: a step after the resume: %s", from, to, b->err);
        ngpt_trainer_free(b);
    }
}
static void test_resume_bit_identical(void) { resume_bit_identical("auto"); }
static void test_resume_bit_identical_bf16_moments(void) { resume_bit_identical("bfloat16"); }

/* moments_dtype = bfloat16: the plan holds the AdamW moments in half the bytes, and 20 steps follow the fp32
 * moments' losses within bf16 noise (the first step's update is the same sign of the same gradient in both) */
static void test_bf16_moments_follow_fp32(void) {
    float loss[2][20];
    size_t moment_bytes[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        ngpt_config c;
        config(&c, "cuda", "bfloat16");
        copy_str(c.moments_dtype, sizeof c.moments_dtype, k ? "bfloat16" : "float32");
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        CHECK(tr->plan.moments_dtype == (k ? NGPT_DTYPE_BF16 : NGPT_DTYPE_F32), "moments_dtype = %s: the plan's moments are %d",
              c.moments_dtype, tr->plan.moments_dtype);
        moment_bytes[k] = (size_t)tr->plan.cat_bytes[CAT_MOMENTS];
        for (int s = 0; s < 20; s++) CHECK(ngpt_train_step(tr, &loss[k][s]) == 0, "%s", tr->err);
        ngpt_trainer_free(tr);
    }
    double worst = 0;
    for (int s = 0; s < 20; s++) worst = fmax(worst, fabs((double)loss[1][s] - loss[0][s]) / loss[0][s]);
    printf("  20 steps: loss %.4f -> %.4f with fp32 moments, %.4f -> %.4f with bf16 (worst relative difference %.3g); moments %zu and %zu bytes\n",
           loss[0][0], loss[0][19], loss[1][0], loss[1][19], worst, moment_bytes[0], moment_bytes[1]);
    CHECK(moment_bytes[1] * 2 <= moment_bytes[0] + 1024 && moment_bytes[1] * 2 >= moment_bytes[0] - 1024,
          "bf16 moments take half the bytes: %zu against %zu", moment_bytes[1], moment_bytes[0]);
    CHECK(worst < 0.005 && loss[1][19] < loss[1][0] - 0.1, "bf16 moments' losses left the fp32 ones' by %.3g, or did not fall (%.4f -> %.4f)",
          worst, loss[1][0], loss[1][19]);
}

/* the default char model for 300 steps on both backends: the curves agree within bf16 noise */
static void test_curve_follows_cpu(void) {
    float lc[301], lg[301];
    for (int k = 0; k < 2; k++) {
        ngpt_config c;
        ngpt_config_defaults(&c);
        apply_preset(&c, preset_shakespeare_char);
        copy_str(c.device, sizeof c.device, k ? "cuda" : "cpu");
        copy_str(c.data_dir, sizeof c.data_dir, dir);
        copy_str(c.out_dir, sizeof c.out_dir, out_dir);
        c.batch_size = 16; /* the CPU side must finish in minutes */
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        for (int s = 0; s < 300; s++) ngpt_train_step(tr, k ? &lg[s] : &lc[s]);
        ngpt_trainer_free(tr);
    }
    double mc = 0, mg = 0;
    for (int s = 250; s < 300; s++) { mc += lc[s] / 50; mg += lg[s] / 50; }
    printf("  300 steps: mean loss of steps 250-299: gpu %.4f, cpu %.4f\n", mg, mc);
    CHECK(fabs(mg - mc) < 0.03, "the GPU curve (%.4f) does not follow the CPU's (%.4f) within 0.03", mg, mc);
}

/* KV-cache decoding against the full forward (check_decode_matches_full) with weights N(0, 0.3) (the initial ones
 * barely tell one position from another) */
static void decode_matches_full(ngpt_trainer *tr, double rel_tol) {
    enum { S = 3 };
    const int block = tr->plan.req.T;
    size_t np = tr->plan.nparams;
    float *w = malloc(np * sizeof *w);
    int32_t *tok = malloc((size_t)S * block * sizeof *tok);
    for (size_t i = 0; w && i < np; i++) w[i] = 0.3f * normal_at(77, 0, i);
    CHECK(w && tok && copy_params_in(tr, w) == 0, "random parameters: %s", tr->err);
    for (int i = 0; tok && i < S * block; i++) tok[i] = (int32_t)(ngpt_hash(4, 4, (uint64_t)i) % (uint32_t)tr->ms.V);
    char what[64];
    snprintf(what, sizeof what, "GPU %s", dtype_name(tr->plan.req.dtype));
    if (w && tok) check_decode_matches_full(tr, S, tok, rel_tol, what);
    free(w);
    free(tok);
}

/* generation with the KV cache on the GPU: decoding against the full forward in fp32 and bf16 (where a prompt's chunk
 * at position 0 runs on the attention forward's kernels), and sampling against the CPU's */
static void test_sample_kv_cache(void) {
    ngpt_config c;
    for (int k = 0; k < 2; k++) { /* trainers of their own: they leave random weights */
        config(&c, "cuda", k ? "float32" : "bfloat16");
        ngpt_trainer *t = make(&c);
        if (t) decode_matches_full(t, k ? 1e-5 : 0.03);
        ngpt_trainer_free(t);
    }
    config(&c, "cuda", "float32");
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    int V = tr->ms.V;
    int32_t prompt[2] = {1, 2}, out[2 * 100];
    CHECK(ngpt_sample(tr, prompt, 2, 2, 98, 0.8f, 10, 3, out) == 0, "sample: %s", tr->err);
    /* ngpt_sample itself against the CPU's: a long prompt is fed with no download between the steps (each
     * step's token upload must wait for its host buffer to be free), then greedy decoding (top_k 1), so the
     * same weights (equal up to the last bits of the initialisation) give the same tokens */
    enum { NP = 40, NEW = 24, NS = 3 };
    int32_t long_prompt[NP], out_gpu[NS * (NP + NEW)], out_cpu[NS * (NP + NEW)];
    for (int i = 0; i < NP; i++) long_prompt[i] = (int32_t)(ngpt_hash(6, 6, (uint64_t)i) % (uint32_t)V);
    const long long graph_steps = tr->graph_steps;
    CHECK(ngpt_sample(tr, long_prompt, NP, NS, NEW, 1.0f, 1, 5, out_gpu) == 0, "sample (gpu): %s", tr->err);
    /* after the prompt, each new token but the last is a step of one position: all of them the recorded graph, in
     * each round, where the backend records graphs (NGPT_GRAPHS=0: none) */
    SampleFit fit;
    CHECK(!sample_fit(tr, NS, &fit), "sample_fit");
    const long long rounds = (NS + fit.seqs - 1) / fit.seqs, want = tr->be->graph_begin ? rounds * (NEW - 1) : 0;
    printf("  ngpt_sample: %lld of its steps ran as the recorded graph (%lld rounds)\n", tr->graph_steps - graph_steps, rounds);
    CHECK(tr->graph_steps - graph_steps == want, "%lld steps ran as the recorded graph, not %lld", tr->graph_steps - graph_steps, want);
    ngpt_config cc;
    config(&cc, "cpu", "float32");
    ngpt_trainer *tc = make(&cc);
    if (tc) {
        CHECK(ngpt_sample(tc, long_prompt, NP, NS, NEW, 1.0f, 1, 5, out_cpu) == 0, "sample (cpu): %s", tc->err);
        int differ = 0;
        for (int i = 0; i < NS * (NP + NEW); i++) differ += out_gpu[i] != out_cpu[i];
        printf("  ngpt_sample, %d-token prompt, greedy: %d of %d tokens differ between GPU and CPU\n", NP, differ, NS * (NP + NEW));
        CHECK(differ == 0, "GPU sampling differs from the CPU's in %d tokens", differ);
        ngpt_trainer_free(tc);
    }
    ngpt_trainer_free(tr);
}

/* a sampling-only trainer on the GPU in bf16 (no gradients, moments or fp32 master: the checkpoint's fp32
 * parameters are cast into bf16 through a window in the batch region): loaded from a checkpoint of a trained
 * bf16 model it samples as that model does */
static void test_sample_only_bf16(void) {
    ngpt_config c;
    config(&c, "cuda", "bfloat16");
    ngpt_trainer *full = make(&c);
    if (!full) return;
    for (int s = 0; s < 5; s++) ngpt_train_step(full, NULL);
    char path[400];
    snprintf(path, sizeof path, "%s/sample_only.ckpt", dir);
    CHECK(ngpt_save(full, path) == 0, "save: %s", full->err);
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    c.seed = 4242;
    ngpt_trainer *lean;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, &opt, &lean, err, sizeof err)) { CHECK(0, "create (sample_only): %s", err); ngpt_trainer_free(full); return; }
    CHECK(lean->plan.off_master == lean->plan.off_grads && lean->plan.off_region == lean->plan.off_m &&
              lean->plan.device_bytes < full->plan.device_bytes,
          "sampling arena %zu with gradients %zu and moments %zu bytes", lean->plan.device_bytes, lean->plan.off_master - lean->plan.off_grads,
          lean->plan.off_region - lean->plan.off_m);
    CHECK(ngpt_load(lean, path) == 0, "load: %s", lean->err);
    /* the same bf16 parameters, bit for bit: the trained model's cast from its master, these through the window */
    size_t pbytes = full->plan.nparams_padded * act_size(full);
    char *pf = malloc(pbytes), *pl = malloc(pbytes);
    full->be->download(full->be, pf, full->params, pbytes);
    lean->be->download(lean->be, pl, lean->params, pbytes);
    int differ = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) /* each tensor; the alignment gaps between them hold nothing */
        differ += memcmp(pf + full->plan.param_off[i] * act_size(full), pl + lean->plan.param_off[i] * act_size(lean),
                         full->plan.param_len[i] * act_size(full)) != 0;
    CHECK(!differ, "%d bf16 parameter tensors loaded through the window differ from the trained model's", differ);
    free(pf);
    free(pl);
    enum { NP = 8, NEW = 40, NS = 2 };
    int32_t prompt[NP], a[NS * (NP + NEW)], b[NS * (NP + NEW)];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)(ngpt_hash(7, 7, (uint64_t)i) % 65u);
    CHECK(ngpt_sample(full, prompt, NP, NS, NEW, 0.8f, 10, 9, a) == 0, "sample (full): %s", full->err);
    CHECK(ngpt_sample(lean, prompt, NP, NS, NEW, 0.8f, 10, 9, b) == 0, "sample (sample_only): %s", lean->err);
    CHECK(!memcmp(a, b, sizeof a), "the sampling-only trainer samples differently from the trained one");
    unlink(path);
    ngpt_trainer_free(lean);
    ngpt_trainer_free(full);
}

/* eval_only of a checkpoint: a forward-only plan (no gradients, moments or fp32 master) whose evaluation is
 * the trainer's at the same step */
static void test_eval_only_bf16(void) {
    ngpt_config c;
    config(&c, "cuda", "bfloat16");
    own_out_dir(&c, "eval_only");
    ngpt_trainer *full = make(&c);
    if (!full) return;
    for (int s = 0; s < 5; s++) ngpt_train_step(full, NULL);
    float t1 = 0, v1 = 0, t2 = -1, v2 = -1;
    CHECK(ngpt_evaluate(full, &t1, &v1) == 0 && checkpoint_save(full, 0) == 0, "evaluate and save: %s", full->err);
    c.eval_only = 1;
    copy_str(c.init_from, sizeof c.init_from, "resume");
    ngpt_trainer *lean = make(&c);
    if (!lean) { ngpt_trainer_free(full); return; }
    CHECK(lean->plan.req.inference && lean->plan.off_region == lean->plan.off_m && lean->plan.device_bytes < full->plan.device_bytes,
          "a forward-only plan: %zu bytes, the trainer's %zu", lean->plan.device_bytes, full->plan.device_bytes);
    CHECK(lean->step == full->step && ngpt_evaluate(lean, &t2, &v2) == 0, "step %d of %d; evaluate: %s", lean->step, full->step, lean->err);
    printf("  evaluation at step %d: the trainer %.6f / %.6f, eval_only %.6f / %.6f\n", full->step, t1, v1, t2, v2);
    CHECK(fabs(t2 - t1) <= 1e-3 * t1 && fabs(v2 - v1) <= 1e-3 * v1, "eval_only %.6f / %.6f, the trainer %.6f / %.6f", t2, v2, t1, v1);
    ngpt_trainer_free(lean);
    ngpt_trainer_free(full);
}

/* the norm of the first AdamW moment (fp32 moments), read through the host staging buffer */
static double first_moment_norm(ngpt_trainer *tr) {
    double sq = 0;
    size_t per = HOST_STAGING_BYTES / 4;
    for (int i = 0; i < N_PARAM_TENSORS; i++)
        for (size_t j = 0; j < tr->plan.param_len[i]; j += per) {
            size_t k = MIN(per, tr->plan.param_len[i] - j);
            tr->be->download(tr->be, tr->h_staging, (const float *)tensor_at(tr, tr->m, i, 4) + j, k * 4);
            for (size_t q = 0; q < k; q++) sq += (double)((const float *)tr->h_staging)[q] * ((const float *)tr->h_staging)[q];
        }
    return sqrt(sq);
}

/* fp16's dynamic loss scale (torch's GradScaler): 2^16 at the start, doubled after 2000 steps without an overflow (the
 * count starts again), halved when the scaled gradients overflow, a step that changes no parameter. The scale is divided
 * out before clipping: a first step clipped to 1e-3 leaves the first moment at (1 - beta1) x 1e-3 in norm. */
static void test_fp16_loss_scale(void) {
    ngpt_config c;
    config(&c, "cuda", "float16");
    c.dropout = 0;
    c.grad_clip = 1e-3;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    CHECK(tr->loss_scale == 65536.0f && tr->good_steps == 0 && tr->plan.moments_dtype == NGPT_DTYPE_F32, "start: loss scale %g, good steps %d, moments %d",
          (double)tr->loss_scale, tr->good_steps, tr->plan.moments_dtype);
    float loss = NAN;
    CHECK(ngpt_train_step(tr, &loss) == 0 && isfinite(loss) && tr->loss_scale == 65536.0f && tr->good_steps == 1,
          "first step: loss %g, loss scale %g, good steps %d: %s", (double)loss, (double)tr->loss_scale, tr->good_steps, tr->err);
    double m = first_moment_norm(tr);
    printf("  fp16: first step clipped to 1e-3: first moment's norm %.6g\n", m);
    CHECK(fabs(m - 1e-4) <= 1e-2 * 1e-4, "first step clipped to 1e-3: first moment's norm %.6g, want (1 - 0.9) x 1e-3", m);
    tr->good_steps = 1999;
    CHECK(ngpt_train_step(tr, &loss) == 0 && tr->loss_scale == 131072.0f && tr->good_steps == 0, "the 2000th good step: loss scale %g, good steps %d: %s",
          (double)tr->loss_scale, tr->good_steps, tr->err);
    /* 2^40: the scaled gradients of the logits pass fp16's 65504 */
    size_t P = tr->plan.nparams;
    float *before = malloc(P * 4), *after = malloc(P * 4);
    copy_master_out(tr, before);
    tr->loss_scale = 0x1p40f;
    tr->good_steps = 5;
    int step = tr->step;
    CHECK(ngpt_train_step(tr, &loss) == 0 && isfinite(loss) && tr->loss_scale == 0x1p39f && tr->good_steps == 0 && tr->step == step + 1,
          "an overflowing step: loss %g, loss scale %g (want 2^39), good steps %d, step %d of %d: %s", (double)loss, (double)tr->loss_scale,
          tr->good_steps, tr->step, step + 1, tr->err);
    copy_master_out(tr, after);
    CHECK(!memcmp(before, after, P * 4), "an overflowing step changed the parameters");
    free(before); free(after);
    ngpt_trainer_free(tr);
}

int main(int argc, char **argv) {
    int curve = 1; /* --no-curve: without the 300-step curve, whose CPU side takes minutes (test/gpu.sh, GPU_SH_CURVE=0) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1, curve = 0;
        else if (!strcmp(argv[i], "--no-curve")) curve = 0;
        else { fprintf(stderr, "usage: %s [--quick] [--no-curve]\n", argv[0]); return 2; }
    }
    char why[NGPT_ERRLEN];
    if (!ngpt_cuda_available(why, sizeof why)) { printf("FAIL no GPU: %s\n", why); return 1; }
    if (test_folder(dir, sizeof dir, "gpu_train")) return 1;
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    char input[512], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/tinyshakespeare.txt", shared_data_dir());
    if (prepare_char(input, dir, 0.1, NULL, err, sizeof err)) {
        printf("FAIL prepare: %s\n", err);
        remove_folder(dir);
        return 1;
    }
    RUN(test_step_fp32);
    RUN(test_step_bf16);
    RUN(test_step_gpt2_heads_bf16);
    RUN(test_whole_layers_bit_identical_bf16);
    RUN(test_deterministic_and_no_allocation);
    RUN(test_resume_bit_identical);
    RUN(test_resume_bit_identical_bf16_moments);
    RUN(test_resume_across_moments_dtype);
    RUN(test_sample_kv_cache);
    RUN(test_sample_only_bf16);
    RUN(test_eval_only_bf16);
    RUN(test_bf16_moments_follow_fp32);
    RUN(test_fp16_loss_scale);
    if (curve) RUN(test_curve_follows_cpu);
    remove_folder(dir);
    return check_summary();
}
