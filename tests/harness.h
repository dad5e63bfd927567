/* harness.h - the small test framework every C test uses.
 *
 * A test program is one main() that calls CHECK* macros; a failed check
 * prints file:line and both sides and counts a failure. rw_test_done()
 * returns the exit status (0 pass, 1 fail). rw_test_skip() exits 77, which
 * scripts/run-tests.sh reports as skipped. */
#ifndef RW_TESTS_HARNESS_H
#define RW_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int rw_test_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            rw_test_failures++;                                                      \
        }                                                                            \
    } while (0)

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            rw_test_failures++;                                                      \
        }                                                                            \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                          \
    do {                                                                                            \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                       \
        if (va_ != vb_) {                                                                           \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s = %lld, %s = %lld\n", __FILE__, __LINE__, #a, \
                    va_, #b, vb_);                                                                  \
            rw_test_failures++;                                                                     \
        }                                                                                           \
    } while (0)

/* Path of the shared fixtures folder ($RW_FIXTURES or ../shared/fixtures),
 * or NULL if it does not exist. */
const char *rw_test_fixtures(void);

/* Joins the fixtures folder and rel into a static buffer. */
const char *rw_test_fixture_path(const char *rel);

/* Prints why and exits 77 (skipped). */
_Noreturn void rw_test_skip(const char *why);

/* Reads a whole file into a malloc'd buffer (caller frees); NULL on error. */
void *rw_test_read_file(const char *path, size_t *size);

/* Feeds every file of dir (a regression corpus; dot files aside) to the
 * fuzz harness entry point fn, which traps on a broken property; skips the
 * test if dir is missing (not run from the repository root). Returns the
 * number of inputs replayed, after printing it and checking it is > 0. */
int rw_test_replay_corpus(const char *dir, int (*fn)(const unsigned char *data, size_t size));

/* True when running in the sanitizer build (tests may shrink their work). */
bool rw_test_sanitized(void);

int rw_test_done(void);

#endif
