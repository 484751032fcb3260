/* test_sample.c: generation with the KV cache.
 *  - the logits of each decoding step, and of a chunk of positions fed at once (a prompt), equal those of a full
 *    forward pass over the same prefix; a prompt shared by the samples, fed once and its cache copied, samples as
 *    when fed to each, and the rounds of more samples than are decoded at once take it from the round before as when
 *    fed each round;
 *  - top_k = 1 and temperature 0 are greedy decoding of the full model; the same seed gives the same samples,
 *    each the same whatever num_samples is;
 *  - generation past block_size (the cache is rebuilt) stays valid, and greedy there is the full model's argmax over
 *    the window the rebuilt cache holds; several samples decoded at once each read their own row of Vp logits, and
 *    never draw a padded id; top-k selection is exact, draws are those of the slow obvious sampler (a sort for the
 *    cut), and greedy finds the maximum at any id, the last included;
 *  - a sampling-only trainer holds no training memory and samples a loaded checkpoint as the full one does;
 *  - decoding through the backend's optional fusions (as the CUDA backend's) gives the bits of the ops one by one;
 *  - attention_decode reads its position from t_at, where given, when it runs (a graph's replay on a GPU). */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "trainer_util.h"
#include "files.h"

enum { V = 75, T = 20, S = 3 };
static char dir[256]; /* this run's folder: its data_dir (which holds no dataset), and the checkpoints it saves */

/* nanoGPT's defaults on the cpu, reading no dataset: the model's shape is the caller's to set */
static void config_on_cpu(ngpt_config *c) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    copy_str(c->data_dir, sizeof c->data_dir, dir);
}
static ngpt_trainer *create(const ngpt_config *c, int sample_only) {
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1; /* no dataset needed to sample */
    opt.sample_only = sample_only;
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(c, &opt, &tr, err, sizeof err)) { printf("create: %s\n", err); return NULL; }
    return tr;
}
static ngpt_trainer *make_sized(int sample_only, long long seed, int block_size) {
    ngpt_config c;
    config_on_cpu(&c);
    c.vocab_size = V; c.block_size = block_size; c.n_layer = 2; c.n_head = 4; c.n_embd = 32; c.bias = 1;
    c.batch_size = S; c.gradient_accumulation_steps = 1; c.threads = 2; c.seed = seed;
    return create(&c, sample_only);
}
static ngpt_trainer *make_with(int sample_only, long long seed) { return make_sized(sample_only, seed, T); }
static ngpt_trainer *make(void) { return make_with(0, 1337); }

/* the lowest id of the largest of row[0..V) */
static int argmax_row(const float *row) {
    int best = 0;
    for (int j = 1; j < V; j++) best = row[j] > row[best] ? j : best;
    return best;
}

/* every parameter (the vocabulary padding rows too) drawn from N(0, std): the initial weights' greedy text soon
 * repeats one token whatever comes before it, while large weights make each token depend on the tokens and
 * positions before it */
static void randomize_params(ngpt_trainer *tr, float std, uint64_t seed) {
    size_t n = tr->plan.nparams;
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = std * normal_at(seed, 0, i);
    CHECK(p && copy_params_in(tr, p) == 0, "random parameters: %s", tr->err);
    free(p);
}

/* The KV cache, filled a chunk of positions at a time, gives the full forward's logits (check_decode_matches_full).
 * Weights N(0, 0.3): each position's logits depend on the tokens before it. */
static void test_decode_matches_full_forward(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    randomize_params(tr, 0.3f, 5);
    int32_t tok[S * T];
    for (int i = 0; i < S * T; i++) tok[i] = (int32_t)(ngpt_hash(4, 4, (uint64_t)i) % V);
    check_decode_matches_full(tr, S, tok, 1e-5, "CPU fp32");
    ngpt_trainer_free(tr);
}

static void test_greedy_and_seeds(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    int Vp = tr->ms.Vp, np = 4, nnew = T - np, total = T;
    int32_t prompt[4] = {1, 2, 3, 4}, out[2 * T];
    CHECK(ngpt_sample(tr, prompt, np, 1, nnew, 1.0f, 1, 99, out) == 0, "%s", tr->err);
    /* greedy: every new token is the argmax of the full model over its prefix */
    float *full = malloc((size_t)T * Vp * 4);
    full_forward_logits(tr, out, 1, full);
    int bad = 0;
    for (int t = np; t < total; t++) bad += out[t] != argmax_row(full + (size_t)(t - 1) * Vp);
    CHECK(!bad, "%d greedy tokens differ from the full model's argmax", bad);
    int32_t a[3 * 30], b[3 * 30], c[3 * 30];
    CHECK(ngpt_sample(tr, prompt, np, 3, 26, 0.9f, 20, 5, a) == 0 && ngpt_sample(tr, prompt, np, 3, 26, 0.9f, 20, 5, b) == 0 &&
              ngpt_sample(tr, prompt, np, 3, 26, 0.9f, 20, 6, c) == 0, "%s", tr->err);
    CHECK(!memcmp(a, b, sizeof a), "the same seed gave different samples");
    CHECK(memcmp(a, c, sizeof a), "different seeds gave the same samples");
    /* sample k is the same text however many are asked for (and so however many are decoded at once), as in
     * nanoGPT, where they are drawn one after another */
    int32_t one[30], two[2 * 30];
    CHECK(ngpt_sample(tr, prompt, np, 1, 26, 0.9f, 20, 5, one) == 0 && ngpt_sample(tr, prompt, np, 2, 26, 0.9f, 20, 5, two) == 0, "%s", tr->err);
    CHECK(!memcmp(one, a, sizeof one) && !memcmp(two, a, sizeof two), "sample 1 or 2 changed with num_samples");
    CHECK(memcmp(a, a + 30, 30 * sizeof(int32_t)), "samples 1 and 2 are the same text");
    /* more samples than are decoded at once (at most H, the token staging's room): a later round repeats no earlier
     * round's samples (8 new tokens each: two alike by chance is out of the question), and the first H are the same
     * when H are asked for */
    int H = (int)(tr->plan.host_bytes_of[H_TOKENS] / NGPT_FENCES / sizeof(int32_t)), per = np + 8, alike = 0;
    int32_t *many = malloc((size_t)(H + 1) * per * sizeof(int32_t)), *fit = malloc((size_t)H * per * sizeof(int32_t));
    CHECK(many && fit && ngpt_sample(tr, prompt, np, H + 1, 8, 1.0f, 0, 8, many) == 0 && ngpt_sample(tr, prompt, np, H, 8, 1.0f, 0, 8, fit) == 0,
          "%d samples: %s", H + 1, tr->err);
    for (int i = 0; many && i <= H; i++)
        for (int j = 0; j < i; j++) alike += !memcmp(many + (size_t)i * per, many + (size_t)j * per, (size_t)per * sizeof(int32_t));
    CHECK(many && fit && !alike && !memcmp(many, fit, (size_t)H * per * sizeof(int32_t)), "%d pairs of %d samples alike, or the first %d changed", alike,
          H + 1, H);
    free(many);
    free(fit);
    /* 26 new tokens from a 4-token prompt runs past block_size 20: the cache is rebuilt on the way */
    int ok = 1;
    for (int i = 0; i < 3 * 30; i++) ok &= a[i] >= 0 && a[i] < V;
    CHECK(ok, "a token outside the vocabulary");
    /* temperature 0 (and one so small that logit / temperature overflows a float) is the greedy sequence, for any
     * seed and top_k; a negative one is refused */
    int32_t g[T];
    for (int k = 0; k < 3; k++) {
        float temp = k == 2 ? 1e-42f : 0.0f; /* a denormal: logit / temperature is inf */
        CHECK(ngpt_sample(tr, prompt, np, 1, nnew, temp, k == 1 ? 5 : 0, 1000 + (uint64_t)k, g) == 0, "%s", tr->err);
        CHECK(!memcmp(g, out, sizeof g), "temperature %g: not the greedy sequence", (double)temp);
    }
    CHECK(ngpt_sample(tr, prompt, np, 1, 1, -1.0f, 0, 1, g) == NGPT_ERR_ARG, "a negative temperature must be refused");
    free(full);
    ngpt_trainer_free(tr);
}

