/* The windowed detectors as pure functions: each reads a line window (or a ring) and one rule
 * spec and says whether the rule's condition holds, with its evidence. No watcher, no hit list:
 * eng_check_rule (detect.c) turns a finding into a hit, and tests/c/test_detect.c calls the
 * detectors directly. */
#ifndef CC_DETECT_H
#define CC_DETECT_H

#include "engine.h"
#include "lines.h"
#include "ring.h"
#include "segments.h"

/* The evidence of one finding. Line evidence points into the window (valid until it changes):
 * `line` for LineRepeat, `lines[0..nlines)` for LineCycle. Code point evidence is copied:
 * the prefix of PrefixMonotony, the unit of TailRepeat. */
typedef struct eng_finding {
    uint32_t count, total, run, period, repeats;
    double ratio;
    const cc_entry *line;
    const cc_entry *lines[CC_MAX_CYCLE_TOP];
    uint32_t nlines;
    uint32_t cps[CC_EVIDENCE_CHARS];
    uint32_t ncps;
} eng_finding;

/* Each returns 1 when the rule fires (and fills *f), 0 when it does not, -1 when out of memory.
 * `win` may be NULL (no line kept yet). */
int eng_detect_line_repeat(const cc_window *win, const cc_rule_spec *r, eng_finding *f);
int eng_detect_line_cycle(const cc_window *win, const cc_rule_spec *r, eng_finding *f);
int eng_detect_filler_lines(const cc_window *win, const cc_rule_spec *r, eng_finding *f);
int eng_detect_prefix_monotony(const cc_window *win, const cc_rule_spec *r, eng_finding *f);
/* The last `avail` code points of the ring (already clamped to what may be looked at);
 * `fenced`: the view is inside a code fence (masking on), where a unit of lines does not count. */
int eng_detect_tail_repeat(const cc_ring *ring, uint32_t avail, int fenced, const cc_rule_spec *r,
                           eng_finding *f);
/* Over a view's segments / words (the scanner brought up to date); quotes come from the ring,
 * which has seen `chars` code points. */
int eng_detect_block_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                            const cc_rule_spec *r, eng_finding *f);
/* `seen`: the segment serial of this check; on a miss it is advanced by the segments that must
 * still come before a hit is possible (the caller checks again only past it). */
/* The last r->min_chars code points (of `avail` since the barrier) hold no word character. */
int eng_detect_structure_flood(const cc_ring *ring, uint32_t avail, const cc_rule_spec *r,
                               eng_finding *f);
int eng_detect_segment_repeat(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                              const cc_rule_spec *r, eng_finding *f, uint64_t *seen);
/* Over a view's word tail (WordRepeat). */
int eng_detect_word_repeat(const cc_wordtail *t, const cc_ring *ring, uint64_t chars,
                           const cc_rule_spec *r, eng_finding *f);
int eng_detect_vocab_collapse(const cc_segscan *s, const cc_ring *ring, uint64_t chars,
                              const cc_rule_spec *r, eng_finding *f, uint64_t *seen);

#endif
