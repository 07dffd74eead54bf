#include "segments.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

static inline uint32_t h32(uint32_t h, uint32_t cp) { return cc_h32(h, cp); }
static inline uint32_t fold(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }
static inline uint16_t sat16(uint32_t x) { return x > 65535u ? 65535u : (uint16_t)x; }
static inline int is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }
static inline int ascii_end(uint32_t cp) { return cp == '.' || cp == '!' || cp == '?' || cp == ';'; }
static inline int cjk_end(uint32_t cp) {
    return cp == 0x3002 || cp == 0xFF01 || cp == 0xFF1F || cp == 0xFF1B;
}
/* A character that makes the gap between two words a list gap (VocabCollapse). */
static inline int list_separator(uint32_t cp) {
    return cp == ',' || cp == ';' || cp == '|' || cp == '/' || cp == '>' || cp == 0x3001 ||
           cp == 0xFF0C || cp == 0xFF1B || (cp >= 0x2190 && cp <= 0x21FF);
}
static inline int fence_tag(uint32_t cp) {
    return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || is_digit(cp) || cp == '_' ||
           cp == '+' || cp == '-';
}

static void seg_reset(cc_segscan *s) {
    s->he_all = s->he_commit = s->hs = s->hn = s->hf = s->hr = CC_H32_OFFSET;
    s->raw = s->letters = s->digits = s->runs = 0;
    s->fval = 0;
    s->has_letter = s->cjk = 0;
    s->started = s->in_digits = s->pend_space = s->prev_end = s->prev_digit = 0;
}

static void line_reset(cc_segscan *s, int mask_fences) {
    s->fence_st = mask_fences ? FST_START : FST_NO;
    s->fence_k = s->fence_ch = 0;
    s->line_started = s->line_gap = 0;
    s->line_words = 0;
}

cc_segscan *cc_segscan_new(uint32_t scap, uint32_t wcap, int mask_fences) {
    cc_segscan *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->scap = scap;
    s->wcap = wcap;
    if (scap) {
        s->sexact = malloc(scap * sizeof *s->sexact);
        s->sskel = malloc(scap * sizeof *s->sskel);
        s->snum = malloc(scap * sizeof *s->snum);
        s->sgap = malloc(scap * sizeof *s->sgap);
        s->sraw = malloc(scap * sizeof *s->sraw);
        s->sletters = malloc(scap * sizeof *s->sletters);
        s->swide = malloc(scap);
        s->fpe = malloc(2 * (size_t)scap);
        s->fps = malloc(2 * (size_t)scap);
        if (!s->sexact || !s->sskel || !s->snum || !s->sgap || !s->sraw || !s->sletters ||
            !s->swide || !s->fpe || !s->fps)
            goto oom;
    }
    if (wcap) {
        s->words = malloc(wcap * sizeof *s->words);
        if (!s->words) goto oom;
    }
    seg_reset(s);
    line_reset(s, mask_fences);
    return s;
oom:
    cc_segscan_free(s);
    return NULL;
}

void cc_segscan_free(cc_segscan *s) {
    if (!s) return;
    free(s->sexact);
    free(s->sskel);
    free(s->snum);
    free(s->sgap);
    free(s->sraw);
    free(s->sletters);
    free(s->swide);
    free(s->fpe);
    free(s->fps);
    free(s->words);
    cc_wordtail_free(s->tail);
    free(s);
}

static void *dup(const void *p, size_t n) {
    if (!p) return NULL;
    void *q = malloc(n ? n : 1);
    if (q) memcpy(q, p, n);
    return q;
}

cc_segscan *cc_segscan_copy(const cc_segscan *s) {
    cc_segscan *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *s;
    c->sexact = dup(s->sexact, s->scap * sizeof *s->sexact);
    c->sskel = dup(s->sskel, s->scap * sizeof *s->sskel);
    c->snum = dup(s->snum, s->scap * sizeof *s->snum);
    c->sgap = dup(s->sgap, s->scap * sizeof *s->sgap);
    c->sraw = dup(s->sraw, s->scap * sizeof *s->sraw);
    c->sletters = dup(s->sletters, s->scap * sizeof *s->sletters);
    c->swide = dup(s->swide, s->scap);
    c->fpe = dup(s->fpe, 2 * (size_t)s->scap);
    c->fps = dup(s->fps, 2 * (size_t)s->scap);
    c->words = dup(s->words, s->wcap * sizeof *s->words);
    c->tail = s->tail ? cc_wordtail_copy(s->tail) : NULL;
    if ((s->scap && (!c->sexact || !c->sskel || !c->snum || !c->sgap || !c->sraw ||
                     !c->sletters || !c->swide || !c->fpe || !c->fps)) ||
        (s->wcap && !c->words) || (s->tail && !c->tail)) {
        cc_segscan_free(c);
        return NULL;
    }
    return c;
}

