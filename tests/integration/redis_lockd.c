/*
 * redis_lockd.c - issue 3 end to end: real lockd processes sharing one real
 * redis-server. Two lockd processes and 32 clients on one name (never two
 * holders, tokens increasing in grant order) and on many names (the same,
 * with operations grouped into fewer script calls), Redis killed mid-load (never a
 * 200 while it is down, back within 5 s), expiry seen across processes,
 * requirepass / ACL / wrong password at startup and at runtime, /readyz
 * following Redis (down, auth refused, read-only replica), and one Redis
 * command per acquire, renew and release seen with MONITOR, a client
 * (plain or waiting) that hangs up while its grant is at a frozen Redis, and
 * (issue 21) requests right after a Redis paused past backend_timeout_ms
 * resumes, which wait for the reconnect instead of failing at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/harness.h"

static struct th_redis R;
static char redis_url[128];

static void lockd_on(struct th_lockd *l, const char *url)
{
    const char *args[] = {"--redis", url, "--threads", "2", "--backend_timeout_ms", "500", NULL};
    th_lockd_start(l, args, NULL);
}

/* ---- two lockd, 32 clients, one name ---- */

#define CLIENTS 32
#define ROUNDS 8

static struct th_lockd L1, L2;
static pthread_mutex_t grant_mu = PTHREAD_MUTEX_INITIALIZER;
static long long last_token;
static atomic_int holders, overlaps, regressions, grants, failures;

static void *contender(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = id % 2 ? &L1 : &L2;
    char url[128], body[128], hdr[96];
    snprintf(url, sizeof(url), "%s/locks/contended", l->url);
    snprintf(body, sizeof(body), "{\"ttl_ms\":10000,\"wait_ms\":20000,\"owner\":\"c%ld\"}", id);
    for (int i = 0; i < ROUNDS; i++) {
        long long token = 0;
        char err[256];
        long st = th_grant(c, url, body, &token, hdr, sizeof(hdr), err, sizeof(err));
        if (st != 200) {
            fprintf(stderr, "client %ld: acquire %ld %s\n", id, st, err);
            atomic_fetch_add(&failures, 1);
            continue;
        }
        /* the grant is only seen while held: order of entries = grant order */
        pthread_mutex_lock(&grant_mu);
        if (atomic_fetch_add(&holders, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        if (token <= last_token)
            atomic_fetch_add(&regressions, 1);
        last_token = token;
        pthread_mutex_unlock(&grant_mu);
        atomic_fetch_add(&grants, 1);
        th_sleep_ms(1);
        atomic_fetch_sub(&holders, 1);
        if (th_status(c, "DELETE", url, NULL, hdr, NULL) != 200)
            atomic_fetch_add(&failures, 1);
    }
    th_client_free(c);
    return NULL;
}

static void t_two_lockd_32_clients(void)
{
    lockd_on(&L1, redis_url);
    lockd_on(&L2, redis_url);
    pthread_t th[CLIENTS];
    for (long i = 0; i < CLIENTS; i++)
        CHECK(pthread_create(&th[i], NULL, contender, (void *)i) == 0);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    printf("# %d grants across 2 lockd, %d overlaps, %d token regressions, %d failures\n",
           atomic_load(&grants), atomic_load(&overlaps), atomic_load(&regressions),
           atomic_load(&failures));
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&regressions), 0);
    CHECK_EQ_INT(atomic_load(&failures), 0);
    CHECK_EQ_INT(atomic_load(&grants), CLIENTS * ROUNDS);
}

/* ---- two lockd, 32 clients, many names: grouped calls ---- */

#define MN_NAMES 8
#define MN_ROUNDS 40

static pthread_mutex_t mn_mu = PTHREAD_MUTEX_INITIALIZER;
static long long mn_last[MN_NAMES];
static atomic_int mn_holders[MN_NAMES];
static atomic_int mn_overlaps, mn_regressions, mn_failures, mn_grants, mn_refused, mn_ops;

/* One try-once acquire and its release; returns the status of the acquire. */
static long mn_pair(struct th_client *c, const char *url, int slot)
{
    struct th_resp r;
    th_http(c, "POST", url, "{\"ttl_ms\":10000}", NULL, &r);
    atomic_fetch_add(&mn_ops, 1);
    long st = r.status;
    if (st != 200) {
        if (st != 409 || slot < 0) {
            fprintf(stderr, "%s: acquire %ld %s\n", url, st, r.body);
            atomic_fetch_add(&mn_failures, 1);
        }
        th_resp_free(&r);
        return st;
    }
    char hdr[96];
    long long token = th_jint(&r, "fencing_token");
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    if (slot >= 0) {
        if (atomic_fetch_add(&mn_holders[slot], 1) != 0)
            atomic_fetch_add(&mn_overlaps, 1);
        pthread_mutex_lock(&mn_mu);
        if (token <= mn_last[slot])
            atomic_fetch_add(&mn_regressions, 1);
        mn_last[slot] = token;
        pthread_mutex_unlock(&mn_mu);
        th_sleep_ms(1); /* held a while, so that a second holder would overlap */
        atomic_fetch_sub(&mn_holders[slot], 1);
    }
    atomic_fetch_add(&mn_ops, 1);
    if (th_status(c, "DELETE", url, NULL, hdr, NULL) != 200)
        atomic_fetch_add(&mn_failures, 1);
    return st;
}

static void *mn_client(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = id % 2 ? &L1 : &L2;
    char shared[128], own[128];
    snprintf(own, sizeof(own), "%s/locks/mn-own-%ld", l->url, id);
    for (int i = 0; i < MN_ROUNDS; i++) {
        int slot = (int)((id + i) % MN_NAMES);
        snprintf(shared, sizeof(shared), "%s/locks/mn-%d", l->url, slot);
        long st = mn_pair(c, shared, slot);
        if (st == 200)
            atomic_fetch_add(&mn_grants, 1);
        else if (st == 409)
            atomic_fetch_add(&mn_refused, 1);
        (void)mn_pair(c, own, -1); /* nobody else asks for it: always granted */
    }
    th_client_free(c);
    return NULL;
}

/* Concurrent acquires and releases of many names reach Redis in groups (one
 * acquire_many.lua / release_many.lua call for those one loop turn makes):
 * still one holder per name, tokens increasing, every grant released by
 * its lease, and fewer script calls than operations. */
