/* Loading Vulkan with dlopen, error names, device selection and the device's JSON. */
#define _POSIX_C_SOURCE 200809L
#include "vk_api.h"

#if HAVE_VULKAN
#include "util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

vk_api VK;
static char g_loaded[512];

const char *vk_loaded_path(void) { return g_loaded; }

const char *vk_result_name(VkResult r)
{
    switch (r) {
#define N(x) case x: return #x;
    N(VK_SUCCESS) N(VK_NOT_READY) N(VK_TIMEOUT) N(VK_INCOMPLETE)
    N(VK_ERROR_OUT_OF_HOST_MEMORY) N(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    N(VK_ERROR_INITIALIZATION_FAILED) N(VK_ERROR_DEVICE_LOST) N(VK_ERROR_MEMORY_MAP_FAILED)
    N(VK_ERROR_LAYER_NOT_PRESENT) N(VK_ERROR_EXTENSION_NOT_PRESENT)
    N(VK_ERROR_FEATURE_NOT_PRESENT) N(VK_ERROR_INCOMPATIBLE_DRIVER) N(VK_ERROR_TOO_MANY_OBJECTS)
    N(VK_ERROR_FORMAT_NOT_SUPPORTED) N(VK_ERROR_FRAGMENTED_POOL) N(VK_ERROR_UNKNOWN)
    N(VK_ERROR_OUT_OF_POOL_MEMORY) N(VK_ERROR_INVALID_SHADER_NV)
#undef N
    default: return "VK_ERROR_(unnamed)";
    }
}

_Noreturn void vk_fail(const char *call, VkResult r, const char *ctx)
{
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        fail(EXIT_OUT_OF_MEMORY, "out of device memory: %s returned %s (%d) %s", call,
             vk_result_name(r), (int)r, ctx);
    fail(EXIT_CL_RUNTIME, "Vulkan error: %s returned %s (%d) during %s", call, vk_result_name(r),
         (int)r, ctx);
}

/* explicit_path, else the first of libvulkan.so.1, libvulkan.so that loads; NULL with
 * `tried` listing what was tried when none does. */
static void *try_library(const char *explicit_path, char *tried, size_t tried_len)
{
    static const char *search[] = {"libvulkan.so.1", "libvulkan.so"};
    const char *paths[3];
    int n = 0;
    tried[0] = 0;
    if (explicit_path) paths[n++] = explicit_path;
    for (size_t i = 0; i < sizeof search / sizeof *search && !explicit_path; i++)
        paths[n++] = search[i];   /* an explicit path is the only one tried (as --cl-lib) */
    for (int i = 0; i < n; i++) {
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(g_loaded, sizeof g_loaded, "%s", paths[i]);
            return h;
        }
        size_t len = strlen(tried);
        snprintf(tried + len, tried_len - len, "%s%s", len ? ", " : "", paths[i]);
    }
    return NULL;
}

static void *load_library(const char *explicit_path)
{
    char tried[1024] = "";
    void *h = try_library(explicit_path, tried, sizeof tried);
    if (h) return h;
    fail(EXIT_NO_LIBRARY, "no Vulkan library: tried %s; install the Vulkan loader and a "
         "driver (Debian: libvulkan1 mesa-vulkan-drivers) or pass --vk-lib PATH", tried);
}

static int type_matches(const VkPhysicalDeviceProperties *p, const char *type)
{
    int gpu = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
              p->deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
              p->deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
    if (!type || !strcasecmp(type, "all")) return 1;
    if (!strcasecmp(type, "gpu")) return gpu;
    if (!strcasecmp(type, "cpu")) return p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    return 0;
}

static int name_matches(const char *name, const char *want)
{
    if (!want || !*want) return 1;
    size_t n = strlen(want);
    for (const char *s = name; *s; s++)
        if (!strncasecmp(s, want, n)) return 1;
    return 0;
}

static void create_instance(vk_device *d)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "phonetrain-runner",
                             .apiVersion = VK_API_VERSION_1_0};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    VkResult r = VK.vkCreateInstance(&ci, NULL, &d->instance);
    if (r != VK_SUCCESS)
        fail(EXIT_NO_LIBRARY, "no Vulkan driver: vkCreateInstance returned %s with %s; install "
             "a Vulkan driver (Debian: mesa-vulkan-drivers)", vk_result_name(r), g_loaded);
#define LOAD(f) VK.f = (PFN_##f)VK.vkGetInstanceProcAddr(d->instance, #f); \
    if (!VK.f) fail(EXIT_NO_DEVICE, "%s has no entry point " #f, g_loaded);
    VK_INSTANCE_FNS(LOAD)
#undef LOAD
}

