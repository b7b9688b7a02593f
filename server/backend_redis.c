/*
 * backend_redis.c - the `redis` backend: one Redis server; every lock
 * operation is one EVALSHA of a script from server/scripts/ (EVAL on
 * NOSCRIPT), or a share of one: the acquires (releases) of one loop turn go
 * as one acquire_many.lua (release_many.lua) call, see "groups". One hiredis
 * async context per event loop (contexts are not thread safe) with many
 * requests pipelined on it, our own ev_timer deadline per command (hiredis
 * 0.14 has none), and a subscriber thread of our own for release
 * notifications. Operations run on the loop they are given; nodes(),
 * watch() and set_release_hook() may be called from any thread.
 * See DESIGN.md §3 and NOTES in the comments below.
 */
#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/hash.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/redis_int.h"
#include "server/redis_url.h"
#include "server/redis_version.h"
#include "server/sha1.h"
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

enum rk {
    RK_ACQUIRE,
    RK_RENEW,
    RK_RELEASE,
    RK_INSPECT,
    RK_LIST,
    RK_BATCH,
    RK_PING,
    RK_UNDO,
    RK_GROUP
};

struct rbatch {
    struct bk_renew_item *items;
    size_t n;
    int parts_left;
    bk_batch_fn done;
    void *arg;
};

#define RCMD_SMALL 12

/* One request in flight. hiredis keeps a pointer to it until it calls
 * on_reply (with a reply, or NULL when the context goes away), even after
 * our deadline answered the caller: `refs` counts those pending hiredis
 * callbacks and `answered` makes the caller's callback run exactly once. */
struct rcmd {
    struct rconn *conn;
    struct ev_loop *ev; /* kept apart from conn: a deferred hiredis free may outlive conn */
    struct rb *bk;
    enum rk kind;
    int script; /* SC_* or -1 for a plain command */
    int refs;
    int skip_waits; /* WAIT replies that belong to an EVALSHA that got NOSCRIPT */
    bool answered;
    bool evaled;    /* already fell back to EVAL */
    bool with_wait; /* acquire followed by WAIT in the same round trip */
    bool delayed;   /* release leaving a lock-delay: never grouped */
    bool granted;   /* acquire: the script granted; the answer waits for WAIT */
    bool wait_lost; /* acquire: its WAIT could not be queued */
    bool timing;
    ev_timer deadline;
    bk_done_fn done;
    bk_info_fn info;
    bk_list_fn list;
    void *arg;
    struct rbatch *batch;
    size_t first, count;
    struct rcmd **members; /* RK_GROUP: the operations it carries, a ref on each */
    int nmembers;
    int64_t ttl_ms;
    struct bk_reply reply;
    int argc;
    const char **argv;
    size_t *argvlen;
    char *buf;
    /* argv and argvlen of a lock operation (at most 11 arguments) live
     * here; only the watchdog's long batches take the heap. */
    const char *argv_small[RCMD_SMALL];
    size_t argvlen_small[RCMD_SMALL];
};

/* Where rb_acquire and rb_release put their arguments in a command's argv,
 * after EVALSHA sha numkeys; group_send and cmd_undo read them there. */
enum {
    ARG_LOCK = 3,      /* both: the lock's key */
    ACQ_ARG_WL = 5,    /* acquire: '<w><lease>', then rest and ttl_ms */
    ACQ_ARG_NOW = 8,   /* acquire: now_us, its last */
    REL_ARG_LEASE = 4, /* release: the lease, then delay_ms and chanpub */
};

static void cmd_settle(struct rcmd *cmd);
static void on_flush(struct ev_loop *ev, ev_prepare *p, int revents);

/* ---------------------------------------------------------------- argv */

/* Room for need bytes in b's buffer. */
static void argb_reserve(struct argb *b, size_t need)
{
    if (need > b->cap) {
        while (need > b->cap)
            b->cap = b->cap ? b->cap * 2 : 512;
        b->buf = lk_realloc(b->buf, b->cap);
    }
}

void rb_argb_put(struct argb *b, const char *s, size_t len)
{
    argb_reserve(b, b->len + len + 1);
    if (b->n == b->ncap) {
        b->ncap = b->ncap ? b->ncap * 2 : 16;
        b->off = lk_realloc(b->off, (size_t)b->ncap * sizeof(*b->off));
        b->lens = lk_realloc(b->lens, (size_t)b->ncap * sizeof(*b->lens));
    }
    memcpy(b->buf + b->len, s, len);
    b->buf[b->len + len] = '\0'; /* hiredis replies aside, keys double as C strings */
    b->off[b->n] = b->len;
    b->lens[b->n] = len;
    b->n++;
    b->len += len + 1;
}

void rb_argb_str(struct argb *b, const char *s)
{
    rb_argb_put(b, s, strlen(s));
}

/* Extends the last argument by s: one argument of several parts, which the
 * scripts take whole (each argument costs Redis a Lua string). */
static void argb_append(struct argb *b, const char *s, size_t len)
{
    argb_reserve(b, b->len + len);
    memcpy(b->buf + b->len - 1, s, len); /* over the last argument's '\0' */
    b->len += len;
    b->buf[b->len - 1] = '\0';
    b->lens[b->n - 1] += len;
}

static void argb_int(struct argb *b, long long v)
{
    char tmp[24];
    rb_argb_put(b, tmp, lk_itoa(v, tmp));
}

/* <prefix><infix>{<name>}<suffix>: every key of one lock shares the {name}
 * hash tag (infix is "" for keys, "released:" for the channel). */
static void argb_tagged(struct argb *b, const struct rb *bk, const char *infix, const char *name,
                        const char *suffix)
{
    size_t nl = strlen(name), sl = strlen(suffix), il = strlen(infix);
    char tmp[512]; /* prefix and name are bounded; larger keys take the heap */
    size_t len = bk->prefix_len + il + nl + sl + 2;
    char *k = len <= sizeof(tmp) ? tmp : lk_malloc(len);
    char *o = k;
    memcpy(o, bk->prefix, bk->prefix_len);
    o += bk->prefix_len;
    memcpy(o, infix, il);
    o += il;
    *o++ = '{';
    memcpy(o, name, nl);
    o += nl;
    *o++ = '}';
    memcpy(o, suffix, sl);
    rb_argb_put(b, k, len);
    if (k != tmp)
        free(k);
}

static void argb_key(struct argb *b, const struct rb *bk, const char *name, const char *suffix)
{
    argb_tagged(b, bk, "", name, suffix);
}

/* <prefix>released:{<name>}, the channel release.lua publishes on. */
void rb_argb_channel(struct argb *b, const struct rb *bk, const char *name)
{
    argb_tagged(b, bk, "released:", name, "");
}

/* ---------------------------------------------------------------- status */

/* Under bk->mu: the node is up while every connection to it is up. */
static bool node_state(const struct rb *bk, const char **reason)
{
    bool any = false, up = true;
    *reason = NULL;
    for (int i = 0; i < RB_MAX_LOOPS + 1; i++) {
        const struct rconn *c = i < RB_MAX_LOOPS ? bk->conns[i] : bk->sub;
        if (c == NULL)
            continue;
        any = true;
        if (!c->up && *reason == NULL) {
            up = false;
            *reason = c->reason;
        }
    }
    if (!any) {
        up = bk->startup_up;
        *reason = bk->startup_reason;
    }
    if (up && bk->role_reason[0] != '\0') {
        up = false; /* it answers, but refuses every write */
        *reason = bk->role_reason;
    }
    if (up || *reason == NULL)
        *reason = up ? "" : "down";
    return up;
}

/* Under bk->mu: what to log if the node's state changed since last logged
 * (0: nothing, 1: down, why in said, 2: up again). */
static int state_change(struct rb *bk, char *said, size_t cap)
{
    const char *why;
    bool node_up = node_state(bk, &why);
    if (node_up == bk->logged_up && (node_up || strcmp(why, bk->logged_reason) == 0))
        return 0;
    bk->logged_up = node_up;
    lk_strlcpy(bk->logged_reason, why, sizeof(bk->logged_reason));
    lk_strlcpy(said, why, cap);
    return node_up ? 2 : 1;
}

