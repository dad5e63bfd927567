/* json_writer.h - streaming JSON output to a FILE, with correct escaping.
 *
 * Used where we print JSON ourselves (inspect, bench). Strings are written as
 * given when they are valid UTF-8; invalid bytes become U+FFFD so the output is
 * always valid JSON. Commas are inserted automatically. */
#ifndef RW_BASE_JSON_WRITER_H
#define RW_BASE_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RW_JSON_MAX_DEPTH 64

typedef struct {
    FILE *f;
    int depth;
    bool first[RW_JSON_MAX_DEPTH]; /* no element written yet at this depth */
    bool after_key;                /* a key was just written; the value needs no comma */
} rw_json_writer;

void rw_json_init(rw_json_writer *j, FILE *f);
void rw_json_begin_object(rw_json_writer *j);
void rw_json_end_object(rw_json_writer *j);
void rw_json_begin_array(rw_json_writer *j);
void rw_json_end_array(rw_json_writer *j);
void rw_json_key(rw_json_writer *j, const char *key);
void rw_json_string(rw_json_writer *j, const char *s, size_t len);
void rw_json_cstring(rw_json_writer *j, const char *s);
void rw_json_int(rw_json_writer *j, int64_t v);
void rw_json_uint(rw_json_writer *j, uint64_t v);
void rw_json_double(rw_json_writer *j, double v, int precision); /* non-finite -> null */
/* As rw_json_double, but an integral value gets ".0" (8.0, as Python's repr)
 * so that it reads back as a real where the source type is a float. */
void rw_json_real(rw_json_writer *j, double v, int precision);
void rw_json_bool(rw_json_writer *j, bool v);
void rw_json_null(rw_json_writer *j);

#endif
