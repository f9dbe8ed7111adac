/*
 * json_scan.c — JSON text parsed in fewer steps than PostgreSQL's lexer
 * takes (issue 19).
 *
 * The framework watcher parses every watched framework and every stored
 * snapshot it unpacks; PostgreSQL 15's lexer copies each string one
 * character at a time into a buffer and then copies it again, and that was
 * most of both parses.  Here a string is found with one scan and copied
 * once (undoing its escapes as it goes).  Anything else — a \u escape
 * (whose code point depends on the database encoding and on surrogate
 * pairs), a control character, a syntax error — makes json_scan_plain give
 * up, and the caller parses with pg_parse_json, so those escapes, errors
 * and their messages stay PostgreSQL's own.
 */
#include "postgres.h"

#include "miscadmin.h"

#include "json_scan.h"

typedef struct Scan
{
	const char *p;				/* next byte */
	const char *end;
	JsonSemAction *sem;
	int			depth;			/* containers open */
} Scan;

/*
 * Deeper text is left to PostgreSQL's parser: its stack-depth check, not
 * ours, decides when nesting is too deep.
 */
#define SCAN_MAX_DEPTH 1000

static bool scan_value(Scan *s);

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

/*
 * A string at s->p (its opening quote): a palloc'd copy with its escapes
 * undone, or NULL to give up (\u escapes, whose code points depend on the
 * database encoding and surrogate pairs, are left to PostgreSQL's lexer).
 */
static char *
scan_string(Scan *s)
{
	const char *start = s->p + 1;
	const char *q;
	bool		escaped = false;
	char	   *out;
	char	   *o;

	for (q = start; q < s->end; q++)
	{
		unsigned char c = (unsigned char) *q;

		if (c == '"')
			break;
		if (c < 0x20)
			return NULL;
		if (c == '\\')
		{
			escaped = true;
			if (++q >= s->end || *q == 'u')
				return NULL;
		}
	}
	if (q >= s->end)
		return NULL;
	out = palloc(q - start + 1);
	if (!escaped)
	{
		memcpy(out, start, q - start);
		o = out + (q - start);
	}
	else
	{
		const char *r;

		o = out;
		for (r = start; r < q; r++)
		{
			if (*r != '\\')
			{
				*o++ = *r;
				continue;
			}
			switch (*++r)
			{
				case '"':
				case '\\':
				case '/':
					*o++ = *r;
					break;
				case 'b':
					*o++ = '\b';
					break;
				case 'f':
					*o++ = '\f';
					break;
				case 'n':
					*o++ = '\n';
					break;
				case 'r':
					*o++ = '\r';
					break;
				case 't':
					*o++ = '\t';
					break;
				default:
					pfree(out);
					return NULL;	/* not an escape: PostgreSQL's error */
			}
		}
	}
	*o = '\0';
	s->p = q + 1;
	return out;
}

