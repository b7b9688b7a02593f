/*
 * cases.c - what every backend must do, checked through struct backend
 * alone (DESIGN.md §"Fencing tokens", §3 Backends; server/backend.h): each
 * case gets the backend freshly opened; names are the case's own, so cases
 * share one backend process without disturbing each other. Real time, kept
 * short: lease ttls of 100-300 ms where a case waits for an expiry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/redis_slot.h"
#include "tests/conformance/conformance.h"
#include "tests/lib/harness.h"

#define LEASE_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LEASE_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define LEASE_C "cccccccccccccccccccccccccccccccc"
/* Leases one character away from LEASE_A: another's all the same (the
 * whole lease is compared, not a prefix of it nor its tail). */
#define LEASE_A_LAST "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"
#define LEASE_A_FIRST "baaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* Fails unless r is a refusal by exactly one holder: owner, token, a
 * remaining lease in (0, ttl_ms]. */
static void check_held_by(const struct cf_res *r, const char *owner, int64_t token, int64_t ttl_ms)
{
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_STR(r->holders[0].owner, owner);
    CHECK_EQ_INT(r->holders[0].fencing_token, token);
    CHECK(r->holders[0].expires_in_ms > 0 && r->holders[0].expires_in_ms <= ttl_ms);
    CHECK_EQ_INT(r->holders[0].mode, BK_EXCLUSIVE);
    CHECK_EQ_INT(r->delay_ms, 0);
}

/* Waits (bounded) until inspect says nobody holds name and no delay runs. */
static void wait_free(struct cf *c, const char *name, int64_t timeout_ms)
{
    int64_t end = th_now_ms() + timeout_ms;
    for (;;) {
        const struct cf_res *r = cf_inspect(c, name);
        CHECK_EQ_INT(r->code, LK_OK);
        if (r->nholders == 0 && r->delay_ms == 0)
            return;
        if (th_now_ms() >= end)
            th_fail(__FILE__, __LINE__, "'%s' still held or delayed after %lld ms", name,
                    (long long)timeout_ms);
        cf_run_for(c, 10);
    }
}

/* A free name is granted with a token and the ttl asked; a held one is
 * refused with its holder (owner, token, time left), to anyone, the same
 * lease included (reentrancy is the engine's), and the refusal changes
 * nothing. */
