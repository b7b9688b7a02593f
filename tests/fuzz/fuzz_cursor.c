/*
 * fuzz_cursor.c - libFuzzer target for listing cursors, what a client sends
 * back on GET /locks?cursor=. The first byte picks:
 *   0  the memory backend, through its ops: names from the bytes are held,
 *      then listed page by page; every held name must come exactly once,
 *      in order, and every other spelling of a cursor it gave out (and the
 *      rest of the input as a cursor) must be LK_BAD_CURSOR;
 *   1  the Redis lock layer's cursor reader on any bytes: what it accepts
 *      writes back (redis_list_cursor) to the same bytes;
 *   2  a position written as a cursor and read back: the same position,
 *      exactly when it is well formed (a reference);
 *   3  '<k>.<inner>' of the cluster and Redlock (backend_cursor_split):
 *      accepted exactly in the one spelling "%zu." writes, k < n.
 * Built by `make fuzz`; seeds in corpus/fuzz_cursor.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/redis_lock.h"
#include "server/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "lockd:"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_cursor: broken promise: %s\n", what);
        abort();
    }
}

/* ---- the memory backend, through its ops (it answers before submit returns) */

#define MAX_NAMES 24
#define MAX_GIVEN 64

struct page {
    enum lk_code code;
    char names[8][LK_NAME_MAX + 1];
    size_t n;
    char next[600];
    int has_next;
};

static void on_page(void *arg, const struct bk_res *r)
{
    struct page *p = arg;
    p->code = r->code;
    p->n = 0;
    for (size_t i = 0; r->code == LK_OK && i < r->nentries && i < 8; i++)
        lk_strlcpy(p->names[p->n++], r->entries[i].name, sizeof(p->names[0]));
    must(r->code != LK_OK || r->nentries <= 8, "a page is at most its count");
    p->has_next = r->next_cursor != NULL;
    if (p->has_next) {
        must(strlen(r->next_cursor) < sizeof(p->next), "cursor bounded");
        lk_strlcpy(p->next, r->next_cursor, sizeof(p->next));
    }
}

static void on_code(void *arg, const struct bk_res *r)
{
    *(enum lk_code *)arg = r->code;
}

static struct page *list_page(const struct backend *b, const char *cursor, size_t count)
{
    static struct page p;
    memset(&p, 0, sizeof(p));
    p.code = LK_AGAIN;
    struct bk_req q = {.op = BK_LIST, .prefix = "", .cursor = cursor, .count = count};
    (void)b->ops->submit(b->state, NULL, &q, on_page, &p);
    must(p.code != LK_AGAIN, "memory answers at once");
    return &p;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void fuzz_memory(const uint8_t *data, size_t size)
{
    static const char chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-";
    if (size < 1)
        return;
    size_t count = data[0] % 5 + 1, i = 1;
    char names[MAX_NAMES][10];
    size_t nn = 0;
    while (i < size && nn < MAX_NAMES) {
        size_t len = data[i++] % 8 + 1;
        if (data[i - 1] == 0xff)
            break; /* the rest is a cursor of the input's own */
        size_t k = 0;
        for (; k < len && i < size; k++)
            names[nn][k] = chars[data[i++] % (sizeof(chars) - 1)];
        names[nn][k] = '\0';
        if (k > 0)
            nn++;
    }
    char *own = malloc(size - (i < size ? i : size) + 1);
    memcpy(own, data + (i < size ? i : size), size - (i < size ? i : size));
    own[size - (i < size ? i : size)] = '\0';

    struct lk_config cfg;
    config_defaults(&cfg);
    struct backend b;
    must(backend_memory_new(&cfg, &b) == LK_OK, "memory opens");
    char want[MAX_NAMES][10];
    size_t nw = 0;
    for (size_t k = 0; k < nn; k++) {
        char lease[LK_LEASE_LEN + 1];
        snprintf(lease, sizeof(lease), "%032zx", k + 1);
        struct bk_req q = {.op = BK_ACQUIRE,
                           .name = names[k],
                           .lease = lease,
                           .owner = "",
                           .mode = BK_EXCLUSIVE,
                           .limit = 1,
                           .ttl_ms = 600000};
        enum lk_code c = LK_AGAIN;
        (void)b.ops->submit(b.state, NULL, &q, on_code, &c);
        must(c == LK_OK || c == LK_LOCKED, "acquire answers");
        if (c == LK_OK)
            memcpy(want[nw++], names[k], sizeof(want[0]));
    }
    qsort(want, nw, sizeof(want[0]), by_name);

    /* The walk: every held name once, in order, whatever the page size. */
    static char given[MAX_GIVEN][600];
    size_t ng = 0, seen = 0;
    char cursor[600] = "";
    for (int pages = 0;; pages++) {
        must(pages <= MAX_NAMES + 1, "the walk ends");
        struct page *p = list_page(&b, cursor, count);
        must(p->code == LK_OK, "a cursor it gave out pages on");
        must(p->n <= count, "page size");
        for (size_t k = 0; k < p->n; k++) {
            must(seen < nw && strcmp(p->names[k], want[seen]) == 0,
                 "each held name once, in order");
            seen++;
        }
        if (!p->has_next)
            break;
        must(p->n > 0 && seen < nw, "a next page only when names are left");
        lk_strlcpy(given[ng++], p->next, sizeof(given[0]));
        lk_strlcpy(cursor, p->next, sizeof(cursor));
    }
    must(seen == nw, "every held name listed");

    /* Other spellings of a cursor it gave out, and the input's own. */
    for (size_t g = 0; g < ng; g++) {
        size_t gl = strlen(given[g]);
        char forged[700];
        for (int v = 0; v < 5; v++) {
            switch (v) {
            case 0: snprintf(forged, sizeof(forged), "0%s", given[g]); break;
            case 1: snprintf(forged, sizeof(forged), "%.*s", (int)gl - 1, given[g]); break;
            case 2: snprintf(forged, sizeof(forged), "%sa", given[g]); break;
            case 3: /* one character of the check changed */
                snprintf(forged, sizeof(forged), "%s", given[g]);
                forged[gl - 1] = forged[gl - 1] == '0' ? '1' : '0';
                break;
            default: /* one character of the name changed */
                snprintf(forged, sizeof(forged), "%s", given[g]);
                forged[0] = forged[0] == 'a' ? 'b' : 'a';
                break;
            }
            must(list_page(&b, forged, count)->code == LK_BAD_CURSOR,
                 "another spelling of a given cursor is refused");
        }
    }
    int is_given = own[0] == '\0';
    for (size_t g = 0; g < ng; g++)
        is_given = is_given || strcmp(own, given[g]) == 0;
    enum lk_code c = list_page(&b, own, count)->code;
    must(is_given ? c == LK_OK : c == LK_BAD_CURSOR, "a cursor it did not give out is refused");
    b.ops->free(b.state);
    config_free(&cfg);
    free(own);
}

/* ---- the Redis lock layer's cursors */

static void where_of(const struct redis_list_pos *p, char *out, size_t cap)
{
    if (p->stop[0] != '\0')
        snprintf(out, cap, "%s:%s:%s", p->scan, p->stop, p->after);
    else
        snprintf(out, cap, "%s", p->scan);
}

static void check_pos(const struct redis_list_pos *p)
{
    size_t sl = strlen(p->scan);
    must(sl >= 1 && sl <= 20 && strspn(p->scan, "0123456789") == sl, "SCAN cursor is digits");
    must((p->stop[0] == '\0') == (p->after[0] == '\0'), "a span end comes with a name");
    must(p->after[0] == '\0' || lk_name_valid(p->after, strlen(p->after)), "resume after a name");
}

/* A decimal of 1..20 digits that fits in 64 bits, at s: its length, or 0. */
static size_t ref_u64(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 20)
        return 0;
    if (n == 20 && strncmp(s, "18446744073709551615", 20) > 0)
        return 0;
    return n;
}

