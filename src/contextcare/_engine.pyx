# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, auto_pickle=False
"""The native engine: a thin layer over the C core in csrc/.

It validates and translates rule objects once (``Ruleset``), then hands str data straight to C
on every ``feed`` (the code points of the str, read in place: no encoding, no copy) and builds
``Detection`` objects only when something fired.
"""

from array import array

from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

# The limits of the C core (csrc/engine.h). contextcare.rules reads them from here, so they are
# set before that module is imported below.
EVIDENCE_CHARS = CC_EVIDENCE_CHARS
MAX_COUNT = CC_MAX_COUNT
MAX_EVERY_BYTES = CC_MAX_EVERY_BYTES
MAX_CYCLE_TOP = CC_MAX_CYCLE_TOP
MAX_PREFIX_CHARS = CC_MAX_PREFIX_CHARS
MAX_FILLERS = CC_MAX_FILLERS
MAX_DELIMITERS = CC_MAX_DELIMITERS
MAX_WINDOW_CHARS = CC_MAX_WINDOW_CHARS
MAX_TAIL_CHARS = CC_MAX_TAIL_CHARS
MAX_PHRASE_CHARS = CC_MAX_PHRASE_CHARS
MAX_PHRASES = CC_MAX_PHRASES
MAX_PHRASE_BYTES = CC_MAX_PHRASE_BYTES
MAX_BLOCK_SEGMENTS = CC_MAX_BLOCK_SEGMENTS
MAX_BLOCK_PERIOD = CC_MAX_BLOCK_PERIOD
MAX_BLOCK_REPEATS = CC_MAX_BLOCK_REPEATS
MAX_SEGMENT_EVERY_BYTES = CC_MAX_SEGMENT_EVERY_BYTES
MAX_VOCAB_WORDS = CC_MAX_VOCAB_WORDS
MAX_WORD_PERIOD = CC_MAX_WORD_PERIOD
MAX_WORD_TAIL = CC_MAX_WORD_TAIL

from contextcare import rules as _rules
from contextcare.detection import Detection
from contextcare.errors import ArgumentTypeError, ArgumentValueError, RuleValueError, uninitialised

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    object PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)

# Deltas longer than this are scanned with the GIL released.
cdef enum:
    NOGIL_CHARS = 65536
#: Largest compiled phrase automaton (one per channel view and case folding); see docs/hardening.md.
MAX_AUTOMATON_BYTES = 256 * 1024 * 1024
cdef size_t MAX_TABLE_BYTES = MAX_AUTOMATON_BYTES
cdef size_t DENSE_BYTES = 0  # 0: the core's default budget of dense automaton rows


def _automaton_limits(dense_bytes=None, max_bytes=None):
    """Test hook: set the dense-row budget and the size limit of the phrase automata of
    Rulesets built from now on (``None`` keeps a value; ``dense_bytes=0`` restores the default).
    Returns the previous ``(dense_bytes, max_bytes)``. Not thread-safe; not public API."""
    global DENSE_BYTES, MAX_TABLE_BYTES
    old = (DENSE_BYTES, MAX_TABLE_BYTES)
    if dense_bytes is not None:
        DENSE_BYTES = dense_bytes
    if max_bytes is not None:
        MAX_TABLE_BYTES = max_bytes
    return old

_VIEWS = {"text": CC_VIEW_TEXT, "reasoning": CC_VIEW_REASONING, "combined": CC_VIEW_COMBINED}
# The engine's detectors by the name rule classes declare (Rule.detector).
_DETECTORS = {
    "phrases": CC_K_PHRASES,
    "line-repeat": CC_K_LINE_REPEAT,
    "line-cycle": CC_K_LINE_CYCLE,
    "filler-lines": CC_K_FILLER_LINES,
    "prefix-monotony": CC_K_PREFIX_MONOTONY,
    "tail-repeat": CC_K_TAIL_REPEAT,
    "block-repeat": CC_K_BLOCK_REPEAT,
    "vocab-collapse": CC_K_VOCAB_COLLAPSE,
    "segment-repeat": CC_K_SEGMENT_REPEAT,
    "structure-flood": CC_K_STRUCTURE_FLOOD,
    "word-repeat": CC_K_WORD_REPEAT,
}
_STATUS = {CC_ERR_NOMEM: "nomem", CC_ERR_LIMIT: "limit", CC_ERR_INVALID: "invalid",
           CC_ERR_TOO_BIG: "too-big"}

