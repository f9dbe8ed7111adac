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

CREATE VIEW openpai.frameworks WITH (security_invoker = true) AS
SELECT f.inserted_at AS "insertedAt",
       f.name,
       f.namespace,
       f.job_name AS "jobName",
       f.user_name AS "userName",
       f.job_config AS "jobConfig",
       f.execution_type AS "executionType",
       f.creation_time AS "creationTime",
       f.launch_time AS "launchTime",
       f.virtual_cluster AS "virtualCluster",
       f.job_priority AS "jobPriority",
       f.total_gpu_number AS "totalGpuNumber",
       f.total_task_number AS "totalTaskNumber",
       f.total_task_role_number AS "totalTaskRoleNumber",
       f.log_path_infix AS "logPathInfix",
       f.submission_time AS "submissionTime",
       NULL::text AS "dockerSecretDef",
       NULL::text AS "configSecretDef",
       NULL::text AS "userExtensionSecretDef",
       NULL::text AS "tokenSecretDef",
       NULL::text AS "priorityClassDef",
       f.retries,
       f.retry_delay_time AS "retryDelayTime",
       f.platform_retries AS "platformRetries",
       f.resource_retries AS "resourceRetries",
       f.user_retries AS "userRetries",
       f.completion_time AS "completionTime",
       f.app_exit_code AS "appExitCode",
       f.sub_state AS "subState",
       f.state,
       f.snapshot::text AS snapshot,
       f.request_synced AS "requestSynced",
       f.api_server_deleted AS "apiServerDeleted",
       f.archived,
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
  FROM paidb.framework f;

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
    SELECT n.key INTO changed
      FROM pg_catalog.jsonb_each(pg_catalog.to_jsonb(NEW)) n
      JOIN pg_catalog.jsonb_each(pg_catalog.to_jsonb(OLD)) o USING (key)
     WHERE n.value IS DISTINCT FROM o.value
       AND n.key NOT IN ('notifiedAtRunning', 'notifiedAtSucceeded', 'notifiedAtFailed',
                         'notifiedAtStopped', 'notifiedAtRetried', 'updatedAt')
     LIMIT 1;
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
