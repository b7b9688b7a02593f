/*
 * redis_pubsub.c - the Redis backend's subscriber thread (see
 * redis_pubsub.h): one node-layer connection of its own that subscribes to
 * a lock's release channel while lockd has waiters for it (and lingers a
 * second after). The watch table
 * and the connection live on this thread; rps_watch() and rps_set_hook()
 * may be called from any thread. Depends on the node layer only.
 */
#include "server/redis_pubsub.h"

#include <ev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/hash.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/redis_args.h"
#include "server/redis_compat.h"
#include "server/redis_node.h"
#include "server/util.h"

struct watch_ent {
    UT_hash_handle hh;
    int refs;
    struct rcompat_chan chan; /* the UNSUBSCRIBE quirk, see redis_compat.h */
    /* refs 0 and still subscribed until idle_until_ms (0: not lingering),
     * on ps->linger in that order */
    int64_t idle_until_ms;
    struct watch_ent *lprev, *lnext;
    char name[LK_NAME_MAX + 1];
};

/* A name whose last waiter left stays subscribed this long (at most
 * RPS_LINGER_MAX names at once), so that a busy name's queue emptying and
 * filling again costs no UNSUBSCRIBE + SUBSCRIBE each time (the read-mostly
 * load's 0.2 of each per pair, bench/RESULTS.md). Messages meanwhile wake
 * nobody (no waiters). */
#define RPS_LINGER_MS 1000
#define RPS_LINGER_MAX 1024

struct rps {
    struct rn_node *node;
    char *prefix;
    size_t prefix_len;
    char instance[64];

    pthread_mutex_t mu; /* guards hook */
    bk_release_fn hook;
    void *hook_arg;

    /* Redis Cluster: the channels are shard channels (SSUBSCRIBE) on the
     * primary that owns their slot. hiredis 0.14 knows SUBSCRIBE alone, so
     * each channel is also SUBSCRIBEd plainly (nothing publishes there): that
     * is what makes hiredis route the channel's smessage, ssubscribe and
     * sunsubscribe pushes to on_message. Set before the thread starts. */
    bool sharded;
    struct lk_loop *lp; /* the subscriber thread's loop */
    pthread_t th;
    bool running;
    /* subscriber thread only */
    struct rn_conn *conn;
    struct watch_ent *watched;
    struct watch_ent *linger_head, *linger_tail; /* oldest first */
    int lingering;
    ev_timer linger_timer;
};

static void sub_send(struct rps *ps, bool subscribe, const char *const *names, size_t n);

/* The lock name of channel "<prefix>released:{<name>}" into out; false if
 * it is not one of ours. */
static bool channel_name(const struct rps *ps, const redisReply *ch, char out[LK_NAME_MAX + 1])
{
    size_t il = strlen(RPS_CHANNEL_INFIX);
    size_t pl = ps->prefix_len + il + 1;
    if (ch->type != REDIS_REPLY_STRING || ch->len < pl + 2 || ch->len - pl - 1 > LK_NAME_MAX ||
        memcmp(ch->str, ps->prefix, ps->prefix_len) != 0 ||
        memcmp(ch->str + ps->prefix_len, RPS_CHANNEL_INFIX, il) != 0 || ch->str[pl - 1] != '{' ||
        ch->str[ch->len - 1] != '}')
        return false;
    size_t nl = ch->len - pl - 1;
    memcpy(out, ch->str + pl, nl);
    out[nl] = '\0';
    return lk_name_valid(out, nl);
}

static void call_hook(struct rps *ps, const char *name, enum bk_news what, int64_t ttl_ms)
{
    pthread_mutex_lock(&ps->mu);
    bk_release_fn fn = ps->hook;
    void *arg = ps->hook_arg;
    pthread_mutex_unlock(&ps->mu);
    if (fn != NULL)
        fn(arg, name, what, ttl_ms);
}

/* A message on a lock's channel: 'g' a grant (_acquire.lua,
 * _acquire_shared.lua), 'r<ttl_ms>' a renewal that shortened a lease
 * (_shared.lua sh_shortened), anything else a release (the releasing
 * lockd's instance id). A malformed 'r' counts as a release: its waiters
 * look again, which is never wrong. */
