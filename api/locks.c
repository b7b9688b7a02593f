/*
 * locks.c - /locks handlers: request -> engine call -> JSON response.
 * Nothing else: validation rules come from json_in, statuses from errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/errors.h"
#include "api/http.h"
#include "api/json_in.h"
#include "api/json_out.h"
#include "api/locks.h"
#include "api/parse.h"
#include "api/router.h"
#include "config/config.h"
#include "server/engine.h"
#include "server/log.h"

/* ---- shared pieces ---- */

struct qcheck {
    const char *const *allowed;
    struct api_error *e;
    bool ok;
    const char *lease;
    bool lease_conflict;
};

static bool query_field(void *arg, const char *k, const char *v)
{
    struct qcheck *q = arg;
    bool known = false;
    for (const char *const *a = q->allowed; *a != NULL; a++)
        if (strcmp(*a, k) == 0)
            known = true;
    if (!known) {
        api_error_set(q->e, LK_UNKNOWN_FIELD, "unknown query parameter '%.64s'", k);
        q->ok = false;
        return false;
    }
    if (strcmp(k, "lease") == 0) {
        if (q->lease != NULL && strcmp(q->lease, v) != 0)
            q->lease_conflict = true;
        q->lease = v;
    }
    return true;
}

/* Checks query parameter names; collects ?lease= values. */
bool check_query(struct req *r, const char *const *allowed, const char **lease, bool *conflict,
                 struct api_error *e)
{
    struct qcheck q = {allowed, e, true, NULL, false};
    http_query_each(r, query_field, &q);
    if (lease != NULL)
        *lease = q.lease;
    if (conflict != NULL)
        *conflict = q.lease_conflict;
    return q.ok;
}

/* The lease from header, query or body: present ones must agree. */
bool find_lease(struct req *r, const char *body_lease, const char *query_lease, bool query_conflict,
                const char **out, struct api_error *e)
{
    /* Two Lock-Lease headers that differ are as ambiguous as a header and a
     * query that differ. */
    bool conflict = query_conflict || !http_header_agrees(r, "Lock-Lease");
    return parse_lease_pick(http_header(r, "Lock-Lease"), query_lease, conflict, body_lease, out,
                            e);
}

/* An owner nobody gave is null, wherever a lock's owner is shown. */
static json_t *owner_json(const char *owner)
{
    return owner != NULL && owner[0] != '\0' ? json_string(owner) : json_null();
}

json_t *holder_json(const struct eng_holder *h)
{
    json_t *o = json_object();
    if (h->lock_delay) {
        json_object_set_new(o, "owner", json_null());
        json_object_set_new(o, "lock_delay", json_true());
    } else {
        json_object_set_new(o, "owner", owner_json(h->owner));
        json_object_set_new(o, "fencing_token", json_integer(h->fencing_token));
        json_object_set_new(o, "session_bound", json_boolean(h->session_bound));
        json_object_set_new(o, "mode", json_string(h->shared ? "shared" : "exclusive"));
    }
    json_object_set_new(o, "expires_in_ms", json_integer(h->expires_in_ms));
    return o;
}

void retry_after(struct req *r, int64_t ms)
{
    char buf[24];
    int64_t s = ms > 0 ? (ms + 999) / 1000 : 1;
    lk_itoa(s, buf);
    http_add_header(r, "Retry-After", buf);
}

/* The grant answer is the hottest response: written without a JSON tree. */
static void grant_json(struct req *r, const struct eng_result *res)
{
    r->token = res->fencing_token;
    char expires[32];
    lk_rfc3339(res->expires_at_ms, expires);
    struct jout j;
    jout_begin(&j);
    jout_str(&j, "name", res->name);
    jout_str(&j, "lease", res->lease);
    jout_int(&j, "fencing_token", res->fencing_token);
    jout_int(&j, "ttl_ms", res->ttl_ms);
    jout_str(&j, "expires_at", expires);
    jout_str(&j, "session", res->session);
    jout_str(&j, "owner", res->owner != NULL && res->owner[0] != '\0' ? res->owner : NULL);
    jout_int(&j, "count", res->count);
    jout_str(&j, "mode", res->shared ? "shared" : "exclusive");
    size_t len;
    char *text = jout_end(&j, &len);
    char token[24];
    lk_itoa(res->fencing_token, token);
    http_add_header(r, "Lock-Lease", res->lease);
    http_add_header(r, "Lock-Fencing-Token", token);
    http_respond_text(r, 200, "application/json", text, len);
}

