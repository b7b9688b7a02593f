/*
 * parse.c - request decoding without HTTP plumbing, so that handlers and the
 * libFuzzer targets in tests/fuzz run the same code. Validation rules come
 * from json_in; statuses and error strings are those of DESIGN.md §2.
 */
#include "api/parse.h"

#include <stdlib.h>
#include <string.h>

#include "server/util.h"

#include "api/errors.h"
#include "api/json_in.h"
#include "config/config.h"

json_t *parse_acquire(const char *body, size_t len, const struct lk_config *cfg,
                      struct parse_acquire *out, struct api_error *e)
{
    /* fields[F_x] is the name of field F_x; json_in_fields sets bit F_x of
     * `has` when the body holds it, and only those are looked up */
    enum { F_TTL, F_WAIT, F_SESSION, F_OWNER, F_REENTRANT, F_MODE, F_LIMIT, F_MAX_HOLD, F_N };
    static const char *const fields[F_N + 1] = {
        [F_TTL] = "ttl_ms",  [F_WAIT] = "wait_ms",         [F_SESSION] = "session",
        [F_OWNER] = "owner", [F_REENTRANT] = "reentrant",  [F_MODE] = "mode",
        [F_LIMIT] = "limit", [F_MAX_HOLD] = "max_hold_ms", [F_N] = NULL,
    };
    _Static_assert(F_N <= 32, "json_in_fields marks at most 32 fields");
    *out = (struct parse_acquire){
        .ttl_ms = cfg->default_ttl_ms,
        .wait_ms = 0,
        .session = NULL,
        .owner = "",
        .reentrant = false,
        .mode = "exclusive",
        .limit = 1,
        .max_hold_ms = -1,
    };
    unsigned has; /* absent fields keep their default */
#define HAS(f) (has & (1u << (f)))
    json_t *o = json_in_parse(body, len, e);
    if (o == NULL || !json_in_fields(o, fields, &has, e))
        goto bad;
    if ((HAS(F_TTL) && !json_in_int(o, "ttl_ms", 100, cfg->max_ttl_ms, &out->ttl_ms, e)) ||
        (HAS(F_WAIT) && !json_in_int(o, "wait_ms", 0, cfg->max_wait_ms, &out->wait_ms, e)) ||
        (HAS(F_SESSION) && !json_in_str(o, "session", PARSE_SESSION_MAX, &out->session, e)) ||
        (HAS(F_OWNER) && !json_in_str(o, "owner", 128, &out->owner, e)) ||
        (HAS(F_REENTRANT) && !json_in_bool(o, "reentrant", &out->reentrant, e)) ||
        (HAS(F_MODE) && !json_in_str(o, "mode", 16, &out->mode, e)) ||
        (HAS(F_LIMIT) && !json_in_int(o, "limit", 1, PARSE_LIMIT_MAX, &out->limit, e)) ||
        (HAS(F_MAX_HOLD) &&
         !json_in_int(o, "max_hold_ms", 0, 30LL * 86400000, &out->max_hold_ms, e)))
        goto bad;
#undef HAS
    if (strcmp(out->mode, "exclusive") != 0 && strcmp(out->mode, "shared") != 0) {
        api_error_set(e, LK_INVALID, "field 'mode' must be \"exclusive\" or \"shared\"");
        goto bad;
    }
    /* A semaphore's holders each take one of its slots: it has no modes. */
    if (strcmp(out->mode, "shared") == 0 && out->limit > 1) {
        api_error_set(
            e, LK_INVALID,
            "field 'limit' > 1 (a semaphore) takes no 'mode': its holders share its slots");
        goto bad;
    }
    if (out->session == NULL && (out->reentrant || out->max_hold_ms >= 0)) {
        api_error_set(e, LK_INVALID, "fields 'reentrant' and 'max_hold_ms' need 'session'");
        goto bad;
    }
    return o;
bad:
    json_decref(o);
    return NULL;
}

