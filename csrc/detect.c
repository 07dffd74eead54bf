/* The windowed detectors (pure functions of a window or ring and a rule, declared in detect.h)
 * and eng_check_rule, which runs one on its view and turns a finding into a hit. They run only
 * at throttle points and at finish, never per character. */
#include "detect.h"

#include "engine_impl.h"

/* --------------------------------------------------------------------------- detectors -- */

static int before(const cc_entry *a, const cc_entry *b) {
    /* order of the most frequent first, ties to the most recent occurrence */
    return a->count > b->count || (a->count == b->count && cc_entry_newer(a, b));
}

int eng_detect_line_repeat(const cc_window *win, const cc_rule_spec *r, eng_finding *f) {
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return 0;
    uint32_t top = win->top, run = cc_window_longest_run(win);
    double ratio = (double)top / (double)total;
    int hit = (top >= r->min_count && ratio >= r->min_ratio) || (r->min_run && run >= r->min_run);
    if (!hit) return 0;
    f->line = cc_window_top_entry(win);
    f->count = top;
    f->total = total;
    f->ratio = ratio;
    f->run = run;
    return 1;
}

int eng_detect_line_cycle(const cc_window *win, const cc_rule_spec *r, eng_finding *f) {
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return 0;
    /* the cycle covers at most top x the highest count, and only short lines */
    if ((double)r->top * win->top / (double)total < r->cover_ratio ||
        (double)cc_window_short_lines(win, r->max_line_chars) / (double)total < r->cover_ratio)
        return 0;
    const cc_entry **best = f->lines;
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
    if (!k || ratio < r->cover_ratio) return 0;
    f->nlines = k;
    f->count = covered;
    f->total = total;
    f->ratio = ratio;
    return 1;
}

int eng_detect_filler_lines(const cc_window *win, const cc_rule_spec *r, eng_finding *f) {
    uint32_t total = win ? win->n : 0;
    if (!total) return 0;
    uint32_t bound = cc_window_short_lines(win, r->max_line_chars);
    if (bound < r->min_count || (double)bound / (double)total < r->min_ratio) return 0;
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
    if (count < r->min_count || ratio < r->min_ratio) return 0;
    f->count = count;
    f->total = total;
    f->ratio = ratio;
    return 1;
}

typedef struct prefix_tally {
    uint32_t cps[CC_MAX_PREFIX_CHARS];
    uint32_t n, count;
    const cc_entry *last; /* the entry of the most recent occurrence */
} prefix_tally;

enum { STACK_TALLIES = 128 };

int eng_detect_prefix_monotony(const cc_window *win, const cc_rule_spec *r, eng_finding *f) {
    uint32_t total = win ? win->n : 0;
    if (!total || total < r->min_lines) return 0;
    if (win->nflagged < r->min_count || (double)win->nflagged / (double)total < r->min_ratio)
        return 0;
    prefix_tally stack[STACK_TALLIES];
    prefix_tally *t = win->cap <= STACK_TALLIES ? stack : malloc(win->cap * sizeof *t);
    if (!t) return -1;
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
    int found = 0;
    if (best) {
        double ratio = (double)best->count / (double)total;
        if (best->count >= r->min_count && ratio >= r->min_ratio) {
            memcpy(f->cps, best->cps, best->n * sizeof *f->cps);
            f->ncps = best->n;
            f->count = best->count;
            f->total = total;
            f->ratio = ratio;
            found = 1;
        }
    }
    if (t != stack) free(t);
    return found;
}

/* The rotation of the periodic unit (the last `p` characters) that starts at a line start:
 * after its first newline, counted circularly; without one, at its first word start; else as
 * it is. The first CC_EVIDENCE_CHARS code points go to out. */
static uint32_t readable_unit(const cc_ring *ring, uint32_t p, uint32_t *out) {
#define UNIT_AT(j) cc_ring_back(ring, p - 1 - ((j) % p))
    uint32_t j, start = 0;
    int found = 0;
    for (j = 0; j < p && !found; j++)
        if (UNIT_AT(j + p - 1) == '\n') start = j, found = 1;
    for (j = 0; j < p && !found; j++)
        if (cc_is_space(UNIT_AT(j + p - 1)) && !cc_is_space(UNIT_AT(j))) start = j, found = 1;
    uint32_t n = p < CC_EVIDENCE_CHARS ? p : CC_EVIDENCE_CHARS;
    for (j = 0; j < n; j++) out[j] = UNIT_AT(start + j);
    return n;
#undef UNIT_AT
}