/* several samples decoded at once at temperature 0: each of the S rows (Vp = 128 logits apart, V = 75) is the
 * greedy sequence of one sample, token for token */
static void test_greedy_rows(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    enum { NP = 4, NEW = 12, TOTAL = NP + NEW };
    SampleFit f;
    CHECK(tr->ms.Vp != V, "Vp %d equals V: rows read V apart would pass", tr->ms.Vp);
    CHECK(sample_layout(tr, S, 1, &f) <= tr->plan.region_bytes && tr->plan.host_bytes_of[H_TOKENS] / NGPT_FENCES / sizeof(int32_t) >= S,
          "the %d samples are not decoded at once", S);
    int32_t prompt[NP] = {1, 2, 3, 4}, one[TOTAL], rows[S * TOTAL];
    CHECK(ngpt_sample(tr, prompt, NP, 1, NEW, 0.0f, 0, 1, one) == 0 && ngpt_sample(tr, prompt, NP, S, NEW, 0.0f, 0, 2, rows) == 0, "%s", tr->err);
    for (int s = 0; s < S; s++) CHECK(!memcmp(rows + s * TOTAL, one, sizeof one), "sample %d of %d is not the greedy sequence", s, S);
    ngpt_trainer_free(tr);
}

/* Samples that share a prompt: fed to sample 0 alone and its KV cache and logits copied to the others (backend copy),
 * or fed to each (no copy), they draw the same text, token for token (12 prompt tokens: both passes are GEMMs of
 * their rows, whose sums do not depend on the row count), and sample 0 is the text of num_samples 1 */
static void test_shared_prompt(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    randomize_params(tr, 0.3f, 31);
    enum { NP = 12, NEW = 6, TOTAL = NP + NEW };
    int32_t prompt[NP], copied[S * TOTAL], each[S * TOTAL], one[TOTAL];
    for (int i = 0; i < NP; i++) prompt[i] = (int32_t)(ngpt_hash(9, 9, (uint64_t)i) % V);
    CHECK(ngpt_sample(tr, prompt, NP, S, NEW, 0.9f, 20, 4, copied) == 0, "%s", tr->err);
    CHECK(ngpt_sample(tr, prompt, NP, 1, NEW, 0.9f, 20, 4, one) == 0, "%s", tr->err);
    void (*copy)(ngpt_backend *, void *, const void *, size_t) = tr->be->copy;
    tr->be->copy = NULL;
    CHECK(ngpt_sample(tr, prompt, NP, S, NEW, 0.9f, 20, 4, each) == 0, "%s", tr->err);
    tr->be->copy = copy;
    CHECK(!memcmp(copied, each, sizeof copied), "the prompt fed once and copied gives other samples than fed to each");
    CHECK(!memcmp(copied, one, sizeof one), "sample 0 of %d is not the text of one sample", S);
    int alike = 0;
    for (int s = 1; s < S; s++) alike += !memcmp(copied + s * TOTAL + NP, copied + NP, NEW * sizeof(int32_t));
    CHECK(!alike, "%d samples drew sample 0's %d new tokens (each must draw its own)", alike, NEW);
    ngpt_trainer_free(tr);
}

static size_t embedded_rows; /* the rows through encoder_forward, counted by counting_encoder_forward */
static void (*real_encoder_forward)(ngpt_backend *, void *, const int32_t *, const void *, const void *, int, int, int);
static void counting_encoder_forward(ngpt_backend *be, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T_, int C) {
    embedded_rows += (size_t)B * T_;
    real_encoder_forward(be, out, tokens, wte, wpe, B, T_, C);
}

/* Jobs run on the CPU backend's pool so far (each pool_run on more than one thread bumps its generation) */
static unsigned long backend_pool_jobs(ngpt_trainer *tr) { return atomic_load(&cpu_of(tr->be)->pool.pool.generation); }

