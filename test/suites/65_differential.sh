# test/suites/65_differential.sh — the openpai rewrites (SPEC §10) against
# themselves: test/differential/diff.py generates $PAIDB_DIFF_QUERIES
# (default 15,000) queries over the openpai views from a seed
# ($PAIDB_DIFF_SEED, else random; always printed) and runs each with
# paidb.openpai_count_rewrite/paidb.openpai_tag_rewrite off and on, in two
# psql sessions over the same data, under several roles and with row
# security on various tables; rows and SQLSTATEs must be equal.  Each
# query compared is one check.  Sourced by test/run-tests.sh.
diff_log=$WORK/differential.log
su postgres -c "cd '$WORK' && PAIDB_DIFF_SEED='${PAIDB_DIFF_SEED:-}' PAIDB_DIFF_QUERIES='${PAIDB_DIFF_QUERIES:-}' \
    timeout 600 /usr/bin/python3 test/differential/diff.py --host $PGHOST --port $PGPORT --tmp '$WORK'" > "$diff_log" 2>&1
diff_rc=$?
head -c 60000 "$diff_log"
read -r diff_pass diff_fail < <(sed -n 's/^DIFF-COUNTS \([0-9]*\) \([0-9]*\)$/\1 \2/p' "$diff_log" | tail -1)
diff_pass=${diff_pass:-0}; diff_fail=${diff_fail:-0}
[ $diff_rc != 0 ] && [ "$diff_fail" = 0 ] && diff_fail=1
add "$diff_pass" "$diff_fail" "differential (rewrites off vs on)"
if [ "$diff_fail" != 0 ]; then
    grep -E '^differential: seed' "$diff_log" | tail -1 | sed 's/^/    /' >> "$RECAP"
    grep -E '^differences by kind' "$diff_log" | sed 's/^/    /' >> "$RECAP"
fi
