/*
 * hash.h - the hash function of lockd's uthash tables. A table keyed by
 * names that clients choose (lock names) must not hash them with a function
 * anyone can compute: with uthash's default (Jenkins, fixed seed) a client
 * could pick names that all land in one bucket, uthash then stops expanding
 * (noexpand) and every lookup under the backend's mutex walks them all.
 * SipHash-2-4 (libsodium's crypto_shorthash) under a key drawn from the
 * system's random source on first use closes that. Include this header
 * instead of <uthash.h>.
 */
#ifndef LOCKD_SERVER_HASH_H
#define LOCKD_SERVER_HASH_H

#include <stddef.h>
#include <stdint.h>

uint32_t lk_hash(const void *key, size_t len);

#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = lk_hash((keyptr), (size_t)(keylen)))
#include <uthash.h>

#endif
