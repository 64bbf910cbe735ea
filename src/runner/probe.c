/* The calibration probe: see probe.h. */
#define _POSIX_C_SOURCE 200809L
#include "probe.h"
#include "stats.h"
#include "util.h"

#include <omp.h>

static volatile double g_sink;

static double probe_once(int threads)
{
    uint64_t t0 = monotonic_ns();
#pragma omp parallel num_threads(threads)
    {
        double a = 1.0 + 1e-3 * omp_get_thread_num(), b = 1e-9;
        for (int i = 0; i < PROBE_FMAS; i++) a = a * 0.9999999 + b;
        if (a == 42.0) g_sink = a;   /* keeps the chain: its result is used */
    }
    return (double)(monotonic_ns() - t0) / 1e6;
}

double probe_ms(int threads)
{
    double x[PROBE_SAMPLES];
    for (int i = 0; i < PROBE_SAMPLES; i++) x[i] = probe_once(threads > 0 ? threads : 1);
    return stats_median(x, PROBE_SAMPLES);
}

void probe_write_json(jwriter *w, const probe_rec *p)
{
    jw_obj_begin(w);
    jw_key(w, "work"); jw_str(w, "per thread 2^20 dependent double multiply-adds");
    jw_key(w, "threads"); jw_int(w, p->threads);
    jw_key(w, "samples"); jw_int(w, PROBE_SAMPLES);
    jw_key(w, "before_ms"); jw_num(w, p->before_ms);
    jw_key(w, "after_ms"); jw_num(w, p->after_ms);
    jw_obj_end(w);
}
