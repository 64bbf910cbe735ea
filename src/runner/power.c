/* Power, energy and clock sampling during the measured iterations: see power.h. */
#define _POSIX_C_SOURCE 200809L
#include "power.h"
#include "conditions.h"
#include "util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A clock is throttled when a sample falls more than this fraction below the highest value
 * the same clock had earlier in the run. */
#define THROTTLE_DROP 0.10

static double read_sysfs_number(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", cond_sysfs_root(), rel);
    return cond_read_number(path);
}

/* The first line of a sysfs text file (e.g. battery/status) into buf; "" when unreadable. */
static void read_sysfs_word(const char *rel, char *buf, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", cond_sysfs_root(), rel);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    if (!fgets(buf, (int)n, f)) buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\r\n")] = 0;
}

/* Chargers whose power_supply/<name>/online says whether external power is plugged in. */
static const char *const CHARGERS[] = {"usb", "ac", "wireless", "dc"};
#define N_CHARGERS (sizeof CHARGERS / sizeof CHARGERS[0])

/* Is the phone on external power now (see power_sample.external)? Adds the names of the
 * chargers online to ps->chargers; the status text goes to status. */
static int read_external(power_sampler *ps, char *status, size_t n)
{
    read_sysfs_word("class/power_supply/battery/status", status, n);
    int known = status[0] != 0, external = known && strcmp(status, "Discharging") != 0;
    for (size_t i = 0; i < N_CHARGERS; i++) {
        char rel[96];
        snprintf(rel, sizeof rel, "class/power_supply/%s/online", CHARGERS[i]);
        double online = read_sysfs_number(rel);
        if (isnan(online)) continue;
        known = 1;
        if (online <= 0) continue;
        external = 1;
        pthread_mutex_lock(&ps->mu);
        if (!strstr(ps->chargers, CHARGERS[i])) {
            size_t len = strlen(ps->chargers);
            snprintf(ps->chargers + len, sizeof ps->chargers - len, "%s%s", len ? "," : "",
                     CHARGERS[i]);
        }
        pthread_mutex_unlock(&ps->mu);
    }
    return known ? external : -1;
}

static double read_gpu_mhz(void)
{
    double hz = read_sysfs_number("class/kgsl/kgsl-3d0/gpuclk");          /* Adreno */
    if (isnan(hz)) hz = read_sysfs_number("class/misc/mali0/device/devfreq/gpufreq/cur_freq");
    return isnan(hz) ? NAN : hz / 1e6;
}

static double read_cpu_mhz_max(void)
{
    double khz[1024], best = NAN;
    const int cpus = cond_sysfs_series("devices/system/cpu/cpu", "cpufreq/scaling_cur_freq", khz,
                                       1024);
    for (int c = 0; c < cpus; c++)
        if (!isnan(khz[c]) && (isnan(best) || khz[c] / 1000.0 > best)) best = khz[c] / 1000.0;
    return best;
}

static void take(power_sampler *ps, int with_power)
{
    power_sample s;
    s.t_s = (double)(monotonic_ns() - ps->t0_ns) / 1e9;
    s.voltage_uv = with_power ? read_sysfs_number("class/power_supply/battery/voltage_now") : NAN;
    s.current_ua = with_power ? read_sysfs_number("class/power_supply/battery/current_now") : NAN;
    s.gpu_mhz = read_gpu_mhz();
    s.cpu_mhz_max = read_cpu_mhz_max();
    char status[24];
    s.external = with_power ? read_external(ps, status, sizeof status) : -1;
    pthread_mutex_lock(&ps->mu);
    if (with_power) {
        if (ps->n == 0) snprintf(ps->status_start, sizeof ps->status_start, "%s", status);
        snprintf(ps->status_end, sizeof ps->status_end, "%s", status);
    }
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 256;
        power_sample *grown = realloc(ps->s, (size_t)ps->cap * sizeof *grown);
        if (!grown) { pthread_mutex_unlock(&ps->mu); return; }   /* keep what we have */
        ps->s = grown;
    }
    ps->s[ps->n++] = s;
    ps->n_power += !isnan(s.voltage_uv) && !isnan(s.current_ua);
    pthread_mutex_unlock(&ps->mu);
}

static void *sampler_main(void *arg)
{
    power_sampler *ps = arg;
    uint64_t next = monotonic_ns();
    const uint64_t period = (uint64_t)ps->period_ms * 1000000ull;
    while (!ps->stop) {
        next += period;
        /* sleep in slices so that stopping waits at most 2 ms */
        for (;;) {
            uint64_t now = monotonic_ns();
            if (ps->stop || now >= next) break;
            uint64_t left = next - now < 2000000ull ? next - now : 2000000ull;
            struct timespec ts = {0, (long)left};
            nanosleep(&ts, NULL);
        }
        if (ps->stop) break;
        take(ps, 1);
    }
    return NULL;
}

