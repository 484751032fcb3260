/* test_ops.c: every CPU backend op against a slow, obvious double-precision reference: forward outputs
 * compared directly, backward against central finite differences of the double reference.
 *
 * For an op y = f(x) and a fixed random R, the scalar L = sum(y * R) has dL/dx = the op's backward with
 * dout = R. The finite differences (h = 1e-6, double) of the reference L give the truth; the fp32 backend
 * must match within 1e-3 relative (fp32 forward values, many-term sums). */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"

static ngpt_backend *be;

static void fill_rand(float *x, size_t n, uint64_t stream, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * normal_at(42, stream, i);
}
static double *to_double(const float *x, size_t n) {
    double *d = (double *)malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* max over i of |a-b| / max(|b|, floor); prints where */
static double max_rel(const float *got, const double *want, size_t n, double floor_, size_t *where) {
    double worst = 0;
    *where = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor_);
        if (!(d <= worst)) { worst = d; *where = i; }
    }
    return worst;
}

#define EXPECT_CLOSE_ARR(got, want, n, floor_, tol, what)                                                      \
    do {                                                                                                        \
        size_t w_;                                                                                              \
        double e_ = max_rel((got), (want), (n), (floor_), &w_);                                                 \
        CHECK(e_ <= (tol), "%s: max rel diff %.3g at %zu (got %.8g want %.8g)", (what), e_, w_, (double)(got)[w_], \
              (want)[w_]);                                                                                      \
    } while (0)

/* gradient of L(x) = sum(f(x) * R) by central differences, for every element of x (double) */
typedef double (*loss_fn)(void *ctx, const double *x);
static void finite_diff(loss_fn f, void *ctx, double *x, size_t n, double *grad) {
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = f(ctx, x);
        x[i] = keep - h;
        double lm = f(ctx, x);
        x[i] = keep;
        grad[i] = (lp - lm) / (2 * h);
    }
}

/* ---------------------------------------------------------------- matmul */
typedef struct { int N, C, OC; const double *w, *b, *x, *R; int which; } MmCtx;
static double mm_ref(const MmCtx *c, const double *x, const double *w, const double *b, double *out) {
    double L = 0;
    for (int i = 0; i < c->N; i++)
        for (int o = 0; o < c->OC; o++) {
            double s = b ? b[o] : 0;
            for (int k = 0; k < c->C; k++) s += x[(size_t)i * c->C + k] * w[(size_t)o * c->C + k];
            if (out) out[(size_t)i * c->OC + o] = s;
            L += s * c->R[(size_t)i * c->OC + o];
        }
    return L;
}
static double mm_loss(void *p, const double *v) {
    MmCtx *c = (MmCtx *)p;
    return mm_ref(c, c->which == 0 ? v : c->x, c->which == 1 ? v : c->w, c->which == 2 ? v : c->b, NULL);
}
static void check_matmul(int N, int C, int OC, int bias) {
    size_t nx = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(OC * 4), *out = malloc(no * 4), *R = malloc(no * 4);
    float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(OC * 4);
    fill_rand(x, nx, 1, 1); fill_rand(w, nw, 2, 0.5f); fill_rand(b, OC, 3, 0.5f); fill_rand(R, no, 4, 1);
    fill_rand(dw, nw, 5, 1); fill_rand(db, OC, 6, 1); /* accumulation: start from nonzero */
    float *dw0 = malloc(nw * 4), *db0 = malloc(OC * 4);
    memcpy(dw0, dw, nw * 4); memcpy(db0, db, OC * 4);
    for (size_t i = 0; i < nx; i++) dx[i] = NAN; /* poisoned: must be overwritten */
    be->matmul_forward(be, out, x, w, bias ? b : NULL, N, C, OC);
    be->matmul_backward(be, dx, dw, bias ? db : NULL, R, x, w, N, C, OC);
    double *xd = to_double(x, nx), *wd = to_double(w, nw), *bd = to_double(b, OC), *Rd = to_double(R, no);
    double *outd = malloc(no * 8);
    MmCtx c = {N, C, OC, wd, bias ? bd : NULL, xd, Rd, 0};
    mm_ref(&c, xd, wd, bias ? bd : NULL, outd);
    char what[64];
    snprintf(what, sizeof what, "matmul %dx%dx%d fwd", N, C, OC);
    EXPECT_CLOSE_ARR(out, outd, no, 1.0, 1e-5, what);
    double *g = malloc(MAX(nx, nw) * 8);
    c.which = 0; finite_diff(mm_loss, &c, xd, nx, g);
    snprintf(what, sizeof what, "matmul %dx%dx%d dinp", N, C, OC);
    EXPECT_CLOSE_ARR(dx, g, nx, 1.0, 1e-4, what);
    c.which = 1; finite_diff(mm_loss, &c, wd, nw, g);
    for (size_t i = 0; i < nw; i++) dw[i] -= dw0[i];
    snprintf(what, sizeof what, "matmul %dx%dx%d dweight", N, C, OC);
    EXPECT_CLOSE_ARR(dw, g, nw, 1.0, 1e-4, what);
    if (bias) {
        c.which = 2; finite_diff(mm_loss, &c, bd, OC, g);
        for (int i = 0; i < OC; i++) db[i] -= db0[i];
        snprintf(what, sizeof what, "matmul %dx%dx%d dbias", N, C, OC);
        EXPECT_CLOSE_ARR(db, g, OC, 1.0, 1e-4, what);
    }
    free(x); free(w); free(b); free(out); free(R); free(dx); free(dw); free(db); free(dw0); free(db0);
    free(xd); free(wd); free(bd); free(Rd); free(outd); free(g);
}
/* the blocked GEMM itself against a plain double loop: shapes past every block size (MC 72, NC 256, KC 256)
 * with remainders, A and B read by rows or down columns, accumulate / overwrite / overwrite with bias, on the
 * pool and on one thread (gemm_serial) */
