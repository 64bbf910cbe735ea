/* JSON reader and writer: see json.h. Recursive descent; nesting limited to 64 levels. */
#define _POSIX_C_SOURCE 200809L
#include "json.h"
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s, *p;
    char *err;
    size_t errlen;
    int failed;
} jparser;

static void perr(jparser *ps, const char *what)
{
    if (ps->failed) return;
    ps->failed = 1;
    int line = 1, col = 1;
    for (const char *q = ps->s; q < ps->p; q++) {
        if (*q == '\n') { line++; col = 1; } else col++;
    }
    snprintf(ps->err, ps->errlen, "line %d col %d: %s", line, col, what);
}

static void skip_ws(jparser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

static void put_utf8(char **o, unsigned cp)
{
    char *q = *o;
    if (cp < 0x80) *q++ = (char)cp;
    else if (cp < 0x800) { *q++ = (char)(0xC0 | cp >> 6); *q++ = (char)(0x80 | (cp & 63)); }
    else if (cp < 0x10000) {
        *q++ = (char)(0xE0 | cp >> 12); *q++ = (char)(0x80 | ((cp >> 6) & 63));
        *q++ = (char)(0x80 | (cp & 63));
    } else {
        *q++ = (char)(0xF0 | cp >> 18); *q++ = (char)(0x80 | ((cp >> 12) & 63));
        *q++ = (char)(0x80 | ((cp >> 6) & 63)); *q++ = (char)(0x80 | (cp & 63));
    }
    *o = q;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static char *parse_string(jparser *ps)
{
    ps->p++;  /* opening quote */
    const char *start = ps->p;
    size_t n = 0;
    while (*ps->p && *ps->p != '"') { if (*ps->p == '\\' && ps->p[1]) ps->p++; ps->p++; n++; }
    if (*ps->p != '"') { perr(ps, "unterminated string"); return NULL; }
    char *out = xmalloc(n * 4 + 1), *o = out;
    for (const char *q = start; q < ps->p; q++) {
        if ((unsigned char)*q < 0x20) { ps->p = q; perr(ps, "control character in string"); free(out); return NULL; }
        if (*q != '\\') { *o++ = *q; continue; }
        q++;
        switch (*q) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(q + 1, &cp)) { ps->p = q; perr(ps, "bad \\u escape"); free(out); return NULL; }
            q += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && q[1] == '\\' && q[2] == 'u' && !hex4(q + 3, &lo)
                && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                q += 6;
            }
            put_utf8(&o, cp);
            break;
        }
        default: ps->p = q; perr(ps, "bad escape in string"); free(out); return NULL;
        }
    }
    *o = '\0';
    ps->p++;  /* closing quote */
    return out;
}

static void parse_value(jparser *ps, jval *v, int depth);

static void push(jval *v, int *cap)
{
    if (v->len == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        jval *ni = realloc(v->items, (size_t)*cap * sizeof *ni);
        if (!ni) fail(EXIT_INTERNAL, "out of host memory parsing JSON");
        v->items = ni;
        if (v->type == J_OBJ) {
            char **nk = realloc(v->keys, (size_t)*cap * sizeof *nk);
            if (!nk) fail(EXIT_INTERNAL, "out of host memory parsing JSON");
            v->keys = nk;
        }
    }
    memset(&v->items[v->len], 0, sizeof v->items[0]);
}

static void parse_number(jparser *ps, jval *v)
{
    const char *start = ps->p;
    const char *q = ps->p;
    int is_int = 1;
    if (*q == '-') q++;
    if (*q < '0' || *q > '9') { perr(ps, "unexpected character"); return; }
    while ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-') {
        if (*q == '.' || *q == 'e' || *q == 'E') is_int = 0;
        q++;
    }
    char *end;
    v->type = J_NUM;
    v->num = strtod(start, &end);
    if (end != q) { perr(ps, "malformed number"); return; }
    if (is_int) {
        v->inum = strtoll(start, &end, 10);
        v->is_int = (end == q);
    }
    ps->p = q;
}