/* More samples than are decoded at once (two more than a round holds): the later round takes the prompt's keys,
 * values and logits from the round before, so the prompt goes through the model once a call (the rows through the
 * embedding counted), and draws the samples that feeding the prompt each round draws. Past block_size, where every
 * round rebuilds its windows, the prompt is fed each round; a prompt longer than block_size with one new token is
 * its window, kept from round to round. The draws give the tokens of one thread on the backend's 2 threads (its pool
 * runs one job more for each step's draws), on a pool of 4 of their own, and on the backend set to one thread by
 * the thread tuner (then its pool runs nothing). */
static void test_prompt_reused_across_rounds(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    randomize_params(tr, 0.3f, 41);
    SampleFit fit;
    CHECK(!sample_fit(tr, 1 << 20, &fit), "sample_fit");
    CHECK(cpu_of(tr->be)->nthreads == 2, "the backend has %d threads, the test wants 2", cpu_of(tr->be)->nthreads);
    const int n = fit.seqs + 2, rounds = 2;
    real_encoder_forward = tr->be->encoder_forward;
    tr->be->encoder_forward = counting_encoder_forward;
    const struct { int np, nnew, rebuilds; } cases[] = {{12, 5, 0}, {4, 26, 1}, {T + 7, 1, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int np = cases[c].np, nnew = cases[c].nnew, total = np + nnew;
        const size_t bytes = (size_t)n * total * sizeof(int32_t);
        enum { BACKEND, OWN4, ONE, TUNED_TO_ONE, FED, WAYS };
        static const char *way[WAYS] = {"on the backend's threads", "on 4 threads of their own", "on one thread",
                                        "on the backend tuned to one thread", "with the prompt fed each round"};
        int32_t prompt[T + 7], *got[WAYS];
        size_t rows[WAYS];
        unsigned long jobs[WAYS];
        int rc = NGPT_OK;
        for (int w = 0; w < WAYS; w++)
            if (!(got[w] = malloc(bytes))) rc = NGPT_ERR_NOMEM;
        for (int i = 0; i < np; i++) prompt[i] = (int32_t)(ngpt_hash(13, c, (uint64_t)i) % V);
        for (int w = 0; w < WAYS && !rc; w++) {
            embedded_rows = 0;
            unsigned long jobs0 = backend_pool_jobs(tr);
            if (w == TUNED_TO_ONE) cpu_use_all_threads(tr->be, 0);
            rc = sample_rounds(tr, prompt, np, n, nnew, 0.9f, 20, 6, got[w], w != FED, w == BACKEND || w == TUNED_TO_ONE ? 0 : w == OWN4 ? 4 : 1);
            cpu_use_all_threads(tr->be, 1);
            rows[w] = embedded_rows;
            jobs[w] = backend_pool_jobs(tr) - jobs0;
        }
        CHECK(!rc, "prompt %d, %d new, %d samples: %s", np, nnew, n, tr->err);
        if (!rc) {
            for (int w = 0; w < WAYS; w++)
                CHECK(!memcmp(got[w], got[ONE], bytes), "prompt %d, %d new: the draws %s give other tokens than on one thread", np, nnew, way[w]);
            const size_t saved = cases[c].rebuilds ? 0 : (size_t)MIN(np, T); /* the second round's feed */
            CHECK(rows[FED] - rows[ONE] == saved, "prompt %d, %d new: %zu rows embedded with the prompt reused, %zu fed each round "
                  "(the difference should be %zu)", np, nnew, rows[ONE], rows[FED], saved);
            CHECK(jobs[BACKEND] - jobs[ONE] == (unsigned long)(rounds * nnew), "prompt %d, %d new: the backend's pool ran %lu jobs drawing on it, "
                  "%lu drawing on one thread (the difference should be a job for each of the %d steps' draws)", np, nnew, jobs[BACKEND], jobs[ONE],
                  rounds * nnew);
            CHECK(jobs[OWN4] == jobs[ONE], "prompt %d, %d new: draws on a pool of their own ran %lu jobs on the backend's pool, not %lu", np, nnew,
                  jobs[OWN4], jobs[ONE]);
            CHECK(jobs[TUNED_TO_ONE] == 0, "prompt %d, %d new: tuned to one thread, the backend's pool ran %lu jobs", np, nnew, jobs[TUNED_TO_ONE]);
        }
        for (int w = 0; w < WAYS; w++) free(got[w]);
    }
    tr->be->encoder_forward = real_encoder_forward;
    ngpt_trainer_free(tr);
}

/* top_k 0 at a high temperature, where every id is nearly as likely as any: of many draws none is a padded id
 * (V..Vp-1, whose logits are 0 and would be drawn about (Vp - V) / Vp of the time) */
static void test_hot_draws_stay_in_vocab(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    enum { NP = 1, NEW = 100, TOTAL = NP + NEW };
    const float hot = 50.0f;
    int32_t prompt[NP] = {3}, out[S * TOTAL];
    CHECK(tr->ms.Vp > V, "Vp %d: no padded ids to avoid", tr->ms.Vp);
    CHECK(ngpt_sample(tr, prompt, NP, S, NEW, hot, 0, 11, out) == 0, "%s", tr->err);
    int outside = 0;
    for (int i = 0; i < S * TOTAL; i++) outside += out[i] < 0 || out[i] >= V;
    CHECK(!outside, "%d of %d tokens outside the vocabulary", outside, S * NEW);
    ngpt_trainer_free(tr);
}

/* greedy generation three blocks past block_size: whenever the cache is full it is rebuilt from the last
 * block_size / 2 tokens, so each new token t is the argmax of a full forward pass over the window out[start..),
 * at the row of t - 1, where start moves to t - T/2 when t - start would exceed T */
static void test_greedy_past_block_size(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    enum { NP = 4, NEW = 3 * T, TOTAL = NP + NEW };
    const float std = 1.0f;
    const uint64_t weights_seed = 21;
    int Vp = tr->ms.Vp;
    randomize_params(tr, std, weights_seed);
    int32_t prompt[NP] = {1, 2, 3, 4}, out[TOTAL], win[T];
    float *full = malloc((size_t)T * Vp * sizeof *full);
    if (!full) { CHECK(0, "out of memory"); ngpt_trainer_free(tr); return; }
    CHECK(ngpt_sample(tr, prompt, NP, 1, NEW, 0.0f, 0, 1, out) == 0, "%s", tr->err);
    int start = 0, rebuilds = 0, bad = 0;
    for (int t = NP; t < TOTAL; t++) {
        if (t - start > T) { start = t - T / 2; rebuilds++; }
        int n = MIN(T, TOTAL - start);
        memset(win, 0, sizeof win); /* zeros past the end: no token after t - 1 reaches row t - 1 - start */
        memcpy(win, out + start, (size_t)n * sizeof(int32_t));
        full_forward_logits(tr, win, 1, full);
        bad += out[t] != argmax_row(full + (size_t)(t - 1 - start) * Vp);
    }
    CHECK(rebuilds >= 3, "the cache was rebuilt %d times", rebuilds);
    CHECK(!bad, "%d of %d greedy tokens differ from the argmax over the rebuilt window", bad, NEW);
    free(full);
    ngpt_trainer_free(tr);
}

/* block_size 1: the cache is full after every token and rebuilt from the last one (it was rebuilt from none,
 * and the token fed was an unsampled slot of out): each new token is the greedy one after the token before it */
static void test_block_size_one(void) {
    ngpt_trainer *tr = make_sized(0, 1337, 1);
    if (!tr) { CHECK(0, "trainer"); return; }
    enum { NEW = 8 };
    int32_t prompt[2] = {5, 7}, out[2 + NEW] = {0}, next[2];
    CHECK(ngpt_sample(tr, prompt, 2, 1, NEW, 0.0f, 0, 1, out) == 0, "%s", tr->err);
    int bad = 0;
    for (int t = 2; t < 2 + NEW; t++) {
        CHECK(ngpt_sample(tr, out + t - 1, 1, 1, 1, 0.0f, 0, 1, next) == 0, "%s", tr->err);
        bad += next[1] != out[t];
    }
    CHECK(!bad, "%d of %d tokens are not the greedy one after the token before them", bad, NEW);
    ngpt_trainer_free(tr);
}

/* A sampling trainer of a deep, narrow model planned for one sequence (batch_size 1): the plan keeps room for
 * its KV cache (32 layers' keys and values outgrow the forward pass of one sequence it was sized by before) */
static void test_deep_model_one_sequence(void) {
    ngpt_config c;
    config_on_cpu(&c);
    c.vocab_size = V; c.block_size = 64; c.n_layer = 32; c.n_head = 1; c.n_embd = 16;
    c.batch_size = 1; c.gradient_accumulation_steps = 1; c.threads = 1;
    ngpt_trainer *tr = create(&c, 1);
    if (!tr) { CHECK(0, "trainer"); return; }
    int32_t prompt[1] = {3}, out[6];
    CHECK(ngpt_sample(tr, prompt, 1, 1, 5, 0.8f, 0, 7, out) == 0, "%s", tr->err);
    ngpt_trainer_free(tr);
}

/* A trainer made only to sample: no gradients or moments in its arena, a checkpoint's parameters load into it
 * and sample as in the full trainer; saving and training are refused. */
static void test_sample_only(void) {
    ngpt_trainer *full = make(), *lean = make_with(1, 4242); /* another seed: other initial weights until loaded */
    if (!full || !lean) { CHECK(0, "trainers"); ngpt_trainer_free(full); ngpt_trainer_free(lean); return; }
    CHECK(lean->plan.off_master == lean->plan.off_grads && lean->plan.off_region == lean->plan.off_m,
          "gradients %zu bytes, moments %zu bytes", lean->plan.off_master - lean->plan.off_grads, lean->plan.off_region - lean->plan.off_m);
    CHECK(lean->plan.device_bytes < full->plan.device_bytes, "sampling arena %zu not below training's %zu", lean->plan.device_bytes,
          full->plan.device_bytes);
    char path[300];
    snprintf(path, sizeof path, "%s/sample_only.ckpt", dir);
    CHECK(ngpt_save(full, path) == 0, "save: %s", full->err);
    int32_t prompt[3] = {7, 8, 9}, a[2 * 33], b[2 * 33];
    CHECK(ngpt_sample(lean, prompt, 3, 2, 30, 0.9f, 10, 3, b) == 0, "%s", lean->err);
    CHECK(ngpt_sample(full, prompt, 3, 2, 30, 0.9f, 10, 3, a) == 0, "%s", full->err);
    CHECK(memcmp(a, b, sizeof a), "different weights sampled the same (the test would prove nothing)");
    CHECK(ngpt_load(lean, path) == 0, "load into the sampling trainer: %s", lean->err);
    CHECK(ngpt_sample(lean, prompt, 3, 2, 30, 0.9f, 10, 3, b) == 0, "%s", lean->err);
    CHECK(!memcmp(a, b, sizeof a), "the sampling trainer, loaded from the checkpoint, samples differently");
    float loss;
    CHECK(ngpt_save(lean, path) == NGPT_ERR_STATE && strstr(ngpt_last_error(lean), "sample_only"), "save refused: %s", ngpt_last_error(lean));
    CHECK(ngpt_train_step(lean, &loss) == NGPT_ERR_STATE, "training refused");
    CHECK(ngpt_evaluate(lean, &loss, &loss) == NGPT_ERR_STATE, "evaluation refused");
    char lean_out[600]; /* ngpt_train refused before it makes out_dir or writes its log */
    snprintf(lean_out, sizeof lean_out, "%s/lean_out", dir);
    copy_str(lean->cfg.out_dir, sizeof lean->cfg.out_dir, lean_out);
    struct stat st;
    CHECK(ngpt_train(lean) == NGPT_ERR_STATE && stat(lean_out, &st) != 0, "ngpt_train refused, %s %s", lean_out,
          stat(lean_out, &st) ? "not made" : "made");
    CHECK(ngpt_load(full, path) == 0, "the checkpoint survives the refused save: %s", full->err);
    unlink(path);
    ngpt_trainer_free(full);
    ngpt_trainer_free(lean);
}

/* The sampling trainer's parameters arrive through a window in its batch region (it has no fp32 master), a
 * chunk at a time: with a vocabulary whose embedding is larger than the window, a checkpoint and host floats
 * (pretrained weights) land bit for bit, and come back out (export) the same */
static void test_sample_only_window_chunks(void) {
    ngpt_config c;
    config_on_cpu(&c);
    c.vocab_size = 20000; c.block_size = 8; c.n_layer = 1; c.n_head = 2; c.n_embd = 64; c.bias = 1;
    c.batch_size = 1; c.gradient_accumulation_steps = 1; c.threads = 2;
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1;
    ngpt_trainer *full = NULL, *lean = NULL, *lean2 = NULL;
    char err[NGPT_ERRLEN], path[300];
    if (ngpt_trainer_create(&c, &opt, &full, err, sizeof err)) { CHECK(0, "create: %s", err); return; }
    opt.sample_only = 1;
    if (ngpt_trainer_create(&c, &opt, &lean, err, sizeof err) || ngpt_trainer_create(&c, &opt, &lean2, err, sizeof err)) {
        CHECK(0, "create (sample_only): %s", err);
        ngpt_trainer_free(full); ngpt_trainer_free(lean);
        return;
    }
    size_t n = full->plan.nparams;
    CHECK(param_window_floats(lean) > 0 && param_window_floats(lean) < lean->plan.param_len[P_WTE],
          "the window (%zu floats) should be smaller than wte (%zu) so that it loads in several chunks", param_window_floats(lean),
          lean->plan.param_len[P_WTE]);
    float *want = malloc(n * 4), *got = malloc(n * 4);
    copy_master_out(full, want);
    snprintf(path, sizeof path, "%s/window.ckpt", dir);
    CHECK(ngpt_save(full, path) == 0, "save: %s", full->err);
    CHECK(ngpt_load(lean, path) == 0, "load: %s", lean->err);
    copy_master_out(lean, got);
    CHECK(!memcmp(want, got, n * 4), "a checkpoint loaded through the window differs");
    CHECK(copy_params_in(lean2, want) == 0, "copy_params_in: %s", lean2->err);
    copy_master_out(lean2, got);
    CHECK(!memcmp(want, got, n * 4), "host floats loaded through the window differ");
    unlink(path);
    free(want); free(got);
    ngpt_trainer_free(full); ngpt_trainer_free(lean); ngpt_trainer_free(lean2);
}

static int cmp_desc(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* against a sort, by the heap (k up to N / 64) and by quickselect: every k up to 160, then every 37th */
static void test_kth_largest(void) {
    enum { N = 1000 };
    float x[N], sorted[N], tmp[N];
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < N; i++) x[i] = (float)(ngpt_hash(8, (uint64_t)trial, (uint64_t)i) % (trial & 1 ? 97 : 1000003)); /* ties, or few */
        memcpy(sorted, x, sizeof x);
        qsort(sorted, N, sizeof(float), cmp_desc);
        for (int k = 1; k <= N; k += k < 160 ? 1 : 37) CHECK(kth_largest(x, tmp, N, k) == sorted[k - 1], "trial %d: k %d", trial, k);
    }
}

