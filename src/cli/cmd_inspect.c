/* cmd_inspect.c - `rewind inspect FILE.gguf [--json] [--dump TENSOR --out OUT.f32]`.
 *
 * Prints a GGUF file's metadata and tensor table (text or one JSON object),
 * or writes one tensor dequantized to little-endian float32. A file that
 * fails validation gives exit status 1 and the reader's one-line error. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_writer.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "rewind.h"

#define TEXT_ARRAY_SHOWN 8 /* elements shown of a long array in text mode */

/* ---- text output ---- */

static void print_text_str(rw_gguf_str s, size_t max) {
    putchar('"');
    size_t n = s.len < max ? (size_t)s.len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    if (n < s.len) printf("...(%" PRIu64 " bytes)", s.len);
    putchar('"');
}

static void print_text_value(const rw_gguf_value *v) {
    switch (v->type) {
    case RW_GGUF_STRING: print_text_str(v->str, 120); break;
    case RW_GGUF_BOOL: fputs(v->u ? "true" : "false", stdout); break;
    case RW_GGUF_FLOAT32: case RW_GGUF_FLOAT64: printf("%.9g", v->f); break;
    case RW_GGUF_INT8: case RW_GGUF_INT16: case RW_GGUF_INT32: case RW_GGUF_INT64: printf("%" PRId64, v->i); break;
    case RW_GGUF_ARRAY: {
        printf("[%s x %" PRIu64 "]", rw_gguf_type_name(v->arr.type), v->arr.n);
        uint64_t shown = v->arr.n < TEXT_ARRAY_SHOWN ? v->arr.n : TEXT_ARRAY_SHOWN;
        fputs(" [", stdout);
        for (uint64_t i = 0; i < shown; i++) {
            if (i) fputs(", ", stdout);
            int64_t x;
            double d;
            rw_gguf_str s;
            if (v->arr.type == RW_GGUF_STRING && rw_gguf_arr_str(v, i, &s)) print_text_str(s, 40);
            else if (v->arr.type == RW_GGUF_ARRAY) printf("[%s x %" PRIu64 "]", rw_gguf_type_name(v->arr.items[i].arr.type), v->arr.items[i].arr.n);
            else if ((v->arr.type == RW_GGUF_FLOAT32 || v->arr.type == RW_GGUF_FLOAT64) && rw_gguf_arr_float(v, i, &d)) printf("%.9g", d);
            else if (rw_gguf_arr_int(v, i, &x)) printf("%" PRId64, x);
            else fputs("?", stdout);
        }
        if (shown < v->arr.n) fputs(", ...", stdout);
        putchar(']');
        break;
    }
    default: printf("%" PRIu64, v->u); break;
    }
}

static void print_text(const rw_gguf *g, const char *path) {
    printf("%s: GGUF v%" PRIu32 ", %zu metadata entries, %zu tensors, alignment %" PRIu32 ", data at %" PRIu64 "\n", path,
           rw_gguf_version(g), rw_gguf_n_kv(g), rw_gguf_n_tensors(g), rw_gguf_alignment(g), rw_gguf_data_offset(g));
    printf("\nmetadata:\n");
    for (size_t i = 0; i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        printf("  %-44s %-6s = ", kv->key, rw_gguf_type_name(kv->value.type));
        print_text_value(&kv->value);
        putchar('\n');
    }
    printf("\ntensors:\n  %-40s %-8s %-28s %12s %12s\n", "name", "type", "ne", "offset", "bytes");
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "{");
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "}");
        printf("  %-40s %-8s %-28s %12" PRIu64 " %12" PRIu64 "\n", t->name, rw_dtype_name(t->type), shape,
               t->file_offset, t->nbytes);
    }
}

/* ---- JSON output ---- */

/* A number printed with the fewest digits that read back to the same double,
 * as Python's repr does (8.0 for an integral value: a float stays a float
 * for a reader that types numbers). A float32 is printed as its exact
 * widened double value (9.999999974752427e-07 for 1e-6f), so a reader
 * comparing with other tools' JSON (gguf-py widens the same way) gets equal
 * values. */
static void json_number(rw_json_writer *j, double v) {
    for (int prec = 1; prec < 17; prec++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            rw_json_real(j, v, prec);
            return;
        }
    }
    rw_json_real(j, v, 17);
}

static void json_value(rw_json_writer *j, const rw_gguf_value *v) {
    switch (v->type) {
    case RW_GGUF_STRING: rw_json_string(j, v->str.ptr, (size_t)v->str.len); break;
    case RW_GGUF_BOOL: rw_json_bool(j, v->u != 0); break;
    case RW_GGUF_FLOAT32: case RW_GGUF_FLOAT64: json_number(j, v->f); break;
    case RW_GGUF_INT8: case RW_GGUF_INT16: case RW_GGUF_INT32: case RW_GGUF_INT64: rw_json_int(j, v->i); break;
    case RW_GGUF_ARRAY:
        rw_json_begin_array(j);
        for (uint64_t i = 0; i < v->arr.n; i++) {
            double d;
            int64_t x;
            if (v->arr.items) json_value(j, &v->arr.items[i]);
            else if (v->arr.type == RW_GGUF_BOOL && rw_gguf_arr_int(v, i, &x)) rw_json_bool(j, x != 0);
            else if ((v->arr.type == RW_GGUF_FLOAT32 || v->arr.type == RW_GGUF_FLOAT64) && rw_gguf_arr_float(v, i, &d))
                json_number(j, d);
            else if (rw_gguf_arr_int(v, i, &x)) rw_json_int(j, x);
            else if (v->arr.type == RW_GGUF_UINT64) { /* above INT64_MAX */
                uint64_t u;
                memcpy(&u, v->arr.raw + 8 * i, 8);
                rw_json_uint(j, u);
            } else rw_json_null(j);
        }
        rw_json_end_array(j);
        break;
    default: rw_json_uint(j, v->u); break;
    }
}

