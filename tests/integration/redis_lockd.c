/*
 * redis_lockd.c - issue 3 end to end: real lockd processes sharing one real
 * redis-server. Two lockd processes and 32 clients on one name (never two
 * holders, tokens increasing in grant order), Redis killed mid-load (never a
 * 200 while it is down, back within 5 s), expiry seen across processes,
 * requirepass / ACL / wrong password at startup, /readyz following Redis.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"

static struct th_redis R;
static char redis_url[128];

static void lockd_on(struct th_lockd *l, const char *url)
{
    const char *args[] = {"--redis", url, "--threads", "2", "--backend_timeout_ms", "500", NULL};
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
        struct th_resp r;
        th_http(c, "POST", url, body, NULL, &r);
        if (r.status != 200) {
            fprintf(stderr, "client %ld: acquire %ld %s\n", id, r.status, r.body);
            atomic_fetch_add(&failures, 1);
            th_resp_free(&r);
            continue;
        }
        long long token = th_jint(&r, "fencing_token");
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
        th_resp_free(&r);
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
        if (http_status(c, "DELETE", url, NULL, hdr, NULL) != 200)
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

/* ---- expiry and wrong leases across processes ---- */

static void t_expiry_across_lockd(void)
{
    struct th_client *c = th_client_new();
    char u1[128], u2[128], hdr[96];
    snprintf(u1, sizeof(u1), "%s/locks/short", L1.url);
    snprintf(u2, sizeof(u2), "%s/locks/short", L2.url);
    struct th_resp r;
    CHECK_EQ_INT(http_status(c, "POST", u1, "{\"ttl_ms\":300}", NULL, &r), 200);
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    CHECK_EQ_INT(http_status(c, "POST", u2, "{\"ttl_ms\":300}", NULL, &r), 409);
    CHECK_STR(th_jerr(&r), "locked");
    th_resp_free(&r);
    /* a wrong lease never releases or renews, through either process */
    const char *wrong = "Lock-Lease: 00000000000000000000000000000000";
    CHECK_EQ_INT(http_status(c, "DELETE", u2, NULL, wrong, &r), 409);
    CHECK_STR(th_jerr(&r), "held_by_other");
    th_resp_free(&r);
    CHECK_EQ_INT(http_status(c, "PUT", u1, NULL, wrong, NULL), 409);
    /* the real lease renews through the other lockd: state lives in Redis */
    CHECK_EQ_INT(http_status(c, "PUT", u2, "{\"ttl_ms\":300}", hdr, NULL), 200);
    th_sleep_ms(450);
    CHECK_EQ_INT(http_status(c, "POST", u2, "{\"ttl_ms\":5000}", NULL, NULL), 200);
    CHECK_EQ_INT(http_status(c, "DELETE", u1, NULL, hdr, &r), 409); /* expired: someone else's */
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
            (void)http_status(c, "DELETE", url, NULL, hdr, NULL);
            continue;
        }
        if (r.status == 503) {
            CHECK_STR(th_jerr(&r), "backend_unavailable");
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
    return http_status(c, "GET", url, NULL, NULL, NULL) == 200;
}

static void t_redis_killed_mid_load(void)
{
    struct th_client *c = th_client_new();
    pthread_t th[8];
    for (long i = 0; i < 8; i++)
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
    CHECK_EQ_INT(http_status(c, "GET", url, NULL, NULL, &r), 503);
    printf("# readyz while down: %s\n", r.body);
    CHECK(strstr(r.body, "\"reason\"") != NULL);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/healthz", L1.url);
    CHECK_EQ_INT(http_status(c, "GET", url, NULL, NULL, NULL), 200);
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
    for (int i = 0; i < 8; i++)
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

/* ---- startup: auth, wrong password, unreachable ---- */

static void t_auth_at_startup(void)
{
    static const char *const extra[] = {"requirepass s3cret", "user alice on >alicepw ~* &* +@all",
                                        NULL};
    struct th_redis ra;
    th_redis_start(&ra, 0, extra);
    struct th_client *c = th_client_new();
    char url[160], lurl[128];
    struct th_lockd l;

    snprintf(url, sizeof(url), "redis://:s3cret@127.0.0.1:%d", ra.port);
    lockd_on(&l, url);
    snprintf(lurl, sizeof(lurl), "%s/locks/auth", l.url);
    CHECK_EQ_INT(http_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_lockd_kill(&l, SIGTERM);

    snprintf(url, sizeof(url), "redis://alice:alicepw@127.0.0.1:%d/2", ra.port);
    lockd_on(&l, url);
    snprintf(lurl, sizeof(lurl), "%s/locks/auth", l.url);
    CHECK_EQ_INT(http_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    CHECK(ready(&l, c));
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
    CHECK_EQ_INT(http_status(c, "GET", lurl, NULL, NULL, &r), 503);
    CHECK(strstr(r.body, "connection refused") != NULL);
    th_resp_free(&r);
    snprintf(lurl, sizeof(lurl), "%s/locks/early", l.url);
    CHECK_EQ_INT(http_status(c, "POST", lurl, NULL, NULL, &r), 503);
    CHECK_STR(th_jerr(&r), "backend_unavailable");
    th_resp_free(&r);
    th_redis_start(&rb, port, NULL);
    int64_t t0 = th_now_ms();
    while (!ready(&l, c) && th_now_ms() - t0 < 5000)
        th_sleep_ms(20);
    CHECK(ready(&l, c));
    CHECK_EQ_INT(http_status(c, "POST", lurl, NULL, NULL, NULL), 200);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
    th_redis_stop(&rb);
}

int main(void)
{
    th_redis_start(&R, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", R.port);
    TH_RUN(t_two_lockd_32_clients);
    TH_RUN(t_expiry_across_lockd);
    TH_RUN(t_redis_killed_mid_load);
    th_lockd_kill(&L1, SIGTERM);
    th_lockd_kill(&L2, SIGTERM);
    TH_RUN(t_auth_at_startup);
    TH_RUN(t_unreachable_at_startup);
    th_redis_stop(&R);
    return th_done();
}
