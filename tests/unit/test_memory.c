/*
 * test_memory.c - the memory backend's table from the inside: the janitor's
 * sweep drops what expired and keeps what is held or in a lock-delay, an
 * acquire finds an entry whatever it hashed to, a name whose lease expired
 * is granted again, listing pages through held names in byte order, an
 * entry is sized to its name and owner, the longest of both included, and
 * what the contract adds: fence_floor, refused shared/limit requests, a bad
 * cursor, validity_ms; a free name keeps its index only where it was read.
 * (The behaviour every backend shares is checked by
 * tests/conformance.)
 * Includes backend_memory.c itself, so that the table's size can be read;
 * liblockd.a's copy is then not linked.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "server/backend_memory.c"

#define LEASE "0123456789abcdef0123456789abcdef"
#define LEASE2 "abcdef0123456789abcdef0123456789"

/* A result copied out of its callback: holders point into it, not at the
 * backend's stack (they are valid only during done). */
struct reply {
    struct bk_res r;
    struct bk_holder holder; /* the first holder, when nholders > 0 */
    int calls;
};

static void on_reply(void *arg, const struct bk_res *r)
{
    struct reply *x = arg;
    x->calls++;
    x->r = *r;
    memset(&x->holder, 0, sizeof(x->holder));
    if (r->nholders > 0)
        x->holder = r->holders[0];
    x->r.holders = NULL;
    x->r.entries = NULL;
    x->r.next_cursor = NULL;
}

/* Every memory operation answers before submit returns, exactly once. */
static struct reply submit(struct mem *m, const struct bk_req *req)
{
    struct reply x;
    memset(&x, 0, sizeof(x));
    assert_int_equal(mem_submit(m, NULL, req, on_reply, &x), LK_OK);
    assert_int_equal(x.calls, 1);
    return x;
}

static struct reply acquire_as(struct mem *m, const char *name, const char *lease,
                               const char *owner, int64_t ttl_ms)
{
    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = name,
                       .lease = lease,
                       .owner = owner,
                       .limit = 1,
                       .ttl_ms = ttl_ms};
    return submit(m, &q);
}

static enum lk_code acquire(struct mem *m, const char *name, int64_t ttl_ms)
{
    return acquire_as(m, name, LEASE, "", ttl_ms).r.code;
}

static enum lk_code release(struct mem *m, const char *name, int64_t delay_ms)
{
    struct bk_req q = {.op = BK_RELEASE, .name = name, .lease = LEASE, .delay_ms = delay_ms};
    return submit(m, &q).r.code;
}

/* A memory backend of its own: the table is read directly. */
static struct mem *mem_open(void)
{
    struct backend be;
    assert_int_equal(backend_memory_new(NULL, &be), LK_OK);
    return be.state;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Acquires prefix-<i> for i in [0, n) with ttl_ms, each answered want. */
static void acquire_each(struct mem *m, const char *prefix, int n, int64_t ttl_ms,
                         enum lk_code want)
{
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s-%d", prefix, i);
        assert_int_equal(acquire(m, name, ttl_ms), want);
    }
}

/* 3,000 leases that expire, 10 that do not, and one lock-delay: two sweeps
 * of SWEEP_STEP entries look at every entry and keep exactly the 11. */
static void test_sweep_drops_expired(void **state)
{
    (void)state;
    struct mem *m = mem_open();
    m->keep_free_ms = 0; /* a free entry's index (watching) is not kept here */
    acquire_each(m, "short", 3000, 1, LK_OK);
    acquire_each(m, "long", 10, 60000, LK_OK);
    assert_int_equal(acquire(m, "delayed", 60000), LK_OK);
    assert_int_equal(release(m, "delayed", 60000), LK_OK);
    assert_int_equal(HASH_COUNT(m->locks), 3011);
    assert_true(3000 > SWEEP_STEP && 3011 <= 2 * SWEEP_STEP);

    sleep_ms(20);
    mem_sweep(m);
    assert_int_not_equal(HASH_COUNT(m->locks), 3011); /* one step already dropped some */
    mem_sweep(m);
    assert_int_equal(HASH_COUNT(m->locks), 11);

    acquire_each(m, "long", 10, 60000, LK_LOCKED);
    assert_int_equal(acquire(m, "delayed", 60000), LK_LOCKED); /* the lock-delay */
    assert_int_equal(acquire(m, "short-7", 60000), LK_OK);
    assert_int_equal(HASH_COUNT(m->locks), 12);
    mem_free(m);
}

/* A lease that expired but was never swept: the next acquire of its name
 * finds the entry (hashed once for lookup and insert), drops it and grants
 * the name anew. */
