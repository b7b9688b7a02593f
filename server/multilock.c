/*
 * multilock.c - multi-locks (DESIGN.md §2 "Multi-lock"): several names
 * under one lease, all or none. A backend with BK_CAP_MULTI grants the set
 * in one call (memory: under one mutex hold; one Redis, or one Cluster
 * slot: one script that checks every name before it takes any); others
 * (Redlock, names of many Cluster slots, WAIT replicas) get the ordered
 * path: names taken one by one in sorted order, and on the first refusal
 * everything taken so far is released again. Either way a request never
 * holds a name while it waits, so overlapping sets cannot deadlock.
 *
 * Waiting uses waiters.c: the set's waiter queues behind the name that
 * refused it and tries the whole set again when that name is released (or
 * its holder expires), moving to another name's queue when that one refuses.
 * Granted members are ordinary session locks (one entry per name with the
 * same lease), so the watchdog renews them and /locks/{name} works on them.
 * Runs on the calling loop's thread; backend completions come back there.
 */
#include "server/multilock.h"

#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/metrics.h"

struct mlock {
    struct bk_call call;
    struct engine *e;
    struct lk_loop *lp;
    eng_multi_fn done;
    void *arg;
    struct eng_waiter *w; /* NULL: try once */
    size_t n;
    const char **names; /* in the order asked; strings in store */
    size_t *order;      /* indices of names, sorted by name (the ordered path) */
    int64_t *tokens;
    char *store;
    bool ordered;   /* the backend cannot take this set in one call */
    bool first;     /* the first try: queued waiters here come first */
    size_t next;    /* ordered path: the position in order being taken */
    size_t taken;   /* ordered path: names of order[0..taken) are held */
    size_t undoing; /* ordered path: roll-back releases still out (+1 while sending) */
    bool has_session;
    int64_t ttl_ms;
    int64_t max_hold_ms;
    int64_t start_ms;
    /* the last refusal */
    enum lk_code code;
    size_t blocked;
    struct eng_holder holder;
    bool has_holder;
    int64_t holder_ms; /* monotonic: when holder was seen (its expires_in_ms counts from it) */
    int64_t retry_ms;
    int64_t validity_ms; /* the shortest ttl the backend vouches for */
    bool *answered;      /* while engine_multi_acquire runs: set when done ran */
    char lease[LK_LEASE_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    char session[LK_SESSION_LEN + 1];
};

static void ml_try(struct mlock *m);

static int by_name(const void *a, const void *b, void *arg)
{
    const char **names = arg;
    return strcmp(names[*(const size_t *)a], names[*(const size_t *)b]);
}

static void ml_free(struct mlock *m)
{
    free(m->names);
    free(m->order);
    free(m->tokens);
    free(m->store);
    free(m);
}

static void give_back_all(struct mlock *m)
{
    for (size_t i = 0; i < m->n; i++)
        waiters_release_bg(m->e, m->lp, m->names[i], m->lease, 0, true);
}

/* Answers and frees m (and its waiter). */
static void ml_answer(struct mlock *m, enum lk_code code, bool holds)
{
    struct eng_multi_result r;
    memset(&r, 0, sizeof(r));
    r.code = code;
    r.owner = m->owner;
    r.session = m->has_session ? m->session : NULL;
    if (code == LK_OK) {
        r.lease = m->lease;
        r.names = m->names;
        r.tokens = m->tokens;
        r.n = m->n;
        r.ttl_ms = m->validity_ms > 0 && m->validity_ms < m->ttl_ms ? m->validity_ms : m->ttl_ms;
        r.expires_at_ms = lk_wall_ms() + r.ttl_ms;
    } else if (code == LK_LOCKED) {
        r.name = m->names[m->blocked];
        r.holder = m->holder;
        r.has_holder = m->has_holder;
        /* what is left of its lease now, not when it refused the set */
        int64_t left = m->holder.expires_in_ms - (lk_now_ms() - m->holder_ms);
        r.holder.expires_in_ms = left > 0 ? left : 0;
    }
    r.retry_ms = m->retry_ms;
    r.waited_ms = m->w != NULL ? waiters_multi_waited(m->w) : 0;
    if (code == LK_OK && m->w != NULL) /* as a single waiter's grant */
        metrics_observe(H_ACQUIRE_WAIT, r.waited_ms * 1000);
    else
        metrics_add(code == LK_LOCKED ? M_ACQUIRE_LOCKED : M_ACQUIRE_ERROR, 1);
    if (m->w != NULL)
        waiters_multi_end(m->e, m->w, holds);
    m->w = NULL;
    if (m->answered != NULL)
        *m->answered = true;
    m->done(m->arg, &r);
    ml_free(m);
}

static void ml_drop(struct mlock *m)
{
    if (m->answered != NULL)
        *m->answered = true;
    if (m->w != NULL)
        waiters_multi_end(m->e, m->w, false);
    ml_free(m);
}

/* Every name is held by the lease: record the session's part and answer. */
static void ml_granted(struct mlock *m)
{
    struct engine *e = m->e;
    if (m->w != NULL && waiters_multi_cancelled(e, m->w)) {
        give_back_all(m); /* its client left: nobody knows this lease */
        ml_drop(m);
        return;
    }
    for (size_t i = 0; m->has_session && i < m->n; i++) {
        /* each member is an ordinary session lock: the watchdog renews it */
        if (session_add_lock(e, m->session, m->names[i], m->lease, m->owner, m->tokens[i],
                             m->ttl_ms, m->max_hold_ms, false, 1) != LK_OK) {
            give_back_all(m); /* the session died while the set was granted */
            ml_answer(m, LK_SESSION_NOT_FOUND, false);
            return;
        }
    }
    for (size_t i = 0; i < m->n; i++) {
        engine_count_grant(false, 1);
        /* a plain member counts in lockd_locks_held as a plain lock does */
        if (!m->has_session)
            engine_plain_granted(e, m->names[i], m->lease, m->ttl_ms);
        watchers_kick(e, m->names[i]);
    }
    lk_log(LK_DEBUG, "granted %zu names from '%s' as one", m->n, m->names[0]);
    ml_answer(m, LK_OK, true);
}

/* The set was refused (nothing of it held now): wait, or answer. */
static void ml_refused(struct mlock *m)
{
    struct engine *e = m->e;
    if (m->w != NULL && waiters_multi_cancelled(e, m->w)) {
        ml_drop(m);
        return;
    }
    if (m->code == LK_LIMIT_MISMATCH) /* a semaphore holds a member: held, for a set */
        m->code = LK_LOCKED;
    if (m->code != LK_LOCKED || m->w == NULL || waiters_multi_expired(m->w)) {
        ml_answer(m, m->code, false);
        return;
    }
    enum lk_code fail = LK_OK;
    switch (waiters_multi_park(e, m->w, m->names[m->blocked], m->has_holder ? &m->holder : NULL,
                               &fail)) {
    case WM_QUEUED: return; /* multi_wake runs later */
    case WM_AGAIN: ml_try(m); return;
    case WM_FULL: ml_answer(m, LK_LOCKED, false); return;
    case WM_FAILED: ml_answer(m, fail, false); return;
    }
}

static void note_refusal(struct mlock *m, const struct bk_res *br, size_t blocked)
{
    m->code = br->code;
    m->blocked = blocked;
    m->retry_ms = br->delay_ms;
    m->has_holder = br->code == LK_LOCKED;
    engine_holder_of(br, &m->holder);
    m->holder_ms = lk_now_ms();
}

/* The backend request to acquire for m, in one call (BK_ACQUIRE_MULTI) or
 * name by name (BK_ACQUIRE): the caller sets the names. */
static struct bk_req ml_req(const struct mlock *m, enum bk_op op)
{
    struct bk_req req = {
        .op = op,
        .lease = m->lease,
        .owner = m->owner,
        .mode = BK_EXCLUSIVE,
        .limit = 1,
        .ttl_ms = m->ttl_ms,
        .session_bound = m->has_session,
        .wait = m->w != NULL,
    };
    return req;
}

/* ---- the ordered path: one name at a time, in sorted order ---- */

static void ordered_step(struct mlock *m);

/* One name given back by a roll-back: its waiters may go. */
static void undo_done(void *arg, const struct bk_res *br)
{
    struct mlock *m = arg;
    (void)br;
    if (--m->undoing == 0) {
        /* wake each name's waiters only now, once all is back */
        for (size_t i = 0; i < m->n; i++)
            if (m->tokens[i] != 0)
                waiters_kick(m->e, m->names[i]);
        memset(m->tokens, 0, m->n * sizeof(*m->tokens));
        ml_refused(m);
    }
}

static void step_done(void *arg, const struct bk_res *br)
{
    struct mlock *m = arg;
    size_t idx = m->order[m->next];
    if (br->code == LK_OK) {
        m->tokens[idx] = br->fencing_token;
        if (br->validity_ms > 0 && (m->validity_ms <= 0 || br->validity_ms < m->validity_ms))
            m->validity_ms = br->validity_ms;
        m->taken = ++m->next;
        if (m->next == m->n)
            ml_granted(m);
        else
            ordered_step(m);
        return;
    }
    /* Roll back: what was taken goes back before anyone waits (and before
     * the refusal is answered), so no request ever holds a name while it
     * waits for another, and a refused set leaves nothing held. A step
     * answered 503 may have run all the same: its name goes back too. */
    note_refusal(m, br, idx);
    engine_acquire_in_doubt(m->e, m->lp, br->code, m->names[idx], m->lease);
    if (m->taken == 0) {
        ml_refused(m);
        return;
    }
    m->undoing = m->taken + 1;
    for (size_t i = 0; i < m->taken; i++)
        engine_bk_release(m->e, m->lp, m->names[m->order[i]], m->lease, 0, false, undo_done, m);
    m->taken = 0;
    if (--m->undoing == 0)
        ml_refused(m);
}

static void ordered_step(struct mlock *m)
{
    struct bk_req req = ml_req(m, BK_ACQUIRE);
    req.name = m->names[m->order[m->next]];
    (void)engine_bk_submit(m->e, m->lp, &m->call, &req, step_done, m);
}

/* Tries the set one name at a time from its first (for good, once chosen). */
static void ordered_start(struct mlock *m)
{
    m->ordered = true;
    m->next = m->taken = 0;
    ordered_step(m);
}

/* ---- one call ---- */

static void multi_done(void *arg, const struct bk_res *br)
{
    struct mlock *m = arg;
    if (br->code == LK_UNSUPPORTED) { /* not this set (names of many slots): one by one */
        ordered_start(m);
        return;
    }
    if (br->code == LK_OK && br->tokens != NULL) {
        memcpy(m->tokens, br->tokens, m->n * sizeof(*m->tokens));
        m->validity_ms = br->validity_ms;
        ml_granted(m);
        return;
    }
    note_refusal(m, br, br->blocked < m->n ? br->blocked : 0);
    if (br->code == LK_OK) /* a grant without its tokens: never answered as one */
        m->code = LK_INTERNAL;
    /* answered 503, the script may have run and taken every name: give
     * each back (as engine_acquire_in_doubt does for one name) */
    for (size_t i = 0; br->code == LK_BACKEND_DOWN && i < m->n; i++)
        engine_acquire_in_doubt(m->e, m->lp, br->code, m->names[i], m->lease);
    ml_refused(m);
}

/* Tries the whole set once. */
static void ml_try(struct mlock *m)
{
    struct engine *e = m->e;
    if (m->first) {
        /* A try never jumps ahead of waiters queued here (as for one name). */
        m->first = false;
        for (size_t i = 0; i < m->n; i++) {
            struct eng_holder h;
            if (waiters_queued(e, m->names[i], &h)) {
                m->code = LK_LOCKED;
                m->blocked = i;
                m->holder = h;
                m->has_holder = true;
                m->holder_ms = lk_now_ms();
                ml_refused(m);
                return;
            }
        }
    }
    m->validity_ms = 0;
    memset(m->tokens, 0, m->n * sizeof(*m->tokens));
    if (m->ordered || !(e->bk.ops->caps & BK_CAP_MULTI)) {
        ordered_start(m);
        return;
    }
    struct bk_req req = ml_req(m, BK_ACQUIRE_MULTI);
    req.names = m->names;
    req.nnames = m->n;
    (void)engine_bk_submit(e, m->lp, &m->call, &req, multi_done, m);
}

/* The waiter's news (waiters.c): try again, or the wait is over. */
static void multi_wake(void *arg, enum lk_code why)
{
    struct mlock *m = arg;
    if (why == LK_OK) {
        ml_try(m);
        return;
    }
    if (why == LK_CANCELLED) { /* the client left: answer nothing */
        ml_drop(m);
        return;
    }
    ml_answer(m, why, false); /* LK_LOCKED at the deadline, with the last refusal */
}

enum lk_code engine_multi_acquire(struct engine *e, struct lk_loop *lp, const struct eng_multi *a,
                                  eng_multi_fn done, void *arg, struct eng_waiter **waiter)
{
    *waiter = NULL;
    struct eng_multi_result r;
    memset(&r, 0, sizeof(r));
    r.owner = "";
    char sowner[LK_OWNER_MAX + 1] = "";
    if (atomic_load(&e->draining)) {
        r.code = LK_SHUTTING_DOWN;
        done(arg, &r);
        return LK_OK;
    }
    if (a->nnames == 0 || a->nnames > ENG_MULTI_MAX) {
        r.code = LK_INVALID;
        done(arg, &r);
        return LK_OK;
    }
    if (a->session != NULL && !session_owner(e, a->session, sowner)) {
        r.code = LK_SESSION_NOT_FOUND;
        done(arg, &r);
        return LK_OK;
    }
    struct mlock *m = lk_calloc(1, sizeof(*m));
    m->e = e;
    m->lp = lp;
    m->done = done;
    m->arg = arg;
    m->n = a->nnames;
    m->names = lk_malloc(m->n * sizeof(*m->names));
    m->order = lk_malloc(m->n * sizeof(*m->order));
    m->tokens = lk_calloc(m->n, sizeof(*m->tokens));
    size_t total = 0;
    for (size_t i = 0; i < m->n; i++)
        total += strlen(a->names[i]) + 1;
    m->store = lk_malloc(total);
    char *p = m->store;
    for (size_t i = 0; i < m->n; i++) {
        size_t len = strlen(a->names[i]) + 1;
        memcpy(p, a->names[i], len);
        m->names[i] = p;
        m->order[i] = i;
        p += len;
    }
    /* one global order: two sets that overlap meet their common names in
     * the same order */
    qsort_r(m->order, m->n, sizeof(*m->order), by_name, m->names);
    m->ttl_ms = a->ttl_ms;
    m->max_hold_ms = a->max_hold_ms;
    m->start_ms = lk_now_ms();
    m->first = true;
    /* A set taken under a session without an owner of its own shows the session's. */
    lk_strlcpy(m->owner, a->owner != NULL && a->owner[0] != '\0' ? a->owner : sowner,
               sizeof(m->owner));
    if (a->session != NULL) {
        m->has_session = true;
        lk_strlcpy(m->session, a->session, sizeof(m->session));
    }
    lk_random_hex(m->lease, LK_LEASE_LEN / 2);
    if (a->wait_ms > 0) {
        m->w = waiters_multi_new(e, lp, a->session, a->wait_ms, multi_wake, m);
        *waiter = m->w;
    }
    /* done may run (and free m) inside: the handle is used only while it
     * has not run (as engine_acquire's). */
    bool answered = false;
    m->answered = &answered;
    ml_try(m);
    if (answered)
        return LK_OK;
    m->answered = NULL;
    return LK_AGAIN;
}

/* ---- renew and release of a set ---- */

struct mset {
    struct engine *e;
    eng_multi_set_fn done;
    void *arg;
    bool renew;
    size_t n, pending;
    const char **names;
    enum lk_code *codes;
    char *store;
    int64_t ttl_ms;
    struct eng_holder holder;
    bool has_holder;
    int64_t retry_ms;
};

struct mset_part {
    struct mset *s;
    size_t i;
};

static void mset_finish(struct mset *s)
{
    const char **ok = lk_malloc(s->n * sizeof(*ok));
    const char **lost = lk_malloc(s->n * sizeof(*lost));
    struct eng_multi_set r;
    memset(&r, 0, sizeof(r));
    bool down = false, other = false;
    for (size_t i = 0; i < s->n; i++) {
        enum lk_code c = s->codes[i];
        if (c == LK_OK)
            ok[r.nlocks++] = s->names[i];
        else if (c == LK_NOT_HELD || c == LK_HELD_BY_OTHER)
            lost[r.nlost++] = s->names[i];
        else
            down = true;
        if (c == LK_HELD_BY_OTHER)
            other = true;
    }
    r.locks = ok;
    r.lost = lost;
    if (down) {
        /* never report a member lost that may still be held: ask again */
        r.code = LK_BACKEND_DOWN;
        for (size_t i = 0; i < s->n; i++)
            if (s->codes[i] != LK_OK && s->codes[i] != LK_NOT_HELD &&
                s->codes[i] != LK_HELD_BY_OTHER)
                r.code = s->codes[i];
        r.retry_ms = s->retry_ms;
    } else if (r.nlocks > 0) {
        r.code = LK_OK;
        r.ttl_ms = s->ttl_ms;
        r.expires_at_ms = lk_wall_ms() + s->ttl_ms;
    } else {
        r.code = other ? LK_HELD_BY_OTHER : LK_NOT_HELD;
        r.holder = s->holder;
        r.has_holder = s->has_holder;
    }
    s->done(s->arg, &r);
    free(ok);
    free(lost);
    free(s->names);
    free(s->codes);
    free(s->store);
    free(s);
}

static void mset_part_done(void *arg, const struct eng_result *res)
{
    struct mset_part *p = arg;
    struct mset *s = p->s;
    s->codes[p->i] = res->code;
    if (res->code == LK_OK && s->renew && (s->ttl_ms == 0 || res->ttl_ms < s->ttl_ms))
        s->ttl_ms = res->ttl_ms;
    if (res->code == LK_HELD_BY_OTHER && res->has_holder && !s->has_holder) {
        s->holder = res->holder;
        s->has_holder = true;
    }
    if (res->retry_ms > s->retry_ms)
        s->retry_ms = res->retry_ms;
    free(p);
    if (--s->pending == 0)
        mset_finish(s);
}

static enum lk_code mset_run(struct engine *e, struct lk_loop *lp, const char *const *names,
                             size_t n, const char *lease, bool renew, int64_t ttl_ms,
                             eng_multi_set_fn done, void *arg)
{
    struct mset *s = lk_calloc(1, sizeof(*s));
    s->e = e;
    s->done = done;
    s->arg = arg;
    s->renew = renew;
    s->n = n;
    s->names = lk_malloc((n ? n : 1) * sizeof(*s->names));
    s->codes = lk_calloc(n ? n : 1, sizeof(*s->codes));
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(names[i]) + 1;
    s->store = lk_malloc(total ? total : 1);
    char *p = s->store;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]) + 1;
        memcpy(p, names[i], len);
        s->names[i] = p;
        p += len;
    }
    char lease_copy[LK_LEASE_LEN + 1];
    lk_strlcpy(lease_copy, lease, sizeof(lease_copy));
    s->pending = n + 1; /* +1 held until every member is asked */
    for (size_t i = 0; i < n; i++) {
        struct mset_part *part = lk_malloc(sizeof(*part));
        part->s = s;
        part->i = i;
        /* each member as /locks/{name} would: sessions, reentrant counts
         * and wake-ups are the single-name paths' */
        enum lk_code c =
            renew ? engine_renew(e, lp, s->names[i], lease_copy, ttl_ms, mset_part_done, part)
                  : engine_release(e, lp, s->names[i], lease_copy, mset_part_done, part);
        (void)c; /* mset_part_done runs either way */
    }
    if (--s->pending == 0) {
        mset_finish(s);
        return LK_OK;
    }
    return LK_AGAIN;
}

enum lk_code engine_multi_renew(struct engine *e, struct lk_loop *lp, const char *const *names,
                                size_t n, const char *lease, int64_t ttl_ms, eng_multi_set_fn done,
                                void *arg)
{
    return mset_run(e, lp, names, n, lease, true, ttl_ms, done, arg);
}

enum lk_code engine_multi_release(struct engine *e, struct lk_loop *lp, const char *const *names,
                                  size_t n, const char *lease, eng_multi_set_fn done, void *arg)
{
    return mset_run(e, lp, names, n, lease, false, 0, done, arg);
}