/* sample_token as it was written first, the slow obvious way: the cut by a sort, each weight computed in the sum
 * over every id and again in the draw */
static int32_t sample_token_by_sort(const float *logits, float *sorted, int V, float temperature, int top_k, Rng *rng) {
    int32_t best = 0;
    for (int j = 1; j < V; j++)
        if (logits[j] > logits[best]) best = j;
    if (temperature == 0) return best;
    memcpy(sorted, logits, (size_t)V * sizeof *sorted);
    qsort(sorted, (size_t)V, sizeof *sorted, cmp_desc);
    float cut = top_k > 0 && top_k < V ? sorted[top_k - 1] : -FLT_MAX;
    double mx = logits[best], inv_t = 1.0 / temperature, sum = 0;
    for (int j = 0; j < V; j++) sum += logits[j] >= cut ? exp(((double)logits[j] - mx) * inv_t) : 0.0;
    double u = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * sum, acc = 0;
    int32_t last = 0;
    for (int j = 0; j < V; j++) {
        if (logits[j] < cut) continue;
        acc += exp(((double)logits[j] - mx) * inv_t);
        last = j;
        if (acc > u) return j;
    }
    return last;
}

/* the same draws as the slow way, on GPT-2's vocabulary of logits spread as a model's (and in whole numbers, with
 * ties at the cut), at top_k 0 (all), 1, 40, 200, the heap's last, quickselect's first, and all but one, at
 * temperatures 0, 0.8, 1 and 1e-30 */
