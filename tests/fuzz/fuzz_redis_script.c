/*
 * fuzz_redis_script.c - libFuzzer target for what the Redis backend makes of
 * its scripts' replies (backend_redis.c): an acquire (exclusive, a reader
 * with riders, a semaphore's slot), a multi-lock, a renewal, a release, a
 * forced release, a release that hands the name on, an inspect, a listing
 * page and a renew_many batch, each alone or (acquires, releases, hand-offs)
 * two in a group. The real operations build the real commands, and the real
 * callbacks get the reply: this file includes backend_redis.c with the node
 * layer's send, queue and arm replaced by a recorder, so nothing touches a
 * network and every command sent (undos too) is seen. The first byte picks
 * the operation, the second the circumstances (the deadline passed before
 * the reply, WAIT for a replica and its answer, a group); the rest is RESP,
 * read by hiredis as lockd reads it off the wire: the script's reply, then
 * WAIT's. Promises checked: exactly one answer; a grant only from a token
 * string (1..18 digits, above 0, '+' after a semaphore's setting room) and
 * with that token; a grant nobody gets is undone (compare-and-delete, the
 * operation's own lease); nothing else undone; holders within bounds.
 * Built by `make fuzz`; seeds in corpus/fuzz_redis_script.
 */
#include <hiredis/hiredis.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/redis_node.h"
#include "tests/fuzz/resp_guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The node layer as the operations see it: a command sent or queued is held
 * (one reference, as hiredis' callback or the queue holds it) and recorded;
 * an undo is recorded and refused (then freed, as one that finds the
 * connection gone). Defined after backend_redis.c, whose struct rcmd they read. */
static int fz_send(struct rn_cmd *nc);
static int fz_queue(struct rn_cmd *nc, int q);
static void fz_arm(struct rn_cmd *nc);
#define rn_send fz_send
#define rn_queue fz_queue
#define rn_cmd_arm fz_arm
#include "server/backend_redis.c"
#undef rn_send
#undef rn_queue
#undef rn_cmd_arm

#define FZ_OPS 2
#define FZ_UNDOS 16

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_redis_script: broken promise: %s\n", what);
        abort();
    }
}

/* What one operation was answered (copied in its done callback). */
struct seen {
    int answers;
    enum lk_code code;
    int64_t token, ttl_ms, delay_ms;
    bool room;
    size_t nholders, blocked, nentries;
    int64_t tokens[4];
    bool handoff;
    enum lk_code ho_code;
    int64_t ho_token;
    bool ho_room;
    int64_t more_tokens[2];
};

static struct {
    struct rn_cmd *sent[FZ_OPS + 1];
    int nsent;
    struct rn_cmd *queued[FZ_OPS];
    int queue_of[FZ_OPS];
    int nqueued;
    char undo_lease[FZ_UNDOS][LK_LEASE_LEN + 1];
    int nundo;
} fz;

static int fz_send(struct rn_cmd *nc)
{
    struct rcmd *cmd = (struct rcmd *)nc;
    if (cmd->kind == RK_UNDO) {
        /* FCALL fn 1 <lock> <lease> 0 <channel publisher> (cmd_undo, multi_undo) */
        must(nc->argc == 7 && nc->argvlen[4] == LK_LEASE_LEN, "an undo is release.lua's");
        if (fz.nundo < FZ_UNDOS)
            memcpy(fz.undo_lease[fz.nundo], nc->argv[4], LK_LEASE_LEN + 1);
        fz.nundo++;
        return -1;
    }
    must(fz.nsent <= FZ_OPS, "as many commands sent as made");
    fz.sent[fz.nsent++] = nc;
    nc->refs++; /* hiredis' callback's */
    return 0;
}

static int fz_queue(struct rn_cmd *nc, int q)
{
    must(fz.nqueued < FZ_OPS, "as many commands queued as made");
    fz.queued[fz.nqueued] = nc;
    fz.queue_of[fz.nqueued++] = q;
    nc->refs++; /* the queue's */
    return 0;
}

static void fz_arm(struct rn_cmd *nc)
{
    (void)nc; /* no deadline: the target expires commands itself */
}