static void test_acquire_reuses_expired(void **state)
{
    (void)state;
    struct mem *m = mem_open();
    char name[32];
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "n-%d", i);
        assert_int_equal(acquire(m, name, i % 2 ? 1 : 60000), LK_OK);
    }
    sleep_ms(20);
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "n-%d", i);
        assert_int_equal(acquire(m, name, 60000), i % 2 ? LK_OK : LK_LOCKED);
    }
    assert_int_equal(HASH_COUNT(m->locks), 200);
    mem_free(m);
}

/* The index of a name outlives its entry only where someone read it: a
 * released name nobody inspected leaves nothing behind (the benchmark's
 * stream of unique names must not fill the table), one that was inspected,
 * held or free, keeps its entry and index for keep_free_ms, and a name read
 * while it had no entry shows a grant and release that came before the next
 * read. The sweep frees kept entries whose time ran out. A name with no
 * entry reads the highest index a freed entry had (free_index): no name's
 * index moves back when its entry goes. */
static int64_t index_of(struct mem *m, const char *name)
{
    struct bk_req q = {.op = BK_INSPECT, .name = name};
    return submit(m, &q).r.index;
}

static void test_index_kept_only_where_read(void **state)
{
    (void)state;
    int64_t before = lk_wall_us();
    struct mem *m = mem_open();
    assert_int_equal(m->keep_free_ms, KEEP_FREE_MS);
    /* a name this process never held reads no lower than its start: an
     * earlier lockd's index for it (µs of its clock) is below that */
    int64_t fresh = index_of(m, "never-held");
    assert_true(fresh >= before);
    acquire_each(m, "unread", 100, 60000, LK_OK);
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "unread-%d", i);
        assert_int_equal(release(m, name, 0), LK_OK);
    }
    assert_int_equal(HASH_COUNT(m->locks), 0);
    assert_int_equal(HASH_COUNT(m->kept), 1); /* never-held's: it was read */
    int64_t unread = m->free_index;           /* what a name with no entry reads now */
    assert_true(unread > fresh);

    assert_int_equal(acquire(m, "read-held", 60000), LK_OK);
    int64_t held = index_of(m, "read-held");
    assert_true(held > 0);
    assert_int_equal(release(m, "read-held", 0), LK_OK);
    int64_t freed = index_of(m, "read-held");
    assert_true(freed > held);
    assert_int_equal(HASH_COUNT(m->kept), 2);

    assert_int_equal(index_of(m, "read-absent"), unread);
    assert_int_equal(acquire(m, "read-absent", 60000), LK_OK);
    assert_int_equal(release(m, "read-absent", 0), LK_OK);
    int64_t absent = index_of(m, "read-absent");
    assert_true(absent > freed);
    assert_int_equal(HASH_COUNT(m->locks), 0);
    assert_int_equal(HASH_COUNT(m->kept), 3);

    m->keep_free_ms = 1; /* new keeps end at once; the sweep frees the old ones when theirs do */
    struct mem_lock *l;
    for (l = m->kept; l != NULL; l = l->hh.next)
        l->keep_until_ms = lk_now_ms() - 1;
    mem_sweep(m);
    assert_int_equal(HASH_COUNT(m->kept), 0);
    assert_int_equal(index_of(m, "read-held"), absent); /* not back to 0 */
    mem_free(m);
}

struct page {
    char names[1000][32];
    size_t n;
    char next[32];
};

static void on_page(void *arg, const struct bk_res *r)
{
    struct page *p = arg;
    assert_int_equal(r->code, LK_OK);
    p->n = r->nentries;
    for (size_t i = 0; i < r->nentries; i++) {
        const struct bk_entry *e = &r->entries[i];
        assert_true(strlen(e->name) < sizeof(p->names[0]));
        strcpy(p->names[i], e->name);
        /* a held lease, never a lock-delay (which has no token nor expiry) */
        assert_true(e->holder.fencing_token > 0);
        assert_true(e->holder.expires_in_ms > 0);
    }
    p->next[0] = '\0';
    if (r->next_cursor != NULL)
        strcpy(p->next, r->next_cursor);
}

static void list(struct mem *m, const char *prefix, const char *cursor, size_t count,
                 struct page *pg)
{
    struct bk_req q = {.op = BK_LIST, .prefix = prefix, .cursor = cursor, .count = count};
    assert_int_equal(mem_submit(m, NULL, &q, on_page, pg), LK_OK);
}

/* 500 held names inserted in a scrambled order, plus names that expired,
 * one in a lock-delay and one outside the prefix: paging with any limit
 * gives the 500 held names with the prefix, in byte order, each once. */
