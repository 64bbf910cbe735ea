/* The runner's location estimates (of iteration times in run, of timed repeats and launches
 * in the bench modes) and their 95% bootstrap confidence intervals: the median, and the low
 * quantile ESTIMATE_QUANTILE that the adaptive measurement's stop rule judges (timing noise on
 * a shared machine only adds time, so a low quantile moves little under it: Chen and Revels,
 * "Robust benchmarking in noisy environments", 2016, who take the minimum; a quantile keeps a
 * bootstrap interval that is not degenerate). phonetrain.results.stats reproduces the same
 * numbers. */
#ifndef PHONETRAIN_STATS_H
#define PHONETRAIN_STATS_H

#include <stdint.h>

#define BOOTSTRAP_SEED 0x5eedULL
#define ESTIMATE_QUANTILE 0.25   /* phonetrain.results.stats.ESTIMATE_QUANTILE */

/* Median of x[0..n) (n >= 1; x is not modified): the middle value, or the mean of the two
 * middle values for even n. */
double stats_median(const double *x, int n);

/* The q-quantile (0 <= q <= 1) of x[0..n) (n >= 1): linear interpolation between the sorted
 * values at rank q * (n - 1) (numpy's default "linear" method; q = 0.5 is stats_median). */
double stats_quantile(const double *x, int n, double q);

/* Percentile bootstrap of the q-quantile, drawn as stats_median_ci's: each resample's
 * stats_quantile, sorted, and their 2.5th and 97.5th percentiles. */
void stats_quantile_ci(const double *x, int n, double q, int resamples, uint64_t seed,
                       double *lo, double *hi);

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
