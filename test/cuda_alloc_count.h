/* cuda_alloc_count.h: every CUDA allocation call of this process, counted. The GPU tests that include it
 * are linked with -Wl,--wrap=cudaMalloc,--wrap=cudaMallocHost,--wrap=cudaFree (test/gpu.sh,
 * test/cuda_emu.sh), so the calls of nanogpt.cu's objects come here first. */
static long cuda_alloc_calls;
extern int __real_cudaMalloc(void **p, size_t n);
extern int __real_cudaMallocHost(void **p, size_t n);
extern int __real_cudaFree(void *p);
int __wrap_cudaMalloc(void **p, size_t n) { cuda_alloc_calls++; return __real_cudaMalloc(p, n); }
int __wrap_cudaMallocHost(void **p, size_t n) { cuda_alloc_calls++; return __real_cudaMallocHost(p, n); }
int __wrap_cudaFree(void *p) { cuda_alloc_calls++; return __real_cudaFree(p); }
