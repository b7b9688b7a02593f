/*
 * grant_log.c - the per-node table of live leases this lockd granted
 * (grant_log.h). Keyed by lease (128 random bits: no two grants share one),
 * spread over GL_STRIPES open-addressing tables (linear probing, backward
 * shift on delete) so that the loops' grants and releases rarely meet on
 * one mutex. A record is one allocation: 40 bytes (the lease as 16 raw
 * bytes, token, expiry, ttl, limit and flags, two lengths), then the name
 * and the owner, no terminators (a 16-byte name: a 64-byte heap chunk); the
 * table holds a pointer per slot, at most 3/4 full. The mutexes are leaves.
 */
#include "server/grant_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

#define GL_STRIPES 128
#define GL_MIN_CAP 8

/* lim: the limit (1..10000) in the low 14 bits, and two flags; a shared
 * hold with limit 1 is a reader, with more a semaphore's slot
 * (rb_acquire_shared's mode). */
#define GL_LIMIT_MASK 0x3fff
#define GL_SB 0x4000
#define GL_SHARED 0x8000

struct gl_rec {
    uint8_t lease[16];
    int64_t token;
    int64_t expires_ms;
    uint32_t ttl_ms; /* max_ttl_ms is at most 30 days: below 2^32 */
    uint16_t lim;
    uint8_t name_len, owner_len; /* names are 1..255 bytes, owners at most 128 */
    char text[];                 /* the name, then the owner */
};

struct gl_stripe {
    pthread_mutex_t mu;
    struct gl_rec **slot; /* cap entries, NULL = free */
    size_t cap, used;
};

struct glog {
    int64_t max;
    atomic_llong count;
    unsigned next_sweep; /* the janitor's thread only */
    struct gl_stripe st[GL_STRIPES];
};

/* 32 lowercase hex digits (what lk_random_hex makes) to 16 bytes; false
 * for anything else: a lease a client sent that lockd never granted. */
static bool lease_raw(const char *lease, uint8_t out[16])
{
    for (int i = 0; i < 16; i++) {
        int hi = lease[2 * i], lo = hi ? lease[2 * i + 1] : 0;
        bool ok = ((hi >= '0' && hi <= '9') || (hi >= 'a' && hi <= 'f')) &&
                  ((lo >= '0' && lo <= '9') || (lo >= 'a' && lo <= 'f'));
        if (!ok)
            return false;
        out[i] = (uint8_t)(lk_hexval((char)hi) << 4 | lk_hexval((char)lo));
    }
    return lease[32] == '\0';
}

static void lease_hex(const uint8_t raw[16], char out[33])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[32] = '\0';
}

/* Where a lease lives. Its bytes are the hash: every recorded lease comes
 * from the system's random source (a client cannot choose one, so cannot
 * crowd a table); a lease a client sends is only looked up. */
static uint32_t home_of(const uint8_t *k)
{
    uint32_t h;
    memcpy(&h, k, sizeof(h));
    return h;
}

static struct gl_stripe *stripe_of(struct glog *g, const uint8_t *k)
{
    return &g->st[k[4] % GL_STRIPES];
}

/* Under the stripe's mutex: the slot of k, or of the free slot where it
 * would go (*found false). The table has a free slot (at most 3/4 full). */
static size_t slot_find(const struct gl_stripe *s, const uint8_t *k, bool *found)
{
    size_t mask = s->cap - 1, i = home_of(k) & mask;
    *found = false;
    if (s->cap == 0)
        return 0;
    while (s->slot[i] != NULL) {
        if (memcmp(s->slot[i]->lease, k, 16) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & mask;
    }
    return i;
}

static void slot_grow(struct gl_stripe *s)
{
    size_t old = s->cap, cap = old ? old * 2 : GL_MIN_CAP;
    struct gl_rec **was = s->slot;
    s->slot = lk_calloc(cap, sizeof(*s->slot));
    s->cap = cap;
    for (size_t i = 0; i < old; i++) {
        if (was[i] == NULL)
            continue;
        size_t j = home_of(was[i]->lease) & (cap - 1);
        while (s->slot[j] != NULL)
            j = (j + 1) & (cap - 1);
        s->slot[j] = was[i];
    }
    free(was);
}

/* Takes the record in slot i out (the caller frees or keeps it) and shifts
 * back the ones its removal would cut off from their home slot. */
static void slot_unlink(struct glog *g, struct gl_stripe *s, size_t i)
{
    size_t mask = s->cap - 1, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->slot[j] == NULL)
            break;
        size_t k = home_of(s->slot[j]->lease) & mask;
        /* j's record stays when its home lies cyclically in (i, j] */
        bool stays = i <= j ? i < k && k <= j : i < k || k <= j;
        if (!stays) {
            s->slot[i] = s->slot[j];
            i = j;
        }
    }
    s->slot[i] = NULL;
    s->used--;
    atomic_fetch_sub_explicit(&g->count, 1, memory_order_relaxed);
}

