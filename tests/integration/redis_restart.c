/*
 * redis_restart.c - issue 25 end to end: leases survive a Redis that
 * restarts empty. Real redis-server (no persistence) and lockd processes:
 * 100 leases (half session-bound, half plain) through two lockd, Redis
 * SIGKILLed and restarted empty: no acquire of a held name is granted, every
 * lease renews and releases with its token unchanged, the next grant of each
 * name has a larger token, both lockd counted the restart, the re-assertion
 * took a handful of script calls (batches), not one per lease; a lockd stopped
 * (SIGSTOP) past the grace finds the leases others took lost and overwrites
 * none; 32 clients through two lockd across a restart never overlap; a
 * semaphore of 3 and two readers across an empty restart (no fourth slot,
 * no writer, tokens unchanged, the next grant larger); two multi-locks of
 * 5 names (one plain, one under a session) across an empty restart (no
 * member granted to another, the set renews with every token unchanged,
 * the next grant larger); max_locks refuses the next grant with 503
 * too_many_locks.
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
static struct th_lockd L1, L2;

static void lockd_on(struct th_lockd *l, const char *grace_ms)
{
    const char *args[] = {"--redis",
                          redis_url,
                          "--threads",
                          "2",
                          "--backend_timeout_ms",
                          "500",
                          "--restart_grace_ms",
                          grace_ms,
                          "--log_format",
                          "text",
                          NULL};
    th_lockd_start(l, args, NULL);
}

static long req(struct th_client *c, const char *method, const struct th_lockd *l, const char *path,
                const char *body, const char *lease, struct th_resp *keep)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", l->url, path);
    return th_req(c, method, url, body, lease, keep);
}

static bool ready(struct th_client *c, const struct th_lockd *l)
{
    return req(c, "GET", l, "/readyz", NULL, NULL, NULL) == 200;
}

static void restart_redis(void)
{
    th_redis_stop(&R); /* SIGKILL: nothing was saved */
    th_redis_start(&R, R.port, NULL);
}

/* ---- 100 leases through two lockd across an empty restart ---- */

#define NLEASES 100

struct lease_rec {
    char name[32];
    char lease[40];
    long long token;
    const struct th_lockd *l;
    bool sb;
};

static char *session_on(struct th_client *c, const struct th_lockd *l)
{
    struct th_resp r;
    CHECK_EQ_INT(req(c, "POST", l, "/sessions", "{\"ttl_ms\":20000}", NULL, &r), 201);
    char *id = strdup(th_jstr(&r, "session"));
    th_resp_free(&r);
    return id;
}

static size_t json_len(const struct th_resp *r, const char *key)
{
    json_t *a = r->json ? json_object_get(r->json, key) : NULL;
    return json_is_array(a) ? json_array_size(a) : 0;
}

