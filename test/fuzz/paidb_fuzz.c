/*
 * paidb_fuzz.c — libFuzzer inside a backend, for test/suites/70_fuzz.sh.
 *
 * Linked only into the fuzzing build of paidb.so (`make fuzz`: clang,
 * -fsanitize=fuzzer-no-link,address,undefined, libFuzzer's runtime without
 * main); never part of a release.  paidb_fuzz_run(target, args) hands the
 * backend to LLVMFuzzerRunDriver, which runs one target over its corpus and
 * then mutates for -max_total_time seconds, and ends the process (the suite
 * runs it in a single-user backend, `postgres --single`).  The targets call
 * paidb's own code with its real dependencies (jsonb, SPI, libyaml, zlib,
 * json-c), each input in a subtransaction that is rolled back: an ERROR is
 * an accepted answer to bad input, a crash, a sanitizer report or a broken
 * property (abort()) is a finding.
 *
 * Targets and their input format:
 *	 merge_patch   TARGET-JSON "\n" PATCH-JSON; checks that the result
 *				   survives a text round trip unchanged and that applying the
 *				   patch again changes nothing (RFC 7396 is idempotent)
 *	 snapshot	   a snapshot as JSON, or "Z" + raw gzip bytes that become the
 *				   base64 taskRoleStatusesCompressed of a template snapshot;
 *				   derives the columns, decompresses, and checks that
 *				   paidb_snapshot_progress agrees with paidb_derive_columns
 *	 job_config    YAML text; checks that the cached answers equal a fresh parse
 *	 watch_event   a watch event {"type": ..., "object": ...} applied with
 *				   paidb_apply_watch_event_internal (SPI, rolled back)
 *	 watch_stream  one byte (chunking seed) + watch-stream bytes
 *	 list_stream   one byte (chunking seed) + LIST body bytes; both check
 *				   that the events/items, metadata and verdict do not depend
 *				   on how the bytes were cut into chunks
 *	 json_text     JSON text; paidb's parses build what PostgreSQL's build
 *	 packed		   one mode byte, four damage bytes, then a snapshot as JSON:
 *				   packs it (format 1 or 2, with or without the job config
 *				   left out) and checks that it unpacks to the same jsonb;
 *				   then damages the packed bytes (one byte changed at a
 *				   position, the value cut short) and unpacks them: an
 *				   ERROR (XX001) or a jsonb, never a crash
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "job_config.h"
#include "jsonb_util.h"
#include "k8s_client.h"
#include "k8s_watch.h"
#include "merge_patch.h"
#include "snapshot.h"
#include "snapshot_pack.h"
#include "write_merger.h"

extern int	LLVMFuzzerRunDriver(int *argc, char ***argv,
								int (*cb) (const uint8_t *data, size_t size));

PG_FUNCTION_INFO_V1(paidb_fuzz_run);

typedef void (*FuzzTarget) (const uint8_t *data, size_t size);

static MemoryContext fuzz_cxt = NULL;
static FuzzTarget fuzz_target = NULL;
static K8sClient *fuzz_client = NULL;

/* Report a broken property and abort, so that libFuzzer keeps the input */
static void
fuzz_fail(const char *what)
{
	fprintf(stderr, "paidb_fuzz: property violated: %s\n", what);
	fflush(stderr);
	abort();
}

/* Parse JSON text into jsonb (ERROR on bad JSON) */
static Jsonb *
fuzz_jsonb(const char *text, size_t len)
{
	char	   *s = pnstrdup(text, len);

	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s)));
}

/* Whether two jsonb values are equal (jsonb's own = operator) */
static bool
fuzz_jsonb_equal(Jsonb *a, Jsonb *b)
{
	return DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(a), JsonbPGetDatum(b)));
}

/* The jsonb rebuilt from its own text form */
static Jsonb *
fuzz_round_trip(Jsonb *j)
{
	char	   *text = JsonbToCString(NULL, &j->root, VARSIZE(j));

	return fuzz_jsonb(text, strlen(text));
}

