-- paidb_openpai 0.2 -> 0.3 (ALTER EXTENSION paidb_openpai UPDATE).  A fresh
-- install runs 0.2 and then this script, so both end equal
-- (test/t/034_schema_upgrade.pl compares their dumps).

\echo Use "ALTER EXTENSION paidb_openpai UPDATE TO '0.3'" to load this file. \quit

-- try_jsonb and import_snapshot parse in a subtransaction (so that no input
-- makes them raise: openpai_import.c), and no subtransaction can start
-- during a parallel operation.
ALTER FUNCTION openpai.try_jsonb(text) PARALLEL UNSAFE;
ALTER FUNCTION openpai.import_snapshot(text, text) PARALLEL UNSAFE;
COMMENT ON FUNCTION openpai.try_jsonb(text) IS 'JSON text as jsonb, or NULL when it is not JSON or jsonb cannot hold it (never an error)';

-- import_database refuses a source whose reading could run code of its
-- owner (types, relation kinds, row security, rules, ownership: see the
-- comment inside), reads the source tables with ONLY, and compacts the job
-- counts before it returns (issue 17 items 2 and 4).
CREATE OR REPLACE FUNCTION openpai.import_database(source_schema name)
RETURNS TABLE (relation text, imported bigint, skipped bigint)
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    -- what makes a schema OpenPAI's: its seven tables with these columns
    required constant jsonb := '{
        "frameworks": ["name", "submissionTime", "snapshot", "requestSynced", "apiServerDeleted"],
        "framework_history": ["uid", "frameworkName", "attemptIndex", "snapshot"],
        "task_history": ["uid", "frameworkName", "taskUid", "taskAttemptIndex", "snapshot"],
        "pods": ["uid", "frameworkName", "snapshot"],
        "framework_events": ["uid", "frameworkName", "type"],
        "pod_events": ["uid", "frameworkName", "podUid", "type"],
        "tags": ["uid", "frameworkName", "name"]}';
    -- the type of every column the import reads, as OpenPAI's Sequelize
    -- models create it (test/t/data/openpai-tables.sql); "string": varchar
    -- (STRING) or text (TEXT)
    column_types constant jsonb := '{
        "frameworks": {"name": "string", "submissionTime": "timestamptz", "snapshot": "string",
            "requestSynced": "bool", "apiServerDeleted": "bool", "archived": "bool",
            "insertedAt": "timestamptz", "updatedAt": "timestamptz",
            "notifiedAtRunning": "bool", "notifiedAtSucceeded": "bool", "notifiedAtFailed": "bool",
            "notifiedAtStopped": "bool", "notifiedAtRetried": "int4",
            "configSecretDef": "string", "userExtensionSecretDef": "string", "priorityClassDef": "string",
            "dockerSecretDef": "string", "tokenSecretDef": "string"},
        "framework_history": {"uid": "string", "frameworkName": "string", "attemptIndex": "int4",
            "historyType": "string", "snapshot": "string", "insertedAt": "timestamptz", "updatedAt": "timestamptz"},
        "task_history": {"uid": "string", "frameworkName": "string", "attemptIndex": "int4",
            "taskroleName": "string", "taskName": "string", "taskIndex": "int4", "taskUid": "string",
            "taskAttemptIndex": "int4", "podUid": "string", "historyType": "string", "snapshot": "string",
            "insertedAt": "timestamptz", "updatedAt": "timestamptz"},
        "pods": {"uid": "string", "frameworkName": "string", "attemptIndex": "int4", "taskroleName": "string",
            "taskroleIndex": "int4", "taskAttemptIndex": "int4", "snapshot": "string",
            "insertedAt": "timestamptz", "updatedAt": "timestamptz"},
        "framework_events": {"uid": "string", "frameworkName": "string", "podUid": "string",
            "taskroleName": "string", "taskName": "string", "taskIndex": "int4", "type": "string",
            "reason": "string", "message": "string", "firstTimestamp": "timestamptz",
            "lastTimestamp": "timestamptz", "count": "int4", "sourceComponent": "string",
            "sourceHost": "string", "event": "string", "insertedAt": "timestamptz", "updatedAt": "timestamptz"},
        "pod_events": {"uid": "string", "frameworkName": "string", "podUid": "string", "type": "string",
            "message": "string", "event": "string", "insertedAt": "timestamptz", "updatedAt": "timestamptz"},
        "tags": {"uid": "string", "frameworkName": "string", "name": "string",
            "insertedAt": "timestamptz", "updatedAt": "timestamptz"}}';
    invoker text;
    nsp oid;
    nsp_owner oid;
    rel_oid oid;
    c record;
    a record;
    want text;
    tbl text;
    col text;
    rel text;
    sql text;
    n_imported bigint;
    n_skipped bigint;
    n_taken bigint;
    r record;
