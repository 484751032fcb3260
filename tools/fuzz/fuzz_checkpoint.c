/* fuzz_checkpoint.c - libFuzzer target for checkpoint reading.
 *
 * The input is written to a private temp file, opened with checkpoint_open and, when that succeeds, its
 * config section is applied with checkpoint_read_config; then ngpt_load reads it into a tiny trainer
 * (made once, without data) whose model is the seed's, which reaches the parameter and moment sections,
 * and into a sampling trainer of the same model (ngpt_options.sample_only: the parameters go through the
 * load window, the moments are skipped).
 * So that mutations get past the per-section checksums, the harness recomputes the checksums of every
 * section that lies inside the file, unless the low bit of the input's last byte is set (in a whole file, a
 * bit of the last AdamW moment, which no check reads): then the file is read as it is, and the checksum
 * checks themselves are fuzzed.
 * NGPT_FUZZ_SEEDS=DIR writes seeds into DIR (a real checkpoint of the tiny trainer, saved with ngpt_save
 * after one training step, and truncated variants) and exits. */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"

#include "fuzz_common.h"

/* the tiny model: V 40, T 8, L 1, NH 2, C 8, with biases */
static void tiny_config(ngpt_config *c, const char *dir) {
    ngpt_config_defaults(c);
    copy_str(c->device, sizeof c->device, "cpu");
    copy_str(c->data_dir, sizeof c->data_dir, dir);
    copy_str(c->out_dir, sizeof c->out_dir, dir);
    c->vocab_size = 40; c->block_size = 8; c->n_layer = 1; c->n_head = 2; c->n_embd = 8; c->bias = 1;
    c->batch_size = 2; c->gradient_accumulation_steps = 1; c->dropout = 0;
    c->learning_rate = 1e-3; c->warmup_iters = 1; c->lr_decay_iters = 10; c->min_lr = 1e-4;
    c->eval_interval = 1000; c->eval_iters = 1; c->log_interval = 1; c->threads = 1;
    c->max_memory = 256.0 * 1024 * 1024;
}

static ngpt_trainer *tr, *sampler;

static void fz_free(void) {
    ngpt_trainer_free(tr);
    ngpt_trainer_free(sampler);
    tr = sampler = NULL;
}

static void make_seeds(const char *dir) {
    char data[600], path[700], err[NGPT_ERRLEN];
    snprintf(data, sizeof data, "%s/data.tmp", dir);
    mkdir(data, 0777);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", data, k ? "val.bin" : "train.bin");
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < 2000; i++) { uint16_t t = (uint16_t)(i * 7 % 40); fwrite(&t, 2, 1, f); }
        fclose(f);
    }
    ngpt_config c;
    tiny_config(&c, data);
    ngpt_trainer *t;
    if (ngpt_trainer_create(&c, NULL, &t, err, sizeof err)) { fprintf(stderr, "seeds: trainer: %s\n", err); exit(1); }
    float loss;
    if (ngpt_train_step(t, &loss)) { fprintf(stderr, "seeds: step: %s\n", ngpt_last_error(t)); exit(1); }
    snprintf(path, sizeof path, "%s/tiny.ckpt", dir);
    if (ngpt_save(t, path)) { fprintf(stderr, "seeds: save: %s\n", ngpt_last_error(t)); exit(1); }
    ngpt_trainer_free(t);
    for (int k = 0; k < 2; k++) {
        char p2[700];
        snprintf(p2, sizeof p2, "%s/%s", data, k ? "val.bin" : "train.bin");
        unlink(p2);
    }
    rmdir(data);
    /* truncated copies: inside the header, after it, inside the config section */
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const size_t cuts[] = {8, sizeof(CkptHeader) - 1, sizeof(CkptHeader) + 100, n / 2, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        snprintf(path, sizeof path, "%s/tiny_cut_%zu", dir, cuts[i]);
        f = fopen(path, "wb");
        fwrite(buf, 1, cuts[i], f);
        fclose(f);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *seeds = fz_seeds_dir();
    if (seeds) { make_seeds(seeds); exit(0); }
    fz_mkdir();
    ngpt_config c;
    tiny_config(&c, fz_dir); /* no data is read (no_data), nothing is written */
    ngpt_options opt;
    memset(&opt, 0, sizeof opt);
    opt.no_data = 1;
    char err[NGPT_ERRLEN];
    if (ngpt_trainer_create(&c, &opt, &tr, err, sizeof err)) { fprintf(stderr, "fuzz_checkpoint: trainer: %s\n", err); exit(1); }
    opt.sample_only = 1;
    if (ngpt_trainer_create(&c, &opt, &sampler, err, sizeof err)) { fprintf(stderr, "fuzz_checkpoint: sampler: %s\n", err); exit(1); }
    atexit(fz_free);
    return 0;
}

/* the checksum the writer gives n bytes */
static uint64_t checksum(const unsigned char *p, size_t n) {
    Hash64 h;
    hash_init(&h);
    hash_update(&h, p, n);
    return hash_final(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    unsigned char *buf = (unsigned char *)malloc(size ? size : 1);
    memcpy(buf, data, size);
    CkptHeader h;
    if (size >= sizeof h) {
        memcpy(&h, buf, sizeof h);
        if (!(buf[size - 1] & 1)) {
            for (int i = 0; i < N_SECTIONS; i++)
                if (h.sec[i].offset <= size && h.sec[i].bytes <= size - h.sec[i].offset)
                    h.sec[i].checksum = checksum(buf + h.sec[i].offset, (size_t)h.sec[i].bytes);
            memcpy(buf, &h, sizeof h);
        }
    }
    const char *path = fz_write("ckpt.bin", buf, size);
    CkptReader r;
    if (checkpoint_open(&r, path, err, sizeof err) == NGPT_OK) {
        fclose(r.f);
        ngpt_config cfg;
        ngpt_config_defaults(&cfg);
        checkpoint_read_config(path, &cfg, err, sizeof err);
        ngpt_load(tr, path);
        ngpt_load(sampler, path);
    }
    free(buf);
    return 0;
}
