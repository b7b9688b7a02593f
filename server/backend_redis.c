/*
 * backend_redis.c - the `redis` backend's lock layer: one Redis node (the
 * node layer, redis_node.c, one connection per loop) and lock semantics on
 * top: every lock operation is one FCALL of a script from
 * server/scripts/ (a Redis Function each, redis_node.h), or a share of one (the acquires or
 * releases of one loop turn go as one acquire_many.lua or release_many.lua call, see "groups").
 * This file builds the scripts' arguments, decodes their replies into
 * bk_res, decides what is grouped and undoes grants nobody will use. It
 * touches no hiredis context. Operations run on the loop they are given;
 * nodes(), watch() and set_release_hook() may be called from any thread.
 * See DESIGN.md §3 and docs/architecture.md.
 */
#include <hiredis/hiredis.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/grant_log.h"
#include "server/reassert.h"
#include "server/redis_args.h"
#include "server/redis_lock.h"
#include "server/sha1.h"
#include "server/redis_node.h"
#include "server/redis_pubsub.h"
#include "server/redis_slot.h"
#include "server/redis_url.h"
#include "server/util.h"

/* build/gen/scripts.c, generated from the Lua files in server/scripts */
extern const char lk_lua_acquire[];
extern const char lk_lua_renew[];
extern const char lk_lua_release[];
extern const char lk_lua_inspect[];
extern const char lk_lua_list[];
extern const char lk_lua_renew_many[];
extern const char lk_lua_acquire_many[];
extern const char lk_lua_release_many[];
extern const char lk_lua_fence_raise[];
extern const char lk_lua_undo[];
extern const char lk_lua_acquire_shared[];
extern const char lk_lua_acquire_shared_many[];
extern const char lk_lua_force_release[];
extern const char lk_lua_reassert[];
extern const char lk_lua_acquire_set[];
extern const char lk_lua_release_handoff[];

#define RB_MAX_LOOPS 256 /* loop_index() values we accept */
#define RB_BATCH 200     /* leases per renew_many FCALL */

enum {
    SC_ACQUIRE,
    SC_RENEW,
    SC_RELEASE,
    SC_INSPECT,
    SC_LIST,
    SC_RENEW_MANY,
    SC_ACQUIRE_MANY,
    SC_RELEASE_MANY,
    SC_FENCE_RAISE,
    SC_UNDO,
    SC_ACQUIRE_SHARED,
    SC_FORCE_RELEASE,
    SC_REASSERT,
    SC_ACQUIRE_SET,
    SC_ACQUIRE_SHARED_MANY,
    SC_RELEASE_HANDOFF,
    SC_COUNT
};

/* the node layer's group queues we use, flushed in this order (acquires
 * before releases, as when shared acquires went alone at once): exclusive
 * acquires, shared acquires (readers and semaphore slots), releases,
 * releases that hand their name to a waiter (release_handoff.lua) */
enum { GQ_ACQUIRE, GQ_SHARED, GQ_RELEASE, GQ_HANDOFF };

enum rk {
    RK_ACQUIRE,
    RK_RENEW,
    RK_RELEASE,
    RK_INSPECT,
    RK_LIST,
    RK_BATCH,
    RK_PING,
    RK_UNDO,
    RK_GROUP,
    RK_FENCE,  /* fence_raise.lua, undo.lua: an integer, 1 = done on the lease's lock */
    RK_ASKING, /* Redis Cluster's ASKING before a command sent after an ASK redirection */
    RK_MULTI,  /* acquire_set.lua: a multi-lock's names, all or none */
    RK_HANDOFF /* release_handoff.lua: a release, then a waiter's acquire */
};

struct rb {
    char instance[17]; /* random id: release messages this lockd published carry it */
    struct rn_node *node;
    char *prefix;
    size_t prefix_len;
    char prefix_len_str[24]; /* release_many.lua's second argument */
    int64_t wait_replicas;
    struct rn_script scripts[SC_COUNT];
    /* conns[i] is written and read by loop i's thread only (attach, detach,
     * operations); the node keeps its own list for status. */
    struct rn_conn *conns[RB_MAX_LOOPS];
    struct rps *ps;
    /* A Redis Cluster primary (redis_cluster.c): groups hold one slot each,
     * scripts publish with SPUBLISH, list.lua may read keys of many slots. */
    bool cluster;
    /* Restarts of the node (issue 25): the grants it holds, re-asserted on
     * a new Redis process, and the grace (reassert.c). */
    struct reassert *ra;
    struct glog *log;
    /* A Redlock node (redis_lock_set_vote): a shared acquire's floor is a
     * multiple of vote_mod, a counter past it steps to vote_res modulo
     * vote_mod (sh_step); vote_mod 0 elsewhere. */
    int vote_mod, vote_res;
    char vote_mod_str[8], vote_res_str[8];
};

struct rbatch {
    struct bk_renew_item *items;
    size_t n;
    int parts_left;
    bk_done_fn done;
    void *arg;
    char *refusal; /* the first part's Redis error, if any (bk_res.refusal) */
};

/* One lock operation (or a group of them, or an undo). The node layer's
 * command comes first: its callbacks cast back. It counts what still holds
 * the operation (hiredis callbacks, a group, the queue); `answered` makes
 * the caller's callback run exactly once. */
struct rcmd {
    struct rn_cmd nc;
    struct rb *bk;
    enum rk kind;
    bool answered;
    bool delayed; /* release leaving a lock-delay: never grouped */
    bool granted; /* acquire: the script granted; the answer waits for WAIT */
    /* an exclusive acquire with a fence floor (bk_req.fence_floor): its
     * now_us is its own, never grouped (a Redlock node's shared acquires
     * are, each with its own floor: group_send_slot) */
    bool floored;
    bool shared; /* acquire: acquire_shared.lua (shared or a semaphore) */
    bool slot;   /* acquire, hand-off: a semaphore's slot (limit > 1), whose grant may end in '+' */
    bk_done_fn done;
    void *arg;
    struct rbatch *batch;
    size_t first, count;
    struct rcmd **members; /* RK_GROUP: the operations it carries, a ref on each */
    int nmembers;
    int64_t ttl_ms;   /* acquire: granted ttl */
    int64_t delay_ms; /* release: the lock-delay asked */
    int64_t token;    /* acquire with WAIT: the grant's token, answered after WAIT */
    bool room;        /* and its bk_res.room */
    int64_t start_ms; /* when it was asked: a lease recorded expires no later than Redis' */
    /* shared acquire: the caller's more holders (bk_req.more), their tokens
     * filled when the grant is answered (acquire_shared.lua: token + k) */
    struct bk_grant_item *more;
    size_t nmore;
    const char *lease_ref; /* renew, release: the request's lease (valid until answered) */
    const char *name_ref;  /* renew, release: the request's name (as lease_ref) */
    /* acquire: what an undo needs, "<name>\0<lease>\0" (lk_pair_put) */
    const char *undo_name, *undo_lease;
    char *refusal; /* the Redis error that answered it (bk_res.refusal), or NULL */
    char undo[];
};

/* Where rb_acquire and rb_release put their arguments in a command's argv,
 * after FCALL fn numkeys; the group builder reads them there. */
enum {
    ARG_LOCK = 3,      /* both: the lock's key */
    ACQ_ARG_WL = 5,    /* acquire: '<w><lease>', then rest and ttl_ms */
    ACQ_ARG_NOW = 8,   /* acquire: now_us, its last */
    REL_ARG_LEASE = 4, /* release: the lease, then delay_ms and chanpub */
};

static const struct rn_cmd_type rcmd_type;
static void cmd_undo(struct rcmd *acq);

/* ---------------------------------------------------------------- argv */

static void argb_key(struct rargs *b, const struct rb *bk, const char *name, const char *suffix)
{
    rargs_tagged(b, bk->prefix, bk->prefix_len, "", name, suffix);
}

/* <prefix>released:{<name>}, the channel release.lua publishes on. */
static void argb_channel(struct rargs *b, const struct rb *bk, const char *name)
{
    rargs_tagged(b, bk->prefix, bk->prefix_len, RPS_CHANNEL_INFIX, name, "");
}

/* ---------------------------------------------------------------- commands */

static struct rn_conn *conn_of(struct rb *bk, struct lk_loop *lp)
{
    int i = loop_index(lp);
    if (i < 0 || i >= RB_MAX_LOOPS)
        return NULL;
    return bk->conns[i]; /* written only by this same thread (attach/detach) */
}

static struct rcmd *cmd_new(struct rb *bk, struct rn_conn *c, enum rk kind, int script,
                            size_t extra)
{
    struct rcmd *cmd = lk_calloc(1, sizeof(*cmd) + extra);
    rn_cmd_init(&cmd->nc, &rcmd_type, c, script >= 0 ? &bk->scripts[script] : NULL);
    cmd->bk = bk;
    cmd->kind = kind;
    return cmd;
}

static void batch_part_done(struct rbatch *b)
{
    if (--b->parts_left > 0)
        return;
    struct bk_res r;
    bk_res_init(&r, LK_OK); /* each item says how it went */
    r.items = b->items;
    r.nitems = b->n;
    r.refusal = b->refusal;
    b->done(b->arg, &r);
    free(b->refusal);
    free(b);
}

/* Exactly once: set before the caller's callback runs, so that neither a
 * late reply nor the deadline can call it again. */
static void cmd_mark_answered(struct rcmd *cmd)
{
    cmd->answered = true;
    rn_cmd_disarm(&cmd->nc);
}

static void cmd_answer(struct rcmd *cmd, const struct bk_res *r)
{
    if (cmd->answered)
        return;
    cmd_mark_answered(cmd);
    if (cmd->done != NULL)
        cmd->done(cmd->arg, r);
}

/* Never a grant on doubt: timeouts, NULL replies and error replies all end here. */
static void cmd_answer_down(struct rcmd *cmd)
{
    if (cmd->answered)
        return;
    if (cmd->kind == RK_BATCH) {
        cmd_mark_answered(cmd);
        for (size_t i = 0; i < cmd->count; i++)
            cmd->batch->items[cmd->first + i].result = LK_BACKEND_DOWN;
        if (cmd->refusal != NULL && cmd->batch->refusal == NULL)
            cmd->batch->refusal = lk_strdup(cmd->refusal);
        batch_part_done(cmd->batch);
        return;
    }
    struct bk_res r;
    bk_res_init(&r, LK_BACKEND_DOWN);
    r.refusal = cmd->refusal;
    /* Held back (or lost) while the node is re-asserted after a restart:
     * the client is told to come back, not that Redis is down. */
    int64_t retry = 0;
    bool grant = cmd->kind == RK_ACQUIRE || cmd->kind == RK_MULTI || cmd->kind == RK_PING;
    if (ra_gate(cmd->bk->ra, grant, &retry) != LK_OK) {
        r.code = LK_BACKEND_RECOVERING;
        r.delay_ms = retry;
    }
    cmd_answer(cmd, &r);
}

/* Set by redis_lock_submit_asking around one submit, on the submitting
 * loop's thread: each command it makes goes alone, right behind an ASKING
 * on the same connection (Redis Cluster's ASK redirection: ASKING holds for
 * the connection's next command only, and nothing runs on this thread in
 * between). Never set on the single-Redis path. */
static _Thread_local bool rb_asking;

static enum lk_code cmd_submit(struct rcmd *cmd, int q);

