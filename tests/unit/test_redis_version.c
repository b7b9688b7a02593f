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

/* One INFO server text (between other fields when line is a field), whether
 * it passes, and the version read from it. */
struct vcase {
    const char *line;
    bool ok;
    const char *version;
};

static void run_cases(const struct vcase *cs, size_t n, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        char info[256], v[32];
        snprintf(info, sizeof(info),
                 "# Server\r\n%sredis_git_sha1:00000000\r\nredis_mode:standalone\r\n", cs[i].line);
        assert_int_equal(redis_version_ok(info, v, cap), cs[i].ok);
        assert_string_equal(v, cs[i].version);
    }
}

static void test_versions(void **state)
{
    (void)state;
    static const struct vcase cs[] = {
        {"redis_version:7.0.15\r\n", true, "7.0.15"},
        {"redis_version:7.2.4\r\n", true, "7.2.4"},
        {"redis_version:8.0.2\r\n", true, "8.0.2"},
        {"redis_version:10.1.0\r\n", true, "10.1.0"}, /* not a string compare */
        {"redis_version:7\r\n", true, "7"},
        {"redis_version:6.2.14\r\n", false, "6.2.14"},
        {"redis_version:6.0.16\r\n", false, "6.0.16"},
        {"redis_version:5.0.14\r\n", false, "5.0.14"},
        /* not judged: no field, not a number, the key inside another value */
        {"", true, ""},
        {"redis_version:unknown\r\n", true, "unknown"},
        {"x_note:see redis_version:1.0\r\n", true, ""},
    };
    run_cases(cs, sizeof(cs) / sizeof(cs[0]), 32);
    /* a long value is cut to the buffer, still read as a number */
    static const struct vcase cut[] = {{"redis_version:6.2.1234567890\r\n", false, "6.2.123"}};
    run_cases(cut, 1, 8);
}

static void test_first_line(void **state)
{
    (void)state;
    char v[32];
    /* the field first in the reply, LF only */
    assert_false(redis_version_ok("redis_version:6.2.7\nredis_mode:standalone\n", v, sizeof(v)));
    assert_string_equal(v, "6.2.7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_first_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
