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
#include "server/metrics.h"
#include "server/redis_lock.h"
#include "server/redis_url.h"
#include "server/util.h"

#define RL_MAX_NODES 15 /* odd, within METRICS_MAX_NODES */
/*
 * A shared acquire's vote: its floor is lockd's now_us rounded up to a
 * multiple of RL_VOTE_MOD (residue 0), the same on every node; only a node
 * whose fence counter ran past the floor steps, to the smallest value above
 * its counter with residue i + 1 (node i; redis_lock_set_vote, sh_step in
 * _shared.lua). Uncontended, every node votes the floor: the votes agree
 * and no write-back is needed (acq_grant). Why no two shared grants get one
 * token: a grant's token T is the largest OK vote when a majority had
 * voted OK (acq_grant: late votes only take T, late_raise), over that set
 * S, each vote at or above the call's floor (one on every node: the call's
 * now_us rounded up); a node's votes strictly increase (each is above its
 * counter, which it then holds; fence_raise never lowers it, and raising
 * it to another residue leaves the next step to i + 1). Grants A and B
 * with T_A = T_B: from one node's votes, impossible; from two nodes'
 * stepped votes, their residues differ; a stepped vote and a floor vote,
 * residues i + 1 and 0 differ; both floor votes, then T = floor_A =
 * floor_B and every vote in S_A and S_B is T (at or above the floor, at
 * most the largest), so a node in S_A and S_B (two majorities meet) voted
 * T twice: impossible. Without the residues two readers whose acquires
 * overlap could (model/redlock.pml -DRL_UNIQUE found it: node 0 votes F +
 * 1 for A then F + 2 for B, node 1 F + 1 for B then F + 2 for A, before
 * either write-back; both tokens F + 2). RL_VOTE_MOD must exceed
 * RL_MAX_NODES, so that every node's residue differs from the others' and
 * from the floor's; 16, a power of two.
 *
 * Grouped: a node's layer sends a loop turn's shared acquires as one
 * acquire_shared_many.lua call, and one node's groups can differ from
 * another's (one that holds commands while it reconnects, a command queued
 * while the nodes' queues are flushed). One floor for a group (its latest
 * member's, as on one Redis) would give a call different floors on
 * different nodes; so each member keeps its call's own floor (and the
 * node's modulus and residue: group_send_slot in backend_redis.c) and runs
 * as its acquire_shared.lua call would, one after another in the script.
 * Each call's vote is still at or above its own floor on every node, and a
 * node's votes still strictly increase: the argument holds as it stands.
 * model/redlock.pml runs each reader's acquire on each node as one atomic
 * step with its own floor (acquire_node, ch_arg), the node taking any call
 * sent, so a group is such steps back to back on one node, one of the
 * orders it explores (the model hands lockd each reply in its step; a
 * group's come after its last member ran, but lockd's handling of a reply
 * and a member's script touch nothing of each other's).
 *
 * Exclusive acquires keep plain votes (counter + 1 or the floor), as on
 * one Redis: two exclusive grants, or an exclusive and a shared one, never
 * hold a majority at once, and the write-back puts the earlier one's token
 * on a node of every later majority before it is answered, so the later
 * one votes above it (model/redlock.pml checks both modes). A shared
 * grant pays the write-back's round trip only when some node stepped
 * (concurrent readers, or a counter past lockd's clock).
 */
#define RL_VOTE_MOD 16
_Static_assert(RL_VOTE_MOD > RL_MAX_NODES, "every redlock node needs a residue of its own, not 0");
#define RL_SPLIT_MIN_MS 5 /* a split vote: waiters retry after 5 .. 55 ms */
#define RL_SPLIT_SPAN_MS 50

struct rl {
    int n, quorum;
    struct backend node[RL_MAX_NODES];
};

struct rl_call;

static const char *rl_refusal(const struct bk_req *req);

/* What one node said of a name (an inspect): the majority view is read
 * from n of these (view_eval). */
