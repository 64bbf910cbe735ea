/* CPUs available to this process: see cpus.h. */
#define _GNU_SOURCE
#include "cpus.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int affinity_cpus(void)
{
#ifdef CPU_COUNT_S
    for (int n = 1024; n <= 1 << 16; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        size_t size = CPU_ALLOC_SIZE(n);
        if (!set) return 0;
        CPU_ZERO_S(size, set);
        int got = sched_getaffinity(0, size, set) == 0 ? CPU_COUNT_S(size, set) : -1;
        CPU_FREE(set);
        if (got >= 0) return got;
    }
#endif
    return 0;
}

/* Quota in CPUs of one cgroup folder (v2 cpu.max "max 100000" or "50000 100000"; v1
 * cpu.cfs_quota_us, -1 for none, over cpu.cfs_period_us); 0 when it sets none. */
static double folder_quota(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char q[32] = "";
        double period = 0;
        int n = fscanf(f, "%31s %lf", q, &period);
        fclose(f);
        if (n == 2 && strcmp(q, "max") && period > 0) return atof(q) / period;
        return 0;
    }
    double quota = 0, period = 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (!(f = fopen(path, "r"))) return 0;
    int ok = fscanf(f, "%lf", &quota) == 1;
    fclose(f);
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (!ok || quota <= 0 || !(f = fopen(path, "r"))) return 0;
    ok = fscanf(f, "%lf", &period) == 1;
    fclose(f);
    return ok && period > 0 ? quota / period : 0;
}

/* The tightest quota of a cgroup path and its ancestors under one hierarchy's mount. */
static double path_quota(const char *mount, const char *cg)
{
    char dir[1100];
    double best = 0;
    snprintf(dir, sizeof dir, "%s%s", mount, cg);
    for (;;) {
        double q = folder_quota(dir);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir + strlen(mount), '/');
        if (!slash) break;
        *slash = '\0';
    }
    return best;
}

/* /proc/self/cgroup (cgroups(7)): "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1); the
 * hierarchies are mounted at <sysfs root>/fs/cgroup (v2) or fs/cgroup/<controllers> (v1). */
static double cgroup_quota(const char *sysfs_root)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024], mount[700];
    double best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctl = c1 + 1, *cg = c2 + 1;
        double q = 0;
        if (!*ctl) {
            snprintf(mount, sizeof mount, "%s/fs/cgroup", sysfs_root);
            q = path_quota(mount, strcmp(cg, "/") ? cg : "");
        } else if (strstr(ctl, "cpu") && !strstr(ctl, "cpuset")) {
            const char *names[] = {ctl, "cpu", "cpu,cpuacct"};
            for (int i = 0; i < 3 && !q; i++) {
                snprintf(mount, sizeof mount, "%s/fs/cgroup/%s", sysfs_root, names[i]);
                q = path_quota(mount, strcmp(cg, "/") ? cg : "");
            }
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
    }
    fclose(f);
    return best;
}

/* Cumulative time (s) the CPU controller throttled one cgroup folder (v2 cpu.stat
 * throttled_usec, v1 cpu.stat throttled_time in ns); NaN when it records none. */
static double folder_throttled_s(const char *dir)
{
    char path[1200], key[64];
    snprintf(path, sizeof path, "%s/cpu.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double v, got = NAN;
    while (fscanf(f, "%63s %lf", key, &v) == 2) {
        if (!strcmp(key, "throttled_usec")) got = v / 1e6;
        else if (!strcmp(key, "throttled_time")) got = v / 1e9;
    }
    fclose(f);
    return got;
}

int cpus_throttled(const char *sysfs_root, double *out, int max)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024], dir[1100];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctl = c1 + 1, *cg = c2 + 1;
        if (*ctl && (!strstr(ctl, "cpu") || strstr(ctl, "cpuset"))) continue;
        size_t base = 0;
        if (!*ctl) {
            base = (size_t)snprintf(dir, sizeof dir, "%s/fs/cgroup", sysfs_root);
        } else {  /* v1: the first of the usual mount names that exists */
            const char *names[] = {ctl, "cpu", "cpu,cpuacct"};
            for (int i = 0; i < 3; i++) {
                base = (size_t)snprintf(dir, sizeof dir, "%s/fs/cgroup/%s", sysfs_root, names[i]);
                if (access(dir, F_OK) == 0) break;
            }
        }
        if (base >= sizeof dir) continue;
        snprintf(dir + base, sizeof dir - base, "%s", strcmp(cg, "/") ? cg : "");
        for (;;) {  /* the process's cgroup, then each ancestor */
            double t = folder_throttled_s(dir);
            if (!isnan(t) && n < max) out[n++] = t;
            char *slash = strrchr(dir + base, '/');
            if (!slash) break;
            *slash = '\0';
        }
    }
    fclose(f);
    return n;
}

void cpus_read(cpu_avail *c, const char *sysfs_root)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    c->online = online > 0 ? (int)online : 0;
    c->affinity = affinity_cpus();
    c->quota_cpus = cgroup_quota(sysfs_root);
    int n = c->affinity ? c->affinity : c->online ? c->online : 1;
    if (c->quota_cpus > 0 && floor(c->quota_cpus) < n) n = (int)floor(c->quota_cpus);
    c->usable = n < 1 ? 1 : n;
}

int cpus_usable(const char *sysfs_root)
{
    cpu_avail c;
    cpus_read(&c, sysfs_root);
    return c.usable;
}

void cpus_write_json(jwriter *w, const cpu_avail *c)
{
    jw_key(w, "cpus_online"); jw_int(w, c->online);
    jw_key(w, "cpus_affinity"); jw_int(w, c->affinity);
    jw_key(w, "cpu_quota_cpus"); jw_num(w, c->quota_cpus > 0 ? c->quota_cpus : NAN);
    jw_key(w, "cpus_usable"); jw_int(w, c->usable);
}