# Where each evidence field of a Detection (Rule.evidence) comes from in a hit record.
cdef enum:
    EV_PHRASE, EV_TEXT, EV_PARTS, EV_COUNT, EV_TOTAL, EV_RATIO, EV_RUN, EV_PERIOD, EV_REPEATS
_EVIDENCE_SOURCE = {
    "phrase": EV_PHRASE, "line": EV_TEXT, "prefix": EV_TEXT, "unit": EV_TEXT, "cycle": EV_PARTS,
    "count": EV_COUNT, "total": EV_TOTAL, "ratio": EV_RATIO, "run": EV_RUN, "period": EV_PERIOD,
    "repeats": EV_REPEATS,
}


cdef inline int _feed_channel(object channel) except -1:
    # identity first: the channel names are interned, so callers nearly always pass these objects
    if channel is "text":
        return CC_VIEW_TEXT
    if channel is "reasoning":
        return CC_VIEW_REASONING
    if channel == "text":
        return CC_VIEW_TEXT
    if channel == "reasoning":
        return CC_VIEW_REASONING
    _rules.check_feed_channel(channel)  # raises the documented error
    return -1


cdef str _decode(const unsigned char *text, size_t n):
    return PyUnicode_DecodeUTF8(<const char *>text, n, "surrogatepass")


def _rebuild(rules, options):
    return Ruleset(rules, **options)


cdef object _code_points(str chars, list keep):
    """The code points of chars as a uint32 array (kept alive in keep)."""
    points = array("I", [ord(ch) for ch in chars])
    keep.append(points)
    return points


cdef int _fill_spec(cc_rule_spec *s, dict spec, list keep) except -1:
    """One rule spec (Rule.engine_spec()) into the C struct: one line per field."""
    cdef const uint32_t[::1] points
    s.kind = _DETECTORS[spec["detector"]]
    s.view = _VIEWS[spec["view"]]
    s.once = spec.get("once", True)
    s.ignore_case = spec.get("ignore_case", False)
    s.suppress_quoted = spec.get("suppress_quoted", False)
    s.every_bytes = spec.get("every_bytes", 0)
    s.min_lines = spec.get("min_lines", 0)
    s.min_count = spec.get("min_count", 0)
    s.min_run = spec.get("min_run", 0)
    s.min_ratio = spec.get("min_ratio", 0.0)
    s.top = spec.get("top", 0)
    s.cover_ratio = spec.get("cover_ratio", 0.0)
    s.max_line_chars = spec.get("max_line_chars", 0)
    s.max_prefix_chars = spec.get("max_prefix_chars", 0)
    s.window_chars = spec.get("window_chars", 0)
    s.max_period = spec.get("max_period", 0)
    s.min_repeats = spec.get("min_repeats", 0)
    s.min_chars = spec.get("min_chars", 0)
    s.near = spec.get("near", False)
    s.min_letters = spec.get("min_letters", 0)
    s.words = spec.get("words", 0)
    s.max_distinct = spec.get("max_distinct", 0)
    s.one_line = spec.get("one_line", False)
    s.window = spec.get("window", 0)
    s.fence_letters = spec.get("fence_letters", 0)
    s.fences = spec.get("fences", True)
    s.top_letters = spec.get("top_letters", 0)
    s.min_words = spec.get("min_words", 0)
    if spec.get("fillers"):
        points = _code_points(spec["fillers"], keep)
        s.fillers, s.nfillers = &points[0], len(points)
    if spec.get("delimiters"):
        points = _code_points(spec["delimiters"], keep)
        s.delimiters, s.ndelimiters = &points[0], len(points)
    return 0


cdef object _compile_error(cc_compile_error *err):
    """The exception for a failed cc_ruleset_new, chosen by status; it carries the status
    (``status``), the index of the failing rule or phrase (``rule_index``, ``phrase_index``,
    ``None`` when none) and the field (``field``)."""
    message = err.message.decode("utf-8", "replace")
    if err.status == CC_ERR_NOMEM:
        exc = MemoryError(message)
    else:
        exc = RuleValueError(f"Ruleset: {message}")
    exc.status = _STATUS.get(err.status, str(err.status))
    exc.rule_index = err.rule if err.rule >= 0 else None
    exc.phrase_index = err.phrase if err.phrase >= 0 else None
    exc.field = err.field.decode("ascii") if err.field != NULL else None
    return exc


