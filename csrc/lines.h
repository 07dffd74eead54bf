/* The line window of one view: the last `cap` kept lines, as a ring of entry ids over a table of
 * distinct lines (hash, stripped length, count, latest occurrence, evidence text).
 *
 * Pushing a line is O(1) amortised: a hash-index lookup, a count update, the count-of-counts
 * table that gives the top count, and a monotonic deque of runs that gives the longest run of
 * identical consecutive lines. So LineRepeat's check reads three numbers; the other windowed
 * detectors scan the distinct lines (at most `cap`) at their throttle points only.
 *
 * Memory is what a watcher mostly costs, so the window is one allocation of 16-bit ids and
 * counts (line_window <= 65535) and 24-byte entries, and an entry keeps only the evidence text a
 * detector may still need: the caller says how many bytes to keep when a line first arrives (all
 * of its evidence text for a short line, the first few code points for a line that may have a
 * prefix, none otherwise), and a line that arrives a second time keeps all of it.
 */
#ifndef CC_LINES_H
#define CC_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h" /* CC_EVIDENCE_CHARS */

#define CC_EVIDENCE_BYTES (CC_EVIDENCE_CHARS * 4)

/* Entry text header: text[0] = bytes kept, text[1] = flags, then the bytes. */
enum { CC_LINE_PREFIX = 1, /* caller's mark: the line has an early prefix delimiter */
       CC_LINE_FULL = 2 /* the whole evidence text (first 40 code points) is kept */ };

typedef struct cc_entry {
    uint64_t hash;
    unsigned char *text; /* NULL when nothing is kept (and the line is not marked) */
    uint32_t last;       /* serial of the latest occurrence, modulo 2^32 */
    uint16_t count;      /* 0 = free slot */
    uint16_t len;        /* stripped length in code points, saturated at 65535 */
} cc_entry;

static inline uint32_t cc_entry_nbytes(const cc_entry *e) { return e->text ? e->text[0] : 0; }
static inline const unsigned char *cc_entry_bytes(const cc_entry *e) { return e->text + 2; }
static inline unsigned cc_entry_flags(const cc_entry *e) { return e->text ? e->text[1] : 0; }
/* a's latest occurrence is more recent than b's (serials of lines in one window differ by less
 * than 2^31) */
static inline int cc_entry_newer(const cc_entry *a, const cc_entry *b) {
    return (int32_t)(a->last - b->last) > 0;
}

typedef struct cc_window {
    uint32_t cap;      /* line_window */
    uint32_t n;        /* lines in the window */
    uint32_t head;     /* ring slot of the oldest line */
    uint32_t mask;     /* index slots - 1 */
    uint32_t serial;   /* lines pushed so far, modulo 2^32 */
    uint32_t top;      /* highest count */
    uint32_t nflagged; /* lines in the window marked CC_LINE_PREFIX */
    uint32_t free_head; /* first free entry id, chained through `last`; cap = none */
    /* runs of identical consecutive lines: ring of segments + monotonic deque of segment slots */
    uint32_t seg_first, seg_count; /* slot of the oldest segment, segments live */
    uint32_t dq_head, dq_n;
    uint16_t short_hist[CC_EVIDENCE_CHARS + 1]; /* lines in the window by length, up to 40 */
    cc_entry *entries; /* cap */
    uint16_t *ring;    /* entry ids, cap slots */
    uint16_t *index;   /* open addressing, entry id + 1, 0 = empty */
    uint16_t *freq;    /* freq[c]: entries with count c, c <= cap */
    uint16_t *seg_entry, *seg_len, *dq;
} cc_window;

cc_window *cc_window_new(uint32_t cap);
void cc_window_free(cc_window *w);
cc_window *cc_window_copy(const cc_window *w);
size_t cc_window_memory(const cc_window *w);

/* Push a completed, stripped line: its hash, length, evidence text (its first code points, at
 * most 40: cps[0..ncps)) and flags. A line not in the window yet keeps its first `keep` code
 * points of text (ncps or fewer; at least the prefix when flags has CC_LINE_PREFIX); a line
 * already there keeps all of it. The text is encoded to UTF-8 only when it is kept or compared.
 * Returns 0, or -1 when out of memory (the line is dropped). */
int cc_window_push(cc_window *w, uint64_t hash, uint32_t len, const uint32_t *cps, uint32_t ncps,
                   uint32_t keep, unsigned flags);
/* Lines in the window of at most max_len code points (max_len <= 40). */
uint32_t cc_window_short_lines(const cc_window *w, uint32_t max_len);

uint32_t cc_window_longest_run(const cc_window *w);
/* The most frequent entry, ties to the most recent occurrence. */
const cc_entry *cc_window_top_entry(const cc_window *w);

#endif