static void test_sample_token_as_by_sort(void) {
    enum { VOCAB = 50257 };
    float *logits = malloc(VOCAB * sizeof(float)), *sorted = malloc(VOCAB * sizeof(float));
    SampleScratch sc = {malloc(VOCAB * sizeof(float)), malloc(VOCAB * sizeof(int32_t)), malloc(VOCAB * sizeof(double))};
    const int ks[] = {0, 1, 40, 200, VOCAB / 64, VOCAB / 64 + 1, VOCAB - 1};
    const float temps[] = {0.0f, 0.8f, 1.0f, 1e-30f};
    int differ = 0, draws = 0;
    for (int trial = 0; trial < 4; trial++) {
        for (int j = 0; j < VOCAB; j++) {
            const uint32_t h = ngpt_hash(11, (uint64_t)trial, (uint64_t)j);
            logits[j] = trial & 1 ? (float)(h % 40) : 6.0f * ((float)(h % 65536) / 65536.0f - 0.5f) + (float)(h >> 28);
        }
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
                Rng a = {3, (uint64_t)trial, 0}, b = a;
                for (int d = 0; d < 8; d++, draws++) {
                    const int32_t fast = sample_token(logits, &sc, VOCAB, temps[ti], ks[ki], &a);
                    const int32_t slow = sample_token_by_sort(logits, sorted, VOCAB, temps[ti], ks[ki], &b);
                    if (fast != slow && differ++ < 5)
                        printf("  trial %d, top_k %d, temperature %g, draw %d: %d, the slow way %d\n", trial, ks[ki], (double)temps[ti], d, fast, slow);
                }
            }
    }
    CHECK(differ == 0, "%d of %d draws differ from the slow way's", differ, draws);
    free(logits); free(sorted); free(sc.select); free(sc.kept); free(sc.weight);
}

