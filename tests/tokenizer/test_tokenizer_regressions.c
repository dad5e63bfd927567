/* test_tokenizer_regressions.c - replays every input in tests/corrupt/tokenize/
 * (invalid UTF-8, long runs of spaces, letters and digits, special tokens
 * glued together, rare white space and combining marks) through the fuzz
 * harness, so they run in every build, sanitizers included, with or without
 * clang. */
#include <dirent.h>
#include <stdlib.h>

#include "../../fuzz/fuzz_tokenize.c"
#include "harness.h"

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures (the harness needs its vocabulary)");
    const char *dir = "tests/corrupt/tokenize";
    DIR *dp = opendir(dir);
    if (!dp) rw_test_skip("tests/corrupt/tokenize not found (run from the repository root)");
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
    CHECK_MSG(fuzz_tok != NULL, "the harness could not load its vocabulary");
    printf("%d regression inputs replayed\n", n);
    CHECK(n > 0);
    rw_tokenizer_free(fuzz_tok);
    return rw_test_done();
}
