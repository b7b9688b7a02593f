/*
 * api_locks.c - the lock API end to end against a real lockd (memory, or
 * Redis when TH_BACKEND=redis): every route, every error code of the memory
 * backend, lease via header/query/body, expiry, fencing across restarts,
 * blocking waits, and 16 concurrent clients that must never overlap.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "tests/lib/fixture.h"

static struct fixture fx;
static struct th_client *cl;

static void req(const char *method, const char *path, const char *body, struct th_resp *out)
{
    th_http(cl, method, fx_url(&fx, "%s", path), body, NULL, out);
}

static void req_h(const char *method, const char *path, const char *body, const char *hdr,
                  struct th_resp *out)
{
    const char *hdrs[] = {hdr, NULL};
    th_http(cl, method, fx_url(&fx, "%s", path), body, hdrs, out);
}

/* Acquires name; returns the lease (static) and token. */
static const char *grab(const char *name, const char *body, long long *token)
{
    static char lease[64];
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", name);
    req("POST", path, body, &r);
    if (r.status != 200)
        th_fail(__FILE__, __LINE__, "acquire %s: %ld %s", name, r.status, r.body);
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    if (token)
        *token = th_jint(&r, "fencing_token");
    th_resp_free(&r);
    return lease;
}

static void test_walkthrough(void)
{
    struct th_resp r;
    req("POST", "/locks/demo", "{\"ttl_ms\":5000,\"owner\":\"pod-a\"}", &r);
    CHECK_EQ_INT(r.status, 200);
    const char *lease = th_jstr(&r, "lease");
    CHECK(lease != NULL && strlen(lease) == 32);
    char lcopy[40];
    snprintf(lcopy, sizeof(lcopy), "%s", lease);
    long long token = th_jint(&r, "fencing_token");
    CHECK(token > 0 && token < (1LL << 53));
    CHECK_STR(th_header(&r, "Lock-Lease"), lcopy);
    char tok[32];
    snprintf(tok, sizeof(tok), "%lld", token);
    CHECK_STR(th_header(&r, "Lock-Fencing-Token"), tok);
    CHECK_STR(th_header(&r, "Content-Type"), "application/json");
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 5000);
    CHECK_STR(th_jstr(&r, "owner"), "pod-a");
    CHECK_STR(th_jstr(&r, "mode"), "exclusive");
    CHECK_EQ_INT(th_jint(&r, "count"), 1);
    CHECK(json_is_null(json_object_get(r.json, "session")));
    const char *exp = th_jstr(&r, "expires_at");
    CHECK(exp != NULL && strlen(exp) == 24 && exp[10] == 'T' && exp[23] == 'Z');
    th_resp_free(&r);

    req("GET", "/locks/demo", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(json_is_true(json_object_get(r.json, "held")));
    CHECK_STR(th_jstr(&r, "owner"), "pod-a");
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    CHECK(th_jint(&r, "expires_in_ms") > 4000 && th_jint(&r, "expires_in_ms") <= 5000);
    CHECK_EQ_INT(th_jint(&r, "holders"), 1);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "holder_list")), 1);
    CHECK_EQ_INT(th_jint(&r, "waiters"), 0);
    CHECK(strstr(r.body, lcopy) == NULL); /* inspect never reveals the lease */
    th_resp_free(&r);

    /* Renew keeps the token, takes the new ttl. */
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lcopy);
    req_h("PUT", "/locks/demo", "{\"ttl_ms\":20000}", hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 20000);
    th_resp_free(&r);
    /* Renew without ttl_ms: the ttl the lease was last given. */
    req_h("PUT", "/locks/demo", NULL, hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 20000);
    th_resp_free(&r);

    req_h("DELETE", "/locks/demo", NULL, hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(json_is_true(json_object_get(r.json, "released")));
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    CHECK_EQ_INT(th_jint(&r, "count"), 0);
    th_resp_free(&r);

    req("GET", "/locks/demo", NULL, &r);
    CHECK(json_is_false(json_object_get(r.json, "held")));
    CHECK(json_is_null(json_object_get(r.json, "fencing_token")));
    CHECK_EQ_INT(th_jint(&r, "holders"), 0);
    th_resp_free(&r);

    /* The same lease again: nobody holds it. */
    req_h("DELETE", "/locks/demo", NULL, hdr, &r);
    CHECK_EQ_INT(r.status, 404);
    CHECK_STR(th_jerr(&r), "not_held");
    th_resp_free(&r);
    req_h("PUT", "/locks/demo", NULL, hdr, &r);
    CHECK_EQ_INT(r.status, 404);
    CHECK_STR(th_jerr(&r), "not_held");
    th_resp_free(&r);
}

