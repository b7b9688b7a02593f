/*
 * redis_node.c - the node layer (see redis_node.h): connections to one
 * Redis with their reconnect state machine, commands with deadlines, the
 * FUNCTION LOAD fallback and WAIT, grouping mechanics, node status and its log
 * lines, and the blocking startup probe. No lock knowledge. Connections and
 * commands live on their loop thread; the node's status is under n->mu.
 */
#include "server/redis_node.h"

#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "server/log.h"
#include "server/redis_args.h"
#include "server/redis_compat.h"
#include "server/redis_url.h"
#include "server/redis_version.h"
#include "server/sha1.h"

enum rc_state { RC_DOWN, RC_CONNECTING, RC_READY };

/* An address the node had: a sentinel failover moves the node to another
 * one, and a log line on another thread may still be reading the old. They
 * are freed with the node (one per failover, a few dozen bytes). */
struct rn_addr {
    struct rn_addr *prev;
    char s[];
};

struct rn_node {
    struct redis_url url;   /* host and port under mu once loops run (rn_node_set_addr) */
    struct rn_addr *addr;   /* host:port, for logs and nodes(); never the password; atomic */
    char connect_host[256]; /* numeric address resolved at startup, else the host name; mu */
    unsigned gen;           /* bumped by each rn_node_set_addr; mu */
    int64_t timeout_ms;
    rn_trouble_fn trouble; /* atomic: a sentinel backend sets it after its probe */
    void *trouble_arg;

    pthread_mutex_t mu; /* guards the conn list, each conn's up/reason, and what follows */
    struct rn_conn *conns;
    bool startup_up;
    char startup_reason[128];
    char role_reason[64]; /* "" or why ROLE says it takes no writes (a replica) */
    bool logged_up;       /* the node state last logged */
    char logged_reason[128];
    /* Restart detection (rn_node_set_restart): the run_id last seen, and the
     * address generation it was seen at; under mu. */
    rn_restart_fn restart; /* set before any connection exists */
    void *restart_arg;
    char run_id[48];
    unsigned run_id_gen;
    int64_t restarts;
};

static const char *node_addr(const struct rn_node *n)
{
    return __atomic_load_n(&n->addr, __ATOMIC_ACQUIRE)->s;
}

/* One async connection, owned by one loop thread. Only `up`, `reason` and
 * the list links are read by other threads, under node->mu. */
struct rn_conn {
    struct rn_node *node;
    struct ev_loop *ev;
    struct rn_conn_hooks hooks;
    void *arg;
    redisAsyncContext *ac; /* NULL while down; never reused once it failed */
    enum rc_state state;
    bool closing;   /* rn_conn_free in progress: no reconnect */
    int attempt;    /* consecutive failures, for the backoff */
    int hello_left; /* AUTH/SELECT/PING replies still to come */
    int unflushed;  /* commands queued since our last eager write */
    uint64_t rng;
    int64_t last_err_log_ms;
    int64_t failed_ms; /* when the last attempt failed (monotonic) */
    ev_timer retry;    /* backoff before the next connect */
    ev_timer deadline; /* connect + hello must finish by then */
    /* Commands that arrived while down, in order, each with a reference:
     * sent when the next attempt starts, answered when it fails. */
    struct rn_cmd *wait_head, *wait_tail;
    /* WAITs (redis_wait_replicas): the one in flight on ac, and the commands
     * written since, whose WAIT goes when that one answers (repl_*). */
    struct rn_repl *repl_out, *repl_next;
    /* Commands queued this loop turn per group queue; sent by `flush`, which
     * runs after every other prepare watcher, or when a queue is full. */
    struct rn_cmd *queued[RN_QUEUES][RN_GROUP_MAX];
    int nqueued[RN_QUEUES];
    ev_prepare flush;
    ev_async moved; /* rn_node_set_addr: the node has a new address */
    unsigned gen;   /* the node's gen this context was made for */
    /* under node->mu */
    bool up;
    char reason[128];
    struct rn_conn *next, *prev;
};

static void conn_start(struct rn_conn *c);
static void node_trouble(struct rn_node *n, const char *why);
static bool refuses_writes(const redisReply *r);
static void cmd_on_reply(redisAsyncContext *ac, void *r, void *priv);
static void cmd_on_wait(redisAsyncContext *ac, void *r, void *priv);
static void repl_detach(struct rn_conn *c);
static bool conn_checks(const struct rn_conn *c);
static void on_info(redisAsyncContext *ac, void *r, void *priv);

void rn_script_init(struct rn_script *s, const char *name, const char *code, bool allow_oom)
{
    /* allow-cross-slot-keys: what an EVAL script without flags may do (a
     * cluster's list.lua reads keys of any slot of its node) */
    static const char reg[] = "lk_api.register_function{function_name='%s',callback=lk_call,"
                              "flags={'allow-cross-slot-keys'%s}}\n";
    char sha[41];
    size_t len = strlen(code);
    sha1_hex(code, len, sha);
    s->name = name;
    snprintf(s->fname, sizeof(s->fname), "lk_%.40s_%.12s", name, sha);
    s->fname_len = strlen(s->fname);
    size_t cap = len + 2 * s->fname_len + sizeof(reg) + 32;
    s->lib = lk_malloc(cap);
    int n = snprintf(s->lib, cap, "#!lua name=%s\n%s", s->fname, code);
    n += snprintf(s->lib + n, cap - (size_t)n, reg, s->fname, allow_oom ? ",'allow-oom'" : "");
    s->lib_len = (size_t)n;
}

/* FUNCTION LOAD's answer when the library is there already. */
static bool is_loaded(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR Library '", 13) == 0 &&
           strstr(r->str, "' already exists") != NULL;
}

void rn_script_fini(struct rn_script *s)
{
    free(s->lib);
    s->lib = NULL;
}

/* ---------------------------------------------------------------- status */

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

