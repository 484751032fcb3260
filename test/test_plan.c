/* test_plan.c: the memory planner.
 *  - sizes against values computed independently (published parameter counts, hand formulas);
 *  - a property test over random configs and budgets: aligned, disjoint, each buffer holding what its users
 *    write (worked out from the users), within budget, tokens per step kept, the largest micro-batch chosen
 *    on the CPU and the one the speed model rates fastest on a GPU (by brute force), or there one above
 *    batch_size by plan_grow_micro_batch's rule (by brute force too), and a refusal only when
 *    the smallest plan truly does not fit;
 *  - the seed scenario: GPT-2 124M, 64 x 1024 tokens per step, in 2.68 GiB;
 *  - sampling plans: no gradients or moments, the largest forward that fits (GPT-2 XL sampled in 12 GiB);
 *  - training with different forced micro-batches, some above batch_size, gives the same losses;
 *  - a failing allocation is a clear error. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include <sys/resource.h>
#include <sys/wait.h>

static ModelShape gpt2_shape(int L, int NH, int C, int bias) {
    ModelShape m = {L, NH, C, 50257, 50304, 1024, bias};
    return m;
}

static PlanRequest request(ModelShape m, int T, int batch, int accum, int dtype, int device, double budget) {
    PlanRequest r;
    memset(&r, 0, sizeof r);
    r.m = m; r.T = T; r.batch_size = batch; r.grad_accum = accum; r.dtype = dtype; r.device = device;
    r.nthreads = 2; r.budget = budget; r.pin_recompute = -1; r.eval_seqs = (long long)batch * 200;
    return r;
}

static void test_parameter_counts(void) {
    size_t sizes[N_PARAM_TENSORS];
    ModelShape m = gpt2_shape(12, 12, 768, 1);
    /* llm.c prints num_parameters: 124475904 for GPT-2 124M with the padded vocabulary; Hugging Face's
     * gpt2 has 124439808 = that minus 47 padding rows of 768 */
    CHECK(param_sizes(&m, sizes) == 124475904, "GPT-2 124M: %zu", param_sizes(&m, sizes));
    m = gpt2_shape(24, 16, 1024, 1);
    CHECK(param_sizes(&m, sizes) == 354823168 + 47 * 1024, "GPT-2 350M: %zu", param_sizes(&m, sizes));
    /* nanoGPT's bias=False drops 2 LN biases, qkv, proj, fc, fcproj biases per layer and the final LN bias */
    m = gpt2_shape(12, 12, 768, 0);
    size_t biases = 12 * (768 + 768 + 3 * 768 + 768 + 4 * 768 + 768) + 768;
    CHECK(param_sizes(&m, sizes) == 124475904 - biases, "GPT-2 124M without biases: %zu", param_sizes(&m, sizes));
    ModelShape tiny = {2, 2, 32, 37, 64, 16, 1};
    size_t want = 64 * 32 + 16 * 32 + 2 * (32 + 32 + 96 * 32 + 96 + 32 * 32 + 32 + 32 + 32 + 128 * 32 + 128 + 32 * 128 + 32) + 32 + 32;
    CHECK(param_sizes(&tiny, sizes) == want, "tiny: %zu want %zu", param_sizes(&tiny, sizes), want);
}

/* bytes of the training activations for micro-batch B, from the model's definition rather than the
 * layout code: what backward needs of each layer */
static double activation_bytes_by_hand(const ModelShape *m, int B, int T, int recompute, size_t act) {
    double BT = (double)B * T, C = m->C, L = m->L;
    double per_layer = BT * C * act          /* residual stream after the block */
                     + BT * C * act          /* residual after attention */
                     + 2 * 2 * BT * 4        /* LayerNorm mean and rstd, twice */
                     + BT * 3 * C * act      /* qkv */
                     + BT * C * act          /* attention output */
                     + (double)B * m->NH * T * 4 /* log-sum-exp */
                     + BT * 4 * C * act;     /* fc pre-activation */
    double kept = L * per_layer + BT * C * act; /* + the embedding output (residual 0) */
    if (recompute >= RECOMPUTE_LAYERS) /* the residual stream of every layer, and the rest of one layer */
        kept = (L + 1) * BT * C * act + (per_layer - BT * C * act);
    double ln = BT * C * act, gelu = BT * 4 * C * act;
    kept += (recompute >= RECOMPUTE_GELU_LN ? 2 : 2 * L) * ln;
    kept += (recompute >= RECOMPUTE_GELU ? 1 : L) * gelu;
    kept += BT * C * act + 2 * BT * 4; /* final LayerNorm output and stats */
    return kept;
}

