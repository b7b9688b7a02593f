/*
 * grant_log.c - the per-node table of live leases this lockd granted
 * (grant_log.h). Keyed by lease (128 random bits: no two grants share one),
 * spread over GL_STRIPES tables by the lease's first hex digits so that the
 * loops' grants and releases rarely meet on one mutex. A record is one
 * allocation: the struct, then "name\0owner\0". The mutexes are leaves.
 */
#include "server/grant_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/hash.h"
#include "server/util.h"

#define GL_STRIPES 128

struct gl_rec {
    UT_hash_handle hh;
    int64_t expires_ms;
    int64_t token;
    int64_t ttl_ms;
    int64_t granted_us; /* monotonic: when glog_put recorded it */
    bool sb;
    char lease[LK_LEASE_LEN + 1];
    char name[]; /* name\0owner\0 */
};

struct gl_stripe {
    pthread_mutex_t mu;
    struct gl_rec *tab;
};

struct glog {
    int64_t max;
    atomic_llong count;
    unsigned next_sweep; /* the janitor's thread only */
    struct gl_stripe st[GL_STRIPES];
};

static struct gl_stripe *stripe_of(struct glog *g, const char *lease)
{
    int a = lk_hexval(lease[0]), b = lease[0] ? lk_hexval(lease[1]) : 0;
    unsigned v = (unsigned)(a < 0 ? 0 : a) << 4 | (unsigned)(b < 0 ? 0 : b);
    return &g->st[v % GL_STRIPES];
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
        struct gl_rec *r, *tmp;
        HASH_ITER (hh, g->st[i].tab, r, tmp) {
            HASH_DEL(g->st[i].tab, r);
            free(r);
        }
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

/* Under the stripe's mutex. */
static struct gl_rec *find(struct gl_stripe *s, const char *lease)
{
    struct gl_rec *r = NULL;
    HASH_FIND(hh, s->tab, lease, LK_LEASE_LEN, r);
    return r;
}

static void del(struct glog *g, struct gl_stripe *s, struct gl_rec *r)
{
    HASH_DEL(s->tab, r);
    free(r);
    atomic_fetch_sub_explicit(&g->count, 1, memory_order_relaxed);
}

void glog_put(struct glog *g, const char *name, const char *lease, int64_t token, const char *rest,
              size_t rlen, int64_t expires_ms)
{
    if (g == NULL)
        return;
    if (strlen(lease) != LK_LEASE_LEN)
        return;
    /* rest: '<sb> <ttl_ms> <owner>' (acquire.lua's value tail) */
    const char *sp = rlen > 2 ? memchr(rest + 2, ' ', rlen - 2) : NULL;
    const char *owner = sp != NULL ? sp + 1 : rest + rlen;
    size_t ol = (size_t)(rest + rlen - owner), nl = strlen(name);
    struct gl_rec *r = lk_malloc(sizeof(*r) + LK_PAIR_SIZE(nl, ol));
    memset(r, 0, sizeof(*r));
    r->expires_ms = expires_ms;
    r->token = token;
    r->granted_us = lk_now_us();
    r->sb = rlen > 0 && rest[0] == '1';
    r->ttl_ms = rlen > 2 ? strtoll(rest + 2, NULL, 10) : 0;
    memcpy(r->lease, lease, LK_LEASE_LEN + 1);
    lk_pair_put(r->name, name, nl, owner, ol);
    struct gl_stripe *s = stripe_of(g, lease);
    pthread_mutex_lock(&s->mu);
    struct gl_rec *old = find(s, lease);
    if (old != NULL)
        del(g, s, old);
    HASH_ADD(hh, s->tab, lease, LK_LEASE_LEN, r);
    atomic_fetch_add_explicit(&g->count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

void glog_renew(struct glog *g, const char *lease, int64_t ttl_ms, int64_t start_ms)
{
    if (g == NULL)
        return;
    struct gl_stripe *s = stripe_of(g, lease);
    pthread_mutex_lock(&s->mu);
    struct gl_rec *r = find(s, lease);
    if (r != NULL) {
        if (ttl_ms > 0)
            r->ttl_ms = ttl_ms;
        r->expires_ms = start_ms + r->ttl_ms;
    }
    pthread_mutex_unlock(&s->mu);
}

void glog_token(struct glog *g, const char *lease, int64_t token)
{
    if (g == NULL)
        return;
    struct gl_stripe *s = stripe_of(g, lease);
    pthread_mutex_lock(&s->mu);
    struct gl_rec *r = find(s, lease);
    if (r != NULL && token > r->token)
        r->token = token;
    pthread_mutex_unlock(&s->mu);
}

void glog_drop(struct glog *g, const char *lease)
{
    if (g == NULL)
        return;
    struct gl_stripe *s = stripe_of(g, lease);
    pthread_mutex_lock(&s->mu);
    struct gl_rec *r = find(s, lease);
    if (r != NULL)
        del(g, s, r);
    pthread_mutex_unlock(&s->mu);
}

bool glog_take(struct glog *g, const char *lease, int64_t *granted_us)
{
    if (g == NULL || strlen(lease) != LK_LEASE_LEN)
        return false;
    struct gl_stripe *s = stripe_of(g, lease);
    pthread_mutex_lock(&s->mu);
    struct gl_rec *r = find(s, lease);
    if (r != NULL) {
        *granted_us = r->granted_us;
        del(g, s, r);
    }
    pthread_mutex_unlock(&s->mu);
    return r != NULL;
}

size_t glog_drop_name(struct glog *g, const char *name)
{
    size_t n = 0;
    for (int i = 0; g != NULL && i < GL_STRIPES; i++) {
        struct gl_stripe *s = &g->st[i];
        pthread_mutex_lock(&s->mu);
        struct gl_rec *r, *tmp;
        HASH_ITER (hh, s->tab, r, tmp) {
            if (strcmp(r->name, name) == 0) {
                del(g, s, r);
                n++;
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
        struct gl_rec *r, *tmp;
        HASH_ITER (hh, s->tab, r, tmp) {
            if (r->expires_ms <= now) {
                del(g, s, r);
                continue;
            }
            if (k == cap) {
                cap *= 2;
                it = lk_realloc(it, cap * sizeof(*it));
            }
            struct gl_item *x = &it[k++];
            memcpy(x->lease, r->lease, sizeof(x->lease));
            x->token = r->token;
            x->left_ms = r->expires_ms - now;
            x->ttl_ms = r->ttl_ms;
            x->sb = r->sb;
            const char *owner = lk_pair_second(r->name);
            size_t nl = strlen(r->name), ol = strlen(owner);
            x->name = lk_malloc(LK_PAIR_SIZE(nl, ol));
            lk_pair_put(x->name, r->name, nl, owner, ol);
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
    size_t n = 0;
    struct gl_stripe *s = &g->st[g->next_sweep++ % GL_STRIPES];
    pthread_mutex_lock(&s->mu);
    struct gl_rec *r, *tmp;
    HASH_ITER (hh, s->tab, r, tmp) {
        if (r->expires_ms <= now) {
            del(g, s, r);
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}