static void test_conflict_and_wrong_lease(void)
{
    long long t1;
    char l1[64];
    snprintf(l1, sizeof(l1), "%s", grab("c1", "{\"ttl_ms\":10000,\"owner\":\"first\"}", &t1));
    struct th_resp r;
    req("POST", "/locks/c1", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "locked");
    CHECK(th_jstr(&r, "message") != NULL);
    json_t *h = json_object_get(r.json, "holder");
    CHECK(json_is_object(h));
    CHECK_STR(json_string_value(json_object_get(h, "owner")), "first");
    CHECK_EQ_INT(json_integer_value(json_object_get(h, "fencing_token")), t1);
    CHECK(json_integer_value(json_object_get(h, "expires_in_ms")) > 9000);
    CHECK_STR(th_header(&r, "Retry-After"), "10");
    CHECK(strstr(r.body, l1) == NULL);
    th_resp_free(&r);

    /* A wrong lease can neither renew nor release. */
    req_h("PUT", "/locks/c1", NULL, "Lock-Lease: 0123456789abcdef0123456789abcdef", &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "held_by_other");
    th_resp_free(&r);
    req_h("DELETE", "/locks/c1", NULL, "Lock-Lease: 0123456789abcdef0123456789abcdef", &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "held_by_other");
    th_resp_free(&r);
    /* The right lease next to a wrong one is ambiguous, in either order. */
    char good[80];
    snprintf(good, sizeof(good), "Lock-Lease: %s", l1);
    const char *wrong = "Lock-Lease: 0123456789abcdef0123456789abcdef";
    const char *pairs[2][3] = {{good, wrong, NULL}, {wrong, good, NULL}};
    for (int i = 0; i < 2; i++) {
        th_http(cl, "DELETE", fx_url(&fx, "/locks/c1"), NULL, pairs[i], &r);
        CHECK_EQ_INT(r.status, 400);
        CHECK_STR(th_jerr(&r), "conflicting_lease");
        th_resp_free(&r);
        th_http(cl, "PUT", fx_url(&fx, "/locks/c1"), NULL, pairs[i], &r);
        CHECK_EQ_INT(r.status, 400);
        CHECK_STR(th_jerr(&r), "conflicting_lease");
        th_resp_free(&r);
    }
    req("GET", "/locks/c1", NULL, &r);
    CHECK(json_is_true(json_object_get(r.json, "held")));
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), t1);
    th_resp_free(&r);

    /* Lease by query, by body, and all three agreeing. */
    char path[128], body[128], hdr[80];
    snprintf(path, sizeof(path), "/locks/c1?lease=%s", l1);
    req("PUT", path, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"lease\":\"%s\",\"ttl_ms\":3000}", l1);
    req("PUT", "/locks/c1", body, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 3000);
    th_resp_free(&r);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", l1);
    snprintf(body, sizeof(body), "{\"lease\":\"%s\"}", l1);
    req_h("DELETE", path, body, hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
}

/* Names on both sides of the request's inline copy of the path (63 bytes
 * fit, 64 and the longest legal name, 255, take the heap): each is granted
 * once, refused to a second client and to a wrong lease, released by its
 * own lease, and granted again with a higher fencing token. */
static void test_long_names(void)
{
    const int lens[] = {63, 64, 255};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char name[256], path[300], hdr[80];
        memset(name, 'a' + (int)i, (size_t)lens[i]);
        name[lens[i]] = '\0';
        snprintf(path, sizeof(path), "/locks/%s", name);
        long long t1, t2;
        char lease[64];
        snprintf(lease, sizeof(lease), "%s", grab(name, "{\"ttl_ms\":10000}", &t1));
        struct th_resp r;
        req("POST", path, NULL, &r);
        CHECK_EQ_INT(r.status, 409);
        th_resp_free(&r);
        req_h("DELETE", path, NULL, "Lock-Lease: 0123456789abcdef0123456789abcdef", &r);
        CHECK_EQ_INT(r.status, 409);
        CHECK_STR(th_jerr(&r), "held_by_other");
        th_resp_free(&r);
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
        req_h("DELETE", path, NULL, hdr, &r);
        CHECK_EQ_INT(r.status, 200);
        CHECK_STR(th_jstr(&r, "name"), name);
        th_resp_free(&r);
        snprintf(lease, sizeof(lease), "%s", grab(name, NULL, &t2));
        CHECK(t2 > t1);
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
        req_h("DELETE", path, NULL, hdr, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
    }
}

