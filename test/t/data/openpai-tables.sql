-- OpenPAI v1.2+'s tables in schema opai, as OpenPAI's Sequelize models
-- (test/openpai/lib/models.js, from the openpaidbsdk's documented schema)
-- create them: Sequelize 5.21.3's sync(), dumped with pg_dump -s.  Generated
-- by test/openpai/make-openpai-tables-sql.sh; do not edit by hand
-- (test/openpai/test/fixture-ddl.test.js compares it with sync()).  Used by
-- test/t/060_openpai_migration.pl, and by test/bench/openpai_import_bench.sh
-- and test/bench/queries.sh, which rename the schema with sed.
--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: opai; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA opai;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: framework_events; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.framework_events (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "podUid" character varying(36),
    "taskroleName" character varying(256),
    "taskName" character varying(256),
    "taskIndex" integer,
    type character varying(32) NOT NULL,
    reason character varying(64),
    message text,
    "firstTimestamp" timestamp with time zone,
    "lastTimestamp" timestamp with time zone,
    count integer,
    "sourceComponent" character varying(255),
    "sourceHost" character varying(255),
    event text,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: framework_history; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.framework_history (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "attemptIndex" integer,
    "historyType" character varying(16) DEFAULT 'retry'::character varying NOT NULL,
    snapshot text,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: frameworks; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.frameworks (
    "insertedAt" timestamp with time zone,
    name character varying(64) NOT NULL,
    namespace character varying(64),
    "jobName" character varying(256),
    "userName" character varying(256),
    "jobConfig" text,
    "executionType" character varying(32),
    "creationTime" timestamp with time zone,
    "launchTime" timestamp with time zone,
    "virtualCluster" character varying(256),
    "jobPriority" character varying(256),
    "totalGpuNumber" integer,
    "totalTaskNumber" integer,
    "totalTaskRoleNumber" integer,
    "logPathInfix" character varying(256),
    "submissionTime" timestamp with time zone NOT NULL,
    "dockerSecretDef" text,
    "configSecretDef" text,
    "userExtensionSecretDef" text,
    "tokenSecretDef" text,
    "priorityClassDef" text,
    retries integer,
    "retryDelayTime" integer,
    "platformRetries" integer,
    "resourceRetries" integer,
    "userRetries" integer,
    "completionTime" timestamp with time zone,
    "appExitCode" integer,
    "subState" character varying(32),
    state character varying(32),
    snapshot text,
    "requestSynced" boolean DEFAULT false NOT NULL,
    "apiServerDeleted" boolean DEFAULT false NOT NULL,
    archived boolean DEFAULT false NOT NULL,
    "notificationAtRunning" boolean,
    "notifiedAtRunning" boolean,
    "notificationAtSucceeded" boolean,
    "notifiedAtSucceeded" boolean,
    "notificationAtFailed" boolean,
    "notifiedAtFailed" boolean,
    "notificationAtStopped" boolean,
    "notifiedAtStopped" boolean,
    "notificationAtRetried" boolean,
    "notifiedAtRetried" integer,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: pod_events; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.pod_events (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "podUid" character varying(36) NOT NULL,
    type character varying(32) NOT NULL,
    message text,
    event text,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: pods; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.pods (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "attemptIndex" integer,
    "taskroleName" character varying(256),
    "taskroleIndex" integer,
    "taskAttemptIndex" integer,
    snapshot text,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: tags; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.tags (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    name character varying(512) NOT NULL,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: task_history; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.task_history (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "attemptIndex" integer,
    "taskroleName" character varying(256),
    "taskName" character varying(256),
    "taskIndex" integer,
    "taskUid" character varying(36) NOT NULL,
    "taskAttemptIndex" integer,
    "podUid" character varying(36),
    "historyType" character varying(16) DEFAULT 'retry'::character varying NOT NULL,
    snapshot text,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: version; Type: TABLE; Schema: opai; Owner: -
--

CREATE TABLE opai.version (
    id integer NOT NULL,
    version character varying(36),
    "commitVersion" character varying(64),
    "createdAt" timestamp with time zone NOT NULL,
    "updatedAt" timestamp with time zone NOT NULL
);


--
-- Name: version_id_seq; Type: SEQUENCE; Schema: opai; Owner: -
--

CREATE SEQUENCE opai.version_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: version_id_seq; Type: SEQUENCE OWNED BY; Schema: opai; Owner: -
--

ALTER SEQUENCE opai.version_id_seq OWNED BY opai.version.id;


--
-- Name: version id; Type: DEFAULT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.version ALTER COLUMN id SET DEFAULT nextval('opai.version_id_seq'::regclass);


--
-- Name: framework_events framework_events_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.framework_events
    ADD CONSTRAINT framework_events_pkey PRIMARY KEY (uid);


--
-- Name: framework_history framework_history_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.framework_history
    ADD CONSTRAINT framework_history_pkey PRIMARY KEY (uid);


--
-- Name: frameworks frameworks_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.frameworks
    ADD CONSTRAINT frameworks_pkey PRIMARY KEY (name);


--
-- Name: pod_events pod_events_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.pod_events
    ADD CONSTRAINT pod_events_pkey PRIMARY KEY (uid);


--
-- Name: pods pods_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.pods
    ADD CONSTRAINT pods_pkey PRIMARY KEY (uid);


--
-- Name: tags tags_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.tags
    ADD CONSTRAINT tags_pkey PRIMARY KEY (uid);


--
-- Name: task_history task_history_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.task_history
    ADD CONSTRAINT task_history_pkey PRIMARY KEY (uid);


--
-- Name: version version_pkey; Type: CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.version
    ADD CONSTRAINT version_pkey PRIMARY KEY (id);


--
-- Name: framework_events_framework_name; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX framework_events_framework_name ON opai.framework_events USING btree ("frameworkName");


--
-- Name: framework_history_framework_name; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX framework_history_framework_name ON opai.framework_history USING btree ("frameworkName");


--
-- Name: frameworks_submission_time; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX frameworks_submission_time ON opai.frameworks USING btree ("submissionTime");


--
-- Name: pod_events_framework_name; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX pod_events_framework_name ON opai.pod_events USING btree ("frameworkName");


--
-- Name: pods_framework_name; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX pods_framework_name ON opai.pods USING btree ("frameworkName");


--
-- Name: tags_framework_name; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX tags_framework_name ON opai.tags USING btree ("frameworkName");


--
-- Name: task_history_task_uid; Type: INDEX; Schema: opai; Owner: -
--

CREATE INDEX task_history_task_uid ON opai.task_history USING btree ("taskUid");


--
-- Name: framework_events framework_events_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.framework_events
    ADD CONSTRAINT "framework_events_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- Name: framework_history framework_history_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.framework_history
    ADD CONSTRAINT "framework_history_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- Name: pod_events pod_events_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.pod_events
    ADD CONSTRAINT "pod_events_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- Name: pods pods_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.pods
    ADD CONSTRAINT "pods_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- Name: tags tags_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.tags
    ADD CONSTRAINT "tags_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- Name: task_history task_history_frameworkName_fkey; Type: FK CONSTRAINT; Schema: opai; Owner: -
--

ALTER TABLE ONLY opai.task_history
    ADD CONSTRAINT "task_history_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES opai.frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--


