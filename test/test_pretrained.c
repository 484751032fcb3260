/* test_pretrained.c: pretrained GPT-2 weights in and out (fixtures from tools/make_pretrained_fixtures.py).
 *  - the Hugging Face safetensors reader (F32, BF16, F16) and the llm.c reader (version 3 fp32, 5 bf16)
 *    give the same parameters: F32 == v3 exactly, BF16 == v5 == the bf16 rounding of F32 exactly, F16
 *    within f16 rounding;
 *  - the loaded model, run through nanogpt's own trainer and graph, gives PyTorch's float64 logits;
 *  - llm.c export: byte-identical to llm.c's own writer, read back exactly (fp32) or rounded (bf16), and
 *    a model without biases exports as one with zero biases;
 *  - every malformed input fails with an error naming the file and the problem (the broken files are made
 *    here, in a temporary folder, from the good fixtures);
 *  - the strict JSON reader on its own.
 * Run from the repository root (build.sh does). */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include "trainer_util.h"
#include <dirent.h>

/* ---- the large allocations of a trainer's creation: the test binary's own malloc family, forwarding to
 * glibc, notes every allocation of at least big_from bytes (not under the sanitizers, which own malloc) ---- */
#ifndef NGPT_SANITIZE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static size_t big_from, big_sizes[16];
static _Atomic int n_big;
static void note_size(size_t n) {
    if (big_from && n >= big_from) {
        int k = atomic_fetch_add(&n_big, 1);
        if (k < 16) big_sizes[k] = n;
    }
}
void *malloc(size_t n) { note_size(n); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note_size(a * b); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note_size(n); return __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    note_size(n);
    *out = __libc_memalign(align, n);
    return *out ? 0 : ENOMEM;
}
void *aligned_alloc(size_t align, size_t n) { note_size(n); return __libc_memalign(align, n); }
#endif



#define FIX "test/fixtures/"
#define ST_F32 FIX "tiny_gpt2/model.safetensors"
#define ST_BF16 FIX "tiny_gpt2/model_bf16.safetensors"
#define ST_F16 FIX "tiny_gpt2/model_f16.safetensors"
#define LLMC_V3 FIX "tiny_gpt2_llmc_v3.bin"
#define LLMC_V5 FIX "tiny_gpt2_llmc_v5.bin"
#define LOGITS FIX "tiny_gpt2_logits.bin"

/* the fixture model */
enum { FX_L = 2, FX_NH = 2, FX_C = 24, FX_V = 100, FX_VP = 128, FX_MAXT = 24 };

static char tmpdir[64];

/* ---- small helpers ---- */

static void spill(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    if (!f) { printf("cannot write %s\n", path); return; }
    if (na) fwrite(a, 1, na, f);
    if (nb) fwrite(b, 1, nb, f);
    fclose(f);
}

static const char *tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
    return buf;
}

/* A fixture's parameters, or NULL (the failure is recorded). */
static float *load(int (*reader)(const char *, ModelShape *, float **, char *, size_t), const char *path, ModelShape *ms) {
    char err[NGPT_ERRLEN] = "";
    float *p = NULL;
    int rc = reader(path, ms, &p, err, sizeof err);
    CHECK(rc == 0 && p, "%s: status %d: %s", path, rc, err);
    return rc ? NULL : p;
}

static size_t nparams(const ModelShape *ms) {
    size_t sizes[N_PARAM_TENSORS];
    return param_sizes(ms, sizes);
}

static const char *param_at(const ModelShape *ms, size_t i) {
    size_t sizes[N_PARAM_TENSORS], off = 0;
    param_sizes(ms, sizes);
    for (int k = 0; k < N_PARAM_TENSORS; k++) {
        if (i < off + sizes[k]) return param_names[k];
        off += sizes[k];
    }
    return "?";
}

static void expect_fixture_shape(const char *what, const ModelShape *ms) {
    CHECK(ms->L == FX_L && ms->NH == FX_NH && ms->C == FX_C && ms->V == FX_V && ms->Vp == FX_VP && ms->maxT == FX_MAXT && ms->bias == 1,
          "%s: shape L %d NH %d C %d V %d Vp %d maxT %d bias %d, expected %d %d %d %d %d %d 1", what, ms->L, ms->NH, ms->C, ms->V, ms->Vp,
          ms->maxT, ms->bias, FX_L, FX_NH, FX_C, FX_V, FX_VP, FX_MAXT);
}

/* the first index where a and b differ (bitwise), or n */
static size_t first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4)) return i;
    return n;
}

static float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* ---- the readers agree ---- */

static void test_safetensors_f32_equals_llmc_v3(void) {
    ModelShape a, b;
    float *pa = load(safetensors_read_gpt2, ST_F32, &a), *pb = load(llmc_read_model, LLMC_V3, &b);
    if (!pa || !pb) { free(pa); free(pb); return; }
    expect_fixture_shape("safetensors F32", &a);
    expect_fixture_shape("llm.c v3", &b);
    size_t n = nparams(&a), i = first_diff(pa, pb, n);
    CHECK(i == n, "safetensors F32 and llm.c v3 differ at %zu (%s): %.9g vs %.9g", i, param_at(&a, i), (double)pa[i], (double)pb[i]);
    /* the vocabulary padding is zero, and the file's values are not all zero (a reader that read nothing) */
    size_t pad = 0, nonzero = 0;
    for (size_t k = (size_t)FX_V * FX_C; k < (size_t)FX_VP * FX_C; k++) pad += pa[k] != 0;
    for (size_t k = 0; k < n; k++) nonzero += pa[k] != 0;
    CHECK(pad == 0, "%zu nonzero values in wte's padding rows", pad);
    CHECK(nonzero == n - (size_t)(FX_VP - FX_V) * FX_C, "%zu of %zu parameters nonzero", nonzero, n);
    free(pa); free(pb);
}

static void test_bf16_readers_agree(void) {
    ModelShape a, b, c;
    float *pf = load(safetensors_read_gpt2, ST_F32, &a), *ps = load(safetensors_read_gpt2, ST_BF16, &b), *pl = load(llmc_read_model, LLMC_V5, &c);
    if (pf && ps && pl) {
        expect_fixture_shape("safetensors BF16", &b);
        expect_fixture_shape("llm.c v5", &c);
        size_t n = nparams(&a), i = first_diff(ps, pl, n), bad = n;
        CHECK(i == n, "safetensors BF16 and llm.c v5 differ at %zu (%s): %.9g vs %.9g", i, param_at(&a, i), (double)ps[i], (double)pl[i]);
        double worst = 0;
        for (size_t k = 0; k < n; k++) {
            if (bad == n && bf16_round(pf[k]) != ps[k]) bad = k;
            worst = fmax(worst, fabs((double)ps[k] - pf[k]) / fmax(fabs((double)pf[k]), 1e-30));
        }
        CHECK(bad == n, "BF16 value %zu (%s) is %.9g, the bf16 rounding of the F32 value %.9g is %.9g", bad, param_at(&a, bad), (double)ps[bad],
              (double)pf[bad], (double)bf16_round(pf[bad]));
        CHECK(worst <= 1.0 / 256, "bf16 vs f32: max relative difference %.3g > 2^-8", worst);
        printf("  bf16 vs f32: max relative difference %.3g (bf16 keeps 8 bits)\n", worst);
    }
    free(pf); free(ps); free(pl);
}

static void test_f16_reader(void) {
    ModelShape a, b;
    float *pf = load(safetensors_read_gpt2, ST_F32, &a), *ph = load(safetensors_read_gpt2, ST_F16, &b);
    if (pf && ph) {
        expect_fixture_shape("safetensors F16", &b);
        size_t n = nparams(&a), w = 0;
        double worst = 0;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)ph[k] - pf[k]), tol = ldexp(fabs((double)pf[k]), -11) + ldexp(1.0, -25);
            if (d / tol > worst) { worst = d / tol; w = k; }
        }
        CHECK(worst <= 1.0, "f16 value %zu (%s) is %.9g, f32 %.9g: more than f16 rounding apart", w, param_at(&a, w), (double)ph[w], (double)pf[w]);
    }
    free(pf); free(ph);
}

