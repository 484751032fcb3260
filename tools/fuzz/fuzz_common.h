/* fuzz_common.h - what the libFuzzer targets share: a private temp folder (under $NGPT_FUZZ_TMP, else
 * /dev/shm or /tmp) holding the one file an input is written to, and writing seed files. Include after
 * nanogpt.c. */
#ifndef NGPT_FUZZ_COMMON_H
#define NGPT_FUZZ_COMMON_H

static char fz_dir[256], fz_path[320];

static void fz_cleanup(void) {
    if (fz_path[0]) unlink(fz_path);
    if (fz_dir[0]) rmdir(fz_dir);
}

static const char *fz_write(const char *name, const uint8_t *data, size_t size) {
    if (!fz_dir[0]) {
        const char *base = getenv("NGPT_FUZZ_TMP");
        if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        mkdir(base, 0700);
        snprintf(fz_dir, sizeof fz_dir, "%.200s/ngpt-fuzz-XXXXXX", base);
        if (!mkdtemp(fz_dir)) { perror("mkdtemp"); abort(); }
        atexit(fz_cleanup);
    }
    snprintf(fz_path, sizeof fz_path, "%s/%s", fz_dir, name);
    FILE *f = fopen(fz_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) { perror(fz_path); abort(); }
    return fz_path;
}

static void fz_seed(const char *dir, const char *name, const void *data, size_t n) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) { perror(path); exit(1); }
}

#endif
