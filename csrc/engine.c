#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "automaton.h"
#include "lines.h"
#include "ring.h"
#include "text.h"

/* ===================================================================== compiled ruleset == */

struct cc_watcher;
struct view;
struct viewplan;
typedef void (*run_fn)(struct cc_watcher *, const struct viewplan *, struct view *,
                       const void *, size_t);

typedef struct viewplan {
    run_fn run[2][3];     /* the loop for deltas of kind 1, 2, 4; [1]: the ring has high bits */
    int used;             /* process this view at all */
    cc_automaton *ac[2];  /* [0] exact, [1] ASCII case folded */
    const cc_automaton *live_ac[2]; /* the ones that exist, packed */
    int nac;
    int builder;          /* track the pending line (line rules, or fences for TailRepeat) */
    int window;           /* keep the line window */
    int quotes;           /* track quote state (a suppress_quoted rule watches this view) */
    uint32_t ring_cap;    /* characters kept (0 = none) */
    uint32_t nphrase_rules;
    uint32_t *windowed, nwindowed; /* rule indices, rule order */
    uint32_t *suppress, nsuppress; /* rule indices, rule order */
    uint32_t *pfx_set, npfx, pfx_max; /* union of PrefixMonotony delimiters, longest prefix */
    uint32_t short_max;   /* lines this short keep their text (LineCycle, FillerLines) */
    int keep_all;         /* every line keeps its text (a LineRepeat rule may fire on count 1) */
} viewplan;

static void plan_runs(viewplan *vp);

/* The whole work of one delta on one channel: its view and the combined view. */
typedef void (*pair_fn)(struct cc_watcher *, int channel, const void *, size_t);

struct cc_ruleset {
    cc_options opt;
    uint32_t nrules;
    cc_rule_spec *rules;
    viewplan views[CC_NVIEWS];
    pair_fn pair[2][2][3]; /* [channel][combined ring has high bits][kind 1, 2, 4] */
};

static void plan_pairs(cc_ruleset *rs);

static void ruleset_set_err(char *err, size_t errlen, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

void cc_ruleset_free(cc_ruleset *rs) {
    if (!rs) return;
    for (uint32_t i = 0; rs->rules && i < rs->nrules; i++) free((void *)rs->rules[i].set);
    free(rs->rules);
    for (int v = 0; v < CC_NVIEWS; v++) {
        cc_automaton_free(rs->views[v].ac[0]);
        cc_automaton_free(rs->views[v].ac[1]);
        free(rs->views[v].windowed);
        free(rs->views[v].suppress);
        free(rs->views[v].pfx_set);
    }
    free(rs);
}

static void plan_windowed(viewplan *vp, const cc_rule_spec *r, const cc_options *opt) {
    if (r->kind == CC_K_TAIL_REPEAT) {
        if (r->window_chars > vp->ring_cap) vp->ring_cap = r->window_chars;
        if (opt->mask_fences) vp->builder = 1;
        return;
    }
    vp->builder = 1;
    vp->window = 1;
    switch (r->kind) {
    case CC_K_LINE_REPEAT: {
        /* the evidence line has count >= min(min_count, min_run): a line seen once keeps its
         * text only when that bound is 1 */
        uint32_t bound = r->min_count;
        if (r->min_run && r->min_run < bound) bound = r->min_run;
        if (bound <= 1) vp->keep_all = 1;
        break;
    }
    case CC_K_LINE_CYCLE:
    case CC_K_FILLER_LINES:
        if (r->max_chars > vp->short_max) vp->short_max = r->max_chars;
        break;
    case CC_K_PREFIX_MONOTONY:
        if (r->max_chars > vp->pfx_max) vp->pfx_max = r->max_chars;
        for (uint32_t k = 0; k < r->nset; k++) {
            uint32_t j;
            for (j = 0; j < vp->npfx; j++)
                if (vp->pfx_set[j] == r->set[k]) break;
            if (j == vp->npfx) vp->pfx_set[vp->npfx++] = r->set[k];
        }
        break;
    default: break;
    }
}

cc_ruleset *cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                           const cc_phrase_spec *phrases, size_t nphrases, char *err,
                           size_t errlen) {
    cc_ruleset *rs = calloc(1, sizeof *rs);
    cc_phrase_in *group = NULL;
    size_t nset = 0;
    if (!rs) goto oom;
    rs->opt = *opt;
    rs->nrules = nrules;
    rs->rules = calloc(nrules ? nrules : 1, sizeof *rs->rules);
    if (!rs->rules) goto oom;
    for (uint32_t i = 0; i < nrules; i++) {
        rs->rules[i] = rules[i];
        rs->rules[i].set = NULL;
        nset += rules[i].nset;
        if (rules[i].nset) {
            uint32_t *set = malloc(rules[i].nset * sizeof *set);
            if (!set) goto oom;
            memcpy(set, rules[i].set, rules[i].nset * sizeof *set);
            rs->rules[i].set = set;
        }
    }
    for (int v = 0; v < CC_NVIEWS; v++) {
        viewplan *vp = &rs->views[v];
        vp->windowed = malloc((nrules ? nrules : 1) * sizeof *vp->windowed);
        vp->suppress = malloc((nrules ? nrules : 1) * sizeof *vp->suppress);
        vp->pfx_set = malloc((nset ? nset : 1) * sizeof *vp->pfx_set);
        if (!vp->windowed || !vp->suppress || !vp->pfx_set) goto oom;
    }
    for (uint32_t i = 0; i < nrules; i++) {
        const cc_rule_spec *r = &rs->rules[i];
        viewplan *vp = &rs->views[r->view];
        vp->used = 1;
        if (r->kind == CC_K_PHRASES) {
            vp->nphrase_rules++;
            if (r->suppress) {
                vp->quotes = 1;
                vp->suppress[vp->nsuppress++] = i;
            }
        } else {
            vp->windowed[vp->nwindowed++] = i;
            plan_windowed(vp, r, opt);
        }
    }
    /* the combined view always keeps the evidence tail */
    if (opt->evidence_chars) {
        viewplan *vc = &rs->views[CC_VIEW_COMBINED];
        vc->used = 1;
        if (opt->evidence_chars > vc->ring_cap) vc->ring_cap = opt->evidence_chars;
    }
    /* one automaton per (view, case folding) */
    group = malloc((nphrases ? nphrases : 1) * sizeof *group);
    if (!group) goto oom;
    for (int v = 0; v < CC_NVIEWS; v++) {
        for (int fold = 0; fold < 2; fold++) {
            size_t n = 0;
            for (size_t k = 0; k < nphrases; k++) {
                const cc_rule_spec *r = &rs->rules[phrases[k].rule];
                if (r->view != v || (r->fold != 0) != (fold != 0)) continue;
                group[n].bytes = phrases[k].bytes;
                group[n].len = phrases[k].len;
                group[n].rule = phrases[k].rule;
                group[n].index = phrases[k].index;
                n++;
            }
            if (!n) continue;
            /* with suppress_quoted, line ends and quote marks need the loop's attention */
            static const uint32_t quote_specials[] = {'\n', '`', '"', 0x201C, 0x201D, 0x300C,
                                                      0x300D};
            size_t nspecial = rs->views[v].quotes ? sizeof quote_specials / sizeof *quote_specials
                                                  : 0;
            rs->views[v].ac[fold] = cc_automaton_build(group, n, fold, quote_specials, nspecial,
                                                       opt->max_table_bytes, err, errlen);
            if (!rs->views[v].ac[fold]) goto fail;
            rs->views[v].live_ac[rs->views[v].nac++] = rs->views[v].ac[fold];
        }
    }
    free(group);
    for (int v = 0; v < CC_NVIEWS; v++) plan_runs(&rs->views[v]);
    plan_pairs(rs);
    return rs;
oom:
    ruleset_set_err(err, errlen, "out of memory compiling the ruleset");
fail:
    free(group);
    cc_ruleset_free(rs);
    return NULL;
}

