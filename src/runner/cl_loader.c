/* dlopen of the OpenCL library (explicit path, then the search list of README.md), error names
 * from the OpenCL 1.2 specification, and platform/device selection. */
#define _POSIX_C_SOURCE 200809L
#include "cl_loader.h"
#include "util.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cl_api CL;
static const char *g_loaded;

static const char *const search_list[] = {
    "libOpenCL.so.1", "libOpenCL.so",
    "/vendor/lib64/libOpenCL.so", "/system/vendor/lib64/libOpenCL.so",
    "libOpenCL-pixel.so", "/system/lib64/libOpenCL-pixel.so",
    "/vendor/lib64/egl/libGLES_mali.so", "libmali.so",
};

/* Pixel phones' OpenCL wrapper (libOpenCL-pixel.so) exports a loader instead of the API:
 * `void enableOpenCL(void)` switches it on, then `void *loadOpenCLPointer(const char *name)`
 * returns each entry point (the names MNN's OpenCLWrapper.cpp and TFLite's GPU delegate
 * call). Any library exporting enableOpenCL is treated so; an entry point dlsym does not find
 * is then asked of the loader. */
typedef void (*enable_opencl_fn)(void);
typedef void *(*load_opencl_pointer_fn)(const char *name);

static int try_load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    load_opencl_pointer_fn loader = NULL;
    enable_opencl_fn enable = (enable_opencl_fn)dlsym(h, "enableOpenCL");
    if (enable) {
        enable();
        loader = (load_opencl_pointer_fn)dlsym(h, "loadOpenCLPointer");
    }
