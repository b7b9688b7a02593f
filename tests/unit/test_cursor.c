/*
 * test_cursor.c - listing cursors: '<k>.<inner>' of the cluster and Redlock
 * (backend_cursor_split) and the Redis lock layer's '<where>~<check>'
 * (redis_list_cursor, redis_list_cursor_open). What fuzz_cursor checks, as
 * cases; conformance list_bad_cursor checks the backends themselves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/backend.h"
#include "server/redis_lock.h"

static void test_split(void **state)
{
    (void)state;
    size_t k = 99;
    const char *inner = NULL;
    assert_true(backend_cursor_split("0.", 1, &k, &inner));
    assert_int_equal(k, 0);
    assert_string_equal(inner, "");
    assert_true(backend_cursor_split("12.17:42:job-a~0123456789ab", 13, &k, &inner));
    assert_int_equal(k, 12);
    assert_string_equal(inner, "17:42:job-a~0123456789ab");
    /* spellings "%zu." never writes: redlock's strtol took the first four */
    static const char *const no[] = {"00.x", "+0.x", " 0.x", "-0.x", "01.x",        "0x.x",
                                     "1",    ".x",   "",     "3.x",  "9999999999.x"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(backend_cursor_split(no[i], 3, &k, &inner));
}

static void test_redis_cursor(void **state)
{
    (void)state;
    char c[REDIS_CURSOR_MAX];
    struct redis_list_pos p;
    assert_false(redis_list_cursor("lockd:", "0", c)); /* the walk is over */
    assert_true(redis_list_cursor("lockd:", "17:42:job-a", c));
    assert_true(redis_list_cursor_open("lockd:", c, &p));
    assert_string_equal(p.scan, "17");
    assert_string_equal(p.stop, "42");
    assert_string_equal(p.after, "job-a");
    assert_false(redis_list_cursor_open("other:", c, &p)); /* another prefix's */
    c[0] = '7';
    assert_false(redis_list_cursor_open("lockd:", c, &p)); /* not the one given */
    assert_true(redis_list_cursor_open("lockd:", "", &p)); /* the start */
    assert_string_equal(p.scan, "0");
    assert_string_equal(p.after, "");
    assert_true(redis_list_cursor("lockd:", "5:6:a/b", c)); /* not a name: refused */
    assert_false(redis_list_cursor_open("lockd:", c, &p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_redis_cursor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