size_t cc_ruleset_memory(const cc_ruleset *rs) {
    size_t m = sizeof *rs + rs->nrules * sizeof *rs->rules;
    for (int v = 0; v < CC_NVIEWS; v++)
        m += cc_automaton_memory(rs->views[v].ac[0]) + cc_automaton_memory(rs->views[v].ac[1]);
    return m;
}

/* ============================================================================ watcher == */

enum { FENCE_START, FENCE_TICKS, FENCE_TAG, FENCE_NO };

/* Slots of the pending line's code point buffer: the first 40 code points, plus a scratch slot
 * the builder writes to once the buffer is full (so the store needs no branch). */
#define BUF_SLOTS (CC_EVIDENCE_CHARS + 1)

typedef struct view {
    uint64_t chars, bytes, next_check, barrier;
    uint32_t state[2];
    uint32_t live_phrase_rules;
    /* pending line: hash and length through the last character and through the last
     * non-space; len_all stays 0 until the first non-space (leading whitespace is skipped) */
    uint64_t h_all, h_commit;
    uint32_t len_all, len_commit;
    uint32_t fence_k, fence_ch;
    uint8_t fence_st, fence_inside;
    /* quote state of the current line, and the list-line rule: after a phrase occurrence,
     * the gap of whitespace, quotes and separators that follows it */
    uint8_t dquote, curly, corner;
    uint8_t after_occ, in_gap, list_line;
    uint32_t backticks, gap_seps;
    uint64_t gap_end;     /* offset of the first character that ended the gap */
    uint32_t *buf;        /* BUF_SLOTS code points (the first min(len_all, 40) are the line's) */
    cc_window *win;
    cc_ring ring;
} view;

typedef struct cand {
    int has;
    uint32_t phrase;
    uint64_t offset;
} cand;

struct cc_watcher {
    const cc_ruleset *rs;
    view v[CC_NVIEWS];
    uint64_t *next;
    uint8_t *fired;
    cand *cand;
    int last_channel;
    uint8_t ready[2];     /* per channel: both of its views are ready for deltas of this kind */
    int finished;
    int oom;
    cc_hit *hits;
    size_t nhits, caphits;
    uint64_t sort_cmps; /* comparisons spent ordering hits (see sort_hits) */
};

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static void builder_reset(const cc_ruleset *rs, view *v) {
    v->h_all = v->h_commit = FNV_OFFSET;
    v->len_all = v->len_commit = 0;
    v->fence_st = rs->opt.mask_fences ? FENCE_START : FENCE_NO;
    v->fence_k = 0;
}

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
        w->cand[r].has = 0;
        w->next[r] = UINT64_MAX;
    }
    for (int vi = 0; vi < CC_NVIEWS; vi++) view_init(w, vi);
    w->last_channel = -1;
    w->finished = 0;
}

cc_watcher *cc_watcher_new(const cc_ruleset *rs) {
    cc_watcher *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->rs = rs;
    uint32_t n = rs->nrules ? rs->nrules : 1;
    w->next = malloc(n * sizeof *w->next);
    w->fired = malloc(n * sizeof *w->fired);
    w->cand = malloc(n * sizeof *w->cand);
    if (!w->next || !w->fired || !w->cand) {
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
    }
    free(w->next);
    free(w->fired);
    free(w->cand);
    free(w);
}

void cc_watcher_reset(cc_watcher *w) {
    cc_watcher_clear_hits(w);
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        cc_window_free(w->v[vi].win);
        w->v[vi].win = NULL;
    }
    watcher_init(w);
}

cc_watcher *cc_watcher_copy(const cc_watcher *w) {
    cc_watcher *c = cc_watcher_new(w->rs);
    if (!c) return NULL;
    uint32_t n = w->rs->nrules;
    memcpy(c->next, w->next, n * sizeof *c->next);
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
    }
    return c;
oom:
    cc_watcher_free(c);
    return NULL;
}

size_t cc_watcher_memory(const cc_watcher *w) {
    size_t m = sizeof *w + w->rs->nrules * (sizeof *w->next + sizeof *w->fired + sizeof *w->cand);
    m += w->caphits * sizeof *w->hits;
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        if (w->v[vi].buf) m += BUF_SLOTS * sizeof *w->v[vi].buf;
        m += cc_ring_memory(&w->v[vi].ring);
        m += cc_window_memory(w->v[vi].win);
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
/* ------------------------------------------------------------------------------ hits -- */

static cc_hit *new_hit(cc_watcher *w, uint32_t rule, uint64_t offset, uint64_t pos) {
    if (w->nhits == w->caphits) {
        size_t cap = w->caphits ? w->caphits * 2 : 4;
        cc_hit *hits = realloc(w->hits, cap * sizeof *hits);
        if (!hits) {
            w->oom = 1;
            return NULL;
        }
        w->hits = hits;
        w->caphits = cap;
    }
    cc_hit *h = &w->hits[w->nhits++];
    memset(h, 0, sizeof *h);
    h->rule = rule;
    h->offset = offset;
    h->pos = pos;
    return h;
}

static void mark_fired(cc_watcher *w, uint32_t rule) {
    const cc_rule_spec *r = &w->rs->rules[rule];
    if (!r->once || w->fired[rule]) {
        w->fired[rule] = 1;
        return;
    }
    w->fired[rule] = 1;
    if (r->kind == CC_K_PHRASES) w->v[r->view].live_phrase_rules--;
}

static int set_text(cc_watcher *w, cc_hit *h, const unsigned char *text, uint32_t len) {
    h->text = malloc(len ? len : 1);
    if (!h->text) {
        w->oom = 1;
        return -1;
    }
    memcpy(h->text, text, len);
    h->text_len = len;
    return 0;
}

static uint32_t encode_cps(const uint32_t *cps, uint32_t n, unsigned char *out) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += cc_utf8_encode(cps[i], out + k);
    return k;
}

/* ------------------------------------------------------------------ windowed detectors -- */
static int before(const cc_entry *a, const cc_entry *b) {
    /* order of the most frequent first, ties to the most recent occurrence */
    return a->count > b->count || (a->count == b->count && cc_entry_newer(a, b));
}

