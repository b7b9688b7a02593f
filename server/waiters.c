/*
 * waiters.c - blocking acquires. Each name with waiters has a FIFO queue in
 * this lockd; only its head asks the backend, once per release event (a
 * release here, a pub/sub message from another lockd, or the holder's expiry
 * learned from the failed attempt's PTTL). No thread waits: a waiter is a
 * struct with a timer on the loop of the HTTP connection it answers.
 *
 * Threads: a waiter is created, attempted, answered and freed only on its
 * own loop. Other threads touch queues under wmu and hand work to a waiter's
 * loop with loop_post(name): posts carry names, never waiter pointers, so a
 * waiter freed meanwhile cannot be reached.
 *
 * Grouped grants: when the head asking is shared (a reader-writer lock) and
 * the backend can (BK_CAP_GROUP), the shared waiters queued right behind it,
 * up to the first that is not, ask with it in the same backend call
 * (bk_req.more): a release hands the lock to all of them at once. They are
 * W_ATTEMPTING meanwhile, so nothing else answers or frees them, and each is
 * answered on its own loop: the post that carries it is the one pointer to
 * a waiter that crosses loops, safe because an attempting waiter waits for
 * it.
 *
 * Watchers (GET /locks/{name}?index=N&wait_ms=M, DESIGN.md §Watching) are
 * waiters too, in a list per name rather than a queue: a change of the
 * name's holders (a grant or release here, a message from another lockd)
 * makes each loop with watchers of it inspect the name once, with a mark so
 * the next change through any lockd publishes, and answer the watchers whose
 * index differs; the others wait on a timer at their deadline or the
 * holder's expiry, whichever comes first. Idle watchers cost no CPU.
 *
 * A waiting multi-lock (multilock.c) has one waiter too, which never asks
 * the backend itself: it queues behind the name that refused its set, and
 * when it reaches the head and that name is released (or its holder
 * expires), the multi-lock tries its whole set again; refused by another
 * name, the waiter moves to that name's queue (waiters_multi_park).
 */
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

enum wstate { W_QUEUED, W_ATTEMPTING, W_DONE };

/* At most this many shared waiters ride on their head's acquire. */
#define GROUP_MAX 64

/* At most this many waiters asking ahead of a semaphore's waiter that a
 * release carries (waiters_ride). */
#define RIDE_CHAIN_MAX 64

struct eng_waiter;

/* The shared waiters asking with a head, and their part of its request. */
struct wgroup {
    size_t n;
    struct eng_waiter *m[GROUP_MAX];
    struct bk_grant_item items[GROUP_MAX];
};

