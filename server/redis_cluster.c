/*
 * redis_cluster.c - the `cluster` backend: a slot router in front of one
 * `redis` lock layer (backend_redis.c, redis_lock.h) per primary of a Redis
 * Cluster. A name goes to the primary that owns the slot of its key
 * (<prefix>{name}, redis_slot.c); the lock layer and its scripts are the
 * single-Redis ones, opened in cluster mode (groups of one slot, SPUBLISH,
 * SSUBSCRIBE). The slot map comes from CLUSTER SHARDS (CLUSTER SLOTS when
 * that is unknown), once at startup (blocking, like the single-Redis probe)
 * and then on a thread of its own: every RC_POLL_MS, and at once after a
 * redirection or trouble on a node. Requests never wait for it: MOVED is
 * followed to the node it names (its map entry is updated on the spot),
 * ASK with ASKING, TRYAGAIN/CLUSTERDOWN (and a slot no known node serves)
 * are retried after a pause, RC_TRIES at most, then 503. Every redirected
 * or retried command did not run (Redis refused it before the script), so
 * a retry never grants twice. Threads: operations on their loop; nodes(),
 * watch() and set_release_hook() any thread; the map is read lock-free.
 * DESIGN.md §3, docs/architecture.md.
 */
#include <hiredis/hiredis.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/hash.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/reassert.h"
#include "server/redis_lock.h"
#include "server/redis_map.h"
#include "server/redis_node.h"
#include "server/redis_slot.h"
#include "server/redis_url.h"
#include "server/util.h"

#define RC_MAX_SEEDS 16
#define RC_MAX_SHARDS REDIS_MAP_NODES /* primaries (and former ones) known, never forgotten */
#define RC_POLL_MS 1000               /* ask for the map this often even when nothing happened */
#define RC_ASK_GAP_MS 50              /* after a redirection or trouble, at most this often */
#define RC_TRIES 8                    /* redirections and retries of one operation before 503 */
#define RC_RETRY_MS 25                /* pause before the k-th retry: k * RC_RETRY_MS */
#define RC_ADDR REDIS_ADDR_LEN

struct rc_shard {
    char addr[RC_ADDR]; /* host:port, as the cluster names it */
    struct backend lb;  /* the redis lock layer on it */
    int nslots;         /* atomic: slots it owns in the map */
};

struct rc_watch {
    UT_hash_handle hh;
    int refs;
    int shard; /* whose subscriber watches it; -1: no primary known for its slot */
    char name[LK_NAME_MAX + 1];
};

struct rc {
    struct redis_url seeds[RC_MAX_SEEDS];
    size_t nseeds;
    /* what redis_lock_open_cluster reads: prefix, timeout, WAIT, the fence
     * counter's retention */
    struct lk_config lcfg;
    char *prefix;
    size_t prefix_len;
    int64_t timeout_ms;
    /* shards[0..nshards) are published with a release store of nshards and
     * never change after; only the discovery thread (or startup) adds. */
    struct rc_shard *shards[RC_MAX_SHARDS];
    int nshards;
    /* atomic: shard index, -1 = no primary known. Stored with release and
     * loaded with acquire: a loop that reads an index also sees the shard
     * published under it (rc->shards[i] and what it points at). */
    short owner[REDIS_SLOTS];
    /* The owner each slot had in the last map applied (map_apply's thread
     * only): a change there hands the leases of the slot to the new owner
     * (ra_adopt), even when a MOVED updated owner[] before. */
    short applied[REDIS_SLOTS];

    pthread_mutex_t mu; /* guards hook and watched (a leaf: watch() calls only post) */
    bk_release_fn hook;
    void *hook_arg;
    struct rc_watch *watched;

    int efd; /* eventfd: refresh now, or stop */
    int ask; /* atomic: a refresh is asked for */
    int stop;
    pthread_t th;
    bool running;
    redisContext *query;           /* discovery thread only: the node that answered last */
    char query_addr[RC_ADDR + 16]; /* for the log: its host, whole, and port */
    char query_host[RC_ADDR];      /* its host, as reached */
};

/* ---------------------------------------------------------------- the map */

static int nshards(const struct rc *rc)
{
    return __atomic_load_n(&rc->nshards, __ATOMIC_ACQUIRE);
}

static int owner_of(const struct rc *rc, int slot)
{
    return __atomic_load_n(&rc->owner[slot], __ATOMIC_ACQUIRE);
}

/* The slot of name's keys: <prefix>{name} (and its :fence, its channel). */
static int name_slot(const struct rc *rc, const char *name)
{
    size_t nl = strlen(name);
    char tmp[512];
    size_t len = rc->prefix_len + nl + 2;
    char *k = len <= sizeof(tmp) ? tmp : lk_malloc(len);
    memcpy(k, rc->prefix, rc->prefix_len);
    k[rc->prefix_len] = '{';
    memcpy(k + rc->prefix_len + 1, name, nl);
    k[len - 1] = '}';
    int slot = redis_key_slot(k, len);
    if (k != tmp)
        free(k);
    return slot;
}

static int shard_find(const struct rc *rc, const char *addr)
{
    int n = nshards(rc);
    for (int i = 0; i < n; i++)
        if (strcmp(rc->shards[i]->addr, addr) == 0)
            return i;
    return -1;
}

