/* files.h: file helpers shared by the test programs (include after ../nanogpt.c and check.h). */
#ifndef NGPT_TEST_FILES_H
#define NGPT_TEST_FILES_H
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A new folder of this run's own, /tmp/ngpt_test_NAME_XXXXXX made by mkdtemp (no earlier run's files can be in
 * it, nor another run's), into dir (cap bytes); readable by every user as mkdir(0755) makes it (test_cli runs
 * some tests as nobody). 0, or -1 with the current case failed (CHECK) saying why. */
static int test_folder(char *dir, size_t cap, const char *name) {
    if ((size_t)snprintf(dir, cap, "/tmp/ngpt_test_%s_XXXXXX", name) >= cap) {
        CHECK(0, "test_folder: /tmp/ngpt_test_%s_XXXXXX is longer than its %zu bytes", name, cap);
        return -1;
    }
    if (!mkdtemp(dir) || chmod(dir, 0755)) {
        CHECK(0, "test_folder: cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Removes folder dir and everything in it (rm -rf); 0, or -1 with a line saying it could not */
static int remove_folder(const char *dir) {
    char cmd[700];
    if ((size_t)snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) < sizeof cmd && system(cmd) == 0) return 0;
    printf("could not remove %s\n", dir);
    return -1;
}

/* The contents of path, malloced with a 0 byte after them; NULL when it cannot be read whole. Their size goes
 * to *n (0 on failure). */
static void *file_contents(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long size = -1;
    unsigned char *b = NULL;
    if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (b = (unsigned char *)malloc((size_t)size + 1)) != NULL) {
        if (fread(b, 1, (size_t)size, f) == (size_t)size) {
            b[size] = 0;
            *n = (size_t)size;
        } else {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    return b;
}

/* How many files in dir have needle in their name */
static int files_named(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strstr(e->d_name, needle) != NULL;
    if (d) closedir(d);
    return n;
}

/* How many files in dir have .tmp in their name: the temporary files of saves (path.tmp.PID.K) and of
 * prepares (NAME.tmp.PID), and any other of such a name */
static int temporaries_in(const char *dir) { return files_named(dir, ".tmp"); }
#endif
