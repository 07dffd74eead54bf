/* The phrase automaton alone, without Python (built and run by benchmarks/walk.py):
 *
 *     automaton_walk PHRASES TEXT PASSES
 *
 * PHRASES: UTF-8, one phrase a line; TEXT: UTF-8. Builds the automaton as a Ruleset does (one
 * rule, no special characters, the default dense budget), walks the text PASSES times (best
 * pass timed) and prints one line of `key=value` pairs: the layout (states, dense states,
 * slots, bytes), the walk (ns per character, matches, a checksum of where they end) and where
 * the walk went: steps from dense and from sparse states, failure links followed, and the
 * distinct sparse states and 64-byte lines of the double array it read (the working set that
 * decides whether a large phrase set stays in cache; exact, unlike the timing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "automaton.h"
#include "text.h"

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PHRASES TEXT PASSES\n", argv[0]);
        return 2;
    }
    size_t pn, tn;
    unsigned char *pb = slurp(argv[1], &pn), *tb = slurp(argv[2], &tn);
    if (!pb || !tb) {
        fprintf(stderr, "cannot read the input files\n");
        return 2;
    }
    int passes = atoi(argv[3]);
    size_t cap = 1024, n = 0;
    cc_phrase_in *ph = malloc(cap * sizeof *ph);
    for (size_t i = 0; i < pn;) {
        size_t j = i;
        while (j < pn && pb[j] != '\n') j++;
        if (j > i) {
            if (n == cap) ph = realloc(ph, (cap *= 2) * sizeof *ph);
            ph[n].bytes = pb + i;
            ph[n].len = (uint32_t)(j - i);
            ph[n].rule = 0;
            ph[n].index = (uint32_t)n;
            n++;
        }
        i = j + 1;
    }
    uint32_t *cps = malloc((tn + 1) * sizeof *cps);
    size_t m = 0;
    for (size_t i = 0; i < tn;) {
        unsigned k;
        cps[m++] = cc_utf8_decode(tb + i, &k);
        i += k;
    }
    char err[256];
    int status;
    double t0 = now();
    cc_automaton *a = cc_automaton_build(ph, n, 0, NULL, 0, CC_AC_DENSE_BYTES, (size_t)256 << 20,
                                         err, sizeof err, &status);
    double built = now() - t0;
    if (!a) {
        fprintf(stderr, "build failed: %s\n", err);
        return 1;
    }
    uint64_t matches = 0, sum = 0;
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        double s0 = now();
        uint32_t s = 0;
        matches = sum = 0;
        for (size_t i = 0; i < m; i++) {
            s = cc_automaton_step(a, s, cps[i]);
            if (cc_automaton_is_match(s)) {
                uint32_t k;
                const cc_output *o = cc_automaton_outputs(a, s, &k);
                matches++;
                sum = sum * 31 + i * 7 + o[0].phrase + k;
            }
        }
        double d = now() - s0;
        if (d < best) best = d;
    }
    /* where the walk went (one pass, not timed) */
    uint64_t dense = 0, sparse = 0, fails = 0, nstates = 0, nlines = 0;
    size_t span = (size_t)a->nslots + 2 * (size_t)a->nclasses;
    uint8_t *seen = calloc(span, 1), *line = calloc(span * sizeof(cc_ac_slot) / 64 + 1, 1);
    uint32_t s = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = cc_automaton_class(a, cps[i]), id = s & CC_AC_ID;
        if (id < a->ndense) {
            dense++;
        } else {
            sparse++;
            while (id >= a->ndense) {
                uint32_t k = id - a->ndense;
                size_t at = (size_t)k + a->nclasses; /* index in the allocation */
                if (!seen[at]++) nstates++;
                if (!line[at * sizeof(cc_ac_slot) / 64]++) nlines++;
                const cc_ac_slot *sl = &a->slot[k];
                if ((sl->kids >> (c & 31)) & 1) {
                    size_t ch = (size_t)((int64_t)sl->base + c + a->nclasses);
                    if (!line[ch * sizeof(cc_ac_slot) / 64]++) nlines++;
                    if ((a->slot[sl->base + (int32_t)c].check & CC_AC_ID) == k) break;
                }
                id = sl->fail;
                fails++;
            }
        }
        s = cc_automaton_next(a, s, c);
    }
    printf("phrases=%zu states=%u dense_states=%u slots=%u classes=%u bytes=%zu build_s=%.3f "
           "chars=%zu ns_per_char=%.2f matches=%llu checksum=%016llx dense_steps=%llu "
           "sparse_steps=%llu fail_links=%llu sparse_states_read=%llu lines_read=%llu\n",
           n, a->nstates, a->ndense, a->nslots, a->nclasses, cc_automaton_memory(a), built, m,
           passes ? best / (double)m * 1e9 : 0.0, (unsigned long long)matches,
           (unsigned long long)sum, (unsigned long long)dense, (unsigned long long)sparse,
           (unsigned long long)fails, (unsigned long long)nstates, (unsigned long long)nlines);
    cc_automaton_free(a);
    free(seen);
    free(line);
    free(cps);
    free(ph);
    free(pb);
    free(tb);
    return 0;
}