cdef cc_ruleset *_compile(list specs, list phrase_lists, options) except NULL:
    """Compile rule specs (dicts as Rule.engine_spec() returns) and their phrases."""
    cdef Py_ssize_t n = len(specs), nphrases = sum([len(p) for p in phrase_lists])
    cdef cc_rule_spec *cspecs = <cc_rule_spec *>malloc((n or 1) * sizeof(cc_rule_spec))
    cdef cc_phrase_spec *phrases = <cc_phrase_spec *>malloc((nphrases or 1)
                                                             * sizeof(cc_phrase_spec))
    cdef cc_ruleset *rs = NULL
    cdef cc_compile_error err
    cdef cc_options opt
    cdef Py_ssize_t i, j, k = 0
    cdef bytes b
    keep = []
    try:
        if cspecs == NULL or phrases == NULL:
            raise MemoryError()
        memset(cspecs, 0, (n or 1) * sizeof(cc_rule_spec))
        for i in range(n):
            _fill_spec(&cspecs[i], specs[i], keep)
            for j, phrase in enumerate(phrase_lists[i]):
                b = phrase.encode("utf-8", "surrogatepass")
                keep.append(b)
                phrases[k].bytes = <const unsigned char *><char *>b
                phrases[k].len = len(b)
                phrases[k].rule = i
                phrases[k].index = j
                k += 1
        opt.line_window = options.line_window
        opt.min_line_chars = options.min_line_chars
        opt.evidence_chars = options.evidence_chars
        opt.mask_fences = options.mask_code_fences
        opt.max_table_bytes = MAX_TABLE_BYTES
        opt.dense_bytes = DENSE_BYTES
        if cc_ruleset_new(&opt, cspecs, <uint32_t>n, phrases, <size_t>k, &rs, &err) != CC_OK:
            raise _compile_error(&err)
        return rs
    finally:
        free(cspecs)
        free(phrases)


def _compile_specs(specs, phrase_lists=None, **options):
    """Test hook: compile raw engine rule specs (dicts as ``Rule.engine_spec()`` returns, which
    the Python validation never sees) and free the result; raises as ``Ruleset`` does. Lets the
    tests reach the C core's own limit checks."""
    opts = _rules.RulesetOptions(**options)
    specs = list(specs)
    lists = [tuple(p) for p in phrase_lists] if phrase_lists is not None else [()] * len(specs)
    cc_ruleset_free(_compile(specs, lists, opts))