static void test_sizes_by_category(void) {
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    for (int rc = 0; rc <= 3; rc++) {
        PlanRequest r = request(m, 1024, 8, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 1e15);
        r.pin_recompute = rc;
        Plan p;
        char err[NGPT_ERRLEN];
        CHECK(plan_make(&p, &r, err, sizeof err) == 0, "%s", err);
        double np = (double)p.nparams;
        /* alignment gaps: at most 64 elements per tensor, 256 bytes per buffer */
        CHECK(p.cat_bytes[CAT_PARAMS] >= 2 * np && p.cat_bytes[CAT_PARAMS] <= 2 * (np + 64 * 16) + 256, "params bytes");
        CHECK(p.cat_bytes[CAT_GRADS] == p.cat_bytes[CAT_PARAMS], "grads bytes");
        CHECK(p.cat_bytes[CAT_MASTER] >= 4 * np && p.cat_bytes[CAT_MASTER] <= 4 * (np + 64 * 16) + 256, "master bytes");
        CHECK(p.cat_bytes[CAT_MOMENTS] >= 8 * np && p.cat_bytes[CAT_MOMENTS] <= 8 * (np + 64 * 16) + 512, "moments bytes");
        double want = activation_bytes_by_hand(&m, 8, 1024, rc, 2);
        double got = p.cat_bytes[CAT_ACTS];
        CHECK(got >= want && got <= want + 256.0 * N_BATCH_BUFS, "recompute %d: activations %.0f, by hand %.0f", rc, got, want);
        CHECK(p.cat_bytes[CAT_LOGITS] == (double)ALIGN_UP((size_t)p.logits_chunk * 50304 * 2, ARENA_ALIGN), "logits chunk bytes");
        double sum = 0;
        for (int c = 0; c < N_CATS; c++) sum += p.cat_bytes[c];
        CHECK(sum == (double)p.device_bytes, "categories add up to the arena: %.0f vs %zu", sum, p.device_bytes);
    }
    /* CPU fp32: no master copy, 4-byte everything, and the host arena counts against the budget */
    PlanRequest r = request(m, 256, 4, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    Plan p;
    char err[NGPT_ERRLEN];
    CHECK(plan_make(&p, &r, err, sizeof err) == 0, "%s", err);
    CHECK(p.cat_bytes[CAT_MASTER] == 0 && p.cat_bytes[CAT_PARAMS] >= 4.0 * p.nparams, "cpu fp32 layout");
}

/* every buffer of every lane of a layout aligned, inside the region, and disjoint from every other */
static int layout_ok(const BatchLayout *lay, size_t region, char *why, size_t n) {
    enum { MAXB = N_BATCH_BUFS * CPU_LANES };
    size_t lo[MAXB], hi[MAXB];
    int name[MAXB], lane[MAXB], k = 0;
    if (lay->lanes < 1 || lay->lanes > CPU_LANES || lay->lane_B * lay->lanes < lay->B || (lay->lane_B - 1) * lay->lanes >= lay->B) {
        snprintf(why, n, "%d lanes of %d sequences for a micro-batch of %d", lay->lanes, lay->lane_B, lay->B);
        return 0;
    }
    for (int g = 0; g < lay->lanes; g++)
        for (int i = 0; i < N_BATCH_BUFS; i++) {
            if (i == B_SCRATCH && g) continue; /* one for all lanes */
            size_t off = (i == B_SCRATCH ? 0 : (size_t)g * lay->lane_bytes) + lay->off[i], len = lay->slot_bytes[i] * (size_t)lay->slots[i];
            if (off % ARENA_ALIGN || lay->slot_bytes[i] % ARENA_ALIGN) { snprintf(why, n, "%s misaligned", batch_buf_names[i]); return 0; }
            if (off + len > region || off + len > lay->end) { snprintf(why, n, "%s (lane %d) outside the region", batch_buf_names[i], g); return 0; }
            for (int j = 0; j < k; j++)
                if (len && hi[j] > lo[j] && off < hi[j] && lo[j] < off + len) {
                    snprintf(why, n, "%s (lane %d) overlaps %s (lane %d)", batch_buf_names[i], g, batch_buf_names[name[j]], lane[j]);
                    return 0;
                }
            lo[k] = off; hi[k] = off + len; name[k] = i; lane[k] = g; k++;
        }
    return 1;
}

static double plan_bytes(const Plan *p) {
    return p->req.device == DEV_BACKEND_CUDA ? (double)p->device_bytes : (double)(p->device_bytes + p->host_bytes);
}

/* the logits chunk: the default (capped at a lane's rows), or, traded down, the fewest chunks per pass over a
 * lane's rows that fit, each the smallest multiple of CHUNK_STEP rows that makes that count */
static int chunk_largest(const Plan *p, char *why, size_t n) {
    long long rows = (long long)p->train.lane_B * p->req.T;
    int top = (int)MIN((long long)default_chunk(&p->req), rows), c = p->logits_chunk;
    if (p->req.pin_chunk || c == top) return 1;
    long long passes = (rows + c - 1) / c;
    if (c % CHUNK_STEP || c > top) {
        snprintf(why, n, "logits chunk %d: neither the default %d nor a multiple of %d below it", c, top, CHUNK_STEP);
        return 0;
    }
    if (c > CHUNK_STEP && (rows + c - CHUNK_STEP - 1) / (c - CHUNK_STEP) == passes) {
        snprintf(why, n, "logits chunk %d: %d rows make the same %lld chunks of %lld rows", c, c - CHUNK_STEP, passes, rows);
        return 0;
    }
    /* one chunk fewer: the smallest chunk that gives it does not fit */
    if (passes > 1) {
        long long fewer = ((rows + passes - 2) / (passes - 1) + CHUNK_STEP - 1) / CHUNK_STEP * CHUNK_STEP;
        Plan q;
        if (plan_layout(&q, &p->req, p->micro_batch, p->lanes, p->recompute, (int)MIN(fewer, (long long)top), p->moments_dtype) <= p->req.budget) {
            snprintf(why, n, "logits chunk %lld (%lld chunks) would fit but %d (%lld chunks) was chosen", MIN(fewer, (long long)top), passes - 1, c, passes);
            return 0;
        }
    }
    return 1;
}

/* The layers' backward's scratch (use_backward_scratch): on a Hopper, training in 16 bits, the logits chunk's
 * slot and the scratch right after it, room for every head's dS^T tiles (cuda_attn_ds_bytes) after D, and the
 * scratch slot alone what the rest of the step needs; nowhere else. */
static int backward_scratch_ok(const Plan *p, char *why, size_t cap) {
    const PlanRequest *r = &p->req;
    const BatchLayout *t = &p->train;
    ngpt_shape s = {t->lane_B, r->T, r->m.C, r->m.NH, r->m.L, r->m.Vp, p->logits_chunk};
    int want = r->device == DEV_BACKEND_CUDA && r->attn_ds && r->dtype != NGPT_DTYPE_F32 && !r->inference && t->lanes == 1;
    if (p->eval.backward_scratch || (!want && t->backward_scratch) || (want && !t->backward_scratch)) {
        snprintf(why, cap, "backward scratch %zu (eval %zu) where %s", t->backward_scratch, p->eval.backward_scratch,
                 want ? "the layers' backward should have dS^T room" : "nothing should have it");
        return 0;
    }
    if (!want) return 1;
    if (t->off[B_LOGITS] + t->slot_bytes[B_LOGITS] != t->off[B_SCRATCH] || t->backward_scratch != t->slot_bytes[B_LOGITS] + t->slot_bytes[B_SCRATCH]) {
        snprintf(why, cap, "the logits chunk (%zu + %zu) does not end where the scratch (%zu) starts", t->off[B_LOGITS], t->slot_bytes[B_LOGITS],
                 t->off[B_SCRATCH]);
        return 0;
    }
    if (t->backward_scratch < cuda_scratch_bytes(&s, 1) || t->slot_bytes[B_SCRATCH] < cuda_scratch_bytes(&s, 0)) {
        snprintf(why, cap, "backward scratch %zu below %zu, or scratch %zu below %zu", t->backward_scratch, cuda_scratch_bytes(&s, 1),
                 t->slot_bytes[B_SCRATCH], cuda_scratch_bytes(&s, 0));
        return 0;
    }
    return 1;
}

/* Each buffer holds what its users write there, worked out from the users (not from plan_layout's sums): per lane,
 * a micro-batch's tokens, targets and token losses, in training the token buckets (bucketize: N + 1 starts and N
 * positions, uploaded whole) and the logits chunk; the gradients of every lane (lane_grads: copies of lane 0's at
 * its stride) before the fp32 master; on the host, each of the NGPT_FENCES sets (host_set_buffer: a set is a
 * buffer's bytes / NGPT_FENCES) holds the larger of the training and the evaluation micro-batch's tokens,
 * targets and losses, and the buckets of every lane (lane g's at g (2 lane_B T + 2)); the bucket counts one per
 * vocabulary entry; the host buffers in order and apart. */
static int buffers_hold_their_use(const Plan *p, char *why, size_t n) {
    const PlanRequest *r = &p->req;
    const size_t T = (size_t)r->T, np = p->nparams_padded, act = (size_t)p->act_bytes;
    const BatchLayout *lays[2] = {&p->train, &p->eval};
    for (int e = 0; e < 2; e++) {
        const BatchLayout *lay = lays[e];
        size_t rows = (size_t)lay->lane_B * T, chunk = (size_t)(e ? p->eval_chunk : p->logits_chunk);
        const int need_of[4] = {B_TOKENS, B_TARGETS, B_LOSSES, B_LOGITS};
        for (int k = 0; k < 4; k++) {
            size_t need = need_of[k] == B_LOGITS ? chunk * (size_t)r->m.Vp * act : rows * 4;
            if (lay->slot_bytes[need_of[k]] < need) {
                snprintf(why, n, "%s: %s holds %zu bytes of a lane's %zu", e ? "eval" : "training", batch_buf_names[need_of[k]],
                         lay->slot_bytes[need_of[k]], need);
                return 0;
            }
        }
        if (lay->training && lay->slot_bytes[B_BUCKETS] < (2 * rows + 1) * 4) {
            snprintf(why, n, "token buckets hold %zu bytes of a lane's %zu", lay->slot_bytes[B_BUCKETS], (2 * rows + 1) * 4);
            return 0;
        }
    }
    if (!r->inference) {
        size_t stride = p->off_lane_grads - p->off_grads;
        if (stride < np * act || p->off_grads + (size_t)p->lanes * stride > p->off_master) {
            snprintf(why, n, "%d lanes' gradients of %zu bytes each, at a stride of %zu from %zu, pass the fp32 master at %zu", p->lanes,
                     np * act, stride, p->off_grads, p->off_master);
            return 0;
        }
    }
    size_t staged = (size_t)MAX(p->micro_batch, p->eval_micro_batch) * T * 4, buckets = 0;
    for (int g = 0; !r->inference && g < p->train.lanes; g++) {
        size_t seqs = (size_t)MAX(0, MIN(p->train.lane_B, p->micro_batch - g * p->train.lane_B));
        if (seqs) buckets = MAX(buckets, ((size_t)g * (2 * p->train.lane_B * T + 2) + 2 * seqs * T + 1) * 4);
    }
    const size_t per_set[N_HOST_BUFS] = {staged, staged, buckets, 0, staged, 0};
    for (int i = 0; i < N_HOST_BUFS; i++) {
        size_t have = i == H_COUNTS || i == H_STAGING ? p->host_bytes_of[i] : p->host_bytes_of[i] / NGPT_FENCES;
        size_t need = i == H_COUNTS ? (size_t)r->m.V * 4 : i == H_STAGING ? HOST_STAGING_BYTES : per_set[i];
        if (have < need || (i + 1 < N_HOST_BUFS ? p->host_off[i] + p->host_bytes_of[i] > p->host_off[i + 1]
                                                : p->host_off[i] + p->host_bytes_of[i] > p->host_bytes)) {
            snprintf(why, n, "host %s: %zu bytes (a set's) of %zu, or past the next buffer", host_buf_names[i], have, need);
            return 0;
        }
    }
    return 1;
}

/* plan_gpu_speed of micro-batch B at its cheapest trade that fits, as plan_fit_micro_batch's pass 0 tries them
 * (recompute none, GELU, GELU and LayerNorm at the default logits chunk, then with a smaller one; a pinned level
 * alone, at the default chunk then a smaller one); 0 where none fits */
static double speed_at_cheapest(const PlanRequest *r, int B, int moments_dtype) {
    Plan q;
    for (int level = 0; level < 4; level++) {
        int rcl = r->pin_recompute >= 0 ? r->pin_recompute : MIN(level, 2);
        if (r->pin_recompute >= 0 && level > 0 && level < 3) continue;
        int chunk = 0;
        if (level < 3 && plan_layout(&q, r, B, 1, rcl, default_chunk(r), moments_dtype) <= r->budget) chunk = q.logits_chunk;
        else if (level == 3) chunk = plan_fit_smaller_chunk(&q, r, B, 1, rcl, moments_dtype);
        if (chunk) return plan_gpu_speed(r, B, rcl, chunk);
    }
    return 0;
}

static void test_property_random_configs(void) {
    Rng rng = {77, 1, 0};
    int fits = 0, refusals = 0, failures = 0, between = 0, whole_layers = 0, grown = 0;
    for (int it = 0; it < 3000 && failures < 5; it++) {
        int NH = 1 + (int)rng_below(&rng, 8);
        int C = NH * (8 << rng_below(&rng, 4));
        ModelShape m = {1 + (int)rng_below(&rng, 12), NH, C, 0, 0, 0, (int)rng_below(&rng, 2)};
        m.V = 10 + (int)rng_below(&rng, 60000);
        m.Vp = pad_vocab(m.V);
        int T = 1 + (int)rng_below(&rng, 2048);
        m.maxT = T;
        int batch = 1 + (int)rng_below(&rng, 64), accum = 1 + (int)rng_below(&rng, 8);
        int device = (int)rng_below(&rng, 2);
        int dtype = device == DEV_BACKEND_CPU ? NGPT_DTYPE_F32 : (int)rng_below(&rng, 3);
        double budget = exp(log(1e6) + (log(1e11) - log(1e6)) * (double)rng_below(&rng, 1000000) / 1e6);
        PlanRequest r = request(m, T, batch, accum, dtype, device, budget);
        if (rng_below(&rng, 4) == 0) r.pin_recompute = (int)rng_below(&rng, 4);
        static const int sms[4] = {0, 28, 80, 132}; /* unknown (132 assumed), a small card, an A100-class one, an H100 */
        if (device == DEV_BACKEND_CUDA) r.gpu_sms = sms[rng_below(&rng, 4)];
        r.attn_ds = device == DEV_BACKEND_CUDA && (it & 1); /* not drawn: the configs stay those of the seed */
        Plan p;
        char err[NGPT_ERRLEN], why[256];
        int rc = plan_make(&p, &r, err, sizeof err);
        long long seqs = (long long)batch * accum;
        if (rc == NGPT_OK) {
            fits++;
            if (p.logits_chunk > CHUNK_STEP && p.logits_chunk < MIN(default_chunk(&r), p.train.lane_B * T)) between++;
            if (p.recompute == RECOMPUTE_LAYERS && r.pin_recompute < 0) whole_layers++;
            if (p.grown_from) grown++;
            int ok = 1, layers = r.pin_recompute < 0 && p.recompute == RECOMPUTE_LAYERS, gpu = device == DEV_BACKEND_CUDA;
            if (plan_bytes(&p) > budget) { ok = 0; snprintf(why, sizeof why, "%.0f bytes over budget %.0f", plan_bytes(&p), budget); }
            else if ((long long)p.micro_batch * p.grad_accum != seqs) { ok = 0; snprintf(why, sizeof why, "tokens per step changed"); }
            else if (p.micro_batch > batch && !(gpu && p.grown_from == batch)) { ok = 0; snprintf(why, sizeof why, "micro-batch above batch_size"); }
            else if (p.grown_from && (p.micro_batch <= batch || p.passed_micro_batch)) {
                ok = 0; snprintf(why, sizeof why, "grown from %d to %d", p.grown_from, p.micro_batch);
            }
            else if (!layout_ok(&p.train, p.region_bytes, why, sizeof why) || !layout_ok(&p.eval, p.region_bytes, why, sizeof why)) ok = 0;
            else if (p.off_region % ARENA_ALIGN || p.off_grads % ARENA_ALIGN || p.off_m % ARENA_ALIGN || p.off_v % ARENA_ALIGN) {
                ok = 0; snprintf(why, sizeof why, "fixed buffers misaligned");
            } else if (p.eval_micro_batch < p.micro_batch) { ok = 0; snprintf(why, sizeof why, "eval micro-batch below training's"); }
            else if (!chunk_largest(&p, why, sizeof why)) ok = 0;
            else if (!backward_scratch_ok(&p, why, sizeof why)) ok = 0;
            else if (!buffers_hold_their_use(&p, why, sizeof why)) ok = 0;
            else if (!gpu) {
                /* largest: no bigger divisor of the sequences per step fits at any trade; a plan that recomputes
                 * whole layers (unpinned) only where no micro-batch fits without (the cheaper trades at any divisor) */
                for (long long B = layers ? 1 : p.micro_batch + 1; B <= batch && ok; B++) {
                    if (seqs % B) continue;
                    for (int level = 0; level < 5 && ok; level++) {
                        int rcl = r.pin_recompute >= 0 ? r.pin_recompute : level == 4 ? RECOMPUTE_LAYERS : MIN(level, 2);
                        if (level == 4 && (!layers || B <= p.micro_batch)) continue; /* whole layers at a larger micro-batch */
                        Plan q;
                        /* within the chosen moment precision: bf16 moments are the last resort */
                        if (plan_layout(&q, &r, (int)B, 1, rcl, level >= 3 ? CHUNK_STEP : default_chunk(&r), p.moments_dtype) <= budget) {
                            ok = 0;
                            snprintf(why, sizeof why, "micro-batch %lld would fit (recompute %s) but %d (recompute %s) was chosen", B,
                                     recompute_name(rcl), p.micro_batch, recompute_name(p.recompute));
                        }
                    }
                }
            } else if (p.grown_from) {
                /* grown past batch_size: batch_size's plan (its cheapest trade) is what the larger ones were weighed
                 * against, and the micro-batch is the smallest larger divisor rated within GROW_TIE of the fastest */
                double base = speed_at_cheapest(&r, batch, p.moments_dtype), best = 0, mine = plan_gpu_speed(&r, p.micro_batch, p.recompute, p.logits_chunk);
                long long want = 0;
                for (long long B = batch + 1; B <= seqs; B++)
                    if (seqs % B == 0) best = MAX(best, speed_at_cheapest(&r, (int)B, p.moments_dtype));
                for (long long B = batch + 1; B <= seqs && !want; B++)
                    if (seqs % B == 0 && speed_at_cheapest(&r, (int)B, p.moments_dtype) >= best * GROW_TIE) want = B;
                if (!(base > 0 && mine >= base * GROW_GAIN && want == p.micro_batch && fabs(p.grown_gain - mine / base) < 1e-9)) {
                    ok = 0;
                    snprintf(why, sizeof why, "grown from %d to %d (speed %.4f, gain %.4f) where batch_size's speed is %.4f, the best %.4f, "
                             "the smallest near it %lld", batch, p.micro_batch, mine, p.grown_gain, base, best, want);
                }
            } else {
                /* on a GPU, by brute force over every divisor and trade that fits (each at the logits chunk the trade
                 * gets: the default, else for GELU+LayerNorm and whole layers the largest smaller one that fits):
                 * none that plan_gpu_speed rates faster; on a tie, the cheaper trades over whole layers, and the
                 * larger micro-batch within a kind */
                double mine = plan_gpu_speed(&r, p.micro_batch, p.recompute, p.logits_chunk);
                for (long long B = 1; B <= batch && ok; B++) {
                    if (seqs % B) continue;
                    for (int level = 0; level < 5 && ok; level++) {
                        int rcl = r.pin_recompute >= 0 ? r.pin_recompute : level == 4 ? RECOMPUTE_LAYERS : MIN(level, 2);
                        if (level == 4 && r.pin_recompute >= 0) continue;
                        Plan q;
                        int chunk = 0;
                        if (level != 3 && plan_layout(&q, &r, (int)B, 1, rcl, default_chunk(&r), p.moments_dtype) <= budget) chunk = q.logits_chunk;
                        else if (level >= 3) chunk = plan_fit_smaller_chunk(&q, &r, (int)B, 1, rcl, p.moments_dtype);
                        if (!chunk) continue;
                        double other = plan_gpu_speed(&r, (int)B, rcl, chunk);
                        int other_layers = level == 4;
                        if (other > mine || (other == mine && (other_layers < layers || (other_layers == layers && B > p.micro_batch)))) {
                            ok = 0;
                            snprintf(why, sizeof why, "micro-batch %d (recompute %s, chunk %d, speed %.4f) chosen over %lld (recompute %s, chunk %d, speed %.4f)",
                                     p.micro_batch, recompute_name(p.recompute), p.logits_chunk, mine, B, recompute_name(rcl), chunk, other);
                        }
                    }
                }
            }
            if (ok && gpu && !p.grown_from && p.micro_batch == batch && !p.passed_micro_batch) {
                /* batch_size's plan kept: no larger divisor is rated GROW_GAIN as fast */
                double mine = plan_gpu_speed(&r, p.micro_batch, p.recompute, p.logits_chunk);
                for (long long B = batch + 1; B <= seqs && ok; B++)
                    if (seqs % B == 0 && speed_at_cheapest(&r, (int)B, p.moments_dtype) >= mine * GROW_GAIN) {
                        ok = 0;
                        snprintf(why, sizeof why, "micro-batch %lld rated %.4f kept at batch_size %d's %.4f", B,
                                 speed_at_cheapest(&r, (int)B, p.moments_dtype), batch, mine);
                    }
            }
            if (ok && !p.grown_from) {
                /* the plan passed over (plan's why line): on a GPU, the cheaper trades' largest micro-batch that
                 * fits at its cheapest trade, where that is not the plan chosen; else none */
                int largest_B = 0, largest_rc = 0;
                for (long long B = batch; gpu && B >= 1 && !largest_B; B--) {
                    if (seqs % B) continue;
                    for (int level = 0; level < 4 && !largest_B; level++) {
                        int rcl = r.pin_recompute >= 0 ? r.pin_recompute : MIN(level, 2);
                        Plan q;
                        if (plan_layout(&q, &r, (int)B, 1, rcl, level >= 3 ? CHUNK_STEP : default_chunk(&r), p.moments_dtype) <= budget) {
                            largest_B = (int)B;
                            largest_rc = rcl;
                        }
                    }
                }
                if (largest_B == p.micro_batch && largest_rc == p.recompute) largest_B = largest_rc = 0;
                if (p.passed_micro_batch != largest_B || p.passed_recompute != largest_rc) {
                    ok = 0;
                    snprintf(why, sizeof why, "passed over micro-batch %d (recompute %s), want %d (%s)", p.passed_micro_batch,
                             recompute_name(p.passed_recompute), largest_B, recompute_name(largest_rc));
                }
            }
            if (ok) {
                /* cheapest at its micro-batch: no lower recompute level up to GELU+LayerNorm fits at the default
                 * chunk (unpinned), the chunk goes below the default only after recomputing GELU and LayerNorm, and
                 * bf16 moments only when no fp32 plan fits */
                int traded_chunk = p.logits_chunk < MIN(default_chunk(&r), p.train.lane_B * T);
                for (int rcl = RECOMPUTE_NONE; r.pin_recompute < 0 && ok && rcl < MIN(p.recompute, RECOMPUTE_GELU_LN + 1); rcl++) {
                    Plan q;
                    if (plan_layout(&q, &r, p.micro_batch, 1, rcl, default_chunk(&r), p.moments_dtype) <= budget) {
                        ok = 0;
                        snprintf(why, sizeof why, "recompute %s would fit at micro-batch %d but %s was chosen", recompute_name(rcl),
                                 p.micro_batch, recompute_name(p.recompute));
                    }
                }
                if (ok && r.pin_recompute < 0 && traded_chunk && p.recompute < RECOMPUTE_GELU_LN) {
                    ok = 0;
                    snprintf(why, sizeof why, "logits chunk %d before recomputing GELU and LayerNorm (recompute %s)", p.logits_chunk,
                             recompute_name(p.recompute));
                }
                Plan q;
                if (ok && p.moments_dtype != NGPT_DTYPE_F32 &&
                    plan_layout(&q, &r, 1, 1, r.pin_recompute >= 0 ? r.pin_recompute : RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_F32) <= budget) {
                    ok = 0;
                    snprintf(why, sizeof why, "bf16 moments chosen though micro-batch 1 with fp32 moments fits");
                }
            }
            if (!ok) { failures++; CHECK(0, "config %d (L%d C%d T%d batch %d x %d, budget %.0f): %s", it, m.L, m.C, T, batch, accum, budget, why); }
        } else {
            refusals++;
            /* a refusal: the smallest possible plan really is over the budget */
            Plan q;
            int rcl = r.pin_recompute >= 0 ? r.pin_recompute : RECOMPUTE_LAYERS;
            double smallest = plan_layout(&q, &r, 1, 1, rcl, CHUNK_STEP, dtype == NGPT_DTYPE_F32 ? NGPT_DTYPE_F32 : NGPT_DTYPE_BF16);
            if (!(rc == NGPT_ERR_NOMEM && smallest > budget && strstr(err, "does not fit"))) {
                failures++;
                CHECK(0, "config %d refused (%d) though the smallest plan needs %.0f of %.0f: %s", it, rc, smallest, budget, err);
            }
        }
    }
    printf("  3000 random configs: %d planned (%d with a logits chunk between %d rows and the default, %d recomputing whole layers "
           "unpinned, %d micro-batches above batch_size), %d refused\n", fits, between, CHUNK_STEP, whole_layers, grown, refusals);
    CHECK(grown > 10, "the random configs should exercise micro-batches above batch_size (%d plans)", grown);
    CHECK(whole_layers > 10, "the random budgets should exercise the whole-layers pass (%d plans)", whole_layers);
    CHECK(fits > 300 && refusals > 300, "the random budgets should exercise both outcomes (%d fit, %d refused)", fits, refusals);
    CHECK(between > 10, "the random budgets should exercise the smaller-chunk search (%d plans)", between);
}

/* A plan for sampling only (ngpt_options.sample_only): the parameters and a forward pass, never gradients,
 * moments or an fp32 master; the largest micro-batch up to batch_size whose forward fits. */
static void test_inference_plan(void) {
    char err[NGPT_ERRLEN], why[160];
    /* GPT-2 XL in bf16 on a 12 GiB card: training does not fit, sampling does */
    ModelShape xl = gpt2_shape(48, 25, 1600, 1);
    PlanRequest r = request(xl, 1024, 8, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 12.0 * GiB - CUDA_SAFETY_MARGIN);
    Plan p;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM, "gpt2-xl training in 12 GiB should not fit");
    r.inference = 1;
    int rc = plan_make(&p, &r, err, sizeof err);
    CHECK(rc == NGPT_OK, "gpt2-xl sampling in 12 GiB: %s", err);
    CHECK(p.cat_bytes[CAT_GRADS] == 0 && p.cat_bytes[CAT_MOMENTS] == 0 && p.cat_bytes[CAT_ACTS] == 0 && p.cat_bytes[CAT_MASTER] == 0,
          "no gradients (%.0f), moments (%.0f), kept activations (%.0f) or fp32 master (%.0f)", p.cat_bytes[CAT_GRADS],
          p.cat_bytes[CAT_MOMENTS], p.cat_bytes[CAT_ACTS], p.cat_bytes[CAT_MASTER]);
    CHECK(p.cat_bytes[CAT_PARAMS] >= 2.0 * p.nparams && p.cat_bytes[CAT_PARAMS] < 2.1 * p.nparams, "the bf16 parameters");
    printf("  gpt2-xl, bf16, 12 GiB: sampling plan micro-batch %d, arena %.2f GiB\n", p.micro_batch, p.device_bytes / GiB);
    r.budget = 1.0 * GiB;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "sampling this model"), "1 GiB refusal: %s", err);

    Rng rng = {91, 1, 0};
    int fits = 0, refusals = 0, failures = 0;
    for (int it = 0; it < 1000 && failures < 5; it++) {
        int NH = 1 + (int)rng_below(&rng, 8);
        ModelShape m = {1 + (int)rng_below(&rng, 12), NH, NH * (8 << rng_below(&rng, 4)), 10 + (int)rng_below(&rng, 60000), 0, 0,
                        (int)rng_below(&rng, 2)};
        m.Vp = pad_vocab(m.V);
        m.maxT = 1 + (int)rng_below(&rng, 2048);
        int device = (int)rng_below(&rng, 2), batch = 1 + (int)rng_below(&rng, 64);
        int dtype = device == DEV_BACKEND_CPU ? NGPT_DTYPE_F32 : (int)rng_below(&rng, 3);
        double budget = exp(log(1e6) + (log(1e10) - log(1e6)) * (double)rng_below(&rng, 1000000) / 1e6);
        PlanRequest q = request(m, m.maxT, batch, 1 + (int)rng_below(&rng, 8), dtype, device, budget);
        q.inference = 1;
        rc = plan_make(&p, &q, err, sizeof err);
        int ok = 1;
        if (rc == NGPT_OK) {
            fits++;
            Plan bigger;
            if (plan_bytes(&p) > budget) { ok = 0; snprintf(why, sizeof why, "%.0f bytes over budget %.0f", plan_bytes(&p), budget); }
            else if (p.lanes != 1 || p.cat_bytes[CAT_GRADS] != 0 || p.cat_bytes[CAT_MOMENTS] != 0 || p.cat_bytes[CAT_MASTER] != 0 ||
                     p.train.training) {
                ok = 0; snprintf(why, sizeof why, "training memory in a sampling plan");
            } else if (!layout_ok(&p.train, p.region_bytes, why, sizeof why) || !layout_ok(&p.eval, p.region_bytes, why, sizeof why)) ok = 0;
            else if (p.micro_batch > batch) { ok = 0; snprintf(why, sizeof why, "micro-batch %d above batch_size %d", p.micro_batch, batch); }
            else if (p.micro_batch < batch && plan_layout(&bigger, &q, p.micro_batch + 1, 1, RECOMPUTE_NONE, CHUNK_STEP, NGPT_DTYPE_F32) <= budget) {
                ok = 0; snprintf(why, sizeof why, "micro-batch %d would fit but %d was chosen", p.micro_batch + 1, p.micro_batch);
            } else if (!chunk_largest(&p, why, sizeof why)) ok = 0;
            else if (!buffers_hold_their_use(&p, why, sizeof why)) ok = 0;
        } else {
            refusals++;
            Plan smallest;
            double need = plan_layout(&smallest, &q, 1, 1, RECOMPUTE_NONE, CHUNK_STEP, NGPT_DTYPE_F32);
            if (!(rc == NGPT_ERR_NOMEM && need > budget)) { ok = 0; snprintf(why, sizeof why, "refused (%d) though %.0f of %.0f fits: %.60s", rc, need, budget, err); }
        }
        if (!ok) { failures++; CHECK(0, "sampling config %d (L%d C%d T%d batch %d, budget %.0f): %s", it, m.L, m.C, m.maxT, batch, budget, why); }
    }
    printf("  1000 random sampling configs: %d planned, %d refused\n", fits, refusals);
    CHECK(fits > 100 && refusals > 100, "the random budgets should exercise both outcomes (%d fit, %d refused)", fits, refusals);
}

