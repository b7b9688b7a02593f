/*
 * redis_sentinel.c - the `sentinel` backend: a discovery step in front of
 * the `redis` lock layer. The sentinels (`redis`) name the primary of
 * `redis_master_name` (SENTINEL get-master-addr-by-name); the lock layer
 * runs on one node at that address, and a thread of its own follows the
 * primary: +switch-master on a subscribed sentinel, and asking again when
 * the node layer reports trouble (-READONLY, -LOADING, a lost connection,
 * ROLE naming a replica) or every RS_POLL_MS. It moves the node
 * (rn_node_set_addr); the lock layer and its scripts are unchanged. The
 * discovery thread blocks on sentinels only, never a request's loop.
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
#include "server/log.h"
#include "server/redis_lock.h"
#include "server/redis_map.h"
#include "server/redis_node.h"
#include "server/redis_url.h"
#include "server/util.h"

#define RS_MAX_SENTINELS 16
#define RS_POLL_MS 1000     /* ask again this often even when nothing was heard */
#define RS_ASK_GAP_MS 100   /* trouble asks at most this often */
#define RS_SUB_RETRY_MS 500 /* a sentinel that refused the subscription: the next after this */

struct rs {
    struct backend inner; /* the redis lock layer on the primary */
    struct rn_node *node; /* inner's node */
    struct redis_url sentinels[RS_MAX_SENTINELS];
    size_t n;
    char master[256];
    int64_t timeout_ms;
    int efd; /* eventfd: ask now, or stop */
    int ask; /* atomic: a trouble report is pending */
    int stop;
    pthread_t th;
    bool running;
    /* discovery thread only */
    redisContext *sub; /* subscribed to +switch-master on sentinels[sub_i] */
    size_t sub_i;
    redisContext *query; /* asks sentinels[query_i] */
    size_t query_i;
    char host[256]; /* the primary the node is on */
    int port;
};

/* ---------------------------------------------------------------- sentinels */

/* A blocking connection to sentinels[i]; an AUTH refusal is logged. */
static redisContext *sen_connect(const struct rs *s, size_t i)
{
    const struct redis_url *u = &s->sentinels[i];
    return rn_connect_blocking(u, u->host, u->port, s->timeout_ms, "sentinel");
}

/* Asks one sentinel over c: 1 and host/port when it names the primary, 0
 * when it does not know the name, -1 when c failed (the caller frees it). */
static int sen_ask(redisContext *c, const char *master, char *host, size_t cap, int *port)
{
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", master);
    if (r == NULL)
        return -1;
    int rc = redis_sentinel_addr(r, host, cap, port); /* -1: try the next */
    freeReplyObject(r);
    return rc;
}

/* Asks the sentinels in turn, starting with the one that answered last;
 * 1 (found), 0 (the ones that answered do not know master), -1 (none answered). */
static int discover(struct rs *s, char *host, size_t cap, int *port)
{
    int best = -1;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (s->query_i + k) % s->n;
        if (s->query == NULL || i != s->query_i) {
            if (s->query != NULL)
                redisFree(s->query);
            s->query = sen_connect(s, i);
            s->query_i = i;
            if (s->query == NULL)
                continue;
        }
        int rc = sen_ask(s->query, s->master, host, cap, port);
        if (rc == 1)
            return 1;
        if (rc == 0)
            best = 0;
        redisFree(s->query);
        s->query = NULL;
    }
    return best;
}

/* The sentinels named host:port: move the node there if it is elsewhere. */
static void follow(struct rs *s, const char *host, int port, const char *how)
{
    if (strcmp(host, s->host) == 0 && port == s->port)
        return;
    lk_log(LK_INFO, "sentinels name '%s:%d' the primary of '%s' (%s; was '%s:%d')", host, port,
           s->master, how, s->host, s->port);
    lk_strlcpy(s->host, host, sizeof(s->host));
    s->port = port;
    rn_node_set_addr(s->node, host, port);
}

/* ---------------------------------------------------------------- the thread */

static void sub_close(struct rs *s)
{
    if (s->sub != NULL)
        redisFree(s->sub);
    s->sub = NULL;
}

static void sub_open(struct rs *s)
{
    for (size_t k = 0; k < s->n && s->sub == NULL; k++) {
        size_t i = (s->sub_i + k) % s->n;
        redisContext *c = sen_connect(s, i);
        if (c == NULL)
            continue;
        redisReply *r = redisCommand(c, "SUBSCRIBE +switch-master");
        bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
        if (r != NULL)
            freeReplyObject(r);
        if (!ok) {
            redisFree(c);
            continue;
        }
        s->sub = c;
        s->sub_i = i;
    }
}

/* "+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>" */
static void on_switch(struct rs *s, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return;
    char name[256], oh[256], nh[256];
    int op, np;
    if (sscanf(r->element[2]->str, "%255s %255s %d %255s %d", name, oh, &op, nh, &np) != 5)
        return;
    if (strcmp(name, s->master) == 0 && np > 0 && np < 65536)
        follow(s, nh, np, "+switch-master");
}

