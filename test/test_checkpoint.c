/* test_checkpoint.c: checkpoints and resume.
 *  - a run interrupted and resumed is bit-identical to an uninterrupted one (losses and parameters);
 *  - the CPU results do not depend on the thread count: 1, 2 and 3 threads, a run saved on 2 threads and
 *    resumed on 3, and a run whose thread tuner switches to one thread mid-way give the same losses and
 *    parameters bit for bit; the tuner's rule (a probe step 15% under the recent median);
 *  - ngpt_request_stop (what SIGINT calls) stops at the next layer, saves and returns NGPT_ERR_INTERRUPTED:
 *    a step over half done runs to its end, one less done is dropped (the parameters, moments and data position
 *    stay the step before's, and the step run again matches one never stopped, bit for bit); in an evaluation it
 *    drops the evaluation, saves the step (unless nothing is to be saved) and the resume runs it;
 *  - the newest keep_checkpoints (1, 2, the default 3) are kept, best.bin follows the best val loss, which the
 *    step-0 evaluation sets and only a lower one (not a tie) replaces;
 *  - a checkpoint's characters: a folder prepared again from other text with as many is refused by a resume;
 *  - bad checkpoints (not one, wrong version, truncated, bit flips, another model, a field out of its range) are
 *    clear errors; a resume checks every section's checksum and names the file, the section and its offset;
 *  - fp16's loss scale survives a save and a load;
 *  - a save is synced (the file, then its folder, then the folder with best.bin) before an older checkpoint goes;
 *  - kill -9 in the middle of a save and a full disk both leave the previous checkpoint intact; a resume
 *    removes the temporary files a killed save left;
 *  - a NaN/Inf loss or gradient never reaches the parameters (skipped, or the run halts), and a model with
 *    non-finite weights is never saved. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include "trainer_util.h"
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static char root[256], data_dir[300], out_dir[300];

static void make_dataset(int V) {
    mkdir(data_dir, 0777);
    for (int k = 0; k < 2; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", data_dir, k ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < 20000; i++) {
            uint16_t t = (uint16_t)((i * 5 + (int)(ngpt_hash(5, (uint64_t)k, (uint64_t)i) % 4)) % V);
            fwrite(&t, 2, 1, f);
        }
        fclose(f);
    }
}

static void config(ngpt_config *c) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    copy_str(c->data_dir, sizeof c->data_dir, data_dir);
    copy_str(c->out_dir, sizeof c->out_dir, out_dir);
    c->vocab_size = 40; c->block_size = 16; c->n_layer = 2; c->n_head = 2; c->n_embd = 32; c->bias = 1;
    c->batch_size = 4; c->gradient_accumulation_steps = 2; c->dropout = 0.1;
    c->learning_rate = 3e-3; c->warmup_iters = 2; c->lr_decay_iters = 20; c->min_lr = 3e-4;
    c->eval_interval = 1000; c->eval_iters = 2; c->log_interval = 1; c->threads = 2;
}

static ngpt_trainer *make(const ngpt_config *c) {
    ngpt_trainer *tr;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(c, NULL, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); return NULL; }
    return tr;
}

static float *params_of(ngpt_trainer *tr) {
    float *p = malloc(tr->plan.nparams * 4);
    copy_params_out(tr, p, tr->params);
    return p;
}

static void clear_out_dir(void) { remove_folder(out_dir); }

static void test_resume_bit_identical(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    enum { STEPS = 8, CUT = 3 };
    float straight[STEPS], resumed[STEPS];
    ngpt_trainer *a = make(&c);
    if (!a) return;
    for (int s = 0; s < STEPS; s++) CHECK(ngpt_train_step(a, &straight[s]) == 0, "%s", a->err);
    float *pa = params_of(a);

    ngpt_trainer *b = make(&c);
    if (!b) return;
    for (int s = 0; s < CUT; s++) CHECK(ngpt_train_step(b, &resumed[s]) == 0, "%s", b->err);
    b->best_val_loss = 2.71828f; /* as if evaluated 5 times: the record a resumed run's best.bin is held against */
    b->eval_count = 5;
    CHECK(checkpoint_save(b, 0) == 0, "save: %s", b->err);
    ngpt_stats at_cut, after;
    ngpt_get_stats(b, &at_cut);
    ngpt_trainer_free(b);

    copy_str(c.init_from, sizeof c.init_from, "resume");
    ngpt_trainer *r = make(&c);
    if (!r) return;
    CHECK(r->step == CUT && r->best_val_loss == 2.71828f && r->eval_count == 5, "resumed at step %d, best val loss %g, %d evaluations",
          r->step, (double)r->best_val_loss, r->eval_count);
    /* the stats of the last step come back with it: its learning rate (warming up here, so each step's differs) */
    ngpt_get_stats(r, &after);
    CHECK(after.lr == at_cut.lr && after.lr > 0 && after.last_loss == at_cut.last_loss, "resumed stats: lr %g (saved %g), last loss %g (saved %g)",
          (double)after.lr, (double)at_cut.lr, (double)after.last_loss, (double)at_cut.last_loss);
    for (int s = CUT; s < STEPS; s++) CHECK(ngpt_train_step(r, &resumed[s]) == 0, "%s", r->err);
    float *pr = params_of(r);
    for (int s = 0; s < STEPS; s++) CHECK(resumed[s] == straight[s], "step %d: loss %.9g resumed, %.9g straight", s, (double)resumed[s], (double)straight[s]);
    CHECK(!memcmp(pa, pr, a->plan.nparams * 4), "parameters differ after resume");
    /* the evaluation after a resume uses the same batches as the uninterrupted run's */
    float ta, va, tb, vb;
    CHECK(ngpt_evaluate(a, &ta, &va) == 0 && ngpt_evaluate(r, &tb, &vb) == 0 && ta == tb && va == vb, "eval after resume differs");
    /* and fresh windows at every evaluation: the same parameters evaluated at another step see other batches */
    float tc, vc;
    a->step += 2;
    CHECK(ngpt_evaluate(a, &tc, &vc) == 0 && tc != ta && vc != va, "the evaluation of step %d drew step %d's windows: %g %g", a->step, a->step - 2,
          (double)tc, (double)vc);
    ngpt_trainer_free(a);
    ngpt_trainer_free(r);
    free(pa);
    free(pr);
}

static void test_stop_request_saves(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.max_iters = 100;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    float loss;
    CHECK(ngpt_train_step(tr, &loss) == 0, "step 0: %s", tr->err); /* past the evaluation of step 0 */
    ngpt_request_stop(tr); /* as the SIGINT handler does: made before the step begins, it runs none of it */
    int rc = ngpt_train(tr);
    CHECK(rc == NGPT_ERR_INTERRUPTED && strstr(tr->err, "stopped at step 1;") && strstr(tr->err, "init_from = resume") && strstr(tr->err, out_dir),
          "rc %d: %s", rc, tr->err);
    CHECK(tr->step == 1, "stopped after %d steps", tr->step);
    char path[512];
    checkpoint_path(out_dir, 1, path, sizeof path);
    CHECK(file_exists(path), "no checkpoint at %s", path);
    /* a return that fails before any step (out_dir a file) uses a request up too */
    ngpt_request_stop(tr);
    char saved_out[sizeof tr->cfg.out_dir];
    copy_str(saved_out, sizeof saved_out, tr->cfg.out_dir);
    snprintf(tr->cfg.out_dir, sizeof tr->cfg.out_dir, "%.200s/ckpt_000000001.bin", saved_out); /* a file */
    rc = ngpt_train(tr);
    CHECK(rc == NGPT_ERR_IO, "out_dir a file: rc %d: %s", rc, tr->err);
    copy_str(tr->cfg.out_dir, sizeof tr->cfg.out_dir, saved_out);
    /* the return used the request up: the next call runs to max_iters, as a resume would */
    tr->cfg.max_iters = 4;
    rc = ngpt_train(tr);
    CHECK(rc == NGPT_OK && tr->step == 5, "after a stop, ngpt_train again: rc %d at step %d (%s)", rc, tr->step, tr->err);
    ngpt_trainer_free(tr);
}

/* the newest ckpt_<step>.bin in out_dir's listing (-1: none) */
static long long newest_checkpoint_step(void) {
    long long newest;
    return checkpoint_list(out_dir, &newest, 1) ? newest : -1;
}

/* log.jsonl's lines that hold s */
static int log_lines_with(const char *s) {
    char path[400], line[1024];
    snprintf(path, sizeof path, "%s/log.jsonl", out_dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, s) != NULL;
    if (f) fclose(f);
    return n;
}

/* ngpt_train in a thread of its own */
typedef struct {
    ngpt_trainer *tr;
    int rc;
} TrainThread;
static void *train_thread(void *arg) {
    TrainThread *t = (TrainThread *)arg;
    t->rc = ngpt_train(t->tr);
    return NULL;
}

/* ngpt_train(tr) in a thread of its own, asked to stop 300 ms in: its return code, and the seconds it took in *took */
static int train_stopped_after_300ms(ngpt_trainer *tr, double *took) {
    TrainThread t = {tr, -1};
    pthread_t th;
    double t0 = now_seconds();
    if (pthread_create(&th, NULL, train_thread, &t)) return -1;
    usleep(300000);
    ngpt_request_stop(tr);
    pthread_join(th, NULL);
    *took = now_seconds() - t0;
    return t.rc;
}

/* a progress callback that asks its trainer (*ctx) to stop at each evaluation */
static void stop_at_evaluation(void *ctx, const ngpt_progress *p) {
    if (p->is_eval) ngpt_request_stop(*(ngpt_trainer **)ctx);
}

/* ngpt_train called from its own progress callback: refused as a call at the wrong time, not as another run holding
 * out_dir (its lock, which the outer call holds: "in use by another run"), and the outer run goes on to its end */
typedef struct {
    ngpt_trainer *tr;
    int rc;
    char err[NGPT_ERRLEN];
} Reentry;
static void train_again(void *ctx, const ngpt_progress *p) {
    Reentry *r = (Reentry *)ctx;
    if (p->is_eval || r->rc != -1) return;
    r->rc = ngpt_train(r->tr);
    copy_str(r->err, sizeof r->err, r->tr->err);
}
static void test_train_from_its_callback(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.max_iters = 3;
    Reentry r = {NULL, -1, ""};
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.progress = train_again;
    opt.ctx = &r;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, &opt, &r.tr, err, sizeof err)) { CHECK(0, "create: %s", err); return; }
    int rc = ngpt_train(r.tr);
    CHECK(r.rc == NGPT_ERR_STATE && strstr(r.err, "ngpt_train was called while this trainer's ngpt_train runs"), "the inner call: rc %d: %s", r.rc,
          r.err);
    CHECK(rc == NGPT_OK && r.tr->step == 4 /* nanoGPT's loop: max_iters + 1 steps */, "the outer run ends: rc %d at step %d: %s", rc, r.tr->step, r.tr->err);
    ngpt_trainer_free(r.tr);
}

/* A stop requested during an evaluation: the evaluation is dropped (no log line, no best val loss, no
 * count), the step's state is saved unless nothing is to be saved (step 0; eval_only; out_dir's newest is
 * that step's), and the next ngpt_train runs the evaluation it dropped. A run stopped there and resumed
 * matches one never stopped, bit for bit. */