struct eng_waiter {
    struct bk_call call; /* its attempt at the backend */
    struct engine *e;
    struct lk_loop *lp;
    struct wqueue *q;
    char name[LK_NAME_MAX + 1];
    char lease[LK_LEASE_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    char session[LK_SESSION_LEN + 1];
    bool has_session;
    int64_t ttl_ms;
    int64_t max_hold_ms;
    bool shared;   /* mode shared */
    int64_t limit; /* the limit asked (1 = none) */
    eng_done_fn done;
    void *arg;
    int64_t start_ms;
    int64_t deadline_ms;
    int64_t retry_at_ms; /* head only: when to try again; 0 = on a kick only */
    ev_timer timer;
    enum wstate state;  /* under wmu */
    bool cancelled;     /* under wmu: the client left */
    bool kick_pending;  /* under wmu: a release came while attempting */
    bool failed;        /* under wmu: answer fail_code at the next chance */
    bool ride_released; /* under wmu: a rider's release released (waiters_ride_done) */
    bool ride_doubt;    /* under wmu: its release was answered in doubt (503): the
                         * hand-off may have granted it (ride_back: reclaim) */
    bool rode;          /* under wmu: asked with a release (waiters_ride) */
    enum lk_code fail_code;
    int64_t limit_in_force; /* LK_LIMIT_MISMATCH: the backend's */
    struct eng_waiter *prev, *next;
    /* grouped grants: the head's followers while it asks; a follower's
     * result, copied for its own loop (holders -> gholder) */
    struct wgroup *group;
    bool grouped;
    struct bk_res gres;
    struct bk_holder gholder;
    /* a watcher: in wl's list (prev, next), never in a queue */
    bool is_watch;
    int64_t index; /* the index its client knows */
    eng_info_fn wdone;
    struct wlist *wl; /* under wmu */
    /* a multi-lock's: moves between queues, never a BK_ACQUIRE of its own */
    bool is_multi;
    waiters_multi_fn mfn;
    void *marg;
};

/* The watchers of one name, on any loop. */
struct wlist {
    char name[LK_NAME_MAX + 1];
    struct eng_waiter *list;
    int nper[LOOP_MAX];                      /* watchers per loop index */
    struct lk_loop *lps[LOOP_MAX];           /* the loop of each index that has some */
    uint64_t inflight[(LOOP_MAX + 63) / 64]; /* an inspect of it is in flight there */
    uint64_t again[(LOOP_MAX + 63) / 64];    /* a change came meanwhile: look again */
    int64_t expiry_at[LOOP_MAX];             /* each loop's next look, at an expiry; 0 none */
    UT_hash_handle hh;
};

struct wqueue {
    char name[LK_NAME_MAX + 1];
    struct eng_waiter *list;
    int64_t n;                /* waiters in list */
    struct eng_holder holder; /* from the last failed attempt */
    bool has_holder;
    int64_t holder_expiry_ms; /* monotonic; when the holder's lease runs out; 0 = the
                               * lock may be free now (a release was seen) */
    int64_t kicked_us;        /* release seen, for the handoff histogram */
    /* Semaphores: releases seen and not yet used by a grant here, so that a
     * release of one slot lets one waiter ask, not one more that would be
     * refused (a release that carried a waiter counts only when that
     * waiter did not take its slot: waiters_ride_done). 0 with a grant (a
     * holder's expiry, a lock-delay's end): the free slots are unknown, so
     * the next waiter asks too, as before. */
    int64_t freed;
    /* Semaphores: a waiter asked, or was granted, with no release counted
     * (freed 0: the queue's first waiter, a retry at a holder's expiry), so
     * free slots are unknown: each grant lets the next waiter ask, until
     * one is refused. A release counted meanwhile does not end that (it
     * used to: the grant took the release's count, the chain stopped with
     * slots still free, and a busy semaphore settled with one slot of
     * eight in use: bench/RESULTS.md). */
    bool unknown;
    /* An ask-now poke is owed to whoever heads the queue (post_poke with
     * now: a grant that leaves room, a 503 or a refused multi-lock that
     * promoted the next, a slot freed, a reader's grant elsewhere). The
     * poke goes to the head's loop, and that head may leave before it runs
     * (its session ends, its client goes, its deadline): the next head's
     * own poke, which says "look" only, then asks all the same, not at
     * the old holder's expiry. Cleared when a head asks (attempt). */
    bool ask;
    UT_hash_handle hh;
};

static void attempt(struct eng_waiter *w);
static void arm(struct eng_waiter *w);

/* Removes w from its queue (under wmu). Returns true if the queue is now
 * empty and was freed; *new_head gets the head that replaced w, if any. */
static bool unlink_waiter(struct engine *e, struct eng_waiter *w, struct eng_waiter **new_head)
{
    struct wqueue *q = w->q;
    bool was_head = q->list == w;
    DL_DELETE(q->list, w);
    q->n--;
    w->q = NULL;
    e->nwaiters--;
    metrics_add(M_WAITERS, -1);
    *new_head = was_head ? q->list : NULL;
    if (q->list == NULL) {
        engine_bk_watch(e, q->name, false);
        HASH_DEL(e->queues, q);
        free(q);
        return true;
    }
    return false;
}

struct poke {
    struct engine *e;
    struct lk_loop *lp;
    bool attempt; /* try the backend now, rather than arm the head's timer */
    char name[LK_NAME_MAX + 1];
};

static void on_poke(void *arg);

static void on_sweep(void *arg);

static void post_to(struct engine *e, struct lk_loop *lp, const char *name, bool now, loop_fn fn)
{
    struct poke *p = lk_malloc(sizeof(*p));
    p->e = e;
    p->lp = lp;
    p->attempt = now;
    lk_strlcpy(p->name, name, sizeof(p->name));
    loop_post(lp, fn, p);
}

/* Pokes q's head h (under wmu); now: it asks at once (q->ask). */
static void post_poke(struct engine *e, struct wqueue *q, struct eng_waiter *h, bool now)
{
    if (now)
        q->ask = true;
    post_to(e, h->lp, q->name, now, on_poke);
}

/* Called after w left the head of its queue (under wmu): tell the new head. */
static void promote(struct engine *e, struct eng_waiter *h, bool attempt_now)
{
    if (h != NULL)
        post_poke(e, h->q, h, attempt_now);
}

static void finish(struct eng_waiter *w, struct eng_result *r)
{
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    w->state = W_DONE;
    r->waited_ms = lk_now_ms() - w->start_ms;
    if (r->code == LK_OK)
        metrics_observe(H_ACQUIRE_WAIT, r->waited_ms * 1000);
    w->done(w->arg, r);
    free(w);
}

static void result_of(struct eng_waiter *w, struct eng_result *r, enum lk_code code)
{
    memset(r, 0, sizeof(*r));
    r->code = code;
    r->name = w->name;
    r->owner = w->owner;
}

/* Answers w (already unlinked) with a failure code. */
static void fail(struct eng_waiter *w, enum lk_code code, const struct eng_holder *holder)
{
    if (w->is_multi) { /* its multi-lock answers, and frees it (waiters_multi_end) */
        ev_timer_stop(loop_ev(w->lp), &w->timer);
        w->state = W_DONE;
        w->mfn(w->marg, code);
        return;
    }
    struct eng_result r;
    result_of(w, &r, code);
    if (holder != NULL) {
        r.holder = *holder;
        r.has_holder = true;
    }
    /* Not under wmu here: session_holds takes smu, which comes first. */
    if (code == LK_LOCKED && w->has_session)
        r.holder_is_self = session_holds(w->e, w->session, w->name);
    if (code == LK_LIMIT_MISMATCH)
        r.limit = w->limit_in_force;
    if (code == LK_LOCKED || code == LK_LIMIT_MISMATCH)
        metrics_add(M_ACQUIRE_LOCKED, 1);
    else
        metrics_add(M_ACQUIRE_ERROR, 1);
    finish(w, &r);
}

static void release_bg_done(void *arg, const struct bk_res *r)
{
    struct poke *p = arg;
    if (r->code == LK_OK || engine_release_in_doubt(r->code))
        waiters_kick(p->e, p->name); /* in doubt, it may have run: the head asks once */
    free(p);
}

void waiters_release_bg(struct engine *e, struct lk_loop *lp, const char *name, const char *lease,
                        int64_t delay_ms, bool count)
{
    struct poke *p = lk_calloc(1, sizeof(*p));
    p->e = e;
    lk_strlcpy(p->name, name, sizeof(p->name));
    engine_bk_release(e, lp, name, lease, delay_ms, count, release_bg_done, p);
}

static void attempt_done(void *arg, const struct bk_res *br)
{
    struct eng_waiter *w = arg;
    struct engine *e = w->e;
    int64_t now = lk_now_ms();
    struct eng_waiter *h = NULL;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q = w->q;
    bool rode = w->rode;
    w->rode = false;
    if (br->code == LK_OK) {
        int64_t kicked = q->kicked_us;
        /* A semaphore's next waiter asks now only if more slots were freed
         * than this grant took (or their number is unknown). A rider took
         * the slot its release freed, which was not counted. Or when the
         * backend says a slot is still free (br->room), whatever was
         * counted here: a count is a guess (a subscription's confirmation
         * wakes the head as a release would, a holder's lease lapses
         * unseen), and a guess too low left slots idle while waiters
         * queued, every release handing its one slot on (bench/RESULTS.md,
         * 2026-11-28). */
        bool more = true;
        if (w->limit > 1 && rode)
            more = q->unknown || q->freed > 0;
        else if (w->limit > 1 && q->freed == 0)
            q->unknown = true;
        else if (w->limit > 1 && !q->unknown)
            more = --q->freed > 0;
        if (w->limit > 1 && br->room)
            more = true;
        unlink_waiter(e, w, &h);
        bool cancelled = w->cancelled;
        if (h != NULL) {
            struct wqueue *nq = h->q;
            nq->has_holder = true;
            memset(&nq->holder, 0, sizeof(nq->holder));
            lk_strlcpy(nq->holder.owner, w->owner, sizeof(nq->holder.owner));
            nq->holder.fencing_token = br->fencing_token;
            nq->holder_expiry_ms = now + w->ttl_ms;
            nq->kicked_us = 0;
        }
        /* A shared grant (or a semaphore's slot) may leave room for the next
         * waiter: it asks at once, and so on up to the first that does not
         * fit (an exclusive one), so every shared waiter before it is
         * granted on this release. Else it waits for the next release. */
        promote(e, h, h != NULL && ((w->shared && h->shared) || (w->limit > 1 && more)));
        pthread_mutex_unlock(&e->wmu);
        if (kicked > 0)
            metrics_observe(H_HANDOFF, lk_now_us() - kicked);
        watchers_kick(e, w->name); /* granted (or to be given back): a change */
        if (cancelled) {
            /* Granted in the instant its client left: nobody knows this
             * lease, so give the lock back at once. */
            waiters_release_bg(e, w->lp, w->name, w->lease, 0, true);
            ev_timer_stop(loop_ev(w->lp), &w->timer);
            free(w);
            return;
        }
        struct eng_result r;
        result_of(w, &r, LK_OK);
        if (w->has_session &&
            session_add_lock(e, w->session, w->name, w->lease, w->owner, br->fencing_token,
                             w->ttl_ms, w->max_hold_ms, w->shared, w->limit) != LK_OK) {
            waiters_release_bg(e, w->lp, w->name, w->lease, 0, true);
            fail(w, LK_SESSION_NOT_FOUND, NULL);
            return;
        }
        engine_count_grant(w->shared, w->limit);
        if (!w->has_session)
            engine_plain_granted(e, w->name, w->lease, br->ttl_ms > 0 ? br->ttl_ms : w->ttl_ms);
        r.shared = w->shared;
        r.lease = w->lease;
        r.fencing_token = br->fencing_token;
        r.ttl_ms = engine_answer_ttl(br, w->ttl_ms);
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
        r.session = w->has_session ? w->session : NULL;
        r.count = 1;
        finish(w, &r);
        return;
    }
    if (br->code == LK_BACKEND_RECOVERING && !w->cancelled && !w->failed && now < w->deadline_ms) {
        /* A Redis that restarted is being re-asserted, or its grace runs: a
         * waiter keeps its place and asks again when it is over. */
        if (w->kick_pending)
            w->kick_pending = false;
        w->state = W_QUEUED;
        w->retry_at_ms = now + (br->delay_ms > 20 ? br->delay_ms : 20);
        pthread_mutex_unlock(&e->wmu);
        arm(w);
        return;
    }
    bool grouped = w->grouped;
    w->grouped = false;
    if (br->code == LK_LOCKED && !w->cancelled && !w->failed && now < w->deadline_ms) {
        /* Only the head's refusal is news for the queue. A grouped
         * follower's or a rider's behind the head may have been decided
         * before releases seen since, which woke the head alone
         * (slot_freed): it would put back an expiry such a release cleared
         * (0: the next head, poked without an attempt, would wait for it
         * with the name free) and drop the slots they freed (the next
         * rider's grant would let nobody ask). Left alone, the worst is
         * one more ask, which the backend refuses. Behind the head it
         * waits to be promoted, with no retry of its own (a retry armed
         * while it is not the head fires again and again: on_timer). */
        bool head = q->list == w;
        if (head || q->holder_expiry_ms != 0) {
            engine_holder_of(br, &q->holder);
            q->has_holder = true;
            q->holder_expiry_ms = now + (q->holder.expires_in_ms > 0 ? q->holder.expires_in_ms : 0);
        }
        if (head && !w->kick_pending)
            q->freed = 0; /* full again (a release meanwhile may have freed some) */
        if (head)
            q->unknown = false;
        if (w->kick_pending || (grouped && q->list == w)) {
            /* A release arrived while we asked, or a follower refused with
             * its head finds itself the head (the head was granted on a
             * later try meanwhile): ask again. */
            w->kick_pending = false;
            pthread_mutex_unlock(&e->wmu);
            attempt(w);
            return;
        }
        w->state = W_QUEUED;
        w->retry_at_ms = head ? q->holder_expiry_ms + 1 : 0;
        pthread_mutex_unlock(&e->wmu);
        arm(w);
        return;
    }
    /* Timed out, cancelled, failed or the backend could not answer. */
    bool cancelled = w->cancelled;
    enum lk_code code = w->failed ? w->fail_code : br->code;
    struct eng_holder holder;
    engine_holder_of(br, &holder);
    w->limit_in_force = br->limit;
    unlink_waiter(e, w, &h);
    promote(e, h, code != LK_LOCKED);
    pthread_mutex_unlock(&e->wmu);
    /* answered 503, the acquire (or a reclaim's renewal) may have run */
    engine_acquire_in_doubt(e, w->lp, br->code, w->name, w->lease);
    if (cancelled) {
        ev_timer_stop(loop_ev(w->lp), &w->timer);
        free(w);
        return;
    }
    fail(w, code, code == LK_LOCKED ? &holder : NULL);
}

/* On a follower's loop: its share of its head's answer. */
static void on_follower(void *arg)
{
    struct eng_waiter *m = arg;
    m->gres.holders = m->gres.nholders > 0 ? &m->gholder : NULL;
    attempt_done(m, &m->gres);
}

/* The answer to a head that asked with followers (bk_req.more): all of
 * them were granted, or none. The followers first, each on its own loop, so
 * that a refused head asking again (a release came meanwhile) finds them
 * queued and takes them along; then the head. */
static void group_done(void *arg, const struct bk_res *br)
{
    struct eng_waiter *w = arg;
    struct wgroup *g = w->group;
    w->group = NULL;
    for (size_t i = 0; i < g->n; i++) {
        struct eng_waiter *m = g->m[i];
        bk_res_init(&m->gres, br->code);
        if (br->code == LK_OK) {
            m->gres.fencing_token = g->items[i].fencing_token;
            m->gres.ttl_ms = g->items[i].ttl_ms;
        }
        m->gres.delay_ms = br->delay_ms;
        m->gres.limit = br->limit;
        m->gres.nholders = br->nholders > 0 ? 1 : 0;
        if (br->nholders > 0)
            m->gholder = br->holders[0];
        if (m->lp == w->lp)
            on_follower(m);
        else
            loop_post(m->lp, on_follower, m);
    }
    free(g);
    attempt_done(w, br);
}

/* Before head w (shared, attempting) asks: the shared waiters queued right
 * behind it, marked attempting, or NULL when none (or the backend cannot
 * take them in one call). */
static struct wgroup *group_take(struct eng_waiter *w)
{
    struct engine *e = w->e;
    if (!w->shared || w->limit != 1 || !(e->bk.ops->caps & BK_CAP_GROUP))
        return NULL;
    struct wgroup *g = NULL;
    pthread_mutex_lock(&e->wmu);
    if (w->q != NULL && w->q->list == w) {
        for (struct eng_waiter *m = w->next; m != NULL; m = m->next) {
            if (!m->shared || m->limit != 1 || m->state != W_QUEUED || m->failed ||
                (g != NULL && g->n == GROUP_MAX))
                break; /* the first that is not a queued reader: the group ends */
            if (g == NULL)
                g = lk_calloc(1, sizeof(*g));
            m->state = W_ATTEMPTING;
            m->grouped = true;
            g->m[g->n] = m;
            g->items[g->n].lease = m->lease;
            g->items[g->n].owner = m->owner;
            g->items[g->n].ttl_ms = m->ttl_ms;
            g->items[g->n].session_bound = m->has_session;
            g->n++;
        }
    }
    pthread_mutex_unlock(&e->wmu);
    return g;
}

/* On w's loop, with w->state == W_ATTEMPTING set under wmu by the caller.
 * failed and fail_code are written by other threads (waiters_fail), so they
 * are read and set here under wmu only. */
static void attempt(struct eng_waiter *w)
{
    struct engine *e = w->e;
    bool dead = w->has_session && !session_alive(e, w->session);
    pthread_mutex_lock(&e->wmu);
    if (dead) {
        w->failed = true;
        w->fail_code = LK_SESSION_NOT_FOUND;
    }
    if (atomic_load(&e->draining)) {
        w->failed = true;
        w->fail_code = LK_SHUTTING_DOWN;
    }
    bool failed = w->failed;
    enum lk_code code = w->fail_code;
    if (w->q != NULL && w->q->list == w)
        w->q->ask = false; /* the head asks: what was owed to it is paid */
    /* A semaphore's waiter that asks with no release counted (the queue's
     * first, a retry at a holder's expiry): the free slots are unknown */
    if (!failed && !w->is_multi && w->limit > 1 && w->q != NULL && w->q->freed == 0)
        w->q->unknown = true;
    if (w->is_multi) {
        struct eng_waiter *h = NULL;
        if (failed && w->q != NULL) {
            unlink_waiter(e, w, &h);
            promote(e, h, true);
        }
        pthread_mutex_unlock(&e->wmu);
        if (failed)
            fail(w, code, NULL);
        else
            w->mfn(w->marg, LK_OK); /* the multi-lock tries its whole set */
        return;
    }
    pthread_mutex_unlock(&e->wmu);
    if (failed) {
        struct bk_res r;
        bk_res_init(&r, code);
        attempt_done(w, &r);
        return;
    }
    struct bk_req req = {
        .op = BK_ACQUIRE,
        .name = w->name,
        .lease = w->lease,
        .owner = w->owner,
        .mode = w->shared ? BK_SHARED : BK_EXCLUSIVE,
        .limit = w->limit,
        .ttl_ms = w->ttl_ms,
        .session_bound = w->has_session,
        .wait = true,
    };
    w->group = group_take(w);
    if (w->group != NULL) {
        req.more = w->group->items;
        req.nmore = w->group->n;
    }
    enum lk_code c =
        engine_bk_submit(e, w->lp, &w->call, &req, w->group ? group_done : attempt_done, w);
    (void)c; /* attempt_done (group_done) runs either way */
}

/* q's holder as of now (what is left of its lease, not what was left when
 * it was last seen); false, *out untouched, when none was seen. Under wmu. */
static bool queue_holder(const struct wqueue *q, int64_t now, struct eng_holder *out)
{
    if (!q->has_holder)
        return false;
    *out = q->holder;
    int64_t left = q->holder_expiry_ms - now;
    out->expires_in_ms = left > 0 ? left : 0;
    return true;
}

/* Deadline and retry timer of a queued waiter. */
static void on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    struct eng_waiter *w = t->data;
    struct engine *e = w->e;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&e->wmu);
    if (w->state != W_QUEUED) {
        pthread_mutex_unlock(&e->wmu);
        return;
    }
    if (now >= w->deadline_ms || w->failed) {
        struct wqueue *q = w->q;
        struct eng_holder holder;
        bool has = queue_holder(q, now, &holder);
        enum lk_code code = w->failed ? w->fail_code : LK_LOCKED;
        struct eng_waiter *h;
        unlink_waiter(e, w, &h);
        promote(e, h, false);
        pthread_mutex_unlock(&e->wmu);
        fail(w, code, code == LK_LOCKED && has ? &holder : NULL);
        return;
    }
    if (w->q->list == w && w->retry_at_ms > 0 && now >= w->retry_at_ms) {
        w->state = W_ATTEMPTING;
        pthread_mutex_unlock(&e->wmu);
        attempt(w);
        return;
    }
    /* A retry due while w is not the head (an answer it had behind the
     * head, e.g. a grouped follower's "recovering", set one) would fire
     * again at once, and again: it waits for its deadline, or to be
     * promoted (on_poke arms it then). */
    if (w->retry_at_ms > 0 && now >= w->retry_at_ms)
        w->retry_at_ms = 0;
    pthread_mutex_unlock(&e->wmu);
    arm(w);
}

