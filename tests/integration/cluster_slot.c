/*
 * cluster_slot.c - lockd's key slot function (server/redis_slot.c) against
 * CLUSTER KEYSLOT of a real redis-server started with cluster-enabled yes:
 * lockd's own keys (lock, fence counter, release channel, several
 * prefixes) and random keys with and without braces, all pipelined on one
 * connection. And a cluster of one node that never met another (it gives
 * its own address as "" in CLUSTER SHARDS and CLUSTER SLOTS): lockd takes
 * it for the node it asked, and serves.
 */
#include <hiredis/hiredis.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/redis_slot.h"
#include "tests/lib/harness.h"

#define KEYS 4000

static struct th_redis R;

static void random_key(char *k, size_t cap, unsigned *seed)
{
    static const char alphabet[] = "ab{}{}:-_xyz09";
    size_t n = 1 + (size_t)rand_r(seed) % (cap - 2);
    for (size_t i = 0; i < n; i++)
        k[i] = alphabet[(size_t)rand_r(seed) % (sizeof(alphabet) - 1)];
    k[n] = '\0';
}

static void t_keyslot_matches_redis(void)
{
    const char *const conf[] = {"cluster-enabled yes", "cluster-config-file nodes.conf", NULL};
    th_redis_start(&R, 0, conf);
    redisContext *c = redisConnect("127.0.0.1", R.port);
    CHECK(c != NULL && c->err == 0);
    static char keys[KEYS][48];
    static const char *const prefixes[] = {"lockd:", "", "app/", "x{", "cf:"};
    static const char *const suffixes[] = {"}", "}:fence"};
    unsigned seed = 24;
    for (int i = 0; i < KEYS; i++) {
        if (i % 2 == 0) {
            char name[24];
            random_key(name, sizeof(name), &seed);
            snprintf(keys[i], sizeof(keys[i]), "%s%s{%s%s", prefixes[i / 2 % 5],
                     i % 8 == 0 ? "released:" : "", name, suffixes[i / 4 % 2]);
        } else {
            random_key(keys[i], sizeof(keys[i]), &seed);
        }
        CHECK(redisAppendCommand(c, "CLUSTER KEYSLOT %s", keys[i]) == REDIS_OK);
    }
    for (int i = 0; i < KEYS; i++) {
        redisReply *r = NULL;
        CHECK(redisGetReply(c, (void **)&r) == REDIS_OK && r != NULL);
        CHECK_EQ_INT(r->type, REDIS_REPLY_INTEGER);
        if (r->integer != redis_key_slot(keys[i], strlen(keys[i])))
            th_fail(__FILE__, __LINE__, "key '%s': redis says %lld, lockd %d", keys[i], r->integer,
                    redis_key_slot(keys[i], strlen(keys[i])));
        freeReplyObject(r);
    }
    redisFree(c);
    printf("# %d keys: lockd's slot is CLUSTER KEYSLOT's\n", KEYS);
    th_redis_stop(&R);
}

static bool cluster_ok(void *arg)
{
    return strstr(th_redis_cli(arg, "CLUSTER INFO"), "cluster_state:ok") != NULL;
}

static long call(struct th_client *c, const char *method, const char *url, const char *body,
                 const char *lease, char *lease_out)
{
    struct th_resp r;
    long st = th_req(c, method, url, body, lease, &r);
    if (lease_out != NULL && st == 200)
        snprintf(lease_out, 64, "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    return st;
}

/* One primary with every slot and no cluster-announce-ip: lockd must know
 * it as the owner of every slot, not answer 503 to everything. */
static void t_single_node_cluster(void)
{
    const char *const conf[] = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                                "cluster-node-timeout 1000", NULL};
    th_redis_start(&R, 0, conf);
    CHECK(strstr(th_redis_cli(&R, "CLUSTER ADDSLOTSRANGE 0 16383"), "OK") != NULL);
    CHECK(th_wait_for(cluster_ok, &R, 15000 * th_time_scale()));
    /* what makes the case: the node names itself "" */
    const char *shards = th_redis_cli(&R, "CLUSTER SHARDS");
    printf("# CLUSTER SHARDS gives the node's ip as \"\": %s\n",
           strstr(shards, "ip\n\n") != NULL ? "yes" : "no (this Redis knows it)");
    char redis[64];
    snprintf(redis, sizeof(redis), "redis://127.0.0.1:%d", R.port);
    struct th_lockd l;
    const char *args[] = {"--backend", "cluster", "--redis", redis, "--backend_timeout_ms",
                          "1000",      NULL};
    th_lockd_start(&l, args, NULL);
    struct th_client *c = th_client_new();
    char url[160], lease[64] = "";
    snprintf(url, sizeof(url), "%s/readyz", l.url);
    CHECK_EQ_INT(call(c, "GET", url, NULL, NULL, NULL), 200);
    for (int i = 0; i < 20; i++) { /* names all over the slot space */
        snprintf(url, sizeof(url), "%s/locks/one-node-%d", l.url, i);
        CHECK_EQ_INT(call(c, "POST", url, "{\"ttl_ms\":10000}", NULL, lease), 200);
        CHECK_EQ_INT(call(c, "POST", url, "{\"ttl_ms\":10000}", NULL, NULL), 409);
        CHECK_EQ_INT(call(c, "DELETE", url, NULL, lease, NULL), 200);
        CHECK_EQ_INT(call(c, "POST", url, "{\"ttl_ms\":10000}", NULL, lease), 200);
        CHECK_EQ_INT(call(c, "DELETE", url, NULL, lease, NULL), 200);
    }
    th_client_free(c);
    CHECK_EQ_INT(th_lockd_signal_wait(&l, SIGTERM, 30000 * th_time_scale()), 0);
    th_redis_stop(&R);
}

int main(void)
{
    TH_RUN(t_keyslot_matches_redis);
    TH_RUN(t_single_node_cluster);
    return th_done();
}
