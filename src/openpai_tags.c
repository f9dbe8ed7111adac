/*
 * openpai_tags.c — rest-server's tag filters through the openpai views
 * (SPEC §10, docs/queries.md).
 *
 * With tagsContain, Sequelize 5.21.3 (an INNER JOIN on an include with a
 * `where`) writes the page of rest-server's job list as
 *
 *   SELECT ... FROM "frameworks" AS "framework"
 *    WHERE "framework"."name" IN (SELECT "frameworkName" FROM "tags"
 *                                  WHERE "tags"."name" IN (...))
 *      AND (SELECT "frameworkName" FROM "tags" AS "tags"
 *            WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1) IS NOT NULL
 *    ORDER BY ... LIMIT n
 *
 * The second test says the job has some tag; the first already says it has
 * one of the given tags.  PostgreSQL cannot see that and runs the second
 * as a sub-plan for every job it walks, which made such a page cost twice
 * what it does without it.  After parse analysis this drops the second
 * test wherever the first stands beside it on the same job, in the same
 * WHERE: a tag's frameworkName is never NULL, so a job that satisfies the
 * IN has a tag row whose frameworkName equals its name (by the same
 * operator and collation), and the scalar sub-select over those rows
 * returns a non-NULL value.  The result is the same rows; both tests read
 * one snapshot, and the IN that stays keeps every privilege check on
 * openpai.tags.
 */
#include "postgres.h"

#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "openpai_tags.h"

/* The two views, looked up once per statement and only when needed. */
typedef struct TagViews
{
	bool		resolved;
	bool		present;
	Oid			frameworks;
	Oid			tags;
} TagViews;

bool
paidb_is_column_of(Node *node, Query *query, Oid relid, const char *column)
{
	Var		   *var;
	RangeTblEntry *rte;
	char	   *attname;

	if (node == NULL || !IsA(node, Var))
		return false;
	var = (Var *) node;
	if (var->varlevelsup != 0 || var->varattno <= 0 || var->varno < 1 ||
		var->varno > list_length(query->rtable))
		return false;
	rte = rt_fetch(var->varno, query->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relid != relid)
		return false;
	attname = get_attname(relid, var->varattno, true);
	return attname != NULL && strcmp(attname, column) == 0;
}

/* A plain SELECT: no grouping, aggregate, set operation, CTE or locking. */
static bool
is_plain_select(Query *sel)
{
	return sel->commandType == CMD_SELECT && sel->utilityStmt == NULL &&
		!sel->hasAggs && !sel->hasWindowFuncs && !sel->hasTargetSRFs &&
		!sel->hasRecursive && !sel->hasModifyingCTE && !sel->hasForUpdate &&
		sel->cteList == NIL && sel->groupClause == NIL && sel->groupingSets == NIL &&
		sel->havingQual == NULL && sel->setOperations == NULL &&
		sel->distinctClause == NIL && sel->rowMarks == NIL &&
		list_length(sel->rtable) == 1 && list_length(sel->targetList) == 1 &&
		sel->jointree != NULL && list_length(sel->jointree->fromlist) == 1 &&
		IsA(linitial(sel->jointree->fromlist), RangeTblRef) &&
		linitial_node(RangeTblRef, sel->jointree->fromlist)->rtindex == 1;
}

SubLink *
paidb_tags_in_sublink(Node *node, Query *query, Oid frameworks, Oid tags)
{
	SubLink    *sub;
	OpExpr	   *eq;
	Query	   *sel;
	TargetEntry *te;
	Param	   *param;

	if (node == NULL || !IsA(node, SubLink))
		return NULL;
	sub = (SubLink *) node;
	if (sub->subLinkType != ANY_SUBLINK || sub->testexpr == NULL ||
		!IsA(sub->testexpr, OpExpr) || !IsA(sub->subselect, Query))
		return NULL;
	eq = (OpExpr *) sub->testexpr;
	if (eq->opno != TextEqualOperator || list_length(eq->args) != 2 ||
		!paidb_is_column_of(linitial(eq->args), query, frameworks, "name") ||
		!IsA(lsecond(eq->args), Param))
		return NULL;
	param = (Param *) lsecond(eq->args);
	if (param->paramkind != PARAM_SUBLINK || param->paramid != 1)
		return NULL;
	sel = (Query *) sub->subselect;
	if (!is_plain_select(sel) || sel->limitCount != NULL || sel->limitOffset != NULL)
		return NULL;
	te = linitial_node(TargetEntry, sel->targetList);
	if (te->resjunk || !paidb_is_column_of((Node *) te->expr, sel, tags, "frameworkName") ||
		contain_vars_of_level((Node *) sel, 1) || contain_volatile_functions((Node *) sel))
		return NULL;
	return sub;
}

/* `(SELECT ...) IS NOT NULL` over a scalar sub-select: the sub-link. */
static SubLink *
not_null_scalar(Node *arm)
{
	NullTest   *test;
	SubLink    *sub;

	if (!IsA(arm, NullTest))
		return NULL;
	test = (NullTest *) arm;
	if (test->nulltesttype != IS_NOT_NULL || test->argisrow || !IsA(test->arg, SubLink))
		return NULL;
	sub = (SubLink *) test->arg;
	if (sub->subLinkType != EXPR_SUBLINK || !IsA(sub->subselect, Query))
		return NULL;
	return sub;
}

