#!/usr/bin/env bash
# build.sh - build and test nanogpt.
#
#   ./build.sh            build ./nanogpt (with CUDA when nvcc is found, CPU-only otherwise)
#   ./build.sh cpu        build ./nanogpt CPU-only
#   ./build.sh debug      CPU-only, -O0 -g
#   ./build.sh asan       run the CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   ./build.sh tsan       run the CPU test suite under ThreadSanitizer (the thread pool, lanes, stop requests)
#   ./build.sh test       run the whole test suite (ends with "N passed, N failed"), the CUDA kernels on the
#                         CPU included (test/cuda_emu.sh) where nvcc's headers are installed
#   ./build.sh cuda-check compile nanogpt.cu for every target architecture
#   ./build.sh clean      remove what the builds made
#
# Environment: CC (default cc), CXX (default c++, for the C++ build of the API test), NVCC (default: nvcc on
# PATH or /usr/local/cuda/bin/nvcc), CFLAGS (replace the default optimisation flags), CUDA_ARCHS (default
# "75 80 86 89 90a"), NGPT_SHARED_DATA (test data folder, default ../shared/data).
set -euo pipefail
cd "$(dirname "$0")"

CC=${CC:-cc}
CXX=${CXX:-c++}
CFLAGS=${CFLAGS:--O3 -march=native}
WARN="-std=c11 -Wall -Wextra -fno-trapping-math -fno-math-errno" # no FP traps or errno are read; lets gcc vectorise exp/erf/sqrt loops
LIBS="-lm -lpthread"
# sm_75 (T4, RTX 20: no bf16, so fp16 with loss scaling) to sm_90a (H100, H200); tools/cuda_compile_check.sh
# compiles the same list and fails where this default leaves one of its architectures out
CUDA_ARCHS=${CUDA_ARCHS:-"75 80 86 89 90a"}

find_nvcc() {
    if [ -n "${NVCC:-}" ]; then command -v "$NVCC" || true; return; fi
    command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true
}

# machine code for each architecture, plus compute_80 PTX that the driver compiles at start on GPUs newer than
# the list (Blackwell and later: they run the mma.sync kernels)
gencode_flags() {
    local flags="" a
    for a in $1; do flags="$flags -gencode arch=compute_$a,code=sm_$a"; done
    echo "$flags -gencode arch=compute_80,code=compute_80"
}

build_cpu() {
    echo "building ./nanogpt for the CPU ($CC $CFLAGS)"
    $CC $WARN $CFLAGS -o nanogpt nanogpt.c $LIBS
}

build_cuda() {
    local nvcc=$1
    local ver
    ver=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    echo "nvcc $ver found: building with CUDA for$(for a in $CUDA_ARCHS; do printf ' sm_%s' "$a"; done)"
    mkdir -p build
    # the architectures compiled side by side, one a core (nvcc 11.2 on): 2m15 on a 2-core VM for five, where one
    # at a time took 2m56 for four
    local threads=() help
    help=$("$nvcc" --help 2>/dev/null || true) # read whole: grep -q would end the pipe early, and pipefail would count it
    case "$help" in *--threads*) threads=(--threads 0) ;; esac
    "$nvcc" ${threads[@]+"${threads[@]}"} -O3 -std=c++17 $(gencode_flags "$CUDA_ARCHS") -Xcompiler -Wall,-Wextra -c nanogpt.cu -o build/nanogpt_cuda.o
    $CC $WARN $CFLAGS -DNGPT_CUDA -c nanogpt.c -o build/nanogpt.o
    # the CUDA runtime is linked statically (nvcc knows where its own libraries are): the binary needs only
    # the driver
    "$nvcc" -o nanogpt build/nanogpt.o build/nanogpt_cuda.o -cudart static -lm -lpthread -ldl -lrt
}