int eng_detect_tail_repeat(const cc_ring *ring, uint32_t avail, int fenced, const cc_rule_spec *r,
                           eng_finding *f) {
    if (!ring->lo) return 0;
    cc_tail_params p = {r->max_period, r->min_repeats, r->min_chars, r->window_chars};
    cc_tail_result res;
    int found = cc_tail_repeat(ring, avail, &p, &res);
    if (found <= 0) return found;
    /* inside a code fence a unit of lines is BlockRepeat's (with its fence conditions) */
    for (uint32_t j = 0; fenced && j < res.period; j++)
        if (cc_ring_back(ring, j) == '\n') return 0;
    f->period = res.period;
    f->repeats = res.repeats;
    f->ncps = readable_unit(ring, res.period, f->cps);
    return 1;
}

int eng_detect_structure_flood(const cc_ring *ring, uint32_t avail, const cc_rule_spec *r,
                               eng_finding *f) {
    const uint32_t n = r->min_chars;
    if (!ring->lo || avail < n) return 0;
    /* back from the end: on text a word character comes within a few steps */
    for (uint32_t k = 0; k < n; k++)
        if (cc_is_word(cc_ring_back(ring, k))) return 0;
    if (r->max_period) {
        /* and one short unit repeated: the smallest period p <= max_period over all n */
        uint32_t p;
        for (p = 1; p <= r->max_period; p++) {
            uint32_t k = 0;
            while (k + p < n && cc_ring_back(ring, k) == cc_ring_back(ring, k + p)) k++;
            if (k + p >= n) break;
        }
        if (p > r->max_period) return 0;
    }
    /* the evidence: the last line of the flood that is not blank, stripped */
    for (uint32_t k = 0; k < n;) {
        uint32_t m = k; /* the line holds back positions [k, m) */
        while (m < n && cc_ring_back(ring, m) != '\n') m++;
        uint32_t a = m, b = k; /* stripped: back positions [b, a) */
        while (a > b && cc_is_space(cc_ring_back(ring, a - 1))) a--;
        while (b < a && cc_is_space(cc_ring_back(ring, b))) b++;
        if (a > b) {
            uint32_t len = a - b < CC_EVIDENCE_CHARS ? a - b : CC_EVIDENCE_CHARS;
            for (uint32_t t = 0; t < len; t++) f->cps[t] = cc_ring_back(ring, a - 1 - t);
            f->ncps = len;
            break;
        }
        k = m + 1;
    }
    f->total = n;
    return 1;
}

int eng_detect_block_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                            const cc_rule_spec *r, eng_finding *f) {
    cc_block_params p = {r->near, r->max_period, r->min_repeats, r->min_chars, r->min_letters,
                         r->fence_letters};
    cc_block_result res;
    if (!cc_block_repeat(s, ring, chars, &p, &res)) return 0;
    f->period = res.period;
    f->repeats = res.repeats;
    f->total = res.total;
    memcpy(f->cps, res.line, res.line_chars * sizeof *f->cps);
    f->ncps = res.line_chars;
    return 1;
}

int eng_detect_segment_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                              const cc_rule_spec *r, eng_finding *f, uint64_t *seen) {
    cc_segrep_params p = {r->window, r->top, r->min_count, r->min_letters, r->fences,
                          r->top_letters};
    uint32_t covered, n, need = 1;
    int found = cc_segment_repeat(s, ring, chars, &p, &covered, f->cps, &n, &need);
    /* no hit before `need` more segments: the checks until then are skipped */
    if (!found) *seen += need - 1;
    if (found <= 0) return found;
    f->count = covered;
    f->total = r->window;
    f->ncps = n;
    return 1;
}

int eng_detect_vocab_collapse(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                              const cc_rule_spec *r, eng_finding *f, uint64_t *seen) {
    uint32_t distinct, n, need;
    int found = cc_vocab_collapse(s, ring, chars, r->words, r->max_distinct, r->one_line,
                                  &distinct, f->cps, &n, &need);
    /* no hit before `need` more words: the checks until then are skipped */
    if (!found) *seen += need - 1;
    if (found <= 0) return found;
    f->count = distinct;
    f->total = r->words;
    f->ncps = n;
    return 1;
}

int eng_detect_word_repeat(const cc_wordtail *t, const cc_ring *ring, uint64_t chars,
                           const cc_rule_spec *r, eng_finding *f) {
    cc_wordrep_params p = {r->max_period, r->min_repeats, r->min_chars, r->min_words};
    cc_wordrep_result res;
    if (!cc_word_repeat(t, ring, chars, &p, &res)) return 0;
    f->period = res.period;
    f->repeats = res.repeats;
    f->total = res.total;
    memcpy(f->cps, res.line, res.line_chars * sizeof *f->cps);
    f->ncps = res.line_chars;
    return 1;
}

/* ------------------------------------------------------------------ segment rules' state -- */

