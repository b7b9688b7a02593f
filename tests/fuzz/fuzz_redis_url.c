/*
 * fuzz_redis_url.c - libFuzzer target for the `redis` key: redis:// URL
 * parsing (one URL, and the comma-separated list the backends parse at
 * startup) and its masking by config_print (--check-config). Checks that a
 * URL is either refused with one line or gives parts within their bounds,
 * and that the printed URL parses to the same place with the password
 * masked. Built by `make fuzz`; seeds in corpus/fuzz_redis_url.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/redis_url.h"
#include "server/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_redis_url: broken promise: %s\n", what);
        abort();
    }
}

static void check_refusal(const char *err)
{
    must(err[0] != '\0' && strchr(err, '\n') == NULL, "a refusal says why on one line");
}

static void check_url(const struct redis_url *u)
{
    size_t hl = strlen(u->host);
    must(hl >= 1 && hl < sizeof(u->host), "host given");
    must(strspn(u->host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_") ==
             hl,
         "host characters");
    must(u->port >= 1 && u->port <= 65535, "port in range");
    must(u->db >= 0 && u->db <= 100000, "db in range");
    must(strlen(u->user) < sizeof(u->user) && strlen(u->password) < sizeof(u->password),
         "credentials bounded");
    must(u->user[0] == '\0' || u->password[0] != '\0', "a user has a password");
}

/* What config_print shows for the `redis` key when it holds url. */
static char *printed(const char *url)
{
    struct lk_config cfg;
    config_defaults(&cfg);
    free(cfg.redis);
    cfg.redis = lk_strdup(url);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    must(f != NULL, "memstream");
    config_print(&cfg, f);
    fclose(f);
    config_free(&cfg);
    const char *line = strstr(buf, "\nredis ");
    must(line != NULL, "config_print shows redis");
    line += strlen("\nredis ");
    size_t ll = strcspn(line, "\n");
    char *out = malloc(ll + 1);
    memcpy(out, line, ll);
    out[ll] = '\0';
    free(buf);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* NUL-terminated as a flag, a variable or a config line hands it over. */
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char err[256] = "";

    /* The list, as the backends parse it at startup. */
    struct redis_url list[15];
    size_t n = 0;
    if (redis_url_parse_list(s, list, 15, &n, "fuzz", err, sizeof(err)) == LK_OK) {
        must(n <= 15, "list bounded");
        for (size_t i = 0; i < n; i++)
            check_url(&list[i]);
    } else {
        check_refusal(err);
    }

    /* One URL; a short one without commas is also printed masked. */
    struct redis_url u;
    err[0] = '\0';
    if (redis_url_parse(s, &u, err, sizeof(err)) != LK_OK) {
        check_refusal(err);
    } else {
        check_url(&u);
        if (strlen(s) < 1024 && strchr(s, ',') == NULL) {
            char *shown = printed(s);
            struct redis_url m;
            must(redis_url_parse(shown, &m, err, sizeof(err)) == LK_OK, "masked URL parses");
            must(strcmp(m.host, u.host) == 0 && m.port == u.port && m.db == u.db &&
                     strcmp(m.user, u.user) == 0,
                 "masked URL names the same place and user");
            must(m.password[0] == '\0' || strcmp(m.password, "****") == 0,
                 "the password is masked");
            must(u.password[0] == '\0' || strcmp(u.password, "****") == 0 ||
                     strcmp(m.password, "****") == 0,
                 "a password is shown as ****");
            free(shown);
        }
    }
    free(s);
    return 0;
}
