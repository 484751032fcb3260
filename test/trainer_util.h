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

/* the logits (B*T rows of Vp) of a forward pass over B sequences of tokens in the eval layout (one pass must hold
 * them: one_pass_holds_logits) */
static void full_forward_logits(ngpt_trainer *tr, const int32_t *tokens, int B, float *out) {
    size_t n = (size_t)B * tr->plan.req.T;
    memcpy(tr->h_tokens, tokens, n * sizeof *tokens);
    memset(tr->h_targets, 0, n * sizeof *tokens);
    use_scratch(tr, &tr->plan.eval);
    run_micro_batch(tr, &tr->plan.eval, B, 0, 0, 0);
    download_logits(tr, &tr->plan.eval, B, out);
}

/* KV-cache decoding against the full forward pass: S sequences of tokens (S rows of the block, block_size each) fed
 * a chunk of positions at a time (one position, as in generation; the whole block, as a prompt; and 3, 1, 6 and 2
 * positions in turn, a chunk after cached ones) must give, at each chunk's last position, the logits of the full
 * pass over the same prefix within rel_tol of the largest logit. `what` names the trainer in the report. */
static void check_decode_matches_full(ngpt_trainer *tr, int S, const int32_t *tokens, double rel_tol, const char *what) {
    const int block = tr->plan.req.T, V = tr->ms.V, Vp = tr->ms.Vp;
    float *full = malloc((size_t)S * block * Vp * sizeof *full), *step = malloc((size_t)S * Vp * sizeof *step);
    int32_t *chunk = malloc((size_t)S * block * sizeof *chunk);
    CHECK(full && step && chunk, "out of host memory");
    CHECK(one_pass_holds_logits(tr, &tr->plan.eval, S, tr->plan.eval_chunk), "one pass holds all logits");
    SampleFit f;
    CHECK(sample_layout(tr, S, block, &f) <= tr->plan.region_bytes, "the layout for a whole block of %d sequences fits", S);
    if (!full || !step || !chunk) goto done;
    full_forward_logits(tr, tokens, S, full);
    double most = 0;
    for (size_t r = 0; r < (size_t)S * block; r++)
        for (int j = 0; j < V; j++) most = fmax(most, fabs((double)full[r * Vp + j]));
    tr->be->set_scratch(tr->be, tr->region + f.off[S_SCRATCH], tr->plan.region_bytes - f.off[S_SCRATCH]);
    const int cycles[][4] = {{1, 1, 1, 1}, {block, block, block, block}, {3, 1, 6, 2}};
    const char *const names[] = {"one position", "the whole block", "3, 1, 6, 2 positions"};
    DecodeGraph graph = {NULL, 0, 0}; /* a backend that records graphs runs each step of one position as one */
    const long long graph_steps = tr->graph_steps;
    for (int c = 0; c < 3; c++) {
        double worst = 0;
        int chunks = 0;
        for (int t = 0; t < block; chunks++) {
            int n = MIN(cycles[c][chunks % 4], block - t);
            for (int i = 0; i < n; i++)
                for (int s = 0; s < S; s++) chunk[s * n + i] = tokens[s * block + t + i];
            decode_step(tr, &f, S, t, n, chunk, &graph);
            t += n;
            download_as_f32(tr, step, tr->region + f.off[S_LOGITS], (size_t)S * Vp);
            for (int s = 0; s < S; s++)
                for (int j = 0; j < V; j++) worst = fmax(worst, fabs((double)step[s * Vp + j] - full[((size_t)s * block + t - 1) * Vp + j]));
        }
        printf("  %s: decoding %s at a time (%d chunk%s) vs the full forward: max abs logit diff %.3g (logits up to %.3g), %d positions x %d "
               "sequences\n", what, names[c], chunks, chunks == 1 ? "" : "s", worst, most, block, S);
        CHECK(most > 1 && worst < rel_tol * most, "%s: KV-cache logits, %s at a time, differ from the full forward by %.3g (logits up to %.3g)", what,
              names[c], worst, most);
        if (c == 0 && tr->be->graph_begin)
            CHECK(tr->graph_steps - graph_steps == block, "%s: %lld of the %d steps of one position ran as the recorded graph", what,
                  tr->graph_steps - graph_steps, block);
    }
    if (graph.graph) tr->be->graph_free(tr->be, graph.graph);
done:
    free(full);
    free(step);
    free(chunk);
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