static void test_gemm_blocks(void) {
    static const int shapes[][3] = {{151, 270, 300}, {7, 17, 513}, {80, 33, 1}, {6, 16, 256}, {73, 257, 20}};
    CpuBackend *cb = cpu_of(be);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)K * N * 4), *bias = malloc((size_t)N * 4);
        float *C = malloc((size_t)M * N * 4), *C0 = malloc((size_t)M * N * 4);
        double *want = malloc((size_t)M * N * 8);
        fill_rand(A, (size_t)M * K, 60 + s, 1); fill_rand(B, (size_t)K * N, 70 + s, 1); fill_rand(bias, N, 80 + s, 1);
        fill_rand(C0, (size_t)M * N, 90 + s, 1);
        for (int mode = 0; mode < 12; mode++) {
            int ta = mode & 1, tb = (mode >> 1) & 1, init = mode >> 2; /* init 0: +=, 1: =, 2: = bias + */
            size_t ars = ta ? 1 : (size_t)K, acs = ta ? (size_t)M : 1, brs = tb ? 1 : (size_t)N, bcs = tb ? (size_t)K : 1;
            for (int serial = 0; serial < 2; serial++) {
                if (serial && init == 2) continue; /* gemm_serial has no bias */
                memcpy(C, C0, (size_t)M * N * 4);
                if (serial) gemm_serial(cb, 0, M, N, K, A, ars, acs, B, brs, bcs, C, (size_t)N, init > 0, GEMM_DENSE, 0);
                else gemm(cb, M, N, K, A, ars, acs, B, brs, bcs, C, (size_t)N, init > 0, init == 2 ? bias : NULL);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double acc = init == 0 ? C0[(size_t)i * N + j] : init == 2 ? bias[j] : 0.0;
                        for (int k = 0; k < K; k++) acc += (double)A[i * ars + k * acs] * B[k * brs + j * bcs];
                        want[(size_t)i * N + j] = acc;
                    }
                char what[96];
                snprintf(what, sizeof what, "gemm %dx%dx%d A%s B%s %s%s", M, N, K, ta ? "^T" : "", tb ? "^T" : "",
                         init == 0 ? "+=" : init == 1 ? "=" : "= bias +", serial ? " serial" : "");
                EXPECT_CLOSE_ARR(C, want, (size_t)M * N, 1.0, 2e-6 * sqrt((double)K), what);
            }
        }
        free(A); free(B); free(bias); free(C); free(C0); free(want);
    }
}

/* the matmul forward of a few rows (generation) dots each weight row with the inputs in place (gemv): every
 * count of rows up to CPU_GEMV_MAX_ROWS (groups of four and their remainders), widths with and without a tail
 * past 16 and 8 columns, with and without bias, against a plain double loop */
static void test_gemv(void) {
    static const int widths[] = {768, 520, 37, 3};
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
        for (int N = 1; N <= CPU_GEMV_MAX_ROWS; N++)
            for (int bias = 0; bias < 2; bias++) {
                int C = widths[wi], OC = 67;
                float *x = malloc((size_t)N * C * 4), *w = malloc((size_t)OC * C * 4), *b = malloc((size_t)OC * 4), *out = malloc((size_t)N * OC * 4);
                double *want = malloc((size_t)N * OC * 8);
                fill_rand(x, (size_t)N * C, 200 + N, 1); fill_rand(w, (size_t)OC * C, 300 + wi, 1); fill_rand(b, OC, 400, 1);
                for (int i = 0; i < N * OC; i++) out[i] = NAN; /* every output must be written */
                be->matmul_forward(be, out, x, w, bias ? b : NULL, N, C, OC);
                for (int i = 0; i < N; i++)
                    for (int o = 0; o < OC; o++) {
                        double acc = bias ? b[o] : 0.0;
                        for (int k = 0; k < C; k++) acc += (double)x[(size_t)i * C + k] * w[(size_t)o * C + k];
                        want[(size_t)i * OC + o] = acc;
                    }
                char what[64];
                snprintf(what, sizeof what, "gemv %dx%dx%d%s", N, C, OC, bias ? " + bias" : "");
                EXPECT_CLOSE_ARR(out, want, (size_t)N * OC, 1.0, 2e-6 * sqrt((double)C), what);
                free(x); free(w); free(b); free(out); free(want);
            }
}

/* the bias gradient is summed while dout^T is packed for the weight gradient: over several depth (tokens),
 * column and row blocks, and with one output (dout^T read in place) it must be the float sum of dout's rows
 * added in token order to what was there, bit for bit */