# Compiles and runs every test/test_*.c that does not need a GPU; prints each program's lines, then the total.
# The programs go into build/ (release) or build/LABEL/, so that the sanitizer suites can run at once.
run_tests() {
    local extra_cflags=$1 label=$2 B=build
    local shared=${NGPT_SHARED_DATA:-../shared/data}
    if [ ! -f "$shared/tinyshakespeare.txt" ] || [ ! -f "$shared/gpt2/encoder.json" ]; then
        echo "warning: the test data is not in $shared (tinyshakespeare.txt, gpt2/encoder.json and gpt2/vocab.bpe): the tests that" \
             "read it fail; set NGPT_SHARED_DATA to the folder that holds it"
    fi
    [ "$label" = release ] || B=build/$label
    mkdir -p "$B"
    local t name
    passed=0 failed=0
    for t in test/test_*.c; do
        name=$(basename "$t" .c)
        case "$name" in test_gpu*) continue ;; esac
        echo "== $name ($label)"
        if [ "$name" = test_api ]; then
            # an embedder's program: only nanogpt.h, linked against nanogpt.c built as a library, as C99 and as C++
            # (the header alone also clean under C++ projects' -Wold-style-cast and -Wconversion: clang++ sees into inline
            # functions no one calls, g++ does not)
            if ! { $CC $WARN $CFLAGS $extra_cflags -DNGPT_NO_MAIN -c nanogpt.c -o "$B/nanogpt_lib.o" &&
                   $CC -std=c99 -pedantic -Wall -Wextra -D_POSIX_C_SOURCE=200809L $CFLAGS $extra_cflags -I. -c "$t" -o "$B/test_api_c.o" &&
                   $CC $extra_cflags -o "$B/test_api_c99" "$B/test_api_c.o" "$B/nanogpt_lib.o" $LIBS &&
                   $CXX -std=c++11 -Wall -Wextra $CFLAGS $extra_cflags -I. -x c++ -c "$t" -o "$B/test_api_cxx.o" &&
                   echo '#include "nanogpt.h"' >"$B/header_only.cc" &&
                   $(command -v clang++ || echo $CXX) -std=c++11 -Wall -Wextra -Wold-style-cast -Wconversion -Werror -I. -fsyntax-only "$B/header_only.cc" &&
                   $CXX $extra_cflags -o "$B/test_api_cxx" "$B/test_api_cxx.o" "$B/nanogpt_lib.o" $LIBS; } 2>"$B/$name.cc.log"; then
                cat "$B/$name.cc.log"
                echo "FAIL $name: did not compile"
                failed=$((failed + 1))
                continue
            fi
            [ -s "$B/$name.cc.log" ] && cat "$B/$name.cc.log"
            run_one "$name (C99)" "$B/test_api_c99"
            run_one "$name (C++)" "$B/test_api_cxx"
            continue
        fi
        if ! $CC $WARN -Wno-unused-function $CFLAGS $extra_cflags -Itest -o "$B/$name" "$t" $LIBS 2>"$B/$name.cc.log"; then
            cat "$B/$name.cc.log"
            echo "FAIL $name: did not compile"
            failed=$((failed + 1))
            continue
        fi
        [ -s "$B/$name.cc.log" ] && cat "$B/$name.cc.log"
        run_one "$name" "$B/$name"
    done
    TEST_PASSED=$((TEST_PASSED + passed))
    TEST_FAILED=$((TEST_FAILED + failed))
}

