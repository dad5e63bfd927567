/* harness.c - helpers for the C tests (see harness.h). */
#include "harness.h"

#include <dirent.h>
#include <string.h>

#include "kernels/matmul.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int rw_test_failures = 0;

/* The library reads no environment; as the CLI does, the tests take
 * RW_KERNELS and RW_NUMERICS from it (to run a test on another tier by hand). */
__attribute__((constructor)) static void apply_env(void) {
    const char *k = getenv("RW_KERNELS");
    for (int t = 0; k && *k && t < RW_TIER_COUNT; t++)
        if (!strcmp(k, rw_kernel_tier_name((rw_kernel_tier)t))) rw_kernel_tier_set((rw_kernel_tier)t);
    rw_numerics nm;
    const char *n = getenv("RW_NUMERICS");
    if (n && *n && rw_numerics_parse(n, &nm)) rw_numerics_set(nm);
}

const char *rw_test_fixtures(void) {
    static char path[4096];
    const char *env = getenv("RW_FIXTURES");
    snprintf(path, sizeof path, "%s", env && *env ? env : "../shared/fixtures");
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return path;
}

const char *rw_test_fixture_path(const char *rel) {
    static char path[4096];
    const char *dir = rw_test_fixtures();
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "../shared/fixtures", rel);
    return path;
}

void rw_test_skip(const char *why) {
    printf("skipped: %s\n", why);
    fflush(stdout);
    exit(77);
}

void *rw_test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (size) *size = (size_t)n; }
    return buf;
}

int rw_test_replay_corpus(const char *dir, int (*fn)(const unsigned char *data, size_t size)) {
    DIR *dp = opendir(dir);
    if (!dp) {
        char why[4200];
        snprintf(why, sizeof why, "%s not found (run from the repository root)", dir);
        rw_test_skip(why);
    }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size;
        unsigned char *data = rw_test_read_file(path, &size);
        CHECK_MSG(data != NULL, "cannot read %s", path);
        if (!data) continue;
        fn(data, size);
        free(data);
        n++;
    }
    closedir(dp);
    printf("%d regression inputs replayed\n", n);
    CHECK(n > 0);
    return n;
}

bool rw_test_sanitized(void) {
    const char *s = getenv("RW_SANITIZE");
    return s && strcmp(s, "1") == 0;
}

int rw_test_done(void) {
    if (rw_test_failures) {
        fprintf(stderr, "%d check(s) failed\n", rw_test_failures);
        return 1;
    }
    return 0;
}