static void slot_del(struct glog *g, struct gl_stripe *s, size_t i)
{
    free(s->slot[i]);
    slot_unlink(g, s, i);
}

/* Drops the stripe's expired records; under its mutex. A delete may shift
 * a later record into slot i: i is looked at again (a record may be seen
 * twice, which a sweep does not mind). */
static size_t stripe_sweep(struct glog *g, struct gl_stripe *s, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; i < s->cap;) {
        struct gl_rec *r = s->slot[i];
        if (r != NULL && r->expires_ms <= now) {
            slot_del(g, s, i);
            n++;
        } else {
            i++;
        }
    }
    return n;
}

/* The record of lease, under its stripe's locked mutex (*sp), or NULL (and
 * then no mutex is held). */
static struct gl_rec *lock_rec(struct glog *g, const char *lease, struct gl_stripe **sp,
                               size_t *at)
{
    uint8_t k[16];
    if (g == NULL || !lease_raw(lease, k))
        return NULL;
    struct gl_stripe *s = stripe_of(g, k);
    bool found;
    pthread_mutex_lock(&s->mu);
    size_t i = slot_find(s, k, &found);
    if (!found) {
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    *sp = s;
    *at = i;
    return s->slot[i];
}

struct glog *glog_new(int64_t max)
{
    struct glog *g = lk_calloc(1, sizeof(*g));
    g->max = max > 0 ? max : 1;
    atomic_init(&g->count, 0);
    for (int i = 0; i < GL_STRIPES; i++)
        pthread_mutex_init(&g->st[i].mu, NULL);
    return g;
}

void glog_free(struct glog *g)
{
    if (g == NULL)
        return;
    for (int i = 0; i < GL_STRIPES; i++) {
        for (size_t j = 0; j < g->st[i].cap; j++)
            free(g->st[i].slot[j]);
        free(g->st[i].slot);
        pthread_mutex_destroy(&g->st[i].mu);
    }
    free(g);
}

bool glog_full(struct glog *g)
{
    if (g == NULL) /* nothing recorded (no restart handling) */
        return false;
    return atomic_load_explicit(&g->count, memory_order_relaxed) >= g->max;
}

size_t glog_count(struct glog *g)
{
    if (g == NULL)
        return 0;
    long long n = atomic_load_explicit(&g->count, memory_order_relaxed);
    return n > 0 ? (size_t)n : 0;
}

/* Adds r (ownership moves), replacing a record of the same lease. */
static void rec_add(struct glog *g, struct gl_rec *r)
{
    struct gl_stripe *s = stripe_of(g, r->lease);
    bool found;
    pthread_mutex_lock(&s->mu);
    if ((s->used + 1) * 4 > s->cap * 3)
        slot_grow(s);
    size_t i = slot_find(s, r->lease, &found);
    if (found) {
        free(s->slot[i]);
    } else {
        s->used++;
        atomic_fetch_add_explicit(&g->count, 1, memory_order_relaxed);
    }
    s->slot[i] = r;
    pthread_mutex_unlock(&s->mu);
}

void glog_put(struct glog *g, const struct gl_grant *gr)
{
    uint8_t k[16];
    if (g == NULL || !lease_raw(gr->lease, k))
        return;
    size_t nl = strlen(gr->name), ol = gr->owner != NULL ? gr->owner_len : 0;
    if (nl == 0 || nl > UINT8_MAX)
        return;
    if (ol > UINT8_MAX)
        ol = UINT8_MAX;
    struct gl_rec *r = lk_malloc(sizeof(*r) + nl + ol);
    memcpy(r->lease, k, sizeof(k));
    r->token = gr->token;
    r->expires_ms = gr->expires_ms;
    r->ttl_ms = (uint32_t)(gr->ttl_ms > 0 && gr->ttl_ms <= UINT32_MAX ? gr->ttl_ms : 0);
    int limit = gr->limit >= 1 && gr->limit <= GL_LIMIT_MASK ? gr->limit : 1;
    r->lim = (uint16_t)(limit | (gr->sb ? GL_SB : 0) | (gr->shared ? GL_SHARED : 0));
    r->name_len = (uint8_t)nl;
    r->owner_len = (uint8_t)ol;
    memcpy(r->text, gr->name, nl);
    if (ol > 0)
        memcpy(r->text + nl, gr->owner, ol);
    rec_add(g, r);
}

void glog_renew(struct glog *g, const char *lease, int64_t ttl_ms, int64_t start_ms)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, &s, &i);
    if (r == NULL)
        return;
    if (ttl_ms > 0 && ttl_ms <= UINT32_MAX)
        r->ttl_ms = (uint32_t)ttl_ms;
    r->expires_ms = start_ms + r->ttl_ms;
    pthread_mutex_unlock(&s->mu);
}