static void t_two_lockd_many_names(void)
{
    long long e0 = th_redis_calls(&R, "fcall");
    pthread_t th[CLIENTS];
    for (long i = 0; i < CLIENTS; i++)
        CHECK(pthread_create(&th[i], NULL, mn_client, (void *)i) == 0);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    long long calls = th_redis_calls(&R, "fcall") - e0;
    printf("# %d grants and %d refusals of shared names, %d overlaps, %d token regressions, "
           "%d failures; %d operations in %lld script calls\n",
           atomic_load(&mn_grants), atomic_load(&mn_refused), atomic_load(&mn_overlaps),
           atomic_load(&mn_regressions), atomic_load(&mn_failures), atomic_load(&mn_ops), calls);
    CHECK_EQ_INT(atomic_load(&mn_overlaps), 0);
    CHECK_EQ_INT(atomic_load(&mn_regressions), 0);
    CHECK_EQ_INT(atomic_load(&mn_failures), 0);
    CHECK_EQ_INT(atomic_load(&mn_grants) + atomic_load(&mn_refused), CLIENTS * MN_ROUNDS);
    CHECK(atomic_load(&mn_grants) > 0);
    CHECK(calls > 0 && calls < atomic_load(&mn_ops));
    CHECK_EQ_INT(atoll(th_redis_cli(&R, "EVAL \"return #redis.call('KEYS', 'lockd:{mn-*}')\" 0")),
                 0);
}

/* ---- expiry and wrong leases across processes ---- */

static void t_expiry_across_lockd(void)
{
    struct th_client *c = th_client_new();
    char u1[128], u2[128], hdr[96];
    snprintf(u1, sizeof(u1), "%s/locks/short", L1.url);
    snprintf(u2, sizeof(u2), "%s/locks/short", L2.url);
    struct th_resp r;
    CHECK_EQ_INT(th_status(c, "POST", u1, "{\"ttl_ms\":300}", NULL, &r), 200);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(th_status(c, "POST", u2, "{\"ttl_ms\":300}", NULL, &r), 409);
    CHECK_STR(th_jerr(&r), "locked");
    th_resp_free(&r);
    /* a wrong lease never releases or renews, through either process */
    const char *wrong = "Lock-Lease: 00000000000000000000000000000000";
    CHECK_EQ_INT(th_status(c, "DELETE", u2, NULL, wrong, &r), 409);
    CHECK_STR(th_jerr(&r), "held_by_other");
    th_resp_free(&r);
    CHECK_EQ_INT(th_status(c, "PUT", u1, NULL, wrong, NULL), 409);
    /* the real lease renews through the other lockd: state lives in Redis */
    CHECK_EQ_INT(th_status(c, "PUT", u2, "{\"ttl_ms\":300}", hdr, NULL), 200);
    th_sleep_ms(450);
    CHECK_EQ_INT(th_status(c, "POST", u2, "{\"ttl_ms\":5000}", NULL, NULL), 200);
    CHECK_EQ_INT(th_status(c, "DELETE", u1, NULL, hdr, &r), 409); /* expired: someone else's */
    th_resp_free(&r);
    th_client_free(c);
}

/* ---- Redis killed mid-load ---- */

static atomic_bool stop_load;
static atomic_llong down_from_ms, down_until_ms; /* kill done .. restart begins */
static atomic_int bad_grants, load_ok, load_503;

static void *loader(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    char url[128], hdr[96];
    int i = 0;
    while (!atomic_load(&stop_load)) {
        snprintf(url, sizeof(url), "%s/locks/load-%ld-%d", (id % 2 ? &L1 : &L2)->url, id, i++ % 4);
        int64_t sent = th_now_ms();
        struct th_resp r;
        th_http(c, "POST", url, "{\"ttl_ms\":2000}", NULL, &r);
        int64_t got = th_now_ms();
        if (r.status == 200) {
            atomic_fetch_add(&load_ok, 1);
            long long from = atomic_load(&down_from_ms), until = atomic_load(&down_until_ms);
            /* sent after Redis was dead and answered before it came back */
            if (from > 0 && sent >= from && (until == 0 || got <= until))
                atomic_fetch_add(&bad_grants, 1);
            snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
            th_resp_free(&r);
            (void)th_status(c, "DELETE", url, NULL, hdr, NULL);
            continue;
        }
        if (r.status == 503) {
            /* down, or (issue 25) back empty: leases re-asserted, then the grace */
            CHECK(strcmp(th_jerr(&r), "backend_unavailable") == 0 ||
                  strcmp(th_jerr(&r), "backend_recovering") == 0);
            atomic_fetch_add(&load_503, 1);
        }
        th_resp_free(&r);
        th_sleep_ms(2);
    }
    th_client_free(c);
    return NULL;
}

static bool ready(const struct th_lockd *l, struct th_client *c)
{
    char url[128];
    snprintf(url, sizeof(url), "%s/readyz", l->url);
    return th_status(c, "GET", url, NULL, NULL, NULL) == 200;
}

/* Enough clients that a loop queues more commands in one iteration than
 * backend_redis.c's FLUSH_EVERY, so its early writes meet the dead socket. */
#define LOADERS 48

