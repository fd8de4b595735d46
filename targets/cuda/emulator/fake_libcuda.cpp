// A stand-in for the NVIDIA driver (libcuda.so) that runs Ferrite's CUDA device end to end on
// the CPU: the driver API calls the device makes, with "device memory" in host memory and
// kernel launches executed by the host emulator (../emulator/host.cpp, which includes every
// kernel). Everything is synchronous; stream capture records the calls into a graph that
// cuGraphLaunch replays. NVRTC is the real one (the module's PTX is accepted and ignored).
//
// `ferrite_cuda::build_fake_driver` builds it; tools/tests/cuda_fake_driver.rs runs `ferrite
// run/bench --device cuda` against it and tests/tests/cuda.rs the GPU conformance suites, so the
// GPU program's real code (context, allocations, pinned buffers, graph capture, launch argument
// arrays, replay, status word, errors) runs in CI. What it cannot show: real GPU behaviour
// (concurrency, memory ordering, launch limits). FERRITE_FAKE_CUDA_FREE sets the free memory
// it reports (bytes), to exercise the out-of-memory path; FERRITE_FAKE_CUDA_POLLS=N makes
// every recorded event report "not ready" to its first N queries, like a slow GPU, to
// exercise timeouts. At exit it reports on stderr anything still held (device or pinned memory,
// streams, events, graphs, modules, context retains): the tests require none.

#include "host.cpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <functional>
#include <string>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

namespace {

constexpr CUresult SUCCESS = 0, INVALID_VALUE = 1, NOT_FOUND = 500;

struct Stream {
    bool capturing = false;
    std::vector<std::function<void()>> captured;
};

struct Graph {
    std::vector<std::function<void()>> ops;
};

int context_token = 1;
int module_token = 1;

// What is held now, per kind; anything left when the process exits is reported on stderr
// ("fake libcuda: leaked ..."), which the tests look for.
struct Held {
    std::atomic<long> device_memory{0}, pinned_memory{0}, streams{0}, events{0}, graphs{0},
        contexts{0}, modules{0};
    ~Held() {
        long counts[] = {device_memory, pinned_memory, streams, events, graphs, contexts, modules};
        const char* names[] = {"device allocations", "pinned allocations", "streams", "events",
                               "graphs", "context retains", "modules"};
        for (int i = 0; i < 7; i++) {
            if (counts[i] != 0) std::fprintf(stderr, "fake libcuda: leaked %ld %s\n", counts[i], names[i]);
        }
    }
} held;

// Runs `op` now, or records it when `stream` is capturing.
CUresult enqueue(void* stream, std::function<void()> op) {
    Stream* s = static_cast<Stream*>(stream);
    if (s != nullptr && s->capturing) {
        s->captured.push_back(std::move(op));
    } else {
        op();
    }
    return SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) { return SUCCESS; }
CUresult cuDriverGetVersion(int* v) {
    *v = 12060;
    return SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
    *count = 1;
    return SUCCESS;
}
CUresult cuDeviceGet(int* device, int ordinal) {
    if (ordinal != 0) return 101; // CUDA_ERROR_INVALID_DEVICE
    *device = 0;
    return SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, int) {
    std::snprintf(name, len, "Ferrite fake GPU (host emulator)");
    return SUCCESS;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, int) {
    switch (attribute) {
        case 75: *value = 8; break;  // compute capability major (Orin: 8.7)
        case 76: *value = 7; break;  // minor
        default: *value = 0; break;  // no memory pools: plain allocations
    }
    return SUCCESS;
}
static std::size_t free_bytes() {
    const char* v = std::getenv("FERRITE_FAKE_CUDA_FREE");
    return v != nullptr ? std::strtoull(v, nullptr, 10) : (std::size_t(8) << 30);
}
CUresult cuDeviceTotalMem_v2(std::size_t* bytes, int) {
    *bytes = std::size_t(8) << 30;
    return SUCCESS;
}
CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
    *free = free_bytes();
    *total = std::size_t(8) << 30;
    return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, int) {
    held.contexts++;
    *ctx = &context_token;
    return SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) {
    held.contexts--;
    return SUCCESS;
}
static thread_local void* current_context = nullptr;
CUresult cuCtxGetCurrent(void** ctx) {
    *ctx = current_context;
    return SUCCESS;
}
CUresult cuCtxSetCurrent(void* ctx) {
    current_context = ctx;
    return SUCCESS;
}
CUresult cuCtxSynchronize() { return SUCCESS; }

CUresult cuModuleLoadData(void** module, const void*) {
    held.modules++;
    *module = &module_token;
    return SUCCESS;
}
CUresult cuModuleUnload(void*) {
    held.modules--;
    return SUCCESS;
}
CUresult cuModuleGetFunction(void** function, void*, const char* name) {
    const FerriteKernel* kernel = ferrite_find_kernel(name);
    if (kernel == nullptr) return NOT_FOUND;
    *function = const_cast<FerriteKernel*>(kernel);
    return SUCCESS;
}

