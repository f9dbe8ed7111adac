/*
 * jsonb_util.c — small helpers to read and rebuild binary jsonb values.
 *
 * Every writer of paidb works on PostgreSQL's binary jsonb directly: a
 * framework snapshot can be megabytes, and a text round trip per event
 * would dominate the cost of applying it.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/jsonfuncs.h"
#include "utils/memutils.h"

#include "json_scan.h"
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

/* Two containers hold equal JSON. */
bool
jb_container_equal(JsonbContainer *a, JsonbContainer *b)
{
	return compareJsonbContainers(a, b) == 0;
}

/* Text from which jb_from_text builds jsonb itself rather than by jsonb_in */
#define JB_LARGE_TEXT	(1024 * 1024)

/* See jsonb_util.h. */
bool		jb_parse_with_postgres_only = false;

/* What the large-text parser builds */
typedef struct JbBuild
{
	JsonLexContext *lex;
	JsonbParseState *state;
	JsonbValue *result;
	/* jb_from_text_adding: a member added to the object at a path */
	int			add_npath;
	const char *const *add_path;
	const char *add_key;
	JsonbValue *add_value;
	int			depth;			/* containers open */
	int			on_path;		/* the first on_path of them lie on add_path */
	const char *lastkey;		/* the key whose value comes next */
	/* jb_from_text_without: a top-level member left out, and whether in it */
	const char *skip_key;
	bool		skipping;
} JbBuild;

/* A string's length, if jsonb can hold it (as jsonb_in checks) */
static int
jb_string_len(size_t len)
{
	if (len > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("string too long to represent as jsonb string"),
				 errdetail("Due to an implementation restriction, jsonb strings cannot exceed %d bytes.",
						   JENTRY_OFFLENMASK)));
	return (int) len;
}

/* Parser callback: an object begins */
static void
jb_build_object_start(void *arg)
{
	JbBuild    *b = arg;

	b->depth++;
	if (b->skipping)
		return;
	if (b->add_key != NULL && b->on_path == b->depth - 1 &&
		(b->depth == 1 || (b->depth - 1 <= b->add_npath && b->lastkey != NULL &&
						   strcmp(b->lastkey, b->add_path[b->depth - 2]) == 0)))
		b->on_path = b->depth;
	b->result = pushJsonbValue(&b->state, WJB_BEGIN_OBJECT, NULL);
}

/* Parser callback: an object ends */
static void
jb_build_object_end(void *arg)
{
	JbBuild    *b = arg;

	if (b->skipping)
	{
		b->depth--;
		return;
	}
	if (b->add_key != NULL && b->on_path == b->depth && b->depth == b->add_npath + 1)
	{
		JsonbValue	k;

		jb_string_value(&k, b->add_key);
		pushJsonbValue(&b->state, WJB_KEY, &k);
		pushJsonbValue(&b->state, WJB_VALUE, b->add_value);
	}
	if (b->on_path == b->depth)
		b->on_path--;
	b->depth--;
	b->result = pushJsonbValue(&b->state, WJB_END_OBJECT, NULL);
}

/* Parser callback: an array begins */
static void
jb_build_array_start(void *arg)
{
	JbBuild    *b = arg;

	b->depth++;
	if (!b->skipping)
		b->result = pushJsonbValue(&b->state, WJB_BEGIN_ARRAY, NULL);
}

/* Parser callback: an array ends */
static void
jb_build_array_end(void *arg)
{
	JbBuild    *b = arg;

	b->depth--;
	if (!b->skipping)
		b->result = pushJsonbValue(&b->state, WJB_END_ARRAY, NULL);
}

/* Parser callback: an object key */
static void
jb_build_field(void *arg, char *fname, bool isnull)
{
	JbBuild    *b = arg;
	JsonbValue	v;

	if (b->skipping)
		return;
	if (b->skip_key != NULL && b->depth == 1 && strcmp(fname, b->skip_key) == 0)
	{
		/* until this member's value ends: still lexed and checked, not built */
		b->skipping = true;
		return;
	}
	v.type = jbvString;
	v.val.string.len = jb_string_len(strlen(fname));
	v.val.string.val = fname;
	b->result = pushJsonbValue(&b->state, WJB_KEY, &v);
	b->lastkey = fname;
}