/* The "names" of a multi-lock: an array of 1..PARSE_MULTI_MAX distinct names. */
static bool parse_names(json_t *o, struct parse_multi *out, struct api_error *e)
{
    json_t *arr = json_object_get(o, "names");
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (n == 0 || n > PARSE_MULTI_MAX) {
        api_error_set(e, LK_INVALID, "field 'names' must be an array of 1 to %d lock names",
                      PARSE_MULTI_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        const char *name = json_is_string(v) ? json_string_value(v) : NULL;
        if (name == NULL || !lk_name_valid(name, json_string_length(v))) {
            api_error_set(e, LK_INVALID_NAME,
                          "names[%zu] is not a lock name: lock names are 1 to 255 bytes of "
                          "A-Z a-z 0-9 . _ : -",
                          i);
            return false;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out->names[j], name) == 0) {
                api_error_set(e, LK_INVALID, "field 'names' repeats '%s' (names[%zu] and [%zu])",
                              name, j, i);
                return false;
            }
        }
        out->names[i] = name;
    }
    out->nnames = n;
    return true;
}

json_t *parse_multi(const char *body, size_t len, const struct lk_config *cfg,
                    enum parse_multi_kind kind, struct parse_multi *out, struct api_error *e)
{
    static const char *const acquire_fields[] = {"names", "ttl_ms",      "wait_ms", "session",
                                                 "owner", "max_hold_ms", NULL};
    static const char *const renew_fields[] = {"names", "lease", "ttl_ms", NULL};
    static const char *const release_fields[] = {"names", "lease", NULL};
    memset(out, 0, sizeof(*out));
    out->ttl_ms = kind == PM_ACQUIRE ? cfg->default_ttl_ms : 0;
    out->owner = "";
    out->max_hold_ms = -1;
    const char *const *fields = kind == PM_ACQUIRE ? acquire_fields
                                : kind == PM_RENEW ? renew_fields
                                                   : release_fields;
    json_t *o = json_in_parse(body, len, e);
    if (o == NULL || !json_in_only(o, fields, e) || !parse_names(o, out, e))
        goto bad;
    if (kind == PM_ACQUIRE) {
        if (!json_in_int(o, "ttl_ms", 100, cfg->max_ttl_ms, &out->ttl_ms, e) ||
            !json_in_int(o, "wait_ms", 0, cfg->max_wait_ms, &out->wait_ms, e) ||
            !json_in_str(o, "session", PARSE_SESSION_MAX, &out->session, e) ||
            !json_in_str(o, "owner", 128, &out->owner, e) ||
            !json_in_int(o, "max_hold_ms", 0, 30LL * 86400000, &out->max_hold_ms, e))
            goto bad;
        if (out->session == NULL && out->max_hold_ms >= 0) {
            api_error_set(e, LK_INVALID, "field 'max_hold_ms' needs 'session'");
            goto bad;
        }
        return o;
    }
    if (!json_in_str(o, "lease", 64, &out->lease, e) ||
        (kind == PM_RENEW && !parse_renew_ttl(o, cfg, &out->ttl_ms, e)))
        goto bad;
    return o;
bad:
    json_decref(o);
    return NULL;
}