static void test_list_pages(void **state)
{
    (void)state;
    struct mem *m = mem_open();
    char name[32];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "p-%03d", (i * 337) % 500); /* 337 is prime to 500 */
        assert_int_equal(acquire(m, name, 60000), LK_OK);
        snprintf(name, sizeof(name), "p-%03d-gone", i);
        assert_int_equal(acquire(m, name, 1), LK_OK);
    }
    assert_int_equal(acquire(m, "p-delayed", 60000), LK_OK);
    assert_int_equal(release(m, "p-delayed", 60000), LK_OK);
    assert_int_equal(acquire(m, "q-other", 60000), LK_OK);
    sleep_ms(20);
    const size_t limits[] = {1, 7, 499, 500, 1000};
    for (size_t k = 0; k < sizeof(limits) / sizeof(limits[0]); k++) {
        static struct page pg;
        char cursor[64] = "";
        int seen = 0, pages = 0;
        do {
            list(m, "p-", cursor, limits[k], &pg);
            assert_true(pg.n <= limits[k]);
            for (size_t i = 0; i < pg.n; i++) {
                snprintf(name, sizeof(name), "p-%03d", seen++);
                assert_string_equal(pg.names[i], name);
            }
            if (pg.next[0] != '\0') { /* the last name, signed: "<name>~<16 hex>" */
                size_t nl = strlen(pg.names[pg.n - 1]);
                assert_memory_equal(pg.next, pg.names[pg.n - 1], nl);
                assert_int_equal(pg.next[nl], '~');
                assert_int_equal(strlen(pg.next + nl + 1), 16);
            }
            strcpy(cursor, pg.next);
        } while (cursor[0] != '\0' && ++pages < 1000);
        assert_int_equal(seen, 500);
    }
    mem_free(m);
}

/* Grants name to owner, then checks what inspect and a refused acquire
 * answer of it, and that the entry holds no more than its strings need. */
static void grant_and_read(struct mem *m, const char *name, const char *owner)
{
    struct reply r = acquire_as(m, name, LEASE, owner, 60000);
    assert_int_equal(r.r.code, LK_OK);
    int64_t token = r.r.fencing_token;

    struct bk_req q = {.op = BK_INSPECT, .name = name};
    struct reply info = submit(m, &q);
    assert_int_equal(info.r.code, LK_OK);
    assert_int_equal(info.r.nholders, 1); /* held */
    assert_string_equal(info.holder.owner, owner);
    assert_int_equal(info.holder.fencing_token, token);

    r = acquire_as(m, name, "fedcba9876543210fedcba9876543210", "someone-else", 60000);
    assert_int_equal(r.r.code, LK_LOCKED);
    assert_int_equal(r.r.nholders, 1);
    assert_string_equal(r.holder.owner, owner);

    struct mem_lock *l;
    HASH_FIND_STR(m->locks, name, l);
    assert_non_null(l);
    assert_string_equal(l->name, name);
    /* the name inline; an owner (when there is one) in its own block */
    size_t strings = strlen(name) + 1;
    assert_true(malloc_usable_size(l) >= sizeof(*l) + strings);
    assert_true(malloc_usable_size(l) < sizeof(*l) + strings + 32);
    if (owner[0] != '\0')
        assert_true(malloc_usable_size(l->h[0].owner) < strlen(owner) + 1 + 32);
}

/* 100,000 held locks fit in lockd's memory target (bench/RESULTS.md)
 * because an entry is not sized for the longest name and owner: a short
 * name takes under 200 bytes, and the longest name and owner still read
 * back whole, in inspect, in a refusal's holder and in a listing. */
static void test_entry_sized_to_its_strings(void **state)
{
    (void)state;
    struct mem *m = mem_open();
    m->keep_free_ms = 0; /* a released name is dropped at once (no watching here) */
    char longest[LK_NAME_MAX + 1], owner[LK_OWNER_MAX + 1];
    memset(longest, 'n', LK_NAME_MAX);
    longest[LK_NAME_MAX] = '\0';
    memset(owner, 'o', LK_OWNER_MAX);
    owner[LK_OWNER_MAX] = '\0';
    grant_and_read(m, "orders-42", "");
    grant_and_read(m, "orders-43", "host-a");
    grant_and_read(m, longest, owner);
    grant_and_read(m, "x", owner);

    struct mem_lock *l;
    HASH_FIND_STR(m->locks, "orders-42", l);
    /* 216 since watching (issue 26) added the index and how long a free
     * entry keeps it: 16 bytes */
    assert_true(malloc_usable_size(l) < 216 + 8);

    struct page *pg = calloc(1, sizeof(*pg));
    assert_non_null(pg);
    list(m, "orders-", "", 10, pg);
    assert_int_equal(pg->n, 2);
    assert_string_equal(pg->names[0], "orders-42");
    assert_string_equal(pg->names[1], "orders-43");
    free(pg);

    assert_int_equal(release(m, longest, 0), LK_OK);
    HASH_FIND_STR(m->locks, longest, l);
    assert_null(l);
    assert_int_equal(HASH_COUNT(m->locks), 3);
    mem_free(m);
}