/* Parser callback: an object member's value has ended */
static void
jb_build_field_end(void *arg, char *fname, bool isnull)
{
	JbBuild    *b = arg;

	if (b->skipping && b->depth == 1)
		b->skipping = false;
}

/*
 * Parser callback: a scalar.  The token is the parser's own copy; the
 * lexer's buffer behind a large string is let go at once (the next string
 * starts it afresh), so a huge string is not held three times.
 */
static void
jb_build_scalar(void *arg, char *token, JsonTokenType type)
{
	JbBuild    *b = arg;
	JsonbValue	v;

	if (b->skipping)
	{
		/* a huge skipped string is let go as a built one is */
		if (b->lex != NULL && b->lex->strval != NULL && b->lex->strval->maxlen > JB_LARGE_TEXT)
		{
			pfree(b->lex->strval->data);
			initStringInfo(b->lex->strval);
		}
		return;
	}
	switch (type)
	{
		case JSON_TOKEN_STRING:
			v.type = jbvString;
			v.val.string.len = jb_string_len(strlen(token));
			v.val.string.val = token;
			if (b->lex != NULL && b->lex->strval != NULL && b->lex->strval->maxlen > JB_LARGE_TEXT)
			{
				pfree(b->lex->strval->data);
				initStringInfo(b->lex->strval);
			}
			break;
		case JSON_TOKEN_NUMBER:
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
			v.type = jbvBool;
			v.val.boolean = true;
			break;
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = false;
			break;
		case JSON_TOKEN_NULL:
			v.type = jbvNull;
			break;
		default:
			elog(ERROR, "unexpected JSON token type %d", (int) type);
	}
	if (b->state == NULL)
	{
		/* a scalar alone: jsonb keeps it as a one-element raw array */
		JsonbValue	va;

		va.type = jbvArray;
		va.val.array.rawScalar = true;
		va.val.array.nElems = 1;
		b->result = pushJsonbValue(&b->state, WJB_BEGIN_ARRAY, &va);
		b->result = pushJsonbValue(&b->state, WJB_ELEM, &v);
		b->result = pushJsonbValue(&b->state, WJB_END_ARRAY, NULL);
	}
	else if (b->state->contVal.type == jbvArray)
		b->result = pushJsonbValue(&b->state, WJB_ELEM, &v);
	else
		b->result = pushJsonbValue(&b->state, WJB_VALUE, &v);
}

/* The parser callbacks that build jsonb into b. */
static void
jb_build_actions(JsonSemAction *sem, JbBuild *b)
{
	memset(sem, 0, sizeof(*sem));
	sem->semstate = b;
	sem->object_start = jb_build_object_start;
	sem->object_end = jb_build_object_end;
	sem->array_start = jb_build_array_start;
	sem->array_end = jb_build_array_end;
	sem->object_field_start = jb_build_field;
	if (b->skip_key != NULL)
		sem->object_field_end = jb_build_field_end;
	sem->scalar = jb_build_scalar;
}

/*
 * Parse JSON text straight into a parse state, as the value of the member
 * just pushed (the large-text parser's callbacks).  Syntax errors are
 * returned, not raised; *st is then unusable.
 */
static JsonParseErrorType
push_json_text(JsonbParseState **st, const char *text, int len)
{
	JsonSemAction sem;
	JbBuild		b;
	JsonParseErrorType rc;

	memset(&b, 0, sizeof(b));
	b.lex = makeJsonLexContextCstringLen((char *) text, len, GetDatabaseEncoding(), true);
	b.state = *st;
	jb_build_actions(&sem, &b);
	rc = pg_parse_json(b.lex, &sem);
	*st = b.state;
	return rc;
}

/*
 * Push a copy of object obj (NULL: {}) with the edit applied to the object
 * npath keys below it (created when missing).  Each container is unpacked
 * once on the way, so an edit deep inside a large object costs one copy of
 * it rather than one per level.  False when the edit's JSON text is not
 * valid JSON.
 */
