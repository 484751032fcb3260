/* test_api.c: an embedder's program. It sees only nanogpt.h and links nanogpt.c compiled with
 * NGPT_NO_MAIN; build.sh compiles it twice, as C99 and as C++ (it is written in their common subset).
 * It plans, hands in its own arenas, trains, evaluates, saves, loads, samples and frees through the API
 * alone, and checks the status codes and messages of misuse. */
#include "nanogpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int passed, failed;
#define EXPECT(cond, what)                                                     \
    do {                                                                       \
        if (cond) { passed++; printf("ok %s\n", what); }                       \
        else { failed++; printf("FAIL %s  [%s:%d]\n", what, __FILE__, __LINE__); } \
    } while (0)

static int lines_logged;
static void on_log(void *ctx, int level, const char *line) {
    (void)ctx;
    (void)level;
    (void)line;
    lines_logged++;
}

int main(void) {
    char dir[256], path[400], err[512];
    snprintf(dir, sizeof dir, "/tmp/ngpt_test_api_%d", (int)getpid());
    mkdir(dir, 0777);
    /* a toy dataset: a repeating pattern in nanoGPT's raw uint16 format */
    const char *names[2] = {"train.bin", "val.bin"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < 4000; i++) {
            unsigned short t = (unsigned short)((i * 3) % 29);
            fwrite(&t, 2, 1, f);
        }
        fclose(f);
    }

    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    int rc = ngpt_config_set(&cfg, "n_layer", "2", err, sizeof err) || ngpt_config_set(&cfg, "n_head", "2", err, sizeof err) ||
             ngpt_config_set(&cfg, "n_embd", "32", err, sizeof err) || ngpt_config_set(&cfg, "block_size", "16", err, sizeof err) ||
             ngpt_config_set(&cfg, "batch_size", "4", err, sizeof err) ||
             ngpt_config_set(&cfg, "gradient_accumulation_steps", "1", err, sizeof err) ||
             ngpt_config_set(&cfg, "vocab_size", "29", err, sizeof err) || ngpt_config_set(&cfg, "data_dir", dir, err, sizeof err) ||
             ngpt_config_set(&cfg, "device", "cpu", err, sizeof err) || ngpt_config_set(&cfg, "learning_rate", "1e-2", err, sizeof err) ||
             ngpt_config_set(&cfg, "warmup_iters", "0", err, sizeof err) || ngpt_config_set(&cfg, "decay_lr", "False", err, sizeof err) ||
             ngpt_config_set(&cfg, "eval_iters", "2", err, sizeof err);
    EXPECT(rc == NGPT_OK, "configure through ngpt_config_set");
    rc = ngpt_config_set(&cfg, "n_layers", "2", err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && strstr(err, "n_layer") != NULL, "a misspelt key is refused with the closest one");
    EXPECT(strcmp(ngpt_status_name(NGPT_ERR_NOMEM), "out of memory budget") == 0, "status names");

    size_t dev_bytes = 0, host_bytes = 0;
    rc = ngpt_plan_arenas(&cfg, &dev_bytes, &host_bytes, err, sizeof err);
    EXPECT(rc == NGPT_OK && dev_bytes > 0 && host_bytes > 0, "ngpt_plan_arenas sizes the arenas");

    /* the embedder's own memory is the budget: far too small is refused, a little short is planned into,
     * what ngpt_plan_arenas said is used as planned */
    ngpt_options opt;
    ngpt_stats st;
    memset(&opt, 0, sizeof opt);
    opt.log = on_log;
    opt.device_arena = malloc(dev_bytes);
    opt.host_arena = malloc(host_bytes);
    opt.device_arena_bytes = 4096;
    opt.host_arena_bytes = host_bytes;
    ngpt_trainer *tr = NULL;
    rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_ERR_NOMEM && tr == NULL && strstr(err, "does not fit") != NULL, "an arena far too small is refused");
    opt.device_arena_bytes = dev_bytes - 1;
    rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_OK && tr != NULL, "an arena a byte short gets a smaller plan");
    if (rc) printf("%s\n", err);
    if (tr) {
        ngpt_get_stats(tr, &st);
        EXPECT(st.device_bytes <= opt.device_arena_bytes && st.host_bytes <= opt.host_arena_bytes, "the smaller plan fits the arenas");
        ngpt_trainer_free(tr);
        tr = NULL;
    }
    opt.device_arena_bytes = dev_bytes;
    rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_OK && tr != NULL, "a trainer on the embedder's arenas");
    if (!tr) return 1;
    ngpt_get_stats(tr, &st);
    EXPECT(st.device_bytes == dev_bytes && st.host_bytes == host_bytes, "ngpt_plan_arenas' plan, exactly");

    float first = 0, loss = 0, tl = 0, vl = 0;
    for (int i = 0; i < 30 && rc == NGPT_OK; i++) rc = ngpt_train_step(tr, i == 0 ? &first : &loss);
    EXPECT(rc == NGPT_OK && loss < first, "training steps lower the loss");
    rc = ngpt_evaluate(tr, &tl, &vl);
    EXPECT(rc == NGPT_OK && vl > 0 && vl < first, "evaluate");
    ngpt_get_stats(tr, &st);
    EXPECT(st.step == 30 && st.micro_batch == 4 && st.lanes == 2 && strcmp(st.device, "cpu") == 0, "stats");

    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    EXPECT(ngpt_save(tr, path) == NGPT_OK, "save");
    for (int i = 0; i < 3; i++) ngpt_train_step(tr, &loss);
    EXPECT(ngpt_load(tr, path) == NGPT_OK, "load");
    ngpt_get_stats(tr, &st);
    EXPECT(st.step == 30, "load restores the step");
    rc = ngpt_load(tr, "/nonexistent/x.ckpt");
    EXPECT(rc == NGPT_ERR_IO && strstr(ngpt_last_error(tr), "/nonexistent/x.ckpt") != NULL, "a missing checkpoint names the file");

    int prompt[2] = {0, 3};
    int out[2 * 12];
    rc = ngpt_sample(tr, prompt, 2, 2, 10, 0.8f, 5, 42, out);
    int in_vocab = 1;
    for (int i = 0; i < 24; i++) in_vocab = in_vocab && out[i] >= 0 && out[i] < 29;
    EXPECT(rc == NGPT_OK && in_vocab && out[0] == 0 && out[1] == 3, "sample");

    ngpt_trainer_free(tr);
    free(opt.device_arena);
    free(opt.host_arena);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    printf("summary: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
