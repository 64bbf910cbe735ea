/* Measurement conditions from /proc and /sys: see conditions.h. */
#define _POSIX_C_SOURCE 200809L
#include "conditions.h"
#include "cpus.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The aggregate "cpu" line of /proc/stat (proc(5)): user nice system idle iowait irq softirq
 * steal, in clock ticks; busy = all but idle and iowait. */
static void read_proc_stat(cond_sample *s)
{
    s->busy_s = NAN;
    s->cpus = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    char line[512];
    unsigned long long v[8] = {0};
    int have = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu ", 4)) {
            have = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6], &v[7]) >= 4;
        } else if (!strncmp(line, "cpu", 3) && line[3] >= '0' && line[3] <= '9') {
            s->cpus++;
        }
    }
    fclose(f);
    long tck = sysconf(_SC_CLK_TCK);
    if (!have || tck <= 0 || s->cpus == 0) { s->cpus = 0; return; }
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    s->busy_s = (double)busy / (double)tck;
}

static const char *g_sysfs_root;

void cond_set_sysfs_root(const char *root)
{
    g_sysfs_root = root;
}

const char *cond_sysfs_root(void)
{
    if (g_sysfs_root && *g_sysfs_root) return g_sysfs_root;
    const char *env = getenv("PHONETRAIN_SYSFS_ROOT");
    return env && *env ? env : "/sys";
}

double cond_read_number(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double x;
    int ok = fscanf(f, "%lf", &x) == 1;
    fclose(f);
    return ok ? x : NAN;
}

int cond_sysfs_series(const char *prefix, const char *file, double *out, int max)
{
    int n = 0;
    for (; n < max; n++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s%d", cond_sysfs_root(), prefix, n);
        if (access(path, F_OK) != 0) break;
        const size_t len = strlen(path);
        snprintf(path + len, sizeof path - len, "/%s", file);
        out[n] = cond_read_number(path);
    }
    return n;
}

/* Mean of cpufreq's scaling_cur_freq (kHz) over the CPUs that have one, else of
 * /proc/cpuinfo's "cpu MHz" (x86). */
static double read_cpu_mhz(void)
{
    double khz[4096], sum = 0;
    int n = 0;
    const int cpus = cond_sysfs_series("devices/system/cpu/cpu", "cpufreq/scaling_cur_freq", khz,
                                       4096);
    for (int c = 0; c < cpus; c++)
        if (!isnan(khz[c])) { sum += khz[c] / 1000.0; n++; }
    if (n) return sum / n;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NAN;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        double mhz;
        if (!strncmp(line, "cpu MHz", 7) && colon && sscanf(colon + 1, "%lf", &mhz) == 1) {
            sum += mhz;
            n++;
        }
    }
    fclose(f);
    return n ? sum / n : NAN;
}

/* The hottest thermal zone in degrees C (values above 1000 are millidegrees); implausible
 * readings (below -40 or above 150 C) are ignored. */
static double read_temperature_c(void)
{
    double zone[256], best = NAN;
    const int n = cond_sysfs_series("class/thermal/thermal_zone", "temp", zone, 256);
    for (int z = 0; z < n; z++) {
        double t = zone[z];
        if (isnan(t)) continue;
        if (fabs(t) > 1000) t /= 1000.0;
        if (t < -40 || t > 150) continue;
        if (isnan(best) || t > best) best = t;
    }
    return best;
}

void cond_sample_now(cond_sample *s)
{
    memset(s, 0, sizeof *s);
    read_proc_stat(s);
    struct rusage ru;
    s->self_cpu_s = NAN;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        s->self_cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                        (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    s->load_avg_1m = cond_read_number("/proc/loadavg");
    s->cpu_mhz = read_cpu_mhz();
    s->temperature_c = read_temperature_c();
    s->throttled_levels = cpus_throttled(cond_sysfs_root(), s->throttled_s, COND_CGROUP_LEVELS);
    s->wall_ns = monotonic_ns();
}

double cond_cgroup_throttled_s(const cond_sample *a, const cond_sample *b)
{
    if (!a->throttled_levels || a->throttled_levels != b->throttled_levels) return NAN;
    double most = 0;
    for (int i = 0; i < a->throttled_levels; i++) {
        double d = b->throttled_s[i] - a->throttled_s[i];
        if (d > most) most = d;
    }
    return most;
}

double cond_other_cpu_share(const cond_sample *a, const cond_sample *b)
{
    double wall = (double)(b->wall_ns - a->wall_ns) / 1e9;
    if (isnan(a->busy_s) || isnan(b->busy_s) || isnan(a->self_cpu_s) || isnan(b->self_cpu_s) ||
        a->cpus == 0 || wall <= 0)
        return NAN;
    double other = (b->busy_s - a->busy_s) - (b->self_cpu_s - a->self_cpu_s);
    double share = other / (wall * (double)a->cpus);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

void cond_write_json(jwriter *w, const cond_sample *a, const cond_sample *b, int omp_threads)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    jw_obj_begin(w);
    jw_key(w, "other_cpu_share"); jw_num(w, cond_other_cpu_share(a, b));
    jw_key(w, "cgroup_throttled_s"); jw_num(w, cond_cgroup_throttled_s(a, b));
    jw_key(w, "cpus"); jw_int(w, a->cpus);
    jw_key(w, "wall_s"); jw_num(w, (double)(b->wall_ns - a->wall_ns) / 1e9);
    jw_key(w, "self_cpu_s"); jw_num(w, b->self_cpu_s - a->self_cpu_s);
    jw_key(w, "busy_cpu_s"); jw_num(w, b->busy_s - a->busy_s);
    jw_key(w, "load_avg_1m_start"); jw_num(w, a->load_avg_1m);
    jw_key(w, "load_avg_1m_end"); jw_num(w, b->load_avg_1m);
    jw_key(w, "cpu_mhz_start"); jw_num(w, a->cpu_mhz);
    jw_key(w, "cpu_mhz_end"); jw_num(w, b->cpu_mhz);
    jw_key(w, "temperature_c_start"); jw_num(w, a->temperature_c);
    jw_key(w, "temperature_c_end"); jw_num(w, b->temperature_c);
    jw_key(w, "omp_wait_policy"); jw_str(w, policy && *policy ? policy : "unset");
    jw_key(w, "omp_threads"); jw_int(w, omp_threads);
    cpu_avail c;
    cpus_read(&c, cond_sysfs_root());
    cpus_write_json(w, &c);
    jw_obj_end(w);
}
