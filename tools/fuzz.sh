#!/usr/bin/env bash
# tools/fuzz.sh - build and run nanogpt's libFuzzer targets (tools/fuzz/fuzz_*.c) under ASan + UBSan.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]   fuzz each target for SECONDS (default 60), one at a time, and
#                                         print a table: executions, exec/s, coverage, crashes
#   tools/fuzz.sh --regress [TARGET...]   replay every file of test/fixtures/fuzz/<target>/ once (the
#                                         crashes found so far, kept as regression tests)
#   tools/fuzz.sh --build [TARGET...]     only build the targets
#
# Targets: fuzz_config fuzz_bpe fuzz_tokenizer_file fuzz_data_header fuzz_checkpoint fuzz_safetensors.
# Needs clang with libFuzzer (Debian/Ubuntu: clang and libclang-rt-NN-dev). Without it the script says so
# loudly and exits 0 ("skip"), so CI on a machine without it is not broken.
# Writes only under build/fuzz/: the binaries, corpus/<target>/ (generated seeds plus what the fuzzer
# finds), crashes/<target>-* (libFuzzer's artifacts), logs/<target>.log. Temp files of the targets live in
# a private folder under /dev/shm (or /tmp), removed at the end.
# Environment: CLANG (default clang), NGPT_SHARED_DATA (folder with gpt2/encoder.json + vocab.bpe, default
# ../shared/data), FUZZ_NICE (default 10), FUZZ_FLAGS (extra libFuzzer flags).
# Exit status: 0 when no target crashed (or skipped), 1 when one did, 2 on a usage or build error.
set -uo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS="fuzz_config fuzz_bpe fuzz_tokenizer_file fuzz_data_header fuzz_checkpoint fuzz_safetensors"
CLANG=${CLANG:-clang}
NICE=${FUZZ_NICE:-10}
OUT=build/fuzz
CFLAGS_FUZZ="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11"

mode=fuzz
secs=60
case "${1:-}" in
    --regress) mode=regress; shift ;;
    --build) mode=build; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    ''|*[!0-9]*) ;;
    *) secs=$1; shift ;;
esac
targets=${*:-$ALL_TARGETS}
if [ "$mode" = regress ] && [ $# -eq 0 ]; then  # only the targets that have kept inputs need building
    targets=$(for t in $ALL_TARGETS; do [ -d "test/fixtures/fuzz/$t" ] && echo "$t"; done | tr '\n' ' ')
    [ -n "$targets" ] || { echo "fuzz regress: no inputs kept in test/fixtures/fuzz/"; exit 0; }
fi
for t in $targets; do
    [ -f "tools/fuzz/$t.c" ] || { echo "fuzz.sh: unknown target '$t' (targets: $ALL_TARGETS)" >&2; exit 2; }
done

# fuzz_bpe needs the real GPT-2 vocabulary; without it the target is skipped (loudly), not failed
VOCAB_DIR=${NGPT_SHARED_DATA:-../shared/data}/gpt2
have_vocab() { [ -f "$VOCAB_DIR/encoder.json" ] && [ -f "$VOCAB_DIR/vocab.bpe" ]; }
needs_vocab_skip() {
    if [ "$1" = fuzz_bpe ] && ! have_vocab; then
        echo "!! SKIP fuzz_bpe: no GPT-2 vocabulary in $VOCAB_DIR (set NGPT_SHARED_DATA to the folder holding gpt2/)"
        return 0
    fi
    return 1
}

# per-target input limits: big enough for the seeds (the GPT-2 .tok is about 1 MB)
max_len() {
    case $1 in
        fuzz_config) echo 4096 ;;
        fuzz_bpe) echo 16384 ;;
        fuzz_tokenizer_file) echo 1200000 ;;
        fuzz_data_header) echo 8192 ;;
        fuzz_checkpoint) echo 65536 ;;
        fuzz_safetensors) echo 131072 ;;
    esac
}

skip() {
    echo "################################################################################"
    echo "## fuzz.sh: SKIP -- $1"
    echo "## No fuzzing was done. Install clang and its libFuzzer runtime"
    echo "## (Debian/Ubuntu: apt-get install clang libclang-rt-dev, or libclang-rt-NN-dev)."
    echo "################################################################################"
    exit 0
}

# ---- is libFuzzer there? ----
command -v "$CLANG" >/dev/null 2>&1 || skip "$CLANG not found"
mkdir -p "$OUT"
probe="$OUT/.probe"
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe.c" -o "$probe" > "$probe.log" 2>&1; then
    skip "$("$CLANG" --version | head -1) cannot link -fsanitize=fuzzer,address,undefined: $(grep -m1 -iE 'error|cannot' "$probe.log")"
fi
rm -f "$probe" "$probe.c" "$probe.log"

