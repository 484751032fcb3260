/* test_data.c: preparing GPT-2 BPE data and reading it back.
 *  - Tiny Shakespeare gives exactly nanoGPT's data/shakespeare numbers (301,966 train and 36,059 val
 *    tokens), the ids of a whole-text encoding, and decodes back to the text;
 *  - several documents get <|endoftext|> between them; llm.c's format has a valid header;
 *  - a dataset of several llm.c shards is read as one, every shard sampled; a shard without llm.c's
 *    header is refused (train.bin stays raw tokens);
 *  - the one-command BPE recipe's dataset check (data/shakespeare/train.cfg names the dataset);
 *  - nanoGPT's meta.pkl is read as meta.bin would be, and refused when it is not one;
 *  - four processes preparing one folder at once all succeed (character level and BPE); a temporary file of a
 *    process that is gone is removed by the next prepare;
 *  - a text changed between either prepare's two reads is refused, the folder's files kept;
 *  - both prepares put their files in place with SIGINT and SIGTERM held back. */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"
#include <sys/wait.h>

static char tmpdir[256];
static ngpt_tokenizer *tok;

/* a text of two characters at any val_fraction: train and val a character each (0.6 cut train to none) */
static void test_two_characters_split(void) {
    char input[512], out[512], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/two.txt", tmpdir);
    snprintf(out, sizeof out, "%s/two", tmpdir);
    FILE *f = fopen(input, "wb");
    if (f) {
        fputs("ab", f);
        fclose(f);
    }
    const char *inputs[1] = {input};
    for (int k = 0; k < 2; k++) {
        double vf = k ? 0.01 : 0.6;
        int rc = prepare_gpt2(inputs, 1, out, vf, 0, tok, NULL, err, sizeof err);
        TokenSet tr, va;
        int opened = rc == 0 && tokenset_open(&tr, out, "train", 50257, 0, err, sizeof err) == 0;
        int opened_val = opened && tokenset_open(&va, out, "val", 50257, 0, err, sizeof err) == 0;
        CHECK(opened && opened_val && tr.files[0].ntok == 1 && va.files[0].ntok == 1, "val_fraction %g: %s", vf, err);
        if (opened) tokenset_close(&tr);
        if (opened_val) tokenset_close(&va);
    }
}

static void test_shakespeare_like_nanogpt(void) {
    char input[512], out[512], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/tinyshakespeare.txt", shared_data_dir());
    snprintf(out, sizeof out, "%s/bpe", tmpdir);
    const char *inputs[1] = {input};
    int rc = prepare_gpt2(inputs, 1, out, 0.1, 0, tok, NULL, err, sizeof err);
    CHECK(rc == 0, "prepare: %s", err);
    TokenSet tr, va;
    CHECK(tokenset_open(&tr, out, "train", 50257, 64, err, sizeof err) == 0, "%s", err);
    CHECK(tokenset_open(&va, out, "val", 50257, 64, err, sizeof err) == 0, "%s", err);
    size_t nt = tr.files[0].ntok, nv = va.files[0].ntok;
    /* nanoGPT's data/shakespeare/prepare.py prints: train has 301,966 tokens, val has 36,059 tokens */
    CHECK(nt == 301966 && nv == 36059, "train %zu val %zu", nt, nv);
    /* the streamed encoding equals one encode() of the whole train text (the first 90% of the characters) */
    size_t len = 0;
    unsigned char *text = file_contents(input, &len);
    size_t cut = 0, chars = 0, want_chars = (size_t)(1115394 * 0.9);
    while (chars < want_chars) chars += !utf8_continuation(text[cut++]);
    while (cut < len && utf8_continuation(text[cut])) cut++;
    int32_t *ids = malloc(len * sizeof *ids);
    size_t n = 0;
    CHECK(ngpt_tokenizer_encode(tok, (const char *)text, cut, 0, ids, len, &n, err, sizeof err) == 0, "%s", err);
    int same = n == nt;
    for (size_t i = 0; same && i < n; i++) same = ids[i] == tr.files[0].tokens[i];
    CHECK(same, "streamed train ids differ from the whole-text encoding (%zu vs %zu ids)", nt, n);
    /* decode(train ++ val) == text */
    int32_t *all = malloc((nt + nv) * sizeof *all);
    for (size_t i = 0; i < nt; i++) all[i] = tr.files[0].tokens[i];
    for (size_t i = 0; i < nv; i++) all[nt + i] = va.files[0].tokens[i];
    char *back = malloc(len + 16);
    size_t blen = 0;
    CHECK(ngpt_tokenizer_decode(tok, all, nt + nv, back, len + 16, &blen, err, sizeof err) == 0, "%s", err);
    CHECK(blen == len && !memcmp(back, text, len), "decode(train ++ val) != text (%zu vs %zu bytes)", blen, len);
    /* the vocabulary is saved beside the tokens (sample decodes with it): it gives the same train ids */
    char saved[600];
    snprintf(saved, sizeof saved, "%s/gpt2.tok", out);
    ngpt_tokenizer *copy = NULL;
    size_t n2 = 0;
    CHECK(ngpt_tokenizer_load(saved, &copy, err, sizeof err) == 0 && ngpt_tokenizer_vocab_size(copy) == 50257 &&
              ngpt_tokenizer_encode(copy, (const char *)text, cut, 0, all, len, &n2, err, sizeof err) == 0,
          "%s: %s", saved, err);
    same = n2 == nt;
    for (size_t i = 0; same && i < n2; i++) same = all[i] == tr.files[0].tokens[i];
    CHECK(same, "%s encodes train into other ids (%zu vs %zu ids)", saved, n2, nt);
    ngpt_tokenizer_free(copy);
    tokenset_close(&tr);
    tokenset_close(&va);
    free(text); free(ids); free(all); free(back);
}

