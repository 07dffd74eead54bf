#include "ring.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

int cc_ring_ready(cc_ring *r, uint32_t cap, int astral) {
    if (!r->lo) {
        r->lo = malloc(cap * sizeof *r->lo);
        if (!r->lo) return -1;
        r->cap = cap;
        r->pos = 0;
    }
    if (astral && !r->hi) {
        /* the characters written so far were all in the BMP */
        r->hi = calloc(r->cap, sizeof *r->hi);
        if (!r->hi) return -1;
    }
    return 0;
}

void cc_ring_free(cc_ring *r) {
    free(r->lo);
    free(r->hi);
    r->lo = NULL;
    r->hi = NULL;
}

int cc_ring_copy(cc_ring *dst, const cc_ring *src) {
    *dst = *src;
    dst->lo = NULL;
    dst->hi = NULL;
    if (src->lo) {
        dst->lo = malloc(src->cap * sizeof *dst->lo);
        if (!dst->lo) return -1;
        memcpy(dst->lo, src->lo, src->cap * sizeof *dst->lo);
    }
    if (src->hi) {
        dst->hi = malloc(src->cap * sizeof *dst->hi);
        if (!dst->hi) return -1;
        memcpy(dst->hi, src->hi, src->cap * sizeof *dst->hi);
    }
    return 0;
}

size_t cc_ring_memory(const cc_ring *r) {
    return (r->lo ? r->cap * sizeof *r->lo : 0) + (r->hi ? r->cap * sizeof *r->hi : 0);
}

void cc_ring_last(const cc_ring *r, uint32_t n, uint32_t *out) {
    for (uint32_t i = 0; i < n; i++) out[i] = cc_ring_back(r, n - 1 - i);
}

static void fill(const cc_ring *r, uint32_t period, uint32_t len, cc_tail_result *res) {
    res->period = period;
    res->repeats = len / period;
    res->unit_chars = period < CC_EVIDENCE_CHARS ? period : CC_EVIDENCE_CHARS;
    /* the unit is the last `period` characters, in order */
    for (uint32_t j = 0; j < res->unit_chars; j++) res->unit[j] = cc_ring_back(r, period - 1 - j);
}

/* Distance from the end of the nearest word character (n when there is none). */
static uint32_t first_word(const cc_ring *r, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (cc_is_word(cc_ring_back(r, i))) return i;
    return n;
}

enum { STACK_CHARS = 1024 };

/* Every suffix period at once: the Z-function of the reversed tail gives, for each q, the
 * length q + z[q] of the longest suffix with period q, in O(n). For tails where checking the
 * candidates one by one would be slow (long periodic tails without a word character). */
static int tail_repeat_z(const cc_ring *r, uint32_t n, uint32_t qmax, const cc_tail_params *p,
                         cc_tail_result *res) {
    uint32_t stack[2 * STACK_CHARS];
    uint32_t *rev = n <= STACK_CHARS ? stack : malloc((size_t)n * 2 * sizeof *rev);
    if (!rev) return -1;
    uint32_t *z = rev + n;
    for (uint32_t i = 0; i < n; i++) rev[i] = cc_ring_back(r, i);
    uint32_t fw = n;
    for (uint32_t i = 0; i < n; i++)
        if (cc_is_word(rev[i])) {
            fw = i;
            break;
        }
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
        uint32_t len = i + k;
        if (len >= p->min_chars && len / i >= p->min_repeats && fw < i) {
            fill(r, i, len, res);
            found = 1;
            break;
        }
    }
    if (rev != stack) free(rev);
    return found;
}

int cc_tail_repeat(const cc_ring *r, uint32_t avail, const cc_tail_params *p, cc_tail_result *res) {
    uint32_t n = avail < p->window_chars ? avail : p->window_chars;
    if (n < p->min_chars || n < 2) return 0;
    /* L(q) <= n, so q can only qualify while min_repeats * q <= n */
    uint32_t qmax = p->max_period < n ? p->max_period : n - 1;
    if (qmax > n / p->min_repeats) qmax = n / p->min_repeats;
    if (!qmax) return 0;
    /* Check the periods one by one, smallest first. A period q needs the suffix of length
     * need(q) = max(min_chars, min_repeats * q) to have period q: in ordinary text the
     * comparison fails within a character or two. When that stops being true (a periodic
     * tail), the Z-function finishes the job in linear time. */
    const uint16_t *lo = r->lo;
    uint32_t cap = r->cap;
    uint32_t e = r->pos ? r->pos - 1 : cap - 1; /* slot of the last character */
    uint16_t l0 = lo[e], l1 = lo[e ? e - 1 : cap - 1];
    /* The scan looks at the low halves of back(q) and back(q + 1) together. A period q needs
     * z >= need(q) - q >= 2 matching characters once max(min_chars, min_repeats) >= 3 or
     * q >= 2 (need(q) >= 2q), so only q = 1 may need to be tried on back(1) alone. */
    int pair_ok = p->min_chars >= 3 || p->min_repeats >= 3;
    uint16_t want16[2] = {l1, l0};
    uint32_t want;
    memcpy(&want, want16, sizeof want);
    uint32_t work = 0, budget = 4 * n, fw = 0; /* periods <= fw have no word character */
    int fw_known = 0;
    uint32_t idx = e;
    for (uint32_t q = 1; q <= qmax; q++) {
        idx = idx ? idx - 1 : cap - 1;
        if (idx >= 1 && q > 1) {
            /* the common case: skip ahead over slots idx, idx - 1, ... >= 1 whose pair
             * (lo[k - 1], lo[k]) differs from (l1, l0) */
            uint32_t stop = qmax - q < idx - 1 ? idx - (qmax - q) : 1, k = idx;
            while (k >= stop + 4) { /* four pairs at a time */
                uint32_t g0, g1, g2, g3;
                memcpy(&g0, lo + k - 1, sizeof g0);
                memcpy(&g1, lo + k - 2, sizeof g1);
                memcpy(&g2, lo + k - 3, sizeof g2);
                memcpy(&g3, lo + k - 4, sizeof g3);
                if ((g0 == want) | (g1 == want) | (g2 == want) | (g3 == want)) break;
                k -= 4;
            }
            for (;;) {
                uint32_t got;
                memcpy(&got, lo + k - 1, sizeof got);
                if (got == want || k == stop) break;
                k--;
            }
            q += idx - k;
            idx = k;
            uint32_t got;
            memcpy(&got, lo + k - 1, sizeof got);
            if (got != want) continue;
        } else {
            if (lo[idx] != l0) continue;
            if (pair_ok || q > 1) {
                if (q + 1 >= n || lo[idx ? idx - 1 : cap - 1] != l1) continue;
            }
        }
        if (q <= fw) continue;
        uint32_t need = p->min_repeats * q;
        if (need < p->min_chars) need = p->min_chars;
        uint32_t z = 0, zneed = need - q;
        while (z < zneed && cc_ring_back(r, z) == cc_ring_back(r, q + z)) z++;
        work += z + 1;
        if (z < zneed) {
            if (work > budget) return tail_repeat_z(r, n, qmax, p, res);
            continue;
        }
        if (!fw_known) {
            fw_known = 1;
            fw = first_word(r, n);
            if (fw >= qmax) return 0;
            if (fw >= q) continue;
        }
        while (q + z < n && cc_ring_back(r, z) == cc_ring_back(r, q + z)) z++;
        fill(r, q, q + z, res);
        return 1;
    }
    return 0;
}
