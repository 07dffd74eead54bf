/* A watcher's lifecycle: new, copy, reset, free; feed (one delta through its channel's pair
 * loop, then the new hits in order), finish, the evidence tail, and replay. */
#include "engine_impl.h"

/* --------------------------------------------------------------------------- lifecycle -- */

static void view_init(cc_watcher *w, int vi) {
    const viewplan *vp = &w->rs->views[vi];
    view *v = &w->v[vi];
    uint32_t *buf = v->buf;
    cc_ring ring = v->ring;
    memset(v, 0, sizeof *v);
    v->buf = buf;
    v->ring = ring;
    v->ring.pos = 0;
    v->live_phrase_rules = vp->nphrase_rules;
    v->gap_end = UINT64_MAX;
    builder_reset(w->rs, v);
    v->next_check = UINT64_MAX;
    for (uint32_t k = 0; k < vp->nwindowed; k++) {
        uint32_t r = vp->windowed[k];
        w->next[r] = w->rs->rules[r].every_bytes;
        if (w->next[r] < v->next_check) v->next_check = w->next[r];
    }
}

static void watcher_init(cc_watcher *w) {
    for (uint32_t r = 0; r < w->rs->nrules; r++) {
        w->fired[r] = 0;
        w->seen[r] = 0;
        w->cand[r].has = 0;
        w->next[r] = UINT64_MAX;
    }
    for (int vi = 0; vi < CC_NVIEWS; vi++) view_init(w, vi);
    w->last_channel = -1;
    w->finished = 0;
    memset(w->fast, 0, sizeof w->fast);
}

cc_watcher *cc_watcher_new(const cc_ruleset *rs) {
    cc_watcher *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->rs = rs;
    uint32_t n = rs->nrules ? rs->nrules : 1;
    w->next = malloc(n * sizeof *w->next);
    w->seen = malloc(n * sizeof *w->seen);
    w->fired = malloc(n * sizeof *w->fired);
    w->cand = malloc(n * sizeof *w->cand);
    if (!w->next || !w->seen || !w->fired || !w->cand) {
        cc_watcher_free(w);
        return NULL;
    }
    watcher_init(w);
    return w;
}

static void free_hit(cc_hit *h) {
    free(h->text);
    free(h->part_len);
}

void cc_watcher_clear_hits(cc_watcher *w) {
    for (size_t i = 0; i < w->nhits; i++) free_hit(&w->hits[i]);
    w->nhits = 0;
}

void cc_watcher_free(cc_watcher *w) {
    if (!w) return;
    cc_watcher_clear_hits(w);
    free(w->hits);
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        free(w->v[vi].buf);
        cc_ring_free(&w->v[vi].ring);
        cc_window_free(w->v[vi].win);
        cc_segscan_free(w->v[vi].seg);
    }
    free(w->next);
    free(w->seen);
    free(w->fired);
    free(w->cand);
    free(w);
}

void cc_watcher_reset(cc_watcher *w) {
    cc_watcher_clear_hits(w);
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        cc_window_free(w->v[vi].win);
        w->v[vi].win = NULL;
        cc_segscan_free(w->v[vi].seg);
        w->v[vi].seg = NULL;
    }
    watcher_init(w);
}

cc_watcher *cc_watcher_copy(const cc_watcher *w) {
    cc_watcher *c = cc_watcher_new(w->rs);
    if (!c) return NULL;
    uint32_t n = w->rs->nrules;
    memcpy(c->next, w->next, n * sizeof *c->next);
    memcpy(c->seen, w->seen, n * sizeof *c->seen);
    memcpy(c->fired, w->fired, n * sizeof *c->fired);
    memcpy(c->cand, w->cand, n * sizeof *c->cand);
    c->last_channel = w->last_channel;
    c->finished = w->finished;
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        const view *src = &w->v[vi];
        view *dst = &c->v[vi];
        *dst = *src;
        dst->buf = NULL;
        dst->win = NULL;
        dst->seg = NULL;
        dst->ring.lo = NULL;
        dst->ring.hi = NULL;
        if (src->buf) {
            dst->buf = malloc(BUF_SLOTS * sizeof *dst->buf);
            if (!dst->buf) goto oom;
            memcpy(dst->buf, src->buf, BUF_SLOTS * sizeof *dst->buf);
        }
        if (cc_ring_copy(&dst->ring, &src->ring) != 0) goto oom;
        if (src->win) {
            dst->win = cc_window_copy(src->win);
            if (!dst->win) goto oom;
        }
        if (src->seg) {
            dst->seg = cc_segscan_copy(src->seg);
            if (!dst->seg) goto oom;
        }
    }
    return c;
oom:
    cc_watcher_free(c);
    return NULL;
}