/* Under n->mu: the node is up while every connection to it is up. */
static bool node_state(const struct rn_node *n, const char **reason)
{
    bool any = false, up = true;
    *reason = NULL;
    for (const struct rn_conn *c = n->conns; c != NULL; c = c->next) {
        any = true;
        if (!c->up && *reason == NULL) {
            up = false;
            *reason = c->reason;
        }
    }
    if (!any) {
        up = n->startup_up;
        *reason = n->startup_reason;
    }
    if (up && n->role_reason[0] != '\0') {
        up = false; /* it answers, but refuses every write */
        *reason = n->role_reason;
    }
    if (up || *reason == NULL)
        *reason = up ? "" : "down";
    return up;
}

/* Under n->mu: what to log if the node's state changed since last logged
 * (0: nothing, 1: down, why in said, 2: up again). */
static int state_change(struct rn_node *n, char *said, size_t cap)
{
    const char *why;
    bool node_up = node_state(n, &why);
    if (node_up == n->logged_up && (node_up || strcmp(why, n->logged_reason) == 0))
        return 0;
    n->logged_up = node_up;
    lk_strlcpy(n->logged_reason, why, sizeof(n->logged_reason));
    lk_strlcpy(said, why, cap);
    return node_up ? 2 : 1;
}

static void log_change(const struct rn_node *n, int say, const char *said)
{
    if (say == 1)
        lk_log(LK_WARN, "cannot use redis '%s': %s", node_addr(n), said);
    else if (say == 2)
        lk_log(LK_INFO, "redis '%s' answers again", node_addr(n));
}

/* Logs the node's transitions once, not once per connection. */
static void set_status(struct rn_conn *c, bool up, const char *reason)
{
    struct rn_node *n = c->node;
    char said[128];
    int say = 0;
    pthread_mutex_lock(&n->mu);
    c->up = up;
    lk_strlcpy(c->reason, reason, sizeof(c->reason));
    if (!c->closing)
        say = state_change(n, said, sizeof(said));
    pthread_mutex_unlock(&n->mu);
    log_change(n, say, said);
}

static void set_role(struct rn_node *n, const char *reason)
{
    char said[128];
    pthread_mutex_lock(&n->mu);
    lk_strlcpy(n->role_reason, reason, sizeof(n->role_reason));
    int say = state_change(n, said, sizeof(said));
    pthread_mutex_unlock(&n->mu);
    log_change(n, say, said);
    if (reason[0] != '\0')
        node_trouble(n, reason); /* a sentinel backend asks who the primary is now */
}

/* Under n->mu: forgets the role a previous address had. */
static void set_role_locked(struct rn_node *n, const char *reason)
{
    lk_strlcpy(n->role_reason, reason, sizeof(n->role_reason));
}

bool rn_node_status(struct rn_node *n, char *reason, size_t cap)
{
    const char *why;
    pthread_mutex_lock(&n->mu);
    bool up = node_state(n, &why);
    lk_strlcpy(reason, why, cap);
    pthread_mutex_unlock(&n->mu);
    return up;
}

/* The readiness probe is ROLE, not PING: a replica (REPLICAOF, or a master
 * demoted by a failover) answers PING but refuses every write, so every
 * acquire would be a 503 while /readyz said ready. */