static void test_expiry(void)
{
    long long t1, t2;
    grab("ex1", "{\"ttl_ms\":300}", &t1);
    struct th_resp r;
    req("POST", "/locks/ex1", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    th_sleep_ms(400);
    req("GET", "/locks/ex1", NULL, &r);
    CHECK(json_is_false(json_object_get(r.json, "held")));
    th_resp_free(&r);
    grab("ex1", "{\"ttl_ms\":300}", &t2);
    CHECK(t2 > t1);
}

static void test_tokens_across_restart(void)
{
    long long last = 0, t;
    for (int i = 0; i < 5; i++) {
        const char *l = grab("tok", "{\"ttl_ms\":10000}", &t);
        CHECK(t > last);
        last = t;
        char hdr[80];
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", l);
        struct th_resp r;
        req_h("DELETE", "/locks/tok", NULL, hdr, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
    }
    fx_restart(&fx, NULL);
    grab("tok", "{\"ttl_ms\":10000}", &t);
    CHECK(t > last);
    /* Another name after the restart also counts past everything before. */
    long long other;
    grab("tok-other", "{\"ttl_ms\":10000}", &other);
    CHECK(other > last);
}

static void test_list(void)
{
    char name[64];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof(name), "lst-%d", i);
        grab(name, "{\"ttl_ms\":20000,\"owner\":\"lister\"}", NULL);
    }
    grab("other-x", "{\"ttl_ms\":20000}", NULL);
    int seen = 0, pages = 0;
    char cursor[600] = "";
    for (;;) {
        char path[700];
        snprintf(path, sizeof(path), "/locks?prefix=lst-&limit=3%s%s", cursor[0] ? "&cursor=" : "",
                 cursor);
        struct th_resp r;
        req("GET", path, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        json_t *locks = json_object_get(r.json, "locks");
        CHECK(json_is_array(locks));
        CHECK(json_array_size(locks) <= 3);
        size_t i;
        json_t *it;
        json_array_foreach (locks, i, it) {
            const char *n = json_string_value(json_object_get(it, "name"));
            CHECK(n != NULL && strncmp(n, "lst-", 4) == 0);
            CHECK(json_is_true(json_object_get(it, "held")));
            CHECK_STR(json_string_value(json_object_get(it, "owner")), "lister");
            CHECK(json_is_integer(json_object_get(it, "waiters")));
            seen++;
        }
        pages++;
        json_t *next = json_object_get(r.json, "next_cursor");
        if (json_is_null(next)) {
            th_resp_free(&r);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
        th_resp_free(&r);
        CHECK(pages < 20);
    }
    CHECK_EQ_INT(seen, 7);
}

/* A renew answers like the acquire it extends: a session-bound, reentrant
 * lease keeps its session and hold count in the answer. */
static void test_renew_session_bound(void)
{
    struct th_resp r;
    req("POST", "/sessions", "{\"ttl_ms\":10000}", &r);
    CHECK_EQ_INT(r.status, 201);
    char sid[80], body[200], lease[64];
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"ttl_ms\":5000,\"session\":\"%s\",\"reentrant\":true}", sid);
    long long token = 0;
    for (int i = 1; i <= 3; i++) {
        req("POST", "/locks/rn-sess", body, &r);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(th_jint(&r, "count"), i);
        if (i == 1) {
            snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
            token = th_jint(&r, "fencing_token");
        }
        th_resp_free(&r);
    }
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
    req_h("PUT", "/locks/rn-sess", "{\"ttl_ms\":6000}", hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "session"), sid);
    CHECK_EQ_INT(th_jint(&r, "count"), 3);
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    CHECK_EQ_INT(th_jint(&r, "ttl_ms"), 6000);
    th_resp_free(&r);
    /* A plain lease renews with count 1 and no session. */
    const char *plain = grab("rn-plain", "{\"ttl_ms\":5000}", NULL);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", plain);
    req_h("PUT", "/locks/rn-plain", NULL, hdr, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(json_is_null(json_object_get(r.json, "session")));
    CHECK_EQ_INT(th_jint(&r, "count"), 1);
    th_resp_free(&r);
    snprintf(body, sizeof(body), "/sessions/%s", sid);
    req("DELETE", body, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
}

/* Walks GET base/locks?prefix=PREFIX&limit=limit page by page to the end,
 * counting each name PREFIX<k> (0 <= k < n) in seen[k]; after each page,
 * between(page, the page's k, their count, arg) when given. Every page
 * holds at most limit locks. Returns the number of pages. */
typedef void page_fn(int page, const int *ks, int nks, void *arg);
static int walk_pages(const char *base, const char *prefix, int limit, int n, int *seen,
                      page_fn *between, void *arg)
{
    int pages = 0;
    char cursor[600] = "";
    for (;;) {
        char path[900];
        snprintf(path, sizeof(path), "%s/locks?prefix=%s&limit=%d%s%s", base, prefix, limit,
                 cursor[0] ? "&cursor=" : "", cursor);
        struct th_resp r;
        th_http(cl, "GET", path, NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        json_t *locks = json_object_get(r.json, "locks");
        CHECK((int)json_array_size(locks) <= limit);
        int ks[1000], nks = 0;
        size_t i;
        json_t *it;
        json_array_foreach (locks, i, it) {
            const char *name = json_string_value(json_object_get(it, "name"));
            size_t pl = strlen(prefix);
            int k = -1;
            CHECK(name != NULL && strncmp(name, prefix, pl) == 0 &&
                  sscanf(name + pl, "%d", &k) == 1 && k >= 0 && k < n);
            if (k >= 0 && k < n && nks < 1000) {
                seen[k]++;
                ks[nks++] = k;
            }
        }
        json_t *next = json_object_get(r.json, "next_cursor");
        bool last = json_is_null(next);
        if (!last)
            snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
        th_resp_free(&r);
        if (between)
            between(pages, ks, nks, arg);
        if (last || ++pages > 4 * n)
            break;
    }
    CHECK(pages <= 4 * n);
    return pages;
}

/* Pages never hold more than `limit`, even when one SCAN call returns more
 * keys than that (COUNT is only a hint), and paging still reaches every
 * name: exactly once on memory; at least once on Redis, whose SCAN may
 * return a key again when Redis resizes its table between two pages (a CI
 * run under ASan saw one name twice, while keys of earlier tests expired). */
static void test_list_small_pages(void)
{
    enum { N = 60 };
    char name[64];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "pg-%02d", i);
        grab(name, "{\"ttl_ms\":20000}", NULL);
    }
    const int limits[] = {1, 2, 7};
    for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
        int seen[N] = {0};
        walk_pages(fx.lockd.url, "pg-", limits[l], N, seen, NULL, NULL);
        for (int k = 0; k < N; k++) {
            if (fx_is_redis())
                CHECK(seen[k] >= 1);
            else
                CHECK_EQ_INT(seen[k], 1);
        }
    }
}

