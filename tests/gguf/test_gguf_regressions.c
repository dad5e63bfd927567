/* test_gguf_regressions.c - replays every input in tests/corrupt/gguf/ (each
 * one crashed an earlier version) through the fuzz harness's property check,
 * so the regressions run in every build, with or without clang. */
#include "../../fuzz/fuzz_gguf.c"
#include "harness.h"

int main(void) {
    rw_test_replay_corpus("tests/corrupt/gguf", LLVMFuzzerTestOneInput); /* the harness traps on a broken property */
    return rw_test_done();
}
