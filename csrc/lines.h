/* The line window of one view: the last `cap` kept lines, as a ring of entry ids over a table of
 * distinct lines (hash, stripped length, count, latest occurrence, first 40 code points).
 *
 * Pushing a line is O(1) amortised: a hash-index lookup, a count update, the count-of-counts
 * table that gives the top count, and a monotonic deque of runs that gives the longest run of
 * identical consecutive lines. So LineRepeat's check reads three numbers; the other windowed
 * detectors scan the distinct lines (at most `cap`) at their throttle points only.
 */
#ifndef CC_LINES_H
#define CC_LINES_H

#include <stddef.h>
#include <stdint.h>

#define CC_EVIDENCE_CHARS 40
#define CC_EVIDENCE_BYTES (CC_EVIDENCE_CHARS * 4)

typedef struct cc_entry {
    uint64_t hash;
    uint64_t last;  /* serial number of the latest occurrence */
    uint32_t count; /* 0 = free slot */
    uint32_t len;   /* stripped length in code points */
    uint32_t nbytes;
    uint32_t flags; /* caller's bits (the engine marks lines with an early prefix delimiter) */
    unsigned char *text; /* first 40 code points, UTF-8 */
} cc_entry;

typedef struct cc_window {
    uint32_t cap;     /* line_window */
    uint32_t n;       /* lines in the window */
    uint32_t head;    /* ring slot of the oldest line */
    uint64_t serial;  /* lines pushed so far */
    uint32_t *ring;   /* entry ids, cap slots */
    cc_entry *entries; /* cap + 1 */
    uint32_t nfree;
    uint32_t *freelist;
    uint32_t *index;  /* open addressing, entry id + 1, 0 = empty */
    uint32_t mask;
    uint32_t *freq;   /* freq[c]: entries with count c, c <= cap */
    uint32_t top;     /* highest count */
    uint32_t nflagged;                       /* lines in the window with flags != 0 */
    uint32_t short_hist[CC_EVIDENCE_CHARS + 1]; /* lines in the window by length, up to 40 */
    /* runs of identical consecutive lines: ring of segments + monotonic deque of segment serials */
    uint32_t *seg_entry, *seg_len;
    uint64_t seg_first, seg_count;
    uint64_t *dq;
    uint32_t dq_head, dq_n;
} cc_window;

cc_window *cc_window_new(uint32_t cap);
void cc_window_free(cc_window *w);
cc_window *cc_window_copy(const cc_window *w);
size_t cc_window_memory(const cc_window *w);

/* Push a completed, stripped line. Returns 0, or -1 when out of memory (the line is dropped). */
int cc_window_push(cc_window *w, uint64_t hash, uint32_t len, const unsigned char *text,
                   uint32_t nbytes, uint32_t flags);
/* Lines in the window of at most max_len code points (max_len <= 40). */
uint32_t cc_window_short_lines(const cc_window *w, uint32_t max_len);

uint32_t cc_window_longest_run(const cc_window *w);
/* The most frequent entry, ties to the most recent occurrence. */
const cc_entry *cc_window_top_entry(const cc_window *w);

#endif
