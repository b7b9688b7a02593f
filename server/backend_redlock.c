/*
 * backend_redlock.c - the `redlock` backend: a quorum combinator over N >= 3
 * (odd) independent Redis masters, each one Redis lock layer
 * (redis_lock.h: backend_redis.c's scripts, grouping and reply decoding on
 * its own node layer and connection per loop). Every operation goes to all
 * N lock layers at once on the submitting loop and is answered from the
 * majority (N/2+1); acquires are fenced by writing the majority's highest
 * counter back before the grant is answered. No hiredis here, no Lua of its
 * own but fence_raise.lua (behind redis_lock_fence_raise). Runs on the
 * submitting loop's thread; nodes(), watch() and set_release_hook() from
 * any thread. DESIGN.md §2 Fencing tokens, §3; docs/architecture.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "server/backend.h"
#include "server/log.h"
#include "server/redis_lock.h"
#include "server/redis_url.h"
#include "server/util.h"

#define RL_MAX_NODES 15   /* odd, within METRICS_MAX_NODES */
#define RL_SPLIT_MIN_MS 5 /* a split vote: waiters retry after 5 .. 55 ms */
#define RL_SPLIT_SPAN_MS 50

struct rl {
    int n, quorum;
    struct backend node[RL_MAX_NODES];
};

struct rl_call;

/* One node's share of an operation: what it answered, copied out of its
 * callback. */
struct rl_sub {
    struct rl_call *call;
    int node;
    bool done;
    enum lk_code code;
    int64_t token, ttl_ms, delay_ms;
    bool has_holder;
    struct bk_holder holder;
    /* BK_LIST: the entries this node listed (the listing node only) */
    struct bk_entry *entries;
    char *names;
    size_t nentries;
    char *next_cursor;
};

enum rl_phase {
    PH_OPEN,  /* votes coming in */
    PH_GRANT, /* an acquire won a majority: the write-back runs */
    PH_FAIL,  /* no grant: every node that may have granted is undone */
};

/* One operation fanned out to every node. refs: the submitter, each node's
 * share not yet answered, each write-back in flight; the last frees it. */
struct rl_call {
    struct rl *rl;
    struct lk_loop *lp;
    struct bk_req req; /* its strings point into this record */
    bk_done_fn done;
    void *arg;
    int64_t start_us;
    int64_t now_us; /* ACQUIRE: the token floor every node gets (wall clock) */
    int refs, pending;
    enum rl_phase phase;
    bool answered;
    int wb_pending, wb_ok;
    int64_t token;
    struct bk_renew_item *items;     /* RENEW_MANY: the caller's */
    struct bk_renew_item *sub_items; /* n copies, one per node */
    int list_node;                   /* LIST: the node whose keys are walked */
    char name[LK_NAME_MAX + 1];
    char lease[LK_LEASE_LEN + 1];
    char owner[LK_OWNER_MAX + 1];
    char prefix[LK_NAME_MAX + 1];
    char *cursor;
    struct rl_sub sub[];
};

/* drift = ttl x 0.01 + 2 ms (the Redlock paper's clock drift allowance) */
static int64_t validity_of(const struct rl_call *c, int64_t ttl_ms)
{
    int64_t elapsed_ms = (lk_now_us() - c->start_us + 999) / 1000;
    return ttl_ms - elapsed_ms - (ttl_ms / 100 + 2);
}

static void call_unref(struct rl_call *c)
{
    if (--c->refs > 0)
        return;
    for (int i = 0; i < c->rl->n; i++) {
        free(c->sub[i].entries);
        free(c->sub[i].names);
        free(c->sub[i].next_cursor);
    }
    free(c->sub_items);
    free(c->cursor);
    free(c);
}

/* Exactly once; nodes[] says what each node answered (LK_AGAIN: not yet). */
static void call_answer(struct rl_call *c, struct bk_res *r)
{
    if (c->answered)
        return;
    c->answered = true;
    struct bk_node_result nodes[RL_MAX_NODES];
    for (int i = 0; i < c->rl->n; i++) {
        nodes[i].node = i;
        nodes[i].code = c->sub[i].done ? c->sub[i].code : LK_AGAIN;
    }
    r->nodes = nodes;
    r->nnodes = (size_t)c->rl->n;
    c->done(c->arg, r);
}

static void call_answer_code(struct rl_call *c, enum lk_code code)
{
    struct bk_res r;
    bk_res_init(&r, code);
    call_answer(c, &r);
}

/* ---------------------------------------------------------------- counting */

