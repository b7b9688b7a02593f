/*
 * redlock.c - issue 23 end to end: real lockd processes on the redlock
 * backend over 3 and 5 real redis-server processes (no persistence unless
 * said). Two lockd × 32 clients × 8 names (never two holders, tokens
 * increasing in grant order), a minority SIGKILLed mid-load (still served,
 * /readyz 200) then a majority (only 503/409, /readyz 503) and both back
 * (served again without restarting lockd, tokens still increasing), a
 * SIGSTOPped node (requests finish on the majority, well within
 * backend_timeout_ms), a minority restarted empty (the fence write-back
 * keeps tokens increasing; no double grant), and a lock lost on one node
 * (still held) and on two (404, and the session reports it lost).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"

#define TIMEOUT_MS 500
#define MAX_N 5

static struct th_redis R[MAX_N];
static int nodes; /* how many of R the current case uses */
static char urls[512];

static void start_nodes(int n)
{
    nodes = n;
    size_t off = 0;
    urls[0] = '\0';
    for (int i = 0; i < n; i++) {
        th_redis_start(&R[i], 0, NULL);
        off += (size_t)snprintf(urls + off, sizeof(urls) - off, "%sredis://127.0.0.1:%d",
                                i ? "," : "", R[i].port);
    }
}

static void stop_nodes(void)
{
    for (int i = 0; i < nodes; i++)
        if (R[i].pid > 0)
            th_redis_stop(&R[i]);
}

static void lockd_on(struct th_lockd *l)
{
    const char *args[] = {"--redis", urls,           "--threads", "2", "--backend_timeout_ms",
                          "500",     "--key_prefix", "rl:",       NULL};
    th_lockd_start(l, args, NULL);
}

static long http_status(struct th_client *c, const char *method, const char *url, const char *body,
                        const char *lease_hdr, struct th_resp *keep)
{
    const char *hdrs[] = {lease_hdr, NULL};
    struct th_resp r;
    th_http(c, method, url, body, lease_hdr ? hdrs : NULL, &r);
    long st = r.status;
    if (keep != NULL)
        *keep = r;
    else
        th_resp_free(&r);
    return st;
}

static long readyz(const struct th_lockd *l, struct th_client *c)
{
    char url[128];
    snprintf(url, sizeof(url), "%s/readyz", l->url);
    return http_status(c, "GET", url, NULL, NULL, NULL);
}

static bool readyz_becomes(const struct th_lockd *l, struct th_client *c, long want,
                           int64_t timeout_ms)
{
    int64_t end = th_now_ms() + timeout_ms;
    for (;;) {
        if (readyz(l, c) == want)
            return true;
        if (th_now_ms() >= end)
            return false;
        th_sleep_ms(20);
    }
}

/* ---- mutual exclusion: 2 lockd × 32 clients × 8 names ---- */

#define CLIENTS 32
#define NAMES 8
#define ROUNDS 6

static struct th_lockd L1, L2;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long long last[NAMES];
static atomic_int holders[NAMES];
static atomic_int overlaps, regressions, grants, failures, refused, unavailable;
static atomic_bool tolerate_down; /* a fault case: 503 and 409 are fine, 200 must be right */
static atomic_bool stop_load;

static void load_reset(void)
{
    memset(last, 0, sizeof(last));
    for (int i = 0; i < NAMES; i++)
        atomic_store(&holders[i], 0);
    atomic_store(&overlaps, 0);
    atomic_store(&regressions, 0);
    atomic_store(&grants, 0);
    atomic_store(&failures, 0);
    atomic_store(&refused, 0);
    atomic_store(&unavailable, 0);
    atomic_store(&stop_load, false);
}