static void case_grant_and_refusal(struct cf *c)
{
    const struct cf_res *r = cf_acquire(c, "gr", LEASE_A, "alice", 5000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->ttl_ms, 5000);
    int64_t token = r->fencing_token;

    r = cf_acquire(c, "gr", LEASE_B, "bob", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    check_held_by(r, "alice", token, 5000);
    r = cf_acquire(c, "gr", LEASE_A, "alice", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    check_held_by(r, "alice", token, 5000);

    r = cf_inspect(c, "gr");
    CHECK_EQ_INT(r->code, LK_OK);
    check_held_by(r, "alice", token, 5000);
    CHECK_EQ_INT(cf_release(c, "gr", LEASE_A, 0)->code, LK_OK);

    /* an owner is optional */
    token = cf_grant(c, "gr-anon", LEASE_B, "");
    r = cf_acquire(c, "gr-anon", LEASE_A, "carol", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    check_held_by(r, "", token, 60000);
}

/* A token is strictly greater than every token granted for the name
 * before: release after release. */
static void case_fencing_across_release(struct cf *c)
{
    int64_t last = 0;
    const char *leases[] = {LEASE_A, LEASE_B, LEASE_A, LEASE_C, LEASE_A, LEASE_B};
    for (size_t i = 0; i < sizeof(leases) / sizeof(leases[0]); i++) {
        int64_t t = cf_grant(c, "fr", leases[i], "");
        CHECK(t > last);
        last = t;
        const struct cf_res *r = cf_release(c, "fr", leases[i], 0);
        CHECK_EQ_INT(r->code, LK_OK);
        CHECK_EQ_INT(r->fencing_token, t); /* the token released */
    }
}

/* ... and across expiry: a lease left to expire frees the name, and the
 * next grant counts on; the expired lease can neither renew nor release. */
static void case_fencing_across_expiry(struct cf *c)
{
    int64_t last = 0;
    for (int i = 0; i < 3; i++) {
        const struct cf_res *r = cf_acquire(c, "fe", i % 2 ? LEASE_A : LEASE_B, "", 100);
        CHECK_EQ_INT(r->code, LK_OK);
        CHECK(r->fencing_token > last);
        last = r->fencing_token;
        wait_free(c, "fe", 2000);
    }
    CHECK_EQ_INT(cf_renew(c, "fe", LEASE_B, 5000)->code, LK_NOT_HELD);
    CHECK_EQ_INT(cf_release(c, "fe", LEASE_B, 0)->code, LK_NOT_HELD);
    int64_t t = cf_grant(c, "fe", LEASE_C, "");
    CHECK(t > last);
}

/* Renew keeps the token and gives the lease the ttl asked from now (past
 * its first ttl); ttl 0 means the ttl it was last given. It answers the
 * lease's own entry (owner, mode: PUT /locks answers them). */
static void case_renew_keeps_token(struct cf *c)
{
    const struct cf_res *r = cf_acquire(c, "rn", LEASE_A, "alice", 300);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t token = r->fencing_token;

    r = cf_renew(c, "rn", LEASE_A, 5000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, token);
    CHECK_EQ_INT(r->ttl_ms, 5000);
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_STR(r->holders[0].owner, "alice");
    CHECK_EQ_INT(r->holders[0].mode, BK_EXCLUSIVE);
    r = cf_inspect(c, "rn");
    check_held_by(r, "alice", token, 5000);
    CHECK(r->holders[0].expires_in_ms > 4000);

    th_sleep_ms(400); /* past the first ttl: still held */
    r = cf_renew(c, "rn", LEASE_A, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, token);
    CHECK_EQ_INT(r->ttl_ms, 5000); /* the ttl last given */
    r = cf_inspect(c, "rn");
    check_held_by(r, "alice", token, 5000);
    CHECK(r->holders[0].expires_in_ms > 4000);

    r = cf_renew(c, "rn", LEASE_A, 200); /* shorter is allowed too */
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->ttl_ms, 200);
    CHECK_EQ_INT(cf_inspect(c, "rn")->holders[0].fencing_token, token);
    wait_free(c, "rn", 2000);
}

/* A grant or a renewal holds for validity_ms: above 0 and at most its ttl
 * (a quorum backend takes off the round trip and the clocks' drift). One
 * whose round trip used its ttl up is no grant: a 2 ms lease is granted
 * good for at most 2 ms, or refused (LK_LOCKED), and a renewal to 2 ms is
 * answered so, or LK_BACKEND_DOWN (in doubt). */
static void check_validity(const struct cf_res *r, const char *what, int64_t ttl_ms,
                           enum lk_code refused)
{
    printf("# %s for %lld ms: %s, validity %lld ms\n", what, (long long)ttl_ms,
           lk_code_name(r->code), (long long)r->validity_ms);
    if (r->code == LK_OK)
        CHECK(r->validity_ms > 0 && r->validity_ms <= ttl_ms);
    else
        CHECK_EQ_INT(r->code, refused);
}

static void case_validity(struct cf *c)
{
    const struct cf_res *r = cf_acquire(c, "va", LEASE_A, "", 5000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(r->validity_ms > 0 && r->validity_ms <= 5000);
    r = cf_renew(c, "va", LEASE_A, 4000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(r->validity_ms > 0 && r->validity_ms <= 4000);
    check_validity(cf_renew(c, "va", LEASE_A, 2), "renewed", 2, LK_BACKEND_DOWN);
    check_validity(cf_acquire(c, "va-short", LEASE_B, "", 2), "acquired", 2, LK_LOCKED);
}

/* Renew and release compare the lease: another lease gets
 * LK_HELD_BY_OTHER (with the holder) while someone holds the name and
 * LK_NOT_HELD when nobody does, and never renews or releases. */
static void case_owner_checks(struct cf *c)
{
    CHECK_EQ_INT(cf_renew(c, "oc", LEASE_A, 5000)->code, LK_NOT_HELD); /* never held */
    CHECK_EQ_INT(cf_release(c, "oc", LEASE_A, 0)->code, LK_NOT_HELD);

    const struct cf_res *r = cf_acquire(c, "oc", LEASE_A, "alice", 2000);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t token = r->fencing_token;

    r = cf_renew(c, "oc", LEASE_B, 60000);
    CHECK_EQ_INT(r->code, LK_HELD_BY_OTHER);
    check_held_by(r, "alice", token, 2000);
    r = cf_release(c, "oc", LEASE_B, 0);
    CHECK_EQ_INT(r->code, LK_HELD_BY_OTHER);
    check_held_by(r, "alice", token, 2000);
    r = cf_release(c, "oc", LEASE_B, 60000); /* nor a lock-delay */
    CHECK_EQ_INT(r->code, LK_HELD_BY_OTHER);
    const char *near[] = {LEASE_A_LAST, LEASE_A_FIRST};
    for (int i = 0; i < 2; i++) {
        r = cf_renew(c, "oc", near[i], 60000);
        CHECK_EQ_INT(r->code, LK_HELD_BY_OTHER);
        check_held_by(r, "alice", token, 2000);
        CHECK_EQ_INT(cf_release(c, "oc", near[i], 0)->code, LK_HELD_BY_OTHER);
    }

    r = cf_inspect(c, "oc"); /* still alice's, not extended to 60 s */
    CHECK_EQ_INT(r->code, LK_OK);
    check_held_by(r, "alice", token, 2000);
    r = cf_acquire(c, "oc", LEASE_B, "bob", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);

    r = cf_release(c, "oc", LEASE_A, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, token);
    CHECK_EQ_INT(cf_renew(c, "oc", LEASE_A, 5000)->code, LK_NOT_HELD);
    CHECK_EQ_INT(cf_release(c, "oc", LEASE_A, 0)->code, LK_NOT_HELD);
    CHECK_EQ_INT(cf_release(c, "oc", LEASE_B, 0)->code, LK_NOT_HELD);
    r = cf_inspect(c, "oc");
    CHECK_EQ_INT(r->nholders, 0);
    CHECK_EQ_INT(r->delay_ms, 0);

    /* a newer holder: the old lease is another's */
    int64_t t2 = cf_grant(c, "oc", LEASE_B, "bob");
    CHECK(t2 > token);
    r = cf_renew(c, "oc", LEASE_A, 5000);
    CHECK_EQ_INT(r->code, LK_HELD_BY_OTHER);
    check_held_by(r, "bob", t2, 60000);
    CHECK_EQ_INT(cf_release(c, "oc", LEASE_A, 0)->code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(cf_inspect(c, "oc")->holders[0].fencing_token, t2);
}

/* A release with delay_ms keeps the name unacquirable, by anyone, for that
 * long: refusals and inspect say nobody holds it and how long the delay
 * runs (delay_ms); then it is granted, with a greater token. Owner checks
 * see no holder meanwhile. */
static void case_lock_delay(struct cf *c)
{
    const int64_t delay = 400;
    int64_t token = cf_grant(c, "ld", LEASE_A, "alice");
    int64_t t0 = th_now_ms();
    const struct cf_res *r = cf_release(c, "ld", LEASE_A, delay);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, token);

    r = cf_acquire(c, "ld", LEASE_B, "bob", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK_EQ_INT(r->nholders, 0);
    CHECK(r->delay_ms > 0 && r->delay_ms <= delay);
    r = cf_acquire(c, "ld", LEASE_A, "alice", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK_EQ_INT(r->nholders, 0);
    r = cf_inspect(c, "ld");
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->nholders, 0);
    CHECK(r->delay_ms > 0 && r->delay_ms <= delay);
    CHECK_EQ_INT(cf_renew(c, "ld", LEASE_A, 5000)->code, LK_NOT_HELD);
    CHECK_EQ_INT(cf_release(c, "ld", LEASE_A, 0)->code, LK_NOT_HELD);

    int tries = 0;
    int64_t t = cf_acquire_within(c, "ld", LEASE_B, 3000, LK_LOCKED, &tries);
    int64_t took = th_now_ms() - t0;
    printf("# lock-delay %lld ms: granted after %lld ms (%d tries)\n", (long long)delay,
           (long long)took, tries);
    CHECK(took >= delay - 5); /* a clock tick of slack, never a grant inside the delay */
    CHECK(took < delay + 1500);
    CHECK(t > token);

    /* a release without a delay frees the name at once */
    CHECK_EQ_INT(cf_release(c, "ld", LEASE_B, 0)->code, LK_OK);
    CHECK(cf_grant(c, "ld", LEASE_C, "") > t);
}

/* The watchdog's batch: a result per item (held and renewed, held by
 * another, held by nobody), in the request's own items; only the items
 * the lease holds are extended. */
static void case_renew_many(struct cf *c)
{
    const struct cf_res *r = cf_acquire(c, "rm-mine", LEASE_A, "", 1000);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t t_mine = r->fencing_token;
    r = cf_acquire(c, "rm-mine2", LEASE_A, "", 1000);
    CHECK_EQ_INT(r->code, LK_OK);
    r = cf_acquire(c, "rm-other", LEASE_B, "bob", 1000);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t t_other = r->fencing_token;

    struct bk_renew_item items[] = {
        {"rm-mine", LEASE_A, 8000, LK_INTERNAL},  {"rm-other", LEASE_A, 8000, LK_INTERNAL},
        {"rm-free", LEASE_A, 8000, LK_INTERNAL},  {"rm-mine2", LEASE_A, 8000, LK_INTERNAL},
        {"rm-other", LEASE_C, 8000, LK_INTERNAL},
    };
    const size_t n = sizeof(items) / sizeof(items[0]);
    const enum lk_code want[] = {LK_OK, LK_HELD_BY_OTHER, LK_NOT_HELD, LK_OK, LK_HELD_BY_OTHER};
    struct bk_req q = {.op = BK_RENEW_MANY, .items = items, .nitems = n};
    static struct cf_res res;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK(res.items == items);
    CHECK_EQ_INT(res.nitems, n);
    for (size_t i = 0; i < n; i++)
        if (items[i].result != want[i])
            th_fail(__FILE__, __LINE__, "item %zu (%s): %s, want %s", i, items[i].name,
                    lk_code_name(items[i].result), lk_code_name(want[i]));

    r = cf_inspect(c, "rm-mine"); /* renewed to 8 s, same token */
    check_held_by(r, "", t_mine, 8000);
    CHECK(r->holders[0].expires_in_ms > 1000);
    CHECK(cf_inspect(c, "rm-mine2")->holders[0].expires_in_ms > 1000);
    r = cf_inspect(c, "rm-other"); /* bob's, not extended */
    check_held_by(r, "bob", t_other, 1000);
    r = cf_inspect(c, "rm-free"); /* a renewal never takes a free name */
    CHECK_EQ_INT(r->nholders, 0);

    struct bk_req empty = {.op = BK_RENEW_MANY, .items = items, .nitems = 0};
    cf_submit(c, &empty, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK_EQ_INT(res.nitems, 0);
}

/* ---- listing ---- */

#define LIST_N 25

struct listed {
    int count[LIST_N];
    int pages;
};

/* Pages through prefix with count per page until next_cursor is NULL;
 * counts each name "ls-NN"; fails on any other name, on an entry whose
 * holder is not the one granted, or past 1000 pages. */
static void list_all(struct cf *c, const char *prefix, size_t count, const int64_t *tokens,
                     struct listed *out)
{
    static struct cf_res res;
    char cursor[1024] = "";
    memset(out, 0, sizeof(*out));
    for (;;) {
        struct bk_req q = {.op = BK_LIST, .prefix = prefix, .cursor = cursor, .count = count};
        cf_submit(c, &q, &res);
        CHECK_EQ_INT(res.code, LK_OK);
        out->pages++;
        for (size_t i = 0; i < res.nentries; i++) {
            const struct cf_entry *e = &res.entries[i];
            int k = -1;
            if (strncmp(e->name, "ls-", 3) == 0 && strlen(e->name) == 5)
                k = atoi(e->name + 3);
            if (k < 0 || k >= LIST_N)
                th_fail(__FILE__, __LINE__, "listed '%s' under prefix '%s'", e->name, prefix);
            CHECK(strncmp(e->name, prefix, strlen(prefix)) == 0);
            out->count[k]++;
            CHECK_EQ_INT(e->holder.fencing_token, tokens[k]);
            CHECK_STR(e->holder.owner, k % 2 ? "odd" : "even");
            CHECK(e->holder.expires_in_ms > 0 && e->holder.expires_in_ms <= 60000);
        }
        if (!res.has_next)
            return;
        CHECK(res.next_cursor[0] != '\0');
        CHECK(out->pages < 1000);
        strcpy(cursor, res.next_cursor);
    }
}

/* Held names with a prefix, page by page through the cursor: every held
 * name exactly once, whatever the page size; never a name outside the
 * prefix, an expired, released or lock-delayed one. */
static void case_list_pages(struct cf *c)
{
    int64_t tokens[LIST_N];
    char name[32];
    for (int i = 0; i < LIST_N; i++) {
        snprintf(name, sizeof(name), "ls-%02d", (i * 7) % LIST_N); /* out of order */
        tokens[(i * 7) % LIST_N] =
            cf_grant(c, name, LEASE_A, (i * 7) % LIST_N % 2 ? "odd" : "even");
    }
    CHECK_EQ_INT(cf_acquire(c, "ls-gone", LEASE_A, "", 100)->code, LK_OK);
    cf_grant(c, "ls-released", LEASE_A, "");
    CHECK_EQ_INT(cf_release(c, "ls-released", LEASE_A, 0)->code, LK_OK);
    cf_grant(c, "ls-delayed", LEASE_A, "");
    CHECK_EQ_INT(cf_release(c, "ls-delayed", LEASE_A, 60000)->code, LK_OK);
    cf_grant(c, "lt-00", LEASE_A, ""); /* outside the prefix, sorts right after it */
    cf_grant(c, "l-00", LEASE_A, "");
    wait_free(c, "ls-gone", 2000);

    const size_t counts[] = {1, 2, 7, LIST_N, 100};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        struct listed l;
        list_all(c, "ls-", counts[k], tokens, &l);
        for (int i = 0; i < LIST_N; i++)
            if (l.count[i] != 1)
                th_fail(__FILE__, __LINE__, "count %zu: 'ls-%02d' listed %d times", counts[k], i,
                        l.count[i]);
        printf("# count %zu: %d pages\n", counts[k], l.pages);
    }
    struct listed l;
    list_all(c, "ls-1", 3, tokens, &l); /* a longer prefix: ls-10 .. ls-19 */
    for (int i = 0; i < LIST_N; i++)
        CHECK_EQ_INT(l.count[i], i >= 10 && i <= 19 ? 1 : 0);
    list_all(c, "ls-none-", 10, tokens, &l);
    for (int i = 0; i < LIST_N; i++)
        CHECK_EQ_INT(l.count[i], 0);
}

/* A cursor the backend did not give out: LK_BAD_CURSOR, not an empty page
 * nor LK_BACKEND_DOWN. (No name is this long, and no SCAN cursor reads so.) */
static void case_list_bad_cursor(struct cf *c)
{
    cf_grant(c, "bc-0", LEASE_A, "");
    char bad[LK_NAME_MAX + 46];
    memset(bad, 'z', sizeof(bad) - 1);
    bad[sizeof(bad) - 1] = '\0';
    static struct cf_res res;
    struct bk_req q = {.op = BK_LIST, .prefix = "bc-", .cursor = bad, .count = 10};
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_BAD_CURSOR);
    CHECK_EQ_INT(res.nentries, 0);
    q.cursor = ""; /* and the backend pages on from the start after it */
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    /* Another spelling of a cursor it gave out is not one it gave out
     * (fuzz_cursor: redlock's strtol took "+0.", " 0." and "00.", the
     * cluster's atoi "00."). */
    cf_grant(c, "bc-1", LEASE_A, "");
    q.count = 1;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK(res.has_next && res.next_cursor[0] != '\0');
    char given[1100];
    snprintf(given, sizeof(given), "%s", res.next_cursor);
    static const char *const before[] = {"0", "+", " ", "-"};
    for (size_t i = 0; i < sizeof(before) / sizeof(before[0]); i++) {
        char forged[1200];
        snprintf(forged, sizeof(forged), "%s%s", before[i], given);
        q.cursor = forged;
        cf_submit(c, &q, &res);
        if (res.code != LK_BAD_CURSOR)
            th_fail(__FILE__, __LINE__, "cursor '%s' (given '%s'): code %d", forged, given,
                    (int)res.code);
    }
    q.cursor = given; /* the one it gave out still pages on */
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
}

/* Inspect: a held name's holder (owner, token, time left, session-bound as
 * acquired); a free one, never held or released, has no holder. */
static void case_inspect(struct cf *c)
{
    const struct cf_res *r = cf_inspect(c, "in-never");
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->nholders, 0);
    CHECK_EQ_INT(r->delay_ms, 0);

    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = "in-sb",
                       .lease = LEASE_A,
                       .owner = "svc",
                       .mode = BK_EXCLUSIVE,
                       .limit = 1,
                       .ttl_ms = 3000,
                       .session_bound = true};
    static struct cf_res res;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    int64_t token = res.fencing_token;
    r = cf_inspect(c, "in-sb");
    CHECK_EQ_INT(r->code, LK_OK);
    check_held_by(r, "svc", token, 3000);
    CHECK(r->holders[0].session_bound);

    int64_t t2 = cf_grant(c, "in-plain", LEASE_B, "cli");
    r = cf_inspect(c, "in-plain");
    check_held_by(r, "cli", t2, 60000);
    CHECK(r->holders[0].expires_in_ms > 59000);
    CHECK(!r->holders[0].session_bound);

    CHECK_EQ_INT(cf_release(c, "in-sb", LEASE_A, 0)->code, LK_OK);
    r = cf_inspect(c, "in-sb");
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->nholders, 0);
    CHECK_EQ_INT(r->delay_ms, 0);
}

/* Ping answers LK_OK on a backend that takes writes; nodes() lists at
 * least one node, up. */
static void case_ping_and_nodes(struct cf *c)
{
    static struct cf_res res;
    struct bk_req q = {.op = BK_PING};
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    struct bk_node nodes[8];
    size_t n = c->be.ops->nodes(c->be.state, nodes, 8);
    CHECK(n >= 1 && n <= 8);
    for (size_t i = 0; i < n; i++) {
        CHECK(nodes[i].addr[0] != '\0');
        CHECK(nodes[i].up);
    }
}

/* BK_CAP_FLOOR: a grant's token exceeds the request's fence_floor (Redlock
 * writes a majority's highest counter back this way), and the name's later
 * grants count on from it; a floor below the counter lowers nothing. */
static void case_fence_floor(struct cf *c)
{
    int64_t t0 = cf_grant(c, "ff", LEASE_A, "");
    CHECK_EQ_INT(cf_release(c, "ff", LEASE_A, 0)->code, LK_OK);
    int64_t floor = t0 + 1000000000LL; /* ~17 minutes of microseconds ahead */
    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = "ff",
                       .lease = LEASE_B,
                       .owner = "",
                       .mode = BK_EXCLUSIVE,
                       .limit = 1,
                       .ttl_ms = 5000,
                       .fence_floor = floor};
    static struct cf_res res;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK(res.fencing_token > floor);
    int64_t t1 = res.fencing_token;
    CHECK_EQ_INT(cf_release(c, "ff", LEASE_B, 0)->code, LK_OK);

    int64_t t2 = cf_grant(c, "ff", LEASE_A, ""); /* no floor: still past it */
    CHECK(t2 > t1);
    CHECK_EQ_INT(cf_release(c, "ff", LEASE_A, 0)->code, LK_OK);
    q.fence_floor = 1;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK(res.fencing_token > t2);
    /* a refused acquire with a floor changes nothing */
    q.lease = LEASE_C;
    q.fence_floor = res.fencing_token + 1000000000LL;
    int64_t held = res.fencing_token;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED);
    CHECK_EQ_INT(res.nholders, 1);
    CHECK_EQ_INT(res.holders[0].fencing_token, held);
}

