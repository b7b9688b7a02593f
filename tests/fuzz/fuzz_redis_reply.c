/*
 * fuzz_redis_reply.c - libFuzzer target for what a Redis server says about
 * where nodes are (redis_map.c): CLUSTER SHARDS and CLUSTER SLOTS answers,
 * MOVED/ASK refusals and a sentinel's get-master-addr-by-name answer. The
 * first byte picks the reader; the rest is RESP, read by hiredis as lockd
 * reads it off the wire, or the refusal's text. CLUSTER SLOTS is compared
 * with a reference reader; every map's addresses must be "<host>:<port>"
 * with the host as the reply gave it (never cut) and a port of 1..65535. A
 * fifth mode builds a valid map from the bytes, writes it both ways and
 * checks that both read back to it. A sixth reads an INFO text's fields
 * (redis_version.c: the startup probe's version check and the run_id that
 * tells a restarted Redis) against a reference that splits the text into
 * lines. Built by `make fuzz`; seeds in corpus/fuzz_redis_reply.
 */
#include <hiredis/hiredis.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/redis_map.h"
#include "server/redis_version.h"
#include "tests/fuzz/resp_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define VIA "10.0.0.9"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_redis_reply: broken promise: %s\n", what);
        abort();
    }
}

/* s is a port in canonical decimal, 1..65535. */
static int port_ok(const char *s)
{
    size_t d = strspn(s, "0123456789");
    return d >= 1 && d <= 5 && s[d] == '\0' && s[0] != '0' && atol(s) <= 65535;
}

/* Whether some string in r (at any depth) is s. */
static int said(const redisReply *r, const char *s)
{
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        return strcmp(r->str, s) == 0;
    if (r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; i++)
            if (said(r->element[i], s))
                return 1;
    return 0;
}

static void check_map(const struct redis_map *m, const redisReply *r)
{
    must(m->n >= 0 && m->n <= REDIS_MAP_NODES, "map size bounded");
    for (int s = 0; s < REDIS_SLOTS; s++)
        must(m->owner[s] >= -1 && m->owner[s] < m->n, "slot owners index the addresses");
    for (int i = 0; i < m->n; i++) {
        const char *a = m->addrs[i];
        const char *colon = strrchr(a, ':');
        must(colon != NULL && colon > a && port_ok(colon + 1), "address is host:port");
        char host[REDIS_ADDR_LEN];
        memcpy(host, a, (size_t)(colon - a));
        host[colon - a] = '\0';
        must(strcmp(host, "?") != 0, "no unknown host");
        must(strcmp(host, VIA) == 0 || said(r, host), "the host is one the reply named, whole");
        for (int j = 0; j < i; j++)
            must(strcmp(m->addrs[j], a) != 0, "addresses distinct");
    }
}

/* A number as the reference reads it: an integer reply, or a string of an
 * optional '-' and digits; 0 when it is neither. */
static int ref_num(const redisReply *r, long long *v)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        *v = r->integer;
        return 1;
    }
    if (r->type != REDIS_REPLY_STRING)
        return 0;
    const char *s = r->str[0] == '-' ? r->str + 1 : r->str;
    size_t d = strspn(s, "0123456789");
    if (d == 0 || d > 18 || s[d] != '\0')
        return 0;
    *v = atoll(r->str);
    return 1;
}

/* Element i of an array reply; NULL when r is no array or has no element i. */
static const redisReply *el(const redisReply *r, size_t i)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements ? r->element[i] : NULL;
}

