/* The CPUs this process may really use: online CPUs, the affinity mask and the cgroup CPU
 * quota. The runner's default thread count (threads 0 = all) is cpus_usable(). */
#ifndef PHONETRAIN_CPUS_H
#define PHONETRAIN_CPUS_H

#include "json.h"

typedef struct {
    int online;          /* sysconf(_SC_NPROCESSORS_ONLN); 0: unknown */
    int affinity;        /* CPUs in sched_getaffinity's mask; 0: unknown */
    double quota_cpus;   /* tightest cgroup quota on the way to the root, in CPUs (quota /
                          * period: v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us);
                          * 0: no quota */
    int usable;          /* min(affinity or online, floor(quota_cpus)), at least 1 */
} cpu_avail;

/* Read the three limits now. The cgroup files are read under sysfs_root (the caller's
 * cond_sysfs_root(): /sys, or the folder --sysfs-root / $PHONETRAIN_SYSFS_ROOT names), at fs/cgroup/<path> for the
 * process's cgroup path in /proc/self/cgroup and every ancestor of it. */
void cpus_read(cpu_avail *c, const char *sysfs_root);

/* cpus_read(...).usable: the thread count of threads 0. */
int cpus_usable(const char *sysfs_root);

/* The cumulative throttled time (s) of each cgroup folder on this process's CPU controller
 * paths that records one (v2 cpu.stat throttled_usec, v1 throttled_time), the process's own
 * folder first, then its ancestors; at most max values into out, in the same order on every
 * call. Returns how many (0: no cgroup records throttling). */
int cpus_throttled(const char *sysfs_root, double *out, int max);

/* {"cpus_online", "cpus_affinity", "cpu_quota_cpus" (null: no quota), "cpus_usable"} as keys
 * of the object being written. */
void cpus_write_json(jwriter *w, const cpu_avail *c);

#endif
