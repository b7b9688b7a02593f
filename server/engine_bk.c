/*
 * engine_bk.c - the engine's one way to its backend. Requests, waiters, the
 * watchdog, the reaper and shutdown all submit here, so every call is timed
 * (lockd_backend_request_duration_seconds{op}), every failure is charged to the
 * node that failed (lockd_backend_errors_total{node}; a quorum backend charges
 * what fails after its answer itself, backend_redlock.c), and what a backend
 * cannot do is refused before it is sent, with the backend's reason. Runs on
 * the submitting loop's thread; completions come back on it.
 */
#include <stdlib.h>
#include <string.h>

#include "server/engine_int.h"
#include "server/metrics.h"

/* A call that failed on a node counts once against it. */
static void count_errors(const struct bk_res *r)
{
    if (r->nnodes == 0) { /* a backend of one node */
        bool down = r->code == LK_BACKEND_DOWN;
        for (size_t i = 0; i < r->nitems && !down; i++)
            down = r->items[i].result == LK_BACKEND_DOWN; /* a renew-many's round trip */
        if (down)
            metrics_backend_error(0);
        return;
    }
    for (size_t i = 0; i < r->nnodes; i++)
        if (r->nodes[i].code == LK_BACKEND_DOWN && r->nodes[i].node >= 0)
            metrics_backend_error((size_t)r->nodes[i].node);
}

static void call_done(void *arg, const struct bk_res *r)
{
    struct bk_call *c = arg;
    /* done may free the record c lives in: read it first. */
    bk_done_fn done = c->done;
    void *darg = c->arg;
    metrics_backend_observe(c->op, lk_now_us() - c->start_us);
    count_errors(r);
    done(darg, r);
}

static bool supported(const struct engine *e, const struct bk_req *req)
{
    unsigned caps = e->bk.ops->caps;
    if (req->op == BK_FORCE_RELEASE)
        return (caps & BK_CAP_FORCE) != 0;
    if (req->op == BK_ACQUIRE_MULTI)
        return (caps & BK_CAP_MULTI) != 0;
    if (req->op != BK_ACQUIRE)
        return true;
    if (req->mode == BK_SHARED && !(caps & BK_CAP_SHARED))
        return false;
    if (req->limit > 1 && !(caps & BK_CAP_LIMIT))
        return false;
    if (req->nmore > 0 && !(caps & BK_CAP_GROUP))
        return false;
    return req->fence_floor <= 0 || (caps & BK_CAP_FLOOR);
}

/* Whether req is within what the backend can do (its caps); when not,
 * *why gets the backend's sentence for the client (or NULL). */
bool engine_bk_supported(const struct engine *e, const struct bk_req *req, const char **why)
{
    *why = NULL;
    if (supported(e, req))
        return true;
    if (e->bk.ops->refusal != NULL)
        *why = e->bk.ops->refusal(req);
    return false;
}

enum lk_code engine_bk_submit(struct engine *e, struct lk_loop *lp, struct bk_call *call,
                              const struct bk_req *req, bk_done_fn done, void *arg)
{
    const char *why;
    if (!engine_bk_supported(e, req, &why)) {
        struct bk_res r;
        bk_res_init(&r, LK_UNSUPPORTED);
        r.refusal = why;
        done(arg, &r);
        return LK_OK;
    }
    call->e = e;
    call->done = done;
    call->arg = arg;
    call->start_us = lk_now_us();
    call->op = (unsigned)req->op;
    return e->bk.ops->submit(e->bk.state, lp, req, call_done, call);
}

/* A background release: owns its strings and its call. */
struct bg_release {
    struct bk_call call;
    bk_done_fn done;
    void *arg;
    bool count;
    char name[LK_NAME_MAX + 1];
    char lease[LK_LEASE_LEN + 1];
};

static void bg_release_done(void *arg, const struct bk_res *r)
{
    struct bg_release *b = arg;
    if (b->count)
        metrics_add(r->code == LK_OK             ? M_RELEASE_OK
                    : r->code == LK_BACKEND_DOWN ? M_RELEASE_ERROR
                                                 : M_RELEASE_NOT_HELD,
                    1);
    if (b->done != NULL)
        b->done(b->arg, r);
    free(b);
}

void engine_bk_release(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                       int64_t delay_ms, bool count, bk_done_fn done, void *arg)
{
    struct bg_release *b = lk_malloc(sizeof(*b));
    b->done = done;
    b->arg = arg;
    b->count = count;
    lk_strlcpy(b->name, name, sizeof(b->name));
    lk_strlcpy(b->lease, lease, sizeof(b->lease));
    /* Compare-and-delete with its own lease: never someone else's lock. */
    struct bk_req req = {
        .op = BK_RELEASE, .name = b->name, .lease = b->lease, .delay_ms = delay_ms};
    enum lk_code c = engine_bk_submit(e, lp, &b->call, &req, bg_release_done, b);
    (void)c; /* bg_release_done runs either way */
}

void engine_bk_watch(struct engine *e, const char *name, bool on)
{
    if (e->bk.ops->watch != NULL)
        e->bk.ops->watch(e->bk.state, name, on);
}

void engine_holder_conv(struct eng_holder *out, const struct bk_holder *h)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->owner, h->owner, sizeof(out->owner));
    out->fencing_token = h->fencing_token;
    out->expires_in_ms = h->expires_in_ms;
    out->session_bound = h->session_bound;
    out->shared = h->mode == BK_SHARED;
}

void engine_count_grant(bool shared, int64_t limit)
{
    metrics_add(M_ACQUIRE_GRANTED, 1);
    metrics_add(limit > 1 ? M_GRANT_SEMAPHORE : shared ? M_GRANT_SHARED : M_GRANT_EXCLUSIVE, 1);
}

void engine_holder_of(const struct bk_res *r, struct eng_holder *out)
{
    memset(out, 0, sizeof(*out));
    if (r->nholders > 0) {
        engine_holder_conv(out, &r->holders[0]);
    } else if (r->delay_ms > 0) {
        out->lock_delay = true;
        out->expires_in_ms = r->delay_ms;
    }
}

int64_t engine_answer_ttl(const struct bk_res *r, int64_t asked_ttl_ms)
{
    int64_t ttl = r->ttl_ms > 0 ? r->ttl_ms : asked_ttl_ms;
    return r->validity_ms > 0 && r->validity_ms < ttl ? r->validity_ms : ttl;
}
