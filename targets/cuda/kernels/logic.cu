// Comparisons into bool (one byte per element), logic on bools, Where, Trilu.

#include "common.cuh"

// Three operands' element strides per output axis (0 on broadcast axes).
struct Broadcast3 {
    unsigned int rank;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int strides[3][FERRITE_MAX_RANK];
};

// The element offsets of output i in each operand.
__device__ void offsets(const Broadcast3& s, unsigned int i, unsigned int at[3]) {
    at[0] = at[1] = at[2] = 0;
    for (unsigned int d = s.rank; d > 0; d--) {
        unsigned int c = i % s.dims[d - 1];
        i /= s.dims[d - 1];
        for (unsigned int k = 0; k < 3; k++) at[k] += c * s.strides[k][d - 1];
    }
}

template <typename T>
__device__ bool compared(unsigned int op, T a, T b) {
    switch (op) {
        case 0: return a == b;
        case 1: return a < b;
        case 2: return a <= b;
        case 3: return a > b;
        default: return a >= b;
    }
}

// y = a op b (0 ==, 1 <, 2 <=, 3 >, 4 >=) on f32 (kind 0), int32 (1) or int64 (2) operands
// (strides[0] and [1]).
extern "C" __global__ void compare(const void* a, const void* b, unsigned char* y,
                                   unsigned int count, unsigned int op, unsigned int kind,
                                   Broadcast3 s) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int at[3];
        offsets(s, i, at);
        bool v;
        if (kind == 0) v = compared(op, ((const float*)a)[at[0]], ((const float*)b)[at[1]]);
        else if (kind == 1) v = compared(op, ((const int*)a)[at[0]], ((const int*)b)[at[1]]);
        else v = compared(op, ((const long long*)a)[at[0]], ((const long long*)b)[at[1]]);
        y[i] = v ? 1 : 0;
    }
}

// y = a op b on bools (0 and, 1 or, 2 xor, 3 not a).
extern "C" __global__ void logical(const unsigned char* a, const unsigned char* b,
                                   unsigned char* y, unsigned int count, unsigned int op,
                                   Broadcast3 s) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int at[3];
        offsets(s, i, at);
        bool x = a[at[0]] != 0, z = b[at[1]] != 0;
        bool v = op == 0 ? (x && z) : op == 1 ? (x || z) : op == 2 ? (x != z) : !x;
        y[i] = v ? 1 : 0;
    }
}

// out = cond ? x : y, elements of `size` bytes (cond strides[0], x [1], y [2]).
extern "C" __global__ void choose(const unsigned char* cond, const unsigned char* x,
                                  const unsigned char* y, unsigned char* out, unsigned int count,
                                  unsigned int size, Broadcast3 s) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int at[3];
        offsets(s, i, at);
        const unsigned char* from = cond[at[0]] != 0 ? x + (size_t)at[1] * size
                                                     : y + (size_t)at[2] * size;
        for (unsigned int k = 0; k < size; k++) out[(size_t)i * size + k] = from[k];
    }
}

// Keeps element (r, c) of each rows × cols matrix when c − r ≥ k (upper) or c − r ≤ k (lower),
// else 0; elements of `size` bytes.
extern "C" __global__ void trilu(const unsigned char* x, unsigned char* y, unsigned int count,
                                 unsigned int size, unsigned int rows, unsigned int cols,
                                 unsigned int upper, int k) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        long long c = i % cols, r = (i / cols) % rows;
        bool keep = upper ? c - r >= k : c - r <= k;
        for (unsigned int b = 0; b < size; b++) {
            y[(size_t)i * size + b] = keep ? x[(size_t)i * size + b] : 0;
        }
    }
}
