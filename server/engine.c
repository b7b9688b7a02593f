/*
 * engine.c - the engine's public API: acquire (try-once; blocking ones go to
 * waiters.c), renew, release, inspect, list, ending a session. Generates
 * leases, keeps session bookkeeping in step with the backend, counts
 * results, and turns backend results into the engine's own types. Runs on
 * the calling HTTP loop's thread; backend completions arrive on that same
 * thread. Every backend call goes through engine_bk_submit (engine_bk.c).
 */
#include "server/engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/grant_log.h"
#include "server/log.h"
#include "server/metrics.h"

/* One in-flight backend call made on behalf of a request. */
struct op {
    struct bk_call call;
    struct engine *e;
    struct lk_loop *lp;
    eng_done_fn done;
    void *arg;
    int64_t ttl_ms;
    int64_t max_hold_ms;
    bool has_session;
    bool session_last; /* release: the last hold of a session lease */
    bool shared;       /* acquire: mode shared */
    int64_t limit;     /* acquire: the limit asked (1 = none) */
    /* release: the queue's head granted in the same call (BK_CAP_HANDOFF),
     * attempting until release_done hands it its answer */
    struct eng_waiter *rider;
    struct bk_handoff handoff;
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
    lk_strlcpy(o->name, name, sizeof(o->name));
    return o;
}

static void result_init(struct eng_result *r, enum lk_code code, const char *name)
{
    memset(r, 0, sizeof(*r));
    r->code = code;
    r->name = name;
    r->owner = "";
}

struct engine *engine_new(const struct lk_config *cfg, const struct backend *bk)
{
    struct engine *e = lk_calloc(1, sizeof(*e));
    e->cfg = cfg;
    e->bk = *bk;
    atomic_init(&e->draining, false);
    pthread_mutex_init(&e->wmu, NULL);
    pthread_mutex_init(&e->smu, NULL);
    e->plain = glog_new(INT64_MAX);
    return e;
}

/* ---- plain leases: lockd_locks_held{session_bound="false"} ---- */

void engine_plain_granted(struct engine *e, const char *name, const char *lease, int64_t ttl_ms)
{
    /* token: when it was granted (lk_now_us), for lockd_lock_hold_seconds */
    int64_t now_us = lk_now_us();
    struct gl_grant gr = {.name = name,
                          .lease = lease,
                          .token = now_us,
                          .ttl_ms = ttl_ms,
                          .expires_ms = now_us / 1000 + ttl_ms,
                          .limit = 1};
    glog_put(e->plain, &gr);
    metrics_add(M_LOCKS_HELD_PLAIN, 1);
}

void engine_plain_renewed(struct engine *e, const char *name, const char *lease, int64_t ttl_ms)
{
    glog_renew(e->plain, lease, name, ttl_ms, lk_now_ms());
}

void engine_plain_gone(struct engine *e, const char *name, const char *lease, bool released)
{
    int64_t granted_us;
    if (!glog_take(e->plain, lease, name, &granted_us))
        return;
    metrics_add(M_LOCKS_HELD_PLAIN, -1);
    if (released)
        metrics_observe(H_LOCK_HOLD, lk_now_us() - granted_us);
}

void engine_plain_sweep(struct engine *e, int64_t now)
{
    size_t n = glog_sweep(e->plain, now);
    if (n > 0)
        metrics_add(M_LOCKS_HELD_PLAIN, -(int64_t)n);
}

