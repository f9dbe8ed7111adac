'use strict';
// The queries OpenPAI's components make through their Sequelize models,
// written here after the rest-server's controllers/v2/job.js and
// models/v2/job/k8s.js, job-attempt.js and task.js, and the alert manager's
// job-status-change-notification, with the result shaping they do after.
// Each function takes the models (lib/models.js) of one database.

// The Sequelize `Op` of the models' Sequelize.
const opOf = (models) => models.Framework.sequelize.constructor.Op;

// Query-string → filters/order as the rest-server's list controller does.
function listArgs(Op, q) {
  const filters = {};
  const tagsContain = {};
  const tagsNotContain = {};
  const order = [];
  if (q.username) filters.userName = q.username.split(',');
  if (q.vc) filters.virtualCluster = q.vc.split(',');
  if (q.state) filters.state = q.state.split(',');
  const offset = q.offset !== undefined ? parseInt(q.offset, 10) : 0;
  const limit = q.limit !== undefined ? parseInt(q.limit, 10) : 5000;
  if (q.tagsContain) tagsContain.name = q.tagsContain.split(',');
  if (q.tagsNotContain) tagsNotContain.name = q.tagsNotContain.split(',');
  if (q.keyword) {
    filters[Op.or] = [
      { userName: { [Op.substring]: q.keyword } },
      { jobName: { [Op.substring]: q.keyword } },
      { virtualCluster: { [Op.substring]: q.keyword } },
    ];
  }
  if (q.jobPriority) {
    const prio = q.jobPriority.split(',');
    const k = prio.indexOf('default');
    if (k !== -1) {
      prio.splice(k, 1);
      if (filters[Op.or] === undefined) filters[Op.or] = [];
      filters[Op.or].push({ jobPriority: { [Op.is]: null } });
      if (prio.length > 0) filters[Op.or].push({ jobPriority: prio });
    } else {
      filters.jobPriority = prio;
    }
  }
  if (q.order) {
    const [field, dir] = q.order.split(',');
    const nulls = (d) => (d === 'ASC' ? 'ASC NULLS LAST' : 'DESC NULLS FIRST');
    if (dir === 'ASC' || dir === 'DESC') {
      if (field === 'username') order.push(['userName', dir]);
      else if (field === 'vc') order.push(['virtualCluster', dir]);
      else if (field === 'completionTime' || field === 'jobPriority') order.push([field, nulls(dir)]);
      else order.push([field, dir]);
    }
  }
  if (order.length === 0) order.push(['submissionTime', 'DESC']);
  return { filters, tagsContain, tagsNotContain, order, offset, limit, withTotalCount: q.withTotalCount === 'true' };
}

const LIST_ATTRIBUTES = [
  'name', 'jobName', 'userName', 'executionType', 'submissionTime', 'creationTime', 'launchTime',
  'virtualCluster', 'totalGpuNumber', 'totalTaskNumber', 'totalTaskRoleNumber', 'jobPriority',
  'retries', 'retryDelayTime', 'platformRetries', 'resourceRetries', 'userRetries', 'completionTime',
  'appExitCode', 'subState', 'state',
];

// Milliseconds since the epoch, or null, as the rest-server converts times.
const time = (d) => new Date(d).getTime() || null;

// The job summary the rest-server returns for one listed framework (tags sorted).
function summary(f) {
  return {
    debugId: f.name,
    name: f.jobName,
    username: f.userName,
    state: f.state,
    subState: f.subState,
    executionType: f.executionType.toUpperCase(),
    tags: f.tags.map((t) => t.name).sort(),
    retries: f.retries,
    retryDetails: { user: f.userRetries, platform: f.platformRetries, resource: f.resourceRetries },
    retryDelayTime: f.retryDelayTime,
    submissionTime: new Date(f.submissionTime).getTime(),
    createdTime: time(f.creationTime),
    launchedTime: time(f.launchTime),
    completedTime: time(f.completionTime),
    appExitCode: f.appExitCode,
    virtualCluster: f.virtualCluster ? f.virtualCluster : 'unknown',
    totalGpuNumber: f.totalGpuNumber,
    totalTaskNumber: f.totalTaskNumber,
    totalTaskRoleNumber: f.totalTaskRoleNumber,
    jobPriority: f.jobPriority,
  };
}

