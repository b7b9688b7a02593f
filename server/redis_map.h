/*
 * redis_map.h - where Redis replies say nodes are: a Cluster's slot map
 * (CLUSTER SHARDS, CLUSTER SLOTS), a MOVED or ASK redirection, a sentinel's
 * answer to get-master-addr-by-name. Reading only: the asking is in
 * redis_cluster.c and redis_sentinel.c. Pure, any thread; fuzzed by
 * tests/fuzz/fuzz_redis_reply.c.
 */
#ifndef LOCKD_SERVER_REDIS_MAP_H
#define LOCKD_SERVER_REDIS_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "server/redis_slot.h"

struct redisReply;

#define REDIS_MAP_NODES 64                  /* addresses one map names, at most */
#define REDIS_HOST_MAX 255                  /* as struct redis_url's host */
#define REDIS_ADDR_LEN (REDIS_HOST_MAX + 8) /* "<host>:<port>" and its NUL */

/* A map as one node told it: owner[s] indexes addrs[] ("<host>:<port>"),
 * -1 when no primary serves slot s; n addresses. */
struct redis_map {
    short owner[REDIS_SLOTS];
    char addrs[REDIS_MAP_NODES][REDIS_ADDR_LEN];
    int n;
};

/* Empties m: no address, no slot served. */
void redis_map_clear(struct redis_map *m);

/* Reads a CLUSTER SHARDS (Redis 7) or CLUSTER SLOTS answer r into m (cleared
 * first) from a node reached at host via: its primaries' addresses and
 * the slots each serves. An entry that names no usable primary (no
 * address, a host longer than REDIS_HOST_MAX, a port out of 1..65535, the
 * table full) is skipped, and a slot range whose bounds are not numbers.
 * False when r is not an array: not such an answer. */
bool redis_map_shards(const struct redisReply *r, const char *via, struct redis_map *m);
bool redis_map_slots(const struct redisReply *r, const char *via, struct redis_map *m);

/* Whether r is a string or status reply equal to s. */
bool redis_reply_is(const struct redisReply *r, const char *s);

/* Reads a refusal "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>"
 * (slot 0 .. REDIS_SLOTS - 1 in decimal, port 1..65535, host 1 to
 * REDIS_HOST_MAX bytes): true with *slot and *addr (the "<host>:<port>"
 * part, borrowed from refusal), false when it is not one. */
bool redis_redirect_parse(const char *refusal, int *slot, const char **addr);

/* Reads a sentinel's answer to SENTINEL get-master-addr-by-name: 1 and
 * host (cap bytes) and *port when it names the primary (a host, not empty,
 * that fits in cap; a port of 1..65535 in decimal), -1 when it is an error
 * (not a sentinel, or it refused us), 0 otherwise (it does not know the
 * name, or names no address lockd could use). */
int redis_sentinel_addr(const struct redisReply *r, char *host, size_t cap, int *port);

#endif
