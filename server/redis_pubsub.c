/*
 * redis_pubsub.c - the Redis backend's subscriber thread: one connection of
 * its own that subscribes to a lock's release channel while lockd has
 * waiters for it, and hands each release message (and each subscription
 * confirmation) to the engine's hook. The watch table lives on this thread;
 * rb_watch() and rb_set_release_hook() may be called from any thread.
 */
#include <stdlib.h>
#include <string.h>

#include "server/log.h"
#include "server/loop.h"
#include "server/redis_int.h"

static void sub_send(struct rb *bk, const char *cmd, const char *const *names, size_t n);

/* The lock name of channel "<prefix>released:{<name>}" into out; false if
 * it is not one of ours. */
static bool channel_name(const struct rb *bk, const redisReply *ch, char out[LK_NAME_MAX + 1])
{
    size_t pl = bk->prefix_len + strlen("released:{");
    if (ch->type != REDIS_REPLY_STRING || ch->len < pl + 2 || ch->len - pl - 1 > LK_NAME_MAX ||
        memcmp(ch->str, bk->prefix, bk->prefix_len) != 0 ||
        memcmp(ch->str + bk->prefix_len, "released:{", pl - bk->prefix_len) != 0 ||
        ch->str[ch->len - 1] != '}')
        return false;
    size_t nl = ch->len - pl - 1;
    memcpy(out, ch->str + pl, nl);
    out[nl] = '\0';
    return lk_name_valid(out, nl);
}

static void call_hook(struct rb *bk, const char *name)
{
    pthread_mutex_lock(&bk->mu);
    bk_release_fn fn = bk->hook;
    void *arg = bk->hook_arg;
    pthread_mutex_unlock(&bk->mu);
    if (fn != NULL)
        fn(arg, name);
}

/* On the subscriber thread: a release message names the lock. A subscribe
 * confirmation wakes the name's waiters too: a release published between
 * their first attempt and this moment was not heard. */