/* One acquire (waiting up to wait_ms) of name slot, held a moment, released. */
static void one_pair(struct th_client *c, const struct th_lockd *l, int slot, long id)
{
    char url[128], body[128], hdr[96];
    snprintf(url, sizeof(url), "%s/locks/rl-%d", l->url, slot);
    snprintf(body, sizeof(body), "{\"ttl_ms\":10000,\"wait_ms\":10000,\"owner\":\"c%ld\"}", id);
    struct th_resp r;
    th_http(c, "POST", url, body, NULL, &r);
    if (r.status != 200) {
        if (r.status == 503 || r.status == 409) {
            atomic_fetch_add(r.status == 503 ? &unavailable : &refused, 1);
            if (!atomic_load(&tolerate_down))
                atomic_fetch_add(&failures, 1);
        } else {
            static atomic_int said;
            if (atomic_fetch_add(&said, 1) < 5) /* the first few: a flood hides the cause */
                fprintf(stderr, "client %ld: acquire %ld %s\n", id, r.status, r.body);
            atomic_fetch_add(&failures, 1);
        }
        th_resp_free(&r);
        return;
    }
    long long token = th_jint(&r, "fencing_token");
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    if (atomic_fetch_add(&holders[slot], 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    pthread_mutex_lock(&mu);
    if (token <= last[slot]) {
        fprintf(stderr, "rl-%d: token %lld after %lld\n", slot, token, last[slot]);
        atomic_fetch_add(&regressions, 1);
    }
    last[slot] = token;
    pthread_mutex_unlock(&mu);
    atomic_fetch_add(&grants, 1);
    th_sleep_ms(1);
    atomic_fetch_sub(&holders[slot], 1);
    long st = http_status(c, "DELETE", url, NULL, hdr, NULL);
    /* in a fault case a release may find no majority (503), or, after two
     * of three nodes restarted empty, a lease that no majority holds any
     * more (404, or 409 when a lease re-asserted there by a lockd, issue 25,
     * now holds those nodes): the lock was lost with the majority's data.
     * Exclusion itself is what overlaps and regressions check. */
    if (st != 200 &&
        !(atomic_load(&tolerate_down) && (st == 503 || st == 404 || st == 409))) {
        fprintf(stderr, "client %ld: release %ld\n", id, st);
        atomic_fetch_add(&failures, 1);
    }
}

static void *client(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = id % 2 ? &L1 : &L2;
    for (int i = 0; i < ROUNDS; i++)
        one_pair(c, l, (int)((id + i) % NAMES), id);
    th_client_free(c);
    return NULL;
}

static void run_clients(void)
{
    pthread_t th[CLIENTS];
    for (long i = 0; i < CLIENTS; i++)
        CHECK(pthread_create(&th[i], NULL, client, (void *)i) == 0);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
}

static void mutual_exclusion(int n)
{
    start_nodes(n);
    load_reset();
    lockd_on(&L1);
    lockd_on(&L2);
    int64_t t0 = th_now_ms();
    run_clients();
    printf("# %d nodes: %d grants across 2 lockd in %lld ms, %d overlaps, %d token regressions, "
           "%d failures\n",
           n, atomic_load(&grants), (long long)(th_now_ms() - t0), atomic_load(&overlaps),
           atomic_load(&regressions), atomic_load(&failures));
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&regressions), 0);
    CHECK_EQ_INT(atomic_load(&failures), 0);
    CHECK_EQ_INT(atomic_load(&grants), CLIENTS * ROUNDS);
    th_lockd_kill(&L1, SIGTERM);
    th_lockd_kill(&L2, SIGTERM);
    stop_nodes();
}

static void t_mutual_exclusion_3(void)
{
    mutual_exclusion(3);
}

static void t_mutual_exclusion_5(void)
{
    mutual_exclusion(5);
}

/* ---- nodes killed mid-load ---- */

static void *loader(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = id % 2 ? &L1 : &L2;
    for (int i = 0; !atomic_load(&stop_load) && i < 100000; i++)
        one_pair(c, l, (int)((id + i) % NAMES), id);
    th_client_free(c);
    return NULL;
}

