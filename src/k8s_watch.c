/*
 * k8s_watch.c — WATCH streams and paged LIST bodies, framed as they arrive.
 *
 * A watch body is a sequence of JSON objects {"type": ..., "object": ...};
 * a LIST body is one object whose "items" array may be large.  Both are fed
 * chunk by chunk, whatever the chunk boundaries, to a framer: a scanner that
 * follows only the structure of JSON (strings, nesting) to find where one
 * value ends, keeps its bytes, and notes on the way the few members paidb
 * needs before parsing it (the event's type, metadata.name and
 * metadata.resourceVersion).  The value itself is parsed once, later, by
 * whoever applies it (jsonb_in, in a subtransaction): no tree is built
 * here, and nothing is parsed, serialised and parsed again.
 *
 * Memory is bounded by paidb.max_object_bytes: the framer checks the limit
 * before its buffer grows, and a larger value is scanned to its end without
 * being kept (it is queued as "oversized", with the name it carried), so one
 * huge object or an endless line costs at most that limit.  A LIST is walked
 * by a small state machine around the framer so that each element of
 * "items" is framed on its own and the page is never held as one document;
 * a LIST whose "items" is not an array, whose items are not objects or have
 * no name, or without metadata.resourceVersion fails instead of looking
 * like an empty or partial page.
 *
 * The parse callbacks run from k8s_client_wait() after libcurl has returned,
 * never inside a curl callback.  Everything queued is palloc'd in the
 * request's memory context and goes with it.
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include <json-c/json.h>

#include "common/pg_prng.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "guc.h"
#include "k8s_watch.h"
#include "worker_common.h"

/* Deepest JSON nesting accepted by json-c where it still parses (Status, metadata) */
#define K8S_JSON_MAX_DEPTH	512

/* Default idle guard of a watch that asked for bookmarks */
#define K8S_WATCH_IDLE_DEFAULT_S 180

/* Nesting levels whose keys the framer follows */
#define K8S_FRAME_TRACK		4

/* Longest key the framer compares (longer keys match nothing) */
#define K8S_FRAME_KEY_MAX	32

/*
 * A value still unended after this many times the cap, and at least
 * K8S_FRAME_RUNAWAY_MIN bytes, is not a value: no API server sends one (an
 * etcd value is a few MB at most); the stream is given up as bad data.
 */
#define K8S_FRAME_RUNAWAY	2
#define K8S_FRAME_RUNAWAY_MIN ((size_t) 256 * 1024 * 1024)

/* Longest string value the framer notes (longer: noted as absent) */
#define K8S_FRAME_NOTE_MAX	1024

/* Room around the object in a watch event ({"type":"MODIFIED","object":}) */
#define K8S_EVENT_SLACK		4096

/*
 * A value's buffer beyond this size moves to a memory context of its own,
 * which is handed to the caller with the text: a large object is never
 * copied between the framer and whoever parses it.
 */
#define K8S_FRAME_OWN_CXT	(64 * 1024)

/* Limit of a LIST member other than items (kind, apiVersion, metadata) */
#define K8S_LIST_MEMBER_MAX (1024 * 1024)

/* What the framer notes while it scans */
typedef enum K8sNote
{
	NOTE_TYPE,					/* watch: "type" */
	NOTE_NAME,					/* metadata.name (of the event's object) */
	NOTE_RV,					/* metadata.resourceVersion (likewise) */
	NOTE_COUNT
} K8sNote;

/* One noted string member, raw (escapes not decoded) */
typedef struct K8sNoted
{
	bool		set;
	bool		escaped;		/* has a backslash: decode before use */
	bool		too_long;
	int			len;
	char		text[K8S_FRAME_NOTE_MAX];
} K8sNoted;

/* Framer of one JSON value at a time (see the file header) */
typedef struct K8sFramer
{
	MemoryContext mcxt;
	size_t		cap;			/* bytes of one value kept at most; 0: the
								 * current paidb.max_object_bytes + slack */
	size_t		slack;
	bool		watch;			/* value is a watch event: notes under "object" */
	/* the value being framed */
	bool		active;
	bool		in_string;
	bool		escape;
	bool		scalar;			/* a bare scalar at the top (true, 12, null) */
	bool		string_is_key;
	int			note;			/* the NOTE_* the current string goes to, or -1 */
	int			depth;			/* containers open */
	bool		is_obj[K8S_FRAME_TRACK + 1];
	bool		expect_key[K8S_FRAME_TRACK + 1];
	bool		after_colon[K8S_FRAME_TRACK + 1];
	char		key[K8S_FRAME_TRACK + 1][K8S_FRAME_KEY_MAX + 1];
	int			key_len[K8S_FRAME_TRACK + 1];
	bool		key_bad[K8S_FRAME_TRACK + 1];
	K8sNoted	notes[NOTE_COUNT];
	char		first;			/* first byte of the value */
	/* watch: the "object" member's span */
	char		obj_first;
	bool		obj_open;
	size_t		obj_start;
	size_t		obj_end;
	/* bytes */
	size_t		nbytes;			/* bytes of the value so far */
	bool		oversized;
	bool		oversize_told;	/* watch: a notice of it was queued */
	bool		runaway;		/* ran past K8S_FRAME_RUNAWAY caps unended */
	char	   *buf;
	size_t		buf_len;
	size_t		buf_cap;
	MemoryContext buf_cxt;		/* a large buf's own context, or NULL */
} K8sFramer;

/* A framed value waiting to be taken */
typedef struct K8sFrame
{
	dlist_node	node;
	char	   *text;			/* the value (NUL-terminated), or NULL if oversized */
	MemoryContext text_cxt;		/* a large text's own context (handed on whole), or NULL */
	size_t		len;			/* its length, or the size seen */
	bool		oversized;
	bool		notice;			/* watch: the value passed the cap and is
								 * still streaming (nothing else is set) */
	bool		told;			/* watch: a notice of it went before */
	char		first;			/* first byte of the value (watch: of its object) */
	char	   *type;			/* decoded notes, or NULL */
	char	   *name;
	char	   *rv;
	bool		name_too_long;	/* a metadata.name beyond K8S_FRAME_NOTE_MAX */
	size_t		obj_start;		/* watch: the object inside text */
	size_t		obj_len;
} K8sFrame;

struct K8sWatch
{
	K8sRequest *req;
	K8sFramer	fr;
	bool		bad;
	char	   *bad_message;
	dlist_head	queue;
	int			nqueued;
	char	   *last_rv;
	bool		expired;
	bool		finished;
	K8sWatchEnd end;
	int			timeout_s;
};

/* Where the LIST parser is in the outer object */
typedef enum K8sListState
{
	LS_START,					/* before '{' */
	LS_KEY,						/* before a key or '}' */
	LS_KEY_STRING,				/* inside a key (framer) */
	LS_COLON,					/* before ':' */
	LS_VALUE,					/* inside a member value (framer) */
	LS_ITEMS_OPEN,				/* before the '[' of "items" */
	LS_ITEM_OR_END,				/* before the first item or ']' */
	LS_ITEM,					/* inside an item (framer) */
	LS_ITEM_SEP,				/* before ',' or ']' */
	LS_AFTER_VALUE,				/* before ',' or '}' */
	LS_DONE						/* after the final '}' */
} K8sListState;