static void not_granted(struct req *r, const struct eng_result *res, bool waited)
{
    json_t *extra = json_object();
    if (res->has_holder) {
        json_object_set_new(extra, "holder", holder_json(&res->holder));
        if (res->code == LK_LOCKED)
            retry_after(r, res->holder.expires_in_ms);
    }
    if (waited)
        json_object_set_new(extra, "waited_ms", json_integer(res->waited_ms));
    if (res->code == LK_BACKEND_RECOVERING)
        retry_after(r, res->retry_ms); /* the restart grace left (at least 1 s) */
    char msg[128];
    const char *message = NULL;
    if (res->code == LK_LOCKED && res->holder_is_self) {
        /* A session blocking on its own hold waits for itself: it asked
         * without reentrant, or in the other mode (a hold is counted per
         * mode, and a shared one is never upgraded). */
        json_t *holder = json_object_get(extra, "holder");
        if (holder != NULL)
            json_object_set_new(holder, "same_session", json_true());
        snprintf(msg, sizeof(msg),
                 "this session already holds the lock; acquire with \"reentrant\":true, in the "
                 "mode it holds, to hold it again");
        message = msg;
    }
    if (res->code == LK_UNSUPPORTED && res->message != NULL) /* the backend's reason */
        message = res->message;
    if (res->code == LK_LIMIT_MISMATCH) { /* naming the limit in force */
        json_object_set_new(extra, "limit", json_integer(res->limit));
        snprintf(msg, sizeof(msg), "holders of this lock use limit %lld", (long long)res->limit);
        message = msg;
    }
    errors_respond_msg(r, res->code, message, extra);
}

/* ---- acquire ---- */

static void acquire_cb(void *arg, const struct eng_result *res)
{
    struct req *r = arg;
    r->waiting = false;
    r->waiter = NULL;
    if (res->code == LK_OK) {
        if (http_grant_undeliverable(r, res->name, res->lease))
            return;
        lk_strlcpy(r->grant_lease, res->lease, sizeof(r->grant_lease));
        r->grant_pending = true;
        grant_json(r, res);
        return;
    }
    not_granted(r, res, res->code == LK_LOCKED);
}

void locks_acquire(struct req *r)
{
    static const char *const qfields[] = {NULL};
    struct api_error e;
    json_t *body = NULL;
    struct parse_acquire pa;
    if (!json_in_name(r->param, &e) || !check_query(r, qfields, NULL, NULL, &e))
        goto bad;
    body = parse_acquire(r->body, r->body_len, http_config(r), &pa, &e);
    if (body == NULL)
        goto bad;
    struct eng_acquire a = {
        .name = r->param,
        .ttl_ms = pa.ttl_ms,
        .wait_ms = pa.wait_ms,
        .session = pa.session,
        .owner = pa.owner,
        .reentrant = pa.reentrant,
        .max_hold_ms = pa.max_hold_ms,
        .shared = strcmp(pa.mode, "shared") == 0,
        .limit = pa.limit,
    };
    struct eng_waiter *w = NULL;
    enum lk_code c = engine_acquire(http_engine(r), http_loop(r), &a, acquire_cb, r, &w);
    http_park(r, body, c, w);
    return;
bad:
    http_reject(r, body, &e);
}

/* ---- renew and release ---- */

static void renew_cb(void *arg, const struct eng_result *res)
{
    struct req *r = arg;
    if (res->code == LK_OK)
        grant_json(r, res);
    else
        not_granted(r, res, false);
}