static void test_documents_and_llmc_format(void) {
    char a[512], b[512], out[512], err[NGPT_ERRLEN];
    snprintf(a, sizeof a, "%s/a.txt", tmpdir);
    snprintf(b, sizeof b, "%s/b.txt", tmpdir);
    snprintf(out, sizeof out, "%s/docs", tmpdir);
    FILE *f = fopen(a, "w");
    for (int i = 0; i < 200; i++) fprintf(f, "First document, line %d. ", i);
    fclose(f);
    f = fopen(b, "w");
    fprintf(f, "Second document <|endoftext|> with a literal marker, which stays text.");
    fclose(f);
    const char *inputs[2] = {a, b};
    int rc = prepare_gpt2(inputs, 2, out, 0.01, 1, tok, NULL, err, sizeof err);
    CHECK(rc == 0, "prepare: %s", err);
    char path[600];
    snprintf(path, sizeof path, "%s/train.bin", out);
    TokenFile t;
    CHECK(tokenfile_open(&t, path, 50257, 2, 0, err, sizeof err) == 0 && t.llmc, "llm.c header: %s", err);
    size_t eots = 0, at = 0;
    for (size_t i = 0; i < t.ntok; i++)
        if (t.tokens[i] == 50256) { eots++; at = i; }
    CHECK(eots == 1, "%zu <|endoftext|> ids in train, expected 1 (between the documents)", eots);
    /* what follows the separator is the second document's first word */
    char word[64];
    size_t wl = 0;
    int32_t next = t.tokens[at + 1];
    ngpt_tokenizer_decode(tok, &next, 1, word, sizeof word, &wl, err, sizeof err);
    CHECK(wl >= 6 && !strncmp(word, "Second", 6), "after the separator: '%.*s'", (int)wl, word);
    tokenfile_close(&t);
}

static void test_llmc_shards_read_as_one(void) {
    char dir[512], err[NGPT_ERRLEN];
    snprintf(dir, sizeof dir, "%s/shards", tmpdir);
    mkdir(dir, 0777);
    const char *names[4] = {"fineweb_train_000001.bin", "fineweb_train_000002.bin", "fineweb_val_000000.bin", "meta.bin.unrelated"};
    for (int k = 0; k < 3; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        FILE *f = fopen(path, "wb");
        int32_t hdr[256] = {LLMC_MAGIC, 1, 1000};
        fwrite(hdr, 4, 256, f);
        for (int i = 0; i < 1000; i++) {
            uint16_t v = (uint16_t)(k * 1000 + i % 7); /* shard k's ids tell where a window came from */
            fwrite(&v, 2, 1, f);
        }
        fclose(f);
    }
    TokenSet tr;
    int rc = tokenset_open(&tr, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == 0 && tr.n == 2 && tr.windows == 2 * (1000 - 32), "train shards: %d files, %zu windows (%s)", tr.n, tr.windows, err);
    if (rc) return;
    Rng rng = {1, 2, 0};
    int from[2] = {0, 0};
    for (int i = 0; i < 200; i++) {
        const TokenFile *file;
        const uint16_t *w = tokenset_window(&tr, (size_t)rng_below(&rng, tr.windows), &file);
        int k = w[0] / 1000;
        CHECK((k == 0 || k == 1) && file == &tr.files[k], "window %d: the file of its first token is files[%d], not shard %d", i, (int)(file - tr.files), k);
        CHECK(k == 0 || k == 1, "a window from outside the train shards");
        if (k == 0 || k == 1) from[k]++;
        CHECK(w[32] / 1000 == w[0] / 1000, "a window crossed a shard boundary");
    }
    CHECK(from[0] > 50 && from[1] > 50, "both shards sampled: %d and %d", from[0], from[1]);
    /* the windows on either side of the boundary, which random draws seldom hit: the first of shard 1 is its token 0,
     * not a window of shard 0 reading past its end */
    const size_t edges[4] = {0, tr.windows_before[1] - 1, tr.windows_before[1], tr.windows - 1};
    for (int e = 0; e < 4; e++) {
        const TokenFile *file;
        const uint16_t *w = tokenset_window(&tr, edges[e], &file);
        int k = e / 2;
        CHECK(file == &tr.files[k] && w == tr.files[k].tokens + (edges[e] - tr.windows_before[k]),
              "window %zu: files[%d] at %td, expected files[%d] at %zu", edges[e], (int)(file - tr.files), w - file->tokens, k,
              edges[e] - tr.windows_before[k]);
    }
    char says[600];
    tokenset_describe(&tr, says, sizeof says);
    CHECK(!strcmp(says, "2,000 tokens in 2 shards (fineweb_train_000001.bin .. fineweb_train_000002.bin)"), "the startup line's words: %s", says);
    tokenset_close(&tr);
    TokenSet va;
    CHECK(tokenset_open(&va, dir, "val", 50257, 32, err, sizeof err) == 0 && va.n == 1, "val shard: %s", err);
    tokenset_describe(&va, says, sizeof says);
    CHECK(!strcmp(says, "1,000 tokens (fineweb_val_000000.bin)"), "the startup line's words: %s", says);
    tokenset_close(&va);
    rc = tokenset_open(&va, dir, "test", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "no test.bin"), "no such split: %s", err);
    /* llm.c's -i habit: a shard file or a pattern as data_dir names the folder to pass instead */
    char file_dir[700], want[800];
    snprintf(file_dir, sizeof file_dir, "%s/fineweb_train_000001.bin", dir);
    snprintf(want, sizeof want, "--data_dir=%s", dir);
    rc = tokenset_open(&va, file_dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "is a file: data_dir") && strstr(err, want), "a shard as data_dir: %s", err);
    snprintf(file_dir, sizeof file_dir, "%s/fineweb_train_*.bin", dir);
    rc = tokenset_open(&va, file_dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "is a file pattern: data_dir") && strstr(err, want), "a pattern as data_dir: %s", err);
    /* a prefix that holds the split's name inside a word (festival, strain, trainer_val) */
    const char *prefixed[4] = {"festival_val_000000.bin", "strain_train_000001.bin", "trainer_val_000001.bin", "val.binx"};
    snprintf(dir, sizeof dir, "%s/prefixed", tmpdir);
    mkdir(dir, 0777);
    for (int k = 0; k < 4; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, prefixed[k]);
        FILE *f = fopen(path, "wb");
        int32_t hdr[256] = {LLMC_MAGIC, 1, 100};
        uint16_t toks[100] = {0};
        fwrite(hdr, 4, 256, f);
        fwrite(toks, 2, 100, f);
        fclose(f);
    }
    rc = tokenset_open(&va, dir, "val", 50257, 32, err, sizeof err);
    CHECK(rc == 0 && va.n == 2, "festival_val_000000.bin and trainer_val_000001.bin are val shards: %d (%s)", va.n, err);
    if (!rc) tokenset_describe(&va, says, sizeof says);
    CHECK(!rc && strstr(says, "; names festival_* and trainer_val_000001.bin, all read as one dataset)"), "two datasets' shards, said: %s", says);
    if (!rc) tokenset_close(&va);
    rc = tokenset_open(&tr, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == 0 && tr.n == 1 && strstr(tr.files[0].path, "strain_train_000001.bin"), "strain_train_000001.bin alone is a train shard: %d (%s)",
          tr.n, err);
    if (!rc) tokenset_close(&tr);
    /* more shards than a split may have: an error, not the first MAX_SHARDS read as if they were all (empty files:
     * the names are counted before any is opened) */
    snprintf(dir, sizeof dir, "%s/many", tmpdir);
    mkdir(dir, 0777);
    for (int k = 0; k <= MAX_SHARDS; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/many_train_%06d.bin", dir, k);
        FILE *f = fopen(path, "wb");
        if (f) fclose(f);
    }
    rc = tokenset_open(&tr, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "holds more than 4096 llm.c shards"), "4097 shards: rc %d: %s", rc, err);
    if (!rc) tokenset_close(&tr);
    for (int k = 0; k <= MAX_SHARDS; k++) {
        char path[600];
        snprintf(path, sizeof path, "%s/many_train_%06d.bin", dir, k);
        unlink(path);
    }
    rmdir(dir);
}

