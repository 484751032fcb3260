/* test_bench.c: `nanogpt bench` on the CPU with a small model.
 *  - the matmul peak is measured in the AdamW moments and leaves them zero;
 *  - the timed steps give tokens/s and an MFU between 0 and 1 (the model cannot beat the matmul peak by much);
 *  - the profiled step sees every op category, and its categories add up to no more than the step;
 *  - profiling changes nothing: a profiled step gives the bits an unprofiled one gives;
 *  - the kernel timings cover every matmul shape and attention, and leave the moments zero. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"

static void config(ngpt_config *c) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    c->vocab_size = 97; c->block_size = 32; c->n_layer = 2; c->n_head = 2; c->n_embd = 64; c->bias = 1;
    c->batch_size = 8; c->gradient_accumulation_steps = 2; c->threads = 2; c->max_iters = 100;
}

static ngpt_trainer *make(void) {
    ngpt_config c;
    config(&c);
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1;
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); return NULL; }
    return tr;
}

static void test_bench_numbers(void) {
    ngpt_trainer *tr = make();
    if (!tr) return;
    BenchResult r;
    memset(&r, 0, sizeof r);
    bench_peak(tr, &r);
    CHECK(r.peak_size >= 128 && r.peak_flops > 1e8, "peak: %d x %d, %g FLOP/s", r.peak_size, r.peak_size, r.peak_flops);
    size_t mv = tr->plan.off_region - tr->plan.off_m, nonzero = 0;
    for (size_t i = 0; i < mv; i++) nonzero += tr->m[i] != 0;
    CHECK(nonzero == 0, "%zu bytes of the AdamW moments are not zero after the peak measurement", nonzero);

    CHECK(bench_run(tr, 1, 3, &r) == 0, "bench: %s", tr->err);
    CHECK(r.tokens_per_step == 8 * 2 * 32 && r.tokens_per_second > 0, "tokens/step %g, tokens/s %g", r.tokens_per_step, r.tokens_per_second);
    CHECK(r.mfu > 0 && r.mfu < 1.5, "MFU %g", r.mfu);
    double sum = 0;
    for (int c = 0; c < N_PROF; c++) {
        CHECK(r.op_seconds[c] > 0, "category %s: %g s", prof_names[c], r.op_seconds[c]);
        sum += r.op_seconds[c];
    }
    CHECK(sum <= r.profiled_step_seconds, "categories %g s > the step %g s", sum, r.profiled_step_seconds);
    CHECK(r.arena_bytes > 0 && r.memory_in_use > 0, "arena %g, resident %g", r.arena_bytes, r.memory_in_use);
    ngpt_trainer_free(tr);
}

static void test_profiling_changes_nothing(void) {
    ngpt_trainer *a = make(), *b = make();
    if (!a || !b) return;
    Rng ra = {7, 1, 0}, rb = {7, 1, 0};
    float la[3], lb[3];
    for (int i = 0; i < 3; i++) {
        CHECK(train_step_with(a, fill_random_tokens, &ra, &la[i]) == 0, "%s", a->err);
        ProfBackend prof;
        ngpt_backend *real = b->be;
        int profiled = i == 1;
        if (profiled) {
            prof_wrap(&prof, real, pt(b, b->params, P_WTE, 0));
            b->be = &prof.be;
        }
        CHECK(train_step_with(b, fill_random_tokens, &rb, &lb[i]) == 0, "%s", b->err);
        b->be = real;
        CHECK(!memcmp(&la[i], &lb[i], sizeof la[i]), "step %d%s: loss %.9g vs %.9g", i, profiled ? " (profiled)" : "", (double)la[i],
              (double)lb[i]);
    }
    CHECK(!memcmp(a->params, b->params, a->plan.nparams * sizeof(float)), "parameters differ after a profiled step");
    ngpt_trainer_free(a);
    ngpt_trainer_free(b);
}

static void test_kernel_timings(void) {
    ngpt_trainer *tr = make();
    if (!tr) return;
    KernelTime kt[N_KERNEL_TIMES];
    int n = bench_kernels(tr, kt);
    CHECK(n == N_KERNEL_TIMES, "%d kernel timings, expected %d", n, N_KERNEL_TIMES);
    for (int i = 0; i < n; i++) CHECK(kt[i].seconds > 0 && kt[i].flops > 0, "%s: %g s, %g FLOP", kt[i].name, kt[i].seconds, kt[i].flops);
    CHECK(!strcmp(kt[8].name, "matmul classifier chunk fwd") && !strcmp(kt[11].name, "attention bwd"), "names: %s, %s", kt[8].name, kt[11].name);
    size_t mv = tr->plan.off_region - tr->plan.off_m, nonzero = 0;
    for (size_t i = 0; i < mv; i++) nonzero += tr->m[i] != 0;
    CHECK(nonzero == 0, "%zu bytes of the AdamW moments are not zero after the kernel timings", nonzero);
    ngpt_trainer_free(tr);
}

int main(void) {
    RUN(test_bench_numbers);
    RUN(test_profiling_changes_nothing);
    RUN(test_kernel_timings);
    return check_summary();
}