/* merge_patch: TARGET "\n" PATCH */
static void
fuzz_merge_patch(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	Jsonb	   *target;
	Jsonb	   *patch;
	Jsonb	   *result;
	Jsonb	   *again;

	if (nl == NULL)
		return;
	target = fuzz_jsonb((const char *) data, nl - (const char *) data);
	patch = fuzz_jsonb(nl + 1, size - (nl + 1 - (const char *) data));
	result = paidb_merge_patch(target, patch);
	if (!fuzz_jsonb_equal(result, fuzz_round_trip(result)))
		fuzz_fail("merge patch result changes in a text round trip");
	again = paidb_merge_patch(result, patch);
	if (!fuzz_jsonb_equal(result, again))
		fuzz_fail("applying a merge patch twice differs from once");
	/* an absent target is JSON null */
	result = paidb_merge_patch(NULL, patch);
	if (!fuzz_jsonb_equal(result, fuzz_round_trip(result)))
		fuzz_fail("merge patch onto null changes in a text round trip");
}

/* Derive everything from a snapshot; check progress against the columns */
static void
fuzz_derive(Jsonb *snapshot)
{
	DerivedColumns d;
	int			attempt;
	bool		completed;

	paidb_derive_columns(snapshot, &d);
	paidb_snapshot_progress(snapshot, &attempt, &completed);
	if (attempt != d.attempt_index || completed != d.completed)
		fuzz_fail("paidb_snapshot_progress disagrees with paidb_derive_columns");
}

/* snapshot: JSON snapshot, or "Z" + gzip bytes for taskRoleStatusesCompressed */
static void
fuzz_snapshot(const uint8_t *data, size_t size)
{
	Jsonb	   *snapshot;
	Jsonb	   *plain;
	char	   *error = NULL;

	if (size > 0 && data[0] == 'Z')
	{
		int			b64len = pg_b64_enc_len((int) size - 1);
		char	   *b64 = palloc(b64len + 1);
		int			n = pg_b64_encode((const char *) data + 1, (int) size - 1, b64, b64len);
		StringInfoData s;

		if (n < 0)
			return;
		b64[n] = '\0';
		initStringInfo(&s);
		appendStringInfo(&s, "{\"metadata\": {\"name\": \"fuzz\", \"annotations\": {\"config\": "
						 "\"extras: {}\"}}, \"status\": {\"state\": \"AttemptRunning\", "
						 "\"attemptStatus\": {\"id\": 0, \"taskRoleStatusesCompressed\": \"%s\"}}}",
						 b64);
		snapshot = fuzz_jsonb(s.data, s.len);
	}
	else
		snapshot = fuzz_jsonb((const char *) data, size);

	fuzz_derive(snapshot);
	plain = paidb_decompress_snapshot_internal(snapshot, &error);
	if (plain == NULL && error == NULL)
		fuzz_fail("decompression failed without a message");
	if (plain != NULL && plain != snapshot)
	{
		if (!fuzz_jsonb_equal(plain, fuzz_round_trip(plain)))
			fuzz_fail("decompressed snapshot changes in a text round trip");
		fuzz_derive(plain);
	}
}

/* Whether two config readings agree */
static bool
fuzz_config_equal(const JobConfigKeys *a, const JobConfigKeys *b)
{
	if (a->valid != b->valid || a->notify_running != b->notify_running ||
		a->notify_succeeded != b->notify_succeeded || a->notify_failed != b->notify_failed ||
		a->notify_stopped != b->notify_stopped || a->notify_retried != b->notify_retried)
		return false;
	if ((a->job_priority == NULL) != (b->job_priority == NULL))
		return false;
	return a->job_priority == NULL || strcmp(a->job_priority, b->job_priority) == 0;
}

/* job_config: YAML text, read through the cache (twice) and afresh */
static void
fuzz_job_config(const uint8_t *data, size_t size)
{
	JobConfigKeys a;
	JobConfigKeys b;
	JobConfigKeys fresh;

	paidb_read_job_config((const char *) data, size, &a);
	paidb_read_job_config((const char *) data, size, &b);
	paidb_read_job_config_uncached((const char *) data, size, &fresh);
	if (!fuzz_config_equal(&a, &fresh) || !fuzz_config_equal(&b, &fresh))
		fuzz_fail("a cached job config differs from a fresh parse");
}

