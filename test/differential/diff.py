#!/usr/bin/python3
"""Differential test of paidb_openpai's query rewrites (SPEC §10).

Every generated query (test/differential/gen.py) runs twice over the same
data: in one psql session with paidb.openpai_count_rewrite and
paidb.openpai_tag_rewrite off, in another with both on.  Rows (in order
where the query's ORDER BY is total, else as multisets) and SQLSTATEs must
be equal.  Every N-th query (--explain-every, default 2) is also EXPLAINed
(COSTS OFF, VERBOSE) in both sessions: where the plans differ a rewrite
fired; fewer than --min-rewritten of them rewritten fails the run (the
rewrites must not silently stop firing).

Run as a user that may connect as postgres (the suite runs it as postgres):

  python3 test/differential/diff.py --port PORT [--seed S] [--queries N] [--only ID,...]

The seed comes from --seed, else $PAIDB_DIFF_SEED, else is random; it is
always printed.  Replay a failure with the same seed and --queries, and
--only ID (the ID printed with it): the database is made again, and only
that query runs, in its phase (row security) and role.  Needs only psql and
Debian's python3.
"""
import argparse
import collections
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def psql_cmd(args, db):
    return ["psql", "-X", "-q", "-A", "-t", "-F", "|", "-P", "null=<NULL>", "-v", "ON_ERROR_STOP=0",
            "-h", args.host, "-p", str(args.port), "-U", args.user, "-d", db]


def run_sql(args, db, sql, check=True):
    p = subprocess.run(psql_cmd(args, db) + ["-v", "ON_ERROR_STOP=1"], input=sql, text=True,
                       capture_output=True)
    if check and p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit("setup failed: %s" % sql[:200])
    return p.stdout


def script(items, on, log_errors, explain_every=1):
    """The psql script one session runs: markers around every statement of
    interest; SQLSTATE after each (00000 when it succeeded)."""
    val, opp = ("on", "off") if on else ("off", "on")
    out = ["LOAD 'paidb';",
           "SET paidb.openpai_count_rewrite = %s;" % val,
           "SET paidb.openpai_tag_rewrite = %s;" % val,
           "SET search_path = openpai, public;",
           "SET extra_float_digits = 0;",
           "SET statement_timeout = '20s';"]

    def sub(s):
        return s.replace("{ON}", val).replace("{OFF}", opp)
    role = "?"
    # grouped by role: one SET ROLE per group (no item changes the role)
    for it in sorted(items, key=lambda it: (it.role or "", it.id)):
        out.append("\\echo @@I %d" % it.id)
        if it.role != role:
            out.append("SET ROLE %s;" % it.role if it.role else "RESET ROLE;")
            role = it.role
        for s in it.pre:
            out.append(sub(s) + ";")
        for j, m in enumerate(it.mains):
            if m.explain and it.id % explain_every == 0:
                out.append("\\echo @@X %d" % j)
                out.append("EXPLAIN (COSTS OFF, VERBOSE) %s;" % sub(m.sql))
                out.append("\\echo @@S :SQLSTATE")
            out.append("\\echo @@M %d" % j)
            out.append(sub(m.sql) + ";")
            out.append("\\echo @@S :SQLSTATE")
            if log_errors:
                out.append("\\if :ERROR")
                out.append("\\echo @@T :LAST_ERROR_MESSAGE")
                out.append("\\endif")
        for s in it.post:
            out.append(sub(s) + ";")
    out.append("\\echo @@END")
    return "\n".join(out) + "\n"


def parse(text):
    """{(item id, main index): {'X': (lines, state), 'M': (lines, state), 'T': msg}}"""
    res = collections.defaultdict(dict)
    cur_item = None
    cur = None          # (kind, j)
    buf = []
    ended = False
    last_j = 0
    for line in text.split("\n"):
        if line.startswith("@@I "):
            cur_item = int(line[4:])
            cur = None
            buf = []
        elif line.startswith("@@X ") or line.startswith("@@M "):
            cur = (line[2], int(line[4:]))
            buf = []
        elif line.startswith("@@S "):
            if cur is not None:
                res[(cur_item, cur[1])][cur[0]] = (buf, line[4:].strip())
            cur = None
            buf = []
        elif line.startswith("@@T "):
            res[(cur_item, last_j)]["T"] = line[4:]
        elif line == "@@END":
            ended = True
        elif cur is not None:
            buf.append(line)
        if cur is not None:
            last_j = cur[1]
    return res, ended


