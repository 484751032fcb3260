/* test_tokenizer.c: GPT-2's byte-level BPE tokenizer against reference encodings and itself.
 *
 * Run from the repository root (./build.sh test does): it reads test/fixtures/bpe_cases.bin (made by
 * tools/gen_bpe_fixtures.js from OpenAI's tiktoken, cross-checked with js-tiktoken),
 * test/fixtures/multilingual.txt, and GPT-2's encoder.json, vocab.bpe and Tiny Shakespeare from the
 * shared data folder (check.h: shared_data_dir()). Bad vocabulary files are made at run time in a
 * temporary folder. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include "llmc_tokenizer.h"

#include <sys/stat.h> /* mkdir */
#include <unistd.h>   /* getpid, rmdir */

/* ---- shared state: the GPT-2 tokenizer and the fixture cases, loaded once ------------------------------ */

typedef struct {
    char name[128];
    int kind, special;
    unsigned char *bytes; /* kind 0 */
    size_t n_bytes;
    int32_t *ids;
    size_t n_ids;
    uint32_t file_size, file_crc, block, n_blocks, *blocks; /* kind 1 */
} bpe_case;

static ngpt_tokenizer *gpt2;
static bpe_case *cases;
static size_t n_cases;
static char tmp_dir[256];

static unsigned char *read_all(const char *path, size_t *n) {
    unsigned char *buf;
    char err[256];
    if (tok_read_file(path, &buf, n, err, sizeof err)) { printf("  cannot read %s: %s\n", path, err); return NULL; }
    return buf;
}

static int write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

static const char *shared_path(const char *name) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", shared_data_dir(), name);
    return buf[k];
}

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir, name);
    return buf[k];
}

/* Reads bpe_cases.bin (format: tools/gen_bpe_fixtures.js); returns 0 on success. */
static int load_cases(const char *path) {
    size_t n, o = 12;
    unsigned char *b = read_all(path, &n);
    uint32_t count;
#define NEED(k) do { if (o + (k) > n - 4) { printf("  %s: truncated at byte %zu\n", path, o); goto bad; } } while (0)
#define U32() (o += 4, tok_get_u32(b + o - 4))
    if (!b) return 1;
    if (n < 16 || memcmp(b, "NGPT-BPE", 8) != 0 || tok_get_u32(b + 8) != 1) { printf("  %s: not a version 1 NGPT-BPE file\n", path); goto bad; }
    if (tok_crc32(0, b, n - 4) != tok_get_u32(b + n - 4)) { printf("  %s: CRC-32 mismatch\n", path); goto bad; }
    NEED(4);
    count = U32();
    cases = calloc(count, sizeof *cases);
    for (n_cases = 0; n_cases < count; n_cases++) {
        bpe_case *c = &cases[n_cases];
        uint32_t nl;
        NEED(12);
        c->kind = (int)U32();
        c->special = (int)(U32() & 1);
        nl = U32();
        NEED(nl);
        snprintf(c->name, sizeof c->name, "%.*s", (int)nl, (const char *)b + o);
        o += nl;
        if (c->kind == 0) {
            NEED(4);
            c->n_bytes = U32();
            NEED(c->n_bytes + 4);
            c->bytes = malloc(c->n_bytes + 1);
            memcpy(c->bytes, b + o, c->n_bytes);
            o += c->n_bytes;
            c->n_ids = U32();
            NEED(4 * c->n_ids);
            c->ids = malloc(4 * c->n_ids + 4);
            for (size_t i = 0; i < c->n_ids; i++) c->ids[i] = (int32_t)U32();
        } else {
            NEED(20);
            c->file_size = U32();
            c->file_crc = U32();
            c->n_ids = U32();
            c->block = U32();
            c->n_blocks = U32();
            NEED(4 * (size_t)c->n_blocks);
            c->blocks = malloc(4 * (size_t)c->n_blocks + 4);
            for (size_t i = 0; i < c->n_blocks; i++) c->blocks[i] = U32();
        }
    }
    free(b);
    return 0;
bad:
    free(b);
    return 1;
#undef NEED
#undef U32
}

static const bpe_case *find_case(const char *name) {
    for (size_t i = 0; i < n_cases; i++) if (strcmp(cases[i].name, name) == 0) return &cases[i];
    return NULL;
}

/* Encodes a whole text (allocating); NULL on failure, with the reason printed as a CHECK failure. */
static int32_t *encode_all(const ngpt_tokenizer *t, const void *s, size_t n, int special, size_t *n_ids) {
    char err[512];
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    int rc = ngpt_tokenizer_encode(t, s, n, special, ids, n + 1, n_ids, err, sizeof err);
    CHECK(rc == 0, "encode failed: %s", err);
    if (rc) { free(ids); return NULL; }
    return ids;
}

/* The first position where two id sequences differ, or -1. */
static long first_diff(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++) if (a[i] != b[i]) return (long)i;
    return na == nb ? -1 : (long)n;
}

static void report_diff(const char *what, const int32_t *got, size_t ng, const int32_t *want, size_t nw) {
    long d = first_diff(got, ng, want, nw);
    char g[200] = "", w[200] = "";
    if (d < 0) return;
    for (long i = d > 2 ? d - 2 : 0, k = 0; i < (long)ng && k < 8; i++, k++)
        snprintf(g + strlen(g), sizeof g - strlen(g), "%ld ", (long)got[i]);
    for (long i = d > 2 ? d - 2 : 0, k = 0; i < (long)nw && k < 8; i++, k++)
        snprintf(w + strlen(w), sizeof w - strlen(w), "%ld ", (long)want[i]);
    CHECK(0, "%s: %zu ids, want %zu; first difference at id %ld: got [%s] want [%s] (from id %ld)", what, ng, nw, d, g, w,
          d > 2 ? d - 2 : 0);
}

static int roundtrip_ok(const ngpt_tokenizer *t, const unsigned char *s, size_t n, int special, const char *what) {
    size_t n_ids, len;
    char err[512];
    int32_t *ids = encode_all(t, s, n, special, &n_ids);
    char *back = malloc(n + 1);
    int ok = 0;
    if (ids) {
        int rc = ngpt_tokenizer_decode(t, ids, n_ids, back, n + 1, &len, err, sizeof err);
        CHECK(rc == 0, "%s: decode failed: %s", what, err);
        ok = rc == 0 && len == n && memcmp(back, s, n) == 0 && n_ids <= n;
        if (rc == 0 && !ok) {
            size_t d = 0;
            while (d < n && d < len && back[d] == (char)s[d]) d++;
            CHECK(0, "%s: decode(encode(x)) != x: %zu bytes back for %zu, first difference at byte %zu (%zu ids)", what, len, n,
                  d, n_ids);
        }
    }
    free(ids);
    free(back);
    return ok;
}

/* ---- a slow, obvious BPE for comparison: encoder.py's loop over a sorted array of merges ---------------- */

typedef struct { int32_t left, right, rank, result; } slow_merge;
static slow_merge *slow;

static int slow_cmp(const void *a, const void *b) {
    const slow_merge *x = a, *y = b;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return x->right < y->right ? -1 : x->right > y->right;
}

static const slow_merge *slow_find(int32_t l, int32_t r) {
    slow_merge key = {l, r, 0, 0};
    return bsearch(&key, slow, (size_t)gpt2->n_merges, sizeof *slow, slow_cmp);
}

/* encoder.py's bpe(): find the lowest-ranked pair; replace each of its occurrences, left to right. */
static size_t slow_bpe(const unsigned char *p, size_t n, int32_t *out) {
    int32_t *w = malloc((n + 1) * sizeof *w), *nw = malloc((n + 1) * sizeof *nw);
    size_t len = n;
    for (size_t i = 0; i < n; i++) w[i] = gpt2->byte_tok[p[i]];
    while (len > 1) {
        const slow_merge *best = NULL;
        size_t k = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            const slow_merge *m = slow_find(w[i], w[i + 1]);
            if (m && (!best || m->rank < best->rank)) best = m;
        }
        if (!best) break;
        for (size_t i = 0; i < len;) {
            if (i + 1 < len && w[i] == best->left && w[i + 1] == best->right) { nw[k++] = best->result; i += 2; }
            else nw[k++] = w[i++];
        }
        memcpy(w, nw, k * sizeof *w);
        len = k;
    }
    memcpy(out, w, len * sizeof *w);
    free(w);
    free(nw);
    return len;
}

/* Splits text into pre-tokens with the library's scanner and checks tok_bpe (vocabulary shortcut, small
 * and heap merging) against slow_bpe on each. Returns the number of pre-tokens that differ. */