json_t *parse_lease_body(const char *body, size_t len, bool renew, const char **lease,
                         struct api_error *e)
{
    static const char *const renew_fields[] = {"lease", "ttl_ms", NULL};
    static const char *const release_fields[] = {"lease", NULL};
    *lease = NULL;
    json_t *o = json_in_parse(body, len, e);
    if (o == NULL || !json_in_only(o, renew ? renew_fields : release_fields, e) ||
        !json_in_str(o, "lease", 64, lease, e)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool parse_renew_ttl(json_t *body, const struct lk_config *cfg, int64_t *ttl_ms,
                     struct api_error *e)
{
    return json_in_int(body, "ttl_ms", 100, cfg->max_ttl_ms, ttl_ms, e);
}

bool parse_lease_pick(const char *hdr, const char *query, bool query_conflict, const char *body,
                      const char **out, struct api_error *e)
{
    const char *srcs[3] = {hdr, query, body};
    const char *lease = NULL;
    bool conflict = query_conflict;
    for (int i = 0; i < 3; i++) {
        if (srcs[i] == NULL)
            continue;
        if (lease != NULL && strcmp(lease, srcs[i]) != 0)
            conflict = true;
        lease = srcs[i];
    }
    if (conflict) {
        api_error_code(e, LK_CONFLICTING_LEASE);
        return false;
    }
    if (lease == NULL) {
        api_error_set(e, LK_INVALID,
                      "field 'lease' is required (header Lock-Lease, ?lease= or body)");
        return false;
    }
    if (!json_in_lease_ok(lease)) {
        api_error_set(e, LK_INVALID, "field 'lease' must be 32 lowercase hex digits");
        return false;
    }
    *out = lease;
    return true;
}

json_t *parse_session(const char *body, size_t len, const struct lk_config *cfg,
                      struct parse_session *out, struct api_error *e)
{
    static const char *const fields[] = {"ttl_ms", "owner", "lock_delay_ms", NULL};
    *out = (struct parse_session){.ttl_ms = cfg->session_ttl_ms, .owner = "", .lock_delay_ms = 0};
    json_t *o = json_in_parse(body, len, e);
    if (o == NULL || !json_in_only(o, fields, e) ||
        !json_in_int(o, "ttl_ms", 1000, cfg->max_session_ttl_ms, &out->ttl_ms, e) ||
        !json_in_str(o, "owner", 128, &out->owner, e) ||
        !json_in_int(o, "lock_delay_ms", 0, cfg->max_ttl_ms, &out->lock_delay_ms, e)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool parse_list_query(const char *prefix, const char *cursor, const char *limit, size_t *limit_out,
                      struct api_error *e)
{
    if (prefix[0] != '\0' && !lk_name_valid(prefix, strlen(prefix))) {
        api_error_set(e, LK_INVALID,
                      "query 'prefix' must be up to 255 bytes of A-Z a-z 0-9 . _ : -");
        return false;
    }
    if (strlen(cursor) > 512) {
        api_error_set(e, LK_INVALID, "query 'cursor' is too long");
        return false;
    }
    long long n = 100;
    if (limit != NULL) {
        char *end;
        n = strtoll(limit, &end, 10);
        if (limit[0] == '\0' || *end != '\0' || n < 1 || n > 1000) {
            api_error_set(e, LK_INVALID, "query 'limit' must be between 1 and 1000");
            return false;
        }
    }
    *limit_out = (size_t)n;
    return true;
}

bool parse_query_int(const char *what, const char *v, int64_t max, int64_t *out,
                     struct api_error *e)
{
    size_t n = strspn(v, "0123456789");
    long long got = n > 0 && n <= 16 && v[n] == '\0' ? strtoll(v, NULL, 10) : -1;
    if (got < 0 || got > max) {
        api_error_set(e, LK_INVALID, "query '%s' must be an integer from 0 to %lld", what,
                      (long long)max);
        return false;
    }
    *out = got;
    return true;
}

size_t parse_unescape(char *s)
{
    /* Bytes before the first '%' stay where they are: most paths have none. */
    char *w = strchr(s, '%');
    if (w == NULL)
        return strlen(s);
    for (char *p = w; *p; p++) {
        /* Two hex digits exactly (strtoul would also take "\t5" or "+5"). */
        if (p[0] == '%' && p[1] != '\0' && p[2] != '\0') {
            int hi = lk_hexval(p[1]), lo = lk_hexval(p[2]);
            if (hi >= 0 && lo >= 0 && (hi | lo) != 0) {
                *w++ = (char)(hi * 16 + lo);
                p += 2;
                continue;
            }
        }
        *w++ = *p;
    }
    *w = '\0';
    return (size_t)(w - s);
}
