/* Runner modes `bench-gemm` (GEMM GFLOPS per kernel version, CLBlast or the CPU backend) and
 * `bench-peak` (clpeak-style peak compute and bandwidth: the device's roofline). */
#ifndef PHONETRAIN_BENCH_GEMM_H
#define PHONETRAIN_BENCH_GEMM_H

/* runner bench-gemm --spec SPEC.json --out DIR [--platform S] [--device S]
 *                   [--device-type gpu|cpu|accelerator|all] [--cl-lib PATH] [--clblast-lib PATH]
 * Writes DIR/gemm.json. Returns the exit code (EXIT_OK also when CLBlast is absent: the
 * output then says "status": "skipped" with the reason). Spec and output: bench_gemm.c. */
int bench_gemm_main(int argc, char **argv);

/* runner bench-peak --out DIR [selectors as above] [--min-time-ms T] [--work-items N];
 * writes DIR/peaks.json. */
int bench_peak_main(int argc, char **argv);

#endif
