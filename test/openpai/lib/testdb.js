'use strict';
// Test databases on the server of the PG* environment (PGUSER a superuser):
// a fresh database per test file and Sequelize version, with paidb (and
// paidb_openpai when asked) created in it, and login roles to run as.

const { connect } = require('./connect');

// Run `sqls` as the superuser in `database`.
async function admin(database, sqls) {
  const s = connect('6', { database });
  try {
    for (const q of [].concat(sqls)) await s.query(q);
  } finally {
    await s.close();
  }
}

// Drop and create database `name`, create `extensions` in it; returns name.
async function freshDatabase(name, extensions = ['paidb']) {
  await admin(process.env.PGDATABASE || 'postgres', [
    `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`,
    `CREATE DATABASE "${name}"`,
  ]);
  await admin(name, extensions.map((e) => `CREATE EXTENSION "${e}" CASCADE`));
  return name;
}

// The login roles made for each test database, dropped with it.
const rolesOf = new Map();

// Create (or re-create the settings of) login role `role` in `roles`, with
// `settings` ({name: value}) set for it in `database`.
async function loginRole(database, role, roles = [], settings = {}) {
  if (!rolesOf.has(database)) rolesOf.set(database, new Set());
  rolesOf.get(database).add(role);
  const qs = [
    `DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${role}') THEN CREATE ROLE "${role}" LOGIN; END IF; END$$`,
    ...roles.map((r) => `GRANT "${r}" TO "${role}"`),
    ...Object.entries(settings).map(([k, v]) => `ALTER ROLE "${role}" IN DATABASE "${database}" SET ${k} = '${v}'`),
  ];
  await admin(database, qs);
}

// Drop database `name` (at the end of a test file) and the login roles made
// for it.  Roles are cluster-wide: a member left in paidb_writer would make
// the next CREATE EXTENSION paidb CASCADE in a cluster where no database has paidb
// refuse the role as one it did not create (sql/paidb--0.1--0.2.sql).
async function dropDatabase(name) {
  const home = process.env.PGDATABASE || 'postgres';
  await admin(home, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  for (const role of rolesOf.get(name) || []) await admin(home, `DROP ROLE IF EXISTS "${role}"`);
  rolesOf.delete(name);
}

module.exports = { admin, freshDatabase, loginRole, dropDatabase };
