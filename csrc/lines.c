#include "lines.h"

#include <stdlib.h>
#include <string.h>

static uint32_t slot_of(uint64_t h, uint32_t mask) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (uint32_t)h & mask;
}

cc_window *cc_window_new(uint32_t cap) {
    cc_window *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    uint32_t size = 8;
    while (size < 2 * (cap + 1)) size *= 2;
    w->cap = cap;
    w->mask = size - 1;
    w->ring = malloc(cap * sizeof *w->ring);
    w->entries = calloc(cap, sizeof *w->entries);
    w->freelist = malloc(cap * sizeof *w->freelist);
    w->index = calloc(size, sizeof *w->index);
    w->freq = calloc((size_t)cap + 2, sizeof *w->freq);
    w->seg_entry = malloc(cap * sizeof *w->seg_entry);
    w->seg_len = malloc(cap * sizeof *w->seg_len);
    w->dq = malloc(cap * sizeof *w->dq);
    if (!w->ring || !w->entries || !w->freelist || !w->index || !w->freq || !w->seg_entry ||
        !w->seg_len || !w->dq) {
        cc_window_free(w);
        return NULL;
    }
    for (uint32_t i = 0; i < cap; i++) w->freelist[i] = cap - 1 - i;
    w->nfree = cap;
    return w;
}

void cc_window_free(cc_window *w) {
    if (!w) return;
    if (w->entries)
        for (uint32_t i = 0; i < w->cap; i++) free(w->entries[i].text);
    free(w->ring);
    free(w->entries);
    free(w->freelist);
    free(w->index);
    free(w->freq);
    free(w->seg_entry);
    free(w->seg_len);
    free(w->dq);
    free(w);
}

#define DUP(field, count)                                                        \
    do {                                                                         \
        size_t sz_ = (size_t)(count) * sizeof *w->field;                         \
        c->field = malloc(sz_ ? sz_ : 1);                                        \
        if (!c->field) goto oom;                                                 \
        memcpy(c->field, w->field, sz_);                                         \
    } while (0)

cc_window *cc_window_copy(const cc_window *w) {
    cc_window *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = *w;
    c->ring = NULL, c->entries = NULL, c->freelist = NULL, c->index = NULL, c->freq = NULL;
    c->seg_entry = NULL, c->seg_len = NULL, c->dq = NULL;
    DUP(ring, w->cap);
    DUP(freelist, w->cap);
    DUP(index, (size_t)w->mask + 1);
    DUP(freq, (size_t)w->cap + 2);
    DUP(seg_entry, w->cap);
    DUP(seg_len, w->cap);
    DUP(dq, w->cap);
    c->entries = calloc(w->cap, sizeof *c->entries);
    if (!c->entries) goto oom;
    for (uint32_t i = 0; i < w->cap; i++) {
        c->entries[i] = w->entries[i];
        c->entries[i].text = NULL;
        if (w->entries[i].text) {
            c->entries[i].text = malloc(w->entries[i].nbytes ? w->entries[i].nbytes : 1);
            if (!c->entries[i].text) goto oom;
            memcpy(c->entries[i].text, w->entries[i].text, w->entries[i].nbytes);
        }
    }
    return c;
oom:
    cc_window_free(c);
    return NULL;
}

size_t cc_window_memory(const cc_window *w) {
    if (!w) return 0;
    size_t m = sizeof *w;
    m += (size_t)w->cap * (sizeof *w->ring + sizeof *w->entries + sizeof *w->freelist +
                           sizeof *w->seg_entry + sizeof *w->seg_len + sizeof *w->dq);
    m += ((size_t)w->mask + 1) * sizeof *w->index + ((size_t)w->cap + 2) * sizeof *w->freq;
    for (uint32_t i = 0; i < w->cap; i++)
        if (w->entries[i].text) m += w->entries[i].nbytes;
    return m;
}

/* ---- hash index ------------------------------------------------------------------------- */

static uint32_t find(const cc_window *w, uint64_t hash, uint32_t len, const unsigned char *text,
                     uint32_t nbytes) {
    for (uint32_t i = slot_of(hash, w->mask); w->index[i]; i = (i + 1) & w->mask) {
        const cc_entry *e = &w->entries[w->index[i] - 1];
        if (e->hash == hash && e->len == len && e->nbytes == nbytes &&
            memcmp(e->text, text, nbytes) == 0)
            return w->index[i] - 1;
    }
    return UINT32_MAX;
}

static void index_insert(cc_window *w, uint32_t id) {
    uint32_t i = slot_of(w->entries[id].hash, w->mask);
    while (w->index[i]) i = (i + 1) & w->mask;
    w->index[i] = id + 1;
}

static void index_remove(cc_window *w, uint32_t id) {
    uint32_t i = slot_of(w->entries[id].hash, w->mask);
    while (w->index[i] != id + 1) i = (i + 1) & w->mask;
    /* backward-shift deletion keeps probe sequences intact without tombstones */
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & w->mask;
        if (!w->index[j]) break;
        uint32_t k = slot_of(w->entries[w->index[j] - 1].hash, w->mask);
        int movable = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            w->index[i] = w->index[j];
            i = j;
        }
    }
    w->index[i] = 0;
}

