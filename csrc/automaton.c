#include "automaton.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h> /* malloc_trim */
#endif

#include "common.h"
#include "engine.h" /* status codes */
#include "text.h"

#define UNSET UINT32_MAX

/* Fewest dense rows worth having besides the root's (see the build). */
#define DENSE_MIN_ROWS 64

/* Compiled bytes a sparse state costs, for the size limit. */
#define SPARSE_BYTES sizeof(cc_ac_slot)

/* A large build frees tens of MiB of work arrays that glibc keeps in the heap (they were
 * allocated before the automaton, so the heap cannot shrink from the top): hand the free pages
 * back, so the process keeps what the automaton needs and not what building it needed. */
static void release_build_memory(void) {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

/* A failure: the message, and the status (CC_ERR_NOMEM or CC_ERR_TOO_BIG) when asked for. */
static void fail_with(char *err, size_t errlen, int *status, int code, const char *msg) {
    cc_set_err(err, errlen, msg);
    if (status) *status = code;
}

static uint32_t fold_cp(uint32_t cp, int fold) {
    return (fold && cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
}

static int cmp_match(const void *x, const void *y) {
    uint32_t a = ((const uint32_t *)x)[0], b = ((const uint32_t *)y)[0];
    return (a > b) - (a < b);
}

static int cc_ctz32(uint32_t x) {
#if defined(__GNUC__)
    return __builtin_ctz(x);
#else
    int n = 0;
    while (!(x & 1u)) x >>= 1, n++;
    return n;
#endif
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


/* ---- sorting the phrases: by class sequence (a prefix first), then rule, then index ---- */

typedef struct sortctx {
    const uint32_t *seq;    /* all phrases' classes */
    const uint32_t *starts; /* per phrase, +1 */
    const cc_phrase_in *ph;
} sortctx;

static int phrase_before(const sortctx *s, uint32_t x, uint32_t y) {
    const uint32_t *a = s->seq + s->starts[x], *b = s->seq + s->starts[y];
    uint32_t na = s->starts[x + 1] - s->starts[x], nb = s->starts[y + 1] - s->starts[y];
    uint32_t n = na < nb ? na : nb;
    for (uint32_t i = 0; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    if (na != nb) return na < nb;
    if (s->ph[x].rule != s->ph[y].rule) return s->ph[x].rule < s->ph[y].rule;
    return s->ph[x].index < s->ph[y].index;
}

/* Bottom-up merge sort of order[0..n) (tmp has room for n). Returns the sorted array (order or
 * tmp). */
static uint32_t *sort_phrases(const sortctx *s, uint32_t *order, uint32_t *tmp, uint32_t n) {
    uint32_t *src = order, *dst = tmp;
    for (uint32_t width = 1; width < n; width *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * width) {
            uint32_t mid = lo + width < n ? lo + width : n;
            uint32_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                dst[k++] = phrase_before(s, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
        if (width > n / 2) break;
    }
    return src;
}

static int grow_u32(uint32_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    uint32_t *q = realloc(*p, c * sizeof *q);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- the trie in breadth-first order -------------------------------------------------- */

typedef struct nodes {
    /* per node (index = breadth-first order) */
    uint32_t *first;   /* first child (children are contiguous); first[N] = N at the end */
    uint32_t *ecls;    /* class of the edge into the node */
    uint32_t *lo, *hi; /* the node's range of the sorted phrases */
    uint32_t *depth;
    uint32_t *fail;
    uint32_t *set;     /* output set, UNSET if none */
    size_t cap;
    uint32_t n;
} nodes;

static void nodes_free(nodes *t) {
    free(t->first);
    free(t->ecls);
    free(t->lo);
    free(t->hi);
    free(t->depth);
    free(t->fail);
    free(t->set);
}

static int nodes_grow(nodes *t) {
    size_t c = t->cap ? t->cap + t->cap / 2 : 1024;
    uint32_t **arrays[] = {&t->first, &t->ecls, &t->lo, &t->hi, &t->depth, &t->fail, &t->set};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        uint32_t *q = realloc(*arrays[i], (c + 1) * sizeof *q);
        if (!q) return -1;
        *arrays[i] = q;
    }
    t->cap = c;
    return 0;
}

/* The goto function during the build: dense rows (node numbers) for x < ndense, else a binary
 * search of x's children and the failure link on a miss. */
static uint32_t build_delta(const nodes *t, const uint32_t *rows, uint32_t ndense, uint32_t nc,
                            uint32_t x, uint32_t c) {
    for (;;) {
        if (x < ndense) return rows[(size_t)x * nc + c];
        uint32_t lo = t->first[x], hi = t->first[x + 1];
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (t->ecls[mid] < c) lo = mid + 1;
            else hi = mid;
        }
        if (lo < t->first[x + 1] && t->ecls[lo] == c) return lo;
        x = t->fail[x];
    }
}

/* ---- the double array ----------------------------------------------------------------- */

/* Tails longer than this go past the frontier without a search for a gap. */
#define RUN_LENGTHS 16

typedef struct slots {
    uint8_t *used;
    uint8_t *tried;      /* per free slot: how often it failed as the first child's slot */
    size_t cap;
    uint32_t first_free; /* no free slot below */
    uint32_t scan_from;  /* no promising candidate for a first child below */
    uint32_t frontier;   /* no used slot at or above */
    uint32_t run_from[RUN_LENGTHS]; /* per tail length: no gap that long starts below */
} slots;

static int slots_reserve(slots *s, size_t need) {
    if (need <= s->cap) return 0;
    size_t c = s->cap ? s->cap : 1024;
    while (c < need) c *= 2;
    uint8_t *q = realloc(s->used, c);
    if (!q) return -1;
    memset(q + s->cap, 0, c - s->cap);
    s->used = q;
    q = realloc(s->tried, c);
    if (!q) return -1;
    memset(q + s->cap, 0, c - s->cap);
    s->tried = q;
    s->cap = c;
    return 0;
}

static void slots_take(slots *s, uint32_t k) {
    s->used[k] = 1;
    if (k + 1 > s->frontier) s->frontier = k + 1;
    while (s->first_free < s->cap && s->used[s->first_free]) s->first_free++;
}

/* The first slot of len free consecutive slots for a tail: a gap the placement of sibling
 * groups left (a cursor per length only moves forward: a gap skipped is too short for that
 * length for good, slots are never freed), else past the frontier. */
static uint32_t slots_run(slots *s, uint32_t len) {
    if (len > RUN_LENGTHS) return s->frontier;
    uint32_t h = s->run_from[len - 1] > s->first_free ? s->run_from[len - 1] : s->first_free;
    while ((size_t)h + len <= s->frontier) {
        uint32_t j = 0;
        while (j < len && !s->used[h + j]) j++;
        if (j == len) break;
        h += j + 1;
    }
    s->run_from[len - 1] = h;
    return (size_t)h + len <= s->frontier ? h : s->frontier;
}

/* A base for children of classes cls[0..k) (sorted ascending): every base + cls[i] free. Tries
 * a bounded number of free slots for the first child (skipping slots that failed often, so the
 * search moves past crowded regions), then places them past the frontier. */
static int slots_place(slots *s, const uint32_t *cls, uint32_t k, int32_t *base) {
    enum { TRIES = 256, GIVE_UP = 4 };
    int found = 0;
    uint32_t f = s->scan_from > s->first_free ? s->scan_from : s->first_free;
    while (f < s->frontier && (s->used[f] || s->tried[f] >= GIVE_UP)) f++;
    s->scan_from = f;
    for (uint32_t tries = 0; k > 1 && f < s->frontier && tries < TRIES; f++) {
        if (s->used[f] || s->tried[f] >= GIVE_UP) continue;
        tries++;
        int32_t b = (int32_t)f - (int32_t)cls[0];
        uint32_t i;
        for (i = 1; i < k; i++) {
            uint32_t slot = (uint32_t)(b + (int32_t)cls[i]);
            if (slot < s->cap && s->used[slot]) break;
        }
        if (i == k) {
            *base = b;
            found = 1;
            break;
        }
        s->tried[f]++;
    }
    if (k == 1) {
        *base = (int32_t)s->first_free - (int32_t)cls[0];
        found = 1;
    }
    if (!found) {
        uint32_t at = s->frontier > s->first_free ? s->frontier : s->first_free;
        *base = (int32_t)at - (int32_t)cls[0];
    }
    size_t top = (size_t)(*base + (int32_t)cls[k - 1]) + 1;
    if (slots_reserve(s, top + 1) != 0) return -1;
    for (uint32_t i = 0; i < k; i++) slots_take(s, (uint32_t)(*base + (int32_t)cls[i]));
    return 0;
}

cc_automaton *cc_automaton_build(const cc_phrase_in *phrases, size_t n, int fold,
                                 const uint32_t *special, size_t nspecial, size_t dense_bytes,
                                 size_t max_bytes, char *err, size_t errlen, int *status) {
    cc_automaton *a = calloc(1, sizeof *a);
    uint32_t *text = NULL, *starts = NULL, *cps = NULL, *order = NULL, *otmp = NULL;
    uint32_t *rows = NULL, *slot_of = NULL, *out_start = NULL, *ccls = NULL, *code = NULL;
    int32_t *base_of = NULL;
    uint8_t *tail = NULL;
    uint32_t *dfs = NULL;
    uint16_t *cls = NULL;
    cc_output *out = NULL;
    size_t out_cap = 0, out_n = 0, sets_cap = 0, nsets = 0;
    nodes t = {0};
    slots sl = {0};
    char msg[256];
    if (!a) goto oom;
    if (n >= UINT32_MAX / 2) {
        fail_with(err, errlen, status, CC_ERR_TOO_BIG, "too many phrases for one automaton");
        goto fail;
    }

    /* the phrases as code points (folded when asked), all in one array */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += phrases[i].len;
    if (total >= UINT32_MAX / 2) {
        fail_with(err, errlen, status, CC_ERR_TOO_BIG,
                  "the phrases are too long for one automaton");
        goto fail;
    }
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
    /* the distinct code points, in order, through a bitmap of all of Unicode (136 KiB) */
    uint32_t ndistinct = 0;
    {
        uint32_t *seen = calloc(0x110000 / 32, sizeof *seen);
        if (!seen) goto oom;
        for (uint32_t i = 0; i < ncp; i++) {
            uint32_t cp = text[i] < 0x110000 ? text[i] : 0xFFFD;
            if (!(seen[cp >> 5] & (1u << (cp & 31)))) {
                seen[cp >> 5] |= 1u << (cp & 31);
                ndistinct++;
            }
        }
        cps = malloc((ndistinct + nspecial + 1) * sizeof *cps);
        cls = malloc((ndistinct + nspecial + 1) * sizeof *cls);
        if (!cps || !cls) {
            free(seen);
            goto oom;
        }
        ndistinct = 0;
        for (uint32_t w = 0; w < 0x110000 / 32; w++)
            for (uint32_t bits = seen[w]; bits; bits &= bits - 1) {
                uint32_t cp = w * 32 + (uint32_t)cc_ctz32(bits);
                if (!cc_u32_in(special, (uint32_t)nspecial, cp)) cps[ndistinct++] = cp;
            }
        free(seen);
    }
    uint32_t nc = 1, nmapped = ndistinct;
    for (uint32_t i = 0; i < ndistinct && nc <= CC_AC_MAX_CLASSES; i++) cls[i] = (uint16_t)nc++;
    a->special_base = nc;
    for (size_t i = 0; i < nspecial && nc <= CC_AC_MAX_CLASSES; i++) {
        uint32_t j;
        for (j = ndistinct; j < nmapped; j++)
            if (cps[j] == special[i]) break;
        if (j < nmapped) continue; /* named twice */
        cps[nmapped] = special[i];
        cls[nmapped++] = (uint16_t)nc++;
    }
    if (nc > CC_AC_MAX_CLASSES) {
        snprintf(msg, sizeof msg,
                 "the phrase automaton allows at most %u distinct characters; the phrases use "
                 "more",
                 (unsigned)(CC_AC_MAX_CLASSES - 1 - nspecial));
        fail_with(err, errlen, status, CC_ERR_TOO_BIG, msg);
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
    /* the phrases as classes, in place (the BMP through a table: a search per character was a
     * fifth of the build) */
    {
        uint16_t *bmp = calloc(0x10000, sizeof *bmp);
        if (!bmp) goto oom;
        for (uint32_t i = 0; i < nmapped; i++)
            if (cps[i] < 0x10000) bmp[cps[i]] = cls[i];
        for (uint32_t i = 0; i < ncp; i++)
            text[i] = text[i] < 0x10000 ? bmp[text[i]] : build_class(cps, cls, nmapped, text[i]);
        free(bmp);
    }

    /* phrases sorted by their classes */
    order = malloc((n ? n : 1) * sizeof *order);
    otmp = malloc((n ? n : 1) * sizeof *otmp);
    if (!order || !otmp) goto oom;
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    sortctx sc = {text, starts, phrases};
    const uint32_t *sorted = sort_phrases(&sc, order, otmp, (uint32_t)n);

    /* dense rows: the root always, then as many breadth-first states as the budget allows (and
     * 16-bit entries can name); the build keeps them as 32-bit node numbers */
    size_t row_bytes = (size_t)nc * sizeof(uint16_t);
    size_t max_dense = dense_bytes / row_bytes;
    /* rows pay when they cover the states the text keeps returning to (the shallowest, in
     * breadth-first order); when the budget buys fewer than DENSE_MIN_ROWS of them (a large
     * alphabet: thousands of Chinese characters) they would cover a few first characters in code
     * point order, not the text's: only the root gets a row */
    if (max_dense < DENSE_MIN_ROWS) max_dense = 1;
    if (max_dense > (size_t)ncp + 1) max_dense = (size_t)ncp + 1;
    if (max_dense > 0xFFFF) max_dense = 0xFFFF;
    if (max_dense * row_bytes > max_bytes) {
        snprintf(msg, sizeof msg,
                 "the phrase automaton would exceed %zu MiB (its root row alone); use fewer "
                 "distinct characters",
                 max_bytes >> 20);
        fail_with(err, errlen, status, CC_ERR_TOO_BIG, msg);
        goto fail;
    }
    rows = malloc(max_dense * nc * sizeof *rows);
    if (!rows) goto oom;

    /* the trie, breadth-first: failure links, dense rows and output sets on the way */
    if (nodes_grow(&t) != 0) goto oom;
    t.n = 1;
    t.lo[0] = 0;
    t.hi[0] = (uint32_t)n;
    t.depth[0] = 0;
    t.fail[0] = 0;
    t.ecls[0] = 0;
    if (grow_u32(&out_start, &sets_cap, 1) != 0) goto oom;
    out_start[0] = 0;
    ccls = malloc((size_t)nc * sizeof *ccls);
    if (!ccls) goto oom;
    for (uint32_t u = 0; u < t.n; u++) {
        uint32_t lo = t.lo[u], hi = t.hi[u], d = t.depth[u];
        /* phrases that end here come first in the range */
        uint32_t te = lo;
        while (te < hi && starts[sorted[te] + 1] - starts[sorted[te]] == d) te++;
        /* output set: one per rule (the first declared), then the failure state's */
        const uint32_t inherited = u ? t.set[t.fail[u]] : UNSET;
        if (te == lo) {
            t.set[u] = inherited;
        } else {
            uint32_t in_lo = 0, in_hi = 0;
            if (inherited != UNSET) in_lo = out_start[inherited], in_hi = out_start[inherited + 1];
            size_t need = out_n + (te - lo) + (in_hi - in_lo);
            if (need > out_cap) {
                size_t c = out_cap ? out_cap * 2 : 256;
                while (c < need) c *= 2;
                cc_output *q = realloc(out, c * sizeof *q);
                if (!q) goto oom;
                out = q;
                out_cap = c;
            }
            uint32_t i = lo;
            while (i < te || in_lo < in_hi) {
                uint32_t r_own = i < te ? phrases[sorted[i]].rule : UINT32_MAX;
                uint32_t r_in = in_lo < in_hi ? out[in_lo].rule : UINT32_MAX;
                if (i < te && r_own <= r_in) {
                    out[out_n].rule = r_own;
                    out[out_n].phrase = phrases[sorted[i]].index;
                    out[out_n].chars = d;
                    out_n++;
                    while (i < te && phrases[sorted[i]].rule == r_own) i++;
                    if (r_in == r_own) in_lo++;
                } else {
                    out[out_n++] = out[in_lo++];
                }
            }
            if (grow_u32(&out_start, &sets_cap, nsets + 2) != 0) goto oom;
            t.set[u] = (uint32_t)nsets++;
            out_start[nsets] = (uint32_t)out_n;
        }
        /* children, in class order */
        t.first[u] = t.n;
        for (uint32_t i = te; i < hi;) {
            uint32_t c = text[starts[sorted[i]] + d];
            uint32_t j = i + 1;
            while (j < hi && text[starts[sorted[j]] + d] == c) j++;
            if (t.n == t.cap && nodes_grow(&t) != 0) goto oom;
            uint32_t v = t.n++;
            t.ecls[v] = c;
            t.lo[v] = i;
            t.hi[v] = j;
            t.depth[v] = d + 1;
            i = j;
        }
        if ((size_t)t.n * SPARSE_BYTES > max_bytes) {
            snprintf(msg, sizeof msg,
                     "the phrase automaton would exceed %zu MiB (more than %u states); use fewer "
                     "or shorter phrases",
                     max_bytes >> 20, t.n);
            fail_with(err, errlen, status, CC_ERR_TOO_BIG, msg);
            goto fail;
        }
        t.first[u + 1] = t.n; /* provisional: the next node's children start here */
        for (uint32_t v = t.first[u]; v < t.n; v++)
            t.fail[v] = u ? build_delta(&t, rows, (uint32_t)max_dense, nc, t.fail[u], t.ecls[v])
                          : 0;
        if (u < max_dense) {
            uint32_t *row = rows + (size_t)u * nc;
            if (u) memcpy(row, rows + (size_t)t.fail[u] * nc, (size_t)nc * sizeof *row);
            else memset(row, 0, (size_t)nc * sizeof *row);
            for (uint32_t v = t.first[u]; v < t.n; v++) row[t.ecls[v]] = v;
        }
    }
    uint32_t N = t.n;
    t.first[N] = N;
    /* the dense states: a 16-bit entry names a dense state without outputs itself and anything
     * else through the exit table (a sparse state, a state with outputs, every target of a
     * special class), so ndense + exits must stay within 65 536: fewer dense rows until so */
    uint32_t ndense = N < max_dense ? N : (uint32_t)max_dense;
    uint32_t nexits = 0;
    code = malloc((size_t)N * sizeof *code);
    if (!code) goto oom;
    for (;;) {
        for (uint32_t u = 0; u < N; u++) code[u] = UNSET;
        nexits = 0;
        for (uint32_t u = 0; u < ndense; u++) {
            const uint32_t *row = rows + (size_t)u * nc;
            for (uint32_t c = 0; c < nc; c++) {
                uint32_t v = row[c];
                if ((v >= ndense || t.set[v] != UNSET || c >= a->special_base) && code[v] == UNSET)
                    code[v] = nexits++;
            }
        }
        if (ndense + nexits <= 0x10000u || ndense == 1) break;
        ndense = ndense / 2;
    }
    a->nstates = N;
    a->ndense = ndense;
    a->nexits = nexits;
    /* the phrases and the breadth-first work arrays are done with: free them before the
     * automaton itself is allocated (lower peak memory) */
    free(t.lo), t.lo = NULL;
    free(t.hi), t.hi = NULL;
    free(t.depth), t.depth = NULL;
    free(text), text = NULL;
    free(starts), starts = NULL;
    free(order), order = NULL;
    free(otmp), otmp = NULL;
    sorted = NULL;

    /* slots of the sparse states, hot before cold. A state whose subtree is one path (a
     * "tail": the part of a phrase no other phrase shares) is rarely entered by the text and
     * left after a few steps; the states above the tails (shared prefixes, the text's usual
     * path into the trie) are what a walk keeps returning to. So: first, in breadth-first
     * order, a free slot for each child of a dense state and a common base for the children of
     * every other non-tail state (the hot region, packed first fit); then each tail after its
     * first state, one slot after the other past the frontier (a walk down a tail reads
     * consecutive slots, four to a cache line). */
    slot_of = malloc((size_t)N * sizeof *slot_of);
    base_of = malloc((size_t)N * sizeof *base_of);
    tail = malloc((size_t)N + 1);
    if (!slot_of || !base_of || !tail) goto oom;
    for (uint32_t u = N; u-- > 0;) {
        uint32_t f = t.first[u], e = t.first[u + 1];
        tail[u] = f == e || (e - f == 1 && tail[f]);
    }
    if (slots_reserve(&sl, 1024) != 0) goto oom;
    /* the non-tail states in depth-first preorder (children in class order) */
    uint32_t ndfs = 0;
    dfs = malloc((size_t)N * sizeof *dfs);
    if (!dfs) goto oom;
    {
        uint32_t top = 0;
        dfs[N - 1] = 0; /* the stack grows down from the end, the order up from the start */
        top = 1;
        while (top) {
            uint32_t u = dfs[N - top--];
            dfs[ndfs++] = u;
            for (uint32_t v = t.first[u + 1]; v-- > t.first[u];)
                if (v < ndense || !tail[v]) dfs[N - ++top] = v;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < (pass ? N : ndfs); i++) {
            uint32_t u = pass ? i : dfs[i];
            uint32_t f = t.first[u], e = t.first[u + 1];
            if (u >= ndense && tail[u]) {
                if (f == e) base_of[u] = -(int32_t)nc;
                continue; /* placed with the tail's first state */
            }
            if (pass == 1) {
                /* the tails below u (u's own children are placed): each in consecutive slots */
                for (uint32_t v = f; v < e; v++) {
                    if (v < ndense || !tail[v]) continue;
                    uint32_t len = 0;
                    for (uint32_t x = v; t.first[x] != t.first[x + 1]; x = t.first[x]) len++;
                    if (!len) continue;
                    uint32_t at = slots_run(&sl, len);
                    if (slots_reserve(&sl, (size_t)at + len + 1) != 0) goto oom;
                    for (uint32_t x = v; t.first[x] != t.first[x + 1]; at++) {
                        uint32_t y = t.first[x];
                        slots_take(&sl, at);
                        slot_of[y] = at;
                        base_of[x] = (int32_t)at - (int32_t)t.ecls[y];
                        x = y;
                    }
                }
            } else if (u >= ndense) {
                if (f == e) {
                    base_of[u] = -(int32_t)nc;
                    continue;
                }
                uint32_t k = 0;
                for (uint32_t v = f; v < e; v++) ccls[k++] = t.ecls[v];
                if (slots_place(&sl, ccls, k, &base_of[u]) != 0) goto oom;
                for (uint32_t v = f; v < e; v++)
                    slot_of[v] = (uint32_t)(base_of[u] + (int32_t)t.ecls[v]);
            } else {
                for (uint32_t v = f; v < e; v++) {
                    if (v < ndense) continue;
                    if (slots_reserve(&sl, (size_t)sl.first_free + 2) != 0) goto oom;
                    slot_of[v] = sl.first_free;
                    slots_take(&sl, sl.first_free);
                }
            }
            if ((size_t)sl.frontier * SPARSE_BYTES + (size_t)ndense * row_bytes > max_bytes) {
                snprintf(msg, sizeof msg,
                         "the phrase automaton would exceed %zu MiB; use fewer or shorter "
                         "phrases",
                         max_bytes >> 20);
                fail_with(err, errlen, status, CC_ERR_TOO_BIG, msg);
                goto fail;
            }
        }
    }
    uint32_t nslots = sl.frontier;
    a->nslots = nslots;
#define ID_OF(v)                                                                               \
    (((v) < ndense ? (v) : ndense + slot_of[v]) | (t.set[v] != UNSET ? CC_AC_MATCH : 0u))
    a->slot_mem = malloc(((size_t)nslots + 2 * (size_t)nc) * sizeof *a->slot_mem);
    size_t nmatch = 0;
    for (uint32_t u = ndense; u < N; u++) nmatch += t.set[u] != UNSET;
    a->match = malloc((nmatch ? nmatch : 1) * sizeof *a->match);
    a->dense = malloc((size_t)ndense * row_bytes);
    a->dense_out = malloc((size_t)ndense * sizeof *a->dense_out);
    a->exits = malloc((nexits ? nexits : 1) * sizeof *a->exits);
    a->root = malloc((size_t)nc * sizeof *a->root);
    if (!a->slot_mem || !a->match || !a->dense || !a->dense_out || !a->exits || !a->root)
        goto oom;
    a->slot = a->slot_mem + nc;
    for (size_t i = 0; i < (size_t)nslots + 2 * (size_t)nc; i++) {
        a->slot_mem[i].base = -(int32_t)nc;
        a->slot_mem[i].fail = 0;
        a->slot_mem[i].check = CC_AC_ID;
        a->slot_mem[i].kids = 0;
    }
    for (uint32_t u = 0; u < N; u++) {
        if (u < ndense) {
            a->dense_out[u] = t.set[u];
            const uint32_t *src = rows + (size_t)u * nc;
            uint16_t *dst = a->dense + (size_t)u * nc;
            for (uint32_t c = 0; c < nc; c++) {
                uint32_t v = src[c];
                if (!u) a->root[c] = ID_OF(v);
                if (v >= ndense || t.set[v] != UNSET || c >= a->special_base) {
                    a->exits[code[v]] = ID_OF(v);
                    dst[c] = (uint16_t)(ndense + code[v]);
                } else {
                    dst[c] = (uint16_t)v;
                }
            }
        } else {
            cc_ac_slot *sp = &a->slot[slot_of[u]];
            sp->base = base_of[u];
            sp->fail = ID_OF(t.fail[u]) & CC_AC_ID;
            for (uint32_t v = t.first[u]; v < t.first[u + 1]; v++) sp->kids |= 1u << (t.ecls[v] & 31);
            if (t.set[u] != UNSET) {
                a->match[a->nmatch][0] = slot_of[u];
                a->match[a->nmatch++][1] = t.set[u];
            }
        }
        for (uint32_t v = t.first[u]; v < t.first[u + 1]; v++) {
            if (v < ndense) continue;
            uint32_t owner = u < ndense ? CC_AC_ID : slot_of[u];
            a->slot[slot_of[v]].check = owner | (t.set[v] != UNSET ? CC_AC_MATCH : 0u);
        }
    }
#undef ID_OF
    qsort(a->match, a->nmatch, sizeof *a->match, cmp_match);
    a->out = out, out = NULL;
    a->nout = out_n;
    a->out_start = out_start, out_start = NULL;
    a->nsets = (uint32_t)nsets;

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
done:
    free(text);
    free(starts);
    free(cps);
    free(cls);
    free(order);
    free(otmp);
    free(rows);
    free(code);
    free(slot_of);
    free(base_of);
    free(tail);
    free(dfs);
    free(ccls);
    free(out);
    free(out_start);
    free(sl.used);
    free(sl.tried);
    size_t built = t.cap;
    nodes_free(&t);
    if (built > ((size_t)1 << 16)) release_build_memory();
    return a;
}

void cc_automaton_free(cc_automaton *a) {
    if (!a) return;
    free(a->dense);
    free(a->dense_out);
    free(a->exits);
    free(a->root);
    free(a->slot_mem);
    free(a->match);
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

uint32_t cc_automaton_sparse_set(const cc_automaton *a, uint32_t slot) {
    uint32_t lo = 0, hi = a->nmatch;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (a->match[mid][0] < slot) lo = mid + 1;
        else hi = mid;
    }
    return (lo < a->nmatch && a->match[lo][0] == slot) ? a->match[lo][1] : UNSET;
}

size_t cc_automaton_memory(const cc_automaton *a) {
    if (!a) return 0;
    return sizeof *a + (size_t)a->ndense * a->nclasses * sizeof(uint16_t) +
           (size_t)a->ndense * sizeof(uint32_t) + (size_t)a->nexits * sizeof(uint32_t) +
           (size_t)a->nclasses * sizeof(uint32_t) +
           ((size_t)a->nslots + 2 * (size_t)a->nclasses) * sizeof(cc_ac_slot) +
           (size_t)a->nmatch * sizeof *a->match +
           (size_t)a->npages * 256 * sizeof *a->page_cls +
           (size_t)a->nastral * (sizeof *a->astral_cp + sizeof *a->astral_cls) +
           (size_t)(a->nsets + 1) * sizeof(uint32_t) + a->nout * sizeof(cc_output);
}