static void log_change(const struct rb *bk, int say, const char *said)
{
    if (say == 1)
        lk_log(LK_WARN, "cannot use redis '%s': %s", bk->addr, said);
    else if (say == 2)
        lk_log(LK_INFO, "redis '%s' answers again", bk->addr);
}

/* Logs the node's transitions once, not once per connection. */
static void set_status(struct rconn *c, bool up, const char *reason)
{
    struct rb *bk = c->bk;
    char said[128];
    int say = 0;
    pthread_mutex_lock(&bk->mu);
    c->up = up;
    lk_strlcpy(c->reason, reason, sizeof(c->reason));
    if (!c->closing)
        say = state_change(bk, said, sizeof(said));
    pthread_mutex_unlock(&bk->mu);
    log_change(bk, say, said);
}

/* What the readiness probe's ROLE said: "" for a master (or a role we may
 * not ask about), else why the node cannot take writes. */
static void set_role(struct rb *bk, const char *reason)
{
    char said[128];
    pthread_mutex_lock(&bk->mu);
    lk_strlcpy(bk->role_reason, reason, sizeof(bk->role_reason));
    int say = state_change(bk, said, sizeof(said));
    pthread_mutex_unlock(&bk->mu);
    log_change(bk, say, said);
}

/* hiredis says "Connection refused"; our log lines are lowercase. A word in
 * capitals is Redis' error code ("WRONGPASS invalid ...", "ERR ...") and is
 * kept as Redis wrote it: operators search for it. */
static void lower_reason(char *dst, size_t cap, const char *prefix, const char *why)
{
    snprintf(dst, cap, "%s%s", prefix, why && why[0] ? why : "unknown error");
    size_t pl = strlen(prefix);
    if (pl + 1 < cap && dst[pl] >= 'A' && dst[pl] <= 'Z' && dst[pl + 1] >= 'a' &&
        dst[pl + 1] <= 'z')
        dst[pl] = (char)(dst[pl] - 'A' + 'a');
}

/* ---------------------------------------------------------------- connections */

static uint64_t conn_rand(struct rconn *c)
{
    /* xorshift64: jitter only, needs no quality */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

/* The context is gone (or going): schedule a new one after a capped,
 * jittered exponential backoff so that many lockd processes do not reconnect
 * in lockstep after a Redis restart. */
static void conn_failed(struct rconn *c, const char *reason)
{
    c->state = RC_DOWN;
    c->ac = NULL;
    ev_timer_stop(c->ev, &c->deadline);
    set_status(c, false, reason);
    if (c->closing)
        return;
    int64_t d = RB_BACKOFF_MIN_MS;
    for (int i = 0; i < c->attempt && d < RB_BACKOFF_MAX_MS; i++)
        d *= 2;
    if (d > RB_BACKOFF_MAX_MS)
        d = RB_BACKOFF_MAX_MS;
    d = d / 2 + (int64_t)(conn_rand(c) % (uint64_t)(d / 2 + 1));
    c->attempt++;
    ev_timer_stop(c->ev, &c->retry);
    ev_timer_set(&c->retry, (double)d / 1000.0, 0.);
    ev_timer_start(c->ev, &c->retry);
}

/* Abandons the current context on our own initiative (timeout, failed AUTH).
 * A failed context is freed, never reused. Its pending callbacks run with a
 * NULL reply (now, or right after the hiredis callback we are in returns),
 * which answers their callers LK_BACKEND_DOWN. */
static void conn_drop(struct rconn *c, const char *reason)
{
    redisAsyncContext *ac = c->ac;
    if (ac == NULL)
        return;
    ac->data = NULL; /* on_connect/on_disconnect ignore it from now on */
    conn_failed(c, reason);
    redisAsyncFree(ac);
}

static void conn_ready(struct rconn *c)
{
    c->state = RC_READY;
    c->attempt = 0;
    ev_timer_stop(c->ev, &c->deadline);
    set_status(c, true, "");
    if (c->is_sub)
        rb_sub_connected(c);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    struct rconn *c = ac->data;
    if (c == NULL)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees this context right after we return */
        char why[128];
        lower_reason(why, sizeof(why), "", ac->c.errstr);
        ac->data = NULL;
        conn_failed(c, why);
        return;
    }
    (void)redisEnableKeepAlive(&ac->c);
    if (c->hello_left == 0)
        conn_ready(c);
}

static void on_disconnect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    struct rconn *c = ac->data;
    if (c == NULL)
        return;
    char why[128];
    if (status == REDIS_OK)
        snprintf(why, sizeof(why), "connection closed");
    else
        lower_reason(why, sizeof(why), "connection lost: ", ac->errstr);
    ac->data = NULL;
    conn_failed(c, why);
}

static void on_hello(redisAsyncContext *ac, void *r, void *priv)
{
    (void)priv;
    redisReply *reply = r;
    struct rconn *c = ac->data;
    if (c == NULL || reply == NULL)
        return; /* the context is going away; on_disconnect/conn_drop decided */
    if (reply->type == REDIS_REPLY_ERROR) {
        char why[128];
        bool auth = strncmp(reply->str, "WRONGPASS", 9) == 0 ||
                    strncmp(reply->str, "NOAUTH", 6) == 0 || strstr(reply->str, "AUTH") != NULL;
        lower_reason(why, sizeof(why), auth ? "auth failed: " : "", reply->str);
        conn_drop(c, why);
        return;
    }
    if (--c->hello_left == 0 && c->state == RC_CONNECTING && (ac->c.flags & REDIS_CONNECTED))
        conn_ready(c);
}

static void on_conn_deadline(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    struct rconn *c = w->data;
    conn_drop(c, "connect timed out");
}

static void on_retry(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    rb_conn_start(w->data);
}

/* Every connection authenticates and selects its database first; the
 * replies are pipelined ahead of any command queued while it connects. */