struct tally {
    int ok, down, pending, answered; /* answered: a reply that is not LK_BACKEND_DOWN */
    int not_held, other;
};

static struct tally tally_of(const struct rl_call *c)
{
    struct tally t = {0};
    for (int i = 0; i < c->rl->n; i++) {
        const struct rl_sub *s = &c->sub[i];
        if (!s->done) {
            t.pending++;
            continue;
        }
        if (s->code == LK_BACKEND_DOWN || s->code == LK_BACKEND_RECOVERING) {
            t.down++; /* a node re-asserting after a restart gives no vote */
            continue;
        }
        t.answered++;
        if (s->code == LK_OK)
            t.ok++;
        else if (s->code == LK_NOT_HELD)
            t.not_held++;
        else if (s->code == LK_HELD_BY_OTHER)
            t.other++;
    }
    return t;
}

/* The holder most nodes report (the same owner and token: a lock's nodes
 * agree on its token once the write-back ran); *votes how many. NULL when
 * no node reports one. */
static const struct bk_holder *top_holder(const struct rl_call *c, int *votes)
{
    const struct bk_holder *best = NULL;
    int best_n = 0;
    for (int i = 0; i < c->rl->n; i++) {
        const struct rl_sub *a = &c->sub[i];
        if (!a->done || !a->has_holder)
            continue;
        int k = 0;
        int64_t min_exp = a->holder.expires_in_ms;
        for (int j = 0; j < c->rl->n; j++) {
            const struct rl_sub *b = &c->sub[j];
            if (b->done && b->has_holder && b->holder.fencing_token == a->holder.fencing_token &&
                strcmp(b->holder.owner, a->holder.owner) == 0) {
                k++;
                if (b->holder.expires_in_ms < min_exp)
                    min_exp = b->holder.expires_in_ms;
            }
        }
        /* the earliest expiry among those that agree: the majority's lease
         * ends when the first of them lets it go below a majority */
        if (k > best_n || (k == best_n && best != NULL && min_exp < best->expires_in_ms)) {
            best = &a->holder;
            best_n = k;
        }
    }
    *votes = best_n;
    return best;
}

/* ---------------------------------------------------------------- undo */

static void undo_done(void *arg, const struct bk_res *r)
{
    (void)r; /* lost: the lease expires at its TTL on that node */
    call_unref(arg);
}

/* Compare-and-delete with the acquire's own lease on node i: never someone
 * else's lock. Publishes nothing (undo.lua says why). Nobody waits for it. */
static void undo_node(struct rl_call *c, int i)
{
    c->refs++;
    (void)redis_lock_undo(c->rl->node[i].state, c->lp, c->name, c->lease, undo_done, c);
}

/* A node that answered OK may hold the grant; one that timed out may too
 * (the script may have run). Refusals hold nothing. */
static bool maybe_granted(const struct rl_sub *s)
{
    return s->done && (s->code == LK_OK || s->code == LK_BACKEND_DOWN);
}

/* ---------------------------------------------------------------- acquire */

/* After the acquire is lost: 409 when a majority answered, 503 when a
 * majority can no longer answer, else wait for the rest. */
static void acq_fail_answer(struct rl_call *c)
{
    struct tally t = tally_of(c);
    int q = c->rl->quorum;
    if (t.answered >= q) {
        struct bk_res r;
        bk_res_init(&r, LK_LOCKED);
        int votes = 0;
        struct bk_holder h;
        const struct bk_holder *top = top_holder(c, &votes);
        if (top != NULL) {
            h = *top;
            if (votes < q) {
                /* A split vote (or a minority's leftover): nobody holds a
                 * majority. A waiter retries after a random delay, not at
                 * once, so that competing lockd processes stop colliding. */
                char hex[5];
                lk_random_hex(hex, 2);
                int64_t d = RL_SPLIT_MIN_MS + strtol(hex, NULL, 16) % RL_SPLIT_SPAN_MS;
                if (h.expires_in_ms > d)
                    h.expires_in_ms = d;
            }
            r.holders = &h;
            r.nholders = 1;
        } else {
            for (int i = 0; i < c->rl->n; i++) /* lock-delays: the longest a majority sees */
                if (c->sub[i].done && c->sub[i].delay_ms > r.delay_ms)
                    r.delay_ms = c->sub[i].delay_ms;
        }
        call_answer(c, &r);
    } else if (t.answered + t.pending < q) {
        call_answer_code(c, LK_BACKEND_DOWN);
    }
}

