/* Segments and words of a view, for BlockRepeat and VocabCollapse (docs/semantics.md).
 *
 * They are cut lazily: the hot loops only fill the view's text ring, and when one of these rules
 * is checked (at its throttle point, a channel switch or finish) the characters fed since the
 * previous scan are read back from the ring and cut here. The ring holds at least as many
 * characters as the largest every_bytes of these rules (plus one character's slack), so nothing
 * is lost between two scans. A segment is kept as two 32-bit hashes (exact text, skeleton), 16
 * bits of its later numbers when it is numeric, its length, its letters and whether its first
 * letter lies from U+3040 up: 17 bytes (21 with the two key bytes); a word as one hash. */
#ifndef CC_SEGMENTS_H
#define CC_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h"
#include "wordtail.h"

#define CC_QUOTE_CHARS 1024

/* A segment is numeric (a data row) with three digit runs or more, or with two and fewer
 * letters than this (docs/semantics.md). */
#define CC_NUMERIC_TWO_RUN_LETTERS 16

/* Inside a code fence, a BlockRepeat unit of two segments up to this many needs one copy more
 * than min_repeats (docs/semantics.md). */
#define CC_FENCE_SHORT_UNIT 3

/* A segment's first digit run is read as a number up to this (larger ones are this). */
#define CC_NUM_SAT 1000000000000000000ULL
/* Only a segment with fewer letters than this (CJK counting twice) may jump (segments.c). */
#define CC_JUMP_LETTERS 32

/* The segment and word hashes: 32-bit FNV-1a steps over code points. */
#define CC_H32_OFFSET 2166136261u
#define CC_H32_PRIME 16777619u
static inline uint32_t cc_h32(uint32_t h, uint32_t cp) { return (h ^ cp) * CC_H32_PRIME; }

/* States of the fence-line recogniser (the scanner's own, for words inside fences). */
enum { FST_START, FST_TICKS, FST_TAG, FST_NO };

typedef struct cc_segscan {
    uint64_t scanned;      /* characters of the view already cut */
    /* the pending segment */
    uint32_t he_all, he_commit, hs; /* exact hash through the last char / last non-space;
                                       skeleton hash */
    uint32_t raw, tail_gap;         /* its characters; characters since the last kept segment */
    uint32_t letters, digits;
    /* runs of ASCII digits; the hashes of the first run, of the current run (when it is not
     * the first) and of the runs after the first that differ from it */
    uint32_t runs, hf, hr, hn;
    uint64_t fval; /* the value of the first run (saturated at CC_NUM_SAT) */
    /* the first-run values of the last two kept segments that had a digit run (nprev known) */
    uint64_t prev_num[2];
    uint32_t nprev;
    uint8_t has_letter, cjk; /* cjk: its first letter is at U+3040 or above */
    uint8_t started, in_digits, pend_space, prev_end, prev_digit;
    /* the pending word */
    uint8_t in_word;
    uint8_t w_letters; /* letters (word characters but ASCII digits) of the pending word, up to 2 */
    uint32_t hw;
    uint64_t word_start;
    /* VocabCollapse: a list separator since the previous word ended (gap_mark), and in the
     * gap before the pending word (word_gap); words kept since the last newline or switch */
    uint8_t gap_mark, word_gap;
    uint32_t line_words;
    /* fence state of the current line (words inside fences are left out when masking) */
    uint8_t fence_st, fence_inside, line_started, line_gap;
    uint32_t fence_k, fence_ch;
    /* kept segments: a ring of scap, sn live, spos = next write */
    uint32_t scap, sn, spos;
    uint64_t seg_serial;
    uint32_t *sexact, *sskel;
    uint16_t *snum; /* 0, or for a numeric segment 16 bits of the hash of its digit runs
                     * after the first (lowest bit set) */
    uint16_t *sgap, *sraw, *sletters;
    uint8_t *swide; /* bit 0: the first letter is at U+3040 or above (SegmentRepeat counts
                     * the letters twice); bit 1 (SEG_FENCED): it lies inside a code fence;
                     * bit 2 (SEG_JUMP): its number jumps (an identifier, not a counter);
                     * bit 3 (SEG_NUMBER): it holds a digit run */
    /* one byte of each key, newest first: fpe[fpos + k] is the k-th newest segment's (k < scap;
     * every byte is written twice, scap apart, so the last scap are contiguous for memchr) */
    uint8_t *fpe, *fps;
    uint32_t fpos;
    /* kept words: the folded hash with its lowest bit replaced by 1 when the word has two
     * letters or more (a *lexical* word; numbers and one-letter cells are not) and its next
     * bit by 1 when the gap before the word held a list separator */
    uint32_t wcap, wn, wpos;
    uint64_t word_serial;
    uint32_t *words;
    uint64_t wstart[8];
    uint32_t wsn, wspos;
    /* WordRepeat: the last kept words with their starts (NULL: no such rule on the view) */
    cc_wordtail *tail;
} cc_segscan;

/* ---- the scanner fed in place ----------------------------------------------------------
 * A loop that has the characters at hand (the line loop of scan.c) may move the scanner over
 * the common characters itself instead of leaving them in the ring for cc_segscan_scan, when
 * the scanner keeps both segments and words, has cut everything before them and is in one of
 * two states (cc_segscan_mode):
 *   CC_SEG_RUN  after a letter of a run (in a word, no space pending): a letter moves the three
 *               hashes and the counters; a space ends the word and moves the exact hash;
 *   CC_SEG_GAP  after spaces that follow such a letter: a space moves the exact hash; a letter
 *               adds the pending space to the skeleton and starts a word (which takes the gap's
 *               list-separator mark, gap_mark, as its word_gap).
 * "Letter" is cc_seg_letter (ASCII letters, and from U+3040 up all but the three full-width
 * ends); "space" is ' ' alone. That is exactly what cc_segscan_scan does with those characters
 * in those states (its run path, its space path), so the scan may go on from any point either
 * way; every other character, and every character in any other state (CC_SEG_LAG), is left to
 * cc_segscan_scan. Changes to the scanner's steps must keep these in step. */