/* a file found by llm.c's shard names must carry llm.c's header: without it the 1 KiB header (or whatever
 * the file holds) would be trained on as tokens */
static void test_shard_without_header(void) {
    char dir[512], path[600], err[NGPT_ERRLEN];
    snprintf(dir, sizeof dir, "%s/badshards", tmpdir);
    mkdir(dir, 0777);
    int32_t hdr[256] = {12345, 1, 1000};
    uint16_t toks[1000] = {0};
    snprintf(path, sizeof path, "%s/tiny_train_000000.bin", dir);
    FILE *f = fopen(path, "wb");
    fwrite(hdr, 4, 256, f);
    fwrite(toks, 2, 1000, f);
    fclose(f);
    TokenSet s;
    int rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "tiny_train_000000.bin: magic 12345 at byte offset 0, expected 20240520"),
          "a shard with a wrong magic: %s", err);
    if (!rc) tokenset_close(&s);
    hdr[0] = LLMC_MAGIC;
    hdr[1] = 7;
    f = fopen(path, "wb");
    fwrite(hdr, 4, 256, f);
    fwrite(toks, 2, 1000, f);
    fclose(f);
    rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "tiny_train_000000.bin: llm.c shard version 7 at byte offset 4, expected 1"),
          "a shard with a wrong version: %s", err);
    if (!rc) tokenset_close(&s);
    /* an empty shard: what it needs */
    f = fopen(path, "wb");
    fclose(f);
    rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "is empty; it needs at least block_size + 1 = 33 tokens (1090 bytes with llm.c's header)"),
          "an empty shard: %s", err);
    if (!rc) tokenset_close(&s);
    /* train.bin stays nanoGPT's headerless uint16 tokens, whatever its first bytes */
    snprintf(path, sizeof path, "%s/train.bin", dir);
    f = fopen(path, "wb");
    hdr[0] = 12345;
    fwrite(hdr, 4, 256, f);
    fclose(f);
    rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == 0 && s.n == 1 && s.files[0].ntok == 512 && !s.files[0].llmc, "train.bin read as raw tokens: %s", err);
    char says[600] = "";
    if (!rc) tokenset_describe(&s, says, sizeof says);
    CHECK(strstr(says, "(train.bin; 1 llm.c shard *_train_*.bin beside it not read)"), "the shard beside train.bin, said: %s", says);
    if (!rc) tokenset_close(&s);
    /* ... unless it is another of llm.c's files (magic and version): named, not read as tokens out of range */
    static const struct { int32_t magic, version; const char *file, *says; } others[] = {
        {LLMC_MODEL_MAGIC, 3, "train.bin", "train.bin is no token data: it is an llm.c model file"},
        {LLMC_STATE_MAGIC, 1, "train.bin", "train.bin is no token data: it is llm.c's optimizer state"},
        {LLMC_DEBUG_MAGIC, 2, "train.bin", "train.bin is no token data: it is llm.c's debug state"},
        {LLMC_LLAMA3_MAGIC, 7, "tiny_train_000000.bin", "tiny_train_000000.bin is no token data: it is an llm.c Llama 3 shard (uint32 tokens)"}};
    int n_others = (int)(sizeof others / sizeof others[0]);
    for (int i = 0; i < n_others; i++) {
        char other[600];
        snprintf(other, sizeof other, "%s/%s", dir, others[i].file);
        f = fopen(other, "wb");
        hdr[0] = others[i].magic;
        hdr[1] = others[i].version;
        fwrite(hdr, 4, 256, f);
        fwrite(toks, 2, 1000, f);
        fclose(f);
        rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(err, others[i].says), "%s: %s", others[i].says, err);
        if (!rc) tokenset_close(&s);
        if (i + 1 < n_others && strcmp(others[i + 1].file, "train.bin")) unlink(path); /* the shard next, alone */
    }
    /* a nanogpt checkpoint (its 8-byte magic) as train.bin */
    unlink(path);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    f = fopen(path, "wb");
    fwrite(CKPT_MAGIC, 1, 8, f);
    fwrite(toks, 2, 1000, f);
    fclose(f);
    rc = tokenset_open(&s, dir, "train", 50257, 32, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "train.bin is no token data: it is a nanogpt checkpoint"), "a checkpoint as train.bin: %s", err);
    if (!rc) tokenset_close(&s);
}

