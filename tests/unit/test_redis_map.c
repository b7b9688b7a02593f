/*
 * test_redis_map.c - reading what Redis says about where nodes are
 * (redis_map.c), on replies written as RESP and read by hiredis as lockd
 * reads them. The cases are what fuzz_redis_reply found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "server/redis_map.h"

static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

/* A hostname (cluster-preferred-endpoint-type hostname) is kept whole: it
 * was cut at 50 bytes, which names another host. */
static void test_long_hostname(void **state)
{
    (void)state;
    const char *host = "node-0.redis-cluster-headless.default.svc.cluster.local"; /* 55 */
    char resp[256];
    snprintf(resp, sizeof(resp), "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%zu\r\n%s\r\n:6379\r\n",
             strlen(host), host);
    redisReply *r = reply_of(resp);
    struct redis_map *m = malloc(sizeof(*m));
    assert_true(redis_map_slots(r, "10.0.0.9", m));
    assert_int_equal(m->n, 1);
    char want[128];
    snprintf(want, sizeof(want), "%s:6379", host);
    assert_string_equal(m->addrs[0], want);
    assert_int_equal(m->owner[0], 0);
    assert_int_equal(m->owner[16383], 0);
    freeReplyObject(r);
    free(m);
}

/* A slot bound that is not a number leaves the range out; it was read as
 * slot 0 (atoll), giving slots 0..hi to a node the reply never said. */
static void test_bound_not_a_number(void **state)
{
    (void)state;
    static const char *const resps[] = {
        "*1\r\n*3\r\n*0\r\n:100\r\n*2\r\n$8\r\n10.0.0.1\r\n:7000\r\n",
        "*1\r\n*3\r\n$3\r\nabc\r\n:100\r\n*2\r\n$8\r\n10.0.0.1\r\n:7000\r\n",
        "*1\r\n*3\r\n$-1\r\n:100\r\n*2\r\n$8\r\n10.0.0.1\r\n:7000\r\n",
    };
    struct redis_map *m = malloc(sizeof(*m));
    for (size_t i = 0; i < sizeof(resps) / sizeof(resps[0]); i++) {
        redisReply *r = reply_of(resps[i]);
        assert_true(redis_map_slots(r, "10.0.0.9", m));
        assert_int_equal(m->owner[0], -1);
        assert_int_equal(m->owner[100], -1);
        freeReplyObject(r);
    }
    /* strings of numbers still count */
    redisReply *r =
        reply_of("*1\r\n*3\r\n$1\r\n5\r\n$2\r\n10\r\n*2\r\n$8\r\n10.0.0.1\r\n$4\r\n7000\r\n");
    assert_true(redis_map_slots(r, "10.0.0.9", m));
    assert_int_equal(m->owner[4], -1);
    assert_int_equal(m->owner[5], 0);
    assert_int_equal(m->owner[10], 0);
    assert_int_equal(m->owner[11], -1);
    assert_string_equal(m->addrs[0], "10.0.0.1:7000");
    freeReplyObject(r);
    free(m);
}

/* A sentinel's primary: a host that fits, whole, and a port in decimal;
 * "127.0.0.1" as a port was port 127, a long host was cut. */
static void test_sentinel_addr(void **state)
{
    (void)state;
    char host[16];
    int port = 0;
    redisReply *r = reply_of("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    assert_int_equal(redis_sentinel_addr(r, host, sizeof(host), &port), 1);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6380);
    freeReplyObject(r);
    static const char *const no[] = {
        "*2\r\n$9\r\n127.0.0.1\r\n$9\r\n127.0.0.1\r\n", /* not a port */
        "*2\r\n$9\r\n127.0.0.1\r\n$7\r\n6379abc\r\n",
        "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n70000\r\n",
        "*2\r\n$0\r\n\r\n$4\r\n6379\r\n",                  /* no host */
        "*2\r\n$16\r\nredis.example.io\r\n$4\r\n6379\r\n", /* 16 bytes: does not fit */
        "*-1\r\n",
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        r = reply_of(no[i]);
        assert_int_equal(redis_sentinel_addr(r, host, sizeof(host), &port), 0);
        freeReplyObject(r);
    }
    r = reply_of("-ERR unknown command\r\n");
    assert_int_equal(redis_sentinel_addr(r, host, sizeof(host), &port), -1);
    freeReplyObject(r);
}

/* MOVED / ASK: the slot in decimal, then host:port. */
static void test_redirect(void **state)
{
    (void)state;
    int slot = -1;
    const char *addr = NULL;
    assert_true(redis_redirect_parse("MOVED 3999 127.0.0.1:6381", &slot, &addr));
    assert_int_equal(slot, 3999);
    assert_string_equal(addr, "127.0.0.1:6381");
    assert_true(redis_redirect_parse("ASK 0 ::1:7001", &slot, &addr));
    assert_int_equal(slot, 0);
    assert_string_equal(addr, "::1:7001");
    static const char *const no[] = {
        "ASK +12182 10.0.0.2:7001",  "MOVED  12 10.0.0.2:7001", "MOVED 0012 10.0.0.2:7001",
        "MOVED 16384 10.0.0.2:7001", "MOVED 12 10.0.0.2",       "MOVED 12 :7001",
        "MOVED 12 10.0.0.2:0",       "MOVED 12 10.0.0.2:7001x", "MOVED 12",
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(redis_redirect_parse(no[i], &slot, &addr));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_hostname),
        cmocka_unit_test(test_bound_not_a_number),
        cmocka_unit_test(test_sentinel_addr),
        cmocka_unit_test(test_redirect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
