-- OpenPAI's own schema, as its database-controller's Sequelize models create it
-- (sdk/index.js, Sequelize 5.21.3 sync(), dumped with pg_dump -s), in whatever
-- schema is first on search_path; the baseline of test/bench/queries.sh.
CREATE TABLE framework_events (
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
CREATE TABLE framework_history (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "attemptIndex" integer,
    "historyType" character varying(16) DEFAULT 'retry'::character varying NOT NULL,
    snapshot text,
    "updatedAt" timestamp with time zone NOT NULL
);
CREATE TABLE frameworks (
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
CREATE TABLE pod_events (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    "podUid" character varying(36) NOT NULL,
    type character varying(32) NOT NULL,
    message text,
    event text,
    "updatedAt" timestamp with time zone NOT NULL
);
CREATE TABLE pods (
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
CREATE TABLE tags (
    "insertedAt" timestamp with time zone,
    uid character varying(36) NOT NULL,
    "frameworkName" character varying(64) NOT NULL,
    name character varying(512) NOT NULL,
    "updatedAt" timestamp with time zone NOT NULL
);
CREATE TABLE task_history (
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
CREATE TABLE version (
    id integer NOT NULL,
    version character varying(36),
    "commitVersion" character varying(64),
    "createdAt" timestamp with time zone NOT NULL,
    "updatedAt" timestamp with time zone NOT NULL
);
CREATE SEQUENCE version_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE version_id_seq OWNED BY version.id;
ALTER TABLE ONLY version ALTER COLUMN id SET DEFAULT nextval('version_id_seq'::regclass);
ALTER TABLE ONLY framework_events
    ADD CONSTRAINT framework_events_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY framework_history
    ADD CONSTRAINT framework_history_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY frameworks
    ADD CONSTRAINT frameworks_pkey PRIMARY KEY (name);
ALTER TABLE ONLY pod_events
    ADD CONSTRAINT pod_events_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY pods
    ADD CONSTRAINT pods_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY tags
    ADD CONSTRAINT tags_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY task_history
    ADD CONSTRAINT task_history_pkey PRIMARY KEY (uid);
ALTER TABLE ONLY version
    ADD CONSTRAINT version_pkey PRIMARY KEY (id);
CREATE INDEX framework_events_framework_name ON framework_events USING btree ("frameworkName");
CREATE INDEX framework_history_framework_name ON framework_history USING btree ("frameworkName");
CREATE INDEX frameworks_submission_time ON frameworks USING btree ("submissionTime");
CREATE INDEX pod_events_framework_name ON pod_events USING btree ("frameworkName");
CREATE INDEX pods_framework_name ON pods USING btree ("frameworkName");
CREATE INDEX tags_framework_name ON tags USING btree ("frameworkName");
CREATE INDEX task_history_task_uid ON task_history USING btree ("taskUid");
ALTER TABLE ONLY framework_events
    ADD CONSTRAINT "framework_events_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE ONLY framework_history
    ADD CONSTRAINT "framework_history_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE ONLY pod_events
    ADD CONSTRAINT "pod_events_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE ONLY pods
    ADD CONSTRAINT "pods_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE ONLY tags
    ADD CONSTRAINT "tags_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE ONLY task_history
    ADD CONSTRAINT "task_history_frameworkName_fkey" FOREIGN KEY ("frameworkName") REFERENCES frameworks(name) ON UPDATE CASCADE ON DELETE CASCADE;
