"""Seeded generator of queries over paidb_openpai's views (stdlib only).

Each Item is what one check runs: the phase (which tables have row security
on), the role, statements before (PREPARE, CREATE TEMP VIEW, ...), one or
more main statements whose results are compared, and statements after.
'{ON}' and '{OFF}' in statements stand for the session's own value of the
rewrite settings and its opposite (stored definitions: made under one,
queried under the other).

The data (setup.sql): jobs c1..c140, one minute apart (submission times
are unique: ORDER BY "submissionTime" is total over one row per job),
users du0..du4 (c140: NULL), 'zz' only in paidb.job_count_delta (a key whose
count is zero), virtual clusters default/vc2/research, states WAITING,
RUNNING, SUCCEEDED, FAILED, priorities prod/test/NULL, tags a (every third
job) and b (every fifth).
"""
import random

USERS = ["du0", "du1", "du2", "du3", "du4"]
ALL_ROLES = USERS + ["zz"]
VCS = ["default", "vc2", "research"]
STATES = ["WAITING", "RUNNING", "SUCCEEDED", "FAILED"]
PRIOS = ["prod", "test"]
TAGS = ["a", "b"]

# phases: name -> tables with row security on
PHASES = {
    "plain": [],
    "rls_summary": ["paidb.job_summary"],
    "rls_counts": ["paidb.job_count", "paidb.job_count_delta"],
    "rls_tag": ["paidb.tag"],
    "rls_all": ["paidb.job_summary", "paidb.job_count", "paidb.job_count_delta", "paidb.tag", "paidb.framework"],
}
PHASE_WEIGHTS = [("plain", 5), ("rls_summary", 2), ("rls_counts", 2), ("rls_tag", 1), ("rls_all", 2)]
PLAIN_ROLES = [(None, 5), ("diff_all", 3), ("diff_noframework", 1), ("diff_notag", 1), ("du1", 1)]
RLS_ROLES = [(None, 1), ("diff_all", 1), ("diff_noframework", 0.5), ("du0", 2), ("du1", 2), ("du2", 2),
             ("du3", 1), ("du4", 1), ("zz", 1)]


class Main:
    def __init__(self, sql, ordered=False, explain=True):
        self.sql = sql
        self.ordered = ordered      # compare rows in order (the ORDER BY is total)
        self.explain = explain      # EXPLAIN it to see whether a rewrite fired


class Item:
    def __init__(self, kind, mains, pre=(), post=()):
        self.kind = kind
        self.mains = mains
        self.pre = list(pre)
        self.post = list(post)
        self.id = None
        self.phase = None
        self.role = None


