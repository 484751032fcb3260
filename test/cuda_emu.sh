#!/usr/bin/env bash
# test/cuda_emu.sh - nanogpt.cu's kernels on the CPU, on the CUDA emulator of test/cuda_emu.h: test_gpu_ops
# --small against the CPU backend on an emulated sm_80 (f32, bf16, f16: mma.sync m16n8k16, cp.async), sm_75
# (f16: m16n8k8, plain loads) and sm_90 (the wgmma kernels: the TMA matmul and the attention kernels with
# their mbarriers, warp specialisation and setmaxnreg, and the cp.async matmul), test_gpu_train --quick on
# the sm_80 and sm_90 (whole steps, determinism, no allocation, resume, KV-cache sampling), the nanogpt
# program on all three (train, resume, sample, plan, bench), then the mutants of nanogpt.cu listed below
# (MUTANTS), which it must catch. No GPU needed; ./build.sh test runs it. Needs nvcc's headers (not nvcc
# itself: the host C++ compiler builds the rewritten nanogpt.cu) and perl. Ends with "summary: N passed, N
# failed" (each program's counts, and one per mutant).
#
#   bash test/cuda_emu.sh                   all of it
#   EMU_CCS=80 bash test/cuda_emu.sh        one emulated GPU, no mutants (EMU_MUTANTS=0 alone skips those)
#   EMU_CCS=86 bash test/cuda_emu.sh        sm_80's path with an RTX 3090's 99 KB of shared memory a block and
#                                           82 SMs (also 89; not in the default run, which has 75, 80 and 90)
#   EMU_SRC=other.cu bash test/cuda_emu.sh  another source than nanogpt.cu
#   EMU_CCS=90 EMU_MUTANTS=1 EMU_MUTANTS_MATCH=attention bash test/cuda_emu.sh   the mutants whose names match
#   EMU_JOBS=4 bash test/cuda_emu.sh        four programs or mutants at a time (default: the cores, at most 8;
#                                           a mutant's build takes about 0.4 GB)
#
# The rewrite (perl, below): every launch `kernel<<<grid, block[, smem[, stream]]>>>(args)` becomes
# `emu::launch("kernel", emu::kernel_address(kernel), [=]() { kernel(args); }, grid, block[, smem[, stream]])`
# (the launch helper's, cu_launch_, named by its argument; its cudaLaunchKernelEx becomes emu::launch_ex),
# each `extern __shared__ T name[];` a pointer to the block's dynamic shared memory, and the bodies of the
# functions written in inline PTX (cp.async, ldmatrix, mma.sync, mbarriers, the copy engine, wgmma) and the
# single PTX statements (fences, wgmma groups, setmaxnreg) calls of their emulations; the sm_90a guard
# becomes EMU_CC == 90. A function or statement it expects and does not find, or inline PTX it does not
# know, stops it with a message: nanogpt.cu changed, and this list must follow (so must a mutant's text).
set -u
cd "$(dirname "$0")/.." || exit 1
CXX=${CXX:-c++}
CC=${CC:-cc}
EMU_CCS=${EMU_CCS:-"80 75 90"}
EMU_SRC=${EMU_SRC:-nanogpt.cu}
EMU_MUTANTS=${EMU_MUTANTS:-$([ "$EMU_CCS" = "80 75 90" ] && echo 1 || echo 0)}

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ] && ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "nvcc not found: skipping the CUDA emulator run (it needs the CUDA headers)"
    echo "summary: 0 passed, 0 failed"
    exit 0
fi
# Where nvcc's own headers are: asked of nvcc (its --dryrun prints the include folders it passes on), so a
# symlinked or wrapped nvcc works too; then the folder beside the resolved nvcc, then the usual install.
cuda_include_dirs() {
    "$nvcc" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ \(SYSTEM_\)\{0,1\}INCLUDES=//p' |
        grep -o '"[^"]*"' | tr -d '"' | sed -n 's/^-I//; /^-isystem$/d; p'
    echo "$(dirname "$(dirname "$(readlink -f "$(command -v "$nvcc")")")")/include"
    echo "${CUDA_HOME:-/usr/local/cuda}/include"
}
CUDA_INC_FLAGS=""
for d in $(cuda_include_dirs); do
    [ -d "$d" ] && CUDA_INC_FLAGS="$CUDA_INC_FLAGS -isystem $d"
done
if ! printf '#include <cuda.h>\n#include <cuda_runtime.h>\n' | $CXX -std=c++17 $CUDA_INC_FLAGS -E -x c++ - >/dev/null 2>&1; then
    echo "FAIL cuda emulator: $nvcc compiles, but $CXX finds no cuda.h and cuda_runtime.h in the folders nvcc names"
    echo "     (looked in:" $(cuda_include_dirs) ")"
    echo "summary: 0 passed, 1 failed"
    exit 1
fi
echo "CUDA headers: $nvcc's include folders:$CUDA_INC_FLAGS"
OUT=${EMU_OUT:-build/emu}
mkdir -p "$OUT"

