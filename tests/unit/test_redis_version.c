/*
 * test_redis_version.c - the Redis version check of lockd's startup probe,
 * on INFO server texts as Redis writes them (CRLF lines, '#' sections).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/redis_version.h"

static bool check(const char *version_line, char *out, size_t cap)
{
    char info[256];
    snprintf(info, sizeof(info),
             "# Server\r\n%sredis_git_sha1:00000000\r\nredis_mode:standalone\r\n", version_line);
    return redis_version_ok(info, out, cap);
}

static void test_new_enough(void **state)
{
    (void)state;
    char v[32];
    assert_true(check("redis_version:7.0.15\r\n", v, sizeof(v)));
    assert_string_equal(v, "7.0.15");
    assert_true(check("redis_version:7.2.4\r\n", v, sizeof(v)));
    assert_true(check("redis_version:8.0.2\r\n", v, sizeof(v)));
    assert_true(check("redis_version:10.1.0\r\n", v, sizeof(v))); /* not a string compare */
    assert_string_equal(v, "10.1.0");
    assert_true(check("redis_version:7\r\n", v, sizeof(v)));
}

static void test_too_old(void **state)
{
    (void)state;
    char v[32];
    assert_false(check("redis_version:6.2.14\r\n", v, sizeof(v)));
    assert_string_equal(v, "6.2.14");
    assert_false(check("redis_version:6.0.16\r\n", v, sizeof(v)));
    assert_false(check("redis_version:5.0.14\r\n", v, sizeof(v)));
    /* first line of the reply, LF only */
    assert_false(redis_version_ok("redis_version:6.2.7\nredis_mode:standalone\n", v, sizeof(v)));
    assert_string_equal(v, "6.2.7");
}

static void test_not_judged(void **state)
{
    (void)state;
    char v[8];
    /* no field, or a field that is not a number: not refused */
    assert_true(redis_version_ok("# Server\r\nredis_mode:standalone\r\n", v, sizeof(v)));
    assert_string_equal(v, "");
    assert_true(check("redis_version:unknown\r\n", v, sizeof(v)));
    /* the key inside another field's value is not the field */
    assert_true(check("x_note:see redis_version:1.0\r\n", v, sizeof(v)));
    assert_string_equal(v, "");
    /* a long value is cut to the buffer, still read as a number */
    assert_false(check("redis_version:6.2.1234567890\r\n", v, sizeof(v)));
    assert_string_equal(v, "6.2.123");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_enough),
        cmocka_unit_test(test_too_old),
        cmocka_unit_test(test_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
