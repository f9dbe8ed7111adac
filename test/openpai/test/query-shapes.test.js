'use strict';
// OpenPAI's query shapes (lib/rest-queries.js) through Sequelize models
// declaring OpenPAI's schema, run twice in one database: against OpenPAI's
// own tables (built by make-openpai-db.js in schema openpai_src) and
// against paidb_openpai's views after openpai.import_database('openpai_src').
// Each side is a login role whose search_path (ALTER ROLE ... SET, as the
// rest-server must do it) names its schema; the models name no schema.
// Results are compared field by field.  Sequelize 5.21.3 and 6.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { spawnSync } = require('child_process');
const { connect } = require('../lib/connect');
const { defineModels, RELATIONS } = require('../lib/models');
const { freshDatabase, loginRole, dropDatabase, admin } = require('../lib/testdb');
const { buildJob, md5, KINDS } = require('../lib/openpai-data');
const q = require('../lib/rest-queries');

const JOBS = Number(process.env.OPENPAI_JOBS || 300);

// A snapshot as the rest-server uses it: paidb always stores the request
// generation annotation (OpenPAI's legacy jobs lack it), nothing else differs.
function norm(snap) {
  if (!snap) return snap;
  const s = JSON.parse(JSON.stringify(snap));
  if (s.metadata && s.metadata.annotations) delete s.metadata.annotations.requestGeneration;
  return s;
}

// The list queries: every filter, keyword, tags, orders, paging, counts.
const LISTS = [
  {},
  { withTotalCount: 'true' },
  { username: 'user1,user2,user5', withTotalCount: 'true' },
  { vc: 'vc-a' },
  { vc: 'vc-b,nonexistent', state: 'SUCCEEDED' },
  { state: 'RUNNING,WAITING' },
  { state: 'FAILED,STOPPED,STOPPING', withTotalCount: 'true' },
  { jobPriority: 'prod,test' },
  { jobPriority: 'default' },
  { jobPriority: 'default,oppo', withTotalCount: 'true' },
  { keyword: 'bert' },
  { keyword: 'user1' },
  { keyword: 'vc-', jobPriority: 'default' },
  { keyword: 'no-such-thing', withTotalCount: 'true' },
  { tagsContain: 'nightly' },
  { tagsContain: 'nightly,baseline', withTotalCount: 'true' },
  { tagsNotContain: 'nightly' },
  { tagsNotContain: 'nightly', withTotalCount: 'true' },
  { username: 'user1,user2', state: 'SUCCEEDED', tagsNotContain: 'nightly,baseline', withTotalCount: 'true' },
  { tagsContain: 'team-1', tagsNotContain: 'nightly', withTotalCount: 'true' },
  { offset: '10', limit: '7', withTotalCount: 'true' },
  { offset: String(JOBS - 3), limit: '10' },
  { username: 'user3', state: 'SUCCEEDED,FAILED', offset: '1', limit: '2', withTotalCount: 'true' },
];
const ORDER_KEYS = {
  jobName: 'name', submissionTime: 'submissionTime', username: 'username', vc: 'virtualCluster', retries: 'retries',
  totalTaskNumber: 'totalTaskNumber', totalGpuNumber: 'totalGpuNumber', state: 'state', completionTime: 'completedTime', jobPriority: 'jobPriority',
};
for (const field of Object.keys(ORDER_KEYS)) for (const dir of ['ASC', 'DESC']) LISTS.push({ order: `${field},${dir}`, withTotalCount: 'true' });

// Compare two list answers: the same jobs with the same fields, in an order
// equal by the sort key (ties may come in any order on either side).
function assertSameList(got, want, query) {
  const label = JSON.stringify(query);
  assert.equal(got.totalCount, want.totalCount, `${label}: totalCount`);
  assert.equal(got.data.length, want.data.length, `${label}: rows`);
  const field = query.order ? query.order.split(',')[0] : 'submissionTime';
  const key = ORDER_KEYS[field];
  assert.deepEqual(got.data.map((j) => j[key]), want.data.map((j) => j[key]), `${label}: order by ${field}`);
  const unique = key === 'name' || key === 'submissionTime';
  if (unique) {
    assert.deepEqual(got.data, want.data, label);
  } else {
    const by = (a, b) => (a.debugId < b.debugId ? -1 : a.debugId > b.debugId ? 1 : 0);
    assert.deepEqual([...got.data].sort(by), [...want.data].sort(by), label);
  }
}