static void t_hundred_leases(void)
{
    struct th_client *c = th_client_new();
    struct lease_rec *ls = calloc(NLEASES, sizeof(*ls));
    char *s1 = session_on(c, &L1), *s2 = session_on(c, &L2);
    for (int i = 0; i < NLEASES; i++) {
        struct lease_rec *x = &ls[i];
        x->l = i % 2 ? &L2 : &L1;
        x->sb = i < NLEASES / 2;
        snprintf(x->name, sizeof(x->name), "rs-%d", i);
        char path[96], body[128];
        snprintf(path, sizeof(path), "/locks/%.31s", x->name);
        if (x->sb)
            snprintf(body, sizeof(body), "{\"ttl_ms\":3000,\"session\":\"%s\"}",
                     x->l == &L1 ? s1 : s2);
        else
            snprintf(body, sizeof(body), "{\"ttl_ms\":12000}");
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", x->l, path, body, NULL, &r), 200);
        snprintf(x->lease, sizeof(x->lease), "%s", th_jstr(&r, "lease"));
        x->token = th_jint(&r, "fencing_token");
        th_resp_free(&r);
    }
    int64_t granted_ms = th_now_ms();
    restart_redis();
    int64_t back = th_now_ms();
    /* The re-assertion goes in batches (RA_BATCH leases per script call):
     * once both lockd logged theirs, the new Redis ran a handful of script
     * calls for the 100 leases (plus a watchdog pass or two), not one each.
     * Nothing is asked of lockd before: every call counted is its own. */
    int64_t bound = 5000 * th_time_scale();
    while (!th_log_has(&L1, "re-asserted leases on redis", "") ||
           !th_log_has(&L2, "re-asserted leases on redis", "")) {
        CHECK(th_now_ms() - back < bound);
        th_sleep_ms(5);
    }
    long long calls = th_redis_calls(&R, "fcall") + th_redis_calls(&R, "function|load");
    printf("# re-assertion of %d leases by two lockd: %lld script calls on the new Redis\n",
           NLEASES, calls);
    CHECK(calls >= 2);
    CHECK(calls <= 20);
    /* the empty Redis had none of lockd's functions: the first FCALL of
     * each lockd found none, and loaded the library (FUNCTION LOAD) */
    CHECK(th_redis_calls(&R, "function|load") >= 1);
    /* Nothing held is granted: not during the re-assertion, not in the
     * grace, not after it (the plain leases have 12 s, session leases are
     * renewed by the watchdog). Try every name through both lockd for 3 s. */
    int n503 = 0, n409 = 0, rounds = 0, said_recovering = 0;
    while (th_now_ms() - back < 3000) {
        /* /readyz says recovering while the grace runs (503) */
        for (int k = 0; k < 2; k++) {
            struct th_resp rz;
            if (req(c, "GET", k ? &L2 : &L1, "/readyz", NULL, NULL, &rz) == 503 &&
                rz.body != NULL && strstr(rz.body, "\"status\":\"recovering\"") != NULL)
                said_recovering |= 1 << k;
            th_resp_free(&rz);
        }
        for (int i = 0; i < NLEASES; i++) {
            char path[96];
            snprintf(path, sizeof(path), "/locks/%.31s", ls[i].name);
            struct th_resp r;
            long st = req(c, "POST", i % 2 ? &L1 : &L2, path, "{\"ttl_ms\":1000}", NULL, &r);
            if (st == 200)
                th_fail(__FILE__, __LINE__, "'%s' granted %lld ms after the restart: %s",
                        ls[i].name, (long long)(th_now_ms() - back), r.body);
            CHECK(st == 503 || st == 409);
            if (st == 503) {
                CHECK(strcmp(th_jerr(&r), "backend_recovering") == 0 ||
                      strcmp(th_jerr(&r), "backend_unavailable") == 0);
                if (strcmp(th_jerr(&r), "backend_recovering") == 0)
                    CHECK(th_header(&r, "Retry-After") != NULL);
            }
            n503 += st == 503;
            n409 += st == 409;
            th_resp_free(&r);
        }
        rounds++;
    }
    printf("# %d rounds of 100 try-acquires after the restart: %d x 503, %d x 409\n", rounds, n503,
           n409);
    CHECK(n503 > 0 && n409 > 0);             /* the grace, then the leases put back */
    CHECK(th_now_ms() - granted_ms < 12000); /* all the plain leases were live throughout */
    CHECK_EQ_INT(th_restarts(c, &L1), 1);
    CHECK_EQ_INT(th_restarts(c, &L2), 1);
    CHECK_EQ_INT(said_recovering, 3); /* both lockd's /readyz */
    /* both logged the restart at error level, naming the node */
    char node[64];
    snprintf(node, sizeof(node), "redis '127.0.0.1:%d' is a new process", R.port);
    CHECK(th_log_has(&L1, " error ", node));
    CHECK(th_log_has(&L2, " error ", node));
    /* Every lease renews with its token unchanged; no session lost any. */
    for (int i = 0; i < NLEASES; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/locks/%.31s", ls[i].name);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "PUT", ls[i].l, path, NULL, ls[i].lease, &r), 200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), ls[i].token);
        th_resp_free(&r);
    }
    for (int k = 0; k < 2; k++) {
        char path[96];
        snprintf(path, sizeof(path), "/sessions/%s", k ? s2 : s1);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "PUT", k ? &L2 : &L1, path, NULL, NULL, &r), 200);
        CHECK_EQ_INT(json_len(&r, "lost"), 0);
        CHECK_EQ_INT(json_len(&r, "locks"), NLEASES / 4);
        th_resp_free(&r);
    }
    /* Released with their leases, tokens unchanged; the next grant counts on. */
    for (int i = 0; i < NLEASES; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/locks/%.31s", ls[i].name);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "DELETE", ls[i].l, path, NULL, ls[i].lease, &r), 200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), ls[i].token);
        th_resp_free(&r);
        CHECK_EQ_INT(req(c, "POST", i % 2 ? &L1 : &L2, path, "{\"ttl_ms\":1000}", NULL, &r), 200);
        CHECK(th_jint(&r, "fencing_token") > ls[i].token);
        th_resp_free(&r);
    }
    free(s1);
    free(s2);
    free(ls);
    th_client_free(c);
}