static void t_redis_killed_mid_load(void)
{
    struct th_client *c = th_client_new();
    pthread_t th[LOADERS];
    for (long i = 0; i < LOADERS; i++)
        CHECK(pthread_create(&th[i], NULL, loader, (void *)i) == 0);
    th_sleep_ms(300);
    int before = atomic_load(&load_ok);
    CHECK(before > 0);
    th_redis_stop(&R); /* SIGKILL + wait: dead from here */
    atomic_store(&down_from_ms, th_now_ms());
    th_sleep_ms(800);
    struct th_resp r;
    char url[128];
    snprintf(url, sizeof(url), "%s/readyz", L1.url);
    CHECK_EQ_INT(th_status(c, "GET", url, NULL, NULL, &r), 503);
    printf("# readyz while down: %s\n", r.body);
    CHECK(strstr(r.body, "\"reason\"") != NULL);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/healthz", L1.url);
    CHECK_EQ_INT(th_status(c, "GET", url, NULL, NULL, NULL), 200);
    atomic_store(&down_until_ms, th_now_ms());
    th_redis_start(&R, R.port, NULL);
    int64_t back = th_now_ms();
    int after = atomic_load(&load_ok);
    while (atomic_load(&load_ok) < after + 20 && th_now_ms() - back < 5000)
        th_sleep_ms(10);
    printf("# grants resumed %lld ms after restart; %d answered 503 while down\n",
           (long long)(th_now_ms() - back), atomic_load(&load_503));
    CHECK(atomic_load(&load_ok) >= after + 20);
    atomic_store(&stop_load, true);
    for (int i = 0; i < LOADERS; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ_INT(atomic_load(&bad_grants), 0);
    CHECK(atomic_load(&load_503) > 0);
    /* every loop's connection is back within its backoff cap (1 s) */
    int64_t t0 = th_now_ms();
    while (!(ready(&L1, c) && ready(&L2, c)) && th_now_ms() - t0 < 3000)
        th_sleep_ms(20);
    CHECK(ready(&L1, c) && ready(&L2, c));
    th_client_free(c);
}

/* ---- a client that hangs up while its grant is on the way ---- */

/* A lockd on R whose backend timeout outlasts the freezes below: a command
 * that timed out would be in doubt (503), not the case these tests make. */
static void lockd_patient(struct th_lockd *l, long long timeout_ms)
{
    char tmo[24];
    snprintf(tmo, sizeof(tmo), "%lld", timeout_ms < 60000 ? timeout_ms : 60000);
    const char *args[] = {"--redis", redis_url, "--backend_timeout_ms", tmo, NULL};
    th_lockd_start(l, args, NULL);
}

/* Freezes R (SIGSTOP: it accepts, reads and answers nothing); returns its
 * EVALSHA count so far, for resume_expect_given_back. */
static long long freeze_redis(void)
{
    long long calls = th_redis_calls(&R, "fcall");
    kill(R.pid, SIGSTOP);
    return calls;
}

/* Resumes the frozen R, then checks that the grant the hung-up client missed
 * was made (one EVALSHA since calls0) and given back (a second one): name is
 * free at once, long before its ttl. */
static void resume_expect_given_back(struct th_client *c, const struct th_lockd *l,
                                     const char *name, long long calls0)
{
    kill(R.pid, SIGCONT);
    int64_t t0 = th_now_ms();
    while (th_redis_calls(&R, "fcall") < calls0 + 2 && th_now_ms() - t0 < 3000 * th_time_scale())
        th_sleep_ms(10);
    CHECK(th_redis_calls(&R, "fcall") - calls0 >= 2);
    char cmd[128], url[160], hdr[96];
    snprintf(cmd, sizeof(cmd), "EXISTS lockd:{%s}", name);
    /* given back, long before the 30 s ttl (10 s at most: valgrind's lockd
     * is slow to send the give-back, and one CI run read the key between) */
    t0 = th_now_ms();
    while (strcmp(th_redis_cli(&R, cmd), "0\n") != 0 && th_now_ms() - t0 < 10000)
        th_sleep_ms(10);
    CHECK_STR(th_redis_cli(&R, cmd), "0\n");
    snprintf(url, sizeof(url), "%s/locks/%s", l->url, name);
    struct th_resp r;
    CHECK_EQ_INT(th_status(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r), 200);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(th_status(c, "DELETE", url, NULL, hdr, NULL), 200);
}

/* A raw acquire of name with a 30 s ttl, for writing to a socket by hand;
 * returns its length. */
static int acquire_request(char *buf, size_t cap, const char *name)
{
    return snprintf(buf, cap,
                    "POST /locks/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n"
                    "{\"ttl_ms\":30000}",
                    name);
}

/* The same for the name "<prefix>-<i>". */
static int acquire_request_nth(char *buf, size_t cap, const char *prefix, int i)
{
    char name[64];
    snprintf(name, sizeof(name), "%s-%d", prefix, i);
    return acquire_request(buf, cap, name);
}

/* A plain acquire is at a frozen Redis (SIGSTOP) when its client hangs up
 * (close, or a reset: SO_LINGER 0); Redis resumes and grants. Nobody can
 * learn that lease, so lockd gives the lock back at once instead of leaving
 * it held by no one for its 30 s ttl. Odd rounds first use the connection
 * for one request, so that its socket is in libmicrohttpd's epoll set. */
static void hang_up_at_redis(const char *name, bool reset)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    lockd_patient(&l, 2000 * scale);
    struct th_client *c = th_client_new();
    char rq[160];
    acquire_request(rq, sizeof(rq), name);
    for (int round = 0; round < 4; round++) {
        int fd = th_connect(l.port);
        if (round % 2 == 1)
            CHECK_EQ_INT(th_raw_request(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 0),
                         200);
        long long calls0 = freeze_redis();
        CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq));
        th_sleep_ms(100 * scale); /* parsed, and its EVALSHA sent to the frozen Redis */
        if (reset) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
        }
        close(fd);
        th_sleep_ms(100 * scale); /* lockd's loop ran and saw the hang-up, if it looks */
        resume_expect_given_back(c, &l, name, calls0);
    }
    th_client_free(c);
    CHECK_EQ_INT(th_lockd_signal_wait(&l, SIGTERM, 10000 * scale), 0);
}

static void t_hangup_while_at_redis(void)
{
    hang_up_at_redis("gone", false);
}

/* A plain acquire at Redis is held, not suspended (api/http.c, enum
 * req_park). After a reset on a connection whose socket is in its epoll
 * set, MHD closes the connection before the grant comes: lockd must keep
 * the request until Redis answers, then give the grant back (under ASan,
 * anything of the request freed with the connection is a use after free
 * here). On a fresh connection MHD has not added the socket yet, and the
 * grant's peek finds the reset. */
static void t_reset_while_at_redis(void)
{
    hang_up_at_redis("reset", true);
}

/* A held request is not cut by libmicrohttpd's idle timeout when the
 * backend may take longer to answer (backend_timeout_ms 5 s against
 * connection_timeout_ms 1 s): Redis is frozen for 2.5 s while an acquire is
 * at it, and the client still gets its grant on the same connection, which
 * then serves the release. */
static void t_held_outlasts_idle_timeout(void)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    const char *args[] = {
        "--redis", redis_url, "--backend_timeout_ms", "5000", "--connection_timeout_ms",
        "1000",    NULL};
    th_lockd_start(&l, args, NULL);
    char rq[160];
    acquire_request(rq, sizeof(rq), "slow");
    int fd = th_connect(l.port);
    freeze_redis();
    CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq));
    th_sleep_ms(2500);
    kill(R.pid, SIGCONT);
    char body[1024];
    CHECK_EQ_INT(th_raw_response(fd, body, sizeof(body)), 200);
    const char *lp = strstr(body, "\"lease\":\"");
    CHECK(lp != NULL);
    if (lp != NULL) {
        char rel[256];
        snprintf(rel, sizeof(rel),
                 "DELETE /locks/slow HTTP/1.1\r\nHost: x\r\nLock-Lease: %.32s\r\n\r\n", lp + 9);
        CHECK_EQ_INT(th_raw_request(fd, rel, body, sizeof(body)), 200);
    }
    close(fd);
    CHECK_STR(th_redis_cli(&R, "EXISTS lockd:{slow}"), "0\n");
    CHECK_EQ_INT(th_lockd_signal_wait(&l, SIGTERM, 10000 * scale), 0);
}

/* Five acquires pipelined in one write on one connection: each is held at
 * Redis in turn (libmicrohttpd takes the next from its buffer once the one
 * before is answered), and all five come back granted, in order. Then the
 * same five names again on a second connection: all five refused (409). */