static void test_pretrained_read_dispatch(void) {
    ModelShape a, b, c, d;
    float *pa = load(pretrained_read, FIX "tiny_gpt2", &a), *pb = load(pretrained_read, ST_F32, &b), *pc = load(pretrained_read, LLMC_V3, &c),
          *pd = load(safetensors_read_gpt2, ST_F32, &d);
    if (pa && pb && pc && pd) {
        size_t n = nparams(&d);
        CHECK(first_diff(pa, pd, n) == n, "a folder did not read its model.safetensors");
        CHECK(first_diff(pb, pd, n) == n, "a .safetensors path read differently");
        CHECK(first_diff(pc, pd, n) == n, "an llm.c path read differently");
    }
    free(pa); free(pb); free(pc); free(pd);
}

/* params NULL (nanogpt plan): each reader gives the shape it gives with the weights; GPT-2's names need no file */
/* A trainer reads pretrained weights from their mapped file a window at a time (weights_fill), never as a whole
 * fp32 copy: any window of any fixture, at any offset (through the middle of a transposed weight's rows, across
 * tensors and layers), gives what reading the whole model at once gives; and a crop (weights_crop) gives what
 * pretrained_crop makes of the whole array */
static void test_weights_in_windows(void) {
    const char *paths[5] = {ST_F32, ST_F16, ST_BF16, LLMC_V3, LLMC_V5};
    for (int f = 0; f < 5; f++) {
        ModelShape ms, shape;
        Weights w;
        char err[NGPT_ERRLEN] = "";
        float *full = load(pretrained_read, paths[f], &ms);
        if (!full) continue;
        if (pretrained_open_path(paths[f], &shape, &w, err, sizeof err)) {
            CHECK(0, "%s: %s", paths[f], err);
            free(full);
            continue;
        }
        size_t total = nparams(&ms);
        float *win = malloc(total * sizeof(float));
        int bad = 0;
        uint64_t seed = 12345;
        for (int k = 0; k < 3000 && !bad; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t first = (size_t)(seed >> 20) % total, len = 1 + (size_t)(seed >> 44) % (k < 1500 ? 60 : 2000);
            if (len > total - first) len = total - first;
            weights_fill(&w, first, len, win);
            if (memcmp(win, full + first, len * sizeof(float))) bad = k + 1;
        }
        CHECK(!bad, "%s: window %d differs from the whole model read at once", paths[f], bad);
        ModelShape cropped = ms;
        CHECK(pretrained_crop(&cropped, full, 16, err, sizeof err) == 0, "crop: %s", err);
        weights_crop(&w, &ms, 16);
        size_t ctotal = nparams(&cropped);
        memset(win, 0xFF, total * sizeof(float));
        weights_fill(&w, 0, ctotal, win);
        CHECK(ctotal < total && !memcmp(win, full, ctotal * sizeof(float)), "%s: cropped to 16 positions, the windows differ", paths[f]);
        weights_close(&w);
        CHECK(!w.map && !w.run, "weights_close releases the map and the runs");
        free(full);
        free(win);
    }
    /* a vocabulary that needs no padding (V = 64): no empty run is left at wpe's offset for the crop to cut */
    ModelShape v64 = {1, 2, 8, 64, 64, 32, 1};
    size_t n64 = nparams(&v64);
    float *p64 = malloc(n64 * sizeof(float)), *back = malloc(n64 * sizeof(float));
    for (size_t i = 0; i < n64; i++) p64[i] = (float)i;
    char path[600], err[NGPT_ERRLEN] = "";
    tmp_path(path, sizeof path, "v64.bin");
    ModelShape got;
    Weights w;
    CHECK(llmc_write_model(path, &v64, p64, 0, err, sizeof err) == 0 && pretrained_open_path(path, &got, &w, err, sizeof err) == 0, "V 64: %s", err);
    for (int k = 0; k < w.n_run; k++) CHECK(w.run[k].count > 0, "run %d of the V = 64 file is empty", k);
    ModelShape cropped = v64;
    CHECK(pretrained_crop(&cropped, p64, 16, err, sizeof err) == 0, "crop: %s", err);
    weights_crop(&w, &v64, 16);
    weights_fill(&w, 0, nparams(&cropped), back);
    CHECK(!memcmp(back, p64, nparams(&cropped) * sizeof(float)), "V 64, cropped to 16 positions: the windows differ");
    weights_close(&w);
    free(p64);
    free(back);
}

static void test_shape_only(void) {
    const char *paths[5] = {FIX "tiny_gpt2", ST_F32, ST_BF16, LLMC_V3, LLMC_V5};
    char err[NGPT_ERRLEN];
    for (int i = 0; i < 5; i++) {
        ModelShape full, shape;
        memset(&shape, 0, sizeof shape);
        float *p = load(pretrained_read, paths[i], &full);
        int rc = pretrained_load(paths[i], NULL, &shape, NULL, err, sizeof err);
        CHECK(rc == 0 && p && !memcmp(&full, &shape, sizeof full), "%s: the shape alone (L %d NH %d C %d V %d maxT %d) differs from the read's: %s",
              paths[i], shape.L, shape.NH, shape.C, shape.V, shape.maxT, err);
        free(p);
    }
    static const int want[4][3] = {{12, 12, 768}, {24, 16, 1024}, {36, 20, 1280}, {48, 25, 1600}};
    for (int i = 0; i < 4; i++) {
        ModelShape ms;
        int rc = pretrained_load(gpt2_sizes[i].name, "/nonexistent", &ms, NULL, err, sizeof err);
        CHECK(rc == 0 && ms.L == want[i][0] && ms.NH == want[i][1] && ms.C == want[i][2] && ms.V == 50257 && ms.Vp == 50304 && ms.maxT == 1024 &&
              ms.bias == 1, "%s without its download: rc %d, L %d NH %d C %d V %d maxT %d", gpt2_sizes[i].name, rc, ms.L, ms.NH, ms.C, ms.V, ms.maxT);
    }
    ModelShape ms;
    int rc = pretrained_load("gpt3", NULL, &ms, NULL, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "init_from = gpt3: ") && strstr(err, "gpt2-xl"), "an unknown name: %d %s", rc, err);
}

/* init_from = gpt2 reads <pretrained_dir>/gpt2/model.safetensors; a missing download says how to get it */
static void test_init_from_names(void) {
    char dir[128], sub[160], path[200], err[NGPT_ERRLEN];
    tmp_path(dir, sizeof dir, "pre");
    snprintf(sub, sizeof sub, "%s/gpt2-medium", dir);
    mkdir(dir, 0777);
    mkdir(sub, 0777);
    const char *files[2][2] = {{ST_F32, "model.safetensors"}, {FIX "tiny_gpt2/config.json", "config.json"}};
    for (int k = 0; k < 2; k++) {
        size_t n;
        unsigned char *b = file_contents(files[k][0], &n);
        snprintf(path, sizeof path, "%s/%s", sub, files[k][1]);
        if (b) spill(path, b, n, NULL, 0);
        free(b);
    }
    ModelShape ms, ref;
    float *p = NULL, *q = load(safetensors_read_gpt2, ST_F32, &ref);
    int rc = pretrained_load("gpt2-medium", dir, &ms, &p, err, sizeof err);
    CHECK(rc == 0 && p && q && !memcmp(p, q, nparams(&ref) * 4), "init_from = gpt2-medium with pretrained_dir %s: %s", dir, err);
    free(p);
    /* a damaged download, read by name: the error names the file, not "gpt2-medium" (its last float made NaN) */
    size_t n;
    unsigned char *b = file_contents(ST_F32, &n);
    if (b && n > 4) {
        const float nan_value = NAN;
        memcpy(b + n - 4, &nan_value, 4);
        snprintf(path, sizeof path, "%s/model.safetensors", sub);
        spill(path, b, n, NULL, 0);
        rc = pretrained_load("gpt2-medium", dir, &ms, &p, err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && !p && strstr(err, path) && strstr(err, "the weights hold NaN: "), "a NaN in gpt2-medium's file: %d: %s", rc, err);
    }
    free(b);
    rc = pretrained_load("gpt2", dir, &ms, &p, err, sizeof err);
    printf("  init_from = gpt2, not downloaded -> %s\n", err);
    CHECK(rc == NGPT_ERR_IO && p == NULL && strstr(err, "huggingface-cli download openai-community/gpt2 ") && strstr(err, dir),
          "a missing download: status %d: %s", rc, err);
    rc = pretrained_load(LLMC_V3, NULL, &ms, &p, err, sizeof err);
    CHECK(rc == 0 && p && q && !memcmp(p, q, nparams(&ref) * 4), "init_from = a path: %s", err);
    free(p); free(q);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", sub, files[k][1]);
        unlink(path);
    }
    rmdir(sub);
    rmdir(dir);
}

