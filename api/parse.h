/*
 * parse.h - pure request decoding shared by the handlers and the fuzz
 * targets: request bodies into structs, the lease rule (header, query and
 * body must agree), list query values and percent-decoding of the path.
 * No libmicrohttpd, no engine; any thread.
 */
#ifndef LOCKD_API_PARSE_H
#define LOCKD_API_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct api_error;
struct lk_config;

#define PARSE_SESSION_MAX 64
#define PARSE_LIMIT_MAX 10000 /* a semaphore's slots (DESIGN.md §2) */

/* POST /locks/{name}. Strings are borrowed from the returned object. */
struct parse_acquire {
    int64_t ttl_ms;
    int64_t wait_ms;
    const char *session; /* NULL = none */
    const char *owner;
    bool reentrant;
    const char *mode;    /* "exclusive" or "shared" */
    int64_t limit;       /* 1..PARSE_LIMIT_MAX; > 1 only with mode exclusive */
    int64_t max_hold_ms; /* -1 = not given */
};

/* Decodes and validates an acquire body (defaults from cfg). Returns the
 * parsed object (new reference: the caller decrefs it once done with the
 * borrowed strings), or NULL with e set. */
json_t *parse_acquire(const char *body, size_t len, const struct lk_config *cfg,
                      struct parse_acquire *out, struct api_error *e);

/* PUT and DELETE /locks/{name}: checks the fields (renew: lease, ttl_ms;
 * release: lease) and fetches the body's lease (borrowed, NULL if absent).
 * Returns the object (new reference) or NULL with e set. The renew ttl is
 * checked after the lease by parse_renew_ttl, so that errors keep their order. */
json_t *parse_lease_body(const char *body, size_t len, bool renew, const char **lease,
                         struct api_error *e);
bool parse_renew_ttl(json_t *body, const struct lk_config *cfg, int64_t *ttl_ms,
                     struct api_error *e);

/* The lease from header, query and body (each may be NULL): the ones given
 * must agree and be well formed. query_conflict: ?lease= given twice with
 * different values. *out points at one of the inputs. */
bool parse_lease_pick(const char *hdr, const char *query, bool query_conflict, const char *body,
                      const char **out, struct api_error *e);

/* POST, PUT and DELETE /locks: a multi-lock (DESIGN.md §2 "Multi-lock").
 * names: 1..PARSE_MULTI_MAX distinct lock names (400 invalid_field for an
 * empty list, too many or a repeat; 400 invalid_name for a bad name). The
 * acquire takes ttl_ms, wait_ms, session, owner, max_hold_ms; the renew
 * lease and ttl_ms; the release lease. Strings are borrowed from the
 * returned object (new reference), or NULL with e set. */
#define PARSE_MULTI_MAX 64
enum parse_multi_kind { PM_ACQUIRE, PM_RENEW, PM_RELEASE };
struct parse_multi {
    const char *names[PARSE_MULTI_MAX];
    size_t nnames;
    int64_t ttl_ms;      /* acquire: default_ttl_ms; renew: 0 = the ttl last given */
    int64_t wait_ms;     /* acquire */
    const char *session; /* acquire: NULL = none */
    const char *owner;   /* acquire */
    int64_t max_hold_ms; /* acquire: -1 = not given */
    const char *lease;   /* renew, release: the body's, NULL if absent */
};
json_t *parse_multi(const char *body, size_t len, const struct lk_config *cfg,
                    enum parse_multi_kind kind, struct parse_multi *out, struct api_error *e);

/* POST /sessions. owner is borrowed from the returned object (new reference). */
struct parse_session {
    int64_t ttl_ms;
    const char *owner;
    int64_t lock_delay_ms;
};
json_t *parse_session(const char *body, size_t len, const struct lk_config *cfg,
                      struct parse_session *out, struct api_error *e);

/* GET /locks query values (limit NULL = default 100). */
bool parse_list_query(const char *prefix, const char *cursor, const char *limit, size_t *limit_out,
                      struct api_error *e);

/* A query integer (GET /locks/{name}'s index and wait_ms): digits only, at
 * most 16 of them, from 0 to max, into *out; false with e set (LK_INVALID,
 * naming what) otherwise, *out untouched. */
bool parse_query_int(const char *what, const char *v, int64_t max, int64_t *out,
                     struct api_error *e);

/* Decodes %XX in place, except %00, which stays literal so that a NUL never
 * cuts a name short (and the name is then invalid). Returns the new length. */
size_t parse_unescape(char *s);

#endif