/* (Re)arms w's timer for its deadline or its retry, whichever is first. */
static void arm(struct eng_waiter *w)
{
    int64_t at = w->deadline_ms;
    if (w->retry_at_ms > 0 && w->retry_at_ms < at)
        at = w->retry_at_ms;
    double after = (double)(at - lk_now_ms()) / 1000.0;
    if (after < 0)
        after = 0;
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    ev_timer_set(&w->timer, after, 0.);
    ev_timer_start(loop_ev(w->lp), &w->timer);
}

/* On a loop: something changed for name (released, or a new head). Looks
 * at the head only: a poke costs O(1) however long the queue is. */
static void on_poke(void *arg)
{
    struct poke *p = arg;
    struct engine *e = p->e;
    struct eng_waiter *todo = NULL, *rearm = NULL, *w;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, p->name, q);
    if (q != NULL) {
        w = q->list;
        if (w->lp == p->lp && w->state == W_QUEUED && !w->failed) {
            /* holder_expiry_ms 0: a release was seen and no attempt has
             * followed it yet (the head it was meant for may have left). */
            if (p->attempt || q->ask || q->holder_expiry_ms <= lk_now_ms()) {
                w->state = W_ATTEMPTING;
                todo = w;
            } else {
                w->retry_at_ms = q->holder_expiry_ms + 1;
                rearm = w;
            }
        }
    }
    pthread_mutex_unlock(&e->wmu);
    free(p);
    /* Safe: only this loop frees these waiters, and it is busy here. */
    if (rearm != NULL)
        arm(rearm);
    if (todo != NULL)
        attempt(todo);
}

