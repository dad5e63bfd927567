/* test_chat_regressions.c - replays every input in tests/corrupt/chat_template/
 * (templates that crashed or overflowed an earlier version: nesting without
 * end, 64-bit overflow, namespace cycles, raise_exception with a newline, NUL
 * bytes in messages) through the fuzz harness, so they run in every build,
 * sanitizers included, with or without clang. */
#include "../../fuzz/fuzz_chat_template.c"
#include "harness.h"

int main(void) {
    rw_test_replay_corpus("tests/corrupt/chat_template", LLVMFuzzerTestOneInput); /* the harness traps on a broken property */
    return rw_test_done();
}
