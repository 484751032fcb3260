#!/usr/bin/env bash
# test/gpu.sh - every GPU check of nanogpt in one call, for a machine with an NVIDIA GPU (CI has none).
#
#   bash test/gpu.sh                 all steps, in order
#   bash test/gpu.sh ops sanitize    only some steps (build always runs first)
#   NGPT_GPU_ARCH=sm_90a bash test/gpu.sh build   only the build; no GPU needed (CI's CUDA compile check)
#   bash test/gpu.sh selftest        no GPU: the readers of nanogpt's output on a CPU build's, and the GPU steps dry,
#                                    on stand-ins for the GPU binaries and tools (build.sh test)
#
# Steps: build (nvcc for this GPU + the C test program; on Hopper the TMA matmul, the wgmma attention and the ping-pong
# build each checked alone first: where one fails, again with its newest features off one at a time (features_off),
# and every later step runs with the first setting that passes, else on mma.sync), ops (every CUDA op against the CPU backend, for each
# dtype the GPU supports, with determinism and no-allocation checks), sanitize (compute-sanitizer memcheck,
# racecheck and synccheck on the small op tests), train (test/test_gpu_train.c: whole step vs CPU,
# determinism, no allocation while training, resume, 300-step curve), capped (GPT-2 124M on real tokens,
# 50 steps under --max_memory=2.68GiB, 50 without, 50 under it pinned to the cheaper trades (--recompute=2), then
# bench at 6 GiB (the planner against the largest micro-batch), at 3 GiB (against micro-batch 4 with GELU and
# LayerNorm), at 3.5 GiB (against 8 with whole layers) and at 2.2 GiB (fp32 against bf16 AdamW moments),
# and bench's op-by-op step under the cap: needs
# data/gpt2/{encoder.json,vocab.bpe} carried),
# bench (nanogpt bench and tools/bench_torch_gpt2.py: end to end, every matmul shape (and the two with GELU fused), attention,
# LayerNorm, GELU, the loss (and with each row read twice, NGPT_LOSS_SMEM=0), memory; the step with GELU as ops of
# their own (NGPT_FUSE_GELU=0); on sm_90 on, the step with plain launches, not programmatic ones (NGPT_PDL=0);
# where the TMA matmul runs, the step of GPT-2 with biases both ways: the bias gradients from the weight gradients' tiles, and
# summed apart from them (NGPT_DBIAS=separate), and the default step with the weight gradients of fewer tiles than SMs
# split by split-K's rule, not stream-K's pieces (NGPT_STREAMK=0);
# sampling speed with 1 and 10 samples (and with each new token's kernels launched one by one, not replayed as a
# recorded graph: NGPT_GRAPHS=0), a 1024-token prompt's with each, and decoding's products (1 and 10 rows by each
# weight) against torch.matmul; nanoGPT's shakespeare_char model (dropout 0.2) against the peer of the same model,
# and nanogpt's without dropout; each nanogpt bench's host share of a step;
# on Hopper mma.sync, the staged epilogue and the newer variant knobs against the default, the
# attention without its warpgroups' turns and a block an item (not persistent), and the TMA kernel's ping-pong build,
# per kernel and end to end, included).
# Not in the default run: recipe (nanoGPT's shakespeare_char GPU recipe, 71 s on an H200: bash test/gpu.sh
# recipe) and profile (ncu on the default matmul, the attention kernels, the LayerNorm backward and split-K's
# reduction, into bench.log, with each one's SASS and its stall samples per instruction).
#
# Logs go to $OUT (the device tool's folder) or ./gpu-logs: build.log, ops.log, sanitize.log, train.log,
# capped.log, bench.log, recipe.log, summary.txt.
# The device tool brings back at most 8 files, and these are 8: a new step shares a log or replaces one.
# On the device tool: run with carry ["data/shakespeare_char/input.txt", "data/gpt2", "gpu-prebuilt"] (all
# git-ignored; gpu-prebuilt as made by GPU_SH_SAVE=1 below, optional). The table
# "check | result | numbers" is printed last, and under it, where bench or capped ran, each prediction of
# test/gpu_predictions.tsv against this call's numbers (HELD, BELOW, ABOVE; not a check: a miss fails nothing;
# a * where a time or rate was predicted for another GPU than this one, whose verdict says little).
# Exit status 1 when any check failed (SKIP is not a failure).
# The default run does not fit one 10-minute device call. On an H200 (2026-12-04, prebuilt binaries): ops,
# train (without the 300-step curve), capped and bench in one call, 374 s (ops 235 s for its 13 sweeps, under
# the GPU_SH_OPS_S of then, 300 s; capped 44 s with its 6 GiB and 2.2 GiB bench pairs, two pairs more since; bench 77 s);
# the 300-step curve adds about 3 minutes (its CPU side). profile 36 s (six kernels; ten since); sanitize:
# memcheck and synccheck 15-16 s each, racecheck bf16 121 s (every kernel and variant), f16 26 s (its default
# kernels alone), f32 86 s (2026-11-26). Added since (fortieth session, not yet timed): the ping-pong build
# alone first (about 13 s a call) and its two op sweeps (about 35 s: the ops cap is now 330 s), one more bench
# --kernels pass for it and one for the loss (about 15 s each), three more bench steps (about 10 s each); forty-fourth
# session, the 20-step bench with plain launches (about 15 s); forty-fifth to forty-seventh, two 20-step benches with
# biases (bias gradients fused and separate), one with split-K's rule (NGPT_STREAMK=0), and a --kernels pass with the
# latter (about 60 s); the forty-seventh left six settled passes to GPU_SH_SETTLED=1 (about 70 s less); the fiftieth
# and fifty-first, sampling with NGPT_GEMV=simt and a prompt's two runs (four processes, about 25 s); the sixty-first,
# sampling with NGPT_GRAPHS=0 (two processes, about 10 s); the sixty-second, the shakespeare_char pair and nanogpt's run
# without dropout (three processes; the peer's torch.compile most of it, about 60 s by reckoning).
# So it takes two calls; with 15 minutes of device time in all (the start included), for example:
#   GPU_SH_CURVE=0 GPU_SH_BUDGET=540 GPU_SH_OPS_S=220 bash test/gpu.sh ops train capped bench   (timeout 580)
#   then at once: GPU_SH_BUDGET=200 bash test/gpu.sh profile sanitize
# (f32 racecheck starts only with its whole cap left, else SKIP; the curve: bash test/gpu.sh train)
# Give it the GPU to itself: the no-allocation checks also read free device memory, which is device-wide,
# and the benchmarks' timings are the GPU's.
# GPU_SH_BUDGET (seconds, default 560) makes later steps SKIP rather than run past it; GPU_SH_OPS_S
# (default 330), GPU_SH_SANITIZE_S (200, per sanitizer run) and GPU_SH_RACECHECK_F32_S (150) cap those
# steps; GPU_SH_CURVE=0 leaves out the 300-step curve (its CPU side takes minutes); GPU_SH_SETTLED=1 runs bench's
# comparisons that earlier runs settled too (older kernels and knobs: about 70 s).
# Steps run in this order: ops, train, capped, recipe, bench, profile, sanitize (the slowest per check, last).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
LOG=${OUT:-$ROOT/gpu-logs}
mkdir -p "$LOG"
NVCC=${NVCC:-nvcc}
CC=${CC:-cc}
BUDGET=${GPU_SH_BUDGET:-560}
CFLAGS_C="-O3 -march=native -std=c11 -Wall -Wextra -fno-trapping-math -fno-math-errno" # as build.sh
# binaries built to be carried elsewhere (GPU_SH_SAVE, below) target any x86-64 with AVX2 and FMA
[ -n "${GPU_SH_SAVE:-}" ] && CFLAGS_C=${CFLAGS_C/-march=native/-march=x86-64-v3}
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/ngpt-gpu.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT
export CUDA_MODULE_LOADING=EAGER # kernels load at start, so lazy loading is not mistaken for allocation
# Tiny Shakespeare for the trainer checks: $NGPT_SHARED_DATA, ../shared/data, or a copy carried to the
# device machine as data/shakespeare_char/input.txt (an ignored path: run with carry)
if [ ! -f "${NGPT_SHARED_DATA:-../shared/data}/tinyshakespeare.txt" ] && [ -f data/shakespeare_char/input.txt ]; then
    mkdir -p "$BUILD/shared"
    ln -sf "$ROOT/data/shakespeare_char/input.txt" "$BUILD/shared/tinyshakespeare.txt"
    export NGPT_SHARED_DATA="$BUILD/shared"
fi
START=$(date +%s)
STEPS=${*:-"ops sanitize train capped bench"}

