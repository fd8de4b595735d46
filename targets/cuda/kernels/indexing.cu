// Data-dependent indexing: TopK, ScatterElements, GatherND, ScatterND, and Det. Where several
// updates may land on one element, each thread owns a disjoint set of outputs and applies its
// updates in order, so results match the CPU device exactly (ONNX leaves duplicate indices to
// the implementation; Ferrite makes every device agree). Bad indices set *status and are
// skipped (scatters) or read as zeros (gathers).

#include "common.cuh"

// Element kinds: f32 0, int32 1, int64 2.
template <typename T>
__device__ T combined(unsigned int reduction, T old, T update) {
    switch (reduction) {
        case 1: return old + update;
        case 2: return old * update;
        case 3: return old > update ? old : update;
        case 4: return old < update ? old : update;
        default: return update;
    }
}

// An index tuple entry: int32 (index_words 1) or int64 (2), wrapped if negative; -1 if out of
// [0, len).
__device__ long long checked_index(const unsigned int* indices, size_t at,
                                   unsigned int index_words, unsigned int len) {
    long long index = (int)indices[at * index_words];
    if (index_words == 2) {
        index = (long long)(((unsigned long long)indices[at * 2 + 1] << 32) | indices[at * 2]);
    }
    if (index < 0) index += len;
    return (index >= 0 && index < (long long)len) ? index : -1;
}

// TopK along [outer, len, inner], one lane per thread, as the CPU does: the r-th output is the
// best element ranking after the (r-1)-th (better value, then lower index).
template <typename T>
__device__ void top_k_lane(const T* x, T* values, long long* indices, unsigned int lane,
                           unsigned int len, unsigned int inner, unsigned int k,
                           unsigned int largest) {
    size_t o = lane / inner, i = lane % inner;
    auto at = [&](unsigned int j) { return x[(o * len + j) * inner + i]; };
    auto before = [&](T a, unsigned int ia, T b, unsigned int ib) {
        bool better = largest ? a > b : a < b;
        return better || (a == b && ia < ib);
    };
    bool has_previous = false;
    T pv = 0;
    unsigned int pj = 0;
    for (unsigned int r = 0; r < k; r++) {
        bool found = false;
        T bv = 0;
        unsigned int bj = 0;
        for (unsigned int j = 0; j < len; j++) {
            T v = at(j);
            bool after_previous = !has_previous || before(pv, pj, v, j);
            bool beats_best = !found || before(v, j, bv, bj);
            if (after_previous && beats_best) {
                found = true;
                bv = v;
                bj = j;
            }
        }
        if (!found) break;
        size_t slot = (o * k + r) * inner + i;
        values[slot] = bv;
        indices[slot] = bj;
        has_previous = true;
        pv = bv;
        pj = bj;
    }
}

extern "C" __global__ void top_k(const void* x, void* values, long long* indices,
                                 unsigned int outer, unsigned int len, unsigned int inner,
                                 unsigned int k, unsigned int largest, unsigned int kind) {
    unsigned int lanes = outer * inner;
    for (unsigned int lane = blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += blockDim.x * gridDim.x) {
        if (kind == 0) {
            top_k_lane((const float*)x, (float*)values, indices, lane, len, inner, k, largest);
        } else if (kind == 1) {
            top_k_lane((const int*)x, (int*)values, indices, lane, len, inner, k, largest);
        } else {
            top_k_lane((const long long*)x, (long long*)values, indices, lane, len, inner, k,
                       largest);
        }
    }
}

// The walk of ScatterElements: the updates' dims, the output's strides, the scattered axis.
struct ScatterWalk {
    unsigned int rank, axis, axis_len;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int out_strides[FERRITE_MAX_RANK];
};

template <typename T>
__device__ void scatter_fiber(T* out, const unsigned int* indices, const T* updates,
                              unsigned int fiber, unsigned int reduction,
                              unsigned int index_words, const ScatterWalk& s,
                              unsigned int* status) {
    // The fiber's coordinates on every axis but `axis`.
    size_t base_update = 0, base_out = 0, stride = 1;
    unsigned int rest = fiber;
    unsigned int update_strides[FERRITE_MAX_RANK];
    for (unsigned int d = s.rank; d > 0; d--) {
        update_strides[d - 1] = (unsigned int)stride;
        stride *= s.dims[d - 1];
    }
    for (unsigned int d = s.rank; d > 0; d--) {
        if (d - 1 == s.axis) continue;
        unsigned int c = rest % s.dims[d - 1];
        rest /= s.dims[d - 1];
        base_update += (size_t)c * update_strides[d - 1];
        base_out += (size_t)c * s.out_strides[d - 1];
    }
    for (unsigned int u = 0; u < s.dims[s.axis]; u++) {
        size_t at = base_update + (size_t)u * update_strides[s.axis];
        long long index = checked_index(indices, at, index_words, s.axis_len);
        if (index < 0) {
            atomicOr(status, 1u);
            continue;
        }
        T* target = out + base_out + (size_t)index * s.out_strides[s.axis];
        *target = combined(reduction, *target, updates[at]);
    }
}