#define CL_LOAD_SYM(ret, name, params) \
    *(void **)(&CL.name) = dlsym(h, #name); \
    if (!CL.name && loader) *(void **)(&CL.name) = loader(#name); \
    if (!CL.name) { dlclose(h); memset(&CL, 0, sizeof CL); return -2; }
    CL_FUNCTIONS(CL_LOAD_SYM)
#undef CL_LOAD_SYM
    g_loaded = path;
    return 0;
}

int cl_load(const char *explicit_path, char *err, size_t errlen)
{
    if (g_loaded) return 0;
    if (explicit_path) {
        int r = try_load(explicit_path);
        if (r == 0) return 0;
        const char *why = dlerror();
        snprintf(err, errlen, "OpenCL library %s (--cl-lib) %s", explicit_path,
                 r == -2 ? "lacks an OpenCL 1.2 entry point" : (why ? why : "cannot be loaded"));
        return -1;
    }
    for (size_t i = 0; i < sizeof search_list / sizeof *search_list; i++)
        if (try_load(search_list[i]) == 0) return 0;
    snprintf(err, errlen, "no OpenCL library found (tried libOpenCL.so.1, libOpenCL.so, the "
             "Android vendor paths and Pixel's libOpenCL-pixel.so); install ocl-icd-libopencl1 and pocl-opencl-icd, or pass "
             "--cl-lib PATH");
    return -1;
}

const char *cl_loaded_path(void) { return g_loaded ? g_loaded : ""; }

const char *cl_error_name(cl_int code)
{
    static const char *const pos[] = {
        "CL_SUCCESS", "CL_DEVICE_NOT_FOUND", "CL_DEVICE_NOT_AVAILABLE",
        "CL_COMPILER_NOT_AVAILABLE", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "CL_OUT_OF_RESOURCES",
        "CL_OUT_OF_HOST_MEMORY", "CL_PROFILING_INFO_NOT_AVAILABLE", "CL_MEM_COPY_OVERLAP",
        "CL_IMAGE_FORMAT_MISMATCH", "CL_IMAGE_FORMAT_NOT_SUPPORTED", "CL_BUILD_PROGRAM_FAILURE",
        "CL_MAP_FAILURE", "CL_MISALIGNED_SUB_BUFFER_OFFSET",
        "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", "CL_COMPILE_PROGRAM_FAILURE",
        "CL_LINKER_NOT_AVAILABLE", "CL_LINK_PROGRAM_FAILURE", "CL_DEVICE_PARTITION_FAILED",
        "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
    };
    static const char *const inv[] = {   /* -30 .. -68 */
        "CL_INVALID_VALUE", "CL_INVALID_DEVICE_TYPE", "CL_INVALID_PLATFORM", "CL_INVALID_DEVICE",
        "CL_INVALID_CONTEXT", "CL_INVALID_QUEUE_PROPERTIES", "CL_INVALID_COMMAND_QUEUE",
        "CL_INVALID_HOST_PTR", "CL_INVALID_MEM_OBJECT", "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
        "CL_INVALID_IMAGE_SIZE", "CL_INVALID_SAMPLER", "CL_INVALID_BINARY",
        "CL_INVALID_BUILD_OPTIONS", "CL_INVALID_PROGRAM", "CL_INVALID_PROGRAM_EXECUTABLE",
        "CL_INVALID_KERNEL_NAME", "CL_INVALID_KERNEL_DEFINITION", "CL_INVALID_KERNEL",
        "CL_INVALID_ARG_INDEX", "CL_INVALID_ARG_VALUE", "CL_INVALID_ARG_SIZE",
        "CL_INVALID_KERNEL_ARGS", "CL_INVALID_WORK_DIMENSION", "CL_INVALID_WORK_GROUP_SIZE",
        "CL_INVALID_WORK_ITEM_SIZE", "CL_INVALID_GLOBAL_OFFSET", "CL_INVALID_EVENT_WAIT_LIST",
        "CL_INVALID_EVENT", "CL_INVALID_OPERATION", "CL_INVALID_GL_OBJECT",
        "CL_INVALID_BUFFER_SIZE", "CL_INVALID_MIP_LEVEL", "CL_INVALID_GLOBAL_WORK_SIZE",
        "CL_INVALID_PROPERTY", "CL_INVALID_IMAGE_DESCRIPTOR", "CL_INVALID_COMPILER_OPTIONS",
        "CL_INVALID_LINKER_OPTIONS", "CL_INVALID_DEVICE_PARTITION_COUNT",
    };
    if (code <= 0 && code > -(cl_int)(sizeof pos / sizeof *pos)) return pos[-code];
    if (code <= -30 && code > -30 - (cl_int)(sizeof inv / sizeof *inv)) return inv[-30 - code];
    if (code == CL_PLATFORM_NOT_FOUND_KHR) return "CL_PLATFORM_NOT_FOUND_KHR";
    return "unknown OpenCL error";
}

_Noreturn void cl_fail(const char *call, cl_int err, const char *ctx)
{
    char name[96];
    size_t n = strcspn(call, "(");   /* "clFinish(queue)" -> "clFinish" */
    snprintf(name, sizeof name, "%.*s", (int)(n < 90 ? n : 90), call);
    /* the one error code that always means "no memory for a buffer", wherever it surfaces
     * (some implementations allocate lazily, at the first command that uses the buffer) */
    fail(err == CL_MEM_OBJECT_ALLOCATION_FAILURE ? EXIT_OUT_OF_MEMORY : EXIT_CL_RUNTIME,
         "OpenCL error: %s returned %s (%d)%s%s", name, cl_error_name(err),
         (int)err, ctx && *ctx ? " during " : "", ctx ? ctx : "");
}

/* Defines char *name(obj_type obj, info_type what): the string property `what` of obj, read
 * with `getter` (clGet*Info) in two calls, its size and then its text; "" when a call fails. */
#define CL_STRING_QUERY(name, obj_type, info_type, getter)                             \
    char *name(obj_type obj, info_type what)                                           \
    {                                                                                  \
        size_t n = 0;                                                                  \
        if (CL.getter(obj, what, 0, NULL, &n) != CL_SUCCESS) return xstrdup("");       \
        char *s = xcalloc(n + 1, 1);                                                   \
        if (CL.getter(obj, what, n, s, NULL) != CL_SUCCESS) s[0] = '\0';               \
        return s;                                                                      \
    }

CL_STRING_QUERY(cl_platform_str, cl_platform_id, cl_platform_info, clGetPlatformInfo)
CL_STRING_QUERY(cl_device_str, cl_device_id, cl_device_info, clGetDeviceInfo)

cl_ulong cl_device_ulong(cl_device_id d, cl_device_info what)
{
    size_t n = 0;
    unsigned char buf[8] = {0};
    if (CL.clGetDeviceInfo(d, what, sizeof buf, buf, &n) != CL_SUCCESS) return 0;
    if (n == 4) { uint32_t v; memcpy(&v, buf, 4); return v; }
    if (n == 8) { uint64_t v; memcpy(&v, buf, 8); return v; }
    return 0;
}

static int contains_ci(const char *hay, const char *needle)
{
    if (!needle || !*needle) return 1;
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return 0;
}

static const char *type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU) return "gpu";
    if (t & CL_DEVICE_TYPE_CPU) return "cpu";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    if (t & CL_DEVICE_TYPE_CUSTOM) return "custom";
    return "other";
}

