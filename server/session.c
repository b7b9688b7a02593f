/*
 * session.c - sessions, the watchdog and the reaper. A client heartbeats its
 * session; the janitor thread (its own loop, never a request thread) renews
 * every lease held under a live session at ttl/3 in batched backend calls
 * (leases due within ttl/6 of a cycle join it, so batches stay large),
 * and expires sessions that missed their heartbeat, releasing their locks
 * with compare-and-delete (and Chubby's lock-delay when asked).
 *
 * Timers are two min-heaps under smu with one entry per session and per
 * session lock; an entry whose object died is freed when it is popped, so
 * the heaps never point at freed memory.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

#define JANITOR_TICK_S 0.01
#define WATCHDOG_BATCH 4096
#define RETRY_MS 100

static struct session *find_live(struct engine *e, const char *id)
{
    struct session *s;
    HASH_FIND_STR(e->sessions, id, s);
    if (s != NULL && s->deadline_ms <= lk_now_ms())
        return NULL; /* missed its heartbeat; the reaper frees it */
    return s;
}

bool session_alive(struct engine *e, const char *id)
{
    pthread_mutex_lock(&e->smu);
    bool ok = find_live(e, id) != NULL;
    pthread_mutex_unlock(&e->smu);
    return ok;
}

static void push_renew(struct engine *e, struct sess_lock *sl, int64_t at)
{
    sl->in_heap = true;
    heap_push(&e->renew_heap, at, sl);
}

/* Detaches sl from its session and from held (under smu); the heap entry
 * frees it later. */
static void detach_lock(struct engine *e, struct sess_lock *sl)
{
    if (sl->dead)
        return;
    sl->dead = true;
    struct sess_lock *cur;
    HASH_FIND_STR(e->held, sl->name, cur);
    if (cur == sl)
        HASH_DEL(e->held, sl);
    if (sl->s != NULL)
        HASH_DELETE(sh, sl->s->locks, sl);
    sl->s = NULL;
    metrics_add(M_LOCKS_HELD, -1);
}

static void free_if_unreferenced(struct sess_lock *sl)
{
    if (sl->dead && !sl->in_heap && !sl->in_flight)
        free(sl);
}

static void add_lost(struct session *s, const char *name)
{
    s->lost = lk_realloc(s->lost, (s->nlost + 1) * sizeof(*s->lost));
    s->lost[s->nlost++] = lk_strdup(name);
}

static void clear_lost(struct session *s)
{
    for (size_t i = 0; i < s->nlost; i++)
        free(s->lost[i]);
    free(s->lost);
    s->lost = NULL;
    s->nlost = 0;
}

/* Marks sl lost (under smu): the client sees it in `lost`. */
static void mark_lost(struct engine *e, struct sess_lock *sl, const char *why)
{
    if (sl->s != NULL)
        add_lost(sl->s, sl->name);
    lk_log_kv(LK_WARN, "lease lost", "name", sl->name, "reason", why, NULL);
    metrics_add(M_LEASES_LOST, 1);
    detach_lock(e, sl);
}

enum lk_code session_add_lock(struct engine *e, const char *id, const char *name, const char *lease,
                              const char *owner, int64_t token, int64_t ttl_ms, int64_t max_hold_ms)
{
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    if (s == NULL) {
        pthread_mutex_unlock(&e->smu);
        return LK_SESSION_NOT_FOUND;
    }
    size_t nlen = strnlen(name, LK_NAME_MAX), olen = strnlen(owner, LK_OWNER_MAX);
    struct sess_lock *sl = lk_calloc(1, sizeof(*sl) + LK_PAIR_SIZE(nlen, olen));
    lk_pair_put(sl->name, name, nlen, owner, olen);
    lk_strlcpy(sl->lease, lease, sizeof(sl->lease));
    sl->token = token;
    sl->ttl_ms = ttl_ms;
    sl->count = 1;
    sl->expires_ms = now + ttl_ms;
    if (max_hold_ms < 0)
        max_hold_ms = e->cfg->max_hold_ms;
    sl->hold_until_ms = max_hold_ms > 0 ? now + max_hold_ms : 0;
    sl->s = s;
    struct sess_lock *old;
    HASH_FIND_STR(e->held, name, old);
    if (old != NULL) {
        /* The backend just granted name to a new lease, so an earlier lease
         * we still track (its loss not noticed yet, e.g. Redis came back
         * empty) is gone: report it lost now rather than keep it in locks. */
        mark_lost(e, old, "granted to another lease");
        free_if_unreferenced(old);
    }
    HASH_ADD_STR(e->held, name, sl);
    HASH_ADD_KEYPTR(sh, s->locks, sl->name, strlen(sl->name), sl);
    push_renew(e, sl, now + ttl_ms / 3);
    metrics_add(M_LOCKS_HELD, 1);
    pthread_mutex_unlock(&e->smu);
    return LK_OK;
}

