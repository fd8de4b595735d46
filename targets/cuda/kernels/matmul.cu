// Matrix products: 16 × 16 output tiles with 16-wide slices of A and B staged in shared memory.
// y[b] = alpha · A[b] · B[b] + beta · C (broadcast), then the fused activation. Batch strides
// of 0 broadcast an operand across the batch (numpy matmul).

#include "common.cuh"

#define TILE 16

struct Product {
    unsigned int m, k, n;
    unsigned int batches;
    unsigned int a_batch_stride, b_batch_stride;
    float alpha, beta;
    // C's element strides along the output's rows and columns (0 where C broadcasts); C absent: null.
    unsigned int c_row_stride, c_col_stride;
};

extern "C" __global__ void matmul(const float* a, const float* b, const float* c, float* y,
                                  Product p, Activation act) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    unsigned int batch = blockIdx.z;
    unsigned int row = blockIdx.y * TILE + threadIdx.y;
    unsigned int col = blockIdx.x * TILE + threadIdx.x;
    const float* ab = a + (size_t)batch * p.a_batch_stride;
    const float* bb = b + (size_t)batch * p.b_batch_stride;
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
    if (row < p.m && col < p.n && batch < p.batches) {
        float v = p.alpha * acc;
        if (c != nullptr) v += p.beta * c[row * p.c_row_stride + col * p.c_col_stride];
        y[((size_t)batch * p.m + row) * p.n + col] = activate_fused(act, v);
    }
}