/* ---- counts ------------------------------------------------------------------------------ */

static void count_inc(cc_window *w, cc_entry *e) {
    if (e->count) w->freq[e->count]--;
    e->count++;
    w->freq[e->count]++;
    if (e->count > w->top) w->top = e->count;
}

static void count_dec(cc_window *w, cc_entry *e) {
    w->freq[e->count]--;
    e->count--;
    if (e->count) w->freq[e->count]++;
    while (w->top && !w->freq[w->top]) w->top--;
}

/* ---- runs -------------------------------------------------------------------------------- */

#define SEG(s) ((uint32_t)((s) % w->cap))
#define DQ_AT(k) (w->dq[(w->dq_head + (k)) % w->cap])

static void dq_pop_back(cc_window *w) { w->dq_n--; }
static void dq_push_back(cc_window *w, uint64_t s) {
    w->dq[(w->dq_head + w->dq_n) % w->cap] = s;
    w->dq_n++;
}
static void dq_pop_front(cc_window *w) {
    w->dq_head = (w->dq_head + 1) % w->cap;
    w->dq_n--;
}

static void runs_push(cc_window *w, uint32_t id) {
    if (w->seg_count && w->seg_entry[SEG(w->seg_first + w->seg_count - 1)] == id) {
        uint64_t last = w->seg_first + w->seg_count - 1;
        uint32_t len = ++w->seg_len[SEG(last)];
        dq_pop_back(w); /* the newest segment is always the back of the deque */
        while (w->dq_n && w->seg_len[SEG(DQ_AT(w->dq_n - 1))] <= len) dq_pop_back(w);
        dq_push_back(w, last);
    } else {
        uint64_t s = w->seg_first + w->seg_count++;
        w->seg_entry[SEG(s)] = id;
        w->seg_len[SEG(s)] = 1;
        while (w->dq_n && w->seg_len[SEG(DQ_AT(w->dq_n - 1))] <= 1) dq_pop_back(w);
        dq_push_back(w, s);
    }
}

static void runs_evict(cc_window *w) {
    uint64_t s = w->seg_first;
    uint32_t len = --w->seg_len[SEG(s)];
    if (w->dq_n && DQ_AT(0) == s) {
        if (len == 0 || (w->dq_n >= 2 && len <= w->seg_len[SEG(DQ_AT(1))])) dq_pop_front(w);
    }
    if (len == 0) {
        w->seg_first++;
        w->seg_count--;
    }
}

uint32_t cc_window_longest_run(const cc_window *w) {
    return w->dq_n ? w->seg_len[SEG(DQ_AT(0))] : 0;
}

/* ---- push -------------------------------------------------------------------------------- */

static void stats(cc_window *w, const cc_entry *e, int delta) {
    if (e->flags) w->nflagged = (uint32_t)((int)w->nflagged + delta);
    if (e->len <= CC_EVIDENCE_CHARS)
        w->short_hist[e->len] = (uint32_t)((int)w->short_hist[e->len] + delta);
}

uint32_t cc_window_short_lines(const cc_window *w, uint32_t max_len) {
    uint32_t n = 0;
    for (uint32_t len = 0; len <= max_len && len <= CC_EVIDENCE_CHARS; len++) n += w->short_hist[len];
    return n;
}

int cc_window_push(cc_window *w, uint64_t hash, uint32_t len, const unsigned char *text,
                   uint32_t nbytes, uint32_t flags) {
    if (w->n == w->cap) {
        uint32_t old = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->n--;
        cc_entry *e = &w->entries[old];
        stats(w, e, -1);
        count_dec(w, e);
        runs_evict(w);
        if (!e->count) {
            index_remove(w, old);
            free(e->text);
            e->text = NULL;
            w->freelist[w->nfree++] = old;
        }
    }
    uint32_t id = find(w, hash, len, text, nbytes);
    if (id == UINT32_MAX) {
        unsigned char *copy = malloc(nbytes ? nbytes : 1);
        if (!copy) return -1;
        memcpy(copy, text, nbytes);
        id = w->freelist[--w->nfree];
        cc_entry *e = &w->entries[id];
        e->hash = hash;
        e->len = len;
        e->nbytes = nbytes;
        e->text = copy;
        e->flags = flags;
        e->count = 0;
        index_insert(w, id);
    }
    cc_entry *e = &w->entries[id];
    stats(w, e, +1);
    count_inc(w, e);
    e->last = w->serial++;
    w->ring[(w->head + w->n) % w->cap] = id;
    w->n++;
    runs_push(w, id);
    return 0;
}

const cc_entry *cc_window_top_entry(const cc_window *w) {
    const cc_entry *best = NULL;
    for (uint32_t i = 0; i < w->cap; i++) {
        const cc_entry *e = &w->entries[i];
        if (e->count && e->count == w->top && (!best || e->last > best->last)) best = e;
    }
    return best;
}
