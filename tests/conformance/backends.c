/*
 * backends.c - the backends the conformance suite runs on, one row each.
 * A row names the backend (as `backend` in the config and ops->name), what
 * to start before its cases, the config keys that open it, and the fault
 * hooks it can offer. Adding a backend is adding its row.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/conformance/conformance.h"
#include "tests/lib/harness.h"

static void set(struct lk_config *cfg, const char *key, const char *value)
{
    char err[256] = "";
    if (config_set(cfg, key, value, "conformance", err, sizeof(err)) != 0)
        th_fail(__FILE__, __LINE__, "config %s=%s: %s", key, value, err);
}

/* ---- memory: in-process, nothing to start, no fault to inject ---- */

static void memory_open(struct lk_config *cfg)
{
    set(cfg, "backend", "memory");
}

/* ---- redis: one redis-server of its own, persisting every write (AOF,
 * fsync always) so that a restart keeps what it granted ---- */

static struct th_redis redis;
static const char *const redis_conf[] = {"appendonly yes", "appendfsync always", NULL};

static void redis_start(void)
{
    th_redis_start(&redis, 0, redis_conf);
}

static void redis_stop(void)
{
    th_redis_stop(&redis);
}

static void redis_open(struct lk_config *cfg)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", redis.port);
    set(cfg, "backend", "redis");
    set(cfg, "redis", url);
    set(cfg, "key_prefix", "cf:");
}

static void redis_pause(void)
{
    CHECK(kill(redis.pid, SIGSTOP) == 0); /* accepts nothing, answers nothing */
}

static void redis_resume(void)
{
    CHECK(kill(redis.pid, SIGCONT) == 0);
}

static void redis_restart(void)
{
    int port = redis.port;
    th_redis_stop(&redis);                    /* SIGKILL: no shutdown save */
    th_redis_start(&redis, port, redis_conf); /* same port, same dir: the AOF is read back */
}

/* ---- redlock: three redis-server processes of its own, each persisting
 * every write; the faults hit all three (a minority's faults are
 * tests/integration/redlock.c's) ---- */

#define RL_N 3
static struct th_redis rl[RL_N];

static void redlock_start(void)
{
    for (int i = 0; i < RL_N; i++)
        th_redis_start(&rl[i], 0, redis_conf);
}

static void redlock_stop(void)
{
    for (int i = 0; i < RL_N; i++)
        th_redis_stop(&rl[i]);
}