# SOURCE OUT.cpp: nanogpt.cu rewritten for the host compiler
rewrite() {
    perl -0777 -e '
    my $src = do { local $/; <STDIN> };
    my %body = (   # function header (a regex, up to its opening brace) => the emulated body
        q{static __device__ __forceinline__ void cp_async16\(void \*smem, const void \*gmem\)} => q{emu::cp_async16(smem, gmem);},
        q{static __device__ __forceinline__ void cp_async_commit\(\)} => q{emu::cp_async_commit();},
        q{template <int N> static __device__ __forceinline__ void cp_async_wait\(\)} => q{emu::cp_async_wait(N);},
        q{static __device__ __forceinline__ void ldsm_x4\(uint32_t \(&r\)\[4\], const void \*p\)} => q{emu::ldmatrix_x4(r, p, false);},
        q{static __device__ __forceinline__ void ldsm_x4_t\(uint32_t \(&r\)\[4\], const void \*p\)} => q{emu::ldmatrix_x4(r, p, true);},
        q{__device__ __forceinline__ void mma16816<__nv_bfloat16>\(float \(&d\)\[4\], const uint32_t \(&a\)\[4\], uint32_t b0, uint32_t b1\)} =>
            q{emu::mma16816_bf16(d, a, b0, b1);},
        q{__device__ __forceinline__ void mma16816<__half>\(float \(&d\)\[4\], const uint32_t \(&a\)\[4\], uint32_t b0, uint32_t b1\)} =>
            q{emu::mma16816_f16(d, a, b0, b1);},
        q{static __device__ __forceinline__ void prefetch_l2\(const void \*p\)} => q{emu::prefetch_l2(p);},
        q{static __device__ __forceinline__ void grid_dependency_wait\(\)} => q{emu::grid_dependency_wait();},
        q{static __device__ __forceinline__ void grid_dependents_launch\(\)} => q{emu::grid_dependents_launch();},
        q{static __device__ __forceinline__ void flag_set\(int \*flag\)} => q{emu::flag_set(flag);},
        q{static __device__ __forceinline__ void flag_wait_clear\(int \*flag\)} => q{emu::flag_wait_clear(flag);},
        # sm_90a: mbarriers, the copy engine, wgmma
        q{static __device__ __forceinline__ void mbar_init\(uint64_t \*bar, unsigned count\)} => q{emu::mbar_init(bar, count);},
        q{static __device__ __forceinline__ void mbar_expect_bytes\(uint64_t \*bar, unsigned bytes\)} => q{emu::mbar_expect_bytes(bar, bytes);},
        q{static __device__ __forceinline__ void mbar_arrive\(uint64_t \*bar\)} => q{emu::mbar_arrive(bar);},
        q{static __device__ __forceinline__ void mbar_wait\(uint64_t \*bar, unsigned parity\)} => q{emu::mbar_wait(bar, parity);},
        q{static __device__ __forceinline__ void named_bar_sync\(int id, int threads\)} => q{emu::named_barrier(id, threads, true);},
        q{static __device__ __forceinline__ void named_bar_arrive\(int id, int threads\)} => q{emu::named_barrier(id, threads, false);},
        q{static __device__ __forceinline__ void tma_load\(void \*dst, const CUtensorMap \*map, int c0, int c1, uint64_t \*bar\)} =>
            q{emu::tma_load(dst, map, c0, c1, bar);},
        q{static __device__ __forceinline__ void tma_store\(const CUtensorMap \*map, int c0, int c1, const void \*src\)} =>
            q{emu::tma_store(map, c0, c1, src);},
        q{static __device__ __forceinline__ void bulk_commit\(\)} => q{emu::bulk_commit();},
        q{template <int N> static __device__ __forceinline__ void bulk_wait_read\(\)} => q{emu::bulk_wait(N);},
        q{static __device__ __forceinline__ void bulk_wait_written\(\)} => q{emu::bulk_wait(0);},
        q{template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n128k16\(float \(&d\)\[64\], uint64_t da, uint64_t db\)} =>
            q{emu::wgmma<T, TA, TB>(d, da, db);},
        q{template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n256k16\(float \(&d\)\[128\], uint64_t da, uint64_t db\)} =>
            q{emu::wgmma<T, TA, TB>(d, da, db);},
        q{template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n192k16\(float \(&d\)\[96\], uint64_t da, uint64_t db\)} =>
            q{emu::wgmma<T, TA, TB>(d, da, db);},
        q{template <typename T, int TA, int TB> static __device__ __forceinline__ void wgmma_m64n64k16\(float \(&d\)\[32\], uint64_t da, uint64_t db\)} =>
            q{emu::wgmma<T, TA, TB>(d, da, db);},
        q{template <typename T, int TB> static __device__ __forceinline__ void wgmma_m64n64k16_rs\(float \(&d\)\[32\], const uint32_t \(&a\)\[4\], uint64_t db\)} =>
            q{emu::wgmma_rs<T, TB>(d, a, db);},
    );
    # single inline-PTX statements => their emulations (each form must occur)
    my @stmts = (
        [q{asm volatile\("fence\.proxy\.async\.shared::cta;\\\\n" ::: "memory"\);}, sub { "emu::fence_proxy_async();" }],
        [q{asm volatile\("fence\.mbarrier_init\.release\.cluster;\\\\n" ::: "memory"\);}, sub { "emu::fence_mbarrier_init();" }],
        [q{asm volatile\("wgmma\.fence\.sync\.aligned;\\\\n" ::: "memory"\);}, sub { "emu::wgmma_fence();" }],
        [q{asm volatile\("wgmma\.commit_group\.sync\.aligned;\\\\n" ::: "memory"\);}, sub { "emu::wgmma_commit();" }],
        [q{asm volatile\("wgmma\.wait_group\.sync\.aligned (\d+);\\\\n" ::: "memory"\);}, sub { "emu::wgmma_wait($_[0]);" }],
        [q{asm volatile\("setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 %0;\\\\n" ::"n"\((\w+)\)\);},
            sub { "emu::setmaxnreg(" . ($_[0] eq "inc" ? 1 : 0) . ", $_[1]);" }],
        [q{asm volatile\("" : "\+[fr]"\([^()]*\)(?:,\s*"\+[fr]"\([^()]*\))*\s*::\s*"memory"\);}, sub { "(void)0; /* (a compiler barrier on the GPU) */" }],
    );
    # the wgmma wrappers share one macro of inline PTX; their bodies become emulations below, so it goes
    my $wg = ($src =~ s/^#define WG_MMA_ASYNC\(.*?\} while \(0\)\n//ms);
    die "cuda_emu.sh: nanogpt.cu has no macro WG_MMA_ASYNC to take out: update test/cuda_emu.sh\n" if $wg != 1;
    for my $st (@stmts) {
        my ($re, $to) = @$st;
        my $n = ($src =~ s/$re/$to->($1, $2)/ge);
        die "cuda_emu.sh: nanogpt.cu has no inline PTX matching /$re/: update test/cuda_emu.sh\n" if !$n;
    }
    my $arch = ($src =~ s/^#if defined\(__CUDA_ARCH__\) && defined\(__CUDA_ARCH_FEAT_SM90_ALL\)$/#if EMU_CC == 90/mg);
    die "cuda_emu.sh: nanogpt.cu has no sm_90a guard (#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)) to rewrite\n" if $arch != 1;
    my $sm75 = ($src =~ s/^#if defined\(__CUDA_ARCH__\) && __CUDA_ARCH__ < 800$/#if EMU_CC < 80/mg); # the matmul staged through registers
    die "cuda_emu.sh: nanogpt.cu has $sm75 guards #if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800 to rewrite (1 expected)\n" if $sm75 != 1;
    for my $h (sort keys %body) {
        my $n = ($src =~ s/^((?:template <>\s*)?$h \{)\n.*?^\}\n/$1 $body{$h} }\n/msg);
        die "cuda_emu.sh: nanogpt.cu has no function matching /$h/ ($n found): update test/cuda_emu.sh\n" if $n != 1;
    }
    # the launch helper (cu_launch_): both of its launches, named by its argument
    for my $l ([q{kernel<<<grid, block, smem, im->stream>>>(args...)},
                q{emu::launch(what, emu::kernel_address(kernel), [=]() { kernel(args...); }, grid, block, smem, im->stream)}],
               [q{cudaLaunchKernelEx(&cfg, kernel, args...)}, q{emu::launch_ex(what, &cfg, kernel, args...)}]) {
        my $n = ($src =~ s/\Q$l->[0]\E/$l->[1]/g);
        die "cuda_emu.sh: nanogpt.cu has $n of `$l->[0]` (the launch helper: 1 expected): update test/cuda_emu.sh\n" if $n != 1;
    }
    die "cuda_emu.sh: nanogpt.cu launches through cudaLaunchKernelEx outside its launch helper: update test/cuda_emu.sh\n"
        if $src =~ /\bcudaLaunchKernelEx\b/;
    my $shared = ($src =~ s/extern __shared__ (?:__align__\(\d+\) )?([\w ]+?) (\w+)\[\];/$1 *$2 = ($1 *)emu::dynamic_smem();/g);
    my $launches = ($src =~ s{\b([A-Za-z_]\w*(?:<[^;{}()]*?>)?)<<<(.*?)>>>(\((?:[^()]++|(?3))*\))}{emu::launch("$1", emu::kernel_address($1), [=]() { $1$3; }, $2)}gs);
    die "cuda_emu.sh: no kernel launch found in nanogpt.cu\n" if !$launches && $src !~ /emu::launch\(what/;
    die "cuda_emu.sh: a launch was not rewritten\n" if $src =~ /<<</;
    die "cuda_emu.sh: inline PTX the emulator does not know: $1\n" if $src =~ /^(.*\basm\b.*)$/m;
    print $src;
    print STDERR "rewrote the launch helper and " . ($launches || 0) . " other launches, $shared dynamic shared-memory arrays\n";
' <"$1" >"$2"
}
if ! rewrite "$EMU_SRC" "$OUT/nanogpt_emu.cpp"; then
    echo "FAIL cuda emulator: the rewrite of $EMU_SRC failed"
    echo "summary: 0 passed, 1 failed"
    exit 1
fi

# -O1: half of -O2's compile time of a rewritten nanogpt.cu (21 s, not 38 s, on a 2-core VM), and it runs as
# fast (test_gpu_ops --matmul-only on the sm_80: 39 s, at -O2 42 s); the mutants also leave out -g, a fifth of
# the compile time
CXXFLAGS="-std=c++17 -O1 -U_FORTIFY_SOURCE -Wall -Wextra -Wno-psabi -Wno-unknown-pragmas -Wno-unused-function $CUDA_INC_FLAGS -I."
CFLAGS_T="-std=c11 -O2 -g -Wall -Wextra -Wno-unused-function -DNGPT_CUDA -Itest"
WRAP_ALLOC="-Wl,--wrap=cudaMalloc -Wl,--wrap=cudaMallocHost -Wl,--wrap=cudaFree" # the GPU tests count them: test/cuda_alloc_count.h
# the emulated backend for one compute capability, and the test programs and nanogpt linked with it
build_cc() {
    local cc=$1
    $CXX $CXXFLAGS -g -DEMU_CC="$cc" -include test/cuda_emu.h -c "$OUT/nanogpt_emu.cpp" -o "$OUT/nanogpt_emu_$cc.o" &&
        $CXX $CXXFLAGS -O2 -g -DEMU_CC="$cc" -DEMU_RUNTIME -x c++ -c test/cuda_emu.h -o "$OUT/cuda_emu_runtime_$cc.o" &&
        $CXX -o "$OUT/test_gpu_ops_sm$cc" "$OUT/test_gpu_ops.o" "$OUT/nanogpt_emu_$cc.o" "$OUT/cuda_emu_runtime_$cc.o" -lm -lpthread $WRAP_ALLOC &&
        $CXX -o "$OUT/test_gpu_train_sm$cc" "$OUT/test_gpu_train.o" "$OUT/nanogpt_emu_$cc.o" "$OUT/cuda_emu_runtime_$cc.o" -lm -lpthread $WRAP_ALLOC &&
        $CXX -o "$OUT/nanogpt_sm$cc" "$OUT/nanogpt_cuda.o" "$OUT/nanogpt_emu_$cc.o" "$OUT/cuda_emu_runtime_$cc.o" -lm -lpthread
}
# the command line on the emulated GPU, as a user runs it: info, prepare, train (cuda:0; bf16, or fp16 with
# loss scaling on the sm_75), resume (and again with bf16 moments: the note that its run's were fp32), sample,
# plan (the default job: the GPU recipe and the card's dtype), bench (and with NGPT_FUSE_GELU=0), bench --kernels,
# bench --sample (its steps as recorded graphs, and with NGPT_GRAPHS=0 not);
# each must exit 0 and say what it should
cli() { # CC
    local N=$OUT/nanogpt_sm$1 D=$OUT/cli_sm$1 p=0 f=0 dt=bfloat16
    [ "$1" -lt 80 ] && dt=float16
    rm -rf "$D"
    mkdir -p "$D"
    check() { # NAME PATTERNS COMMAND...: the command exits 0 (want_rc where set) and prints a line matching each of PATTERNS (one a line)
        local name=$1 pats=$2 out rc pat matched=1
        shift 2
        out=$("$@" 2>&1)
        rc=$?
        while IFS= read -r pat; do grep -qE -- "$pat" <<<"$out" || matched=0; done <<<"$pats"
        if [ $rc = "${want_rc:-0}" ] && [ $matched = 1 ]; then
            echo "ok nanogpt $name"
            p=$((p + 1))
        else
            echo "$out" | tail -n 20
            echo "FAIL nanogpt $name: exit status $rc, or no line matching one of these:"
            echo "$pats"
            f=$((f + 1))
        fi
    }
    cat README.md nanogpt.h >"$D/text.txt"
    local small=(--data_dir="$D/data" --out_dir="$D/out" --eval_interval=3 --eval_iters=2 --log_interval=1 --batch_size=4
                 --gradient_accumulation_steps=2)
    check info "^cuda: nanogpt's CUDA emulator \(sm_$1" "$N" info
    # the 16-bit matmul: the TMA kernel on sm_90; mma.sync two blocks an SM where the SM has 100 KB or more
    # (an RTX 3090's too, sm_86), one on sm_75's 64 KB. The attention: wgmma on sm_90; else mma.sync, two
    # blocks of its dK, dV kernel an SM (sm_75's 64 KB too, in its own layout)
    local mm="mma.sync, 2 blocks an SM" att="mma.sync, 2 blocks an SM"
    [ "$1" = 90 ] && mm="wgmma\+tma" att="wgmma at head size 64"
    [ "$1" = 75 ] && mm="mma.sync, 1 block an SM"
    check "info (16-bit matmul ${mm//\\/}, attention $att)" "16-bit matmul $mm, attention $att," "$N" info
    want_rc=1 check "NGPT_MATMUL=wgmma info (a value the switch does not take)" "^cuda: the environment's NGPT_MATMUL=wgmma is not a value that switch takes \(mma;" \
        env NGPT_MATMUL=wgmma "$N" info
    check prepare "vocabulary" "$N" prepare --input="$D/text.txt" --out="$D/data"
    check "train --device=cuda:0 --dtype=$dt" "^done: 7 steps" "$N" train --device=cuda:0 --dtype=$dt "${small[@]}" \
        --n_layer=1 --n_head=2 --n_embd=64 --block_size=32 --max_iters=6 --dropout=0.1
    check "train --init_from=resume" "^done: 2 steps \(from step 7 to 9\)" "$N" train --init_from=resume --device=cuda "${small[@]}" --max_iters=8
    check "train --init_from=resume --moments_dtype=bfloat16 (its run's were fp32)" "^note: AdamW moments bf16 \(its run: fp32\): the checkpoint's were rounded to bf16" \
        "$N" train --init_from=resume --device=cuda "${small[@]}" --max_iters=9 --moments_dtype=bfloat16
    check sample "^-+$" "$N" sample --out_dir="$D/out" --data_dir="$D/data" --device=cuda --num_samples=2 --max_new_tokens=16 --start=The
    local tiny=(--device=cuda --n_layer=1 --n_head=2 --n_embd=64 --block_size=32 --vocab_size=100)
    check "bench --sample=2 (each new token's layers one recorded graph; the shared prompt's token not)" \
        "^sampling .* tokens/s; 5 steps' layers as one recorded graph each\$" "$N" bench --sample=2 --steps=6 "${tiny[@]}"
    check "NGPT_GRAPHS=0 bench --sample=2 (no graphs)" "^sampling .* tokens/s\$" env NGPT_GRAPHS=0 "$N" bench --sample=2 --steps=6 "${tiny[@]}"
    want_rc=1 check "NGPT_TILE_N=128 train (refused before it trains)" "^error: the environment's NGPT_TILE_N=128 is not a value that switch takes \(192, 256;" \
        env NGPT_TILE_N=128 "$N" train --device=cuda "${small[@]}" --out_dir="$D/out-refused" --max_iters=2
    check "plan --device=cuda:0 (no config: the GPU recipe, in $dt)" "^device +cuda, $dt" "$N" plan --device=cuda:0
    check "plan: the GPU recipe" "L=6 NH=6 C=384" "$N" plan --device=cuda
    check "bench (GELU fused into the products; the host's share of a step, which the CPU backend does not print)" \
        $'^host +[0-9.]+ ms a step outside waits for the device, [0-9]+% of the steps\' time\n^bench_result tokens_per_s=[0-9].* host_share=[0-9.]+$\n^    matmul_forward_gelu +[0-9.]+ ms in\n^    matmul_backward_gelu +[0-9.]+ ms in' \
        "$N" bench --device=cuda --n_layer=1 --n_head=2 --n_embd=64 --block_size=32 --vocab_size=100 --batch_size=2 --steps=2 --warmup=1 \
        --gradient_accumulation_steps=1
    check "NGPT_FUSE_GELU=0 bench (GELU as ops of their own)" $'^bench_result tokens_per_s=[0-9]\n^    gelu_forward +[0-9.]+ ms in\n^    gelu_backward +[0-9.]+ ms in' \
        env NGPT_FUSE_GELU=0 "$N" bench --device=cuda --n_layer=1 --n_head=2 --n_embd=64 --block_size=32 --vocab_size=100 --batch_size=2 \
        --steps=2 --warmup=1 --gradient_accumulation_steps=1
    check "bench --kernels (the fused GELU products and the GELU ops too)" \
        $'^kernel classifier loss +[0-9.]+ ms [0-9]+ GB/s\n^kernel matmul fc fwd gelu +[0-9.]+ ms\n^kernel matmul mlp proj dinp gelu +[0-9.]+ ms\n^kernel gelu bwd +[0-9.]+ ms' \
        "$N" bench --kernels --device=cuda --n_layer=1 --n_head=2 --n_embd=64 \
        --block_size=32 --vocab_size=100 --batch_size=2 --gradient_accumulation_steps=1
    echo "summary: $p passed, $f failed"
    [ $f = 0 ]
}
# the runs: NAME COMMAND..., each into $OUT/NAME.log and NAME.rc
run() {
    local name=$1
    shift
    "$@" >"$OUT/$name.log" 2>&1
    echo $? >"$OUT/$name.rc"
}
# COMMAND...: started in the background once fewer than EMU_JOBS (the cores, at most 8) of those started this
# way run; the runs (the longest first) and then the mutants share it
EMU_JOBS=${EMU_JOBS:-$(n=$(nproc 2>/dev/null || echo 2); echo $((n < 8 ? n : 8)))}
case $EMU_JOBS in
'' | *[!0-9]* | 0*) echo "FAIL cuda emulator: EMU_JOBS=$EMU_JOBS: expected a whole number of jobs, 1 or more"; echo "summary: 0 passed, 1 failed"; exit 1 ;;
esac
# wait_pooled waits for each of them (and the builds') by its process id: a plain wait after wait -n returned
# while the last two mutants still ran (bash 5.2.15, a 2-core VM), and the report called them unbuilt
pooled=()
pool() {
    while [ "$(jobs -rp | wc -l)" -ge "$EMU_JOBS" ]; do wait -n; done
    "$@" &
    pooled+=($!)
}
wait_pooled() {
    local p
    for p in "${pooled[@]}"; do wait "$p"; done
    pooled=()
}
passed=0 failed=0
fail() { echo "FAIL cuda emulator: $*"; failed=$((failed + 1)); }
if ! { $CC $CFLAGS_T -c test/test_gpu_ops.c -o "$OUT/test_gpu_ops.o" && $CC $CFLAGS_T -c test/test_gpu_train.c -o "$OUT/test_gpu_train.o" &&
        $CC $CFLAGS_T -c nanogpt.c -o "$OUT/nanogpt_cuda.o"; } >"$OUT/build.log" 2>&1; then
    cat "$OUT/build.log"
    fail "the test programs did not compile"
fi
built=""
for cc in $EMU_CCS; do # all at once, not pooled: one per architecture
    build_cc "$cc" >"$OUT/build_$cc.log" 2>&1 &
    pooled+=($!)
done
wait_pooled
for cc in $EMU_CCS; do
    cat "$OUT/build_$cc.log"
    if [ -x "$OUT/nanogpt_sm$cc" ] && [ "$OUT/nanogpt_sm$cc" -nt "$OUT/nanogpt_emu.cpp" ]; then built="$built $cc"; else fail "sm_$cc: did not build"; fi
done
# NAME|COMMAND: sm_80 runs every dtype, sm_90 the 16-bit ones where sm_80 runs too (its f32 kernels are
# sm_80's: no f32 code is guarded by the architecture; its 8 SMs against sm_80's 108 change grid sizes, which
# its 16-bit runs cover on the same templates), both the trainer checks and the command line; sm_75
# its own path, f16 (its f32 kernels are sm_80's too), and the command line in f16. Listed longest first (on
# a 2-core VM: test_gpu_ops 7 min on the sm_80 and the sm_90, test_gpu_train 4, test_gpu_ops on the sm_75 2,
# a command line 1).
runs=()
sixteen=""
case " $built " in *" 80 "*) sixteen=" --dtype bf16,f16" ;; esac
for cc in $built; do
    [ "$cc" -ge 80 ] || continue
    args="--small"
    [ "$cc" -gt 80 ] && args="$args$sixteen"
    runs+=("test_gpu_ops_sm$cc $args|$OUT/test_gpu_ops_sm$cc $args")
done
for cc in $built; do [ "$cc" -ge 80 ] && runs+=("test_gpu_train_sm$cc --quick|$OUT/test_gpu_train_sm$cc --quick"); done
for cc in $built; do [ "$cc" -lt 80 ] && runs+=("test_gpu_ops_sm$cc --small --dtype f16|$OUT/test_gpu_ops_sm$cc --small --dtype f16"); done
for cc in $built; do runs+=("nanogpt_sm$cc (the command line)|cli $cc"); done
for r in "${runs[@]}"; do
    pool run "${r%% *}" ${r#*|}
done
report_runs() {
    local r name rc p f
    for r in "${runs[@]}"; do
        name=${r%% *}
        echo "== ${r%%|*} (on the CUDA emulator)"
        cat "$OUT/$name.log"
        rc=$(cat "$OUT/$name.rc")
        p=$(sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$OUT/$name.log" | tail -n 1)
        f=$(sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$OUT/$name.log" | tail -n 1)
        if [ -z "$p" ]; then fail "$name exited with status $rc before its summary"; continue; fi
        passed=$((passed + p))
        failed=$((failed + f))
        [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && fail "$name: exit status $rc"
    done
}
# ---- mutants: nanogpt.cu with one bug each, which the runs above must catch (else they could not fail):
# NAME|CC|TEST_GPU_OPS ARGUMENTS (and VAR=value settings)|TEXT|REPLACEMENT, TEXT found exactly once in
# nanogpt.cu; in TEXT and REPLACEMENT, \n is a line break and \\n the two characters \ and n (written
# "\\\\n" inside these double quotes), as inline PTX strings spell a line break
MUTANTS=(
    "bf16 AdamW moments round to nearest (v stops decaying under beta2 0.999)|80||r.x = (unsigned short)((u + (bits & 0xffffu)) >> 16);|r.x = (unsigned short)((u + 0x7fffu + (u >> 16 & 1)) >> 16);"
    "bf16 AdamW moments round with dice biased upward|80||r.x = (unsigned short)((u + (bits & 0xffffu)) >> 16);|r.x = (unsigned short)((u + (bits & 0xffffu) + 0x2000u) >> 16);"
    "matmul reads a stage before its cp.async lands|80|--matmul-only|cp_async_wait<MM_STAGES - 2>();|cp_async_wait<MM_STAGES - 1>();"
    "matmul without the barrier after the wait|80|--matmul-only|__syncthreads();                /* ... everyone's have|/* ... everyone's have"
    "sm_75 matmul stores a fetched tile into the stage its products read|75|--matmul-only|mm_store_tile<T, A_K, MM_BM>(sA + st * TA::ELEMS, fa);|mm_store_tile<T, A_K, MM_BM>(sA + (kt % MM_STAGES) * TA::ELEMS, fa);"
    "sm_75 matmul fetches the k tile after the one its stage waits for|75|--matmul-only|mm_fetch_tile<T, B_K, MM_BN>(fb, B, ldb, n0, N, nk * MM_BK, K, vecB);|mm_fetch_tile<T, B_K, MM_BN>(fb, B, ldb, n0, N, (nk + 1) * MM_BK, K, vecB);"
    "sm_75 matmul without the barrier after the wait (a stage stored while others read it)|75|--matmul-only|__syncthreads();                /* ... everyone's have|/* ... everyone's have"
    "sm_75 attention forward: key tiles from a second buffer it does not have|75||(1 + 2 * (BUFS == 2 ? kb & 1 : 0))|(1 + 2 * (kb & 1))"
    "sm_75 attention refills its one buffer while other warps still read it|75||int it, int last) {\n    __syncthreads();|int it, int last) {"
    "sm_75 attention dK, dV: lse from global memory left in the natural-log domain|75||: lse[row] * LOG2E_F)|: lse[row])"
    "sm_75 attention dK, dV: D from global memory for the row after|75||: Dsum[row])|: Dsum[row + 1])"
    "attention launched with sm_75's shared memory where the device code is sm_80's|80||static bool device_code_sm75(int cc) { return cc < 80; }|static bool device_code_sm75(int cc) { return cc < 90; }"
    "sm_75 attention launched with sm_80's shared memory (one block an SM)|75||static bool device_code_sm75(int cc) { return cc < 80; }|static bool device_code_sm75(int cc) { return cc < 75; }"
    "matmul B fragments from the wrong 8x8 matrices|80|--matmul-only|(lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8)|(lane & 7) + ((lane >> 4) & 1) * 8, n0 + ((lane >> 3) & 1) * 8)"
    "attention refills a buffer other warps still read|80||int it, int last) {\n    __syncthreads();|int it, int last) {"
    "attention reads a key tile before it lands|80||cp_async_wait<1>(); /* every group|cp_async_wait<2>(); /* every group"
    "mma.sync tiles unswizzled (right values; an ldmatrix matrix's rows two or more to a bank group)|80|--matmul-only|return row * COLS + (((col >> 3) ^ (row / ROWS_A_LINE % SPAN)) << 3) + (col & 7);|return row * COLS + col;"
    "mma.sync tiles of 128 bytes or more a row swizzled by row pairs (right values; rows two to a bank group)|80||return row * COLS + (((col >> 3) ^ (row / ROWS_A_LINE % SPAN)) << 3) + (col & 7);|return row * COLS + (((col >> 3) ^ (row / 2 % SPAN)) << 3) + (col & 7);"
    "half a warp skips a reduction's shuffles (a deadlock)|80||float warp_sum(float v) {|float warp_sum(float v) {\n    if ((threadIdx.x & 31) >= 16) return v;"
    "cross-entropy keeps only the first of each turn's vectors of the row in shared memory|80||if (CACHED) row_cache[j / VEC] = x[u];|if (CACHED && u == 0) row_cache[j / VEC] = x[u];"
    "elementwise ops leave out the last of the values after the last whole vector|80||if (VEC > 1 && tail < n)|if (VEC > 1 && tail + 1 < n)"
    "cross-entropy without the row cache reads each pair of vectors swapped in its second pass (only NGPT_LOSS_SMEM=0's run takes that path with 16-byte rows)|80||if (j < V) x = CACHED ? row_cache[j / VEC] : *(const Vec *)(z + j);|if (j < V) x = CACHED ? row_cache[j / VEC] : *(const Vec *)(z + (VEC > 1 && (j ^ VEC) < V ? (j ^ VEC) : j));"
    "cross-entropy counts the padding columns in its sum|80||s += exp2_kept(j + k < V, (y[k] - m) * LOG2E_F);|s += exp2f((y[k] - m) * LOG2E_F);"
    "TMA kernel: a consumer releases a stage while its wgmma may still read it|90|--matmul-only|wgmma.wait_group.sync.aligned 1;\\\\n\" ::: \"memory\"); /* k tile kt - 1's|wgmma.wait_group.sync.aligned 2;\\\\n\" ::: \"memory\"); /* k tile kt - 1's"
    "TMA kernel: the producer expects fewer bytes than its copies bring|90|--matmul-only|mbar_expect_bytes(&full[s], (BM + BN) * WG_BK * 2);|mbar_expect_bytes(&full[s], BN * WG_BK * 2);"
    "TMA kernel: the producer keeps its registers (the consumers' setmaxnreg.inc waits forever)|90|--matmul-only|asm volatile(\"setmaxnreg.dec.sync.aligned.u32 %0;\\\\n\" ::\"n\"(REGS));|"
    "TMA kernel: each stage's fence.mbarrier_init comes before its barriers' init, not after the last|90|--matmul-only|mbar_init(&full[s], 1);\n            mbar_init(&empty[s], consumers);\n        }\n        asm volatile(\"fence.mbarrier_init.release.cluster;\\\\n\" ::: \"memory\");|asm volatile(\"fence.mbarrier_init.release.cluster;\\\\n\" ::: \"memory\"); /* each stage fenced before its own inits */\n            mbar_init(&full[s], 1);\n            mbar_init(&empty[s], consumers);\n        }"
    "wgmma kernels: a lane writes out an epilogue chunk before every lane has staged it|90|--matmul-only|__syncwarp();\n#pragma unroll 1\n        for (int h = 0; h < 2; h++) { /* one copy|#pragma unroll 1\n        for (int h = 0; h < 2; h++) { /* one copy"
    "encoder forward reads its vectors at the vector index, not the column|80||const int c = (int)(i - row * cv) * VEC,|const int c = (int)(i - row * cv),"
    "encoder backward (wte) adds the rows past its bucket|80||if (mine && u0 + u < rows)\n#pragma unroll|if (mine)\n#pragma unroll"
    "encoder backward (wte) takes each turn's first position for all its rows|80||__shfl_sync(0xffffffffu, pos, u0 + u);|__shfl_sync(0xffffffffu, pos, u0);"
    "encoder backward (wte) skips every other window of 32 positions|80||j0 < last; j0 += 32) {|j0 < last; j0 += 64) {"
    "encoder backward (wte) gives one-value rows the grid of 16-byte ones|80||(C + 32 * width - 1) / (32 * width)|(C + 32 * VEC - 1) / (32 * VEC)"
    "encoder backward (wpe) leaves out the last sequence|80||for (int b = 0; b < B; b++) {\n            const V g|for (int b = 0; b < B - 1; b++) {\n            const V g"
    "layernorm backward adds its warps' dw/db sums before every warp is done|80||__syncthreads(); /* every warp's sums are complete */|"
    "layernorm backward's register kernel takes too few vectors a lane|80||sizeof(T);\n    const int nv = (C / VEC + 31) / 32;|sizeof(T);\n    const int nv = C / VEC / 32;"
    "layernorm forward's register kernel takes too few vectors a lane|80||ln_by_vectors((C / VEC + 31) / 32, [&](auto k) { kernel =|ln_by_vectors((C / VEC + 31) / 32 - 1, [&](auto k) { kernel ="
    "layernorm forward's register kernel leaves a lane's vector at the row's end unloaded|80||if ((lane + 32 * j) * VEC < C) xv[j] =|if ((lane + 32 * j + 1) * VEC < C) xv[j] ="
    "layernorm forward's variance adds the vectors past the row|80||float v = 0;\n#pragma unroll\n    for (int j = 0; j < NV; j++)\n        if ((lane + 32 * j) * VEC < C)\n#pragma unroll|float v = 0;\n#pragma unroll\n    for (int j = 0; j < NV; j++)\n#pragma unroll"
    "layernorm backward's register kernel updates the vectors past the row|80||if (c >= C) continue;\n            const V wv = *(const V *)(w + c);\n#pragma unroll\n            for (int q|const V wv = *(const V *)(w + c);\n#pragma unroll\n            for (int q"
    "layernorm backward's reduction leaves out the last load of each turn|80||for (int i = 0; i < LN_REDUCE_LOADS; i++) s += v[i];|for (int i = 0; i < LN_REDUCE_LOADS - 1; i++) s += v[i];"
    "layernorm backward's reduction leaves db out|80||layernorm_reduce_kernel<T>, (unsigned)((2 * C + 31) / 32)|layernorm_reduce_kernel<T>, (unsigned)((C + 31) / 32)"
    "attention's rowsum of dO O adds two lanes of a row|80||for (int k = ROWDOT_LANES / 2; k > 0; k >>= 1)|for (int k = ROWDOT_LANES / 2; k > 1; k >>= 1)"
    "attention backward (mma.sync): dK, dV keep the keys after each query|80||const bool valid = (q < T_) & (kr <= q) & (kr < T_);|const bool valid = (q < T_) & (kr < T_);"
    "attention backward (mma.sync), head size 128: dK, dV take each query tile's first half twice|80||const int c0 = part * 8 * NJ;|const int c0 = 0;"
    "attention backward (mma.sync), head size 128: dK, dV's second half of a query tile takes the first half's lse and D|80||int qi = c0 + j * 8 + tq * 2 + (e & 1)|int qi = j * 8 + tq * 2 + (e & 1)"
    "attention backward (mma.sync): dQ keeps the keys after each query|80||const bool valid = (q < T_) & (kk <= q) & (kk < T_);|const bool valid = (q < T_) & (kk < T_);"
    "NGPT_SPLITK_MAX=1 ignored: products still split along K|80|--runs-with NGPT_SPLITK_MAX|most = im->splitk_most && im->splitk_most < rule_most ? im->splitk_most : rule_most;|most = rule_most;"
    "matmul stages its epilogue in tiles other warps may still read|80|--matmul-only|__syncthreads(); /* every warp is done with the tiles: their memory stages the epilogue */|"
    "mma.sync kernel's direct epilogue does not move the next row block to the front|80|--matmul-only|= acc[(k >> 4) + 1][(k >> 2) & 3][k & 3]; /* the next row block|= acc[k >> 4][(k >> 2) & 3][k & 3]; /* the next row block"
    "mma.sync kernel's direct epilogue puts its row blocks 8 rows apart|80|--matmul-only|mm_epilogue_direct<EK, 4, false, ACC>(ep, row0 + 16 * i, col0, d, lane);|mm_epilogue_direct<EK, 4, false, ACC>(ep, row0 + 8 * i, col0, d, lane);"
    "TMA kernel's direct epilogue reads row g + 8's aux a row lower|90|--matmul-only|second = first + 8 * ep.ldc;|second = first + 9 * ep.ldc;"
    "TMA kernel's direct epilogue writes row g + 8's results a row lower in its box|90|--matmul-only|*(MmVec2<T> *)(box_out + at + h * 8 * 128) = r[h];|*(MmVec2<T> *)(box_out + at + h * 9 * 128) = r[h];"
    "TMA kernel's direct epilogue writes its boxes unswizzled|90|--matmul-only|(((FG * (grp % GPB) + j) ^ g) << 4)|((FG * (grp % GPB) + j) << 4)"
    "TMA kernel's direct epilogue stores a box before every lane has written it|90|--matmul-only|fence_async_proxy();\n                __syncwarp();|fence_async_proxy();"
    "TMA kernel's direct epilogue stores a box its lanes have not fenced for the async proxy|90|--matmul-only|fence_async_proxy();\n                __syncwarp();|__syncwarp();"
    "TMA kernel stages an edge tile in boxes the copy engine may still read|90|--matmul-only|if (lane == 0) bulk_wait_read<0>(); /* the staging|/* the staging"
    "TMA kernel's direct epilogue writes a box the copy engine may still read|90|--matmul-only|box == 0) bulk_wait_read<0>();\n                    else bulk_wait_read<1>();|box == 0) bulk_wait_read<0>();\n                    else bulk_wait_read<2>();"
    "TMA kernel's direct epilogue writes GELU's out and aux through one box|90|--matmul-only|box_aux = buf + MM_BOX_BYTES;|box_aux = buf;"
    "TMA kernel ends with its bulk stores unwaited|90|--matmul-only|if (lane == 0) bulk_wait_written(); /* the stores are written|/* the stores are written"
    "TMA kernel's direct epilogue writes a tile's first box while the last tile's store from it may still read it|90|--matmul-only|box == 0) bulk_wait_read<0>();\n                    else bulk_wait_read<1>();|box == -1) bulk_wait_read<0>();\n                    else bulk_wait_read<1>();"
    "ping-pong TMA kernel: a warpgroup does not step over the other's k tiles|90|NGPT_PINGPONG=1 --matmul-only|it += (tm_tile(t - gridDim.x,|it += 0 * (tm_tile(t - gridDim.x,"
    "ping-pong TMA kernel: a stage's release waits for both warpgroups (a deadlock)|90|NGPT_PINGPONG=1 --matmul-only|tm_init_barriers(full, empty, TP_STAGES, 128 + colsum);|tm_init_barriers(full, empty, TP_STAGES, 2 * 128 + colsum);"
    "ping-pong TMA kernel: the stages' release does not count the bias-gradient warp|90|NGPT_PINGPONG=1 --matmul-only|tm_init_barriers(full, empty, TP_STAGES, 128 + colsum);|tm_init_barriers(full, empty, TP_STAGES, 128);"
    "TMA kernel: the stages' release does not count the bias-gradient warp|90|--matmul-only|tm_init_barriers(full, empty, TM_STAGES, 2 * 128 + colsum);|tm_init_barriers(full, empty, TM_STAGES, 2 * 128);"
    "TMA kernel's bias-gradient warp reads its rows unswizzled|90|--matmul-only|((chunk ^ (r & 7)) << 4)|(chunk << 4)"
    "TMA kernel's bias-gradient warp sums every tile, not only the first column's|90|--matmul-only|const bool sums = tl.n0 == 0;|const bool sums = true;"
    "TMA kernel's bias-gradient warp writes every split-K slice's sums to the first slice's|90|--matmul-only|cs.partial[(size_t)tl.slice * M + m]|cs.partial[m]"
    "split-K reduction launched without its bias-gradient blocks|90|--matmul-only|const unsigned blocks = sums_block + (tile_sums ?|const unsigned blocks = sums_block + 0 * (tile_sums ?"
    "split-K reduction: the first bias-gradient block reduces results instead|90|--matmul-only|if (blockIdx.x >= sums_block) {|if (blockIdx.x > sums_block) {"
    "stream-K: the finishing block adds only the latest of the earlier pieces|90|--matmul-only|for (int b = (int)blockIdx.x - 1; b >= tl.first_block; b--) {|for (int b = (int)blockIdx.x - 1; b >= (int)blockIdx.x - 1; b--) {"
    "stream-K: an unfinished piece flagged but not written|90|--matmul-only|for (int q = 0; q < BN / 8; q++) __stcg(mine|for (int q = 0; q < 0; q++) __stcg(mine"
    "stream-K: an unfinished piece never flagged (its finishing block would wait for ever)|90|--matmul-only|if (ctid == 0) flag_set(&sk.ready[blockIdx.x]);|if (ctid < 0) flag_set(&sk.ready[blockIdx.x]);"
    "stream-K: the finishing block adds only its own bias-gradient sums of a tile|90|--matmul-only|v += __ldcg(sk.colpart|v += 0 * __ldcg(sk.colpart"
    "stream-K: the bias-gradient warp writes a finishing piece as an unfinished one|90|--matmul-only|const int slot = tl.first_block < 0 ? 0 : 1;|const int slot = 0;"
    "ping-pong TMA kernel: each warpgroup takes the other's tiles (a deadlock)|90|NGPT_PINGPONG=1 --matmul-only|for (int t = blockIdx.x + cw * gridDim.x;|for (int t = blockIdx.x + (1 - cw) * gridDim.x;"
    "ping-pong TMA kernel: a warpgroup starts its main loop without its turn|90|NGPT_PINGPONG=1 --matmul-only|named_bar_sync(1 + cw, 256); /* this main loop's turn */|"
    "ping-pong TMA kernel: the block's last tile gives a turn nobody takes|90|NGPT_PINGPONG=1 --matmul-only|if (next) named_bar_arrive(2 - cw, 256);|named_bar_arrive(2 - cw, 256);"
    "ping-pong TMA kernel: its consumers take 240 registers where the producer kept 40 (a deadlock)|90|NGPT_PINGPONG=1 --matmul-only|A_K ? TP_PRODUCER_REGS : TM_PRODUCER_REGS>(|TM_PRODUCER_REGS>("
    "ping-pong TMA kernel ends with its bulk stores unwaited|90|NGPT_PINGPONG=1 --matmul-only|if (lane == 0) bulk_wait_written(); /* every store written|/* every store written"
    "TMA kernel walks tiles 192 wide 256 columns apart|90|--matmul-only|r.n0 = (rows_first ? i : o) * bn;|r.n0 = (rows_first ? i : o) * TM_BN;"
    "TMA kernel's consumers walk the tiles in the other order than its producer loads them|90|--matmul-only|tm_next<SK>(wk, tl, M, N, K, kps, TM_BM, BN, rows_first, tiles, sk)|tm_next<SK>(wk, tl, M, N, K, kps, TM_BM, BN, !rows_first, tiles, sk)"
    "TMA kernel walks the rows of tiles first but counts them in columns|90|--matmul-only|const int i = t % inner, o = rest % outer;|const int i = t % inner, o = rest % inner;"
    "mma.sync kernel takes its tile from the grid as if it went down the columns|80|--matmul-only|const int m0 = (rows_first ? blockIdx.y : blockIdx.x) * MM_BM, n0 = (rows_first ? blockIdx.x : blockIdx.y) * MM_BN;|const int m0 = blockIdx.x * MM_BM, n0 = blockIdx.y * MM_BN;"
    "TMA kernel's direct epilogue does not move the next group's accumulators to the front|90|--matmul-only|d[k] = d[k + 4 * FG]; /* the next group's|d[k] = d[k + 2 * FG]; /* the next group's"
    "TMA kernel's direct epilogue adds the next group's bias|90|--matmul-only|d[4 * j + 2 * h + e], b[j].v[e],|d[4 * j + 2 * h + e], nb[j].v[e],"
    "TMA kernel's direct epilogue rounds the product before adding the bias (a last-bit error)|90||d[4 * j + 2 * h + e], b[j].v[e],|to_f(from_f<T>(d[4 * j + 2 * h + e])), b[j].v[e],"
    "TMA kernel's direct epilogue reads row g's aux for row g + 8|90|--matmul-only|AUX ? x[2 * j + h].v[e]|AUX ? x[2 * j].v[e]"
    "TMA kernel's direct weight gradient overwrites the old values|90|--matmul-only|mm_value(KIND, bias != NULL, ACC,|mm_value(KIND, bias != NULL, false,"
    "TMA kernel's direct weight gradient adds row g's old values to row g + 8|90|--matmul-only|ACC ? o[2 * j + h].v[e]|ACC ? o[2 * j].v[e]"
    "TMA kernel writes its split-K boxes unswizzled|90|--matmul-only|(((2 * j + (tq >> 1)) ^ g) << 4)|((2 * j + (tq >> 1)) << 4)"
    "TMA kernel rewrites a split-K box its store may still read|90|--matmul-only|if (box == 0) bulk_wait_read<0>();\n                else bulk_wait_read<1>();|if (box == 0) bulk_wait_read<0>();\n                else bulk_wait_read<2>();"
    "TMA kernel stores every split-K slice's whole tiles at the first slice's rows|90|--matmul-only|mm_slice_direct<BN / 8, true>(ep.partial, N, tl.slice * M + row0,|mm_slice_direct<BN / 8, true>(ep.partial, N, row0,"
    "mma.sync kernel stores every split-K slice's whole tiles at the first slice's rows|80|--matmul-only|mm_slice_direct<4, false>(ep.partial, N, slice * M + row0|mm_slice_direct<4, false>(ep.partial, N, row0"
    "split-K's reduce leaves out the last slice where it reads 16 bytes a slice|80|--matmul-only|for (int z = 0; z < splits; z++) {\n            const float4|for (int z = 0; z + 1 < splits; z++) {\n            const float4"
    "wgmma attention reads S before its wgmma completes|90||wgmma.wait_group.sync.aligned 1;\\\\n\" ::: \"memory\"); /* S_j is done|wgmma.wait_group.sync.aligned 2;\\\\n\" ::: \"memory\"); /* S_j is done"
    "wgmma attention: the producer refills a stage its consumers may still read|90||mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */\n                mbar_expect_bytes(&full_k[s]|mbar_expect_bytes(&full_k[s]"
    "wgmma attention keeps O unscaled when a key tile raises a row's max|90||o[i] *= corr[(i >> 1) & 1];|(void)corr;"
    "wgmma attention: nobody gives warpgroup 0 its first turn (a deadlock)|90||if (on && cw == 1) named_bar_arrive(1, 256);|"
    "wgmma attention, persistent forward: the producer refills a Q buffer its consumers may still read|90||mbar_wait(&empty_q[qb], ((n >> 1) & 1) ^ 1);|"
    "wgmma attention (persistent kernels): warpgroup 0 leaves warpgroup 1's last turn untaken (an arrival left when the block ends)|90||if (on && cw == 0) named_bar_sync(1, 256);|"
    "wgmma attention, persistent forward: every other round walks backwards one block off (an item skipped, one done twice)|90||((r & 1) ? g - 1 - b : b)|((r & 1) ? g - b : b)"
    "wgmma attention: a row's 16-byte stores transpose the quad's words with the wrong lanes first (columns swapped)|90||hi ? w[j0] : w[2 + j0], 2);|hi ? w[j0] : w[2 + j0], 1);"
    "wgmma attention: a row's columns 32 .. 63 stored from the accumulators of 0 .. 31|90||acc[4 * (4 * a + j) + 2 * r] * scale, acc[4 * (4 * a + j) + 2 * r + 1] * scale|acc[4 * j + 2 * r] * scale, acc[4 * j + 2 * r + 1] * scale"
    "mma.sync attention: each 32 columns of a row stored from the accumulators of the first 32|80||acc[4 * a + j][2 * r] * scale, acc[4 * a + j][2 * r + 1] * scale|acc[j][2 * r] * scale, acc[j][2 * r + 1] * scale"
    "mma.sync attention: a row's 16-byte stores transpose the quad's words with the wrong lanes first (columns swapped)|80||hi ? w[j0] : w[2 + j0], 2);|hi ? w[j0] : w[2 + j0], 1);"
    "mma.sync attention backward: dQ stores its rows past T (the next sequence's dQ overwritten)|80||dq, r, tq, hs, scale, vec_out, t < T_);|dq, r, tq, hs, scale, vec_out, true);"
    "mma.sync attention: the 16-byte stores taken where the head is padded (the next head's columns overwritten)|80||const bool vec_out = vec_ok(out, (size_t)C) && hs == HS;|const bool vec_out = vec_ok(out, (size_t)C);"
    "wgmma attention backward: dQ stores its rows past T (the next sequence's dQ overwritten)|90||dq, r, scale, tq, t < T_);|dq, r, scale, tq, true);"
    "wgmma attention backward: dV stored with dK's scale|90||fa_store_row<T>(drow + 2 * C, dv, r, 1.0f, tq, t < T_);|fa_store_row<T>(drow + 2 * C, dv, r, scale, tq, t < T_);"
    "wgmma attention, persistent dQ: the consumers count each item's key blocks from the ring's first stage|90||const int st = kbs % FA_STAGES;\n            mbar_wait(&full[st], (kbs / FA_STAGES) & 1);|const int st = kb % FA_STAGES;\n            mbar_wait(&full[st], (kb / FA_STAGES) & 1);"
    "wgmma attention, persistent dQ: an item's accumulators not zeroed (each item's dQ starts from the last one's)|90||for (int x = 0; x < 32; x++) dq[x] = 0.0f;|for (int x = 0; x < 0; x++) dq[x] = 0.0f;"
    "wgmma attention, persistent dK, dV: the producer refills a K, V buffer its consumers may still read|90||mbar_wait(&empty_kv[kvb], ((n >> 1) & 1) ^ 1);|"
    "wgmma attention, persistent dK, dV: an item's last dS^T box not counted (the next item's first store takes the same box)|90||mbar_arrive(&empty[(g + i - 1) % FA_STAGES]);\n        fb_store_ds(box + (stores++ & 1)|mbar_arrive(&empty[(g + i - 1) % FA_STAGES]);\n        fb_store_ds(box + (stores & 1)"
    "wgmma attention backward: dK, dV's warpgroups issue dV, dK without waiting for their turn|90||fa_pack_a<T, 4>(sa, dpt);\n            turn.mine();|fa_pack_a<T, 4>(sa, dpt);"
    "wgmma attention backward: dK, dV's producer refills a query stage its consumers may still read|90||mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */\n                mbar_expect_bytes(&full[s], 2 * FB_Q_BYTES);|mbar_expect_bytes(&full[s], 2 * FB_Q_BYTES);"
    "wgmma attention backward: dQ's producer refills a stage its consumers may still read|90||mbar_wait(&empty[s], ((g / FA_STAGES) & 1) ^ 1); /* its last use released (the first passes) */\n                mbar_expect_bytes(&full[s], (two|mbar_expect_bytes(&full[s], (two"
    "wgmma attention backward: dK, dV unmasked where queries precede the block's keys|90||const bool mask = q0 < k0 + FA_BN|const bool mask = q0 < k0"
    "wgmma attention backward: dK, dV keep a diagonal tile's keys after their query|90||exp2_kept(!(mask & ((qq < key[r])|exp2_kept(!(mask & ((qq < k0)"
    "wgmma attention backward: dK, dV take the first of each pair of lse values for both (the 8-byte pairs)|90||lse2[c + 1] = l2.y * LOG2E_F;|lse2[c + 1] = l2.x * LOG2E_F;"
    "wgmma attention backward: dK, dV's dS^T boxes written unswizzled|90||(((2 * kk + (x >> 1)) ^ g) << 4)|((2 * kk + (x >> 1)) << 4)"
    "wgmma attention backward: a dS^T box rewritten while its store may still read it|90||if (lane == 0) bulk_wait_read<1>(); /* the copy engine has read what it stored from this box two tiles ago */|if (lane == 0) bulk_wait_read<2>();"
    "wgmma attention backward: dS^T read from the A registers of dK's wgmma before it completes|90||asm volatile(\"wgmma.wait_group.sync.aligned 1;\\\\n\" ::: \"memory\"); /* the previous tile's dV, dK are done: sa may be read */|/* not waited for */"
    "wgmma attention backward: dK, dV's kernel ends with its dS^T stores unwaited|90||if (lane == 0) bulk_wait_written(); /* the dS^T tiles are written|/* the dS^T tiles are written"
    "wgmma attention backward: dQ reads a later key block's dS^T tiles|90||fb_ds_tile(kb, nqt) + 2 * (m - kb)); /* (kb, query tile 2m) */|fb_ds_tile(kb, nqt) + 2 * m - kb);"
    "wgmma attention backward: a group of heads stores dS^T at the rows of its heads' place among all|90||const int ds_row0 = (int)(((long long)y * fb_ds_tiles(T_)|const int ds_row0 = (int)(((long long)bh * fb_ds_tiles(T_)"
    "gemv on tensor cores: the second mma of a chunk takes the first one's input k|80|--matmul-only|a1[4] = {lo[u].z, hi[u].z, lo[u].w, hi[u].w};|a1[4] = {lo[u].x, hi[u].x, lo[u].y, hi[u].y};"
    "gemv on tensor cores: rows 9-16 take the input rows before theirs|80|--matmul-only|*hi_row = inp + (size_t)(has_hi ? g + 8 : 0) * C|*hi_row = inp + (size_t)(has_hi ? g + 7 : 0) * C"
    "gemv on tensor cores: the last chunk's lanes past C load the next row's k|80|--matmul-only|const bool in = k + 8 * q < C;|const bool in = k < C;"
    "gemv on tensor cores: the warps' sums leave out the last warp's|80|--matmul-only|for (int v = 1; v < GEMV_WARPS; v++) {|for (int v = 1; v < GEMV_WARPS - 1; v++) {"
    "gemv: rows 9-16 on gemv_kernel, which adds up 8 (the route NGPT_GEMV=simt takes)|80|--runs-with NGPT_GEMV|return N <= GEMV_MAX_ROWS;|return N <= GEMV_TC_ROWS;"
    "gemv: the fused forwards' epilogue left plain (no GELU output, no residual)|80|--matmul-only|(const T *)bias, 0, kind, (T *)aux, NULL, 0}, inp, w, N, C, OC));|(const T *)bias, 0, EPI_PLAIN, (T *)aux, NULL, 0}, inp, w, N, C, OC));"
    "gemv on tensor cores: a lane's second column takes its first column's bias|80|--matmul-only|mm_finish(ep, (size_t)g * OC + o + 1, o + 1, s.y);|mm_finish(ep, (size_t)g * OC + o + 1, o, s.y);"
    "gemv with LayerNorm: rows 9-16 left without their mean and deviation|80|--matmul-only|for (int r = warp; r < N; r += GEMV_WARPS) {|for (int r = warp; r < N && r < GEMV_WARPS; r += GEMV_WARPS) {"
    "gemv with LayerNorm: the LayerNorm bias left out|80|--matmul-only|lnb[u] = in && ln_b ? __ldg((const uint4 *)(ln_b + k + 8 * q)) : zero;|lnb[u] = zero;"
    "gemv with LayerNorm: the rows' statistics read before the barrier|80|--matmul-only|        __syncthreads();\n        if (has_lo) st_lo = row_stats[g];|        if (has_lo) st_lo = row_stats[g];"
    "layernorm_matmul_forward fuses rows longer than the LayerNorm register kernel takes|80|--matmul-only|if ((fused = ln_rows_in_registers<T>(C, ln, inp, ln_w, ln_b))) {|if ((fused = true)) {"
    "decoding: a warp's keys past its last weigh as its last|80|--decode-only|sc[u] = j0 + u * DEC_WARPS <= last ? warp_sum(sc[u]) * scale : -INFINITY;|sc[u] = warp_sum(sc[u]) * scale;"
    "decoding: a warp's step takes keys one apart, not DEC_WARPS|80|--decode-only|int j = min(j0 + u * DEC_WARPS, last);|int j = min(j0 + u, last);"
    "decoding: the running sum kept at the old max when a step raises it|80|--decode-only|        l *= corr;\n|\n"
    "decoding: a chunk's rows stored at its first position|80|--decode-only|K[(size_t)last * C + d] = row[C + d];|K[(size_t)t * C + d] = row[C + d];"
    "decoding: a chunk's rows read the keys of the sequence after theirs|80|--decode-only|qkv + (s * n + (size_t)(j - t)) * C3 + hoff + C;|qkv + ((s + 1) % (size_t)S * n + (size_t)(j - t)) * C3 + hoff + C;"
    "decoding: the merge leaves out the last warp's keys|80|--decode-only|float f = part_l[w] > 0.0f ? expf(part_m[w] - mx) : 0.0f;|float f = part_l[w] > 0.0f && w < DEC_WARPS - 1 ? expf(part_m[w] - mx) : 0.0f;"
    "decoding: the merge weighs every warp as if its max were the block's|80|--decode-only|float f = part_l[w] > 0.0f ? expf(part_m[w] - mx) : 0.0f;|float f = part_l[w] > 0.0f ? 1.0f : 0.0f;"
    "decoding: the merge reads the warps' parts without the barrier|80|--decode-only|part_l[warp] = l; }\n    __syncthreads();|part_l[warp] = l; }"
    "decoding in a graph: the kernel keeps the recorded position, not the one t_at holds when it runs|80|--decode-only|    if (t_at) t = *t_at; /* a graph's replay: this step's position */|    (void)t_at;"
    "decoding in a graph: a chunk recorded at position 0 runs on the prompt's kernels|80|--decode-only|if (t == 0 && !t_at && (long long)S * n <= INT_MAX / 3) {|if (t == 0 && (long long)S * n <= INT_MAX / 3) {"
    "decoding in a graph: a position outside the cache goes on to store its keys|80|--decode-only|from_f<T>(NAN);\n        return;\n    }|from_f<T>(NAN);\n    }"
    "graphs: a failed recording's error left in the backend's status (the caller cannot fall back)|80|--decode-only|        be->status = NGPT_OK;\n        be->msg[0]|        be->msg[0]"
    "environment switches: a value a switch does not take goes unrefused (NGPT_MATMUL=wgmma runs the default)|80|--decode-only|if (v && !env_value_listed(s.values, v))|if (v && !env_value_listed(s.values, v) && strcmp(s.name, \"NGPT_MATMUL\"))"
    "decoding: a prompt's first chunk stores its values as its keys|80|--decode-only|    k[0] = row[C + c];|    k[0] = row[2 * C + c];"
    "decoding: a prompt's first chunk leaves its last row unstored|80|--decode-only|    if (i >= (size_t)S * n * C) return;|    if (i >= (size_t)S * n * C - C) return;"
    "programmatic launch: the TMA matmul touches memory before its wait|90|--matmul-only|TmColsum<T> cs, TmStreamK sk) {\n    after_previous_kernel();\n#ifdef NGPT_WGMMA_DEVICE\n    extern __shared__ __align__(1024) unsigned char tm_smem[];|TmColsum<T> cs, TmStreamK sk) {\n#ifdef NGPT_WGMMA_DEVICE\n    extern __shared__ __align__(1024) unsigned char tm_smem[];"
    "programmatic launch: AdamW never waits for the kernel before it|90||ngpt_adamw h) {\n    after_previous_kernel();|ngpt_adamw h) {"
    "programmatic launch: every kernel lets the next one launch before its own wait|90|--matmul-only|    grid_dependency_wait();\n    grid_dependents_launch();|    grid_dependents_launch();\n    grid_dependency_wait();"
)
mutant_dtype() { [ "$1" -lt 80 ] && echo f16 || echo bf16; } # CC: the 16-bit type it runs (sm_75 has no bf16)
mutant() { # INDEX: builds and runs mutant INDEX on its emulated GPU, into $OUT/mutant_INDEX/
    local name cc args from to d=$OUT/mutant_$1 a envs=() flags=()
    IFS='|' read -r name cc args from to <<<"${MUTANTS[$1]}"
    for a in $args; do case $a in -*) flags+=("$a") ;; *=*) envs+=("$a") ;; *) flags+=("$a") ;; esac; done
    mkdir -p "$d"
    rm -f "$d/rc"
    FROM=$from TO=$to perl -0777 -e '
        my ($f, $t) = map { s/\\\\n/\x00/gr =~ s/\\n/\n/gr =~ s/\x00/\\n/gr } @ENV{qw(FROM TO)};
        my $src = do { local $/; <STDIN> };
        my $n = () = $src =~ /\Q$f\E/g;
        die "the text of the mutant occurs $n times in nanogpt.cu (must be once): update test/cuda_emu.sh\n" if $n != 1;
        $src =~ s/\Q$f\E/$t/;
        print $src;' <"$EMU_SRC" >"$d/mutant.cu" 2>"$d/log" || return
    { rewrite "$d/mutant.cu" "$d/emu.cpp" && $CXX $CXXFLAGS -DEMU_CC="$cc" -include test/cuda_emu.h -c "$d/emu.cpp" -o "$d/emu.o" &&
        $CXX -o "$d/test_gpu_ops" "$OUT/test_gpu_ops.o" "$d/emu.o" "$OUT/cuda_emu_runtime_$cc.o" -lm -lpthread $WRAP_ALLOC; } >"$d/log" 2>&1 || return
    env "${envs[@]}" "$d/test_gpu_ops" --small --fail-fast --dtype "$(mutant_dtype "$cc")" "${flags[@]}" >"$d/log" 2>&1
    echo $? >"$d/rc"
}
todo=()
if [ "$EMU_MUTANTS" = 1 ]; then
    for i in "${!MUTANTS[@]}"; do
        IFS='|' read -r name cc _ <<<"${MUTANTS[$i]}"
        [ -n "${EMU_MUTANTS_MATCH:-}" ] && ! grep -q -- "$EMU_MUTANTS_MATCH" <<<"$name" && continue
        case " $built " in
        *" $cc "*) todo+=("$i") ;;
        *) fail "mutant '$name': sm_$cc was not built" ;;
        esac
    done
    for i in "${todo[@]}"; do pool mutant "$i"; done