/* known_file: each kind by its first bytes; in a data file (tokens possible) only the 8-byte signatures */
static void test_known_files(void) {
    static const struct { int32_t h[4]; int tokens_possible; KnownFile kind; } heads[] = {
        {{LLMC_MODEL_MAGIC, 3}, 1, KNOWN_LLMC_MODEL},
        {{LLMC_MODEL_MAGIC, 5}, 0, KNOWN_LLMC_MODEL},
        {{LLMC_MODEL_MAGIC, 4}, 1, KNOWN_NONE}, /* no model version: tokens */
        {{LLMC_MODEL_MAGIC, 4}, 0, KNOWN_LLMC_MODEL}, /* elsewhere the magic is enough (llm.c's reader then names the version) */
        {{LLMC_STATE_MAGIC, 1}, 1, KNOWN_LLMC_STATE},
        {{LLMC_STATE_MAGIC, 17}, 1, KNOWN_NONE},
        {{LLMC_STATE_MAGIC, 0}, 1, KNOWN_NONE},
        {{LLMC_DEBUG_MAGIC, 1}, 1, KNOWN_LLMC_DEBUG_STATE},
        {{LLMC_TOKENIZER_MAGIC, 2}, 1, KNOWN_LLMC_TOKENIZER},
        {{LLMC_MAGIC, 1}, 1, KNOWN_LLMC_SHARD},
        {{LLMC_LLAMA3_MAGIC, 7}, 0, KNOWN_LLMC_LLAMA3_SHARD},
        {{12345, 1}, 0, KNOWN_NONE},
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        KnownFile got = known_file((const unsigned char *)heads[i].h, sizeof heads[i].h, heads[i].tokens_possible);
        CHECK(got == heads[i].kind, "magic %d version %d (tokens possible %d): kind %d, expected %d", heads[i].h[0], heads[i].h[1],
              heads[i].tokens_possible, (int)got, (int)heads[i].kind);
    }
    int32_t four = LLMC_STATE_MAGIC; /* 4 bytes: no version to check */
    CHECK(known_file((const unsigned char *)&four, 4, 0) == KNOWN_LLMC_STATE && known_file((const unsigned char *)&four, 4, 1) == KNOWN_NONE,
          "a 4-byte magic alone counts only where tokens are not possible");
    const unsigned char checkpoint[] = "ngptckpt", zip[] = "PK\3\4rest", safetensors[] = "\x20\0\0\0\0\0\0\0{\"a\"";
    CHECK(known_file(checkpoint, 8, 1) == KNOWN_CHECKPOINT && known_file(checkpoint, 7, 0) == KNOWN_NONE, "a checkpoint's 8 bytes");
    CHECK(known_file(zip, sizeof zip - 1, 0) == KNOWN_ZIP && known_file(zip, sizeof zip - 1, 1) == KNOWN_NONE, "zip, not in a data file");
    CHECK(known_file(safetensors, sizeof safetensors - 1, 0) == KNOWN_SAFETENSORS && known_file(safetensors, sizeof safetensors - 1, 1) == KNOWN_NONE,
          "safetensors, not in a data file");
    const unsigned char text[] = "\\section{Introduction}";
    CHECK(known_file(text, sizeof text - 1, 0) == KNOWN_NONE, "text whose ninth byte is {: not safetensors");
}

/* Two trainers started together on a fresh folder both prepare it: four processes prepare one folder at
 * once (released together), at the character level and in GPT-2 BPE. Each succeeds, the files equal a
 * lone prepare's, and no temporary file is left (the temporary names were once shared, and a rename
 * failed: "cannot rename into data/shakespeare_char"). */
