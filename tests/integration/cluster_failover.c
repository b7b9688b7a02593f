/*
 * cluster_failover.c - a Redis Cluster primary replaced by its replica
 * (issues 24 and 25), end to end: three primaries (redis-cli --cluster
 * create, cluster-node-timeout 1000) and one replica of primary 0 (add-node
 * --cluster-slave), two real lockd on `backend cluster` without
 * redis_wait_replicas. The replica is made to miss the last grants (stopped
 * while 32 MB of replication stream go ahead of them), then primary 0 is
 * SIGKILLed: its names answer 503 while the cluster fails over (the other
 * primaries' names keep working), then the promoted replica serves them
 * once lockd re-asserted every live lease there and its grace ran out; no
 * name held before is granted to anyone else, each lease renews with its
 * token, the next grant is larger, and the restart was counted.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"

#define N 3
#define PREFIX "cf:"
#define NKEPT 8   /* granted and replicated before the fault */
#define NMISSED 8 /* granted while the replica was stopped */

static struct th_redis node[N], rep;
static struct th_lockd L[2];

static void lockd_on(struct th_lockd *l)
{
    const char *extra[] = {
        "--backend_timeout_ms", "500", "--restart_grace_ms", "1000", "--log_format", "text", NULL};
    th_cluster_lockd_start(l, &node[1], &node[2], PREFIX, extra);
}

static long req(struct th_client *c, const struct th_lockd *l, const char *method, const char *name,
                const char *body, const char *lease, struct th_resp *keep)
{
    char url[1600];
    snprintf(url, sizeof(url), "%s/locks/%s", l->url, name);
    return th_req(c, method, url, body, lease, keep);
}

/* Whether node i serves name's slot (it answers instead of MOVED). */
static bool served_by(int i, const char *name)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "EXISTS '" PREFIX "{%s}'", name);
    return strstr(th_redis_cli(&node[i], cmd), "MOVED") == NULL;
}

static bool promoted(void *arg)
{
    (void)arg;
    return strncmp(th_redis_cli(&rep, "ROLE"), "master", 6) == 0;
}

static bool known_by_all(void *arg)
{
    (void)arg;
    char port[16];
    snprintf(port, sizeof(port), ":%d@", rep.port);
    for (int i = 1; i < N; i++) {
        const char *out = th_redis_cli(&node[i], "CLUSTER NODES");
        const char *p = strstr(out, port);
        const char *eol = p ? strchr(p, '\n') : NULL;
        const char *slave = p ? strstr(p, "slave") : NULL;
        if (p == NULL || slave == NULL || (eol != NULL && slave > eol))
            return false;
    }
    return true;
}

struct held {
    char name[32];
    char lease[40];
    long long token;
    int l;
};

static void grant(struct th_client *c, struct held *h)
{
    struct th_resp r;
    CHECK_EQ_INT(req(c, &L[h->l], "POST", h->name, "{\"ttl_ms\":30000}", NULL, &r), 200);
    snprintf(h->lease, sizeof(h->lease), "%s", th_jstr(&r, "lease"));
    h->token = th_jint(&r, "fencing_token");
    th_resp_free(&r);
}

/* Tries every held name through both lockd: never a grant. */
static void check_held(struct th_client *c, struct held *hs, int n, const char *when)
{
    for (int i = 0; i < n; i++) {
        struct th_resp r;
        long st = req(c, &L[(hs[i].l + 1) % 2], "POST", hs[i].name, "{\"ttl_ms\":1000}", NULL, &r);
        if (st == 200)
            th_fail(__FILE__, __LINE__, "'%s' granted again %s: %s", hs[i].name, when, r.body);
        if (st != 409 && st != 503)
            th_fail(__FILE__, __LINE__, "'%s' %s: %ld %s", hs[i].name, when, st, r.body);
        th_resp_free(&r);
    }
}