static bool
push_object_edited(JsonbParseState **st, JsonbContainer *obj, int npath, const char *const *path,
				   const JbMemberEdit *edit, JsonbValue **result)
{
	bool		found = false;
	int			i;

	check_stack_depth();
	pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
	if (obj != NULL && JsonContainerIsObject(obj))
	{
		JsonbIterator *it = JsonbIteratorInit(obj);
		JsonbValue	v;
		JsonbIteratorToken tok;
		char	   *curkey = NULL;
		int			curlen = 0;

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			bool		named = false;

			if (tok == WJB_KEY)
			{
				curkey = v.val.string.val;
				curlen = v.val.string.len;
				continue;
			}
			if (tok != WJB_VALUE)
				continue;
			if (npath > 0)
				named = curlen == (int) strlen(path[0]) && memcmp(curkey, path[0], curlen) == 0;
			else
			{
				for (i = 0; i < edit->nkeys && !named; i++)
					named = curlen == (int) strlen(edit->keys[i]) && memcmp(curkey, edit->keys[i], curlen) == 0;
				if (!named && edit->json_key != NULL)
					named = curlen == (int) strlen(edit->json_key) &&
						memcmp(curkey, edit->json_key, curlen) == 0;
			}
			if (!named)
				push_member(st, curkey, curlen, &v);
			else if (npath > 0 && !found)
			{
				JsonbValue	k;

				found = true;
				jb_string_value(&k, path[0]);
				pushJsonbValue(st, WJB_KEY, &k);
				if (!push_object_edited(st, v.type == jbvBinary ? v.val.binary.data : NULL,
										npath - 1, path + 1, edit, result))
					return false;
			}
		}
	}
	if (npath > 0 && !found)
	{
		JsonbValue	k;

		jb_string_value(&k, path[0]);
		pushJsonbValue(st, WJB_KEY, &k);
		if (!push_object_edited(st, NULL, npath - 1, path + 1, edit, result))
			return false;
	}
	if (npath == 0)
	{
		for (i = 0; i < edit->nkeys; i++)
		{
			if (edit->vals[i] != NULL)
				push_member(st, edit->keys[i], strlen(edit->keys[i]), edit->vals[i]);
		}
		if (edit->json_key != NULL)
		{
			JsonbValue	k;

			jb_string_value(&k, edit->json_key);
			pushJsonbValue(st, WJB_KEY, &k);
			if (push_json_text(st, edit->json, edit->json_len) != JSON_SUCCESS)
				return false;
		}
	}
	*result = pushJsonbValue(st, WJB_END_OBJECT, NULL);
	return true;
}

/*
 * Writing an object whose members are copied from other jsonb
 *
 * pushJsonbValue unpacks every binary value it is given into the parse
 * state, element by element, and JsonbValueToJsonb encodes it all again:
 * composing a snapshot from a stored request and a watched status rebuilt
 * both whole.  jb_object_replaced writes the new object's entries itself
 * and copies each member's bytes as they are (a container's offsets are
 * its own, so it moves as it is, on a 4-byte boundary like every
 * container and number).  The result is byte for byte what
 * JsonbValueToJsonb makes of the same object (test/t/010_k8s_client.pl).
 */
typedef struct JbRawMember
{
	const char *key;
	int			keylen;
	uint32		type;			/* JENTRY_IS* */
	const char *data;			/* a number or container: its aligned start */
	uint32		len;			/* without alignment padding */
	int			order;			/* as given: of two equal keys the later wins */
} JbRawMember;

/* Bytes of a container: header, entries and the data they span. */
static uint32
jb_container_bytes(const JsonbContainer *jc)
{
	uint32		count = JsonContainerSize(jc);
	uint32		nentries = JsonContainerIsObject(jc) ? count * 2 : count;
	uint32		end = 0;
	uint32		i;

	for (i = 0; i < nentries; i++)
		JBE_ADVANCE_OFFSET(end, jc->children[i]);
	return offsetof(JsonbContainer, children) + nentries * sizeof(JEntry) + end;
}