/* One draw split between a pool's threads gives sample_token's token: GPT-2's vocabulary (logits spread as a
 * model's, or whole numbers with ties across the ranges, with -inf among them) on 2, 3 and 5 threads, and small
 * vocabularies where a range holds fewer ids than top_k, or none (more threads than ids), at every top_k that
 * matters (0, 1, a range's size and around it, the heap's last, all but one, all, more) and at temperatures 0, 0.8, 1
 * and 1e-30 */
static void test_split_draw_as_sample_token(void) {
    enum { VOCAB = 50257 };
    float *logits = malloc(VOCAB * sizeof(float)), *cand = malloc(VOCAB * sizeof(float));
    SampleScratch sc = {malloc(VOCAB * sizeof(float)), malloc(VOCAB * sizeof(int32_t)), malloc(VOCAB * sizeof(double))};
    SampleScratch merge = {malloc(VOCAB * sizeof(float)), malloc(VOCAB * sizeof(int32_t)), malloc(VOCAB * sizeof(double))};
    SplitDraw *split = malloc(sizeof *split);
    const float temps[] = {0.0f, 0.8f, 1.0f, 1e-30f};
    const int threads[] = {2, 3, 5}, vocabs[] = {VOCAB, 3, 7, 64};
    int differ = 0, draws = 0;
    for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
        PoolStorage *pool = malloc(sizeof *pool);
        char err[NGPT_ERRLEN];
        CHECK(pool_init(pool, threads[ti], err, sizeof err) == NGPT_OK, "%s", err);
        for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++)
            for (int trial = 0; trial < 2; trial++) {
                const int V = vocabs[vi], range = V / threads[ti];
                const int ks[] = {0, 1, range - 1, range, range + 1, V / 64, V / 64 + 1, 40, 200, V - 1, V, V + 5};
                for (int j = 0; j < V; j++) {
                    const uint32_t h = ngpt_hash(17, (uint64_t)trial, (uint64_t)j);
                    logits[j] = trial ? (float)(h % 40) : 6.0f * ((float)(h % 65536) / 65536.0f - 0.5f) + (float)(h >> 28);
                }
                if (V > 10) logits[V / 2] = logits[V - 1] = -INFINITY;
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                    if (ks[ki] < 0) continue;
                    for (size_t te = 0; te < sizeof temps / sizeof temps[0]; te++) {
                        *split = (SplitDraw){.cand = cand, .merged = merge.select, .kept = merge.kept, .weight = merge.weight};
                        Rng a = {5, (uint64_t)trial, 0}, b = a;
                        for (int d = 0; d < 4; d++, draws++) {
                            const int32_t one = sample_token(logits, &sc, V, temps[te], ks[ki], &a);
                            const int32_t split_one = sample_token_split(&pool->pool, split, logits, V, temps[te], ks[ki], &b);
                            if (one != split_one && differ++ < 5)
                                printf("  %d threads, V %d, trial %d, top_k %d, temperature %g, draw %d: %d, one thread %d\n", threads[ti], V, trial, ks[ki],
                                       (double)temps[te], d, split_one, one);
                        }
                    }
                }
            }
        pool_free(pool);
        free(pool);
    }
    CHECK(differ == 0, "%d of %d split draws differ from sample_token's", differ, draws);
    CHECK(draws > 1000, "only %d draws", draws);
    free(logits); free(cand); free(split);
    free(sc.select); free(sc.kept); free(sc.weight);
    free(merge.select); free(merge.kept); free(merge.weight);
}

/* One sample on the CPU backend's 2 threads: each step's draw splits between them (two jobs on its pool, one at
 * temperature 0, which draws nothing), with the tokens of one thread */
static void test_one_sample_draws_split(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    randomize_params(tr, 0.3f, 43);
    enum { NP = 5, NEW = 12 };
    int32_t prompt[NP] = {1, 5, 9, 2, 7}, split_out[NP + NEW], one_out[NP + NEW];
    const float temps[] = {0.9f, 0.0f};
    for (int i = 0; i < 2; i++) {
        unsigned long jobs0 = backend_pool_jobs(tr);
        int rc = sample_rounds(tr, prompt, NP, 1, NEW, temps[i], 20, 8, split_out, 1, 0);
        const unsigned long jobs_split = backend_pool_jobs(tr) - jobs0;
        jobs0 = backend_pool_jobs(tr);
        if (!rc) rc = sample_rounds(tr, prompt, NP, 1, NEW, temps[i], 20, 8, one_out, 1, 1);
        const unsigned long jobs_one = backend_pool_jobs(tr) - jobs0;
        CHECK(!rc, "%s", tr->err);
        CHECK(!memcmp(split_out, one_out, sizeof one_out), "temperature %g: the split draws give other tokens than one thread's", (double)temps[i]);
        const unsigned long want = (unsigned long)(temps[i] > 0 ? 2 : 1) * NEW;
        CHECK(jobs_split - jobs_one == want, "temperature %g: %lu jobs on the backend's pool with the draws split, %lu without (the difference "
              "should be %lu)", (double)temps[i], jobs_split, jobs_one, want);
    }
    ngpt_trainer_free(tr);
}

/* one draw on fixed logits: temperature 0 takes the lowest id of tied maxima; top_k keeps the k largest, and
 * draws them in proportion to exp(logit / temperature), the k-th one included */
