/* A small JSON reader (RFC 8259, into a tree) and writer (into a growable buffer). */
#ifndef PHONETRAIN_JSON_H
#define PHONETRAIN_JSON_H

#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    double num;           /* J_NUM (and J_BOOL: 0/1) */
    long long inum;       /* J_NUM written without fraction or exponent */
    int is_int;           /* 1 when inum holds the exact value */
    char *str;            /* J_STR (UTF-8, unescaped) */
    struct jval *items;   /* J_ARR elements / J_OBJ values */
    char **keys;          /* J_OBJ keys */
    int len;              /* element or member count */
} jval;

/* Parses `text`. Returns NULL on a syntax error and writes "line L col C: what" into err. */
jval *json_parse(const char *text, char *err, size_t errlen);
void json_free(jval *v);

const jval *json_get(const jval *obj, const char *key);   /* NULL if absent or not an object */
const char *json_type_name(jtype t);

/* Growable output buffer with a comma-tracking JSON writer. */
typedef struct {
    char *buf;
    size_t len, cap;
    int depth;
    int need_comma[64];
} jwriter;

void jw_init(jwriter *w);
void jw_free(jwriter *w);
void jw_raw(jwriter *w, const char *s, size_t n);
void jw_printf(jwriter *w, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void jw_obj_begin(jwriter *w);
void jw_obj_end(jwriter *w);
void jw_arr_begin(jwriter *w);
void jw_arr_end(jwriter *w);
void jw_key(jwriter *w, const char *key);     /* next value belongs to this key */
void jw_str(jwriter *w, const char *s);       /* NULL writes null */
void jw_int(jwriter *w, long long v);
void jw_num(jwriter *w, double v);            /* non-finite writes null */
void jw_bool(jwriter *w, int v);
void jw_null(jwriter *w);
void jw_value_raw(jwriter *w, const char *json, size_t n);   /* an already-encoded value */

#endif
