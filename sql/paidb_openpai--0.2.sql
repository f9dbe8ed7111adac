-- paidb_openpai 0.2 — install script (SPEC §9).  OpenPAI's relations, with
-- OpenPAI's camelCase columns, as views over paidb's tables; the writes
-- OpenPAI's components make, through paidb's writers; and the import of an
-- OpenPAI database.  Safe under any search_path: every name is
-- schema-qualified and every SECURITY DEFINER function pins its search_path.

\echo Use "CREATE EXTENSION paidb_openpai" to load this file. \quit

-------------------------------------------------------------------------------
-- Views.  security_invoker: a view reads paidb's tables with the rights of
-- whoever queries it, so it can never widen paidb_reader's column grants.
-- The add-on definitions (secrets) are always NULL here as well.
-- Column order is that of the tables OpenPAI's Sequelize models create.
-------------------------------------------------------------------------------

-- The listed columns come from paidb.job_summary (docs/queries.md); the
-- LEFT JOIN on paidb.framework's primary key is removed by the planner from
-- every query that uses none of its columns (rest-server's lists and counts).
CREATE VIEW openpai.frameworks WITH (security_invoker = true) AS
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
       f.snapshot::text AS snapshot,
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

-- rest-server's counts (SELECT count(*) FROM frameworks WHERE ...) whose
-- filter reads only these columns are answered from here: paidb rewrites
-- them after parse analysis (src/openpai_counts.c; paidb.openpai_count_rewrite)
-- into openpai.sum_counts(n) with the same filter.  The counts are kept in
-- the transactions that change the jobs, so the sum is exact.  Not grouped
-- by key (paidb.job_counts is): a sum over every key of a million jobs'
-- counts needs no grouping, and grouping tens of thousands of keys costs
-- more than the count it replaces.
CREATE VIEW openpai.framework_counts WITH (security_invoker = true) AS
SELECT c.user_name AS "userName",
       c.virtual_cluster AS "virtualCluster",
       c.state,
       c.job_priority AS "jobPriority",
       c.archived,
       c.n
  FROM paidb.job_count c
UNION ALL
SELECT d.user_name, d.virtual_cluster, d.state, d.job_priority, d.archived, d.n::bigint
  FROM paidb.job_count_delta d;
COMMENT ON VIEW openpai.framework_counts IS 'Job counts and their uncompacted changes: sum n by (userName, virtualCluster, state, jobPriority, archived)';

-- sum() of bigint is numeric; a count is bigint, and 0 when nothing matches
CREATE AGGREGATE openpai.sum_counts(bigint) (
    SFUNC = pg_catalog.int8pl,
    STYPE = bigint,
    INITCOND = '0',
    COMBINEFUNC = pg_catalog.int8pl,
    PARALLEL = SAFE
);

CREATE VIEW openpai.framework_history WITH (security_invoker = true) AS
SELECT h.inserted_at AS "insertedAt",
       h.uid,
       h.framework_name AS "frameworkName",
       h.attempt_index AS "attemptIndex",
       h.history_type AS "historyType",
       h.snapshot::text AS snapshot,
       h.updated_at AS "updatedAt"
  FROM paidb.framework_history h;

CREATE VIEW openpai.task_history WITH (security_invoker = true) AS
SELECT t.inserted_at AS "insertedAt",
       t.uid,
       t.framework_name AS "frameworkName",
       t.attempt_index AS "attemptIndex",
       t.taskrole_name AS "taskroleName",
       t.task_name AS "taskName",
       t.task_index AS "taskIndex",
       t.task_uid AS "taskUid",
       t.task_attempt_index AS "taskAttemptIndex",
       t.pod_uid AS "podUid",
       t.history_type AS "historyType",
       t.snapshot::text AS snapshot,
       t.updated_at AS "updatedAt"
  FROM paidb.task_history t;

CREATE VIEW openpai.pods WITH (security_invoker = true) AS
SELECT p.inserted_at AS "insertedAt",
       p.uid,
       p.framework_name AS "frameworkName",
       p.attempt_index AS "attemptIndex",
       p.taskrole_name AS "taskroleName",
       p.taskrole_index AS "taskroleIndex",
       p.task_attempt_index AS "taskAttemptIndex",
       p.snapshot::text AS snapshot,
       p.updated_at AS "updatedAt"
  FROM paidb.pod p;

CREATE VIEW openpai.framework_events WITH (security_invoker = true) AS
SELECT e.inserted_at AS "insertedAt",
       e.uid,
       e.framework_name AS "frameworkName",
       e.pod_uid AS "podUid",
       e.taskrole_name AS "taskroleName",
       e.task_name AS "taskName",
       e.task_index AS "taskIndex",
       e.type,
       e.reason,
       e.message,
       e.first_timestamp AS "firstTimestamp",
       e.last_timestamp AS "lastTimestamp",
       e.count,
       e.source_component AS "sourceComponent",
       e.source_host AS "sourceHost",
       e.event::text AS event,
       e.updated_at AS "updatedAt"
  FROM paidb.framework_event e;

CREATE VIEW openpai.pod_events WITH (security_invoker = true) AS
SELECT e.inserted_at AS "insertedAt",
       e.uid,
       e.framework_name AS "frameworkName",
       e.pod_uid AS "podUid",
       e.type,
       e.message,
       e.event::text AS event,
       e.updated_at AS "updatedAt"
  FROM paidb.pod_event e;

CREATE VIEW openpai.tags WITH (security_invoker = true) AS
SELECT t.inserted_at AS "insertedAt",
       t.uid,
       t.framework_name AS "frameworkName",
       t.name,
       t.updated_at AS "updatedAt"
  FROM paidb.tag t;

COMMENT ON VIEW openpai.frameworks IS 'OpenPAI''s "frameworks" table over paidb.framework; add-on definitions always NULL';
COMMENT ON VIEW openpai.framework_history IS 'OpenPAI''s "framework_history" over paidb.framework_history';
COMMENT ON VIEW openpai.task_history IS 'OpenPAI''s "task_history" over paidb.task_history';
COMMENT ON VIEW openpai.pods IS 'OpenPAI''s "pods" over paidb.pod';
COMMENT ON VIEW openpai.framework_events IS 'OpenPAI''s "framework_events" over paidb.framework_event';
COMMENT ON VIEW openpai.pod_events IS 'OpenPAI''s "pod_events" over paidb.pod_event';
COMMENT ON VIEW openpai.tags IS 'OpenPAI''s "tags" over paidb.tag';

-------------------------------------------------------------------------------
-- Writes (SPEC §9).  INSTEAD OF triggers, SECURITY DEFINER: nobody but the
-- owner writes paidb's tables, so these functions are the only way in.
-------------------------------------------------------------------------------

-- Tags: Sequelize's findOrCreate inserts (with RETURNING, inside a
-- transaction, from a pg_temp function in some versions).  A tag the job
-- already has — under any uid — is no error: the stored row is returned.
CREATE FUNCTION openpai.tags_insert()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    stored paidb.tag;
BEGIN
    IF NEW."frameworkName" IS NULL OR NEW.name IS NULL THEN
        RAISE EXCEPTION 'a tag needs "frameworkName" and "name"'
            USING ERRCODE = 'not_null_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM paidb.framework WHERE name = NEW."frameworkName") THEN
        RAISE EXCEPTION 'job "%" does not exist', NEW."frameworkName"
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Tags can only be added to jobs in paidb.framework.';
    END IF;
    INSERT INTO paidb.tag AS t (uid, framework_name, name, inserted_at, updated_at)
    VALUES (COALESCE(NEW.uid, pg_catalog.md5(NEW."frameworkName" || '+' || NEW.name)),
            NEW."frameworkName", NEW.name,
            COALESCE(NEW."insertedAt", pg_catalog.now()),
            COALESCE(NEW."updatedAt", pg_catalog.now()))
    ON CONFLICT DO NOTHING;
    SELECT * INTO stored FROM paidb.tag
     WHERE framework_name = NEW."frameworkName" AND name = NEW.name;
    IF NOT FOUND THEN
        -- the uid is taken by another job's tag
        RAISE EXCEPTION 'duplicate key value violates unique constraint "tag_pkey"'
            USING ERRCODE = 'unique_violation',
                  DETAIL = pg_catalog.format('Key (uid)=(%s) already exists.', NEW.uid);
    END IF;
    NEW."insertedAt" := stored.inserted_at;
    NEW.uid := stored.uid;
    NEW."updatedAt" := stored.updated_at;
    RETURN NEW;