/* A holder as the API will show it: bounded and well-formed. */
static void holder_ok(const struct bk_holder *h)
{
    must(memchr(h->owner, '\0', sizeof(h->owner)) != NULL, "an owner fits its buffer");
    must(h->expires_in_ms >= 0, "a holder's expiry is not negative");
    must(h->mode == BK_EXCLUSIVE || h->mode == BK_SHARED, "a holder's mode is a mode");
}

static void res_ok(const struct bk_res *r)
{
    for (size_t i = 0; i < r->nholders; i++)
        holder_ok(&r->holders[i]);
    if (r->code == LK_LOCKED)
        must(r->nholders == 1 || (r->nholders == 0 && r->delay_ms > 0),
             "locked: by a holder, or by a lock-delay that runs");
    must(r->total_holders <= (size_t)INT64_MAX, "a holder count is not negative");
}

static struct bk_grant_item fz_more[2];
static size_t fz_ntokens; /* a multi-lock's names (at most 4) */

static void on_done(void *arg, const struct bk_res *r)
{
    struct seen *s = arg;
    s->answers++;
    must(s->answers == 1, "answered once");
    res_ok(r);
    s->code = r->code;
    s->token = r->fencing_token;
    s->ttl_ms = r->ttl_ms;
    s->delay_ms = r->delay_ms;
    s->room = r->room;
    s->nholders = r->nholders;
    s->blocked = r->blocked;
    s->nentries = r->nentries;
    if (r->code == LK_OK && r->tokens != NULL)
        memcpy(s->tokens, r->tokens, fz_ntokens * sizeof(s->tokens[0]));
    for (size_t i = 0; i < 2; i++)
        s->more_tokens[i] = fz_more[i].fencing_token;
    for (size_t i = 0; i < r->nentries; i++) {
        must(r->entries[i].name != NULL, "a listed lock has a name");
        holder_ok(&r->entries[i].holder);
    }
    if (r->next_cursor != NULL) {
        const char *t = strrchr(r->next_cursor, '~');
        must(t != NULL && strlen(t + 1) == CURSOR_CHECK &&
                 strlen(r->next_cursor) < REDIS_CURSOR_MAX,
             "a next cursor is '<where>~<check>'");
    }
    if (r->handoff != NULL) {
        res_ok(r->handoff);
        must(r->handoff->handoff == NULL, "a hand-off's acquire hands nothing on");
        s->handoff = true;
        s->ho_code = r->handoff->code;
        s->ho_token = r->handoff->fencing_token;
        s->ho_room = r->handoff->room;
    }
}

static struct bk_renew_item fz_items[3];
static struct seen fz_batch;

static void on_batch(void *arg, const struct bk_res *r)
{
    must(arg == &fz_batch, "a batch answers its own");
    fz_batch.answers++;
    must(fz_batch.answers == 1, "a batch answered once");
    must(r->items == fz_items, "a batch answers its items");
    for (size_t i = 0; i < r->nitems; i++) {
        enum lk_code c = r->items[i].result;
        must(c == LK_OK || c == LK_NOT_HELD || c == LK_HELD_BY_OTHER || c == LK_BACKEND_DOWN,
             "an item's result is one of four");
    }
}

/* The reference: a grant's token as the scripts write it, a string of 1 to
 * 18 digits above 0 ('+' after it when plus, then *room). */
static bool ref_grant(const redisReply *e, bool plus, int64_t *token, bool *room)
{
    *room = false;
    if (e == NULL || e->type != REDIS_REPLY_STRING)
        return false;
    size_t len = e->len;
    if (plus && len > 1 && e->str[len - 1] == '+') {
        *room = true;
        len--;
    }
    if (len < 1 || len > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (e->str[i] < '0' || e->str[i] > '9')
            return false;
        v = v * 10 + (e->str[i] - '0');
    }
    *token = v;
    return v > 0;
}

static const char *const LEASES[FZ_OPS] = {"00112233445566778899aabbccddeeff",
                                           "ffeeddccbbaa99887766554433221100"};
static const char *const NAMES[4] = {"alpha", "beta", "gamma", "delta"};

