/* Shared helpers: see util.h. POSIX 2008 only, so it builds with glibc, musl and Bionic. */
#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static fail_hook_fn g_fail_hook;
static int g_failing;

void set_fail_hook(fail_hook_fn hook) { g_fail_hook = hook; }

_Noreturn void fail(int code, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "runner: %s\n", msg);
    fflush(stderr);
    if (g_fail_hook && !g_failing) {
        g_failing = 1;  /* a failure inside the hook must not recurse */
        g_fail_hook(code, msg);
    }
    exit(code);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) fail(EXIT_INTERNAL, "out of host memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) fail(EXIT_INTERNAL, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        char *nb = realloc(buf, cap + 1);
        if (!nb) { free(buf); fclose(f); errno = ENOMEM; return NULL; }
        buf = nb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); errno = EIO; return NULL; }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    int bad = (put != len) | (fclose(f) != 0);
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

char *path_join(const char *dir, const char *rel)
{
    if (!dir || !*dir || rel[0] == '/') return xstrdup(rel);
    size_t a = strlen(dir), b = strlen(rel);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, rel, b + 1);
    return p;
}

int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    return 0;
}

long long peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
#if defined(__APPLE__)
    return (long long)ru.ru_maxrss;          /* bytes on macOS */
#else
    return (long long)ru.ru_maxrss * 1024;   /* KiB on Linux and Android */
#endif
}
