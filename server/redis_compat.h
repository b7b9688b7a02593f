/*
 * redis_compat.h - every place lockd leans on how hiredis (Debian's 0.14.1)
 * behaves beyond its documented API, one named function per quirk, so that
 * a move to hiredis 1.x changes this file and nothing else. Each quirk has a
 * test against a real redis-server in tests/integration/redis_compat.c.
 * Functions take the context of the calling loop thread only.
 */
#ifndef LOCKD_SERVER_REDIS_COMPAT_H
#define LOCKD_SERVER_REDIS_COMPAT_H

#include <stdbool.h>
#include <stddef.h>

struct redisAsyncContext;

/* Quirk: the async API has no "write now"; hiredis writes what was queued
 * when its write watcher fires, after the whole loop iteration. Writes the
 * output buffer now through the inner blocking-style context (only once
 * the socket is connected; before that it does nothing). A write error is
 * left in the context for hiredis to act on from its own callbacks. */
void rcompat_write_now(struct redisAsyncContext *ac);

/* Quirk: whether the TCP connection is established is only in the inner
 * context's REDIS_CONNECTED flag (1.x keeps it there too). */
bool rcompat_connected(const struct redisAsyncContext *ac);

/* Quirk: in the connect callback of a failed connect, 0.14 has not yet
 * copied the error to ac->errstr: it is in the inner context. Returns the
 * best error text ("" when none). */
const char *rcompat_connect_error(const struct redisAsyncContext *ac);

/* Quirk: TCP keepalive is set on the inner context (0.14 has no async
 * call); a dead peer is then noticed even on an idle connection. */
void rcompat_keepalive(struct redisAsyncContext *ac);

/* Quirk: redisAsyncFree runs the disconnect callback (when connected) and
 * then every pending reply callback with a NULL reply; called from inside
 * a hiredis callback it is deferred until that callback returns. Clears
 * ac->data first, so connect/disconnect callbacks that check it ignore the
 * free we asked for; reply callbacks must treat NULL as "no answer". */
void rcompat_free(struct redisAsyncContext *ac);

/* Quirk (pub/sub): hiredis keys channel callbacks by channel name and,
 * before upstream's pending_subs fix, drops a channel's entry when an
 * UNSUBSCRIBE confirmation for it arrives, even if a SUBSCRIBE for it was
 * sent after that UNSUBSCRIBE; the new subscription's messages then have no
 * callback and are lost (tests/integration/redis_compat.c prints whether
 * the installed build does). So: never SUBSCRIBE a channel while its
 * UNSUBSCRIBE is unconfirmed. rcompat_chan_may_subscribe() says whether a
 * SUBSCRIBE may go now; rcompat_chan_unsubscribed() (on the confirmation)
 * whether one is due now because the channel was wanted again meanwhile. */
struct rcompat_chan {
    bool unsub_inflight; /* UNSUBSCRIBE sent, its confirmation not back */
    bool want;           /* wanted subscribed (after any pending unsubscribe) */
};
bool rcompat_chan_may_subscribe(struct rcompat_chan *ch);
void rcompat_chan_unsubscribing(struct rcompat_chan *ch);
bool rcompat_chan_unsubscribed(struct rcompat_chan *ch);

#endif
