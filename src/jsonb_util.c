/*
 * jsonb_util.c — small helpers to read and rebuild binary jsonb values.
 *
 * Every writer of paidb works on PostgreSQL's binary jsonb directly: a
 * framework snapshot can be megabytes, and a text round trip per event
 * would dominate the cost of applying it.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"

#include "jsonb_util.h"

/* Look up a path of object keys; false if any step is missing or not an object. */
bool
jb_get_path(JsonbContainer *root, JsonbValue *out, int npath, const char *const *path)
{
	JsonbContainer *jc = root;
	int			i;

	if (jc == NULL)
		return false;
	for (i = 0; i < npath; i++)
	{
		JsonbValue *v;

		if (!JsonContainerIsObject(jc))
			return false;
		v = getKeyJsonValueFromContainer(jc, path[i], strlen(path[i]), out);
		if (v == NULL)
			return false;
		if (i < npath - 1)
		{
			if (out->type != jbvBinary)
				return false;
			jc = out->val.binary.data;
		}
	}
	return true;
}

/* The string at a path as a palloc'd C string, or NULL if absent / not a string. */
char *
jb_get_cstring(JsonbContainer *root, int npath, const char *const *path)
{
	JsonbValue	v;

	if (!jb_get_path(root, &v, npath, path) || v.type != jbvString)
		return NULL;
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/* The container at a path if it is an object, else NULL. */
JsonbContainer *
jb_get_object(JsonbContainer *root, int npath, const char *const *path)
{
	JsonbValue	v;

	if (npath == 0)
		return (root && JsonContainerIsObject(root)) ? root : NULL;
	if (!jb_get_path(root, &v, npath, path) || v.type != jbvBinary ||
		!JsonContainerIsObject(v.val.binary.data))
		return NULL;
	return v.val.binary.data;
}

/* Whether a jsonb value is an object (not an array, not a scalar). */
bool
jb_is_object(Jsonb *jb)
{
	return JB_ROOT_IS_OBJECT(jb);
}

/* Whether a container is an object. */
bool
jb_container_is_object(JsonbContainer *jc)
{
	return JsonContainerIsObject(jc) != 0;
}

/* A string JsonbValue for a C string (not copied). */
void
jb_string_value(JsonbValue *v, const char *s)
{
	v->type = jbvString;
	v->val.string.val = (char *) s;
	v->val.string.len = strlen(s);
}

/* A binary JsonbValue wrapping a container (not copied). */
void
jb_container_value(JsonbValue *v, JsonbContainer *jc)
{
	v->type = jbvBinary;
	v->val.binary.data = jc;
	v->val.binary.len = 0;
}

/* Push one object member; containers are pushed as binary values. */
static void
push_member(JsonbParseState **st, const char *key, int keylen, JsonbValue *val)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = keylen;
	pushJsonbValue(st, WJB_KEY, &k);
	pushJsonbValue(st, WJB_VALUE, val);
}

/*
 * Copy a top-level object replacing or removing the named members.
 */
JsonbValue *
jb_object_replace(JsonbContainer *obj, int nkeys, const char *const *keys,
				  JsonbValue *const *vals)
{
	JsonbParseState *st = NULL;
	int			i;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	if (obj != NULL && JsonContainerIsObject(obj))
	{
		JsonbIterator *it = JsonbIteratorInit(obj);
		JsonbValue	v;
		JsonbIteratorToken tok;
		bool		skip = false;
		char	   *curkey = NULL;
		int			curlen = 0;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
			{
				skip = false;
				for (i = 0; i < nkeys; i++)
				{
					if (v.val.string.len == (int) strlen(keys[i]) &&
						memcmp(v.val.string.val, keys[i], v.val.string.len) == 0)
					{
						skip = true;
						break;
					}
				}
				curkey = v.val.string.val;
				curlen = v.val.string.len;
			}
			else if (tok == WJB_VALUE && !skip)
				push_member(&st, curkey, curlen, &v);
		}
	}
	for (i = 0; i < nkeys; i++)
	{
		if (vals[i] != NULL)
			push_member(&st, keys[i], strlen(keys[i]), vals[i]);
	}
	return pushJsonbValue(&st, WJB_END_OBJECT, NULL);
}

/* Two containers hold equal JSON. */
bool
jb_container_equal(JsonbContainer *a, JsonbContainer *b)
{
	return compareJsonbContainers(a, b) == 0;
}

/*
 * Parse JSON text into jsonb (raises ERROR on invalid JSON).  Text already
 * NUL-terminated at len is parsed in place: a large object is not copied.
 */
Jsonb *
jb_from_text(const char *text, int len)
{
	const char *cstr = text[len] == '\0' ? text : pnstrdup(text, len);

	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(cstr)));
}

/* Serialise a container as compact JSON text (palloc'd). */
char *
jb_to_text(JsonbContainer *jc, int estimated_len)
{
	return JsonbToCString(NULL, jc, estimated_len);
}
