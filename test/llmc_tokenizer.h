/* llmc_tokenizer.h: llm.c's gpt2_tokenizer.bin for the tests, as llm.c's train_gpt2.py writes it (a header of
 * 256 int32: magic 20240328, version, token count, and in version 2 the id of <|endoftext|>; then each token as a
 * length byte and its bytes), from a loaded tokenizer's first `tokens` tokens. Whether it was written whole. */
#ifndef NGPT_TEST_LLMC_TOKENIZER_H
#define NGPT_TEST_LLMC_TOKENIZER_H
#include <stdio.h>
#include "../nanogpt.h"

static inline int write_llmc_tokenizer(const char *path, const ngpt_tokenizer *t, int version, int32_t tokens) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int32_t header[256] = {20240328, version, tokens, version == 2 ? tokens - 1 : 0};
    int ok = fwrite(header, sizeof header, 1, f) == 1;
    for (int32_t id = 0; ok && id < tokens; id++) {
        size_t len;
        const char *p = ngpt_tokenizer_token(t, id, &len);
        unsigned char n = (unsigned char)len;
        ok = p && len < 256 && fwrite(&n, 1, 1, f) == 1 && fwrite(p, 1, len, f) == len;
    }
    return (fclose(f) == 0) & ok;
}
#endif