/* The reason this project exists: GPT-2 124M, batch 64 x block 1024, a 12 GB card with 2.68 GiB free. */
static void test_seed_scenario(void) {
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 2.68 * GiB - CUDA_SAFETY_MARGIN);
    Plan p;
    char err[NGPT_ERRLEN];
    int rc = plan_make(&p, &r, err, sizeof err);
    CHECK(rc == 0, "2.68 GiB: %s", err);
    CHECK((long long)p.micro_batch * p.grad_accum * 1024 == 65536, "tokens per step %d x %d x 1024", p.micro_batch, p.grad_accum);
    CHECK(p.device_bytes <= 2.68 * GiB - CUDA_SAFETY_MARGIN, "arena %zu", p.device_bytes);
    printf("  2.68 GiB: micro-batch %d x %d, recompute %s, chunk %d, arena %.2f GiB\n", p.micro_batch, p.grad_accum,
           recompute_name(p.recompute), p.logits_chunk, p.device_bytes / GiB);
    /* the logits chunk is never the full (B*T, Vp) tensor nanoGPT asks for (6.14 GiB in bf16), and it is the
     * fewest chunks that fit: two of 1024 rows here (not 16 of 128) */
    CHECK(p.cat_bytes[CAT_LOGITS] < 0.05 * 65536.0 * 50304 * 2, "logits chunk %.0f bytes", p.cat_bytes[CAT_LOGITS]);
    char why[160] = "";
    CHECK(chunk_largest(&p, why, sizeof why), "%s", why);
    CHECK(p.logits_chunk >= 1024, "logits chunk %d rows", p.logits_chunk);
    /* a budget too small for even the parameters and optimizer is refused with the numbers; no smaller block_size
     * fits, so none is offered (block_size 512 was, needing more than the budget) */
    r.budget = 1.0 * GiB;
    rc = plan_make(&p, &r, err, sizeof err);
    CHECK(rc == NGPT_ERR_NOMEM && strstr(err, "needs") && strstr(err, "budget is 1.00 GiB") && !strstr(err, "block_size") &&
              strstr(err, "What helps: a smaller model (n_layer, n_embd), or more memory"),
          "refusal message: %s", err);
}