enum { CC_SEG_LAG, CC_SEG_RUN, CC_SEG_GAP };

/* ASCII letters folded to lower case, 0 for the rest of ASCII. */
extern const uint8_t cc_ascii_letter_fold[128];

/* The character as the skeleton and word hashes take it when it is a letter of the run path
 * that the in-place feed handles, else 0. */
static inline uint32_t cc_seg_letter(uint32_t cp) {
    if (cp < 0x80) return cc_ascii_letter_fold[cp];
    if (cp < 0x3040) return 0; /* (letters here take cc_segscan_scan's general test) */
    return cp < 0xFF01 || (cp != 0xFF01 && cp != 0xFF1B && cp != 0xFF1F) ? cp : 0;
}

/* The state the in-place feed may go on from (the scanner must keep segments and words). */
static inline int cc_segscan_mode(const cc_segscan *s) {
    if (!s->started || !s->has_letter || s->in_digits || s->prev_end || s->prev_digit ||
        s->fence_st != FST_NO || !s->line_started)
        return CC_SEG_LAG;
    if (s->in_word) return !s->pend_space && !s->line_gap ? CC_SEG_RUN : CC_SEG_LAG;
    return s->pend_space && s->line_gap ? CC_SEG_GAP : CC_SEG_LAG;
}

/* Keep the word that just ended (hw, w_letters, word_gap, word_start): into the ring of words,
 * the word tail (WordRepeat) and the line's count, unless it lies inside a code fence and fences
 * are masked. */
static inline void cc_segscan_keep_word(cc_segscan *s, int mask_fences) {
    if (mask_fences && s->fence_inside) return;
    const uint32_t key = (s->hw & ~3u) | ((uint32_t)s->word_gap << 1) | (s->w_letters >= 2);
    if (s->tail) cc_wordtail_word(s->tail, key, s->word_start);
    s->words[s->wpos] = key;
    s->line_words++;
    s->wpos = s->wpos + 1 == s->wcap ? 0 : s->wpos + 1;
    if (s->wn < s->wcap) s->wn++;
    s->word_serial++;
    s->wstart[s->wspos] = s->word_start;
    s->wspos = (s->wspos + 1) & 7;
    if (s->wsn < 8) s->wsn++;
}

/* A scanner keeping scap segments and wcap words (either may be 0); NULL when out of memory. */
cc_segscan *cc_segscan_new(uint32_t scap, uint32_t wcap, int mask_fences);
void cc_segscan_free(cc_segscan *s);
cc_segscan *cc_segscan_copy(const cc_segscan *s);
size_t cc_segscan_memory(const cc_segscan *s);

/* Cut the characters fed since the previous scan: the view has seen `chars` characters, the
 * last of them in `ring`. */
void cc_segscan_scan(cc_segscan *s, const cc_ring *ring, uint64_t chars, int mask_fences);
/* Cut one more character, cp, the view's next after the scanned ones (a loop that has it at
 * hand: the same as cc_segscan_scan once it is in the ring). */
void cc_segscan_step(cc_segscan *s, uint32_t cp, int mask_fences);
/* A channel switch or finish(): the pending word and segment end; `reset_fence`: a switch
 * (the line and its fence state end too). */
void cc_segscan_end(cc_segscan *s, int mask_fences, int reset_fence);

typedef struct cc_block_params {
    int near;
    uint32_t max_period, min_repeats, min_chars, min_letters;
    uint32_t fence_letters; /* letters the periodic run needs inside a code fence */
} cc_block_params;

typedef struct cc_block_result {
    uint32_t period, repeats, total;
    uint32_t line_chars;
    uint32_t line[40];
} cc_block_result;

/* BlockRepeat over the kept segments; the quote comes from the ring (the view has seen
 * `chars`). Returns 1 and fills res on a hit. */
int cc_block_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                    const cc_block_params *p, cc_block_result *res);

typedef struct cc_segrep_params {
    uint32_t window, top, min_count, min_letters;
    int fences; /* 0: segments inside code fences stay uncovered */
    uint32_t top_letters; /* one of the top skeletons must hold this many letters (CJK twice) */
} cc_segrep_params;

/* SegmentRepeat over the last `window` kept segments: 1 when the `top` most frequent skeletons
 * (of segments with at least min_letters letters) cover at least min_count of them; `covered`,
 * and the quote of the newest segment of the most frequent skeleton in line/line_chars. -1 when
 * out of memory. On a miss, *need = how many more segments must be kept before a hit is
 * possible at all (>= 1): the checks before that may be skipped. */
int cc_segment_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                      const cc_segrep_params *p, uint32_t *covered, uint32_t *line,
                      uint32_t *line_chars, uint32_t *need);

/* VocabCollapse: 1 and the number of distinct words among the last `nwords` when at most
 * max_distinct (and, with `one_line`, all of them on the current line); the quote (from the
 * eighth-to-last word's start) in line/line_chars. On a miss, *need = how many more words must
 * be kept before a hit is possible at all (>= 1). */
int cc_vocab_collapse(const cc_segscan *s, const cc_ring *ring, uint64_t chars, uint32_t nwords,
                      uint32_t max_distinct, int one_line, uint32_t *distinct, uint32_t *line,
                      uint32_t *line_chars, uint32_t *need);

#endif