/* Every (platform, device) pair, in platform order. */
typedef struct { cl_platform_id p; cl_device_id d; } cl_pair;

static int list_devices(cl_pair *out, int cap)
{
    cl_platform_id plats[16];
    cl_uint np = 0;
    cl_int e = CL.clGetPlatformIDs(16, plats, &np);
    if (e == CL_PLATFORM_NOT_FOUND_KHR || np == 0) return 0;
    if (e != CL_SUCCESS) cl_fail("clGetPlatformIDs", e, "listing platforms");
    int n = 0;
    for (cl_uint i = 0; i < np && i < 16; i++) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (CL.clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd && j < 16 && n < cap; j++) out[n++] = (cl_pair){plats[i], devs[j]};
    }
    return n;
}

static int matches(const cl_pair *c, const cl_selector *sel, int want_gpu_only)
{
    char *pn = cl_platform_str(c->p, CL_PLATFORM_NAME);
    char *dn = cl_device_str(c->d, CL_DEVICE_NAME);
    const char *tn = type_name((cl_device_type)cl_device_ulong(c->d, CL_DEVICE_TYPE));
    int ok = contains_ci(pn, sel->platform) && contains_ci(dn, sel->device);
    if (sel->type && strcmp(sel->type, "all")) ok = ok && !strcmp(tn, sel->type);
    if (want_gpu_only) ok = ok && !strcmp(tn, "gpu");
    free(pn);
    free(dn);
    return ok;
}

