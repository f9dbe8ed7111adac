'use strict';
// make-openpai-db.js itself: OpenPAI's tables as its Sequelize 5.21.3 models
// create them, and every kind of job and quirk the other tests rely on.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const fs = require('fs');
const os = require('os');
const { spawnSync } = require('child_process');
const { connect } = require('../lib/connect');
const { freshDatabase, dropDatabase } = require('../lib/testdb');

const db = 'paidb_openpai_fixture';
const JOBS = 120;

describe('make-openpai-db.js', () => {
  let s;
  let apiOut;
  const one = async (sql) => (await s.query(sql, { type: 'SELECT' }))[0];

  before(async () => {
    await freshDatabase(db, []);
    apiOut = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'openpai-')), 'api.json');
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'make-openpai-db.js'), '--schema', 'src', '--jobs', String(JOBS), '--api-out', apiOut], {
      env: { ...process.env, PGDATABASE: db }, encoding: 'utf8', timeout: 300000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`frameworks ${JOBS},`));
    s = connect('6', { database: db });
  });
  after(async () => {
    if (s) await s.close();
    await dropDatabase(db);
  });

  it('creates OpenPAI\'s tables, with their keys, defaults and foreign keys', async () => {
    const t = await s.query("SELECT tablename FROM pg_tables WHERE schemaname = 'src' ORDER BY 1", { type: 'SELECT' });
    assert.deepEqual(t.map((r) => r.tablename), ['framework_events', 'framework_history', 'frameworks', 'pod_events', 'pods', 'tags', 'task_history', 'version']);
    const c = await s.query(`SELECT column_name, data_type, character_maximum_length AS len, is_nullable, column_default
      FROM information_schema.columns WHERE table_schema = 'src' AND table_name = 'frameworks' ORDER BY ordinal_position`, { type: 'SELECT' });
    const col = Object.fromEntries(c.map((r) => [r.column_name, r]));
    assert.equal(c[0].column_name, 'insertedAt');
    assert.equal(c[c.length - 1].column_name, 'updatedAt');
    assert.equal(col.name.len, 64);
    assert.equal(col.jobName.data_type, 'character varying');
    assert.equal(col.snapshot.data_type, 'text');
    assert.equal(col.submissionTime.data_type, 'timestamp with time zone');
    assert.equal(col.submissionTime.is_nullable, 'NO');
    assert.equal(col.requestSynced.column_default, 'false');
    assert.equal(col.notifiedAtRetried.data_type, 'integer');
    assert.equal(col.totalGpuNumber.data_type, 'integer');
    const fk = await one("SELECT count(*)::int AS n FROM pg_constraint WHERE contype = 'f' AND connamespace = 'src'::regnamespace AND confrelid = 'src.frameworks'::regclass");
    assert.equal(fk.n, 6);
  });

  it('fills every state, with history, tags and events', async () => {
    const st = await s.query('SELECT state, count(*)::int AS n FROM src.frameworks GROUP BY 1 ORDER BY 1', { type: 'SELECT' });
    assert.deepEqual(st.map((r) => r.state), ['FAILED', 'RUNNING', 'STOPPED', 'STOPPING', 'SUCCEEDED', 'WAITING']);
    const r = await one(`SELECT
        count(*) FILTER (WHERE "apiServerDeleted")::int AS deleted,
        count(*) FILTER (WHERE archived)::int AS archived,
        count(*) FILTER (WHERE NOT "requestSynced")::int AS unsynced,
        count(*) FILTER (WHERE "appExitCode" = -1100)::int AS permanent,
        count(*) FILTER (WHERE retries > 0)::int AS retried
      FROM src.frameworks`);
    for (const [k, v] of Object.entries(r)) assert.ok(v > 0, k);
    assert.equal(r.retried, JOBS / 10, '10% with retry history');
    for (const t of ['framework_history', 'task_history', 'pods', 'framework_events', 'pod_events', 'tags']) {
      assert.ok((await one(`SELECT count(*)::int AS n FROM src.${t}`)).n > 0, t);
    }
    const h = await one(`SELECT count(*)::int AS n FROM src.framework_history h JOIN src.frameworks f ON f.name = h."frameworkName"
      WHERE h.uid = md5(h."frameworkName" || '+' || h."attemptIndex" || '+' || h."historyType") AND h."attemptIndex" < f.retries`);
    assert.equal(h.n, (await one('SELECT count(*)::int AS n FROM src.framework_history')).n, 'history uids as OpenPAI computed them');
  });

  it('has OpenPAI\'s quirks', async () => {
    const r = await one(`SELECT
        count(*) FILTER (WHERE NOT (snapshot::jsonb -> 'metadata' -> 'annotations') ? 'requestGeneration')::int AS no_generation,
        count(*) FILTER (WHERE "configSecretDef" = '' OR "dockerSecretDef" = '')::int AS blank_addons,
        count(*) FILTER (WHERE "apiServerDeleted" AND "priorityClassDef" <> '')::int AS kept_priority,
        count(*) FILTER (WHERE "notificationAtRunning" IS NULL AND "notifiedAtRetried" IS NULL)::int AS null_notification,
        count(*) FILTER (WHERE length(name) > 63)::int AS long_name,
        count(*) FILTER (WHERE snapshot::jsonb #>> '{status,attemptStatus,completionStatus,phase}' = 'CreateFrameworkPermanentFailed')::int AS phase
      FROM src.frameworks`);
    for (const [k, v] of Object.entries(r)) assert.ok(v > 0, k);
    assert.equal(r.long_name, 1);
    const dup = await one("SELECT count(*)::int AS n FROM src.tags WHERE name = 'baseline' AND uid !~ '^[0-9a-f]{32}$'");
    assert.ok(dup.n > 0, 'tags under an older uid');
  });

  it('--api-out lists exactly the jobs still in the API server', async () => {
    const list = JSON.parse(fs.readFileSync(apiOut, 'utf8'));
    assert.equal(list.kind, 'FrameworkList');
    const inApi = await s.query(`SELECT name FROM src.frameworks WHERE NOT "apiServerDeleted" AND "requestSynced" AND "creationTime" IS NOT NULL ORDER BY 1`, { type: 'SELECT' });
    assert.deepEqual(list.items.map((o) => o.metadata.name).sort(), inApi.map((x) => x.name));
    assert.ok(list.items.every((o) => o.status && o.metadata.resourceVersion && o.metadata.uid));
  });

  it('refuses to build over an existing OpenPAI schema, and bad arguments', () => {
    const run = (args) => spawnSync(process.execPath, [path.join(__dirname, '..', 'make-openpai-db.js'), ...args], { env: { ...process.env, PGDATABASE: db }, encoding: 'utf8' });
    const again = run(['--schema', 'src', '--jobs', '1']);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /already holds OpenPAI tables/);
    assert.equal(run(['--jobs', '1']).status, 2);
    assert.equal(run(['--schema', 'Bad-Name']).status, 2);
    assert.equal(run(['--schema', 'x', '--jobs', '-1']).status, 2);
  });
});