/* ---- shared holds: a semaphore and readers across an empty restart ---- */

#define NSEM 3

static void t_shared_across_restart(void)
{
    struct th_client *c = th_client_new();
    struct lease_rec sem[NSEM], rd[2];
    char *s2 = session_on(c, &L2);
    memset(sem, 0, sizeof(sem));
    memset(rd, 0, sizeof(rd));
    /* limit 3: two slots through L1 (plain), one through L2 (session-bound);
     * a reader-writer lock read-held through both */
    for (int i = 0; i < NSEM + 2; i++) {
        struct lease_rec *x = i < NSEM ? &sem[i] : &rd[i - NSEM];
        x->l = i == 1 || i == NSEM + 1 ? &L2 : &L1;
        x->sb = i == 1;
        snprintf(x->name, sizeof(x->name), "%s", i < NSEM ? "sem" : "rw");
        char path[96], body[160];
        snprintf(path, sizeof(path), "/locks/%.31s", x->name);
        if (i >= NSEM)
            snprintf(body, sizeof(body), "{\"ttl_ms\":12000,\"mode\":\"shared\"}");
        else if (x->sb)
            snprintf(body, sizeof(body), "{\"ttl_ms\":3000,\"limit\":3,\"session\":\"%.40s\"}", s2);
        else
            snprintf(body, sizeof(body), "{\"ttl_ms\":12000,\"limit\":3}");
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", x->l, path, body, NULL, &r), 200);
        snprintf(x->lease, sizeof(x->lease), "%s", th_jstr(&r, "lease"));
        x->token = th_jint(&r, "fencing_token");
        th_resp_free(&r);
    }
    long long r1 = th_restarts(c, &L1), r2 = th_restarts(c, &L2);
    restart_redis();
    int64_t back = th_now_ms();
    /* No fourth slot, no writer, while the leases live (12 s; the session's
     * slot is renewed by L2's watchdog): 503 during the re-assertion and
     * the grace, then 409 (the three slots, the readers, are back). */
    int n503 = 0, n409 = 0;
    while (th_now_ms() - back < 4000) {
        for (int k = 0; k < 2; k++) {
            const struct th_lockd *l = k ? &L2 : &L1;
            struct th_resp r;
            long st = req(c, "POST", l, "/locks/sem", "{\"ttl_ms\":1000,\"limit\":3}", NULL, &r);
            if (st == 200)
                th_fail(__FILE__, __LINE__,
                        "a fourth slot of 'sem' granted %lld ms after the "
                        "restart: %s",
                        (long long)(th_now_ms() - back), r.body);
            CHECK(st == 503 || st == 409);
            n503 += st == 503;
            n409 += st == 409;
            th_resp_free(&r);
            st = req(c, "POST", l, "/locks/rw", "{\"ttl_ms\":1000}", NULL, &r);
            if (st == 200)
                th_fail(__FILE__, __LINE__,
                        "a writer of 'rw' granted over readers %lld ms after "
                        "the restart: %s",
                        (long long)(th_now_ms() - back), r.body);
            CHECK(st == 503 || st == 409);
            th_resp_free(&r);
        }
        th_sleep_ms(20);
    }
    printf("# shared holds after the restart: %d x 503, %d x 409 for a fourth slot\n", n503, n409);
    CHECK(n503 > 0 && n409 > 0);
    CHECK_EQ_INT(th_restarts(c, &L1), r1 + 1);
    CHECK_EQ_INT(th_restarts(c, &L2), r2 + 1);
    struct th_resp r;
    CHECK_EQ_INT(req(c, "GET", &L1, "/locks/sem", NULL, NULL, &r), 200);
    CHECK_EQ_INT(th_jint(&r, "holders"), NSEM);
    CHECK_EQ_INT(th_jint(&r, "limit"), 3);
    th_resp_free(&r);
    CHECK_EQ_INT(req(c, "GET", &L2, "/locks/rw", NULL, NULL, &r), 200);
    CHECK_EQ_INT(th_jint(&r, "holders"), 2);
    CHECK_STR(th_jstr(&r, "mode"), "shared");
    th_resp_free(&r);
    /* Renewed with tokens unchanged, released, and the next grant counts on. */
    long long top = 0;
    for (int i = 0; i < NSEM + 2; i++) {
        struct lease_rec *x = i < NSEM ? &sem[i] : &rd[i - NSEM];
        char path[96];
        snprintf(path, sizeof(path), "/locks/%.31s", x->name);
        CHECK_EQ_INT(req(c, "PUT", x->l, path, NULL, x->lease, &r), 200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), x->token);
        th_resp_free(&r);
        CHECK_EQ_INT(req(c, "DELETE", x->l, path, NULL, x->lease, &r), 200);
        th_resp_free(&r);
        if (i < NSEM && x->token > top)
            top = x->token;
    }
    CHECK_EQ_INT(req(c, "POST", &L1, "/locks/sem", "{\"ttl_ms\":1000,\"limit\":3}", NULL, &r), 200);
    CHECK(th_jint(&r, "fencing_token") > top);
    th_resp_free(&r);
    CHECK_EQ_INT(req(c, "POST", &L2, "/locks/rw", "{\"ttl_ms\":1000}", NULL, &r), 200);
    CHECK(th_jint(&r, "fencing_token") > rd[0].token && th_jint(&r, "fencing_token") > rd[1].token);
    th_resp_free(&r);
    free(s2);
    th_client_free(c);
}

