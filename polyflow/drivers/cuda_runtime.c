/* The CUDA runtime of programs polyflow builds for --target=cuda.
 *
 * MLIR's host lowering (gpu-to-llvm and the LLVM translation of gpu.launch_func) calls the
 * `mgpu*` functions below; they are written here on the CUDA driver API, which is opened with
 * dlopen when the program starts, so that the program links and starts without the CUDA
 * toolkit, and a machine without a GPU gets one clear line instead of a loader error:
 *
 *   polyflow: this program runs its loops on a CUDA GPU: no CUDA driver (libcuda.so.1)
 *
 * Memory is copied with cuMemcpyAsync on the launches' stream (unified addressing: host and
 * device pointers alike), and waited for; a free waits for the stream too. The lowering makes
 * one stream per function call and synchronizes it before the function returns, so the host
 * never sees a kernel half done. A CUDA error ends the program with
 * the failing call and CUDA's message.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void **, void **);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*GetErrorString)(CUresult, const char **);
} cu;

static int ready;

/* Weak: each unit `polyflow cc -c` builds for CUDA carries this runtime; the link keeps one. */
#define WEAK __attribute__((weak))

static void unavailable(const char *why) {
  fprintf(stderr, "polyflow: this program runs its loops on a CUDA GPU: %s\n", why);
  exit(1);
}

static void check(CUresult status, const char *call) {
  if (status == 0)
    return;
  const char *message = "unknown error";
  if (cu.GetErrorString)
    cu.GetErrorString(status, &message);
  fprintf(stderr, "polyflow: CUDA error in %s: %s (%d)\n", call, message, status);
  exit(1);
}

static void *symbol(void *lib, const char *name) {
  void *found = dlsym(lib, name);
  if (!found) {
    fprintf(stderr, "polyflow: the CUDA driver lacks %s\n", name);
    exit(1);
  }
  return found;
}

static void start(void) {
  if (ready)
    return;
  if (getenv("POLYFLOW_CUDA_DRIVER_MISSING")) /* tests: the message of a machine without one */
    unavailable("no CUDA driver (libcuda.so.1)");
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    unavailable("no CUDA driver (libcuda.so.1)");
  *(void **)&cu.Init = symbol(lib, "cuInit");
  *(void **)&cu.DeviceGetCount = symbol(lib, "cuDeviceGetCount");
  *(void **)&cu.DeviceGet = symbol(lib, "cuDeviceGet");
  *(void **)&cu.DevicePrimaryCtxRetain = symbol(lib, "cuDevicePrimaryCtxRetain");
  *(void **)&cu.CtxSetCurrent = symbol(lib, "cuCtxSetCurrent");
  *(void **)&cu.ModuleLoadData = symbol(lib, "cuModuleLoadData");
  *(void **)&cu.ModuleUnload = symbol(lib, "cuModuleUnload");
  *(void **)&cu.ModuleGetFunction = symbol(lib, "cuModuleGetFunction");
  *(void **)&cu.LaunchKernel = symbol(lib, "cuLaunchKernel");
  *(void **)&cu.StreamCreate = symbol(lib, "cuStreamCreate");
  *(void **)&cu.StreamSynchronize = symbol(lib, "cuStreamSynchronize");
  *(void **)&cu.StreamDestroy = symbol(lib, "cuStreamDestroy_v2");
  *(void **)&cu.MemAlloc = symbol(lib, "cuMemAlloc_v2");
  *(void **)&cu.MemFree = symbol(lib, "cuMemFree_v2");
  *(void **)&cu.MemcpyAsync = symbol(lib, "cuMemcpyAsync");
  *(void **)&cu.GetErrorString = symbol(lib, "cuGetErrorString");
  if (cu.Init(0) != 0)
    unavailable("no CUDA device (the driver did not initialize)");
  int count = 0;
  if (cu.DeviceGetCount(&count) != 0 || count == 0)
    unavailable("no CUDA device");
  CUdevice device;
  CUcontext context;
  check(cu.DeviceGet(&device, 0), "cuDeviceGet");
  check(cu.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(context), "cuCtxSetCurrent");
  ready = 1;
}

/* A program built for CUDA says at once when it cannot run (before main). */
__attribute__((constructor)) static void polyflow_cuda_start(void) { start(); }

WEAK void *mgpuModuleLoadJIT(void *data, int opt_level) {
  (void)opt_level;
  start();
  CUmodule module;
  check(cu.ModuleLoadData(&module, data), "cuModuleLoadData");
  return module;
}

WEAK void *mgpuModuleLoad(void *data, size_t size) {
  (void)size;
  return mgpuModuleLoadJIT(data, 3);
}

WEAK void mgpuModuleUnload(void *module) {
  if (ready)
    cu.ModuleUnload(module);
}

WEAK void *mgpuModuleGetFunction(void *module, const char *name) {
  CUfunction function;
  check(cu.ModuleGetFunction(&function, module, name), "cuModuleGetFunction");
  return function;
}

WEAK void mgpuLaunchKernel(void *function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z,
                      intptr_t block_x, intptr_t block_y, intptr_t block_z, int32_t shared,
                      void *stream, void **params, void **extra, size_t count) {
  (void)count;
  check(cu.LaunchKernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared,
                        stream, params, extra),
        "cuLaunchKernel");
}

WEAK void *mgpuStreamCreate(void) {
  start();
  CUstream stream;
  check(cu.StreamCreate(&stream, 0 /* ordered with the legacy default stream */),
        "cuStreamCreate");
  return stream;
}

WEAK void mgpuStreamSynchronize(void *stream) {
  check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
}

WEAK void mgpuStreamDestroy(void *stream) { check(cu.StreamDestroy(stream), "cuStreamDestroy"); }

WEAK void *mgpuMemAlloc(uint64_t bytes, void *stream, int8_t host_shared) {
  (void)stream;
  (void)host_shared;
  start();
  CUdeviceptr pointer = 0;
  if (bytes > 0)
    check(cu.MemAlloc(&pointer, bytes), "cuMemAlloc");
  return (void *)(uintptr_t)pointer;
}

WEAK void mgpuMemFree(void *pointer, void *stream) {
  if (!pointer)
    return;
  if (stream) /* nothing queued on the stream may still use it */
    check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
  check(cu.MemFree((CUdeviceptr)(uintptr_t)pointer), "cuMemFree");
}

/* In the stream's order (after the kernels queued before it), and done when it returns: the
 * host reads what it copied back right after. */
WEAK void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  if (bytes == 0)
    return;
  check(cu.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, stream),
        "cuMemcpyAsync");
  check(cu.StreamSynchronize(stream), "cuStreamSynchronize");
}