CUresult cuStreamCreate(void** stream, unsigned int) {
    held.streams++;
    *stream = new Stream();
    return SUCCESS;
}
CUresult cuStreamDestroy_v2(void* stream) {
    held.streams--;
    delete static_cast<Stream*>(stream);
    return SUCCESS;
}
CUresult cuStreamSynchronize(void*) { return SUCCESS; }
CUresult cuStreamBeginCapture_v2(void* stream, int) {
    if (stream == nullptr) return INVALID_VALUE;
    Stream* s = static_cast<Stream*>(stream);
    s->capturing = true;
    s->captured.clear();
    return SUCCESS;
}
CUresult cuStreamEndCapture(void* stream, void** graph) {
    Stream* s = static_cast<Stream*>(stream);
    s->capturing = false;
    held.graphs++;
    *graph = new Graph{std::move(s->captured)};
    s->captured.clear();
    return SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
    held.graphs++;
    *exec = new Graph(*static_cast<Graph*>(graph));
    return SUCCESS;
}
CUresult cuGraphUpload(void*, void*) { return SUCCESS; }
CUresult cuGraphLaunch(void* exec, void* stream) {
    Graph* g = static_cast<Graph*>(exec);
    return enqueue(stream, [g] {
        for (auto& op : g->ops) op();
    });
}
CUresult cuGraphExecDestroy(void* exec) {
    held.graphs--;
    delete static_cast<Graph*>(exec);
    return SUCCESS;
}
CUresult cuGraphDestroy(void* graph) {
    held.graphs--;
    delete static_cast<Graph*>(graph);
    return SUCCESS;
}

// An event is the number of queries it still answers "not ready" to.
CUresult cuEventCreate(void** event, unsigned int) {
    held.events++;
    *event = new long(0);
    return SUCCESS;
}
CUresult cuEventDestroy_v2(void* event) {
    held.events--;
    delete static_cast<long*>(event);
    return SUCCESS;
}
CUresult cuEventRecord(void* event, void*) {
    const char* polls = std::getenv("FERRITE_FAKE_CUDA_POLLS");
    *static_cast<long*>(event) = polls != nullptr ? std::strtol(polls, nullptr, 10) : 0;
    return SUCCESS;
}
CUresult cuEventQuery(void* event) {
    long* left = static_cast<long*>(event);
    if (*left > 0) {
        --*left;
        return 600; // CUDA_ERROR_NOT_READY
    }
    return SUCCESS;
}
CUresult cuEventSynchronize(void*) { return SUCCESS; }
CUresult cuStreamWaitEvent(void*, void*, unsigned int) { return SUCCESS; }

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, std::size_t bytes) {
    if (bytes > free_bytes()) return 2; // CUDA_ERROR_OUT_OF_MEMORY
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return 2;
    held.device_memory++;
    *ptr = reinterpret_cast<CUdeviceptr>(p);
    return SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) {
    held.device_memory--;
    std::free(reinterpret_cast<void*>(ptr));
    return SUCCESS;
}
CUresult cuMemHostAlloc(void** ptr, std::size_t bytes, unsigned int) {
    *ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (*ptr != nullptr) held.pinned_memory++;
    return *ptr != nullptr ? SUCCESS : 2;
}
CUresult cuMemFreeHost(void* ptr) {
    held.pinned_memory--;
    std::free(ptr);
    return SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t bytes, void* stream) {
    return enqueue(stream, [=] { std::memset(reinterpret_cast<void*>(dst), value, bytes); });
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, std::size_t bytes) {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return SUCCESS;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, std::size_t bytes, void* stream) {
    return enqueue(stream, [=] { std::memcpy(reinterpret_cast<void*>(dst), src, bytes); });
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, std::size_t bytes, void* stream) {
    return enqueue(stream, [=] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, void* stream) {
    return enqueue(stream, [=] {
        std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    });
}

// Copies the argument values now (the caller's storage is gone by the time a graph replays).
CUresult cuLaunchKernel(void* function, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int,
                        void* stream, void** params, void** extra) {
    if (function == nullptr || extra != nullptr) return INVALID_VALUE;
    const FerriteKernel* kernel = static_cast<const FerriteKernel*>(function);
    auto values = std::make_shared<std::vector<std::vector<unsigned char>>>();
    for (std::size_t i = 0; i < kernel->params; i++) {
        const unsigned char* p = static_cast<const unsigned char*>(params[i]);
        values->emplace_back(p, p + kernel->sizes[i]);
    }
    return enqueue(stream, [=] {
        std::vector<void*> args;
        for (auto& v : *values) args.push_back(v.data());
        const unsigned int grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
        ferrite_run_kernel(*kernel, grid, block, args.data());
    });
}

CUresult cuGetErrorName(CUresult error, const char** name) {
    static thread_local std::string text;
    text = "FAKE_CUDA_ERROR_" + std::to_string(error);
    *name = text.c_str();
    return SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char** what) {
    static thread_local std::string text;
    text = "fake driver error " + std::to_string(error);
    *what = text.c_str();
    return SUCCESS;
}

}  // extern "C"
