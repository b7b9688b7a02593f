/*
 * hash.c - see hash.h.
 */
#include "server/hash.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

static unsigned char key[crypto_shorthash_KEYBYTES];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
    if (sodium_init() < 0)
        abort(); /* no random source: nothing safe to hash with */
    randombytes_buf(key, sizeof(key));
}

uint32_t lk_hash(const void *p, size_t len)
{
    pthread_once(&key_once, key_init);
    unsigned char out[crypto_shorthash_BYTES];
    crypto_shorthash(out, p, len, key);
    uint32_t h;
    memcpy(&h, out, sizeof(h));
    return h;
}