static void acq_fail(struct rl_call *c)
{
    c->phase = PH_FAIL;
    for (int i = 0; i < c->rl->n; i++)
        if (maybe_granted(&c->sub[i]))
            undo_node(c, i);
    acq_fail_answer(c);
}

static void acq_finish(struct rl_call *c)
{
    if (c->wb_ok < c->rl->quorum) {
        /* fewer than a majority are known to count past the token: a later
         * majority might grant it again */
        c->phase = PH_FAIL;
        for (int i = 0; i < c->rl->n; i++)
            if (maybe_granted(&c->sub[i]))
                undo_node(c, i);
        call_answer_code(c, LK_BACKEND_DOWN);
        return;
    }
    /* Quorum validity: the lease is known to hold only for what is left of
     * its ttl after the time the votes and the write-back took and the
     * clocks' drift. Nothing left: not a grant. */
    int64_t validity = validity_of(c, c->req.ttl_ms);
    if (validity <= 0) {
        lk_log(LK_WARN, "acquire of '%s' took longer than its ttl of %lld ms; undone", c->name,
               (long long)c->req.ttl_ms);
        c->phase = PH_FAIL;
        for (int i = 0; i < c->rl->n; i++)
            if (maybe_granted(&c->sub[i]))
                undo_node(c, i);
        struct bk_res r;
        bk_res_init(&r, LK_LOCKED);
        call_answer(c, &r);
        return;
    }
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    r.fencing_token = c->token;
    r.ttl_ms = c->req.ttl_ms;
    r.validity_ms = validity;
    call_answer(c, &r);
}

static void wb_done(void *arg, const struct bk_res *r)
{
    struct rl_sub *s = arg;
    struct rl_call *c = s->call;
    if (r->code == LK_OK || r->code == LK_NOT_HELD) /* the counter was raised either way */
        c->wb_ok++;
    else
        lk_log(LK_WARN, "cannot raise the fence counter of '%s' on redlock node %d: %s", c->name,
               s->node, lk_code_name(r->code));
    if (--c->wb_pending == 0)
        acq_finish(c);
    call_unref(c);
}

static void late_raise_done(void *arg, const struct bk_res *r)
{
    (void)r;
    call_unref(arg);
}

static void late_raise(struct rl_call *c, struct rl_sub *s)
{
#ifdef LOCKD_REDLOCK_NO_WRITEBACK
    return; /* the mutant: no write-back at all */
#endif
    c->refs++;
    (void)redis_lock_fence_raise(c->rl->node[s->node].state, c->lp, c->name, c->lease, c->token,
                                 late_raise_done, c);
}

/* A majority granted. Fencing: the token is the largest of their counters,
 * and every node that answered with a lower one (or refused) raises its
 * counter to it before the grant is answered, so any later majority (which
 * shares a node with this one) counts past the token even if the node that
 * had the largest counter loses it. The grant stands when a majority are
 * known to hold the token. */
static void acq_grant(struct rl_call *c)
{
    c->phase = PH_GRANT;
    c->token = 0;
    for (int i = 0; i < c->rl->n; i++)
        if (c->sub[i].done && c->sub[i].code == LK_OK && c->sub[i].token > c->token)
            c->token = c->sub[i].token;
    c->wb_pending = 1; /* ours, while the write-backs go out */
    c->wb_ok = 0;
    for (int i = 0; i < c->rl->n; i++) {
        struct rl_sub *s = &c->sub[i];
        if (!s->done || s->code == LK_BACKEND_DOWN)
            continue;
#ifdef LOCKD_REDLOCK_NO_WRITEBACK
        /* The mutant tests/integration/redlock.c t_minority_restart_empty
         * shows failing: every granting node counts as holding the token,
         * none is raised, and tokens go back once a node that had the
         * largest counter restarts empty. */
        c->wb_ok += s->code == LK_OK;
        continue;
#endif
        if (s->code == LK_OK && s->token == c->token) {
            c->wb_ok++;
            continue;
        }
        if (s->code != LK_OK) {
            /* A node that refused (a minority's leftover lock) takes the
             * counter too, so that losing any minority later leaves it on
             * a node of every majority. */
            c->wb_pending++;
            c->refs++;
            (void)redis_lock_fence_raise(c->rl->node[i].state, c->lp, c->name, c->lease, c->token,
                                         wb_done, s);
            continue;
        }
        lk_log(LK_WARN,
               "redlock node %d lacks the fence counter of '%s' that others have (%lld < %lld): "
               "raised; did it restart without its data?",
               i, c->name, (long long)s->token, (long long)c->token);
        c->wb_pending++;
        c->refs++;
        (void)redis_lock_fence_raise(c->rl->node[i].state, c->lp, c->name, c->lease, c->token,
                                     wb_done, s);
    }
    if (--c->wb_pending == 0)
        acq_finish(c);
}

