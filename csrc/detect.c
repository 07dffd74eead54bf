/* The windowed detectors: each reads one view's line window (or its ring) and one rule, and
 * appends a hit when the rule's condition holds. They run only at throttle points and at
 * finish (eng_check_rule), never per character. */
#include "engine_impl.h"

/* --------------------------------------------------------------------------- evidence -- */

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
/* --------------------------------------------------------------------- detectors -- */

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
    int hit = (top >= r->min_count && ratio >= r->min_ratio) || (r->min_run && run >= r->min_run);
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
    if ((double)r->top * win->top / (double)total < r->cover_ratio ||
        (double)cc_window_short_lines(win, r->max_line_chars) / (double)total < r->cover_ratio)
        return;
    const cc_entry *best[CC_MAX_CYCLE_TOP];
    uint32_t k = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count || e->len > r->max_line_chars) continue;
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
    if (!k || ratio < r->cover_ratio) return;
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

static void check_filler_lines(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                               uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total) return;
    uint32_t bound = cc_window_short_lines(win, r->max_line_chars);
    if (bound < r->min_count || (double)bound / (double)total < r->min_ratio) return;
    uint32_t count = 0;
    for (uint32_t i = 0; i < win->cap; i++) {
        const cc_entry *e = &win->entries[i];
        if (!e->count || e->len > r->max_line_chars) continue;
        const unsigned char *text = cc_entry_bytes(e);
        uint32_t nbytes = cc_entry_nbytes(e);
        for (uint32_t at = 0; at < nbytes;) {
            unsigned n;
            uint32_t cp = cc_utf8_decode(text + at, &n);
            at += n;
            if (cc_u32_in(r->fillers, r->nfillers, cp)) {
                count += e->count;
                break;
            }
        }
    }
    double ratio = (double)count / (double)total;
    if (count < r->min_count || ratio < r->min_ratio) return;
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    h->count = count;
    h->total = total;
    h->ratio = ratio;
}

typedef struct prefix_tally {
    uint32_t cps[CC_MAX_PREFIX_CHARS];
    uint32_t n, count;
    const cc_entry *last; /* the entry of the most recent occurrence */
} prefix_tally;

enum { STACK_TALLIES = 128 };

static void check_prefix_monotony(cc_watcher *w, const cc_rule_spec *r, uint32_t ri, view *v,
                                  uint64_t pos) {
    const cc_window *win = v->win;
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return;
    if (win->nflagged < r->min_count || (double)win->nflagged / (double)total < r->min_ratio) return;
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
        uint32_t cps[CC_MAX_PREFIX_CHARS], n = 0, plen = 0;
        for (uint32_t at = 0; at < nbytes && n < r->max_prefix_chars;) {
            unsigned k;
            cps[n] = cc_utf8_decode(text + at, &k);
            at += k;
            if (cc_u32_in(r->delimiters, r->ndelimiters, cps[n++])) {
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
        if (best->count >= r->min_count && ratio >= r->min_ratio) {
            cc_hit *h = new_hit(w, ri, v->chars, pos);
            if (h) {
                mark_fired(w, ri);
                unsigned char buf[CC_MAX_PREFIX_CHARS * 4];
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
    unsigned char buf[CC_EVIDENCE_CHARS * 4];
    h->period = res.period;
    h->repeats = res.repeats;
    set_text(w, h, buf, encode_cps(res.unit, res.unit_chars, buf));
}

void eng_check_rule(cc_watcher *w, uint32_t ri, view *v, uint64_t pos) {
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