void rb_conn_start(struct rconn *c)
{
    struct rb *bk = c->bk;
    redisAsyncContext *ac = redisAsyncConnect(bk->connect_host, bk->url.port);
    if (ac == NULL) {
        conn_failed(c, "out of memory");
        return;
    }
    if (ac->err) {
        char why[128];
        lower_reason(why, sizeof(why), "", ac->errstr);
        redisAsyncFree(ac);
        conn_failed(c, why);
        return;
    }
    ac->data = c;
    if (redisLibevAttach(c->ev, ac) != REDIS_OK) {
        ac->data = NULL;
        redisAsyncFree(ac);
        conn_failed(c, "cannot attach to the event loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    c->ac = ac;
    c->state = RC_CONNECTING;
    c->hello_left = 0;
    if (bk->url.password[0] != '\0') {
        const char *argv[3] = {"AUTH", bk->url.user, bk->url.password};
        size_t lens[3] = {4, strlen(bk->url.user), strlen(bk->url.password)};
        int argc = 3;
        if (bk->url.user[0] == '\0') {
            argv[1] = bk->url.password;
            lens[1] = lens[2];
            argc = 2;
        }
        if (redisAsyncCommandArgv(ac, on_hello, NULL, argc, argv, lens) == REDIS_OK)
            c->hello_left++;
    }
    if (bk->url.db != 0 && !c->is_sub) {
        if (redisAsyncCommand(ac, on_hello, NULL, "SELECT %d", bk->url.db) == REDIS_OK)
            c->hello_left++;
    }
    /* Ready means Redis answered, not that the kernel accepted the TCP
     * connection (a hung Redis still completes handshakes). */
    if (c->hello_left == 0 && redisAsyncCommand(ac, on_hello, NULL, "PING") == REDIS_OK)
        c->hello_left++;
    ev_timer_set(&c->deadline, (double)bk->timeout_ms / 1000.0, 0.);
    ev_timer_start(c->ev, &c->deadline);
}

struct rconn *rb_conn_new(struct rb *bk, struct ev_loop *ev, bool is_sub)
{
    struct rconn *c = lk_calloc(1, sizeof(*c));
    c->bk = bk;
    c->ev = ev;
    c->is_sub = is_sub;
    c->rng = (uint64_t)lk_now_us() ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ull;
    c->up = bk->startup_up;
    lk_strlcpy(c->reason, bk->startup_reason, sizeof(c->reason));
    ev_timer_init(&c->retry, on_retry, 0., 0.);
    c->retry.data = c;
    ev_timer_init(&c->deadline, on_conn_deadline, 0., 0.);
    c->deadline.data = c;
    ev_prepare_init(&c->flush, on_flush);
    c->flush.data = c;
    ev_set_priority(&c->flush, EV_MINPRI);
    if (!is_sub)
        ev_prepare_start(ev, &c->flush);
    return c;
}

/* On the connection's own thread. Pending commands are answered
 * LK_BACKEND_DOWN while hiredis frees the context. */
void rb_conn_free(struct rconn *c)
{
    c->closing = true;
    ev_timer_stop(c->ev, &c->retry);
    ev_timer_stop(c->ev, &c->deadline);
    ev_prepare_stop(c->ev, &c->flush);
    for (int q = 0; q < GQ_COUNT; q++) {
        for (int i = 0; i < c->nqueued[q]; i++) {
            struct rcmd *cmd = c->queued[q][i];
            cmd->refs--;
            cmd_settle(cmd); /* LK_BACKEND_DOWN, as for those already sent */
        }
        c->nqueued[q] = 0;
    }
    conn_drop(c, "detached");
    free(c);
}

/* ---------------------------------------------------------------- commands */

static struct rcmd *cmd_new(struct rb *bk, struct rconn *c, enum rk kind, int script)
{
    struct rcmd *cmd = lk_calloc(1, sizeof(*cmd));
    cmd->bk = bk;
    cmd->conn = c;
    cmd->ev = c ? c->ev : NULL;
    cmd->kind = kind;
    cmd->script = script;
    return cmd;
}

/* Takes the builder's buffer. Scripts get argv[0..1] = EVALSHA sha. */
static void cmd_take_args(struct rcmd *cmd, struct argb *b)
{
    int extra = cmd->script >= 0 ? 2 : 0;
    cmd->argc = b->n + extra;
    if (cmd->argc <= RCMD_SMALL) {
        cmd->argv = cmd->argv_small;
        cmd->argvlen = cmd->argvlen_small;
    } else {
        cmd->argv = lk_malloc((size_t)cmd->argc * sizeof(*cmd->argv));
        cmd->argvlen = lk_malloc((size_t)cmd->argc * sizeof(*cmd->argvlen));
    }
    cmd->buf = b->buf;
    if (extra) {
        const struct rscript *s = &cmd->bk->scripts[cmd->script];
        cmd->argv[0] = "EVALSHA";
        cmd->argvlen[0] = 7;
        cmd->argv[1] = s->sha;
        cmd->argvlen[1] = 40;
    }
    for (int i = 0; i < b->n; i++) {
        cmd->argv[extra + i] = b->buf + b->off[i];
        cmd->argvlen[extra + i] = b->lens[i];
    }
    free(b->off);
    free(b->lens);
    memset(b, 0, sizeof(*b));
}

static void cmd_free(struct rcmd *cmd)
{
    free(cmd->members);
    if (cmd->argv != cmd->argv_small) {
        free(cmd->argv);
        free(cmd->argvlen);
    }
    free(cmd->buf);
    free(cmd);
}

static void batch_part_done(struct rbatch *b)
{
    if (--b->parts_left > 0)
        return;
    b->done(b->arg, b->items, b->n);
    free(b);
}

/* Exactly once: set before the caller's callback runs, so that neither a
 * late reply nor the deadline can call it again. */
static void cmd_mark_answered(struct rcmd *cmd)
{
    cmd->answered = true;
    if (cmd->timing) {
        ev_timer_stop(cmd->ev, &cmd->deadline);
        cmd->timing = false;
    }
}

static void cmd_answer(struct rcmd *cmd, const struct bk_reply *r)
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
    struct bk_reply r;
    memset(&r, 0, sizeof(r));
    r.code = LK_BACKEND_DOWN;
    switch (cmd->kind) {
    case RK_INSPECT: {
        cmd_mark_answered(cmd);
        struct bk_info info;
        memset(&info, 0, sizeof(info));
        info.code = LK_BACKEND_DOWN;
        cmd->info(cmd->arg, &info);
        return;
    }
    case RK_LIST:
        cmd_mark_answered(cmd);
        cmd->list(cmd->arg, LK_BACKEND_DOWN, NULL, 0, NULL);
        return;
    case RK_BATCH:
        cmd_mark_answered(cmd);
        for (size_t i = 0; i < cmd->count; i++)
            cmd->batch->items[cmd->first + i].result = LK_BACKEND_DOWN;
        batch_part_done(cmd->batch);
        return;
    default: cmd_answer(cmd, &r); return;
    }
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv);
static void on_wait(redisAsyncContext *ac, void *r, void *priv);

/* Formats argv as a RESP array into a per-thread buffer, or a heap block
 * (*heap) when large: hiredis copies it into its output buffer. Ours
 * is one pass with no allocation, where redisAsyncCommandArgv builds an sds
 * per argument. */
static char *resp_format(int argc, const char **argv, const size_t *argvlen, size_t *len,
                         bool *heap)
{
    static __thread char small[16384]; /* no heap block outlives a thread */
    size_t need = 16;
    for (int i = 0; i < argc; i++)
        need += argvlen[i] + 24;
    *heap = need > sizeof(small);
    char *buf = *heap ? lk_malloc(need) : small;
    char *p = buf;
    *p++ = '*';
    p += lk_itoa(argc, p);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        *p++ = '$';
        p += lk_itoa((int64_t)argvlen[i], p);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], argvlen[i]);
        p += argvlen[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    *len = (size_t)(p - buf);
    return buf;
}

/* hiredis sends what a loop queued when its write watcher fires, after the
 * whole loop iteration, and one iteration may park 64 requests. Writing every
 * FLUSH_EVERY commands lets Redis start on them while lockd still parses the
 * rest: about +30 % pairs/s at 64 clients (bench/RESULTS.md). A write error
 * stays in the context's err for hiredis to act on from its own write
 * callback: tearing the context down here would answer and free commands
 * whose callers are still on the stack. */
#define FLUSH_EVERY 16

static void conn_write(struct rconn *c)
{
    redisContext *rc = &c->ac->c;
    if (!(rc->flags & REDIS_CONNECTED))
        return;
    c->unflushed = 0;
    int done;
    (void)redisBufferWrite(rc, &done);
}

static void flush_early(struct rconn *c)
{
    if (++c->unflushed >= FLUSH_EVERY)
        conn_write(c);
}

/* Queues the command (and its WAIT) on the loop's context. 0 or -1. */
static int cmd_send(struct rcmd *cmd)
{
    struct rconn *c = cmd->conn;
    if (c == NULL || c->ac == NULL)
        return -1;
    size_t len;
    bool heap;
    char *resp = resp_format(cmd->argc, cmd->argv, cmd->argvlen, &len, &heap);
    int rc = redisAsyncFormattedCommand(c->ac, on_reply, cmd, resp, len);
    if (heap)
        free(resp);
    if (rc != REDIS_OK)
        return -1;
    cmd->refs++;
    if (cmd->with_wait) {
        /* WAIT answers within half our deadline, so a missing replica is
         * reported as such rather than as a timeout. */
        long long wait_ms = cmd->bk->timeout_ms / 2 > 0 ? cmd->bk->timeout_ms / 2 : 1;
        if (redisAsyncCommand(c->ac, on_wait, cmd, "WAIT %lld %lld",
                              (long long)cmd->bk->wait_replicas, wait_ms) == REDIS_OK)
            cmd->refs++;
        else
            cmd->wait_lost = true; /* a grant whose WAIT was never sent is undone */
    }
    flush_early(c); /* after the WAIT: a grant and its WAIT leave in one write */
    return 0;
}

