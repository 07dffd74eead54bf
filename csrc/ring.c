#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

void cc_ring_last(const cc_ring *r, uint32_t n, uint32_t *out) {
    uint32_t start = (r->pos + r->cap - n) % r->cap;
    uint32_t first = r->cap - start < n ? r->cap - start : n;
    memcpy(out, r->buf + start, first * sizeof *out);
    memcpy(out + first, r->buf, (n - first) * sizeof *out);
}

/* The k-th code point from the end (k = 0 is the last one). */
static inline uint32_t back(const cc_ring *r, uint32_t k) {
    return r->buf[r->pos > k ? r->pos - 1 - k : r->pos + r->cap - 1 - k];
}

static int accept(const cc_tail_params *p, uint32_t period, uint32_t len, uint32_t first_word) {
    return len >= p->min_chars && len / period >= p->min_repeats && first_word < period;
}

static void fill(const cc_ring *r, uint32_t period, uint32_t len, cc_tail_result *res) {
    res->period = period;
    res->repeats = len / period;
    res->unit_chars = period < 40 ? period : 40;
    /* the unit is the last `period` characters, in order */
    for (uint32_t j = 0; j < res->unit_chars; j++) res->unit[j] = back(r, period - 1 - j);
}

int cc_tail_repeat(const cc_ring *r, uint32_t avail, const cc_tail_params *p, cc_tail_result *res) {
    uint32_t n = avail < p->window_chars ? avail : p->window_chars;
    if (n < p->min_chars || n < 2) return 0;
    uint32_t qmax = p->max_period < n ? p->max_period : n - 1;
    /* A period q can only qualify when the suffix of length q + 1 already has it (L(q) >= 2q
     * with q >= 2 needs two matching characters): a cheap filter that leaves few candidates in
     * ordinary text. */
    uint32_t cand[8], ncand = 0, many = 0;
    uint32_t c0 = back(r, 0), c1 = back(r, 1);
    for (uint32_t q = 1; q <= qmax; q++) {
        if (back(r, q) != c0) continue;
        if (q > 1 && (q + 1 >= n || back(r, q + 1) != c1)) continue;
        if (ncand == 8) {
            many = 1;
            break;
        }
        cand[ncand++] = q;
    }
    if (!ncand) return 0;
    uint32_t first_word = n;
    for (uint32_t i = 0; i < n; i++)
        if (cc_is_word(back(r, i))) {
            first_word = i;
            break;
        }
    if (!many) {
        for (uint32_t k = 0; k < ncand; k++) {
            uint32_t q = cand[k], z = 0;
            while (q + z < n && back(r, z) == back(r, q + z)) z++;
            if (accept(p, q, q + z, first_word)) {
                fill(r, q, q + z, res);
                return 1;
            }
        }
        return 0;
    }
    /* Many candidates (a periodic tail): the Z-function of the reversed tail gives every
     * suffix period in O(n): the suffix with period q is q + z[q] long. */
    uint32_t *rev = malloc((size_t)n * 2 * sizeof *rev);
    if (!rev) return -1;
    uint32_t *z = rev + n;
    for (uint32_t i = 0; i < n; i++) rev[i] = back(r, i);
    z[0] = n;
    uint32_t l = 0, rr = 0; /* [l, rr) is the rightmost Z-box */
    int found = 0;
    for (uint32_t i = 1; i <= qmax; i++) {
        uint32_t k = 0;
        if (i < rr) {
            k = z[i - l];
            if (k > rr - i) k = rr - i;
        }
        while (i + k < n && rev[k] == rev[i + k]) k++;
        z[i] = k;
        if (i + k > rr) {
            l = i;
            rr = i + k;
        }
        if (accept(p, i, i + k, first_word)) {
            fill(r, i, i + k, res);
            found = 1;
            break;
        }
    }
    free(rev);
    return found;
}
