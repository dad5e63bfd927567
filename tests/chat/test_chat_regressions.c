/* test_chat_regressions.c - replays every input in tests/corrupt/chat_template/
 * (templates that crashed or overflowed an earlier version: nesting without
 * end, 64-bit overflow, namespace cycles, raise_exception with a newline, NUL
 * bytes in messages) through the fuzz harness, so they run in every build,
 * sanitizers included, with or without clang. */
#include <dirent.h>
#include <stdlib.h>

#include "../../fuzz/fuzz_chat_template.c"
#include "harness.h"

int main(void) {
    const char *dir = "tests/corrupt/chat_template";
    DIR *dp = opendir(dir);
    if (!dp) rw_test_skip("tests/corrupt/chat_template not found (run from the repository root)");
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
