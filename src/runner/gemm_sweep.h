/* A GEMM sweep's stop and repeat rules in bench-gemm (bench_gemm.c's module comment: the spec
 * key "sweep"): the square sizes of one version measured in one process, in ascending order,
 * each skipped or given its repeats from the GFLOPS of the squares that passed before it.
 * The rules are phonetrain.stages.gemm's `plateaued` and `sweep_repeats`. */
#ifndef PHONETRAIN_GEMM_SWEEP_H
#define PHONETRAIN_GEMM_SWEEP_H

#include "json.h"

typedef struct {
    int on, plateau_cases, min_repeats;
    double max_launch_s, plateau_gain, max_case_s;
    double *gflops;    /* the passed cases' GFLOPS, in order */
    int n;
} gemm_sweep;

/* The spec's "sweep" (absent or null: off) for `ncases` cases; a bad one fails with
 * EXIT_BAD_INPUT naming the spec file `path` and the key. */
void sweep_parse(const jval *spec, const char *path, int ncases, gemm_sweep *sw);

/* The rule that skips an M x N x K case ("max_launch_s" or "plateau"), or NULL. */
const char *sweep_skip(const gemm_sweep *sw, int M, int N, int K);

/* Timed repeats of an M x N x K case: `repeats`, or with max_case_s and a case passed before
 * it floor(max_case_s / estimated launch s) within min_repeats .. repeats. */
int sweep_repeats(const gemm_sweep *sw, int M, int N, int K, int repeats);

#endif
