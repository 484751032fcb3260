/* fuzz_data_header.c - libFuzzer target for the dataset readers: token files (nanoGPT's raw uint16 .bin
 * and llm.c's shards with a 256-int32 header, tokenfile_open), a split of them (tokenset_open,
 * tokenset_window) and the character vocabulary meta.bin (charvocab_load, charvocab_decode).
 *
 * The input is written as DIR/train.bin in a private temp folder and opened with a vocabulary and a
 * block size taken from its first bytes (so both the accepting and the refusing paths run), then read as
 * a meta.bin and as nanoGPT's meta.pkl (charvocab_load_pickle). Every window of an opened split is
 * touched. NGPT_FUZZ_SEEDS=DIR writes seeds (the pickles of test/fixtures/meta_pkl among them) and exits. */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"
#include "fuzz_common.h"


static void make_seeds(const char *dir) {
    unsigned char buf[4096];
    /* raw uint16 tokens */
    for (int i = 0; i < 200; i++) { uint16_t t = (uint16_t)(i * 37 % 65); memcpy(buf + 2 * i, &t, 2); }
    fz_seed(dir, "raw_tokens", buf, 400);
    /* an llm.c shard: magic 20240520, version 1, 100 tokens */
    int32_t hdr[256] = {LLMC_MAGIC, 1, 100};
    memcpy(buf, hdr, sizeof hdr);
    for (int i = 0; i < 100; i++) { uint16_t t = (uint16_t)(i * 511 % 50257); memcpy(buf + 1024 + 2 * i, &t, 2); }
    fz_seed(dir, "llmc_shard", buf, 1024 + 200);
    /* a character vocabulary: "\n", " ", "a".."z", "é", "中", "😀" */
    size_t o = 0;
    uint32_t cps[32], n = 0;
    cps[n++] = '\n'; cps[n++] = ' ';
    for (uint32_t c = 'a'; c <= 'z'; c++) cps[n++] = c;
    cps[n++] = 0xE9; cps[n++] = 0x4E2D; cps[n++] = 0x1F600;
    memcpy(buf, CHARVOCAB_MAGIC, 8); o = 8;
    uint32_t v = CHARVOCAB_VERSION;
    memcpy(buf + o, &v, 4); o += 4;
    memcpy(buf + o, &n, 4); o += 4;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char u[4];
        int k = utf8_encode(cps[i], u);
        buf[o++] = (unsigned char)k;
        memcpy(buf + o, u, (size_t)k);
        o += (size_t)k;
    }
    fz_seed(dir, "meta_bin", buf, o);
    /* nanoGPT's meta.pkl in protocols 1, 2 and 4, and a wide one (two-byte ids, a memo past 256) */
    static const char *const pickles[4] = {"shakespeare_p1", "shakespeare_p2", "shakespeare_p4", "wide_p4"};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof path, "test/fixtures/meta_pkl/%s.pkl", pickles[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        static unsigned char pkl[8192];
        size_t n = fread(pkl, 1, sizeof pkl, f);
        fclose(f);
        fz_seed(dir, pickles[i], pkl, n);
    }
}

FZ_INITIALIZE_SEEDS_ONLY(make_seeds)

static CharVocab *cv;

static void fz_free(void) { free(cv); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    if (!cv) { cv = (CharVocab *)malloc(sizeof *cv); atexit(fz_free); }
    const char *path = fz_write("train.bin", data, size);

    /* the vocabulary and block size: from bytes the formats mostly do not care about */
    int vocab = size > 2 ? 1 + (int)(((unsigned)data[size - 1] << 8 | data[size - 2]) % 65536) : 50257;
    int T = size > 3 ? 1 + data[size - 3] % 64 : 8;
    static const int vocabs[2] = {50257, 65};
    for (int k = 0; k < 3; k++) {
        TokenFile f;
        int V = k < 2 ? vocabs[k] : vocab;
        if (tokenfile_open(&f, path, V, (size_t)T + 1, k == 2, err, sizeof err) == NGPT_OK) { /* k == 2: as a file named as an llm.c shard */
            for (size_t i = 0; i < f.ntok; i++)
                if (f.tokens[i] >= V) { fprintf(stderr, "fuzz_data_header: token %zu = %d passed the check for V = %d\n", i, f.tokens[i], V); abort(); }
            tokenfile_close(&f);
        }
    }
    TokenSet s;
    if (tokenset_open(&s, fz_dir, "train", vocab, T, err, sizeof err) == NGPT_OK) {
        volatile unsigned sum = 0; /* the reads must happen */
        const TokenFile *file;
        for (size_t g = 0; g < s.windows; g += 1 + s.windows / 64) {
            const uint16_t *w = tokenset_window(&s, g, &file);
            for (int t = 0; t <= T; t++) sum += w[t];
        }
        if (s.windows) { const uint16_t *w = tokenset_window(&s, s.windows - 1, &file); for (int t = 0; t <= T; t++) sum += w[t]; }
        tokenset_close(&s);
    }

    /* the same bytes as nanoGPT's meta.pkl: refused with a message, or a vocabulary in code point order */
    err[0] = 0;
    if (charvocab_load_pickle(cv, path, err, sizeof err) == NGPT_OK) {
        for (int i = 1; i < cv->n; i++)
            if (cv->cp[i] <= cv->cp[i - 1]) { fprintf(stderr, "fuzz_data_header: meta.pkl read out of order at id %d\n", i); abort(); }
    } else if (!err[0]) {
        fprintf(stderr, "fuzz_data_header: meta.pkl refused without a message\n");
        abort();
    }

    /* the same bytes as a meta.bin */
    if (charvocab_load(cv, path, err, sizeof err) == NGPT_OK) {
        int32_t ids[70], back[70];
        char out[300];
        size_t len = 0, short_len = 0, n = 0;
        for (int i = 0; i < 70; i++) ids[i] = (int32_t)(i * 997) % (cv->n + 2) - 1; /* -1 and n: outside */
        if (charvocab_decode(cv, ids, 70, out, sizeof out, &len, err, sizeof err) != NGPT_ERR_ARG) {
            fprintf(stderr, "fuzz_data_header: ids outside the vocabulary decoded\n");
            abort();
        }
        for (int i = 0; i < 70; i++) ids[i] = (int32_t)(i * 997) % cv->n;
        int rc = charvocab_decode(cv, ids, 70, out, sizeof out, &len, err, sizeof err);
        charvocab_decode(cv, ids, 70, out, 7, &short_len, err, sizeof err);
        if (rc || short_len != len) { fprintf(stderr, "fuzz_data_header: decode: rc %d, %zu bytes, %zu into 7\n", rc, len, short_len); abort(); }
        /* the ids are in code point order, one character each: text to ids gives them back */
        rc = charvocab_encode(cv, out, len, back, 70, &n, err, sizeof err);
        if (rc || n != 70 || memcmp(ids, back, sizeof ids)) { fprintf(stderr, "fuzz_data_header: decode then encode: rc %d, %zu ids: %s\n", rc, n, err); abort(); }
    }
    return 0;
}
