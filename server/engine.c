/*
 * engine.c - lock operations: acquire (try-once; blocking ones go to
 * waiters.c), renew, release, inspect, list. Generates leases, keeps session
 * bookkeeping in step with the backend, and counts results. Runs on the
 * calling HTTP loop's thread; backend completions arrive on that same thread.
 */
#include "server/engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/metrics.h"

/* One in-flight backend call made on behalf of a request. */
struct op {
    struct engine *e;
    struct lk_loop *lp;
    eng_done_fn done;
    void *arg;
    int64_t start_us;
    int64_t ttl_ms;
    int64_t max_hold_ms;
    int64_t count;
    bool has_session;
    /* strings last: op_new zeroes the fields above and empties these, not
     * the whole 0.5 KiB per operation */
    char name[LK_NAME_MAX + 1];
    char lease[LK_LEASE_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    char session[LK_SESSION_LEN + 1];
};

static struct op *op_new(struct engine *e, struct lk_loop *lp, const char *name, eng_done_fn done,
                         void *arg)
{
    struct op *o = lk_malloc(sizeof(*o));
    memset(o, 0, offsetof(struct op, name));
    o->lease[0] = o->owner[0] = o->session[0] = '\0';
    o->e = e;
    o->lp = lp;
    o->done = done;
    o->arg = arg;
    o->start_us = lk_now_us();
    lk_strlcpy(o->name, name, sizeof(o->name));
    return o;
}

static void op_finish(struct op *o, enum lk_code code)
{
    metrics_observe(H_BACKEND_DURATION, lk_now_us() - o->start_us);
    if (code == LK_BACKEND_DOWN)
        metrics_backend_error(0); /* single-node backends; redlock counts per node itself */
    free(o);
}

static void result_init(struct eng_result *r, enum lk_code code, const char *name)
{
    memset(r, 0, sizeof(*r));
    r->code = code;
    r->name = name;
    r->owner = "";
}

struct engine *engine_new(const struct lk_config *cfg, struct backend bk)
{
    struct engine *e = lk_calloc(1, sizeof(*e));
    e->cfg = cfg;
    e->bk = bk;
    atomic_init(&e->draining, false);
    pthread_mutex_init(&e->wmu, NULL);
    pthread_mutex_init(&e->smu, NULL);
    return e;
}

static void on_backend_release(void *arg, const char *name)
{
    waiters_kick(arg, name);
}

enum lk_code engine_start(struct engine *e)
{
    if (e->bk.ops->set_release_hook != NULL)
        e->bk.ops->set_release_hook(e->bk.state, on_backend_release, e);
    return janitor_start(e);
}

void engine_free(struct engine *e)
{
    if (e == NULL)
        return;
    janitor_stop(e);
    if (e->bk.ops->set_release_hook != NULL)
        e->bk.ops->set_release_hook(e->bk.state, NULL, NULL);
    waiters_free_all(e);
    sessions_free_all(e);
    e->bk.ops->free(e->bk.state);
    pthread_mutex_destroy(&e->wmu);
    pthread_mutex_destroy(&e->smu);
    free(e);
}

enum lk_code engine_attach(struct engine *e, struct lk_loop *lp)
{
    return e->bk.ops->attach(e->bk.state, lp);
}

void engine_detach(struct engine *e, struct lk_loop *lp)
{
    e->bk.ops->detach(e->bk.state, lp);
}

const char *engine_backend_name(const struct engine *e)
{
    return e->bk.ops->name;
}

size_t engine_nodes(struct engine *e, struct bk_node *out, size_t max)
{
    return e->bk.ops->nodes(e->bk.state, out, max);
}

/* ---- acquire ---- */

static void acquire_done(void *arg, const struct bk_reply *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    r.owner = o->owner;
    if (br->code == LK_OK && o->has_session) {
        enum lk_code c = session_add_lock(o->e, o->session, o->name, o->lease, o->owner,
                                          br->fencing_token, o->ttl_ms, o->max_hold_ms);
        if (c != LK_OK) {
            /* The session died while the grant was in flight: undo it. */
            engine_release_bg(o->e, o->lp, o->name, o->lease, 0);
            r.code = c;
        }
    }
    if (r.code == LK_OK) {
        metrics_add(M_ACQUIRE_GRANTED, 1);
        r.lease = o->lease;
        r.fencing_token = br->fencing_token;
        r.ttl_ms = br->ttl_ms > 0 ? br->ttl_ms : o->ttl_ms;
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
        r.session = o->has_session ? o->session : NULL;
        r.count = 1;
        lk_log(LK_DEBUG, "granted '%s' token %lld", o->name, (long long)br->fencing_token);
    } else if (r.code == LK_LOCKED) {
        metrics_add(M_ACQUIRE_LOCKED, 1);
        r.holder = br->holder;
        r.has_holder = true;
    } else {
        metrics_add(M_ACQUIRE_ERROR, 1);
    }
    o->done(o->arg, &r);
    op_finish(o, br->code);
}

enum lk_code engine_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                            eng_done_fn done, void *arg, struct eng_waiter **waiter)
{
    struct eng_result r;
    *waiter = NULL;
    if (atomic_load(&e->draining)) {
        result_init(&r, LK_SHUTTING_DOWN, a->name);
        done(arg, &r);
        return LK_OK;
    }
    if (a->session != NULL) {
        char lease[LK_LEASE_LEN + 1], owner[LK_OWNER_MAX + 1];
        result_init(&r, LK_OK, a->name);
        if (a->reentrant && session_reenter(e, a->session, a->name, &r, lease, owner)) {
            metrics_add(M_ACQUIRE_GRANTED, 1);
            done(arg, &r);
            return LK_OK;
        }
        if (!session_alive(e, a->session)) {
            result_init(&r, LK_SESSION_NOT_FOUND, a->name);
            done(arg, &r);
            return LK_OK;
        }
    }
    char lease[LK_LEASE_LEN + 1];
    lk_random_hex(lease, LK_LEASE_LEN / 2);
    /* With max_waiters parked already (the queue checks, under its lock), a
     * blocking acquire is tried once: a free lock is still granted, a held
     * one answered 409 at once. */
    if (a->wait_ms > 0) {
        enum lk_code c = waiters_acquire(e, lp, a, lease, done, arg, waiter);
        if (c != LK_LOCKED)
            return c;
    }