static void cmd_asking(struct rb *bk, struct rn_conn *c)
{
    struct rcmd *a = cmd_new(bk, c, RK_ASKING, -1, 0);
    a->answered = true; /* nobody waits: an error shows in the command behind it */
    struct rargs b = {0};
    rargs_str(&b, "ASKING");
    rn_cmd_take_args(&a->nc, &b);
    (void)cmd_submit(a, -1);
}

/* Sends the command, or queues it for its group; the node layer makes it
 * wait for a connection that is down between attempts. LK_OK when the
 * caller was answered already. */
static enum lk_code cmd_submit(struct rcmd *cmd, int q)
{
    if (rb_asking && cmd->kind != RK_ASKING) {
        q = -1;
        cmd_asking(cmd->bk, cmd->nc.conn);
    }
    int rc = q >= 0 ? rn_queue(&cmd->nc, q) : rn_send(&cmd->nc);
    if (rc != 0) {
        cmd_answer_down(cmd);
        rn_cmd_unref(&cmd->nc);
        return LK_OK;
    }
    if (q < 0 && !cmd->answered)
        rn_cmd_arm(&cmd->nc);      /* rn_queue armed queued ones */
    bool last = cmd->nc.refs == 1; /* its group could not be sent: nothing else holds it */
    bool answered = cmd->answered;
    rn_cmd_unref(&cmd->nc); /* ours; the last one answers LK_BACKEND_DOWN */
    return last || answered ? LK_OK : LK_AGAIN;
}

/* ---------------------------------------------------------------- replies */

static int64_t rint64(const redisReply *e)
{
    if (e == NULL)
        return 0;
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS)
        return strtoll(e->str, NULL, 10);
    return 0;
}

static bool is_array(const redisReply *r, size_t min)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

/* A token as the scripts answer it: a string of 1 to 18 digits, above 0.
 * Anything else (a script that went wrong) is no answer: never a grant. */
static bool token_of(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return v > 0;
}

static bool rtoken(const redisReply *e, int64_t *out)
{
    return e->type == REDIS_REPLY_STRING && token_of(e->str, e->len, out);
}

/* A grant's token: rtoken's, or, when slot (a semaphore's), with '+'
 * after it when a slot is still free (_acquire_shared.lua): *room says
 * which. The scripts write '+' for a semaphore alone: after any other
 * grant it is no token. */
static bool rgrant(const redisReply *e, bool slot, int64_t *out, bool *room)
{
    if (e->type != REDIS_REPLY_STRING)
        return false;
    *room = slot && e->len > 1 && e->str[e->len - 1] == '+';
    return token_of(e->str, e->len - *room, out);
}

/* el[0..3] = owner, token, sb, pttl; el[4], when mode_too, the mode ('1'
 * shared) */
static void holder_from_mode(redisReply **el, bool mode_too, struct bk_holder *h);

static void holder_from(redisReply **el, struct bk_holder *h)
{
    holder_from_mode(el, false, h);
}

static void holder_from_mode(redisReply **el, bool mode_too, struct bk_holder *h)
{
    memset(h, 0, sizeof(*h));
    if (el[0]->type == REDIS_REPLY_STRING)
        snprintf(h->owner, sizeof(h->owner), "%.*s", (int)el[0]->len, el[0]->str);
    h->fencing_token = rint64(el[1]);
    h->session_bound = rint64(el[2]) != 0;
    int64_t p = rint64(el[3]);
    h->expires_in_ms = p > 0 ? p : 0;
    h->mode = mode_too && rint64(el[4]) == 1 ? BK_SHARED : BK_EXCLUSIVE;
}

/* A lock-delay's PTTL as bk_res.delay_ms: above 0 whenever Redis says one
 * runs, even in its last millisecond. */
static int64_t delay_left(const redisReply *e)
{
    int64_t v = rint64(e);
    return v > 0 ? v : 1;
}

/* Status {0} / {2, holder...} shared by renew and release. */
static bool owner_result(const redisReply *r, struct bk_res *out, struct bk_holder *h)
{
    int64_t st = rint64(r->element[0]);
    if (st == 0) {
        out->code = LK_NOT_HELD;
        return true;
    }
    if (st == 2 && r->elements >= 5) {
        out->code = LK_HELD_BY_OTHER;
        holder_from(r->element + 1, h);
        out->holders = h;
        out->nholders = 1;
        return true;
    }
    return false;
}

static void grant_res(struct rcmd *cmd, int64_t token, struct bk_res *out)
{
    bk_res_init(out, LK_OK);
    out->fencing_token = token;
    out->ttl_ms = cmd->ttl_ms;
    out->validity_ms = cmd->ttl_ms; /* one node, no drift: known to hold its whole ttl */
    for (size_t i = 0; i < cmd->nmore; i++)
        cmd->more[i].fencing_token = token + (int64_t)i + 1;
}

/* Where rb_acquire_shared puts its arguments (after FCALL fn 2 lock
 * fence): '<w><lease>', '<sb> <ttl_ms> <mode> <owner>', ttl_ms, limit,
 * now_us (acquire_shared.lua), then bk_req.more's. */
enum { SH_ARG_WL = 5, SH_ARG_REST = 6, SH_ARG_LIMIT = 8, SH_ARG_NOW = 9 };
/* group_send_slot copies a Redlock reader's wl rest ttl limit now_us as one run */
_Static_assert(SH_ARG_NOW == SH_ARG_WL + 4,
               "a shared acquire's per-member arguments are contiguous");

/* Where rb_release_handoff puts its per-lock arguments (after FCALL fn 1
 * lock publisher): the acquire's at the places above, then now_us, the
 * lease released and after; HO_ARGS of them. */
enum { HO_ARG_WL = 5, HO_ARGS = 7 };

/* The grants table (grant_log.c): what a restarted Redis gets back,
 * exclusive leases and shared holds (readers, semaphore slots) alike. */
static void note_grant(struct rcmd *cmd, int64_t token)
{
    if (cmd->undo_name == NULL)
        return;
    const struct rn_cmd *nc = &cmd->nc;
    struct gl_grant gr = {
        .name = cmd->undo_name,
        .lease = cmd->undo_lease,
        .token = token,
        .ttl_ms = cmd->ttl_ms,
        .expires_ms = cmd->start_ms + cmd->ttl_ms,
    };
    if (cmd->shared) {
        /* '<sb> <ttl_ms> <mode> <owner>' */
        const char *rest = nc->argv[SH_ARG_REST], *end = rest + nc->argvlen[SH_ARG_REST];
        const char *p = rest;
        for (int sp = 0; sp < 3 && p < end; p++)
            sp += *p == ' ';
        gr.sb = rest[0] == '1';
        gr.owner = p;
        gr.owner_len = (size_t)(end - p);
        gr.shared = true; /* a reader has limit 1 (mode '1'), a slot more */
        gr.limit = atoi(nc->argv[SH_ARG_LIMIT]);
    } else {
        /* '<sb> <ttl_ms> <owner>' (acquire.lua's value tail) */
        const char *rest = nc->argv[ACQ_ARG_WL + 1];
        size_t rlen = nc->argvlen[ACQ_ARG_WL + 1];
        const char *sp = rlen > 2 ? memchr(rest + 2, ' ', rlen - 2) : NULL;
        gr.sb = rlen > 0 && rest[0] == '1';
        gr.owner = sp != NULL ? sp + 1 : rest + rlen;
        gr.owner_len = (size_t)(rest + rlen - gr.owner);
        gr.limit = 1;
    }
    glog_put(cmd->bk->log, &gr);
    /* readers granted with it (bk_req.more): their tokens follow its */
    for (size_t i = 0; i < cmd->nmore; i++) {
        const struct bk_grant_item *it = &cmd->more[i];
        gr.lease = it->lease;
        gr.token = token + (int64_t)i + 1;
        gr.ttl_ms = it->ttl_ms;
        gr.expires_ms = cmd->start_ms + it->ttl_ms;
        gr.sb = it->session_bound;
        gr.owner = it->owner ? it->owner : "";
        gr.owner_len = strlen(gr.owner);
        gr.limit = 1;
        glog_put(cmd->bk->log, &gr);
    }
}

/* A multi-lock granted (acquire_set.lua): each member in the grants table
 * with its own token, so a Redis that restarts empty gets every one back.
 * cmd->undo is "<lease>\0<name>\0..." (rb_acquire_multi); the value tail
 * '<sb> <ttl_ms> <owner>' follows the 2n keys and '<w><lease>'. */
static void note_multi(struct rcmd *cmd, const int64_t *tokens)
{
    const struct rn_cmd *nc = &cmd->nc;
    size_t at = 3 + 2 * cmd->count + 1;
    if ((size_t)nc->argc <= at)
        return;
    const char *rest = nc->argv[at];
    size_t rlen = nc->argvlen[at];
    const char *sp = rlen > 2 ? memchr(rest + 2, ' ', rlen - 2) : NULL;
    struct gl_grant gr = {
        .lease = cmd->undo,
        .ttl_ms = cmd->ttl_ms,
        .expires_ms = cmd->start_ms + cmd->ttl_ms,
        .sb = rlen > 0 && rest[0] == '1',
        .owner = sp != NULL ? sp + 1 : rest + rlen,
        .limit = 1,
    };
    gr.owner_len = (size_t)(rest + rlen - gr.owner);
    const char *name = cmd->undo + strlen(cmd->undo) + 1;
    for (size_t i = 0; i < cmd->count; i++, name += strlen(name) + 1) {
        gr.name = name;
        gr.token = tokens[i];
        glog_put(cmd->bk->log, &gr);
    }
}

/* A renewal or release answered: the lease lives on, or is gone. */
static void note_owner_result(struct rcmd *cmd, const struct bk_res *out)
{
    if (cmd->lease_ref == NULL)
        return;
    if (out->code == LK_OK && cmd->kind == RK_RENEW)
        glog_renew(cmd->bk->log, cmd->lease_ref, cmd->name_ref, out->ttl_ms, cmd->start_ms);
    else if (out->code == LK_OK || out->code == LK_NOT_HELD || out->code == LK_HELD_BY_OTHER)
        glog_drop(cmd->bk->log, cmd->lease_ref, cmd->name_ref);
}

static void handle_acquire(struct rcmd *cmd, const redisReply *r)
{
    struct bk_res out;
    struct bk_holder h;
    bk_res_init(&out, LK_OK);
    /* a grant is the token alone, as a string; a refusal is an array */
    if (r->type == REDIS_REPLY_STRING) {
        int64_t token = 0;
        bool room = false;
        if (cmd->answered || cmd->nc.wait_lost || !rgrant(r, cmd->slot, &token, &room)) {
            /* Nobody will ever use this grant (the caller already got 503,
             * its WAIT was never sent, or the answer is not a token): give
             * it back now rather than at its TTL. */
            cmd_undo(cmd);
            cmd_answer_down(cmd);
            return;
        }
        if (cmd->nc.wait_replicas > 0) {
            cmd->token = token; /* answered when WAIT says enough replicas have it */
            cmd->room = room;
            cmd->granted = true;
            return;
        }
        grant_res(cmd, token, &out);
        out.room = room;
        note_grant(cmd, token);
        cmd_answer(cmd, &out);
        return;
    }
    if (cmd->answered || !is_array(r, 1))
        return;
    int64_t st = rint64(r->element[0]);
    if (st == 0 && r->elements >= 5) {
        out.code = LK_LOCKED;
        holder_from_mode(r->element + 1, r->elements >= 6, &h);
        out.holders = &h;
        out.nholders = 1;
        cmd_answer(cmd, &out);
    } else if (st == 2 && r->elements >= 2) {
        out.code = LK_LOCKED; /* nobody holds it, a lock-delay runs */
        out.delay_ms = delay_left(r->element[1]);
        cmd_answer(cmd, &out);
    } else if (st == 3 && r->elements >= 2) {
        out.code = LK_LIMIT_MISMATCH;
        out.limit = rint64(r->element[1]);
        cmd_answer(cmd, &out);
    }
}