/* The token type of the value at s->p, or JSON_TOKEN_INVALID. */
static JsonTokenType
peek_type(const Scan *s)
{
	if (s->p >= s->end)
		return JSON_TOKEN_END;
	switch (*s->p)
	{
		case '{':
			return JSON_TOKEN_OBJECT_START;
		case '[':
			return JSON_TOKEN_ARRAY_START;
		case '"':
			return JSON_TOKEN_STRING;
		case 't':
			return JSON_TOKEN_TRUE;
		case 'f':
			return JSON_TOKEN_FALSE;
		case 'n':
			return JSON_TOKEN_NULL;
		default:
			return (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')) ? JSON_TOKEN_NUMBER : JSON_TOKEN_INVALID;
	}
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
scan_literal(Scan *s, const char *word)
{
	size_t		n = strlen(word);

	if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return false;
	s->p += n;
	return true;
}

static bool
scan_scalar(Scan *s)
{
	JsonTokenType type = peek_type(s);
	const char *start = s->p;
	char	   *token = NULL;

	switch (type)
	{
		case JSON_TOKEN_STRING:
			if ((token = scan_string(s)) == NULL)
				return false;
			break;
		case JSON_TOKEN_NUMBER:
			if (!scan_number(s))
				return false;
			break;
		case JSON_TOKEN_TRUE:
			if (!scan_literal(s, "true"))
				return false;
			break;
		case JSON_TOKEN_FALSE:
			if (!scan_literal(s, "false"))
				return false;
			break;
		case JSON_TOKEN_NULL:
			if (!scan_literal(s, "null"))
				return false;
			break;
		default:
			return false;
	}
	/* "123abc", "nullx": PostgreSQL's lexer reads them as one bad token */
	if (type != JSON_TOKEN_STRING && !at_delimiter(s))
		return false;

	/*
	 * PostgreSQL's parser lexes the next token before it calls the scalar
	 * callback, and a bad token is its error, not the callback's (numeric_in
	 * refusing "1e1000000", say): here the callback comes only before a
	 * token that cannot be bad.
	 */
	skip_space(s);
	if (s->p < s->end && *s->p != ',' && *s->p != ']' && *s->p != '}')
		return false;
	if (s->sem->scalar == NULL)
	{
		if (token)
			pfree(token);
		return true;
	}
	if (token == NULL)
		token = pnstrdup(start, s->p - start);
	s->sem->scalar(s->sem->semstate, token, type);
	return true;
}

static bool
scan_object(Scan *s)
{
	JsonSemAction *sem = s->sem;

	s->p++;						/* { */
	if (sem->object_start)
		sem->object_start(sem->semstate);
	skip_space(s);
	if (s->p < s->end && *s->p == '}')
		s->p++;
	else
	{
		for (;;)
		{
			char	   *fname;
			bool		isnull;

			CHECK_FOR_INTERRUPTS();
			if (peek_type(s) != JSON_TOKEN_STRING || (fname = scan_string(s)) == NULL)
				return false;
			skip_space(s);
			if (s->p >= s->end || *s->p != ':')
				return false;
			s->p++;
			skip_space(s);
			isnull = peek_type(s) == JSON_TOKEN_NULL;
			if (sem->object_field_start)
				sem->object_field_start(sem->semstate, fname, isnull);
			if (!scan_value(s))
				return false;
			if (sem->object_field_end)
				sem->object_field_end(sem->semstate, fname, isnull);
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
	if (sem->object_end)
		sem->object_end(sem->semstate);
	return true;
}

static bool
scan_array(Scan *s)
{
	JsonSemAction *sem = s->sem;

	s->p++;						/* [ */
	if (sem->array_start)
		sem->array_start(sem->semstate);
	skip_space(s);
	if (s->p < s->end && *s->p == ']')
		s->p++;
	else
	{
		for (;;)
		{
			bool		isnull = peek_type(s) == JSON_TOKEN_NULL;

			CHECK_FOR_INTERRUPTS();
			if (sem->array_element_start)
				sem->array_element_start(sem->semstate, isnull);
			if (!scan_value(s))
				return false;
			if (sem->array_element_end)
				sem->array_element_end(sem->semstate, isnull);
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
	if (sem->array_end)
		sem->array_end(sem->semstate);
	return true;
}

/* One value at s->p (no space before it). */
static bool
scan_value(Scan *s)
{
	bool		ok;

	switch (peek_type(s))
	{
		case JSON_TOKEN_OBJECT_START:
		case JSON_TOKEN_ARRAY_START:
			if (s->depth >= SCAN_MAX_DEPTH)
				return false;
			check_stack_depth();
			s->depth++;
			ok = *s->p == '{' ? scan_object(s) : scan_array(s);
			s->depth--;
			return ok;
		default:
			return scan_scalar(s);
	}
}

/* See json_scan.h. */
bool
json_scan_plain(const char *text, int len, JsonSemAction *sem)
{
	Scan		s;

	s.p = text;
	s.end = text + len;
	s.sem = sem;
	s.depth = 0;
	skip_space(&s);
	if (!scan_value(&s))
		return false;
	skip_space(&s);
	return s.p == s.end;
}