size_t cc_segscan_memory(const cc_segscan *s) {
    if (!s) return 0;
    return sizeof *s + (size_t)s->scap * 21 + (size_t)s->wcap * 4 + cc_wordtail_memory(s->tail);
}

static inline uint8_t fingerprint(uint32_t h) { return (uint8_t)(h ^ (h >> 8) ^ (h >> 16) ^ (h >> 24)); }

/* swide bits */
#define SEG_WIDE 1u
#define SEG_FENCED 2u
#define SEG_JUMP 4u
#define SEG_NUMBER 8u

/* The digit run before the current one, when it was not the first: into the numbers hash
 * unless it repeats the first run (a counter written twice, `TypeORM10 | TypeORM10`). */
static inline void later_run(cc_segscan *s) {
    if (s->hr != s->hf) s->hn = h32(s->hn, s->hr);
}

static inline int num_near(uint64_t a, uint64_t b) { return a <= b + 1 && b <= a + 1; }

/* A short segment (fewer than CC_JUMP_LETTERS letters) with a digit run jumps when its first
 * run's value is more than 1 away from the first-run values of both of the last two kept
 * segments that had one (of the one, when only one came before): a list of identifiers (bug
 * numbers, links), not a counter, which moves by 0 or 1 (two apart: a counter line alternating
 * with another numbered line). A sentence around a number that wanders is still a loop. */
static unsigned number_jumps(cc_segscan *s) {
    if (!s->runs) return 0;
    int jump = ((uint64_t)s->letters << s->cjk) < CC_JUMP_LETTERS && s->nprev &&
               !num_near(s->fval, s->prev_num[0]) &&
               (s->nprev < 2 || !num_near(s->fval, s->prev_num[1]));
    s->prev_num[1] = s->prev_num[0];
    s->prev_num[0] = s->fval;
    if (s->nprev < 2) s->nprev++;
    return SEG_NUMBER | (jump ? SEG_JUMP : 0);
}

static void end_segment(cc_segscan *s) {
    if (!s->raw) return;
    if (s->runs >= 2) later_run(s); /* (the last run) */
    if (s->letters + s->digits && s->scap) {
        uint32_t i = s->spos;
        s->sexact[i] = s->he_commit;
        s->sskel[i] = s->hs;
        /* numeric (a data row): near rules then also compare its later numbers */
        s->snum[i] = s->runs >= 3 || (s->runs == 2 && s->letters < CC_NUMERIC_TWO_RUN_LETTERS)
                         ? (uint16_t)((s->hn ^ (s->hn >> 16)) | 1u)
                         : 0;
        s->sgap[i] = sat16(s->tail_gap);
        s->sraw[i] = sat16(s->raw);
        s->sletters[i] = sat16(s->letters);
        s->swide[i] = (uint8_t)(s->cjk | (s->fence_inside ? SEG_FENCED : 0) | number_jumps(s));
        s->spos = i + 1 == s->scap ? 0 : i + 1;
        uint32_t f = s->fpos ? s->fpos - 1 : s->scap - 1;
        s->fpe[f] = s->fpe[f + s->scap] = fingerprint(s->he_commit);
        s->fps[f] = s->fps[f + s->scap] = fingerprint(s->hs);
        s->fpos = f;
        if (s->sn < s->scap) s->sn++;
        s->seg_serial++;
        s->tail_gap = 0;
    }
    seg_reset(s);
}

static inline void end_word(cc_segscan *s, int mask_fences) {
    if (!s->in_word) return;
    s->in_word = 0;
    cc_segscan_keep_word(s, mask_fences);
}

