/* check.h: the tiny test harness shared by test/test_*.c.
 *
 * Each test program includes ../nanogpt.c (with NGPT_NO_MAIN), runs its cases, and prints one line per
 * case ("ok NAME" or "FAIL NAME: why"), then "summary: P passed, F failed". Its exit status is 1 when any
 * case failed. build.sh adds the summaries up into the suite's closing line.
 *
 *   static void test_something(void) {
 *       CHECK(x == 3, "x was %d", x);            // records a failure of the current case, goes on
 *       CHECK_CLOSE(got, want, 1e-5, "loss");    // relative/absolute closeness of two doubles
 *   }
 *   int main(void) { RUN(test_something); return check_summary(); }
 */
#ifndef NGPT_TEST_CHECK_H
#define NGPT_TEST_CHECK_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed, check_case_failed;
static const char *check_case_name = "";

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            if (!check_case_failed) printf("FAIL %s: ", check_case_name);                \
            else printf("     %s: ", check_case_name);                                    \
            printf(__VA_ARGS__);                                                           \
            printf("  [%s:%d]\n", __FILE__, __LINE__);                                     \
            check_case_failed = 1;                                                         \
        }                                                                                  \
    } while (0)

/* |got - want| <= tol * max(1, |want|) */
#define CHECK_CLOSE(got, want, tol, what)                                                  \
    do {                                                                                   \
        double g_ = (double)(got), w_ = (double)(want);                                    \
        double s_ = fabs(w_) > 1.0 ? fabs(w_) : 1.0;                                       \
        CHECK(fabs(g_ - w_) <= (tol) * s_ && g_ == g_, "%s: got %.9g want %.9g (tol %.1e)", \
              (what), g_, w_, (double)(tol));                                             \
    } while (0)

/* NGPT_TEST_ONLY=name, for one test program run by hand (build/test_cli, say; not ./build.sh test, where every
 * other program would fail on it): only that case runs; a name that is no case here fails (check_summary) */
#define RUN(fn)                                                                            \
    do {                                                                                   \
        const char *only_ = getenv("NGPT_TEST_ONLY");                                      \
        if (only_ && *only_ && strcmp(only_, #fn)) break;                                  \
        check_case_name = #fn;                                                             \
        check_case_failed = 0;                                                             \
        fflush(stdout);                                                                    \
        fn();                                                                              \
        if (check_case_failed) check_failed++;                                             \
        else { check_passed++; printf("ok %s\n", #fn); }                                   \
        fflush(stdout);                                                                    \
    } while (0)

static int check_summary(void) {
    const char *only = getenv("NGPT_TEST_ONLY");
    if (only && *only && !check_passed && !check_failed) { /* a misspelt name must not pass as a run of nothing */
        printf("FAIL NGPT_TEST_ONLY=%s: no case of that name here\n", only);
        check_failed++;
    }
    printf("summary: %d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

/* Where the shared test data lives (Tiny Shakespeare, GPT-2 vocabulary): $NGPT_SHARED_DATA or ../shared/data. */
static const char *shared_data_dir(void) {
    const char *d = getenv("NGPT_SHARED_DATA");
    return d && *d ? d : "../shared/data";
}
#endif