static void check_line_repeat(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                              uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return;
    uint32_t top = win->top, run = cc_window_longest_run(win);
    double ratio = (double)top / (double)total;
    int hit = (top >= r->min_count && ratio >= r->ratio) || (r->min_run && run >= r->min_run);
    if (!hit) return;
    const cc_entry *e = cc_window_top_entry(win);
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    h->count = top;
    h->total = total;
    h->ratio = ratio;
    h->run = run;
    set_text(w, h, cc_entry_bytes(e), cc_entry_nbytes(e));
}

static void check_line_cycle(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                             uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return;
    /* the cycle covers at most top x the highest count, and only short lines */
    if ((double)r->top * win->top / (double)total < r->ratio ||
        (double)cc_window_short_lines(win, r->max_chars) / (double)total < r->ratio)
        return;
    const cc_entry *best[64];
    uint32_t k = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count || e->len > r->max_chars) continue;
        if (k == r->top && !before(e, best[k - 1])) continue;
        uint32_t j = (k < r->top) ? k++ : k - 1;
        while (j > 0 && before(e, best[j - 1])) {
            best[j] = best[j - 1];
            j--;
        }
        best[j] = e;
    }
    uint32_t covered = 0;
    for (uint32_t i = 0; i < k; i++) covered += best[i]->count;
    double ratio = (double)covered / (double)total;
    if (!k || ratio < r->ratio) return;
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    h->count = covered;
    h->total = total;
    h->ratio = ratio;
    uint32_t len = 0;
    for (uint32_t i = 0; i < k; i++) len += cc_entry_nbytes(best[i]);
    h->text = malloc(len ? len : 1);
    h->part_len = malloc(k * sizeof *h->part_len);
    if (!h->text || !h->part_len) {
        w->oom = 1;
        return;
    }
    uint32_t at = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t nb = cc_entry_nbytes(best[i]);
        memcpy(h->text + at, cc_entry_bytes(best[i]), nb);
        at += nb;
        h->part_len[i] = nb;
    }
    h->text_len = len;
    h->nparts = k;
}

static int in_set(const cc_rule_spec *r, uint32_t cp) {
    for (uint32_t i = 0; i < r->nset; i++)
        if (r->set[i] == cp) return 1;
    return 0;
}

static void check_filler_lines(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                               uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total) return;
    uint32_t bound = cc_window_short_lines(win, r->max_chars);
    if (bound < r->min_count || (double)bound / (double)total < r->ratio) return;
    uint32_t count = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count || e->len > r->max_chars) continue;
        const unsigned char *text = cc_entry_bytes(e);
        uint32_t nbytes = cc_entry_nbytes(e);
        for (uint32_t at = 0; at < nbytes;) {
            unsigned n;
            uint32_t cp = cc_utf8_decode(text + at, &n);
            at += n;
            if (in_set(r, cp)) {
                count += e->count;
                break;
            }
        }
    }
    double ratio = (double)count / (double)total;
    if (count < r->min_count || ratio < r->ratio) return;
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    h->count = count;
    h->total = total;
    h->ratio = ratio;
}

typedef struct prefix_tally {
    uint32_t cps[8];
    uint32_t n, count;
    const cc_entry *last; /* the entry of the most recent occurrence */
} prefix_tally;

enum { STACK_TALLIES = 128 };

static void check_prefix_monotony(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                                  uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return;
    if (win->nflagged < r->min_count || (double)win->nflagged / (double)total < r->ratio) return;
    prefix_tally stack[STACK_TALLIES];
    prefix_tally *t = win->cap <= STACK_TALLIES ? stack : malloc(win->cap * sizeof *t);
    if (!t) {
        w->oom = 1;
        return;
    }
    uint32_t nt = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count || !(cc_entry_flags(e) & CC_LINE_PREFIX)) continue;
        const unsigned char *text = cc_entry_bytes(e);
        uint32_t nbytes = cc_entry_nbytes(e);
        uint32_t cps[8], n = 0, plen = 0;
        for (uint32_t at = 0; at < nbytes && n < r->max_chars;) {
            unsigned k;
            cps[n] = cc_utf8_decode(text + at, &k);
            at += k;
            if (in_set(r, cps[n++])) {
                plen = n;
                break;
            }
        }
        if (!plen) continue;
        uint32_t j;
        for (j = 0; j < nt; j++)
            if (t[j].n == plen && memcmp(t[j].cps, cps, plen * sizeof *cps) == 0) break;
        if (j == nt) {
            memcpy(t[nt].cps, cps, plen * sizeof *cps);
            t[nt].n = plen;
            t[nt].count = 0;
            t[nt].last = e;
            nt++;
        }
        t[j].count += e->count;
        if (cc_entry_newer(e, t[j].last)) t[j].last = e;
    }
    prefix_tally *best = NULL;
    for (uint32_t j = 0; j < nt; j++)
        if (!best || t[j].count > best->count ||
            (t[j].count == best->count && cc_entry_newer(t[j].last, best->last)))
            best = &t[j];
    if (best) {
        double ratio = (double)best->count / (double)total;
        if (best->count >= r->min_count && ratio >= r->ratio) {
            cc_hit *h = new_hit(w, ri, v->chars, pos);
            if (h) {
                mark_fired(w, ri);
                unsigned char buf[8 * 4];
                h->count = best->count;
                h->total = total;
                h->ratio = ratio;
                set_text(w, h, buf, encode_cps(best->cps, best->n, buf));
            }
        }
    }
    if (t != stack) free(t);
}

static void check_tail_repeat(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                              uint64_t pos) {
    if (w->rs->opt.mask_fences && v->fence_inside) return;
    if (!v->ring.lo) return;
    uint64_t avail = v->chars - v->barrier;
    if (avail > v->ring.cap) avail = v->ring.cap;
    cc_tail_params p = {r->max_period, r->min_repeats, r->min_chars, r->window_chars};
    cc_tail_result res;
    int found = cc_tail_repeat(&v->ring, (uint32_t)avail, &p, &res);
    if (found < 0) {
        w->oom = 1;
        return;
    }
    if (!found) return;
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    unsigned char buf[40 * 4];
    h->period = res.period;
    h->repeats = res.repeats;
    set_text(w, h, buf, encode_cps(res.unit, res.unit_chars, buf));
}

static void check_rule(cc_watcher *w, uint32_t ri, view *v, uint64_t pos) {
    const cc_rule_spec *r = &w->rs->rules[ri];
    if (r->once && w->fired[ri]) return;
    switch (r->kind) {
    case CC_K_LINE_REPEAT: check_line_repeat(w, r, ri, v, pos); break;
    case CC_K_LINE_CYCLE: check_line_cycle(w, r, ri, v, pos); break;
    case CC_K_FILLER_LINES: check_filler_lines(w, r, ri, v, pos); break;
    case CC_K_PREFIX_MONOTONY: check_prefix_monotony(w, r, ri, v, pos); break;
    case CC_K_TAIL_REPEAT: check_tail_repeat(w, r, ri, v, pos); break;
    default: break;
    }
}