static void call_hook_msg(struct rps *ps, const char *name, const char *s, size_t len)
{
    if (len == 1 && s[0] == 'g') {
        call_hook(ps, name, BK_NEWS_GRANTED, 0);
        return;
    }
    int64_t ttl = 0;
    bool shorter = len >= 2 && len <= 10 && s[0] == 'r';
    for (size_t i = 1; shorter && i < len; i++) {
        shorter = s[i] >= '0' && s[i] <= '9';
        ttl = ttl * 10 + (s[i] - '0');
    }
    if (shorter)
        call_hook(ps, name, BK_NEWS_SHORTER, ttl);
    else
        call_hook(ps, name, BK_NEWS_RELEASED, 0);
}

static void linger_unlink(struct rps *ps, struct watch_ent *w)
{
    if (w->idle_until_ms == 0)
        return;
    if (w->lprev != NULL)
        w->lprev->lnext = w->lnext;
    else
        ps->linger_head = w->lnext;
    if (w->lnext != NULL)
        w->lnext->lprev = w->lprev;
    else
        ps->linger_tail = w->lprev;
    w->lprev = w->lnext = NULL;
    w->idle_until_ms = 0;
    ps->lingering--;
}

static void unwatch_ent(struct rps *ps, struct watch_ent *w)
{
    linger_unlink(ps, w);
    HASH_DEL(ps->watched, w);
    free(w);
}

/* On the subscriber thread: a release message names the lock. A subscribe
 * confirmation wakes the name's waiters too: a release published between
 * their first attempt and this moment was not heard. */
static void on_message(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct rps *ps = priv;
    redisReply *reply = r;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *type = reply->element[0]->str;
    char name[LK_NAME_MAX + 1];
    if (ps->sharded && type[0] == 's') {
        /* smessage/ssubscribe as message/subscribe; a sunsubscribe (ours,
         * or the slot moved away) changes nothing here: the plain
         * subscription tracks the watch, the router moves it */
        if (strcmp(type, "sunsubscribe") == 0)
            return;
        type++;
    }
    if (strcmp(type, "subscribe") == 0) {
        if (channel_name(ps, reply->element[1], name))
            call_hook(ps, name, BK_NEWS_RELEASED, 0);
        return;
    }
    if (strcmp(type, "unsubscribe") == 0) {
        struct watch_ent *w = NULL;
        if (!channel_name(ps, reply->element[1], name))
            return;
        HASH_FIND_STR(ps->watched, name, w);
        if (w == NULL || !w->chan.unsub_inflight)
            return;
        if (rcompat_chan_unsubscribed(&w->chan)) {
            const char *names[1] = {w->name};
            sub_send(ps, true, names, 1); /* watched again meanwhile */
        } else {
            unwatch_ent(ps, w);
        }
        return;
    }
    if (strcmp(type, "message") != 0 || reply->element[2]->type != REDIS_REPLY_STRING)
        return;
    /* The channel names the lock; the message, who released it. */
    const redisReply *m = reply->element[2];
    if (!channel_name(ps, reply->element[1], name))
        return;
    if (m->len == strlen(ps->instance) && memcmp(m->str, ps->instance, m->len) == 0)
        return; /* our own release: its waiters were woken when it was answered */
    call_hook_msg(ps, name, m->str, m->len);
}

/* Redis Cluster: SSUBSCRIBE or SUNSUBSCRIBE for each name, one command
 * each (the channels of one command must share a slot). Their replies come
 * through the plain subscription's callback (see struct rps). */
static void sub_send_sharded(struct rps *ps, bool subscribe, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct rargs b = {0};
        rargs_str(&b, subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE");
        rargs_tagged(&b, ps->prefix, ps->prefix_len, RPS_CHANNEL_INFIX, names[i], "");
        const char *argv[2] = {b.buf + b.off[0], b.buf + b.off[1]};
        if (rn_conn_raw(ps->conn, NULL, NULL, 2, argv, b.lens) != 0)
            lk_log(LK_WARN, "cannot %s on redis '%s'", argv[0], rn_node_addr(ps->node));
        rargs_free(&b);
    }
}