/* jb_from_large_text's result, or NULL where it raised an ERROR */
static Jsonb *
fuzz_large_parse(const char *text, size_t len)
{
	MemoryContext cxt = CurrentMemoryContext;
	Jsonb	   *out = NULL;

	PG_TRY();
	{
		out = jb_from_large_text(text, (int) len);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		out = NULL;
	}
	PG_END_TRY();
	return out;
}

/* watch_event: {"type": ..., "object": ...} through the write merger */
static void
fuzz_watch_event(const uint8_t *data, size_t size)
{
	Jsonb	   *built = memchr(data, '\0', size) ? NULL :
		fuzz_large_parse((const char *) data, size);
	Jsonb	   *event = fuzz_jsonb((const char *) data, size);

	/* the large-object parser builds what jsonb_in builds (which did not fail) */
	if (memchr(data, '\0', size) == NULL &&
		(built == NULL || !fuzz_jsonb_equal(built, event) ||
		 VARSIZE(built) != VARSIZE(event) || memcmp(built, event, VARSIZE(event)) != 0))
		fuzz_fail("jb_from_large_text differs from jsonb_in");
	JsonbValue	k;
	JsonbValue *type;
	JsonbValue *object;

	if (!JB_ROOT_IS_OBJECT(event))
		return;
	k.type = jbvString;
	k.val.string.val = "type";
	k.val.string.len = 4;
	type = findJsonbValueFromContainer(&event->root, JB_FOBJECT, &k);
	k.val.string.val = "object";
	k.val.string.len = 6;
	object = findJsonbValueFromContainer(&event->root, JB_FOBJECT, &k);
	if (type == NULL || type->type != jbvString || object == NULL)
		return;
	(void) paidb_apply_watch_event_internal(pnstrdup(type->val.string.val, type->val.string.len),
											JsonbValueToJsonb(object));
}

/* The next chunk length (1..max) of a small xorshift sequence */
static size_t
fuzz_chunk(uint32 *state, size_t max)
{
	*state ^= *state << 13;
	*state ^= *state >> 17;
	*state ^= *state << 5;
	return 1 + (*state % max);
}

/* A fresh OK 200 result for finishing a parser */
static void
fuzz_ok_result(K8sResult *res)
{
	memset(res, 0, sizeof(*res));
	res->kind = K8S_RESULT_OK;
	res->http_status = 200;
	res->retry_after_ms = -1;
	res->body = "";
}

/* Everything a watch parser made of the bytes, as text; chunk 0: all at once */
static char *
fuzz_watch_outcome(const char *data, size_t size, uint32 seed, size_t max_chunk)
{
	K8sRequest *req = k8s_new_get(fuzz_client, "/fuzz");
	StringInfoData out;

	initStringInfo(&out);
	PG_TRY();
	{
		K8sWatch   *w = k8s_watch_fuzz_new(req);
		K8sWatchEvent *ev;
		K8sResult	res;
		size_t		pos = 0;
		bool		bad = false;

		while (pos < size && !bad)
		{
			size_t		n = max_chunk == 0 ? size : fuzz_chunk(&seed, max_chunk);

			n = Min(n, size - pos);

			bad = k8s_watch_fuzz_feed(w, data + pos, n, NULL) < 0;
			pos += n;
		}
		fuzz_ok_result(&res);
		k8s_watch_fuzz_feed(w, NULL, 0, &res);
		while ((ev = k8s_watch_next_event(w)) != NULL)
			appendStringInfo(&out, "%s|%s|%s|%d|%s|%s\n", ev->type_name,
							 ev->name ? ev->name : "-", ev->resource_version ? ev->resource_version : "-",
							 ev->error_code, ev->error_reason ? ev->error_reason : "-",
							 ev->object_json ? ev->object_json : "-");
		appendStringInfo(&out, "end=%s expired=%d kind=%d rv=%s\n",
						 k8s_watch_end_name(k8s_watch_end(w)), (int) k8s_watch_expired(w),
						 (int) res.kind, k8s_watch_resource_version(w) ? k8s_watch_resource_version(w) : "-");
	}
	PG_FINALLY();
	{
		k8s_request_free(req);
	}
	PG_END_TRY();
	return out.data;
}

