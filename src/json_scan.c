/*
 * json_scan.c — JSON text straight to jsonb's binary form, for the common
 * case (issue 19).
 *
 * The framework watcher parses every watched framework and every stored
 * snapshot it unpacks.  PostgreSQL 15 parses JSON into jsonb in three
 * steps: its lexer copies each string one character at a time, then
 * pushJsonbValue builds a tree of JsonbValues (a palloc'd parse state per
 * container, arrays grown by repalloc, each object's pairs sorted), then
 * convertToJsonb walks the tree into the binary form; the last two were
 * about two thirds of unpacking a stored snapshot.  Here one scan finds
 * each token and records it in a flat array (strings without escapes are
 * not copied at all), each object's members are sorted only when they are
 * out of order (a stored snapshot's never are: jsonb printed them), and
 * one pass writes the binary form into a buffer sized beforehand.
 *
 * What comes out is byte for byte what jsonb_in builds (its key order,
 * duplicate keys resolved as it does, the same padding and offsets); the
 * fuzz target json_text compares the two.  Anything else — a \u escape
 * (whose code point depends on the database encoding and on surrogate
 * pairs), a control character, a syntax error, text past JSON_SCAN_MAX_TEXT
 * — makes json_scan_to_jsonb give up, and the caller parses with
 * pg_parse_json, so those escapes, errors and their messages stay
 * PostgreSQL's own.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

#include "json_scan.h"

/* See json_scan.h. */
const bool	json_string_special[256] = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	['"'] = 1,['\\'] = 1
};

/*
 * Deeper text is left to PostgreSQL's parser: its stack-depth check, not
 * ours, decides when nesting is too deep.
 */
#define SCAN_MAX_DEPTH 1000

/*
 * Larger text is left to PostgreSQL's parser too.  Below it none of
 * jsonb's limits can be reached (a byte of text makes at most ~7 bytes of
 * jsonb, so no container passes JENTRY_OFFLENMASK, and no object or array
 * can hold JSONB_MAX_PAIRS or JSONB_MAX_ELEMS), so none of their errors
 * needs copying here.
 */
#define JSON_SCAN_MAX_TEXT (16 * 1024 * 1024)

/*
 * A value found in the text.  Scalars and finished containers wait in
 * Scan.open while their container is open, and move to Scan.done (in
 * jsonb's order, an object's as key, value, key, value...) when it closes.
 */
typedef struct ScanNode
{
	uint32		type;			/* a JEntry type: JENTRY_ISSTRING ... JENTRY_ISCONTAINER */
	uint32		len;			/* string or numeric: bytes; container: members */
	const char *data;			/* string bytes (in the text when unescaped), a Numeric */
	uint32		first;			/* container: its first child in Scan.done */
	uint32		order;			/* a key: its member's place in the text */
	bool		object;			/* container: an object, not an array */
	bool		raw_scalar;		/* container: a scalar alone, as jsonb's one-element array */
} ScanNode;

typedef struct Scan
{
	const char *p;				/* next byte */
	const char *end;
	int			depth;			/* containers open */
	const JsonScanOptions *opts;
	int			skip_keylen;
	ScanNode   *open;			/* children of the open containers, innermost last */
	uint32		nopen;
	uint32		maxopen;
	ScanNode   *done;			/* children of the closed containers */
	uint32		ndone;
	uint32		maxdone;
	Size		bound;			/* bytes the binary form can take */
} Scan;

static bool scan_value(Scan *s, bool build, int level);

static inline void
skip_space(Scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
		s->p++;
}

/* A byte that may follow a number or a literal (as PostgreSQL's lexer sees it). */
static inline bool
at_delimiter(const Scan *s)
{
	char		c;

	if (s->p >= s->end)
		return true;
	c = *s->p;
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',' || c == ']' ||
		c == '}' || c == ':';
}

/* Room for one more node waiting in an open container. */
static inline ScanNode *
push_open(Scan *s)
{
	if (s->nopen == s->maxopen)
	{
		s->maxopen *= 2;
		s->open = repalloc(s->open, sizeof(ScanNode) * s->maxopen);
	}
	return &s->open[s->nopen++];
}

/* Room for n more nodes of closed containers; the first of them. */
static inline ScanNode *
reserve_done(Scan *s, uint32 n)
{
	if (s->ndone + n > s->maxdone)
	{
		while (s->ndone + n > s->maxdone)
			s->maxdone *= 2;
		s->done = repalloc(s->done, sizeof(ScanNode) * s->maxdone);
	}
	s->ndone += n;
	return &s->done[s->ndone - n];
}