cdef class Ruleset:
    """Compiled rules: immutable, safe to share across threads, picklable.

    ``Ruleset(rules, *, line_window=80, min_line_chars=3, evidence_chars=600,
    mask_code_fences=False)``. All phrase rules of one channel view compile into one
    Aho–Corasick automaton (two when case-sensitive and case-folded rules are mixed).
    """

    cdef cc_ruleset *_rs
    cdef tuple _rules
    cdef object _options
    cdef tuple _meta

    def __init__(self, rules, /, *, line_window=80, min_line_chars=3, evidence_chars=600,
                 mask_code_fences=False):
        if self._rs != NULL:
            raise RuntimeError("a Ruleset is immutable; build a new one")
        options = _rules.RulesetOptions(line_window=line_window, min_line_chars=min_line_chars,
                                        evidence_chars=evidence_chars,
                                        mask_code_fences=mask_code_fences)
        checked = _rules.check_rules(rules, options)
        phrase_lists = [r.phrase_list() for r in checked]
        self._rs = _compile([r.engine_spec() for r in checked], phrase_lists, options)
        meta = []
        for rule, phrase_list in zip(checked, phrase_lists):
            evidence = bytes([x for name in rule.evidence
                              for x in (_DET_ORDER.index(name), _EVIDENCE_SOURCE[name])])
            meta.append((rule.id, rule.kind, rule.action, rule.channel, phrase_list, evidence))
        self._rules = checked
        self._options = options
        self._meta = tuple(meta)

    def __dealloc__(self):
        cc_ruleset_free(self._rs)

    @property
    def rules(self):
        """The checked rules, in the order given (tuple)."""
        self._ready()
        return self._rules

    @property
    def options(self):
        """The :class:`~contextcare.rules.RulesetOptions`."""
        self._ready()
        return self._options

    cdef inline int _ready(self) except -1:
        if self._rs == NULL:
            raise uninitialised(self)
        return 0

    def watcher(self):
        """A new :class:`Watcher` for one stream (one reply of one model call)."""
        return Watcher._create(self)

    def replay(self, text, /, splits=None, *, channel="text"):
        """Feed a recorded trace — ``text`` cut into deltas at the end offsets ``splits`` (code
        points, non-decreasing, the last equal to ``len(text)``; a sequence of int or an integer
        buffer such as a numpy array; ``None`` = one delta) — into a fresh watcher, then
        ``finish()``; return all detections. Runs in C with the GIL released."""
        self._ready()
        _rules.check_text(text)
        cdef int ch = _feed_channel(channel)
        cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
        is_unsigned = False
        if splits is None:
            ends = array("q", [length] if length else [])
        else:
            ends, is_unsigned = _as_int64(splits, length)
        cdef const int64_t[::1] sp = ends
        cdef size_t nsplits = sp.shape[0]
        cdef const int64_t *sptr = &sp[0] if nsplits else NULL
        cdef long long bad = cc_check_splits(sptr, nsplits, <size_t>length)
        if bad >= 0:
            if <size_t>bad == nsplits:
                last = _split_value(sp[nsplits - 1], is_unsigned) if nsplits else "no splits"
                raise ArgumentValueError(f"splits must end at len(text) = {length}, got {last}")
            prev = _split_value(sp[bad - 1], is_unsigned) if bad > 0 else 0
            raise ArgumentValueError(
                f"splits must be non-decreasing offsets in [0, len(text) = {length}];"
                f" splits[{bad}] = {_split_value(sp[bad], is_unsigned)} follows {prev}")
        cdef cc_watcher *w = cc_watcher_new(self._rs)
        if w == NULL:
            raise MemoryError()
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef int rc
        try:
            with nogil:
                rc = cc_replay(w, data, kind, <size_t>length, sptr, nsplits, ch)
            if rc == CC_ERR_NOMEM:
                raise MemoryError("contextcare: out of memory while replaying")
            return list(_detections(self, w))
        finally:
            cc_watcher_free(w)

    def __reduce__(self):
        self._ready()
        o = self._options
        return (_rebuild, (self._rules, {"line_window": o.line_window,
                                        "min_line_chars": o.min_line_chars,
                                        "evidence_chars": o.evidence_chars,
                                        "mask_code_fences": o.mask_code_fences}))

    @property
    def memory(self):
        """Bytes of the compiled ruleset: the phrase automata (and the rule table). Shared by
        every watcher; ``sys.getsizeof(ruleset)`` adds the Python object."""
        self._ready()
        return cc_ruleset_memory(self._rs)

    def __sizeof__(self):
        return object.__sizeof__(self) + (cc_ruleset_memory(self._rs) if self._rs else 0)

    def __repr__(self):
        if self._rs == NULL:
            return f"<uninitialised {type(self).__name__}>"
        ids = ", ".join(repr(r.id) for r in self._rules)
        return f"Ruleset([{ids}], {self._options!r})"


def _as_int64(splits, Py_ssize_t length):
    """``splits`` as contiguous int64 offsets for C, and whether they were read as uint64.

    The engines accept and refuse the same ``splits`` with the same errors: a 1-d contiguous
    buffer of native 8-byte integers and a list or tuple of ints take fast paths; everything
    else (other integer buffers, big-endian, object or strided arrays, any iterable) and any
    failure of a fast path go through the reference's own check, ``rules.check_splits``."""
    if isinstance(splits, (str, bytes)):
        return array("q", _rules.check_splits(splits, length)), False  # raises ArgumentTypeError
    try:
        mv = memoryview(splits)
    except TypeError:
        mv = None
    if mv is not None:
        if mv.ndim == 1 and mv.format in ("q", "l", "Q", "L") and mv.itemsize == 8 \
                and mv.c_contiguous:
            if mv.format in ("q", "l"):
                return (mv if mv.format == "q" else mv.cast("B").cast("q")), False
            return mv.cast("B").cast("q"), True  # values >= 2**63 read as negative: refused
        mv.release()
    elif isinstance(splits, (list, tuple)):
        try:
            return array("q", splits), False
        except (TypeError, OverflowError):
            pass  # the reference's check names the bad item
    return array("q", _rules.check_splits(splits, length)), False