static void acq_eval(struct rl_call *c, struct rl_sub *s)
{
    if (c->phase == PH_FAIL) {
        if (maybe_granted(s))
            undo_node(c, s->node); /* a late grant nobody will use */
        acq_fail_answer(c);
        return;
    }
    if (c->phase == PH_GRANT) {
        /* A late vote joins the lock (release goes to every node); its
         * counter and lock take the lock's token, so that every node
         * reports one token. Nobody waits for it. */
        if (s->code != LK_BACKEND_DOWN && (s->code != LK_OK || s->token != c->token) &&
            c->token > 0)
            late_raise(c, s);
        return;
    }
    struct tally t = tally_of(c);
    int q = c->rl->quorum;
    if (t.ok >= q)
        acq_grant(c);
    else if (t.ok + t.pending < q)
        acq_fail(c);
}

/* ---------------------------------------------------------------- renew, release, ping */

/* The token a majority of nodes renewed the lease under; 0 when no token
 * has a majority (yet). A node can hold the lease under a token of its own:
 * its vote came after the grant (or its reply was lost) and the write-back
 * to it was lost. The largest token would be one that was never granted,
 * and a later grant may get it too (model/redlock.pml found this); the
 * lease's own token is on every node that granted it or took its
 * write-back, which is a majority once the grant was answered. */
static int64_t renew_token(const struct rl_call *c)
{
    for (int i = 0; i < c->rl->n; i++) {
        const struct rl_sub *a = &c->sub[i];
        if (!a->done || a->code != LK_OK)
            continue;
        int k = 0;
        for (int j = 0; j < c->rl->n; j++)
            k += c->sub[j].done && c->sub[j].code == LK_OK && c->sub[j].token == a->token;
        if (k >= c->rl->quorum)
            return a->token;
    }
    return 0;
}

/* Renew, release and ping count on a majority answering OK; the rest is
 * decided once a majority answered otherwise (404 or 409, whichever more
 * nodes said) or can no longer answer (503). */
static void agree_eval(struct rl_call *c)
{
    if (c->answered)
        return;
    struct tally t = tally_of(c);
    int q = c->rl->quorum;
    struct bk_res r;
    int64_t renewed_token = t.ok >= q && c->req.op == BK_RENEW ? renew_token(c) : 0;
    if (t.ok >= q && c->req.op == BK_RENEW && renewed_token == 0) {
        /* renewed by a majority that disagrees on the token */
        if (t.pending > 0)
            return;                           /* the rest may settle it */
        call_answer_code(c, LK_BACKEND_DOWN); /* in doubt: the client keeps its grant's token */
        return;
    }
    if (t.ok >= q) {
        bk_res_init(&r, LK_OK);
        int64_t ttl = 0;
        for (int i = 0; i < c->rl->n; i++) {
            const struct rl_sub *s = &c->sub[i];
            if (!s->done || s->code != LK_OK)
                continue;
            if (s->token > r.fencing_token)
                r.fencing_token = s->token;
            if (ttl == 0 || (s->ttl_ms > 0 && s->ttl_ms < ttl))
                ttl = s->ttl_ms;
            if (s->delay_ms > r.delay_ms)
                r.delay_ms = s->delay_ms;
        }
        if (c->req.op == BK_RENEW) {
            r.fencing_token = renewed_token;
            r.ttl_ms = ttl;
            r.validity_ms = validity_of(c, ttl);
            if (r.validity_ms <= 0) {
                call_answer_code(c, LK_BACKEND_DOWN); /* renewed too late to count on */
                return;
            }
        }
        call_answer(c, &r);
        return;
    }
    if (t.ok + t.pending >= q)
        return;
    if (t.answered >= q && c->req.op != BK_PING) {
        bk_res_init(&r, t.other > t.not_held ? LK_HELD_BY_OTHER : LK_NOT_HELD);
        int votes = 0;
        const struct bk_holder *h = top_holder(c, &votes);
        struct bk_holder copy;
        if (r.code == LK_HELD_BY_OTHER && h != NULL) {
            copy = *h;
            r.holders = &copy;
            r.nholders = 1;
        }
        call_answer(c, &r);
    } else if (t.answered + t.pending < q || c->req.op == BK_PING) {
        call_answer_code(c, LK_BACKEND_DOWN);
    }
}