#define FOREIGN(call) "for i = 1, 400 do redis.call('" call ") end"

struct releaser {
    const char *base;
    const char *prefix;
    char (*leases)[40];
    const int *seen;
    bool foreign; /* also add or delete 400 keys of another application */
};

/* After a page: releases the locks it was first to show. */
static void release_listed(int page, const int *ks, int nks, void *arg)
{
    const struct releaser *rl = arg;
    for (int i = 0; i < nks; i++) {
        if (rl->seen[ks[i]] != 1)
            continue;
        char path[300], hdr[80];
        const char *hdrs[] = {hdr, NULL};
        struct th_resp d;
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", rl->leases[ks[i]]);
        snprintf(path, sizeof(path), "%s/locks/%s%03d", rl->base, rl->prefix, ks[i]);
        th_http(cl, "DELETE", path, NULL, hdrs, &d);
        CHECK_EQ_INT(d.status, 200);
        th_resp_free(&d);
    }
    if (rl->foreign)
        th_redis_cli(&fx.redis, page % 2
                                    ? "-n 3 EVAL \"" FOREIGN("DEL', 'other:' .. i") "\" 0"
                                    : "-n 3 EVAL \"" FOREIGN("SET', 'other:' .. i, 'x'") "\" 0");
}

/* Paging while keys come and go: after each page, every lock it listed is
 * released, and in the second round 400 keys of another application appear
 * or vanish (so Redis also grows and shrinks its table between pages). A
 * lock is only released once a page has shown it, so the walk must still
 * show every lock. On Redis the walk runs in a database of its own (a lockd
 * on /3), where its keys are most of the keys, so pages often end inside
 * one SCAN call: resuming there repeats the call, which after deletions
 * reaches further, and a list.lua that skipped the names it found there as
 * "already listed" lost 1-11 of 240 locks per walk. */
static void test_list_during_releases(void)
{
    enum { N = 240 };
    static char leases[N][40];
    struct th_lockd own = {0};
    const char *base = fx.lockd.url;
    if (fx_is_redis()) {
        struct fixture f3 = fx;
        snprintf(f3.redis_url, sizeof(f3.redis_url), "redis://127.0.0.1:%d/3", fx.redis.port);
        fx_lockd_start(&f3, &own, NULL, NULL);
        base = own.url;
    }
    const int limits[] = {2, 7};
    for (int l = 0; l < 2; l++) {
        char prefix[16], path[300];
        snprintf(prefix, sizeof(prefix), "lr%d-", l);
        for (int i = 0; i < N; i++) {
            struct th_resp r;
            snprintf(path, sizeof(path), "%s/locks/%s%03d", base, prefix, i);
            th_http(cl, "POST", path, "{\"ttl_ms\":60000}", NULL, &r);
            CHECK_EQ_INT(r.status, 200);
            snprintf(leases[i], sizeof(leases[i]), "%s", th_jstr(&r, "lease"));
            th_resp_free(&r);
        }
        int seen[N] = {0};
        struct releaser rl = {base, prefix, leases, seen, fx_is_redis() && l == 1};
        walk_pages(base, prefix, limits[l], N, seen, release_listed, &rl);
        int missed = 0;
        for (int k = 0; k < N; k++)
            missed += seen[k] == 0;
        if (missed)
            fprintf(stderr, "    limit %d: %d of %d locks never listed\n", limits[l], missed, N);
        CHECK_EQ_INT(missed, 0);
    }
    if (own.pid > 0)
        th_lockd_kill(&own, SIGTERM);
}

