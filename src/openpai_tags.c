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
 *
 * Such a page in submission order (rest-server's default) still walks
 * every job newest first and probes the tags for each: its cost grows with
 * the recent jobs that lack the tag.  paidb.tag carries each tag's job
 * submission time and user, indexed, so the IN becomes
 *
 *   ("name", "submissionTime"[, "userName"]) IN (SELECT framework_name,
 *       job_submission_time[, job_user_name] FROM paidb.tag WHERE <the IN's>)
 *
 * which selects the same jobs: the tag row that satisfies the IN carries
 * its job's time and user (kept by paidb), the time is never NULL, and the
 * user is added only beside `"userName" = x`, which no job with a NULL user
 * passes.  PostgreSQL makes the time (and user) one equivalence with the
 * job's, so it walks the tag's index in the page's order and stops after a
 * page of jobs.  The IN is replaced rather than joined by the new test: two
 * semi-joins on the tags made the planner count the tag's selectivity
 * twice, expect one row, and sort all the tag's jobs (30 ms instead of
 * 0.2 at a million jobs).
 */
#include "postgres.h"

#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "access/table.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_collation.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_oper.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "openpai_tags.h"
#include "rewrite_guard.h"
#include "rewrite_perms.h"

/* More tags than this in one IN: no bound (one sub-select per tag). */
#define MAX_BOUNDED_TAGS 32

/* The two views, looked up once per statement and only when needed. */
typedef struct TagViews
{
	bool		resolved;
	bool		present;
	Oid			frameworks;
	Oid			tags;
	Oid			tag_table;		/* paidb.tag with its job columns, or InvalidOid */
} TagViews;

/* The columns of openpai.tags and the paidb.tag columns they show. */
static const struct
{
	const char *view;
	const char *table;
}			tag_columns[] =
{
	{"insertedAt", "inserted_at"},
	{"uid", "uid"},
	{"frameworkName", "framework_name"},
	{"name", "name"},
	{"updatedAt", "updated_at"}
};

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
		!OidIsValid(eq->inputcollid) || !get_collation_isdeterministic(eq->inputcollid) ||
		!paidb_is_column_of(linitial(eq->args), query, frameworks, "name") ||
		!IsA(lsecond(eq->args), Param))
		return NULL;
	param = (Param *) lsecond(eq->args);
	if (param->paramkind != PARAM_SUBLINK || param->paramid != 1)
		return NULL;
	sel = (Query *) sub->subselect;
	if (!is_plain_select(sel) || sel->limitCount != NULL || sel->limitOffset != NULL ||
		sel->hasSubLinks || sel->querySource != QSRC_ORIGINAL)
		return NULL;
	te = linitial_node(TargetEntry, sel->targetList);
	if (te->resjunk || !paidb_is_column_of((Node *) te->expr, sel, tags, "frameworkName") ||
		contain_vars_of_level((Node *) sel, 1) || contain_volatile_functions((Node *) sel) ||
		!paidb_expr_cannot_raise(sel->jointree->quals))
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
 * A LIMIT or OFFSET as a constant int64 (NULL: 0), or -1 if it is not one.
 * Parse analysis leaves `LIMIT 1` as a cast of an int4 constant to int8:
 * folded first.
 */
static int64
constant_count(Node *e)
{
	Const	   *c;

	if (e == NULL)
		return 0;
	if (contain_volatile_functions(e))
		return -1;
	e = eval_const_expressions(NULL, copyObject(e));
	if (!IsA(e, Const))
		return -1;
	c = (Const *) e;
	if (c->consttype != INT8OID)
		return -1;
	if (c->constisnull)
		return 0;
	return DatumGetInt64(c->constvalue) < 0 ? -1 : DatumGetInt64(c->constvalue);
}

/*
 * Whether e is the constant LIMIT 1: with more, a job with several tags
 * makes the scalar sub-select fail (21000), which dropping it would hide.
 */