    /* A try-once acquire never jumps ahead of waiters queued here. */
    result_init(&r, LK_LOCKED, a->name);
    if (waiters_queued(e, a->name, &r.holder)) {
        r.has_holder = true;
        metrics_add(M_ACQUIRE_LOCKED, 1);
        done(arg, &r);
        return LK_OK;
    }
    struct op *o = op_new(e, lp, a->name, done, arg);
    memcpy(o->lease, lease, sizeof(o->lease));
    lk_strlcpy(o->owner, a->owner ? a->owner : "", sizeof(o->owner));
    o->ttl_ms = a->ttl_ms;
    o->max_hold_ms = a->max_hold_ms;
    if (a->session != NULL) {
        o->has_session = true;
        lk_strlcpy(o->session, a->session, sizeof(o->session));
    }
    struct bk_acquire ba = {
        .name = o->name,
        .lease = o->lease,
        .owner = o->owner,
        .ttl_ms = a->ttl_ms,
        .session_bound = o->has_session,
    };
    return e->bk.ops->acquire(e->bk.state, lp, &ba, acquire_done, o);
}

/* ---- renew ---- */

static void renew_done(void *arg, const struct bk_reply *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    if (br->code == LK_OK) {
        metrics_add(M_RENEW_OK, 1);
        int64_t count = session_note_renew(o->e, o->name, o->lease, br->ttl_ms, o->session);
        if (count > 0)
            r.session = o->session;
        r.lease = o->lease;
        r.fencing_token = br->fencing_token;
        r.ttl_ms = br->ttl_ms > 0 ? br->ttl_ms : o->ttl_ms;
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
        r.owner = br->holder.owner;
        r.count = count > 0 ? count : 1;
    } else if (br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER) {
        metrics_add(M_RENEW_NOT_HELD, 1);
        r.holder = br->holder;
        r.has_holder = br->code == LK_HELD_BY_OTHER;
    } else {
        metrics_add(M_RENEW_ERROR, 1);
    }
    o->done(o->arg, &r);
    op_finish(o, br->code);
}