/* ---- faults ---- */

enum { DN_ACQUIRE, DN_RENEW, DN_RELEASE, DN_INSPECT, DN_LIST, DN_RENEW_MANY, DN_PING, DN_N };

/* A backend that stops answering (its process stopped, connections left
 * open): every operation, all in flight together, answers LK_BACKEND_DOWN
 * within about backend_timeout_ms, never a grant, and done runs once even
 * when the late replies come; after it resumes it answers again and what it
 * held is still held. (What was in flight may still be carried out when it
 * resumes: a release or a grant, the latter until its ttl. Only the answer
 * is checked.) */
static void case_backend_down(struct cf *c)
{
    int64_t token = cf_grant(c, "dn", LEASE_A, "alice");
    cf_grant(c, "dn-rel", LEASE_A, "alice");
    c->def->pause();
    struct bk_renew_item items[] = {{"dn", LEASE_A, 60000, LK_INTERNAL},
                                    {"dn-x", LEASE_A, 60000, LK_INTERNAL}};
    const struct bk_req reqs[DN_N] = {
        [DN_ACQUIRE] = {.op = BK_ACQUIRE,
                        .name = "dn-new",
                        .lease = LEASE_B,
                        .owner = "",
                        .mode = BK_EXCLUSIVE,
                        .limit = 1,
                        .ttl_ms = 5000},
        [DN_RENEW] = {.op = BK_RENEW, .name = "dn", .lease = LEASE_A, .ttl_ms = 5000},
        [DN_RELEASE] = {.op = BK_RELEASE, .name = "dn-rel", .lease = LEASE_A},
        [DN_INSPECT] = {.op = BK_INSPECT, .name = "dn"},
        [DN_LIST] = {.op = BK_LIST, .prefix = "dn", .cursor = "", .count = 10},
        [DN_RENEW_MANY] = {.op = BK_RENEW_MANY, .items = items, .nitems = 2},
        [DN_PING] = {.op = BK_PING},
    };
    static struct cf_res res[DN_N];
    struct cf_res *all[DN_N];
    for (int i = 0; i < DN_N; i++) {
        all[i] = &res[i];
        cf_submit_async(c, &reqs[i], &res[i], NULL);
    }
    CHECK(cf_settle(c, all, DN_N, CF_TIMEOUT_MS * 4 + 2000));
    for (int i = 0; i < DN_N; i++) {
        /* renew_many answers per item; the batch as a whole may say either */
        bool ok = res[i].code == LK_BACKEND_DOWN || (i == DN_RENEW_MANY && res[i].code == LK_OK);
        if (!ok)
            th_fail(__FILE__, __LINE__, "op %d while down: %s, want LK_BACKEND_DOWN", i,
                    lk_code_name(res[i].code));
        CHECK(res[i].took_ms < CF_TIMEOUT_MS * 3 + 500);
        printf("# op %d: %s after %lld ms\n", i, lk_code_name(res[i].code),
               (long long)res[i].took_ms);
    }
    CHECK(res[DN_RENEW_MANY].items == items);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(items[i].result, LK_BACKEND_DOWN);
    const struct cf_res *r = cf_acquire(c, "dn-new2", LEASE_B, "", 5000); /* still down */
    CHECK_EQ_INT(r->code, LK_BACKEND_DOWN);

    c->def->resume();
    cf_run_for(c, 300); /* the late replies to the requests above: no second done */
    for (int i = 0; i < DN_N; i++)
        CHECK_EQ_INT(res[i].calls, 1);

    int tries = 0;
    cf_acquire_within(c, "dn-after", LEASE_B, 5000, LK_BACKEND_DOWN, &tries);
    printf("# answered again after resume: %d tries\n", tries);
    r = cf_inspect(c, "dn"); /* held through the pause */
    CHECK_EQ_INT(r->code, LK_OK);
    check_held_by(r, "alice", token, 60000);
    r = cf_renew(c, "dn", LEASE_A, 60000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, token);
    CHECK_EQ_INT(cf_release(c, "dn", LEASE_A, 0)->code, LK_OK);
    static struct cf_res ping;
    struct bk_req q = {.op = BK_PING};
    cf_submit(c, &q, &ping);
    CHECK_EQ_INT(ping.code, LK_OK);
}

