#!/usr/bin/env bash
# tools/bench_cpu_recipe.sh - nanoGPT's CPU recipe for shakespeare_char, nanogpt and PyTorch side by side
# in one run on this machine: best val loss and wall time of each, and the ratio.
#
#   tools/bench_cpu_recipe.sh [max_iters]      (default 2000, the recipe; KEEP_LOGS=dir keeps the logs;
#                                               ROUNDS=2 runs each program twice, in ABBA order)
#
# Needs Debian's python3-torch (apt-get install -y python3-torch libopenblas0-pthread) on /usr/bin/python3,
# and Tiny Shakespeare at $NGPT_SHARED_DATA/tinyshakespeare.txt (default ../shared/data). Both runs use every
# core; run it on an otherwise idle machine (it prints the load average before and after).
set -eu
cd "$(dirname "$0")/.."
ITERS=${1:-2000}
PY=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ngpt-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
[ -x ./nanogpt ] || ./build.sh cpu >/dev/null
./nanogpt prepare --input="${NGPT_SHARED_DATA:-../shared/data}/tinyshakespeare.txt" --out="$WORK/data" >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nanogpt $(git describe --always --dirty 2>/dev/null || echo '?'); $("$PY" -c 'import torch; print("torch", torch.__version__)')"

# one run of each program: wall seconds into ng_wall / pt_wall (added up over rounds), logs kept per round
ng_wall=0 pt_wall=0
run_nanogpt() {
    local t0 t1
    t0=$(date +%s.%N)
    ./nanogpt train data/shakespeare_char/train_cpu.cfg --device=cpu --data_dir="$WORK/data" --out_dir="$WORK/out$1" \
        --max_iters="$ITERS" --lr_decay_iters="$ITERS" >"$WORK/nanogpt$1.log" 2>&1
    t1=$(date +%s.%N)
    ng_wall=$(awk "BEGIN{print $ng_wall + $t1 - $t0}")
    echo "round $1 nanogpt: $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
}
run_torch() {
    local t0 t1
    t0=$(date +%s.%N)
    "$PY" tools/torch_train.py --data_dir "$WORK/data" --max_iters "$ITERS" --lr_decay_iters "$ITERS" >"$WORK/torch$1.log" 2>&1
    t1=$(date +%s.%N)
    pt_wall=$(awk "BEGIN{print $pt_wall + $t1 - $t0}")
    echo "round $1 pytorch: $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
}
# ROUNDS=2 runs nanogpt, PyTorch, PyTorch, nanogpt (ABBA), so a host that slows down or speeds up during the
# run weighs on both programs alike; the walls below are then the sums over the rounds
ROUNDS=${ROUNDS:-1}
case "$ROUNDS" in 1) run_nanogpt 1; run_torch 1 ;; 2) run_nanogpt 1; run_torch 1; run_torch 2; run_nanogpt 2 ;;
    *) echo "ROUNDS is 1 or 2" >&2; exit 2 ;; esac

ng_best=$(sed -n 's/.*best val loss \([0-9.]*\).*/\1/p' "$WORK/nanogpt1.log" | tail -1)
pt_best=$(sed -n 's/^best_val_loss \([0-9.]*\)/\1/p' "$WORK/torch1.log" | tail -1)
ng_ms=$(sed -n 's/.*, \([0-9.]*\)ms, .*/\1/p' "$WORK/nanogpt1.log" | tail -20 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
pt_ms=$(sed -n 's/^ms_per_iter \([0-9.]*\)/\1/p' "$WORK/torch1.log" | tail -1)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -h '^cpu threads' "$WORK"/nanogpt*.log || true  # the thread tuner's switches, if any
if [ -n "${KEEP_LOGS:-}" ]; then mkdir -p "$KEEP_LOGS" && cp "$WORK"/nanogpt*.log "$WORK"/torch*.log "$KEEP_LOGS/"; fi
printf '%-10s | %-13s | %-10s | %s\n' "" "best val loss" "wall (s)" "ms/iter"
printf '%-10s | %-13s | %-10.1f | %s (median of the last logged)\n' nanogpt "$ng_best" "$ng_wall" "$ng_ms"
printf '%-10s | %-13s | %-10.1f | %s (train only)\n' pytorch "$pt_best" "$pt_wall" "$pt_ms"
printf 'nanogpt is %.2fx faster (wall clock, whole run including evaluations%s)\n' "$(awk "BEGIN{print $pt_wall / $ng_wall}")" \
    "$([ "$ROUNDS" = 2 ] && echo ', summed over 2 rounds in ABBA order')"
