/*
 * redis_slot.c - Redis Cluster's key slot (see redis_slot.h), checked
 * against CLUSTER KEYSLOT of a real redis-server by tests/integration/cluster_slot.c.
 */
#include "server/redis_slot.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

uint16_t redis_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)(unsigned char)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int redis_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        /* "{}" is no tag: the whole key counts (cluster.c keyHashSlot) */
        if (close != NULL && close > open + 1)
            return redis_crc16(open + 1, (size_t)(close - open - 1)) & (REDIS_SLOTS - 1);
    }
    return redis_crc16(key, len) & (REDIS_SLOTS - 1);
}

static char slot_tags[REDIS_SLOTS][8];
static pthread_once_t slot_tags_once = PTHREAD_ONCE_INIT;

/* Decimal numbers in order until every slot has one: about 170,000 CRCs
 * (a coupon collector over 16,384 slots), once. */
static void slot_tags_build(void)
{
    int left = REDIS_SLOTS;
    for (unsigned i = 0; left > 0 && i < 10000000; i++) {
        char t[8];
        int n = snprintf(t, sizeof(t), "%u", i);
        int s = redis_crc16(t, (size_t)n) & (REDIS_SLOTS - 1);
        if (slot_tags[s][0] == '\0') {
            memcpy(slot_tags[s], t, (size_t)n + 1);
            left--;
        }
    }
}

const char *redis_slot_tag(int slot)
{
    pthread_once(&slot_tags_once, slot_tags_build);
    return slot_tags[slot & (REDIS_SLOTS - 1)];
}
