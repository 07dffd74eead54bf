/* The last characters of a view (code points), and the TailRepeat check over them.
 *
 * A code point is kept as its low 16 bits plus, once the view has seen a character outside the
 * BMP, a plane of high bits: 2 bytes a character for most text, 3 at most. */
#ifndef CC_RING_H
#define CC_RING_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "engine.h" /* CC_EVIDENCE_CHARS */

typedef struct cc_ring {
    uint16_t *lo; /* cap low halves, allocated on first use */
    uint8_t *hi;  /* cap high bits, allocated on the first code point above U+FFFF */
    uint32_t cap;
    uint32_t pos; /* next write slot */
} cc_ring;

/* The k-th code point from the end (k = 0 is the last one; k < cap). */
static inline uint32_t cc_ring_back(const cc_ring *r, uint32_t k) {
    uint32_t i = r->pos > k ? r->pos - 1 - k : r->pos + r->cap - 1 - k;
    return r->hi ? (uint32_t)r->lo[i] | ((uint32_t)r->hi[i] << 16) : r->lo[i];
}

/* Store cp at slot pos (with its high bits when `wide`: the ring has the high plane) and
 * return the next slot. The loops keep lo, hi, pos and cap in locals. */
HOT_INLINE uint32_t cc_ring_store(uint16_t *lo, uint8_t *hi, uint32_t pos, uint32_t cap,
                                  uint32_t cp, int wide) {
    lo[pos] = (uint16_t)cp;
    if (wide) hi[pos] = (uint8_t)(cp >> 16);
    return pos + 1 == cap ? 0 : pos + 1;
}

static inline void cc_ring_put(cc_ring *r, uint32_t cp) {
    r->pos = cc_ring_store(r->lo, r->hi, r->pos, r->cap, cp, r->hi != NULL);
}

/* Allocate the buffers (hi only when `astral`); 0, or -1 when out of memory. */
int cc_ring_ready(cc_ring *r, uint32_t cap, int astral);
void cc_ring_free(cc_ring *r);
int cc_ring_copy(cc_ring *dst, const cc_ring *src);
size_t cc_ring_memory(const cc_ring *r);

/* Copy the last n code points (n <= cap, n <= characters written) to out, oldest first. */
void cc_ring_last(const cc_ring *r, uint32_t n, uint32_t *out);

typedef struct cc_tail_params {
    uint32_t max_period, min_repeats, min_chars, window_chars;
} cc_tail_params;

typedef struct cc_tail_result {
    uint32_t period, repeats;
    uint32_t unit_chars;   /* code points of the unit kept in unit (<= CC_EVIDENCE_CHARS) */
    uint32_t unit[CC_EVIDENCE_CHARS];
} cc_tail_result;

/* Check the last `avail` code points (already clamped to what may be looked at). Returns 1 and
 * fills res when the tail is one unit repeated; 0 when not; -1 when out of memory. */
int cc_tail_repeat(const cc_ring *r, uint32_t avail, const cc_tail_params *p, cc_tail_result *res);

#endif
