/* Vulkan, loaded at run time: libvulkan is dlopen'd (the system loader on Linux,
 * libvulkan.so on Android) and every entry point is fetched through vkGetInstanceProcAddr /
 * vkGetDeviceProcAddr, so the runner links nothing of Vulkan at build time. The types come
 * from the Khronos headers with VK_NO_PROTOTYPES: the Android NDK ships them; Debian's
 * aarch64 cross gcc searches /usr/include (libvulkan-dev's architecture-independent headers)
 * after its own. A build without the headers compiles the backend out: HAVE_VULKAN is 0 and
 * a Vulkan plan exits with EXIT_NO_LIBRARY saying so. */
#ifndef PHONETRAIN_VK_API_H
#define PHONETRAIN_VK_API_H

#if defined(__has_include)
#if __has_include(<vulkan/vulkan_core.h>)
#define HAVE_VULKAN 1
#endif
#endif
#ifndef HAVE_VULKAN
#define HAVE_VULKAN 0
#endif

#include "json.h"

#if HAVE_VULKAN
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan_core.h>

#define VK_GLOBAL_FNS(X) X(vkCreateInstance)
#define VK_INSTANCE_FNS(X) X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) \
    X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define VK_DEVICE_FNS(X) X(vkGetDeviceQueue) X(vkCreateBuffer) \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkBindBufferMemory) X(vkMapMemory) \
    X(vkFlushMappedMemoryRanges) X(vkInvalidateMappedMemoryRanges) X(vkCreateShaderModule) \
    X(vkCreateDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkCreateComputePipelines) \
    X(vkCreateDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) \
    X(vkCreateCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) \
    X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline) \
    X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdCopyBuffer) \
    X(vkCmdPipelineBarrier) X(vkCmdWriteTimestamp) X(vkCmdResetQueryPool) \
    X(vkCreateQueryPool) X(vkGetQueryPoolResults) X(vkQueueSubmit) X(vkCreateFence) \
    X(vkWaitForFences) X(vkResetFences) X(vkDeviceWaitIdle)

#define VK_DECLARE(f) PFN_##f f;
typedef struct {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    VK_GLOBAL_FNS(VK_DECLARE)
    VK_INSTANCE_FNS(VK_DECLARE)
    VK_DEVICE_FNS(VK_DECLARE)
} vk_api;
#undef VK_DECLARE

extern vk_api VK;   /* entry points, valid after vk_open_device() */

/* The chosen device: instance, physical device, its properties, the compute queue family. */
typedef struct {
    VkInstance instance;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem;
    uint32_t family;                 /* a queue family with VK_QUEUE_COMPUTE_BIT */
    uint32_t timestamp_bits;         /* its timestampValidBits (0: no timestamps) */
    VkDevice device;
    VkQueue queue;
} vk_device;

const char *vk_result_name(VkResult r);

/* Fails with EXIT_CL_RUNTIME (a GPU API runtime error) naming the call, the VkResult and
 * the context; out-of-memory results fail with EXIT_OUT_OF_MEMORY. */
_Noreturn void vk_fail(const char *call, VkResult r, const char *ctx);
#define VK_CHECK(call, ctx) do { VkResult _r = (call); if (_r != VK_SUCCESS) \
    vk_fail(#call, _r, ctx); } while (0)

/* Loads libvulkan (`lib`, else libvulkan.so.1, libvulkan.so), creates an instance, picks the
 * physical device (`name`: case-insensitive substring of the device name or NULL; `type`:
 * "gpu", "cpu", "all" or NULL = the first GPU, else the first device) and creates a logical
 * device with one compute queue. Fails with EXIT_NO_LIBRARY when there is no Vulkan at all
 * (no library, no driver, no physical device: a run is recorded skipped), EXIT_NO_DEVICE
 * listing the devices seen when none matches the selector. */
void vk_open_device(const char *lib, const char *name, const char *type, vk_device *out);

const char *vk_loaded_path(void);

/* Appends one vk_write_device_json object per physical device with a compute queue (the
 * info mode's "vulkan_devices"; no logical device is created). Returns 0, or -1 with `err`
 * saying why when no library loads or no instance can be created. */
int vk_write_devices_json(jwriter *w, const char *lib, char *err, size_t errlen);

/* The device's JSON object: name, type, API and driver versions, the compute limits, the
 * timestamp period, memory heaps and types (their property flags by name) and
 * "host_visible_device_local": whether a memory type is both (zero-copy mapping). */
void vk_write_device_json(jwriter *w, const vk_device *d);
#endif

#endif
