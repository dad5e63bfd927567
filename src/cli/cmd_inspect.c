/* cmd_inspect.c - `rewind inspect FILE.gguf [--json] [--dump TENSOR --out OUT.f32]`.
 *
 * Prints a GGUF file's metadata and tensor table (text or one JSON object),
 * or writes one tensor dequantized to little-endian float32. A file that
 * fails validation gives exit status 1 and the reader's one-line error. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_json.h"
#include "cli/options.h"

#define TEXT_ARRAY_SHOWN 8 /* elements shown of a long array in text mode */

static bool is_float(rw_meta_type t) { return t == RW_META_FLOAT32 || t == RW_META_FLOAT64; }
static bool is_signed(rw_meta_type t) {
    return t == RW_META_INT8 || t == RW_META_INT16 || t == RW_META_INT32 || t == RW_META_INT64;
}

/* ---- text output ---- */

static void print_text_str(const char *p, uint64_t len, size_t max) {
    putchar('"');
    size_t n = len < max ? (size_t)len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    if (n < len) printf("...(%" PRIu64 " bytes)", len);
    putchar('"');
}

/* An array's element in text: strings cut at 40 bytes, nested arrays as
 * their type and length; "?" for a uint64 above INT64_MAX. */
static void print_text_elem(const rw_meta_value *e) {
    if (e->type == RW_META_STRING) print_text_str(e->str, e->str_len, 40);
    else if (e->type == RW_META_ARRAY) printf("[%s x %" PRIu64 "]", rw_meta_type_name(e->elem_type), e->n_elems);
    else if (is_float(e->type)) printf("%.9g", e->f);
    else if (is_signed(e->type)) printf("%" PRId64, e->i);
    else if (e->u <= INT64_MAX) printf("%" PRIu64, e->u);
    else fputs("?", stdout);
}

static void print_text_value(const rw_meta_value *v) {
    switch (v->type) {
    case RW_META_STRING: print_text_str(v->str, v->str_len, 120); break;
    case RW_META_BOOL: fputs(v->u ? "true" : "false", stdout); break;
    case RW_META_FLOAT32: case RW_META_FLOAT64: printf("%.9g", v->f); break;
    case RW_META_INT8: case RW_META_INT16: case RW_META_INT32: case RW_META_INT64: printf("%" PRId64, v->i); break;
    case RW_META_ARRAY: {
        printf("[%s x %" PRIu64 "]", rw_meta_type_name(v->elem_type), v->n_elems);
        uint64_t shown = v->n_elems < TEXT_ARRAY_SHOWN ? v->n_elems : TEXT_ARRAY_SHOWN;
        fputs(" [", stdout);
        for (uint64_t i = 0; i < shown; i++) {
            if (i) fputs(", ", stdout);
            rw_meta_value e;
            if (rw_meta_elem(v, i, &e)) print_text_elem(&e);
            else fputs("?", stdout);
        }
        if (shown < v->n_elems) fputs(", ...", stdout);
        putchar(']');
        break;
    }
    default: printf("%" PRIu64, v->u); break;
    }
}

static void print_text(const rw_model_file *f, const char *path) {
    printf("%s: GGUF v%" PRIu32 ", %zu metadata entries, %zu tensors, alignment %" PRIu32 ", data at %" PRIu64 "\n",
           path, rw_model_file_version(f), rw_model_file_n_meta(f), rw_model_file_n_tensors(f),
           rw_model_file_alignment(f), rw_model_file_data_offset(f));
    const uint32_t parts = rw_model_file_n_parts(f);
    if (parts > 1) printf("a split model: %" PRIu32 " parts; each tensor's offset is in its part\n", parts);
    printf("\nmetadata:\n");
    rw_meta_value v;
    for (size_t i = 0; i < rw_model_file_n_meta(f); i++) {
        const char *key = rw_model_file_meta(f, i, &v);
        printf("  %-44s %-6s = ", key, rw_meta_type_name(v.type));
        print_text_value(&v);
        putchar('\n');
    }
    printf("\ntensors:\n  %-40s %-8s %-28s %12s %12s\n", "name", "type", "ne", "offset", "bytes");
    rw_tensor_info t;
    for (size_t i = 0; rw_model_file_tensor(f, i, &t); i++) {
        char shape[96];
        int n = snprintf(shape, sizeof shape, "{");
        for (uint32_t d = 0; d < t.n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, d ? ", " : "", t.ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "}");
        printf("  %-40s %-8s %-28s %12" PRIu64 " %12" PRIu64, t.name, t.type, shape, t.offset, t.nbytes);
        if (parts > 1) printf("  part %" PRIu32, rw_model_file_tensor_part(f, i) + 1);
        putchar('\n');
    }
}

/* ---- JSON output ---- */