struct K8sList
{
	K8sRequest *req;
	K8sFramer	fr;				/* keys and member values */
	K8sFramer	item_fr;		/* items */
	K8sListState state;
	char	   *key;
	bool		bad;
	char	   *bad_message;
	bool		saw_items;
	bool		saw_metadata;
	dlist_head	queue;
	int			nqueued;
	int			nitems;
	char	   *resource_version;
	char	   *continue_token;
	int64		remaining;
	bool		finished;
};

static const char *const k8s_event_type_names[] = {
	"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "UNKNOWN"
};

/* Paths of the notes: under "object" in a watch event, at the top in an item */
static const char *const k8s_note_paths[NOTE_COUNT][3] = {
	{"type", NULL, NULL},
	{"metadata", "name", NULL},
	{"metadata", "resourceVersion", NULL}
};

/* ---------------------------------------------------------------------
 * the framer
 * ---------------------------------------------------------------------
 */

/* Set up a framer keeping at most cap bytes of a value */
static void
k8s_framer_init(K8sFramer *fr, MemoryContext mcxt, size_t cap, size_t slack, bool watch)
{
	memset(fr, 0, sizeof(*fr));
	fr->mcxt = mcxt;
	fr->cap = cap;
	fr->slack = slack;
	fr->watch = watch;
	fr->note = -1;
}

/* The framer's limit now (a reload may lower paidb.max_object_bytes mid-stream) */
static size_t
k8s_framer_cap(const K8sFramer *fr)
{
	return fr->cap != 0 ? fr->cap : (size_t) paidb_max_object_bytes + fr->slack;
}

/* Forget the value framed (its buffer was taken or is freed) */
static void
k8s_framer_reset(K8sFramer *fr)
{
	MemoryContext mcxt = fr->mcxt;
	size_t		cap = fr->cap;
	size_t		slack = fr->slack;
	bool		watch = fr->watch;

	if (fr->buf_cxt)
		MemoryContextDelete(fr->buf_cxt);
	else if (fr->buf)
		pfree(fr->buf);
	k8s_framer_init(fr, mcxt, cap, slack, watch);
}

/* Depth and path of note n: watch events have it one level down, under "object" */
static bool
k8s_note_matches(K8sFramer *fr, int n, int depth)
{
	int			base = fr->watch && n != NOTE_TYPE ? 1 : 0;
	int			d;

	if (depth - base < 1 || depth - base > 3)
		return false;
	if (base == 1 && (fr->key_bad[1] || strcmp(fr->key[1], "object") != 0 || !fr->is_obj[1]))
		return false;
	for (d = 1 + base; d <= depth; d++)
	{
		const char *want = k8s_note_paths[n][d - 1 - base];

		if (want == NULL || !fr->is_obj[d] || fr->key_bad[d] || strcmp(fr->key[d], want) != 0)
			return false;
	}
	/* a full path, not a prefix of one */
	return (depth - base == 3 || k8s_note_paths[n][depth - base] == NULL);
}

/* A key ended at depth d: a later member replaces what an earlier one noted */
static void
k8s_framer_key_done(K8sFramer *fr, int d)
{
	int			n;

	fr->key[d][Min(fr->key_len[d], K8S_FRAME_KEY_MAX)] = '\0';
	if (fr->key_len[d] > K8S_FRAME_KEY_MAX)
		fr->key_bad[d] = true;
	for (n = 0; n < NOTE_COUNT; n++)
	{
		int			base = fr->watch && n != NOTE_TYPE ? 1 : 0;
		int			k;
		bool		prefix = true;

		if (d - base > 3)
			continue;
		if (d <= base)
		{
			/* a new "object" member: everything noted under it goes */
			if (base == 1 && !fr->key_bad[1] && strcmp(fr->key[1], "object") == 0)
				fr->notes[n].set = false;
			continue;
		}
		for (k = 1; k <= d && prefix; k++)
		{
			const char *want = k < 1 + base ? "object" : k8s_note_paths[n][k - 1 - base];

			if (want == NULL || fr->key_bad[k] || strcmp(fr->key[k], want) != 0)
				prefix = false;
		}
		if (prefix)
			fr->notes[n].set = false;
	}
	if (fr->watch && d == 1 && !fr->key_bad[1] && strcmp(fr->key[1], "object") == 0)
	{
		fr->obj_first = '\0';
		fr->obj_open = false;
	}
}

/* A member value starts at depth d with byte c at offset pos of the value */
static void
k8s_framer_value_start(K8sFramer *fr, int d, char c, size_t pos)
{
	int			n;

	if (d < 1 || d > K8S_FRAME_TRACK || !fr->is_obj[d] || !fr->after_colon[d])
		return;
	fr->after_colon[d] = false;
	if (fr->watch && d == 1 && !fr->key_bad[1] && strcmp(fr->key[1], "object") == 0)
	{
		fr->obj_first = c;
		fr->obj_start = pos;
		fr->obj_open = (c == '{' || c == '[');
	}
	if (c != '"')
		return;
	for (n = 0; n < NOTE_COUNT; n++)
	{
		if (k8s_note_matches(fr, n, d))
		{
			fr->note = n;
			fr->notes[n].set = true;
			fr->notes[n].len = 0;
			fr->notes[n].escaped = false;
			fr->notes[n].too_long = false;
			return;
		}
	}
}

/* Keep bytes of the value, or give up keeping them beyond the cap */
static void
k8s_framer_keep(K8sFramer *fr, const char *data, size_t n)
{
	size_t		cap = k8s_framer_cap(fr);

	if (n == 0)
		return;
	if (!fr->oversized && fr->buf_len + n > cap)
	{
		/* checked before the buffer grows: nothing beyond the cap is held */
		fr->oversized = true;
		if (fr->buf_cxt)
			MemoryContextDelete(fr->buf_cxt);
		else if (fr->buf)
			pfree(fr->buf);
		fr->buf_cxt = NULL;
		fr->buf = NULL;
		fr->buf_len = fr->buf_cap = 0;
	}
	if (!fr->oversized)
	{
		if (fr->buf_len + n + 1 > fr->buf_cap)
		{
			size_t		newcap = fr->buf_cap ? fr->buf_cap : 8192;

			while (newcap < fr->buf_len + n + 1)
				newcap *= 2;
			newcap = Min(newcap, cap + 1);
			if (fr->buf_cxt == NULL && newcap > K8S_FRAME_OWN_CXT)
			{
				char	   *big;

				fr->buf_cxt = AllocSetContextCreate(fr->mcxt, "paidb large value",
													ALLOCSET_SMALL_SIZES);
				big = MemoryContextAllocHuge(fr->buf_cxt, newcap);
				if (fr->buf)
				{
					memcpy(big, fr->buf, fr->buf_len);
					pfree(fr->buf);
				}
				fr->buf = big;
			}
			else if (fr->buf == NULL)
				fr->buf = MemoryContextAlloc(fr->mcxt, newcap);
			else
				fr->buf = repalloc_huge(fr->buf, newcap);
			fr->buf_cap = newcap;
		}
		memcpy(fr->buf + fr->buf_len, data, n);
		fr->buf_len += n;
	}
	fr->nbytes += n;
}