static void fence_char(cc_segscan *s, uint32_t cp) {
    /* cp is not whitespace; the line may still be a fence line */
    if (s->line_started && s->line_gap) {
        s->fence_st = FST_NO;
        return;
    }
    switch (s->fence_st) {
    case FST_START:
        if (cp == '`' || cp == '~') {
            s->fence_st = FST_TICKS;
            s->fence_ch = cp;
            s->fence_k = 1;
        } else {
            s->fence_st = FST_NO;
        }
        break;
    case FST_TICKS:
        if (cp == s->fence_ch) s->fence_k++;
        else if (s->fence_k >= 3 && fence_tag(cp)) s->fence_st = FST_TAG;
        else s->fence_st = FST_NO;
        break;
    case FST_TAG:
        if (!fence_tag(cp)) s->fence_st = FST_NO;
        break;
    default: break;
    }
}

/* Character classes of ASCII for the scan. */
enum { C_SPACE = 1, C_DIGIT = 2, C_WORD = 4, C_END = 8, C_NL = 16 };
static const uint8_t ascii_cls[128] = {
    [0x09] = C_SPACE, [0x0A] = C_SPACE | C_NL, [0x0B] = C_SPACE, [0x0C] = C_SPACE,
    [0x0D] = C_SPACE, [0x1C] = C_SPACE, [0x1D] = C_SPACE, [0x1E] = C_SPACE, [0x1F] = C_SPACE,
    [0x20] = C_SPACE, ['.'] = C_END, ['!'] = C_END, ['?'] = C_END, [';'] = C_END,
    ['0'] = C_DIGIT | C_WORD, ['1'] = C_DIGIT | C_WORD, ['2'] = C_DIGIT | C_WORD,
    ['3'] = C_DIGIT | C_WORD, ['4'] = C_DIGIT | C_WORD, ['5'] = C_DIGIT | C_WORD,
    ['6'] = C_DIGIT | C_WORD, ['7'] = C_DIGIT | C_WORD, ['8'] = C_DIGIT | C_WORD,
    ['9'] = C_DIGIT | C_WORD,
#define W4(a) [a] = C_WORD, [a + 1] = C_WORD, [a + 2] = C_WORD, [a + 3] = C_WORD
    W4('A'), W4('E'), W4('I'), W4('M'), W4('Q'), W4('U'), ['Y'] = C_WORD, ['Z'] = C_WORD,
    W4('a'), W4('e'), W4('i'), W4('m'), W4('q'), W4('u'), ['y'] = C_WORD, ['z'] = C_WORD,
#undef W4
};

/* An ASCII letter folded to lower case, 0 for every other ASCII character: the class test and
 * the folding of the letter-run loop in one load (declared in segments.h: the in-place feed). */
const uint8_t cc_ascii_letter_fold[128] = {
#define F4(a, b) [a] = b, [a + 1] = b + 1, [a + 2] = b + 2, [a + 3] = b + 3
    F4('A', 'a'), F4('E', 'e'), F4('I', 'i'), F4('M', 'm'), F4('Q', 'q'), F4('U', 'u'),
    ['Y'] = 'y', ['Z'] = 'z',
    F4('a', 'a'), F4('e', 'e'), F4('i', 'i'), F4('m', 'm'), F4('q', 'q'), F4('u', 'u'),
    ['y'] = 'y', ['z'] = 'z',
#undef F4
};

/* From U+3040 up every code point is a word character (no space lies there, and the ranges
 * cc_is_word() leaves out end at U+303F): the kana, CJK and Hangul of most non-Latin text are
 * classified by one comparison. */
#define CC_ALL_WORD_FROM 0x3040u

static inline unsigned char_class(uint32_t cp) {
    if (cp < 0x80) return ascii_cls[cp];
    if (cp >= CC_ALL_WORD_FROM) return C_WORD;
    if (cc_is_space(cp)) return C_SPACE;
    return cc_is_word(cp) ? C_WORD : 0;
}

/* A word character that is not an ASCII digit and does not end a segment (letters, CJK). */
static inline int plain_word(uint32_t cp) {
    if (cp < 0x80) return ascii_cls[cp] == C_WORD;
    /* the full-width ends (U+FF01, U+FF1B, U+FF1F) are the only exceptions from U+3040 up */
    if (cp >= CC_ALL_WORD_FROM) return cp < 0xFF01 || !cjk_end(cp);
    return char_class(cp) == C_WORD;
}

#if defined(__GNUC__)
#define SCAN_INLINE static inline __attribute__((always_inline))
#else
#define SCAN_INLINE static inline
#endif