static void on_deadline(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    struct rcmd *cmd = w->data;
    struct rconn *c = cmd->conn;
    cmd->timing = false;
    lk_log(LK_WARN, "redis '%s' did not answer within %lld ms; reconnecting", cmd->bk->addr,
           (long long)cmd->bk->timeout_ms);
    cmd_answer_down(cmd);
    /* A connection that let one command time out is suspect: replies behind
     * it would be late too. Dropping it answers every pending command. cmd
     * may be freed from here on. */
    conn_drop(c, "command timed out");
}

static void cmd_start_deadline(struct rcmd *cmd)
{
    ev_now_update(cmd->ev); /* the loop's cached time may be stale by a whole iteration */
    ev_timer_init(&cmd->deadline, on_deadline, (double)cmd->bk->timeout_ms / 1000.0, 0.);
    cmd->deadline.data = cmd;
    ev_timer_start(cmd->ev, &cmd->deadline);
    cmd->timing = true;
}

/* After the last hiredis callback, the command is freed; a caller that was
 * not answered by then gets LK_BACKEND_DOWN. */
static void cmd_settle(struct rcmd *cmd)
{
    if (cmd->refs > 0)
        return;
    if (!cmd->answered)
        cmd_answer_down(cmd);
    cmd_free(cmd);
}

/* ---------------------------------------------------------------- groups
 *
 * Under load one loop turn makes tens of acquires and releases. Each EVALSHA
 * costs Redis a fixed price (parsing it, setting up KEYS and ARGV, the reply)
 * on top of the script's own calls, so the acquires of a turn go to Redis as
 * one acquire_many.lua call, and the releases as one release_many.lua: Redis
 * instructions per acquire + release pair fall from 78,500 alone to 54,700 in
 * groups of 16, fully pipelined (bench/RESULTS.md). Each operation keeps its
 * own command, deadline and answer; the group command holds a reference on
 * each and hands it its element of the reply. A group of one goes as the
 * plain script. An acquire followed by WAIT (redis_wait_replicas) is never
 * grouped, nor is a release that leaves a lock-delay (the reaper's, rare):
 * so release_many.lua takes a lease alone per lock, and acquire_many.lua
 * builds each fence key from its lock key, one argument less per lock for
 * Redis to parse (bench/RESULTS.md). */

static int group_queue(const struct rcmd *cmd)
{
    if (cmd->kind == RK_RELEASE && !cmd->delayed)
        return GQ_RELEASE;
    if (cmd->kind == RK_ACQUIRE && !cmd->with_wait)
        return GQ_ACQUIRE;
    return -1;
}

static void group_done(struct rcmd *g, const redisReply *r);

/* Sends what queue q of c holds. Members whose deadline already answered
 * them are left out. */
static void group_send(struct rconn *c, int q)
{
    int n = 0;
    struct rcmd *m[RB_GROUP_MAX];
    for (int i = 0; i < c->nqueued[q]; i++) {
        struct rcmd *cmd = c->queued[q][i];
        if (cmd->answered) {
            cmd->refs--;
            cmd_settle(cmd);
        } else {
            m[n++] = cmd;
        }
    }
    c->nqueued[q] = 0;
    if (n == 1) {
        if (cmd_send(m[0]) != 0)
            cmd_answer_down(m[0]);
        m[0]->refs--; /* the queue's */
        cmd_settle(m[0]);
        return;
    }
    if (n == 0)
        return;
    struct rcmd *g =
        cmd_new(c->bk, c, RK_GROUP, q == GQ_ACQUIRE ? SC_ACQUIRE_MANY : SC_RELEASE_MANY);
    g->answered = true; /* nobody waits on the group itself */
    g->members = lk_malloc((size_t)n * sizeof(*g->members));
    memcpy(g->members, m, (size_t)n * sizeof(*m));
    g->nmembers = n;
    /* Members' argv (rb_acquire, rb_release):
     *   acquire  EVALSHA sha 2 lock fence wl rest ttl now_us
     *   release  EVALSHA sha 1 lock lease delay chanpub
     * The group's (acquire_many.lua, release_many.lua):
     *   acquire  EVALSHA sha n lock... now_us (wl rest ttl)...
     *   release  EVALSHA sha n lock... publisher prefix_len lease...
     * The latest member's clock is a floor for every token of the group;
     * the fence keys are '<lock>:fence', built by the script. */
    bool acq = q == GQ_ACQUIRE;
    int na = acq ? 3 : 1; /* per member after its keys */
    g->argc = 3 + n * (1 + na) + (acq ? 1 : 2);
    g->argv = lk_malloc((size_t)g->argc * sizeof(*g->argv));
    g->argvlen = lk_malloc((size_t)g->argc * sizeof(*g->argvlen));
    g->buf = lk_malloc(24);
    const struct rscript *s = &c->bk->scripts[g->script];
    g->argv[0] = "EVALSHA";
    g->argvlen[0] = 7;
    g->argv[1] = s->sha;
    g->argvlen[1] = 40;
    g->argv[2] = g->buf;
    g->argvlen[2] = lk_itoa((int64_t)n, g->buf);
    int k = 3;
    for (int i = 0; i < n; i++) {
        g->argv[k] = m[i]->argv[ARG_LOCK];
        g->argvlen[k++] = m[i]->argvlen[ARG_LOCK];
    }
    if (acq) {
        g->argv[k] = m[n - 1]->argv[ACQ_ARG_NOW];
        g->argvlen[k++] = m[n - 1]->argvlen[ACQ_ARG_NOW];
    } else {
        g->argv[k] = c->bk->instance;
        g->argvlen[k++] = strlen(c->bk->instance);
        g->argv[k] = c->bk->prefix_len_str;
        g->argvlen[k++] = strlen(c->bk->prefix_len_str);
    }
    int first = acq ? ACQ_ARG_WL : REL_ARG_LEASE;
    for (int i = 0; i < n; i++) {
        for (int j = first; j < first + na; j++) {
            g->argv[k] = m[i]->argv[j];
            g->argvlen[k++] = m[i]->argvlen[j];
        }
    }
    if (cmd_send(g) != 0) {
        group_done(g, NULL);
        cmd_free(g);
    }
}

/* Before the loop sleeps, after the HTTP layer's own prepare watcher (which
 * may run requests that were waiting on the backend). Callers answered here
 * (a send that failed) may queue more: nothing is left queued for a loop
 * that might then sleep. */
static void on_flush(struct ev_loop *ev, ev_prepare *p, int revents)
{
    (void)ev;
    (void)revents;
    struct rconn *c = p->data;
    bool sent;
    do {
        sent = false;
        for (int q = 0; q < GQ_COUNT; q++) {
            if (c->nqueued[q] > 0) {
                group_send(c, q);
                sent = true;
            }
        }
    } while (sent);
}

/* Sends the command, or queues it for its group, or answers LK_BACKEND_DOWN
 * at once when the loop's connection is down (between reconnects): the
 * caller gets its 503 now rather than after a deadline. */
static enum lk_code cmd_submit(struct rcmd *cmd)
{
    struct rconn *c = cmd->conn;
    int q = group_queue(cmd);
    if (q < 0 || c == NULL || c->ac == NULL) {
        if (cmd_send(cmd) != 0) {
            cmd_answer_down(cmd);
            cmd_free(cmd);
            return LK_OK;
        }
        if (!cmd->answered)
            cmd_start_deadline(cmd);
        return LK_AGAIN;
    }
    cmd->refs += 2; /* the queue's, and ours while a full queue is sent */
    c->queued[q][c->nqueued[q]++] = cmd;
    cmd_start_deadline(cmd);
    if (c->nqueued[q] == RB_GROUP_MAX) {
        group_send(c, q);
        if (c->ac != NULL)
            conn_write(c); /* Redis starts on it while we parse the rest */
    }
    if (--cmd->refs == 0) { /* its group could not be sent: nothing else holds it */
        if (!cmd->answered)
            cmd_answer_down(cmd);
        cmd_free(cmd);
        return LK_OK;
    }
    return cmd->answered ? LK_OK : LK_AGAIN;
}

