/*
 * json_scan.h — a JSON parser for the common case, driving the same
 * callbacks as PostgreSQL's pg_parse_json.
 */
#ifndef PAIDB_JSON_SCAN_H
#define PAIDB_JSON_SCAN_H

#include "common/jsonapi.h"

/*
 * Parse `len` bytes of JSON text, calling sem's callbacks exactly as
 * pg_parse_json would for it (the same order, tokens and isnull flags).
 * Returns false, having possibly called some of them, when the text is
 * not plain valid JSON: a string holds a \u escape or a control character,
 * or anything is out of place.  The caller then discards what the
 * callbacks built and parses the text with pg_parse_json, which handles
 * escapes and reports errors in its own words.
 */
extern bool json_scan_plain(const char *text, int len, JsonSemAction *sem);

#endif							/* PAIDB_JSON_SCAN_H */
