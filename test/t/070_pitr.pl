# Backup and point-in-time recovery (issue 11): pg_basebackup + WAL archive,
# then a restore to a named restore point, after which the restored
# database and the API server disagree.  Around the restore point:
#   * done    — submitted, completed and deleted before it;
#   * late    — submitted before it, running at it, completed and deleted
#               after it: the restored database has it running;
#   * new     — submitted after it, still running in the API server: the
#               restored database has never heard of it;
#   * gone    — submitted after it, completed and deleted before the restore.
# Retain mode is off, so whatever paidb took for an orphan would be deleted.
# Expected, with the watch history of the API server still holding the
# restore point's resourceVersion: the restored server (on a new timeline)
# resumes the watch, records the completion and DELETED of "late" without
# creating it again, imports "new" (not deleted; it runs on and can be
# stopped), and creates nothing twice.
use strict;
use warnings;
use Cwd ();
# archive_command and restore_command get the archive's path: make it absolute
BEGIN { $ENV{TESTDIR} //= Cwd::getcwd(); }
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake();
my $node = PaidbTest::new_node('pitr', $fake, retain_mode => 'off',
	init => { has_archiving => 1, allows_streaming => 1 });
ok(wait_for_workers($node), 'the workers run');
$node->backup('base');

my %name = map { $_ => job_name('pitr', $_) } qw(done late new gone);
my $sql_names = join(',', map { "'$_'" } sort values %name);

# ---- before the restore point
submit($node, job_request($name{done}, user => 'pitr', job => 'done', run_seconds => '0.2'));
submit($node, job_request($name{late}, user => 'pitr', job => 'late', run_seconds => '8'));
ok(poll($node, "SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$name{done}'"),
	'"done" completed and was deleted before the restore point');
ok(poll($node, "SELECT request_synced AND state = 'RUNNING' FROM paidb.framework WHERE name = '$name{late}'"),
	'"late" runs at the restore point');
query($node, "SELECT pg_create_restore_point('before_new')");
my $rp_rv = query($node, "SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'");

# ---- after it
submit($node, job_request($name{new}, user => 'pitr', job => 'new', run_seconds => 'inf'));
submit($node, job_request($name{gone}, user => 'pitr', job => 'gone', run_seconds => '0.2'));
ok(poll($node, "SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$name{late}'"),
	'"late" completed and was deleted after the restore point');
ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$name{gone}'"),
	'"gone" completed and was deleted after the restore point');
ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$name{new}'"),
	'"new" runs');
# every WAL segment up to here is archived, then the server is lost
my $last_wal = query($node, 'SELECT pg_walfile_name(pg_current_wal_lsn())');
query($node, 'SELECT pg_switch_wal()');
ok(poll($node, "SELECT last_archived_wal >= '$last_wal' FROM pg_stat_archiver"), 'the WAL is archived');
$node->stop('immediate');
my $creates_before = { map { $_ => fake_creates($fake, $name{$_}) } keys %name };
is_deeply($creates_before, { done => 1, late => 1, new => 1, gone => 1 }, 'each job was created once');

# ---- restore to the restore point
my $restored = PostgreSQL::Test::Cluster->new('restored');
$restored->init_from_backup($node, 'base', has_restoring => 1);
# first without the workers, to see what the restored database knows
$restored->append_conf('postgresql.conf', qq{
recovery_target_name = 'before_new'
recovery_target_action = 'promote'
paidb.enabled = off
});
$restored->start;
ok(poll($restored, 'SELECT NOT pg_is_in_recovery()'), 'the restored server is promoted');
is(query($restored, "SELECT count(*) FROM paidb.framework WHERE name IN ('$name{new}', '$name{gone}')"), '0',
	'the restored database does not know the jobs submitted after the restore point');
is(query($restored, "SELECT state FROM paidb.framework WHERE name = '$name{late}'"), 'RUNNING',
	'it has "late" running');
$restored->append_conf('postgresql.conf', "paidb.enabled = on\n");
my $log_offset = -s $restored->logfile // 0;
$restored->restart;
ok(wait_for_workers($restored), 'the workers run on the restored server');

ok(poll($restored, "SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$name{late}'"),
	'"late": its completion and DELETED are recorded');
ok(poll($restored, "SELECT request_synced AND state = 'RUNNING' FROM paidb.framework WHERE name = '$name{new}'"),
	'"new": imported from the API server, running');
ok(defined fake_framework($fake, $name{new}), '"new" still runs in the API server');
ok(poll($restored, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$name{gone}'"),
	'"gone": imported from the watch and recorded as deleted');
is(query($restored, "SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$name{done}'"),
	't', '"done" is still recorded as deleted');
like(log_since($restored, $log_offset), qr/moved from timeline 1 to 2, adopting the frameworks/,
	'the watcher says why it adopts');
like(log_since($restored, $log_offset), qr/resuming the watch of frameworks at resourceVersion "$rp_rv"/,
	'it resumes the watch from the restore point\'s resourceVersion');

# "new" is a job like any other: stop it
query($restored, "SELECT * FROM paidb.stop_framework('$name{new}')");
ok(poll($restored, "SELECT api_server_deleted AND state = 'STOPPED' FROM paidb.framework WHERE name = '$name{new}'"),
	'"new" can be stopped and is deleted when done');

my $creates_after = { map { $_ => fake_creates($fake, $name{$_}) } keys %name };
is_deeply($creates_after, { done => 1, late => 1, new => 1, gone => 1 }, 'no job was created again');
my @deletes = map { $_->[2] =~ /^2/ && $_->[1] =~ m{/frameworks/([a-z0-9]+)} ? $1 : () }
  fake_requests($fake, 'DELETE', qr{/frameworks/});
my %deletes;
$deletes{$_}++ for @deletes;
is_deeply({ map { $_ => $deletes{ $name{$_} } // 0 } keys %name }, { done => 1, late => 1, new => 1, gone => 1 },
	'each job was deleted once, "new" only when it was done');

$restored->stop;
done_testing();