static void test_stop_during_evaluation(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.eval_interval = 3;
    c.max_iters = 5;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    /* at step 0: the evaluation is the first thing ngpt_train does, and nothing is trained to save */
    float best_before = tr->best_val_loss;
    ngpt_request_stop(tr);
    int rc = ngpt_train(tr);
    CHECK(rc == NGPT_ERR_INTERRUPTED && tr->step == 0 && strstr(tr->err, "stopped at step 0, during its evaluation") &&
              strstr(tr->err, "nothing to save"),
          "stop in the step-0 evaluation: rc %d at step %d: %s", rc, tr->step, tr->err);
    CHECK(tr->eval_count == 0 && tr->best_val_loss == best_before && newest_checkpoint_step() == -1 && log_lines_with("val_loss") == 0,
          "a dropped evaluation leaves no trace: %d evaluations, best %g, newest checkpoint %lld, %d eval lines", tr->eval_count,
          (double)tr->best_val_loss, newest_checkpoint_step(), log_lines_with("val_loss"));
    /* at step 3, in the middle of the run: the step is saved, and its evaluation left to the resume */
    float loss;
    for (int i = 0; i < 3; i++) CHECK(ngpt_train_step(tr, &loss) == 0, "step %d: %s", i, tr->err);
    ngpt_request_stop(tr);
    rc = ngpt_train(tr);
    CHECK(rc == NGPT_ERR_INTERRUPTED && tr->step == 3 && strstr(tr->err, "stopped at step 3, during its evaluation (a resume runs it again)") &&
              strstr(tr->err, "init_from = resume"),
          "stop in the step-3 evaluation: rc %d at step %d: %s", rc, tr->step, tr->err);
    CHECK(tr->eval_count == 0 && tr->best_val_loss == best_before && newest_checkpoint_step() == 3 && log_lines_with("val_loss") == 0,
          "%d evaluations, newest checkpoint %lld", tr->eval_count, newest_checkpoint_step());
    char path[512];
    checkpoint_path(out_dir, 3, path, sizeof path);
    struct stat before, after;
    CHECK(stat(path, &before) == 0, "stat %s", path);
    /* again at the same evaluation: out_dir's newest is this step's, so nothing is written */
    usleep(20000);
    ngpt_request_stop(tr);
    rc = ngpt_train(tr);
    CHECK(rc == NGPT_ERR_INTERRUPTED && tr->step == 3 && strstr(tr->err, "during its evaluation"), "again: rc %d: %s", rc, tr->err);
    CHECK(stat(path, &after) == 0 && after.st_ino == before.st_ino && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
          "the checkpoint of step 3 is not written twice (a save renames a new file into place)");
    ngpt_trainer_free(tr);

    /* the resume evaluates step 3 and trains on to the end: as a run never stopped */
    ngpt_config r = c;
    copy_str(r.init_from, sizeof r.init_from, "resume");
    ngpt_trainer *resumed = make(&r);
    if (!resumed) return;
    CHECK(resumed->step == 3, "resumed at step %d", resumed->step);
    CHECK(ngpt_train(resumed) == NGPT_OK && resumed->step == 6, "resumed run: %s", resumed->err);
    float *p_resumed = params_of(resumed);
    float best_resumed = resumed->best_val_loss;
    ngpt_trainer_free(resumed);

    char other_out[sizeof out_dir + 8];
    snprintf(other_out, sizeof other_out, "%s_whole", out_dir);
    CHECK(!remove_folder(other_out), "remove %s", other_out);
    ngpt_config w = c;
    copy_str(w.out_dir, sizeof w.out_dir, other_out);
    ngpt_trainer *whole = make(&w);
    if (!whole) { free(p_resumed); return; }
    CHECK(ngpt_train(whole) == NGPT_OK && whole->step == 6, "the run never stopped: %s", whole->err);
    float *p_whole = params_of(whole);
    CHECK(memcmp(p_resumed, p_whole, whole->plan.nparams * 4) == 0 && best_resumed == whole->best_val_loss,
          "stopped in an evaluation and resumed = never stopped (best val loss %.9g vs %.9g)", (double)best_resumed, (double)whole->best_val_loss);
    free(p_resumed);
    free(p_whole);
    ngpt_trainer_free(whole);
    CHECK(!remove_folder(other_out), "remove %s", other_out);

    /* a request from the evaluation's own progress callback: the run stops after it, before another step */
    clear_out_dir();
    ngpt_trainer *cb = NULL;
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.progress = stop_at_evaluation;
    opt.ctx = &cb;
    char err[NGPT_ERRLEN];
    CHECK(ngpt_trainer_create(&c, &opt, &cb, err, sizeof err) == 0, "create: %s", err);
    if (!cb) return;
    for (int i = 0; i < 3; i++) CHECK(ngpt_train_step(cb, &loss) == 0, "step %d: %s", i, cb->err);
    rc = ngpt_train(cb);
    CHECK(rc == NGPT_ERR_INTERRUPTED && cb->step == 3 && cb->eval_count == 1 && strstr(cb->err, "stopped at step 3, after its evaluation;") &&
              newest_checkpoint_step() == 3,
          "a stop from the evaluation's callback: rc %d at step %d, newest checkpoint %lld: %s", rc, cb->step, newest_checkpoint_step(), cb->err);
    ngpt_trainer_free(cb);

    /* from another thread in the middle of a long evaluation (4e6 sequences: a minute or more): it stops within
     * a micro-batch, and the evaluation leaves no trace */
    clear_out_dir();
    ngpt_config longer = c;
    longer.eval_iters = 1000000;
    ngpt_trainer *mid = make(&longer);
    if (!mid) return;
    for (int i = 0; i < 3; i++) CHECK(ngpt_train_step(mid, &loss) == 0, "step %d: %s", i, mid->err);
    double took = 0;
    rc = train_stopped_after_300ms(mid, &took);
    CHECK(rc == NGPT_ERR_INTERRUPTED && strstr(mid->err, "stopped at step 3, during its evaluation") && mid->eval_count == 0 && took < 10,
          "stopped from a thread in %.1f s: rc %d: %s", took, rc, mid->err);
    ngpt_trainer_free(mid);

    /* eval_only: nothing is saved */
    clear_out_dir();
    ngpt_config e = c;
    e.eval_only = 1;
    ngpt_trainer *ev = make(&e);
    if (!ev) return;
    ngpt_request_stop(ev);
    rc = ngpt_train(ev);
    CHECK(rc == NGPT_ERR_INTERRUPTED && strstr(ev->err, "eval_only saves nothing") && newest_checkpoint_step() == -1, "eval_only: rc %d: %s", rc,
          ev->err);
    ngpt_trainer_free(ev);
}

/* a step of one micro-batch (GPT-2 124M's on a CPU takes minutes), and an evaluation's micro-batch, are left
 * midway when a stop comes while they run (between two blocks): they waited for their end before */
static void eval_fill_then_stop(ngpt_trainer *tr, int k, void *ctx, int *B) {
    (void)k;
    *B = tr->plan.eval_micro_batch;
    memset(tr->h_tokens, 0, (size_t)*B * tr->plan.req.T * 4);
    memset(tr->h_targets, 0, (size_t)*B * tr->plan.req.T * 4);
    if (ctx) ngpt_request_stop(tr);
}
static void fill_then_stop(ngpt_trainer *tr, int micro, void *ctx);
static void test_stop_inside_micro_batch(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.gradient_accumulation_steps = 1;
    ngpt_trainer *a = make(&c);
    if (!a) return;
    CHECK(a->plan.grad_accum == 1, "one micro-batch a step, not %d", a->plan.grad_accum);
    CHECK(ngpt_train_step(a, NULL) == 0, "step 0: %s", a->err);
    float *before = params_of(a);
    int stop_at = 0, ran = -1;
    int rc = train_loop_step(a, fill_then_stop, &stop_at, &ran);
    float *after = params_of(a);
    CHECK(rc == NGPT_ERR_INTERRUPTED && ran == 0 && a->micro_left && a->step == 1 && !memcmp(before, after, a->plan.nparams * 4),
          "a one-micro-batch step left midway: rc %d, %d ran, step %d", rc, ran, a->step);
    CHECK(mkdir_p(out_dir) == 0, "mkdir %s", out_dir);
    rc = stop_in_step(a, ran);
    CHECK(rc == NGPT_ERR_INTERRUPTED && strstr(a->err, "stopped at step 1, left midway through micro-batch 1 of its 1 (a resume runs it again)"),
          "rc %d: %s", rc, a->err);
    free(before);
    free(after);
    /* an evaluation's micro-batch: left (and then said interrupted) with the stop, whole without */
    for (int stop = 0; stop < 2; stop++) {
        atomic_store(&a->stop_requested, 0);
        use_scratch(a, &a->plan.eval);
        run_micro_batches(a, &a->plan.eval, 2, 0, 0.0f, eval_fill_then_stop, stop ? a : NULL, &a->stop_requested, &ran);
        CHECK(stop ? ran == 0 && a->micro_left : ran == 2 && !a->micro_left, "evaluation, stop %d: %d of 2 ran, left %d", stop, ran,
              (int)a->micro_left);
    }
    ngpt_trainer_free(a);
}

/* the training batches, with a stop requested while micro-batch *ctx is filled */
static void fill_then_stop(ngpt_trainer *tr, int micro, void *ctx) {
    fill_from_train(tr, micro, NULL);
    if (micro == *(const int *)ctx) ngpt_request_stop(tr);
}

/* A stop request met in the middle of a step of 4 micro-batches: up to the third (half run) the step is left
 * there, inside the micro-batch running (between two blocks), and changes nothing (parameters, moments, the
 * batches' random state), the stop saves the step before, and both the trainer going on and a resume from that
 * checkpoint run the step again as a trainer never stopped does, bit for bit; in the fourth it runs to its end,
 * and so does step 0, which follows an evaluation. Then
 * from another thread, in a step of 60,000 micro-batches (about 20 s): ngpt_train returns within seconds, at the
 * step before. */
static void test_stop_in_step(void) {
    CHECK(stop_leaves_step(0, 1) && stop_leaves_step(2, 4) && !stop_leaves_step(3, 4) && stop_leaves_step(2, 5) && !stop_leaves_step(3, 5) &&
              !stop_leaves_step(1000000000, 1999999999),
          "a step is left while no more than half of it has run");
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.gradient_accumulation_steps = 4;
    ngpt_trainer *a = make(&c), *b = make(&c);
    if (!a || !b) { ngpt_trainer_free(a); ngpt_trainer_free(b); return; }
    CHECK(a->plan.grad_accum == 4, "the plan runs 4 micro-batches a step, not %d", a->plan.grad_accum);
    float la = 0, lb = 0, lr = 0;
    int stop_at = 0, ran = -1;
    int rc = train_loop_step(a, fill_then_stop, &stop_at, &ran); /* step 0: after its evaluation */
    CHECK(rc == NGPT_OK && ran == 4 && a->step == 1, "stopped in step 0, which follows an evaluation: rc %d, %d ran, step %d (%s)", rc, ran,
          a->step, a->err);
    atomic_store(&a->stop_requested, 0);
    CHECK(ngpt_train_step(b, &lb) == 0, "step 0: %s", b->err);
    float *before = params_of(a);
    uint64_t counter = a->rng_train.counter;
    stop_at = 1;
    rc = train_loop_step(a, fill_then_stop, &stop_at, &ran);
    float *after = params_of(a);
    CHECK(rc == NGPT_ERR_INTERRUPTED && ran == 1 && a->micro_left && a->step == 1 && a->rng_train.counter == counter &&
              !memcmp(before, after, a->plan.nparams * 4),
          "stopped in micro-batch 1 of 4, left midway: rc %d, %d ran, step %d, batches' counter %llu (was %llu), parameters %s", rc, ran, a->step,
          (unsigned long long)a->rng_train.counter, (unsigned long long)counter, memcmp(before, after, a->plan.nparams * 4) ? "changed" : "kept");
    /* what ngpt_train does then: the step before is saved */
    CHECK(mkdir_p(out_dir) == 0, "mkdir %s", out_dir);
    rc = stop_in_step(a, ran);
    CHECK(rc == NGPT_ERR_INTERRUPTED && strstr(a->err, "stopped at step 1, left midway through micro-batch 2 of its 4 (a resume runs it again); the checkpoint is saved") &&
              newest_checkpoint_step() == 1,
          "the stop saves step 1: rc %d, newest checkpoint %lld: %s", rc, newest_checkpoint_step(), a->err);
    atomic_store(&a->stop_requested, 0);
    stop_at = 3;
    rc = train_loop_step(a, fill_then_stop, &stop_at, &ran);
    CHECK(rc == NGPT_OK && ran == 4 && !a->micro_left && a->step == 2, "stopped in micro-batch 3 of 4: rc %d, %d ran, step %d (%s)", rc, ran, a->step,
          a->err);
    atomic_store(&a->stop_requested, 0);
    CHECK(ngpt_train_step(b, &lb) == 0 && ngpt_train_step(a, &la) == 0 && ngpt_train_step(b, &lb) == 0, "steps: %s %s", a->err, b->err);
    ngpt_config rc1 = c;
    copy_str(rc1.init_from, sizeof rc1.init_from, "resume");
    ngpt_trainer *r = make(&rc1);
    CHECK(r && r->step == 1 && ngpt_train_step(r, &lr) == 0 && ngpt_train_step(r, &lr) == 0, "resumed from the stop's checkpoint: %s",
          r ? r->err : "not made");
    float *pa = params_of(a), *pb = params_of(b), *pr = r ? params_of(r) : NULL;
    CHECK(la == lb && !memcmp(pa, pb, a->plan.nparams * 4), "the dropped step run again = never stopped (loss %.9g vs %.9g)", (double)la, (double)lb);
    CHECK(pr && lr == lb && !memcmp(pr, pb, a->plan.nparams * 4), "resumed from the stop's checkpoint = never stopped (loss %.9g vs %.9g)",
          (double)lr, (double)lb);
    free(before);
    free(after);
    free(pa);
    free(pb);
    free(pr);
    ngpt_trainer_free(r);
    ngpt_trainer_free(b);

    /* from another thread, in the huge step of a run resumed at step 3: out_dir's newest checkpoint is that step's
     * (a saved it), so the stop writes nothing */
    char path[600];
    checkpoint_path(out_dir, 3, path, sizeof path);
    CHECK(ngpt_save(a, path) == 0, "save %s: %s", path, a->err);
    float *saved = params_of(a);
    ngpt_trainer_free(a);
    struct stat st_saved, st_after;
    CHECK(stat(path, &st_saved) == 0, "stat %s", path);
    ngpt_config hc = rc1;
    hc.gradient_accumulation_steps = 60000;
    ngpt_trainer *huge = make(&hc);
    if (!huge) { free(saved); return; }
    counter = huge->rng_train.counter;
    double took = 0;
    rc = train_stopped_after_300ms(huge, &took);
    char want[64], left[64];
    snprintf(want, sizeof want, "of its %d micro-batches run (a resume runs it again)", huge->plan.grad_accum);
    snprintf(left, sizeof left, "of its %d (a resume runs it again)", huge->plan.grad_accum);
    float *kept = params_of(huge);
    /* (before its first micro-batch, on a host that ran the thread late, it says so without the count; met
     * inside a micro-batch, it says which) */
    int says = strstr(huge->err, "stopped at step 3;") ||
               (strstr(huge->err, "stopped at step 3, ") && (strstr(huge->err, want) || (strstr(huge->err, "left midway through micro-batch ") &&
                                                                                         strstr(huge->err, left))));
    CHECK(rc == NGPT_ERR_INTERRUPTED && huge->step == 3 && says && took < 10 &&
              huge->rng_train.counter == counter && !memcmp(saved, kept, huge->plan.nparams * 4),
          "stopped from a thread in %.1f s: rc %d at step %d, batches' counter %llu (was %llu): %s", took, rc, huge->step,
          (unsigned long long)huge->rng_train.counter, (unsigned long long)counter, huge->err);
    CHECK(stat(path, &st_after) == 0 && st_after.st_ino == st_saved.st_ino && newest_checkpoint_step() == 3,
          "the checkpoint of step 3 is not written again; newest %lld", newest_checkpoint_step());
    free(saved);
    free(kept);
    ngpt_trainer_free(huge);
}

