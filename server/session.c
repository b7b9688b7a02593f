/*
 * session.c - the session table: sessions, the locks held under them (keyed
 * by name and lease), and the two heaps that time them (heartbeat deadlines
 * and watchdog renewals). It makes no backend call and knows no waiter:
 * janitor.c and engine.c act on what it hands out. Any thread, under smu;
 * no callback runs under smu.
 *
 * A heap entry whose object died is freed when it is popped, so the heaps
 * never point at freed memory.
 */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/engine_int.h"
#include "server/log.h"
#include "server/metrics.h"

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

bool session_owner(struct engine *e, const char *id, char owner[LK_OWNER_MAX + 1])
{
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    if (s != NULL)
        memcpy(owner, s->owner, LK_OWNER_MAX + 1);
    pthread_mutex_unlock(&e->smu);
    return s != NULL;
}

bool session_holds(struct engine *e, const char *id, const char *name)
{
    bool held = false;
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    struct sess_lock *it, *tmp;
    if (s != NULL) {
        HASH_ITER (sh, s->locks, it, tmp) {
            if (strcmp(it->name, name) == 0 && !it->dead && !it->releasing) {
                held = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&e->smu);
    return held;
}

size_t session_count(struct engine *e)
{
    pthread_mutex_lock(&e->smu);
    size_t n = e->nsessions;
    pthread_mutex_unlock(&e->smu);
    return n;
}

/* The key "name\0lease" of (name, lease) into buf; 0 when lease is not a
 * lease (no entry can match it). */
static size_t key_of(char buf[SESS_KEY_LEN(LK_NAME_MAX)], const char *name, const char *lease)
{
    size_t nlen = strnlen(name, LK_NAME_MAX + 1);
    if (nlen > LK_NAME_MAX || strnlen(lease, LK_LEASE_LEN + 1) != LK_LEASE_LEN)
        return 0;
    memcpy(buf, name, nlen);
    buf[nlen] = '\0';
    memcpy(buf + nlen + 1, lease, LK_LEASE_LEN);
    return SESS_KEY_LEN(nlen);
}

static struct sess_lock *find_lock(struct engine *e, const char *name, const char *lease)
{
    char key[SESS_KEY_LEN(LK_NAME_MAX)];
    size_t klen = key_of(key, name, lease);
    struct sess_lock *sl = NULL;
    if (klen > 0)
        HASH_FIND(hh, e->held, key, klen, sl);
    return sl;
}

static void push_renew(struct engine *e, struct sess_lock *sl, int64_t at)
{
    sl->in_heap = true;
    heap_push(&e->renew_heap, at, sl);
}

/* Detaches sl from its session and from held (under smu); the heap entry
 * frees it later. released: let go (by its client, or with its session), so
 * its hold time is observed; not when lost. */
static void detach_lock(struct engine *e, struct sess_lock *sl, bool released)
{
    if (sl->dead)
        return;
    sl->dead = true;
    HASH_DELETE(hh, e->held, sl);
    if (sl->s != NULL)
        HASH_DELETE(sh, sl->s->locks, sl);
    sl->s = NULL;
    metrics_add(M_LOCKS_HELD, -1);
    if (released)
        metrics_observe(H_LOCK_HOLD, lk_now_us() - sl->granted_us);
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
    lk_log_kv(LK_WARN, "lease lost", "name", sl->name, "reason", why, (char *)NULL);
    metrics_add(M_LEASES_LOST, 1);
    detach_lock(e, sl, false);
}

enum lk_code session_add_lock(struct engine *e, const char *id, const char *name, const char *lease,
                              const char *owner, int64_t token, int64_t ttl_ms, int64_t max_hold_ms,
                              bool shared, int64_t limit)
{
    int64_t now = lk_now_ms();
    size_t nlen = strnlen(name, LK_NAME_MAX), olen = strnlen(owner, LK_OWNER_MAX);
    if (strnlen(lease, LK_LEASE_LEN + 1) != LK_LEASE_LEN)
        return LK_INTERNAL;
    struct sess_lock *sl = lk_calloc(1, sizeof(*sl) + nlen + 1 + LK_LEASE_LEN + 1 + olen + 1);
    memcpy(sl->name, name, nlen);
    char *l = sl->name + nlen + 1;
    memcpy(l, lease, LK_LEASE_LEN);
    lk_strlcpy(l + LK_LEASE_LEN + 1, owner, olen + 1);
    sl->lease = l;
    sl->owner = l + LK_LEASE_LEN + 1;
    sl->token = token;
    sl->ttl_ms = ttl_ms;
    sl->count = 1;
    sl->shared = shared;
    sl->limit = engine_limit_of(limit);
    sl->expires_ms = now + ttl_ms;
    sl->granted_us = lk_now_us();
    if (max_hold_ms < 0)
        max_hold_ms = e->cfg->max_hold_ms;
    sl->hold_until_ms = max_hold_ms > 0 ? now + max_hold_ms : 0;

    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    enum lk_code code = s == NULL                           ? LK_SESSION_NOT_FOUND
                        : find_lock(e, name, lease) != NULL ? LK_INTERNAL /* leases are unique */
                                                            : LK_OK;
    if (code != LK_OK) {
        pthread_mutex_unlock(&e->smu);
        free(sl);
        return code;
    }
    sl->s = s;
    /* Keyed by (name, lease) only: another lease on the same name (a second
     * shared holder, or an old lease whose loss the watchdog has not seen
     * yet) is another entry, and each is judged by its own renewals. */
    HASH_ADD_KEYPTR(hh, e->held, sl->name, SESS_KEY_LEN(nlen), sl);
    HASH_ADD_KEYPTR(sh, s->locks, sl->name, SESS_KEY_LEN(nlen), sl);
    push_renew(e, sl, now + ttl_ms / 3);
    metrics_add(M_LOCKS_HELD, 1);
    pthread_mutex_unlock(&e->smu);
    return LK_OK;
}

bool session_reenter(struct engine *e, const char *id, const char *name, bool shared, int64_t limit,
                     struct eng_result *r, char lease_out[LK_LEASE_LEN + 1],
                     char owner_out[LK_OWNER_MAX + 1])
{
    limit = engine_limit_of(limit);
    bool ok = false;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    struct sess_lock *sl = NULL, *it, *tmp;
    /* By name within the session: a walk of its own locks, which a
     * reentrant acquire alone needs. */
    if (s != NULL) {
        HASH_ITER (sh, s->locks, it, tmp) {
            /* Not a lease whose expiry passed without a successful renewal:
             * it may be gone, and a reentrant grant must not vouch for it.
             * Nor one whose release is at the backend. */
            /* Same mode and limit only: a shared hold is never upgraded
             * (the acquire goes to the backend and finds itself there). */
            if (strcmp(it->name, name) == 0 && !it->dead && !it->releasing &&
                it->expires_ms > now && it->shared == shared && it->limit == limit) {
                sl = it;
                break;
            }
        }
    }
    if (sl != NULL) {
        sl->count++;
        memcpy(lease_out, sl->lease, LK_LEASE_LEN + 1);
        lk_strlcpy(owner_out, sl->owner, LK_OWNER_MAX + 1);
        r->code = LK_OK;
        r->lease = lease_out;
        r->owner = owner_out;
        r->fencing_token = sl->token; /* same lease, same token */
        r->ttl_ms = sl->ttl_ms;
        r->expires_at_ms = lk_wall_ms() + (sl->expires_ms - now);
        r->session = s->id;
        r->count = sl->count;
        r->shared = sl->shared;
        ok = true;
    }
    pthread_mutex_unlock(&e->smu);
    return ok;
}

enum sess_release session_release_begin(struct engine *e, const char *name, const char *lease,
                                        int64_t *left, int64_t *token)
{
    enum sess_release sr = SR_UNBOUND;
    pthread_mutex_lock(&e->smu);
    struct sess_lock *sl = find_lock(e, name, lease);
    if (sl != NULL && !sl->dead) {
        if (sl->count > 1) {
            sl->count--;
            *left = sl->count;
            *token = sl->token;
            sr = SR_KEPT;
        } else {
            /* Stays in its session (renewed, reported) until the backend
             * answers: session_release_end. */
            sl->releasing = true;
            sr = SR_LAST;
        }
    }
    pthread_mutex_unlock(&e->smu);
    return sr;
}

void session_release_end(struct engine *e, const char *name, const char *lease, enum lk_code code)
{
    pthread_mutex_lock(&e->smu);
    struct sess_lock *sl = find_lock(e, name, lease);
    if (sl != NULL && !sl->dead) {
        sl->releasing = false;
        if (code == LK_OK || code == LK_NOT_HELD || code == LK_HELD_BY_OTHER) {
            detach_lock(e, sl, code == LK_OK); /* gone from the backend: nothing to renew */
            free_if_unreferenced(sl);
        }
    }
    pthread_mutex_unlock(&e->smu);
}

int64_t session_note_renew(struct engine *e, const char *name, const char *lease, int64_t ttl_ms,
                           char session[LK_SESSION_LEN + 1])
{
    int64_t count = 0;
    pthread_mutex_lock(&e->smu);
    struct sess_lock *sl = find_lock(e, name, lease);
    if (sl != NULL && !sl->dead) {
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

/* ---- the session API: views are copies, answered after smu is dropped ---- */

struct view_copy {
    struct eng_session_view v;
    char id[LK_SESSION_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    char **locks, **lost;
};

/* Copies what the view shows of s (under smu). */
static void view_take(struct view_copy *c, const struct session *s)
{
    memset(c, 0, sizeof(*c));
    memcpy(c->id, s->id, sizeof(c->id));
    memcpy(c->owner, s->owner, sizeof(c->owner));
    size_t n = HASH_CNT(sh, s->locks), i = 0;
    c->locks = lk_malloc((n ? n : 1) * sizeof(char *));
    struct sess_lock *sl, *tmp;
    HASH_ITER (sh, s->locks, sl, tmp)
        c->locks[i++] = lk_strdup(sl->name);
    c->lost = lk_malloc((s->nlost ? s->nlost : 1) * sizeof(char *));
    for (size_t k = 0; k < s->nlost; k++)
        c->lost[k] = lk_strdup(s->lost[k]);
    c->v.code = LK_OK;
    c->v.session = c->id;
    c->v.owner = c->owner;
    c->v.ttl_ms = s->ttl_ms;
    c->v.expires_at_ms = lk_wall_ms() + (s->deadline_ms - lk_now_ms());
    c->v.locks = (const char *const *)c->locks;
    c->v.nlocks = n;
    c->v.lost = (const char *const *)c->lost;
    c->v.nlost = s->nlost;
}

static void view_release(struct view_copy *c)
{
    for (size_t i = 0; i < c->v.nlocks; i++)
        free(c->locks[i]);
    for (size_t i = 0; i < c->v.nlost; i++)
        free(c->lost[i]);
    free(c->locks);
    free(c->lost);
}

static void answer_code(eng_session_fn done, void *arg, enum lk_code code)
{
    struct eng_session_view v;
    memset(&v, 0, sizeof(v));
    v.code = code;
    done(arg, &v);
}

enum lk_code engine_session_create(struct engine *e, int64_t ttl_ms, const char *owner,
                                   int64_t lock_delay_ms, eng_session_fn done, void *arg)
{
    if (atomic_load(&e->draining)) {
        answer_code(done, arg, LK_SHUTTING_DOWN);
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
        answer_code(done, arg, LK_TOO_MANY_SESSIONS);
        return LK_OK;
    }
    HASH_ADD_STR(e->sessions, id, s);
    heap_push(&e->sess_heap, s->deadline_ms, s);
    e->nsessions++;
    metrics_add(M_SESSIONS, 1);
    struct view_copy c;
    view_take(&c, s);
    pthread_mutex_unlock(&e->smu);
    done(arg, &c.v);
    view_release(&c);
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
        /* A lock whose release is at the backend is judged by its answer. */
        if (sl->expires_ms > now || sl->releasing)
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
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    if (s == NULL) {
        pthread_mutex_unlock(&e->smu);
        answer_code(done, arg, LK_SESSION_NOT_FOUND);
        return LK_OK;
    }
    int64_t now = lk_now_ms();
    if (touch)
        s->deadline_ms = now + s->ttl_ms;
    lose_expired(e, s, now);
    struct view_copy c;
    view_take(&c, s);
    if (touch)
        clear_lost(s); /* reported once, on this heartbeat */
    pthread_mutex_unlock(&e->smu);
    done(arg, &c.v);
    view_release(&c);
    return LK_OK;
}

/* ---- ending sessions ---- */

void sess_end_free(struct sess_end *se)
{
    for (size_t i = 0; i < se->n; i++) {
        free(se->names[i]);
        free(se->leases[i]);
    }
    free(se->names);
    free(se->leases);
    free(se);
}

/* Unlinks s (under smu) and collects (name, lease) of its locks. */
static struct sess_end *unlink_session(struct engine *e, struct session *s)
{
    struct sess_end *se = lk_calloc(1, sizeof(*se));
    memcpy(se->id, s->id, sizeof(se->id));
    se->delay_ms = s->lock_delay_ms;
    size_t n = HASH_CNT(sh, s->locks);
    se->names = lk_calloc(n ? n : 1, sizeof(char *));
    se->leases = lk_calloc(n ? n : 1, sizeof(char *));
    struct sess_lock *sl, *tmp;
    HASH_ITER (sh, s->locks, sl, tmp) {
        se->names[se->n] = lk_strdup(sl->name);
        se->leases[se->n] = lk_strdup(sl->lease);
        se->n++;
        detach_lock(e, sl, true);
        free_if_unreferenced(sl);
    }
    s->dead = true;
    HASH_DEL(e->sessions, s);
    e->nsessions--;
    metrics_add(M_SESSIONS, -1);
    return se;
}

enum lk_code session_end(struct engine *e, const char *id, struct sess_end **out)
{
    pthread_mutex_lock(&e->smu);
    struct session *s = find_live(e, id);
    *out = s != NULL ? unlink_session(e, s) : NULL;
    pthread_mutex_unlock(&e->smu);
    return *out != NULL ? LK_OK : LK_SESSION_NOT_FOUND;
}

struct sess_end *session_reap_due(struct engine *e, int64_t now)
{
    struct sess_end *list = NULL;
    pthread_mutex_lock(&e->smu);
    for (;;) {
        const struct heap_item *top = heap_top(&e->sess_heap);
        if (top == NULL || top->key > now)
            break;
        struct session *s = top->ptr;
        heap_pop(&e->sess_heap);
        if (s->dead) {
            clear_lost(s);
            free(s);
            continue;
        }
        if (s->deadline_ms > now) { /* heartbeated since: look again then */
            heap_push(&e->sess_heap, s->deadline_ms, s);
            continue;
        }
        struct sess_end *se = unlink_session(e, s);
        heap_push(&e->sess_heap, now, s); /* freed on the next pop */
        se->next = list;
        list = se;
    }
    pthread_mutex_unlock(&e->smu);
    return list;
}

struct sess_end *session_end_all(struct engine *e)
{
    struct sess_end *list = NULL;
    pthread_mutex_lock(&e->smu);
    struct session *s, *st;
    HASH_ITER (hh, e->sessions, s, st) {
        struct sess_end *se = unlink_session(e, s);
        se->next = list;
        list = se;
    }
    pthread_mutex_unlock(&e->smu);
    return list;
}

/* ---- the watchdog's table work ---- */

struct wd_batch *session_watchdog_due(struct engine *e, int64_t now,
                                      char (**capped)[2][LK_NAME_MAX + 1], size_t *ncapped)
{
    struct wd_batch *batches = NULL, *b = NULL;
    bool due = false; /* something fell due: sweep the nearly due along */
    *capped = NULL;
    *ncapped = 0;
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
             * trips (10,000 leases: ~50 FCALL per cycle instead of one per
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
            if (now >= sl->hold_until_ms && sl->releasing) {
                /* Its client is releasing it: look again once answered. */
                push_renew(e, sl, now + RETRY_MS);
                continue;
            }
            if (now >= sl->hold_until_ms) {
                /* Free it for others too: the lease may outlive the cap. */
                *capped = lk_realloc(*capped, (*ncapped + 1) * sizeof(**capped));
                lk_strlcpy((*capped)[*ncapped][0], sl->name, LK_NAME_MAX + 1);
                lk_strlcpy((*capped)[*ncapped][1], sl->lease, LK_NAME_MAX + 1);
                (*ncapped)++;
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
    return batches;
}

void session_watchdog_done(struct wd_batch *b)
{
    struct engine *e = b->e;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&e->smu);
    for (size_t i = 0; i < b->n; i++) {
        struct sess_lock *sl = b->locks[i];
        const struct bk_renew_item *it = &b->items[i];
        sl->in_flight = false;
        if (sl->dead) {
            free_if_unreferenced(sl);
            continue;
        }
        switch (it->result) {
        case LK_OK: {
            metrics_add(M_WATCHDOG_OK, 1);
            sl->expires_ms = b->sent_ms + it->ttl_ms;
            int64_t next = now + sl->ttl_ms / 3;
            if (sl->hold_until_ms > 0 && next > sl->hold_until_ms)
                next = sl->hold_until_ms; /* declared lost right when it lapses */
            push_renew(e, sl, next);
            break;
        }
        case LK_NOT_HELD:
        case LK_HELD_BY_OTHER:
            if (sl->releasing) {
                /* Its client's release got there first (the renewal ran
                 * after it in the backend, its answer came back before the
                 * release's): released, not lost. */
                detach_lock(e, sl, true);
                free_if_unreferenced(sl);
                break;
            }
            metrics_add(M_WATCHDOG_LOST, 1);
            mark_lost(e, sl, lk_code_name(it->result));
            free_if_unreferenced(sl);
            break;
        default:
            /* Backend in doubt: retry until the lease's own TTL runs out
             * (or, while its client's release is at the backend, until that
             * release is answered). */
            metrics_add(M_WATCHDOG_ERROR, 1);
            if (now >= sl->expires_ms && !sl->releasing) {
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
