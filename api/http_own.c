/*
 * http_own.c - the answers libmicrohttpd makes on its own, before any handler
 * runs (request line and headers over its memory pool: 431; a malformed
 * request line, no Host, a bad Content-Length or chunk: 400 or 413; an
 * unknown HTTP version: 505; ...), sent as lockd's {"error","message"} JSON.
 *
 * libmicrohttpd 0.9.75 has no hook for them: it builds each from a static
 * HTML page with MHD_create_response_from_buffer, which it calls through its
 * PLT. lockd defines that function too (ELF symbol interposition, as a
 * malloc replacement does), so it sees every one; it swaps MHD's page for
 * the JSON answer of the same meaning and passes everything else, untouched,
 * to libmicrohttpd's own (dlsym RTLD_NEXT). MHD still picks the status and
 * closes the connection after. For a bad Content-Length, where
 * libmicrohttpd 0.9.75 would write the answer's header twice, lockd writes
 * the answer to the connection itself (the one whose request line this
 * thread saw last, if its Content-Length is indeed bad) and gives MHD no
 * response, so it closes. tests/integration/first_hour.c sends each
 * kind of request, on HTTP and on HTTPS, so a libmicrohttpd that stops
 * calling through the PLT is caught. Any thread: read-only after
 * http_own_init().
 */
#include "api/http_own.h"

#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/errors.h"

typedef struct MHD_Response *(*create_fn)(size_t size, void *buffer,
                                          enum MHD_ResponseMemoryMode mode);

static _Atomic(create_fn) real_create;

/* gnutls_record_send, which libmicrohttpd's TLS links in (NULL: built
 * without TLS). Found by name: lockd needs no GnuTLS headers for one call. */
typedef ssize_t (*tls_send_fn)(void *session, const void *data, size_t len);
static _Atomic(tls_send_fn) tls_send;

/* MHD's page (a phrase of it) -> lockd's code and sentence (NULL: the
 * table's). First match wins: the specific phrases come first. */
static struct {
    const char *phrase;
    enum lk_code code;
    const char *message;
    /* A bad Content-Length: libmicrohttpd 0.9.75 writes the header of this
     * answer twice (it queues it while parsing the headers, then builds it
     * again when it replies), so a client reads the second header as the
     * body. lockd writes it itself when it can (http_own_direct). */
    bool direct;
    char json[192]; /* built by http_own_init */
} own[] = {
    {"Request too big", LK_HEADERS_TOO_LARGE, NULL, false, ""},
    {"HTTP version", LK_HTTP_VERSION, NULL, false, ""},
    {"Host:", LK_BAD_REQUEST, "an HTTP/1.1 request needs a Host header", false, ""},
    {"too large value for <b>Content-Length", LK_BODY_TOO_LARGE, "the Content-Length is too large",
     true, ""},
    {"wrong value for <b>Content-Length", LK_BAD_REQUEST, "the Content-Length is not a number",
     true, ""},
    {"chunk size used", LK_BODY_TOO_LARGE, "a chunk of the body is too large", false, ""},
    {"chunked encoding", LK_BAD_REQUEST, "the chunked encoding of the body is malformed", false,
     ""},
    {"Internal server error", LK_INTERNAL, NULL, false, ""},
    {"", LK_BAD_REQUEST, NULL, false, ""}, /* any other page of MHD's */
};
#define NOWN (sizeof(own) / sizeof(own[0]))

const char *http_own_json(enum lk_code code, const char *message, char *buf, size_t len)
{
    const struct errors_row *row = errors_row(code);
    json_t *o = json_object();
    json_object_set_new(o, "error", json_string(row->error));
    json_object_set_new(o, "message", json_string(message != NULL ? message : row->message));
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (s == NULL)
        abort(); /* out of memory */
    snprintf(buf, len, "%s\n", s);
    free(s);
    return buf;
}

void http_own_init(void)
{
    if (atomic_load(&real_create) != NULL)
        return;
    for (size_t i = 0; i < NOWN; i++)
        http_own_json(own[i].code, own[i].message, own[i].json, sizeof(own[i].json));
    create_fn f;
    *(void **)&f = dlsym(RTLD_NEXT, "MHD_create_response_from_buffer");
    if (f == NULL)
        abort(); /* libmicrohttpd is linked: it cannot be missing */
    tls_send_fn ts;
    *(void **)&ts = dlsym(RTLD_DEFAULT, "gnutls_record_send");
    atomic_store(&tls_send, ts);
    atomic_store(&real_create, f);
}

