/*
 * loop.h - an event loop owned by one thread (libev underneath). Backends
 * attach their async connections to it; other threads hand it work with
 * loop_post(), which wakes it through an ev_async (eventfd).
 */
#ifndef LOCKD_SERVER_LOOP_H
#define LOCKD_SERVER_LOOP_H

struct ev_loop;
struct lk_loop;

typedef void (*loop_fn)(void *arg);

/* Loop indexes: HTTP workers use 0..63 (config 'threads' max 64), the
 * janitor (watchdog, reaper) uses LOOP_JANITOR; backends may size per-loop
 * tables by LOOP_MAX. */
#define LOOP_JANITOR 64
#define LOOP_MAX 65

/* Creates a loop; index identifies it to backends (one connection per loop). */
struct lk_loop *loop_new(int index);
/* Frees the loop; call after its thread stopped running it. */
void loop_free(struct lk_loop *lp);

struct ev_loop *loop_ev(struct lk_loop *lp);
int loop_index(const struct lk_loop *lp);

/* Runs fn(arg) on lp's thread soon. Any thread. Never blocks on I/O. */
void loop_post(struct lk_loop *lp, loop_fn fn, void *arg);

/* Runs the loop until loop_stop(); on lp's own thread. */
void loop_run(struct lk_loop *lp);
/* Asks the loop to return from loop_run(). Any thread. */
void loop_stop(struct lk_loop *lp);

#endif