static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = file_contents(a, &na), *y = file_contents(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void test_concurrent_prepares(void) {
    char input[512], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/concurrent.txt", tmpdir);
    FILE *f = fopen(input, "w");
    for (int i = 0; i < 6000; i++) fprintf(f, "Line %d of a text that four processes prepare at once.\n", i);
    fclose(f);
    for (int bpe = 0; bpe < 2; bpe++) {
        char alone[512], shared[512];
        snprintf(alone, sizeof alone, "%s/alone_%d", tmpdir, bpe);
        snprintf(shared, sizeof shared, "%s/shared_%d", tmpdir, bpe);
        mkdir(shared, 0777);
        CHECK(ngpt_prepare(input, alone, bpe ? tok : NULL, 0.1, err, sizeof err) == 0, "a lone prepare: %s", err);
        int go[2];
        CHECK(pipe(go) == 0, "pipe: %s", strerror(errno));
        fflush(stdout); /* else each child would print the parent's buffered lines again */
        pid_t kids[4];
        for (int k = 0; k < 4; k++) {
            kids[k] = fork();
            if (kids[k] == 0) {
                char c;
                close(go[1]);
                if (read(go[0], &c, 1) < 0) _exit(3); /* returns when the parent closes its end: all start together */
                int rc = ngpt_prepare(input, shared, bpe ? tok : NULL, 0.1, err, sizeof err);
                if (rc) printf("    process %d: %s\n", k, err);
                fflush(stdout);
                _exit(rc ? 1 : 0);
            }
        }
        close(go[0]);
        close(go[1]);
        int failed = 0;
        for (int k = 0; k < 4; k++) {
            int st = 0;
            if (kids[k] < 0 || waitpid(kids[k], &st, 0) != kids[k] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
        }
        CHECK(failed == 0, "%s: %d of 4 prepares of one folder at once failed", bpe ? "GPT-2 BPE" : "characters", failed);
        const char *names[3] = {"train.bin", "val.bin", bpe ? "gpt2.tok" : "meta.bin"}; /* the vocabulary of either */
        for (int i = 0; i < 3; i++) {
            char a[600], b[600];
            snprintf(a, sizeof a, "%s/%s", alone, names[i]);
            snprintf(b, sizeof b, "%s/%s", shared, names[i]);
            CHECK(same_file(a, b), "%s differs from a lone prepare's", b);
        }
        int left = temporaries_in(shared);
        CHECK(left == 0, "%d temporary files left in %s", left, shared);
    }
    /* a prepare killed midway left its temporary file: the next prepare removes it, not a live process's */
    char dead[600], dead_vocab[600], live[600], dir[512];
    snprintf(dir, sizeof dir, "%s/shared_0", tmpdir);
    snprintf(dead, sizeof dead, "%s/train.bin.tmp.%d", dir, INT_MAX); /* above any pid_max */
    snprintf(dead_vocab, sizeof dead_vocab, "%s/gpt2.tok.tmp.%d.tmp.%d", dir, INT_MAX, INT_MAX); /* the vocabulary copy's own temporary */
    snprintf(live, sizeof live, "%s/val.bin.tmp.%d", dir, (int)getppid()); /* this test's parent: alive, and not the prepare's own */
    fclose(fopen(dead, "w"));
    fclose(fopen(dead_vocab, "w"));
    fclose(fopen(live, "w"));
    CHECK(ngpt_prepare(input, dir, NULL, 0.1, err, sizeof err) == 0, "prepare beside temporary files: %s", err);
    CHECK(access(dead, F_OK) != 0 && access(dead_vocab, F_OK) != 0, "%s or %s (no such process) was not removed", dead, dead_vocab);
    CHECK(access(live, F_OK) == 0, "%s (a live process's) was removed", live);
    unlink(live);
    /* an out_dir longer than data_dir holds: refused, before anything is made (cut short, its files' paths once
     * named the folder above it, whose train.bin was replaced) */
    char long_dir[700];
    int len = snprintf(long_dir, sizeof long_dir, "%s/shared_0/", tmpdir);
    while (len < 300) long_dir[len++] = 'd';
    long_dir[len] = 0;
    size_t train_before = 0, train_after = 0;
    snprintf(dead, sizeof dead, "%s/train.bin", dir);
    free(file_contents(dead, &train_before));
    for (int bpe = 0; bpe < 2; bpe++) {
        int rc = ngpt_prepare(input, long_dir, bpe ? tok : NULL, 0.1, err, sizeof err);
        CHECK(rc == NGPT_ERR_ARG && strstr(err, "is 300 bytes long; a data folder's path holds at most 255"), "a long out_dir (bpe %d): %s", bpe, err);
    }
    free(file_contents(dead, &train_after));
    /* a vocabulary past uint16's ids: refused, not each id cut to its low 16 bits */
    ngpt_tokenizer wide = *tok;
    wide.n_vocab = 70000;
    CHECK(prepare_gpt2((const char *const[]){input}, 1, dir, 0.1, 0, &wide, NULL, err, sizeof err) == NGPT_ERR_ARG &&
              strstr(err, "the vocabulary has 70000 tokens; token files hold uint16 ids"), "a vocabulary of 70000 tokens: %s", err);
    CHECK(access(long_dir, F_OK) != 0 && train_before > 0 && train_after == train_before, "nothing made, the folder above untouched");
}

/* a text changed between prepare's two reads (appended to while being prepared): a new character, more characters,
 * fewer, or the same characters written over it; each refused, by the character and the GPT-2 prepare, naming the
 * text (and, for characters, what changed), the folder's earlier files as they were and no temporary file left
 * (before 2026-12-02 a new character went into the tokens as id 0; before 2026-12-03 a GPT-2 prepare read a changed
 * text, and a character prepare one of the same length). The GPT-2 prepare's second read, which encodes block by
 * block, is also changed under after its first block: the check at the text's end sees that */
static int change_kind;
static void change_between_reads(const char *input) {
    FILE *f = fopen(input, change_kind == 0 ? "r+" : change_kind == 1 ? "a" : "w");
    /* a euro sign over "aba"; "ab" appended; the text "ab" alone; "ba" 1000 times over "ab" 1000 times */
    for (int i = 0; f && i < (change_kind == 3 ? 1000 : 1); i++) fputs(change_kind == 0 ? "\xe2\x82\xac" : change_kind == 3 ? "ba" : "ab", f);
    if (f) fclose(f);
}
static void test_text_changed_between_reads(void) {
    char text[512], dir[512], path[600], err[NGPT_ERRLEN];
    snprintf(text, sizeof text, "%s/changing.txt", tmpdir);
    static const char *const expect[4] = {"in the second, character 1 (from 1) is U+20AC, which the first did not see",
                                          "in the second, more than 2000 characters", "in the second, only 2 characters",
                                          "in the second, as many and none new, but the file had been written to (its size or modification time changed)"};
    for (int bpe = 0; bpe < 3; bpe++) /* 0 characters, 1 GPT-2, 2 GPT-2 changed during its second read */
        for (change_kind = 0; change_kind < 4; change_kind++) {
            snprintf(dir, sizeof dir, "%s/changing_%s", tmpdir, bpe ? "bpe" : "char");
            FILE *f = fopen(text, "w");
            for (int i = 0; f && i < 1000; i++) fputs("ab", f);
            if (f) fclose(f);
            /* written long ago: a write now changes its modification time, however coarse the file system's clock */
            const struct timespec long_ago[2] = {{978307200, 0}, {978307200, 0}};
            CHECK(utimensat(AT_FDCWD, text, long_ago, 0) == 0, "utimensat %s: %s", text, strerror(errno));
            CHECK(ngpt_prepare(text, dir, bpe ? tok : NULL, 0.1, err, sizeof err) == 0, "the text as it is: %s", err);
            size_t n_train = 0, n_val = 0, n = 0;
            snprintf(path, sizeof path, "%s/train.bin", dir);
            unsigned char *train = file_contents(path, &n_train);
            snprintf(path, sizeof path, "%s/val.bin", dir);
            unsigned char *val = file_contents(path, &n_val);
            if (bpe == 2) prepare_during_second_read = change_between_reads;
            else prepare_between_reads = change_between_reads;
            err[0] = 0;
            int rc = ngpt_prepare(text, dir, bpe ? tok : NULL, 0.1, err, sizeof err);
            prepare_between_reads = prepare_during_second_read = NULL;
            CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "changing.txt changed while it was being prepared") &&
                      (bpe ? strstr(err, "its identity, size or modification time is not what prepare's first read found. Nothing in ") != NULL
                           : strstr(err, "its first read found 2000 characters, 2 distinct") && strstr(err, expect[change_kind])),
                  "%s change %d: rc %d: %s", bpe == 2 ? "GPT-2 (during its second read)" : bpe ? "GPT-2" : "character", change_kind, rc, err);
            snprintf(path, sizeof path, "%s/train.bin", dir);
            unsigned char *after = file_contents(path, &n);
            CHECK(train && after && n == n_train && !memcmp(after, train, n), "change %d: train.bin is the earlier one", change_kind);
            free(after);
            snprintf(path, sizeof path, "%s/val.bin", dir);
            after = file_contents(path, &n);
            CHECK(val && after && n == n_val && !memcmp(after, val, n), "change %d: val.bin is the earlier one", change_kind);
            free(after);
            free(train);
            free(val);
            CHECK(temporaries_in(dir) == 0, "change %d: temporary files left in %s", change_kind, dir);
        }
}

/* A GPT-2 prepare that fails at train.bin's last tokens (the file size limit here; a full disk as well) replaces
 * neither file of an earlier prepare, and leaves no temporary file: once val.bin was renamed into place before
 * train.bin's last write, which left the new val.bin beside the old train.bin */