size_t cc_watcher_memory(const cc_watcher *w) {
    size_t m = sizeof *w + w->rs->nrules * (sizeof *w->next + sizeof *w->seen + sizeof *w->fired +
                                            sizeof *w->cand);
    m += w->caphits * sizeof *w->hits;
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        if (w->v[vi].buf) m += BUF_SLOTS * sizeof *w->v[vi].buf;
        m += cc_ring_memory(&w->v[vi].ring);
        m += cc_window_memory(w->v[vi].win);
        m += cc_segscan_memory(w->v[vi].seg);
    }
    return m;
}

int cc_watcher_finished(const cc_watcher *w) { return w->finished; }
uint64_t cc_watcher_sort_cmps(const cc_watcher *w) { return w->sort_cmps; }
int cc_watcher_fired(const cc_watcher *w, uint32_t rule) { return w->fired[rule]; }

const cc_hit *cc_watcher_hits(const cc_watcher *w, size_t *n) {
    *n = w->nhits;
    return w->hits;
}

/* -------------------------------------------------------------------------------- feed -- */

/* Allocate what the view needs before a delta of this kind (the watcher remembers, per
 * channel, the largest kind both views are ready for). */
static int view_ready(const viewplan *vp, view *v, int kind) {
    if (vp->ring_cap && (!v->ring.lo || (kind == 4 && !v->ring.hi)) &&
        cc_ring_ready(&v->ring, vp->ring_cap, kind == 4) != 0)
        return -1;
    if (vp->builder && !v->buf) {
        v->buf = malloc(BUF_SLOTS * sizeof *v->buf);
        if (!v->buf) return -1;
    }
    return 0;
}

static void channel_switch(cc_watcher *w) {
    const viewplan *vp = &w->rs->views[CC_VIEW_COMBINED];
    view *v = &w->v[CC_VIEW_COMBINED];
    if (!vp->used) return;
    if (vp->seg_cap || vp->word_cap) {
        cc_segscan *s = eng_view_seg(w, CC_VIEW_COMBINED);
        if (s) cc_segscan_end(s, w->rs->opt.mask_fences, 1);
    }
    eng_line_end(w, vp, v, 0);
    v->state[0] = v->state[1] = 0;
    v->fence_inside = 0;
    v->barrier = v->chars;
}

static int cmp_hits(const cc_hit *a, const cc_hit *b) {
    if (a->pos != b->pos) return a->pos < b->pos ? -1 : 1;
    return (a->rule > b->rule) - (a->rule < b->rule);
}

/* Stable bottom-up merge of the natural (non-decreasing) runs of a[0..n), through *tmp: a buffer
 * of cap >= n hits allocated on first need (the caller frees it). O(n log runs) comparisons, n - 1
 * when a is already in order; -1 when out of memory (a is then unchanged). */
