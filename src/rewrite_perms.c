/*
 * rewrite_perms.c — the privilege checks of a rewritten query (SPEC §10).
 *
 * PostgreSQL 15 records a query's privilege checks in its range table:
 * each entry names the rights it needs (requiredPerms), as whom
 * (checkAsUser, 0 for the current user) and on which columns
 * (selectedCols).  The executor checks every entry of the final range
 * table, referenced or not; the rewriter adds a view's checks when it
 * expands the view, which it does only for views the query references.
 *
 * So a rewrite that stops reading a view keeps that view's entry and the
 * entries of the view's expansion, copied unreferenced into the rewritten
 * query: the same checks, as the same roles, on the same columns, in the
 * same order, whoever runs the statement later (a prepared statement runs
 * as whoever executes it).  What the rewrite reads instead it reads
 * unchecked: its answer equals the answer of the query whose checks it
 * kept, so it lends no right.  Only this file knows these fields.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "rewrite_perms.h"

typedef struct CollectContext
{
	List	  **checks;
	bool		row_security;	/* a table involved has it enabled */
} CollectContext;

static void collect_entry(RangeTblEntry *rte, CollectContext *cx);

bool
paidb_has_row_security(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		rls;

	if (!HeapTupleIsValid(tuple))
		return false;
	rls = ((Form_pg_class) GETSTRUCT(tuple))->relrowsecurity;
	ReleaseSysCache(tuple);
	return rls;
}

static bool
collect_walker(Node *node, CollectContext *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
			collect_entry(rte, cx);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, collect_walker, (void *) cx,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, collect_walker, (void *) cx);
}

/*
 * One relation entry: its check, and for a view the checks of its stored
 * definition (whose checkAsUser the relation cache has already set to the
 * view's owner unless the view is security_invoker, as the rewriter uses
 * it).  Entries without a check (a view definition's OLD and NEW) are the
 * view itself: not followed.
 */
static void
collect_entry(RangeTblEntry *rte, CollectContext *cx)
{
	char		relkind = get_rel_relkind(rte->relid);

	check_stack_depth();
	if (relkind == RELKIND_RELATION || relkind == RELKIND_PARTITIONED_TABLE)
	{
		if (paidb_has_row_security(rte->relid))
			cx->row_security = true;
	}
	if (rte->requiredPerms == 0)
		return;
	{
		RangeTblEntry *copy = copyObject(rte);

		copy->inFromCl = false;
		*cx->checks = lappend(*cx->checks, copy);
	}
	if (relkind == RELKIND_VIEW)
	{
		Relation	view = relation_open(rte->relid, AccessShareLock);
		Query	   *definition = copyObject(get_view_query(view));

		relation_close(view, NoLock);
		(void) query_tree_walker(definition, collect_walker, (void *) cx, QTW_EXAMINE_RTES_BEFORE);
	}
}

bool
paidb_collect_checks(Query *owner, RangeTblEntry *rte, List **checks)
{
	CollectContext cx;

	cx.checks = checks;
	cx.row_security = false;
	if (rte->rtekind == RTE_RELATION)
		collect_entry(rte, &cx);
	else
		(void) range_table_entry_walker(rte, collect_walker, (void *) &cx, QTW_EXAMINE_RTES_BEFORE);
	return !cx.row_security;
}

void
paidb_append_checks(Query *query, List *checks)
{
	query->rtable = list_concat(query->rtable, checks);
}

void
paidb_rte_unchecked(Query *owner, RangeTblEntry *rte)
{
	rte->requiredPerms = 0;
	rte->checkAsUser = InvalidOid;
	rte->selectedCols = NULL;
	rte->insertedCols = NULL;
	rte->updatedCols = NULL;
	rte->extraUpdatedCols = NULL;
}

static bool
unchecked_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		if (((RangeTblEntry *) node)->rtekind == RTE_RELATION)
			paidb_rte_unchecked((Query *) context, (RangeTblEntry *) node);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, unchecked_walker, node, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, unchecked_walker, context);
}

Query *
paidb_internal_select(const char *sql)
{
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	ParseState *pstate = make_parsestate(NULL);
	Query	   *query;

	pstate->p_sourcetext = sql;
	/* not parse_analyze(): no analysis hook sees paidb's own sub-query */
	query = transformTopLevelStmt(pstate, linitial_node(RawStmt, raw));
	free_parsestate(pstate);
	(void) unchecked_walker((Node *) query, query);
	return query;
}