bool session_reenter(struct engine *e, const char *id, const char *name, struct eng_result *r,
                     char lease_out[LK_LEASE_LEN + 1], char owner_out[LK_OWNER_MAX + 1])
{
    bool ok = false;
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    struct sess_lock *sl = NULL;
    if (s != NULL)
        HASH_FIND(sh, s->locks, name, strlen(name), sl);
    /* Not a lease whose expiry passed without a successful renewal: it may
     * be gone, and a reentrant grant must not vouch for it. */
    if (sl != NULL && !sl->dead && sl->expires_ms > lk_now_ms()) {
        sl->count++;
        memcpy(lease_out, sl->lease, LK_LEASE_LEN + 1);
        lk_strlcpy(owner_out, lk_pair_second(sl->name), LK_OWNER_MAX + 1);
        r->code = LK_OK;
        r->lease = lease_out;
        r->owner = owner_out;
        r->fencing_token = sl->token; /* same lease, same token */
        r->ttl_ms = sl->ttl_ms;
        r->expires_at_ms = lk_wall_ms() + (sl->expires_ms - lk_now_ms());
        r->session = s->id;
        r->count = sl->count;
        ok = true;
    }
    pthread_mutex_unlock(&e->smu);
    return ok;
}

bool session_release_hold(struct engine *e, const char *name, const char *lease, int64_t *left,
                          int64_t *token)
{
    bool kept = false;
    pthread_mutex_lock(&e->smu);
    struct sess_lock *sl;
    HASH_FIND_STR(e->held, name, sl);
    if (sl != NULL && !sl->dead && lk_streq_ct(sl->lease, lease)) {
        if (sl->count > 1) {
            sl->count--;
            *left = sl->count;
            *token = sl->token;
            kept = true;
        } else {
            /* Last hold: the caller releases it in the backend. */
            detach_lock(e, sl);
            free_if_unreferenced(sl);
        }
    }
    pthread_mutex_unlock(&e->smu);
    return kept;
}

int64_t session_note_renew(struct engine *e, const char *name, const char *lease, int64_t ttl_ms,
                           char session[LK_SESSION_LEN + 1])
{
    int64_t count = 0;
    pthread_mutex_lock(&e->smu);
    struct sess_lock *sl;
    HASH_FIND_STR(e->held, name, sl);
    if (sl != NULL && !sl->dead && strcmp(sl->lease, lease) == 0) {
        if (ttl_ms > 0) {
            sl->ttl_ms = ttl_ms;
            sl->expires_ms = lk_now_ms() + ttl_ms;
        }
        count = sl->count;
        lk_strlcpy(session, sl->s->id, LK_SESSION_LEN + 1);
    }
    pthread_mutex_unlock(&e->smu);
    return count;
}

/* ---- the session API ---- */

static void view_of(struct session *s, struct eng_session_view *v, const char **names, size_t cap)
{
    memset(v, 0, sizeof(*v));
    v->code = LK_OK;
    v->session = s->id;
    v->ttl_ms = s->ttl_ms;
    v->expires_at_ms = lk_wall_ms() + (s->deadline_ms - lk_now_ms());
    v->owner = s->owner;
    size_t n = 0;
    struct sess_lock *sl, *tmp;
    HASH_ITER (sh, s->locks, sl, tmp) {
        if (n < cap)
            names[n++] = sl->name;
    }
    v->locks = names;
    v->nlocks = n;
    v->lost = (const char *const *)s->lost;
    v->nlost = s->nlost;
}