static void throttle(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    uint64_t nmin = UINT64_MAX;
    for (uint32_t k = 0; k < vp->nwindowed; k++) {
        uint32_t ri = vp->windowed[k];
        const cc_rule_spec *r = &w->rs->rules[ri];
        if (v->bytes >= w->next[ri]) {
            w->next[ri] = (v->bytes / r->every_bytes + 1) * r->every_bytes;
            check_rule(w, ri, v, pos);
        }
        if (!(r->once && w->fired[ri]) && w->next[ri] < nmin) nmin = w->next[ri];
    }
    v->next_check = nmin;
}

/* --------------------------------------------------------------------- lines and quotes -- */

static int fence_tag_char(uint32_t cp) {
    return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9') ||
           cp == '_' || cp == '+' || cp == '-';
}

/* Advance the fence-line recogniser over a non-space character (called only while the line may
 * still be a fence). `gap`: whitespace came between this character and the previous one. */
static void fence_step(view *v, uint32_t cp, int first, int gap) {
    if (!first && gap) {
        v->fence_st = FENCE_NO;
        return;
    }
    switch (v->fence_st) {
    case FENCE_START:
        if (cp == '`' || cp == '~') {
            v->fence_st = FENCE_TICKS;
            v->fence_ch = cp;
            v->fence_k = 1;
        } else {
            v->fence_st = FENCE_NO;
        }
        break;
    case FENCE_TICKS:
        if (cp == v->fence_ch) v->fence_k++;
        else if (v->fence_k >= 3 && fence_tag_char(cp)) v->fence_st = FENCE_TAG;
        else v->fence_st = FENCE_NO;
        break;
    case FENCE_TAG:
        if (!fence_tag_char(cp)) v->fence_st = FENCE_NO;
        break;
    default: break;
    }
}

static int in_pfx_set(const viewplan *vp, uint32_t cp) {
    for (uint32_t k = 0; k < vp->npfx; k++)
        if (vp->pfx_set[k] == cp) return 1;
    return 0;
}

static void complete_line(cc_watcher *w, const viewplan *vp, view *v) {
    const cc_options *opt = &w->rs->opt;
    if (opt->mask_fences) {
        int fence = v->len_all && ((v->fence_st == FENCE_TICKS && v->fence_k >= 3) ||
                                   v->fence_st == FENCE_TAG);
        if (fence) {
            v->fence_inside = !v->fence_inside;
            builder_reset(w->rs, v);
            return;
        }
        if (v->fence_inside) {
            builder_reset(w->rs, v);
            return;
        }
    }
    if (vp->window && v->len_all && v->len_commit >= opt->min_line_chars) {
        if (!v->win) {
            v->win = cc_window_new(opt->line_window);
            if (!v->win) w->oom = 1;
        }
        /* the evidence text: the first 40 code points of the stripped line; a line may have a
         * prefix when a delimiter comes within the first pfx_max */
        uint32_t n = v->len_commit < CC_EVIDENCE_CHARS ? v->len_commit : CC_EVIDENCE_CHARS;
        uint32_t npfx = vp->pfx_max < n ? vp->pfx_max : n;
        unsigned flags = 0;
        for (uint32_t i = 0; i < npfx && !flags; i++)
            if (in_pfx_set(vp, v->buf[i])) flags = CC_LINE_PREFIX;
        /* what a line seen once must keep: everything when it is short enough for LineCycle
         * or FillerLines (or LineRepeat may report it), the prefix part when it is marked */
        uint32_t keep = 0;
        if (vp->keep_all || v->len_commit <= vp->short_max) keep = n;
        else if (flags) keep = npfx;
        if (v->win && cc_window_push(v->win, v->h_commit, v->len_commit, v->buf, n, keep, flags))
            w->oom = 1;
    }
    builder_reset(w->rs, v);
}

static void quote_update(view *v, uint32_t cp) {
    switch (cp) {
    case '`': v->backticks ^= 1; break;
    case '"': v->dquote ^= 1; break;
    case 0x201C: v->curly = 1; break;
    case 0x201D: v->curly = 0; break;
    case 0x300C: v->corner = 1; break;
    case 0x300D: v->corner = 0; break;
    default: break;
    }
}

static int is_separator(uint32_t cp) {
    return cp == '|' || cp == ',' || cp == 0xFF0C || cp == 0x3001;
}

static int is_quote_mark(uint32_t cp) {
    return cp == '`' || cp == '"' || cp == 0x201C || cp == 0x201D || cp == 0x300C || cp == 0x300D;
}

static inline int is_space(uint32_t cp);

/* A character after a phrase occurrence, before the phrases ending at it: separators,
 * whitespace and quotes extend the gap; anything else ends it at this character's offset. */
static void gap_step(view *v, uint32_t cp, uint64_t offset) {
    if (is_separator(cp)) v->gap_seps++;
    else if (!is_space(cp) && !is_quote_mark(cp)) {
        v->gap_end = offset;
        v->in_gap = 0;
    }
}

static void resolve_quoted(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    int list_line = v->list_line;
    for (uint32_t k = 0; k < vp->nsuppress; k++) {
        uint32_t ri = vp->suppress[k];
        cand *c = &w->cand[ri];
        if (!c->has) continue;
        c->has = 0;
        if (list_line || (w->rs->rules[ri].once && w->fired[ri])) continue;
        cc_hit *h = new_hit(w, ri, c->offset, pos);
        if (!h) return;
        h->phrase = c->phrase;
        mark_fired(w, ri);
    }
    v->backticks = v->gap_seps = 0;
    v->dquote = v->curly = v->corner = 0;
    v->after_occ = v->in_gap = v->list_line = 0;
    v->gap_end = UINT64_MAX;
}

static void line_end(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    if (vp->builder) complete_line(w, vp, v);
    if (vp->quotes) resolve_quoted(w, vp, v, pos);
}

/* -------------------------------------------------------------------------- phrases -- */

static void on_match(cc_watcher *w, view *v, const cc_automaton *a, uint32_t state,
                     uint64_t pos) {
    uint32_t n;
    const cc_output *out = cc_automaton_outputs(a, state, &n);
    int quoted = v->backticks || v->dquote || v->curly || v->corner;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ri = out[i].rule;
        const cc_rule_spec *r = &w->rs->rules[ri];
        if (r->once && w->fired[ri]) continue;
        if (r->suppress) {
            cand *c = &w->cand[ri];
            if (!quoted && !c->has) {
                c->has = 1;
                c->offset = v->chars;
                c->phrase = out[i].phrase;
            }
            continue;
        }
        cc_hit *h = new_hit(w, ri, v->chars, pos);
        if (!h) return;
        h->phrase = out[i].phrase;
        mark_fired(w, ri);
    }
}

/* The phrase automata of the view have reached output states at the current character
 * (v->state[k] >= match_base for at least one k). */