/* ---- multi-locks across an empty restart ---- */

#define NSET 5

/* A plain set of 5 names through L1 and a session-bound one through L2
 * (3 s members, renewed by L2's watchdog across the restart): each member
 * is in its lockd's grants table with its own token, so none is granted to
 * another while the leases live; the sets renew (PUT /locks) with every
 * member and every token unchanged, release, and each name's next grant
 * has a larger token. */
static void t_multi_across_restart(void)
{
    struct th_client *c = th_client_new();
    char *s2 = session_on(c, &L2);
    char lease[2][40], name[2][NSET][16], set[2][256];
    long long token[2][NSET];
    for (int k = 0; k < 2; k++) {
        size_t n = (size_t)snprintf(set[k], sizeof(set[k]), "{\"names\":[");
        for (int i = 0; i < NSET; i++) {
            snprintf(name[k][i], sizeof(name[k][i]), "ms%d-%d", k, i);
            n += (size_t)snprintf(set[k] + n, sizeof(set[k]) - n, "%s\"%s\"", i ? "," : "",
                                  name[k][i]);
        }
        snprintf(set[k] + n, sizeof(set[k]) - n, "]");
        char body[400];
        if (k == 0)
            snprintf(body, sizeof(body), "%.200s,\"ttl_ms\":12000}", set[k]);
        else
            snprintf(body, sizeof(body), "%.200s,\"ttl_ms\":3000,\"session\":\"%.40s\"}", set[k],
                     s2);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", k ? &L2 : &L1, "/locks", body, NULL, &r), 200);
        snprintf(lease[k], sizeof(lease[k]), "%s", th_jstr(&r, "lease"));
        json_t *locks = json_object_get(r.json, "locks");
        CHECK_EQ_INT(json_array_size(locks), NSET);
        for (int i = 0; i < NSET; i++)
            token[k][i] = json_integer_value(
                json_object_get(json_array_get(locks, (size_t)i), "fencing_token"));
        th_resp_free(&r);
        strcat(set[k], "}");
    }
    restart_redis();
    int64_t back = th_now_ms();
    int n503 = 0, n409 = 0;
    while (th_now_ms() - back < 4000) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < NSET; i++) {
                const struct th_lockd *l = (i + k) % 2 ? &L2 : &L1;
                char path[64];
                snprintf(path, sizeof(path), "/locks/%.15s", name[k][i]);
                struct th_resp r;
                long st = req(c, "POST", l, path, "{\"ttl_ms\":1000}", NULL, &r);
                if (st == 200)
                    th_fail(__FILE__, __LINE__,
                            "member '%s' of a multi-lock granted to another %lld ms after the "
                            "restart: %s",
                            name[k][i], (long long)(th_now_ms() - back), r.body);
                CHECK(st == 503 || st == 409);
                n503 += st == 503;
                n409 += st == 409;
                th_resp_free(&r);
            }
        }
        th_sleep_ms(50);
    }
    printf("# multi-lock members after the restart: %d x 503, %d x 409\n", n503, n409);
    CHECK(n409 > 0);
    long long top[2][NSET];
    for (int k = 0; k < 2; k++) {
        const struct th_lockd *l = k ? &L2 : &L1;
        struct th_resp r;
        CHECK_EQ_INT(req(c, "PUT", l, "/locks", set[k], lease[k], &r), 200);
        CHECK_EQ_INT(json_len(&r, "locks"), NSET);
        CHECK_EQ_INT(json_len(&r, "lost"), 0);
        th_resp_free(&r);
        for (int i = 0; i < NSET; i++) { /* each member alone: its token unchanged */
            char path[64];
            snprintf(path, sizeof(path), "/locks/%.15s", name[k][i]);
            CHECK_EQ_INT(req(c, "PUT", l, path, NULL, lease[k], &r), 200);
            CHECK_EQ_INT(th_jint(&r, "fencing_token"), token[k][i]);
            th_resp_free(&r);
            top[k][i] = token[k][i];
        }
        CHECK_EQ_INT(req(c, "DELETE", l, "/locks", set[k], lease[k], &r), 200);
        CHECK_EQ_INT(json_len(&r, "locks"), NSET);
        th_resp_free(&r);
    }
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < NSET; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/locks/%.15s", name[k][i]);
            struct th_resp r;
            CHECK_EQ_INT(req(c, "POST", &L1, path, "{\"ttl_ms\":1000}", NULL, &r), 200);
            CHECK(th_jint(&r, "fencing_token") > top[k][i]);
            CHECK_EQ_INT(req(c, "DELETE", &L1, path, NULL, th_jstr(&r, "lease"), NULL), 200);
            th_resp_free(&r);
        }
    }
    free(s2);
    th_client_free(c);
}