static void test_sample_token_draws(void) {
    float select[4];
    int32_t kept[4];
    double weight[4];
    const SampleScratch tmp_sc = {select, kept, weight}, *tmp = &tmp_sc;
    const float tied[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    Rng rng = {7, 1, 0};
    CHECK(sample_token(tied, tmp, 4, 0.0f, 0, &rng) == 1, "temperature 0 among tied maxima: id %d, expected the lowest, 1", (int)sample_token(tied, tmp, 4, 0.0f, 0, &rng));
    const float ramp[4] = {0.0f, 1.0f, 2.0f, 3.0f};
    int low = 0;
    for (int i = 0; i < 4000; i++) low += sample_token(ramp, tmp, 4, 1.0f, 3, &rng) == 0;
    CHECK(low == 0, "top_k 3 of 4: the smallest logit drawn %d times of 4000", low);
    const float two[4] = {0.0f, logf(3.0f), -5.0f, -6.0f}; /* top_k 2: ids 0 and 1 at 1/4 and 3/4 */
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < 40000; i++) n[sample_token(two, tmp, 4, 1.0f, 2, &rng)]++;
    CHECK(n[2] == 0 && n[3] == 0 && fabs(n[1] / 40000.0 - 0.75) < 0.01, "top_k 2: draws %d %d %d %d, expected 1/4 and 3/4 of the first two", n[0], n[1],
          n[2], n[3]);
}

/* temperature 0, and top_k 1 at temperature 1, find a unique maximum at any id of V, the first and the last
 * included, and read nothing past V (a larger logit lies just beyond it) */
static void test_sample_token_max_anywhere(void) {
    enum { N = 9 };
    const float peak = 5.0f, beyond = 10.0f;
    float logits[N + 1], select[N];
    int32_t kept[N];
    double weight[N];
    const SampleScratch tmp_sc = {select, kept, weight}, *tmp = &tmp_sc;
    Rng rng = {3, 1, 0};
    for (int at = 0; at < N; at++) {
        for (int j = 0; j < N; j++) logits[j] = (float)(j % 3) - 1.0f; /* -1, 0, 1: ties below the peak */
        logits[at] = peak;
        logits[N] = beyond;
        int greedy = sample_token(logits, tmp, N, 0.0f, 0, &rng), top1 = sample_token(logits, tmp, N, 1.0f, 1, &rng);
        CHECK(greedy == at && top1 == at, "the maximum at id %d of %d: temperature 0 gave %d, top_k 1 gave %d", at, N, greedy, top1);
    }
}

/* The backend's optional fusions, composed here from the CPU's separate ops as a GPU backend's must behave: the
 * same bits, the residual's output aliasing none of its inputs, and the LayerNorm's output left unwritten (NaN
 * here: anything that read it after the fused op would show). */
static int fused_calls[3];
static void composed_forward_gelu(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    fused_calls[0]++;
    be->matmul_forward(be, pre, inp, w, bias, N, C, OC);
    be->gelu_forward(be, act, pre, (size_t)N * OC);
}
static void composed_forward_residual(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, const void *res, int N, int C,
                                      int OC) {
    fused_calls[1]++;
    CHECK(out != res && out != inp && out != w, "matmul_forward_residual: out aliases an input");
    be->matmul_forward(be, out, inp, w, bias, N, C, OC);
    be->residual_forward(be, out, res, out, (size_t)N * OC);
}
static void composed_layernorm_matmul(ngpt_backend *be, void *out, void *act, void *ln, const void *inp, const void *ln_w, const void *ln_b,
                                      const void *w, const void *bias, int N, int C, int OC) {
    fused_calls[2]++;
    float *stats = malloc((size_t)2 * N * sizeof *stats);
    CHECK(stats != NULL, "out of host memory");
    if (!stats) return;
    be->layernorm_forward(be, ln, stats, stats + N, inp, ln_w, ln_b, N, C);
    free(stats);
    be->matmul_forward(be, out, ln, w, bias, N, C, OC);
    if (act) be->gelu_forward(be, act, out, (size_t)N * OC);
    for (size_t i = 0; i < (size_t)N * C; i++) ((float *)ln)[i] = NAN;
}

/* Every position's logits, decoding the S sequences of tok 1, 1, 4, 2 ... positions at a time, into out (S x T rows
 * of Vp, row s * T + t the logits after position t; positions inside a chunk have none and stay 0) */
static void decode_all(ngpt_trainer *tr, const int32_t *tok, float *out) {
    const int Vp = tr->ms.Vp, cycle[4] = {1, 1, 4, 2};
    SampleFit f;
    CHECK(sample_layout(tr, S, T, &f) <= tr->plan.region_bytes, "the layout for a whole block of %d sequences fits", S);
    tr->be->set_scratch(tr->be, tr->region + f.off[S_SCRATCH], tr->plan.region_bytes - f.off[S_SCRATCH]);
    memset(out, 0, (size_t)S * T * Vp * sizeof *out);
    float *step = malloc((size_t)S * Vp * sizeof *step);
    int32_t chunk[S * T];
    for (int t = 0, c = 0; step && t < T; c++) {
        const int n = MIN(cycle[c % 4], T - t);
        for (int i = 0; i < n; i++)
            for (int s = 0; s < S; s++) chunk[s * n + i] = tok[s * T + t + i];
        decode_step(tr, &f, S, t, n, chunk, NULL);
        t += n;
        download_as_f32(tr, step, tr->region + f.off[S_LOGITS], (size_t)S * Vp);
        for (int s = 0; s < S; s++) memcpy(out + ((size_t)s * T + t - 1) * Vp, step + (size_t)s * Vp, (size_t)Vp * sizeof *out);
    }
    free(step);
}

/* attention_decode given t_at reads its position there when it runs (a graph's replay on a GPU; the CPU's device memory
 * is the host's): the bits of the call given that position whatever t says; a position outside the cache gives rows of
 * NaN and stores nothing */