static void phrases_matched(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    if (vp->quotes) {
        /* one occurrence per end position: it makes the line a list line when one of its
         * phrases starts where the gap (with a separator) after the previous one ended */
        if (v->after_occ && v->gap_seps && v->gap_end != UINT64_MAX) {
            for (int k = 0; k < vp->nac && !v->list_line; k++) {
                const cc_automaton *a = vp->live_ac[k];
                if (v->state[k] < a->match_base) continue;
                uint32_t n;
                const cc_output *out = cc_automaton_outputs(a, v->state[k], &n);
                for (uint32_t i = 0; i < n; i++)
                    if (v->gap_end + out[i].chars == v->chars) v->list_line = 1;
            }
        }
        v->after_occ = 1;
        v->in_gap = 1;
        v->gap_seps = 0;
        v->gap_end = UINT64_MAX;
    }
    for (int k = 0; k < vp->nac; k++) {
        const cc_automaton *a = vp->live_ac[k];
        if (v->state[k] >= a->match_base) on_match(w, v, a, v->state[k], pos);
    }
}

static inline uint32_t ac_step(const cc_automaton *a, uint32_t s, uint32_t cp) {
    return cc_automaton_step(a, s, cp);
}

/* ------------------------------------------------------------------------- the loop -- */

/* ASCII characters the loop treats specially. */
enum { CH_SPACE = 1, CH_QUOTE = 2, CH_NL = 4 };
static const uint8_t ascii_class[128] = {
    [0x09] = CH_SPACE, [0x0A] = CH_SPACE | CH_NL, [0x0B] = CH_SPACE, [0x0C] = CH_SPACE,
    [0x0D] = CH_SPACE, [0x1C] = CH_SPACE, [0x1D] = CH_SPACE, [0x1E] = CH_SPACE,
    [0x1F] = CH_SPACE, [0x20] = CH_SPACE, ['`'] = CH_QUOTE, ['"'] = CH_QUOTE,
};

static inline int is_space(uint32_t cp) {
    if (cp < 0x80) return (ascii_class[cp] & CH_SPACE) != 0;
    return cp <= 0x3000 && cc_is_space(cp); /* U+3000 is the last space */
}

/* UTF-8 length of a BMP code point by cp >> 7: U+0000..U+007F take 1 byte, up to U+07FF 2,
 * the rest of the BMP 3. */
#define X16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
static const uint8_t utf8_len_bmp[512] = {
    1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3),
    X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3),
    X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3), X16(3),
};
#undef X16

/* str.isspace() as a bitmap over U+0000..U+3000 (every space is there) plus one zero word for
 * everything above: a branch-free test for the line loop. */
#define SPACE_WORDS (0x3000 / 32 + 2)
static const uint32_t space_bits[SPACE_WORDS] = {
    [0x09 / 32] = (1u << 9) | (1u << 10) | (1u << 11) | (1u << 12) | (1u << 13) | (1u << 28) |
                  (1u << 29) | (1u << 30) | (1u << 31),
    [0x20 / 32] = 1u << 0,
    [0x85 / 32] = 1u << (0x85 % 32),
    [0xA0 / 32] = 1u << (0xA0 % 32),
    [0x1680 / 32] = 1u << (0x1680 % 32),
    [0x2000 / 32] = 0x7FFu, /* U+2000..U+200A */
    [0x2028 / 32] = (1u << (0x2028 % 32)) | (1u << (0x2029 % 32)) | (1u << (0x202F % 32)),
    [0x205F / 32] = 1u << (0x205F % 32),
    [0x3000 / 32] = 1u << (0x3000 % 32),
};

static inline uint32_t space_bit(uint32_t cp) {
    uint32_t i = cp <= 0x3000 ? cp : 0x3000 + 32; /* the last word is zero */
    return (space_bits[i >> 5] >> (i & 31)) & 1u;
}

static inline int is_quote_char(uint32_t cp) {
    if (cp < 0x80) return (ascii_class[cp] & CH_QUOTE) != 0;
    return cp == 0x201C || cp == 0x201D || cp == 0x300C || cp == 0x300D;
}

/* The hot loops are inlined into one function per (shape, kind, ...); the rare paths are kept
 * out of line so the loops keep their values in registers. */
#if defined(__GNUC__)
#define HOT_INLINE static inline __attribute__((always_inline))
#define COLD static __attribute__((noinline, cold))
#else
#define HOT_INLINE static inline
#define COLD static
#endif

static inline uint32_t load_cp(const void *data, int kind, size_t i) {
    if (kind == 1) return ((const uint8_t *)data)[i];
    if (kind == 2) return ((const uint16_t *)data)[i];
    return ((const uint32_t *)data)[i];
}

/* Loop shapes: PH = the view matches phrases (automata, quote state); LN = it keeps lines, the
 * text ring and throttled checks. Each (shape, kind) gets its own copy of the loop, so a view
 * pays only for what its rules need. */
enum { SHAPE_PH = 1, SHAPE_LN = 2 };

/* One view over one delta. The hot state lives in locals; the rare events (a phrase match, the
 * end of a line, a throttle point) write it back, do their work on the view and read it again. */
HOT_INLINE void run_view(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                         size_t len, const int kind, const int shape) {
    const int ph = shape & SHAPE_PH, ln = shape & SHAPE_LN;
    const uint64_t chars0 = v->chars;
    /* phrases */
    const cc_automaton *a0 = vp->live_ac[0];
    int nac = (ph && v->live_phrase_rules) ? vp->nac : 0;
    const int quotes = ph && vp->quotes;
    uint32_t s0 = v->state[0];
    /* lines, ring, throttle */
    uint64_t bytes = v->bytes, next_check = v->next_check;
    uint16_t *rlo = ln ? v->ring.lo : NULL;
    uint8_t *rhi = v->ring.hi;
    uint32_t rpos = v->ring.pos, rcap = v->ring.cap;
    const int builder = ln && vp->builder;
    uint32_t *buf = v->buf;
    uint64_t h_all = v->h_all, h_commit = v->h_commit;
    uint32_t len_all = v->len_all, len_commit = v->len_commit;
    int fencing = v->fence_st != FENCE_NO;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp = load_cp(data, kind, i);
        if (ln) {
            bytes += kind == 1 ? 1u + (cp >= 0x80) : cc_utf8_len(cp);
            if (rlo) {
                rlo[rpos] = (uint16_t)cp;
                if (kind == 4) rhi[rpos] = (uint8_t)(cp >> 16);
                else if (rhi) rhi[rpos] = 0;
                if (++rpos == rcap) rpos = 0;
            }
        }
        if (quotes && v->in_gap) gap_step(v, cp, chars0 + i);
        if (nac) {
            int hit;
            s0 = ac_step(a0, s0, cp);
            hit = s0 >= a0->match_base;
            if (nac > 1) {
                const cc_automaton *a1 = vp->live_ac[1];
                v->state[1] = ac_step(a1, v->state[1], cp);
                hit |= v->state[1] >= a1->match_base;
            }
            if (hit) {
                v->chars = chars0 + i + 1;
                v->state[0] = s0;
                phrases_matched(w, vp, v, (uint64_t)i + 1);
                nac = v->live_phrase_rules ? vp->nac : 0;
            }
        }
        if (cp == '\n') {
            v->chars = chars0 + i + 1;
            if (builder) {
                v->h_all = h_all, v->h_commit = h_commit;
                v->len_all = len_all, v->len_commit = len_commit;
            }
            line_end(w, vp, v, (uint64_t)i + 1);
            if (builder) {
                h_all = v->h_all, h_commit = v->h_commit;
                len_all = v->len_all, len_commit = v->len_commit;
                fencing = v->fence_st != FENCE_NO;
            }
        } else {
            if (quotes && is_quote_char(cp)) quote_update(v, cp);
            if (builder) {
                int sp = is_space(cp);
                if (!sp || len_all) {
                    if (fencing && !sp) {
                        fence_step(v, cp, len_all == 0, len_all > len_commit);
                        fencing = v->fence_st != FENCE_NO;
                    }
                    h_all = (h_all ^ cp) * FNV_PRIME;
                    buf[len_all < CC_EVIDENCE_CHARS ? len_all : CC_EVIDENCE_CHARS] = cp;
                    len_all++;
                    if (!sp) {
                        h_commit = h_all;
                        len_commit = len_all;
                    }
                }
            }
        }
        if (ln && bytes >= next_check) {
            v->chars = chars0 + i + 1;
            v->bytes = bytes;
            v->ring.pos = rpos;
            throttle(w, vp, v, (uint64_t)i + 1);
            next_check = v->next_check;
        }
    }
    v->chars = chars0 + len;
    if (ph) v->state[0] = s0;
    if (ln) {
        v->bytes = bytes;
        v->ring.pos = rpos;
    }
    if (builder) {
        v->h_all = h_all, v->h_commit = h_commit;
        v->len_all = len_all, v->len_commit = len_commit;
    }
}

