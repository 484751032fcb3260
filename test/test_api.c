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
    snprintf(dir, sizeof dir, "/tmp/ngpt_test_api_XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL cannot make a temporary folder %s\n", dir);
        return 1;
    }
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
    rc = ngpt_plan_arenas(&cfg, NULL, &dev_bytes, &host_bytes, err, sizeof err);
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
    /* each part of the plan must fit its own arena: a device arena at 9/10 gets a smaller micro-batch, a host arena
     * below the smallest plan's host part (its batch buffers and I/O staging) is refused, naming both parts */
    opt.device_arena_bytes = dev_bytes * 9 / 10;
    rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_OK && tr != NULL, "a device arena at 9/10 gets a smaller plan");
    if (rc) printf("%s\n", err);
    if (tr) {
        ngpt_get_stats(tr, &st);
        EXPECT(st.micro_batch < 4 && st.device_bytes <= opt.device_arena_bytes && st.host_bytes <= opt.host_arena_bytes,
               "the smaller plan fits each arena");
        ngpt_trainer_free(tr);
        tr = NULL;
    }
    opt.device_arena_bytes = dev_bytes;
    opt.host_arena_bytes = host_bytes * 9 / 10;
    rc = ngpt_trainer_create(&cfg, &opt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_ERR_NOMEM && tr == NULL && strstr(err, "the arenas handed in are too small: the smallest plan needs") != NULL,
           "a host arena too small for any plan is refused, naming both parts");
    opt.host_arena_bytes = host_bytes;
    opt.device_arena_bytes = dev_bytes;
    /* memory that held anything: every byte 0xff, a NaN in every float (the alignment gaps between parameter
     * tensors once kept theirs, and the save below refused "the parameters hold NaN or Inf") */
    memset(opt.device_arena, 0xff, dev_bytes);
    memset(opt.host_arena, 0xff, host_bytes);
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
    /* NULL where the header does not allow it: NGPT_ERR_ARG, not a crash; evaluate's outputs may be NULL */
    ngpt_trainer *other = tr;
    EXPECT(ngpt_evaluate(tr, NULL, NULL) == NGPT_OK, "evaluate with no outputs");
    EXPECT(ngpt_train_step(NULL, NULL) == NGPT_ERR_ARG && ngpt_evaluate(NULL, &tl, &vl) == NGPT_ERR_ARG && ngpt_train(NULL) == NGPT_ERR_ARG &&
               ngpt_load(NULL, "x") == NGPT_ERR_ARG && ngpt_save(NULL, "x") == NGPT_ERR_ARG,
           "a NULL trainer is NGPT_ERR_ARG");
    EXPECT(ngpt_save(tr, NULL) == NGPT_ERR_ARG && strstr(ngpt_last_error(tr), "no path") != NULL, "ngpt_save without a path");
    EXPECT(ngpt_sample(tr, NULL, 1, 1, 1, 1.0f, 0, 1, NULL) == NGPT_ERR_ARG, "ngpt_sample without buffers");
    {
        int32_t one = 1, ids[4];
        EXPECT(ngpt_sample(tr, &one, 1, 1, 2147483647, 1.0f, 0, 1, ids) == NGPT_ERR_ARG && strstr(ngpt_last_error(tr), "max_new_tokens 0..2147483646"),
               "ngpt_sample: a prompt and max_new beyond an int");
    }
    EXPECT(ngpt_config_set(NULL, "n_layer", "2", err, sizeof err) == NGPT_ERR_ARG && ngpt_trainer_create(NULL, NULL, &other, err, sizeof err) ==
               NGPT_ERR_ARG && other == NULL && ngpt_plan_arenas(&cfg, NULL, NULL, NULL, err, sizeof err) == NGPT_ERR_ARG,
           "NULL configs and outputs");
    EXPECT(ngpt_config_load(NULL, "x.cfg", err, sizeof err) == NGPT_ERR_ARG && ngpt_config_load(&cfg, NULL, err, sizeof err) == NGPT_ERR_ARG,
           "ngpt_config_load without a config or a path");
    {
        size_t free_bytes = 1;
        EXPECT(ngpt_cuda_mem_info(NULL, NULL, err, sizeof err) == NGPT_ERR_ARG && ngpt_cuda_mem_info(&free_bytes, NULL, err, sizeof err) == NGPT_ERR_ARG &&
                   strstr(err, "NULL output") != NULL,
               "ngpt_cuda_mem_info without outputs");
    }
    ngpt_config_defaults(NULL);
    ngpt_config_print(NULL, stderr);
    ngpt_config_print(&cfg, NULL);
    ngpt_request_stop(NULL);
    ngpt_get_stats(NULL, &st);
    EXPECT(st.step == 0, "stats of no trainer are zero");
    ngpt_get_stats(tr, &st);
    EXPECT(st.step == 30 && st.micro_batch == 4 && st.lanes == 2 && strcmp(st.device, "cpu") == 0, "stats");

    snprintf(path, sizeof path, "%s/model.ckpt", dir);
    EXPECT(ngpt_save(tr, path) == NGPT_OK, "save");
    ngpt_stats saved;
    ngpt_get_stats(tr, &saved);
    for (int i = 0; i < 3; i++) ngpt_train_step(tr, &loss);
    EXPECT(ngpt_load(tr, path) == NGPT_OK, "load");
    ngpt_get_stats(tr, &st);
    EXPECT(st.step == 30, "load restores the step");
    EXPECT(st.lr == saved.lr && st.lr > 0 && st.last_loss == saved.last_loss, "... and the last step's learning rate and loss");
    rc = ngpt_load(tr, "/nonexistent/x.ckpt");
    EXPECT(rc == NGPT_ERR_IO && strstr(ngpt_last_error(tr), "/nonexistent/x.ckpt") != NULL, "a missing checkpoint names the file");

    int prompt[2] = {0, 3};
    int out[2 * 12];
    rc = ngpt_sample(tr, prompt, 2, 2, 10, 0.8f, 5, 42, out);
    int in_vocab = 1;
    for (int i = 0; i < 24; i++) in_vocab = in_vocab && out[i] >= 0 && out[i] < 29;
    EXPECT(rc == NGPT_OK && in_vocab && out[0] == 0 && out[1] == 3, "sample");
    rc = ngpt_sample(tr, prompt, 2, 2, 10, 0.8f, -1, 42, out);
    EXPECT(rc == NGPT_ERR_ARG && strstr(ngpt_last_error(tr), "top_k >= 0") != NULL, "a negative top_k is refused");
    size_t n_ids = 1, n_bytes = 1;
    char text[64];
    rc = ngpt_chars_encode(tr, "ab", 2, out, 24, &n_ids);
    EXPECT(rc == NGPT_ERR_STATE && n_ids == 0 && strstr(ngpt_last_error(tr), "ngpt_tokenizer_decode") != NULL,
           "raw token files have no character vocabulary: encode names the tokenizer instead");
    rc = ngpt_chars_decode(tr, out, 3, text, sizeof text, &n_bytes);
    EXPECT(rc == NGPT_ERR_STATE && n_bytes == 0, "... and so does decode");
    ngpt_trainer_free(tr);

    /* the embedder's arenas: both or neither, aligned */
    ngpt_options one = opt;
    one.host_arena = NULL;
    rc = ngpt_trainer_create(&cfg, &one, &tr, err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && tr == NULL && strstr(err, "give both arenas") != NULL, "a device arena without a host arena is refused");
    one = opt;
    one.device_arena = NULL;
    rc = ngpt_trainer_create(&cfg, &one, &tr, err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && tr == NULL && strstr(err, "host_arena is given but not device_arena") != NULL,
           "a host arena without a device arena is refused");
    one = opt;
    one.device_arena = (char *)opt.device_arena + NGPT_ARENA_ALIGNMENT / 2;
    one.device_arena_bytes -= NGPT_ARENA_ALIGNMENT;
    rc = ngpt_trainer_create(&cfg, &one, &tr, err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && tr == NULL && strstr(err, "must be aligned to 16 bytes") != NULL, "a misaligned arena is refused");
    /* a sampling trainer's arenas, sized for it: smaller than training's, and used exactly */
    ngpt_options so;
    memset(&so, 0, sizeof so);
    so.sample_only = 1;
    size_t sdev = 0, shost = 0;
    rc = ngpt_plan_arenas(&cfg, &so, &sdev, &shost, err, sizeof err);
    EXPECT(rc == NGPT_OK && sdev > 0 && sdev < dev_bytes && shost <= host_bytes, "ngpt_plan_arenas for sample_only: a smaller plan");
    so.device_arena = opt.device_arena;
    so.host_arena = opt.host_arena;
    so.device_arena_bytes = sdev;
    so.host_arena_bytes = shost;
    rc = ngpt_trainer_create(&cfg, &so, &tr, err, sizeof err);
    EXPECT(rc == NGPT_OK && tr != NULL, "a sampling trainer in arenas of the planned size");
    if (tr) {
        ngpt_get_stats(tr, &st);
        EXPECT(st.device_bytes == sdev && st.host_bytes == shost, "the sampling plan, exactly");
        ngpt_trainer_free(tr);
        tr = NULL;
    }
    free(opt.device_arena);
    free(opt.host_arena);

    /* a character dataset made through the API, and text to ids and back with its vocabulary */
    char chars_dir[300], input[300];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    FILE *f = fopen(input, "wb");
    for (int i = 0; i < 300; i++) fputs(i % 2 ? "to be, or not to be\n" : "caf\xC3\xA9 \xE2\x82\xAC ", f);
    fclose(f);
    snprintf(chars_dir, sizeof chars_dir, "%s/chars/nested", dir);
    rc = ngpt_prepare(input, chars_dir, NULL, 1.5, err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && strstr(err, "val_fraction in (0, 1)") != NULL, "ngpt_prepare: val_fraction outside (0, 1) is refused");
    rc = ngpt_prepare(input, "", NULL, 0.1, err, sizeof err);
    EXPECT(rc == NGPT_ERR_ARG && strstr(err, "ngpt_prepare: needs") != NULL && strstr(err, "--") == NULL,
           "ngpt_prepare: an empty out_dir is refused in the library's words, not the command line's");
    rc = ngpt_prepare("/nonexistent/input.txt", chars_dir, NULL, 0.1, err, sizeof err);
    EXPECT(rc == NGPT_ERR_IO && strstr(err, "/nonexistent/input.txt") != NULL, "ngpt_prepare: a missing input names it");
    rc = ngpt_prepare(input, chars_dir, NULL, 0.1, err, sizeof err);
    EXPECT(rc == NGPT_OK, "ngpt_prepare: characters into a folder it creates");
    if (rc) printf("%s\n", err);
    /* prepared tokens are no text to prepare: refused by name, and no folder is left for them */
    char tokens[600], not_made[600];
    struct stat folder;
    snprintf(tokens, sizeof tokens, "%s/train.bin", chars_dir);
    snprintf(not_made, sizeof not_made, "%s/from_tokens", dir);
    rc = ngpt_prepare(tokens, not_made, NULL, 0.1, err, sizeof err);
    EXPECT(rc == NGPT_ERR_FORMAT && strstr(err, "train.bin is not text to prepare: it is a binary file") != NULL && stat(not_made, &folder) != 0,
           "ngpt_prepare: a token file as input is refused, and its out_dir is not made");
    ngpt_config ccfg = cfg;
    rc = ngpt_config_set(&ccfg, "data_dir", chars_dir, err, sizeof err) || ngpt_config_set(&ccfg, "vocab_size", "0", err, sizeof err);
    ngpt_options copt;
    memset(&copt, 0, sizeof copt);
    if (!rc) rc = ngpt_trainer_create(&ccfg, &copt, &tr, err, sizeof err);
    EXPECT(rc == NGPT_OK, "a trainer on the prepared characters");
    if (rc) {
        printf("%s\n", err);
        return 1;
    }
    const char *phrase = "not caf\xC3\xA9 \xE2\x82\xAC\n";
    int32_t ids[32];
    rc = ngpt_chars_encode(tr, phrase, strlen(phrase), ids, 32, &n_ids);
    int in_range = rc == NGPT_OK && n_ids == 11;
    for (size_t i = 0; in_range && i < n_ids; i++) in_range = ids[i] >= 0 && ids[i] < 14;
    EXPECT(in_range, "encode: one id per character (UTF-8 of 1 to 3 bytes), inside the 14 characters of the text");
    rc = ngpt_chars_decode(tr, ids, n_ids, text, sizeof text, &n_bytes);
    EXPECT(rc == NGPT_OK && n_bytes == strlen(phrase) && memcmp(text, phrase, n_bytes) == 0, "decode(encode(text)) == text");
    rc = ngpt_chars_decode(tr, ids, n_ids, text, 5, &n_bytes);
    EXPECT(rc == NGPT_ERR_ARG && n_bytes == strlen(phrase), "decode into a short buffer: refused, with the bytes it needs");
    rc = ngpt_chars_encode(tr, phrase, strlen(phrase), ids, 4, &n_ids);
    EXPECT(rc == NGPT_ERR_ARG && n_ids == 11, "encode into a short buffer: refused, with the ids it needs");
    rc = ngpt_chars_encode(tr, "to bX", 5, ids, 32, &n_ids);
    EXPECT(rc == NGPT_ERR_ARG && n_ids == 4 && strstr(ngpt_last_error(tr), "U+0058 at byte 4") != NULL,
           "encode: a character outside the vocabulary is named with its byte");
    rc = ngpt_chars_encode(tr, "to \xC3(", 5, ids, 32, &n_ids);
    EXPECT(rc == NGPT_ERR_ARG && strstr(ngpt_last_error(tr), "invalid UTF-8 at byte 3") != NULL, "encode: invalid UTF-8 is named with its byte");
    ids[1] = 14;
    rc = ngpt_chars_decode(tr, ids, 3, text, sizeof text, &n_bytes);
    EXPECT(rc == NGPT_ERR_ARG && strstr(ngpt_last_error(tr), "id 14 at position 1") != NULL, "decode: an id outside the vocabulary is named");
    ngpt_trainer_free(tr);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
    printf("summary: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