/* ---- a lockd stopped past the grace while Redis restarts ---- */

#define NSTOP 20

static void t_stopped_past_grace(void)
{
    struct th_client *c = th_client_new();
    struct lease_rec ls[NSTOP];
    char *s1 = session_on(c, &L1);
    memset(ls, 0, sizeof(ls));
    for (int i = 0; i < NSTOP; i++) {
        struct lease_rec *x = &ls[i];
        x->l = &L1;
        x->sb = i % 2 == 0;
        snprintf(x->name, sizeof(x->name), "st-%d", i);
        char path[96], body[128];
        snprintf(path, sizeof(path), "/locks/%.31s", x->name);
        if (x->sb)
            snprintf(body, sizeof(body), "{\"ttl_ms\":9000,\"session\":\"%.40s\"}", s1);
        else
            snprintf(body, sizeof(body), "{\"ttl_ms\":12000}");
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", &L1, path, body, NULL, &r), 200);
        snprintf(x->lease, sizeof(x->lease), "%s", th_jstr(&r, "lease"));
        x->token = th_jint(&r, "fencing_token");
        th_resp_free(&r);
    }
    long long r1 = th_restarts(c, &L1), r2 = th_restarts(c, &L2);
    kill(L1.pid, SIGSTOP);
    restart_redis();
    /* L2 sees the restart, has nothing to put back, keeps the grace (data
     * was lost: the marker is gone), then grants L1's names to others: the
     * first half of them (session-bound and plain alike). */
    int64_t t0 = th_now_ms();
    while (th_restarts(c, &L2) == r2 && th_now_ms() - t0 < 3000)
        th_sleep_ms(20);
    CHECK_EQ_INT(th_restarts(c, &L2), r2 + 1);
    long long taken[NSTOP / 2];
    char taken_lease[NSTOP / 2][40];
    for (int i = 0; i < NSTOP / 2; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/locks/%.31s", ls[i].name);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", &L2, path, "{\"ttl_ms\":20000,\"wait_ms\":5000}", NULL, &r),
                     200);
        taken[i] = th_jint(&r, "fencing_token");
        snprintf(taken_lease[i], sizeof(taken_lease[i]), "%s", th_jstr(&r, "lease"));
        CHECK(taken[i] > ls[i].token);
        th_resp_free(&r);
    }
    printf("# L2 granted L1's names %lld ms after the restart\n", (long long)(th_now_ms() - t0));
    kill(L1.pid, SIGCONT);
    t0 = th_now_ms();
    while ((th_restarts(c, &L1) == r1 || !ready(c, &L1)) && th_now_ms() - t0 < 5000)
        th_sleep_ms(20);
    CHECK_EQ_INT(th_restarts(c, &L1), r1 + 1);
    /* Taken: 409 for L1's lease, never overwritten (L2's holders keep
     * their leases and tokens). Not taken: put back, renewable. */
    for (int i = 0; i < NSTOP; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/locks/%.31s", ls[i].name);
        struct th_resp r;
        long st = req(c, "PUT", &L1, path, NULL, ls[i].lease, &r);
        if (i < NSTOP / 2) {
            CHECK_EQ_INT(st, 409);
            CHECK_STR(th_jerr(&r), "held_by_other");
        } else {
            CHECK_EQ_INT(st, 200);
            CHECK_EQ_INT(th_jint(&r, "fencing_token"), ls[i].token);
        }
        th_resp_free(&r);
        if (i < NSTOP / 2) {
            CHECK_EQ_INT(req(c, "PUT", &L2, path, NULL, taken_lease[i], &r), 200);
            CHECK_EQ_INT(th_jint(&r, "fencing_token"), taken[i]);
            th_resp_free(&r);
        }
    }
    /* L1's session reports the session-bound ones that were taken as lost
     * (its watchdog renews every ttl/3 = 3 s). */
    char path[64];
    snprintf(path, sizeof(path), "/sessions/%s", s1);
    size_t lost = 0;
    t0 = th_now_ms();
    while (th_now_ms() - t0 < 6000) {
        struct th_resp r;
        CHECK_EQ_INT(req(c, "GET", &L1, path, NULL, NULL, &r), 200);
        lost = json_len(&r, "lost");
        th_resp_free(&r);
        if (lost >= NSTOP / 4)
            break;
        th_sleep_ms(50);
    }
    CHECK_EQ_INT(lost, NSTOP / 4);
    free(s1);
    th_client_free(c);
}

