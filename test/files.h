/* files.h: file helpers shared by the test programs (include after ../nanogpt.c). */
#ifndef NGPT_TEST_FILES_H
#define NGPT_TEST_FILES_H
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* How many files in dir have .tmp in their name: the temporary files of saves (path.tmp.PID.K) and of
 * prepares (NAME.tmp.PID), and any other of such a name */
static int temporaries_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strstr(e->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    return n;
}
#endif
