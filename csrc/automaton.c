#include "automaton.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNSET UINT32_MAX

typedef struct term {
    uint32_t rule, phrase, next;
} term;

typedef struct build {
    uint32_t nc;
    uint32_t *rows; /* trie / goto rows, nc entries per node */
    uint32_t nodes, cap;
    uint32_t *term_head; /* per node, index into terms or UNSET */
    term *terms;
    size_t nterms;
    size_t max_table_bytes;
} build;

static void set_err(char *err, size_t errlen, const char *msg) {
    if (err && errlen) {
        snprintf(err, errlen, "%s", msg);
    }
}

static int grow(build *b, char *err, size_t errlen) {
    uint32_t cap = b->cap ? b->cap * 2 : 64;
    if ((size_t)cap * b->nc * sizeof(uint32_t) > b->max_table_bytes) {
        cap = (uint32_t)(b->max_table_bytes / ((size_t)b->nc * sizeof(uint32_t)));
        if (cap <= b->nodes) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "the phrase automaton would exceed %zu MiB (more than %u states x %u byte "
                     "classes); use fewer or shorter phrases",
                     b->max_table_bytes >> 20, b->nodes, b->nc);
            set_err(err, errlen, msg);
            return -1;
        }
    }
    uint32_t *rows = realloc(b->rows, (size_t)cap * b->nc * sizeof(uint32_t));
    uint32_t *heads = realloc(b->term_head, (size_t)cap * sizeof(uint32_t));
    if (rows) b->rows = rows;
    if (heads) b->term_head = heads;
    if (!rows || !heads) {
        set_err(err, errlen, "out of memory building the phrase automaton");
        return -1;
    }
    b->cap = cap;
    return 0;
}

static int new_node(build *b, uint32_t *id, char *err, size_t errlen) {
    if (b->nodes == b->cap && grow(b, err, errlen) != 0) return -1;
    uint32_t *row = b->rows + (size_t)b->nodes * b->nc;
    for (uint32_t c = 0; c < b->nc; c++) row[c] = UNSET;
    b->term_head[b->nodes] = UNSET;
    *id = b->nodes++;
    return 0;
}

static unsigned char fold_byte(unsigned char ch, int fold) {
    return (fold && ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch + 32) : ch;
}

typedef struct outlist {
    cc_output *items;
    uint32_t n;
} outlist;

static int cmp_output(const void *x, const void *y) {
    const cc_output *a = x, *b = y;
    return (a->rule > b->rule) - (a->rule < b->rule);
}