static int ref_where(const char *w)
{
    size_t a = ref_u64(w);
    if (a == 0)
        return 0;
    if (w[a] == '\0')
        return 1;
    if (w[a] != ':')
        return 0;
    size_t b = ref_u64(w + a + 1);
    if (b == 0 || w[a + 1 + b] != ':')
        return 0;
    const char *name = w + a + 1 + b + 1;
    return name[0] != '\0' && lk_name_valid(name, strlen(name));
}

static void fuzz_redis_open(const char *s)
{
    struct redis_list_pos p;
    if (!redis_list_cursor_open(PREFIX, s, &p))
        return;
    check_pos(&p);
    char where[REDIS_CURSOR_MAX], again[REDIS_CURSOR_MAX];
    where_of(&p, where, sizeof(where));
    if (s[0] == '\0') {
        must(strcmp(where, "0") == 0, "no cursor is the start");
        return;
    }
    must(redis_list_cursor(PREFIX, where, again) && strcmp(again, s) == 0,
         "an accepted cursor is the one its position writes");
}

static void fuzz_redis_roundtrip(const char *w)
{
    char c[REDIS_CURSOR_MAX];
    if (!redis_list_cursor(PREFIX, w, c)) {
        must(strcmp(w, "0") == 0 || strlen(w) + 14 > REDIS_CURSOR_MAX, "a cursor for every where");
        return;
    }
    must(strlen(c) < REDIS_CURSOR_MAX && strncmp(c, w, strlen(w)) == 0, "cursor starts with where");
    struct redis_list_pos p;
    int ok = redis_list_cursor_open(PREFIX, c, &p);
    must(ok == ref_where(w), "a written cursor reads back exactly when its where is well formed");
    if (ok) {
        check_pos(&p);
        char back[REDIS_CURSOR_MAX];
        where_of(&p, back, sizeof(back));
        must(strcmp(back, w) == 0, "the same where");
    }
    struct redis_list_pos q;
    must(!redis_list_cursor_open("other:", c, &q) || strcmp(PREFIX, "other:") == 0,
         "another prefix's lockd refuses it");
}

/* ---- '<k>.<inner>' */

static void fuzz_split(const char *s, size_t n)
{
    size_t k = 999;
    const char *inner = NULL;
    size_t d = strspn(s, "0123456789");
    int ref =
        d >= 1 && d <= 9 && s[d] == '.' && !(d > 1 && s[0] == '0') && strtoul(s, NULL, 10) < n;
    int ok = backend_cursor_split(s, n, &k, &inner);
    must(ok == ref, "split accepts exactly '<k>.' in decimal, k < n");
    if (ok) {
        must(k < n && inner == s + d + 1, "k and inner");
        char *again = malloc(strlen(s) + 32);
        sprintf(again, "%zu.%s", k, inner);
        must(strcmp(again, s) == 0, "split and joined again: the same cursor");
        free(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* NUL-terminated as libmicrohttpd hands a query value over */
    char *s = malloc(size);
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 4) {
    case 0: fuzz_memory(data + 1, size - 1); break;
    case 1: fuzz_redis_open(s); break;
    case 2: fuzz_redis_roundtrip(s); break;
    default: fuzz_split(s + (size > 1), size > 1 ? (size_t)(data[1] % 70) : 0); break;
    }
    free(s);
    return 0;
}
