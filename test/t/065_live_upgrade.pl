# The upgrade 0.2 -> 0.3 with running jobs (SPEC §11: "CREATE EXTENSION and
# the upgrade create the row default; every existing job belongs to it"; the
# default cluster keeps 0.2's keys in paidb.watch_state and
# paidb.installation).  Release 0.2 (commit acb8bb9) is built from the
# checkout's history into a private PostgreSQL root (test/lib/common.sh's
# paidb_private_pg), a node of that root runs it against a kube-fake with the
# simulated controller, and while it has jobs in every condition --
#   * two completed and deleted from the API server,
#   * two RUNNING, held there by the fake (kube-fake/hold-state),
#   * one WAITING in the API server (held in AttemptCreationPending),
#   * one submitted but never created (every create of it refused, 503),
# -- the node is stopped, the current tree is installed over 0.2 in the same
# root (paidb.so and the SQL files), the node started again and ALTER
# EXTENSION paidb UPDATE (and paidb_openpai's) run, after CREATE EXTENSION
# pg_trgm, which 0.3 requires (docs/queries.md).  Expected:
#   * before the update the new library's launcher waits ("waiting for ALTER
#     EXTENSION paidb UPDATE"), starts no worker and nothing reaches the API
#     server; once the update commits it starts the default cluster's workers;
#   * from the fake's request log after the stop: no LIST of frameworks or
#     events, no create, delete or patch of a job whose framework exists; the
#     framework watch (and the event watch) resume at the resourceVersion
#     0.2 stored; no import;
#   * the job never created is created as 0.2 did it (merge patch: 404, then
#     create), now with paidb.io/placement "1";
#   * the held jobs, released, complete and are deleted as usual, each
#     created once in all, never back to WAITING;
#   * every job is in cluster 'default', status() names it, the watch keys
#     are 0.2's;
#   * the updated database's schema equals a fresh 0.3 install's (pg_dump
#     as in 034_schema_upgrade.pl) on the same node.
# If the release commit is not available (a copy without .git and no
# PAIDB_CHECKOUT), the test is skipped.
use strict;
use warnings;
use Cwd qw(abs_path getcwd);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

my $t0 = time();
my $RELEASE = 'acb8bb9';    # paidb 0.2

# ---------------------------------------------------------------- builds

# The checkout holding the release: PAIDB_CHECKOUT (test/lib/common.sh sets
# it: run-tests.sh runs the TAP tests in a copy without .git), else here.
my @git = ('git', '-c', 'safe.directory=*');
my $checkout;
for my $dir (grep { defined } $ENV{PAIDB_CHECKOUT}, getcwd())
{
	if (IPC::Run::run([ @git, '-C', $dir, 'cat-file', '-e', "$RELEASE^{commit}" ], '>', \my $out, '2>', \my $err))
	{
		$checkout = $dir;
		last;
	}
}
plan skip_all => "release 0.2 ($RELEASE) is not available (set PAIDB_CHECKOUT to a git checkout)"
  unless defined $checkout;
# The sanitizer run (test/suites/90_asan.sh sets PAIDB_TEST_SLOW) would
# build 0.2 and this tree again without sanitizers; the 0.3 library on a
# 0.2 schema runs under them in 034.
plan skip_all => 'builds its own paidb twice: not repeated in the sanitizer run'
  if ($ENV{PAIDB_TEST_SLOW} // 1) > 1;

my $tmp = abs_path(PostgreSQL::Test::Utils::tempdir);
my $root = "$tmp/root";
my $install_path = "$root/usr/lib/postgresql/15";

# Run a shell command, its output into the test's log; bail out on failure.
sub sh
{
	my ($what, $cmd) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'bash', '-c', "set -o pipefail; $cmd" ], '>', \$out, '2>', \$err);
	note("$what: $cmd") if $ENV{PAIDB_TEST_VERBOSE};
	BAIL_OUT("$what failed: $cmd\n" . substr("$out$err", -4000)) unless $ok;
	return $out;
}

# A private PostgreSQL root without any paidb in it (the copy of the system's
# holds what run-tests.sh installed there).
sh('private PostgreSQL root', "PAIDB_PG_ROOT='$root' && . test/lib/common.sh && paidb_private_pg");
sh('clean the private root', "rm -rf '$install_path'/lib/paidb* '$install_path'/lib/bitcode/paidb*"
	  . " '$root'/usr/share/postgresql/15/extension/paidb*");