ROWS=()
FAILED=0
FAULTS='illegal (memory access|address|instruction)|launch failure|misaligned address|unspecified launch|cudaError' # in a log: a kernel fault
MEASURED="" # set by the bench and capped steps: their numbers are scored against test/gpu_predictions.tsv
PINGPONG_OK=1 # the TMA kernel's ping-pong build passed alone (below), or was not tried
row() { # check result numbers (each also appended to summary.txt at once: a call cut off keeps the rows so far)
    ROWS+=("$(printf '%-34s | %-5s | %s' "$1" "$2" "$3")")
    printf '%s\n' "${ROWS[-1]}" >>"$LOG/summary.txt"
    [ "$2" = FAIL ] && FAILED=1
    echo ">> $1: $2 ($3)"
}
elapsed() { echo $(($(date +%s) - START)); }
want() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
cap_time() { # seconds -> the smaller of that and what is left of the budget (at least 1)
    local left=$((BUDGET - $(elapsed)))
    [ "$left" -lt 1 ] && left=1
    [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
time_left() { # check_name seconds_needed [step, when not the check's name]: true when the budget allows it
    if [ $(($(elapsed) + $2)) -gt "$BUDGET" ]; then
        row "$1" SKIP "not started: $(elapsed) s used of the ${BUDGET} s budget (run: bash test/gpu.sh ${3:-$1} ...)"
        return 1
    fi
}

# ---- readers of nanogpt's output. `bash test/gpu.sh selftest` (no GPU; CI runs it) feeds them what the CPU
# build prints, so a change of nanogpt's output format cannot go unnoticed until a GPU run ---------------------
log_steps() { # OUT_DIR -> "step loss tokens_per_second", one line per training step in OUT_DIR/log.jsonl
    sed -n 's/^{"step": \([0-9]*\), "loss": \([0-9.]*\), .*"tokens_per_second": \([0-9.]*\)[,}].*$/\1 \2 \3/p' "$1/log.jsonl" 2>/dev/null
}
compare_runs() { # OUT_DIR_A OUT_DIR_B -> "steps mean|dloss| max|dloss| tokens/s-A tokens/s-B" over the steps both
    # logged (tokens/s: the median from step 5 on), or "none"
    join <(log_steps "$1" | sort -k1,1) <(log_steps "$2" | sort -k1,1) | awk '{d = $2 - $4; if (d < 0) d = -d; s += d; if (d > m) m = d; n++;
        if ($1 >= 5) {ta[++k] = $3; tb[k] = $5}}
        END {if (!n) {print "none"; exit}
             for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) {if (ta[j] < ta[i]) {x = ta[i]; ta[i] = ta[j]; ta[j] = x}
                                                                 if (tb[j] < tb[i]) {x = tb[i]; tb[i] = tb[j]; tb[j] = x}}
             printf "%d %.6f %.6f %.0f %.0f", n, s / n, m, k ? ta[int((k + 1) / 2)] : 0, k ? tb[int((k + 1) / 2)] : 0}'
}
plan_of() { grep -m1 'plan: micro-batch' "$1" | sed 's/.*plan: //' | cut -c1-80; }          # FILE: train's plan line
arena_of() { sed -n 's/.*memory: arena \([0-9.]* [KMG]iB\).*/\1/p' "$1" | head -n 1; }     # FILE: "2.36 GiB"
gib_of() { awk -v a="$1" 'BEGIN{split(a, p, " "); printf "%.4f", p[1] * (p[2] == "GiB" ? 1 : p[2] == "MiB" ? 1 / 1024 : 1 / 1048576)}'; }
over() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN{if (a > 0 && b > 0) printf f, a / b}'; } # A B FORMAT: A / B, nothing unless both are > 0
best_val_of() { sed -n 's/.*best val loss \([0-9.]*\).*/\1/p' "$1" | tail -n 1; }       # FILE: train's done line
bench_value() { # FILE "== HEADER" KEY: KEY=value of the bench_result line in that section
    awk -v h="$2" -v k="$3" '/^== /{on = ($0 == h)} on && /^bench_result /{for (i = 2; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2)}' "$1" | head -n 1
}
ktimes() { # FILE SECTION-REGEX -> "name<TAB>ms" for each "kernel NAME ... ms" line of that section
    awk -v s="$2" '/^== /{on = ($0 ~ s)} on && /^kernel /{for (i = 2; i < NF; i++) if ($(i+1) == "ms") break;
        n = $2; for (j = 3; j < i; j++) n = n " " $j; print n "\t" $i}' "$1"
}
bench_plan_of() { # FILE "== HEADER": "micro-batch B x accumulation A, recompute R[, AdamW moments bf16]" of bench's first line there
    section "$1" "$2" | sed -n 's/^bench: .*; \(micro-batch [0-9]* x accumulation [0-9]*\) ([0-9]* tokens per step), \(recompute [^,]*\), logits chunk [0-9]* rows\(, AdamW moments bf16\)\{0,1\};.*/\1, \2\3/p' | head -n 1
}
chunk_rows_of() { sed -n 's/^classifier chunk rows \([0-9]*\).*/\1/p' "$1" | head -n 1; } # FILE: bench --kernels' chunk
test_results() { # SOURCE.c LOG -> "name PASS" or "name FAIL" for each RUN(name) of SOURCE, from LOG's "ok name" lines
    local t
    for t in $(sed -n 's/^ *RUN(\(test_[a-z0-9_]*\));.*/\1/p' "$1"); do
        if grep -q "^ok $t\$" "$2"; then echo "$t PASS"; else echo "$t FAIL"; fi
    done
}
variant_vs_default() { # KERNEL "WITHOUT" "WITH" NONE DEFAULT...: "Rx (NONE's ms WITHOUT, the median of the default passes'
    # ms WITH, their range)"; every pass of bench --kernels but mma.sync's runs the default attention and
    # loss, so their spread is this run's noise
    local none med
    none=$(awk -F'\t' -v n="$1" '$1 == n {print $2}' "$4")
    med=$(cat "${@:5}" 2>/dev/null | awk -F'\t' -v n="$1" '$1 == n {print $2}' | sort -g |
        awk '{a[NR] = $1} END {if (NR) printf "%.6f %.3f %.3f %d", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, a[1], a[NR], NR}')
    [ -n "$none" ] && [ -n "$med" ] || { echo "none"; return; }
    local without=$2 with=$3
    set -- $med "$none"
    awk -v m="$1" -v lo="$2" -v hi="$3" -v k="$4" -v o="$5" -v a="$without" -v b="$with" \
        'BEGIN{printf "%.2fx (%.3f ms %s, %.3f %s: the median of %d passes, %.3f-%.3f)", o / m, o, a, m, b, k, lo, hi}'
}
section() { awk -v h="$2" '/^== /{on = ($0 == h); next} on' "$1"; } # FILE "== HEADER": the lines under that header
sources_stamp() { echo "$1 $(cat nanogpt.c nanogpt.cu nanogpt.h test/test_gpu_ops.c test/test_gpu_train.c test/*.h | sha256sum | cut -c1-16)"; } # ARCH
# A line of test/gpu_predictions.tsv predicts a term, or the ratio of two joined by " / "; a term is sum:REGEX[@VARIANT]
# (bench --kernels rows, in the default pass or pass VARIANT), tok:HEADER (a bench's tokens/s), op:NAME (the profiled step)
# host:HEADER (that bench's host_share: its steps' time outside waits for the device, over their time),
# or sample:N[@simt|@nographs] (bench --sample=N's tokens/s, N one of SAMPLE_COUNTS; @simt: with NGPT_GEMV=simt, @nographs:
# with NGPT_GRAPHS=0), or prompt:N
# (bench --sample=N --prompt=PROMPT_LEN's prompt tokens/s: a prompt of PROMPT_LEN fed to N samples at once)
SAMPLE_COUNTS="1 10" PROMPT_LEN=1024
# the PyTorch peer's arguments for data/shakespeare_char/train.cfg's model (bench's char-model pair)
CHAR_MODEL_PEER="--n_layer 6 --n_head 6 --n_embd 384 --block_size 256 --batch_size 64 --grad_accum 1 --vocab_size 65 --dropout 0.2"
prediction_terms() { printf '%s\n' "${1%% / *}" && if [ "${1#* / }" != "$1" ]; then printf '%s\n' "${1#* / }"; fi; } # WHAT: a term a line
split_sum_term() { # sum:REGEX[@VARIANT]: SUM_RE, and SUM_VARIANT (ours where none is named)
    SUM_RE=${1#sum:} SUM_VARIANT=ours
    if [ "${SUM_RE%@*}" != "$SUM_RE" ]; then SUM_VARIANT=${SUM_RE##*@} SUM_RE=${SUM_RE%@*}; fi
}
prediction_term() { # TERM KDIR BENCHLOG CAPPEDLOG: one term as this run measured it, else nothing
    local t=$1 x
    case $t in
    sum:*) # ms summed over the bench --kernels rows matching REGEX, in the default pass or KDIR/k_VARIANT
        split_sum_term "$t"
        [ -s "$2/k_$SUM_VARIANT" ] && awk -F'\t' -v r="$SUM_RE" '$1 ~ r {s += $2; n++} END {if (n) printf "%.6f", s}' "$2/k_$SUM_VARIANT" ;;
    sample:*@simt) x=${t#sample:} && bench_value "$3" "== nanogpt bench --sample=${x%@simt}, NGPT_GEMV=simt" sample_tokens_per_s ;;
    sample:*@nographs) x=${t#sample:} && bench_value "$3" "== nanogpt bench --sample=${x%@nographs}, NGPT_GRAPHS=0" sample_tokens_per_s ;;
    sample:*) bench_value "$3" "== nanogpt bench --sample=${t#sample:}" sample_tokens_per_s ;;
    prompt:*) bench_value "$3" "== nanogpt bench --sample=${t#prompt:} --prompt=$PROMPT_LEN" prompt_tokens_per_s ;;
    host:*) bench_value "$3" "== ${t#host:}" host_share ;;
    tok:*)
        x=$(bench_value "$3" "== ${t#tok:}" tokens_per_s)
        [ -z "$x" ] && x=$(bench_value "$4" "== ${t#tok:}" tokens_per_s)
        echo "$x" ;;
    op:*) # the profiled step's "NAME ... ms in C calls, U us each": C x U, in ms
        section "$3" "== nanogpt bench" | awk -v n="${t#op:}" '$1 == n && $3 == "ms" && $4 == "in" {printf "%.4f", $5 * $(NF - 2) / 1000; exit}' ;;
    esac
}
# PREDICTIONS KDIR BENCHLOG CAPPEDLOG [GPU]: "HELD|BELOW|ABOVE|NONE<TAB>value<TAB>low-high<TAB>session<TAB>description".
# A time or rate (one term; a ratio of two measured in this call compares on any GPU) is predicted for the GPU its
# sixth column names, else for the one the file's "# made for: NAME" line names. On GPU (part of nvidia-smi's name),
# a line for another GPU named in a sixth column is left out, and so is a line for the made-for GPU where a line for
# this GPU predicts the same value; a line for the made-for GPU on another GPU gets a * on its verdict
predictions_made_for() { sed -n 's/^# made for: //p' "$1" | head -n 1; } # PREDICTIONS: the GPU its times and rates are for
score_predictions() {
    local session low high what desc for_gpu terms a b v verdict made_for this_gpus
    made_for=$(predictions_made_for "$1")
    # the values predicted for this GPU by name
    this_gpus=$(awk -F'\t' -v g="${5:-}" '$1 ~ /^[0-9]/ && $6 != "" && g != "" && index(g, $6) {print $4}' "$1")
    while IFS=$'\t' read -r session low high what desc for_gpu; do
        case $session in '#'* | '') continue ;; esac
        if [ -n "$for_gpu" ]; then
            [ -n "${5:-}" ] && [ "${5#*"$for_gpu"}" != "$5" ] || continue
        elif grep -qxF -- "$what" <<<"$this_gpus"; then
            continue
        fi
        mapfile -t terms < <(prediction_terms "$what")
        a=$(prediction_term "${terms[0]}" "$2" "$3" "$4")
        v=$a
        if [ ${#terms[@]} = 2 ]; then
            b=$(prediction_term "${terms[1]}" "$2" "$3" "$4")
            v=$(over "$a" "$b" %.4f)
        fi
        verdict=$(awk -v v="$v" -v l="$low" -v h="$high" 'BEGIN{if (v == "") print "NONE"; else if (v + 0 < l + 0) print "BELOW";
                                                              else if (v + 0 > h + 0) print "ABOVE"; else print "HELD"}')
        if [ ${#terms[@]} = 1 ] && [ -z "$for_gpu" ] && [ -n "${5:-}" ] && [ -n "$made_for" ] && [ "${5#*"$made_for"}" = "$5" ]; then
            verdict+="*"
        fi
        printf '%s\t%s\t%s-%s\t%s\t%s\n' "$verdict" "${v:-not measured}" "$low" "$high" "$session" "$desc${for_gpu:+ [$for_gpu]}"
    done <"$1"
}
# The newest features of the TMA kernel and of the wgmma attention, each as the setting that turns it off, newest first.
# Where one of those kernels fails its check alone, features_off runs the check again with each setting in turn, then all
# together, and prints the first that passes: later steps then run with it exported and keep the kernel (the row names
# what was turned off), where before one feature's fault sent every later step to an older kernel
MATMUL_FEATURES="NGPT_STREAMK=0 NGPT_DBIAS=separate NGPT_PDL=0"
ATTENTION_FEATURES="NGPT_ATTN_PERSISTENT=0 NGPT_PDL=0"
features_off() { # "SETTING..." LOG SECONDS COMMAND...: the first of the settings (then all of them) under which COMMAND passes
    local tries=() t
    for t in $1; do [ "$(printenv "${t%%=*}")" = "${t#*=}" ] || tries+=("$t"); done # not those already exported
    [ ${#tries[@]} -gt 1 ] && tries+=("${tries[*]}")
    for t in "${tries[@]}"; do
        echo "===== again with $t" >>"$2"
        if env $t timeout "$3" "${@:4}" >>"$2" 2>&1; then echo "$t"; return 0; fi
    done
    return 1
}
bias_as_dweight() { # FILE: its "matmul NAME dbias+dweight" rows named "matmul NAME dweight", the others left out
    sed -n 's/^\(matmul .*\) dbias+dweight\t/\1 dweight\t/p' "$1"
}
ratio() { # NAME-REGEX OURS PEER: peer time / our time summed over the matching kernels (a FLOP-weighted speed ratio)
    join -t "$(printf '\t')" <(sort "$2") <(sort "$3") | awk -F'\t' -v r="$1" '$1 ~ r {o += $2; t += $3} END {if (o > 0) printf "%.2f", t / o}'
}

# ---- selftest (no GPU; build.sh test runs it): the readers above on the output of a CPU build of nanogpt,
# with the same commands and section headers as the steps below, at toy sizes ---------------------------------
if [ "$STEPS" = selftest ]; then
    SP=0 SF=0 T_=$'\t'
    check() { # what command...: one test line
        if "${@:2}"; then echo "ok gpu.sh reads $1"; SP=$((SP + 1)); else echo "FAIL gpu.sh reads $1"; SF=$((SF + 1)); fi
    }
    positive() { awk -v v="$1" 'BEGIN{exit !(v != "" && v + 0 > 0)}'; }
    N=$BUILD/nanogpt
    if ! "$CC" -O1 -std=c11 -fno-trapping-math -fno-math-errno -o "$N" nanogpt.c -lm -lpthread; then
        echo "FAIL gpu.sh selftest: nanogpt.c did not compile"
        echo "summary: 0 passed, 1 failed"
        exit 1
    fi
    cat nanogpt.c README.md >"$BUILD/text.txt" # any text: a character model of it
    "$N" prepare --input="$BUILD/text.txt" --out="$BUILD/data" >/dev/null
    toy=(--device=cpu --data_dir="$BUILD/data" --n_layer=1 --n_head=2 --n_embd=32 --block_size=32 --batch_size=4
         --gradient_accumulation_steps=1 --dropout=0 --max_iters=9 --eval_interval=5 --eval_iters=1 --log_interval=1)
    for run in a b; do # into one log under headers, as the capped step writes its two runs
        mb=()
        [ $run = b ] && mb=(--micro_batch=2)
        echo "== $run" >>"$BUILD/capped.log"
        "$N" train "${toy[@]}" "${mb[@]}" --out_dir="$BUILD/out_$run" >>"$BUILD/capped.log" 2>&1
        section "$BUILD/capped.log" "== $run" >"$BUILD/train_$run.out"
    done
    check "log.jsonl (10 steps)" test "$(log_steps "$BUILD/out_a" | wc -l)" = 10
    read -r n meand maxd ta tb <<<"$(compare_runs "$BUILD/out_a" "$BUILD/out_b")"
    check "two runs' losses and tokens/s (micro-batch 4 vs 2: $n steps, mean |d| $meand, tokens/s $ta, $tb)" \
        awk -v n="$n" -v d="$meand" -v a="$ta" -v b="$tb" 'BEGIN{exit !(n == 10 && d < 1e-4 && a > 0 && b > 0)}'
    check "the plan line ($(plan_of "$BUILD/train_b.out"))" grep -q "micro-batch 2 x accumulation 2" <<<"$(plan_of "$BUILD/train_b.out")"
    check "the arena ($(arena_of "$BUILD/train_a.out"))" positive "$(gib_of "$(arena_of "$BUILD/train_a.out")")"
    check "the best val loss ($(best_val_of "$BUILD/train_a.out"))" positive "$(best_val_of "$BUILD/train_a.out")"
    toy=(--device=cpu --n_layer=1 --n_head=2 --n_embd=32 --block_size=16 --vocab_size=100 --batch_size=2)
    {
        echo "== nanogpt bench"; "$N" bench "${toy[@]}" --steps=2 --warmup=1
        echo "== nanogpt bench --kernels"; "$N" bench "${toy[@]}" --kernels
        echo "== nanogpt bench --sample=2"; "$N" bench "${toy[@]}" --sample=2 --prompt=16 --steps=5
        echo "== nanogpt bench, pinned"; "$N" bench "${toy[@]}" --micro_batch=1 --recompute=1 --steps=2 --warmup=1
    } >"$BUILD/bench.log" 2>&1
    v=$(bench_plan_of "$BUILD/bench.log" "== nanogpt bench, pinned")
    check "bench's plan ($v)" grep -qx "micro-batch 1 x accumulation [0-9]*, recompute GELU" <<<"$v"
    { # the same line as a GPU run with bf16 AdamW moments prints it (the CPU has none)
        echo "== bf16 moments"
        section "$BUILD/bench.log" "== nanogpt bench, pinned" | grep '^bench: ' | sed 's/ rows; / rows, AdamW moments bf16; /'
    } >"$BUILD/bench_bf16.log"
    v=$(bench_plan_of "$BUILD/bench_bf16.log" "== bf16 moments")
    check "bench's plan with bf16 moments ($v)" grep -qx "micro-batch 1 x accumulation [0-9]*, recompute GELU, AdamW moments bf16" <<<"$v"
    for key in tokens_per_s memory_bytes; do
        v=$(bench_value "$BUILD/bench.log" "== nanogpt bench" $key)
        check "bench's $key ($v)" positive "$v"
    done
    for key in sample_tokens_per_s prompt_tokens_per_s; do
        v=$(bench_value "$BUILD/bench.log" "== nanogpt bench --sample=2" $key)
        check "bench --sample --prompt's $key ($v)" positive "$v"
    done
    check "bench --kernels' classifier chunk ($(chunk_rows_of "$BUILD/bench.log"))" positive "$(chunk_rows_of "$BUILD/bench.log")"
    ktimes "$BUILD/bench.log" '^== nanogpt bench --kernels$' >"$BUILD/k"
    check "bench --kernels' $(wc -l <"$BUILD/k") kernel times" \
        awk -F'\t' -v want="$(grep -c '^kernel ' "$BUILD/bench.log")" '$2 + 0 > 0 {n++} END {exit !(want >= 12 && n == want)}' "$BUILD/k"
    awk -F'\t' '{printf "%s\t%.6f\n", $1, ($1 ~ /^matmul/ ? 2 : 3) * $2}' "$BUILD/k" >"$BUILD/k_peer" # a peer 2x / 3x slower
    check "kernel times into ratios against a peer" test "$(ratio '^matmul' "$BUILD/k" "$BUILD/k_peer") $(ratio '^attention' "$BUILD/k" "$BUILD/k_peer")" = "2.00 3.00"
    check "decoding's products ($(grep -c '^decode .* x\(1\|10\)'$'\t' "$BUILD/k") rows)" \
        test "$(grep -c '^decode .* x\(1\|10\)'$'\t' "$BUILD/k") $(ratio '^decode .* x1$' "$BUILD/k" "$BUILD/k_peer")" = "10 3.00"
    awk -F'\t' 'NR == FNR {if ($1 ~ / dweight$/) t[$1] = $2; next} {n = $1; if (sub(/ dbias\+dweight$/, " dweight", n)) printf "%s\t%.6f\n", $1, 1.25 * t[n]; else print}' \
        "$BUILD/k" "$BUILD/k" >"$BUILD/k_b" # each weight gradient with its bias gradient 1.25x its time alone
    bias_as_dweight "$BUILD/k_b" >"$BUILD/k_bd"
    check "the weight gradients with their bias gradients ($(grep -c '^matmul .* dbias+dweight'$'\t' "$BUILD/k") rows)" \
        test "$(grep -c '^matmul .* dbias+dweight'$'\t' "$BUILD/k") $(ratio '^matmul .* dweight$' "$BUILD/k_bd" "$BUILD/k_b")" = "4 0.80"
    check "each product of every linear layer ($(grep -c '^matmul .* \(fwd\|dinp\|dweight\)'$'\t' "$BUILD/k") rows)" \
        test "$(grep -c '^matmul .* \(fwd\|dinp\|dweight\)'$'\t' "$BUILD/k") $(ratio '^matmul .* dweight' "$BUILD/k" "$BUILD/k_peer")" = "15 2.00"
    awk -F'\t' '{printf "%s\t%.6f\n", $1, ($1 ~ /^attention/ ? 1.5 : 1) * $2}' "$BUILD/k" >"$BUILD/k_none" # attention 1.5x slower
    tv=$(variant_vs_default "attention fwd" "without turns" "with" "$BUILD/k_none" "$BUILD/k" "$BUILD/k_peer" "$BUILD/k") # default passes t, 3t, t: median t
    check "a kernel against the median of the default passes ($tv)" grep -q '^1\.50x ([0-9.]* ms without turns, [0-9.]* with: the median of 3 passes, ' <<<"$tv"
    # test/gpu_predictions.tsv: each line's terms name what this script measures (the kernel rows of bench --kernels,
    # a CPU build's plus the two GELU-fused products only the CUDA backend has; a pass's k_ file; a bench header;
    # an op of the profiled step), and the scorer on made-up passes
    { cut -f1 "$BUILD/k"; echo "matmul fc fwd gelu"; echo "matmul mlp proj dinp gelu"; } >"$BUILD/knames"
    bad=$(while IFS=$'\t' read -r session low high what desc for_gpu; do
        case $session in '#'* | '') continue ;; esac
        awk -v l="$low" -v h="$high" -v s="$session" 'BEGIN{exit !(s + 0 > 0 && l + 0 > 0 && h + 0 > l + 0)}' && [ -n "$desc" ] || echo "range: $what"
        mapfile -t terms < <(prediction_terms "$what")
        [ -z "$for_gpu" ] || [ ${#terms[@]} = 1 ] || echo "a ratio for one GPU: $what"
        for t in "${terms[@]}"; do
            case $t in
            sum:*) split_sum_term "$t"
                awk -v r="$SUM_RE" '$0 ~ r {n++} END {exit !n}' "$BUILD/knames" || echo "no kernel row: $t"
                [ "$SUM_VARIANT" = ours ] || grep -qF ">\"\$BUILD/k_$SUM_VARIANT\"" test/gpu.sh || echo "no pass: $t" ;;
            tok:*) grep -qF "\"== ${t#tok:}\"" test/gpu.sh || echo "no bench header: $t" ;;
            host:*) grep -qF "\"== ${t#host:}\"" test/gpu.sh || echo "no bench header: $t" ;;
            sample:*) x=${t#sample:} && x=${x%@simt} && [[ " $SAMPLE_COUNTS " == *" ${x%@nographs} "* ]] || echo "no sampling bench: $t" ;;
            prompt:*) [[ " $SAMPLE_COUNTS " == *" ${t#prompt:} "* ]] || echo "no prompt bench: $t" ;;
            op:*) section "$BUILD/bench.log" "== nanogpt bench" | awk -v n="${t#op:}" '$1 == n {f = 1} END {exit !f}' || echo "no op: $t" ;;
            *) echo "unknown term: $t" ;;
            esac
        done
    done <test/gpu_predictions.tsv | paste -sd ';' -)
    check "test/gpu_predictions.tsv's $(grep -c '^[0-9]' test/gpu_predictions.tsv) predictions${bad:+: $bad}" test -z "$bad"
    mkdir -p "$BUILD/p"
    printf 'attention fwd\t0.100\nmatmul qkv dweight\t0.080\nmatmul qkv dbias+dweight\t0.090\n' >"$BUILD/p/k_ours"
    printf 'matmul qkv dweight\t0.096\n' >"$BUILD/p/k_slow"
    { echo "== nanogpt bench"; section "$BUILD/bench.log" "== nanogpt bench"; echo "== nanogpt bench, slower"; echo "bench_result tokens_per_s=1 host_share=0.5"
      echo "== nanogpt bench --sample=1"; echo "bench_result sample_tokens_per_s=500"
      echo "== nanogpt bench --sample=1, NGPT_GEMV=simt"; echo "bench_result sample_tokens_per_s=250"
      echo "== nanogpt bench --sample=1, NGPT_GRAPHS=0"; echo "bench_result sample_tokens_per_s=400"
      echo "== nanogpt bench --sample=1 --prompt=$PROMPT_LEN"; echo "bench_result prompt_tokens_per_s=20000"; } >"$BUILD/p/bench.log"
    printf '== capped, fast\nbench_result tokens_per_s=300\n' >"$BUILD/p/capped.log"
    adamw_ms=$(section "$BUILD/bench.log" "== nanogpt bench" | awk '$1 == "adamw" {print $2}')
    printf '%s\n' "# a comment" "# made for: H200" "1${T_}0.05${T_}0.2${T_}sum:^attention fwd\$${T_}in range" \
        "2${T_}1.1${T_}1.3${T_}sum:^matmul qkv dweight\$@slow / sum:^matmul qkv dweight\$${T_}a ratio of passes, in range" \
        "3${T_}0.95${T_}0.99${T_}sum:^matmul qkv dweight\$ / sum:^matmul qkv dbias[+]dweight\$${T_}below" \
        "4${T_}0.5${T_}1.5${T_}tok:nanogpt bench / tok:nanogpt bench, slower${T_}above" \
        "5${T_}100${T_}400${T_}tok:capped, fast${T_}capped.log's, in range" \
        "6${T_}1${T_}2${T_}tok:capped, fast / tok:capped, missing${T_}not measured" \
        "7${T_}$(awk -v m="$adamw_ms" 'BEGIN{printf "%.4f", m * 0.5}')${T_}$(awk -v m="$adamw_ms" 'BEGIN{printf "%.4f", m * 1.5 + 0.01}')${T_}op:adamw${T_}the op's calls times its time each, near its total" \
        "8${T_}0.2${T_}0.3${T_}sum:^attention fwd\$${T_}line 1's for an H100${T_}H100 80GB HBM3" \
        "9${T_}400${T_}600${T_}sample:1${T_}sampling's tokens/s, in range" \
        "10${T_}1.5${T_}2.5${T_}sample:1 / sample:1@simt${T_}sampling's tokens/s against NGPT_GEMV=simt's, in range" \
        "11${T_}30${T_}35${T_}prompt:1 / sample:1${T_}a prompt's tokens/s against generation's, above" \
        "12${T_}1.1${T_}1.3${T_}sample:1 / sample:1@nographs${T_}sampling's tokens/s against NGPT_GRAPHS=0's, in range" \
        "13${T_}0.4${T_}0.6${T_}host:nanogpt bench, slower${T_}the host's share of a step, in range" \
        >"$BUILD/p/pred.tsv"
    sp() { score_predictions "$BUILD/p/pred.tsv" "$BUILD/p" "$BUILD/p/bench.log" "$BUILD/p/capped.log" "$1" | cut -f1 | tr '\n' ' '; }
    v=$(sp "NVIDIA H200")
    check "predictions scored ($v)" test "$v" = "HELD HELD BELOW ABOVE HELD NONE HELD HELD HELD ABOVE HELD HELD "
    v=$(sp "NVIDIA H100 80GB HBM3")
    check "predictions on an H100: its own line for a time, the H200's others marked ($v)" test "$v" = "HELD BELOW ABOVE HELD* NONE HELD* BELOW HELD* HELD ABOVE HELD HELD* "
    v=$(sp "NVIDIA A100-SXM4-80GB")
    check "predictions on a GPU none is for: the H200's times and rates marked ($v)" test "$v" = "HELD* HELD BELOW ABOVE HELD* NONE HELD* HELD* HELD ABOVE HELD HELD* "
    # features_off on checks that pass only under some of the settings: the first setting that passes, then all together,
    # the settings already exported left out, and none where nothing passes
    ff() { features_off "$MATMUL_FEATURES" "$BUILD/ff.log" 5 sh -c "$1"; }
    v=$(ff 'test "$NGPT_DBIAS" = separate')
    check "a feature turned off ($v, $(grep -c '^===== again with' "$BUILD/ff.log") tries)" \
        test "$v $(grep -c '^===== again with' "$BUILD/ff.log")" = "NGPT_DBIAS=separate 2"
    v=$(ff 'test "$NGPT_DBIAS" = separate && test "$NGPT_STREAMK" = 0')
    check "all features turned off ($v)" test "$v" = "$MATMUL_FEATURES"
    v=$(NGPT_PDL=0 ff 'test "$NGPT_DBIAS" = separate && test "$NGPT_STREAMK" = 0 && test "$NGPT_PDL" = 0')
    check "features turned off but those already off ($v)" test "$v" = "NGPT_STREAMK=0 NGPT_DBIAS=separate"
    check "no setting where none passes" test "$(ff false || echo none)" = none
    # the GPU steps' own logic, dry, on stand-ins (prebuilt "binaries" with the sources' stamp: nanogpt's info as an
    # H200's, its benches, trains and prepare the CPU build's at toy sizes; test_gpu_ops failing its checks unless
    # NGPT_STREAMK=0 where GPU_DRY_FAULT is set, as a faulty stream-K would; test_gpu_train passing; nvidia-smi, the
    # PyTorch peer, ncu and compute-sanitizer), so a slip in a branch only a GPU run takes shows here, not in the GPU's minutes
    D=$BUILD/dry
    mkdir -p "$D/prebuilt" "$D/bin"
    sources_stamp sm_90a >"$D/prebuilt/stamp"
    {
        echo '#!/usr/bin/env bash'
        echo 'case $1 in'
        echo 'info) echo "cuda: stand-in H200, sm_90, 132 SMs, 139.8 GiB (139.0 GiB free), bf16 yes, 16-bit matmul wgmma+tma, attention wgmma at head size 64, programmatic launches $([ "${NGPT_PDL:-}" = 0 ] && echo off || echo on)" ;;'
        echo 'bench) keep=(); for a in "$@"; do case $a in --kernels | --sample=*) keep+=("$a") ;; --prompt=*) keep+=(--prompt=16) ;; esac; done'
        echo "    exec \"$N\" bench --device=cpu --n_layer=1 --n_head=2 --n_embd=32 --block_size=16 --vocab_size=100 --batch_size=2 --steps=2 --warmup=1 --gradient_accumulation_steps=1 \"\${keep[@]}\" ;;"
        echo 'train) keep=(); for a in "$@"; do case $a in --data_dir=* | --out_dir=* | --max_iters=* | --log_interval=* | --eval_*=* | --micro_batch=* | --recompute=*) keep+=("$a") ;; esac; done'
        echo "    exec \"$N\" train --device=cpu --n_layer=1 --n_head=2 --n_embd=16 --block_size=8 --batch_size=2 --gradient_accumulation_steps=1 --dropout=0 \"\${keep[@]}\" ;;"
        echo "prepare) exec \"$N\" \"\$@\" ;;"
        echo '*) exit 2 ;;'
        echo 'esac'
    } >"$D/prebuilt/nanogpt"
    {
        echo '#!/usr/bin/env bash'
        echo 'if [ -n "${GPU_DRY_FAULT:-}" ] && [ "${NGPT_STREAMK:-}" != 0 ]; then echo "FAIL stand-in: a weight gradient in stream-K pieces"; echo "summary: 1 passed, 1 failed"; exit 1; fi'
        echo 'echo "ok stand-in: a product"; echo "ok stand-in: no device allocation (bf16)"; echo "summary: 2 passed, 0 failed"'
    } >"$D/prebuilt/test_gpu_ops"
    {
        echo '#!/usr/bin/env bash'
        echo "sed -n 's/^ *RUN(\\(test_[a-z0-9_]*\\));.*/ok \\1/p' \"$ROOT/test/test_gpu_train.c\""
    } >"$D/prebuilt/test_gpu_train"
    {
        echo '#!/usr/bin/env bash'
        echo 'case "$*" in *compute_cap*) echo 9.0 ;; *query-gpu=name,*) echo "stand-in ${GPU_DRY_NAME:-H200}, 9.0, 143771 MiB, 580" ;; *query-gpu=name*) echo "stand-in ${GPU_DRY_NAME:-H200}" ;; esac'
    } >"$D/bin/nvidia-smi"
    { # the peer 1.1x slower than the kernels of the run it is part of (gpu.sh calls it right after that run's default
      # --kernels pass; a copy of another run's would put their difference, on a busy machine, into the ratio)
        echo '#!/usr/bin/env bash'
        echo 'case "$*" in'
        echo '*--kernels*) awk '"'"'/^== /{on = ($0 == "== nanogpt bench --kernels"); next} on && /^kernel /{$(NF - 3) = $(NF - 3) * 1.1; k[n++] = $0}'
        echo '    END{for (i = 0; i < n; i++) print k[i]}'"'"' "$OUT/bench.log" ;;'
        echo '*--vocab_size\ 65*--dropout\ 0.2*) echo "bench_result tokens_per_s=1000 memory_bytes=900000" ;;'
        echo "*) echo \"bench_result tokens_per_s=$(bench_value "$BUILD/bench.log" "== nanogpt bench" tokens_per_s) memory_bytes=9000000\" ;;"
        echo 'esac'
    } >"$D/bin/peer"
    { # compute-sanitizer: the program under it, then a clean summary
        echo '#!/usr/bin/env bash'
        echo 'while [ "${1#-}" != "$1" ]; do case $1 in --tool | --leak-check | --error-exitcode) shift ;; esac; shift; done'
        echo '"$@"; rc=$?; echo "========= ERROR SUMMARY: 0 errors"; exit $rc'
    } >"$D/bin/compute-sanitizer"
    { # ncu: a report where --export asks for one, a Speed Of Light section from it
        echo '#!/usr/bin/env bash'
        echo 'prev=""; for a in "$@"; do [ "$prev" = --export ] && : >"$a.ncu-rep"; prev=$a; done'
        echo 'case "$*" in *--page\ details*) echo "  Section: GPU Speed Of Light Throughput" ;; *--page\ source*) echo "\"Address\",\"Source\"" ;; esac'
    } >"$D/bin/ncu"
    chmod +x "$D/prebuilt/nanogpt" "$D/prebuilt/test_gpu_ops" "$D/prebuilt/test_gpu_train" "$D/bin/"*
    GPT2=${NGPT_SHARED_DATA:-../shared/data}/gpt2 # the capped step's tokenizer (CI's machines have it; elsewhere that step skips)
    dry_run() { # OUT STEP...: test/gpu.sh's steps on the stand-ins, logs to OUT and OUT.log -> its shell errors, if any
        local out=$1
        shift
        mkdir -p "$out"
        OUT="$out" GPU_SH_PREBUILT="$D/prebuilt" NGPT_GPU_ARCH=sm_90a PATH="$D/bin:$PATH" PYTHON="$D/bin/peer" GPU_SH_CURVE=0 \
            GPU_SH_SETTLED=1 NGPT_GPT2_DIR="$GPT2" bash test/gpu.sh "$@" >"$out.log" 2>&1
        grep -E 'command not found|syntax error|unbound variable|No such file|integer expression expected|unexpected' "$out.log" | head -n 3 | paste -sd ';' -
    }
    v=$(GPU_DRY_FAULT=1 dry_run "$D/out" ops train capped bench profile sanitize)
    check "a dry run's ops, train, capped, bench, profile and sanitize steps (${v:-no shell errors})" test -z "$v"
    check "a dry run's profile and sanitizer rows" test "$(grep -cE '^(ncu profile|compute-sanitizer [a-z0-9 ()]*) *\| PASS' "$D/out/summary.txt")" = 6
    if [ -f "$GPT2/vocab.bpe" ]; then
        v=$(grep -cE '^(2\.68 GiB: (loss curve vs uncapped|arena within the budget)|2\.68 GiB, cheaper trades pinned) *\| PASS' "$D/out/summary.txt")
        check "a dry run's capped rows ($v of 3 curve and budget rows pass, $(grep -c '^[0-9.]* GiB: .*(> [0-9.]*) *|' "$D/out/summary.txt") bench pairs)" \
            test "$v $(grep -c '^[0-9.]* GiB: .*(> [0-9.]*) *| [A-Z]* *| [0-9.]*x' "$D/out/summary.txt")" = "3 4"
    else
        check "a dry run's capped step skipped (no $GPT2)" grep -q '^2.68 GiB capped run *| SKIP' "$D/out/summary.txt"
    fi
    check "a dry run's TMA matmul kept with stream-K off" grep -q '^TMA wgmma matmul vs CPU (bf16) *| FAIL *| .*passes with NGPT_STREAMK=0' "$D/out/summary.txt"
    check "a dry run's later steps with it off (op tests, trainer checks, no split-K comparison)" \
        test "$(grep -c '^op tests vs CPU .*| PASS' "$D/out/summary.txt") $(grep -c "split-K's rule" "$D/out/bench.log")" = "1 0"
    check "a dry run's bench rows" grep -q "^end to end vs PyTorch (>= 1.3x) *| [A-Z]* *| [0-9.]*x: .*, the host's share of a step [01]\.[0-9]*" "$D/out/summary.txt"
    check "a dry run's shakespeare_char row (the peer's arguments read)" \
        grep -q "^shakespeare_char model vs PyTorch (>= 1.0) *| [A-Z]* *| [0-9.]*x: [0-9]* vs 1000 tokens/s (dropout 0.2; without it nanogpt's [0-9]*, [0-9.]*x), the host's share of a step [01]\.[0-9]*" "$D/out/summary.txt"
    check "a dry run's decoding rows (the peer's products and attention 1.1x slower; sampling with NGPT_GEMV=simt and NGPT_GRAPHS=0; a prompt at once)" \
        test "$(grep -c -e "^decoding's products vs torch.matmul (>= 1.0) *| PASS *| 1.10x, time-weighted: 1 row 1.10x, 10 rows 1.10x" \
            -e "^decoding's attention vs SDPA (>= 1.0) *| PASS *| 1.10x, time-weighted: 1 sequence 1.10x, 10 sequences 1.10x" \
            -e '^sampling: gemv on tensor cores vs NGPT_GEMV=simt (>= 1.0) *| [A-Z]* *| 1 sample [0-9.]*x ([0-9.]* tokens/s with simt), 10 samples [0-9.]*x' \
            -e '^sampling: a recorded graph a token vs NGPT_GRAPHS=0 (>= 1.0) *| [A-Z]* *| 1 sample [0-9.]*x ([0-9.]* tokens/s without), 10 samples [0-9.]*x' \
            -e '^a 1024-token prompt at once vs a token a step (>= 1.0) *| [A-Z]* *| 1 sample [0-9.]*x ([0-9.]* prompt tokens/s), 10 samples [0-9.]*x' \
            "$D/out/summary.txt")" = 5
    check "a dry run's micro-batch row" grep -q "^12 x 4: planner's micro-batch vs 12 *| [A-Z]* *| [0-9]* (micro-batch [0-9]* x accumulation [0-9]*) vs [0-9]*" \
        "$D/out/summary.txt"
    v=$(sed -n 's/^predictions (test\/gpu_predictions.tsv; \(.*\)):$/\1/p' "$D/out/summary.txt")
    check "a dry run's predictions scored (${v:-none})" grep -qE '[0-9]+ (HELD|BELOW|ABOVE)' <<<"$v"
    # and bench again where every kernel passes its check alone, on an H100 PCIe (no line is for it): the passes of the
    # features left on, their rows, and their predictions (stream-K's five among them) scored, the times and rates
    # made for an H200 marked, those for the H100 SXM left out
    v=$(GPU_DRY_NAME="H100 PCIe" dry_run "$D/out2" bench)
    check "a dry run's bench with every feature on (${v:-no shell errors})" test -z "$v"
    v=$(grep -cE "^(TMA wgmma matmul vs CPU \(bf16\) *\| PASS|programmatic launches vs plain, end to end|bias gradients fused vs separate, end to end|\
stream-K vs split-K's rule, end to end|weight gradients stream-K vs split-K's rule) " "$D/out2/summary.txt")
    check "a dry run's rows of the features left on ($v of 5)" test "$v" = 5
    v=$(grep -c "^[A-Z]* *[0-9.]* *in [0-9.-]* *s46 " "$D/out2/summary.txt")
    check "a dry run's stream-K predictions scored ($v of 5)" test "$v" = 5
    v="$(grep -c '^[A-Z][A-Z]*[*] ' "$D/out2/summary.txt") $(grep -c '^[*] a time or rate predicted for an H200, not this stand-in H100 PCIe' \
        "$D/out2/summary.txt") $(grep -c '\[H100 80GB HBM3\]$' "$D/out2/summary.txt")"
    check "a dry run on an H100 PCIe: the times and rates predicted for an H200 marked, the H100 SXM's left out ($v)" \
        test "$v" = "$(awk -F'\t' '$1 ~ /^[0-9]/ && $4 !~ / \/ / && $6 == "" {n++} END {print n}' test/gpu_predictions.tsv) 1 0"
    # the trainer rows: each RUN(...) of a test program against its "ok" lines (test_config here, fast)
    "$CC" -O1 -std=c11 -Itest -o "$BUILD/test_config" test/test_config.c -lm -lpthread && "$BUILD/test_config" >"$BUILD/cfg.log" 2>&1
    runs=$(grep -c '^ *RUN(' test/test_config.c)
    check "a test program's results ($(test_results test/test_config.c "$BUILD/cfg.log" | grep -c ' PASS$') of $runs)" \
        test "$(test_results test/test_config.c "$BUILD/cfg.log" | grep -c ' PASS$')" = "$runs"
    first=$(test_results test/test_config.c "$BUILD/cfg.log" | head -n 1 | cut -d' ' -f1)
    grep -v "^ok $first\$" "$BUILD/cfg.log" >"$BUILD/cfg_cut.log"
    check "a missing ok line as a failure" test "$(test_results test/test_config.c "$BUILD/cfg_cut.log" | grep -c ' FAIL$')" = 1
    echo "summary: $SP passed, $SF failed"
    [ $SF = 0 ]
    exit