/* ---------------------------------------------------------------- inspect */

/* The majority view: held when a majority report the same holder; in a
 * lock-delay when a majority see one; else free. 503 without a majority of
 * answers. */
static void inspect_eval(struct rl_call *c)
{
    if (c->answered)
        return;
    struct tally t = tally_of(c);
    int q = c->rl->quorum;
    int votes = 0;
    const struct bk_holder *h = top_holder(c, &votes);
    int delayed = 0, free_n = 0;
    int64_t delay = 0;
    for (int i = 0; i < c->rl->n; i++) {
        const struct rl_sub *s = &c->sub[i];
        if (!s->done || s->code != LK_OK || s->has_holder)
            continue;
        if (s->delay_ms > 0) {
            delayed++;
            if (delay == 0 || s->delay_ms < delay)
                delay = s->delay_ms;
        } else {
            free_n++;
        }
    }
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    struct bk_holder copy;
    if (h != NULL && votes >= q) {
        copy = *h;
        r.holders = &copy;
        r.nholders = 1;
    } else if (delayed >= q) {
        r.delay_ms = delay;
    } else if (free_n >= q || (t.pending == 0 && t.answered >= q)) {
        /* free, or no view a majority shares: nobody can be granted it now
         * without a new majority, so it reads as free */
    } else if (t.answered + t.pending < q) {
        call_answer_code(c, LK_BACKEND_DOWN);
        return;
    } else {
        return; /* wait for more */
    }
    call_answer(c, &r);
}

/* ---------------------------------------------------------------- renew-many */

/* The watchdog's batch, per node one renew_many (batched there); an item is
 * renewed when a majority renewed it. Answered when every node answered
 * (each within backend_timeout_ms). */
static void batch_eval(struct rl_call *c)
{
    if (c->answered || c->pending > 0)
        return;
    int n = c->rl->n, q = c->rl->quorum;
    for (size_t k = 0; k < c->req.nitems; k++) {
        int ok = 0, answered = 0, other = 0, not_held = 0;
        for (int i = 0; i < n; i++) {
            enum lk_code code = c->sub_items[(size_t)i * c->req.nitems + k].result;
            if (!c->sub[i].done || code == LK_BACKEND_DOWN || code == LK_INTERNAL)
                continue;
            answered++;
            ok += code == LK_OK;
            other += code == LK_HELD_BY_OTHER;
            not_held += code == LK_NOT_HELD;
        }
        /* short of a majority: in doubt while the silent nodes could make
         * one (the watchdog retries), lost otherwise */
        if (ok >= q)
            c->items[k].result = LK_OK;
        else if (ok + (n - answered) >= q)
            c->items[k].result = LK_BACKEND_DOWN;
        else
            c->items[k].result = other > not_held ? LK_HELD_BY_OTHER : LK_NOT_HELD;
    }
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    r.items = c->items;
    r.nitems = c->req.nitems;
    call_answer(c, &r);
}

/* ---------------------------------------------------------------- list */

/* A page walks one node's keys (the cursor names it: '<node>.<its cursor>')
 * and keeps the names a majority hold: the other nodes are asked about each
 * name the page found (an inspect each, pipelined). */
struct rl_check {
    struct rl_call *c;
    int pending;
    size_t agree_needed;
    int *votes; /* per entry, the listing node's own included */
};

static void list_answer(struct rl_call *c, const int *votes)
{
    struct rl_sub *s = &c->sub[c->list_node];
    struct bk_entry *keep = lk_calloc(s->nentries ? s->nentries : 1, sizeof(*keep));
    size_t k = 0;
    for (size_t i = 0; i < s->nentries; i++)
        if (votes == NULL || votes[i] >= c->rl->quorum)
            keep[k++] = s->entries[i];
    char cur[1100];
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    r.entries = keep;
    r.nentries = k;
    if (s->next_cursor != NULL) {
        snprintf(cur, sizeof(cur), "%d.%s", c->list_node, s->next_cursor);
        r.next_cursor = cur;
    }
    call_answer(c, &r);
    free(keep);
}

struct rl_probe {
    struct rl_check *chk;
    size_t entry;
};