static void test_matmul_dbias_blocks(void) {
    static const int shapes[][3] = {{600, 270, 80}, {300, 20, 1}};
    for (size_t s = 0; s < 2; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *x = malloc((size_t)N * C * 4), *w = malloc((size_t)OC * C * 4), *dout = malloc((size_t)N * OC * 4);
        float *dx = malloc((size_t)N * C * 4), *dw = malloc((size_t)OC * C * 4), *db = malloc((size_t)OC * 4), *want = malloc((size_t)OC * 4);
        fill_rand(x, (size_t)N * C, 11, 1); fill_rand(w, (size_t)OC * C, 12, 1); fill_rand(dout, (size_t)N * OC, 13, 1);
        fill_rand(dw, (size_t)OC * C, 14, 1); fill_rand(db, OC, 15, 1);
        memcpy(want, db, (size_t)OC * 4);
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) want[o] += dout[(size_t)i * OC + o];
        be->matmul_backward(be, dx, dw, db, dout, x, w, N, C, OC);
        CHECK(memcmp(db, want, (size_t)OC * 4) == 0, "dbias of %dx%dx%d differs from the in-order sum (first: %.9g vs %.9g)", N, C, OC,
              (double)db[0], (double)want[0]);
        free(x); free(w); free(dout); free(dx); free(dw); free(db); free(want);
    }
}

/* each backward product alone (dinp or dw NULL, as bench --kernels times them): the same bits as the pair */
static void test_matmul_backward_products_alone(void) {
    int N = 70, C = 33, OC = 50;
    size_t nx = (size_t)N * C, nw = (size_t)OC * C, ny = (size_t)N * OC;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dout = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = calloc(OC, 4);
    float *dx1 = malloc(nx * 4), *dw1 = malloc(nw * 4);
    fill_rand(x, nx, 21, 1); fill_rand(w, nw, 22, 1); fill_rand(dout, ny, 23, 1); fill_rand(dw, nw, 24, 1);
    memcpy(dw1, dw, nw * 4);
    be->matmul_backward(be, dx, dw, db, dout, x, w, N, C, OC);
    fill_rand(dx1, nx, 25, 1);
    be->matmul_backward(be, dx1, NULL, NULL, dout, x, w, N, C, OC);
    CHECK(!memcmp(dx, dx1, nx * 4), "dinp alone differs from dinp with dw");
    be->matmul_backward(be, NULL, dw1, NULL, dout, x, w, N, C, OC);
    CHECK(!memcmp(dw, dw1, nw * 4), "dw alone differs from dw with dinp");
    float *db1 = calloc(OC, 4);
    be->matmul_backward(be, dx1, NULL, db1, dout, x, w, N, C, OC);
    CHECK(!memcmp(db, db1, (size_t)OC * 4), "dbias without dw differs from dbias with it");
    free(db1);
    free(x); free(w); free(dout); free(dx); free(dw); free(db); free(dx1); free(dw1);
}

static void test_matmul(void) {
    check_matmul(12, 8, 16, 1);   /* exact tiles */
    check_matmul(13, 7, 19, 1);   /* edges everywhere */
    check_matmul(40, 33, 50, 0);  /* several tiles, no bias */
    check_matmul(7, 300, 5, 1);   /* K beyond one panel (256) */
    check_matmul(9, 5, 1, 1);     /* one output: dout^T read in place, its rows summed there */
}