fi
: >"$LOG/summary.txt" # the rows as they come (row), then the whole table at the end (after selftest, which writes none)

# ---- build ----------------------------------------------------------------------------------------------
ARCH=${NGPT_GPU_ARCH:-}
if [ -z "$ARCH" ]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
    if [ -n "$cc" ]; then ARCH="sm_$cc"; else ARCH=native; fi
    [ "$ARCH" = sm_90 ] && ARCH=sm_90a # Hopper: the wgmma matmul needs the arch-specific target
fi
# -gencode names the exact target (the -arch=sm_90a shorthand also runs a plain sm_90 pass)
case $ARCH in
native) GENCODE=(-arch=native) ;;
*) GENCODE=(-gencode "arch=compute_${ARCH#sm_},code=$ARCH") ;;
esac
t0=$(date +%s)
# Prebuilt binaries (to spend no device time compiling): on a machine with nvcc, GPU_SH_SAVE=1
# NGPT_GPU_ARCH=sm_90a bash test/gpu.sh build leaves them in gpu-prebuilt/ (git-ignored) with a stamp of
# the target and the sources; carried to the GPU machine, they are used when the stamp matches there.
PREBUILT=${GPU_SH_PREBUILT:-gpu-prebuilt}
BINS=(nanogpt test_gpu_ops test_gpu_train)
WRAP_ALLOC="-Xlinker --wrap=cudaMalloc -Xlinker --wrap=cudaMallocHost -Xlinker --wrap=cudaFree" # the tests count them: test/cuda_alloc_count.h
STAMP=$(sources_stamp "$ARCH")
(
    echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader 2>&1
    if [ -f "$PREBUILT/stamp" ] && [ "$(cat "$PREBUILT/stamp")" = "$STAMP" ] && "$PREBUILT/nanogpt" info >/dev/null 2>&1; then
        echo "prebuilt binaries from $PREBUILT: stamp '$STAMP' matches these sources"
        for b in "${BINS[@]}"; do cp "$PREBUILT/$b" "$BUILD/$b" || exit 1; done
        exit 0
    fi
    [ -f "$PREBUILT/stamp" ] && echo "prebuilt binaries in $PREBUILT not used: their stamp '$(cat "$PREBUILT/stamp")', these sources' '$STAMP'"
    "$NVCC" --version | tail -n 1
    set -x
    "$NVCC" -std=c++17 -O3 -lineinfo "${GENCODE[@]}" -Xcompiler -Wall,-Wextra -c nanogpt.cu -o "$BUILD/nanogpt_cu.o" &&
        "$CC" $CFLAGS_C -Wno-unused-function -DNGPT_CUDA -c test/test_gpu_ops.c -o "$BUILD/test_gpu_ops.o" &&
        "$NVCC" "${GENCODE[@]}" "$BUILD/test_gpu_ops.o" "$BUILD/nanogpt_cu.o" -o "$BUILD/test_gpu_ops" -lm -lpthread $WRAP_ALLOC &&
        "$CC" $CFLAGS_C -Wno-unused-function -DNGPT_CUDA -Itest -c test/test_gpu_train.c -o "$BUILD/test_gpu_train.o" &&
        "$NVCC" "${GENCODE[@]}" "$BUILD/test_gpu_train.o" "$BUILD/nanogpt_cu.o" -o "$BUILD/test_gpu_train" -lm -lpthread $WRAP_ALLOC &&
        "$CC" $CFLAGS_C -DNGPT_CUDA -c nanogpt.c -o "$BUILD/nanogpt.o" &&
        "$NVCC" "${GENCODE[@]}" "$BUILD/nanogpt.o" "$BUILD/nanogpt_cu.o" -o "$BUILD/nanogpt" -lm -lpthread || exit
    if [ -n "${GPU_SH_SAVE:-}" ]; then
        mkdir -p "$PREBUILT" && for b in "${BINS[@]}"; do cp "$BUILD/$b" "$PREBUILT/$b" || exit 1; done && echo "$STAMP" >"$PREBUILT/stamp"
    fi
) >"$LOG/build.log" 2>&1
rc=$?
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
if [ $rc = 0 ]; then
    how=""
    grep -q '^prebuilt binaries' "$LOG/build.log" && how="prebuilt, "
    row "build ($ARCH)" PASS "${how}$(($(date +%s) - t0)) s; ${GPU:-no nvidia-smi}"