/* ---- exclusion under load across a restart ---- */

#define CLIENTS 32

static atomic_int holders, overlaps, grants, grants_after, regressions;
static atomic_bool stop_load, restarted;
static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
static long long last_token;

static void *contender(void *arg)
{
    long id = (long)arg;
    struct th_client *c = th_client_new();
    const struct th_lockd *l = id % 2 ? &L2 : &L1;
    while (!atomic_load(&stop_load)) {
        struct th_resp r;
        long st = req(c, "POST", l, "/locks/excl", "{\"ttl_ms\":2000,\"wait_ms\":1000}", NULL, &r);
        if (st != 200) {
            th_resp_free(&r);
            th_sleep_ms(5);
            continue;
        }
        if (atomic_fetch_add(&holders, 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        long long tok = th_jint(&r, "fencing_token");
        pthread_mutex_lock(&tok_mu);
        if (tok <= last_token)
            atomic_fetch_add(&regressions, 1);
        last_token = tok;
        pthread_mutex_unlock(&tok_mu);
        atomic_fetch_add(&grants, 1);
        if (atomic_load(&restarted))
            atomic_fetch_add(&grants_after, 1);
        char lease[40];
        snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        th_sleep_ms(1);
        atomic_fetch_sub(&holders, 1); /* before the release: never counted held too long */
        (void)req(c, "DELETE", l, "/locks/excl", NULL, lease, NULL);
    }
    th_client_free(c);
    return NULL;
}

static void t_exclusion_across_restart(void)
{
    pthread_t th[CLIENTS];
    for (long i = 0; i < CLIENTS; i++)
        CHECK(pthread_create(&th[i], NULL, contender, (void *)i) == 0);
    th_sleep_ms(1000);
    int before = atomic_load(&grants);
    restart_redis();
    atomic_store(&restarted, true);
    th_sleep_ms(4000);
    atomic_store(&stop_load, true);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    printf("# %d grants before the restart, %d after; %d overlaps, %d token regressions\n", before,
           atomic_load(&grants_after), atomic_load(&overlaps), atomic_load(&regressions));
    CHECK(before > 0);
    CHECK(atomic_load(&grants_after) > 0);
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&regressions), 0);
}

