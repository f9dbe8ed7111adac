/*
 * job_list.c — the trigger that keeps paidb.job_summary (the job list) and
 * paidb.job_count_delta (the exact counts) in step with paidb.framework
 * (SPEC §10, docs/queries.md).
 *
 * Written in C rather than PL/pgSQL because it runs on every submission:
 * the PL/pgSQL version cost a fifth of put_framework_request's throughput,
 * this one reads the listed columns straight from the trigger tuples and
 * runs kept plans.
 *
 * Inserts and deletes fire it AFTER the row; updates fire it BEFORE, and
 * it compares the listed columns itself.  Most updates are status updates
 * that change none of them; an AFTER trigger with a WHEN that compares
 * them cost apply_watch_event a seventh of its throughput, because the
 * executor rebuilds a WHEN's expression from its stored text for every
 * statement, and an AFTER trigger without one queues every update.  A
 * BEFORE trigger sees the row locked (the executor locks it for the
 * trigger when the writer has not, as apply_watch_event and the write
 * merger have, with FOR UPDATE), and whatever makes the update fail
 * afterwards rolls back the trigger's changes with it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/rel.h"

#include "job_list.h"
#include "spi_plan.h"

/* The columns of paidb.job_summary, in its order (name first). */
static const char *const summary_columns[] = {
	"name", "job_name", "user_name", "execution_type", "submission_time",
	"creation_time", "launch_time", "virtual_cluster", "total_gpu_number",
	"total_task_number", "total_task_role_number", "job_priority", "retries",
	"retry_delay_time", "platform_retries", "resource_retries", "user_retries",
	"completion_time", "app_exit_code", "sub_state", "state", "archived"
};
static const Oid summary_types[] = {
	TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, INT4OID,
	INT4OID, INT4OID, TEXTOID, INT4OID,
	INT4OID, INT4OID, INT4OID, INT4OID,
	TIMESTAMPTZOID, INT4OID, TEXTOID, TEXTOID, BOOLOID
};

#define NSUMMARY lengthof(summary_columns)

/* The counted key, as indexes into summary_columns. */
static const int count_key[] = {2, 7, 20, 11, 21};	/* user, vc, state, priority, archived */

#define NKEY lengthof(count_key)

/* Attribute numbers of the summary columns in paidb.framework, per relation. */
static Oid	cached_relid = InvalidOid;
static AttrNumber cached_attnums[NSUMMARY];

static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr update_plan = NULL;
static SPIPlanPtr delete_plan = NULL;
static SPIPlanPtr delta_plan = NULL;
static SPIPlanPtr move_plan = NULL;
static SPIPlanPtr tag_plan = NULL;
static SPIPlanPtr update_many_plan = NULL;
static Oid	summary_rowtype = InvalidOid;	/* paidb.job_summary's, for update_many_plan */
static SPIPlanPtr delta_many_plan = NULL;

/*
 * The list changes held back while a watcher's batch statement runs
 * (job_list.h): the new summary rows by column, and the count deltas.  A
 * batch of state changes of one user's jobs moves them all between the
 * same two counts, so the deltas are summed by key before they are written.
 */
typedef struct HeldDelta
{
	Datum		key[NKEY];		/* text values detoasted, so bytes compare */
	bool		isnull[NKEY];
	int			n;
} HeldDelta;

typedef struct HeldChanges
{
	int			nrows;
	int			rowcap;
	Datum	   *values[NSUMMARY];
	bool	   *nulls[NSUMMARY];
	int			ndeltas;
	int			deltacap;
	HeldDelta  *deltas;
} HeldChanges;

static MemoryContext held_cxt = NULL;
static HeldChanges *held = NULL;	/* non-NULL: deferring */

/* The job columns each tag carries (paidb.tag.job_*), as summary columns. */
#define SUMMARY_USER_NAME 2
#define SUMMARY_SUBMISSION_TIME 4