static void sub_send(struct rps *ps, bool subscribe, const char *const *names, size_t n)
{
    if (n == 0 || !rn_conn_ready(ps->conn))
        return;
    if (ps->sharded && !subscribe)
        sub_send_sharded(ps, false, names, n); /* before the plain one drops the callback */
    struct rargs b = {0};
    rargs_str(&b, subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE");
    for (size_t i = 0; i < n; i++)
        rargs_tagged(&b, ps->prefix, ps->prefix_len, RPS_CHANNEL_INFIX, names[i], "");
    const char **argv = lk_malloc((size_t)b.n * sizeof(*argv));
    for (int i = 0; i < b.n; i++)
        argv[i] = b.buf + b.off[i];
    /* UNSUBSCRIBE takes no callback in hiredis: each channel's entry goes */
    int rc = rn_conn_raw(ps->conn, subscribe ? on_message : NULL, subscribe ? ps : NULL, b.n, argv,
                         b.lens);
    if (rc != 0)
        lk_log(LK_WARN, "cannot %s on redis '%s'", subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE",
               rn_node_addr(ps->node));
    free(argv);
    rargs_free(&b);
    if (ps->sharded && subscribe && rc == 0)
        sub_send_sharded(ps, true, names, n); /* after: its pushes need the callback */
}

/* A new subscriber connection has none of the old subscriptions: subscribe
 * every watched name again; each confirmation wakes its name's waiters
 * (on_message), since a release may have been published while we were not
 * listening. */
static void on_ready(void *arg, struct rn_conn *c)
{
    (void)c;
    struct rps *ps = arg;
    const char *names[RPS_SUB_CHUNK];
    size_t n = 0;
    struct watch_ent *w, *tmp;
    HASH_ITER (hh, ps->watched, w, tmp) {
        w->chan.unsub_inflight = false; /* a new connection: nothing in flight */
        if (w->refs <= 0) {
            unwatch_ent(ps, w);
            continue;
        }
        (void)rcompat_chan_may_subscribe(&w->chan);
        names[n++] = w->name;
        if (n == RPS_SUB_CHUNK) {
            sub_send(ps, true, names, n);
            n = 0;
        }
    }
    sub_send(ps, true, names, n);
}

struct watch_msg {
    struct rps *ps;
    bool on;
    char name[LK_NAME_MAX + 1];
};

/* w's last watcher left (refs 0): UNSUBSCRIBE now, or (lingering) later. */
static void unsubscribe_ent(struct rps *ps, struct watch_ent *w)
{
    const char *names[1] = {w->name};
    bool up = rn_conn_ready(ps->conn);
    if (up && !w->chan.unsub_inflight) {
        rcompat_chan_unsubscribing(&w->chan); /* the entry goes when Redis confirms */
        sub_send(ps, false, names, 1);
    } else if (!up) {
        unwatch_ent(ps, w);
    } else {
        w->chan.want = false; /* the pending confirmation removes it */
    }
}

/* Every RPS_LINGER_MS / 2 while names linger: those past their time go. */
static void on_linger_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct rps *ps = t->data;
    int64_t now = lk_now_ms();
    while (ps->linger_head != NULL && ps->linger_head->idle_until_ms <= now) {
        struct watch_ent *w = ps->linger_head;
        linger_unlink(ps, w);
        unsubscribe_ent(ps, w);
    }
    if (ps->linger_head == NULL)
        ev_timer_stop(loop_ev(ps->lp), &ps->linger_timer);
}