/* An acquire's refusal (an array, as handle_acquire decodes it) into out;
 * false when r is none. */
static bool acquire_refusal(const redisReply *r, struct bk_res *out, struct bk_holder *h)
{
    if (!is_array(r, 1))
        return false;
    int64_t st = rint64(r->element[0]);
    if (st == 0 && r->elements >= 5) {
        out->code = LK_LOCKED;
        holder_from_mode(r->element + 1, r->elements >= 6, h);
        out->holders = h;
        out->nholders = 1;
    } else if (st == 2 && r->elements >= 2) {
        out->code = LK_LOCKED;
        out->delay_ms = delay_left(r->element[1]);
    } else if (st == 3 && r->elements >= 2) {
        out->code = LK_LIMIT_MISMATCH;
        out->limit = rint64(r->element[1]);
    } else {
        return false;
    }
    return true;
}

/* release_handoff.lua's reply: {release's reply} when it did not release,
 * {token, the waiter's acquire reply} when it did. The release is answered
 * as handle_renew_release answers it, with the acquire's result in
 * bk_res.handoff when it can be read and the release released; a grant
 * nobody will use (the caller was answered already, the release did not
 * release, or the element is an error or no token) is undone at once. */
static void handle_handoff(struct rcmd *cmd, const redisReply *r)
{
    struct bk_res out, got;
    struct bk_holder h, gh;
    if (!is_array(r, 1))
        return;
    const redisReply *rel = r->element[0];
    const redisReply *acq = r->elements >= 2 ? r->element[1] : NULL;
    bk_res_init(&out, LK_OK);
    /* as handle_renew_release reads a release's reply */
    bool released = rel->type == REDIS_REPLY_STRING && rtoken(rel, &out.fencing_token);
    if (!released && is_array(rel, 2) && rint64(rel->element[0]) == 1) {
        out.fencing_token = rint64(rel->element[1]);
        released = true;
    }
    bool known = released || (is_array(rel, 1) && owner_result(rel, &out, &h));
    int64_t token = 0;
    bool granted = acq != NULL && acq->type == REDIS_REPLY_STRING, room = false;
    /* The acquire part failing is no refusal of the release: on a cluster
     * primary whose slot migrates, the lock the release deleted is no
     * longer local, and Redis refuses the script's SET of it ("non local
     * key"). The waiter then asks itself (ASK followed), as when declined. */
    if (acq != NULL && acq->type == REDIS_REPLY_ERROR)
        lk_log(LK_DEBUG, "release_handoff: the waiter's acquire failed: %s",
               acq->str != NULL ? acq->str : "");
    if ((granted && (cmd->answered || !released || !rgrant(acq, cmd->slot, &token, &room))) ||
        (acq != NULL && acq->type == REDIS_REPLY_ERROR)) {
        /* nobody will use this grant (the caller got 503 already, the
         * release did not release: bk_res.handoff rides on LK_OK alone, or
         * the reply is not what was asked), or what ran of it may have
         * granted it: give it back now rather than at its ttl */
        cmd_undo(cmd);
        acq = NULL;
        granted = false;
    }
    if (cmd->answered || !known)
        return;
    note_owner_result(cmd, &out);
    if (granted) {
        grant_res(cmd, token, &got);
        got.room = room;
        note_grant(cmd, token);
        out.handoff = &got;
    } else if (acq != NULL && released) {
        bk_res_init(&got, LK_OK);
        if (acquire_refusal(acq, &got, &gh))
            out.handoff = &got;
    }
    cmd_answer(cmd, &out);
}

static void multi_undo(struct rcmd *cmd);

/* acquire_set.lua's reply: the tokens (strings) of a grant, or {i, refusal
 * of the i-th name as acquire.lua answers it}. */
static void handle_multi(struct rcmd *cmd, const redisReply *r)
{
    size_t n = cmd->count;
    if (!is_array(r, 1))
        return;
    if (r->element[0]->type == REDIS_REPLY_STRING) {
        int64_t *tokens = lk_malloc(n * sizeof(*tokens));
        bool ok = r->elements == n;
        for (size_t i = 0; ok && i < n; i++)
            ok = rtoken(r->element[i], &tokens[i]);
        if (cmd->answered || !ok) {
            /* nobody will use this grant (the caller got 503 already, or
             * the answer is not tokens): give every name back now */
            multi_undo(cmd);
            cmd_answer_down(cmd);
            free(tokens);
            return;
        }
        struct bk_res out;
        grant_res(cmd, tokens[0], &out);
        out.tokens = tokens;
        note_multi(cmd, tokens);
        cmd_answer(cmd, &out);
        free(tokens);
        return;
    }
    if (cmd->answered || r->element[0]->type != REDIS_REPLY_INTEGER || r->elements < 2)
        return;
    /* the refusal as handle_acquire decodes it, shifted by one */
    struct bk_res out;
    struct bk_holder h;
    bk_res_init(&out, LK_OK);
    int64_t i = r->element[0]->integer;
    out.blocked = i >= 1 && (size_t)i <= n ? (size_t)(i - 1) : 0;
    int64_t st = rint64(r->element[1]);
    size_t k = r->elements - 1;
    if (st == 0 && k >= 5) {
        out.code = LK_LOCKED;
        holder_from_mode(r->element + 2, k >= 6, &h);
        out.holders = &h;
        out.nholders = 1;
        cmd_answer(cmd, &out);
    } else if (st == 2 && k >= 2) {
        out.code = LK_LOCKED;
        out.delay_ms = delay_left(r->element[2]);
        cmd_answer(cmd, &out);
    } else if (st == 3 && k >= 2) {
        out.code = LK_LIMIT_MISMATCH;
        out.limit = rint64(r->element[2]);
        cmd_answer(cmd, &out);
    }
}

static void handle_renew_release(struct rcmd *cmd, const redisReply *r)
{
    struct bk_res out;
    struct bk_holder h;
    bk_res_init(&out, LK_OK);
    if (cmd->kind == RK_RELEASE && r->type == REDIS_REPLY_STRING) {
        if (rtoken(r, &out.fencing_token)) {
            out.delay_ms = cmd->delay_ms; /* released: the token alone, as a string */
            note_owner_result(cmd, &out);
            cmd_answer(cmd, &out);
        }
        return;
    }
    if (!is_array(r, 1))
        return;
    if (rint64(r->element[0]) == 1 && r->elements >= 2) {
        out.fencing_token = rint64(r->element[1]);
        if (cmd->kind == RK_RENEW && r->elements >= 3) {
            out.ttl_ms = rint64(r->element[2]);
            out.validity_ms = out.ttl_ms;
        }
        if (cmd->kind == RK_RENEW && r->elements >= 5) { /* {1, token, ttl, owner, mode} */
            memset(&h, 0, sizeof(h));
            if (r->element[3]->type == REDIS_REPLY_STRING)
                snprintf(h.owner, sizeof(h.owner), "%.*s", (int)r->element[3]->len,
                         r->element[3]->str);
            h.fencing_token = out.fencing_token;
            h.expires_in_ms = out.ttl_ms > 0 ? out.ttl_ms : 0; /* as holder_from_mode's */
            h.mode = rint64(r->element[4]) == 1 ? BK_SHARED : BK_EXCLUSIVE;
            out.holders = &h;
            out.nholders = 1;
        }
        note_owner_result(cmd, &out);
        cmd_answer(cmd, &out);
    } else if (owner_result(r, &out, &h)) {
        note_owner_result(cmd, &out);
        cmd_answer(cmd, &out);
    }
}

static void handle_inspect(struct rcmd *cmd, const redisReply *reply)
{
    struct bk_res out;
    struct bk_holder h;
    bk_res_init(&out, LK_OK);
    /* {index, holders} (inspect.lua) */
    if (!is_array(reply, 2))
        return;
    out.index = rint64(reply->element[0]);
    const redisReply *r = reply->element[1];
    if (!is_array(r, 1))
        return;
    int64_t st = rint64(r->element[0]);
    if (st == 4 && r->elements >= 3) { /* {4, limit, count, (owner token sb pttl mode)...} */
        size_t n = (r->elements - 3) / 5;
        struct bk_holder *hs = lk_calloc(n ? n : 1, sizeof(*hs));
        for (size_t i = 0; i < n; i++)
            holder_from_mode(r->element + 3 + 5 * i, true, &hs[i]);
        out.limit = rint64(r->element[1]);
        int64_t total = rint64(r->element[2]);
        out.total_holders = total > 0 ? (size_t)total : 0; /* (a count is never negative) */
        out.holders = hs;
        out.nholders = n;
        cmd_answer(cmd, &out);
        free(hs);
        return;
    }
    if (st == 1 && r->elements >= 5) {
        holder_from(r->element + 1, &h);
        out.holders = &h;
        out.nholders = 1;
    } else if (st == 2 && r->elements >= 2) {
        out.delay_ms = delay_left(r->element[1]);
    } else if (st != 0) {
        return;
    }
    cmd_answer(cmd, &out);
}

/* A listing cursor is '<where>~<check>': where the walk is (list.lua's
 * cursor) and 12 hex digits of SHA-1 over the key prefix and it, so that a
 * cursor no lockd of this prefix gave out is LK_BAD_CURSOR rather than a
 * page from some other point of the keyspace (any lockd on the same Redis
 * and prefix takes another's). Not a secret: a check against mistakes. */
#define CURSOR_CHECK 12
static void cursor_check(const char *prefix, const char *where, size_t len, char out[41])
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "lockd-list\n%s\n%.*s", prefix, (int)len, where);
    sha1_hex(buf, n > 0 && (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, out);
}

bool redis_list_cursor(const char *prefix, const char *where, char out[REDIS_CURSOR_MAX])
{
    size_t wl = strlen(where);
    if (strcmp(where, "0") == 0 || wl + CURSOR_CHECK + 2 > REDIS_CURSOR_MAX)
        return false;
    char check[41];
    cursor_check(prefix, where, wl, check);
    snprintf(out, REDIS_CURSOR_MAX, "%s~%.*s", where, CURSOR_CHECK, check);
    return true;
}

/* Copies the SCAN cursor that s starts with into out (NUL-terminated):
 * its length, or 0 unless s starts with 1 to 20 digits of a 64-bit number. */
static size_t scan_cursor(const char *s, char out[21])
{
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 20)
        return 0;
    memcpy(out, s, n);
    out[n] = '\0';
    errno = 0;
    unsigned long long v = strtoull(out, NULL, 10);
    if (errno != 0 || (v == ULLONG_MAX && strcmp(out, "18446744073709551615") != 0))
        return 0;
    return n;
}

