/*
 * install_check.c — what the install script needs to know about the
 * transaction it runs in (SPEC §8): whether a catalog row was created by
 * this very transaction.  Fresh installs use it to tell the roles they
 * created from roles that existed before.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(paidb_created_in_this_transaction);

/*
 * _created_in_this_transaction(catalog regclass, object oid): whether the
 * row of a role (pg_authid) or relation (pg_class) was inserted by the
 * current transaction or one of its subtransactions; false if there is no
 * such row.  Exact where comparing xmin with txid_current() in SQL is not
 * (a subtransaction has an xid of its own).
 */
Datum
paidb_created_in_this_transaction(PG_FUNCTION_ARGS)
{
	Oid			catalog = PG_GETARG_OID(0);
	Oid			object = PG_GETARG_OID(1);
	int			cacheid;
	HeapTuple	tup;
	bool		result;

	if (catalog == AuthIdRelationId)
		cacheid = AUTHOID;
	else if (catalog == RelationRelationId)
		cacheid = RELOID;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("catalog must be pg_authid or pg_class")));
	tup = SearchSysCache1(cacheid, ObjectIdGetDatum(object));
	if (!HeapTupleIsValid(tup))
		PG_RETURN_BOOL(false);
	result = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tup->t_data));
	ReleaseSysCache(tup);
	PG_RETURN_BOOL(result);
}
