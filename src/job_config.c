/*
 * job_config.c — read the few keys paidb needs from a job's YAML config.
 *
 * OpenPAI keeps the job protocol as YAML in the framework annotation
 * `config`; the database needs only `extras.hivedScheduler.jobPriorityClass`
 * and the flags of `extras.jobStatusChangeNotification`.  We stream libyaml's
 * events and follow only the paths we want, so no document tree is built.
 * Anything libyaml rejects (or an alias/anchor where a wanted value should
 * be) leaves the keys unset: a bad config must never fail a submission.
 */
#include "postgres.h"

#include <yaml.h>

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "job_config.h"

/* Deepest nesting we follow; wanted keys are at depth 3. */
#define MAX_TRACKED_DEPTH 64

typedef struct YamlFrame
{
	bool		is_mapping;
	bool		expect_key;		/* mapping: next scalar is a key */
	char	   *key;			/* current key (mapping), malloc'd by us */
} YamlFrame;

/*
 * Truth of a plain scalar: YAML 1.2's true/True/TRUE and YAML 1.1's yes/on
 * (OpenPAI's JavaScript treated any such non-empty word as true).
 */
static bool
yaml_truthy(const char *s)
{
	return pg_strcasecmp(s, "true") == 0 || pg_strcasecmp(s, "yes") == 0 ||
		pg_strcasecmp(s, "on") == 0 || pg_strcasecmp(s, "y") == 0;
}

/* Record a scalar value found at path k1.k2.k3 if it is one we want. */
static void
take_value(YamlFrame *stack, int depth, const char *value, bool plain, JobConfigKeys *out)
{
	const char *k1,
			   *k2,
			   *k3;

	/* value frames: stack[0] is the document's root mapping */
	if (depth != 3)
		return;
	k1 = stack[0].key;
	k2 = stack[1].key;
	k3 = stack[2].key;
	if (!stack[0].is_mapping || !stack[1].is_mapping || !stack[2].is_mapping ||
		k1 == NULL || k2 == NULL || k3 == NULL || strcmp(k1, "extras") != 0)
		return;
	if (strcmp(k2, "hivedScheduler") == 0 && strcmp(k3, "jobPriorityClass") == 0)
	{
		/* a plain `null`/`~` is no priority class at all */
		if (plain && (strcmp(value, "null") == 0 || strcmp(value, "~") == 0 ||
					  value[0] == '\0'))
			return;
		out->job_priority = pstrdup(value);
	}
	else if (strcmp(k2, "jobStatusChangeNotification") == 0)
	{
		bool		b = plain && yaml_truthy(value);

		if (strcmp(k3, "running") == 0)
			out->notify_running = b;
		else if (strcmp(k3, "succeeded") == 0)
			out->notify_succeeded = b;
		else if (strcmp(k3, "failed") == 0)
			out->notify_failed = b;
		else if (strcmp(k3, "stopped") == 0)
			out->notify_stopped = b;
		else if (strcmp(k3, "retried") == 0)
			out->notify_retried = b;
	}
}

/*
 * Walk the event stream; returns false when libyaml reports an error.
 * Uses only malloc'd state (freed by the caller) and pstrdup for results,
 * so an out-of-memory ERROR can only come from pstrdup, after which the
 * caller's PG_FINALLY frees the parser.
 */
static bool
walk_events(yaml_parser_t *parser, YamlFrame *stack, int *depthp, JobConfigKeys *out)
{
	int			depth = 0;		/* number of open collections */
	bool		done = false;
	int			docs = 0;

	while (!done)
	{
		yaml_event_t ev;
		YamlFrame  *top = depth > 0 && depth <= MAX_TRACKED_DEPTH ? &stack[depth - 1] : NULL;
		bool		value_position;

		if (!yaml_parser_parse(parser, &ev))
			return false;

		/* a value is being read when the parent is a sequence or a mapping expecting a value */
		value_position = top != NULL && (!top->is_mapping || !top->expect_key);

		switch (ev.type)
		{
			case YAML_STREAM_END_EVENT:
				done = true;
				break;
			case YAML_DOCUMENT_START_EVENT:
				/* only the first document of the stream is the config */
				if (++docs > 1)
					done = true;
				break;
			case YAML_MAPPING_START_EVENT:
			case YAML_SEQUENCE_START_EVENT:
				depth++;
				*depthp = depth;
				if (depth <= MAX_TRACKED_DEPTH)
				{
					stack[depth - 1].is_mapping = (ev.type == YAML_MAPPING_START_EVENT);
					stack[depth - 1].expect_key = true;
					stack[depth - 1].key = NULL;
				}
				break;
			case YAML_MAPPING_END_EVENT:
			case YAML_SEQUENCE_END_EVENT:
				if (depth <= MAX_TRACKED_DEPTH && depth > 0)
				{
					free(stack[depth - 1].key);
					stack[depth - 1].key = NULL;
				}
				depth--;
				*depthp = depth;
				/* the collection just closed was the value of its parent's key */
				if (depth > 0 && depth <= MAX_TRACKED_DEPTH && stack[depth - 1].is_mapping)
					stack[depth - 1].expect_key = true;
				break;
			case YAML_SCALAR_EVENT:
				if (top != NULL && top->is_mapping && top->expect_key)
				{
					free(top->key);
					top->key = strdup((const char *) ev.data.scalar.value);
					top->expect_key = false;
				}
				else if (value_position)
				{
					take_value(stack, depth, (const char *) ev.data.scalar.value,
							   ev.data.scalar.plain_implicit, out);
					if (top->is_mapping)
						top->expect_key = true;
				}
				break;
			case YAML_ALIAS_EVENT:
				/* aliases are not followed; as a key or value they count as absent */
				if (top != NULL && top->is_mapping)
				{
					if (top->expect_key)
					{
						free(top->key);
						top->key = NULL;
						top->expect_key = false;
					}
					else
						top->expect_key = true;
				}
				break;
			default:
				break;
		}
		yaml_event_delete(&ev);
	}
	return true;
}