static bool
is_limit_one(Node *e)
{
	return e != NULL && constant_count(e) == 1;
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
		sel->limitOption != LIMIT_OPTION_COUNT || !is_limit_one(sel->limitCount) ||
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
	/* paidb.tag, if it carries the job columns (paidb 0.2) */
	v->tag_table = InvalidOid;
	nsp = get_namespace_oid("paidb", true);
	if (OidIsValid(nsp))
	{
		Oid			tag = get_relname_relid("tag", nsp);

		if (OidIsValid(tag) &&
			getExtensionOfObject(RelationRelationId, tag) == get_extension_oid("paidb", true) &&
			get_attnum(tag, "job_submission_time") != InvalidAttrNumber &&
			get_attnum(tag, "job_user_name") != InvalidAttrNumber)
			v->tag_table = tag;
	}
	return true;
}

/* Whether arm is a has-a-tag test that a tags IN among arms implies. */
static bool
is_implied_tag_test(Node *arm, List *arms, Query *query, TagViews *v)
{
	SubLink    *test = not_null_scalar(arm);
	ListCell   *lc;

	if (test == NULL)
		return false;
	foreach(lc, arms)
	{
		SubLink    *in = paidb_tags_in_sublink((Node *) lfirst(lc), query, v->frameworks, v->tags);
		OpExpr	   *eq;

		if (in == NULL)
			continue;
		eq = (OpExpr *) in->testexpr;
		if (is_some_tag_of(test, linitial_node(Var, eq->args), eq->inputcollid, v))
			return true;
	}
	return false;
}

/*
 * Drop the implied tests from one query level's WHERE; adds to *checks what
 * the dropped sub-selects checked.  False (nothing changed) where a table
 * under one of them has row security.
 */
static bool
drop_in_query(Query *query, TagViews *v, List **checks)
{
	List	   *arms = make_ands_implicit((Expr *) query->jointree->quals);
	List	   *kept = NIL;
	List	   *dropped = NIL;
	ListCell   *lc;

	foreach(lc, arms)
	{
		Node	   *arm = (Node *) lfirst(lc);

		if (is_implied_tag_test(arm, arms, query, v))
		{
			Query	   *sel = (Query *) not_null_scalar(arm)->subselect;

			if (!paidb_collect_checks(sel, linitial_node(RangeTblEntry, sel->rtable), &dropped))
				return false;
		}
		else
			kept = lappend(kept, arm);
	}
	if (list_length(kept) != list_length(arms))
	{
		query->jointree->quals = (Node *) make_ands_explicit(kept);
		*checks = list_concat(*checks, dropped);
	}
	return true;
}

/*
 * Whether a query level may be rewritten at all (SPEC §10): a SELECT from
 * openpai.frameworks alone (one range-table entry, no join: a page bound
 * or a dropped test argued over "the jobs of this WHERE" holds for nothing
 * else), no locking, no set-returning or volatile function, no row security
 * under the view, and nothing but the tag tests themselves that could fail
 * (a rewrite changes which rows, and in which order, the rest is evaluated
 * on).  The tag tests' own insides are checked where they are rewritten.
 */
static bool
is_rewritable_level(Query *query, TagViews *v)
{
	List	   *arms;
	List	   *ignored = NIL;
	ListCell   *lc;
	bool		candidate = false;

	if (query->commandType != CMD_SELECT || query->utilityStmt != NULL ||
		query->querySource != QSRC_ORIGINAL || !query->hasSubLinks ||
		query->hasForUpdate || query->rowMarks != NIL || query->hasTargetSRFs ||
		query->hasModifyingCTE || query->hasRecursive || query->cteList != NIL ||
		query->setOperations != NULL || list_length(query->rtable) != 1 ||
		query->jointree == NULL || query->jointree->quals == NULL ||
		list_length(query->jointree->fromlist) != 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef) ||
		linitial_node(RangeTblRef, query->jointree->fromlist)->rtindex != 1)
		return false;
	if (linitial_node(RangeTblEntry, query->rtable)->rtekind != RTE_RELATION ||
		!resolve_views(v) || linitial_node(RangeTblEntry, query->rtable)->relid != v->frameworks)
		return false;
	if (contain_volatile_functions((Node *) query))
		return false;
	if (!paidb_expr_cannot_raise((Node *) query->targetList) ||
		!paidb_expr_cannot_raise(query->havingQual) ||
		!paidb_expr_cannot_raise(query->limitCount) ||
		!paidb_expr_cannot_raise(query->limitOffset))
		return false;
	arms = make_ands_implicit((Expr *) query->jointree->quals);
	foreach(lc, arms)
	{
		Node	   *arm = (Node *) lfirst(lc);

		if (paidb_tags_in_sublink(arm, query, v->frameworks, v->tags) != NULL)
			candidate = true;
		else if (!is_implied_tag_test(arm, arms, query, v) && !paidb_expr_cannot_raise(arm))
			return false;
	}
	/* the view's definition is walked only for a level with a tags IN */
	return candidate &&
		paidb_collect_checks(query, linitial_node(RangeTblEntry, query->rtable), &ignored);
}

