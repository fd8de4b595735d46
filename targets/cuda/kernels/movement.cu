// Data movement on 32-bit words (an element is `words` of them: f32/i32 one, i64 two).

#include "common.cuh"

// The walk of a strided copy: output dims, signed source strides, destination strides (elements).
struct Strided {
    unsigned int rank;
    unsigned int dims[FERRITE_MAX_RANK];
    int src_strides[FERRITE_MAX_RANK];
    unsigned int dst_strides[FERRITE_MAX_RANK];
};

// dst[dst_base + Σ c·dst_stride] = src[src_base + Σ c·src_stride] over every index c of dims:
// Transpose, Slice, Expand, Concat (one launch per input) and Split (one per output).
extern "C" __global__ void copy_strided(const unsigned int* src, unsigned int* dst,
                                        unsigned int count, unsigned int words, int src_base,
                                        unsigned int dst_base, Strided walk) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int rest = i, t = dst_base;
        int s = src_base;
        for (unsigned int d = walk.rank; d > 0; d--) {
            unsigned int c = rest % walk.dims[d - 1];
            rest /= walk.dims[d - 1];
            s += (int)c * walk.src_strides[d - 1];
            t += c * walk.dst_strides[d - 1];
        }
        for (unsigned int w = 0; w < words; w++) dst[t * words + w] = src[(unsigned int)s * words + w];
    }
}

// Output (o, q, r) = x[o, indices[q], r]; indices are int32 (index_words 1) or int64 (2), and
// negative ones count from the end. An index out of range sets *status (the host reports it) and
// writes zeros.
extern "C" __global__ void gather(const unsigned int* x, const unsigned int* indices,
                                  unsigned int* y, unsigned int count, unsigned int len,
                                  unsigned int index_count, unsigned int inner, unsigned int words,
                                  unsigned int index_words, unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int r = i % inner;
        unsigned int q = (i / inner) % index_count;
        unsigned int o = i / (inner * index_count);
        long long index = (int)indices[q * index_words];
        if (index_words == 2) {
            index = (long long)(((unsigned long long)indices[q * 2 + 1] << 32) | indices[q * 2]);
        }
        if (index < 0) index += len;
        bool valid = index >= 0 && index < (long long)len;
        if (!valid) atomicOr(status, 1u);
        unsigned int src = (o * len + (unsigned int)(valid ? index : 0)) * inner + r;
        for (unsigned int w = 0; w < words; w++) y[i * words + w] = valid ? x[src * words + w] : 0u;
    }
}

// The walk of a pad: output and input dims, and the padding before each axis.
struct PadShape {
    unsigned int rank;
    unsigned int out_dims[FERRITE_MAX_RANK];
    unsigned int in_dims[FERRITE_MAX_RANK];
    unsigned int begins[FERRITE_MAX_RANK];
};

// Pad with a constant (mode 0: the element fill_lo, fill_hi), by reflection (1) or by repeating
// the edge (2).
extern "C" __global__ void pad(const unsigned int* x, unsigned int* y, unsigned int count,
                               unsigned int words, unsigned int mode, unsigned int fill_lo,
                               unsigned int fill_hi, PadShape s) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int rest = i, src = 0, stride = 1;
        bool inside = true;
        for (unsigned int d = s.rank; d > 0; d--) {
            unsigned int out_dim = s.out_dims[d - 1];
            int n = (int)s.in_dims[d - 1];
            int c = (int)(rest % out_dim) - (int)s.begins[d - 1];
            rest /= out_dim;
            if (c < 0 || c >= n) {
                if (mode == 0 || n == 0) {
                    inside = false;
                } else if (mode == 1) {
                    if (n == 1) {
                        c = 0;
                    } else {
                        int period = 2 * (n - 1);
                        c = abs(c) % period;
                        if (c >= n) c = period - c;
                    }
                } else {
                    c = c < 0 ? 0 : n - 1;
                }
            }
            src += (unsigned int)(c > 0 ? c : 0) * stride;
            stride *= (unsigned int)n;
        }
        for (unsigned int w = 0; w < words; w++) {
            unsigned int fill = w == 0 ? fill_lo : fill_hi;
            y[i * words + w] = inside ? x[src * words + w] : fill;
        }
    }
}

// Output (o, j, r) = sum_k weights[j, k] * x[o, indices[j, k], r] (Resize along one axis), or the
// extrapolation value where indices[j, 0] < 0. A table index past the axis sets *status and
// counts as 0.
extern "C" __global__ void resample(const float* x, const int* indices, const float* weights,
                                    float* y, unsigned int count, unsigned int out_len,
                                    unsigned int inner, unsigned int in_len, unsigned int taps,
                                    float extrapolation, unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int r = i % inner;
        unsigned int j = (i / inner) % out_len;
        unsigned int o = i / (inner * out_len);
        float v = extrapolation;
        if (indices[j * taps] >= 0) {
            v = 0.0f;
            for (unsigned int k = 0; k < taps; k++) {
                int index = indices[j * taps + k];
                if (index < 0 || (unsigned int)index >= in_len) {
                    atomicOr(status, 1u);
                    continue;
                }
                v += weights[j * taps + k] * x[((size_t)o * in_len + index) * inner + r];
            }
        }
        y[i] = v;
    }
}
