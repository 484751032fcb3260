/* fuzz_config.c - libFuzzer target for the configuration parser.
 *
 * Each input is used twice:
 *   1. as a config file for ngpt_config_load (written to a private temp file);
 *   2. split at its first NUL byte (else its first '=') into a key and a value for ngpt_config_set.
 * After a successful load, the config is written as a checkpoint writes it (config_line, raw: `key = value`
 * lines, numbers exact) and read back as checkpoint_read_config reads it (config_set, stored); then as
 * ngpt_config_print writes it (backslashes doubled) and read back as a config file (ngpt_config_load): every
 * field must come back the same both ways (abort otherwise), since resume and printed configs rely on it.
 *
 * Build and run: tools/fuzz.sh 60 fuzz_config (or by hand:
 *   clang -O1 -g -fsanitize=fuzzer,address,undefined tools/fuzz/fuzz_config.c -lm -lpthread). */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"
#include "fuzz_common.h"

/* ---- the temp file: one private folder per process, the file rewritten for each input ---- */

/* ---- the round trips: config_line as checkpoint_write stores it, read as checkpoint_read_config; and as
 * ngpt_config_print writes it, read as a config file ---- */
static void roundtrip(const ngpt_config *a, int printed) {
    char text[1 << 16], line[600], msg[NGPT_ERRLEN];
    size_t o = 0;
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) { /* what checkpoint_write stores, or ngpt_config_print prints */
        int n = config_line(a, i, printed, line, sizeof line);
        memcpy(text + o, line, (size_t)n);
        o += (size_t)n;
    }
    text[o] = 0;
    ngpt_config b;
    ngpt_config_defaults(&b);
    if (printed) {
        const char *path = fz_write("printed.cfg", (const uint8_t *)text, o);
        if (ngpt_config_load(&b, path, msg, sizeof msg)) {
            fprintf(stderr, "config round trip: the printed config does not load back: %s\n", msg);
            abort();
        }
    }
    for (char *ln = text, *next; !printed && ln && *ln; ln = next) {
        next = strchr(ln, '\n');
        if (next) *next++ = 0;
        char *eq = strchr(ln, '=');
        if (!eq) continue;
        char *kend = eq;
        while (kend > ln && kend[-1] == ' ') kend--;
        *kend = 0;
        if (config_set(&b, ln, eq + 1, 1, msg, sizeof msg)) {
            fprintf(stderr, "config round trip: the stored line for '%s' does not load back: %s\n", ln, msg);
            abort();
        }
    }
    for (size_t i = 0; i < N_CONFIG_KEYS; i++) {
        const ConfigKey *k = &config_keys[i];
        const char *fa = (const char *)a + k->offset, *fb = (const char *)&b + k->offset;
        int same = 1;
        switch (k->type) {
        case KEY_INT: case KEY_BOOL: same = *(const int *)fa == *(const int *)fb; break;
        case KEY_I64: same = *(const long long *)fa == *(const long long *)fb; break;
        case KEY_FLOAT: same = *(const double *)fa == *(const double *)fb; break;
        case KEY_BYTES: same = fabs(*(const double *)fa - *(const double *)fb) <= 0.5; break; /* stored as whole bytes */
        case KEY_STR: same = !strcmp(fa, fb); break;
        default: break;
        }
        if (!same) {
            fprintf(stderr, "config round trip: %s differs after store and load\n", k->name);
            abort();
        }
    }
}

static FILE *devnull;

/* seeds: the recipes' config files and a few hand-written lines */
static void make_seeds(const char *dir) {
    static const char *const lines[] = {
        "batch_size = 5 * 8\nmax_memory = 2.68GiB  # a comment\nout_dir = 'out-#1'\n",
        "init_from = \"gpt2-xl\"\ndtype = 'bfloat16'\ncompile = False\nwandb_log = True\n",
        "learning_rate = 1e-3\nbeta2 = 0.99\nseed = 9199999999999999999\nrecompute = -1\n",
        "n_layer\0" "12", "device=cuda", "max_memory\0" "512 MiB", "dropout = 0.0 * 1",
        "import time\nfrom os import path\nwandb_run_name = 'ft-' + str(time.time())\ndataset = 'a' + \"b\"  # c\ndevice = 'cuda:0'\n",
        "dataset\0" "'a' + 'b'",
    };
    static const char *const files[] = {"data/shakespeare_char/train.cfg", "data/shakespeare_char/train_cpu.cfg",
                                        "data/shakespeare/train.cfg", "data/openwebtext/train_gpt2.cfg"};
    char name[64];
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        size_t n = strlen(lines[i]);
        if (i == 3 || i == 5 || i == 8) n += 1 + strlen(lines[i] + n + 1); /* key NUL value */
        snprintf(name, sizeof name, "lines_%zu", i);
        fz_seed(dir, name, lines[i], n);
    }
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        unsigned char *buf;
        size_t n;
        char err[NGPT_ERRLEN];
        if (tok_read_file(files[i], &buf, &n, err, sizeof err)) { fprintf(stderr, "seeds: %s (skipped)\n", err); continue; }
        snprintf(name, sizeof name, "recipe_%zu", i);
        fz_seed(dir, name, buf, n);
        free(buf);
    }
}

FZ_INITIALIZE_SEEDS_ONLY(make_seeds)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    if (!devnull) devnull = fopen("/dev/null", "w");

    /* 1. the bytes as a config file */
    ngpt_config cfg;
    ngpt_config_defaults(&cfg);
    const char *path = fz_write("train.cfg", data, size);
    if (ngpt_config_load(&cfg, path, err, sizeof err) == NGPT_OK) {
        roundtrip(&cfg, 0);
        roundtrip(&cfg, 1);
        ngpt_config_print(&cfg, devnull);
    }

    /* 2. key and value from the bytes */
    char *buf = (char *)malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = 0;
    char *key = buf, *value = memchr(buf, 0, size);
    if (value && value < buf + size) value++;
    else if ((value = strchr(buf, '=')) != NULL) *value++ = 0;
    else value = buf + size;
    ngpt_config_defaults(&cfg);
    if (ngpt_config_set(&cfg, key, value, err, sizeof err) == NGPT_OK) {
        /* a string with a line break cannot live in a config file or a checkpoint's `key = value` lines
         * (known, reported): only values without one must round-trip */
        if (!strchr(value, '\n')) roundtrip(&cfg, 0), roundtrip(&cfg, 1);
        ngpt_config_print(&cfg, devnull);
        config_validate(&cfg, err, sizeof err);
    }
    free(buf);
    return 0;
}
