/*
 * redis_slot.h - Redis Cluster's key slot: CRC16 (XMODEM) of the key's hash
 * tag (the part between its first '{' and the next '}', when not empty),
 * else of the whole key, modulo 16384 - what `CLUSTER KEYSLOT` answers.
 * lockd's keys are <key_prefix>{name}[:fence], so a lock's keys share a
 * slot. For the cluster backend's router (issue 24). Pure, any thread.
 */
#ifndef LOCKD_SERVER_REDIS_SLOT_H
#define LOCKD_SERVER_REDIS_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define REDIS_SLOTS 16384

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis' crc16.c. */
uint16_t redis_crc16(const char *buf, size_t len);
/* The slot of key[0..len) (0 .. REDIS_SLOTS - 1). */
int redis_key_slot(const char *key, size_t len);
/* A short hash tag (at most 7 characters, static) whose slot is slot: a
 * key holding "{tag}" lives in that slot (re-assertion's per-slot marker
 * and grace keys, reassert.c). The table is built once, on first use. */
const char *redis_slot_tag(int slot);

#endif