/*
 * Scan data[0..len) as part of one JSON value.  Returns the number of bytes
 * consumed; *done is set when the value ended there (a bare scalar ends
 * before the byte that ends it, which is not consumed).  Leading
 * whitespace is skipped.  *bad is set on bytes that cannot be JSON
 * structure (a closing bracket with nothing open).
 */
static size_t
k8s_framer_feed(K8sFramer *fr, const char *data, size_t len, bool *done, bool *bad)
{
	size_t		p = 0;
	size_t		seg;
	size_t		past;
	size_t		limit = Max(K8S_FRAME_RUNAWAY * k8s_framer_cap(fr), K8S_FRAME_RUNAWAY_MIN);

	*done = false;
	*bad = false;
	if (!fr->active)
	{
		while (p < len && isspace((unsigned char) data[p]))
			p++;
		if (p == len)
			return p;
		fr->active = true;
		fr->first = data[p];
		if (data[p] != '{' && data[p] != '[' && data[p] != '"')
		{
			if (!(isalnum((unsigned char) data[p]) || data[p] == '-'))
			{
				*bad = true;	/* cannot start a JSON value */
				return p;
			}
			fr->scalar = true;
		}
	}
	seg = p;
	/*
	 * The first position of data past the limit, by position in the value,
	 * so that any chunking gives up at the same byte.  Computed once (fr->nbytes
	 * grows only after the loop): the loop's stores into *fr made the
	 * compiler load it again for every byte.
	 */
	past = seg + (fr->nbytes <= limit ? limit - fr->nbytes + 1 : 0);
	while (p < len && !*done)
	{
		char		c = data[p];

		if (p >= past)
		{
			fr->runaway = true;
			*bad = true;
			break;
		}
		if (fr->in_string)
		{
			K8sNoted   *nt = fr->note >= 0 ? &fr->notes[fr->note] : NULL;
			int			d = fr->depth;

			if (!fr->escape && !fr->string_is_key && nt == NULL)
			{
				/* the common case: skip to the next quote or backslash */
				size_t		stop = Min(len, past);

				while (p < stop && data[p] != '"' && data[p] != '\\')
					p++;
				if (p == stop && p < len)
					continue;	/* at the limit: the check above ends it */
				if (p == len)
					break;
				c = data[p];
			}
			else if (!fr->escape && fr->string_is_key)
			{
				/*
				 * A key's plain run at once (keys are a third of a
				 * framework's text): as the loop below takes it one byte
				 * at a time, up to the next quote or backslash.
				 */
				size_t		stop = Min(len, past);
				size_t		run = p;

				while (run < stop && data[run] != '"' && data[run] != '\\')
					run++;
				if (run > p)
				{
					if (fr->key_len[d] < K8S_FRAME_KEY_MAX)
						memcpy(&fr->key[d][fr->key_len[d]], data + p,
							   Min(run - p, (size_t) (K8S_FRAME_KEY_MAX - fr->key_len[d])));
					fr->key_len[d] += (int) (run - p);
					p = run;
					continue;
				}
			}
			if (fr->escape)
				fr->escape = false;
			else if (c == '\\')
				fr->escape = true;
			else if (c == '"')
			{
				fr->in_string = false;
				fr->note = -1;
				if (fr->string_is_key)
					k8s_framer_key_done(fr, d);
				else if (fr->depth == 0)
					*done = true;
				p++;
				continue;
			}
			if (fr->string_is_key)
			{
				if (c == '\\')
					fr->key_bad[d] = true;	/* escaped keys match nothing */
				if (fr->key_len[d] < K8S_FRAME_KEY_MAX)
					fr->key[d][fr->key_len[d]] = c;
				fr->key_len[d]++;
			}
			else if (nt != NULL)
			{
				if (c == '\\')
					nt->escaped = true;
				if (nt->len < K8S_FRAME_NOTE_MAX - 1)
					nt->text[nt->len++] = c;
				else
					nt->too_long = true;
			}
			p++;
			continue;
		}
		if (fr->scalar && fr->depth == 0)
		{
			if (isalnum((unsigned char) c) || c == '-' || c == '+' || c == '.')
			{
				p++;
				continue;
			}
			*done = true;
			break;
		}
		switch (c)
		{
			case ' ':
			case '\t':
			case '\n':
			case '\r':
				break;
			case '{':
			case '[':
				k8s_framer_value_start(fr, fr->depth, c, fr->nbytes + (p - seg));
				fr->depth++;
				if (fr->depth <= K8S_FRAME_TRACK)
				{
					int			d = fr->depth;

					fr->is_obj[d] = (c == '{');
					fr->expect_key[d] = (c == '{');
					fr->after_colon[d] = false;
					fr->key_len[d] = 0;
					fr->key[d][0] = '\0';
					fr->key_bad[d] = false;
				}
				break;
			case '}':
			case ']':
				if (fr->depth == 0)
				{
					*bad = true;
					return p;
				}
				fr->depth--;
				if (fr->watch && fr->depth == 1 && fr->obj_open &&
					!fr->key_bad[1] && strcmp(fr->key[1], "object") == 0)
				{
					fr->obj_end = fr->nbytes + (p - seg) + 1;
					fr->obj_open = false;
				}
				if (fr->depth == 0)
					*done = true;
				break;
			case ':':
				if (fr->depth >= 1 && fr->depth <= K8S_FRAME_TRACK && fr->is_obj[fr->depth])
				{
					fr->expect_key[fr->depth] = false;
					fr->after_colon[fr->depth] = true;
				}
				break;
			case ',':
				if (fr->depth >= 1 && fr->depth <= K8S_FRAME_TRACK && fr->is_obj[fr->depth])
				{
					fr->expect_key[fr->depth] = true;
					fr->after_colon[fr->depth] = false;
				}
				break;
			case '"':
				fr->in_string = true;
				fr->note = -1;
				fr->string_is_key = (fr->depth >= 1 && fr->depth <= K8S_FRAME_TRACK &&
									 fr->is_obj[fr->depth] && fr->expect_key[fr->depth]);
				if (fr->string_is_key)
				{
					fr->key_len[fr->depth] = 0;
					fr->key_bad[fr->depth] = false;
				}
				else
					k8s_framer_value_start(fr, fr->depth, c, fr->nbytes + (p - seg));
				break;
			default:
				/* a scalar inside a container */
				k8s_framer_value_start(fr, fr->depth, c, fr->nbytes + (p - seg));
				break;
		}
		p++;
	}
	k8s_framer_keep(fr, data + seg, p - seg);
	return p;
}