/* ---------------------------------------------------------------- replies */

bool rb_is_array(const redisReply *r, size_t min)
{
    return r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

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

/* A token as the scripts answer it: a string of 1 to 18 digits, above 0.
 * Anything else (a script that went wrong) is no answer: never a grant. */
static bool rtoken(const redisReply *e, int64_t *out)
{
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < e->len; i++) {
        if (e->str[i] < '0' || e->str[i] > '9')
            return false;
        v = v * 10 + (e->str[i] - '0');
    }
    *out = v;
    return v > 0;
}

static bool rtrue(const redisReply *e)
{
    return rint64(e) != 0;
}

/* el[0..3] = owner, token, sb, pttl */
static void holder_from(redisReply **el, struct bk_holder *h)
{
    memset(h, 0, sizeof(*h));
    if (el[0]->type == REDIS_REPLY_STRING)
        snprintf(h->owner, sizeof(h->owner), "%.*s", (int)el[0]->len, el[0]->str);
    h->fencing_token = rint64(el[1]);
    h->session_bound = rtrue(el[2]);
    int64_t p = rint64(el[3]);
    h->expires_in_ms = p > 0 ? p : 0;
}

/* Status {0} / {2, holder...} shared by renew and release. */
static bool owner_result(const redisReply *r, struct bk_reply *out)
{
    int64_t st = rint64(r->element[0]);
    if (st == 0) {
        out->code = LK_NOT_HELD;
        return true;
    }
    if (st == 2 && r->elements >= 5) {
        out->code = LK_HELD_BY_OTHER;
        holder_from(r->element + 1, &out->holder);
        return true;
    }
    return false;
}

static void cmd_undo(struct rcmd *acq);

static void handle_acquire(struct rcmd *cmd, const redisReply *r)
{
    struct bk_reply out;
    memset(&out, 0, sizeof(out));
    /* a grant is the token alone, as a string; a refusal is an array */
    if (r->type == REDIS_REPLY_STRING) {
        if (cmd->answered || cmd->wait_lost || !rtoken(r, &out.fencing_token)) {
            /* Nobody will ever use this grant (the caller already got 503,
             * or the answer is not a token): give it back now rather than at
             * its TTL. */
            cmd_undo(cmd);
            if (!cmd->answered)
                cmd_answer_down(cmd);
            return;
        }
        out.code = LK_OK;
        out.ttl_ms = cmd->ttl_ms;
        if (cmd->with_wait) {
            cmd->reply = out; /* answered when WAIT says enough replicas have it */
            cmd->granted = true;
            return;
        }
        cmd_answer(cmd, &out);
        return;
    }
    if (!rb_is_array(r, 1))
        return;
    int64_t st = rint64(r->element[0]);
    if (st == 0 && r->elements >= 5) {
        out.code = LK_LOCKED;
        holder_from(r->element + 1, &out.holder);
        cmd_answer(cmd, &out);
    } else if (st == 2 && r->elements >= 2) {
        out.code = LK_LOCKED;
        out.holder.lock_delay = true;
        out.holder.expires_in_ms = rint64(r->element[1]);
        cmd_answer(cmd, &out);
    }
}

static void handle_renew_release(struct rcmd *cmd, const redisReply *r)
{
    struct bk_reply out;
    memset(&out, 0, sizeof(out));
    if (cmd->kind == RK_RELEASE && r->type == REDIS_REPLY_STRING) {
        if (rtoken(r, &out.fencing_token)) {
            out.code = LK_OK; /* released: the token alone, as a string */
            cmd_answer(cmd, &out);
        }
        return;
    }
    if (!rb_is_array(r, 1))
        return;
    if (rint64(r->element[0]) == 1 && r->elements >= 2) {
        out.code = LK_OK;
        out.fencing_token = rint64(r->element[1]);
        if (cmd->kind == RK_RENEW && r->elements >= 3)
            out.ttl_ms = rint64(r->element[2]);
        cmd_answer(cmd, &out);
    } else if (owner_result(r, &out)) {
        cmd_answer(cmd, &out);
    }
}

static void handle_inspect(struct rcmd *cmd, const redisReply *r)
{
    struct bk_info info;
    memset(&info, 0, sizeof(info));
    if (!rb_is_array(r, 1))
        return;
    int64_t st = rint64(r->element[0]);
    if (st == 1 && r->elements >= 5) {
        info.held = true;
        holder_from(r->element + 1, &info.holder);
    } else if (st == 2 && r->elements >= 2) {
        info.holder.lock_delay = true;
        info.holder.expires_in_ms = rint64(r->element[1]);
    } else if (st != 0) {
        return;
    }
    info.code = LK_OK;
    cmd_mark_answered(cmd);
    cmd->info(cmd->arg, &info);
}

static void handle_list(struct rcmd *cmd, const redisReply *r)
{
    if (!rb_is_array(r, 1) || r->element[0]->type != REDIS_REPLY_STRING)
        return;
    size_t n = (r->elements - 1) / 5;
    struct bk_entry *ents = lk_calloc(n ? n : 1, sizeof(*ents));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply **el = r->element + 1 + 5 * i;
        if (el[0]->type != REDIS_REPLY_STRING)
            continue;
        ents[k].name = el[0]->str; /* valid while the reply lives: during the callback */
        holder_from(el + 1, &ents[k].holder);
        k++;
    }
    const char *next = strcmp(r->element[0]->str, "0") == 0 ? NULL : r->element[0]->str;
    cmd_mark_answered(cmd);
    cmd->list(cmd->arg, LK_OK, ents, k, next);
    free(ents);
}

static void handle_batch(struct rcmd *cmd, const redisReply *r)
{
    if (!rb_is_array(r, cmd->count))
        return;
    for (size_t i = 0; i < cmd->count; i++) {
        int64_t v = rint64(r->element[i]);
        cmd->batch->items[cmd->first + i].result = v == 1   ? LK_OK
                                                   : v == 2 ? LK_HELD_BY_OTHER
                                                            : LK_NOT_HELD;
    }
    cmd_mark_answered(cmd);
    batch_part_done(cmd->batch);
}

static void log_error_reply(struct rcmd *cmd, const redisReply *r);

/* The readiness probe is ROLE, not PING: a replica (REPLICAOF, or a master
 * demoted by a failover) answers PING but refuses every write, so every
 * acquire would be a 503 while /readyz said ready. */
static void handle_ping(struct rcmd *cmd, const redisReply *r)
{
    if (r->type == REDIS_REPLY_ERROR) {
        /* An ACL user without +role, or a Redis older than 2.8.12: Redis
         * answered and its role is unknown; the writes themselves will say. */
        if (strncmp(r->str, "NOPERM", 6) != 0 && strncmp(r->str, "ERR unknown command", 19) != 0) {
            log_error_reply(cmd, r);
            return;
        }
    } else if (rb_is_array(r, 1) && r->element[0]->type == REDIS_REPLY_STRING) {
        const char *role = r->element[0]->str;
        if (strcmp(role, "master") != 0) {
            char why[64];
            if (strcmp(role, "slave") == 0 || strcmp(role, "replica") == 0)
                snprintf(why, sizeof(why), "redis is a read-only replica");
            else
                snprintf(why, sizeof(why), "redis is a %.20s, not a master", role);
            set_role(cmd->bk, why);
            return; /* unanswered: cmd_settle answers LK_BACKEND_DOWN */
        }
        set_role(cmd->bk, "");
    } else {
        return;
    }
    struct bk_reply out;
    memset(&out, 0, sizeof(out));
    out.code = LK_OK;
    cmd_answer(cmd, &out);
}