fi
wait_pooled
report_runs
if [ "$EMU_MUTANTS" = 1 ]; then
    echo "== mutants of nanogpt.cu on the emulated GPUs (each must fail test_gpu_ops --small --fail-fast --dtype bf16, f16 on sm_75)"
    for i in "${todo[@]}"; do
        d=$OUT/mutant_$i
        name=${MUTANTS[$i]%%|*}
        nfail=$(grep -c '^FAIL' "$d/log" 2>/dev/null)
        rc=$(cat "$d/rc" 2>/dev/null)
        if [ -z "$rc" ]; then
            tail -n 5 "$d/log"
            fail "mutant '$name' did not build or apply"
        elif [ "$rc" != 0 ] && { [ "$nfail" -gt 0 ] || { [ "$rc" -gt 1 ] && [ "$rc" != 137 ]; }; }; then
            # a failed case, or a crash (a killed run, 137, may be the machine's memory running out: not caught)
            first=$(grep -m 1 '^FAIL' "$d/log" | sed 's/^FAIL \([^:]*\):.*/\1/')
            echo "ok mutant caught: $name (exit $rc${first:+, by $first})"
            passed=$((passed + 1))
        else
            fail "mutant not caught: $name (test_gpu_ops passed it)"
        fi
    done
fi
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