/* ---- the two common shapes, written out lean -------------------------------------------- */

/* A character of a phrase view that the fast loop leaves to this general path: the gap after
 * an occurrence, a match, a line end or a quote mark. `at` = the view's count after it. */
static void ph_event(cc_watcher *w, const viewplan *vp, view *v, uint32_t cp, uint64_t at,
                     uint64_t pos) {
    const cc_automaton *a = vp->live_ac[0];
    if (v->in_gap) gap_step(v, cp, at - 1);
    uint32_t s = cc_automaton_step(a, v->state[0], cp);
    v->state[0] = s;
    if (s >= a->match_base) {
        uint64_t end = v->chars;
        v->chars = at;
        phrases_matched(w, vp, v, pos);
        v->chars = end;
    }
    if (cp == '\n') line_end(w, vp, v, pos);
    else if (vp->quotes && is_quote_char(cp)) quote_update(v, cp);
}

static inline void ring_put(cc_ring *r, uint32_t cp) {
    r->lo[r->pos] = (uint16_t)cp;
    if (r->hi) r->hi[r->pos] = (uint8_t)(cp >> 16);
    r->pos = r->pos + 1 == r->cap ? 0 : r->pos + 1;
}

/* A view that only matches phrases with one automaton (no lines, ring or throttle): the
 * reasoning view of the default rules. With RING, the combined view of the same delta keeps
 * only the evidence ring (no throttled rules there) and is filled in the same loop, so a short
 * delta pays for one loop exit, not two. The fast loop keeps nothing live across a call: it
 * stops before a character that needs more (a match, a line end or quote mark with
 * suppress_quoted, the gap after a match), which ph_event handles. */
HOT_INLINE void run_phrases_ring(cc_watcher *w, const viewplan *vp, view *v, view *vc,
                                 const void *data, size_t len, const int kind, const int ring,
                                 const int wide) {
    const uint64_t end = v->chars + len;
    v->chars = end;
    if (ring) vc->chars += len;
    size_t i = 0;
    while (i < len) {
        if (!v->live_phrase_rules) {
            /* every phrase rule of the view has fired for good: nothing here can fire any more;
             * the rest only enters the ring */
            for (; ring && i < len; i++) ring_put(&vc->ring, load_cp(data, kind, i));
            return;
        }
        if (!v->in_gap) {
            const cc_automaton *a = vp->live_ac[0];
            const uint32_t *trans = a->trans;
            const uint32_t *pages = a->pages;
            const uint16_t *pcls = a->page_cls;
            const uint32_t mb = a->match_base, sb = a->special_base;
            uint16_t *rlo = ring ? vc->ring.lo : NULL;
            uint8_t *rhi = ring ? vc->ring.hi : NULL;
            uint32_t rpos = ring ? vc->ring.pos : 0;
            const uint32_t rcap = ring ? vc->ring.cap : 0;
            uint32_t s = v->state[0];
            for (; i < len; i++) {
                uint32_t cp = load_cp(data, kind, i);
                uint32_t c = kind == 4 ? cc_automaton_class(a, cp)
                                       : pcls[pages[cp >> 8] + (cp & 0xFF)];
                uint32_t t = trans[s + c];
                if ((t >= mb) | (c >= sb)) break;
                s = t;
                if (ring) {
                    rlo[rpos] = (uint16_t)cp;
                    if (wide) rhi[rpos] = (uint8_t)(cp >> 16);
                    rpos = rpos + 1 == rcap ? 0 : rpos + 1;
                }
            }
            v->state[0] = s;
            if (ring) vc->ring.pos = rpos;
            if (i == len) return;
        }
        uint32_t cp = load_cp(data, kind, i);
        if (ring) ring_put(&vc->ring, cp);
        ph_event(w, vp, v, cp, end - len + i + 1, (uint64_t)i + 1);
        i++;
    }
}

HOT_INLINE void run_phrases(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                            size_t len, const int kind) {
    run_phrases_ring(w, vp, v, NULL, data, len, kind, 0, 0);
}


/* The builder's work for a character that is not '\n' at the start of a line (leading
 * whitespace, the first character) or on a line that may still be a code fence. */
static void builder_slow(view *v, uint32_t cp) {
    int sp = is_space(cp);
    if (sp && !v->len_all) return;
    if (!sp && v->fence_st != FENCE_NO)
        fence_step(v, cp, v->len_all == 0, v->len_all > v->len_commit);
    v->h_all = (v->h_all ^ cp) * FNV_PRIME;
    v->buf[v->len_all < CC_EVIDENCE_CHARS ? v->len_all : CC_EVIDENCE_CHARS] = cp;
    v->len_all++;
    if (!sp) {
        v->h_commit = v->h_all;
        v->len_commit = v->len_all;
    }
}

/* A character of a line view that the fast loop leaves to this general path: a line end, the
 * start of a line or a possible fence line, a throttle point. */
static void ln_event(cc_watcher *w, const viewplan *vp, view *v, uint32_t cp, uint64_t at,
                     uint64_t pos) {
    if (vp->nwindowed) v->bytes += cc_utf8_len(cp);
    if (v->ring.lo) ring_put(&v->ring, cp);
    uint64_t end = v->chars;
    v->chars = at;
    if (vp->builder) {
        if (cp == '\n') line_end(w, vp, v, pos);
        else builder_slow(v, cp);
    }
    if (v->bytes >= v->next_check) throttle(w, vp, v, pos);
    v->chars = end;
}

/* A view that keeps lines (and maybe the ring and throttled checks) but matches no phrases:
 * the combined view of the default rules. `wide`: the ring keeps high bits; `builder`: the view
 * keeps lines (else it has only the ring). As run_phrases, the fast loop stops before a
 * character that needs more, which ln_event handles. */
