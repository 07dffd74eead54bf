/* The word tail of a view, for WordRepeat (docs/semantics.md): the last words of the view (as
 * VocabCollapse keeps them: not those inside code fences when masking), kept by the segment
 * scanner at the point where it keeps a word (segments.c: end_word calls cc_wordtail_word, the
 * one per-word entry). A word is its folded
 * hash (bit 0: lexical, two letters or more; bit 1: the gap before it held a list separator) and
 * its start offset (modulo 2^32: only differences of nearby ones are used). Both are written twice, `cap` apart and newest first, so the check reads the
 * last `cap` words as one contiguous array without wrapping. */
#ifndef CC_WORDTAIL_H
#define CC_WORDTAIL_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h"

typedef struct cc_wordtail {
    uint32_t cap, n, pos; /* words kept at most, kept, newest at key[pos] */
    uint64_t serial;      /* words kept since the view began */
    uint32_t *key;        /* 2 x cap */
    uint32_t *start;      /* 2 x cap; start offsets modulo 2^32 (only differences are used) */
} cc_wordtail;

cc_wordtail *cc_wordtail_new(uint32_t cap);
void cc_wordtail_free(cc_wordtail *t);
cc_wordtail *cc_wordtail_copy(const cc_wordtail *t);
size_t cc_wordtail_memory(const cc_wordtail *t);

/* One word kept: its key (hash with the two flag bits above) and its start offset. */
static inline void cc_wordtail_word(cc_wordtail *t, uint32_t key, uint64_t start) {
    uint32_t f = t->pos ? t->pos - 1 : t->cap - 1;
    t->key[f] = t->key[f + t->cap] = key;
    t->start[f] = t->start[f + t->cap] = (uint32_t)start;
    t->pos = f;
    if (t->n < t->cap) t->n++;
    t->serial++;
}

typedef struct cc_wordrep_params {
    uint32_t max_period, min_repeats, min_chars, min_words;
} cc_wordrep_params;

typedef struct cc_wordrep_result {
    uint32_t period, repeats, total;
    uint32_t line_chars;
    uint32_t line[40];
} cc_wordrep_result;

/* WordRepeat over the kept words; the quote comes from the ring (the view has seen `chars`,
 * the ring holds at least the last CC_QUOTE_CHARS of them). Returns 1 and fills res on a hit. */
int cc_word_repeat(const cc_wordtail *t, const cc_ring *ring, uint64_t chars,
                   const cc_wordrep_params *p, cc_wordrep_result *res);

#endif
