-- OpenPAI v1.2+'s tables, exactly as its Sequelize models (openpaidbsdk)
-- create them with sync(), in schema opai (the TAP tests replace the name).
CREATE SCHEMA opai;
CREATE TABLE opai.frameworks ("insertedAt" timestamptz, name varchar(64) PRIMARY KEY, namespace varchar(64),
  "jobName" varchar(256), "userName" varchar(256), "jobConfig" text, "executionType" varchar(32),
  "creationTime" timestamptz, "launchTime" timestamptz, "virtualCluster" varchar(256), "jobPriority" varchar(256),
  "totalGpuNumber" int, "totalTaskNumber" int, "totalTaskRoleNumber" int, "logPathInfix" varchar(256),
  "submissionTime" timestamptz NOT NULL, "dockerSecretDef" text, "configSecretDef" text, "userExtensionSecretDef" text,
  "tokenSecretDef" text, "priorityClassDef" text, retries int, "retryDelayTime" int, "platformRetries" int,
  "resourceRetries" int, "userRetries" int, "completionTime" timestamptz, "appExitCode" int, "subState" varchar(32),
  state varchar(32), snapshot text, "requestSynced" boolean NOT NULL DEFAULT false,
  "apiServerDeleted" boolean NOT NULL DEFAULT false, archived boolean NOT NULL DEFAULT false,
  "notificationAtRunning" boolean, "notifiedAtRunning" boolean, "notificationAtSucceeded" boolean,
  "notifiedAtSucceeded" boolean, "notificationAtFailed" boolean, "notifiedAtFailed" boolean,
  "notificationAtStopped" boolean, "notifiedAtStopped" boolean, "notificationAtRetried" boolean,
  "notifiedAtRetried" int, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.framework_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "historyType" varchar(16) NOT NULL DEFAULT 'retry',
  snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.task_history ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "attemptIndex" int, "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, "taskUid" varchar(36) NOT NULL, "taskAttemptIndex" int, "podUid" varchar(36),
  "historyType" varchar(16) NOT NULL DEFAULT 'retry', snapshot text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.pods ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "attemptIndex" int, "taskroleName" varchar(256), "taskroleIndex" int, "taskAttemptIndex" int, snapshot text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.framework_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY,
  "frameworkName" varchar(64) NOT NULL, "podUid" varchar(36), "taskroleName" varchar(256), "taskName" varchar(256),
  "taskIndex" int, type varchar(32) NOT NULL, reason varchar(64), message text, "firstTimestamp" timestamptz,
  "lastTimestamp" timestamptz, count int, "sourceComponent" varchar(255), "sourceHost" varchar(255), event text,
  "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.pod_events ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  "podUid" varchar(36) NOT NULL, type varchar(32) NOT NULL, message text, event text, "updatedAt" timestamptz NOT NULL);
CREATE TABLE opai.tags ("insertedAt" timestamptz, uid varchar(36) PRIMARY KEY, "frameworkName" varchar(64) NOT NULL,
  name varchar(512) NOT NULL, "updatedAt" timestamptz NOT NULL);