static void t_pipelined_at_redis(void)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    lockd_patient(&l, 2000 * scale);
    enum { N = 5 };
    for (int pass = 0; pass < 2; pass++) {
        char all[N * 160];
        size_t len = 0;
        for (int i = 0; i < N; i++)
            len += (size_t)acquire_request_nth(all + len, sizeof(all) - len, "piped", i);
        int fd = th_connect(l.port);
        CHECK(write(fd, all, len) == (ssize_t)len);
        /* The answers may come in one read: take them all, then look. */
        const char *status = pass == 0 ? "HTTP/1.1 200 " : "HTTP/1.1 409 ";
        char got[16384] = "";
        size_t n = 0;
        int seen = 0;
        int64_t end = th_now_ms() + 5000 * scale;
        while (seen < N && th_now_ms() < end) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 100) <= 0)
                continue;
            ssize_t r = recv(fd, got + n, sizeof(got) - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            got[n] = '\0';
            seen = 0;
            for (const char *q = got; (q = strstr(q, status)) != NULL; q++)
                seen++;
        }
        CHECK_EQ_INT(seen, N);
        const char *at = got; /* in order: piped-0 first */
        for (int i = 0; i < N && at != NULL; i++) {
            char want[48];
            snprintf(want, sizeof(want), "\"name\":\"piped-%d\"", i);
            at = pass == 0 ? strstr(at, want) : at;
            CHECK(at != NULL);
            if (at != NULL && pass == 0)
                at += strlen(want);
        }
        close(fd);
    }
    CHECK_EQ_INT(th_lockd_signal_wait(&l, SIGTERM, 10000 * scale), 0);
}

/* lockd is told to stop (SIGTERM) while 8 acquires are at a frozen Redis:
 * each client gets a 503, and lockd exits 0 (under ASan: nothing leaked,
 * nothing used after free). */
static void t_stop_while_at_redis(void)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    lockd_patient(&l, 4000 * scale);
    enum { N = 8 };
    int fd[N];
    freeze_redis();
    for (int i = 0; i < N; i++) {
        char rq[160];
        int n = acquire_request_nth(rq, sizeof(rq), "stop", i);
        fd[i] = th_connect(l.port);
        CHECK(write(fd[i], rq, (size_t)n) == n);
    }
    th_sleep_ms(200 * scale); /* all parsed, their EVALSHAs at the frozen Redis */
    kill(l.pid, SIGTERM);
    for (int i = 0; i < N; i++) {
        char body[512];
        CHECK_EQ_INT(th_raw_response(fd[i], body, sizeof(body)), 503);
        close(fd[i]);
    }
    CHECK_EQ_INT(th_lockd_signal_wait(&l, 0, 10000 * scale), 0);
    kill(R.pid, SIGCONT);
}

/* The same for a waiter: its retry at the holder's expiry is at a frozen
 * Redis when its client hangs up; Redis resumes, the holder has expired, the
 * waiter is granted, and lockd gives that grant back at once. */
static void t_waiter_hangup_while_at_redis(void)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    lockd_patient(&l, 4000 * scale);
    struct th_client *c = th_client_new();
    char url[128], body[64];
    snprintf(url, sizeof(url), "%s/locks/gone-w", l.url);
    long long ttl = 500 * scale;
    snprintf(body, sizeof(body), "{\"ttl_ms\":%lld}", ttl);
    int64_t t0 = th_now_ms();
    CHECK_EQ_INT(th_status(c, "POST", url, body, NULL, NULL), 200);
    int fd = th_connect(l.port);
    const char *rq = "POST /locks/gone-w HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n"
                     "{\"wait_ms\":60000}";
    CHECK(write(fd, rq, strlen(rq)) == (ssize_t)strlen(rq));
    th_sleep_ms(t0 + ttl * 6 / 10 - th_now_ms()); /* queued behind the holder */
    long long calls0 = freeze_redis();
    th_sleep_ms(t0 + ttl + 300 * scale - th_now_ms()); /* its retry is at Redis now */
    close(fd);
    th_sleep_ms(150 * scale);
    /* the waiter's attempt (granted: the holder expired), then the give-back */
    resume_expect_given_back(c, &l, "gone-w", calls0);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
}

/* The same for a waiter granted by a release (release_handoff.lua: the
 * release carries the queue's head, BK_CAP_HANDOFF): a semaphore of 2 is
 * full, one waiter queued; a slot's release is at a frozen Redis when the
 * waiter's client hangs up. Redis resumes: the release is answered 200, and
 * the grant it made for the waiter, which nobody can learn, is given back
 * at once (two EVALSHAs: the release with the grant, then the give-back),
 * not held for its 30 s ttl: one holder is left. */
static void t_rider_hangup_while_at_redis(void)
{
    long long scale = th_time_scale();
    struct th_lockd l;
    lockd_patient(&l, 4000 * scale);
    struct th_client *c = th_client_new();
    char url[128], lease[2][40];
    snprintf(url, sizeof(url), "%s/locks/gone-r", l.url);
    for (int i = 0; i < 2; i++) {
        struct th_resp r;
        CHECK_EQ_INT(th_status(c, "POST", url, "{\"limit\":2,\"ttl_ms\":30000}", NULL, &r), 200);
        snprintf(lease[i], sizeof(lease[i]), "%s",
                 th_jstr(&r, "lease") ? th_jstr(&r, "lease") : "");
        th_resp_free(&r);
    }
    int wfd = th_connect(l.port);
    const char *wq = "POST /locks/gone-r HTTP/1.1\r\nHost: x\r\nContent-Length: 42\r\n\r\n"
                     "{\"limit\":2,\"wait_ms\":60000,\"ttl_ms\":30000}";
    CHECK(write(wfd, wq, strlen(wq)) == (ssize_t)strlen(wq));
    th_sleep_ms(300 * scale); /* queued, refused once: it waits for a release */
    long long calls0 = freeze_redis();
    char rq[256];
    int n =
        snprintf(rq, sizeof(rq),
                 "DELETE /locks/gone-r HTTP/1.1\r\nHost: x\r\nLock-Lease: %s\r\n\r\n", lease[0]);
    int rfd = th_connect(l.port);
    CHECK(write(rfd, rq, (size_t)n) == n);
    th_sleep_ms(150 * scale); /* parsed, its EVALSHA (with the waiter's acquire) sent */
    close(wfd);
    th_sleep_ms(150 * scale); /* lockd saw the hang-up */
    kill(R.pid, SIGCONT);
    char body[1024];
    CHECK_EQ_INT(th_raw_response(rfd, body, sizeof(body)), 200);
    close(rfd);
    int64_t t0 = th_now_ms();
    while (th_redis_calls(&R, "fcall") < calls0 + 2 && th_now_ms() - t0 < 3000 * scale)
        th_sleep_ms(10);
    th_sleep_ms(100);
    CHECK_EQ_INT(th_redis_calls(&R, "fcall") - calls0, 2);
    struct th_resp r;
    CHECK_EQ_INT(th_status(c, "GET", url, NULL, NULL, &r), 200);
    CHECK_EQ_INT(th_jint(&r, "holders"), 1); /* the other slot only */
    CHECK_EQ_INT(th_jint(&r, "waiters"), 0);
    th_resp_free(&r);
    char hdr[96];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease[1]);
    CHECK_EQ_INT(th_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    CHECK_STR(th_redis_cli(&R, "EXISTS lockd:{gone-r}"), "0\n");
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
}