enum fz_op {
    OP_ACQUIRE,   /* acquire.lua */
    OP_READER,    /* acquire_shared.lua, a reader with riders (bk_req.more) */
    OP_SLOT,      /* acquire_shared.lua, a semaphore's slot */
    OP_MULTI,     /* acquire_set.lua */
    OP_RENEW,     /* renew.lua */
    OP_RELEASE,   /* release.lua */
    OP_FORCE,     /* force_release.lua */
    OP_HANDOFF,   /* release_handoff.lua, an exclusive waiter */
    OP_HANDOFF_S, /* release_handoff.lua, a semaphore's waiter */
    OP_INSPECT,   /* inspect.lua */
    OP_LIST,      /* list.lua */
    OP_BATCH,     /* renew_many.lua */
    OP_COUNT
};

static bool is_acquire(enum fz_op op)
{
    return op == OP_ACQUIRE || op == OP_READER || op == OP_SLOT;
}

static bool groups(enum fz_op op)
{
    return op == OP_ACQUIRE || op == OP_SLOT || op == OP_RELEASE || op == OP_HANDOFF ||
           op == OP_HANDOFF_S;
}

static int undos_of(const char *lease)
{
    int n = 0;
    for (int i = 0; i < fz.nundo && i < FZ_UNDOS; i++)
        n += strcmp(fz.undo_lease[i], lease) == 0;
    return n;
}

/* Starts operation i of kind op; its answer goes to *s. */
static void start(struct rb *bk, enum fz_op op, int i, size_t nmulti, bool delay, struct seen *s)
{
    struct bk_req q = {
        .name = NAMES[i],
        .lease = LEASES[i],
        .owner = "owner-of-it",
        .mode = BK_EXCLUSIVE,
        .limit = 1,
        .ttl_ms = 10000 + i,
        .wait = true,
    };
    static struct bk_handoff ho;
    enum lk_code rc = LK_OK;
    switch (op) {
    case OP_ACQUIRE: rc = rb_acquire(bk, NULL, &q, 1000, on_done, s); break;
    case OP_READER:
        q.mode = BK_SHARED;
        for (size_t k = 0; k < 2; k++)
            fz_more[k] = (struct bk_grant_item){.lease = LEASES[1 - i], .owner = "", .ttl_ms = 5};
        q.more = fz_more;
        q.nmore = 2;
        rc = rb_acquire_shared(bk, NULL, &q, 1000, on_done, s);
        break;
    case OP_SLOT:
        q.limit = 3;
        rc = rb_acquire_shared(bk, NULL, &q, 1000, on_done, s);
        break;
    case OP_MULTI:
        q.names = NAMES;
        q.nnames = nmulti;
        rc = rb_acquire_multi(bk, NULL, &q, on_done, s);
        break;
    case OP_RENEW: rc = rb_renew(bk, NULL, &q, on_done, s); break;
    case OP_RELEASE:
        q.delay_ms = delay ? 500 : 0;
        rc = rb_release(bk, NULL, &q, on_done, s);
        break;
    case OP_FORCE: rc = rb_force_release(bk, NULL, &q, on_done, s); break;
    case OP_HANDOFF:
    case OP_HANDOFF_S:
        ho = (struct bk_handoff){.lease = LEASES[i],
                                 .owner = "waiter",
                                 .mode = BK_EXCLUSIVE,
                                 .limit = op == OP_HANDOFF ? 1 : 3,
                                 .ttl_ms = 7000};
        q.lease = "0123456789abcdef0123456789abcdef"; /* the one released */
        q.handoff = &ho;
        rc = rb_release_handoff(bk, NULL, &q, 1000, on_done, s);
        break;
    case OP_INSPECT: rc = rb_inspect(bk, NULL, &q, on_done, s); break;
    case OP_LIST:
        q.prefix = "";
        q.cursor = "";
        q.count = 10;
        rc = rb_list(bk, NULL, &q, on_done, s);
        break;
    case OP_BATCH:
        for (size_t k = 0; k < 3; k++)
            fz_items[k] = (struct bk_renew_item){
                .name = NAMES[k], .lease = LEASES[k % 2], .ttl_ms = 3000, .result = LK_INTERNAL};
        q.items = fz_items;
        q.nitems = 1 + nmulti % 3;
        rc = rb_renew_many(bk, NULL, &q, on_batch, &fz_batch);
        break;
    case OP_COUNT: break;
    }
    must(rc == LK_AGAIN, "the operation waits for its reply");
}