enum lk_code rn_node_role(struct rn_node *n, const redisReply *r)
{
    if (r == NULL)
        return LK_BACKEND_DOWN;
    if (r->type == REDIS_REPLY_ERROR) {
        /* An ACL user without +role, or a Redis older than 2.8.12: Redis
         * answered and its role is unknown; the writes themselves will say. */
        if (strncmp(r->str, "NOPERM", 6) == 0 || strncmp(r->str, "ERR unknown command", 19) == 0)
            return LK_OK;
        return LK_BACKEND_DOWN;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return LK_BACKEND_DOWN;
    const char *role = r->element[0]->str;
    if (strcmp(role, "master") != 0) {
        char why[64];
        if (strcmp(role, "slave") == 0 || strcmp(role, "replica") == 0)
            snprintf(why, sizeof(why), "redis is a read-only replica");
        else
            snprintf(why, sizeof(why), "redis is a %.20s, not a master", role);
        set_role(n, why);
        return LK_BACKEND_DOWN;
    }
    set_role(n, "");
    return LK_OK;
}

/* ---------------------------------------------------------------- nodes */

/* Resolves the host once, on the calling (main) thread; a name that does
 * not resolve yet is kept (resolved at each connect then). */
static void resolve_host(struct rn_node *n)
{
    lk_strlcpy(n->connect_host, n->url.host, sizeof(n->connect_host));
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(n->url.host, NULL, &hints, &res) != 0 || res == NULL) {
        lk_log(LK_WARN, "cannot resolve redis host '%s' yet; will retry on connect", n->url.host);
        return;
    }
    char tmp[INET6_ADDRSTRLEN];
    const void *a = res->ai_family == AF_INET
                        ? (const void *)&((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr
                        : (const void *)&((struct sockaddr_in6 *)(void *)res->ai_addr)->sin6_addr;
    if (inet_ntop(res->ai_family, a, tmp, sizeof(tmp)) != NULL)
        lk_strlcpy(n->connect_host, tmp, sizeof(n->connect_host));
    freeaddrinfo(res);
}

static struct rn_addr *addr_new(const char *host, int port, struct rn_addr *prev)
{
    bool v6 = strchr(host, ':') != NULL;
    size_t cap = strlen(host) + 16;
    struct rn_addr *a = lk_malloc(sizeof(*a) + cap);
    a->prev = prev;
    snprintf(a->s, cap, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
    return a;
}

struct rn_node *rn_node_new(const struct redis_url *url, int64_t timeout_ms)
{
    struct rn_node *n = lk_calloc(1, sizeof(*n));
    pthread_mutex_init(&n->mu, NULL);
    n->url = *url;
    n->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    n->addr = addr_new(url->host, url->port, NULL);
    snprintf(n->startup_reason, sizeof(n->startup_reason), "not connected yet");
    resolve_host(n);
    return n;
}

void rn_node_free(struct rn_node *n)
{
    if (n == NULL)
        return;
    if (n->conns != NULL)
        lk_log(LK_ERROR, "redis node '%s' freed with connections open", node_addr(n));
    pthread_mutex_destroy(&n->mu);
    memset(&n->url, 0, sizeof(n->url)); /* the password */
    while (n->addr != NULL) {
        struct rn_addr *prev = n->addr->prev;
        free(n->addr);
        n->addr = prev;
    }
    free(n);
}

void rn_node_set_trouble(struct rn_node *n, rn_trouble_fn fn, void *arg)
{
    __atomic_store_n(&n->trouble_arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&n->trouble, fn, __ATOMIC_RELEASE);
}

static void node_trouble(struct rn_node *n, const char *why)
{
    rn_trouble_fn fn = __atomic_load_n(&n->trouble, __ATOMIC_ACQUIRE);
    if (fn != NULL)
        fn(__atomic_load_n(&n->trouble_arg, __ATOMIC_RELAXED), why);
}

/* Whether an error reply says the node is not (yet) a writable primary. */
static bool refuses_writes(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strncmp(r->str, "READONLY", 8) == 0 || strncmp(r->str, "LOADING", 7) == 0 ||
            strstr(r->str, "-READONLY") != NULL || strstr(r->str, "READONLY You") != NULL);
}

void rn_node_set_addr(struct rn_node *n, const char *host, int port)
{
    pthread_mutex_lock(&n->mu);
    if (strcmp(n->url.host, host) == 0 && n->url.port == port) {
        pthread_mutex_unlock(&n->mu);
        return;
    }
    lk_strlcpy(n->url.host, host, sizeof(n->url.host));
    n->url.port = port;
    resolve_host(n); /* sentinels name addresses: numeric, nothing to wait for */
    n->gen++;
    __atomic_store_n(&n->addr, addr_new(host, port, n->addr), __ATOMIC_RELEASE);
    set_role_locked(n, ""); /* the new node's own ROLE will say */
    /* Each connection moves on its own thread; the list is stable under mu
     * (a connection unlinks itself under mu before it stops its watcher). */
    for (struct rn_conn *c = n->conns; c != NULL; c = c->next)
        ev_async_send(c->ev, &c->moved);
    pthread_mutex_unlock(&n->mu);
}

const char *rn_node_addr(const struct rn_node *n)
{
    return node_addr(n);
}

int64_t rn_node_timeout_ms(const struct rn_node *n)
{
    return n->timeout_ms;
}

redisContext *rn_connect_blocking(const struct redis_url *auth, const char *host, int port,
                                  int64_t timeout_ms, const char *role)
{
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c == NULL || c->err) {
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    (void)redisSetTimeout(c, tv);
    if (auth->password[0] != '\0') {
        redisReply *r = auth->user[0] != '\0'
                            ? redisCommand(c, "AUTH %s %s", auth->user, auth->password)
                            : redisCommand(c, "AUTH %s", auth->password);
        bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
        if (r != NULL)
            freeReplyObject(r);
        if (!ok) {
            if (role != NULL)
                lk_log(LK_WARN, "cannot authenticate to %s '%s:%d'", role, host, port);
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* An unreachable Redis is not a configuration error: lockd starts, /readyz
 * says 503 with the reason, and the loops' connections keep retrying. */
enum lk_code rn_node_probe(struct rn_node *n, const struct rn_script *scripts, size_t nscripts,
                           char *err, size_t errlen)
{
    struct timeval tv = {(time_t)(n->timeout_ms / 1000),
                         (suseconds_t)(n->timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(n->connect_host, n->url.port, tv);
    enum lk_code rc = LK_OK;
    redisReply *r = NULL;
    if (c == NULL || c->err) {
        lower_reason(n->startup_reason, sizeof(n->startup_reason), "",
                     c ? c->errstr : "out of memory");
        lk_log(LK_WARN, "cannot connect to '%s': %s; starting anyway, not ready until it answers",
               node_addr(n), n->startup_reason);
        goto out;
    }
    (void)redisSetTimeout(c, tv);
    if (n->url.password[0] != '\0') {
        if (n->url.user[0] != '\0')
            r = redisCommand(c, "AUTH %s %s", n->url.user, n->url.password);
        else
            r = redisCommand(c, "AUTH %s", n->url.password);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "cannot authenticate to redis '%s'%s%s%s: %s", node_addr(n),
                     n->url.user[0] ? " as '" : "", n->url.user, n->url.user[0] ? "'" : "", r->str);
            rc = LK_INVALID;
            goto out;
        }
        freeReplyObject(r);
        r = NULL;
    }
    if (n->url.db != 0) {
        r = redisCommand(c, "SELECT %d", n->url.db);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(err, errlen, "cannot select database %d on redis '%s': %s", n->url.db,
                     node_addr(n), r->str);
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
            snprintf(err, errlen, "redis '%s' is version %s; lockd needs %d.%d or newer",
                     node_addr(n), version, REDIS_MIN_MAJOR, REDIS_MIN_MINOR);
            rc = LK_INVALID;
            goto out;
        }
        /* the process lockd starts with: a later connection to another is a restart */
        (void)redis_info_field(r->str, "run_id", n->run_id, sizeof(n->run_id));
        n->run_id_gen = n->gen;
    }
    freeReplyObject(r);
    r = NULL;
    for (size_t i = 0; i < nscripts; i++) {
        const struct rn_script *s = &scripts[i];
        r = redisCommand(c, "FUNCTION LOAD %b", s->lib, s->lib_len);
        if (r == NULL)
            goto io_error;
        if (r->type == REDIS_REPLY_ERROR) {
            if (strncmp(r->str, "NOAUTH", 6) == 0) {
                snprintf(err, errlen,
                         "redis '%s' requires a password: use redis://[user:]password@host:port",
                         node_addr(n));
                rc = LK_INVALID;
            } else if (is_loaded(r)) {
                freeReplyObject(r);
                r = NULL;
                continue; /* loaded before (by this lockd's twin, or before a restart of lockd) */
            } else if (strncmp(r->str, "ERR Error", 9) == 0) {
                snprintf(err, errlen, "redis '%s' rejected script %s.lua: %s", node_addr(n),
                         s->name, r->str);
                rc = LK_INTERNAL;
            } else {
                lower_reason(n->startup_reason, sizeof(n->startup_reason), "", r->str);
                lk_log(LK_WARN, "cannot load scripts into '%s': %s; starting anyway", node_addr(n),
                       r->str);
            }
            goto out;
        }
        if (r->type != REDIS_REPLY_STRING || strcmp(r->str, s->fname) != 0) {
            snprintf(err, errlen, "redis '%s' named script %s.lua differently than lockd",
                     node_addr(n), s->name);
            rc = LK_INTERNAL;
            goto out;
        }
        freeReplyObject(r);
        r = NULL;
    }
    n->startup_up = true;
    n->startup_reason[0] = '\0';
    goto out;
io_error:
    lower_reason(n->startup_reason, sizeof(n->startup_reason), "", c->errstr);
    lk_log(LK_WARN, "cannot talk to redis '%s': %s; starting anyway", node_addr(n),
           n->startup_reason);
out:
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    n->logged_up = n->startup_up; /* logged here already */
    lk_strlcpy(n->logged_reason, n->startup_reason, sizeof(n->logged_reason));
    return rc;
}

/* ---------------------------------------------------------------- waiting */

static void wait_push(struct rn_conn *c, struct rn_cmd *cmd)
{
    rn_cmd_ref(cmd); /* the wait list's */
    cmd->next_wait = NULL;
    if (c->wait_tail != NULL)
        c->wait_tail->next_wait = cmd;
    else
        c->wait_head = cmd;
    c->wait_tail = cmd;
}

static struct rn_cmd *wait_take(struct rn_conn *c)
{
    struct rn_cmd *all = c->wait_head;
    c->wait_head = c->wait_tail = NULL;
    return all;
}

/* Answers every waiting command "no reply" (its attempt failed, or the
 * connection is being freed); those whose deadline answered them go. */
static void wait_fail(struct rn_conn *c)
{
    struct rn_cmd *cmd = wait_take(c);
    while (cmd != NULL) {
        struct rn_cmd *next = cmd->next_wait;
        if (!cmd->expired)
            cmd->type->reply(cmd, NULL);
        rn_cmd_unref(cmd);
        cmd = next;
    }
}

static int cmd_write(struct rn_cmd *cmd);

/* A new context exists: what waited goes out, in order, pipelined behind
 * the hello. */
static void wait_send(struct rn_conn *c)
{
    struct rn_cmd *cmd = wait_take(c);
    while (cmd != NULL) {
        struct rn_cmd *next = cmd->next_wait;
        if (!cmd->expired && cmd_write(cmd) != 0)
            cmd->type->reply(cmd, NULL);
        rn_cmd_unref(cmd);
        cmd = next;
    }
}

/* Demand for the connection while it waits out a backoff: the next attempt
 * is brought forward to RN_BACKOFF_MIN_MS after the last failure, so that a
 * request waits for a reconnect rather than failing at once, and a Redis
 * that refuses connections still answers requests within ~50 ms each. */
static void conn_hurry(struct rn_conn *c)
{
    if (c->state != RC_DOWN || c->closing || !ev_is_active(&c->retry))
        return;
    ev_now_update(c->ev);
    double due = (double)(c->failed_ms + RN_BACKOFF_MIN_MS - lk_now_ms()) / 1000.0;
    if (due < 0)
        due = 0;
    if (due >= ev_timer_remaining(c->ev, &c->retry))
        return;
    ev_timer_stop(c->ev, &c->retry);
    ev_timer_set(&c->retry, due, 0.);
    ev_timer_start(c->ev, &c->retry);
}

/* ---------------------------------------------------------------- connections */

static uint64_t conn_rand(struct rn_conn *c)
{
    /* xorshift64: jitter only, needs no quality */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

/* The context is gone (or going): schedule a new one after a capped,
 * jittered exponential backoff so that many lockd processes do not reconnect
 * in lockstep after a Redis restart. A failed attempt (never ready) also
 * answers the commands that waited for it. */
static void conn_failed(struct rn_conn *c, const char *reason)
{
    bool attempt_failed = c->state != RC_READY;
    c->state = RC_DOWN;
    c->ac = NULL;
    c->failed_ms = lk_now_ms();
    ev_timer_stop(c->ev, &c->deadline);
    set_status(c, false, reason);
    repl_detach(c);
    if (c->closing)
        return;
    node_trouble(c->node, reason); /* a sentinel backend asks who the primary is now */
    int64_t d = RN_BACKOFF_MIN_MS;
    for (int i = 0; i < c->attempt && d < RN_BACKOFF_MAX_MS; i++)
        d *= 2;
    if (d > RN_BACKOFF_MAX_MS)
        d = RN_BACKOFF_MAX_MS;
    d = d / 2 + (int64_t)(conn_rand(c) % (uint64_t)(d / 2 + 1));
    c->attempt++;
    ev_timer_stop(c->ev, &c->retry);
    ev_timer_set(&c->retry, (double)d / 1000.0, 0.);
    ev_timer_start(c->ev, &c->retry);
    if (attempt_failed)
        wait_fail(c); /* may queue more: they wait for the next attempt */
    else if (c->wait_head != NULL)
        conn_hurry(c);
}

/* Abandons the current context on our own initiative (timeout, failed
 * AUTH). A failed context is freed, never reused; its pending callbacks run
 * with a NULL reply (now, or right after the hiredis callback we are in
 * returns), which answers their callers LK_BACKEND_DOWN. */
static void conn_drop(struct rn_conn *c, const char *reason)
{
    redisAsyncContext *ac = c->ac;
    if (ac == NULL)
        return;
    ac->data = NULL;
    conn_failed(c, reason);
    rcompat_free(ac);
}

static void conn_ready(struct rn_conn *c)
{
    c->state = RC_READY;
    c->attempt = 0;
    ev_timer_stop(c->ev, &c->deadline);
    set_status(c, true, "");
    if (c->hooks.ready != NULL)
        c->hooks.ready(c->arg, c);
    if (conn_checks(c))
        wait_send(c); /* after the ready hook: a re-assertion goes first */
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    struct rn_conn *c = ac->data;
    if (c == NULL)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees this context right after we return */
        char why[128];
        lower_reason(why, sizeof(why), "", rcompat_connect_error(ac));
        ac->data = NULL;
        conn_failed(c, why);
        return;
    }
    rcompat_keepalive(ac);
    if (c->hello_left == 0)
        conn_ready(c);
}

static void on_disconnect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    struct rn_conn *c = ac->data;
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
    struct rn_conn *c = ac->data;
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
    if (--c->hello_left == 0 && c->state == RC_CONNECTING && rcompat_connected(ac))
        conn_ready(c);
}

static void on_conn_deadline(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    conn_drop(w->data, "connect timed out");
}

static void on_retry(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    conn_start(w->data);
}

/* Every connection authenticates and selects its database first; the
 * replies are pipelined ahead of any command queued while it connects. */
static void conn_start(struct rn_conn *c)
{
    struct rn_node *n = c->node;
    ev_timer_stop(c->ev, &c->retry);
    char host[256];
    pthread_mutex_lock(&n->mu); /* a sentinel failover may move the node (rn_node_set_addr) */
    lk_strlcpy(host, n->connect_host, sizeof(host));
    int port = n->url.port;
    c->gen = n->gen;
    pthread_mutex_unlock(&n->mu);
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (ac == NULL) {
        conn_failed(c, "out of memory");
        return;
    }
    if (ac->err) {
        char why[128];
        lower_reason(why, sizeof(why), "", rcompat_connect_error(ac));
        rcompat_free(ac);
        c->state = RC_CONNECTING; /* an attempt that failed */
        conn_failed(c, why);
        return;
    }
    ac->data = c;
    if (redisLibevAttach(c->ev, ac) != REDIS_OK) {
        rcompat_free(ac);
        c->state = RC_CONNECTING;
        conn_failed(c, "cannot attach to the event loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    c->ac = ac;
    c->state = RC_CONNECTING;
    c->hello_left = 0;
    if (n->url.password[0] != '\0') {
        const char *argv[3] = {"AUTH", n->url.user, n->url.password};
        size_t lens[3] = {4, strlen(n->url.user), strlen(n->url.password)};
        int argc = 3;
        if (n->url.user[0] == '\0') {
            argv[1] = n->url.password;
            lens[1] = lens[2];
            argc = 2;
        }
        if (redisAsyncCommandArgv(ac, on_hello, NULL, argc, argv, lens) == REDIS_OK)
            c->hello_left++;
    }
    if (n->url.db != 0 && !c->hooks.pubsub) {
        if (redisAsyncCommand(ac, on_hello, NULL, "SELECT %d", n->url.db) == REDIS_OK)
            c->hello_left++;
    }
    /* Ready means Redis answered, not that the kernel accepted the TCP
     * connection (a hung Redis still completes handshakes). */
    if (conn_checks(c)) {
        /* also proves Redis answers, as PING would */
        if (redisAsyncCommand(ac, on_info, NULL, "INFO server") == REDIS_OK)
            c->hello_left++;
    }
    if (c->hello_left == 0 && redisAsyncCommand(ac, on_hello, NULL, "PING") == REDIS_OK)
        c->hello_left++;
    ev_timer_set(&c->deadline, (double)n->timeout_ms / 1000.0, 0.);
    ev_timer_start(c->ev, &c->deadline);
    if (!conn_checks(c))
        wait_send(c); /* else once the hello said which Redis this is (conn_ready) */
}

static void on_flush(struct ev_loop *ev, ev_prepare *p, int revents);

/* Whether this connection checks the run_id in its hello: it then holds every
 * command until the hello is answered (so none reaches a restarted Redis
 * before the lock layer knows). */
static bool conn_checks(const struct rn_conn *c)
{
    return c->node->restart != NULL && !c->hooks.pubsub;
}

/* Compares the run_id Redis gave with the one last seen. Under n->mu; the
 * hook runs under it too (it only notes the fact). Returns whether it changed. */
static bool note_run_id(struct rn_node *n, const char *id, unsigned gen, bool *moved)
{
    bool changed = n->run_id[0] != '\0' && strcmp(n->run_id, id) != 0;
    *moved = gen != n->run_id_gen;
    lk_strlcpy(n->run_id, id, sizeof(n->run_id));
    n->run_id_gen = gen;
    if (changed) {
        n->restarts++;
        n->restart(n->restart_arg, *moved);
    }
    return changed;
}

/* The hello's INFO server: a Redis process other than the last one means
 * what it held may be gone (no persistence, a replica that lacked grants). */
static void on_info(redisAsyncContext *ac, void *r, void *priv)
{
    redisReply *reply = r;
    struct rn_conn *c = ac->data;
    if (c != NULL && reply != NULL && reply->type == REDIS_REPLY_STRING) {
        char id[48];
        if (redis_info_field(reply->str, "run_id", id, sizeof(id)) && id[0] != '\0') {
            bool moved;
            char old[48];
            pthread_mutex_lock(&c->node->mu);
            lk_strlcpy(old, c->node->run_id, sizeof(old));
            bool changed = note_run_id(c->node, id, c->gen, &moved);
            pthread_mutex_unlock(&c->node->mu);
            if (changed)
                lk_log(LK_ERROR,
                       "redis '%s' is a new process (%s; run_id %.8s... was %.8s...): the locks it "
                       "held may be lost",
                       node_addr(c->node), moved ? "another server: a failover" : "restarted", id,
                       old);
        }
    }
    /* an error reply (an ACL without +info) is not judged: on_hello goes on */
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) {
        if (c != NULL && --c->hello_left == 0 && c->state == RC_CONNECTING && rcompat_connected(ac))
            conn_ready(c);
        return;
    }
    on_hello(ac, r, priv);
}

void rn_node_set_restart(struct rn_node *n, rn_restart_fn fn, void *arg)
{
    n->restart_arg = arg;
    n->restart = fn;
}

void rn_node_count_restart(struct rn_node *n)
{
    pthread_mutex_lock(&n->mu);
    n->restarts++;
    pthread_mutex_unlock(&n->mu);
}

int64_t rn_node_restarts(struct rn_node *n)
{
    pthread_mutex_lock(&n->mu);
    int64_t v = n->restarts;
    pthread_mutex_unlock(&n->mu);
    return v;
}

/* The node moved (a sentinel named another primary): a context made for the
 * old address is dropped (what it had in flight is answered 503: the old
 * primary may have refused or lost it) and the next one starts at once. */
static void on_moved(struct ev_loop *ev, ev_async *w, int revents)
{
    (void)ev;
    (void)revents;
    struct rn_conn *c = w->data;
    pthread_mutex_lock(&c->node->mu);
    bool stale = c->gen != c->node->gen;
    pthread_mutex_unlock(&c->node->mu);
    if (!stale || c->closing)
        return;
    c->attempt = 0;
    if (c->ac != NULL)
        conn_drop(c, "the primary moved");
    if (c->state == RC_DOWN && c->ac == NULL && !c->closing) {
        ev_timer_stop(c->ev, &c->retry);
        ev_timer_set(&c->retry, 0., 0.);
        ev_timer_start(c->ev, &c->retry);
    }
}

struct rn_conn *rn_conn_new(struct rn_node *n, struct ev_loop *ev, const struct rn_conn_hooks *h,
                            void *arg)
{
    struct rn_conn *c = lk_calloc(1, sizeof(*c));
    c->node = n;
    c->ev = ev;
    c->hooks = *h;
    c->arg = arg;
    c->rng = (uint64_t)lk_now_us() ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ull;
    ev_timer_init(&c->retry, on_retry, 0., 0.);
    c->retry.data = c;
    ev_timer_init(&c->deadline, on_conn_deadline, 0., 0.);
    c->deadline.data = c;
    ev_prepare_init(&c->flush, on_flush);
    c->flush.data = c;
    ev_set_priority(&c->flush, EV_MINPRI);
    if (h->group != NULL)
        ev_prepare_start(ev, &c->flush);
    ev_async_init(&c->moved, on_moved);
    c->moved.data = c;
    ev_async_start(ev, &c->moved);
    pthread_mutex_lock(&n->mu);
    c->up = n->startup_up;
    lk_strlcpy(c->reason, n->startup_reason, sizeof(c->reason));
    c->next = n->conns;
    if (n->conns != NULL)
        n->conns->prev = c;
    n->conns = c;
    pthread_mutex_unlock(&n->mu);
    conn_start(c);
    return c;
}

void rn_conn_free(struct rn_conn *c)
{
    struct rn_node *n = c->node;
    c->closing = true;
    ev_timer_stop(c->ev, &c->retry);
    ev_timer_stop(c->ev, &c->deadline);
    ev_prepare_stop(c->ev, &c->flush);
    for (int q = 0; q < RN_QUEUES; q++) {
        int nq = c->nqueued[q];
        c->nqueued[q] = 0;
        for (int i = 0; i < nq; i++)
            rn_cmd_unref(c->queued[q][i]); /* LK_BACKEND_DOWN, as for those already sent */
    }
    wait_fail(c);
    conn_drop(c, "detached");
    pthread_mutex_lock(&n->mu);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&n->mu);
    ev_async_stop(c->ev, &c->moved); /* unlinked: rn_node_set_addr no longer signals it */
    free(c);
}

bool rn_conn_ready(const struct rn_conn *c)
{
    return c != NULL && c->ac != NULL && c->state == RC_READY;
}

struct rn_node *rn_conn_node(const struct rn_conn *c)
{
    return c->node;
}

int rn_conn_raw(struct rn_conn *c, void (*fn)(redisAsyncContext *, void *, void *), void *priv,
                int argc, const char **argv, const size_t *argvlen)
{
    if (!rn_conn_ready(c))
        return -1;
    return redisAsyncCommandArgv(c->ac, fn, priv, argc, argv, argvlen) == REDIS_OK ? 0 : -1;
}

void rn_conn_log_refusal(struct rn_conn *c, const redisReply *r)
{
    int64_t now = lk_now_ms();
    if (c != NULL) {
        if (now - c->last_err_log_ms < 1000)
            return; /* one line a second per connection, not one per request */
        c->last_err_log_ms = now;
    }
    lk_log(LK_WARN, "redis '%s' refused a command: %.*s", c ? node_addr(c->node) : "?", (int)r->len,
           r->str);
}

/* hiredis sends what a loop queued when its write watcher fires, after the
 * whole loop iteration, and one iteration may park 64 requests. Writing every
 * FLUSH_EVERY commands lets Redis start on them while lockd still parses the
 * rest: about +30 % pairs/s at 64 clients (bench/RESULTS.md). A write error
 * stays in the context's err for hiredis to act on from its own write
 * callback: tearing the context down here would answer and free commands
 * whose callers are still on the stack. */
#define FLUSH_EVERY 16

static void conn_write(struct rn_conn *c)
{
    c->unflushed = 0;
    rcompat_write_now(c->ac);
}

/* ---------------------------------------------------------------- commands */

void rn_cmd_init(struct rn_cmd *cmd, const struct rn_cmd_type *type, struct rn_conn *c,
                 const struct rn_script *script)
{
    cmd->type = type;
    cmd->conn = c;
    cmd->ev = c ? c->ev : NULL;
    cmd->script = script;
    cmd->refs = 1;
}

void rn_cmd_take_args(struct rn_cmd *cmd, struct rargs *b)
{
    int extra = cmd->script != NULL ? 2 : 0;
    cmd->argc = b->n + extra;
    if (cmd->argc <= RN_ARGV_SMALL) {
        cmd->argv = cmd->argv_small;
        cmd->argvlen = cmd->argvlen_small;
    } else {
        cmd->argv = lk_malloc((size_t)cmd->argc * sizeof(*cmd->argv));
        cmd->argvlen = lk_malloc((size_t)cmd->argc * sizeof(*cmd->argvlen));
    }
    cmd->buf = b->buf;
    if (extra) {
        cmd->argv[0] = "FCALL";
        cmd->argvlen[0] = 5;
        cmd->argv[1] = cmd->script->fname;
        cmd->argvlen[1] = cmd->script->fname_len;
    }
    for (int i = 0; i < b->n; i++) {
        cmd->argv[extra + i] = b->buf + b->off[i];
        cmd->argvlen[extra + i] = b->lens[i];
    }
    free(b->off);
    free(b->lens);
    memset(b, 0, sizeof(*b));
}

void rn_cmd_fini(struct rn_cmd *cmd)
{
    if (cmd->argv != cmd->argv_small) {
        free(cmd->argv);
        free(cmd->argvlen);
    }
    free(cmd->buf);
    cmd->argv = NULL;
    cmd->argvlen = NULL;
    cmd->buf = NULL;
}

void rn_cmd_ref(struct rn_cmd *cmd)
{
    cmd->refs++;
}

void rn_cmd_unref(struct rn_cmd *cmd)
{
    if (--cmd->refs > 0)
        return;
    rn_cmd_disarm(cmd);
    cmd->type->settle(cmd);
}

static void cmd_on_deadline(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)revents;
    struct rn_cmd *cmd = w->data;
    struct rn_conn *c = cmd->conn;
    bool sent = c != NULL && c->ac != NULL; /* else it still waits for a connection */
    cmd->timing = false;
    cmd->expired = true;
    if (sent) {
        lk_log(LK_WARN, "redis '%s' did not answer within %lld ms; reconnecting",
               node_addr(c->node), (long long)c->node->timeout_ms);
        /* down before expire answers: a /readyz answered from it reports
         * the node's state, and that is no longer up */
        set_status(c, false, "command timed out");
    }
    rn_cmd_ref(cmd); /* expire may drop the owner's last hold */
    if (cmd->type->expire != NULL)
        cmd->type->expire(cmd);
    /* A connection that let one command time out is suspect: replies behind
     * it would be late too. Dropping it answers every pending command. */
    if (sent)
        conn_drop(c, "command timed out");
    rn_cmd_unref(cmd);
}

void rn_cmd_arm(struct rn_cmd *cmd)
{
    if (cmd->ev == NULL || cmd->timing)
        return;
    ev_now_update(cmd->ev); /* the loop's cached time may be stale by a whole iteration */
    ev_timer_init(&cmd->deadline, cmd_on_deadline, (double)cmd->conn->node->timeout_ms / 1000.0,
                  0.);
    cmd->deadline.data = cmd;
    ev_timer_start(cmd->ev, &cmd->deadline);
    cmd->timing = true;
}

void rn_cmd_disarm(struct rn_cmd *cmd)
{
    if (cmd->timing) {
        ev_timer_stop(cmd->ev, &cmd->deadline);
        cmd->timing = false;
    }
}

static void flush_early(struct rn_conn *c)
{
    if (++c->unflushed >= FLUSH_EVERY)
        conn_write(c);
}

/* ------------------------------------------------------------ replication */

/* One WAIT covers every write sent before it on its connection. Redis runs a
 * client's commands in order and a WAIT blocks the client, so one WAIT per
 * command would queue them: the tenth acquire of a burst would wait for nine
 * WAITs before its own and miss its deadline whenever a replica is missing,
 * and the connection would be dropped again and again. Instead, commands
 * written while a WAIT is out share the next one, sent when that one
 * answers: at most two WAITs stand between a command and its answer, each
 * given a third of the deadline, so a missing replica is reported as such
 * rather than as a timeout. */
struct rn_repl {
    struct rn_conn *conn; /* NULL once its context is gone */
    int64_t replicas;
    int n, cap;
    struct rn_cmd **cmds; /* one reference each */
};

/* Hands each command r, the WAIT's reply (NULL: none will come), and frees
 * the set. A command written twice (FCALL, then again after FUNCTION LOAD) is in
 * an earlier set once more: that first reply is skipped. */
static void repl_deliver(struct rn_repl *w, redisReply *r)
{
    for (int i = 0; i < w->n; i++) {
        struct rn_cmd *cmd = w->cmds[i];
        if (cmd->skip_waits > 0) {
            cmd->skip_waits--;
        } else {
            if (r == NULL)
                cmd->wait_lost = true; /* a reply still to come must not be trusted */
            if (cmd->type->wait_reply != NULL)
                cmd->type->wait_reply(cmd, r);
        }
        rn_cmd_unref(cmd);
    }
    free(w->cmds);
    free(w);
}

/* Sends w's WAIT on c's context; 0, or -1 (w answered "lost" and freed). */
static int repl_send(struct rn_conn *c, struct rn_repl *w)
{
    long long wait_ms = c->node->timeout_ms / 3 > 0 ? c->node->timeout_ms / 3 : 1;
    if (c->ac == NULL || redisAsyncCommand(c->ac, cmd_on_wait, w, "WAIT %lld %lld",
                                           (long long)w->replicas, wait_ms) != REDIS_OK) {
        repl_deliver(w, NULL);
        return -1;
    }
    w->conn = c;
    c->repl_out = w;
    return 0;
}

/* cmd was just written on c: its WAIT goes now, or with the next set. */
static void repl_join(struct rn_conn *c, struct rn_cmd *cmd)
{
    struct rn_repl *w = c->repl_out == NULL ? NULL : c->repl_next;
    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            cmd->wait_lost = true; /* the owner must not trust a reply without its WAIT */
            return;
        }
    }
    if (w->n == w->cap) {
        int cap = w->cap > 0 ? w->cap * 2 : 8;
        struct rn_cmd **cmds = realloc(w->cmds, (size_t)cap * sizeof(*cmds));
        if (cmds == NULL) {
            cmd->wait_lost = true;
            if (w != c->repl_next)
                free(w);
            return;
        }
        w->cmds = cmds;
        w->cap = cap;
    }
    rn_cmd_ref(cmd); /* the set's */
    w->cmds[w->n++] = cmd;
    if (cmd->wait_replicas > w->replicas)
        w->replicas = cmd->wait_replicas;
    if (c->repl_out == NULL)
        repl_send(c, w);
    else
        c->repl_next = w;
}