/* A cursor lockd did not give out is the client's 400 invalid_field, never a
 * 503 nor an empty page: Redis cursors are SCAN cursors with a check
 * (backend_redis.c), the memory backend's signed names (issue 27: "abc"
 * used to page on from "abc", and on Redis "12345" from SCAN's 12345). */
static void test_list_bad_cursor(void)
{
    const char *bad[] = {"abc", "99999999999999999999", "-1", "1%202", "5:", ":x", "5:a%2Fb", "5:a",
                         "5:6", "5:6:", "5::a", "5:x:a", "5:6:a%2Fb", "5:99999999999999999999:a",
                         "lst-a~0000000000000000", "lst-a", "~",
                         /* SCAN cursors lockd did not give out: on Redis these
                          * once paged on from wherever they pointed */
                         "12345", "0", "12345~000000000000", "0~000000000000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), "/locks?cursor=%s", bad[i]);
        struct th_resp r;
        req("GET", path, NULL, &r);
        CHECK_EQ_INT(r.status, 400);
        CHECK_STR(th_jerr(&r), "invalid_field");
        th_resp_free(&r);
    }
}

/* Runs every tests/cases/NAME/{request,expect}: the lock case-lock is held
 * throughout and must be exactly as it was after each bad request. */
static void test_cases(void)
{
    long long token;
    grab("case-lock", "{\"ttl_ms\":600000,\"owner\":\"cases\"}", &token);
    const char *dirp = getenv("REPO") ? getenv("REPO") : ".";
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/cases", dirp);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s/request", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        static char text[65536];
        size_t len = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[len] = '\0';
        snprintf(path, sizeof(path), "%s/%s/expect", dir, de->d_name);
        f = fopen(path, "r");
        CHECK(f != NULL);
        int status;
        char code[64];
        CHECK(fscanf(f, "%d %63s", &status, code) == 2);
        fclose(f);
        /* request: "METHOD PATH\n" header lines "\n" body */
        char *line_end = strchr(text, '\n');
        CHECK(line_end != NULL);
        *line_end = '\0';
        char method[16], upath[8192];
        CHECK(sscanf(text, "%15s %8191s", method, upath) == 2);
        const char *hdrs[8];
        int nh = 0;
        char *p = line_end + 1;
        while (*p != '\0' && *p != '\n' && nh < 7) {
            char *e = strchr(p, '\n');
            if (e == NULL)
                break;
            *e = '\0';
            hdrs[nh++] = p;
            p = e + 1;
        }
        hdrs[nh] = NULL;
        if (*p == '\n')
            p++;
        size_t blen = len - (size_t)(p - text);
        struct th_resp r;
        /* The body may hold bytes that are not text: send it raw. */
        char *body = blen ? malloc(blen + 1) : NULL;
        if (body) {
            memcpy(body, p, blen);
            body[blen] = '\0';
        }
        th_http(cl, method, fx_url(&fx, "%s", upath), body, hdrs, &r);
        free(body);
        if (r.status != status || th_jerr(&r) == NULL || strcmp(th_jerr(&r), code) != 0)
            th_fail(__FILE__, __LINE__, "case %s: want %d %s, got %ld %s", de->d_name, status, code,
                    r.status, r.body);
        CHECK(th_jstr(&r, "message") != NULL);
        CHECK_STR(th_header(&r, "Content-Type"), "application/json");
        if (status == 405)
            CHECK(th_header(&r, "Allow") != NULL);
        th_resp_free(&r);
        /* Nothing changed. */
        req("GET", "/locks/case-lock", NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        CHECK(json_is_true(json_object_get(r.json, "held")));
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
        th_resp_free(&r);
        req("GET", "/locks/case-x", NULL, &r);
        CHECK(json_is_false(json_object_get(r.json, "held")));
        th_resp_free(&r);
        n++;
    }
    closedir(d);
    CHECK(n >= 40);
    fprintf(stderr, "    %d bad-input cases\n", n);
}