cdef object _split_value(int64_t v, bint is_unsigned):
    """A split as the caller gave it (uint64 values past 2**63 were read as negative)."""
    return <uint64_t>v if is_unsigned else v


# ---- building Detection objects fast -------------------------------------------------------
#
# Detection is a frozen dataclass with slots: its generated __init__ stores each of its 16 fields
# through object.__setattr__, ~2.5 us per detection, which dominated hit-dense streams with
# once=False rules (issue 17). The engine builds them instead the way the interpreter itself
# fills slots: allocate the object, store each field at its slot's offset (read once from the
# class's member descriptors). The result is an ordinary Detection (same class, same slots, same
# eq/hash/repr/pickle); the dataclass constructor is used whenever the class does not have the
# exact shape checked at import (then nothing is faster, but nothing is wrong).

cdef extern from *:
    """
    #include <structmember.h>
    #ifndef Py_T_OBJECT_EX
    #define Py_T_OBJECT_EX T_OBJECT_EX
    #endif
    #ifndef Py_READONLY
    #define Py_READONLY READONLY
    #endif
    /* The offset of a __slots__ member descriptor of `tp` (an object slot, writable), or -1. */
    static Py_ssize_t cc_slot_offset(PyObject *descr, PyObject *type) {
        PyTypeObject *tp = (PyTypeObject *)type;
        PyMemberDef *m;
        if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) return -1;
        if (PyDescr_TYPE(descr) != tp) return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != Py_T_OBJECT_EX || (m->flags & Py_READONLY)) return -1;
        if (m->offset < (Py_ssize_t)sizeof(PyObject) || m->offset + (Py_ssize_t)sizeof(PyObject *)
                > tp->tp_basicsize)
            return -1;
        return m->offset;
    }
    /* A new instance of `tp` whose n slots at offsets[i] hold values[i] (new references).
     * The values are atoms (str, int, float, None) or tuples of str: the object can never be part
     * of a reference cycle, so it is not tracked by the cyclic GC (as CPython does for tuples and
     * dicts of atoms). Tracked, two million detections made the collector cost 4x the rest. */
    static PyObject *cc_new_slotted(PyObject *type, const Py_ssize_t *offsets,
                                    PyObject *const *values, Py_ssize_t n) {
        Py_ssize_t i;
        PyTypeObject *tp = (PyTypeObject *)type;
        PyObject *o = tp->tp_alloc(tp, 0);
        if (!o) return NULL;
        for (i = 0; i < n; i++) {
            Py_INCREF(values[i]);
            *(PyObject **)((char *)o + offsets[i]) = values[i];
        }
        if (PyType_IS_GC(tp)) PyObject_GC_UnTrack(o);
        return o;
    }
    """
    Py_ssize_t cc_slot_offset(object descr, object tp)
    object cc_new_slotted(object tp, const Py_ssize_t *offsets, PyObject *const *values,
                          Py_ssize_t n)

cdef enum:
    DET_FIELDS = 16
cdef Py_ssize_t _det_offsets[DET_FIELDS]
cdef bint _det_fast = False
#: Detection's fields in the order the engine fills them (checked against the class).
_DET_ORDER = ("rule", "kind", "action", "channel", "offset", "phrase", "line", "cycle", "prefix",
              "unit", "count", "total", "ratio", "run", "period", "repeats")


def _setup_fast_detection():
    """Read Detection's slot offsets; leave the fast path off unless its shape is exactly the
    one the engine fills (a plain slotted dataclass, these fields, no __post_init__)."""
    global _det_fast
    import dataclasses
    _det_fast = False
    if (not dataclasses.is_dataclass(Detection) or hasattr(Detection, "__post_init__")
            or tuple(f.name for f in dataclasses.fields(Detection)) != _DET_ORDER
            or type(Detection) is not type or Detection.__new__ is not object.__new__):
        return False
    for i, name in enumerate(_DET_ORDER):
        off = cc_slot_offset(Detection.__dict__.get(name), Detection)
        if off < 0:
            return False
        _det_offsets[i] = off
    _det_fast = True
    return True


_setup_fast_detection()


cdef object _new_detection(PyObject **values):
    """A Detection of the DET_FIELDS values (in _DET_ORDER), the fast way when it may be."""
    if not _det_fast:
        return Detection(*[<object>values[i] for i in range(DET_FIELDS)])
    return cc_new_slotted(Detection, _det_offsets, values, DET_FIELDS)