/* c's context is gone: the WAIT in flight is answered by hiredis (NULL),
 * the set not yet sent now. */
static void repl_detach(struct rn_conn *c)
{
    if (c->repl_out != NULL)
        c->repl_out->conn = NULL;
    c->repl_out = NULL;
    struct rn_repl *next = c->repl_next;
    c->repl_next = NULL;
    if (next != NULL)
        repl_deliver(next, NULL);
}

/* Queues the command (and its WAIT) on the loop's context. 0 or -1. */
static int cmd_write(struct rn_cmd *cmd)
{
    struct rn_conn *c = cmd->conn;
    if (c == NULL || c->ac == NULL)
        return -1;
    if (cmd->type->may_send != NULL && !cmd->type->may_send(cmd))
        return -2; /* held back by its owner: not a connection problem */
    size_t len;
    bool heap;
    char *resp = rargs_resp(cmd->argc, cmd->argv, cmd->argvlen, &len, &heap);
    int rc = redisAsyncFormattedCommand(c->ac, cmd_on_reply, cmd, resp, len);
    if (heap)
        free(resp);
    if (rc != REDIS_OK)
        return -1;
    cmd->refs++;
    if (cmd->wait_replicas > 0)
        repl_join(c, cmd);
    flush_early(c); /* after the WAIT: a command and its WAIT leave in one write */
    return 0;
}