/* The 2.68 GiB card on a Hopper: the dS^T tiles of the wgmma attention backward (113 MB at micro-batch 8) share
 * the logits chunk's bytes, so the chunk is not cut to 256 rows to make room for them beside it (the sixth GPU
 * run: 256-row chunks took 20 of the capped step's 182 ms) */
static void test_hopper_ds_in_logits(void) {
    char err[NGPT_ERRLEN], why[160];
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 2.68 * GiB - CUDA_SAFETY_MARGIN);
    r.attn_ds = 1;
    Plan p;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0, "2.68 GiB on a Hopper: %s", err);
    CHECK(backward_scratch_ok(&p, why, sizeof why), "%s", why);
    ngpt_shape s = {p.micro_batch, 1024, 768, 12, 12, m.Vp, p.logits_chunk};
    double ds = (double)cuda_attn_ds_bytes(&s, 1);
    printf("  2.68 GiB on a Hopper: micro-batch %d x %d, recompute %s, logits chunk %d rows (%.0f MB), dS^T %.0f MB, scratch slot %.0f MB\n",
           p.micro_batch, p.grad_accum, recompute_name(p.recompute), p.logits_chunk, p.train.slot_bytes[B_LOGITS] / 1e6, ds / 1e6,
           p.train.slot_bytes[B_SCRATCH] / 1e6);
    CHECK(p.micro_batch == 8 && p.recompute == RECOMPUTE_LAYERS, "micro-batch %d, recompute %s (want 8, whole layers)", p.micro_batch,
          recompute_name(p.recompute));
    CHECK(p.logits_chunk >= 1024 && (double)p.train.slot_bytes[B_LOGITS] >= ds, "logits chunk %d rows: the dS^T room should hold it", p.logits_chunk);
    /* no room for shapes the wgmma kernels refuse (attn_wgmma_shape, attn_backward_wgmma): head size 128, over 65535
     * heads in a micro-batch, B*T past INT_MAX - 128, one head's tile rows past an int; room at each limit itself */
    ngpt_shape hs128 = {8, 1024, 768, 6, 12, m.Vp, 1024}, heads = {65536, 1, 64, 1, 1, m.Vp, 1024}, rows = {23205, 92544, 64, 1, 1, m.Vp, 1024},
               long_head = {1, 524161, 64, 1, 1, m.Vp, 1024};
    CHECK(cuda_attn_ds_bytes(&hs128, 1) == 0 && cuda_attn_ds_bytes(&heads, 1) == 0 && cuda_attn_ds_bytes(&rows, 1) == 0 &&
              cuda_attn_ds_bytes(&long_head, 1) == 0 && cuda_attn_ds_bytes(&s, 0) == 0,
          "dS^T room for shapes the kernels refuse: %zu, %zu, %zu, %zu bytes", cuda_attn_ds_bytes(&hs128, 1), cuda_attn_ds_bytes(&heads, 1),
          cuda_attn_ds_bytes(&rows, 1), cuda_attn_ds_bytes(&long_head, 1));
    heads.B = 65535;  /* 65535 heads */
    rows.T = 92543;   /* B*T 2147460315, under INT_MAX - 128 */
    long_head.T = 524160;
    CHECK(cuda_attn_ds_bytes(&heads, 1) > 0 && cuda_attn_ds_bytes(&rows, 1) > 0 && cuda_attn_ds_bytes(&long_head, 1) > 0,
          "no dS^T room at the limits: 65535 heads %zu, B*T below INT_MAX - 128 %zu, T 524160 %zu bytes", cuda_attn_ds_bytes(&heads, 1),
          cuda_attn_ds_bytes(&rows, 1), cuda_attn_ds_bytes(&long_head, 1));
    /* fp32 keeps no dS^T room */
    r.dtype = NGPT_DTYPE_F32;
    CHECK(plan_make(&p, &r, err, sizeof err) != 0 || !p.train.backward_scratch, "fp32: backward scratch %zu", p.train.backward_scratch);
}

/* On a GPU the cheaper trades take the micro-batch plan_gpu_speed rates fastest, not the largest that fits: GPT-2
 * 124M at 6 GiB fits 16 recomputing GELU and LayerNorm and 8 recomputing nothing, which the model rates 1.006x
 * as fast on 132 SMs (16's products fill the waves 7% better, recomputing costs 7.5%); on 28 SMs, which 8192
 * rows already fill nearly as well as 16384, at 10 GiB 16 without recomputing over 32 recomputing GELU. The CPU
 * keeps the largest micro-batch. */