bool redis_list_cursor_open(const char *prefix, const char *given, struct redis_list_pos *pos)
{
    /* A cursor we gave out: '<where>~<check>' (cursor_check). */
    char cur[REDIS_CURSOR_MAX] = "0";
    bool ok = true;
    if (given != NULL && given[0] != '\0') {
        const char *tilde = strrchr(given, '~');
        size_t wl = tilde != NULL ? (size_t)(tilde - given) : 0;
        char check[41];
        ok = tilde != NULL && wl > 0 && wl < sizeof(cur) && strlen(tilde + 1) == CURSOR_CHECK;
        if (ok) {
            cursor_check(prefix, given, wl, check);
            ok = memcmp(check, tilde + 1, CURSOR_CHECK) == 0;
        }
        if (ok) {
            memcpy(cur, given, wl);
            cur[wl] = '\0';
        }
    }
    /* Where the walk is: '<SCAN cursor>', or '<SCAN cursor>:<span end>:<name>'
     * when a page ended inside one SCAN call (list.lua). SCAN cursors are
     * unsigned 64-bit numbers: anything else is the client's mistake (400),
     * not a Redis error (503). */
    pos->stop[0] = '\0';
    pos->after[0] = '\0';
    size_t cl = ok ? scan_cursor(cur, pos->scan) : 0;
    ok = cl > 0 && cur[cl] == '\0';
    if (cl > 0 && cur[cl] == ':') {
        size_t sl = scan_cursor(cur + cl + 1, pos->stop);
        if (sl > 0 && cur[cl + 1 + sl] == ':') {
            const char *after = cur + cl + 1 + sl + 1;
            ok = *after && lk_name_valid(after, strlen(after));
            if (ok)
                lk_strlcpy(pos->after, after, sizeof(pos->after));
        }
    }
    return ok;
}

static void handle_list(struct rcmd *cmd, const redisReply *r)
{
    if (!is_array(r, 1) || r->element[0]->type != REDIS_REPLY_STRING)
        return;
    size_t n = (r->elements - 1) / 9; /* name owner token sb pttl mode limit count index */
    struct bk_entry *ents = lk_calloc(n ? n : 1, sizeof(*ents));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply **el = r->element + 1 + 9 * i;
        if (el[0]->type != REDIS_REPLY_STRING)
            continue;
        ents[k].name = el[0]->str; /* valid while the reply lives: during the callback */
        holder_from_mode(el + 1, true, &ents[k].holder);
        ents[k].limit = rint64(el[6]);
        ents[k].nholders = (size_t)rint64(el[7]);
        ents[k].index = rint64(el[8]);
        k++;
    }
    struct bk_res out;
    bk_res_init(&out, LK_OK);
    out.entries = ents;
    out.nentries = k;
    char next[REDIS_CURSOR_MAX];
    if (redis_list_cursor(cmd->bk->prefix, r->element[0]->str, next))
        out.next_cursor = next;
    cmd_answer(cmd, &out);
    free(ents);
}

static void handle_batch(struct rcmd *cmd, const redisReply *r)
{
    if (!is_array(r, cmd->count))
        return;
    for (size_t i = 0; i < cmd->count; i++) {
        int64_t v = rint64(r->element[i]);
        struct bk_renew_item *it = &cmd->batch->items[cmd->first + i];
        it->result = v == 1 ? LK_OK : v == 2 ? LK_HELD_BY_OTHER : LK_NOT_HELD;
        if (v == 1)
            glog_renew(cmd->bk->log, it->lease, it->name, it->ttl_ms, cmd->start_ms);
        else
            glog_drop(cmd->bk->log, it->lease, it->name);
    }
    cmd_mark_answered(cmd);
    batch_part_done(cmd->batch);
}

static void handle_fence(struct rcmd *cmd, const redisReply *r)
{
    if (r->type != REDIS_REPLY_INTEGER)
        return;
    struct bk_res out;
    bk_res_init(&out, r->integer == 1 ? LK_OK : LK_NOT_HELD);
    cmd_answer(cmd, &out);
}

static void handle_ping(struct rcmd *cmd, const redisReply *r)
{
    if (rn_node_role(cmd->bk->node, r) != LK_OK) {
        if (r->type == REDIS_REPLY_ERROR)
            rn_conn_log_refusal(cmd->nc.conn, r);
        return; /* unanswered: settling answers LK_BACKEND_DOWN */
    }
    struct bk_res out;
    bk_res_init(&out, LK_OK);
    cmd_answer(cmd, &out);
}

/* Dispatches a reply; a reply it cannot use leaves the command unanswered,
 * and settling it then answers LK_BACKEND_DOWN. */
static void cmd_handle(struct rcmd *cmd, const redisReply *r)
{
    if (r == NULL || (r->type == REDIS_REPLY_ERROR && cmd->kind != RK_PING))
        return;
    if (cmd->answered && cmd->kind != RK_ACQUIRE && cmd->kind != RK_MULTI &&
        cmd->kind != RK_HANDOFF)
        return;
    switch (cmd->kind) {
    case RK_ACQUIRE: handle_acquire(cmd, r); break;
    case RK_HANDOFF: handle_handoff(cmd, r); break;
    case RK_MULTI: handle_multi(cmd, r); break;
    case RK_RENEW:
    case RK_RELEASE: handle_renew_release(cmd, r); break;
    case RK_INSPECT: handle_inspect(cmd, r); break;
    case RK_LIST: handle_list(cmd, r); break;
    case RK_BATCH: handle_batch(cmd, r); break;
    case RK_PING: handle_ping(cmd, r); break;
    case RK_FENCE: handle_fence(cmd, r); break;
    case RK_UNDO:
    case RK_ASKING:
    case RK_GROUP: break; /* group_done() */
    }
}

/* Hands each member of a group its element of the reply. A member without
 * one is answered LK_BACKEND_DOWN: the reply is NULL (the connection went)
 * or an error, or its own element is an error. When Redis did answer, such
 * an acquire is also undone, compare-and-delete with its own lease: what
 * ran of the script may have granted it. */
/* Keeps the first Redis error that answered cmd, for bk_res.refusal (the
 * cluster router follows MOVED and ASK from it). */
static void cmd_keep_refusal(struct rcmd *cmd, const redisReply *e)
{
    if (cmd->refusal == NULL && e != NULL && e->type == REDIS_REPLY_ERROR && e->str != NULL)
        cmd->refusal = lk_strdup(e->str);
}

static void group_done(struct rcmd *g, const redisReply *r)
{
    bool ok = is_array(r, (size_t)g->nmembers);
    int n = g->nmembers;
    g->nmembers = 0;
    for (int i = 0; i < n; i++) {
        struct rcmd *m = g->members[i];
        const redisReply *e = ok ? r->element[i] : NULL;
        cmd_keep_refusal(m, ok ? e : r);
        if (e != NULL && e->type == REDIS_REPLY_ERROR) {
            rn_conn_log_refusal(m->nc.conn, e);
            e = NULL;
        }
        if (e == NULL && r != NULL && (m->kind == RK_ACQUIRE || m->kind == RK_HANDOFF))
            cmd_undo(m);
        cmd_handle(m, e);
        rn_cmd_unref(&m->nc); /* the group's */
    }
}

/* The node layer's callbacks (struct rn_cmd_type). */
static void rcmd_reply(struct rn_cmd *nc, redisReply *r)
{
    struct rcmd *cmd = (struct rcmd *)nc;
    if (r != NULL && r->type == REDIS_REPLY_ERROR && cmd->kind != RK_PING) {
        rn_conn_log_refusal(nc->conn, r);
        cmd_keep_refusal(cmd, r);
    }
    if (cmd->kind == RK_GROUP) {
        group_done(cmd, r);
        return;
    }
    if (r != NULL && r->type == REDIS_REPLY_ERROR && cmd->kind != RK_PING)
        r = NULL;
    cmd_handle(cmd, r);
}

static void rcmd_wait_reply(struct rn_cmd *nc, redisReply *r)
{
    struct rcmd *cmd = (struct rcmd *)nc;
    struct rb *bk = cmd->bk;
    if (!cmd->granted || cmd->answered)
        return;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= bk->wait_replicas) {
        struct bk_res out;
        grant_res(cmd, cmd->token, &out);
        out.room = cmd->room;
        note_grant(cmd, cmd->token);
        cmd_answer(cmd, &out);
        return;
    }
    /* A failover to a replica that lacks this grant would hand the lock to
     * someone else: undo it (compare-and-delete) and 503. */
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
        lk_log(LK_WARN, "grant reached %lld of %lld replicas in time; undone",
               (long long)r->integer, (long long)bk->wait_replicas);
    cmd_undo(cmd);
    cmd_answer_down(cmd);
}

static void rcmd_expire(struct rn_cmd *nc)
{
    cmd_answer_down((struct rcmd *)nc);
}

/* Nothing holds the command any more: a caller not answered by now gets
 * LK_BACKEND_DOWN, then it is freed. */
static void rcmd_settle(struct rn_cmd *nc)
{
    struct rcmd *cmd = (struct rcmd *)nc;
    if (!cmd->answered)
        cmd_answer_down(cmd);
    rn_cmd_fini(nc);
    free(cmd->members);
    free(cmd->refusal);
    free(cmd);
}

/* Commands queued before a restart was seen (while the connection was down)
 * go out only if the node's re-assertion allows them (reassert.c): grants
 * not before it is done and its grace is over, renewals and releases not
 * before it is done. Reads and undos (compare-and-delete of our own) go. */
static bool rcmd_may_send(struct rn_cmd *nc)
{
    struct rcmd *cmd = (struct rcmd *)nc;
    int64_t retry;
    switch (cmd->kind) {
    case RK_ACQUIRE:
    case RK_HANDOFF:
    case RK_MULTI: return ra_gate(cmd->bk->ra, true, &retry) == LK_OK;
    case RK_GROUP:
        return ra_gate(cmd->bk->ra,
                       nc->script == &cmd->bk->scripts[SC_ACQUIRE_MANY] ||
                           nc->script == &cmd->bk->scripts[SC_ACQUIRE_SHARED_MANY] ||
                           nc->script == &cmd->bk->scripts[SC_RELEASE_HANDOFF],
                       &retry) == LK_OK;
    case RK_RENEW:
    case RK_RELEASE:
    case RK_BATCH:
    case RK_FENCE: return ra_gate(cmd->bk->ra, false, &retry) == LK_OK;
    case RK_INSPECT:
    case RK_LIST:
    case RK_PING:
    case RK_ASKING: /* goes right before the command it is for, which is gated itself */
    case RK_UNDO: break;
    }
    return true;
}

static const struct rn_cmd_type rcmd_type = {
    .reply = rcmd_reply,
    .may_send = rcmd_may_send,
    .wait_reply = rcmd_wait_reply,
    .expire = rcmd_expire,
    .settle = rcmd_settle,
};

/* Releases the grant an acquire command just made (release.lua with the
 * same lease: compare-and-delete, so never someone else's lock). Nobody
 * waits for the answer; if it is lost, the lease expires at its TTL. */
static void cmd_undo(struct rcmd *acq)
{
    struct rb *bk = acq->bk;
    if (acq->undo_name == NULL)
        return;
    struct rcmd *u = cmd_new(bk, acq->nc.conn, RK_UNDO, SC_RELEASE, 0);
    u->answered = true;
    struct rargs b = {0};
    rargs_str(&b, "1");
    argb_key(&b, bk, acq->undo_name, "");
    rargs_str(&b, acq->undo_lease);
    rargs_str(&b, "0");
    /* nobody's id: our own waiters learn of it this way too (it publishes
     * when any waiter was refused by the grant undone, see acquire.lua) */
    argb_channel(&b, bk, acq->undo_name);
    rargs_append(&b, " -", 2);
    rn_cmd_take_args(&u->nc, &b);
    (void)cmd_submit(u, -1);
}

/* Gives back every name a multi-lock's script granted (release.lua with its
 * lease, name by name: compare-and-delete). cmd->undo holds
 * "<lease>\0<name>\0<name>\0..." (rb_acquire_multi). */
