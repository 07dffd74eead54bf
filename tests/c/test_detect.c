/* Component tests of the windowed detectors (csrc/detect.h), without a watcher: build a line
 * window or a ring by hand, call one detector, check its finding. Built and run by
 * tests/test_c_detectors.py; exits non-zero on the first failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detect.h"

static int failures = 0;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

/* Push an ASCII line as the engine would (hash of the stripped code points, all text kept,
 * CC_LINE_PREFIX when a delimiter comes within the first `pfx` characters). */
static void push(cc_window *win, const char *line, const char *delims, uint32_t pfx) {
    uint32_t cps[CC_EVIDENCE_CHARS], n = 0;
    uint64_t h = 14695981039346656037ULL;
    uint32_t len = (uint32_t)strlen(line);
    for (uint32_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)line[i]) * 1099511628211ULL;
        if (n < CC_EVIDENCE_CHARS) cps[n++] = (unsigned char)line[i];
    }
    unsigned flags = 0;
    for (uint32_t i = 0; delims && i < pfx && i < n; i++)
        if (strchr(delims, (int)cps[i])) flags = CC_LINE_PREFIX;
    CHECK(cc_window_push(win, h, len, cps, n, n, flags) == 0);
}

static const uint32_t *points(const char *s, uint32_t *n) {
    static uint32_t buf[64];
    *n = 0;
    while (*s && *n < 64) buf[(*n)++] = (unsigned char)*s++;
    return buf;
}

static void test_line_repeat(void) {
    cc_window *win = cc_window_new(80);
    cc_rule_spec r = {0};
    eng_finding f = {0};
    r.kind = CC_K_LINE_REPEAT, r.min_lines = 30, r.min_count = 30, r.min_ratio = 0.35;
    r.min_run = 12;
    CHECK(eng_detect_line_repeat(NULL, &r, &f) == 0);
    for (int i = 0; i < 11; i++) push(win, "same line", NULL, 0), push(win, "other", NULL, 0);
    CHECK(eng_detect_line_repeat(win, &r, &f) == 0); /* 22 lines < min_lines */
    for (int i = 0; i < 12; i++) push(win, "same line", NULL, 0);
    CHECK(eng_detect_line_repeat(win, &r, &f) == 1); /* a run of 12 */
    CHECK(f.count == 23 && f.total == 34 && f.run == 12);
    CHECK(cc_entry_nbytes(f.line) == 9 && memcmp(cc_entry_bytes(f.line), "same line", 9) == 0);
    cc_window_free(win);
}

static void test_line_cycle(void) {
    cc_window *win = cc_window_new(80);
    cc_rule_spec r = {0};
    eng_finding f = {0};
    r.kind = CC_K_LINE_CYCLE, r.max_line_chars = 8, r.min_lines = 24, r.top = 3;
    r.cover_ratio = 0.6;
    for (int i = 0; i < 10; i++) push(win, "one.", NULL, 0), push(win, "two!", NULL, 0),
                                 push(win, "go.", NULL, 0);
    CHECK(eng_detect_line_cycle(win, &r, &f) == 1);
    CHECK(f.nlines == 3 && f.count == 30 && f.total == 30);
    /* the most recent of equal counts first */
    CHECK(memcmp(cc_entry_bytes(f.lines[0]), "go.", 3) == 0);
    r.top = 2; /* two lines cover 20 of 30: below 0.6? no, 0.67 - above */
    CHECK(eng_detect_line_cycle(win, &r, &f) == 1 && f.nlines == 2);
    r.top = 1; /* 1 x 10 / 30 < 0.6 */
    CHECK(eng_detect_line_cycle(win, &r, &f) == 0);
    cc_window_free(win);
}

static void test_filler_lines(void) {
    cc_window *win = cc_window_new(80);
    cc_rule_spec r = {0};
    eng_finding f = {0};
    uint32_t n;
    const uint32_t *set = points("ok", &n);
    uint32_t fillers[2] = {set[0], set[1]};
    r.kind = CC_K_FILLER_LINES, r.fillers = fillers, r.nfillers = 2, r.max_line_chars = 6;
    r.min_count = 5, r.min_ratio = 0.4;
    for (int i = 0; i < 4; i++) push(win, "ok.", NULL, 0), push(win, "a longer line", NULL, 0);
    CHECK(eng_detect_filler_lines(win, &r, &f) == 0); /* 4 < min_count */
    push(win, "k!", NULL, 0);
    CHECK(eng_detect_filler_lines(win, &r, &f) == 1);
    CHECK(f.count == 5 && f.total == 9);
    cc_window_free(win);
}