/* A client that sends part of a request and stops must not stall others. */
static void test_slow_client_and_raw_garbage(void)
{
    int fd = th_connect(fx.lockd.port);
    const char *partial =
        "POST /locks/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"tt";
    CHECK(write(fd, partial, strlen(partial)) > 0);
    int64_t t0 = th_now_ms();
    long long tok;
    grab("while-slow", "{\"ttl_ms\":1000}", &tok);
    CHECK(th_now_ms() - t0 < 1000 * th_time_scale());
    close(fd);
    /* Garbage that is not HTTP at all. */
    fd = th_connect(fx.lockd.port);
    const char *junk = "\x01\x02\xff garbage\r\n\r\n";
    CHECK(write(fd, junk, strlen(junk)) > 0);
    char buf[256];
    ssize_t got = read(fd, buf, sizeof(buf));
    (void)got;
    close(fd);

    /* Raw NUL bytes inside a body (inside a string, and bare): 400
     * invalid_json, nothing acquired. */
    static const char nul_bodies[][24] = {"{\"owner\":\"a\0b\"}", "{\"ttl_ms\":1\0}"};
    static const size_t nul_lens[] = {14, 14};
    for (int i = 0; i < 2; i++) {
        fd = th_connect(fx.lockd.port);
        char head[160];
        int hl = snprintf(head, sizeof(head),
                          "POST /locks/nul-body HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                          "Content-Length: %zu\r\n\r\n",
                          nul_lens[i]);
        CHECK(write(fd, head, (size_t)hl) == hl);
        CHECK(write(fd, nul_bodies[i], nul_lens[i]) == (ssize_t)nul_lens[i]);
        char ans[2048];
        size_t have = 0;
        ssize_t n;
        while (have < sizeof(ans) - 1 && (n = read(fd, ans + have, sizeof(ans) - 1 - have)) > 0)
            have += (size_t)n;
        ans[have] = '\0';
        close(fd);
        CHECK(strncmp(ans, "HTTP/1.1 400", 12) == 0);
        CHECK(strstr(ans, "\"error\":\"invalid_json\"") != NULL);
    }
    struct th_resp r;
    req("GET", "/locks/nul-body", NULL, &r);
    CHECK(json_is_false(json_object_get(r.json, "held")));
    th_resp_free(&r);
    req("GET", "/healthz", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
}

/* A 405 whose Allow header lists exactly `allow`. */
static void expect_allow(const char *method, const char *path, const char *allow)
{
    struct th_resp r;
    req(method, path, NULL, &r);
    CHECK_EQ_INT(r.status, 405);
    CHECK_STR(th_header(&r, "Allow"), allow);
    th_resp_free(&r);
}

static void test_ops(void)
{
    struct th_resp r;
    req("GET", "/healthz", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "status"), "ok");
    th_resp_free(&r);
    req("GET", "/readyz", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "status"), "ready");
    th_resp_free(&r);
    req("GET", "/metrics", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "# TYPE lockd_acquire_total counter") != NULL);
    CHECK(strstr(r.body, "lockd_acquire_total{result=\"granted\"}") != NULL);
    th_resp_free(&r);
    /* Every method the path serves, in the route table's order. */
    /* HEAD wherever GET is, OPTIONS everywhere (issue 27) */
    expect_allow("POST", "/healthz", "GET, HEAD, OPTIONS");
    expect_allow("PATCH", "/locks/allow-x", "POST, PUT, DELETE, GET, HEAD, OPTIONS");
    expect_allow("PATCH", "/sessions/abc", "PUT, GET, HEAD, DELETE, OPTIONS");
    expect_allow("PATCH", "/locks", "GET, HEAD, POST, PUT, DELETE, OPTIONS");
}

/* ---- blocking waits ---- */

struct waiter_arg {
    const char *name;
    const char *body;
    long status;
    long long token;
    int64_t done_ms;
    long long waited;
    char lease[64];
};

static void *wait_thread(void *p)
{
    struct waiter_arg *w = p;
    struct th_client *c = th_client_new();
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", w->name);
    th_http(c, "POST", fx_url(&fx, "%s", path), w->body, NULL, &r);
    w->status = r.status;
    w->token = th_jint(&r, "fencing_token");
    w->waited = th_jint(&r, "waited_ms");
    if (th_jstr(&r, "lease"))
        snprintf(w->lease, sizeof(w->lease), "%s", th_jstr(&r, "lease"));
    w->done_ms = th_now_ms();
    th_resp_free(&r);
    th_client_free(c);
    return NULL;
}

static bool has_waiters(void *arg)
{
    const char *name = ((const char **)arg)[0];
    long long want = atoll(((const char **)arg)[1]);
    struct th_client *c = th_client_new();
    struct th_resp r;
    char path[300];
    snprintf(path, sizeof(path), "/locks/%s", name);
    th_http(c, "GET", fx_url(&fx, "%s", path), NULL, NULL, &r);
    bool ok = th_jint(&r, "waiters") >= want;
    th_resp_free(&r);
    th_client_free(c);
    return ok;
}

static void wait_for_waiters(const char *name, int n)
{
    char ns[16];
    snprintf(ns, sizeof(ns), "%d", n);
    const char *arg[2] = {name, ns};
    CHECK(th_wait_for(has_waiters, arg, 5000));
}

/* GET /locks/name shows exactly `waiters` queued and held == `held`. */
struct lock_state {
    const char *name;
    long long waiters;
    bool held;
};