/* On a loop: answers every failed, queued waiter of this loop in queue name
 * (their session died, or lockd is draining). One walk of the queue. */
static void on_sweep(void *arg)
{
    struct poke *p = arg;
    struct engine *e = p->e;
    struct eng_waiter *gone = NULL, *w, *tmp;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, p->name, q);
    if (q != NULL) {
        struct eng_waiter *head = q->list;
        bool freed = false;
        DL_FOREACH_SAFE (q->list, w, tmp) {
            if (w->lp != p->lp || !w->failed || w->state != W_QUEUED)
                continue;
            struct eng_waiter *h;
            freed = unlink_waiter(e, w, &h);
            w->next = gone; /* unlinked: next is ours now */
            gone = w;
            if (freed)
                break;
        }
        if (!freed && q->list != head)
            promote(e, q->list, false);
    }
    pthread_mutex_unlock(&e->wmu);
    free(p);
    while (gone != NULL) {
        w = gone;
        gone = w->next;
        fail(w, w->fail_code, NULL);
    }
}

enum lk_code waiters_acquire(struct engine *e, struct lk_loop *lp, const struct eng_acquire *a,
                             const char *lease, eng_done_fn done, void *arg,
                             struct eng_waiter **out)
{
    struct eng_waiter *w = lk_calloc(1, sizeof(*w));
    w->e = e;
    w->lp = lp;
    lk_strlcpy(w->name, a->name, sizeof(w->name));
    lk_strlcpy(w->lease, lease, sizeof(w->lease));
    lk_strlcpy(w->owner, a->owner ? a->owner : "", sizeof(w->owner));
    if (a->session != NULL) {
        w->has_session = true;
        lk_strlcpy(w->session, a->session, sizeof(w->session));
    }
    w->ttl_ms = a->ttl_ms;
    w->max_hold_ms = a->max_hold_ms;
    w->shared = a->shared;
    w->limit = engine_limit_of(a->limit);
    w->done = done;
    w->arg = arg;
    w->start_ms = lk_now_ms();
    w->deadline_ms = w->start_ms + a->wait_ms;
    ev_timer_init(&w->timer, on_timer, 0., 0.);
    w->timer.data = w;

