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
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "pkey_lookup.h"

bool
paidb_pkey_lookup(Oid relid, const char *key, Snapshot snapshot,
				  const char *column, char **value)
{
	Relation	heap = table_open(relid, AccessShareLock);
	Oid			pkey = RelationGetPrimaryKeyIndex(heap);
	Relation	index;
	TupleTableSlot *slot;
	ScanKeyData scankey;
	IndexScanDesc scan;
	AttrNumber	attnum = InvalidAttrNumber;
	bool		found;

	if (!OidIsValid(pkey))
		elog(ERROR, "table \"%s\" has no primary key", RelationGetRelationName(heap));
	index = index_open(pkey, AccessShareLock);
	if (index->rd_index->indnatts != 1 ||
		TupleDescAttr(RelationGetDescr(index), 0)->atttypid != TEXTOID)
		elog(ERROR, "the primary key of table \"%s\" is not one text column",
			 RelationGetRelationName(heap));
	if (column != NULL)
	{
		attnum = get_attnum(relid, column);
		if (attnum == InvalidAttrNumber ||
			TupleDescAttr(RelationGetDescr(heap), attnum - 1)->atttypid != TEXTOID)
			elog(ERROR, "table \"%s\" has no text column \"%s\"",
				 RelationGetRelationName(heap), column);
	}

	ScanKeyEntryInitialize(&scankey, 0, 1, BTEqualStrategyNumber, TEXTOID,
						   index->rd_indcollation[0], F_TEXTEQ, CStringGetTextDatum(key));
	slot = table_slot_create(heap, NULL);
	scan = index_beginscan(heap, index, snapshot, 1, 0);
	index_rescan(scan, &scankey, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found && column != NULL)
	{
		bool		isnull;
		Datum		d = slot_getattr(slot, attnum, &isnull);

		*value = isnull ? NULL : TextDatumGetCString(d);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}
