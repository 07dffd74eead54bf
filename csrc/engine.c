#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "automaton.h"
#include "lines.h"
#include "ring.h"
#include "text.h"

/* ===================================================================== compiled ruleset == */

typedef struct viewplan {
    int used;             /* process this view at all */
    cc_automaton *ac[2];  /* [0] exact, [1] ASCII case folded */
    int builder;          /* track the pending line (line rules, or fences for TailRepeat) */
    int window;           /* keep the line window */
    int quotes;           /* track quote state (a suppress_quoted rule watches this view) */
    uint32_t ring_cap;    /* characters kept (0 = none) */
    uint32_t nphrase_rules;
    uint32_t *windowed, nwindowed; /* rule indices, rule order */
    uint32_t *suppress, nsuppress; /* rule indices, rule order */
    uint32_t pfx_set[64], npfx, pfx_max; /* union of PrefixMonotony delimiters, longest prefix */
} viewplan;

struct cc_ruleset {
    cc_options opt;
    uint32_t nrules;
    cc_rule_spec *rules;
    viewplan views[CC_NVIEWS];
};

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
    }
    free(rs);
}

cc_ruleset *cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                           const cc_phrase_spec *phrases, size_t nphrases, char *err,
                           size_t errlen) {
    cc_ruleset *rs = calloc(1, sizeof *rs);
    cc_phrase_in *group = NULL;
    if (!rs) goto oom;
    rs->opt = *opt;
    rs->nrules = nrules;
    rs->rules = calloc(nrules ? nrules : 1, sizeof *rs->rules);
    if (!rs->rules) goto oom;
    for (uint32_t i = 0; i < nrules; i++) {
        rs->rules[i] = rules[i];
        rs->rules[i].set = NULL;
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
        if (!vp->windowed || !vp->suppress) goto oom;
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
            if (r->kind == CC_K_TAIL_REPEAT) {
                if (r->window_chars > vp->ring_cap) vp->ring_cap = r->window_chars;
                if (opt->mask_fences) vp->builder = 1;
            } else {
                vp->builder = 1;
                vp->window = 1;
            }
            if (r->kind == CC_K_PREFIX_MONOTONY) {
                if (r->max_chars > vp->pfx_max) vp->pfx_max = r->max_chars;
                for (uint32_t k = 0; k < r->nset; k++) {
                    uint32_t j;
                    for (j = 0; j < vp->npfx; j++)
                        if (vp->pfx_set[j] == r->set[k]) break;
                    if (j == vp->npfx && vp->npfx < 64) vp->pfx_set[vp->npfx++] = r->set[k];
                }
            }
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
            rs->views[v].ac[fold] =
                cc_automaton_build(group, n, fold, opt->max_table_bytes, err, errlen);
            if (!rs->views[v].ac[fold]) goto fail;
        }
    }
    free(group);
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

typedef struct view {
    uint64_t chars, bytes, next_check, barrier;
    uint32_t state[2];
    uint32_t live_phrase_rules;
    /* pending line: hash and length through the last non-space, first 40 code points */
    int started;
    uint64_t h_all, h_commit;
    uint32_t len_all, len_commit;
    unsigned char *buf;
    uint32_t buf_cp, buf_bytes, commit_bytes;
    int fence_st;
    uint32_t fence_k, fence_ch;
    int fence_inside;
    /* quote state of the current line */
    uint32_t backticks, seps, line_occ, first_sep, last_sep;
    uint8_t dquote, curly, corner;
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
    int finished;
    int oom;
    cc_hit *hits;
    size_t nhits, caphits;
};

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static void view_init(cc_watcher *w, int vi) {
    const viewplan *vp = &w->rs->views[vi];
    view *v = &w->v[vi];
    unsigned char *buf = v->buf;
    cc_ring ring = v->ring;
    memset(v, 0, sizeof *v);
    v->buf = buf;
    v->ring = ring;
    v->ring.pos = 0;
    v->ring.total = 0;
    v->live_phrase_rules = vp->nphrase_rules;
    v->h_all = v->h_commit = FNV_OFFSET;
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
        free(w->v[vi].ring.buf);
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
        dst->ring.buf = NULL;
        if (src->buf) {
            dst->buf = malloc(CC_EVIDENCE_BYTES);
            if (!dst->buf) goto oom;
            memcpy(dst->buf, src->buf, CC_EVIDENCE_BYTES);
        }
        if (src->ring.buf) {
            dst->ring.buf = malloc(src->ring.cap * sizeof(uint32_t));
            if (!dst->ring.buf) goto oom;
            memcpy(dst->ring.buf, src->ring.buf, src->ring.cap * sizeof(uint32_t));
        }
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
        if (w->v[vi].buf) m += CC_EVIDENCE_BYTES;
        if (w->v[vi].ring.buf) m += w->v[vi].ring.cap * sizeof(uint32_t);
        m += cc_window_memory(w->v[vi].win);
    }
    return m;
}