enum lk_code engine_renew(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                          int64_t ttl_ms, eng_done_fn done, void *arg)
{
    struct op *o = op_new(e, lp, name, done, arg);
    lk_strlcpy(o->lease, lease, sizeof(o->lease));
    o->ttl_ms = ttl_ms;
    return e->bk.ops->renew(e->bk.state, lp, o->name, o->lease, ttl_ms > 0 ? ttl_ms : 0, renew_done,
                            o);
}

/* ---- release ---- */

static void release_done(void *arg, const struct bk_reply *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    if (br->code == LK_OK) {
        metrics_add(M_RELEASE_OK, 1);
        r.fencing_token = br->fencing_token;
        r.count = 0;
        waiters_kick(o->e, o->name);
    } else if (br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER) {
        metrics_add(M_RELEASE_NOT_HELD, 1);
        r.holder = br->holder;
        r.has_holder = br->code == LK_HELD_BY_OTHER;
    } else {
        metrics_add(M_RELEASE_ERROR, 1);
    }
    if (o->done != NULL)
        o->done(o->arg, &r);
    op_finish(o, br->code);
}

enum lk_code engine_release(struct engine *e, struct lk_loop *lp, const char *name,
                            const char *lease, eng_done_fn done, void *arg)
{
    int64_t left, token;
    if (session_release_hold(e, name, lease, &left, &token)) {
        /* The hold count lives in this lockd; the backend still holds the lease. */
        struct eng_result r;
        result_init(&r, LK_OK, name);
        r.count = left;
        r.fencing_token = token;
        metrics_add(M_RELEASE_OK, 1);
        done(arg, &r);
        return LK_OK;
    }
    struct op *o = op_new(e, lp, name, done, arg);
    lk_strlcpy(o->lease, lease, sizeof(o->lease));
    return e->bk.ops->release(e->bk.state, lp, o->name, o->lease, 0, release_done, o);
}

void engine_release_bg(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                       int64_t delay_ms)
{
    struct op *o = op_new(e, lp, name, NULL, NULL);
    lk_strlcpy(o->lease, lease, sizeof(o->lease));
    enum lk_code c =
        e->bk.ops->release(e->bk.state, lp, o->name, o->lease, delay_ms, release_done, o);
    (void)c; /* completion handled in release_done either way */
}

/* ---- inspect, list, ping ---- */

struct info_op {
    struct engine *e;
    eng_info_fn done;
    void *arg;
    char name[LK_NAME_MAX + 1];
};

static void inspect_done(void *arg, const struct bk_info *info)
{
    struct info_op *io = arg;
    io->done(io->arg, info, waiters_count(io->e, io->name));
    free(io);
}

enum lk_code engine_inspect(struct engine *e, struct lk_loop *lp, const char *name,
                            eng_info_fn done, void *arg)
{
    struct info_op *io = lk_calloc(1, sizeof(*io));
    io->e = e;
    io->done = done;
    io->arg = arg;
    lk_strlcpy(io->name, name, sizeof(io->name));
    return e->bk.ops->inspect(e->bk.state, lp, io->name, inspect_done, io);
}

enum lk_code engine_list(struct engine *e, struct lk_loop *lp, const char *prefix,
                         const char *cursor, size_t limit, bk_list_fn done, void *arg)
{
    return e->bk.ops->list(e->bk.state, lp, prefix, cursor, limit, done, arg);
}

int64_t engine_waiters(struct engine *e, const char *name)
{
    return waiters_count(e, name);
}

enum lk_code engine_ping(struct engine *e, struct lk_loop *lp, bk_done_fn done, void *arg)
{
    return e->bk.ops->ping(e->bk.state, lp, done, arg);
}

/* ---- lifecycle ---- */

void engine_drain(struct engine *e)
{
    atomic_store(&e->draining, true);
    waiters_fail(e, NULL);
}

bool engine_draining(const struct engine *e)
{
    return atomic_load(&((struct engine *)e)->draining);
}