static void redlock_open(struct lk_config *cfg)
{
    char urls[256];
    snprintf(urls, sizeof(urls), "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             rl[0].port, rl[1].port, rl[2].port);
    set(cfg, "backend", "redlock");
    set(cfg, "redis", urls);
    set(cfg, "key_prefix", "cf:");
}

static void redlock_pause(void)
{
    for (int i = 0; i < RL_N; i++)
        CHECK(kill(rl[i].pid, SIGSTOP) == 0);
}

static void redlock_resume(void)
{
    for (int i = 0; i < RL_N; i++)
        CHECK(kill(rl[i].pid, SIGCONT) == 0);
}

static void redlock_restart(void)
{
    for (int i = 0; i < RL_N; i++) {
        int port = rl[i].port;
        th_redis_stop(&rl[i]);
        th_redis_start(&rl[i], port, redis_conf);
    }
}

/* ---- sentinel: a primary (persisting every write), its replica and
 * three sentinels. The faults stop the sentinels too, so that none of
 * them fails over meanwhile (failover is tests/integration/sentinel.c's) ---- */

#define SN_N 3
static struct th_redis sn_data[2], sn_sen[SN_N];

static void sentinel_start(void)
{
    th_redis_start(&sn_data[0], 0, redis_conf);
    char of[64];
    snprintf(of, sizeof(of), "replicaof 127.0.0.1 %d", sn_data[0].port);
    const char *const rconf[] = {"appendonly yes", "appendfsync always", of, NULL};
    th_redis_start(&sn_data[1], 0, rconf);
    for (int i = 0; i < SN_N; i++)
        th_sentinel_start(&sn_sen[i], "cf", sn_data[0].port, 2, NULL);
}

static void sentinel_stop(void)
{
    for (int i = 0; i < SN_N; i++)
        th_redis_stop(&sn_sen[i]);
    for (int i = 0; i < 2; i++)
        th_redis_stop(&sn_data[i]);
}

static void sentinel_open(struct lk_config *cfg)
{
    char urls[256];
    snprintf(urls, sizeof(urls), "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             sn_sen[0].port, sn_sen[1].port, sn_sen[2].port);
    set(cfg, "backend", "sentinel");
    set(cfg, "redis", urls);
    set(cfg, "redis_master_name", "cf");
    set(cfg, "key_prefix", "cf:");
}

static void sentinel_signal(int sig)
{
    for (int i = 0; i < SN_N; i++)
        CHECK(kill(sn_sen[i].pid, sig) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(kill(sn_data[i].pid, sig) == 0);
}

static void sentinel_pause(void)
{
    sentinel_signal(SIGSTOP);
}

static void sentinel_resume(void)
{
    sentinel_signal(SIGCONT);
}

static void sentinel_restart(void)
{
    for (int i = 0; i < SN_N; i++)
        CHECK(kill(sn_sen[i].pid, SIGSTOP) == 0);
    int port = sn_data[0].port;
    th_redis_stop(&sn_data[0]);
    th_redis_start(&sn_data[0], port, redis_conf);
    for (int i = 0; i < SN_N; i++)
        CHECK(kill(sn_sen[i].pid, SIGCONT) == 0);
}

/* ---- cluster: three primaries (no replicas) of a Redis Cluster made by
 * redis-cli --cluster create, each persisting every write; the faults hit
 * all three, so no slot changes hands (resharding and a lost primary are
 * tests/integration/cluster.c's) ---- */

#define CL_N 3
static struct th_redis cl[CL_N];
static const char *const cl_conf[] = {"appendonly yes",
                                      "appendfsync always",
                                      "cluster-enabled yes",
                                      "cluster-config-file nodes.conf",
                                      "cluster-node-timeout 1000",
                                      "cluster-require-full-coverage no",
                                      NULL};

static void cluster_start(void)
{
    th_cluster_start(cl, CL_N, redis_conf);
}

static void cluster_stop(void)
{
    for (int i = 0; i < CL_N; i++)
        th_redis_stop(&cl[i]);
}

static void cluster_open(struct lk_config *cfg)
{
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", cl[1].port); /* one seed is enough */
    set(cfg, "backend", "cluster");
    set(cfg, "redis", url);
    set(cfg, "key_prefix", "cf:");
}

static void cluster_pause(void)
{
    for (int i = 0; i < CL_N; i++)
        CHECK(kill(cl[i].pid, SIGSTOP) == 0);
}

static void cluster_resume(void)
{
    for (int i = 0; i < CL_N; i++)
        CHECK(kill(cl[i].pid, SIGCONT) == 0);
}

static bool cluster_ok(void *arg)
{
    return strstr(th_redis_cli(arg, "CLUSTER INFO"), "cluster_state:ok") != NULL;
}

static void cluster_restart(void)
{
    for (int i = 0; i < CL_N; i++) {
        int port = cl[i].port;
        th_redis_stop(&cl[i]);
        th_redis_start(&cl[i], port, cl_conf); /* nodes.conf and the AOF are read back */
    }
    for (int i = 0; i < CL_N; i++)
        CHECK(th_wait_for(cluster_ok, &cl[i], 15000));
}

const struct cf_backend cf_backends[] = {
    /* name, start, stop, open, then the fault hooks pause, resume, restart (NULL: none) */
    {"memory", NULL, NULL, memory_open, NULL, NULL, NULL},
    {"redis", redis_start, redis_stop, redis_open, redis_pause, redis_resume, redis_restart},
    {"redlock", redlock_start, redlock_stop, redlock_open, redlock_pause, redlock_resume,
     redlock_restart},
    {"sentinel", sentinel_start, sentinel_stop, sentinel_open, sentinel_pause, sentinel_resume,
     sentinel_restart},
    {"cluster", cluster_start, cluster_stop, cluster_open, cluster_pause, cluster_resume,
     cluster_restart},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
};
