/*
 * openpai_counts.c — rest-server's job counts through the openpai views,
 * answered from paidb's count table (SPEC §10, docs/queries.md).
 *
 * rest-server asks for the total with every page of the job list:
 *
 *   SELECT count(*) AS "count" FROM "frameworks" AS "framework"
 *    WHERE "framework"."userName" IN (...) AND "framework"."state" IN (...)
 *
 * Through the view that is a scan of every matching job (160 ms for all of
 * a million).  paidb keeps exact counts per (user, virtual cluster, state,
 * priority, archived) in the same transactions that change the jobs, so
 * when a count's filter reads nothing but those columns, its result is the
 * sum of the matching counts: for any filter P over those columns, the jobs
 * satisfying P are exactly the jobs of the keys satisfying P.  This hook
 * rewrites such a query, right after parse analysis, into
 *
 *   SELECT openpai.sum_counts(n) AS "count" FROM openpai.framework_counts
 *    WHERE <the same filter on the same columns>
 *
 * A count that also excludes the jobs carrying given tags, as rest-server's
 * tagsNotContain does,
 *
 *   ... WHERE <filter> AND "framework"."name" NOT IN
 *           (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN (...))
 *
 * visits every job to probe the excluded set (140 ms at a million).  It is
 * the jobs matching the filter less those of them that carry the tags, so
 * it becomes
 *
 *   SELECT (<the count of the filter, rewritten as above>)
 *        - (SELECT count(*) FROM "frameworks" WHERE <filter> AND "name" IN (...))
 *
 * exact because a job's name and a tag's frameworkName are never NULL (so
 * NOT IN is the complement of IN) and both sub-selects read one snapshot.
 *
 * Anything else (another column, another sub-select, a GROUP BY, ...) is
 * left alone, as is every query when paidb.openpai_count_rewrite is off.
 * What makes each form exact, besides the shape (SPEC §10):
 *
 * - The filter cannot fail or act (rewrite_guard.c): it is evaluated on
 *   every count key, including keys whose jobs have all moved on (a zero
 *   sum, or a delta row of a job that left and came back), where on the
 *   jobs it never was.  Where it could fail there, no rewrite.
 * - Privileges: the view's check and those of its expansion are kept in
 *   the rewritten query, and the counts are read unchecked
 *   (rewrite_perms.c): the same checks, for whoever runs it.
 * - Row security: a count of the rows a policy shows is not a sum of
 *   counts; no rewrite where any table involved has it enabled.
 * - Never inside a stored definition (rewrite_guard.c).
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/sysattr.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "access/htup_details.h"
#include "utils/syscache.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "guc.h"
#include "openpai_counts.h"
#include "openpai_tags.h"
#include "rewrite_guard.h"
#include "rewrite_perms.h"

/* the count key's columns in the openpai views (the names both views use) */
static const char *const key_columns[] = {
	"userName", "virtualCluster", "state", "jobPriority", "archived"
};

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;

/*
 * The counts as a sub-query, read on paidb's own account: the keys with
 * the frameworks view's column names, and n.  (openpai.framework_counts is
 * the same for a reader, but reading it would check the reader's rights to
 * the count tables, which the query as written does not.)
 */
static const char *const counts_sql =
"SELECT openpai.sum_counts(c.n) FROM ("
"SELECT user_name AS \"userName\", virtual_cluster AS \"virtualCluster\", state,"
" job_priority AS \"jobPriority\", archived, n FROM paidb.job_count "
"UNION ALL "
"SELECT user_name, virtual_cluster, state, job_priority, archived, n::pg_catalog.int8"
" FROM paidb.job_count_delta) c";

/* What a rewrite needs to know about the views and the counts. */
typedef struct CountTarget
{
	Oid			frameworks;		/* openpai.frameworks */
	Oid			tags;			/* openpai.tags */
	RangeTblEntry *view;		/* the query's openpai.frameworks */
	List	   *checks;			/* what the query as written checks */
	AttrNumber	map[MaxHeapAttributeNumber + 1];	/* frameworks attno ->
													 * counts column (0: none) */
} CountTarget;

