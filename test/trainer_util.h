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

#endif