static void parse_value(jparser *ps, jval *v, int depth)
{
    skip_ws(ps);
    if (depth > 64) { perr(ps, "nesting deeper than 64"); return; }
    char c = *ps->p;
    if (c == '{' || c == '[') {
        int is_obj = (c == '{'), cap = 0;
        v->type = is_obj ? J_OBJ : J_ARR;
        ps->p++;
        skip_ws(ps);
        if (*ps->p == (is_obj ? '}' : ']')) { ps->p++; return; }
        for (;;) {
            skip_ws(ps);
            push(v, &cap);
            if (is_obj) {
                if (*ps->p != '"') { perr(ps, "expected a string key"); return; }
                char *k = parse_string(ps);
                if (!k) return;
                v->keys[v->len] = k;
                skip_ws(ps);
                if (*ps->p != ':') { free(k); perr(ps, "expected ':'"); return; }
                ps->p++;
            }
            v->len++;
            parse_value(ps, &v->items[v->len - 1], depth + 1);
            if (ps->failed) return;
            skip_ws(ps);
            if (*ps->p == ',') { ps->p++; continue; }
            if (*ps->p == (is_obj ? '}' : ']')) { ps->p++; return; }
            perr(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
            return;
        }
    }
    if (c == '"') {
        v->type = J_STR;
        v->str = parse_string(ps);
        return;
    }
    if (!strncmp(ps->p, "true", 4)) { v->type = J_BOOL; v->num = 1; ps->p += 4; return; }
    if (!strncmp(ps->p, "false", 5)) { v->type = J_BOOL; v->num = 0; ps->p += 5; return; }
    if (!strncmp(ps->p, "null", 4)) { v->type = J_NULL; ps->p += 4; return; }
    if (c == '\0') { perr(ps, "unexpected end of input"); return; }
    parse_number(ps, v);
}

static void free_children(jval *v)
{
    for (int i = 0; i < v->len; i++) {
        free_children(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

jval *json_parse(const char *text, char *err, size_t errlen)
{
    jparser ps = {text, text, err, errlen, 0};
    jval *v = xcalloc(1, sizeof *v);
    parse_value(&ps, v, 0);
    skip_ws(&ps);
    if (!ps.failed && *ps.p) perr(&ps, "trailing characters after the JSON value");
    if (ps.failed) { json_free(v); return NULL; }
    return v;
}

void json_free(jval *v)
{
    if (!v) return;
    free_children(v);
    free(v);
}

const jval *json_get(const jval *obj, const char *key)
{
    if (!obj || obj->type != J_OBJ) return NULL;
    for (int i = 0; i < obj->len; i++)
        if (!strcmp(obj->keys[i], key)) return &obj->items[i];
    return NULL;
}

const char *json_type_name(jtype t)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return names[t];
}

/* ---- writer ---- */

void jw_init(jwriter *w) { memset(w, 0, sizeof *w); }
void jw_free(jwriter *w) { free(w->buf); memset(w, 0, sizeof *w); }

void jw_raw(jwriter *w, const char *s, size_t n)
{
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (w->len + n + 1 > cap) cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) fail(EXIT_INTERNAL, "out of host memory writing JSON");
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void jw_printf(jwriter *w, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof tmp) { jw_raw(w, tmp, (size_t)n); return; }
    char *big = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    jw_raw(w, big, (size_t)n);
    free(big);
}

/* A value is about to be written: separate it from its predecessor. */
static void before_value(jwriter *w)
{
    if (w->depth > 0 && w->need_comma[w->depth] == 1) jw_raw(w, ",", 1);
    if (w->depth > 0) w->need_comma[w->depth] = 1;
}

static void str_body(jwriter *w, const char *s);

void jw_key(jwriter *w, const char *key)
{
    before_value(w);
    str_body(w, key);
    jw_raw(w, ":", 1);
    w->need_comma[w->depth] = 2;  /* the value that follows takes no comma */
}

static void open_(jwriter *w, char c)
{
    if (w->need_comma[w->depth] == 2) w->need_comma[w->depth] = 1; else before_value(w);
    jw_raw(w, &c, 1);
    if (w->depth < 63) w->depth++;
    w->need_comma[w->depth] = 0;
}

static void close_(jwriter *w, char c)
{
    jw_raw(w, &c, 1);
    if (w->depth > 0) w->depth--;
}

static void scalar(jwriter *w)
{
    if (w->need_comma[w->depth] == 2) w->need_comma[w->depth] = 1; else before_value(w);
}

void jw_obj_begin(jwriter *w) { open_(w, '{'); }
void jw_obj_end(jwriter *w) { close_(w, '}'); }
void jw_arr_begin(jwriter *w) { open_(w, '['); }
void jw_arr_end(jwriter *w) { close_(w, ']'); }

static void str_body(jwriter *w, const char *s)
{
    jw_raw(w, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') { esc[0] = '\\'; esc[1] = (char)*p; jw_raw(w, esc, 2); }
        else if (*p == '\n') jw_raw(w, "\\n", 2);
        else if (*p == '\t') jw_raw(w, "\\t", 2);
        else if (*p == '\r') jw_raw(w, "\\r", 2);
        else if (*p < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", *p); jw_raw(w, esc, 6); }
        else jw_raw(w, (const char *)p, 1);
    }
    jw_raw(w, "\"", 1);
}

void jw_str(jwriter *w, const char *s)
{
    if (!s) { jw_null(w); return; }
    scalar(w);
    str_body(w, s);
}

void jw_int(jwriter *w, long long v) { scalar(w); jw_printf(w, "%lld", v); }

void jw_num(jwriter *w, double v)
{
    if (!isfinite(v)) { jw_null(w); return; }
    scalar(w);
    jw_printf(w, "%.17g", v);
}

void jw_value_raw(jwriter *w, const char *json, size_t n) { scalar(w); jw_raw(w, json, n); }

void jw_bool(jwriter *w, int v) { scalar(w); jw_raw(w, v ? "true" : "false", v ? 4 : 5); }
void jw_null(jwriter *w) { scalar(w); jw_raw(w, "null", 4); }
