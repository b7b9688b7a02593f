/*
 * heap.h - a binary min-heap of (deadline, pointer): the one timer structure
 * behind the reaper and the watchdog. Not thread safe: callers hold their lock.
 */
#ifndef LOCKD_SERVER_HEAP_H
#define LOCKD_SERVER_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct heap_item {
    int64_t key;
    void *ptr;
};

struct heap {
    struct heap_item *items;
    size_t len, cap;
};

void heap_push(struct heap *h, int64_t key, void *ptr);
/* The smallest item, or NULL when empty. */
const struct heap_item *heap_top(const struct heap *h);
void heap_pop(struct heap *h);
void heap_release(struct heap *h);

#endif