static void test_failed_prepare_keeps_the_pair(void) {
    char old_text[512], new_text[512], ref[512], dir[512], path[600], err[NGPT_ERRLEN];
    snprintf(old_text, sizeof old_text, "%s/old.txt", tmpdir);
    snprintf(new_text, sizeof new_text, "%s/new.txt", tmpdir);
    snprintf(ref, sizeof ref, "%s/pair_ref", tmpdir);
    snprintf(dir, sizeof dir, "%s/pair", tmpdir);
    FILE *f = fopen(old_text, "w");
    for (int i = 0; f && i < 3000; i++) fprintf(f, "An old line, %d.\n", i);
    if (f) fclose(f);
    f = fopen(new_text, "w");
    for (int i = 0; f && i < 9000; i++) fprintf(f, "A line of another text, number %d of them.\n", i);
    if (f) fclose(f);
    CHECK(ngpt_prepare(new_text, ref, tok, 0.1, err, sizeof err) == 0, "the new text alone: %s", err);
    CHECK(ngpt_prepare(old_text, dir, tok, 0.1, err, sizeof err) == 0, "the old text: %s", err);
    size_t new_train = 0, old_train = 0, old_val = 0, n = 0;
    snprintf(path, sizeof path, "%s/train.bin", ref);
    free(file_contents(path, &new_train));
    snprintf(path, sizeof path, "%s/train.bin", dir);
    unsigned char *train = file_contents(path, &old_train);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    unsigned char *val = file_contents(path, &old_val);
    /* the limit a byte under the new train.bin, which its buffered writes (16 KiB each) reach only at the end */
    CHECK(new_train > 16384 && new_train % 16384 && train && val, "the new train.bin: %zu bytes", new_train);
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)new_train - 1, (rlim_t)new_train - 1};
        setrlimit(RLIMIT_FSIZE, &rl);
        int rc = ngpt_prepare(new_text, dir, tok, 0.1, err, sizeof err);
        _exit(rc == NGPT_ERR_IO && strstr(err, "/train.bin failed: File too large; the folder's files are as they were") ? 0 : 1);
    }
    int status = 0;
    waitpid(kid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the prepare under the limit fails writing train.bin (status %d)", status);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    unsigned char *after = file_contents(path, &n);
    CHECK(after && n == old_train && !memcmp(after, train, n), "train.bin is the old one: %zu bytes, was %zu", n, old_train);
    free(after);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    after = file_contents(path, &n);
    CHECK(after && n == old_val && !memcmp(after, val, n), "val.bin is the old one: %zu bytes, was %zu", n, old_val);
    free(after);
    /* a limit above the tokens but under the vocabulary (0.9 MB) saved beside them: the pair and the old
     * vocabulary stay */
    char vocab[600];
    snprintf(vocab, sizeof vocab, "%s/gpt2.tok", dir);
    size_t vocab_n = 0;
    unsigned char *vocab_before = file_contents(vocab, &vocab_n);
    CHECK(vocab_before && vocab_n > 600000, "%s: %zu bytes", vocab, vocab_n);
    fflush(stdout);
    kid = fork();
    if (kid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {500000, 500000};
        setrlimit(RLIMIT_FSIZE, &rl);
        int rc = ngpt_prepare(new_text, dir, tok, 0.1, err, sizeof err);
        _exit(rc == NGPT_ERR_IO && strstr(err, "gpt2.tok.tmp.") && strstr(err, "write failed: File too large") ? 0 : 1);
    }
    waitpid(kid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the prepare under the limit fails writing gpt2.tok (status %d)", status);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    after = file_contents(path, &n);
    CHECK(after && n == old_train && !memcmp(after, train, n), "train.bin is the old one: %zu bytes, was %zu", n, old_train);
    free(after);
    after = file_contents(vocab, &n);
    CHECK(after && n == vocab_n && !memcmp(after, vocab_before, n), "gpt2.tok is the old one: %zu bytes, was %zu", n, vocab_n);
    free(after);
    free(vocab_before);
    free(train);
    free(val);
    int left = temporaries_in(dir);
    CHECK(left == 0, "%d temporary files left in %s", left, dir);
    /* tokens that cannot be put in place (train.bin a folder): the vocabulary saved for them goes too, and an
     * earlier prepare's stays as it was */
    snprintf(dir, sizeof dir, "%s/commit_fails", tmpdir);
    snprintf(path, sizeof path, "%s/train.bin", dir);
    snprintf(vocab, sizeof vocab, "%s/train.bin/x", dir);
    CHECK(mkdir(dir, 0777) == 0 && mkdir(path, 0777) == 0 && mkdir(vocab, 0777) == 0, "make %s", vocab);
    snprintf(vocab, sizeof vocab, "%s/gpt2.tok", dir);
    int rc = ngpt_prepare(new_text, dir, tok, 0.1, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "cannot rename") && !file_exists(vocab), "rc %d, %s left: %s", rc, vocab, err);
    f = fopen(vocab, "w");
    CHECK(f && fputs("an earlier vocabulary", f) >= 0, "write %s", vocab);
    if (f) fclose(f);
    rc = ngpt_prepare(new_text, dir, tok, 0.1, err, sizeof err);
    char kept[64] = "";
    f = fopen(vocab, "r");
    if (f && !fgets(kept, sizeof kept, f)) kept[0] = 0;
    if (f) fclose(f);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "cannot rename") && !strcmp(kept, "an earlier vocabulary"), "rc %d, %s holds '%s': %s", rc, vocab, kept, err);
    CHECK(temporaries_in(dir) == 0, "%d temporary files left in %s", temporaries_in(dir), dir);
    /* a gpt2.tok that no file can replace (a folder): said before the text is read, nothing written */
    snprintf(dir, sizeof dir, "%s/vocab_folder", tmpdir);
    snprintf(vocab, sizeof vocab, "%s/gpt2.tok", dir);
    CHECK(mkdir(dir, 0777) == 0 && mkdir(vocab, 0777) == 0, "make %s", vocab);
    rc = ngpt_prepare("/no/such/input.txt", dir, tok, 0.1, err, sizeof err);
    snprintf(path, sizeof path, "%s/val.bin", dir);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "gpt2.tok is a folder, not a regular file: nothing was written; remove it, or prepare into another folder") &&
              !file_exists(path),
          "rc %d: %s", rc, err);
}

/* A stop (SIGINT, SIGTERM) while a prepare puts its files in place waits until they all are: held back in the thread,
 * taken at the release, which says the files are in (the CLI's handler tells which) */
