/* Shared helpers of the runner: exit codes, the one-line failure path, clocks, files. */
#ifndef PHONETRAIN_UTIL_H
#define PHONETRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define RUNNER_VERSION "0.1.0"
#ifndef RUNNER_SOURCE_HASH
#define RUNNER_SOURCE_HASH "unknown"
#endif

/* Exit codes, one per failure class (documented in README.md, mirrored in runner.py). */
enum {
    EXIT_OK = 0,
    EXIT_INTERNAL = 1,      /* out of memory, cannot write outputs, runner bug */
    EXIT_BAD_INPUT = 2,     /* bad command-line arguments or plan */
    EXIT_BUNDLE = 3,        /* bundle file missing, unreadable or of the wrong size */
    EXIT_NO_DEVICE = 4,     /* no OpenCL library, or no platform/device matches the selector */
    EXIT_BUILD = 5,         /* OpenCL program build failed (compiler log on stderr) */
    EXIT_CL_RUNTIME = 6,    /* an OpenCL call failed at run time (call and error name) */
    EXIT_NONFINITE = 7,     /* the loss became NaN or infinite */
    EXIT_NO_LIBRARY = 8,    /* an external library the plan needs (CLBlast; libvulkan, a
                               Vulkan driver) cannot be loaded, or the device lacks image
                               support a plan needs */
    EXIT_OUT_OF_MEMORY = 9  /* the plan's tensors do not fit: an OpenCL buffer could not be
                               allocated (CL_MEM_OBJECT_ALLOCATION_FAILURE anywhere; at buffer
                               creation also CL_INVALID_BUFFER_SIZE, CL_OUT_OF_RESOURCES,
                               CL_OUT_OF_HOST_MEMORY), or a tensor's host array */
};

/* Called by fail() before exiting, e.g. to write a "failed" run.json; may be NULL. */
typedef void (*fail_hook_fn)(int code, const char *message);
void set_fail_hook(fail_hook_fn hook);

/* Prints "runner: <message>" as one line on stderr, runs the fail hook, exits with `code`. */
_Noreturn void fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void *xmalloc(size_t n);       /* malloc or fail(EXIT_INTERNAL) */
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

uint64_t monotonic_ns(void);   /* CLOCK_MONOTONIC in ns */

/* Reads a whole file; returns NULL (errno set) if it cannot. *len gets its size in bytes. */
char *read_file(const char *path, size_t *len);

/* Writes `len` bytes to `path` atomically: `path.tmp.<pid>`, fsync-free, then rename(2).
 * Returns 0, or -1 with errno set. */
int write_file_atomic(const char *path, const void *data, size_t len);

/* Joins a directory and a relative path into a new string ("dir/rel"). */
char *path_join(const char *dir, const char *rel);

/* mkdir -p for one or two levels; returns 0 or -1 with errno set. */
int make_dirs(const char *path);

/* Peak resident set size of this process in bytes (getrusage). */
long long peak_rss_bytes(void);

#endif