struct rl_view {
    bool done;
    enum lk_code code;
    struct bk_holder *holders; /* a copy, newest token first */
    size_t nholders, total;
    int64_t limit, delay_ms;
    int64_t index; /* this node's index (inspect.lua: 2n or 2n+1, n its counter) */
};

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
    /* a round trip of this call failed on this node: counted once in
     * lockd_backend_errors_total{node}, by the answer's nodes[] or, when it
     * fails after the answer (a late timeout, an undo), here */
    bool wb_down, counted;
    struct rl_view view; /* BK_INSPECT: every holder it reported */
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
    PH_LEVEL, /* an inspect reads the lagging nodes again, raised (level_counters) */
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
    struct rl_view *probes;          /* LIST: an inspect per entry and node */
    int probes_pending;
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
        free(c->sub[i].view.holders);
    }
    if (c->probes != NULL) {
        size_t k = c->sub[c->list_node].nentries * (size_t)c->rl->n;
        for (size_t i = 0; i < k; i++)
            free(c->probes[i].holders);
        free(c->probes);
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
        struct rl_sub *s = &c->sub[i];
        nodes[i].node = i;
        nodes[i].code = s->wb_down ? LK_BACKEND_DOWN : s->done ? s->code : LK_AGAIN;
        s->counted = nodes[i].code == LK_BACKEND_DOWN; /* engine_bk.c counts these */
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

/* A round trip to node i failed after the call was answered (the node
 * answered after backend_timeout_ms, or an undo or a late write-back
 * failed): engine_bk.c counted what the answer said, so the node's error is
 * counted here, once per call and node. Before the answer, the answer's
 * nodes[] carries it. */
static void node_failed(struct rl_call *c, int i)
{
    struct rl_sub *s = &c->sub[i];
    if (!c->answered) {
        s->wb_down = true;
        return;
    }
    if (!s->counted) {
        s->counted = true;
        metrics_backend_error((size_t)i);
    }
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
    struct rl_sub *s = arg;
    struct rl_call *c = s->call;
    if (r->code == LK_BACKEND_DOWN) /* lost: the lease expires at its TTL on that node */
        node_failed(c, s->node);
    call_unref(c);
}

/* Compare-and-delete with the acquire's own lease on node i: never someone
 * else's lock. Publishes nothing (undo.lua says why). Nobody waits for it. */
static void undo_node(struct rl_call *c, int i)
{
    c->refs++;
    (void)redis_lock_undo(c->rl->node[i].state, c->lp, c->name, c->lease, undo_done, &c->sub[i]);
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
    if (r->code == LK_OK || r->code == LK_NOT_HELD) { /* the counter was raised either way */
        c->wb_ok++;
    } else {
        lk_log(LK_WARN, "cannot raise the fence counter of '%s' on redlock node %d: %s", c->name,
               s->node, lk_code_name(r->code));
        node_failed(c, s->node);
    }
    if (--c->wb_pending == 0)
        acq_finish(c);
    call_unref(c);
}

static void late_raise_done(void *arg, const struct bk_res *r)
{
    struct rl_sub *s = arg;
    struct rl_call *c = s->call;
    if (r->code == LK_BACKEND_DOWN)
        node_failed(c, s->node);
    call_unref(c);
}

static void late_raise(struct rl_call *c, struct rl_sub *s)
{
#ifdef LOCKD_REDLOCK_NO_WRITEBACK
    return; /* the mutant: no write-back at all */
#endif
    c->refs++;
    (void)redis_lock_fence_raise(c->rl->node[s->node].state, c->lp, c->name, c->lease, c->token,
                                 late_raise_done, s);
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
        if (c->req.mode != BK_SHARED || c->token - s->token >= RL_VOTE_MOD)
            lk_log(
                LK_WARN,
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
        struct bk_holder own;
        if (c->req.op == BK_RENEW) {
            r.fencing_token = renewed_token;
            r.ttl_ms = ttl;
            for (int i = 0; i < c->rl->n; i++) { /* the lease's entry (owner, mode) */
                const struct rl_sub *s = &c->sub[i];
                if (s->done && s->code == LK_OK && s->has_holder && s->token == renewed_token) {
                    own = s->holder;
                    own.expires_in_ms = ttl;
                    r.holders = &own;
                    r.nholders = 1;
                    break;
                }
            }
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

static bool same_holder(const struct bk_holder *a, const struct bk_holder *b)
{
    return a->fencing_token == b->fencing_token && a->mode == b->mode &&
           strcmp(a->owner, b->owner) == 0;
}

/* How many of the n views list h; *min_exp the earliest expiry among them
 * (the majority's hold ends when the first of them lets it go). */
static int holder_votes(const struct rl_view *v, int n, const struct bk_holder *h, int64_t *min_exp)
{
    int k = 0;
    *min_exp = h->expires_in_ms;
    for (int i = 0; i < n; i++) {
        if (!v[i].done || v[i].code != LK_OK)
            continue;
        for (size_t j = 0; j < v[i].nholders; j++)
            if (same_holder(&v[i].holders[j], h)) {
                k++;
                if (v[i].holders[j].expires_in_ms < *min_exp)
                    *min_exp = v[i].holders[j].expires_in_ms;
                break;
            }
    }
    return k;
}

static int newest_first(const void *a, const void *b)
{
    const struct bk_holder *x = a, *y = b;
    return x->fencing_token < y->fencing_token ? 1 : x->fencing_token > y->fencing_token ? -1 : 0;
}

/* The majority view of a name from n nodes' inspects: every holder a
 * majority list (the same owner, token and mode: a lock's nodes agree on a
 * holder's token once the write-back ran), newest token first; else a
 * lock-delay a majority see; else free. LK_OK with out filled (out->holders
 * is *hs, the caller's to free); LK_AGAIN while the nodes not heard from
 * yet could still change it; LK_BACKEND_DOWN when fewer than a majority can
 * answer. */
static enum lk_code view_eval(const struct rl_view *v, int n, int q, struct bk_res *out,
                              struct bk_holder **hs)
{
    int answered = 0, pending = 0, delayed = 0, free_n = 0;
    size_t cand = 0;
    int64_t delay = 0, limit = 0;
    for (int i = 0; i < n; i++) {
        if (!v[i].done) {
            pending++;
            continue;
        }
        if (v[i].code != LK_OK)
            continue;
        answered++;
        cand += v[i].nholders;
        if (v[i].limit > limit)
            limit = v[i].limit;
        if (v[i].nholders > 0)
            continue;
        if (v[i].delay_ms > 0) {
            delayed++;
            if (delay == 0 || v[i].delay_ms < delay)
                delay = v[i].delay_ms;
        } else {
            free_n++;
        }
    }
    if (answered + pending < q)
        return LK_BACKEND_DOWN;
    *hs = NULL;
    struct bk_holder *keep = lk_calloc(cand ? cand : 1, sizeof(*keep));
    size_t k = 0;
    bool settled = true; /* no holder the silent nodes could still make a majority's */
    for (int i = 0; i < n; i++) {
        if (!v[i].done || v[i].code != LK_OK)
            continue;
        for (size_t j = 0; j < v[i].nholders; j++) {
            const struct bk_holder *h = &v[i].holders[j];
            bool seen = false;
            for (int p = 0; p < i && !seen; p++)
                for (size_t m = 0; v[p].done && v[p].code == LK_OK && m < v[p].nholders; m++)
                    if (same_holder(&v[p].holders[m], h)) {
                        seen = true;
                        break;
                    }
            if (seen)
                continue;
            int64_t exp;
            int votes = holder_votes(v, n, h, &exp);
            if (votes >= q) {
                keep[k] = *h;
                keep[k++].expires_in_ms = exp;
            } else if (votes + pending >= q) {
                settled = false;
            }
        }
    }
    if (!settled && pending > 0) {
        free(keep);
        return LK_AGAIN;
    }
    bk_res_init(out, LK_OK);
    if (k > 0) {
        qsort(keep, k, sizeof(*keep), newest_first);
        /* a node lists 100 holders at most: beyond them, the count a
         * majority report at least */
        size_t totals[RL_MAX_NODES], nt = 0, total = k;
        for (int i = 0; i < n; i++)
            if (v[i].done && v[i].code == LK_OK)
                totals[nt++] = v[i].total > v[i].nholders ? v[i].total : v[i].nholders;
        for (size_t a = 0; a < nt; a++) /* the q-th largest */
            for (size_t b = a + 1; b < nt; b++)
                if (totals[b] > totals[a]) {
                    size_t t = totals[a];
                    totals[a] = totals[b];
                    totals[b] = t;
                }
        if (nt >= (size_t)q && totals[q - 1] > total)
            total = totals[q - 1];
        *hs = keep;
        out->holders = keep;
        out->nholders = k;
        out->total_holders = total;
        out->limit = limit > 0 ? limit : 1;
        return LK_OK;
    }
    free(keep);
    if (delayed >= q) {
        out->delay_ms = delay;
        return LK_OK;
    }
    /* free, or no view a majority shares: nobody can be granted it now
     * without a new majority, so it reads as free */
    if (free_n >= q || pending == 0)
        return LK_OK;
    return LK_AGAIN;
}

/*
 * The index (DESIGN.md §Watching) of a majority view (view_eval's out, from
 * the same n views), the same on every lockd. C is the counter a majority
 * of the nodes count at least: the quorum-th largest fence counter of all n
 * nodes (a node's counter is its own index / 2). The index is
 *  - 2T while a majority hold the name exclusive, T the holder's token (the
 *    majority agrees on it);
 *  - 2C while a majority hold it shared (one reader or more: every reader
 *    a majority list, with its token);
 *  - 2C+1 otherwise (free, a lock-delay, no view a majority shares).
 * (Not 2 x the newest reader's token: it would go down when the newest of
 * two readers leaves, and back up when another comes.) From the m nodes
 * that answered so far C lies between the quorum-th largest of them (lo)
 * and the (m + quorum - n)-th largest (hi): *known is false while those
 * differ and answers are pending (nodes that agree, the usual case, decide
 * it at once; a node that does not answer in time leaves lo). Why it moves
 * on every change of the majority's holders:
 *  - a grant of T, exclusive or shared: every granting node's counter was
 *    below T and a majority granted, so fewer than a majority counted T or
 *    more: C < T before, below 2T; a reader is in the view once a majority
 *    list it with token T (after the write-back), each counting T or more:
 *    C >= T after, so 2C goes past the 2C or 2C+1 before;
 *  - the end of an exclusive T (release, expiry, force): its write-back
 *    left a majority counting T or more: C >= T, 2C+1 > 2T;
 *  - the end of the last reader: 2C, then 2C+1 (C never goes down);
 *  - the end of one reader while others hold (release, expiry, force): each
 *    node that lets a reader go counts one more (sh_bump, _shared.lua; a
 *    lone reader, kept in the lock's value, 't', whose release is a DEL and
 *    whose expiry runs no script, marks the counter '<n>l' when granted
 *    on a Redlock node, and its end is counted where the counter is next
 *    read, sh_fence: t_lone_reader_end_counted, t_watch_lone_reader,
 *    model/redlock.pml redlock-index-late), and
 *    a majority list the reader, so C moves once they let it go (when the
 *    release is answered) provided each of them counted C or more before.
 *    The view can lose it a little earlier (its majority broken by fewer
 *    nodes): the index follows within the release's fan-out, and a watcher
 *    woken by the first node's message is woken again by the next ones. A
 *    node that counted less (it missed grants while it was down, or
 *    readers' votes stepped to each node's residue, sh_step) holds C back,
 *    and for good when it never listed the reader (it missed the grant: it
 *    counts nothing when the reader goes; t_watch_missed_reader). So the
 *    counters are kept level: when a majority hold the name with two
 *    readers or more, a watcher's inspect (bk_req.wait; a plain inspect
 *    and a listing do not level) waits for every node's answer (each comes
 *    within backend_timeout_ms), and when their counters differ it
 *    inspects each lagging node again with the largest, M, as its
 *    counter's floor (inspect.lua raises it, then reads) and answers from
 *    those reads (level_counters). Every node that lists one of the view's
 *    readers answered (holder_votes counts no other), so each then counts
 *    M or more and the reader's end takes a majority past M. The second
 *    read, not the raise alone: a release that reaches a lagging node
 *    between its two reads shows in the second (the reader gone, the
 *    counter M or more, one instant), so the view answered never lists a
 *    reader whose end the index already counts (a raise alone would fold
 *    that release's count into M while the answer still listed the
 *    reader: its watcher would then hold the index the release led to).
 *    Counters no levelling reached (a node that failed to answer, events
 *    after the reads) can still hold C back until they let the reader go:
 *    a release reaches every node in its fan-out, and each new inspect
 *    levels again; an expiry reaches each node when a script next counts
 *    there, which a watcher's inspect at soonest_expiry does
 *    (t_watch_counters_differ);
 *  - renewals and reentrant holds touch no counter and no token.
 * Why level, and only with two readers: reading the counters another way
 * cannot do it (the largest stays when the node that missed the reader
 * holds it; a sum moves whenever a node is down), and raising a counter is
 * always safe (later tokens only grow; the shared votes' argument above
 * takes any raise). A grant moves C without it, the last reader's end
 * turns 2C into 2C+1 and a writer's index is its token: so a free name, a
 * writer or a lone reader costs nothing more (nor waits for the slowest
 * node), and only an inspect that
 * finds two readers and the counters apart pays a round trip, to the
 * lagging nodes (acquire, renew and release never do). Two lockd that
 * level at once each raise to the largest they read, never lowering: the
 * counters end level, not leapfrogging. Levelling moves C itself (to M):
 * an index read before it (a plain inspect's or a listing's, which do
 * not level) differs once with the same holders.
 * So may an acquire that reached only a minority (a split vote, undone):
 * a watcher then wakes, sees the same holders and asks again. While a
 * node is down, C comes from the others and may read lower (once: the
 * watcher is answered at once and asks again). So may a view whose node
 * reads straddle a grant (an inspect's reads are not one instant): a node
 * read before the grant of T, and nodes read after it whose counters
 * reached T (the grant itself, its write-back raising a node that did not
 * grant it, or a higher counter a failed acquire left) make a view with
 * no holder a majority list and C >= T: 2T+1, before the view with the
 * holder reads 2T, a writer's or readers' (model/redlock.pml: a reader,
 * 9 then 8, in redlock-index before the lone-reader fix; a writer, 3 then
 * 2, in redlock-index-still). Not fixed: the watcher is answered at once,
 * sees the holders and asks again. Within one C a free name reads above
 * its holder (2T+1 after 2T: an exclusive release counts nothing, nor an
 * expiry, which runs no script), so a straddled free view cannot also
 * read below it without every release and expiry counting one.
 */
static int64_t majority_index(const struct rl_view *v, int n, int q, const struct bk_res *view,
                              bool *known)
{
    *known = true;
    if (view->nholders > 0 && view->holders[0].mode == BK_EXCLUSIVE)
        return 2 * view->holders[0].fencing_token;
    int64_t shared = view->nholders > 0 ? 0 : 1;
    int64_t cs[RL_MAX_NODES];
    int m = 0, pending = 0;
    for (int i = 0; i < n; i++) {
        if (!v[i].done)
            pending++;
        else if (v[i].code == LK_OK)
            cs[m++] = v[i].index / 2;
    }
    /* descending (n <= 15) */
    for (int i = 1; i < m; i++)
        for (int j = i; j > 0 && cs[j] > cs[j - 1]; j--) {
            int64_t t = cs[j];
            cs[j] = cs[j - 1];
            cs[j - 1] = t;
        }
    int k = m + q - n;
    if (m < q || k < 1) { /* not a majority's answers (the caller waits or gives up) */
        *known = pending == 0;
        return m > 0 ? 2 * cs[m - 1] + shared : shared;
    }
    *known = cs[q - 1] == cs[k - 1] || pending == 0;
    return 2 * cs[q - 1] + shared;
}

/* The soonest expiry (ms) of a holder any node lists, in the view or not,
 * else 0. A reader's expiry reaches the nodes at different times (each
 * drops it at its own vote's TIME + ttl, when a script next counts there);
 * when their counters differ, C (majority_index) may not move until the
 * last one did, after the view already lost the reader: a watcher asks
 * again at this time too, not only at the view's holders' expiries, so it
 * is not left waiting for its deadline. */
static int64_t soonest_expiry(const struct rl_view *v, int n)
{
    int64_t soonest = 0;
    for (int i = 0; i < n; i++) {
        if (!v[i].done || v[i].code != LK_OK)
            continue;
        for (size_t j = 0; j < v[i].nholders; j++) {
            int64_t e = v[i].holders[j].expires_in_ms;
            if (e > 0 && (soonest == 0 || e < soonest))
                soonest = e;
        }
    }
    return soonest;
}

static void sub_done(void *arg, const struct bk_res *r);

/* Keeps the counters level (majority_index says why): called for a
 * watcher's inspect whose view has two readers or more, from every node's
 * answer (v); when their counters differ, each lagging node is inspected
 * again with the largest as its
 * counter's floor (inspect.lua raises it, then reads), and the call is
 * answered from those reads (inspect_eval; PH_LEVEL: once). True then;
 * false: nothing to level, the caller answers. */
static bool level_counters(struct rl_call *c, const struct rl_view *v)
{
    int n = c->rl->n;
    int64_t top = -1, low = -1;
    for (int i = 0; i < n; i++)
        if (v[i].done && v[i].code == LK_OK) {
            int64_t k = v[i].index / 2;
            top = k > top ? k : top;
            low = low < 0 || k < low ? k : low;
        }
    if (low == top)
        return false;
    c->phase = PH_LEVEL;
    c->req.fence_floor = top;
    bool lag[RL_MAX_NODES];
    for (int i = 0; i < n; i++) { /* all pending before any is sent: none answers alone */
        struct rl_sub *s = &c->sub[i];
        lag[i] = v[i].done && v[i].code == LK_OK && v[i].index / 2 < top;
        if (!lag[i])
            continue;
        free(s->view.holders);
        memset(&s->view, 0, sizeof(s->view));
        s->done = false;
        s->has_holder = false;
        c->pending++;
        c->refs++;
    }
    for (int i = 0; i < n; i++) {
        const struct backend *b = &c->rl->node[i];
        if (lag[i])
            (void)b->ops->submit(b->state, c->lp, &c->req, sub_done, &c->sub[i]);
    }
    return true;
}

/* Inspect answers with the majority view (view_eval) and its index
 * (majority_index), after levelling the counters when they differ. */
static void inspect_eval(struct rl_call *c)
{
    if (c->answered)
        return;
    struct rl_view v[RL_MAX_NODES];
    for (int i = 0; i < c->rl->n; i++) {
        v[i] = c->sub[i].view;
        v[i].done = c->sub[i].done;
        v[i].code = c->sub[i].code;
    }
    struct bk_res r;
    struct bk_holder *hs = NULL;
    enum lk_code rc = view_eval(v, c->rl->n, c->rl->quorum, &r, &hs);
    if (rc == LK_AGAIN)
        return;
    if (rc != LK_OK) {
        call_answer_code(c, rc);
    } else {
        /* known: else the counters answered so far disagree, and the rest
         * are awaited; for a watcher, with two readers, every node's counter
         * is (to level them: each node answers within backend_timeout_ms; a
         * plain inspect does not wait for the slowest node) */
        bool known;
        r.index = majority_index(v, c->rl->n, c->rl->quorum, &r, &known);
        r.recheck_ms = soonest_expiry(v, c->rl->n);
        bool level = c->req.wait && r.nholders >= 2; /* a watcher's inspect only */
        known = known && (!level || c->pending == 0);
        /* levelling: answered from the lagging nodes' second reads */
        if (known && (!level || c->phase == PH_LEVEL || !level_counters(c, v)))
            call_answer(c, &r);
    }
    free(hs);
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

/* A listing walks the keys of the first n - quorum + 1 nodes, one after
 * the other (the cursor names the node: '<node>.<its cursor>'): a name a
 * majority hold is on at least one of them. Each name a page finds is
 * inspected on every node (pipelined) and kept when the majority view
 * (view_eval) holds it, unless an earlier node of the walk holds it too
 * (it was listed there). A page whose node is down walks the next one from
 * its start instead. */
static int walk_nodes(const struct rl *rl)
{
    return rl->n - rl->quorum + 1;
}

static void list_answer(struct rl_call *c)
{
    int n = c->rl->n, q = c->rl->quorum, node = c->list_node;
    struct rl_sub *s = &c->sub[node];
    struct bk_entry *keep = lk_calloc(s->nentries ? s->nentries : 1, sizeof(*keep));
    size_t k = 0;
    enum lk_code code = LK_OK;
    for (size_t e = 0; e < s->nentries && code == LK_OK; e++) {
        const struct rl_view *v = c->probes + e * (size_t)n;
        struct bk_res vr;
        struct bk_holder *hs = NULL;
        code = view_eval(v, n, q, &vr, &hs);
        if (code != LK_OK || vr.nholders == 0) {
            free(hs);
            continue;
        }
        bool earlier = false; /* listed when the walk was on node j */
        for (int j = 0; j < node && !earlier; j++)
            for (size_t h = 0; h < vr.nholders && !earlier; h++)
                for (size_t m = 0; v[j].done && v[j].code == LK_OK && m < v[j].nholders; m++)
                    if (same_holder(&v[j].holders[m], &vr.holders[h])) {
                        earlier = true;
                        break;
                    }
        if (!earlier) {
            keep[k] = s->entries[e];
            keep[k].holder = vr.holders[0];
            keep[k].nholders = vr.total_holders;
            keep[k].limit = vr.limit;
            bool known; /* every probe answered: known */
            keep[k].index = majority_index(v, n, q, &vr, &known);
            k++;
        }
        free(hs);
    }
    for (size_t e = 0; e < s->nentries; e++) /* a probe that failed: its node's error */
        for (int j = 0; j < n; j++)
            if (c->probes[e * (size_t)n + j].code == LK_BACKEND_DOWN && j != node) {
                c->sub[j].done = true;
                c->sub[j].code = LK_BACKEND_DOWN;
            }
    if (code != LK_OK) {
        call_answer_code(c, LK_BACKEND_DOWN);
        free(keep);
        return;
    }
    char cur[1100];
    struct bk_res r;
    bk_res_init(&r, LK_OK);
    r.entries = keep;
    r.nentries = k;
    if (s->next_cursor != NULL) {
        snprintf(cur, sizeof(cur), "%d.%s", node, s->next_cursor);
        r.next_cursor = cur;
    } else if (node + 1 < walk_nodes(c->rl)) {
        snprintf(cur, sizeof(cur), "%d.", node + 1); /* its start */
        r.next_cursor = cur;
    }
    call_answer(c, &r);
    free(keep);
}

struct rl_probe {
    struct rl_call *c;
    struct rl_view *v;
};

static void probe_done(void *arg, const struct bk_res *r)
{
    struct rl_probe *p = arg;
    struct rl_call *c = p->c;
    struct rl_view *v = p->v;
    v->done = true;
    v->code = r->code;
    v->delay_ms = r->delay_ms;
    v->limit = r->limit;
    v->total = r->total_holders;
    v->index = r->index;
    if (r->code == LK_OK && r->nholders > 0) {
        v->holders = lk_malloc(r->nholders * sizeof(*v->holders));
        memcpy(v->holders, r->holders, r->nholders * sizeof(*v->holders));
        v->nholders = r->nholders;
    }
    free(p);
    if (--c->probes_pending == 0)
        list_answer(c);
    call_unref(c);
}

static void list_eval(struct rl_call *c)
{
    struct rl_sub *s = &c->sub[c->list_node];
    int n = c->rl->n;
    if (c->answered || !s->done)
        return;
    if (s->code == LK_BACKEND_DOWN && c->list_node + 1 < walk_nodes(c->rl)) {
        /* This page walks the next node instead, from its start: a name
         * that a majority of answering nodes hold is on a walked node that
         * answers. The last one down too: 503. */
        int next = c->list_node + 1;
        c->list_node = next;
        free(c->cursor);
        c->cursor = lk_strdup(""); /* a node's start (its lock layer's cursors are signed) */
        c->req.cursor = c->cursor;
        c->sub[next].done = false;
        c->pending++;
        c->refs++;
        const struct backend *b = &c->rl->node[next];
        (void)b->ops->submit(b->state, c->lp, &c->req, sub_done, &c->sub[next]);
        return;
    }
    if (s->code != LK_OK) {
        call_answer_code(c, s->code);
        return;
    }
    if (s->nentries == 0) {
        list_answer(c);
        return;
    }
    c->probes = lk_calloc(s->nentries * (size_t)n, sizeof(*c->probes));
    c->probes_pending = 1; /* ours, while the probes go out */
    c->refs++;
    for (size_t e = 0; e < s->nentries; e++)
        for (int j = 0; j < n; j++) {
            struct rl_probe *p = lk_malloc(sizeof(*p));
            p->c = c;
            p->v = &c->probes[e * (size_t)n + j];
            c->probes_pending++;
            c->refs++;
            struct bk_req q = {.op = BK_INSPECT, .name = s->entries[e].name};
            const struct backend *b = &c->rl->node[j];
            (void)b->ops->submit(b->state, c->lp, &q, probe_done, p);
        }
    if (--c->probes_pending == 0)
        list_answer(c);
    call_unref(c);
}

/* ---------------------------------------------------------------- fan-out */

static void sub_done(void *arg, const struct bk_res *r)
{
    struct rl_sub *s = arg;
    struct rl_call *c = s->call;
    bool late = c->answered; /* the node answered after the call was */
    s->done = true;
    s->code = r->code;
    s->token = r->fencing_token;
    s->ttl_ms = r->ttl_ms;
    s->delay_ms = r->delay_ms;
    if (r->nholders > 0) {
        s->has_holder = true;
        s->holder = r->holders[0];
    }
    if (c->req.op == BK_INSPECT && r->code == LK_OK) {
        s->view.delay_ms = r->delay_ms;
        s->view.limit = r->limit;
        s->view.total = r->total_holders;
        s->view.index = r->index;
        if (r->nholders > 0) {
            s->view.holders = lk_malloc(r->nholders * sizeof(*s->view.holders));
            memcpy(s->view.holders, r->holders, r->nholders * sizeof(*s->view.holders));
            s->view.nholders = r->nholders;
        }
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
    if (late && s->code == LK_BACKEND_DOWN)
        node_failed(c, s->node);
    switch (c->req.op) {
    case BK_ACQUIRE: acq_eval(c, s); break;
    case BK_RENEW:
    case BK_RELEASE:
    case BK_FORCE_RELEASE: /* every node drops the name; held when a majority held it */
    case BK_PING: agree_eval(c); break;
    case BK_INSPECT: inspect_eval(c); break;
    case BK_RENEW_MANY: batch_eval(c); break;
    case BK_LIST: list_eval(c); break;
    case BK_ACQUIRE_MULTI: /* never sent: no BK_CAP_MULTI, the engine takes names one by one */
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
    /* '<node>.<that node's cursor>' ('<node>.' its start); a first page
     * walks node 0 */
    const char *cur = req->cursor ? req->cursor : "";
    size_t kth = 0;
    const char *rest = "";
    if (cur[0] != '\0' && !backend_cursor_split(cur, (size_t)walk_nodes(rl), &kth, &rest)) {
        struct bk_res r;
        bk_res_init(&r, LK_BAD_CURSOR);
        done(arg, &r);
        return LK_OK;
    }
    int node = (int)kth;
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
    if ((req->op == BK_ACQUIRE && req->limit > 1) || req->op == BK_ACQUIRE_MULTI) {
        struct bk_res r;
        bk_res_init(&r, LK_UNSUPPORTED); /* the engine refuses these first (caps) */
        r.refusal = rl_refusal(req);
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

/* A semaphore's slots would have to be counted by a majority, but each
 * independent node admits `limit` holders of its own and different
 * majorities can admit different ones: more than `limit` in all. */
static const char *rl_refusal(const struct bk_req *req)
{
    if (req->op == BK_ACQUIRE_MULTI)
        return "the redlock backend takes a multi-lock name by name (the engine's ordered path)";
    if (req->limit > 1)
        return "a semaphore (limit > 1) is not supported by the redlock backend: each node counts "
               "its own permits, and permits counted on different majorities can exceed the "
               "limit; use limit 1 (mode exclusive or shared), or the redis, sentinel or cluster "
               "backend";
    return NULL;
}

static const struct backend_ops rl_ops = {
    .name = "redlock",
    /* BK_CAP_SHARED: readers and a writer exclude each other because any
     * two majorities share a node, which grants only one of them. No
     * BK_CAP_LIMIT (rl_refusal says why). BK_CAP_INDEX: the majority
     * view's index (majority_index); every node publishes the changes a
     * watcher marked, and every node's subscriber wakes this lockd's
     * watchers (rl_set_release_hook, rl_watch). */
    .caps = BK_CAP_SHARED | BK_CAP_FLOOR | BK_CAP_FORCE | BK_CAP_INDEX,
    .refusal = rl_refusal,
    .attach = rl_attach,
    .detach = rl_detach,
    .submit = rl_submit,
    .sweep = rl_sweep,
    .nodes = rl_nodes,
    .set_release_hook = rl_set_release_hook,
    .watch = rl_watch,
    .free = rl_free,
};

static enum lk_code check_count(size_t n, char *err, size_t errlen)
{
    if (n >= 3 && n % 2 == 1)
        return LK_OK;
    snprintf(err, errlen,
             "invalid value for 'redis': backend redlock needs an odd number (3 or more) of "
             "URLs, got %zu",
             n);
    return LK_INVALID;
}

enum lk_code backend_redlock_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    struct redis_url *urlv = lk_calloc(RL_MAX_NODES, sizeof(*urlv));
    size_t nurl = 0;
    enum lk_code rc = redis_url_parse_list(cfg->redis ? cfg->redis : "", urlv, RL_MAX_NODES, &nurl,
                                           "backend redlock", err, errlen);
    if (rc == LK_OK)
        rc = check_count(nurl, err, errlen);
    memset(urlv, 0, RL_MAX_NODES * sizeof(*urlv)); /* passwords */
    free(urlv);
    return rc;
}

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
        if (rc == LK_OK) {
            redis_lock_set_vote(rl->node[rl->n].state, rl->n + 1, RL_VOTE_MOD);
            rl->n++;
        }
    }
    memset(urlv, 0, RL_MAX_NODES * sizeof(*urlv)); /* passwords */
    free(urlv);
    if (rc != LK_OK)
        goto fail;
    if ((rc = check_count((size_t)rl->n, err, errlen)) != LK_OK)
        goto fail;
    rl->quorum = rl->n / 2 + 1;
    out->ops = &rl_ops;
    out->state = rl;
    return LK_OK;
fail:
    rl_free(rl);
    return rc;
}