/* Reads what the subscription has; false when it failed. */
static bool sub_read(struct rs *s)
{
    if (redisBufferRead(s->sub) != REDIS_OK)
        return false;
    for (int i = 0; i < 64; i++) { /* bounded: the rest stays buffered for the next round */
        void *r = NULL;
        if (redisGetReplyFromReader(s->sub, &r) != REDIS_OK)
            return false;
        if (r == NULL)
            break;
        on_switch(s, r);
        freeReplyObject(r);
    }
    return true;
}

static void *rs_main(void *arg)
{
    struct rs *s = arg;
    int64_t last_ask = lk_now_ms(), next_sub = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        int64_t now = lk_now_ms();
        if (s->sub == NULL && now >= next_sub) {
            sub_open(s);
            if (s->sub == NULL) {
                next_sub = now + RS_SUB_RETRY_MS;
                s->sub_i = (s->sub_i + 1) % s->n;
            }
        }
        bool troubled = __atomic_load_n(&s->ask, __ATOMIC_ACQUIRE) != 0;
        if ((troubled && now - last_ask >= RS_ASK_GAP_MS) || now - last_ask >= RS_POLL_MS) {
            __atomic_store_n(&s->ask, 0, __ATOMIC_RELEASE);
            char host[256];
            int port = 0;
            if (discover(s, host, sizeof(host), &port) == 1)
                follow(s, host, port, troubled ? "asked after trouble" : "asked");
            last_ask = lk_now_ms();
            now = last_ask;
        }
        int64_t wait = RS_POLL_MS - (now - last_ask);
        if (__atomic_load_n(&s->ask, __ATOMIC_ACQUIRE) != 0)
            wait = RS_ASK_GAP_MS - (now - last_ask);
        if (s->sub == NULL && next_sub - now < wait)
            wait = next_sub - now;
        if (wait < 1)
            wait = 1;
        struct pollfd p[2] = {{.fd = s->efd, .events = POLLIN},
                              {.fd = s->sub ? s->sub->fd : -1, .events = POLLIN}};
        if (poll(p, 2, (int)wait) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            if (read(s->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                break;
        }
        if (s->sub != NULL && (p[1].revents & (POLLIN | POLLERR | POLLHUP)) && !sub_read(s)) {
            lk_log(LK_WARN, "lost the subscription to sentinel '%s:%d'; asking again",
                   s->sentinels[s->sub_i].host, s->sentinels[s->sub_i].port);
            sub_close(s);
            s->sub_i = (s->sub_i + 1) % s->n;
            __atomic_store_n(&s->ask, 1, __ATOMIC_RELEASE);
        }
    }
    sub_close(s);
    if (s->query != NULL)
        redisFree(s->query);
    s->query = NULL;
    return NULL;
}

/* The node layer's trouble hook (any thread): wake the discovery thread
 * once per burst, not once per failed command. */
static void on_trouble(void *arg, const char *why)
{
    (void)why;
    struct rs *s = arg;
    if (__atomic_exchange_n(&s->ask, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    uint64_t one = 1;
    if (write(s->efd, &one, sizeof(one)) < 0) {
        /* the counter is full: a wake-up is pending anyway */
    }
}

/* ---------------------------------------------------------------- ops */

static enum lk_code rs_attach(void *state, struct lk_loop *lp)
{
    struct rs *s = state;
    return s->inner.ops->attach(s->inner.state, lp);
}

static void rs_detach(void *state, struct lk_loop *lp)
{
    struct rs *s = state;
    s->inner.ops->detach(s->inner.state, lp);
}

static enum lk_code rs_submit(void *state, struct lk_loop *lp, const struct bk_req *req,
                              bk_done_fn done, void *arg)
{
    struct rs *s = state;
    return s->inner.ops->submit(s->inner.state, lp, req, done, arg);
}

/* The lock layer's grants table. Janitor thread. */
static void rs_sweep(void *state)
{
    struct rs *s = state;
    if (s->inner.ops->sweep != NULL)
        s->inner.ops->sweep(s->inner.state);
}

static size_t rs_nodes(void *state, struct bk_node *out, size_t max)
{
    struct rs *s = state;
    return s->inner.ops->nodes(s->inner.state, out, max);
}

static void rs_set_release_hook(void *state, bk_release_fn fn, void *arg)
{
    struct rs *s = state;
    s->inner.ops->set_release_hook(s->inner.state, fn, arg);
}

static void rs_watch(void *state, const char *name, bool on)
{
    struct rs *s = state;
    s->inner.ops->watch(s->inner.state, name, on);
}

/* The thread first (it moves the node), then the lock layer (its threads
 * may still report trouble to us until they stop), then us. */
static void rs_free(void *state)
{
    struct rs *s = state;
    if (s == NULL)
        return;
    if (s->running) {
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (write(s->efd, &one, sizeof(one)) < 0) {
            /* full: the thread wakes anyway */
        }
        pthread_join(s->th, NULL);
    }
    if (s->inner.ops != NULL)
        s->inner.ops->free(s->inner.state);
    if (s->efd >= 0)
        close(s->efd);
    memset(s->sentinels, 0, sizeof(s->sentinels)); /* passwords */
    free(s);
}

static const struct backend_ops rs_ops = {
    .name = "sentinel",
    .caps = BK_CAP_SHARED | BK_CAP_LIMIT | BK_CAP_FLOOR | BK_CAP_FORCE | BK_CAP_INDEX |
            BK_CAP_MULTI | BK_CAP_GROUP | BK_CAP_HANDOFF, /* the lock layer's */
    .attach = rs_attach,
    .detach = rs_detach,
    .submit = rs_submit,
    .sweep = rs_sweep,
    .nodes = rs_nodes,
    .set_release_hook = rs_set_release_hook,
    .watch = rs_watch,
    .free = rs_free,
};

/* ---------------------------------------------------------------- open */

static enum lk_code parse_sentinels(struct rs *s, const char *urls, char *err, size_t errlen)
{
    enum lk_code rc = redis_url_parse_list(urls, s->sentinels, RS_MAX_SENTINELS, &s->n,
                                           "backend sentinel", err, errlen);
    if (rc != LK_OK)
        return rc;
    if (s->n == 0) {
        snprintf(err, errlen, "backend 'sentinel' needs the sentinels' URLs in 'redis'");
        return LK_INVALID;
    }
    return LK_OK;
}

/* What backend_sentinel_new checks before asking any sentinel. */
static enum lk_code check_config(struct rs *s, const struct lk_config *cfg, char *err,
                                 size_t errlen)
{
    enum lk_code rc = parse_sentinels(s, cfg->redis ? cfg->redis : "", err, errlen);
    if (rc != LK_OK)
        return rc;
    if (cfg->redis_master_name == NULL || cfg->redis_master_name[0] == '\0') {
        snprintf(err, errlen, "backend 'sentinel' needs 'redis_master_name'");
        return LK_INVALID;
    }
    return LK_OK;
}

enum lk_code backend_sentinel_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    struct rs *s = lk_calloc(1, sizeof(*s));
    enum lk_code rc = check_config(s, cfg, err, errlen);
    memset(s->sentinels, 0, sizeof(s->sentinels)); /* passwords */
    free(s);
    return rc;
}

enum lk_code backend_sentinel_new(const struct lk_config *cfg, struct backend *out, char *err,
                                  size_t errlen)
{
    struct rs *s = lk_calloc(1, sizeof(*s));
    s->efd = -1;
    enum lk_code rc = check_config(s, cfg, err, errlen);
    if (rc != LK_OK)
        goto fail;
    lk_strlcpy(s->master, cfg->redis_master_name, sizeof(s->master));
    s->timeout_ms = cfg->backend_timeout_ms > 0 ? cfg->backend_timeout_ms : 2000;
    /* Once, at startup, like the single-Redis probe: nothing serves yet. */
    int found = discover(s, s->host, sizeof(s->host), &s->port);
    if (found != 1) {
        if (found == 0)
            snprintf(err, errlen, "the sentinels do not know a primary named '%s'", s->master);
        else
            snprintf(err, errlen, "cannot ask the sentinels for primary '%s': none answered",
                     s->master);
        rc = found == 0 ? LK_INVALID : LK_BACKEND_DOWN;
        goto fail;
    }
    lk_log(LK_INFO, "sentinels name '%s:%d' the primary of '%s'", s->host, s->port, s->master);
    /* The data nodes' credentials: redis_master_user/password, else the
     * first sentinel URL's userinfo; its database too. */
    struct redis_url data = s->sentinels[0];
    lk_strlcpy(data.host, s->host, sizeof(data.host));
    data.port = s->port;
    if (cfg->redis_master_password != NULL && cfg->redis_master_password[0] != '\0') {
        lk_strlcpy(data.password, cfg->redis_master_password, sizeof(data.password));
        lk_strlcpy(data.user, cfg->redis_master_user ? cfg->redis_master_user : "",
                   sizeof(data.user));
    } else if (cfg->redis_master_user != NULL && cfg->redis_master_user[0] != '\0') {
        lk_strlcpy(data.user, cfg->redis_master_user, sizeof(data.user));
    }
    rc = redis_lock_open(&data, cfg, &s->inner, err, errlen);
    memset(&data, 0, sizeof(data));
    if (rc != LK_OK) {
        s->inner.ops = NULL;
        goto fail;
    }
    s->node = redis_lock_node(s->inner.state);
    rn_node_set_trouble(s->node, on_trouble, s);
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0 || pthread_create(&s->th, NULL, rs_main, s) != 0) {
        snprintf(err, errlen, "cannot start the sentinel thread");
        rc = LK_INTERNAL;
        goto fail;
    }
    s->running = true;
    out->ops = &rs_ops;
    out->state = s;
    return LK_OK;
fail:
    rs_free(s);
    return rc;
}
