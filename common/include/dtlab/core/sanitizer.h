// Which sanitizer this translation unit is built with (docs/SANITIZERS.md), under one name for
// both compilers: GCC defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang 14 (the
// ASan build's compiler) only answers __has_feature. A check written with GCC's macro alone is
// silently off under clang.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DTLAB_ADDRESS_SANITIZER 1
#endif
#if __has_feature(thread_sanitizer)
#define DTLAB_THREAD_SANITIZER 1
#endif
#endif
#if !defined(DTLAB_ADDRESS_SANITIZER) && defined(__SANITIZE_ADDRESS__)
#define DTLAB_ADDRESS_SANITIZER 1
#endif
#if !defined(DTLAB_THREAD_SANITIZER) && defined(__SANITIZE_THREAD__)
#define DTLAB_THREAD_SANITIZER 1
#endif