static void test_crop_block_size(void) {
    ModelShape ms;
    float *p = load(safetensors_read_gpt2, ST_F32, &ms);
    if (!p) return;
    ModelShape full = ms;
    size_t n = nparams(&ms);
    float *orig = (float *)malloc(n * 4);
    memcpy(orig, p, n * 4);
    char err[NGPT_ERRLEN];
    CHECK(pretrained_crop(&ms, p, 30, err, sizeof err) == NGPT_ERR_ARG, "cropping to more positions than the model has was accepted");
    CHECK(pretrained_crop(&ms, p, 16, err, sizeof err) == 0 && ms.maxT == 16, "crop: %s", err);
    size_t wte = (size_t)FX_VP * FX_C, keep = 16 * (size_t)FX_C, drop = (size_t)(FX_MAXT - 16) * FX_C;
    CHECK(nparams(&ms) == n - drop, "cropped model has %zu parameters, expected %zu", nparams(&ms), n - drop);
    CHECK(!memcmp(p, orig, (wte + keep) * 4), "wte or the kept wpe rows changed");
    CHECK(!memcmp(p + wte + keep, orig + wte + keep + drop, (n - wte - keep - drop) * 4), "the tensors after wpe did not move down intact");
    (void)full;
    free(p); free(orig);
}

/* ---- the loaded model through nanogpt's graph gives PyTorch's logits ---- */

static char data_dir[256];

static void make_dataset(int V) {
    snprintf(data_dir, sizeof data_dir, "%s/data", tmpdir);
    write_random_dataset(data_dir, V, 2000, 11);
}

static void remove_dataset(void) {
    char path[320];
    snprintf(path, sizeof path, "%s/train.bin", data_dir); unlink(path);
    snprintf(path, sizeof path, "%s/val.bin", data_dir); unlink(path);
    rmdir(data_dir);
}

static void check_logits_of(const char *path, double tol) {
    size_t n;
    unsigned char *fx = file_contents(LOGITS, &n);
    int32_t h[8];
    if (!fx || n < sizeof h) { CHECK(0, "cannot read %s", LOGITS); free(fx); return; }
    memcpy(h, fx, sizeof h);
    int B = h[2], T = h[3], V = h[4];
    size_t N = (size_t)B * T;
    if (h[0] != 20261122 || h[1] != 1 || V != FX_V || T > FX_MAXT || n != sizeof h + N * 4 + N * V * 4) {
        CHECK(0, "%s: not a logits fixture of this model (regenerate with tools/make_pretrained_fixtures.py)", LOGITS);
        free(fx);
        return;
    }
    const int32_t *tokens = (const int32_t *)(fx + sizeof h);
    const float *want = (const float *)(fx + sizeof h + N * 4);

    ModelShape ms;
    float *p = load(pretrained_read, path, &ms);
    if (!p) { free(fx); return; }
    char err[NGPT_ERRLEN];
    CHECK(pretrained_crop(&ms, p, T, err, sizeof err) == 0, "crop: %s", err);
    make_dataset(ms.V);
    ngpt_config c;
    ngpt_config_defaults(&c);
    copy_str(c.device, sizeof c.device, "cpu");
    copy_str(c.data_dir, sizeof c.data_dir, data_dir);
    c.vocab_size = ms.V; c.block_size = T; c.n_layer = ms.L; c.n_head = ms.NH; c.n_embd = ms.C; c.bias = ms.bias;
    c.batch_size = B; c.gradient_accumulation_steps = 1; c.dropout = 0; c.eval_iters = 1; c.threads = 2;
    copy_str(c.init_from, sizeof c.init_from, path); /* the trainer reads, crops and loads the file itself */
    c.n_layer = 1; c.n_head = 1; c.n_embd = 8; /* ... and takes the model's shape from it, as nanoGPT */
    ngpt_trainer *tr;
#ifndef NGPT_SANITIZE
    big_from = nparams(&ms) * 4; /* a whole fp32 copy of the cropped model, or more */
    atomic_store(&n_big, 0);
#endif
    int create_rc = ngpt_trainer_create(&c, NULL, &tr, err, sizeof err);
#ifndef NGPT_SANITIZE
    big_from = 0;
#endif
    if (create_rc) {
        CHECK(0, "trainer: %s", err);
        free(p); free(fx); remove_dataset();
        return;
    }
#ifndef NGPT_SANITIZE
    /* the weights go from the mapped file into the arena a window at a time: the arenas are its only allocations
     * as large as the model */
    size_t arena = ALIGN_UP(tr->plan.device_bytes, 4096) + ALIGN_UP(tr->plan.host_bytes, 4096); /* the CPU backend's one allocation */
    int others = 0, nb = MIN(atomic_load(&n_big), 16);
    size_t other = 0;
    for (int k = 0; k < nb; k++)
        if (big_sizes[k] != arena) { others++; other = big_sizes[k]; }
    CHECK(atomic_load(&n_big) <= 16 && others == 0, "init_from = %s: %d allocations of at least the model's %zu bytes besides the %zu-byte "
          "arena (one of %zu bytes)", path, others, nparams(&ms) * 4, arena, other);
#endif
    CHECK(tr->plan.nparams == nparams(&ms), "trainer has %zu parameters, the file %zu", (size_t)tr->plan.nparams, nparams(&ms));
    CHECK(one_pass_holds_logits(tr, &tr->plan.eval, B, tr->plan.eval_chunk), "plan does not hold the fixture batch in one pass");
    float *loaded = (float *)malloc(nparams(&ms) * 4);
    copy_params_out(tr, loaded, tr->params);
    CHECK(!memcmp(loaded, p, nparams(&ms) * 4), "init_from = %s: the trainer's parameters differ from the file's", path);
    free(loaded);
    float *logits = (float *)malloc(N * ms.Vp * 4);
    full_forward_logits(tr, tokens, B, logits);
    double worst = 0, scale = 0;
    size_t wi = 0;
    for (size_t i = 0; i < N; i++)
        for (int j = 0; j < V; j++) {
            double d = fabs((double)logits[i * ms.Vp + j] - want[i * V + j]);
            scale = fmax(scale, fabs((double)want[i * V + j]));
            if (!(d <= worst)) { worst = d; wi = i * V + j; }
        }
    printf("  %s: logits max abs diff %.3g (max |logit| %.3g) at token %zu, class %zu\n", path, worst, scale, wi / V, wi % V);
    CHECK(worst <= tol, "%s: logits max abs diff %.3g > %.1e at token %zu, class %zu: got %.7g want %.7g", path, worst, tol, wi / V, wi % V,
          (double)logits[(wi / V) * ms.Vp + wi % V], (double)want[wi]);
    ngpt_trainer_free(tr);
    remove_dataset();
    free(logits); free(p); free(fx);
}

