// Matrix products: TILE × TILE output tiles with TILE-wide slices of A and B staged in shared
// memory. y[b] = alpha · A[b] · B[b] + beta · C (broadcast), then the fused activation. The batch
// is walked per axis with each operand's strides (0 on its broadcast axes: numpy matmul).

#include "common.cuh"

#define TILE FERRITE_TILE

struct Product {
    unsigned int m, k, n;
    float alpha, beta;
    // C's element strides along the output's rows and columns (0 where C broadcasts); C absent: null.
    unsigned int c_row_stride, c_col_stride;
    // The batch: its dims and each operand's element strides per batch axis.
    unsigned int batch_rank;
    unsigned int batch_dims[FERRITE_MAX_RANK];
    unsigned int a_batch_strides[FERRITE_MAX_RANK];
    unsigned int b_batch_strides[FERRITE_MAX_RANK];
};

// Grid: (ceil(n / TILE), ceil(m / TILE), batches); block: TILE × TILE. No early return: every
// thread reaches both barriers.
extern "C" __global__ void matmul(const float* a, const float* b, const float* c, float* y,
                                  Product p, Activation act) {
    __shared__ float as[TILE][TILE + 1];
    __shared__ float bs[TILE][TILE + 1];
    unsigned int batch = blockIdx.z;
    unsigned int row = blockIdx.y * TILE + threadIdx.y;
    unsigned int col = blockIdx.x * TILE + threadIdx.x;
    size_t a_base = 0, b_base = 0;
    unsigned int rest = batch;
    for (unsigned int d = p.batch_rank; d > 0; d--) {
        unsigned int coord = rest % p.batch_dims[d - 1];
        rest /= p.batch_dims[d - 1];
        a_base += (size_t)coord * p.a_batch_strides[d - 1];
        b_base += (size_t)coord * p.b_batch_strides[d - 1];
    }
    const float* ab = a + a_base;
    const float* bb = b + b_base;
    float acc = 0.0f;
    for (unsigned int t = 0; t < p.k; t += TILE) {
        unsigned int ka = t + threadIdx.x, kb = t + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < p.m && ka < p.k) ? ab[(size_t)row * p.k + ka] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < p.k && col < p.n) ? bb[(size_t)kb * p.n + col] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (unsigned int i = 0; i < TILE; i++) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < p.m && col < p.n) {
        float v = p.alpha * acc;
        if (c != nullptr) v += p.beta * c[row * p.c_row_stride + col * p.c_col_stride];
        y[((size_t)batch * p.m + row) * p.n + col] = activate_fused(act, v);
    }
}
