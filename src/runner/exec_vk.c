/* Vulkan backend: the plan's steps recorded into command buffers on one compute queue, in
 * plan order, a full memory barrier between commands (the in-order semantics of the OpenCL
 * queue). A batch of recorded commands is submitted and waited for when the host needs its
 * results: before a download's copy out of its staging buffer, before a map, at the end of
 * the iteration. Each command is bracketed by two timestamp queries (device clock, ticks x
 * timestampPeriod); each batch starts with one more, the device time the batch began, which
 * is the rows' queued_ns/submit_ns (module README: "Vulkan").
 *
 * Memory (src/runner/README.md, "Vulkan"): every tensor a step touches gets a storage buffer
 * in a DEVICE_LOCAL type; a tensor an h2d/d2h step moves also gets a host-visible staging
 * buffer (h2d: memcpy into it, its own host row "staging_copy", then the copy command; d2h:
 * the copy command, the batch submitted and waited for, then the memcpy out, a
 * "staging_copy" row). A mapped tensor (transfer
 * map) lives in a HOST_VISIBLE type instead, DEVICE_LOCAL too where the device has such a
 * type (zero-copy), mapped once at setup; map and unmap steps are host rows. */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "util.h"
#include "vk_abi.h"
#include "vk_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_VULKAN

typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *ptr;               /* mapped pointer of a host-visible buffer, else NULL */
    int coherent;            /* HOST_COHERENT: no flush/invalidate needed */
} vk_buf;

typedef struct {             /* a tensor's storage (shared by the tensors of a plan buffer) */
    vk_buf dev;              /* the buffer kernels bind */
    vk_buf stage;            /* staging buffer of h2d/d2h steps (buf 0: none) */
    int stage_busy;          /* the open batch copies out of `stage` */
} vk_store;

typedef struct {
    int program;             /* plan program index (its SPIR-V) */
    uint32_t local[3];
    VkPipeline pipe;
    VkPipelineLayout layout;
    VkDescriptorSetLayout dsl;
} vk_pipe;

typedef struct {
    vk_pipe *pipe;
    VkDescriptorSet set;
    unsigned char push[128];
    uint32_t push_bytes;
    uint32_t groups[3];
} vk_launch;

typedef struct {             /* a trace row whose device times come from queries */
    int row, q0, q1, qbatch;
} vk_timed;

typedef struct {
    vk_device d;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    int open;                /* cmd is recording */
    int ncmds;               /* commands recorded in the open batch */
    VkQueryPool qpool;
    uint32_t nqueries, qnext;
    int timestamps;          /* profiling on and the queue writes timestamps */
    int qbatch;              /* query of the open batch's start timestamp, -1 none */
    int batch_first_row;     /* first trace row recorded into the open batch, -1 none */
    VkShaderModule *modules; /* per plan program, created on first use */
    vk_pipe *pipes; int npipes;
    vk_launch *launch;       /* per step */
    vk_store *stores; int nstores;
    vk_buf scratch;          /* staging for setup uploads and read_home */
    vk_timed *timed; int ntimed;
} vk_state;

/* The state of the run context being executed (rc->vk_state): every public entry point below
 * selects its context's first, so that one process can hold two (a side-by-side run). */
static vk_state *g_vk;
#define S (*g_vk)

/* ------------------------------------------------------------------ memory */

static int find_type(uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < S.d.mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (S.d.mem.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

/* A buffer of `size` bytes in the first memory type matching one of `prefs` (0-terminated;
 * the last entry is what it must have); mapped when that type is host-visible. */
static void make_buf(run_ctx *rc, vk_buf *b, VkDeviceSize size, VkBufferUsageFlags usage,
                     const VkMemoryPropertyFlags *prefs, const char *what)
{
    char ctx[300];
    snprintf(ctx, sizeof ctx, "allocating %llu bytes for %s after %lld bytes of buffers",
             (unsigned long long)size, what, rc->device_bytes);
    VkBufferCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size ? size : 4, .usage = usage,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(VK.vkCreateBuffer(S.d.device, &ci, NULL, &b->buf), ctx);
    VkMemoryRequirements req;
    VK.vkGetBufferMemoryRequirements(S.d.device, b->buf, &req);
    int type = -1;
    for (const VkMemoryPropertyFlags *p = prefs; type < 0; p++) {
        type = find_type(req.memoryTypeBits, *p);
        if (*p == 0 || p[1] == 0) break;
    }
    if (type < 0)
        fail(EXIT_NO_DEVICE, "Vulkan device \"%s\" has no memory type for %s (need flags 0x%x)",
             S.d.props.deviceName, what, (unsigned)prefs[0]);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size, .memoryTypeIndex = (uint32_t)type};
    VK_CHECK(VK.vkAllocateMemory(S.d.device, &ai, NULL, &b->mem), ctx);
    VK_CHECK(VK.vkBindBufferMemory(S.d.device, b->buf, b->mem, 0), ctx);
    VkMemoryPropertyFlags f = S.d.mem.memoryTypes[type].propertyFlags;
    b->size = size;
    b->coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
        VK_CHECK(VK.vkMapMemory(S.d.device, b->mem, 0, VK_WHOLE_SIZE, 0, &b->ptr), ctx);
    rc->device_bytes += (long long)req.size;
}

static void host_sync(vk_buf *b, int to_device)
{
    if (b->coherent || !b->ptr) return;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = b->mem,
                             .offset = 0, .size = VK_WHOLE_SIZE};
    if (to_device) VK_CHECK(VK.vkFlushMappedMemoryRanges(S.d.device, 1, &r), "a flush");
    else VK_CHECK(VK.vkInvalidateMappedMemoryRanges(S.d.device, 1, &r), "an invalidate");
}