static int merge_runs(cc_hit *a, size_t n, cc_hit **tmp, size_t cap, uint64_t *cmps) {
    size_t first = 1; /* the end of the first run */
    while (first < n && (++*cmps, cmp_hits(&a[first - 1], &a[first]) <= 0)) first++;
    if (first >= n) return 0;
    if (!*tmp && !(*tmp = malloc(cap * sizeof **tmp))) return -1;
    cc_hit *src = a, *dst = *tmp;
    for (int pass = 0;; pass++) {
        size_t i = 0, outputs = 0;
        while (i < n) {
            size_t mid = pass == 0 && i == 0 ? first : i + 1, end;
            if (pass || i)
                while (mid < n && (++*cmps, cmp_hits(&src[mid - 1], &src[mid]) <= 0)) mid++;
            end = mid;
            if (end < n) {
                end++;
                while (end < n && (++*cmps, cmp_hits(&src[end - 1], &src[end]) <= 0)) end++;
            }
            size_t l = i, r = mid, o = i;
            while (l < mid && r < end) /* a tie takes the left run: stable */
                dst[o++] = (++*cmps, cmp_hits(&src[r], &src[l]) < 0) ? src[r++] : src[l++];
            while (l < mid) dst[o++] = src[l++];
            while (r < end) dst[o++] = src[r++];
            outputs++;
            i = end;
        }
        cc_hit *t = src;
        src = dst;
        dst = t;
        if (outputs == 1) break;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    return 0;
}

/* Put the hits of one call (w->hits[from..]) in (pos, rule) order, stably, in time linear in
 * their number for a given ruleset. Each view appends its hits in pos order, so the list is one
 * pos-ordered stretch per view, and only hits of one position (of one view: at most one per
 * rule and phrase) can be out of rule order. First each group of one position is ordered (its
 * size is bounded by the ruleset), then the stretches are merged (one per view of the call).
 * This replaces an insertion sort over the whole list, whose cost grew with (hits of one view x
 * hits of the next): quadratic on a hit-dense delta. Correctness does not depend on the shape,
 * only the cost does. w->sort_cmps counts comparisons (a test hook). */
static void sort_hits(cc_watcher *w, size_t from) {
    size_t n = w->nhits - from;
    cc_hit *a = w->hits + from, *tmp = NULL;
    uint64_t cmps = 0;
    int rc = 0;
    for (size_t i = 0, j; i < n && rc == 0; i = j) {
        for (j = i + 1; j < n && (++cmps, a[j].pos == a[i].pos);) j++;
        if (j - i > 1) rc = merge_runs(a + i, j - i, &tmp, n, &cmps);
    }
    if (rc == 0) rc = merge_runs(a, n, &tmp, n, &cmps);
    if (rc != 0) w->oom = 1; /* the call reports out of memory and drops its hits */
    free(tmp);
    w->sort_cmps += cmps;
}

/* What the next delta on the channel just fed may skip the slow path for (see cc_watcher_feed):
 * each kind both views are ready for, and which width of the pair loops; the other channel's
 * byte cleared. */
static void fast_refresh(cc_watcher *w, int channel) {
    unsigned f = 0;
    for (int k = 0; k < 3; k++)
        if ((k ? 2 * k : 1) <= w->ready[channel]) f |= 1u << k;
    memset(w->fast, 0, sizeof w->fast);
    w->fast[channel] = (uint8_t)f;
    w->fast_row = w->rs->pair[channel][w->v[CC_VIEW_COMBINED].ring.hi != NULL];
}

/* The rare parts of a feed: a channel switch, buffers to allocate. */
static int feed_prepare(cc_watcher *w, int kind, int channel) {
    /* no delta skips this path until it succeeds: should a buffer below fail, a delta of the
     * other channel must still switch back, and one of this channel must see the ring's high
     * bits if they were allocated before the failure */
    memset(w->fast, 0, sizeof w->fast);
    if (w->last_channel != channel) {
        if (w->last_channel >= 0) channel_switch(w);
        w->last_channel = (int8_t)channel;
    }
    if (kind > w->ready[channel]) {
        const cc_ruleset *rs = w->rs;
        if ((rs->views[channel].used && view_ready(&rs->views[channel], &w->v[channel], kind)) ||
            (rs->views[CC_VIEW_COMBINED].used &&
             view_ready(&rs->views[CC_VIEW_COMBINED], &w->v[CC_VIEW_COMBINED], kind)))
            return CC_ERR_NOMEM;
        w->ready[channel] = (uint8_t)kind;
    }
    fast_refresh(w, channel);
    return CC_OK;
}

/* After a call that added hits (or ran out of memory): put the new hits in order. */
COLD int feed_done(cc_watcher *w, size_t from) {
    if (w->nhits - from > 1) sort_hits(w, from);
    if (w->oom) {
        w->oom = 0;
        return CC_ERR_NOMEM;
    }
    return hit_count(w->nhits);
}

/* A delta the fast path of cc_watcher_feed does not take: after finish, an empty one, the first
 * on its channel or of a wider kind than before (a channel switch, buffers to allocate). */
COLD int feed_slow(cc_watcher *w, const void *data, int kind, size_t len, int channel) {
    if (w->finished) return CC_ERR_FINISHED;
    if (!len) return hit_count(w->nhits);
    if (feed_prepare(w, kind, channel) != CC_OK) return CC_ERR_NOMEM;
    size_t from = w->nhits;
    w->fast_row[kind >> 1](w, channel, data, len);
    if (w->nhits != from || w->oom) return feed_done(w, from);
    return hit_count(from);
}

/* The per-delta entry: one byte says whether this delta may go straight to its loop (same
 * channel as the previous one, a kind its buffers are ready for, not finished), so the common
 * delta pays for that test, the call and the hit check. */
int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel) {
    unsigned k = (unsigned)kind >> 1;
    /* an empty delta may take the loop too (it does nothing there) */
    if (!((w->fast[channel] >> k) & 1u)) return feed_slow(w, data, kind, len, channel);
    size_t from = w->nhits;
    w->fast_row[k](w, channel, data, len);
    if (w->nhits != from || w->oom) return feed_done(w, from);
    return hit_count(from);
}

int cc_watcher_finish(cc_watcher *w) {
    if (w->finished) return CC_OK;
    size_t from = w->nhits;
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        const viewplan *vp = &w->rs->views[vi];
        if (!vp->used) continue;
        if (vp->seg_cap || vp->word_cap) {
            cc_segscan *s = eng_view_seg(w, vi);
            if (s) cc_segscan_end(s, w->rs->opt.mask_fences, 0);
        }
        eng_line_end(w, vp, &w->v[vi], 0);
    }
    for (uint32_t ri = 0; ri < w->rs->nrules; ri++) {
        const cc_rule_spec *r = &w->rs->rules[ri];
        if (r->kind != CC_K_PHRASES) eng_check_rule(w, ri, &w->v[r->view], 0);
    }
    w->finished = 1;
    memset(w->fast, 0, sizeof w->fast); /* every feed now goes to feed_slow, which refuses */
    return feed_done(w, from) < 0 ? CC_ERR_NOMEM : CC_OK;
}