    pthread_mutex_lock(&e->wmu);
    /* Our own count, under wmu: a gauge is for reading, not for control. */
    if (e->cfg->max_waiters > 0 && e->nwaiters >= e->cfg->max_waiters) {
        pthread_mutex_unlock(&e->wmu);
        free(w);
        return LK_LOCKED; /* full: the caller tries once instead */
    }
    struct wqueue *q;
    HASH_FIND_STR(e->queues, a->name, q);
    if (q == NULL) {
        q = lk_calloc(1, sizeof(*q));
        lk_strlcpy(q->name, a->name, sizeof(q->name));
        HASH_ADD_STR(e->queues, name, q);
        engine_bk_watch(e, a->name, true); /* subscribe before asking: no lost wake-up */
    }
    DL_APPEND(q->list, w);
    q->n++;
    w->q = q;
    e->nwaiters++;
    metrics_add(M_WAITERS, 1);
    bool head = q->list == w;
    w->state = head ? W_ATTEMPTING : W_QUEUED;
    pthread_mutex_unlock(&e->wmu);

    /* The callback may run inside attempt() and free w: callers use *out
     * only while their callback has not run. */
    *out = w;
    if (head) {
        attempt(w);
    } else {
        arm(w);
    }
    return LK_AGAIN;
}

static void watch_cancel(struct engine *e, struct eng_waiter *w);

void engine_cancel(struct engine *e, struct eng_waiter *w)
{
    if (w->is_watch) { /* set once, before the handle was given out */
        watch_cancel(e, w);
        return;
    }
    pthread_mutex_lock(&e->wmu);
    if (w->state == W_ATTEMPTING) {
        /* attempt_done frees it, releasing a grant nobody will receive (a
         * multi-lock's attempt: multilock.c, which asks waiters_multi_cancelled). */
        w->cancelled = true;
        pthread_mutex_unlock(&e->wmu);
        return;
    }
    struct eng_waiter *h = NULL;
    if (w->q != NULL) {
        unlink_waiter(e, w, &h);
        promote(e, h, false);
    }
    pthread_mutex_unlock(&e->wmu);
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    if (w->is_multi) {
        w->state = W_DONE;
        w->mfn(w->marg, LK_CANCELLED); /* frees its multi-lock, and w, answering nothing */
        return;
    }
    free(w);
}

void waiters_kick(struct engine *e, const char *name)
{
    waiters_kick_rider(e, name, NULL);
}

/* A release freed a slot (or the name) of q for its waiters (under wmu):
 * counted, and the head asks (again, if it is asking), unless it is skip,
 * which asks itself. */
static void slot_freed(struct engine *e, struct wqueue *q, const struct eng_waiter *skip)
{
    struct eng_waiter *h = q->list;
    q->freed++;
    if (h == skip)
        return;
    if (h->state == W_ATTEMPTING)
        h->kick_pending = true;
    else if (h->state == W_QUEUED)
        post_poke(e, q, h, true);
}

void waiters_kick_rider(struct engine *e, const char *name, struct eng_waiter *rider)
{
    watchers_kick(e, name); /* a release is a change of holders */
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    if (q != NULL) {
        q->kicked_us = lk_now_us();
        q->holder_expiry_ms = 0;
        /* A release that carried a rider handed its slot (or the name) to
         * it: nothing is counted or woken, unless the rider does not take
         * it (waiters_ride_done). Counting it made the head of a busy
         * semaphore ask for a slot a rider had, and be refused. */
        if (rider == NULL)
            slot_freed(e, q, NULL);
    }
    pthread_mutex_unlock(&e->wmu);
}

/* The waiter a release of name carries: the head when it is queued; or,
 * for a semaphore, the first queued waiter behind a run of waiters that
 * ask already (riding on earlier releases, or the head on its own), all
 * of its limit. Such a rider names the one right before it (ho->after),
 * and the backend grants it only if that one holds the name by then, in
 * Redis, in the script that grants it: that one was granted first, and it
 * was granted only after the one before it, and so on to the head. So no
 * waiter here is granted before one queued ahead of it, whatever order the
 * releases reach Redis in (other loops' connections, a cluster's
 * redirections). A rider not asked (declined, its release did not
 * release, or the one before it does not hold) goes back to waiting
 * (ride_back). */
struct eng_waiter *waiters_ride(struct engine *e, const char *name, struct bk_handoff *ho)
{
    if (atomic_load(&e->draining))
        return NULL;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    struct eng_waiter *w = q != NULL ? q->list : NULL, *before = NULL;
    for (int k = 0; w != NULL && w->state == W_ATTEMPTING; k++) {
        if (k == RIDE_CHAIN_MAX || w->is_multi || w->shared || w->limit < 2 || w->failed ||
            w->cancelled || (before != NULL && w->limit != before->limit)) {
            w = NULL;
            break;
        }
        before = w;
        w = w->next;
    }
    if (w != NULL &&
        (w->state != W_QUEUED || w->failed || w->cancelled || w->is_multi || w->shared ||
         lk_now_ms() >= w->deadline_ms || (before != NULL && w->limit != before->limit)))
        w = NULL;
    if (w != NULL) {
        w->state = W_ATTEMPTING; /* nothing else answers or frees it now */
        w->rode = true;
        memset(ho, 0, sizeof(*ho));
        ho->lease = w->lease;
        ho->owner = w->owner;
        ho->mode = BK_EXCLUSIVE;
        ho->limit = w->limit;
        ho->ttl_ms = w->ttl_ms;
        ho->session_bound = w->has_session;
        if (before != NULL)
            lk_strlcpy(ho->after, before->lease, sizeof(ho->after));
    }
    pthread_mutex_unlock(&e->wmu);
    return w;
}

static void ride_back(void *arg);

/* A reclaim's answer (on the rider's loop): its lease held is the grant
 * the hand-off made; not held, it goes back as a rider not asked (a head
 * asks); no answer is an attempt's (503: answered so; recovering: it keeps
 * its place). */
static void reclaim_done(void *arg, const struct bk_res *br)
{
    struct eng_waiter *w = arg;
    if (br->code == LK_NOT_HELD || br->code == LK_HELD_BY_OTHER)
        ride_back(w);
    else
        attempt_done(w, br);
}

/* On a rider's loop: its release asked nothing for it. A head asks
 * itself when the release released (declined: as a kicked head would), a
 * release came meanwhile, it never asked as the head (it became the head
 * while riding: the poke that told it found it attempting), or a release
 * was seen since its last answer (holder_expiry_ms 0, as on_poke reads
 * it: that release's poke, posted while it was queued, found it riding);
 * a waiter behind the head waits on; a failed one is answered. A release
 * answered in doubt (503: its script may have run, the hand-off granting
 * the rider's lease) counts as one that released, and the rider first
 * renews its own lease (reclaim): held, that is its grant (an acquire
 * would find its own lease and be refused until that lease's expiry); a
 * failed one gives that possible grant back. */
