/* Internals of the engine shared by its units (not part of the public contract in engine.h):
 *
 *   ruleset.c  validate rule specs, compile them, plan how each view is scanned
 *   detect.c   the windowed detectors: pure functions of a view's window / ring and a rule
 *   scan.c     lines, fences, quotes, phrase matches and the specialised per-character loops
 *   watcher.c  a watcher's lifecycle: new, copy, reset, feed, finish, tail, replay
 *
 * The per-character loops are chosen when a ruleset is compiled: each view gets a shape (what
 * its rules need) and each channel a pair loop (its own view and the combined view together),
 * from the tables in scan.c. */
#ifndef CC_ENGINE_IMPL_H
#define CC_ENGINE_IMPL_H

#include <stdlib.h>
#include <string.h>

#include "automaton.h"
#include "common.h"
#include "engine.h"
#include "lines.h"
#include "ring.h"
#include "segments.h"
#include "text.h"

struct view;
struct viewplan;

/* How a view is scanned (chosen by ruleset.c, loops in scan.c). */
typedef enum view_shape {
    VIEW_ALL,      /* the general loop: phrases (one or two automata) and lines together */
    VIEW_PHRASES,  /* phrases with one automaton; no lines, ring or throttled rules */
    VIEW_LINES,    /* lines, ring and throttled rules; no phrases */
    VIEW_RING,     /* ring and throttled rules only (TailRepeat, the evidence tail) */
    NVIEW_SHAPES
} view_shape;

/* How one delta on a channel is scanned: its own view and the combined view. */
typedef enum pair_shape {
    PAIR_GENERIC,  /* each used view through its own loop */
    PAIR_PH_LN,    /* channel view VIEW_PHRASES, combined VIEW_LINES */
    PAIR_PH_RG,    /* channel view VIEW_PHRASES, combined VIEW_RING with throttled rules */
    PAIR_PH_EV,    /* channel view VIEW_PHRASES, combined keeps only the evidence ring: one loop */
    PAIR_LN,       /* channel view unused, combined VIEW_LINES */
    PAIR_RG,       /* channel view unused, combined VIEW_RING */
    NPAIR_SHAPES
} pair_shape;

typedef void (*run_fn)(struct cc_watcher *, const struct viewplan *, struct view *,
                       const void *, size_t);
/* The whole work of one delta on one channel: its view and the combined view. */
typedef void (*pair_fn)(struct cc_watcher *, int channel, const void *, size_t);

typedef struct viewplan {
    view_shape shape;
    run_fn run[2][3];     /* the loop for deltas of kind 1, 2, 4; [1]: the ring has high bits */
    int used;             /* process this view at all */
    cc_automaton *ac[2];  /* [0] exact, [1] ASCII case folded */
    const cc_automaton *live_ac[2]; /* the ones that exist, packed */
    int nac;
    int builder;          /* track the pending line (line rules, or fences for TailRepeat) */
    int window;           /* keep the line window */
    int quotes;           /* track quote state (a suppress_quoted rule watches this view) */
    uint32_t ring_cap;    /* characters kept (0 = none) */
    uint32_t nphrase_rules;
    /* windowed rules: indices grouped by every_bytes (groups in order of their first rule,
     * rule order within a group); wend[k] = the end of k's group. The rules of a group share
     * their throttle points, kept in w->next of the group's first rule (eng_throttle). */
    uint32_t *windowed, nwindowed, *wend;
    uint32_t *suppress, nsuppress; /* rule indices, rule order */
    uint32_t *pfx_set, npfx, pfx_max; /* union of PrefixMonotony delimiters, longest prefix */
    uint32_t short_max;   /* lines this short keep their text (LineCycle, FillerLines) */
    int keep_all;         /* every line keeps its text (a LineRepeat rule may fire on count 1) */
    uint32_t seg_cap, word_cap; /* segments / words kept (BlockRepeat, VocabCollapse) */
    uint32_t tail_cap;          /* words of the word tail (WordRepeat; 0: none) */
    uint32_t *blocks, nblock; /* BlockRepeat rules (also checked at every newline), rule order */
} viewplan;

struct cc_ruleset {
    cc_options opt;
    uint32_t nrules;
    cc_rule_spec *rules;
    viewplan views[CC_NVIEWS];
    pair_shape pair_shape[2];
    pair_fn pair[2][2][3]; /* [channel][combined ring has high bits][kind 1, 2, 4] */
    pair_fn pair_batch[2][2][3]; /* the same for replay's batches (run_lines in scan.c) */
};

enum { FENCE_START, FENCE_TICKS, FENCE_TAG, FENCE_NO };

/* Slots of the pending line's code point buffer: the first 40 code points, plus a scratch slot
 * the builder writes to once the buffer is full (so the store needs no branch). */
#define BUF_SLOTS (CC_EVIDENCE_CHARS + 1)