static volatile sig_atomic_t stops_taken;
static void take_stop(int sig) {
    (void)sig;
    stops_taken++;
}
static void test_commit_holds_stops(void) {
    struct sigaction act, was;
    memset(&act, 0, sizeof act);
    act.sa_handler = take_stop;
    sigemptyset(&act.sa_mask);
    sigaction(SIGTERM, &act, &was);
    copy_str(prepare_dir, sizeof prepare_dir, tmpdir); /* as the command line's prepare (prepare_signals): prepare_committed is said */
    sigset_t unheld;
    hold_stops(&unheld);
    pthread_kill(pthread_self(), SIGTERM);
    CHECK(stops_taken == 0, "a stop during the renames is held back: %d taken", (int)stops_taken);
    prepare_commit_release(&unheld, 1);
    CHECK(stops_taken == 1 && atomic_load(&prepare_committed) == 1, "taken at the release (%d), the files said to be in", (int)stops_taken);
    prepare_dir[0] = 0;
    sigaction(SIGTERM, &was, NULL);
}

/* Both prepares put their files in place under that hold: a SIGTERM sent as they start is taken after the last rename,
 * once; and a gpt2.tok that is a link has its vocabulary written through a temporary beside the link's target, which
 * is the one a stop of the CLI's prepare removes (prepare_temporaries) */
static volatile sig_atomic_t stops_at_commit = -1;
static int vocab_temporary_there = -1;
static void stop_at_commit(void) {
    vocab_temporary_there = access(prepare_temporaries[PREPARED_VOCAB], F_OK) == 0;
    pthread_kill(pthread_self(), SIGTERM); /* taken before this returns, unless held back */
    stops_at_commit = stops_taken;
}
static void test_prepares_hold_stops(void) {
    char input[512], dir[512], target_dir[512], target[600], link[600], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/tinyshakespeare.txt", shared_data_dir());
    /* the library's prepare (no handler) writes none of the handler's names, nor says the files are in */
    snprintf(dir, sizeof dir, "%s/held_library", tmpdir);
    atomic_store(&prepare_committed, 0);
    CHECK(prepare_gpt2((const char *const[]){input}, 1, dir, 0.1, 0, tok, NULL, err, sizeof err) == 0 && !prepare_temporaries[PREPARED_VOCAB][0] &&
              atomic_load(&prepare_committed) == 0,
          "a library prepare writes no global state: %s", err);
    snprintf(target_dir, sizeof target_dir, "%s/held_vocab", tmpdir);
    snprintf(target, sizeof target, "%s/vocab.tok", target_dir);
    mkdir(target_dir, 0777);
    fclose(fopen(target, "w"));
    prepare_committing = stop_at_commit;
    struct sigaction act, was;
    memset(&act, 0, sizeof act);
    act.sa_handler = take_stop;
    sigemptyset(&act.sa_mask);
    sigaction(SIGTERM, &act, &was);
    for (int bpe = 0; bpe < 2; bpe++) {
        snprintf(dir, sizeof dir, "%s/held_%d", tmpdir, bpe);
        mkdir(dir, 0777);
        copy_str(prepare_dir, sizeof prepare_dir, dir); /* as the command line's prepare (prepare_signals), with this test's handler */
        snprintf(link, sizeof link, "%s/gpt2.tok", dir);
        if (bpe) CHECK(symlink(target, link) == 0, "link %s: %s", link, strerror(errno));
        stops_taken = 0;
        stops_at_commit = -1;
        int rc = bpe ? prepare_gpt2((const char *const[]){input}, 1, dir, 0.1, 0, tok, NULL, err, sizeof err) : prepare_char(input, dir, 0.1, NULL, err, sizeof err);
        CHECK(rc == 0, "%s prepare: %s", bpe ? "GPT-2" : "character", err);
        CHECK(stops_at_commit == 0 && stops_taken == 1, "%s prepare: a stop at its renames is taken after them (taken then: %d, after: %d)",
              bpe ? "GPT-2" : "character", (int)stops_at_commit, (int)stops_taken);
        char path[700];
        snprintf(path, sizeof path, "%s/train.bin", dir);
        CHECK(file_exists(path), "%s is in place", path);
    }
    struct stat st;
    char expect[700];
    temporary_name(expect, sizeof expect, target);
    CHECK(vocab_temporary_there == 1 && !strcmp(prepare_temporaries[PREPARED_VOCAB], expect) && !stat(target, &st) && st.st_size > 1000,
          "the vocabulary went through %s beside the link's target (named %s, there: %d), into the target", expect,
          prepare_temporaries[PREPARED_VOCAB], vocab_temporary_there);
    prepare_dir[0] = 0;
    prepare_committing = NULL;
    sigaction(SIGTERM, &was, NULL);
}