# Runs one test program and adds its summary line to passed/failed (of the caller).
run_one() {
    local name=$1 bin=$2 out rc p f t0=$SECONDS
    set +e
    out=$("$bin" 2>&1)
    rc=$?
    set -e
    echo "$out"
    echo "($name took $((SECONDS - t0)) s)"
    p=$(echo "$out" | sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' | tail -1)
    f=$(echo "$out" | sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' | tail -1)
    if [ -z "$p" ]; then
        echo "FAIL $name: exited with status $rc before its summary"
        failed=$((failed + 1))
        return
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exit status $rc"
        failed=$((failed + 1))
    fi
}

# Adds a checker's closing "summary: N passed, N failed" line (name, its output) to the totals.
add_summary() {
    local p f
    p=$(echo "$2" | sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' | tail -1)
    f=$(echo "$2" | sed -n 's/^summary: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' | tail -1)
    if [ -z "$p" ]; then echo "FAIL $1: no summary"; TEST_FAILED=$((TEST_FAILED + 1)); return; fi
    TEST_PASSED=$((TEST_PASSED + p))
    TEST_FAILED=$((TEST_FAILED + f))
}

# Compiles nanogpt.cu for every target (tools/cuda_compile_check.sh) and adds its checks to the totals.
cuda_check() {
    local nvcc out
    nvcc=$(find_nvcc)
    if [ -z "$nvcc" ]; then echo "nvcc not found: skipping the CUDA compile check"; return 0; fi
    set +e
    out=$(NVCC="$nvcc" bash tools/cuda_compile_check.sh 2>&1)
    set -e
    echo "$out"
    add_summary cuda_compile_check "$out"
}

# nanogpt.cu's kernels run on the CPU by the CUDA emulator (test/cuda_emu.sh: test_gpu_ops --small,
# test_gpu_train --quick and the nanogpt program on an emulated sm_75, sm_80 and sm_90, then the mutants
# it must catch): added to the totals. It needs nvcc's headers.
cuda_emulator() {
    local nvcc out
    nvcc=$(find_nvcc)
    if [ -z "$nvcc" ]; then echo "nvcc not found: skipping the CUDA emulator (it needs the CUDA headers)"; return 0; fi
    set +e
    out=$(NVCC="$nvcc" CC="$CC" CXX="$CXX" bash test/cuda_emu.sh 2>&1)
    set -e
    echo "$out"
    add_summary "cuda emulator" "$out"
}

# test/gpu.sh's readers of nanogpt's output, fed by a CPU build, and its GPU steps dry on stand-ins (bash test/gpu.sh
# selftest): added to the totals.
gpu_script_selftest() {
    local out
    set +e
    out=$(bash test/gpu.sh selftest 2>&1)
    set -e
    echo "$out"
    add_summary "gpu.sh selftest" "$out"
}

# Compiles nanogpt.c with gcc and clang (those found), -Wall -Wextra -Werror, as the program and as a library
# (NGPT_NO_MAIN), for this CPU and for a generic x86-64/arm64: one check each, added to the totals.
warnings_check() {
    local cc_name mode flags
    for cc_name in gcc clang; do
        if ! command -v "$cc_name" >/dev/null 2>&1; then echo "$cc_name not found: skipping its warnings check"; continue; fi
        # the program and the library with build.sh's own flags (some warnings appear only at -O3), and a generic -O2
        # and a vendored library as other build systems compile it: -Os, with _GNU_SOURCE defined on the command line
        for mode in "program -O3 -march=native" "library -O3 -march=native -DNGPT_NO_MAIN" "generic -O2" "vendored -Os -DNGPT_NO_MAIN -D_GNU_SOURCE"; do
            flags=${mode#* }
            if "$cc_name" $WARN -Werror $flags -c nanogpt.c -o build/warnings_check.o 2>build/warnings_check.log; then
                echo "ok $cc_name -Wall -Wextra -Werror: ${mode%% *}"
                TEST_PASSED=$((TEST_PASSED + 1))
            else
                cat build/warnings_check.log
                echo "FAIL $cc_name -Wall -Wextra -Werror: ${mode%% *}"
                TEST_FAILED=$((TEST_FAILED + 1))
            fi
        done
    done
}

cmd=${1:-build}
case "$cmd" in
    build)
        nvcc=$(find_nvcc)
        if [ -n "$nvcc" ] && [ -f nanogpt.cu ]; then build_cuda "$nvcc"; else echo "nvcc not found: CPU-only build"; build_cpu; fi ;;
    cpu) build_cpu ;;
    debug) CFLAGS="-O0 -g" build_cpu ;;
    asan)
        TEST_PASSED=0 TEST_FAILED=0
        CFLAGS="-O1 -g -fno-omit-frame-pointer" run_tests "-fsanitize=address,undefined -fno-sanitize-recover=undefined -DNGPT_SANITIZE" asan
        echo "$TEST_PASSED passed, $TEST_FAILED failed"
        [ "$TEST_FAILED" -eq 0 ] ;;
    tsan)
        TEST_PASSED=0 TEST_FAILED=0
        CFLAGS="-O1 -g" run_tests "-fsanitize=thread -DNGPT_SANITIZE -DNGPT_TSAN" tsan
        echo "$TEST_PASSED passed, $TEST_FAILED failed"
        [ "$TEST_FAILED" -eq 0 ] ;;
    test)
        TEST_PASSED=0 TEST_FAILED=0
        run_tests "" release
        echo "== warnings check"
        mkdir -p build
        warnings_check
        echo "== CUDA compile check"
        cuda_check
        echo "== nanogpt.cu's kernels on the CUDA emulator (no GPU)"
        cuda_emulator
        echo "== test/gpu.sh selftest (its output readers, without a GPU)"
        gpu_script_selftest
        echo "$TEST_PASSED passed, $TEST_FAILED failed"
        [ "$TEST_FAILED" -eq 0 ] ;;
    cuda-check) TEST_PASSED=0 TEST_FAILED=0; cuda_check; [ "$TEST_FAILED" -eq 0 ] ;;
    clean) rm -rf build nanogpt ;;
    *) echo "usage: ./build.sh [build|cpu|debug|asan|tsan|test|cuda-check|clean]" >&2; exit 2 ;;
esac
