/* Trace rows (one per command execution) and the trace.csv writer. */
#ifndef PHONETRAIN_TRACE_H
#define PHONETRAIN_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"

typedef struct {
    int iteration, warmup, seq, step;
    int queue;               /* command queue index (plan v2 "queue"; 0 otherwise) */
    const char *op;          /* plan op, or "map_copy" for the host copy of a map step */
    const char *kind;        /* kernel | h2d | d2h | map | unmap | d2d | host */
    const char *name;        /* kernel name, or the tensor name for transfers and host rows */
    const char *layer, *phase;
    long long bytes, flops;
    int64_t queued_ns, submit_ns, start_ns, end_ns;   /* device clock; -1 when not a device command */
    uint64_t host_begin_ns, host_end_ns;              /* CLOCK_MONOTONIC around the call */
    void *event;             /* cl_event until its profiling info is read */
} trace_row;

typedef struct {
    trace_row *rows;
    int n, cap;
} trace;

trace_row *trace_add(trace *t);           /* appends a zeroed row with device times -1 */

/* Appends the row of plan step k (index `seq` within the iteration), named and sized from it.
 * The pointer is valid until the next trace_add. */
trace_row *trace_step(trace *t, const pt_plan *p, const pt_step *s, int iteration, int warmup,
                      int seq, int k);

/* The memcpy of map step k between its tensor's host copy and mapped pointer (direction by
 * the step's map_write), timed on the host as its own row (op "map_copy", kind "host"): the
 * map's data movement, the same row for every GPU backend. */
void trace_map_copy(trace *t, const pt_plan *p, const pt_step *s, int iteration, int warmup,
                    int seq, int k);

/* The CSV header and rows; returns a malloc'd buffer (len in *len). */
char *trace_csv(const trace *t, size_t *len);

#endif