void power_start(power_sampler *ps, int period_ms)
{
    memset(ps, 0, sizeof *ps);
    pthread_mutex_init(&ps->mu, NULL);
    ps->period_ms = period_ms;
    ps->t0_ns = monotonic_ns();
    take(ps, 1);
    const power_sample *f = &ps->s[0];
    int readable = ps->n && ((!isnan(f->voltage_uv) && !isnan(f->current_ua)) ||
                             !isnan(f->gpu_mhz) || !isnan(f->cpu_mhz_max));
    if (period_ms > 0 && readable)
        ps->running = pthread_create(&ps->thread, NULL, sampler_main, ps) == 0;
}

int power_energy_pending(power_sampler *ps)
{
    if (!ps->running) return 0;
    pthread_mutex_lock(&ps->mu);
    int pending = ps->n_power == 1;
    pthread_mutex_unlock(&ps->mu);
    return pending;
}

void power_stop(power_sampler *ps)
{
    if (ps->running) {
        ps->stop = 1;
        pthread_join(ps->thread, NULL);
        ps->running = 0;
    }
    take(ps, 1);
}

void power_free(power_sampler *ps)
{
    free(ps->s);
    ps->s = NULL;
    pthread_mutex_destroy(&ps->mu);
}

/* Is a clock (offset of a double in power_sample) throttled: some sample below
 * (1 - THROTTLE_DROP) x the highest earlier sample? -1 when fewer than 2 samples read it. */
static int throttled(const power_sampler *ps, size_t off, double *drop_out)
{
    double peak = NAN, worst = 0;
    int seen = 0, flag = 0;
    for (int i = 0; i < ps->n; i++) {
        double v = *(const double *)((const char *)&ps->s[i] + off);
        if (isnan(v)) continue;
        seen++;
        if (!isnan(peak) && peak > 0) {
            double drop = 1.0 - v / peak;
            if (drop > worst) worst = drop;
            if (drop > THROTTLE_DROP) flag = 1;
        }
        if (isnan(peak) || v > peak) peak = v;
    }
    *drop_out = seen >= 2 ? worst : NAN;
    return seen >= 2 ? flag : -1;
}

static double first_or_last(const power_sampler *ps, size_t off, int last)
{
    if (!ps->n) return NAN;
    return *(const double *)((const char *)&ps->s[last ? ps->n - 1 : 0] + off);
}

/* Energy over the sampled window by the trapezoid rule on P_i = V_i x |I_i| (W):
 *   E = sum_i (t_{i+1} - t_i) (P_i + P_{i+1}) / 2,  mean power P = E / (t_last - t_first);
 * energy per iteration = P x measured_ms / n (the mean power over the iterations' own time).
 * Its uncertainty is the standard error of the mean power over the samples,
 *   u(P) = s(P_i) / sqrt(N)   (JCGM 100:2008 "GUM", 4.2.3: Type A evaluation),
 * carried the same way: u(E_iter) = u(P) x measured_ms / n. Samples close in time are
 * correlated, so u understates the error when the power varies slowly against the period.
 * |I| because vendors differ in the sign of a discharging battery's current.
 * The battery's current is the phone's consumption only while it discharges: on external
 * power (a sample with status other than Discharging, or a charger online) it is the
 * charger's input less the phone's draw, so no energy is reported then (energy_method
 * "none", with the reason in energy_caveat); with neither readable the figure assumes the
 * battery (energy_method "battery_current", caveat saying so). */