static void multi_undo(struct rcmd *cmd)
{
    struct rb *bk = cmd->bk;
    const char *lease = cmd->undo;
    const char *name = lease + strlen(lease) + 1;
    for (size_t i = 0; i < cmd->count; i++, name += strlen(name) + 1) {
        struct rcmd *u = cmd_new(bk, cmd->nc.conn, RK_UNDO, SC_RELEASE, 0);
        u->answered = true;
        struct rargs b = {0};
        rargs_str(&b, "1");
        argb_key(&b, bk, name, "");
        rargs_str(&b, lease);
        rargs_str(&b, "0");
        argb_channel(&b, bk, name);
        rargs_append(&b, " -", 2);
        rn_cmd_take_args(&u->nc, &b);
        (void)cmd_submit(u, -1);
    }
}

/* ---------------------------------------------------------------- groups
 *
 * Under load one loop turn makes tens of acquires and releases. Each FCALL
 * costs Redis a fixed price (parsing it, setting up KEYS and ARGV, the reply)
 * on top of the script's own calls, so the acquires of a turn go to Redis as
 * one acquire_many.lua call (shared ones, readers and semaphore slots, as one
 * acquire_shared_many.lua: a third queue), the releases of both kinds
 * as one release_many.lua, and the releases that hand their name to a
 * waiter as one release_handoff.lua (a fourth): Redis
 * instructions per acquire + release pair fall from 78,500 alone to 54,700 in
 * groups of 16, fully pipelined (bench/RESULTS.md). Each operation keeps its
 * own command, deadline and answer; the group command holds a reference on
 * each and hands it its element of the reply. The node layer queues them and
 * sends a group of one as the plain script. An acquire followed by WAIT
 * (redis_wait_replicas) is never grouped, nor an exclusive one with a fence
 * floor (floored), nor a release that leaves a lock-delay (the reaper's,
 * rare): so release_many.lua takes a lease alone per lock, and
 * acquire_many.lua builds each fence key from its lock key, one argument
 * less per lock for Redis to parse (bench/RESULTS.md). A Redlock node's
 * readers go as one acquire_shared_many.lua call too, each with its own
 * floor (group_send_slot). */

static int group_queue(const struct rcmd *cmd)
{
    if (cmd->kind == RK_RELEASE && !cmd->delayed)
        return GQ_RELEASE;
    if (cmd->kind == RK_HANDOFF)
        return GQ_HANDOFF;
    if (cmd->kind != RK_ACQUIRE || cmd->nc.wait_replicas != 0 || cmd->floored)
        return -1;
    if (cmd->shared)
        return cmd->nmore == 0 ? GQ_SHARED : -1; /* readers riding on it: alone */
    return GQ_ACQUIRE;
}

static void group_send_slot(struct rb *bk, struct rn_conn *c, int q, struct rn_cmd **nm, int n);

/* hooks.group: n >= 2 live members of queue q, with the queue's reference
 * on each, which the group command takes over. On a Redis Cluster primary
 * a script may touch keys of one slot only (else CROSSSLOT): the members
 * go as one group per slot, a member alone in its slot as itself. */
static void group_send(void *arg, struct rn_conn *c, int q, struct rn_cmd **nm, int n)
{
    struct rb *bk = arg;
    if (!bk->cluster) {
        group_send_slot(bk, c, q, nm, n);
        return;
    }
    int slot[RN_GROUP_MAX];
    bool taken[RN_GROUP_MAX] = {false};
    struct rn_cmd *part[RN_GROUP_MAX];
    for (int i = 0; i < n && i < RN_GROUP_MAX; i++)
        slot[i] = redis_key_slot(nm[i]->argv[ARG_LOCK], nm[i]->argvlen[ARG_LOCK]);
    for (int i = 0; i < n && i < RN_GROUP_MAX; i++) {
        if (taken[i])
            continue;
        int k = 0;
        for (int j = i; j < n && j < RN_GROUP_MAX; j++) {
            if (!taken[j] && slot[j] == slot[i]) {
                taken[j] = true;
                part[k++] = nm[j];
            }
        }
        if (k > 1) {
            group_send_slot(bk, c, q, part, k);
            continue;
        }
        if (rn_send(part[0]) != 0) /* as the node layer sends a group of one */
            part[0]->type->reply(part[0], NULL);
        rn_cmd_unref(part[0]); /* the queue's */
    }
}

static void group_send_handoffs(struct rb *bk, struct rn_conn *c, struct rn_cmd **nm, int n);

/* A group call of script for nm[0..n) with argc arguments: the group's
 * members, and its argv up to "FCALL fn n lock..." (*k: the next). */
static struct rcmd *group_new(struct rb *bk, struct rn_conn *c, int script, struct rn_cmd **nm,
                              int n, int argc, int *k)
{
    struct rcmd *g = cmd_new(bk, c, RK_GROUP, script, 0);
    g->answered = true; /* nobody waits on the group itself */
    g->members = lk_malloc((size_t)n * sizeof(*g->members));
    for (int i = 0; i < n; i++)
        g->members[i] = (struct rcmd *)nm[i];
    g->nmembers = n;
    struct rn_cmd *gc = &g->nc;
    gc->argc = argc;
    gc->argv = lk_malloc((size_t)gc->argc * sizeof(*gc->argv));
    gc->argvlen = lk_malloc((size_t)gc->argc * sizeof(*gc->argvlen));
    gc->buf = lk_malloc(24);
    gc->argv[0] = "FCALL";
    gc->argvlen[0] = 5;
    gc->argv[1] = gc->script->fname;
    gc->argvlen[1] = gc->script->fname_len;
    gc->argv[2] = gc->buf;
    gc->argvlen[2] = lk_itoa((int64_t)n, gc->buf);
    *k = 3;
    for (int i = 0; i < n; i++) {
        gc->argv[*k] = nm[i]->argv[ARG_LOCK];
        gc->argvlen[(*k)++] = nm[i]->argvlen[ARG_LOCK];
    }
    return g;
}

/* One group call (acquire_many.lua, acquire_shared_many.lua,
 * release_many.lua or release_handoff.lua) for nm[0..n). */
static void group_send_slot(struct rb *bk, struct rn_conn *c, int q, struct rn_cmd **nm, int n)
{
    if (q == GQ_HANDOFF) {
        group_send_handoffs(bk, c, nm, n);
        return;
    }
    bool acq = q != GQ_RELEASE, sh = q == GQ_SHARED;
    bool votes = sh && bk->vote_mod > 0; /* a Redlock node's: each member's own floor */
    int script = sh ? SC_ACQUIRE_SHARED_MANY : acq ? SC_ACQUIRE_MANY : SC_RELEASE_MANY;
    /* Members' argv (rb_acquire, rb_acquire_shared, rb_release):
     *   acquire  FCALL fn 2 lock fence wl rest ttl now_us
     *   shared   FCALL fn 2 lock fence wl rest ttl limit now_us [mod res]
     *   release  FCALL fn 1 lock lease delay chanpub
     * The group's (acquire_many.lua, acquire_shared_many.lua,
     * release_many.lua):
     *   acquire  FCALL fn n lock... now_us (wl rest ttl)...
     *   shared   FCALL fn n lock... now_us (wl rest ttl limit)...
     *   votes    FCALL fn n lock... v mod res (wl rest ttl limit now_us)...
     *   release  FCALL fn n lock... publisher prefix_len lease...
     * The latest member's clock is a floor for every token of the group,
     * but on a Redlock node (votes: mod and res, redis_lock_set_vote) each
     * reader's floor is its own call's, the same on every node
     * (backend_redlock.c says why); the fence keys are '<lock>:fence',
     * built by the script. */
    int na = votes ? 5 : sh ? 4 : acq ? 3 : 1; /* per member after its keys */
    int head = votes ? 3 : acq ? 1 : 2;
    int k;
    struct rcmd *g = group_new(bk, c, script, nm, n, 3 + n * (1 + na) + head, &k);
    struct rcmd **m = g->members;
    struct rn_cmd *gc = &g->nc;
    if (votes) {
        gc->argv[k] = "v";
        gc->argvlen[k++] = 1;
        gc->argv[k] = bk->vote_mod_str;
        gc->argvlen[k++] = strlen(bk->vote_mod_str);
        gc->argv[k] = bk->vote_res_str;
        gc->argvlen[k++] = strlen(bk->vote_res_str);
    } else if (acq) {
        int now = sh ? SH_ARG_NOW : ACQ_ARG_NOW;
        gc->argv[k] = m[n - 1]->nc.argv[now];
        gc->argvlen[k++] = m[n - 1]->nc.argvlen[now];
    } else {
        gc->argv[k] = bk->instance;
        gc->argvlen[k++] = strlen(bk->instance);
        gc->argv[k] = bk->prefix_len_str;
        gc->argvlen[k++] = strlen(bk->prefix_len_str);
    }
    int first = sh ? SH_ARG_WL : acq ? ACQ_ARG_WL : REL_ARG_LEASE;
    for (int i = 0; i < n; i++) {
        for (int j = first; j < first + na; j++) {
            gc->argv[k] = m[i]->nc.argv[j];
            gc->argvlen[k++] = m[i]->nc.argvlen[j];
        }
    }
    if (rn_send(gc) != 0)
        group_done(g, NULL);
    rn_cmd_unref(gc);
}

/* release_handoff.lua for the hand-offs nm[0..n) of one loop turn (one
 * slot), in the order they were made. A member's argv (rb_release_handoff):
 *   FCALL fn 1 lock publisher (wl rest ttl limit now lease after) plen
 * the group's:
 *   FCALL fn n lock... publisher (wl rest ttl limit now lease after)... plen */
static void group_send_handoffs(struct rb *bk, struct rn_conn *c, struct rn_cmd **nm, int n)
{
    int k;
    struct rcmd *g = group_new(bk, c, SC_RELEASE_HANDOFF, nm, n, 3 + n * (1 + HO_ARGS) + 2, &k);
    struct rn_cmd *gc = &g->nc;
    gc->argv[k] = bk->instance;
    gc->argvlen[k++] = strlen(bk->instance);
    for (int i = 0; i < n; i++) {
        for (int j = HO_ARG_WL; j < HO_ARG_WL + HO_ARGS; j++) {
            gc->argv[k] = nm[i]->argv[j];
            gc->argvlen[k++] = nm[i]->argvlen[j];
        }
    }
    gc->argv[k] = bk->prefix_len_str;
    gc->argvlen[k++] = strlen(bk->prefix_len_str);
    if (rn_send(gc) != 0)
        group_done(g, NULL);
    rn_cmd_unref(gc);
}

/* ---------------------------------------------------------------- operations */

/* hooks.ready: a re-assertion a restart asked for goes first (reassert.c). */
static void rb_ready(void *arg, struct rn_conn *c)
{
    struct rb *bk = arg;
    ra_ready(bk->ra, c);
}

static enum lk_code rb_attach(void *state, struct lk_loop *lp)
{
    struct rb *bk = state;
    int i = loop_index(lp);
    if (i < 0 || i >= RB_MAX_LOOPS) {
        lk_log(LK_ERROR, "cannot attach loop %d to redis: more than %d loops", i, RB_MAX_LOOPS);
        return LK_INVALID;
    }
    if (bk->conns[i] != NULL)
        return LK_OK;
    static const struct rn_conn_hooks hooks = {.group = group_send, .ready = rb_ready};
    bk->conns[i] = rn_conn_new(bk->node, loop_ev(lp), &hooks, bk);
    return LK_OK;
}

