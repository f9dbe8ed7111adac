'use strict';
// Sequelize instances for the two versions under test, from the PG*
// environment: "5" is the rest-server's Sequelize 5.21.3 on pg 8.0.3 (the
// oldest pg that connects on current Node: 7.x and 8.0.0-8.0.2 hang in
// connect() since Node 14), "6" is Sequelize 6 on a current pg 8.

const VERSIONS = {
  5: { sequelize: 'sequelize5', pg: 'pg-rest' },
  6: { sequelize: 'sequelize6', pg: 'pg' },
};

// A Sequelize instance of `version` connected as `user` to `database`.
function connect(version, { database, user, password, pool, logging } = {}) {
  const v = VERSIONS[version];
  if (!v) throw new Error(`unknown Sequelize version ${version}`);
  const { Sequelize } = require(v.sequelize);
  return new Sequelize(
    database || process.env.PGDATABASE || 'postgres',
    user || process.env.PGUSER || 'postgres',
    password || process.env.PGPASSWORD || null,
    {
      dialect: 'postgres',
      dialectModule: require(v.pg),
      host: process.env.PGHOST || '127.0.0.1',
      port: Number(process.env.PGPORT || 5432),
      logging: logging || false,
      pool: pool || { max: 4, min: 0 },
    },
  );
}

// The pg module paired with `version` (for bulk loads that bypass Sequelize).
function pgModule(version) {
  return require(VERSIONS[version].pg);
}

module.exports = { connect, pgModule, VERSIONS };
