/*
 * backend_memory.c - the embedded store: a uthash table of locks behind one
 * mutex (held only for in-memory work, never across I/O). Every operation
 * completes synchronously. Exclusive, shared (reader-writer) and semaphore
 * (limit > 1) locks: the rules are backend.h's. Expired entries are dropped lazily on access and
 * by list/inspect; fencing tokens come from one counter seeded from the wall
 * clock in microseconds, so they keep increasing across a lockd restart.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/hash.h"
#include "server/sha1.h"
#include "server/util.h"

/* One holder of a name: a lease with its own token and expiry. */
struct mem_holder {
    int64_t token;
    int64_t ttl_ms;     /* the ttl last given, for renew without one */
    int64_t expires_ms; /* monotonic */
    char *owner;        /* "" (static) when none, else its own copy */
    bool session_bound;
    unsigned char mode; /* enum bk_mode */
    char lease[LK_LEASE_LEN + 1];
};

/* One allocation per name, sized to it, plus an array only when it has more
 * than one holder: an exclusive lock keeps its holder inline (`one`). An
 * entry is created by the grant that takes a free name. Once the name is
 * free again and out of any lock-delay, an entry whose index was read (an
 * inspect or a watch: `observed`) moves from the live table to the kept one
 * and stays until keep_until_ms, so its reader sees the index move on; any
 * other is freed at once. A name with no entry reads free_index, which a
 * freed entry raises to its own index: so no name's index ever moves back
 * (DESIGN.md, Watching), and freeing one changes only what names with no
 * entry read. Reading a name with no entry leaves a kept one with that
 * index, so a grant and release between a watcher's answer and its next
 * ask still change what it reads.
 * Holders are kept in grant order, so in token order: the newest is the
 * last. Each holder's slot frees at its own expiry (trim), with no sweep
 * needed for correctness. */
struct mem_lock {
    UT_hash_handle hh;
    int64_t delay_until_ms;  /* lock-delay (Chubby) after a session expiry */
    int64_t limit;           /* the limit in force while held */
    int64_t writer_until_ms; /* an exclusive waiter was refused by readers: none join until then */
    int64_t index;           /* bk_res.index: bumped on every change of the holders */
    int64_t keep_until_ms;   /* a free entry stays this long, so its index lives on */
    struct mem_holder *h;    /* &one while cap is 1 */
    uint32_t n, cap;
    bool observed; /* its index was read: kept while free (see above) */
    struct mem_holder one;
    char name[];
};

struct mem {
    pthread_mutex_t mu;
    struct mem_lock *locks; /* live: held, or free in a lock-delay */
    /* Free entries kept for their index, oldest move first (uthash keeps
     * insertion order): the sweep frees them from the front and never walks
     * them. Kept only when read (bench/RESULTS.md: keeping every released
     * name cost a memory pair 6 % in cache misses and walks). */
    struct mem_lock *kept;
    int64_t last_token;
    int64_t last_index; /* the index last given to any name */
    int64_t free_index; /* what a name with no entry reads: the highest a freed one had */
    char sweep_at[LK_NAME_MAX + 1]; /* where the janitor's sweep resumes */
    char cursor_key[33];            /* random per process: signs list cursors */
    int64_t keep_free_ms;           /* KEEP_FREE_MS (tests shorten it) */
};

#define SWEEP_STEP 2048 /* entries looked at per sweep call, under mu */
#define INSPECT_MAX 100 /* holders an inspect lists (DESIGN.md §2) */
/* A free name whose index was read keeps its entry (and index) this long
 * after its last change, so that a watcher of it sees the same index; after
 * that it reads free_index (no lower: a watcher holding the older index is
 * answered at once, once, if other names were freed since). */
#define KEEP_FREE_MS 60000

static char mem_no_owner[1] = "";

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

/* The holders of l changed: a new index, above every one given before (and
 * above the wall clock in microseconds, so across a restart too). */
static void bump(struct mem *m, struct mem_lock *l, int64_t now)
{
    int64_t t = lk_wall_us();
    m->last_index = t > m->last_index ? t : m->last_index + 1;
    l->index = m->last_index;
    l->keep_until_ms = now + m->keep_free_ms;
}

static void holder_drop(struct mem_holder *h)
{
    if (h->owner != mem_no_owner)
        free(h->owner);
    h->owner = mem_no_owner;
}