/* ---- max_locks bounds the grants table: a clear refusal past it ---- */

static void t_max_locks(void)
{
    struct th_lockd L3;
    const char *args[] = {"--redis", redis_url, "--max_locks", "3", "--log_format", "text", NULL};
    th_lockd_start(&L3, args, NULL);
    struct th_client *c = th_client_new();
    char lease[3][40];
    const char *body[3] = {"{\"ttl_ms\":10000}", "{\"ttl_ms\":10000,\"limit\":2}",
                           "{\"ttl_ms\":10000,\"mode\":\"shared\"}"};
    for (int i = 0; i < 3; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/locks/ml-%d", i);
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", &L3, path, body[i], NULL, &r), 200);
        snprintf(lease[i], sizeof(lease[i]), "%s", th_jstr(&r, "lease"));
        th_resp_free(&r);
    }
    /* The fourth live lease is refused, whatever its kind, and nothing is
     * granted: 503 too_many_locks, a message naming max_locks, Retry-After. */
    const char *more[] = {"{\"ttl_ms\":10000}", "{\"ttl_ms\":10000,\"wait_ms\":300}",
                          "{\"ttl_ms\":10000,\"limit\":2}"};
    for (int i = 0; i < 3; i++) {
        struct th_resp r;
        CHECK_EQ_INT(req(c, "POST", &L3, i == 2 ? "/locks/ml-1" : "/locks/ml-x", more[i], NULL, &r),
                     503);
        CHECK_STR(th_jerr(&r), "too_many_locks");
        CHECK(strstr(th_jstr(&r, "message"), "max_locks") != NULL);
        CHECK(th_header(&r, "Retry-After") != NULL);
        th_resp_free(&r);
    }
    struct th_resp r;
    CHECK_EQ_INT(req(c, "GET", &L3, "/locks/ml-x", NULL, NULL, &r), 200);
    CHECK(json_is_false(json_object_get(r.json, "held")));
    th_resp_free(&r);
    CHECK_EQ_INT(req(c, "GET", &L3, "/locks/ml-1", NULL, NULL, &r), 200);
    CHECK_EQ_INT(th_jint(&r, "holders"), 1);
    th_resp_free(&r);
    /* Another lockd on the same Redis is not bounded by this one's table. */
    CHECK_EQ_INT(req(c, "POST", &L1, "/locks/ml-y", "{\"ttl_ms\":1000}", NULL, NULL), 200);
    /* A release frees a record: the next grant goes through. */
    CHECK_EQ_INT(req(c, "DELETE", &L3, "/locks/ml-0", NULL, lease[0], NULL), 200);
    CHECK_EQ_INT(req(c, "POST", &L3, "/locks/ml-x", "{\"ttl_ms\":1000}", NULL, NULL), 200);
    th_lockd_kill(&L3, SIGKILL);
    th_client_free(c);
}

/* A multi-lock records one lease per name: max_locks counts its names, not
 * the set. With 10 allowed and 8 held, a 5-name set is refused whole
 * (nothing of it held); a 2-name one fits. */
