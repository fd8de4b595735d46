// Elementwise kernels: activations (hal's codes, `activate` in common.cuh), broadcasting binary
// arithmetic, batch normalisation.
// Every kernel loops with a grid stride, so the host may clamp its grid to the device's limits.

#include "common.cuh"

// y[i] = act(x[i]).
extern "C" __global__ void unary(const float* x, float* y, unsigned int count, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        y[i] = activate(act, x[i]);
    }
}

// The shapes of a broadcasting binary op: the output's dims and each operand's element strides
// per output axis (0 on broadcast axes).
struct Broadcast {
    unsigned int rank;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int a_strides[FERRITE_MAX_RANK];
    unsigned int b_strides[FERRITE_MAX_RANK];
};

__device__ float combine(unsigned int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return powf(a, b);
        case 5: return (isnan(a) || a > b) ? a : b;                  // Max, NaN-propagating
        case 6: return (isnan(a) || a < b) ? a : b;                  // Min, NaN-propagating
        case 7: return a < 0.0f ? a * b : a;                          // PRelu
        case 8: return fmodf(a, b);                                   // Fmod
        case 9: {                                                     // Mod: the divisor's sign
            float m = fmodf(a, b);
            return (m != 0.0f && ((m < 0.0f) != (b < 0.0f))) ? m + b : m;
        }
        default: return 0.0f;
    }
}

// y = act(a op b) with numpy broadcasting.
extern "C" __global__ void binary(const float* a, const float* b, float* y, unsigned int count,
                                  unsigned int op, Broadcast shape, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int rest = i, ia = 0, ib = 0;
        for (unsigned int d = shape.rank; d > 0; d--) {
            unsigned int c = rest % shape.dims[d - 1];
            rest /= shape.dims[d - 1];
            ia += c * shape.a_strides[d - 1];
            ib += c * shape.b_strides[d - 1];
        }
        y[i] = activate(act, combine(op, a[ia], b[ib]));
    }
}

// y = act((x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c]), c the axis-1 index.
extern "C" __global__ void batch_norm(const float* x, const float* scale, const float* bias,
                                      const float* mean, const float* var, float* y,
                                      unsigned int count, unsigned int channels,
                                      unsigned int inner, float epsilon, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int c = (i / inner) % channels;
        float k = scale[c] / sqrtf(var[c] + epsilon);
        y[i] = activate(act, x[i] * k + (bias[c] - mean[c] * k));
    }
}

// Arithmetic on integer tensors, as the CPU device: wrapping add/sub/mul, division truncating
// toward zero (MIN / -1 wraps), a division or remainder by zero sets bit 1 of *status (the host
// reports it) and gives 0, Mod takes the divisor's sign, shifts past the width give 0.
template <typename T, typename U>
__device__ T integer_op(unsigned int op, T a, T b, unsigned int* status) {
    const bool is_signed = (T)(-1) < (T)0;
    const T minimum = is_signed ? (T)((U)1 << (sizeof(T) * 8 - 1)) : (T)0;
    auto div = [&](T x, T y) -> T {
        if (y == 0) {
            atomicOr(status, 2u);
            return 0;
        }
        if (is_signed && x == minimum && y == (T)-1) return minimum;
        return x / y;
    };
    auto rem = [&](T x, T y) -> T {
        if (y == 0) {
            atomicOr(status, 2u);
            return 0;
        }
        if (is_signed && y == (T)-1) return 0;
        return x % y;
    };
    switch (op) {
        case 0: return (T)((U)a + (U)b);
        case 1: return (T)((U)a - (U)b);
        case 2: return (T)((U)a * (U)b);
        case 3: return div(a, b);
        case 4: { // Pow by squaring, wrapping; negative exponents give the integer part.
            if (is_signed && b < 0) {
                if (a == 1) return 1;
                if (is_signed && a == (T)-1) return (b % 2 != 0) ? (T)-1 : (T)1;
                return 0;
            }
            U result = 1, base = (U)a;
            T e = b;
            while (e != 0) {
                if (e % 2 != 0) result *= base;
                base *= base;
                e /= 2;
            }
            return (T)result;
        }
        case 5: return b > a ? b : a;
        case 6: return b < a ? b : a;
        case 7: return a < 0 ? (T)((U)a * (U)b) : a; // PRelu
        case 8: return rem(a, b);                     // Fmod
        case 9: {                                     // Mod
            T r = rem(a, b);
            return (r != 0 && (r < 0) != (b < 0)) ? (T)((U)r + (U)b) : r;
        }
        default: { // 10 shift left, 11 shift right
            if (b < 0 || (unsigned long long)b >= sizeof(T) * 8) return 0;
            return op == 10 ? (T)((U)a << b) : (T)(a >> b);
        }
    }
}

template <typename T, typename U>
__device__ void integer_elements(const T* a, const T* b, T* y, unsigned int i, unsigned int op,
                                 const Broadcast& shape, unsigned int* status) {
    unsigned int rest = i, ia = 0, ib = 0;
    for (unsigned int d = shape.rank; d > 0; d--) {
        unsigned int c = rest % shape.dims[d - 1];
        rest /= shape.dims[d - 1];
        ia += c * shape.a_strides[d - 1];
        ib += c * shape.b_strides[d - 1];
    }
    y[i] = integer_op<T, U>(op, a[ia], b[ib], status);
}

// y = a op b on integers of `kind` (int32 1, int64 2, uint8 4, int8 5, int16 6, uint16 7,
// uint32 8, uint64 9), numpy broadcasting; op codes as `binary`, plus 10/11 the shifts.
extern "C" __global__ void binary_integer(const void* a, const void* b, void* y,
                                          unsigned int count, unsigned int op, unsigned int kind,
                                          Broadcast shape, unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        switch (kind) {
#define FERRITE_INTEGER_CASE(code, T, U)                                                       \
    case code:                                                                                 \
        integer_elements<T, U>((const T*)a, (const T*)b, (T*)y, i, op, shape, status);         \
        break;
            FERRITE_INTEGER_CASE(1, int, unsigned int)
            FERRITE_INTEGER_CASE(2, long long, unsigned long long)
            // Narrow types compute in 32 bits (no promotion to a signed int that could
            // overflow); the store truncates, which wraps.
            FERRITE_INTEGER_CASE(4, unsigned char, unsigned int)
            FERRITE_INTEGER_CASE(5, signed char, unsigned int)
            FERRITE_INTEGER_CASE(6, short, unsigned int)
            FERRITE_INTEGER_CASE(7, unsigned short, unsigned int)
            FERRITE_INTEGER_CASE(8, unsigned int, unsigned int)
            default:
                integer_elements<unsigned long long, unsigned long long>(
                    (const unsigned long long*)a, (const unsigned long long*)b,
                    (unsigned long long*)y, i, op, shape, status);
                break;
#undef FERRITE_INTEGER_CASE
        }
    }
}