/* The backend's process dies (kill -9) and comes back on the same address
 * with the same persistence: meanwhile nothing is granted (a Redis-based
 * backend says LK_BACKEND_RECOVERING while it re-asserts and through its
 * grace, issue 25); afterwards it answers again, what was held is still
 * held, and tokens still increase. */
static void case_restart(struct cf *c)
{
    int64_t last = 0;
    for (int i = 0; i < 3; i++) {
        int64_t t = cf_grant(c, "rs", LEASE_A, "");
        CHECK(t > last);
        last = t;
        CHECK_EQ_INT(cf_release(c, "rs", LEASE_A, 0)->code, LK_OK);
    }
    int64_t held = cf_grant(c, "rs-held", LEASE_B, "bob");

    c->def->restart();
    int tries = 0;
    int64_t t = cf_acquire_within(c, "rs", LEASE_A, 5000, LK_BACKEND_DOWN, &tries);
    printf("# answered again after restart: %d tries\n", tries);
    CHECK(t > last);
    CHECK_EQ_INT(cf_release(c, "rs", LEASE_A, 0)->code, LK_OK);
    CHECK(cf_grant(c, "rs", LEASE_C, "") > t);

    /* On a cluster "rs-held" may live on another primary than "rs", one
     * still re-asserting or in its grace: recovering until it ends, then
     * locked. The loop runs meanwhile (a refusal is answered without it, and
     * the re-assertion's reply is read by it), as lockd's loops always do. */
    const struct cf_res *r = cf_acquire(c, "rs-held", LEASE_C, "", 5000);
    for (int64_t end = th_now_ms() + 5000; r->code == LK_BACKEND_RECOVERING && th_now_ms() < end;
         r = cf_acquire(c, "rs-held", LEASE_C, "", 5000))
        cf_run_for(c, 50);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    check_held_by(r, "bob", held, 60000);
    r = cf_release(c, "rs-held", LEASE_B, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(cf_grant(c, "rs-held", LEASE_C, "") > held);
}

/* ---- shared mode and semaphores (BK_CAP_SHARED, BK_CAP_LIMIT) ---- */

#define LEASE_D "dddddddddddddddddddddddddddddddd"

static const struct cf_res *shared(struct cf *c, const char *name, const char *lease,
                                   int64_t ttl_ms)
{
    return cf_acquire_as(c, name, lease, "", ttl_ms, BK_SHARED, 1, false);
}

/* Readers hold together, each with its own lease and a token above every
 * one before; an exclusive acquire is refused while any reader holds, with
 * a shared holder; inspect lists them newest first; the name is free when
 * the last reader leaves, and then a reader is refused by a writer. */
static void case_shared_readers(struct cf *c)
{
    const char *leases[3] = {LEASE_A, LEASE_B, LEASE_C};
    int64_t last = 0;
    for (int i = 0; i < 3; i++) {
        const struct cf_res *r = shared(c, "rd", leases[i], 5000);
        CHECK_EQ_INT(r->code, LK_OK);
        CHECK(!r->room); /* (a semaphore's only) */
        CHECK(r->fencing_token > last);
        last = r->fencing_token;
    }
    const struct cf_res *r = cf_acquire(c, "rd", LEASE_D, "writer", 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].mode, BK_SHARED);
    r = cf_inspect(c, "rd");
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->nholders, 3);
    CHECK_EQ_INT(r->holders[0].fencing_token, last);
    CHECK_EQ_INT(r->holders[0].mode, BK_SHARED);
    CHECK_EQ_INT(r->limit, 1);
    /* a renewal keeps a reader's token, and answers its entry (shared) */
    r = cf_renew(c, "rd", LEASE_B, 8000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->ttl_ms, 8000);
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].mode, BK_SHARED);
    /* a lone reader too ('t' on the Redis family); a lease one character
     * off renews and releases nothing of it */
    r = shared(c, "rd-one", LEASE_A, 5000);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t t_one = r->fencing_token;
    r = cf_renew(c, "rd-one", LEASE_A, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].mode, BK_SHARED);
    CHECK_EQ_INT(cf_renew(c, "rd-one", LEASE_A_LAST, 60000)->code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(cf_release(c, "rd-one", LEASE_A_LAST, 0)->code, LK_HELD_BY_OTHER);
    r = cf_inspect(c, "rd-one");
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].fencing_token, t_one);
    CHECK(r->holders[0].expires_in_ms <= 5000);
    CHECK_EQ_INT(cf_release(c, "rd-one", LEASE_A, 0)->code, LK_OK);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(cf_acquire(c, "rd", LEASE_D, "writer", 5000)->code, LK_LOCKED);
        CHECK_EQ_INT(cf_release(c, "rd", leases[i], 0)->code, LK_OK);
    }
    r = cf_acquire(c, "rd", LEASE_D, "writer", 5000);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(r->fencing_token > last);
    r = shared(c, "rd", LEASE_A, 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    check_held_by(r, "writer", r->holders[0].fencing_token, 5000);
}