static void test_decode_position_read_at_run(void) {
    ngpt_trainer *tr = make();
    if (!tr) { CHECK(0, "trainer"); return; }
    ngpt_backend *be = tr->be;
    SampleFit f;
    CHECK(sample_layout(tr, S, T, &f) <= tr->plan.region_bytes, "the layout for a whole block of %d sequences fits", S);
    be->set_scratch(be, tr->region + f.off[S_SCRATCH], tr->plan.region_bytes - f.off[S_SCRATCH]);
    enum { NH = 4, C = 32, MAXT = 12, N = 2 };
    const int t = 5;
    const size_t nqkv = (size_t)S * N * 3 * C, nkv = (size_t)S * 2 * MAXT * C, nout = (size_t)S * N * C;
    float *qkv = malloc(nqkv * sizeof *qkv), *kv0 = malloc(nkv * sizeof *kv0), *kv_a = malloc(nkv * sizeof *kv_a), *kv_b = malloc(nkv * sizeof *kv_b);
    float *out_a = malloc(nout * sizeof *out_a), *out_b = malloc(nout * sizeof *out_b);
    int32_t at[1];
    if (qkv && kv0 && kv_a && kv_b && out_a && out_b) {
        for (size_t i = 0; i < nqkv; i++) qkv[i] = normal_at(4, 1, i);
        for (size_t i = 0; i < nkv; i++) kv0[i] = normal_at(4, 2, i);
        memcpy(kv_a, kv0, nkv * sizeof *kv0);
        memcpy(kv_b, kv0, nkv * sizeof *kv0);
        be->attention_decode(be, out_a, kv_a, qkv, S, t, N, MAXT, C, NH, NULL);
        at[0] = t;
        be->attention_decode(be, out_b, kv_b, qkv, S, 0, N, MAXT, C, NH, at);
        CHECK(!memcmp(out_a, out_b, nout * sizeof *out_a) && !memcmp(kv_a, kv_b, nkv * sizeof *kv_a),
              "attention_decode at t_at = %d differs from the call given t = %d", t, t);
        CHECK(memcmp(kv_a, kv0, nkv * sizeof *kv0) != 0, "attention_decode stored no keys and values");
        for (int bad = 0; bad < 2; bad++) {
            at[0] = bad ? -1 : MAXT - N + 1;
            memcpy(kv_b, kv0, nkv * sizeof *kv0);
            be->attention_decode(be, out_b, kv_b, qkv, S, t, N, MAXT, C, NH, at);
            size_t finite = 0;
            for (size_t i = 0; i < nout; i++) finite += !isnan(out_b[i]);
            CHECK(finite == 0 && !memcmp(kv_b, kv0, nkv * sizeof *kv0), "t_at = %d, outside the cache's 0..%d: %zu values of out not NaN, cache %s",
                  at[0], MAXT - N, finite, memcmp(kv_b, kv0, nkv * sizeof *kv0) ? "written" : "untouched");
        }
    } else {
        CHECK(0, "out of host memory");
    }
    free(qkv); free(kv0); free(kv_a); free(kv_b); free(out_a); free(out_b);
    ngpt_trainer_free(tr);
}

/* decode_step through the fusions (as the CUDA backend runs it) gives the bits of the ops one by one: every logit of
 * a decode a position and a chunk at a time, and a greedy sample of 3 past the block */
static void test_decode_through_fusions(void) {
    ngpt_trainer *plain = make(), *fused = make();
    if (!plain || !fused) { CHECK(0, "trainers"); ngpt_trainer_free(plain); ngpt_trainer_free(fused); return; }
    randomize_params(plain, 0.3f, 9);
    randomize_params(fused, 0.3f, 9);
    fused->be->matmul_forward_gelu = composed_forward_gelu;
    fused->be->matmul_forward_residual = composed_forward_residual;
    fused->be->layernorm_matmul_forward = composed_layernorm_matmul;
    int32_t tok[S * T];
    for (int i = 0; i < S * T; i++) tok[i] = (int32_t)(ngpt_hash(6, 6, (uint64_t)i) % V);
    const size_t n = (size_t)S * T * plain->ms.Vp;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (a && b) {
        decode_all(plain, tok, a);
        memset(fused_calls, 0, sizeof fused_calls);
        decode_all(fused, tok, b);
        CHECK(fused_calls[0] == 0 && fused_calls[1] > 0 && fused_calls[2] > 0,
              "decode_step called the fusions %d, %d, %d times (GELU goes inside the LayerNorm's)", fused_calls[0], fused_calls[1], fused_calls[2]);
        CHECK(memcmp(a, b, n * sizeof *a) == 0, "logits through the fusions differ from the ops one by one");
    }
    free(a);
    free(b);
    const int32_t prompt[2] = {5, 6};
    const int total = 2 + 2 * T;
    int32_t *ya = malloc((size_t)3 * total * sizeof *ya), *yb = malloc((size_t)3 * total * sizeof *yb);
    if (ya && yb) {
        CHECK(ngpt_sample(plain, prompt, 2, 3, 2 * T, 0.0f, 0, 1, ya) == NGPT_OK, "sample: %s", plain->err);
        CHECK(ngpt_sample(fused, prompt, 2, 3, 2 * T, 0.0f, 0, 1, yb) == NGPT_OK, "sample: %s", fused->err);
        CHECK(memcmp(ya, yb, (size_t)3 * total * sizeof *ya) == 0, "greedy samples through the fusions differ");
    }
    free(ya);
    free(yb);
    ngpt_trainer_free(plain);
    ngpt_trainer_free(fused);
}

int main(void) {
    if (test_folder(dir, sizeof dir, "sample")) return 1;
    RUN(test_decode_matches_full_forward);
    RUN(test_decode_through_fusions);
    RUN(test_decode_position_read_at_run);
    RUN(test_greedy_and_seeds);
    RUN(test_greedy_rows);
    RUN(test_shared_prompt);
    RUN(test_prompt_reused_across_rounds);
    RUN(test_one_sample_draws_split);
    RUN(test_hot_draws_stay_in_vocab);
    RUN(test_greedy_past_block_size);
    RUN(test_block_size_one);
    RUN(test_deep_model_one_sequence);
    RUN(test_sample_only);
    RUN(test_sample_only_window_chunks);
    RUN(test_kth_largest);
    RUN(test_sample_token_as_by_sort);
    RUN(test_sample_token_draws);
    RUN(test_sample_token_max_anywhere);
    RUN(test_split_draw_as_sample_token);
    remove_folder(dir);
    return check_summary();
}
