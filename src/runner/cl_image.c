/* image2d_t views of tensors (cl_image.h). */
#include "cl_image.h"

#include <stdlib.h>
#include <string.h>

#include "cl_loader.h"

size_t image_rows(long numel, int width4)
{
    size_t row = (size_t)width4 * 4;
    return ((size_t)numel + row - 1) / row;
}

size_t image_alloc_bytes(long numel, int width4)
{
    return (size_t)width4 * 16 * image_rows(numel, width4);
}

const char *image_unsupported(cl_device_id d, long numel, int width4)
{
    if (!cl_device_ulong(d, CL_DEVICE_IMAGE_SUPPORT))
        return "the device has no image support (CL_DEVICE_IMAGE_SUPPORT is false)";
    if (width4 < 1 || (size_t)width4 > cl_device_ulong(d, CL_DEVICE_IMAGE2D_MAX_WIDTH))
        return "image_width4 exceeds the device's CL_DEVICE_IMAGE2D_MAX_WIDTH";
    if (image_rows(numel, width4) > cl_device_ulong(d, CL_DEVICE_IMAGE2D_MAX_HEIGHT))
        return "the tensor needs more image rows than CL_DEVICE_IMAGE2D_MAX_HEIGHT; "
               "use a larger image_width4";
    return NULL;
}

/* cl_khr_image2d_from_buffer is core (and mandatory with images) in OpenCL 2.x only. */
static int shares_buffer(cl_device_id d, int width4)
{
    char *ext = cl_device_str(d, CL_DEVICE_EXTENSIONS), *ver = cl_device_str(d, CL_DEVICE_VERSION);
    int ok = strstr(ext, "cl_khr_image2d_from_buffer") || !strncmp(ver, "OpenCL 2.", 9);
    free(ext);
    free(ver);
    cl_ulong pitch = cl_device_ulong(d, CL_DEVICE_IMAGE_PITCH_ALIGNMENT);   /* in pixels */
    return ok && (pitch == 0 || (cl_ulong)width4 % pitch == 0);
}

cl_int image_view_make(cl_context ctx, cl_device_id d, cl_mem buffer, long numel, int width4,
                       cl_image_view *v)
{
    cl_image_format fmt = {CL_RGBA, CL_FLOAT};
    cl_image_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = v->width = (size_t)width4;
    desc.image_height = v->height = image_rows(numel, width4);
    cl_int e = CL_SUCCESS;
    if (shares_buffer(d, width4)) {
        desc.image_row_pitch = (size_t)width4 * 16;
        desc.buffer = buffer;
        v->image = CL.clCreateImage(ctx, CL_MEM_READ_ONLY, &fmt, &desc, NULL, &e);
        v->copied = 0;
        if (e == CL_SUCCESS) return e;   /* else (e.g. base address misaligned): copy instead */
    }
    memset(&desc, 0, sizeof desc);
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = v->width;
    desc.image_height = v->height;
    v->image = CL.clCreateImage(ctx, CL_MEM_READ_ONLY, &fmt, &desc, NULL, &e);
    v->copied = 1;
    return e;
}

cl_int image_view_refresh(cl_command_queue q, cl_mem buffer, const cl_image_view *v, cl_event *ev)
{
    *ev = NULL;
    if (!v->copied) return CL_SUCCESS;
    const size_t origin[3] = {0, 0, 0}, region[3] = {v->width, v->height, 1};
    return CL.clEnqueueCopyBufferToImage(q, buffer, v->image, 0, origin, region, 0, NULL, ev);
}