cc_automaton *cc_automaton_build(const cc_phrase_in *phrases, size_t n, int fold,
                                 size_t max_table_bytes, char *err, size_t errlen) {
    cc_automaton *a = calloc(1, sizeof *a);
    build b = {0};
    uint32_t *fail = NULL, *queue = NULL, *newid = NULL;
    outlist *outs = NULL;
    if (!a) goto oom;

    /* byte classes */
    int used[256] = {0};
    for (size_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < phrases[i].len; j++) used[fold_byte(phrases[i].bytes[j], fold)] = 1;
    uint32_t nc = 1;
    for (int ch = 0; ch < 256; ch++) a->cls[ch] = used[ch] ? (uint8_t)nc++ : 0;
    if (fold)
        for (int ch = 'A'; ch <= 'Z'; ch++) a->cls[ch] = a->cls[ch + 32];
    a->nclasses = nc;
    b.nc = nc;
    b.max_table_bytes = max_table_bytes;

    /* trie */
    uint32_t root;
    if (new_node(&b, &root, err, errlen) != 0) goto fail;
    b.terms = malloc((n ? n : 1) * sizeof(term));
    if (!b.terms) goto oom;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = root;
        for (uint32_t j = 0; j < phrases[i].len; j++) {
            uint32_t c = a->cls[fold_byte(phrases[i].bytes[j], fold)];
            uint32_t next = b.rows[(size_t)s * nc + c];
            if (next == UNSET) {
                if (new_node(&b, &next, err, errlen) != 0) goto fail;
                b.rows[(size_t)s * nc + c] = next;
            }
            s = next;
        }
        term *t = &b.terms[b.nterms];
        t->rule = phrases[i].rule;
        t->phrase = phrases[i].index;
        t->next = b.term_head[s];
        b.term_head[s] = (uint32_t)b.nterms++;
    }

    /* breadth-first: failure links, complete transitions, outputs */
    uint32_t N = b.nodes;
    fail = malloc((size_t)N * sizeof *fail);
    queue = malloc((size_t)N * sizeof *queue);
    outs = calloc(N, sizeof *outs);
    newid = malloc((size_t)N * sizeof *newid);
    if (!fail || !queue || !outs || !newid) goto oom;
    uint32_t qh = 0, qt = 0;
    fail[root] = root;
    queue[qt++] = root;
    while (qh < qt) {
        uint32_t u = queue[qh++];
        uint32_t *row = b.rows + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++) {
            uint32_t v = row[c];
            if (v != UNSET) {
                fail[v] = (u == root) ? root : b.rows[(size_t)fail[u] * nc + c];
                queue[qt++] = v;
            } else {
                row[c] = (u == root) ? root : b.rows[(size_t)fail[u] * nc + c];
            }
        }
        /* outputs: own terms (one per rule, first declared), then the failure state's */
        uint32_t own = 0;
        for (uint32_t t = b.term_head[u]; t != UNSET; t = b.terms[t].next) own++;
        const outlist *inherited = (u == root) ? NULL : &outs[fail[u]];
        uint32_t cap = own + (inherited ? inherited->n : 0);
        if (cap == 0) continue;
        cc_output *items = malloc(cap * sizeof *items);
        if (!items) goto oom;
        uint32_t k = 0;
        for (uint32_t t = b.term_head[u]; t != UNSET; t = b.terms[t].next) {
            uint32_t j;
            for (j = 0; j < k; j++) {
                if (items[j].rule == b.terms[t].rule) {
                    if (b.terms[t].phrase < items[j].phrase) items[j].phrase = b.terms[t].phrase;
                    break;
                }
            }
            if (j == k) {
                items[k].rule = b.terms[t].rule;
                items[k].phrase = b.terms[t].phrase;
                k++;
            }
        }
        uint32_t nown = k;
        for (uint32_t i = 0; inherited && i < inherited->n; i++) {
            uint32_t j;
            for (j = 0; j < nown; j++)
                if (items[j].rule == inherited->items[i].rule) break;
            if (j == nown) items[k++] = inherited->items[i];
        }
        qsort(items, k, sizeof *items, cmp_output);
        outs[u].items = items;
        outs[u].n = k;
    }

    /* renumber: states without outputs first (BFS order), then states with outputs */
    uint32_t next = 0;
    for (uint32_t i = 0; i < N; i++)
        if (outs[queue[i]].n == 0) newid[queue[i]] = next++;
    uint32_t first_out = next;
    for (uint32_t i = 0; i < N; i++)
        if (outs[queue[i]].n != 0) newid[queue[i]] = next++;

    a->nstates = N;
    a->match_base = first_out * nc;
    a->trans = malloc((size_t)N * nc * sizeof *a->trans);
    a->out_start = malloc((size_t)(N - first_out + 1) * sizeof *a->out_start);
    if (!a->trans || !a->out_start) goto oom;
    for (uint32_t u = 0; u < N; u++) {
        uint32_t *dst = a->trans + (size_t)newid[u] * nc;
        const uint32_t *src = b.rows + (size_t)u * nc;
        for (uint32_t c = 0; c < nc; c++) dst[c] = newid[src[c]] * nc;
    }
    size_t nout = 0;
    for (uint32_t u = 0; u < N; u++) nout += outs[u].n;
    a->out = malloc((nout ? nout : 1) * sizeof *a->out);
    if (!a->out) goto oom;
    a->nout = nout;
    /* CSR in new-id order */
    uint32_t *by_new = malloc((size_t)N * sizeof *by_new);
    if (!by_new) goto oom;
    for (uint32_t u = 0; u < N; u++) by_new[newid[u]] = u;
    size_t pos = 0;
    for (uint32_t id = first_out; id < N; id++) {
        const outlist *ol = &outs[by_new[id]];
        a->out_start[id - first_out] = (uint32_t)pos;
        memcpy(a->out + pos, ol->items, ol->n * sizeof *ol->items);
        pos += ol->n;
    }
    a->out_start[N - first_out] = (uint32_t)pos;
    free(by_new);

    for (uint32_t u = 0; u < N; u++) free(outs[u].items);
    free(outs);
    free(fail);
    free(queue);
    free(newid);
    free(b.rows);
    free(b.term_head);
    free(b.terms);
    return a;

oom:
    set_err(err, errlen, "out of memory building the phrase automaton");
fail:
    if (outs) {
        for (uint32_t u = 0; u < b.nodes; u++) free(outs[u].items);
        free(outs);
    }
    free(fail);
    free(queue);
    free(newid);
    free(b.rows);
    free(b.term_head);
    free(b.terms);
    cc_automaton_free(a);
    return NULL;
}

void cc_automaton_free(cc_automaton *a) {
    if (!a) return;
    free(a->trans);
    free(a->out_start);
    free(a->out);
    free(a);
}

size_t cc_automaton_memory(const cc_automaton *a) {
    if (!a) return 0;
    return sizeof *a + (size_t)a->nstates * a->nclasses * sizeof(uint32_t) +
           (size_t)(a->nstates - a->match_base / a->nclasses + 1) * sizeof(uint32_t) +
           a->nout * sizeof(cc_output);
}
