# test/suites/66_sqlsmith.sh — random SQL (Debian's sqlsmith) for
# $PAIDB_SQLSMITH_SECONDS (default 75) against a server with paidb
# preloaded (the post-parse-analysis rewrites active) and paidb_openpai,
# as a role that is no superuser (test/lib/sqlsmith.sh).  Checks: sqlsmith
# executed queries, no crash or assertion in the server log, the server
# still accepts connections.  Sourced by test/run-tests.sh.
. "$ROOT/test/lib/sqlsmith.sh"
if ! command -v sqlsmith >/dev/null 2>&1; then
    PAIDB_DEBS="sqlsmith" paidb_install_packages >/dev/null
fi
if ! paidb_sqlsmith "$PG_BIN" "$WORK/sqlsmith/data" "${PAIDB_SQLSMITH_SECONDS:-75}" plain; then
    add 0 1 "sqlsmith (server set-up)"
else
    [ "$SMITH_QUERIES" -gt 0 ] && add 1 0 "sqlsmith executed $SMITH_QUERIES queries" || add 0 1 "sqlsmith executed no query"
    [ "$SMITH_CRASHES" = 0 ] && add 1 0 "sqlsmith: no crash" || add 0 1 "sqlsmith: crash lines in the server log"
    [ "$SMITH_UP" = 1 ] && add 1 0 "sqlsmith: server up afterwards" || add 0 1 "sqlsmith: server down afterwards"
fi