// out (already a copy of data) gets each update at its position with the `axis` coordinate
// from indices; one thread per fiber along `axis`, updates applied in order.
extern "C" __global__ void scatter_elements(void* out, const unsigned int* indices,
                                            const void* updates, unsigned int fibers,
                                            unsigned int reduction, unsigned int kind,
                                            unsigned int index_words, ScatterWalk s,
                                            unsigned int* status) {
    for (unsigned int f = blockIdx.x * blockDim.x + threadIdx.x; f < fibers;
         f += blockDim.x * gridDim.x) {
        if (kind == 0) {
            scatter_fiber((float*)out, indices, (const float*)updates, f, reduction, index_words,
                          s, status);
        } else if (kind == 1) {
            scatter_fiber((int*)out, indices, (const int*)updates, f, reduction, index_words, s,
                          status);
        } else {
            scatter_fiber((long long*)out, indices, (const long long*)updates, f, reduction,
                          index_words, s, status);
        }
    }
}

// The shape of a GatherND / ScatterND: tuples of q indices into data's axes [batch, batch + q).
struct TupleWalk {
    unsigned int q;
    unsigned int tuples_per_batch; // index tuples per batch element
    unsigned int slice;            // elements per selected slice
    unsigned int batch_stride;     // data elements per batch element
    unsigned int dims[FERRITE_MAX_RANK];    // data dims indexed by the tuple
    unsigned int strides[FERRITE_MAX_RANK]; // their data strides
};

// The data offset of index tuple t (of its batch element), or -1 with *status set.
__device__ long long tuple_offset(const unsigned int* indices, unsigned int t,
                                  unsigned int index_words, const TupleWalk& s,
                                  unsigned int* status) {
    size_t offset = (size_t)(t / s.tuples_per_batch) * s.batch_stride;
    for (unsigned int j = 0; j < s.q; j++) {
        long long index = checked_index(indices, (size_t)t * s.q + j, index_words, s.dims[j]);
        if (index < 0) {
            atomicOr(status, 1u);
            return -1;
        }
        offset += (size_t)index * s.strides[j];
    }
    return (long long)offset;
}

// y[t, e] = data[tuple t's slice, e], elements of `words` 32-bit words.
extern "C" __global__ void gather_nd(const unsigned int* data, const unsigned int* indices,
                                     unsigned int* y, unsigned int count, unsigned int words,
                                     unsigned int index_words, TupleWalk s,
                                     unsigned int* status) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int t = i / s.slice, e = i % s.slice;
        long long offset = tuple_offset(indices, t, index_words, s, status);
        for (unsigned int w = 0; w < words; w++) {
            y[(size_t)i * words + w] = offset < 0 ? 0u : data[((size_t)offset + e) * words + w];
        }
    }
}

// out (already a copy of data): element e of every tuple's slice combined with updates[t, e],
// tuples in order; one thread per e.
template <typename T>
__device__ void scatter_nd_element(T* out, const unsigned int* indices, const T* updates,
                                   unsigned int e, unsigned int tuples, unsigned int reduction,
                                   unsigned int index_words, const TupleWalk& s,
                                   unsigned int* status) {
    for (unsigned int t = 0; t < tuples; t++) {
        long long offset = tuple_offset(indices, t, index_words, s, status);
        if (offset < 0) continue;
        T* target = out + offset + e;
        *target = combined(reduction, *target, updates[(size_t)t * s.slice + e]);
    }
}

extern "C" __global__ void scatter_nd(void* out, const unsigned int* indices, const void* updates,
                                      unsigned int tuples, unsigned int reduction,
                                      unsigned int kind, unsigned int index_words, TupleWalk s,
                                      unsigned int* status) {
    for (unsigned int e = blockIdx.x * blockDim.x + threadIdx.x; e < s.slice;
         e += blockDim.x * gridDim.x) {
        if (kind == 0) {
            scatter_nd_element((float*)out, indices, (const float*)updates, e, tuples, reduction,
                               index_words, s, status);
        } else if (kind == 1) {
            scatter_nd_element((int*)out, indices, (const int*)updates, e, tuples, reduction,
                               index_words, s, status);
        } else {
            scatter_nd_element((long long*)out, indices, (const long long*)updates, e, tuples,
                               reduction, index_words, s, status);
        }
    }
}

// Determinants of `count` n × n matrices by LU with partial pivoting in double precision, as
// the CPU device: one thread, one matrix after another, in the n × n f64 scratch.
extern "C" __global__ void det(const float* x, float* y, double* a, unsigned int count,
                               unsigned int n) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (unsigned int m = 0; m < count; m++) {
        for (size_t i = 0; i < (size_t)n * n; i++) a[i] = x[(size_t)m * n * n + i];
        double d = 1.0;
        for (unsigned int col = 0; col < n; col++) {
            unsigned int pivot = col;
            for (unsigned int i = col + 1; i < n; i++) {
                // The last of equal magnitudes, as the CPU's max_by.
                if (fabs(a[(size_t)i * n + col]) >= fabs(a[(size_t)pivot * n + col])) pivot = i;
            }
            if (a[(size_t)pivot * n + col] == 0.0) {
                d = 0.0;
                break;
            }
            if (pivot != col) {
                for (unsigned int k = 0; k < n; k++) {
                    double t = a[(size_t)pivot * n + k];
                    a[(size_t)pivot * n + k] = a[(size_t)col * n + k];
                    a[(size_t)col * n + k] = t;
                }
                d = -d;
            }
            double p = a[(size_t)col * n + col];
            d *= p;
            for (unsigned int row = col + 1; row < n; row++) {
                double f = a[(size_t)row * n + col] / p;
                for (unsigned int k = col; k < n; k++) a[(size_t)row * n + k] -= f * a[(size_t)col * n + k];
            }
        }
        y[m] = (float)d;
    }
}