HOT_INLINE void run_lines(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                          size_t len, const int kind, const int wide, const int builder) {
    const uint64_t end = v->chars + len;
    v->chars = end;
    const int counted = vp->nwindowed != 0; /* bytes only matter to throttled rules */
    size_t i = 0;
    while (i < len) {
        uint16_t *rlo = v->ring.lo;
        uint8_t *rhi = v->ring.hi;
        uint32_t rpos = v->ring.pos;
        const uint32_t rcap = v->ring.cap;
        /* bytes left before the next throttle point */
        const int64_t left0 = counted && v->next_check != UINT64_MAX
                                  ? (int64_t)(v->next_check - v->bytes) : INT64_MAX;
        int64_t left = left0;
        uint32_t *buf = v->buf;
        uint64_t h = 0, hc = 0;
        uint32_t n = 0, nc = 0;
        int normal = 0;
        if (builder) {
            h = v->h_all, hc = v->h_commit, n = v->len_all, nc = v->len_commit;
            normal = n && v->fence_st == FENCE_NO;
        }
        for (; i < len; i++) {
            uint32_t cp = load_cp(data, kind, i);
            int nb = kind == 4 ? (int)cc_utf8_len(cp) : utf8_len_bmp[cp >> 7];
            if (builder ? (cp == '\n') | !normal | (left <= nb) : left <= nb) break;
            left -= nb;
            if (rlo) {
                rlo[rpos] = (uint16_t)cp;
                if (wide) rhi[rpos] = (uint8_t)(cp >> 16);
                rpos = rpos + 1 == rcap ? 0 : rpos + 1;
            }
            if (builder) {
                /* branch-free: hash, evidence slot, and the commit past a non-space */
                uint32_t sp = space_bit(cp);
                h = (h ^ cp) * FNV_PRIME;
                buf[n < CC_EVIDENCE_CHARS ? n : CC_EVIDENCE_CHARS] = cp;
                n++;
                hc = sp ? hc : h;
                nc = sp ? nc : n;
            }
        }
        if (counted) v->bytes += (uint64_t)(left0 - left);
        v->ring.pos = rpos;
        if (builder) v->h_all = h, v->h_commit = hc, v->len_all = n, v->len_commit = nc;
        if (i == len) return;
        ln_event(w, vp, v, load_cp(data, kind, i), end - len + i + 1, (uint64_t)i + 1);
        i++;
    }
}

