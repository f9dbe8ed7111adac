#!/usr/bin/env python3
"""Turn test/bench/queries_shapes.sql into the timing script of queries.sh.

Each shape is run three ways, the same rows asked for:
  view     the Sequelize SQL as logged, with search_path = openpai (paidb's views)
  paidb    the same query on paidb's own tables: paidb.job_summary and
           paidb.tag; a count whose filters are only user, virtual cluster,
           state and priority sums paidb.job_count and job_count_delta; a
           tag page in submission order reads the tags with their job's
           time (and user), without Sequelize's has-a-tag test: the forms
           the openpai views' rewrites give (docs/queries.md)
  openpai  the Sequelize SQL as logged, with search_path = openpai_db
           (OpenPAI's own tables and indexes, the same jobs)
  written  (tag shapes and counts) the Sequelize SQL through paidb's views
           with the openpai rewrites off: what the rewrites must not be
           slower than

usage: queries_shapes.py SHAPES_FILE RUNS BASELINE_RUNS > timing.sql
Prints psql input whose output lines are "shape|variant|p50|p99|rows".
"""
import re
import sys

COUNTED = {'userName', 'virtualCluster', 'state', 'jobPriority'}
CONTAIN_TAGS = re.compile(r'"framework"\."name" IN \(SELECT "frameworkName" FROM "tags" WHERE '
                          r'"tags"\."name" IN \(([^)]*)\)\)')
NOT_IN_TAGS = re.compile(r'"framework"\."name" NOT IN \(SELECT "frameworkName" FROM "tags" WHERE '
                         r'"tags"\."name" IN \(([^)]*)\)\)')


def snake(name):
    return re.sub(r'([A-Z])', lambda m: '_' + m.group(1).lower(), name)


def shapes(path):
    """(label, sql) pairs of the file: a '-- label kind' line, then the query."""
    out = []
    label = None
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            m = re.match(r'^-- (\S+) (page|count)$', line)
            if m:
                label = m.group(1) + '_' + m.group(2)
            elif label and line.strip():
                out.append((label, line.strip().rstrip(';').strip()))
                label = None
    return out


TAGS_IN = re.compile(r'"framework"\.name IN \(SELECT framework_name FROM paidb\.tag AS "tags" WHERE '
                     r'"tags"\.name IN \(([^)]*)\)\)')
SOME_TAG = re.compile(r' AND \( SELECT framework_name FROM paidb\.tag AS "tags" WHERE '
                      r'\("tags"\.framework_name = "framework"\.name\) LIMIT 1 \) IS NOT NULL')
ONE_USER = re.compile(r'"framework"\.user_name IN \(\'[^\',]*\'\)')


def tag_page(q):
    """A tags IN page in submission order on paidb's tables, as the
    openpai views' tag rewrites (src/openpai_tags.c) write it."""
    m = TAGS_IN.search(q)
    if not m or not re.search(r'ORDER BY "framework"\.submission_time (ASC|DESC) LIMIT', q):
        return q
    q = SOME_TAG.sub('', q)
    m = TAGS_IN.search(q)
    user = ONE_USER.search(q[:m.start()] + q[m.end():].split(' ORDER BY ')[0])
    # a page of the tags alone (and one user): its bounded names as an array
    bound = tags_bound(q, m, user)
    if bound:
        new = ('"framework".name = ANY (ARRAY(SELECT framework_name FROM paidb.tag AS "tags" WHERE '
               '"tags".name IN (%s)%s%s))'
               % (m.group(1), bound,
                  ' AND "tags".job_user_name = ' + user.group(0).split(' IN (')[1][:-1] if user else ''))
        return q[:m.start()] + new + q[m.end():]
    if ',' in m.group(1) and not user:
        return q
    cols, tag_cols = ('name, submission_time', 'framework_name, job_submission_time')
    if user:
        cols, tag_cols = cols + ', user_name', tag_cols + ', job_user_name'
    new = ('(%s) IN (SELECT %s FROM paidb.tag AS "tags" WHERE "tags".name IN (%s))'
           % (', '.join('"framework".' + c for c in cols.split(', ')), tag_cols, m.group(1)))
    return q[:m.start()] + new + q[m.end():]


PAGE = re.compile(r'ORDER BY "framework"\.submission_time (ASC|DESC) LIMIT (\d+) OFFSET (\d+)\)')


