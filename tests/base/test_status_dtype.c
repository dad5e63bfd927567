/* test_status_dtype.c - the status list and the dtype table. */
#include <string.h>

#include "base/dtype.h"
#include "base/status.h"
#include "harness.h"

int main(void) {
    CHECK(!strcmp(rw_status_name(RW_ERR_FORMAT), "ERR_FORMAT"));
    CHECK(!strcmp(rw_status_message(RW_OK), "success"));
    CHECK(!strcmp(rw_status_name((rw_status)999), "ERR_UNKNOWN"));
    rw_error err;
    CHECK(rw_errorf(&err, RW_ERR_IO, "line one\nline two %d", 2) == RW_ERR_IO);
    CHECK(err.code == RW_ERR_IO && !strchr(err.msg, '\n'));
    rw_error_prefix(&err, "file.gguf");
    CHECK(!strncmp(err.msg, "file.gguf: line one", 19));
    CHECK(rw_errorf(NULL, RW_ERR_NOMEM, "x") == RW_ERR_NOMEM);

    /* ggml's geometry for a few types, and the removed ids */
    CHECK_EQ_INT(rw_dtype_type_size(RW_TYPE_Q4_K), 144);
    CHECK_EQ_INT(rw_dtype_block_size(RW_TYPE_Q6_K), 256);
    CHECK_EQ_INT(rw_dtype_type_size(RW_TYPE_MXFP4), 17);
    CHECK(!rw_dtype_valid(4) && !rw_dtype_valid(31) && !rw_dtype_valid(40));
    rw_dtype t;
    CHECK(rw_dtype_from_name("q5_k", &t) && t == RW_TYPE_Q5_K);
    CHECK(!rw_dtype_from_name("Q9_9", &t));
    uint64_t bytes;
    CHECK(rw_dtype_row_bytes(RW_TYPE_Q8_0, 64, &bytes) && bytes == 68);
    CHECK(!rw_dtype_row_bytes(RW_TYPE_Q8_0, 65, &bytes));
    uint64_t ne[2] = {256, 3};
    CHECK(rw_dtype_tensor_bytes(RW_TYPE_Q4_K, ne, 2, &bytes) && bytes == 432);
    uint64_t big[3] = {1ull << 40, 1ull << 40, 1ull << 40};
    CHECK(!rw_dtype_tensor_bytes(RW_TYPE_F32, big, 3, &bytes));
    return rw_test_done();
}
