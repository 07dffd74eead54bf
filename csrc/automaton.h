/* An Aho–Corasick automaton over code points whose size follows the phrases, built once and
 * shared read-only.
 *
 * Code points map to classes (code points that occur in no phrase share class 0) through a
 * two-level table for the BMP (one page of 256 class ids per high byte that holds a phrase
 * character, one shared page of zeros for the rest) and a sorted list beyond it.
 *
 * States come in two kinds (the split is chosen by a byte budget, shallow states first):
 *
 * - dense states: the root and the shallowest states in breadth-first order, with a full DFA row
 *   (one 16-bit entry per class, failure links already resolved): one step is one load,
 *   dense[id * nclasses + class]. An entry below ndense is the next state itself (a dense state
 *   without outputs: nearly every step); the others index a small exit table of full ids. The
 *   text spends nearly all its time in these rows (most characters lead back to the root or
 *   near it), and 16-bit rows keep twice as many of them in the same cache.
 * - sparse states: the deeper states, stored as a double-array trie (base + class = the slot of
 *   the child, check[slot] = the parent, so a lookup costs one load and a compare whatever the
 *   fan-out) plus a failure link. A miss follows failure links until a child is found or a dense
 *   state is reached (the root's row is also kept as full ids, for the misses that end there).
 *   Their ids are ndense + slot. The states above the tails (shared prefixes: where the text
 *   walks) are placed first, in depth-first order, each tail (the unshared rest of one phrase)
 *   after them in consecutive slots, so the text reads few cache lines of a large set.
 *
 * Every state with an output carries CC_AC_MATCH (the top bit) in its id, so a match test is a
 * sign test. Outputs of a state list, for each rule with a phrase ending there, the longest such
 * phrase (the first declared among equals), sorted by rule.
 *
 * The memory is O(states + classes + dense budget): 16 bytes per sparse state (and 8 more for
 * one with outputs), where the dense table of every state would cost 2-4 x classes bytes each.
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

#define CC_AC_MATCH 0x80000000u
#define CC_AC_ID 0x7FFFFFFFu

/* Bytes of dense rows per automaton (the root always has one). A row costs 2 bytes per class:
 * 768 KiB keeps the benchmarks' 300 phrases under 1 MiB in all while the text's usual states
 * stay dense. */
#ifndef CC_AC_DENSE_BYTES
#define CC_AC_DENSE_BYTES (768u * 1024u)
#endif

/* Most distinct phrase characters (plus specials) in one automaton. */
#define CC_AC_MAX_CLASSES 0xFFFF

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

/* One slot of the double array: the state that lives there (base, fail, a filter of its
 * children's classes) and the check of the slot (which state's child lives here), side by side,
 * so the lookup of a child and the next step from it touch one cache line. The filter has bit
 * c % 32 set for each child class c: most misses (text that leaves the trie) are decided without
 * reading the check of a slot elsewhere in the array. */
typedef struct cc_ac_slot {
    int32_t base;   /* slot of the child by class c: base + c (checked against its check) */
    uint32_t fail;  /* id of the failure state (no match bit) */
    uint32_t check; /* the parent's slot | this state's match bit; CC_AC_ID when no child of a
                     * sparse state lives here */
    uint32_t kids;  /* bit c % 32 for each child class c */
} cc_ac_slot;

typedef struct cc_automaton {
    uint32_t nclasses;
    uint32_t special_base; /* classes >= this are the caller's special code points */
    uint32_t ndense;       /* ids below this are dense states (ndense + nexits <= 65536) */
    uint32_t nexits;
    uint32_t nstates;
    uint32_t nslots;       /* slots of the double array (>= sparse states) */
    uint16_t *dense;       /* ndense * nclasses entries: e < ndense is dense state e (no
                            * outputs); e >= ndense stands for the id exits[e - ndense] */
    uint32_t *exits;       /* ids (with the match bit) of the targets a 16-bit entry cannot
                            * name: sparse states, states with outputs, and every target of a
                            * special class (so a loop learns of those from the exit alone) */
    cc_ac_slot *slot;      /* indexable from -nclasses to nslots + nclasses (padding slots are
                            * free), so base + c needs no bounds check */
    cc_ac_slot *slot_mem;  /* the allocation behind slot */
    uint32_t (*match)[2];  /* (slot, output set) of each sparse state with outputs, by slot */
    uint32_t nmatch;
    uint32_t *dense_out;   /* per dense state: its output set, or UINT32_MAX */
    uint32_t *root;        /* the root's row as full ids (nclasses): where a miss in a sparse
                            * state most often ends, one load instead of entry and exit */
    uint32_t pages[256];   /* BMP: offset in page_cls of the page of cp >> 8 */
    uint16_t *page_cls;    /* npages * 256 class ids; page 0 is all zero */
    uint32_t npages;
    uint32_t *astral_cp;   /* sorted code points above U+FFFF that have a class */
    uint16_t *astral_cls;
    uint32_t nastral;
    uint32_t *out_start;   /* per output set, offsets into out, +1 */
    uint32_t nsets;
    cc_output *out;
    size_t nout;
} cc_automaton;

