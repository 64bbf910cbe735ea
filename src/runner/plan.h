/* The plan (versions 1 and 2): loading, validation and initial tensor contents, exactly as
 * src/phonetrain/plan.py documents them. Version 2 adds per-step "queue" and "wait". */
#ifndef PHONETRAIN_PLAN_H
#define PHONETRAIN_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"

#define PLAN_VERSION 2        /* the newest version read; 1 is read too */
#define MAX_QUEUES 2
#define MAX_DIMS 8
#define MAX_KERNEL_ARGS 32

enum { INIT_ZEROS, INIT_FILE, INIT_UNIFORM };
enum { OP_KERNEL, OP_H2D, OP_D2H, OP_MAP, OP_UNMAP, OP_LOAD };
enum { BACKEND_CPU, BACKEND_OPENCL, BACKEND_VULKAN };

typedef struct {
    int id;
    char *name, *role;
    int ndim;
    long shape[MAX_DIMS];
    long numel;
    size_t size_bytes;       /* numel * 4 (f32 and i32 alike) */
    int is_i32;
    int home_device;         /* "home": "device" */
    int init_kind;
    char *init_path;         /* INIT_FILE, relative to the bundle root */
    uint64_t seed;           /* INIT_UNIFORM */
    double low, high;
    /* run-time state */
    void *host;              /* host copy, size_bytes */
    int needs_buffer;        /* touched by a kernel, h2d, d2h or map step */
    int needs_map;           /* touched by a map step: CL_MEM_ALLOC_HOST_PTR */
    void *mem;               /* cl_mem on the opencl backend; vk_store * on vulkan */
    void *mapped;            /* pointer returned by the last map, until unmap */
    void *pending_d2h;       /* cl_event of a non-blocking read into host, not yet waited for */
    int image_width4;        /* > 0: a kernel reads it as an image2d_t this wide (pixels) */
    void *image;             /* cl_image_view * on the opencl backend (cl_image.h) */
    char *batch_path;        /* batches[].path when this tensor is a per-iteration input */
    char *batch_data;        /* its batch_count consecutive batches, read at setup */
    long batch_count;
    int buffer;              /* index into plan buffers ("buffer": name), -1: its own storage */
} pt_tensor;

/* A shared buffer ("buffers": [{"name", "size_bytes"}]): every tensor naming it is stored at
 * offset 0 of one host allocation and one device buffer (the lowering gives one buffer only
 * to tensors whose lifetimes within an iteration do not overlap). */
typedef struct {
    char *name;
    size_t size_bytes;
    void *host;              /* the host allocation its tensors' host copies point into */
    void *mem;               /* cl_mem on the opencl backend, made once */
    void *pending_d2h;       /* cl_event of a non-blocking read into host, not yet waited for */
} pt_buffer;

typedef struct { char *name, *source, *options; } pt_program;

typedef struct {
    int op;
    int tensor;              /* transfers and load */
    int map_write;           /* map: 1 = "write" (host->mapped), 0 = "read" */
    char *name;              /* kernel name */
    rt_arg args[MAX_KERNEL_ARGS];
    int arg_tensor[MAX_KERNEL_ARGS];   /* tensor id for 't' args, else -1 */
    int arg_image[MAX_KERNEL_ARGS];    /* 1: {"t": id, "image_width4": W}, an image2d_t */
    int has_image;                     /* some argument is an image */
    int nargs;
    int work_dim;
    size_t global[3], local[3];
    int has_local;
    long long flops, bytes;
    char *layer, *phase;
    int queue;               /* v2: command queue index, 0 (compute) or 1 (transfers) */
    int *wait; int nwait;    /* v2: indices of earlier steps (same iteration) it waits for */
    void *kernel;            /* cl_kernel on the opencl backend */
    int external;            /* GEMM routed to CLBlast (program "source": "clblast") */
} pt_step;

typedef struct {
    char *path;              /* the plan file, for messages */
    char *name;
    int version;             /* plan_version as read: 1 or 2 */
    int nqueues;             /* 1 + the highest step queue index */
    int backend;
    pt_tensor *tensors; int ntensors;
    pt_program *programs; int nprograms;
    pt_step *steps; int nsteps;
    int warmup, iterations;
    int loss_tensor;         /* -1 = none */
    int *dumps; int ndumps;
    /* checkpoints: after each listed iteration (0-based, warm-up included; -1 = the last,
     * -2 = the one before) the runner keeps the contents of ckpt_tensors */
    int *ckpt_iters; int nckpt_iters;
    int *ckpt_tensors; int nckpt_tensors;
    pt_buffer *buffers; int nbuffers;   /* optional shared buffers; 0 = none */
} pt_plan;

/* Reads and validates a plan; any defect fails with EXIT_BAD_INPUT naming the file and key. */
pt_plan *plan_load(const char *path);

/* Allocates host copies, applies each tensor's init and reads batch files under `root`.
 * A missing, unreadable or wrong-sized bundle file fails with EXIT_BUNDLE. */
void plan_load_data(pt_plan *plan, const char *root);

/* Copies batch `iteration % count` of tensor `t` into its host copy. */
void plan_load_batch(pt_tensor *t, int iteration);

/* splitmix64 uniform fill, identical to phonetrain.plan.uniform_fill. */
void fill_uniform(float *out, long n, uint64_t seed, double low, double high);

const char *op_name(int op);
const char *step_kind(const pt_step *s);   /* trace "kind": kernel|h2d|d2h|map|unmap|host */

#endif