def norm_plan(lines):
    return [re.sub(r"pg_temp_\d+", "pg_temp", l) for l in lines]


def run_phase(args, db, phase, items):
    """Both sessions at once over this phase's items; the parsed outputs."""
    tables = gen.PHASES[phase]
    rls = ["ALTER TABLE %s %s ROW LEVEL SECURITY;" % (t, "ENABLE" if t in tables else "DISABLE")
           for t in gen.PHASES["rls_all"]]
    run_sql(args, db, "\n".join(rls))
    procs = []
    files = []
    for on in (False, True):
        f = tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="paidb-diff-%s-%s-" % (phase, "on" if on else "off"),
                                        delete=False, dir=args.tmp)
        f.write(script(items, on, True, args.explain_every))
        f.close()
        files.append(f.name)
        errf = open(f.name + ".stderr", "w")
        procs.append((subprocess.Popen(psql_cmd(args, db) + ["-f", f.name], stdout=subprocess.PIPE,
                                       stderr=errf, text=True), errf))
    outs = []
    for p, errf in procs:
        o, _ = p.communicate()
        errf.close()
        outs.append(o)
    if not args.keep:
        for f in files:
            os.unlink(f)
            os.unlink(f + ".stderr")
    return [parse(o) for o in outs]


def show(lines, state, msg, limit=25):
    s = "    SQLSTATE %s%s\n" % (state, (" (" + msg + ")") if msg and state != "00000" else "")
    for l in lines[:limit]:
        s += "    | " + l + "\n"
    if len(lines) > limit:
        s += "    | ... (%d rows)\n" % len(lines)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PGPORT") or "5432"))
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--db", default="paidb_diff")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--queries", type=int, default=int(os.environ.get("PAIDB_DIFF_QUERIES") or "15000"))
    ap.add_argument("--only", default="", help="comma-separated query ids to run (replay)")
    # about 10-11% fire under issue 17's rules (33% before them, several
    # of those wrongly); under 5% the rewrites have stopped firing
    ap.add_argument("--min-rewritten", type=float, default=0.05,
                    help="fail when fewer than this fraction of the queries compared are rewritten")
    ap.add_argument("--explain-every", type=int, default=2,
                    help="EXPLAIN every N-th query in both sessions (the rewritten fraction's sample)")
    ap.add_argument("--show", type=int, default=25, help="failures printed in full")
    ap.add_argument("--keep", action="store_true", help="keep the session scripts and their stderr")
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args()

    seed = args.seed
    if seed is None and os.environ.get("PAIDB_DIFF_SEED"):
        seed = int(os.environ["PAIDB_DIFF_SEED"])
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2 ** 31)
    print("differential: seed %d (replay: PAIDB_DIFF_SEED=%d python3 test/differential/diff.py --port PORT --queries %d --only ID)"
          % (seed, seed, args.queries), flush=True)
    started = time.time()

    items = gen.generate(seed, args.queries)
    if args.only:
        args.explain_every = 1
        want = {int(x) for x in args.only.split(",")}
        items = [it for it in items if it.id in want]

    run_sql(args, "postgres", "DROP DATABASE IF EXISTS %s;" % args.db)
    run_sql(args, "postgres", "CREATE DATABASE %s;" % args.db)
    run_sql(args, args.db, open(os.path.join(HERE, "setup.sql")).read())

    compared = same = rewritten = explained = 0
    failures = []
    by_kind = collections.Counter()
    fail_kind = collections.Counter()
    rewritten_kind = collections.Counter()
    broken = []
    states = collections.Counter()
    fail_phase = collections.Counter()
    for phase in gen.PHASES:
        its = [it for it in items if it.phase == phase]
        if not its:
            continue
        (off, off_end), (on, on_end) = run_phase(args, args.db, phase, its)
        if not off_end or not on_end:
            broken.append(phase)
        for it in its:
            for j, m in enumerate(it.mains):
                a, b = off.get((it.id, j), {}), on.get((it.id, j), {})
                compared += 1
                by_kind[it.kind] += 1
                if "M" not in a or "M" not in b:
                    failures.append((it, j, m, a, b, "no output (session died?)"))
                    fail_kind[it.kind] += 1
                    continue
                (la, sa), (lb, sb) = a["M"], b["M"]
                states[sa] += 1
                if sa != "00000" or sb != "00000":
                    ok = sa == sb
                elif m.ordered:
                    ok = la == lb
                else:
                    ok = sorted(la) == sorted(lb)
                if m.explain and "X" in a and "X" in b:
                    explained += 1
                    if norm_plan(a["X"][0]) != norm_plan(b["X"][0]) or a["X"][1] != b["X"][1]:
                        rewritten += 1
                        rewritten_kind[it.kind] += 1
                if ok:
                    same += 1
                else:
                    failures.append((it, j, m, a, b, ""))
                    fail_kind[it.kind] += 1
                    fail_phase[it.phase] += 1

    for (it, j, m, a, b, why) in failures[:args.show]:
        print("=" * 70)
        print("DIFFERENT: query %d (%s), seed %d, phase %s (row security on: %s), role %s%s" % (
            it.id, it.kind, seed, it.phase, ", ".join(gen.PHASES[it.phase]) or "none", it.role or "postgres",
            (" -- " + why) if why else ""))
        for s in it.pre:
            print("  before: " + s.replace("{ON}", "<on|off>").replace("{OFF}", "<off|on>"))
        print("  query:  " + m.sql + ";")
        print("  replay: PAIDB_DIFF_SEED=%d python3 test/differential/diff.py --port PORT --queries %d --only %d"
              % (seed, args.queries, it.id))
        for name, r in (("rewrites off", a), ("rewrites on", b)):
            print("  %s:%s" % (name, "" if m.ordered else " (compared as a multiset)"))
            if "M" in r:
                print(show(r["M"][0], r["M"][1], r.get("T")), end="")
    if len(failures) > args.show:
        print("... and %d more differences (ids: %s)" % (
            len(failures) - args.show, ",".join(str(f[0].id) for f in failures[args.show:args.show + 200])))
    elapsed = time.time() - started
    print("=" * 70)
    if fail_kind:
        print("differences by kind: " + ", ".join("%s %d/%d" % (k, n, by_kind[k]) for k, n in fail_kind.most_common()))
    if fail_phase:
        print("differences by phase: " + ", ".join("%s %d" % kv for kv in fail_phase.most_common()))
    print("rewritten by kind: " + ", ".join("%s %d/%d" % (k, n, by_kind[k]) for k, n in rewritten_kind.most_common()))
    print("SQLSTATEs with the rewrites off: " + ", ".join("%s %d" % kv for kv in states.most_common()))
    frac = rewritten / explained if explained else 0.0
    print("differential: seed %d: %d queries compared, %d same, %d different; %d of %d EXPLAINed (%.1f%%) rewritten; %.1f s"
          % (seed, compared, same, compared - same, rewritten, explained, 100 * frac, elapsed))
    low = not args.only and frac < args.min_rewritten
    if low:
        print("differential: FAILED: only %.1f%% of the queries rewritten (at least %.0f%% expected): do the rewrites still fire?"
              % (100 * frac, 100 * args.min_rewritten))
    if broken:
        print("differential: FAILED: a session did not reach its end in phase(s) %s" % ", ".join(broken))
    # the line the suite reads
    print("DIFF-COUNTS %d %d" % (same, compared - same + (1 if low else 0) + len(broken)))
    run_sql(args, "postgres", "DROP DATABASE IF EXISTS %s;" % args.db, check=False)
    return 0 if same == compared and not low and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
