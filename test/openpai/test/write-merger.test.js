'use strict';
// contrib/openpai/paidb-write-merger.js against a real paidb, with the
// rest-server's Sequelize 5.21.3 and with Sequelize 6: the answers the
// rest-server reads (status and message) and what is stored.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { connect } = require('../lib/connect');
const { freshDatabase, loginRole, dropDatabase } = require('../lib/testdb');
const { frameworkRequest, jobParams } = require('../lib/openpai-data');
const { createWriteMerger, statusForSqlState } = require('../../../contrib/openpai/paidb-write-merger');

// The body the rest-server PUTs for job i (its add-ons as objects).
function putBody(i, overrides = {}) {
  const p = jobParams(i);
  const req = frameworkRequest({ ...p, legacy: true });
  return {
    frameworkRequest: req,
    submissionTime: new Date(Date.UTC(2024, 4, 1, 12, 0, i)),
    configSecretDef: { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${p.name}-configcred` }, data: { k: 'c2VjcmV0' } },
    userExtensionSecretDef: null,
    priorityClassDef: { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: `${p.name}-priority` }, value: -1000 },
    dockerSecretDef: null,
    tokenSecretDef: null,
    ...overrides,
  };
}

for (const version of ['5', '6']) {
  describe(`write merger over SQL, Sequelize ${version}`, () => {
    const db = `paidb_openpai_wm_${version}`;
    const role = `openpai_rest_wm_${version}`;
    let sequelize;
    let small;
    let wm;
    const row = async (name) => {
      const [r] = await sequelize.query(
        'SELECT request_generation, request_synced, submission_time, paidb.snapshot(f) AS snapshot, execution_type FROM paidb.framework f WHERE name = $1',
        { bind: [name], type: 'SELECT' },
      );
      return r;
    };
    const count = async () => (await sequelize.query('SELECT count(*)::int AS n FROM paidb.framework', { type: 'SELECT' }))[0].n;

    before(async () => {
      await freshDatabase(db, ['paidb']);
      await loginRole(db, role, ['paidb_writer']);
      await loginRole(db, `${role}_small`, ['paidb_writer'], { 'paidb.max_request_bytes': '4kB' });
      await loginRole(db, `${role}_none`);
      sequelize = connect(version, { database: db, user: role });
      small = connect(version, { database: db, user: `${role}_small` });
      wm = createWriteMerger(sequelize);
    });
    after(async () => {
      await sequelize.close();
      await small.close();
      await dropDatabase(db);
    });

    it('PUT of a new job: 200, stored at generation 1 with its submission time', async () => {
      const body = putBody(1);
      const name = body.frameworkRequest.metadata.name;
      const res = await wm.putFrameworkRequest(name, body);
      assert.equal(res.status, 200);
      assert.equal(res.data.message, 'ok');
      assert.equal(res.data.created, true);
      const r = await row(name);
      assert.equal(Number(r.request_generation), 1);
      assert.equal(r.request_synced, false);
      assert.equal(new Date(r.submission_time).getTime(), body.submissionTime.getTime());
      const snap = typeof r.snapshot === 'string' ? JSON.parse(r.snapshot) : r.snapshot;
      assert.equal(snap.metadata.annotations.requestGeneration, '1');
      // add-ons are stored (read as the owner: paidb_writer sees them too)
      const [a] = await sequelize.query('SELECT config_secret_def, priority_class_def, docker_secret_def FROM paidb.framework WHERE name = $1', { bind: [name], type: 'SELECT' });
      assert.equal(a.config_secret_def.metadata.name, `${name}-configcred`);
      assert.equal(a.priority_class_def.kind, 'PriorityClass');
      assert.equal(a.docker_secret_def, null);
    });

    it('PUT of the same request again: 200 and nothing changes', async () => {
      const body = putBody(1);
      const name = body.frameworkRequest.metadata.name;
      const res = await wm.putFrameworkRequest(name, body);
      assert.equal(res.status, 200);
      assert.equal(res.data.changed, false);
      assert.equal(Number((await row(name)).request_generation), 1);
    });

    it('PUT of a changed request: 200 and generation 2', async () => {
      const body = putBody(1);
      body.frameworkRequest.spec.retryPolicy.maxRetryCount = 5;
      const name = body.frameworkRequest.metadata.name;
      const res = await wm.putFrameworkRequest(name, body);
      assert.equal(res.status, 200);
      assert.equal(res.data.changed, true);
      assert.equal(Number((await row(name)).request_generation), 2);
    });

    it('PUT without a submission time uses now()', async () => {
      const body = putBody(2, { submissionTime: undefined });
      const name = body.frameworkRequest.metadata.name;
      const t = Date.now();
      assert.equal((await wm.putFrameworkRequest(name, body)).status, 200);
      assert.ok(Math.abs(new Date((await row(name)).submission_time).getTime() - t) < 60000);
    });

    it('PUT with bad input: 400 and nothing stored', async () => {
      const before = await count();
      const good = putBody(3);
      const name = good.frameworkRequest.metadata.name;
      const cases = [
        ['no name', name, putBody(3, { frameworkRequest: { ...good.frameworkRequest, metadata: { labels: {} } } }), /Cannot find framework name/],
        ['URL name differs', 'someothername', good, /doesn't match/],
        ['name with a dash', 'bad-name', putBody(3, { frameworkRequest: { ...good.frameworkRequest, metadata: { ...good.frameworkRequest.metadata, name: 'bad-name' } } }), /.+/],
        ['64-character name', 'a'.repeat(64), putBody(3, { frameworkRequest: { ...good.frameworkRequest, metadata: { ...good.frameworkRequest.metadata, name: 'a'.repeat(64) } } }), /.+/],
        ['add-on not an object', name, putBody(3, { dockerSecretDef: 'not-an-object' }), /add-on definition "dockerSecretDef" must be a JSON object/],
        ['request not an object', name, putBody(3, { frameworkRequest: ['x'] }), /.+/],
        ['bad submission time', name, putBody(3, { submissionTime: 'yesterday' }), /submissionTime/],
      ];
      for (const [what, urlName, body, re] of cases) {
        const res = await wm.putFrameworkRequest(urlName, body);
        assert.equal(res.status, 400, `${what}: ${JSON.stringify(res)}`);
        assert.equal(res.data.code, 'Bad Request');
        assert.match(res.data.message, re, what);
      }
      assert.equal(await count(), before);
    });

    it('PUT of a request over paidb.max_request_bytes: 413 and nothing stored', async () => {
      const before = await count();
      const body = putBody(4);
      const name = body.frameworkRequest.metadata.name;
      body.frameworkRequest.metadata.annotations.config += `# ${'x'.repeat(8192)}\n`;
      const res = await createWriteMerger(small).putFrameworkRequest(name, body);
      assert.equal(res.status, 413, JSON.stringify(res.data));
      assert.equal(res.data.code, 'Payload Too Large');
      assert.equal(await count(), before);
    });

    it('PATCH stop: 200, executionType Stop at the next generation', async () => {
      const name = putBody(1).frameworkRequest.metadata.name;
      const res = await wm.patchFrameworkRequest(name, { spec: { executionType: 'Stop' } });
      assert.equal(res.status, 200);
      assert.equal(res.data.message, 'ok');
      const r = await row(name);
      assert.equal(r.execution_type, 'Stop');
      assert.equal(Number(r.request_generation), 3);
      assert.equal(r.request_synced, false);
      const again = await wm.patchFrameworkRequest(name, { spec: { executionType: 'Stop' } });
      assert.equal(again.status, 200);
      assert.equal(again.data.changed, false);
    });

    it('PATCH of an unknown job: 404', async () => {
      const res = await wm.patchFrameworkRequest('0123456789abcdef0123456789abcdef', { spec: { executionType: 'Stop' } });
      assert.equal(res.status, 404);
      assert.equal(res.data.code, 'Not Found');
      assert.match(res.data.message, /does not exist/);
    });

    it('PATCH with bad input: 400 and the job unchanged', async () => {
      const name = putBody(1).frameworkRequest.metadata.name;
      const g = Number((await row(name)).request_generation);
      for (const [what, patch] of [['rename', { metadata: { name: 'othername' } }], ['not an object', ['x']], ['null', null]]) {
        const res = await wm.patchFrameworkRequest(name, patch);
        assert.equal(res.status, 400, `${what}: ${JSON.stringify(res)}`);
      }
      assert.equal(Number((await row(name)).request_generation), g);
    });

    it('a role without paidb_writer: 500 with the SQLSTATE, nothing stored', async () => {
      const before = await count();
      const none = connect(version, { database: db, user: `${role}_none` });
      try {
        const body = putBody(5);
        const res = await createWriteMerger(none).putFrameworkRequest(body.frameworkRequest.metadata.name, body);
        assert.equal(res.status, 500);
        assert.match(res.data.message, /permission denied.*42501/);
      } finally {
        await none.close();
      }
      assert.equal(await count(), before);
    });

    it('a database that cannot be reached: 500 naming the connection', async () => {
      const [{ port }] = await sequelize.query("SELECT current_setting('port')::int + 1 AS port", { type: 'SELECT' });
      const saved = process.env.PGPORT;
      process.env.PGPORT = String(port);
      const down = connect(version, { database: db, user: role, pool: { max: 1, min: 0, acquire: 5000 } });
      process.env.PGPORT = saved;
      try {
        const body = putBody(6);
        const res = await createWriteMerger(down).putFrameworkRequest(body.frameworkRequest.metadata.name, body);
        assert.equal(res.status, 500);
        assert.match(res.data.message, /database connection/);
      } finally {
        await down.close();
      }
    });

    it('two PUTs of the same new job at once: both 200, created once', async () => {
      const body = putBody(8);
      const name = body.frameworkRequest.metadata.name;
      const other = connect(version, { database: db, user: role });
      try {
        const res = await Promise.all([wm.putFrameworkRequest(name, body), createWriteMerger(other).putFrameworkRequest(name, body)]);
        assert.deepEqual(res.map((r) => r.status), [200, 200]);
        assert.deepEqual(res.map((r) => r.data.created).sort(), [false, true]);
        assert.equal(Number((await row(name)).request_generation), 1);
      } finally {
        await other.close();
      }
    });

    it('inside a caller transaction: rolled back with it', async () => {
      const before = await count();
      const body = putBody(7);
      await sequelize.transaction(async (t) => {
        const res = await createWriteMerger(sequelize, { transaction: t }).putFrameworkRequest(body.frameworkRequest.metadata.name, body);
        assert.equal(res.status, 200);
        await sequelize.query('SELECT 1', { transaction: t });
        throw Object.assign(new Error('roll back'), { rollback: true });
      }).catch((e) => { if (!e.rollback) throw e; });
      assert.equal(await count(), before);
    });
  });
}

describe('SQLSTATE to HTTP status', () => {
  it('maps paidb\'s codes as the rest-server expects', () => {
    assert.equal(statusForSqlState('22023'), 400);
    assert.equal(statusForSqlState('22P02'), 400);
    assert.equal(statusForSqlState('22004'), 400);
    assert.equal(statusForSqlState('P0002'), 404);
    assert.equal(statusForSqlState('54000'), 413);
    assert.equal(statusForSqlState('54001'), 500);
    assert.equal(statusForSqlState('42501'), 500);
    assert.equal(statusForSqlState(undefined), 500);
  });
});