/* Dispatches a reply; a reply it cannot use leaves the command unanswered,
 * and cmd_settle then answers LK_BACKEND_DOWN. */
static void cmd_handle(struct rcmd *cmd, const redisReply *r)
{
    if (r == NULL || (r->type == REDIS_REPLY_ERROR && cmd->kind != RK_PING))
        return;
    if (cmd->answered && cmd->kind != RK_ACQUIRE)
        return;
    switch (cmd->kind) {
    case RK_ACQUIRE: handle_acquire(cmd, r); break;
    case RK_RENEW:
    case RK_RELEASE: handle_renew_release(cmd, r); break;
    case RK_INSPECT: handle_inspect(cmd, r); break;
    case RK_LIST: handle_list(cmd, r); break;
    case RK_BATCH: handle_batch(cmd, r); break;
    case RK_PING: handle_ping(cmd, r); break;
    case RK_UNDO:
    case RK_GROUP: break; /* group_done() */
    }
}

/* Hands each member of a group its element of the reply. A member without
 * one is answered LK_BACKEND_DOWN: the reply is NULL (the connection went)
 * or an error, or its own element is an error. When Redis did answer, such
 * an acquire is also undone, compare-and-delete with its own lease: what
 * ran of the script may have granted it. */
static void group_done(struct rcmd *g, const redisReply *r)
{
    bool ok = rb_is_array(r, (size_t)g->nmembers);
    for (int i = 0; i < g->nmembers; i++) {
        struct rcmd *m = g->members[i];
        const redisReply *e = ok ? r->element[i] : NULL;
        m->refs--;
        if (e != NULL && e->type == REDIS_REPLY_ERROR) {
            log_error_reply(m, e);
            e = NULL;
        }
        if (e == NULL && r != NULL && m->kind == RK_ACQUIRE)
            cmd_undo(m);
        cmd_handle(m, e);
        cmd_settle(m);
    }
    g->nmembers = 0;
}

static void log_error_reply(struct rcmd *cmd, const redisReply *r)
{
    struct rconn *c = cmd->conn;
    int64_t now = lk_now_ms();
    if (now - c->last_err_log_ms < 1000)
        return; /* one line a second per connection, not one per request */
    c->last_err_log_ms = now;
    lk_log(LK_WARN, "redis '%s' refused a command: %.*s", cmd->bk->addr, (int)r->len, r->str);
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct rcmd *cmd = priv;
    redisReply *reply = r;
    cmd->refs--;
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR && cmd->kind != RK_PING) {
        if (cmd->script >= 0 && !cmd->evaled && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
            /* Redis lost its script cache (restart, SCRIPT FLUSH): send the
             * body once; EVAL caches it again for everyone's next EVALSHA. */
            const struct rscript *s = &cmd->bk->scripts[cmd->script];
            cmd->evaled = true;
            cmd->argv[0] = "EVAL";
            cmd->argvlen[0] = 4;
            cmd->argv[1] = s->body;
            cmd->argvlen[1] = s->len;
            if (cmd->with_wait)
                cmd->skip_waits++; /* the WAIT already queued follows the failed EVALSHA */
            if (cmd_send(cmd) == 0)
                goto out;
        } else {
            log_error_reply(cmd, reply);
        }
        if (cmd->kind != RK_GROUP)
            reply = NULL;
    }
    if (cmd->kind == RK_GROUP)
        group_done(cmd, reply);
    else
        cmd_handle(cmd, reply);
out:
    cmd_settle(cmd);
}

static void on_wait(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct rcmd *cmd = priv;
    redisReply *reply = r;
    cmd->refs--;
    if (cmd->skip_waits > 0) {
        cmd->skip_waits--;
    } else if (cmd->granted && !cmd->answered) {
        if (reply != NULL && reply->type == REDIS_REPLY_INTEGER &&
            reply->integer >= cmd->bk->wait_replicas) {
            cmd_answer(cmd, &cmd->reply);
        } else {
            /* A failover to a replica that lacks this grant would hand the
             * lock to someone else: undo it (compare-and-delete) and 503. */
            if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
                lk_log(LK_WARN, "grant reached %lld of %lld replicas in time; undone",
                       (long long)reply->integer, (long long)cmd->bk->wait_replicas);
            cmd_undo(cmd);
            cmd_answer_down(cmd);
        }
    }
    cmd_settle(cmd);
}

/* Releases the grant an acquire command just made (release.lua with the
 * same lease: compare-and-delete, so never someone else's lock). Nobody
 * waits for the answer; if it is lost, the lease expires at its TTL. */
static void cmd_undo(struct rcmd *acq)
{
    struct rb *bk = acq->bk;
    /* the acquire's argv (ARG_LOCK, ACQ_ARG_WL), as rb_acquire laid it out */
    const char *lock = acq->argv[ARG_LOCK];
    size_t lock_len = acq->argvlen[ARG_LOCK];
    char name[LK_NAME_MAX + 1];
    size_t nlen = lock_len - bk->prefix_len - 2;
    if (nlen > LK_NAME_MAX)
        return;
    memcpy(name, lock + bk->prefix_len + 1, nlen);
    name[nlen] = '\0';
    struct rcmd *u = cmd_new(bk, acq->conn, RK_UNDO, SC_RELEASE);
    u->answered = true;
    struct argb b = {0};
    rb_argb_str(&b, "1");
    rb_argb_put(&b, lock, lock_len);
    rb_argb_put(&b, acq->argv[ACQ_ARG_WL] + 1, acq->argvlen[ACQ_ARG_WL] - 1); /* '<w><lease>' */
    rb_argb_str(&b, "0");
    /* nobody's id: our own waiters learn of it this way too (it publishes
     * when any waiter was refused by the grant undone, see acquire.lua) */
    rb_argb_channel(&b, bk, name);
    argb_append(&b, " -", 2);
    cmd_take_args(u, &b);
    (void)cmd_submit(u);
}

/* ---------------------------------------------------------------- operations */

static struct rconn *conn_of(struct rb *bk, struct lk_loop *lp)
{
    int i = loop_index(lp);
    if (i < 0 || i >= RB_MAX_LOOPS)
        return NULL;
    return bk->conns[i]; /* written only by this same thread (attach/detach) */
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
    struct rconn *c = rb_conn_new(bk, loop_ev(lp), false);
    pthread_mutex_lock(&bk->mu);
    bk->conns[i] = c;
    pthread_mutex_unlock(&bk->mu);
    rb_conn_start(c);
    return LK_OK;
}

static void rb_detach(void *state, struct lk_loop *lp)
{
    struct rb *bk = state;
    int i = loop_index(lp);
    if (i < 0 || i >= RB_MAX_LOOPS || bk->conns[i] == NULL)
        return;
    struct rconn *c = bk->conns[i];
    pthread_mutex_lock(&bk->mu);
    bk->conns[i] = NULL;
    pthread_mutex_unlock(&bk->mu);
    rb_conn_free(c);
}

static enum lk_code rb_acquire(void *state, struct lk_loop *lp, const struct bk_acquire *a,
                               bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_ACQUIRE, SC_ACQUIRE);
    cmd->done = done;
    cmd->arg = arg;
    cmd->ttl_ms = a->ttl_ms;
    cmd->with_wait = bk->wait_replicas > 0;
    struct argb b = {0};
    char ttl[24];
    size_t tl = lk_itoa(a->ttl_ms, ttl);
    rb_argb_str(&b, "2");
    argb_key(&b, bk, a->name, "");
    argb_key(&b, bk, a->name, ":fence");
    /* '<w><lease>', '<sb> <ttl_ms> <owner>': the lock's value around its
     * token (acquire.lua) */
    rb_argb_put(&b, a->wait ? "1" : "0", 1);
    argb_append(&b, a->lease, strlen(a->lease));
    rb_argb_put(&b, a->session_bound ? "1 " : "0 ", 2);
    argb_append(&b, ttl, tl);
    argb_append(&b, " ", 1);
    if (a->owner)
        argb_append(&b, a->owner, strlen(a->owner));
    rb_argb_put(&b, ttl, tl);
    argb_int(&b, lk_wall_us()); /* fencing floor, see acquire.lua */
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
}