/* Build an automaton. `special` (nspecial code points, may be NULL) get classes of their own
 * at or above special_base. `dense_bytes` caps the dense rows (the root always has one).
 * Returns NULL on failure, writes a message to err and the status to *status (when not NULL):
 * CC_ERR_NOMEM, or CC_ERR_TOO_BIG when the automaton would exceed max_bytes or the phrases use
 * more distinct code points than CC_AC_MAX_CLASSES allows. */
cc_automaton *cc_automaton_build(const cc_phrase_in *phrases, size_t n, int fold,
                                 const uint32_t *special, size_t nspecial, size_t dense_bytes,
                                 size_t max_bytes, char *err, size_t errlen, int *status);
void cc_automaton_free(cc_automaton *a);
size_t cc_automaton_memory(const cc_automaton *a);

uint32_t cc_automaton_astral_class(const cc_automaton *a, uint32_t cp);
uint32_t cc_automaton_sparse_set(const cc_automaton *a, uint32_t slot);

static inline uint32_t cc_automaton_class(const cc_automaton *a, uint32_t cp) {
    if (cp < 0x10000) return a->page_cls[a->pages[cp >> 8] + (cp & 0xFF)];
    return cc_automaton_astral_class(a, cp);
}

/* The step from dense state id (< ndense) by class c. */
static inline uint32_t cc_automaton_dense_next(const cc_automaton *a, uint32_t id, uint32_t c) {
    const uint32_t e = a->dense[id * a->nclasses + c];
    return e < a->ndense ? e : a->exits[e - a->ndense];
}

/* The step from sparse state id (>= ndense, no match bit) by class c: the child, or the step
 * from the failure state. */
static inline uint32_t cc_automaton_sparse_next(const cc_automaton *a, uint32_t id, uint32_t c) {
    const uint32_t nd = a->ndense;
    do {
        const uint32_t k = id - nd;
        const cc_ac_slot *n = &a->slot[k];
        if ((n->kids >> (c & 31)) & 1) {
            const int32_t child = n->base + (int32_t)c;
            const uint32_t chk = a->slot[child].check;
            if ((chk & CC_AC_ID) == k) return (nd + (uint32_t)child) | (chk & CC_AC_MATCH);
        }
        id = n->fail;
    } while (id >= nd);
    return id ? cc_automaton_dense_next(a, id, c) : a->root[c];
}

/* The state after class c from state s (ids as returned by this function; the start is 0). */
static inline uint32_t cc_automaton_next(const cc_automaton *a, uint32_t s, uint32_t c) {
    const uint32_t id = s & CC_AC_ID;
    return id < a->ndense ? cc_automaton_dense_next(a, id, c) : cc_automaton_sparse_next(a, id, c);
}

static inline uint32_t cc_automaton_step(const cc_automaton *a, uint32_t s, uint32_t cp) {
    return cc_automaton_next(a, s, cc_automaton_class(a, cp));
}

static inline int cc_automaton_is_match(uint32_t s) {
    return (s & CC_AC_MATCH) != 0;
}

static inline const cc_output *cc_automaton_outputs(const cc_automaton *a, uint32_t state,
                                                    uint32_t *count) {
    uint32_t id = state & CC_AC_ID;
    uint32_t set = id < a->ndense ? a->dense_out[id] : cc_automaton_sparse_set(a, id - a->ndense);
    *count = a->out_start[set + 1] - a->out_start[set];
    return a->out + a->out_start[set];
}

#endif