static void print_json(const rw_gguf *g) {
    rw_json_writer j;
    rw_json_init(&j, stdout);
    rw_json_begin_object(&j);
    rw_json_key(&j, "version");
    rw_json_uint(&j, rw_gguf_version(g));
    rw_json_key(&j, "alignment");
    rw_json_uint(&j, rw_gguf_alignment(g));
    rw_json_key(&j, "data_offset");
    rw_json_uint(&j, rw_gguf_data_offset(g));
    rw_json_key(&j, "metadata");
    rw_json_begin_object(&j);
    for (size_t i = 0; i < rw_gguf_n_kv(g); i++) {
        const rw_gguf_kv *kv = rw_gguf_kv_at(g, i);
        rw_json_key(&j, kv->key);
        json_value(&j, &kv->value);
    }
    rw_json_end_object(&j);
    rw_json_key(&j, "tensors");
    rw_json_begin_array(&j);
    for (size_t i = 0; i < rw_gguf_n_tensors(g); i++) {
        const rw_gguf_tensor *t = rw_gguf_tensor_at(g, i);
        rw_json_begin_object(&j);
        rw_json_key(&j, "name");
        rw_json_cstring(&j, t->name);
        rw_json_key(&j, "type");
        rw_json_cstring(&j, rw_dtype_name(t->type));
        rw_json_key(&j, "ne");
        rw_json_begin_array(&j);
        for (uint32_t d = 0; d < t->n_dims; d++) rw_json_uint(&j, t->ne[d]);
        rw_json_end_array(&j);
        rw_json_key(&j, "offset");
        rw_json_uint(&j, t->file_offset);
        rw_json_key(&j, "nbytes");
        rw_json_uint(&j, t->nbytes);
        rw_json_end_object(&j);
    }
    rw_json_end_array(&j);
    rw_json_end_object(&j);
    putchar('\n');
}

/* ---- dump ---- */

static int dump_tensor(const rw_gguf *g, const char *name, const char *out) {
    const rw_gguf_tensor *t = rw_gguf_find_tensor(g, name);
    if (!t) {
        rw_cli_error("inspect", "no tensor named '%s'", name);
        return 1;
    }
    if (!rw_can_dequantize(t->type)) {
        rw_cli_error("inspect", "tensor '%s': dequantization of %s is not supported", name, rw_dtype_name(t->type));
        return 1;
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        rw_cli_error("inspect", "cannot create %s", out);
        return 1;
    }
    uint64_t row_len = t->ne[0], n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t row_bytes;
    rw_dtype_row_bytes(t->type, row_len, &row_bytes); /* validated by the reader */
    float *row = malloc((row_len ? row_len : 1) * sizeof *row);
    int rc = row ? 0 : 1;
    for (uint64_t r = 0; r < n_rows && rc == 0; r++) {
        const uint8_t *src = (const uint8_t *)t->data + r * row_bytes;
        if (rw_dequantize_row(t->type, src, row, (int64_t)row_len) != RW_OK ||
            fwrite(row, sizeof *row, (size_t)row_len, f) != row_len)
            rc = 1;
    }
    free(row);
    if (fclose(f) != 0) rc = 1;
    if (rc) rw_cli_error("inspect", "failed to write %s", out);
    return rc;
}

int rw_cmd_inspect(int argc, char **argv) {
    const char *path = NULL, *dump = NULL, *out = NULL;
    bool json = false;
    const rw_cli_opt opts[] = {
        {"--json", RW_OPT_FLAG, &json, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--dump", RW_OPT_STR, &dump, 0, 0, 0, 0, NULL, NULL, NULL},
        {"--out", RW_OPT_STR, &out, 0, 0, 0, 0, NULL, NULL, NULL},
        RW_OPT_END,
    };
    if (rw_cli_parse_opts("inspect", argc, argv, opts, &path, 1, NULL)) return 2;
    if (!path || (dump && !out)) {
        fprintf(stderr, "usage: rewind inspect FILE.gguf [--json] [--dump TENSOR --out OUT.f32]\n");
        return 2;
    }
    rw_gguf *g;
    rw_error err = {0};
    if (rw_gguf_open(path, &g, &err) != RW_OK) {
        rw_cli_error("inspect", "%s", err.msg);
        return 1;
    }
    int rc = 0;
    if (dump) rc = dump_tensor(g, dump, out);
    else if (json) print_json(g);
    else print_text(g, path);
    rw_gguf_close(g);
    return rc;
}

/* `rewind architectures`: one general.architecture value a line, the ones
 * this build loads (a script checks a file's architecture against it). */
int rw_cmd_architectures(int argc, char **argv) {
    if (argc > 1) {
        rw_cli_error("architectures", "takes no arguments");
        return 2;
    }
    for (size_t i = 0; rw_architecture(i); i++) puts(rw_architecture(i));
    return 0;
}