/* A value: numbers with the fewest digits that read back to the same
 * double, as Python's repr does (8.0 for an integral value: a float stays
 * a float for a reader that types numbers). A float32 is printed as its
 * exact widened double value (9.999999974752427e-07 for 1e-6f), so a
 * reader comparing with other tools' JSON (gguf-py widens the same way)
 * gets equal values. */
static void json_value(cli_json *j, const rw_meta_value *v) {
    if (v->type == RW_META_STRING) cli_json_str(j, v->str, (size_t)v->str_len);
    else if (v->type == RW_META_BOOL) cli_json_bool(j, v->u != 0);
    else if (is_float(v->type)) cli_json_number(j, v->f);
    else if (is_signed(v->type)) cli_json_int(j, v->i);
    else if (v->type == RW_META_ARRAY) {
        cli_json_open(j, '[');
        for (uint64_t i = 0; i < v->n_elems; i++) {
            rw_meta_value e;
            if (rw_meta_elem(v, i, &e)) json_value(j, &e);
            else cli_json_null(j);
        }
        cli_json_close(j, ']');
    } else cli_json_uint(j, v->u);
}

static void print_json(const rw_model_file *f) {
    cli_json j;
    cli_json_start(&j, stdout);
    cli_json_open(&j, '{');
    cli_json_key(&j, "version");
    cli_json_uint(&j, rw_model_file_version(f));
    cli_json_key(&j, "alignment");
    cli_json_uint(&j, rw_model_file_alignment(f));
    cli_json_key(&j, "data_offset");
    cli_json_uint(&j, rw_model_file_data_offset(f));
    if (rw_model_file_n_parts(f) > 1) {
        cli_json_key(&j, "n_parts");
        cli_json_uint(&j, rw_model_file_n_parts(f));
    }
    cli_json_key(&j, "metadata");
    cli_json_open(&j, '{');
    rw_meta_value v;
    for (size_t i = 0; i < rw_model_file_n_meta(f); i++) {
        cli_json_key(&j, rw_model_file_meta(f, i, &v));
        json_value(&j, &v);
    }
    cli_json_close(&j, '}');
    cli_json_key(&j, "tensors");
    cli_json_open(&j, '[');
    rw_tensor_info t;
    for (size_t i = 0; rw_model_file_tensor(f, i, &t); i++) {
        cli_json_open(&j, '{');
        cli_json_key(&j, "name");
        cli_json_str(&j, t.name, strlen(t.name));
        cli_json_key(&j, "type");
        cli_json_str(&j, t.type, strlen(t.type));
        cli_json_key(&j, "ne");
        cli_json_open(&j, '[');
        for (uint32_t d = 0; d < t.n_dims; d++) cli_json_uint(&j, t.ne[d]);
        cli_json_close(&j, ']');
        cli_json_key(&j, "offset");
        cli_json_uint(&j, t.offset);
        cli_json_key(&j, "nbytes");
        cli_json_uint(&j, t.nbytes);
        if (rw_model_file_n_parts(f) > 1) { /* a split model's (from 0) */
            cli_json_key(&j, "part");
            cli_json_uint(&j, rw_model_file_tensor_part(f, i));
        }
        cli_json_close(&j, '}');
    }
    cli_json_close(&j, ']');
    cli_json_close(&j, '}');
    putchar('\n');
}

/* ---- dump ---- */

static int dump_tensor(const rw_model_file *mf, const char *name, const char *out) {
    const int64_t ti = rw_model_file_find_tensor(mf, name);
    rw_tensor_info t;
    if (ti < 0 || !rw_model_file_tensor(mf, (size_t)ti, &t)) {
        rw_cli_error("inspect", "no tensor named '%s'", name);
        return 1;
    }
    if (!t.readable) {
        rw_cli_error("inspect", "tensor '%s': dequantization of %s is not supported", name, t.type);
        return 1;
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        rw_cli_error("inspect", "cannot create %s", out);
        return 1;
    }
    uint64_t row_len = t.ne[0], n_rows = t.ne[1] * t.ne[2] * t.ne[3];
    float *row = malloc((row_len ? row_len : 1) * sizeof *row);
    int rc = row ? 0 : 1;
    for (uint64_t r = 0; r < n_rows && rc == 0; r++) {
        if (rw_model_file_read_rows(mf, (size_t)ti, r, 1, row, NULL) != RW_OK ||
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
    rw_model_file *f;
    rw_error err = {0};
    if (rw_model_file_open(path, &f, &err) != RW_OK) {
        rw_cli_error("inspect", "%s", err.msg);
        return 1;
    }
    int rc = 0;
    if (dump) rc = dump_tensor(f, dump, out);
    else if (json) print_json(f);
    else print_text(f, path);
    rw_model_file_close(f);
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