int rn_send(struct rn_cmd *cmd)
{
    struct rn_conn *c = cmd->conn;
    if (c == NULL || c->closing)
        return -1;
    /* A connection that checks which Redis it reached sends nothing before
     * its hello is answered: the command waits for conn_ready. */
    bool hold = c->state != RC_READY && conn_checks(c);
    int wr = c->ac != NULL && !hold ? cmd_write(cmd) : -1;
    if (wr == 0)
        return 0;
    if (wr == -2)
        return -1;
    /* Down between attempts (or a context hiredis is tearing down): wait
     * for the next attempt, within the command's own deadline. */
    wait_push(c, cmd);
    if (c->ac == NULL)
        conn_hurry(c);
    return 0;
}

/* Sends what queue q of c holds. Members whose deadline already answered
 * them are left out; a group of one goes as itself. */
static void group_send(struct rn_conn *c, int q)
{
    int n = 0;
    struct rn_cmd *m[RN_GROUP_MAX];
    int nq = c->nqueued[q];
    c->nqueued[q] = 0;
    for (int i = 0; i < nq; i++) {
        struct rn_cmd *cmd = c->queued[q][i];
        if (cmd->expired)
            rn_cmd_unref(cmd);
        else
            m[n++] = cmd;
    }
    if (n == 1) {
        if (rn_send(m[0]) != 0)
            m[0]->type->reply(m[0], NULL);
        rn_cmd_unref(m[0]); /* the queue's */
    } else if (n > 1) {
        c->hooks.group(c->arg, c, q, m, n);
    }
}