static void test_cheaper_trades_by_speed(void) {
    char err[NGPT_ERRLEN];
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 6.0 * GiB - CUDA_SAFETY_MARGIN);
    Plan p, q;
    CHECK(plan_layout(&q, &r, 16, 1, RECOMPUTE_GELU_LN, default_chunk(&r), NGPT_DTYPE_F32) <= r.budget &&
              plan_layout(&q, &r, 16, 1, RECOMPUTE_GELU, default_chunk(&r), NGPT_DTYPE_F32) > r.budget,
          "6 GiB should fit 16 with GELU+LayerNorm but not with GELU alone");
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 8 && p.recompute == RECOMPUTE_NONE &&
              p.passed_micro_batch == 16 && p.passed_recompute == RECOMPUTE_GELU_LN,
          "6 GiB: micro-batch %d, recompute %s, passed over %d %s (want 8 none over 16 GELU+LayerNorm): %s", p.micro_batch,
          recompute_name(p.recompute), p.passed_micro_batch, recompute_name(p.passed_recompute), err);
    double ratio = plan_gpu_speed(&r, 8, RECOMPUTE_NONE, 0) / plan_gpu_speed(&r, 16, RECOMPUTE_GELU_LN, 0);
    CHECK(ratio > 1.0 && ratio < 1.03, "modeled 8 none over 16 GELU+LayerNorm: %.3f (an H200 ran 1.006x)", ratio);
    /* pinned to GELU+LayerNorm, the largest micro-batch with fp32 moments, no plan passed over; the same on a
     * Hopper (its dS^T room), which gpu.sh's capped step compares at this budget */
    for (int ds = 0; ds < 2; ds++) {
        r.attn_ds = ds;
        CHECK(plan_make(&q, &r, err, sizeof err) == 0 && q.micro_batch == 8 && q.recompute == RECOMPUTE_NONE, "dS^T room %d: micro-batch %d",
              ds, q.micro_batch);
        r.pin_recompute = RECOMPUTE_GELU_LN;
        CHECK(plan_make(&q, &r, err, sizeof err) == 0 && q.micro_batch == 16 && !q.passed_micro_batch && q.moments_dtype == NGPT_DTYPE_F32,
              "6 GiB, recompute = 2, dS^T room %d: micro-batch %d, passed %d, moments %d (want 16, none, fp32)", ds, q.micro_batch,
              q.passed_micro_batch, q.moments_dtype);
        r.pin_recompute = -1;
    }
    r.attn_ds = 0;
    r.gpu_sms = 28;
    r.budget = 10.0 * GiB - CUDA_SAFETY_MARGIN;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 16 && p.recompute == RECOMPUTE_NONE &&
              p.passed_micro_batch == 32 && p.passed_recompute == RECOMPUTE_GELU,
          "10 GiB on 28 SMs: micro-batch %d, recompute %s, passed over %d %s (want 16 none over 32 GELU)", p.micro_batch,
          recompute_name(p.recompute), p.passed_micro_batch, recompute_name(p.passed_recompute));
    printf("  6 GiB: micro-batch 8 without recomputing over 16 with GELU+LayerNorm, modeled %.3fx; on 28 SMs at 10 GiB, "
           "16 over 32 with GELU, %.3fx\n", ratio, plan_gpu_speed(&r, 16, RECOMPUTE_NONE, 0) / plan_gpu_speed(&r, 32, RECOMPUTE_GELU, 0));
    /* whole layers are weighed against the fastest of the cheaper trades, not their largest micro-batch, and win
     * only when rated faster (a review's case: 22 without recomputing, over 32 with GELU+LayerNorm; whole
     * layers at 44 rate between the two) */
    ModelShape small = {3, 7, 112, 37513, pad_vocab(37513), 1836, 0};
    PlanRequest s = request(small, 1836, 44, 8, NGPT_DTYPE_F32, DEV_BACKEND_CUDA, 1510653983);
    s.gpu_sms = 80;
    s.attn_ds = 1;
    CHECK(plan_make(&p, &s, err, sizeof err) == 0 && p.micro_batch == 22 && p.recompute == RECOMPUTE_NONE && p.passed_micro_batch == 32 &&
              p.passed_recompute == RECOMPUTE_GELU_LN,
          "L3 C112 T1836 on 80 SMs: micro-batch %d, recompute %s, passed %d %s (want 22 none over 32 GELU+LayerNorm)", p.micro_batch,
          recompute_name(p.recompute), p.passed_micro_batch, recompute_name(p.passed_recompute));
    CHECK(plan_layout(&q, &s, 44, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_F32) <= s.budget &&
              plan_gpu_speed(&s, 44, RECOMPUTE_LAYERS, 0) > plan_gpu_speed(&s, 32, RECOMPUTE_GELU_LN, 0) &&
              plan_gpu_speed(&s, 44, RECOMPUTE_LAYERS, 0) < plan_gpu_speed(&s, 22, RECOMPUTE_NONE, 0),
          "whole layers at 44 should fit and rate between 32 with GELU+LayerNorm and 22 without");
    /* a tiny model, below the model's floor (0.228 of the full rate): the rate still doubles with the micro-batch,
     * so a larger one that recomputes wins (a review's case: with a flat floor, 2 without recomputing over 4
     * with GELU+LayerNorm; now 8 recomputing whole layers, rated twice 4's) */
    ModelShape tiny = {4, 4, 64, 50257, 50304, 64, 0};
    PlanRequest t = request(tiny, 64, 32, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 325 * MiB - CUDA_SAFETY_MARGIN);
    CHECK(plan_gpu_speed(&t, 4, RECOMPUTE_GELU_LN, 0) > 1.8 * plan_gpu_speed(&t, 2, RECOMPUTE_NONE, 0) &&
              plan_gpu_speed(&t, 2, RECOMPUTE_NONE, 0) > 1.9 * plan_gpu_speed(&t, 1, RECOMPUTE_NONE, 0),
          "below the floor the rate should double with the micro-batch");
    CHECK(plan_make(&p, &t, err, sizeof err) == 0 && p.micro_batch == 8 && p.recompute == RECOMPUTE_LAYERS && p.moments_dtype == NGPT_DTYPE_F32 &&
              p.passed_micro_batch == 4 && p.passed_recompute == RECOMPUTE_GELU_LN,
          "tiny model at 325 MiB: micro-batch %d, recompute %s, passed %d %s (want 8 whole layers over 4 GELU+LayerNorm, fp32 moments)",
          p.micro_batch, recompute_name(p.recompute), p.passed_micro_batch, recompute_name(p.passed_recompute));
    /* and nowhere does the rate fall by more than half from one micro-batch to half of it */
    for (int B = 2; B <= 4096; B *= 2)
        CHECK(plan_gpu_speed(&t, B / 2, RECOMPUTE_NONE, 0) >= 0.5 * plan_gpu_speed(&t, B, RECOMPUTE_NONE, 0) * (1 - 1e-12),
              "micro-batch %d rated under half of %d", B / 2, B);
    /* the CPU at the same choice: the largest micro-batch */
    PlanRequest c = request(m, 1024, 64, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    c.budget = plan_layout(&q, &c, 16, plan_lanes(&c, 16), RECOMPUTE_GELU_LN, default_chunk(&c), NGPT_DTYPE_F32);
    CHECK(plan_layout(&q, &c, 8, plan_lanes(&c, 8), RECOMPUTE_NONE, default_chunk(&c), NGPT_DTYPE_F32) <= c.budget,
          "the CPU case should fit 8 without recomputing");
    CHECK(plan_make(&p, &c, err, sizeof err) == 0 && p.micro_batch == 16 && p.recompute == RECOMPUTE_GELU_LN && !p.passed_micro_batch,
          "CPU: micro-batch %d, recompute %s (want 16, GELU+LayerNorm): %s", p.micro_batch, recompute_name(p.recompute), err);
}

/* On a GPU whole layers are recomputed where they buy a micro-batch that plan_gpu_speed puts ahead of the
 * cheaper trades' (the 2.68 GiB card: 8 in place of 2, which ran 1.32x as fast on an H200); on the CPU only
 * where nothing cheaper fits at any micro-batch; bf16 AdamW moments after either */
/* On a GPU with room, a micro-batch above batch_size where the speed model rates it GROW_GAIN faster: nanoGPT's
 * GPT-2 124M config (12 x 40) on 132 SMs takes 16 x 30; on 80 SMs, or pinned, or on the CPU, 12 x 40 stays; with
 * too little room for 16 without recomputing (6 GiB), 12 stays; GPT-2 XL's fine-tuning at 1 x 32 takes 8 x 4 */
static void test_micro_batch_above_batch_size(void) {
    Plan p;
    char err[NGPT_ERRLEN];
    PlanRequest r = request(gpt2_shape(12, 12, 768, 0), 1024, 12, 40, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 79.0 * (1 << 30));
    r.gpu_sms = 132;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 16 && p.grad_accum == 30 && p.grown_from == 12 &&
              p.recompute == RECOMPUTE_NONE && fabs(p.grown_gain - 0.999 / (0.999 - (log2(65536.0 / 12288) - 2) * (0.999 - 0.935))) < 1e-9,
          "12 x 40, 132 SMs: micro-batch %d x %d, grown from %d, gain %.4f (%s)", p.micro_batch, p.grad_accum, p.grown_from, p.grown_gain, err);
    printf("  GPT-2 124M, 12 x 40, 79 GiB, 132 SMs: micro-batch %d x %d, modeled %.3fx\n", p.micro_batch, p.grad_accum, p.grown_gain);
    r.gpu_sms = 80;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 12 && !p.grown_from, "80 SMs: micro-batch %d", p.micro_batch);
    r.gpu_sms = 132;
    r.pin_micro_batch = 12;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 12 && !p.grown_from, "pinned: micro-batch %d", p.micro_batch);
    r.pin_micro_batch = 0;
    r.budget = 6.0 * (1 << 30);
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.micro_batch == 12 && !p.grown_from, "6 GiB: micro-batch %d", p.micro_batch);
    PlanRequest c = request(gpt2_shape(12, 12, 768, 0), 1024, 12, 40, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 79.0 * (1 << 30));
    CHECK(plan_make(&p, &c, err, sizeof err) == 0 && p.micro_batch == 12 && !p.grown_from, "cpu: micro-batch %d", p.micro_batch);
    PlanRequest xl = request(gpt2_shape(48, 25, 1600, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 79.0 * (1 << 30));
    xl.gpu_sms = 132;
    CHECK(plan_make(&p, &xl, err, sizeof err) == 0 && p.micro_batch == 8 && p.grad_accum == 4 && p.grown_from == 1 && p.grown_gain > 1.4,
          "GPT-2 XL, 1 x 32: micro-batch %d x %d, gain %.3f (%s)", p.micro_batch, p.grad_accum, p.grown_gain, err);
    printf("  GPT-2 XL, 1 x 32, 79 GiB, 132 SMs: micro-batch %d x %d, modeled %.3fx\n", p.micro_batch, p.grad_accum, p.grown_gain);
    /* the divisors it weighs (found to the square root), and a step of 2^31 - 1 sequences: a prime, none between 1 and itself */
    int d[MAX_DIVISORS], n = divisors_above(12, 2, d);
    CHECK(n == 4 && d[0] == 3 && d[1] == 4 && d[2] == 6 && d[3] == 12, "divisors of 12 above 2: %d (%d %d %d %d)", n, d[0], d[1], d[2], d[3]);
    CHECK(divisors_above(2095133040, 0, d) == MAX_DIVISORS && d[0] == 1 && d[MAX_DIVISORS - 1] == 2095133040, "the most divisors below 2^31");
    PlanRequest prime = request(gpt2_shape(12, 12, 768, 0), 1024, 1, INT_MAX, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 79.0 * (1 << 30));
    CHECK(plan_make(&p, &prime, err, sizeof err) == 0 && p.micro_batch == 1 && !p.grown_from, "1 x 2^31 - 1: micro-batch %d (%s)",
          p.micro_batch, err);
}