SCAN_INLINE void step(cc_segscan *s, uint32_t cp, uint64_t index, int mask_fences) {
    unsigned cls = char_class(cp);
    int sp = cls & C_SPACE;
    /* the character before this one was an ASCII digit ("12. " numbers a list item) */
    int digit_before = s->prev_digit;
    s->prev_digit = (uint8_t)((cls & C_DIGIT) != 0);
    if (s->scap) {
        s->raw++;
        s->tail_gap++;
        if (!sp) {
            if (!s->started) s->started = 1;
            else if (s->pend_space) s->hs = h32(s->hs, ' ');
            s->pend_space = 0;
            s->he_all = h32(s->he_all, cp);
            s->he_commit = s->he_all;
            if (cls & C_DIGIT) {
                if (!s->in_digits) {
                    s->hs = h32(s->hs, '#');
                    if (s->runs >= 2) later_run(s);
                    s->runs++;
                    s->hr = CC_H32_OFFSET;
                }
                if (s->runs > 1) {
                    s->hr = h32(s->hr, cp);
                } else {
                    s->hf = h32(s->hf, cp);
                    if (s->fval < CC_NUM_SAT) {
                        s->fval = s->fval * 10 + (cp - '0');
                        if (s->fval > CC_NUM_SAT) s->fval = CC_NUM_SAT;
                    }
                }
                s->in_digits = 1;
                s->digits++;
            } else {
                s->in_digits = 0;
                s->hs = h32(s->hs, fold(cp));
                if (cls & C_WORD) {
                    s->letters++;
                    if (!s->has_letter) {
                        s->has_letter = 1;
                        s->cjk = cp >= CC_ALL_WORD_FROM;
                    }
                }
            }
        } else {
            if (s->started) {
                s->he_all = h32(s->he_all, cp);
                s->pend_space = 1;
            }
            s->in_digits = 0;
        }
        if ((cls & C_NL) || (s->prev_end && sp) || (cp >= 0x3002 && cjk_end(cp))) end_segment(s);
        else s->prev_end = (uint8_t)((cls & C_END) && !digit_before);
    }
    if (s->wcap) {
        if (cls & C_WORD) {
            if (!s->in_word) {
                s->in_word = 1;
                s->word_start = index;
                s->hw = CC_H32_OFFSET;
                s->w_letters = 0;
                s->word_gap = s->gap_mark;
                s->gap_mark = 0;
            }
            s->hw = h32(s->hw, fold(cp));
            if (!(cls & C_DIGIT) && s->w_letters < 2) s->w_letters++;
        } else {
            end_word(s, mask_fences);
            if (list_separator(cp)) s->gap_mark = 1;
        }
    }
    /* lines and code fences (after the segment and the word: a segment or word that ends at a
     * newline lies on the line the newline ends) */
    if (cls & C_NL) {
        int fence = s->line_started &&
                    ((s->fence_st == FST_TICKS && s->fence_k >= 3) || s->fence_st == FST_TAG);
        if (mask_fences && fence) s->fence_inside ^= 1;
        line_reset(s, mask_fences);
    } else if (!sp) {
        if (s->fence_st != FST_NO) fence_char(s, cp);
        s->line_started = 1;
        s->line_gap = 0;
    } else if (s->line_started) {
        s->line_gap = 1;
    }
}