/* ---- Redis drops lockd's connection under a batch ---- */

/* lockd is stopped (SIGSTOP) with LOADERS acquires waiting to be read when
 * Redis closes its connections (CLIENT KILL). Resumed, one loop pass queues
 * them all on the dead connection, and the early writes (FLUSH_EVERY in
 * redis_node.c) meet the closed socket unless the read side sees the
 * close first. Either way: no grant on doubt (every answer is 503
 * backend_unavailable, or a 200 whose lease Redis really holds), lockd
 * stays up, and it serves again once it has reconnected. */
static void t_redis_gone_mid_batch(void)
{
    const char *args[] = {"--redis", redis_url, "--threads", "1", NULL};
    struct th_lockd l;
    th_lockd_start(&l, args, NULL);
    int fd[LOADERS];
    for (int i = 0; i < LOADERS; i++) {
        fd[i] = th_connect(l.port);
        CHECK_EQ_INT(th_raw_request(fd[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 0),
                     200);
    }
    kill(l.pid, SIGSTOP);
    th_redis_cli(&R, "CLIENT KILL TYPE normal");
    for (int i = 0; i < LOADERS; i++) {
        char rq[160];
        int n = acquire_request_nth(rq, sizeof(rq), "batch", i);
        CHECK(send(fd[i], rq, (size_t)n, MSG_NOSIGNAL) == n);
    }
    kill(l.pid, SIGCONT);
    int granted = 0, down = 0;
    for (int i = 0; i < LOADERS; i++) {
        char body[1024];
        int st = th_raw_response(fd[i], body, sizeof(body));
        close(fd[i]);
        if (st == 200) {
            const char *p = strstr(body, "\"lease\":\"");
            CHECK(p != NULL);
            char cmd[96], want[40];
            /* the lock's value starts '<w><lease> ' (server/scripts/acquire.lua) */
            snprintf(want, sizeof(want), "0%.32s ", p + 9);
            snprintf(cmd, sizeof(cmd), "GET lockd:{batch-%d}", i);
            CHECK(strncmp(th_redis_cli(&R, cmd), want, strlen(want)) == 0);
            granted++;
            continue;
        }
        if (st != 503 || strstr(body, "\"backend_unavailable\"") == NULL)
            th_fail(__FILE__, __LINE__, "acquire %d: %d %s", i, st, body);
        down++;
    }
    printf("# Redis gone under a batch of %d: %d answered 503, %d granted and held\n", LOADERS,
           down, granted);
    /* Before issue 21 at least one was answered 503 (the write met the dead
     * socket). Since then an acquire not yet written when lockd finds the
     * connection gone waits for the reconnect within its deadline, so all
     * may be granted (as under valgrind, where the read side sees the close
     * first); what was written to the dead socket is still 503. Either way
     * each answer is one of the two checked above. */
    CHECK_EQ_INT(down + granted, LOADERS);
    struct th_client *c = th_client_new();
    int64_t t0 = th_now_ms();
    while (!ready(&l, c) && th_now_ms() - t0 < 3000 * th_time_scale())
        th_sleep_ms(20);
    CHECK(ready(&l, c));
    char url[128], hdr[96];
    snprintf(url, sizeof(url), "%s/locks/after-batch", l.url);
    struct th_resp r;
    CHECK_EQ_INT(th_status(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r), 200);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(th_status(c, "DELETE", url, NULL, hdr, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
}

/* ---- issue 21: requests right after a pause past the backend timeout ---- */

/* The lease of a raw 200 response's body into out (33 bytes); false if none. */
static bool raw_lease(const char *body, char out[33])
{
    const char *p = strstr(body, "\"lease\":\"");
    if (p == NULL || strlen(p + 9) < 32)
        return false;
    snprintf(out, 33, "%.32s", p + 9);
    return true;
}

/* A raw release of name by lease on fd; returns its status. */
static int raw_release(int fd, const char *name, const char *lease)
{
    char rq[256], body[512];
    snprintf(rq, sizeof(rq), "DELETE /locks/%s HTTP/1.1\r\nHost: x\r\nLock-Lease: %s\r\n\r\n", name,
             lease);
    return th_raw_request(fd, rq, body, sizeof(body));
}

/* Acquires name on fd (a raw keep-alive connection) with a 30 s ttl; its
 * status, the lease into lease when 200. */
static int raw_acquire(int fd, const char *name, char lease[33])
{
    char rq[160], body[1024];
    acquire_request(rq, sizeof(rq), name);
    int st = th_raw_request(fd, rq, body, sizeof(body));
    if (st == 200)
        CHECK(raw_lease(body, lease));
    else
        fprintf(stderr, "acquire %s: %d %s\n", name, st, body);
    return st;
}

/* Redis (appendonly, fsync always) is paused (SIGSTOP) while an acquire is
 * at it and resumed as backend_timeout_ms (500) runs out, so that lockd's
 * deadline for it fires around the resume and drops the connection. The
 * client learns that outcome and at once sends its next requests on the
 * same keep-alive connection (same loop): the release of a lock it was
 * granted before the pause, then a new acquire (odd trials: the other way
 * round). Each must wait for the reconnect (tens of ms) and succeed, not be
 * answered 503 at once: such a 503 left the released lock held until its
 * ttl. 8 trials. */
static void t_request_after_pause(void)
{
    static const char *const extra[] = {"appendonly yes", "appendfsync always", NULL};
    struct th_redis rp;
    th_redis_start(&rp, 0, extra);
    long long scale = th_time_scale();
    char url[128], tmo[24];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rp.port);
    snprintf(tmo, sizeof(tmo), "%lld", 500 * scale);
    const char *args[] = {"--redis", url, "--threads", "2", "--backend_timeout_ms", tmo, NULL};
    struct th_lockd l;
    th_lockd_start(&l, args, NULL);
    int granted_at_pause = 0, failed = 0;
    for (int trial = 0; trial < 8; trial++) {
        char held[32], paused[32], next[32], rq[160], body[1024], lease[33], held_lease[33];
        char cmd[96];
        snprintf(held, sizeof(held), "pause-held-%d", trial);
        snprintf(paused, sizeof(paused), "pause-at-%d", trial);
        snprintf(next, sizeof(next), "pause-next-%d", trial);
        int fd = th_connect(l.port);
        CHECK_EQ_INT(raw_acquire(fd, held, held_lease), 200);
        kill(rp.pid, SIGSTOP);
        int64_t t0 = th_now_ms();
        int n = acquire_request(rq, sizeof(rq), paused);
        CHECK(write(fd, rq, (size_t)n) == n);
        th_sleep_ms(t0 + 500 * scale - th_now_ms()); /* paused as long as the deadline */
        kill(rp.pid, SIGCONT);
        int st = th_raw_response(fd, body, sizeof(body));
        if (st == 200) {
            granted_at_pause++; /* just in time: given back below */
            CHECK(raw_lease(body, lease));
            CHECK_EQ_INT(raw_release(fd, paused, lease), 200);
        } else {
            CHECK_EQ_INT(st, 503);
            CHECK(strstr(body, "\"backend_unavailable\"") != NULL);
        }
        for (int step = 0; step < 2; step++) {
            if ((step == 0) == (trial % 2 == 0)) {
                int rs = raw_release(fd, held, held_lease);
                if (rs != 200) {
                    fprintf(stderr, "trial %d: release after the resume: %d\n", trial, rs);
                    failed++;
                }
                snprintf(cmd, sizeof(cmd), "EXISTS lockd:{%s}", held);
                if (rs == 200)
                    CHECK_STR(th_redis_cli(&rp, cmd), "0\n"); /* not held until its ttl */
            } else if (raw_acquire(fd, next, lease) == 200) {
                CHECK_EQ_INT(raw_release(fd, next, lease), 200);
            } else {
                fprintf(stderr, "trial %d: acquire after the resume failed\n", trial);
                failed++;
            }
        }
        close(fd);
    }
    printf("# 8 trials (the acquire at the paused Redis granted in time %d times): "
           "%d requests after the resume failed\n",
           granted_at_pause, failed);
    CHECK_EQ_INT(failed, 0);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rp);
}

/* ---- startup: auth, wrong password, unreachable ---- */

static void t_auth_at_startup(void)
{
    static const char *const extra[] = {"requirepass s3cret", "user alice on >alicepw ~* &* +@all",
                                        "user carol on >carolpw ~* &* +@all -role", NULL};
    struct th_redis ra;
    th_redis_start(&ra, 0, extra);
    struct th_client *c = th_client_new();
    char url[160], lurl[128];
    struct th_lockd l;

    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d", ra.port);
    lockd_on(&l, url);
    snprintf(lurl, sizeof(lurl), "%s/locks/auth", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_lockd_kill(&l, SIGTERM);

    snprintf(url, sizeof(url), "redis://alice:alicepw@127.0.0.1:%d/2", ra.port);
    lockd_on(&l, url);
    snprintf(lurl, sizeof(lurl), "%s/locks/auth", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    CHECK(ready(&l, c));
    th_lockd_kill(&l, SIGTERM);

    /* a user that may not ask ROLE (the readiness probe) is still ready */
    snprintf(url, sizeof(url), "redis://carol:carolpw@127.0.0.1:%d", ra.port);
    lockd_on(&l, url);
    CHECK(ready(&l, c));
    snprintf(lurl, sizeof(lurl), "%s/locks/auth-carol", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_lockd_kill(&l, SIGTERM);

    int code = -1;
    snprintf(url, sizeof(url), "redis://:nope@127.0.0.1:%d", ra.port);
    const char *args[] = {"--redis", url, NULL};
    CHECK(!th_lockd_try_start(&l, args, NULL, &code));
    CHECK_EQ_INT(code, 2);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "grep -q 'cannot authenticate' '%s'", l.log);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof(cmd), "grep -q 'nope' '%s'", l.log);
    CHECK(system(cmd) != 0); /* the password is never logged */

    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ra.port);
    CHECK(!th_lockd_try_start(&l, args, NULL, &code));
    CHECK_EQ_INT(code, 2);
    th_client_free(c);
    th_redis_stop(&ra);
}

static void t_unreachable_at_startup(void)
{
    struct th_redis rb;
    th_redis_start(&rb, 0, NULL);
    int port = rb.port;
    th_redis_stop(&rb);
    char url[128], lurl[128];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    struct th_lockd l;
    lockd_on(&l, url); /* starts: liveness is not readiness */
    struct th_client *c = th_client_new();
    struct th_resp r;
    snprintf(lurl, sizeof(lurl), "%s/readyz", l.url);
    CHECK_EQ_INT(th_status(c, "GET", lurl, NULL, NULL, &r), 503);
    CHECK(strstr(r.body, "connection refused") != NULL);
    th_resp_free(&r);
    snprintf(lurl, sizeof(lurl), "%s/locks/early", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, &r), 503);
    CHECK_STR(th_jerr(&r), "backend_unavailable");
    th_resp_free(&r);
    th_redis_start(&rb, port, NULL);
    int64_t t0 = th_now_ms();
    while (!ready(&l, c) && th_now_ms() - t0 < 5000)
        th_sleep_ms(20);
    CHECK(ready(&l, c));
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rb);
}

