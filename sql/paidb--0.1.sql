-- paidb 0.1 — install script.  Safe under any search_path: every name is
-- schema-qualified, and SECURITY DEFINER functions pin their search_path.

\echo Use "CREATE EXTENSION paidb" to load this file. \quit

-------------------------------------------------------------------------------
-- Tables (SPEC §2)
-------------------------------------------------------------------------------

CREATE TABLE paidb.framework (
    name text PRIMARY KEY
        CONSTRAINT framework_name_valid CHECK (name OPERATOR(pg_catalog.~) '^[a-z0-9]{1,63}$'),
    namespace text,
    job_name text,
    user_name text,
    job_config text,
    execution_type text,
    virtual_cluster text,
    job_priority text,
    total_gpu_number integer,
    total_task_number integer,
    total_task_role_number integer,
    log_path_infix text,
    submission_time timestamptz NOT NULL,
    creation_time timestamptz,
    launch_time timestamptz,
    completion_time timestamptz,
    retries integer,
    retry_delay_time integer,
    platform_retries integer,
    resource_retries integer,
    user_retries integer,
    app_exit_code integer,
    sub_state text,
    state text,
    -- lz4: compressing snapshots with pglz was the largest single cost of a submission
    snapshot jsonb COMPRESSION lz4 NOT NULL,
    request_generation bigint NOT NULL,
    request_synced boolean NOT NULL DEFAULT false,
    api_server_deleted boolean NOT NULL DEFAULT false,
    archived boolean NOT NULL DEFAULT false,
    resource_version bigint,
    config_secret_def jsonb,
    user_extension_secret_def jsonb,
    priority_class_def jsonb,
    docker_secret_def jsonb,
    token_secret_def jsonb,
    notification_at_running boolean NOT NULL DEFAULT false,
    notified_at_running boolean NOT NULL DEFAULT false,
    notification_at_succeeded boolean NOT NULL DEFAULT false,
    notified_at_succeeded boolean NOT NULL DEFAULT false,
    notification_at_failed boolean NOT NULL DEFAULT false,
    notified_at_failed boolean NOT NULL DEFAULT false,
    notification_at_stopped boolean NOT NULL DEFAULT false,
    notified_at_stopped boolean NOT NULL DEFAULT false,
    notification_at_retried boolean NOT NULL DEFAULT false,
    notified_at_retried integer NOT NULL DEFAULT 0,
    -- Sync bookkeeping (docs/sync.md): which generation was last sent, when,
    -- and when the next attempt is due after a failure.
    sent_generation bigint,
    sent_at timestamptz,
    sync_failures integer NOT NULL DEFAULT 0,
    next_sync_at timestamptz,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
)
-- A status update rewrites the row: keep typical rows (a ~3-5 KB snapshot,
-- compressed) inline rather than in the TOAST table, and leave room on the
-- page for HOT updates.
WITH (toast_tuple_target = 4000, fillfactor = 75);

COMMENT ON TABLE paidb.framework IS 'One row per OpenPAI job: the request the user asked for and the last status seen in the API server';

CREATE INDEX framework_submission_time_idx ON paidb.framework (submission_time);
CREATE INDEX framework_user_name_idx ON paidb.framework (user_name, submission_time);
-- The sync worker's work list (SPEC §6) as an index scan.
CREATE INDEX framework_needs_sync_idx ON paidb.framework (next_sync_at NULLS FIRST, name)
    WHERE NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed');