/* Attribute numbers of the summary columns in the trigger's relation. */
static const AttrNumber *
framework_attnums(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (cached_relid == RelationGetRelid(rel))
	{
		/* still the same columns? (an ALTER TABLE could renumber them) */
		for (i = 0; i < (int) NSUMMARY; i++)
		{
			AttrNumber	a = cached_attnums[i];

			if (a < 1 || a > desc->natts ||
				strcmp(NameStr(TupleDescAttr(desc, a - 1)->attname), summary_columns[i]) != 0)
				break;
		}
		if (i == (int) NSUMMARY)
			return cached_attnums;
	}
	for (i = 0; i < (int) NSUMMARY; i++)
	{
		int			a = SPI_fnumber(desc, summary_columns[i]);

		if (a <= 0 || TupleDescAttr(desc, a - 1)->atttypid != summary_types[i])
			elog(ERROR, "paidb.framework has no column %s of the expected type", summary_columns[i]);
		cached_attnums[i] = (AttrNumber) a;
	}
	cached_relid = RelationGetRelid(rel);
	return cached_attnums;
}

/*
 * The summary columns of a framework tuple as SPI arguments.  The tuple is
 * deformed once: the snapshot sits before most listed columns, and reading
 * them one by one would walk past it again for each.
 */
static void
summary_values(HeapTuple tuple, TupleDesc desc, const AttrNumber *attnums,
			   Datum *values, char *nulls)
{
	Datum	   *all = palloc(desc->natts * sizeof(Datum));
	bool	   *allnull = palloc(desc->natts * sizeof(bool));
	int			i;

	heap_deform_tuple(tuple, desc, all, allnull);
	for (i = 0; i < (int) NSUMMARY; i++)
	{
		values[i] = all[attnums[i] - 1];
		nulls[i] = allnull[attnums[i] - 1] ? 'n' : ' ';
	}
}

/* Append one +1/-1 row for the key of `values` to paidb.job_count_delta. */
static void
delta_args(const Datum *values, const char *nulls, int n, Datum *args, char *argnulls)
{
	int			i;

	for (i = 0; i < (int) NKEY; i++)
	{
		args[i] = values[count_key[i]];
		argnulls[i] = nulls[count_key[i]];
	}
	args[NKEY] = Int32GetDatum(n);
	argnulls[NKEY] = ' ';
}

