#include "wordtail.h"

#include <stdlib.h>
#include <string.h>

#include "segments.h"

cc_wordtail *cc_wordtail_new(uint32_t cap) {
    cc_wordtail *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cap = cap ? cap : 1;
    t->key = malloc(2 * (size_t)t->cap * sizeof *t->key);
    t->start = malloc(2 * (size_t)t->cap * sizeof *t->start);
    if (!t->key || !t->start) {
        cc_wordtail_free(t);
        return NULL;
    }
    return t;
}

void cc_wordtail_free(cc_wordtail *t) {
    if (!t) return;
    free(t->key);
    free(t->start);
    free(t);
}

cc_wordtail *cc_wordtail_copy(const cc_wordtail *t) {
    cc_wordtail *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *t;
    c->key = malloc(2 * (size_t)t->cap * sizeof *t->key);
    c->start = malloc(2 * (size_t)t->cap * sizeof *t->start);
    if (!c->key || !c->start) {
        cc_wordtail_free(c);
        return NULL;
    }
    memcpy(c->key, t->key, 2 * (size_t)t->cap * sizeof *t->key);
    memcpy(c->start, t->start, 2 * (size_t)t->cap * sizeof *t->start);
    return c;
}

size_t cc_wordtail_memory(const cc_wordtail *t) {
    return t ? sizeof *t + (size_t)t->cap * 2 * (sizeof *t->key + sizeof *t->start) : 0;
}

/* Two kept words are the same word: the hashes without the list-gap bit (bit 0, lexical, is a
 * function of the word). */
#define SAME(a, b) ((((a) ^ (b)) & ~2u) == 0)

int cc_word_repeat(const cc_wordtail *t, const cc_ring *ring, uint64_t chars,
                   const cc_wordrep_params *p, cc_wordrep_result *res) {
    const uint32_t n = t->n, R = p->min_repeats;
    const uint32_t pmax = p->max_period < n / R ? p->max_period : n / R;
    const uint32_t *k = t->key + t->pos;     /* k[i]: the i-th newest word */
    const uint32_t *st = t->start + t->pos;
    const uint32_t newest = k[0];
    for (uint32_t per = 1; per <= pmax; per++) {
        if (!SAME(k[per], newest)) continue;
        const uint32_t span = (R - 1) * per;
        uint32_t i;
        for (i = 1; i < span; i++)
            if (!SAME(k[i], k[i + per])) break;
        if (i < span) continue;
        /* the smallest period with min_repeats copies decides (a larger one would repeat the
         * same words) */
        uint32_t lexical = 0, marked = 0;
        for (uint32_t j = 0; j < per; j++) lexical += k[j] & 1u;
        if (lexical < p->min_words) return 0;
        for (uint32_t j = 0; j < span; j++) marked += (k[j] >> 1) & 1u;
        /* a list, not a loop: half of the gaps before the last span words or more hold a list
         * separator */
        if (2 * (uint64_t)marked >= span) return 0;
        while (i + per < n && SAME(k[i], k[i + per])) i++;
        const uint32_t length = i + per;
        if ((uint32_t)(st[0] - st[length - 1]) < p->min_chars) return 0;
        res->period = per;
        res->repeats = length / per;
        res->total = st[0] - st[per];
        /* the quote: the unit's first word aligned to the start of the run, in the copy before
         * the newest words (index from the newest: per .. 2 per - 1) */
        const uint32_t q = per + (length - 1 - per) % per;
        const uint32_t back = (uint32_t)chars - st[q];
        res->line_chars = 0;
        if (back <= CC_QUOTE_CHARS && back <= ring->cap) {
            uint32_t m = back < 40 ? back : 40;
            for (uint32_t j = 0; j < m; j++) res->line[j] = cc_ring_back(ring, back - 1 - j);
            res->line_chars = m;
        }
        return 1;
    }
    return 0;
}