CREATE TABLE paidb.framework_history (
    uid text PRIMARY KEY,
    framework_name text NOT NULL,
    attempt_index integer,
    history_type text NOT NULL DEFAULT 'retry',
    snapshot jsonb COMPRESSION lz4,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX framework_history_framework_name_idx ON paidb.framework_history (framework_name, attempt_index);

CREATE TABLE paidb.task_history (
    uid text PRIMARY KEY,
    framework_name text NOT NULL,
    attempt_index integer,
    taskrole_name text,
    task_name text,
    task_index integer,
    task_uid text NOT NULL,
    task_attempt_index integer,
    pod_uid text,
    history_type text NOT NULL DEFAULT 'retry',
    snapshot jsonb,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX task_history_task_uid_idx ON paidb.task_history (task_uid);
CREATE INDEX task_history_framework_name_idx ON paidb.task_history (framework_name);

CREATE TABLE paidb.pod (
    uid text PRIMARY KEY,
    framework_name text NOT NULL,
    attempt_index integer,
    taskrole_name text,
    taskrole_index integer,
    task_attempt_index integer,
    snapshot jsonb,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX pod_framework_name_idx ON paidb.pod (framework_name);

CREATE TABLE paidb.framework_event (
    uid text PRIMARY KEY,
    framework_name text NOT NULL,
    pod_uid text,
    taskrole_name text,
    task_name text,
    task_index integer,
    type text NOT NULL,
    reason text,
    message text,
    first_timestamp timestamptz,
    last_timestamp timestamptz,
    count integer,
    source_component text,
    source_host text,
    event jsonb,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX framework_event_framework_name_idx ON paidb.framework_event (framework_name, last_timestamp);

CREATE TABLE paidb.pod_event (
    uid text PRIMARY KEY,
    framework_name text NOT NULL,
    pod_uid text NOT NULL,
    type text NOT NULL,
    message text,
    event jsonb,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX pod_event_framework_name_idx ON paidb.pod_event (framework_name);

CREATE TABLE paidb.tag (
    uid text PRIMARY KEY DEFAULT pg_catalog.md5(pg_catalog.random()::text || pg_catalog.clock_timestamp()::text),
    framework_name text NOT NULL,
    name text NOT NULL,
    inserted_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT tag_framework_name_name_key UNIQUE (framework_name, name)
);

-- Frameworks seen in the API server but unknown to the database (SPEC §5.1),
-- waiting for the sync worker to delete them.
CREATE TABLE paidb.orphan (
    name text PRIMARY KEY,
    namespace text,
    uid text,
    resource_version bigint,
    failures integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    queued_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Where each watcher stands, so a restart resumes instead of listing again.
CREATE TABLE paidb.watch_state (
    watcher text PRIMARY KEY,
    resource_version text,
    listed_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- One-off facts about this installation, e.g. that existing frameworks were
-- imported (SPEC §6, the initializer).
CREATE TABLE paidb.installation (
    key text PRIMARY KEY,
    value text,
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-------------------------------------------------------------------------------
-- Functions (SPEC §3)
-------------------------------------------------------------------------------

CREATE FUNCTION paidb.jsonb_merge_patch(target jsonb, patch jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'paidb_jsonb_merge_patch'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION paidb.history_uid(framework_name text, attempt_index integer,
                                  history_type text DEFAULT 'retry')
RETURNS text
AS 'MODULE_PATHNAME', 'paidb_history_uid'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION paidb.framework_state(sub_state text, exit_code integer)
RETURNS text
AS 'MODULE_PATHNAME', 'paidb_framework_state'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- The columns paidb derives from a snapshot, exactly as every writer stores
-- them; useful to inspect what a snapshot will turn into.
CREATE FUNCTION paidb.snapshot_columns(snapshot jsonb,
    OUT name text, OUT namespace text, OUT job_name text, OUT user_name text,
    OUT job_config text, OUT execution_type text, OUT virtual_cluster text,
    OUT job_priority text, OUT total_gpu_number integer,
    OUT total_task_number integer, OUT total_task_role_number integer,
    OUT log_path_infix text, OUT creation_time timestamptz,
    OUT launch_time timestamptz, OUT completion_time timestamptz,
    OUT retries integer, OUT retry_delay_time integer,
    OUT platform_retries integer, OUT resource_retries integer,
    OUT user_retries integer, OUT app_exit_code integer, OUT sub_state text,
    OUT state text, OUT attempt_index integer,
    OUT notification_at_running boolean, OUT notification_at_succeeded boolean,
    OUT notification_at_failed boolean, OUT notification_at_stopped boolean,
    OUT notification_at_retried boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'paidb_snapshot_columns'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- A snapshot with status.attemptStatus.taskRoleStatusesCompressed replaced
-- by the decompressed taskRoleStatuses array.
CREATE FUNCTION paidb.decompress_snapshot(snapshot jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'paidb_decompress_snapshot'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION paidb.record_history(snapshot jsonb, history_type text DEFAULT 'retry')
RETURNS text
AS 'MODULE_PATHNAME', 'paidb_record_history'
LANGUAGE C VOLATILE STRICT
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.put_framework_request(request jsonb,
    submission_time timestamptz DEFAULT pg_catalog.now(),
    add_ons jsonb DEFAULT '{}')
RETURNS TABLE (name text, request_generation bigint, created boolean, changed boolean)
AS 'MODULE_PATHNAME', 'paidb_put_framework_request'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.patch_framework_request(name text, patch jsonb)
RETURNS TABLE (request_generation bigint, changed boolean)
AS 'MODULE_PATHNAME', 'paidb_patch_framework_request'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.stop_framework(name text)
RETURNS TABLE (request_generation bigint, changed boolean)
AS 'MODULE_PATHNAME', 'paidb_stop_framework'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.apply_watch_event(event_type text, object jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'paidb_apply_watch_event'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.import_frameworks(objects jsonb)
RETURNS integer
AS 'MODULE_PATHNAME', 'paidb_import_frameworks'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.wakeup()
RETURNS void
AS 'MODULE_PATHNAME', 'paidb_wakeup'
LANGUAGE C VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, paidb;

CREATE FUNCTION paidb.status(
    OUT worker text, OUT pid integer, OUT state text,
    OUT started_at timestamptz, OUT last_activity timestamptz,
    OUT resource_version text, OUT events_applied bigint,
    OUT requests_sent bigint, OUT errors bigint, OUT last_error text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'paidb_status'
LANGUAGE C VOLATILE;

-------------------------------------------------------------------------------
-- Roles and privileges (SPEC §3)
-------------------------------------------------------------------------------

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'paidb_writer') THEN
        CREATE ROLE paidb_writer NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'paidb_reader') THEN
        CREATE ROLE paidb_reader NOLOGIN;
    END IF;
END
$roles$;

GRANT USAGE ON SCHEMA paidb TO paidb_writer, paidb_reader;

-- Nobody but the owner writes the tables: all writes go through functions.
REVOKE ALL ON ALL TABLES IN SCHEMA paidb FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA paidb TO paidb_writer;
GRANT SELECT ON paidb.framework_history, paidb.task_history, paidb.pod,
    paidb.framework_event, paidb.pod_event, paidb.tag, paidb.watch_state
    TO paidb_reader;
-- The reader sees every framework column except the add-on definitions,
-- which hold secrets.
GRANT SELECT (name, namespace, job_name, user_name, job_config, execution_type,
    virtual_cluster, job_priority, total_gpu_number, total_task_number,
    total_task_role_number, log_path_infix, submission_time, creation_time,
    launch_time, completion_time, retries, retry_delay_time, platform_retries,
    resource_retries, user_retries, app_exit_code, sub_state, state, snapshot,
    request_generation, request_synced, api_server_deleted, archived,
    resource_version,
    notification_at_running, notified_at_running, notification_at_succeeded,
    notified_at_succeeded, notification_at_failed, notified_at_failed,
    notification_at_stopped, notified_at_stopped, notification_at_retried,
    notified_at_retried, sent_generation, sent_at, sync_failures, next_sync_at,
    inserted_at, updated_at)
    ON paidb.framework TO paidb_reader;

-- Pure functions stay callable by everyone; the ones that write, and
-- status(), are for paidb's roles only.
REVOKE ALL ON FUNCTION
    paidb.status(),
    paidb.record_history(jsonb, text),
    paidb.put_framework_request(jsonb, timestamptz, jsonb),
    paidb.patch_framework_request(text, jsonb),
    paidb.stop_framework(text),
    paidb.apply_watch_event(text, jsonb),
    paidb.import_frameworks(jsonb),
    paidb.wakeup()
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION paidb.status() TO paidb_writer, paidb_reader;
GRANT EXECUTE ON FUNCTION
    paidb.record_history(jsonb, text),
    paidb.put_framework_request(jsonb, timestamptz, jsonb),
    paidb.patch_framework_request(text, jsonb),
    paidb.stop_framework(text),
    paidb.apply_watch_event(text, jsonb),
    paidb.import_frameworks(jsonb),
    paidb.wakeup()
    TO paidb_writer;

-- Workers waiting for this CREATE EXTENSION start as soon as it commits.
SELECT paidb.wakeup();