static bool lock_is(void *arg)
{
    const struct lock_state *want = arg;
    struct th_client *c = th_client_new();
    struct th_resp r;
    th_http(c, "GET", fx_url(&fx, "/locks/%s", want->name), NULL, NULL, &r);
    bool ok = r.status == 200 && th_jint(&r, "waiters") == want->waiters &&
              json_is_true(json_object_get(r.json, "held")) == want->held;
    th_resp_free(&r);
    th_client_free(c);
    return ok;
}

static void release(const char *name, const char *lease)
{
    struct th_resp r;
    char path[300], hdr[80];
    snprintf(path, sizeof(path), "/locks/%s", name);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease);
    req_h("DELETE", path, NULL, hdr, &r);
    if (r.status != 200)
        th_fail(__FILE__, __LINE__, "release %s: %ld %s", name, r.status, r.body);
    th_resp_free(&r);
}

static void test_wait_handoff(void)
{
    char lease[64];
    long long t0;
    snprintf(lease, sizeof(lease), "%s", grab("wt", "{\"ttl_ms\":30000}", &t0));
    struct waiter_arg w = {.name = "wt", .body = "{\"wait_ms\":5000}"};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    wait_for_waiters("wt", 1);
    /* A try-once acquire does not jump the queue. */
    struct th_resp r;
    req("POST", "/locks/wt", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    int64_t rel = th_now_ms();
    release("wt", lease);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200);
    CHECK(w.token > t0);
    fprintf(stderr, "    handoff %lld ms\n", (long long)(w.done_ms - rel));
    CHECK(w.done_ms - rel < 50 * th_time_scale());
    release("wt", w.lease);
}

static void test_wait_timeout(void)
{
    grab("wto", "{\"ttl_ms\":30000,\"owner\":\"blocker\"}", NULL);
    int64_t t0 = th_now_ms();
    struct th_resp r;
    req("POST", "/locks/wto", "{\"wait_ms\":500}", &r);
    int64_t took = th_now_ms() - t0;
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jerr(&r), "locked");
    /* 500 ms ± 100 (issue 5), stretched only under sanitizers/valgrind. */
    CHECK(th_jint(&r, "waited_ms") >= 400 &&
          th_jint(&r, "waited_ms") <= 500 + 100 * th_time_scale());
    CHECK(took >= 400 && took <= 500 + 100 * th_time_scale());
    json_t *h = json_object_get(r.json, "holder");
    CHECK_STR(json_string_value(json_object_get(h, "owner")), "blocker");
    th_resp_free(&r);
}

static void test_wait_expiry_wakes(void)
{
    /* Nobody releases: the waiter wakes at the holder's expiry (its PTTL). */
    grab("wexp", "{\"ttl_ms\":400}", NULL);
    int64_t t0 = th_now_ms();
    struct th_resp r;
    req("POST", "/locks/wexp", "{\"wait_ms\":3000}", &r);
    CHECK_EQ_INT(r.status, 200);
    int64_t took = th_now_ms() - t0;
    CHECK(took >= 300 && took < 300 + 500 * th_time_scale());
    th_resp_free(&r);
}

static void test_wait_fifo(void)
{
    char lease[64];
    snprintf(lease, sizeof(lease), "%s", grab("fifo", "{\"ttl_ms\":30000}", NULL));
    struct waiter_arg w[5];
    pthread_t th[5];
    for (int i = 0; i < 5; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].name = "fifo";
        w[i].body = "{\"wait_ms\":10000,\"ttl_ms\":30000}";
        pthread_create(&th[i], NULL, wait_thread, &w[i]);
        wait_for_waiters("fifo", i + 1); /* queue them in a known order */
    }
    long long last = 0;
    for (int i = 0; i < 5; i++) {
        release("fifo", lease);
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(w[i].status, 200);
        CHECK(w[i].token > last);
        last = w[i].token;
        snprintf(lease, sizeof(lease), "%s", w[i].lease);
    }
    release("fifo", lease);
}

