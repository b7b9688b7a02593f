/*
 * cluster_slot.c - lockd's key slot function (server/redis_slot.c) against
 * CLUSTER KEYSLOT of a real redis-server started with cluster-enabled yes:
 * lockd's own keys (lock, fence counter, release channel, several
 * prefixes) and random keys with and without braces, all pipelined on one
 * connection.
 */
#include <hiredis/hiredis.h>

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

int main(void)
{
    TH_RUN(t_keyslot_matches_redis);
    return th_done();
}
