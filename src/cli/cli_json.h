/* cli_json.h - the JSON the rewind program prints itself (rewind inspect
 * --json): one document streamed to a FILE, commas placed by the writer,
 * strings escaped (bytes that are not UTF-8 become U+FFFD, so the output
 * is always valid JSON). Program code: the library writes no JSON of this
 * kind. */
#ifndef RW_CLI_CLI_JSON_H
#define RW_CLI_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *f;
    int depth;          /* open objects and arrays (deeper than 64 are written, not tracked) */
    uint64_t has_items; /* bit d: the container at depth d has an element already */
    bool value_next;    /* a key was written: its value takes no comma */
} cli_json;

void cli_json_start(cli_json *j, FILE *f);
void cli_json_open(cli_json *j, char bracket);  /* '{' or '[' */
void cli_json_close(cli_json *j, char bracket); /* '}' or ']' */
void cli_json_key(cli_json *j, const char *key);
void cli_json_str(cli_json *j, const char *s, size_t len);
void cli_json_int(cli_json *j, int64_t v);
void cli_json_uint(cli_json *j, uint64_t v);
/* The fewest significant digits that read back as v, always with a '.' or
 * an exponent (8.0, not 8); null for infinities and NaN. */
void cli_json_number(cli_json *j, double v);
void cli_json_bool(cli_json *j, bool v);
void cli_json_null(cli_json *j);

#endif