/* Everything a LIST parser made of the bytes, as text; chunk 0: all at once */
static char *
fuzz_list_outcome(const char *data, size_t size, uint32 seed, size_t max_chunk)
{
	K8sRequest *req = k8s_new_get(fuzz_client, "/fuzz");
	StringInfoData out;

	initStringInfo(&out);
	PG_TRY();
	{
		K8sList    *l = k8s_list_fuzz_new(req);
		K8sListItem *item;
		K8sResult	res;
		size_t		pos = 0;
		bool		bad = false;

		while (pos < size && !bad)
		{
			size_t		n = max_chunk == 0 ? size : fuzz_chunk(&seed, max_chunk);

			n = Min(n, size - pos);

			bad = k8s_list_fuzz_feed(l, data + pos, n, NULL) < 0;
			pos += n;
		}
		fuzz_ok_result(&res);
		k8s_list_fuzz_feed(l, NULL, 0, &res);
		while ((item = k8s_list_next_item(l)) != NULL)
			appendStringInfo(&out, "%s|%s|%s\n", item->name ? item->name : "-",
							 item->resource_version ? item->resource_version : "-", item->json ? item->json : "-");
		appendStringInfo(&out, "kind=%d rv=%s continue=%s remaining=" INT64_FORMAT " finished=%d\n",
						 (int) res.kind,
						 k8s_list_resource_version(l) ? k8s_list_resource_version(l) : "-",
						 k8s_list_continue(l) ? k8s_list_continue(l) : "-",
						 k8s_list_fuzz_remaining(l), (int) k8s_list_finished(l));
	}
	PG_FINALLY();
	{
		k8s_request_free(req);
	}
	PG_END_TRY();
	return out.data;
}

/* watch_stream / list_stream: seed byte + bytes, whole versus in chunks */
static void
fuzz_stream(const uint8_t *data, size_t size, bool list)
{
	uint32		seed;
	size_t		max_chunk;
	char	   *whole;
	char	   *chunked;

	if (size < 1)
		return;
	/* chunks of at most 1..64, ..1009, ..16129 or ..258049 bytes */
	seed = 0x9e3779b9u ^ data[0];
	max_chunk = 1 + ((size_t) (data[0] & 0x3f) << ((data[0] >> 6) * 4));
	if (list)
	{
		whole = fuzz_list_outcome((const char *) data + 1, size - 1, seed, 0);
		chunked = fuzz_list_outcome((const char *) data + 1, size - 1, seed, max_chunk);
	}
	else
	{
		whole = fuzz_watch_outcome((const char *) data + 1, size - 1, seed, 0);
		chunked = fuzz_watch_outcome((const char *) data + 1, size - 1, seed, max_chunk);
	}
	if (strcmp(whole, chunked) != 0)
	{
		fprintf(stderr, "whole:\n%s\nin chunks of at most %zu bytes:\n%s\n", whole, max_chunk, chunked);
		fuzz_fail(list ? "a LIST body parses differently in chunks" :
				  "a watch stream parses differently in chunks");
	}
}

/*
 * Parse JSON text with fn (0: jsonb_in, 1: jb_from_text, 2: jb_from_text_
 * without "spec"); NULL and *code set on an ERROR.
 */
static Jsonb *
fuzz_parse_with(int fn, const char *text, size_t len, int *code)
{
	MemoryContext cxt = CurrentMemoryContext;
	Jsonb	   *volatile out = NULL;

	*code = 0;
	PG_TRY();
	{
		if (fn == 0)
			out = fuzz_jsonb(text, len);
		else if (fn == 1)
			out = jb_from_text(text, (int) len);
		else if (fn == 2)
			out = jb_from_text_without(text, (int) len, "spec");
		else if (fn == 3)
			out = jb_from_large_text(text, (int) len);
		else
		{
			/* as unpacking puts a job config back */
			JsonbValue	v;

			jb_string_value(&v, "{\"x\": 1}");
			out = jb_from_text_adding(text, (int) len, 2, (const char *[]) {"metadata", "annotations"},
									  "config", &v);
		}
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		*code = e->sqlerrcode;
		out = NULL;
	}
	PG_END_TRY();
	return out;
}