static enum lk_code rb_renew(void *state, struct lk_loop *lp, const char *name, const char *lease,
                             int64_t ttl_ms, bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_RENEW, SC_RENEW);
    cmd->done = done;
    cmd->arg = arg;
    struct argb b = {0};
    rb_argb_str(&b, "1");
    argb_key(&b, bk, name, "");
    rb_argb_str(&b, lease);
    argb_int(&b, ttl_ms > 0 ? ttl_ms : 0);
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
}

static enum lk_code rb_release(void *state, struct lk_loop *lp, const char *name, const char *lease,
                               int64_t delay_ms, bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_RELEASE, SC_RELEASE);
    cmd->done = done;
    cmd->arg = arg;
    cmd->delayed = delay_ms > 0;
    struct argb b = {0};
    rb_argb_str(&b, "1");
    argb_key(&b, bk, name, "");
    rb_argb_str(&b, lease);
    argb_int(&b, delay_ms > 0 ? delay_ms : 0);
    /* '<channel> <publisher>'. Our own release already woke our waiters: the
     * message says it is ours, so our subscriber does not wake them a second
     * time. */
    rb_argb_channel(&b, bk, name);
    argb_append(&b, " ", 1);
    argb_append(&b, bk->instance, strlen(bk->instance));
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
}

static enum lk_code rb_inspect(void *state, struct lk_loop *lp, const char *name, bk_info_fn done,
                               void *arg)
{
    struct rb *bk = state;
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_INSPECT, SC_INSPECT);
    cmd->info = done;
    cmd->arg = arg;
    struct argb b = {0};
    rb_argb_str(&b, "1");
    argb_key(&b, bk, name, "");
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
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

static enum lk_code rb_list(void *state, struct lk_loop *lp, const char *prefix, const char *cursor,
                            size_t limit, bk_list_fn done, void *arg)
{
    struct rb *bk = state;
    const char *cur = cursor && cursor[0] ? cursor : "0";
    /* The cursor is '<SCAN cursor>', or '<SCAN cursor>:<span end>:<name>'
     * when a page ended inside one SCAN call (list.lua). SCAN cursors are
     * unsigned 64-bit numbers: anything else is the client's mistake (400),
     * not a Redis error (503). */
    char scan[21], stop[21] = "";
    size_t cl = scan_cursor(cur, scan);
    const char *after = "";
    bool ok = cl > 0 && cur[cl] == '\0';
    if (cl > 0 && cur[cl] == ':') {
        size_t sl = scan_cursor(cur + cl + 1, stop);
        if (sl > 0 && cur[cl + 1 + sl] == ':') {
            after = cur + cl + 1 + sl + 1;
            ok = *after && lk_name_valid(after, strlen(after));
        }
    }
    if (!ok || strlen(prefix) > LK_NAME_MAX) {
        done(arg, LK_INVALID, NULL, 0, NULL);
        return LK_OK;
    }
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_LIST, SC_LIST);
    cmd->list = done;
    cmd->arg = arg;
    /* MATCH <prefix>{<filter>*}: ends in '}', so :fence keys never match */
    char *pat = lk_malloc(2 * bk->prefix_len + 2 * strlen(prefix) + 4);
    size_t o = glob_escape(pat, bk->prefix);
    pat[o++] = '{';
    o += glob_escape(pat + o, prefix);
    pat[o++] = '*';
    pat[o++] = '}';
    struct argb b = {0};
    rb_argb_str(&b, "0");
    rb_argb_str(&b, scan);
    rb_argb_str(&b, stop);
    rb_argb_str(&b, after);
    rb_argb_put(&b, pat, o);
    argb_int(&b, (long long)(limit > 0 ? limit : 100));
    argb_int(&b, (long long)bk->prefix_len);
    free(pat);
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
}

static enum lk_code rb_renew_many(void *state, struct lk_loop *lp, struct bk_renew_item *items,
                                  size_t n, bk_batch_fn done, void *arg)
{
    struct rb *bk = state;
    if (n == 0) {
        done(arg, items, 0);
        return LK_OK;
    }
    struct rconn *c = conn_of(bk, lp);
    struct rbatch *batch = lk_calloc(1, sizeof(*batch));
    batch->items = items;
    batch->n = n;
    batch->done = done;
    batch->arg = arg;
    batch->parts_left = 1; /* held while parts are submitted: done runs once, at the end */
    for (size_t first = 0; first < n; first += RB_BATCH) {
        size_t count = n - first < RB_BATCH ? n - first : RB_BATCH;
        struct rcmd *cmd = cmd_new(bk, c, RK_BATCH, SC_RENEW_MANY);
        cmd->batch = batch;
        cmd->first = first;
        cmd->count = count;
        struct argb b = {0};
        argb_int(&b, (long long)count);
        for (size_t i = 0; i < count; i++)
            argb_key(&b, bk, items[first + i].name, "");
        for (size_t i = 0; i < count; i++) {
            rb_argb_str(&b, items[first + i].lease);
            argb_int(&b, items[first + i].ttl_ms > 0 ? items[first + i].ttl_ms : 0);
        }
        cmd_take_args(cmd, &b);
        batch->parts_left++;
        (void)cmd_submit(cmd);
    }
    if (batch->parts_left == 1) {
        batch_part_done(batch); /* every part was answered at once: done has run */
        return LK_OK;
    }
    batch_part_done(batch);
    return LK_AGAIN;
}

static enum lk_code rb_ping(void *state, struct lk_loop *lp, bk_done_fn done, void *arg)
{
    struct rb *bk = state;
    struct rcmd *cmd = cmd_new(bk, conn_of(bk, lp), RK_PING, -1);
    cmd->done = done;
    cmd->arg = arg;
    struct argb b = {0};
    rb_argb_str(&b, "ROLE"); /* answers like PING, and says whether Redis takes writes */
    cmd_take_args(cmd, &b);
    return cmd_submit(cmd);
}

/* One node: up while every connection we have to it is up. */
static size_t rb_nodes(void *state, struct bk_node *out, size_t max)
{
    struct rb *bk = state;
    if (max == 0)
        return 0;
    memset(out, 0, sizeof(*out));
    snprintf(out->addr, sizeof(out->addr), "%.127s", bk->addr);
    pthread_mutex_lock(&bk->mu);
    const char *why;
    out->up = node_state(bk, &why);
    lk_strlcpy(out->reason, why, sizeof(out->reason));
    pthread_mutex_unlock(&bk->mu);
    return 1;
}

/* ---------------------------------------------------------------- lifecycle */

static void rb_free(void *state)
{
    struct rb *bk = state;
    if (bk == NULL)
        return;
    if (bk->sub_running) {
        loop_post(bk->sub_lp, rb_sub_fini, bk);
        pthread_join(bk->sub_th, NULL);
    }
    if (bk->sub_lp != NULL)
        loop_free(bk->sub_lp);
    for (int i = 0; i < RB_MAX_LOOPS; i++)
        if (bk->conns[i] != NULL)
            lk_log(LK_ERROR, "redis backend freed with loop %d still attached", i);
    pthread_mutex_destroy(&bk->mu);
    free(bk->prefix);
    free(bk);
}

static const struct backend_ops rb_ops = {
    .name = "redis",
    .attach = rb_attach,
    .detach = rb_detach,
    .acquire = rb_acquire,
    .renew = rb_renew,
    .release = rb_release,
    .inspect = rb_inspect,
    .list = rb_list,
    .renew_many = rb_renew_many,
    .ping = rb_ping,
    .nodes = rb_nodes,
    .set_release_hook = rb_set_release_hook,
    .watch = rb_watch,
    .free = rb_free,
};

/* Resolves the host once, here on the main thread: hiredis 0.14 resolves
 * names with a blocking getaddrinfo, which must not run on a loop thread at
 * every reconnect. A name that does not resolve yet is kept (resolved then). */