static void probe_done(void *arg, const struct bk_res *r)
{
    struct rl_probe *p = arg;
    struct rl_check *chk = p->chk;
    struct rl_call *c = chk->c;
    const struct bk_entry *e = &c->sub[c->list_node].entries[p->entry];
    if (r->code == LK_OK && r->nholders > 0 &&
        r->holders[0].fencing_token == e->holder.fencing_token &&
        strcmp(r->holders[0].owner, e->holder.owner) == 0)
        chk->votes[p->entry]++;
    free(p);
    if (--chk->pending == 0) {
        list_answer(c, chk->votes);
        free(chk->votes);
        free(chk);
        call_unref(c);
    }
}

static void list_eval(struct rl_call *c)
{
    struct rl_sub *s = &c->sub[c->list_node];
    if (c->answered || !s->done)
        return;
    if (s->code != LK_OK) {
        call_answer_code(c, s->code);
        return;
    }
    if (s->nentries == 0) {
        list_answer(c, NULL);
        return;
    }
    struct rl_check *chk = lk_calloc(1, sizeof(*chk));
    chk->c = c;
    chk->votes = lk_calloc(s->nentries, sizeof(*chk->votes));
    chk->pending = 1;
    c->refs++;
    for (size_t i = 0; i < s->nentries; i++) {
        chk->votes[i] = 1; /* the listing node holds it */
        for (int j = 0; j < c->rl->n; j++) {
            if (j == c->list_node)
                continue;
            struct rl_probe *p = lk_malloc(sizeof(*p));
            p->chk = chk;
            p->entry = i;
            chk->pending++;
            struct bk_req q = {.op = BK_INSPECT, .name = s->entries[i].name};
            const struct backend *b = &c->rl->node[j];
            (void)b->ops->submit(b->state, c->lp, &q, probe_done, p);
        }
    }
    struct rl_probe *self = lk_malloc(sizeof(*self));
    self->chk = chk;
    self->entry = 0;
    struct bk_res none;
    bk_res_init(&none, LK_BACKEND_DOWN); /* counts no vote: drops our own pending */
    probe_done(self, &none);
}

/* ---------------------------------------------------------------- fan-out */

static void sub_done(void *arg, const struct bk_res *r)
{
    struct rl_sub *s = arg;
    struct rl_call *c = s->call;
    s->done = true;
    s->code = r->code;
    s->token = r->fencing_token;
    s->ttl_ms = r->ttl_ms;
    s->delay_ms = r->delay_ms;
    if (r->nholders > 0) {
        s->has_holder = true;
        s->holder = r->holders[0];
    }
    if (c->req.op == BK_LIST && r->code == LK_OK) {
        size_t total = 0;
        for (size_t i = 0; i < r->nentries; i++)
            total += strlen(r->entries[i].name) + 1;
        s->entries = lk_calloc(r->nentries ? r->nentries : 1, sizeof(*s->entries));
        s->names = lk_malloc(total ? total : 1);
        size_t off = 0;
        for (size_t i = 0; i < r->nentries; i++) {
            size_t l = strlen(r->entries[i].name) + 1;
            memcpy(s->names + off, r->entries[i].name, l);
            s->entries[i] = r->entries[i];
            s->entries[i].name = s->names + off;
            off += l;
        }
        s->nentries = r->nentries;
        s->next_cursor = r->next_cursor ? lk_strdup(r->next_cursor) : NULL;
    }
    if (c->req.op == BK_RENEW_MANY && r->code == LK_OK) {
        /* a round trip that failed on this node counts against it (engine_bk.c) */
        for (size_t i = 0; i < r->nitems; i++)
            if (r->items[i].result == LK_BACKEND_DOWN)
                s->code = LK_BACKEND_DOWN;
    }
    c->pending--;
    switch (c->req.op) {
    case BK_ACQUIRE: acq_eval(c, s); break;
    case BK_RENEW:
    case BK_RELEASE:
    case BK_FORCE_RELEASE: /* every node drops the name; held when a majority held it */
    case BK_PING: agree_eval(c); break;
    case BK_INSPECT: inspect_eval(c); break;
    case BK_RENEW_MANY: batch_eval(c); break;
    case BK_LIST: list_eval(c); break;
    case BK_OP_COUNT: break;
    }
    call_unref(c);
}