void locks_renew(struct req *r)
{
    static const char *const qfields[] = {"lease", NULL};
    const struct lk_config *cfg = http_config(r);
    struct api_error e;
    json_t *body = NULL;
    const char *ql = NULL, *bl = NULL, *lease;
    bool qconf = false;
    int64_t ttl = 0;
    if (!json_in_name(r->param, &e) || !check_query(r, qfields, &ql, &qconf, &e))
        goto bad;
    body = parse_lease_body(r->body, r->body_len, true, &bl, &e);
    if (body == NULL || !find_lease(r, bl, ql, qconf, &lease, &e) ||
        !parse_renew_ttl(body, cfg, &ttl, &e))
        goto bad;
    char lease_copy[40];
    lk_strlcpy(lease_copy, lease, sizeof(lease_copy));
    json_decref(body);
    enum lk_code c =
        engine_renew(http_engine(r), http_loop(r), r->param, lease_copy, ttl, renew_cb, r);
    (void)c;
    return;
bad:
    http_reject(r, body, &e);
}

static void release_cb(void *arg, const struct eng_result *res)
{
    struct req *r = arg;
    if (res->code != LK_OK) {
        not_granted(r, res, false);
        return;
    }
    r->token = res->fencing_token;
    struct jout j;
    jout_begin(&j);
    jout_str(&j, "name", res->name);
    jout_bool(&j, "released", true);
    jout_int(&j, "fencing_token", res->fencing_token);
    jout_int(&j, "count", res->count);
    size_t len;
    char *text = jout_end(&j, &len);
    http_respond_text(r, 200, "application/json", text, len);
}

/* ---- force-unlock (DESIGN.md §Operators) ---- */

static void force_cb(void *arg, const struct eng_result *res)
{
    struct req *r = arg;
    if (res->code == LK_NOT_HELD) { /* the operator sent no lease to have lost */
        errors_respond_msg(r, LK_NOT_HELD, "nobody holds this lock now", NULL);
        return;
    }
    if (res->code != LK_OK) {
        errors_respond_code(r, res->code, NULL);
        return;
    }
    char peer[64];
    http_peer(r, peer, sizeof(peer));
    lk_log(LK_WARN, "force-unlocked '%s' token %lld (request %s from %s)", res->name,
           (long long)res->fencing_token, r->req_id, peer);
    r->token = res->fencing_token;
    struct jout j;
    jout_begin(&j);
    jout_str(&j, "name", res->name);
    jout_bool(&j, "released", true);
    jout_bool(&j, "forced", true);
    jout_int(&j, "fencing_token", res->fencing_token);
    size_t len;
    char *text = jout_end(&j, &len);
    http_respond_text(r, 200, "application/json", text, len);
}

static bool force_query(void *arg, const char *k, const char *v)
{
    const char **force = arg;
    if (strcmp(k, "force") == 0)
        *force = v;
    return true;
}

/* ?force=: NULL when absent; 1 true, 0 false, -1 anything else. */
static int force_of(struct req *r)
{
    const char *v = NULL;
    http_query_each(r, force_query, &v);
    if (v == NULL)
        return 0;
    return strcmp(v, "true") == 0 ? 1 : strcmp(v, "false") == 0 ? 0 : -1;
}

static void locks_force(struct req *r)
{
    static const char *const qfields[] = {"force", "lease", NULL};
    struct api_error e;
    json_t *body = NULL;
    const char *bl = NULL, *ql = NULL;
    bool qconf = false;
    if (!json_in_name(r->param, &e) || !check_query(r, qfields, &ql, &qconf, &e))
        goto bad;
    /* An empty body or {} (a lease is not needed and not allowed). */
    body = parse_lease_body(r->body, r->body_len, false, &bl, &e);
    if (body == NULL)
        goto bad;
    json_decref(body);
    /* Not allowed however it comes: header, query or body alike. */
    if (bl != NULL || ql != NULL || qconf || http_header(r, "Lock-Lease") != NULL) {
        api_error_set(&e, LK_INVALID, "a forced release takes no lease");
        goto bad;
    }
    /* Authentication came first (http.c: 401); this is authorization. */
    if (!auth_admin(http_header(r, "Authorization"))) {
        errors_respond_code(r, LK_FORBIDDEN, NULL);
        return;
    }
    enum lk_code c = engine_force_release(http_engine(r), http_loop(r), r->param, force_cb, r);
    (void)c;
    return;
bad:
    errors_respond_input(r, &e);
}