/* count(*), or count(c) of the view's never-null name column */
static bool
is_count_of_jobs(Node *node, Oid frameworks)
{
	Aggref	   *agg;
	TargetEntry *arg;
	Var		   *var;
	char	   *attname;

	if (!IsA(node, Aggref))
		return false;
	agg = (Aggref *) node;
	if (agg->aggdistinct != NIL || agg->aggorder != NIL || agg->aggfilter != NULL ||
		agg->aggdirectargs != NIL || agg->agglevelsup != 0 || agg->aggkind != AGGKIND_NORMAL)
		return false;
	if (agg->aggfnoid == F_COUNT_ && agg->aggstar)
		return true;
	if (agg->aggfnoid != F_COUNT_ANY || list_length(agg->args) != 1)
		return false;
	arg = linitial_node(TargetEntry, agg->args);
	if (!IsA(arg->expr, Var))
		return false;
	var = (Var *) arg->expr;
	if (var->varno != 1 || var->varlevelsup != 0 || var->varattno <= 0)
		return false;
	attname = get_attname(frameworks, var->varattno, true);
	return attname != NULL && strcmp(attname, "name") == 0;
}

/* The shape: SELECT count(*) FROM one relation WHERE ..., nothing more. */
static bool
is_count_shape(Query *query)
{
	RangeTblEntry *rte;
	TargetEntry *te;

	if (query->commandType != CMD_SELECT || query->utilityStmt != NULL ||
		query->querySource != QSRC_ORIGINAL || !query->hasAggs ||
		query->hasWindowFuncs || query->hasTargetSRFs ||
		query->hasDistinctOn || query->hasRecursive || query->hasModifyingCTE ||
		query->hasForUpdate || query->cteList != NIL ||
		query->groupClause != NIL || query->groupingSets != NIL ||
		query->havingQual != NULL || query->windowClause != NIL ||
		query->distinctClause != NIL || query->sortClause != NIL ||
		query->limitCount != NULL || query->limitOffset != NULL ||
		query->setOperations != NULL || query->rowMarks != NIL ||
		list_length(query->rtable) != 1 || list_length(query->targetList) != 1 ||
		query->jointree == NULL || list_length(query->jointree->fromlist) != 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef) ||
		linitial_node(RangeTblRef, query->jointree->fromlist)->rtindex != 1)
		return false;
	rte = linitial_node(RangeTblEntry, query->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_VIEW || rte->tablesample != NULL)
		return false;
	te = linitial_node(TargetEntry, query->targetList);
	return !te->resjunk && IsA(te->expr, Aggref);
}

/*
 * The views of paidb_openpai, if rte names its frameworks view; collects
 * what reading it checks, and false where row security applies to any
 * table involved (the view's or the counts').
 */
static bool
find_target(Query *query, RangeTblEntry *rte, CountTarget *t)
{
	Oid			nsp = get_namespace_oid("openpai", true);
	Oid			ext;
	Oid			paidb_nsp;
	Oid			job_count;
	Oid			job_count_delta;
	int			i;

	if (!OidIsValid(nsp))
		return false;
	t->frameworks = get_relname_relid("frameworks", nsp);
	if (t->frameworks != rte->relid)
		return false;
	t->tags = get_relname_relid("tags", nsp);
	ext = get_extension_oid("paidb_openpai", true);
	paidb_nsp = get_namespace_oid("paidb", true);
	if (!OidIsValid(ext) || !OidIsValid(paidb_nsp) ||
		getExtensionOfObject(RelationRelationId, t->frameworks) != ext)
		return false;
	if (OidIsValid(t->tags) && getExtensionOfObject(RelationRelationId, t->tags) != ext)
		t->tags = InvalidOid;
	job_count = get_relname_relid("job_count", paidb_nsp);
	job_count_delta = get_relname_relid("job_count_delta", paidb_nsp);
	if (!OidIsValid(job_count) || !OidIsValid(job_count_delta) ||
		paidb_has_row_security(job_count) || paidb_has_row_security(job_count_delta))
		return false;
	t->checks = NIL;
	t->view = rte;
	/* the key columns' places in counts_sql's sub-query, in key_columns' order */
	memset(t->map, 0, sizeof(t->map));
	for (i = 0; i < (int) lengthof(key_columns); i++)
	{
		AttrNumber	from = get_attnum(t->frameworks, key_columns[i]);

		if (from <= 0)
			return false;
		t->map[from] = i + 1;
	}
	return true;
}

/*
 * The checks the query as written makes, collected only for a count that
 * is about to be rewritten (a copy of each view's definition is walked):
 * false where row security applies to a table under the view.
 */
