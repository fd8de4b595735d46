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

// y = a op b (0 ==, 1 <, 2 <=, 3 >, 4 >=) on operands of `kind` (f32 0, int32 1, int64 2,
// bool/uint8 4, int8 5, int16 6, uint16 7, uint32 8, uint64 9), strides[0] and [1].
extern "C" __global__ void compare(const void* a, const void* b, unsigned char* y,
                                   unsigned int count, unsigned int op, unsigned int kind,
                                   Broadcast3 s) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int at[3];
        offsets(s, i, at);
        bool v;
        switch (kind) {
#define FERRITE_COMPARE_CASE(code, T)                                                 \
    case code: v = compared(op, ((const T*)a)[at[0]], ((const T*)b)[at[1]]); break;
            FERRITE_COMPARE_CASE(0, float)
            FERRITE_COMPARE_CASE(1, int)
            FERRITE_COMPARE_CASE(2, long long)
            FERRITE_COMPARE_CASE(4, unsigned char)
            FERRITE_COMPARE_CASE(5, signed char)
            FERRITE_COMPARE_CASE(6, short)
            FERRITE_COMPARE_CASE(7, unsigned short)
            FERRITE_COMPARE_CASE(8, unsigned int)
            default: v = compared(op, ((const unsigned long long*)a)[at[0]],
                                  ((const unsigned long long*)b)[at[1]]);
                break;
#undef FERRITE_COMPARE_CASE
        }
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

// A 16-bit float (IEEE half: 5 exponent bits; bfloat16: 8) as a double, exactly.
__device__ double from_16_bits(unsigned short bits, bool brain) {
    int exponent_bits = brain ? 8 : 5, mantissa_bits = 15 - exponent_bits;
    int bias = (1 << (exponent_bits - 1)) - 1;
    unsigned int e = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
    unsigned int m = bits & ((1u << mantissa_bits) - 1);
    double sign = (bits & 0x8000) ? -1.0 : 1.0;
    if (e == (1u << exponent_bits) - 1) return m != 0 ? __longlong_as_double(0x7ff8000000000000LL) : sign * __longlong_as_double(0x7ff0000000000000LL);
    if (e == 0) return sign * ldexp((double)m, 1 - bias - mantissa_bits);
    return sign * ldexp((double)(m | (1u << mantissa_bits)), (int)e - bias - mantissa_bits);
}

// A double rounded to the nearest 16-bit float (ties to even), as the `half` crate's from_f64:
// scaling by powers of two is exact, so the one rint is the only rounding.
__device__ unsigned short to_16_bits(double d, bool brain) {
    int exponent_bits = brain ? 8 : 5, mantissa_bits = 15 - exponent_bits;
    int bias = (1 << (exponent_bits - 1)) - 1;
    unsigned short sign = signbit(d) ? 0x8000 : 0;
    unsigned short infinity = (unsigned short)(((1u << exponent_bits) - 1) << mantissa_bits);
    if (isnan(d)) return sign | infinity | (unsigned short)(1u << (mantissa_bits - 1));
    double a = fabs(d);
    if (isinf(a)) return sign | infinity;
    int min_exponent = 1 - bias;
    if (a < ldexp(1.0, min_exponent)) { // subnormal (or rounds up to the smallest normal)
        double q = rint(a / ldexp(1.0, min_exponent - mantissa_bits));
        return sign | (unsigned short)q;
    }
    int e = ilogb(a);
    double q = rint(a / ldexp(1.0, e - mantissa_bits));
    if (q == ldexp(1.0, mantissa_bits + 1)) {
        q /= 2.0;
        e += 1;
    }
    if (e > bias) return sign | infinity;
    unsigned int mantissa = (unsigned int)q - (1u << mantissa_bits);
    return sign | (unsigned short)(((unsigned int)(e + bias) << mantissa_bits) | mantissa);
}

// Element types of Cast: f32 0, int32 1, int64 2, bool 3, uint8 4, int8 5, f64 6, f16 7,
// bf16 8, int16 9, uint16 10, uint32 11.
__device__ bool load_number(const void* x, unsigned int kind, size_t i, double* f, long long* n) {
    switch (kind) {
        case 0: *f = ((const float*)x)[i]; return true;
        case 6: *f = ((const double*)x)[i]; return true;
        case 7: *f = from_16_bits(((const unsigned short*)x)[i], false); return true;
        case 8: *f = from_16_bits(((const unsigned short*)x)[i], true); return true;
        case 1: *n = ((const int*)x)[i]; return false;
        case 2: *n = ((const long long*)x)[i]; return false;
        case 3: *n = ((const unsigned char*)x)[i] != 0; return false;
        case 4: *n = ((const unsigned char*)x)[i]; return false;
        case 9: *n = ((const short*)x)[i]; return false;
        case 10: *n = ((const unsigned short*)x)[i]; return false;
        case 11: *n = ((const unsigned int*)x)[i]; return false;
        default: *n = ((const signed char*)x)[i]; return false;
    }
}

// A float truncated toward zero into [lo, hi] (NaN: 0), as ONNX Cast (and Rust's `as`) do.
__device__ long long saturated(double f, long long lo, long long hi) {
    if (isnan(f)) return 0;
    if (f <= (double)lo) return lo;
    if (f >= (double)hi) return hi;
    return (long long)f;
}

// y = Cast(x): floats to integers truncate toward zero, saturating; integers to narrower
// integers wrap; anything to bool tests != 0; f64 to f32 rounds to nearest even.
extern "C" __global__ void convert(const void* x, void* y, unsigned int count, unsigned int from,
                                   unsigned int to) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        double f = 0.0;
        long long n = 0;
        bool is_float = load_number(x, from, i, &f, &n);
        switch (to) {
            case 0: ((float*)y)[i] = is_float ? (float)f : (float)n; break;
            case 6: ((double*)y)[i] = is_float ? f : (double)n; break;
            case 7: ((unsigned short*)y)[i] = to_16_bits(is_float ? f : (double)n, false); break;
            case 8: ((unsigned short*)y)[i] = to_16_bits(is_float ? f : (double)n, true); break;
            case 1:
                ((int*)y)[i] = is_float ? (int)saturated(f, -2147483647LL - 1, 2147483647LL) : (int)n;
                break;
            case 2:
                ((long long*)y)[i] =
                    is_float ? saturated(f, -9223372036854775807LL - 1, 9223372036854775807LL) : n;
                break;
            case 3: ((unsigned char*)y)[i] = (is_float ? f != 0.0 : n != 0) ? 1 : 0; break;
            case 4:
                ((unsigned char*)y)[i] =
                    (unsigned char)(is_float ? saturated(f, 0, 255) : n);
                break;
            case 9: ((short*)y)[i] = (short)(is_float ? saturated(f, -32768, 32767) : n); break;
            case 10:
                ((unsigned short*)y)[i] = (unsigned short)(is_float ? saturated(f, 0, 65535) : n);
                break;
            case 11:
                ((unsigned int*)y)[i] = (unsigned int)(is_float ? saturated(f, 0, 4294967295LL) : n);
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
