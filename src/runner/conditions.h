/* What could distort a measurement, read from the device itself (Linux and Android): the
 * CPU time other processes took, the load average, CPU clock and temperature, and the OpenMP
 * settings. Unreadable values are NaN (written as null). */
#ifndef PHONETRAIN_CONDITIONS_H
#define PHONETRAIN_CONDITIONS_H

#include <stdint.h>

#include "json.h"

#define COND_CGROUP_LEVELS 16

typedef struct {
    uint64_t wall_ns;                 /* CLOCK_MONOTONIC */
    double busy_s;                    /* /proc/stat: non-idle CPU time of all CPUs, s; NaN */
    int cpus;                         /* CPUs /proc/stat lists (0: unreadable) */
    double self_cpu_s;                /* this process's user + system time (getrusage), s */
    double load_avg_1m;               /* /proc/loadavg */
    double cpu_mhz;                   /* mean current clock over CPUs (cpufreq, else cpuinfo) */
    double temperature_c;             /* hottest /sys/class/thermal zone */
    double throttled_s[COND_CGROUP_LEVELS];  /* cpus_throttled: per cgroup level, s */
    int throttled_levels;             /* how many (0: no cgroup records throttling) */
} cond_sample;

void cond_sample_now(cond_sample *s);

/* The folder that stands for /sys in every sysfs read (clocks, thermal zones, battery): the
 * root set here (--sysfs-root), else $PHONETRAIN_SYSFS_ROOT, else /sys. Tests and the virtual
 * device point it at a folder of scripted files. */
void cond_set_sysfs_root(const char *root);
const char *cond_sysfs_root(void);
/* The number at the start of a text file (a sysfs or /proc value); NaN when unreadable. */
double cond_read_number(const char *path);
/* The numbered sysfs folders <root>/<prefix>0, <prefix>1, ... up to max - 1, stopping at the
 * first that does not exist (CPUs: prefix "devices/system/cpu/cpu"): their count n, and in
 * out[0..n) the number in each one's `file` (cond_read_number: NaN when unreadable). */
int cond_sysfs_series(const char *prefix, const char *file, double *out, int max);

/* Share (0..1) of the CPUs' capacity between a and b that other processes used:
 * (busy - own CPU time) / (wall * cpus), clipped to 0..1; NaN when /proc/stat is unreadable. */
double cond_other_cpu_share(const cond_sample *a, const cond_sample *b);

/* Time (s) between a and b that the CPU controller throttled this process's cgroup (the
 * largest increase over the levels of its cgroup path: a quota on any level holds it back);
 * NaN when no level records throttling. */
double cond_cgroup_throttled_s(const cond_sample *a, const cond_sample *b);

/* {"other_cpu_share", "cgroup_throttled_s", "load_avg_1m_start", "load_avg_1m_end", "cpus",
 *  "self_cpu_s", "wall_s", "cpu_mhz_start", "cpu_mhz_end", "temperature_c_start",
 *  "temperature_c_end", "omp_wait_policy", "omp_threads", and cpus_write_json's "cpus_online", "cpus_affinity",
 *  "cpu_quota_cpus", "cpus_usable"} over the measured iterations. */
void cond_write_json(jwriter *w, const cond_sample *a, const cond_sample *b, int omp_threads);

#endif
