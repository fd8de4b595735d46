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

// Output (o, q, r) = x[o, indices[q], r]; negative indices count from the end. An index out of
// range sets *status (the host reports it) and writes zeros.
extern "C" __global__ void gather(const unsigned int* x, const long long* indices, unsigned int* y,
                                  unsigned int count, unsigned int len, unsigned int index_count,
                                  unsigned int inner, unsigned int words, unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int r = i % inner;
        unsigned int q = (i / inner) % index_count;
        unsigned int o = i / (inner * index_count);
        long long index = indices[q];
        if (index < 0) index += len;
        bool valid = index >= 0 && index < (long long)len;
        if (!valid) atomicOr(status, 1u);
        unsigned int src = (o * len + (unsigned int)(valid ? index : 0)) * inner + r;
        for (unsigned int w = 0; w < words; w++) y[i * words + w] = valid ? x[src * words + w] : 0u;
    }
}
