#!/usr/bin/env node
'use strict';
// Build an OpenPAI v1.2+ database in schema S of the database the PG*
// environment names: the tables exactly as OpenPAI's Sequelize models create
// them (sync() of lib/models.js, Sequelize 5.21.3 by default as OpenPAI's SDK
// pins it), filled with N jobs in every state (lib/openpai-data.js).
//
//   node make-openpai-db.js --schema S [--jobs N] [--sequelize 5|6]
//        [--drop] [--api-out FILE] [--quiet]
//
// --drop       drop schema S first (else it must not hold OpenPAI's tables yet)
// --api-out    write the jobs still in the API server as a JSON List of
//              Framework objects (for a fake API server)
// Rows are loaded in bulk (json_populate_recordset over batches of a few
// MB in one transaction): 100,000 jobs take about 40 s as a superuser.

const fs = require('fs');
const { connect, pgModule } = require('./lib/connect');
const { defineModels } = require('./lib/models');
const { buildJob } = require('./lib/openpai-data');

const TABLES = ['frameworks', 'framework_history', 'task_history', 'pods', 'framework_events', 'pod_events', 'tags'];
const BATCH_BYTES = 4 * 1024 * 1024;

// Parse argv into options; exit 2 with usage on anything unknown.
function parseArgs(argv) {
  const o = { jobs: 200, sequelize: '5', drop: false, apiOut: null, quiet: false, schema: null };
  for (let k = 0; k < argv.length; k++) {
    const a = argv[k];
    const val = () => {
      if (k + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++k];
    };
    if (a === '--schema') o.schema = val();
    else if (a === '--jobs') o.jobs = Number(val());
    else if (a === '--sequelize') o.sequelize = val();
    else if (a === '--api-out') o.apiOut = val();
    else if (a === '--drop') o.drop = true;
    else if (a === '--quiet') o.quiet = true;
    else usage(`unknown argument ${a}`);
  }
  if (!o.schema) usage('--schema is required');
  if (!/^[a-z_][a-z0-9_]*$/.test(o.schema)) usage('--schema must be a plain lower-case identifier');
  if (!Number.isInteger(o.jobs) || o.jobs < 0) usage('--jobs must be a non-negative integer');
  if (!['5', '6'].includes(o.sequelize)) usage('--sequelize must be 5 or 6');
  return o;
}

// Print usage and exit.
function usage(msg) {
  process.stderr.write(`make-openpai-db: ${msg}\nusage: node make-openpai-db.js --schema S [--jobs N] [--sequelize 5|6] [--drop] [--api-out FILE] [--quiet]\n`);
  process.exit(2);
}

// Create OpenPAI's tables in `schema` through Sequelize's sync().
async function createTables(version, schema, drop) {
  const sequelize = connect(version);
  try {
    if (drop) await sequelize.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sequelize.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    const [present] = await sequelize.query(
      `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = '${schema}' AND tablename IN (${TABLES.map((t) => `'${t}'`).join(', ')})`,
    );
    if (present[0].n > 0) throw new Error(`schema ${schema} already holds OpenPAI tables (use --drop)`);
    defineModels(sequelize, { schema });
    await sequelize.sync();
  } finally {
    await sequelize.close();
  }
}

// Insert every job's rows in batches; returns the row count per table.
async function fill(version, schema, jobs, apiObjects) {
  const pg = pgModule(version);
  const client = new pg.Client({
    host: process.env.PGHOST || '127.0.0.1',
    port: Number(process.env.PGPORT || 5432),
    user: process.env.PGUSER || 'postgres',
    password: process.env.PGPASSWORD || undefined,
    database: process.env.PGDATABASE || 'postgres',
  });
  await client.connect();
  const counts = Object.fromEntries(TABLES.map((t) => [t, 0]));
  const pending = Object.fromEntries(TABLES.map((t) => [t, { parts: [], bytes: 0 }]));
  const flush = async (t) => {
    const b = pending[t];
    if (b.parts.length === 0) return;
    const json = `[${b.parts.join(',')}]`;
    const r = await client.query(
      `INSERT INTO "${schema}"."${t}" SELECT * FROM json_populate_recordset(NULL::"${schema}"."${t}", $1::json)`,
      [json],
    );
    counts[t] += r.rowCount;
    b.parts = [];
    b.bytes = 0;
  };
  try {
    await client.query('BEGIN');
    // A superuser loads without firing the foreign-key triggers (three times
    // faster); the references are checked once, in bulk, at the end.
    const su = await client.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
    const fast = su.rows[0].rolsuper;
    if (fast) await client.query('SET LOCAL session_replication_role = replica');
    for (let i = 0; i < jobs; i++) {
      const job = buildJob(i);
      if (job.apiObject && apiObjects) apiObjects.push(job.apiObject);
      for (const t of TABLES) {
        for (const row of job.rows[t]) {
          const s = JSON.stringify(row);
          pending[t].parts.push(s);
          pending[t].bytes += s.length;
        }
      }
      // Parents first: the child tables reference "frameworks"."name".
      if (pending.frameworks.bytes >= BATCH_BYTES) {
        for (const t of TABLES) await flush(t);
      }
    }
    for (const t of TABLES) await flush(t);
    if (fast) {
      await client.query('SET LOCAL session_replication_role = origin');
      for (const t of TABLES.slice(1)) {
        const r = await client.query(`SELECT count(*)::int AS n FROM "${schema}"."${t}" c
          WHERE NOT EXISTS (SELECT FROM "${schema}"."frameworks" f WHERE f.name = c."frameworkName")`);
        if (r.rows[0].n !== 0) throw new Error(`${r.rows[0].n} rows of ${t} reference no framework`);
      }
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    await client.end();
  }
  return counts;
}

// Build the database as the options say.
async function main() {
  const o = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  await createTables(o.sequelize, o.schema, o.drop);
  const apiObjects = o.apiOut ? [] : null;
  const counts = await fill(o.sequelize, o.schema, o.jobs, apiObjects);
  if (o.apiOut) {
    fs.writeFileSync(o.apiOut, JSON.stringify({ apiVersion: 'frameworkcontroller.microsoft.com/v1', kind: 'FrameworkList', items: apiObjects }));
  }
  if (!o.quiet) {
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    process.stderr.write(`make-openpai-db: schema ${o.schema}: ${TABLES.map((t) => `${t} ${counts[t]}`).join(', ')}` +
      `${apiObjects ? `; ${apiObjects.length} in the API server -> ${o.apiOut}` : ''} (${secs} s)\n`);
  }
}

main().catch((e) => {
  process.stderr.write(`make-openpai-db: ${e.message}\n`);
  process.exit(1);
});
