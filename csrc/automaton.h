/* A dense Aho–Corasick DFA over UTF-8 bytes, built once and shared read-only.
 *
 * Input bytes map to byte classes (bytes that occur in no phrase share class 0); state ids are
 * premultiplied by the number of classes, so one step is one load: s = trans[s + cls[b]].
 * States are numbered so that every state with an output comes last: a match test is one
 * comparison, s >= match_base. Outputs of a state list, for each rule with a phrase ending
 * there, the longest such phrase (sorted by rule). ASCII case folding, when asked for, is done
 * by the class map itself (A-Z share the classes of a-z), so the step is the same.
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
} cc_output;

typedef struct cc_automaton {
    uint8_t cls[256];
    uint32_t nclasses;
    uint32_t nstates;
    uint32_t match_base;  /* premultiplied id of the first state with outputs */
    uint32_t *trans;      /* nstates * nclasses premultiplied ids */
    uint32_t *out_start;  /* per output state (id - first output state), CSR offsets, +1 */
    cc_output *out;
    size_t nout;
} cc_automaton;

/* Build an automaton. Returns NULL and writes a message to err on failure (out of memory, or
 * the table would exceed max_table_bytes). */
cc_automaton *cc_automaton_build(const cc_phrase_in *phrases, size_t n, int fold,
                                 size_t max_table_bytes, char *err, size_t errlen);
void cc_automaton_free(cc_automaton *a);
size_t cc_automaton_memory(const cc_automaton *a);

static inline const cc_output *cc_automaton_outputs(const cc_automaton *a, uint32_t state,
                                                    uint32_t *count) {
    uint32_t k = (state - a->match_base) / a->nclasses;
    *count = a->out_start[k + 1] - a->out_start[k];
    return a->out + a->out_start[k];
}

#endif