/* Decode a noted JSON string (raw, without quotes) into a palloc'd string */
static char *
k8s_noted_string(MemoryContext mcxt, const K8sNoted *nt)
{
	json_tokener *tok;
	struct json_object *obj;
	char	   *quoted;
	char	   *out = NULL;

	if (!nt->set || nt->too_long)
		return NULL;
	if (!nt->escaped)
	{
		out = MemoryContextAlloc(mcxt, nt->len + 1);
		memcpy(out, nt->text, nt->len);
		out[nt->len] = '\0';
		/* a raw control character or NUL: not a valid name either way */
		return out;
	}
	quoted = psprintf("\"%.*s\"", nt->len, nt->text);
	tok = json_tokener_new();
	if (tok == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	obj = json_tokener_parse_ex(tok, quoted, (int) strlen(quoted));
	if (obj != NULL && json_tokener_get_error(tok) == json_tokener_success &&
		json_object_is_type(obj, json_type_string))
	{
		const char *s = json_object_get_string(obj);

		/* a name with a NUL in it is no name */
		if ((size_t) json_object_get_string_len(obj) == strlen(s))
			out = MemoryContextStrdup(mcxt, s);
	}
	json_object_put(obj);
	json_tokener_free(tok);
	pfree(quoted);
	return out;
}

/* Copy what is noted so far into a frame (the framer keeps its notes) */
static void
k8s_framer_copy_notes(K8sFramer *fr, K8sFrame *f, MemoryContext mcxt)
{
	f->type = k8s_noted_string(mcxt, &fr->notes[NOTE_TYPE]);
	f->name = k8s_noted_string(mcxt, &fr->notes[NOTE_NAME]);
	f->rv = k8s_noted_string(mcxt, &fr->notes[NOTE_RV]);
	f->name_too_long = fr->notes[NOTE_NAME].set && fr->notes[NOTE_NAME].too_long;
}

/*
 * A notice frame for a watch event that has just passed the cap and is
 * still streaming: what it carried so far, once per value.
 */
static K8sFrame *
k8s_framer_notice(K8sFramer *fr, MemoryContext mcxt)
{
	K8sFrame   *f = MemoryContextAllocZero(mcxt, sizeof(K8sFrame));

	f->notice = true;
	f->oversized = true;
	f->len = fr->nbytes;
	/* a string being noted right now is not whole: not used */
	if (!fr->in_string || fr->note < 0)
		k8s_framer_copy_notes(fr, f, mcxt);
	fr->oversize_told = true;
	return f;
}

/* Take the value framed as a K8sFrame in mcxt; the framer starts over */
static K8sFrame *
k8s_framer_take(K8sFramer *fr, MemoryContext mcxt)
{
	K8sFrame   *f = MemoryContextAllocZero(mcxt, sizeof(K8sFrame));

	f->first = fr->first;
	f->oversized = fr->oversized;
	f->len = fr->nbytes;
	if (!fr->oversized && fr->buf != NULL)
	{
		fr->buf[fr->buf_len] = '\0';
		f->text = fr->buf;
		f->text_cxt = fr->buf_cxt;
		fr->buf = NULL;			/* handed over */
		fr->buf_cxt = NULL;
	}
	k8s_framer_copy_notes(fr, f, mcxt);
	f->told = fr->oversize_told;
	if (fr->watch)
	{
		f->first = fr->obj_first;
		if (fr->obj_first == '{' && fr->obj_end > fr->obj_start)
		{
			f->obj_start = fr->obj_start;
			f->obj_len = fr->obj_end - fr->obj_start;
		}
		else
			f->first = fr->obj_first == '{' ? '\0' : fr->obj_first;
	}
	k8s_framer_reset(fr);
	return f;
}

/* ---------------------------------------------------------------------
 * shared helpers
 * ---------------------------------------------------------------------
 */

/*
 * Whether a resourceVersion is a decimal number that fits in int64, as
 * etcd's revisions do; its value in *value (may be NULL).  Anything else
 * (text, a sign, 30 nines) is not a position paidb can store or compare.
 */
bool
k8s_rv_parse(const char *rv, int64 *value)
{
	const char *p;
	uint64		v = 0;

	if (rv == NULL || rv[0] == '\0' || strlen(rv) > 19)
		return false;
	for (p = rv; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (uint64) (*p - '0');	/* 19 digits fit in uint64 */
	}
	if (v > (uint64) PG_INT64_MAX)
		return false;
	if (value)
		*value = (int64) v;
	return true;
}

/* Whether a resourceVersion is a position paidb can watch from */
bool
k8s_rv_is_decimal(const char *rv)
{
	return k8s_rv_parse(rv, NULL);
}

/* Take the first queued frame, or NULL */
static K8sFrame *
k8s_queue_pop(dlist_head *queue, int *count)
{
	if (dlist_is_empty(queue))
		return NULL;
	(*count)--;
	return dlist_container(K8sFrame, node, dlist_pop_head_node(queue));
}

/*
 * The frame's text from byte start on, len bytes, NUL-terminated, palloc'd
 * in CurrentMemoryContext: a large text is moved there with its own
 * context, not copied.  The frame no longer holds it.
 */
static char *
k8s_frame_hand_over(K8sFrame *f, size_t start, size_t len)
{
	char	   *out;

	if (f->text_cxt == NULL)
	{
		out = palloc(len + 1);
		memcpy(out, f->text + start, len);
		out[len] = '\0';
		return out;
	}
	if (start > 0)
		memmove(f->text, f->text + start, len);
	f->text[len] = '\0';
	out = f->text;
	MemoryContextSetParent(f->text_cxt, CurrentMemoryContext);
	f->text = NULL;
	f->text_cxt = NULL;
	return out;
}

/* Free a frame taken from a queue */
static void
k8s_frame_free(K8sFrame *f)
{
	if (f->text_cxt)
		MemoryContextDelete(f->text_cxt);
	else if (f->text)
		pfree(f->text);
	if (f->type)
		pfree(f->type);
	if (f->name)
		pfree(f->name);
	if (f->rv)
		pfree(f->rv);
	pfree(f);
}

/* A string member of obj, or NULL */
static const char *
k8s_json_get_string(struct json_object *obj, const char *key)
{
	struct json_object *v;

	if (obj == NULL || !json_object_is_type(obj, json_type_object) ||
		!json_object_object_get_ex(obj, key, &v) ||
		!json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* pstrdup that keeps NULL */
static char *
k8s_pstrdup_or_null(const char *s)
{
	return s ? pstrdup(s) : NULL;
}

/* Parse a small JSON text with json-c (the caller puts it), or NULL */
static struct json_object *
k8s_json_parse_small(const char *text, size_t len)
{
	json_tokener *tok = json_tokener_new_ex(K8S_JSON_MAX_DEPTH);
	struct json_object *obj;

	if (tok == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	obj = json_tokener_parse_ex(tok, text, (int) Min(len, (size_t) INT_MAX));
	if (json_tokener_get_error(tok) != json_tokener_success)
	{
		json_object_put(obj);
		obj = NULL;
	}
	json_tokener_free(tok);
	return obj;
}

/* ---------------------------------------------------------------------
 * watch
 * ---------------------------------------------------------------------
 */

/* Frame watch-stream bytes; queue every whole event; returns the number queued */
static int
k8s_watch_consume(K8sRequest *req, void *state, const char *data, size_t len)
{
	K8sWatch   *w = (K8sWatch *) state;
	size_t		pos = 0;
	int			produced = 0;

	while (pos < len && !w->bad)
	{
		bool		done;
		bool		bad;
		K8sFrame   *f;

		pos += k8s_framer_feed(&w->fr, data + pos, len - pos, &done, &bad);
		if (!bad && w->fr.active && w->fr.first != '{')
			bad = true;
		if (w->fr.oversized && !w->fr.oversize_told)
		{
			/* said as soon as it passes the cap, not when (if ever) it ends */
			f = k8s_framer_notice(&w->fr, k8s_request_context(req));
			dlist_push_tail(&w->queue, &f->node);
			w->nqueued++;
			produced++;
		}
		if (bad)
		{
			w->bad = true;
			w->bad_message = w->fr.runaway ?
				psprintf("an event in the watch stream ran to %zu bytes without ending, far past paidb.max_object_bytes",
						 w->fr.nbytes) :
				pstrdup("invalid JSON in watch stream: not a sequence of JSON objects");
			w->bad_message = MemoryContextStrdup(k8s_request_context(req), w->bad_message);
			return -1;			/* events queued before it are still taken */
		}
		if (!done)
			continue;
		f = k8s_framer_take(&w->fr, k8s_request_context(req));
		dlist_push_tail(&w->queue, &f->node);
		w->nqueued++;
		produced++;
	}
	return produced;
}

/* Decide how the watch stream ended */
static void
k8s_watch_finish(K8sRequest *req, void *state, K8sResult *res)
{
	K8sWatch   *w = (K8sWatch *) state;
	bool		started = res->http_status >= 200 && res->http_status < 300;

	w->finished = true;
	if (w->bad && started)
	{
		w->end = K8S_WATCH_BAD_DATA;
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = w->bad_message;
	}
	else if (started)
	{
		if (res->kind == K8S_RESULT_OK && !w->fr.active)
			w->end = K8S_WATCH_CLOSED;
		else
		{
			w->end = K8S_WATCH_CUT;
			if (res->kind == K8S_RESULT_OK)
			{
				res->kind = K8S_RESULT_TRANSPORT;
				res->message = "watch stream ended in the middle of an event";
			}
		}
	}
	else
	{
		w->end = K8S_WATCH_FAILED;
		if (k8s_result_is_gone(res))
			w->expired = true;
	}
	/* drop any partial event */
	k8s_framer_reset(&w->fr);
}

/* Nothing outside the request's memory context to release */
static void
k8s_watch_cleanup(void *state)
{
	K8sWatch   *w = (K8sWatch *) state;

	dlist_init(&w->queue);
	w->nqueued = 0;
}

static const K8sStreamOps k8s_watch_ops = {
	k8s_watch_consume,
	k8s_watch_finish,
	k8s_watch_cleanup
};

/* Fill opts with the defaults (bookmarks, jitter, paidb.watch_timeout) */
void
k8s_watch_options_init(K8sWatchOptions *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->allow_bookmarks = true;
	opts->jitter = true;
}

/* Start a watch of a collection path (which may carry selectors) */
K8sWatch *
k8s_watch_start(K8sClient *client, const char *collection_path,
				const K8sWatchOptions *opts)
{
	K8sWatchOptions defaults;
	const K8sWatchOptions *o = opts;
	int			base;
	int			timeout_s;
	long		idle_s;
	const char *start_rv;
	char	   *path;
	K8sRequest *req;
	K8sWatch   *w;

	if (o == NULL)
	{
		k8s_watch_options_init(&defaults);
		o = &defaults;
	}
	base = o->timeout_s > 0 ? o->timeout_s : paidb_watch_timeout_s;
	timeout_s = base;
	if (o->jitter && base > 1)
		timeout_s = base + (int) pg_prng_uint64_range(&pg_global_prng_state, 0, base - 1);
	if (o->idle_timeout_s > 0)
		idle_s = o->idle_timeout_s;
	else if (o->idle_timeout_s == 0 && o->allow_bookmarks)
		idle_s = K8S_WATCH_IDLE_DEFAULT_S;
	else
		idle_s = 0;
	start_rv = (o->resource_version != NULL && o->resource_version[0] != '\0') ?
		o->resource_version : NULL;

	path = k8s_path_add_query(collection_path, "watch", "true");
	if (start_rv != NULL)
		path = k8s_path_add_query(path, "resourceVersion", start_rv);
	if (o->allow_bookmarks)
		path = k8s_path_add_query(path, "allowWatchBookmarks", "true");
	path = k8s_path_add_query(path, "timeoutSeconds", psprintf("%d", timeout_s));

	req = k8s_new_get(client, path);
	PG_TRY();
	{
		w = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sWatch));
		w->req = req;
		w->timeout_s = timeout_s;
		w->end = K8S_WATCH_OPEN;
		dlist_init(&w->queue);
		if (start_rv != NULL)
			w->last_rv = MemoryContextStrdup(k8s_request_context(req), start_rv);
		k8s_framer_init(&w->fr, k8s_request_context(req), 0, K8S_EVENT_SLACK, true);
		k8s_request_set_stream(req, &k8s_watch_ops, w);

		/* the server ends the watch; our deadline only catches a dead one */
		k8s_request_set_timeout(req, (long) timeout_s * 1000 + paidb_k8s_timeout_ms);
		k8s_request_set_idle_timeout(req, idle_s);
		k8s_request_submit(req);
	}
	PG_CATCH();
	{
		k8s_request_free(req);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return w;
}

#ifdef PAIDB_TEST_HOOKS
/* Name of an event type ("ADDED", ...) */
const char *
k8s_watch_event_type_name(K8sWatchEventType type)
{
	if ((int) type < 0 || (int) type > (int) K8S_WATCH_UNKNOWN)
		return "UNKNOWN";
	return k8s_event_type_names[type];
}
#endif

/* Map a type string to its enum value */
static K8sWatchEventType
k8s_watch_event_type(const char *name)
{
	int			i;

	for (i = 0; i < (int) K8S_WATCH_UNKNOWN; i++)
	{
		if (strcmp(name, k8s_event_type_names[i]) == 0)
			return (K8sWatchEventType) i;
	}
	return K8S_WATCH_UNKNOWN;
}

/* Fill an ERROR event's code, reason and message from its Status object */
static void
k8s_watch_error_fields(K8sWatchEvent *e)
{
	struct json_object *st;
	struct json_object *code;

	if (e->object_json == NULL)
		return;
	st = k8s_json_parse_small(e->object_json, e->object_len);
	if (st == NULL)
		return;
	PG_TRY();
	{
		if (json_object_object_get_ex(st, "code", &code) &&
			json_object_is_type(code, json_type_int))
			e->error_code = json_object_get_int(code);
		e->error_reason = k8s_pstrdup_or_null(k8s_json_get_string(st, "reason"));
		e->error_message = k8s_pstrdup_or_null(k8s_json_get_string(st, "message"));
	}
	PG_CATCH();
	{
		json_object_put(st);
		PG_RE_THROW();
	}
	PG_END_TRY();
	json_object_put(st);
}

/* Next whole event, or NULL if none is queued now (the caller may pfree it) */
K8sWatchEvent *
k8s_watch_next_event(K8sWatch *watch)
{
	K8sFrame   *f;
	K8sWatchEvent *e;
	bool		name_too_long;

	f = k8s_queue_pop(&watch->queue, &watch->nqueued);
	if (f == NULL)
		return NULL;

	e = palloc0(sizeof(K8sWatchEvent));
	if (f->notice)
	{
		/* an event passing the cap, still streaming: only to be said */
		e->type = f->type ? k8s_watch_event_type(f->type) : K8S_WATCH_UNKNOWN;
		e->type_name = e->type != K8S_WATCH_UNKNOWN ? k8s_event_type_names[e->type] : "(not yet seen)";
		e->name = k8s_pstrdup_or_null(f->name);
		e->oversized = true;
		e->in_progress = true;
		e->object_len = f->len;
		k8s_frame_free(f);
		return e;
	}
	e->told = f->told;
	e->type = f->type ? k8s_watch_event_type(f->type) : K8S_WATCH_UNKNOWN;
	e->type_name = e->type != K8S_WATCH_UNKNOWN ? k8s_event_type_names[e->type] :
		f->type ? pstrdup(f->type) : pstrdup("(none)");
	e->name = k8s_pstrdup_or_null(f->name);
	e->resource_version = k8s_pstrdup_or_null(f->rv);
	name_too_long = f->name_too_long;
	if (f->oversized || f->obj_len > (size_t) paidb_max_object_bytes)
	{
		e->oversized = true;
		e->object_len = f->oversized ? f->len : f->obj_len;
	}
	else if (f->text != NULL && f->obj_len > 0)
	{
		e->object_len = f->obj_len;
		e->object_json = k8s_frame_hand_over(f, f->obj_start, f->obj_len);
	}
	k8s_frame_free(f);

	if (e->type == K8S_WATCH_UNKNOWN)
		e->problem = e->type_name[0] == '(' ? "the event has no type" :
			"the event type is unknown";
	else if (!e->oversized && e->object_json == NULL)
		e->problem = "its object is not a JSON object";
	else if (e->type == K8S_WATCH_ERROR)
	{
		k8s_watch_error_fields(e);
		if (e->error_code == 410)
			watch->expired = true;
	}
	else if (e->type == K8S_WATCH_BOOKMARK && e->resource_version == NULL)
		e->problem = "the bookmark has no metadata.resourceVersion";
	else if (e->type != K8S_WATCH_BOOKMARK && e->name == NULL)
		e->problem = name_too_long ? "its object has a metadata.name of more than 1 kB" :
			"its object has no metadata.name";

	/* a position must be one the server can be asked for again */
	if (e->problem == NULL && e->type != K8S_WATCH_ERROR && e->resource_version != NULL)
	{
		if (!k8s_rv_is_decimal(e->resource_version))
			e->rv_ignored = true;
		else
		{
			char	   *rv = MemoryContextStrdup(k8s_request_context(watch->req),
												 e->resource_version);

			if (watch->last_rv)
				pfree(watch->last_rv);
			watch->last_rv = rv;
		}
	}
	return e;
}

/* Number of events queued and not yet taken */
int
k8s_watch_pending(K8sWatch *watch)
{
	return watch->nqueued;
}

/* State of the stream; K8S_WATCH_OPEN while running or events remain */
K8sWatchEnd
k8s_watch_end(K8sWatch *watch)
{
	if (!watch->finished || watch->nqueued > 0)
		return K8S_WATCH_OPEN;
	return watch->end;
}

/* Name of an end state: "open", "closed", "cut", "failed", "bad_data" */
const char *
k8s_watch_end_name(K8sWatchEnd end)
{
	switch (end)
	{
		case K8S_WATCH_OPEN:
			return "open";
		case K8S_WATCH_CLOSED:
			return "closed";
		case K8S_WATCH_CUT:
			return "cut";
		case K8S_WATCH_FAILED:
			return "failed";
		case K8S_WATCH_BAD_DATA:
			return "bad_data";
	}
	return "unknown";
}

/* Whether the watch hit 410 Gone/Expired (HTTP status or ERROR event): LIST again */
bool
k8s_watch_expired(K8sWatch *watch)
{
	return watch->expired;
}

/* RV of the last ADDED/MODIFIED/DELETED/BOOKMARK event taken, or the start RV */
const char *
k8s_watch_resource_version(K8sWatch *watch)
{
	return watch->last_rv;
}

/* The timeoutSeconds actually sent (after jitter) */
int
k8s_watch_timeout_s(K8sWatch *watch)
{
	return watch->timeout_s;
}

/* The underlying request's result (kind PENDING while running) */
const K8sResult *
k8s_watch_result(K8sWatch *watch)
{
	return k8s_request_result(watch->req);
}

/* The underlying request (for k8s_log_failure, user data) */
K8sRequest *
k8s_watch_request(K8sWatch *watch)
{
	return watch->req;
}

/* Stop the watch if it runs and free it with its queued events */
void
k8s_watch_free(K8sWatch *watch)
{
	if (watch != NULL)
		k8s_request_free(watch->req);
}

#ifdef PAIDB_TEST_HOOKS
/* Free an event returned by k8s_watch_next_event */
void
k8s_watch_event_free(K8sWatchEvent *event)
{
	if (event == NULL)
		return;
	if (event->type == K8S_WATCH_UNKNOWN && event->type_name)
		pfree((char *) event->type_name);
	if (event->object_json)
		pfree(event->object_json);
	if (event->name)
		pfree(event->name);
	if (event->resource_version)
		pfree(event->resource_version);
	if (event->error_reason)
		pfree(event->error_reason);
	if (event->error_message)
		pfree(event->error_message);
	pfree(event);
}
#endif

/* ---------------------------------------------------------------------
 * paged list
 * ---------------------------------------------------------------------
 */

/* Mark the list body as malformed */
static void
k8s_list_set_bad(K8sList *l, const char *what)
{
	l->bad = true;
	l->bad_message = MemoryContextStrdup(k8s_request_context(l->req),
										 psprintf("malformed list response: %s", what));
}

/* Take metadata.resourceVersion, continue and remainingItemCount of the list */
static void
k8s_list_take_metadata(K8sList *l, struct json_object *meta)
{
	MemoryContext mcxt = k8s_request_context(l->req);
	const char *s;
	struct json_object *v;

	if (meta == NULL || !json_object_is_type(meta, json_type_object))
		return;
	s = k8s_json_get_string(meta, "resourceVersion");
	if (s != NULL)
		l->resource_version = MemoryContextStrdup(mcxt, s);
	s = k8s_json_get_string(meta, "continue");
	if (s != NULL && s[0] != '\0')
		l->continue_token = MemoryContextStrdup(mcxt, s);
	if (json_object_object_get_ex(meta, "remainingItemCount", &v) &&
		json_object_is_type(v, json_type_int))
		l->remaining = json_object_get_int64(v);
}

/* A member value of the list object was framed: keep what matters of it */
static void
k8s_list_member_done(K8sList *l)
{
	K8sFrame   *f = k8s_framer_take(&l->fr, k8s_request_context(l->req));

	if (f->oversized)
		k8s_list_set_bad(l, psprintf("member \"%s\" is too large", l->key));
	else if (strcmp(l->key, "items") == 0)
	{
		/* "items": null is what Go sends for an empty list; anything else is not a list */
		if (strcmp(f->text, "null") != 0)
			k8s_list_set_bad(l, "\"items\" is not an array");
		l->saw_items = true;
	}
	else if (strcmp(l->key, "metadata") == 0)
	{
		struct json_object *meta = f->first == '{' ? k8s_json_parse_small(f->text, f->len) : NULL;

		if (meta == NULL)
			k8s_list_set_bad(l, "\"metadata\" is not a JSON object");
		else
		{
			PG_TRY();
			{
				k8s_list_take_metadata(l, meta);
			}
			PG_CATCH();
			{
				json_object_put(meta);
				PG_RE_THROW();
			}
			PG_END_TRY();
			json_object_put(meta);
			l->saw_metadata = true;
		}
	}
	k8s_frame_free(f);
}

/* A key of the list object was framed */
static void
k8s_list_key_done(K8sList *l)
{
	K8sFrame   *f = k8s_framer_take(&l->fr, k8s_request_context(l->req));
	struct json_object *k = NULL;

	if (!f->oversized && f->first == '"')
		k = k8s_json_parse_small(f->text, f->len);
	if (k == NULL || !json_object_is_type(k, json_type_string))
		k8s_list_set_bad(l, "a key is not a string");
	else
	{
		if (l->key)
			pfree(l->key);
		l->key = MemoryContextStrdup(k8s_request_context(l->req), json_object_get_string(k));
		l->state = LS_COLON;
	}
	json_object_put(k);
	k8s_frame_free(f);
}

/* An item was framed: queue it, or fail the page if it is not a named object */
static bool
k8s_list_item_done(K8sList *l)
{
	K8sFrame   *f = k8s_framer_take(&l->item_fr, k8s_request_context(l->req));

	if (f->first != '{')
	{
		k8s_frame_free(f);
		k8s_list_set_bad(l, "an item is not a JSON object");
		return false;
	}
	if (f->name == NULL || f->name[0] == '\0')
	{
		bool		too_long = f->name_too_long;

		k8s_frame_free(f);
		k8s_list_set_bad(l, psprintf(too_long ? "item %d has a metadata.name of more than 1 kB" :
									 "item %d has no metadata.name", l->nitems + 1));
		return false;
	}
	dlist_push_tail(&l->queue, &f->node);
	l->nqueued++;
	l->nitems++;
	return true;
}

/* Frame LIST bytes; queue every whole item; returns the number queued */
static int
k8s_list_consume(K8sRequest *req, void *state, const char *data, size_t len)
{
	K8sList    *l = (K8sList *) state;
	size_t		pos = 0;
	int			produced = 0;

	while (pos < len && !l->bad)
	{
		char		c = data[pos];

		switch (l->state)
		{
			case LS_KEY_STRING:
			case LS_VALUE:
			case LS_ITEM:
				{
					K8sFramer  *fr = l->state == LS_ITEM ? &l->item_fr : &l->fr;
					bool		done;
					bool		bad;

					pos += k8s_framer_feed(fr, data + pos, len - pos, &done, &bad);
					if (bad && fr->runaway)
					{
						k8s_list_set_bad(l, psprintf("a value ran to %zu bytes without ending, far past its limit",
													 fr->nbytes));
						return -1;
					}
					if (bad)
					{
						k8s_list_set_bad(l, "it is not JSON");
						break;
					}
					if (!done)
						break;
					if (l->state == LS_KEY_STRING)
						k8s_list_key_done(l);
					else if (l->state == LS_VALUE)
					{
						k8s_list_member_done(l);
						l->state = LS_AFTER_VALUE;
					}
					else
					{
						if (k8s_list_item_done(l))
							produced++;
						l->state = LS_ITEM_SEP;
					}
				}
				break;

			default:
				if (isspace((unsigned char) c))
				{
					pos++;
					break;
				}
				switch (l->state)
				{
					case LS_START:
						if (c != '{')
							k8s_list_set_bad(l, "it is not a JSON object");
						l->state = LS_KEY;
						pos++;
						break;
					case LS_KEY:
						if (c == '}')
						{
							l->state = LS_DONE;
							pos++;
						}
						else if (c == '"')
							l->state = LS_KEY_STRING;	/* the framer reads it */
						else
							k8s_list_set_bad(l, "a key was expected");
						break;
					case LS_COLON:
						if (c != ':')
							k8s_list_set_bad(l, "':' was expected");
						pos++;
						l->state = strcmp(l->key, "items") == 0 ? LS_ITEMS_OPEN : LS_VALUE;
						break;
					case LS_ITEMS_OPEN:
						if (c == '[')
						{
							l->saw_items = true;
							l->state = LS_ITEM_OR_END;
							pos++;
						}
						else
							l->state = LS_VALUE;	/* null, or a malformed list */
						break;
					case LS_ITEM_OR_END:
						if (c == ']')
						{
							l->state = LS_AFTER_VALUE;
							pos++;
						}
						else
							l->state = LS_ITEM;
						break;
					case LS_ITEM_SEP:
						if (c == ',')
							l->state = LS_ITEM;
						else if (c == ']')
							l->state = LS_AFTER_VALUE;
						else
							k8s_list_set_bad(l, "',' or ']' was expected in items");
						pos++;
						break;
					case LS_AFTER_VALUE:
						if (c == ',')
							l->state = LS_KEY;
						else if (c == '}')
							l->state = LS_DONE;
						else
							k8s_list_set_bad(l, "',' or '}' was expected");
						pos++;
						break;
					case LS_DONE:
						k8s_list_set_bad(l, "data follows the list object");
						break;
					default:
						elog(ERROR, "unexpected list parser state %d", (int) l->state);
				}
				break;
		}
	}
	return l->bad ? -1 : produced;
}

/*
 * A 2xx LIST body that was cut or malformed becomes a transport failure;
 * so does one without "items" or without metadata.resourceVersion, which
 * would otherwise look like an empty page.
 */
static void
k8s_list_finish(K8sRequest *req, void *state, K8sResult *res)
{
	K8sList    *l = (K8sList *) state;

	l->finished = true;
	if (!l->bad && res->kind == K8S_RESULT_OK)
	{
		if (l->state != LS_DONE)
		{
			res->kind = K8S_RESULT_TRANSPORT;
			res->message = "list response ended early";
			return;
		}
		if (!l->saw_items)
			k8s_list_set_bad(l, "it has no \"items\"");
		else if (!l->saw_metadata || l->resource_version == NULL)
			k8s_list_set_bad(l, "it has no metadata.resourceVersion");
	}
	if (l->bad && (res->kind == K8S_RESULT_OK || res->kind == K8S_RESULT_TRANSPORT))
	{
		res->kind = K8S_RESULT_TRANSPORT;
		res->message = l->bad_message;
	}
}

/* Nothing outside the request's memory context to release */
static void
k8s_list_cleanup(void *state)
{
	K8sList    *l = (K8sList *) state;

	dlist_init(&l->queue);
	l->nqueued = 0;
}

static const K8sStreamOps k8s_list_ops = {
	k8s_list_consume,
	k8s_list_finish,
	k8s_list_cleanup
};

/* Start one LIST page; limit 0: paidb.list_page_size; continue_token NULL: first page */
K8sList *
k8s_list_start(K8sClient *client, const char *collection_path,
			   const char *continue_token, int limit)
{
	char	   *path;
	K8sRequest *req;
	K8sList    *l;

	if (limit <= 0)
		limit = paidb_list_page_size;
	path = k8s_path_add_query(collection_path, "limit", psprintf("%d", limit));
	if (continue_token != NULL && continue_token[0] != '\0')
		path = k8s_path_add_query(path, "continue", continue_token);

	req = k8s_new_get(client, path);
	PG_TRY();
	{
		l = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sList));
		l->req = req;
		l->state = LS_START;
		l->remaining = -1;
		dlist_init(&l->queue);
		k8s_framer_init(&l->fr, k8s_request_context(req), K8S_LIST_MEMBER_MAX, 0, false);
		k8s_framer_init(&l->item_fr, k8s_request_context(req), 0, 0, false);
		k8s_request_set_stream(req, &k8s_list_ops, l);
		k8s_request_submit(req);
	}
	PG_CATCH();
	{
		k8s_request_free(req);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return l;
}

/* Next item already received, or NULL if none is queued now */
K8sListItem *
k8s_list_next_item(K8sList *list)
{
	K8sFrame   *f;
	K8sListItem *it;

	f = k8s_queue_pop(&list->queue, &list->nqueued);
	if (f == NULL)
		return NULL;
	it = palloc0(sizeof(K8sListItem));
	it->len = f->len;
	it->oversized = f->oversized;
	if (f->text != NULL)
		it->json = k8s_frame_hand_over(f, 0, f->len);
	it->name = k8s_pstrdup_or_null(f->name);
	it->resource_version = k8s_pstrdup_or_null(f->rv);
	k8s_frame_free(f);
	return it;
}

#ifdef PAIDB_TEST_HOOKS
/* What k8s_list_next_item_wait waits for */
typedef struct ListWait
{
	K8sList    *list;
	K8sListItem *item;
} ListWait;

/* Whether an item arrived or the page is over (paidb_wait_keeping_latch callback) */
static bool
list_item_ready(void *arg, int wait_rc)
{
	ListWait   *w = (ListWait *) arg;

	w->item = k8s_list_next_item(w->list);
	return w->item != NULL || w->list->finished;
}

/* Next item, waiting for it (interrupts honoured); NULL when the page is over */
K8sListItem *
k8s_list_next_item_wait(K8sList *list, uint32 wait_event_info)
{
	ListWait	w = {list, NULL};

	(void) paidb_wait_keeping_latch(k8s_request_client(list->req), -1, wait_event_info,
									list_item_ready, &w);
	return w.item;
}
#endif

/* Whether the page is over (transfer ended and every item taken) */
bool
k8s_list_finished(K8sList *list)
{
	return list->finished && list->nqueued == 0;
}

/* The page's result; a 2xx body that was cut or malformed becomes TRANSPORT */
const K8sResult *
k8s_list_result(K8sList *list)
{
	return k8s_request_result(list->req);
}

/* metadata.resourceVersion of the list, or NULL if not (yet) seen */
const char *
k8s_list_resource_version(K8sList *list)
{
	return list->resource_version;
}

/* metadata.continue of the list, or NULL if this is the last page */
const char *
k8s_list_continue(K8sList *list)
{
	return list->continue_token;
}

#ifdef PAIDB_TEST_HOOKS
/* metadata.remainingItemCount, or -1 if absent */
int64
k8s_list_remaining_item_count(K8sList *list)
{
	return list->remaining;
}
#endif

#ifdef PAIDB_TEST_HOOKS
/* Number of items received on this page so far */
int
k8s_list_item_count(K8sList *list)
{
	return list->nitems;
}
#endif

/* The underlying request (for k8s_log_failure, user data) */
K8sRequest *
k8s_list_request(K8sList *list)
{
	return list->req;
}

/* Stop the list request if it runs and free it with its queued items */
void
k8s_list_free(K8sList *list)
{
	if (list != NULL)
		k8s_request_free(list->req);
}

#ifdef PAIDB_TEST_HOOKS
/* Free an item returned by k8s_list_next_item */
void
k8s_list_item_free(K8sListItem *item)
{
	if (item == NULL)
		return;
	if (item->json)
		pfree(item->json);
	if (item->name)
		pfree(item->name);
	if (item->resource_version)
		pfree(item->resource_version);
	pfree(item);
}
#endif

#ifdef PAIDB_FUZZING
/* ---------------------------------------------------------------------
 * fuzzing entry points (test/fuzz, `make fuzz` only): the watch and list
 * parsers on an unsubmitted request, fed bytes as if the server sent them
 * ---------------------------------------------------------------------
 */

/* A watch parser on req (never submitted); freed with req */
K8sWatch *
k8s_watch_fuzz_new(K8sRequest *req)
{
	K8sWatch   *w = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sWatch));

	w->req = req;
	w->end = K8S_WATCH_OPEN;
	dlist_init(&w->queue);
	k8s_framer_init(&w->fr, k8s_request_context(req), 0, K8S_EVENT_SLACK, true);
	k8s_request_set_stream(req, &k8s_watch_ops, w);
	return w;
}

