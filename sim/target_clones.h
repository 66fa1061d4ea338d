// Hot loops compiled for several x86-64 levels, the best chosen when the program loads (GCC's
// target_clones: one function, an ifunc resolver picks the clone for the CPU). Integer code and
// code built with fp-contract=off gives the same bytes in every clone. Elsewhere (clang, another
// architecture) the attributes are empty: one plain function for the compiler's target.
// (sim/gemm_x86.h picks its kernels by hand instead: target("...") per kernel, one dispatch.)
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TPUSIM_HAS_CLONES 1
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and baseline x86-64.
#define TPUSIM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
// x86-64-v3 and baseline only: loops that AVX-512 did not speed up (the reference executors').
#define TPUSIM_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TPUSIM_HAS_CLONES 0
#define TPUSIM_CLONES
#define TPUSIM_CLONES_V3
#endif