void cc_segscan_scan(cc_segscan *s, const cc_ring *ring, uint64_t chars, int mask_fences) {
    uint64_t n = chars - s->scanned;
    /* only after every rule that needs the scan has fired for good can more than the ring have
     * passed; what it no longer holds is skipped (nothing can fire on it any more) */
    if (n > ring->cap) n = ring->cap;
    if (!n) return;
    uint32_t i = ring->pos >= n ? ring->pos - (uint32_t)n : ring->pos + ring->cap - (uint32_t)n;
    uint64_t index = chars - n;
    cc_segscan *const t = s;
    const uint16_t *lo = ring->lo;
    const uint8_t *hi = ring->hi;
    const uint32_t cap = ring->cap;
    const int need_s = t->scap != 0, need_w = t->wcap != 0;
    for (uint64_t k = 0; k < n;) {
        uint32_t cp = hi ? (uint32_t)lo[i] | ((uint32_t)hi[i] << 16) : lo[i];
        if (plain_word(cp) && (t->fence_st == FST_NO || t->fence_st == FST_START)) {
            /* the common case, a run of letters (ASCII or not, no digit): only the hashes and
             * counters move; what step() would do, without its branches */
            if (need_s) {
                if (!t->started) t->started = 1;
                else if (t->pend_space) t->hs = h32(t->hs, ' ');
                t->pend_space = 0;
            }
            if (need_w) {
                if (!t->in_word) {
                    t->in_word = 1;
                    t->word_start = index;
                    t->hw = CC_H32_OFFSET;
                    t->w_letters = 0;
                    t->word_gap = t->gap_mark;
                    t->gap_mark = 0;
                }
            }
            /* a letter never opens a fence line; it ends the recogniser's hopes */
            t->fence_st = FST_NO;
            t->line_started = 1;
            t->line_gap = 0;
            uint32_t he = t->he_all, hs = t->hs, hw = t->hw, run;
            /* up to the end of the ring's storage or of the characters to scan */
            uint64_t left = n - k;
            const uint32_t stop = cap - i < left ? cap : (uint32_t)(i + left);
            uint32_t j = i;
            if (!hi) {
                /* the first character is a plain word character (tested above) */
                uint32_t c = cp;
                for (;;) {
                    uint32_t f = c;
                    if (c < 0x80) f = cc_ascii_letter_fold[c];
                    he = h32(he, c);
                    hs = h32(hs, f);
                    hw = h32(hw, f);
                    if (++j == stop) break;
                    c = lo[j];
                    if (c < 0x80 ? !cc_ascii_letter_fold[c] : !plain_word(c)) break;
                }
            } else {
                uint32_t c = cp;
                for (;;) {
                    uint32_t f = c;
                    if (c < 0x80) f = cc_ascii_letter_fold[c];
                    he = h32(he, c);
                    hs = h32(hs, f);
                    hw = h32(hw, f);
                    if (++j == stop) break;
                    c = (uint32_t)lo[j] | ((uint32_t)hi[j] << 16);
                    if (c < 0x80 ? !cc_ascii_letter_fold[c] : !plain_word(c)) break;
                }
            }
            run = j - i;
            i = j == cap ? 0 : j;
            k += run;
            index += run;
            t->prev_digit = 0;
            if (need_s) {
                t->he_all = t->he_commit = he;
                t->hs = hs;
                t->raw += run;
                t->tail_gap += run;
                t->letters += run;
                /* the segment's first letter decides whether it is written in CJK (once per
                 * segment, nothing per letter) */
                if (!t->has_letter) {
                    t->has_letter = 1;
                    t->cjk = cp >= CC_ALL_WORD_FROM;
                }
                t->in_digits = 0;
                t->prev_end = 0;
            }
            if (need_w) {
                t->hw = hw;
                /* the run holds letters only (plain_word excludes digits) */
                t->w_letters = (uint8_t)(t->w_letters + run >= 2 ? 2 : t->w_letters + run);
            }
            continue;
        }
        if (cp == ' ' && !t->prev_end) {
            /* a space that ends no segment: what step() would do */
            t->prev_digit = 0;
            if (need_s) {
                t->raw++;
                t->tail_gap++;
                if (t->started) {
                    t->he_all = h32(t->he_all, ' ');
                    t->pend_space = 1;
                }
                t->in_digits = 0;
            }
            if (need_w && t->in_word) end_word(t, mask_fences);
            if (t->line_started) t->line_gap = 1;
        } else {
            step(t, cp, index, mask_fences);
        }
        index++;
        k++;
        if (++i == cap) i = 0;
    }
    t->scanned = chars;
}

void cc_segscan_step(cc_segscan *s, uint32_t cp, int mask_fences) {
    step(s, cp, s->scanned, mask_fences);
    s->scanned++;
}

void cc_segscan_end(cc_segscan *s, int mask_fences, int reset_fence) {
    if (s->wcap) end_word(s, mask_fences);
    if (s->scap) end_segment(s);
    if (reset_fence) {
        line_reset(s, mask_fences);
        s->fence_inside = 0;
    }
}

/* The k-th kept segment from the end (k = 0: the newest). */
static inline uint32_t sidx(const cc_segscan *s, uint32_t k) {
    return s->spos > k ? s->spos - 1 - k : s->spos + s->scap - 1 - k;
}

/* Quote `raw` characters that start `back` characters before the end, stripped, 40 at most. */
static uint32_t quote_stripped(const cc_ring *ring, uint32_t back, uint32_t raw, uint32_t *out) {
    uint32_t a = 0, b = raw; /* [a, b) of the segment after stripping */
    while (a < b && cc_is_space(cc_ring_back(ring, back - 1 - a))) a++;
    while (b > a && cc_is_space(cc_ring_back(ring, back - b))) b--;
    uint32_t n = 0;
    for (uint32_t t = a; t < b && n < 40; t++) out[n++] = cc_ring_back(ring, back - 1 - t);
    return n;
}

