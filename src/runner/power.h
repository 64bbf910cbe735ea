/* Energy and clocks during the measured iterations: a sampler thread reads the battery's
 * voltage_now (uV), current_now (uA) and status, the chargers' online flags (usb, ac,
 * wireless, dc), the GPU clock and the fastest CPU clock every
 * --power-sample-ms, under the sysfs root (cond_sysfs_root(): --sysfs-root, else
 * $PHONETRAIN_SYSFS_ROOT, else /sys). Formulas and the throttling rule: power_write_json. */
#ifndef PHONETRAIN_POWER_H
#define PHONETRAIN_POWER_H

#include <pthread.h>
#include <stdint.h>

#include "json.h"

typedef struct {
    double t_s;            /* CLOCK_MONOTONIC, s, since the sampler started */
    double voltage_uv;     /* power_supply/battery/voltage_now; NaN: unreadable */
    double current_ua;     /* power_supply/battery/current_now (sign vendor-specific); NaN */
    double gpu_mhz;        /* kgsl gpuclk (Hz) or Mali devfreq cur_freq (Hz) -> MHz; NaN */
    double cpu_mhz_max;    /* fastest cpufreq scaling_cur_freq (kHz) -> MHz; NaN */
    int external;          /* on external power: 1 (battery status other than Discharging,
                            * or a charger's online = 1), 0 (Discharging, no charger online),
                            * -1 (neither readable) */
} power_sample;

typedef struct {
    int period_ms;         /* 0: no thread, only the start and end samples */
    uint64_t t0_ns;
    pthread_t thread;
    int running;
    volatile int stop;
    pthread_mutex_t mu;
    power_sample *s;
    int n, cap;
    int n_power;           /* samples with the battery's voltage and current read */
    char status_start[24], status_end[24];  /* battery status text ("" unreadable) */
    char chargers[64];     /* names of the chargers seen online, comma-separated */
} power_sampler;

/* Takes the start sample and, when period_ms > 0 and the battery's voltage and current or a
 * clock are readable, starts the sampler thread. */
void power_start(power_sampler *ps, int period_ms);
/* 1 while the battery is readable, the thread runs and fewer than 2 samples read it: with the
 * end sample that is under the 3 an energy figure needs (power_write_json). */
int power_energy_pending(power_sampler *ps);
/* Stops the thread (if any) and takes the end sample. */
void power_stop(power_sampler *ps);
/* The "power" object of run.json; measured_ms: the measured iterations' summed wall time, n
 * their count. */
void power_write_json(jwriter *w, const power_sampler *ps, double measured_ms, int n);
void power_free(power_sampler *ps);

#endif