/* ---------------------------------------------------------------- layernorm */
typedef struct { int N, C; const double *x, *w, *b, *R; int which; } LnCtx;
static double ln_ref(const LnCtx *c, const double *x, const double *w, const double *b, double *out) {
    double L = 0;
    for (int i = 0; i < c->N; i++) {
        const double *r = x + (size_t)i * c->C;
        double m = 0, v = 0;
        for (int k = 0; k < c->C; k++) m += r[k];
        m /= c->C;
        for (int k = 0; k < c->C; k++) v += (r[k] - m) * (r[k] - m);
        v /= c->C;
        double s = 1 / sqrt(v + 1e-5);
        for (int k = 0; k < c->C; k++) {
            double y = (r[k] - m) * s * w[k] + (b ? b[k] : 0);
            if (out) out[(size_t)i * c->C + k] = y;
            L += y * c->R[(size_t)i * c->C + k];
        }
    }
    return L;
}
static double ln_loss(void *p, const double *v) {
    LnCtx *c = (LnCtx *)p;
    return ln_ref(c, c->which == 0 ? v : c->x, c->which == 1 ? v : c->w, c->which == 2 ? v : c->b, NULL);
}
static void check_layernorm(int N, int C, int bias) {
    size_t n = (size_t)N * C;
    float *x = malloc(n * 4), *w = malloc(C * 4), *b = malloc(C * 4), *out = malloc(n * 4), *R = malloc(n * 4);
    float *dx = malloc(n * 4), *dw = calloc(C, 4), *db = calloc(C, 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    fill_rand(x, n, 11, 2); fill_rand(w, C, 12, 1); fill_rand(b, C, 13, 1); fill_rand(R, n, 14, 1);
    for (int k = 0; k < C; k++) x[k] += 3.0f; /* a row with a large mean */
    fill_rand(dx, n, 15, 1);                  /* dinp accumulates */
    float *dx0 = malloc(n * 4);
    memcpy(dx0, dx, n * 4);
    be->layernorm_forward(be, out, mean, rstd, x, w, bias ? b : NULL, N, C);
    be->layernorm_backward(be, dx, dw, bias ? db : NULL, R, x, w, mean, rstd, N, C);
    for (size_t i = 0; i < n; i++) dx[i] -= dx0[i];
    double *xd = to_double(x, n), *wd = to_double(w, C), *bd = to_double(b, C), *Rd = to_double(R, n), *outd = malloc(n * 8), *g = malloc(n * 8);
    LnCtx c = {N, C, xd, wd, bias ? bd : NULL, Rd, 0};
    ln_ref(&c, xd, wd, c.b, outd);
    EXPECT_CLOSE_ARR(out, outd, n, 1.0, 1e-5, "layernorm fwd");
    finite_diff(ln_loss, &c, xd, n, g);
    EXPECT_CLOSE_ARR(dx, g, n, 1.0, 1e-4, "layernorm dinp");
    c.which = 1; finite_diff(ln_loss, &c, wd, C, g);
    EXPECT_CLOSE_ARR(dw, g, C, 1.0, 1e-4, "layernorm dweight");
    if (bias) { c.which = 2; finite_diff(ln_loss, &c, bd, C, g); EXPECT_CLOSE_ARR(db, g, C, 1.0, 1e-4, "layernorm dbias"); }
    free(x); free(w); free(b); free(out); free(R); free(dx); free(dw); free(db); free(mean); free(rstd); free(dx0);
    free(xd); free(wd); free(bd); free(Rd); free(outd); free(g);
}
static void test_layernorm(void) {
    check_layernorm(5, 24, 1);
    check_layernorm(70, 9, 0); /* more rows than the threaded path's threshold */
}

/* C past 32768: LayerNorm's backward keeps its one group's partial sums in the op region of a backend sized
 * for that C (not in the shared panels, which hold 65536 floats); checked against the formulas in double */
static void test_layernorm_wide(void) {
    enum { N = 3, C = 40000 };
    CHECK((size_t)ln_backward_groups(N, C) * 2 * C > CPU_GEMM_B_FLOATS, "C %d fits the shared panels: not the wide path", C);
    ngpt_backend *wb;
    char err[256];
    if (ngpt_cpu_backend_create(&wb, 2, err, sizeof err)) { CHECK(0, "%s", err); return; }
    ngpt_shape shape = {1, N, C, 1, 1, 64, N};
    size_t sb = wb->scratch_bytes(wb, &shape);
    void *scratch = malloc(sb);
    wb->set_scratch(wb, scratch, sb);
    size_t n = (size_t)N * C;
    float *x = malloc(n * 4), *w = malloc(C * 4), *b = malloc(C * 4), *out = malloc(n * 4), *dy = malloc(n * 4);
    float *dx = calloc(n, 4), *dw = calloc(C, 4), *db = calloc(C, 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    fill_rand(x, n, 21, 2); fill_rand(w, C, 22, 1); fill_rand(b, C, 23, 1); fill_rand(dy, n, 24, 1);
    wb->layernorm_forward(wb, out, mean, rstd, x, w, b, N, C);
    wb->layernorm_backward(wb, dx, dw, db, dy, x, w, mean, rstd, N, C);
    double *wdw = calloc(C, 8), *wdb = calloc(C, 8), *wdx = malloc(n * 8);
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *gi = dy + (size_t)i * C;
        double m = 0, v = 0, s1 = 0, s2 = 0;
        for (int c = 0; c < C; c++) m += xi[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (xi[c] - m) * (xi[c] - m);
        double r = 1.0 / sqrt(v / C + 1e-5);
        for (int c = 0; c < C; c++) { double nc = (xi[c] - m) * r, dn = (double)w[c] * gi[c]; s1 += dn; s2 += dn * nc; }
        for (int c = 0; c < C; c++) {
            double nc = (xi[c] - m) * r, dn = (double)w[c] * gi[c];
            wdx[(size_t)i * C + c] = (dn - s1 / C - nc * s2 / C) * r;
            wdw[c] += gi[c] * nc;
            wdb[c] += gi[c];
        }
    }
    EXPECT_CLOSE_ARR(dx, wdx, n, 1.0, 1e-4, "wide layernorm dinp");
    EXPECT_CLOSE_ARR(dw, wdw, C, 1.0, 1e-4, "wide layernorm dweight");
    EXPECT_CLOSE_ARR(db, wdb, C, 1.0, 1e-5, "wide layernorm dbias");
    free(x); free(w); free(b); free(out); free(dy); free(dx); free(dw); free(db); free(mean); free(rstd);
    free(wdw); free(wdb); free(wdx); free(scratch);
    wb->destroy(wb);
}

/* ---------------------------------------------------------------- attention */
typedef struct { int B, T, C, NH; const double *R; ngpt_dropout drop; } AtCtx;
static double at_ref(const AtCtx *c, const double *qkv, double *out, double *lse) {
    int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = C / NH;
    double L = 0, scale = 1 / sqrt((double)hs);
    double *s = malloc((size_t)T * 8);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double mx = -1e300, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const double *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
                    double d = 0;
                    for (int i = 0; i < hs; i++) d += q[i] * k[i];
                    s[t2] = d * scale;
                    mx = fmax(mx, s[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(s[t2] - mx);
                if (lse) lse[((size_t)b * NH + h) * T + t] = mx + log(sum);
                for (int i = 0; i < hs; i++) {
                    double y = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double p = exp(s[t2] - mx) / sum;
                        if (c->drop.p > 0) {
                            size_t idx = (((size_t)b * NH + h) * T + t) * T + t2;
                            p *= ngpt_uniform(c->drop.seed, c->drop.stream, c->drop.offset + idx) >= c->drop.p ? 1 / (1 - (double)c->drop.p) : 0;
                        }
                        y += p * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
                    }
                    if (out) out[((size_t)b * T + t) * C + h * hs + i] = y;
                    L += y * c->R[((size_t)b * T + t) * C + h * hs + i];
                }
            }
    free(s);
    return L;
}
static double at_loss(void *p, const double *v) { return at_ref((AtCtx *)p, v, NULL, NULL); }
static void check_attention(int B, int T, int C, int NH, float p) {
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(nq * 4), *out = malloc(no * 4), *lse = malloc(nl * 4), *R = malloc(no * 4), *dqkv = malloc(nq * 4);
    fill_rand(qkv, nq, 21, 1); fill_rand(R, no, 22, 1);
    for (size_t i = 0; i < nq; i++) dqkv[i] = NAN;
    ngpt_dropout d = {p, 7, 99, 1000};
    be->attention_forward(be, out, lse, qkv, B, T, C, NH, &d);
    be->attention_backward(be, dqkv, R, qkv, out, lse, B, T, C, NH, &d);
    double *qd = to_double(qkv, nq), *Rd = to_double(R, no), *outd = malloc(no * 8), *lsed = malloc(nl * 8), *g = malloc(nq * 8);
    AtCtx c = {B, T, C, NH, Rd, d};
    at_ref(&c, qd, outd, lsed);
    char what[80];
    snprintf(what, sizeof what, "attention B%d T%d C%d NH%d p%.1f fwd", B, T, C, NH, (double)p);
    EXPECT_CLOSE_ARR(out, outd, no, 1.0, 1e-5, what);
    EXPECT_CLOSE_ARR(lse, lsed, nl, 1.0, 1e-5, "attention lse");
    finite_diff(at_loss, &c, qd, nq, g);
    snprintf(what, sizeof what, "attention B%d T%d C%d NH%d p%.1f dqkv", B, T, C, NH, (double)p);
    EXPECT_CLOSE_ARR(dqkv, g, nq, 1.0, 1e-4, what);
    free(qkv); free(out); free(lse); free(R); free(dqkv); free(qd); free(Rd); free(outd); free(lsed); free(g);
}
static void test_attention(void) {
    check_attention(2, 5, 8, 2, 0.0f);
    check_attention(1, 9, 12, 3, 0.0f);
    check_attention(2, 6, 8, 2, 0.3f); /* attention dropout, mask regenerated in backward */
    check_attention(1, 70, 8, 2, 0.0f); /* three query blocks (CPU_ATTN_QB 32), the last partial */
    check_attention(1, 40, 16, 2, 0.2f); /* dropout across query blocks */
    check_attention(1, 49, 8, 2, 0.0f); /* the last block's last row tile ends on a 16-key panel: the causal skip's edge */
}

/* ---------------------------------------------------------------- elementwise */
typedef struct { size_t n; const double *R; int op; ngpt_dropout drop; } ElCtx;
static double gelu_d(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double el_loss(void *p, const double *x) {
    ElCtx *c = (ElCtx *)p;
    double L = 0;
    for (size_t i = 0; i < c->n; i++) {
        double y = c->op == 0 ? gelu_d(x[i])
                 : ngpt_uniform(c->drop.seed, c->drop.stream, c->drop.offset + i) >= c->drop.p ? x[i] / (1 - (double)c->drop.p) : 0;
        L += y * c->R[i];
    }
    return L;
}
static void test_gelu(void) {
    size_t n = 257;
    float *x = malloc(n * 4), *y = malloc(n * 4), *R = malloc(n * 4), *dx = malloc(n * 4);
    fill_rand(x, n, 31, 2.5f); fill_rand(R, n, 32, 1);
    be->gelu_forward(be, y, x, n);
    memcpy(dx, R, n * 4);
    be->gelu_backward(be, dx, x, dx, n); /* in place on dout, as the graph uses it */
    double *xd = to_double(x, n), *Rd = to_double(R, n), *yd = malloc(n * 8), *g = malloc(n * 8);
    for (size_t i = 0; i < n; i++) yd[i] = gelu_d(xd[i]);
    EXPECT_CLOSE_ARR(y, yd, n, 1.0, 1e-6, "gelu fwd");
    ElCtx c = {n, Rd, 0, {0, 0, 0, 0}};
    finite_diff(el_loss, &c, xd, n, g);
    EXPECT_CLOSE_ARR(dx, g, n, 1.0, 1e-5, "gelu bwd");
    free(x); free(y); free(R); free(dx); free(xd); free(Rd); free(yd); free(g);
}
static void test_dropout(void) {
    size_t n = 100000;
    float *x = malloc(n * 4), *y = malloc(n * 4), *y2 = malloc(n * 4);
    fill_rand(x, n, 41, 1);
    ngpt_dropout d = {0.2f, 5, 6, 0};
    be->dropout(be, y, x, n, &d);
    be->dropout(be, y2, x, n, &d);
    size_t zeros = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] == 0) zeros++;
        else if (fabsf(y[i] - x[i] / 0.8f) > 1e-6f * fabsf(x[i])) bad++;
        if (y[i] != y2[i]) bad++;
    }
    CHECK(bad == 0, "dropout: %zu elements neither dropped nor scaled by 1/(1-p), or not reproducible", bad);
    double frac = (double)zeros / n;
    CHECK(fabs(frac - 0.2) < 0.01, "dropout: dropped fraction %.4f, expected 0.2", frac);
    d.stream = 7;
    be->dropout(be, y2, x, n, &d);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += (y[i] == 0) == (y2[i] == 0);
    CHECK(same < n * 0.75, "dropout: another stream gives the same mask (%zu of %zu agree)", same, n);
    /* backward is the same masked scaling: finite differences of the double reference */
    size_t m = 50;
    float *R = malloc(m * 4), *dx = malloc(m * 4);
    fill_rand(R, m, 42, 1);
    be->dropout(be, dx, R, m, &d);
    double *xd = to_double(x, m), *Rd = to_double(R, m), *g = malloc(m * 8);
    ElCtx c = {m, Rd, 1, d};
    finite_diff(el_loss, &c, xd, m, g);
    EXPECT_CLOSE_ARR(dx, g, m, 1.0, 1e-6, "dropout bwd");
    free(x); free(y); free(y2); free(R); free(dx); free(xd); free(Rd); free(g);
}
static void test_residual(void) {
    float a[37], b[37], o[37];
    fill_rand(a, 37, 51, 1); fill_rand(b, 37, 52, 1);
    be->residual_forward(be, o, a, b, 37);
    int bad = 0;
    for (int i = 0; i < 37; i++) bad += o[i] != a[i] + b[i];
    CHECK(!bad, "residual: %d wrong sums", bad);
}