static void rb_detach(void *state, struct lk_loop *lp)
{
    struct rb *bk = state;
    int i = loop_index(lp);
    if (i < 0 || i >= RB_MAX_LOOPS || bk->conns[i] == NULL)
        return;
    struct rn_conn *c = bk->conns[i];
    bk->conns[i] = NULL;
    rn_conn_free(c);
}

/* A lock operation for the caller's done(arg). */
static struct rcmd *op_new(struct rb *bk, struct rn_conn *c, enum rk kind, int script, size_t extra,
                           bk_done_fn done, void *arg)
{
    struct rcmd *cmd = cmd_new(bk, c, kind, script, extra);
    cmd->done = done;
    cmd->arg = arg;
    cmd->start_ms = lk_now_ms();
    return cmd;
}

/* The name and lease a grant of cmd would be undone with, copied into its
 * LK_PAIR_SIZE(nl, ll) extra bytes: the undo may come after the request
 * that lent them is gone. */
static void keep_undo(struct rcmd *cmd, const char *name, size_t nl, const char *lease, size_t ll)
{
    lk_pair_put(cmd->undo, name, nl, lease, ll);
    cmd->undo_name = cmd->undo;
    cmd->undo_lease = lk_pair_second(cmd->undo);
}

/* now_us: lockd's wall clock, the floor of the token (acquire.lua); Redlock
 * gives every node the same one, so nodes whose counters agree grant the
 * same token. */
static enum lk_code rb_acquire(struct rb *bk, struct rn_conn *c, const struct bk_req *a,
                               int64_t now, bk_done_fn done, void *arg)
{
    size_t nl = strlen(a->name), ll = strlen(a->lease);
    struct rcmd *cmd = op_new(bk, c, RK_ACQUIRE, SC_ACQUIRE, LK_PAIR_SIZE(nl, ll), done, arg);
    keep_undo(cmd, a->name, nl, a->lease, ll);
    cmd->ttl_ms = a->ttl_ms;
    cmd->nc.wait_replicas = bk->wait_replicas;
    struct rargs b = {0};
    char ttl[24];
    size_t tl = lk_itoa(a->ttl_ms, ttl);
    rargs_str(&b, "2");
    argb_key(&b, bk, a->name, "");
    argb_key(&b, bk, a->name, ":fence");
    /* '<w><lease>', '<sb> <ttl_ms> <owner>': the lock's value around its
     * token (acquire.lua) */
    rargs_put(&b, a->wait ? "1" : "0", 1);
    rargs_append(&b, a->lease, ll);
    rargs_put(&b, a->session_bound ? "1 " : "0 ", 2);
    rargs_append(&b, ttl, tl);
    rargs_append(&b, " ", 1);
    if (a->owner)
        rargs_append(&b, a->owner, strlen(a->owner));
    rargs_put(&b, ttl, tl);
    /* The token is at least now_us (acquire.lua): the request's floor rides
     * on it (BK_CAP_FLOOR). */
    cmd->floored = a->fence_floor >= now;
    rargs_int(&b, cmd->floored ? a->fence_floor + 1 : now);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, group_queue(cmd));
}

/* A shared hold or a semaphore's slot: acquire_shared.lua, grouped as
 * exclusive acquires are (acquire_shared_many.lua) unless readers ride on
 * it (bk_req.more) or it waits for replicas; now_us as rb_acquire's (on a
 * Redlock node rounded up, and kept per member in a group). */
static enum lk_code rb_acquire_shared(struct rb *bk, struct rn_conn *c, const struct bk_req *a,
                                      int64_t now, bk_done_fn done, void *arg)
{
    size_t nl = strlen(a->name), ll = strlen(a->lease);
    struct rcmd *cmd =
        op_new(bk, c, RK_ACQUIRE, SC_ACQUIRE_SHARED, LK_PAIR_SIZE(nl, ll), done, arg);
    keep_undo(cmd, a->name, nl, a->lease, ll); /* release.lua undoes it too */
    cmd->ttl_ms = a->ttl_ms;
    cmd->shared = true;
    cmd->slot = a->limit > 1;
    cmd->nc.wait_replicas = bk->wait_replicas;
    struct rargs b = {0};
    rargs_str(&b, "2");
    argb_key(&b, bk, a->name, "");
    argb_key(&b, bk, a->name, ":fence");
    /* '<w><lease>', '<sb> <ttl_ms> <mode> <owner>' (the holder's hash value
     * after its token; mode '0' a semaphore's slot, '1' a reader) */
    char ttl[24];
    size_t tl = lk_itoa(a->ttl_ms, ttl);
    rargs_put(&b, a->wait ? "1" : "0", 1);
    rargs_append(&b, a->lease, ll);
    rargs_put(&b, a->session_bound ? "1 " : "0 ", 2);
    rargs_append(&b, ttl, tl);
    rargs_append(&b, a->limit > 1 ? " 0 " : " 1 ", 3);
    if (a->owner)
        rargs_append(&b, a->owner, strlen(a->owner));
    rargs_put(&b, ttl, tl);
    rargs_int(&b, a->limit);
    if (bk->vote_mod > 0) /* a Redlock node: the floor up to a multiple (sh_step) */
        now += (bk->vote_mod - now % bk->vote_mod) % bk->vote_mod;
    rargs_int(&b, now); /* fencing floor, see _acquire.lua */
    /* More readers with it, all or none (bk_req.more). An undo (a grant
     * answered too late, or short of its WAIT) gives back the first lease
     * only: the others' slots free at their ttl, as a crashed holder's do. */
    for (size_t i = 0; i < a->nmore; i++) {
        rargs_str(&b, a->more[i].lease);
        rargs_str(&b, a->more[i].session_bound ? "1" : "0");
        rargs_int(&b, a->more[i].ttl_ms);
        rargs_str(&b, a->more[i].owner ? a->more[i].owner : "");
    }
    /* A Redlock node's: the vote modulus and residue, never with riders
     * (acquire_shared.lua; Redlock sends none); grouped with its floor its
     * own, the same on every node (group_send_slot; backend_redlock.c says
     * why). */
    if (bk->vote_mod > 0) {
        rargs_str(&b, bk->vote_mod_str);
        rargs_str(&b, bk->vote_res_str);
    }
    cmd->more = a->more;
    cmd->nmore = a->nmore;
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, group_queue(cmd));
}

/* A multi-lock: acquire_set.lua, one call for the whole set (never
 * grouped). With redis_wait_replicas, or names of more than one slot on a
 * cluster primary, LK_UNSUPPORTED: the engine takes the names one by one
 * (each then waits for its replicas). Each member goes in the grants table
 * with its own token (note_multi): a Redis that restarts empty gets them
 * back. */
static enum lk_code rb_acquire_multi(struct rb *bk, struct rn_conn *c, const struct bk_req *a,
                                     bk_done_fn done, void *arg)
{
    struct bk_res r;
    bool unsupported = bk->wait_replicas > 0 || a->nnames == 0;
    int slot = -1;
    for (size_t i = 0; bk->cluster && !unsupported && i < a->nnames; i++) {
        int s = redis_key_slot(a->names[i], strlen(a->names[i]));
        unsupported = slot >= 0 && s != slot;
        slot = s;
    }
    if (unsupported) {
        bk_res_init(&r, LK_UNSUPPORTED);
        done(arg, &r);
        return LK_OK;
    }
    size_t ll = strlen(a->lease), extra = ll + 1;
    for (size_t i = 0; i < a->nnames; i++)
        extra += strlen(a->names[i]) + 1;
    struct rcmd *cmd = op_new(bk, c, RK_MULTI, SC_ACQUIRE_SET, extra, done, arg);
    char *p = cmd->undo; /* our own copy: an undo may come late */
    memcpy(p, a->lease, ll + 1);
    p += ll + 1;
    for (size_t i = 0; i < a->nnames; i++) {
        size_t nl = strlen(a->names[i]) + 1;
        memcpy(p, a->names[i], nl);
        p += nl;
    }
    cmd->count = a->nnames;
    cmd->ttl_ms = a->ttl_ms;
    struct rargs b = {0};
    char ttl[24];
    size_t tl = lk_itoa(a->ttl_ms, ttl);
    rargs_int(&b, (int64_t)(2 * a->nnames));
    for (size_t i = 0; i < a->nnames; i++) {
        argb_key(&b, bk, a->names[i], "");
        argb_key(&b, bk, a->names[i], ":fence");
    }
    rargs_put(&b, a->wait ? "1" : "0", 1); /* '<w><lease>', '<sb> <ttl_ms> <owner>' */
    rargs_append(&b, a->lease, ll);
    rargs_put(&b, a->session_bound ? "1 " : "0 ", 2);
    rargs_append(&b, ttl, tl);
    rargs_append(&b, " ", 1);
    if (a->owner)
        rargs_append(&b, a->owner, strlen(a->owner));
    rargs_put(&b, ttl, tl);
    rargs_int(&b, lk_wall_us());
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

static enum lk_code rb_renew(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                             bk_done_fn done, void *arg)
{
    struct rcmd *cmd = op_new(bk, c, RK_RENEW, SC_RENEW, 0, done, arg);
    cmd->lease_ref = req->lease;
    cmd->name_ref = req->name;
    struct rargs b = {0};
    rargs_str(&b, "1");
    argb_key(&b, bk, req->name, "");
    rargs_str(&b, req->lease);
    rargs_int(&b, req->ttl_ms > 0 ? req->ttl_ms : 0);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

static enum lk_code rb_release(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                               bk_done_fn done, void *arg)
{
    struct rcmd *cmd = op_new(bk, c, RK_RELEASE, SC_RELEASE, 0, done, arg);
    cmd->lease_ref = req->lease;
    cmd->name_ref = req->name;
    cmd->delayed = req->delay_ms > 0;
    cmd->delay_ms = req->delay_ms > 0 ? req->delay_ms : 0;
    struct rargs b = {0};
    rargs_str(&b, "1");
    argb_key(&b, bk, req->name, "");
    rargs_str(&b, req->lease);
    rargs_int(&b, cmd->delay_ms);
    /* '<channel> <publisher>'. Our own release already woke our waiters: the
     * message says it is ours, so our subscriber does not wake them a second
     * time. */
    argb_channel(&b, bk, req->name);
    rargs_append(&b, " ", 1);
    rargs_append(&b, bk->instance, strlen(bk->instance));
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, group_queue(cmd));
}

/* A release that hands the name to a waiter (bk_req.handoff):
 * release_handoff.lua for one lock, grouped per loop turn as releases are
 * (GQ_HANDOFF). Its arguments (HO_ARG_*): the publisher, the acquire's as
 * rb_acquire or rb_acquire_shared puts them (so note_grant reads them at
 * the same places), its limit ('x' for an exclusive acquire) and now_us,
 * the lease released, the lease of the waiter queued right before this
 * one when it still asks ('' when none), the key prefix's length. The
 * command is the waiter's acquire for undo and the grants table, and the
 * release for note_owner_result. */
static enum lk_code rb_release_handoff(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                                       int64_t now, bk_done_fn done, void *arg)
{
    const struct bk_handoff *a = req->handoff;
    size_t nl = strlen(req->name), ll = strlen(a->lease);
    struct rcmd *cmd =
        op_new(bk, c, RK_HANDOFF, SC_RELEASE_HANDOFF, LK_PAIR_SIZE(nl, ll), done, arg);
    keep_undo(cmd, req->name, nl, a->lease, ll);
    cmd->lease_ref = req->lease;
    cmd->name_ref = req->name;
    cmd->ttl_ms = a->ttl_ms;
    cmd->shared = a->mode == BK_SHARED || a->limit > 1;
    cmd->slot = a->limit > 1;
    struct rargs b = {0};
    char ttl[24];
    size_t tl = lk_itoa(a->ttl_ms, ttl);
    rargs_str(&b, "1");
    argb_key(&b, bk, req->name, "");
    rargs_str(&b, bk->instance);
    rargs_put(&b, "1", 1); /* '<w><lease>': a waiter asks */
    rargs_append(&b, a->lease, ll);
    rargs_put(&b, a->session_bound ? "1 " : "0 ", 2);
    rargs_append(&b, ttl, tl);
    if (cmd->shared)
        rargs_append(&b, a->limit > 1 ? " 0 " : " 1 ", 3);
    else
        rargs_append(&b, " ", 1);
    if (a->owner)
        rargs_append(&b, a->owner, strlen(a->owner));
    rargs_put(&b, ttl, tl);
    if (cmd->shared)
        rargs_int(&b, a->limit);
    else
        rargs_str(&b, "x");
    rargs_int(&b, now);
    rargs_str(&b, req->lease);
    rargs_str(&b, a->after);
    rargs_str(&b, bk->prefix_len_str);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, group_queue(cmd));
}