/* What the request/result contract adds, as the memory backend answers it:
 * a grant's token exceeds fence_floor (BK_CAP_FLOOR) and later grants count
 * on from it; a shared holder is granted (BK_CAP_SHARED) and a limit other
 * than the one in force is LK_LIMIT_MISMATCH naming it (BK_CAP_LIMIT),
 * changing nothing; a cursor longer than any name is
 * LK_BAD_CURSOR; validity_ms is the ttl granted or renewed. */
static void test_contract_extras(void **state)
{
    (void)state;
    struct backend be;
    assert_int_equal(backend_memory_new(NULL, &be), LK_OK);
    struct mem *m = be.state;
    assert_int_equal(be.ops->caps, BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE |
                                       BK_CAP_INDEX | BK_CAP_GROUP | BK_CAP_MULTI);

    int64_t floor = lk_wall_us() + 1000000000LL; /* ahead of the clock-seeded counter */
    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = "fl",
                       .lease = LEASE,
                       .owner = "",
                       .limit = 1,
                       .ttl_ms = 60000,
                       .fence_floor = floor};
    struct reply r = submit(m, &q);
    assert_int_equal(r.r.code, LK_OK);
    assert_true(r.r.fencing_token > floor);
    assert_int_equal(r.r.ttl_ms, 60000);
    assert_int_equal(r.r.validity_ms, 60000);
    int64_t first = r.r.fencing_token;
    assert_int_equal(release(m, "fl", 0), LK_OK);
    struct reply again = acquire_as(m, "fl", LEASE, "", 60000); /* no floor: still above */
    assert_int_equal(again.r.code, LK_OK);
    assert_true(again.r.fencing_token > first);

    struct bk_req rn = {.op = BK_RENEW, .name = "fl", .lease = LEASE, .ttl_ms = 30000};
    r = submit(m, &rn);
    assert_int_equal(r.r.code, LK_OK);
    assert_int_equal(r.r.fencing_token, again.r.fencing_token);
    assert_int_equal(r.r.validity_ms, 30000);

    struct bk_req sh = {.op = BK_ACQUIRE,
                        .name = "sh",
                        .lease = LEASE,
                        .owner = "",
                        .mode = BK_SHARED,
                        .limit = 1,
                        .ttl_ms = 60000};
    assert_int_equal(submit(m, &sh).r.code, LK_OK);
    sh.mode = BK_EXCLUSIVE;
    sh.limit = 3;
    sh.lease = LEASE2;
    r = submit(m, &sh);
    assert_int_equal(r.r.code, LK_LIMIT_MISMATCH);
    assert_int_equal(r.r.limit, 1);
    assert_int_equal(HASH_COUNT(m->locks), 2);
    assert_int_equal(acquire(m, "sh", 60000),
                     LK_LOCKED); /* an exclusive one waits for the reader */

    char cursor[LK_NAME_MAX + 2];
    memset(cursor, 'z', LK_NAME_MAX + 1);
    cursor[LK_NAME_MAX + 1] = '\0';
    struct bk_req ls = {.op = BK_LIST, .prefix = "", .cursor = cursor, .count = 10};
    assert_int_equal(submit(m, &ls).r.code, LK_BAD_CURSOR);
    cursor[LK_NAME_MAX] = '\0'; /* a name, but not a cursor lockd gave out (issue 27) */
    assert_int_equal(submit(m, &ls).r.code, LK_BAD_CURSOR);
    strcpy(cursor, "sh~0000000000000000"); /* a forged signature */
    assert_int_equal(submit(m, &ls).r.code, LK_BAD_CURSOR);
    cursor[0] = '\0';
    r = submit(m, &ls);
    assert_int_equal(r.r.code, LK_OK);
    assert_int_equal(r.r.nentries, 2);
    mem_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_drops_expired),
        cmocka_unit_test(test_acquire_reuses_expired),
        cmocka_unit_test(test_list_pages),
        cmocka_unit_test(test_index_kept_only_where_read),
        cmocka_unit_test(test_entry_sized_to_its_strings),
        cmocka_unit_test(test_contract_extras),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
