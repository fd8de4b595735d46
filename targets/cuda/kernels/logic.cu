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

// Element types of Cast: f32 0, int32 1, int64 2, bool 3, uint8 4, int8 5.
__device__ bool load_number(const void* x, unsigned int kind, size_t i, float* f, long long* n) {
    switch (kind) {
        case 0: *f = ((const float*)x)[i]; return true;
        case 1: *n = ((const int*)x)[i]; return false;
        case 2: *n = ((const long long*)x)[i]; return false;
        case 3: *n = ((const unsigned char*)x)[i] != 0; return false;
        case 4: *n = ((const unsigned char*)x)[i]; return false;
        default: *n = ((const signed char*)x)[i]; return false;
    }
}

// A float truncated toward zero into [lo, hi] (NaN: 0), as ONNX Cast (and Rust's `as`) do.
__device__ long long saturated(float f, long long lo, long long hi) {
    if (isnan(f)) return 0;
    if (f <= (float)lo) return lo;
    if (f >= (float)hi) return hi;
    return (long long)f;
}

// y = Cast(x): floats to integers truncate toward zero, saturating; integers to narrower
// integers wrap; anything to bool tests != 0.
extern "C" __global__ void convert(const void* x, void* y, unsigned int count, unsigned int from,
                                   unsigned int to) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        float f = 0.0f;
        long long n = 0;
        bool is_float = load_number(x, from, i, &f, &n);
        switch (to) {
            case 0: ((float*)y)[i] = is_float ? f : (float)n; break;
            case 1:
                ((int*)y)[i] = is_float ? (int)saturated(f, -2147483647LL - 1, 2147483647LL) : (int)n;
                break;
            case 2:
                ((long long*)y)[i] =
                    is_float ? saturated(f, -9223372036854775807LL - 1, 9223372036854775807LL) : n;
                break;
            case 3: ((unsigned char*)y)[i] = (is_float ? f != 0.0f : n != 0) ? 1 : 0; break;
            case 4:
                ((unsigned char*)y)[i] =
                    (unsigned char)(is_float ? saturated(f, 0, 255) : n);
                break;
            default:
                ((signed char*)y)[i] = (signed char)(is_float ? saturated(f, -128, 127) : n);
                break;
        }
    }
}

// y = x is one of the special values selected (IsNaN, IsInf).
extern "C" __global__ void classify(const float* x, unsigned char* y, unsigned int count,
                                    unsigned int nan, unsigned int positive_infinity,
                                    unsigned int negative_infinity) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        float v = x[i];
        bool hit = (nan && isnan(v)) || (positive_infinity && isinf(v) && v > 0.0f) ||
                   (negative_infinity && isinf(v) && v < 0.0f);
        y[i] = hit ? 1 : 0;
    }
}

// The walk of GatherElements: the output's dims, the data's strides, the gathered axis.
struct ElementWalk {
    unsigned int rank, axis, axis_len;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int data_strides[FERRITE_MAX_RANK];
};

// out[p] = data[p with its `axis` coordinate replaced by indices[p]] (negative from the end;
// out of range sets *status and writes zeros); elements of `words` 32-bit words.
extern "C" __global__ void gather_elements(const unsigned int* data, const unsigned int* indices,
                                           unsigned int* y, unsigned int count,
                                           unsigned int words, unsigned int index_words,
                                           ElementWalk walk, unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        long long index = (int)indices[(size_t)i * index_words];
        if (index_words == 2) {
            index = (long long)(((unsigned long long)indices[(size_t)i * 2 + 1] << 32) |
                                indices[(size_t)i * 2]);
        }
        if (index < 0) index += walk.axis_len;
        bool valid = index >= 0 && index < (long long)walk.axis_len;
        if (!valid) atomicOr(status, 1u);
        unsigned int rest = i;
        size_t src = 0;
        for (unsigned int d = walk.rank; d > 0; d--) {
            unsigned int c = rest % walk.dims[d - 1];
            rest /= walk.dims[d - 1];
            if (d - 1 == walk.axis) c = valid ? (unsigned int)index : 0;
            src += (size_t)c * walk.data_strides[d - 1];
        }
        for (unsigned int w = 0; w < words; w++) {
            y[(size_t)i * words + w] = valid ? data[src * words + w] : 0u;
        }
    }
}