static const VkMemoryPropertyFlags DEV_PREFS[] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
static const VkMemoryPropertyFlags STAGE_PREFS[] = {
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
        VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0};
static const VkMemoryPropertyFlags MAP_PREFS[] = {
    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
        VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0};

#define DEV_USAGE (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
                   VK_BUFFER_USAGE_TRANSFER_DST_BIT)
#define STAGE_USAGE (VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT)

/* ------------------------------------------------------------------ batches */

static void barrier(VkPipelineStageFlags dst_stage, VkAccessFlags dst_access)
{
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                                           VK_ACCESS_HOST_WRITE_BIT,
                          .dstAccessMask = dst_access};
    VK.vkCmdPipelineBarrier(S.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, &mb, 0,
                            NULL, 0, NULL);
}

static int next_query(void)
{
    if (S.qnext >= S.nqueries) fail(EXIT_INTERNAL, "runner bug: out of timestamp queries");
    return (int)S.qnext++;
}

static void begin_batch(void)
{
    if (S.open) return;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(VK.vkResetCommandBuffer(S.cmd, 0), "a command buffer reset");
    VK_CHECK(VK.vkBeginCommandBuffer(S.cmd, &bi), "a command buffer");
    S.open = 1;
    S.ncmds = 0;
    S.qbatch = -1;
    if (S.timestamps) {
        if (S.qnext == 0) VK.vkCmdResetQueryPool(S.cmd, S.qpool, 0, S.nqueries);
        S.qbatch = next_query();
        VK.vkCmdWriteTimestamp(S.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, S.qpool, (uint32_t)S.qbatch);
    }
}

/* Submits the open batch, waits for it and stretches its rows' host spans to the end of the wait (the host learns no earlier that a
 * recorded command ran). No-op without an open batch. */
static void flush(run_ctx *rc, const char *ctx)
{
    if (!S.open) return;
    barrier(VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VK_CHECK(VK.vkEndCommandBuffer(S.cmd), ctx);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &S.cmd};
    VK_CHECK(VK.vkQueueSubmit(S.d.queue, 1, &si, S.fence), ctx);
    VK_CHECK(VK.vkWaitForFences(S.d.device, 1, &S.fence, VK_TRUE, UINT64_MAX), ctx);
    VK_CHECK(VK.vkResetFences(S.d.device, 1, &S.fence), ctx);
    S.open = 0;
    for (int i = 0; i < S.nstores; i++) S.stores[i].stage_busy = 0;
    uint64_t now = monotonic_ns();
    if (S.batch_first_row >= 0)
        for (int i = S.batch_first_row; i < rc->tr.n; i++)
            if (rc->tr.rows[i].host_end_ns < now && strcmp(rc->tr.rows[i].kind, "host") &&
                strcmp(rc->tr.rows[i].kind, "map") && strcmp(rc->tr.rows[i].kind, "unmap"))
                rc->tr.rows[i].host_end_ns = now;
    S.batch_first_row = -1;
}

/* Records one command: a barrier after the previous one, its two timestamps around it
 * (recorded for trace row `row`). `emit` records the command itself. */
