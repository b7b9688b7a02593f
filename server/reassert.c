/*
 * reassert.c - re-asserting a lock layer's leases on a Redis that is a new
 * process (reassert.h). The node layer calls on_restart (under its mutex,
 * on the loop that read INFO) before any command reaches the new process;
 * from then every lock operation but reads is held back (ra_gate at submit,
 * backend_redis.c's may_send for what was already queued), and the next
 * lock-layer connection to be ready sends reassert.lua over a snapshot of
 * the grants table, RA_BATCH leases per call, before anything else it has
 * queued. When every batch answered: operations resume; grants stay
 * refused for restart_grace_ms (or what is left of another lockd's grace,
 * the grace key) when data was lost. A batch lost with its connection
 * starts the whole run again on the next connection that is ready.
 * On a Redis Cluster primary every batch holds the names of one slot, with
 * marker and grace keys of that slot (redis_slot_tag), and a failover to
 * a replica reaches it through ra_adopt (the router's map), not the hello.
 */
#include "server/reassert.h"

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/grant_log.h"
#include "server/log.h"
#include "server/redis_args.h"
#include "server/redis_node.h"
#include "server/redis_slot.h"

#define RA_BATCH 200        /* leases per reassert.lua call, as the watchdog's batches */
#define RA_BUSY_RETRY_MS 50 /* what a waiter is told while re-asserting */

struct reassert {
    struct rn_node *node;
    struct glog *log;
    const struct rn_script *script;
    char *prefix;
    size_t prefix_len;
    char *marker, *grace_key;
    int64_t grace_ms, keep_ms;
    bool force_on_move;       /* no redis_wait_replicas: a promoted replica may lack any grant */
    bool cluster;             /* a cluster primary: batches per slot, keys of that slot */
    atomic_int probe_slot;    /* cluster: the slot whose marker stands for the node's; -1 */
    atomic_bool busy;         /* re-asserting: lock operations held back */
    atomic_llong grace_until; /* monotonic ms; 0 = no grace */
    pthread_mutex_t mu;       /* a leaf: what follows */
    bool pending;             /* a ready connection should start a run */
    bool moved;               /* the new process is at another address */
    bool startup;             /* the first run: only learn another lockd's grace */
    unsigned gen;             /* restarts seen; a run of an older one is void */
};

struct ra_run {
    struct reassert *ra;
    unsigned gen;
    char mode; /* reassert.lua's: '0' check, '1' lost for sure, '2' startup */
    struct gl_item *items;
    size_t n;
    int parts_left;
    bool failed;  /* a batch got no answer: run again */
    bool errored; /* Redis refused a batch: treated as lost */
    bool lost;
    int64_t pttl;
    size_t back, held, other;
    int64_t start_ms;
};

struct ra_cmd {
    struct rn_cmd nc; /* first: the node layer's callbacks cast back */
    struct ra_run *run;
    size_t first, count;
    bool answered;
};

static void run_finish(struct ra_run *run)
{
    struct reassert *ra = run->ra;
    int64_t now = lk_now_ms();
    pthread_mutex_lock(&ra->mu);
    bool current = run->gen == ra->gen;
    bool again = current && run->failed;
    if (again) {
        ra->pending = true; /* the next connection that is ready runs it again */
        ra->startup = run->mode == '2';
    }
    int64_t until = 0;
    if (current && !run->failed) {
        bool lost = run->mode != '2' && (run->lost || run->errored);
        int64_t g = lost ? (ra->grace_ms > run->pttl ? ra->grace_ms : run->pttl) : run->pttl;
        until = g > 0 ? now + g : 0;
        atomic_store(&ra->grace_until, until);
        atomic_store(&ra->busy, false);
    }
    pthread_mutex_unlock(&ra->mu);
    const char *addr = rn_node_addr(ra->node);
    if (again)
        lk_log(LK_WARN,
               "cannot re-assert leases on redis '%s': a batch got no answer; again on "
               "reconnect",
               addr);
    else if (current && run->mode != '2')
        lk_log(run->other > 0 ? LK_ERROR : LK_WARN,
               "re-asserted leases on redis '%s' in %lld ms: %zu put back, %zu still held, %zu "
               "held by another holder (lost)%s; %s",
               addr, (long long)(now - run->start_ms), run->back, run->held, run->other,
               run->errored ? ", some batches refused" : "",
               until > 0 ? "no new grants there during the grace" : "no data lost, no grace");
    else if (current && until > 0)
        lk_log(LK_WARN, "redis '%s' is in another lockd's restart grace: no new grants for %lld ms",
               addr, (long long)(until - now));
    glog_items_free(run->items, run->n);
    free(run);
}