/* A reader's slot frees at its own expiry; a wrong lease releases or
 * renews nobody's slot; the last reader's release may leave a lock-delay. */
static void case_shared_expiry_and_owner(struct cf *c)
{
    CHECK_EQ_INT(shared(c, "rx", LEASE_A, 200)->code, LK_OK);
    int64_t tb = shared(c, "rx", LEASE_B, 60000)->fencing_token;
    CHECK_EQ_INT(cf_release(c, "rx", LEASE_C, 0)->code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(cf_renew(c, "rx", LEASE_C, 0)->code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(cf_inspect(c, "rx")->nholders, 2);
    cf_run_for(c, 350);
    const struct cf_res *r = cf_inspect(c, "rx");
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].fencing_token, tb);
    CHECK_EQ_INT(cf_renew(c, "rx", LEASE_A, 0)->code, LK_HELD_BY_OTHER);
    CHECK_EQ_INT(cf_release(c, "rx", LEASE_A, 0)->code, LK_HELD_BY_OTHER);
    /* the watchdog's batch renews a reader like any lease */
    struct bk_renew_item items[2] = {{"rx", LEASE_B, 60000, LK_INTERNAL},
                                     {"rx", LEASE_A, 60000, LK_INTERNAL}};
    struct bk_req q = {.op = BK_RENEW_MANY, .items = items, .nitems = 2};
    static struct cf_res res;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(items[0].result, LK_OK);
    CHECK(items[1].result == LK_HELD_BY_OTHER || items[1].result == LK_NOT_HELD);
    r = cf_release(c, "rx", LEASE_B, 300);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, tb);
    r = shared(c, "rx", LEASE_C, 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK(r->delay_ms > 0);
    wait_free(c, "rx", 1000);
}

/* While an exclusive waiter is refused by readers, a new reader is refused
 * too (writers are not starved); the writer gets it once they left. */