cdef tuple _parts(const cc_hit *h):
    cdef uint32_t i, at = 0
    parts = []
    for i in range(h.nparts):
        parts.append(_decode(h.text + at, h.part_len[i]))
        at += h.part_len[i]
    return tuple(parts)


cdef object _detection(Ruleset rs, const cc_hit *h):
    """The Detection of one hit: its rule's evidence fields (Rule.evidence, compiled into
    (slot, source) byte pairs by Ruleset) read from the hit, the other fields None."""
    rule_id, kind, action, channel, phrase_list, evidence = rs._meta[h.rule]
    cdef const unsigned char *ev = evidence
    cdef Py_ssize_t i, n = len(evidence)
    cdef unsigned char source
    cdef PyObject *values[DET_FIELDS]
    cdef PyObject *none = <PyObject *>None
    # each made value stays referenced by one of these while values[] points at it
    cdef object offset = h.offset, phrase, text, parts, count, total, ratio, run, period, repeats
    values[0] = <PyObject *>rule_id
    values[1] = <PyObject *>kind
    values[2] = <PyObject *>action
    values[3] = <PyObject *>channel
    values[4] = <PyObject *>offset
    for i in range(5, DET_FIELDS):
        values[i] = none
    for i in range(0, n, 2):
        source = ev[i + 1]
        if source == EV_PHRASE:
            phrase = phrase_list[h.phrase]
            values[ev[i]] = <PyObject *>phrase
        elif source == EV_TEXT:
            text = _decode(h.text, h.text_len)
            values[ev[i]] = <PyObject *>text
        elif source == EV_PARTS:
            parts = _parts(h)
            values[ev[i]] = <PyObject *>parts
        elif source == EV_COUNT:
            count = h.count
            values[ev[i]] = <PyObject *>count
        elif source == EV_TOTAL:
            total = h.total
            values[ev[i]] = <PyObject *>total
        elif source == EV_RATIO:
            ratio = h.ratio
            values[ev[i]] = <PyObject *>ratio
        elif source == EV_RUN:
            run = h.run
            values[ev[i]] = <PyObject *>run
        elif source == EV_PERIOD:
            period = h.period
            values[ev[i]] = <PyObject *>period
        elif source == EV_REPEATS:
            repeats = h.repeats
            values[ev[i]] = <PyObject *>repeats
    return _new_detection(values)


cdef tuple _detections(Ruleset rs, cc_watcher *w):
    cdef size_t n, i
    cdef const cc_hit *hits = cc_watcher_hits(w, &n)
    try:
        return tuple([_detection(rs, &hits[i]) for i in range(n)])
    finally:
        cc_watcher_clear_hits(w)