static void run_part(struct ra_run *run, struct ra_cmd *cmd, const redisReply *r)
{
    if (r == NULL) {
        run->failed = true;
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 + cmd->count) {
        run->errored = true;
        lk_log(LK_ERROR, "redis '%s' refused a re-assertion batch: %s", rn_node_addr(run->ra->node),
               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    } else {
        if (r->element[0]->integer == 1)
            run->lost = true;
        if (r->element[1]->integer > run->pttl)
            run->pttl = r->element[1]->integer;
        for (size_t i = 0; i < cmd->count; i++) {
            struct gl_item *it = &run->items[cmd->first + i];
            long long st = r->element[2 + i]->integer;
            if (st == 1) {
                run->back++;
            } else if (st == 0) {
                run->held++;
            } else {
                /* Another holder has it: never overwritten. Forgotten here;
                 * its next renewal (a client's, or the watchdog's for a
                 * session) gets held_by_other and the session reports it lost. */
                run->other++;
                glog_drop(run->ra->log, it->lease, it->name);
                lk_log(LK_WARN,
                       "lease of '%s' (token %lld) is held by another holder after the "
                       "restart of redis '%s': lost",
                       it->name, (long long)it->token, rn_node_addr(run->ra->node));
            }
        }
    }
    if (--run->parts_left == 0)
        run_finish(run);
}

static void ra_cmd_answer(struct ra_cmd *cmd, const redisReply *r)
{
    if (cmd->answered)
        return;
    cmd->answered = true;
    rn_cmd_disarm(&cmd->nc);
    run_part(cmd->run, cmd, r);
}

static void ra_on_reply(struct rn_cmd *nc, redisReply *r)
{
    ra_cmd_answer((struct ra_cmd *)nc, r);
}

static void ra_on_expire(struct rn_cmd *nc)
{
    ra_cmd_answer((struct ra_cmd *)nc, NULL);
}

static void ra_on_settle(struct rn_cmd *nc)
{
    struct ra_cmd *cmd = (struct ra_cmd *)nc;
    ra_cmd_answer(cmd, NULL);
    rn_cmd_fini(nc);
    free(cmd);
}

static const struct rn_cmd_type ra_type = {
    .reply = ra_on_reply,
    .expire = ra_on_expire,
    .settle = ra_on_settle,
};

/* One reassert.lua call for items [first, first + count) with mode; tag:
 * NULL for the node's own marker and grace keys, else those of the slot of
 * "{tag}" (a cluster primary). */
static void send_part(struct ra_run *run, struct rn_conn *c, size_t first, size_t count, char mode,
                      const char *tag)
{
    struct reassert *ra = run->ra;
    struct ra_cmd *cmd = lk_calloc(1, sizeof(*cmd));
    rn_cmd_init(&cmd->nc, &ra_type, c, ra->script);
    cmd->run = run;
    cmd->first = first;
    cmd->count = count;
    struct rargs b = {0};
    rargs_int(&b, (long long)(2 + count));
    if (tag != NULL) {
        /* one slot: a cluster script touches keys of one slot only */
        rargs_tagged(&b, ra->prefix, ra->prefix_len, "lockd:node", tag, "");
        rargs_tagged(&b, ra->prefix, ra->prefix_len, "lockd:grace", tag, "");
    } else {
        rargs_str(&b, ra->marker);
        rargs_str(&b, ra->grace_key);
    }
    for (size_t i = 0; i < count; i++)
        rargs_tagged(&b, ra->prefix, ra->prefix_len, "", run->items[first + i].name, "");
    rargs_int(&b, (long long)ra->grace_ms);
    rargs_put(&b, &mode, 1);
    rargs_int(&b, (long long)ra->keep_ms);
    for (size_t i = 0; i < count; i++) {
        const struct gl_item *it = &run->items[first + i];
        char num[24];
        rargs_str(&b, it->lease);
        rargs_int(&b, (long long)it->token);
        rargs_put(&b, it->sb ? "1 " : "0 ", 2);
        size_t nl = lk_itoa(it->ttl_ms, num);
        rargs_append(&b, num, nl);
        rargs_append(&b, " ", 1);
        const char *owner = lk_pair_second(it->name);
        rargs_append(&b, owner, strlen(owner));
        rargs_int(&b, (long long)it->left_ms);
        if (it->shared) {
            rargs_put(&b, it->reader ? "1 " : "0 ", 2); /* '<mode> <limit>' */
            nl = lk_itoa(it->limit, num);
            rargs_append(&b, num, nl);
        } else {
            rargs_put(&b, "x", 1);
        }
    }
    rn_cmd_take_args(&cmd->nc, &b);
    if (rn_send(&cmd->nc) != 0)
        ra_cmd_answer(cmd, NULL);
    else if (!cmd->answered)
        rn_cmd_arm(&cmd->nc);
    rn_cmd_unref(&cmd->nc);
}

static int by_slot(const void *a, const void *b)
{
    return ((const struct gl_item *)a)->slot - ((const struct gl_item *)b)->slot;
}

/* A cluster primary's run: one batch (or more, RA_BATCH each) per slot of
 * its leases, in mode '3' (their slots' markers are never kept: a missing
 * lease alone says data was lost), and one without leases on the probe
 * slot (the primary's lowest, the same for every lockd), whose marker and
 * grace key stand for the node's as on one Redis. No probe slot known yet:
 * data counts as lost. */
static void send_slots(struct ra_run *run, struct rn_conn *c)
{
    struct reassert *ra = run->ra;
    for (size_t i = 0; i < run->n; i++) /* a name is its own hash tag */
        run->items[i].slot = redis_key_slot(run->items[i].name, strlen(run->items[i].name));
    qsort(run->items, run->n, sizeof(*run->items), by_slot);
    int probe = atomic_load_explicit(&ra->probe_slot, memory_order_relaxed);
    run->parts_left = 1; /* held while the parts go out */
    if (probe >= 0) {
        run->parts_left++;
        send_part(run, c, 0, 0, run->mode, redis_slot_tag(probe));
    } else {
        run->lost = run->mode != '2';
    }
    for (size_t first = 0; first < run->n;) {
        int slot = run->items[first].slot;
        size_t count = 1;
        while (first + count < run->n && count < RA_BATCH && run->items[first + count].slot == slot)
            count++;
        run->parts_left++;
        send_part(run, c, first, count, run->mode == '0' ? '3' : run->mode, redis_slot_tag(slot));
        first += count;
    }
    if (--run->parts_left == 0)
        run_finish(run);
}

void ra_ready(struct reassert *ra, struct rn_conn *c)
{
    if (ra == NULL)
        return;
    pthread_mutex_lock(&ra->mu);
    if (!ra->pending) {
        pthread_mutex_unlock(&ra->mu);
        return;
    }
    ra->pending = false;
    struct ra_run *run = lk_calloc(1, sizeof(*run));
    run->ra = ra;
    run->gen = ra->gen;
    run->mode = ra->startup ? '2' : ra->moved && ra->force_on_move ? '1' : '0';
    ra->startup = false;
    pthread_mutex_unlock(&ra->mu);
    run->start_ms = lk_now_ms();
    run->items = glog_snapshot(ra->log, run->start_ms, &run->n);
    if (ra->cluster) {
        send_slots(run, c);
        return;
    }
    size_t parts = run->n == 0 ? 1 : (run->n + RA_BATCH - 1) / RA_BATCH;
    run->parts_left = (int)parts + 1; /* held while the parts go out */
    for (size_t p = 0; p < parts; p++) {
        size_t first = p * RA_BATCH;
        size_t count = run->n - first < RA_BATCH ? run->n - first : RA_BATCH;
        send_part(run, c, first, count, run->mode, NULL);
    }
    if (--run->parts_left == 0)
        run_finish(run);
}

void ra_set_probe_slot(struct reassert *ra, int slot)
{
    if (ra != NULL)
        atomic_store_explicit(&ra->probe_slot, slot, memory_order_relaxed);
}

void ra_kick(struct reassert *ra, struct rn_conn *c)
{
    if (ra != NULL && c != NULL && atomic_load_explicit(&ra->busy, memory_order_acquire) &&
        rn_conn_ready(c))
        ra_ready(ra, c);
}

/* The node layer's hook (redis_node.h): on a loop thread, under the node's
 * mutex, before any command reaches the new process. */
static void on_restart(void *arg, bool moved)
{
    struct reassert *ra = arg;
    pthread_mutex_lock(&ra->mu);
    ra->gen++;
    ra->pending = true;
    ra->moved = moved;
    ra->startup = false;
    atomic_store(&ra->busy, true);
    pthread_mutex_unlock(&ra->mu);
}

void ra_adopt(struct reassert *to, struct reassert *from, ra_pick_fn pick, void *arg, bool failover)
{
    if (to == NULL || from == NULL || to == from)
        return;
    size_t n = glog_move(from->log, to->log, pick, arg);
    if (!failover)
        return;
    lk_log(LK_ERROR,
           "redis '%s' took over slots of '%s', which is down: %zu leases move there and are "
           "re-asserted",
           rn_node_addr(to->node), rn_node_addr(from->node), n);
    rn_node_count_restart(to->node); /* lockd_backend_restarts_total{node} */
    on_restart(to, true);            /* the next ready connection, or the next operation, runs it */
}

enum lk_code ra_gate(struct reassert *ra, bool grant, int64_t *retry_ms)
{
    if (ra == NULL) {
        *retry_ms = 0;
        return LK_OK;
    }
    if (atomic_load_explicit(&ra->busy, memory_order_acquire)) {
        *retry_ms = RA_BUSY_RETRY_MS;
        return LK_BACKEND_RECOVERING;
    }
    if (!grant)
        return LK_OK;
    long long until = atomic_load_explicit(&ra->grace_until, memory_order_relaxed);
    if (until == 0)
        return LK_OK;
    int64_t now = lk_now_ms();
    if (now < until) {
        *retry_ms = until - now;
        return LK_BACKEND_RECOVERING;
    }
    if (atomic_compare_exchange_strong(&ra->grace_until, &until, 0))
        lk_log(LK_INFO, "restart grace of redis '%s' is over: granting again",
               rn_node_addr(ra->node));
    return LK_OK;
}

bool ra_recovering(struct reassert *ra)
{
    if (ra == NULL)
        return false;
    int64_t retry;
    return ra_gate(ra, true, &retry) != LK_OK;
}

struct glog *ra_log(struct reassert *ra)
{
    if (ra == NULL)
        return NULL;
    return ra->log;
}

static char *key_of(const char *prefix, const char *what)
{
    size_t pl = strlen(prefix), wl = strlen(what);
    char *k = lk_malloc(pl + wl + 1);
    memcpy(k, prefix, pl);
    memcpy(k + pl, what, wl + 1);
    return k;
}

struct reassert *ra_new(struct rn_node *n, const struct lk_config *cfg, const char *prefix,
                        const struct rn_script *script, bool cluster)
{
    struct reassert *ra = lk_calloc(1, sizeof(*ra));
    ra->cluster = cluster;
    atomic_init(&ra->probe_slot, -1);
    ra->node = n;
    ra->log = glog_new(cfg->max_locks);
    ra->script = script;
    ra->prefix = lk_strdup(prefix);
    ra->prefix_len = strlen(prefix);
    /* outside any {name} tag: list.lua's MATCH never returns them */
    ra->marker = key_of(prefix, "lockd:node");
    ra->grace_key = key_of(prefix, "lockd:grace");
    ra->grace_ms = cfg->restart_grace_ms;
    ra->keep_ms = cfg->fence_retention_ms;
    ra->force_on_move = cfg->redis_wait_replicas == 0;
    atomic_init(&ra->busy, false);
    atomic_init(&ra->grace_until, 0);
    pthread_mutex_init(&ra->mu, NULL);
    ra->pending = true; /* the first connection learns whether a grace runs */
    ra->startup = true;
    rn_node_set_restart(n, on_restart, ra);
    return ra;
}

void ra_free(struct reassert *ra)
{
    if (ra == NULL)
        return;
    glog_free(ra->log);
    pthread_mutex_destroy(&ra->mu);
    free(ra->prefix);
    free(ra->marker);
    free(ra->grace_key);
    free(ra);
}