static struct rl_call *call_new(struct rl *rl, struct lk_loop *lp, const struct bk_req *req,
                                bk_done_fn done, void *arg)
{
    struct rl_call *c = lk_calloc(1, sizeof(*c) + (size_t)rl->n * sizeof(struct rl_sub));
    c->rl = rl;
    c->lp = lp;
    c->req = *req;
    c->done = done;
    c->arg = arg;
    c->start_us = lk_now_us();
    c->now_us = lk_wall_us();
    c->refs = 1;
    if (req->name != NULL)
        lk_strlcpy(c->name, req->name, sizeof(c->name));
    if (req->lease != NULL)
        lk_strlcpy(c->lease, req->lease, sizeof(c->lease));
    if (req->owner != NULL)
        lk_strlcpy(c->owner, req->owner, sizeof(c->owner));
    if (req->prefix != NULL)
        lk_strlcpy(c->prefix, req->prefix, sizeof(c->prefix));
    c->req.name = c->name;
    c->req.lease = c->lease;
    c->req.owner = c->owner;
    c->req.prefix = c->prefix;
    for (int i = 0; i < rl->n; i++) {
        c->sub[i].call = c;
        c->sub[i].node = i;
    }
    return c;
}

/* Submits c->req (or, for node i, *per_node[i] when given) to the nodes
 * in [from, to), all at once. */
static enum lk_code fan_out(struct rl_call *c, int from, int to, const struct bk_req *per_node)
{
    c->pending = to - from;
    c->refs += to - from;
    for (int i = from; i < to; i++) {
        const struct backend *b = &c->rl->node[i];
        const struct bk_req *q = per_node != NULL ? &per_node[i - from] : &c->req;
        if (q->op == BK_ACQUIRE)
            (void)redis_lock_acquire(b->state, c->lp, q, c->now_us, sub_done, &c->sub[i]);
        else
            (void)b->ops->submit(b->state, c->lp, q, sub_done, &c->sub[i]);
    }
    bool answered = c->answered;
    call_unref(c);
    return answered ? LK_OK : LK_AGAIN;
}

static enum lk_code rl_list(struct rl *rl, struct lk_loop *lp, const struct bk_req *req,
                            bk_done_fn done, void *arg)
{
    /* '<node>.<that node's cursor>'; a first page walks the first node up */
    const char *cur = req->cursor ? req->cursor : "";
    int node = -1;
    const char *rest = "";
    if (cur[0] == '\0') {
        for (int i = 0; i < rl->n && node < 0; i++) {
            struct bk_node st;
            if (rl->node[i].ops->nodes(rl->node[i].state, &st, 1) == 1 && st.up)
                node = i;
        }
        if (node < 0)
            node = 0;
    } else {
        char *end = NULL;
        long v = strtol(cur, &end, 10);
        if (end == cur || *end != '.' || v < 0 || v >= rl->n || end[1] == '\0') {
            struct bk_res r;
            bk_res_init(&r, LK_BAD_CURSOR);
            done(arg, &r);
            return LK_OK;
        }
        node = (int)v;
        rest = end + 1;
    }
    struct rl_call *c = call_new(rl, lp, req, done, arg);
    c->list_node = node;
    c->cursor = lk_strdup(rest);
    c->req.cursor = c->cursor;
    for (int i = 0; i < rl->n; i++)
        if (i != node) {
            c->sub[i].done = true; /* not asked: the page is one node's */
            c->sub[i].code = LK_AGAIN;
        }
    return fan_out(c, node, node + 1, NULL);
}

static enum lk_code rl_submit(void *state, struct lk_loop *lp, const struct bk_req *req,
                              bk_done_fn done, void *arg)
{
    struct rl *rl = state;
    if (req->op == BK_ACQUIRE && (req->mode != BK_EXCLUSIVE || req->limit > 1)) {
        struct bk_res r;
        bk_res_init(&r, LK_UNSUPPORTED); /* the engine refuses these first (caps) */
        done(arg, &r);
        return LK_OK;
    }
    if (req->op == BK_LIST)
        return rl_list(rl, lp, req, done, arg);
    if (req->op == BK_RENEW_MANY && req->nitems == 0) {
        struct bk_res r;
        bk_res_init(&r, LK_OK);
        r.items = req->items;
        done(arg, &r);
        return LK_OK;
    }
    struct rl_call *c = call_new(rl, lp, req, done, arg);
    if (req->op != BK_RENEW_MANY)
        return fan_out(c, 0, rl->n, NULL);
    /* each node renews its own copy of the items; results are combined */
    c->items = req->items;
    c->sub_items = lk_calloc((size_t)rl->n * req->nitems, sizeof(*c->sub_items));
    struct bk_req per[RL_MAX_NODES];
    for (int i = 0; i < rl->n; i++) {
        struct bk_renew_item *it = c->sub_items + (size_t)i * req->nitems;
        memcpy(it, req->items, req->nitems * sizeof(*it));
        for (size_t k = 0; k < req->nitems; k++)
            it[k].result = LK_INTERNAL;
        per[i] = c->req;
        per[i].items = it;
    }
    return fan_out(c, 0, rl->n, per);
}

