/* The streaming engine: a compiled ruleset and the watchers that scan streams with it.
 *
 * Plain C99, no Python. The Cython layer (src/contextcare/_engine.pyx) hands in the code points
 * of a str (1, 2 or 4 bytes each, as CPython stores them) and reads detections back as hit
 * records. What a rule detects, and when, is specified in docs/semantics.md; the pure-Python
 * engine contextcare.reference implements the same semantics and the test suite compares them.
 *
 * Objects and ownership
 *   cc_ruleset  compiled once from rule specs; immutable afterwards. Any number of threads may
 *               use one ruleset at the same time (watchers only read it).
 *   cc_watcher  the state of one stream. It borrows its ruleset: the ruleset must outlive every
 *               watcher made from it. A watcher is not thread-safe: one thread at a time (the
 *               caller serialises; the Cython layer raises when two threads meet).
 *   cc_hit      detections, owned by the watcher that produced them, valid until the next
 *               cc_watcher_feed / _finish / _reset / _clear_hits / _free of that watcher.
 *
 * Status codes (int): CC_OK (0) or a negative CC_ERR_*. Functions that return a count return
 * it as a non-negative int and a status on failure. A watcher is still usable after
 * CC_ERR_NOMEM (the detections of the failing call may be incomplete).
 */
#ifndef CC_ENGINE_H
#define CC_ENGINE_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------- limits -- */
/* The ranges the core relies on; cc_ruleset_new rejects a spec outside them with
 * CC_ERR_LIMIT. The Python layer reads the same numbers (through _engine.pxd) for its own,
 * friendlier checks. */
#define CC_EVIDENCE_CHARS 40          /* code points of line / unit evidence kept */
#define CC_MAX_COUNT 65535            /* line_window and every line count of a rule */
#define CC_MAX_EVERY_BYTES 4294967296ULL /* every_bytes of a windowed rule, >= 1 */
#define CC_MAX_CYCLE_TOP 64           /* LineCycle.top */
#define CC_MAX_PREFIX_CHARS 8         /* PrefixMonotony.max_prefix_chars */
#define CC_MAX_FILLERS 256            /* code points in FillerLines.fillers */
#define CC_MAX_DELIMITERS 64          /* code points in PrefixMonotony.delimiters */
#define CC_MAX_WINDOW_CHARS 65536     /* TailRepeat.window_chars */
#define CC_MAX_TAIL_CHARS 65536       /* cc_options.evidence_chars (the tail kept) */
#define CC_MAX_PHRASE_CHARS 4096      /* code points of one phrase; also min_line_chars */
#define CC_MAX_PHRASES 1048576        /* phrases of one ruleset, all rules together */
#define CC_MAX_PHRASE_BYTES 16777216  /* UTF-8 bytes of all phrases together */
#define CC_MAX_BLOCK_SEGMENTS 4096    /* BlockRepeat.max_period x min_repeats */
#define CC_MAX_BLOCK_PERIOD 1024      /* BlockRepeat.max_period */
#define CC_MAX_BLOCK_REPEATS 64       /* BlockRepeat.min_repeats */
#define CC_MAX_SEGMENT_EVERY_BYTES 4096 /* every_bytes of BlockRepeat and VocabCollapse */
#define CC_MAX_VOCAB_WORDS 4096       /* VocabCollapse.words */
#define CC_MAX_WORD_PERIOD 256        /* WordRepeat.max_period, also min_words */
#define CC_MAX_WORD_TAIL 1024         /* WordRepeat.max_period x min_repeats (words kept) */

/* ------------------------------------------------------------------------- constants -- */

/* Channel views. A rule watches one; a delta is fed on TEXT or REASONING and also reaches
 * COMBINED (both channels in arrival order). */
enum { CC_VIEW_TEXT = 0, CC_VIEW_REASONING = 1, CC_VIEW_COMBINED = 2, CC_NVIEWS = 3 };

/* Detectors. CC_K_PHRASES matches phrases per character (Aho-Corasick); the others are
 * "windowed": checked every every_bytes UTF-8 bytes of their view and once more at finish. */