# Release 0.2, and this tree (uncommitted work included: the copy run-tests.sh
# made, or this checkout), each built in its own directory.
mkdir "$tmp/src-02";
mkdir "$tmp/src-now";
sh('git archive', "@git -C '$checkout' archive $RELEASE | tar -x -C '$tmp/src-02'");
sh('copy this tree', "tar -C . --exclude=./.git --exclude=./tmp_check --exclude=./results --exclude='*.o'"
	  . " --exclude='*.so' --exclude='*.bc' -cf - . | tar -C '$tmp/src-now' -xf -");
my $bt = time();
for my $b ('src-02', 'src-now')
{
	sh("build $b", "make -C '$tmp/$b' -s -j2 with_llvm=no");
}
note(sprintf('both builds took %.1f s', time() - $bt));
sh('install 0.2', "make -C '$tmp/src-02' -s install with_llvm=no DESTDIR='$root'");
like(slurp_file("$root/usr/share/postgresql/15/extension/paidb.control"), qr/^default_version = '0\.2'/m,
	'release 0.2 is installed in the private root');

# ---------------------------------------------------------------- 0.2 running

my $fake = PaidbTest::start_fake(args => ['--log-name']);
my $node = PaidbTest::new_node('live_upgrade', $fake, install_path => $install_path, no_extension => 1);
$node->safe_psql('postgres', 'CREATE EXTENSION paidb CASCADE; CREATE EXTENSION paidb_openpai');
is($node->safe_psql('postgres', q{SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname)
    FROM pg_extension WHERE extname LIKE 'paidb%'}), 'paidb 0.2,paidb_openpai 0.2', 'a 0.2 database');
install_state_log($node);
ok(wait_for_workers($node), '0.2: the three workers run and both watchers watch');

my %job = map { $_ => job_name('upgrader', $_) } qw(done1 done2 run1 run2 pending unsent);
my @existing = map { $job{$_} } qw(done1 done2 run1 run2 pending);    # frameworks 0.2 created
my @held = map { $job{$_} } qw(run1 run2 pending unsent);

# the job 0.2 cannot create: every create of it is refused
$fake->fault(status => 503, count => -1, verb => 'create', resource => 'frameworks', name => $job{unsent});
submit($node, job_request($job{done1}, user => 'upgrader', job => 'done1', run_seconds => '0.1'));
submit($node, job_request($job{done2}, user => 'upgrader', job => 'done2', exit_codes => '1', run_seconds => '0.1'));
submit($node, job_request($job{run1}, user => 'upgrader', job => 'run1', hold_state => 'AttemptRunning'));
submit($node, job_request($job{run2}, user => 'upgrader', job => 'run2', hold_state => 'AttemptRunning',
	task_roles => [ [ 'master', 1 ], [ 'worker', 2 ] ]));
submit($node, job_request($job{pending}, user => 'upgrader', job => 'pending', hold_state => 'AttemptCreationPending'));
submit($node, job_request($job{unsent}, user => 'upgrader', job => 'unsent', hold_state => 'AttemptRunning'));

# Each job's state, sync and deletion, in a fixed order.
my $jobs_sql = q{SELECT string_agg(concat_ws(' ', j.k, f.state, f.request_synced, f.api_server_deleted), ', '
    ORDER BY j.k) FROM (VALUES } . join(', ', map { "('$_', '$job{$_}')" } sort keys %job)
  . q{) j (k, name) LEFT JOIN paidb.framework f USING (name)};
ok(poll($node, $jobs_sql,
		'done1 SUCCEEDED t t, done2 FAILED t t, pending WAITING t f, run1 RUNNING t f, run2 RUNNING t f, unsent WAITING f f'),
	'0.2: two jobs completed and deleted, two running, one waiting in the API server, one not created');
