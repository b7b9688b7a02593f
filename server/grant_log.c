/*
 * grant_log.c - the per-node table of live leases this lockd granted
 * (grant_log.h). Keyed by (lease, name): a multi-lock's members share one
 * lease, one record each. Spread over GL_STRIPES stripes by the lease (a
 * multi-lock's members in one stripe) so that the loops' grants and
 * releases rarely meet on one mutex. A stripe keeps its records packed, the way
 * CPython's compact dict does: per size class a dense array of fixed-size
 * records (chunks of GL_CHUNK, no allocation per record, no heap header or
 * rounding), a delete moving the class's last record into the hole; and an
 * open-addressing index of 16-bit references into them (32-bit once a
 * class of the stripe passes 8,190 records; linear probing, backward shift
 * on delete, at most 3/4 full, growing by half). A record is 36 bytes (the
 * lease as 16 raw bytes, token, expiry with limit and flags, ttl), then the
 * name, a NUL and the owner, padded with NULs to its class (a 16-byte name
 * and no owner: 52 bytes). The mutexes are leaves.
 */
#include "server/grant_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

#define GL_STRIPES 128
#define GL_MIN_CAP 8
#define GL_CLASSES 8 /* the low 3 bits of a reference */
#define GL_CHUNK_BITS 5
#define GL_CHUNK (1u << GL_CHUNK_BITS) /* records per chunk (the first grows to it) */

/* The text each class holds: the name (1..255 bytes), a NUL and the owner
 * (at most 255 kept), NUL padded; 512 holds the longest. */
static const uint16_t gl_text[GL_CLASSES] = {16, 24, 32, 48, 64, 96, 160, 512};

/* lim: the limit (1..10000) in the low 14 bits, and two flags; a shared
 * hold with limit 1 is a reader, with more a semaphore's slot
 * (rb_acquire_shared's mode). */
#define GL_LIMIT_MASK 0x3fff
#define GL_SB 0x4000
#define GL_SHARED 0x8000
#define GL_EXP_BITS 48 /* expires_ms, two's complement: ±4,000 years of monotonic ms */

/* 4-byte aligned (strides are multiples of 4): the 64-bit fields are bytes,
 * read and written with memcpy. */
struct gl_rec {
    uint8_t lease[16];
    uint8_t token[8]; /* int64_t */
    uint8_t word[8];  /* uint64_t: expires_ms in the low GL_EXP_BITS, lim above */
    uint32_t ttl_ms;  /* max_ttl_ms is at most 30 days: below 2^32 */
    char text[];      /* gl_text[class] bytes */
};
_Static_assert(sizeof(struct gl_rec) == 36, "a record's head is 36 bytes");

struct gl_class {
    uint8_t **chunk;       /* chunk[i] holds records i * GL_CHUNK.. */
    uint32_t n;            /* records: positions 0..n-1 */
    uint32_t nchunk, ptrs; /* chunks allocated, entries of chunk[] */
    uint32_t first;        /* records chunk[0] has room for (2..GL_CHUNK) */
};

struct gl_stripe {
    pthread_mutex_t mu;
    void *idx; /* cap uint16_t (uint32_t when wide): 0 free, else a reference */
    uint32_t cap, used;
    bool wide;
    struct gl_class cls[GL_CLASSES];
};

struct glog {
    int64_t max;
    atomic_llong count;
    unsigned next_sweep; /* the janitor's thread only */
    struct gl_stripe st[GL_STRIPES];
};

/* A lowercase hex digit's value plus one; 0 for any other byte. A table:
 * this runs twice per acquire+release pair (the engine's plain leases). */
