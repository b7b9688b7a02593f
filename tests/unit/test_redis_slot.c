/*
 * test_redis_slot.c - Redis Cluster's key slot on the values Redis' cluster
 * specification and CLUSTER KEYSLOT give (tests/integration/cluster_slot.c
 * compares many more keys with a real redis-server).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/redis_slot.h"

static int slot(const char *k)
{
    return redis_key_slot(k, strlen(k));
}

static void test_crc16(void **state)
{
    (void)state;
    assert_int_equal(redis_crc16("123456789", 9), 0x31C3); /* the specification's check value */
    assert_int_equal(redis_crc16("", 0), 0);
}

static void test_slots(void **state)
{
    (void)state;
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("123456789"), 0x31C3 % 16384);
    /* the hash tag: the first '{' and the next '}' */
    assert_int_equal(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_int_equal(slot("{user1000}.following"), slot("user1000"));
    assert_int_equal(slot("foo{}{bar}"), redis_key_slot("foo{}{bar}", 10)); /* "{}": whole key */
    assert_int_not_equal(slot("foo{}{bar}"), slot("bar"));
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    /* lockd's keys: a lock and its fence counter share a slot */
    assert_int_equal(slot("lockd:{job-7}"), slot("lockd:{job-7}:fence"));
    assert_int_equal(slot("lockd:{job-7}"), slot("job-7"));
    assert_int_equal(slot("lockd:released:{job-7}"), slot("job-7"));
    /* no '}' after the '{': the whole key */
    assert_int_equal(slot("a{b"), redis_crc16("a{b", 3) % 16384);
}

/* Every slot has a tag of its own that hashes to it (re-assertion's
 * per-slot keys on a cluster). */
static void test_slot_tags(void **state)
{
    (void)state;
    for (int s = 0; s < REDIS_SLOTS; s++) {
        const char *t = redis_slot_tag(s);
        char key[32];
        snprintf(key, sizeof(key), "lockd:lockd:grace{%s}", t);
        assert_true(t[0] != '\0' && strlen(t) <= 7);
        assert_int_equal(slot(key), s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16),
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_slot_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