static void
add_delta(const Datum *values, const char *nulls, int n)
{
	Datum		args[NKEY + 1];
	char		argnulls[NKEY + 1];

	delta_args(values, nulls, n, args, argnulls);
	if (SPI_execute_plan(delta_plan, args, argnulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not add a job count delta");
}

/* A job moved from the counts of old to those of new: -1 and +1 at once. */
static void
move_delta(const Datum *oldv, const char *oldn, const Datum *newv, const char *newn)
{
	Datum		args[2 * (NKEY + 1)];
	char		argnulls[2 * (NKEY + 1)];

	delta_args(oldv, oldn, -1, args, argnulls);
	delta_args(newv, newn, 1, args + NKEY + 1, argnulls + NKEY + 1);
	if (SPI_execute_plan(move_plan, args, argnulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not add job count deltas");
}

/* Whether two non-NULL values of a summary column's type are the same. */
static bool
values_equal(Oid type, Datum a, Datum b)
{
	switch (type)
	{
		case TEXTOID:
			{
				/* byte equality: the columns use deterministic collations */
				text	   *ta = DatumGetTextPP(a);
				text	   *tb = DatumGetTextPP(b);

				return VARSIZE_ANY_EXHDR(ta) == VARSIZE_ANY_EXHDR(tb) &&
					memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), VARSIZE_ANY_EXHDR(ta)) == 0;
			}
		case BOOLOID:
			return DatumGetBool(a) == DatumGetBool(b);
		case INT4OID:
			return DatumGetInt32(a) == DatumGetInt32(b);
		case TIMESTAMPTZOID:
			return DatumGetTimestampTz(a) == DatumGetTimestampTz(b);
		default:
			elog(ERROR, "unexpected type %u of a job-list column", type);
	}
	return false;				/* not reached */
}

/* Whether column c differs between two rows of values. */
static bool
column_changed(int c, const Datum *a, const char *an, const Datum *b, const char *bn)
{
	if (an[c] != bn[c])
		return true;
	return an[c] != 'n' && !values_equal(summary_types[c], a[c], b[c]);
}

/* Whether the counted key differs between two rows of values. */
static bool
key_changed(const Datum *a, const char *an, const Datum *b, const char *bn)
{
	int			i;

	for (i = 0; i < (int) NKEY; i++)
		if (column_changed(count_key[i], a, an, b, bn))
			return true;
	return false;
}

/* Whether any listed column differs (not the name: no writer changes it). */
static bool
summary_changed(const Datum *a, const char *an, const Datum *b, const char *bn)
{
	int			i;

	for (i = 1; i < (int) NSUMMARY; i++)
		if (column_changed(i, a, an, b, bn))
			return true;
	return false;
}

/* Prepare the trigger's statements once per process (inside SPI). */
static void
prepare_plans(void)
{
	Oid			delta_types[2 * (NKEY + 1)];
	int			i;

	if (tag_plan != NULL)
		return;
	for (i = 0; i < (int) NKEY; i++)
		delta_types[i] = summary_types[count_key[i]];
	delta_types[NKEY] = INT4OID;
	memcpy(&delta_types[NKEY + 1], delta_types, (NKEY + 1) * sizeof(Oid));
	insert_plan = paidb_prepare_kept(
		"INSERT INTO paidb.job_summary VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
		"$12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
		NSUMMARY, (Oid *) summary_types);
	update_plan = paidb_prepare_kept(
		"UPDATE paidb.job_summary SET job_name = $2, user_name = $3, execution_type = $4, "
		"submission_time = $5, creation_time = $6, launch_time = $7, virtual_cluster = $8, "
		"total_gpu_number = $9, total_task_number = $10, total_task_role_number = $11, "
		"job_priority = $12, retries = $13, retry_delay_time = $14, platform_retries = $15, "
		"resource_retries = $16, user_retries = $17, completion_time = $18, app_exit_code = $19, "
		"sub_state = $20, state = $21, archived = $22 WHERE name OPERATOR(pg_catalog.=) $1",
		NSUMMARY, (Oid *) summary_types);
	delete_plan = paidb_prepare_kept(
		"DELETE FROM paidb.job_summary WHERE name OPERATOR(pg_catalog.=) $1",
		1, (Oid *) summary_types);
	delta_plan = paidb_prepare_kept(
		"INSERT INTO paidb.job_count_delta (user_name, virtual_cluster, state, job_priority, archived, n) "
		"VALUES ($1, $2, $3, $4, $5, $6)",
		NKEY + 1, delta_types);
	/* a job leaving one count for another: both rows in one statement */
	move_plan = paidb_prepare_kept(
		"INSERT INTO paidb.job_count_delta (user_name, virtual_cluster, state, job_priority, archived, n) "
		"VALUES ($1, $2, $3, $4, $5, $6), ($7, $8, $9, $10, $11, $12)",
		2 * (NKEY + 1), delta_types);
	{
		Oid			tag_types[3] = {TEXTOID, TIMESTAMPTZOID, TEXTOID};

		tag_plan = paidb_prepare_kept(
			"UPDATE paidb.tag SET job_submission_time = $2, job_user_name = $3 "
			"WHERE framework_name OPERATOR(pg_catalog.=) $1",
			3, tag_types);
	}
}

/*
 * The job's tags carry its submission time and user (for tag pages in
 * submission order, sql/paidb--0.1--0.2.sql): copy them when they change.
 * No writer changes them today; this keeps the copies exact if one does.
 */
static void
update_tags(const Datum *values, const char *nulls)
{
	Datum		args[3];
	char		argnulls[3];

	args[0] = values[0];
	argnulls[0] = nulls[0];
	args[1] = values[SUMMARY_SUBMISSION_TIME];
	argnulls[1] = nulls[SUMMARY_SUBMISSION_TIME];
	args[2] = values[SUMMARY_USER_NAME];
	argnulls[2] = nulls[SUMMARY_USER_NAME];
	if (SPI_execute_plan(tag_plan, args, argnulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update the job's tags");
}

/* A column value copied into the held changes' context. */
static Datum
held_copy(int c, Datum v)
{
	Oid			type = summary_types[c];

	if (type == TEXTOID)
		return datumCopy(PointerGetDatum(DatumGetTextPP(v)), false, -1);
	return v;					/* int4, bool, timestamptz: by value */
}

/* Hold one row's new summary and, if its count key changed, its deltas. */
static void
hold_update(const Datum *oldv, const char *oldn, const Datum *newv, const char *newn)
{
	HeldChanges *h = held;
	MemoryContext old = MemoryContextSwitchTo(held_cxt);
	int			i,
				k;

	if (h->nrows == h->rowcap)
	{
		h->rowcap *= 2;
		for (i = 0; i < (int) NSUMMARY; i++)
		{
			h->values[i] = repalloc(h->values[i], sizeof(Datum) * h->rowcap);
			h->nulls[i] = repalloc(h->nulls[i], sizeof(bool) * h->rowcap);
		}
	}
	for (i = 0; i < (int) NSUMMARY; i++)
	{
		h->nulls[i][h->nrows] = newn[i] == 'n';
		h->values[i][h->nrows] = newn[i] == 'n' ? (Datum) 0 : held_copy(i, newv[i]);
	}
	h->nrows++;
	if (key_changed(oldv, oldn, newv, newn))
	{
		for (k = 0; k < 2; k++)
		{
			const Datum *v = k == 0 ? oldv : newv;
			const char *vn = k == 0 ? oldn : newn;
			HeldDelta  *d;

			if (h->ndeltas == h->deltacap)
			{
				h->deltacap *= 2;
				h->deltas = repalloc(h->deltas, sizeof(HeldDelta) * h->deltacap);
			}
			d = &h->deltas[h->ndeltas++];
			for (i = 0; i < (int) NKEY; i++)
			{
				d->isnull[i] = vn[count_key[i]] == 'n';
				d->key[i] = d->isnull[i] ? (Datum) 0 : held_copy(count_key[i], v[count_key[i]]);
			}
			d->n = k == 0 ? -1 : 1;
		}
	}
	MemoryContextSwitchTo(old);
}

/* Order of count keys for summing (NULL first; text by bytes). */
static int
held_delta_cmp(const void *a, const void *b)
{
	const HeldDelta *x = a;
	const HeldDelta *y = b;
	int			i;

	for (i = 0; i < (int) NKEY; i++)
	{
		Oid			type = summary_types[count_key[i]];

		if (x->isnull[i] != y->isnull[i])
			return x->isnull[i] ? -1 : 1;
		if (x->isnull[i])
			continue;
		if (type == TEXTOID)
		{
			text	   *tx = (text *) DatumGetPointer(x->key[i]);
			text	   *ty = (text *) DatumGetPointer(y->key[i]);
			int			lx = VARSIZE_ANY_EXHDR(tx);
			int			ly = VARSIZE_ANY_EXHDR(ty);
			int			c = memcmp(VARDATA_ANY(tx), VARDATA_ANY(ty), Min(lx, ly));

			if (c != 0)
				return c;
			if (lx != ly)
				return lx < ly ? -1 : 1;
		}
		else if (DatumGetBool(x->key[i]) != DatumGetBool(y->key[i]))
			return DatumGetBool(x->key[i]) ? 1 : -1;
	}
	return 0;
}

/* An array parameter of `n` values of a summary column's type. */
static Datum
column_array(int c, Datum *values, bool *nulls, int n)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(summary_types[c], &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, summary_types[c],
											  typlen, typbyval, typalign));
}

/*
 * The batch statements (inside SPI, once).  The job list's update takes its
 * rows as one array of paidb.job_summary's row type: a ROWS FROM of one
 * unnest per column (as the count deltas' insert still is) stored every
 * value of the batch as a tuple of its own before the join, a third of the
 * statement's cost outside the indexes.
 */
static void
prepare_many_plans(void)
{
	Oid			types[NSUMMARY];
	StringInfoData sql;
	int			i;

	if (delta_many_plan != NULL)
		return;
	initStringInfo(&sql);
	appendStringInfoString(&sql, "UPDATE paidb.job_summary s SET ");
	for (i = 1; i < (int) NSUMMARY; i++)
		appendStringInfo(&sql, "%s%s = u.%s", i > 1 ? ", " : "", summary_columns[i], summary_columns[i]);
	appendStringInfoString(&sql, " FROM pg_catalog.unnest($1) AS u WHERE s.name OPERATOR(pg_catalog.=) u.name");
	summary_rowtype = get_rel_type_id(RangeVarGetRelid(makeRangeVar("paidb", "job_summary", -1), NoLock, false));
	types[0] = get_array_type(summary_rowtype);
	if (!OidIsValid(types[0]))
		elog(ERROR, "paidb.job_summary has no array type");
	update_many_plan = paidb_prepare_kept(sql.data, 1, types);

	for (i = 0; i < (int) NKEY; i++)
		types[i] = get_array_type(summary_types[count_key[i]]);
	types[NKEY] = INT4ARRAYOID;
	delta_many_plan = paidb_prepare_kept(
		"INSERT INTO paidb.job_count_delta (user_name, virtual_cluster, state, job_priority, archived, n) "
		"SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), "
		"pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6))",
		NKEY + 1, types);
}

/* See job_list.h. */
void
paidb_job_list_defer_begin(void)
{
	HeldChanges *h;
	int			i;

	if (held_cxt == NULL)
		held_cxt = AllocSetContextCreate(TopMemoryContext, "paidb held job-list changes",
										 ALLOCSET_DEFAULT_SIZES);
	MemoryContextReset(held_cxt);
	h = MemoryContextAllocZero(held_cxt, sizeof(HeldChanges));
	h->rowcap = 64;
	for (i = 0; i < (int) NSUMMARY; i++)
	{
		h->values[i] = MemoryContextAlloc(held_cxt, sizeof(Datum) * h->rowcap);
		h->nulls[i] = MemoryContextAlloc(held_cxt, sizeof(bool) * h->rowcap);
	}
	h->deltacap = 64;
	h->deltas = MemoryContextAlloc(held_cxt, sizeof(HeldDelta) * h->deltacap);
	held = h;
}

/* See job_list.h. */
void
paidb_job_list_defer_end(void)
{
	held = NULL;
	if (held_cxt != NULL)
		MemoryContextReset(held_cxt);
}

/* See job_list.h. */
void
paidb_job_list_flush(void)
{
	HeldChanges *h = held;
	Datum		args[NSUMMARY];
	int			i,
				j,
				n;

	if (h == NULL || h->nrows == 0)
		return;
	held = NULL;				/* whatever the statements fire writes at once */
	prepare_many_plans();
	args[0] = paidb_row_array(summary_rowtype, NSUMMARY, summary_columns, summary_types,
							  h->values, h->nulls, h->nrows);
	if (SPI_execute_plan(update_many_plan, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update paidb.job_summary");

	/* sum the deltas by key; keys whose moves cancel out write nothing */
	qsort(h->deltas, h->ndeltas, sizeof(HeldDelta), held_delta_cmp);
	n = 0;
	for (i = 0; i < h->ndeltas; i++)
	{
		if (n > 0 && held_delta_cmp(&h->deltas[n - 1], &h->deltas[i]) == 0)
			h->deltas[n - 1].n += h->deltas[i].n;
		else
			h->deltas[n++] = h->deltas[i];
		if (h->deltas[n - 1].n == 0)
			n--;
	}
	if (n > 0)
	{
		Datum	   *vals = palloc(sizeof(Datum) * n);
		bool	   *nulls = palloc(sizeof(bool) * n);
		int			dims[1] = {n};
		int			lbs[1] = {1};

		for (i = 0; i < (int) NKEY; i++)
		{
			for (j = 0; j < n; j++)
			{
				vals[j] = h->deltas[j].key[i];
				nulls[j] = h->deltas[j].isnull[i];
			}
			args[i] = column_array(count_key[i], vals, nulls, n);
		}
		for (j = 0; j < n; j++)
			vals[j] = Int32GetDatum(h->deltas[j].n);
		args[NKEY] = PointerGetDatum(construct_md_array(vals, NULL, 1, dims, lbs, INT4OID,
														sizeof(int32), true, TYPALIGN_INT));
		if (SPI_execute_plan(delta_many_plan, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not add job count deltas");
	}
}

PG_FUNCTION_INFO_V1(paidb_framework_summary_trigger);

/*
 * ROW trigger of paidb.framework (AFTER INSERT OR DELETE, BEFORE UPDATE):
 * keep the job list and counts.
 */
Datum
paidb_framework_summary_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	const AttrNumber *attnums;
	Datum		newv[NSUMMARY];
	char		newn[NSUMMARY];
	Datum		oldv[NSUMMARY];
	char		oldn[NSUMMARY];
	bool		before;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		(!TRIGGER_FIRED_AFTER(trigdata->tg_event) && !TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paidb.framework_summary_trigger() must be a ROW trigger, AFTER unless for UPDATE")));
	before = TRIGGER_FIRED_BEFORE(trigdata->tg_event);

	desc = RelationGetDescr(trigdata->tg_relation);
	attnums = framework_attnums(trigdata->tg_relation);
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		summary_values(trigdata->tg_trigtuple, desc, attnums, oldv, oldn);
		summary_values(trigdata->tg_newtuple, desc, attnums, newv, newn);
		/* a status update that changes no listed column: nothing to do */
		if (!summary_changed(oldv, oldn, newv, newn))
			return PointerGetDatum(before ? trigdata->tg_newtuple : NULL);
	}

	/* a watcher's batch: held, and written with the batch's others */
	if (held != NULL && TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) &&
		!column_changed(SUMMARY_SUBMISSION_TIME, oldv, oldn, newv, newn) &&
		!column_changed(SUMMARY_USER_NAME, oldv, oldn, newv, newn))
	{
		hold_update(oldv, oldn, newv, newn);
		return PointerGetDatum(trigdata->tg_newtuple);
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	prepare_plans();

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		summary_values(trigdata->tg_trigtuple, desc, attnums, newv, newn);
		if (SPI_execute_plan(insert_plan, newv, newn, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into paidb.job_summary");
		add_delta(newv, newn, 1);
	}
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		if (SPI_execute_plan(update_plan, newv, newn, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update paidb.job_summary");
		if (key_changed(oldv, oldn, newv, newn))
			move_delta(oldv, oldn, newv, newn);
		if (column_changed(SUMMARY_SUBMISSION_TIME, oldv, oldn, newv, newn) ||
			column_changed(SUMMARY_USER_NAME, oldv, oldn, newv, newn))
			update_tags(newv, newn);
	}
	else if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		summary_values(trigdata->tg_trigtuple, desc, attnums, oldv, oldn);
		if (SPI_execute_plan(delete_plan, oldv, oldn, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from paidb.job_summary");
		add_delta(oldv, oldn, -1);
	}
	SPI_finish();
	return PointerGetDatum(before ? trigdata->tg_newtuple : NULL);
}