static void test_prefix_monotony(void) {
    cc_window *win = cc_window_new(80);
    cc_rule_spec r = {0};
    eng_finding f = {0};
    uint32_t delims[1] = {':'};
    r.kind = CC_K_PREFIX_MONOTONY, r.delimiters = delims, r.ndelimiters = 1;
    r.max_prefix_chars = 3, r.min_lines = 10, r.min_count = 10, r.min_ratio = 0.5;
    char line[16];
    for (int i = 0; i < 10; i++) {
        snprintf(line, sizeof line, "so: %d", i);
        push(win, line, ":", 3);
        push(win, "plain text", ":", 3);
    }
    CHECK(eng_detect_prefix_monotony(win, &r, &f) == 1);
    CHECK(f.ncps == 3 && f.cps[0] == 's' && f.cps[2] == ':' && f.count == 10 && f.total == 20);
    r.min_ratio = 0.6;
    CHECK(eng_detect_prefix_monotony(win, &r, &f) == 0);
    cc_window_free(win);
}

static void test_tail_repeat(void) {
    cc_ring ring = {0};
    cc_rule_spec r = {0};
    eng_finding f = {0};
    r.kind = CC_K_TAIL_REPEAT, r.window_chars = 64, r.max_period = 8, r.min_repeats = 3;
    r.min_chars = 12;
    CHECK(eng_detect_tail_repeat(&ring, 0, 0, &r, &f) == 0); /* nothing kept yet */
    CHECK(cc_ring_ready(&ring, 64, 0) == 0);
    const char *text = "intro: abcabcabcabcabc";
    uint32_t n = (uint32_t)strlen(text);
    for (uint32_t i = 0; i < n; i++) cc_ring_put(&ring, (unsigned char)text[i]);
    CHECK(eng_detect_tail_repeat(&ring, n, 0, &r, &f) == 1);
    CHECK(f.period == 3 && f.repeats == 5 && f.ncps == 3 && f.cps[0] == 'a');
    CHECK(eng_detect_tail_repeat(&ring, n, 1, &r, &f) == 1); /* no newline in the unit */
    r.min_chars = 20; /* the periodic tail is 15 characters */
    CHECK(eng_detect_tail_repeat(&ring, n, 0, &r, &f) == 0);
    cc_ring_free(&ring);
    /* a unit of lines: inside a fence it is left to BlockRepeat */
    cc_ring lines = {0};
    CHECK(cc_ring_ready(&lines, 64, 0) == 0);
    text = "intro\nab\nab\nab\nab\nab\n";
    n = (uint32_t)strlen(text);
    for (uint32_t i = 0; i < n; i++) cc_ring_put(&lines, (unsigned char)text[i]);
    r.min_chars = 12;
    CHECK(eng_detect_tail_repeat(&lines, n, 0, &r, &f) == 1 && f.period == 3);
    CHECK(eng_detect_tail_repeat(&lines, n, 1, &r, &f) == 0);
    cc_ring_free(&lines);
}

/* A ring holding `text` (ASCII) and a segment scanner brought up to date over it. */
static cc_segscan *scanned(cc_ring *ring, const char *text, uint32_t scap, uint32_t wcap) {
    uint32_t n = (uint32_t)strlen(text);
    CHECK(cc_ring_ready(ring, 2048, 0) == 0);
    for (uint32_t i = 0; i < n; i++) cc_ring_put(ring, (unsigned char)text[i]);
    cc_segscan *s = cc_segscan_new(scap, wcap, 1);
    CHECK(s != NULL);
    cc_segscan_scan(s, ring, n, 1);
    return s;
}