static void t_failover_to_replica(void)
{
    struct th_client *c = th_client_new();
    struct held hs[NKEPT + NMISSED];
    char other[32] = "", fresh[32] = "";
    int k = 0;
    for (int i = 0; k < NKEPT + NMISSED || !other[0] || !fresh[0]; i++) {
        char name[32];
        snprintf(name, sizeof(name), "cf-%d", i);
        bool on0 = served_by(0, name);
        if (on0 && k < NKEPT + NMISSED) {
            memset(&hs[k], 0, sizeof(hs[k]));
            snprintf(hs[k].name, sizeof(hs[k].name), "%s", name);
            hs[k].l = k % 2;
            k++;
        } else if (on0) {
            snprintf(fresh, sizeof(fresh), "%s", name);
        } else if (!other[0]) {
            snprintf(other, sizeof(other), "%s", name);
        }
        CHECK(i < 10000);
    }
    for (int i = 0; i < NKEPT; i++)
        grant(c, &hs[i]);
    CHECK(strstr(th_redis_cli(&node[0], "WAIT 1 5000"), "1") != NULL); /* the replica has them */
    long long r0 = th_restarts(c, &L[0]), r1 = th_restarts(c, &L[1]);

    /* The replica stops reading; a script's 32 MB effect goes into the
     * replication stream ahead of the next grants, which stay in primary
     * 0's output buffer: lost with it. */
    char cmd[256];
    kill(rep.pid, SIGSTOP);
    snprintf(cmd, sizeof(cmd),
             "EVAL \"redis.call('SET',KEYS[1],string.rep('x',33554432))\" 1 '" PREFIX "{%s}:junk'",
             hs[0].name);
    th_redis_cli(&node[0], cmd);
    for (int i = NKEPT; i < NKEPT + NMISSED; i++)
        grant(c, &hs[i]);
    th_redis_stop(&node[0]);
    int64_t killed = th_now_ms();
    kill(rep.pid, SIGCONT);

    /* Meanwhile: primary 0's names 503, the others served. */
    CHECK_EQ_INT(req(c, &L[0], "POST", fresh, "{\"ttl_ms\":1000}", NULL, NULL), 503);
    struct th_resp r;
    CHECK_EQ_INT(req(c, &L[1], "POST", other, "{\"ttl_ms\":1000}", NULL, &r), 200);
    th_resp_free(&r);
    check_held(c, hs, NKEPT + NMISSED, "during the failover");
    CHECK(th_wait_for(promoted, NULL, 15000 * th_time_scale()));
    int64_t up = th_now_ms();

    /* The promoted replica serves primary 0's names once lockd re-asserted
     * its leases there and the grace (1 s) ran out. */
    int n503 = 0;
    long st;
    int64_t end = up + 10000 * th_time_scale();
    while ((st = req(c, &L[0], "POST", fresh, "{\"ttl_ms\":1000}", NULL, &r)) != 200) {
        CHECK_EQ_INT(st, 503);
        n503++;
        th_resp_free(&r);
        check_held(c, hs, NKEPT + NMISSED, "after the promotion");
        if (th_now_ms() > end)
            th_fail(__FILE__, __LINE__, "primary 0's names still 503 10 s after the promotion");
        th_sleep_ms(20);
    }
    th_resp_free(&r);
    printf("# replica promoted %lld ms after the kill; its names served %lld ms after that "
           "(%d x 503 meanwhile)\n",
           (long long)(up - killed), (long long)(th_now_ms() - up), n503);
    CHECK_EQ_INT(th_restarts(c, &L[0]), r0 + 1);
    CHECK_EQ_INT(th_restarts(c, &L[1]), r1 + 1);
    /* the replica did miss the last grants: lockd put them back there */
    long back = th_log_reasserted(&L[0]) + th_log_reasserted(&L[1]);
    printf("# lockd put back %ld leases on the promoted replica\n", back);
    CHECK(back >= NMISSED);
    for (int i = 0; i < NKEPT + NMISSED; i++) {
        char key[96];
        snprintf(key, sizeof(key), "GET '" PREFIX "{%.31s}'", hs[i].name);
        CHECK(strstr(th_redis_cli(&rep, key), hs[i].lease) != NULL);
    }
    th_sleep_ms(300);
    check_held(c, hs, NKEPT + NMISSED, "after the grace");
    for (int i = 0; i < NKEPT + NMISSED; i++) {
        struct held *h = &hs[i];
        CHECK_EQ_INT(req(c, &L[h->l], "PUT", h->name, "{}", h->lease, &r), 200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), h->token);
        th_resp_free(&r);
        CHECK_EQ_INT(req(c, &L[h->l], "DELETE", h->name, NULL, h->lease, NULL), 200);
        CHECK_EQ_INT(req(c, &L[(h->l + 1) % 2], "POST", h->name, "{\"ttl_ms\":1000}", NULL, &r),
                     200);
        CHECK(th_jint(&r, "fencing_token") > h->token);
        th_resp_free(&r);
    }
    th_client_free(c);
}

int main(void)
{
    th_cluster_start(node, N, NULL);
    th_cluster_add_replica(&node[0], &rep);
    CHECK(th_wait_for(known_by_all, NULL, 15000));
    lockd_on(&L[0]);
    lockd_on(&L[1]);
    TH_RUN(t_failover_to_replica);
    th_lockd_kill(&L[0], SIGKILL);
    th_lockd_kill(&L[1], SIGKILL);
    for (int i = 1; i < N; i++)
        th_redis_stop(&node[i]);
    th_redis_stop(&rep);
    return th_done();
}