/* Before the loop sleeps, after the HTTP layer's own prepare watcher (which
 * may run requests that were waiting on the backend). Callers answered here
 * may queue more: nothing is left queued for a loop that might then sleep. */
static void on_flush(struct ev_loop *ev, ev_prepare *p, int revents)
{
    (void)ev;
    (void)revents;
    struct rn_conn *c = p->data;
    bool sent;
    do {
        sent = false;
        for (int q = 0; q < RN_QUEUES; q++) {
            if (c->nqueued[q] > 0) {
                group_send(c, q);
                sent = true;
            }
        }
    } while (sent);
}

int rn_queue(struct rn_cmd *cmd, int q)
{
    struct rn_conn *c = cmd->conn;
    if (c == NULL || c->closing || c->hooks.group == NULL)
        return -1;
    rn_cmd_ref(cmd); /* the queue's */
    c->queued[q][c->nqueued[q]++] = cmd;
    rn_cmd_arm(cmd);
    if (c->nqueued[q] == RN_GROUP_MAX) {
        group_send(c, q);
        if (c->ac != NULL)
            conn_write(c); /* Redis starts on it while we parse the rest */
    }
    return 0;
}

/* ---------------------------------------------------------------- replies */

static void cmd_on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct rn_cmd *cmd = priv;
    redisReply *reply = r;
    if (refuses_writes(reply) && cmd->conn != NULL)
        node_trouble(cmd->conn->node, reply->str); /* demoted, or still loading */
    /* hiredis' reference is dropped after the owner's callback (below) */
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR && cmd->script != NULL &&
        !cmd->reloaded && strcmp(reply->str, "ERR Function not found") == 0) {
        /* Redis lost its functions (a restart without persistence, FUNCTION
         * FLUSH, a failover to a node without them): load the library, then
         * send the command again behind it, once. Commands failed alike
         * load it too: Redis answers all but the first "already exists". */
        cmd->reloaded = true;
        const char *argv[3] = {"FUNCTION", "LOAD", cmd->script->lib};
        size_t lens[3] = {8, 4, cmd->script->lib_len};
        if (cmd->conn != NULL && cmd->conn->ac != NULL)
            (void)redisAsyncCommandArgv(cmd->conn->ac, NULL, NULL, 3, argv, lens);
        if (cmd->wait_replicas > 0)
            cmd->skip_waits++; /* the WAIT already queued follows the failed FCALL */
        if (cmd_write(cmd) == 0)
            goto out;
    }
    cmd->type->reply(cmd, reply);
out:
    rn_cmd_unref(cmd);
}

static void cmd_on_wait(redisAsyncContext *ac, void *r, void *priv)
{
    struct rn_repl *w = priv;
    struct rn_conn *c = w->conn;
    if (c != NULL && c->repl_out == w) {
        c->repl_out = NULL;
        /* the next set's WAIT goes before anyone is answered: commands the
         * answers write join the set after it */
        struct rn_repl *next = c->repl_next;
        c->repl_next = NULL;
        if (next != NULL && r != NULL && c->ac == ac)
            repl_send(c, next); /* a failure answers the set "lost" */
        else if (next != NULL)
            repl_deliver(next, NULL);
    }
    repl_deliver(w, r);
}
