#include "lines.h"

#include <stdlib.h>
#include <string.h>

#include "text.h"

/* The evidence text of the line being pushed, encoded on first use. */
typedef struct line_text {
    const uint32_t *cps;
    uint32_t ncps, keep;    /* code points; how many a new entry keeps */
    uint32_t nbytes, keep_bytes;
    int encoded;
    unsigned char bytes[CC_EVIDENCE_BYTES];
} line_text;

static void encode_text(line_text *t) {
    if (t->encoded) return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->ncps; i++) {
        if (i == t->keep) t->keep_bytes = k;
        k += cc_utf8_encode(t->cps[i], t->bytes + k);
    }
    if (t->keep >= t->ncps) t->keep_bytes = k;
    t->nbytes = k;
    t->encoded = 1;
}

static uint32_t slot_of(uint64_t h, uint32_t mask) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (uint32_t)h & mask;
}

/* One allocation: the header, the entries, then the 16-bit arrays. */
static size_t header_size(void) { return (sizeof(cc_window) + 7) & ~(size_t)7; }

static size_t block_size(uint32_t cap, uint32_t slots) {
    return header_size() + (size_t)cap * sizeof(cc_entry) +
           ((size_t)cap * 4 + slots + (size_t)cap + 2) * sizeof(uint16_t);
}

static void lay_out(cc_window *w) {
    unsigned char *base = (unsigned char *)w + header_size();
    w->entries = (cc_entry *)base;
    uint16_t *p = (uint16_t *)(base + (size_t)w->cap * sizeof(cc_entry));
    w->ring = p;
    p += w->cap;
    w->index = p;
    p += (size_t)w->mask + 1;
    w->freq = p;
    p += (size_t)w->cap + 2;
    w->seg_entry = p;
    p += w->cap;
    w->seg_len = p;
    p += w->cap;
    w->dq = p;
}

cc_window *cc_window_new(uint32_t cap) {
    uint32_t slots = 8;
    while (slots < cap + cap / 2 + 1) slots *= 2; /* load factor at most 2/3 */
    cc_window *w = calloc(1, block_size(cap, slots));
    if (!w) return NULL;
    w->cap = cap;
    w->mask = slots - 1;
    lay_out(w);
    for (uint32_t i = 0; i < cap; i++) w->entries[i].last = i + 1; /* free chain */
    w->free_head = 0;
    return w;
}

void cc_window_free(cc_window *w) {
    if (!w) return;
    for (uint32_t i = 0; i < w->cap; i++) free(w->entries[i].text);
    free(w);
}

cc_window *cc_window_copy(const cc_window *w) {
    size_t size = block_size(w->cap, w->mask + 1);
    cc_window *c = malloc(size);
    if (!c) return NULL;
    memcpy(c, w, size);
    lay_out(c);
    uint32_t i;
    for (i = 0; i < w->cap; i++) {
        const unsigned char *t = w->entries[i].text;
        if (!t) continue;
        c->entries[i].text = malloc(2u + t[0]);
        if (!c->entries[i].text) break;
        memcpy(c->entries[i].text, t, 2u + t[0]);
    }
    if (i < w->cap) {
        for (; i < w->cap; i++) c->entries[i].text = NULL;
        cc_window_free(c);
        return NULL;
    }
    return c;
}

size_t cc_window_memory(const cc_window *w) {
    if (!w) return 0;
    size_t m = block_size(w->cap, w->mask + 1);
    for (uint32_t i = 0; i < w->cap; i++)
        if (w->entries[i].text) m += 2u + w->entries[i].text[0];
    return m;
}

/* ---- hash index ------------------------------------------------------------------------- */

static uint32_t find(const cc_window *w, uint64_t hash, uint16_t len, line_text *t) {
    for (uint32_t i = slot_of(hash, w->mask); w->index[i]; i = (i + 1) & w->mask) {
        const cc_entry *e = &w->entries[w->index[i] - 1];
        if (e->hash != hash || e->len != len) continue;
        uint32_t kept = cc_entry_nbytes(e);
        if (!kept) return w->index[i] - 1u; /* nothing kept: the hash and length decide */
        encode_text(t);
        if (kept <= t->nbytes && memcmp(cc_entry_bytes(e), t->bytes, kept) == 0 &&
            (kept == t->nbytes || !(cc_entry_flags(e) & CC_LINE_FULL)))
            return w->index[i] - 1u;
    }
    return UINT32_MAX;
}