static const uint8_t HEX1[256] = {
    ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

/* 32 lowercase hex digits (what lk_random_hex makes) to 16 bytes; false
 * for anything else: a lease a client sent that lockd never granted. */
static bool lease_raw(const char *lease, uint8_t out[16])
{
    const unsigned char *p = (const unsigned char *)lease;
    for (int i = 0; i < 16; i++) {
        unsigned hi = HEX1[p[2 * i]];
        if (hi == 0)
            return false; /* (the NUL of a short lease stops here) */
        unsigned lo = HEX1[p[2 * i + 1]];
        if (lo == 0)
            return false;
        out[i] = (uint8_t)((hi - 1) << 4 | (lo - 1));
    }
    return p[32] == '\0';
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

/* ---- a record's fields ---- */

static size_t stride(int c)
{
    return sizeof(struct gl_rec) + gl_text[c];
}

static int64_t rec_token(const struct gl_rec *r)
{
    int64_t t;
    memcpy(&t, r->token, sizeof(t));
    return t;
}

static void rec_set_token(struct gl_rec *r, int64_t t)
{
    memcpy(r->token, &t, sizeof(t));
}

static uint64_t rec_word(const struct gl_rec *r)
{
    uint64_t w;
    memcpy(&w, r->word, sizeof(w));
    return w;
}

static int64_t rec_expires(const struct gl_rec *r)
{
    const uint64_t mask = (UINT64_C(1) << GL_EXP_BITS) - 1, sign = UINT64_C(1) << (GL_EXP_BITS - 1);
    uint64_t e = rec_word(r) & mask;
    return (e & sign) ? (int64_t)e - (int64_t)(mask + 1) : (int64_t)e;
}

static unsigned rec_lim(const struct gl_rec *r)
{
    return (unsigned)(rec_word(r) >> GL_EXP_BITS);
}

static void rec_set(struct gl_rec *r, int64_t expires_ms, unsigned lim)
{
    const int64_t bound = INT64_C(1) << (GL_EXP_BITS - 1);
    if (expires_ms >= bound)
        expires_ms = bound - 1;
    if (expires_ms < -bound)
        expires_ms = -bound;
    uint64_t w = ((uint64_t)expires_ms & ((UINT64_C(1) << GL_EXP_BITS) - 1)) | (uint64_t)lim
                                                                                   << GL_EXP_BITS;
    memcpy(r->word, &w, sizeof(w));
}

/* The name (*nl bytes) and the owner (*ol bytes) in class c's text. */
static const char *rec_owner(const struct gl_rec *r, int c, size_t *nl, size_t *ol)
{
    size_t cap = gl_text[c];
    *nl = strnlen(r->text, cap);
    if (*nl == cap) {
        *ol = 0;
        return r->text + cap;
    }
    *ol = strnlen(r->text + *nl + 1, cap - *nl - 1);
    return r->text + *nl + 1;
}

/* ---- a stripe's records: class arrays, and the index over them ---- */

/* A reference: 1 + (position << 3 | class); 0 is a free index slot. */
static uint32_t ref_of(int c, uint32_t pos)
{
    return (pos << 3 | (uint32_t)c) + 1;
}

static struct gl_rec *rec_at(const struct gl_stripe *s, int c, uint32_t pos)
{
    return (struct gl_rec *)(void *)(s->cls[c].chunk[pos >> GL_CHUNK_BITS] +
                                     (pos & (GL_CHUNK - 1)) * stride(c));
}

static struct gl_rec *rec_ref(const struct gl_stripe *s, uint32_t ref)
{
    return rec_at(s, (int)((ref - 1) & 7), (ref - 1) >> 3);
}

static uint32_t idx_get(const struct gl_stripe *s, size_t i)
{
    return s->wide ? ((const uint32_t *)s->idx)[i] : ((const uint16_t *)s->idx)[i];
}

static void idx_set(struct gl_stripe *s, size_t i, uint32_t ref)
{
    if (s->wide)
        ((uint32_t *)s->idx)[i] = ref;
    else
        ((uint16_t *)s->idx)[i] = (uint16_t)ref;
}

/* A record's key: the lease's 16 raw bytes and the name (nl bytes, not
 * NUL-terminated), with its hash. */
struct gl_key {
    uint8_t lease[16];
    const char *name;
    size_t nl;
    uint32_t h;
};

/* The hash of (lease, name): the lease's first 4 bytes, mixed with the
 * name's FNV-1a. Every recorded lease comes from the system's random source
 * (a client cannot choose one, so cannot crowd a table); names a client
 * chooses share a lease only within one multi-lock (at most 64). A lease a
 * client sends is only looked up. */
static uint32_t key_hash(const uint8_t *lease, const char *name, size_t nl)
{
    uint32_t h, f = 2166136261u;
    memcpy(&h, lease, sizeof(h));
    for (size_t i = 0; i < nl; i++)
        f = (f ^ (uint8_t)name[i]) * 16777619u;
    return h ^ f;
}

/* Where hash h lives in an index of cap slots. */
static size_t home_of(uint32_t h, uint32_t cap)
{
    return (size_t)(((uint64_t)h * cap) >> 32);
}

/* The hash of record r of class c. */
static uint32_t rec_hash(const struct gl_rec *r, int c)
{
    return key_hash(r->lease, r->text, strnlen(r->text, gl_text[c]));
}

/* Whether record r of class c has key k. */
static bool rec_is(const struct gl_rec *r, int c, const struct gl_key *k)
{
    return k->nl <= gl_text[c] && memcmp(r->lease, k->lease, 16) == 0 &&
           memcmp(r->text, k->name, k->nl) == 0 && (k->nl == gl_text[c] || r->text[k->nl] == '\0');
}

static size_t next_of(const struct gl_stripe *s, size_t i)
{
    return i + 1 == s->cap ? 0 : i + 1;
}

static struct gl_stripe *stripe_of(struct glog *g, const uint8_t *lease)
{
    return &g->st[lease[4] % GL_STRIPES];
}

/* Under the stripe's mutex: the index slot of k, or of the free slot where
 * it would go (*found false). The index has a free slot (at most 3/4 full). */
static size_t slot_find(const struct gl_stripe *s, const struct gl_key *k, bool *found)
{
    *found = false;
    if (s->cap == 0)
        return 0;
    size_t i = home_of(k->h, s->cap);
    for (uint32_t ref; (ref = idx_get(s, i)) != 0; i = next_of(s, i)) {
        if (rec_is(rec_ref(s, ref), (int)((ref - 1) & 7), k)) {
            *found = true;
            return i;
        }
    }
    return i;
}

/* The index slot that holds ref (a record whose hash is h): it is there. */
static size_t slot_of_ref(const struct gl_stripe *s, uint32_t h, uint32_t ref)
{
    size_t i = home_of(h, s->cap);
    while (idx_get(s, i) != ref)
        i = next_of(s, i);
    return i;
}

/* A new index of cap slots (wide or not) over every record. */
static void idx_rebuild(struct gl_stripe *s, uint32_t cap, bool wide)
{
    free(s->idx);
    s->idx = lk_calloc(cap, wide ? sizeof(uint32_t) : sizeof(uint16_t));
    s->cap = cap;
    s->wide = wide;
    for (int c = 0; c < GL_CLASSES; c++) {
        for (uint32_t pos = 0; pos < s->cls[c].n; pos++) {
            size_t i = home_of(rec_hash(rec_at(s, c, pos), c), cap);
            while (idx_get(s, i) != 0)
                i = next_of(s, i);
            idx_set(s, i, ref_of(c, pos));
        }
    }
}

/* Empties index slot i, shifting back the references its removal would cut
 * off from their home slot. */
static void idx_unlink(struct gl_stripe *s, size_t i)
{
    size_t j = i;
    for (;;) {
        j = next_of(s, j);
        uint32_t ref = idx_get(s, j);
        if (ref == 0)
            break;
        size_t k = home_of(rec_hash(rec_ref(s, ref), (int)((ref - 1) & 7)), s->cap);
        /* j's reference stays when its home lies cyclically in (i, j] */
        bool stays = i <= j ? i < k && k <= j : i < k || k <= j;
        if (!stays) {
            idx_set(s, i, ref);
            i = j;
        }
    }
    idx_set(s, i, 0);
}

/* Room for one more record of class c: its position (the class's n). */
static uint32_t class_push(struct gl_class *a, int c)
{
    uint32_t pos = a->n, ch = pos >> GL_CHUNK_BITS, off = pos & (GL_CHUNK - 1);
    if (a->ptrs == 0) {
        a->ptrs = 4;
        a->chunk = lk_calloc(a->ptrs, sizeof(*a->chunk));
    }
    if (ch == 0 && off == a->first) { /* the first chunk grows: 2, 4, ... GL_CHUNK */
        a->first = a->first ? a->first * 2 : 2;
        a->chunk[0] = lk_realloc(a->chunk[0], a->first * stride(c));
        a->nchunk = 1;
    } else if (ch > 0 && ch == a->nchunk) {
        if (ch == a->ptrs) {
            a->ptrs *= 2;
            a->chunk = lk_realloc(a->chunk, a->ptrs * sizeof(*a->chunk));
        }
        a->chunk[ch] = lk_malloc(GL_CHUNK * stride(c));
        a->nchunk++;
    }
    a->n++;
    return pos;
}

/* After a class's n went down: frees the chunks beyond one spare (all of
 * them once it is empty). */
static void class_trim(struct gl_class *a)
{
    uint32_t keep = a->n == 0 ? 0 : ((a->n + GL_CHUNK - 1) >> GL_CHUNK_BITS) + 1;
    while (a->nchunk > keep)
        free(a->chunk[--a->nchunk]);
    if (a->n == 0) {
        free(a->chunk);
        a->chunk = NULL;
        a->ptrs = a->first = 0;
    }
}

/* Deletes the record index slot i refers to: the class's last record moves
 * into its place (a walk over a class looks at that position again). */
static void rec_del(struct glog *g, struct gl_stripe *s, size_t i)
{
    uint32_t ref = idx_get(s, i), pos = (ref - 1) >> 3;
    int c = (int)((ref - 1) & 7);
    struct gl_class *a = &s->cls[c];
    idx_unlink(s, i);
    uint32_t last = a->n - 1;
    if (pos != last) {
        struct gl_rec *r = rec_at(s, c, pos);
        memcpy(r, rec_at(s, c, last), stride(c));
        idx_set(s, slot_of_ref(s, rec_hash(r, c), ref_of(c, last)), ref_of(c, pos));
    }
    a->n--;
    class_trim(a);
    s->used--;
    atomic_fetch_sub_explicit(&g->count, 1, memory_order_relaxed);
}

/* Deletes the record at position pos of class c. */
static void rec_del_at(struct glog *g, struct gl_stripe *s, int c, uint32_t pos)
{
    rec_del(g, s, slot_of_ref(s, rec_hash(rec_at(s, c, pos), c), ref_of(c, pos)));
}

/* Drops the stripe's expired records; under its mutex. */
static size_t stripe_sweep(struct glog *g, struct gl_stripe *s, int64_t now)
{
    size_t n = 0;
    for (int c = 0; c < GL_CLASSES; c++) {
        for (uint32_t pos = 0; pos < s->cls[c].n;) {
            if (rec_expires(rec_at(s, c, pos)) <= now) {
                rec_del_at(g, s, c, pos); /* pos again: the last record moved in */
                n++;
            } else {
                pos++;
            }
        }
    }
    return n;
}

/* The record of (lease, name), under its stripe's locked mutex (*sp), or
 * NULL (and then no mutex is held). */
static struct gl_rec *lock_rec(struct glog *g, const char *lease, const char *name,
                               struct gl_stripe **sp, size_t *at)
{
    struct gl_key k;
    if (g == NULL || name == NULL || !lease_raw(lease, k.lease))
        return NULL;
    k.name = name;
    k.nl = strlen(name);
    k.h = key_hash(k.lease, name, k.nl);
    struct gl_stripe *s = stripe_of(g, k.lease);
    bool found;
    pthread_mutex_lock(&s->mu);
    size_t i = slot_find(s, &k, &found);
    if (!found) {
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    *sp = s;
    *at = i;
    return rec_ref(s, idx_get(s, i));
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
        struct gl_stripe *s = &g->st[i];
        for (int c = 0; c < GL_CLASSES; c++) {
            s->cls[c].n = 0;
            class_trim(&s->cls[c]);
        }
        free(s->idx);
        pthread_mutex_destroy(&s->mu);
    }
    free(g);
}

bool glog_full(struct glog *g)
{
    if (g == NULL) /* nothing recorded (no restart handling) */
        return false;
    return atomic_load_explicit(&g->count, memory_order_relaxed) >= g->max;
}

bool glog_room(struct glog *g, size_t n)
{
    if (g == NULL)
        return true;
    long long have = atomic_load_explicit(&g->count, memory_order_relaxed);
    return have + (long long)n <= (long long)g->max;
}

size_t glog_count(struct glog *g)
{
    if (g == NULL)
        return 0;
    long long n = atomic_load_explicit(&g->count, memory_order_relaxed);
    return n > 0 ? (size_t)n : 0;
}

/* Records the record r of class c (copied), replacing one of the same
 * lease and name. */
static void rec_add(struct glog *g, int c, const struct gl_rec *r)
{
    struct gl_stripe *s = stripe_of(g, r->lease);
    struct gl_key k;
    memcpy(k.lease, r->lease, 16);
    k.name = r->text;
    k.nl = strnlen(r->text, gl_text[c]);
    k.h = key_hash(k.lease, k.name, k.nl);
    bool found;
    pthread_mutex_lock(&s->mu);
    size_t i = slot_find(s, &k, &found);
    if (found && (int)((idx_get(s, i) - 1) & 7) == c) {
        memcpy(rec_ref(s, idx_get(s, i)), r, stride(c));
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (found)
        rec_del(g, s, i); /* another class: it goes, r comes */
    if (((size_t)s->used + 1) * 4 > (size_t)s->cap * 3)
        idx_rebuild(s, s->cap ? s->cap + s->cap / 2 : GL_MIN_CAP, s->wide);
    uint32_t ref = ref_of(c, s->cls[c].n);
    if (!s->wide && ref > UINT16_MAX)
        idx_rebuild(s, s->cap, true);
    uint32_t pos = class_push(&s->cls[c], c);
    memcpy(rec_at(s, c, pos), r, stride(c));
    idx_set(s, slot_find(s, &k, &found), ref);
    s->used++;
    atomic_fetch_add_explicit(&g->count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
}

void glog_put(struct glog *g, const struct gl_grant *gr)
{
    union {
        struct gl_rec r;
        uint8_t b[sizeof(struct gl_rec) + 512];
    } u;
    if (g == NULL || !lease_raw(gr->lease, u.r.lease))
        return;
    size_t nl = strlen(gr->name), ol = gr->owner != NULL ? gr->owner_len : 0;
    if (nl == 0 || nl > UINT8_MAX)
        return;
    if (ol > UINT8_MAX)
        ol = UINT8_MAX;
    ol = strnlen(gr->owner != NULL ? gr->owner : "", ol); /* a NUL ends it (as snapshot reads it) */
    size_t need = nl + (ol > 0 ? 1 + ol : 0);
    int c = 0;
    while (gl_text[c] < need)
        c++;
    rec_set_token(&u.r, gr->token);
    int limit = gr->limit >= 1 && gr->limit <= GL_LIMIT_MASK ? gr->limit : 1;
    rec_set(&u.r, gr->expires_ms,
            (unsigned)limit | (gr->sb ? GL_SB : 0) | (gr->shared ? GL_SHARED : 0));
    u.r.ttl_ms = (uint32_t)(gr->ttl_ms > 0 && gr->ttl_ms <= UINT32_MAX ? gr->ttl_ms : 0);
    memset(u.r.text, 0, gl_text[c]);
    memcpy(u.r.text, gr->name, nl);
    if (ol > 0)
        memcpy(u.r.text + nl + 1, gr->owner, ol);
    rec_add(g, c, &u.r);
}

void glog_renew(struct glog *g, const char *lease, const char *name, int64_t ttl_ms,
                int64_t start_ms)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, name, &s, &i);
    if (r == NULL)
        return;
    if (ttl_ms > 0 && ttl_ms <= UINT32_MAX)
        r->ttl_ms = (uint32_t)ttl_ms;
    rec_set(r, start_ms + r->ttl_ms, rec_lim(r));
    pthread_mutex_unlock(&s->mu);
}

void glog_token(struct glog *g, const char *lease, const char *name, int64_t token)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, name, &s, &i);
    if (r == NULL)
        return;
    if (token > rec_token(r))
        rec_set_token(r, token);
    pthread_mutex_unlock(&s->mu);
}

