/* Code point helpers shared by the core: UTF-8 encoding (lone surrogates encode as three bytes,
 * like Python's "surrogatepass"), the whitespace set of str.isspace(), the quote marks, and the
 * "word character" test of TailRepeat. */
#ifndef CC_TEXT_H
#define CC_TEXT_H

#include <stddef.h>
#include <stdint.h>

static inline unsigned cc_utf8_len(uint32_t cp) {
    return cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u;
}

static inline unsigned cc_utf8_encode(uint32_t cp, unsigned char *out) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decode one code point of text the core encoded itself (always well formed). */
static inline uint32_t cc_utf8_decode(const unsigned char *s, unsigned *len) {
    unsigned char c = s[0];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    if (c < 0xE0) {
        *len = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3Fu);
    }
    if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3Fu);
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3Fu);
}

/* str.isspace() as a bitmap over U+0000..U+3000 (every space is there) plus one zero word for
 * everything above: a branch-free test, used by the line loops. */
#define CC_SPACE_WORDS (0x3000 / 32 + 2)
static const uint32_t cc_space_bits[CC_SPACE_WORDS] = {
    [0x09 / 32] = (1u << 9) | (1u << 10) | (1u << 11) | (1u << 12) | (1u << 13) | (1u << 28) |
                  (1u << 29) | (1u << 30) | (1u << 31),
    [0x20 / 32] = 1u << 0,
    [0x85 / 32] = 1u << (0x85 % 32),
    [0xA0 / 32] = 1u << (0xA0 % 32),
    [0x1680 / 32] = 1u << (0x1680 % 32),
    [0x2000 / 32] = 0x7FFu, /* U+2000..U+200A */
    [0x2028 / 32] = (1u << (0x2028 % 32)) | (1u << (0x2029 % 32)) | (1u << (0x202F % 32)),
    [0x205F / 32] = 1u << (0x205F % 32),
    [0x3000 / 32] = 1u << (0x3000 % 32),
};

/* 1 exactly for the code points for which Python's str.isspace() is true, else 0. */
static inline uint32_t cc_space_bit(uint32_t cp) {
    uint32_t i = cp <= 0x3000 ? cp : 0x3000 + 32; /* the last word is zero */
    return (cc_space_bits[i >> 5] >> (i & 31)) & 1u;
}

static inline int cc_is_space(uint32_t cp) { return (int)cc_space_bit(cp); }

/* The quote marks of Phrases(suppress_quoted=True): backtick, straight double quote, curly
 * double quotes and CJK corner brackets. */
#define CC_QUOTE_MARKS '`', '"', 0x201C, 0x201D, 0x300C, 0x300D

static inline int cc_is_quote(uint32_t cp) {
    if (cp < 0x80) return cp == '`' || cp == '"';
    return cp == 0x201C || cp == 0x201D || cp == 0x300C || cp == 0x300D;
}

/* A character that can carry meaning in a repeated unit: not whitespace, not ASCII punctuation
 * or symbols, not U+2000-U+2BFF (punctuation, arrows, math, box drawing, shapes) and not CJK
 * punctuation U+3000-U+303F. */
static inline int cc_is_word(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z');
    if (cc_is_space(cp)) return 0;
    if (cp >= 0x2000 && cp <= 0x2BFF) return 0;
    if (cp >= 0x3000 && cp <= 0x303F) return 0;
    return 1;
}

#endif