static size_t compare_bpe_on(const unsigned char *s, size_t n, size_t *pieces) {
    size_t pos = 0, bad = 0;
    int32_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    *pieces = 0;
    while (pos < n) {
        size_t e, na, nb;
        if (!tok_piece_end(gpt2, s, pos, n, 0, &e) || e <= pos) { bad++; break; }
        na = tok_bpe(gpt2, s + pos, e - pos, a);
        nb = slow_bpe(s + pos, e - pos, b);
        if (na != nb || memcmp(a, b, na * sizeof *a) != 0) {
            if (bad < 3) report_diff("tok_bpe vs encoder.py's algorithm", a, na, b, nb);
            bad++;
        }
        (*pieces)++;
        pos = e;
    }
    free(a);
    free(b);
    return bad;
}

/* ---- tests --------------------------------------------------------------------------------------------- */

static void test_load_gpt2(void) {
    char err[512];
    int rc = ngpt_tokenizer_load_gpt2(shared_path("gpt2/encoder.json"), shared_path("gpt2/vocab.bpe"), &gpt2, err, sizeof err);
    CHECK(rc == 0, "load_gpt2 failed (%d): %s", rc, err);
    if (rc) return;
    CHECK(ngpt_tokenizer_vocab_size(gpt2) == 50257, "vocab size %d, want 50257", ngpt_tokenizer_vocab_size(gpt2));
    CHECK(ngpt_tokenizer_eot(gpt2) == 50256, "eot %ld, want 50256", (long)ngpt_tokenizer_eot(gpt2));
    CHECK(gpt2->n_merges == 50000, "%ld merges, want 50000", (long)gpt2->n_merges);
    size_t len;
    const char *p = ngpt_tokenizer_token(gpt2, 50256, &len);
    CHECK(p && len == 13 && memcmp(p, "<|endoftext|>", 13) == 0, "token 50256 is not <|endoftext|>");
    p = ngpt_tokenizer_token(gpt2, 220, &len);
    CHECK(p && len == 1 && p[0] == ' ', "token 220 is not a space");
    p = ngpt_tokenizer_token(gpt2, 262, &len);
    CHECK(p && len == 4 && memcmp(p, " the", 4) == 0, "token 262 is not ' the'");
    /* slow_bpe's index, built independently of the library's hash table */
    slow = malloc((size_t)gpt2->n_merges * sizeof *slow);
    for (int32_t r = 0; r < gpt2->n_merges; r++)
        slow[r] = (slow_merge){gpt2->merges[r].left, gpt2->merges[r].right, r, gpt2->merges[r].result};
    qsort(slow, (size_t)gpt2->n_merges, sizeof *slow, slow_cmp);
}

static void test_fixture_cases(void) {
    size_t inl = 0, bad = 0;
    CHECK(gpt2 && n_cases > 50, "no tokenizer or fixture cases (%zu)", n_cases);
    if (!gpt2) return;
    for (size_t k = 0; k < n_cases; k++) {
        const bpe_case *c = &cases[k];
        size_t n;
        int32_t *ids;
        if (c->kind != 0) continue;
        inl++;
        ids = encode_all(gpt2, c->bytes, c->n_bytes, c->special, &n);
        if (!ids) { bad++; continue; }
        if (first_diff(ids, n, c->ids, c->n_ids) >= 0) {
            char what[200];
            snprintf(what, sizeof what, "case '%s'%s", c->name, c->special ? " (allow_special)" : "");
            report_diff(what, ids, n, c->ids, c->n_ids);
            bad++;
        }
        free(ids);
    }
    printf("  %zu fixture cases, %zu differ\n", inl, bad);
}

static void test_fixture_roundtrip(void) {
    size_t bad = 0;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    for (size_t k = 0; k < n_cases; k++) {
        const bpe_case *c = &cases[k];
        if (c->kind != 0) continue;
        for (int sp = 0; sp < 2; sp++) {
            char what[200];
            snprintf(what, sizeof what, "case '%s' (allow_special %d)", c->name, sp);
            bad += !roundtrip_ok(gpt2, c->bytes, c->n_bytes, sp, what);
        }
    }
    CHECK(bad == 0, "%zu round trips failed", bad);
}

static void test_multilingual_file(void) {
    size_t n, n_ids;
    unsigned char *s = read_all("test/fixtures/multilingual.txt", &n);
    const bpe_case *c = find_case("multilingual.txt");
    CHECK(s && c, "need test/fixtures/multilingual.txt and its case in bpe_cases.bin");
    if (!s || !c || !gpt2) { free(s); return; }
    CHECK(n == c->n_bytes && memcmp(s, c->bytes, n) == 0,
          "multilingual.txt (%zu bytes) is not the text bpe_cases.bin was made from (%zu bytes): rerun tools/gen_bpe_fixtures.js", n,
          c->n_bytes);
    int32_t *ids = encode_all(gpt2, s, n, 0, &n_ids);
    if (ids) report_diff("multilingual.txt", ids, n_ids, c->ids, c->n_ids);
    roundtrip_ok(gpt2, s, n, 0, "multilingual.txt");
    roundtrip_ok(gpt2, s, n, 1, "multilingual.txt (allow_special)");
    printf("  multilingual.txt: %zu bytes, %zu ids\n", n, n_ids);
    free(ids);
    free(s);
}

static void test_tinyshakespeare(void) {
    size_t n, n_ids;
    unsigned char *s = read_all(shared_path("tinyshakespeare.txt"), &n);
    const bpe_case *c = find_case("tinyshakespeare.txt");
    CHECK(s && c && c->kind == 1, "need tinyshakespeare.txt and its digest in bpe_cases.bin");
    if (!s || !c || !gpt2) { free(s); return; }
    CHECK(n == c->file_size && tok_crc32(0, s, n) == c->file_crc, "tinyshakespeare.txt is not the file the digest was made from");
    int32_t *ids = encode_all(gpt2, s, n, 0, &n_ids);
    if (ids) {
        CHECK(n_ids == c->n_ids, "%zu ids, want %zu", n_ids, (size_t)c->n_ids);
        for (size_t b = 0; b < c->n_blocks; b++) {
            size_t lo = b * c->block, hi = lo + c->block < n_ids ? lo + c->block : n_ids;
            unsigned char *le = malloc(4 * (hi > lo ? hi - lo : 1));
            for (size_t i = lo; i < hi; i++) tok_put_u32(le + 4 * (i - lo), (uint32_t)ids[i]);
            uint32_t crc = hi > lo ? tok_crc32(0, le, 4 * (hi - lo)) : 0;
            free(le);
            if (crc != c->blocks[b]) {
                CHECK(0, "ids %zu..%zu differ from the reference (block CRC 0x%08lX, want 0x%08lX)", lo, hi, (unsigned long)crc,
                      (unsigned long)c->blocks[b]);
                break;
            }
        }
        printf("  tinyshakespeare.txt: %zu bytes, %zu ids\n", n, n_ids);
    }
    roundtrip_ok(gpt2, s, n, 0, "tinyshakespeare.txt");
    free(ids);
    free(s);
}

static uint64_t rng_state = 0x853c49e6748fea9bu;
static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Du) >> 32);
}

/* A random byte string: uniform bytes, or pieces of text from many classes with some bytes broken. */
static size_t random_text(unsigned char *s, size_t cap) {
    static const char *pool[] = {"a", "Z", "the", " the", "\xc3\xa9", "\xd0\xb6", "\xd7\xa9", "\xe0\xa4\x95", "\xe0\xa4\xbf",
                                 "\xe4\xb8\xad", "\xea\xb0\x80", "1", "42", "\xd9\xa3", "\xc2\xbd", " ", " ", "  ", "\n", "\r\n",
                                 "\t", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xc2\x85", "\xef\xbb\xbf", "'", "'s", "'re",
                                 "'ll", "'S", ".", ",", "!", "...", "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "<|endoftext|>", "<|",
                                 "\xff", "\x80", "\xe2\x82", "\xf0\x9f", "\xed\xa0\x80", "=", "_", "\"", "\x00"};
    size_t n = 0, target = rnd() % (cap < 700 ? cap : 700);
    int mode = (int)(rnd() % 4);
    while (n < target) {
        if (mode == 0) { s[n++] = (unsigned char)rnd(); continue; }
        const char *p = pool[rnd() % (sizeof pool / sizeof *pool)];
        size_t m = strlen(p);
        if (*p == 0) m = 1;
        if (mode == 3 && rnd() % 50 == 0) { p = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; m = 67; }
        if (n + m > target) break;
        memcpy(s + n, p, m);
        n += m;
    }
    return n;
}

static void test_random_roundtrip(void) {
    unsigned char buf[1024];
    size_t bad = 0, total = 0;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    for (int k = 0; k < 3000; k++) {
        size_t n = random_text(buf, sizeof buf);
        char what[64];
        snprintf(what, sizeof what, "random text %d (%zu bytes)", k, n);
        bad += !roundtrip_ok(gpt2, buf, n, k & 1, what);
        total += n;
    }
    CHECK(bad == 0, "%zu of 3000 random texts did not round-trip", bad);
    printf("  3000 random texts, %zu bytes\n", total);
}