/* dir prepared (character level) from 3000 characters: the 26 from first on, and with extra, one more after them */
static void prepare_letters(const char *dir, char first, int extra) {
    char path[400], err[NGPT_ERRLEN];
    snprintf(path, sizeof path, "%s/letters.txt", root);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < 3000; i++) fputc(first + (int)(ngpt_hash(9, 0, (uint64_t)i) % (26u + (extra != 0))), f);
    if (f) fclose(f);
    CHECK(ngpt_prepare(path, dir, NULL, 0.1, err, sizeof err) == 0, "prepare %s: %s", dir, err);
}

/* the checkpoint at path as one written before checkpoints kept their characters: none in its state (its
 * section's checksum made again) */
static void forget_characters(const char *path) {
    FILE *f = fopen(path, "r+b");
    CkptHeader h;
    CkptState st;
    int ok = f && fread(&h, sizeof h, 1, f) == 1;
    const CkptSection *sec = &h.sec[SEC_STATE - 1];
    ok = ok && sec->bytes == sizeof st && !fseek(f, (long)sec->offset, SEEK_SET) && fread(&st, sizeof st, 1, f) == 1;
    st.chars = st.chars_n = 0;
    Hash64 hs;
    hash_init(&hs);
    hash_update(&hs, &st, sizeof st);
    h.sec[SEC_STATE - 1].checksum = hash_final(&hs);
    ok = ok && !fseek(f, (long)sec->offset, SEEK_SET) && fwrite(&st, sizeof st, 1, f) == 1 && !fseek(f, 0, SEEK_SET) && fwrite(&h, sizeof h, 1, f) == 1;
    if (f) fclose(f);
    CHECK(ok, "rewrite %s's state", path);
}

/* A checkpoint keeps its characters' checksum: a folder prepared again from other text with as many characters
 * is refused by a resume, naming the checkpoint, both folders' meta.bin and the way out, where the counts alone
 * agree; characters added after the run's (into the ids a model wider than its characters left unused) resume;
 * a checkpoint written before the checksum was kept is not checked; ngpt_load refuses it too, into a trainer or a
 * sampling trainer on the other characters, and reads it for export, which reads no data. sample:
 * test_cli's test_data_prepared_again. */
static void test_other_characters(void) {
    clear_out_dir();
    char chars[400], path[600], err[NGPT_ERRLEN];
    snprintf(chars, sizeof chars, "%s/letters", root);
    prepare_letters(chars, 'a', 0);
    ngpt_config c;
    config(&c);
    c.vocab_size = 30; /* the 26 characters, and ids for more */
    copy_str(c.data_dir, sizeof c.data_dir, chars);
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    float loss;
    CHECK(tr->charvocab && tr->charvocab->n == 26 && ngpt_train_step(tr, &loss) == 0, "26 characters, one step: %s", tr->err);
    checkpoint_path(out_dir, 1, path, sizeof path);
    CHECK(mkdir_p(out_dir) == 0 && ngpt_save(tr, path) == 0, "save: %s", tr->err);
    ngpt_trainer_free(tr);
    ngpt_config r = c;
    copy_str(r.init_from, sizeof r.init_from, "resume");

    prepare_letters(chars, 'A', 0); /* 26 other characters */
    ngpt_trainer *res = NULL;
    int rc = ngpt_trainer_create(&r, NULL, &res, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, path) && strstr(err, "was trained on other characters than") && strstr(err, "/letters/meta.bin holds (26) (its run read ") &&
              strstr(err, "start a new run in another out_dir"),
          "resume on other characters: rc %d: %s", rc, err);
    ngpt_trainer_free(res);
    ngpt_trainer *other = make(&c); /* a new trainer on those characters: ngpt_load refuses the checkpoint as the resume did */
    if (other) {
        float *before = params_of(other);
        rc = ngpt_load(other, path);
        float *after = params_of(other);
        CHECK(rc == NGPT_ERR_ARG && strstr(other->err, "was trained on other characters than") &&
                  strstr(other->err, "Load it into a trainer on the data it was trained on") && !memcmp(before, after, other->plan.nparams * 4),
              "ngpt_load on other characters: rc %d: %s", rc, other->err);
        free(before);
        free(after);
        ngpt_trainer_free(other);
    }
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.sample_only = 1;
    ngpt_trainer *s = NULL; /* a sampling trainer reads meta.bin to decode: refused as the other; export's reads no data: loads */
    CHECK(ngpt_trainer_create(&c, &opt, &s, err, sizeof err) == 0 && ngpt_load(s, path) == NGPT_ERR_ARG &&
              strstr(s->err, "was trained on other characters than"),
          "ngpt_load into a sampling trainer on other characters: %s", s ? s->err : err);
    ngpt_trainer_free(s);
    s = NULL;
    CHECK(trainer_create(&c, &opt, 1, &s, err, sizeof err) == 0 && ngpt_load(s, path) == 0, "ngpt_load reads the weights for export: %s",
          s ? s->err : err);
    ngpt_trainer_free(s);

    prepare_letters(chars, 'a', 1); /* the run's 26, and '{' after them */
    res = make(&r);
    CHECK(res && res->step == 1 && res->charvocab->n == 27, "resume with a character added after the run's: step %d", res ? res->step : -1);
    ngpt_trainer_free(res);

    prepare_letters(chars, 'A', 0);
    forget_characters(path);
    res = make(&r);
    CHECK(res && res->step == 1, "an older checkpoint, without characters, resumes: step %d", res ? res->step : -1);
    ngpt_trainer_free(res);
}

/* keep_checkpoints = 1, 2 and the default 3: exactly that many ckpt_<step>.bin stay, and best.bin besides */
typedef struct {
    int n, step[32];
    float val[32];
} Evals;
static void record_evals(void *ctx, const ngpt_progress *p) {
    Evals *e = (Evals *)ctx;
    if (p->is_eval && e->n < 32) { e->step[e->n] = p->step; e->val[e->n++] = p->val_loss; }
}

/* grad_clip = 0 turns clipping off: a step is the one an unreachable clip gives, bit for bit */
static void test_grad_clip_off(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.dropout = 0;
    float *p[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
        c.grad_clip = k ? 1e9 : 0; /* the largest allowed: far above these norms */
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        for (int i = 0; i < 3; i++) CHECK(ngpt_train_step(tr, NULL) == 0, "%s", tr->err);
        p[k] = params_of(tr);
        n = tr->plan.nparams;
        ngpt_trainer_free(tr);
    }
    CHECK(!memcmp(p[0], p[1], 4 * n), "grad_clip 0 differs from a clip never reached");
    free(p[0]);
    free(p[1]);
}

static void test_keep_last_and_best(void) {
    for (int keep = 1; keep <= 3; keep++) {
        clear_out_dir();
        ngpt_config c;
        config(&c);
        c.eval_interval = 2;
        c.max_iters = 12;
        c.always_save_checkpoint = 1;
        char v[16], err[NGPT_ERRLEN];
        snprintf(v, sizeof v, "%d", keep);
        if (keep < 3) CHECK(ngpt_config_set(&c, "keep_checkpoints", v, err, sizeof err) == 0, "%s", err);
        CHECK(c.keep_checkpoints == keep, "keep_checkpoints %d, expected %d", c.keep_checkpoints, keep);
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        CHECK(ngpt_train(tr) == 0, "%s", tr->err);
        long long steps[16];
        int n = checkpoint_list(out_dir, steps, 16);
        /* evaluations at 2, 4, .., 12 save; the run ends after step 12 (nanoGPT's max_iters + 1 steps) and its
         * final state, step 13, is saved too */
        CHECK(n == keep && steps[n - 1] == 13 && (keep == 1 || steps[n - 2] == 12), "keep %d: %d checkpoints kept, newest %lld", keep, n,
              n ? steps[n - 1] : -1);
        char best[512];
        snprintf(best, sizeof best, "%s/best.bin", out_dir);
        CkptReader r;
        CHECK(checkpoint_open(&r, best, err, sizeof err) == 0, "keep %d: best.bin: %s", keep, err);
        if (r.f) {
            CHECK(fabs(r.state.best_val_loss - tr->best_val_loss) < 1e-6, "best.bin holds val %.5f, the best was %.5f", r.state.best_val_loss,
                  (double)tr->best_val_loss);
            fclose(r.f);
        }
        ngpt_trainer_free(tr);
    }
    /* with always_save_checkpoint every evaluation saves, but best.bin stays the best one's: a run resumed at a
     * learning rate far too high evaluates worse, and best.bin stays the step before */
    {
        clear_out_dir();
        ngpt_config c;
        config(&c);
        c.eval_interval = 2; c.max_iters = 2; c.always_save_checkpoint = 1;
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        CHECK(ngpt_train(tr) == 0, "%s", tr->err);
        float best_val = tr->best_val_loss;
        ngpt_trainer_free(tr);
        copy_str(c.init_from, sizeof c.init_from, "resume");
        c.max_iters = 4; c.learning_rate = 10; c.warmup_iters = 0; c.decay_lr = 0;
        Evals ev = {0};
        ngpt_options opt;
        memset(&opt, 0, sizeof opt);
        opt.progress = record_evals;
        opt.ctx = &ev;
        char err[NGPT_ERRLEN], path[512];
        if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); return; }
        CHECK(ngpt_train(tr) == 0, "%s", tr->err);
        ngpt_trainer_free(tr);
        snprintf(path, sizeof path, "%s/best.bin", out_dir);
        CkptReader r;
        CHECK(checkpoint_open(&r, path, err, sizeof err) == 0, "best.bin: %s", err);
        CHECK(ev.n == 1 && ev.step[0] == 4 && ev.val[0] > best_val && r.f && r.state.step == 2,
              "best.bin is of step %lld, expected 2 (val %.4f), not the worse evaluation at step %d (val %.4f)", r.f ? (long long)r.state.step : -1LL,
              (double)best_val, ev.n ? ev.step[0] : -1, ev.n ? (double)ev.val[0] : 0.0);
        if (r.f) fclose(r.f);
    }
    /* out of range, by name and set directly */
    ngpt_config c;
    config(&c);
    char err[NGPT_ERRLEN] = "";
    CHECK(ngpt_config_set(&c, "keep_checkpoints", "0", err, sizeof err) == NGPT_ERR_ARG && strstr(err, "keep_checkpoints") && strstr(err, "1000"),
          "keep_checkpoints = 0: %s", err);
    c.keep_checkpoints = 1001;
    ngpt_trainer *tr = NULL;
    CHECK(ngpt_trainer_create(&c, NULL, &tr, err, sizeof err) == NGPT_ERR_ARG && strstr(err, "keep_checkpoints = '1001': must be an integer in [1, 1000]"), "%s", err);
    ngpt_trainer_free(tr);
}

/* nanoGPT's best_val_loss: the step-0 evaluation sets it and saves nothing (iter_num > 0), a later one saves, as the
 * best, only when strictly below it. Learning rate 10 makes step 2's evaluation worse than step 0's; learning rate 0, on
 * data whose windows are all one token repeated, makes it tie step 0's. Either way step 2 saves nothing, no best.bin is
 * made, the record stays step 0's, and (always_save_checkpoint off) the run's only checkpoint is its final state, step 3. */
static void test_best_val_loss_from_step_0(void) {
    char same_dir[300];
    snprintf(same_dir, sizeof same_dir, "%s/one_token", root);
    mkdir(same_dir, 0777);
    for (int k = 0; k < 2; k++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", same_dir, k ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < 2000; i++) fwrite(&(uint16_t){7}, 2, 1, f);
        fclose(f);
    }
    for (int tie = 0; tie < 2; tie++) {
        clear_out_dir();
        ngpt_config c;
        config(&c);
        if (tie) copy_str(c.data_dir, sizeof c.data_dir, same_dir);
        c.eval_interval = 2; c.max_iters = 2; c.dropout = 0; c.always_save_checkpoint = 0;
        c.learning_rate = tie ? 0 : 10; c.warmup_iters = 0; c.decay_lr = 0;
        Evals ev = {0};
        ngpt_options opt;
        memset(&opt, 0, sizeof opt);
        opt.progress = record_evals;
        opt.ctx = &ev;
        ngpt_trainer *tr;
        char err[NGPT_ERRLEN], best[512];
        if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { CHECK(0, "create: %s", err); break; }
        CHECK(ngpt_train(tr) == 0, "%s", tr->err);
        const char *what = tie ? "learning rate 0, one token" : "learning rate 10";
        CHECK(ev.n == 2 && ev.step[0] == 0 && ev.step[1] == 2 && (tie ? ev.val[1] == ev.val[0] : ev.val[1] > ev.val[0]),
              "%s: %d evaluations, val %.6f at step 0, %.6f at step 2", what, ev.n, ev.n ? (double)ev.val[0] : 0.0, ev.n > 1 ? (double)ev.val[1] : 0.0);
        CHECK(ev.n && tr->best_val_loss == ev.val[0], "%s: best val loss %.6f, step 0's was %.6f", what, (double)tr->best_val_loss, (double)ev.val[0]);
        long long steps[4];
        int n = checkpoint_list(out_dir, steps, 4);
        snprintf(best, sizeof best, "%s/best.bin", out_dir);
        CHECK(n == 1 && steps[0] == 3 && !file_exists(best), "%s: %d checkpoints (steps %lld, %lld); best.bin %s", what, n, n ? steps[0] : -1, n > 1 ? steps[1] : -1,
              file_exists(best) ? "made" : "not made");
        ngpt_trainer_free(tr);
    }
    remove_folder(same_dir);
}

