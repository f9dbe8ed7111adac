/*
 * pkey_lookup.c — one row found by its text primary key, without a
 * statement.  See pkey_lookup.h.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

#include "pkey_lookup.h"

/* Open the table (lockmode) and its one-text-column primary key (AccessShare), both kept to commit. */
static Relation
open_with_key(Oid relid, LOCKMODE lockmode, Relation *index)
{
	Relation	heap = table_open(relid, lockmode);
	Oid			pkey = RelationGetPrimaryKeyIndex(heap);

	if (!OidIsValid(pkey))
		elog(ERROR, "table \"%s\" has no primary key", RelationGetRelationName(heap));
	*index = index_open(pkey, AccessShareLock);
	if ((*index)->rd_index->indnatts != 1 ||
		TupleDescAttr(RelationGetDescr(*index), 0)->atttypid != TEXTOID)
		elog(ERROR, "the primary key of table \"%s\" is not one text column",
				 RelationGetRelationName(heap));
	return heap;
}

/* Find the row with the key into slot; false if none is visible to snapshot. */
static bool
find_by_key(Relation heap, Relation index, const char *key, Snapshot snapshot, TupleTableSlot *slot)
{
	ScanKeyData scankey;
	IndexScanDesc scan;
	bool		found;

	ScanKeyEntryInitialize(&scankey, 0, 1, BTEqualStrategyNumber, TEXTOID,
						   index->rd_indcollation[0], F_TEXTEQ, CStringGetTextDatum(key));
	scan = index_beginscan(heap, index, snapshot, 1, 0);
	index_rescan(scan, &scankey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	return found;
}

static AttrNumber
column_attnum(Relation heap, const char *column)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(heap), column);

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "table \"%s\" has no column \"%s\"", RelationGetRelationName(heap), column);
	return attnum;
}

bool
paidb_pkey_lookup(Oid relid, const char *key, Snapshot snapshot,
				  const char *column, char **value)
{
	Relation	index;
	Relation	heap = open_with_key(relid, AccessShareLock, &index);
	TupleTableSlot *slot;
	AttrNumber	attnum = InvalidAttrNumber;
	bool		found;

	if (column != NULL)
	{
		attnum = column_attnum(heap, column);
		if (TupleDescAttr(RelationGetDescr(heap), attnum - 1)->atttypid != TEXTOID)
			elog(ERROR, "table \"%s\" has no text column \"%s\"",
				 RelationGetRelationName(heap), column);
	}
	slot = table_slot_create(heap, NULL);
	found = find_by_key(heap, index, key, snapshot, slot);
	if (found && column != NULL)
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, attnum, &isnull);

		*value = isnull ? NULL : TextDatumGetCString(d);
	}
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

/*
 * Find and lock the row with the key into slot, as SELECT ... FOR <mode>
 * in a statement of its own would (see paidb_pkey_lock_datums in pkey_lookup.h).
 */
static bool
lock_by_key(Relation heap, Relation index, const char *key, LockTupleMode mode, TupleTableSlot *slot)
{
	bool		found;

	/* the snapshot a statement of its own would run with */
	PushActiveSnapshot(GetTransactionSnapshot());
	found = find_by_key(heap, index, key, GetActiveSnapshot(), slot);
	if (found)
	{
		ItemPointerData tid = slot->tts_tid;
		TM_FailureData tmfd;
		TM_Result	result;
		int			flags = IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION;

		result = table_tuple_lock(heap, &tid, GetActiveSnapshot(), slot, GetCurrentCommandId(false),
								  mode, LockWaitBlock, flags, &tmfd);
		switch (result)
		{
			case TM_Ok:
				break;
			case TM_SelfModified:
				/* changed by this transaction after the snapshot: as ExecLockRows, not there */
				found = false;
				break;
			case TM_Updated:
			case TM_Deleted:
				if (IsolationUsesXactSnapshot())
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not serialize access due to concurrent %s",
									result == TM_Updated ? "update" : "delete")));
				found = false;	/* READ COMMITTED: the row is gone */
				break;
			default:
				elog(ERROR, "unexpected result %d locking a row of \"%s\"", (int) result,
					 RelationGetRelationName(heap));
		}
		/* a later version (READ COMMITTED) may carry another key */
		if (found && tmfd.traversed)
		{
			bool		isnull;
			Datum		d = slot_getattr(slot, index->rd_index->indkey.values[0], &isnull);

			found = !isnull && strcmp(TextDatumGetCString(d), key) == 0;
		}
	}
	PopActiveSnapshot();
	return found;
}

bool
paidb_pkey_lock_datums(Oid relid, const char *key, LockTupleMode mode,
					   int ncolumns, const char *const *columns, Datum *values, bool *isnull)
{
	Relation	index;
	/* RowShareLock on the table, as FOR ... in a statement takes */
	Relation	heap = open_with_key(relid, RowShareLock, &index);
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	bool		found = lock_by_key(heap, index, key, mode, slot);

	if (found)
	{
		TupleDesc	desc = RelationGetDescr(heap);

		for (int i = 0; i < ncolumns; i++)
		{
			AttrNumber	attnum = column_attnum(heap, columns[i]);
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			Datum		d = slot_getattr(slot, attnum, &isnull[i]);

			/* copied: the slot's values point into a buffer released below */
			values[i] = isnull[i] ? (Datum) 0 : datumCopy(d, att->attbyval, att->attlen);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}