static void test_logits_safetensors_f32(void) { check_logits_of(ST_F32, 1e-4); }
static void test_logits_llmc_v3(void) { check_logits_of(LLMC_V3, 1e-4); }
/* bf16 weights move the logits by about 2^-8 of their size: a loose check that the model is the same */
static void test_logits_safetensors_bf16(void) { check_logits_of(ST_BF16, 3e-2); }

/* ---- llm.c export ---- */

/* export pads wte to a multiple of 128 rows, as llm.c's write_model does: V = 158 is Vp 256 in the file (192 in
 * nanogpt's arena); the file reads back to the same parameters and writes back to the same bytes */
static void test_llmc_export_pads_to_128(void) {
    /* 158 tokens: 192 in nanogpt, 256 in the file; 128: 128 in both, no row added (a file whose Vp is V reads) */
    static const struct { int V, Vp, file_Vp; } cases[2] = {{158, 192, 256}, {128, 128, 128}};
    for (int k = 0; k < 2; k++) {
        ModelShape ms = {1, 2, 8, cases[k].V, pad_vocab(cases[k].V), 16, 1};
        size_t n = nparams(&ms);
        float *p = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) p[i] = i >= (size_t)ms.V * ms.C && i < (size_t)ms.Vp * ms.C ? 0.0f : 1.0f + (float)(i % 997) / 512;
        char path[128], again[128], err[NGPT_ERRLEN] = "";
        tmp_path(path, sizeof path, "v_export.bin");
        tmp_path(again, sizeof again, "v_export_again.bin");
        CHECK(ms.Vp == cases[k].Vp && llmc_write_model(path, &ms, p, 0, err, sizeof err) == 0, "V %d: write: %s", ms.V, err);
        size_t bytes = 0;
        unsigned char *a = file_contents(path, &bytes);
        ModelShape file_shape = ms;
        file_shape.Vp = cases[k].file_Vp;
        int32_t h[8] = {0};
        if (a && bytes >= sizeof h) memcpy(h, a, sizeof h);
        CHECK(a && h[3] == ms.V && h[7] == cases[k].file_Vp && bytes == 1024 + nparams(&file_shape) * 4, "V %d: header V %d Vp %d, %zu bytes",
              ms.V, h[3], h[7], bytes);
        ModelShape back;
        float *q = load(llmc_read_model, path, &back);
        CHECK(q && back.V == ms.V && back.Vp == ms.Vp && !memcmp(p, q, n * sizeof(float)), "V %d: the parameters read back", ms.V);
        size_t bytes2 = 0;
        unsigned char *b = q && llmc_write_model(again, &back, q, 0, err, sizeof err) == 0 ? file_contents(again, &bytes2) : NULL;
        CHECK(a && b && bytes == bytes2 && !memcmp(a, b, bytes), "V %d: written back, byte for byte: %s", ms.V, err);
        unlink(path);
        unlink(again);
        free(a); free(b); free(p); free(q);
    }
}

static void test_llmc_write_read_round_trip(void) {
    ModelShape ms, back;
    float *p = load(safetensors_read_gpt2, ST_F32, &ms);
    if (!p) return;
    size_t n = nparams(&ms);
    char path[128], err[NGPT_ERRLEN];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        tmp_path(path, sizeof path, bf16 ? "rt_v5.bin" : "rt_v3.bin");
        int rc = llmc_write_model(path, &ms, p, bf16, err, sizeof err);
        CHECK(rc == 0, "write %s: %s", path, err);
        size_t na, nb;
        unsigned char *a = file_contents(path, &na), *b = file_contents(bf16 ? LLMC_V5 : LLMC_V3, &nb);
        CHECK(a && b && na == nb && !memcmp(a, b, na), "%s differs from llm.c's own writer's %s (%zu vs %zu bytes)", path, bf16 ? LLMC_V5 : LLMC_V3, na, nb);
        free(a); free(b);
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
        CHECK(access(tmp, F_OK) != 0, "the temporary file %s was left behind", tmp);
        float *q = load(llmc_read_model, path, &back);
        if (!q) continue;
        expect_fixture_shape("round trip", &back);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if ((bf16 ? bf16_round(p[i]) : p[i]) != q[i]) bad = i;
        CHECK(bad == n, "%s round trip: value %zu (%s) is %.9g, expected %.9g", bf16 ? "bf16" : "fp32", bad, param_at(&ms, bad), (double)q[bad],
              (double)(bf16 ? bf16_round(p[bad]) : p[bad]));
        unlink(path);
        free(q);
    }
    /* overwriting an existing file replaces it */
    tmp_path(path, sizeof path, "rt_twice.bin");
    CHECK(llmc_write_model(path, &ms, p, 0, err, sizeof err) == 0 && llmc_write_model(path, &ms, p, 1, err, sizeof err) == 0, "rewrite: %s", err);
    float *q = load(llmc_read_model, path, &back);
    CHECK(q && q[0] == bf16_round(p[0]), "the second write did not replace the first");
    free(q);
    unlink(path);
    /* a name of 255 bytes, the file system's limit: written through a short temporary name beside it */
    char long_name[400];
    tmp_path(long_name, sizeof long_name, "");
    size_t at = strlen(long_name);
    for (int i = 0; i < 255 && at + 1 < sizeof long_name; i++) long_name[at++] = 'h';
    long_name[at] = 0;
    CHECK(llmc_write_model(long_name, &ms, p, 0, err, sizeof err) == 0 && access(long_name, F_OK) == 0, "a 255-byte name: %s", err);
    unlink(long_name);
    /* a folder that does not exist: an i/o error naming the file */
    int rc = llmc_write_model("/nonexistent_dir_ngpt/x.bin", &ms, p, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "cannot write /nonexistent_dir_ngpt/x.bin: ") && strstr(err, "its folder does not exist") &&
              !strstr(err, ".tmp."),
          "write into a missing folder: status %d: %s", rc, err);
    free(p);
}

static void test_llmc_write_without_bias(void) {
    ModelShape ms;
    float *p = load(safetensors_read_gpt2, ST_F32, &ms);
    if (!p) return;
    /* the same weights without the bias tensors */
    ModelShape nb = ms;
    nb.bias = 0;
    size_t sz[N_PARAM_TENSORS], szb[N_PARAM_TENSORS];
    size_t n = param_sizes(&ms, sz), m = param_sizes(&nb, szb);
    float *q = (float *)malloc(m * 4);
    size_t from = 0, to = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        memcpy(q + to, p + from, szb[i] * 4);
        from += sz[i];
        to += szb[i];
    }
    char path[128], err[NGPT_ERRLEN];
    tmp_path(path, sizeof path, "nobias.bin");
    CHECK(llmc_write_model(path, &nb, q, 0, err, sizeof err) == 0, "write: %s", err);
    ModelShape back;
    float *r = load(llmc_read_model, path, &back);
    if (r) {
        expect_fixture_shape("bias-less export read back", &back);
        CHECK(nparams(&back) == n, "read back %zu parameters, expected %zu", nparams(&back), n);
        size_t off = 0, bad = 0;
        for (int i = 0; i < N_PARAM_TENSORS; i++) {
            for (size_t k = 0; k < sz[i]; k++) {
                float want = szb[i] ? p[off + k] : 0.0f;
                if (r[off + k] != want) bad++;
            }
            off += sz[i];
        }
        CHECK(bad == 0, "%zu values differ from the weights with zero biases", bad);
    }
    unlink(path);
    free(p); free(q); free(r);
}

/* ---- malformed inputs ---- */

/* Runs reader on path and expects status want_rc and an error naming the file and containing phrase. */
static void expect_error(int (*reader)(const char *, ModelShape *, float **, char *, size_t), const char *what, const char *path,
                         int want_rc, const char *phrase) {
    ModelShape ms;
    float *p = (float *)1;
    char err[NGPT_ERRLEN] = "";
    int rc = reader(path, &ms, &p, err, sizeof err);
    printf("  %-28s -> %s\n", what, err);
    CHECK(rc == want_rc, "%s: status %d (%s), expected %d (%s): %s", what, rc, ngpt_status_name(rc), want_rc, ngpt_status_name(want_rc), err);
    CHECK(p == NULL, "%s: params not NULL after a failure", what);
    CHECK(strstr(err, path) != NULL, "%s: the error does not name %s: %s", what, path, err);
    CHECK(strstr(err, phrase) != NULL, "%s: the error lacks \"%s\": %s", what, phrase, err);
    if (rc == 0) free(p);
}