enum lk_code engine_session_create(struct engine *e, int64_t ttl_ms, const char *owner,
                                   int64_t lock_delay_ms, eng_session_fn done, void *arg)
{
    struct eng_session_view v;
    memset(&v, 0, sizeof(v));
    if (atomic_load(&e->draining)) {
        v.code = LK_SHUTTING_DOWN;
        done(arg, &v);
        return LK_OK;
    }
    struct session *s = lk_calloc(1, sizeof(*s));
    lk_random_hex(s->id, LK_SESSION_LEN / 2);
    lk_strlcpy(s->owner, owner ? owner : "", sizeof(s->owner));
    s->ttl_ms = ttl_ms > 0 ? ttl_ms : e->cfg->session_ttl_ms;
    s->lock_delay_ms = lock_delay_ms;
    s->deadline_ms = lk_now_ms() + s->ttl_ms;
    pthread_mutex_lock(&e->smu);
    if ((int64_t)e->nsessions >= e->cfg->max_sessions) {
        pthread_mutex_unlock(&e->smu);
        free(s);
        v.code = LK_INTERNAL;
        done(arg, &v);
        return LK_OK;
    }
    HASH_ADD_STR(e->sessions, id, s);
    heap_push(&e->sess_heap, s->deadline_ms, s);
    e->nsessions++;
    metrics_add(M_SESSIONS, 1);
    view_of(s, &v, NULL, 0);
    done(arg, &v); /* under smu: the view points into s */
    pthread_mutex_unlock(&e->smu);
    return LK_OK;
}

/* Never report a lock kept that may be gone: a lease whose expiry (as of
 * its last confirmed renewal) passed is lost now, even if the watchdog has
 * not come round to it yet (retries against a backend that is down, a
 * max_hold_ms cap that clipped its last renewal). Under smu. */
static void lose_expired(struct engine *e, struct session *s, int64_t now)
{
    struct sess_lock *sl, *tmp;
    HASH_ITER (sh, s->locks, sl, tmp) {
        if (sl->expires_ms > now)
            continue;
        bool capped = sl->hold_until_ms > 0 && now >= sl->hold_until_ms;
        mark_lost(e, sl,
                  capped ? "max_hold_ms reached" : "lease expired before a renewal succeeded");
        free_if_unreferenced(sl);
    }
}

enum lk_code engine_session_get(struct engine *e, const char *id, bool touch, eng_session_fn done,
                                void *arg)
{
    struct eng_session_view v;
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    if (s == NULL) {
        pthread_mutex_unlock(&e->smu);
        memset(&v, 0, sizeof(v));
        v.code = LK_SESSION_NOT_FOUND;
        done(arg, &v);
        return LK_OK;
    }
    int64_t now = lk_now_ms();
    if (touch)
        s->deadline_ms = now + s->ttl_ms;
    lose_expired(e, s, now);
    size_t cap = HASH_CNT(sh, s->locks);
    const char **names = lk_malloc((cap ? cap : 1) * sizeof(*names));
    view_of(s, &v, names, cap);
    /* Callbacks build their JSON here, before the lock is dropped. */
    done(arg, &v);
    if (touch)
        clear_lost(s); /* reported once, on the next heartbeat */
    pthread_mutex_unlock(&e->smu);
    free(names);
    return LK_OK;
}

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
static void end_release_done(void *arg, const struct bk_reply *r)
{
    struct end_rel *er = arg;
    struct end_op *eo = er->eo;
    if (r->code == LK_OK) {
        metrics_add(M_RELEASE_OK, 1);
        /* Wake waiters only now: the name is free in the backend. */
        waiters_kick(eo->e, er->name);
        eo->names[eo->n++] = er->name;
    } else {
        metrics_add(r->code == LK_BACKEND_DOWN ? M_RELEASE_ERROR : M_RELEASE_NOT_HELD, 1);
        free(er->name);
    }
    free(er);
    if (--eo->pending == 0)
        end_finish(eo);
}