BEGIN
    IF source_schema IS NULL THEN
        RAISE EXCEPTION 'source_schema must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- one import at a time: a second one waits for nothing and says so
    IF NOT pg_catalog.pg_try_advisory_xact_lock(1885431140, 9) THEN
        RAISE EXCEPTION 'another openpai.import_database is running'
            USING ERRCODE = 'lock_not_available',
                  HINT = 'Wait for it to finish; the import is idempotent, so it can be run again afterwards.';
    END IF;

    /*
     * The source is another role's data, read with this function's
     * (superuser) rights, so nothing its owner wrote may run while it is
     * read (issue 17 item 2).  What a SELECT of a column can run, and how
     * each is shut out:
     *   - casts, operators and functions of the column's type (a cast of an
     *     enum to text WITH FUNCTION evil.f ran evil.f as superuser): every
     *     column read must have exactly the built-in type OpenPAI's models
     *     create (pg_catalog's varchar/text, int4, bool, timestamptz; no
     *     domain, enum, array or user type), and a collation of pg_catalog.
     *     Casts between built-in types belong to the bootstrap superuser.
     *     Operators and functions are found by the pinned search_path
     *     (pg_catalog, paidb); every source name is schema-qualified.
     *   - a view's query, rules (an ON SELECT rule makes a view), a
     *     foreign table's wrapper, a partitioned table's partitions: only
     *     plain tables (relkind 'r') without rules are taken, and they are
     *     read with ONLY, so no inheritance child (which may be a foreign
     *     table) is read either.
     *   - row security policies, whose expressions run as the querying
     *     role (this function's owner): a table with row security enabled
     *     or forced, or with any policy, is refused.
     *   - triggers, column defaults, generated columns, index expressions,
     *     check constraints: none runs on a SELECT.
     * The checks and the reads are separate statements, so the schema's
     * catalog row is locked (FOR SHARE: renaming, dropping or swapping the
     * schema waits for this transaction) and each table is locked (ACCESS
     * SHARE: ALTER TABLE, CREATE POLICY or RULE, DROP and renaming wait)
     * before it is checked; a name that no longer names the checked table
     * is refused.
     *
     * Ownership: the schema and its seven tables must belong to the calling
     * role or to a role it is a member of, so that an import never takes
     * data its caller could not take anyway.  current_user is this
     * function's owner here; the calling role is the session's current
     * role as SET ROLE left it (the role GUC; the login role when none), as
     * PostgreSQL's GetOuterUserId sees it.  A superuser is a member of
     * every role: for an administrator the type and relation checks above
     * are what make the import safe, not ownership.
     */
    invoker := CASE WHEN pg_catalog.current_setting('role') = 'none' THEN session_user
                    ELSE pg_catalog.current_setting('role') END;
    SELECT n.oid, n.nspowner INTO nsp, nsp_owner
      FROM pg_catalog.pg_namespace n WHERE n.nspname = source_schema FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'schema "%" does not exist', source_schema USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF source_schema IN ('paidb', 'openpai', 'pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'schema "%" is not an OpenPAI database', source_schema
            USING ERRCODE = 'invalid_schema_name',
                  HINT = 'Give the schema that holds the tables of OpenPAI''s database-controller.';
    END IF;
    IF NOT pg_catalog.pg_has_role(invoker, nsp_owner, 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to import schema "%"', source_schema
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('The schema belongs to role %s, and role %s is not a member of it.',
                                             pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(nsp_owner)),
                                             pg_catalog.quote_ident(invoker)),
                  HINT = 'Run the import as the owner of the OpenPAI tables (or a role that is a member of it).';
    END IF;
    FOR tbl IN SELECT pg_catalog.jsonb_object_keys(required) LOOP
        SELECT x.oid INTO rel_oid FROM pg_catalog.pg_class x WHERE x.relnamespace = nsp AND x.relname = tbl;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: it has no table "%"', source_schema, tbl
                USING ERRCODE = 'undefined_table',
                      DETAIL = 'OpenPAI v1.2 and later keep jobs in the tables frameworks, framework_history, task_history, pods, framework_events, pod_events and tags.';
        END IF;
        SELECT x.relkind, x.relowner INTO c FROM pg_catalog.pg_class x WHERE x.oid = rel_oid;
        IF c.relkind <> 'r' THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: "%" is not a plain table', source_schema, tbl
                USING ERRCODE = 'wrong_object_type',
                      DETAIL = 'OpenPAI''s database-controller creates plain tables; a view, a foreign or partitioned table could run code of its owner with the import''s rights.';
        END IF;
        -- locked, the table can no longer change; the name must still name it
        EXECUTE pg_catalog.format('LOCK TABLE ONLY %I.%I IN ACCESS SHARE MODE', source_schema, tbl);
        SELECT x.relkind, x.relowner, x.relrowsecurity, x.relforcerowsecurity, x.relhasrules INTO c
          FROM pg_catalog.pg_class x WHERE x.oid = rel_oid AND x.relnamespace = nsp AND x.relname = tbl;
        IF NOT FOUND OR c.relkind <> 'r' THEN
            RAISE EXCEPTION 'table "%.%" changed while the import checked it', source_schema, tbl
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Run the import again when nothing alters the OpenPAI tables.';
        END IF;
        IF NOT pg_catalog.pg_has_role(invoker, c.relowner, 'MEMBER') THEN
            RAISE EXCEPTION 'permission denied to import table "%.%"', source_schema, tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = pg_catalog.format('The table belongs to role %s, and role %s is not a member of it.',
                                                 pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(c.relowner)),
                                                 pg_catalog.quote_ident(invoker)),
                      HINT = 'Run the import as the owner of the OpenPAI tables (or a role that is a member of it).';
        END IF;
        IF c.relrowsecurity OR c.relforcerowsecurity
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_policy p WHERE p.polrelid = rel_oid) THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: table "%" has row security', source_schema, tbl
                USING ERRCODE = 'wrong_object_type',
                      DETAIL = 'Row security policies run their expressions with the import''s rights; OpenPAI''s tables have none.',
                      HINT = 'Disable row security and drop the policies of the OpenPAI tables, or import a copy without them.';
        END IF;
        IF c.relhasrules OR EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite w WHERE w.ev_class = rel_oid) THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: table "%" has rules', source_schema, tbl
                USING ERRCODE = 'wrong_object_type',
                      DETAIL = 'OpenPAI''s tables have no rules.';
        END IF;
        FOR col IN SELECT pg_catalog.jsonb_array_elements_text(required -> tbl) LOOP
            IF openpai.source_column(source_schema, tbl, col, 'text') LIKE 'NULL::%' THEN
                RAISE EXCEPTION 'schema "%" is not an OpenPAI database: table "%" has no column "%"', source_schema, tbl, col
                    USING ERRCODE = 'undefined_column';
            END IF;
        END LOOP;
        FOR col, want IN SELECT e.key, e.value FROM pg_catalog.jsonb_each_text(column_types -> tbl) e LOOP
            SELECT t.atttypid, t.atttypmod, t.attcollation INTO a FROM pg_catalog.pg_attribute t
             WHERE t.attrelid = rel_oid AND t.attname = col AND t.attnum > 0 AND NOT t.attisdropped;
            CONTINUE WHEN NOT FOUND;   -- a column older OpenPAI versions had not added yet
            IF NOT a.atttypid = ANY (CASE want
                     WHEN 'string' THEN ARRAY['pg_catalog.varchar'::pg_catalog.regtype, 'pg_catalog.text'::pg_catalog.regtype]::pg_catalog.oid[]
                     ELSE ARRAY[pg_catalog.to_regtype('pg_catalog.' OPERATOR(pg_catalog.||) want)]::pg_catalog.oid[] END) THEN
                RAISE EXCEPTION 'schema "%" is not an OpenPAI database: column "%" of table "%" has type %', source_schema, col, tbl,
                    pg_catalog.format_type(a.atttypid, a.atttypmod)
                    USING ERRCODE = 'datatype_mismatch',
                          DETAIL = pg_catalog.format('OpenPAI''s models make it %s; the import takes only the built-in types they create, so that no cast or function of the source''s owner runs with the import''s rights.',
                                                     CASE want WHEN 'string' THEN 'character varying or text' ELSE pg_catalog.format_type(pg_catalog.to_regtype('pg_catalog.' OPERATOR(pg_catalog.||) want), NULL) END);
            END IF;
            IF a.attcollation <> 0 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_collation l
                     WHERE l.oid = a.attcollation AND l.collnamespace = 'pg_catalog'::pg_catalog.regnamespace) THEN
                RAISE EXCEPTION 'schema "%" is not an OpenPAI database: column "%" of table "%" has collation %', source_schema, col, tbl,
                    a.attcollation::pg_catalog.regcollation
                    USING ERRCODE = 'collation_mismatch',
                          DETAIL = 'The import takes only the built-in collations.';
            END IF;
        END LOOP;
    END LOOP;

    -- frameworks: one pass; paidb's code makes the snapshot and derives the columns
    sql := pg_catalog.format($q$
WITH s AS (
    SELECT s.name::text AS name, %1$s AS submission_time, s.snapshot::text AS source_snapshot,
           COALESCE(%2$s, false) AS request_synced, COALESCE(%3$s, false) AS api_server_deleted,
           COALESCE(%4$s, false) AS archived,
           COALESCE(%5$s, %6$s, pg_catalog.now()) AS inserted_at, COALESCE(%6$s, pg_catalog.now()) AS updated_at,
           COALESCE(%7$s, false) AS notified_at_running, COALESCE(%8$s, false) AS notified_at_succeeded,
           COALESCE(%9$s, false) AS notified_at_failed, COALESCE(%10$s, false) AS notified_at_stopped,
           COALESCE(%11$s, 0) AS notified_at_retried,
           NULLIF(%12$s, '') AS config_def, NULLIF(%13$s, '') AS user_extension_def,
           NULLIF(%14$s, '') AS priority_class_def, NULLIF(%15$s, '') AS docker_def, NULLIF(%16$s, '') AS token_def
      FROM ONLY %17$I.frameworks s),
p AS MATERIALIZED (
    SELECT s.*, i.snapshot, i.request_generation, i.resource_version,
           openpai.try_jsonb(s.config_def) AS config_j, openpai.try_jsonb(s.user_extension_def) AS user_extension_j,
           openpai.try_jsonb(s.priority_class_def) AS priority_class_j, openpai.try_jsonb(s.docker_def) AS docker_j,
           openpai.try_jsonb(s.token_def) AS token_j,
           CASE WHEN s.name IS NULL THEN 'no name'
                WHEN s.name !~ '^[a-z0-9]{1,63}$' THEN
                     pg_catalog.format('name is not a valid framework name (at most 63 lower-case letters and digits, %%s characters here)', pg_catalog.length(s.name))
                WHEN s.submission_time IS NULL THEN 'no submissionTime'
                WHEN s.source_snapshot IS NULL THEN 'no snapshot'
                ELSE i.reason END AS reason
      FROM s LEFT JOIN LATERAL openpai.import_snapshot(s.source_snapshot, s.name) i
             ON s.name ~ '^[a-z0-9]{1,63}$'),
q AS MATERIALIZED (
    SELECT p.*,
           COALESCE(p.reason,
             CASE WHEN p.config_def IS NOT NULL AND pg_catalog.jsonb_typeof(p.config_j) IS DISTINCT FROM 'object' THEN 'configSecretDef is not a JSON object'
                  WHEN p.user_extension_def IS NOT NULL AND pg_catalog.jsonb_typeof(p.user_extension_j) IS DISTINCT FROM 'object' THEN 'userExtensionSecretDef is not a JSON object'
                  WHEN p.priority_class_def IS NOT NULL AND pg_catalog.jsonb_typeof(p.priority_class_j) IS DISTINCT FROM 'object' THEN 'priorityClassDef is not a JSON object'
                  WHEN p.docker_def IS NOT NULL AND pg_catalog.jsonb_typeof(p.docker_j) IS DISTINCT FROM 'object' THEN 'dockerSecretDef is not a JSON object'
                  WHEN p.token_def IS NOT NULL AND pg_catalog.jsonb_typeof(p.token_j) IS DISTINCT FROM 'object' THEN 'tokenSecretDef is not a JSON object'
             END) AS why
      FROM p),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %18$L AND j.relation = 'frameworks'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND COALESCE(q.name, '(no name)') = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %18$L, 'frameworks', COALESCE(q.name, '(no name)'), q.why FROM q WHERE q.why IS NOT NULL
    ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.framework (name, namespace, job_name, user_name, job_config, execution_type,
        virtual_cluster, job_priority, total_gpu_number, total_task_number, total_task_role_number,
        log_path_infix, creation_time, launch_time, completion_time, retries, retry_delay_time,
        platform_retries, resource_retries, user_retries, app_exit_code, sub_state, state,
        notification_at_running, notification_at_succeeded, notification_at_failed,
        notification_at_stopped, notification_at_retried,
        submission_time, snapshot_packed, request_generation, request_synced, api_server_deleted, archived,
        resource_version, config_secret_def, user_extension_secret_def, priority_class_def,
        docker_secret_def, token_secret_def, notified_at_running, notified_at_succeeded,
        notified_at_failed, notified_at_stopped, notified_at_retried, sent_generation, sent_at,
        inserted_at, updated_at)
    SELECT q.name, c.namespace, c.job_name, c.user_name, c.job_config, c.execution_type,
        c.virtual_cluster, c.job_priority, c.total_gpu_number, c.total_task_number, c.total_task_role_number,
        c.log_path_infix, c.creation_time, c.launch_time, c.completion_time, c.retries, c.retry_delay_time,
        c.platform_retries, c.resource_retries, c.user_retries, c.app_exit_code, c.sub_state, c.state,
        COALESCE(c.notification_at_running, false), COALESCE(c.notification_at_succeeded, false),
        COALESCE(c.notification_at_failed, false), COALESCE(c.notification_at_stopped, false),
        COALESCE(c.notification_at_retried, false),
        q.submission_time, paidb.pack_snapshot(q.snapshot, c.job_config), q.request_generation,
        q.request_synced, q.api_server_deleted, q.archived,
        q.resource_version,
        -- a job gone from the API server keeps no secrets (as a DELETED event clears them)
        CASE WHEN NOT q.api_server_deleted THEN q.config_j END,
        CASE WHEN NOT q.api_server_deleted THEN q.user_extension_j END,
        CASE WHEN NOT q.api_server_deleted THEN q.priority_class_j END,
        CASE WHEN NOT q.api_server_deleted THEN q.docker_j END,
        CASE WHEN NOT q.api_server_deleted THEN q.token_j END,
        q.notified_at_running, q.notified_at_succeeded, q.notified_at_failed, q.notified_at_stopped,
        q.notified_at_retried,
        -- what OpenPAI had synced counts as sent: the sync worker has nothing to send
        CASE WHEN q.request_synced THEN q.request_generation END,
        CASE WHEN q.request_synced THEN pg_catalog.now() END,
        q.inserted_at, q.updated_at
      FROM q CROSS JOIN LATERAL paidb.snapshot_columns(q.snapshot) c
     WHERE q.why IS NULL
    ON CONFLICT (name) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL),
       (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NULL)