static bool
collect_view_checks(Query *query, CountTarget *t)
{
	t->checks = NIL;
	return paidb_collect_checks(query, t->view, &t->checks);
}

/*
 * The counts sub-query, if its key columns have the view's types, typmods
 * and collations (t->map, from find_target, names their places), or NULL.
 */
static Query *
counts_subquery(CountTarget *t)
{
	Query	   *count = paidb_internal_select(counts_sql);
	Query	   *keys = linitial_node(RangeTblEntry, count->rtable)->subquery;
	int			i;

	for (i = 0; i < (int) lengthof(key_columns); i++)
	{
		AttrNumber	from = get_attnum(t->frameworks, key_columns[i]);
		TargetEntry *te = list_nth_node(TargetEntry, keys->targetList, t->map[from] - 1);
		Oid			ftype;
		int32		fmod;
		Oid			fcoll;

		get_atttypetypmodcoll(t->frameworks, from, &ftype, &fmod, &fcoll);
		if (te->resname == NULL || strcmp(te->resname, key_columns[i]) != 0 ||
			exprType((Node *) te->expr) != ftype || exprTypmod((Node *) te->expr) != fmod ||
			exprCollation((Node *) te->expr) != fcoll)
			return NULL;
	}
	return count;
}

/* Whether a filter reads anything of the view besides count-key columns. */
static bool
reads_beyond_key(Node *node, CountTarget *t)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		/* whole-row and system columns are not key columns */
		return !(var->varno == 1 && var->varlevelsup == 0 &&
				 var->varattno > 0 && var->varattno <= MaxHeapAttributeNumber &&
				 t->map[var->varattno] != 0);
	}
	if (IsA(node, SubLink) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, GroupingFunc) || IsA(node, SubPlan))
		return true;
	return expression_tree_walker(node, reads_beyond_key, (void *) t);
}

/* The same filter on openpai.framework_counts' columns. */
static Node *
map_columns(Node *node, CountTarget *t)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) copyObject(node);

		var->varattno = t->map[var->varattno];
		var->varattnosyn = var->varattno;
		return (Node *) var;
	}
	return expression_tree_mutator(node, map_columns, (void *) t);
}

/*
 * Make query (a count over openpai.frameworks whose filter reads only the
 * count key and cannot fail) the sum of the matching counts.  False, with
 * nothing changed, if it is not one.  The caller keeps the checks.
 */
static bool
rewrite_key_count(Query *query, CountTarget *t)
{
	TargetEntry *te = linitial_node(TargetEntry, query->targetList);
	Query	   *count;
	TargetEntry *sum;
	Node	   *quals = query->jointree->quals;

	if (reads_beyond_key(quals, t) || contain_volatile_functions(quals) ||
		!paidb_expr_cannot_raise(quals))
		return false;
	/* the costlier tests only for a count that can be rewritten */
	if (!collect_view_checks(query, t))
		return false;
	count = counts_subquery(t);
	if (count == NULL)
		return false;
	sum = linitial_node(TargetEntry, count->targetList);
	sum->resname = te->resname;
	sum->resorigtbl = InvalidOid;
	sum->resorigcol = 0;

	query->rtable = count->rtable;
	query->jointree->quals = map_columns(quals, t);
	query->targetList = list_make1(sum);
	return true;
}

/*
 * If arm is `"name" NOT IN (SELECT "frameworkName" FROM openpai.tags ...)`,
 * uncorrelated, with nothing that could add a NULL to the set: its IN
 * sub-link.
 */
static SubLink *
tags_not_in(Node *arm, Query *outer, CountTarget *t)
{
	BoolExpr   *not;

	if (!IsA(arm, BoolExpr) || ((BoolExpr *) arm)->boolop != NOT_EXPR)
		return NULL;
	not = (BoolExpr *) arm;
	if (list_length(not->args) != 1)
		return NULL;
	return paidb_tags_in_sublink(linitial(not->args), outer, t->frameworks, t->tags);
}

/* An uncorrelated scalar sub-select of query. */
static SubLink *
scalar_sublink(Query *query)
{
	SubLink    *sl = makeNode(SubLink);

	sl->subLinkType = EXPR_SUBLINK;
	sl->subLinkId = 0;
	sl->testexpr = NULL;
	sl->operName = NIL;
	sl->subselect = (Node *) query;
	sl->location = -1;
	return sl;
}