/* Removes holder i, keeping the others in grant order. */
static void holder_remove(struct mem_lock *l, uint32_t i)
{
    holder_drop(&l->h[i]);
    memmove(&l->h[i], &l->h[i + 1], (size_t)(l->n - i - 1) * sizeof(*l->h));
    l->n--;
}

/* Drops every holder whose lease ran out; true when any did. */
static bool trim(struct mem_lock *l, int64_t now)
{
    uint32_t before = l->n;
    uint32_t k = 0;
    for (uint32_t i = 0; i < l->n; i++) {
        if (l->h[i].expires_ms > now)
            l->h[k++] = l->h[i];
        else
            holder_drop(&l->h[i]);
    }
    l->n = k;
    return k != before;
}

/* A new entry for name (len bytes), in no table, with no holder and room
 * for one; lock_free frees it. */
static struct mem_lock *lock_new(const char *name, size_t len)
{
    struct mem_lock *l = lk_malloc(sizeof(*l) + len + 1);
    memset(l, 0, sizeof(*l));
    memcpy(l->name, name, len + 1);
    l->h = &l->one;
    l->cap = 1;
    return l;
}

static void lock_free(struct mem_lock *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        holder_drop(&l->h[i]);
    if (l->h != &l->one)
        free(l->h);
    free(l);
}

/* l's entry goes (not at shutdown): names with no entry read at least its
 * index from now on (free_index). */
static void lock_forget(struct mem *m, struct mem_lock *l)
{
    if (l->index > m->free_index)
        m->free_index = l->index;
    lock_free(l);
}

static bool alive(const struct mem_lock *l)
{
    return l->n > 0;
}

/* Moves l from one table to the other (its hash value is kept). */
static void move(struct mem_lock **from, struct mem_lock **to, struct mem_lock *l)
{
    unsigned hv = l->hh.hashv, len = l->hh.keylen;
    HASH_DELETE(hh, *from, l);
    HASH_ADD_BYHASHVALUE(hh, *to, name[0], len, hv, l);
}

/* l is live: returns it if it is still held or delayed, else moves it to the
 * kept table (a free entry whose index was read keeps it until
 * keep_until_ms) or frees it, and returns NULL. An expiry seen here is a
 * change of holders. */
static struct mem_lock *prune(struct mem *m, struct mem_lock *l, int64_t now)
{
    if (trim(l, now))
        bump(m, l, now);
    if (l->n > 0 || l->delay_until_ms > now)
        return l;
    if (l->observed && l->keep_until_ms > now) {
        move(&m->locks, &m->kept, l);
    } else {
        HASH_DEL(m->locks, l);
        lock_forget(m, l);
    }
    return NULL;
}

/* The live entry of name (see prune), else NULL. */
static struct mem_lock *find_live(struct mem *m, const char *name, size_t len, unsigned hv,
                                  int64_t now)
{
    struct mem_lock *l;
    HASH_FIND_BYHASHVALUE(hh, m->locks, name, len, hv, l);
    return l != NULL ? prune(m, l, now) : NULL;
}

/* The kept (free) entry of name, else NULL; one whose keep ended is freed. */
static struct mem_lock *find_kept(struct mem *m, const char *name, size_t len, unsigned hv,
                                  int64_t now)
{
    struct mem_lock *l;
    HASH_FIND_BYHASHVALUE(hh, m->kept, name, len, hv, l);
    if (l != NULL && l->keep_until_ms <= now) {
        HASH_DEL(m->kept, l);
        lock_forget(m, l);
        return NULL;
    }
    return l;
}

/* The entry of name if it is held, delayed or kept (live or not). */
static struct mem_lock *find(struct mem *m, const char *name, int64_t now)
{
    size_t len = strlen(name);
    unsigned hv;
    HASH_VALUE(name, len, hv);
    struct mem_lock *l = find_live(m, name, len, hv, now);
    return l != NULL ? l : find_kept(m, name, len, hv, now);
}

/* Expired entries nobody touches again would stay forever: the janitor
 * prunes live entries, SWEEP_STEP per call (about 100 calls a second), so the
 * mutex is never held for a walk of the whole table, and frees kept entries
 * whose keep ended from the front of their table (at most SWEEP_STEP). */
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
        (void)prune(m, l, now); /* takes l out when neither held nor delayed */
        l = next;
    }
    if (l != NULL)
        lk_strlcpy(m->sweep_at, l->name, sizeof(m->sweep_at));
    else
        m->sweep_at[0] = '\0';
    /* Kept entries move in in about keep_until order: stop at the first that
     * stays (one behind it is freed on its next lookup, or here later). */
    for (int i = 0; (l = m->kept) != NULL && l->keep_until_ms <= now && i < SWEEP_STEP; i++) {
        HASH_DEL(m->kept, l);
        lock_forget(m, l);
    }
    pthread_mutex_unlock(&m->mu);
}