/* Two trainers made on one out_dir before either trains (two runs started together): the one that trains
 * second finds the first's checkpoints and is refused, a new run as a resume, and the first's files stay */
static void test_out_dir_filled_after_create(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.max_iters = 3;
    c.eval_interval = 2;
    ngpt_trainer *first = make(&c), *second = make(&c);
    if (!first || !second) return;
    CHECK(ngpt_train(first) == 0, "%s", first->err);
    long long before[8], after[8];
    int n_before = checkpoint_list(out_dir, before, 8);
    CHECK(n_before > 0, "the first run saved");
    CHECK(ngpt_train(second) == NGPT_ERR_ARG && strstr(second->err, "holds another run's checkpoints") && second->step == 0,
          "a new run made before the other trained is refused: %s", second->err);
    int n_after = checkpoint_list(out_dir, after, 8);
    CHECK(n_after == n_before && !memcmp(before, after, (size_t)n_after * sizeof *after), "the first run's checkpoints stay");
    ngpt_trainer_free(first);
    ngpt_trainer_free(second);
    /* two resumes of that folder: the one training second would continue from an older step than the folder's newest */
    copy_str(c.init_from, sizeof c.init_from, "resume");
    c.max_iters = 6;
    ngpt_trainer *a = make(&c), *b = make(&c);
    if (!a || !b) return;
    CHECK(ngpt_train(a) == 0, "%s", a->err);
    CHECK(ngpt_train(b) == NGPT_ERR_ARG && strstr(b->err, "which another run saved after this one resumed from step 4"),
          "a resume made before another trained on is refused: %s", b->err);
    ngpt_trainer_free(a);
    ngpt_trainer_free(b);
    /* one trainer trained twice (stopped, then on) knows its own saves, those of ngpt_save into out_dir too */
    clear_out_dir();
    config(&c);
    c.max_iters = 2;
    c.eval_interval = 1;
    ngpt_trainer *t = make(&c);
    if (!t) return;
    CHECK(ngpt_train(t) == 0, "%s", t->err);
    t->cfg.max_iters = 4;
    CHECK(ngpt_train(t) == 0, "trained on after its own saves: %s", t->err);
    char own[400];
    checkpoint_path(out_dir, 9, own, sizeof own);
    CHECK(ngpt_train_step(t, NULL) == 0 && ngpt_save(t, own) == 0, "ngpt_save into out_dir: %s", t->err);
    t->cfg.max_iters = 6;
    CHECK(ngpt_train(t) == 0, "trained on after its own ngpt_save: %s", t->err);
    /* out_dir spelt another way in the path (out_dir/./NAME): the same folder, this trainer's own save */
    char spelt[420];
    snprintf(spelt, sizeof spelt, "%s/./ckpt_000000011.bin", out_dir);
    CHECK(ngpt_train_step(t, NULL) == 0 && ngpt_save(t, spelt) == 0, "ngpt_save into out_dir spelt another way: %s", t->err);
    t->cfg.max_iters = 13;
    CHECK(ngpt_train(t) == 0, "trained on after its own ngpt_save under another spelling: %s", t->err);
    /* a path longer than a checkpoint's may be: refused (cut short, its temporary file would have been another's) */
    char long_path[700];
    int len = snprintf(long_path, sizeof long_path, "%s/", out_dir);
    while (len < 600) long_path[len++] = 'x';
    long_path[len] = 0;
    CHECK(ngpt_save(t, long_path) == NGPT_ERR_ARG && strstr(t->err, "the path is 600 bytes long, more than the 580"), "a long path: %s", t->err);
    ngpt_trainer_free(t);
    /* a folder of more checkpoints than a trainer lists (1000): a resume of it is no other run */
    char newest[400], link_path[400];
    long long steps[1];
    CHECK(checkpoint_list(out_dir, steps, 1) == 1, "a checkpoint to link");
    checkpoint_path(out_dir, steps[0], newest, sizeof newest);
    for (int k = 0; k < MAX_KEEP_CHECKPOINTS + 2; k++) {
        checkpoint_path(out_dir, 1000000 + k, link_path, sizeof link_path);
        if (link(newest, link_path)) { CHECK(0, "link %s: %s", link_path, strerror(errno)); break; }
    }
    copy_str(c.init_from, sizeof c.init_from, "resume");
    c.max_iters = (int)steps[0] + 1; /* the linked files hold that checkpoint's step: a step or two */
    c.eval_interval = 1000000;
    ngpt_trainer *many = make(&c);
    if (!many) return;
    CHECK(ngpt_train(many) == 0, "a resume among %d checkpoints: %s", MAX_KEEP_CHECKPOINTS + 2, many->err);
    many->cfg.max_iters++; /* on, after its save pruned the checkpoints it listed: the older ones it did not list stay */
    CHECK(ngpt_train(many) == 0, "trained on among the checkpoints it did not list: %s", many->err);
    ngpt_trainer_free(many);
}

/* copies src to dst with a transform applied to the bytes (truncate_to -2: a byte appended) */
static void mutate(const char *src, const char *dst, long truncate_to, long flip_at, uint32_t version) {
    size_t n = 0;
    unsigned char *b = file_contents(src, &n);
    if (!b) {
        CHECK(0, "cannot read %s to make %s from it", src, dst);
        return;
    }
    if (flip_at >= 0) b[flip_at] ^= 0x10;
    if (version) memcpy(b + 8, &version, 4);
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, truncate_to >= 0 ? (size_t)truncate_to : n, f);
    if (truncate_to == -2) fputc(0, f); /* one byte appended */
    fclose(f);
    free(b);
}

/* a fresh trainer (empty out_dir) after one training step */
static ngpt_trainer *make_after_one_step(ngpt_config *c) {
    clear_out_dir();
    config(c);
    ngpt_trainer *tr = make(c);
    if (tr) CHECK(ngpt_train_step(tr, NULL) == 0, "%s", tr->err);
    return tr;
}

static void test_bad_checkpoints(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s/good.bin", root);
    snprintf(bad, sizeof bad, "%s/bad.bin", root);
    CHECK(ngpt_save(tr, good) == 0, "save: %s", tr->err);
    CHECK(ngpt_load(tr, good) == 0, "reload: %s", tr->err);
    CkptReader r;
    char err[NGPT_ERRLEN];
    checkpoint_open(&r, good, err, sizeof err);
    long params_at = (long)r.h.sec[SEC_PARAMS - 1].offset, model_at = (long)r.h.sec[SEC_MODEL - 1].offset;
    fclose(r.f);

    struct { const char *what; long trunc, flip; uint32_t version; const char *expect; } cases[] = {
        {"truncated", params_at + 100, -1, 0, "truncated"},
        {"bit flip in the parameters", -1, params_at + 4000, 0, "checksum mismatch"},
        {"bit flip in the model section", -1, model_at + 1, 0, "checksum mismatch"},
        {"another version", -1, -1, 7, "version 7; this build reads version 1"},
        {"not a checkpoint", -1, 2, 0, "not a nanogpt checkpoint"},
        {"cut inside the header", 20, -1, 0, "a nanogpt checkpoint cut short (truncated?): 20 bytes, and its header alone is "},
        {"cut inside the magic", 5, -1, 0, "not a nanogpt checkpoint (no 'ngptckpt' magic; 5 bytes)"},
        {"a byte appended", -2, -1, 0, "1 bytes after the last section"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mutate(good, bad, cases[i].trunc, cases[i].flip, cases[i].version);
        int rc = ngpt_load(tr, bad);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, cases[i].expect) && strstr(tr->err, "bad.bin"), "%s: rc %d: %s", cases[i].what, rc,
              tr->err);
    }
    /* tensor sections whose checksums check but whose values nanogpt never saves (a NaN parameter, a negative
     * AdamW v): refused by ngpt_load before anything is overwritten, and by checkpoint_load (resume's reader),
     * naming the tensor, the layer and the element; a v of +Inf (g * g past FLT_MAX, grad_clip = 0) loads */
    for (int kase = 0; kase < 3; kase++) {
        const int sec = kase ? SEC_ADAM_V : SEC_PARAMS;
        size_t n = 0;
        unsigned char *b = file_contents(good, &n);
        checkpoint_open(&r, good, err, sizeof err);
        CkptSection sc = r.h.sec[sec - 1];
        fclose(r.f);
        if (b && n > 0) {
            size_t at = tr->plan.param_len[P_WTE] + tr->plan.param_len[P_WPE] + tr->plan.param_len[P_LN1W] / (size_t)tr->ms.L + 3;
            float x = kase == 0 ? NAN : kase == 1 ? -1.0f : INFINITY; /* ln1w of layer 1, element 3 */
            memcpy(b + sc.offset + at * 4, &x, 4);
            if (kase == 0) { /* the checksum as it was: a flipped bit, which the checksum names (not the value it made) */
                FILE *dst = fopen(bad, "wb");
                if (dst) {
                    fwrite(b, 1, n, dst);
                    fclose(dst);
                }
                CHECK(ngpt_load(tr, bad) == NGPT_ERR_FORMAT && strstr(tr->err, "parameters section (offset") && strstr(tr->err, "checksum mismatch"),
                      "a NaN under the old checksum: %s", tr->err);
            }
            Hash64 hs;
            hash_init(&hs);
            hash_update(&hs, b + sc.offset, (size_t)sc.bytes);
            uint64_t sum = hash_final(&hs);
            memcpy(b + offsetof(CkptHeader, sec) + (size_t)(sec - 1) * sizeof(CkptSection) + offsetof(CkptSection, checksum), &sum, sizeof sum);
            FILE *dst = fopen(bad, "wb");
            if (dst) {
                fwrite(b, 1, n, dst);
                fclose(dst);
            }
            const char *want = kase == 0 ? "parameters section holds NaN at ln1w of layer 1, element 3 of its"
                                         : "AdamW v section holds -1 at ln1w of layer 1, element 3 of its";
            float *params = (float *)tr->params;
            params[0] = 12345.0f; /* a mark: a load that overwrote anything before refusing would overwrite it */
            int rc = ngpt_load(tr, bad);
            if (kase == 2) CHECK(rc == 0, "a v of +Inf: rc %d: %s", rc, tr->err);
            else {
                CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, "bad.bin: ") && strstr(tr->err, want) && params[0] == 12345.0f,
                      "ngpt_load, %s: rc %d (the trainer's first parameter %g): %s", section_names[sec], rc, (double)params[0], tr->err);
                rc = checkpoint_open(&r, bad, err, sizeof err);
                if (!rc) {
                    rc = checkpoint_load(tr, &r, bad);
                    fclose(r.f);
                }
                CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, want), "checkpoint_load, %s: rc %d: %s", section_names[sec], rc, tr->err);
            }
            CHECK(ngpt_load(tr, good) == 0, "the good file again: %s", tr->err);
        } else CHECK(0, "cannot read %s", good);
        free(b);
    }
    /* every single-bit flip in the header (magic, version, section table with its reserved words) is refused */
    mutate(good, bad, -1, -1, 0); /* a copy */
    FILE *f = fopen(bad, "r+b");
    int missed = 0, first_missed = -1;
    for (int bit = 0; f && bit < (int)sizeof(CkptHeader) * 8; bit++) {
        unsigned char byte;
        fseek(f, bit / 8, SEEK_SET);
        if (fread(&byte, 1, 1, f) != 1) break;
        unsigned char flipped = (unsigned char)(byte ^ (1u << (bit % 8)));
        fseek(f, bit / 8, SEEK_SET);
        fwrite(&flipped, 1, 1, f);
        fflush(f);
        if (ngpt_load(tr, bad) != NGPT_ERR_FORMAT) {
            missed++;
            if (first_missed < 0) first_missed = bit;
        }
        fseek(f, bit / 8, SEEK_SET);
        fwrite(&byte, 1, 1, f);
        fflush(f);
    }
    if (f) fclose(f);
    CHECK(f && missed == 0, "%d of the %zu single-bit flips in the header loaded (the first at bit %d)", missed, sizeof(CkptHeader) * 8, first_missed);
    CHECK(ngpt_load(tr, bad) == 0, "the header restored loads: %s", tr->err);
    /* a failed load leaves the trainer as it was: step on from here, load a corrupt copy of the step-1 file (a
     * byte flipped in its last section, AdamW v), step again; the loss is the one of a trainer that never tried */
    checkpoint_open(&r, good, err, sizeof err);
    long v_at = (long)r.h.sec[SEC_ADAM_V - 1].offset;
    fclose(r.f);
    mutate(good, bad, -1, v_at + 8, 0);
    ngpt_config c3 = c;
    ngpt_trainer *twin = make(&c3);
    float loss_tr = 0, loss_twin = 1;
    if (twin) {
        CHECK(ngpt_load(twin, good) == 0, "the twin loads: %s", twin->err);
        CHECK(ngpt_train_step(tr, NULL) == 0 && ngpt_train_step(twin, NULL) == 0, "a step each");
        int rc = ngpt_load(tr, bad);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, "AdamW v section"), "the corrupt copy is refused: rc %d: %s", rc, tr->err);
        CHECK(ngpt_train_step(tr, &loss_tr) == 0 && ngpt_train_step(twin, &loss_twin) == 0 && loss_tr == loss_twin,
              "after the failed load the trainer steps as its twin: %.9g vs %.9g", loss_tr, loss_twin);
        ngpt_trainer_free(twin);
    }
    /* another model: same file, a trainer with one more layer */
    ngpt_config c2 = c;
    c2.n_layer = 3;
    ngpt_trainer *other = make(&c2);
    if (other) {
        int rc = ngpt_load(other, good);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(other->err, "different model") && strstr(other->err, "n_layer 2"), "shape: %s", other->err);
        ngpt_trainer_free(other);
    }
    /* the state section's numbers, each within its range: a file with a negative step or a NaN best val loss
     * (checksums intact) is refused, naming the field's byte, and the trainer keeps its own */
    checkpoint_open(&r, good, err, sizeof err);
    unsigned long long state_at = r.h.sec[SEC_STATE - 1].offset;
    fclose(r.f);
    int step = tr->step;
    float best = tr->best_val_loss;
    char want[160];
    tr->step = -5;
    CHECK(ngpt_save(tr, bad) == 0, "save at step -5: %s", tr->err);
    tr->step = step;
    snprintf(want, sizeof want, "state section, byte %llu: step -5 outside [0, 2000000001]", state_at + offsetof(CkptState, step));
    int rc = ngpt_load(tr, bad);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, want) && strstr(tr->err, "bad.bin") && tr->step == step, "step -5: rc %d: %s", rc, tr->err);
    tr->step = INT_MAX; /* past any run's (max_iters is at most 2e9): its step + 1 would overflow */
    CHECK(ngpt_save(tr, bad) == 0, "save at step INT_MAX: %s", tr->err);
    tr->step = step;
    rc = ngpt_load(tr, bad);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, "step 2147483647 outside [0, 2000000001]") && tr->step == step, "step INT_MAX: rc %d: %s", rc, tr->err);
    tr->best_val_loss = NAN;
    CHECK(ngpt_save(tr, bad) == 0, "save with a NaN best val loss: %s", tr->err);
    tr->best_val_loss = best;
    snprintf(want, sizeof want, "state section, byte %llu: best val loss nan outside", state_at + offsetof(CkptState, best_val_loss));
    rc = ngpt_load(tr, bad);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, want) && tr->best_val_loss == best, "NaN best val loss: rc %d: %s", rc, tr->err);
    ngpt_trainer_free(tr);
}