else
    row "build ($ARCH)" FAIL "exit $rc; see build.log"
    tail -n 30 "$LOG/build.log"
fi
BUILT=$rc

# ---- wgmma first (Hopper): the newest kernels, alone in their own processes. A fault in one poisons the
# CUDA context, so when the default (the TMA kernel) fails, it is tried again with its newest features off
# (features_off), else every later step runs on mma.sync (NGPT_MATMUL=mma); then the wgmma attention kernels
# the TMA choice brings, else attention runs on mma.sync (NGPT_ATTENTION=mma) ----
# KIND NAME SECONDS FEATURES FALLBACK WHAT: test_gpu_ops --KIND-only (bf16) alone, its row "NAME vs CPU (bf16)"; where
# it fails, again with each of FEATURES off (features_off), the first setting that passes exported for later steps,
# else FALLBACK exported (later steps then run WHAT). Correctness alone decides: the no-allocation check is the ops step's.
kernel_alone() {
    local kind=$1 name=$2 secs=$3 features=$4 fallback=$5 what=$6 t0 rc sum off t from
    t0=$(date +%s)
    : >>"$LOG/wgmma.log"
    from=$(($(wc -l <"$LOG/wgmma.log") + 1)) # this kernel's lines of the log
    echo "===== $name" >>"$LOG/wgmma.log"
    timeout "$secs" "$BUILD/test_gpu_ops" "--$kind-only" --skip-alloc-check --dtype bf16 >>"$LOG/wgmma.log" 2>&1
    rc=$?
    sum=$(tail -n +"$from" "$LOG/wgmma.log" | grep '^summary:' | tail -n 1) # this kernel's (a crash prints none)
    if [ $rc = 0 ]; then
        row "$name vs CPU (bf16)" PASS "${sum}; $(($(date +%s) - t0)) s"
        return
    fi
    tail -n +"$from" "$LOG/wgmma.log" | grep -A3 '^FAIL' | head -n 20
    if [ $rc -ge 128 ] || tail -n +"$from" "$LOG/wgmma.log" | grep -qiE "$FAULTS"; then # a fault: waiting after every launch names the kernel
        echo "===== again with NGPT_CUDA_SYNC=1 (every launch waited for)" >>"$LOG/wgmma.log"
        NGPT_CUDA_SYNC=1 timeout "$secs" "$BUILD/test_gpu_ops" "--$kind-only" --skip-alloc-check --dtype bf16 >>"$LOG/wgmma.log" 2>&1
    fi
    if off=$(features_off "$features" "$LOG/wgmma.log" $((secs * 2 / 3)) "$BUILD/test_gpu_ops" "--$kind-only" --skip-alloc-check --dtype bf16); then
        for t in $off; do export "$t"; done
        row "$name vs CPU (bf16)" FAIL "${sum:-exit $rc}; passes with $off, which later steps run with"
    else
        export "$fallback"
        row "$name vs CPU (bf16)" FAIL "${sum:-exit $rc}; later steps run $what"
    fi
}
if [ $BUILT = 0 ] && "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma+tma"; then
    kernel_alone matmul "TMA wgmma matmul" 45 "$MATMUL_FEATURES" NGPT_MATMUL=mma "on mma.sync"
    # the wgmma attention kernels come with the TMA matmul: alone first the same way, else attention stays on
    # mma.sync (NGPT_ATTENTION=mma) for every later step
    [ "${NGPT_MATMUL:-}" = "" ] && kernel_alone attention "wgmma attention" 60 "$ATTENTION_FEATURES" NGPT_ATTENTION=mma "attention on mma.sync"
    # the TMA kernel's ping-pong build (NGPT_PINGPONG, not the default) the same way: where it fails alone, the op
    # tests leave out its runs and bench its passes
    if [ "${NGPT_MATMUL:-}" = "" ] && "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma+tma"; then
        t0=$(date +%s)
        echo "===== the TMA kernel's ping-pong build (NGPT_PINGPONG=1)" >>"$LOG/wgmma.log"
        NGPT_PINGPONG=1 timeout 45 "$BUILD/test_gpu_ops" --matmul-only --skip-alloc-check --dtype bf16 >>"$LOG/wgmma.log" 2>&1
        rc=$?
        sum=$(grep '^summary:' "$LOG/wgmma.log" | tail -n 1)
        if [ $rc = 0 ]; then
            row "ping-pong TMA matmul vs CPU (bf16)" PASS "${sum}; $(($(date +%s) - t0)) s"
        else
            PINGPONG_OK=0
            row "ping-pong TMA matmul vs CPU (bf16)" FAIL "${sum:-exit $rc}; later steps leave it out"
            grep -A3 '^FAIL' "$LOG/wgmma.log" | head -n 20
        fi
    fi
    cat "$LOG/wgmma.log" >>"$LOG/build.log" # the 8-file limit: kept at the end of build.log
    rm -f "$LOG/wgmma.log"
