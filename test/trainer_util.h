/* trainer_util.h: test helpers that reach into a trainer (include after ../nanogpt.c). */
#ifndef NGPT_TEST_TRAINER_UTIL_H
#define NGPT_TEST_TRAINER_UTIL_H

/* Parameters (or gradients) to host floats, in the packed order of param_sizes (no alignment gaps). */
static void copy_params_out(ngpt_trainer *tr, float *dst, char *base) {
    size_t k = 0;
    for (int i = 0; i < N_PARAM_TENSORS; i++) {
        download_as_f32(tr, dst + k, pt(tr, base, i, 0), tr->plan.param_len[i]);
        k += tr->plan.param_len[i];
    }
}

/* One micro-batch from the host set in use, waited for: the sum of its B*T token losses. */
static double run_micro_batch(ngpt_trainer *tr, const BatchLayout *lay, int B, int training, int micro, float dscale) {
    enqueue_micro_batch(tr, lay, B, training, micro, dscale, NULL);
    double sum = 0;
    host_set_drain(tr, tr->h_set, &sum);
    return sum;
}

/* whether one forward pass in layout lay over B sequences leaves all their logits in place: a micro-batch
 * holds them and every lane's one chunk holds its rows */
static int one_pass_holds_logits(const ngpt_trainer *tr, const BatchLayout *lay, int B, int chunk) {
    return lay->B >= B && chunk >= MIN(B, lay->lane_B) * tr->plan.req.T;
}

/* the logits (B*T rows of Vp) that such a pass left, gathered from the lanes */
static void download_logits(ngpt_trainer *tr, const BatchLayout *lay, int B, float *out) {
    size_t T = (size_t)tr->plan.req.T, Vp = (size_t)tr->ms.Vp;
    for (int g = 0; g < lay->lanes; g++) {
        int first = MIN(B, g * lay->lane_B), n = MIN(lay->lane_B, B - first);
        if (n > 0) download_as_f32(tr, out + (size_t)first * T * Vp, lane_slot(tr, lay, g, B_LOGITS, 0), (size_t)n * T * Vp);
    }
}

/* dir/train.bin and dir/val.bin (made with dir) of n random ids below V, nanoGPT's raw uint16 format */
static void write_random_dataset(const char *dir, int V, int n, uint64_t seed) {
    mkdir(dir, 0777);
    const char *names[2] = {"train.bin", "val.bin"};
    for (int k = 0; k < 2; k++) {
        char path[600];
        snprintf(path, sizeof path, "%.500s/%s", dir, names[k]);
        FILE *f = fopen(path, "wb");
        for (int i = 0; i < n; i++) {
            uint16_t t = (uint16_t)(ngpt_hash(seed, (uint64_t)k, (uint64_t)i) % (uint32_t)V);
            fwrite(&t, 2, 1, f);
        }
        fclose(f);
    }
}

#endif