/* src rewritten into dst with section id's bytes replaced by n bytes of payload: the sections laid out back to back
 * again, the section's checksum made again over the new bytes (so only the checks past the checksum see them) */
static int rewrite_section(const char *src, const char *dst, int id, const void *payload, size_t n) {
    CkptReader r;
    char err[NGPT_ERRLEN];
    if (checkpoint_open(&r, src, err, sizeof err)) return printf("cannot open %s: %s\n", src, err), 1;
    CkptHeader h = r.h;
    unsigned char *body[N_SECTIONS];
    int bad = 0;
    for (int i = 0; i < N_SECTIONS; i++) {
        body[i] = malloc(h.sec[i].bytes + 1);
        bad |= !body[i] || fseek(r.f, (long)h.sec[i].offset, SEEK_SET) || fread(body[i], 1, h.sec[i].bytes, r.f) != h.sec[i].bytes;
    }
    fclose(r.f);
    FILE *f = bad ? NULL : fopen(dst, "wb");
    uint64_t at = sizeof h;
    for (int i = 0; i < N_SECTIONS; i++) {
        const int mine = i == id - 1;
        h.sec[i].offset = at;
        if (mine) {
            h.sec[i].bytes = n;
            Hash64 hs;
            hash_init(&hs);
            hash_update(&hs, payload, n);
            h.sec[i].checksum = hash_final(&hs);
        }
        at += h.sec[i].bytes;
    }
    bad |= !f || fwrite(&h, sizeof h, 1, f) != 1;
    for (int i = 0; i < N_SECTIONS; i++) {
        const void *bytes = i == id - 1 ? payload : body[i];
        bad |= f && h.sec[i].bytes && fwrite(bytes, h.sec[i].bytes, 1, f) != 1;
        free(body[i]);
    }
    if (f) bad |= fclose(f) != 0;
    return bad;
}

/* A model or state section whose checksum holds but whose fields nanogpt never writes (past the config keys' ranges,
 * heads not dividing n_embd, a reserved word set, a negative generator position or seed, more characters than the
 * vocabulary, a moments' precision other than 32 or 16), or an empty config section: checkpoint_open (which ngpt_load,
 * resume and sample read through) refuses each, naming the field, its byte in the file and its range, and the
 * trainer keeps its step. A state section as files written before the moments' precision was stored (8 bytes
 * shorter) loads, the precision then not known; a file nanogpt writes says 32 for fp32 moments. */
static void test_checkpoint_fields(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    char good[512], bad[512], err[NGPT_ERRLEN];
    snprintf(good, sizeof good, "%s/good.bin", root);
    snprintf(bad, sizeof bad, "%s/bad.bin", root);
    CHECK(ngpt_save(tr, good) == 0, "save: %s", tr->err);
    CkptReader r;
    if (checkpoint_open(&r, good, err, sizeof err)) {
        CHECK(0, "%s", err);
        ngpt_trainer_free(tr);
        return;
    }
    fclose(r.f);
    const CkptModel model = r.model;
    const CkptState state = r.state;
    const unsigned long long model_at = r.h.sec[SEC_MODEL - 1].offset, state_at = r.h.sec[SEC_STATE - 1].offset;
    CHECK(state.moment_bits == 32, "a file of a run with fp32 moments stores moment bits %lld", (long long)state.moment_bits);
    /* each out of its range (n_layer and block_size one past their limits), or a pair that disagrees either way */
    enum { L, NH, C, MAXT, VP, BIAS, BIAS_NEG, RESERVED, RNG, SEED, CHARS_N, CHARS, CHECKSUM_ALONE, BITS, LOSS_SCALE_NAN, N_CASES };
    static const struct { size_t offset; const char *expect; } cases[N_CASES] = {
        [L] = {offsetof(CkptModel, L), "n_layer 1025 outside [1, 1024]"},
        [NH] = {offsetof(CkptModel, NH), "n_head 0 outside [1, "},
        [C] = {offsetof(CkptModel, C), "is not a multiple of n_head"},
        [MAXT] = {offsetof(CkptModel, maxT), "block_size 1048577 outside [1, 1048576]"},
        [VP] = {offsetof(CkptModel, Vp), "padded vocabulary"},
        [BIAS] = {offsetof(CkptModel, bias), "bias 2; it is 0 or 1"},
        [BIAS_NEG] = {offsetof(CkptModel, bias), "bias -1; it is 0 or 1"},
        [RESERVED] = {offsetof(CkptModel, reserved), "reserved word 7; nanogpt writes 0"},
        [RNG] = {offsetof(CkptState, rng_train_counter), "training-data generator position -1 outside [0, 9223372036854775807]"},
        [SEED] = {offsetof(CkptState, seed), "seed -2 outside [0, "},
        [CHARS_N] = {offsetof(CkptState, chars_n), "character count"},
        [CHARS] = {offsetof(CkptState, chars), "(both are 0 or neither is)"},
        [CHECKSUM_ALONE] = {offsetof(CkptState, chars), "character checksum 123 with 0 characters (both are 0 or neither is)"},
        [BITS] = {offsetof(CkptState, moment_bits), "AdamW moments' precision 8 bits; it is 32 or 16"},
        [LOSS_SCALE_NAN] = {offsetof(CkptState, loss_scale), "fp16 loss scale nan outside [1, 1e30]"}};
    for (int k = 0; k < N_CASES; k++) {
        CkptModel m = model;
        CkptState st = state;
        switch (k) {
        case L: m.L = 1025; break;
        case NH: m.NH = 0; break;
        case C: m.C += 1; break;
        case MAXT: m.maxT = 1048577; break;
        case VP: m.Vp += 64; break;
        case BIAS: m.bias = 2; break;
        case BIAS_NEG: m.bias = -1; break;
        case RESERVED: m.reserved = 7; break;
        case RNG: st.rng_train_counter = -1; break;
        case SEED: st.seed = -2; break;
        case CHARS_N: st.chars_n = model.V + 1; st.chars = st.chars ? st.chars : 1; break;
        case CHARS: st.chars = 0; st.chars_n = 3; break;
        case CHECKSUM_ALONE: st.chars = 123; st.chars_n = 0; break;
        case BITS: st.moment_bits = 8; break;
        case LOSS_SCALE_NAN: st.loss_scale = NAN; break;
        }
        const int in_model = k <= RESERVED;
        char want[200];
        snprintf(want, sizeof want, "bad.bin: %s section, byte %llu: ", in_model ? "model" : "state",
                 (in_model ? model_at : state_at) + cases[k].offset);
        if (rewrite_section(good, bad, in_model ? SEC_MODEL : SEC_STATE, in_model ? (const void *)&m : (const void *)&st,
                            in_model ? sizeof m : sizeof st)) {
            CHECK(0, "case %d: cannot write %s", k, bad);
            continue;
        }
        const int step = tr->step;
        int rc = ngpt_load(tr, bad);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, want) && strstr(tr->err, cases[k].expect) && tr->step == step,
              "case %d: rc %d, step %d (was %d): %s (wanted '%s' ... '%s')", k, rc, tr->step, step, tr->err, want, cases[k].expect);
    }
    /* an empty config section: nanogpt writes every key there */
    rewrite_section(good, bad, SEC_CONFIG, "", 0);
    int rc = ngpt_load(tr, bad);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, "config section (offset 208) has 0 bytes, outside [1, "), "empty config: rc %d: %s", rc,
          tr->err);
    /* a NUL byte in the stored config: refused where it is (the lines after it went unread) */
    static const char with_nul[] = "batch_size = 3\n\0n_layer = 9\n";
    rewrite_section(good, bad, SEC_CONFIG, with_nul, sizeof with_nul - 1);
    ngpt_config stored;
    ngpt_config_defaults(&stored);
    char nul_err[NGPT_ERRLEN];
    rc = checkpoint_read_config(bad, &stored, nul_err, sizeof nul_err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(nul_err, "config section, byte 223 of the file: a NUL byte"), "NUL in the config: rc %d: %s", rc, nul_err);
    /* the state section of a file written before the moments' precision was stored: loads, the precision not known */
    CHECK(ngpt_load(tr, good) == 0 && tr->loaded_moment_bits == 32, "the good file: moment bits %d: %s", tr->loaded_moment_bits, tr->err);
    rewrite_section(good, bad, SEC_STATE, &state, CKPT_STATE_BYTES_BEFORE_MOMENT_BITS);
    rc = ngpt_load(tr, bad);
    CHECK(rc == 0 && tr->loaded_moment_bits == 0, "an older state section: rc %d, moment bits %d: %s", rc, tr->loaded_moment_bits, tr->err);
    rewrite_section(good, bad, SEC_STATE, &state, CKPT_STATE_BYTES_BEFORE_MOMENT_BITS - 8);
    /* a CPU run resumed from a checkpoint whose run kept bf16 moments: the note says how bf16 moments are had */
    CHECK(checkpoint_save(tr, 0) == 0, "save into out_dir: %s", tr->err);
    char saved[600];
    checkpoint_path(c.out_dir, tr->step, saved, sizeof saved);
    CkptState bf16_run = state;
    bf16_run.moment_bits = 16;
    CHECK(rewrite_section(saved, saved, SEC_STATE, &bf16_run, sizeof bf16_run) == 0, "rewrite %s", saved);
    ngpt_config resume = c;
    copy_str(resume.init_from, sizeof resume.init_from, "resume");
    ngpt_trainer *resumed = make(&resume);
    if (resumed) {
        char note[300];
        resume_moments_note(resumed, note, sizeof note);
        CHECK(!strcmp(note, "AdamW moments fp32 (its run: bf16): the checkpoint's were widened to fp32, exactly; bf16 moments need a GPU run in "
                            "dtype bfloat16 or float16, as its run was"),
              "the note of a CPU resume of bf16 moments: '%s'", note);
        ngpt_trainer_free(resumed);
    }
    rewrite_section(good, bad, SEC_STATE, &state, CKPT_STATE_BYTES_BEFORE_MOMENT_BITS - 8);
    rc = ngpt_load(tr, bad);
    snprintf(err, sizeof err, "state section (offset %llu) has %zu bytes; nanogpt writes %zu (%zu in files written before", state_at,
             CKPT_STATE_BYTES_BEFORE_MOMENT_BITS - 8, sizeof(CkptState), CKPT_STATE_BYTES_BEFORE_MOMENT_BITS);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, err), "a state section 8 bytes shorter still: rc %d: %s", rc, tr->err);
    ngpt_trainer_free(tr);
}

/* a token file written over in place while a trainer has it mapped (nanoGPT's prepare.py, a redirect, dd), same size,
 * ids past the vocabulary now: the step that reads them fails naming the file, the id and its byte, before anything
 * changes (no out-of-bounds read of the embeddings: ASan runs this too); an evaluation likewise; the file made whole
 * again, training goes on. A character dataset's ids are its characters, even where vocab_size is wider. */