static bool
fuzz_same_bytes(Jsonb *a, Jsonb *b)
{
	return VARSIZE(a) == VARSIZE(b) && memcmp(a, b, VARSIZE(a)) == 0;
}

/*
 * json_text: paidb's own parses of JSON text (src/json_scan.c, with
 * PostgreSQL's parser for what it gives up on) build the very bytes
 * jsonb_in builds, and fail where it fails, with the same error code; with
 * a member left out or added, the very bytes PostgreSQL's parser builds
 * through the same callers.
 */
static void
fuzz_json_text(const uint8_t *data, size_t size)
{
	char	   *text;
	int			theirs_code,
				ours_code;
	Jsonb	   *theirs;
	Jsonb	   *ours;
	int			fn;

	/* jb_from_text reads the text up to its length; jsonb_in up to a NUL */
	if (memchr(data, '\0', size) != NULL)
		return;
	/* as every caller's text, NUL-terminated (jb_from_text reads that byte) */
	text = palloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	theirs = fuzz_parse_with(0, text, size, &theirs_code);
	ours = fuzz_parse_with(1, text, size, &ours_code);
	if ((theirs == NULL) != (ours == NULL) || theirs_code != ours_code)
		fuzz_fail("jb_from_text and jsonb_in disagree on whether the text is JSON");
	if (theirs != NULL && !fuzz_same_bytes(theirs, ours))
		fuzz_fail("jb_from_text builds other jsonb than jsonb_in");
	if (theirs != NULL && JB_ROOT_IS_OBJECT(theirs) && !JB_ROOT_IS_SCALAR(theirs))
	{
		Jsonb	   *without = fuzz_parse_with(2, text, size, &ours_code);
		Jsonb	   *expected = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(theirs),
																  CStringGetTextDatum("spec")));

		if (without == NULL || !fuzz_jsonb_equal(without, expected))
			fuzz_fail("jb_from_text_without differs from jsonb_in's object less spec");
	}
	/* src/json_scan.c against the same calls with PostgreSQL's parser only */
	for (fn = 2; fn <= 4; fn++)
	{
		Jsonb	   *scanned = fuzz_parse_with(fn, text, size, &ours_code);

		jb_parse_with_postgres_only = true;
		theirs = fuzz_parse_with(fn, text, size, &theirs_code);
		jb_parse_with_postgres_only = false;
		if ((theirs == NULL) != (scanned == NULL) || theirs_code != ours_code)
			fuzz_fail("src/json_scan.c and PostgreSQL's parser disagree on whether the text is JSON");
		if (theirs != NULL && !fuzz_same_bytes(theirs, scanned))
			fuzz_fail("src/json_scan.c builds other jsonb than PostgreSQL's parser with a member added or left out");
	}
}

/* watch_stream target */
static void
fuzz_watch_stream(const uint8_t *data, size_t size)
{
	fuzz_stream(data, size, false);
}

/* list_stream target */
static void
fuzz_list_stream(const uint8_t *data, size_t size)
{
	fuzz_stream(data, size, true);
}

