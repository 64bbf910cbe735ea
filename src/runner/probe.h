/* The calibration probe: a fixed CPU workload timed before and after a run's measured
 * iterations, so that a host slower than its own quiet figure (other processes on its cores,
 * a throttled clock) is noticed by the comparison with that figure (phonetrain.results.stats.judge). */
#ifndef PHONETRAIN_PROBE_H
#define PHONETRAIN_PROBE_H

#include "json.h"

/* Dependent multiply-adds per thread per sample: ~10 ms at 3 GHz (4-cycle latency), longer
 * than a scheduler time slice (CFS: 3-6 ms with two runnable tasks on a core), so a sample of
 * a thread that shares its core spans the other task's turns rather than fitting between them. */
#define PROBE_FMAS (1 << 23)
#define PROBE_SAMPLES 5

typedef struct {
    int threads;
    double before_ms, after_ms;   /* fastest of PROBE_SAMPLES samples */
} probe_rec;

/* One probe reading: `threads` OpenMP threads each run PROBE_FMAS dependent multiply-adds
 * (latency-bound: the figure follows the core's clock and its share of the core, not memory);
 * per sample the longest thread's own loop time (fork and join excluded), the fastest of
 * PROBE_SAMPLES samples, in ms. */
double probe_ms(int threads);

/* Releases the probe's OpenMP worker threads (OpenMP 5.0 omp_pause_resource_all: libgomp
 * ends them, libomp puts them to sleep), so that none spins beside an OpenCL run's measured
 * iterations. */
void probe_release_threads(void);

/* {"work": "...", "threads", "samples", "before_ms", "after_ms"} */
void probe_write_json(jwriter *w, const probe_rec *p);

#endif