void glog_drop(struct glog *g, const char *lease, const char *name)
{
    struct gl_stripe *s;
    size_t i;
    if (lock_rec(g, lease, name, &s, &i) == NULL)
        return;
    rec_del(g, s, i);
    pthread_mutex_unlock(&s->mu);
}

bool glog_take(struct glog *g, const char *lease, const char *name, int64_t *token)
{
    struct gl_stripe *s;
    size_t i;
    struct gl_rec *r = lock_rec(g, lease, name, &s, &i);
    if (r == NULL)
        return false;
    *token = rec_token(r);
    rec_del(g, s, i);
    pthread_mutex_unlock(&s->mu);
    return true;
}

size_t glog_drop_name(struct glog *g, const char *name)
{
    size_t n = 0, nl = strlen(name);
    for (int i = 0; g != NULL && i < GL_STRIPES; i++) {
        struct gl_stripe *s = &g->st[i];
        pthread_mutex_lock(&s->mu);
        for (int c = 0; c < GL_CLASSES; c++) {
            if (gl_text[c] < nl)
                continue;
            for (uint32_t pos = 0; pos < s->cls[c].n;) {
                const struct gl_rec *r = rec_at(s, c, pos);
                if (memcmp(r->text, name, nl) == 0 && (nl == gl_text[c] || r->text[nl] == '\0')) {
                    rec_del_at(g, s, c, pos); /* pos again: the last record moved in */
                    n++;
                } else {
                    pos++;
                }
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
        stripe_sweep(g, s, now);
        for (int c = 0; c < GL_CLASSES; c++) {
            for (uint32_t pos = 0; pos < s->cls[c].n; pos++) {
                const struct gl_rec *r = rec_at(s, c, pos);
                if (k == cap) {
                    cap *= 2;
                    it = lk_realloc(it, cap * sizeof(*it));
                }
                struct gl_item *x = &it[k++];
                unsigned lim = rec_lim(r);
                lease_hex(r->lease, x->lease);
                x->token = rec_token(r);
                x->left_ms = rec_expires(r) - now;
                x->ttl_ms = r->ttl_ms;
                x->sb = (lim & GL_SB) != 0;
                x->shared = (lim & GL_SHARED) != 0;
                x->limit = (int)(lim & GL_LIMIT_MASK);
                x->reader = x->shared && x->limit == 1;
                size_t nl, ol;
                const char *owner = rec_owner(r, c, &nl, &ol);
                x->name = lk_malloc(LK_PAIR_SIZE(nl, ol));
                lk_pair_put(x->name, r->text, nl, owner, ol);
            }
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
        /* the records taken, each a 4-byte class then the record */
        uint8_t *took = NULL;
        size_t len = 0, cap = 0, n = 0;
        pthread_mutex_lock(&s->mu);
        for (int c = 0; c < GL_CLASSES; c++) {
            for (uint32_t pos = 0; pos < s->cls[c].n;) {
                const struct gl_rec *r = rec_at(s, c, pos);
                size_t nl, ol;
                rec_owner(r, c, &nl, &ol);
                if (!pick(arg, r->text, nl)) {
                    pos++;
                    continue;
                }
                if (len + 4 + stride(c) > cap) {
                    cap = cap ? cap * 2 : 4096;
                    took = lk_realloc(took, cap);
                }
                uint32_t cls = (uint32_t)c;
                memcpy(took + len, &cls, 4);
                memcpy(took + len + 4, r, stride(c));
                len += 4 + stride(c);
                n++;
                rec_del_at(from, s, c, pos); /* pos again: the last record moved in */
            }
        }
        pthread_mutex_unlock(&s->mu);
        /* one mutex at a time: each stays a leaf */
        for (size_t off = 0; off < len;) {
            uint32_t c;
            memcpy(&c, took + off, 4);
            rec_add(to, (int)c, (const struct gl_rec *)(const void *)(took + off + 4));
            off += 4 + stride((int)c);
        }
        moved += n;
        free(took);
    }
    return moved;
}
