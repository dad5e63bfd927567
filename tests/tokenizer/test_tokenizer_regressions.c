/* test_tokenizer_regressions.c - replays every input in tests/corrupt/tokenize/
 * (invalid UTF-8, long runs of spaces, letters and digits, special tokens
 * glued together, rare white space and combining marks) through the fuzz
 * harness, so they run in every build, sanitizers included, with or without
 * clang. */
#include "../../fuzz/fuzz_tokenize.c"
#include "harness.h"

int main(void) {
    if (!rw_test_fixtures()) rw_test_skip("no ../shared/fixtures (the harness needs its vocabulary)");
    rw_test_replay_corpus("tests/corrupt/tokenize", LLVMFuzzerTestOneInput); /* traps on a broken property */
    CHECK_MSG(fuzz_tok != NULL, "the harness could not load its vocabulary");
    rw_tokenizer_free(fuzz_tok);
    return rw_test_done();
}
