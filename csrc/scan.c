/* The per-character work: pending lines and code fences, quote state, phrase matches, and the
 * specialised loops that run them over a delta. Kept in one unit so the hot loops inline their
 * helpers exactly as they were written; rare events (a match, a line end, a throttle point) go
 * out of line. */
#include "engine_impl.h"

/* --------------------------------------------------------------------- lines and quotes -- */

/* Append cp to the pending line: the hash through it, its evidence slot (the scratch slot once
 * the buffer is full), and, past a non-space (`sp` = 0), the committed hash and length.
 * Branch-free; every line loop goes through it. */
HOT_INLINE void line_append(uint32_t *buf, uint64_t *h, uint64_t *hc, uint32_t *n, uint32_t *nc,
                            uint32_t cp, uint32_t sp) {
    *h = (*h ^ cp) * FNV_PRIME;
    buf[*n < CC_EVIDENCE_CHARS ? *n : CC_EVIDENCE_CHARS] = cp;
    (*n)++;
    *hc = sp ? *hc : *h;
    *nc = sp ? *nc : *n;
}


/* Run the view's windowed rules whose throttle point has come; find the next one. */
static void throttle(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    eng_throttle(w, vp, v, pos);
}

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
        int word = 0;
        for (uint32_t i = 0; i < n && !word; i++) word = cc_is_word(v->buf[i]);
        if (!word) { /* a structure line (border, divider, blank art) never counts */
            builder_reset(w->rs, v);
            return;
        }
        uint32_t npfx = vp->pfx_max < n ? vp->pfx_max : n;
        unsigned flags = 0;
        for (uint32_t i = 0; i < npfx && !flags; i++)
            if (cc_u32_in(vp->pfx_set, vp->npfx, v->buf[i])) flags = CC_LINE_PREFIX;
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

/* A character after a phrase occurrence, before the phrases ending at it: separators,
 * whitespace and quotes extend the gap; anything else ends it at this character's offset. */
static void gap_step(view *v, uint32_t cp, uint64_t offset) {
    if (is_separator(cp)) v->gap_seps++;
    else if (!cc_space_bit(cp) && !cc_is_quote(cp)) {
        v->gap_end = offset;
        v->in_gap = 0;
    }
}