void locks_release(struct req *r)
{
    static const char *const qfields[] = {"lease", "force", NULL};
    struct api_error e;
    json_t *body = NULL;
    const char *ql = NULL, *bl = NULL, *lease;
    bool qconf = false;
    int force = force_of(r);
    if (force == 1) {
        locks_force(r);
        return;
    }
    if (force < 0) {
        api_error_set(&e, LK_INVALID, "query 'force' must be true or false");
        goto bad;
    }
    if (!json_in_name(r->param, &e) || !check_query(r, qfields, &ql, &qconf, &e))
        goto bad;
    body = parse_lease_body(r->body, r->body_len, false, &bl, &e);
    if (body == NULL || !find_lease(r, bl, ql, qconf, &lease, &e))
        goto bad;
    char lease_copy[40];
    lk_strlcpy(lease_copy, lease, sizeof(lease_copy));
    json_decref(body);
    enum lk_code c =
        engine_release(http_engine(r), http_loop(r), r->param, lease_copy, release_cb, r);
    (void)c;
    return;
bad:
    http_reject(r, body, &e);
}

/* ---- inspect and list ---- */

static json_t *one_holder_json(const struct eng_holder *h)
{
    json_t *one = json_object();
    json_object_set_new(one, "owner", owner_json(h->owner));
    json_object_set_new(one, "fencing_token", json_integer(h->fencing_token));
    json_object_set_new(one, "expires_in_ms", json_integer(h->expires_in_ms));
    json_object_set_new(one, "session_bound", json_boolean(h->session_bound));
    json_object_set_new(one, "mode", json_string(h->shared ? "shared" : "exclusive"));
    return one;
}

/* One lock's fields. h is the first holder (or the lock-delay when not
 * held); holders/nholders every holder when the engine lists them (else h
 * alone); waiters is this lockd's queue for the name. */
static json_t *inspect_json(const char *name, bool held, const struct eng_holder *h,
                            const struct eng_holder *holders, size_t nholders, size_t total,
                            int64_t limit, int64_t waiters, bool has_index, int64_t index)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    if (has_index) /* watching: DESIGN.md §Watching */
        json_object_set_new(o, "index", json_integer(index));
    json_object_set_new(o, "held", json_boolean(held));
    json_object_set_new(o, "mode", json_string(held && h->shared ? "shared" : "exclusive"));
    json_object_set_new(o, "limit", json_integer(held && limit > 1 ? limit : 1));
    json_t *list = json_array();
    if (held) {
        if (holders == NULL || nholders == 0) {
            holders = h;
            nholders = 1;
        }
        if (total < nholders)
            total = nholders;
        char expires[32];
        lk_rfc3339(lk_wall_ms() + h->expires_in_ms, expires);
        json_object_set_new(o, "owner", owner_json(h->owner));
        json_object_set_new(o, "fencing_token", json_integer(h->fencing_token));
        json_object_set_new(o, "expires_in_ms", json_integer(h->expires_in_ms));
        json_object_set_new(o, "expires_at", json_string(expires));
        json_object_set_new(o, "session_bound", json_boolean(h->session_bound));
        json_object_set_new(o, "holders", json_integer((json_int_t)total));
        for (size_t i = 0; i < nholders && i < 100; i++) /* openapi: at most 100 */
            json_array_append_new(list, one_holder_json(&holders[i]));
    } else {
        json_object_set_new(o, "owner", json_null());
        json_object_set_new(o, "fencing_token", json_null());
        json_object_set_new(o, "expires_in_ms", json_null());
        json_object_set_new(o, "expires_at", json_null());
        json_object_set_new(o, "session_bound", json_false());
        json_object_set_new(o, "holders", json_integer(0));
        if (h->lock_delay) {
            json_object_set_new(o, "lock_delay", json_true());
            json_object_set_new(o, "lock_delay_ms", json_integer(h->expires_in_ms));
        }
    }
    json_object_set_new(o, "holder_list", list);
    json_object_set_new(o, "waiters", json_integer(waiters));
    return o;
}

static void inspect_cb(void *arg, const struct eng_info *info)
{
    struct req *r = arg;
    if (info->code != LK_OK) {
        errors_respond_code(r, info->code, NULL);
        return;
    }
    if (info->has_index) {
        char idx[24];
        lk_itoa(info->index, idx);
        http_add_header(r, "Lock-Index", idx);
    }
    http_respond_json(r, 200,
                      inspect_json(r->param, info->held, &info->holder, info->holders,
                                   info->nholders, info->total_holders, info->limit, info->waiters,
                                   info->has_index, info->index));
}