/* the good F32 file, split into its JSON header and its data */
typedef struct {
    unsigned char *file;
    size_t size;
    char *json;
    size_t json_len;
    const unsigned char *data;
    size_t data_len;
} StFile;

static int st_load(StFile *s, const char *path) {
    s->file = file_contents(path, &s->size);
    if (!s->file) return 0;
    uint64_t h;
    memcpy(&h, s->file, 8);
    s->json = (char *)malloc(h + 1);
    memcpy(s->json, s->file + 8, h);
    s->json[h] = 0;
    s->json_len = h;
    s->data = s->file + 8 + h;
    s->data_len = s->size - 8 - h;
    return 1;
}

/* writes a safetensors file of the header text json and a data section of two parts */
static void st_write_parts(const char *path, const char *json, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = json ? fopen(path, "wb") : NULL;
    if (!f) { printf("cannot write %s\n", path); return; }
    uint64_t h = strlen(json);
    fwrite(&h, 8, 1, f);
    fwrite(json, 1, h, f);
    if (na) fwrite(a, 1, na, f);
    if (nb) fwrite(b, 1, nb, f);
    fclose(f);
}

/* writes a safetensors file: the header text (with its length) and the good file's data */
static void st_write(const char *path, const char *json, const StFile *s) { st_write_parts(path, json, s->data, s->data_len, NULL, 0); }

/* s with the first `old` replaced by `new` (malloc'd); NULL when old is absent */
static char *replace1(const char *s, const char *old, const char *new) {
    const char *at = strstr(s, old);
    CHECK(at != NULL, "the fixture header has no \"%s\"", old);
    if (!at) return NULL;
    size_t n = strlen(s), no = strlen(old), nn = strlen(new);
    char *r = (char *)malloc(n - no + nn + 1);
    memcpy(r, s, (size_t)(at - s));
    memcpy(r + (at - s), new, nn);
    memcpy(r + (at - s) + nn, at + no, n - (size_t)(at - s) - no + 1);
    return r;
}

/* the data_offsets text of tensor `name` in header json, e.g. "[1000,1096]" */
static int offsets_of(const char *json, const char *name, char *out, size_t cap, unsigned long long *b, unsigned long long *e) {
    char key[128];
    snprintf(key, sizeof key, "\"%s\":{", name);
    const char *at = strstr(json, key);
    if (!at) return 0;
    at = strstr(at, "\"data_offsets\":[");
    if (!at) return 0;
    at += strlen("\"data_offsets\":");
    const char *end = strchr(at, ']');
    snprintf(out, cap, "%.*s", (int)(end - at + 1), at);
    return sscanf(out, "[%llu,%llu]", b, e) == 2;
}

/* a broken copy of the good file: header with `old` replaced by `new` */
static void st_variant(const StFile *s, const char *name, const char *old, const char *new, char *path, size_t cap) {
    tmp_path(path, cap, name);
    char *json = replace1(s->json, old, new);
    if (json) st_write(path, json, s);
    free(json);
}

/* the header text with every data offset at or past `from` moved by `by` bytes (NULL when out of memory, or when an
 * offset pair is not two integers or the text outgrows its room) */
static char *offsets_moved(const char *json, unsigned long long from, long long by) {
    size_t cap = strlen(json) + 4096, at = 0;
    char *out = (char *)malloc(cap);
    const char *rest = json, *key = "\"data_offsets\":[";
    for (const char *k; out && (k = strstr(rest, key)) != NULL;) {
        unsigned long long lo = 0, hi = 0;
        int used = 0;
        if (sscanf(k + strlen(key), "%llu,%llu]%n", &lo, &hi, &used) != 2 || !used) { free(out); return NULL; }
        lo = lo >= from ? (unsigned long long)((long long)lo + by) : lo;
        hi = hi >= from ? (unsigned long long)((long long)hi + by) : hi;
        int w = snprintf(out + at, cap - at, "%.*s%s%llu,%llu]", (int)(k - rest), rest, key, lo, hi);
        if (w < 0 || (size_t)w >= cap - at) { free(out); return NULL; }
        at += (size_t)w;
        rest = k + strlen(key) + used;
    }
    if (out && strlen(rest) >= cap - at) { free(out); return NULL; }
    if (out) snprintf(out + at, cap - at, "%s", rest);
    return out;
}

