/*
 * backend_memory.c - the embedded store: a uthash table of locks behind one
 * mutex (held only for in-memory work, never across I/O). Every operation
 * completes synchronously. Expired entries are dropped lazily on access and
 * by list/inspect; fencing tokens come from one counter seeded from the wall
 * clock in microseconds, so they keep increasing across a lockd restart.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/hash.h"
#include "server/util.h"

/* One allocation per lock, sized to its name and owner: a lock named
 * "orders-42" without an owner takes about 144 bytes, where fixed arrays for
 * the longest name and owner took 528 (bench/RESULTS.md, RSS with 100,000
 * held leases). An entry is created by the grant that takes a free name and
 * freed when the name is free again, so name and owner never change. */
struct mem_lock {
    int64_t token;
    int64_t ttl_ms;         /* the ttl last given, for renew without one */
    int64_t expires_ms;     /* monotonic */
    int64_t delay_until_ms; /* lock-delay (Chubby) after a session expiry */
    UT_hash_handle hh;
    bool session_bound;
    char lease[LK_LEASE_LEN + 1]; /* "" while only a lock-delay is running */
    char name[];                  /* the name, then the owner ("" when none): lk_pair_put */
};

struct mem {
    pthread_mutex_t mu;
    struct mem_lock *locks;
    int64_t last_token;
    char sweep_at[LK_NAME_MAX + 1]; /* where the janitor's sweep resumes */
};

#define SWEEP_STEP 2048 /* entries looked at per sweep call, under mu */

/* Strictly above every token this process granted, above the wall clock in
 * microseconds so a restarted lockd counts past its previous life, and above
 * floor (the request's fence_floor, 0 = none). */
static int64_t next_token(struct mem *m, int64_t floor)
{
    int64_t t = lk_wall_us();
    if (t <= m->last_token)
        t = m->last_token + 1;
    if (t <= floor)
        t = floor + 1;
    m->last_token = t;
    return t;
}

static bool alive(const struct mem_lock *l, int64_t now)
{
    return l->lease[0] != '\0' && l->expires_ms > now;
}

/* Returns l if it is held or delayed, dropping it when neither. */
static struct mem_lock *prune(struct mem *m, struct mem_lock *l, int64_t now)
{
    if (l->lease[0] != '\0' && l->expires_ms <= now)
        l->lease[0] = '\0';
    if (l->lease[0] == '\0' && l->delay_until_ms <= now) {
        HASH_DEL(m->locks, l);
        free(l);
        return NULL;
    }
    return l;
}

/* The entry of name if it is held or delayed (see prune). */
static struct mem_lock *find(struct mem *m, const char *name, int64_t now)
{
    struct mem_lock *l;
    HASH_FIND_STR(m->locks, name, l);
    return l != NULL ? prune(m, l, now) : NULL;
}

/* Expired entries nobody touches again would stay forever: the janitor
 * drops them, SWEEP_STEP entries per call (about 100 calls a second), so the
 * mutex is never held for a walk of the whole table. */
static void mem_sweep(void *bk)
{
    struct mem *m = bk;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = NULL;
    if (m->sweep_at[0] != '\0')
        HASH_FIND_STR(m->locks, m->sweep_at, l);
    if (l == NULL)
        l = m->locks; /* first call, or the resume point is gone: start over */
    for (int i = 0; l != NULL && i < SWEEP_STEP; i++) {
        struct mem_lock *next = l->hh.next;
        prune(m, l, now); /* frees l when neither held nor delayed */
        l = next;
    }
    if (l != NULL)
        lk_strlcpy(m->sweep_at, l->name, sizeof(m->sweep_at));
    else
        m->sweep_at[0] = '\0';
    pthread_mutex_unlock(&m->mu);
}

static void holder_of(const struct mem_lock *l, int64_t now, struct bk_holder *h)
{
    memset(h, 0, sizeof(*h));
    lk_strlcpy(h->owner, lk_pair_second(l->name), sizeof(h->owner));
    h->fencing_token = l->token;
    h->expires_in_ms = l->expires_ms - now;
    h->session_bound = l->session_bound;
    h->mode = BK_EXCLUSIVE;
}

/* Who holds l, or the lock-delay left when nobody does; h is the result's
 * one-entry holder list. */
static void state_of(const struct mem_lock *l, int64_t now, struct bk_holder *h, struct bk_res *r)
{
    if (alive(l, now)) {
        holder_of(l, now, h);
        r->holders = h;
        r->nholders = 1;
    } else {
        r->delay_ms = l->delay_until_ms - now;
    }
}

static enum lk_code mem_attach(void *bk, struct lk_loop *lp)
{
    (void)bk;
    (void)lp;
    return LK_OK;
}