typedef void (*emit_fn)(void *arg);
static void record(run_ctx *rc, int row, emit_fn emit, void *arg)
{
    begin_batch();
    if (S.batch_first_row < 0) S.batch_first_row = row;
    if (S.ncmds++) barrier(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                           VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    int q0 = -1, q1 = -1;
    if (S.timestamps) {
        q0 = next_query();
        VK.vkCmdWriteTimestamp(S.cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, S.qpool, (uint32_t)q0);
    }
    emit(arg);
    if (S.timestamps) {
        q1 = next_query();
        VK.vkCmdWriteTimestamp(S.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, S.qpool, (uint32_t)q1);
        S.timed[S.ntimed++] = (vk_timed){row, q0, q1, S.qbatch};
    }
    (void)rc;
}

typedef struct { VkBuffer src, dst; VkDeviceSize bytes; } copy_args;

static void emit_copy(void *arg)
{
    copy_args *c = arg;
    VkBufferCopy region = {.srcOffset = 0, .dstOffset = 0, .size = c->bytes};
    VK.vkCmdCopyBuffer(S.cmd, c->src, c->dst, 1, &region);
}

static void emit_dispatch(void *arg)
{
    vk_launch *l = arg;
    VK.vkCmdBindPipeline(S.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l->pipe->pipe);
    VK.vkCmdBindDescriptorSets(S.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l->pipe->layout, 0, 1,
                               &l->set, 0, NULL);
    if (l->push_bytes)
        VK.vkCmdPushConstants(S.cmd, l->pipe->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                              l->push_bytes, l->push);
    VK.vkCmdDispatch(S.cmd, l->groups[0], l->groups[1], l->groups[2]);
}

/* An untimed copy between buffers, submitted and waited for (setup, read_home). */
static void copy_now(run_ctx *rc, VkBuffer src, VkBuffer dst, VkDeviceSize bytes, const char *ctx)
{
    int ts = S.timestamps;
    S.timestamps = 0;
    copy_args c = {src, dst, bytes};
    record(rc, -1, emit_copy, &c);
    S.batch_first_row = -1;
    flush(rc, ctx);
    S.timestamps = ts;
}

/* ------------------------------------------------------------------ setup */

static vk_store *store_of(const pt_plan *p, const pt_tensor *t)
{
    (void)p;
    return (vk_store *)t->mem;
}

/* Which stores need staging (an h2d/d2h step moves one of their tensors) or a mapped
 * buffer (a map step), and one store per tensor or shared buffer that some step touches. */
static void make_stores(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    S.stores = xcalloc((size_t)(p->ntensors + p->nbuffers), sizeof *S.stores);
    int *stage = xcalloc((size_t)(p->ntensors + p->nbuffers), sizeof *stage);
    for (int k = 0; k < p->nsteps; k++) {
        const pt_step *s = &p->steps[k];
        if (s->op != OP_H2D && s->op != OP_D2H) continue;
        const pt_tensor *t = &p->tensors[s->tensor];
        stage[t->buffer >= 0 ? p->ntensors + t->buffer : s->tensor] = 1;
    }
    size_t max_bytes = 4;
    for (int i = 0; i < p->ntensors + p->nbuffers; i++) {
        int shared = i >= p->ntensors;
        int need = 0, map = 0;
        size_t bytes = shared ? p->buffers[i - p->ntensors].size_bytes : p->tensors[i].size_bytes;
        const char *name = shared ? p->buffers[i - p->ntensors].name : p->tensors[i].name;
        for (int j = 0; j < p->ntensors; j++) {
            const pt_tensor *t = &p->tensors[j];
            if (shared ? t->buffer == i - p->ntensors : (j == i && t->buffer < 0)) {
                need |= t->needs_buffer;
                map |= t->needs_map;
            }
        }
        if (!need) continue;
        vk_store *st = &S.stores[i];
        char what[300];
        snprintf(what, sizeof what, "%s \"%s\"", shared ? "shared buffer" : "tensor", name);
        make_buf(rc, &st->dev, bytes, DEV_USAGE, map ? MAP_PREFS : DEV_PREFS, what);
        if (stage[i]) {
            snprintf(what, sizeof what, "the staging buffer of %s \"%s\"",
                     shared ? "shared buffer" : "tensor", name);
            make_buf(rc, &st->stage, bytes, STAGE_USAGE, STAGE_PREFS, what);
        }
        for (int j = 0; j < p->ntensors; j++)
            if (shared ? p->tensors[j].buffer == i - p->ntensors : j == i)
                p->tensors[j].mem = st;
        if (bytes > max_bytes) max_bytes = bytes;
    }
    S.nstores = p->ntensors + p->nbuffers;
    free(stage);
    make_buf(rc, &S.scratch, max_bytes, STAGE_USAGE, STAGE_PREFS, "the setup staging buffer");
}

/* Initial contents: each store from its host copy (a shared buffer's host allocation). */
static void upload_initial(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    for (int i = 0; i < S.nstores; i++) {
        vk_store *st = &S.stores[i];
        if (!st->dev.buf) continue;
        int shared = i >= p->ntensors;
        const void *src = shared ? p->buffers[i - p->ntensors].host : p->tensors[i].host;
        size_t bytes = st->dev.size;
        if (st->dev.ptr) {
            memcpy(st->dev.ptr, src, bytes);
            host_sync(&st->dev, 1);
            continue;
        }
        memcpy(S.scratch.ptr, src, bytes);
        host_sync(&S.scratch, 1);
        copy_now(rc, S.scratch.buf, st->dev.buf, bytes, "the initial upload");
    }
}

static const vk_abi_kernel *abi_of(const char *name)
{
    for (int i = 0; i < VK_ABI_COUNT; i++)
        if (!strcmp(VK_ABI[i].name, name)) return &VK_ABI[i];
    return NULL;
}

/* The SPIR-V of plan program i as a shader module (created once); its build record. */
static VkShaderModule module_of(run_ctx *rc, int i)
{
    if (S.modules[i]) return S.modules[i];
    pt_program *pg = &rc->plan->programs[i];
    char *path = path_join(rc->root, pg->source);
    size_t len = 0;
    char *code = read_file(path, &len);
    if (!code) fail(EXIT_BUNDLE, "SPIR-V %s (program \"%s\") cannot be read: %s; deploy the "
                    "kernel version's shaders first", path, pg->name, strerror(errno));
    if (len < 20 || len % 4 || *(uint32_t *)code != 0x07230203u)
        fail(EXIT_BUNDLE, "%s (program \"%s\") is not SPIR-V (%zu bytes, no magic number); "
             "recompile it with glslc", path, pg->name, len);
    uint64_t t0 = monotonic_ns();
    VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = len, .pCode = (const uint32_t *)code};
    VkResult r = VK.vkCreateShaderModule(S.d.device, &ci, NULL, &S.modules[i]);
    if (r != VK_SUCCESS)
        fail(EXIT_BUILD, "shader module creation failed: program \"%s\" (%s) on \"%s\": %s",
             pg->name, path, S.d.props.deviceName, vk_result_name(r));
    jwriter *w = &rc->build_json;
    jw_obj_begin(w);
    jw_key(w, "program"); jw_str(w, pg->name);
    jw_key(w, "source"); jw_str(w, pg->source);
    jw_key(w, "options"); jw_str(w, pg->options);
    jw_key(w, "build_ms"); jw_num(w, (double)(monotonic_ns() - t0) / 1e6);
    jw_key(w, "binary_size_bytes"); jw_int(w, (long long)len);
    jw_key(w, "log"); jw_str(w, "");
    jw_obj_end(w);
    free(code);
    free(path);
    return S.modules[i];
}