static void ride_back(void *arg)
{
    struct eng_waiter *w = arg;
    struct engine *e = w->e;
    pthread_mutex_lock(&e->wmu);
    if (w->cancelled) { /* its client left meanwhile */
        struct eng_waiter *h = NULL;
        bool doubt = w->ride_doubt;
        unlink_waiter(e, w, &h);
        promote(e, h, false);
        pthread_mutex_unlock(&e->wmu);
        /* a grant the hand-off may have made goes back (compare-and-delete) */
        if (doubt)
            waiters_release_bg(e, w->lp, w->name, w->lease, 0, false);
        ev_timer_stop(loop_ev(w->lp), &w->timer);
        free(w);
        return;
    }
    w->rode = false;
    bool reclaim = w->ride_doubt && !w->failed;
    bool give_back = w->ride_doubt && w->failed;
    w->ride_doubt = false;
    bool head = w->q->list == w;
    bool again =
        w->failed || (head && (w->kick_pending || w->ride_released || w->retry_at_ms == 0 ||
                               w->q->holder_expiry_ms <= lk_now_ms()));
    if (!reclaim)
        w->kick_pending = false;
    if (!again && !reclaim)
        w->state = W_QUEUED;
    pthread_mutex_unlock(&e->wmu);
    /* A failed rider (its session ended, lockd drains) is answered with its
     * failure: a grant the hand-off may have made goes back, as a
     * cancelled one's does (w is freed by that answer, so first). */
    if (give_back)
        waiters_release_bg(e, w->lp, w->name, w->lease, 0, false);
    if (reclaim) {
        struct bk_req req = {
            .op = BK_RENEW, .name = w->name, .lease = w->lease, .ttl_ms = w->ttl_ms};
        enum lk_code c = engine_bk_submit(e, w->lp, &w->call, &req, reclaim_done, w);
        (void)c; /* reclaim_done runs either way */
    } else if (again) {
        attempt(w);
    } else {
        arm(w);
    }
}

void waiters_ride_done(struct engine *e, struct eng_waiter *w, bool released, bool doubt,
                       const struct bk_res *g)
{
    /* Released, and the rider did not take the slot (not asked, or its
     * acquire failed other than by a refusal, which says the name is full):
     * the release counts for the queue as one without a rider would. */
    bool freed = released && (g == NULL || (g->code != LK_OK && g->code != LK_LOCKED));
    if (freed || g == NULL) {
        /* ride_released under wmu too: it shares a word with the flags
         * waiters_ride reads under wmu on other loops, and a compiler may
         * read them (and TSan sees them read) as one word */
        pthread_mutex_lock(&e->wmu);
        if (freed && w->q != NULL)
            slot_freed(e, w->q, w);
        if (g == NULL) {
            w->ride_released = released;
            w->ride_doubt = doubt;
        }
        pthread_mutex_unlock(&e->wmu);
    }
    if (g == NULL) {
        loop_post(w->lp, ride_back, w);
        return;
    }
    /* its answer, copied for its own loop as a grouped follower's is */
    bk_res_init(&w->gres, g->code);
    w->gres.fencing_token = g->fencing_token;
    w->gres.ttl_ms = g->ttl_ms;
    w->gres.validity_ms = g->validity_ms;
    w->gres.room = g->room;
    w->gres.delay_ms = g->delay_ms;
    w->gres.limit = g->limit;
    w->gres.nholders = g->nholders > 0 ? 1 : 0;
    if (g->nholders > 0)
        w->gholder = g->holders[0];
    loop_post(w->lp, on_follower, w);
}

void waiters_kick_granted(struct engine *e, const char *name)
{
    watchers_kick(e, name);
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    if (q != NULL && q->list->shared && q->list->limit == 1) {
        struct eng_waiter *h = q->list;
        if (h->state == W_ATTEMPTING)
            h->kick_pending = true;
        else if (h->state == W_QUEUED)
            post_poke(e, q, h, true);
    }
    pthread_mutex_unlock(&e->wmu);
}

bool waiters_queued(struct engine *e, const char *name, struct eng_holder *holder)
{
    bool queued = false;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    if (q != NULL) {
        queued = true;
        memset(holder, 0, sizeof(*holder));
        queue_holder(q, lk_now_ms(), holder);
    }
    pthread_mutex_unlock(&e->wmu);
    return queued;
}

int64_t waiters_count(struct engine *e, const char *name)
{
    int64_t n = 0;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    if (q != NULL)
        n = q->n;
    pthread_mutex_unlock(&e->wmu);
    return n;
}

void waiters_fail(struct engine *e, const char *session)
{
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q, *qt;
    HASH_ITER (hh, e->queues, q, qt) {
        uint64_t swept[(LOOP_MAX + 63) / 64] = {0};
        struct eng_waiter *w;
        DL_FOREACH (q->list, w) {
            if (session != NULL && (!w->has_session || strcmp(w->session, session) != 0))
                continue;
            w->failed = true;
            w->fail_code = session != NULL ? LK_SESSION_NOT_FOUND : LK_SHUTTING_DOWN;
            /* Its own loop answers it (an attempting one when its reply
             * comes): one sweep per queue and loop, not one per waiter. */
            int i = loop_index(w->lp);
            if (i < 0 || i >= LOOP_MAX) {
                post_to(e, w->lp, q->name, false, on_sweep);
            } else if (!(swept[i / 64] & (1ULL << (i % 64)))) {
                swept[i / 64] |= 1ULL << (i % 64);
                post_to(e, w->lp, q->name, false, on_sweep);
            }
        }
    }
    pthread_mutex_unlock(&e->wmu);
}

/* Frees every waiter on *list, which ends empty. */
static void list_free(struct eng_waiter **list)
{
    struct eng_waiter *w, *wt;
    DL_FOREACH_SAFE (*list, w, wt) {
        DL_DELETE(*list, w);
        free(w);
    }
}

void waiters_free_all(struct engine *e)
{
    struct wlist *wl, *wlt;
    HASH_ITER (hh, e->watches, wl, wlt) {
        list_free(&wl->list);
        HASH_DEL(e->watches, wl);
        free(wl);
    }
    struct wqueue *q, *qt;
    HASH_ITER (hh, e->queues, q, qt) {
        list_free(&q->list);
        HASH_DEL(e->queues, q);
        free(q);
    }
}

/* ---------------------------------------------------------------- watchers */

static bool bit_get(const uint64_t *m, int i)
{
    return (m[i / 64] >> (i % 64)) & 1u;
}

static void bit_put(uint64_t *m, int i, bool on)
{
    if (on)
        m[i / 64] |= 1ULL << (i % 64);
    else
        m[i / 64] &= ~(1ULL << (i % 64));
}