enum {
    CC_K_PHRASES = 1,
    CC_K_LINE_REPEAT,
    CC_K_LINE_CYCLE,
    CC_K_FILLER_LINES,
    CC_K_PREFIX_MONOTONY,
    CC_K_TAIL_REPEAT,
    CC_K_BLOCK_REPEAT,
    CC_K_VOCAB_COLLAPSE,
    CC_K_SEGMENT_REPEAT,
    CC_K_STRUCTURE_FLOOD,
    CC_K_WORD_REPEAT,
    CC_K_END /* one past the last kind */
};

enum {
    CC_OK = 0,
    CC_ERR_NOMEM = -1,    /* out of memory */
    CC_ERR_FINISHED = -2, /* feed after finish (reset first) */
    CC_ERR_LIMIT = -3,    /* a value outside the limits above (cc_ruleset_new) */
    CC_ERR_INVALID = -4,  /* an inconsistent spec: unknown kind or view, a phrase of a rule that
                             is not a phrase rule, an empty phrase (cc_ruleset_new) */
    CC_ERR_TOO_BIG = -5   /* a phrase automaton over max_table_bytes or 65534 distinct code
                             points (cc_ruleset_new) */
};

/* ------------------------------------------------------------------------- rule specs -- */

/* One rule. Each field has one meaning; a kind reads only its own fields (the others are
 * ignored, 0 is fine). Code point sets are copied by cc_ruleset_new. */
typedef struct cc_rule_spec {
    int kind;                 /* CC_K_* */
    int view;                 /* CC_VIEW_* */
    int once;                 /* fire at most once per attempt (until reset) */
    /* CC_K_PHRASES */
    int ignore_case;          /* fold ASCII letters */
    int suppress_quoted;      /* skip quoted mentions and list lines (decided at line end) */
    /* every windowed kind */
    uint64_t every_bytes;     /* [1, CC_MAX_EVERY_BYTES] */
    /* line kinds (all counts in [0 or 1, CC_MAX_COUNT]) */
    uint32_t min_lines;       /* LINE_REPEAT, LINE_CYCLE, PREFIX_MONOTONY */
    uint32_t min_count;       /* LINE_REPEAT, FILLER_LINES, PREFIX_MONOTONY */
    uint32_t min_run;         /* LINE_REPEAT; 0 = off */
    double min_ratio;         /* LINE_REPEAT, FILLER_LINES, PREFIX_MONOTONY; (0, 1] */
    uint32_t top;             /* LINE_CYCLE; [1, CC_MAX_CYCLE_TOP] */
    double cover_ratio;       /* LINE_CYCLE; (0, 1] */
    uint32_t max_line_chars;  /* LINE_CYCLE, FILLER_LINES; [1, CC_EVIDENCE_CHARS] */
    uint32_t max_prefix_chars; /* PREFIX_MONOTONY; [1, CC_MAX_PREFIX_CHARS] */
    const uint32_t *fillers;  /* FILLER_LINES; [1, CC_MAX_FILLERS] code points */
    uint32_t nfillers;
    const uint32_t *delimiters; /* PREFIX_MONOTONY; [1, CC_MAX_DELIMITERS] code points */
    uint32_t ndelimiters;
    /* CC_K_TAIL_REPEAT */
    uint32_t window_chars;    /* [2, CC_MAX_WINDOW_CHARS] */
    uint32_t max_period;      /* [1, window_chars / 2]; STRUCTURE_FLOOD: [0, min_chars - 1] */
    uint32_t min_repeats;     /* [2, window_chars]; BLOCK_REPEAT: [2, CC_MAX_BLOCK_REPEATS] */
    uint32_t min_chars;       /* [2, window_chars]; BLOCK_REPEAT: [1, CC_MAX_COUNT];
                                 STRUCTURE_FLOOD: [2, CC_MAX_WINDOW_CHARS] */
    /* CC_K_BLOCK_REPEAT (also max_period, min_repeats, min_chars above) */
    int near;                 /* compare segment skeletons, not their exact text */
    uint32_t min_letters;     /* per segment of the unit, [0, CC_MAX_COUNT] */
    uint32_t fence_letters;   /* letters the periodic run needs inside a code fence,
                                 [0, CC_MAX_COUNT] */
    /* CC_K_VOCAB_COLLAPSE */
    uint32_t words;           /* [2, CC_MAX_VOCAB_WORDS] */
    uint32_t max_distinct;    /* [1, words - 1] */
    int one_line;             /* the words must all be on the current line */
    /* CC_K_SEGMENT_REPEAT (also top, min_count, min_letters above) */
    uint32_t window;          /* segments, [1, CC_MAX_BLOCK_SEGMENTS] */
    int fences;               /* SEGMENT_REPEAT: count the segments inside code fences */
    uint32_t top_letters;     /* SEGMENT_REPEAT: letters of the longest top skeleton,
                                 [0, CC_MAX_COUNT] */
    /* CC_K_WORD_REPEAT (also max_period, min_repeats, min_chars above: max_period in
     * [1, CC_MAX_WORD_PERIOD], max_period x min_repeats <= CC_MAX_WORD_TAIL) */
    uint32_t min_words;       /* lexical words in the unit, [0, CC_MAX_WORD_PERIOD] */
} cc_rule_spec;