for (const version of ['5', '6']) {
  describe(`OpenPAI query shapes, Sequelize ${version}: paidb's views against OpenPAI's tables`, () => {
    const db = `paidb_openpai_qs_${version}`;
    const paiRole = `openpai_rest_qs_${version}`;
    const srcRole = `openpai_orig_qs_${version}`;
    let pai;
    let src;
    let P;
    let O;
    let jobs;
    let importResult;

    before(async () => {
      await freshDatabase(db, ['paidb', 'paidb_openpai']);
      const built = spawnSync(process.execPath, [path.join(__dirname, '..', 'make-openpai-db.js'), '--schema', 'openpai_src', '--jobs', String(JOBS), '--sequelize', version, '--quiet'], {
        env: { ...process.env, PGDATABASE: db },
        encoding: 'utf8',
        timeout: 600000,
      });
      assert.equal(built.status, 0, `make-openpai-db failed: ${built.stderr}`);
      const s = connect('6', { database: db });
      try {
        importResult = await s.query("SELECT * FROM openpai.import_database('openpai_src')", { type: 'SELECT' });
      } finally {
        await s.close();
      }
      // The job paidb could not take (its name is too long) is left out of
      // the comparison: OpenPAI would list and count it, paidb reports it.
      await admin(db, "DELETE FROM openpai_src.frameworks WHERE name !~ '^[a-z0-9]{1,63}$'");
      await loginRole(db, paiRole, ['paidb_writer'], { search_path: 'openpai' });
      await loginRole(db, srcRole, [], { search_path: 'openpai_src' });
      await admin(db, [`GRANT USAGE ON SCHEMA openpai_src TO "${srcRole}"`, `GRANT ALL ON ALL TABLES IN SCHEMA openpai_src TO "${srcRole}"`]);
      pai = connect(version, { database: db, user: paiRole });
      src = connect(version, { database: db, user: srcRole });
      P = defineModels(pai);
      O = defineModels(src);
      jobs = Array.from({ length: JOBS }, (_, i) => buildJob(i));
    });
    after(async () => {
      if (pai) await pai.close();
      if (src) await src.close();
      await dropDatabase(db);
    });

    it('the import took every job, and skipped only the name longer than 63', async () => {
      const byRel = Object.fromEntries(importResult.map((r) => [r.relation, r]));
      assert.ok(byRel.frameworks, `import_database answered ${JSON.stringify(importResult)}`);
      const long = jobs.filter((j) => j.params.name.length > 63).length;
      assert.equal(Number(byRel.frameworks.imported), JOBS - long);
      assert.equal(Number(byRel.frameworks.skipped), long);
      const [n] = await pai.query('SELECT count(*)::int AS n FROM frameworks', { type: 'SELECT' });
      assert.equal(n.n, JOBS - long);
    });

    it('each view has the columns of OpenPAI\'s table: names, order and types', async () => {
      const cols = async (schema, rel) => (await pai.query(
        `SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
          ORDER BY a.attnum`, { bind: [schema, rel], type: 'SELECT' }));
      // OpenPAI's VARCHAR(n) columns are text in the views.
      const base = (c) => ({ name: c.name, type: c.type === 'character varying' ? 'text' : c.type });
      for (const rel of Object.values(RELATIONS)) {
        const want = (await cols('openpai_src', rel)).map(base);
        const got = (await cols('openpai', rel)).map(base);
        assert.deepEqual(got, want, rel);
      }
    });

    it('the views are what search_path = openpai finds, not paidb\'s tables', async () => {
      const [r] = await pai.query("SELECT current_setting('search_path') AS sp, to_regclass('frameworks')::text AS rel", { type: 'SELECT' });
      assert.equal(r.sp, 'openpai');
      assert.equal(r.rel, 'frameworks');
      const [k] = await pai.query("SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'openpai' AND c.relname = 'frameworks'", { type: 'SELECT' });
      assert.equal(k.relkind, 'v');
    });

    for (const query of LISTS) {
      it(`list ${new URLSearchParams(query).toString() || '(no filter)'}`, async () => {
        const want = await q.listJobs(O, query);
        const got = await q.listJobs(P, query);
        assertSameList(got, want, query);
        if (query.withTotalCount && !query.keyword?.startsWith('no-')) assert.ok(want.totalCount > 0, 'the query selects something');
      });
    }

    it('job detail: submission time, tags and the parsed snapshot of every job', async () => {
      let n = 0;
      for (const j of jobs) {
        if (j.params.name.length > 63) continue;
        const want = await q.getJob(O, j.params.name);
        const got = await q.getJob(P, j.params.name);
        assert.ok(got, `job ${j.params.name} (${j.params.kind}) missing in paidb`);
        assert.equal(got.submissionTime, want.submissionTime, j.params.name);
        assert.deepEqual(got.tags, want.tags, j.params.name);
        assert.deepEqual(norm(got.latest), norm(want.latest), `${j.params.name} (${j.params.kind}) snapshot`);
        n++;
      }
      assert.ok(n > 0);
      assert.equal(await q.getJob(P, '0123456789abcdef0123456789abcdef'), null);
    });

    it('job config of every job', async () => {
      for (const j of jobs.slice(0, 60)) {
        if (j.params.name.length > 63) continue;
        assert.equal(await q.getConfig(P, j.params.name), await q.getConfig(O, j.params.name), j.params.name);
      }
    });

    it('ping (authenticate) and job-specific token checks', async () => {
      await pai.authenticate();
      let valid = 0;
      for (const j of jobs) {
        if (j.params.name.length > 63) continue;
        const want = await q.jobTokenValid(O, j.params.name);
        assert.equal(await q.jobTokenValid(P, j.params.name), want, j.params.name);
        valid += want;
      }
      assert.ok(valid > 0 && valid < jobs.length);
    });

    it('attempts from framework_history, in order, and a job at an earlier attempt', async () => {
      const retried = jobs.filter((j) => j.rows.framework_history.length > 0);
      assert.ok(retried.length > 0, 'the fixture has retried jobs');
      for (const j of retried) {
        const want = await q.listAttempts(O, j.params.name);
        const got = await q.listAttempts(P, j.params.name);
        assert.equal(got.length, want.length, j.params.name);
        assert.deepEqual(got.map(norm), want.map(norm), j.params.name);
        assert.deepEqual(got.map((s) => s.status.attemptStatus.id), [...want.keys()], 'attempts 0..n in order');
        const at0 = await q.getJob(P, j.params.name, 0);
        assert.deepEqual(norm(at0.specified), norm((await q.getJob(O, j.params.name, 0)).specified));
        assert.equal(at0.specified.status.attemptStatus.id, 0);
      }
    });

    it('task attempts from task_history', async () => {
      const withTaskRetry = jobs.filter((j) => j.params.kind === 'running-task-retried');
      assert.ok(withTaskRetry.length > 0);
      for (const j of withTaskRetry) {
        const ts = JSON.parse(j.rows.frameworks[0].snapshot).status.attemptStatus.taskRoleStatuses[0].taskStatuses[0];
        const want = await q.taskAttempts(O, ts);
        const got = await q.taskAttempts(P, ts);
        assert.equal(want.length, 1);
        assert.deepEqual(got, want, j.params.name);
      }
    });

    it('events of a job, all and by type', async () => {
      let seen = 0;
      for (const j of jobs.slice(0, 80)) {
        if (j.params.name.length > 63) continue;
        for (const type of [undefined, 'Warning']) {
          const want = await q.getEvents(O, j.params.name, type);
          const got = await q.getEvents(P, j.params.name, type);
          assert.deepEqual(got, want, `${j.params.name} ${type || ''}`);
          seen += want.length;
        }
      }
      assert.ok(seen > 0, 'the sample has events');
    });

    it('tag add (twice), add of a tag held under another uid, and remove', async () => {
      const j = jobs.find((x) => x.params.kind === 'succeeded' && x.params.name.length <= 63);
      const name = j.params.name;
      const full = j.params.fullName;
      for (const M of [O, P]) {
        const [t1, created1] = await q.addTag(M, name, full, 'fresh', md5);
        assert.equal(created1, true);
        assert.equal(t1.name, 'fresh');
        const [, created2] = await q.addTag(M, name, full, 'fresh', md5);
        assert.equal(created2, false, 'the second add finds the tag');
      }
      assert.deepEqual((await q.getJob(P, name)).tags, (await q.getJob(O, name)).tags);
      assert.ok((await q.getJob(P, name)).tags.includes('fresh'));
      assert.deepEqual(await q.listJobs(P, { tagsContain: 'fresh' }), await q.listJobs(O, { tagsContain: 'fresh' }));

      // A tag the job has under an older uid: no error, still one such tag.
      const legacy = jobs.find((x) => x.rows.tags.some((t) => t.name === 'baseline') && x.params.name.length <= 63);
      // (findOrCreate's find misses, its INSERT is taken as the stored row:
      // Sequelize says "created", which the rest-server ignores.)
      const [tagB] = await q.addTag(P, legacy.params.name, legacy.params.fullName, 'baseline', md5);
      assert.equal(tagB.name, 'baseline');
      const [nb] = await pai.query("SELECT count(*)::int AS n FROM tags WHERE \"frameworkName\" = $1 AND name = 'baseline'", { bind: [legacy.params.name], type: 'SELECT' });
      assert.equal(nb.n, 1);

      for (const M of [O, P]) {
        assert.equal(await q.deleteTag(M, name, 'fresh'), 1);
        assert.equal(await q.deleteTag(M, name, 'fresh'), 0, 'a second remove finds nothing');
      }
      assert.equal(await q.deleteTag(P, legacy.params.name, 'baseline'), 1);
      assert.deepEqual((await q.getJob(P, name)).tags, (await q.getJob(O, name)).tags);
      assert.equal(await q.addTag(P, '0123456789abcdef0123456789abcdef', 'x~y', 't', md5), null);
    });

    it('notifications: the same jobs are due, and marking them notified sticks', async () => {
      const plain = (rows) => rows.map((r) => r.get({ plain: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
      const dueO = await q.notificationsDue(O);
      const dueP = await q.notificationsDue(P);
      assert.ok(dueO.length > 0, 'the fixture has notifications due');
      assert.deepEqual(plain(dueP), plain(dueO));
      for (const due of [dueO, dueP]) {
        for (const f of due) {
          const infos = {};
          if (f.notificationAtRunning && !f.notifiedAtRunning) infos.notifiedAtRunning = true;
          if (f.notificationAtSucceeded && !f.notifiedAtSucceeded && f.state === 'SUCCEEDED') infos.notifiedAtSucceeded = true;
          if (f.notificationAtFailed && !f.notifiedAtFailed && f.state === 'FAILED') infos.notifiedAtFailed = true;
          if (f.notificationAtStopped && !f.notifiedAtStopped && f.state === 'STOPPED') infos.notifiedAtStopped = true;
          if (f.notificationAtRetried && f.notifiedAtRetried < f.retries) infos.notifiedAtRetried = f.retries;
          await q.markNotified(f, infos);
        }
      }
      assert.deepEqual(plain(await q.notificationsDue(P)), plain(await q.notificationsDue(O)));
      assert.equal((await q.notificationsDue(P)).length, 0);
      const cols = ['name', 'notifiedAtRunning', 'notifiedAtSucceeded', 'notifiedAtFailed', 'notifiedAtStopped', 'notifiedAtRetried'];
      const all = async (M) => plain(await M.Framework.findAll({ attributes: cols, where: { name: dueO.map((f) => f.name) } }));
      assert.deepEqual(await all(P), await all(O));
    });

    it('the fixture covers every kind of job', () => {
      const kinds = new Set(jobs.map((j) => j.params.kind));
      assert.deepEqual([...kinds].sort(), [...new Set(KINDS)].sort());
    });
  });
}
