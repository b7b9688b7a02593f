/*
 * redis_int.h - what backend_redis.c (connections, commands, operations)
 * and redis_pubsub.c (the subscriber thread) share. Private to those two
 * files: nothing else includes it.
 */
#ifndef LOCKD_SERVER_REDIS_INT_H
#define LOCKD_SERVER_REDIS_INT_H

#include <ev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/backend.h"
#include "server/hash.h"
#include "server/redis_url.h"
#include "server/util.h"

struct lk_loop;

#define RB_MAX_LOOPS 256       /* loop_index() values we accept */
#define RB_BATCH 200           /* leases per renew_many EVALSHA */
#define RB_BACKOFF_MIN_MS 50   /* first reconnect delay (before jitter) */
#define RB_BACKOFF_MAX_MS 1000 /* cap: a restarted Redis is found within ~1 s */
#define RB_SUB_CHUNK 256       /* channels per SUBSCRIBE after a reconnect */
#define RB_GROUP_MAX 16        /* acquires (releases) per acquire_many (release_many) */

enum {
    SC_ACQUIRE,
    SC_RENEW,
    SC_RELEASE,
    SC_INSPECT,
    SC_LIST,
    SC_RENEW_MANY,
    SC_ACQUIRE_MANY,
    SC_RELEASE_MANY,
    SC_COUNT
};

enum { GQ_ACQUIRE, GQ_RELEASE, GQ_COUNT }; /* operations grouped per loop turn */

struct rcmd;

struct rscript {
    const char *name;
    const char *body;
    size_t len;
    char sha[41];
};

enum rc_state { RC_DOWN, RC_CONNECTING, RC_READY };

/* One async connection, owned by one loop thread (a worker loop, or the
 * subscriber thread). Only `up` and `reason` are read by other threads,
 * under rb.mu. */
struct rconn {
    struct rb *bk;
    struct ev_loop *ev;
    redisAsyncContext *ac; /* NULL while down; never reused once it failed */
    enum rc_state state;
    bool is_sub;
    bool closing;   /* detach/free in progress: no reconnect */
    int attempt;    /* consecutive failures, for the backoff */
    int hello_left; /* AUTH/SELECT replies still to come */
    int unflushed;  /* commands queued since our last eager write */
    uint64_t rng;
    int64_t last_err_log_ms;
    ev_timer retry;    /* backoff before the next connect */
    ev_timer deadline; /* connect + AUTH/SELECT must finish by then */
    /* Acquires and releases made during this loop turn, sent as one script
     * call per kind when RB_GROUP_MAX are queued or before the loop sleeps
     * (`flush`, which runs after every other prepare watcher). */
    struct rcmd *queued[GQ_COUNT][RB_GROUP_MAX];
    int nqueued[GQ_COUNT];
    ev_prepare flush;
    /* under rb.mu */
    bool up;
    char reason[128];
};

struct watch_ent {
    UT_hash_handle hh;
    int refs;
    /* UNSUBSCRIBE sent, its confirmation not back yet. hiredis 0.14 keys
     * channel callbacks by name and drops the entry when that confirmation
     * arrives, even if a SUBSCRIBE for the same channel was sent after it
     * (its messages would then be dropped): never SUBSCRIBE while this is
     * set; the confirmation subscribes again if refs went back up. */
    bool unsub_inflight;
    char name[LK_NAME_MAX + 1];
};

struct rb {
    char instance[17]; /* random id: release messages this lockd published carry it */
    struct redis_url url;
    char addr[300];         /* host:port, for logs and nodes(); never the password */
    char connect_host[256]; /* numeric address resolved at startup, else the host name */
    char *prefix;
    size_t prefix_len;
    char prefix_len_str[24]; /* release_many.lua's second argument */
    int64_t timeout_ms;
    int64_t wait_replicas;
    struct rscript scripts[SC_COUNT];

    pthread_mutex_t mu; /* guards conns[] membership, each conn's up/reason, hook */
    struct rconn *conns[RB_MAX_LOOPS];
    struct rconn *sub;
    bool startup_up;
    char startup_reason[128];
    char role_reason[64]; /* "" or why ROLE says it takes no writes (a replica) */
    bool logged_up;       /* the node state last logged */
    char logged_reason[128];
    bk_release_fn hook;
    void *hook_arg;

    struct lk_loop *sub_lp; /* the subscriber thread's loop */
    pthread_t sub_th;
    bool sub_running;
    struct watch_ent *watched; /* subscriber thread only */
};

/* An argv under construction: one buffer, offsets and lengths. */
struct argb {
    char *buf;
    size_t len, cap;
    size_t *off, *lens;
    int n, ncap;
};

void rb_argb_put(struct argb *b, const char *s, size_t len);
void rb_argb_str(struct argb *b, const char *s);
/* <prefix>released:{<name>}, the lock's release channel. */
void rb_argb_channel(struct argb *b, const struct rb *bk, const char *name);
bool rb_is_array(const redisReply *r, size_t min);

/* Connections (backend_redis.c); on the owning loop's thread. */
struct rconn *rb_conn_new(struct rb *bk, struct ev_loop *ev, bool is_sub);
void rb_conn_start(struct rconn *c);
void rb_conn_free(struct rconn *c);

/* The subscriber thread (redis_pubsub.c). */
/* A subscriber connection became ready: subscribe every watched name again. */
void rb_sub_connected(struct rconn *c);
/* loop_post() targets and the thread body of bk->sub_lp. */
void rb_sub_init(void *bk);
void rb_sub_fini(void *bk);
void *rb_sub_main(void *bk);
/* backend_ops.watch and .set_release_hook: any thread. */
void rb_watch(void *state, const char *name, bool on);
void rb_set_release_hook(void *state, bk_release_fn fn, void *arg);

#endif
