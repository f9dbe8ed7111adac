'use strict';
// The rest-server's two calls to OpenPAI's write merger, done in SQL on
// paidb over the rest-server's own Sequelize connection:
//
//   PUT   /api/v1/frameworkRequest/:name  -> paidb.put_framework_request
//   PATCH /api/v1/frameworkRequest/:name  -> paidb.patch_framework_request
//
// Each call resolves (never rejects) to what the rest-server read from the
// HTTP answer: { status, data } with status 200 and data { message: 'ok' },
// or the write merger's error statuses with data { code, message }:
//   400  bad input (SQLSTATE class 22: not an object, no or invalid name,
//        add-on that is not an object, name in the URL differs from the body)
//   404  PATCH of an unknown framework (P0002)
//   413  request larger than paidb.max_request_bytes (54000)
//   500  anything else (connection lost, permission denied, ...)
// No dependencies: it uses the Sequelize instance it is given (5 or 6).

// HTTP status for a PostgreSQL SQLSTATE raised by paidb's functions.
function statusForSqlState(code) {
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return 500;
  if (code === 'P0002') return 404;
  if (code === '54000') return 413;
  if (code.startsWith('22')) return 400;
  return 500;
}

const REASONS = { 200: 'OK', 400: 'Bad Request', 404: 'Not Found', 413: 'Payload Too Large', 500: 'Internal Server Error' };

// The answer object for `status` and `message` (as the write merger sent it).
function answer(status, message, extra) {
  if (status === 200) return { status, data: { message: 'ok', ...extra } };
  return { status, data: { code: REASONS[status], message } };
}

// The answer for an error thrown by a query.
function errorAnswer(err) {
  const pgErr = err && (err.original || err.parent || err);
  const code = pgErr && pgErr.code;
  const status = statusForSqlState(code);
  let message = (pgErr && pgErr.message) || String(err);
  if (err && /^SequelizeConnection|^SequelizeHostNot|^SequelizeAccessDenied/.test(err.name || '')) {
    message = `There is a problem with your database connection. Please contact your admin. Detailed message: ${message}`;
  } else if (status === 500 && /^[0-9A-Z]{5}$/.test(code || '')) {
    message = `${message} (SQLSTATE ${code})`;
  }
  return answer(status, message);
}

const ADDON_KEYS = ['configSecretDef', 'userExtensionSecretDef', 'priorityClassDef', 'dockerSecretDef', 'tokenSecretDef'];

// A write merger backed by paidb over `sequelize`; options.transaction is
// passed to every query (to run inside a caller's transaction).
function createWriteMerger(sequelize, options = {}) {
  const queryOpts = (bind) => ({
    bind,
    type: sequelize.QueryTypes ? sequelize.QueryTypes.SELECT : 'SELECT',
    ...(options.transaction ? { transaction: options.transaction } : {}),
  });

  // PUT /api/v1/frameworkRequest/:name with the rest-server's body.
  async function putFrameworkRequest(frameworkName, body) {
    const b = body || {};
    const request = b.frameworkRequest;
    const bodyName = request && request.metadata && request.metadata.name;
    if (!bodyName) return answer(400, 'Cannot find framework name.');
    if (frameworkName !== bodyName) {
      return answer(400, "The framework names in query string doesn't match the name in body.");
    }
    const addOns = {};
    for (const k of ADDON_KEYS) if (b[k] !== undefined && b[k] !== null) addOns[k] = b[k];
    let submission = b.submissionTime === undefined || b.submissionTime === null ? null : new Date(b.submissionTime);
    if (submission !== null && Number.isNaN(submission.getTime())) return answer(400, 'submissionTime is not a valid time.');
    try {
      const rows = await sequelize.query(
        'SELECT name, request_generation, created, changed FROM paidb.put_framework_request('
          + '$1::jsonb, coalesce($2::timestamptz, now()), $3::jsonb)',
        queryOpts([JSON.stringify(request), submission === null ? null : submission.toISOString(), JSON.stringify(addOns)]),
      );
      const r = rows[0];
      return answer(200, null, { requestGeneration: Number(r.request_generation), created: r.created, changed: r.changed });
    } catch (err) {
      return errorAnswer(err);
    }
  }

  // PATCH /api/v1/frameworkRequest/:name with a JSON merge patch.
  async function patchFrameworkRequest(frameworkName, patch) {
    if (!frameworkName) return answer(400, 'Cannot find framework name.');
    if (patch && patch.metadata && patch.metadata.name !== undefined && patch.metadata.name !== frameworkName) {
      return answer(400, "The framework names in query string doesn't match the name in body.");
    }
    try {
      const rows = await sequelize.query(
        'SELECT request_generation, changed FROM paidb.patch_framework_request($1::text, $2::jsonb)',
        queryOpts([frameworkName, JSON.stringify(patch === undefined ? null : patch)]),
      );
      const r = rows[0];
      return answer(200, null, { requestGeneration: Number(r.request_generation), changed: r.changed });
    } catch (err) {
      return errorAnswer(err);
    }
  }

  return { putFrameworkRequest, patchFrameworkRequest };
}

module.exports = { createWriteMerger, statusForSqlState };