void power_write_json(jwriter *w, const power_sampler *ps, double measured_ms, int n)
{
    double e_j = 0, sum = 0, sum2 = 0, t_first = NAN, t_last = NAN, p_prev = NAN, t_prev = NAN;
    int np = 0;
    for (int i = 0; i < ps->n; i++) {
        const power_sample *s = &ps->s[i];
        if (isnan(s->voltage_uv) || isnan(s->current_ua)) continue;
        double p = s->voltage_uv * fabs(s->current_ua) * 1e-12;
        if (np) e_j += (s->t_s - t_prev) * (p + p_prev) / 2;
        else t_first = s->t_s;
        t_last = s->t_s;
        p_prev = p;
        t_prev = s->t_s;
        sum += p;
        sum2 += p * p;
        np++;
    }
    int external = -1;  /* 1 when any sample was on external power; 0 all on battery */
    for (int i = 0; i < ps->n; i++)
        if (ps->s[i].external > external) external = ps->s[i].external;
    int sampled = ps->period_ms > 0 && np >= 3 && t_last > t_first && n > 0;
    int ok = sampled && external != 1;
    double span = t_last - t_first;
    double mean_w = ok ? e_j / span : NAN;
    double mean_samples = np ? sum / np : NAN;
    double var = np > 1 ? (sum2 - np * mean_samples * mean_samples) / (np - 1) : NAN;
    double se_w = ok ? sqrt(var > 0 ? var : 0) / sqrt((double)np) : NAN;
    double iter_s = n > 0 ? measured_ms / 1e3 / n : NAN;
    double gpu_drop, cpu_drop;
    int gpu_thr = throttled(ps, offsetof(power_sample, gpu_mhz), &gpu_drop);
    int cpu_thr = throttled(ps, offsetof(power_sample, cpu_mhz_max), &cpu_drop);
    jw_obj_begin(w);
    jw_key(w, "sample_period_ms"); jw_int(w, ps->period_ms);
    jw_key(w, "sysfs_root"); jw_str(w, cond_sysfs_root());
    jw_key(w, "power_samples"); jw_int(w, np);
    jw_key(w, "sample_hz"); jw_num(w, ok ? (np - 1) / span : NAN);
    jw_key(w, "sampled_s"); jw_num(w, ok ? span : NAN);
    /* the window's start on the device's CLOCK_MONOTONIC: aligns it with other recordings
     * (an external power meter, a scripted sysfs file) taken on the same clock */
    jw_key(w, "sampled_from_monotonic_s"); jw_num(w, ok ? (double)ps->t0_ns / 1e9 + t_first : NAN);
    jw_key(w, "energy_j"); jw_num(w, ok ? e_j : NAN);
    jw_key(w, "mean_power_w"); jw_num(w, mean_w);
    jw_key(w, "mean_power_se_w"); jw_num(w, se_w);
    jw_key(w, "energy_per_iteration_mj"); jw_num(w, mean_w * iter_s * 1e3);
    jw_key(w, "energy_uncertainty_mj"); jw_num(w, se_w * iter_s * 1e3);
    jw_key(w, "battery_status_start"); jw_str(w, ps->status_start);
    jw_key(w, "battery_status_end"); jw_str(w, ps->status_end);
    jw_key(w, "chargers_online"); jw_str(w, ps->chargers);
    jw_key(w, "external_power");
    if (external < 0) jw_null(w); else jw_bool(w, external == 1);
    jw_key(w, "energy_method");
    if (ok) jw_str(w, external == 0 ? "battery_discharge" : "battery_current");
    else if (external == 1 && np > 0) jw_str(w, "none");
    else jw_null(w);
    jw_key(w, "energy_caveat");
    if (external == 1 && np > 0) {
        char caveat[512];
        snprintf(caveat, sizeof caveat, "on external power (battery status %s%s%s): the "
                 "battery current is the charger's input less the phone's draw, not its "
                 "consumption; unplug the phone (adb over Wi-Fi) to measure energy",
                 ps->status_end[0] ? ps->status_end : "unreadable",
                 ps->chargers[0] ? ", charger online: " : "", ps->chargers);
        jw_str(w, caveat);
    } else if (ok && external < 0) {
        jw_str(w, "battery status and chargers unreadable: assumes the phone ran on its "
                  "battery");
    } else {
        jw_null(w);
    }
    jw_key(w, "gpu_mhz_start"); jw_num(w, first_or_last(ps, offsetof(power_sample, gpu_mhz), 0));
    jw_key(w, "gpu_mhz_end"); jw_num(w, first_or_last(ps, offsetof(power_sample, gpu_mhz), 1));
    jw_key(w, "cpu_mhz_max_start");
    jw_num(w, first_or_last(ps, offsetof(power_sample, cpu_mhz_max), 0));
    jw_key(w, "cpu_mhz_max_end");
    jw_num(w, first_or_last(ps, offsetof(power_sample, cpu_mhz_max), 1));
    jw_key(w, "gpu_clock_drop"); jw_num(w, gpu_drop);
    jw_key(w, "cpu_clock_drop"); jw_num(w, cpu_drop);
    jw_key(w, "throttle_drop_threshold"); jw_num(w, THROTTLE_DROP);
    jw_key(w, "throttled");
    if (gpu_thr < 0 && cpu_thr < 0) jw_null(w);
    else jw_bool(w, gpu_thr == 1 || cpu_thr == 1);
    /* the samples the energy integrates: t_s from the window's start, power in W */
    jw_key(w, "samples");
    jw_obj_begin(w);
    jw_key(w, "t_s");
    jw_arr_begin(w);
    for (int i = 0; i < ps->n; i++)
        if (!isnan(ps->s[i].voltage_uv) && !isnan(ps->s[i].current_ua))
            jw_num(w, ps->s[i].t_s - t_first);
    jw_arr_end(w);
    jw_key(w, "power_w");
    jw_arr_begin(w);
    for (int i = 0; i < ps->n; i++)
        if (!isnan(ps->s[i].voltage_uv) && !isnan(ps->s[i].current_ua))
            jw_num(w, ps->s[i].voltage_uv * fabs(ps->s[i].current_ua) * 1e-12);
    jw_arr_end(w);
    jw_obj_end(w);
    jw_obj_end(w);
}
