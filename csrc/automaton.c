#include "automaton.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h" /* status codes */
#include "text.h"

#define UNSET UINT32_MAX

typedef struct term {
    uint32_t rule, phrase, chars, next;
} term;

typedef struct build {
    uint32_t nc;
    uint32_t *rows; /* trie / goto rows, nc entries per node */
    uint32_t nodes, cap;
    uint32_t *term_head; /* per node, index into terms or UNSET */
    term *terms;
    size_t nterms;
    size_t max_table_bytes;
    int *status;
} build;

/* A failure: the message, and the status (CC_ERR_NOMEM or CC_ERR_TOO_BIG) when asked for. */
static void fail_with(char *err, size_t errlen, int *status, int code, const char *msg) {
    cc_set_err(err, errlen, msg);
    if (status) *status = code;
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
            fail_with(err, errlen, b->status, CC_ERR_TOO_BIG, msg);
            return -1;
        }
    }
    uint32_t *rows = realloc(b->rows, (size_t)cap * b->nc * sizeof(uint32_t));
    uint32_t *heads = realloc(b->term_head, (size_t)cap * sizeof(uint32_t));
    if (rows) b->rows = rows;
    if (heads) b->term_head = heads;
    if (!rows || !heads) {
        fail_with(err, errlen, b->status, CC_ERR_NOMEM,
                  "out of memory building the phrase automaton");
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

static uint32_t fold_cp(uint32_t cp, int fold) {
    return (fold && cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
}

static int cmp_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The class of a phrase code point during the build: cps sorted, cls parallel. */
static uint32_t build_class(const uint32_t *cps, const uint16_t *cls, uint32_t n, uint32_t cp) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cps[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return (lo < n && cps[lo] == cp) ? cls[lo] : 0;
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
                                 const uint32_t *special, size_t nspecial,
                                 size_t max_table_bytes, char *err, size_t errlen,
                                 int *status) {
    cc_automaton *a = calloc(1, sizeof *a);
    build b = {0};
    uint32_t *fail = NULL, *queue = NULL, *newid = NULL;
    outlist *outs = NULL;
    uint32_t *text = NULL, *starts = NULL, *cps = NULL;
    uint16_t *cls = NULL;
    if (!a) goto oom;

    /* the phrases as code points (folded when asked), all in one array */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += phrases[i].len;
    text = malloc((total + nspecial + 1) * sizeof *text);
    starts = malloc((n + 1) * sizeof *starts);
    if (!text || !starts) goto oom;
    uint32_t ncp = 0;
    for (size_t i = 0; i < n; i++) {
        starts[i] = ncp;
        for (uint32_t j = 0; j < phrases[i].len;) {
            unsigned k;
            text[ncp++] = fold_cp(cc_utf8_decode(phrases[i].bytes + j, &k), fold);
            j += k;
        }
    }
    starts[n] = ncp;
    /* classes: the distinct phrase characters that are not special (1 ..), then the specials */
    cps = malloc((ncp + nspecial + 1) * sizeof *cps);
    cls = malloc((ncp + nspecial + 1) * sizeof *cls);
    if (!cps || !cls) goto oom;
    memcpy(cps, text, ncp * sizeof *cps);
    uint32_t ndistinct = 0;
    qsort(cps, ncp, sizeof *cps, cmp_u32);
    for (uint32_t i = 0; i < ncp; i++)
        if ((!ndistinct || cps[ndistinct - 1] != cps[i]) && !cc_u32_in(special, (uint32_t)nspecial, cps[i]))
            cps[ndistinct++] = cps[i];
    uint32_t nc = 1, nmapped = ndistinct;
    for (uint32_t i = 0; i < ndistinct && nc <= 0xFFFF; i++) cls[i] = (uint16_t)nc++;
    a->special_base = nc;
    for (size_t i = 0; i < nspecial && nc <= 0xFFFF; i++) {
        if (cc_u32_in(cps + ndistinct, nmapped - ndistinct, special[i])) continue; /* twice */
        cps[nmapped] = special[i];
        cls[nmapped++] = (uint16_t)nc++;
    }
    if (nc > 0xFFFF) {
        fail_with(err, errlen, status, CC_ERR_TOO_BIG,
                  "the phrases use more than 65534 distinct characters; use fewer");
        goto fail;
    }
    /* sort (cp, class) pairs by cp: insertion sort on the specials, which come last and few */
    for (uint32_t i = ndistinct; i < nmapped; i++) {
        uint32_t cp = cps[i];
        uint16_t c = cls[i];
        uint32_t j = i;
        while (j > 0 && cps[j - 1] > cp) {
            cps[j] = cps[j - 1];
            cls[j] = cls[j - 1];
            j--;
        }
        cps[j] = cp;
        cls[j] = c;
    }
    a->nclasses = nc;
    b.nc = nc;
    b.max_table_bytes = max_table_bytes;
    b.status = status;

    /* trie */
    uint32_t root;
    if (new_node(&b, &root, err, errlen) != 0) goto fail;
    b.terms = malloc((n ? n : 1) * sizeof(term));
    if (!b.terms) goto oom;
    for (size_t i = 0; i < n; i++) {
        uint32_t s = root;
        for (uint32_t j = starts[i]; j < starts[i + 1]; j++) {
            uint32_t c = build_class(cps, cls, nmapped, text[j]);
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
        t->chars = starts[i + 1] - starts[i];
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
                items[k].chars = b.terms[t].chars;
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

    /* the class map: BMP pages, then the sorted astral code points */
    {
        uint8_t used[256] = {0};
        uint32_t npages = 1, nastral = 0;
        for (uint32_t i = 0; i < nmapped; i++) {
            if (cps[i] >= 0x10000) nastral++;
            else if (!used[cps[i] >> 8]) used[cps[i] >> 8] = 1, npages++;
        }
        if (fold && !used[0]) used[0] = 1, npages++; /* A-Z live on page 0 */
        a->page_cls = calloc((size_t)npages * 256, sizeof *a->page_cls);
        a->astral_cp = malloc((nastral ? nastral : 1) * sizeof *a->astral_cp);
        a->astral_cls = malloc((nastral ? nastral : 1) * sizeof *a->astral_cls);
        if (!a->page_cls || !a->astral_cp || !a->astral_cls) goto oom;
        a->npages = npages;
        uint32_t next_page = 1;
        for (int hb = 0; hb < 256; hb++) a->pages[hb] = used[hb] ? 256u * next_page++ : 0;
        for (uint32_t i = 0; i < nmapped; i++) {
            if (cps[i] >= 0x10000) {
                a->astral_cp[a->nastral] = cps[i];
                a->astral_cls[a->nastral++] = cls[i];
            } else {
                a->page_cls[a->pages[cps[i] >> 8] + (cps[i] & 0xFF)] = cls[i];
            }
        }
        if (fold)
            for (uint32_t cp = 'A'; cp <= 'Z'; cp++)
                a->page_cls[a->pages[0] + cp] = a->page_cls[a->pages[0] + cp + 32];
    }
    goto done;

oom:
    fail_with(err, errlen, status, CC_ERR_NOMEM, "out of memory building the phrase automaton");
fail:
    cc_automaton_free(a);
    a = NULL;
done: /* the build's scratch, on success and failure alike */
    free(text);
    free(starts);
    free(cps);
    free(cls);
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
    return a;
}

void cc_automaton_free(cc_automaton *a) {
    if (!a) return;
    free(a->trans);
    free(a->page_cls);
    free(a->astral_cp);
    free(a->astral_cls);
    free(a->out_start);
    free(a->out);
    free(a);
}

uint32_t cc_automaton_astral_class(const cc_automaton *a, uint32_t cp) {
    uint32_t lo = 0, hi = a->nastral;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a->astral_cp[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return (lo < a->nastral && a->astral_cp[lo] == cp) ? a->astral_cls[lo] : 0;
}

size_t cc_automaton_memory(const cc_automaton *a) {
    if (!a) return 0;
    return sizeof *a + (size_t)a->nstates * a->nclasses * sizeof(uint32_t) +
           (size_t)a->npages * 256 * sizeof *a->page_cls +
           (size_t)a->nastral * (sizeof *a->astral_cp + sizeof *a->astral_cls) +
           (size_t)(a->nstates - a->match_base / a->nclasses + 1) * sizeof(uint32_t) +
           a->nout * sizeof(cc_output);
}
