/*
 * heap.c - array-backed binary min-heap.
 */
#include "server/heap.h"

#include <stdlib.h>

#include "server/util.h"

void heap_push(struct heap *h, int64_t key, void *ptr)
{
    if (h->len == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 64;
        h->items = lk_realloc(h->items, h->cap * sizeof(*h->items));
    }
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->items[parent].key <= key)
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i].key = key;
    h->items[i].ptr = ptr;
}

const struct heap_item *heap_top(const struct heap *h)
{
    return h->len ? &h->items[0] : NULL;
}

void heap_pop(struct heap *h)
{
    if (h->len == 0)
        return;
    struct heap_item last = h->items[--h->len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        int64_t mk = last.key;
        if (l < h->len && h->items[l].key < mk) {
            m = l;
            mk = h->items[l].key;
        }
        if (r < h->len && h->items[r].key < mk)
            m = r;
        if (m == i)
            break;
        h->items[i] = h->items[m];
        i = m;
    }
    if (h->len)
        h->items[i] = last;
}

void heap_release(struct heap *h)
{
    free(h->items);
    h->items = NULL;
    h->len = h->cap = 0;
}