static void on_backend_release(void *arg, const char *name, enum bk_news what, int64_t ttl_ms)
{
    switch (what) {
    case BK_NEWS_GRANTED: waiters_kick_granted(arg, name); break;
    case BK_NEWS_SHORTER: waiters_renewed(arg, name, ttl_ms); break;
    case BK_NEWS_RELEASED: waiters_kick(arg, name); break;
    }
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
    metrics_add(M_LOCKS_HELD_PLAIN, -(int64_t)glog_count(e->plain));
    glog_free(e->plain);
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

size_t engine_nodes(struct engine *e, struct eng_node *out, size_t max)
{
    struct bk_node nodes[METRICS_MAX_NODES];
    size_t n =
        e->bk.ops->nodes(e->bk.state, nodes, max < METRICS_MAX_NODES ? max : METRICS_MAX_NODES);
    for (size_t i = 0; i < n; i++) {
        memcpy(out[i].addr, nodes[i].addr, sizeof(out[i].addr));
        memcpy(out[i].reason, nodes[i].reason, sizeof(out[i].reason));
        out[i].up = nodes[i].up;
        out[i].errors = metrics_backend_errors(i);
        out[i].restarts = nodes[i].restarts;
        out[i].recovering = nodes[i].recovering;
    }
    return n;
}

/* ---- acquire ---- */

void engine_acquire_in_doubt(struct engine *e, struct lk_loop *lp, enum lk_code code,
                             const char *name, const char *lease)
{
    if (code == LK_BACKEND_DOWN)
        waiters_release_bg(e, lp, name, lease, 0, false);
}

static void acquire_done(void *arg, const struct bk_res *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    r.owner = o->owner;
    if (br->code == LK_OK && o->has_session) {
        enum lk_code c =
            session_add_lock(o->e, o->session, o->name, o->lease, o->owner, br->fencing_token,
                             o->ttl_ms, o->max_hold_ms, o->shared, o->limit);
        if (c != LK_OK) {
            /* The session died while the grant was in flight: undo it. */
            waiters_release_bg(o->e, o->lp, o->name, o->lease, 0, true);
            r.code = c;
        }
    }
    if (r.code == LK_OK) {
        engine_count_grant(o->shared, o->limit);
        if (!o->has_session)
            engine_plain_granted(o->e, o->name, o->lease, br->ttl_ms > 0 ? br->ttl_ms : o->ttl_ms);
        r.shared = o->shared;
        r.lease = o->lease;
        r.fencing_token = br->fencing_token;
        r.ttl_ms = engine_answer_ttl(br, o->ttl_ms);
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
        r.session = o->has_session ? o->session : NULL;
        r.count = 1;
        watchers_kick(o->e, o->name);
        lk_log(LK_DEBUG, "granted '%s' token %lld", o->name, (long long)br->fencing_token);
    } else if (r.code == LK_LOCKED) {
        metrics_add(M_ACQUIRE_LOCKED, 1);
        engine_holder_of(br, &r.holder);
        r.has_holder = true;
        r.holder_is_self = o->has_session && session_holds(o->e, o->session, o->name);
    } else if (r.code == LK_LIMIT_MISMATCH) {
        metrics_add(M_ACQUIRE_LOCKED, 1);
        r.limit = br->limit;
    } else {
        metrics_add(M_ACQUIRE_ERROR, 1);
        r.retry_ms = br->delay_ms; /* LK_BACKEND_RECOVERING: the grace left */
        if (r.code == LK_UNSUPPORTED)
            r.message = br->refusal;
        engine_acquire_in_doubt(o->e, o->lp, br->code, o->name, o->lease);
    }
    o->done(o->arg, &r);
    free(o);
}

enum lk_code engine_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                            eng_done_fn done, void *arg, struct eng_waiter **waiter)
{
    struct eng_result r;
    struct eng_acquire inherit;
    char sowner[LK_OWNER_MAX + 1];
    *waiter = NULL;
    if (atomic_load(&e->draining)) {
        result_init(&r, LK_SHUTTING_DOWN, a->name);
        done(arg, &r);
        return LK_OK;
    }
    /* What the backend cannot do is refused before anything (reentrancy,
     * a queue), with the backend's reason. */
    struct bk_req ask = {.op = BK_ACQUIRE,
                         .mode = a->shared ? BK_SHARED : BK_EXCLUSIVE,
                         .limit = engine_limit_of(a->limit)};
    const char *why;
    if (!engine_bk_supported(e, &ask, &why)) {
        result_init(&r, LK_UNSUPPORTED, a->name);
        r.message = why;
        metrics_add(M_ACQUIRE_ERROR, 1);
        done(arg, &r);
        return LK_OK;
    }
    if (a->session != NULL) {
        char lease[LK_LEASE_LEN + 1], owner[LK_OWNER_MAX + 1];
        result_init(&r, LK_OK, a->name);
        if (a->reentrant &&
            session_reenter(e, a->session, a->name, a->shared, a->limit, &r, lease, owner)) {
            engine_count_grant(r.shared, a->limit);
            done(arg, &r);
            return LK_OK;
        }
        if (!session_owner(e, a->session, sowner)) {
            result_init(&r, LK_SESSION_NOT_FOUND, a->name);
            done(arg, &r);
            return LK_OK;
        }
        /* A lock taken under a session without an owner of its own is
         * shown with the session's (its pod, its host). */
        if ((a->owner == NULL || a->owner[0] == '\0') && sowner[0] != '\0') {
            inherit = *a;
            inherit.owner = sowner;
            a = &inherit;
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
        r.holder_is_self = a->session != NULL && session_holds(e, a->session, a->name);
        metrics_add(M_ACQUIRE_LOCKED, 1);
        done(arg, &r);
        return LK_OK;
    }
    struct op *o = op_new(e, lp, a->name, done, arg);
    memcpy(o->lease, lease, sizeof(o->lease));
    lk_strlcpy(o->owner, a->owner ? a->owner : "", sizeof(o->owner));
    o->ttl_ms = a->ttl_ms;
    o->max_hold_ms = a->max_hold_ms;
    o->shared = a->shared;
    o->limit = engine_limit_of(a->limit);
    if (a->session != NULL) {
        o->has_session = true;
        lk_strlcpy(o->session, a->session, sizeof(o->session));
    }
    struct bk_req req = {
        .op = BK_ACQUIRE,
        .name = o->name,
        .lease = o->lease,
        .owner = o->owner,
        .mode = a->shared ? BK_SHARED : BK_EXCLUSIVE,
        .limit = o->limit,
        .ttl_ms = a->ttl_ms,
        .session_bound = o->has_session,
    };
    return engine_bk_submit(e, lp, &o->call, &req, acquire_done, o);
}

/* ---- renew ---- */

static void renew_done(void *arg, const struct bk_res *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    if (br->code == LK_OK) {
        metrics_add(M_RENEW_OK, 1);
        int64_t count = session_note_renew(o->e, o->name, o->lease, br->ttl_ms, o->session);
        if (count > 0)
            r.session = o->session;
        else
            engine_plain_renewed(o->e, o->name, o->lease, br->ttl_ms);
        r.lease = o->lease;
        r.fencing_token = br->fencing_token;
        r.ttl_ms = engine_answer_ttl(br, o->ttl_ms);
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
        /* the lease's own holder entry (owner, mode), as every backend
         * answers a renewal (conformance renew_keeps_token) */
        r.owner = br->nholders > 0 ? br->holders[0].owner : "";
        r.shared = br->nholders > 0 && br->holders[0].mode == BK_SHARED;
        r.count = count > 0 ? count : 1;
        waiters_renewed(o->e, o->name, r.ttl_ms); /* a shorter lease ends sooner */
    } else if (br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER) {
        metrics_add(M_RENEW_NOT_HELD, 1);
        engine_holder_of(br, &r.holder);
        r.has_holder = br->code == LK_HELD_BY_OTHER;
    } else {
        metrics_add(M_RENEW_ERROR, 1);
        r.retry_ms = br->delay_ms;
    }
    o->done(o->arg, &r);
    free(o);
}

enum lk_code engine_renew(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                          int64_t ttl_ms, eng_done_fn done, void *arg)
{
    struct op *o = op_new(e, lp, name, done, arg);
    lk_strlcpy(o->lease, lease, sizeof(o->lease));
    o->ttl_ms = ttl_ms;
    struct bk_req req = {
        .op = BK_RENEW, .name = o->name, .lease = o->lease, .ttl_ms = ttl_ms > 0 ? ttl_ms : 0};
    return engine_bk_submit(e, lp, &o->call, &req, renew_done, o);
}

/* ---- release ---- */

static void release_done(void *arg, const struct bk_res *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    bool doubt = engine_release_in_doubt(br->code);
    /* Only now, with the backend's answer, does a session lock leave its
     * session: on a 503 it is still held, so the watchdog keeps renewing it
     * and it is reported lost if it goes. */
    if (o->session_last)
        session_release_end(o->e, o->name, o->lease, br->code);
    else if (br->code == LK_OK || br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER)
        engine_plain_gone(o->e, o->name, o->lease, br->code == LK_OK);
    if (br->code == LK_OK) {
        metrics_add(M_RELEASE_OK, 1);
        r.fencing_token = br->fencing_token;
        r.count = 0;
        waiters_kick_rider(o->e, o->name, o->rider);
    } else if (br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER) {
        metrics_add(M_RELEASE_NOT_HELD, 1);
        engine_holder_of(br, &r.holder);
        r.has_holder = br->code == LK_HELD_BY_OTHER;
    } else {
        metrics_add(M_RELEASE_ERROR, 1);
        r.retry_ms = br->delay_ms;
        /* In doubt: the script may have run and freed the name, and this
         * lockd skips its own message. The head asks once (refused, it
         * waits for its timer as before); a rider first renews its lease,
         * which the hand-off may have granted (waiters.c ride_back). */
        if (doubt)
            waiters_kick_rider(o->e, o->name, o->rider);
    }
    if (o->rider != NULL)
        waiters_ride_done(o->e, o->rider, br->code == LK_OK || doubt, doubt,
                          br->code == LK_OK ? br->handoff : NULL);
    o->done(o->arg, &r);
    free(o);
}

enum lk_code engine_release(struct engine *e, struct lk_loop *lp, const char *name,
                            const char *lease, eng_done_fn done, void *arg)
{
    int64_t left, token;
    enum sess_release sr = session_release_begin(e, name, lease, &left, &token);
    if (sr == SR_KEPT) {
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
    o->session_last = sr == SR_LAST;
    struct bk_req req = {.op = BK_RELEASE, .name = o->name, .lease = o->lease};
    /* The name's next waiter here asks in the same call: a busy name's
     * release and grant cost one backend call, not two. */
    if (e->bk.ops->caps & BK_CAP_HANDOFF) {
        o->rider = waiters_ride(e, o->name, &o->handoff);
        if (o->rider != NULL)
            req.handoff = &o->handoff;
    }
    return engine_bk_submit(e, lp, &o->call, &req, release_done, o);
}

/* ---- force-unlock ---- */

static void force_done(void *arg, const struct bk_res *br)
{
    struct op *o = arg;
    struct eng_result r;
    result_init(&r, br->code, o->name);
    if (engine_release_in_doubt(br->code))
        waiters_kick(o->e, o->name); /* it may have run: the head asks once */
    if (br->code == LK_OK) {
        metrics_add(M_FORCED_RELEASES, 1);
        size_t n = glog_drop_name(o->e->plain, o->name); /* (session locks: found lost) */
        if (n > 0)
            metrics_add(M_LOCKS_HELD_PLAIN, -(int64_t)n);
        r.fencing_token = br->fencing_token;
        /* A session of this lockd that held it learns at its next watchdog
         * renewal (not found: lost), as one of any other lockd does. */
        waiters_kick(o->e, o->name);
    }
    o->done(o->arg, &r);
    free(o);
}

enum lk_code engine_force_release(struct engine *e, struct lk_loop *lp, const char *name,
                                  eng_done_fn done, void *arg)
{
    struct op *o = op_new(e, lp, name, done, arg);
    struct bk_req req = {.op = BK_FORCE_RELEASE, .name = o->name};
    return engine_bk_submit(e, lp, &o->call, &req, force_done, o);
}

/* ---- inspect, list, ping ---- */

struct info_op {
    struct bk_call call;
    struct engine *e;
    eng_info_fn done;
    void *arg;
    char name[LK_NAME_MAX + 1];
};

static void inspect_done(void *arg, const struct bk_res *br)
{
    struct info_op *io = arg;
    struct eng_info info;
    memset(&info, 0, sizeof(info));
    info.code = br->code;
    struct eng_holder *hs = NULL;
    if (br->code == LK_OK) {
        info.held = br->nholders > 0;
        engine_holder_of(br, &info.holder);
        if (br->nholders > 0) {
            hs = lk_malloc(br->nholders * sizeof(*hs));
            for (size_t i = 0; i < br->nholders; i++)
                engine_holder_conv(&hs[i], &br->holders[i]);
        }
        info.holders = hs;
        info.nholders = br->nholders;
        info.total_holders = br->total_holders > br->nholders ? br->total_holders : br->nholders;
        info.limit = br->limit;
        info.waiters = waiters_count(io->e, io->name);
        info.has_index = engine_has_index(io->e);
        info.index = br->index;
    }
    io->done(io->arg, &info);
    free(hs);
    free(io);
}

bool engine_has_index(const struct engine *e)
{
    return (e->bk.ops->caps & BK_CAP_INDEX) != 0;
}

void engine_info_of(struct engine *e, const char *name, const struct bk_res *br,
                    struct eng_info *info, struct eng_holder **hs)
{
    memset(info, 0, sizeof(*info));
    *hs = NULL;
    info->code = br->code;
    if (br->code != LK_OK)
        return;
    info->held = br->nholders > 0;
    engine_holder_of(br, &info->holder);
    if (br->nholders > 0) {
        *hs = lk_malloc(br->nholders * sizeof(**hs));
        for (size_t i = 0; i < br->nholders; i++)
            engine_holder_conv(&(*hs)[i], &br->holders[i]);
    }
    info->holders = *hs;
    info->nholders = br->nholders;
    info->total_holders = br->total_holders > br->nholders ? br->total_holders : br->nholders;
    info->limit = br->limit;
    info->waiters = waiters_count(e, name);
    info->has_index = engine_has_index(e);
    info->index = br->index;
}

enum lk_code engine_inspect(struct engine *e, struct lk_loop *lp, const char *name,
                            eng_info_fn done, void *arg)
{
    struct info_op *io = lk_calloc(1, sizeof(*io));
    io->e = e;
    io->done = done;
    io->arg = arg;
    lk_strlcpy(io->name, name, sizeof(io->name));
    struct bk_req req = {.op = BK_INSPECT, .name = io->name};
    return engine_bk_submit(e, lp, &io->call, &req, inspect_done, io);
}

struct list_op {
    struct bk_call call;
    eng_list_fn done;
    void *arg;
    bool has_index;
};

static void list_done(void *arg, const struct bk_res *br)
{
    struct list_op *lo = arg;
    struct eng_entry *ents = NULL;
    size_t n = br->code == LK_OK ? br->nentries : 0;
    if (n > 0) {
        ents = lk_malloc(n * sizeof(*ents));
        for (size_t i = 0; i < n; i++) {
            ents[i].name = br->entries[i].name;
            engine_holder_conv(&ents[i].holder, &br->entries[i].holder);
            ents[i].nholders = br->entries[i].nholders > 0 ? br->entries[i].nholders : 1;
            ents[i].limit = br->entries[i].limit > 0 ? br->entries[i].limit : 1;
            ents[i].has_index = lo->has_index;
            ents[i].index = br->entries[i].index;
        }
    }
    lo->done(lo->arg, br->code, ents, n, br->code == LK_OK ? br->next_cursor : NULL);
    free(ents);
    free(lo);
}

enum lk_code engine_list(struct engine *e, struct lk_loop *lp, const char *prefix,
                         const char *cursor, size_t limit, eng_list_fn done, void *arg)
{
    struct list_op *lo = lk_malloc(sizeof(*lo));
    lo->done = done;
    lo->arg = arg;
    lo->has_index = engine_has_index(e);
    /* The strings are the caller's and live until done ran. */
    struct bk_req req = {.op = BK_LIST, .prefix = prefix, .cursor = cursor, .count = limit};
    return engine_bk_submit(e, lp, &lo->call, &req, list_done, lo);
}

int64_t engine_waiters(struct engine *e, const char *name)
{
    return waiters_count(e, name);
}

struct ping_op {
    struct bk_call call;
    eng_ping_fn done;
    void *arg;
};

static void ping_done(void *arg, const struct bk_res *br)
{
    struct ping_op *po = arg;
    po->done(po->arg, br->code);
    free(po);
}

enum lk_code engine_ping(struct engine *e, struct lk_loop *lp, eng_ping_fn done, void *arg)
{
    struct ping_op *po = lk_malloc(sizeof(*po));
    po->done = done;
    po->arg = arg;
    struct bk_req req = {.op = BK_PING};
    return engine_bk_submit(e, lp, &po->call, &req, ping_done, po);
}

/* ---- ending a session ---- */

/* Fan-in of the releases done when a session ends. */
struct end_op {
    struct engine *e;
    eng_session_fn done;
    void *arg;
    size_t pending;
    char id[LK_SESSION_LEN + 1];
    char **names; /* of the locks actually released, in completion order */
    size_t n;
};

/* One release of an ending session. */
struct end_rel {
    struct end_op *eo;
    char *name; /* moves into eo->names when released */
};

static void end_finish(struct end_op *eo)
{
    struct eng_session_view v;
    memset(&v, 0, sizeof(v));
    v.code = LK_OK;
    v.session = eo->id;
    v.locks = (const char *const *)eo->names;
    v.nlocks = eo->n;
    eo->done(eo->arg, &v);
    for (size_t i = 0; i < eo->n; i++)
        free(eo->names[i]);
    free(eo->names);
    free(eo);
}

/* On the loop that ended the session. */
static void end_release_done(void *arg, const struct bk_res *r)
{
    struct end_rel *er = arg;
    struct end_op *eo = er->eo;
    if (r->code == LK_OK) {
        /* Wake waiters only now: the name is free in the backend. */
        waiters_kick(eo->e, er->name);
        eo->names[eo->n++] = er->name;
    } else {
        if (engine_release_in_doubt(r->code))
            waiters_kick(eo->e, er->name); /* it may have run: the head asks once */
        free(er->name);
    }
    free(er);
    if (--eo->pending == 0)
        end_finish(eo);
}

enum lk_code engine_session_end(struct engine *e, struct lk_loop *lp, const char *id,
                                eng_session_fn done, void *arg)
{
    struct sess_end *se;
    if (session_end(e, id, &se) != LK_OK) {
        struct eng_session_view v;
        memset(&v, 0, sizeof(v));
        v.code = LK_SESSION_NOT_FOUND;
        done(arg, &v);
        return LK_OK;
    }
    waiters_fail(e, id);

    struct end_op *eo = lk_calloc(1, sizeof(*eo));
    eo->e = e;
    eo->done = done;
    eo->arg = arg;
    lk_strlcpy(eo->id, id, sizeof(eo->id));
    eo->names = lk_calloc(se->n ? se->n : 1, sizeof(char *));
    eo->pending = se->n + 1; /* +1 held until every release is issued */
    for (size_t i = 0; i < se->n; i++) {
        struct end_rel *er = lk_malloc(sizeof(*er));
        er->eo = eo;
        er->name = se->names[i];
        se->names[i] = NULL; /* moved */
        /* A clean end: no lock-delay (that is for sessions that expire).
         * Compare-and-delete: a lock lost meanwhile is not someone else's
         * to lose. */
        engine_bk_release(e, lp, er->name, se->leases[i], 0, true, end_release_done, er);
    }
    sess_end_free(se);
    if (--eo->pending == 0) {
        end_finish(eo);
        return LK_OK;
    }
    return LK_AGAIN;
}

size_t engine_session_count(struct engine *e)
{
    return session_count(e);
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