# ---- build ----
for t in $targets; do
    if [ "$OUT/$t" -nt "tools/fuzz/$t.c" ] && [ "$OUT/$t" -nt nanogpt.c ] && [ "$OUT/$t" -nt nanogpt.h ]; then continue; fi
    echo "building $OUT/$t with $("$CLANG" --version | head -1): $CLANG $CFLAGS_FUZZ"
    nice -n "$NICE" "$CLANG" $CFLAGS_FUZZ -o "$OUT/$t" "tools/fuzz/$t.c" -lm -lpthread 2> "$OUT/$t.build.log" || {
        cat "$OUT/$t.build.log" >&2
        echo "fuzz.sh: building $t failed" >&2
        exit 2
    }
done
[ "$mode" = build ] && { echo "built: $targets (in $OUT/)"; exit 0; }

export NGPT_FUZZ_TMP="${NGPT_FUZZ_TMP:-$( [ -w /dev/shm ] && echo /dev/shm || echo /tmp )/ngpt-fuzz-$$}"
mkdir -p "$NGPT_FUZZ_TMP"
trap 'rm -rf "$NGPT_FUZZ_TMP"' EXIT

# ---- regression: replay the kept crash inputs ----
if [ "$mode" = regress ]; then
    failed=0 ran=0
    for t in $targets; do
        dir=test/fixtures/fuzz/$t
        [ -d "$dir" ] || continue
        needs_vocab_skip "$t" && continue
        files=$(find "$dir" -type f ! -name '*.md' | sort)
        [ -n "$files" ] || continue
        n=$(echo "$files" | wc -l)
        if nice -n "$NICE" "$OUT/$t" -rss_limit_mb=2048 -timeout=10 $files > "$OUT/$t.regress.log" 2>&1; then
            echo "ok   $t: $n input(s) from $dir"
        else
            echo "FAIL $t: an input from $dir still fails (log: $OUT/$t.regress.log):"
            grep -m3 -E 'ERROR|SUMMARY|Running:|fuzz_' "$OUT/$t.regress.log" | sed 's/^/    /'
            failed=$((failed + 1))
        fi
        ran=$((ran + 1))
    done
    echo "fuzz regress: $ran target(s) replayed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

# ---- fuzz ----
mkdir -p "$OUT/corpus" "$OUT/crashes" "$OUT/logs"
rows=""
any_crash=0
for t in $targets; do
    if needs_vocab_skip "$t"; then rows="$rows$(printf '%-22s %12s %8s %8s %8s' "$t" skip - - -)\n"; continue; fi
    corpus=$OUT/corpus/$t
    mkdir -p "$corpus"
    if [ -z "$(ls -A "$corpus" 2>/dev/null)" ]; then  # first run: generated seeds, hand-written ones, kept crashes
        NGPT_FUZZ_SEEDS="$corpus" nice -n "$NICE" "$OUT/$t" -runs=0 > "$OUT/logs/$t.seeds.log" 2>&1 ||
            { echo "fuzz.sh: making the seeds of $t failed:" >&2; cat "$OUT/logs/$t.seeds.log" >&2; exit 2; }
        for d in tools/fuzz/seeds/$t test/fixtures/fuzz/$t; do [ -d "$d" ] && cp "$d"/* "$corpus"/ 2>/dev/null; done
    fi
    before=$(ls "$OUT/crashes" | grep -c "^$t-" || true)
    echo "fuzzing $t for ${secs}s ($(ls "$corpus" | wc -l) corpus files, -max_len=$(max_len "$t"))"
    log=$OUT/logs/$t.log
    nice -n "$NICE" "$OUT/$t" -max_total_time="$secs" -rss_limit_mb=2048 -max_len="$(max_len "$t")" -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$OUT/crashes/$t-" ${FUZZ_FLAGS:-} "$corpus" > "$log" 2>&1
    status=$?
    after=$(ls "$OUT/crashes" | grep -c "^$t-" || true)
    crashes=$((after - before))
    [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1
    [ "$crashes" -gt 0 ] && any_crash=1
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
    rows="$rows$(printf '%-22s %12s %8s %8s %8s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$crashes")\n"
    if [ "$crashes" -gt 0 ]; then
        echo "  CRASH in $t (exit $status): $(grep -m1 -E 'ERROR: |runtime error|fuzz_[a-z_]*: ' "$log")"
        echo "  its run: libFuzzer's $(grep -m1 -oE 'Seed: [0-9]+' "$log" || echo 'seed unknown') (the artifact below reproduces the crash; the seed does only with the corpus as it was before the run, which the run added to)"
        ls -t "$OUT/crashes" | grep "^$t-" | head -"$crashes" | sed "s|^|  artifact: $OUT/crashes/|"
    fi
done
echo
printf '%-22s %12s %8s %8s %8s\n' target executions exec/s cov crashes
printf "$rows"
if [ "$any_crash" -ne 0 ]; then
    echo "fuzz.sh: crashes found; minimise one with: $OUT/<target> -minimize_crash=1 -runs=10000 <artifact>," \
         "then keep it in test/fixtures/fuzz/<target>/"
    exit 1
fi
exit 0
