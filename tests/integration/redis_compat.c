/*
 * redis_compat.c - one test per hiredis quirk that server/redis_compat.c
 * hides, against a real redis-server: each fails if the quirk's handling
 * breaks (and, where a case shows the quirk itself, when a newer hiredis
 * no longer has it: then revisit redis_compat.c). Drives hiredis on a libev
 * loop of this thread.
 */
#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/loop.h"
#include "server/redis_compat.h"
#include "server/util.h"
#include "tests/lib/harness.h"

static struct th_redis R;
static struct ev_loop *EV;

static void on_tick(struct ev_loop *ev, ev_timer *w, int revents)
{
    (void)ev;
    (void)w;
    (void)revents;
}

/* Runs EV until *flag or timeout. */
static bool run_until(const bool *flag, int64_t timeout_ms)
{
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.005, 0.005);
    ev_timer_start(EV, &tick);
    int64_t end = th_now_ms() + timeout_ms;
    while (!*flag && th_now_ms() < end)
        ev_run(EV, EVRUN_ONCE);
    ev_timer_stop(EV, &tick);
    return *flag;
}

static bool connected_flag, connect_failed;
static char connect_err[128];

static void on_connect(const redisAsyncContext *ac, int status)
{
    if (status == REDIS_OK) {
        connected_flag = true;
        return;
    }
    snprintf(connect_err, sizeof(connect_err), "%s", rcompat_connect_error(ac));
    connect_failed = true;
}

static int disconnects_with_data;

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    (void)status;
    if (ac->data != NULL)
        disconnects_with_data++;
}