/* A JsonbValue as member data; object and array trees are encoded first. */
static void
jb_raw_from_value(JbRawMember *m, JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			m->type = JENTRY_ISNULL;
			m->data = NULL;
			m->len = 0;
			break;
		case jbvBool:
			m->type = v->val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
			m->data = NULL;
			m->len = 0;
			break;
		case jbvString:
			m->type = JENTRY_ISSTRING;
			m->data = v->val.string.val;
			m->len = (uint32) jb_string_len(v->val.string.len);
			break;
		case jbvNumeric:
			m->type = JENTRY_ISNUMERIC;
			m->data = (const char *) v->val.numeric;
			m->len = VARSIZE_ANY(v->val.numeric);
			break;
		case jbvBinary:
			if (JsonContainerIsScalar(v->val.binary.data))
			{
				JsonbValue	scalar;

				/* a raw scalar container holds its value as a one-element array */
				if (!JsonbExtractScalar(v->val.binary.data, &scalar))
					elog(ERROR, "could not read a jsonb scalar");
				jb_raw_from_value(m, &scalar);
				return;
			}
			m->type = JENTRY_ISCONTAINER;
			m->data = (const char *) v->val.binary.data;
			m->len = jb_container_bytes(v->val.binary.data);
			break;
		default:
			{
				Jsonb	   *encoded = JsonbValueToJsonb(v);

				m->type = JENTRY_ISCONTAINER;
				m->data = (const char *) &encoded->root;
				m->len = VARSIZE(encoded) - VARHDRSZ;
			}
			break;
	}
}

/* jsonb's order of object keys: shorter first, then bytewise */
static int
jb_raw_member_cmp(const void *a, const void *b)
{
	const JbRawMember *x = a;
	const JbRawMember *y = b;

	int			c;

	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	c = memcmp(x->key, y->key, x->keylen);
	return c != 0 ? c : (x->order > y->order) - (x->order < y->order);
}

/* Whether two members have the same key. */
static bool
jb_raw_same_key(const JbRawMember *x, const JbRawMember *y)
{
	return x->keylen == y->keylen && memcmp(x->key, y->key, x->keylen) == 0;
}

/* Append n bytes of member data as an entry of type `type`; its JEntry length. */
static uint32
jb_append_data(StringInfo buf, uint32 type, const char *data, uint32 len)
{
	int			start = buf->len;

	if (type == JENTRY_ISNUMERIC || type == JENTRY_ISCONTAINER)
	{
		int			pad = INTALIGN(buf->len) - buf->len;

		if (pad > 0)
			appendBinaryStringInfo(buf, "\0\0\0", pad);
	}
	if (len > 0)
		appendBinaryStringInfo(buf, data, len);
	return (uint32) (buf->len - start);
}

/* Write a root object of members m[0..n) (sorted, unique keys). */
static Jsonb *
jb_write_object(JbRawMember *m, int n)
{
	StringInfoData buf;
	uint32		header = (uint32) n | JB_FOBJECT;
	int			entries;
	uint32		total = 0;
	int			i;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, "\0\0\0\0", VARHDRSZ);
	appendBinaryStringInfo(&buf, (char *) &header, sizeof(header));
	entries = buf.len;
	enlargeStringInfo(&buf, 2 * n * sizeof(JEntry));
	buf.len += 2 * n * sizeof(JEntry);
	for (i = 0; i < 2 * n; i++)
	{
		const JbRawMember *mem = &m[i % n];
		uint32		len;
		JEntry		meta;

		len = (i < n) ? jb_append_data(&buf, JENTRY_ISSTRING, mem->key, (uint32) mem->keylen)
			: jb_append_data(&buf, mem->type, mem->data, mem->len);
		total += len;
		if (total > JENTRY_OFFLENMASK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("total size of jsonb object elements exceeds the maximum of %u bytes",
							JENTRY_OFFLENMASK)));
		meta = (i < n ? JENTRY_ISSTRING : mem->type) | len;
		if (i % JB_OFFSET_STRIDE == 0)
			meta = (meta & JENTRY_TYPEMASK) | total | JENTRY_HAS_OFF;
		memcpy(buf.data + entries + i * sizeof(JEntry), &meta, sizeof(JEntry));
	}
	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}

/*
 * Copy object obj with the named members replaced (vals[k]; NULL: removed)
 * and the others copied (select false), or with only the named members:
 * vals[k], or obj's member when vals[k] is NULL (select true).  Members of
 * obj are copied as bytes, not unpacked and encoded again.
 */