/*
 * `SELECT count(*) FROM (SELECT DISTINCT "frameworkName" FROM openpai.tags
 * WHERE <the IN's filter>)`: the jobs that carry the tags of `in`, counted
 * on the tags alone.  Exact because every tag has its job (paidb refuses a
 * tag without one, and a job is deleted with its tags: docs/queries.md),
 * each job has one name, and the IN's sub-select is uncorrelated.  The
 * view stays in the sub-select, so reading it needs the rights it did.
 */
static Query *
tagged_jobs_count(SubLink *in)
{
	Query	   *sub = copyObject((Query *) in->subselect);
	TargetEntry *name = linitial_node(TargetEntry, sub->targetList);
	SortGroupClause *distinct = makeNode(SortGroupClause);
	Query	   *q = makeNode(Query);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	RangeTblRef *rtr = makeNode(RangeTblRef);
	Aggref	   *count = makeNode(Aggref);
	Oid			lt;
	Oid			eq;
	bool		hashable;

	get_sort_group_operators(exprType((Node *) name->expr), true, true, false,
							 &lt, &eq, NULL, &hashable);
	name->ressortgroupref = 1;
	distinct->tleSortGroupRef = 1;
	distinct->eqop = eq;
	distinct->sortop = lt;
	distinct->nulls_first = false;
	distinct->hashable = hashable;
	sub->distinctClause = list_make1(distinct);
	sub->sortClause = NIL;		/* an order means nothing to a count */

	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = sub;
	rte->eref = makeAlias("tagged", list_make1(makeString(pstrdup(name->resname ? name->resname : "frameworkName"))));
	rte->inFromCl = true;
	rtr->rtindex = 1;

	count->aggfnoid = F_COUNT_;
	count->aggtype = INT8OID;
	count->aggstar = true;
	count->aggkind = AGGKIND_NORMAL;
	count->aggsplit = AGGSPLIT_SIMPLE;
	count->aggno = -1;
	count->aggtransno = -1;
	count->location = -1;

	q->commandType = CMD_SELECT;
	q->querySource = QSRC_ORIGINAL;
	q->canSetTag = true;
	q->rtable = list_make1(rte);
	q->jointree = makeFromExpr(list_make1(rtr), NULL);
	q->targetList = list_make1(makeTargetEntry((Expr *) count, 1, pstrdup("count"), false));
	q->hasAggs = true;
	return q;
}

/*
 * SELECT (value) in place of the count; no range table of its own (the
 * caller appends the checks of the query as written).
 */
static void
replace_with(Query *query, Node *value)
{
	TargetEntry *te = linitial_node(TargetEntry, query->targetList);

	te->expr = (Expr *) value;
	te->resorigtbl = InvalidOid;
	te->resorigcol = 0;
	query->rtable = NIL;
	query->jointree = makeFromExpr(NIL, NULL);
	query->hasAggs = false;
	query->hasSubLinks = true;
}

/*
 * Whether a tags IN may be counted another way: its filter cannot fail
 * (it may be evaluated on other tag rows, in another order) and no table
 * under openpai.tags has row security.
 */
static bool
tags_in_is_countable(SubLink *in)
{
	Query	   *sel = (Query *) in->subselect;
	List	   *ignored = NIL;

	return paidb_collect_checks(sel, linitial_node(RangeTblEntry, sel->rtable), &ignored);
}

/*
 * Whether the database enforces that every tag has its job: paidb.tag's
 * validated foreign key to paidb.framework (paidb 0.3; a 0.2 database
 * running this library before ALTER EXTENSION ... UPDATE has none, and may
 * hold tags without their job).  Counting the jobs that carry tags on the
 * tags alone is exact only then.
 */
static bool
every_tag_has_its_job(void)
{
	Oid			nsp = get_namespace_oid("paidb", true);
	Oid			tag = OidIsValid(nsp) ? get_relname_relid("tag", nsp) : InvalidOid;
	Oid			framework = OidIsValid(nsp) ? get_relname_relid("framework", nsp) : InvalidOid;
	Oid			fk;
	HeapTuple	tuple;
	bool		enforced;

	if (!OidIsValid(tag) || !OidIsValid(framework))
		return false;
	fk = get_relation_constraint_oid(tag, "tag_framework_name_fkey", true);
	if (!OidIsValid(fk))
		return false;
	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(fk));
	if (!HeapTupleIsValid(tuple))
		return false;
	enforced = ((Form_pg_constraint) GETSTRUCT(tuple))->contype == CONSTRAINT_FOREIGN &&
		((Form_pg_constraint) GETSTRUCT(tuple))->confrelid == framework &&
		((Form_pg_constraint) GETSTRUCT(tuple))->convalidated;
	ReleaseSysCache(tuple);
	return enforced;
}

