/*
 * jsonb_util.h — small helpers to read and rebuild binary jsonb values
 * without going through text.
 */
#ifndef PAIDB_JSONB_UTIL_H
#define PAIDB_JSONB_UTIL_H

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

/* Look up a path of object keys; false if any step is missing or not an object. */
extern bool jb_get_path(JsonbContainer *root, JsonbValue *out,
						int npath, const char *const *path);

/* The string at a path as a palloc'd C string, or NULL if absent / not a string. */
extern char *jb_get_cstring(JsonbContainer *root, int npath, const char *const *path);

/* The container at a path if it is an object, else NULL. */
extern JsonbContainer *jb_get_object(JsonbContainer *root, int npath, const char *const *path);

/* Whether a jsonb value is an object (not an array, not a scalar). */
extern bool jb_is_object(Jsonb *jb);

/* Whether a container is an object. */
extern bool jb_container_is_object(JsonbContainer *jc);

/* A string JsonbValue for a C string (not copied). */
extern void jb_string_value(JsonbValue *v, const char *s);

/* A binary JsonbValue wrapping a container (not copied). */
extern void jb_container_value(JsonbValue *v, JsonbContainer *jc);

/*
 * Copy the top-level object `obj` replacing members: for each keys[i], the
 * member is set to vals[i], or removed when vals[i] is NULL.  Members not
 * named are copied unchanged.  `obj` may be NULL (start from {}).
 */
extern JsonbValue *jb_object_replace(JsonbContainer *obj, int nkeys,
									 const char *const *keys, JsonbValue *const *vals);

/*
 * An edit of an object's members: keys[i] set to vals[i] (removed when
 * vals[i] is NULL), and, when json_key is set, that member set to the JSON
 * text json (json_len bytes), parsed straight into place.
 */
typedef struct JbMemberEdit
{
	int			nkeys;
	const char *const *keys;
	JsonbValue *const *vals;
	const char *json_key;
	const char *json;
	int			json_len;
} JbMemberEdit;

/*
 * Copy object obj (NULL: {}) with the edit applied to the object found npath
 * keys below it (path; created when missing), copying the whole once.
 * NULL when the edit's JSON text is not valid JSON.
 */
extern JsonbValue *jb_object_edit(JsonbContainer *obj, int npath, const char *const *path,
								  const JbMemberEdit *edit);

/*
 * Copy object obj (NULL: {}) replacing or removing (vals[i] NULL) the
 * named members, as JsonbValueToJsonb(jb_object_replace(...)) but copying
 * the other members' bytes rather than unpacking and encoding them again.
 */
extern Jsonb *jb_object_replaced(JsonbContainer *obj, int nkeys, const char *const *keys,
								 JsonbValue *const *vals);

/*
 * The object of only the named members of obj (NULL: {}): keys[i] set to
 * vals[i], or to obj's member when vals[i] is NULL (absent if obj has none),
 * copying bytes as jb_object_replaced does.  The keys must be distinct.
 */
extern Jsonb *jb_object_selected(JsonbContainer *obj, int nkeys, const char *const *keys,
								 JsonbValue *const *vals);

/* Two containers hold equal JSON. */
extern bool jb_container_equal(JsonbContainer *a, JsonbContainer *b);

/* Parse JSON text into jsonb (raises ERROR on invalid JSON). */
extern Jsonb *jb_from_text(const char *text, int len);
/* jb_from_text's own parser for large text (as jsonb_in, tree freed early) */
extern Jsonb *jb_from_large_text(const char *text, int len);
/*
 * Parse only with PostgreSQL's parser, never src/json_scan.c (false): for
 * the fuzzer, which compares the two.
 */
extern bool jb_parse_with_postgres_only;
/*
 * Parse JSON text into jsonb adding member key = value (a scalar) to the
 * object found npath keys below the root (path), if there is one: the same
 * as parsing and then setting it, in one pass.
 */
extern Jsonb *jb_from_text_adding(const char *text, int len, int npath, const char *const *path,
								  const char *key, JsonbValue *value);

/*
 * Parse JSON text into jsonb leaving out the member top_key of the root
 * object: for a reader that ignores it.  Its value is checked only for
 * balanced strings and brackets (the rest of the text as JSON).
 */
extern Jsonb *jb_from_text_without(const char *text, int len, const char *top_key);

/*
 * Append a container's JSON text, as JsonbToCString writes it, leaving out
 * the member at path skip (nskip keys below the root) if there is one.
 */
extern void jb_print(StringInfo out, JsonbContainer *jc, int nskip, const char *const *skip);

/* Serialise a container as compact JSON text (palloc'd), as jb_print. */
extern char *jb_to_text(JsonbContainer *jc, int estimated_len);

#endif							/* PAIDB_JSONB_UTIL_H */