/* One input: the target in a subtransaction, always rolled back */
static int
fuzz_one(const uint8_t *data, size_t size)
{
	MemoryContext old = MemoryContextSwitchTo(fuzz_cxt);
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(fuzz_cxt);
	PG_TRY();
	{
		fuzz_target(data, size);
		MemoryContextSwitchTo(fuzz_cxt);
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		/* an ERROR is an acceptable answer to bad input */
		MemoryContextSwitchTo(fuzz_cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	CurrentResourceOwner = owner;
	MemoryContextReset(fuzz_cxt);
	return 0;
}

/*
 * packed: mode byte (bit 0: as a job row, format 2 unless completed; bit
 * 1: the snapshot's config annotation set to a job config the row holds;
 * bit 2: damage), damage bytes (position 2 bytes, xor 1 byte, bytes cut 1
 * byte), then the snapshot's JSON text.
 */
static void
fuzz_packed(const uint8_t *data, size_t size)
{
	Jsonb	   *snapshot;
	text	   *config = NULL;
	bytea	   *packed;
	Jsonb	   *volatile back = NULL;
	uint8_t		mode;
	size_t		len,
				pos;

	if (size < 5)
		return;
	mode = data[0];
	snapshot = fuzz_jsonb((const char *) data + 5, size - 5);
	if (mode & 2)
	{
		/* jsonb_set: where metadata.annotations exists (a decoy elsewhere stays) */
		Datum		path[3] = {CStringGetTextDatum("metadata"), CStringGetTextDatum("annotations"),
		CStringGetTextDatum("config")};
		const char *yaml = "\"protocolVersion: 2\\nname: fuzz\\n\"";

		config = cstring_to_text("protocolVersion: 2\nname: fuzz\n");
		if (JB_ROOT_IS_OBJECT(snapshot))
			snapshot = DatumGetJsonbP(DirectFunctionCall4(jsonb_set, JsonbPGetDatum(snapshot),
														  PointerGetDatum(construct_array(path, 3, TEXTOID, -1, false, TYPALIGN_INT)),
														  JsonbPGetDatum(fuzz_jsonb(yaml, strlen(yaml))),
														  BoolGetDatum(true)));
	}
	packed = paidb_pack_snapshot(snapshot, config, (mode & 1) != 0);
	/* what was packed must unpack: an ERROR here is a finding */
	PG_TRY();
	{
		back = paidb_unpack_snapshot(packed, config);
	}
	PG_CATCH();
	{
		fuzz_fail("a packed snapshot cannot be unpacked");
	}
	PG_END_TRY();
	if (!fuzz_jsonb_equal(back, snapshot))
		fuzz_fail("a packed snapshot unpacks to another jsonb");
	if (!(mode & 4))
		return;
	len = VARSIZE_ANY_EXHDR(packed);
	pos = ((size_t) data[1] << 8 | data[2]) % (len + 1);
	if (pos < len)
		((uint8_t *) VARDATA_ANY(packed))[pos] ^= data[3];
	len -= Min(len, (size_t) data[4]);
	SET_VARSIZE(packed, VARHDRSZ + len);
	(void) paidb_unpack_snapshot(packed, config);
}

/*
 * paidb_fuzz_run(target text, args text[]) — run libFuzzer on one target;
 * args are libFuzzer's command line (flags, corpus directories).  Does not
 * return: libFuzzer ends the process (exit status 0 when nothing was found).
 */
Datum
paidb_fuzz_run(PG_FUNCTION_ARGS)
{
	char	   *target = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *args = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			argc;
	char	  **argv;
	int			i;
	static const struct
	{
		const char *name;
		FuzzTarget	fn;
	}			targets[] = {
		{"merge_patch", fuzz_merge_patch},
		{"snapshot", fuzz_snapshot},
		{"job_config", fuzz_job_config},
		{"watch_event", fuzz_watch_event},
		{"watch_stream", fuzz_watch_stream},
		{"list_stream", fuzz_list_stream},
		{"json_text", fuzz_json_text},
		{"packed", fuzz_packed},
	};

	for (i = 0; i < (int) lengthof(targets); i++)
	{
		if (strcmp(target, targets[i].name) == 0)
			fuzz_target = targets[i].fn;
	}
	if (fuzz_target == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown fuzz target \"%s\"", target)));

	deconstruct_array(args, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	argv = MemoryContextAllocZero(TopMemoryContext, sizeof(char *) * (nelems + 2));
	argv[0] = MemoryContextStrdup(TopMemoryContext, "paidb_fuzz");
	argc = 1;
	for (i = 0; i < nelems; i++)
	{
		if (!nulls[i])
			argv[argc++] = MemoryContextStrdup(TopMemoryContext, TextDatumGetCString(elems[i]));
	}
	fuzz_cxt = AllocSetContextCreate(TopMemoryContext, "paidb fuzz input", ALLOCSET_DEFAULT_SIZES);
	fuzz_client = k8s_client_create(TopMemoryContext);
	fprintf(stderr, "paidb_fuzz: target %s\n", target);
	fflush(stderr);
	PG_RETURN_INT32(LLVMFuzzerRunDriver(&argc, &argv, fuzz_one));
}