static Jsonb *
object_copied(JsonbContainer *obj, int nkeys, const char *const *keys, JsonbValue *const *vals, bool select)
{
	uint32		count = (obj != NULL && JsonContainerIsObject(obj)) ? JsonContainerSize(obj) : 0;
	JbRawMember *m = palloc(sizeof(JbRawMember) * (count + nkeys + 1));
	char	   *base = obj ? (char *) &obj->children[count * 2] : NULL;
	uint32		key_end = 0;
	uint32		value_end = 0;
	int			n = 0;
	uint32		i;
	int			k;

	for (i = 0; i < count; i++)
		JBE_ADVANCE_OFFSET(value_end, obj->children[i]);
	for (i = 0; i < count; i++)
	{
		uint32		key_start = key_end;
		uint32		value_start = value_end;
		JEntry		value = obj->children[count + i];
		int			named = -1;

		JBE_ADVANCE_OFFSET(key_end, obj->children[i]);
		JBE_ADVANCE_OFFSET(value_end, value);
		for (k = 0; k < nkeys && named < 0; k++)
			if (strlen(keys[k]) == key_end - key_start &&
				memcmp(base + key_start, keys[k], key_end - key_start) == 0)
				named = k;
		if (select ? (named < 0 || vals[named] != NULL) : named >= 0)
			continue;
		m[n].key = base + key_start;
		m[n].keylen = (int) (key_end - key_start);
		m[n].type = value & JENTRY_TYPEMASK;
		if (m[n].type == JENTRY_ISNUMERIC || m[n].type == JENTRY_ISCONTAINER)
			value_start = INTALIGN(value_start);
		m[n].data = base + value_start;
		m[n].len = value_end - value_start;
		m[n].order = n;
		n++;
	}
	for (k = 0; k < nkeys; k++)
	{
		if (vals[k] == NULL)
			continue;
		m[n].key = keys[k];
		m[n].keylen = jb_string_len(strlen(keys[k]));
		jb_raw_from_value(&m[n], vals[k]);
		m[n].order = n;
		n++;
	}
	qsort(m, n, sizeof(JbRawMember), jb_raw_member_cmp);
	/* a key given twice: the last given wins, as when pushed */
	for (i = 1, k = 0; (int) i < n; i++)
	{
		if (jb_raw_same_key(&m[k], &m[i]))
			m[k] = m[i];
		else
			m[++k] = m[i];
	}
	return jb_write_object(m, n > 0 ? k + 1 : 0);
}

/* See jsonb_util.h. */
Jsonb *
jb_object_replaced(JsonbContainer *obj, int nkeys, const char *const *keys, JsonbValue *const *vals)
{
	return object_copied(obj, nkeys, keys, vals, false);
}

/* See jsonb_util.h. */
Jsonb *
jb_object_selected(JsonbContainer *obj, int nkeys, const char *const *keys, JsonbValue *const *vals)
{
	return object_copied(obj, nkeys, keys, vals, true);
}

/* See jsonb_util.h. */
JsonbValue *
jb_object_edit(JsonbContainer *obj, int npath, const char *const *path, const JbMemberEdit *edit)
{
	JsonbParseState *st = NULL;
	JsonbValue *result = NULL;

	if (!push_object_edited(&st, obj, npath, path, edit, &result))
		return NULL;
	return result;
}

/*
 * Copy a top-level object replacing or removing the named members.
 */
JsonbValue *
jb_object_replace(JsonbContainer *obj, int nkeys, const char *const *keys,
				  JsonbValue *const *vals)
{
	JbMemberEdit edit = {nkeys, keys, vals, NULL, NULL, 0};

	return jb_object_edit(obj, 0, NULL, &edit);
}

/*
 * The same parse as jsonb_in (with an added or a left-out member).  The
 * text is parsed by json_scan_to_jsonb (src/json_scan.c) where it can be;
 * where it gives up, with plain_only the result is NULL, otherwise the
 * text is parsed by pg_parse_json.  Either way the parser's tokens and
 * value tree live in a context of their own, freed as soon as the jsonb is
 * built (in the caller's context), so a 50 MB object costs its text, one
 * tree and the result at the peak, and only the result after.
 */