typedef struct view {
    uint64_t chars, bytes, next_check, barrier;
    uint32_t state[2];
    uint32_t live_phrase_rules;
    /* pending line: hash and length through the last character and through the last
     * non-space; len_all stays 0 until the first non-space (leading whitespace is skipped) */
    uint64_t h_all, h_commit;
    uint32_t len_all, len_commit;
    uint32_t fence_k, fence_ch;
    uint8_t fence_st, fence_inside;
    /* quote state of the current line, and the list-line rule: after a phrase occurrence,
     * the gap of whitespace, quotes and separators that follows it */
    uint8_t dquote, curly, corner;
    uint8_t after_occ, in_gap, list_line;
    uint32_t backticks, gap_seps;
    uint64_t gap_end;     /* offset of the first character that ended the gap */
    uint32_t *buf;        /* BUF_SLOTS code points (the first min(len_all, 40) are the line's) */
    cc_window *win;
    cc_segscan *seg;      /* segments and words, allocated at their first use */
    cc_ring ring;
} view;

/* A suppress_quoted rule's first unquoted occurrence on the current line. */
typedef struct candidate {
    int has;
    uint32_t phrase;
    uint64_t offset;
} candidate;

struct cc_watcher {
    const cc_ruleset *rs;
    view v[CC_NVIEWS];
    uint64_t *next;
    uint64_t *seen;       /* segment rules: the scanner serial at their previous check */
    uint8_t *fired;
    candidate *cand;
    /* the small fields share one word (an idle watcher is mostly this struct) */
    int8_t last_channel;  /* -1 before the first delta */
    uint8_t ready[2];     /* per channel: both of its views are ready for deltas of this kind */
    uint8_t fast[2];      /* per channel, bit kind >> 1: a delta of that kind may go straight
                             to fast_row[kind >> 1] (set only for the last channel, kinds it is
                             ready for, until finish) */
    uint8_t finished;
    uint8_t oom;          /* sticky until the end of the call: an allocation failed */
    const pair_fn *fast_row; /* rs->pair[last channel][combined ring has high bits] */
    cc_hit *hits;
    size_t nhits, caphits;
    uint64_t sort_cmps;   /* comparisons spent ordering hits (see sort_hits) */
};

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

/* ---- shared by the units ------------------------------------------------------------- */

/* scan.c: the loop tables, indexed [shape][ring has high bits][kind 1, 2, 4]. */
extern const run_fn eng_view_loops[NVIEW_SHAPES][2][3];
extern const pair_fn eng_pair_loops[NPAIR_SHAPES][2][3];
extern const pair_fn eng_pair_loops_batch[NPAIR_SHAPES][2][3];
/* scan.c: the end of the view's current line (complete it, decide quoted candidates). */
void eng_line_end(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos);
/* detect.c: run one windowed rule's check on its view now. */
void eng_check_rule(cc_watcher *w, uint32_t ri, view *v, uint64_t pos);
/* detect.c: a throttle point of the view: run its windowed rules whose point has come, in rule
 * order, and set v->next_check to the next point of a rule that may still fire. */
void eng_throttle(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos);
/* detect.c: a newline on a view with BlockRepeat rules: they are checked there too. */
void eng_blocks_at_newline(cc_watcher *w, const viewplan *vp, view *v, uint64_t pos);
/* detect.c: the view's segment scanner, allocated at its first use and brought up to date;
 * NULL when out of memory. */
cc_segscan *eng_view_seg(cc_watcher *w, int vi);

static inline void builder_reset(const cc_ruleset *rs, view *v) {
    v->h_all = v->h_commit = FNV_OFFSET;
    v->len_all = v->len_commit = 0;
    v->fence_st = rs->opt.mask_fences ? FENCE_START : FENCE_NO;
    v->fence_k = 0;
}

/* A hit count as the int the public functions return. */
static inline int hit_count(size_t n) { return n < INT32_MAX ? (int)n : INT32_MAX; }

/* Append a hit (NULL and w->oom set when out of memory). */
static inline cc_hit *new_hit(cc_watcher *w, uint32_t rule, uint64_t offset, uint64_t pos) {
    if (w->nhits == w->caphits) {
        size_t cap = w->caphits ? w->caphits * 2 : 4;
        cc_hit *hits = realloc(w->hits, cap * sizeof *hits);
        if (!hits) {
            w->oom = 1;
            return NULL;
        }
        w->hits = hits;
        w->caphits = cap;
    }
    cc_hit *h = &w->hits[w->nhits++];
    memset(h, 0, sizeof *h);
    h->rule = rule;
    h->offset = offset;
    h->pos = pos;
    return h;
}

static inline void mark_fired(cc_watcher *w, uint32_t rule) {
    const cc_rule_spec *r = &w->rs->rules[rule];
    if (!r->once || w->fired[rule]) {
        w->fired[rule] = 1;
        return;
    }
    w->fired[rule] = 1;
    if (r->kind == CC_K_PHRASES) w->v[r->view].live_phrase_rules--;
}

#endif