cc_segscan *eng_view_seg(cc_watcher *w, int vi) {
    view *v = &w->v[vi];
    /* the common call: every rule checked at one point after the first finds the scan done */
    if (v->seg && v->seg->scanned == v->chars) return v->seg;
    const viewplan *vp = &w->rs->views[vi];
    if (!v->seg) {
        v->seg = cc_segscan_new(vp->seg_cap, vp->word_cap, w->rs->opt.mask_fences);
        if (v->seg && vp->tail_cap && !(v->seg->tail = cc_wordtail_new(vp->tail_cap))) {
            cc_segscan_free(v->seg);
            v->seg = NULL;
        }
        if (!v->seg) {
            w->oom = 1;
            return NULL;
        }
    }
    if (v->ring.lo) cc_segscan_scan(v->seg, &v->ring, v->chars, w->rs->opt.mask_fences);
    return v->seg;
}

/* The view's scanner brought up to date: the common call (every rule checked at one point after
 * the first) finds it so already and stays inline. */
static inline cc_segscan *view_seg(cc_watcher *w, view *v) {
    cc_segscan *s = v->seg;
    if (s && s->scanned == v->chars) return s;
    return eng_view_seg(w, (int)(v - w->v));
}

void eng_blocks_at_newline(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    /* what eng_check_rule would do for each BlockRepeat rule, with the view scanned once and a
     * rule skipped before the call when it has fired for good or no segment was kept since its
     * previous check (most newlines of prose) */
    cc_segscan *s = NULL;
    for (uint32_t k = 0; k < vp->nblock; k++) {
        uint32_t ri = vp->blocks[k];
        if (w->rs->rules[ri].once && w->fired[ri]) continue;
        if (!s && !(s = view_seg(w, v))) return;
        if (w->seen[ri] != s->seg_serial) eng_check_rule(w, ri, v, pos);
    }
}

void eng_throttle(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    /* eng_check_rule for each rule whose point has come, minus the calls that would return at
     * once: a rule that fired for good is neither checked nor waited for, and a segment rule
     * whose scanner kept nothing new for it since its previous check is not called (the scan
     * runs once per point, for the first segment rule). The rules of one every_bytes are a
     * group (ruleset.c: group_windowed) with one next point, in w->next of its first rule: one
     * test skips a group whose point has not come, and a group whose rules all fired for good
     * is not waited for any more. */
    const cc_rule_spec *rules = w->rs->rules;
    const uint32_t *wi = vp->windowed;
    const uint64_t bytes = v->bytes;
    uint64_t nmin = UINT64_MAX;
    for (uint32_t k = 0, end; k < vp->nwindowed; k = end) {
        end = vp->wend[k];
        const uint32_t lead = wi[k];
        uint64_t next = w->next[lead];
        if (bytes >= next) {
            /* the next multiple of every_bytes above bytes (next is one: no division when the
             * point comes one interval later, as it does for short deltas) */
            const uint64_t every = rules[lead].every_bytes;
            next += every;
            if (next <= bytes) next = (bytes / every + 1) * every;
            int live = 0;
            for (uint32_t j = k; j < end; j++) {
                const uint32_t ri = wi[j];
                const cc_rule_spec *r = &rules[ri];
                if (r->once && w->fired[ri]) continue;
                int skip = 0;
                if (r->kind == CC_K_BLOCK_REPEAT || r->kind == CC_K_VOCAB_COLLAPSE ||
                    r->kind == CC_K_SEGMENT_REPEAT || r->kind == CC_K_WORD_REPEAT) {
                    const cc_segscan *s = view_seg(w, v);
                    /* what eng_check_rule would return at once for (SegmentRepeat may ask to
                     * wait for more segments: a hit needs them) */
                    skip = s && (r->kind == CC_K_SEGMENT_REPEAT ? s->seg_serial <= w->seen[ri]
                                 : r->kind == CC_K_VOCAB_COLLAPSE ? s->word_serial <= w->seen[ri]
                                 : r->kind == CC_K_WORD_REPEAT ? w->seen[ri] == s->tail->serial
                                 : w->seen[ri] == s->seg_serial);
                }
                if (!skip) {
                    eng_check_rule(w, ri, v, pos);
                    if (r->once && w->fired[ri]) continue;
                }
                live = 1;
            }
            if (!live) next = UINT64_MAX;
            w->next[lead] = next;
        }
        if (next < nmin) nmin = next;
    }
    v->next_check = nmin;
}

/* --------------------------------------------------------------------------- the hit -- */

/* The hit's text: the lines concatenated (with their lengths when more than one may be), or the
 * code points encoded. Returns -1 when out of memory. */
