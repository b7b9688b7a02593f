/*
 * redis_map.c - where Redis replies say nodes are: a Cluster's slot map, a
 * MOVED or ASK redirection, a sentinel's named primary. A Redis server
 * controls these bytes: nothing here trusts a length, a type or a number,
 * and an address that does not fit is skipped, never cut short (a cut
 * host is another host). Pure, any thread.
 */
#include "server/redis_map.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

void redis_map_clear(struct redis_map *m)
{
    memset(m->owner, 0xff, sizeof(m->owner)); /* -1 */
    m->n = 0;
}

/* A port in decimal, 1..65535, nothing after it; -1 otherwise. */
static long long port_of(const char *s)
{
    size_t d = strspn(s, "0123456789");
    if (d == 0 || d > 5 || s[d] != '\0' || s[0] == '0')
        return -1;
    long long p = atoll(s);
    return p <= 65535 ? p : -1;
}

/* A node's address as a map names it. An empty (or absent) host is a node
 * that does not know its own address (a cluster of one that never met
 * another): it is the one that answered, at the host it was reached by
 * (`via`), as redis-cli and redis-py read it. "?" is a node that announces
 * hostnames but has none: unknown. */
static int map_addr(struct redis_map *m, const char *host, const char *via, long long port)
{
    char a[REDIS_ADDR_LEN];
    if (host == NULL || host[0] == '\0')
        host = via;
    if (port <= 0 || port > 65535 || host == NULL || host[0] == '\0' || strcmp(host, "?") == 0 ||
        strlen(host) > REDIS_HOST_MAX)
        return -1;
    snprintf(a, sizeof(a), "%s:%lld", host, port);
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->addrs[i], a) == 0)
            return i;
    if (m->n == REDIS_MAP_NODES)
        return -1;
    lk_strlcpy(m->addrs[m->n], a, REDIS_ADDR_LEN);
    return m->n++;
}

static const redisReply *field(const redisReply *map, const char *key)
{
    if (map == NULL || map->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < map->elements; i += 2)
        if (map->element[i]->type == REDIS_REPLY_STRING && strcmp(map->element[i]->str, key) == 0)
            return map->element[i + 1];
    return NULL;
}

bool redis_reply_is(const redisReply *r, const char *s)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
           strcmp(r->str, s) == 0;
}

/* An integer reply, or a string of one (an optional '-' and digits), into
 * *v; false for anything else, which atoll would have read as 0 (a slot
 * range "from 0" that the reply never gave). */
static bool rnum(const redisReply *r, long long *v)
{
    if (r == NULL)
        return false;
    if (r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return true;
    }
    if (r->type != REDIS_REPLY_STRING)
        return false;
    const char *d = r->str[0] == '-' ? r->str + 1 : r->str;
    size_t n = strspn(d, "0123456789");
    if (n == 0 || n > 18 || d[n] != '\0')
        return false;
    *v = atoll(r->str);
    return true;
}

/* Slots lo..hi (within 0 .. REDIS_SLOTS - 1) to who, when both are numbers. */
static void map_range(struct redis_map *m, const redisReply *lo, const redisReply *hi, int who)
{
    long long a, b;
    if (!rnum(lo, &a) || !rnum(hi, &b))
        return;
    for (long long s = a < 0 ? 0 : a; s <= b && s < REDIS_SLOTS; s++)
        m->owner[s] = (short)who;
}

/* A port reply's value, -1 when it is not a number. */
static long long rport(const redisReply *r)
{
    long long p;
    return rnum(r, &p) ? p : -1;
}

/* CLUSTER SHARDS (Redis 7): [{slots: [lo, hi, ...], nodes: [{ip, port,
 * role, health, ...}, ...]}, ...]; the primary that is not failed wins, a
 * failed one is still its slots' owner (its names answer 503). */
bool redis_map_shards(const redisReply *r, const char *via, struct redis_map *m)
{
    redis_map_clear(m);
    if (r->type != REDIS_REPLY_ARRAY)
        return false;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *slots = field(r->element[i], "slots");
        const redisReply *nodes = field(r->element[i], "nodes");
        if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY ||
            nodes->type != REDIS_REPLY_ARRAY || slots->elements == 0)
            continue;
        const redisReply *best = NULL;
        for (size_t j = 0; j < nodes->elements; j++) {
            const redisReply *nd = nodes->element[j];
            if (!redis_reply_is(field(nd, "role"), "master"))
                continue;
            if (best == NULL || !redis_reply_is(field(nd, "health"), "fail"))
                best = nd;
        }
        if (best == NULL)
            continue;
        const redisReply *ip = field(best, "ip");
        int who = map_addr(m, ip && ip->type == REDIS_REPLY_STRING ? ip->str : NULL, via,
                           rport(field(best, "port")));
        if (who < 0)
            continue;
        for (size_t k = 0; k + 1 < slots->elements; k += 2)
            map_range(m, slots->element[k], slots->element[k + 1], who);
    }
    return true;
}

/* CLUSTER SLOTS: [[lo, hi, [ip, port, id], replicas...], ...]; the ip may
 * be "" or nil (map_addr). */
bool redis_map_slots(const redisReply *r, const char *via, struct redis_map *m)
{
    redis_map_clear(m);
    if (r->type != REDIS_REPLY_ARRAY)
        return false;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            continue;
        const redisReply *ip = e->element[2]->element[0];
        if (ip->type != REDIS_REPLY_STRING && ip->type != REDIS_REPLY_NIL)
            continue;
        int who = map_addr(m, ip->type == REDIS_REPLY_STRING ? ip->str : NULL, via,
                           rport(e->element[2]->element[1]));
        if (who >= 0)
            map_range(m, e->element[0], e->element[1], who);
    }
    return true;
}

bool redis_redirect_parse(const char *refusal, int *slot, const char **addr)
{
    const char *sp = strchr(refusal, ' ');
    if (sp == NULL)
        return false;
    /* digits only: atoi would also take " 12", "+12" or "12abc" */
    size_t d = strspn(sp + 1, "0123456789");
    if (d == 0 || d > 5 || sp[1 + d] != ' ' || (d > 1 && sp[1] == '0'))
        return false;
    int s = atoi(sp + 1);
    const char *a = sp + 2 + d;
    const char *colon = strrchr(a, ':');
    if (s >= REDIS_SLOTS || colon == NULL || colon == a || colon - a > REDIS_HOST_MAX ||
        port_of(colon + 1) < 0)
        return false;
    *slot = s;
    *addr = a;
    return true;
}

int redis_sentinel_addr(const redisReply *r, char *host, size_t cap, int *port)
{
    if (r->type == REDIS_REPLY_ERROR)
        return -1; /* not a sentinel, or it refused us: try the next */
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return 0;
    long long p = port_of(r->element[1]->str);
    size_t hl = strlen(r->element[0]->str);
    if (p < 0 || hl == 0 || hl >= cap) /* never a cut host, nor "6379abc" read as 6379 */
        return 0;
    memcpy(host, r->element[0]->str, hl + 1);
    *port = (int)p;
    return 1;
}
