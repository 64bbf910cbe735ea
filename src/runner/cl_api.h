/* The OpenCL types, constants and entry points the runner uses, declared from the
 * OpenCL 1.2 specification (Khronos, rev. 19, sections 4-5 and appendix on error codes);
 * the image pitch/base-address alignment queries are OpenCL 2.0's (section 4.2).
 * No vendor header is needed: the library is loaded with dlopen (cl_loader.c). On Linux and
 * Android CL_API_CALL is the default C calling convention. */
#ifndef PHONETRAIN_CL_API_H
#define PHONETRAIN_CL_API_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_uint cl_bool;
typedef cl_ulong cl_bitfield;
typedef cl_bitfield cl_device_type;
typedef cl_bitfield cl_mem_flags;
typedef cl_bitfield cl_map_flags;
typedef cl_bitfield cl_command_queue_properties;
typedef cl_uint cl_platform_info;
typedef cl_uint cl_device_info;
typedef cl_uint cl_program_info;
typedef cl_uint cl_program_build_info;
typedef cl_uint cl_kernel_work_group_info;
typedef cl_uint cl_profiling_info;
typedef intptr_t cl_context_properties;
typedef cl_uint cl_channel_order;
typedef cl_uint cl_channel_type;
typedef cl_uint cl_mem_object_type;

typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

/* Image format and descriptor (OpenCL 1.2 section 5.3.1; 2.0 renames `buffer` to the union
 * member `mem_object`, same layout). A 2D image with `buffer` set is a view of that buffer
 * (cl_khr_image2d_from_buffer / OpenCL 2.0). */
typedef struct {
    cl_channel_order image_channel_order;
    cl_channel_type image_channel_data_type;
} cl_image_format;

typedef struct {
    cl_mem_object_type image_type;
    size_t image_width, image_height, image_depth, image_array_size;
    size_t image_row_pitch, image_slice_pitch;
    cl_uint num_mip_levels, num_samples;
    cl_mem buffer;
} cl_image_desc;

#define CL_SUCCESS 0
#define CL_DEVICE_NOT_FOUND (-1)
#define CL_BUILD_PROGRAM_FAILURE (-11)
#define CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)
#define CL_OUT_OF_RESOURCES (-5)
#define CL_OUT_OF_HOST_MEMORY (-6)
#define CL_INVALID_BUFFER_SIZE (-61)
#define CL_PLATFORM_NOT_FOUND_KHR (-1001)
#define CL_FALSE 0
#define CL_TRUE 1

/* cl_platform_info */
#define CL_PLATFORM_PROFILE 0x0900
#define CL_PLATFORM_VERSION 0x0901
#define CL_PLATFORM_NAME 0x0902
#define CL_PLATFORM_VENDOR 0x0903
#define CL_PLATFORM_EXTENSIONS 0x0904

/* cl_device_type */
#define CL_DEVICE_TYPE_DEFAULT (1u << 0)
#define CL_DEVICE_TYPE_CPU (1u << 1)
#define CL_DEVICE_TYPE_GPU (1u << 2)
#define CL_DEVICE_TYPE_ACCELERATOR (1u << 3)
#define CL_DEVICE_TYPE_CUSTOM (1u << 4)
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFu

/* cl_device_info */
#define CL_DEVICE_TYPE 0x1000
#define CL_DEVICE_MAX_COMPUTE_UNITS 0x1002
#define CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS 0x1003
#define CL_DEVICE_MAX_WORK_GROUP_SIZE 0x1004
#define CL_DEVICE_MAX_WORK_ITEM_SIZES 0x1005
#define CL_DEVICE_MAX_CLOCK_FREQUENCY 0x100C
#define CL_DEVICE_MAX_MEM_ALLOC_SIZE 0x1010
#define CL_DEVICE_IMAGE_SUPPORT 0x1016
#define CL_DEVICE_IMAGE2D_MAX_WIDTH 0x1011
#define CL_DEVICE_IMAGE2D_MAX_HEIGHT 0x1012
#define CL_DEVICE_GLOBAL_MEM_CACHE_SIZE 0x101E
#define CL_DEVICE_GLOBAL_MEM_SIZE 0x101F
#define CL_DEVICE_LOCAL_MEM_SIZE 0x1023
#define CL_DEVICE_PROFILING_TIMER_RESOLUTION 0x1025
#define CL_DEVICE_NAME 0x102B
#define CL_DEVICE_VENDOR 0x102C
#define CL_DRIVER_VERSION 0x102D
#define CL_DEVICE_PROFILE 0x102E
#define CL_DEVICE_VERSION 0x102F
#define CL_DEVICE_EXTENSIONS 0x1030
#define CL_DEVICE_HOST_UNIFIED_MEMORY 0x1035
#define CL_DEVICE_OPENCL_C_VERSION 0x103D
#define CL_DEVICE_IMAGE_PITCH_ALIGNMENT 0x104A          /* OpenCL 2.0 / image2d_from_buffer */
#define CL_DEVICE_IMAGE_BASE_ADDRESS_ALIGNMENT 0x104B

