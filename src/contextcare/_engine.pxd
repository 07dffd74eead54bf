# Declarations of the C core (csrc/engine.h) for the Cython layer.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t


cdef extern from "engine.h" nogil:
    enum:
        CC_VIEW_TEXT
        CC_VIEW_REASONING
        CC_VIEW_COMBINED
    enum:
        CC_K_PHRASES
        CC_K_LINE_REPEAT
        CC_K_LINE_CYCLE
        CC_K_FILLER_LINES
        CC_K_PREFIX_MONOTONY
        CC_K_TAIL_REPEAT
        CC_K_BLOCK_REPEAT
        CC_K_VOCAB_COLLAPSE
        CC_K_SEGMENT_REPEAT
        CC_K_STRUCTURE_FLOOD
        CC_K_WORD_REPEAT
    enum:
        CC_OK
        CC_ERR_NOMEM
        CC_ERR_FINISHED
        CC_ERR_LIMIT
        CC_ERR_INVALID
        CC_ERR_TOO_BIG

    # limits (engine.h): the Python layer reads these instead of repeating the numbers
    enum:
        CC_EVIDENCE_CHARS
        CC_MAX_COUNT
        CC_MAX_CYCLE_TOP
        CC_MAX_PREFIX_CHARS
        CC_MAX_FILLERS
        CC_MAX_DELIMITERS
        CC_MAX_WINDOW_CHARS
        CC_MAX_TAIL_CHARS
        CC_MAX_PHRASE_CHARS
        CC_MAX_PHRASES
        CC_MAX_PHRASE_BYTES
        CC_MAX_BLOCK_SEGMENTS
        CC_MAX_BLOCK_PERIOD
        CC_MAX_BLOCK_REPEATS
        CC_MAX_SEGMENT_EVERY_BYTES
        CC_MAX_VOCAB_WORDS
        CC_MAX_WORD_PERIOD
        CC_MAX_WORD_TAIL
    const unsigned long long CC_MAX_EVERY_BYTES

    ctypedef struct cc_rule_spec:
        int kind, view, once, ignore_case, suppress_quoted
        uint64_t every_bytes
        uint32_t min_lines, min_count, min_run
        double min_ratio
        uint32_t top
        double cover_ratio
        uint32_t max_line_chars, max_prefix_chars
        const uint32_t *fillers
        uint32_t nfillers
        const uint32_t *delimiters
        uint32_t ndelimiters
        uint32_t window_chars, max_period, min_repeats, min_chars
        int near
        int one_line
        uint32_t min_letters, words, max_distinct, window, min_words
        uint32_t fence_letters
        int fences
        uint32_t top_letters

    ctypedef struct cc_compile_error:
        int status
        long long rule
        long long phrase
        const char *field
        char message[256]

    ctypedef struct cc_phrase_spec:
        const unsigned char *bytes
        uint32_t len
        uint32_t rule
        uint32_t index

    ctypedef struct cc_options:
        uint32_t line_window, min_line_chars, evidence_chars
        int mask_fences
        size_t max_table_bytes
        size_t dense_bytes

    ctypedef struct cc_ruleset:
        pass
    ctypedef struct cc_watcher:
        pass

    ctypedef struct cc_hit:
        uint32_t rule
        uint32_t phrase
        uint64_t offset
        uint64_t pos
        uint32_t count, total, run, period, repeats
        double ratio
        unsigned char *text
        uint32_t text_len
        uint32_t nparts
        uint32_t *part_len

    int cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                       const cc_phrase_spec *phrases, size_t nphrases, cc_ruleset **out,
                       cc_compile_error *err)
    void cc_ruleset_free(cc_ruleset *rs)
    size_t cc_ruleset_memory(const cc_ruleset *rs)

    cc_watcher *cc_watcher_new(const cc_ruleset *rs)
    void cc_watcher_free(cc_watcher *w)
    cc_watcher *cc_watcher_copy(const cc_watcher *w)
    void cc_watcher_reset(cc_watcher *w)
    size_t cc_watcher_memory(const cc_watcher *w)
    int cc_watcher_finished(const cc_watcher *w)
    int cc_watcher_fired(const cc_watcher *w, uint32_t rule)
    uint64_t cc_watcher_sort_cmps(const cc_watcher *w)
    int cc_watcher_feed(cc_watcher *w, const void *data, int kind, size_t len, int channel)
    int cc_watcher_finish(cc_watcher *w)
    const cc_hit *cc_watcher_hits(const cc_watcher *w, size_t *n)
    void cc_watcher_clear_hits(cc_watcher *w)
    size_t cc_watcher_tail(const cc_watcher *w, size_t n, uint32_t *out)
    long long cc_check_splits(const int64_t *splits, size_t n, size_t len)
    int cc_replay(cc_watcher *w, const void *data, int kind, size_t len, const int64_t *splits,
                  size_t nsplits, int channel)