/* ---------------------------------------------------------------- embeddings */
static void test_encoder(void) {
    int B = 3, T = 5, C = 7, Vp = 64, V = 11;
    int32_t tok[15];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)(ngpt_hash(1, 2, (uint64_t)i) % (uint32_t)V);
    tok[3] = tok[9] = tok[14] = 4; /* repeated ids land in one bucket */
    float *wte = malloc((size_t)Vp * C * 4), *wpe = malloc((size_t)T * C * 4), *out = malloc((size_t)B * T * C * 4);
    float *R = malloc((size_t)B * T * C * 4), *dwte = calloc((size_t)Vp * C, 4), *dwpe = calloc((size_t)T * C, 4);
    fill_rand(wte, (size_t)Vp * C, 61, 1); fill_rand(wpe, (size_t)T * C, 62, 1); fill_rand(R, (size_t)B * T * C, 63, 1);
    be->encoder_forward(be, out, tok, wte, wpe, B, T, C);
    int bad = 0;
    for (int i = 0; i < B * T; i++)
        for (int c = 0; c < C; c++) bad += out[i * C + c] != wte[tok[i] * C + c] + wpe[(i % T) * C + c];
    CHECK(!bad, "encoder forward: %d wrong values", bad);
    /* buckets as the graph builds them */
    int32_t buckets[2 * 15 + 2], counts[64] = {0};
    ngpt_trainer fake;
    memset(&fake, 0, sizeof fake);
    fake.h_counts = counts;
    int nbuckets = bucketize(&fake, tok, B * T, buckets);
    int zero_counts = 1;
    for (int i = 0; i < 64; i++) zero_counts &= counts[i] == 0;
    CHECK(zero_counts, "bucketize left the counts dirty");
    be->encoder_backward(be, dwte, dwpe, R, tok, buckets, buckets + B * T + 1, nbuckets, B, T, C);
    double *wd = calloc((size_t)Vp * C, 8), *pd = calloc((size_t)T * C, 8);
    for (int i = 0; i < B * T; i++)
        for (int c = 0; c < C; c++) { wd[tok[i] * C + c] += R[i * C + c]; pd[(i % T) * C + c] += R[i * C + c]; }
    EXPECT_CLOSE_ARR(dwte, wd, (size_t)Vp * C, 1.0, 1e-6, "encoder dwte");
    EXPECT_CLOSE_ARR(dwpe, pd, (size_t)T * C, 1.0, 1e-6, "encoder dwpe");
    free(wte); free(wpe); free(out); free(R); free(dwte); free(dwpe); free(wd); free(pd);
}