static void resolve_host(struct rb *bk)
{
    lk_strlcpy(bk->connect_host, bk->url.host, sizeof(bk->connect_host));
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(bk->url.host, NULL, &hints, &res) != 0 || res == NULL) {
        lk_log(LK_WARN, "cannot resolve redis host '%s' yet; will retry on connect", bk->url.host);
        return;
    }
    char tmp[INET6_ADDRSTRLEN];
    const void *a = res->ai_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)(void *)res->ai_addr)->sin6_addr;
    if (inet_ntop(res->ai_family, a, tmp, sizeof(tmp)) != NULL)
        lk_strlcpy(bk->connect_host, tmp, sizeof(bk->connect_host));
    freeaddrinfo(res);
}

/* Startup checks with a blocking connection (main thread, before serving).
 * Bad credentials or database are configuration errors (LK_INVALID, exit 2);
 * an unreachable Redis is not: lockd starts, /readyz says 503 with the
 * reason, and the loops' connections keep retrying. */
static enum lk_code startup_probe(struct rb *bk, char *err, size_t errlen)
{
    struct timeval tv = {(time_t)(bk->timeout_ms / 1000),
                         (suseconds_t)(bk->timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(bk->connect_host, bk->url.port, tv);
    enum lk_code rc = LK_OK;
    redisReply *r = NULL;
    if (c == NULL || c->err) {
        lower_reason(bk->startup_reason, sizeof(bk->startup_reason), "",
                     c ? c->errstr : "out of memory");
        lk_log(LK_WARN, "cannot connect to '%s': %s; starting anyway, not ready until it answers",
               bk->addr, bk->startup_reason);
        goto out;
    }
    (void)redisSetTimeout(c, tv);
    if (bk->url.password[0] != '\0') {
        if (bk->url.user[0] != '\0')
            r = redisCommand(c, "AUTH %s %s", bk->url.user, bk->url.password);
        else
            r = redisCommand(c, "AUTH %s", bk->url.password);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "cannot authenticate to redis '%s'%s%s%s: %s", bk->addr,
                     bk->url.user[0] ? " as '" : "", bk->url.user, bk->url.user[0] ? "'" : "",
                     r->str);
            rc = LK_INVALID;
            goto out;
        }
        freeReplyObject(r);
        r = NULL;
    }
    if (bk->url.db != 0) {
        r = redisCommand(c, "SELECT %d", bk->url.db);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "cannot select database %d on redis '%s': %s", bk->url.db,
                     bk->addr, r->str);
            rc = LK_INVALID;
            goto out;
        }
        freeReplyObject(r);
        r = NULL;
    }
    /* An old Redis answers every acquire with a script error: say so once,
     * here. A user without +info is not judged. */
    r = redisCommand(c, "INFO server");
    if (r == NULL)
        goto io_error;
    if (r->type == REDIS_REPLY_STRING) {
        char version[32];
        if (!redis_version_ok(r->str, version, sizeof(version))) {
            snprintf(err, errlen, "redis '%s' is version %s; lockd needs %d.%d or newer", bk->addr,
                     version, REDIS_MIN_MAJOR, REDIS_MIN_MINOR);
            rc = LK_INVALID;
            goto out;
        }
    }
    freeReplyObject(r);
    r = NULL;
    for (int i = 0; i < SC_COUNT; i++) {
        const struct rscript *s = &bk->scripts[i];
        r = redisCommand(c, "SCRIPT LOAD %b", s->body, s->len);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            if (strncmp(r->str, "NOAUTH", 6) == 0) {
                snprintf(err, errlen,
                         "redis '%s' requires a password: use redis://[user:]password@host:port",
                         bk->addr);
                rc = LK_INVALID;
            } else if (strncmp(r->str, "ERR Error compiling", 19) == 0) {
                snprintf(err, errlen, "redis '%s' rejected script %s.lua: %s", bk->addr, s->name,
                         r->str);
                rc = LK_INTERNAL;
            } else {
                lower_reason(bk->startup_reason, sizeof(bk->startup_reason), "", r->str);
                lk_log(LK_WARN, "cannot load scripts into '%s': %s; starting anyway", bk->addr,
                       r->str);
            }
            goto out;
        }
        if (r->type != REDIS_REPLY_STRING || strcmp(r->str, s->sha) != 0) {
            snprintf(err, errlen, "redis '%s' named script %s.lua differently than lockd", bk->addr,
                     s->name);
            rc = LK_INTERNAL;
            goto out;
        }
        freeReplyObject(r);
        r = NULL;
    }
    bk->startup_up = true;
    bk->startup_reason[0] = '\0';
    goto out;
io_error:
    lower_reason(bk->startup_reason, sizeof(bk->startup_reason), "", c->errstr);
    lk_log(LK_WARN, "cannot talk to redis '%s': %s; starting anyway", bk->addr, bk->startup_reason);
out:
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    return rc;
}

enum lk_code backend_redis_new(const struct lk_config *cfg, struct backend *out, char *err,
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
    struct rb *bk = lk_calloc(1, sizeof(*bk));
    pthread_mutex_init(&bk->mu, NULL);
    lk_random_hex(bk->instance, (sizeof(bk->instance) - 1) / 2);
    enum lk_code rc = redis_url_parse(urls, &bk->url, err, errlen);
    if (rc != LK_OK)
        goto fail;
    bool v6 = strchr(bk->url.host, ':') != NULL;
    snprintf(bk->addr, sizeof(bk->addr), "%s%s%s:%d", v6 ? "[" : "", bk->url.host, v6 ? "]" : "",
             bk->url.port);
    bk->prefix = lk_strdup(cfg->key_prefix ? cfg->key_prefix : "");
    bk->prefix_len = strlen(bk->prefix);
    (void)lk_itoa((int64_t)bk->prefix_len, bk->prefix_len_str);
    bk->timeout_ms = cfg->backend_timeout_ms > 0 ? cfg->backend_timeout_ms : 2000;
    bk->wait_replicas = cfg->redis_wait_replicas;
    static const struct {
        const char *name;
        const char *body;
    } src[SC_COUNT] = {
        [SC_ACQUIRE] = {"acquire", lk_lua_acquire},
        [SC_RENEW] = {"renew", lk_lua_renew},
        [SC_RELEASE] = {"release", lk_lua_release},
        [SC_INSPECT] = {"inspect", lk_lua_inspect},
        [SC_LIST] = {"list", lk_lua_list},
        [SC_RENEW_MANY] = {"renew_many", lk_lua_renew_many},
        [SC_ACQUIRE_MANY] = {"acquire_many", lk_lua_acquire_many},
        [SC_RELEASE_MANY] = {"release_many", lk_lua_release_many},
    };
    for (int i = 0; i < SC_COUNT; i++) {
        struct rscript *s = &bk->scripts[i];
        s->name = src[i].name;
        s->body = src[i].body;
        s->len = strlen(s->body);
        sha1_hex(s->body, s->len, s->sha); /* EVALSHA works even if Redis was down at startup */
    }
    snprintf(bk->startup_reason, sizeof(bk->startup_reason), "not connected yet");
    resolve_host(bk);
    rc = startup_probe(bk, err, errlen);
    if (rc != LK_OK)
        goto fail;
    bk->logged_up = bk->startup_up; /* startup_probe logged that already */
    lk_strlcpy(bk->logged_reason, bk->startup_reason, sizeof(bk->logged_reason));
    bk->sub_lp = loop_new(-1);
    loop_post(bk->sub_lp, rb_sub_init, bk); /* runs first thing on the new thread */
    if (pthread_create(&bk->sub_th, NULL, rb_sub_main, bk) != 0) {
        snprintf(err, errlen, "cannot start the redis subscriber thread");
        rc = LK_INTERNAL;
        goto fail;
    }
    bk->sub_running = true;
    out->ops = &rb_ops;
    out->state = bk;
    return LK_OK;
fail:
    rb_free(bk);
    return rc;
}