#define LOADERS 8

/* Only 503 or 409 while a majority is gone: never a grant. */
static void check_no_grant(const struct th_lockd *l, struct th_client *c)
{
    char url[128];
    for (int i = 0; i < 10; i++) {
        snprintf(url, sizeof(url), "%s/locks/nomajority-%d", l->url, i);
        long st = http_status(c, "POST", url, "{\"ttl_ms\":5000}", NULL, NULL);
        if (st != 503 && st != 409)
            th_fail(__FILE__, __LINE__, "acquire without a majority: %ld", st);
    }
}

static void t_nodes_killed_mid_load(void)
{
    start_nodes(3);
    load_reset();
    atomic_store(&tolerate_down, true);
    lockd_on(&L1);
    lockd_on(&L2);
    struct th_client *c = th_client_new();
    pthread_t th[LOADERS];
    for (long i = 0; i < LOADERS; i++)
        CHECK(pthread_create(&th[i], NULL, loader, (void *)i) == 0);
    th_sleep_ms(300);
    int before = atomic_load(&grants);
    printf("# all nodes up: %d grants in 300 ms\n", before);
    int port0 = R[0].port, port1 = R[1].port;
    th_redis_stop(&R[0]); /* SIGKILL: one of three */
    th_sleep_ms(800);
    int during = atomic_load(&grants);
    CHECK_EQ_INT(readyz(&L1, c), 200);
    CHECK(during > before); /* still granting on two of three */
    printf("# one node down: %d grants in 800 ms\n", during - before);

    th_redis_stop(&R[1]); /* two of three: no majority */
    th_sleep_ms(100);
    int at_loss = atomic_load(&grants);
    CHECK(readyz_becomes(&L1, c, 503, 3000));
    CHECK(readyz_becomes(&L2, c, 503, 3000));
    check_no_grant(&L1, c);
    th_sleep_ms(700);
    /* a grant answered after the loss was decided before it (at most one
     * round trip in flight per client) */
    CHECK(atomic_load(&grants) - at_loss <= LOADERS);
    int frozen = atomic_load(&grants);
    th_sleep_ms(500);
    CHECK_EQ_INT(atomic_load(&grants), frozen);

    th_redis_start(&R[0], port0, NULL); /* back, empty */
    th_redis_start(&R[1], port1, NULL);
    /* Both come back empty: each lockd re-asserts its leases there and
     * grants nothing new for restart_grace_ms (2 s) after (issue 25), on
     * top of the reconnect backoff (up to 1 s); and a lease whose release
     * found no majority (503) is re-asserted too, so its name stays held
     * until its ttl (10 s) runs out. Service resumes within that. */
    CHECK(readyz_becomes(&L1, c, 200, 15000));
    CHECK(readyz_becomes(&L2, c, 200, 15000));
    int64_t t0 = th_now_ms();
    while (atomic_load(&grants) < frozen + 20 && th_now_ms() - t0 < 15000)
        th_sleep_ms(20);
    CHECK(atomic_load(&grants) >= frozen + 20);
    atomic_store(&stop_load, true);
    for (int i = 0; i < LOADERS; i++)
        pthread_join(th[i], NULL);
    printf("# %d grants, %d refused, %d unavailable, %d overlaps, %d token regressions, %d "
           "failures\n",
           atomic_load(&grants), atomic_load(&refused), atomic_load(&unavailable),
           atomic_load(&overlaps), atomic_load(&regressions), atomic_load(&failures));
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&regressions), 0);
    CHECK_EQ_INT(atomic_load(&failures), 0);
    atomic_store(&tolerate_down, false);
    th_client_free(c);
    th_lockd_kill(&L1, SIGTERM);
    th_lockd_kill(&L2, SIGTERM);
    stop_nodes();
}

/* ---- a paused node ---- */

/* A node that stops answering (SIGSTOP: connections open, nothing read)
 * slows nothing: the majority answers every request in about one round
 * trip, far below backend_timeout_ms. */