static int finding_text(cc_hit *h, const eng_finding *f, int parts) {
    if (f->line || f->nlines) {
        const cc_entry *const *lines = f->line ? &f->line : f->lines;
        uint32_t n = f->line ? 1 : f->nlines, len = 0;
        for (uint32_t i = 0; i < n; i++) len += cc_entry_nbytes(lines[i]);
        h->text = malloc(len ? len : 1);
        if (parts) h->part_len = malloc(n * sizeof *h->part_len);
        if (!h->text || (parts && !h->part_len)) return -1;
        uint32_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t nb = cc_entry_nbytes(lines[i]);
            memcpy(h->text + at, cc_entry_bytes(lines[i]), nb);
            at += nb;
            if (parts) h->part_len[i] = nb;
        }
        h->text_len = len;
        if (parts) h->nparts = n;
    } else if (f->ncps) {
        unsigned char buf[CC_EVIDENCE_CHARS * 4];
        uint32_t len = 0;
        for (uint32_t i = 0; i < f->ncps; i++) len += cc_utf8_encode(f->cps[i], buf + len);
        h->text = malloc(len ? len : 1);
        if (!h->text) return -1;
        memcpy(h->text, buf, len);
        h->text_len = len;
    }
    return 0;
}

void eng_check_rule(cc_watcher *w, uint32_t ri, view *v, uint64_t pos) {
    const cc_rule_spec *r = &w->rs->rules[ri];
    if (r->once && w->fired[ri]) return;
    eng_finding f; /* the evidence arrays are filled only as far as the counts say */
    int found;
    f.count = f.total = f.run = f.period = f.repeats = 0;
    f.ratio = 0.0;
    f.line = NULL;
    f.nlines = f.ncps = 0;
    switch (r->kind) {
    case CC_K_LINE_REPEAT: found = eng_detect_line_repeat(v->win, r, &f); break;
    case CC_K_LINE_CYCLE: found = eng_detect_line_cycle(v->win, r, &f); break;
    case CC_K_FILLER_LINES: found = eng_detect_filler_lines(v->win, r, &f); break;
    case CC_K_PREFIX_MONOTONY: found = eng_detect_prefix_monotony(v->win, r, &f); break;
    case CC_K_TAIL_REPEAT: {
        /* inside code fences too (masking hides code from the line rules), but there a unit
         * of lines is left to BlockRepeat: the view tracks fences for it (ruleset.c) */
        uint64_t avail = v->chars - v->barrier;
        if (avail > v->ring.cap) avail = v->ring.cap;
        int fenced = w->rs->opt.mask_fences && v->fence_inside;
        found = eng_detect_tail_repeat(&v->ring, (uint32_t)avail, fenced, r, &f);
        break;
    }
    case CC_K_STRUCTURE_FLOOD: {
        uint64_t avail = v->chars - v->barrier;
        if (avail > v->ring.cap) avail = v->ring.cap;
        found = eng_detect_structure_flood(&v->ring, (uint32_t)avail, r, &f);
        break;
    }
    case CC_K_BLOCK_REPEAT:
    case CC_K_SEGMENT_REPEAT:
    case CC_K_VOCAB_COLLAPSE: {
        /* checked only when the view's scanner kept a segment (word) since the rule's previous
         * check: the serial it saw is in w->seen */
        cc_segscan *s = view_seg(w, v);
        if (!s) return;
        uint64_t serial = r->kind == CC_K_VOCAB_COLLAPSE ? s->word_serial : s->seg_serial;
        /* (SegmentRepeat and VocabCollapse may ask to wait for more segments or words: a hit
         * needs them) */
        if (r->kind != CC_K_BLOCK_REPEAT ? serial <= w->seen[ri] : w->seen[ri] == serial)
            return;
        w->seen[ri] = serial;
        found = r->kind == CC_K_BLOCK_REPEAT ? eng_detect_block_repeat(s, &v->ring, v->chars, r, &f)
                : r->kind == CC_K_SEGMENT_REPEAT
                    ? eng_detect_segment_repeat(s, &v->ring, v->chars, r, &f, &w->seen[ri])
                    : eng_detect_vocab_collapse(s, &v->ring, v->chars, r, &f, &w->seen[ri]);
        break;
    }
    case CC_K_WORD_REPEAT: {
        /* checked only when the view kept a word since the rule's previous check */
        cc_segscan *s = view_seg(w, v);
        if (!s) return;
        if (w->seen[ri] == s->tail->serial) return;
        w->seen[ri] = s->tail->serial;
        found = eng_detect_word_repeat(s->tail, &v->ring, v->chars, r, &f);
        break;
    }
    default: return;
    }
    if (found < 0) w->oom = 1;
    if (found <= 0) return;
    cc_hit *h = new_hit(w, ri, v->chars, pos);
    if (!h) return;
    mark_fired(w, ri);
    h->count = f.count;
    h->total = f.total;
    h->ratio = f.ratio;
    h->run = f.run;
    h->period = f.period;
    h->repeats = f.repeats;
    if (finding_text(h, &f, r->kind == CC_K_LINE_CYCLE) != 0) w->oom = 1;
}