/*
 * A string at s->p (its opening quote): its bytes with escapes undone
 * (*out, *outlen; in the text itself when it has none), or false to give
 * up (\u escapes, whose code points depend on the database encoding and
 * surrogate pairs, are left to PostgreSQL's lexer).  Without `build` it is
 * only checked.
 */
static bool
scan_string(Scan *s, bool build, const char **out, uint32 *outlen)
{
	const char *start = s->p + 1;
	const char *q;
	bool		escaped = false;
	char	   *buf;
	char	   *o;
	const char *r;

	for (q = start; q < s->end; q++)
	{
		unsigned char c = (unsigned char) *q;

		if (!json_string_special[c])
			continue;
		if (c == '"')
			break;
		if (c < 0x20)
			return false;
		/* a backslash */
		escaped = true;
		if (++q >= s->end || *q == 'u')
			return false;
	}
	if (q >= s->end)
		return false;
	s->p = q + 1;
	if (!escaped)
	{
		*out = start;
		*outlen = (uint32) (q - start);
		return true;
	}
	buf = build ? palloc(q - start) : NULL;
	o = buf;
	for (r = start; r < q; r++)
	{
		char		c = *r;

		if (c == '\\')
		{
			switch (*++r)
			{
				case '"':
				case '\\':
				case '/':
					c = *r;
					break;
				case 'b':
					c = '\b';
					break;
				case 'f':
					c = '\f';
					break;
				case 'n':
					c = '\n';
					break;
				case 'r':
					c = '\r';
					break;
				case 't':
					c = '\t';
					break;
				default:
					return false;	/* not an escape: PostgreSQL's error */
			}
		}
		if (build)
			*o++ = c;
	}
	*out = buf;
	*outlen = build ? (uint32) (o - buf) : 0;
	return true;
}

/* A number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool
scan_number(Scan *s)
{
	const char *p = s->p;

	if (p < s->end && *p == '-')
		p++;
	if (p < s->end && *p == '0')
		p++;
	else if (p < s->end && *p >= '1' && *p <= '9')
		while (p < s->end && *p >= '0' && *p <= '9')
			p++;
	else
		return false;
	if (p < s->end && *p == '.')
	{
		p++;
		if (p >= s->end || *p < '0' || *p > '9')
			return false;
		while (p < s->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < s->end && (*p == 'e' || *p == 'E'))
	{
		p++;
		if (p < s->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= s->end || *p < '0' || *p > '9')
			return false;
		while (p < s->end && *p >= '0' && *p <= '9')
			p++;
	}
	s->p = p;
	return true;
}

static bool
scan_literal(Scan *s, const char *word, size_t n)
{
	if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return false;
	s->p += n;
	return true;
}

/* The Numeric numeric_in makes of a number's text, as jsonb_in calls it. */
static Numeric
number_value(const char *start, size_t len)
{
	char		small[64];
	char	   *token;
	size_t		i = (len > 0 && start[0] == '-') ? 1 : 0;

	/*
	 * An integer of up to 18 digits (most of a framework's numbers: exit
	 * codes, counts, ports) is the Numeric int64_to_numeric makes of its
	 * value, byte for byte, at a third of numeric_in's cost.  "-0" is left
	 * to numeric_in.
	 */
	if (len - i >= 1 && len - i <= 18 && !(start[i] == '0' && i == 1))
	{
		int64		v = 0;
		size_t		j;

		for (j = i; j < len && start[j] >= '0' && start[j] <= '9'; j++)
			v = v * 10 + (start[j] - '0');
		if (j == len)
			return int64_to_numeric(i == 1 ? -v : v);
	}
	token = len < sizeof(small) ? small : palloc(len + 1);

	memcpy(token, start, len);
	token[len] = '\0';
	return DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(token),
											   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
}