static int program_of(run_ctx *rc, const pt_step *s, int k)
{
    for (int i = 0; i < rc->plan->nprograms; i++)
        if (!strcmp(rc->plan->programs[i].name, s->name)) return i;
    fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d]: kernel \"%s\" has no program of that name "
         "(its SPIR-V); a Vulkan plan has one program per kernel", rc->plan->path, k, s->name);
}

/* The program's options "-DNAME=VALUE ..." as specialization constants: `ids` from the
 * VK_SPEC table (vk_abi.h), `vals` the int values; returns how many. A shader that does not
 * declare a constant ignores it (as an OpenCL program ignores an unused -D). Fails with
 * EXIT_BAD_INPUT naming the program for an option that is not -DNAME=INT of the table. */
static int spec_constants(run_ctx *rc, int prog, uint32_t ids[VK_SPEC_COUNT],
                          int32_t vals[VK_SPEC_COUNT])
{
    const pt_program *pg = &rc->plan->programs[prog];
    char *opts = xstrdup(pg->options ? pg->options : ""), *save = NULL;
    int n = 0;
    for (char *tok = strtok_r(opts, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(tok, '='), *end = NULL;
        int id = -1;
        if (!strncmp(tok, "-D", 2) && eq) {
            *eq = 0;
            for (int i = 0; i < VK_SPEC_COUNT; i++)
                if (!strcmp(VK_SPEC[i].name, tok + 2)) id = (int)VK_SPEC[i].id;
            *eq = '=';
        }
        long v = eq ? strtol(eq + 1, &end, 10) : 0;
        if (id < 0 || !end || *end || end == eq + 1)
            fail(EXIT_BAD_INPUT, "bad plan %s: program \"%s\": option \"%s\" is not -DNAME=INT "
                 "with NAME a specialization constant of the Vulkan ABI "
                 "(src/phonetrain/kernels/vk_abi.py SPEC_CONSTANTS)", rc->plan->path, pg->name, tok);
        int j = 0;
        while (j < n && ids[j] != (uint32_t)id) j++;
        ids[j] = (uint32_t)id;
        vals[j] = (int32_t)v;
        if (j == n) n++;
    }
    free(opts);
    return n;
}

/* The compute pipeline of (program, work-group size): created once, with the work-group
 * size as specialization constants 0, 1, 2 (src/kernels/vk_abi.glsl) and the program's
 * tuning parameters after them (spec_constants). */
static vk_pipe *pipe_of(run_ctx *rc, int prog, const vk_abi_kernel *abi, const uint32_t local[3],
                        const char *name)
{
    for (int i = 0; i < S.npipes; i++)
        if (S.pipes[i].program == prog && !memcmp(S.pipes[i].local, local, sizeof S.pipes[i].local))
            return &S.pipes[i];
    vk_pipe *pp = &S.pipes[S.npipes++];
    pp->program = prog;
    memcpy(pp->local, local, sizeof pp->local);
    VkDescriptorSetLayoutBinding b[VK_ABI_MAX_ARGS];
    for (uint32_t j = 0; j < abi->nbuffers; j++)
        b[j] = (VkDescriptorSetLayoutBinding){.binding = j, .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = abi->nbuffers, .pBindings = b};
    VK_CHECK(VK.vkCreateDescriptorSetLayout(S.d.device, &dci, NULL, &pp->dsl), name);
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0,
                              .size = abi->push_bytes};
    VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1, .pSetLayouts = &pp->dsl,
                                      .pushConstantRangeCount = abi->push_bytes ? 1 : 0,
                                      .pPushConstantRanges = &pr};
    VK_CHECK(VK.vkCreatePipelineLayout(S.d.device, &lci, NULL, &pp->layout), name);
    VkSpecializationMapEntry me[3 + VK_SPEC_COUNT];
    uint32_t data[3 + VK_SPEC_COUNT], ids[VK_SPEC_COUNT];
    int32_t vals[VK_SPEC_COUNT];
    uint32_t nspec = 3 + (uint32_t)spec_constants(rc, prog, ids, vals);
    for (uint32_t j = 0; j < nspec; j++) {
        me[j] = (VkSpecializationMapEntry){.constantID = j < 3 ? j : ids[j - 3],
                                           .offset = 4 * j, .size = 4};
        data[j] = j < 3 ? local[j] : (uint32_t)vals[j - 3];
    }
    VkSpecializationInfo spec = {.mapEntryCount = nspec, .pMapEntries = me,
                                 .dataSize = 4 * nspec, .pData = data};
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module_of(rc, prog),
                  .pName = "main", .pSpecializationInfo = &spec},
        .layout = pp->layout};
    VkResult r = VK.vkCreateComputePipelines(S.d.device, VK_NULL_HANDLE, 1, &ci, NULL, &pp->pipe);
    if (r != VK_SUCCESS)
        fail(EXIT_BUILD, "kernel build failed: compute pipeline of \"%s\" (%s, work-group "
             "%ux%ux%u, options \"%s\") on \"%s\": %s", name, rc->plan->programs[prog].source,
             local[0], local[1], local[2], rc->plan->programs[prog].options, S.d.props.deviceName,
             vk_result_name(r));
    return pp;
}