fi

# ---- ops: every CUDA op against the CPU backend -----------------------------------------------------------
without=() # test_gpu_ops' runs with the ping-pong build, left out where it failed alone
[ "$PINGPONG_OK" = 1 ] || without=(--without NGPT_PINGPONG)
if want ops && [ $BUILT = 0 ] && time_left "op tests" 120 ops; then
    t0=$(date +%s)
    ops_cap=$(cap_time ${GPU_SH_OPS_S:-330})
    timeout $ops_cap "$BUILD/test_gpu_ops" "${without[@]}" >"$LOG/ops.log" 2>&1
    rc=$?
    sum=$(grep '^summary:' "$LOG/ops.log" | tail -n 1)
    nfail=$(grep -c '^FAIL' "$LOG/ops.log")
    res=PASS
    [ $rc = 0 ] || res=FAIL
    late=""
    if [ $rc = 124 ]; then
        if [ "$ops_cap" -lt "${GPU_SH_OPS_S:-330}" ]; then late=" (stopped at the budget: bash test/gpu.sh ops alone finishes it)"
        else late=" (stopped at GPU_SH_OPS_S=$ops_cap s, $(grep -c '^ok' "$LOG/ops.log") cases passed and $nfail failed by then)"; fi
    fi
    row "op tests vs CPU (f32, bf16, f16)" $res "${sum:-no summary (exit $rc)}$late; $(($(date +%s) - t0)) s"
    # a kernel fault is reported at a later call; waiting after every launch names the kernel itself. Only for a
    # fault (a wrong number is named as it is), and within 120 s: the steps after ops need the budget
    fault=0
    grep -qiE "$FAULTS" "$LOG/ops.log" && fault=1
    [ $rc -ge 128 ] && [ $rc != 124 ] && fault=1
    if [ $res = FAIL ] && [ $fault = 1 ] && time_left "op tests again with NGPT_CUDA_SYNC=1" 90 ops; then
        echo "===== again with NGPT_CUDA_SYNC=1 (every launch waited for)" >>"$LOG/ops.log"
        NGPT_CUDA_SYNC=1 timeout $(cap_time 120) "$BUILD/test_gpu_ops" "${without[@]}" >>"$LOG/ops.log" 2>&1
        echo "    NGPT_CUDA_SYNC=1: $(grep '^summary:' "$LOG/ops.log" | tail -n 1)"
    fi
    alloc=$(grep -c '^ok .*no device allocation' "$LOG/ops.log")
    allocf=$(grep -c '^FAIL .*no device allocation' "$LOG/ops.log")
    if [ "$allocf" -gt 0 ]; then row "no allocation during the op sweep" FAIL "$allocf dtype(s) changed free memory"
    elif [ "$alloc" -gt 0 ]; then row "no allocation during the op sweep" PASS "free memory unchanged, $alloc dtype(s)"
    else row "no allocation during the op sweep" FAIL "not reached"; fi
    [ "$nfail" -gt 0 ] && grep -A3 '^FAIL' "$LOG/ops.log" | head -n 40
fi