int cc_block_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                    const cc_block_params *p, cc_block_result *res) {
    const uint32_t *key = p->near ? s->sskel : s->sexact;
    const uint16_t *num = p->near ? s->snum : NULL;
    uint32_t n = s->sn;
    uint32_t pmax = p->max_period < n / p->min_repeats ? p->max_period : n / p->min_repeats;
    if (!pmax) return 0;
    /* candidate periods: where the newest segment's key byte recurs (memchr over the newest
     * first bytes), then the keys themselves */
    const uint8_t *fp = (p->near ? s->fps : s->fpe) + s->fpos;
    const uint32_t newest = key[sidx(s, 0)];
    const int fenced = (s->swide[sidx(s, 0)] & SEG_FENCED) != 0;
    for (uint32_t per = 0;;) {
        const uint8_t *at = memchr(fp + per + 1, fp[0], pmax - per);
        if (!at) return 0;
        per = (uint32_t)(at - fp);
        if (key[sidx(s, per)] != newest) continue;
        uint32_t span = (p->min_repeats - 1) * per, i;
        for (i = 0; i < span; i++)
            if (key[sidx(s, i)] != key[sidx(s, i + per)]) break;
        if (i < span) continue;
        /* near: a unit of numeric segments only (data rows) must also repeat their numbers */
        int numeric = num != NULL;
        for (uint32_t k = 0; numeric && k < per; k++) numeric = num[sidx(s, k)] != 0;
        if (numeric) {
            for (i = 0; i < span; i++)
                if (num[sidx(s, i)] != num[sidx(s, i + per)]) break;
            if (i < span) continue;
        }
        /* near: copies whose numbers jump (half of the numbered segments or more) are a list
         * of identifiers; a counter's line never jumps (the smallest period decides) */
        if (p->near) {
            uint32_t numbered = 0, jumps = 0;
            for (uint32_t k = 0; k < span + per; k++) {
                unsigned b = s->swide[sidx(s, k)];
                numbered += (b & SEG_NUMBER) != 0;
                jumps += (b & SEG_JUMP) != 0;
            }
            if (numbered && 2 * jumps >= numbered) return 0;
        }
        uint32_t letters = 0;
        for (uint32_t k = 0; k < per; k++) letters += s->sletters[sidx(s, k)];
        /* the smallest period with min_repeats copies decides (a larger one would repeat the
         * same text) */
        if ((uint64_t)letters < (uint64_t)p->min_letters * per) return 0;
        while (i + per < n && key[sidx(s, i)] == key[sidx(s, i + per)] &&
               (!numeric || num[sidx(s, i)] == num[sidx(s, i + per)]))
            i++;
        uint32_t length = i + per;
        uint64_t covered = 0;
        /* (the characters of a segment written in CJK count twice, as its letters do for
         * SegmentRepeat) */
        for (uint32_t k = 0; k < length; k++) {
            uint32_t at = sidx(s, k);
            covered += (uint64_t)s->sgap[at] << (s->swide[at] & SEG_WIDE);
        }
        if (covered < p->min_chars) return 0;
        if (fenced && p->fence_letters) {
            /* inside a code fence the run needs fence_letters letters: code repeats a short
             * line on purpose (CJK letters count twice, as above) */
            uint64_t run_letters = 0;
            for (uint32_t k = 0; k < length; k++) {
                uint32_t at = sidx(s, k);
                run_letters += (uint64_t)s->sletters[at] << (s->swide[at] & SEG_WIDE);
            }
            if (run_letters < p->fence_letters) return 0;
        }
        /* inside a code fence a short unit needs one copy more: a runaway recursion's
         * traceback shows its two-line frame three times */
        if (fenced && per >= 2 && per <= CC_FENCE_SHORT_UNIT &&
            (uint64_t)length < (uint64_t)(p->min_repeats + 1) * per)
            return 0;
        uint32_t total = 0;
        for (uint32_t k = 0; k < per; k++) total += s->sgap[sidx(s, k)];
        /* the unit's first segment: aligned to the start of the run, in the last copy
         * (index from the end: 0 = newest) */
        uint32_t start = n - length;                        /* oldest-first index */
        /* oldest-first index: n - per + ((start - (n - per)) mod per) */
        int64_t d = (int64_t)start - (int64_t)(n - per);
        uint32_t first = (uint32_t)((int64_t)(n - per) + ((d % per) + per) % per);
        res->period = per;
        res->repeats = length / per;
        res->total = total;
        res->line_chars = 0;
        uint64_t end_back = s->tail_gap;
        for (uint32_t g = first + 1; g < n; g++) end_back += s->sgap[sidx(s, n - 1 - g)];
        for (uint32_t g = first; g < n; g++) {
            if (g > first) end_back -= s->sgap[sidx(s, n - 1 - g)];
            uint32_t raw = s->sraw[sidx(s, n - 1 - g)];
            uint64_t back = end_back + raw;
            if (back <= CC_QUOTE_CHARS && back <= chars) {
                res->line_chars = quote_stripped(ring, (uint32_t)back, raw, res->line);
                break;
            }
        }
        return 1;
    }
    return 0;
}

