/* test_gguf_regressions.c - replays every input in tests/corrupt/gguf/ (each
 * one crashed an earlier version) through the fuzz harness's property check,
 * so the regressions run in every build, with or without clang. */
#include <dirent.h>
#include <stdlib.h>

#include "../../fuzz/fuzz_gguf.c"
#include "harness.h"

int main(void) {
    const char *dir = "tests/corrupt/gguf";
    DIR *dp = opendir(dir);
    if (!dp) rw_test_skip("tests/corrupt/gguf not found (run from the repository root)");
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
        LLVMFuzzerTestOneInput(data, size); /* traps on a broken property */
        free(data);
        n++;
    }
    closedir(dp);
    printf("%d regression inputs replayed\n", n);
    CHECK(n > 0);
    return rw_test_done();
}