static Jsonb *
jb_build_parse(const char *text, int len, int add_npath, const char *const *add_path,
			   const char *add_key, JsonbValue *add_value, const char *skip_key, bool plain_only)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext parse_cxt = AllocSetContextCreate(caller, "paidb JSON parse",
													ALLOCSET_DEFAULT_SIZES);
	JsonScanOptions opts = {add_npath, add_path, add_key, add_value, skip_key};
	JsonSemAction sem;
	JbBuild		b;
	Jsonb	   *out = NULL;

	MemoryContextSwitchTo(parse_cxt);
	if (!jb_parse_with_postgres_only)
		out = json_scan_to_jsonb(text, len, &opts, caller);
	if (out == NULL && !plain_only)
	{
		/* a \u escape, or not JSON: from the start, with PostgreSQL's parser */
		MemoryContextReset(parse_cxt);
		memset(&b, 0, sizeof(b));
		b.add_npath = add_npath;
		b.add_path = add_path;
		b.add_key = add_key;
		b.add_value = add_value;
		b.skip_key = skip_key;
		jb_build_actions(&sem, &b);
		b.lex = makeJsonLexContextCstringLen((char *) text, len, GetDatabaseEncoding(), true);
		pg_parse_json_or_ereport(b.lex, &sem);
		MemoryContextSwitchTo(caller);
		out = JsonbValueToJsonb(b.result);
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(parse_cxt);
	return out;
}

static Jsonb *
jb_build_from_text(const char *text, int len, int add_npath, const char *const *add_path,
				   const char *add_key, JsonbValue *add_value, const char *skip_key)
{
	return jb_build_parse(text, len, add_npath, add_path, add_key, add_value, skip_key, false);
}

/* See jsonb_util.h. */
Jsonb *
jb_from_large_text(const char *text, int len)
{
	return jb_build_from_text(text, len, 0, NULL, NULL, NULL, NULL);
}

/* See jsonb_util.h. */
Jsonb *
jb_from_text_adding(const char *text, int len, int npath, const char *const *path,
					const char *key, JsonbValue *value)
{
	return jb_build_from_text(text, len, npath, path, key, value, NULL);
}

/*
 * Parse JSON text into jsonb (raises ERROR on invalid JSON).  Text already
 * NUL-terminated at len is parsed in place: a large object is not copied.
 */
Jsonb *
jb_from_text(const char *text, int len)
{
	const char *cstr;
	Jsonb	   *out;

	if (len >= JB_LARGE_TEXT && memchr(text, '\0', len) == NULL)
		return jb_from_large_text(text, len);
	if ((out = jb_build_parse(text, len, 0, NULL, NULL, NULL, NULL, true)) != NULL)
		return out;
	cstr = text[len] == '\0' ? text : pnstrdup(text, len);
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(cstr)));
}

/*
 * The index of the quote that closes a JSON string whose text starts at q
 * (after its opening quote), or -1 if it does not end: memchr to each
 * quote, which closes the string unless an odd run of backslashes escapes it.
 */
static int
jb_string_end(const char *text, int len, int q)
{
	while (q < len)
	{
		const char *quote = memchr(text + q, '"', len - q);
		int			i,
					backslashes = 0;

		if (quote == NULL)
			return -1;
		i = (int) (quote - text);
		while (i - 1 - backslashes >= q && text[i - 1 - backslashes] == '\\')
			backslashes++;
		if (backslashes % 2 == 0)
			return i;
		q = i + 1;
	}
	return -1;
}

/*
 * Where the value of the root object's member `key` lies in JSON text,
 * found by following only strings and brackets: [*start, *end), up to the
 * comma or brace after it.  False if it is not found that way (no such
 * member, a key written with escapes, text that is not an object or ends
 * inside the value): the caller then parses everything.
 */