static void test_bpe_vs_slow(void) {
    size_t n, pieces, bad, total = 0;
    unsigned char *s;
    if (!gpt2 || !slow) { CHECK(0, "no tokenizer"); return; }
    /* every token's own bytes: tok_bpe takes the shortcut exactly where the slow BPE agrees */
    size_t not_whole = 0;
    for (int32_t id = 0; id < gpt2->n_vocab; id++) {
        size_t len, m;
        const unsigned char *p = (const unsigned char *)ngpt_tokenizer_token(gpt2, id, &len);
        int32_t out[256];
        m = slow_bpe(p, len, out);
        int whole = m == 1 && out[0] == id;
        not_whole += !whole;
        CHECK(whole == gpt2->whole[id], "token %ld: whole flag %d, slow BPE says %d", (long)id, gpt2->whole[id], whole);
    }
    CHECK(not_whole == 1, "%zu tokens are not their own BPE (want 1: <|endoftext|>)", not_whole);
    s = read_all(shared_path("tinyshakespeare.txt"), &n);
    if (s) {
        bad = compare_bpe_on(s, n, &pieces);
        CHECK(bad == 0, "tinyshakespeare: %zu of %zu pre-tokens differ", bad, pieces);
        total += pieces;
        free(s);
    }
    s = read_all("test/fixtures/multilingual.txt", &n);
    if (s) {
        bad = compare_bpe_on(s, n, &pieces);
        CHECK(bad == 0, "multilingual: %zu of %zu pre-tokens differ", bad, pieces);
        total += pieces;
        free(s);
    }
    /* long pieces, past TOK_SMALL, go through the heap: compare both merging loops directly too */
    unsigned char buf[2048];
    int32_t a[2048], b[2048];
    size_t differ = 0;
    for (int k = 0; k < 400; k++) {
        size_t m = 0, len = 1 + rnd() % 1500, na, nb;
        int mode = k % 4;
        while (m < len) {
            if (mode == 0) buf[m++] = (unsigned char)rnd();
            else if (mode == 1) buf[m++] = (unsigned char)("abcdefghij etaoin"[rnd() % 17]);
            else if (mode == 2) buf[m++] = (unsigned char)("=-*#"[rnd() % 4]);
            else { const char *w = " the quick brown fox"; size_t l = strlen(w); for (size_t i = 0; i < l && m < len; i++) buf[m++] = (unsigned char)w[i]; }
        }
        for (size_t i = 0; i < len; i++) a[i] = b[i] = gpt2->byte_tok[buf[i]];
        if (len <= TOK_SMALL) {
            uint32_t rank[TOK_SMALL];
            na = tok_bpe_small(gpt2, a, rank, len);
        } else {
            na = slow_bpe(buf, len, a);
        }
        nb = tok_bpe_heap(gpt2, b, len);
        if (na != nb || memcmp(a, b, na * sizeof *a) != 0) { if (!differ) report_diff("heap vs small/slow", b, nb, a, na); differ++; }
        na = tok_bpe(gpt2, buf, len, a);
        nb = slow_bpe(buf, len, b);
        if (na != nb || memcmp(a, b, na * sizeof *a) != 0) { if (!differ) report_diff("tok_bpe vs slow", a, na, b, nb); differ++; }
    }
    CHECK(differ == 0, "%zu of 800 random piece comparisons differ", differ);
    printf("  %zu pre-tokens and 400 random pieces (up to 1500 bytes) agree with encoder.py's algorithm\n", total);
}

/* Encodes s as a stream read step bytes at a time (step 0: random steps of 1..64), carrying the
 * unconsumed tail over, with cap ids per call. Returns the ids (malloc'd) or NULL. */
static int32_t *encode_stream(const ngpt_tokenizer *t, const unsigned char *s, size_t n, size_t step, int special, size_t cap,
                              size_t *n_ids) {
    char *buf = malloc(n + 1), err[512];
    int32_t *out = malloc((n + 1) * sizeof *out), *part = malloc((cap + 1) * sizeof *part);
    size_t blen = 0, pos = 0, total = 0;
    for (;;) {
        size_t take = step ? step : 1 + rnd() % 64;
        if (take > n - pos) take = n - pos;
        memcpy(buf + blen, s + pos, take);
        blen += take;
        pos += take;
        int last = pos == n;
        for (;;) {
            size_t k, used;
            int rc = ngpt_tokenizer_encode_chunk(t, buf, blen, last, special, part, cap, &k, &used, err, sizeof err);
            if (rc == NGPT_ERR_ARG && used == 0 && k > cap) { /* the next pre-token needs k ids: retry with room for them */
                int32_t *big = malloc(k * sizeof *big);
                size_t k2;
                rc = ngpt_tokenizer_encode_chunk(t, buf, blen, last, special, big, k, &k2, &used, err, sizeof err);
                if (rc == 0 && (k2 == 0 || k2 > k || used == 0)) { CHECK(0, "encode_chunk with the cap it asked for: %zu ids, %zu used", k2, used); rc = -1; }
                if (rc == 0) memcpy(part, big, (k2 < cap + 1 ? k2 : 0) * sizeof *part);
                if (rc == 0 && k2 > cap) { /* append directly */
                    memcpy(out + total, big, k2 * sizeof *big);
                    total += k2;
                    k = 0;
                } else {
                    k = k2;
                }
                free(big);
            }
            if (rc) { CHECK(0, "encode_chunk (step %zu, cap %zu) at byte %zu: %s", step, cap, pos - blen, err); goto fail; }
            if (total + k > n + 1 || used > blen) { CHECK(0, "encode_chunk returned too much"); goto fail; }
            memcpy(out + total, part, k * sizeof *part);
            total += k;
            memmove(buf, buf + used, blen - used);
            blen -= used;
            if (used == 0 || blen == 0) {
                if (used == 0 && k != 0) { CHECK(0, "encode_chunk gave ids without consuming bytes"); goto fail; }
                break;
            }
        }
        if (last) {
            if (blen) { CHECK(0, "encode_chunk left %zu bytes with is_last set (step %zu, cap %zu)", blen, step, cap); goto fail; }
            break;
        }
    }
    free(buf);
    free(part);
    *n_ids = total;
    return out;
fail:
    free(buf);
    free(part);
    free(out);
    return NULL;
}

static int stream_matches(const unsigned char *s, size_t n, size_t step, int special, size_t cap, const int32_t *want, size_t nw,
                          const char *what) {
    size_t ng;
    int32_t *got = encode_stream(gpt2, s, n, step, special, cap, &ng);
    int ok = got && first_diff(got, ng, want, nw) < 0;
    if (got && !ok) {
        char w[200];
        snprintf(w, sizeof w, "%s, chunks of %zu bytes, cap %zu, allow_special %d", what, step, cap, special);
        report_diff(w, got, ng, want, nw);
    }
    free(got);
    return ok;
}

static void test_chunked_equals_whole(void) {
    static const size_t steps[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 64, 100, 257, 1000, 4096, 65536, 0};
    size_t runs = 0, bad = 0;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    const char *files[2] = {shared_path("tinyshakespeare.txt"), "test/fixtures/multilingual.txt"};
    for (int f = 0; f < 2; f++) {
        size_t n, nw;
        unsigned char *s = read_all(files[f], &n);
        if (!s) { CHECK(0, "cannot read %s", files[f]); continue; }
        for (int sp = 0; sp < 2; sp++) {
            if (f == 0 && sp == 1) continue; /* Tiny Shakespeare has no <|endoftext|> */
            int32_t *want = encode_all(gpt2, s, n, sp, &nw);
            if (!want) continue;
            for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
                bad += !stream_matches(s, n, steps[k], sp, n + 1, want, nw, files[f]);
                runs++;
            }
            /* few ids per call: stopping at the cap must not change the encoding either */
            for (size_t cap = 1; cap <= 5; cap++) {
                bad += !stream_matches(s, n, 7 * cap, sp, cap, want, nw, files[f]);
                runs++;
            }
            free(want);
        }
        free(s);
    }
    /* random texts (invalid UTF-8, partial <|endoftext|>, long runs) in random-sized chunks */
    unsigned char buf[1024];
    for (int k = 0; k < 1500; k++) {
        size_t n = random_text(buf, sizeof buf), nw;
        int sp = k & 1;
        int32_t *want = encode_all(gpt2, buf, n, sp, &nw);
        if (!want) continue;
        bad += !stream_matches(buf, n, k % 3 ? 0 : (size_t)(1 + k % 17), sp, k % 5 ? n + 1 : (size_t)(1 + k % 3), want, nw, "random text");
        runs++;
        free(want);
    }
    CHECK(bad == 0, "%zu of %zu chunked encodings differ from the whole-text encoding", bad, runs);
    printf("  %zu chunked encodings equal the whole-text ones\n", runs);
}

