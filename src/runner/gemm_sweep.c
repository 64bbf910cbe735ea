/* A GEMM sweep's stop and repeat rules (gemm_sweep.h). */
#include <math.h>
#include <string.h>

#include "gemm_sweep.h"
#include "util.h"

static double num_or(const jval *o, const char *key, double dflt)
{
    const jval *v = json_get(o, key);
    return v && v->type == J_NUM ? v->num : dflt;
}

void sweep_parse(const jval *spec, const char *path, int ncases, gemm_sweep *sw)
{
    memset(sw, 0, sizeof *sw);
    const jval *v = json_get(spec, "sweep");
    if (!v || v->type == J_NULL) return;
    if (v->type != J_OBJ) fail(EXIT_BAD_INPUT, "bench-gemm: %s: sweep must be an object", path);
    const jval *ml = json_get(v, "max_launch_s");
    if (!ml || ml->type != J_NUM || !(ml->num > 0))
        fail(EXIT_BAD_INPUT, "bench-gemm: %s: sweep.max_launch_s must be a number > 0 (s)", path);
    sw->on = 1;
    sw->max_launch_s = ml->num;
    sw->plateau_gain = num_or(v, "plateau_gain", 0);
    sw->plateau_cases = (int)num_or(v, "plateau_cases", 2);
    sw->max_case_s = num_or(v, "max_case_s", 0);
    sw->min_repeats = (int)num_or(v, "min_repeats", 1);
    if (sw->plateau_cases < 1 || sw->min_repeats < 1)
        fail(EXIT_BAD_INPUT, "bench-gemm: %s: sweep.plateau_cases and sweep.min_repeats must be "
             ">= 1", path);
    sw->gflops = xcalloc((size_t)(ncases > 0 ? ncases : 1), sizeof *sw->gflops);
}

/* One launch of M x N x K at the last passed case's GFLOPS (s); 0 before any passed. */
static double launch_s(const gemm_sweep *sw, int M, int N, int K)
{
    double last = sw->n ? sw->gflops[sw->n - 1] : 0;
    return last > 0 ? 2.0 * M * N * (double)K / (last * 1e9) : 0;
}

const char *sweep_skip(const gemm_sweep *sw, int M, int N, int K)
{
    if (!sw->on) return NULL;
    if (launch_s(sw, M, N, K) > sw->max_launch_s) return "max_launch_s";
    int n = sw->n, k = sw->plateau_cases;
    if (!(sw->plateau_gain != 0) || n <= k) return NULL;
    for (int i = n - k; i < n; i++) {   /* each of the last k under (1 + gain) x the best before */
        double best = sw->gflops[0];
        for (int j = 1; j < i; j++) best = sw->gflops[j] > best ? sw->gflops[j] : best;
        if (!(sw->gflops[i] < (1 + sw->plateau_gain) * best)) return NULL;
    }
    return "plateau";
}

int sweep_repeats(const gemm_sweep *sw, int M, int N, int K, int repeats)
{
    double one = launch_s(sw, M, N, K);
    if (!sw->on || !(sw->max_case_s != 0) || !(one > 0)) return repeats;
    double q = floor(sw->max_case_s / one);
    int r = q < repeats ? (int)q : repeats;
    return r > sw->min_repeats ? r : sw->min_repeats;
}