static bool
jb_top_member_span(const char *text, int len, const char *key, int *start, int *end)
{
	size_t		keylen = strlen(key);
	int			depth = 0;
	bool		want_key = false;	/* a string now would be a root key */
	bool		matched = false;	/* the last root key was `key` */
	int			p;

	for (p = 0; p < len; p++)
	{
		char		c = text[p];

		if (c == '"')
		{
			int			q = jb_string_end(text, len, p + 1);

			if (q < 0)
				return false;
			if (depth == 1 && want_key)
			{
				matched = (size_t) (q - p - 1) == keylen && memcmp(text + p + 1, key, keylen) == 0;
				want_key = false;
			}
			p = q;
		}
		else if (c == ':' && depth == 1 && matched)
		{
			int			d = 0;

			*start = p + 1;
			for (p++; p < len; p++)
			{
				c = text[p];
				if (c == '"')
				{
					p = jb_string_end(text, len, p + 1);
					if (p < 0)
						return false;
				}
				else if (c == '{' || c == '[')
					d++;
				else if (c == '}' || c == ']')
				{
					if (d == 0)
						break;
					d--;
				}
				else if (c == ',' && d == 0)
					break;
			}
			if (p >= len || d != 0)
				return false;
			/* an empty value is left for the parser to refuse */
			for (*end = p; p > *start; p--)
				if (!isspace((unsigned char) text[p - 1]))
					return true;
			return false;
		}
		else if (c == '{' || c == '[')
		{
			depth++;
			want_key = (depth == 1 && c == '{');
		}
		else if (c == '}' || c == ']')
			depth--;
		else if (c == ',' && depth == 1)
			want_key = true;
	}
	return false;
}

/*
 * See jsonb_util.h.  The member's value is cut out of the text before the
 * parse: PostgreSQL's lexer costs about as much per byte of a value it
 * skips as of one it builds, and a framework's spec is a third to a half
 * of its text.
 */
Jsonb *
jb_from_text_without(const char *text, int len, const char *top_key)
{
	int			start,
				end;
	char	   *cut;
	Jsonb	   *out;

	if (!jb_top_member_span(text, len, top_key, &start, &end))
		return jb_build_from_text(text, len, 0, NULL, NULL, NULL, top_key);
	cut = palloc(len - (end - start) + 3);
	memcpy(cut, text, start);
	memcpy(cut + start, "{}", 2);
	memcpy(cut + start + 2, text + end, len - end);
	cut[len - (end - start) + 2] = '\0';
	out = jb_build_from_text(cut, len - (end - start) + 2, 0, NULL, NULL, NULL, top_key);
	pfree(cut);
	return out;
}

/*
 * JSON text
 *
 * PostgreSQL 15's JsonbToCString builds a JsonbValue for every element
 * (iterator) and escapes strings one character at a time; printing a
 * snapshot cost more than compressing it (~30 against ~23 us here).  These walk
 * the container's entries in place and copy each string's runs that need
 * no escape at once, and write exactly JsonbToCString's text (its
 * spacing, escapes and numbers), which test/t/010_k8s_client.pl compares.
 */

/* Append n (a few) bytes; appendBinaryStringInfo is a call per separator. */
static inline void
jb_put(StringInfo out, const char *bytes, int n)
{
	if (out->len + n >= out->maxlen)
		enlargeStringInfo(out, n);
	memcpy(out->data + out->len, bytes, n);
	out->len += n;
	out->data[out->len] = '\0';
}

/* A string as escape_json writes it. */
static void
jb_print_string(StringInfo out, const char *s, int len)
{
	int			start = 0;
	int			i = 0;

	/* most strings (names, keys, values) need no escape: one copy */
	while (i < len && !json_string_special[(unsigned char) s[i]])
		i++;
	if (out->len + len + 2 >= out->maxlen)
		enlargeStringInfo(out, len + 2);
	out->data[out->len++] = '"';
	if (i == len)
	{
		memcpy(out->data + out->len, s, len);
		out->len += len;
		out->data[out->len++] = '"';
		out->data[out->len] = '\0';
		return;
	}
	for (; i < len; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (!json_string_special[c])
			continue;
		appendBinaryStringInfo(out, s + start, i - start);
		start = i + 1;
		switch (c)
		{
			case '\b':
				appendStringInfoString(out, "\\b");
				break;
			case '\f':
				appendStringInfoString(out, "\\f");
				break;
			case '\n':
				appendStringInfoString(out, "\\n");
				break;
			case '\r':
				appendStringInfoString(out, "\\r");
				break;
			case '\t':
				appendStringInfoString(out, "\\t");
				break;
			case '"':
				appendStringInfoString(out, "\\\"");
				break;
			case '\\':
				appendStringInfoString(out, "\\\\");
				break;
			default:
				appendStringInfo(out, "\\u%04x", (int) c);
				break;
		}
	}
	appendBinaryStringInfo(out, s + start, len - start);
	appendStringInfoCharMacro(out, '"');
}

