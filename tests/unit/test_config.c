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

/* What --check-config prints of c (new, the caller frees). */
static char *printed(const struct lk_config *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    config_print(c, f);
    fclose(f);
    return buf;
}

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
    char *buf = printed(&c);
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
    buf = printed(&c);
    assert_non_null(strstr(buf, "redis redis://:****@h:1,redis://u:****@h2/3\n"));
    free(buf);
    config_free(&c);
}

/* No setting but a bare password takes a raw control byte (below 0x20, or
 * 0x7f), from any source: a prefix, a name, an address, a file path or a URL
 * never needs one, and --check-config would print it raw (an escape
 * sequence, a line that reads as another key). The error stays one line and
 * shows the value escaped (a secret's not at all). */
static void test_control_bytes(void **state)
{
    (void)state;
    struct lk_config c;
    char err[256];
    config_defaults(&c);
    static const char *const keys[] = {"key_prefix",
                                       "listen",
                                       "redis_master_name",
                                       "redis_master_user",
                                       "backend",
                                       "log_level",
                                       "log_format",
                                       "auth_token_file",
                                       "admin_token_file",
                                       "tls_cert",
                                       "tls_key",
                                       "port_file",
                                       NULL};
    static const char *const values[] = {"a\x1b[31mb", "a\nlisten 0.0.0.0:1", "\tx", "x\r",
                                         "x\x7f",      "127.0.0.1:\t8080",    NULL};
    for (const char *const *k = keys; *k != NULL; k++) {
        for (const char *const *v = values; *v != NULL; v++) {
            err[0] = '\0';
            if (config_set(&c, *k, *v, "flag --x", err, sizeof(err)) != -1)
                fail_msg("%s: a value with a control byte was taken", *k);
            assert_null(strpbrk(err, "\r\n\t\x1b\x7f"));
            assert_non_null(strstr(err, "control byte"));
            assert_non_null(strstr(err, *k));
        }
    }
    assert_int_equal(
        config_set(&c, "key_prefix", "a\x1b[31mb", "flag --key_prefix", err, sizeof(err)), -1);
    assert_string_equal(err, "invalid value 'a\\x1b[31mb' for 'key_prefix' (flag --key_prefix): "
                             "control byte 0x1b (control bytes are refused)");
    assert_string_equal(c.key_prefix, "lockd:");

    const char *text = "key_prefix app\x1b:\n";
    assert_int_equal(config_parse_text(&c, text, strlen(text), "c.conf", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "c.conf:1"));
    assert_non_null(strstr(err, "control byte 0x1b"));

    /* Other keys' errors show the value escaped too: one line. */
    assert_int_equal(config_set(&c, "access_log", "yes\n", "t", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'yes\\n'"));
    /* An integer, like a duration, starts with its digits. */
    assert_int_equal(config_set(&c, "threads", "\t2", "t", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'\\t2'"));
    assert_int_equal(config_set(&c, "threads", " 2", "t", err, sizeof(err)), -1);
    assert_int_equal(config_set(&c, "default_ttl_ms", "\t5s", "t", err, sizeof(err)), -1);
    assert_int_equal(config_set(&c, "threads", "3", "t", err, sizeof(err)), 0);
    assert_int_equal(c.threads, 3);

    /* A URL never holds a raw one (its user and password take %0a): refused
     * without showing the secret. */
    assert_int_equal(
        config_set(&c, "redis", "redis://u:s3cret\x01@h:1", "flag --redis", err, sizeof(err)), -1);
    assert_null(strstr(err, "s3cret"));
    assert_non_null(strstr(err, "'redis' (flag --redis): control byte 0x01"));
    /* A bare secret (a password) may hold one; it prints masked. */
    assert_int_equal(config_set(&c, "redis_master_password", "p\tw", "t", err, sizeof(err)), 0);
    char *buf = printed(&c);
    for (const char *p = buf; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 && *p != '\n')
            fail_msg("--check-config printed control byte 0x%02x", (unsigned char)*p);
    assert_non_null(strstr(buf, "redis_master_password ****\n"));
    free(buf);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_durations),
        cmocka_unit_test(test_file),     cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_mask),     cmocka_unit_test(test_control_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