static void test_api_contract(void) {
    char err[512], out[64];
    int32_t ids[64];
    size_t n, len, used;
    int rc;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    const char *s = "Hello world<|endoftext|>";
    /* sizing: NULL ids, cap 0 */
    rc = ngpt_tokenizer_encode(gpt2, s, strlen(s), 0, NULL, 0, &n, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 9, "sizing call: rc %d, n %zu (want NGPT_ERR_ARG, 9)", rc, n);
    CHECK(strstr(err, "9") != NULL, "the message should say how many ids are needed: %s", err);
    rc = ngpt_tokenizer_encode(gpt2, s, strlen(s), 1, NULL, 0, &n, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 3, "sizing call with allow_special: rc %d, n %zu (want 3)", rc, n);
    /* too small a buffer: the prefix that fits is written, nothing past it */
    ids[4] = -7;
    rc = ngpt_tokenizer_encode(gpt2, s, strlen(s), 0, ids, 4, &n, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 9 && ids[0] == 15496 && ids[1] == 995 && ids[4] == -7, "cap 4: rc %d n %zu ids %d %d %d", rc,
          n, ids[0], ids[1], ids[4]);
    ids[2] = -7; /* <|endoftext|> past the cap is counted, not written */
    rc = ngpt_tokenizer_encode(gpt2, s, strlen(s), 1, ids, 2, &n, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 3 && ids[0] == 15496 && ids[1] == 995 && ids[2] == -7, "allow_special, cap 2: rc %d n %zu ids[2] %d",
          rc, n, ids[2]);
    rc = ngpt_tokenizer_encode(gpt2, s, strlen(s), 1, ids, 64, &n, err, sizeof err);
    CHECK(rc == 0 && n == 3 && ids[0] == 15496 && ids[1] == 995 && ids[2] == 50256, "allow_special: rc %d n %zu", rc, n);
    rc = ngpt_tokenizer_encode(gpt2, "", 0, 0, NULL, 0, &n, err, sizeof err);
    CHECK(rc == 0 && n == 0, "empty text: rc %d n %zu", rc, n);
    rc = ngpt_tokenizer_encode(gpt2, NULL, 5, 0, ids, 64, &n, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG, "NULL text: rc %d", rc);
    /* decode */
    int32_t some[3] = {15496, 995, 50256};
    rc = ngpt_tokenizer_decode(gpt2, some, 3, out, sizeof out, &len, err, sizeof err);
    CHECK(rc == 0 && len == 24 && memcmp(out, s, 24) == 0, "decode: rc %d len %zu", rc, len);
    rc = ngpt_tokenizer_decode(gpt2, some, 3, out, 5, &len, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && len == 24 && memcmp(out, "Hello", 5) == 0, "decode into 5 bytes: rc %d len %zu", rc, len);
    memset(out, '#', sizeof out); /* a cap inside a token: its bytes up to the cap are written, none past it */
    rc = ngpt_tokenizer_decode(gpt2, some, 3, out, 3, &len, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && len == 24 && memcmp(out, "Hel#", 4) == 0, "decode into 3 bytes: rc %d len %zu, out '%.5s'", rc, len, out);
    int32_t badids[4] = {15496, 995, 50257, 1};
    rc = ngpt_tokenizer_decode(gpt2, badids, 4, out, sizeof out, &len, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "ids[2]") && strstr(err, "50257") && strstr(err, "50256"),
          "decode of an out-of-range id: rc %d, '%s'", rc, err);
    badids[2] = -1;
    rc = ngpt_tokenizer_decode(gpt2, badids, 4, out, sizeof out, &len, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "ids[2]"), "decode of id -1: rc %d, '%s'", rc, err);
    CHECK(ngpt_tokenizer_token(gpt2, -1, &len) == NULL && len == 0, "token(-1) should be NULL");
    CHECK(ngpt_tokenizer_token(gpt2, 50257, &len) == NULL, "token(50257) should be NULL");
    /* streaming decode with token(): byte-exact concatenation */
    {
        const char *t2 = "caf\xc3\xa9 \xf0\x9f\x98\x80!";
        size_t nt, o = 0;
        char back[64];
        ngpt_tokenizer_encode(gpt2, t2, strlen(t2), 0, ids, 64, &nt, err, sizeof err);
        for (size_t i = 0; i < nt; i++) {
            const char *p = ngpt_tokenizer_token(gpt2, ids[i], &len);
            memcpy(back + o, p, len);
            o += len;
        }
        CHECK(o == strlen(t2) && memcmp(back, t2, o) == 0, "token() bytes do not add up to the text");
    }
    /* encode_chunk: a pre-token that may go on is held back; consumed 0 is fine without is_last */
    rc = ngpt_tokenizer_encode_chunk(gpt2, "Hello wor", 9, 0, 0, ids, 64, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 1 && ids[0] == 15496 && used == 5, "chunk 'Hello wor': rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "Hello", 5, 0, 0, ids, 64, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 0 && used == 0, "chunk 'Hello': rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "Hello", 5, 1, 0, ids, 64, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 1 && used == 5, "last chunk 'Hello': rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "a <|endof", 9, 0, 1, ids, 64, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 1 && used == 1, "chunk ending in a partial <|endoftext|>: rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "\xe2\x82", 2, 0, 0, ids, 64, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 0 && used == 0, "chunk ending inside a UTF-8 character: rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "Hello world", 11, 1, 0, ids, 0, &n, &used, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 1 && used == 0 && strstr(err, "needs 1"), "chunk with cap 0: rc %d n %zu '%s'", rc, n, err);
    /* two Egyptian hieroglyphs, one "other" pre-token of 8 ids (8 bytes): cap 2 is too few, and n_out says so */
    rc = ngpt_tokenizer_encode_chunk(gpt2, "\xf0\x93\x80\x80\xf0\x93\x80\x81", 8, 1, 0, ids, 2, &n, &used, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && n == 8 && used == 0, "chunk whose first pre-token needs 8 ids, cap 2: rc %d n %zu", rc, n);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "\xf0\x93\x80\x80\xf0\x93\x80\x81", 8, 1, 0, ids, n, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 8 && used == 8, "the same with the cap it asked for: rc %d n %zu used %zu", rc, n, used);
    rc = ngpt_tokenizer_encode_chunk(gpt2, "Hello world", 11, 1, 0, ids, 1, &n, &used, err, sizeof err);
    CHECK(rc == 0 && n == 1 && used == 5, "chunk with cap 1: rc %d n %zu used %zu", rc, n, used);
    CHECK(ngpt_tokenizer_vocab_size(NULL) == 0 && ngpt_tokenizer_eot(NULL) == -1, "NULL tokenizer queries");
    ngpt_tokenizer_free(NULL);
}

static void test_unicode_classes(void) {
    for (size_t r = 0; r < TOK_UNI_NRANGES; r++) {
        uint32_t lo = tok_uni_ranges[r][0], hi = tok_uni_ranges[r][1] & 0xffffffu, c = tok_uni_ranges[r][1] >> 24;
        CHECK(lo <= hi && hi <= 0x10FFFF && c >= 1 && c <= 3, "range %zu: %lX..%lX class %lu", r, (unsigned long)lo,
              (unsigned long)hi, (unsigned long)c);
        if (r) CHECK((tok_uni_ranges[r - 1][1] & 0xffffffu) < lo, "ranges %zu and %zu overlap or are unsorted", r - 1, r);
    }
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    static const struct { const char *utf8; int cls; } spot[] = {
        {"a", TOK_LETTER}, {"\xc3\xa9", TOK_LETTER}, {"\xe4\xb8\xad", TOK_LETTER}, {"\xf0\x9d\x90\x80", TOK_LETTER},
        {"\xf0\xa0\x80\x80", TOK_LETTER}, {"\xca\xb0", TOK_LETTER}, {"7", TOK_NUMBER}, {"\xd9\xa3", TOK_NUMBER},
        {"\xc2\xbd", TOK_NUMBER}, {"\xe2\x85\xab", TOK_NUMBER}, {"\xf0\x9d\x9f\x98", TOK_NUMBER}, {" ", TOK_SPACE},
        {"\t", TOK_SPACE}, {"\v", TOK_SPACE}, {"\xc2\x85", TOK_SPACE}, {"\xc2\xa0", TOK_SPACE}, {"\xe3\x80\x80", TOK_SPACE},
        {"\xe2\x80\xa8", TOK_SPACE}, {"\xe1\x9a\x80", TOK_SPACE}, {"\xef\xbb\xbf", TOK_OTHER}, {"\xe2\x80\x8b", TOK_OTHER},
        {"\x1c", TOK_OTHER}, {"\xcc\x81", TOK_OTHER}, {"\xe0\xa4\xbf", TOK_OTHER}, {"!", TOK_OTHER},
        {"\xf0\x9f\x98\x80", TOK_OTHER}, {"\xef\xbf\xbd", TOK_OTHER}, {"\xee\x80\x80", TOK_OTHER}, {"\xf3\xa0\x80\x81", TOK_OTHER},
    };
    for (size_t k = 0; k < sizeof spot / sizeof *spot; k++) {
        size_t len = 0, n = strlen(spot[k].utf8);
        int c = tok_class_at(gpt2, (const unsigned char *)spot[k].utf8, 0, n, 0, &len);
        CHECK(c == spot[k].cls && len == n, "spot check %zu: class %d length %zu, want %d and %zu", k, c, len, spot[k].cls, n);
    }
    printf("  Unicode %s tables: %d ranges\n", TOK_UNICODE_VERSION, TOK_UNI_NRANGES);
}