static void case_shared_writer_first(struct cf *c)
{
    CHECK_EQ_INT(shared(c, "wf", LEASE_A, 5000)->code, LK_OK);
    const struct cf_res *r = cf_acquire_as(c, "wf", LEASE_D, "w", 5000, BK_EXCLUSIVE, 1, true);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    r = shared(c, "wf", LEASE_B, 5000);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK_EQ_INT(cf_release(c, "wf", LEASE_A, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_acquire_as(c, "wf", LEASE_D, "w", 5000, BK_EXCLUSIVE, 1, true)->code, LK_OK);
}

/* Readers granted together (bk_req.more, BK_CAP_GROUP): none while a
 * writer holds or waits, else all in one call, each with its own lease,
 * owner, ttl and a token above the one before; each slot is then its
 * own (it expires, renews and releases alone). */
static void case_shared_group(struct cf *c)
{
    struct bk_grant_item more[2] = {{LEASE_B, "b", 200, false, 0}, {LEASE_C, "c", 60000, true, 0}};
    struct bk_req q = {.op = BK_ACQUIRE,
                       .name = "grp",
                       .lease = LEASE_A,
                       .owner = "a",
                       .mode = BK_SHARED,
                       .limit = 1,
                       .ttl_ms = 60000,
                       .wait = true,
                       .more = more,
                       .nmore = 2};
    static struct cf_res res;
    int64_t tw = cf_grant(c, "grp", LEASE_D, "writer");
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED); /* none of them */
    const struct cf_res *r = cf_inspect(c, "grp");
    CHECK_EQ_INT(r->nholders, 1);
    CHECK_EQ_INT(r->holders[0].fencing_token, tw);
    CHECK_EQ_INT(cf_release(c, "grp", LEASE_D, 0)->code, LK_OK);
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK(res.fencing_token > tw);
    CHECK(more[0].fencing_token > res.fencing_token);
    CHECK(more[1].fencing_token > more[0].fencing_token);
    int64_t ta = res.fencing_token;
    r = cf_inspect(c, "grp");
    CHECK_EQ_INT(r->nholders, 3);
    CHECK_EQ_INT(r->holders[0].fencing_token, more[1].fencing_token);
    CHECK_STR(r->holders[0].owner, "c");
    CHECK(r->holders[0].session_bound);
    CHECK_EQ_INT(r->holders[0].mode, BK_SHARED);
    cf_run_for(c, 350); /* b's 200 ms ran out, a's and c's did not */
    r = cf_inspect(c, "grp");
    CHECK_EQ_INT(r->nholders, 2);
    CHECK_EQ_INT(cf_release(c, "grp", LEASE_B, 0)->code, LK_HELD_BY_OTHER);
    r = cf_renew(c, "grp", LEASE_C, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, more[1].fencing_token);
    CHECK_EQ_INT(r->ttl_ms, 60000);
    r = cf_release(c, "grp", LEASE_A, 0);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK_EQ_INT(r->fencing_token, ta);
    /* a writer waiting (refused by c) keeps a new group out */
    CHECK_EQ_INT(cf_acquire_as(c, "grp", LEASE_D, "w", 5000, BK_EXCLUSIVE, 1, true)->code,
                 LK_LOCKED);
    q.lease = LEASE_A;
    more[0].lease = LEASE_B;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED);
    CHECK_EQ_INT(cf_inspect(c, "grp")->nholders, 1);
    CHECK_EQ_INT(cf_release(c, "grp", LEASE_C, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_acquire_as(c, "grp", LEASE_D, "w", 5000, BK_EXCLUSIVE, 1, true)->code, LK_OK);
}

/* A semaphore of 3: three holders, the fourth refused with a holder, a
 * slot freed by a release or by its holder's expiry goes to the next;
 * every other limit (1 included) is LK_LIMIT_MISMATCH naming 3. A grant
 * says whether a slot is still free (bk_res.room: the first two, not the
 * third, nor one that takes a freed slot back to 3). */
