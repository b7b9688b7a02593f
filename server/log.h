/*
 * log.h - one line per event to stderr, JSON (default) or text. The level is
 * checked before anything is formatted. Safe from any thread.
 */
#ifndef LOCKD_SERVER_LOG_H
#define LOCKD_SERVER_LOG_H

enum lk_level { LK_DEBUG = 0, LK_INFO, LK_WARN, LK_ERROR, LK_FATAL };

extern int lk_log_level;
extern int lk_log_json;

#define lk_log(level, ...)                                                                         \
    do {                                                                                           \
        if ((level) >= lk_log_level)                                                               \
            lk_log_write((level), __VA_ARGS__);                                                    \
    } while (0)

/* Formats msg; extra key/value fields follow as a NULL-terminated list of
 * const char * pairs after the format arguments are consumed, so use
 * lk_log_kv for structured fields. */
void lk_log_write(enum lk_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Structured: msg plus pairs of (key, string value), NULL-terminated. */
void lk_log_kv(enum lk_level level, const char *msg, ...) __attribute__((sentinel));

int lk_log_parse_level(const char *s);

#endif
