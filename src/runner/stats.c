/* Median, low quantile and their bootstrap confidence intervals: see stats.h. */
#include "stats.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_sorted(const double *v, int n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double stats_median(const double *x, int n)
{
    double *v = xmalloc((size_t)n * sizeof *v);
    memcpy(v, x, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double m = median_sorted(v, n);
    free(v);
    return m;
}

/* Output k (0-based) of splitmix64 seeded with `seed`, as phonetrain.plan.uniform_fill. */
static uint64_t splitmix64_at(uint64_t seed, uint64_t k)
{
    uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double percentile_sorted(const double *v, int n, double p)
{
    double pos = p * (double)(n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

double stats_quantile(const double *x, int n, double q)
{
    double *v = xmalloc((size_t)n * sizeof *v);
    memcpy(v, x, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double r = percentile_sorted(v, n, q);
    free(v);
    return r;
}

void stats_quantile_ci(const double *x, int n, double q, int resamples, uint64_t seed,
                       double *lo, double *hi)
{
    if (n <= 1 || resamples < 2) {
        *lo = *hi = n >= 1 ? x[0] : NAN;
        return;
    }
    double *sample = xmalloc((size_t)n * sizeof *sample);
    double *qs = xmalloc((size_t)resamples * sizeof *qs);
    for (int b = 0; b < resamples; b++) {
        for (int j = 0; j < n; j++)
            sample[j] = x[splitmix64_at(seed, (uint64_t)b * (uint64_t)n + (uint64_t)j) % (uint64_t)n];
        qsort(sample, (size_t)n, sizeof *sample, cmp_double);
        qs[b] = percentile_sorted(sample, n, q);
    }
    qsort(qs, (size_t)resamples, sizeof *qs, cmp_double);
    *lo = percentile_sorted(qs, resamples, 0.025);
    *hi = percentile_sorted(qs, resamples, 0.975);
    free(sample);
    free(qs);
}

void stats_median_ci(const double *x, int n, int resamples, uint64_t seed, double *lo, double *hi)
{
    stats_quantile_ci(x, n, 0.5, resamples, seed, lo, hi);
}

double stats_rel_half_width(double median, double lo, double hi)
{
    if (!(median > 0)) return INFINITY;
    double a = median - lo, b = hi - median;
    return (a > b ? a : b) / median;
}
