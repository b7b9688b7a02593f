/*
 * test_config.c - configuration: defaults, file parsing, environment, flags,
 * precedence, errors naming key and source, masking of secrets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* argv-style arrays of literals, as main() receives them. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"

#include "config/config.h"

static void test_defaults(void **state)
{
    (void)state;
    struct lk_config c;
    config_defaults(&c);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_int_equal(c.default_ttl_ms, 30000);
    assert_int_equal(c.max_ttl_ms, 3600000);
    assert_int_equal(c.max_wait_ms, 300000);
    assert_int_equal(c.session_ttl_ms, 10000);
    assert_int_equal(c.max_body_bytes, 16384);
    assert_int_equal(c.shutdown_timeout_ms, 25000);
    assert_false(c.release_on_shutdown);
    config_free(&c);
}

static void test_durations(void **state)
{
    (void)state;
    int64_t v;
    assert_int_equal(config_parse_ms("500ms", &v), 0);
    assert_int_equal(v, 500);
    assert_int_equal(config_parse_ms("30s", &v), 0);
    assert_int_equal(v, 30000);
    assert_int_equal(config_parse_ms("5m", &v), 0);
    assert_int_equal(v, 300000);
    assert_int_equal(config_parse_ms("2h", &v), 0);
    assert_int_equal(v, 7200000);
    assert_int_equal(config_parse_ms("1234", &v), 0);
    assert_int_equal(v, 1234);
    assert_int_equal(config_parse_ms("-5", &v), -1);
    assert_int_equal(config_parse_ms("5x", &v), -1);
    assert_int_equal(config_parse_ms("", &v), -1);
    assert_int_equal(config_parse_ms("99999999999999999999h", &v), -1);
}

static void test_file(void **state)
{
    (void)state;
    struct lk_config c;
    char err[256];
    config_defaults(&c);
    const char *text = "# comment\n\n  listen 127.0.0.1:9000\ndefault_ttl_ms 5s  \r\n"
                       "log_format text\nrelease_on_shutdown yes\nkey_prefix \"app:\"\n";
    assert_int_equal(config_parse_text(&c, text, strlen(text), "f.conf", err, sizeof(err)), 0);
    assert_string_equal(c.listen, "127.0.0.1:9000");
    assert_int_equal(c.default_ttl_ms, 5000);
    assert_string_equal(c.log_format, "text");
    assert_true(c.release_on_shutdown);
    assert_string_equal(c.key_prefix, "app:");

    const char *bad = "listen 127.0.0.1:1\nbogus_key 1\n";
    assert_int_equal(config_parse_text(&c, bad, strlen(bad), "f.conf", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "bogus_key"));
    assert_non_null(strstr(err, "f.conf:2"));

    const char *range = "max_ttl_ms 10\n";
    assert_int_equal(config_parse_text(&c, range, strlen(range), "r.conf", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "max_ttl_ms"));
    assert_non_null(strstr(err, "r.conf:1"));

    const char *en = "log_format xml\n";
    assert_int_equal(config_parse_text(&c, en, strlen(en), "e.conf", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "json|text"));

    const char *nul = "listen a\0b\n";
    assert_int_equal(config_parse_text(&c, nul, 11, "n.conf", err, sizeof(err)), -1);
    config_free(&c);
}

static void test_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/lockd-unit-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *text = "default_ttl_ms 1000\nmax_wait_ms 2000\nthreads 3\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char *argv[] = {"lockd", "--config", path, "--max-wait-ms", "9s", NULL};
    char *envp[] = {"LOCKD_MAX_WAIT_MS=7000", "LOCKD_THREADS=4",    "OTHER=1",
                    "LOCKD_LEASE=abc",        "LOCKD_URL=http://x", NULL};
    struct lk_config c;
    enum cfg_action act;
    char err[256];
    assert_int_equal(config_load(&c, 5, argv, envp, &act, err, sizeof(err)), 0);
    assert_int_equal(act, CFG_RUN);
    assert_int_equal(c.default_ttl_ms, 1000); /* file */
    assert_int_equal(c.threads, 4);           /* env beats file */
    assert_int_equal(c.max_wait_ms, 9000);    /* flag beats env */
    assert_string_equal(c.backend, "memory");
    config_free(&c);

    char *envbad[] = {"LOCKD_NOPE=1", NULL};
    char *argv2[] = {"lockd", NULL};
    assert_int_equal(config_load(&c, 1, argv2, envbad, &act, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "LOCKD_NOPE"));
    config_free(&c);

    char *argv3[] = {"lockd", "--threads", "0", NULL};
    char *envnone[] = {NULL};
    assert_int_equal(config_load(&c, 3, argv3, envnone, &act, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "flag --threads"));
    config_free(&c);

    char *argv4[] = {"lockd", "--redis", "redis://a:1,redis://b:2,redis://c:3", NULL};
    /* Three URLs mean Redlock. */
    assert_int_equal(config_load(&c, 3, argv4, envnone, &act, err, sizeof(err)), 0);
    assert_string_equal(c.backend, "redlock");
    config_free(&c);
    /* An even count is refused: a majority of 4 tolerates no more than of 3. */
    char *argv5[] = {"lockd", "--redis", "redis://a:1,redis://b:2,redis://c:3,redis://d:4", NULL};
    assert_int_equal(config_load(&c, 3, argv5, envnone, &act, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "backend redlock needs an odd number of URLs"));
    config_free(&c);
    unlink(path);
}

static void test_mask(void **state)
{
    (void)state;
    struct lk_config c;
    char err[256];
    config_defaults(&c);
    assert_int_equal(
        config_set(&c, "redis", "redis://user:s3cret@127.0.0.1:6379/2", "t", err, sizeof(err)), 0);
    /* A secret that is not a URL (the sentinel data nodes' password) is masked whole. */
    assert_int_equal(config_set(&c, "redis_master_password", "hunter2", "t", err, sizeof(err)), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print(&c, f);
    fclose(f);
    assert_null(strstr(buf, "s3cret"));
    assert_non_null(strstr(buf, "redis redis://user:****@127.0.0.1:6379/2"));
    assert_null(strstr(buf, "hunter2"));
    assert_non_null(strstr(buf, "redis_master_password ****\n"));
    free(buf);
    /* A raw '@' in a password: redis_url_parse ends the credentials at the
     * last '@', and so does the mask (found by tests/fuzz/fuzz_redis_url:
     * it showed "redis://:****@ss@h:1"). */
    assert_int_equal(
        config_set(&c, "redis", "redis://:p@ss@h:1,redis://u:x@y@z@h2/3", "t", err, sizeof(err)),
        0);
    f = open_memstream(&buf, &len);
    config_print(&c, f);
    fclose(f);
    assert_non_null(strstr(buf, "redis redis://:****@h:1,redis://u:****@h2/3\n"));
    free(buf);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_durations),
        cmocka_unit_test(test_file),     cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
