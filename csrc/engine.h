/* The streaming engine: a compiled ruleset (immutable, shared by any number of watchers and
 * threads) and a watcher (the small state of one stream). Plain C99, no Python: the Cython layer
 * hands in code points of a str (1, 2 or 4 bytes each) and reads detections back as hit records.
 * The semantics are specified in docs/semantics.md. */
#ifndef CC_ENGINE_H
#define CC_ENGINE_H

#include <stddef.h>
#include <stdint.h>

enum { CC_VIEW_TEXT = 0, CC_VIEW_REASONING = 1, CC_VIEW_COMBINED = 2, CC_NVIEWS = 3 };

enum {
    CC_K_PHRASES = 1,
    CC_K_LINE_REPEAT,
    CC_K_LINE_CYCLE,
    CC_K_FILLER_LINES,
    CC_K_PREFIX_MONOTONY,
    CC_K_TAIL_REPEAT
};

enum { CC_OK = 0, CC_ERR_NOMEM = -1, CC_ERR_FINISHED = -2 };

typedef struct cc_rule_spec {
    int kind, view, once, fold, suppress;
    uint64_t every_bytes;
    uint32_t min_lines, min_count, min_run, top, max_chars;
    uint32_t max_period, min_repeats, min_chars, window_chars;
    double ratio;          /* min_ratio or cover_ratio */
    const uint32_t *set;   /* fillers / delimiters (code points), copied by the ruleset */
    uint32_t nset;
} cc_rule_spec;

typedef struct cc_phrase_spec {
    const unsigned char *bytes; /* UTF-8 */
    uint32_t len;
    uint32_t rule;
    uint32_t index;
} cc_phrase_spec;

typedef struct cc_options {
    uint32_t line_window, min_line_chars, evidence_chars;
    int mask_fences;
    size_t max_table_bytes; /* per automaton */
} cc_options;

typedef struct cc_ruleset cc_ruleset;
typedef struct cc_watcher cc_watcher;

typedef struct cc_hit {
    uint32_t rule;
    uint32_t phrase;
    uint64_t offset;
    uint64_t pos; /* order key inside one call: 0 = before the first character */
    uint32_t count, total, run, period, repeats;
    double ratio;
    unsigned char *text; /* line / prefix / unit, or the cycle lines concatenated */
    uint32_t text_len;
    uint32_t nparts;     /* cycle: number of lines; part_len[i] their byte lengths */
    uint32_t *part_len;
} cc_hit;

cc_ruleset *cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                           const cc_phrase_spec *phrases, size_t nphrases, char *err,
                           size_t errlen);
void cc_ruleset_free(cc_ruleset *rs);
size_t cc_ruleset_memory(const cc_ruleset *rs);

cc_watcher *cc_watcher_new(const cc_ruleset *rs);
void cc_watcher_free(cc_watcher *w);
cc_watcher *cc_watcher_copy(const cc_watcher *w);
void cc_watcher_reset(cc_watcher *w);
size_t cc_watcher_memory(const cc_watcher *w);
int cc_watcher_finished(const cc_watcher *w);
int cc_watcher_fired(const cc_watcher *w, uint32_t rule);
/* Test hook: comparisons spent ordering the hits of each call, since the watcher was made. */
uint64_t cc_watcher_sort_cmps(const cc_watcher *w);

/* Feed len code points of `kind` bytes each (1, 2 or 4) on channel text or reasoning.
 * Detections are appended to the watcher's hit list (see cc_watcher_hits). Returns the number of
 * hits in that list (>= 0), or CC_ERR_FINISHED / CC_ERR_NOMEM. */
int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel);
int cc_watcher_finish(cc_watcher *w);

const cc_hit *cc_watcher_hits(const cc_watcher *w, size_t *n);
void cc_watcher_clear_hits(cc_watcher *w);

/* The last min(n, evidence_chars) code points fed (both channels, arrival order). */
size_t cc_watcher_tail(const cc_watcher *w, size_t n, uint32_t *out);

/* Check delta end offsets: non-decreasing, within [0, len], the last equal to len.
 * Returns -1 when fine, else the index of the first bad offset (n when the last is wrong). */
long long cc_check_splits(const int64_t *splits, size_t n, size_t len);

/* Feed a whole recorded trace into w (fresh or reset), one delta per split, then finish. */
int cc_replay(cc_watcher *w, const void *data, int kind, size_t len, const int64_t *splits,
              size_t nsplits, int channel);

#endif