/* ---------------------------------------------------------------- cross-entropy over padded logits */
typedef struct { int N, V, Vp; const int32_t *tg; } XeCtx;
static double xe_loss(void *p, const double *z) {
    XeCtx *c = (XeCtx *)p;
    double L = 0;
    for (int i = 0; i < c->N; i++) {
        const double *r = z + (size_t)i * c->Vp;
        double mx = -1e300, s = 0;
        for (int j = 0; j < c->V; j++) mx = fmax(mx, r[j]);
        for (int j = 0; j < c->V; j++) s += exp(r[j] - mx);
        L += mx + log(s) - r[c->tg[i]];
    }
    return L;
}
static void test_crossentropy(void) {
    int N = 6, V = 37, Vp = 64;
    float *z = malloc((size_t)N * Vp * 4), *losses = malloc(N * 4);
    int32_t tg[6] = {0, 36, 5, 5, 20, 1};
    fill_rand(z, (size_t)N * Vp, 71, 3);
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++) z[i * Vp + j] = 1000; /* padding must not matter */
    double *zd = to_double(z, (size_t)N * Vp), *g = malloc((size_t)N * Vp * 8);
    XeCtx c = {N, V, Vp, tg};
    double want = xe_loss(&c, zd);
    be->crossentropy(be, z, losses, tg, N, V, Vp, 0.5f);
    double got = 0;
    for (int i = 0; i < N; i++) got += losses[i];
    CHECK_CLOSE(got, want, 1e-5, "cross-entropy loss");
    finite_diff(xe_loss, &c, zd, (size_t)N * Vp, g);
    for (size_t i = 0; i < (size_t)N * Vp; i++) g[i] *= 0.5;
    EXPECT_CLOSE_ARR(z, g, (size_t)N * Vp, 1.0, 1e-5, "cross-entropy gradient (padding 0)");
    free(z); free(losses); free(zd); free(g);
}