static void index_insert(cc_window *w, uint32_t id) {
    uint32_t i = slot_of(w->entries[id].hash, w->mask);
    while (w->index[i]) i = (i + 1) & w->mask;
    w->index[i] = (uint16_t)(id + 1);
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

/* Segments live in a ring of cap slots (there are never more than cap of them); the deque holds
 * the slots of segments whose length beats every newer segment's, oldest first. */
static uint32_t wrap(const cc_window *w, uint32_t i) { return i >= w->cap ? i - w->cap : i; }
#define DQ_AT(k) (w->dq[wrap(w, w->dq_head + (k))])

static void dq_push_back(cc_window *w, uint32_t slot) {
    w->dq[wrap(w, w->dq_head + w->dq_n)] = (uint16_t)slot;
    w->dq_n++;
}

static void runs_push(cc_window *w, uint32_t id) {
    uint32_t last = w->seg_count ? wrap(w, w->seg_first + w->seg_count - 1) : 0;
    if (w->seg_count && w->seg_entry[last] == id) {
        uint32_t len = ++w->seg_len[last];
        w->dq_n--; /* the newest segment is always the back of the deque */
        while (w->dq_n && w->seg_len[DQ_AT(w->dq_n - 1)] <= len) w->dq_n--;
        dq_push_back(w, last);
    } else {
        uint32_t s = wrap(w, w->seg_first + w->seg_count);
        w->seg_count++;
        w->seg_entry[s] = (uint16_t)id;
        w->seg_len[s] = 1;
        while (w->dq_n && w->seg_len[DQ_AT(w->dq_n - 1)] <= 1) w->dq_n--;
        dq_push_back(w, s);
    }
}

static void runs_evict(cc_window *w) {
    uint32_t s = w->seg_first;
    uint32_t len = --w->seg_len[s];
    if (w->dq_n && DQ_AT(0) == s) {
        if (len == 0 || (w->dq_n >= 2 && len <= w->seg_len[DQ_AT(1)])) {
            w->dq_head = wrap(w, w->dq_head + 1);
            w->dq_n--;
        }
    }
    if (len == 0) {
        w->seg_first = wrap(w, w->seg_first + 1);
        w->seg_count--;
    }
}

uint32_t cc_window_longest_run(const cc_window *w) {
    return w->dq_n ? w->seg_len[DQ_AT(0)] : 0;
}

/* ---- push -------------------------------------------------------------------------------- */

static void stats_add(cc_window *w, const cc_entry *e) {
    if (cc_entry_flags(e) & CC_LINE_PREFIX) w->nflagged++;
    if (e->len <= CC_EVIDENCE_CHARS) w->short_hist[e->len]++;
}

static void stats_sub(cc_window *w, const cc_entry *e) {
    if (cc_entry_flags(e) & CC_LINE_PREFIX) w->nflagged--;
    if (e->len <= CC_EVIDENCE_CHARS) w->short_hist[e->len]--;
}

uint32_t cc_window_short_lines(const cc_window *w, uint32_t max_len) {
    uint32_t n = 0;
    for (uint32_t len = 0; len <= max_len && len <= CC_EVIDENCE_CHARS; len++)
        n += w->short_hist[len];
    return n;
}

static unsigned char *make_text(const unsigned char *text, uint32_t nbytes, unsigned flags) {
    unsigned char *t = malloc(2u + nbytes);
    if (!t) return NULL;
    t[0] = (unsigned char)nbytes;
    t[1] = (unsigned char)flags;
    memcpy(t + 2, text, nbytes);
    return t;
}

int cc_window_push(cc_window *w, uint64_t hash, uint32_t len, const uint32_t *cps, uint32_t ncps,
                   uint32_t keep, unsigned flags) {
    uint16_t len16 = len > 0xFFFF ? (uint16_t)0xFFFF : (uint16_t)len;
    line_text t;
    t.cps = cps;
    t.ncps = ncps;
    t.keep = keep;
    t.encoded = 0;
    uint32_t id;
    if (w->n == w->cap) {
        uint32_t old = w->ring[w->head];
        w->head = wrap(w, w->head + 1);
        w->n--;
        cc_entry *e = &w->entries[old];
        stats_sub(w, e);
        count_dec(w, e);
        runs_evict(w);
        if (!e->count) {
            index_remove(w, old);
            free(e->text);
            e->text = NULL;
            e->last = w->free_head;
            w->free_head = old;
        }
    }
    id = find(w, hash, len16, &t);
    if (id == UINT32_MAX) {
        if (keep >= ncps) flags |= CC_LINE_FULL;
        unsigned char *copy = NULL;
        if (keep || (flags & CC_LINE_PREFIX)) {
            encode_text(&t);
            copy = make_text(t.bytes, t.keep_bytes, flags);
            if (!copy) return -1;
        }
        id = w->free_head;
        cc_entry *e = &w->entries[id];
        w->free_head = e->last;
        e->hash = hash;
        e->len = len16;
        e->text = copy;
        e->count = 0;
        index_insert(w, id);
    } else if (!(cc_entry_flags(&w->entries[id]) & CC_LINE_FULL)) {
        /* a line seen again may become evidence: keep all of its text from now on */
        cc_entry *e = &w->entries[id];
        encode_text(&t);
        unsigned char *copy = make_text(t.bytes, t.nbytes, cc_entry_flags(e) | CC_LINE_FULL);
        if (!copy) return -1;
        free(e->text);
        e->text = copy;
    }
    cc_entry *e = &w->entries[id];
    stats_add(w, e);
    count_inc(w, e);
    e->last = w->serial++;
    w->ring[wrap(w, w->head + w->n)] = (uint16_t)id;
    w->n++;
    runs_push(w, id);
    return 0;
}

const cc_entry *cc_window_top_entry(const cc_window *w) {
    const cc_entry *best = NULL;
    for (uint32_t i = 0; i < w->cap; i++) {
        const cc_entry *e = &w->entries[i];
        if (e->count && e->count == w->top && (!best || cc_entry_newer(e, best))) best = e;
    }
    return best;
}
