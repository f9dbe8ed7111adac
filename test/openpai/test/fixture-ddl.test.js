'use strict';
// test/t/data/openpai-tables.sql (the OpenPAI tables of test/t/060 and of
// test/bench/openpai_import_bench.sh) is what OpenPAI's Sequelize models
// create: the file loaded in one schema and make-openpai-db.js's sync()
// (Sequelize 5.21.3) in another have the same tables, columns (order, type,
// NOT NULL, default), constraints (keys, foreign keys with their actions),
// indexes and sequences.  Regenerate the file with
// make-openpai-tables-sql.sh when lib/models.js changes.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const fs = require('fs');
const { spawnSync } = require('child_process');
const { connect } = require('../lib/connect');
const { freshDatabase, dropDatabase } = require('../lib/testdb');

const db = 'paidb_openpai_fixture_ddl';
const FILE = path.join(__dirname, '..', '..', 't', 'data', 'openpai-tables.sql');

// One line per column, constraint, index and sequence of schema `schema`,
// with the schema's name taken out of every definition.
const DESCRIBE = `
SELECT d FROM (
  SELECT format('column %s.%s #%s %s%s%s', c.relname, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
                CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
                coalesce(' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid), '')) AS d
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
   WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'r'
  UNION ALL
  SELECT format('constraint %s %s %s %s', c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid))
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT format('index %s %s', i.tablename, pg_get_indexdef(format('%I.%I', i.schemaname, i.indexname)::regclass))
    FROM pg_indexes i WHERE i.schemaname = $1::text
  UNION ALL
  SELECT format('sequence %s %s', c.relname, format_type(s.seqtypid, NULL))
    FROM pg_class c JOIN pg_sequence s ON s.seqrelid = c.oid WHERE c.relnamespace = $1::text::regnamespace
) x(d0), LATERAL (SELECT replace(replace(d0, $1::text || '.', ''), quote_ident($1::text) || '.', '')) y(d)
ORDER BY 1`;

describe('test/t/data/openpai-tables.sql', () => {
  let s;
  const describeSchema = async (schema) =>
    (await s.query(DESCRIBE, { bind: [schema], type: 'SELECT' })).map((r) => r.d);

  before(async () => {
    await freshDatabase(db, []);
    const r = spawnSync(process.execPath, [path.join(__dirname, '..', 'make-openpai-db.js'), '--schema', 'synced', '--jobs', '0', '--quiet'], {
      env: { ...process.env, PGDATABASE: db }, encoding: 'utf8', timeout: 120000,
    });
    assert.equal(r.status, 0, r.stderr);
    // the file, in a session of its own (it empties search_path)
    const f = connect('6', { database: db, pool: { max: 1, min: 0 } });
    try {
      await f.query(fs.readFileSync(FILE, 'utf8'));
    } finally {
      await f.close();
    }
    s = connect('6', { database: db });
  });
  after(async () => {
    if (s) await s.close();
    await dropDatabase(db);
  });

  it('has the tables, columns, constraints, indexes and sequences sync() creates', async () => {
    const file = await describeSchema('opai');
    const synced = await describeSchema('synced');
    assert.ok(synced.length > 100, `sync() made only ${synced.length} catalog lines`);
    assert.deepEqual(file, synced);
  });

  it('has OpenPAI\'s foreign keys and indexes (not just columns)', async () => {
    const file = await describeSchema('opai');
    assert.equal(file.filter((d) => / f FOREIGN KEY \("frameworkName"\) REFERENCES frameworks\(name\)/.test(d)).length, 6);
    assert.ok(file.includes('index frameworks CREATE INDEX frameworks_submission_time ON frameworks USING btree ("submissionTime")'),
      file.filter((d) => d.startsWith('index')).join('\n'));
    assert.ok(file.some((d) => d.startsWith('column version.')));
  });
});