def q(s):
    return "'" + s.replace("'", "''") + "'"


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, seq):
        return self.r.choice(seq)

    def wpick(self, pairs):
        tot = sum(w for _, w in pairs)
        x = self.r.uniform(0, tot)
        for v, w in pairs:
            x -= w
            if x <= 0:
                return v
        return pairs[-1][0]

    def chance(self, p):
        return self.r.random() < p

    # ---- relations and names -------------------------------------------
    def frameworks(self):
        """The frameworks relation as written and an alias (or None)."""
        return self.wpick([(('openpai.frameworks', None), 2), (('"frameworks"', '"framework"'), 3),
                           (('frameworks', 'f'), 2), (('openpai.frameworks', 'f'), 2)])

    def tags_rel(self):
        return self.pick(['openpai.tags', '"tags"', 'tags'])

    # ---- filters ----------------------------------------------------------
    def value(self, col):
        if col == '"userName"':
            return q(self.wpick([(self.pick(USERS), 6), ("zz", 1), ("nobody", 1), ("DU1", 1)]))
        if col == '"virtualCluster"':
            return q(self.wpick([(self.pick(VCS), 6), ("none", 1)]))
        if col == 'state':
            return q(self.wpick([(self.pick(STATES), 6), ("STOPPED", 1), ("running", 1)]))
        if col == '"jobPriority"':
            return q(self.wpick([(self.pick(PRIOS), 4), ("none", 1)]))
        raise ValueError(col)

    def values(self, col, n=None, null=False):
        n = n or self.r.randint(1, 3)
        vs = [self.value(col) for _ in range(n)]
        if null:
            vs.insert(self.r.randint(0, len(vs)), "NULL")
        return ", ".join(vs)

    def key_pred(self, a, depth=0, raising=None):
        """A predicate over the count key (userName, virtualCluster, state,
        jobPriority, archived): what the count rewrite takes."""
        col = self.pick(['"userName"', '"virtualCluster"', 'state', '"jobPriority"', 'archived'])
        c = a + col
        if col == 'archived':
            return self.pick([c, "NOT " + c, c + " = false", c + " IS TRUE", c + " <> true",
                              "coalesce(%s, false) = false" % c])
        k = self.r.randint(0, 22 if depth < 2 else 17)
        if k <= 4:
            return "%s IN (%s)" % (c, self.values(col))
        if k == 5:
            return "%s = %s" % (c, self.value(col))
        if k == 6:
            return "%s <> %s" % (c, self.value(col))
        if k == 7:
            return "%s IS %sNULL" % (c, self.pick(["", "NOT "]))
        if k == 8:
            v = self.value(col).strip("'")
            return "%s %s %s" % (c, self.pick(["LIKE", "ILIKE", "NOT LIKE", "NOT ILIKE", "~~", "~~*"]),
                                 q(self.pick(["%" + v[-1:] + "%", v[:2] + "%", "%" + v.upper()[1:], "_" + v[1:]])))
        if k == 9:
            return "%s COLLATE \"C\" %s %s" % (c, self.pick(["<", ">=", "=", "<>"]), self.value(col))
        if k == 10:
            return "%s NOT IN (%s)" % (c, self.values(col, null=self.chance(0.5)))
        if k == 11:
            return "%s IN (%s)" % (c, self.values(col, null=True))
        if k == 12:
            return "coalesce(%s, 'none') = %s" % (c, self.pick(["'none'", self.value(col)]))
        if k == 13:
            return "%s = ANY (ARRAY[%s])" % (c, self.values(col))
        if k == 14:
            return "upper(%s) = upper(%s)" % (c, self.value(col))
        if k == 15:
            return "%s COLLATE \"C\" ILIKE %s" % (c, q(self.pick(["du%", "DU%", "%1", "vc%", "%ING", "pro%"])))
        if k == 16:
            return "%s IS DISTINCT FROM %s" % (c, self.value(col))
        if k == 17:
            return "%s = current_user" % (a + '"userName"')
        if k in (18, 19):
            return "(%s OR %s)" % (self.key_pred(a, depth + 1), self.key_pred(a, depth + 1))
        if k == 20:
            return "NOT (%s)" % self.key_pred(a, depth + 1)
        if k == 21:
            return "%s IN (SELECT %s UNION ALL SELECT NULL)" % (c, self.value(col))
        return "(%s AND %s)" % (self.key_pred(a, depth + 1), self.key_pred(a, depth + 1))

    def raising_pred(self, a, page=False):
        """A filter that may raise, with one possible SQLSTATE (22012 or
        22P02): only the zero-count key's user (zz) or every user divides
        by zero; the users' names never cast to int."""
        c = a + '"userName"'
        if page:
            # in a page the rows evaluated depend on the plan (LIMIT): only
            # the filter that no job's row raises
            return "1/(length(%s)-2) <> 0" % c
        return self.pick([
            "1/(length(%s)-2) <> 0" % c,            # zz only: the zero-count key
            "1/(length(%s)-3) <> 0" % c,            # every named user
            "1/(length(coalesce(%s, 'xx'))-2) = 1" % c,   # zz and the NULL user
            "%s::int > 0" % c,
            "1/(CASE WHEN %sstate = 'FAILED' THEN 0 ELSE 1 END) = 1" % a,
        ])

    def other_pred(self, a):
        """Filters on other columns: counts the rewrite must leave alone."""
        return self.pick([
            "%sretries = 0" % a, "%s\"jobName\" LIKE '%%c1%%'" % a, "%sname = 'c9'" % a,
            "%sname COLLATE \"C\" < 'c5'" % a, "%s\"submissionTime\" > '2020-08-01 11:00+00'" % a,
            "%s\"completionTime\" IS NULL" % a, "random() < 2", "%s\"totalGpuNumber\" IS NULL" % a,
            "%sname ILIKE 'C1%%'" % a, "%s\"jobName\" = %s\"userName\"" % (a, a),
        ])

    def filt(self, a, raising=False, other=0.1):
        n = self.wpick([(0, 2), (1, 5), (2, 3), (3, 1)])
        ps = [self.key_pred(a) for _ in range(n)]
        if self.chance(other):
            ps.insert(self.r.randint(0, len(ps)), self.other_pred(a))
        if raising:
            ps.insert(self.r.randint(0, len(ps)), self.raising_pred(a))
        return ps

    def where(self, ps):
        return (" WHERE " + " AND ".join(ps)) if ps else ""

    def tag_in(self, a, rel=None, notin=False, nulls=False, extra=True):
        tags = self.wpick([(["a"], 3), (["b"], 2), (["a", "b"], 4), (["b", "a"], 1), (["c"], 1),
                           (["a", "nobody"], 1), (["a", "a"], 1)])
        rel = rel or self.tags_rel()
        tn = self.pick(["name", "%s.name" % rel.split(".")[-1]])
        cond = "%s IN (%s)" % (tn, ", ".join(q(t) for t in tags))
        if self.chance(0.1):
            cond = "%s = %s" % (tn, q(tags[0]))
        if extra and self.chance(0.08):
            cond += self.pick([' AND "insertedAt" IS NOT NULL', " AND name COLLATE \"C\" >= 'a'",
                               ' AND "frameworkName" LIKE \'c%\''])
        sub = 'SELECT "frameworkName" FROM %s WHERE %s' % (rel, cond)
        if nulls:
            sub += " UNION ALL SELECT NULL"
        if extra and self.chance(0.06):
            sub += self.pick([" ORDER BY 1", " LIMIT 1", " LIMIT 200", " OFFSET 0"])
        return "%sname %sIN (%s)" % (a, "NOT " if notin else "", sub)

    def has_tag(self, a):
        """Sequelize's has-a-tag test beside the tags IN, and neighbours."""
        lim = self.wpick([("LIMIT 1", 8), ("LIMIT 2", 3), ("LIMIT 0", 1), ("LIMIT NULL", 1),
                          ("ORDER BY name LIMIT 1 OFFSET 1", 1), ("", 1)])
        eq = self.pick(['("tags"."frameworkName" = %sname)' % a, '"frameworkName" = %sname' % a,
                        '%sname = "frameworkName"' % a])
        test = self.wpick([("IS NOT NULL", 8), ("IS NULL", 1)])
        return '(SELECT "frameworkName" FROM "tags" AS "tags" WHERE %s %s) %s' % (eq, lim, test)

    # ---- the query families --------------------------------------------
    def count_expr(self, a):
        return self.wpick([("count(*)", 8), ('count(*) AS "count"', 4), ("count(%sname)" % a, 2),
                           ('count(%s"userName")' % a, 1), ('count(DISTINCT %s"userName")' % a, 1),
                           ("count(DISTINCT %sstate)" % a, 1), ("count(*) + 0", 1), ("count(1)", 1),
                           ('count(*) FILTER (WHERE %s"userName" = \'du1\')' % a, 1),
                           ("count(*), count(*)", 1), ("count(*)::int", 1)])

    def count_query(self, raising=False):
        rel, al = self.frameworks()
        a = (al + ".") if al else ""
        fr = rel + (" AS " + al if al and self.chance(0.5) else (" " + al if al else ""))
        ps = self.filt(a, raising=raising)
        kind = "count"
        t = self.r.random()
        if t < 0.15:
            ps.insert(self.r.randint(0, len(ps)), self.tag_in(a, notin=True, nulls=self.chance(0.15)))
            kind = "count_not_in"
        elif t < 0.25:
            ps = [self.tag_in(a)] + (ps if self.chance(0.3) else [])
            kind = "count_tags"
        tail = self.wpick([("", 12), (" LIMIT 1", 1), (" LIMIT 0", 1), (" OFFSET 1", 1), (" LIMIT NULL", 1),
                           (" ORDER BY 1", 1), (" HAVING count(*) > 3", 1), (" GROUP BY ()", 1),
                           (" FOR SHARE", 1)])
        return kind, "SELECT %s FROM %s%s%s" % (self.count_expr(a), fr, self.where(ps), tail)

    def count_family(self):
        raising = self.chance(0.12)
        k = self.r.randint(0, 19)
        if k <= 8:
            kind, s = self.count_query(raising)
            return Item(kind + ("_raising" if raising else ""), [Main(s, True)])
        if k == 9:   # joins around a count
            return self.count_join(raising)
        if k == 10:  # scalar sub-select in the select list, correlated or not
            kind, s = self.count_query(raising)
            if self.chance(0.5):
                return Item("count_subselect", [Main("SELECT x, (%s) AS n FROM (VALUES ('du1'), ('du2')) v(x) ORDER BY x" % s, True)])
            f = " AND ".join(self.filt("g.") or ["true"])
            return Item("count_correlated", [Main(
                "SELECT v.x, (SELECT count(*) FROM openpai.frameworks g WHERE g.\"userName\" = v.x AND %s) AS n "
                "FROM (VALUES ('du0'), ('du1'), ('zz'), (NULL)) v(x) ORDER BY 1" % f, True)])
        if k == 11:  # CTEs
            kind, s = self.count_query(raising)
            return Item("count_cte", [Main(self.pick([
                "WITH c AS (%s) SELECT * FROM c" % s,
                "WITH c AS MATERIALIZED (%s) SELECT * FROM c" % s,
                "WITH f AS (SELECT * FROM openpai.frameworks) SELECT count(*) FROM f" + self.where(self.filt("f.")),
            ]), False)])
        if k == 12:  # UNION, DISTINCT
            k1, s1 = self.count_query(raising)
            k2, s2 = self.count_query()
            return Item("count_union", [Main(self.pick([
                "(%s) UNION ALL (%s)" % (s1, s2), "(%s) UNION (%s)" % (s1, s2),
                "(%s) EXCEPT (%s)" % (s1, s2), "SELECT DISTINCT * FROM (%s) s" % s1,
            ]), False)])
        if k == 13:  # window, GROUP BY
            a = self.pick(["", "f."])
            fr = "openpai.frameworks" + (" f" if a else "")
            return Item("count_window", [Main(self.pick([
                "SELECT count(*) OVER () FROM %s%s" % (fr, self.where(self.filt(a, raising))),
                "SELECT %s\"userName\", count(*) FROM %s%s GROUP BY 1" % (a, fr, self.where(self.filt(a, raising))),
                "SELECT %sstate, count(*), sum(count(*)) OVER () FROM %s%s GROUP BY 1" % (a, fr, self.where(self.filt(a))),
            ]), False)])
        if k == 14:  # prepared, with parameters
            return self.count_prepared()
        if k == 15:  # stored definitions
            return self.stored()
        if k == 16:  # EXISTS, IN over a count
            kind, s = self.count_query(raising)
            return Item("count_in_where", [Main(self.pick([
                "SELECT name FROM openpai.frameworks WHERE (%s) > 100 ORDER BY name" % s,
                "SELECT x FROM (VALUES (1), (28), (140)) v(x) WHERE x IN (%s) ORDER BY x" % s,
                "SELECT EXISTS (%s)" % s,
            ]), True)])
        if k == 17:  # paidb's own tables and framework_counts: never rewritten
            cols = lambda p: p.replace('"userName"', 'user_name').replace('"virtualCluster"', 'virtual_cluster').replace('"jobPriority"', 'job_priority')
            return Item("count_tables", [Main(self.pick([
                "SELECT count(*) FROM paidb.job_summary" + self.where([cols(p) for p in self.filt("")]),
                "SELECT openpai.sum_counts(n) FROM openpai.framework_counts" + self.where(self.filt("")),
                "SELECT coalesce(sum(n), 0) FROM paidb.job_counts",
            ]), True)])
        kind, s = self.count_query(raising)
        return Item("count_sequelize", [Main(s, True)])

    def count_join(self, raising):
        k = self.r.randint(0, 9)
        ps = self.filt("f.", raising=raising)
        w = self.where(ps)
        sel = self.pick(["count(*)", "count(f.name)", "count(v.n)"])
        if k == 0:
            s = "SELECT %s FROM openpai.frameworks f JOIN (VALUES ('c9'), ('c10'), ('c300')) v(n) ON v.n = f.name%s" % (sel, w)
        elif k == 1:
            s = "SELECT %s FROM openpai.frameworks f LEFT JOIN (VALUES ('c9'), ('c10')) v(n) ON v.n = f.name%s" % (sel, w)
        elif k == 2:
            s = "SELECT %s FROM (VALUES ('c9'), ('c300'), (NULL)) v(n) LEFT JOIN openpai.frameworks f ON v.n = f.name%s" % (sel, w)
        elif k == 3:
            s = "SELECT %s FROM openpai.frameworks f RIGHT JOIN (VALUES ('c9'), ('c300')) v(n) ON v.n = f.name%s" % (sel, w)
        elif k == 4:
            s = "SELECT %s FROM openpai.frameworks f FULL JOIN (VALUES ('c9'), ('c300')) v(n) ON v.n = f.name%s" % (sel, w)
        elif k == 5:
            s = "SELECT %s FROM openpai.frameworks f CROSS JOIN (VALUES ('x'), ('y')) v(n)%s" % (sel, w)
        elif k == 6:
            s = ("SELECT count(*) FROM openpai.frameworks f, LATERAL (SELECT t.name FROM openpai.tags t "
                 "WHERE t.\"frameworkName\" = f.name ORDER BY t.name LIMIT 1) l%s" % w)
        elif k == 7:
            s = "SELECT count(*) FROM openpai.frameworks f JOIN openpai.frameworks g ON g.%s = f.%s%s" % (
                self.pick(['"jobName"', '"userName"', 'name']), self.pick(['"jobName"', '"userName"', 'name']), w)
        elif k == 8:
            s = "SELECT count(*) FROM openpai.frameworks f JOIN paidb.job_summary s ON s.name = f.name%s" % w
        else:
            s = "SELECT count(*) FROM openpai.frameworks f, openpai.tags t WHERE t.\"frameworkName\" = f.name" + (
                (" AND " + " AND ".join(ps)) if ps else "")
        return Item("count_join", [Main(s, True)])

    def count_prepared(self):
        col = self.pick(['"userName"', '"virtualCluster"', 'state', '"jobPriority"'])
        args = ", ".join([self.value(col) if self.chance(0.85) else "NULL" for _ in range(2)])
        body = "SELECT count(*) FROM openpai.frameworks WHERE %s IN ($1, $2)%s" % (
            col, "" if self.chance(0.5) else " AND " + self.key_pred(""))
        if self.chance(0.3):
            body += " AND " + self.tag_in("", notin=True)
        return Item("count_prepared", [Main("EXECUTE dq_{ID}(%s)" % args, True)],
                    pre=["PREPARE dq_{ID}(text, text) AS " + body], post=["DEALLOCATE dq_{ID}"])

    def stored(self):
        kind, s = self.count_query()
        if self.chance(0.3):
            kind, s = "page", self.page_sql()[0]
        k = self.r.randint(0, 3)
        flip = ["SET paidb.openpai_count_rewrite = {OFF}", "SET paidb.openpai_tag_rewrite = {OFF}"]
        back = ["SET paidb.openpai_count_rewrite = {ON}", "SET paidb.openpai_tag_rewrite = {ON}"]
        if k == 0:
            pre = ["CREATE TEMP VIEW dv_{ID} WITH (security_invoker = true) AS " + s] + flip
            mains = [Main("SELECT * FROM dv_{ID}", False), Main("SELECT pg_get_viewdef('dv_{ID}'::regclass)", True, False)]
            post = back + ["DROP VIEW dv_{ID}"]
        elif k == 1:
            pre = ["CREATE FUNCTION pg_temp.df_{ID}() RETURNS SETOF record LANGUAGE sql STABLE BEGIN ATOMIC %s; END" % s] + flip
            pre[0] = pre[0].replace("SETOF record", "SETOF bigint") if kind.startswith("count") and s.count("count(") == 1 and ", count(" not in s else pre[0]
            if "SETOF record" in pre[0]:
                pre[0] = "CREATE FUNCTION pg_temp.df_{ID}() RETURNS SETOF text LANGUAGE sql STABLE BEGIN ATOMIC SELECT s::text FROM (%s) s; END" % s
            mains = [Main("SELECT * FROM pg_temp.df_{ID}()", False),
                     Main("SELECT pg_get_functiondef('pg_temp.df_{ID}'::regproc)", True, False)]
            post = back + ["DROP FUNCTION pg_temp.df_{ID}()"]
        elif k == 2:
            pre = ["CREATE FUNCTION pg_temp.df_{ID}() RETURNS SETOF text LANGUAGE sql STABLE AS $f$ SELECT s::text FROM (%s) s $f$" % s] + flip
            mains = [Main("SELECT * FROM pg_temp.df_{ID}()", False)]
            post = back + ["DROP FUNCTION pg_temp.df_{ID}()"]
        else:
            pre = ["CREATE FUNCTION pg_temp.df_{ID}() RETURNS SETOF text LANGUAGE plpgsql STABLE AS $f$ BEGIN RETURN QUERY SELECT s::text FROM (%s) s; END $f$" % s] + flip
            mains = [Main("SELECT * FROM pg_temp.df_{ID}()", False)]
            post = back + ["DROP FUNCTION pg_temp.df_{ID}()"]
        return Item("stored_" + ("view", "atomic", "sqlfunc", "plpgsql")[k], mains, pre=pre, post=post)

    # ---- tag pages ------------------------------------------------------
    def order(self, a, total_extra=""):
        d = self.wpick([(" DESC", 3), ("", 1), (" ASC", 1), (" DESC NULLS LAST", 1)])
        o = '%s"submissionTime"%s' % (a, d)
        if self.chance(0.2):
            o += ", %sname" % a
        return o + total_extra

    def limit(self):
        lim = self.wpick([(" LIMIT %d" % self.r.randint(1, 25), 10), (" LIMIT 0", 1), (" LIMIT NULL", 1),
                          (" LIMIT ALL", 1), (" LIMIT -1", 1), (" LIMIT (SELECT 2)", 1),
                          (" FETCH FIRST 2 ROWS ONLY", 1), ("", 1)])
        off = self.wpick([("", 5), (" OFFSET %d" % self.r.randint(0, 30), 3), (" OFFSET NULL", 1), (" OFFSET -1", 1)])
        return lim + off

    def page_sql(self, a=None, raising=False):
        """A tags-contain page over openpai.frameworks; (sql, ordered)."""
        rel, al = self.frameworks()
        if a is None:
            a = (al + ".") if al else ""
        else:
            rel, al = "openpai.frameworks", a.rstrip(".")
        fr = rel + ((" AS " + al) if al else "")
        ps = []
        if self.chance(0.4):
            ps += [self.key_pred(a) for _ in range(self.r.randint(1, 2))]
        if self.chance(0.3):
            ps.append('%s"userName" = %s' % (a, self.value('"userName"')))
        ps.insert(0, self.tag_in(a, nulls=self.chance(0.05)))
        if self.chance(0.6):
            ps.insert(self.r.randint(0, len(ps)), self.has_tag(a))
        if self.chance(0.05):
            ps.append(self.other_pred(a))
        if raising:
            ps.insert(self.r.randint(0, len(ps)), self.raising_pred(a, page=True))
        if self.chance(0.1):
            ps = ["(%s OR %s)" % (ps[0], self.key_pred(a))] + ps[1:]
        cols = self.pick(["%sname" % a, '%sname, %s"submissionTime"' % (a, a), '%sname, %s"userName", %sstate' % (a, a, a),
                          "*", '%sname, count(*) OVER ()' % a])
        return ("SELECT %s FROM %s%s ORDER BY %s%s" % (cols, fr, self.where(ps), self.order(a), self.limit()), True)

    def page_family(self):
        raising = self.chance(0.1)
        k = self.r.randint(0, 11)
        if k <= 4:
            s, o = self.page_sql(raising=raising)
            return Item("page" + ("_raising" if raising else ""), [Main(s, o)])
        if k == 5:   # Sequelize's page: the inner page joined with its tags
            s, o = self.page_sql(a="framework.")
            s = s.replace("SELECT *", 'SELECT "framework"."name", "framework"."submissionTime"').replace(
                "SELECT framework.name, count(*) OVER ()", 'SELECT "framework"."name", "framework"."submissionTime"')
            if '"submissionTime"' not in s.split(" FROM ")[0]:
                s = s.replace("SELECT ", 'SELECT "framework"."submissionTime", ', 1)
            s = s.replace("framework.", '"framework".')
            outer = ('SELECT "framework".*, "tags"."name" AS "tags.name" FROM (%s) AS "framework" %s JOIN "tags" AS "tags" '
                     'ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC, "tags"."name"'
                     % (s, self.pick(["LEFT OUTER", "INNER"])))
            return Item("page_sequelize", [Main(outer, False)])
        if k == 6:   # joins around a page
            return self.page_join(raising)
        if k == 7:   # prepared pages: parameters as the tag, the user, the LIMIT
            return self.page_prepared()
        if k == 8:   # CTE, UNION, DISTINCT, sub-select
            s, o = self.page_sql()
            return Item("page_wrapped", [Main(self.pick([
                "WITH p AS (%s) SELECT * FROM p" % s,
                "SELECT * FROM (%s) p" % s,
                "SELECT count(*) FROM (%s) p" % s,
                "(%s) UNION ALL (%s)" % (s, s),
                "SELECT DISTINCT * FROM (%s) p" % s,
                "SELECT EXISTS (%s)" % s,
            ]), False)])
        if k == 9:   # FOR SHARE, or a cursor over the page
            s, o = self.page_sql()
            if self.chance(0.5):
                return Item("page_for_share", [Main(s + " FOR SHARE", o)])
            return Item("page_cursor", [Main("FETCH %d FROM dc_{ID}" % self.r.randint(1, 5), o, False),
                                        Main("FETCH ALL FROM dc_{ID}", o, False)],
                        pre=["BEGIN", "DECLARE dc_{ID} %sCURSOR FOR %s" % (self.pick(["", "SCROLL ", "NO SCROLL "]), s)],
                        post=["COMMIT"])
        if k == 10:  # the sub-select in the select list
            return Item("page_in_select", [Main(
                "SELECT x, (SELECT f.name FROM openpai.frameworks f WHERE %s AND f.\"userName\" = x ORDER BY f.\"submissionTime\" DESC LIMIT 1) FROM (VALUES ('du0'), ('du1'), ('du3')) v(x) ORDER BY x"
                % self.tag_in("f."), True)])
        s, o = self.page_sql(raising=raising)
        return Item("page", [Main(s, o)])

    def page_join(self, raising):
        k = self.r.randint(0, 8)
        ps = [self.tag_in("f.")]
        if self.chance(0.5):
            ps.append(self.has_tag("f."))
        if self.chance(0.3):
            ps.append(self.key_pred("f."))
        if raising:
            ps.append(self.raising_pred("f.", page=True))
        w = self.where(ps)
        lim = " LIMIT %d" % self.r.randint(1, 6)
        if k == 0:
            vals = self.pick(["('c9')", "('c9'), ('c15')", "('c3'), ('c9'), ('c300')", "('c10')"])
            s = "SELECT f.name FROM openpai.frameworks f JOIN (VALUES %s) v(n) ON v.n = f.name%s ORDER BY f.\"submissionTime\" DESC%s" % (vals, w, lim)
        elif k == 1:
            s = "SELECT f.name, v.n FROM openpai.frameworks f LEFT JOIN (VALUES ('c9'), ('c15')) v(n) ON v.n = f.name%s ORDER BY f.\"submissionTime\" DESC%s" % (w, lim)
        elif k == 2:
            s = "SELECT f.name, v.n FROM openpai.frameworks f RIGHT JOIN (VALUES ('c9'), ('c15'), ('c300')) v(n) ON v.n = f.name%s ORDER BY f.\"submissionTime\" DESC, v.n%s" % (w, lim)
        elif k == 3:
            s = "SELECT f.name, v.n FROM openpai.frameworks f FULL JOIN (VALUES ('c9'), ('c300')) v(n) ON v.n = f.name%s ORDER BY f.\"submissionTime\" DESC, v.n%s" % (w, lim)
        elif k == 4:
            s = "SELECT f.name, v.n FROM openpai.frameworks f CROSS JOIN (VALUES ('x'), ('y')) v(n)%s ORDER BY f.\"submissionTime\" DESC, v.n%s" % (w, lim)
        elif k == 5:
            s = ("SELECT f.name, l.name FROM openpai.frameworks f LEFT JOIN LATERAL (SELECT t.name FROM openpai.tags t "
                 "WHERE t.\"frameworkName\" = f.name ORDER BY t.name LIMIT 1) l ON true%s ORDER BY f.\"submissionTime\" DESC%s" % (w, lim))
        elif k == 6:
            on = self.pick(['g."jobName" = f."jobName"', 'g.name = f.name', 'g."userName" = f."userName"'])
            s = ("SELECT f.name, g.name FROM openpai.frameworks f JOIN openpai.frameworks g ON %s%s ORDER BY f.\"submissionTime\" DESC, g.name%s" % (on, w, lim))
            if self.chance(0.4):
                s = s.replace(" ORDER BY", " AND (SELECT \"frameworkName\" FROM tags WHERE \"frameworkName\" = g.name LIMIT 1) IS NOT NULL ORDER BY", 1)
        elif k == 7:
            s = "SELECT f.name, s.state FROM openpai.frameworks f JOIN paidb.job_summary s ON s.name = f.name%s ORDER BY f.\"submissionTime\" DESC%s" % (w, lim)
        else:
            s = "SELECT f.name, t.name FROM openpai.frameworks f JOIN openpai.tags t ON t.\"frameworkName\" = f.name%s ORDER BY f.\"submissionTime\" DESC, t.name%s" % (w, lim)
        return Item("page_join", [Main(s, True)])

    def page_prepared(self):
        k = self.r.randint(0, 3)
        if k == 0:
            body = ('SELECT name FROM openpai.frameworks f WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ($1, $2)) '
                    'ORDER BY "submissionTime" DESC LIMIT $3')
            args = "%s, %s, %s" % (q(self.pick(TAGS)), self.pick(["'a'", "'b'", "NULL"]), self.pick(["3", "1", "0", "NULL", "20"]))
            types = "text, text, bigint"
        elif k == 1:
            body = ('SELECT name FROM openpai.frameworks f WHERE "userName" = $1 AND name IN (SELECT "frameworkName" FROM openpai.tags WHERE name = $2) '
                    'AND (SELECT "frameworkName" FROM openpai.tags t WHERE t."frameworkName" = f.name LIMIT 1) IS NOT NULL '
                    'ORDER BY "submissionTime" DESC LIMIT 3 OFFSET $3')
            args = "%s, %s, %s" % (self.value('"userName"'), q(self.pick(TAGS)), self.pick(["0", "1", "NULL", "5"]))
            types = "text, text, int"
        elif k == 2:
            body = ('SELECT name FROM openpai.frameworks f WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name = ANY ($1)) '
                    'ORDER BY "submissionTime" LIMIT $2')
            args = "%s, %s" % (self.pick(["'{a,b}'", "'{a}'", "'{b,c}'", "'{}'", "NULL"]), self.pick(["2", "7", "NULL"]))
            types = "text[], int"
        else:
            body = ('SELECT name FROM openpai.frameworks f WHERE name IN (SELECT "frameworkName" FROM openpai.tags WHERE name IN ($1)) '
                    'AND (SELECT "frameworkName" FROM openpai.tags t WHERE t."frameworkName" = f.name LIMIT $2) IS NOT NULL '
                    'ORDER BY "submissionTime" DESC LIMIT 5')
            args = "%s, %s" % (q(self.pick(TAGS)), self.pick(["1", "2", "0", "NULL"]))
            types = "text, int"
        return Item("page_prepared", [Main("EXECUTE dq_{ID}(%s)" % args, True)],
                    pre=["PREPARE dq_{ID}(%s) AS %s" % (types, body)], post=["DEALLOCATE dq_{ID}"])


    def item(self):
        f = self.r.random()
        if f < 0.5:
            it = self.count_family()
        else:
            it = self.page_family()
        return it