int cc_watcher_finished(const cc_watcher *w) { return w->finished; }
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
    return a->count > b->count || (a->count == b->count && a->last > b->last);
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
    set_text(w, h, e->text, e->nbytes);
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
    for (uint32_t i = 0; i < k; i++) len += best[i]->nbytes;
    h->text = malloc(len ? len : 1);
    h->part_len = malloc(k * sizeof *h->part_len);
    if (!h->text || !h->part_len) {
        w->oom = 1;
        return;
    }
    uint32_t at = 0;
    for (uint32_t i = 0; i < k; i++) {
        memcpy(h->text + at, best[i]->text, best[i]->nbytes);
        at += best[i]->nbytes;
        h->part_len[i] = best[i]->nbytes;
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
        for (uint32_t at = 0; at < e->nbytes;) {
            unsigned n;
            uint32_t cp = cc_utf8_decode(e->text + at, &n);
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
    uint64_t last;
} prefix_tally;

static void check_prefix_monotony(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                                  uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return;
    if (win->nflagged < r->min_count || (double)win->nflagged / (double)total < r->ratio) return;
    prefix_tally *t = malloc(win->cap * sizeof *t);
    if (!t) {
        w->oom = 1;
        return;
    }
    uint32_t nt = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count) continue;
        uint32_t cps[8], n = 0, plen = 0;
        for (uint32_t at = 0; at < e->nbytes && n < r->max_chars;) {
            unsigned k;
            cps[n] = cc_utf8_decode(e->text + at, &k);
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
            t[nt].last = 0;
            nt++;
        }
        t[j].count += e->count;
        if (e->last >= t[j].last) t[j].last = e->last;
    }
    prefix_tally *best = NULL;
    for (uint32_t j = 0; j < nt; j++)
        if (!best || t[j].count > best->count || (t[j].count == best->count && t[j].last > best->last))
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
    free(t);
}

