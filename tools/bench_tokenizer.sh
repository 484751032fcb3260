#!/usr/bin/env bash
# bench_tokenizer.sh: GPT-2 encoding throughput of nanogpt's tokenizer and of the JavaScript references,
# side by side in one run, each pinned to one core.
#
#   tools/bench_tokenizer.sh [FILE]        (default: Tiny Shakespeare from the shared data folder)
#
# Needs a C compiler, node, and the reference packages outside the repository:
#   npm install --prefix /tmp/bpe-ref tiktoken@1.0.22 js-tiktoken@1.0.21   (BPE_REF=/tmp/bpe-ref by default)
# Environment: CC, CFLAGS (default -O2), NGPT_SHARED_DATA (default ../shared/data), NGPT_BENCH_SRC (the C
# file holding the tokenizer, default nanogpt.c), REPS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${NGPT_SHARED_DATA:-../shared/data}
file=${1:-$shared/tinyshakespeare.txt}
ref=${BPE_REF:-/tmp/bpe-ref}
src=$(realpath "${NGPT_BENCH_SRC:-nanogpt.c}")
reps=${REPS:-20}
pin=""
command -v taskset >/dev/null && pin="taskset -c 0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/bench.c" <<EOF
#define NGPT_NO_MAIN
#include "$src"
#include <time.h>
static double now(void) { struct timespec ts; timespec_get(&ts, TIME_UTC); return (double)ts.tv_sec + ts.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    char err[512], dir[1024];
    ngpt_tokenizer *t, *t2 = NULL;
    unsigned char *text;
    size_t len, n = 0;
    int reps = atoi(argv[3]);
    double t0, best = 1e30, best_chunk = 1e30, t_json = 1e30, t_compact = 1e30;
    char bpe[1024];
    snprintf(dir, sizeof dir, "%s/gpt2/encoder.json", argv[1]);
    snprintf(bpe, sizeof bpe, "%s/gpt2/vocab.bpe", argv[1]);
    for (int r = 0; r < 5; r++) { /* loading: best of 5, files in the page cache */
        t0 = now();
        if (ngpt_tokenizer_load_gpt2(dir, bpe, &t, err, sizeof err)) { puts(err); return 1; }
        if (now() - t0 < t_json) t_json = now() - t0;
        if (ngpt_tokenizer_save(t, "$tmp/gpt2.tok", err, sizeof err)) { puts(err); return 1; }
        ngpt_tokenizer_free(t);
        t0 = now();
        if (ngpt_tokenizer_load("$tmp/gpt2.tok", &t2, err, sizeof err)) { puts(err); return 1; }
        if (now() - t0 < t_compact) t_compact = now() - t0;
        if (r < 4) ngpt_tokenizer_free(t2);
    }
    if (tok_read_file(argv[2], &text, &len, err, sizeof err)) { puts(err); return 1; }
    int32_t *ids = malloc((len + 1) * sizeof *ids);
    for (int r = 0; r < reps; r++) {
        t0 = now();
        if (ngpt_tokenizer_encode(t2, (const char *)text, len, 0, ids, len + 1, &n, err, sizeof err)) { puts(err); return 1; }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    for (int r = 0; r < reps; r++) { /* streaming, 64 KiB reads */
        size_t pos = 0, got = 0, carry = 0, step = 1 << 16;
        char *buf = malloc(2 * step);
        t0 = now();
        while (1) {
            size_t take = len - pos < step ? len - pos : step, k, used;
            memcpy(buf + carry, text + pos, take);
            pos += take;
            carry += take;
            if (ngpt_tokenizer_encode_chunk(t2, buf, carry, pos == len, 0, ids + got, len + 1 - got, &k, &used, err, sizeof err)) { puts(err); return 1; }
            got += k;
            memmove(buf, buf + used, carry - used);
            carry -= used;
            if (pos == len) break;
        }
        double dt = now() - t0;
        if (dt < best_chunk) best_chunk = dt;
        free(buf);
        if (got != n) { printf("streaming gave %zu ids, whole %zu\n", got, n); return 1; }
    }
    printf("nanogpt (C, %s): %zu ids in %.1f ms = %.2f MB/s; streaming in 64 KiB reads %.2f MB/s (best of %d)\n", argv[4], n,
           best * 1e3, len / best / 1e6, len / best_chunk / 1e6, reps);
    printf("nanogpt load: encoder.json + vocab.bpe %.1f ms, compact file %.1f ms (best of 5)\n", t_json * 1e3, t_compact * 1e3);
    return 0;
}
EOF
cc=${CC:-cc}
cflags=${CFLAGS:--O2}
$cc -std=c11 $cflags -o "$tmp/bench" "$tmp/bench.c" -lm -lpthread
echo "file: $file ($(wc -c < "$file") bytes); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "compiler: $($cc --version | head -1); CFLAGS: $cflags; node $(node --version)"
$pin "$tmp/bench" "$shared" "$file" "$reps" "$cc $cflags"
NODE_PATH="$ref/node_modules" $pin node tools/gen_bpe_fixtures.js --bench "$file" 5