/* The step's work-group size (the plan's local size, else 64 in one dimension, 8x8 in two)
 * and work-group counts, checked against the device's limits. */
static void launch_size(run_ctx *rc, const pt_step *s, int k, uint32_t local[3], uint32_t groups[3])
{
    const VkPhysicalDeviceLimits *lim = &S.d.props.limits;
    static const uint32_t dflt[4][3] = {{1, 1, 1}, {64, 1, 1}, {8, 8, 1}, {4, 4, 4}};
    uint32_t total = 1;
    for (int d = 0; d < 3; d++) {
        local[d] = s->has_local ? (d < s->work_dim ? (uint32_t)s->local[d] : 1)
                                : dflt[s->work_dim][d];
        size_t g = d < s->work_dim ? s->global[d] : 1;
        groups[d] = (uint32_t)((g + local[d] - 1) / local[d]);
        total *= local[d];
        if (local[d] > lim->maxComputeWorkGroupSize[d])
            fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): local[%d]=%u exceeds the device's "
                 "max work-group size %u in that dimension; choose a smaller local size",
                 rc->plan->path, k, s->name, d, local[d], lim->maxComputeWorkGroupSize[d]);
        if (groups[d] > lim->maxComputeWorkGroupCount[d])
            fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): %u work-groups in dimension %d "
                 "exceed the device's limit %u; choose a larger local size",
                 rc->plan->path, k, s->name, groups[d], d, lim->maxComputeWorkGroupCount[d]);
    }
    if (total > lim->maxComputeWorkGroupInvocations)
        fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): local size of %u work-items exceeds "
             "the device's max work-group size %u; choose a smaller local size",
             rc->plan->path, k, s->name, total, lim->maxComputeWorkGroupInvocations);
}

