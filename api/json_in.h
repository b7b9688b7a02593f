/*
 * json_in.h - request decoding: a body is a JSON object (whatever the
 * Content-Type says; empty = {}), every field is checked against a table of
 * allowed fields, and each getter validates type and range, naming the field.
 */
#ifndef LOCKD_API_JSON_IN_H
#define LOCKD_API_JSON_IN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct api_error;

/* Parses body into a new object (caller decrefs). Rejects non-objects,
 * duplicate keys, NUL bytes, invalid UTF-8. Returns NULL with e set. */
json_t *json_in_parse(const char *body, size_t len, struct api_error *e);
/* Rejects the first field not in allowed (NULL-terminated). */
bool json_in_only(json_t *obj, const char *const *allowed, struct api_error *e);
/* The same, and sets bit i of *present for each allowed[i] (i < 32) the
 * object has, so the caller looks up only those. */
bool json_in_fields(json_t *obj, const char *const *allowed, unsigned *present,
                    struct api_error *e);
/* Getters: false with e set on a bad value; absent leaves *out unchanged. */
bool json_in_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                 struct api_error *e);
bool json_in_str(json_t *obj, const char *key, size_t maxlen, const char **out,
                 struct api_error *e);
bool json_in_bool(json_t *obj, const char *key, bool *out, struct api_error *e);

/* Lock names and leases. */
bool json_in_name(const char *s, struct api_error *e);
bool json_in_lease_ok(const char *s);

#endif