static void test_block_repeat(void) {
    cc_rule_spec r = {0};
    r.kind = CC_K_BLOCK_REPEAT;
    r.max_period = 8, r.min_repeats = 3, r.min_chars = 60, r.min_letters = 4;
    eng_finding f = {0};
    /* a two-line block three times, after a line of prose */
    const char *text = "Some prose first.\nthe first line of it\n  and the second one\n"
                       "the first line of it\n  and the second one\n"
                       "the first line of it\n  and the second one\n";
    cc_ring ring = {0};
    cc_segscan *s = scanned(&ring, text, 32, 0);
    CHECK(eng_detect_block_repeat(s, &ring, strlen(text), &r, &f) == 1);
    CHECK(f.period == 2 && f.repeats == 3 && f.total == 42);
    CHECK(f.ncps == 20 && memcmp(f.cps, (const uint32_t[]){'t', 'h', 'e'}, 3 * 4) == 0);
    r.min_repeats = 4; /* not four copies */
    CHECK(eng_detect_block_repeat(s, &ring, strlen(text), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* numbers differ: only the skeleton matches; too few letters never count */
    const char *steps = "Step 1: check it again.\nStep 2: check it again.\nStep 3: check it again.\n";
    s = scanned(&ring, steps, 32, 0);
    r.min_repeats = 3;
    CHECK(eng_detect_block_repeat(s, &ring, strlen(steps), &r, &f) == 0);
    r.near = 1;
    CHECK(eng_detect_block_repeat(s, &ring, strlen(steps), &r, &f) == 1 && f.period == 1);
    r.min_letters = 40;
    CHECK(eng_detect_block_repeat(s, &ring, strlen(steps), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
}

static void test_vocab_collapse(void) {
    cc_rule_spec r = {0};
    r.kind = CC_K_VOCAB_COLLAPSE;
    r.words = 12, r.max_distinct = 3;
    eng_finding f = {0};
    uint64_t seen = 0;
    /* the last word counts once it has ended */
    const char *text = "A start. its items its itemsThe items its items, itemsThe its items its its.";
    cc_ring ring = {0};
    cc_segscan *s = scanned(&ring, text, 0, 16);
    CHECK(eng_detect_vocab_collapse(s, &ring, strlen(text), &r, &f, &seen) == 1);
    CHECK(f.count == 3 && f.total == 12 && f.ncps > 0);
    r.max_distinct = 2;
    seen = 0;
    CHECK(eng_detect_vocab_collapse(s, &ring, strlen(text), &r, &f, &seen) == 0);
    /* the newest 5 words hold 3 distinct ones: no hit before 12 - 5 + 1 more words */
    CHECK(seen == 12 - 5);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* one_line: the twelve words must follow the last newline; on a miss, the words still to
     * come are skipped */
    const char *split = "A start. its items its itemsThe items its\nitems, itemsThe its items its its.";
    r.max_distinct = 3;
    s = scanned(&ring, split, 0, 16);
    CHECK(eng_detect_vocab_collapse(s, &ring, strlen(split), &r, &f, &seen) == 1);
    r.one_line = 1;
    seen = 5;
    CHECK(eng_detect_vocab_collapse(s, &ring, strlen(split), &r, &f, &seen) == 0);
    CHECK(seen == 5 + 12 - 6 - 1);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* a list is not a collapse: three quarters of the gaps hold a separator */
    const char *list = "Flips: heads, tails, tails, heads, heads, tails, heads, tails, tails, heads, "
                       "heads, tails, heads.";
    r.max_distinct = 3;
    s = scanned(&ring, list, 0, 16);
    CHECK(eng_detect_vocab_collapse(s, &ring, strlen(list), &r, &f, &seen) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
}

/* The scanner with a word tail of `tcap` words, fed `text`. */
static cc_segscan *tail_scanned(cc_ring *ring, const char *text, uint32_t tcap, int mask) {
    uint32_t n = (uint32_t)strlen(text);
    CHECK(cc_ring_ready(ring, 2048, 0) == 0);
    for (uint32_t i = 0; i < n; i++) cc_ring_put(ring, (unsigned char)text[i]);
    cc_segscan *s = cc_segscan_new(0, 1, mask);
    CHECK(s != NULL);
    s->tail = cc_wordtail_new(tcap);
    CHECK(s->tail != NULL);
    cc_segscan_scan(s, ring, n, mask);
    return s;
}

static void test_word_repeat(void) {
    cc_rule_spec r = {0};
    r.kind = CC_K_WORD_REPEAT;
    r.max_period = 12, r.min_repeats = 3, r.min_chars = 60, r.min_words = 2;
    eng_finding f = {0};
    /* a line loop seen at its third copy's last word, before the line ends; punctuation
     * between the words is not compared (the first copy ends with "," the others with ".") */
    const char *text = "Some prose first.\nLet me check the caller again, it looks wrong,\n"
                       "Let me check the caller again, it looks wrong.\n"
                       "Let me check the caller again, it looks wrong.";
    cc_ring ring = {0};
    cc_segscan *s = tail_scanned(&ring, text, 36, 1);
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(text), &r, &f) == 1);
    CHECK(f.period == 9 && f.repeats == 3 && f.total == 47);
    /* the quote starts at the unit's first word, aligned to the run */
    CHECK(f.ncps == 40 && f.cps[0] == 'L' && f.cps[1] == 'e');
    r.min_chars = 200; /* the run spans less */
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(text), &r, &f) == 0);
    r.min_chars = 60, r.min_words = 9; /* all nine words of the unit are lexical */
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(text), &r, &f) == 1);
    r.min_words = 10;
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(text), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* a list of the same words is not a loop; neither are numbers (no lexical word) */
    r.min_words = 1, r.min_chars = 10;
    const char *list = "Flips: heads, tails, heads, tails, heads, tails, heads, tails";
    s = tail_scanned(&ring, list, 36, 1);
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(list), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    const char *zeros = "x = [0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0";
    s = tail_scanned(&ring, zeros, 36, 1);
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(zeros), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* words inside code fences count only when fences are not masked */
    const char *fenced = "```css\n  background-color: #f2f2f2;\n  background-color: #f2f2f2;\n"
                         "  background-color: #f2f2f2;\n";
    r.min_words = 2, r.min_chars = 60;
    s = tail_scanned(&ring, fenced, 36, 0);
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(fenced), &r, &f) == 1);
    CHECK(f.period == 3 && f.ncps > 0 && f.cps[0] == 'b');
    cc_segscan_free(s);
    cc_ring_free(&ring);
    s = tail_scanned(&ring, fenced, 36, 1);
    CHECK(eng_detect_word_repeat(s->tail, &ring, strlen(fenced), &r, &f) == 0);
    cc_segscan_free(s);
    cc_ring_free(&ring);
}