/* cl_command_queue_properties */
#define CL_QUEUE_PROFILING_ENABLE (1u << 1)

/* cl_mem_flags */
#define CL_MEM_READ_WRITE (1u << 0)
#define CL_MEM_READ_ONLY (1u << 2)
#define CL_MEM_ALLOC_HOST_PTR (1u << 4)

/* cl_channel_order, cl_channel_type, cl_mem_object_type */
#define CL_RGBA 0x10B5
#define CL_FLOAT 0x10DE
#define CL_MEM_OBJECT_IMAGE2D 0x10F1

/* cl_map_flags */
#define CL_MAP_READ (1u << 0)
#define CL_MAP_WRITE (1u << 1)
#define CL_MAP_WRITE_INVALIDATE_REGION (1u << 2)

/* cl_program_info, cl_program_build_info */
#define CL_PROGRAM_BINARY_SIZES 0x1165
#define CL_PROGRAM_BUILD_LOG 0x1183

/* cl_kernel_work_group_info */
#define CL_KERNEL_WORK_GROUP_SIZE 0x11B0

/* cl_profiling_info */
#define CL_PROFILING_COMMAND_QUEUED 0x1280
#define CL_PROFILING_COMMAND_SUBMIT 0x1281
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283

typedef void (*cl_notify_fn)(const char *, const void *, size_t, void *);
typedef void (*cl_build_notify_fn)(cl_program, void *);

/* Entry points, as function-pointer types (X-macro: return type, name, parameters). */
#define CL_FUNCTIONS(X) \
    X(cl_int, clGetPlatformIDs, (cl_uint, cl_platform_id *, cl_uint *)) \
    X(cl_int, clGetPlatformInfo, (cl_platform_id, cl_platform_info, size_t, void *, size_t *)) \
    X(cl_int, clGetDeviceIDs, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *)) \
    X(cl_int, clGetDeviceInfo, (cl_device_id, cl_device_info, size_t, void *, size_t *)) \
    X(cl_context, clCreateContext, (const cl_context_properties *, cl_uint, const cl_device_id *, \
                                    cl_notify_fn, void *, cl_int *)) \
    X(cl_int, clReleaseContext, (cl_context)) \
    X(cl_command_queue, clCreateCommandQueue, (cl_context, cl_device_id, \
                                               cl_command_queue_properties, cl_int *)) \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue)) \
    X(cl_mem, clCreateBuffer, (cl_context, cl_mem_flags, size_t, void *, cl_int *)) \
    X(cl_int, clReleaseMemObject, (cl_mem)) \
    X(cl_mem, clCreateImage, (cl_context, cl_mem_flags, const cl_image_format *, \
                              const cl_image_desc *, void *, cl_int *)) \
    X(cl_program, clCreateProgramWithSource, (cl_context, cl_uint, const char **, const size_t *, \
                                              cl_int *)) \
    X(cl_int, clBuildProgram, (cl_program, cl_uint, const cl_device_id *, const char *, \
                               cl_build_notify_fn, void *)) \
    X(cl_int, clGetProgramInfo, (cl_program, cl_program_info, size_t, void *, size_t *)) \
    X(cl_int, clGetProgramBuildInfo, (cl_program, cl_device_id, cl_program_build_info, size_t, \
                                      void *, size_t *)) \
    X(cl_int, clReleaseProgram, (cl_program)) \
    X(cl_kernel, clCreateKernel, (cl_program, const char *, cl_int *)) \
    X(cl_int, clSetKernelArg, (cl_kernel, cl_uint, size_t, const void *)) \
    X(cl_int, clGetKernelWorkGroupInfo, (cl_kernel, cl_device_id, cl_kernel_work_group_info, \
                                         size_t, void *, size_t *)) \
    X(cl_int, clReleaseKernel, (cl_kernel)) \
    X(cl_int, clEnqueueNDRangeKernel, (cl_command_queue, cl_kernel, cl_uint, const size_t *, \
                                       const size_t *, const size_t *, cl_uint, const cl_event *, \
                                       cl_event *)) \
    X(cl_int, clEnqueueWriteBuffer, (cl_command_queue, cl_mem, cl_bool, size_t, size_t, \
                                     const void *, cl_uint, const cl_event *, cl_event *)) \
    X(cl_int, clEnqueueReadBuffer, (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, \
                                    cl_uint, const cl_event *, cl_event *)) \
    X(cl_int, clEnqueueCopyBuffer, (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, \
                                    cl_uint, const cl_event *, cl_event *)) \
    X(cl_int, clEnqueueCopyBufferToImage, (cl_command_queue, cl_mem, cl_mem, size_t, \
                                           const size_t *, const size_t *, cl_uint, \
                                           const cl_event *, cl_event *)) \
    X(void *, clEnqueueMapBuffer, (cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, \
                                   size_t, cl_uint, const cl_event *, cl_event *, cl_int *)) \
    X(cl_int, clEnqueueUnmapMemObject, (cl_command_queue, cl_mem, void *, cl_uint, \
                                        const cl_event *, cl_event *)) \
    X(cl_int, clFinish, (cl_command_queue)) \
    X(cl_int, clFlush, (cl_command_queue)) \
    X(cl_int, clWaitForEvents, (cl_uint, const cl_event *)) \
    X(cl_int, clGetEventProfilingInfo, (cl_event, cl_profiling_info, size_t, void *, size_t *)) \
    X(cl_int, clReleaseEvent, (cl_event)) \
    X(void *, clGetExtensionFunctionAddressForPlatform, (cl_platform_id, const char *))