/* Unlinks s (under smu) and collects (name, lease) of its locks. */
static size_t end_session(struct engine *e, struct session *s, char ***names, char ***leases)
{
    size_t n = HASH_CNT(sh, s->locks), i = 0;
    *names = lk_calloc(n ? n : 1, sizeof(char *));
    *leases = lk_calloc(n ? n : 1, sizeof(char *));
    struct sess_lock *sl, *tmp;
    HASH_ITER (sh, s->locks, sl, tmp) {
        (*names)[i] = lk_strdup(sl->name);
        (*leases)[i] = lk_strdup(sl->lease);
        i++;
        detach_lock(e, sl);
        free_if_unreferenced(sl);
    }
    s->dead = true;
    HASH_DEL(e->sessions, s);
    e->nsessions--;
    metrics_add(M_SESSIONS, -1);
    return n;
}

enum lk_code engine_session_end(struct engine *e, struct lk_loop *lp, const char *id,
                                eng_session_fn done, void *arg)
{
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    if (s == NULL) {
        pthread_mutex_unlock(&e->smu);
        struct eng_session_view v;
        memset(&v, 0, sizeof(v));
        v.code = LK_SESSION_NOT_FOUND;
        done(arg, &v);
        return LK_OK;
    }
    char **names, **leases;
    size_t n = end_session(e, s, &names, &leases);
    pthread_mutex_unlock(&e->smu);
    waiters_fail(e, id);

    struct end_op *eo = lk_calloc(1, sizeof(*eo));
    eo->e = e;
    eo->done = done;
    eo->arg = arg;
    lk_strlcpy(eo->id, id, sizeof(eo->id));
    eo->names = lk_calloc(n ? n : 1, sizeof(char *));
    eo->pending = n + 1; /* +1 held until every release is issued */
    for (size_t i = 0; i < n; i++) {
        struct end_rel *er = lk_malloc(sizeof(*er));
        er->eo = eo;
        er->name = names[i];
        /* A clean end: no lock-delay (that is for sessions that expire).
         * Compare-and-delete: a lock lost meanwhile is not someone else's
         * to lose. */
        enum lk_code c =
            e->bk.ops->release(e->bk.state, lp, names[i], leases[i], 0, end_release_done, er);
        (void)c; /* end_release_done runs either way */
        free(leases[i]);
    }
    free(names);
    free(leases);
    if (--eo->pending == 0) {
        end_finish(eo);
        return LK_OK;
    }
    return LK_AGAIN;
}

size_t engine_session_count(struct engine *e)
{
    pthread_mutex_lock(&e->smu);
    size_t n = e->nsessions;
    pthread_mutex_unlock(&e->smu);
    return n;
}

/* ---- the janitor: reaper and watchdog ---- */

struct reap_op {
    struct engine *e;
    char name[LK_NAME_MAX + 1];
};

static void reap_release_done(void *arg, const struct bk_reply *r)
{
    struct reap_op *ro = arg;
    if (r->code == LK_OK)
        waiters_kick(ro->e, ro->name);
    free(ro);
}

static void reap(struct engine *e, int64_t now)
{
    for (;;) {
        pthread_mutex_lock(&e->smu);
        const struct heap_item *top = heap_top(&e->sess_heap);
        if (top == NULL || top->key > now) {
            pthread_mutex_unlock(&e->smu);
            return;
        }
        struct session *s = top->ptr;
        heap_pop(&e->sess_heap);
        if (s->dead) {
            clear_lost(s);
            free(s);
            pthread_mutex_unlock(&e->smu);
            continue;
        }
        if (s->deadline_ms > now) { /* heartbeated since: look again then */
            heap_push(&e->sess_heap, s->deadline_ms, s);
            pthread_mutex_unlock(&e->smu);
            continue;
        }
        char **names, **leases;
        size_t n = end_session(e, s, &names, &leases);
        int64_t delay = s->lock_delay_ms;
        char id[LK_SESSION_LEN + 1];
        memcpy(id, s->id, sizeof(id));
        heap_push(&e->sess_heap, now, s); /* freed on the next pop */
        pthread_mutex_unlock(&e->smu);
        metrics_add(M_SESSIONS_EXPIRED, 1);
        lk_log_kv(LK_INFO, "session expired", "session", id, NULL);
        waiters_fail(e, id);
        for (size_t i = 0; i < n; i++) {
            struct reap_op *ro = lk_calloc(1, sizeof(*ro));
            ro->e = e;
            lk_strlcpy(ro->name, names[i], sizeof(ro->name));
            /* Compare-and-delete: never someone else's lock. */
            enum lk_code c = e->bk.ops->release(e->bk.state, e->jloop, names[i], leases[i], delay,
                                                reap_release_done, ro);
            (void)c;
            free(names[i]);
            free(leases[i]);
        }
        free(names);
        free(leases);
    }
}