cdef class Watcher:
    """The state of one stream: ``feed`` deltas, ``finish`` at the end, ``reset`` for a retry.

    Not thread-safe by design (it is per stream); using one watcher from two threads at once
    raises ``RuntimeError`` and leaves it usable.
    """

    cdef cc_watcher *_w
    cdef Ruleset _ruleset
    cdef bint _busy

    def __init__(self, *args, **kwargs):
        raise TypeError("create watchers with Ruleset.watcher()")

    @staticmethod
    cdef Watcher _create(Ruleset rs):
        rs._ready()
        cdef Watcher self = Watcher.__new__(Watcher)
        self._ruleset = rs
        self._w = cc_watcher_new(rs._rs)
        if self._w == NULL:
            raise MemoryError()
        return self

    def __dealloc__(self):
        cc_watcher_free(self._w)

    cdef inline int _enter(self) except -1:
        if self._busy or self._w == NULL:
            return self._refuse()
        return 0

    cdef int _refuse(self) except -1:
        if self._w == NULL:
            raise uninitialised(self)
        if self._busy:
            raise RuntimeError(_rules.BUSY_MESSAGE)
        return 0

    cdef inline int _feed(self, object text, int ch) except -1:
        """The C call behind feed(): returns how many detections the watcher holds."""
        self._enter()
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef int rc
        if n > NOGIL_CHARS:
            if cc_watcher_finished(self._w):
                raise RuntimeError(_rules.FINISHED_MESSAGE)
            self._busy = True
            try:
                with nogil:
                    rc = cc_watcher_feed(self._w, data, kind, <size_t>n, ch)
            finally:
                self._busy = False
        else:
            # one call: it refuses a finished watcher and returns how many hits it holds
            rc = cc_watcher_feed(self._w, data, kind, <size_t>n, ch)
        if rc < 0:
            self._failed(rc)
        return rc

    cdef int _failed(self, int rc) except -1:
        """Raise for a negative status of cc_watcher_feed."""
        if rc == CC_ERR_FINISHED:
            raise RuntimeError(_rules.FINISHED_MESSAGE)
        cc_watcher_clear_hits(self._w)
        raise MemoryError("contextcare: out of memory while feeding")

    def feed(self, text, /, channel="text"):
        """Append a delta on ``channel`` ("text" or "reasoning"); return the detections that
        fired (the empty tuple when none did)."""
        cdef int ch = _feed_channel(channel)
        if type(text) is not str:
            _rules.check_text(text)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int rc
        if self._busy or self._w == NULL or n > NOGIL_CHARS:
            rc = self._feed(text, ch)  # refusals, and long deltas without the GIL
        else:
            # the common delta: _feed's work, written out so that nothing but the C call
            # stands between the argument checks and the core
            rc = cc_watcher_feed(self._w, PyUnicode_DATA(text), PyUnicode_KIND(text), <size_t>n,
                                 ch)
            if rc < 0:
                self._failed(rc)
        if rc == 0:
            return ()
        return _detections(self._ruleset, self._w)

    def _feed_deltas(self, list texts not None, channel="text"):
        """Feed each str of ``texts`` in order, as that many ``feed(text, channel)`` calls
        would, in one call from Python (the per-delta work stays in C: no Python frame per
        delta). Returns ``[(index, detections), ...]``: for each delta at which detections
        fired, its index in ``texts`` and what ``feed`` would have returned for it. Used by
        the trace replay (``contextcare.traces``) to feed a stream's collected deltas."""
        cdef int ch = _feed_channel(channel)
        cdef Py_ssize_t i, n = len(texts)
        cdef object text
        cdef list out = []
        self._enter()
        for i in range(n):
            text = texts[i]
            if type(text) is not str:
                _rules.check_text(text)
            if self._feed(text, ch) != 0:
                out.append((i, _detections(self._ruleset, self._w)))
        return out

    def finish(self):
        """End of stream: complete the pending lines and run every throttled rule once more."""
        self._enter()
        if cc_watcher_finished(self._w):
            return ()
        if cc_watcher_finish(self._w) != CC_OK:
            cc_watcher_clear_hits(self._w)
            raise MemoryError("contextcare: out of memory while finishing")
        return _detections(self._ruleset, self._w)

    def reset(self):
        """Forget everything and start a new attempt (rules may fire again)."""
        self._enter()
        cc_watcher_reset(self._w)

    def tail(self, n=None):
        """The last ``min(n, evidence_chars)`` characters fed (both channels, arrival order)."""
        self._enter()  # never read the ring while another thread's feed() writes it
        if n is None:
            n = self._ruleset._options.evidence_chars
        elif isinstance(n, bool) or not isinstance(n, int):
            raise ArgumentTypeError(f"n must be an int or None, got {type(n).__name__}")
        elif n < 0:
            raise ArgumentValueError(f"n must be >= 0, got {n}")
        cdef size_t want = min(n, self._ruleset._options.evidence_chars)
        cdef uint32_t *buf = <uint32_t *>malloc((want or 1) * sizeof(uint32_t))
        if buf == NULL:
            raise MemoryError()
        try:
            got = cc_watcher_tail(self._w, want, buf)
            return PyUnicode_FromKindAndData(4, buf, got)
        finally:
            free(buf)

    def copy(self):
        """An independent watcher in the same state: it continues exactly as this one would."""
        self._enter()
        cdef Watcher other = Watcher.__new__(Watcher)
        other._ruleset = self._ruleset
        other._w = cc_watcher_copy(self._w)
        if other._w == NULL:
            raise MemoryError()
        return other

    @property
    def ruleset(self):
        """The :class:`Ruleset` this watcher runs."""
        if self._w == NULL:
            raise uninitialised(self)
        return self._ruleset

    @property
    def fired(self):
        """Ids of the rules that fired in this attempt."""
        cdef uint32_t i
        if self._w == NULL:
            raise uninitialised(self)
        return frozenset([r.id for i, r in enumerate(self._ruleset._rules)
                          if cc_watcher_fired(self._w, i)])

    @property
    def finished(self):
        if self._w == NULL:
            raise uninitialised(self)
        return bool(cc_watcher_finished(self._w))

    def _sort_comparisons(self):
        """Test hook: comparisons the C core spent ordering the hits of each call so far (the
        work per hit must not grow with the number of hits of one call)."""
        if self._w == NULL:
            raise uninitialised(self)
        return cc_watcher_sort_cmps(self._w)

    def __sizeof__(self):
        if self._w == NULL:
            return object.__sizeof__(self)
        return object.__sizeof__(self) + cc_watcher_memory(self._w)

    def __reduce__(self):
        raise TypeError("a Watcher cannot be pickled; pickle its Ruleset and use copy() for "
                        "snapshots")


