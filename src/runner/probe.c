/* The calibration probe: see probe.h. */
#define _POSIX_C_SOURCE 200809L
#include "probe.h"
#include "util.h"

#include <omp.h>

static volatile double g_sink;

/* One sample: the longest of the threads' own loop times. Each thread times its own loop, so
 * the region's fork and join (thread wake-up latency, which varies by platform and says nothing
 * about the host's load) stay outside; a thread that shares its core with another process, or
 * runs at a lower clock, takes longer. */
static double probe_once(int threads)
{
    double slowest_ns = 0;
#pragma omp parallel num_threads(threads) reduction(max : slowest_ns)
    {
        double a = 1.0 + 1e-3 * omp_get_thread_num(), b = 1e-9;
        uint64_t t0 = monotonic_ns();
        for (int i = 0; i < PROBE_FMAS; i++) a = a * 0.9999999 + b;
        uint64_t t1 = monotonic_ns();
        if (a == 42.0) g_sink = a;   /* keeps the chain: its result is used */
        slowest_ns = (double)(t1 - t0);
    }
    return slowest_ns / 1e6;
}

double probe_ms(int threads)
{
    double fastest = 0;
    for (int i = 0; i < PROBE_SAMPLES; i++) {
        double x = probe_once(threads > 0 ? threads : 1);
        if (i == 0 || x < fastest) fastest = x;
    }
    /* the fastest sample: a short stall of the host (a virtual CPU held by its hypervisor,
     * an interrupt) only adds time to some samples, while other processes on the cores or a
     * lower clock slow every sample of ~10 ms (Chen and Revels 2016 take the minimum too) */
    return fastest;
}

void probe_release_threads(void)
{
    /* Under OMP_WAIT_POLICY=ACTIVE the probe's OpenMP worker threads keep spinning after it,
     * on the cores an OpenCL driver's own threads need during the measured iterations (on a
     * 2-core host one spinning thread made the two runner processes of one OpenCL run differ
     * by up to 1.7x). OpenMP 5.0's pause releases them: GCC's libgomp ends them, LLVM's
     * libomp (the Android NDK's) puts them to sleep (both provide it from version 9, though
     * GCC 12 still sets _OPENMP to 4.5's 201511); the CPU backend keeps its pool. */
    omp_pause_resource_all(omp_pause_soft);
}

void probe_write_json(jwriter *w, const probe_rec *p)
{
    jw_obj_begin(w);
    jw_key(w, "work");
    jw_str(w, "per thread 2^23 dependent double multiply-adds; the slowest thread's own loop");
    jw_key(w, "threads"); jw_int(w, p->threads);
    jw_key(w, "samples"); jw_int(w, PROBE_SAMPLES);
    jw_key(w, "before_ms"); jw_num(w, p->before_ms);
    jw_key(w, "after_ms"); jw_num(w, p->after_ms);
    jw_obj_end(w);
}
