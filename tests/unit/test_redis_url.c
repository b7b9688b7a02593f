/*
 * test_redis_url.c - redis:// URL parsing (user, password with percent
 * escapes, IPv6, port and database bounds) and the SHA-1 that names scripts
 * for EVALSHA. Errors never repeat the password.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/redis_url.h"
#include "server/sha1.h"

static void test_plain(void **state)
{
    (void)state;
    struct redis_url u;
    char err[128];
    assert_int_equal(redis_url_parse("redis://127.0.0.1:6380", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 0);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "");
    assert_int_equal(redis_url_parse("redis://redis", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.host, "redis");
    assert_int_equal(u.port, 6379);
    assert_int_equal(redis_url_parse("redis://redis/", &u, err, sizeof(err)), LK_OK);
    assert_int_equal(u.db, 0);
}

static void test_credentials_and_db(void **state)
{
    (void)state;
    struct redis_url u;
    char err[128];
    assert_int_equal(redis_url_parse("redis://:s3cret@h:1/5", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "s3cret");
    assert_int_equal(u.db, 5);
    assert_int_equal(redis_url_parse("redis://alice:p%40ss%3Aw@h:1", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "p@ss:w");
    /* the last '@' ends the credentials */
    assert_int_equal(redis_url_parse("redis://a:b@c@h:2", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.password, "b@c");
    assert_string_equal(u.host, "h");
    /* a bare password (no ':') is a password, as redis-cli -u reads it */
    assert_int_equal(redis_url_parse("redis://pw@h:2", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.user, "");
    assert_string_equal(u.password, "pw");
}

static void test_ipv6(void **state)
{
    (void)state;
    struct redis_url u;
    char err[128];
    assert_int_equal(redis_url_parse("redis://[::1]:7000/2", &u, err, sizeof(err)), LK_OK);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 7000);
    assert_int_equal(u.db, 2);
}

static void test_rejects(void **state)
{
    (void)state;
    /* the last three: raw control bytes (found by fuzz_redis_url) */
    static const char *const bad[] = {"",
                                      "127.0.0.1:6379",
                                      "http://h:1",
                                      "rediss://h:1",
                                      "redis://",
                                      "redis://:1",
                                      "redis://h:0",
                                      "redis://h:65536",
                                      "redis://h:x",
                                      "redis://h:1/x",
                                      "redis://h:1/-1",
                                      "redis://[::1",
                                      "redis://h h:1",
                                      "redis://u:%zz@h:1",
                                      "redis://u:%00@h:1",
                                      "redis://alice:@h:1",
                                      "redis://\nredis :s3cret@h5",
                                      "redis://u:p\tw@h:1",
                                      "redis://u:pw\x7f@h:1",
                                      NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        struct redis_url u;
        char err[128] = "";
        if (redis_url_parse(bad[i], &u, err, sizeof(err)) != LK_INVALID)
            fail_msg("accepted '%s'", bad[i]);
        assert_true(err[0] != '\0');
    }
    struct redis_url u;
    char err[128];
    assert_int_equal(redis_url_parse("redis://u:topsecret@h:99999", &u, err, sizeof(err)),
                     LK_INVALID);
    assert_null(strstr(err, "topsecret"));
    /* a decoded user name holding a line break stays on the error's one
     * line (found by tests/fuzz/fuzz_redis_url) */
    assert_int_equal(redis_url_parse("redis://u%0ax%0d:@h:1", &u, err, sizeof(err)), LK_INVALID);
    assert_null(strpbrk(err, "\r\n"));
    assert_non_null(strstr(err, "user 'u?x?' needs a password"));
}

static void test_sha1(void **state)
{
    (void)state;
    char out[41];
    sha1_hex("", 0, out);
    assert_string_equal(out, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    sha1_hex("abc", 3, out);
    assert_string_equal(out, "a9993e364706816aba3e25717850c26c9cd0d89d");
    /* 56 bytes: the padding spills into a second block */
    const char *s = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha1_hex(s, strlen(s), out);
    assert_string_equal(out, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain), cmocka_unit_test(test_credentials_and_db),
        cmocka_unit_test(test_ipv6),  cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_sha1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