static void test_data_written_over(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    for (int split = 0; split < 2; split++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", data_dir, split ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "r+b");
        static uint16_t was[20000], over[20000];
        int ok = f && fread(was, 2, 20000, f) == 20000;
        for (int i = 0; i < 20000; i++) over[i] = (uint16_t)(i % 7 == 3 ? 65535 - i % 9 : was[i]); /* far past the padded vocabulary (64) and the arena */
        ok = ok && !fseek(f, 0, SEEK_SET) && fwrite(over, 2, 20000, f) == 20000 && !fflush(f);
        CHECK(ok, "cannot write over %s", path);
        float *before = params_of(tr);
        const int step = tr->step;
        float loss = 0, val = 0;
        int rc = split ? ngpt_evaluate(tr, &loss, &val) : ngpt_train_step(tr, &loss);
        float *after = params_of(tr);
        const char *at = strstr(tr->err, "at byte offset ");
        unsigned long long offset = 0;
        unsigned id = 0;
        const char *id_at = strstr(tr->err, ": token id ");
        int parsed = at && id_at && sscanf(at + 15, "%llu", &offset) == 1 && sscanf(id_at + 11, "%u", &id) == 1;
        CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, split ? "evaluation: " : "training step: ") && strstr(tr->err, path) && parsed &&
                  offset % 2 == 0 && offset < 40000 && id == over[offset / 2] && id >= 40 && strstr(tr->err, "is out of range (0..39)") &&
                  strstr(tr->err, "written over since") && tr->step == step && !memcmp(before, after, tr->plan.nparams * 4),
              "%s written over: rc %d, step %d (was %d), the parameters %s: %s", path, rc, tr->step, step,
              memcmp(before, after, tr->plan.nparams * 4) ? "changed" : "as they were", tr->err);
        free(before);
        free(after);
        if (!split) { /* the batch itself: every id it took in range, those past it replaced */
            Rng rng = {7, 7, 0};
            tr->data_changed[0] = 0;
            sample_batch(tr, &tr->train_data, &rng, tr->plan.micro_batch);
            size_t n = (size_t)tr->plan.micro_batch * (size_t)tr->plan.req.T, out_of_range = 0;
            for (size_t i = 0; i < n; i++) out_of_range += (unsigned)tr->h_tokens[i] >= 40u || (unsigned)tr->h_targets[i] >= 40u;
            CHECK(tr->data_changed[0] && out_of_range == 0, "sample_batch over the written file: %zu ids out of range in the batch (%s)",
                  out_of_range, tr->data_changed[0] ? "said" : "not said");
        }
        ok = f && !fseek(f, 0, SEEK_SET) && fwrite(was, 2, 20000, f) == 20000;
        if (f) ok &= fclose(f) == 0;
        CHECK(ok, "cannot restore %s", path);
        rc = split ? ngpt_evaluate(tr, &loss, &val) : ngpt_train_step(tr, &loss);
        CHECK(rc == 0 && tr->step == step + !split, "%s whole again: rc %d: %s", path, rc, tr->err);
    }
    ngpt_trainer_free(tr);
    /* characters: a 26-letter meta.bin, vocab_size 32, an id of 26 in train.bin */
    char chars[400], path[500];
    snprintf(chars, sizeof chars, "%s/wide_chars", root);
    prepare_letters(chars, 'a', 0);
    snprintf(path, sizeof path, "%s/train.bin", chars);
    FILE *f = fopen(path, "r+b");
    uint16_t id = 26;
    CHECK(f && !fseek(f, 10, SEEK_SET) && fwrite(&id, 2, 1, f) == 1 && !fclose(f), "cannot write %s", path);
    config(&c);
    copy_str(c.data_dir, sizeof c.data_dir, chars);
    c.vocab_size = 32;
    char err[NGPT_ERRLEN];
    ngpt_trainer *wide = NULL;
    int rc = ngpt_trainer_create(&c, NULL, &wide, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "train.bin: token id 26 at byte offset 10 is out of range: the vocabulary has 26 ids (0..25) (the "
                                               "data's ids are meta.bin's characters; vocab_size = 32 widens the model, not them)"),
          "an id past meta.bin's characters, vocab_size wider: rc %d: %s", rc, err);
    if (!rc) ngpt_trainer_free(wide);
}

/* Paths that are no regular file: ngpt_save refuses a folder, a pipe and a link to nothing (it renamed its file over
 * them: as root /dev/null became one), and through a link replaces the link's file, the link kept; ngpt_load,
 * ngpt_config_load and the tokenizer loaders refuse a pipe without opening it (the open waited for a writer for
 * good: SIGALRM ends this test if one does). ngpt_evaluate leaves the best val loss, which decides ngpt_train's
 * saves, to ngpt_train's own evaluations. */
static void test_paths_that_are_no_file(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    char target[512], link_path[512], fifo[512], dir[512], err[NGPT_ERRLEN];
    snprintf(target, sizeof target, "%s/target.bin", root);
    snprintf(link_path, sizeof link_path, "%s/link.bin", root);
    snprintf(fifo, sizeof fifo, "%s/fifo.bin", root);
    snprintf(dir, sizeof dir, "%s/a_folder", root);
    CHECK(ngpt_save(tr, target) == 0, "save: %s", tr->err);
    unlink(link_path);
    unlink(fifo);
    mkdir(dir, 0777);
    CHECK(symlink(target, link_path) == 0 && mkfifo(fifo, 0666) == 0, "cannot make a link and a pipe in %s", root);
    alarm(60);
    const struct { const char *path, *expect; } saves[] = {{dir, "a_folder is a folder"}, {fifo, "fifo.bin is a pipe"}};
    for (int k = 0; k < 2; k++) {
        int rc = ngpt_save(tr, saves[k].path);
        CHECK(rc == NGPT_ERR_IO && strstr(tr->err, saves[k].expect), "ngpt_save to %s: rc %d: %s", saves[k].path, rc, tr->err);
    }
    /* a link: its file replaced, the link kept (as export does) */
    struct stat st, before_save;
    CHECK(!stat(target, &before_save) && ngpt_train_step(tr, NULL) == 0 && ngpt_save(tr, link_path) == 0, "save through the link: %s", tr->err);
    CHECK(!lstat(link_path, &st) && S_ISLNK(st.st_mode) && !stat(target, &st) && S_ISREG(st.st_mode) && st.st_ino != before_save.st_ino,
          "the link is kept and its file replaced");
    const int saved_step = tr->step;
    CHECK(ngpt_train_step(tr, NULL) == 0 && ngpt_load(tr, target) == 0 && tr->step == saved_step, "the file holds the save: step %d of %d: %s",
          tr->step, saved_step, tr->err);
    char dangling[512];
    snprintf(dangling, sizeof dangling, "%s/dangling.bin", root);
    unlink(dangling);
    CHECK(symlink("/nonexistent/folder/x.bin", dangling) == 0, "cannot make a dangling link");
    int rc = ngpt_save(tr, dangling);
    CHECK(rc == NGPT_ERR_IO && strstr(tr->err, "dangling.bin is a symbolic link to nothing that can be written"), "a dangling link: rc %d: %s", rc,
          tr->err);
    unlink(dangling);
    rc = ngpt_save(tr, "/nonexistent/folder/x.bin");
    char written_first[200];
    snprintf(written_first, sizeof written_first, "cannot create checkpoint /nonexistent/folder/x.bin (written first as /nonexistent/folder/x.bin.tmp.%d.0)",
             (int)getpid());
    CHECK(rc == NGPT_ERR_IO && strstr(tr->err, written_first), "a save into a missing folder names the path asked for: rc %d: %s", rc, tr->err);
    rc = ngpt_load(tr, fifo);
    CHECK(rc == NGPT_ERR_IO && strstr(tr->err, "checkpoint") && strstr(tr->err, "fifo.bin is a pipe, not a regular file"), "ngpt_load of a pipe: rc %d: %s",
          rc, tr->err);
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    rc = ngpt_config_load(&cfg, fifo, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "fifo.bin is no regular file"), "ngpt_config_load of a pipe: rc %d: %s", rc, err);
    ngpt_tokenizer *tok = NULL;
    rc = ngpt_tokenizer_load(fifo, &tok, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "tokenizer file") && strstr(err, "fifo.bin is a pipe"), "ngpt_tokenizer_load of a pipe: rc %d: %s", rc, err);
    rc = ngpt_tokenizer_load("/dev/zero", &tok, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "/dev/zero is a device"), "ngpt_tokenizer_load of /dev/zero: rc %d: %s", rc, err);
    alarm(0);
    /* ngpt_evaluate: the losses, and the best val loss as it was */
    const float best = tr->best_val_loss;
    float tl = 0, vl = 0;
    CHECK(ngpt_evaluate(tr, &tl, &vl) == 0 && vl < best && tr->best_val_loss == best, "ngpt_evaluate: val %g, best %g (was %g): %s", (double)vl,
          (double)tr->best_val_loss, (double)best, tr->err);
    unlink(link_path);
    unlink(fifo);
    ngpt_trainer_free(tr);
}

/* steps from 1e9 on (max_iters goes to 2e9) name their checkpoints in 10 digits: a resume finds the newest of
 * them, and pruning keeps only keep_checkpoints of them */
static void test_ten_digit_steps(void) {
    CHECK(is_checkpoint_name("ckpt_999999999.bin", "") && is_checkpoint_name("ckpt_1000000000.bin", "") &&
              is_checkpoint_name("ckpt_2000000001.bin.tmp", ".tmp") && !is_checkpoint_name("ckpt_0000000001.bin", "") &&
              !is_checkpoint_name("ckpt_12345678901.bin", "") && !is_checkpoint_name("ckpt_12345678.bin", "") &&
              !is_checkpoint_name("ckpt_1000000000.bin", ".tmp") && !is_checkpoint_name("ckpt_1000000000.bak", ""),
          "the names of 9 and 10 digits, no others");
    CHECK(checkpoint_temporary_pid("ckpt_000000001.bin.tmp.4242.0") == 4242 && checkpoint_temporary_pid("ckpt_2000000001.bin.tmp.4242.17") == 4242 &&
              checkpoint_temporary_pid("ckpt_000000001.bin.tmp") == -1 && !checkpoint_temporary_pid("ckpt_000000001.bin") &&
              !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.") && !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.12.x") &&
              !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.1.2.3") && !checkpoint_temporary_pid("ckpt_1.bin.tmp.1.2") &&
              !checkpoint_temporary_pid("notes.bin.tmp.1.2") && !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.12345678901.0") &&
              !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.12.1000") && !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.12") &&
              checkpoint_temporary_pid("nanogpt_save.tmp.77.3") == 77 && !checkpoint_temporary_pid("nanogpt_save.tmp") &&
              !checkpoint_temporary_pid("nanogpt_save.tmp.0.1") && !checkpoint_temporary_pid("nanogpt_save.bin.tmp.7.1") &&
              !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.2147483648.0") && !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.0012.1") &&
              !checkpoint_temporary_pid("ckpt_000000001.bin.tmp.12.01") && checkpoint_temporary_pid("ckpt_000000001.bin.tmp.120.100") == 120,
          "a save's temporary names: the step's name (or nanogpt_save), .tmp, the process and a number (-1: the name before either was in "
          "it)");
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.keep_checkpoints = 2;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    for (int step = 999999998; step <= 1000000001; step++) {
        tr->step = step;
        CHECK(checkpoint_save(tr, 0) == 0, "save at step %d: %s", step, tr->err);
    }
    ngpt_trainer_free(tr);
    long long steps[8], newest = -1;
    int n = checkpoint_list(out_dir, steps, 8);
    CHECK(n == 2 && steps[0] == 1000000000LL && steps[1] == 1000000001LL, "%d checkpoints kept (keep 2), the first at %lld", n, n ? steps[0] : -1);
    CHECK(holds_checkpoints(out_dir, &newest) && newest == 1000000001LL, "the newest for a resume: %lld", newest);
    /* a resume's trainer knows both, so its next save prunes the older */
    copy_str(c.init_from, sizeof c.init_from, "resume");
    c.max_iters = 2000000000;
    tr = make(&c);
    if (!tr) return;
    CHECK(tr->step == 1000000001 && tr->n_kept == 2, "resumed at step %d with %d checkpoints known", tr->step, tr->n_kept);
    tr->step = 1000000002;
    CHECK(checkpoint_save(tr, 0) == 0, "save at step 1000000002: %s", tr->err);
    n = checkpoint_list(out_dir, steps, 8);
    CHECK(n == 2 && steps[0] == 1000000001LL && steps[1] == 1000000002LL, "after the resume's save: %d kept, the first at %lld", n, n ? steps[0] : -1);
    ngpt_trainer_free(tr);
}

/* a resume checks every section's checksum (the config section too, which a resume does not otherwise read):
 * a byte flipped in any one section is refused, naming the file, the section and its offset */