// GET /api/v2/jobs?... : k8s.js list(); returns {totalCount?, data}.
async function listJobs(models, q) {
  const Op = opOf(models);
  const a = listArgs(Op, q);
  const sequelize = models.Framework.sequelize;
  const qg = sequelize.dialect.QueryGenerator || sequelize.dialect.queryGenerator;
  if (Object.keys(a.tagsContain).length || Object.keys(a.tagsNotContain).length) {
    a.filters.name = {};
    if (Object.keys(a.tagsContain).length) {
      const sub = qg.selectQuery('tags', { attributes: ['frameworkName'], where: a.tagsContain });
      a.filters.name[Op.in] = sequelize.constructor.literal(`(${sub.slice(0, -1)})`);
    }
    if (Object.keys(a.tagsNotContain).length) {
      const sub = qg.selectQuery('tags', { attributes: ['frameworkName'], where: a.tagsNotContain });
      a.filters.name[Op.notIn] = sequelize.constructor.literal(`(${sub.slice(0, -1)})`);
    }
  }
  const rows = await models.Framework.findAll({
    attributes: LIST_ATTRIBUTES,
    where: a.filters,
    offset: a.offset,
    limit: a.limit,
    order: a.order,
    include: [{ attributes: ['name'], required: Object.keys(a.tagsContain).length !== 0, model: models.Tag }],
  });
  const data = rows.filter((f) => /^[0-9a-f]{32}$/.test(f.name)).map(summary);
  if (a.withTotalCount) {
    const totalCount = await models.Framework.count({ where: a.filters });
    return { totalCount, data };
  }
  return { data };
}

// GET /api/v2/jobs/:name[/attempts/:id] data: k8s.js get() up to JSON.parse.
async function getJob(models, name, jobAttemptId) {
  const f = await models.Framework.findOne({
    attributes: ['submissionTime', 'snapshot'],
    where: { name },
    include: [{ attributes: ['name'], model: models.Tag, as: 'tags' }],
  });
  if (!f) return null;
  const latest = JSON.parse(f.snapshot);
  let specified = latest;
  if (jobAttemptId !== undefined && jobAttemptId < latest.status.attemptStatus.id) {
    const h = await models.FrameworkHistory.findOne({ attributes: ['snapshot'], where: { frameworkName: name, attemptIndex: jobAttemptId } });
    specified = h ? JSON.parse(h.snapshot) : null;
  }
  return { submissionTime: new Date(f.submissionTime).getTime(), tags: f.tags.map((t) => t.name).sort(), latest, specified };
}

// GET /api/v2/jobs/:name/config: the stored job config.
async function getConfig(models, name) {
  const f = await models.Framework.findOne({ attributes: ['jobConfig'], where: { name } });
  return f ? f.jobConfig : undefined;
}

// job-attempt.js list(): every attempt's snapshot, history first.
async function listAttempts(models, name) {
  const f = await models.Framework.findOne({ attributes: ['snapshot'], where: { name } });
  if (!f) return null;
  const history = await models.FrameworkHistory.findAll({ attributes: ['snapshot'], where: { frameworkName: name }, order: [['attemptIndex', 'ASC']] });
  return [...history.map((h) => JSON.parse(h.snapshot)), JSON.parse(f.snapshot)];
}

// task.js get(): the earlier attempts of one task, newest first.
async function taskAttempts(models, taskStatus) {
  const Op = opOf(models);
  const rows = await models.TaskHistory.findAll({
    attributes: ['snapshot'],
    where: { [Op.and]: [{ taskUid: taskStatus.instanceUID }, { taskAttemptIndex: { [Op.lt]: taskStatus.attemptStatus.id } }] },
    order: [['taskAttemptIndex', 'DESC']],
  });
  return rows.map((r) => JSON.parse(r.snapshot));
}