/* ---------------------------------------------------------------- optimizer */
static void test_adamw_and_norm(void) {
    size_t n = 1000;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    fill_rand(p, n, 81, 1); fill_rand(g, n, 82, 1); fill_rand(m, n, 83, 0.1f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(normal_at(42, 84, i)) * 0.01f;
    double *pd = to_double(p, n), *gd = to_double(g, n), *md = to_double(m, n), *vd = to_double(v, n);
    double bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.95, 3);
    ngpt_adamw h = {1e-2f, 0.9f, 0.95f, (float)(1 - 0.9), (float)(1 - 0.95), (float)bc1, (float)bc2, 1e-8f, 0.1f, 0.5f, NGPT_DTYPE_F32, 0, 0};
    be->adamw(be, p, NULL, g, m, v, n, &h);
    for (size_t i = 0; i < n; i++) { /* torch.optim.AdamW, written out */
        double gi = gd[i] * 0.5;
        pd[i] *= 1 - 1e-2 * 0.1;
        md[i] = 0.9 * md[i] + 0.1 * gi;
        vd[i] = 0.95 * vd[i] + 0.05 * gi * gi;
        pd[i] -= 1e-2 / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + 1e-8);
    }
    EXPECT_CLOSE_ARR(p, pd, n, 1.0, 1e-6, "adamw params");
    EXPECT_CLOSE_ARR(m, md, n, 0.1, 1e-6, "adamw m"); /* floor: the scale of the terms that cancel */
    EXPECT_CLOSE_ARR(v, vd, n, 1e-3, 1e-6, "adamw v");
    /* bf16 moments are the GPU's: the CPU refuses them (status, message) and leaves the parameters be */
    float p_before = p[0];
    h.moments_dtype = NGPT_DTYPE_BF16;
    be->adamw(be, p, NULL, g, m, v, n, &h);
    CHECK(be->status == NGPT_ERR_ARG && strstr(be->msg, "fp32") && p[0] == p_before, "cpu adamw with bf16 moments: status %d, '%s'",
          be->status, be->msg);
    be->status = NGPT_OK; /* sticky: the later cases start clean */
    be->msg[0] = 0;
    size_t big = 300000;
    float *x = malloc(big * 4);
    fill_rand(x, big, 85, 1);
    double want = 0;
    for (size_t i = 0; i < big; i++) want += (double)x[i] * x[i];
    CHECK_CLOSE(be->norm_sq(be, x, big), want, 1e-9, "norm_sq");
    free(p); free(g); free(m); free(v); free(pd); free(gd); free(md); free(vd); free(x);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
/* the trainer's streams for bf16 moments' rounding: one of its own for every (step, tensor), so no element draws
 * the same dice twice (a stream that ignored the step would round some elements always up, others always down) */
static void test_adamw_round_streams(void) {
    enum { STEPS = 4096 };
    uint64_t *s = malloc(sizeof(uint64_t) * STEPS * N_PARAM_TENSORS);
    size_t n = 0;
    for (long long step = 0; step < STEPS; step++)
        for (int t = 0; t < N_PARAM_TENSORS; t++) s[n++] = adamw_round_stream(step * 977 % STEPS + (step & 1 ? 2000000000LL : 0), t);
    qsort(s, n, sizeof s[0], cmp_u64);
    size_t same = 0;
    for (size_t i = 1; i < n; i++) same += s[i] == s[i - 1];
    CHECK(same == 0, "%zu of %zu (step, tensor) pairs share a rounding stream", same, n);
    free(s);
}