static void test_resume_checks_every_section(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    char good[512], path[512], err[NGPT_ERRLEN];
    snprintf(good, sizeof good, "%s/good.bin", root);
    CHECK(ngpt_save(tr, good) == 0, "save: %s", tr->err);
    ngpt_trainer_free(tr);
    CkptReader r;
    CHECK(checkpoint_open(&r, good, err, sizeof err) == 0, "%s", err);
    if (!r.f) return;
    fclose(r.f);
    mkdir(out_dir, 0777);
    checkpoint_path(out_dir, 1, path, sizeof path);
    copy_str(c.init_from, sizeof c.init_from, "resume");
    for (int id = 1; id <= N_SECTIONS; id++) {
        const CkptSection *sec = &r.h.sec[id - 1];
        mutate(good, path, -1, (long)(sec->offset + sec->bytes / 2), 0);
        ngpt_trainer *t = NULL;
        int rc = ngpt_trainer_create(&c, NULL, &t, err, sizeof err);
        char want[128];
        snprintf(want, sizeof want, ": %s section (offset %llu, %llu bytes): checksum mismatch", section_names[id], (unsigned long long)sec->offset,
                 (unsigned long long)sec->bytes);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(err, path) && strstr(err, want) && !strstr(err, "before it"), "a flip in the %s section: rc %d: %s",
              section_names[id], rc, rc ? err : "resumed");
        ngpt_trainer_free(t);
    }
    /* a corrupt newest checkpoint with an intact one before it: the error says how to resume from that one */
    char newer[512];
    checkpoint_path(out_dir, 2, newer, sizeof newer);
    mutate(good, newer, -1, (long)(r.h.sec[SEC_PARAMS - 1].offset + 8), 0);
    mutate(good, path, -1, -1, 0);
    ngpt_trainer *t = NULL;
    int rc = ngpt_trainer_create(&c, NULL, &t, err, sizeof err);
    char want[1200];
    snprintf(want, sizeof want, "checksum mismatch (the file is corrupt); to resume from the checkpoint before it, %s, move %s out of out_dir", path,
             newer);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, want), "the way to the checkpoint before a corrupt one: rc %d: %s", rc, rc ? err : "resumed");
    ngpt_trainer_free(t);
    unlink(newer);
    tr = make(&c);
    CHECK(tr && tr->step == 1, "the intact file resumes at step %d", tr ? tr->step : -1);
    ngpt_trainer_free(tr);
}

/* fp16's dynamic loss scale and its good-step count are stored and restored (the CPU trains in fp32, so the
 * trainer is told it runs fp16 for the load); an impossible stored scale is a clear error */
static void test_fp16_loss_scale_kept(void) {
    ngpt_config c;
    ngpt_trainer *tr = make_after_one_step(&c);
    if (!tr) return;
    char path[512], err[NGPT_ERRLEN];
    snprintf(path, sizeof path, "%s/scale.bin", root);
    tr->loss_scale = 1024.0f;
    tr->good_steps = 77;
    CHECK(ngpt_save(tr, path) == 0, "save: %s", tr->err);
    CkptReader r;
    CHECK(checkpoint_open(&r, path, err, sizeof err) == 0, "%s", err);
    if (r.f) fclose(r.f);
    CHECK(r.state.loss_scale == 1024.0 && r.state.good_steps == 77, "stored scale %g, good steps %lld", r.state.loss_scale,
          (long long)r.state.good_steps);
    int dtype = tr->plan.req.dtype;
    tr->plan.req.dtype = NGPT_DTYPE_F16;
    tr->loss_scale = 65536.0f;
    tr->good_steps = 0;
    CHECK(ngpt_load(tr, path) == 0, "load: %s", tr->err);
    CHECK(tr->loss_scale == 1024.0f && tr->good_steps == 77, "restored scale %g, good steps %d", (double)tr->loss_scale, tr->good_steps);
    tr->plan.req.dtype = dtype;
    tr->loss_scale = -3.0f; /* what a corrupt file could hold (its checksum is recomputed on save) */
    CHECK(ngpt_save(tr, path) == 0, "save: %s", tr->err);
    int rc = ngpt_load(tr, path);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(tr->err, "loss scale -3 outside [1, 1e30]") && strstr(tr->err, "scale.bin"), "rc %d: %s", rc,
          tr->err);
    ngpt_trainer_free(tr);
}

/* ---- fsync, recorded: the test binary's own, forwarding to the system call (not under the sanitizers, which own
 * libc's calls); while on, each call notes the file or folder it syncs and which of the checkpoints at steps `newer`
 * and `older`, and best.bin, are in out_dir at that moment ---- */
#ifndef NGPT_SANITIZE
typedef struct {
    char path[600];
    int newer_there, older_there, best_there;
} SyncCall;
static struct {
    int on, n;
    long long newer, older;
    SyncCall call[8];
} syncs;
int fsync(int fd) {
    if (syncs.on && syncs.n < 8) {
        SyncCall *s = &syncs.call[syncs.n++];
        char link[64], p[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, s->path, sizeof s->path - 1);
        s->path[k > 0 ? k : 0] = 0;
        checkpoint_path(out_dir, syncs.newer, p, sizeof p);
        s->newer_there = file_exists(p);
        checkpoint_path(out_dir, syncs.older, p, sizeof p);
        s->older_there = file_exists(p);
        snprintf(p, sizeof p, "%s/best.bin", out_dir);
        s->best_there = file_exists(p);
    }
    return (int)syscall(SYS_fsync, fd);
}
#endif

/* A save is on disk for good before anything older goes: the checkpoint synced under its temporary name, renamed, its
 * folder synced with it in place; the folder again once best.bin links it; only then is the checkpoint past
 * keep_checkpoints removed (a crash at any point keeps a checkpoint on disk) */
static void test_save_durable_before_pruning(void) {
#ifdef NGPT_SANITIZE
    printf("  (the sanitizers own libc's calls: recorded in the plain build)\n");
#else
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.keep_checkpoints = 1;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    tr->step = 1;
    CHECK(checkpoint_save(tr, 0) == 0, "%s", tr->err);
    tr->step = 2;
    syncs.n = 0;
    syncs.newer = 2;
    syncs.older = 1;
    syncs.on = 1;
    int rc = checkpoint_save(tr, 1);
    syncs.on = 0;
    CHECK(rc == 0, "%s", tr->err);
    char folder[PATH_MAX], newer[512], older[512], best[512];
    if (!realpath(out_dir, folder)) snprintf(folder, sizeof folder, "%s", out_dir);
    checkpoint_path(out_dir, 2, newer, sizeof newer);
    checkpoint_path(out_dir, 1, older, sizeof older);
    snprintf(best, sizeof best, "%s/best.bin", out_dir);
    const SyncCall *s = syncs.call;
    for (int i = 0; i < syncs.n; i++)
        printf("  fsync %d: %s (step 2 %s, step 1 %s, best.bin %s)\n", i, s[i].path, s[i].newer_there ? "there" : "not yet",
               s[i].older_there ? "there" : "gone", s[i].best_there ? "there" : "not yet");
    CHECK(syncs.n == 3, "%d fsync calls, want 3: the file, its folder, the folder with best.bin", syncs.n);
    CHECK(syncs.n > 0 && strstr(s[0].path, "/ckpt_000000002.bin.tmp.") && !s[0].newer_there && s[0].older_there,
          "first fsync: %s, want the temporary file before its rename, step 1 still there", syncs.n > 0 ? s[0].path : "none");
    CHECK(syncs.n > 1 && !strcmp(s[1].path, folder) && s[1].newer_there && s[1].older_there && !s[1].best_there,
          "second fsync: %s, want %s once step 2 is in place, before best.bin and with step 1 still there", syncs.n > 1 ? s[1].path : "none", folder);
    CHECK(syncs.n > 2 && !strcmp(s[2].path, folder) && s[2].newer_there && s[2].older_there && s[2].best_there,
          "third fsync: %s, want %s once best.bin is linked, with step 1 still there", syncs.n > 2 ? s[2].path : "none", folder);
    CHECK(file_exists(newer) && file_exists(best) && !file_exists(older), "after the save: step 2 %d, best.bin %d, step 1 %d (want 1 1 0)",
          file_exists(newer), file_exists(best), file_exists(older));
    ngpt_trainer_free(tr);
#endif
}

/* kill -9 while a checkpoint is being written: the previous one survives and resumes */
static void test_kill_during_save(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.n_embd = 256; /* a few MB per checkpoint, so the kill lands inside a write */
    c.n_head = 4;
    ngpt_trainer *tr = make(&c);
    if (!tr) return;
    CHECK(ngpt_train_step(tr, NULL) == 0 && checkpoint_save(tr, 0) == 0, "%s", tr->err);
    ngpt_trainer_free(tr);
    pid_t pid = fork();
    if (pid == 0) {
        copy_str(c.init_from, sizeof c.init_from, "resume");
        ngpt_trainer *t = NULL;
        char err[NGPT_ERRLEN];
        if (ngpt_trainer_create(&c, NULL, &t, err, sizeof err)) _exit(2);
        for (;;) { /* keep overwriting a newer checkpoint until killed */
            t->step = 2;
            checkpoint_save(t, 0);
        }
    }
    usleep(300000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status), "the writer was not killed (status %d)", status);
    /* what a killed save leaves (the kill may also have landed between two saves), and a file of another name */
    char live[64], live_long[64]; /* saves in progress by a live process (this test's parent), which stay */
    snprintf(live, sizeof live, "ckpt_000000009.bin.tmp.%d.0", (int)getppid());
    snprintf(live_long, sizeof live_long, "nanogpt_save.tmp.%d.2", (int)getppid());
    const char *litter[7] = {"ckpt_000000007.bin.tmp", "ckpt_000000008.bin.tmp.2147483647.0" /* above any pid_max */, "best.bin.tmp", "notes.tmp",
                             live, "nanogpt_save.tmp.2147483647.1" /* an ngpt_save to a long file name */, live_long};
    char path[600];
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, litter[i]);
        FILE *f = fopen(path, "wb");
        if (f) fclose(f);
    }
    copy_str(c.init_from, sizeof c.init_from, "resume");
    ngpt_trainer *r = make(&c);
    CHECK(r && (r->step == 1 || r->step == 2), "resume after kill -9: step %d", r ? r->step : -1);
    if (r) ngpt_trainer_free(r);
    /* the killed save's temporary file, if it died inside one, and the litter went; notes.tmp and the live ones stay */
    char live_path[600], live_long_path[600];
    snprintf(path, sizeof path, "%s/notes.tmp", out_dir);
    snprintf(live_path, sizeof live_path, "%s/%s", out_dir, live);
    snprintf(live_long_path, sizeof live_long_path, "%s/%s", out_dir, live_long);
    CHECK(temporaries_in(out_dir) == 3 && file_exists(path) && file_exists(live_path) && file_exists(live_long_path),
          "%d files named *.tmp* left after the resume (notes.tmp %s, %s %s, %s %s)", temporaries_in(out_dir), file_exists(path) ? "among them" : "removed",
          live, file_exists(live_path) ? "among them" : "removed", live_long, file_exists(live_long_path) ? "among them" : "removed");
}


/* a trainer of config() in an emptied out_dir, one step trained and saved (ckpt_000000001.bin); NULL if not made */
static ngpt_trainer *trainer_saved_at_step_1(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    ngpt_trainer *tr = make(&c);
    if (tr) CHECK(ngpt_train_step(tr, NULL) == 0 && checkpoint_save(tr, 0) == 0, "%s", tr->err);
    return tr;
}

/* a full disk (here: a file-size limit) fails the save with an error and keeps the previous checkpoint */
static void test_full_disk(void) {
    ngpt_trainer *tr = trainer_saved_at_step_1();
    if (!tr) return;
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {20000, 20000};
        setrlimit(RLIMIT_FSIZE, &rl);
        tr->step = 2;
        int rc = checkpoint_save(tr, 0);
        int ok = rc == NGPT_ERR_IO && strstr(tr->err, "the earlier checkpoints are untouched");
        if (!ok) printf("  child: rc %d: %s\n", rc, tr->err);
        /* ngpt_save elsewhere: out_dir's checkpoints are not that file's story */
        char elsewhere[400];
        snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.bin", root);
        rc = ngpt_save(tr, elsewhere);
        int ok_elsewhere = rc == NGPT_ERR_IO && strstr(tr->err, "elsewhere.bin failed") && strstr(tr->err, "the file is as it was before") &&
                           !strstr(tr->err, "checkpoints");
        if (!ok_elsewhere) printf("  child: ngpt_save: rc %d: %s\n", rc, tr->err);
        ok = ok && ok_elsewhere;
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "full disk not reported");
    char path[512];
    checkpoint_path(out_dir, 2, path, sizeof path);
    /* the partial file goes too, under its temporary name (path.tmp.PID.K) as well: a disk kept full by them fails
     * every later save */
    int elsewhere_left = files_named(root, "elsewhere.bin.tmp"); /* ngpt_save's temporary files beside elsewhere.bin (elsewhere.bin.tmp.PID.K) */
    CHECK(!file_exists(path) && temporaries_in(out_dir) == 0 && elsewhere_left == 0, "a partial checkpoint was left behind (%d temporary "
          "files in out_dir, %d beside elsewhere.bin)", temporaries_in(out_dir), elsewhere_left);
    checkpoint_path(out_dir, 1, path, sizeof path);
    CHECK(ngpt_load(tr, path) == 0, "the previous checkpoint: %s", tr->err);
    ngpt_trainer_free(tr);
}

/* a backend failure while a save downloads the tensors (a GPU's; set by hand here): the file saved at that path
 * before is kept as it was, not replaced by one whose checksums vouch for what the staging buffer held */