bool http_own_tls_write(void *session, const void *buf, size_t len)
{
    tls_send_fn ts = atomic_load_explicit(&tls_send, memory_order_relaxed);
    if (ts == NULL || session == NULL)
        return false;
    size_t off = 0;
    for (int tries = 0; off < len && tries < 8; tries++) {
        ssize_t n = ts(session, (const char *)buf + off, len - off);
        if (n > 0)
            off += (size_t)n;
        else if (n != -28 && n != -52) /* GNUTLS_E_AGAIN, GNUTLS_E_INTERRUPTED: again */
            return false;
    }
    return off == len;
}

/* The connection whose request line this thread's libmicrohttpd parsed
 * last (http_own_note): the one whose headers it is parsing now. */
static _Thread_local struct MHD_Connection *current;

/* The code of the last answer libmicrohttpd made on its own on this thread
 * (http_own_take). */
static _Thread_local enum lk_code last_own = LK_OK;

enum lk_code http_own_take(void)
{
    enum lk_code c = last_own;
    last_own = LK_OK;
    return c;
}

void http_own_note(struct MHD_Connection *conn)
{
    current = conn;
}

void http_own_forget(struct MHD_Connection *conn)
{
    if (current == conn)
        current = NULL; /* never a closed connection's memory */
}

/* Whether conn's Content-Length is one libmicrohttpd refuses: not digits
 * only, or past 2^64. */
static bool bad_content_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (v == NULL)
        return false;
    size_t n = strlen(v), d = strspn(v, "0123456789");
    if (n == 0 || d != n)
        return true;
    errno = 0;
    (void)strtoull(v, NULL, 10);
    return errno == ERANGE;
}

/* Writes row i's answer to the connection being parsed and closes it for
 * writing; false when that connection cannot be told for sure, or the write
 * failed (libmicrohttpd's own answer then goes out as before). */
static bool http_own_direct(size_t i)
{
    struct MHD_Connection *conn = current;
    if (conn == NULL || !bad_content_length(conn))
        return false;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci != NULL ? ci->connect_fd : -1;
    const union MHD_ConnectionInfo *ti =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    void *tls = ti != NULL ? ti->tls_session : NULL;
    if (fd < 0)
        return false;
    int status = errors_row(own[i].code)->status;
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    char out[512];
    size_t blen = strlen(own[i].json);
    int n = snprintf(out, sizeof(out),
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, reason != NULL ? reason : "", blen, own[i].json);
    if (n <= 0 || (size_t)n >= sizeof(out))
        return false;
    bool ok;
    if (tls != NULL) {
        ok = http_own_tls_write(tls, out, (size_t)n);
    } else {
        ok = write(fd, out, (size_t)n) == n; /* ~250 bytes into an empty socket buffer */
        shutdown(fd, SHUT_WR);
    }
    return ok;
}

/* The interposed function: lockd's own answers pass straight through (their
 * first byte is '{', or they are empty). */
struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
                                                     enum MHD_ResponseMemoryMode mode)
{
    create_fn real = atomic_load_explicit(&real_create, memory_order_relaxed);
    if (real == NULL) { /* a call before http_start: none in lockd */
        http_own_init();
        real = atomic_load(&real_create);
    }
    static const char page[] = "<html><head><title>";
    if (size < sizeof(page) - 1 || buffer == NULL || memcmp(buffer, page, sizeof(page) - 1) != 0)
        return real(size, buffer, mode);
    size_t i = 0;
    while (i < NOWN - 1 && memmem(buffer, size, own[i].phrase, strlen(own[i].phrase)) == NULL)
        i++;
    if (mode == MHD_RESPMEM_MUST_FREE)
        free(buffer);
    last_own = own[i].code;
    /* Written already: no response, and libmicrohttpd closes the connection. */
    if (own[i].direct && http_own_direct(i))
        return NULL;
    struct MHD_Response *resp =
        real(strlen(own[i].json), (void *)own[i].json, MHD_RESPMEM_PERSISTENT);
    if (resp != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return resp;
}
