/* A stand-in for the NVIDIA driver (libcuda.so) that initialises and reports no device: the
   CLI test runs `ferrite devices` and `--device cuda` against it (cudarc resolves each driver
   symbol when first called, so these two are all discovery needs). */
int cuInit(unsigned int flags) {
    (void)flags;
    return 0; /* CUDA_SUCCESS */
}

int cuDeviceGetCount(int *count) {
    *count = 0;
    return 0;
}