# ---- trainer-level checks (test/test_gpu_train.c): whole step vs CPU, determinism, no allocation while
# training (cudaMalloc & co. wrapped at link time), resume, the 300-step curve ------------------------------
TRAIN_NEEDS=240 TRAIN_CAP=480 # with the 300-step curve; under a minute without it (18 s on an H200, 2026-12-04). The cap
[ "${GPU_SH_CURVE:-1}" = 0 ] && TRAIN_NEEDS=90 TRAIN_CAP=150 # keeps a hung kernel from taking the later steps' budget
if want train && [ $BUILT = 0 ] && time_left "trainer checks" $TRAIN_NEEDS train; then
    t0=$(date +%s)
    curve=()
    [ "${GPU_SH_CURVE:-1}" = 0 ] && curve=(--no-curve)
    ( cd "$ROOT" && timeout $(cap_time $TRAIN_CAP) "$BUILD/test_gpu_train" "${curve[@]}" ) >"$LOG/train.log" 2>&1
    rc=$?
    while read -r t res; do # a row for each RUN(...) of test_gpu_train.c
        nums=$(grep -A1 "^FAIL $t" "$LOG/train.log" | head -n 1 | cut -c1-90)
        row "${t#test_}" "$res" "${nums:-see train.log}"
    done < <(test_results test/test_gpu_train.c "$LOG/train.log")
    if grep -q '^ok test_curve_follows_cpu$' "$LOG/train.log"; then row "curve_follows_cpu" PASS "$(sed -n 's/^  300 steps: //p' "$LOG/train.log")"
    elif grep -q '^FAIL test_curve_follows_cpu' "$LOG/train.log"; then row "curve_follows_cpu" FAIL "$(grep -m1 '^FAIL test_curve' "$LOG/train.log" | cut -c1-90)"
    elif [ ${#curve[@]} = 1 ]; then row "curve_follows_cpu" SKIP "left out (GPU_SH_CURVE=0: its CPU side takes minutes)"
    else row "curve_follows_cpu" FAIL "not reached; see train.log"; fi
    grep -E '^  ' "$LOG/train.log" | head -n 8
    [ $rc = 124 ] && row "trainer checks" FAIL "timed out after $(($(date +%s) - t0)) s"
fi

# ---- capped (issue 3's GPU acceptance): GPT-2 124M on real tokens (Tiny Shakespeare in GPT-2 BPE, which
# needs encoder.json and vocab.bpe in data/gpt2: carry that folder), 65,536 tokens per step, 50 steps with
# --max_memory=2.68GiB and 50 without: both run, the capped arena fits, the loss curves agree within bf16
# tolerance; the tokens/s ratio is issue 8's "capped at >= 0.7x uncapped" ----------------------------------
if want capped && [ $BUILT = 0 ] && time_left "2.68 GiB capped run" 180 capped; then
    t0=$(date +%s)
    TOKDIR=${NGPT_GPT2_DIR:-data/gpt2}
    {
        SHK=${NGPT_SHARED_DATA:-../shared/data}/tinyshakespeare.txt # or the carried copy it links to (above)
        if [ -f "$TOKDIR/encoder.json" ] && [ -f "$TOKDIR/vocab.bpe" ] && [ -f "$SHK" ]; then
            "$BUILD/nanogpt" prepare --input="$SHK" --out="$BUILD/shk_gpt2" --tokenizer=gpt2 --tokenizer_dir="$TOKDIR"
        else
            echo "no GPT-2 vocabulary in $TOKDIR (encoder.json, vocab.bpe) or no $SHK"
        fi
    } >"$LOG/capped.log" 2>&1
    if [ -f "$BUILD/shk_gpt2/train.bin" ]; then
        sample_mem() { # the largest device memory the GPU reports for any process, sampled every 0.2 s
            local max=0 v
            while sleep 0.2; do
                v=$(nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits 2>/dev/null | sort -n | tail -n 1)
                [ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v && echo "$max" >"$1"
            done
        }
        for run in capped uncapped cheaper; do # cheaper: the cap with GELU and LayerNorm recomputed (micro-batch 2, not 8)
            cap=()
            [ $run = capped ] && cap=(--max_memory=2.68GiB)
            [ $run = cheaper ] && cap=(--max_memory=2.68GiB --recompute=2)
            echo 0 >"$BUILD/mem_$run"
            sample_mem "$BUILD/mem_$run" &
            sampler=$!
            echo "== $run" >>"$LOG/capped.log" # the run writes into the log as it goes, so a cut-off call keeps it
            timeout $(cap_time 90) "$BUILD/nanogpt" train --device=cuda --data_dir="$BUILD/shk_gpt2" --out_dir="$BUILD/out_$run" \
                --n_layer=12 --n_head=12 --n_embd=768 --block_size=1024 --batch_size=64 --gradient_accumulation_steps=1 --dropout=0 \
                --max_iters=49 --eval_interval=1000 --eval_iters=1 --log_interval=1 --warmup_iters=10 --learning_rate=6e-4 \
                "${cap[@]}" >>"$LOG/capped.log" 2>&1
            echo "exit $?" >>"$LOG/capped.log"
            kill $sampler 2>/dev/null
            wait $sampler 2>/dev/null
            echo "peak device memory of any process (nvidia-smi, MiB, context included): $(cat "$BUILD/mem_$run")" >>"$LOG/capped.log"
            section "$LOG/capped.log" "== $run" >"$BUILD/train_$run.out"
        done
        cmp=$(compare_runs "$BUILD/out_capped" "$BUILD/out_uncapped")
        plan=$(plan_of "$BUILD/train_capped.out")
        arena=$(arena_of "$BUILD/train_capped.out")
        peak=$(cat "$BUILD/mem_capped")
        read -r n meand maxd tokc toku <<<"$cmp"
        if [ "$cmp" = none ] || [ "${n:-0}" -lt 50 ]; then
            row "2.68 GiB: 50 steps, capped and not" FAIL "steps compared: ${n:-0}; see capped.log"
        else
            ok=$(awk -v a="$meand" -v b="$maxd" 'BEGIN{print (a <= 0.02 && b <= 0.1) ? "PASS" : "FAIL"}')
            row "2.68 GiB: loss curve vs uncapped" "$ok" "$n steps, mean |d| $meand, max |d| $maxd (bf16: <= 0.02, 0.1); plan $plan"
            fits=$(awk -v v="$(gib_of "$arena")" 'BEGIN{print (v > 0 && v <= 2.68) ? "PASS" : "FAIL"}')
            row "2.68 GiB: arena within the budget" "$fits" "arena ${arena:-?}; nvidia-smi peak ${peak} MiB with the CUDA context"
            r=$(over "$tokc" "$toku" %.2f)
            row "capped speed vs uncapped (>= 0.7x)" "$(awk -v v="$r" 'BEGIN{print (v != "" && v + 0 >= 0.7) ? "PASS" : "MISS"}')" \
                "${r:-none}x: $tokc vs $toku tokens/s (median, steps 5-49)"
        fi
        # the same cap pinned to the cheaper trades (--recompute=2: micro-batch 2 where the planner picks 8 with
        # whole layers recomputed, plan_gpu_speed's choice): its curve held to the uncapped one as the capped run's
        # is; the planner's run should be faster than it (an H200, 2026-12-04: 1.32x, where the model says 1.32x)
        cmp=$(compare_runs "$BUILD/out_cheaper" "$BUILD/out_uncapped")
        read -r n meand maxd tokl toku2 <<<"$cmp"
        if [ "$cmp" = none ] || [ "${n:-0}" -lt 50 ]; then
            row "2.68 GiB, cheaper trades pinned" FAIL "steps compared: ${n:-0}; see capped.log"
        else
            ok=$(awk -v a="$meand" -v b="$maxd" 'BEGIN{print (a <= 0.02 && b <= 0.1) ? "PASS" : "FAIL"}')
            r=$(over "$tokl" "$toku2" %.2f)
            rcap=$(over "${tokc:-0}" "$tokl" %.2f) # none without the capped run's speed
            row "2.68 GiB, cheaper trades pinned" "$ok" "${r:-none}x uncapped ($tokl tokens/s; the planner's plan ${rcap:-none}x this); curve mean |d| $meand, max |d| $maxd; plan $(plan_of "$BUILD/train_cheaper.out"); arena $(arena_of "$BUILD/train_cheaper.out")"
            row "planner's cap plan vs cheaper trades (> 1.0)" "$(awk -v v="$rcap" 'BEGIN{print (v != "" && v + 0 > 1.0) ? "PASS" : "MISS"}')" \
                "${rcap:-none}x: $tokc vs $tokl tokens/s"
        fi
        capped_bench() { # "== HEADER" ARGS...: nanogpt bench of GPT-2 124M at 64 x 1024 tokens a step, into capped.log under HEADER
            local header=$1
            shift
            echo "$header" >>"$LOG/capped.log"
            timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda --batch_size=64 --gradient_accumulation_steps=1 "$@" >>"$LOG/capped.log" 2>&1
            echo "exit $?" >>"$LOG/capped.log"
        }
        bench_ratio_row() { # CHECK "== A" "== B" MODELED MIN: A's tokens/s over B's (capped_bench's), PASS above MIN
            local a b r
            a=$(bench_value "$LOG/capped.log" "$2" tokens_per_s)
            b=$(bench_value "$LOG/capped.log" "$3" tokens_per_s)
            r=$(over "${a:-0}" "${b:-0}" %.3f)
            row "$1 (> $5)" "$(awk -v v="$r" -v m="$5" 'BEGIN{print (v != "" && v + 0 > m + 0) ? "PASS" : "MISS"}')" \
                "${r:-none}x (modeled ${4}x): $(bench_plan_of "$LOG/capped.log" "$2") ${a:-none} tokens/s vs $(bench_plan_of "$LOG/capped.log" "$3") ${b:-none}"
        }
        # the cheaper trades weighed by the speed model: at 6 GiB the planner takes micro-batch 8 without
        # recomputing over 16 recomputing GELU and LayerNorm, the largest that fits (modeled 1.006x as fast)
        capped_bench "== nanogpt bench, 6 GiB, planner" --max_memory=6GiB --steps=10 --warmup=2
        capped_bench "== nanogpt bench, 6 GiB, largest" --max_memory=6GiB --steps=10 --warmup=2 --micro_batch=16 --recompute=2
        bench_ratio_row "6 GiB: planner vs largest micro-batch" "== nanogpt bench, 6 GiB, planner" "== nanogpt bench, 6 GiB, largest" 1.006 1.0
        # the model refitted to the seventh run, against the plans it now passes over: at 3 GiB micro-batch 8
        # with whole layers over 4 with GELU and LayerNorm (the old model's choice; modeled 1.12x), at 3.5 GiB 16
        # with whole layers over 8 with them (modeled 1.07x): micro-batch 4's rate and 16's with whole layers
        # are the model's guesses, measured by these rows
        capped_bench "== nanogpt bench, 3 GiB, planner" --max_memory=3GiB --steps=6 --warmup=1
        capped_bench "== nanogpt bench, 3 GiB, GELU and LayerNorm at 4" --max_memory=3GiB --steps=6 --warmup=1 --micro_batch=4 --recompute=2
        bench_ratio_row "3 GiB: planner vs GELU+LayerNorm at 4" "== nanogpt bench, 3 GiB, planner" "== nanogpt bench, 3 GiB, GELU and LayerNorm at 4" 1.12 1.0
        capped_bench "== nanogpt bench, 3.5 GiB, planner" --max_memory=3.5GiB --steps=6 --warmup=1
        capped_bench "== nanogpt bench, 3.5 GiB, whole layers at 8" --max_memory=3.5GiB --steps=6 --warmup=1 --micro_batch=8 --recompute=3
        bench_ratio_row "3.5 GiB: planner vs whole layers at 8" "== nanogpt bench, 3.5 GiB, planner" "== nanogpt bench, 3.5 GiB, whole layers at 8" 1.07 1.0
        # the bf16 moments' offer: at 2.2 GiB fp32 moments leave micro-batch 1 x 64 (whole layers), bf16 ones 8 x 8;
        # plan says the second is modeled 2.0x as fast (moments_dtype = bfloat16)
        capped_bench "== nanogpt bench, 2.2 GiB, fp32 moments" --max_memory=2.2GiB --steps=6 --warmup=1
        capped_bench "== nanogpt bench, 2.2 GiB, bf16 moments" --max_memory=2.2GiB --steps=6 --warmup=1 --moments_dtype=bfloat16
        bench_ratio_row "2.2 GiB: bf16 moments' offer vs fp32" "== nanogpt bench, 2.2 GiB, bf16 moments" "== nanogpt bench, 2.2 GiB, fp32 moments" 2.0 1.2
        # where a capped step's time goes, op by op (bench's profiled step under the same plan), to set beside
        # bench.log's uncapped one
        capped_bench "== nanogpt bench, capped: the same model and batch under --max_memory=2.68GiB" --max_memory=2.68GiB --steps=3 --warmup=1
    else
        row "2.68 GiB capped run" SKIP "no GPT-2 tokens: run with carry data/gpt2 (encoder.json, vocab.bpe); see capped.log"
    fi
    echo "capped: $(($(date +%s) - t0)) s"
    MEASURED=1
fi

# ---- recipe (not in the default run: 71 s on an H200, 2026-11-26, third run): nanoGPT's shakespeare_char GPU
# recipe, best val loss (nanoGPT: 1.4697) and wall time -------------------------------------------------------
if want recipe && [ $BUILT = 0 ] && time_left "shakespeare_char recipe" 90 recipe; then
    t0=$(date +%s)
    mkdir -p data/shakespeare_char
    [ -f data/shakespeare_char/input.txt ] || cp "${NGPT_SHARED_DATA:-../shared/data}/tinyshakespeare.txt" data/shakespeare_char/input.txt
    timeout $(cap_time 240) "$BUILD/nanogpt" train data/shakespeare_char/train.cfg --out_dir="$BUILD/out" >"$LOG/recipe.log" 2>&1
    rc=$?
    best=$(best_val_of "$LOG/recipe.log")
    if [ $rc = 0 ] && [ -n "$best" ] && awk "BEGIN{exit !($best <= 1.47)}"; then res=PASS; else res=FAIL; fi
    row "shakespeare_char recipe (<= 1.47)" $res "best val ${best:-none}, $(($(date +%s) - t0)) s, exit $rc"
fi
# ---- bench (issue 8): nanogpt bench and its PyTorch peer (tools/bench_torch_gpt2.py) in the same call:
# GPT-2 124M, block 1024, bf16, end to end and per kernel (every matmul shape of a step, attention) -----------
if want bench && [ $BUILT = 0 ] && time_left "benchmarks" 150 bench; then
    PY=${PYTHON:-python3}
    t0=$(date +%s)
    {
        # batch 12 x accumulation 1, as the PyTorch peer steps (until 2026-11-27 nanogpt ran nanoGPT's 12 x 40, one
        # AdamW step per 40 of the peer's: about 4% in nanogpt's favour by the fourth run's optimizer share)
        echo "== nanogpt bench"; timeout $(cap_time 120) "$BUILD/nanogpt" bench --device=cuda --steps=20 --warmup=3 --gradient_accumulation_steps=1
        if "$BUILD/nanogpt" info 2>&1 | grep -q "programmatic launches on"; then # right after the default pass, so drift falls least
            echo "== nanogpt bench, launches not programmatic"
            NGPT_PDL=0 timeout $(cap_time 120) "$BUILD/nanogpt" bench --device=cuda --steps=20 --warmup=3 --gradient_accumulation_steps=1
        fi
        # where the TMA kernel runs, and the feature is on (not turned off by features_off above)
        if "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma+tma"; then
            if [ -z "${NGPT_DBIAS:-}" ]; then # the TMA kernel sums the bias gradients from its tiles: GPT-2 with biases (llm.c's
                # and OpenAI's checkpoints have them; nanoGPT's default, the bench above, has none), both ways
                echo "== nanogpt bench, biases"
                timeout $(cap_time 120) "$BUILD/nanogpt" bench --device=cuda --steps=20 --warmup=3 --gradient_accumulation_steps=1 --bias=True
                echo "== nanogpt bench, biases, bias gradients separate"
                NGPT_DBIAS=separate timeout $(cap_time 120) "$BUILD/nanogpt" bench --device=cuda --steps=20 --warmup=3 --gradient_accumulation_steps=1 --bias=True
            fi
            if [ -z "${NGPT_STREAMK:-}" ]; then
                echo "== nanogpt bench, weight gradients by split-K's rule" # not in stream-K's pieces
                NGPT_STREAMK=0 timeout $(cap_time 120) "$BUILD/nanogpt" bench --device=cuda --steps=20 --warmup=3 --gradient_accumulation_steps=1
            fi
        fi
        # every --kernels pass at batch 12 x 1, the peer's shapes: with accumulation the planner may take a larger micro-batch
        echo "== nanogpt bench --kernels"; timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
    } >"$LOG/bench.log" 2>&1
    # the peer right after the default passes: the comparison the issue asks for comes first, before the variants
    # (which the budget may cut short), and in the GPU's state nearest the default's
    chunk=$(chunk_rows_of "$LOG/bench.log")
    {
        echo "== tools/bench_torch_gpt2.py"; timeout $(cap_time 300) "$PY" -u tools/bench_torch_gpt2.py --steps 20 --warmup 3 --grad_accum 1
        echo "== tools/bench_torch_gpt2.py --kernels"; timeout $(cap_time 120) "$PY" -u tools/bench_torch_gpt2.py --kernels --chunk "${chunk:-4096}"
        # nanoGPT's shakespeare_char model (data/shakespeare_char/train.cfg: 6 layers, 384 channels, block 256, batch 64,
        # dropout 0.2; 65 characters), most nanoGPT users' first GPU run, on random tokens on both sides; then nanogpt's
        # step without dropout (on Hopper the wgmma attention, which dropout keeps on mma.sync, and no dropout ops)
        echo "== nanogpt bench, shakespeare_char model"
        timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda data/shakespeare_char/train.cfg --vocab_size=65 --steps=50 --warmup=5
        echo "== tools/bench_torch_gpt2.py, shakespeare_char model"
        timeout $(cap_time 180) "$PY" -u tools/bench_torch_gpt2.py --steps 50 --warmup 5 $CHAR_MODEL_PEER
        echo "== nanogpt bench, shakespeare_char model without dropout"
        timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda data/shakespeare_char/train.cfg --vocab_size=65 --steps=50 --warmup=5 --dropout=0
    } >>"$LOG/bench.log" 2>&1
    {
        echo "== nanogpt bench --kernels, loss rows read twice"
        NGPT_LOSS_SMEM=0 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
        echo "== nanogpt bench, GELU ops of their own"
        NGPT_FUSE_GELU=0 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=1
        echo "== nanogpt bench, logits chunk 4096"
        timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=1 --logits_chunk=4096
        # nanoGPT's batch 12 with accumulation (4 here, 40 in its config): the planner's micro-batch above 12 against 12 pinned
        echo "== nanogpt bench, 12 x 4, the planner's micro-batch"
        timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=4
        echo "== nanogpt bench, 12 x 4, micro-batch 12"
        timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=4 --micro_batch=12
        if "$BUILD/nanogpt" info 2>&1 | grep -q "attention wgmma"; then # between default passes, so drift falls on both sides
            echo "== nanogpt bench --kernels, attention without turns"
            NGPT_ATTN_TURNS=0 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            if [ -z "${NGPT_ATTN_PERSISTENT:-}" ]; then
                echo "== nanogpt bench --kernels, attention a block an item"
                NGPT_ATTN_PERSISTENT=0 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            fi
        fi
        for s in $SAMPLE_COUNTS; do echo "== nanogpt bench --sample=$s"; timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda --sample=$s --steps=128; done
        for s in $SAMPLE_COUNTS; do # a whole block's prompt fed at once (its own process: the runs above load their kernels cold, as before)
            echo "== nanogpt bench --sample=$s --prompt=$PROMPT_LEN"
            timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda --sample=$s --prompt=$PROMPT_LEN --steps=1
        done
        for s in $SAMPLE_COUNTS; do # decoding's products as before gemv_tc_kernel: one warp an output, the tiled kernels past 8 rows
            echo "== nanogpt bench --sample=$s, NGPT_GEMV=simt"
            NGPT_GEMV=simt timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda --sample=$s --steps=128
        done
        for s in $SAMPLE_COUNTS; do # each new token's kernels launched one by one, not replayed as a recorded graph
            echo "== nanogpt bench --sample=$s, NGPT_GRAPHS=0"
            NGPT_GRAPHS=0 timeout $(cap_time 60) "$BUILD/nanogpt" bench --device=cuda --sample=$s --steps=128
        done
        if "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma"; then # Hopper: mma.sync beside it
            echo "== nanogpt bench --kernels, mma.sync"; NGPT_MATMUL=mma timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
        fi
        if "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma+tma"; then
            echo "== nanogpt bench --kernels, staged epilogue"; NGPT_EPILOGUE=staged timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            if [ -z "${NGPT_STREAMK:-}" ]; then
                echo "== nanogpt bench --kernels, split-K's rule"; NGPT_STREAMK=0 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            fi
            if [ "$PINGPONG_OK" = 1 ]; then
                echo "== nanogpt bench --kernels, ping-pong"; NGPT_PINGPONG=1 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
                echo "== nanogpt bench, ping-pong for the GELU products"
                NGPT_PINGPONG=gelu timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=1
                echo "== nanogpt bench, ping-pong"
                NGPT_PINGPONG=1 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=1
            fi
        fi
        # the comparisons settled by earlier runs (docs/performance.md), again only with GPU_SH_SETTLED=1: the staged
        # mma.sync epilogue, tiles 256 wide, tiles down the columns, at most 2 split-K slices,
        # the staged TMA epilogue end to end (about 70 s of device time the newer comparisons above get instead)
        if [ "${GPU_SH_SETTLED:-0}" = 1 ] && "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma"; then
            echo "== nanogpt bench --kernels, mma.sync, staged epilogue"
            NGPT_MATMUL=mma NGPT_EPILOGUE=staged timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
        fi
        if [ "${GPU_SH_SETTLED:-0}" = 1 ] && "$BUILD/nanogpt" info 2>&1 | grep -q "matmul wgmma+tma"; then
            echo "== nanogpt bench --kernels, tiles 256 wide"; NGPT_TILE_N=256 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            echo "== nanogpt bench --kernels, tiles down the columns"
            NGPT_TILE_ORDER=m timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            echo "== nanogpt bench --kernels, at most 2 split-K slices"
            NGPT_SPLITK_MAX=2 timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1
            echo "== nanogpt bench, staged epilogue"
            NGPT_EPILOGUE=staged timeout $(cap_time 90) "$BUILD/nanogpt" bench --device=cuda --steps=10 --warmup=2 --gradient_accumulation_steps=1
        fi
    } >>"$LOG/bench.log" 2>&1
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels$' >"$BUILD/k_ours"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, mma.sync$' >"$BUILD/k_mma"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, staged epilogue$' >"$BUILD/k_staged"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, mma.sync, staged epilogue$' >"$BUILD/k_mma_staged"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, tiles 256 wide$' >"$BUILD/k_wide"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, tiles down the columns$' >"$BUILD/k_columns"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, at most 2 split-K slices$' >"$BUILD/k_split2"
    ktimes "$LOG/bench.log" "^== nanogpt bench --kernels, split-K's rule\$" >"$BUILD/k_nostreamk"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, attention without turns$' >"$BUILD/k_noturns"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, attention a block an item$' >"$BUILD/k_blockitem"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, loss rows read twice$' >"$BUILD/k_loss2"
    ktimes "$LOG/bench.log" '^== nanogpt bench --kernels, ping-pong$' >"$BUILD/k_pingpong"
    ktimes "$LOG/bench.log" 'bench_torch_gpt2.py --kernels' >"$BUILD/k_torch"
    ours_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench" tokens_per_s)
    ours_mem=$(bench_value "$LOG/bench.log" "== nanogpt bench" memory_bytes)
    mfu=$(bench_value "$LOG/bench.log" "== nanogpt bench" mfu)
    torch_tok=$(bench_value "$LOG/bench.log" "== tools/bench_torch_gpt2.py" tokens_per_s)
    torch_mem=$(bench_value "$LOG/bench.log" "== tools/bench_torch_gpt2.py" memory_bytes)
    target() { # value threshold -> PASS or MISS (a speed target, not a correctness check: MISS does not fail the run)
        awk -v v="$1" -v t="$2" 'BEGIN{print (v != "" && v + 0 >= t) ? "PASS" : "MISS"}'
    }
    if [ -n "$ours_tok" ] && [ -n "$torch_tok" ]; then
        e2e=$(over "$ours_tok" "$torch_tok" %.2f)
        row "end to end vs PyTorch (>= 1.3x)" "$(target "$e2e" 1.3)" "${e2e}x: $ours_tok vs $torch_tok tokens/s, MFU $mfu, the host's share of a\
 step $(bench_value "$LOG/bench.log" "== nanogpt bench" host_share)"
        memr=$(over "$ours_mem" "$torch_mem" %.2f)
        row "memory vs PyTorch (<= 1.0x)" "$(awk -v v="$memr" 'BEGIN{print (v != "" && v + 0 <= 1.0) ? "PASS" : "MISS"}')" \
            "${memr}x: $((ours_mem / 1048576)) vs $((torch_mem / 1048576)) MiB in use"
    else
        row "end to end vs PyTorch" FAIL "no result (nanogpt: ${ours_tok:-none}, torch: ${torch_tok:-none}); see bench.log"
    fi
    s1=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=1" sample_tokens_per_s)
    s10=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=10" sample_tokens_per_s)
    row "sampling GPT-2 124M (KV cache)" "$([ -n "$s1" ] && [ -n "$s10" ] && echo PASS || echo FAIL)" \
        "${s1:-none} tokens/s with 1 sample, ${s10:-none} with 10 (128 new tokens each)"
    sampling_vs_switch() { # NAME SWITCH WORDS: the default's sampling tokens/s (s1, s10) over those with SWITCH, as a row
        local v1 v10 r1 r10
        v1=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=1, $2" sample_tokens_per_s)
        v10=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=10, $2" sample_tokens_per_s)
        r1=$(over "$s1" "$v1" %.2f)
        r10=$(over "$s10" "$v10" %.2f)
        row "$1 (>= 1.0)" "$(target "$r1" 1.0)" "1 sample ${r1:-none}x (${v1:-none} tokens/s $3), 10 samples ${r10:-none}x (${v10:-none})"
    }
    char_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, shakespeare_char model" tokens_per_s)
    char_peer=$(bench_value "$LOG/bench.log" "== tools/bench_torch_gpt2.py, shakespeare_char model" tokens_per_s)
    char_nodrop=$(bench_value "$LOG/bench.log" "== nanogpt bench, shakespeare_char model without dropout" tokens_per_s)
    cr=$(over "$char_tok" "$char_peer" %.2f)
    row "shakespeare_char model vs PyTorch (>= 1.0)" "$(target "$cr" 1.0)" "${cr:-none}x: ${char_tok:-none} vs ${char_peer:-none} tokens/s\
 (dropout 0.2; without it nanogpt's ${char_nodrop:-none}, $(over "$char_nodrop" "$char_tok" %.2f)x), the host's share of a step\
 $(bench_value "$LOG/bench.log" "== nanogpt bench, shakespeare_char model" host_share)"
    sampling_vs_switch "sampling: gemv on tensor cores vs NGPT_GEMV=simt" NGPT_GEMV=simt "with simt"
    sampling_vs_switch "sampling: a recorded graph a token vs NGPT_GRAPHS=0" NGPT_GRAPHS=0 without
    p1=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=1 --prompt=$PROMPT_LEN" prompt_tokens_per_s)
    p10=$(bench_value "$LOG/bench.log" "== nanogpt bench --sample=10 --prompt=$PROMPT_LEN" prompt_tokens_per_s)
    q1=$(over "$p1" "$s1" %.1f)
    q10=$(over "$p10" "$s10" %.1f)
    row "a $PROMPT_LEN-token prompt at once vs a token a step (>= 1.0)" "$(target "$q1" 1.0)" \
        "1 sample ${q1:-none}x (${p1:-none} prompt tokens/s), 10 samples ${q10:-none}x (${p10:-none})"
    mm=$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_torch")
    att=$(ratio '^attention' "$BUILD/k_ours" "$BUILD/k_torch")
    row "matmuls vs torch.matmul (>= 0.95)" "$(target "$mm" 0.95)" "${mm:-none}x, FLOP-weighted over every shape: forward\
 $(ratio '^matmul .* fwd' "$BUILD/k_ours" "$BUILD/k_torch")x, input gradients $(ratio '^matmul .* dinp' "$BUILD/k_ours" "$BUILD/k_torch")x,\
 weight gradients $(ratio '^matmul .* dweight' "$BUILD/k_ours" "$BUILD/k_torch")x"
    row "attention vs SDPA (>= 1.0)" "$(target "$att" 1.0)" "${att:-none}x, forward + backward"
    dec=$(ratio '^decode' "$BUILD/k_ours" "$BUILD/k_torch")
    row "decoding's products vs torch.matmul (>= 1.0)" "$(target "$dec" 1.0)" "${dec:-none}x, time-weighted: 1 row\
 $(ratio '^decode .* x1$' "$BUILD/k_ours" "$BUILD/k_torch")x, 10 rows $(ratio '^decode .* x10$' "$BUILD/k_ours" "$BUILD/k_torch")x (sampling's matmuls)"
    kva=$(ratio '^kv-cache attention' "$BUILD/k_ours" "$BUILD/k_torch")
    row "decoding's attention vs SDPA (>= 1.0)" "$(target "$kva" 1.0)" "${kva:-none}x, time-weighted: 1 sequence\
 $(ratio '^kv-cache attention x1$' "$BUILD/k_ours" "$BUILD/k_torch")x, 10 sequences $(ratio '^kv-cache attention x10$' "$BUILD/k_ours" "$BUILD/k_torch")x\
 (a new position against a cache of the whole block)"
    # each layer's weight gradient alone against it with its bias gradient (on the TMA kernel summed from the tiles the
    # product loads, elsewhere a reduction of its own after it): what the bias gradient costs
    bias_as_dweight "$BUILD/k_ours" >"$BUILD/k_dbias"
    bg=$(ratio '^matmul .* dweight$' "$BUILD/k_dbias" "$BUILD/k_ours")
    row "weight gradients with bias gradients vs alone (>= 0.95)" "$(target "$bg" 0.95)" "${bg:-none}x, FLOP-weighted over the four layers' products"
    lnloss=$(ratio '^(layernorm|classifier loss)' "$BUILD/k_ours" "$BUILD/k_torch")
    row "LayerNorm, loss vs torch (>= 1.0)" "$(target "$lnloss" 1.0)" "${lnloss:-none}x, time-weighted (F.layer_norm, F.cross_entropy)"
    if [ -s "$BUILD/k_mma" ]; then
        wg=$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_mma")
        row "default vs mma.sync matmuls" "$(target "$wg" 1.0)" "${wg:-none}x, FLOP-weighted over every shape"
        # NGPT_MATMUL=mma keeps attention on mma.sync too: the wgmma attention kernels against it
        fw=$(ratio '^attention fwd' "$BUILD/k_ours" "$BUILD/k_mma")
        bw=$(ratio '^attention bwd' "$BUILD/k_ours" "$BUILD/k_mma")
        row "wgmma vs mma.sync attention" "$(target "$(ratio '^attention' "$BUILD/k_ours" "$BUILD/k_mma")" 1.0)" \
            "forward ${fw:-none}x, backward ${bw:-none}x"
    fi
    if [ -s "$BUILD/k_mma_staged" ]; then # the same for the mma.sync kernel (sm_80-sm_89's), on this GPU
        mfw=$(ratio '^matmul .* fwd' "$BUILD/k_mma" "$BUILD/k_mma_staged")
        mbw=$(ratio '^matmul .* (dinp|dweight)' "$BUILD/k_mma" "$BUILD/k_mma_staged")
        row "direct vs staged mma.sync epilogue" "$(target "$(ratio '^matmul' "$BUILD/k_mma" "$BUILD/k_mma_staged")" 1.0)" \
            "forward products ${mfw:-none}x, backward ${mbw:-none}x, FLOP-weighted (plain products)"
    fi
    if [ -s "$BUILD/k_staged" ]; then # the TMA kernel's whole tiles from the accumulators, against all staged
        dfw=$(ratio '^matmul .* fwd' "$BUILD/k_ours" "$BUILD/k_staged")
        dbw=$(ratio '^matmul .* (dinp|dweight)' "$BUILD/k_ours" "$BUILD/k_staged")
        row "direct vs staged TMA epilogue" "$(target "$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_staged")" 1.0)" \
            "forward products ${dfw:-none}x, backward ${dbw:-none}x, FLOP-weighted (plain products)"
        staged_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, staged epilogue" tokens_per_s)
        [ -n "$staged_tok" ] && row "direct vs staged TMA epilogue, end to end" "$(target "$(over "$ours_tok" "$staged_tok" %.3f)" 1.0)" \
            "${ours_tok:-none} vs ${staged_tok:-none} tokens/s (op by op: bench.log's two profiled steps)"
    fi
    if [ -s "$BUILD/k_wide" ]; then # the TMA kernel's tile width chosen per product (192 for N = 768), against 256 everywhere
        nfw=$(ratio '^matmul (attn proj|mlp proj) fwd' "$BUILD/k_ours" "$BUILD/k_wide")
        row "chosen vs 256-wide TMA tiles" "$(target "$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_wide")" 1.0)" \
            "N = 768 forward products ${nfw:-none}x, all $(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_wide")x, FLOP-weighted (plain products)"
    fi
    if [ -s "$BUILD/k_columns" ]; then # the TMA kernel's tile order chosen per product (rows first where more rows), against down the columns
        row "chosen vs down-the-columns tile order" "$(target "$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_columns")" 1.0)" \
            "$(ratio '^matmul' "$BUILD/k_ours" "$BUILD/k_columns")x FLOP-weighted: forward $(ratio '^matmul .* fwd' "$BUILD/k_ours" "$BUILD/k_columns")x,\
 input gradients $(ratio '^matmul .* dinp' "$BUILD/k_ours" "$BUILD/k_columns")x, weight gradients\
 $(ratio '^matmul .* dweight' "$BUILD/k_ours" "$BUILD/k_columns")x; classifier dweight $(ratio '^matmul classifier chunk dweight' "$BUILD/k_ours" "$BUILD/k_columns")x"
    fi
    if [ -s "$BUILD/k_split2" ]; then # the split-K rule (up to 8 slices, filling the waves) against at most 2 (fewer slices' round trips)
        sk=""
        for p in qkv "attn proj" fc "mlp proj" "classifier chunk"; do
            sk="$sk, $p $(ratio "^matmul $p dinp" "$BUILD/k_ours" "$BUILD/k_split2")x / $(ratio "^matmul $p dweight" "$BUILD/k_ours" "$BUILD/k_split2")x"
        done
        row "split-K rule vs at most 2 slices" "$(target "$(ratio '^matmul .* (dinp|dweight)' "$BUILD/k_ours" "$BUILD/k_split2")" 1.0)" \
            "backward products $(ratio '^matmul .* (dinp|dweight)' "$BUILD/k_ours" "$BUILD/k_split2")x FLOP-weighted (input / weight gradient)${sk}"
    fi
    if [ -s "$BUILD/k_noturns" ]; then # the wgmma attention's warpgroups taking turns, against issuing as they come
        turns="" verdict=PASS
        for d in fwd bwd; do
            tv=$(variant_vs_default "attention $d" "without turns" "with" "$BUILD/k_noturns" "$BUILD/k_ours" "$BUILD/k_staged" "$BUILD/k_wide" "$BUILD/k_columns" "$BUILD/k_split2")
            [ "$(target "${tv%%x*}" 1.0)" = PASS ] || verdict=MISS
            turns="$turns, $d $tv"
        done
        row "attention turns vs none (each >= 1.0)" "$verdict" "${turns#, }"
    fi
    if [ -s "$BUILD/k_blockitem" ]; then # the wgmma forward, dK, dV and dQ kernels persistent (a block an SM), against a block an item
        pers="" verdict=PASS
        for d in fwd bwd; do
            tv=$(variant_vs_default "attention $d" "a block an item" "persistent" "$BUILD/k_blockitem" "$BUILD/k_ours" "$BUILD/k_staged" "$BUILD/k_wide" \
                "$BUILD/k_columns" "$BUILD/k_split2")
            [ "$(target "${tv%%x*}" 1.0)" = PASS ] || verdict=MISS
            pers="$pers, $d $tv"
        done
        row "attention persistent vs a block an item (each >= 1.0)" "$verdict" "${pers#, }"
    fi
    if [ -s "$BUILD/k_loss2" ]; then # the loss keeping each row of logits in shared memory between its passes, against reading it twice
        lv=$(variant_vs_default "classifier loss" "read twice" "kept" "$BUILD/k_loss2" "$BUILD/k_ours" "$BUILD/k_noturns" "$BUILD/k_staged" \
            "$BUILD/k_wide" "$BUILD/k_columns" "$BUILD/k_split2")
        row "loss row kept vs read twice (>= 1.0)" "$(target "${lv%%x*}" 1.0)" "$lv"
    fi
    if [ -s "$BUILD/k_pingpong" ]; then # the TMA kernel's warpgroups on tiles of their own, one's epilogue under the other's products
        row "ping-pong vs cooperative TMA kernel" "$(target "$(ratio '^matmul' "$BUILD/k_pingpong" "$BUILD/k_ours")" 1.0)" \
            "$(ratio '^matmul' "$BUILD/k_pingpong" "$BUILD/k_ours")x FLOP-weighted: plain products\
 $(ratio '^matmul .* (fwd|dinp|dweight)$' "$BUILD/k_pingpong" "$BUILD/k_ours")x (forward $(ratio '^matmul .* fwd$' "$BUILD/k_pingpong" "$BUILD/k_ours")x,\
 input gradients $(ratio '^matmul .* dinp$' "$BUILD/k_pingpong" "$BUILD/k_ours")x, weight gradients\
 $(ratio '^matmul .* dweight$' "$BUILD/k_pingpong" "$BUILD/k_ours")x); fc fwd gelu $(ratio '^matmul fc fwd gelu$' "$BUILD/k_pingpong" "$BUILD/k_ours")x,\
 mlp proj dinp gelu $(ratio '^matmul mlp proj dinp gelu$' "$BUILD/k_pingpong" "$BUILD/k_ours")x"
        ppg_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, ping-pong for the GELU products" tokens_per_s)
        ppa_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, ping-pong" tokens_per_s)
        ppg=$(over "$ppg_tok" "$ours_tok" %.3f)
        ppa=$(over "$ppa_tok" "$ours_tok" %.3f)
        row "ping-pong vs cooperative, end to end" "$(target "$(printf '%s\n%s\n' "${ppg:-0}" "${ppa:-0}" | sort -g | tail -n 1)" 1.0)" \
            "GELU products on it (NGPT_PINGPONG=gelu) ${ppg:-none}x: ${ppg_tok:-none} tokens/s, every product (=1) ${ppa:-none}x: ${ppa_tok:-none}, against ${ours_tok:-none}"
    fi
    # GELU fused into its products as the step runs them (fc's forward also writes GELU of its output, the MLP
    # projection's input gradient is multiplied by GELU's derivative), against the same product plain followed by
    # the GELU op of its own (NGPT_FUSE_GELU=0's step), in the same pass: PASS where fusing is the faster way
    gf="" pl="" fu="" op="" verdict=PASS
    for pp in "fc fwd:gelu fwd" "mlp proj dinp:gelu bwd"; do
        pl=$(awk -F'\t' -v n="matmul ${pp%%:*}" '$1 == n {print $2}' "$BUILD/k_ours")
        fu=$(awk -F'\t' -v n="matmul ${pp%%:*} gelu" '$1 == n {print $2}' "$BUILD/k_ours")
        op=$(awk -F'\t' -v n="${pp#*:}" '$1 == n {print $2}' "$BUILD/k_ours")
        [ -n "$pl" ] && [ -n "$fu" ] && [ -n "$op" ] || break
        [ "$(target "$(awk -v a="$fu" -v b="$pl" -v c="$op" 'BEGIN{printf "%.3f", (b + c) / a}')" 1.0)" = PASS ] || verdict=MISS
        gf="$gf, ${pp%%:*} $fu ms fused vs $pl plain + $op ${pp#*:} ($(awk -v a="$fu" -v b="$pl" -v c="$op" 'BEGIN{printf "%.2fx", (b + c) / a}'))"
    done
    if [ -n "$pl" ] && [ -n "$fu" ] && [ -n "$op" ]; then row "GELU fused vs its own op (>= 1.0)" "$verdict" "${gf#, }"
    else row "GELU fused vs its own op" FAIL "no fused or GELU rows in bench --kernels; see bench.log"; fi
    nofuse_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, GELU ops of their own" tokens_per_s)
    row "GELU fused vs its own op, end to end" "$(target "$(over "$ours_tok" "$nofuse_tok" %.3f)" 1.0)" \
        "${ours_tok:-none} vs ${nofuse_tok:-none} tokens/s (NGPT_FUSE_GELU=0; op by op: bench.log's two profiled steps)"
    # kernels launched as programmatic dependents (each one's blocks placed while the one before drains, then waiting
    # for it) against plain launches (NGPT_PDL=0), end to end: what a step's ~430 launch gaps cost
    nopdl_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, launches not programmatic" tokens_per_s)
    if [ -n "$nopdl_tok" ]; then
        row "programmatic launches vs plain, end to end" "$(target "$(over "$ours_tok" "$nopdl_tok" %.3f)" 1.0)" \
            "${ours_tok:-none} vs ${nopdl_tok} tokens/s (NGPT_PDL=0) ($(over "$ours_tok" "$nopdl_tok" %.3fx))"
    fi
    # the weight gradients' TMA kernel summing the bias gradients from its own tiles against bias_backward reading dout
    # again (NGPT_DBIAS=separate), end to end, GPT-2 with biases (--bias=True) both ways
    bias_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, biases" tokens_per_s)
    sepdb_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, biases, bias gradients separate" tokens_per_s)
    if [ -n "$sepdb_tok" ]; then
        row "bias gradients fused vs separate, end to end" "$(target "$(over "$bias_tok" "$sepdb_tok" %.3f)" 1.0)" \
            "${bias_tok:-none} vs ${sepdb_tok} tokens/s, both with biases (--bias=True; NGPT_DBIAS=separate)\
 ($(over "$bias_tok" "$sepdb_tok" %.3fx); without biases ${ours_tok:-none})"
    fi
    # the weight gradients of fewer tiles than SMs in stream-K's pieces (TmStreamK) against split-K's rule
    # (NGPT_STREAMK=0): GPT-2 124M's qkv, fc and MLP projection, with and without their bias gradients, and end to end
    nosk_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, weight gradients by split-K's rule" tokens_per_s)
    if [ -n "$nosk_tok" ]; then
        row "stream-K vs split-K's rule, end to end" "$(target "$(over "$ours_tok" "$nosk_tok" %.3f)" 1.0)" \
            "${ours_tok:-none} vs ${nosk_tok} tokens/s (NGPT_STREAMK=0) ($(over "$ours_tok" "$nosk_tok" %.3fx))"
    fi
    if [ -s "$BUILD/k_nostreamk" ]; then
        sk=$(ratio '^matmul (qkv|fc|mlp proj) (dbias.)?dweight$' "$BUILD/k_ours" "$BUILD/k_nostreamk")
        row "weight gradients stream-K vs split-K's rule" "$(target "$sk" 1.0)" \
            "${sk:-none}x, FLOP-weighted over qkv's, fc's and the MLP projection's (alone and with the bias gradient): qkv\
 $(ratio '^matmul qkv dweight$' "$BUILD/k_ours" "$BUILD/k_nostreamk")x, fc $(ratio '^matmul fc dweight$' "$BUILD/k_ours" "$BUILD/k_nostreamk")x,\
 MLP projection $(ratio '^matmul mlp proj dweight$' "$BUILD/k_ours" "$BUILD/k_nostreamk")x"
    fi
    # the classifier in chunks of 4096 rows (three a step at batch 12) against the planner's 2048 (six): each chunk
    # reads and writes the whole weight gradient, and the speed model charges a chunk 370 rows' time
    chunk_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, logits chunk 4096" tokens_per_s)
    row "logits chunk 4096 vs 2048, end to end" "$(target "$(over "$chunk_tok" "$ours_tok" %.3f)" 1.0)" \
        "${chunk_tok:-none} vs ${ours_tok:-none} tokens/s ($(over "$chunk_tok" "$ours_tok" %.3fx))"
    # the planner's micro-batch above batch_size (plan_grow_micro_batch) against batch_size's, at nanoGPT's 12 with accumulation
    grown_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, 12 x 4, the planner's micro-batch" tokens_per_s)
    asked_tok=$(bench_value "$LOG/bench.log" "== nanogpt bench, 12 x 4, micro-batch 12" tokens_per_s)
    grown_plan=$(section "$LOG/bench.log" "== nanogpt bench, 12 x 4, the planner's micro-batch" | grep -o 'micro-batch [0-9]* x accumulation [0-9]*' | head -n 1)
    row "12 x 4: planner's micro-batch vs 12" "$(target "$(over "$grown_tok" "$asked_tok" %.3f)" 1.0)" \
        "${grown_tok:-none} (${grown_plan:-plan not found}) vs ${asked_tok:-none} tokens/s ($(over "$grown_tok" "$asked_tok" %.3fx))"
    echo "bench: $(($(date +%s) - t0)) s"
    MEASURED=1
fi

# ---- profile (not in the default run; bash test/gpu.sh profile, about a minute): Nsight Compute on the first
# launch of the default matmul kernel, the attention forward, both attention backward kernels, the
# LayerNorm backward and its reduction of the blocks' dw, db sums, split-K's reduction, the loss (its first
# launch keeps the row in shared memory) and the TMA matmul with GELU and with its derivative fused in
# `nanogpt bench --kernels` (the qkv forward product; fc's forward, the MLP projection's input gradient; attention
# and LayerNorm at GPT-2's shapes; the slices of the first product that splits): speed of light, warp stall
# reasons (an instruction-cache bound kernel stalls on "no instruction"), memory and instruction statistics.
# Appended to bench.log -------------------------------------------------------------------------------------
if want profile && [ $BUILT = 0 ] && time_left "ncu profile" 60 profile; then
    NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    if [ -z "$NCU" ]; then
        row "ncu profile" SKIP "ncu not found"
    else
        t0=$(date +%s)
        okp=0
        # the last two: the TMA kernel's builds with GELU (template argument EK = EPI_GELU, 1) and its derivative
        # (EPI_DGELU, 2) fused, matched on the demangled name (fc's forward and the MLP projection's input gradient)
        kernels=("regex:matmul_(tma|tc)_kernel" "regex:attn_forward_(wgmma|tc)" "regex:attn_backward_dkdv" "regex:attn_backward_dq"
            "regex:layernorm_backward_kernel" "regex:layernorm_reduce_kernel" "regex:splitk_reduce_kernel" "regex:crossentropy_kernel"
            "demangled:regex:matmul_tma_kernel<[^,]*, [^,]*, [^,]*, (\(int\))?1, " "demangled:regex:matmul_tma_kernel<[^,]*, [^,]*, [^,]*, (\(int\))?2, ")
        for k in "${kernels[@]}"; do
            echo "== ncu $k" >>"$LOG/bench.log"
            rm -f "$BUILD/ncu.ncu-rep"
            base=()
            [ "${k#demangled:}" != "$k" ] && base=(--kernel-name-base demangled)
            timeout $(cap_time 150) "$NCU" --clock-control none "${base[@]}" --kernel-name "${k#demangled:}" --launch-count 1 --section SpeedOfLight \
                --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats \
                --section SchedulerStats --section SourceCounters --import-source no --export "$BUILD/ncu" --force-overwrite \
                "$BUILD/nanogpt" bench --device=cuda --kernels --gradient_accumulation_steps=1 >"$BUILD/ncu.out" 2>&1
            [ -f "$BUILD/ncu.ncu-rep" ] && timeout $(cap_time 60) "$NCU" --import "$BUILD/ncu.ncu-rep" --page details >>"$BUILD/ncu.out" 2>&1
            cat "$BUILD/ncu.out" >>"$LOG/bench.log"
            grep -q "Speed Of Light" "$BUILD/ncu.out" && okp=$((okp + 1)) # ncu exits 0 also when nothing matched
            # where the warps wait, instruction by instruction (SASS with its stall samples), for reading offline
            if [ -f "$BUILD/ncu.ncu-rep" ]; then
                echo "== ncu source $k (SASS, per instruction, csv)" >>"$LOG/bench.log"
                timeout $(cap_time 60) "$NCU" --import "$BUILD/ncu.ncu-rep" --page source --print-source sass --csv >>"$LOG/bench.log" 2>&1 ||
                    echo "(ncu could not print the source page)" >>"$LOG/bench.log"
            fi
        done
        row "ncu profile" "$([ $okp = ${#kernels[@]} ] && echo PASS || echo FAIL)" "$okp of ${#kernels[@]} kernels profiled into bench.log; $(($(date +%s) - t0)) s"
    fi
fi

# ---- sanitize (last: the slowest per check): compute-sanitizer on the small op tests. memcheck and
# synccheck take seconds; racecheck a dtype at a time, f32 last: its SIMT matmuls take about 6 s a case under
# racecheck (H200, 2026-11-26). bf16 runs every kernel and variant (324 cases: about 135 s under racecheck on
# an H200, 2026-11-28, where the 120 s cap then cut it off at case 297); f16 runs its default kernels alone
# (--default-kernels: the same templates as bf16's, 83 cases). Each run at most GPU_SH_SANITIZE_S seconds
# (default 200), f32 racecheck GPU_SH_RACECHECK_F32_S (default 150; it took 65-86 s) -------------------------
if want sanitize && [ $BUILT = 0 ]; then
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    : >"$LOG/sanitize.log"
    this_run() { awk -v h="===== $run" '$0 == h {on = 1; next} /^===== / {on = 0} on' "$LOG/sanitize.log"; } # $run's lines
    for run in memcheck synccheck racecheck:bf16 racecheck:f16 racecheck:f32; do
        tool=${run%%:*}
        dtype=()
        name="compute-sanitizer $tool"
        [ "$run" != "$tool" ] && dtype=(--dtype "${run#*:}") && name="$name ${run#*:}"
        limit=${GPU_SH_SANITIZE_S:-200}
        [ "$run" = racecheck:f32 ] && limit=${GPU_SH_RACECHECK_F32_S:-150}
        need=30
        [ "$run" = racecheck:f32 ] && need=$limit # it needs its whole time: SKIP rather than time out
        time_left "$name" "$need" sanitize || continue
        if [ -z "$CS" ]; then row "$name" SKIP "compute-sanitizer not found"; continue; fi
        extra=()
        [ $tool = memcheck ] && extra=(--leak-check full)
        kernels=()
        [ "$run" = racecheck:f16 ] && kernels=(--default-kernels) && name="$name (default kernels)"
        t0=$(date +%s)
        echo "===== $run" >>"$LOG/sanitize.log"
        timeout $(cap_time "$limit") "$CS" --tool $tool "${extra[@]}" --error-exitcode 99 \
            "$BUILD/test_gpu_ops" --small --skip-alloc-check "${dtype[@]}" "${kernels[@]}" "${without[@]}" >>"$LOG/sanitize.log" 2>&1
        rc=$?
        summ=$(this_run | grep -E '(ERROR|RACECHECK) SUMMARY' | tail -n 1 | sed 's/^=* *//')
        tests=$(this_run | grep '^summary:' | tail -n 1 | sed 's/^summary: //')
        if grep -q 'Device not supported' "$LOG/sanitize.log"; then
            row "$name" SKIP "device not supported by compute-sanitizer here"
        elif [ $rc = 0 ]; then
            row "$name" PASS "${summ:-clean}; op tests ${tests:-?}; $(($(date +%s) - t0)) s"
        else
            why="exit $rc"
            [ $rc = 99 ] && why="sanitizer errors"
            [ $rc = 1 ] && why="op tests failed under the sanitizer"
            [ $rc = 124 ] && why="timed out after $(($(date +%s) - t0)) s ($(this_run | grep -c '^ok ') op tests passed before)"
            row "$name" FAIL "$why; ${summ:-see sanitize.log}"
        fi
    done
fi

# ---- predictions: each one test/gpu_predictions.tsv holds, against what this call's bench and capped steps
# measured, under the table (a missed prediction is not a failed check) ---------------------------------------
: >"$BUILD/predictions"
if [ -n "$MEASURED" ]; then
    score_predictions test/gpu_predictions.tsv "$BUILD" "$LOG/bench.log" "$LOG/capped.log" "${GPU:-}" >"$BUILD/predictions" 2>/dev/null
fi

# ---- the table -------------------------------------------------------------------------------------------
{
    echo
    echo "nanogpt GPU checks: ${GPU:-unknown GPU}, $(elapsed) s"
    printf '%-34s | %-5s | %s\n' check result numbers
    printf '%s\n' "-----------------------------------+-------+------------------------------------------"
    for r in "${ROWS[@]}"; do echo "$r"; done
    [ $FAILED = 0 ] && echo "gpu checks: PASS" || echo "gpu checks: FAIL"
    if [ -s "$BUILD/predictions" ]; then
        echo
        echo "predictions (test/gpu_predictions.tsv; $(cut -f1 "$BUILD/predictions" | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s = ", "}')):"
        awk -F'\t' '{printf "%-6s %-12s in %-12s s%-3s %s\n", $1, $2, $3, $4, $5}' "$BUILD/predictions"
        if cut -f1 "$BUILD/predictions" | grep -q '[*]'; then
            echo "* a time or rate predicted for an $(predictions_made_for test/gpu_predictions.tsv), not this ${GPU:-GPU}: only the ratios compare"
        fi
    fi
} | tee "$LOG/summary.txt" # the rows appended as they came are replaced by the whole table
exit $FAILED