/* ---- /readyz reasons ---- */

/* GET /readyz; the first node's reason (or "") into why. */
static long readyz_reason(const struct th_lockd *l, struct th_client *c, char *why, size_t cap)
{
    char url[128];
    struct th_resp r;
    snprintf(url, sizeof(url), "%s/readyz", l->url);
    long st = th_status(c, "GET", url, NULL, NULL, &r);
    json_t *nodes = r.json ? json_object_get(r.json, "nodes") : NULL;
    json_t *reason = json_object_get(json_array_get(nodes, 0), "reason");
    snprintf(why, cap, "%s", json_is_string(reason) ? json_string_value(reason) : "");
    th_resp_free(&r);
    return st;
}

/* Polls /readyz until it answers want and its reason contains needle
 * (NULL: any), up to timeout_ms. The last reason is left in why. */
static bool readyz_becomes(const struct th_lockd *l, struct th_client *c, long want,
                           const char *needle, int64_t timeout_ms, char *why, size_t cap)
{
    int64_t t0 = th_now_ms();
    for (;;) {
        long st = readyz_reason(l, c, why, cap);
        if (st == want && (needle == NULL || strstr(why, needle) != NULL))
            return true;
        if (th_now_ms() - t0 >= timeout_ms)
            return false;
        th_sleep_ms(20);
    }
}