/* Moving a tags IN's filter from openpai.tags onto paidb.tag. */
typedef struct RemapContext
{
	Oid			view;
	Oid			table;
	bool		ok;
} RemapContext;

static Node *
remap_mutator(Node *node, RemapContext *cx)
{
	if (node == NULL || !cx->ok)
		return node;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		char	   *attname;
		AttrNumber	a = InvalidAttrNumber;
		Oid			type;
		int32		typmod;
		Oid			coll;
		Var		   *moved;
		int			i;

		if (var->varlevelsup != 0 || var->varno != 1 || var->varattno <= 0)
		{
			cx->ok = false;
			return node;
		}
		attname = get_attname(cx->view, var->varattno, true);
		for (i = 0; attname != NULL && i < (int) lengthof(tag_columns); i++)
			if (strcmp(attname, tag_columns[i].view) == 0)
				a = get_attnum(cx->table, tag_columns[i].table);
		if (a == InvalidAttrNumber)
		{
			cx->ok = false;
			return node;
		}
		get_atttypetypmodcoll(cx->table, a, &type, &typmod, &coll);
		if (type != var->vartype || coll != var->varcollid)
		{
			cx->ok = false;
			return node;
		}
		moved = copyObject(var);
		moved->varattno = a;
		moved->varattnosyn = a;
		moved->varnosyn = 1;
		return (Node *) moved;
	}
	if (IsA(node, Query) || IsA(node, SubLink) || IsA(node, Aggref) ||
		IsA(node, WindowFunc) || IsA(node, PlaceHolderVar))
	{
		cx->ok = false;
		return node;
	}
	return expression_tree_mutator(node, remap_mutator, (void *) cx);
}

/* The Var for column `column` of the frameworks view at varno, or NULL. */
static Var *
frameworks_column(Query *query, int varno, Oid frameworks, const char *column, Oid type)
{
	AttrNumber	a = get_attnum(frameworks, column);
	Oid			t;
	int32		typmod;
	Oid			coll;

	if (a == InvalidAttrNumber)
		return NULL;
	get_atttypetypmodcoll(frameworks, a, &t, &typmod, &coll);
	if (t != type)
		return NULL;
	/*
	 * Not added to the view's checked columns: the query as written does
	 * not read it, and the job's own tag row carries the same value.
	 */
	return makeVar(varno, a, t, typmod, coll, 0);
}

/* `lhs = <sub-select column resno>`, as parse analysis writes an IN's test. */
static Expr *
equals_column(Var *lhs, int resno, Oid opno)
{
	Param	   *param = makeNode(Param);
	OpExpr	   *eq;

	param->paramkind = PARAM_SUBLINK;
	param->paramid = resno;
	param->paramtype = lhs->vartype;
	param->paramtypmod = lhs->vartypmod;
	param->paramcollid = lhs->varcollid;
	param->location = -1;
	eq = (OpExpr *) make_opclause(opno, BOOLOID, false, (Expr *) lhs, (Expr *) param,
								  InvalidOid, lhs->varcollid);
	eq->opfuncid = get_opcode(opno);
	return (Expr *) eq;
}

/*
 * Whether arm is `"userName" = x` on the job of varno, x a constant or a
 * parameter: no job with a NULL user passes it.
 */
static bool
is_user_equality(Node *arm, Query *query, int varno, Oid frameworks)
{
	OpExpr	   *eq;
	Node	   *a;
	Node	   *b;

	if (!IsA(arm, OpExpr))
		return false;
	eq = (OpExpr *) arm;
	if (eq->opno != TextEqualOperator || list_length(eq->args) != 2 ||
		!OidIsValid(eq->inputcollid) || !get_collation_isdeterministic(eq->inputcollid))
		return false;
	a = linitial(eq->args);
	b = lsecond(eq->args);
	if (!paidb_is_column_of(a, query, frameworks, "userName"))
	{
		Node	   *t = a;

		a = b;
		b = t;
	}
	return paidb_is_column_of(a, query, frameworks, "userName") &&
		((Var *) a)->varno == varno && (IsA(b, Const) || IsA(b, Param));
}