static void test_whole_layers(void) {
    char err[NGPT_ERRLEN];
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 2.68 * GiB - CUDA_SAFETY_MARGIN);
    Plan p, q;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.recompute == RECOMPUTE_LAYERS && p.micro_batch == 8,
          "2.68 GiB: micro-batch %d, recompute %s (want 8, whole layers)", p.micro_batch, recompute_name(p.recompute));
    r.pin_recompute = RECOMPUTE_GELU_LN;
    CHECK(plan_make(&q, &r, err, sizeof err) == 0 && q.recompute == RECOMPUTE_GELU_LN && q.micro_batch == 2,
          "2.68 GiB, recompute = 2: micro-batch %d (want 2): %s", q.micro_batch, err);
    double ratio = plan_gpu_speed(&r, 8, RECOMPUTE_LAYERS, p.logits_chunk) / plan_gpu_speed(&r, 2, RECOMPUTE_GELU_LN, q.logits_chunk);
    CHECK(ratio > 1.25 && ratio < 1.40, "the model's 8 with whole layers over 2 with GELU+LayerNorm: %.3f (an H200 ran 1.32x)", ratio);
    printf("  2.68 GiB: micro-batch %d x %d recomputing whole layers, activations %.0f MiB (GELU+LayerNorm, pinned: %d, %.0f MiB); "
           "modeled %.3fx\n", p.micro_batch, p.grad_accum, p.cat_bytes[CAT_ACTS] / MiB, q.micro_batch, q.cat_bytes[CAT_ACTS] / MiB, ratio);
    /* twice the micro-batch does not pay for whole layers: 16 against 8 with GELU+LayerNorm */
    CHECK(plan_gpu_speed(&r, 16, RECOMPUTE_LAYERS, 0) < plan_gpu_speed(&r, 8, RECOMPUTE_GELU_LN, 0),
          "16 with whole layers should not be modeled faster than 8 with GELU+LayerNorm");
    r.pin_recompute = -1;
    /* more memory never gets a plan the model rates slower: 3 GiB against 2.68 */
    double speed_268 = plan_gpu_speed(&r, p.micro_batch, p.recompute, p.logits_chunk);
    r.budget = 3.0 * GiB - CUDA_SAFETY_MARGIN;
    CHECK(plan_make(&q, &r, err, sizeof err) == 0 && plan_gpu_speed(&r, q.micro_batch, q.recompute, q.logits_chunk) >= speed_268,
          "3 GiB: micro-batch %d, recompute %s, modeled %.3f, below 2.68 GiB's %.3f", q.micro_batch, recompute_name(q.recompute),
          plan_gpu_speed(&r, q.micro_batch, q.recompute, q.logits_chunk), speed_268);
    /* nor anywhere from 2.19 GiB (where fp32 moments first fit) to 12 GiB by 0.01: each budget's plan rated at least
     * the last's (the plans that fit only grow with the budget, each trade's logits chunk with them) */
    double last = 0, at = 0;
    int budgets = 0;
    for (double g = 2.19; g <= 12.0; g += 0.01) {
        r.budget = g * GiB - CUDA_SAFETY_MARGIN;
        if (plan_make(&q, &r, NULL, 0) || q.moments_dtype != NGPT_DTYPE_F32) continue;
        double s = plan_gpu_speed(&r, q.micro_batch, q.recompute, q.logits_chunk);
        CHECK(s >= last * (1 - 1e-12), "%.2f GiB: micro-batch %d, recompute %s, chunk %d, modeled %.4f, below %.2f GiB's %.4f", g, q.micro_batch,
              recompute_name(q.recompute), q.logits_chunk, s, at, last);
        if (s < last * (1 - 1e-12)) break;
        last = s;
        at = g;
        budgets++;
    }
    CHECK(budgets > 900, "%d budgets planned with fp32 moments", budgets);
    r.budget = 3.0 * GiB - CUDA_SAFETY_MARGIN;
    CHECK(plan_make(&q, &r, err, sizeof err) == 0, "3 GiB: %s", err);
    /* and at 3 GiB 8 with whole layers at the full chunk, over 16 with them, which fits only with a chunk of 256 rows
     * (a chunk that small ran the classifier at half the rate on an H200), and over 4 with GELU and LayerNorm (the
     * model before the seventh run's fit took that one) */
    Plan big;
    CHECK(q.micro_batch == 8 && q.recompute == RECOMPUTE_LAYERS && q.logits_chunk == 2048 &&
              plan_fit_smaller_chunk(&big, &r, 16, 1, RECOMPUTE_LAYERS, NGPT_DTYPE_F32) == 256 &&
              plan_gpu_speed(&r, 16, RECOMPUTE_LAYERS, 256) < plan_gpu_speed(&r, 8, RECOMPUTE_LAYERS, 2048) &&
              q.passed_micro_batch == 4 && q.passed_recompute == RECOMPUTE_GELU_LN,
          "3 GiB: micro-batch %d, recompute %s, chunk %d, passed %d %s (want 8, whole layers, 2048, over 16 at 256 rows and 4 GELU+LayerNorm)",
          q.micro_batch, recompute_name(q.recompute), q.logits_chunk, q.passed_micro_batch, recompute_name(q.passed_recompute));
    /* fewer SMs fill their waves with fewer rows: the larger micro-batch buys less (on a 12 GB RTX 3060's 28 SMs
     * whole layers at 4, not 8), and on 8 SMs not enough to recompute whole layers */
    r.budget = 2.68 * GiB - CUDA_SAFETY_MARGIN;
    double ratio_by_sms[3];
    static const int sms[3] = {132, 28, 8};
    for (int k = 0; k < 3; k++) {
        r.gpu_sms = sms[k];
        ratio_by_sms[k] = plan_gpu_speed(&r, 8, RECOMPUTE_LAYERS, 0) / plan_gpu_speed(&r, 2, RECOMPUTE_GELU_LN, 0);
    }
    CHECK(ratio_by_sms[0] > ratio_by_sms[1] && ratio_by_sms[1] > ratio_by_sms[2], "modeled gain of whole layers on 132, 28, 8 SMs: %.3f %.3f %.3f",
          ratio_by_sms[0], ratio_by_sms[1], ratio_by_sms[2]);
    r.gpu_sms = 28;
    CHECK(plan_make(&q, &r, err, sizeof err) == 0 && q.recompute == RECOMPUTE_LAYERS && q.micro_batch == 4,
          "2.68 GiB on 28 SMs: micro-batch %d, recompute %s (want 4, whole layers)", q.micro_batch, recompute_name(q.recompute));
    r.gpu_sms = 8;
    CHECK(plan_make(&q, &r, err, sizeof err) == 0 && q.recompute < RECOMPUTE_LAYERS && q.micro_batch < 4,
          "2.68 GiB on 8 SMs: micro-batch %d, recompute %s (want a cheaper trade under 4)", q.micro_batch, recompute_name(q.recompute));
    r.gpu_sms = 0;
    /* the CPU at the 2.68 GiB card's micro-batches: the cheaper trades first */
    PlanRequest c = request(m, 1024, 64, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    c.budget = plan_layout(&q, &c, 2, plan_lanes(&c, 2), RECOMPUTE_GELU_LN, default_chunk(&c), NGPT_DTYPE_F32);
    CHECK(plan_layout(&q, &c, 8, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_F32) <= c.budget, "the CPU case should fit 8 with whole layers");
    CHECK(plan_make(&p, &c, err, sizeof err) == 0 && p.recompute < RECOMPUTE_LAYERS && p.micro_batch == 2,
          "CPU: micro-batch %d, recompute %s (want 2, a cheaper trade): %s", p.micro_batch, recompute_name(p.recompute), err);
    /* a byte less than the smallest plan of the cheaper trades (micro-batch 1, GELU+LayerNorm, the smallest chunk,
     * fp32 moments): whole layers, still fp32 moments */
    r.pin_recompute = -1;
    r.budget = plan_layout(&q, &r, 1, 1, RECOMPUTE_GELU_LN, CHUNK_STEP, NGPT_DTYPE_F32) - 1;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.recompute == RECOMPUTE_LAYERS && p.moments_dtype == NGPT_DTYPE_F32,
          "a byte under the smallest GELU+LayerNorm plan: recompute %s, moments %s: %s", recompute_name(p.recompute),
          p.moments_dtype == NGPT_DTYPE_F32 ? "fp32" : "bf16", err);
    printf("  %.3f GiB: micro-batch %d x %d, recompute %s, logits chunk %d\n", r.budget / GiB, p.micro_batch, p.grad_accum,
           recompute_name(p.recompute), p.logits_chunk);
    /* under the smallest whole-layers plan with fp32 moments: bf16 moments, and then the refusal names whole layers */
    r.budget = plan_layout(&q, &r, 1, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_F32) - 1;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.moments_dtype == NGPT_DTYPE_BF16, "under the smallest fp32 plan: %s", err);
    r.budget = plan_layout(&q, &r, 1, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_BF16) - 1;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "recompute whole layers"), "refusal: %s", err);
}

/* moments_dtype: auto keeps fp32 moments wherever a plan fits and offers bf16 where their plan is rated at least
 * BF16_MOMENTS_HINT as fast (GPT-2 124M at 2.2 GiB: 1 x 64 with fp32, 8 x 8 with bf16); a pin holds either
 * precision, and a refusal under the fp32 pin names the planner's own choice */