/* ---------------------------------------------------------------- the rest */

static enum lk_code rl_attach(void *state, struct lk_loop *lp)
{
    struct rl *rl = state;
    for (int i = 0; i < rl->n; i++) {
        enum lk_code rc = rl->node[i].ops->attach(rl->node[i].state, lp);
        if (rc != LK_OK) {
            for (int j = 0; j < i; j++)
                rl->node[j].ops->detach(rl->node[j].state, lp);
            return rc;
        }
    }
    return LK_OK;
}

static void rl_detach(void *state, struct lk_loop *lp)
{
    struct rl *rl = state;
    for (int i = 0; i < rl->n; i++)
        rl->node[i].ops->detach(rl->node[i].state, lp);
}

/* Each node's grants table (the lock layers' sweep). Janitor thread. */
static void rl_sweep(void *state)
{
    struct rl *rl = state;
    for (int i = 0; i < rl->n; i++)
        if (rl->node[i].ops->sweep != NULL)
            rl->node[i].ops->sweep(rl->node[i].state);
}

/* One row per node, in the order of the `redis` URLs. */
static size_t rl_nodes(void *state, struct bk_node *out, size_t max)
{
    struct rl *rl = state;
    size_t k = 0;
    for (int i = 0; i < rl->n && k < max; i++)
        k += rl->node[i].ops->nodes(rl->node[i].state, out + k, 1);
    return k;
}

/* A release on any node wakes our waiters: every node's subscriber calls
 * the hook (the head waiter asks again; a repeat costs one more attempt). */
static void rl_set_release_hook(void *state, bk_release_fn fn, void *arg)
{
    struct rl *rl = state;
    for (int i = 0; i < rl->n; i++)
        rl->node[i].ops->set_release_hook(rl->node[i].state, fn, arg);
}

static void rl_watch(void *state, const char *name, bool on)
{
    struct rl *rl = state;
    for (int i = 0; i < rl->n; i++)
        rl->node[i].ops->watch(rl->node[i].state, name, on);
}

static void rl_free(void *state)
{
    struct rl *rl = state;
    if (rl == NULL)
        return;
    for (int i = 0; i < rl->n; i++)
        rl->node[i].ops->free(rl->node[i].state);
    free(rl);
}

static const struct backend_ops rl_ops = {
    .name = "redlock",
    /* no BK_CAP_LIMIT: a semaphore's holders would have to agree across
     * independent nodes that each admit `limit` of their own, and a
     * majority of them can hold different sets: no count a majority
     * enforces. No BK_CAP_SHARED yet (read-write locks are another branch). */
    .caps = BK_CAP_FLOOR | BK_CAP_FORCE,
    .attach = rl_attach,
    .detach = rl_detach,
    .submit = rl_submit,
    .sweep = rl_sweep,
    .nodes = rl_nodes,
    .set_release_hook = rl_set_release_hook,
    .watch = rl_watch,
    .free = rl_free,
};

enum lk_code backend_redlock_new(const struct lk_config *cfg, struct backend *out, char *err,
                                 size_t errlen)
{
    const char *urls = cfg->redis ? cfg->redis : "";
    struct rl *rl = lk_calloc(1, sizeof(*rl));
    enum lk_code rc = LK_OK;
    struct redis_url *urlv = lk_calloc(RL_MAX_NODES, sizeof(*urlv));
    size_t nurl = 0;
    rc = redis_url_parse_list(urls, urlv, RL_MAX_NODES, &nurl, "backend redlock", err, errlen);
    for (size_t i = 0; i < nurl && rc == LK_OK; i++) {
        rc = redis_lock_open(&urlv[i], cfg, &rl->node[rl->n], err, errlen);
        if (rc == LK_OK)
            rl->n++;
    }
    memset(urlv, 0, RL_MAX_NODES * sizeof(*urlv)); /* passwords */
    free(urlv);
    if (rc != LK_OK)
        goto fail;
    if (rl->n < 3 || rl->n % 2 == 0) {
        snprintf(err, errlen,
                 "invalid value for 'redis': backend redlock needs an odd number (3 or more) of "
                 "URLs, got %d",
                 rl->n);
        rc = LK_INVALID;
        goto fail;
    }
    rl->quorum = rl->n / 2 + 1;
    out->ops = &rl_ops;
    out->state = rl;
    return LK_OK;
fail:
    rl_free(rl);
    return rc;
}
