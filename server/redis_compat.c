/*
 * redis_compat.c - the hiredis quirks lockd depends on, each behind one
 * function (see redis_compat.h for what each is and why). Nothing else in
 * lockd touches hiredis' inner context or its flags. Loop thread only.
 */
#include "server/redis_compat.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

void rcompat_write_now(redisAsyncContext *ac)
{
    redisContext *c = &ac->c;
    /* before the connect completes the socket is not writable yet; hiredis'
     * own write watcher sends the buffer once it is */
    if (!(c->flags & REDIS_CONNECTED))
        return;
    int done;
    (void)redisBufferWrite(c, &done);
}

bool rcompat_connected(const redisAsyncContext *ac)
{
    return (ac->c.flags & REDIS_CONNECTED) != 0;
}

const char *rcompat_connect_error(const redisAsyncContext *ac)
{
    if (ac->err != 0 && ac->errstr != NULL && ac->errstr[0] != '\0')
        return ac->errstr;
    return ac->c.err != 0 ? ac->c.errstr : "";
}

void rcompat_keepalive(redisAsyncContext *ac)
{
    (void)redisEnableKeepAlive(&ac->c);
}

void rcompat_free(redisAsyncContext *ac)
{
    ac->data = NULL; /* our connect/disconnect callbacks ignore it from now on */
    redisAsyncFree(ac);
}

bool rcompat_chan_may_subscribe(struct rcompat_chan *ch)
{
    ch->want = true;
    /* a SUBSCRIBE now would be undone by the pending confirmation: the
     * confirmation subscribes again instead (rcompat_chan_unsubscribed) */
    return !ch->unsub_inflight;
}

void rcompat_chan_unsubscribing(struct rcompat_chan *ch)
{
    ch->want = false;
    ch->unsub_inflight = true;
}

bool rcompat_chan_unsubscribed(struct rcompat_chan *ch)
{
    ch->unsub_inflight = false;
    return ch->want;
}