void glog_token(struct glog *g, const char *lease, int64_t token)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, &s, &i);
    if (r == NULL)
        return;
    if (token > r->token)
        r->token = token;
    pthread_mutex_unlock(&s->mu);
}

void glog_drop(struct glog *g, const char *lease)
{
    struct gl_stripe *s;
    size_t i;
    if (lock_rec(g, lease, &s, &i) == NULL)
        return;
    slot_del(g, s, i);
    pthread_mutex_unlock(&s->mu);
}

bool glog_take(struct glog *g, const char *lease, int64_t *token)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, &s, &i);
    if (r == NULL)
        return false;
    *token = r->token;
    slot_del(g, s, i);
    pthread_mutex_unlock(&s->mu);
    return true;
}

size_t glog_drop_name(struct glog *g, const char *name)
{
    size_t n = 0, nl = strlen(name);
    for (int i = 0; g != NULL && i < GL_STRIPES; i++) {
        struct gl_stripe *s = &g->st[i];
        pthread_mutex_lock(&s->mu);
        for (size_t j = 0; j < s->cap;) {
            const struct gl_rec *r = s->slot[j];
            if (r != NULL && r->name_len == nl && memcmp(r->text, name, nl) == 0) {
                slot_del(g, s, j); /* j again: a later record may have moved in */
                n++;
            } else {
                j++;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    return n;
}

struct gl_item *glog_snapshot(struct glog *g, int64_t now, size_t *n)
{
    if (g == NULL) {
        *n = 0;
        return NULL;
    }
    size_t cap = glog_count(g) + 16, k = 0;
    struct gl_item *it = lk_malloc(cap * sizeof(*it));
    for (int i = 0; i < GL_STRIPES; i++) {
        struct gl_stripe *s = &g->st[i];
        pthread_mutex_lock(&s->mu);
        stripe_sweep(g, s, now); /* so that each record below is copied once */
        for (size_t j = 0; j < s->cap; j++) {
            const struct gl_rec *r = s->slot[j];
            if (r == NULL)
                continue;
            if (k == cap) {
                cap *= 2;
                it = lk_realloc(it, cap * sizeof(*it));
            }
            struct gl_item *x = &it[k++];
            lease_hex(r->lease, x->lease);
            x->token = r->token;
            x->left_ms = r->expires_ms - now;
            x->ttl_ms = r->ttl_ms;
            x->sb = (r->lim & GL_SB) != 0;
            x->shared = (r->lim & GL_SHARED) != 0;
            x->limit = r->lim & GL_LIMIT_MASK;
            x->reader = x->shared && x->limit == 1;
            x->name = lk_malloc(LK_PAIR_SIZE(r->name_len, r->owner_len));
            lk_pair_put(x->name, r->text, r->name_len, r->text + r->name_len, r->owner_len);
        }
        pthread_mutex_unlock(&s->mu);
    }
    *n = k;
    return it;
}

void glog_items_free(struct gl_item *it, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(it[i].name);
    free(it);
}

size_t glog_sweep(struct glog *g, int64_t now)
{
    if (g == NULL)
        return 0;
    struct gl_stripe *s = &g->st[g->next_sweep++ % GL_STRIPES];
    pthread_mutex_lock(&s->mu);
    size_t n = stripe_sweep(g, s, now);
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t glog_move(struct glog *from, struct glog *to, glog_pick_fn pick, void *arg)
{
    if (from == NULL || to == NULL || from == to)
        return 0;
    size_t moved = 0;
    for (int i = 0; i < GL_STRIPES; i++) {
        struct gl_stripe *s = &from->st[i];
        struct gl_rec **took = NULL;
        size_t n = 0, cap = 0;
        pthread_mutex_lock(&s->mu);
        for (size_t j = 0; j < s->cap;) {
            struct gl_rec *r = s->slot[j];
            if (r == NULL || !pick(arg, r->text, r->name_len)) {
                j++;
                continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                took = lk_realloc(took, cap * sizeof(*took));
            }
            took[n++] = r;
            slot_unlink(from, s, j); /* j again: a later record may have moved in */
        }
        pthread_mutex_unlock(&s->mu);
        /* one mutex at a time: each stays a leaf */
        for (size_t k = 0; k < n; k++)
            rec_add(to, took[k]);
        moved += n;
        free(took);
    }
    return moved;
}
