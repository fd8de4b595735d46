// One direction of an ONNX RNN, GRU or LSTM, one time step per pair of launches (the host
// records seq of them into the graph): `recurrent_gates` computes both matrix products of the
// step, `recurrent_cell` the gate equations, reading the previous step's H and writing this
// step's H into its slot of Y (so no thread reads a state another overwrites). A GRU's cell
// runs in two phases: its z and r gates first (without linear_before_reset, each unit's
// candidate needs every unit's reset gate).
// Gate order and equations as ONNX: RNN (i), GRU (z, r, h), LSTM (i, o, f, c).

#include "common.cuh"

struct RecurrentShape {
    unsigned int batch, input, hidden;
    unsigned int rows; // gates · hidden
};

// from_x[b, g] = x[b, :] · w[g, :] + wb[g]; from_h[b, g] = h[b, :] · r[g, :] + rb[g]
// (bias = [wb, rb], or null).
extern "C" __global__ void recurrent_gates(const float* x, const float* w, const float* r,
                                           const float* bias, const float* h, float* from_x,
                                           float* from_h, RecurrentShape s) {
    unsigned int half = s.batch * s.rows;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < 2 * half;
         i += blockDim.x * gridDim.x) {
        bool recurrent = i >= half;
        unsigned int o = recurrent ? i - half : i;
        unsigned int b = o / s.rows, g = o % s.rows;
        unsigned int k = recurrent ? s.hidden : s.input;
        const float* a = recurrent ? h + (size_t)b * s.hidden : x + (size_t)b * s.input;
        const float* m = (recurrent ? r : w) + (size_t)g * k;
        float acc = 0.0f;
        for (unsigned int j = 0; j < k; j++) acc += a[j] * m[j];
        if (bias != nullptr) acc += bias[(recurrent ? s.rows : 0) + g];
        (recurrent ? from_h : from_x)[o] = acc;
    }
}

struct RecurrentCell {
    unsigned int kind;  // 0 RNN, 1 GRU, 2 LSTM
    unsigned int flag;  // GRU: linear_before_reset; LSTM: input_forget
    unsigned int phase; // GRU: 0 = the z and r gates (in place in from_x), 1 = the rest
    float clip;
};

// y[b, j] = this step's H; c (LSTM) is updated in place (each thread owns its unit).
extern "C" __global__ void recurrent_cell(float* from_x, const float* from_h, const float* h,
                                          float* c, const float* peep, const float* r,
                                          const float* bias, float* y, RecurrentShape s,
                                          RecurrentCell cell, Activation f, Activation g,
                                          Activation hh) {
    unsigned int H = s.hidden;
    bool gates_only = cell.kind == 1 && cell.phase == 0;
    unsigned int per_row = gates_only ? 2 * H : H;
    unsigned int count = s.batch * per_row;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int b = i / per_row, j = i % per_row;
        float* gx = from_x + (size_t)b * s.rows;
        const float* gh = from_h + (size_t)b * s.rows;
        const float* hb = h + (size_t)b * H;
        if (gates_only) {
            gx[j] = activate(f, clipped(gx[j] + gh[j], cell.clip));
            continue;
        }
        float out;
        if (cell.kind == 0) {
            out = activate(f, clipped(gx[j] + gh[j], cell.clip));
        } else if (cell.kind == 1) {
            float z = gx[j];
            float hx = gx[2 * H + j];
            if (cell.flag) {
                hx += gx[H + j] * gh[2 * H + j];
            } else {
                // (r ⊙ H) · Rhᵀ + Rbh.
                const float* rh = r + (size_t)2 * H * H + (size_t)j * H;
                float dot = 0.0f;
                for (unsigned int k = 0; k < H; k++) dot += gx[H + k] * hb[k] * rh[k];
                hx += dot + (bias != nullptr ? bias[s.rows + 2 * H + j] : 0.0f);
            }
            hx = activate(g, clipped(hx, cell.clip));
            out = (1.0f - z) * hx + z * hb[j];
        } else {
            float* cb = c + (size_t)b * H;
            float cj = cb[j];
            float pi = peep != nullptr ? peep[j] : 0.0f;
            float po = peep != nullptr ? peep[H + j] : 0.0f;
            float pf = peep != nullptr ? peep[2 * H + j] : 0.0f;
            float ig = activate(f, clipped(gx[j] + gh[j] + pi * cj, cell.clip));
            float fg = activate(f, clipped(gx[2 * H + j] + gh[2 * H + j] + pf * cj, cell.clip));
            float cg = activate(g, clipped(gx[3 * H + j] + gh[3 * H + j], cell.clip));
            float forget = cell.flag ? 1.0f - ig : fg;
            float cn = forget * cj + ig * cg;
            float og = activate(f, clipped(gx[H + j] + gh[H + j] + po * cn, cell.clip));
            cb[j] = cn;
            out = og * activate(hh, cn);
        }
        y[(size_t)b * H + j] = out;
    }
}