/*
 * A count whose filter is one tags IN and nothing else: the jobs carrying
 * the tags, counted on the tags (a scan of the tag's index, where counting
 * the jobs that carry them probed every job: 150 ms for two tags at a
 * million jobs).
 */
static bool
rewrite_tagged_count(Query *query, CountTarget *t)
{
	List	   *arms = make_ands_implicit((Expr *) query->jointree->quals);
	SubLink    *in;

	if (list_length(arms) != 1)
		return false;
	in = paidb_tags_in_sublink((Node *) linitial(arms), query, t->frameworks, t->tags);
	if (in == NULL || !tags_in_is_countable(in) || !every_tag_has_its_job() ||
		!collect_view_checks(query, t))
		return false;
	replace_with(query, (Node *) scalar_sublink(tagged_jobs_count(in)));
	return true;
}

/*
 * A count whose filter is count-key conditions and one tags NOT IN:
 * the key count less the count of the jobs matching it that carry the tags.
 */
static bool
rewrite_complement_count(Query *query, CountTarget *t)
{
	List	   *arms = make_ands_implicit((Expr *) query->jointree->quals);
	List	   *key_arms = NIL;
	SubLink    *in = NULL;
	ListCell   *lc;
	Query	   *keyed;
	Query	   *carrying;

	foreach(lc, arms)
	{
		Node	   *arm = (Node *) lfirst(lc);
		SubLink    *sub = tags_not_in(arm, query, t);

		if (sub != NULL)
		{
			if (in != NULL)
				return false;	/* one such arm only */
			in = sub;
		}
		else
			key_arms = lappend(key_arms, arm);
	}
	if (in == NULL || !tags_in_is_countable(in))
		return false;

	/* the jobs matching the key conditions, from the counts */
	keyed = copyObject(query);
	keyed->jointree->quals = key_arms == NIL ? NULL : (Node *) make_ands_explicit(copyObject(key_arms));
	keyed->hasSubLinks = false;
	if (!rewrite_key_count(keyed, t))
		return false;

	/* those of them that carry the tags, counted (on the tags alone for all jobs) */
	if (key_arms == NIL && every_tag_has_its_job())
		carrying = tagged_jobs_count(in);
	else
	{
		carrying = copyObject(query);
		carrying->jointree->quals = key_arms == NIL ? copyObject((Node *) in) :
			(Node *) make_ands_explicit(lappend(copyObject(key_arms), copyObject(in)));
		carrying->hasSubLinks = true;
	}

	/* SELECT (keyed) - (carrying) */
	replace_with(query, (Node *) makeFuncExpr(F_INT8MI, INT8OID,
											  list_make2(scalar_sublink(keyed), scalar_sublink(carrying)),
											  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL));
	return true;
}

/* Rewrite the count if it has the shape and the filter allows it. */
static void
rewrite_count(Query *query)
{
	RangeTblEntry *rte = linitial_node(RangeTblEntry, query->rtable);
	TargetEntry *te = linitial_node(TargetEntry, query->targetList);
	CountTarget t;
	bool		done;

	/* the cheap test first: most aggregates over a view are not this */
	if (!is_count_of_jobs((Node *) te->expr, rte->relid) || !find_target(query, rte, &t))
		return;
	if (!query->hasSubLinks)
		done = rewrite_key_count(query, &t);
	else
		done = OidIsValid(t.tags) &&
			(rewrite_complement_count(query, &t) || rewrite_tagged_count(query, &t));
	if (done)
		paidb_append_checks(query, t.checks);
}

static void
counts_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	if (!paidb_rewrites_allowed())
		return;
	if (paidb_openpai_count_rewrite && is_count_shape(query))
		rewrite_count(query);
	if (paidb_openpai_tag_rewrite)
		paidb_openpai_drop_implied_tag_tests(query);
}

void
paidb_openpai_counts_init(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = counts_post_parse_analyze;
}