/* Feed watch-stream bytes (-1: the stream is bad), or end it with res */
int
k8s_watch_fuzz_feed(K8sWatch *w, const char *data, size_t len, K8sResult *res)
{
	if (res != NULL)
	{
		k8s_watch_ops.finish(w->req, w, res);
		return 0;
	}
	return k8s_watch_ops.consume(w->req, w, data, len);
}

/* A list parser on req (never submitted); freed with req */
K8sList *
k8s_list_fuzz_new(K8sRequest *req)
{
	K8sList    *l = MemoryContextAllocZero(k8s_request_context(req), sizeof(K8sList));

	l->req = req;
	l->state = LS_START;
	l->remaining = -1;
	dlist_init(&l->queue);
	k8s_framer_init(&l->fr, k8s_request_context(req), K8S_LIST_MEMBER_MAX, 0, false);
	k8s_framer_init(&l->item_fr, k8s_request_context(req), 0, 0, false);
	k8s_request_set_stream(req, &k8s_list_ops, l);
	return l;
}

/* Feed LIST bytes (-1: the body is bad), or end it with res */
int
k8s_list_fuzz_feed(K8sList *l, const char *data, size_t len, K8sResult *res)
{
	if (res != NULL)
	{
		k8s_list_ops.finish(l->req, l, res);
		return 0;
	}
	return k8s_list_ops.consume(l->req, l, data, len);
}

/* remainingItemCount of a fuzzed list */
int64
k8s_list_fuzz_remaining(K8sList *l)
{
	return l->remaining;
}
#endif
