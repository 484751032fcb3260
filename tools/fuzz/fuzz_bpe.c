/* fuzz_bpe.c - libFuzzer target for GPT-2 BPE encoding with the real GPT-2 vocabulary.
 *
 * Input: byte 0 = flags (bit 0: allow_special; bit 1: stream with a small ids buffer of 1 + (bits 2..4)
 * ids), bytes 1..2 = a split point (little-endian, taken modulo len + 1), the rest = the text. Checks,
 * aborting on any failure:
 *   - encode gives at most len ids and decode(encode(x)) == x, byte for byte;
 *   - encode with cap 0 reports the same count (and NGPT_ERR_ARG when it is > 0);
 *   - encode_chunk fed the text in two deliveries (text[0..split), then all of it), the caller keeping the
 *     unconsumed tail as the API says, gives exactly the ids of encode.
 * The vocabulary is loaded once from $NGPT_SHARED_DATA/gpt2 (default ../shared/data/gpt2; run from the
 * repository root). NGPT_FUZZ_SEEDS=DIR writes a seed corpus into DIR and exits. */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"
#include "fuzz_common.h"

static ngpt_tokenizer *tok;

static void fz_free(void) { ngpt_tokenizer_free(tok); tok = NULL; }


static unsigned char *read_all(const char *path, size_t *n) {
    unsigned char *buf;
    char err[NGPT_ERRLEN];
    if (tok_read_file(path, &buf, n, err, sizeof err)) return NULL;
    return buf;
}

/* seeds: pieces of the test texts and edge cases, each behind 3 control bytes */
static void make_seeds(const char *dir, const char *shared) {
    static const char *const edge[] = {
        "Hello world", "<|endoftext|>", "a<|endoftext|>b<|endof", "   \n\n\t  x", "it's we'll they'd I'M",
        "\xff\xfe\x80\xc3\x28\xe2\x82\xf0\x9f\x98", "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\xf0\x9f\x98\x80 123456789",
        "\xc2\xa0\xe2\x80\xa8\xe3\x80\x80 \xcc\x81", "x                                                                 y",
    };
    unsigned char buf[8192];
    int k = 0;
    char name[64];
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        size_t n = strlen(edge[i]);
        buf[0] = (unsigned char)(i & 3 ? i : i | 2 | (i << 2));
        buf[1] = (unsigned char)(n / 2);
        buf[2] = 0;
        memcpy(buf + 3, edge[i], n);
        snprintf(name, sizeof name, "edge_%02d", k++);
        fz_seed(dir, name, buf, n + 3);
    }
    const char *files[2] = {"tinyshakespeare.txt", NULL};
    char path[600];
    for (int fi = 0; fi < 3; fi++) {
        size_t n = 0;
        unsigned char *s;
        if (fi < 1) { snprintf(path, sizeof path, "%s/%s", shared, files[fi]); s = read_all(path, &n); }
        else s = read_all(fi == 1 ? "test/fixtures/multilingual.txt" : "README.md", &n);
        if (!s) { fprintf(stderr, "seeds: cannot read %s (skipped)\n", fi ? "a test text" : path); continue; }
        for (size_t at = 0, j = 0; at < n && j < 12; at += n / 12 + 1, j++) {
            size_t m = MIN((size_t)(j % 3 == 0 ? 2000 : 300), n - at);
            buf[0] = (unsigned char)(j * 5);
            buf[1] = (unsigned char)(m * j / 12);
            buf[2] = (unsigned char)((m * j / 12) >> 8);
            memcpy(buf + 3, s + at, m);
            snprintf(name, sizeof name, "text%d_%02zu", fi, j);
            fz_seed(dir, name, buf, m + 3);
        }
        free(s);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *d = getenv("NGPT_SHARED_DATA");
    char shared[512], enc[600], bpe[600], err[NGPT_ERRLEN];
    snprintf(shared, sizeof shared, "%s", d && *d ? d : "../shared/data");
    const char *seeds = fz_seeds_dir();
    if (seeds) { make_seeds(seeds, shared); exit(0); }
    snprintf(enc, sizeof enc, "%s/gpt2/encoder.json", shared);
    snprintf(bpe, sizeof bpe, "%s/gpt2/vocab.bpe", shared);
    if (ngpt_tokenizer_load_gpt2(enc, bpe, &tok, err, sizeof err)) {
        fprintf(stderr, "fuzz_bpe: cannot load the GPT-2 vocabulary (set NGPT_SHARED_DATA to the folder holding gpt2/): %s\n", err);
        exit(1);
    }
    atexit(fz_free);
    return 0;
}

static void die(const char *what, const char *err) {
    fprintf(stderr, "fuzz_bpe: %s%s%s\n", what, err ? ": " : "", err ? err : "");
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    if (size < 3) return 0;
    int flags = data[0], allow = flags & 1;
    const char *text = (const char *)data + 3;
    size_t len = size - 3, split = ((size_t)data[1] | (size_t)data[2] << 8) % (len + 1);
    int32_t *ids = (int32_t *)malloc((len + 1) * sizeof *ids), *ids2 = (int32_t *)malloc((len + 1) * sizeof *ids2);
    char *back = (char *)malloc(len + 1);
    size_t n = 0, m = 0, blen = 0;

    /* encode, decode, compare */
    if (ngpt_tokenizer_encode(tok, text, len, allow, ids, len, &n, err, sizeof err)) die("encode failed with cap = len", err);
    if (n > len) die("more ids than bytes", NULL);
    if (ngpt_tokenizer_decode(tok, ids, n, back, len, &blen, err, sizeof err)) die("decode failed", err);
    if (blen != len || memcmp(back, text, len)) die("decode(encode(x)) != x", NULL);

    /* sizing call */
    int rc = ngpt_tokenizer_encode(tok, text, len, allow, NULL, 0, &m, err, sizeof err);
    if (m != n || (n > 0 ? rc != NGPT_ERR_ARG : rc != NGPT_OK)) die("encode with cap 0 disagrees", NULL);

    /* streaming in two deliveries, with a small or a full ids buffer */
    size_t cap = flags & 2 ? 1 + (size_t)(flags >> 2 & 7) : len + 1, pos = 0, avail = split, got = 0, rounds = 0;
    int32_t *chunk = (int32_t *)malloc((len + 1) * sizeof *chunk);
    for (;;) {
        int is_last = avail == len;
        size_t cn = 0, used = 0;
        if (++rounds > 4 * len + 16) die("encode_chunk makes no progress", NULL);
        rc = ngpt_tokenizer_encode_chunk(tok, text + pos, avail - pos, is_last, allow, chunk, cap, &cn, &used, err, sizeof err);
        if (rc == NGPT_ERR_ARG) {
            if (used != 0 || cn <= cap || cn > len + 1) die("encode_chunk: bad NGPT_ERR_ARG", err);
            cap = cn;
            continue;
        }
        if (rc) die("encode_chunk failed", err);
        if (cn > cap || pos + used > avail || got + cn > n) die("encode_chunk: counts out of range", NULL);
        memcpy(ids2 + got, chunk, cn * sizeof *chunk);
        got += cn;
        pos += used;
        if (is_last && pos == len) break;
        if (used == 0) {
            if (is_last) die("encode_chunk: is_last = 1 but nothing consumed", NULL);
            avail = len; /* deliver the rest */
        }
    }
    if (got != n || memcmp(ids, ids2, n * sizeof *ids)) die("encode_chunk in two deliveries != encode", NULL);
    free(chunk);
    free(ids);
    free(ids2);
    free(back);
    return 0;
}