/* CLUSTER SLOTS as its documentation reads: [[lo, hi, [ip, port, ...], ...], ...]. */
static void ref_slots(const redisReply *r, struct redis_map *m)
{
    memset(m->owner, 0xff, sizeof(m->owner));
    m->n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        /* [lo, hi, [ip, port, ...], ...]: each part there, or the entry is skipped */
        const redisReply *e = r->element[i], *node = el(e, 2);
        const redisReply *ip = el(node, 0), *pr = el(node, 1);
        long long port, lo, hi;
        if (pr == NULL || (ip->type != REDIS_REPLY_STRING && ip->type != REDIS_REPLY_NIL))
            continue;
        const char *host = ip->type == REDIS_REPLY_STRING && ip->str[0] ? ip->str : VIA;
        if (!ref_num(pr, &port) || port < 1 || port > 65535 || strcmp(host, "?") == 0 ||
            strlen(host) > REDIS_ADDR_LEN - 8)
            continue;
        char a[REDIS_ADDR_LEN];
        snprintf(a, sizeof(a), "%s:%lld", host, port);
        int who = -1;
        for (int k = 0; k < m->n && who < 0; k++)
            if (strcmp(m->addrs[k], a) == 0)
                who = k;
        if (who < 0 && m->n == REDIS_MAP_NODES)
            continue;
        if (who < 0) {
            memcpy(m->addrs[m->n], a, strlen(a) + 1);
            who = m->n++;
        }
        if (!ref_num(e->element[0], &lo) || !ref_num(e->element[1], &hi))
            continue;
        for (long long s = lo < 0 ? 0 : lo; s <= hi && s < REDIS_SLOTS; s++)
            m->owner[s] = (short)who;
    }
}

static redisReply *read_reply(const uint8_t *data, size_t size)
{
    if (resp_huge_array(data, size))
        return NULL; /* (resp_guard.h) */
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    if (redisReaderFeed(rd, (const char *)data, size) != REDIS_OK ||
        redisReaderGetReply(rd, &reply) != REDIS_OK)
        reply = NULL;
    redisReaderFree(rd);
    return reply;
}

static void fuzz_map(const uint8_t *data, size_t size, int shards)
{
    redisReply *r = read_reply(data, size);
    if (r == NULL)
        return;
    struct redis_map *m = malloc(sizeof(*m));
    bool ok = shards ? redis_map_shards(r, VIA, m) : redis_map_slots(r, VIA, m);
    must(ok == (r->type == REDIS_REPLY_ARRAY), "an array is a map");
    if (ok) {
        check_map(m, r);
        if (!shards) {
            struct redis_map *want = malloc(sizeof(*want));
            ref_slots(r, want);
            must(want->n == m->n, "CLUSTER SLOTS: as many addresses as the reference");
            for (int i = 0; i < m->n; i++)
                must(strcmp(want->addrs[i], m->addrs[i]) == 0,
                     "CLUSTER SLOTS: the reference's addresses");
            must(memcmp(want->owner, m->owner, sizeof(m->owner)) == 0,
                 "CLUSTER SLOTS: the reference's slot owners");
            free(want);
        }
    }
    free(m);
    freeReplyObject(r);
}

static void fuzz_redirect(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    int slot = -7;
    const char *addr = NULL;
    if (redis_redirect_parse(s, &slot, &addr)) {
        must(slot >= 0 && slot < REDIS_SLOTS, "redirection slot in range");
        must(addr > s && addr <= s + strlen(s), "address inside the refusal");
        const char *colon = strrchr(addr, ':');
        must(colon != NULL && colon > addr && colon - addr < REDIS_ADDR_LEN - 7 &&
                 port_ok(colon + 1),
             "redirection names host:port, within bounds");
        /* "<word> <slot> <addr>", written back, is the refusal */
        size_t wl = strcspn(s, " ");
        char *again = malloc(wl + 16);
        int n = snprintf(again, wl + 16, "%.*s %d ", (int)wl, s, slot);
        must((size_t)n == (size_t)(addr - s) && memcmp(again, s, (size_t)n) == 0,
             "the refusal is <word> <slot> <addr>, slot in decimal");
        free(again);
    }
    free(s);
}

static void fuzz_sentinel(const uint8_t *data, size_t size)
{
    redisReply *r = read_reply(data, size);
    if (r == NULL)
        return;
    char host[256];
    int port = -7;
    int rc = redis_sentinel_addr(r, host, sizeof(host), &port);
    must(rc == -1 || rc == 0 || rc == 1, "three answers");
    must((rc == -1) == (r->type == REDIS_REPLY_ERROR), "-1 exactly for an error");
    if (rc == 1) {
        must(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "named by a pair");
        must(host[0] != '\0' && strcmp(host, r->element[0]->str) == 0,
             "the primary's host, whole and not empty");
        char p[16];
        snprintf(p, sizeof(p), "%d", port);
        must(port >= 1 && port <= 65535 && strcmp(p, r->element[1]->str) == 0,
             "the primary's port, as the sentinel wrote it");
    }
    freeReplyObject(r);
}