/* What op i's reply was: e (NULL when none came, or an error). */
static void check(enum fz_op op, int i, const redisReply *e, const struct seen *s, bool expired,
                  bool wait, const redisReply *w, size_t nmulti, bool grouped_undo)
{
    const char *lease = LEASES[i];
    int64_t token = 0;
    bool room = false;
    if (op == OP_BATCH) {
        must(fz_batch.answers == 1, "a batch answered");
        return;
    }
    must(s->answers == 1, "answered exactly once");
    if (expired)
        must(s->code == LK_BACKEND_DOWN, "a command past its deadline is down");
    if (is_acquire(op)) {
        bool str = e != NULL && e->type == REDIS_REPLY_STRING;
        bool good = ref_grant(e, op == OP_SLOT, &token, &room);
        bool waited = !wait || (w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer >= 1);
        if (s->code == LK_OK) {
            must(good && !expired && waited, "a grant only from a token string (and its WAIT)");
            must(s->token == token && token > 0, "the grant's token is the reply's");
            must(s->room == room, "room only from a '+'");
            must(s->ttl_ms == 10000 + i, "the ttl asked");
            if (op == OP_READER)
                must(s->more_tokens[0] == token + 1 && s->more_tokens[1] == token + 2,
                     "riders' tokens follow the grant's");
            must(undos_of(lease) == 0, "a grant answered is not undone");
        } else {
            must(!(good && !expired && waited), "a good grant is answered");
            must(undos_of(lease) == (str || grouped_undo ? 1 : 0),
                 "a grant nobody gets is undone, once; nothing else is");
            must(s->code == LK_BACKEND_DOWN || s->code == LK_LOCKED || s->code == LK_LIMIT_MISMATCH,
                 "an acquire is granted, refused or down");
            if (s->code != LK_BACKEND_DOWN)
                must(e != NULL && e->type == REDIS_REPLY_ARRAY, "a refusal is an array");
        }
        return;
    }
    if (op == OP_MULTI) {
        bool tokens = e != NULL && e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
                      e->element[0]->type == REDIS_REPLY_STRING;
        bool good = tokens && e->elements == nmulti;
        int64_t want[4] = {0};
        for (size_t k = 0; good && k < nmulti; k++)
            good = ref_grant(e->element[k], false, &want[k], &room);
        if (s->code == LK_OK) {
            must(good && !expired, "a multi-lock granted only from its tokens");
            must(memcmp(s->tokens, want, nmulti * sizeof(want[0])) == 0 && s->token == want[0],
                 "the multi-lock's tokens are the reply's");
            must(undos_of(lease) == 0, "a multi-lock answered is not undone");
        } else {
            must(!(good && !expired), "a good multi-lock grant is answered");
            must(undos_of(lease) == (tokens ? (int)nmulti : 0),
                 "every name of a multi-lock nobody gets is undone");
            if (s->code != LK_BACKEND_DOWN)
                must(s->blocked < nmulti, "the blocking name is one of the set");
        }
        return;
    }
    must(fz.nundo == 0 || op == OP_HANDOFF || op == OP_HANDOFF_S, "only grants are undone");
    if (op == OP_RELEASE || op == OP_FORCE || op == OP_RENEW) {
        if (s->code == LK_OK && e != NULL && e->type == REDIS_REPLY_STRING)
            must(op != OP_RENEW && ref_grant(e, false, &token, &room) && s->token == token,
                 "a release's token string is a token");
        if (s->code == LK_OK && op == OP_RELEASE)
            must(s->delay_ms == 0 || s->delay_ms == 500, "the lock-delay asked");
        return;
    }
    if (op == OP_HANDOFF || op == OP_HANDOFF_S) {
        const redisReply *acq =
            e != NULL && e->type == REDIS_REPLY_ARRAY && e->elements >= 2 ? e->element[1] : NULL;
        bool str = acq != NULL && acq->type == REDIS_REPLY_STRING;
        bool good = ref_grant(acq, op == OP_HANDOFF_S, &token, &room);
        if (s->handoff) {
            must(s->code == LK_OK, "a hand-off rides on a release that released");
            if (s->ho_code == LK_OK) {
                must(good && !expired, "a hand-off granted only from a token string");
                must(s->ho_token == token && s->ho_room == room,
                     "the hand-off's token is the reply's");
            }
        }
        bool granted = s->handoff && s->ho_code == LK_OK;
        must(undos_of(lease) ==
                 (granted                                                                  ? 0
                  : str || grouped_undo || (acq != NULL && acq->type == REDIS_REPLY_ERROR) ? 1
                                                                                           : 0),
             "a hand-off's grant nobody gets is undone, once; nothing else is");
        return;
    }
    if (op == OP_INSPECT && s->code == LK_OK)
        must(e != NULL && e->type == REDIS_REPLY_ARRAY, "inspect answers from an array");
    if (op == OP_LIST && s->code == LK_OK)
        must(e != NULL && s->nentries <= (e->elements - 1) / 9, "a page lists what the reply says");
}