static void sub_watch(void *p)
{
    struct watch_msg *m = p;
    struct rps *ps = m->ps;
    struct watch_ent *w = NULL;
    const char *names[1] = {m->name};
    HASH_FIND_STR(ps->watched, m->name, w);
    bool up = rn_conn_ready(ps->conn);
    if (m->on) {
        if (w == NULL) {
            w = lk_calloc(1, sizeof(*w));
            lk_strlcpy(w->name, m->name, sizeof(w->name));
            HASH_ADD_STR(ps->watched, name, w);
        }
        if (w->refs++ == 0) {
            if (w->idle_until_ms != 0)
                linger_unlink(ps, w); /* still subscribed: nothing to send */
            else if (rcompat_chan_may_subscribe(&w->chan))
                sub_send(ps, true, names, 1);
            /* else an UNSUBSCRIBE in flight: its confirmation resubscribes */
        }
    } else if (w != NULL && --w->refs <= 0) {
        if (up && !w->chan.unsub_inflight && w->idle_until_ms == 0 &&
            ps->lingering < RPS_LINGER_MAX) {
            /* linger: subscribed a while longer, newest last */
            w->idle_until_ms = lk_now_ms() + RPS_LINGER_MS;
            w->lprev = ps->linger_tail;
            w->lnext = NULL;
            if (ps->linger_tail != NULL)
                ps->linger_tail->lnext = w;
            else
                ps->linger_head = w;
            ps->linger_tail = w;
            ps->lingering++;
            if (!ev_is_active(&ps->linger_timer))
                ev_timer_start(loop_ev(ps->lp), &ps->linger_timer);
        } else if (w->idle_until_ms == 0) {
            unsubscribe_ent(ps, w);
        }
    }
    free(m);
}

void rps_watch(struct rps *ps, const char *name, bool on)
{
    if (ps == NULL || strlen(name) > LK_NAME_MAX)
        return;
    struct watch_msg *m = lk_calloc(1, sizeof(*m));
    m->ps = ps;
    m->on = on;
    lk_strlcpy(m->name, name, sizeof(m->name));
    loop_post(ps->lp, sub_watch, m); /* the table and connection live on that thread */
}

void rps_set_hook(struct rps *ps, bk_release_fn fn, void *arg)
{
    pthread_mutex_lock(&ps->mu);
    ps->hook = fn;
    ps->hook_arg = arg;
    pthread_mutex_unlock(&ps->mu);
}

static void sub_init(void *p)
{
    struct rps *ps = p;
    static const struct rn_conn_hooks hooks = {.ready = on_ready, .pubsub = true};
    ps->conn = rn_conn_new(ps->node, loop_ev(ps->lp), &hooks, ps);
    double every = RPS_LINGER_MS / 2000.0;
    ev_timer_init(&ps->linger_timer, on_linger_timer, every, every);
    ps->linger_timer.data = ps;
}

static void sub_fini(void *p)
{
    struct rps *ps = p;
    if (ps->conn != NULL)
        rn_conn_free(ps->conn);
    ps->conn = NULL;
    ev_timer_stop(loop_ev(ps->lp), &ps->linger_timer);
    struct watch_ent *w, *tmp;
    HASH_ITER (hh, ps->watched, w, tmp)
        unwatch_ent(ps, w);
    loop_stop(ps->lp);
}

static void *sub_main(void *p)
{
    struct rps *ps = p;
    loop_run(ps->lp);
    return NULL;
}

struct rps *rps_new(struct rn_node *node, const char *prefix, const char *instance)
{
    return rps_new_sharded(node, prefix, instance, false);
}

struct rps *rps_new_sharded(struct rn_node *node, const char *prefix, const char *instance,
                            bool sharded)
{
    struct rps *ps = lk_calloc(1, sizeof(*ps));
    ps->sharded = sharded;
    ps->node = node;
    ps->prefix = lk_strdup(prefix);
    ps->prefix_len = strlen(prefix);
    lk_strlcpy(ps->instance, instance, sizeof(ps->instance));
    pthread_mutex_init(&ps->mu, NULL);
    ps->lp = loop_new(-1);
    loop_post(ps->lp, sub_init, ps); /* runs first thing on the new thread */
    if (pthread_create(&ps->th, NULL, sub_main, ps) != 0) {
        rps_free(ps);
        return NULL;
    }
    ps->running = true;
    return ps;
}

void rps_free(struct rps *ps)
{
    if (ps == NULL)
        return;
    if (ps->running) {
        loop_post(ps->lp, sub_fini, ps);
        pthread_join(ps->th, NULL);
    }
    loop_free(ps->lp);
    pthread_mutex_destroy(&ps->mu);
    free(ps->prefix);
    free(ps);
}