/* While Redis refuses lockd's password, acquires are 503 and never 200. */
static void check_acquires_refused(const struct th_lockd *l, struct th_client *c, const char *tag)
{
    char url[128];
    for (int i = 0; i < 10; i++) {
        struct th_resp r;
        snprintf(url, sizeof(url), "%s/locks/%s-%d", l->url, tag, i);
        long st = th_status(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r);
        if (st != 503 || th_jerr(&r) == NULL || strcmp(th_jerr(&r), "backend_unavailable") != 0)
            th_fail(__FILE__, __LINE__, "acquire while %s: %ld %s", tag, st, r.body);
        th_resp_free(&r);
    }
}

/* The password changes under a running lockd: once its connections are
 * dropped, Redis refuses them, /readyz says why in Redis' own words (the
 * error code stays in capitals), and nothing is granted until it is back. */
static void t_auth_changed_at_runtime(void)
{
    static const char *const extra[] = {"requirepass s3cret", NULL};
    struct th_redis ra;
    th_redis_start(&ra, 0, extra);
    struct th_client *c = th_client_new();
    char url[160], lurl[160], why[256];
    struct th_lockd l;
    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d", ra.port);
    lockd_on(&l, url);
    CHECK(ready(&l, c));
    snprintf(lurl, sizeof(lurl), "%s/locks/pw-before", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);

    /* Connections that already authenticated keep working: kill them so
     * that lockd has to authenticate again, with the old password. */
    CHECK(strstr(th_redis_cli(&ra, "--no-auth-warning -a s3cret CONFIG SET requirepass other"),
                 "OK") != NULL);
    (void)th_redis_cli(&ra, "--no-auth-warning -a other CLIENT KILL TYPE normal");
    (void)th_redis_cli(&ra, "--no-auth-warning -a other CLIENT KILL TYPE pubsub");
    if (!readyz_becomes(&l, c, 503, "auth failed: WRONGPASS", 5000, why, sizeof(why)))
        th_fail(__FILE__, __LINE__, "readyz reason after the password changed: '%s'", why);
    printf("# readyz with a stale password: %s\n", why);
    snprintf(lurl, sizeof(lurl), "%s/healthz", l.url);
    CHECK_EQ_INT(th_status(c, "GET", lurl, NULL, NULL, NULL), 200);
    check_acquires_refused(&l, c, "pw-stale");
    /* still refused a while later: reconnects keep failing, never grant */
    th_sleep_ms(300);
    CHECK_EQ_INT(readyz_reason(&l, c, why, sizeof(why)), 503);
    CHECK(strstr(why, "WRONGPASS") != NULL);
    check_acquires_refused(&l, c, "pw-stale2");

    /* the old password again: lockd's reconnects (backoff capped at 1 s) succeed */
    CHECK(strstr(th_redis_cli(&ra, "--no-auth-warning -a other CONFIG SET requirepass s3cret"),
                 "OK") != NULL);
    if (!readyz_becomes(&l, c, 200, NULL, 5000, why, sizeof(why)))
        th_fail(__FILE__, __LINE__, "not ready again after the password came back: '%s'", why);
    snprintf(lurl, sizeof(lurl), "%s/locks/pw-after", l.url);
    int64_t t0 = th_now_ms();
    long st;
    while ((st = th_status(c, "POST", lurl, NULL, NULL, NULL)) != 200 && th_now_ms() - t0 < 3000)
        th_sleep_ms(20);
    CHECK_EQ_INT(st, 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&ra);
}

/* Redis frozen (SIGSTOP): the very first /readyz that times out is 503 with
 * the node down and why, never "up": true beside the 503 (it was: the
 * answer was written before the timed-out connection was marked down). */
static void t_frozen_not_up(void)
{
    struct th_redis rf;
    th_redis_start(&rf, 0, NULL);
    struct th_client *c = th_client_new();
    char url[160];
    struct th_lockd l;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rf.port);
    lockd_on(&l, url);
    CHECK(ready(&l, c));
    kill(rf.pid, SIGSTOP);
    struct th_resp r;
    snprintf(url, sizeof(url), "%s/readyz", l.url);
    long st = th_status(c, "GET", url, NULL, NULL, &r);
    printf("# first readyz while frozen: %ld %s\n", st, r.body);
    json_t *node = json_array_get(json_object_get(r.json, "nodes"), 0);
    CHECK_EQ_INT(st, 503);
    CHECK(json_is_false(json_object_get(node, "up")));
    CHECK_STR(json_string_value(json_object_get(node, "reason")), "command timed out");
    th_resp_free(&r);
    kill(rf.pid, SIGCONT);
    char why[256];
    if (!readyz_becomes(&l, c, 200, NULL, 5000, why, sizeof(why)))
        th_fail(__FILE__, __LINE__, "not ready again after SIGCONT: '%s'", why);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rf);
}

/* Redis turned into a replica answers every PING, yet refuses every write:
 * lockd must not call itself ready on it. */
static void t_replica_not_ready(void)
{
    struct th_redis rm, rr;
    th_redis_start(&rm, 0, NULL);
    th_redis_start(&rr, 0, NULL);
    struct th_client *c = th_client_new();
    char url[160], lurl[160], args[128], why[256];
    struct th_lockd l;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rm.port);
    lockd_on(&l, url);
    CHECK(ready(&l, c));

    snprintf(args, sizeof(args), "REPLICAOF 127.0.0.1 %d", rr.port);
    CHECK(strstr(th_redis_cli(&rm, args), "OK") != NULL);
    if (!readyz_becomes(&l, c, 503, "redis is a read-only replica", 5000, why, sizeof(why)))
        th_fail(__FILE__, __LINE__, "readyz on a replica: '%s'", why);
    snprintf(lurl, sizeof(lurl), "%s/healthz", l.url);
    CHECK_EQ_INT(th_status(c, "GET", lurl, NULL, NULL, NULL), 200);
    check_acquires_refused(&l, c, "on-replica");

    CHECK(strstr(th_redis_cli(&rm, "REPLICAOF NO ONE"), "OK") != NULL);
    if (!readyz_becomes(&l, c, 200, NULL, 5000, why, sizeof(why)))
        th_fail(__FILE__, __LINE__, "not ready after REPLICAOF NO ONE: '%s'", why);
    snprintf(lurl, sizeof(lurl), "%s/locks/promoted", l.url);
    CHECK_EQ_INT(th_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rr);
    th_redis_stop(&rm);
}

/* ---- one round trip per operation, seen with MONITOR ---- */

/* A raw RESP connection (MONITOR needs one of its own: it never returns). */
struct raw {
    int fd;
    char buf[1 << 16];
    size_t len;
};