/* The collation of column attnum of relid. */
static Oid
column_collation(Oid relid, AttrNumber attnum)
{
	Oid			type;
	int32		typmod;
	Oid			coll;

	get_atttypetypmodcoll(relid, attnum, &type, &typmod, &coll);
	return coll;
}

/*
 * The tag names of `quals` when it is `name = <constant>` or `name IN
 * (<constants>)` on paidb.tag (after remap_mutator), else NIL.
 */
static List *
bounded_tag_names(Node *quals, Oid tag_table)
{
	ScalarArrayOpExpr *in;
	Var		   *col;
	ArrayExpr  *arr;
	ListCell   *lc;

	if (quals != NULL && IsA(quals, OpExpr))
	{
		/* one tag: `name = 'x'` (Sequelize's IN of one) */
		OpExpr	   *eq = (OpExpr *) quals;

		if (eq->opno != TextEqualOperator || list_length(eq->args) != 2 ||
			!OidIsValid(eq->inputcollid) || !get_collation_isdeterministic(eq->inputcollid) ||
			!IsA(linitial(eq->args), Var) || !IsA(lsecond(eq->args), Const) ||
			((Const *) lsecond(eq->args))->consttype != TEXTOID)
			return NIL;
		col = linitial_node(Var, eq->args);
		if (col->varno != 1 || col->varlevelsup != 0 || col->varattno != get_attnum(tag_table, "name"))
			return NIL;
		return list_make1(lsecond(eq->args));
	}
	if (quals == NULL || !IsA(quals, ScalarArrayOpExpr))
		return NIL;
	in = (ScalarArrayOpExpr *) quals;
	/* equality under a deterministic collation is byte equality: the n-th times' test */
	if (!in->useOr || in->opno != TextEqualOperator || list_length(in->args) != 2 ||
		!OidIsValid(in->inputcollid) || !get_collation_isdeterministic(in->inputcollid) ||
		!IsA(linitial(in->args), Var) || !IsA(lsecond(in->args), ArrayExpr))
		return NIL;
	col = linitial_node(Var, in->args);
	if (col->varno != 1 || col->varlevelsup != 0 || col->varattno != get_attnum(tag_table, "name"))
		return NIL;
	arr = lsecond_node(ArrayExpr, in->args);
	if (list_length(arr->elements) > MAX_BOUNDED_TAGS)
		return NIL;
	foreach(lc, arr->elements)
	{
		Const	   *c = (Const *) lfirst(lc);

		if (!IsA(c, Const) || c->consttype != TEXTOID)
			return NIL;
	}
	return arr->elements;
}

/*
 * `(SELECT job_submission_time FROM paidb.tag WHERE name = <tag> [AND
 * job_user_name = <user>] ORDER BY job_submission_time DESC|ASC OFFSET n-1
 * LIMIT 1)`: the n-th newest (oldest) time of one tag, or NULL if it has
 * fewer than n jobs.
 */
