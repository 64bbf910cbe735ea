/* The ledger of one invocation's output files: each file's path relative to --out, its size in
 * bytes and its SHA-256, so that whoever reads the folder later (after a pull from a phone, or
 * months later) can tell a whole file from one cut short, grown or replaced. */
#ifndef PHONETRAIN_LEDGER_H
#define PHONETRAIN_LEDGER_H

#include <stddef.h>

#include "json.h"

/* SHA-256 (FIPS 180-4) of `len` bytes as 64 lower-case hex digits plus NUL into `hex`. */
void sha256_hex(const void *data, size_t len, char hex[65]);

/* Records that `rel` (a path relative to the output folder) now holds `data`. */
void ledger_record(const char *rel, const void *data, size_t len);

/* Forgets every recorded file: the next output folder's ledger starts empty (a side-by-side
 * run writes two folders, one after the other). */
void ledger_reset(void);

/* Writes {"<rel>": {"size_bytes": n, "sha256": "..."}, ...} for every recorded file. */
void ledger_write_json(jwriter *w);

#endif