static void test_segment_repeat(void) {
    cc_rule_spec r = {0};
    r.kind = CC_K_SEGMENT_REPEAT;
    r.window = 6, r.top = 2, r.min_count = 6, r.min_letters = 4;
    eng_finding f = {0};
    uint64_t seen = 0;
    /* a word flips between two values, a counter runs: two skeletons cover the window */
    const char *text = "Intro line here.\nPia has 1 keys\nPia had 2 keys\nPia has 3 keys\n"
                       "Pia had 4 keys\nPia had 5 keys\nPia has 6 keys\n";
    cc_ring ring = {0};
    cc_segscan *s = scanned(&ring, text, 8, 0);
    CHECK(eng_detect_segment_repeat(s, &ring, strlen(text), &r, &f, &seen) == 1);
    CHECK(f.count == 6 && f.total == 6 && f.ncps == 14 && f.cps[0] == 'P' && f.cps[5] == 'a');
    r.top = 1; /* a miss at the second skeleton (the newest two), which stays 4 more segments */
    seen = 100;
    CHECK(eng_detect_segment_repeat(s, &ring, strlen(text), &r, &f, &seen) == 0);
    CHECK(seen == 100 + 5 - 1);
    cc_segscan_free(s);
    cc_ring_free(&ring);
    /* distinct lines: the check stops at the third skeleton, which stays for 4 more segments */
    const char *prose = "one line here\nanother line\nand a third\nand a fourth one\n"
                        "the fifth line\nthe sixth line\n";
    s = scanned(&ring, prose, 8, 0);
    r.top = 2;
    seen = 0;
    CHECK(eng_detect_segment_repeat(s, &ring, strlen(prose), &r, &f, &seen) == 0);
    CHECK(seen == 6 - 2 - 1);
    cc_segscan_free(s);
    cc_ring_free(&ring);
}

static void test_structure_flood(void) {
    cc_ring ring = {0};
    cc_rule_spec r = {0};
    eng_finding f = {0};
    r.kind = CC_K_STRUCTURE_FLOOD, r.min_chars = 12;
    CHECK(cc_ring_ready(&ring, 64, 0) == 0);
    const char *text = "words\n# \n# \n# \n# \n# \n";
    uint32_t n = (uint32_t)strlen(text);
    for (uint32_t i = 0; i < n; i++) cc_ring_put(&ring, (unsigned char)text[i]);
    CHECK(eng_detect_structure_flood(&ring, n, &r, &f) == 1);
    CHECK(f.total == 12 && f.ncps == 1 && f.cps[0] == '#');
    CHECK(eng_detect_structure_flood(&ring, 11, &r, &f) == 0); /* not that much since a switch */
    r.min_chars = 18; /* reaches back to "words" */
    CHECK(eng_detect_structure_flood(&ring, n, &r, &f) == 0);
    cc_ring_free(&ring);
}

int main(void) {
    test_line_repeat();
    test_line_cycle();
    test_filler_lines();
    test_prefix_monotony();
    test_tail_repeat();
    test_block_repeat();
    test_vocab_collapse();
    test_segment_repeat();
    test_word_repeat();
    test_structure_flood();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("all detector checks passed\n");
    return failures ? 1 : 0;
}