static void test_backend_failure_while_saving(void) {
    ngpt_trainer *tr = trainer_saved_at_step_1();
    if (!tr) return;
    char path[512];
    checkpoint_path(out_dir, 1, path, sizeof path);
    size_t n_before = 0, n_after = 0;
    unsigned char *before = file_contents(path, &n_before);
    CHECK(ngpt_train_step(tr, NULL) == 0, "a second step: %s", tr->err);
    tr->be->status = NGPT_ERR_DEVICE;
    snprintf(tr->be->msg, sizeof tr->be->msg, "a download failed (by hand)");
    int rc = ngpt_save(tr, path);
    unsigned char *after = file_contents(path, &n_after);
    CHECK(rc == NGPT_ERR_DEVICE && strstr(tr->err, "a download failed (by hand)") && before && after && n_before == n_after &&
              !memcmp(before, after, n_before) && temporaries_in(out_dir) == 0,
          "a save with the backend failed: rc %d (%s), the earlier file %s, %d temporary files left", rc, tr->err,
          before && after && n_before == n_after && !memcmp(before, after, n_before) ? "kept" : "replaced", temporaries_in(out_dir));
    /* a device that failed before the save gives NaN for the parameters' norm (nanogpt.cu's cu_norm_sq): the save says
     * the device's error, not "the parameters hold NaN" */
    ((float *)tr->params)[0] = NAN;
    rc = ngpt_save(tr, path);
    CHECK(rc == NGPT_ERR_DEVICE && strstr(tr->err, "a download failed (by hand)") && !strstr(tr->err, "NaN"), "NaN parameters on a failed device: rc %d: %s",
          rc, tr->err);
    free(before);
    free(after);
    ngpt_trainer_free(tr);
}

/* Two saves to one path at once (two threads here; two processes go the same way): each writes its own temporary
 * file, and the path holds one whole checkpoint after, which loads (before 2026-12-03 both wrote path.tmp: a save
 * reported success for a file that did not load, and the other "the file is as it was"). A file of the name
 * path.tmp, the user's, is kept. */
typedef struct {
    ngpt_trainer *tr;
    const char *path;
    int rc;
} SaveJob;
static void *save_thread(void *arg) {
    SaveJob *j = (SaveJob *)arg;
    j->rc = ngpt_save(j->tr, j->path);
    return NULL;
}
static void test_saves_at_once(void) {
    ngpt_trainer *a = trainer_saved_at_step_1();
    if (!a) return;
    ngpt_config c;
    config(&c);
    c.seed = 7;
    ngpt_trainer *b = make(&c), *reader = make(&c);
    if (!b || !reader) return;
    char path[600], users[620];
    snprintf(path, sizeof path, "%s/notes", out_dir);
    snprintf(users, sizeof users, "%s/notes.tmp", out_dir);
    FILE *f = fopen(users, "w");
    if (f) {
        fputs("the user's own file", f);
        fclose(f);
    }
    int unreadable = 0, failed = 0;
    for (int round = 0; round < 20; round++) {
        SaveJob jobs[2] = {{a, path, -1}, {b, path, -1}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, save_thread, &jobs[k]);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        failed += jobs[0].rc != 0 || jobs[1].rc != 0;
        unreadable += ngpt_load(reader, path) != 0;
    }
    size_t n = 0;
    unsigned char *kept = file_contents(users, &n);
    CHECK(!failed && !unreadable, "20 rounds of two saves to one path at once: %d with a failed save, %d left a file that does not load (%s)", failed,
          unreadable, reader->err);
    CHECK(kept && n == 19 && !memcmp(kept, "the user's own file", 19) && temporaries_in(out_dir) == 1, "%s kept, no temporary file left (%d *.tmp*)",
          users, temporaries_in(out_dir));
    free(kept);
    /* a file name with no room for the suffix (250 bytes, NAME_MAX 255): saved through a short temporary name beside it */
    char long_name[600];
    int n_dir = snprintf(long_name, sizeof long_name, "%s/", out_dir);
    memset(long_name + n_dir, 'x', 250);
    long_name[n_dir + 250] = 0;
    int rc = ngpt_save(a, long_name);
    CHECK(rc == 0 && ngpt_load(reader, long_name) == 0 && temporaries_in(out_dir) == 1, "a 250-byte file name: rc %d (%s), %d *.tmp* files", rc,
          rc ? a->err : reader->err, temporaries_in(out_dir));
    ngpt_trainer_free(a);
    ngpt_trainer_free(b);
    ngpt_trainer_free(reader);
}

static void test_nonfinite_steps(void) {
    ngpt_trainer *tr = trainer_saved_at_step_1();
    if (!tr) return;
    float *good = params_of(tr), *bad = params_of(tr);
    bad[tr->plan.nparams - 1] = NAN; /* a final LayerNorm weight: every loss becomes NaN */
    CHECK(copy_params_in(tr, bad) == 0, "%s", tr->err);
    int step0 = tr->step;
    int rc = ngpt_train_step(tr, NULL);
    CHECK(rc == 0 && tr->step == step0 + 1 && tr->nonfinite_run == 1, "skip: rc %d (%s), step %d", rc, tr->err, tr->step);
    ngpt_stats st;
    ngpt_get_stats(tr, &st);
    CHECK(st.skipped_steps == 1 && st.step == step0 + 1, "the stats count the skipped step: %d skipped, step %d", st.skipped_steps, st.step);
    float *after = params_of(tr);
    size_t same = 0;
    for (size_t i = 0; i + 1 < tr->plan.nparams; i++) same += after[i] == good[i];
    CHECK(same == tr->plan.nparams - 1, "a skipped step changed %zu parameters", tr->plan.nparams - 1 - same);
    rc = checkpoint_save(tr, 0);
    CHECK(rc == NGPT_ERR_NUMERIC && strstr(tr->err, "NaN"), "a poisoned model was saved: rc %d %s", rc, tr->err);
    int skipped = 1;
    rc = 0;
    while (rc == 0 && skipped <= MAX_NONFINITE_SKIPS + 1) { rc = ngpt_train_step(tr, NULL); skipped += rc == 0; }
    CHECK(rc == NGPT_ERR_NUMERIC && skipped == MAX_NONFINITE_SKIPS, "halted after %d skipped steps (rc %d), expected %d", skipped, rc,
          MAX_NONFINITE_SKIPS);
    /* a load starts the count of skips in a row again, as a fresh trainer loading the file would (it halted at the
     * first bad step after the load, "not finite again") */
    char saved[512];
    checkpoint_path(out_dir, 1, saved, sizeof saved);
    CHECK(ngpt_load(tr, saved) == 0 && tr->nonfinite_run == 0, "load after the halt: %d in a row: %s", tr->nonfinite_run, tr->err);
    CHECK(copy_params_in(tr, bad) == 0 && ngpt_train_step(tr, NULL) == 0 && tr->nonfinite_run == 1, "a bad step after the load is skipped: %s",
          tr->err);
    CHECK(copy_params_in(tr, good) == 0 && ngpt_train_step(tr, NULL) == 0 && tr->nonfinite_run == 0, "recovers: %s", tr->err);
    ngpt_get_stats(tr, &st);
    CHECK(st.skipped_steps == MAX_NONFINITE_SKIPS + 1, "%d skipped steps counted, expected %d (the trainer's, the load's included)",
          st.skipped_steps, MAX_NONFINITE_SKIPS + 1);
    ngpt_trainer_free(tr);
    /* on_nonfinite = halt: the first one stops */
    ngpt_config c;
    config(&c);
    copy_str(c.on_nonfinite, sizeof c.on_nonfinite, "halt");
    tr = make(&c);
    if (!tr) return;
    CHECK(copy_params_in(tr, bad) == 0, "%s", tr->err);
    rc = ngpt_train_step(tr, NULL);
    CHECK(rc == NGPT_ERR_NUMERIC && tr->step == 0 && strstr(tr->err, "not finite"), "halt: rc %d %s", rc, tr->err);
    ngpt_trainer_free(tr);
    char path[512];
    checkpoint_path(out_dir, 1, path, sizeof path);
    CHECK(file_exists(path), "the good checkpoint is gone");
    free(good); free(bad); free(after);
}

/* big enough that every parallel path runs on the pool: products past the one-thread threshold, LayerNorm's
 * row groups, attention heads, the gradient norm over several chunks (about 400K parameters). Lanes: one after
 * the other on 1 and 3 threads, at once on 2 (a thread each) and 4 (teams of two). */
static void test_thread_count_invariant(void) {
    clear_out_dir();
    ngpt_config c;
    config(&c);
    c.n_embd = 128; c.n_head = 4; c.block_size = 32; c.batch_size = 8;
    enum { STEPS = 6, CUT = 2 };
    enum { RUNS = 5, TUNED = 4 };
    const int threads[RUNS] = {1, 2, 3, 4, 3};
    float loss[RUNS][STEPS], resumed[STEPS];
    float *params[RUNS] = {NULL, NULL, NULL, NULL, NULL};
    for (int t = 0; t < RUNS; t++) {
        c.threads = threads[t];
        ngpt_trainer *tr = make(&c);
        if (!tr) return;
        CHECK(tr->plan.lanes == 2, "run %d: %d lanes (the micro-batch of 8 should run as two)", t, tr->plan.lanes);
        if (t == TUNED) /* the tuner probing every other step, its history saying all threads are very slow */
            tr->tune = (ThreadTuner){.enabled = 1, .every = 2, .gap = 2, .next = 4, .n = 5, .recent = {1e9, 1e9, 1e9, 1e9, 1e9}};
        for (int s = 0; s < STEPS; s++) CHECK(ngpt_train_step(tr, &loss[t][s]) == 0, "%s", tr->err);
        params[t] = params_of(tr);
        if (t > 0) {
            for (int s = 0; s < STEPS; s++)
                CHECK(loss[t][s] == loss[0][s], "run %d, step %d: loss %.9g, one thread %.9g", t, s, (double)loss[t][s], (double)loss[0][s]);
            CHECK(!memcmp(params[t], params[0], tr->plan.nparams * 4), "run %d: parameters differ from one thread's", t);
        }
        if (t == TUNED) /* step 4 probed one thread and won; step 6 probed all three, with too short a history to switch back */
            CHECK(tr->tune.switches == 1 && tr->tune.one == 1 && cpu_of(tr->be)->active == 1 && tr->tune.next == 10,
                  "tuner: %d switches, one %d, active %d, next probe %d (10: the spacing doubled after a losing probe)", tr->tune.switches,
                  tr->tune.one, cpu_of(tr->be)->active, tr->tune.next);
        if (t == 1) { /* saved on 2 threads after CUT steps, resumed on 3 */
            ngpt_trainer_free(tr);
            tr = make(&c);
            if (!tr) return;
            for (int s = 0; s < CUT; s++) CHECK(ngpt_train_step(tr, &resumed[s]) == 0, "%s", tr->err);
            CHECK(checkpoint_save(tr, 0) == 0, "save: %s", tr->err);
        }
        ngpt_trainer_free(tr);
    }
    c.threads = 3;
    copy_str(c.init_from, sizeof c.init_from, "resume");
    ngpt_trainer *r = make(&c);
    if (r) {
        for (int s = CUT; s < STEPS; s++) CHECK(ngpt_train_step(r, &resumed[s]) == 0, "%s", r->err);
        float *pr = params_of(r);
        for (int s = 0; s < STEPS; s++) CHECK(resumed[s] == loss[0][s], "resumed on 3 threads, step %d: %.9g vs %.9g", s, (double)resumed[s], (double)loss[0][s]);
        CHECK(!memcmp(pr, params[0], r->plan.nparams * 4), "saved on 2 threads, resumed on 3: parameters differ");
        free(pr);
        ngpt_trainer_free(r);
    }
    for (int t = 0; t < RUNS; t++) free(params[t]);
}

static void test_thread_probe_rule(void) {
    double five[5] = {0.010, 0.030, 0.012, 0.011, 0.009}, six[6] = {0.010, 0.010, 0.012, 0.012, 0.030, 0.001};
    CHECK(!thread_probe_wins(five, 4, 0.001), "a switch on 4 recent steps");
    CHECK(thread_probe_wins(five, 5, 0.0093) && !thread_probe_wins(five, 5, 0.0094), "median 0.011: 0.0093 wins, 0.0094 does not");
    CHECK(thread_probe_wins(six, 6, 0.0093) && !thread_probe_wins(six, 6, 0.0094), "median 0.011 of six: 0.0093 wins, 0.0094 does not");
}

int main(void) {
    if (test_folder(root, sizeof root, "ckpt")) return 1;
    snprintf(data_dir, sizeof data_dir, "%s/data", root);
    snprintf(out_dir, sizeof out_dir, "%s/out", root);
    make_dataset(40);
    RUN(test_resume_bit_identical);
    RUN(test_thread_count_invariant);
    RUN(test_thread_probe_rule);
    RUN(test_stop_request_saves);
    RUN(test_stop_during_evaluation);
    RUN(test_train_from_its_callback);
    RUN(test_stop_in_step);
    RUN(test_stop_inside_micro_batch);
    RUN(test_grad_clip_off);
    RUN(test_other_characters);
    RUN(test_keep_last_and_best);
    RUN(test_best_val_loss_from_step_0);
    RUN(test_out_dir_filled_after_create);
    RUN(test_bad_checkpoints);
    RUN(test_checkpoint_fields);
    RUN(test_data_written_over);
    RUN(test_paths_that_are_no_file);
    RUN(test_ten_digit_steps);
    RUN(test_resume_checks_every_section);
    RUN(test_fp16_loss_scale_kept);
    RUN(test_save_durable_before_pruning);
    RUN(test_kill_during_save);
    RUN(test_saves_at_once);
    RUN(test_full_disk);
    RUN(test_backend_failure_while_saving);
    RUN(test_nonfinite_steps);
    remove_folder(root);
    return check_summary();
}