$q$,
        openpai.source_column(source_schema, 'frameworks', 'submissionTime', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'frameworks', 'requestSynced', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'apiServerDeleted', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'archived', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'frameworks', 'updatedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'frameworks', 'notifiedAtRunning', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'notifiedAtSucceeded', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'notifiedAtFailed', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'notifiedAtStopped', 'pg_catalog.bool'),
        openpai.source_column(source_schema, 'frameworks', 'notifiedAtRetried', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'frameworks', 'configSecretDef', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'frameworks', 'userExtensionSecretDef', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'frameworks', 'priorityClassDef', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'frameworks', 'dockerSecretDef', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'frameworks', 'tokenSecretDef', 'pg_catalog.text'),
        source_schema, source_schema);
    EXECUTE sql INTO n_imported, n_skipped, n_taken;
    IF n_taken > n_imported THEN
        RAISE NOTICE '% jobs of %.frameworks were in paidb already and were left as they are',
            n_taken - n_imported, source_schema;
    END IF;
    relation := 'frameworks'; imported := n_imported; skipped := n_skipped;
    RETURN NEXT;

    -- the rows that hang off a job: taken when their job is in paidb
    FOR rel, sql IN VALUES
      ('framework_history', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, %1$s AS attempt_index,
           COALESCE(%2$s, 'retry') AS history_type, openpai.try_jsonb(s.snapshot::text) AS snapshot,
           s.snapshot IS NULL AS no_snapshot,
           COALESCE(%3$s, %4$s, pg_catalog.now()) AS inserted_at, COALESCE(%4$s, pg_catalog.now()) AS updated_at
      FROM ONLY %5$I.framework_history s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.snapshot IS NULL AND NOT s.no_snapshot THEN 'snapshot is not valid JSON' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %6$L AND j.relation = 'framework_history'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %6$L, 'framework_history', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, history_type, snapshot_packed,
        inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.attempt_index, q.history_type, paidb.pack_snapshot(q.snapshot),
        q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT (uid) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'framework_history', 'attemptIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'framework_history', 'historyType', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_history', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'framework_history', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema)),
      ('task_history', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, %1$s AS attempt_index,
           %2$s AS taskrole_name, %3$s AS task_name, %4$s AS task_index, s."taskUid"::text AS task_uid,
           %5$s AS task_attempt_index, %6$s AS pod_uid, COALESCE(%7$s, 'retry') AS history_type,
           openpai.try_jsonb(s.snapshot::text) AS snapshot, s.snapshot IS NULL AS no_snapshot,
           COALESCE(%8$s, %9$s, pg_catalog.now()) AS inserted_at, COALESCE(%9$s, pg_catalog.now()) AS updated_at
      FROM ONLY %10$I.task_history s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.task_uid IS NULL THEN 'no taskUid'
                     WHEN s.snapshot IS NULL AND NOT s.no_snapshot THEN 'snapshot is not valid JSON' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %11$L AND j.relation = 'task_history'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %11$L, 'task_history', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.task_history (uid, framework_name, attempt_index, taskrole_name, task_name, task_index,
                                    task_uid, task_attempt_index, pod_uid, history_type, snapshot, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.attempt_index, q.taskrole_name, q.task_name, q.task_index, q.task_uid,
           q.task_attempt_index, q.pod_uid, q.history_type, q.snapshot, q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT (uid) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'task_history', 'attemptIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'task_history', 'taskroleName', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'task_history', 'taskName', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'task_history', 'taskIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'task_history', 'taskAttemptIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'task_history', 'podUid', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'task_history', 'historyType', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'task_history', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'task_history', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema)),
      ('pods', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, %1$s AS attempt_index,
           %2$s AS taskrole_name, %3$s AS taskrole_index, %4$s AS task_attempt_index,
           openpai.try_jsonb(s.snapshot::text) AS snapshot, s.snapshot IS NULL AS no_snapshot,
           COALESCE(%5$s, %6$s, pg_catalog.now()) AS inserted_at, COALESCE(%6$s, pg_catalog.now()) AS updated_at
      FROM ONLY %7$I.pods s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.snapshot IS NULL AND NOT s.no_snapshot THEN 'snapshot is not valid JSON' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %8$L AND j.relation = 'pods'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %8$L, 'pods', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.pod (uid, framework_name, attempt_index, taskrole_name, taskrole_index, task_attempt_index,
                           snapshot, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.attempt_index, q.taskrole_name, q.taskrole_index, q.task_attempt_index,
           q.snapshot, q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT (uid) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'pods', 'attemptIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'pods', 'taskroleName', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'pods', 'taskroleIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'pods', 'taskAttemptIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'pods', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'pods', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema)),
      ('framework_events', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, %1$s AS pod_uid,
           %2$s AS taskrole_name, %3$s AS task_name, %4$s AS task_index, s.type::text AS type,
           %5$s AS reason, %6$s AS message, %7$s AS first_timestamp, %8$s AS last_timestamp,
           %9$s AS count, %10$s AS source_component, %11$s AS source_host,
           openpai.try_jsonb(%12$s) AS event, %12$s IS NULL AS no_event,
           COALESCE(%13$s, %14$s, pg_catalog.now()) AS inserted_at, COALESCE(%14$s, pg_catalog.now()) AS updated_at
      FROM ONLY %15$I.framework_events s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.type IS NULL THEN 'no type'
                     WHEN s.event IS NULL AND NOT s.no_event THEN 'event is not valid JSON' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %16$L AND j.relation = 'framework_events'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %16$L, 'framework_events', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.framework_event (uid, framework_name, pod_uid, taskrole_name, task_name, task_index, type,
                                       reason, message, first_timestamp, last_timestamp, count,
                                       source_component, source_host, event, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.pod_uid, q.taskrole_name, q.task_name, q.task_index, q.type, q.reason,
           q.message, q.first_timestamp, q.last_timestamp, q.count, q.source_component, q.source_host, q.event,
           q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT (uid) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'framework_events', 'podUid', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'taskroleName', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'taskName', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'taskIndex', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'framework_events', 'reason', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'message', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'firstTimestamp', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'framework_events', 'lastTimestamp', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'framework_events', 'count', 'pg_catalog.int4'),
        openpai.source_column(source_schema, 'framework_events', 'sourceComponent', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'sourceHost', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'event', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'framework_events', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'framework_events', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema)),
      ('pod_events', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, s."podUid"::text AS pod_uid,
           s.type::text AS type, %1$s AS message, openpai.try_jsonb(%2$s) AS event, %2$s IS NULL AS no_event,
           COALESCE(%3$s, %4$s, pg_catalog.now()) AS inserted_at, COALESCE(%4$s, pg_catalog.now()) AS updated_at
      FROM ONLY %5$I.pod_events s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.pod_uid IS NULL THEN 'no podUid'
                     WHEN s.type IS NULL THEN 'no type'
                     WHEN s.event IS NULL AND NOT s.no_event THEN 'event is not valid JSON' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %6$L AND j.relation = 'pod_events'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %6$L, 'pod_events', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.pod_event (uid, framework_name, pod_uid, type, message, event, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.pod_uid, q.type, q.message, q.event, q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT (uid) DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'pod_events', 'message', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'pod_events', 'event', 'pg_catalog.text'),
        openpai.source_column(source_schema, 'pod_events', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'pod_events', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema)),
      ('tags', pg_catalog.format($q$
WITH s AS (
    SELECT s.uid::text AS uid, s."frameworkName"::text AS framework_name, s.name::text AS name,
           COALESCE(%1$s, %2$s, pg_catalog.now()) AS inserted_at, COALESCE(%2$s, pg_catalog.now()) AS updated_at
      FROM ONLY %3$I.tags s),
q AS MATERIALIZED (
    SELECT s.*, CASE WHEN NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.framework_name)
                     THEN pg_catalog.format('its job "%%s" is not in paidb', s.framework_name)
                     WHEN s.name IS NULL THEN 'no name' END AS why
      FROM s),
cleared AS (
    -- rows rejected before and taken now (or gone) are no longer rejects
    DELETE FROM openpai.import_rejects j WHERE j.source_schema = %4$L AND j.relation = 'tags'
       AND NOT EXISTS (SELECT 1 FROM q WHERE q.why IS NOT NULL AND q.uid = j.key)),
rejected AS (
    INSERT INTO openpai.import_rejects (source_schema, relation, key, reason)
    SELECT %4$L, 'tags', q.uid, q.why FROM q WHERE q.why IS NOT NULL ON CONFLICT DO NOTHING RETURNING 1),
inserted AS (
    INSERT INTO paidb.tag (uid, framework_name, name, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.name, q.inserted_at, q.updated_at
      FROM q WHERE q.why IS NULL ON CONFLICT DO NOTHING RETURNING 1)
SELECT (SELECT pg_catalog.count(*) FROM inserted), (SELECT pg_catalog.count(*) FROM q WHERE q.why IS NOT NULL)
$q$,
        openpai.source_column(source_schema, 'tags', 'insertedAt', 'pg_catalog.timestamptz'),
        openpai.source_column(source_schema, 'tags', 'updatedAt', 'pg_catalog.timestamptz'),
        source_schema, source_schema))
    LOOP
        EXECUTE sql INTO n_imported, n_skipped;
        relation := rel; imported := n_imported; skipped := n_skipped;
        RETURN NEXT;
    END LOOP;

    -- say where the rejected rows are, and name the first few
    FOR r IN SELECT j.relation AS rel, j.key, j.reason, pg_catalog.count(*) OVER (PARTITION BY j.relation) AS n,
                    pg_catalog.row_number() OVER (PARTITION BY j.relation ORDER BY j.key) AS k
               FROM openpai.import_rejects j WHERE j.source_schema = import_database.source_schema LOOP
        IF r.k <= 10 THEN
            RAISE NOTICE '%.% row "%" not imported: %', source_schema, r.rel, r.key, r.reason;
        ELSIF r.k = 11 THEN
            RAISE NOTICE '... and % more rows of %.%', r.n - 10, source_schema, r.rel;
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM openpai.import_rejects j WHERE j.source_schema = import_database.source_schema) THEN
        RAISE NOTICE 'rows not imported are listed in openpai.import_rejects';
    END IF;
    -- fold the import's count deltas into paidb.job_count now: until the
    -- retention worker's next compaction every count would read them all
    PERFORM paidb.compact_job_counts();
    -- the sync worker sends what OpenPAI had not synced yet and deletes completed jobs
    PERFORM paidb.wakeup();
END
$fn$;

-- paidb 0.3 stores snapshots packed (paidb.framework.snapshot_packed, issue
-- 19): the two views read them through paidb.unpack_snapshot, naming the
-- columns (the views run with the caller's rights, and paidb_reader may
-- read columns, not whole rows).  While paidb converts a 0.2 database's
-- rows after its update, they read 0.2's column snapshot_0_2 where a row is
-- not packed yet (converting); paidb calls this again, with false, just
-- before it drops that column.
CREATE FUNCTION openpai._define_snapshot_views(converting boolean) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    EXECUTE pg_catalog.format($v$
CREATE OR REPLACE VIEW openpai.frameworks WITH (security_invoker = true) AS
SELECT f.inserted_at AS "insertedAt",
       s.name,
       f.namespace,
       s.job_name AS "jobName",
       s.user_name AS "userName",
       f.job_config AS "jobConfig",
       s.execution_type AS "executionType",
       s.creation_time AS "creationTime",
       s.launch_time AS "launchTime",
       s.virtual_cluster AS "virtualCluster",
       s.job_priority AS "jobPriority",
       s.total_gpu_number AS "totalGpuNumber",
       s.total_task_number AS "totalTaskNumber",
       s.total_task_role_number AS "totalTaskRoleNumber",
       f.log_path_infix AS "logPathInfix",
       s.submission_time AS "submissionTime",
       NULL::text AS "dockerSecretDef",
       NULL::text AS "configSecretDef",
       NULL::text AS "userExtensionSecretDef",
       NULL::text AS "tokenSecretDef",
       NULL::text AS "priorityClassDef",
       s.retries,
       s.retry_delay_time AS "retryDelayTime",
       s.platform_retries AS "platformRetries",
       s.resource_retries AS "resourceRetries",
       s.user_retries AS "userRetries",
       s.completion_time AS "completionTime",
       s.app_exit_code AS "appExitCode",
       s.sub_state AS "subState",
       s.state,
       %1$s::text AS snapshot,
       f.request_synced AS "requestSynced",
       f.api_server_deleted AS "apiServerDeleted",
       s.archived,
       f.notification_at_running AS "notificationAtRunning",
       f.notified_at_running AS "notifiedAtRunning",
       f.notification_at_succeeded AS "notificationAtSucceeded",
       f.notified_at_succeeded AS "notifiedAtSucceeded",
       f.notification_at_failed AS "notificationAtFailed",
       f.notified_at_failed AS "notifiedAtFailed",
       f.notification_at_stopped AS "notificationAtStopped",
       f.notified_at_stopped AS "notifiedAtStopped",
       f.notification_at_retried AS "notificationAtRetried",
       f.notified_at_retried AS "notifiedAtRetried",
       f.updated_at AS "updatedAt"
  FROM paidb.job_summary s LEFT JOIN paidb.framework f ON f.name OPERATOR(pg_catalog.=) s.name;

CREATE OR REPLACE VIEW openpai.framework_history WITH (security_invoker = true) AS
SELECT h.inserted_at AS "insertedAt",
       h.uid,
       h.framework_name AS "frameworkName",
       h.attempt_index AS "attemptIndex",
       h.history_type AS "historyType",
       %2$s::text AS snapshot,
       h.updated_at AS "updatedAt"
  FROM paidb.framework_history h;
$v$,
        CASE WHEN converting
             THEN 'COALESCE(paidb.unpack_snapshot(f.snapshot_packed, f.job_config), f.snapshot_0_2)'
             ELSE 'paidb.unpack_snapshot(f.snapshot_packed, f.job_config)' END,
        CASE WHEN converting
             THEN 'COALESCE(paidb.unpack_snapshot(h.snapshot_packed), h.snapshot_0_2)'
             ELSE 'paidb.unpack_snapshot(h.snapshot_packed)' END);
END
$fn$;
REVOKE ALL ON FUNCTION openpai._define_snapshot_views(boolean) FROM PUBLIC;
SELECT openpai._define_snapshot_views(EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
    WHERE attrelid = 'paidb.framework'::pg_catalog.regclass AND attname = 'snapshot_0_2' AND NOT attisdropped));

-- paidb's update kept 0.2's column while these views read it: with no rows
-- left to convert (a fresh install), paidb's conversion ends now.
DO $do$
BEGIN
    WHILE paidb._finish_snapshot_conversion() IN ('checking', 'validated') LOOP
    END LOOP;
END
$do$;