static void resolve_quoted(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    int list_line = v->list_line;
    for (uint32_t k = 0; k < vp->nsuppress; k++) {
        uint32_t ri = vp->suppress[k];
        candidate *c = &w->cand[ri];
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

void eng_line_end(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
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
        if (r->suppress_quoted) {
            candidate *c = &w->cand[ri];
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
 * (cc_automaton_is_match(v->state[k]) for at least one k). */
static void phrases_matched(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos) {
    if (vp->quotes) {
        /* one occurrence per end position: it makes the line a list line when one of its
         * phrases starts where the gap (with a separator) after the previous one ended */
        if (v->after_occ && v->gap_seps && v->gap_end != UINT64_MAX) {
            for (int k = 0; k < vp->nac && !v->list_line; k++) {
                const cc_automaton *a = vp->live_ac[k];
                if (!cc_automaton_is_match(v->state[k])) continue;
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
        if (cc_automaton_is_match(v->state[k])) on_match(w, v, a, v->state[k], pos);
    }
}

/* ------------------------------------------------------------------------- the loop -- */

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

static inline uint32_t load_cp(const void *data, int kind, size_t i) {
    if (kind == 1) return ((const uint8_t *)data)[i];
    if (kind == 2) return ((const uint16_t *)data)[i];
    return ((const uint32_t *)data)[i];
}

/* What the general loop does: PH = match phrases (automata, quote state); LN = keep lines, the
 * text ring and throttled checks. */
enum { LOOP_PH = 1, LOOP_LN = 2 };

/* One view over one delta. The hot state lives in locals; the rare events (a phrase match, the
 * end of a line, a throttle point) write it back, do their work on the view and read it again. */
HOT_INLINE void run_view(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                         size_t len, const int kind, const int shape) {
    const int ph = shape & LOOP_PH, ln = shape & LOOP_LN;
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
            if (rlo) rpos = cc_ring_store(rlo, rhi, rpos, rcap, cp, kind == 4 || rhi);
        }
        if (quotes && v->in_gap) gap_step(v, cp, chars0 + i);
        if (nac) {
            int hit;
            s0 = cc_automaton_step(a0, s0, cp);
            hit = cc_automaton_is_match(s0);
            if (nac > 1) {
                const cc_automaton *a1 = vp->live_ac[1];
                v->state[1] = cc_automaton_step(a1, v->state[1], cp);
                hit |= cc_automaton_is_match(v->state[1]);
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
            eng_line_end(w, vp, v, (uint64_t)i + 1);
            if (vp->nblock) {
                if (ln) v->ring.pos = rpos; /* the check reads the ring */
                eng_blocks_at_newline(w, vp, v, (uint64_t)i + 1);
            }
            if (builder) {
                h_all = v->h_all, h_commit = v->h_commit;
                len_all = v->len_all, len_commit = v->len_commit;
                fencing = v->fence_st != FENCE_NO;
            }
        } else {
            if (quotes && cc_is_quote(cp)) quote_update(v, cp);
            if (builder) {
                int sp = (int)cc_space_bit(cp);
                if (!sp || len_all) {
                    if (fencing && !sp) {
                        fence_step(v, cp, len_all == 0, len_all > len_commit);
                        fencing = v->fence_st != FENCE_NO;
                    }
                    line_append(buf, &h_all, &h_commit, &len_all, &len_commit, cp, (uint32_t)sp);
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
    if (cc_automaton_is_match(s)) {
        uint64_t end = v->chars;
        v->chars = at;
        phrases_matched(w, vp, v, pos);
        v->chars = end;
    }
    if (cp == '\n') eng_line_end(w, vp, v, pos);
    else if (vp->quotes && cc_is_quote(cp)) quote_update(v, cp);
}

/* A view that only matches phrases with one automaton (no lines, ring or throttle): the
 * reasoning view of the default rules. With RING, the combined view of the same delta keeps
 * only the evidence ring (no throttled rules there) and is filled in the same loop, so a short
 * delta pays for one loop exit, not two. The fast loop keeps nothing live across a call: it
 * stops before a character that needs more (a match, a line end or quote mark with
 * suppress_quoted, the gap after a match), which ph_event handles. */
/* The fast loop of a phrase view from i on: plain steps only (no match, no special class), the
 * combined view's ring filled on the way when `ring`. Returns where it stopped (len, or the
 * character that needs ph_event: the state stays before it). */
HOT_INLINE size_t phrases_fast(const cc_automaton *a, view *v, view *vc, const void *data,
                               size_t i, size_t len, const int kind, const int ring,
                               const int wide) {
    const uint32_t *pages = a->pages;
    const uint16_t *pcls = a->page_cls;
    const uint16_t *dense = a->dense;
    const uint32_t nd = a->ndense, ncls = a->nclasses;
    uint16_t *rlo = ring ? vc->ring.lo : NULL;
    uint8_t *rhi = ring ? vc->ring.hi : NULL;
    uint32_t rpos = ring ? vc->ring.pos : 0;
    const uint32_t rcap = ring ? vc->ring.cap : 0;
    uint32_t s = v->state[0] & CC_AC_ID;
    for (; i < len; i++) {
        uint32_t cp = load_cp(data, kind, i);
        uint32_t c = kind == 4 ? cc_automaton_class(a, cp) : pcls[pages[cp >> 8] + (cp & 0xFF)];
        uint32_t t;
        if (LIKELY(s < nd)) {
            /* a dense state: one 16-bit load; below nd, a dense state without outputs (not a
             * special class's target either: those go through the exits) */
            t = dense[s * ncls + c];
            if (UNLIKELY(t >= nd)) {
                t = a->exits[t - nd];
                if (cc_automaton_is_match(t) | (c >= a->special_base)) break;
            }
        } else {
            t = cc_automaton_sparse_next(a, s, c);
            if (cc_automaton_is_match(t) | (c >= a->special_base)) break;
        }
        s = t;
        if (ring) rpos = cc_ring_store(rlo, rhi, rpos, rcap, cp, wide);
    }
    v->state[0] = s;
    if (ring) vc->ring.pos = rpos;
    return i;
}

/* The rest of a delta (its characters from i on; the counts are already advanced) once the fast
 * loop has stopped or cannot run: each character that needs more goes through ph_event, the
 * stretches between through the fast loop. Out of line, so the fast path keeps its registers. */
HOT_INLINE void phrases_rest(cc_watcher *w, const viewplan *vp, view *v, view *vc,
                             const void *data, size_t len, size_t i, const int kind,
                             const int ring, const int wide) {
    const uint64_t end = v->chars;
    while (i < len) {
        if (!v->live_phrase_rules) {
            /* every phrase rule of the view has fired for good: nothing here can fire any more;
             * the rest only enters the ring */
            for (; ring && i < len; i++) cc_ring_put(&vc->ring, load_cp(data, kind, i));
            return;
        }
        if (!v->in_gap) {
            i = phrases_fast(vp->live_ac[0], v, vc, data, i, len, kind, ring, wide);
            if (i == len) return;
        }
        uint32_t cp = load_cp(data, kind, i);
        if (ring) cc_ring_put(&vc->ring, cp);
        ph_event(w, vp, v, cp, end - len + i + 1, (uint64_t)i + 1);
        i++;
    }
}

/* phrases_rest specialised per (kind, ring, wide), each its own out-of-line function */
#define DEFINE_PHRASES_REST(K, R, W)                                                           \
    NOINLINE void phrases_rest_##K##R##W(cc_watcher *w, const viewplan *vp, view *v, view *vc, \
                                         const void *data, size_t len, size_t i) {             \
        phrases_rest(w, vp, v, vc, data, len, i, K, R, W);                                     \
    }
DEFINE_PHRASES_REST(1, 0, 0)
DEFINE_PHRASES_REST(2, 0, 0)
DEFINE_PHRASES_REST(4, 0, 0)
DEFINE_PHRASES_REST(1, 1, 0)
DEFINE_PHRASES_REST(2, 1, 0)
DEFINE_PHRASES_REST(1, 1, 1)
DEFINE_PHRASES_REST(2, 1, 1)
DEFINE_PHRASES_REST(4, 1, 1)
#undef DEFINE_PHRASES_REST

HOT_INLINE void run_phrases_ring(cc_watcher *w, const viewplan *vp, view *v, view *vc,
                                 const void *data, size_t len, const int kind, const int ring,
                                 const int wide) {
    v->chars += len;
    if (ring) vc->chars += len;
    size_t i = 0;
    if (LIKELY(v->live_phrase_rules && !v->in_gap)) {
        i = phrases_fast(vp->live_ac[0], v, vc, data, 0, len, kind, ring, wide);
        if (LIKELY(i == len)) return;
    }
    /* constants in every specialisation: one call remains */
    if (!ring) {
        if (kind == 1) phrases_rest_100(w, vp, v, vc, data, len, i);
        else if (kind == 2) phrases_rest_200(w, vp, v, vc, data, len, i);
        else phrases_rest_400(w, vp, v, vc, data, len, i);
    } else if (kind == 4) {
        phrases_rest_411(w, vp, v, vc, data, len, i);
    } else if (kind == 1) {
        if (wide) phrases_rest_111(w, vp, v, vc, data, len, i);
        else phrases_rest_110(w, vp, v, vc, data, len, i);
    } else {
        if (wide) phrases_rest_211(w, vp, v, vc, data, len, i);
        else phrases_rest_210(w, vp, v, vc, data, len, i);
    }
}

HOT_INLINE void run_phrases(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                            size_t len, const int kind) {
    run_phrases_ring(w, vp, v, NULL, data, len, kind, 0, 0);
}


/* The builder's work for a character that is not '\n' at the start of a line (leading
 * whitespace, the first character) or on a line that may still be a code fence. */
static void builder_slow(view *v, uint32_t cp) {
    int sp = (int)cc_space_bit(cp);
    if (sp && !v->len_all) return;
    if (!sp && v->fence_st != FENCE_NO)
        fence_step(v, cp, v->len_all == 0, v->len_all > v->len_commit);
    line_append(v->buf, &v->h_all, &v->h_commit, &v->len_all, &v->len_commit, cp, (uint32_t)sp);
}

/* A character of a line view that the fast loop leaves to this general path: a line end, the
 * start of a line or a possible fence line, a throttle point. */
static void ln_event(cc_watcher *w, const viewplan *vp, view *v, uint32_t cp, uint64_t at,
                     uint64_t pos) {
    if (vp->nwindowed) v->bytes += cc_utf8_len(cp);
    if (v->ring.lo) cc_ring_put(&v->ring, cp);
    uint64_t end = v->chars;
    v->chars = at;
    if (vp->builder) {
        if (cp == '\n') {
            eng_line_end(w, vp, v, pos);
            if (vp->nblock) eng_blocks_at_newline(w, vp, v, pos);
        } else {
            builder_slow(v, cp);
        }
    }
    if (v->bytes >= v->next_check) throttle(w, vp, v, pos);
    v->chars = end;
}

/* The shortest call of the line loop that feeds the segment scanner in place
 * (run_lines_feed): a delta of a few characters (Watcher.feed) does not pay for the stops and
 * catch-ups, which a batch of replay (thousands of characters) does. */
#define FEED_MIN_CHARS 64

/* One pass of the line loop of run_lines_feed from i: ring, pending line and byte count, up to
 * the end of the delta or the character that needs more (returned). `lag`: the scanner lags
 * (it exists, but this pass does not feed it), and every letter needs more: the scanner catches
 * up there and may be fed in place again. */
HOT_INLINE size_t lines_pass(const void *data, size_t i, size_t len, const int kind,
                             const int wide, const int builder, const int lag, uint16_t *rlo,
                             uint8_t *rhi,
                             uint32_t *rpos_io, uint32_t rcap, int64_t *left_io, int normal,
                             uint32_t *buf, uint64_t *h, uint64_t *hc, uint32_t *n,
                             uint32_t *nc) {
    uint32_t rpos = *rpos_io;
    int64_t left = *left_io;
    for (; i < len; i++) {
        uint32_t cp = load_cp(data, kind, i);
        int nb = kind == 4 ? (int)cc_utf8_len(cp) : utf8_len_bmp[cp >> 7];
        int letter = lag && (kind == 1 ? (cp < 0x80 ? cc_ascii_letter_fold[cp] : 0)
                                       : cc_seg_letter(cp)) != 0;
        if (builder ? (cp == '\n') | !normal | (left <= nb) | letter : (left <= nb) | letter)
            break;
        left -= nb;
        rpos = cc_ring_store(rlo, rhi, rpos, rcap, cp, wide);
        if (builder) line_append(buf, h, hc, n, nc, cp, cc_space_bit(cp));
    }
    *rpos_io = rpos;
    *left_io = left;
    return i;
}

/* The inverses of the two FNV primes (mod 2^64, 2^32): one step of a hash undone, to get the
 * committed hash back where a space follows a letter without keeping the previous one live. */
#define FNV_PRIME_INV 0xce965057aff6957bULL
#define H32_PRIME_INV 0x359c449bu

/* One pass of the line loop from i that feeds the segment scanner in place as well (it is in
 * CC_SEG_RUN or CC_SEG_GAP, has cut everything before i, and the line is past its start and
 * cannot be a fence: segments.h): letters and spaces only, each moving the ring, the pending
 * line, the byte count and the scanner at once. Stops before any other character, a throttle
 * point, the end of the ring's storage or of the delta (returned). The two states are two
 * loops (the state is where the code runs, not a variable). */
HOT_INLINE size_t feed_pass(view *v, cc_segscan *sg, const void *data, size_t i, size_t len,
                            const int kind, const int wide, const int builder, int64_t *left_io,
                            uint64_t base, int mask) {
    const size_t i0 = i;
    const uint32_t rpos0 = v->ring.pos;
    const size_t room = v->ring.cap - rpos0; /* the pass does not wrap the ring */
    const size_t stop = len - i0 < room ? len - i0 : room;
    uint16_t *const lo = v->ring.lo + rpos0;
    uint8_t *const hi = wide ? v->ring.hi + rpos0 : NULL;
    int64_t left = *left_io;
    /* the pending line: its evidence slots left and its hash (the committed hash and length
     * are written back where a space follows a letter, and at the end) */
    const uint32_t n0 = builder ? v->len_all : 0;
    const size_t nbuf = builder && n0 < CC_EVIDENCE_CHARS ? CC_EVIDENCE_CHARS - n0 : 0;
    uint32_t *const bufp = v->buf + (nbuf ? n0 : 0);
    uint64_t h = builder ? v->h_all : 0;
    /* the scanner: the exact, skeleton and word hashes; where the pending word started, minus
     * the letters it had before the pass */
    uint32_t he = sg->he_all, hs = sg->hs, hw = sg->hw, spaces = 0;
    ptrdiff_t word_from = -(ptrdiff_t)sg->w_letters;
    int in_gap = cc_segscan_mode(sg) == CC_SEG_GAP;
    size_t k = 0;
    uint32_t cp, f;
    int nb;
    /* the character at k: its folded letter (0: not a letter) and UTF-8 length; a character
     * that is neither a letter nor a space ends the pass */
#define FEED_NEXT()                                                                            \
    do {                                                                                       \
        if (k == stop) goto done;                                                              \
        cp = load_cp(data, kind, i0 + k);                                                      \
        if (cp < 0x80) {                                                                       \
            f = cc_ascii_letter_fold[cp];                                                      \
            nb = 1;                                                                            \
        } else if (kind == 1) {                                                                \
            goto done;                                                                         \
        } else {                                                                               \
            f = cc_seg_letter(cp);                                                             \
            nb = kind == 4 && cp >= 0x10000 ? 4 : 3; /* (a letter is from U+3040 up) */       \
        }                                                                                      \
        if (!f && cp != ' ') goto done;                                                        \
        if (left <= nb) goto done;                                                             \
        left -= nb;                                                                            \
        lo[k] = (uint16_t)cp;                                                                  \
        if (wide) hi[k] = (uint8_t)(cp >> 16);                                                 \
        if (builder) {                                                                         \
            h = (h ^ cp) * FNV_PRIME;                                                          \
            if (k < nbuf) bufp[k] = cp;                                                        \
        }                                                                                      \
        he = cc_h32(he, cp);                                                                   \
    } while (0)
    if (in_gap) goto gap;
run: /* CC_SEG_RUN: after a letter */
    for (;;) {
        FEED_NEXT();
        if (UNLIKELY(!f)) {
            /* a space after a letter: the line and the segment commit through the letter (the
             * hashes before this space), and the word ends */
            if (builder) {
                v->h_commit = (h * FNV_PRIME_INV) ^ ' ';
                v->len_commit = n0 + (uint32_t)k;
            }
            sg->he_commit = (he * H32_PRIME_INV) ^ ' ';
            ptrdiff_t nl = (ptrdiff_t)k - word_from;
            sg->hw = hw;
            sg->w_letters = (uint8_t)(nl >= 2 ? 2 : nl);
            cc_segscan_keep_word(sg, mask);
            spaces++;
            k++;
            in_gap = 1;
            goto gap;
        }
        hs = cc_h32(hs, f);
        hw = cc_h32(hw, f);
        k++;
    }
gap: /* CC_SEG_GAP: after spaces that follow a letter */
    for (;;) {
        FEED_NEXT();
        if (LIKELY(f)) {
            /* the letter after spaces: the skeleton takes the pending space; a word starts */
            hs = cc_h32(cc_h32(hs, ' '), f);
            hw = cc_h32(CC_H32_OFFSET, f);
            word_from = (ptrdiff_t)k;
            sg->word_start = base + i0 + k;
            sg->word_gap = sg->gap_mark; /* (a list separator before the spaces) */
            sg->gap_mark = 0;
            k++;
            in_gap = 0;
            goto run;
        }
        spaces++;
        k++;
    }
#undef FEED_NEXT
done:
    *left_io = left;
    v->ring.pos = rpos0 + (uint32_t)k == v->ring.cap ? 0 : rpos0 + (uint32_t)k;
    if (builder) {
        v->h_all = h;
        v->len_all = n0 + (uint32_t)k;
        if (!in_gap) v->h_commit = h, v->len_commit = n0 + (uint32_t)k;
    }
    /* what cc_segscan_scan would have left after these characters */
    sg->he_all = he;
    if (!in_gap) sg->he_commit = he;
    sg->hs = hs;
    sg->hw = hw;
    sg->raw += (uint32_t)k;
    sg->tail_gap += (uint32_t)k;
    sg->letters += (uint32_t)k - spaces;
    sg->scanned = base + i0 + k;
    sg->in_word = (uint8_t)!in_gap;
    sg->pend_space = (uint8_t)in_gap;
    sg->line_gap = (uint8_t)in_gap;
    if (!in_gap) {
        ptrdiff_t nl = (ptrdiff_t)k - word_from;
        sg->w_letters = (uint8_t)(nl >= 2 ? 2 : nl);
    }
    return i0 + k;
}

/* run_lines over a long call (a batch of replay) once the view's scanner keeps segments and
 * words (BlockRepeat or SegmentRepeat, and VocabCollapse): the scanner is kept up to date in
 * the loop instead of reading every character back from the ring at the next check. Letters
 * and spaces of a run or a gap go through feed_pass, any other character through the scanner's
 * general step (cc_segscan_step) one at a time. A scanner that lags at the start of the call
 * (short calls before it leave the scan to the checks) catches up at the next letter; before
 * the first check there is no scanner and the pass is the plain one. */
HOT_INLINE void run_lines_feed(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                               size_t len, const int kind, const int wide, const int builder) {
    const uint64_t end = v->chars + len, base = end - len;
    v->chars = end;
    const int counted = vp->nwindowed != 0; /* bytes only matter to throttled rules */
    const int mask = w->rs->opt.mask_fences;
    size_t i = 0;
    while (i < len) {
        /* bytes left before the next throttle point */
        const int64_t left0 = counted && v->next_check != UINT64_MAX
                                  ? (int64_t)(v->next_check - v->bytes) : INT64_MAX;
        int64_t left = left0;
        cc_segscan *sg = v->seg;
        /* the scanner is fed in place from a run or a gap, on a line that is past its start
         * and cannot be a fence any more */
        if (sg && sg->scanned == base + i && cc_segscan_mode(sg) != CC_SEG_LAG &&
            (!builder || (v->len_all && v->fence_st == FENCE_NO))) {
            i = feed_pass(v, sg, data, i, len, kind, wide, builder, &left, base, mask);
            if (i == len) {
                if (counted) v->bytes += (uint64_t)(left0 - left);
                return;
            }
        }
        if (sg && sg->scanned == base + i) {
            /* the scanner is up to date and the character is not one of a run or a gap: the
             * scanner's general step takes it here, with the line's work, instead of the plain
             * pass lagging to the next letter and the scanner catching up there */
            const uint32_t cp = load_cp(data, kind, i);
            const int nb = kind == 4 ? (int)cc_utf8_len(cp) : utf8_len_bmp[cp >> 7];
            if (left > nb && (!builder || (cp != '\n' && v->len_all && v->fence_st == FENCE_NO))) {
                left -= nb;
                if (counted) v->bytes += (uint64_t)(left0 - left);
                v->ring.pos = cc_ring_store(v->ring.lo, v->ring.hi, v->ring.pos, v->ring.cap, cp,
                                            wide);
                if (builder)
                    line_append(v->buf, &v->h_all, &v->h_commit, &v->len_all, &v->len_commit,
                                cp, cc_space_bit(cp));
                cc_segscan_step(sg, cp, mask);
            } else {
                /* a line end, a line start, a possible fence or a throttle point: the scanner
                 * takes the character first, so that the checks there find it up to date (no
                 * catch-up from the ring for one character) */
                if (counted) v->bytes += (uint64_t)(left0 - left);
                cc_segscan_step(sg, cp, mask);
                ln_event(w, vp, v, cp, base + i + 1, (uint64_t)i + 1);
            }
            i++;
            continue;
        }
        /* a scanner that lags (behind from short calls before) or none yet: the plain pass */
        uint32_t rpos = v->ring.pos;
        uint64_t h = 0, hc = 0;
        uint32_t n = 0, nc = 0;
        int normal = 0;
        if (builder) {
            h = v->h_all, hc = v->h_commit, n = v->len_all, nc = v->len_commit;
            normal = n && v->fence_st == FENCE_NO;
        }
#define LINES_PASS(LAG)                                                                        \
    lines_pass(data, i, len, kind, wide, builder, LAG, v->ring.lo, v->ring.hi, &rpos, v->ring.cap, \
               &left, normal, v->buf, &h, &hc, &n, &nc)
        /* (before the first check there is no scanner yet: the pass is the plain one) */
        i = sg ? LINES_PASS(1) : LINES_PASS(0);
#undef LINES_PASS
        if (counted) v->bytes += (uint64_t)(left0 - left);
        v->ring.pos = rpos;
        if (builder) v->h_all = h, v->h_commit = hc, v->len_all = n, v->len_commit = nc;
        if (i == len) return;
        const uint64_t at = base + i + 1;
        ln_event(w, vp, v, load_cp(data, kind, i), at, (uint64_t)i + 1);
        if (sg && v->seg->scanned != at) {
            /* the scanner catches up here (the character is in the ring now) */
            v->chars = at;
            eng_view_seg(w, (int)(v - w->v));
            v->chars = end;
        }
        i++;
    }
}

/* run_lines_feed specialised per (kind, wide, builder), each its own out-of-line function */
#define DEFINE_RUN_LINES_FEED(K, W, B)                                                         \
    NOINLINE void run_lines_feed_##K##W##B(cc_watcher *w, const viewplan *vp, view *v,         \
                                           const void *data, size_t len) {                     \
        run_lines_feed(w, vp, v, data, len, K, W, B);                                          \
    }
DEFINE_RUN_LINES_FEED(1, 0, 0)
DEFINE_RUN_LINES_FEED(2, 0, 0)
DEFINE_RUN_LINES_FEED(1, 1, 0)
DEFINE_RUN_LINES_FEED(2, 1, 0)
DEFINE_RUN_LINES_FEED(4, 1, 0)
DEFINE_RUN_LINES_FEED(1, 0, 1)
DEFINE_RUN_LINES_FEED(2, 0, 1)
DEFINE_RUN_LINES_FEED(1, 1, 1)
DEFINE_RUN_LINES_FEED(2, 1, 1)
DEFINE_RUN_LINES_FEED(4, 1, 1)
#undef DEFINE_RUN_LINES_FEED

/* A view that keeps lines (and maybe the ring and throttled checks) but matches no phrases:
 * the combined view of the default rules. `wide`: the ring keeps high bits; `builder`: the view
 * keeps lines (else it has only the ring). As run_phrases, the fast loop stops before a
 * character that needs more, which ln_event handles. `batch`: a loop of replay's batches
 * (eng_pair_loops_batch), where a long call whose view has a scanner keeping segments and words
 * goes to run_lines_feed; the loops of Watcher.feed do not even test for it. */
HOT_INLINE void run_lines(cc_watcher *w, const viewplan *vp, view *v, const void *data,
                          size_t len, const int kind, const int wide, const int builder,
                          const int batch) {
    const cc_segscan *sg = v->seg;
    if (batch && UNLIKELY(len >= FEED_MIN_CHARS) && v->ring.lo &&
        (sg ? sg->scap && sg->wcap : vp->seg_cap && vp->word_cap)) {
        /* constants in every specialisation: one call remains */
#define FEED_CALL(K, W)                                                                        \
    (builder ? run_lines_feed_##K##W##1(w, vp, v, data, len)                                   \
             : run_lines_feed_##K##W##0(w, vp, v, data, len))
        if (kind == 4) FEED_CALL(4, 1);
        else if (kind == 1 && wide) FEED_CALL(1, 1);
        else if (kind == 1) FEED_CALL(1, 0);
        else if (wide) FEED_CALL(2, 1);
        else FEED_CALL(2, 0);
#undef FEED_CALL
        return;
    }
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
            if (rlo) rpos = cc_ring_store(rlo, rhi, rpos, rcap, cp, wide);
            if (builder) {
                line_append(buf, &h, &hc, &n, &nc, cp, cc_space_bit(cp));
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

/* ---- one delta, both views ----------------------------------------------------------- */

/* Any shapes: each used view through its own loop (buffers are ready). */
static void pair_generic(cc_watcher *w, int channel, const void *data, size_t len, int kind) {
    for (int k = 0; k < 2; k++) {
        int vi = k ? CC_VIEW_COMBINED : channel;
        const viewplan *vp = &w->rs->views[vi];
        view *v = &w->v[vi];
        if (vp->used) vp->run[v->ring.hi != NULL][kind >> 1](w, vp, v, data, len);
    }
}

/* The common shapes in one function: the channel's view matches phrases with one automaton
 * (ph) or is unused, and the combined view keeps lines or only the ring (builder). */
HOT_INLINE void pair_fused(cc_watcher *w, int ch, const void *d, size_t n, const int kind,
                           const int wide, const int ph, const int builder, const int batch) {
    if (ph) run_phrases(w, &w->rs->views[ch], &w->v[ch], d, n, kind);
    run_lines(w, &w->rs->views[CC_VIEW_COMBINED], &w->v[CC_VIEW_COMBINED], d, n, kind, wide,
              builder, batch);
}

/* ---- the loop tables ----------------------------------------------------------------- */

/* Every loop is specialised per (kind, wide): kind = bytes per code point of the delta (1, 2,
 * 4), wide = the ring keeps high bits (always so for kind 4). The body of each shape is written
 * once below, as VIEW_LOOP_<shape>(K, W) or PAIR_LOOP_<shape>(K, W); the X-macros make one
 * function per (shape, K, W) and the tables ruleset.c picks from. */
#define FOR_KIND_WIDE(X, S) X(S, 1, 0) X(S, 2, 0) X(S, 1, 1) X(S, 2, 1) X(S, 4, 1)

#define VIEW_SHAPES(X) X(VIEW_ALL) X(VIEW_PHRASES) X(VIEW_LINES) X(VIEW_RING)
#define VIEW_LOOP_VIEW_ALL(K, W) run_view(w, vp, v, d, n, K, LOOP_PH | LOOP_LN)
#define VIEW_LOOP_VIEW_PHRASES(K, W) run_phrases(w, vp, v, d, n, K)
#define VIEW_LOOP_VIEW_LINES(K, W) run_lines(w, vp, v, d, n, K, W, 1, 0)
#define VIEW_LOOP_VIEW_RING(K, W) run_lines(w, vp, v, d, n, K, W, 0, 0)

#define PAIR_SHAPES(X) \
    X(PAIR_GENERIC) X(PAIR_PH_LN) X(PAIR_PH_RG) X(PAIR_PH_EV) X(PAIR_LN) X(PAIR_RG)
/* (B: the loop of replay's batches, see run_lines) */
#define PAIR_LOOP_PAIR_GENERIC(K, W, B) pair_generic(w, ch, d, n, K)
#define PAIR_LOOP_PAIR_PH_LN(K, W, B) pair_fused(w, ch, d, n, K, W, 1, 1, B)
#define PAIR_LOOP_PAIR_PH_RG(K, W, B) pair_fused(w, ch, d, n, K, W, 1, 0, B)
#define PAIR_LOOP_PAIR_LN(K, W, B) pair_fused(w, ch, d, n, K, W, 0, 1, B)
#define PAIR_LOOP_PAIR_RG(K, W, B) pair_fused(w, ch, d, n, K, W, 0, 0, B)
#define PAIR_LOOP_PAIR_PH_EV(K, W, B)                                                          \
    run_phrases_ring(w, &w->rs->views[ch], &w->v[ch], &w->v[CC_VIEW_COMBINED], d, n, K, 1, W)

#define DEFINE_VIEW_LOOP(S, K, W)                                                              \
    static void loop_##S##_##K##W(cc_watcher *w, const viewplan *vp, view *v, const void *d,   \
                                  size_t n) {                                                  \
        VIEW_LOOP_##S(K, W);                                                                   \
    }
#define DEFINE_PAIR_LOOP(S, K, W)                                                              \
    static void loop_##S##_##K##W(cc_watcher *w, int ch, const void *d, size_t n) {            \
        PAIR_LOOP_##S(K, W, 0);                                                                \
    }                                                                                          \
    static void loop_B_##S##_##K##W(cc_watcher *w, int ch, const void *d, size_t n) {          \
        PAIR_LOOP_##S(K, W, 1);                                                                \
    }
#define DEFINE_VIEW_LOOPS(S) FOR_KIND_WIDE(DEFINE_VIEW_LOOP, S)
#define DEFINE_PAIR_LOOPS(S) FOR_KIND_WIDE(DEFINE_PAIR_LOOP, S)
VIEW_SHAPES(DEFINE_VIEW_LOOPS)
PAIR_SHAPES(DEFINE_PAIR_LOOPS)

/* [shape][ring has high bits][kind 1, 2, 4] */
#define LOOP_ROW(S)                                                                            \
    [S] = {{loop_##S##_10, loop_##S##_20, loop_##S##_41},                                      \
           {loop_##S##_11, loop_##S##_21, loop_##S##_41}},
const run_fn eng_view_loops[NVIEW_SHAPES][2][3] = {VIEW_SHAPES(LOOP_ROW)};
const pair_fn eng_pair_loops[NPAIR_SHAPES][2][3] = {PAIR_SHAPES(LOOP_ROW)};
#define LOOP_ROW_B(S)                                                                          \
    [S] = {{loop_B_##S##_10, loop_B_##S##_20, loop_B_##S##_41},                                \
           {loop_B_##S##_11, loop_B_##S##_21, loop_B_##S##_41}},
const pair_fn eng_pair_loops_batch[NPAIR_SHAPES][2][3] = {PAIR_SHAPES(LOOP_ROW_B)};