static void holder_of(const struct mem_holder *mh, int64_t now, struct bk_holder *h)
{
    memset(h, 0, sizeof(*h));
    lk_strlcpy(h->owner, mh->owner, sizeof(h->owner));
    h->fencing_token = mh->token;
    h->expires_in_ms = mh->expires_ms - now;
    h->session_bound = mh->session_bound;
    h->mode = (enum bk_mode)mh->mode;
}

/* The holder a refused acquire is told of: the one whose expiry would let it
 * in. A semaphore that is full frees a slot at its first expiry; anything
 * else needs every holder gone, so the last expiry. */
static const struct mem_holder *blocking_holder(const struct mem_lock *l)
{
    const struct mem_holder *b = &l->h[0];
    for (uint32_t i = 1; i < l->n; i++) {
        bool earlier = l->h[i].expires_ms < b->expires_ms;
        if (l->limit > 1 ? earlier : !earlier)
            b = &l->h[i];
    }
    return b;
}

static void holder_set(struct mem *m, struct mem_holder *mh, const struct bk_req *req, int64_t now)
{
    const char *owner = req->owner ? req->owner : "";
    size_t olen = strnlen(owner, LK_OWNER_MAX);
    mh->owner = mem_no_owner;
    if (olen > 0) {
        mh->owner = lk_malloc(olen + 1);
        memcpy(mh->owner, owner, olen);
        mh->owner[olen] = '\0';
    }
    lk_strlcpy(mh->lease, req->lease, sizeof(mh->lease));
    mh->token = next_token(m, req->fence_floor);
    mh->ttl_ms = req->ttl_ms;
    mh->expires_ms = now + req->ttl_ms;
    mh->session_bound = req->session_bound;
    mh->mode = (unsigned char)req->mode;
}

/* A new last holder slot of l (unset: the caller fills it), the array
 * doubled when full. Holders may move: no pointer into l->h survives this. */
static struct mem_holder *holder_add(struct mem_lock *l)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap * 2;
        struct mem_holder *nh = lk_malloc(cap * sizeof(*nh));
        memcpy(nh, l->h, l->n * sizeof(*nh));
        if (l->h != &l->one)
            free(l->h);
        l->h = nh;
        l->cap = cap;
    }
    return &l->h[l->n++];
}

/* The shared holders granted with req's own (bk_req.more), just granted
 * on name: admitted with it, so all of them are; their tokens follow its
 * token. Holders may move (the array grows): no pointer into them is kept
 * across this. */
static void grant_more(struct mem *m, const struct bk_req *req, int64_t now)
{
    if (req->nmore == 0)
        return; /* the common case: no second lookup */
    struct mem_lock *l;
    HASH_FIND_STR(m->locks, req->name, l);
    for (size_t i = 0; l != NULL && i < req->nmore; i++) {
        struct bk_grant_item *it = &req->more[i];
        struct bk_req one = {.op = BK_ACQUIRE,
                             .lease = it->lease,
                             .owner = it->owner,
                             .mode = BK_SHARED,
                             .limit = 1,
                             .ttl_ms = it->ttl_ms,
                             .session_bound = it->session_bound};
        struct mem_holder *mh = holder_add(l);
        holder_set(m, mh, &one, now);
        it->fencing_token = mh->token;
    }
}

/* Whether an acquire of (mode, limit) may join l's holders; sets r's code
 * and blocking holder when not. */