void cl_select(const char *cl_lib, const cl_selector *sel, cl_platform_id *platform,
               cl_device_id *device)
{
    char err[512];
    if (sel->type && strcmp(sel->type, "gpu") && strcmp(sel->type, "cpu") &&
        strcmp(sel->type, "accelerator") && strcmp(sel->type, "all"))
        fail(EXIT_BAD_INPUT, "--device-type %s must be gpu, cpu, accelerator or all", sel->type);
    if (cl_load(cl_lib, err, sizeof err) != 0) fail(EXIT_NO_DEVICE, "%s", err);
    cl_pair all[64];
    int n = list_devices(all, 64);
    /* Without a type, a GPU wins over other devices (phones: the GPU, not a CPU driver). */
    for (int pass = sel->type ? 1 : 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (matches(&all[i], sel, pass == 0)) { *platform = all[i].p; *device = all[i].d; return; }
    char avail[1536] = "";
    for (int i = 0; i < n; i++) {
        char *pn = cl_platform_str(all[i].p, CL_PLATFORM_NAME);
        char *dn = cl_device_str(all[i].d, CL_DEVICE_NAME);
        size_t len = strlen(avail);
        snprintf(avail + len, sizeof avail - len, "%s\"%s\" / \"%s\" (%s)", i ? ", " : "", pn, dn,
                 type_name((cl_device_type)cl_device_ulong(all[i].d, CL_DEVICE_TYPE)));
        free(pn);
        free(dn);
    }
    fail(EXIT_NO_DEVICE, "no OpenCL device matches platform=%s device=%s type=%s in %s; "
         "available: %s", sel->platform ? sel->platform : "*", sel->device ? sel->device : "*",
         sel->type ? sel->type : "any", cl_loaded_path(), n ? avail : "none");
}

void cl_write_device_json(jwriter *w, cl_platform_id p, cl_device_id d)
{
    char *s;
    jw_obj_begin(w);
#define STR_FIELD(key, fn, obj, what) s = fn(obj, what); jw_key(w, key); jw_str(w, s); free(s);
    STR_FIELD("platform", cl_platform_str, p, CL_PLATFORM_NAME)
    STR_FIELD("platform_vendor", cl_platform_str, p, CL_PLATFORM_VENDOR)
    STR_FIELD("platform_version", cl_platform_str, p, CL_PLATFORM_VERSION)
    STR_FIELD("name", cl_device_str, d, CL_DEVICE_NAME)
    STR_FIELD("vendor", cl_device_str, d, CL_DEVICE_VENDOR)
    STR_FIELD("version", cl_device_str, d, CL_DEVICE_VERSION)
    STR_FIELD("driver_version", cl_device_str, d, CL_DRIVER_VERSION)
    STR_FIELD("opencl_c_version", cl_device_str, d, CL_DEVICE_OPENCL_C_VERSION)
#undef STR_FIELD
    jw_key(w, "type");
    jw_str(w, type_name((cl_device_type)cl_device_ulong(d, CL_DEVICE_TYPE)));
    jw_key(w, "compute_units"); jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_MAX_COMPUTE_UNITS));
    jw_key(w, "max_clock_mhz"); jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_MAX_CLOCK_FREQUENCY));
    jw_key(w, "global_mem_bytes"); jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_GLOBAL_MEM_SIZE));
    jw_key(w, "global_mem_cache_bytes");
    jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE));
    jw_key(w, "local_mem_bytes"); jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_LOCAL_MEM_SIZE));
    jw_key(w, "max_alloc_bytes"); jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
    jw_key(w, "max_work_group_size");
    jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_MAX_WORK_GROUP_SIZE));
    size_t sizes[3] = {0, 0, 0};
    CL.clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof sizes, sizes, NULL);
    jw_key(w, "max_work_item_sizes");
    jw_arr_begin(w);
    for (int i = 0; i < 3; i++) jw_int(w, (long long)sizes[i]);
    jw_arr_end(w);
    jw_key(w, "image_support"); jw_bool(w, cl_device_ulong(d, CL_DEVICE_IMAGE_SUPPORT) != 0);
    jw_key(w, "host_unified_memory");
    jw_bool(w, cl_device_ulong(d, CL_DEVICE_HOST_UNIFIED_MEMORY) != 0);
    s = cl_device_str(d, CL_DEVICE_EXTENSIONS);
    jw_key(w, "fp16"); jw_bool(w, strstr(s, "cl_khr_fp16") != NULL);
    jw_key(w, "fp64"); jw_bool(w, strstr(s, "cl_khr_fp64") != NULL);
    jw_key(w, "extensions"); jw_str(w, s);
    free(s);
    jw_key(w, "timer_resolution_ns");
    jw_int(w, (long long)cl_device_ulong(d, CL_DEVICE_PROFILING_TIMER_RESOLUTION));
    jw_obj_end(w);
}

int cl_list_pairs(cl_platform_id *plats, cl_device_id *devs, int cap)
{
    cl_pair all[64];
    int n = list_devices(all, cap < 64 ? cap : 64);
    for (int i = 0; i < n; i++) { plats[i] = all[i].p; devs[i] = all[i].d; }
    return n;
}