static void check_tail_repeat(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                              uint64_t pos) {
    if (w->rs->opt.mask_fences && v->fence_inside) return;
    if (!v->ring.buf) return;
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

static int view_builder_ready(view *v) {
    if (!v->buf) {
        v->buf = malloc(CC_EVIDENCE_BYTES);
        if (!v->buf) return -1;
    }
    return 0;
}

static void builder_reset(view *v) {
    v->started = 0;
    v->h_all = v->h_commit = FNV_OFFSET;
    v->len_all = v->len_commit = 0;
    v->buf_cp = v->buf_bytes = v->commit_bytes = 0;
    v->fence_st = FENCE_START;
    v->fence_k = 0;
}

static int fence_tag_char(uint32_t cp) {
    return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9') ||
           cp == '_' || cp == '+' || cp == '-';
}

static void builder_add(view *v, uint32_t cp) {
    if (cc_is_space(cp)) {
        if (!v->started) return;
    } else {
        if (!v->started) {
            v->started = 1;
        } else if (v->len_all > v->len_commit) {
            v->fence_st = FENCE_NO; /* whitespace inside the line */
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
    v->h_all = (v->h_all ^ cp) * FNV_PRIME;
    v->len_all++;
    if (v->buf_cp < CC_EVIDENCE_CHARS) {
        v->buf_bytes += cc_utf8_encode(cp, v->buf + v->buf_bytes);
        v->buf_cp++;
    }
    if (!cc_is_space(cp)) {
        v->h_commit = v->h_all;
        v->len_commit = v->len_all;
        v->commit_bytes = v->buf_bytes;
    }
}

static void complete_line(cc_watcher *w, const viewplan *vp, view *v) {
    const cc_options *opt = &w->rs->opt;
    if (opt->mask_fences) {
        int fence = v->started && ((v->fence_st == FENCE_TICKS && v->fence_k >= 3) ||
                                   v->fence_st == FENCE_TAG);
        if (fence) {
            v->fence_inside = !v->fence_inside;
            builder_reset(v);
            return;
        }
        if (v->fence_inside) {
            builder_reset(v);
            return;
        }
    }
    if (vp->window && v->started && v->len_commit >= opt->min_line_chars) {
        if (!v->win) {
            v->win = cc_window_new(opt->line_window);
            if (!v->win) w->oom = 1;
        }
        /* flag lines that may have a prefix: a delimiter within the first pfx_max characters */
        uint32_t flags = 0;
        for (uint32_t at = 0, i = 0; i < vp->pfx_max && at < v->commit_bytes && !flags; i++) {
            unsigned n;
            uint32_t cp = cc_utf8_decode(v->buf + at, &n);
            at += n;
            for (uint32_t k = 0; k < vp->npfx; k++)
                if (vp->pfx_set[k] == cp) flags = 1;
        }
        if (v->win &&
            cc_window_push(v->win, v->h_commit, v->len_commit, v->buf, v->commit_bytes, flags))
            w->oom = 1;
    }
    builder_reset(v);
}

static void quote_update(view *v, uint32_t cp) {
    switch (cp) {
    case '`': v->backticks ^= 1; break;
    case '"': v->dquote ^= 1; break;
    case 0x201C: v->curly = 1; break;
    case 0x201D: v->curly = 0; break;
    case 0x300C: v->corner = 1; break;
    case 0x300D: v->corner = 0; break;
    case '|': case ',': case 0xFF0C: case 0x3001: v->seps++; break;
    default: break;
    }
}

static void resolve_quoted(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    int list_line = v->line_occ >= 2 && v->last_sep > v->first_sep;
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
    v->backticks = v->seps = v->line_occ = v->first_sep = v->last_sep = 0;
    v->dquote = v->curly = v->corner = 0;
}

static void line_end(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    if (vp->builder) complete_line(w, vp, v);
    if (vp->quotes) resolve_quoted(w, vp, v, pos);
}

/* -------------------------------------------------------------------------- phrases -- */

static void on_match(cc_watcher *w, const viewplan *vp, view *v, const cc_automaton *a,
                     uint32_t state, uint64_t pos) {
    uint32_t n;
    const cc_output *out = cc_automaton_outputs(a, state, &n);
    int quoted = v->backticks || v->dquote || v->curly || v->corner;
    (void)vp;
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

/* ------------------------------------------------------------------------- the loop -- */

static inline void step(cc_watcher *w, const viewplan *vp, view *v, uint32_t cp, uint64_t pos) {
    unsigned char b[4];
    unsigned nb = cc_utf8_encode(cp, b);
    v->chars++;
    v->bytes += nb;
    if (vp->ring_cap) cc_ring_put(&v->ring, cp);
    if (v->live_phrase_rules) {
        int matched = 0;
        for (int k = 0; k < 2; k++) {
            const cc_automaton *a = vp->ac[k];
            if (!a) continue;
            uint32_t s = v->state[k];
            for (unsigned j = 0; j < nb; j++) s = a->trans[s + a->cls[b[j]]];
            v->state[k] = s;
            if (s >= a->match_base) {
                if (!matched && vp->quotes) {
                    if (!v->line_occ) v->first_sep = v->seps;
                    v->last_sep = v->seps;
                    v->line_occ++;
                }
                matched = 1;
                on_match(w, vp, v, a, s, pos);
            }
        }
    }
    if (cp == '\n') {
        line_end(w, vp, v, pos);
    } else {
        if (vp->quotes) quote_update(v, cp);
        if (vp->builder) builder_add(v, cp);
    }
    if (v->bytes >= v->next_check) throttle(w, vp, v, pos);
}

#define FEED_LOOP(T)                                                         \
    do {                                                                     \
        const T *p = (const T *)data;                                        \
        for (size_t i = 0; i < len; i++) step(w, vp, v, p[i], (uint64_t)i + 1); \
    } while (0)

static int view_ready(cc_watcher *w, const viewplan *vp, view *v) {
    if (vp->ring_cap && !v->ring.buf) {
        v->ring.buf = malloc(vp->ring_cap * sizeof(uint32_t));
        if (!v->ring.buf) return -1;
        v->ring.cap = vp->ring_cap;
    }
    if (vp->builder && view_builder_ready(v) != 0) return -1;
    (void)w;
    return 0;
}

static int feed_view(cc_watcher *w, int vi, const void *data, int kind, size_t len) {
    const viewplan *vp = &w->rs->views[vi];
    view *v = &w->v[vi];
    if (view_ready(w, vp, v) != 0) return CC_ERR_NOMEM;
    switch (kind) {
    case 1: FEED_LOOP(uint8_t); break;
    case 2: FEED_LOOP(uint16_t); break;
    default: FEED_LOOP(uint32_t); break;
    }
    return CC_OK;
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

static void sort_hits(cc_watcher *w, size_t from) {
    for (size_t i = from + 1; i < w->nhits; i++) {
        cc_hit h = w->hits[i];
        size_t j = i;
        while (j > from && cmp_hits(&h, &w->hits[j - 1]) < 0) {
            w->hits[j] = w->hits[j - 1];
            j--;
        }
        w->hits[j] = h;
    }
}

int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel) {
    if (w->finished) return CC_ERR_FINISHED;
    if (!len) return CC_OK;
    size_t from = w->nhits;
    if (w->last_channel >= 0 && w->last_channel != channel) channel_switch(w);
    w->last_channel = channel;
    if (w->rs->views[channel].used && feed_view(w, channel, data, kind, len) != CC_OK)
        return CC_ERR_NOMEM;
    if (w->rs->views[CC_VIEW_COMBINED].used &&
        feed_view(w, CC_VIEW_COMBINED, data, kind, len) != CC_OK)
        return CC_ERR_NOMEM;
    if (w->nhits - from > 1) sort_hits(w, from);
    if (w->oom) {
        w->oom = 0;
        return CC_ERR_NOMEM;
    }
    return CC_OK;
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
    if (!v->ring.buf) return 0;
    if (n > v->ring.total) n = (size_t)v->ring.total;
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
    size_t prev = 0;
    const unsigned char *base = data;
    for (size_t i = 0; i < nsplits; i++) {
        size_t end = (size_t)splits[i];
        int rc = cc_watcher_feed(w, base + prev * (size_t)kind, kind, end - prev, channel);
        if (rc != CC_OK) return rc;
        prev = end;
    }
    return cc_watcher_finish(w);
}
