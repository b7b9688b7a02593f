/*
 * json_out.h - a small JSON object writer for the hot responses (grant,
 * release), whose shapes are fixed: no tree, no allocation per field. The
 * rarer answers use jansson. Output is compact, ASCII-only, newline-ended,
 * byte-for-byte what jansson's JSON_COMPACT | JSON_ENSURE_ASCII writes.
 */
#ifndef LOCKD_API_JSON_OUT_H
#define LOCKD_API_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jout {
    char *p;
    size_t len, cap;
    bool first;
};

/* Keys are plain ASCII identifiers ("fencing_token") and are written as they
 * are; values are escaped. */
void jout_begin(struct jout *j);
void jout_str(struct jout *j, const char *key, const char *val); /* val NULL = null */
void jout_int(struct jout *j, const char *key, int64_t val);
void jout_bool(struct jout *j, const char *key, bool val);
/* Closes the object; returns the malloc'd text (caller frees), *len set. */
char *jout_end(struct jout *j, size_t *len);

#endif