/* Bytes that start no well-formed UTF-8 character (Unicode's Table 3-7) are one-byte "other" characters: overlong
 * leads C0 and C1, E0 80, F0 80, surrogates ED A0, F4 90 (above U+10FFFF) and F5. */
static void test_ill_formed_utf8(void) {
    static const char *tails[] = {"\xc1", "\xc0", "\xe0\x80", "\xf0\x80", "\xed\xa0", "\xf4\x90", "\xf5"};
    char err[512], text[16];
    int32_t ids[16];
    size_t n, used, e;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    /* no byte after them can make them a character, so the "Hello" (15496) before them is settled in a chunk */
    for (size_t k = 0; k < sizeof tails / sizeof *tails; k++) {
        snprintf(text, sizeof text, "Hello%s", tails[k]);
        int rc = ngpt_tokenizer_encode_chunk(gpt2, text, strlen(text), 0, 0, ids, 16, &n, &used, err, sizeof err);
        CHECK(rc == 0 && n == 1 && ids[0] == 15496 && used == 5, "chunk 'Hello' + tail %zu: rc %d, %zu ids, %zu bytes used (want 1, 5)",
              k, rc, n, used);
    }
    /* C1 81 (an overlong 'A') is no letter: "a\xc1\x81b" is the pre-tokens a, C1 81, b */
    static const unsigned char overlong[] = "a\xc1\x81" "b";
    static const size_t ends[] = {1, 3, 4};
    for (size_t k = 0, pos = 0; k < sizeof ends / sizeof *ends; k++, pos = e) {
        int ok = tok_piece_end(gpt2, overlong, pos, sizeof overlong - 1, 0, &e);
        CHECK(ok && e == ends[k], "pre-token %zu of 'a\\xC1\\x81b' ends at %zu, want %zu", k, ok ? e : 0, ends[k]);
        if (!ok || e != ends[k]) break;
    }
}

/* t encodes Tiny Shakespeare and the multilingual fixture as encoder.json + vocab.bpe do (report_diff says where not) */
static void encodes_as_gpt2(const ngpt_tokenizer *t) {
    const char *files[2] = {shared_path("tinyshakespeare.txt"), "test/fixtures/multilingual.txt"};
    for (int f = 0; f < 2; f++) {
        size_t n, na, nb;
        unsigned char *s = read_all(files[f], &n);
        if (!s) continue;
        int32_t *a = encode_all(gpt2, s, n, 1, &na), *b = encode_all(t, s, n, 1, &nb);
        if (a && b) report_diff(files[f], b, nb, a, na);
        free(a);
        free(b);
        free(s);
    }
}

static void test_save_load_compact(void) {
    char err[512];
    ngpt_tokenizer *t2 = NULL;
    int rc;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    const char *p = tmp_path("gpt2.tok");
    CHECK(write_all(p, "old contents", 12), "cannot write %s", p);
    rc = ngpt_tokenizer_save(gpt2, p, err, sizeof err);
    CHECK(rc == 0, "save: %s", err);
    rc = ngpt_tokenizer_load(p, &t2, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    if (!t2) return;
    CHECK(t2->n_vocab == gpt2->n_vocab && t2->n_merges == gpt2->n_merges && t2->eot == gpt2->eot && t2->n_bytes == gpt2->n_bytes &&
              memcmp(t2->off, gpt2->off, ((size_t)gpt2->n_vocab + 1) * 4) == 0 && memcmp(t2->bytes, gpt2->bytes, gpt2->n_bytes) == 0 &&
              memcmp(t2->whole, gpt2->whole, (size_t)gpt2->n_vocab) == 0,
          "the loaded tokenizer's tables differ from the saved one's");
    for (int32_t r = 0; r < gpt2->n_merges; r++)
        if (memcmp(&t2->merges[r], &gpt2->merges[r], sizeof(tok_merge)) != 0) { CHECK(0, "merge %ld differs", (long)r); break; }
    encodes_as_gpt2(t2);
    ngpt_tokenizer_free(t2);
    /* no temporary file is left next to it */
    char tmpname[600];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", p, (long)getpid());
    FILE *f = fopen(tmpname, "rb");
    CHECK(!f, "the temporary file %s was left behind", tmpname);
    if (f) fclose(f);
    rc = ngpt_tokenizer_save(gpt2, tmp_path("no/such/dir/x.tok"), err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "no/such/dir"), "save into a missing folder: rc %d '%s'", rc, err);
    /* the save renames its file over the path: a folder or a pipe there is refused (as root, /dev/null became a
     * tokenizer file); a link is kept and the file it names replaced; a dangling one is refused */
    char saved[512], folder[512], fifo[512], link_path[512]; /* tmp_path's buffers are reused */
    snprintf(saved, sizeof saved, "%s", p);
    p = saved;
    snprintf(folder, sizeof folder, "%s", tmp_path("a_folder.tok"));
    snprintf(fifo, sizeof fifo, "%s", tmp_path("fifo.tok"));
    snprintf(link_path, sizeof link_path, "%s", tmp_path("link.tok"));
    mkdir(folder, 0777);
    unlink(fifo);
    unlink(link_path);
    CHECK(mkfifo(fifo, 0666) == 0 && symlink(p, link_path) == 0, "cannot make a pipe and a link in %s", tmp_dir);
    rc = ngpt_tokenizer_save(gpt2, folder, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "a_folder.tok is a folder"), "save to a folder: rc %d '%s'", rc, err);
    rc = ngpt_tokenizer_save(gpt2, fifo, err, sizeof err);
    struct stat st, before;
    CHECK(rc == NGPT_ERR_IO && strstr(err, "fifo.tok is a pipe") && !lstat(fifo, &st) && S_ISFIFO(st.st_mode), "save to a pipe: rc %d '%s'", rc,
          err);
    CHECK(!stat(p, &before) && ngpt_tokenizer_save(gpt2, link_path, err, sizeof err) == 0, "save through a link: %s", err);
    CHECK(!lstat(link_path, &st) && S_ISLNK(st.st_mode) && !stat(p, &st) && S_ISREG(st.st_mode) && st.st_ino != before.st_ino,
          "the link is kept and its file replaced");
    unlink(link_path);
    CHECK(symlink("/nonexistent/folder/x.tok", link_path) == 0, "cannot make a dangling link");
    rc = ngpt_tokenizer_save(gpt2, link_path, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "link.tok is a symbolic link to nothing that can be written"), "a dangling link: rc %d '%s'", rc, err);
    rc = ngpt_tokenizer_save(gpt2, "", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "no path"), "an empty path: rc %d '%s'", rc, err);
    unlink(link_path);
    unlink(fifo);
    rmdir(folder);
}

/* GPT-2's spelling of byte b as a character (encoder.py's bytes_to_unicode). */
static uint32_t byte_char(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    int k = b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67;
    return 0x100u + (uint32_t)k;
}

/* Appends the characters spelling bytes p[0..n) to out, as raw UTF-8 or (json_escape) \uXXXX escapes. */
static void spell(char *out, const char *p, size_t n, int json_escape) {
    char *o = out + strlen(out);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = byte_char((unsigned char)p[i]);
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c < 0x80) *o++ = (char)c;
        else if (json_escape && c >= 0x100) o += sprintf(o, "\\u%04X", (unsigned)c);
        else { *o++ = (char)(0xC0 | c >> 6); *o++ = (char)(0x80 | (c & 0x3F)); }
    }
    *o = 0;
}

/* A small valid vocabulary: the 256 bytes, merges a+b, ab+c, ' '+a, then <|endoftext|>. */
static void small_vocab(char *json, char *bpe) {
    static const char *merges[3][2] = {{"a", "b"}, {"ab", "c"}, {" ", "a"}};
    strcpy(json, "{");
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        strcat(json, b ? ", \"" : "\"");
        spell(json, &c, 1, 1);
        sprintf(json + strlen(json), "\": %d", b);
    }
    for (int m = 0; m < 3; m++) {
        char w[8];
        snprintf(w, sizeof w, "%s%s", merges[m][0], merges[m][1]);
        strcat(json, ", \"");
        spell(json, w, strlen(w), 0);
        sprintf(json + strlen(json), "\": %d", 256 + m);
    }
    strcat(json, ", \"<|endoftext|>\": 259}\n");
    strcpy(bpe, "#version: 0.2\n");
    for (int m = 0; m < 3; m++) {
        spell(bpe, merges[m][0], strlen(merges[m][0]), 0);
        strcat(bpe, " ");
        spell(bpe, merges[m][1], strlen(merges[m][1]), 0);
        strcat(bpe, "\n");
    }
}

