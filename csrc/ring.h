/* The last characters of a view (code points), and the TailRepeat check over them. */
#ifndef CC_RING_H
#define CC_RING_H

#include <stddef.h>
#include <stdint.h>

typedef struct cc_ring {
    uint32_t *buf; /* allocated on first use */
    uint32_t cap;
    uint32_t pos;   /* next write slot */
    uint64_t total; /* code points ever written */
} cc_ring;

static inline void cc_ring_put(cc_ring *r, uint32_t cp) {
    r->buf[r->pos] = cp;
    if (++r->pos == r->cap) r->pos = 0;
    r->total++;
}

/* Copy the last n code points (n <= cap, n <= total) to out, oldest first. */
void cc_ring_last(const cc_ring *r, uint32_t n, uint32_t *out);

typedef struct cc_tail_params {
    uint32_t max_period, min_repeats, min_chars, window_chars;
} cc_tail_params;

typedef struct cc_tail_result {
    uint32_t period, repeats;
    uint32_t unit_chars;   /* code points of the unit kept in unit (<= 40) */
    uint32_t unit[40];
} cc_tail_result;

/* Check the last `avail` code points (already clamped to what may be looked at). Returns 1 and
 * fills res when the tail is one unit repeated; 0 when not; -1 when out of memory. */
int cc_tail_repeat(const cc_ring *r, uint32_t avail, const cc_tail_params *p, cc_tail_result *res);

#endif