struct batch {
    struct engine *e;
    struct batch *next; /* batches of one watchdog pass, until sent */
    size_t n;
    int64_t sent_ms;
    struct sess_lock **locks;
    struct bk_renew_item *items;
};

static void batch_done(void *arg, struct bk_renew_item *items, size_t n)
{
    struct batch *b = arg;
    struct engine *e = b->e;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&e->smu);
    for (size_t i = 0; i < n; i++) {
        struct sess_lock *sl = b->locks[i];
        sl->in_flight = false;
        if (sl->dead) {
            free_if_unreferenced(sl);
            continue;
        }
        switch (items[i].result) {
        case LK_OK: {
            metrics_add(M_WATCHDOG_OK, 1);
            sl->expires_ms = b->sent_ms + items[i].ttl_ms;
            int64_t next = now + sl->ttl_ms / 3;
            if (sl->hold_until_ms > 0 && next > sl->hold_until_ms)
                next = sl->hold_until_ms; /* declared lost right when it lapses */
            push_renew(e, sl, next);
            break;
        }
        case LK_NOT_HELD:
        case LK_HELD_BY_OTHER:
            metrics_add(M_WATCHDOG_LOST, 1);
            mark_lost(e, sl, lk_code_name(items[i].result));
            free_if_unreferenced(sl);
            break;
        default:
            /* Backend in doubt: retry until the lease's own TTL runs out. */
            metrics_add(M_WATCHDOG_ERROR, 1);
            if (now >= sl->expires_ms) {
                mark_lost(e, sl, "backend unavailable until the lease expired");
                free_if_unreferenced(sl);
            } else {
                int64_t retry = sl->ttl_ms / 10 < RETRY_MS ? sl->ttl_ms / 10 : RETRY_MS;
                push_renew(e, sl, now + (retry > 0 ? retry : 1));
            }
            break;
        }
    }
    pthread_mutex_unlock(&e->smu);
    free(b->locks);
    free(b->items);
    free(b);
}

/* One pass over the renewal heap under smu, then the backend calls without
 * it. A single pass: a lease that a synchronous answer (or an immediate
 * LK_BACKEND_DOWN) puts back in the heap is not taken again in this tick. */