static void case_semaphore(struct cf *c)
{
    const char *leases[4] = {LEASE_A, LEASE_B, LEASE_C, LEASE_D};
    int64_t last = 0;
    /* one slot held (a lone holder's value on the Redis family): another
     * limit is refused naming 3, an exclusive or a shared acquire alike */
    const struct cf_res *one =
        cf_acquire_as(c, "sem-one", LEASE_A, "", 60000, BK_EXCLUSIVE, 3, false);
    CHECK_EQ_INT(one->code, LK_OK);
    CHECK(one->room);
    one = cf_acquire(c, "sem-one", LEASE_B, "", 5000);
    CHECK_EQ_INT(one->code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(one->limit, 3);
    one = shared(c, "sem-one", LEASE_B, 5000);
    CHECK_EQ_INT(one->code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(one->limit, 3);
    CHECK_EQ_INT(cf_inspect(c, "sem-one")->nholders, 1);
    for (int i = 0; i < 3; i++) {
        const struct cf_res *r =
            cf_acquire_as(c, "sem", leases[i], "", i == 1 ? 200 : 60000, BK_EXCLUSIVE, 3, false);
        CHECK_EQ_INT(r->code, LK_OK);
        CHECK_EQ_INT(r->room, i < 2);
        CHECK(r->fencing_token > last);
        last = r->fencing_token;
    }
    const struct cf_res *r = cf_acquire_as(c, "sem", LEASE_D, "", 5000, BK_EXCLUSIVE, 3, false);
    CHECK_EQ_INT(r->code, LK_LOCKED);
    CHECK_EQ_INT(r->nholders, 1);
    r = cf_acquire_as(c, "sem", LEASE_D, "", 5000, BK_EXCLUSIVE, 4, false);
    CHECK_EQ_INT(r->code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(r->limit, 3);
    r = cf_acquire(c, "sem", LEASE_D, "", 5000);
    CHECK_EQ_INT(r->code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(r->limit, 3);
    r = cf_inspect(c, "sem");
    CHECK_EQ_INT(r->nholders, 3);
    CHECK_EQ_INT(r->limit, 3);
    cf_run_for(c, 350); /* B's slot expires */
    r = cf_acquire_as(c, "sem", LEASE_D, "", 60000, BK_EXCLUSIVE, 3, false);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(!r->room);
    CHECK(r->fencing_token > last);
    CHECK_EQ_INT(cf_acquire_as(c, "sem", LEASE_B, "", 60000, BK_EXCLUSIVE, 3, false)->code,
                 LK_LOCKED);
    CHECK_EQ_INT(cf_release(c, "sem", LEASE_A, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_acquire_as(c, "sem", LEASE_B, "", 60000, BK_EXCLUSIVE, 3, false)->code, LK_OK);
    /* an exclusive holder's name: a semaphore acquire is a mismatch naming 1 */
    cf_grant(c, "sem-x", LEASE_A, "");
    r = cf_acquire_as(c, "sem-x", LEASE_B, "", 5000, BK_EXCLUSIVE, 3, false);
    CHECK_EQ_INT(r->code, LK_LIMIT_MISMATCH);
    CHECK_EQ_INT(r->limit, 1);
    /* listing shows the count and the limit (a page may come short: every
     * page, up to 20, until the end) */
    static struct cf_res res;
    static char cursor[1024];
    cursor[0] = '\0';
    int seen = 0;
    for (int page = 0; page < 20; page++) {
        struct bk_req ls = {.op = BK_LIST, .prefix = "sem", .cursor = cursor, .count = 10};
        cf_submit(c, &ls, &res);
        CHECK_EQ_INT(res.code, LK_OK);
        for (size_t i = 0; i < res.nentries; i++) {
            if (strcmp(res.entries[i].name, "sem") == 0) {
                CHECK_EQ_INT(res.entries[i].nholders, 3);
                CHECK_EQ_INT(res.entries[i].limit, 3);
                seen++;
            } else if (strcmp(res.entries[i].name, "sem-x") == 0) {
                CHECK_EQ_INT(res.entries[i].nholders, 1);
                CHECK_EQ_INT(res.entries[i].limit, 1);
                seen++;
            }
        }
        if (!res.has_next)
            break;
        snprintf(cursor, sizeof(cursor), "%s", res.next_cursor);
    }
    CHECK_EQ_INT(seen, 2);
}

/* A backend without BK_CAP_LIMIT that is sent a semaphore acquire anyway
 * refuses it (LK_UNSUPPORTED), grants nothing, and says why when it has a
 * sentence for it (backend_ops.refusal, the client's 400 message). */
static void case_semaphore_refused(struct cf *c)
{
    if (c->be.ops->caps & BK_CAP_LIMIT)
        return; /* case_semaphore's */
    const struct cf_res *r = cf_acquire_as(c, "sem-no", LEASE_A, "", 5000, BK_EXCLUSIVE, 3, false);
    CHECK_EQ_INT(r->code, LK_UNSUPPORTED);
    if (c->be.ops->refusal != NULL) {
        struct bk_req q = {.op = BK_ACQUIRE, .name = "sem-no", .limit = 3};
        const char *why = c->be.ops->refusal(&q);
        CHECK(why != NULL && why[0] != '\0');
        CHECK_STR(r->refusal, why);
        printf("# %s\n", why);
    }
    CHECK_EQ_INT(cf_inspect(c, "sem-no")->nholders, 0);
    CHECK_EQ_INT(cf_grant(c, "sem-no", LEASE_B, "") > 0, 1); /* limit 1 is served */
}

/* An operator's force-unlock: every holder goes, whatever its lease, with
 * no lock-delay; the highest token comes back; a free name is not held; the
 * former holder's renew and release find it gone. */
static void case_force_release(struct cf *c)
{
    static struct cf_res res;
    struct bk_req q = {.op = BK_FORCE_RELEASE, .name = "force"};
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_NOT_HELD);
    int64_t t = cf_grant(c, "force", LEASE_A, "stuck");
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK_EQ_INT(res.fencing_token, t);
    CHECK_EQ_INT(res.delay_ms, 0);
    CHECK_EQ_INT(cf_renew(c, "force", LEASE_A, 0)->code, LK_NOT_HELD);
    CHECK_EQ_INT(cf_release(c, "force", LEASE_A, 0)->code, LK_NOT_HELD);
    CHECK(cf_grant(c, "force", LEASE_B, "") > t); /* free at once, tokens go on */
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_NOT_HELD);
    if (!(c->be.ops->caps & BK_CAP_LIMIT))
        return;
    int64_t top = 0;
    const char *leases[3] = {LEASE_A, LEASE_B, LEASE_C};
    for (int i = 0; i < 3; i++) {
        const struct cf_res *r =
            cf_acquire_as(c, "force-sem", leases[i], "", 60000, BK_EXCLUSIVE, 3, false);
        CHECK_EQ_INT(r->code, LK_OK);
        top = r->fencing_token;
    }
    q.name = "force-sem";
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK_EQ_INT(res.fencing_token, top);
    CHECK_EQ_INT(cf_inspect(c, "force-sem")->nholders, 0);
}

/* BK_CAP_INDEX (DESIGN.md §Watching): a name's index grows on every change
 * of its holders (a grant, a release, an expiry, a forced release, another
 * shared holder) and stays put otherwise (a renewal, a refused acquire, a
 * watcher's inspect, which only marks the name); a listing entry carries
 * the index inspect gives. */
static int64_t index_of(struct cf *c, const char *name)
{
    const struct cf_res *r = cf_inspect(c, name);
    CHECK_EQ_INT(r->code, LK_OK);
    CHECK(r->index >= 0 && r->index < (1LL << 53));
    return r->index;
}

/* The index name's listing entry carries (name is its own prefix). */
static int64_t listed_index(struct cf *c, const char *name)
{
    static struct cf_res res;
    char cursor[1024] = "";
    for (int page = 0; page < 100; page++) {
        struct bk_req q = {.op = BK_LIST, .prefix = name, .cursor = cursor, .count = 10};
        cf_submit(c, &q, &res);
        CHECK_EQ_INT(res.code, LK_OK);
        for (size_t i = 0; i < res.nentries; i++)
            if (strcmp(res.entries[i].name, name) == 0)
                return res.entries[i].index;
        if (!res.has_next)
            break;
        snprintf(cursor, sizeof(cursor), "%s", res.next_cursor);
    }
    th_fail(__FILE__, __LINE__, "'%s' is not listed", name);
    return -1;
}

static void case_index(struct cf *c)
{
    int64_t i0 = index_of(c, "ix-a");
    cf_grant(c, "ix-a", LEASE_A, "one");
    int64_t i1 = index_of(c, "ix-a");
    CHECK(i1 > i0);
    CHECK_EQ_INT(listed_index(c, "ix-a"), i1);
    CHECK_EQ_INT(cf_renew(c, "ix-a", LEASE_A, 30000)->code, LK_OK);
    CHECK_EQ_INT(index_of(c, "ix-a"), i1);
    static struct cf_res res;
    struct bk_req w = {.op = BK_INSPECT, .name = "ix-a", .wait = true};
    cf_submit(c, &w, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK_EQ_INT(res.index, i1);
    CHECK_EQ_INT(cf_acquire(c, "ix-a", LEASE_B, "", 1000)->code, LK_LOCKED);
    CHECK_EQ_INT(index_of(c, "ix-a"), i1);
    CHECK_EQ_INT(listed_index(c, "ix-a"), i1);

    CHECK_EQ_INT(cf_release(c, "ix-a", LEASE_A, 0)->code, LK_OK);
    int64_t i2 = index_of(c, "ix-a");
    CHECK(i2 > i1);
    CHECK_EQ_INT(index_of(c, "ix-a"), i2);

    CHECK_EQ_INT(cf_acquire(c, "ix-a", LEASE_B, "", 150)->code, LK_OK);
    int64_t i3 = index_of(c, "ix-a");
    CHECK(i3 > i2);
    wait_free(c, "ix-a", 2000);
    int64_t i4 = index_of(c, "ix-a");
    CHECK(i4 > i3);

    /* a name whose index was only listed before its release (a listing
     * marks nothing, and the memory backend frees the entry of a released
     * name nobody inspected): its index still moves up, never back */
    cf_grant(c, "ix-u", LEASE_A, "");
    int64_t u1 = listed_index(c, "ix-u");
    CHECK(u1 > 0);
    CHECK_EQ_INT(cf_release(c, "ix-u", LEASE_A, 0)->code, LK_OK);
    int64_t u2 = index_of(c, "ix-u");
    CHECK(u2 > u1);
    cf_grant(c, "ix-u", LEASE_B, "");
    CHECK(index_of(c, "ix-u") > u2);

    if (c->be.ops->caps & BK_CAP_FORCE) {
        cf_grant(c, "ix-a", LEASE_C, "");
        int64_t i5 = index_of(c, "ix-a");
        CHECK(i5 > i4);
        struct bk_req f = {.op = BK_FORCE_RELEASE, .name = "ix-a"};
        cf_submit(c, &f, &res);
        CHECK_EQ_INT(res.code, LK_OK);
        CHECK(index_of(c, "ix-a") > i5);
    }
    if (!(c->be.ops->caps & BK_CAP_SHARED))
        return;
    const struct cf_res *r = cf_acquire_as(c, "ix-s", LEASE_A, "r1", 60000, BK_SHARED, 1, false);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t s1 = index_of(c, "ix-s");
    CHECK_EQ_INT(listed_index(c, "ix-s"), s1);
    r = cf_acquire_as(c, "ix-s", LEASE_B, "r2", 60000, BK_SHARED, 1, false);
    CHECK_EQ_INT(r->code, LK_OK);
    int64_t s2 = index_of(c, "ix-s");
    CHECK(s2 > s1);
    CHECK_EQ_INT(listed_index(c, "ix-s"), s2);
    CHECK_EQ_INT(cf_renew(c, "ix-s", LEASE_A, 30000)->code, LK_OK);
    CHECK_EQ_INT(index_of(c, "ix-s"), s2);
    CHECK_EQ_INT(cf_release(c, "ix-s", LEASE_A, 0)->code, LK_OK);
    int64_t s3 = index_of(c, "ix-s");
    CHECK(s3 > s2);
    CHECK_EQ_INT(listed_index(c, "ix-s"), s3);
    CHECK_EQ_INT(cf_release(c, "ix-s", LEASE_B, 0)->code, LK_OK);
    CHECK(index_of(c, "ix-s") > s3);
}

/* A multi-lock (BK_ACQUIRE_MULTI): refused whole while one name is held
 * (naming it and its holder, taking none of the others), granted whole once
 * it is free, one token per name above the name's earlier ones; each member
 * is an ordinary lock of the set's lease. The names share a Redis Cluster
 * slot (a cluster takes a set of one slot in one call, and answers
 * LK_UNSUPPORTED for names of many, leaving them to the engine). */
static void case_multi_acquire(struct cf *c)
{
    static struct cf_res res;
    char names[3][32];
    const char *nv[3] = {names[0], names[1], names[2]};
    snprintf(names[0], sizeof(names[0]), "ma-0");
    int slot = redis_key_slot(names[0], strlen(names[0])), found = 1;
    for (int k = 1; found < 3 && k < 1000000; k++) {
        char n[32];
        snprintf(n, sizeof(n), "ma-%d", k);
        if (redis_key_slot(n, strlen(n)) == slot)
            snprintf(names[found++], sizeof(names[0]), "%s", n);
    }
    CHECK_EQ_INT(found, 3);
    int64_t t1 = cf_grant(c, names[1], LEASE_B, "bob");
    struct bk_req q = {.op = BK_ACQUIRE_MULTI,
                       .names = nv,
                       .nnames = 3,
                       .lease = LEASE_A,
                       .owner = "alice",
                       .mode = BK_EXCLUSIVE,
                       .limit = 1,
                       .ttl_ms = 5000};
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED);
    CHECK_EQ_INT(res.blocked, 1);
    check_held_by(&res, "bob", t1, 60000);
    CHECK_EQ_INT(cf_inspect(c, names[0])->nholders, 0); /* none of the set taken */
    CHECK_EQ_INT(cf_inspect(c, names[2])->nholders, 0);
    CHECK_EQ_INT(cf_release(c, names[1], LEASE_B, 0)->code, LK_OK);

    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_OK);
    CHECK_EQ_INT(res.ntokens, 3);
    CHECK(res.tokens[1] > t1);
    int64_t tokens[3];
    for (int i = 0; i < 3; i++) {
        tokens[i] = res.tokens[i];
        const struct cf_res *r = cf_inspect(c, names[i]);
        CHECK_EQ_INT(r->code, LK_OK);
        check_held_by(r, "alice", tokens[i], 5000);
    }
    /* held whole: refused again, by the first name (nothing changes) */
    q.lease = LEASE_C;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED);
    CHECK_EQ_INT(res.blocked, 0);
    check_held_by(&res, "alice", tokens[0], 5000);
    /* members are ordinary locks of the set's lease */
    CHECK_EQ_INT(cf_renew(c, names[2], LEASE_A, 8000)->code, LK_OK);
    CHECK_EQ_INT(cf_release(c, names[0], LEASE_A, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_acquire(c, names[0], LEASE_B, "", 5000)->code, LK_OK);
    CHECK_EQ_INT(cf_release(c, names[1], LEASE_A, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_release(c, names[2], LEASE_A, 0)->code, LK_OK);
    CHECK_EQ_INT(cf_release(c, names[0], LEASE_B, 0)->code, LK_OK);

    /* a lock-delay refuses the set too */
    CHECK_EQ_INT(cf_acquire(c, names[2], LEASE_B, "", 5000)->code, LK_OK);
    CHECK_EQ_INT(cf_release(c, names[2], LEASE_B, 3000)->code, LK_OK);
    q.lease = LEASE_A;
    cf_submit(c, &q, &res);
    CHECK_EQ_INT(res.code, LK_LOCKED);
    CHECK_EQ_INT(res.blocked, 2);
    CHECK(res.delay_ms > 0 && res.nholders == 0);
    CHECK_EQ_INT(cf_inspect(c, names[0])->nholders, 0);

    if (strcmp(c->def->name, "cluster") == 0) { /* names of two slots: not in one call */
        const char *two[2] = {"ma-0", "ma-x"};
        CHECK(redis_key_slot("ma-x", 4) != slot);
        q.names = two;
        q.nnames = 2;
        cf_submit(c, &q, &res);
        CHECK_EQ_INT(res.code, LK_UNSUPPORTED);
        CHECK_EQ_INT(cf_inspect(c, "ma-0")->nholders, 0);
    }
}

const struct cf_case cf_cases[] = {
    {"grant_and_refusal", case_grant_and_refusal, 0, 0},
    {"fencing_across_release", case_fencing_across_release, 0, 0},
    {"fencing_across_expiry", case_fencing_across_expiry, 0, 0},
    {"renew_keeps_token", case_renew_keeps_token, 0, 0},
    {"owner_checks", case_owner_checks, 0, 0},
    {"validity", case_validity, 0, 0},
    {"lock_delay", case_lock_delay, 0, 0},
    {"renew_many", case_renew_many, 0, 0},
    {"list_pages", case_list_pages, 0, 0},
    {"list_bad_cursor", case_list_bad_cursor, 0, 0},
    {"inspect", case_inspect, 0, 0},
    {"ping_and_nodes", case_ping_and_nodes, 0, 0},
    {"fence_floor", case_fence_floor, 0, BK_CAP_FLOOR},
    {"shared_readers", case_shared_readers, 0, BK_CAP_SHARED},
    {"shared_expiry_and_owner", case_shared_expiry_and_owner, 0, BK_CAP_SHARED},
    {"shared_writer_first", case_shared_writer_first, 0, BK_CAP_SHARED},
    {"shared_group", case_shared_group, 0, BK_CAP_GROUP},
    {"semaphore", case_semaphore, 0, BK_CAP_LIMIT},
    {"semaphore_refused", case_semaphore_refused, 0, 0},
    {"force_release", case_force_release, 0, BK_CAP_FORCE},
    {"index", case_index, 0, BK_CAP_INDEX},
    {"multi_acquire", case_multi_acquire, 0, BK_CAP_MULTI},
    {"backend_down", case_backend_down, CF_NEEDS_PAUSE, 0},
    {"restart", case_restart, CF_NEEDS_RESTART, 0},
    {NULL, NULL, 0, 0},
};