/* An async context on EV to port, connected (or failed, want_ok false). */
static redisAsyncContext *open_ctx(int port, bool want_ok)
{
    connected_flag = connect_failed = false;
    connect_err[0] = '\0';
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
    CHECK(ac != NULL);
    if (ac->err) {
        CHECK(!want_ok);
        snprintf(connect_err, sizeof(connect_err), "%s", rcompat_connect_error(ac));
        connect_failed = true;
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = &R; /* any non-NULL: "ours" */
    CHECK(redisLibevAttach(EV, ac) == REDIS_OK);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    return ac;
}

static bool get_is(const char *key, const char *want)
{
    char cmd[64], line[80];
    snprintf(cmd, sizeof(cmd), "GET %s", key);
    snprintf(line, sizeof(line), "%s\n", want);
    return strcmp(th_redis_cli(&R, cmd), line) == 0;
}

/* Quirk: no async "write now"; rcompat_write_now writes the queued command
 * without the loop running, and does nothing before the connect completes. */
static void t_write_now(void)
{
    th_redis_cli(&R, "DEL wn1 wn2");
    redisAsyncContext *ac = open_ctx(R.port, true);
    /* before the connect completed: nothing to write yet, no error */
    CHECK(redisAsyncCommand(ac, NULL, NULL, "SET wn0 x") == REDIS_OK);
    rcompat_write_now(ac);
    CHECK_EQ_INT(ac->err, 0);
    CHECK(run_until(&connected_flag, 2000));
    /* the quirk: queued, the loop not run, nothing reaches Redis */
    CHECK(redisAsyncCommand(ac, NULL, NULL, "SET wn1 v") == REDIS_OK);
    th_sleep_ms(150);
    CHECK(get_is("wn1", ""));
    /* its handling: written now, still without running the loop */
    rcompat_write_now(ac);
    int64_t end = th_now_ms() + 2000;
    while (!get_is("wn1", "v") && th_now_ms() < end)
        th_sleep_ms(10);
    CHECK(get_is("wn1", "v"));
    rcompat_free(ac);
}

/* Quirk: the connected state is only in the inner context's flags. */
static void t_connected(void)
{
    redisAsyncContext *ac = open_ctx(R.port, true);
    bool early = rcompat_connected(ac); /* a loopback connect may finish at once */
    CHECK(run_until(&connected_flag, 2000));
    CHECK(rcompat_connected(ac));
    printf("# connected before the loop ran: %s\n", early ? "yes" : "no");
    rcompat_free(ac);
}

/* Quirk: a failed connect's error text is in the inner context when the
 * connect callback runs (ac->errstr is still empty then). */
static void t_connect_error(void)
{
    struct th_redis r;
    th_redis_start(&r, 0, NULL);
    int port = r.port;
    th_redis_stop(&r);
    redisAsyncContext *ac = open_ctx(port, false);
    if (ac != NULL)
        CHECK(run_until(&connect_failed, 2000)); /* hiredis frees ac after the callback */
    CHECK(connect_failed);
    printf("# connect error: %s\n", connect_err);
    CHECK(strstr(connect_err, "refused") != NULL);
}

/* Quirk: keepalive is set on the inner context. */
static void t_keepalive(void)
{
    redisAsyncContext *ac = open_ctx(R.port, true);
    CHECK(run_until(&connected_flag, 2000));
    int on = 0;
    socklen_t len = sizeof(on);
    CHECK(getsockopt(ac->c.fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0);
    CHECK_EQ_INT(on, 0);
    rcompat_keepalive(ac);
    CHECK(getsockopt(ac->c.fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0);
    CHECK(on != 0);
    rcompat_free(ac);
}

struct cb {
    int calls;
    int nulls;
    bool done;
    bool in_first; /* set while the first callback runs */
    bool saw_in_first;
    redisAsyncContext *free_me;
};

static struct cb cb1, cb2;

static void on_reply2(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    struct cb *x = priv;
    x->calls++;
    if (r == NULL)
        x->nulls++;
    x->saw_in_first = cb1.in_first;
    x->done = true;
}

static void on_reply1(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    (void)r;
    struct cb *x = priv;
    x->calls++;
    x->done = true;
    if (x->free_me != NULL) {
        x->in_first = true;
        rcompat_free(x->free_me); /* inside a callback: deferred */
        x->in_first = false;
    }
}

/* Quirk: freeing a context calls every pending reply callback with NULL
 * (once), and calls the disconnect callback, which ignores it since
 * rcompat_free cleared ac->data; from inside a callback the free is
 * deferred until that callback returned. */
static void t_free_null_replies(void)
{
    th_redis_cli(&R, "DEL nolist");
    /* a pending command (BLPOP blocks), then our own free */
    memset(&cb2, 0, sizeof(cb2));
    disconnects_with_data = 0;
    redisAsyncContext *ac = open_ctx(R.port, true);
    CHECK(run_until(&connected_flag, 2000));
    CHECK(redisAsyncCommand(ac, on_reply2, &cb2, "BLPOP nolist 0") == REDIS_OK);
    bool never = false;
    (void)run_until(&never, 100); /* sent and blocking */
    rcompat_free(ac);
    CHECK_EQ_INT(cb2.calls, 1);
    CHECK_EQ_INT(cb2.nulls, 1);
    CHECK_EQ_INT(disconnects_with_data, 0);
    /* freed from inside the first command's callback: the second's NULL
     * comes after that callback returned, exactly once */
    memset(&cb1, 0, sizeof(cb1));
    memset(&cb2, 0, sizeof(cb2));
    ac = open_ctx(R.port, true);
    CHECK(run_until(&connected_flag, 2000));
    cb1.free_me = ac;
    CHECK(redisAsyncCommand(ac, on_reply1, &cb1, "PING") == REDIS_OK);
    CHECK(redisAsyncCommand(ac, on_reply2, &cb2, "BLPOP nolist 0") == REDIS_OK);
    CHECK(run_until(&cb2.done, 2000));
    CHECK_EQ_INT(cb1.calls, 1);
    CHECK_EQ_INT(cb2.calls, 1);
    CHECK_EQ_INT(cb2.nulls, 1);
    CHECK(!cb2.saw_in_first);
    CHECK_EQ_INT(disconnects_with_data, 0);
    (void)run_until(&never, 50);
    CHECK_EQ_INT(cb2.calls, 1);
}

/* ---- the UNSUBSCRIBE quirk ---- */

static int msgs;

static void on_msg(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    (void)priv;
    redisReply *reply = r;
    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
        strcmp(reply->element[0]->str, "message") == 0)
        msgs++;
}

static bool numsub_is(void *arg)
{
    const char *out = th_redis_cli(&R, "PUBSUB NUMSUB qch");
    const char *nl = strchr(out, '\n');
    return nl != NULL && atoi(nl + 1) == *(int *)arg;
}

/* The quirk itself, in plain hiredis: SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE of
 * one channel sent back to back. Upstream hiredis before its pending_subs
 * fix drops the channel's callback when the UNSUBSCRIBE confirmation comes
 * (the message is lost); the hiredis installed here may not. Printed, not
 * asserted: the handling below must be right either way. */
static void t_unsubscribe_quirk_probe(void)
{
    redisAsyncContext *ac = open_ctx(R.port, true);
    CHECK(run_until(&connected_flag, 2000));
    msgs = 0;
    CHECK(redisAsyncCommand(ac, on_msg, NULL, "SUBSCRIBE qch") == REDIS_OK);
    CHECK(redisAsyncCommand(ac, NULL, NULL, "UNSUBSCRIBE qch") == REDIS_OK);
    CHECK(redisAsyncCommand(ac, on_msg, NULL, "SUBSCRIBE qch") == REDIS_OK);
    bool never = false;
    int one = 1;
    int64_t end = th_now_ms() + 2000;
    while (!numsub_is(&one) && th_now_ms() < end)
        (void)run_until(&never, 10);
    (void)run_until(&never, 100);
    CHECK(numsub_is(&one)); /* Redis: subscribed */
    th_redis_cli(&R, "PUBLISH qch hello");
    (void)run_until(&never, 200);
    printf("# hiredis %d.%d.%d: %d of 1 message delivered after sub/unsub/sub (%s)\n",
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, msgs,
           msgs == 0 ? "the quirk is there" : "this build keeps the callback");
    CHECK(msgs == 0 || msgs == 1);
    rcompat_free(ac);
}

/* Its handling as a state machine: no SUBSCRIBE while an UNSUBSCRIBE is
 * unconfirmed; the confirmation says whether to subscribe again. */
static void t_unsubscribe_state(void)
{
    struct rcompat_chan ch = {0};
    CHECK(rcompat_chan_may_subscribe(&ch)); /* nothing in flight: subscribe now */
    rcompat_chan_unsubscribing(&ch);
    CHECK(ch.unsub_inflight);
    CHECK(!rcompat_chan_may_subscribe(&ch)); /* wanted again: not now... */
    CHECK(rcompat_chan_unsubscribed(&ch));   /* ...but on the confirmation */
    CHECK(!ch.unsub_inflight);
    rcompat_chan_unsubscribing(&ch);
    CHECK(!rcompat_chan_unsubscribed(&ch)); /* not wanted again: the entry goes */
    CHECK(rcompat_chan_may_subscribe(&ch));
}

static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static int hook_calls;

static void on_release_hook(void *arg, const char *name, enum bk_news what, int64_t ttl_ms)
{
    (void)arg;
    (void)what;
    (void)ttl_ms;
    if (strcmp(name, "uq") != 0)
        return;
    pthread_mutex_lock(&hook_mu);
    hook_calls++;
    pthread_mutex_unlock(&hook_mu);
}

static bool hook_reached(void *arg)
{
    pthread_mutex_lock(&hook_mu);
    bool yes = hook_calls >= *(int *)arg;
    pthread_mutex_unlock(&hook_mu);
    return yes;
}

static bool watched(void *arg)
{
    (void)arg;
    const char *out = th_redis_cli(&R, "PUBSUB NUMSUB t:released:{uq}");
    const char *nl = strchr(out, '\n');
    return nl != NULL && atoi(nl + 1) >= 1;
}

static bool unwatched(void *arg)
{
    (void)arg;
    const char *out = th_redis_cli(&R, "PUBSUB NUMSUB t:released:{uq}");
    const char *nl = strchr(out, '\n');
    return nl != NULL && atoi(nl + 1) == 0;
}

/* Its handling, through the redis backend. A name unwatched and watched
 * again at once stays subscribed (redis_pubsub.c lingers a second before
 * its UNSUBSCRIBE): no UNSUBSCRIBE nor SUBSCRIBE is sent (5 rounds: 0 of
 * each; 5 and 5 without the linger), and a release published by another
 * lockd still reaches the hook. Unwatched for longer, the UNSUBSCRIBE goes
 * within 3 s; watched again, its new subscription's confirmation and a
 * release reach the hook. (The quirk itself, a SUBSCRIBE while an
 * UNSUBSCRIBE is unconfirmed, is t_unsubscribe_state's.) */
static void t_unsubscribe_quirk_handled(void)
{
    struct lk_config cfg;
    struct backend be;
    char url[128], err[256];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", R.port);
    config_defaults(&cfg);
    CHECK(config_set(&cfg, "redis", url, "test", err, sizeof(err)) == 0);
    CHECK(config_set(&cfg, "backend", "redis", "test", err, sizeof(err)) == 0);
    CHECK(config_set(&cfg, "key_prefix", "t:", "test", err, sizeof(err)) == 0);
    CHECK_EQ_INT(backend_redis_new(&cfg, &be, err, sizeof(err)), LK_OK);
    be.ops->set_release_hook(be.state, on_release_hook, NULL);
    be.ops->watch(be.state, "uq", true);
    CHECK(th_wait_for(watched, NULL, 3000));
    int want = 1; /* the subscribe confirmation wakes the name */
    CHECK(th_wait_for(hook_reached, &want, 2000));
    long long s0 = th_redis_calls(&R, "subscribe"), u0 = th_redis_calls(&R, "unsubscribe");
    for (int round = 0; round < 5; round++) {
        pthread_mutex_lock(&hook_mu);
        hook_calls = 0;
        pthread_mutex_unlock(&hook_mu);
        be.ops->watch(be.state, "uq", false);
        be.ops->watch(be.state, "uq", true); /* within the linger */
        th_sleep_ms(50);
        CHECK(watched(NULL));
        th_redis_cli(&R, "PUBLISH t:released:{uq} someone-else");
        want = 1; /* the release message */
        CHECK(th_wait_for(hook_reached, &want, 2000));
    }
    printf("# 5 unwatch + watch: %lld SUBSCRIBE, %lld UNSUBSCRIBE\n",
           th_redis_calls(&R, "subscribe") - s0, th_redis_calls(&R, "unsubscribe") - u0);
    CHECK_EQ_INT(th_redis_calls(&R, "subscribe") - s0, 0);
    CHECK_EQ_INT(th_redis_calls(&R, "unsubscribe") - u0, 0);
    be.ops->watch(be.state, "uq", false);
    CHECK(th_wait_for(unwatched, NULL, 3000));
    pthread_mutex_lock(&hook_mu);
    hook_calls = 0;
    pthread_mutex_unlock(&hook_mu);
    be.ops->watch(be.state, "uq", true);
    want = 1; /* the new subscription's confirmation */
    CHECK(th_wait_for(hook_reached, &want, 2000));
    CHECK(th_wait_for(watched, NULL, 2000));
    th_redis_cli(&R, "PUBLISH t:released:{uq} someone-else");
    want = 2; /* and the release message */
    CHECK(th_wait_for(hook_reached, &want, 2000));
    be.ops->watch(be.state, "uq", false);
    be.ops->free(be.state);
    config_free(&cfg);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    EV = ev_loop_new(EVFLAG_AUTO);
    th_redis_start(&R, 0, NULL);
    TH_RUN(t_write_now);
    TH_RUN(t_connected);
    TH_RUN(t_connect_error);
    TH_RUN(t_keepalive);
    TH_RUN(t_free_null_replies);
    TH_RUN(t_unsubscribe_quirk_probe);
    TH_RUN(t_unsubscribe_state);
    TH_RUN(t_unsubscribe_quirk_handled);
    th_redis_stop(&R);
    ev_loop_destroy(EV);
    return th_done();
}