# How 0.2 went about the job it could not create, from the request log (its
# first try was a create alone, a job never seen; each retry a merge patch,
# 404, then the create): from the first merge patch on.
sub unsent_retry_02
{
	my @r = map { "$_->{method} $_->{code}" } grep { about($_, $job{unsent}) } requests_since(0);
	shift @r while @r && $r[0] !~ /^PATCH/;
	return @r;
}
# (a retry in the log, whose first request 0.3's must match: the fake
# writes a request's line after its answer, so the counters lead the log;
# a refused create's line does not always carry the object's name, so only
# the merge patch that opens a retry is compared)
ok(wait_until(sub { my @r = unsent_retry_02(); @r >= 1 }), '0.2 tried to create the refused job, and retried');
is(fake_creates($fake, $job{unsent}), 0, 'and could not');
# the held jobs' frameworks stand still in the fake
for my $k (qw(run1 run2 pending))
{
	my $f = fake_framework($fake, $job{$k});
	ok($f && $f->{status}{state} eq ($k eq 'pending' ? 'AttemptCreationPending' : 'AttemptRunning'),
		"0.2: $k is held in the API server");
}
my %uid_before = map { $_ => fake_framework($fake, $_)->{metadata}{uid} } map { $job{$_} } qw(run1 run2 pending);
# the watcher has confirmed everything it will: the stored position has
# passed every write of the fake so far (bookmarks every second)
my $fake_rv = $fake->resource_version;
ok(poll($node, "SELECT resource_version::bigint >= $fake_rv FROM paidb.watch_state WHERE watcher = 'frameworks'"),
	'0.2: the framework watch position has caught up with the API server');
my $installation_before = query($node,
	q{SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM paidb.installation WHERE key <> 'watch_timeline'});
like($installation_before, qr/initial_import_done=\w+/, '0.2 recorded its first-run import');
my $listed_before = query($node, q{SELECT string_agg(watcher || ' ' || listed_at, ',' ORDER BY watcher) FROM paidb.watch_state});
# (the checks below would see a LIST: 0.2's own are recognised)
is(scalar(grep { is_list($_) } requests_since(0)), 2, '0.2 listed frameworks and events once each');