#define DEFINE_RUNS(SHAPE, N1, N2, N4)                                                         \
    static void N1(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {      \
        run_view(w, vp, v, d, n, 1, SHAPE);                                                    \
    }                                                                                          \
    static void N2(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {      \
        run_view(w, vp, v, d, n, 2, SHAPE);                                                    \
    }                                                                                          \
    static void N4(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {      \
        run_view(w, vp, v, d, n, 4, SHAPE);                                                    \
    }

DEFINE_RUNS(SHAPE_PH | SHAPE_LN, run_all1, run_all2, run_all4)

static void run_ph1(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {
    run_phrases(w, vp, v, d, n, 1);
}
static void run_ph2(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {
    run_phrases(w, vp, v, d, n, 2);
}
static void run_ph4(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {
    run_phrases(w, vp, v, d, n, 4);
}
/* narrow: no high plane yet (only kinds 1 and 2 can run narrow); B = with the line builder */
#define DEFINE_LINES(NAME, KIND, WIDE, B)                                                      \
    static void NAME(cc_watcher *w, const viewplan *vp, view *v, const void *d, size_t n) {    \
        run_lines(w, vp, v, d, n, KIND, WIDE, B);                                              \
    }
DEFINE_LINES(run_ln1, 1, 0, 1)
DEFINE_LINES(run_ln2, 2, 0, 1)
DEFINE_LINES(run_lnw1, 1, 1, 1)
DEFINE_LINES(run_lnw2, 2, 1, 1)
DEFINE_LINES(run_lnw4, 4, 1, 1)
DEFINE_LINES(run_rg1, 1, 0, 0)
DEFINE_LINES(run_rg2, 2, 0, 0)
DEFINE_LINES(run_rgw1, 1, 1, 0)
DEFINE_LINES(run_rgw2, 2, 1, 0)
DEFINE_LINES(run_rgw4, 4, 1, 0)

static void plan_runs(viewplan *vp) {
    int ph = vp->nac > 0 || vp->quotes;
    int ln = vp->builder || vp->ring_cap || vp->nwindowed;
    vp->run[0][0] = run_all1, vp->run[0][1] = run_all2, vp->run[0][2] = run_all4;
    if (ph && !ln && vp->nac == 1) {
        vp->run[0][0] = run_ph1, vp->run[0][1] = run_ph2, vp->run[0][2] = run_ph4;
    } else if (!ph && vp->builder) {
        vp->run[0][0] = run_ln1, vp->run[0][1] = run_ln2, vp->run[0][2] = run_lnw4;
        vp->run[1][0] = run_lnw1, vp->run[1][1] = run_lnw2, vp->run[1][2] = run_lnw4;
        return;
    } else if (!ph && ln) {
        vp->run[0][0] = run_rg1, vp->run[0][1] = run_rg2, vp->run[0][2] = run_rgw4;
        vp->run[1][0] = run_rgw1, vp->run[1][1] = run_rgw2, vp->run[1][2] = run_rgw4;
        return;
    }
    vp->run[1][0] = vp->run[0][0], vp->run[1][1] = vp->run[0][1], vp->run[1][2] = vp->run[0][2];
}

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

/* ---- one delta, both views ------------------------------------------------------------ */

/* Any shapes: each used view through its own loop (buffers are ready). */
static void pair_generic(cc_watcher *w, int channel, const void *data, size_t len, int kind) {
    for (int k = 0; k < 2; k++) {
        int vi = k ? CC_VIEW_COMBINED : channel;
        const viewplan *vp = &w->rs->views[vi];
        view *v = &w->v[vi];
        if (vp->used) vp->run[v->ring.hi != NULL][kind >> 1](w, vp, v, data, len);
    }
}
static void pair_generic1(cc_watcher *w, int ch, const void *d, size_t n) {
    pair_generic(w, ch, d, n, 1);
}
static void pair_generic2(cc_watcher *w, int ch, const void *d, size_t n) {
    pair_generic(w, ch, d, n, 2);
}
static void pair_generic4(cc_watcher *w, int ch, const void *d, size_t n) {
    pair_generic(w, ch, d, n, 4);
}

/* The common shapes in one function: the channel's view matches phrases with one automaton
 * (PH) or is unused, and the combined view keeps lines or only the ring (B = builder). */
#define DEFINE_PAIR(NAME, KIND, WIDE, PH, B)                                                   \
    static void NAME(cc_watcher *w, int ch, const void *d, size_t n) {                         \
        if (PH) run_phrases(w, &w->rs->views[ch], &w->v[ch], d, n, KIND);                      \
        run_lines(w, &w->rs->views[CC_VIEW_COMBINED], &w->v[CC_VIEW_COMBINED], d, n, KIND,     \
                  WIDE, B);                                                                    \
    }
#define DEFINE_PAIRS(P, PH, B)                                                                 \
    DEFINE_PAIR(P##_1, 1, 0, PH, B)                                                            \
    DEFINE_PAIR(P##_2, 2, 0, PH, B)                                                            \
    DEFINE_PAIR(P##_w1, 1, 1, PH, B)                                                           \
    DEFINE_PAIR(P##_w2, 2, 1, PH, B)                                                           \
    DEFINE_PAIR(P##_w4, 4, 1, PH, B)
DEFINE_PAIRS(pair_ph_ln, 1, 1)
DEFINE_PAIRS(pair_ph_rg, 1, 0)
DEFINE_PAIRS(pair_ln, 0, 1)
DEFINE_PAIRS(pair_rg, 0, 0)

#define DEFINE_PH_RING(NAME, KIND, WIDE)                                                       \
    static void NAME(cc_watcher *w, int ch, const void *d, size_t n) {                         \
        run_phrases_ring(w, &w->rs->views[ch], &w->v[ch], &w->v[CC_VIEW_COMBINED], d, n,     \
                         KIND, 1, WIDE);                                                       \
    }
DEFINE_PH_RING(pair_ph_ev_1, 1, 0)
DEFINE_PH_RING(pair_ph_ev_2, 2, 0)
DEFINE_PH_RING(pair_ph_ev_w1, 1, 1)
DEFINE_PH_RING(pair_ph_ev_w2, 2, 1)
DEFINE_PH_RING(pair_ph_ev_w4, 4, 1)

#define SET_PAIRS(RS, CH, P)                                                                   \
    do {                                                                                       \
        (RS)->pair[CH][0][0] = P##_1, (RS)->pair[CH][0][1] = P##_2;                            \
        (RS)->pair[CH][0][2] = P##_w4;                                                         \
        (RS)->pair[CH][1][0] = P##_w1, (RS)->pair[CH][1][1] = P##_w2;                          \
        (RS)->pair[CH][1][2] = P##_w4;                                                         \
    } while (0)

static void plan_pairs(cc_ruleset *rs) {
    const viewplan *vc = &rs->views[CC_VIEW_COMBINED];
    int comb_ln = vc->used && vc->run[0][1] == run_ln2;
    int comb_rg = vc->used && vc->run[0][1] == run_rg2;
    for (int ch = 0; ch < 2; ch++) {
        const viewplan *vp = &rs->views[ch];
        int ph = vp->used && vp->run[0][1] == run_ph2;
        if ((ph || !vp->used) && (comb_ln || comb_rg)) {
            if (ph && comb_ln) SET_PAIRS(rs, ch, pair_ph_ln);
            else if (ph && !vc->nwindowed) SET_PAIRS(rs, ch, pair_ph_ev);
            else if (ph) SET_PAIRS(rs, ch, pair_ph_rg);
            else if (comb_ln) SET_PAIRS(rs, ch, pair_ln);
            else SET_PAIRS(rs, ch, pair_rg);
            continue;
        }
        for (int wide = 0; wide < 2; wide++) {
            rs->pair[ch][wide][0] = pair_generic1;
            rs->pair[ch][wide][1] = pair_generic2;
            rs->pair[ch][wide][2] = pair_generic4;
        }
    }
}

static void channel_switch(cc_watcher *w) {
    const viewplan *vp = &w->rs->views[CC_VIEW_COMBINED];
    view *v = &w->v[CC_VIEW_COMBINED];
    if (!vp->used) return;
    line_end(w, vp, v, 0);
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

/* The rare parts of a feed: a channel switch, buffers to allocate. */
COLD int feed_prepare(cc_watcher *w, int kind, int channel) {
    if (w->last_channel != channel) {
        if (w->last_channel >= 0) channel_switch(w);
        w->last_channel = channel;
    }
    if (kind > w->ready[channel]) {
        const cc_ruleset *rs = w->rs;
        if ((rs->views[channel].used && view_ready(&rs->views[channel], &w->v[channel], kind)) ||
            (rs->views[CC_VIEW_COMBINED].used &&
             view_ready(&rs->views[CC_VIEW_COMBINED], &w->v[CC_VIEW_COMBINED], kind)))
            return CC_ERR_NOMEM;
        w->ready[channel] = (uint8_t)kind;
    }
    return CC_OK;
}

COLD int feed_done(cc_watcher *w, size_t from) {
    if (w->nhits - from > 1) sort_hits(w, from);
    if (w->oom) {
        w->oom = 0;
        return CC_ERR_NOMEM;
    }
    return (int)(w->nhits < INT32_MAX ? w->nhits : INT32_MAX);
}

int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel) {
    if (w->finished) return CC_ERR_FINISHED;
    if (!len) return (int)(w->nhits < INT32_MAX ? w->nhits : INT32_MAX);
    if ((w->last_channel != channel || kind > w->ready[channel]) &&
        feed_prepare(w, kind, channel) != CC_OK)
        return CC_ERR_NOMEM;
    size_t from = w->nhits;
    w->rs->pair[channel][w->v[CC_VIEW_COMBINED].ring.hi != NULL][kind >> 1](w, channel, data, len);
    if (w->nhits != from || w->oom) return feed_done(w, from);
    return (int)(from < INT32_MAX ? from : INT32_MAX);
}

int cc_watcher_finish(cc_watcher *w) {
    if (w->finished) return CC_OK;
    size_t from = w->nhits;
    for (int vi = 0; vi < CC_NVIEWS; vi++) {
        const viewplan *vp = &w->rs->views[vi];
        if (vp->used) line_end(w, vp, &w->v[vi], 0);
    }
    for (uint32_t ri = 0; ri < w->rs->nrules; ri++) {
        const cc_rule_spec *r = &w->rs->rules[ri];
        if (r->kind != CC_K_PHRASES) check_rule(w, ri, &w->v[r->view], 0);
    }
    w->finished = 1;
    if (w->nhits - from > 1) sort_hits(w, from);
    if (w->oom) {
        w->oom = 0;
        return CC_ERR_NOMEM;
    }
    return CC_OK;
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
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        if (splits[i] < prev || (uint64_t)splits[i] > len) return (long long)i;
        prev = splits[i];
    }
    if ((n ? (uint64_t)prev : 0) != len) return (long long)n;
    return -1;
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
    /* then one channel and one kind: each delta straight to its loop, as cc_watcher_feed would
     * (per delta: the loop, then its hits in order) */
    pair_fn run = w->rs->pair[channel][w->v[CC_VIEW_COMBINED].ring.hi != NULL][kind >> 1];
    for (; i < nsplits; i++) {
        size_t end = (size_t)splits[i];
        if (end == prev) continue; /* an empty delta does nothing */
        size_t from = w->nhits;
        run(w, channel, base + prev * (size_t)kind, end - prev);
        if ((w->nhits != from || w->oom) && feed_done(w, from) < 0) return CC_ERR_NOMEM;
        prev = end;
    }
    return cc_watcher_finish(w);
}