/* Replaces the first occurrence of from in s by to (s has room). */
static int replace(char *s, const char *from, const char *to) {
    char *p = strstr(s, from), rest[8192];
    if (!p) return 0;
    snprintf(rest, sizeof rest, "%s", p + strlen(from));
    sprintf(p, "%s%s", to, rest);
    return 1;
}

/* A message without the temporary folder's name, for printing. */
static const char *strip_tmp(const char *err) {
    size_t n = strlen(tmp_dir);
    return strncmp(err, tmp_dir, n) == 0 && err[n] == '/' ? err + n + 1 : err;
}

static void expect_load_error(const char *json, const char *bpe, int want_rc, const char *want_text, const char *what) {
    char err[512] = "";
    ngpt_tokenizer *t = NULL;
    const char *jp = tmp_path("encoder.json"), *bp = tmp_path("vocab.bpe");
    write_all(jp, json, strlen(json));
    write_all(bp, bpe, strlen(bpe));
    int rc = ngpt_tokenizer_load_gpt2(jp, bp, &t, err, sizeof err);
    const char *file = strstr(err, "encoder.json") ? "encoder.json" : "vocab.bpe";
    CHECK(rc == want_rc && !t && strstr(err, want_text) && strstr(err, tmp_dir) && strstr(err, file),
          "%s: rc %d (want %d), message '%s' (want it to name the file and say '%s')", what, rc, want_rc, err, want_text);
    if (rc == want_rc && strstr(err, want_text)) printf("  %-30s -> %s\n", what, strip_tmp(err));
    ngpt_tokenizer_free(t);
}

/* llm.c's gpt2_tokenizer.bin, written here from encoder.json's tokens (llmc_tokenizer.h): loaded, its merges found again are vocab.bpe's, one by one,
 * and it encodes as encoder.json + vocab.bpe do; a cut or extended file, and another vocabulary, are refused */
static void test_llmc_tokenizer_file(void) {
    char err[512];
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    const char *p = tmp_path("gpt2_tokenizer.bin");
    for (int version = 1; version <= 2; version++) {
        CHECK(write_llmc_tokenizer(p, gpt2, version, 50257), "cannot write %s", p);
        ngpt_tokenizer *t = NULL;
        int rc = ngpt_tokenizer_load_llmc(p, &t, err, sizeof err);
        CHECK(rc == 0 && t, "version %d: %s", version, err);
        if (!t) continue;
        CHECK(t->n_vocab == 50257 && t->n_merges == 50000 && t->eot == 50256, "version %d: %d tokens, %d merges, eot %d", version, t->n_vocab,
              t->n_merges, t->eot);
        int32_t first_differing = -1;
        for (int32_t r = 0; r < gpt2->n_merges && first_differing < 0; r++)
            if (memcmp(&t->merges[r], &gpt2->merges[r], sizeof(tok_merge))) first_differing = r;
        CHECK(first_differing < 0, "merge %d found again as (%d, %d), vocab.bpe's is (%d, %d)", first_differing,
              first_differing < 0 ? 0 : t->merges[first_differing].left, first_differing < 0 ? 0 : t->merges[first_differing].right,
              first_differing < 0 ? 0 : gpt2->merges[first_differing].left, first_differing < 0 ? 0 : gpt2->merges[first_differing].right);
        CHECK(!memcmp(t->whole, gpt2->whole, (size_t)gpt2->n_vocab), "the whole-token flags differ");
        if (version == 2) encodes_as_gpt2(t);
        ngpt_tokenizer_free(t);
    }
    /* refusals: each names the file and what is wrong where */
    size_t n = 0;
    unsigned char *good = read_all(p, &n);
    static const struct { long cut; int append, version, swap; const char *says; } bad[] = {
        {100, 0, 0, 0, "shorter than its header"},
        {-5, 0, 0, 0, "token 50256 at byte offset "},
        {0, 1, 0, 0, "1 bytes after its 50257 tokens"},
        {0, 0, 3, 0, "version 3; llm.c's tokenizer files are versions 1 and 2"},
        {0, 0, 0, 1, "token 300 ("},
    };
    for (size_t i = 0; good && i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char *b = malloc(n + 1);
        memcpy(b, good, n);
        size_t len = bad[i].cut > 0 ? (size_t)bad[i].cut : bad[i].cut < 0 ? n + (size_t)bad[i].cut : n + (size_t)bad[i].append;
        if (bad[i].append) b[n] = 'x';
        if (bad[i].version) memcpy(b + 4, &bad[i].version, 4);
        if (bad[i].swap) { /* tokens 300 and 40000 trade places: 300's bytes are no merge of the tokens before it */
            size_t o300 = 1024, o40000;
            for (int id = 0; id < 300; id++) o300 += 1 + b[o300];
            o40000 = o300;
            for (int id = 300; id < 40000; id++) o40000 += 1 + b[o40000];
            size_t l300 = 1 + (size_t)b[o300], l40000 = 1 + (size_t)b[o40000], span = o40000 + l40000 - o300;
            unsigned char *moved = malloc(span);
            memcpy(moved, b + o40000, l40000);                              /* 40000's entry first */
            memcpy(moved + l40000, b + o300 + l300, o40000 - o300 - l300);  /* then 301..39999 */
            memcpy(moved + l40000 + (o40000 - o300 - l300), b + o300, l300); /* then 300's */
            memcpy(b + o300, moved, span);
            free(moved);
        }
        const char *q = tmp_path("bad_tokenizer.bin");
        CHECK(write_all(q, (const char *)b, len), "cannot write %s", q);
        ngpt_tokenizer *t = NULL;
        int rc = ngpt_tokenizer_load_llmc(q, &t, err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && !t && strstr(err, "bad_tokenizer.bin") && strstr(err, bad[i].says), "case %zu: rc %d: %s", i, rc, err);
        ngpt_tokenizer_free(t);
        free(b);
    }
    free(good);
}