static void test_safetensors_errors(void) {
    StFile s;
    if (!st_load(&s, ST_F32)) { CHECK(0, "cannot read %s", ST_F32); return; }
    char path[128], a[64], b[64];
    unsigned long long b0, e0, b1, e1;

    tmp_path(path, sizeof path, "missing.safetensors");
    expect_error(safetensors_read_gpt2, "missing file", path, NGPT_ERR_IO, "No such file");

    tmp_path(path, sizeof path, "tiny.safetensors");
    spill(path, s.file, 5, NULL, 0);
    expect_error(safetensors_read_gpt2, "5-byte file", path, NGPT_ERR_FORMAT, "truncated");

    tmp_path(path, sizeof path, "truncated.safetensors");
    spill(path, s.file, s.size - 100, NULL, 0);
    expect_error(safetensors_read_gpt2, "truncated data", path, NGPT_ERR_FORMAT, "reach past the end of the data section");

    tmp_path(path, sizeof path, "truncated_header.safetensors");
    spill(path, s.file, 8 + s.json_len / 2, NULL, 0);
    expect_error(safetensors_read_gpt2, "truncated header", path, NGPT_ERR_FORMAT, "but only");

    tmp_path(path, sizeof path, "huge_header.safetensors");
    {
        unsigned char *f = (unsigned char *)malloc(s.size);
        memcpy(f, s.file, s.size);
        uint64_t h = (uint64_t)1 << 40;
        memcpy(f, &h, 8);
        spill(path, f, s.size, NULL, 0);
        free(f);
    }
    expect_error(safetensors_read_gpt2, "header length past the end", path, NGPT_ERR_FORMAT, "header length");

    tmp_path(path, sizeof path, "not_safetensors.safetensors");
    spill(path, "\x04\0\0\0\0\0\0\0abcdefgh", 16, NULL, 0);
    expect_error(safetensors_read_gpt2, "no JSON object", path, NGPT_ERR_FORMAT, "not safetensors");

    /* bad JSON: a trailing comma; the error gives the file offset of the '}' after it */
    {
        const char *key = "\"format\":\"pt\"";
        char *at = strstr(s.json, key);
        CHECK(at != NULL, "no __metadata__ in the fixture");
        if (at) {
            st_variant(&s, "bad_json.safetensors", key, "\"format\":\"pt\",", path, sizeof path);
            char want[64];
            snprintf(want, sizeof want, "at byte %zu of the file", (size_t)(8 + (at - s.json) + strlen(key) + 1));
            expect_error(safetensors_read_gpt2, "trailing comma", path, NGPT_ERR_FORMAT, want);
        }
    }
    st_variant(&s, "bad_json2.safetensors", "\"dtype\":\"F32\"", "\"dtype\" \"F32\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "missing colon", path, NGPT_ERR_FORMAT, "expected ':' after a key");
    st_variant(&s, "bad_json3.safetensors", "\"shape\":[24]", "\"shape\":[024]", path, sizeof path);
    expect_error(safetensors_read_gpt2, "leading zero", path, NGPT_ERR_FORMAT, "bad JSON");

    /* offsets */
    if (offsets_of(s.json, "wte.weight", a, sizeof a, &b0, &e0)) {
        snprintf(b, sizeof b, "[%llu,%llu]", b0, e0 + 4);
        st_variant(&s, "offsets_out.safetensors", a, b, path, sizeof path);
        expect_error(safetensors_read_gpt2, "offsets out of range", path, NGPT_ERR_FORMAT, "reach past the end of the data section");
        snprintf(b, sizeof b, "[%llu,%llu]", e0, b0);
        st_variant(&s, "offsets_reversed.safetensors", a, b, path, sizeof path);
        expect_error(safetensors_read_gpt2, "offsets reversed", path, NGPT_ERR_FORMAT, "end before they begin");
        snprintf(b, sizeof b, "[%llu,%llu]", b0, e0 - 4);
        st_variant(&s, "offsets_short.safetensors", a, b, path, sizeof path);
        expect_error(safetensors_read_gpt2, "offsets vs shape", path, NGPT_ERR_FORMAT, "needs");
    } else CHECK(0, "no wte.weight offsets in the fixture");
    if (offsets_of(s.json, "ln_f.bias", a, sizeof a, &b0, &e0) && offsets_of(s.json, "ln_f.weight", b, sizeof b, &b1, &e1)) {
        /* ln_f.weight given ln_f.bias's bytes: the two overlap */
        char key[160], val[160];
        snprintf(key, sizeof key, "\"ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[24],\"data_offsets\":%s", b);
        snprintf(val, sizeof val, "\"ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[24],\"data_offsets\":%s", a);
        st_variant(&s, "overlap.safetensors", key, val, path, sizeof path);
        expect_error(safetensors_read_gpt2, "overlapping tensors", path, NGPT_ERR_FORMAT, "overlap");
    } else CHECK(0, "no ln_f offsets in the fixture");
    tmp_path(path, sizeof path, "trailing_data.safetensors");
    spill(path, s.file, s.size, "\0\0\0\0", 4);
    expect_error(safetensors_read_gpt2, "bytes after the tensors", path, NGPT_ERR_FORMAT, "belong to no tensor");
    /* four bytes before the first tensor: every data offset moved up by 4 */
    {
        char *json = offsets_moved(s.json, 0, 4);
        tmp_path(path, sizeof path, "hole_first.safetensors");
        st_write_parts(path, json, "\0\0\0\0", 4, s.data, s.data_len);
        free(json);
        expect_error(safetensors_read_gpt2, "a hole before the first tensor", path, NGPT_ERR_FORMAT,
                     "bytes 0..4 of the data section belong to no tensor");
    }
    /* a header length that runs 4 bytes past the file's end */
    tmp_path(path, sizeof path, "header_past_end.safetensors");
    {
        unsigned char *f = (unsigned char *)malloc(s.size);
        memcpy(f, s.file, s.size);
        uint64_t h = s.size - 4;
        memcpy(f, &h, 8);
        spill(path, f, s.size, NULL, 0);
        free(f);
    }
    {
        char want[128];
        snprintf(want, sizeof want, "says %llu bytes of JSON, but only %llu bytes follow", (unsigned long long)s.size - 4,
                 (unsigned long long)s.size - 8);
        expect_error(safetensors_read_gpt2, "header length 4 bytes past the end", path, NGPT_ERR_FORMAT, want);
    }

    /* shapes, names, dtypes */
    st_variant(&s, "wrong_shape.safetensors", "\"h.1.mlp.c_fc.weight\":{\"dtype\":\"F32\",\"shape\":[24,96]",
               "\"h.1.mlp.c_fc.weight\":{\"dtype\":\"F32\",\"shape\":[96,24]", path, sizeof path);
    expect_error(safetensors_read_gpt2, "wrong shape", path, NGPT_ERR_FORMAT, "h.1.mlp.c_fc.weight has shape [96, 24], expected [24, 96]");
    /* the first dimension right, the second not, its bytes as many as that shape's: the tensor's data cut to them and
     * every tensor after it moved down (a reader that checked the first dimension alone would read this weight at
     * the expected one's stride) */
    if (offsets_of(s.json, "h.1.mlp.c_fc.weight", a, sizeof a, &b0, &e0) && e0 - b0 == 24 * 96 * 4) {
        const unsigned long long cut = 24 * 48 * 4;
        char *moved = offsets_moved(s.json, e0, -(long long)(e0 - b0 - cut));
        char *json = moved ? replace1(moved, "\"h.1.mlp.c_fc.weight\":{\"dtype\":\"F32\",\"shape\":[24,96]",
                                      "\"h.1.mlp.c_fc.weight\":{\"dtype\":\"F32\",\"shape\":[24,48]") : NULL;
        tmp_path(path, sizeof path, "wrong_second_dim.safetensors");
        st_write_parts(path, json, s.data, b0 + cut, s.data + e0, s.data_len - e0);
        free(moved);
        free(json);
        expect_error(safetensors_read_gpt2, "wrong second dimension", path, NGPT_ERR_FORMAT,
                     "h.1.mlp.c_fc.weight has shape [24, 48], expected [24, 96]");
    } else CHECK(0, "no h.1.mlp.c_fc.weight of 24 x 96 floats in the fixture");
    st_variant(&s, "wrong_wpe.safetensors", "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[24,24]",
               "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[12,48]", path, sizeof path);
    expect_error(safetensors_read_gpt2, "wpe disagrees with wte", path, NGPT_ERR_FORMAT, "(maxT, C)");
    st_variant(&s, "missing.safetensors", "\"h.1.ln_2.bias\"", "\"h.1.ln_2.bibs\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "missing tensor", path, NGPT_ERR_FORMAT, "missing tensor h.1.ln_2.bias");
    st_variant(&s, "missing_wte.safetensors", "\"wte.weight\"", "\"wte.weights\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "missing wte", path, NGPT_ERR_FORMAT, "missing tensor wte.weight");
    st_variant(&s, "duplicate.safetensors", "\"ln_f.bias\"", "\"transformer.ln_f.weight\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "same tensor twice", path, NGPT_ERR_FORMAT, "are the same parameter");
    st_variant(&s, "unknown_dtype.safetensors", "\"h.0.ln_1.weight\":{\"dtype\":\"F32\"", "\"h.0.ln_1.weight\":{\"dtype\":\"F31\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "unknown dtype", path, NGPT_ERR_FORMAT, "unknown dtype \"F31\"");
    st_variant(&s, "int_dtype.safetensors", "\"h.0.ln_1.weight\":{\"dtype\":\"F32\"", "\"h.0.ln_1.weight\":{\"dtype\":\"I32\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "unsupported dtype", path, NGPT_ERR_FORMAT, "h.0.ln_1.weight has dtype I32");
    st_variant(&s, "no_offsets.safetensors", "\"data_offsets\"", "\"data_offset\"", path, sizeof path);
    expect_error(safetensors_read_gpt2, "entry without offsets", path, NGPT_ERR_FORMAT, "lacks \"data_offsets\"");
    st_variant(&s, "bad_metadata.safetensors", "{\"format\":\"pt\"}", "{\"format\":1}", path, sizeof path);
    expect_error(safetensors_read_gpt2, "non-string metadata", path, NGPT_ERR_FORMAT, "__metadata__");

    /* the ignored buffers may be anything valid; a safetensors file with only them is no GPT-2 */
    tmp_path(path, sizeof path, "empty.safetensors");
    {
        const char *json = "{\"__metadata__\":{}}";
        uint64_t h = strlen(json);
        FILE *f = fopen(path, "wb");
        fwrite(&h, 8, 1, f);
        fwrite(json, 1, h, f);
        fclose(f);
    }
    expect_error(safetensors_read_gpt2, "no tensors", path, NGPT_ERR_FORMAT, "missing tensor wte.weight");
    free(s.file);
    free(s.json);

    /* the BF16 fixture carries a tied lm_head.weight copy: one that differs is refused */
    if (!st_load(&s, ST_BF16)) { CHECK(0, "cannot read %s", ST_BF16); return; }
    if (offsets_of(s.json, "lm_head.weight", a, sizeof a, &b0, &e0)) {
        tmp_path(path, sizeof path, "untied.safetensors");
        ((unsigned char *)s.data)[b0 + 1234] ^= 0x01;
        st_write(path, s.json, &s);
        expect_error(safetensors_read_gpt2, "untied lm_head", path, NGPT_ERR_FORMAT, "lm_head.weight differs from wte.weight (row 25)");
    } else CHECK(0, "no lm_head.weight in %s", ST_BF16);
    free(s.file);
    free(s.json);
}

/* n_head comes from config.json next to the file; without one, only GPT-2's own sizes are known */
static void test_n_head_sources(void) {
    size_t n;
    unsigned char *file = file_contents(ST_F32, &n);
    if (!file) { CHECK(0, "cannot read %s", ST_F32); return; }
    char dir[128], path[160], cfg[160];
    tmp_path(dir, sizeof dir, "nh");
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    spill(path, file, n, NULL, 0);
    expect_error(safetensors_read_gpt2, "no config.json", path, NGPT_ERR_FORMAT, "cannot tell the number of heads");

    static const struct { const char *what, *json, *says; } bad[] = {
        {"config.json bad JSON", "{\"n_head\": 2,, \"n_embd\": 24}", "config.json: bad JSON at byte 13"},
        {"config.json of another model", "{\"n_head\": 2, \"n_embd\": 32}", "\"n_embd\" is 32 but wte in"},
        {"config.json with a string for a size", "{\"n_head\": 2, \"n_embd\": \"24\"}", "\"n_embd\" is '24', not a JSON integer; wte in"},
        {"config.json without n_head", "{\"n_embd\": 24, \"n_layer\": 2}", "\"n_head\" is missing"},
        {"n_head not dividing C", "{\"n_head\": 5}", "does not divide"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spill(cfg, bad[i].json, strlen(bad[i].json), NULL, 0);
        expect_error(safetensors_read_gpt2, bad[i].what, path, NGPT_ERR_FORMAT, bad[i].says);
    }
    const char *good = "{\"n_head\": 4, \"n_embd\": 24, \"n_layer\": 2, \"vocab_size\": 100, \"n_positions\": 24}";
    spill(cfg, good, strlen(good), NULL, 0);
    ModelShape ms;
    float *p = load(safetensors_read_gpt2, path, &ms);
    CHECK(p && ms.NH == 4, "n_head from config.json: got %d, expected 4", ms.NH);
    free(p);
    /* no config.json: each of GPT-2's four widths names its heads (the sizes table's, by its published values) */
    unlink(cfg);
    static const int widths[4] = {768, 1024, 1280, 1600}, heads[4] = {12, 16, 20, 25};
    for (int i = 0; i < 4; i++) {
        ModelShape gpt2 = {12, 0, widths[i], 50257, 50304, 1024, 1};
        int NH = 0;
        char err[NGPT_ERRLEN] = "";
        CHECK(st_n_head(path, &gpt2, &NH, err, sizeof err) == NGPT_OK && NH == heads[i], "n_embd %d without config.json: n_head %d, "
              "expected %d: %s", widths[i], NH, heads[i], err);
    }
    unlink(path);
    rmdir(dir);
    free(file);
}

static void test_llmc_errors(void) {
    size_t n;
    unsigned char *file = file_contents(LLMC_V3, &n);
    if (!file) { CHECK(0, "cannot read %s", LLMC_V3); return; }
    char path[128];
    int32_t *h = (int32_t *)file;

    tmp_path(path, sizeof path, "short.bin");
    spill(path, file, 100, NULL, 0);
    expect_error(llmc_read_model, "shorter than the header", path, NGPT_ERR_FORMAT, "too short for an llm.c model file");
    tmp_path(path, sizeof path, "truncated.bin");
    spill(path, file, n - 10, NULL, 0);
    expect_error(llmc_read_model, "truncated parameters", path, NGPT_ERR_FORMAT, "truncated");
    tmp_path(path, sizeof path, "trailing.bin");
    spill(path, file, n, "abcd", 4);
    expect_error(llmc_read_model, "trailing bytes", path, NGPT_ERR_FORMAT, "trailing bytes");

    tmp_path(path, sizeof path, "magic.bin");
    h[0] = 20240327;
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "llm.c debug state file", path, NGPT_ERR_FORMAT, "debug state file");
    h[0] = 20240527;
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "llm.c optimizer state file", path, NGPT_ERR_FORMAT, "optimizer state file, not its model file: model_<step>.bin");
    tmp_path(path, sizeof path, "state_00000020_00000.bin"); /* llm.c's name for it: the model file of the same step */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "llm.c state file by its name", path, NGPT_ERR_FORMAT, "model_00000020.bin beside it");
    tmp_path(path, sizeof path, "magic.bin");
    h[0] = 20240801; /* llm.c's Llama 3 shard magic */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "llm.c Llama 3 shard", path, NGPT_ERR_FORMAT, "(an llm.c Llama 3 token shard, not a model file)");
    memcpy(file, "ngptckpt", 8);
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "a nanogpt checkpoint", path, NGPT_ERR_FORMAT, "(a nanogpt checkpoint, not an llm.c model file)");
    h[1] = 3;
    h[0] = 12345;
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "wrong magic", path, NGPT_ERR_FORMAT, "magic 12345");
    h[0] = LLMC_MODEL_MAGIC;

    tmp_path(path, sizeof path, "version.bin");
    h[1] = 2;
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "wrong version", path, NGPT_ERR_FORMAT, "version 2; nanogpt reads version 3 (fp32) and 5 (bf16)");
    h[1] = 5; /* a bf16 header on fp32 data: twice the bytes it expects */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "v5 header on v3 data", path, NGPT_ERR_FORMAT,
                 "trailing bytes); its size is exactly that of version 3 (fp32) data: is the version at byte offset 4 wrong?");
    h[1] = 3;

    tmp_path(path, sizeof path, "sizes.bin");
    h[5] = 5; /* NH 5 does not divide C 24 */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "NH not dividing C", path, NGPT_ERR_FORMAT, "NH 5, C 24, Vp 128: NH must divide C");
    h[5] = FX_NH;
    h[7] = 64; /* Vp < V */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "Vp below V", path, NGPT_ERR_FORMAT, "V 100, L 2, NH 2, C 24, Vp 64: the padded vocabulary Vp is below V");
    h[7] = FX_VP;
    h[4] = 3; /* a layer more than the data holds */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "more layers than data", path, NGPT_ERR_FORMAT, "L 3");
    h[4] = FX_L;

    /* a well-formed file of 2000 layers (C 1): over n_layer's range, refused before it trains (its checkpoints would
     * load nowhere) */
    {
        enum { L = 2000, C = 1, T = 8 };
        size_t count = (size_t)C * (FX_VP + T + 2 + (size_t)L * (12 * C + 13));
        int32_t head[256] = {LLMC_MODEL_MAGIC, 3, T, FX_V, L, 1, C, FX_VP};
        float *zeros = calloc(count, sizeof(float));
        tmp_path(path, sizeof path, "deep.bin");
        spill(path, head, sizeof head, zeros, count * sizeof(float));
        free(zeros);
        ngpt_config deep;
        ngpt_config_defaults(&deep);
        snprintf(deep.device, sizeof deep.device, "cpu");
        snprintf(deep.init_from, sizeof deep.init_from, "%s", path);
        deep.block_size = T;
        ngpt_options lean;
        memset(&lean, 0, sizeof lean);
        lean.sample_only = 1;
        ngpt_trainer *dt = NULL;
        char derr[NGPT_ERRLEN] = "";
        int drc = ngpt_trainer_create(&deep, &lean, &dt, derr, sizeof derr);
        CHECK(drc == NGPT_ERR_FORMAT && !dt && strstr(derr, "deep.bin: the model's n_layer is 2000; nanogpt trains and saves models with n_layer in [1, 1024]"),
              "2000 layers: status %d: %s", drc, derr);
        ngpt_trainer_free(dt);
    }

    /* damaged weights: the first NaN or Inf named by tensor, layer and element, in the file's reading and in a trainer's */
    tmp_path(path, sizeof path, "nan.bin");
    float *x = (float *)(file + 1024) + (size_t)FX_VP * FX_C + (size_t)FX_MAXT * FX_C + 2 * (size_t)FX_L * FX_C; /* qkvw */
    x[3 * FX_C * FX_C + 7] = NAN;                                                                               /* layer 1, element 7 */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "a NaN weight", path, NGPT_ERR_FORMAT, "the weights hold NaN: qkvw of layer 1, element 7 of its 1728");
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    snprintf(cfg.device, sizeof cfg.device, "cpu");
    snprintf(cfg.init_from, sizeof cfg.init_from, "%s", path);
    cfg.block_size = FX_MAXT;
    ngpt_trainer *tr = NULL;
    char err[NGPT_ERRLEN] = "";
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    int rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, path) && strstr(err, "NaN: qkvw of layer 1"), "a trainer from a NaN weight: status %d: %s", rc, err);
    ngpt_trainer_free(tr);
    x[3 * FX_C * FX_C + 7] = -INFINITY; /* and an Inf before it */
    ((float *)(file + 1024))[(size_t)FX_VP * FX_C + (size_t)FX_MAXT * FX_C - 1] = INFINITY; /* wpe's last */
    spill(path, file, n, NULL, 0);
    expect_error(llmc_read_model, "an Inf weight", path, NGPT_ERR_FORMAT, "the weights hold Inf: wpe, element 575 of its 576");

    tmp_path(path, sizeof path, "ckpt.pt"); /* torch.save's zip (nanoGPT's checkpoint): named as what it is */
    spill(path, "PK\3\4\24\0\0\0\0\0archive/data.pkl", 27, NULL, 0);
    expect_error(pretrained_read, "a PyTorch file", path, NGPT_ERR_FORMAT, "is a zip archive, as PyTorch's torch.save writes (nanoGPT's ckpt.pt)");

    tmp_path(path, sizeof path, "what.dat");
    spill(path, "hello world, this is not a model", 32, NULL, 0);
    expect_error(pretrained_read, "neither format", path, NGPT_ERR_FORMAT, "neither an llm.c model file");
    free(file);
}

