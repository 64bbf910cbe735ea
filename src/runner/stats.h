/* The runner's median (of iteration times in run, of timed repeats and launches in the bench
 * modes) and its 95% bootstrap confidence interval, the adaptive measurement's stop rule.
 * phonetrain.results.stats reproduces the same numbers. */
#ifndef PHONETRAIN_STATS_H
#define PHONETRAIN_STATS_H

#include <stdint.h>

#define BOOTSTRAP_SEED 0x5eedULL

/* Median of x[0..n) (n >= 1; x is not modified): the middle value, or the mean of the two
 * middle values for even n. */
double stats_median(const double *x, int n);

/* Percentile bootstrap (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993,
 * ch. 13) of the median of x[0..n): `resamples` resamples of n values drawn with replacement,
 * draw j of resample b at index splitmix64(seed, b * n + j) mod n (the stream of
 * phonetrain.plan.uniform_fill), their medians sorted, and the 2.5th and 97.5th percentiles
 * by linear interpolation at rank p * (resamples - 1). n == 1 gives [x0, x0]. */
void stats_median_ci(const double *x, int n, int resamples, uint64_t seed, double *lo, double *hi);

/* max(median - lo, hi - median) / median: the interval's relative half-width (inf when the
 * median is not positive). */
double stats_rel_half_width(double median, double lo, double hi);

#endif
