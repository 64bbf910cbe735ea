/* info mode: every OpenCL platform and device with its properties, every Vulkan device
 * (properties, compute limits, memory heaps and types), plus CPU facts, as JSON. */
#define _POSIX_C_SOURCE 200809L
#include "modes.h"
#include "util.h"
#include "vk_api.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "model name" (x86), else "Hardware" or "Processor" (arm) from /proc/cpuinfo. */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    static const char *keys[] = {"model name", "Hardware", "Processor", "cpu model"};
    char line[512];
    int best = 4;   /* index of the key that gave `out`; lower is better */
    while (fgets(line, sizeof line, f)) {
        for (int k = 0; k < best; k++) {
            size_t kl = strlen(keys[k]);
            char *colon = strchr(line, ':');
            if (strncmp(line, keys[k], kl) || !colon || strspn(line + kl, " \t") != (size_t)(colon - line - (long)kl))
                continue;
            colon++;
            colon += strspn(colon, " \t");
            colon[strcspn(colon, "\n")] = '\0';
            if (*colon) { snprintf(out, n, "%s", colon); best = k; }
            break;
        }
    }
    fclose(f);
}

void write_host_json(jwriter *w)
{
    char model[256];
    cpu_model(model, sizeof model);
    jw_obj_begin(w);
    jw_key(w, "cpu_model"); jw_str(w, model);
    jw_key(w, "logical_cores"); jw_int(w, omp_get_num_procs());
    jw_obj_end(w);
}

void write_runner_json(jwriter *w)
{
    jw_obj_begin(w);
    jw_key(w, "version"); jw_str(w, RUNNER_VERSION);
    jw_key(w, "source_hash"); jw_str(w, RUNNER_SOURCE_HASH);
    jw_key(w, "opencl_library"); jw_str(w, cl_loaded_path());
    jw_obj_end(w);
}

void write_output(const char *dir, const char *name, const void *data, size_t len)
{
    char *path = path_join(dir, name);
    if (write_file_atomic(path, data, len) != 0)
        fail(EXIT_INTERNAL, "cannot write %s: %s", path, strerror(errno));
    free(path);
}

/* "vulkan_error" (null when a Vulkan instance was created) and "vulkan_devices". */
static void write_vulkan_devices(jwriter *w, const char *lib)
{
    char err[512] = "";
    jw_key(w, "vulkan_devices");
    jw_arr_begin(w);
#if HAVE_VULKAN
    int ok = vk_write_devices_json(w, lib, err, sizeof err) == 0;
#else
    (void)lib;
    int ok = 0;
    snprintf(err, sizeof err, "this runner was built without the Vulkan headers");
#endif
    jw_arr_end(w);
    jw_key(w, "vulkan_error"); jw_str(w, ok ? NULL : err);
}

int mode_info(const runner_opts *o)
{
    char err[512] = "";
    int loaded = cl_load(o->cl_lib, err, sizeof err) == 0;
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "host"); write_host_json(&w);
    jw_key(&w, "opencl_error"); jw_str(&w, loaded ? NULL : err);
    jw_key(&w, "platforms");
    jw_arr_begin(&w);
    cl_platform_id plats[16];
    cl_uint np = 0;
    if (loaded) {
        cl_int e = CL.clGetPlatformIDs(16, plats, &np);
        if (e != CL_SUCCESS) np = 0;   /* the ICD loader reports no platform as an error */
    }
    for (cl_uint i = 0; i < np && i < 16; i++) {
        jw_obj_begin(&w);
        char *s;
        s = cl_platform_str(plats[i], CL_PLATFORM_NAME); jw_key(&w, "name"); jw_str(&w, s); free(s);
        s = cl_platform_str(plats[i], CL_PLATFORM_VENDOR); jw_key(&w, "vendor"); jw_str(&w, s); free(s);
        s = cl_platform_str(plats[i], CL_PLATFORM_VERSION); jw_key(&w, "version"); jw_str(&w, s); free(s);
        s = cl_platform_str(plats[i], CL_PLATFORM_PROFILE); jw_key(&w, "profile"); jw_str(&w, s); free(s);
        jw_key(&w, "devices");
        jw_arr_begin(&w);
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (CL.clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) nd = 0;
        for (cl_uint j = 0; j < nd && j < 16; j++) cl_write_device_json(&w, plats[i], devs[j]);
        jw_arr_end(&w);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    write_vulkan_devices(&w, o->vk_lib);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    fwrite(w.buf, 1, w.len, stdout);
    jw_free(&w);
    return EXIT_OK;
}
