/* fuzz_safetensors.c - libFuzzer target for the pretrained-weight readers: Hugging Face safetensors
 * (safetensors_read_gpt2, with its strict JSON reader and config.json) and llm.c model files
 * (llm.c_read_model), then pretrained_crop on what loads.
 *
 * Input: the model file, optionally followed by the separator "\n@@config.json@@\n" and the text of a
 * config.json, which is then written next to the model (safetensors files do not store n_head). Both
 * readers read the model file; what they return is freed. NGPT_FUZZ_SEEDS=DIR writes seeds from
 * test/fixtures/tiny_gpt2/ and test/fixtures/tiny_gpt2_llmc_v*.bin (run from the repository root). */
#define NGPT_NO_MAIN
#include "../../nanogpt.c"

#define SEP "\n@@config.json@@\n"

#include "fuzz_common.h"

static void fz_seed_join(const char *dir, const char *name, const char *model, const char *config) {
    unsigned char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    char err[NGPT_ERRLEN], path[600];
    if (tok_read_file(model, &a, &na, err, sizeof err)) { fprintf(stderr, "seeds: %s (skipped)\n", err); return; }
    if (config && tok_read_file(config, &b, &nb, err, sizeof err)) { fprintf(stderr, "seeds: %s\n", err); config = NULL; }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(a, 1, na, f);
    if (config) { fwrite(SEP, 1, strlen(SEP), f); fwrite(b, 1, nb, f); }
    fclose(f);
    free(a);
    free(b);
}

static void make_seeds(const char *dir) {
    const char *cfg = "test/fixtures/tiny_gpt2/config.json";
    fz_seed_join(dir, "st_f32_config", "test/fixtures/tiny_gpt2/model.safetensors", cfg);
    fz_seed_join(dir, "st_bf16_config", "test/fixtures/tiny_gpt2/model_bf16.safetensors", cfg);
    fz_seed_join(dir, "st_f16_config", "test/fixtures/tiny_gpt2/model_f16.safetensors", cfg);
    fz_seed_join(dir, "st_f16_noconfig", "test/fixtures/tiny_gpt2/model_f16.safetensors", NULL);
    fz_seed_join(dir, "llmc_v3", "test/fixtures/tiny_gpt2_llmc_v3.bin", NULL);
    fz_seed_join(dir, "llmc_v5", "test/fixtures/tiny_gpt2_llmc_v5.bin", NULL);
}

FZ_INITIALIZE_SEEDS_ONLY(make_seeds)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[NGPT_ERRLEN];
    /* split off a config.json at the last separator */
    size_t model_len = size, m = strlen(SEP);
    const uint8_t *cfg = NULL;
    for (size_t i = size >= m ? size - m + 1 : 0; i-- > 0;)
        if (!memcmp(data + i, SEP, m)) { model_len = i; cfg = data + i + m; break; }
    const char *model = fz_write("model.safetensors", data, model_len);
    if (cfg) fz_write("config.json", cfg, size - (size_t)(cfg - data));
    else unlink(fz_file("config.json"));

    for (int reader = 0; reader < 2; reader++) {
        ModelShape ms;
        float *params = NULL;
        int rc = reader ? llmc_read_model(model, &ms, &params, err, sizeof err)
                        : safetensors_read_gpt2(model, &ms, &params, err, sizeof err);
        if (rc == NGPT_OK) {
            if (!params || ms.L < 1 || ms.NH < 1 || ms.C % ms.NH || ms.V < 1 || ms.Vp != pad_vocab(ms.V) || ms.maxT < 1) {
                fprintf(stderr, "fuzz_safetensors: a reader accepted an impossible shape\n");
                abort();
            }
            size_t sizes[N_PARAM_TENSORS], total = param_sizes(&ms, sizes);
            volatile float sum = 0;
            sum += params[0] + params[total - 1]; /* the whole array is there */
            pretrained_crop(&ms, params, 1 + (int)(size % (size_t)ms.maxT), err, sizeof err);
        }
        free(params);
    }
    return 0;
}