static int watch_slot(const struct lk_loop *lp)
{
    int i = loop_index(lp);
    return i >= 0 && i < LOOP_MAX ? i : LOOP_MAX - 1;
}

/* Takes w out of its list (under wmu); the list goes with its last one. */
static void watch_unlink(struct engine *e, struct eng_waiter *w)
{
    struct wlist *wl = w->wl;
    if (wl == NULL)
        return;
    DL_DELETE(wl->list, w);
    wl->nper[watch_slot(w->lp)]--;
    w->wl = NULL;
    if (wl->list == NULL) {
        engine_bk_watch(e, wl->name, false);
        HASH_DEL(e->watches, wl);
        free(wl);
        atomic_fetch_sub(&e->nwatched, 1);
    }
}

static void watch_cancel(struct engine *e, struct eng_waiter *w)
{
    pthread_mutex_lock(&e->wmu);
    watch_unlink(e, w);
    pthread_mutex_unlock(&e->wmu);
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    free(w);
}

/* One inspect of a name for the watchers of one loop. */
struct wcheck {
    struct bk_call call;
    struct engine *e;
    struct lk_loop *lp;
    char name[LK_NAME_MAX + 1];
};

static void watch_check(struct engine *e, struct lk_loop *lp, const char *name);

/* Arms w's timer for its deadline, or the holder's expiry when sooner. */
static void watch_arm(struct eng_waiter *w, int64_t now)
{
    int64_t at = w->deadline_ms;
    if (w->retry_at_ms > 0 && w->retry_at_ms < at)
        at = w->retry_at_ms;
    double after = at > now ? (double)(at - now) / 1000.0 : 0.;
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    ev_timer_set(&w->timer, after, 0.);
    ev_timer_start(loop_ev(w->lp), &w->timer);
}

static void watch_check_done(void *arg, const struct bk_res *br)
{
    struct wcheck *c = arg;
    struct engine *e = c->e;
    int slot = watch_slot(c->lp);
    struct eng_info info;
    struct eng_holder *hs;
    engine_info_of(e, c->name, br, &info, &hs);
    int64_t now = lk_now_ms();
    /* the first holder to expire changes the holders: look again then */
    int64_t expiry_at = 0;
    for (size_t i = 0; br->code == LK_OK && i < br->nholders; i++) {
        int64_t at = now + br->holders[i].expires_in_ms + 1;
        if (expiry_at == 0 || at < expiry_at)
            expiry_at = at;
    }
    if (br->code == LK_OK && br->recheck_ms > 0) { /* a holder only some node lists */
        int64_t at = now + br->recheck_ms + 1;
        if (expiry_at == 0 || at < expiry_at)
            expiry_at = at;
    }
    struct eng_waiter *answer = NULL, *w, *tmp;
    bool again = false;
    pthread_mutex_lock(&e->wmu);
    struct wlist *wl;
    HASH_FIND_STR(e->watches, c->name, wl);
    if (wl != NULL) {
        bit_put(wl->inflight, slot, false);
        wl->expiry_at[slot] = expiry_at;
        again = bit_get(wl->again, slot);
        bit_put(wl->again, slot, false);
        DL_FOREACH_SAFE (wl->list, w, tmp) {
            if (w->lp != c->lp)
                continue;
            if (br->code != LK_OK || info.index != w->index || now >= w->deadline_ms) {
                bool last = wl->list == w && w->next == NULL;
                watch_unlink(e, w);
                w->next = answer; /* unlinked: next is ours now */
                answer = w;
                if (last)
                    break; /* wl is freed */
            } else {
                w->retry_at_ms = expiry_at;
                watch_arm(w, now); /* this loop's own timer */
            }
        }
        HASH_FIND_STR(e->watches, c->name, wl);
        again = again && wl != NULL && wl->nper[slot] > 0;
    }
    pthread_mutex_unlock(&e->wmu);
    while (answer != NULL) {
        w = answer;
        answer = w->next;
        ev_timer_stop(loop_ev(w->lp), &w->timer);
        w->wdone(w->arg, &info);
        free(w);
    }
    free(hs);
    if (again)
        watch_check(e, c->lp, c->name);
    free(c);
}

/* On lp: inspects name for its watchers on lp, once at a time (a change
 * during the inspect asks for one more). */
static void watch_check(struct engine *e, struct lk_loop *lp, const char *name)
{
    int slot = watch_slot(lp);
    pthread_mutex_lock(&e->wmu);
    struct wlist *wl;
    HASH_FIND_STR(e->watches, name, wl);
    bool go = wl != NULL && wl->nper[slot] > 0 && !bit_get(wl->inflight, slot);
    if (go)
        bit_put(wl->inflight, slot, true);
    else if (wl != NULL)
        bit_put(wl->again, slot, true);
    pthread_mutex_unlock(&e->wmu);
    if (!go)
        return;
    struct wcheck *c = lk_malloc(sizeof(*c));
    c->e = e;
    c->lp = lp;
    lk_strlcpy(c->name, name, sizeof(c->name));
    /* wait: marks the name, so the next change through any lockd publishes */
    struct bk_req req = {.op = BK_INSPECT, .name = c->name, .wait = true};
    enum lk_code rc = engine_bk_submit(e, lp, &c->call, &req, watch_check_done, c);
    (void)rc; /* watch_check_done runs either way */
}

static void on_watch_poke(void *arg)
{
    struct poke *p = arg;
    watch_check(p->e, p->lp, p->name);
    free(p);
}

static void on_watch_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    struct eng_waiter *w = t->data;
    watch_check(w->e, w->lp, w->name);
}

void watchers_kick(struct engine *e, const char *name)
{
    if (atomic_load_explicit(&e->nwatched, memory_order_relaxed) == 0)
        return; /* nobody watches anything: a grant or release pays nothing */
    struct lk_loop *lps[LOOP_MAX];
    int n = 0;
    pthread_mutex_lock(&e->wmu);
    struct wlist *wl;
    HASH_FIND_STR(e->watches, name, wl);
    for (int i = 0; wl != NULL && i < LOOP_MAX; i++)
        if (wl->nper[i] > 0)
            lps[n++] = wl->lps[i];
    pthread_mutex_unlock(&e->wmu);
    for (int i = 0; i < n; i++)
        post_to(e, lps[i], name, true, on_watch_poke);
}

void waiters_renewed(struct engine *e, const char *name, int64_t ttl_ms)
{
    int64_t expiry = lk_now_ms() + ttl_ms;
    struct lk_loop *lps[LOOP_MAX];
    int n = 0;
    pthread_mutex_lock(&e->wmu);
    struct wqueue *q;
    HASH_FIND_STR(e->queues, name, q);
    /* holder_expiry_ms 0: a release was seen, the head asks anyway; at or
     * before the new expiry (a longer lease): the head's attempt then finds
     * it held and learns the new expiry from it, as before */
    if (q != NULL && q->holder_expiry_ms > expiry) {
        q->holder_expiry_ms = expiry;
        if (q->list->state == W_QUEUED)
            post_poke(e, q, q->list, false); /* re-arms it for the new expiry */
    }
    struct wlist *wl;
    HASH_FIND_STR(e->watches, name, wl);
    for (int i = 0; wl != NULL && i < LOOP_MAX; i++)
        if (wl->nper[i] > 0 && wl->expiry_at[i] > expiry + 1)
            lps[n++] = wl->lps[i];
    pthread_mutex_unlock(&e->wmu);
    for (int i = 0; i < n; i++)
        post_to(e, lps[i], name, true, on_watch_poke);
}