const EVENT_ATTRIBUTES = ['uid', 'frameworkName', 'podUid', 'taskroleName', 'taskName', 'taskIndex', 'type', 'reason', 'message', 'firstTimestamp', 'lastTimestamp', 'count', 'sourceComponent', 'sourceHost'];

// k8s.js getEvents(): a job's events, newest first (optionally by type).
async function getEvents(models, name, type) {
  const f = await models.Framework.findOne({ attributes: ['name'], where: { name } });
  if (!f) return null;
  const where = { frameworkName: name, ...(type ? { type } : {}) };
  const rows = await models.FrameworkEvent.findAll({ attributes: EVENT_ATTRIBUTES, where, order: [['lastTimestamp', 'DESC']] });
  return rows.map((r) => {
    const o = r.get({ plain: true });
    o.firstTimestamp = time(o.firstTimestamp);
    o.lastTimestamp = time(o.lastTimestamp);
    return o;
  });
}

// k8s.js addTag(): findOrCreate under the uid the rest-server computes.
async function addTag(models, frameworkName, fullName, tag, uidOf) {
  const f = await models.Framework.findOne({ where: { name: frameworkName } });
  if (!f) return null;
  return models.Tag.findOrCreate({ where: { frameworkName, name: tag, uid: uidOf(`${fullName}+${tag}`) } });
}

// k8s.js deleteTag(): the number of rows destroyed.
async function deleteTag(models, frameworkName, tag) {
  const f = await models.Framework.findOne({ where: { name: frameworkName } });
  if (!f) return null;
  return models.Tag.destroy({ where: { frameworkName, name: tag } });
}

// token.js: a job-specific token is valid while its job is not Completed.
async function jobTokenValid(models, name) {
  const f = await models.Framework.findOne({ attributes: ['subState'], where: { name } });
  return !!f && f.subState !== 'Completed';
}

const NOTIFY_ATTRIBUTES = [
  'name', 'jobName', 'userName', 'state', 'retries',
  'notificationAtRunning', 'notifiedAtRunning', 'notificationAtSucceeded', 'notifiedAtSucceeded',
  'notificationAtFailed', 'notifiedAtFailed', 'notificationAtStopped', 'notifiedAtStopped',
  'notificationAtRetried', 'notifiedAtRetried',
];

// The alert manager's getFrameworks(): jobs with a notification due.
async function notificationsDue(models) {
  const Op = opOf(models);
  const pending = (at, done, states) => ({ [Op.and]: [{ [at]: true }, { [done]: false }, { state: states.length === 1 ? states[0] : { [Op.in]: states } }] });
  return models.Framework.findAll({
    attributes: NOTIFY_ATTRIBUTES,
    where: {
      [Op.or]: [
        pending('notificationAtRunning', 'notifiedAtRunning', ['RUNNING', 'SUCCEEDED', 'FAILED', 'STOPPED']),
        pending('notificationAtSucceeded', 'notifiedAtSucceeded', ['SUCCEEDED']),
        pending('notificationAtFailed', 'notifiedAtFailed', ['FAILED']),
        pending('notificationAtStopped', 'notifiedAtStopped', ['STOPPED']),
        { [Op.and]: [{ notificationAtRetried: true }, { notifiedAtRetried: { [Op.lt]: { [Op.col]: 'retries' } } }] },
      ],
    },
  });
}

// The alert manager's updateFrameworkTable(): set fields, then save().
async function markNotified(framework, infos) {
  for (const [k, v] of Object.entries(infos)) framework[k] = v;
  await framework.save();
}

module.exports = {
  listJobs, getJob, getConfig, jobTokenValid, listAttempts, taskAttempts, getEvents, addTag, deleteTag,
  notificationsDue, markNotified, LIST_ATTRIBUTES,
};