/* Index of shard i among the rows nodes() lists (shards that own slots). */
static int node_row(const struct rc *rc, int i)
{
    int row = 0;
    for (int j = 0; j < i; j++)
        row += __atomic_load_n(&rc->shards[j]->nslots, __ATOMIC_RELAXED) > 0;
    return row;
}

/* Wakes the discovery thread: once per burst. Any thread. */
static void refresh_soon(struct rc *rc)
{
    if (__atomic_exchange_n(&rc->ask, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    uint64_t one = 1;
    if (write(rc->efd, &one, sizeof(one)) < 0) {
        /* the counter is full: a wake-up is pending anyway */
    }
}

static void on_trouble(void *arg, const char *why)
{
    (void)why;
    refresh_soon(arg);
}

/* ---------------------------------------------------------------- discovery */

/* Every node takes the first seed's credentials (a cluster has one set). */
static redisContext *node_connect(const struct rc *rc, const char *host, int port)
{
    return rn_connect_blocking(&rc->seeds[0], host, port, rc->timeout_ms, NULL);
}

/* Asks c, reached at host via, for the map: 1 (m filled), 0 (it answered,
 * but is no cluster node: err says so), -1 (c failed; the caller frees it). */
static int map_ask(redisContext *c, const char *via, struct redis_map *m, char *err, size_t errlen)
{
    redis_map_clear(m);
    redisReply *r = redisCommand(c, "CLUSTER SHARDS");
    if (r == NULL)
        return -1;
    bool ok = r->type != REDIS_REPLY_ERROR && redis_map_shards(r, via, m);
    if (!ok && r->type == REDIS_REPLY_ERROR && strstr(r->str, "cluster support disabled")) {
        snprintf(err, errlen, "%s", r->str);
        freeReplyObject(r);
        return 0;
    }
    freeReplyObject(r);
    if (ok)
        return 1;
    r = redisCommand(c, "CLUSTER SLOTS"); /* before Redis 7 */
    if (r == NULL)
        return -1;
    ok = r->type != REDIS_REPLY_ERROR && redis_map_slots(r, via, m);
    if (!ok)
        snprintf(err, errlen, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "no slot map");
    freeReplyObject(r);
    return ok ? 1 : 0;
}

/* Asks the node that answered last, then the primaries known, then the
 * seeds. 1, 0 (only non-cluster answers), -1 (nobody answered). */
static int discover(struct rc *rc, struct redis_map *m, char *err, size_t errlen)
{
    int best = -1;
    if (rc->query != NULL) {
        int got = map_ask(rc->query, rc->query_host, m, err, errlen);
        if (got == 1)
            return 1;
        redisFree(rc->query);
        rc->query = NULL;
    }
    int n = nshards(rc);
    for (int i = 0; i < n + (int)rc->nseeds; i++) {
        char host[RC_ADDR];
        int port;
        if (i < n) {
            lk_strlcpy(host, rc->shards[i]->addr, sizeof(host));
            char *colon = strrchr(host, ':');
            if (colon == NULL)
                continue;
            *colon = '\0';
            port = atoi(colon + 1);
        } else {
            lk_strlcpy(host, rc->seeds[i - n].host, sizeof(host));
            port = rc->seeds[i - n].port;
        }
        redisContext *c = node_connect(rc, host, port);
        if (c == NULL)
            continue;
        int got = map_ask(c, host, m, err, errlen);
        if (got == 1) {
            rc->query = c;
            lk_strlcpy(rc->query_host, host, sizeof(rc->query_host));
            snprintf(rc->query_addr, sizeof(rc->query_addr), "%s:%d", host, port);
            return 1;
        }
        if (got == 0)
            best = 0;
        redisFree(c);
    }
    return best;
}

/* Opens the lock layer on a primary the map names (blocking probe: startup
 * or the discovery thread). -1 when it cannot (logged) or the table is full. */
static int shard_open(struct rc *rc, const char *addr, char *err, size_t errlen)
{
    int n = nshards(rc);
    if (n == RC_MAX_SHARDS) {
        snprintf(err, errlen, "more than %d cluster nodes", RC_MAX_SHARDS);
        return -1;
    }
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) > REDIS_HOST_MAX)
        return -1;
    struct redis_url u = rc->seeds[0];            /* its credentials */
    memcpy(u.host, addr, (size_t)(colon - addr)); /* the host whole: it fits (redis_map.h) */
    u.host[colon - addr] = '\0';
    u.port = atoi(colon + 1);
    u.db = 0;
    struct rc_shard *s = lk_calloc(1, sizeof(*s));
    lk_strlcpy(s->addr, addr, sizeof(s->addr));
    enum lk_code code = redis_lock_open_cluster(&u, &rc->lcfg, true, &s->lb, err, errlen);
    memset(&u, 0, sizeof(u));
    if (code != LK_OK) {
        free(s);
        return code == LK_BACKEND_DOWN ? -2 : -1;
    }
    rn_node_set_trouble(redis_lock_node(s->lb.state), on_trouble, rc);
    pthread_mutex_lock(&rc->mu);
    if (rc->hook != NULL)
        s->lb.ops->set_release_hook(s->lb.state, rc->hook, rc->hook_arg);
    rc->shards[n] = s;
    __atomic_store_n(&rc->nshards, n + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rc->mu);
    lk_log(LK_INFO, "cluster primary '%s' added", addr);
    return n;
}