def tags_bound(q, m, user):
    """Tags and nothing else (or one user): the bound the rewrite adds,
    from each tag's n-th time (src/openpai_tags.c)."""
    where = q[:m.start()].rsplit(' WHERE ', 1)[1] + 'X' + q[m.end():].split(' ORDER BY ')[0]
    if where.strip() not in ('X', (user.group(0) + ' AND X') if user else 'X'):
        return ''
    page = PAGE.search(q)
    if not page:
        return ''
    desc = page.group(1) == 'DESC'
    n = int(page.group(2)) + int(page.group(3))
    nth = ['(SELECT job_submission_time FROM paidb.tag WHERE name = %s%s'
           ' ORDER BY job_submission_time %s OFFSET %d LIMIT 1)'
           % (t.strip(), ' AND job_user_name = ' + user.group(0).split(' IN (')[1][:-1] if user else '',
              page.group(1), n - 1)
           for t in m.group(1).split(',')]
    return (' AND "tags".job_submission_time %s COALESCE(%s(%s), \'%sinfinity\')'
            % ('>=' if desc else '<=', 'GREATEST' if desc else 'LEAST', ', '.join(nth), '-' if desc else ''))


def to_paidb(label, sql):
    """The query on paidb's own tables."""
    q = sql.replace('"frameworks" AS "framework"', 'paidb.job_summary AS "framework"')
    q = q.replace('"tags" AS "tags"', 'paidb.tag AS "tags"')
    q = q.replace('FROM "tags" WHERE', 'FROM paidb.tag AS "tags" WHERE')
    q = q.replace('SELECT "frameworkName" FROM', 'SELECT framework_name FROM')
    q = re.sub(r'"(framework|tags)"\."([a-zA-Z]+)"',
               lambda m: '"%s".%s' % (m.group(1), snake(m.group(2))), q)
    if label.endswith('_page'):
        q = tag_page(q)
    if label.endswith('_count'):
        where = sql.split(' WHERE ', 1)[1].strip() if ' WHERE ' in sql else ''
        # tagsNotContain: the key count less the tagged jobs (as paidb's
        # count rewrite answers it through the views, docs/queries.md)
        m = NOT_IN_TAGS.search(where)
        rest = where
        if m:
            rest = (where[:m.start()] + where[m.end():]).strip()
            rest = re.sub(r'^AND\s+|\s+AND$', '', rest).replace(' AND  AND ', ' AND ').strip()
        cols = set(re.findall(r'"framework"\."([a-zA-Z]+)"', rest))
        only_tags = CONTAIN_TAGS.fullmatch(where.strip())
        if only_tags:
            # tagsContain alone: the jobs carrying the tags, counted on the
            # tags (as paidb's count rewrite answers it through the views)
            q = ('SELECT count(DISTINCT framework_name) AS "count" FROM paidb.tag WHERE name IN (%s)'
                 % only_tags.group(1))
        elif cols <= COUNTED and 'LIKE' not in rest and 'tags' not in rest:
            w = re.sub(r'"framework"\."([a-zA-Z]+)"', lambda m: snake(m.group(1)), rest)
            q = ('SELECT COALESCE(sum(n), 0) AS "count" FROM (SELECT * FROM paidb.job_count'
                 ' UNION ALL SELECT * FROM paidb.job_count_delta) c' + (' WHERE ' + w if w else ''))
            if m and not w:
                tagged = 'SELECT count(DISTINCT framework_name) FROM paidb.tag WHERE name IN (%s)' % m.group(1)
            elif m:
                tagged = ('SELECT count(*) FROM paidb.job_summary AS "framework" WHERE '
                          + w + ' AND '
                          + 'name IN (SELECT framework_name FROM paidb.tag AS "tags" WHERE "tags".name IN (%s))'
                          % m.group(1))
            if m:
                q = 'SELECT (%s) - (%s) AS "count"' % (q, tagged)
    return q


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def main():
    path, runs, base_runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print('\\set ON_ERROR_STOP 1')
    print('\\pset format unaligned')
    print('\\pset tuples_only on')
    for label, sql in shapes(path):
        variants = [('view', 'openpai', sql, runs),
                    ('paidb', 'pg_catalog', to_paidb(label, sql), runs),
                    ('openpai', 'openpai_db', sql, base_runs)]
        # a shape the openpai rewrites change: also as written through the
        # views (rewrites off), which the rewritten form must not be slower than
        if 'tags' in label or label.endswith('_count'):
            variants.append(('written', 'openpai', sql, runs))
        for variant, schema, q, n in variants:
            print('SET search_path = %s, public;' % schema)
            if variant == 'written':
                print('SET paidb.openpai_count_rewrite = off; SET paidb.openpai_tag_rewrite = off;')
            print("SELECT %s, %s, p50, p99, rows FROM bench.time_query(%s, %d);"
                  % (lit(label), lit(variant), lit(q), n))
            if variant == 'written':
                print('RESET paidb.openpai_count_rewrite; RESET paidb.openpai_tag_rewrite;')
                print("SELECT %s, 'fired', 0, 0, bench.rewritten(%s);" % (lit(label), lit(q)))
    print('RESET search_path;')


if __name__ == '__main__':
    main()
