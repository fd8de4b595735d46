// Just enough of CUDA C for the kernels in ../kernels to compile as host C++ and run on the
// CPU: the thread-index builtins become thread-locals, __shared__ arrays become statics (one
// block runs at a time), __syncthreads switches to the block's next thread (host.cpp runs the
// threads of a block that meet at barriers as fibers on one OS thread).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <math.h>

struct dim3 {
    unsigned int x, y, z;
};

static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
// Set by the emulator for a cooperative launch: waits until every thread of the block is here.
static thread_local void (*block_barrier)() = nullptr;

#define __global__
#define __device__ static inline
#define __forceinline__ __attribute__((always_inline))
#define __shared__ static

static inline void __syncthreads() { block_barrier(); }

static inline float __int_as_float(int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

static inline double __longlong_as_double(long long bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}

static inline unsigned int atomicOr(unsigned int* address, unsigned int value) {
    return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}

using std::isinf;
using std::isnan;
using std::signbit;
