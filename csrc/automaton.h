/* A dense Aho–Corasick DFA over code points, built once and shared read-only.
 *
 * Code points map to classes (code points that occur in no phrase share class 0) through a
 * two-level table for the BMP (one page of 256 class ids per high byte that holds a phrase
 * character, one shared page of zeros for the rest) and a sorted list beyond it. State ids are
 * premultiplied by the number of classes, so one step is one load: s = trans[s + class(cp)].
 * States are numbered so that every state with an output comes last: a match test is one
 * comparison, s >= match_base. Outputs of a state list, for each rule with a phrase ending
 * there, the longest such phrase (sorted by rule).
 *
 * Matching code points is matching UTF-8 bytes (UTF-8 is self-synchronising, and lone
 * surrogates are whole code points either way), one step a character instead of one a byte.
 * ASCII case folding, when asked for, is done by the class map (A-Z share the classes of a-z).
 * The caller may name "special" code points (line ends, quotes): they get the highest class ids,
 * so a loop learns that it must look closer at a character from its class alone.
 */
#ifndef CC_AUTOMATON_H
#define CC_AUTOMATON_H

#include <stddef.h>
#include <stdint.h>

typedef struct cc_phrase_in {
    const unsigned char *bytes; /* UTF-8 (lone surrogates encoded as 3 bytes) */
    uint32_t len;               /* bytes, >= 1 */
    uint32_t rule;              /* rule index in the ruleset */
    uint32_t index;             /* phrase index within the rule */
} cc_phrase_in;

typedef struct cc_output {
    uint32_t rule;
    uint32_t phrase;
    uint32_t chars; /* code points of the phrase */
} cc_output;

typedef struct cc_automaton {
    uint32_t nclasses;
    uint32_t nstates;
    uint32_t match_base;   /* premultiplied id of the first state with outputs */
    uint32_t special_base; /* classes >= this are the caller's special code points */
    uint32_t *trans;       /* nstates * nclasses premultiplied ids */
    uint32_t pages[256];   /* BMP: offset in page_cls of the page of cp >> 8 */
    uint16_t *page_cls;    /* npages * 256 class ids; page 0 is all zero */
    uint32_t npages;
    uint32_t *astral_cp;   /* sorted code points above U+FFFF that have a class */
    uint16_t *astral_cls;
    uint32_t nastral;
    uint32_t *out_start;   /* per output state (id - first output state), CSR offsets, +1 */
    cc_output *out;
    size_t nout;
} cc_automaton;

/* Build an automaton. `special` (nspecial code points, may be NULL) get classes of their own
 * at or above special_base. Returns NULL on failure, writes a message to err and the status to
 * *status (when not NULL): CC_ERR_NOMEM, or CC_ERR_TOO_BIG when the table would exceed
 * max_table_bytes or the phrases use more than 65534 distinct code points. */
cc_automaton *cc_automaton_build(const cc_phrase_in *phrases, size_t n, int fold,
                                 const uint32_t *special, size_t nspecial,
                                 size_t max_table_bytes, char *err, size_t errlen,
                                 int *status);
void cc_automaton_free(cc_automaton *a);
size_t cc_automaton_memory(const cc_automaton *a);

uint32_t cc_automaton_astral_class(const cc_automaton *a, uint32_t cp);

static inline uint32_t cc_automaton_class(const cc_automaton *a, uint32_t cp) {
    if (cp < 0x10000) return a->page_cls[a->pages[cp >> 8] + (cp & 0xFF)];
    return cc_automaton_astral_class(a, cp);
}

static inline uint32_t cc_automaton_step(const cc_automaton *a, uint32_t s, uint32_t cp) {
    return a->trans[s + cc_automaton_class(a, cp)];
}

static inline const cc_output *cc_automaton_outputs(const cc_automaton *a, uint32_t state,
                                                    uint32_t *count) {
    uint32_t k = (state - a->match_base) / a->nclasses;
    *count = a->out_start[k + 1] - a->out_start[k];
    return a->out + a->out_start[k];
}

#endif