/* Watches follow their slot's primary (a slot moved, or its first primary
 * became known): the new one's subscriber confirms, which wakes the name's
 * waiters (a release may have gone out meanwhile). */
static void rewatch(struct rc *rc)
{
    pthread_mutex_lock(&rc->mu);
    struct rc_watch *w, *tmp;
    HASH_ITER (hh, rc->watched, w, tmp) {
        int s = owner_of(rc, name_slot(rc, w->name));
        if (s == w->shard)
            continue;
        if (w->shard >= 0)
            rc->shards[w->shard]->lb.ops->watch(rc->shards[w->shard]->lb.state, w->name, false);
        if (s >= 0)
            rc->shards[s]->lb.ops->watch(rc->shards[s]->lb.state, w->name, true);
        w->shard = s;
    }
    pthread_mutex_unlock(&rc->mu);
}

/* Slots that moved from one primary to another in a new map: the leases
 * this lockd granted there go with them (ra_adopt), so that renewals,
 * releases and a later restart find them in the new primary's table; when
 * the former primary is down (a failover: its replica took over, and may
 * lack the last grants) the new one re-asserts them before it grants
 * anything, then keeps the grace. Before the slots are stored: nothing
 * reaches the new owner for them before it is held back. */
struct rc_move {
    struct rc *rc;
    int from, to;
    unsigned char *slots; /* REDIS_SLOTS flags */
};

static bool move_picks(void *arg, const char *name, size_t len)
{
    const struct rc_move *mv = arg;
    return mv->slots[redis_key_slot(name, len)] != 0; /* a name is its own tag */
}

/* Whether a's slots moved because a failed (a replica took over) rather
 * than by a resharding: it does not answer the discovery thread, or it
 * answers as a replica. A resharding leaves it a live primary (asked
 * directly: the loops' connections to it may be between two attempts
 * while MIGRATE keeps it busy). Discovery thread (blocking,
 * backend_timeout_ms at most); only when slots moved. */
static bool primary_gone(struct rc *rc, const struct rc_shard *a)
{
    char host[RC_ADDR];
    lk_strlcpy(host, a->addr, sizeof(host));
    char *colon = strrchr(host, ':');
    if (colon == NULL)
        return true;
    *colon = '\0';
    redisContext *c = node_connect(rc, host, atoi(colon + 1));
    if (c == NULL)
        return true;
    redisReply *r = redisCommand(c, "ROLE");
    bool gone = r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                !redis_reply_is(r->element[0], "master");
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return gone;
}

static void hand_over(struct rc *rc, const int *next)
{
    struct rc_move mv[8];
    int nmv = 0;
    for (int s = 0; s < REDIS_SLOTS; s++) {
        int from = rc->applied[s], to = next[s];
        if (from < 0 || to < 0 || from == to)
            continue;
        int k = 0;
        while (k < nmv && !(mv[k].from == from && mv[k].to == to))
            k++;
        if (k == nmv) {
            if (nmv == (int)(sizeof(mv) / sizeof(mv[0])))
                continue; /* more pairs in one map: the next map_apply moves them */
            mv[nmv] = (struct rc_move){rc, from, to, lk_calloc(REDIS_SLOTS, 1)};
            nmv++;
        }
        mv[k].slots[s] = 1;
        rc->applied[s] = (short)to;
    }
    for (int k = 0; k < nmv; k++) {
        struct rc_shard *a = rc->shards[mv[k].from], *b = rc->shards[mv[k].to];
        bool down = primary_gone(rc, a);
        ra_adopt(redis_lock_reassert(b->lb.state), redis_lock_reassert(a->lb.state), move_picks,
                 &mv[k], down);
        free(mv[k].slots);
    }
}

/* Makes m the map: opens primaries not known yet, then stores each slot's
 * owner. A primary that cannot be opened leaves its slots as they were. */
static enum lk_code map_apply(struct rc *rc, const struct redis_map *m, char *err, size_t errlen)
{
    int idx[RC_MAX_SHARDS];
    for (int i = 0; i < m->n; i++) {
        idx[i] = shard_find(rc, m->addrs[i]);
        if (idx[i] < 0) {
            idx[i] = shard_open(rc, m->addrs[i], err, errlen);
            if (idx[i] == -1 && !rc->running)
                return LK_INVALID; /* startup: bad credentials, a script refused */
        }
    }
    int counts[RC_MAX_SHARDS] = {0};
    bool changed = false;
    int *next = lk_malloc(REDIS_SLOTS * sizeof(*next));
    for (int s = 0; s < REDIS_SLOTS; s++) {
        int who = m->owner[s] >= 0 ? idx[m->owner[s]] : -1;
        if (who < 0 && m->owner[s] >= 0)
            who = owner_of(rc, s); /* its primary could not be opened: keep the old one */
        next[s] = who;
        if (rc->applied[s] < 0)
            rc->applied[s] = (short)who; /* its first owner: nothing to hand over */
    }
    hand_over(rc, next);
    for (int s = 0; s < REDIS_SLOTS; s++) {
        int who = next[s];
        if (who >= 0)
            counts[who]++;
        if (owner_of(rc, s) != who) {
            __atomic_store_n(&rc->owner[s], (short)who, __ATOMIC_RELEASE);
            changed = true;
        }
    }
    int n = nshards(rc);
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&rc->shards[i]->nslots, counts[i], __ATOMIC_RELAXED);
        int low = -1;
        for (int s = 0; s < REDIS_SLOTS && low < 0 && counts[i] > 0; s++)
            if (next[s] == i)
                low = s;
        /* its restart marker lives there: every lockd with this map agrees */
        ra_set_probe_slot(redis_lock_reassert(rc->shards[i]->lb.state), low);
    }
    free(next);
    if (changed)
        rewatch(rc);
    return LK_OK;
}