END
$fn$;

-- Sequelize's destroy: DELETE ... WHERE; the row count is what was deleted.
CREATE FUNCTION openpai.tags_delete()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
BEGIN
    DELETE FROM paidb.tag WHERE uid = OLD.uid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN OLD;
END
$fn$;

CREATE TRIGGER tags_insert INSTEAD OF INSERT ON openpai.tags
    FOR EACH ROW EXECUTE FUNCTION openpai.tags_insert();
CREATE TRIGGER tags_delete INSTEAD OF DELETE ON openpai.tags
    FOR EACH ROW EXECUTE FUNCTION openpai.tags_delete();

-- The alert manager's notification updates (Sequelize save(): the changed
-- "notifiedAt*" columns and "updatedAt").  Everything else about a job
-- changes through paidb's functions only.
CREATE FUNCTION openpai.frameworks_update()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    changed text;
BEGIN
    -- cheap check first (a snapshot can be megabytes); name the column only on refusal
    IF ROW(
        NEW."insertedAt", NEW.name, NEW.namespace, NEW."jobName", NEW."userName", NEW."jobConfig",
        NEW."executionType", NEW."creationTime", NEW."launchTime", NEW."virtualCluster",
        NEW."jobPriority", NEW."totalGpuNumber", NEW."totalTaskNumber",
        NEW."totalTaskRoleNumber", NEW."logPathInfix", NEW."submissionTime",
        NEW."dockerSecretDef", NEW."configSecretDef", NEW."userExtensionSecretDef",
        NEW."tokenSecretDef", NEW."priorityClassDef", NEW.retries, NEW."retryDelayTime",
        NEW."platformRetries", NEW."resourceRetries", NEW."userRetries", NEW."completionTime",
        NEW."appExitCode", NEW."subState", NEW.state, NEW.snapshot, NEW."requestSynced",
        NEW."apiServerDeleted", NEW.archived, NEW."notificationAtRunning",
        NEW."notificationAtSucceeded", NEW."notificationAtFailed", NEW."notificationAtStopped",
        NEW."notificationAtRetried")
       IS DISTINCT FROM ROW(
        OLD."insertedAt", OLD.name, OLD.namespace, OLD."jobName", OLD."userName", OLD."jobConfig",
        OLD."executionType", OLD."creationTime", OLD."launchTime", OLD."virtualCluster",
        OLD."jobPriority", OLD."totalGpuNumber", OLD."totalTaskNumber",
        OLD."totalTaskRoleNumber", OLD."logPathInfix", OLD."submissionTime",
        OLD."dockerSecretDef", OLD."configSecretDef", OLD."userExtensionSecretDef",
        OLD."tokenSecretDef", OLD."priorityClassDef", OLD.retries, OLD."retryDelayTime",
        OLD."platformRetries", OLD."resourceRetries", OLD."userRetries", OLD."completionTime",
        OLD."appExitCode", OLD."subState", OLD.state, OLD.snapshot, OLD."requestSynced",
        OLD."apiServerDeleted", OLD.archived, OLD."notificationAtRunning",
        OLD."notificationAtSucceeded", OLD."notificationAtFailed", OLD."notificationAtStopped",
        OLD."notificationAtRetried") THEN
        SELECT n.key INTO changed
          FROM pg_catalog.jsonb_each(pg_catalog.to_jsonb(NEW)) n
          JOIN pg_catalog.jsonb_each(pg_catalog.to_jsonb(OLD)) o USING (key)
         WHERE n.value IS DISTINCT FROM o.value
           AND n.key NOT IN ('notifiedAtRunning', 'notifiedAtSucceeded', 'notifiedAtFailed',
                             'notifiedAtStopped', 'notifiedAtRetried', 'updatedAt')
         LIMIT 1;
    END IF;
    IF changed IS NOT NULL THEN
        RAISE EXCEPTION 'cannot update column "%" of view "frameworks"', changed
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Only the "notifiedAt*" columns can be updated here; jobs change through paidb.put_framework_request and paidb.patch_framework_request.';
    END IF;
    UPDATE paidb.framework
       SET notified_at_running = COALESCE(NEW."notifiedAtRunning", false),
           notified_at_succeeded = COALESCE(NEW."notifiedAtSucceeded", false),
           notified_at_failed = COALESCE(NEW."notifiedAtFailed", false),
           notified_at_stopped = COALESCE(NEW."notifiedAtStopped", false),
           notified_at_retried = COALESCE(NEW."notifiedAtRetried", 0),
           updated_at = pg_catalog.now()
     WHERE name = OLD.name
     RETURNING notified_at_running, notified_at_succeeded, notified_at_failed,
               notified_at_stopped, notified_at_retried, updated_at
      INTO NEW."notifiedAtRunning", NEW."notifiedAtSucceeded", NEW."notifiedAtFailed",
           NEW."notifiedAtStopped", NEW."notifiedAtRetried", NEW."updatedAt";
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$fn$;

