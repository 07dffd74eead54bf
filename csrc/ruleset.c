/* Compiling a ruleset: check every spec against the limits of engine.h, copy the rules, build
 * one phrase automaton per (view, case folding), and plan how each view is scanned. */
#include <stdarg.h>

#include "engine_impl.h"

/* ---------------------------------------------------------------------------- errors -- */

static int compile_fail(cc_compile_error *err, int status, long long rule, long long phrase,
                        const char *field, const char *fmt, ...) {
    if (err) {
        va_list ap;
        err->status = status;
        err->rule = rule;
        err->phrase = phrase;
        err->field = field;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* ---------------------------------------------------------------------------- limits -- */

/* Range checks of a field of rule i (CHECK_RANGE needs LO >= 1). */
#define CHECK_MAX(VALUE, FIELD, HI)                                                            \
    do {                                                                                       \
        uint64_t max_ = (uint64_t)(VALUE);                                                     \
        if (max_ > (uint64_t)(HI))                                                             \
            return compile_fail(err, CC_ERR_LIMIT, i, -1, FIELD,                               \
                                "rules[%lld]: %s must be in [0, %llu], got %llu", i, FIELD,     \
                                (unsigned long long)(HI), (unsigned long long)max_);           \
    } while (0)

#define CHECK_RANGE(VALUE, FIELD, LO, HI)                                                     \
    do {                                                                                       \
        uint64_t value_ = (uint64_t)(VALUE);                                                   \
        if (value_ < (uint64_t)(LO) || value_ > (uint64_t)(HI))                                \
            return compile_fail(err, CC_ERR_LIMIT, i, -1, FIELD,                               \
                                "rules[%lld]: %s must be in [%llu, %llu], got %llu", i, FIELD, \
                                (unsigned long long)(LO), (unsigned long long)(HI),            \
                                (unsigned long long)value_);                                   \
    } while (0)

#define CHECK_RATIO(VALUE, FIELD)                                                              \
    do {                                                                                       \
        double value_ = (VALUE);                                                               \
        if (!(value_ > 0.0 && value_ <= 1.0))                                                  \
            return compile_fail(err, CC_ERR_LIMIT, i, -1, FIELD,                               \
                                "rules[%lld]: %s must be a ratio in (0, 1], got %g", i, FIELD,  \
                                value_);                                                       \
    } while (0)

#define CHECK_SET(SET, N, FIELD, MAX)                                                          \
    do {                                                                                       \
        CHECK_RANGE(N, FIELD, 1, MAX);                                                         \
        if (!(SET))                                                                            \
            return compile_fail(err, CC_ERR_INVALID, i, -1, FIELD, "rules[%lld]: %s is NULL", \
                                i, FIELD);                                                     \
    } while (0)

static int check_rule_spec(const cc_rule_spec *r, long long i, cc_compile_error *err) {
    if (r->kind < CC_K_PHRASES || r->kind >= CC_K_END)
        return compile_fail(err, CC_ERR_INVALID, i, -1, "kind", "rules[%lld]: unknown kind %d",
                            i, r->kind);
    if (r->view < 0 || r->view >= CC_NVIEWS)
        return compile_fail(err, CC_ERR_INVALID, i, -1, "view", "rules[%lld]: unknown view %d",
                            i, r->view);
    if (r->kind == CC_K_PHRASES) return CC_OK;
    CHECK_RANGE(r->every_bytes, "every_bytes", 1, CC_MAX_EVERY_BYTES);
    switch (r->kind) {
    case CC_K_LINE_REPEAT:
        CHECK_RANGE(r->min_lines, "min_lines", 1, CC_MAX_COUNT);
        CHECK_RANGE(r->min_count, "min_count", 1, CC_MAX_COUNT);
        CHECK_MAX(r->min_run, "min_run", CC_MAX_COUNT);
        CHECK_RATIO(r->min_ratio, "min_ratio");
        break;
    case CC_K_LINE_CYCLE:
        CHECK_RANGE(r->max_line_chars, "max_line_chars", 1, CC_EVIDENCE_CHARS);
        CHECK_RANGE(r->min_lines, "min_lines", 1, CC_MAX_COUNT);
        CHECK_RANGE(r->top, "top", 1, CC_MAX_CYCLE_TOP);
        CHECK_RATIO(r->cover_ratio, "cover_ratio");
        break;
    case CC_K_FILLER_LINES:
        CHECK_SET(r->fillers, r->nfillers, "fillers", CC_MAX_FILLERS);
        CHECK_RANGE(r->max_line_chars, "max_line_chars", 1, CC_EVIDENCE_CHARS);
        CHECK_RANGE(r->min_count, "min_count", 1, CC_MAX_COUNT);
        CHECK_RATIO(r->min_ratio, "min_ratio");
        break;
    case CC_K_PREFIX_MONOTONY:
        CHECK_SET(r->delimiters, r->ndelimiters, "delimiters", CC_MAX_DELIMITERS);
        CHECK_RANGE(r->max_prefix_chars, "max_prefix_chars", 1, CC_MAX_PREFIX_CHARS);
        CHECK_RANGE(r->min_lines, "min_lines", 1, CC_MAX_COUNT);
        CHECK_RANGE(r->min_count, "min_count", 1, CC_MAX_COUNT);
        CHECK_RATIO(r->min_ratio, "min_ratio");
        break;
    case CC_K_TAIL_REPEAT:
        CHECK_RANGE(r->window_chars, "window_chars", 2, CC_MAX_WINDOW_CHARS);
        CHECK_RANGE(r->max_period, "max_period", 1, r->window_chars / 2);
        CHECK_RANGE(r->min_repeats, "min_repeats", 2, r->window_chars);
        CHECK_RANGE(r->min_chars, "min_chars", 2, r->window_chars);
        break;
    case CC_K_BLOCK_REPEAT:
        CHECK_RANGE(r->every_bytes, "every_bytes", 1, CC_MAX_SEGMENT_EVERY_BYTES);
        CHECK_RANGE(r->max_period, "max_period", 1, CC_MAX_BLOCK_PERIOD);
        CHECK_RANGE(r->min_repeats, "min_repeats", 2, CC_MAX_BLOCK_REPEATS);
        CHECK_RANGE(r->max_period * r->min_repeats, "max_period", 1, CC_MAX_BLOCK_SEGMENTS);
        CHECK_RANGE(r->min_chars, "min_chars", 1, CC_MAX_COUNT);
        CHECK_MAX(r->min_letters, "min_letters", CC_MAX_COUNT);
        CHECK_MAX(r->fence_letters, "fence_letters", CC_MAX_COUNT);
        break;
    case CC_K_VOCAB_COLLAPSE:
        CHECK_RANGE(r->every_bytes, "every_bytes", 1, CC_MAX_SEGMENT_EVERY_BYTES);
        CHECK_RANGE(r->words, "words", 2, CC_MAX_VOCAB_WORDS);
        CHECK_RANGE(r->max_distinct, "max_distinct", 1, r->words - 1);
        break;
    case CC_K_STRUCTURE_FLOOD:
        CHECK_RANGE(r->min_chars, "min_chars", 2, CC_MAX_WINDOW_CHARS);
        CHECK_MAX(r->max_period, "max_period", r->min_chars - 1);
        break;
    case CC_K_WORD_REPEAT:
        CHECK_RANGE(r->every_bytes, "every_bytes", 1, CC_MAX_SEGMENT_EVERY_BYTES);
        CHECK_RANGE(r->max_period, "max_period", 1, CC_MAX_WORD_PERIOD);
        CHECK_RANGE(r->min_repeats, "min_repeats", 2, CC_MAX_BLOCK_REPEATS);
        CHECK_RANGE(r->max_period * r->min_repeats, "max_period", 1, CC_MAX_WORD_TAIL);
        CHECK_RANGE(r->min_chars, "min_chars", 1, CC_MAX_COUNT);
        CHECK_MAX(r->min_words, "min_words", CC_MAX_WORD_PERIOD);
        break;
    case CC_K_SEGMENT_REPEAT:
        CHECK_RANGE(r->every_bytes, "every_bytes", 1, CC_MAX_SEGMENT_EVERY_BYTES);
        CHECK_RANGE(r->window, "window", 1, CC_MAX_BLOCK_SEGMENTS);
        CHECK_RANGE(r->top, "top", 1, CC_MAX_CYCLE_TOP);
        CHECK_RANGE(r->min_count, "min_count", 1, r->window);
        CHECK_MAX(r->min_letters, "min_letters", CC_MAX_COUNT);
        CHECK_MAX(r->top_letters, "top_letters", CC_MAX_COUNT);
        break;
    default: break;
    }
    return CC_OK;
}

static int check_options(const cc_options *opt, cc_compile_error *err) {
    const long long i = -1; /* no rule to blame */
    if (opt->line_window < 1 || opt->line_window > CC_MAX_COUNT)
        return compile_fail(err, CC_ERR_LIMIT, i, -1, "line_window",
                            "line_window must be in [1, %d], got %u", CC_MAX_COUNT,
                            opt->line_window);
    if (opt->min_line_chars < 1 || opt->min_line_chars > CC_MAX_PHRASE_CHARS)
        return compile_fail(err, CC_ERR_LIMIT, i, -1, "min_line_chars",
                            "min_line_chars must be in [1, %d], got %u", CC_MAX_PHRASE_CHARS,
                            opt->min_line_chars);
    if (opt->evidence_chars > CC_MAX_TAIL_CHARS)
        return compile_fail(err, CC_ERR_LIMIT, i, -1, "evidence_chars",
                            "evidence_chars must be in [0, %d], got %u", CC_MAX_TAIL_CHARS,
                            opt->evidence_chars);
    return CC_OK;
}

static int check_phrases(const cc_rule_spec *rules, uint32_t nrules,
                         const cc_phrase_spec *phrases, size_t nphrases, cc_compile_error *err) {
    if (nphrases > CC_MAX_PHRASES)
        return compile_fail(err, CC_ERR_LIMIT, -1, -1, "phrases",
                            "rules hold %zu phrases; at most %d are supported", nphrases,
                            CC_MAX_PHRASES);
    size_t total = 0;
    for (size_t k = 0; k < nphrases; k++) {
        const cc_phrase_spec *p = &phrases[k];
        long long pk = (long long)k;
        if (p->rule >= nrules || rules[p->rule].kind != CC_K_PHRASES)
            return compile_fail(err, CC_ERR_INVALID, p->rule < nrules ? (long long)p->rule : -1,
                                pk, "rule", "phrases[%lld]: rule %u is not a phrase rule", pk,
                                p->rule);
        if (!p->len || !p->bytes)
            return compile_fail(err, CC_ERR_INVALID, p->rule, pk, "bytes",
                                "phrases[%lld]: a phrase must not be empty", pk);
        uint32_t chars = 0;
        for (uint32_t b = 0; b < p->len; b++) chars += (p->bytes[b] & 0xC0) != 0x80;
        if (chars > CC_MAX_PHRASE_CHARS)
            return compile_fail(err, CC_ERR_LIMIT, p->rule, pk, "bytes",
                                "phrases[%lld]: a phrase must be at most %d characters, got %u",
                                pk, CC_MAX_PHRASE_CHARS, chars);
        total += p->len;
    }
    if (total > CC_MAX_PHRASE_BYTES)
        return compile_fail(err, CC_ERR_LIMIT, -1, -1, "phrases",
                            "the phrases of all rules take %zu UTF-8 bytes; at most %d are "
                            "supported", total, CC_MAX_PHRASE_BYTES);
    return CC_OK;
}

/* --------------------------------------------------------------------------- compile -- */

void cc_ruleset_free(cc_ruleset *rs) {
    if (!rs) return;
    for (uint32_t i = 0; rs->rules && i < rs->nrules; i++) {
        free((void *)rs->rules[i].fillers);
        free((void *)rs->rules[i].delimiters);
    }
    free(rs->rules);
    for (int v = 0; v < CC_NVIEWS; v++) {
        cc_automaton_free(rs->views[v].ac[0]);
        cc_automaton_free(rs->views[v].ac[1]);
        free(rs->views[v].windowed);
        free(rs->views[v].wend);
        free(rs->views[v].blocks);
        free(rs->views[v].suppress);
        free(rs->views[v].pfx_set);
    }
    free(rs);
}

/* A copy of a code point set (NULL when empty or out of memory: *oom says which). */
static const uint32_t *copy_set(const uint32_t *set, uint32_t n, int *oom) {
    if (!n) return NULL;
    uint32_t *copy = malloc(n * sizeof *copy);
    if (!copy) {
        *oom = 1;
        return NULL;
    }
    memcpy(copy, set, n * sizeof *copy);
    return copy;
}

/* Group the view's windowed rules by every_bytes: rules of one interval share their throttle
 * points, so one test of the group's next point covers them all (eng_throttle). Groups come in
 * the order of their first rule, rule order within a group (a stable insertion sort: few rules);
 * the hits of one point are ordered by (position, rule) afterwards, whatever order ran them. */
static void group_windowed(const cc_ruleset *rs, viewplan *vp) {
    uint32_t *wi = vp->windowed, n = vp->nwindowed;
    for (uint32_t k = 0; k < n;) {
        uint64_t every = rs->rules[wi[k]].every_bytes;
        uint32_t end = k + 1;
        for (uint32_t j = k + 1; j < n; j++) {
            if (rs->rules[wi[j]].every_bytes != every) continue;
            uint32_t ri = wi[j];
            memmove(wi + end + 1, wi + end, (j - end) * sizeof *wi);
            wi[end++] = ri;
        }
        for (uint32_t j = k; j < end; j++) vp->wend[j] = end;
        k = end;
    }
}

/* What a windowed rule asks of its view. */
static void plan_windowed(viewplan *vp, const cc_rule_spec *r, const cc_options *opt) {
    if (r->kind == CC_K_TAIL_REPEAT) {
        if (r->window_chars > vp->ring_cap) vp->ring_cap = r->window_chars;
        if (opt->mask_fences) vp->builder = 1; /* its check asks whether a fence is open */
        return;
    }
    if (r->kind == CC_K_STRUCTURE_FLOOD) {
        if (r->min_chars > vp->ring_cap) vp->ring_cap = r->min_chars;
        return;
    }
    if (r->kind == CC_K_BLOCK_REPEAT || r->kind == CC_K_VOCAB_COLLAPSE ||
        r->kind == CC_K_SEGMENT_REPEAT || r->kind == CC_K_WORD_REPEAT) {
        /* the scan reads back what came since the previous check, and quotes evidence */
        uint64_t need = r->every_bytes + 4;
        if (need < CC_QUOTE_CHARS) need = CC_QUOTE_CHARS;
        if (need > vp->ring_cap) vp->ring_cap = (uint32_t)need;
        if (r->kind == CC_K_BLOCK_REPEAT) {
            if (r->max_period * r->min_repeats > vp->seg_cap)
                vp->seg_cap = r->max_period * r->min_repeats;
            vp->nblock++;
            vp->builder = 1; /* the loops stop at every newline, where BlockRepeat is checked */
        } else if (r->kind == CC_K_SEGMENT_REPEAT) {
            if (r->window > vp->seg_cap) vp->seg_cap = r->window;
        } else if (r->kind == CC_K_WORD_REPEAT) {
            /* the scanner cuts words only for a view that keeps some (one will do) */
            if (r->max_period * r->min_repeats > vp->tail_cap)
                vp->tail_cap = r->max_period * r->min_repeats;
            if (!vp->word_cap) vp->word_cap = 1;
        } else if (r->words > vp->word_cap) {
            vp->word_cap = r->words;
        }
        return;
    }
    vp->builder = 1;
    vp->window = 1;
    switch (r->kind) {
    case CC_K_LINE_REPEAT: {
        /* the evidence line has count >= min(min_count, min_run): a line seen once keeps its
         * text only when that bound is 1 */
        uint32_t bound = r->min_count;
        if (r->min_run && r->min_run < bound) bound = r->min_run;
        if (bound <= 1) vp->keep_all = 1;
        break;
    }
    case CC_K_LINE_CYCLE:
    case CC_K_FILLER_LINES:
        if (r->max_line_chars > vp->short_max) vp->short_max = r->max_line_chars;
        break;
    case CC_K_PREFIX_MONOTONY:
        if (r->max_prefix_chars > vp->pfx_max) vp->pfx_max = r->max_prefix_chars;
        for (uint32_t k = 0; k < r->ndelimiters; k++)
            if (!cc_u32_in(vp->pfx_set, vp->npfx, r->delimiters[k]))
                vp->pfx_set[vp->npfx++] = r->delimiters[k];
        break;
    default: break;
    }
}

/* The view's loop shape, from what its rules need. */
static view_shape plan_view_shape(const viewplan *vp) {
    int ph = vp->nac > 0 || vp->quotes;
    int ln = vp->builder || vp->ring_cap || vp->nwindowed;
    if (ph && !ln && vp->nac == 1) return VIEW_PHRASES;
    if (!ph && vp->builder) return VIEW_LINES;
    if (!ph && ln) return VIEW_RING;
    return VIEW_ALL;
}

/* The pair loop of a channel: the common shapes get one fused function, the rest the generic
 * one. */
static pair_shape plan_pair_shape(const cc_ruleset *rs, int ch) {
    const viewplan *vc = &rs->views[CC_VIEW_COMBINED];
    const viewplan *vp = &rs->views[ch];
    int comb_ln = vc->used && vc->shape == VIEW_LINES;
    int comb_rg = vc->used && vc->shape == VIEW_RING;
    int ph = vp->used && vp->shape == VIEW_PHRASES;
    if (!(ph || !vp->used) || !(comb_ln || comb_rg)) return PAIR_GENERIC;
    if (ph && comb_ln) return PAIR_PH_LN;
    if (ph && !vc->nwindowed) return PAIR_PH_EV;
    if (ph) return PAIR_PH_RG;
    return comb_ln ? PAIR_LN : PAIR_RG;
}

static void plan_loops(cc_ruleset *rs) {
    for (int v = 0; v < CC_NVIEWS; v++) {
        viewplan *vp = &rs->views[v];
        vp->shape = plan_view_shape(vp);
        memcpy(vp->run, eng_view_loops[vp->shape], sizeof vp->run);
    }
    for (int ch = 0; ch < 2; ch++) {
        rs->pair_shape[ch] = plan_pair_shape(rs, ch);
        memcpy(rs->pair[ch], eng_pair_loops[rs->pair_shape[ch]], sizeof rs->pair[ch]);
        memcpy(rs->pair_batch[ch], eng_pair_loops_batch[rs->pair_shape[ch]],
               sizeof rs->pair_batch[ch]);
    }
}

int cc_ruleset_new(const cc_options *opt, const cc_rule_spec *rules, uint32_t nrules,
                   const cc_phrase_spec *phrases, size_t nphrases, cc_ruleset **out,
                   cc_compile_error *err) {
    cc_ruleset *rs = NULL;
    cc_phrase_in *group = NULL;
    size_t nset = 0;
    int status, oom = 0;
    *out = NULL;
    if (err) {
        err->status = CC_OK;
        err->rule = err->phrase = -1;
        err->field = NULL;
        err->message[0] = 0;
    }
    if ((status = check_options(opt, err)) != CC_OK) return status;
    for (uint32_t i = 0; i < nrules; i++)
        if ((status = check_rule_spec(&rules[i], i, err)) != CC_OK) return status;
    if ((status = check_phrases(rules, nrules, phrases, nphrases, err)) != CC_OK) return status;

    rs = calloc(1, sizeof *rs);
    if (!rs) goto oom;
    rs->opt = *opt;
    rs->nrules = nrules;
    rs->rules = calloc(nrules ? nrules : 1, sizeof *rs->rules);
    if (!rs->rules) goto oom;
    for (uint32_t i = 0; i < nrules; i++) {
        rs->rules[i] = rules[i];
        rs->rules[i].fillers = copy_set(rules[i].fillers, rules[i].nfillers, &oom);
        rs->rules[i].delimiters = copy_set(rules[i].delimiters, rules[i].ndelimiters, &oom);
        if (oom) goto oom;
        nset += rules[i].ndelimiters;
    }
    for (int v = 0; v < CC_NVIEWS; v++) {
        viewplan *vp = &rs->views[v];
        vp->windowed = malloc((nrules ? nrules : 1) * sizeof *vp->windowed);
        vp->wend = malloc((nrules ? nrules : 1) * sizeof *vp->wend);
        vp->blocks = malloc((nrules ? nrules : 1) * sizeof *vp->blocks);
        vp->suppress = malloc((nrules ? nrules : 1) * sizeof *vp->suppress);
        vp->pfx_set = malloc((nset ? nset : 1) * sizeof *vp->pfx_set);
        if (!vp->windowed || !vp->wend || !vp->blocks || !vp->suppress || !vp->pfx_set) goto oom;
    }
    for (uint32_t i = 0; i < nrules; i++) {
        const cc_rule_spec *r = &rs->rules[i];
        viewplan *vp = &rs->views[r->view];
        vp->used = 1;
        if (r->kind == CC_K_PHRASES) {
            vp->nphrase_rules++;
            if (r->suppress_quoted) {
                vp->quotes = 1;
                vp->suppress[vp->nsuppress++] = i;
            }
        } else {
            vp->windowed[vp->nwindowed++] = i;
            plan_windowed(vp, r, opt);
            if (r->kind == CC_K_BLOCK_REPEAT) vp->blocks[vp->nblock - 1] = i;
        }
    }
    for (int v = 0; v < CC_NVIEWS; v++) group_windowed(rs, &rs->views[v]);
    /* the combined view always keeps the evidence tail */
    if (opt->evidence_chars) {
        viewplan *vc = &rs->views[CC_VIEW_COMBINED];
        vc->used = 1;
        if (opt->evidence_chars > vc->ring_cap) vc->ring_cap = opt->evidence_chars;
    }
    /* one automaton per (view, case folding) */
    group = malloc((nphrases ? nphrases : 1) * sizeof *group);
    if (!group) goto oom;
    for (int v = 0; v < CC_NVIEWS; v++) {
        for (int fold = 0; fold < 2; fold++) {
            size_t n = 0;
            for (size_t k = 0; k < nphrases; k++) {
                const cc_rule_spec *r = &rs->rules[phrases[k].rule];
                if (r->view != v || (r->ignore_case != 0) != (fold != 0)) continue;
                group[n].bytes = phrases[k].bytes;
                group[n].len = phrases[k].len;
                group[n].rule = phrases[k].rule;
                group[n].index = phrases[k].index;
                n++;
            }
            if (!n) continue;
            /* with suppress_quoted, line ends and quote marks need the loop's attention */
            static const uint32_t quote_specials[] = {'\n', CC_QUOTE_MARKS};
            size_t nspecial = rs->views[v].quotes ? sizeof quote_specials / sizeof *quote_specials
                                                  : 0;
            char msg[sizeof err->message];
            int ac_status = CC_ERR_NOMEM;
            rs->views[v].ac[fold] = cc_automaton_build(
                group, n, fold, quote_specials, nspecial,
                opt->dense_bytes ? opt->dense_bytes : CC_AC_DENSE_BYTES, opt->max_table_bytes,
                msg, sizeof msg, &ac_status);
            if (!rs->views[v].ac[fold]) {
                status = compile_fail(err, ac_status, -1, -1, "phrases", "%s", msg);
                goto fail;
            }
            rs->views[v].live_ac[rs->views[v].nac++] = rs->views[v].ac[fold];
        }
    }
    free(group);
    plan_loops(rs);
    *out = rs;
    return CC_OK;
oom:
    status = compile_fail(err, CC_ERR_NOMEM, -1, -1, NULL, "out of memory compiling the ruleset");
fail:
    free(group);
    cc_ruleset_free(rs);
    return status;
}

size_t cc_ruleset_memory(const cc_ruleset *rs) {
    size_t m = sizeof *rs + rs->nrules * sizeof *rs->rules;
    for (int v = 0; v < CC_NVIEWS; v++)
        m += cc_automaton_memory(rs->views[v].ac[0]) + cc_automaton_memory(rs->views[v].ac[1]);
    return m;
}