static void watchdog(struct engine *e, int64_t now)
{
    struct batch *batches = NULL, *b = NULL;
    char(*expired)[2][LK_NAME_MAX + 1] = NULL;
    size_t nexpired = 0;
    bool due = false; /* something fell due: sweep the nearly due along */
    pthread_mutex_lock(&e->smu);
    for (;;) {
        const struct heap_item *top = heap_top(&e->renew_heap);
        if (top == NULL)
            break;
        struct sess_lock *sl = top->ptr;
        if (top->key <= now) {
            due = true;
        } else if (!due || top->key > now + sl->ttl_ms / 6) {
            /* Renewing up to ttl/6 early only lengthens the lease, and lets
             * leases that fall due at nearby ticks share this cycle's round
             * trips (10,000 leases: ~50 EVALSHA per cycle instead of one per
             * tick). Nothing is due: no cycle. */
            break;
        }
        heap_pop(&e->renew_heap);
        sl->in_heap = false;
        if (sl->dead) {
            free_if_unreferenced(sl);
            continue;
        }
        int64_t ttl = sl->ttl_ms;
        if (sl->hold_until_ms > 0) {
            /* max_hold_ms: renew only up to the deadline, then let go. */
            if (now >= sl->hold_until_ms) {
                /* Free it for others too: the lease may outlive the cap. */
                expired = lk_realloc(expired, (nexpired + 1) * sizeof(*expired));
                lk_strlcpy(expired[nexpired][0], sl->name, sizeof(expired[nexpired][0]));
                memcpy(expired[nexpired][1], sl->lease, sizeof(sl->lease));
                nexpired++;
                mark_lost(e, sl, "max_hold_ms reached");
                free_if_unreferenced(sl);
                continue;
            }
            if (sl->hold_until_ms - now < ttl)
                ttl = sl->hold_until_ms - now;
        }
        if (b == NULL || b->n == WATCHDOG_BATCH) {
            b = lk_calloc(1, sizeof(*b));
            b->e = e;
            b->sent_ms = now;
            b->locks = lk_malloc(WATCHDOG_BATCH * sizeof(*b->locks));
            b->items = lk_malloc(WATCHDOG_BATCH * sizeof(*b->items));
            b->next = batches;
            batches = b;
        }
        sl->in_flight = true;
        b->locks[b->n] = sl;
        b->items[b->n].name = sl->name;
        b->items[b->n].lease = sl->lease;
        b->items[b->n].ttl_ms = ttl;
        b->items[b->n].result = LK_BACKEND_DOWN;
        b->n++;
    }
    pthread_mutex_unlock(&e->smu);
    for (size_t i = 0; i < nexpired; i++)
        engine_release_bg(e, e->jloop, expired[i][0], expired[i][1], 0);
    free(expired);
    while (batches != NULL) {
        b = batches;
        batches = b->next; /* b may be freed inside renew_many */
        enum lk_code c =
            e->bk.ops->renew_many(e->bk.state, e->jloop, b->items, b->n, batch_done, b);
        (void)c; /* batch_done runs either way */
    }
}

static void on_tick(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    struct engine *e = t->data;
    int64_t now = lk_now_ms();
    reap(e, now);
    watchdog(e, now);
    if (e->bk.ops->sweep != NULL)
        e->bk.ops->sweep(e->bk.state);
}

static void *janitor_main(void *arg)
{
    struct engine *e = arg;
    loop_run(e->jloop);
    return NULL;
}

static void janitor_init(void *arg)
{
    struct engine *e = arg;
    ev_timer_init(&e->jtick, on_tick, JANITOR_TICK_S, JANITOR_TICK_S);
    e->jtick.data = e;
    ev_timer_start(loop_ev(e->jloop), &e->jtick);
}

enum lk_code janitor_start(struct engine *e)
{
    e->jloop = loop_new(LOOP_JANITOR);
    enum lk_code c = e->bk.ops->attach(e->bk.state, e->jloop);
    if (c != LK_OK) {
        loop_free(e->jloop);
        e->jloop = NULL;
        return c;
    }
    loop_post(e->jloop, janitor_init, e);
    if (pthread_create(&e->jthread, NULL, janitor_main, e) != 0) {
        e->bk.ops->detach(e->bk.state, e->jloop);
        loop_free(e->jloop);
        e->jloop = NULL;
        return LK_INTERNAL;
    }
    e->jstarted = true;
    return LK_OK;
}

static void janitor_fini(void *arg)
{
    struct engine *e = arg;
    ev_timer_stop(loop_ev(e->jloop), &e->jtick);
    e->bk.ops->detach(e->bk.state, e->jloop);
}

void janitor_stop(struct engine *e)
{
    if (!e->jstarted)
        return;
    loop_post(e->jloop, janitor_fini, e);
    loop_stop(e->jloop);
    pthread_join(e->jthread, NULL);
    loop_free(e->jloop);
    e->jloop = NULL;
    e->jstarted = false;
}

void sessions_free_all(struct engine *e)
{
    /* Every object is reachable from exactly one heap entry or the tables. */
    struct session *s, *st;
    HASH_ITER (hh, e->sessions, s, st) {
        struct sess_lock *sl, *lt;
        HASH_ITER (sh, s->locks, sl, lt) {
            HASH_DELETE(sh, s->locks, sl);
            sl->s = NULL;
        }
        HASH_DEL(e->sessions, s);
        s->dead = true;
    }
    /* The same objects are in renew_heap or were freed: drop the table only. */
    HASH_CLEAR(hh, e->held);
    for (size_t i = 0; i < e->renew_heap.len; i++)
        free(e->renew_heap.items[i].ptr);
    for (size_t i = 0; i < e->sess_heap.len; i++) {
        struct session *x = e->sess_heap.items[i].ptr;
        clear_lost(x);
        free(x);
    }
    heap_release(&e->renew_heap);
    heap_release(&e->sess_heap);
}