int cc_vocab_collapse(const cc_segscan *s, const cc_ring *ring, uint64_t chars, uint32_t nwords,
                      uint32_t max_distinct, int one_line, uint32_t *distinct, uint32_t *line,
                      uint32_t *line_chars, uint32_t *need) {
    *need = 1;
    if (s->wn < nwords) {
        *need = nwords - s->wn;
        return 0;
    }
    if (one_line && s->line_words < nwords) {
        /* not all on the current line */
        *need = nwords - s->line_words;
        return 0;
    }
    uint32_t seen[64], *d = max_distinct < 64 ? seen : malloc((max_distinct + 1) * sizeof *d);
    if (!d) return -1;
    uint32_t nd = 0, lexical = 0, marked = 0;
    int hit = 1;
    for (uint32_t k = 0; k < nwords && hit; k++) {
        uint32_t i = s->wpos > k ? s->wpos - 1 - k : s->wpos + s->wcap - 1 - k;
        uint32_t h = s->words[i], j;
        lexical += h & 1u;
        /* the gap before each word but the oldest */
        if (k + 1 < nwords) marked += (h >> 1) & 1u;
        h &= ~2u;
        for (j = 0; j < nd; j++)
            if (d[j] == h) break;
        if (j == nd) {
            if (nd == max_distinct) {
                /* the newest k + 1 words already hold too many distinct ones, and they stay
                 * among the last nwords for the next nwords - k - 1 words */
                hit = 0;
                *need = nwords - k;
            } else {
                d[nd++] = h;
            }
        }
    }
    if (d != seen) free(d);
    /* a window of mostly numbers and one-letter cells (a 0/1 grid, a spaced DNA sequence) is
     * data, not a collapse */
    if (!hit || 2 * (uint64_t)lexical < nwords) return 0;
    /* a list, not a collapse: three quarters of the gaps between them or more hold a list
     * separator (Heads, Tails, Tails, ...; up -> up -> left) */
    if (4 * (uint64_t)marked >= 3 * (uint64_t)(nwords - 1)) return 0;
    *distinct = nd;
    *line_chars = 0;
    uint64_t start = s->wsn < 8 ? s->wstart[0] : s->wstart[s->wspos];
    uint64_t back = chars - start;
    if (back <= CC_QUOTE_CHARS && back <= chars) {
        uint32_t n = back < 40 ? (uint32_t)back : 40;
        for (uint32_t t = 0; t < n; t++) line[t] = cc_ring_back(ring, (uint32_t)(back - 1 - t));
        *line_chars = n;
    }
    return 1;
}

