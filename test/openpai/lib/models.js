'use strict';
// OpenPAI's database schema (v1.2 and later) as Sequelize models: the seven
// relations OpenPAI's database-controller SDK ("openpaidbsdk") declares,
// with their camelCase columns, types, defaults and indexes, written here
// from that documented schema.  The same definitions serve both sides of the
// tests: sync()ed into a schema of their own they build an OpenPAI database;
// read through a search_path of `openpai` they are the rest-server's view of
// paidb.  Works with Sequelize 5 and 6 (the class is taken from the instance).

// Declare OpenPAI's models on a Sequelize instance; `schema` (optional) pins
// every table to that schema, otherwise names are left to the search_path.
function defineModels(sequelize, { schema } = {}) {
  const S = sequelize.constructor;
  const { Model } = S;
  const common = (modelName, extra = {}) => ({
    sequelize,
    modelName,
    createdAt: 'insertedAt',
    ...(schema ? { schema } : {}),
    ...extra,
  });
  // A fresh object each time: Sequelize writes the index name into it.
  const byFramework = () => ({ indexes: [{ unique: false, fields: ['frameworkName'] }] });

  class Framework extends Model {}
  Framework.init(
    {
      insertedAt: S.DATE,
      name: { type: S.STRING(64), primaryKey: true },
      namespace: S.STRING(64),
      jobName: S.STRING(256),
      userName: S.STRING(256),
      jobConfig: S.TEXT,
      executionType: S.STRING(32),
      creationTime: S.DATE,
      launchTime: S.DATE,
      virtualCluster: S.STRING(256),
      jobPriority: S.STRING(256),
      totalGpuNumber: S.INTEGER,
      totalTaskNumber: S.INTEGER,
      totalTaskRoleNumber: S.INTEGER,
      logPathInfix: S.STRING(256),
      submissionTime: { type: S.DATE, allowNull: false },
      dockerSecretDef: S.TEXT,
      configSecretDef: S.TEXT,
      userExtensionSecretDef: S.TEXT,
      tokenSecretDef: S.TEXT,
      priorityClassDef: S.TEXT,
      retries: S.INTEGER,
      retryDelayTime: S.INTEGER,
      platformRetries: S.INTEGER,
      resourceRetries: S.INTEGER,
      userRetries: S.INTEGER,
      completionTime: S.DATE,
      appExitCode: S.INTEGER,
      subState: S.STRING(32),
      state: S.STRING(32),
      snapshot: S.TEXT,
      requestSynced: { type: S.BOOLEAN, allowNull: false, defaultValue: false },
      apiServerDeleted: { type: S.BOOLEAN, allowNull: false, defaultValue: false },
      archived: { type: S.BOOLEAN, allowNull: false, defaultValue: false },
      notificationAtRunning: S.BOOLEAN,
      notifiedAtRunning: S.BOOLEAN,
      notificationAtSucceeded: S.BOOLEAN,
      notifiedAtSucceeded: S.BOOLEAN,
      notificationAtFailed: S.BOOLEAN,
      notifiedAtFailed: S.BOOLEAN,
      notificationAtStopped: S.BOOLEAN,
      notifiedAtStopped: S.BOOLEAN,
      notificationAtRetried: S.BOOLEAN,
      // An integer in OpenPAI (the number of retries already notified).
      notifiedAtRetried: S.INTEGER,
    },
    common('framework', { indexes: [{ unique: false, fields: ['submissionTime'] }] }),
  );

  class FrameworkHistory extends Model {}
  FrameworkHistory.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      attemptIndex: S.INTEGER,
      historyType: { type: S.STRING(16), allowNull: false, defaultValue: 'retry' },
      snapshot: S.TEXT,
    },
    common('framework_history', { ...byFramework(), freezeTableName: true }),
  );

  class TaskHistory extends Model {}
  TaskHistory.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      attemptIndex: S.INTEGER,
      taskroleName: S.STRING(256),
      taskName: S.STRING(256),
      taskIndex: S.INTEGER,
      taskUid: { type: S.STRING(36), allowNull: false },
      taskAttemptIndex: S.INTEGER,
      podUid: S.STRING(36),
      historyType: { type: S.STRING(16), allowNull: false, defaultValue: 'retry' },
      snapshot: S.TEXT,
    },
    common('task_history', {
      indexes: [{ unique: false, fields: ['taskUid'] }],
      freezeTableName: true,
    }),
  );

  class Pod extends Model {}
  Pod.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      attemptIndex: S.INTEGER,
      taskroleName: S.STRING(256),
      taskroleIndex: S.INTEGER,
      taskAttemptIndex: S.INTEGER,
      snapshot: S.TEXT,
    },
    common('pod', byFramework()),
  );

  class FrameworkEvent extends Model {}
  FrameworkEvent.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      podUid: S.STRING(36),
      taskroleName: S.STRING(256),
      taskName: S.STRING(256),
      taskIndex: S.INTEGER,
      type: { type: S.STRING(32), allowNull: false },
      reason: S.STRING(64),
      message: S.TEXT,
      firstTimestamp: S.DATE,
      lastTimestamp: S.DATE,
      count: S.INTEGER,
      sourceComponent: S.STRING(255),
      sourceHost: S.STRING(255),
      event: S.TEXT,
    },
    common('framework_event', byFramework()),
  );

  class PodEvent extends Model {}
  PodEvent.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      podUid: { type: S.STRING(36), allowNull: false },
      type: { type: S.STRING(32), allowNull: false },
      message: S.TEXT,
      event: S.TEXT,
    },
    common('pod_event', byFramework()),
  );

  class Tag extends Model {}
  Tag.init(
    {
      insertedAt: S.DATE,
      uid: { type: S.STRING(36), primaryKey: true },
      frameworkName: { type: S.STRING(64), allowNull: false },
      name: { type: S.STRING(512), allowNull: false },
    },
    common('tag', byFramework()),
  );

  // The associations add the "frameworkName" foreign keys OpenPAI's tables
  // have, and let the rest-server `include` a job's tags.
  Framework.hasMany(FrameworkHistory);
  Framework.hasMany(TaskHistory);
  Framework.hasMany(Pod);
  Framework.hasMany(FrameworkEvent);
  Framework.hasMany(PodEvent);
  Framework.hasMany(Tag);

  class Version extends Model {}
  Version.init(
    {
      version: { type: S.STRING(36) },
      commitVersion: { type: S.STRING(64) },
    },
    { sequelize, modelName: 'version', freezeTableName: true, ...(schema ? { schema } : {}) },
  );

  return { Framework, FrameworkHistory, TaskHistory, Pod, FrameworkEvent, PodEvent, Tag, Version };
}

// The seven relations paidb_openpai mirrors, by model key.
const RELATIONS = {
  Framework: 'frameworks',
  FrameworkHistory: 'framework_history',
  TaskHistory: 'task_history',
  Pod: 'pods',
  FrameworkEvent: 'framework_events',
  PodEvent: 'pod_events',
  Tag: 'tags',
};

module.exports = { defineModels, RELATIONS };