static void on_message(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct rb *bk = priv;
    redisReply *reply = r;
    if (!rb_is_array(reply, 3) || reply->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *type = reply->element[0]->str;
    char name[LK_NAME_MAX + 1];
    if (strcmp(type, "subscribe") == 0) {
        if (channel_name(bk, reply->element[1], name))
            call_hook(bk, name);
        return;
    }
    if (strcmp(type, "unsubscribe") == 0) {
        struct watch_ent *w = NULL;
        if (!channel_name(bk, reply->element[1], name))
            return;
        HASH_FIND_STR(bk->watched, name, w);
        if (w == NULL || !w->unsub_inflight)
            return;
        w->unsub_inflight = false;
        if (w->refs > 0) {
            const char *names[1] = {w->name};
            sub_send(bk, "SUBSCRIBE", names, 1); /* watched again meanwhile */
        } else {
            HASH_DEL(bk->watched, w);
            free(w);
        }
        return;
    }
    if (strcmp(type, "message") != 0 || reply->element[2]->type != REDIS_REPLY_STRING)
        return;
    /* The channel names the lock; the message, who released it. */
    const redisReply *m = reply->element[2];
    if (!channel_name(bk, reply->element[1], name))
        return;
    if (m->len == strlen(bk->instance) && memcmp(m->str, bk->instance, m->len) == 0)
        return; /* our own release: its waiters were woken when it was answered */
    call_hook(bk, name);
}

static void sub_send(struct rb *bk, const char *cmd, const char *const *names, size_t n)
{
    struct rconn *c = bk->sub;
    if (c == NULL || c->ac == NULL || c->state != RC_READY || n == 0)
        return;
    struct argb b = {0};
    rb_argb_str(&b, cmd);
    for (size_t i = 0; i < n; i++)
        rb_argb_channel(&b, bk, names[i]);
    const char **argv = lk_malloc((size_t)b.n * sizeof(*argv));
    for (int i = 0; i < b.n; i++)
        argv[i] = b.buf + b.off[i];
    /* UNSUBSCRIBE takes no callback in hiredis: each channel's entry goes */
    int rc = strcmp(cmd, "SUBSCRIBE") == 0
                 ? redisAsyncCommandArgv(c->ac, on_message, bk, b.n, argv, b.lens)
                 : redisAsyncCommandArgv(c->ac, NULL, NULL, b.n, argv, b.lens);
    if (rc != REDIS_OK)
        lk_log(LK_WARN, "cannot %s on redis '%s'", cmd, bk->addr);
    free(argv);
    free(b.buf);
    free(b.off);
    free(b.lens);
}

/* A new subscriber connection has none of the old subscriptions: subscribe
 * every watched name again, then wake each name's waiters once, since a
 * release may have been published while we were not listening. */
void rb_sub_connected(struct rconn *c)
{
    struct rb *bk = c->bk;
    const char *names[RB_SUB_CHUNK];
    size_t n = 0;
    struct watch_ent *w, *tmp;
    HASH_ITER (hh, bk->watched, w, tmp) {
        w->unsub_inflight = false; /* a new connection: nothing in flight */
        if (w->refs <= 0) {
            HASH_DEL(bk->watched, w);
            free(w);
            continue;
        }
        names[n++] = w->name;
        if (n == RB_SUB_CHUNK) {
            sub_send(bk, "SUBSCRIBE", names, n);
            n = 0;
        }
    }
    /* each confirmation wakes its name's waiters (on_message): only then is
     * a release that happened while we were away sure to be noticed */
    sub_send(bk, "SUBSCRIBE", names, n);
}

struct watch_msg {
    struct rb *bk;
    bool on;
    char name[LK_NAME_MAX + 1];
};

static void sub_watch(void *p)
{
    struct watch_msg *m = p;
    struct rb *bk = m->bk;
    struct watch_ent *w = NULL;
    const char *names[1] = {m->name};
    HASH_FIND_STR(bk->watched, m->name, w);
    struct rconn *c = bk->sub;
    bool up = c != NULL && c->ac != NULL && c->state == RC_READY;
    if (m->on) {
        if (w == NULL) {
            w = lk_calloc(1, sizeof(*w));
            lk_strlcpy(w->name, m->name, sizeof(w->name));
            HASH_ADD_STR(bk->watched, name, w);
            sub_send(bk, "SUBSCRIBE", names, 1);
        }
        /* refs 0 with an UNSUBSCRIBE in flight: its confirmation resubscribes */
        w->refs++;
    } else if (w != NULL && --w->refs <= 0) {
        if (up && !w->unsub_inflight) {
            w->unsub_inflight = true; /* the entry goes when Redis confirms */
            sub_send(bk, "UNSUBSCRIBE", names, 1);
        } else if (!up) {
            HASH_DEL(bk->watched, w);
            free(w);
        }
    }
    free(m);
}

void rb_watch(void *state, const char *name, bool on)
{
    struct rb *bk = state;
    if (strlen(name) > LK_NAME_MAX)
        return;
    struct watch_msg *m = lk_calloc(1, sizeof(*m));
    m->bk = bk;
    m->on = on;
    lk_strlcpy(m->name, name, sizeof(m->name));
    loop_post(bk->sub_lp, sub_watch, m); /* the table and connection live on that thread */
}

void rb_set_release_hook(void *state, bk_release_fn fn, void *arg)
{
    struct rb *bk = state;
    pthread_mutex_lock(&bk->mu);
    bk->hook = fn;
    bk->hook_arg = arg;
    pthread_mutex_unlock(&bk->mu);
}

void rb_sub_init(void *p)
{
    struct rb *bk = p;
    struct rconn *c = rb_conn_new(bk, loop_ev(bk->sub_lp), true);
    pthread_mutex_lock(&bk->mu);
    bk->sub = c;
    pthread_mutex_unlock(&bk->mu);
    rb_conn_start(c);
}

void rb_sub_fini(void *p)
{
    struct rb *bk = p;
    pthread_mutex_lock(&bk->mu);
    struct rconn *c = bk->sub;
    bk->sub = NULL;
    pthread_mutex_unlock(&bk->mu);
    if (c != NULL)
        rb_conn_free(c);
    struct watch_ent *w, *tmp;
    HASH_ITER (hh, bk->watched, w, tmp) {
        HASH_DEL(bk->watched, w);
        free(w);
    }
    loop_stop(bk->sub_lp);
}

void *rb_sub_main(void *p)
{
    struct rb *bk = p;
    loop_run(bk->sub_lp);
    return NULL;
}
