/*
 * main.c - lockd: load the configuration, open the backend, start the engine
 * and the HTTP workers, then wait for signals on the main thread (SIGTERM and
 * SIGINT drain and exit, SIGHUP reloads the auth tokens).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "api/auth.h"
#include "api/http.h"
#include "config/config.h"
#include "server/backend.h"
#include "server/engine.h"
#include "server/log.h"

#include "version.h" /* build/gen: LOCKD_VERSION, from git describe */

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int write_port_file(const char *path, int port)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path); /* readers never see a half-written file */
}

/* Everything startup checks of the configuration short of binding the
 * listener and reaching the backend: the auth token files, the backend's
 * URLs, the TLS certificate and key. --check-config runs exactly this, and
 * startup runs it first. Loads the auth tokens. 0, or -1 with one line in err. */
static int startup_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    if (auth_load(cfg->auth_token_file, err, errlen) != 0 ||
        auth_load_admin(cfg->admin_token_file, err, errlen) != 0)
        return -1;
    if (backend_check(cfg, err, errlen) != LK_OK)
        return -1;
    return http_check(cfg, err, errlen);
}

int main(int argc, char **argv)
{
    struct lk_config cfg;
    enum cfg_action action;
    char err[512];
    if (config_load(&cfg, argc, argv, NULL, &action, err, sizeof(err)) != 0) {
        fprintf(stderr, "lockd: %s\n", err);
        config_free(&cfg);
        return 2;
    }
    if (action == CFG_HELP) {
        config_help(stdout);
        config_free(&cfg);
        return 0;
    }
    if (action == CFG_VERSION) {
        printf("lockd %s\n", LOCKD_VERSION);
        config_free(&cfg);
        return 0;
    }
    if (action == CFG_CHECK) {
        int rc = startup_check(&cfg, err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, "lockd: %s\n", err);
        else
            config_print(&cfg, stdout);
        auth_free();
        config_free(&cfg);
        return rc != 0 ? 2 : 0;
    }
    lk_log_level = lk_log_parse_level(cfg.log_level);
    lk_log_json = strcmp(cfg.log_format, "json") == 0;
    if (startup_check(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "lockd: %s\n", err);
        auth_free();
        config_free(&cfg);
        return 2;
    }
    raise_nofile();

    /* Signals go to the main thread only: block them before threads start. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct backend bk;
    enum lk_code c = backend_open(&cfg, &bk, err, sizeof(err));
    if (c != LK_OK) {
        fprintf(stderr, "lockd: %s\n", err);
        auth_free();
        config_free(&cfg);
        return 2;
    }
    struct engine *e = engine_new(&cfg, &bk);
    if (engine_start(e) != LK_OK) {
        fprintf(stderr, "lockd: cannot start the engine\n");
        engine_free(e);
        auth_free();
        config_free(&cfg);
        return 1;
    }
    struct http_server *srv = http_start(&cfg, e, err, sizeof(err));
    if (srv == NULL) {
        fprintf(stderr, "lockd: %s\n", err);
        engine_free(e);
        auth_free();
        config_free(&cfg);
        return 2;
    }
    int port = http_port(srv);
    if (cfg.port_file[0] != '\0' && write_port_file(cfg.port_file, port) != 0)
        lk_log(LK_WARN, "cannot write port_file '%s': %s", cfg.port_file, strerror(errno));
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    /* stderr only, in log_format: a container's log is one format. stdout
     * is for --help, --version and --check-config. */
    lk_log_kv(LK_INFO, "lockd listening", "listen", cfg.listen, "port", portstr, "backend",
              cfg.backend, "version", LOCKD_VERSION, (char *)NULL);

    int64_t drain_deadline = 0;
    for (;;) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGHUP) {
            if (auth_load(cfg.auth_token_file, err, sizeof(err)) != 0 ||
                auth_load_admin(cfg.admin_token_file, err, sizeof(err)) != 0)
                lk_log(LK_ERROR, "cannot reload tokens: %s", err);
            else
                lk_log(LK_INFO, "reloaded auth tokens");
            continue;
        }
        if (sig == SIGTERM || sig == SIGINT) {
            if (drain_deadline != 0) {
                lk_log(LK_WARN, "second signal: exiting now");
                break;
            }
            lk_log(LK_INFO, "draining: new acquires are refused until sessions end");
            engine_drain(e);
            drain_deadline = lk_now_ms() + cfg.shutdown_timeout_ms;
        }
        if (drain_deadline != 0) {
            if (engine_session_count(e) == 0)
                break;
            if (lk_now_ms() >= drain_deadline) {
                lk_log(LK_WARN, "shutdown_timeout_ms passed with sessions still open");
                break;
            }
        }
    }
    if (cfg.release_on_shutdown)
        engine_shutdown(e);
    http_stop(srv);
    engine_free(e);
    auth_free();
    lk_log(LK_INFO, "lockd stopped");
    config_free(&cfg);
    return 0;
}