CREATE TRIGGER frameworks_update INSTEAD OF UPDATE ON openpai.frameworks
    FOR EACH ROW EXECUTE FUNCTION openpai.frameworks_update();

-- fluentd's pgjson: framework attempt history, through record_history (the
-- same de-duplication as the watcher's: the most complete snapshot stays).
CREATE FUNCTION openpai.framework_history_insert()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    snap jsonb;
    hist_uid text;
BEGIN
    IF NEW.snapshot IS NULL THEN
        RAISE EXCEPTION 'a framework history row needs a snapshot'
            USING ERRCODE = 'not_null_violation';
    END IF;
    snap := NEW.snapshot::jsonb;
    IF pg_catalog.jsonb_typeof(snap) IS DISTINCT FROM 'object'
       OR snap #>> '{metadata,name}' IS DISTINCT FROM COALESCE(NEW."frameworkName", snap #>> '{metadata,name}')
       OR (NEW."attemptIndex" IS NOT NULL
           AND snap #>> '{status,attemptStatus,id}' IS DISTINCT FROM NEW."attemptIndex"::text) THEN
        RAISE EXCEPTION 'the snapshot does not match "frameworkName" and "attemptIndex"'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The snapshot''s metadata.name and status.attemptStatus.id name the attempt.';
    END IF;
    hist_uid := paidb.record_history(snap, COALESCE(NEW."historyType", 'retry'));
    IF NEW.uid IS NOT NULL AND NEW.uid <> hist_uid THEN
        RAISE EXCEPTION 'uid "%" is not the history uid of that attempt', NEW.uid
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The uid is md5(frameworkName + ''+'' + attemptIndex + ''+'' + historyType): %s.', hist_uid);
    END IF;
    SELECT h.inserted_at, h.uid, h.framework_name, h.attempt_index, h.history_type,
           h.snapshot::text, h.updated_at
      INTO NEW."insertedAt", NEW.uid, NEW."frameworkName", NEW."attemptIndex",
           NEW."historyType", NEW.snapshot, NEW."updatedAt"
      FROM paidb.framework_history h WHERE h.uid = hist_uid;
    RETURN NEW;
END
$fn$;

CREATE TRIGGER framework_history_insert INSTEAD OF INSERT ON openpai.framework_history
    FOR EACH ROW EXECUTE FUNCTION openpai.framework_history_insert();

-- fluentd's pgjson: task attempt history, through the writer the framework
-- watcher uses (paidb.record_task_history).
CREATE FUNCTION openpai.task_history_insert()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
DECLARE
    hist_uid text;
BEGIN
    IF NEW."frameworkName" IS NULL OR NEW."taskUid" IS NULL OR NEW.snapshot IS NULL THEN
        RAISE EXCEPTION 'a task history row needs "frameworkName", "taskUid" and a snapshot'
            USING ERRCODE = 'not_null_violation';
    END IF;
    hist_uid := paidb.record_task_history(NEW.snapshot::jsonb, NEW."frameworkName",
                                     NEW."attemptIndex", NEW."taskroleName", NEW."taskName",
                                     NEW."taskIndex", NEW."taskUid", NEW."taskAttemptIndex",
                                     NEW."podUid", COALESCE(NEW."historyType", 'retry'));
    IF NEW.uid IS NOT NULL AND NEW.uid <> hist_uid THEN
        RAISE EXCEPTION 'uid "%" is not the history uid of that task attempt', NEW.uid
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The uid is md5(taskUid + ''+'' + taskAttemptIndex + ''+'' + historyType): %s.', hist_uid);
    END IF;
    SELECT t.inserted_at, t.uid, t.updated_at, t.snapshot::text
      INTO NEW."insertedAt", NEW.uid, NEW."updatedAt", NEW.snapshot
      FROM paidb.task_history t WHERE t.uid = hist_uid;
    RETURN NEW;
END
$fn$;

CREATE TRIGGER task_history_insert INSTEAD OF INSERT ON openpai.task_history
    FOR EACH ROW EXECUTE FUNCTION openpai.task_history_insert();

-- fluentd's pgjson: deleted pods, keyed by the pod uid; the first one stays.
CREATE FUNCTION openpai.pods_insert()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, paidb
AS $fn$
BEGIN
    IF NEW.uid IS NULL OR NEW."frameworkName" IS NULL THEN
        RAISE EXCEPTION 'a pod row needs "uid" and "frameworkName"'
            USING ERRCODE = 'not_null_violation';
    END IF;
    INSERT INTO paidb.pod (uid, framework_name, attempt_index, taskrole_name, taskrole_index,
                           task_attempt_index, snapshot, inserted_at, updated_at)
    VALUES (NEW.uid, NEW."frameworkName", NEW."attemptIndex", NEW."taskroleName",
            NEW."taskroleIndex", NEW."taskAttemptIndex", NEW.snapshot::jsonb,
            COALESCE(NEW."insertedAt", pg_catalog.now()), COALESCE(NEW."updatedAt", pg_catalog.now()))
    ON CONFLICT (uid) DO NOTHING;
    SELECT p.inserted_at, p.framework_name, p.attempt_index, p.taskrole_name, p.taskrole_index,
           p.task_attempt_index, p.snapshot::text, p.updated_at
      INTO NEW."insertedAt", NEW."frameworkName", NEW."attemptIndex", NEW."taskroleName",
           NEW."taskroleIndex", NEW."taskAttemptIndex", NEW.snapshot, NEW."updatedAt"
      FROM paidb.pod p WHERE p.uid = NEW.uid;
    RETURN NEW;
END
$fn$;

CREATE TRIGGER pods_insert INSTEAD OF INSERT ON openpai.pods
    FOR EACH ROW EXECUTE FUNCTION openpai.pods_insert();

-- Every other write is refused, even for the owner: without these triggers
-- PostgreSQL would make the simple views updatable straight through to
-- paidb's tables.
CREATE FUNCTION openpai.refuse_write()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog
AS $fn$
BEGIN
    RAISE EXCEPTION 'cannot % view "%"',
        CASE TG_OP WHEN 'INSERT' THEN 'insert into' WHEN 'DELETE' THEN 'delete from' ELSE 'update' END,
        TG_TABLE_NAME
        USING ERRCODE = 'feature_not_supported',
              HINT = 'OpenPAI''s views take tag inserts and deletes, "notifiedAt*" updates of frameworks, and inserts into framework_history, task_history and pods; jobs change through paidb''s functions.';
END
$fn$;

CREATE TRIGGER refuse_write INSTEAD OF INSERT OR DELETE ON openpai.frameworks
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF UPDATE ON openpai.tags
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF UPDATE OR DELETE ON openpai.framework_history
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF UPDATE OR DELETE ON openpai.task_history
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF UPDATE OR DELETE ON openpai.pods
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF INSERT OR UPDATE OR DELETE ON openpai.framework_events
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();
CREATE TRIGGER refuse_write INSTEAD OF INSERT OR UPDATE OR DELETE ON openpai.pod_events
    FOR EACH ROW EXECUTE FUNCTION openpai.refuse_write();

-------------------------------------------------------------------------------
-- Privileges (SPEC §9)
-------------------------------------------------------------------------------

GRANT USAGE ON SCHEMA openpai TO paidb_writer, paidb_reader;
REVOKE ALL ON ALL TABLES IN SCHEMA openpai FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA openpai TO paidb_writer, paidb_reader;
GRANT INSERT, DELETE ON openpai.tags TO paidb_writer;
GRANT UPDATE ("notifiedAtRunning", "notifiedAtSucceeded", "notifiedAtFailed",
              "notifiedAtStopped", "notifiedAtRetried", "updatedAt")
    ON openpai.frameworks TO paidb_writer;
GRANT INSERT ON openpai.framework_history, openpai.task_history, openpai.pods TO paidb_writer;
-- The trigger functions run only as triggers; nobody calls them directly.
REVOKE ALL ON FUNCTION openpai.tags_insert(), openpai.tags_delete(),
    openpai.frameworks_update(), openpai.framework_history_insert(),
    openpai.task_history_insert(), openpai.pods_insert(), openpai.refuse_write() FROM PUBLIC;

-------------------------------------------------------------------------------
-- Import of an OpenPAI database (SPEC §9)
-------------------------------------------------------------------------------

-- Rows import_database could not take, with the reason; one row per source
-- row (a second import of the same schema adds nothing).
CREATE TABLE openpai.import_rejects (
    source_schema name NOT NULL,
    relation text NOT NULL,
    key text NOT NULL,
    reason text NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (source_schema, relation, key)
);
COMMENT ON TABLE openpai.import_rejects IS 'Rows of an OpenPAI database that openpai.import_database did not take, and why';

-- JSON text as jsonb, or NULL when it is not JSON (never an error).
CREATE FUNCTION openpai.try_jsonb(json_text text)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'paidb_openpai_try_jsonb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The snapshot paidb stores for an OpenPAI framework row (paidb's own code:
-- decompressed, requestGeneration set), or why the row cannot be taken.
CREATE FUNCTION openpai.import_snapshot(source_snapshot text, source_name text,
    OUT snapshot jsonb, OUT request_generation bigint, OUT resource_version bigint,
    OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'paidb_openpai_import_snapshot'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- A column of the source table as an SQL expression of the given type:
-- the column when the table has it, NULL when an older OpenPAI had not
-- added it yet.
CREATE FUNCTION openpai.source_column(source_schema name, source_table name, source_col name,
                                      sql_type text)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog
AS $fn$
    SELECT CASE WHEN EXISTS (
               SELECT 1 FROM pg_catalog.pg_attribute a
                 JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = source_schema AND c.relname = source_table
                  AND a.attname = source_col AND a.attnum > 0 AND NOT a.attisdropped)
           THEN pg_catalog.format('s.%I::%s', source_col, sql_type)
           ELSE pg_catalog.format('NULL::%s', sql_type) END
$fn$;

CREATE FUNCTION openpai.import_database(source_schema name)
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
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = source_schema) THEN
        RAISE EXCEPTION 'schema "%" does not exist', source_schema USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF source_schema IN ('paidb', 'openpai', 'pg_catalog', 'information_schema') THEN
        RAISE EXCEPTION 'schema "%" is not an OpenPAI database', source_schema
            USING ERRCODE = 'invalid_schema_name',
                  HINT = 'Give the schema that holds the tables of OpenPAI''s database-controller.';
    END IF;
    FOR tbl, col IN SELECT e.key, pg_catalog.jsonb_array_elements_text(e.value) FROM pg_catalog.jsonb_each(required) e LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = source_schema AND c.relname = tbl AND c.relkind IN ('r', 'p')) THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: it has no table "%"', source_schema, tbl
                USING ERRCODE = 'undefined_table',
                      DETAIL = 'OpenPAI v1.2 and later keep jobs in the tables frameworks, framework_history, task_history, pods, framework_events, pod_events and tags.';
        END IF;
        IF openpai.source_column(source_schema, tbl, col, 'text') LIKE 'NULL::%' THEN
            RAISE EXCEPTION 'schema "%" is not an OpenPAI database: table "%" has no column "%"', source_schema, tbl, col
                USING ERRCODE = 'undefined_column';
        END IF;
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
      FROM %17$I.frameworks s),
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
        submission_time, snapshot, request_generation, request_synced, api_server_deleted, archived,
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
        q.submission_time, q.snapshot, q.request_generation, q.request_synced, q.api_server_deleted, q.archived,
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
      FROM %5$I.framework_history s),
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
    INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, history_type, snapshot, inserted_at, updated_at)
    SELECT q.uid, q.framework_name, q.attempt_index, q.history_type, q.snapshot, q.inserted_at, q.updated_at
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
      FROM %10$I.task_history s),
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
      FROM %7$I.pods s),
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
      FROM %15$I.framework_events s),
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
      FROM %5$I.pod_events s),
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
      FROM %3$I.tags s),
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
    -- the sync worker sends what OpenPAI had not synced yet and deletes completed jobs
    PERFORM paidb.wakeup();
END
$fn$;

COMMENT ON FUNCTION openpai.import_database(name) IS 'Import the jobs of an OpenPAI v1.2+ database in another schema of this database (idempotent; see docs/openpai.md)';

REVOKE ALL ON FUNCTION openpai.try_jsonb(text), openpai.import_snapshot(text, text),
    openpai.source_column(name, name, name, text), openpai.import_database(name) FROM PUBLIC;
GRANT SELECT ON openpai.import_rejects TO paidb_writer;
