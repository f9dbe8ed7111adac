/*
 * openpai_import.c — the per-row work of openpai.import_database (SPEC §9)
 *
 * The import itself is set-based SQL in paidb_openpai's install script; what
 * it cannot do in SQL without a subtransaction per row is to find out
 * whether OpenPAI's JSON text parses, and to turn an OpenPAI snapshot into
 * the snapshot paidb stores.  Both are here, and neither raises an error
 * for bad data: a row that cannot be taken comes back with a reason, so the
 * import can report it instead of failing as a whole.
 *
 * The snapshot is made by paidb's own code (snapshot.c): decompressed task
 * role statuses, the request part with its requestGeneration annotation
 * (1 when OpenPAI's snapshot had none), the status as OpenPAI stored it.
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/jsonapi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"

#include "jsonb_util.h"
#include "snapshot.h"

PG_FUNCTION_INFO_V1(paidb_openpai_try_jsonb);
PG_FUNCTION_INFO_V1(paidb_openpai_import_snapshot);

/*
 * Parse JSON text into jsonb, or return NULL with *error set when it is
 * not JSON.  Never raises for any input.
 *
 * The JSON lexer alone is not enough: text it accepts can still fail in
 * jsonb_in ('{"a":1e200000}' is valid JSON whose number overflows numeric;
 * a string or document larger than jsonb can hold), and the parser itself
 * raises on runaway nesting (check_stack_depth).  Validating each of those
 * limits here would copy jsonb_in's rules and miss the next one, so the
 * parse runs in a subtransaction instead: any data exception (class 22) or
 * program limit (class 54) it raises becomes the NULL result; every other
 * error (query cancel, out of memory, ...) is raised again.  The caller's
 * memory context and resource owner are restored either way.  This is why
 * the functions using it are PARALLEL UNSAFE: no subtransaction can start
 * during a parallel operation.
 */
static Jsonb *
parse_json_soft(text *t, char **error)
{
	MemoryContext caller_context = CurrentMemoryContext;
	ResourceOwner caller_owner = CurrentResourceOwner;
	char	   *str = text_to_cstring(t);
	Jsonb	   *volatile result = NULL;
	char	   *volatile message = NULL;

	BeginInternalSubTransaction(NULL);
	/* the result is allocated in the caller's context, not the subtransaction's */
	MemoryContextSwitchTo(caller_context);
	PG_TRY();
	{
		JsonLexContext *lex;
		JsonParseErrorType rc;

		/* a NUL byte cannot be in text; embedded ones end the string */
		lex = makeJsonLexContextCstringLen(str, strlen(str), GetDatabaseEncoding(), true);
		rc = pg_parse_json(lex, &nullSemAction);
		if (rc != JSON_SUCCESS)
			message = json_errdetail(rc, lex);
		else
			result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(str)));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller_context);
		edata = CopyErrorData();
		FlushErrorState();
		/*
		 * Always end our subtransaction first: an error raised again from
		 * inside it would leave it open for an enclosing handler (a
		 * PL/pgSQL EXCEPTION block), which would then roll back ours in
		 * place of its own.
		 */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_PROGRAM_LIMIT_EXCEEDED)
			ReThrowError(edata);
		result = NULL;
		message = edata->message ? edata->message : pstrdup("invalid JSON");
	}
	PG_END_TRY();

	if (result == NULL)
		*error = message;
	return result;
}

/* try_jsonb(text): the JSON text as jsonb, or NULL when it is not JSON. */
Datum
paidb_openpai_try_jsonb(PG_FUNCTION_ARGS)
{
	char	   *error = NULL;
	Jsonb	   *j = parse_json_soft(PG_GETARG_TEXT_PP(0), &error);

	if (j == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(j);
}

/*
 * import_snapshot(snapshot text, name text, OUT snapshot jsonb, OUT
 * request_generation bigint, OUT resource_version bigint, OUT reason text):
 * the snapshot paidb stores for an OpenPAI framework row, or a reason why
 * the row cannot be taken (then the other columns are NULL).
 */
Datum
paidb_openpai_import_snapshot(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4] = {0, 0, 0, 0};
	bool		nulls[4] = {true, true, true, true};
	char	   *error = NULL;
	char	   *reason = NULL;
	Jsonb	   *object;
	char	   *name;
	char	   *stored_name;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "import_snapshot must return a composite type");
	desc = BlessTupleDesc(desc);
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	object = parse_json_soft(PG_GETARG_TEXT_PP(0), &error);
	if (object == NULL)
		reason = psprintf("snapshot is not valid JSON: %s", error);
	else if (!JB_ROOT_IS_OBJECT(object))
		reason = pstrdup("snapshot is not a JSON object");
	else if ((stored_name = jb_get_cstring(&object->root, 2,
										   (const char *[]) {"metadata", "name"})) == NULL)
		reason = pstrdup("snapshot has no metadata.name");
	else if (strcmp(stored_name, name) != 0)
		reason = psprintf("snapshot's metadata.name is \"%s\", not the row's name", stored_name);
	else
	{
		int64		generation = paidb_request_generation(&object->root);
		int64		rv = 0;
		Jsonb	   *decompressed;
		Jsonb	   *request;
		JsonbValue	status;
		JsonbValue *statusp = NULL;

		if (generation <= 0)
			reason = pstrdup("snapshot's requestGeneration annotation is not a positive decimal");
		else
		{
			/* undecodable statuses stay compressed, as the watcher keeps them */
			decompressed = paidb_decompress_snapshot_internal(object, &error);
			if (decompressed == NULL)
				decompressed = object;
			if (jb_get_path(&decompressed->root, &status, 1, (const char *[]) {"status"}) &&
				status.type == jbvBinary && JsonContainerIsObject(status.val.binary.data))
				statusp = &status;
			request = paidb_request_part(&decompressed->root, generation);
			values[0] = JsonbPGetDatum(paidb_compose_snapshot(&request->root, &decompressed->root,
															  statusp));
			nulls[0] = false;
			values[1] = Int64GetDatum(generation);
			nulls[1] = false;
			if (paidb_object_resource_version(&object->root, &rv))
			{
				values[2] = Int64GetDatum(rv);
				nulls[2] = false;
			}
		}
	}
	if (reason != NULL)
	{
		values[3] = CStringGetTextDatum(reason);
		nulls[3] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