static void watch_cb(void *arg, const struct eng_info *info)
{
    struct req *r = arg;
    r->waiting = false;
    r->waiter = NULL;
    inspect_cb(r, info);
}

struct watch_args {
    const char *index, *wait_ms;
    struct api_error *e;
    bool ok;
};

static bool watch_query(void *arg, const char *k, const char *v)
{
    struct watch_args *wa = arg;
    const char **slot = strcmp(k, "index") == 0     ? &wa->index
                        : strcmp(k, "wait_ms") == 0 ? &wa->wait_ms
                                                    : NULL;
    if (slot == NULL) {
        api_error_set(wa->e, LK_UNKNOWN_FIELD, "unknown query parameter '%.64s'", k);
        wa->ok = false;
        return false;
    }
    *slot = v;
    return true;
}

void locks_inspect(struct req *r)
{
    struct api_error e;
    struct watch_args wa = {NULL, NULL, &e, true};
    int64_t index = -1, wait_ms = 0;
    if (!json_in_name(r->param, &e))
        goto bad;
    http_query_each(r, watch_query, &wa);
    if (!wa.ok ||
        (wa.index != NULL && !parse_query_int("index", wa.index, 9007199254740991LL, &index, &e)) ||
        (wa.wait_ms != NULL &&
         !parse_query_int("wait_ms", wa.wait_ms, http_config(r)->max_wait_ms, &wait_ms, &e)))
        goto bad;
    if (index >= 0 && wait_ms > 0) { /* a watch: DESIGN.md §Watching */
        struct eng_waiter *w = NULL;
        enum lk_code c =
            engine_watch(http_engine(r), http_loop(r), r->param, index, wait_ms, watch_cb, r, &w);
        if (c == LK_UNSUPPORTED) {
            errors_respond_msg(r, LK_UNSUPPORTED, "this backend keeps no index: it cannot watch",
                               NULL);
            return;
        }
        http_park(r, NULL, c, w);
        return;
    }
    enum lk_code c = engine_inspect(http_engine(r), http_loop(r), r->param, inspect_cb, r);
    (void)c;
    return;
bad:
    errors_respond_input(r, &e);
}

static void list_cb(void *arg, enum lk_code code, const struct eng_entry *ents, size_t n,
                    const char *next)
{
    struct req *r = arg;
    if (code != LK_OK) { /* LK_BAD_CURSOR: 400 invalid_field, as the table says */
        errors_respond_code(r, code, NULL);
        return;
    }
    json_t *o = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        int64_t waiters = engine_waiters(http_engine(r), ents[i].name);
        json_array_append_new(arr, inspect_json(ents[i].name, true, &ents[i].holder, NULL, 0,
                                                ents[i].nholders, ents[i].limit, waiters,
                                                ents[i].has_index, ents[i].index));
    }
    json_object_set_new(o, "locks", arr);
    json_object_set_new(o, "next_cursor", next ? json_string(next) : json_null());
    http_respond_json(r, 200, o);
}

struct list_args {
    const char *prefix, *cursor, *limit;
    struct api_error *e;
    bool ok;
};

static bool list_query(void *arg, const char *k, const char *v)
{
    struct list_args *la = arg;
    const char **slot = strcmp(k, "prefix") == 0   ? &la->prefix
                        : strcmp(k, "cursor") == 0 ? &la->cursor
                        : strcmp(k, "limit") == 0  ? &la->limit
                                                   : NULL;
    if (slot == NULL) {
        api_error_set(la->e, LK_UNKNOWN_FIELD, "unknown query parameter '%.64s'", k);
        la->ok = false;
        return false;
    }
    *slot = v;
    return true;
}

void locks_list(struct req *r)
{
    struct api_error e;
    struct list_args la = {"", "", NULL, &e, true};
    http_query_each(r, list_query, &la);
    if (!la.ok)
        goto bad;
    size_t limit;
    if (!parse_list_query(la.prefix, la.cursor, la.limit, &limit, &e))
        goto bad;
    enum lk_code c =
        engine_list(http_engine(r), http_loop(r), la.prefix, la.cursor, limit, list_cb, r);
    (void)c;
    return;
bad:
    errors_respond_input(r, &e);
}