static redisReply *next_reply(redisReader *rd)
{
    void *r = NULL;
    if (redisReaderGetReply(rd, &r) != REDIS_OK)
        return NULL;
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || resp_huge_array(data + 2, size - 2))
        return 0;
    enum fz_op op = (enum fz_op)(data[0] % OP_COUNT);
    uint8_t fl = data[1];
    bool expired = fl & 1, wait = (fl & 2) && is_acquire(op), lost = fl & 4;
    bool grouped = (fl & 8) && groups(op) && !wait;
    size_t nmulti = 1 + (size_t)(fl >> 4) % 4;
    fz_ntokens = nmulti;
    redisReader *rd = redisReaderCreate();
    redisReply *r = NULL, *w = NULL;
    if (redisReaderFeed(rd, (const char *)data + 2, size - 2) == REDIS_OK) {
        r = next_reply(rd);
        w = r != NULL ? next_reply(rd) : NULL;
    }
    redisReaderFree(rd);

    static char prefix[] = "lk:";
    struct rb bk = {.prefix = prefix,
                    .prefix_len = 3,
                    .prefix_len_str = "3",
                    .instance = "0123456789abcdef",
                    .wait_replicas = wait ? 1 : 0};
    memset(&fz, 0, sizeof(fz));
    memset(&fz_batch, 0, sizeof(fz_batch));
    memset(fz_more, 0, sizeof(fz_more));
    struct seen s[FZ_OPS] = {0};
    int nops = grouped ? 2 : 1;
    for (int i = 0; i < nops; i++)
        start(&bk, op, i, nmulti, (fl & 32) && !grouped, &s[i]);
    must(fz.nsent + fz.nqueued == nops, "each operation sent or queued");

    /* what each operation's reply is, and its command */
    const redisReply *e[FZ_OPS] = {NULL, NULL};
    bool gundo[FZ_OPS] = {false, false};
    struct rn_cmd *nc;
    if (grouped) {
        must(fz.nqueued == 2 && fz.queue_of[0] == fz.queue_of[1], "a group's members queued alike");
        group_send(&bk, NULL, fz.queue_of[0], fz.queued, 2);
        must(fz.nsent == 1, "a group goes as one command");
        nc = fz.sent[0];
        bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 2;
        for (int i = 0; i < 2; i++) {
            e[i] = ok ? r->element[i] : NULL;
            if (e[i] != NULL && e[i]->type == REDIS_REPLY_ERROR)
                e[i] = NULL;
            /* an acquire whose element is missing was perhaps granted: undone */
            gundo[i] = e[i] == NULL && r != NULL && op != OP_RELEASE;
        }
    } else {
        nc = fz.nsent == 1 ? fz.sent[0] : fz.queued[0];
        e[0] = r != NULL && r->type != REDIS_REPLY_ERROR ? r : NULL;
    }
    if (expired) {
        if (grouped) {
            for (int i = 0; i < 2; i++)
                fz.queued[i]->type->expire(fz.queued[i]);
        } else {
            nc->type->expire(nc);
        }
    }
    if (wait && lost) { /* the WAIT could not be sent: its answer comes first, lost */
        nc->wait_lost = true;
        nc->type->wait_reply(nc, NULL);
    }
    nc->type->reply(nc, r);
    if (wait) {
        if (w == NULL)
            nc->wait_lost = true;
        nc->type->wait_reply(nc, w);
    }
    rn_cmd_unref(nc); /* hiredis' callback is done: settles it */
    const redisReply *wr = wait && !lost ? w : NULL;
    for (int i = 0; i < nops; i++)
        check(op, i, e[i], &s[i], expired, wait, wr, nmulti, gundo[i]);
    if (r != NULL)
        freeReplyObject(r);
    if (w != NULL)
        freeReplyObject(w);
    return 0;
}