/* One phrase of a CC_K_PHRASES rule. */
typedef struct cc_phrase_spec {
    const unsigned char *bytes; /* UTF-8 (lone surrogates as 3 bytes), not copied */
    uint32_t len;               /* bytes, >= 1 */
    uint32_t rule;              /* index of its rule (a CC_K_PHRASES rule) */
    uint32_t index;             /* index within the rule (reported in cc_hit.phrase) */
} cc_phrase_spec;

typedef struct cc_options {
    uint32_t line_window;     /* lines per window, [1, CC_MAX_COUNT] */
    uint32_t min_line_chars;  /* shorter stripped lines are not counted, [1, CC_MAX_PHRASE_CHARS] */
    uint32_t evidence_chars;  /* tail kept for cc_watcher_tail, [0, CC_MAX_TAIL_CHARS] */
    int mask_fences;          /* lines inside ``` fences are not counted */
    size_t max_table_bytes;   /* per phrase automaton */
    size_t dense_bytes;       /* dense rows per phrase automaton; 0 = CC_AC_DENSE_BYTES */
} cc_options;

/* Why cc_ruleset_new failed: the status, the index of the failing rule or phrase spec (-1 when
 * none is to blame), the field at fault (NULL when none) and a message for people. */
typedef struct cc_compile_error {
    int status;
    long long rule;
    long long phrase;
    const char *field;
    char message[256];
} cc_compile_error;

typedef struct cc_ruleset cc_ruleset;
typedef struct cc_watcher cc_watcher;

/* One detection. Which fields are set depends on the rule's kind:
 *   PHRASES          phrase (index in its rule), offset = end of the occurrence
 *   LINE_REPEAT      text = the line, count, total (lines in window), ratio, run
 *   LINE_CYCLE       text = the lines concatenated, nparts / part_len, count, total, ratio
 *   FILLER_LINES     count, total, ratio
 *   PREFIX_MONOTONY  text = the prefix, count, total, ratio
 *   TAIL_REPEAT      text = the unit (first CC_EVIDENCE_CHARS code points), period, repeats
 *   BLOCK_REPEAT     text = the unit's first segment, period (segments), repeats, total
 *   VOCAB_COLLAPSE   text = the quote from a word start, count (distinct words), total (words)
 *   SEGMENT_REPEAT   text = the newest segment of the top skeleton, count (covered), total
 *   STRUCTURE_FLOOD  text = the last non-blank line of the flood, total (min_chars)
 *   WORD_REPEAT      text = the quote from the unit's first word, period (words), repeats, total
 * Texts are UTF-8 (lone surrogates as 3 bytes) and not NUL-terminated. */
typedef struct cc_hit {
    uint32_t rule;        /* rule index */
    uint32_t phrase;
    uint64_t offset;      /* code points fed to the rule's view when it fired */
    uint64_t pos;         /* order key inside one call: 0 = before the first character */
    uint32_t count, total, run, period, repeats;
    double ratio;
    unsigned char *text;
    uint32_t text_len;
    uint32_t nparts;
    uint32_t *part_len;
} cc_hit;

