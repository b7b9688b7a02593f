/*
 * http_own.h - libmicrohttpd's own answers (431, 400, 505, ...) as lockd's
 * {"error","message"} JSON (see http_own.c for how).
 */
#ifndef LOCKD_API_HTTP_OWN_H
#define LOCKD_API_HTTP_OWN_H

#include <stdbool.h>
#include <stddef.h>

#include "server/util.h"

/* Finds libmicrohttpd's response builder and renders the JSON bodies. Call
 * once before any daemon starts (http_start does); idempotent. */
void http_own_init(void);

/* Writes {"error","message"}\n for code (message NULL: the table's) into
 * buf; returns buf. */
const char *http_own_json(enum lk_code code, const char *message, char *buf, size_t len);

struct MHD_Connection;

/* libmicrohttpd parsed conn's request line on this thread (its URI log
 * callback): the connection whose headers it parses next here. */
void http_own_note(struct MHD_Connection *conn);
/* conn is closing (on the thread that noted it): forgotten. */
void http_own_forget(struct MHD_Connection *conn);

/* The code of the answer libmicrohttpd made on its own during this thread's
 * current MHD_run (LK_OK: none), cleared: a request it ended that way is
 * logged and counted with it (a chunk too large: 413 body_too_large). */
enum lk_code http_own_take(void);

/* Writes buf as TLS records to a connection's GnuTLS session (what
 * MHD_CONNECTION_INFO_GNUTLS_SESSION gives): an answer lockd must send when
 * libmicrohttpd has no room left to (a 431 at its memory pool's edge).
 * False when it could not (no GnuTLS, or the socket refused). */
bool http_own_tls_write(void *session, const void *buf, size_t len);

#endif