size_t cc_watcher_tail(const cc_watcher *w, size_t n, uint32_t *out) {
    const view *v = &w->v[CC_VIEW_COMBINED];
    size_t limit = w->rs->opt.evidence_chars;
    if (n > limit) n = limit;
    if (!v->ring.lo) return 0;
    if (n > v->chars) n = (size_t)v->chars;
    if (n > v->ring.cap) n = v->ring.cap;
    cc_ring_last(&v->ring, (uint32_t)n, out);
    return n;
}

long long cc_check_splits(const int64_t *splits, size_t n, size_t len) {
    /* Non-decreasing from 0 and the last at len puts every offset in [0, len]. Blocks of eight
     * are tested without a branch per offset; a block with something wrong (or the tail) goes
     * through the exact test, which names the first bad offset. */
    int64_t prev = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int64_t *s = splits + i;
        int bad = (s[0] < prev) | (s[1] < s[0]) | (s[2] < s[1]) | (s[3] < s[2]) |
                  (s[4] < s[3]) | (s[5] < s[4]) | (s[6] < s[5]) | (s[7] < s[6]) |
                  ((uint64_t)s[7] > len);
        if (bad) break;
        prev = s[7];
    }
    for (; i < n; i++) {
        if (splits[i] < prev || (uint64_t)splits[i] > len) return (long long)i;
        prev = splits[i];
    }
    if ((n ? (uint64_t)prev : 0) != len) return (long long)n;
    return -1;
}

/* Code points per call of the loop in cc_replay (a batch of whole deltas, or one longer delta). */
#define REPLAY_BATCH 4096

/* The last index j >= i with splits[j] <= limit, given splits[i] <= limit (splits are
 * non-decreasing): galloping, then bisection, so a batch of k deltas costs O(log k). */
static size_t batch_end(const int64_t *splits, size_t n, size_t i, size_t limit) {
    size_t lo = i, step = 1, hi;
    for (;;) {
        hi = lo + step;
        if (hi >= n) {
            hi = n;
            break;
        }
        if ((size_t)splits[hi] > limit) break;
        lo = hi;
        step *= 2;
    }
    while (hi - lo > 1) { /* splits[lo] <= limit; hi == n or splits[hi] > limit */
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)splits[mid] <= limit) lo = mid;
        else hi = mid;
    }
    return lo;
}

int cc_replay(cc_watcher *w, const void *data, int kind, size_t len, const int64_t *splits,
              size_t nsplits, int channel) {
    (void)len; /* the splits end at len (checked by cc_check_splits) */
    if (w->finished) return CC_ERR_FINISHED;
    const unsigned char *base = data;
    size_t prev = 0, i = 0;
    /* up to the first non-empty delta, through the public path (a channel switch, buffers) */
    for (; i < nsplits && (size_t)splits[i] == prev; i++) continue;
    if (i < nsplits) {
        size_t end = (size_t)splits[i++];
        int rc = cc_watcher_feed(w, base, kind, end, channel);
        if (rc < 0) return rc;
        prev = end;
    }
    if (i == nsplits) return cc_watcher_finish(w);
    /* then one channel and one kind: consecutive deltas in batches of about REPLAY_BATCH code
     * points, each batch through the loop in one call. Detections are a pure function of the
     * text fed on a channel, whatever its split (docs/semantics.md; the split-invariance tests
     * hold the engine to it), and the hits of one call are ordered by position as those of its
     * deltas fed one by one: a batch gives exactly their detections, in their order, and pays
     * the fixed work of a call (dispatch, loop set-up, the hit check) once instead of per
     * delta. The batch stays small enough that sorting a call's hits stays cheap. A batch is
     * the next delta and every following one that ends within REPLAY_BATCH of its start. */
    /* the batch loop of the row fast_row points into (same channel, same ring) */
    const ptrdiff_t row = w->fast_row - &w->rs->pair[0][0][0];
    pair_fn run = (&w->rs->pair_batch[0][0][0])[row + (kind >> 1)];
    while (i < nsplits) {
        size_t j = i;
        if ((size_t)splits[i] <= prev + REPLAY_BATCH)
            j = batch_end(splits, nsplits, i, prev + REPLAY_BATCH);
        size_t end = (size_t)splits[j];
        i = j + 1;
        if (end == prev) continue; /* empty deltas do nothing */
        size_t from = w->nhits;
        run(w, channel, base + prev * (size_t)kind, end - prev);
        if ((w->nhits != from || w->oom) && feed_done(w, from) < 0) return CC_ERR_NOMEM;
        prev = end;
    }
    return cc_watcher_finish(w);
}