static SubLink *
nth_tag_time(Oid tag_table, Const *tag, Const *user, int64 n, Oid sortop, Oid eqop, bool newest_first)
{
	ParseState *pstate = make_parsestate(NULL);
	Relation	rel = table_open(tag_table, AccessShareLock);
	ParseNamespaceItem *nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
															   NULL, false, true);
	AttrNumber	name_att = get_attnum(tag_table, "name");
	AttrNumber	time_att = get_attnum(tag_table, "job_submission_time");
	AttrNumber	user_att = get_attnum(tag_table, "job_user_name");
	Oid			coll = column_collation(tag_table, name_att);
	Query	   *q = makeNode(Query);
	TargetEntry *te;
	SortGroupClause *sort = makeNode(SortGroupClause);
	List	   *tests;
	SubLink    *sub;

	table_close(rel, NoLock);
	tests = list_make1(make_opclause(TextEqualOperator, BOOLOID, false,
									 (Expr *) makeVar(1, name_att, TEXTOID, -1, coll, 0),
									 (Expr *) copyObject(tag), InvalidOid, coll));
	if (user != NULL)
	{
		tests = lappend(tests, make_opclause(TextEqualOperator, BOOLOID, false,
											 (Expr *) makeVar(1, user_att, TEXTOID, -1,
															  column_collation(tag_table, user_att), 0),
											 (Expr *) copyObject(user), InvalidOid,
											 column_collation(tag_table, user_att)));
	}
	{
		ListCell   *lc;

		foreach(lc, tests)
			set_opfuncid((OpExpr *) lfirst(lc));
	}
	/* read on paidb's account: the IN's own checks are kept (tag_order_test) */
	paidb_rte_unchecked(q, nsitem->p_rte);

	q->commandType = CMD_SELECT;
	q->querySource = QSRC_ORIGINAL;
	q->canSetTag = true;
	q->rtable = pstate->p_rtable;
	q->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), (Node *) make_andclause(tests));
	linitial_node(RangeTblRef, q->jointree->fromlist)->rtindex = 1;
	te = makeTargetEntry((Expr *) makeVar(1, time_att, TIMESTAMPTZOID, -1, InvalidOid, 0),
						 1, pstrdup("job_submission_time"), false);
	te->ressortgroupref = 1;
	q->targetList = list_make1(te);
	sort->tleSortGroupRef = 1;
	sort->eqop = eqop;
	sort->sortop = sortop;
	/*
	 * NULLS FIRST newest first, as DESC orders by default: the order of the
	 * tag index read backward (the column is NOT NULL, but the planner
	 * matches the index's order, not the constraint; the other NULLS order
	 * sorted all of the tag's rows for each of these).
	 */
	sort->nulls_first = newest_first;
	sort->hashable = false;
	q->sortClause = list_make1(sort);
	q->limitOffset = (Node *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64),
										Int64GetDatum(n - 1), false, FLOAT8PASSBYVAL);
	q->limitCount = (Node *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64),
									   Int64GetDatum(1), false, FLOAT8PASSBYVAL);
	q->limitOption = LIMIT_OPTION_COUNT;
	free_parsestate(pstate);

	sub = makeNode(SubLink);
	sub->subLinkType = EXPR_SUBLINK;
	sub->subLinkId = 0;
	sub->subselect = (Node *) q;
	sub->location = -1;
	return sub;
}

/*
 * Several tags: the tag index gives each tag's jobs in submission order but
 * not their union without duplicates, so PostgreSQL walks every job newest
 * first and probes its tags (10-16 ms for two tags at a million jobs).  When
 * the page filters on nothing but the tags (and the user), the n = offset +
 * limit jobs it shows are no older than the n-th newest job of any one of
 * the tags: that tag alone gives n jobs of the page's set at or after its
 * n-th.  So `job_submission_time >= COALESCE(GREATEST(<each tag's n-th
 * time>), '-infinity')` (`<=`, LEAST and 'infinity' oldest first) keeps
 * every job of the page and leaves a few rows of each tag to read.  Returns
 * that test, or NULL where the page does not allow it.
 */