static void test_moments_dtype(void) {
    char err[NGPT_ERRLEN];
    ModelShape m = gpt2_shape(12, 12, 768, 0);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 2.2 * GiB - CUDA_SAFETY_MARGIN);
    Plan p, q;
    CHECK(plan_make(&p, &r, err, sizeof err) == 0 && p.moments_dtype == NGPT_DTYPE_F32 && p.micro_batch == 1 &&
              p.bf16_micro_batch == 8 && p.bf16_recompute == RECOMPUTE_LAYERS && p.bf16_gain > 1.8 && p.bf16_gain < 2.2,
          "2.2 GiB: micro-batch %d, moments %d, offer %d %s %.3f (want 1, fp32, offer 8 whole layers ~2.0x, an H200 ran 2.006x): %s", p.micro_batch,
          p.moments_dtype, p.bf16_micro_batch, recompute_name(p.bf16_recompute), p.bf16_gain, err);
    printf("  2.2 GiB: fp32 moments micro-batch %d x %d; offer bf16 at %d x %d (%s), modeled %.2fx\n", p.micro_batch, p.grad_accum,
           p.bf16_micro_batch, 64 / p.bf16_micro_batch, recompute_name(p.bf16_recompute), p.bf16_gain);
    /* the pin gives the offered plan, which fits, with no offer of its own */
    PlanRequest b = r;
    b.pin_moments = MOMENTS_BF16;
    CHECK(plan_make(&q, &b, err, sizeof err) == 0 && q.moments_dtype == NGPT_DTYPE_BF16 && q.micro_batch == p.bf16_micro_batch &&
              q.recompute == p.bf16_recompute && plan_need(&q) <= b.budget && !q.bf16_micro_batch,
          "pinned bf16 at 2.2 GiB: micro-batch %d, recompute %s, moments %d: %s", q.micro_batch, recompute_name(q.recompute),
          q.moments_dtype, err);
    /* also where fp32 moments fit as they are: 8 GiB */
    b.budget = 8.0 * GiB;
    CHECK(plan_make(&q, &b, err, sizeof err) == 0 && q.moments_dtype == NGPT_DTYPE_BF16, "pinned bf16 at 8 GiB: moments %d", q.moments_dtype);
    /* every budget from 1.9 to 8 GiB: an offer exactly where the free plan holds fp32 moments and the bf16 plan is
     * rated at least BF16_MOMENTS_HINT as fast */
    int offers = 0, fp32_plans = 0;
    for (double g = 1.9; g <= 8.0; g += 0.01) {
        r.budget = g * GiB - CUDA_SAFETY_MARGIN;
        b.budget = r.budget;
        if (plan_make(&p, &r, NULL, 0)) continue;
        double gain = 0;
        if (p.moments_dtype == NGPT_DTYPE_F32) {
            fp32_plans++;
            CHECK(plan_make(&q, &b, NULL, 0) == 0, "%.2f GiB: bf16 moments must fit where fp32 do", g);
            gain = plan_gpu_speed(&r, q.micro_batch, q.recompute, q.logits_chunk) / plan_gpu_speed(&r, p.micro_batch, p.recompute, p.logits_chunk);
        }
        int want = gain >= BF16_MOMENTS_HINT;
        offers += want;
        CHECK(!!p.bf16_micro_batch == want && (!want || (p.bf16_micro_batch == q.micro_batch && p.bf16_recompute == q.recompute)),
              "%.2f GiB: moments %d, offer %d (%s), bf16 plan rated %.3fx", g, p.moments_dtype, p.bf16_micro_batch,
              recompute_name(p.bf16_recompute), gain);
    }
    CHECK(offers > 0 && offers < fp32_plans, "offers at %d of %d fp32 budgets: some, not all", offers, fp32_plans);
    printf("  1.9..8 GiB by 0.01: fp32 moments at %d budgets, bf16 offered at %d\n", fp32_plans, offers);
    /* pinned fp32 where only bf16 moments fit: refused, naming the planner's plan with bf16 moments */
    r.budget = 2.0 * GiB - CUDA_SAFETY_MARGIN;
    CHECK(plan_make(&p, &r, NULL, 0) == 0 && p.moments_dtype == NGPT_DTYPE_BF16, "2.0 GiB, auto: bf16 moments");
    r.pin_moments = MOMENTS_F32;
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "fp32 AdamW moments) needs") &&
              strstr(err, "leaving moments_dtype to the planner") && strstr(err, "bf16 AdamW moments:"),
          "2.0 GiB, moments_dtype = float32: %s", err);
    /* the advice names only the pins that changed something: unpinned moments are not named (the free plan's bf16
     * moments at 2.0 GiB), nor an fp32 pin the free plan agrees with (3 GiB, whose free plan keeps fp32 moments) */
    r.pin_moments = MOMENTS_FREE;
    r.pin_micro_batch = 64;
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "leaving micro_batch to the planner") && !strstr(err, "moments_dtype") &&
              strstr(err, "bf16 AdamW moments:"),
          "2.0 GiB, micro_batch = 64: %s", err);
    /* nor a bf16 pin, which only saves memory: the advice keeps it (at 3 GiB the free plan would take fp32) */
    r.budget = 3.0 * GiB - CUDA_SAFETY_MARGIN;
    r.pin_moments = MOMENTS_BF16;
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "leaving micro_batch to the planner") && !strstr(err, "moments_dtype") &&
              strstr(err, "bf16 AdamW moments:"),
          "3 GiB, micro_batch = 64, moments_dtype = bfloat16: %s", err);
    r.pin_micro_batch = 64;
    r.pin_moments = MOMENTS_F32;
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "leaving micro_batch to the planner") && !strstr(err, "moments_dtype"),
          "3 GiB, micro_batch = 64, moments_dtype = float32: %s", err);
    r.pin_micro_batch = 0;
    /* bf16 moments need a 16-bit GPU run: not float32, not the CPU */
    r.pin_moments = MOMENTS_BF16;
    r.dtype = NGPT_DTYPE_F32;
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_ARG && strstr(err, "moments_dtype = bfloat16 needs a GPU run in dtype bfloat16 or float16"),
          "float32 with bf16 moments: %s", err);
    PlanRequest c = request(m, 1024, 64, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 4.0 * GiB);
    c.pin_moments = MOMENTS_BF16;
    CHECK(plan_make(&q, &c, err, sizeof err) == NGPT_ERR_ARG && strstr(err, "float32, on the cpu"), "CPU with bf16 moments: %s", err);
}

/* ---- training with forced micro-batches ---- */
static char data_dir[256];
static void make_dataset(int V) {
    if (test_folder(data_dir, sizeof data_dir, "plan")) return;
    for (int k = 0; k < 2; k++) {
        char path[320];
        snprintf(path, sizeof path, "%s/%s", data_dir, k ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < 20000; i++) {
            uint16_t t = (uint16_t)((i * 7 + (int)(ngpt_hash(5, (uint64_t)k, (uint64_t)i) % 3)) % V); /* learnable */
            fwrite(&t, 2, 1, f);
        }
        fclose(f);
    }
}

static void losses_with_micro_batch(int batch, int mb, float *losses, int steps) {
    ngpt_config c;
    ngpt_config_defaults(&c);
    copy_str(c.device, sizeof c.device, "cpu");
    copy_str(c.data_dir, sizeof c.data_dir, data_dir);
    c.vocab_size = 50; c.block_size = 32; c.n_layer = 2; c.n_head = 2; c.n_embd = 32; c.bias = 1;
    c.batch_size = batch; c.gradient_accumulation_steps = 8 / batch; c.micro_batch = mb; c.dropout = 0.1;
    c.learning_rate = 3e-3; c.warmup_iters = 2; c.lr_decay_iters = 10; c.min_lr = 3e-4; c.threads = 2;
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, NULL, &tr, err, sizeof err)) { CHECK(0, "%s", err); return; }
    CHECK(tr->plan.micro_batch == mb && tr->plan.grad_accum == 8 / mb, "plan %d x %d", tr->plan.micro_batch, tr->plan.grad_accum);
    for (int s = 0; s < steps; s++) CHECK(ngpt_train_step(tr, &losses[s]) == 0, "%s", tr->err);
    ngpt_trainer_free(tr);
}

/* A refusal with a pinned micro-batch: the advice keeps the pin (the half-block figure is for that micro-batch)
 * and names what the planner would choose without it, which is a plan that fits */
static void test_refusal_with_pins(void) {
    char err[NGPT_ERRLEN];
    ModelShape m = gpt2_shape(12, 12, 768, 1);
    PlanRequest r = request(m, 1024, 64, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 3.0 * GiB);
    r.pin_micro_batch = 64;
    Plan p, freep, half;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM, "micro-batch 64 x 1024 of GPT-2 124M should not fit 3 GiB");
    PlanRequest fr = r;
    fr.pin_micro_batch = 0;
    CHECK(plan_make(&freep, &fr, NULL, 0) == NGPT_OK, "without the pin it fits");
    char want[200], fb[32];
    snprintf(want, sizeof want, "leaving micro_batch to the planner (it would pick micro-batch %d x %d accumulation steps", freep.micro_batch,
             freep.grad_accum);
    CHECK(strstr(err, want) && strstr(err, fmt_bytes(fb, sizeof fb, (double)freep.device_bytes)), "names the unpinned plan (%s): %s", want, err);
    /* the block_size offered is the largest of 512, 256, ... whose plan, micro-batch 64 kept, fits (512, which does not
     * fit, was offered with its figure) */
    PlanRequest hr = r;
    int fit_T = 0;
    double fit_need = 0;
    for (int T = 512; T >= 64 && !fit_T; T /= 2) {
        hr.T = T;
        double need_T = plan_layout(&half, &hr, 64, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_BF16);
        if (need_T <= r.budget) fit_T = T, fit_need = need_T;
    }
    snprintf(want, sizeof want, "a smaller block_size (block_size %d would need %s)", fit_T, fmt_bytes(fb, sizeof fb, fit_need));
    CHECK(fit_T > 0 && fit_T < 512 && strstr(err, want), "the block_size that fits with micro-batch 64, %d (%s): %s", fit_T, want, err);

    /* a budget under the smallest plan by less than fmt_bytes shows: the two figures differ as written (both read
     * 2.08 GiB before) */
    const double need = plan_need(&p), bucket_low = (round(need / GiB * 100) - 0.5) / 100 * GiB; /* the least that reads as need */
    char need_gib[32], budget_gib[32];
    r.budget = (need + bucket_low) / 2;
    CHECK(!strcmp(fmt_bytes(need_gib, sizeof need_gib, need), fmt_bytes(budget_gib, sizeof budget_gib, r.budget)), "%s and %s", need_gib,
          budget_gib);
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM, "%.2f MiB short: %s", (need - r.budget) / MiB, err);
    const char *needs = strstr(err, " needs "), *is = strstr(err, " and the budget is ");
    CHECK(needs && is && is > needs + 7 && (size_t)(is - needs - 7) < 32, "the refusal's figures: %s", err);
    if (needs && is && is > needs + 7 && (size_t)(is - needs - 7) < 32) {
        char need_s[32] = "";
        memcpy(need_s, needs + 7, (size_t)(is - needs - 7));
        CHECK(strncmp(is + 19, need_s, strlen(need_s)) || is[19 + strlen(need_s)] != '.', "need and budget read the same: %s", err);
    }
    r.pin_micro_batch = 0;
    r.budget = 1.0 * GiB; /* nothing pinned: no such advice */
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && !strstr(err, "to the planner"), "unpinned refusal: %s", err);
}

/* A pretrained model that does not fit: the advice names the largest smaller GPT-2 that does (nanoGPT's
 * finetune_shakespeare: GPT-2 XL on a 12 GiB card), not n_layer and n_embd, which its weights fix */
