/*
 * openpai_tags.h — rest-server's tag filters through the openpai views
 * (SPEC §10, docs/queries.md): recognising them, and dropping the test
 * Sequelize adds to a tagsContain page that its IN already implies.
 */
#ifndef PAIDB_OPENPAI_TAGS_H
#define PAIDB_OPENPAI_TAGS_H

#include "nodes/parsenodes.h"

/* Whether node is column `column` of relation relid in query's range table. */
extern bool paidb_is_column_of(Node *node, Query *query, Oid relid, const char *column);

/*
 * If node is `"name" IN (SELECT "frameworkName" FROM <tags> ...)` for the
 * view `frameworks` of query, uncorrelated, with no volatile function, a
 * filter that cannot fail, and nothing that could add a NULL to the set
 * (no join, grouping, set operation, limit): the sub-link.  NULL otherwise.
 */
extern SubLink *paidb_tags_in_sublink(Node *node, Query *query, Oid frameworks, Oid tags);

/*
 * Drop from every query over openpai.frameworks in the tree a test
 * `(SELECT "frameworkName" FROM tags WHERE "frameworkName" = "name" LIMIT 1)
 * IS NOT NULL` beside a tags IN on the same job: the IN implies it.
 */
extern void paidb_openpai_drop_implied_tag_tests(Query *query);

#endif							/* PAIDB_OPENPAI_TAGS_H */