static void test_bad_vocab_files(void) {
    static char json[32768], bpe[4096], j2[32768], b2[4096];
    char err[512];
    ngpt_tokenizer *t = NULL;
    small_vocab(json, bpe);
    {   /* the good one loads and merges as its merges say */
        write_all(tmp_path("encoder.json"), json, strlen(json));
        write_all(tmp_path("vocab.bpe"), bpe, strlen(bpe));
        int rc = ngpt_tokenizer_load_gpt2(tmp_path("encoder.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
        CHECK(rc == 0, "the small valid vocabulary did not load: %s", err);
        if (t) {
            int32_t ids[16];
            size_t n;
            ngpt_tokenizer_encode(t, "abc ab aab<|endoftext|>", 23, 1, ids, 16, &n, err, sizeof err);
            /* "abc" -> abc; " ab" -> ' ' ab (a+b ranks before ' '+a); " aab" -> ' 'a ab; then <|endoftext|> */
            CHECK(n == 6 && ids[0] == 257 && ids[1] == ' ' && ids[2] == 256 && ids[3] == 258 && ids[4] == 256 && ids[5] == 259,
                  "small vocabulary: %zu ids %d %d %d %d %d %d", n, ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]);
            ngpt_tokenizer_free(t);
        }
    }
#define BAD_JSON(from, to, rc, text, what) do { strcpy(j2, json); CHECK(replace(j2, from, to), "test setup: no %s", from); \
        expect_load_error(j2, bpe, rc, text, what); } while (0)
#define BAD_BPE(from, to, rc, text, what) do { strcpy(b2, bpe); CHECK(replace(b2, from, to), "test setup: no %s", from); \
        expect_load_error(json, b2, rc, text, what); } while (0)
    strcpy(j2, json);
    j2[strlen(j2) / 2] = 0;
    expect_load_error(j2, bpe, NGPT_ERR_FORMAT, "truncated", "truncated encoder.json");
    BAD_JSON("\"a\": 97", "\"\\q\": 97", NGPT_ERR_FORMAT, "bad escape \\q in a string", "bad escape");
    BAD_JSON("\"a\": 97", "\"\\u00G1\": 97", NGPT_ERR_FORMAT, "4 hex digits", "bad \\u escape");
    BAD_JSON("\"a\": 97", "\"\\uD83D\": 97", NGPT_ERR_FORMAT, "unpaired high surrogate", "lone high surrogate");
    BAD_JSON("\"a\": 97", "\"\\uD83D\\uE000\": 97", NGPT_ERR_FORMAT, "unpaired high surrogate \\uD83D", "high surrogate, then no low one");
    /* the characters just outside GPT-2's alphabet (U+0021..U+007E, U+00A1..U+00AC, U+00AE..U+0143) */
    BAD_JSON("\"a\": 97", "\"\\u0020\": 97", NGPT_ERR_FORMAT, "U+0020 is not one of the 256", "U+0020 (below U+0021)");
    BAD_JSON("\"a\": 97", "\"\\u007F\": 97", NGPT_ERR_FORMAT, "U+007F is not one of the 256", "U+007F (above U+007E)");
    BAD_JSON("\"a\": 97", "\"\\u00A0\": 97", NGPT_ERR_FORMAT, "U+00A0 is not one of the 256", "U+00A0 (below U+00A1)");
    BAD_JSON("\"a\": 97", "\"\\u00AD\": 97", NGPT_ERR_FORMAT, "U+00AD is not one of the 256", "U+00AD (the gap)");
    BAD_JSON("\"a\": 97", "\"\\u0144\": 97", NGPT_ERR_FORMAT, "U+0144 is not one of the 256", "U+0144 (above U+0143)");
    BAD_JSON("\"a\": 97", "\"\\uDE00\": 97", NGPT_ERR_FORMAT, "unpaired low surrogate", "lone low surrogate");
    BAD_JSON("\"a\": 97", "\"\\uD83D\\uDE00\": 97", NGPT_ERR_FORMAT, "U+1F600 is not one of the 256", "pair outside the alphabet");
    BAD_JSON("\"a\": 97", "\"\xe2\x82\xac\": 97", NGPT_ERR_FORMAT, "U+20AC is not one of the 256", "char outside the alphabet");
    BAD_JSON("\"a\": 97", "\"\xe2\x82\": 97", NGPT_ERR_FORMAT, "not valid UTF-8", "invalid UTF-8 key");
    BAD_JSON("\"ab\": 256", "\"ab\": 7256", NGPT_ERR_FORMAT, "id 7256 of 'ab' is out of range", "id out of range");
    BAD_JSON("\"ab\": 256", "\"ab\": -1", NGPT_ERR_FORMAT, "out of range", "negative id");
    BAD_JSON("\"ab\": 256", "\"ab\": 98", NGPT_ERR_FORMAT, "is also the id of 'b'", "duplicate id");
    BAD_JSON("\"ab\": 256", "\"a\": 256", NGPT_ERR_FORMAT, "the key 'a' appears twice", "duplicate key");
    BAD_JSON("\"ab\": 256", "\"ab\": 25.6", NGPT_ERR_FORMAT, "integers", "fractional id");
    BAD_JSON("\"ab\": 256", "\"ab\" 256", NGPT_ERR_FORMAT, "expected ':'", "missing colon");
    BAD_JSON("\"ab\": 256", "\"\": 256", NGPT_ERR_FORMAT, "empty key", "empty key");
    BAD_JSON("259}", "259}x", NGPT_ERR_FORMAT, "after the end of the JSON object", "trailing garbage");
    BAD_JSON("{", "[", NGPT_ERR_FORMAT, "expected '{'", "not an object");
    BAD_JSON("\"a\": 97", "\"a\": 97, \"a\x01\": 300", NGPT_ERR_FORMAT, "raw control byte", "raw control character");
    BAD_BPE("#version: 0.2\n", "", NGPT_ERR_FORMAT, "#version", "missing version line");
    BAD_BPE("a b\n", "a xyz\n", NGPT_ERR_FORMAT, "names 'xyz', which is not a token", "merge of an unknown token");
    BAD_BPE("a b\n", "b a\n", NGPT_ERR_FORMAT, "vocab.bpe:2: merges 'b' and 'a', but their concatenation is not a token",
            "merge result not a token");
    BAD_BPE("ab c\n", "a b\n", NGPT_ERR_FORMAT, "vocab.bpe:3: repeats the merge of 'a' and 'b' (first on line 2)", "duplicate merge");
    /* positions count lines and characters, not bytes: the '\\' is byte 7, on line 2 after '"' and two 2-byte 'Ä' */
    expect_load_error("{\n\"\xc3\x84\xc3\x84\\q\": 0}", bpe, NGPT_ERR_FORMAT, "encoder.json:2:4 (byte 7): bad escape \\q",
                      "error position after UTF-8");
    BAD_BPE("ab c\n", "ab c d\n", NGPT_ERR_FORMAT, "two tokens and one space", "three-part merge line");
    BAD_BPE("ab c\n", "\n", NGPT_ERR_FORMAT, "empty line", "empty merge line");
    BAD_BPE("a b\n", "a\xff b\n", NGPT_ERR_FORMAT, "not valid UTF-8", "invalid UTF-8 merge");
    {   /* a vocabulary without a token for byte 0x41 ('A'): give its id to a new multi-byte token */
        strcpy(j2, json);
        CHECK(replace(j2, "\"A\": 65", "\"AA\": 65"), "test setup");
        expect_load_error(j2, bpe, NGPT_ERR_FORMAT, "no token for the byte 0x41", "missing byte token");
    }
    {
        int rc = ngpt_tokenizer_load_gpt2(tmp_path("missing.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
        CHECK(rc == NGPT_ERR_IO && strstr(err, "missing.json"), "missing file: rc %d '%s'", rc, err);
    }
    {   /* the real encoder.json cut short */
        size_t n;
        unsigned char *s = read_all(shared_path("gpt2/encoder.json"), &n);
        if (s) {
            write_all(tmp_path("encoder.json"), s, n * 2 / 3);
            free(s);
            s = read_all(shared_path("gpt2/vocab.bpe"), &n);
            if (s) write_all(tmp_path("vocab.bpe"), s, n);
            free(s);
            int rc = ngpt_tokenizer_load_gpt2(tmp_path("encoder.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
            CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "truncated") && strstr(err, "encoder.json"), "GPT-2's encoder.json cut at 2/3: rc %d '%s'", rc, err);
        }
    }
    {   /* the real vocab.bpe cut after 1000 merges: it loads no more (it encoded text into other ids than GPT-2's) */
        size_t n, lines = 0, cut = 0;
        unsigned char *s = read_all(shared_path("gpt2/encoder.json"), &n);
        if (s) write_all(tmp_path("encoder.json"), s, n);
        free(s);
        s = read_all(shared_path("gpt2/vocab.bpe"), &n);
        while (s && cut < n && lines < 1001) lines += s[cut++] == '\n';
        if (s) write_all(tmp_path("vocab.bpe"), s, cut);
        free(s);
        int rc = ngpt_tokenizer_load_gpt2(tmp_path("encoder.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && !t && strstr(err, "vocab.bpe: its 1000 merges make no token ' lot' (id 1256) nor 48999 other") &&
                  strstr(err, "look cut short"),
              "GPT-2's vocab.bpe cut after 1000 merges: rc %d '%s'", rc, err);
        if (rc == NGPT_ERR_FORMAT) printf("  %-30s -> %s\n", "vocab.bpe cut short", strip_tmp(err));
        ngpt_tokenizer_free(t);
        t = NULL;
    }
#undef BAD_JSON
#undef BAD_BPE
}

/* Loads json + bpe (written to the temporary folder) and checks it encodes as small_vocab's: "abc ab aab<|endoftext|>"
 * -> abc, ' ', ab, ' 'a, ab, <|endoftext|> (ids 257 32 256 258 256 259), with '/' as token 47. */
static void loads_as_small_vocab(const char *json, const char *bpe, const char *what) {
    static const int32_t want[] = {257, ' ', 256, 258, 256, 259};
    char err[512];
    int32_t ids[16];
    size_t n = 0, len = 0;
    ngpt_tokenizer *t = NULL;
    write_all(tmp_path("encoder.json"), json, strlen(json));
    write_all(tmp_path("vocab.bpe"), bpe, strlen(bpe));
    int rc = ngpt_tokenizer_load_gpt2(tmp_path("encoder.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
    CHECK(rc == 0 && t, "%s: did not load: %s", what, err);
    if (!t) return;
    CHECK(t->n_vocab == 260 && t->n_merges == 3, "%s: %d tokens, %d merges (want 260, 3)", what, t->n_vocab, t->n_merges);
    /* each merge in its place, the last line's too, in the room laid out for them (the vocabulary's table follows) */
    static const int32_t merge_pairs[3][2] = {{'a', 'b'}, {256, 'c'}, {' ', 'a'}};
    for (int r = 0; r < 3 && t->n_merges == 3; r++)
        CHECK(t->merges[r].left == merge_pairs[r][0] && t->merges[r].right == merge_pairs[r][1], "%s: merge %d is (%d, %d), want (%d, %d)", what,
              r, t->merges[r].left, t->merges[r].right, merge_pairs[r][0], merge_pairs[r][1]);
    CHECK((const char *)t->vocab - (const char *)t->merges >= (ptrdiff_t)(t->n_merges * sizeof *t->merges),
          "%s: %d merges loaded into room for %td", what, t->n_merges, ((const char *)t->vocab - (const char *)t->merges) / (ptrdiff_t)sizeof *t->merges);
    /* every token is found again by its bytes: the tables were not overwritten */
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *p = ngpt_tokenizer_token(t, id, &len);
        if (tok_vocab_find(t, (const unsigned char *)p, len) != id) { CHECK(0, "%s: token %d is not found by its bytes", what, id); break; }
    }
    const char *slash = ngpt_tokenizer_token(t, '/', &len);
    CHECK(slash && len == 1 && *slash == '/', "%s: token 47 is not '/'", what);
    ngpt_tokenizer_encode(t, "abc ab aab<|endoftext|>", 23, 1, ids, 16, &n, err, sizeof err);
    report_diff(what, ids, n, want, sizeof want / sizeof *want);
    ngpt_tokenizer_free(t);
}

/* Copies s into out with every occurrence of from replaced by to (out has room). */
static void replace_all(char *out, const char *s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to);
    while (*s) {
        if (strncmp(s, from, nf) == 0) { memcpy(out, to, nt); out += nt; s += nf; }
        else *out++ = *s++;
    }
    *out = 0;
}

/* Spellings of the same small vocabulary that GPT-2's files may have, all loaded alike */
static void test_vocab_file_variants(void) {
    static char json[32768], bpe[4096], j2[40000], b2[4096];
    small_vocab(json, bpe);
    loads_as_small_vocab(json, bpe, "small vocabulary");
    replace_all(j2, json, ", \"", ",\r\n\"");
    loads_as_small_vocab(j2, bpe, "encoder.json with CRLF line ends");
    replace_all(j2, json, "\"/\": 47", "\"\\/\": 47");
    loads_as_small_vocab(j2, bpe, "encoder.json spelling '/' as \\/");
    replace_all(b2, bpe, "\n", "\r\n");
    loads_as_small_vocab(json, b2, "vocab.bpe with CRLF line ends");
    strcpy(b2, bpe);
    b2[strlen(b2) - 1] = 0;
    loads_as_small_vocab(json, b2, "vocab.bpe without its last newline");
}

/* A vocabulary (any may be loaded) with a token that is not its own BPE: tokens ab, abc, bc; merges b c (rank 0),
 * a b, ab c. BPE of "abc" merges b c first and leaves a bc, which no merge joins: "abc" encodes as a, bc
 * (97 258), not as the token abc (257), so the whole-token shortcut must not be taken for it. */
static void test_token_not_its_own_bpe(void) {
    static char json[32768], bpe[4096], j2[32768];
    char err[512];
    int32_t ids[8];
    size_t n = 0;
    ngpt_tokenizer *t = NULL;
    small_vocab(json, bpe);
    strcpy(j2, json);
    CHECK(replace(j2, "\"\xc4\xa0" "a\": 258", "\"bc\": 258"), "test setup: no ' a' token");
    write_all(tmp_path("encoder.json"), j2, strlen(j2));
    static const char merges[] = "#version: 0.2\nb c\na b\nab c\n";
    write_all(tmp_path("vocab.bpe"), merges, strlen(merges));
    int rc = ngpt_tokenizer_load_gpt2(tmp_path("encoder.json"), tmp_path("vocab.bpe"), &t, err, sizeof err);
    CHECK(rc == 0 && t, "did not load: %s", err);
    if (!t) return;
    CHECK(!t->whole[257], "token 257 'abc' is flagged as its own BPE");
    rc = ngpt_tokenizer_encode(t, "abc", 3, 0, ids, 8, &n, err, sizeof err);
    CHECK(rc == 0 && n == 2 && ids[0] == 'a' && ids[1] == 258, "'abc': rc %d, %zu ids %d %d (want 97 258)", rc, n, ids[0], ids[1]);
    ngpt_tokenizer_free(t);
}

static void expect_compact_error(const unsigned char *p, size_t n, const char *want_text, const char *what) {
    char err[512] = "";
    ngpt_tokenizer *t = NULL;
    const char *path = tmp_path("bad.tok");
    write_all(path, p, n);
    int rc = ngpt_tokenizer_load(path, &t, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && !t && strstr(err, want_text) && strstr(err, "bad.tok"),
          "%s: rc %d (want NGPT_ERR_FORMAT), message '%s' (want '%s')", what, rc, err, want_text);
    if (rc == NGPT_ERR_FORMAT && strstr(err, want_text)) printf("  %-30s -> %s\n", what, strip_tmp(err));
    ngpt_tokenizer_free(t);
}

static void test_bad_compact_files(void) {
    char err[512];
    size_t n;
    if (!gpt2) { CHECK(0, "no tokenizer"); return; }
    int rc = ngpt_tokenizer_save(gpt2, tmp_path("good.tok"), err, sizeof err);
    CHECK(rc == 0, "save: %s", err);
    unsigned char *good = read_all(tmp_path("good.tok"), &n), *b;
    if (!good) return;
    b = malloc(n + 16);
    {   /* a compact file of merges cut short (saved from GPT-2's with its first 1000): refused as vocab.bpe's would be */
        int32_t all = gpt2->n_merges;
        gpt2->n_merges = 1000;
        rc = ngpt_tokenizer_save(gpt2, tmp_path("cut.tok"), err, sizeof err);
        gpt2->n_merges = all;
        size_t cut_n;
        unsigned char *cut = rc ? NULL : read_all(tmp_path("cut.tok"), &cut_n);
        CHECK(cut != NULL, "save of the cut merges: %s", err);
        if (cut) expect_compact_error(cut, cut_n, "its 1000 merges make no token ' lot' (id 1256) nor 48999 other tokens", "merges cut short");
        free(cut);
    }
    expect_compact_error(good, n - 1000, "truncated", "truncated compact file");
    expect_compact_error(good, 20, "truncated", "compact file cut in the header");
    memcpy(b, good, n);
    memcpy(b + n, "junk", 4);
    expect_compact_error(b, n + 4, "trailing bytes", "trailing bytes");
    memcpy(b, good, n);
    b[0] = 'X';
    expect_compact_error(b, n, "not a nanogpt tokenizer file", "bad magic");
    memcpy(b, good, n);
    tok_put_u32(b + 8, 7);
    expect_compact_error(b, n, "version 7; this build reads version 1", "newer version");
    memcpy(b, good, n);
    b[17] ^= 1;
    expect_compact_error(b, n, "header is corrupt", "corrupt header");
    memcpy(b, good, n);
    b[n / 2] ^= 0x20;
    expect_compact_error(b, n, "CRC-32 mismatch", "corrupt payload");
    memcpy(b, good, n);
    b[TOK_FILE_HEADER] = 0; /* token 0 gets length 0 ... keep the CRCs right, so the structural check must catch it */
    tok_put_u32(b + 40, tok_crc32(0, b + TOK_FILE_HEADER, n - TOK_FILE_HEADER));
    tok_put_u32(b + 44, tok_crc32(0, b, 44));
    expect_compact_error(b, n, "token lengths add up", "inconsistent lengths");
    memcpy(b, good, n);
    b[n - 1] |= 0x80; /* a whole-token flag past the last token (V = 50257 leaves 7 spare bits) */
    tok_put_u32(b + 40, tok_crc32(0, b + TOK_FILE_HEADER, n - TOK_FILE_HEADER));
    tok_put_u32(b + 44, tok_crc32(0, b, 44));
    expect_compact_error(b, n, "bits set past token 50256", "flags past the last token");
    rc = ngpt_tokenizer_load(tmp_path("missing.tok"), &(ngpt_tokenizer *){NULL}, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "missing.tok"), "missing compact file: rc %d '%s'", rc, err);
    free(b);
    free(good);
}

int main(void) {
    if (test_folder(tmp_dir, sizeof tmp_dir, "tokenizer")) return 1;
    if (load_cases("test/fixtures/bpe_cases.bin")) printf("  (no fixture cases: run from the repository root)\n");
    RUN(test_load_gpt2);
    RUN(test_unicode_classes);
    RUN(test_fixture_cases);
    RUN(test_fixture_roundtrip);
    RUN(test_multilingual_file);
    RUN(test_tinyshakespeare);
    RUN(test_random_roundtrip);
    RUN(test_bpe_vs_slow);
    RUN(test_chunked_equals_whole);
    RUN(test_api_contract);
    RUN(test_ill_formed_utf8);
    RUN(test_save_load_compact);
    RUN(test_llmc_tokenizer_file);
    RUN(test_bad_vocab_files);
    RUN(test_vocab_file_variants);
    RUN(test_token_not_its_own_bpe);
    RUN(test_bad_compact_files);
    static const char *files[] = {"encoder.json", "vocab.bpe", "gpt2.tok", "good.tok", "bad.tok", "cut.tok", "bad_tokenizer.bin", "gpt2_tokenizer.bin"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) remove(tmp_path(files[i]));
    rmdir(tmp_dir);
    ngpt_tokenizer_free(gpt2);
    for (size_t i = 0; i < n_cases; i++) { free(cases[i].bytes); free(cases[i].ids); free(cases[i].blocks); }
    free(cases);
    free(slow);
    return check_summary();
}