/* the names remove_dead_prepare_temporaries takes for a prepare's temporary files, with the process in them */
static void test_prepare_temporary_names(void) {
    char name[64];
    temporary_name(name, sizeof name, "val.bin");
    CHECK(prepare_temporary_pid(name) == (long)getpid(), "%s is this process's", name);
    const struct { const char *name; long pid; } cases[] = {
        {"train.bin.tmp.123", 123}, {"gpt2.tok.tmp.77.tmp.77", 77}, {"meta.bin.tmp.2147483647", 2147483647}, {"train.bin", 0},
        {"train.bin.tmp.", 0},      {"train.bin.tmp.12x", 0},       {"train.bin.tmp.99999999999", 0},      {"notes.txt.tmp.5", 0},
        {"train.binx.tmp.5", 0},    {"val.bin.tmp.5.tmp.", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(prepare_temporary_pid(cases[i].name) == cases[i].pid, "%s: process %ld, not %ld", cases[i].name, prepare_temporary_pid(cases[i].name),
              cases[i].pid);
}

static void test_bpe_recipe_names_its_dataset(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    CHECK(ngpt_config_load(&c, "data/shakespeare/train.cfg", err, sizeof err) == 0, "%s", err);
    CHECK(!strcmp(c.dataset, "shakespeare") && c.vocab_size == 0, "the recipe trains on data/shakespeare with GPT-2's vocabulary");
}

/* nanoGPT's meta.pkl, as its prepare.py pickles it (test/fixtures/meta_pkl, tools/make_meta_pkl_fixtures.py):
 * protocols 1 to 5 give meta.bin's vocabulary of the same text; wider vocabularies (two-byte ids, a memo past
 * 256) read; protocol 0, ids out of code point order, every truncation and every flipped byte are errors (or,
 * for a flip, a vocabulary that still checks), never a crash; a dataset folder with meta.pkl and no meta.bin
 * trains on its characters */
static void test_nanogpt_meta_pkl(void) {
    char input[512], dir[512], path[600], err[NGPT_ERRLEN];
    snprintf(input, sizeof input, "%s/tinyshakespeare.txt", shared_data_dir());
    snprintf(dir, sizeof dir, "%s/chars", tmpdir);
    CHECK(prepare_char(input, dir, 0.1, NULL, err, sizeof err) == 0, "prepare: %s", err);
    CharVocab *want = malloc(sizeof *want), *got = malloc(sizeof *got);
    snprintf(path, sizeof path, "%s/meta.bin", dir);
    CHECK(charvocab_load(want, path, err, sizeof err) == 0 && want->n == 65, "meta.bin: %s", err);
    const char *protocols[4] = {"shakespeare_p1", "shakespeare_p2", "shakespeare_p4", "shakespeare_p5"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "test/fixtures/meta_pkl/%s.pkl", protocols[i]);
        int rc = charvocab_load_pickle(got, path, err, sizeof err);
        CHECK(rc == 0 && got->n == want->n && !memcmp(got->cp, want->cp, (size_t)want->n * sizeof *want->cp), "%s: rc %d, %d characters: %s",
              protocols[i], rc, rc ? 0 : got->n, err);
    }
    int rc = charvocab_load_pickle(got, "test/fixtures/meta_pkl/wide_p4.pkl", err, sizeof err);
    int wide_ok = rc == 0 && got->n == 400;
    for (int i = 0; wide_ok && i < 400; i++) wide_ok = got->cp[i] == (uint32_t)(i < 95 ? 0x20 + i : 0xA1 + (i - 95));
    CHECK(wide_ok, "400 characters from U+0020: rc %d: %s", rc, err);
    rc = charvocab_load_pickle(got, "test/fixtures/meta_pkl/text_p0.pkl", err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "text_p0.pkl: byte 2: pickle opcode 0x70, which a pickled dict of ints and strings (nanoGPT's meta.pkl) does not hold"), "protocol 0: %s", err);
    rc = charvocab_load_pickle(got, "test/fixtures/meta_pkl/unsorted_p4.pkl", err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "itos[1] (U+0079) does not follow itos[0] (U+007A) in code point order"), "unsorted: %s", err);
    /* every prefix, and every byte flipped to each of a few values */
    size_t n = 0;
    unsigned char *good = file_contents("test/fixtures/meta_pkl/shakespeare_p4.pkl", &n);
    snprintf(path, sizeof path, "%s/mutated.pkl", tmpdir);
    int prefixes_refused = 0, flips_checked = 0;
    for (size_t len = 0; good && len < n; len++) {
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(good, 1, len, f); fclose(f); }
        prefixes_refused += charvocab_load_pickle(got, path, err, sizeof err) == NGPT_ERR_FORMAT;
    }
    CHECK(good && prefixes_refused == (int)n, "%d of the %zu prefixes refused", prefixes_refused, n);
    static const unsigned char flips[4] = {0x00, 0xFF, 0x80, 'u'};
    for (size_t at = 0; good && at < n; at++)
        for (int k = 0; k < 4; k++) {
            unsigned char keep = good[at];
            good[at] = flips[k];
            FILE *f = fopen(path, "wb");
            if (f) { fwrite(good, 1, n, f); fclose(f); }
            good[at] = keep;
            err[0] = 0;
            rc = charvocab_load_pickle(got, path, err, sizeof err);
            int ordered = 1;
            for (int i = 1; !rc && i < got->n; i++) ordered &= got->cp[i] > got->cp[i - 1];
            flips_checked += (rc == NGPT_ERR_FORMAT && err[0]) || (rc == 0 && got->n >= 1 && got->n <= 65536 && ordered);
        }
    CHECK(flips_checked == (int)n * 4, "%d of %zu flipped files refused or read as a valid vocabulary", flips_checked, n * 4);
    free(good);
    /* a nanoGPT dataset folder: train.bin and val.bin with meta.pkl, no meta.bin */
    snprintf(path, sizeof path, "%s/meta.bin", dir);
    unlink(path);
    snprintf(path, sizeof path, "cp test/fixtures/meta_pkl/shakespeare_p4.pkl %s/meta.pkl", dir);
    CHECK(system(path) == 0, "%s", path);
    ngpt_config c;
    ngpt_config_defaults(&c);
    copy_str(c.device, sizeof c.device, "cpu");
    copy_str(c.data_dir, sizeof c.data_dir, dir);
    c.n_layer = 1; c.n_head = 2; c.n_embd = 16; c.block_size = 16; c.batch_size = 2; c.gradient_accumulation_steps = 1; c.threads = 1;
    ngpt_trainer *tr = NULL;
    rc = ngpt_trainer_create(&c, NULL, &tr, err, sizeof err);
    CHECK(rc == 0 && tr->ms.V == 65 && tr->charvocab && !memcmp(tr->charvocab->cp, want->cp, 65 * sizeof *want->cp) &&
              !strcmp(tr->charvocab->file_name, "meta.pkl"),
          "a trainer on meta.pkl's 65 characters: rc %d, V %d: %s", rc, tr ? tr->ms.V : 0, err);
    ngpt_trainer_free(tr);
    free(want);
    free(got);
}

int main(void) {
    if (test_folder(tmpdir, sizeof tmpdir, "data")) return 1;
    char dir[512], err[NGPT_ERRLEN];
    snprintf(dir, sizeof dir, "%s/gpt2", shared_data_dir());
    if (load_gpt2_tokenizer(dir, &tok, err, sizeof err)) {
        printf("FAIL setup: %s\n", err);
        return 1;
    }
    RUN(test_shakespeare_like_nanogpt);
    RUN(test_two_characters_split);
    RUN(test_documents_and_llmc_format);
    RUN(test_llmc_shards_read_as_one);
    RUN(test_shard_without_header);
    RUN(test_known_files);
    RUN(test_bpe_recipe_names_its_dataset);
    RUN(test_nanogpt_meta_pkl);
    RUN(test_concurrent_prepares);
    RUN(test_failed_prepare_keeps_the_pair);
    RUN(test_commit_holds_stops);
    RUN(test_prepares_hold_stops);
    RUN(test_prepare_temporary_names);
    RUN(test_text_changed_between_reads);
    ngpt_tokenizer_free(tok);
    remove_folder(tmpdir);
    return check_summary();
}