static bool admits(struct mem_lock *l, const struct bk_req *req, int64_t now, struct bk_holder *h,
                   struct bk_res *r)
{
    if (!alive(l) && l->delay_until_ms > now) { /* in its lock-delay */
        r->code = LK_LOCKED;
        r->delay_ms = l->delay_until_ms - now;
        return false;
    }
    if (!alive(l)) { /* a free entry kept for its index: a fresh start */
        l->limit = req->limit;
        l->writer_until_ms = 0;
        return true;
    }
    if (req->limit != l->limit) {
        r->code = LK_LIMIT_MISMATCH;
        r->limit = l->limit;
        return false;
    }
    if (l->limit > 1
            ? l->n < (uint64_t)l->limit
            : req->mode == BK_SHARED && l->h[0].mode == BK_SHARED && l->writer_until_ms <= now)
        return true;
    const struct mem_holder *b = blocking_holder(l);
    if (req->wait && req->mode == BK_EXCLUSIVE && l->limit == 1 && b->mode == BK_SHARED)
        l->writer_until_ms = b->expires_ms + 1000; /* a writer waits: readers queue behind it */
    r->code = LK_LOCKED;
    holder_of(b, now, h);
    r->holders = h;
    r->nholders = 1;
    r->limit = l->limit;
    return false;
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

/* Under mu: gives name to req when its mode and limit allow (the entry is
 * created for a free name), else fills r's refusal. The holder, or NULL. */
static struct mem_holder *take(struct mem *m, const char *name, const struct bk_req *req,
                               int64_t now, struct bk_holder *h, struct bk_res *r)
{
    size_t len = strlen(name);
    unsigned hv; /* hashed once for the lookup and, when new, the insert */
    HASH_VALUE(name, len, hv);
    struct mem_lock *l = find_live(m, name, len, hv, now);
    if (l == NULL && (l = find_kept(m, name, len, hv, now)) != NULL)
        move(&m->kept, &m->locks, l); /* a free entry kept for its index: live again */
    struct mem_holder *mh = NULL;
    if (l == NULL) {
        l = lock_new(name, len);
        HASH_ADD_BYHASHVALUE(hh, m->locks, name[0], len, hv, l);
        l->limit = req->limit;
        mh = holder_add(l);
    } else if (admits(l, req, now, h, r)) {
        mh = holder_add(l);
    }
    if (mh != NULL) {
        holder_set(m, mh, req, now);
        bump(m, l, now);
        r->room = l->limit > 1 && l->n < (uint64_t)l->limit;
    }
    return mh;
}

static void mem_acquire(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    if (req->limit < 1) {
        r.code = LK_INVALID;
        done(arg, &r);
        return;
    }
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_holder *mh = take(m, req->name, req, now, &h, &r);
    if (mh != NULL) {
        r.fencing_token = mh->token;
        r.ttl_ms = mh->ttl_ms;
        r.validity_ms = mh->ttl_ms; /* one process, one clock: no drift to subtract */
        grant_more(m, req, now);    /* last: mh may move */
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

/* A multi-lock: every name is looked at before any is taken, under one hold
 * of mu, so the set is granted whole or not at all and nobody sees it half
 * taken (server/multilock.c). */
static void mem_acquire_multi(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    if (req->nnames == 0 || req->limit != 1 || req->mode != BK_EXCLUSIVE) {
        r.code = LK_INVALID;
        done(arg, &r);
        return;
    }
    int64_t *tokens = lk_malloc(req->nnames * sizeof(*tokens));
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < req->nnames; i++) {
        struct mem_lock *l = find(m, req->names[i], now);
        if (l != NULL && !admits(l, req, now, &h, &r)) {
            r.blocked = i;
            goto out;
        }
    }
    for (size_t i = 0; i < req->nnames; i++) {
        /* all admitted above, and nothing changed since: each is granted */
        struct mem_holder *mh = take(m, req->names[i], req, now, &h, &r);
        tokens[i] = mh != NULL ? mh->token : 0;
    }
    r.tokens = tokens;
    r.ttl_ms = req->ttl_ms;
    r.validity_ms = req->ttl_ms;
out:
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
    free(tokens);
}

/* Owner check shared by renew, release and renew_many: compare the lease
 * first. h receives the holder (the lease's own when it holds the name, else
 * the newest). Returns the lease's holder, *lp its entry. */
static struct mem_holder *owned(struct mem *m, const char *name, const char *lease, int64_t now,
                                struct bk_holder *h, struct bk_res *r, struct mem_lock **lp)
{
    struct mem_lock *l = find(m, name, now);
    *lp = l;
    if (l == NULL || !alive(l)) {
        r->code = LK_NOT_HELD;
        return NULL;
    }
    r->holders = h;
    r->nholders = 1;
    for (uint32_t i = 0; i < l->n; i++) {
        if (lk_streq_ct(l->h[i].lease, lease)) {
            holder_of(&l->h[i], now, h); /* renew answers with the owner too */
            r->code = LK_OK;
            r->fencing_token = l->h[i].token;
            return &l->h[i];
        }
    }
    holder_of(&l->h[l->n - 1], now, h);
    r->code = LK_HELD_BY_OTHER;
    return NULL;
}

static void mem_renew(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder h;
    bk_res_init(&r, LK_OK);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l;
    struct mem_holder *mh = owned(m, req->name, req->lease, now, &h, &r, &l);
    if (mh != NULL) {
        if (req->ttl_ms > 0)
            mh->ttl_ms = req->ttl_ms;
        mh->expires_ms = now + mh->ttl_ms;
        h.expires_in_ms = mh->ttl_ms;
        r.ttl_ms = mh->ttl_ms;
        r.validity_ms = mh->ttl_ms;
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
    struct mem_lock *l;
    struct mem_holder *mh = owned(m, req->name, req->lease, now, &h, &r, &l);
    if (mh != NULL) {
        r.holders = NULL; /* released: this lease holds nothing now */
        r.nholders = 0;
        holder_remove(l, (uint32_t)(mh - l->h));
        bump(m, l, now); /* a free entry stays a while (KEEP_FREE_MS): prune keeps it */
        if (l->n == 0 && req->delay_ms > 0) {
            /* (other holders keep the name: no lock-delay while they do) */
            l->delay_until_ms = now + req->delay_ms;
            r.delay_ms = req->delay_ms;
        }
        (void)prune(m, l, now); /* free and undelayed: kept for its index, or gone now */
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

/* Every holder goes, whatever its lease; no lock-delay follows (an
 * operator's force-unlock, DESIGN.md §Operators). */
static void mem_force_release(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    bk_res_init(&r, LK_NOT_HELD);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = find(m, req->name, now);
    if (l != NULL && alive(l)) {
        r.code = LK_OK;
        for (uint32_t i = 0; i < l->n; i++)
            if (l->h[i].token > r.fencing_token)
                r.fencing_token = l->h[i].token;
        while (l->n > 0)
            holder_remove(l, l->n - 1);
        l->delay_until_ms = 0; /* no lock-delay after a forced release */
        bump(m, l, now);
        (void)prune(m, l, now); /* free: kept for its index */
    }
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
}

static void mem_inspect(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    struct bk_holder *hs = NULL;
    bk_res_init(&r, LK_OK);
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&m->mu);
    struct mem_lock *l = find(m, req->name, now);
    if (l != NULL) {
        l->observed = true;
    } else if (m->keep_free_ms > 0) { /* read at 0: a change from here must show */
        size_t len = strlen(req->name);
        struct mem_lock *k = lock_new(req->name, len);
        k->index = m->free_index;
        k->observed = true;
        k->keep_until_ms = now + m->keep_free_ms;
        HASH_ADD_KEYPTR(hh, m->kept, k->name, len, k);
    }
    if (l != NULL && alive(l)) {
        size_t n = l->n < INSPECT_MAX ? l->n : INSPECT_MAX;
        hs = lk_malloc(n * sizeof(*hs));
        for (size_t i = 0; i < n; i++) /* newest token first */
            holder_of(&l->h[l->n - 1 - i], now, &hs[i]);
        r.holders = hs;
        r.nholders = n;
        r.total_holders = l->n;
        r.limit = l->limit;
    } else if (l != NULL && l->delay_until_ms > now) {
        r.delay_ms = l->delay_until_ms - now;
    }
    r.index = l != NULL ? l->index : m->free_index;
    pthread_mutex_unlock(&m->mu);
    done(arg, &r);
    free(hs);
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

/* A cursor is "<name>~<mac>": the last name of the previous page and 16 hex
 * digits of SHA-1(key, name), so a cursor this lockd did not give out is
 * LK_BAD_CURSOR rather than a page from wherever it sorts. '~' is in no name. */
#define CURSOR_MAC 16
static void cursor_mac(const struct mem *m, const char *name, size_t len, char out[41])
{
    char buf[sizeof(m->cursor_key) + LK_NAME_MAX + 1];
    size_t kl = strlen(m->cursor_key);
    memcpy(buf, m->cursor_key, kl);
    memcpy(buf + kl, name, len);
    sha1_hex(buf, kl + len, out);
}

/* Takes the name out of a cursor we signed into name; false if it is not one. */
static bool cursor_open(const struct mem *m, const char *cursor, char name[LK_NAME_MAX + 1])
{
    size_t len = strnlen(cursor, LK_NAME_MAX + CURSOR_MAC + 2);
    const char *sep = memchr(cursor, '~', len);
    if (sep == NULL || len - (size_t)(sep - cursor) != CURSOR_MAC + 1 || sep == cursor ||
        (size_t)(sep - cursor) > LK_NAME_MAX)
        return false;
    size_t nl = (size_t)(sep - cursor);
    char mac[41];
    cursor_mac(m, cursor, nl, mac);
    if (memcmp(mac, sep + 1, CURSOR_MAC) != 0)
        return false;
    memcpy(name, cursor, nl);
    name[nl] = '\0';
    return true;
}

/* Pages on from the cursor's name; names sort bytewise. One pass over the
 * table keeps the `count` smallest names after the cursor (no copy of every
 * match), so the mutex is held for a walk of the table and not for copying
 * and sorting all of it. */
static void mem_list(struct mem *m, const struct bk_req *req, bk_done_fn done, void *arg)
{
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    const char *prefix = req->prefix ? req->prefix : "";
    char cursor[LK_NAME_MAX + 1] = "";
    if (req->cursor != NULL && req->cursor[0] != '\0' && !cursor_open(m, req->cursor, cursor)) {
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
    HASH_ITER (hh, m->locks, l, tmp) { /* kept entries are free: never listed */
        if (prune(m, l, now) == NULL || !alive(l))
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
        holder_of(&page[i]->h[page[i]->n - 1], now, &ents[i].holder);
        ents[i].nholders = page[i]->n;
        ents[i].limit = page[i]->limit;
        ents[i].index = page[i]->index;
    }
    pthread_mutex_unlock(&m->mu);
    free(page);
    qsort(ents, n, sizeof(*ents), cmp_entry); /* the copies: outside the mutex */
    r.entries = ents;
    r.nentries = n;
    char next[LK_NAME_MAX + CURSOR_MAC + 2];
    if (matched > n && n > 0) {
        size_t nl = strlen(ents[n - 1].name);
        char mac[41];
        cursor_mac(m, ents[n - 1].name, nl, mac);
        snprintf(next, sizeof(next), "%s~%.*s", ents[n - 1].name, CURSOR_MAC, mac);
        r.next_cursor = next;
    }
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
        struct mem_lock *l;
        struct mem_holder *mh = owned(m, items[i].name, items[i].lease, now, &h, &one, &l);
        if (mh != NULL) {
            if (items[i].ttl_ms > 0)
                mh->ttl_ms = items[i].ttl_ms;
            mh->expires_ms = now + mh->ttl_ms;
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
    [BK_ACQUIRE] = mem_acquire,
    [BK_RENEW] = mem_renew,
    [BK_RELEASE] = mem_release,
    [BK_INSPECT] = mem_inspect,
    [BK_LIST] = mem_list,
    [BK_RENEW_MANY] = mem_renew_many,
    [BK_PING] = mem_ping,
    [BK_FORCE_RELEASE] = mem_force_release,
    [BK_ACQUIRE_MULTI] = mem_acquire_multi,
};

static enum lk_code mem_submit(void *bk, struct lk_loop *lp, const struct bk_req *req,
                               bk_done_fn done, void *arg)
{
    (void)lp;
    /* more holders (bk_req.more) go with a reader's acquire only */
    bool more_ok = req->nmore == 0 || (req->op == BK_ACQUIRE && req->mode == BK_SHARED &&
                                       req->limit == 1 && req->more != NULL);
    if ((unsigned)req->op >= BK_OP_COUNT || !more_ok) {
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
        lock_free(l);
    }
    HASH_ITER (hh, m->kept, l, tmp) {
        HASH_DEL(m->kept, l);
        lock_free(l);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const struct backend_ops mem_ops = {
    .name = "memory",
    .caps = BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE | BK_CAP_INDEX |
            BK_CAP_GROUP | BK_CAP_MULTI,
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
    lk_random_hex(m->cursor_key, 16);
    m->keep_free_ms = KEEP_FREE_MS;
    /* A name nobody held in this process reads the clock it started at, in
     * µs as every index is: above what an earlier lockd answered for it, so
     * an index never moves back across a restart either (and every index
     * given from here, bump, is above it). */
    m->free_index = lk_wall_us();
    m->last_index = m->free_index;
    out->ops = &mem_ops;
    out->state = m;
    return LK_OK;
}
