/*
 * multilock.c - POST, PUT and DELETE /locks: several names taken, renewed
 * and released as one (DESIGN.md §2 "Multi-lock"). Request -> engine call
 * (server/multilock.h) -> JSON; validation from parse.c, statuses from
 * errors.c. On the request's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/errors.h"
#include "api/http.h"
#include "api/json_out.h"
#include "api/locks.h"
#include "api/parse.h"
#include "api/router.h"
#include "server/multilock.h"

static void ignore_release(void *arg, const struct eng_result *res)
{
    (void)arg;
    (void)res;
}

static void multi_acquire_cb(void *arg, const struct eng_multi_result *res)
{
    struct req *r = arg;
    r->waiting = false;
    r->waiter = NULL;
    if (res->code == LK_OK) {
        /* A waiter whose client hung up meanwhile: give the whole set back. */
        if (http_grant_undeliverable(r, res->names[0], res->lease)) {
            for (size_t i = 1; i < res->n; i++)
                (void)engine_release(http_engine(r), http_loop(r), res->names[i], res->lease,
                                     ignore_release, NULL);
            return;
        }
        /* Its client may still hang up before the answer reaches it: then
         * every name goes back at once, as a single lock's (grant_pending). */
        size_t len = 1;
        for (size_t i = 0; i < res->n; i++)
            len += strlen(res->names[i]) + 1;
        char *names = lk_malloc(len), *p = names;
        for (size_t i = 0; i < res->n; i++) {
            size_t nl = strlen(res->names[i]) + 1;
            memcpy(p, res->names[i], nl);
            p += nl;
        }
        *p = '\0';
        free(r->grant_names);
        r->grant_names = names;
        lk_strlcpy(r->grant_lease, res->lease, sizeof(r->grant_lease));
        r->grant_pending = true;
        json_t *o = json_object();
        char expires[32];
        lk_rfc3339(res->expires_at_ms, expires);
        json_object_set_new(o, "lease", json_string(res->lease));
        json_object_set_new(o, "ttl_ms", json_integer(res->ttl_ms));
        json_object_set_new(o, "expires_at", json_string(expires));
        json_object_set_new(o, "session", res->session ? json_string(res->session) : json_null());
        json_object_set_new(o, "owner",
                            res->owner && res->owner[0] ? json_string(res->owner) : json_null());
        json_t *locks = json_array();
        for (size_t i = 0; i < res->n; i++) {
            json_t *one = json_object();
            json_object_set_new(one, "name", json_string(res->names[i]));
            json_object_set_new(one, "fencing_token", json_integer(res->tokens[i]));
            json_array_append_new(locks, one);
        }
        json_object_set_new(o, "locks", locks);
        http_add_header(r, "Lock-Lease", res->lease);
        http_respond_json(r, 200, o);
        return;
    }
    json_t *extra = json_object();
    char msg[320];
    const char *message = NULL;
    if (res->code == LK_LOCKED) {
        json_object_set_new(extra, "name", json_string(res->name));
        if (res->has_holder) {
            json_object_set_new(extra, "holder", holder_json(&res->holder));
            retry_after(r, res->holder.expires_in_ms);
        } else {
            retry_after(r, 0);
        }
        json_object_set_new(extra, "waited_ms", json_integer(res->waited_ms));
        snprintf(msg, sizeof(msg), "'%s' is held; none of the names was granted", res->name);
        message = msg;
    }
    if (res->code == LK_BACKEND_RECOVERING)
        retry_after(r, res->retry_ms);
    errors_respond_msg(r, res->code, message, extra);
}

void locks_multi_acquire(struct req *r)
{
    static const char *const qfields[] = {NULL};
    struct api_error e;
    struct parse_multi pm;
    json_t *body = NULL;
    if (!check_query(r, qfields, NULL, NULL, &e))
        goto bad;
    body = parse_multi(r->body, r->body_len, http_config(r), PM_ACQUIRE, &pm, &e);
    if (body == NULL)
        goto bad;
    struct eng_multi m = {
        .names = pm.names,
        .nnames = pm.nnames,
        .ttl_ms = pm.ttl_ms,
        .wait_ms = pm.wait_ms,
        .session = pm.session,
        .owner = pm.owner,
        .max_hold_ms = pm.max_hold_ms,
    };
    struct eng_waiter *w = NULL;
    enum lk_code c =
        engine_multi_acquire(http_engine(r), http_loop(r), &m, multi_acquire_cb, r, &w);
    http_park(r, body, c, w);
    return;
bad:
    http_reject(r, body, &e);
}

static void multi_set_cb(void *arg, const struct eng_multi_set *res)
{
    struct req *r = arg;
    if (res->code == LK_OK) {
        json_t *o = json_object();
        json_t *locks = json_array(), *lost = json_array();
        for (size_t i = 0; i < res->nlocks; i++)
            json_array_append_new(locks, json_string(res->locks[i]));
        for (size_t i = 0; i < res->nlost; i++)
            json_array_append_new(lost, json_string(res->lost[i]));
        json_object_set_new(o, "locks", locks);
        json_object_set_new(o, "lost", lost);
        if (res->ttl_ms > 0) { /* a renewal */
            char expires[32];
            lk_rfc3339(res->expires_at_ms, expires);
            json_object_set_new(o, "ttl_ms", json_integer(res->ttl_ms));
            json_object_set_new(o, "expires_at", json_string(expires));
        }
        http_respond_json(r, 200, o);
        return;
    }
    json_t *extra = NULL;
    if (res->code == LK_HELD_BY_OTHER && res->has_holder) {
        extra = json_object();
        json_object_set_new(extra, "holder", holder_json(&res->holder));
    }
    if (res->code == LK_BACKEND_RECOVERING)
        retry_after(r, res->retry_ms);
    const char *message = res->code == LK_NOT_HELD ? "nobody holds these locks with this lease now"
                          : res->code == LK_HELD_BY_OTHER
                              ? "other leases hold these locks now; stop using them"
                              : NULL;
    errors_respond_msg(r, res->code, message, extra);
}

static void multi_set(struct req *r, enum parse_multi_kind kind)
{
    static const char *const qfields[] = {"lease", NULL};
    struct api_error e;
    struct parse_multi pm;
    json_t *body = NULL;
    const char *ql = NULL, *lease;
    bool qconf = false;
    if (!check_query(r, qfields, &ql, &qconf, &e))
        goto bad;
    body = parse_multi(r->body, r->body_len, http_config(r), kind, &pm, &e);
    if (body == NULL || !find_lease(r, pm.lease, ql, qconf, &lease, &e))
        goto bad;
    char lease_copy[40];
    lk_strlcpy(lease_copy, lease, sizeof(lease_copy));
    enum lk_code c = kind == PM_RENEW
                         ? engine_multi_renew(http_engine(r), http_loop(r), pm.names, pm.nnames,
                                              lease_copy, pm.ttl_ms, multi_set_cb, r)
                         : engine_multi_release(http_engine(r), http_loop(r), pm.names, pm.nnames,
                                                lease_copy, multi_set_cb, r);
    (void)c;
    json_decref(body); /* the engine copied the names */
    return;
bad:
    http_reject(r, body, &e);
}

void locks_multi_renew(struct req *r)
{
    multi_set(r, PM_RENEW);
}

void locks_multi_release(struct req *r)
{
    multi_set(r, PM_RELEASE);
}