static void make_launch(run_ctx *rc, VkDescriptorPool dpool, int k)
{
    pt_plan *p = rc->plan;
    pt_step *s = &p->steps[k];
    const vk_abi_kernel *abi = abi_of(s->name);
    if (!abi) fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d]: unknown kernel \"%s\" (not in the "
                   "kernel ABI, src/kernels/README.md)", p->path, k, s->name);
    char kinds[MAX_KERNEL_ARGS + 1];
    for (int a = 0; a < s->nargs; a++) kinds[a] = s->args[a].kind;
    kinds[s->nargs] = 0;
    if (strcmp(kinds, abi->kinds))
        fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): argument kinds \"%s\" do not match the "
             "ABI's \"%s\" (i int, f float, t tensor); check the argument list against "
             "src/kernels/README.md", p->path, k, s->name, kinds, abi->kinds);
    if (s->has_image)
        fail(EXIT_NO_LIBRARY, "bad plan %s: steps[%d] (%s): an image argument; the Vulkan backend "
             "binds buffers only (drop the image kernel version for backend vulkan)", p->path, k,
             s->name);
    vk_launch *l = &S.launch[k];
    uint32_t local[3];
    launch_size(rc, s, k, local, l->groups);
    l->pipe = pipe_of(rc, program_of(rc, s, k), abi, local, s->name);
    l->push_bytes = abi->push_bytes;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = dpool, .descriptorSetCount = 1,
                                      .pSetLayouts = &l->pipe->dsl};
    VK_CHECK(VK.vkAllocateDescriptorSets(S.d.device, &ai, &l->set), s->name);
    VkDescriptorBufferInfo bi[VK_ABI_MAX_ARGS];
    VkWriteDescriptorSet wr[VK_ABI_MAX_ARGS];
    int nw = 0;
    for (int a = 0; a < s->nargs; a++) {
        const rt_arg *arg = &s->args[a];
        if (arg->kind == 'i') memcpy(l->push + abi->slot[a], &arg->i, 4);
        else if (arg->kind == 'f') memcpy(l->push + abi->slot[a], &arg->f, 4);
        else {
            vk_store *st = store_of(p, &p->tensors[s->arg_tensor[a]]);
            bi[nw] = (VkDescriptorBufferInfo){.buffer = st->dev.buf, .offset = 0,
                                              .range = VK_WHOLE_SIZE};
            wr[nw] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                .dstSet = l->set, .dstBinding = abi->slot[a], .descriptorCount = 1,
                .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &bi[nw]};
            nw++;
        }
    }
    VK.vkUpdateDescriptorSets(S.d.device, (uint32_t)nw, wr, 0, NULL);
}

static void make_launches(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    int nk = 0, nbuf = 0;
    for (int k = 0; k < p->nsteps; k++)
        if (p->steps[k].op == OP_KERNEL) {
            nk++;
            for (int a = 0; a < p->steps[k].nargs; a++) nbuf += p->steps[k].args[a].kind == 't';
        }
    S.launch = xcalloc((size_t)p->nsteps + 1, sizeof *S.launch);
    S.pipes = xcalloc((size_t)nk + 1, sizeof *S.pipes);
    S.modules = xcalloc((size_t)p->nprograms + 1, sizeof *S.modules);
    if (!nk) return;
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = (uint32_t)(nbuf ? nbuf : 1)};
    VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                      .maxSets = (uint32_t)nk, .poolSizeCount = 1,
                                      .pPoolSizes = &ps};
    VkDescriptorPool dpool;
    VK_CHECK(VK.vkCreateDescriptorPool(S.d.device, &pci, NULL, &dpool), "setup");
    for (int k = 0; k < p->nsteps; k++)
        if (p->steps[k].op == OP_KERNEL) make_launch(rc, dpool, k);
}

