/* Small helpers shared by the C units of the core: inlining control, error messages, sets. */
#ifndef CC_COMMON_H
#define CC_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Hot loops are inlined into one function per specialisation; rare paths are kept out of line
 * so the loops keep their values in registers. */
#if defined(__GNUC__)
#define HOT_INLINE static inline __attribute__((always_inline))
#define COLD static __attribute__((noinline, cold))
#define NOINLINE static __attribute__((noinline))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define HOT_INLINE static inline
#define COLD static
#define NOINLINE static
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

/* Copy a message into a caller's buffer (either may be absent). */
static inline void cc_set_err(char *err, size_t errlen, const char *msg) {
    if (err && errlen) snprintf(err, errlen, "%s", msg);
}

/* Linear search of a small set of code points. */
static inline int cc_u32_in(const uint32_t *set, uint32_t n, uint32_t x) {
    for (uint32_t i = 0; i < n; i++)
        if (set[i] == x) return 1;
    return 0;
}

#endif