cdef class Recorder:
    """A watched reply's recorder: feeds a :class:`Watcher`, keeps the text of every delta per
    channel, and hands detections to ``on_fire``. Made by ``contextcare.guard.Reply``; it keeps
    the per-delta path of a guarded reply in C (one call, a copy of the delta's code points, no
    Python frame and no Python object per delta). ``contextcare.reference.Recorder`` is the same
    object for any other watcher.
    """

    cdef Watcher _watcher
    cdef object _on_fire
    cdef object _closed          # None, or the message feed() raises once closed
    cdef Py_UCS4 *_kept[2]
    cdef Py_ssize_t _kept_len[2]
    cdef Py_ssize_t _kept_cap[2]

    def __init__(self, Watcher watcher not None, on_fire):
        if not callable(on_fire):
            raise ArgumentTypeError(f"on_fire must be callable, got {type(on_fire).__name__}")
        self._watcher = watcher
        self._on_fire = on_fire

    def __dealloc__(self):
        free(self._kept[0])
        free(self._kept[1])

    cdef int _keep(self, int ch, object text) except -1:
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, need = self._kept_len[ch] + n
        cdef Py_ssize_t cap = self._kept_cap[ch]
        cdef Py_UCS4 *buf = self._kept[ch]
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        if need > cap:
            cap = max(need, 2 * cap, 256)
            buf = <Py_UCS4 *>realloc(buf, cap * sizeof(Py_UCS4))
            if buf == NULL:
                raise MemoryError()
            self._kept[ch] = buf
            self._kept_cap[ch] = cap
        buf += self._kept_len[ch]
        if kind == 1:
            for i in range(n):
                buf[i] = (<const unsigned char *>data)[i]
        elif kind == 2:
            for i in range(n):
                buf[i] = (<const unsigned short *>data)[i]
        else:
            memcpy(buf, data, n * sizeof(Py_UCS4))
        self._kept_len[ch] = need
        return 0

    def feed(self, text, /, channel="text"):
        """Feed the watcher and keep the delta; ``None`` when nothing fired, else
        ``on_fire(detections)``."""
        cdef int ch = _feed_channel(channel)
        if type(text) is not str:
            _rules.check_text(text)
        if self._closed is not None:
            raise RuntimeError(self._closed)
        cdef int hits = self._watcher._feed(text, ch)
        self._keep(ch, text)
        if hits == 0:
            return None
        return self._on_fire(_detections(self._watcher._ruleset, self._watcher._w))

    def close(self, str message):
        """From now on ``feed`` raises ``RuntimeError(message)``; the kept text stays."""
        self._closed = message

    def text(self, channel):
        """All text fed on ``channel`` ("text" or "reasoning")."""
        cdef int ch = _feed_channel(channel)
        return PyUnicode_FromKindAndData(4, self._kept[ch], self._kept_len[ch])

    def __reduce__(self):
        raise TypeError("a Recorder cannot be pickled; it belongs to one reply")


cdef class _Floor:
    """Benchmark floor (benchmarks/harness.py): ``feed`` does the argument handling of
    ``Watcher.feed`` (channel check, type check, busy and finished checks, reading the str) and
    returns what it returns, without any engine work."""

    cdef Watcher _watcher

    def __init__(self, Watcher watcher not None):
        self._watcher = watcher

    def feed(self, text, /, channel="text"):
        cdef int ch = _feed_channel(channel)
        if type(text) is not str:
            _rules.check_text(text)
        cdef Watcher w = self._watcher
        w._enter()
        if cc_watcher_finished(w._w):
            raise RuntimeError(_rules.FINISHED_MESSAGE)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        if n < 0 or ch < 0 or kind == 0 or data == NULL:
            return None
        return ()
