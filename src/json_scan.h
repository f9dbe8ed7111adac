/*
 * json_scan.h — JSON text straight to jsonb, for the common case.
 */
#ifndef PAIDB_JSON_SCAN_H
#define PAIDB_JSON_SCAN_H

#include "utils/jsonb.h"

/* What json_scan_to_jsonb builds besides the text's own value */
typedef struct JsonScanOptions
{
	/* a member added at the end of the object at this path (NULL: none) */
	int			add_npath;
	const char *const *add_path;
	const char *add_key;
	JsonbValue *add_value;		/* a scalar */
	/* a member of the root object left out, its value still checked (NULL: none) */
	const char *skip_key;
} JsonScanOptions;

/*
 * The jsonb that jsonb_in builds from `len` bytes of JSON text (with the
 * options' member added or left out, as jb_from_text_adding and
 * jb_from_text_without describe), byte for byte, allocated in
 * result_cxt.  Returns NULL when the text is not plain valid JSON (a
 * string holds a \u escape or a control character, anything is out of
 * place) or is too large to be sure of jsonb's limits: the caller then
 * parses it with pg_parse_json, whose errors and escapes stay PostgreSQL's
 * own.  An ERROR raised here (numeric_in refusing a number) is the one
 * jsonb_in raises for the same text.
 */
extern Jsonb *json_scan_to_jsonb(const char *text, int len, const JsonScanOptions *opts,
								 MemoryContext result_cxt);

/*
 * The bytes that end a plain run inside a JSON string: '"', '\\' and the
 * control characters (which JSON text escapes and jsonb_out writes
 * escaped).  A table: one load a byte where the comparisons were three.
 */
extern const bool json_string_special[256];

#endif							/* PAIDB_JSON_SCAN_H */