void vk_setup(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    for (int i = 0; i < p->nprograms; i++)
        if (!strcmp(p->programs[i].source, "clblast"))
            fail(EXIT_NO_LIBRARY, "program \"%s\" routes GEMM to CLBlast, an OpenCL library; the "
                 "Vulkan backend has none (drop the clblast kernel version for backend vulkan)",
                 p->programs[i].name);
    rc->vk_state = g_vk = xcalloc(1, sizeof *g_vk);
    vk_open_device(rc->vk_lib, rc->vk_select, NULL, &S.d);
    rc->vk_device = &S.d;
    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = S.d.family};
    VK_CHECK(VK.vkCreateCommandPool(S.d.device, &cpi, NULL, &S.pool), "setup");
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = S.pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VK_CHECK(VK.vkAllocateCommandBuffers(S.d.device, &cai, &S.cmd), "setup");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_CHECK(VK.vkCreateFence(S.d.device, &fci, NULL, &S.fence), "setup");
    S.timestamps = rc->profiling && S.d.timestamp_bits > 0;
    /* per step two queries, per batch one: a batch per step at most, plus the first */
    S.nqueries = (uint32_t)(3 * p->nsteps + 2);
    if (S.timestamps) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = S.nqueries};
        VK_CHECK(VK.vkCreateQueryPool(S.d.device, &qci, NULL, &S.qpool), "setup");
    }
    S.timed = xcalloc((size_t)p->nsteps + 1, sizeof *S.timed);
    S.batch_first_row = -1;
    jw_init(&rc->build_json);
    jw_arr_begin(&rc->build_json);
    make_stores(rc);
    upload_initial(rc);
    make_launches(rc);
    jw_arr_end(&rc->build_json);
}

/* ------------------------------------------------------------------ iterations */

/* Runs (records) step k; returns 1 when it recorded a device command. */
static void run_step(run_ctx *rc, pt_step *s, int k, int row, int iteration)
{
    pt_plan *p = rc->plan;
    char ctx[160];
    snprintf(ctx, sizeof ctx, "steps[%d] (%s) of iteration %d", k,
             s->op == OP_KERNEL ? s->name : op_name(s->op), iteration);
    pt_tensor *t = s->tensor >= 0 ? &p->tensors[s->tensor] : NULL;
    vk_store *st = t ? store_of(p, t) : NULL;
    copy_args c;
    switch (s->op) {
    case OP_KERNEL:
        record(rc, row, emit_dispatch, &S.launch[k]);
        break;
    case OP_H2D:   /* its staging_copy row filled the staging buffer */
        st->stage_busy = 1;
        c = (copy_args){st->stage.buf, st->dev.buf, t->size_bytes};
        record(rc, row, emit_copy, &c);
        break;
    case OP_D2H:
        c = (copy_args){st->dev.buf, st->stage.buf, t->size_bytes};
        record(rc, row, emit_copy, &c);
        flush(rc, ctx);   /* its staging_copy row then copies out */
        break;
    case OP_MAP:   /* mapped already; the commands recorded before it ran (vk_iteration) */
        if (!s->map_write) host_sync(&st->dev, 0);
        t->mapped = st->dev.ptr;
        break;
    case OP_UNMAP:
        host_sync(&st->dev, 1);
        t->mapped = NULL;
        break;
    case OP_LOAD:   /* uploads took their data at recording: the host copy is free */
        plan_load_batch(t, iteration);
        break;
    }
}

/* The memcpy between a tensor's host copy and its staging buffer, its own host row (op
 * "staging_copy", data movement like a map's copy): before an h2d (after waiting for the
 * open batch where it still copies out of that staging buffer), after a d2h. */
static void staging_copy(run_ctx *rc, pt_step *s, int iteration, int warmup, int seq, int k)
{
    pt_tensor *t = &rc->plan->tensors[s->tensor];
    vk_store *st = store_of(rc->plan, t);
    if (s->op == OP_H2D && st->stage_busy) flush(rc, "waiting for a staging buffer");
    trace_row *r = trace_step(&rc->tr, rc->plan, s, iteration, warmup, seq, k);
    r->op = "staging_copy";
    r->kind = "host";
    r->flops = 0;
    r->host_begin_ns = monotonic_ns();
    if (s->op == OP_H2D) {
        memcpy(st->stage.ptr, t->host, t->size_bytes);
        host_sync(&st->stage, 1);
    } else {
        host_sync(&st->stage, 0);
        memcpy(t->host, st->stage.ptr, t->size_bytes);
    }
    r->host_end_ns = monotonic_ns();
}