static bool
scan_scalar(Scan *s, bool build)
{
	const char *start = s->p;
	const char *data = NULL;
	uint32		len = 0;
	uint32		type;
	ScanNode   *n;

	if (s->p >= s->end)
		return false;
	switch (*s->p)
	{
		case '"':
			if (!scan_string(s, build, &data, &len))
				return false;
			type = JENTRY_ISSTRING;
			break;
		case 't':
			if (!scan_literal(s, "true", 4))
				return false;
			type = JENTRY_ISBOOL_TRUE;
			break;
		case 'f':
			if (!scan_literal(s, "false", 5))
				return false;
			type = JENTRY_ISBOOL_FALSE;
			break;
		case 'n':
			if (!scan_literal(s, "null", 4))
				return false;
			type = JENTRY_ISNULL;
			break;
		default:
			if (!scan_number(s))
				return false;
			type = JENTRY_ISNUMERIC;
			len = (uint32) (s->p - start);
			break;
	}
	/* "123abc", "nullx": PostgreSQL's lexer reads them as one bad token */
	if (type != JENTRY_ISSTRING && !at_delimiter(s))
		return false;

	/*
	 * PostgreSQL's parser lexes the next token before it takes the scalar
	 * in, and a bad token is its error, not numeric_in's ("1e1000000"
	 * followed by garbage): the number is made only before a token that
	 * cannot be bad.
	 */
	skip_space(s);
	if (s->p < s->end && *s->p != ',' && *s->p != ']' && *s->p != '}')
		return false;
	if (!build)
		return true;
	n = push_open(s);
	n->type = type;
	n->data = data;
	n->len = len;
	if (type == JENTRY_ISNUMERIC)
	{
		n->data = (const char *) number_value(start, len);
		n->len = VARSIZE_ANY(n->data);
		s->bound += INTALIGN(n->len) + 3;
	}
	else
		s->bound += len;
	return true;
}

/* jsonb's order of keys: shorter first, then bytewise; a later duplicate first. */
static inline int
pair_order(const ScanNode *x, const ScanNode *y)
{
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if (x->len > 0)
	{
		int			c = memcmp(x->data, y->data, x->len);

		if (c != 0)
			return c;
	}
	return x->order > y->order ? -1 : 1;
}

static int
pair_cmp(const void *a, const void *b)
{
	return pair_order(*(ScanNode *const *) a, *(ScanNode *const *) b);
}

/*
 * Objects of up to this many members are sorted by insertion: most
 * objects are small, and qsort's calls through a pointer cost more than
 * the comparisons they save (~3% of a watch event's parse).
 */
#define INSERTION_SORT_MAX 24

static void
sort_pairs(ScanNode **keys, uint32 n)
{
	uint32		i;

	if (n > INSERTION_SORT_MAX)
	{
		qsort(keys, n, sizeof(ScanNode *), pair_cmp);
		return;
	}
	for (i = 1; i < n; i++)
	{
		ScanNode   *k = keys[i];
		uint32		j = i;

		for (; j > 0 && pair_order(keys[j - 1], k) > 0; j--)
			keys[j] = keys[j - 1];
		keys[j] = k;
	}
}