static void t_paused_node(void)
{
    start_nodes(3);
    struct th_lockd l;
    lockd_on(&l);
    struct th_client *c = th_client_new();
    CHECK(kill(R[2].pid, SIGSTOP) == 0);
    char url[128], hdr[96];
    int64_t worst = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(url, sizeof(url), "%s/locks/paused-%d", l.url, i % 4);
        int64_t t0 = th_now_ms();
        struct th_resp r;
        th_http(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        CHECK_EQ_INT(http_status(c, "PUT", url, "{}", hdr, NULL), 200);
        CHECK_EQ_INT(http_status(c, "GET", url, NULL, NULL, NULL), 200);
        CHECK_EQ_INT(http_status(c, "DELETE", url, NULL, hdr, NULL), 200);
        int64_t took = th_now_ms() - t0;
        if (took > worst)
            worst = took;
    }
    printf("# one node paused: slowest acquire+renew+inspect+release %lld ms\n", (long long)worst);
    CHECK(worst < TIMEOUT_MS + 200 * th_time_scale());
    CHECK_EQ_INT(readyz(&l, c), 200);
    CHECK(kill(R[2].pid, SIGCONT) == 0);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    stop_nodes();
}

/* ---- a minority node restarted empty ---- */

static long long acquire_token(struct th_client *c, const char *url, char *hdr, size_t cap)
{
    struct th_resp r;
    th_http(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r);
    if (r.status != 200)
        th_fail(__FILE__, __LINE__, "acquire %s: %ld %s", url, r.status, r.body);
    long long t = th_jint(&r, "fencing_token");
    snprintf(hdr, cap, "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    return t;
}

/* Nodes 0 and 1 have the name's counter far ahead of node 2's (as when
 * another lockd's clock is ahead, or the counters come from a persistence
 * node 2 lacks), so every majority's token comes from them; the write-back
 * raises node 2 to it before the grant is answered. Node 0 then restarts
 * empty and node 1 is paused: the only majority, nodes 0 and 2, still
 * counts past the token, from node 2's raised counter.
 *
 * The mutant without the write-back (build with -DLOCKD_REDLOCK_NO_WRITEBACK:
 * backend_redlock.c then counts every granting node as holding the token
 * without raising it) fails the check marked below: node 2 kept its
 * wall-clock counter, so the token goes back by about 10^12.
 *
 * A lock held when node 0 loses it stays held (nodes 1 and 2 refuse anyone
 * else): the delayed-restart rule matters when a second node loses its data
 * within one ttl. */
static void t_minority_restart_empty(void)
{
    start_nodes(3);
    struct th_lockd l;
    lockd_on(&l);
    struct th_client *c = th_client_new();
    char url[128], held_url[128], hdr[96], held_hdr[96], cmd[128];
    snprintf(url, sizeof(url), "%s/locks/wb", l.url);
    snprintf(held_url, sizeof(held_url), "%s/locks/wb-held", l.url);
    long long t0 = acquire_token(c, url, hdr, sizeof(hdr));
    CHECK_EQ_INT(http_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    long long ahead = t0 + 1000000000000LL; /* ~11 days of microseconds */
    snprintf(cmd, sizeof(cmd), "SET rl:{wb}:fence %lld", ahead);
    for (int i = 0; i < 2; i++)
        CHECK(strstr(th_redis_cli(&R[i], cmd), "OK") != NULL);

    long long t1 = acquire_token(c, url, hdr, sizeof(hdr));
    CHECK(t1 > ahead);
    CHECK_EQ_INT(http_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    int64_t end = th_now_ms() + 2000; /* node 2 may have voted after the majority */
    while (atoll(th_redis_cli(&R[2], "GET rl:{wb}:fence")) < t1 && th_now_ms() < end)
        th_sleep_ms(10);
    acquire_token(c, held_url, held_hdr, sizeof(held_hdr));

    int port = R[0].port;
    th_redis_stop(&R[0]);
    th_redis_start(&R[0], port, NULL); /* empty */
    CHECK(readyz_becomes(&l, c, 200, 5000));
    CHECK(kill(R[1].pid, SIGSTOP) == 0); /* the majority is nodes 0 and 2 */
    end = th_now_ms() + 3000;
    struct th_resp r;
    for (;;) { /* until node 0's connection is back */
        th_http(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r);
        if (r.status != 503 || th_now_ms() >= end)
            break;
        th_resp_free(&r);
        th_sleep_ms(20);
    }
    CHECK_EQ_INT(r.status, 200);
    long long t2 = th_jint(&r, "fencing_token");
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    printf("# token before node 0's restart %lld, after %lld\n", t1, t2);
    CHECK(t2 > t1); /* the mutant without the write-back fails here */
    CHECK_EQ_INT(http_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    CHECK(kill(R[1].pid, SIGCONT) == 0);

    /* the lock held across node 0's loss: nobody else gets it */
    CHECK_EQ_INT(http_status(c, "POST", held_url, "{\"ttl_ms\":5000}", NULL, NULL), 409);
    CHECK_EQ_INT(http_status(c, "PUT", held_url, "{}", held_hdr, NULL), 200);
    CHECK_EQ_INT(http_status(c, "DELETE", held_url, NULL, held_hdr, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    stop_nodes();
}

/* ---- a lock lost on some nodes ---- */

static bool session_reports_lost(struct th_client *c, const char *surl, const char *name)
{
    struct th_resp r;
    th_http(c, "GET", surl, NULL, NULL, &r);
    bool lost = false;
    json_t *a = r.json ? json_object_get(r.json, "lost") : NULL;
    for (size_t i = 0; a != NULL && i < json_array_size(a); i++)
        lost = lost || strcmp(json_string_value(json_array_get(a, i)), name) == 0;
    th_resp_free(&r);
    return lost;
}

static void t_renew_after_loss(void)
{
    start_nodes(3);
    struct th_lockd l;
    lockd_on(&l);
    struct th_client *c = th_client_new();
    char url[128], hdr[96], surl[160], body[160];
    snprintf(url, sizeof(url), "%s/locks/lost", l.url);
    long long t = acquire_token(c, url, hdr, sizeof(hdr));
    th_redis_cli(&R[0], "DEL rl:{lost}");
    struct th_resp r;
    th_http(c, "PUT", url, "{}", (const char *const[]){hdr, NULL}, &r);
    CHECK_EQ_INT(r.status, 200); /* two of three still hold it */
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), t);
    CHECK(th_jint(&r, "ttl_ms") <= 5000 && th_jint(&r, "ttl_ms") > 4000); /* the validity */
    th_resp_free(&r);
    th_redis_cli(&R[1], "DEL rl:{lost}");
    CHECK_EQ_INT(http_status(c, "PUT", url, "{}", hdr, NULL), 404);

    /* a session's lock: the watchdog finds it lost on two of three */
    snprintf(surl, sizeof(surl), "%s/sessions", l.url);
    th_http(c, "POST", surl, "{\"ttl_ms\":10000}", NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    char sid[64];
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(surl, sizeof(surl), "%s/sessions/%s", l.url, sid);
    snprintf(url, sizeof(url), "%s/locks/lost-s", l.url);
    snprintf(body, sizeof(body), "{\"ttl_ms\":600,\"session\":\"%s\"}", sid);
    CHECK_EQ_INT(http_status(c, "POST", url, body, NULL, NULL), 200);
    th_redis_cli(&R[2], "DEL rl:{lost-s}");
    th_sleep_ms(500); /* renewed twice on the other two: still held */
    CHECK(!session_reports_lost(c, surl, "lost-s"));
    th_redis_cli(&R[1], "DEL rl:{lost-s}");
    int64_t end = th_now_ms() + 3000;
    bool lost = false;
    while (!(lost = session_reports_lost(c, surl, "lost-s")) && th_now_ms() < end)
        th_sleep_ms(20);
    CHECK(lost);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    stop_nodes();
}

/* A node that granted after the majority decided (its reply timed out:
 * no write-back reaches it) holds the lease under a token of its own. A
 * renewal answers the token a majority holds, the grant's, never that
 * node's larger one: that token was never granted, and a later grant may
 * get it too. model/redlock.pml found this (the renewal answered the
 * largest token of the nodes that renewed); without the fix the check
 * marked below sees node 2's 9e15 + 1. */
static void t_renew_token_is_the_grants(void)
{
    start_nodes(3);
    struct th_lockd l;
    lockd_on(&l);
    struct th_client *c = th_client_new();
    char url[128], hdr[96];
    snprintf(url, sizeof(url), "%s/locks/tok", l.url);
    th_redis_cli(&R[2], "SET rl:{tok}:fence 9000000000000000");
    CHECK(kill(R[2].pid, SIGSTOP) == 0);
    long long t = acquire_token(c, url, hdr, sizeof(hdr)); /* nodes 0 and 1 */
    CHECK(t < 9000000000000000LL);
    th_sleep_ms(TIMEOUT_MS + 300); /* node 2's reply is overdue: its connection dropped */
    CHECK(kill(R[2].pid, SIGCONT) == 0);
    /* node 2 still runs the acquire it had read: it grants under its counter */
    int64_t end = th_now_ms() + 3000 * th_time_scale();
    bool late = false;
    while (!(late = strstr(th_redis_cli(&R[2], "GET rl:{tok}"), " 9000000000000001 ") != NULL) &&
           th_now_ms() < end)
        th_sleep_ms(20);
    struct th_resp r;
    th_http(c, "PUT", url, "{}", (const char *const[]){hdr, NULL}, &r);
    CHECK_EQ_INT(r.status, 200);
    printf("# grant %lld; node 2 %s; renewal answers %lld\n", t,
           late ? "granted late under 9000000000000001" : "did not grant late",
           th_jint(&r, "fencing_token"));
    CHECK(late);                                   /* else the case did not arise */
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), t); /* <- the largest token before the fix */
    th_resp_free(&r);
    CHECK_EQ_INT(http_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    stop_nodes();
}

/* ---- config ---- */

/* /readyz and /metrics name every node; semaphores are refused. */
static void t_ops_and_refusals(void)
{
    start_nodes(3);
    struct th_lockd l;
    lockd_on(&l);
    struct th_client *c = th_client_new();
    char url[128], want[64];
    snprintf(url, sizeof(url), "%s/metrics", l.url);
    struct th_resp r;
    th_http(c, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof(want), "lockd_backend_up{node=\"127.0.0.1:%d\"} 1", R[i].port);
        CHECK(strstr(r.body, want) != NULL);
    }
    CHECK(strstr(r.body, "backend=\"redlock\"") != NULL);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/locks/sem", l.url);
    th_http(c, "POST", url, "{\"limit\":2}", NULL, &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), "unsupported_by_backend");
    th_resp_free(&r);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    stop_nodes();
}

static const char *only;
#define RUN(fn)                                                                                    \
    do {                                                                                           \
        if (only == NULL || strcmp(only, #fn) == 0)                                                \
            TH_RUN(fn);                                                                            \
    } while (0)

int main(int argc, char **argv)
{
    only = argc > 1 ? argv[1] : NULL;
    RUN(t_mutual_exclusion_3);
    RUN(t_mutual_exclusion_5);
    RUN(t_nodes_killed_mid_load);
    RUN(t_paused_node);
    RUN(t_minority_restart_empty);
    RUN(t_renew_after_loss);
    RUN(t_renew_token_is_the_grants);
    RUN(t_ops_and_refusals);
    return th_done();
}