static Expr *
tags_bound(Query *query, List *arms, SubLink *in, Node *user_arm, Node *quals, TagViews *v,
		   Const **user_out)
{
	List	   *tags = bounded_tag_names(quals, v->tag_table);
	Const	   *user = NULL;
	int64		offset = constant_count(query->limitOffset);
	int64		count = constant_count(query->limitCount);
	Oid			lt;
	Oid			eq;
	Oid			gt;
	bool		hashable;
	SortGroupClause *first = linitial_node(SortGroupClause, query->sortClause);
	bool		newest_first;
	MinMaxExpr *bound = makeNode(MinMaxExpr);
	CoalesceExpr *coalesce = makeNode(CoalesceExpr);
	ListCell   *lc;
	Oid			cmp;
	Expr	   *test;

	if (tags == NIL || offset < 0 || count < 1 || offset > PG_INT64_MAX - count ||
		query->limitOption != LIMIT_OPTION_COUNT || query->hasAggs || query->hasWindowFuncs ||
		query->hasTargetSRFs || query->groupClause != NIL || query->groupingSets != NIL ||
		query->havingQual != NULL || query->distinctClause != NIL ||
		query->setOperations != NULL || list_length(query->jointree->fromlist) != 1)
		return NULL;
	/* nothing but the tags IN and the user's equality may filter the page */
	foreach(lc, arms)
		if (lfirst(lc) != (void *) in && lfirst(lc) != (void *) user_arm)
			return NULL;
	if (user_arm != NULL)
	{
		OpExpr	   *ueq = (OpExpr *) user_arm;
		Node	   *value = IsA(linitial(ueq->args), Var) ? lsecond(ueq->args) : linitial(ueq->args);

		if (!IsA(value, Const) || ((Const *) value)->consttype != TEXTOID)
			return NULL;
		user = (Const *) value;
	}
	get_sort_group_operators(TIMESTAMPTZOID, true, true, true, &lt, &eq, &gt, &hashable);
	if (first->sortop == gt)
		newest_first = true;
	else if (first->sortop == lt)
		newest_first = false;
	else
		return NULL;

	bound->minmaxtype = TIMESTAMPTZOID;
	bound->minmaxcollid = InvalidOid;
	bound->inputcollid = InvalidOid;
	bound->op = newest_first ? IS_GREATEST : IS_LEAST;
	bound->location = -1;
	foreach(lc, tags)
		bound->args = lappend(bound->args,
							  nth_tag_time(v->tag_table, (Const *) lfirst(lc), user, offset + count,
										   newest_first ? gt : lt, eq, newest_first));
	coalesce->coalescetype = TIMESTAMPTZOID;
	coalesce->coalescecollid = InvalidOid;
	coalesce->args = list_make2(bound,
								makeConst(TIMESTAMPTZOID, -1, InvalidOid, sizeof(TimestampTz),
										  TimestampTzGetDatum(newest_first ? DT_NOBEGIN : DT_NOEND),
										  false, FLOAT8PASSBYVAL));
	coalesce->location = -1;

	cmp = OpernameGetOprid(list_make2(makeString("pg_catalog"), makeString(newest_first ? ">=" : "<=")),
						   TIMESTAMPTZOID, TIMESTAMPTZOID);
	if (!OidIsValid(cmp))
		return NULL;
	test = make_opclause(cmp, BOOLOID, false,
						 (Expr *) makeVar(1, get_attnum(v->tag_table, "job_submission_time"),
										  TIMESTAMPTZOID, -1, InvalidOid, 0),
						 (Expr *) coalesce, InvalidOid, InvalidOid);
	set_opfuncid((OpExpr *) test);
	*user_out = user;
	return test;
}

/*
 * `name = ANY (ARRAY(SELECT framework_name FROM paidb.tag WHERE <the IN's
 * filter> AND <bound> [AND job_user_name = <user>]))`: the jobs of a
 * bounded page, a few per tag, as an array.  Exact as the bound is (the
 * same rows as the IN, less tag rows older than every job of the page);
 * the array and not a join because the planner multiplies the
 * selectivities of name and time as if independent, expects one row from
 * a join with the tags, and for a common tag hashed all of them against a
 * scan of every job (150 ms at 100,000 jobs with a tag on half); an array
 * of a page's names it looks up by primary key.
 */