/* Appends printf output to a growing buffer. */
struct buf {
    char *p;
    size_t n, cap;
};
__attribute__((format(printf, 2, 3))) static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)n + 1 > b->cap) {
        b->cap = (b->n + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

static void put_str(struct buf *b, const char *s)
{
    put(b, "$%zu\r\n%s\r\n", strlen(s), s);
}

/* A valid map from the bytes: ranges one after the other, each served by
 * one of up to 5 primaries (or nobody); node 4 has no address of its own
 * (""), so it is VIA. Written as CLUSTER SLOTS and as CLUSTER SHARDS (with
 * a replica, and, for some, a failed former primary listed first), both
 * must read back to it. */
static void fuzz_roundtrip(const uint8_t *data, size_t size)
{
    static const char *const ips[5] = {"10.0.0.1", "10.0.0.2", "fe80::1",
                                       "a-very-long-host-name.of-a-node.in-a-cluster.example.org",
                                       ""};
    short want[REDIS_SLOTS];
    memset(want, 0xff, sizeof(want));
    int lo[64], hi[64], who[64], nr = 0;
    int s = 0;
    for (size_t i = 0; i + 2 < size && nr < 64 && s < REDIS_SLOTS; i += 3) {
        int len = ((data[i] << 8 | data[i + 1]) % 4096) + 1;
        int node = data[i + 2] % 6; /* 5: a gap nobody serves */
        int end = s + len - 1 < REDIS_SLOTS ? s + len - 1 : REDIS_SLOTS - 1;
        if (node < 5) {
            lo[nr] = s;
            hi[nr] = end;
            who[nr] = node;
            nr++;
            for (int k = s; k <= end; k++)
                want[k] = (short)node;
        }
        s = end + 1;
    }
    const char *host_of[5];
    char addr[5][REDIS_ADDR_LEN];
    for (int k = 0; k < 5; k++) {
        host_of[k] = ips[k][0] ? ips[k] : VIA;
        snprintf(addr[k], sizeof(addr[k]), "%s:%d", host_of[k], 7000 + k);
    }
    struct buf b = {0};
    put(&b, "*%d\r\n", nr);
    for (int i = 0; i < nr; i++) {
        put(&b, "*4\r\n:%d\r\n:%d\r\n*3\r\n", lo[i], hi[i]);
        put_str(&b, ips[who[i]]);
        put(&b, ":%d\r\n", 7000 + who[i]);
        put_str(&b, "0123456789abcdef0123456789abcdef01234567");
        put(&b, "*3\r\n");
        put_str(&b, "10.0.1.1");
        put(&b, ":%d\r\n", 8000 + who[i]);
        put_str(&b, "f123456789abcdef0123456789abcdef01234567");
    }
    int used[5] = {0}, nused = 0;
    for (int i = 0; i < nr; i++)
        if (!used[who[i]]++)
            nused++;
    struct buf h = {0};
    put(&h, "*%d\r\n", nused);
    for (int k = 0; k < 5; k++) {
        if (!used[k])
            continue;
        put(&h, "*4\r\n");
        put_str(&h, "slots");
        put(&h, "*%d\r\n", 2 * used[k]);
        for (int i = 0; i < nr; i++)
            if (who[i] == k)
                put(&h, ":%d\r\n:%d\r\n", lo[i], hi[i]);
        put_str(&h, "nodes");
        bool failed_first = (k + size) % 2 == 0;
        put(&h, "*%d\r\n", failed_first ? 3 : 2);
        if (failed_first) { /* a primary that failed, then the one that took over */
            put(&h, "*8\r\n$2\r\nip\r\n$8\r\n10.0.2.2\r\n$4\r\nport\r\n:9000\r\n");
            put(&h, "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$4\r\nfail\r\n");
        }
        put(&h, "*8\r\n");
        put_str(&h, "ip");
        put_str(&h, ips[k]);
        put(&h, "$4\r\nport\r\n:%d\r\n$4\r\nrole\r\n$6\r\nmaster\r\n", 7000 + k);
        put(&h, "$6\r\nhealth\r\n$6\r\nonline\r\n");
        put(&h, "*8\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n$4\r\nport\r\n:%d\r\n", 8000 + k);
        put(&h, "$4\r\nrole\r\n$7\r\nreplica\r\n$6\r\nhealth\r\n$6\r\nonline\r\n");
    }
    struct redis_map *m = malloc(sizeof(*m));
    for (int pass = 0; pass < 2; pass++) {
        const struct buf *w = pass == 0 ? &b : &h;
        redisReply *r = read_reply((const uint8_t *)w->p, w->n);
        must(r != NULL, "a written map reads");
        must(pass == 0 ? redis_map_slots(r, VIA, m) : redis_map_shards(r, VIA, m), "map read");
        int idx[5]; /* node k's index in the map read, -1 if absent */
        for (int k = 0; k < 5; k++) {
            idx[k] = -1;
            for (int i = 0; i < m->n; i++)
                if (strcmp(m->addrs[i], addr[k]) == 0)
                    idx[k] = i;
        }
        for (int k = 0; k < REDIS_SLOTS; k++)
            must(m->owner[k] == (want[k] < 0 ? -1 : idx[want[k]]) &&
                     (want[k] < 0 || idx[want[k]] >= 0),
                 pass == 0 ? "CLUSTER SLOTS reads back" : "CLUSTER SHARDS reads back");
        freeReplyObject(r);
    }
    free(m);
    free(b.p);
    free(h.p);
}

/* The reference: the first line (split at '\n') that starts with key and
 * ':' gives the value, up to the line's end or its first '\r'. */
static bool ref_info_field(const char *info, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *line = info; line != NULL;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (len > kl && strncmp(line, key, kl) == 0 && line[kl] == ':') {
            size_t n = 0;
            while (kl + 1 + n < len && line[kl + 1 + n] != '\r')
                n++;
            if (n >= cap)
                n = cap - 1;
            memcpy(out, line + kl + 1, n);
            out[n] = '\0';
            return true;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return false;
}

/* data: the cap (1..64), a key length k (0: lockd's own keys), k key
 * bytes (letters and '_' as INFO's keys are; others are mapped), then the
 * INFO text. */
static void fuzz_info(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    size_t cap = 1 + data[0] % 64, kl = data[1] % 16;
    data += 2, size -= 2;
    if (kl > size)
        return;
    char key[16];
    for (size_t i = 0; i < kl; i++) {
        int c = data[i] % 27;
        key[i] = c == 26 ? '_' : (char)('a' + c);
    }
    key[kl] = '\0';
    char *info = malloc(size - kl + 1);
    memcpy(info, data + kl, size - kl);
    info[size - kl] = '\0';
    const char *keys[] = {kl > 0 ? key : "run_id", "redis_version"};
    for (int i = 0; i < 2; i++) {
        char got[64], want[64];
        bool g = redis_info_field(info, keys[i], got, cap),
             w = ref_info_field(info, keys[i], want, cap);
        must(g == w, "a field is found as the reference finds it");
        must(!g || strcmp(got, want) == 0, "a field's value is the reference's");
        must(g || got[0] == '\0', "a missing field reads empty");
    }
    char v[64];
    bool ok = redis_version_ok(info, v, cap);
    char want[64];
    if (ref_info_field(info, "redis_version", want, cap) && want[0] >= '0' && want[0] <= '9') {
        char *end;
        long major = strtol(want, &end, 10), minor = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
        must(ok == (major > REDIS_MIN_MAJOR ||
                    (major == REDIS_MIN_MAJOR && minor >= REDIS_MIN_MINOR)),
             "a version is judged by its major and minor");
    } else if (want[0] == '\0' || isalpha((unsigned char)want[0]) || want[0] == '.') {
        must(ok, "no version, or not a number: not judged"); /* (strtol reads signs and spaces) */
    }
    free(info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 6) {
    case 0: fuzz_map(data + 1, size - 1, 1); break;
    case 1: fuzz_map(data + 1, size - 1, 0); break;
    case 2: fuzz_redirect(data + 1, size - 1); break;
    case 3: fuzz_sentinel(data + 1, size - 1); break;
    case 4: fuzz_roundtrip(data + 1, size - 1); break;
    default: fuzz_info(data + 1, size - 1); break;
    }
    return 0;
}