static void test_wait_disconnect(void)
{
    char lease[64];
    snprintf(lease, sizeof(lease), "%s", grab("wdc", "{\"ttl_ms\":30000}", NULL));
    /* A raw waiter that hangs up. */
    int fd = th_connect(fx.lockd.port);
    const char *rq = "POST /locks/wdc HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n"
                     "{\"wait_ms\":10000}";
    CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq));
    wait_for_waiters("wdc", 1);
    struct waiter_arg w = {.name = "wdc", .body = "{\"wait_ms\":5000}"};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    wait_for_waiters("wdc", 2);
    close(fd);
    /* the hung-up one leaves the queue */
    struct lock_state one = {"wdc", 1, true};
    CHECK(th_wait_for(lock_is, &one, 2000 * th_time_scale()));
    release("wdc", lease);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.status, 200); /* the next waiter got it, not the dead one */
    release("wdc", w.lease);

    /* A waiter that hangs up as the lock frees may be granted in that same
     * instant: lockd must give such a grant back at once, not leave the lock
     * held for its 30 s ttl by a client that is gone. The hang-up and the
     * release are written back to back on raw sockets, so lockd often sees
     * both in one loop pass and grants before its hang-up watcher runs;
     * every third round lets the hang-up arrive first. */
    for (int i = 0; i < 90; i++) {
        char name[32];
        snprintf(name, sizeof(name), "wdr-%d", i);
        snprintf(lease, sizeof(lease), "%s", grab(name, "{\"ttl_ms\":30000}", NULL));
        fd = th_connect(fx.lockd.port);
        int rel = th_connect(fx.lockd.port);
        char rq2[200], rq3[200];
        int n = snprintf(rq2, sizeof(rq2),
                         "POST /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 32\r\n\r\n"
                         "{\"wait_ms\":10000,\"ttl_ms\":30000}",
                         name);
        CHECK(write(fd, rq2, (size_t)n) == n);
        int n3 = snprintf(rq3, sizeof(rq3),
                          "DELETE /locks/%s HTTP/1.1\r\nHost: x\r\nLock-Lease: %s\r\n"
                          "Connection: close\r\n\r\n",
                          name, lease);
        wait_for_waiters(name, 1);
        close(fd);
        if (i % 3 == 2)
            th_sleep_ms(1);
        CHECK(write(rel, rq3, (size_t)n3) == n3);
        char ans[1024];
        size_t have = 0;
        ssize_t got;
        while (have < sizeof(ans) - 1 && (got = read(rel, ans + have, sizeof(ans) - 1 - have)) > 0)
            have += (size_t)got;
        ans[have] = '\0';
        close(rel);
        CHECK(strncmp(ans, "HTTP/1.1 200", 12) == 0);
        struct lock_state freed = {name, 0, false};
        if (!th_wait_for(lock_is, &freed, 2000 * th_time_scale()))
            th_fail(__FILE__, __LINE__, "round %d: '%s' still held after its waiter hung up", i,
                    name);
    }
}

/* ---- 16 clients x 200 iterations on one name: never two holders ---- */

static atomic_int holders;
static atomic_llong last_token;
static atomic_int grants, overlaps, regressions;

static void *hammer(void *p)
{
    (void)p;
    struct th_client *c = th_client_new();
    for (int i = 0; i < 200; i++) {
        struct th_resp r;
        th_http(c, "POST", fx_url(&fx, "/locks/hot"), "{\"ttl_ms\":10000}", NULL, &r);
        if (r.status == 200) {
            if (atomic_fetch_add(&holders, 1) != 0)
                atomic_fetch_add(&overlaps, 1);
            long long tok = th_jint(&r, "fencing_token");
            if (tok <= atomic_load(&last_token))
                atomic_fetch_add(&regressions, 1);
            atomic_store(&last_token, tok);
            atomic_fetch_add(&grants, 1);
            char hdr[80];
            snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
            atomic_fetch_sub(&holders, 1);
            const char *hdrs[] = {hdr, NULL};
            struct th_resp d;
            th_http(c, "DELETE", fx_url(&fx, "/locks/hot"), NULL, hdrs, &d);
            if (d.status != 200)
                atomic_fetch_add(&overlaps, 1000);
            th_resp_free(&d);
        } else if (r.status != 409) {
            atomic_fetch_add(&overlaps, 1000000);
        }
        th_resp_free(&r);
    }
    th_client_free(c);
    return NULL;
}

static void test_concurrent_exclusion(void)
{
    pthread_t th[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&th[i], NULL, hammer, NULL);
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "    %d grants, %d overlaps, %d token regressions\n", atomic_load(&grants),
            atomic_load(&overlaps), atomic_load(&regressions));
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&regressions), 0);
    CHECK(atomic_load(&grants) > 16);
}

int main(void)
{
    cl = th_client_new();
    fx_start(&fx, NULL);
    TH_RUN(test_walkthrough);
    TH_RUN(test_conflict_and_wrong_lease);
    TH_RUN(test_long_names);
    TH_RUN(test_expiry);
    TH_RUN(test_renew_session_bound);
    TH_RUN(test_list);
    TH_RUN(test_list_small_pages);
    TH_RUN(test_list_during_releases);
    TH_RUN(test_list_bad_cursor);
    TH_RUN(test_cases);
    TH_RUN(test_slow_client_and_raw_garbage);
    TH_RUN(test_ops);
    TH_RUN(test_wait_handoff);
    TH_RUN(test_wait_timeout);
    TH_RUN(test_wait_expiry_wakes);
    TH_RUN(test_wait_fifo);
    TH_RUN(test_wait_disconnect);
    TH_RUN(test_concurrent_exclusion);
    TH_RUN(test_tokens_across_restart);
    fx_stop(&fx);
    th_client_free(cl);
    return th_done();
}