static void mem_detach(void *bk, struct lk_loop *lp)
{
    (void)bk;
    (void)lp;
}

/* Every operation completes before submit returns: one per op, called with
 * the request and answering through done. */
typedef void (*mem_op_fn)(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg);

static void mem_acquire(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    if (req->mode != BK_EXCLUSIVE || req->limit > 1) { /* caps: neither BK_CAP_SHARED nor LIMIT */
        r.code = LK_UNSUPPORTED;
        done(arg, &r);
        return;
    }
    int64_t now = lk_now_ms();
    size_t len = strlen(req->name);
    unsigned hv; /* hashed once for the lookup and, when new, the insert */
    HASH_VALUE(req->name, len, hv);
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l;
    HASH_FIND_BYHASHVALUE(hh, m->locks, req->name, len, hv, l);
    if (l != NULL)
        l = prune(m, l, now);
    if (l != NULL) { /* prune kept it: held, or in its lock-delay */
        r.code = LK_LOCKED;
        state_of(l, now, &h, &r);
    } else {
        const char *owner = req->owner ? req->owner : "";
        size_t olen = strnlen(owner, LK_OWNER_MAX);
        l = lk_malloc(sizeof(*l) + LK_PAIR_SIZE(len, olen));
        memset(l, 0, sizeof(*l));
        lk_pair_put(l->name, req->name, len, owner, olen);
        HASH_ADD_BYHASHVALUE(hh, m->locks, name[0], len, hv, l);
        lk_strlcpy(l->lease, req->lease, sizeof(l->lease));
        l->token = next_token(m, req->fence_floor);
        l->ttl_ms = req->ttl_ms;
        l->expires_ms = now + req->ttl_ms;
        l->delay_until_ms = 0;
        l->session_bound = req->session_bound;
        r.fencing_token = l->token;
        r.ttl_ms = l->ttl_ms;
        r.validity_ms = l->ttl_ms; /* one process, one clock: no drift to subtract */
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

/* Owner check shared by renew, release and renew_many: compare the lease
 * first. h receives the holder (the lease's own when it holds the name). */
static struct mem_lock *owned(struct mem *m, const char *name, const char *lease, int64_t now,
                              struct bk_holder *h, struct bk_res *r)
{
    struct mem_lock *l = find(m, name, now);
    if (l == NULL || !alive(l, now)) {
        r->code = LK_NOT_HELD;
        return NULL;
    }
    holder_of(l, now, h); /* renew answers with the owner too */
    r->holders = h;
    r->nholders = 1;
    if (!lk_streq_ct(l->lease, lease)) {
        r->code = LK_HELD_BY_OTHER;
        return NULL;
    }
    r->code = LK_OK;
    r->fencing_token = l->token;
    return l;
}

static void mem_renew(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = owned(m, req->name, req->lease, now, &h, &r);
    if (l != NULL) {
        if (req->ttl_ms > 0)
            l->ttl_ms = req->ttl_ms;
        l->expires_ms = now + l->ttl_ms;
        h.expires_in_ms = l->ttl_ms;
        r.ttl_ms = l->ttl_ms;
        r.validity_ms = l->ttl_ms;
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

static void mem_release(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = owned(m, req->name, req->lease, now, &h, &r);
    if (l != NULL) {
        r.holders = NULL; /* released: nobody holds it now */
        r.nholders = 0;
        if (req->delay_ms > 0) {
            l->lease[0] = '\0';
            l->delay_until_ms = now + req->delay_ms;
            r.delay_ms = req->delay_ms;
        } else {
            HASH_DEL(m->locks, l);
            free(l);
        }
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

static void mem_inspect(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = find(m, req->name, now);
    if (l != NULL)
        state_of(l, now, &h, &r);
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct bk_entry *)a)->name, ((const struct bk_entry *)b)->name);
}

/* The page being gathered is a max-heap on name: its root, the greatest
 * name kept so far, is the one a smaller name replaces. */
static void page_up(struct mem_lock **h, size_t i)
{
    while (i > 0 && strcmp(h[i]->name, h[(i - 1) / 2]->name) > 0) {
        struct mem_lock *t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static void page_down(struct mem_lock **h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1, top = i;
        if (c < n && strcmp(h[c]->name, h[top]->name) > 0)
            top = c;
        if (c + 1 < n && strcmp(h[c + 1]->name, h[top]->name) > 0)
            top = c + 1;
        if (top == i)
            return;
        struct mem_lock *t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

/* The cursor is the last name of the previous page; names sort bytewise, so
 * any text up to a name's length pages on from where it sorts. One longer
 * than any name was not given out here: LK_BAD_CURSOR. One pass over the
 * table keeps the `count` smallest names after the cursor (no copy of every
 * match), so the mutex is held for a walk of the table and not for copying
 * and sorting all of it. */
static void mem_list(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    const char *prefix = req->prefix ? req->prefix : "";
    const char *cursor = req->cursor ? req->cursor : "";
    if (strnlen(cursor, LK_NAME_MAX + 1) > LK_NAME_MAX) {
        r.code = LK_BAD_CURSOR;
        done(arg, &r);
        return;
    }
    size_t limit = req->count;
    int64_t now = lk_now_ms();
    size_t plen = strlen(prefix);
    struct mem_lock **page = lk_malloc((limit > 0 ? limit : 1) * sizeof(*page));
    size_t n = 0, matched = 0;
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l, *tmp;
    HASH_ITER (hh, m->locks, l, tmp) {
        if (prune(m, l, now) == NULL || !alive(l, now))
            continue;
        if (strncmp(l->name, prefix, plen) != 0 || strcmp(l->name, cursor) <= 0)
            continue;
        matched++;
        if (n < limit) {
            page[n] = l;
            page_up(page, n++);
        } else if (n > 0 && strcmp(l->name, page[0]->name) < 0) {
            page[0] = l;
            page_down(page, n, 0);
        }
    }
    struct bk_entry *ents = lk_malloc((n > 0 ? n : 1) * sizeof(*ents));
    for (size_t i = 0; i < n; i++) {
        ents[i].name = lk_strdup(page[i]->name);
        holder_of(page[i], now, &ents[i].holder);
    }
    pthread_mutex_unlock(&m->mu);
    free(page);
    qsort(ents, n, sizeof(*ents), cmp_entry); /* the copies: outside the mutex */
    r.entries = ents;
    r.nentries = n;
    r.next_cursor = matched > n && n > 0 ? ents[n - 1].name : NULL;
    done(arg, &r);
    for (size_t i = 0; i < n; i++)
        free((char *)ents[i].name);
    free(ents);
}

static void mem_renew_many(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    struct bk_renew_item *items = req->items;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < req->nitems; i++) {
        struct bk_res one;
        struct bk_holder h;
        bk_res_init(&one, LK_OK);
        struct mem_lock *l = owned(m, items[i].name, items[i].lease, now, &h, &one);
        if (l != NULL) {
            l->ttl_ms = items[i].ttl_ms;
            l->expires_ms = now + items[i].ttl_ms;
        }
        items[i].result = one.code;
    }
    pthread_mutex_unlock(&m->mu);
    r.items = items;
    r.nitems = req->nitems;
    done(arg, &r);
}

static void mem_ping(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    (void)m;
    (void)req;
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    done(arg, &r);
}

static const mem_op_fn mem_op[BK_OP_COUNT] = {
    [BK_ACQUIRE] = mem_acquire, [BK_RENEW] = mem_renew, [BK_RELEASE] = mem_release,
    [BK_INSPECT] = mem_inspect, [BK_LIST] = mem_list,   [BK_RENEW_MANY] = mem_renew_many,
    [BK_PING] = mem_ping,
};

static enum lk_code mem_submit(void *bk, struct lk_loop *lp, const struct bk_req *req,
                               bk_done_fn done, void *arg)
{
    (void)lp;
    if ((unsigned)req->op >= BK_OP_COUNT) {
        struct bk_res r;
        bk_res_init(&r, LK_INTERNAL);
        done(arg, &r);
        return LK_OK;
    }
    mem_op[req->op](bk, req, done, arg);
    return LK_OK;
}

static size_t mem_nodes(void *bk, struct bk_node *out, size_t max)
{
    (void)bk;
    if (max == 0)
        return 0;
    memset(out, 0, sizeof(*out));
    snprintf(out->addr, sizeof(out->addr), "memory");
    out->up = true;
    return 1;
}

static void mem_free(void *bk)
{
    struct mem *m = bk;
    struct mem_lock *l, *tmp;
    HASH_ITER (hh, m->locks, l, tmp) {
        HASH_DEL(m->locks, l);
        free(l);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const struct backend_ops mem_ops = {
    .name = "memory",
    .caps = BK_CAP_FLOOR, /* exclusive locks only: BK_SHARED and limit > 1 are refused */
    .attach = mem_attach,
    .detach = mem_detach,
    .submit = mem_submit,
    .sweep = mem_sweep,
    .nodes = mem_nodes,
    .set_release_hook = NULL,
    .watch = NULL,
    .free = mem_free,
};

enum lk_code backend_memory_new(const struct lk_config *cfg, struct backend *out)
{
    (void)cfg;
    struct mem *m = lk_calloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    out->ops = &mem_ops;
    out->state = m;
    return LK_OK;
}