/* ---- the JSON reader on its own ---- */

static void expect_json(const char *text, int ok, size_t at) {
    Json j;
    int rc = json_parse(&j, text, strlen(text));
    if (ok) CHECK(rc == 0, "JSON %s: rejected at byte %zu: %s", text, j.err_at, j.err_what);
    else CHECK(rc != 0 && j.err_at == at, "JSON %s: %s at byte %zu, expected a failure at byte %zu", text, rc ? j.err_what : "accepted",
               rc ? j.err_at : 0, at);
    json_free(&j);
}

static void test_json_reader(void) {
    expect_json("{}", 1, 0);
    expect_json(" [1, -2.5e+3, 0.25, true, false, null, \"x\", {\"a\": []}] ", 1, 0);
    expect_json("{\"a\":1,}", 0, 7);
    expect_json("{\"a\":01}", 0, 6);
    expect_json("{\"a\":1.}", 0, 7);
    expect_json("{\"a\":-}", 0, 6);
    expect_json("{\"a\":tru}", 0, 5);
    expect_json("{\"a\":\"\\ud800\"}", 0, 6);
    expect_json("{\"a\":\"\\udc00\"}", 0, 6);
    expect_json("{\"a\":\"\\x\"}", 0, 6);
    expect_json("{\"a\":\"tab\there\"}", 0, 9);
    expect_json("{\"a\":\"\xC3\x28\"}", 0, 6);
    expect_json("{\"a\":1} x", 0, 8);
    expect_json("{\"a\" 1}", 0, 5);
    expect_json("[1 2]", 0, 3);
    expect_json("{\"a\":\"unterminated}", 0, 5);
    expect_json("", 0, 0);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    deep[199] = 0;
    expect_json(deep, 0, 64);

    /* decoding: escapes and a surrogate pair to UTF-8; members by key; integers */
    const char *t = "{\"k\\u00e9y\": [3, 18446744073709551615, 18446744073709551616, 1.0, -1], \"s\": \"a\\\"b\\\\c\\/\\n\\ud83d\\ude00\"}";
    Json j;
    CHECK(json_parse(&j, t, strlen(t)) == 0, "parse: %s at %zu", j.err_what, j.err_at);
    int arr = json_get(&j, 0, "k\xC3\xA9y"), s = json_get(&j, 0, "s");
    CHECK(arr > 0 && j.nodes[arr].type == JSON_ARRAY && j.nodes[arr].count == 5, "array member");
    CHECK(json_get(&j, 0, "nope") < 0, "absent key found");
    if (arr > 0) {
        uint64_t v;
        CHECK(json_u64(&j, arr + 1, &v) == 0 && v == 3, "3");
        CHECK(json_u64(&j, arr + 2, &v) == 0 && v == UINT64_MAX, "2^64-1");
        CHECK(json_u64(&j, arr + 3, &v) != 0, "2^64 accepted");
        CHECK(json_u64(&j, arr + 4, &v) != 0, "1.0 accepted as an integer");
        CHECK(json_u64(&j, arr + 5, &v) != 0, "-1 accepted");
    }
    char buf[64];
    CHECK(s > 0 && json_str(&j, s, buf, sizeof buf) == 11 && !strcmp(buf, "a\"b\\c/\n\xF0\x9F\x98\x80"), "decoded string: %s", buf);
    CHECK(s > 0 && json_str(&j, s, buf, 5) == -1, "a string longer than the buffer was not refused");
    json_free(&j);

    /* bf16 rounding: nearest, ties to even, NaN stays NaN */
    CHECK(f32_to_bf16(1.0f) == 0x3F80, "1.0");
    float x;
    uint32_t u = 0x3F808000u; /* exactly halfway between 0x3F80 and 0x3F81: to even 0x3F80 */
    memcpy(&x, &u, 4);
    CHECK(f32_to_bf16(x) == 0x3F80, "tie to even (down)");
    u = 0x3F818000u; /* halfway between 0x3F81 and 0x3F82: to even 0x3F82 */
    memcpy(&x, &u, 4);
    CHECK(f32_to_bf16(x) == 0x3F82, "tie to even (up)");
    u = 0x3F808001u;
    memcpy(&x, &u, 4);
    CHECK(f32_to_bf16(x) == 0x3F81, "above halfway");
    CHECK(f32_to_bf16(NAN) == 0x7FC0 && f32_to_bf16(INFINITY) == 0x7F80, "NaN and Inf");
}

/* the broken files made above (the tests remove their own folders) */
static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char path[400];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(tmp_path(path, sizeof path, e->d_name));
        closedir(d);
    }
    if (rmdir(tmpdir)) printf("could not remove %s: %s\n", tmpdir, strerror(errno));
}

int main(void) {
    if (test_folder(tmpdir, sizeof tmpdir, "pretrained")) return 1;
    RUN(test_json_reader);
    RUN(test_safetensors_f32_equals_llmc_v3);
    RUN(test_bf16_readers_agree);
    RUN(test_f16_reader);
    RUN(test_pretrained_read_dispatch);
    RUN(test_weights_in_windows);
    RUN(test_shape_only);
    RUN(test_init_from_names);
    RUN(test_crop_block_size);
    RUN(test_logits_safetensors_f32);
    RUN(test_logits_llmc_v3);
    RUN(test_logits_safetensors_bf16);
    RUN(test_llmc_write_read_round_trip);
    RUN(test_llmc_export_pads_to_128);
    RUN(test_llmc_write_without_bias);
    RUN(test_safetensors_errors);
    RUN(test_n_head_sources);
    RUN(test_llmc_errors);
    remove_tmpdir();
    return check_summary();
}