/* release_on_shutdown: the releases run on the janitor loop (the main
 * thread has no backend connection) and the main thread waits for them on a
 * condition variable, bounded. Whoever drops the last reference frees. */
struct shut {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct engine *e;
    char **names, **leases;
    size_t n;
    size_t left; /* releases not answered yet */
    size_t released;
    int refs; /* the main thread + one per release not answered */
};

static void shut_free(struct shut *sh)
{
    for (size_t i = 0; i < sh->n; i++) {
        free(sh->names[i]);
        free(sh->leases[i]);
    }
    free(sh->names);
    free(sh->leases);
    pthread_cond_destroy(&sh->cv);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

static void shut_unref(struct shut *sh)
{
    pthread_mutex_lock(&sh->mu);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->mu);
    if (last)
        shut_free(sh);
}

static void shut_release_done(void *arg, const struct bk_reply *r)
{
    struct shut *sh = arg;
    pthread_mutex_lock(&sh->mu);
    sh->left--;
    if (r->code == LK_OK)
        sh->released++;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    shut_unref(sh);
}

/* On the janitor loop. */
static void shut_issue(void *arg)
{
    struct shut *sh = arg;
    struct engine *e = sh->e;
    size_t n = sh->n;
    char **names = sh->names, **leases = sh->leases;
    /* sh (and the arrays) stay alive until the last callback ran: each
     * release holds a reference, taken before this was posted. */
    for (size_t i = 0; i < n; i++) {
        /* Compare-and-delete, no lock-delay: a clean release. */
        enum lk_code c = e->bk.ops->release(e->bk.state, e->jloop, names[i], leases[i], 0,
                                            shut_release_done, sh);
        (void)c; /* shut_release_done runs either way */
    }
}

void engine_shutdown(struct engine *e)
{
    if (!e->cfg->release_on_shutdown || !e->jstarted)
        return;
    struct shut *sh = lk_calloc(1, sizeof(*sh));
    pthread_mutex_init(&sh->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sh->cv, &ca);
    pthread_condattr_destroy(&ca);
    sh->e = e;

    /* End every session: the watchdog stops renewing, heartbeats get 404. */
    size_t cap = 0;
    pthread_mutex_lock(&e->smu);
    struct session *s, *st;
    HASH_ITER (hh, e->sessions, s, st) {
        char **names, **leases;
        size_t n = end_session(e, s, &names, &leases);
        if (sh->n + n > cap) {
            cap = (sh->n + n) * 2;
            sh->names = lk_realloc(sh->names, cap * sizeof(char *));
            sh->leases = lk_realloc(sh->leases, cap * sizeof(char *));
        }
        memcpy(sh->names + sh->n, names, n * sizeof(char *));
        memcpy(sh->leases + sh->n, leases, n * sizeof(char *));
        sh->n += n;
        free(names);
        free(leases);
    }
    pthread_mutex_unlock(&e->smu);
    if (sh->n == 0) {
        shut_free(sh);
        return;
    }
    sh->left = sh->n;
    sh->refs = 1 + (int)sh->n;
    loop_post(e->jloop, shut_issue, sh);

    /* Bounded: one backend deadline plus a little; past it the rest expire
     * at their TTL. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t wait_ms = e->cfg->backend_timeout_ms + 500;
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sh->mu);
    while (sh->left > 0) {
        if (pthread_cond_timedwait(&sh->cv, &sh->mu, &ts) != 0)
            break; /* ETIMEDOUT */
    }
    size_t total = sh->n, released = sh->released, left = sh->left;
    pthread_mutex_unlock(&sh->mu);
    char a[24], b[24];
    snprintf(a, sizeof(a), "%zu", released);
    snprintf(b, sizeof(b), "%zu", total);
    lk_log_kv(left > 0 ? LK_WARN : LK_INFO, "release_on_shutdown", "released", a, "locks", b, NULL);
    shut_unref(sh);
}
