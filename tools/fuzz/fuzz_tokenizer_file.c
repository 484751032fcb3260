/* fuzz_tokenizer_file.c - libFuzzer target for ngpt_tokenizer_load (nanogpt's compact .tok file) and
 * ngpt_tokenizer_load_llmc (llm.c's gpt2_tokenizer.bin: an input that starts with its magic).
 *
 * The input is written to a private temp file and loaded. So that mutations reach the parser behind the
 * two CRC-32s, the harness recomputes both CRCs of an input that has the magic and a whole header, unless
 * bit 0 of the reserved header byte 28 (which the loader ignores) is set: then the file is loaded as it is.
 * A tokenizer that loads must encode and decode: decode(encode(x)) == x for a text made of the input's
 * own bytes (abort otherwise), and it is freed. NGPT_FUZZ_SEEDS=DIR writes the seed corpus into DIR (a
 * real .tok saved from the GPT-2 vocabulary, truncated variants and a small hand-made vocabulary) and
 * exits; it reads $NGPT_SHARED_DATA/gpt2 (default ../shared/data/gpt2). */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"
#include "fuzz_common.h"
#include "../../test/llmc_tokenizer.h"


/* A small vocabulary built in memory: the 256 bytes, a few merges, and <|endoftext|>. */
static ngpt_tokenizer *small_vocab(void) {
    static const char *const merged[][2] = {{"a", "b"}, {"ab", "c"}, {" ", "t"}, {" t", "h"}, {" th", "e"}, {"e", "e"}, {"ee", "ee"},
                                            {"\xc3", "\xa9"}, {"1", "2"}};
    enum { M = sizeof merged / sizeof *merged };
    int32_t V = 256 + M + 1;
    size_t nb = 256 + strlen(TOK_EOT_TEXT);
    for (int r = 0; r < M; r++) nb += strlen(merged[r][0]) + strlen(merged[r][1]);
    ngpt_tokenizer *t = tok_alloc(V, M, nb);
    char err[NGPT_ERRLEN];
    size_t o = 0;
    for (int b = 0; b < 256; b++) { t->off[b] = (uint32_t)o; t->bytes[o++] = (unsigned char)(255 - b); }
    for (int r = 0; r < M; r++) {
        t->off[256 + r] = (uint32_t)o;
        size_t a = strlen(merged[r][0]), c = strlen(merged[r][1]);
        memcpy(t->bytes + o, merged[r][0], a);
        memcpy(t->bytes + o + a, merged[r][1], c);
        o += a + c;
    }
    t->off[256 + M] = (uint32_t)o;
    memcpy(t->bytes + o, TOK_EOT_TEXT, strlen(TOK_EOT_TEXT));
    o += strlen(TOK_EOT_TEXT);
    t->off[V] = (uint32_t)o;
    if (tok_index_tokens(t, "small", NULL, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    for (int r = 0; r < M; r++) {
        t->merges[r].left = tok_vocab_find(t, (const unsigned char *)merged[r][0], strlen(merged[r][0]));
        t->merges[r].right = tok_vocab_find(t, (const unsigned char *)merged[r][1], strlen(merged[r][1]));
    }
    if (tok_index_merges(t, "small", -1, 1, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    t->eot = 256 + M;
    return t;
}

static void make_seeds(const char *dir) {
    const char *d = getenv("NGPT_SHARED_DATA");
    char shared[512], enc[600], bpe[600], path[700], err[NGPT_ERRLEN];
    snprintf(shared, sizeof shared, "%s", d && *d ? d : "../shared/data");
    snprintf(enc, sizeof enc, "%s/gpt2/encoder.json", shared);
    snprintf(bpe, sizeof bpe, "%s/gpt2/vocab.bpe", shared);
    ngpt_tokenizer *t = small_vocab();
    snprintf(path, sizeof path, "%s/small.tok", dir);
    if (ngpt_tokenizer_save(t, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    snprintf(path, sizeof path, "%s/small_llmc.bin", dir); /* its ids are its merge ranks, as llm.c's file needs */
    if (!write_llmc_tokenizer(path, t, 2, t->n_vocab)) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    ngpt_tokenizer_free(t);
    if (ngpt_tokenizer_load_gpt2(enc, bpe, &t, err, sizeof err)) {
        fprintf(stderr, "seeds: no GPT-2 vocabulary (%s): only the small seed\n", err);
        return;
    }
    snprintf(path, sizeof path, "%s/gpt2_tokenizer.bin", dir);
    if (!write_llmc_tokenizer(path, t, 2, t->n_vocab)) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
    snprintf(path, sizeof path, "%s/gpt2.tok", dir);
    if (ngpt_tokenizer_save(t, path, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    ngpt_tokenizer_free(t);
    unsigned char *buf;
    size_t n;
    if (tok_read_file(path, &buf, &n, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    /* truncated: inside the header, after it, inside the lengths, the bytes, the merges, the flags */
    const size_t cuts[] = {7, 12, 47, 48, 48 + 4 * 1000, 48 + 4 * 50257 + 1000, n - 8 * 1000, n - 3};
    char name[64];
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        snprintf(name, sizeof name, "gpt2_cut_%zu", cuts[i]);
        fz_seed(dir, name, buf, cuts[i]);
    }
    free(buf);
}

FZ_INITIALIZE_SEEDS_ONLY(make_seeds)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    unsigned char *buf = (unsigned char *)malloc(size ? size : 1);
    memcpy(buf, data, size);
    if (size >= TOK_FILE_HEADER && !memcmp(buf, TOK_FILE_MAGIC, 8) && !(buf[28] & 1)) {
        tok_put_u32(buf + 40, tok_crc32(0, buf + TOK_FILE_HEADER, size - TOK_FILE_HEADER));
        tok_put_u32(buf + 44, tok_crc32(0, buf, 44));
    }
    int32_t magic = 0;
    if (size >= 4) memcpy(&magic, buf, 4);
    const char *path = fz_write("vocab.tok", buf, size);
    ngpt_tokenizer *t = NULL;
    int loaded = magic == LLMC_TOKENIZER_MAGIC ? ngpt_tokenizer_load_llmc(path, &t, err, sizeof err) : ngpt_tokenizer_load(path, &t, err, sizeof err);
    if (loaded == NGPT_OK) {
        /* the text: the input's bytes, at most 4 KiB of them */
        size_t len = MIN(size, (size_t)4096), n = 0, blen = 0;
        const char *text = (const char *)data + (size - len);
        int32_t *ids = (int32_t *)malloc((len + 1) * sizeof *ids);
        char *back = (char *)malloc(len + 1);
        for (int allow = 0; allow < 2; allow++) {
            if (ngpt_tokenizer_encode(t, text, len, allow, ids, len, &n, err, sizeof err) || n > len) {
                fprintf(stderr, "fuzz_tokenizer_file: encode failed on a loaded tokenizer: %s\n", err);
                abort();
            }
            if (ngpt_tokenizer_decode(t, ids, n, back, len, &blen, err, sizeof err) || blen != len || memcmp(back, text, len)) {
                fprintf(stderr, "fuzz_tokenizer_file: decode(encode(x)) != x on a loaded tokenizer\n");
                abort();
            }
        }
        size_t tl;
        for (int32_t id = -1; id <= ngpt_tokenizer_vocab_size(t); id += 97) ngpt_tokenizer_token(t, id, &tl);
        free(ids);
        free(back);
        ngpt_tokenizer_free(t);
    }
    free(buf);
    return 0;
}
