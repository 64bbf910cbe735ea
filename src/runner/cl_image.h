/* image2d_t views of tensors, for kernels that read an operand through the texture path
 * (src/kernels/image). A view is CL_RGBA / CL_FLOAT, `width4` pixels (4 floats each) per row and
 * ceil(numel / (4 * width4)) rows over the buffer's floats in row-major order: float i of the
 * buffer is component i % 4 of pixel i / 4, at (x, y) = ((i / 4) % width4, (i / 4) / width4).
 * The buffer must hold image_alloc_bytes() bytes, the tail after the tensor zero-filled. */
#ifndef PHONETRAIN_CL_IMAGE_H
#define PHONETRAIN_CL_IMAGE_H

#include "cl_api.h"

typedef struct {
    cl_mem image;
    int copied;          /* 1: a separate image refreshed by image_view_refresh; 0: a view */
    size_t width, height;
} cl_image_view;

size_t image_rows(long numel, int width4);
size_t image_alloc_bytes(long numel, int width4);   /* width4 * 16 * image_rows */

/* NULL if device d can hold a width4-wide view of numel floats, else why not (static text). */
const char *image_unsupported(cl_device_id d, long numel, int width4);

/* Makes the view of `buffer` (image_alloc_bytes long): a view sharing its storage where the
 * device has cl_khr_image2d_from_buffer (or OpenCL 2.x) and the row pitch meets its alignment,
 * else a separate read-only image that image_view_refresh fills. Returns the cl_int status. */
cl_int image_view_make(cl_context ctx, cl_device_id d, cl_mem buffer, long numel, int width4,
                       cl_image_view *v);

/* For a copied view, enqueues clEnqueueCopyBufferToImage of the whole image (event in *ev);
 * for a shared view, does nothing (*ev = NULL). */
cl_int image_view_refresh(cl_command_queue q, cl_mem buffer, const cl_image_view *v, cl_event *ev);

#endif