static void jb_print_container(StringInfo out, JsonbContainer *jc, int nskip, const char *const *skip);

/* The value of entry `entry`, whose data lies at base + [start, end). */
static void
jb_print_entry(StringInfo out, JEntry entry, char *base, uint32 start, uint32 end,
			   int nskip, const char *const *skip)
{
	if (JBE_ISSTRING(entry))
		jb_print_string(out, base + start, (int) (end - start));
	else if (JBE_ISNUMERIC(entry))
	{
		char	   *num = DatumGetCString(DirectFunctionCall1(numeric_out,
															  PointerGetDatum(base + INTALIGN(start))));

		appendStringInfoString(out, num);
		pfree(num);
	}
	else if (JBE_ISBOOL_TRUE(entry))
		appendStringInfoString(out, "true");
	else if (JBE_ISBOOL_FALSE(entry))
		appendStringInfoString(out, "false");
	else if (JBE_ISNULL(entry))
		appendStringInfoString(out, "null");
	else
		jb_print_container(out, (JsonbContainer *) (base + INTALIGN(start)), nskip, skip);
}

static void
jb_print_container(StringInfo out, JsonbContainer *jc, int nskip, const char *const *skip)
{
	uint32		count = JsonContainerSize(jc);
	bool		object = JsonContainerIsObject(jc);
	uint32		nentries = object ? count * 2 : count;
	char	   *base = (char *) &jc->children[nentries];
	uint32		key_end = 0;
	uint32		value_end = 0;
	bool		first = true;
	uint32		i;

	check_stack_depth();
	/* an object's values follow all its keys */
	if (object)
		for (i = 0; i < count; i++)
			JBE_ADVANCE_OFFSET(value_end, jc->children[i]);
	if (JsonContainerIsScalar(jc))
	{
		/* a scalar at the root: a one-element array that prints as its element */
		JBE_ADVANCE_OFFSET(value_end, jc->children[0]);
		jb_print_entry(out, jc->children[0], base, 0, value_end, 0, NULL);
		return;
	}
	appendStringInfoCharMacro(out, object ? '{' : '[');
	for (i = 0; i < count; i++)
	{
		uint32		key_start = key_end;
		uint32		value_start = value_end;
		JEntry		value = jc->children[object ? count + i : i];
		int			child_nskip = 0;

		JBE_ADVANCE_OFFSET(value_end, value);
		if (object)
		{
			JBE_ADVANCE_OFFSET(key_end, jc->children[i]);
			if (nskip > 0 && strlen(skip[0]) == key_end - key_start &&
				memcmp(base + key_start, skip[0], key_end - key_start) == 0)
			{
				if (nskip == 1)
					continue;	/* left out */
				child_nskip = nskip - 1;
			}
		}
		if (!first)
			jb_put(out, ", ", 2);
		first = false;
		if (object)
		{
			jb_print_string(out, base + key_start, (int) (key_end - key_start));
			jb_put(out, ": ", 2);
		}
		jb_print_entry(out, value, base, value_start, value_end, child_nskip,
					   child_nskip > 0 ? skip + 1 : NULL);
	}
	appendStringInfoCharMacro(out, object ? '}' : ']');
}

/* See jsonb_util.h. */
void
jb_print(StringInfo out, JsonbContainer *jc, int nskip, const char *const *skip)
{
	jb_print_container(out, jc, nskip, skip);
}

/* Serialise a container as compact JSON text (palloc'd). */
char *
jb_to_text(JsonbContainer *jc, int estimated_len)
{
	StringInfoData out;

	initStringInfo(&out);
	if (estimated_len > 0)
		enlargeStringInfo(&out, estimated_len);
	jb_print(&out, jc, 0, NULL);
	return out.data;
}