static void t_max_locks_multi(void)
{
    struct th_lockd L10;
    const char *args[] = {"--redis", redis_url, "--max_locks", "10", "--log_format", "text", NULL};
    th_lockd_start(&L10, args, NULL);
    struct th_client *c = th_client_new();
    for (int i = 0; i < 8; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/locks/mm-%d", i);
        CHECK_EQ_INT(req(c, "POST", &L10, path, "{\"ttl_ms\":10000}", NULL, NULL), 200);
    }
    struct th_resp r;
    CHECK_EQ_INT(req(c, "POST", &L10, "/locks",
                     "{\"names\":[\"mf-0\",\"mf-1\",\"mf-2\",\"mf-3\",\"mf-4\"],"
                     "\"ttl_ms\":10000}",
                     NULL, &r),
                 503);
    CHECK_STR(th_jerr(&r), "too_many_locks");
    th_resp_free(&r);
    for (int i = 0; i < 5; i++) {
        char path[32];
        snprintf(path, sizeof(path), "/locks/mf-%d", i);
        CHECK_EQ_INT(req(c, "GET", &L10, path, NULL, NULL, &r), 200);
        CHECK(json_is_false(json_object_get(r.json, "held")));
        th_resp_free(&r);
    }
    CHECK_EQ_INT(req(c, "POST", &L10, "/locks", "{\"names\":[\"mf-0\",\"mf-1\"],\"ttl_ms\":10000}",
                     NULL, &r),
                 200);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 2);
    th_resp_free(&r);
    /* Now all 10 are live: even one more name is refused. */
    CHECK_EQ_INT(req(c, "POST", &L10, "/locks/mm-x", "{\"ttl_ms\":10000}", NULL, NULL), 503);
    th_lockd_kill(&L10, SIGKILL);
    th_client_free(c);
}

/* reassert.lua on its own (redis-cli --eval): the fence counter is raised
 * to a re-asserted lease's token, never lowered, also when a watcher marked
 * it ('<n>w', issue 26), and the mark stays; a lock another lease holds is
 * never overwritten. Fencing tokens only ever increase. */
static const char *reassert(const char *lease, const char *tok)
{
    static char args[1024];
    const char *repo = getenv("REPO");
    snprintf(args, sizeof(args),
             "--eval %s/server/scripts/reassert.lua 'ra:m' 'ra:g' 'ra:{n}' , 0 0 86400000 "
             "%s %s '0 5000 o' 5000 x",
             repo ? repo : ".", lease, tok);
    return th_redis_cli(&R, args);
}

static void t_reassert_never_lowers_counter(void)
{
    const char *a = "0123456789abcdef0123456789abcdef", *b = "fedcba9876543210fedcba9876543210";
    th_redis_cli(&R, "DEL 'ra:{n}' 'ra:{n}:fence' ra:m ra:g");
    th_redis_cli(&R, "SET 'ra:{n}:fence' 500w");
    reassert(a, "400");
    CHECK(strncmp(th_redis_cli(&R, "GET 'ra:{n}:fence'"), "500w\n", 5) == 0);
    CHECK(strncmp(th_redis_cli(&R, "GET 'ra:{n}'"), "1", 1) == 0); /* put back */
    th_redis_cli(&R, "DEL 'ra:{n}'");
    th_redis_cli(&R, "SET 'ra:{n}:fence' 300w");
    reassert(a, "400");
    CHECK(strncmp(th_redis_cli(&R, "GET 'ra:{n}:fence'"), "400w\n", 5) == 0);
    th_redis_cli(&R, "DEL 'ra:{n}:fence'");
    reassert(b, "900"); /* a holds it: b is not put over it */
    CHECK(strstr(th_redis_cli(&R, "GET 'ra:{n}'"), a) != NULL);
    CHECK(strncmp(th_redis_cli(&R, "GET 'ra:{n}:fence'"), "900\n", 4) == 0);
    th_redis_cli(&R, "DEL 'ra:{n}' 'ra:{n}:fence' ra:m ra:g");
}

int main(void)
{
    th_redis_start(&R, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", R.port);
    lockd_on(&L1, "2000");
    lockd_on(&L2, "2000");
    TH_RUN(t_reassert_never_lowers_counter);
    TH_RUN(t_max_locks);
    TH_RUN(t_max_locks_multi);
    TH_RUN(t_hundred_leases);
    TH_RUN(t_shared_across_restart);
    TH_RUN(t_multi_across_restart);
    TH_RUN(t_exclusion_across_restart);
    th_lockd_kill(&L1, SIGKILL);
    th_lockd_kill(&L2, SIGKILL);
    lockd_on(&L1, "1000");
    lockd_on(&L2, "1000");
    TH_RUN(t_stopped_past_grace);
    th_lockd_kill(&L1, SIGKILL);
    th_lockd_kill(&L2, SIGKILL);
    th_redis_stop(&R);
    return th_done();
}