static Node *
bounded_names(Var *name, Node *quals, Expr *bound, Const *user, List *checks, TagViews *v)
{
	ParseState *pstate = make_parsestate(NULL);
	Relation	rel = table_open(v->tag_table, AccessShareLock);
	ParseNamespaceItem *nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
															   NULL, false, true);
	AttrNumber	fw = get_attnum(v->tag_table, "framework_name");
	Query	   *q = makeNode(Query);
	List	   *tests = list_make2(quals, bound);
	SubLink    *array = makeNode(SubLink);
	ScalarArrayOpExpr *any = makeNode(ScalarArrayOpExpr);
	Oid			type;
	int32		typmod;
	Oid			coll;

	table_close(rel, NoLock);
	get_atttypetypmodcoll(v->tag_table, fw, &type, &typmod, &coll);
	if (user != NULL)
	{
		AttrNumber	ua = get_attnum(v->tag_table, "job_user_name");
		Oid			ucoll = column_collation(v->tag_table, ua);
		OpExpr	   *ueq = (OpExpr *) make_opclause(TextEqualOperator, BOOLOID, false,
												   (Expr *) makeVar(1, ua, TEXTOID, -1, ucoll, 0),
												   (Expr *) copyObject(user), InvalidOid, ucoll);

		set_opfuncid(ueq);
		tests = lappend(tests, ueq);
	}
	paidb_rte_unchecked(q, nsitem->p_rte);
	q->commandType = CMD_SELECT;
	q->querySource = QSRC_ORIGINAL;
	q->canSetTag = true;
	q->rtable = pstate->p_rtable;
	paidb_append_checks(q, checks);
	q->jointree = makeFromExpr(list_make1(makeNode(RangeTblRef)), (Node *) make_andclause(tests));
	linitial_node(RangeTblRef, q->jointree->fromlist)->rtindex = 1;
	q->targetList = list_make1(makeTargetEntry((Expr *) makeVar(1, fw, type, typmod, coll, 0),
											   1, pstrdup("framework_name"), false));
	q->hasSubLinks = true;
	free_parsestate(pstate);

	array->subLinkType = ARRAY_SUBLINK;
	array->subLinkId = 0;
	array->subselect = (Node *) q;
	array->location = -1;

	any->opno = TextEqualOperator;
	any->useOr = true;
	any->inputcollid = name->varcollid;
	any->args = list_make2(copyObject(name), array);
	any->location = -1;
	set_sa_opfuncid(any);
	return (Node *) any;
}

/*
 * The test on paidb.tag that selects the jobs the tags IN `in` selects, in
 * submission order (see the top of the file), or NULL where it cannot be
 * written.
 */
static Node *
tag_order_test(Query *query, List *arms, SubLink *in, TagViews *v)
{
	Query	   *sel = (Query *) in->subselect;
	Var		   *name = linitial_node(Var, ((OpExpr *) in->testexpr)->args);
	Var		   *time;
	Var		   *user = NULL;
	RemapContext cx;
	Node	   *quals;
	ListCell   *lc;
	Oid			time_eq;
	ParseState *pstate;
	Relation	rel;
	ParseNamespaceItem *nsitem;
	Query	   *q;
	RangeTblRef *rtr;
	List	   *tests;
	int			resno;
	SubLink    *sub;
	Node	   *user_arm = NULL;
	Expr	   *bound;
	Const	   *user_const = NULL;
	List	   *checks = NIL;

	if (sel->hasSubLinks || sel->jointree->quals == NULL ||
		name->varlevelsup != 0 || name->varattno <= 0)
		return NULL;
	/* what reading the IN's openpai.tags checks, kept below */
	if (!paidb_collect_checks(sel, linitial_node(RangeTblEntry, sel->rtable), &checks))
		return NULL;
	cx.view = v->tags;
	cx.table = v->tag_table;
	cx.ok = true;
	quals = remap_mutator(copyObject(sel->jointree->quals), &cx);
	if (!cx.ok)
		return NULL;

	time_eq = OpernameGetOprid(list_make2(makeString("pg_catalog"), makeString("=")),
							   TIMESTAMPTZOID, TIMESTAMPTZOID);
	time = frameworks_column(query, name->varno, v->frameworks, "submissionTime", TIMESTAMPTZOID);
	if (!OidIsValid(time_eq) || time == NULL)
		return NULL;
	foreach(lc, arms)
		if (is_user_equality((Node *) lfirst(lc), query, name->varno, v->frameworks))
		{
			user_arm = (Node *) lfirst(lc);
			user = frameworks_column(query, name->varno, v->frameworks, "userName", TEXTOID);
			break;
		}

	/*
	 * A page of the tags alone (and a user): bounded by the tags' n-th
	 * times, its jobs an array.  Otherwise several tags without a user run
	 * as written: merging the tags' jobs in one IN measured slower (14-16
	 * ms against 10-11 for two tags at a million jobs).
	 */
	bound = tags_bound(query, arms, in, user_arm, quals, v, &user_const);
	if (bound != NULL)
		return bounded_names(name, quals, bound, user_const, checks, v);
	if (!IsA(sel->jointree->quals, OpExpr) && user == NULL)
		return NULL;

	pstate = make_parsestate(NULL);
	rel = table_open(v->tag_table, AccessShareLock);
	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock, NULL, true, true);
	table_close(rel, NoLock);

	q = makeNode(Query);
	q->commandType = CMD_SELECT;
	q->querySource = QSRC_ORIGINAL;
	q->canSetTag = true;
	/*
	 * paidb.tag is read on paidb's account; the IN's openpai.tags and what
	 * its expansion checks stay in the range table, unreferenced, so that
	 * the caller's rights are checked exactly as before.
	 */
	paidb_rte_unchecked(q, nsitem->p_rte);
	q->rtable = pstate->p_rtable;
	paidb_append_checks(q, checks);
	rtr = makeNode(RangeTblRef);
	rtr->rtindex = 1;
	q->jointree = makeFromExpr(list_make1(rtr), quals);

	tests = NIL;
	resno = 0;
	{
		const char *columns[3] = {"framework_name", "job_submission_time", "job_user_name"};
		Var		   *outer[3] = {name, time, user};
		Oid			ops[3] = {TextEqualOperator, time_eq, TextEqualOperator};
		int			i;

		for (i = 0; i < 3 && outer[i] != NULL; i++)
		{
			AttrNumber	a = get_attnum(v->tag_table, columns[i]);
			Oid			type;
			int32		typmod;
			Oid			coll;

			get_atttypetypmodcoll(v->tag_table, a, &type, &typmod, &coll);
			if (type != outer[i]->vartype || coll != outer[i]->varcollid)
				return NULL;
			q->targetList = lappend(q->targetList,
									makeTargetEntry((Expr *) makeVar(1, a, type, typmod, coll, 0),
													++resno, pstrdup(columns[i]), false));
			tests = lappend(tests, equals_column(copyObject(outer[i]), resno, ops[i]));
		}
	}
	free_parsestate(pstate);

	sub = makeNode(SubLink);
	sub->subLinkType = ANY_SUBLINK;
	sub->subLinkId = 0;
	sub->testexpr = (Node *) make_andclause(tests);
	sub->operName = list_make1(makeString("="));
	sub->subselect = (Node *) q;
	sub->location = -1;
	return (Node *) sub;
}