SEQ_COLS = ('"framework"."name", "framework"."jobName", "framework"."userName", "framework"."executionType", '
            '"framework"."submissionTime", "framework"."virtualCluster", "framework"."jobPriority", '
            '"framework"."retries", "framework"."state"')


def sequelize_items():
    """rest-server's shapes as Sequelize sends them (test/bench/queries_shapes.sql,
    test/openpai/test/query-shapes.test.js), for every phase and role."""
    filters = [
        '', ' WHERE "framework"."userName" IN (\'du1\')',
        ' WHERE "framework"."userName" IN (\'du1\', \'du3\') AND "framework"."virtualCluster" IN (\'research\')',
        ' WHERE "framework"."virtualCluster" IN (\'vc2\') AND "framework"."state" IN (\'RUNNING\', \'WAITING\')',
        ' WHERE "framework"."state" IN (\'FAILED\')',
        ' WHERE ("framework"."userName" LIKE \'%1%\' OR "framework"."jobName" LIKE \'%1%\' OR "framework"."virtualCluster" LIKE \'%1%\')',
        ' WHERE "framework"."jobPriority" IN (\'prod\', \'test\')',
        ' WHERE ("framework"."jobPriority" IS NULL OR "framework"."jobPriority" IN (\'prod\'))',
        ' WHERE "framework"."archived" = false',
    ]
    tagsc = ['"framework"."name" IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN (%s)) AND ( SELECT "frameworkName" FROM "tags" AS "tags" WHERE ("tags"."frameworkName" = "framework"."name") LIMIT 1 ) IS NOT NULL' % t
             for t in ("'a'", "'a', 'b'", "'b'")]
    tagsn = ['"framework"."name" NOT IN (SELECT "frameworkName" FROM "tags" WHERE "tags"."name" IN (%s))' % t for t in ("'a'", "'a', 'b'")]
    out = []
    for f in filters:
        for extra in [None] + tagsc + tagsn:
            w = f
            if extra:
                w = (f + " AND " + extra) if f else " WHERE " + extra
            out.append(Item("sequelize_count", [Main('SELECT count(*) AS "count" FROM "frameworks" AS "framework"%s;' % w, True)]))
            for page in ("LIMIT 20 OFFSET 0", "LIMIT 5 OFFSET 5"):
                inner = 'SELECT %s FROM "frameworks" AS "framework"%s ORDER BY "framework"."submissionTime" DESC %s' % (SEQ_COLS, w, page)
                out.append(Item("sequelize_page", [Main(
                    'SELECT "framework".*, "tags"."uid" AS "tags.uid", "tags"."name" AS "tags.name" FROM (%s) AS "framework" '
                    '%s JOIN "tags" AS "tags" ON "framework"."name" = "tags"."frameworkName" ORDER BY "framework"."submissionTime" DESC'
                    % (inner, "INNER" if extra in tagsc else "LEFT OUTER"), False)]))
    return out


def generate(seed, n):
    """n items (plus the fixed Sequelize shapes), each with its id, phase and role."""
    g = Gen(seed)
    seq = sequelize_items()
    items = []
    for it in seq:
        items.append(it)
    while len(items) < n:
        items.append(g.item())
    for i, it in enumerate(items):
        it.id = i + 1
        it.phase = g.wpick(PHASE_WEIGHTS)
        it.role = g.wpick(PLAIN_ROLES if it.phase == "plain" else RLS_ROLES)

        def sub(s, i=i):
            return s.replace("{ID}", str(i + 1))
        it.pre = [sub(s) for s in it.pre]
        it.post = [sub(s) for s in it.post]
        for m in it.mains:
            m.sql = sub(m.sql).rstrip(";")
    return items