/* The physical device the selector picks; fails listing every device seen. */
static void pick(vk_device *d, const char *name, const char *type)
{
    VkPhysicalDevice devs[16];
    uint32_t n = 16;
    VkResult r = VK.vkEnumeratePhysicalDevices(d->instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) vk_fail("vkEnumeratePhysicalDevices", r, "setup");
    if (n == 0)   /* a loader without a driver: the device has no Vulkan (a run is skipped) */
        fail(EXIT_NO_LIBRARY, "no Vulkan device: %s found no physical device; install a Vulkan "
             "driver (Debian: mesa-vulkan-drivers)", g_loaded);
    int best = -1;
    char seen[1024] = "";
    for (int pass = 0; pass < 2 && best < 0; pass++)   /* no type: a GPU first, then any */
        for (uint32_t i = 0; i < n && best < 0; i++) {
            VkPhysicalDeviceProperties p;
            VK.vkGetPhysicalDeviceProperties(devs[i], &p);
            const char *t = type ? type : pass == 0 ? "gpu" : "all";
            if (name_matches(p.deviceName, name) && type_matches(&p, t)) best = (int)i;
            if (pass == 0) {
                size_t len = strlen(seen);
                snprintf(seen + len, sizeof seen - len, "%s\"%s\"", len ? ", " : "", p.deviceName);
            }
        }
    if (best < 0)
        fail(EXIT_NO_DEVICE, "no Vulkan device matches (device \"%s\", type \"%s\"); devices: %s",
             name ? name : "", type ? type : "", n ? seen : "none");
    d->phys = devs[best];
    VK.vkGetPhysicalDeviceProperties(d->phys, &d->props);
    VK.vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
}

/* The compute queue family the runner uses (one without graphics first), -1 when none. */
static int compute_family(VkPhysicalDevice phys, uint32_t *timestamp_bits)
{
    VkQueueFamilyProperties fam[16];
    uint32_t nf = 16;
    VK.vkGetPhysicalDeviceQueueFamilyProperties(phys, &nf, fam);
    int pickf = -1;
    for (uint32_t i = 0; i < nf; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            if (pickf < 0 || !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) pickf = (int)i;
    *timestamp_bits = pickf < 0 ? 0 : fam[pickf].timestampValidBits;
    return pickf;
}

static void create_device(vk_device *d)
{
    int pickf = compute_family(d->phys, &d->timestamp_bits);
    if (pickf < 0)
        fail(EXIT_NO_DEVICE, "Vulkan device \"%s\" has no compute queue", d->props.deviceName);
    d->family = (uint32_t)pickf;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = d->family, .queueCount = 1,
                                 .pQueuePriorities = &prio};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &q};
    VK_CHECK(VK.vkCreateDevice(d->phys, &ci, NULL, &d->device), "setup");
#define LOAD(f) VK.f = (PFN_##f)VK.vkGetDeviceProcAddr(d->device, #f); \
    if (!VK.f) fail(EXIT_NO_DEVICE, "%s has no device entry point " #f, g_loaded);
    VK_DEVICE_FNS(LOAD)
#undef LOAD
    VK.vkGetDeviceQueue(d->device, d->family, 0, &d->queue);
}

void vk_open_device(const char *lib, const char *name, const char *type, vk_device *out)
{
    memset(out, 0, sizeof *out);
    void *h = load_library(lib);
    VK.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(h, "vkGetInstanceProcAddr");
    if (!VK.vkGetInstanceProcAddr)
        fail(EXIT_NO_DEVICE, "%s exports no vkGetInstanceProcAddr: not a Vulkan loader", g_loaded);
    VK.vkCreateInstance = (PFN_vkCreateInstance)VK.vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    if (!VK.vkCreateInstance) fail(EXIT_NO_DEVICE, "%s has no vkCreateInstance", g_loaded);
    create_instance(out);
    pick(out, name, type);
    create_device(out);
}

int vk_write_devices_json(jwriter *w, const char *lib, char *err, size_t errlen)
{
    char tried[1024] = "";
    void *h = try_library(lib, tried, sizeof tried);
    if (!h) {
        snprintf(err, errlen, "no Vulkan library: tried %s; install the Vulkan loader and a "
                 "driver (Debian: libvulkan1 mesa-vulkan-drivers)", tried);
        return -1;
    }
    VK.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(h, "vkGetInstanceProcAddr");
    VK.vkCreateInstance = VK.vkGetInstanceProcAddr
        ? (PFN_vkCreateInstance)VK.vkGetInstanceProcAddr(NULL, "vkCreateInstance") : NULL;
    vk_device d;
    memset(&d, 0, sizeof d);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "phonetrain-runner",
                             .apiVersion = VK_API_VERSION_1_0};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    VkResult r = VK.vkCreateInstance ? VK.vkCreateInstance(&ci, NULL, &d.instance)
                                     : VK_ERROR_INITIALIZATION_FAILED;
    if (r != VK_SUCCESS) {
        snprintf(err, errlen, "no Vulkan device: vkCreateInstance returned %s with %s; install "
                 "a Vulkan driver (Debian: mesa-vulkan-drivers)", vk_result_name(r), g_loaded);
        return -1;
    }