static inline bool
same_key(const ScanNode *x, const ScanNode *y)
{
	return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

/*
 * The container whose children now lie in s->done from `first` (n
 * members: pairs or elements), in place of them in s->open from `base`.
 */
static void
push_container(Scan *s, uint32 base, uint32 first, uint32 n, bool object, bool raw_scalar)
{
	ScanNode   *node;

	s->nopen = base;
	node = push_open(s);
	node->type = JENTRY_ISCONTAINER;
	node->object = object;
	node->len = n;
	node->first = first;
	node->data = NULL;
	node->raw_scalar = raw_scalar;
	/* its header, its JEntries and its padding in its parent */
	s->bound += 4 + 4 * (Size) (object ? 2 * n : n) + 3;
}

/*
 * Close the object whose npairs members (key, value, ...) wait in
 * s->open from `base`: into s->done in jsonb's order, each key once (the
 * last member of a key wins, as in jsonb_in), and the object itself into
 * s->open.
 */
static void
close_object(Scan *s, uint32 base, uint32 npairs)
{
	ScanNode   *pairs = &s->open[base];
	ScanNode   *out;
	uint32		first = s->ndone;
	uint32		n = 0;
	uint32		i;
	bool		sorted = true;

	/* jsonb printed it (a stored snapshot): in order already, each key once */
	for (i = 1; i < npairs && sorted; i++)
	{
		const ScanNode *x = &pairs[2 * (i - 1)];
		const ScanNode *y = &pairs[2 * i];

		sorted = x->len < y->len ||
			(x->len == y->len && x->len > 0 && memcmp(x->data, y->data, x->len) < 0);
	}
	if (sorted)
	{
		out = reserve_done(s, 2 * npairs);
		memcpy(out, pairs, sizeof(ScanNode) * 2 * npairs);
		n = npairs;
	}
	else
	{
		ScanNode  **keys = palloc(sizeof(ScanNode *) * npairs);

		for (i = 0; i < npairs; i++)
			keys[i] = &pairs[2 * i];
		sort_pairs(keys, npairs);
		out = reserve_done(s, 2 * npairs);
		for (i = 0; i < npairs; i++)
		{
			if (n > 0 && same_key(&out[2 * (n - 1)], keys[i]))
				continue;		/* an earlier member of the same key */
			out[2 * n] = keys[i][0];
			out[2 * n + 1] = keys[i][1];
			n++;
		}
		s->ndone -= 2 * (npairs - n);
		pfree(keys);
	}
	push_container(s, base, first, n, true, false);
}

/* Close the array whose n elements wait in s->open from `base`. */
static void
close_array(Scan *s, uint32 base, uint32 n, bool raw_scalar)
{
	uint32		first = s->ndone;

	memcpy(reserve_done(s, n), &s->open[base], sizeof(ScanNode) * n);
	push_container(s, base, first, n, false, raw_scalar);
}

/*
 * An object at s->p.  `level` is how many keys of the options' add_path
 * lead to it (-1: it is not on the path); the object the whole path leads
 * to gets the added member last, so it replaces one of the same key, as
 * when jb_from_text_adding pushes it.
 */
static bool
scan_object(Scan *s, bool build, int level)
{
	const JsonScanOptions *o = s->opts;
	uint32		base = s->nopen;
	uint32		npairs = 0;

	s->p++;						/* { */
	skip_space(s);
	if (s->p < s->end && *s->p == '}')
		s->p++;
	else
	{
		for (;;)
		{
			const char *key;
			uint32		keylen;
			bool		keep;
			int			child = -1;

			CHECK_FOR_INTERRUPTS();
			if (s->p >= s->end || *s->p != '"' || !scan_string(s, build, &key, &keylen))
				return false;
			skip_space(s);
			if (s->p >= s->end || *s->p != ':')
				return false;
			s->p++;
			skip_space(s);
			/* a left-out member of the root: its value still checked, not built */
			keep = build && !(s->depth == 1 && o->skip_key != NULL &&
							  keylen == (uint32) s->skip_keylen &&
							  memcmp(key, o->skip_key, keylen) == 0);
			if (keep)
			{
				ScanNode   *k = push_open(s);

				k->type = JENTRY_ISSTRING;
				k->data = key;
				k->len = keylen;
				k->order = npairs;
				s->bound += keylen;
				if (level >= 0 && level < o->add_npath &&
					strlen(o->add_path[level]) == keylen &&
					memcmp(o->add_path[level], key, keylen) == 0)
					child = level + 1;
			}
			if (!scan_value(s, keep, child))
				return false;
			if (keep)
				npairs++;
			skip_space(s);
			if (s->p < s->end && *s->p == ',')
			{
				s->p++;
				skip_space(s);
				continue;
			}
			if (s->p < s->end && *s->p == '}')
			{
				s->p++;
				break;
			}
			return false;
		}
	}
	if (!build)
		return true;
	if (level >= 0 && level == o->add_npath && o->add_key != NULL)
	{
		ScanNode   *k = push_open(s);
		ScanNode   *v;
		JsonbValue *a = o->add_value;

		k->type = JENTRY_ISSTRING;
		k->data = o->add_key;
		k->len = (uint32) strlen(o->add_key);
		k->order = npairs;
		s->bound += k->len;
		v = push_open(s);
		v->data = NULL;
		v->len = 0;
		switch (a->type)
		{
			case jbvString:
				v->type = JENTRY_ISSTRING;
				v->data = a->val.string.val;
				v->len = (uint32) a->val.string.len;
				s->bound += v->len;
				break;
			case jbvNull:
				v->type = JENTRY_ISNULL;
				break;
			case jbvBool:
				v->type = a->val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
				break;
			default:
				return false;	/* not a scalar this writes: the caller's parser adds it */
		}
		npairs++;
	}
	close_object(s, base, npairs);
	return true;
}

static bool
scan_array(Scan *s, bool build)
{
	uint32		base = s->nopen;
	uint32		n = 0;

	s->p++;						/* [ */
	skip_space(s);
	if (s->p < s->end && *s->p == ']')
		s->p++;
	else
	{
		for (;;)
		{
			CHECK_FOR_INTERRUPTS();
			if (!scan_value(s, build, -1))
				return false;
			n++;
			skip_space(s);
			if (s->p < s->end && *s->p == ',')
			{
				s->p++;
				skip_space(s);
				continue;
			}
			if (s->p < s->end && *s->p == ']')
			{
				s->p++;
				break;
			}
			return false;
		}
	}
	if (build)
		close_array(s, base, n, false);
	return true;
}

/* One value at s->p (no space before it); built into s->open with `build`. */
static bool
scan_value(Scan *s, bool build, int level)
{
	bool		ok;

	if (s->p < s->end && (*s->p == '{' || *s->p == '['))
	{
		if (s->depth >= SCAN_MAX_DEPTH)
			return false;
		check_stack_depth();
		s->depth++;
		ok = *s->p == '{' ? scan_object(s, build, level) : scan_array(s, build);
		s->depth--;
		return ok;
	}
	return scan_scalar(s, build);
}

/* Zero bytes up to the next multiple of 4, as jsonb pads numerics and containers. */
static inline Size
pad_to_int(char *buf, Size pos)
{
	while (pos % 4 != 0)
		buf[pos++] = '\0';
	return pos;
}

/*
 * Write container node `c` at buf + pos (4-aligned: every container is,
 * so offsets inside it are the same wherever it lands); the end.
 */
static Size
write_container(const Scan *s, char *buf, Size pos, const ScanNode *c)
{
	uint32		n = c->len;
	uint32		nentries = c->object ? 2 * n : n;
	uint32		header = n | (c->object ? JB_FOBJECT : JB_FARRAY) |
		(c->raw_scalar ? JB_FSCALAR : 0);
	Size		jentries = pos + sizeof(uint32);
	uint32		total = 0;
	uint32		i;

	check_stack_depth();
	memcpy(buf + pos, &header, sizeof(uint32));
	pos = jentries + sizeof(JEntry) * nentries;
	for (i = 0; i < nentries; i++)
	{
		/* an object's keys first, then its values */
		const ScanNode *e = c->object ? &s->done[c->first + (i < n ? 2 * i : 2 * (i - n) + 1)]
			: &s->done[c->first + i];
		Size		start = pos;
		JEntry		meta;

		switch (e->type)
		{
			case JENTRY_ISSTRING:
				if (e->len > 0)
					memcpy(buf + pos, e->data, e->len);
				pos += e->len;
				break;
			case JENTRY_ISNUMERIC:
				pos = pad_to_int(buf, pos);
				memcpy(buf + pos, e->data, e->len);
				pos += e->len;
				break;
			case JENTRY_ISCONTAINER:
				pos = write_container(s, buf, pad_to_int(buf, pos), e);
				break;
			default:
				break;			/* true, false, null: the JEntry says it all */
		}
		total += (uint32) (pos - start);
		meta = e->type | (uint32) (pos - start);
		if (i % JB_OFFSET_STRIDE == 0)
			meta = e->type | total | JENTRY_HAS_OFF;
		memcpy(buf + jentries + sizeof(JEntry) * i, &meta, sizeof(JEntry));
	}
	return pos;
}

/* See json_scan.h. */
Jsonb *
json_scan_to_jsonb(const char *text, int len, const JsonScanOptions *opts,
				   MemoryContext result_cxt)
{
	Scan		s;
	char	   *buf;
	Size		end;

	if (len > JSON_SCAN_MAX_TEXT)
		return NULL;
	memset(&s, 0, sizeof(s));
	s.p = text;
	s.end = text + len;
	s.opts = opts;
	s.skip_keylen = opts->skip_key ? (int) strlen(opts->skip_key) : 0;
	s.maxopen = 64;
	s.open = palloc(sizeof(ScanNode) * s.maxopen);
	s.maxdone = Max(64, len / 16);
	s.done = palloc(sizeof(ScanNode) * s.maxdone);
	skip_space(&s);
	if (!scan_value(&s, true, opts->add_key != NULL ? 0 : -1))
		return NULL;
	skip_space(&s);
	if (s.p != s.end)
		return NULL;
	Assert(s.nopen == 1);
	if (s.open[0].type != JENTRY_ISCONTAINER)
		close_array(&s, 0, 1, true);

	/* the varlena header, the root's header and JEntries: counted above but for the first */
	buf = MemoryContextAlloc(result_cxt, VARHDRSZ + s.bound);
	end = write_container(&s, buf, VARHDRSZ, &s.open[0]);
	Assert(end <= VARHDRSZ + s.bound);
	SET_VARSIZE(buf, end);
	return (Jsonb *) buf;
}