static void read_timestamps(run_ctx *rc)
{
    if (!S.ntimed) return;
    uint64_t *ts = xcalloc(S.qnext, sizeof *ts);
    VK_CHECK(VK.vkGetQueryPoolResults(S.d.device, S.qpool, 0, S.qnext, S.qnext * sizeof *ts, ts,
                                      sizeof *ts, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
             "reading the timestamps");
    uint64_t mask = S.d.timestamp_bits >= 64 ? ~0ull : (1ull << S.d.timestamp_bits) - 1;
    double period = S.d.props.limits.timestampPeriod;
    for (int i = 0; i < S.ntimed; i++) {
        trace_row *r = &rc->tr.rows[S.timed[i].row];
        r->queued_ns = r->submit_ns = (int64_t)((double)(ts[S.timed[i].qbatch] & mask) * period);
        r->start_ns = (int64_t)((double)(ts[S.timed[i].q0] & mask) * period);
        r->end_ns = (int64_t)((double)(ts[S.timed[i].q1] & mask) * period);
    }
    free(ts);
}

uint64_t vk_iteration(run_ctx *rc, int iteration, int warmup)
{
    pt_plan *p = rc->plan;
    int seq = 0;
    g_vk = rc->vk_state;
    S.ntimed = 0;
    S.qnext = 0;
    for (int k = 0; k < p->nsteps; k++) {
        pt_step *s = &p->steps[k];
        if (s->op == OP_H2D) staging_copy(rc, s, iteration, warmup, seq++, k);
        /* a map waits for the commands recorded so far (a blocking map), outside its row:
         * that time is theirs, the map row only the mapping */
        if (s->op == OP_MAP) flush(rc, "the commands before a map");
        trace_step(&rc->tr, rc->plan, s, iteration, warmup, seq++, k);
        int idx = rc->tr.n - 1;   /* rows may move when the trace grows */
        rc->tr.rows[idx].host_begin_ns = monotonic_ns();
        run_step(rc, s, k, idx, iteration);
        trace_row *r = &rc->tr.rows[idx];
        uint64_t now = monotonic_ns();
        if (r->host_end_ns < now) r->host_end_ns = now;
        if (s->op == OP_MAP) trace_map_copy(&rc->tr, rc->plan, s, iteration, warmup, seq++, k);
        if (s->op == OP_D2H) staging_copy(rc, s, iteration, warmup, seq++, k);
    }
    flush(rc, "the end of an iteration");
    uint64_t end = monotonic_ns();
    if (S.timestamps) read_timestamps(rc);
    return end;
}

void vk_read_home(run_ctx *rc, pt_tensor *t, void *dst)
{
    g_vk = rc->vk_state;
    vk_store *st = store_of(rc->plan, t);
    if (!t->home_device || !st) {
        memcpy(dst, t->host, t->size_bytes);
        return;
    }
    if (st->dev.ptr) {
        host_sync(&st->dev, 0);
        memcpy(dst, st->dev.ptr, t->size_bytes);
        return;
    }
    copy_now(rc, st->dev.buf, S.scratch.buf, t->size_bytes, t->name);
    host_sync(&S.scratch, 0);
    memcpy(dst, S.scratch.ptr, t->size_bytes);
}

void vk_write_run_device(run_ctx *rc, jwriter *w)
{
    vk_write_device_json(w, (const vk_device *)rc->vk_device);
}

double vk_timer_resolution_ns(run_ctx *rc)
{
    return ((const vk_device *)rc->vk_device)->props.limits.timestampPeriod;
}

#else   /* built without the Vulkan headers */

_Noreturn static void no_vulkan(void)
{
    fail(EXIT_NO_LIBRARY, "this runner was built without the Vulkan headers (vulkan/vulkan_core.h); "
         "install libvulkan-dev (Debian) where it is built, or use backend opencl or cpu");
}

void vk_setup(run_ctx *rc) { (void)rc; no_vulkan(); }
uint64_t vk_iteration(run_ctx *rc, int iteration, int warmup)
{ (void)rc; (void)iteration; (void)warmup; no_vulkan(); }
void vk_read_home(run_ctx *rc, pt_tensor *t, void *dst) { (void)rc; (void)t; (void)dst; no_vulkan(); }
void vk_write_run_device(run_ctx *rc, jwriter *w) { (void)rc; (void)w; no_vulkan(); }
double vk_timer_resolution_ns(run_ctx *rc) { (void)rc; no_vulkan(); }

#endif