static void test_refusal_names_smaller_gpt2(void) {
    char err[NGPT_ERRLEN];
    double budget = 12.0 * GiB - CUDA_SAFETY_MARGIN;
    PlanRequest r = request(gpt2_shape(48, 25, 1600, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, budget);
    r.pretrained = 1;
    Plan p, large, medium;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM, "GPT-2 XL training should not fit 12 GiB");
    PlanRequest rl = request(gpt2_shape(36, 20, 1280, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, budget);
    CHECK(plan_make(&large, &rl, NULL, 0) == NGPT_OK, "GPT-2 large fits 12 GiB");
    char want[200], b[32];
    snprintf(want, sizeof want, "a smaller GPT-2: init_from = gpt2-large fits (micro-batch %d x %d accumulation steps, %s)", large.micro_batch,
             large.grad_accum, fmt_bytes(b, sizeof b, (double)large.device_bytes));
    CHECK(strstr(err, want) && !strstr(err, "n_layer"), "names gpt2-large (%s): %s", want, err);
    /* at 6 GiB large does not fit either: medium is named */
    r.budget = rl.budget = 6.0 * GiB;
    PlanRequest rm = request(gpt2_shape(24, 16, 1024, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 6.0 * GiB);
    CHECK(plan_make(&large, &rl, NULL, 0) == NGPT_ERR_NOMEM && plan_make(&medium, &rm, NULL, 0) == NGPT_OK, "at 6 GiB: large no, medium yes");
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "init_from = gpt2-medium fits"), "names gpt2-medium: %s", err);
    /* at 2.5 GiB medium does not fit: GPT-2 124M, the smallest, is named */
    r.budget = 2.5 * GiB;
    PlanRequest r124 = request(gpt2_shape(12, 12, 768, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 2.5 * GiB);
    rm.budget = 2.5 * GiB;
    CHECK(plan_make(&medium, &rm, NULL, 0) == NGPT_ERR_NOMEM && plan_make(&large, &r124, NULL, 0) == NGPT_OK, "at 2.5 GiB: medium no, 124M yes");
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "init_from = gpt2 fits ("), "names gpt2: %s", err);
    /* GPT-2 124M has no smaller size; a model from scratch is advised on n_layer and n_embd */
    PlanRequest small = request(gpt2_shape(12, 12, 768, 1), 1024, 1, 32, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 0.5 * GiB);
    small.pretrained = 1;
    CHECK(plan_make(&p, &small, err, sizeof err) == NGPT_ERR_NOMEM && !strstr(err, "smaller GPT-2") && !strstr(err, "smaller model") &&
              !strstr(err, "smaller pretrained"), "GPT-2 124M: no smaller model to name: %s", err);
    small.pretrained = 0;
    CHECK(plan_make(&p, &small, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "a smaller model (n_layer, n_embd)"), "from scratch: %s", err);
    /* sampling GPT-2 XL in 2 GiB: the sampling plan of a smaller one */
    r.inference = 1;
    r.budget = 2.0 * GiB - CUDA_SAFETY_MARGIN;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, "sampling this model") && strstr(err, "init_from = gpt2-large fits (") &&
              !strstr(err, "accumulation"), "sampling: %s", err);
}

/* The planner's edges a review's mutants got past (2026-12-03) */

/* The arenas an embedder hands in: each part of the plan within its own arena, not only the two within their sum
 * (the host arena's room must not let the device part outgrow the device arena, nor the other way round): a smaller
 * micro-batch instead of trainer_setup's "internal:" error */
static void test_arena_caps(void) {
    char err[NGPT_ERRLEN];
    Plan p, four;
    PlanRequest r = request(gpt2_shape(12, 12, 768, 1), 1024, 16, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    plan_layout(&four, &r, 4, plan_lanes(&r, 4), RECOMPUTE_NONE, default_chunk(&r), NGPT_DTYPE_F32);
    r.device_cap = (double)four.device_bytes;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_OK && p.device_bytes <= r.device_cap && p.micro_batch <= 4,
          "CPU, a device arena for micro-batch 4: the plan's %zu bytes within %.0f, micro-batch %d (%s)", p.device_bytes, r.device_cap,
          p.micro_batch, err);
    PlanRequest g = request(gpt2_shape(12, 12, 768, 1), 1024, 16, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 1e15);
    plan_layout(&four, &g, 4, 1, RECOMPUTE_NONE, default_chunk(&g), NGPT_DTYPE_F32);
    g.host_cap = (double)four.host_bytes; /* on a GPU the budget leaves the pinned host arena out: this cap alone bounds it */
    CHECK(plan_make(&p, &g, err, sizeof err) == NGPT_OK && p.host_bytes <= g.host_cap,
          "GPU, a host arena for micro-batch 4: the plan's %zu bytes within %.0f (%s)", p.host_bytes, g.host_cap, err);
}

/* Evaluation reuses the training region: its micro-batch is the largest the region holds forward only (up to the
 * sequences an evaluation reads), and its logits chunk the default, or a lane's rows where they are fewer */
static void test_eval_pass_largest(void) {
    char err[NGPT_ERRLEN];
    ModelShape m = {4, 4, 128, 65, 128, 256, 0};
    Plan p;
    PlanRequest r = request(m, 256, 1, 8, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    r.eval_seqs = 64;
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_OK && p.eval_micro_batch > p.micro_batch, "eval micro-batch %d, training's %d (%s)",
          p.eval_micro_batch, p.micro_batch, err);
    BatchLayout more;
    const int n = p.eval_micro_batch + 1;
    layout_batch(&more, &r, n, p.lanes, 0, RECOMPUTE_NONE, MIN(default_chunk(&r), lane_seqs(n, p.lanes) * r.T), p.act_bytes);
    CHECK(p.eval_micro_batch == 64 || more.end > p.region_bytes, "eval micro-batch %d, though %d sequences fit the region too", p.eval_micro_batch, n);
    CHECK(p.eval_chunk == MIN(default_chunk(&r), lane_seqs(p.eval_micro_batch, p.lanes) * r.T), "eval chunk %d", p.eval_chunk);
}

/* A refusal's "what helps" offers block_size 64, the smallest it tries, when that is what fits */
static void test_refusal_offers_block_64(void) {
    char err[NGPT_ERRLEN], want[160], b[32];
    ModelShape m = gpt2_shape(12, 12, 768, 1);
    m.maxT = 128;
    Plan q;
    PlanRequest r = request(m, 128, 8, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 1e15);
    r.pin_micro_batch = 8;
    PlanRequest at64 = r;
    at64.T = 64;
    const double need64 = plan_layout(&q, &at64, 8, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_BF16);
    r.budget = need64 + 1;
    snprintf(want, sizeof want, "a smaller block_size (block_size 64 would need %s)", fmt_bytes(b, sizeof b, need64));
    CHECK(plan_make(&q, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, want), "want '%s': %s", want, err);
}

/* Sampling: a refusal states the smallest sampling plan's need (one sequence, 128-row chunks), and a plan that fits
 * holds one sequence's KV cache in its region (else sample would fail only once it generates) */
static void test_sampling_need_and_kv_cache(void) {
    char err[NGPT_ERRLEN], want[64], b[32];
    Plan p, q;
    PlanRequest r = request(gpt2_shape(12, 12, 768, 1), 1024, 1, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 200.0 * MiB);
    r.inference = 1;
    snprintf(want, sizeof want, " needs %s ", fmt_bytes(b, sizeof b, plan_layout(&q, &r, 1, 1, RECOMPUTE_NONE, CHUNK_STEP, NGPT_DTYPE_F32)));
    CHECK(plan_make(&p, &r, err, sizeof err) == NGPT_ERR_NOMEM && strstr(err, want), "want '%s': %s", want, err);
    ModelShape xl = gpt2_shape(48, 25, 1600, 1);
    PlanRequest s = request(xl, 1024, 1, 1, NGPT_DTYPE_BF16, DEV_BACKEND_CUDA, 12.0 * GiB);
    s.inference = 1;
    CHECK(plan_make(&p, &s, err, sizeof err) == NGPT_OK, "sampling GPT-2 XL in 12 GiB: %s", err);
    ngpt_shape one = sample_shape(&xl, 1);
    size_t off[N_SAMPLE_BUFS], need = sample_layout_of(&xl, p.act_bytes, 1, 1, cuda_scratch_bytes(&one, 0), off);
    CHECK(need <= p.region_bytes, "one sequence's KV cache and scratch %zu bytes, the region %zu", need, p.region_bytes);
}

/* A float32 run keeps its AdamW moments in fp32: below the smallest fp32 plan it is refused, never trained on bf16
 * moments (which would change its loss curve against PyTorch's) */
static void test_float32_keeps_fp32_moments(void) {
    char err[NGPT_ERRLEN];
    Plan p = {0}, q;
    PlanRequest r = request(gpt2_shape(12, 12, 768, 1), 1024, 8, 1, NGPT_DTYPE_F32, DEV_BACKEND_CPU, 1e15);
    r.budget = plan_layout(&q, &r, 1, 1, RECOMPUTE_LAYERS, CHUNK_STEP, NGPT_DTYPE_F32) - 1;
    int rc = plan_make(&p, &r, err, sizeof err);
    CHECK(rc == NGPT_ERR_NOMEM, "a float32 CPU run below its smallest fp32 plan: rc %d, moments %d", rc, p.moments_dtype);
}

static void test_forced_micro_batches_same_losses(void) {
    make_dataset(50);
    enum { STEPS = 6 };
    float ref[STEPS], got[STEPS];
    losses_with_micro_batch(8, 8, ref, STEPS);
    /* 8 x 1 split smaller; and batch 2 x 4 run at micro-batches 4 and 8, above batch_size (as a GPU's planner may) */
    int batches[5] = {8, 8, 8, 2, 2}, mbs[5] = {4, 2, 1, 4, 8};
    for (int i = 0; i < 5; i++) {
        losses_with_micro_batch(batches[i], mbs[i], got, STEPS);
        for (int s = 0; s < STEPS; s++)
            CHECK(fabs(got[s] - ref[s]) <= 1e-5 * fabs(ref[s]), "batch %d, micro-batch %d step %d: loss %.8f vs %.8f", batches[i], mbs[i], s,
                  (double)got[s], (double)ref[s]);
    }
    CHECK(ref[STEPS - 1] < ref[0], "the loss should fall (%.4f -> %.4f)", (double)ref[0], (double)ref[STEPS - 1]);
}

/* the one allocation fails (here: an address-space limit): a clear error, nothing half-made */
static void test_allocation_failure(void) {
#ifdef NGPT_SANITIZE
    printf("  (skipped under the sanitizers, which reserve address space)\n");
#else
    pid_t pid = fork();
    if (pid == 0) {
        ngpt_config c;
        ngpt_config_defaults(&c);
        copy_str(c.device, sizeof c.device, "cpu");
        copy_str(c.data_dir, sizeof c.data_dir, data_dir);
        c.vocab_size = 50; c.block_size = 32; c.n_layer = 8; c.n_head = 8; c.n_embd = 1024; c.batch_size = 8;
        c.gradient_accumulation_steps = 1; c.threads = 1;
        c.max_memory = 4.0 * GiB; /* the plan fits this, but the process may not have it */
        struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
        setrlimit(RLIMIT_AS, &rl);
        ngpt_trainer *tr = NULL;
        char err[NGPT_ERRLEN];
        int rc = ngpt_trainer_create(&c, NULL, &tr, err, sizeof err);
        int ok = rc == NGPT_ERR_NOMEM && tr == NULL && strstr(err, "allocating the planned");
        if (!ok) printf("  child: rc %d: %s\n", rc, err);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "allocation failure was not reported cleanly");
#endif
}

int main(void) {
    RUN(test_parameter_counts);
    RUN(test_sizes_by_category);
    RUN(test_property_random_configs);
    RUN(test_seed_scenario);
    RUN(test_cheaper_trades_by_speed);
    RUN(test_whole_layers);
    RUN(test_micro_batch_above_batch_size);
    RUN(test_moments_dtype);
    RUN(test_hopper_ds_in_logits);
    RUN(test_inference_plan);
    RUN(test_refusal_with_pins);
    RUN(test_refusal_names_smaller_gpt2);
    RUN(test_arena_caps);
    RUN(test_eval_pass_largest);
    RUN(test_refusal_offers_block_64);
    RUN(test_sampling_need_and_kv_cache);
    RUN(test_float32_keeps_fp32_moments);
    RUN(test_forced_micro_batches_same_losses);
    RUN(test_allocation_failure);
    remove_folder(data_dir);
    return check_summary();
}