my @unsent_02 = unsent_retry_02();
# The jobs' rows as 0.2 left them (what the update must keep).
# (f.snapshot: the column in 0.2, the function paidb.snapshot(f) from 0.3)
my $rows_sql = q{SET search_path = paidb, pg_catalog;
  SELECT md5(string_agg(concat_ws(' ', name, state, sub_state, request_generation, request_synced,
    submission_time, retries, api_server_deleted, f.snapshot::text), ',' ORDER BY name)) FROM paidb.framework f WHERE name IN ('}
  . join("', '", @existing) . q{')};
my $rows_before = query($node, $rows_sql);

# ---------------------------------------------------------------- stop, install 0.3

$node->stop;
ok(wait_until(sub { fake_watches($fake, 'frameworks') + fake_watches($fake, 'events') == 0 }),
	'the stopped node\'s watches are closed');
# and are all in the request log (a line is written once a request ended)
ok(wait_until(sub { scalar(grep { is_watch($_, 'frameworks') || is_watch($_, 'events') } requests_since(0))
			  == fake_counter($fake, 'watch frameworks') + fake_counter($fake, 'watch events') }),
	'the request log has every watch of 0.2');
my $mark = -s $fake->{request_log};
$fake->clear_faults;    # 0.3 may create the refused job
sh('install this tree', "make -C '$tmp/src-now' -s install with_llvm=no DESTDIR='$root'");
my ($new_version) = slurp_file("$root/usr/share/postgresql/15/extension/paidb.control") =~ /^default_version = '([^']+)'/m;
is($new_version, '0.3', 'this tree (0.3) is installed over 0.2');

my $log_offset = -s $node->logfile;
$node->start;

# The new library with the database still at 0.2: the launcher waits.
ok(poll($node, q{SELECT state FROM paidb.status() WHERE worker = 'launcher'},
		'waiting for ALTER EXTENSION paidb UPDATE (no paidb.cluster)'),
	'before the update the launcher waits for ALTER EXTENSION paidb UPDATE (status() says so)');
is(query($node, q{SELECT extversion FROM pg_extension WHERE extname = 'paidb'}), '0.2', 'the database is still at 0.2');
# a barrier: the launcher has looked at least twice since it said so
my $seen = query($node, q{SELECT last_activity FROM paidb.status() WHERE worker = 'launcher'});
ok(poll($node, qq{SELECT last_activity > '$seen' FROM paidb.status() WHERE worker = 'launcher'}),
	'the launcher keeps waiting');
is(query($node, q{SELECT count(*) FROM paidb.status() WHERE worker IN ('sync', 'framework watcher', 'event watcher')
    AND pid IS NOT NULL}), '0', 'and has started no worker');
is(query($node, q{SELECT count(*) FROM pg_stat_activity WHERE backend_type ~ '^paidb (sync|framework watcher|event watcher)'}),
	'0', 'no paidb sync or watcher process runs');
is(join("\n", map { "$_->{method} $_->{target}" } requests_since($mark)), '',
	'nothing reached the API server before the update');
# where 0.2 left its watches (nothing writes them while the workers wait)
my %stored_rv = split /[|\n]/, query($node, q{SELECT watcher, resource_version FROM paidb.watch_state ORDER BY 1});
like($stored_rv{frameworks} // '', qr/^\d+$/, "0.2 stored the framework watch position ($stored_rv{frameworks})");
like($stored_rv{events} // '', qr/^\d+$/, "0.2 stored the event watch position ($stored_rv{events})");

# ---------------------------------------------------------------- the update

# (0.3 requires pg_trgm, which 0.2 did not and an update never creates:
# docs/queries.md)
is($node->psql('postgres', 'CREATE EXTENSION IF NOT EXISTS pg_trgm; ALTER EXTENSION paidb UPDATE;'
		  . ' ALTER EXTENSION paidb_openpai UPDATE', on_error_stop => 1), 0,
	'CREATE EXTENSION pg_trgm; ALTER EXTENSION paidb UPDATE; ALTER EXTENSION paidb_openpai UPDATE');
is(query($node, q{SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname)
    FROM pg_extension WHERE extname LIKE 'paidb%'}), 'paidb 0.3,paidb_openpai 0.3', 'both at 0.3');
ok(wait_for_workers($node), 'after the update the default cluster\'s three workers run and both watchers watch');
ok(poll($node, q{SELECT state FROM paidb.status() WHERE worker = 'launcher'}, 'running'), 'the launcher runs');
like(log_since($node, $log_offset), qr/paidb launcher: starting the workers of cluster "default"/,
	'the launcher started the default cluster\'s workers');

# The job 0.2 could not create is created now, as 0.2 went about it.
ok(poll($node, "SELECT concat_ws(' ', state, request_synced) FROM paidb.framework WHERE name = '$job{unsent}'", 'RUNNING t'),
	'the job 0.2 could not create is created and RUNNING');
my @unsent_03 = map { "$_->{method} $_->{code}" } grep { about($_, $job{unsent}) } requests_since($mark);
is($unsent_03[0] // '', $unsent_02[0] // 'none',
	"0.3 goes about it as 0.2's retry did: a merge patch first (0.2: @unsent_02; 0.3: @unsent_03)");
is("@unsent_03[0, 1]", 'PATCH 404 POST 201', 'a merge patch (404), then the create');
is(fake_creates($fake, $job{unsent}), 1, 'created once');
is(fake_framework($fake, $job{unsent})->{metadata}{labels}{'paidb.io/placement'}, '1',
	'it carries paidb.io/placement "1"');

# A barrier before "nothing happened": the sync worker has run for two
# resync intervals (its safety-net rescans) since the update.
ok(poll($node, q{SELECT now() - started_at > interval '7 s' FROM paidb.status() WHERE worker = 'sync'}),
	'the sync worker has had two safety-net rescans');
ok(poll($node, "SELECT resource_version::bigint >= " . $fake->resource_version
		  . " FROM paidb.watch_state WHERE watcher = 'frameworks'"),
	'the framework watcher has passed every write of the API server');

# The watches end now so that the request log has their URLs (a line is
# written when a request ends); the watchers resume where they stood.
$fake->cut_watches('end');
ok(wait_until(sub { (grep { is_watch($_, 'frameworks') } requests_since($mark))
			  && (grep { is_watch($_, 'events') } requests_since($mark)) }),
	'the request log has the first watches after the update');
my @after = requests_since($mark);
my ($fw_watch) = grep { is_watch($_, 'frameworks') } @after;
my ($ev_watch) = grep { is_watch($_, 'events') } @after;
is(query_param($fw_watch->{target}, 'resourceVersion'), $stored_rv{frameworks},
	"the framework watch resumed at 0.2's resourceVersion ($fw_watch->{target})");
is(query_param($ev_watch->{target}, 'resourceVersion'), $stored_rv{events},
	"the event watch resumed at 0.2's resourceVersion ($ev_watch->{target})");
is(join("\n", map { "$_->{method} $_->{target} $_->{code}" } grep { is_list($_) } @after), '',
	'no LIST of frameworks or events after the update');
is(join("\n", map { "$_->{method} $_->{target} $_->{code}" }
		  grep { my $r = $_; $r->{method} ne 'GET' && grep { about($r, $_) } @existing } @after), '',
	'no create, patch or delete of a job whose framework 0.2 created');
is(join("\n", map { "$_->{method} $_->{target} $_->{code}" } grep { $_->{method} eq 'DELETE' } @after), '',
	'no DELETE at all');
like(log_since($node, $log_offset), qr/resuming the watch of frameworks at resourceVersion "\Q$stored_rv{frameworks}\E"/,
	'the server log says the framework watcher resumed');
unlike(log_since($node, $log_offset), qr/importing its|listing \S+ again|moved from timeline|too old/, 'and nothing about importing or listing again');
is(query($node, q{SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM paidb.installation WHERE key <> 'watch_timeline'}),
	$installation_before, 'paidb.installation has 0.2\'s keys and values (no import of its own)');
is(query($node, q{SELECT string_agg(watcher || ' ' || listed_at, ',' ORDER BY watcher) FROM paidb.watch_state}),
	$listed_before, 'paidb.watch_state has 0.2\'s keys, and no LIST since 0.2\'s');
for my $k (qw(run1 run2 pending))
{
	is(fake_framework($fake, $job{$k})->{metadata}{uid}, $uid_before{ $job{$k} }, "$k is the framework 0.2 created");
}
is(query($node, $rows_sql), $rows_before, 'the rows of the jobs 0.2 created are unchanged');
is(query($node, $jobs_sql), 'done1 SUCCEEDED t t, done2 FAILED t t, pending WAITING t f, run1 RUNNING t f, run2 RUNNING t f, unsent RUNNING t f',
	'the jobs are as 0.2 left them');

# ---------------------------------------------------------------- clusters

is(query($node, q{SELECT string_agg(cluster || ' ' || n, ',') FROM (SELECT cluster, count(*) AS n FROM paidb.framework GROUP BY 1) c}),
	'default 6', 'every job belongs to cluster default');
is(query($node, q{SELECT string_agg(name || ' ' || state || ' ' || concat_ws(',', api_server, namespace, token_file, ca_file, retain_mode), ',')
    FROM paidb.cluster}), 'default active ', 'paidb.cluster is the row default, all NULL');
is(query($node, q{SELECT string_agg(worker || ': ' || coalesce(cluster, '-'), ', ' ORDER BY worker) FROM paidb.status()}),
	'event watcher: default, framework watcher: default, launcher: -, retention: -, sync: default',
	'status(): the workers of cluster default');
is(query($node, q{SELECT cluster || ' ' || workers FROM paidb.cluster_status}), 'default 3',
	'cluster_status: default with its three workers');

# ---------------------------------------------------------------- the held jobs complete

for my $name (@held)
{
	is(query($node, qq{SELECT changed FROM paidb.patch_framework_request('$name',
	    '{"metadata": {"annotations": {"kube-fake/hold-state": "released"}}}')}), 't', "released $name");
}
ok(poll($node, q{SELECT string_agg(concat_ws(' ', state, api_server_deleted), ',' ORDER BY name) FROM paidb.framework WHERE name IN ('}
		  . join("', '", @held) . q{')}, join(',', ('SUCCEEDED t') x 4)),
	'the released jobs complete (SUCCEEDED) and are deleted from the API server');
for my $k (qw(run1 run2 pending unsent))
{
	is(fake_creates($fake, $job{$k}), 1, "$k was created once in all");
	my @deletes = grep { $_->{method} eq 'DELETE' && about($_, $job{$k}) } requests_since($mark);
	ok(@deletes >= 1, "$k was deleted after it completed");
	is(state_path($node, $job{$k}), 'WAITING RUNNING SUCCEEDED', "$k: WAITING -> RUNNING -> SUCCEEDED");
}
is(join("\n", map { "$_->{method} $_->{target} $_->{code}" }
		  grep { my $r = $_; grep { about($r, $job{$_}) } qw(done1 done2) } requests_since($mark)), '',
	'nothing was sent about the jobs that had completed under 0.2');
is(join("\n", map { "$_->{method} $_->{target} $_->{code}" } grep { is_list($_) } requests_since($mark)), '',
	'still no LIST');

# ---------------------------------------------------------------- 0.2's snapshots

# The update left the snapshots where 0.2 stored them; the retention worker
# packs them in batches and then drops 0.2's columns, by itself.
ok(poll($node, q{SELECT count(*) FROM pg_attribute WHERE attrelid IN ('paidb.framework'::regclass,
    'paidb.framework_history'::regclass) AND attname = 'snapshot_0_2' AND NOT attisdropped}, '0'),
	'the retention worker converted 0.2\'s snapshots and dropped its columns');
like(slurp_file($node->logfile), qr/paidb converted the \d+ snapshots stored by paidb 0\.2 in [\d.]+ s/,
	'and logged it');
is(query($node, q{SELECT count(*) FROM paidb.framework WHERE snapshot_packed IS NULL}), '0', 'every row is packed');

# ---------------------------------------------------------------- schema

# the test's own trigger and table are not part of the schema
$node->safe_psql('postgres', 'DROP FUNCTION public.log_state() CASCADE; DROP TABLE public.state_log');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION paidb CASCADE; CREATE EXTENSION paidb_openpai');

# pg_dump --schema-only, normalised as in 034_schema_upgrade.pl
sub schema_dump
{
	my ($db) = @_;
	my ($stdout, $stderr);
	IPC::Run::run([ $node->installed_command('pg_dump'), '--schema-only', '--binary-upgrade', '-d', $node->connstr($db) ],
		'>', \$stdout, '2>', \$stderr)
	  or die "pg_dump $db failed: $stderr";
	return join("\n", grep { !/^--/ && !/binary_upgrade_set_next|binary_upgrade_set_record_init_privs/
		  && !/relfrozenxid|^WHERE oid = |^UPDATE pg_catalog\.pg_class$/
		  && !/^\\(un)?restrict / && !/DATABASE|^\\connect/ && $_ ne '' } split /\n/, $stdout);
}
my ($fresh, $upgraded) = (schema_dump('fresh'), schema_dump('postgres'));
ok(length($fresh) > 1000, 'the fresh schema dump is not empty');
ok($upgraded eq $fresh, 'the database updated with jobs running equals a fresh 0.3 install (paidb and paidb_openpai)')
  or do {
	my %f = map { $_ => 1 } split /\n/, $fresh;
	my %u = map { $_ => 1 } split /\n/, $upgraded;
	diag("only in the fresh install:\n  " . join("\n  ", grep { !$u{$_} } split /\n/, $fresh)
		  . "\nonly in the updated database:\n  " . join("\n  ", grep { !$f{$_} } split /\n/, $upgraded));
  };

is(join("\n", crash_lines($node)), '', 'no paidb process crashed');
note(sprintf('065_live_upgrade took %.1f s', time() - $t0));
$node->stop;
done_testing();

# ---------------------------------------------------------------- helpers

# The fake's API requests logged from byte $offset on: [{method, target,
# code, name}] (name: of a create, from --log-name).
sub requests_since
{
	my ($offset) = @_;
	my @out;
	open(my $fh, '<', $fake->{request_log}) or return ();
	seek($fh, $offset, 0);
	while (my $line = <$fh>)
	{
		my (undef, $m, $t, $code, undef, @rest) = split ' ', $line;
		next unless defined $code;
		next if $t =~ m{^/_fake/};    # the test's own admin calls
		my ($name) = map { /^name=(.*)$/ ? $1 : () } @rest;
		push @out, { method => $m, target => $t, code => $code, name => $name };
	}
	close($fh);
	return @out;
}

# Whether a request is about the framework $name (its path, or a create's body).
sub about
{
	my ($r, $name) = @_;
	return ($r->{name} // '') eq $name || $r->{target} =~ m{/frameworks/\Q$name\E(?:[/?]|$)};
}

# A query parameter of a request target (decoded), or undef.
sub query_param
{
	my ($target, $key) = @_;
	my (undef, $q) = split /\?/, $target // '', 2;
	for my $kv (split /&/, $q // '')
	{
		my ($k, $v) = split /=/, $kv, 2;
		next unless $k eq $key;
		$v //= '';
		$v =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/ge;
		return $v;
	}
	return undef;
}

# A GET of the frameworks or events collection (not one object).
sub collection_get
{
	my ($r, $resource) = @_;
	return $r->{method} eq 'GET' && $r->{target} =~ m{/\Q$resource\E(?:\?|$)};
}

# A watch of a collection.
sub is_watch
{
	my ($r, $resource) = @_;
	return collection_get($r, $resource) && (query_param($r->{target}, 'watch') // '') =~ /^(true|1)$/;
}

# A LIST of frameworks or events: a GET of the collection that is no watch.
sub is_list
{
	my ($r) = @_;
	return grep { collection_get($r, $_) && !is_watch($r, $_) } 'frameworks', 'events';
}