/*
 * Whether e is a positive, non-NULL constant LIMIT.  Parse analysis leaves
 * `LIMIT 1` as a cast of an int4 constant to int8: fold it first.
 */
static bool
is_positive_limit(Node *e)
{
	Const	   *c;

	if (e == NULL || contain_volatile_functions(e))
		return false;
	e = eval_const_expressions(NULL, copyObject(e));
	if (!IsA(e, Const))
		return false;
	c = (Const *) e;
	return c->consttype == INT8OID && !c->constisnull && DatumGetInt64(c->constvalue) >= 1;
}

/*
 * Whether sub is `(SELECT "frameworkName" FROM tags WHERE "frameworkName"
 * = <outer>.name LIMIT k)` for the same outer column as `name` (a Var of
 * the query the test stands in) and the same collation as the IN's test.
 */
static bool
is_some_tag_of(SubLink *sub, Var *name, Oid collation, TagViews *v)
{
	Query	   *sel = (Query *) sub->subselect;
	TargetEntry *te;
	OpExpr	   *eq;
	Node	   *a;
	Node	   *b;
	Node	   *outer;

	if (!is_plain_select(sel) || sel->limitOffset != NULL ||
		sel->limitOption != LIMIT_OPTION_COUNT || !is_positive_limit(sel->limitCount) ||
		sel->hasSubLinks || sel->jointree->quals == NULL || !IsA(sel->jointree->quals, OpExpr))
		return false;
	te = linitial_node(TargetEntry, sel->targetList);
	if (te->resjunk || !paidb_is_column_of((Node *) te->expr, sel, v->tags, "frameworkName"))
		return false;
	eq = (OpExpr *) sel->jointree->quals;
	if (eq->opno != TextEqualOperator || list_length(eq->args) != 2 || eq->inputcollid != collation)
		return false;
	a = linitial(eq->args);
	b = lsecond(eq->args);
	if (paidb_is_column_of(a, sel, v->tags, "frameworkName"))
		outer = b;
	else if (paidb_is_column_of(b, sel, v->tags, "frameworkName"))
		outer = a;
	else
		return false;
	return IsA(outer, Var) && ((Var *) outer)->varlevelsup == 1 &&
		((Var *) outer)->varno == name->varno && ((Var *) outer)->varattno == name->varattno &&
		((Var *) outer)->varattno > 0;
}

static bool
resolve_views(TagViews *v)
{
	Oid			nsp;
	Oid			ext;

	if (v->resolved)
		return v->present;
	v->resolved = true;
	v->present = false;
	nsp = get_namespace_oid("openpai", true);
	if (!OidIsValid(nsp))
		return false;
	v->frameworks = get_relname_relid("frameworks", nsp);
	v->tags = get_relname_relid("tags", nsp);
	if (!OidIsValid(v->frameworks) || !OidIsValid(v->tags))
		return false;
	ext = get_extension_oid("paidb_openpai", true);
	if (!OidIsValid(ext) ||
		getExtensionOfObject(RelationRelationId, v->frameworks) != ext ||
		getExtensionOfObject(RelationRelationId, v->tags) != ext)
		return false;
	v->present = true;
	return true;
}

/* Drop the implied tests from one query's WHERE. */
static void
drop_in_query(Query *query, TagViews *v)
{
	List	   *arms;
	List	   *kept = NIL;
	ListCell   *lc;
	bool		candidate = false;

	arms = make_ands_implicit((Expr *) query->jointree->quals);
	foreach(lc, arms)
		if (not_null_scalar((Node *) lfirst(lc)) != NULL)
			candidate = true;
	/* the catalogs only for a query that could have the shape */
	if (!candidate || !resolve_views(v))
		return;

	foreach(lc, arms)
	{
		Node	   *arm = (Node *) lfirst(lc);
		SubLink    *test = not_null_scalar(arm);
		bool		implied = false;
		ListCell   *lc2;

		if (test != NULL)
		{
			foreach(lc2, arms)
			{
				SubLink    *in = paidb_tags_in_sublink((Node *) lfirst(lc2), query, v->frameworks, v->tags);
				OpExpr	   *eq;

				if (in == NULL)
					continue;
				eq = (OpExpr *) in->testexpr;
				if (is_some_tag_of(test, linitial_node(Var, eq->args), eq->inputcollid, v))
				{
					implied = true;
					break;
				}
			}
		}
		if (!implied)
			kept = lappend(kept, arm);
	}
	if (list_length(kept) != list_length(arms))
		query->jointree->quals = (Node *) make_ands_explicit(kept);
}

static bool
drop_walker(Node *node, TagViews *v)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;

		if (query->hasSubLinks && query->jointree != NULL && query->jointree->quals != NULL)
			drop_in_query(query, v);
		return query_tree_walker(query, drop_walker, (void *) v, 0);
	}
	return expression_tree_walker(node, drop_walker, (void *) v);
}

void
paidb_openpai_drop_implied_tag_tests(Query *query)
{
	TagViews	v = {0};

	(void) drop_walker((Node *) query, &v);
}