static void test_fill_normal(void) {
    size_t n = 200000;
    float *x = malloc(n * 4);
    be->fill_normal(be, x, n, 1.0f, 0.02f, 3, 4);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += x[i]; s2 += ((double)x[i] - 1) * (x[i] - 1); }
    CHECK(fabs(s / n - 1.0) < 1e-3, "fill_normal mean %.5f", s / n);
    CHECK(fabs(sqrt(s2 / n) - 0.02) < 5e-4, "fill_normal std %.5f", sqrt(s2 / n));
    free(x);
}

/* the same bits, or both NaN (which NaN an operation passes on depends on its operand order) */
static int same_float(float a, float b) { return isnan(a) ? isnan(b) : memcmp(&a, &b, sizeof a) == 0; }

/* the vectorisable exp against libm over its whole range, and non-finite inputs: a NaN must come out of exp,
 * GELU and the loss as NaN (the trainer's non-finite guard relies on it), never as a number or as UB */
static void test_fast_math(void) {
    double worst = 0;
    for (int i = 0; i <= 350000; i++) {
        float x = (float)(-87.0 + (double)i * (175.0 / 350000.0)); /* -87 .. 88 exactly */
        double want = exp((double)x), rel = fabs((double)fast_expf(x) - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECK(worst < 3e-7, "fast_expf: max rel error %.3g over [-87, 88]", worst);
    CHECK(isnan(fast_expf(NAN)) && isnan(fast_erff(NAN)), "exp/erf of NaN: %g, %g", (double)fast_expf(NAN), (double)fast_erff(NAN));
    CHECK(fast_expf(-INFINITY) >= 0 && fast_expf(-INFINITY) < 1e-37f && isfinite(fast_expf(INFINITY)), "exp(-inf) %g, exp(inf) %g",
          (double)fast_expf(-INFINITY), (double)fast_expf(INFINITY));
    /* the 8-lane versions the elementwise loops use give the scalar results bit for bit (NaN for NaN) */
    int lane_mismatches = 0;
    for (int i = 0; i < 200000; i += 8) {
        v8f xv, gv, ev, fv;
        for (int j = 0; j < 8; j++) xv[j] = (float)(-100.0 + (double)(i + j) * (200.0 / 200000.0));
        if (i == 0) xv[1] = NAN, xv[2] = INFINITY, xv[3] = -INFINITY, xv[4] = -0.0f, xv[5] = 0.0f;
        v8_exp(&xv, &ev);
        for (int j = 0; j < 8; j++) gv[j] = fast_expf(-xv[j] * xv[j]);
        v8_erf_with_gauss(&xv, &gv, &fv);
        for (int j = 0; j < 8; j++) {
            float e1 = fast_expf(xv[j]), f1 = erf_with_gauss(xv[j], gv[j]), e8 = ev[j], f8 = fv[j];
            lane_mismatches += !same_float(e1, e8) || !same_float(f1, f8);
        }
    }
    CHECK(lane_mismatches == 0, "v8_exp / v8_erf_with_gauss differ from the scalar versions in %d lanes", lane_mismatches);
    float x[16], y[16];
    for (int i = 0; i < 16; i++) x[i] = i == 5 ? NAN : 0.1f * (float)i;
    be->gelu_forward(be, y, x, 16);
    CHECK(isnan(y[5]) && isfinite(y[4]), "gelu of NaN: %g (neighbour %g)", (double)y[5], (double)y[4]);
    enum { V = 70, Vp = 128 };
    float logits[2 * Vp], losses[2];
    int32_t targets[2] = {3, 4};
    for (int i = 0; i < 2 * Vp; i++) logits[i] = 0.01f * (float)(i % 17);
    logits[Vp + 40] = NAN;
    be->crossentropy(be, logits, losses, targets, 2, V, Vp, 0.5f);
    CHECK(isfinite(losses[0]) && isnan(losses[1]), "losses with a NaN logit in row 1: %g, %g", (double)losses[0], (double)losses[1]);
}

int main(void) {
    char err[256];
    if (ngpt_cpu_backend_create(&be, 2, err, sizeof err)) { printf("FAIL setup: %s\n", err); return 1; }
    ngpt_shape s = {4, 512, 512, 4, 1, 64, 64};
    size_t sb = be->scratch_bytes(be, &s);
    void *scratch = malloc(sb);
    be->set_scratch(be, scratch, sb);
    RUN(test_gemm_blocks);
    RUN(test_matmul_dbias_blocks);
    RUN(test_matmul_backward_products_alone);
    RUN(test_layernorm_wide);
    RUN(test_matmul);
    RUN(test_gemv);
    RUN(test_layernorm);
    RUN(test_attention);
    RUN(test_gelu);
    RUN(test_dropout);
    RUN(test_residual);
    RUN(test_encoder);
    RUN(test_crossentropy);
    RUN(test_adamw_and_norm);
    RUN(test_adamw_round_streams);
    RUN(test_fill_normal);
    RUN(test_fast_math);
    be->destroy(be);
    free(scratch);
    return check_summary();
}