static void raw_open(struct raw *x, int port)
{
    memset(x, 0, sizeof(*x));
    x->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (x->fd < 0 || connect(x->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        th_fail(__FILE__, __LINE__, "connect to redis %d: %s", port, strerror(errno));
}

static void raw_send(struct raw *x, const char *cmd)
{
    size_t n = strlen(cmd);
    if (write(x->fd, cmd, n) != (ssize_t)n)
        th_fail(__FILE__, __LINE__, "write to redis: %s", strerror(errno));
}

/* The next "\r\n"-terminated line (without it) into out, waiting at most
 * 3 s in all: a missing line fails the test rather than hanging it. */
static void raw_line(struct raw *x, char *out, size_t cap)
{
    int64_t end = th_now_ms() + 3000;
    for (;;) {
        char *eol = memmem(x->buf, x->len, "\r\n", 2);
        if (eol != NULL) {
            size_t n = (size_t)(eol - x->buf);
            snprintf(out, cap, "%.*s", (int)n, x->buf);
            memmove(x->buf, eol + 2, x->len - n - 2);
            x->len -= n + 2;
            return;
        }
        int64_t left = end - th_now_ms();
        if (left <= 0 || x->len == sizeof(x->buf))
            th_fail(__FILE__, __LINE__, "no line from redis in 3 s");
        struct pollfd p = {x->fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t got = read(x->fd, x->buf + x->len, sizeof(x->buf) - x->len);
        if (got <= 0)
            th_fail(__FILE__, __LINE__, "redis closed the MONITOR connection");
        x->len += (size_t)got;
    }
}

/* Sends a marker from another connection and reads MONITOR until it shows
 * up: everything Redis ran before it is then in the lines counted. Returns
 * the number of top-level commands seen (Lua's own calls say "[0 lua]"),
 * the last one in last. */
static int monitor_until_mark(struct raw *mon, struct raw *mark, int seq, char *last, size_t cap)
{
    char cmd[96], tag[64], line[4096], reply[256];
    snprintf(tag, sizeof(tag), "lockd-test-mark-%d", seq);
    snprintf(cmd, sizeof(cmd), "ECHO %s\r\n", tag);
    raw_send(mark, cmd);
    raw_line(mark, reply, sizeof(reply)); /* $len */
    raw_line(mark, reply, sizeof(reply)); /* the tag */
    int n = 0;
    for (;;) {
        raw_line(mon, line, sizeof(line));
        if (strstr(line, tag) != NULL)
            return n;
        if (strstr(line, "lockd-test-mark-") != NULL || strstr(line, " lua] ") != NULL)
            continue;
        /* A connection's hello (PING, or INFO server: issue 25's restart
         * check) and the readiness probe's ROLE are
         * lockd's own liveness traffic, not work a request caused (under
         * valgrind a hello PING can land inside a measured window). */
        if (strstr(line, "] \"PING\"") != NULL || strstr(line, "] \"ROLE\"") != NULL ||
            strstr(line, "] \"INFO\" \"server\"") != NULL) /* the hello's restart check */
            continue;
        n++;
        snprintf(last, cap, "%s", line);
        printf("#   %.200s\n", line);
    }
}

/* Exactly one command reaches Redis per uncontended acquire, renew and
 * release, from any of lockd's connections: the EVALSHA. The script's own
 * calls run inside Redis and are no round trips. */
static void t_one_command_per_operation(void)
{
    struct th_redis rf;
    th_redis_start(&rf, 0, NULL);
    struct th_client *c = th_client_new();
    char url[160], lurl[160], hdr[96], last[4096];
    struct th_lockd l;
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rf.port);
    lockd_on(&l, url);
    struct raw mon, mark;
    raw_open(&mon, rf.port);
    raw_open(&mark, rf.port);
    raw_send(&mon, "MONITOR\r\n");
    raw_line(&mon, last, sizeof(last));
    CHECK_STR(last, "+OK");
    int seq = 0;
    (void)monitor_until_mark(&mon, &mark, seq++, last, sizeof(last)); /* startup traffic */
    for (int round = 0; round < 3; round++) {
        snprintf(lurl, sizeof(lurl), "%s/locks/rt-%d", l.url, round);
        static const char *const ops[] = {"acquire", "renew", "release"};
        for (int op = 0; op < 3; op++) {
            (void)monitor_until_mark(&mon, &mark, seq++, last, sizeof(last));
            struct th_resp r;
            long st = op == 0   ? th_status(c, "POST", lurl, "{\"ttl_ms\":10000}", NULL, &r)
                      : op == 1 ? th_status(c, "PUT", lurl, "{\"ttl_ms\":10000}", hdr, &r)
                                : th_status(c, "DELETE", lurl, NULL, hdr, &r);
            if (st != 200)
                th_fail(__FILE__, __LINE__, "%s: %ld %s", ops[op], st, r.body);
            if (op == 0)
                snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
            th_resp_free(&r);
            printf("# %s %d:\n", ops[op], round);
            int n = monitor_until_mark(&mon, &mark, seq++, last, sizeof(last));
            if (n != 1)
                th_fail(__FILE__, __LINE__, "%s sent %d commands to redis, not 1", ops[op], n);
            CHECK(strstr(last, "] \"FCALL\" ") != NULL || strstr(last, "] \"fcall\" ") != NULL);
        }
    }
    close(mon.fd);
    close(mark.fd);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rf);
}

int main(int argc, char **argv)
{
    /* `redis_lockd NAME` runs only the cases whose name contains NAME (and
     * the two lockd of the first cases only when those run). */
    th_only(argc > 1 ? argv[1] : NULL);
    th_redis_start(&R, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", R.port);
    TH_RUN(t_two_lockd_32_clients);
    TH_RUN(t_two_lockd_many_names);
    TH_RUN(t_expiry_across_lockd);
    TH_RUN(t_redis_killed_mid_load);
    th_lockd_kill(&L1, SIGTERM); /* no-ops when those cases did not run */
    th_lockd_kill(&L2, SIGTERM);
    TH_RUN(t_hangup_while_at_redis);
    TH_RUN(t_waiter_hangup_while_at_redis);
    TH_RUN(t_rider_hangup_while_at_redis);
    TH_RUN(t_reset_while_at_redis);
    TH_RUN(t_held_outlasts_idle_timeout);
    TH_RUN(t_stop_while_at_redis);
    TH_RUN(t_pipelined_at_redis);
    TH_RUN(t_redis_gone_mid_batch);
    TH_RUN(t_request_after_pause);
    TH_RUN(t_auth_at_startup);
    TH_RUN(t_unreachable_at_startup);
    TH_RUN(t_auth_changed_at_runtime);
    TH_RUN(t_replica_not_ready);
    TH_RUN(t_frozen_not_up);
    TH_RUN(t_one_command_per_operation);
    th_redis_stop(&R);
    return th_done();
}