/*
 * A small direct-mapped cache of parsed configs.  A job's config never
 * changes while its status does, and every watch event re-derives the
 * columns from the snapshot: without the cache, YAML parsing was a quarter
 * of the cost of applying an event.
 */
#define CONFIG_CACHE_SLOTS 64
#define CONFIG_CACHE_MAX_TEXT 65536

typedef struct ConfigCacheEntry
{
	char	   *text;			/* copy of the YAML, NULL if the slot is empty */
	size_t		len;
	JobConfigKeys keys;			/* job_priority points into cache memory */
} ConfigCacheEntry;

static ConfigCacheEntry config_cache[CONFIG_CACHE_SLOTS];
static MemoryContext config_cache_cxt = NULL;

static void parse_job_config(const char *yaml_text, size_t len, JobConfigKeys *out);

/*
 * Read the needed keys from YAML text; never raises an error for bad YAML.
 * job_priority is palloc'd in the caller's memory context.
 */
void
paidb_read_job_config(const char *yaml_text, size_t len, JobConfigKeys *out)
{
	ConfigCacheEntry *e;
	MemoryContext old;

	if (yaml_text == NULL || len > CONFIG_CACHE_MAX_TEXT)
	{
		parse_job_config(yaml_text, len, out);
		return;
	}
	e = &config_cache[hash_bytes((const unsigned char *) yaml_text, (int) len) % CONFIG_CACHE_SLOTS];
	if (e->text == NULL || e->len != len || memcmp(e->text, yaml_text, len) != 0)
	{
		JobConfigKeys parsed;

		if (config_cache_cxt == NULL)
			config_cache_cxt = AllocSetContextCreate(TopMemoryContext,
													 "paidb job config cache",
													 ALLOCSET_SMALL_SIZES);
		parse_job_config(yaml_text, len, &parsed);
		/* replace the slot only once the parse has succeeded or failed cleanly */
		if (e->text)
			pfree(e->text);
		if (e->keys.job_priority)
			pfree(e->keys.job_priority);
		e->text = NULL;
		old = MemoryContextSwitchTo(config_cache_cxt);
		e->keys = parsed;
		e->keys.job_priority = parsed.job_priority ? pstrdup(parsed.job_priority) : NULL;
		e->len = len;
		e->text = palloc(len);
		memcpy(e->text, yaml_text, len);
		MemoryContextSwitchTo(old);
	}
	*out = e->keys;
	if (out->job_priority)
		out->job_priority = pstrdup(out->job_priority);
}

/*
 * Parse the needed keys from YAML text; never raises an error for bad YAML.
 */
static void
parse_job_config(const char *yaml_text, size_t len, JobConfigKeys *out)
{
	yaml_parser_t parser;
	YamlFrame	stack[MAX_TRACKED_DEPTH];
	int			depth = 0;
	volatile bool ok = false;

	memset(out, 0, sizeof(*out));
	memset(stack, 0, sizeof(stack));
	if (yaml_text == NULL)
		return;
	if (!yaml_parser_initialize(&parser))
		return;
	yaml_parser_set_input_string(&parser, (const unsigned char *) yaml_text, len);

	PG_TRY();
	{
		ok = walk_events(&parser, stack, &depth, out);
	}
	PG_FINALLY();
	{
		int			i;

		for (i = 0; i < MAX_TRACKED_DEPTH; i++)
			free(stack[i].key);
		yaml_parser_delete(&parser);
	}
	PG_END_TRY();

	if (!ok)
	{
		/* a config that is not YAML yields no keys, not an error */
		memset(out, 0, sizeof(*out));
	}
	out->valid = ok;
}

#ifdef PAIDB_FUZZING
/* The keys parsed afresh, bypassing the cache (test/fuzz, `make fuzz` only) */
void
paidb_read_job_config_uncached(const char *yaml_text, size_t len, JobConfigKeys *out)
{
	parse_job_config(yaml_text, len, out);
}
#endif
