/*
 * rewrite_guard.c — when a rewrite of the openpai views may fire at all
 * (SPEC §10).
 *
 * Stored definitions.  CREATE VIEW analyses its query through the same
 * parse-analysis hook as a client's query, and stores what comes out: a
 * rewritten query would be kept with the settings of that moment, depend on
 * objects an upgrade changes, and lose in a dump the check it keeps.  A
 * utility hook counts the statements that store an analysed query while
 * they run; no rewrite fires inside one.  (CREATE MATERIALIZED VIEW and
 * CREATE TABLE AS analyse their query before any utility hook runs, as part
 * of the outer statement, which the rewrites never enter.)
 *
 * Errors.  A rewrite changes which rows an expression is evaluated on (a
 * count's filter on the count keys instead of the jobs, a page's on the
 * rows of one tag instead of all jobs) and in which order.  Where the
 * expression can fail on some rows, that can turn an error into an answer
 * or back.  So the expressions of a rewritten query level must be unable to
 * fail: built from a closed list of node kinds, with leakproof functions
 * (PostgreSQL's own promise that a function raises no error that depends on
 * its arguments), and LIKE only with a pattern that cannot be rejected.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "rewrite_guard.h"

static ProcessUtility_hook_type prev_process_utility = NULL;

/* Statements storing an analysed query that are running now (nested). */
static int	stored_definition_depth = 0;

static bool
stores_analysed_query(Node *stmt)
{
	switch (nodeTag(stmt))
	{
		case T_ViewStmt:
		case T_RuleStmt:
		case T_CreateFunctionStmt:
		case T_CreatePolicyStmt:
		case T_AlterPolicyStmt:
			return true;
		case T_CreateTableAsStmt:
			return ((CreateTableAsStmt *) stmt)->objtype == OBJECT_MATVIEW;
		default:
			return false;
	}
}

static void
guard_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	volatile bool stores = stores_analysed_query(pstmt->utilityStmt);

	if (stores)
		stored_definition_depth++;
	PG_TRY();
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
								 queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		if (stores)
			stored_definition_depth--;
	}
	PG_END_TRY();
}

void
paidb_rewrite_guard_init(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = guard_process_utility;
}

bool
paidb_rewrites_allowed(void)
{
	return !IsBinaryUpgrade && stored_definition_depth == 0;
}

static bool
not_leakproof(Oid funcid, void *context)
{
	return !get_func_leakproof(funcid);
}

/*
 * A LIKE or ILIKE pattern that cannot be rejected: a text constant not
 * ending in an unpaired escape character (the default escape, backslash).
 */
static bool
is_safe_like(OpExpr *op)
{
	Const	   *pattern;
	char	   *s;
	size_t		len;
	size_t		backslashes = 0;

	if (op->opfuncid != F_TEXTLIKE && op->opfuncid != F_TEXTNLIKE &&
		op->opfuncid != F_TEXTICLIKE && op->opfuncid != F_TEXTICNLIKE)
		return false;
	if (list_length(op->args) != 2 || !IsA(lsecond(op->args), Const))
		return false;
	pattern = lsecond_node(Const, op->args);
	if (pattern->consttype != TEXTOID || !OidIsValid(op->inputcollid) ||
		!get_collation_isdeterministic(op->inputcollid))
		return false;
	if (pattern->constisnull)
		return true;
	s = TextDatumGetCString(pattern->constvalue);
	len = strlen(s);
	while (backslashes < len && s[len - 1 - backslashes] == '\\')
		backslashes++;
	return backslashes % 2 == 0;
}

static bool
may_raise_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
		case T_Const:
		case T_Param:
		case T_CaseTestExpr:
		case T_List:
		case T_TargetEntry:
		case T_BoolExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_RelabelType:
		case T_CollateExpr:
		case T_CoalesceExpr:
		case T_CaseExpr:
		case T_CaseWhen:
			break;
		case T_ArrayExpr:
			/* nested arrays can fail on mismatched dimensions */
			if (((ArrayExpr *) node)->multidims)
				return true;
			break;
		case T_OpExpr:
			set_opfuncid((OpExpr *) node);
			if (is_safe_like((OpExpr *) node))
				return expression_tree_walker(node, may_raise_walker, context);
			/* FALLTHROUGH */
		case T_FuncExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_ScalarArrayOpExpr:
			if (check_functions_in_node(node, not_leakproof, NULL))
				return true;
			break;
		default:
			/* sub-selects, aggregates, I/O coercions, ...: not known safe */
			return true;
	}
	return expression_tree_walker(node, may_raise_walker, context);
}

bool
paidb_expr_cannot_raise(Node *expr)
{
	return !may_raise_walker(expr, NULL);
}