/* ---------------------------------------------------------------------------- ruleset -- */

/* Compile nrules rule specs and nphrases phrase specs. Every limit above is checked first.
 * On success returns CC_OK and stores the ruleset in *out; else returns the status, stores
 * NULL and, when err is not NULL, fills *err (rule / phrase index, field, message). Nothing
 * passed in is retained (sets and phrases are copied). Thread-safe (no shared state). */
int cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                   const cc_phrase_spec *phrases, size_t nphrases, cc_ruleset **out,
                   cc_compile_error *err);

/* Free a ruleset (NULL is fine). No watcher of it may be used afterwards. */
void cc_ruleset_free(cc_ruleset *rs);

/* Bytes held by the ruleset (automata included). */
size_t cc_ruleset_memory(const cc_ruleset *rs);

/* ---------------------------------------------------------------------------- watcher -- */

/* A fresh watcher of rs (borrowed: rs must outlive it), or NULL when out of memory. */
cc_watcher *cc_watcher_new(const cc_ruleset *rs);

/* Free a watcher and its hits (NULL is fine). */
void cc_watcher_free(cc_watcher *w);

/* An independent watcher in the same state (same ruleset; pending hits are not copied), or
 * NULL when out of memory. */
cc_watcher *cc_watcher_copy(const cc_watcher *w);

/* Back to the fresh state: a new attempt, rules may fire again, hits are freed. */
void cc_watcher_reset(cc_watcher *w);

/* Bytes held by the watcher (grows with what it has seen, up to its windows). */
size_t cc_watcher_memory(const cc_watcher *w);

/* 1 after cc_watcher_finish (until reset), else 0. */
int cc_watcher_finished(const cc_watcher *w);

/* 1 when rule index `rule` (< the ruleset's nrules) fired in this attempt, else 0. */
int cc_watcher_fired(const cc_watcher *w, uint32_t rule);

/* Test hook: comparisons spent ordering the hits of each call, since the watcher was made. */
uint64_t cc_watcher_sort_cmps(const cc_watcher *w);

/* Feed len code points of `kind` bytes each (1, 2 or 4: Latin-1, UCS-2, UCS-4) on `channel`
 * (CC_VIEW_TEXT or CC_VIEW_REASONING). New detections are appended to the hit list, in stream
 * order (ties by rule index). Returns the number of hits in the list (>= 0), CC_ERR_FINISHED
 * after finish, or CC_ERR_NOMEM. */
int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel);

/* End of stream: complete the pending lines and run every windowed rule once more. Appends
 * hits; CC_OK (also when already finished) or CC_ERR_NOMEM. */
int cc_watcher_finish(cc_watcher *w);

/* The hit list (*n entries), valid until the next call that changes the watcher. */
const cc_hit *cc_watcher_hits(const cc_watcher *w, size_t *n);

/* Free the hits in the list (after the caller read them). */
void cc_watcher_clear_hits(cc_watcher *w);

/* Copy the last min(n, evidence_chars, fed) code points fed (both channels, arrival order) to
 * out (room for n); returns how many. */
size_t cc_watcher_tail(const cc_watcher *w, size_t n, uint32_t *out);

/* ------------------------------------------------------------------------------ replay -- */

/* Check delta end offsets for cc_replay: non-decreasing, within [0, len], the last equal to
 * len (none at all only when len is 0). Returns -1 when fine, else the index of the first bad
 * offset (n when the last is wrong). */
long long cc_check_splits(const int64_t *splits, size_t n, size_t len);

/* Feed a recorded trace into w (fresh or reset): the text cut at the end offsets `splits`
 * (checked with cc_check_splits first), one delta each on `channel`, then finish; consecutive
 * deltas are walked in batches of ~4096 code points, which gives the same detections (see
 * watcher.c). Hits are left in the list as by cc_watcher_feed. CC_OK, CC_ERR_FINISHED or
 * CC_ERR_NOMEM. */
int cc_replay(cc_watcher *w, const void *data, int kind, size_t len, const int64_t *splits,
              size_t nsplits, int channel);

#endif