int cc_segment_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                      const cc_segrep_params *p, uint32_t *covered, uint32_t *line,
                      uint32_t *line_chars, uint32_t *need) {
    const uint32_t w = p->window, top = p->top;
    *need = 1;
    if (s->sn < w) {
        *need = w - s->sn;
        return 0;
    }
    /* segments that may stay uncovered */
    const uint32_t slack = w - p->min_count;
    if (slack > 2 * top) {
        /* many may: a quick bound first, from one key byte per segment (newest first in fps).
         * The top skeletons cover at most top x the largest byte's count; on text that does
         * not repeat this ends the check after two passes over `window` bytes */
        const uint8_t *fp = s->fps + s->fpos;
        uint8_t hist[256];
        uint32_t most = 0;
        for (uint32_t k = 0; k < w; k++) hist[fp[k]] = 0;
        for (uint32_t k = 0; k < w; k++) {
                uint32_t i = sidx(s, k);
            if (((uint32_t)s->sletters[i] << (s->swide[i] & SEG_WIDE)) < p->min_letters ||
                (!p->fences && (s->swide[i] & SEG_FENCED)) || (s->swide[i] & SEG_JUMP))
                continue;
            uint32_t c = ++hist[fp[k]];
            if (c > most) most = c;
            if (c == 255) break; /* (most >= 255: no bound from here) */
        }
        if (most < 255 && (uint64_t)most * top < p->min_count) {
            /* each new segment raises the largest count by one at most */
            *need = (p->min_count + top - 1) / top - most;
            return 0;
        }
    }
    /* the exact count: distinct skeletons, newest first (so a group's first index is its most
     * recent occurrence), stopping as soon as more than `slack` segments must stay uncovered:
     * those with too few letters, and at least one per group beyond the first `top` */
    uint32_t stack_keys[256], stack_counts[256], stack_first[256];
    uint32_t *keys = stack_keys, *counts = stack_counts, *first = stack_first;
    if (w > 256) {
        keys = malloc(3 * (size_t)w * sizeof *keys);
        if (!keys) return -1;
        counts = keys + w;
        first = counts + w;
    }
    uint32_t nd = 0, excluded = 0;
    int possible = 1;
    for (uint32_t k = 0; k < w; k++) {
        uint32_t i = sidx(s, k);
        if (((uint32_t)s->sletters[i] << (s->swide[i] & SEG_WIDE)) < p->min_letters ||
            (!p->fences && (s->swide[i] & SEG_FENCED)) || (s->swide[i] & SEG_JUMP)) {
            if (++excluded > slack) {
                /* the newest k + 1 segments already leave too many uncovered, and they stay in
                 * the window for the next w - k - 1 segments */
                possible = 0;
                *need = w - k;
                break;
            }
            continue;
        }
        /* (a numeric segment's key mixes its later numbers in) */
        uint32_t h = s->sskel[i] ^ ((uint32_t)s->snum[i] << 16), j;
        for (j = 0; j < nd; j++)
            if (keys[j] == h) break;
        if (j == nd) {
            if (nd + 1 > top && nd + 1 - top + excluded > slack) {
                possible = 0;
                *need = w - k;
                break;
            }
            keys[nd] = h;
            counts[nd] = 0;
            first[nd] = k;
            nd++;
        }
        counts[j]++;
    }
    /* the `top` largest counts; ties: the most recent occurrence (groups are in that order) */
    uint64_t sum = 0;
    uint32_t best_first = 0, longest = 0;
    for (uint32_t t = 0; possible && t < top && t < nd; t++) {
        uint32_t b = t;
        for (uint32_t j = t + 1; j < nd; j++)
            if (counts[j] > counts[b] || (counts[j] == counts[b] && first[j] < first[b])) b = j;
        uint32_t ck = counts[b], ch = keys[b], cf = first[b];
        /* move the chosen group to position t, keeping the rest in recency order */
        for (uint32_t j = b; j > t; j--) {
            counts[j] = counts[j - 1];
            keys[j] = keys[j - 1];
            first[j] = first[j - 1];
        }
        counts[t] = ck;
        keys[t] = ch;
        first[t] = cf;
        if (t == 0) best_first = cf;
        sum += ck;
        /* (the segments of one group share their skeleton, so their letters) */
        uint32_t at = sidx(s, cf);
        uint32_t letters = (uint32_t)s->sletters[at] << (s->swide[at] & SEG_WIDE);
        if (letters > longest) longest = letters;
    }
    if (keys != stack_keys) free(keys);
    if (!possible) return 0;
    if (sum < p->min_count) {
        /* each new segment raises the covered count by one at most */
        *need = p->min_count - (uint32_t)sum;
        return 0;
    }
    if (longest < p->top_letters) return 0; /* short labels only: an answer key, not a flip */
    *covered = (uint32_t)sum;
    *line_chars = 0;
    /* the quote: the newest segment of the most frequent skeleton, from its start */
    uint64_t back = s->tail_gap;
    for (uint32_t k = 0; k < best_first; k++) back += s->sgap[sidx(s, k)];
    uint32_t raw = s->sraw[sidx(s, best_first)];
    back += raw;
    if (back <= CC_QUOTE_CHARS && back <= chars)
        *line_chars = quote_stripped(ring, (uint32_t)back, raw, line);
    return 1;
}
