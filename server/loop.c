/*
 * loop.c - libev loop plus a mutex-protected queue of posted closures, drained
 * by an ev_async watcher on the owning thread. The mutex guards only the queue,
 * never I/O.
 */
#include "server/loop.h"

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "server/util.h"

struct post {
    loop_fn fn;
    void *arg;
    struct post *next;
};

struct lk_loop {
    struct ev_loop *ev;
    int index;
    ev_async wake;
    pthread_mutex_t mu;
    struct post *head, *tail;
    bool stopping;
};

static void on_wake(struct ev_loop *ev, ev_async *w, int revents)
{
    (void)revents;
    struct lk_loop *lp = w->data;
    pthread_mutex_lock(&lp->mu);
    struct post *p = lp->head;
    lp->head = lp->tail = NULL;
    bool stopping = lp->stopping;
    pthread_mutex_unlock(&lp->mu);
    while (p != NULL) {
        struct post *next = p->next;
        p->fn(p->arg);
        free(p);
        p = next;
    }
    if (stopping)
        ev_break(ev, EVBREAK_ALL);
}

struct lk_loop *loop_new(int index)
{
    struct lk_loop *lp = lk_calloc(1, sizeof(*lp));
    lp->ev = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (lp->ev == NULL)
        abort();
    lp->index = index;
    pthread_mutex_init(&lp->mu, NULL);
    ev_async_init(&lp->wake, on_wake);
    lp->wake.data = lp;
    ev_async_start(lp->ev, &lp->wake);
    return lp;
}

void loop_free(struct lk_loop *lp)
{
    if (lp == NULL)
        return;
    struct post *p = lp->head;
    while (p != NULL) {
        struct post *next = p->next;
        free(p);
        p = next;
    }
    ev_async_stop(lp->ev, &lp->wake);
    ev_loop_destroy(lp->ev);
    pthread_mutex_destroy(&lp->mu);
    free(lp);
}

struct ev_loop *loop_ev(struct lk_loop *lp)
{
    return lp->ev;
}
int loop_index(const struct lk_loop *lp)
{
    return lp->index;
}

void loop_post(struct lk_loop *lp, loop_fn fn, void *arg)
{
    struct post *p = lk_malloc(sizeof(*p));
    p->fn = fn;
    p->arg = arg;
    p->next = NULL;
    pthread_mutex_lock(&lp->mu);
    if (lp->tail != NULL)
        lp->tail->next = p;
    else
        lp->head = p;
    lp->tail = p;
    pthread_mutex_unlock(&lp->mu);
    ev_async_send(lp->ev, &lp->wake);
}

void loop_run(struct lk_loop *lp)
{
    ev_run(lp->ev, 0);
}

void loop_stop(struct lk_loop *lp)
{
    pthread_mutex_lock(&lp->mu);
    lp->stopping = true;
    pthread_mutex_unlock(&lp->mu);
    ev_async_send(lp->ev, &lp->wake);
}