enum lk_code engine_watch(struct engine *e, struct lk_loop *lp, const char *name, int64_t index,
                          int64_t wait_ms, eng_info_fn done, void *arg, struct eng_waiter **out)
{
    *out = NULL;
    if (!engine_has_index(e))
        return LK_UNSUPPORTED;
    struct eng_waiter *w = lk_calloc(1, sizeof(*w));
    w->is_watch = true;
    w->e = e;
    w->lp = lp;
    lk_strlcpy(w->name, name, sizeof(w->name));
    w->index = index;
    w->wdone = done;
    w->arg = arg;
    w->start_ms = lk_now_ms();
    w->deadline_ms = w->start_ms + wait_ms;
    ev_timer_init(&w->timer, on_watch_timer, 0., 0.);
    w->timer.data = w;
    int slot = watch_slot(lp);
    pthread_mutex_lock(&e->wmu);
    struct wlist *wl;
    HASH_FIND_STR(e->watches, name, wl);
    if (wl == NULL) {
        wl = lk_calloc(1, sizeof(*wl));
        lk_strlcpy(wl->name, name, sizeof(wl->name));
        HASH_ADD_STR(e->watches, name, wl);
        atomic_fetch_add(&e->nwatched, 1);
        engine_bk_watch(e, name, true); /* subscribe before looking: no lost change */
    }
    DL_APPEND(wl->list, w);
    wl->nper[slot]++;
    wl->lps[slot] = lp;
    w->wl = wl;
    pthread_mutex_unlock(&e->wmu);
    *out = w;
    watch_arm(w, w->start_ms);
    /* May answer (and free w) at once: callers use *out only while their
     * callback has not run. */
    watch_check(e, lp, name);
    return LK_AGAIN;
}

/* ------------------------------------------------------------ multi-locks */

struct eng_waiter *waiters_multi_new(struct engine *e, struct lk_loop *lp, const char *session,
                                     int64_t wait_ms, waiters_multi_fn fn, void *arg)
{
    struct eng_waiter *w = lk_calloc(1, sizeof(*w));
    w->e = e;
    w->lp = lp;
    w->is_multi = true;
    w->mfn = fn;
    w->marg = arg;
    if (session != NULL) {
        w->has_session = true;
        lk_strlcpy(w->session, session, sizeof(w->session));
    }
    w->start_ms = lk_now_ms();
    w->deadline_ms = w->start_ms + wait_ms;
    w->state = W_ATTEMPTING; /* its first try runs now */
    ev_timer_init(&w->timer, on_timer, 0., 0.);
    w->timer.data = w;
    return w;
}

bool waiters_multi_cancelled(struct engine *e, struct eng_waiter *w)
{
    pthread_mutex_lock(&e->wmu);
    bool c = w->cancelled;
    pthread_mutex_unlock(&e->wmu);
    return c;
}

enum wm_park waiters_multi_park(struct engine *e, struct eng_waiter *w, const char *name,
                                const struct eng_holder *holder, enum lk_code *fail_code)
{
    int64_t now = lk_now_ms();
    int64_t expiry =
        now + (holder != NULL && holder->expires_in_ms > 0 ? holder->expires_in_ms : 0);
    enum wm_park out;
    struct eng_waiter *h = NULL;
    pthread_mutex_lock(&e->wmu);
    if (w->failed || atomic_load(&e->draining)) {
        *fail_code = w->failed ? w->fail_code : LK_SHUTTING_DOWN;
        out = WM_FAILED;
        goto leave;
    }
    struct wqueue *q = w->q;
    if (q != NULL && strcmp(q->name, name) == 0) {
        /* refused again by the name it waits for at the head of: as a
         * single waiter, it waits for a release or the holder's expiry */
        if (holder != NULL) {
            q->holder = *holder;
            q->has_holder = true;
        }
        q->holder_expiry_ms = expiry;
        if (w->kick_pending) { /* released while the set was being tried */
            w->kick_pending = false;
            pthread_mutex_unlock(&e->wmu);
            return WM_AGAIN;
        }
        w->state = W_QUEUED;
        w->retry_at_ms = expiry + 1;
        pthread_mutex_unlock(&e->wmu);
        arm(w);
        return WM_QUEUED;
    }
    if (q != NULL) { /* another name refused the set: leave this queue */
        unlink_waiter(e, w, &h);
        promote(e, h, true); /* the set did not take it: it may be free */
    }
    if (e->cfg->max_waiters > 0 && e->nwaiters >= e->cfg->max_waiters) {
        out = WM_FULL;
        goto leave;
    }
    HASH_FIND_STR(e->queues, name, q);
    if (q == NULL) {
        q = lk_calloc(1, sizeof(*q));
        lk_strlcpy(q->name, name, sizeof(q->name));
        HASH_ADD_STR(e->queues, name, q);
        engine_bk_watch(e, name, true);
    }
    DL_APPEND(q->list, w);
    q->n++;
    w->q = q;
    /* the name pokes carry (promote): the queue it waits in now */
    lk_strlcpy(w->name, name, sizeof(w->name));
    e->nwaiters++;
    metrics_add(M_WAITERS, 1);
    w->kick_pending = false;
    if (q->list == w) {
        if (holder != NULL) {
            q->holder = *holder;
            q->has_holder = true;
        }
        q->holder_expiry_ms = expiry;
        /* Head of a queue it just joined: a release between the refusal and
         * this subscription would go unheard, so the set is tried once more
         * now (refused by this name again, it then waits). */
        pthread_mutex_unlock(&e->wmu);
        return WM_AGAIN;
    }
    w->state = W_QUEUED;
    w->retry_at_ms = 0; /* until it is the head */
    pthread_mutex_unlock(&e->wmu);
    arm(w);
    return WM_QUEUED;
leave:
    pthread_mutex_unlock(&e->wmu);
    return out;
}

void waiters_multi_end(struct engine *e, struct eng_waiter *w, bool holds)
{
    struct eng_waiter *h = NULL;
    pthread_mutex_lock(&e->wmu);
    if (w->q != NULL) {
        unlink_waiter(e, w, &h);
        /* granted, the set holds the name: the next waits for its release */
        promote(e, h, !holds);
    }
    pthread_mutex_unlock(&e->wmu);
    ev_timer_stop(loop_ev(w->lp), &w->timer);
    free(w);
}

int64_t waiters_multi_waited(const struct eng_waiter *w)
{
    return lk_now_ms() - w->start_ms;
}

bool waiters_multi_expired(const struct eng_waiter *w)
{
    return lk_now_ms() >= w->deadline_ms;
}