/* cl_khr_command_buffer (Khronos OpenCL Extension Specification, provisional 0.9.x): a
 * sequence of commands recorded once and enqueued as one. Its entry points are looked up with
 * clGetExtensionFunctionAddressForPlatform; the parameter lists are those of revisions 0.9.0
 * to 0.9.5 (0.9.5 renames the properties type, same layout). */
typedef struct _cl_command_buffer_khr *cl_command_buffer_khr;
typedef cl_uint cl_sync_point_khr;
typedef cl_bitfield cl_command_buffer_properties_khr;
typedef cl_bitfield cl_ndrange_kernel_command_properties_khr;
typedef struct _cl_mutable_command_khr *cl_mutable_command_khr;
typedef cl_command_buffer_khr (*cl_create_command_buffer_khr_fn)(
    cl_uint, const cl_command_queue *, const cl_command_buffer_properties_khr *, cl_int *);
typedef cl_int (*cl_command_ndrange_kernel_khr_fn)(
    cl_command_buffer_khr, cl_command_queue, const cl_ndrange_kernel_command_properties_khr *,
    cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,
    const cl_sync_point_khr *, cl_sync_point_khr *, cl_mutable_command_khr *);
typedef cl_int (*cl_finalize_command_buffer_khr_fn)(cl_command_buffer_khr);
typedef cl_int (*cl_enqueue_command_buffer_khr_fn)(cl_uint, cl_command_queue *,
                                                   cl_command_buffer_khr, cl_uint,
                                                   const cl_event *, cl_event *);
typedef cl_int (*cl_release_command_buffer_khr_fn)(cl_command_buffer_khr);
/* clGetCommandBufferInfoKHR with CL_COMMAND_BUFFER_STATE_KHR: a buffer enqueued without the
 * simultaneous-use flag may be enqueued again only once it left the Pending state. */
typedef cl_int (*cl_get_command_buffer_info_khr_fn)(cl_command_buffer_khr, cl_uint, size_t, void *,
                                                    size_t *);
#ifndef CL_COMMAND_BUFFER_STATE_KHR
#define CL_COMMAND_BUFFER_STATE_KHR 0x1297
#endif
#ifndef CL_COMMAND_BUFFER_STATE_PENDING_KHR
#define CL_COMMAND_BUFFER_STATE_PENDING_KHR 2
#endif

#define CL_DECLARE_PTR(ret, name, params) ret (*name) params;
typedef struct { CL_FUNCTIONS(CL_DECLARE_PTR) } cl_api;
#undef CL_DECLARE_PTR

#endif