/* Whether a release may carry its waiter's acquire here: not with WAIT
 * (the grant would need its own), a lock-delay, while a restart holds
 * grants back, or with the grants table full (then the plain release, and
 * the engine asks for the waiter as before). */
static bool handoff_ok(struct rb *bk, const struct bk_req *req)
{
    const struct bk_handoff *a = req->handoff;
    int64_t retry;
    return a != NULL && req->delay_ms <= 0 && bk->wait_replicas == 0 && a->limit >= 1 &&
           !(a->mode == BK_SHARED && a->limit > 1) && ra_gate(bk->ra, true, &retry) == LK_OK &&
           glog_room(bk->log, 1);
}

/* force_release.lua: every holder goes; never grouped, no lock-delay. */
static enum lk_code rb_force_release(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                                     bk_done_fn done, void *arg)
{
    struct rcmd *cmd = op_new(bk, c, RK_RELEASE, SC_FORCE_RELEASE, 0, done, arg);
    struct rargs b = {0};
    rargs_str(&b, "1");
    argb_key(&b, bk, req->name, "");
    argb_channel(&b, bk, req->name);
    rargs_append(&b, " ", 1);
    rargs_append(&b, bk->instance, strlen(bk->instance));
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

static enum lk_code rb_inspect(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                               bk_done_fn done, void *arg)
{
    struct rcmd *cmd = op_new(bk, c, RK_INSPECT, SC_INSPECT, 0, done, arg);
    struct rargs b = {0};
    rargs_str(&b, "2");
    argb_key(&b, bk, req->name, "");
    argb_key(&b, bk, req->name, ":fence");
    rargs_str(&b, req->wait ? "1" : "0"); /* a watcher: the next change publishes */
    if (req->fence_floor > 0)
        rargs_int(&b, req->fence_floor); /* Redlock's levelling: the counter first */
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

/* Appends s with Redis glob metacharacters escaped (the prefix is config). */
static size_t glob_escape(char *out, const char *s)
{
    size_t o = 0;
    for (; *s; s++) {
        if (strchr("*?[]\\", *s) != NULL)
            out[o++] = '\\';
        out[o++] = *s;
    }
    return o;
}

static enum lk_code rb_list(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                            bk_done_fn done, void *arg)
{
    const char *prefix = req->prefix ? req->prefix : "";
    struct redis_list_pos pos;
    bool ok = redis_list_cursor_open(bk->prefix, req->cursor, &pos);
    if (!ok || strlen(prefix) > LK_NAME_MAX) {
        struct bk_res r;
        bk_res_init(&r, ok ? LK_INVALID : LK_BAD_CURSOR);
        done(arg, &r);
        return LK_OK;
    }
    struct rcmd *cmd = op_new(bk, c, RK_LIST, SC_LIST, 0, done, arg);
    /* MATCH <prefix>{<filter>*}: ends in '}', so :fence keys never match */
    char *pat = lk_malloc(2 * bk->prefix_len + 2 * strlen(prefix) + 4);
    size_t o = glob_escape(pat, bk->prefix);
    pat[o++] = '{';
    o += glob_escape(pat + o, prefix);
    pat[o++] = '*';
    pat[o++] = '}';
    struct rargs b = {0};
    rargs_str(&b, "0");
    rargs_str(&b, pos.scan);
    rargs_str(&b, pos.stop);
    rargs_str(&b, pos.after);
    rargs_put(&b, pat, o);
    rargs_int(&b, (long long)(req->count > 0 ? req->count : 100));
    rargs_int(&b, (long long)bk->prefix_len);
    free(pat);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

static enum lk_code rb_renew_many(struct rb *bk, struct rn_conn *c, const struct bk_req *req,
                                  bk_done_fn done, void *arg)
{
    struct bk_renew_item *items = req->items;
    size_t n = req->nitems;
    struct rbatch *batch = lk_calloc(1, sizeof(*batch));
    batch->items = items;
    batch->n = n;
    batch->done = done;
    batch->arg = arg;
    batch->parts_left = 1; /* held while parts are submitted: done runs once, at the end */
    for (size_t first = 0; first < n; first += RB_BATCH) {
        size_t count = n - first < RB_BATCH ? n - first : RB_BATCH;
        struct rcmd *cmd = cmd_new(bk, c, RK_BATCH, SC_RENEW_MANY, 0);
        cmd->start_ms = lk_now_ms();
        cmd->batch = batch;
        cmd->first = first;
        cmd->count = count;
        struct rargs b = {0};
        rargs_int(&b, (long long)count);
        for (size_t i = 0; i < count; i++)
            argb_key(&b, bk, items[first + i].name, "");
        for (size_t i = 0; i < count; i++) {
            rargs_str(&b, items[first + i].lease);
            rargs_int(&b, items[first + i].ttl_ms > 0 ? items[first + i].ttl_ms : 0);
        }
        rn_cmd_take_args(&cmd->nc, &b);
        batch->parts_left++;
        (void)cmd_submit(cmd, -1);
    }
    bool at_once = batch->parts_left == 1; /* every part was answered already */
    batch_part_done(batch);
    return at_once ? LK_OK : LK_AGAIN;
}

static enum lk_code rb_ping(struct rb *bk, struct rn_conn *c, bk_done_fn done, void *arg)
{
    struct rcmd *cmd = op_new(bk, c, RK_PING, -1, 0, done, arg);
    struct rargs b = {0};
    rargs_str(&b, "ROLE"); /* answers like PING, and says whether Redis takes writes */
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

/* What this backend does not do (caps: no fence floor on a shared acquire or
 * a semaphore): the engine never sends it, but a request that carries it is
 * refused rather than half done. */
static bool unsupported(const struct bk_req *req)
{
    bool many = req->mode == BK_SHARED || req->limit > 1;
    bool group_ok = req->nmore == 0 || (req->mode == BK_SHARED && req->limit == 1);
    return req->op == BK_ACQUIRE && (req->limit < 1 || (many && req->fence_floor > 0) || !group_ok);
}

/* What a restart of the node holds back (reassert.c), and the bound on the
 * grants table: answered at once, nothing sent. */
static bool refused(struct rb *bk, const struct bk_req *req, bk_done_fn done, void *arg)
{
    if (req->op == BK_INSPECT || req->op == BK_LIST)
        return false;
    struct bk_res r;
    int64_t retry = 0;
    bool grant = req->op == BK_ACQUIRE || req->op == BK_ACQUIRE_MULTI || req->op == BK_PING;
    if (ra_gate(bk->ra, grant, &retry) != LK_OK) {
        bk_res_init(&r, LK_BACKEND_RECOVERING);
        r.delay_ms = retry;
    } else if (req->op == BK_ACQUIRE_MULTI ? !glog_room(bk->log, req->nnames)
               : req->op == BK_ACQUIRE     ? !glog_room(bk->log, 1 + req->nmore)
                                           : false) {
        /* a multi-lock or a group of readers: one record per name, per reader */
        static int64_t said_ms; /* one line a minute: a rough guard, any thread */
        int64_t now = lk_now_ms();
        if (now - __atomic_load_n(&said_ms, __ATOMIC_RELAXED) > 60000) {
            __atomic_store_n(&said_ms, now, __ATOMIC_RELAXED);
            lk_log(LK_WARN, "cannot grant more leases through redis '%s': max_locks (%zu) are live",
                   rn_node_addr(bk->node), glog_count(bk->log));
        }
        bk_res_init(&r, LK_TOO_MANY_LOCKS);
    } else {
        return false;
    }
    done(arg, &r);
    return true;
}

static enum lk_code rb_submit(void *state, struct lk_loop *lp, const struct bk_req *req,
                              bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    struct rn_conn *c = conn_of(bk, lp);
    struct bk_res r;
    ra_kick(bk->ra, c); /* a run the router asked for (ra_adopt) on a ready connection */
    if (refused(bk, req, done, arg))
        return LK_OK;
    switch (req->op) {
    case BK_ACQUIRE:
        if (unsupported(req))
            break;
        if (req->mode == BK_SHARED || req->limit > 1)
            return rb_acquire_shared(bk, c, req, lk_wall_us(), done, arg);
        return rb_acquire(bk, c, req, lk_wall_us(), done, arg);
    case BK_RENEW: return rb_renew(bk, c, req, done, arg);
    case BK_RELEASE:
        if (handoff_ok(bk, req))
            return rb_release_handoff(bk, c, req, lk_wall_us(), done, arg);
        return rb_release(bk, c, req, done, arg);
    case BK_INSPECT: return rb_inspect(bk, c, req, done, arg);
    case BK_LIST: return rb_list(bk, c, req, done, arg);
    case BK_RENEW_MANY:
        if (req->nitems == 0) {
            bk_res_init(&r, LK_OK); /* an empty batch answers at once */
            r.items = req->items;
            done(arg, &r);
            return LK_OK;
        }
        return rb_renew_many(bk, c, req, done, arg);
    case BK_PING: return rb_ping(bk, c, done, arg);
    case BK_FORCE_RELEASE: return rb_force_release(bk, c, req, done, arg);
    case BK_ACQUIRE_MULTI: return rb_acquire_multi(bk, c, req, done, arg);
    case BK_OP_COUNT: break;
    }
    bk_res_init(&r, LK_UNSUPPORTED);
    done(arg, &r);
    return LK_OK;
}

/* One node: up while every connection we have to it is up. */
static size_t rb_nodes(void *state, struct bk_node *out, size_t max)
{
    struct rb *bk = state;
    if (max == 0)
        return 0;
    memset(out, 0, sizeof(*out));
    snprintf(out->addr, sizeof(out->addr), "%.127s", rn_node_addr(bk->node));
    out->up = rn_node_status(bk->node, out->reason, sizeof(out->reason));
    out->restarts = rn_node_restarts(bk->node);
    out->recovering = ra_recovering(bk->ra);
    return 1;
}

static void rb_sweep(void *state)
{
    struct rb *bk = state;
    glog_sweep(bk->log, lk_now_ms());
}

static void rb_watch(void *state, const char *name, bool on)
{
    struct rb *bk = state;
    rps_watch(bk->ps, name, on);
}

static void rb_set_release_hook(void *state, bk_release_fn fn, void *arg)
{
    struct rb *bk = state;
    if (bk->ps != NULL)
        rps_set_hook(bk->ps, fn, arg);
}

/* ---------------------------------------------------------------- lifecycle */

static void rb_free(void *state)
{
    struct rb *bk = state;
    if (bk == NULL)
        return;
    rps_free(bk->ps); /* its connection goes first: the node outlives it */
    for (int i = 0; i < RB_MAX_LOOPS; i++)
        if (bk->conns[i] != NULL)
            lk_log(LK_ERROR, "redis backend freed with loop %d still attached", i);
    ra_free(bk->ra);
    rn_node_free(bk->node);
    for (int i = 0; i < SC_COUNT; i++)
        rn_script_fini(&bk->scripts[i]);
    free(bk->prefix);
    free(bk);
}

static const struct backend_ops rb_ops = {
    .name = "redis",
    .caps = BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE | BK_CAP_INDEX |
            BK_CAP_MULTI | BK_CAP_GROUP | BK_CAP_HANDOFF, /* floor: exclusive */
    .attach = rb_attach,
    .detach = rb_detach,
    .submit = rb_submit,
    .sweep = rb_sweep,
    .nodes = rb_nodes,
    .set_release_hook = rb_set_release_hook,
    .watch = rb_watch,
    .free = rb_free,
};

/* A script as a Redis Cluster primary runs it (new string): release
 * wake-ups go out with SPUBLISH, so a message stays on its shard (the
 * channel has the lock's hash tag: the script's own slot). (list.lua reads
 * the keys SCAN finds, of any slot of the node: every library registers
 * its function with allow-cross-slot-keys, rn_script_init.) */
static char *cluster_body(const char *body)
{
    static const char from[] = "redis.call('PUBLISH'", to[] = "redis.call('SPUBLISH'";
    size_t n = 0, len = strlen(body);
    for (const char *p = strstr(body, from); p != NULL; p = strstr(p + 1, from))
        n++;
    char *out = lk_malloc(len + n * (sizeof(to) - sizeof(from)) + 1);
    char *o = out;
    for (const char *p = body;;) {
        const char *hit = strstr(p, from);
        size_t k = hit != NULL ? (size_t)(hit - p) : strlen(p);
        memcpy(o, p, k);
        o += k;
        if (hit == NULL)
            break;
        memcpy(o, to, sizeof(to) - 1);
        o += sizeof(to) - 1;
        p = hit + sizeof(from) - 1;
    }
    *o = '\0';
    return out;
}

/* A script's body with every FENCE_RETENTION_MS replaced by ms: how long a
 * fence counter outlives its name's last grant (fence_retention_ms). A new
 * string. */
static char *fill_retention(const char *body, int64_t ms)
{
    static const char mark[] = "FENCE_RETENTION_MS";
    char num[24];
    size_t nl = lk_itoa(ms, num), ml = sizeof(mark) - 1;
    size_t cap = strlen(body) + 1, n = 0;
    for (const char *p = body; (p = strstr(p, mark)) != NULL; p += ml)
        n++;
    char *out = lk_malloc(cap + n * nl);
    char *o = out;
    const char *p = body, *q;
    while ((q = strstr(p, mark)) != NULL) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, num, nl);
        o += nl;
        p = q + ml;
    }
    memcpy(o, p, strlen(p) + 1);
    return out;
}

/* Opens one lock layer on url (redis_lock.h); backend_redis_new checks the
 * `redis` key and parses its one URL, redlock opens one per URL. */
enum lk_code redis_lock_open(const struct redis_url *url, const struct lk_config *cfg,
                             struct backend *out, char *err, size_t errlen)
{
    return redis_lock_open_cluster(url, cfg, false, out, err, errlen);
}

enum lk_code redis_lock_open_cluster(const struct redis_url *url, const struct lk_config *cfg,
                                     bool cluster, struct backend *out, char *err, size_t errlen)
{
    struct rb *bk = lk_calloc(1, sizeof(*bk));
    bk->cluster = cluster;
    lk_random_hex(bk->instance, (sizeof(bk->instance) - 1) / 2);
    bk->prefix = lk_strdup(cfg->key_prefix ? cfg->key_prefix : "");
    bk->prefix_len = strlen(bk->prefix);
    (void)lk_itoa((int64_t)bk->prefix_len, bk->prefix_len_str);
    bk->wait_replicas = cfg->redis_wait_replicas;
    /* oom: what frees or keeps a hold runs while Redis is over maxmemory
     * (allow-oom): a release or a renewal must not fail there, as an
     * EVAL's did not (its first write, a DEL or PEXPIRE, may run then); a
     * grant is refused then, as an EVAL's SET was */
    static const struct {
        const char *name;
        const char *body;
        bool oom;
    } src[SC_COUNT] = {
        [SC_ACQUIRE] = {"acquire", lk_lua_acquire, false},
        [SC_RENEW] = {"renew", lk_lua_renew, true},
        [SC_RELEASE] = {"release", lk_lua_release, true},
        [SC_INSPECT] = {"inspect", lk_lua_inspect, false},
        [SC_LIST] = {"list", lk_lua_list, false},
        [SC_RENEW_MANY] = {"renew_many", lk_lua_renew_many, true},
        [SC_ACQUIRE_MANY] = {"acquire_many", lk_lua_acquire_many, false},
        [SC_RELEASE_MANY] = {"release_many", lk_lua_release_many, true},
        [SC_FENCE_RAISE] = {"fence_raise", lk_lua_fence_raise, false},
        [SC_UNDO] = {"undo", lk_lua_undo, true},
        [SC_ACQUIRE_SHARED] = {"acquire_shared", lk_lua_acquire_shared, false},
        [SC_FORCE_RELEASE] = {"force_release", lk_lua_force_release, true},
        [SC_REASSERT] = {"reassert", lk_lua_reassert, false},
        [SC_ACQUIRE_SET] = {"acquire_set", lk_lua_acquire_set, false},
        [SC_ACQUIRE_SHARED_MANY] = {"acquire_shared_many", lk_lua_acquire_shared_many, false},
        [SC_RELEASE_HANDOFF] = {"release_handoff", lk_lua_release_handoff, false},
    };
    for (int i = 0; i < SC_COUNT; i++) {
        char *body = fill_retention(src[i].body, cfg->fence_retention_ms);
        if (cluster) {
            char *c = cluster_body(body);
            free(body);
            body = c;
        }
        rn_script_init(&bk->scripts[i], src[i].name, body, src[i].oom);
        free(body);
    }
    bk->node = rn_node_new(url, cfg->backend_timeout_ms);
    enum lk_code rc = rn_node_probe(bk->node, bk->scripts, SC_COUNT, err, errlen);
    if (rc != LK_OK)
        goto fail;
    /* A cluster primary re-asserts per slot (reassert.lua's marker and
     * grace keys in the batch's slot), and learns of a failover from the
     * router (ra_adopt), since its replica is another node. */
    bk->ra = ra_new(bk->node, cfg, bk->prefix, &bk->scripts[SC_REASSERT], cluster);
    bk->log = ra_log(bk->ra);
    bk->ps = rps_new_sharded(bk->node, bk->prefix, bk->instance, cluster);
    if (bk->ps == NULL) {
        snprintf(err, errlen, "cannot start the redis subscriber thread");
        rc = LK_INTERNAL;
        goto fail;
    }
    out->ops = &rb_ops;
    out->state = bk;
    return LK_OK;
fail:
    rb_free(bk);
    return rc;
}

struct rn_node *redis_lock_node(void *state)
{
    struct rb *bk = state;
    return bk->node;
}

struct reassert *redis_lock_reassert(void *state)
{
    struct rb *bk = state;
    return bk->ra;
}

enum lk_code redis_lock_acquire(void *state, struct lk_loop *lp, const struct bk_req *req,
                                int64_t now_us, bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    if (unsupported(req)) {
        struct bk_res r;
        bk_res_init(&r, LK_UNSUPPORTED);
        done(arg, &r);
        return LK_OK;
    }
    if (refused(bk, req, done, arg))
        return LK_OK;
    if (req->mode == BK_SHARED || req->limit > 1)
        return rb_acquire_shared(bk, conn_of(bk, lp), req, now_us, done, arg);
    return rb_acquire(bk, conn_of(bk, lp), req, now_us, done, arg);
}

void redis_lock_set_vote(void *state, int residue, int modulus)
{
    struct rb *bk = state;
    bk->vote_mod = modulus > 1 ? modulus : 0;
    bk->vote_res = residue;
    snprintf(bk->vote_mod_str, sizeof(bk->vote_mod_str), "%d", modulus);
    snprintf(bk->vote_res_str, sizeof(bk->vote_res_str), "%d", residue);
}

enum lk_code redis_lock_submit_asking(void *state, struct lk_loop *lp, const struct bk_req *req,
                                      bk_done_fn done, void *arg)
{
    rb_asking = true;
    enum lk_code rc = rb_submit(state, lp, req, done, arg);
    rb_asking = false;
    return rc;
}

enum lk_code redis_lock_fence_raise(void *state, struct lk_loop *lp, const char *name,
                                    const char *lease, int64_t token, bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    glog_token(bk->log, lease, name, token); /* what a restart re-asserts */
    struct rcmd *cmd = op_new(bk, conn_of(bk, lp), RK_FENCE, SC_FENCE_RAISE, 0, done, arg);
    struct rargs b = {0};
    rargs_str(&b, "2");
    argb_key(&b, bk, name, "");
    argb_key(&b, bk, name, ":fence");
    rargs_str(&b, lease);
    rargs_int(&b, token);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

enum lk_code redis_lock_undo(void *state, struct lk_loop *lp, const char *name, const char *lease,
                             bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    glog_drop(bk->log, lease, name); /* given back: never re-asserted */
    struct rcmd *cmd = op_new(bk, conn_of(bk, lp), RK_FENCE, SC_UNDO, 0, done, arg);
    struct rargs b = {0};
    rargs_str(&b, "1");
    argb_key(&b, bk, name, "");
    rargs_str(&b, lease);
    rn_cmd_take_args(&cmd->nc, &b);
    return cmd_submit(cmd, -1);
}

/* The one URL of backend redis (the caller wipes url: its password). */
static enum lk_code parse_one(const struct lk_config *cfg, struct redis_url *url, char *err,
                              size_t errlen)
{
    const char *urls = cfg->redis ? cfg->redis : "";
    if (urls[0] == '\0') {
        snprintf(err, errlen, "backend 'redis' needs a URL in 'redis' (redis://host:port)");
        return LK_INVALID;
    }
    if (strchr(urls, ',') != NULL) {
        snprintf(err, errlen,
                 "backend 'redis' takes one URL in 'redis'; use 'redlock' for several");
        return LK_INVALID;
    }
    return redis_url_parse(urls, url, err, errlen);
}

enum lk_code backend_redis_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    struct redis_url url;
    enum lk_code rc = parse_one(cfg, &url, err, errlen);
    memset(&url, 0, sizeof(url)); /* the password */
    return rc;
}

enum lk_code backend_redis_new(const struct lk_config *cfg, struct backend *out, char *err,
                               size_t errlen)
{
    struct redis_url url;
    enum lk_code rc = parse_one(cfg, &url, err, errlen);
    if (rc == LK_OK)
        rc = redis_lock_open(&url, cfg, out, err, errlen);
    memset(&url, 0, sizeof(url)); /* the password */
    return rc;
}