static void *rc_main(void *arg)
{
    struct rc *rc = arg;
    int64_t last = lk_now_ms();
    struct redis_map *m = lk_malloc(sizeof(*m));
    while (!__atomic_load_n(&rc->stop, __ATOMIC_ACQUIRE)) {
        int64_t now = lk_now_ms();
        bool asked = __atomic_load_n(&rc->ask, __ATOMIC_ACQUIRE) != 0;
        if ((asked && now - last >= RC_ASK_GAP_MS) || now - last >= RC_POLL_MS) {
            __atomic_store_n(&rc->ask, 0, __ATOMIC_RELEASE);
            char err[256] = "";
            if (discover(rc, m, err, sizeof(err)) == 1)
                (void)map_apply(rc, m, err, sizeof(err));
            last = lk_now_ms();
            now = last;
        }
        int64_t wait = (__atomic_load_n(&rc->ask, __ATOMIC_ACQUIRE) ? RC_ASK_GAP_MS : RC_POLL_MS) -
                       (now - last);
        if (wait < 1)
            wait = 1;
        struct pollfd p = {.fd = rc->efd, .events = POLLIN};
        if (poll(&p, 1, (int)wait) < 0 && errno != EINTR)
            break;
        if (p.revents & POLLIN) {
            uint64_t v;
            if (read(rc->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                break;
        }
    }
    free(m);
    if (rc->query != NULL)
        redisFree(rc->query);
    rc->query = NULL;
    return NULL;
}

/* ---------------------------------------------------------------- routed calls */

struct rc_call;
typedef void (*rc_finish_fn)(struct rc_call *k, const struct bk_res *r);

/* One operation on the primary of one slot, followed through redirections.
 * Lives on its loop; freed once finished and out of its submit. */
struct rc_call {
    struct rc *rc;
    struct lk_loop *lp;
    struct bk_req req; /* the caller's strings */
    int slot;          /* -1: req names the shard itself (list) */
    int shard;         /* list: the shard; else the one it last went to */
    int ask_shard;     /* >= 0: the next try goes there behind ASKING */
    int tries;
    bool submitting; /* inside rc_submit: finishing now answers synchronously */
    bool finished;
    bool timing;
    ev_timer retry;
    rc_finish_fn finish;
    bk_done_fn done;
    void *arg;
    /* renew-many: this part's items, and where they are in the caller's */
    struct rc_many *many;
    size_t *idx;
    /* list */
    size_t list_k; /* the walk's position: the k-th primary by lowest slot */
    char cursor[600];
};

static void call_send(struct rc_call *k);

static void call_free(struct rc_call *k)
{
    if (k->many != NULL) {
        free(k->req.items);
        free(k->idx);
    }
    free(k);
}

static void call_end(struct rc_call *k, const struct bk_res *r)
{
    k->finish(k, r);
    k->finished = true;
    if (!k->submitting)
        call_free(k);
}

static void on_retry(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    struct rc_call *k = t->data;
    k->timing = false;
    call_send(k);
}

/* Another try after a pause, or 503 when the tries are spent. */
static void call_later(struct rc_call *k)
{
    refresh_soon(k->rc);
    if (++k->tries > RC_TRIES) {
        struct bk_res r;
        bk_res_init(&r, LK_BACKEND_DOWN);
        if (k->req.op == BK_RENEW_MANY) {
            r.code = LK_OK;
            for (size_t i = 0; i < k->req.nitems; i++)
                k->req.items[i].result = LK_BACKEND_DOWN;
            r.items = k->req.items;
            r.nitems = k->req.nitems;
        }
        call_end(k, &r);
        return;
    }
    ev_timer_init(&k->retry, on_retry, (double)(k->tries * RC_RETRY_MS) / 1000.0, 0.);
    k->retry.data = k;
    k->timing = true;
    ev_timer_start(loop_ev(k->lp), &k->retry);
}

/* The shard a MOVED or ASK refusal names (-1 when unknown: the discovery
 * thread opens it), the slot in *slot. */
static int redirect_target(struct rc *rc, const char *refusal, int *slot)
{
    const char *addr;
    return redis_redirect_parse(refusal, slot, &addr) ? shard_find(rc, addr) : -1;
}

static void call_done(void *arg, const struct bk_res *r)
{
    struct rc_call *k = arg;
    struct rc *rc = k->rc;
    const char *why = r->refusal;
    bool down = r->code == LK_BACKEND_DOWN || (k->req.op == BK_RENEW_MANY && why != NULL);
    if (down && why != NULL) {
        int slot = -1;
        if (strncmp(why, "MOVED ", 6) == 0) {
            /* the slot is elsewhere now: there at once, and a new map soon */
            metrics_add(M_CLUSTER_MOVED, 1);
            refresh_soon(rc);
            int to = redirect_target(rc, why, &slot);
            if (to >= 0 && k->slot == slot && ++k->tries <= RC_TRIES) {
                __atomic_store_n(&rc->owner[slot], (short)to, __ATOMIC_RELEASE);
                call_send(k);
            } else if (k->slot >= 0) {
                call_later(k);
            } else {
                call_end(k, r);
            }
            return;
        }
        if (strncmp(why, "ASK ", 4) == 0) {
            /* the slot is migrating and this key already went: ask the
             * importing node, this once, behind ASKING */
            metrics_add(M_CLUSTER_ASK, 1);
            int to = redirect_target(rc, why, &slot);
            if (to >= 0 && ++k->tries <= RC_TRIES) {
                k->ask_shard = to;
                call_send(k);
            } else {
                call_later(k);
            }
            return;
        }
        if (strncmp(why, "TRYAGAIN", 8) == 0 || strncmp(why, "CLUSTERDOWN", 11) == 0) {
            call_later(k); /* a migration's multi-key moment, or the cluster settling */
            return;
        }
    }
    if (r->code == LK_BACKEND_DOWN)
        refresh_soon(rc); /* a node went: maybe a failover */
    if (r->nnodes == 0 && k->shard >= 0) {
        struct bk_node_result nr = {.node = node_row(rc, k->shard), .code = r->code};
        struct bk_res out = *r;
        out.nodes = &nr;
        out.nnodes = 1;
        call_end(k, &out);
        return;
    }
    call_end(k, r);
}

static void call_send(struct rc_call *k)
{
    struct rc *rc = k->rc;
    int ask = k->ask_shard;
    k->ask_shard = -1;
    int s = ask >= 0 ? ask : k->slot >= 0 ? owner_of(rc, k->slot) : k->shard;
    if (s < 0) { /* no primary known for the slot (yet) */
        call_later(k);
        return;
    }
    k->shard = s;
    struct backend *lb = &rc->shards[s]->lb;
    if (lb->ops->attach(lb->state, k->lp) != LK_OK) { /* at once if already */
        struct bk_res r;
        bk_res_init(&r, LK_BACKEND_DOWN);
        call_end(k, &r);
        return;
    }
    if (ask >= 0)
        (void)redis_lock_submit_asking(lb->state, k->lp, &k->req, call_done, k);
    else
        (void)lb->ops->submit(lb->state, k->lp, &k->req, call_done, k);
}

static struct rc_call *call_new(struct rc *rc, struct lk_loop *lp, const struct bk_req *req,
                                rc_finish_fn finish, bk_done_fn done, void *arg)
{
    struct rc_call *k = lk_calloc(1, sizeof(*k));
    k->rc = rc;
    k->lp = lp;
    k->req = *req;
    k->slot = -1;
    k->shard = -1;
    k->ask_shard = -1;
    k->finish = finish;
    k->done = done;
    k->arg = arg;
    return k;
}

/* Sends k; LK_OK when it finished meanwhile (and is freed), else LK_AGAIN. */
static enum lk_code call_start(struct rc_call *k)
{
    k->submitting = true;
    call_send(k);
    k->submitting = false;
    if (!k->finished)
        return LK_AGAIN;
    call_free(k);
    return LK_OK;
}

static void finish_plain(struct rc_call *k, const struct bk_res *r)
{
    k->done(k->arg, r);
}

/* ---------------------------------------------------------------- renew-many */

/* The watchdog's renewals: one renew_many.lua call per slot (a script
 * touches one slot's keys), answered together. */
struct rc_many {
    struct bk_renew_item *items;
    size_t n;
    int parts_left;
    bk_done_fn done;
    void *arg;
};

static void many_part_done(struct rc_many *m)
{
    if (--m->parts_left > 0)
        return;
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    r.items = m->items;
    r.nitems = m->n;
    m->done(m->arg, &r);
    free(m);
}

static void finish_many(struct rc_call *k, const struct bk_res *r)
{
    (void)r; /* each item says how it went */
    for (size_t i = 0; i < k->req.nitems; i++)
        k->many->items[k->idx[i]].result = k->req.items[i].result;
    many_part_done(k->many);
}

static int slot_cmp(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static enum lk_code rc_renew_many(struct rc *rc, struct lk_loop *lp, const struct bk_req *req,
                                  bk_done_fn done, void *arg)
{
    size_t n = req->nitems;
    struct rc_many *m = lk_calloc(1, sizeof(*m));
    m->items = req->items;
    m->n = n;
    m->done = done;
    m->arg = arg;
    m->parts_left = 1;                                        /* ours, while parts are submitted */
    int *order = lk_malloc(2 * (n ? n : 1) * sizeof(*order)); /* (slot, index) pairs */
    for (size_t i = 0; i < n; i++) {
        order[2 * i] = name_slot(rc, req->items[i].name);
        order[2 * i + 1] = (int)i;
    }
    qsort(order, n, 2 * sizeof(*order), slot_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && order[2 * j] == order[2 * i])
            j++;
        struct bk_req part = {.op = BK_RENEW_MANY, .nitems = j - i};
        part.items = lk_calloc(j - i, sizeof(*part.items));
        struct rc_call *k = call_new(rc, lp, &part, finish_many, NULL, NULL);
        k->many = m;
        k->idx = lk_malloc((j - i) * sizeof(*k->idx));
        k->slot = order[2 * i];
        for (size_t x = i; x < j; x++) {
            size_t at = (size_t)order[2 * x + 1];
            k->idx[x - i] = at;
            part.items[x - i] = req->items[at];
            part.items[x - i].result = LK_BACKEND_DOWN;
        }
        m->parts_left++;
        (void)call_start(k);
        i = j;
    }
    free(order);
    bool at_once = m->parts_left == 1;
    many_part_done(m);
    return at_once ? LK_OK : LK_AGAIN;
}

/* ---------------------------------------------------------------- list */

/* The primaries in the order of the lowest slot each owns: what a listing
 * cursor's first number counts. n <= RC_MAX_SHARDS. */
static size_t walk_order(const struct rc *rc, int *out)
{
    size_t n = 0;
    bool seen[RC_MAX_SHARDS] = {false};
    for (int s = 0; s < REDIS_SLOTS; s++) {
        int who = owner_of(rc, s);
        if (who >= 0 && !seen[who]) {
            seen[who] = true;
            out[n++] = who;
        }
    }
    return n;
}

static void finish_list(struct rc_call *k, const struct bk_res *r)
{
    if (r->code != LK_OK) {
        k->done(k->arg, r);
        return;
    }
    int order[RC_MAX_SHARDS];
    size_t n = walk_order(k->rc, order);
    struct bk_res out = *r;
    char next[700];
    /* '<k>.<the primary's own cursor>': where the walk is */
    if (r->next_cursor != NULL) {
        snprintf(next, sizeof(next), "%zu.%s", k->list_k, r->next_cursor);
        out.next_cursor = next;
    } else if (k->list_k + 1 < n) {
        snprintf(next, sizeof(next), "%zu.", k->list_k + 1);
        out.next_cursor = next;
    }
    k->done(k->arg, &out);
}

static enum lk_code rc_list(struct rc *rc, struct lk_loop *lp, const struct bk_req *req,
                            bk_done_fn done, void *arg)
{
    const char *cur = req->cursor ? req->cursor : "";
    size_t kth = 0;
    const char *inner = "";
    int order[RC_MAX_SHARDS];
    size_t n = walk_order(rc, order);
    /* no map yet (n 0): "0." passes, and is 503 below */
    if (cur[0] != '\0' && (!backend_cursor_split(cur, n > 0 ? n : 1, &kth, &inner) ||
                           strlen(inner) >= 600 /* k->cursor */)) {
        struct bk_res r;
        bk_res_init(&r, LK_BAD_CURSOR);
        done(arg, &r);
        return LK_OK;
    }
    struct rc_call *k = call_new(rc, lp, req, finish_list, done, arg);
    k->list_k = kth;
    lk_strlcpy(k->cursor, inner, sizeof(k->cursor));
    k->req.cursor = k->cursor;
    k->shard = n > 0 ? order[kth] : -1;
    if (n == 0)
        k->tries = RC_TRIES; /* no map: 503 at once */
    return call_start(k);
}

/* ---------------------------------------------------------------- ping */

/* /readyz: every slot has a primary, and every primary takes writes. */
struct rc_ping {
    int left;
    bool ok;
    bool submitting;
    bk_done_fn done;
    void *arg;
};

static void ping_end(struct rc_ping *p)
{
    struct bk_res r;
    bk_res_init(&r, p->ok ? LK_OK : LK_BACKEND_DOWN);
    p->done(p->arg, &r);
    free(p);
}

static void ping_part(void *arg, const struct bk_res *r)
{
    struct rc_ping *p = arg;
    if (r->code != LK_OK)
        p->ok = false;
    if (--p->left == 0 && !p->submitting)
        ping_end(p);
}

static enum lk_code rc_ping(struct rc *rc, struct lk_loop *lp, bk_done_fn done, void *arg)
{
    int order[RC_MAX_SHARDS];
    size_t n = walk_order(rc, order);
    bool covered = n > 0;
    for (int s = 0; s < REDIS_SLOTS && covered; s++)
        covered = owner_of(rc, s) >= 0;
    struct rc_ping *p = lk_calloc(1, sizeof(*p));
    p->ok = covered;
    p->done = done;
    p->arg = arg;
    p->left = 1;
    p->submitting = true;
    struct bk_req req = {.op = BK_PING};
    for (size_t i = 0; i < n && covered; i++) {
        struct backend *lb = &rc->shards[order[i]]->lb;
        p->left++;
        if (lb->ops->attach(lb->state, lp) != LK_OK) {
            p->ok = false;
            p->left--;
            continue;
        }
        (void)lb->ops->submit(lb->state, lp, &req, ping_part, p);
    }
    p->submitting = false;
    if (--p->left == 0) {
        ping_end(p);
        return LK_OK;
    }
    return LK_AGAIN;
}

/* ---------------------------------------------------------------- ops */

static enum lk_code rc_submit(void *state, struct lk_loop *lp, const struct bk_req *req,
                              bk_done_fn done, void *arg)
{
    struct rc *rc = state;
    struct bk_res r;
    switch (req->op) {
    case BK_PING: return rc_ping(rc, lp, done, arg);
    case BK_LIST: return rc_list(rc, lp, req, done, arg);
    case BK_RENEW_MANY:
        if (req->nitems == 0) {
            bk_res_init(&r, LK_OK);
            r.items = req->items;
            done(arg, &r);
            return LK_OK;
        }
        return rc_renew_many(rc, lp, req, done, arg);
    case BK_ACQUIRE:
    case BK_RENEW:
    case BK_RELEASE:
    case BK_FORCE_RELEASE:
    case BK_INSPECT: {
        struct rc_call *k = call_new(rc, lp, req, finish_plain, done, arg);
        k->slot = name_slot(rc, req->name);
        return call_start(k);
    }
    case BK_ACQUIRE_MULTI: {
        /* one script call when every name is in one slot; else the engine
         * takes them one by one (LK_UNSUPPORTED) */
        int slot = req->nnames > 0 ? name_slot(rc, req->names[0]) : -1;
        for (size_t i = 1; slot >= 0 && i < req->nnames; i++)
            if (name_slot(rc, req->names[i]) != slot)
                slot = -1;
        if (slot < 0)
            break;
        struct rc_call *k = call_new(rc, lp, req, finish_plain, done, arg);
        k->slot = slot;
        return call_start(k);
    }
    case BK_OP_COUNT: break;
    }
    bk_res_init(&r, LK_UNSUPPORTED);
    done(arg, &r);
    return LK_OK;
}

static enum lk_code rc_attach(void *state, struct lk_loop *lp)
{
    struct rc *rc = state;
    int n = nshards(rc);
    for (int i = 0; i < n; i++) {
        enum lk_code code = rc->shards[i]->lb.ops->attach(rc->shards[i]->lb.state, lp);
        if (code != LK_OK)
            return code;
    }
    return LK_OK; /* primaries found later attach on first use (call_send) */
}

static void rc_detach(void *state, struct lk_loop *lp)
{
    struct rc *rc = state;
    int n = nshards(rc);
    for (int i = 0; i < n; i++)
        rc->shards[i]->lb.ops->detach(rc->shards[i]->lb.state, lp);
}

/* One row per primary that owns slots (lockd_backend_up{node}), and a row
 * "slots" while some slot has no primary known. */
static size_t rc_nodes(void *state, struct bk_node *out, size_t max)
{
    struct rc *rc = state;
    size_t k = 0;
    int n = nshards(rc);
    for (int i = 0; i < n && k < max; i++) {
        if (__atomic_load_n(&rc->shards[i]->nslots, __ATOMIC_RELAXED) <= 0)
            continue;
        struct backend *lb = &rc->shards[i]->lb;
        k += lb->ops->nodes(lb->state, out + k, max - k);
    }
    int uncovered = 0;
    for (int s = 0; s < REDIS_SLOTS; s++)
        uncovered += owner_of(rc, s) < 0;
    if (uncovered > 0 && k < max) {
        memset(&out[k], 0, sizeof(out[k]));
        snprintf(out[k].addr, sizeof(out[k].addr), "slots");
        snprintf(out[k].reason, sizeof(out[k].reason), "%d slots have no primary known", uncovered);
        k++;
    }
    return k;
}

static void rc_set_release_hook(void *state, bk_release_fn fn, void *arg)
{
    struct rc *rc = state;
    pthread_mutex_lock(&rc->mu);
    rc->hook = fn;
    rc->hook_arg = arg;
    int n = nshards(rc);
    for (int i = 0; i < n; i++)
        rc->shards[i]->lb.ops->set_release_hook(rc->shards[i]->lb.state, fn, arg);
    pthread_mutex_unlock(&rc->mu);
}

/* A name is watched on the subscriber of its slot's primary (SSUBSCRIBE
 * there); rewatch() moves it when the slot moves. */
static void rc_watch(void *state, const char *name, bool on)
{
    struct rc *rc = state;
    if (strlen(name) > LK_NAME_MAX)
        return;
    pthread_mutex_lock(&rc->mu);
    struct rc_watch *w = NULL;
    HASH_FIND_STR(rc->watched, name, w);
    if (on) {
        if (w == NULL) {
            w = lk_calloc(1, sizeof(*w));
            lk_strlcpy(w->name, name, sizeof(w->name));
            w->shard = -1;
            HASH_ADD_STR(rc->watched, name, w);
        }
        if (w->refs++ == 0) {
            w->shard = owner_of(rc, name_slot(rc, name));
            if (w->shard >= 0)
                rc->shards[w->shard]->lb.ops->watch(rc->shards[w->shard]->lb.state, name, true);
        }
    } else if (w != NULL && --w->refs <= 0) {
        if (w->shard >= 0)
            rc->shards[w->shard]->lb.ops->watch(rc->shards[w->shard]->lb.state, name, false);
        HASH_DEL(rc->watched, w);
        free(w);
    }
    pthread_mutex_unlock(&rc->mu);
}

/* The discovery thread first (it adds shards and moves watches), then the
 * lock layers, then us. */
static void rc_free(void *state)
{
    struct rc *rc = state;
    if (rc == NULL)
        return;
    if (rc->running) {
        __atomic_store_n(&rc->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (write(rc->efd, &one, sizeof(one)) < 0) {
            /* full: the thread wakes anyway */
        }
        pthread_join(rc->th, NULL);
    }
    if (rc->query != NULL)
        redisFree(rc->query);
    int n = nshards(rc);
    for (int i = 0; i < n; i++) {
        rc->shards[i]->lb.ops->free(rc->shards[i]->lb.state);
        free(rc->shards[i]);
    }
    struct rc_watch *w, *tmp;
    HASH_ITER (hh, rc->watched, w, tmp) {
        HASH_DEL(rc->watched, w);
        free(w);
    }
    if (rc->efd >= 0)
        close(rc->efd);
    pthread_mutex_destroy(&rc->mu);
    memset(rc->seeds, 0, sizeof(rc->seeds)); /* passwords */
    free(rc->prefix);
    free(rc);
}

static const struct backend_ops rc_ops = {
    .name = "cluster",
    .caps = BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE | BK_CAP_INDEX |
            BK_CAP_MULTI | BK_CAP_GROUP |
            BK_CAP_HANDOFF, /* the lock layer's; names of many slots: LK_UNSUPPORTED */
    .attach = rc_attach,
    .detach = rc_detach,
    .submit = rc_submit,
    .nodes = rc_nodes,
    .set_release_hook = rc_set_release_hook,
    .watch = rc_watch,
    .free = rc_free,
};

/* ---------------------------------------------------------------- open */

static enum lk_code parse_seeds(struct rc *rc, const char *urls, char *err, size_t errlen)
{
    enum lk_code code = redis_url_parse_list(urls, rc->seeds, RC_MAX_SEEDS, &rc->nseeds,
                                             "backend cluster", err, errlen);
    if (code != LK_OK)
        return code;
    if (rc->nseeds == 0) {
        snprintf(err, errlen, "backend 'cluster' needs one or more seed nodes in 'redis'");
        return LK_INVALID;
    }
    for (size_t i = 0; i < rc->nseeds; i++) {
        if (rc->seeds[i].db != 0) {
            snprintf(err, errlen, "invalid value for 'redis': a Redis Cluster has database 0 only");
            return LK_INVALID;
        }
    }
    return LK_OK;
}

enum lk_code backend_cluster_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    struct rc *rc = lk_calloc(1, sizeof(*rc));
    enum lk_code code = parse_seeds(rc, cfg->redis ? cfg->redis : "", err, errlen);
    memset(rc->seeds, 0, sizeof(rc->seeds)); /* passwords */
    free(rc);
    return code;
}

enum lk_code backend_cluster_new(const struct lk_config *cfg, struct backend *out, char *err,
                                 size_t errlen)
{
    struct rc *rc = lk_calloc(1, sizeof(*rc));
    rc->efd = -1;
    pthread_mutex_init(&rc->mu, NULL);
    memset(rc->owner, 0xff, sizeof(rc->owner)); /* -1: nobody */
    memset(rc->applied, 0xff, sizeof(rc->applied));
    struct redis_map *m = NULL;
    enum lk_code code = parse_seeds(rc, cfg->redis ? cfg->redis : "", err, errlen);
    if (code != LK_OK)
        goto fail;
    rc->prefix = lk_strdup(cfg->key_prefix ? cfg->key_prefix : "");
    rc->prefix_len = strlen(rc->prefix);
    rc->lcfg.key_prefix = rc->prefix;
    rc->lcfg.backend_timeout_ms = cfg->backend_timeout_ms;
    rc->lcfg.redis_wait_replicas = cfg->redis_wait_replicas;
    rc->lcfg.fence_retention_ms = cfg->fence_retention_ms;
    rc->lcfg.max_locks = cfg->max_locks;
    rc->lcfg.restart_grace_ms = cfg->restart_grace_ms;
    rc->timeout_ms = cfg->backend_timeout_ms > 0 ? cfg->backend_timeout_ms : 2000;
    /* Once, at startup, like the single-Redis probe: nothing serves yet. A
     * cluster nobody answers for is not an error: its names are 503 until
     * the discovery thread gets a map. */
    m = lk_malloc(sizeof(*m));
    char why[256] = "";
    int got = discover(rc, m, why, sizeof(why));
    if (got == 0) {
        snprintf(err, errlen, "the seed nodes in 'redis' are not a Redis Cluster: %s", why);
        code = LK_INVALID;
        goto fail;
    }
    if (got == 1) {
        code = map_apply(rc, m, err, errlen);
        if (code != LK_OK)
            goto fail;
        lk_log(LK_INFO, "cluster map from '%s': %d primaries", rc->query_addr, nshards(rc));
    } else {
        lk_log(LK_WARN, "cannot get the cluster map: no seed node answered; retrying");
    }
    rc->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rc->efd < 0 || pthread_create(&rc->th, NULL, rc_main, rc) != 0) {
        snprintf(err, errlen, "cannot start the cluster discovery thread");
        code = LK_INTERNAL;
        goto fail;
    }
    rc->running = true;
    free(m);
    out->ops = &rc_ops;
    out->state = rc;
    return LK_OK;
fail:
    free(m);
    rc_free(rc);
    return code;
}
