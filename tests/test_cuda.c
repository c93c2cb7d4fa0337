// test_cuda.c: cuda.h's C half in whichever build this is: the device count is never
// negative and never crashes (the build machines have the CUDA toolkit but no driver,
// where the runtime's discovery fails), cuda_info says something, and without a device
// a context is refused with a message instead of a crash. With a GPU, a context is
// made and freed.
#include "base/cuda.h"

#include <string.h>

#include "base/error.h" // defines: err_msg
#include "test.h"

int main(void) {
    int n = cuda_device_count();
    T_OK(n >= 0, "cuda_device_count() = %d, not negative", n);
    T_OK(cuda_device_count() == n, "cuda_device_count() twice gives the same answer");
    const char *info = cuda_info();
    T_OK(info && strlen(info) > 10, "cuda_info: %s", info ? info : "(null)");
    CudaCtx *c = (CudaCtx *)1;
    if (n == 0) {
        int rc = cuda_ctx_create(&c, 0, 1 << 20);
        T_OK(rc == -1 && c == NULL && strstr(err_msg(), "no CUDA device"),
             "no device: cuda_ctx_create refuses with a message (%s)", err_msg());
        cuda_ctx_free(NULL);
    } else {
        int rc = cuda_ctx_create(&c, 0, 32 << 20);
        T_OK(rc == 0 && c != NULL, "cuda_ctx_create on device 0 (%s)", rc ? err_msg() : "ok");
        cuda_ctx_free(c);
        T_OK(cuda_ctx_create(&c, n, 0) == -1, "a device past the last is refused (%s)", err_msg());
    }
    T_DONE();
}