#define LOAD(f) VK.f = (PFN_##f)VK.vkGetInstanceProcAddr(d.instance, #f);
    VK_INSTANCE_FNS(LOAD)
#undef LOAD
    VkPhysicalDevice devs[16];
    uint32_t n = 16;
    r = VK.vkEnumeratePhysicalDevices(d.instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) n = 0;
    for (uint32_t i = 0; i < n; i++) {
        d.phys = devs[i];
        VK.vkGetPhysicalDeviceProperties(d.phys, &d.props);
        VK.vkGetPhysicalDeviceMemoryProperties(d.phys, &d.mem);
        int fam = compute_family(d.phys, &d.timestamp_bits);
        if (fam < 0) continue;   /* no compute queue: not a device the runner can use */
        d.family = (uint32_t)fam;
        vk_write_device_json(w, &d);
    }
    VK.vkDestroyInstance(d.instance, NULL);
    return 0;
}

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated_gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete_gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual_gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static void memory_json(jwriter *w, const VkPhysicalDeviceMemoryProperties *m)
{
    static const struct { VkMemoryPropertyFlags bit; const char *name; } flags[] = {
        {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device_local"},
        {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "host_visible"},
        {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "host_coherent"},
        {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "host_cached"},
        {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "lazily_allocated"}};
    int zero_copy = 0;
    jw_key(w, "memory_heaps");
    jw_arr_begin(w);
    for (uint32_t i = 0; i < m->memoryHeapCount; i++) {
        jw_obj_begin(w);
        jw_key(w, "size_bytes"); jw_int(w, (long long)m->memoryHeaps[i].size);
        jw_key(w, "device_local");
        jw_bool(w, (m->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_key(w, "memory_types");
    jw_arr_begin(w);
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = m->memoryTypes[i].propertyFlags;
        jw_obj_begin(w);
        jw_key(w, "heap"); jw_int(w, m->memoryTypes[i].heapIndex);
        jw_key(w, "flags");
        jw_arr_begin(w);
        for (size_t k = 0; k < sizeof flags / sizeof *flags; k++)
            if (f & flags[k].bit) jw_str(w, flags[k].name);
        jw_arr_end(w);
        jw_obj_end(w);
        const VkMemoryPropertyFlags both = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                           VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
        if ((f & both) == both) zero_copy = 1;
    }
    jw_arr_end(w);
    jw_key(w, "host_visible_device_local"); jw_bool(w, zero_copy);
}

void vk_write_device_json(jwriter *w, const vk_device *d)
{
    const VkPhysicalDeviceProperties *p = &d->props;
    const VkPhysicalDeviceLimits *l = &p->limits;
    char api[32];
    snprintf(api, sizeof api, "%u.%u.%u", VK_API_VERSION_MAJOR(p->apiVersion),
             VK_API_VERSION_MINOR(p->apiVersion), VK_API_VERSION_PATCH(p->apiVersion));
    jw_obj_begin(w);
    jw_key(w, "api"); jw_str(w, "vulkan");
    jw_key(w, "name"); jw_str(w, p->deviceName);
    jw_key(w, "type"); jw_str(w, type_name(p->deviceType));
    jw_key(w, "api_version"); jw_str(w, api);
    jw_key(w, "driver_version"); jw_int(w, p->driverVersion);
    jw_key(w, "vendor_id"); jw_int(w, p->vendorID);
    jw_key(w, "device_id"); jw_int(w, p->deviceID);
    jw_key(w, "library"); jw_str(w, g_loaded);
    jw_key(w, "queue_family"); jw_int(w, d->family);
    jw_key(w, "timestamp_valid_bits"); jw_int(w, d->timestamp_bits);
    jw_key(w, "timestamp_period_ns"); jw_num(w, l->timestampPeriod);
    jw_key(w, "max_compute_work_group_invocations"); jw_int(w, l->maxComputeWorkGroupInvocations);
    jw_key(w, "max_compute_work_group_size");
    jw_arr_begin(w);
    for (int i = 0; i < 3; i++) jw_int(w, l->maxComputeWorkGroupSize[i]);
    jw_arr_end(w);
    jw_key(w, "max_compute_work_group_count");
    jw_arr_begin(w);
    for (int i = 0; i < 3; i++) jw_int(w, l->maxComputeWorkGroupCount[i]);
    jw_arr_end(w);
    jw_key(w, "max_compute_shared_memory_bytes"); jw_int(w, l->maxComputeSharedMemorySize);
    jw_key(w, "max_push_constants_bytes"); jw_int(w, l->maxPushConstantsSize);
    jw_key(w, "max_storage_buffer_range_bytes"); jw_int(w, l->maxStorageBufferRange);
    memory_json(w, &d->mem);
    jw_obj_end(w);
}
#endif