/*
 * Whether a query with a LIMIT and an ORDER BY sorts first by
 * "submissionTime" of the frameworks view.
 */
static bool
is_submission_order_page(Query *query, TagViews *v)
{
	SortGroupClause *first;
	Node	   *expr;

	first = linitial_node(SortGroupClause, query->sortClause);
	expr = get_sortgroupclause_expr(first, query->targetList);
	return paidb_is_column_of(expr, query, v->frameworks, "submissionTime");
}

/*
 * Put the first tags IN of a page in submission order onto paidb.tag's
 * index (read on paidb's account, its rows unfiltered by row security).
 */
static void
order_in_query(Query *query, TagViews *v)
{
	List	   *arms;
	ListCell   *lc;

	if (query->commandType != CMD_SELECT || query->limitCount == NULL || query->sortClause == NIL)
		return;
	arms = make_ands_implicit((Expr *) query->jointree->quals);
	foreach(lc, arms)
		if (IsA(lfirst(lc), SubLink) && ((SubLink *) lfirst(lc))->subLinkType == ANY_SUBLINK)
			break;
	if (lc == NULL || !resolve_views(v) || !OidIsValid(v->tag_table) ||
		!is_submission_order_page(query, v) || paidb_has_row_security(v->tag_table))
		return;
	foreach(lc, arms)
	{
		SubLink    *in = paidb_tags_in_sublink((Node *) lfirst(lc), query, v->frameworks, v->tags);
		Node	   *test;

		if (in == NULL)
			continue;
		test = tag_order_test(query, arms, in, v);
		if (test != NULL)
		{
			lfirst(lc) = test;
			query->jointree->quals = (Node *) make_ands_explicit(arms);
		}
		return;
	}
}

static bool
drop_walker(Node *node, TagViews *v)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;

		if (is_rewritable_level(query, v))
		{
			List	   *checks = NIL;

			if (drop_in_query(query, v, &checks))
				order_in_query(query, v);
			/* after both: they look at the level's one range-table entry */
			paidb_append_checks(query, checks);
		}
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
