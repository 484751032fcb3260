/* fuzz_common.h - what the libFuzzer targets share: a private temp folder (under $NGPT_FUZZ_TMP, else
 * /dev/shm or /tmp) holding the few files an input is written to, removed at exit; writing seed files; and
 * the NGPT_FUZZ_SEEDS=DIR convention (write the target's seeds into DIR and exit). Include after nanogpt.c. */
#ifndef NGPT_FUZZ_COMMON_H
#define NGPT_FUZZ_COMMON_H

#define FZ_MAX_FILES 4
static char fz_dir[256], fz_files[FZ_MAX_FILES][320];
static int fz_nfiles;

static void fz_cleanup(void) {
    for (int i = 0; i < fz_nfiles; i++) unlink(fz_files[i]);
    if (fz_dir[0]) rmdir(fz_dir);
}

/* makes the temp folder (once) */
static void fz_mkdir(void) {
    if (fz_dir[0]) return;
    const char *base = getenv("NGPT_FUZZ_TMP");
    if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    mkdir(base, 0700);
    snprintf(fz_dir, sizeof fz_dir, "%.200s/ngpt-fuzz-XXXXXX", base);
    if (!mkdtemp(fz_dir)) { perror("mkdtemp"); abort(); }
    atexit(fz_cleanup);
}

/* the path of `name` in the temp folder, remembered for the cleanup */
static const char *fz_file(const char *name) {
    fz_mkdir();
    char path[320];
    snprintf(path, sizeof path, "%s/%s", fz_dir, name);
    for (int i = 0; i < fz_nfiles; i++)
        if (!strcmp(fz_files[i], path)) return fz_files[i];
    if (fz_nfiles == FZ_MAX_FILES) { fprintf(stderr, "fuzz_common.h: more than %d temp files\n", FZ_MAX_FILES); abort(); }
    memcpy(fz_files[fz_nfiles], path, sizeof path);
    return fz_files[fz_nfiles++];
}

/* writes data to `name` in the temp folder; returns its path */
static const char *fz_write(const char *name, const uint8_t *data, size_t size) {
    const char *path = fz_file(name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) { perror(path); abort(); }
    return path;
}

static void fz_seed(const char *dir, const char *name, const void *data, size_t n) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) { perror(path); exit(1); }
}

/* the folder NGPT_FUZZ_SEEDS names, or NULL when seeds are not asked for */
static const char *fz_seeds_dir(void) {
    const char *seeds = getenv("NGPT_FUZZ_SEEDS");
    return seeds && *seeds ? seeds : NULL;
}

/* LLVMFuzzerInitialize for a target whose only set-up is writing its seeds (make_seeds(dir)) on request */
#define FZ_INITIALIZE_SEEDS_ONLY(make_seeds)                                                                  \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {                                                        \
        (void)argc;                                                                                            \
        (void)argv;                                                                                            \
        const char *dir_ = fz_seeds_dir();                                                                     \
        if (dir_) {                                                                                            \
            make_seeds(dir_);                                                                                  \
            exit(0);                                                                                           \
        }                                                                                                      \
        return 0;                                                                                              \
    }

#endif
